/*
 * model.c — the model interface's common half: where the parameters of one
 * device live, how they start, and how a whole-model sum is made of shards.
 *
 * A device holds one pipeline stage of a model (a contiguous range of its
 * blocks, plus whatever comes before the first block on stage 0 and after
 * the last on the last stage) and, under tensor parallelism, one shard of
 * each split matrix.  The model's init lists them (ptdp_model_add_param);
 * this file gives them memory:
 *
 *   params[0]     params[1]  …  params[n-1]          (backward order)
 *   ┌──────────┬───────────┬───┬────────────┐
 *   │  out.w   │  out.b    │ … │   in.b     │  flat_w  (arena, "params")
 *   └──────────┴───────────┴───┴────────────┘
 *   ┌──────────┬───────────┬───┬────────────┐
 *   │ d out.w  │ d out.b   │ … │  d in.b    │  flat_g  (arena, "grads")
 *   └──────────┴───────────┴───┴────────────┘
 *
 * Each ptdp_param is a view into both.  The order is the order the backward
 * produces gradients, so data parallelism can all-reduce the first buckets
 * while later ones are still being computed, and ZeRO can cut the buffers
 * into chunks without caring where one tensor ends.
 *
 * An interleaved pipeline (schedule.h) gives a device v chunks: stage s of
 * p holds the chunks s, s + p, …, s + (v-1) p of the p v the blocks are cut
 * into.  Each chunk is set up by the model's own init, as if it were a
 * stage of a pipeline of p v, and the device keeps ONE set of buffers:
 *
 *   device params[]   [ chunk v-1's | … | chunk 1's | chunk 0's ]
 *   chunk c params    a window of it (the same structs, not copies)
 *
 * so DP buckets, ZeRO's chunks and views, the optimizer, checkpoints and
 * the gradient norm see one device with one flat buffer, and whatever
 * re-points a view (ZeRO-2's bucket) re-points it for the chunk too.
 *
 * The mesh's pp_layout (pp_layout.h) says where the chunks lie.  Under a
 * V (DualPipeV) v = 2 and stage s holds the chunks s
 * and 2p - 1 - s: stage 0 holds the model's first and last, and with them
 * both copies of a tied embedding, summed on the device.
 *
 * Under two copies (DualPipe) v = 2 and stage s holds stage s of one
 * copy of the model cut into p stages and stage p - 1 - s of another: the
 * device holds twice the parameters, and every gradient is summed with
 * the other copy's on stage p - 1 - s (the mirror group) before the step,
 * so both copies step alike and stay equal:
 *
 *   stage:      0     1     2     3        mirror groups {0 3} {1 2}
 *   chunk 0   [ 0 ] [ 1 ] [ 2 ] [ 3 ]      the down copy's stages
 *   chunk 1   [ 3 ] [ 2 ] [ 1 ] [ 0 ]      the up copy's
 *
 * Initialisation draws element (i, j) of the WHOLE tensor from the stream
 * named after the parameter at index i * cols + j, so a shard starting at
 * (row0, col0) draws exactly the numbers the single device drew there: the
 * "model-parallel RNG" of Megatron-LM, with no generator state to split.
 */
#include "ptdp/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/comm.h"
#include "ptdp/counters.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/optim.h"
#include "ptdp/rng.h"
#include "ptdp/schedule.h"
#include "parallel/model_impl.h"
#include "parallel/schedule_impl.h"

void ptdp_stage_range(int layers, int pp, const int *stage_layers, int stage, int *begin, int *count)
{
    int b = 0;
    for (int s = 0; s <= stage; s++) {
        int n = stage_layers ? stage_layers[s] : layers / pp + (s < layers % pp ? 1 : 0);
        if (s == stage) {
            *begin = b;
            *count = n;
        }
        b += n;
    }
}

/* ------------------------------------------------ describing parameters */

int ptdp_model_reserve_params(ptdp_device *dev, ptdp_model *m, int n)
{
    if (m->device != NULL) {
        /* A chunk describes its parameters straight into its device's
         * params[], after the chunks set up before it: the device holds at
         * most the whole model's tensors and one tied copy, which is what
         * ptdp_model_setup_v reserved, so no room asked for is missing. */
        ptdp_model *d = m->device;
        int room = d->params_capacity - d->nparams;
        m->params = d->params + d->nparams;
        m->params_capacity = n < room ? n : room;
        return PTDP_OK;
    }
    ptdp_param *p = realloc(m->params, (size_t)(n > 0 ? n : 1) * sizeof *p);
    if (p == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory describing the model", dev->rank);
    m->params = p;
    m->params_capacity = n;
    return PTDP_OK;
}

ptdp_param *ptdp_model_add_param(ptdp_device *dev, ptdp_model *m, const char *name,
                                 int full_rows, int full_cols, bool is_bias, ptdp_shard shard,
                                 int row0, int col0, int rows, int cols,
                                 ptdp_init init, double init_std)
{
    if (m->nparams >= m->params_capacity) {
        ptdp_fail(dev, PTDP_EINVAL, "model %s: parameter %s is one more than the %d reserved",
                  m->ops->name, name, m->params_capacity);
        return NULL;
    }
    ptdp_param *p = &m->params[m->nparams++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->full_rows = full_rows;
    p->full_cols = full_cols;
    p->is_bias = is_bias;
    p->shard = shard;
    p->row0 = row0;
    p->col0 = col0;
    p->parts = 1;
    p->sum = (ptdp_grad_sum){ .replicas = PTDP_GROUP_DP };   /* the model may declare more */
    p->init = init;
    p->init_std = init_std;
    p->offset = m->numel;
    if (m->nunits == 0)
        m->nunits = 1;
    p->unit = m->nunits - 1;
    p->subunit = m->subunit_open ? m->nsubunits - 1 : -1;
    p->w = (ptdp_tensor){ .rows = rows, .cols = cols, .stride = cols };
    snprintf(p->w.name, sizeof p->w.name, "%s", name);
    p->g = p->w;
    m->numel += (size_t)rows * (size_t)cols;
    return p;
}

ptdp_param *ptdp_model_linear_weight(ptdp_param *p)
{
    if (p != NULL)
        p->linear_weight = true;
    return p;
}

/* Give every described parameter its memory and its first value. */
static int materialise(ptdp_device *dev, ptdp_model *m)
{
    m->flat_w = ptdp_alloc(dev, m->numel * sizeof(ptdp_real), PTDP_MEM_PARAMS, "parameters");
    m->flat_g = m->flat_w ? ptdp_alloc(dev, m->numel * sizeof(ptdp_real), PTDP_MEM_GRADS, "gradients") : NULL;
    if (m->flat_g == NULL)
        return PTDP_ENOMEM;
    for (int i = 0; i < m->nparams; i++) {
        ptdp_param *p = &m->params[i];
        p->w.data = m->flat_w + p->offset;
        p->g.data = m->flat_g + p->offset;
        if (p->init == PTDP_INIT_ZEROS)
            continue;   /* the arena zero-fills */
        if (p->init == PTDP_INIT_ONES) {
            ptdp_tensor_fill(p->w, 1);
            continue;
        }
        uint64_t key = ptdp_rng_key(m->seed, p->name);
        for (int r = 0; r < p->w.rows; r++)
            for (int c = 0; c < p->w.cols; c++) {
                *ptdp_at(p->w, r, c) = (ptdp_real)(p->init_std * ptdp_rng_normal(key, ptdp_param_whole_index(p, r, c)));
            }
    }
    return PTDP_OK;
}

/* Where this device's chunks lie: the mesh's shape with the model's v (a
 * ring's v is the model's: a lesson may build an interleaved model on a
 * mesh it leaves at one chunk). */
static ptdp_pp_layout layout_of(const ptdp_model *m)
{
    const ptdp_model *d = m->device != NULL ? m->device : m;
    return ptdp_pp_layout_make(d->mesh->pp_layout.shape, d->mesh->pp, d->virtual_stages);
}

/* Does the device hold two copies of the model (DualPipe's mirror group)? */
static bool two_copies(const ptdp_model *m)
{
    const ptdp_pp_layout l = layout_of(m);
    return ptdp_pp_layout_copies(&l) == 2;
}

/* Does one device hold both ends of the model (a V's stage 0)? */
static bool ends_together(const ptdp_model *m)
{
    const ptdp_pp_layout l = layout_of(m);
    return ptdp_pp_layout_ends_together(&l);
}

/* One chunk of a device's v: the model chunks are the stages of a pipeline of
 * p v, so the model's own init sets it up unchanged, as the stage it is.
 * Under DualPipe each chunk is a stage of a pipeline of p (one copy's), and
 * every parameter is summed over the mirror group too: the other copy of
 * the same stage lies on stage p - 1 - s. */
static int setup_chunk(ptdp_device *dev, ptdp_model *d, int c, const int *stage_layers)
{
    const ptdp_pp_layout l = layout_of(d);
    const int v = d->virtual_stages, nchunks = ptdp_pp_layout_chunks(&l);
    const int g = ptdp_pp_layout_in_copy(&l, d->mesh->pp_rank, c);
    ptdp_model *k = &d->chunks[c];
    int count = 0;
    k->ops = d->ops;
    k->cfg = d->cfg;
    k->mesh = d->mesh;
    k->seed = d->seed;
    k->dropout = d->dropout;
    k->device = d;
    k->chunk = c;
    k->virtual_stages = v;
    ptdp_stage_range(d->cfg.layers, nchunks, stage_layers, g, &k->layer_begin, &count);
    k->layer_end = k->layer_begin + count;
    k->first_stage = g == 0;
    k->last_stage = g == nchunks - 1;
    int rc = d->ops->init(dev, k);
    /* Its parameters sit in the device's flat buffers after the chunks
     * before it: offsets from the chunk's own 0 become the device's. */
    for (int i = 0; i < k->nparams; i++) {
        k->params[i].offset += d->numel;
        if (ptdp_pp_layout_copies(&l) == 2)
            k->params[i].sum.also |= PTDP_GROUP_BIT(PTDP_GROUP_MIRROR);
    }
    d->nparams += k->nparams;
    d->numel += k->numel;
    return rc;
}

/* The device of an interleaved pipeline: v chunks, one set of buffers. */
static int setup_chunks(ptdp_device *dev, ptdp_model *m, const int *stage_layers)
{
    const int v = m->virtual_stages;
    const ptdp_pp_layout l = layout_of(m);
    /* holds the model's chunk 0 / its last (a copy's; a V's stage 0 both) */
    m->first_stage = ptdp_pp_layout_holds_first(&l, m->mesh->pp_rank);
    m->last_stage = ptdp_pp_layout_holds_last(&l, m->mesh->pp_rank);
    m->chunks = calloc((size_t)v, sizeof *m->chunks);
    if (m->chunks == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory describing the model", dev->rank);
    /* Room for every tensor of the whole model and a tied copy: more than
     * any device's share (ptdp_model_reserve_params hands it out). */
    int rc = ptdp_model_reserve_params(dev, m, m->ops->list_params(&m->cfg, NULL) + 1);
    /* Backward order: chunk v-1 holds the later ones of the model. */
    for (int c = v - 1; rc == 0 && c >= 0; c--)
        rc = setup_chunk(dev, m, c, stage_layers);
    if (rc == 0) {   /* per sample, the same on every chunk */
        m->input_cols = m->chunks[0].input_cols;
        m->input_tokens = m->chunks[0].input_tokens;
        m->label_cols = m->chunks[0].label_cols;
        m->boundary_cols = m->chunks[0].boundary_cols;
    }
    return rc;
}

int ptdp_model_setup_v(ptdp_device *dev, ptdp_model *m, const ptdp_model_ops *ops,
                       const ptdp_model_config *cfg, const ptdp_mesh *mesh,
                       const int *stage_layers, int virtual_stages, uint64_t seed, double dropout)
{
    memset(m, 0, sizeof *m);
    m->ops = ops;
    m->cfg = *cfg;
    m->mesh = mesh;
    m->seed = seed;
    m->dropout = dropout;
    m->virtual_stages = virtual_stages > 1 ? virtual_stages : 1;
    char msg[PTDP_MSG_MAX];
    if (ops->check(cfg, mesh->tp, mesh->pp, msg, sizeof msg) != 0)
        return ptdp_fail(dev, PTDP_EINVAL, "%s", msg);
    if (m->virtual_stages > 1 && !two_copies(m) && (long)mesh->pp * m->virtual_stages > cfg->layers)
        return ptdp_fail(dev, PTDP_EINVAL, "--layers %d cannot be cut into %d pieces for --pp %d "
                         "--virtual-stages %d: need --layers >= %d", cfg->layers, mesh->pp * m->virtual_stages,
                         mesh->pp, m->virtual_stages, mesh->pp * m->virtual_stages);
    /* The groups the model's parameters may declare, before any of them
     * exists: a split of the world, so every device builds them here.
     * (The mesh is the caller's; a model only reads it, hence const in
     * the model — building a group it asked for is the one write.) */
    int rc = PTDP_OK;
    if (ops->groups & PTDP_GROUP_BIT(PTDP_GROUP_TP_SHARE))
        ((ptdp_mesh *)mesh)->tp_share = ops->tp_share != NULL ? ops->tp_share(cfg, mesh->tp) : 1;
    for (int g = 0; rc == 0 && g < PTDP_GROUP_COUNT; g++)
        if (ops->groups & PTDP_GROUP_BIT(g))
            rc = ptdp_mesh_add_group(dev, (ptdp_mesh *)mesh, (ptdp_group)g);
    if (rc == 0 && two_copies(m))   /* every parameter's other copy (setup_chunk) */
        rc = ptdp_mesh_add_group(dev, (ptdp_mesh *)mesh, PTDP_GROUP_MIRROR);
    if (rc != 0)
        return rc;
    if (m->virtual_stages > 1) {
        rc = setup_chunks(dev, m, stage_layers);
    } else {
        int count = 0;
        ptdp_stage_range(cfg->layers, mesh->pp, stage_layers, mesh->pp_rank, &m->layer_begin, &count);
        m->layer_end = m->layer_begin + count;
        m->first_stage = mesh->pp_rank == 0;
        m->last_stage = mesh->pp_rank == mesh->pp - 1;
        rc = ops->init(dev, m);
    }
    if (rc == 0)
        rc = materialise(dev, m);
    if (rc != 0)
        ptdp_model_free(dev, m);
    return rc;
}

ptdp_model *ptdp_model_chunk(ptdp_model *m, int c)
{
    return m->chunks != NULL ? &m->chunks[c] : m;
}

int ptdp_model_after_step(ptdp_device *dev, ptdp_model *m)
{
    int rc = PTDP_OK;
    const int v = m->chunks != NULL ? m->virtual_stages : 1;
    for (int c = 0; rc == 0 && m->ops->after_step != NULL && c < v; c++)
        rc = m->ops->after_step(dev, ptdp_model_chunk(m, c));
    return rc;
}

void ptdp_model_free(ptdp_device *dev, ptdp_model *m)
{
    if (m->chunks != NULL) {
        for (int c = 0; c < m->virtual_stages; c++)
            if (m->chunks[c].ops != NULL && m->chunks[c].ops->free != NULL)
                m->chunks[c].ops->free(dev, &m->chunks[c]);
        free(m->chunks);
        m->chunks = NULL;
    } else if (m->ops != NULL && m->ops->free != NULL) {
        m->ops->free(dev, m);
    }
    ptdp_free(dev, m->flat_g);
    ptdp_free(dev, m->flat_w);
    ptdp_free(dev, m->flat_g16);
    ptdp_free(dev, m->flat_w16);
    m->flat_w16 = m->flat_g16 = NULL;
    free(m->params);
    m->params = NULL;
    m->nparams = m->params_capacity = 0;
    m->flat_w = m->flat_g = NULL;
}

size_t ptdp_param_whole_index(const ptdp_param *p, int r, int c)
{
    size_t wr = (size_t)(p->row0 + r), wc = (size_t)(p->col0 + c);
    if (p->parts > 1 && p->shard != PTDP_SHARD_NONE) {
        /* the split dimension: columns for a bias (1 x n) or a column split */
        if (p->is_bias || p->shard == PTDP_SHARD_COLS) {
            int per = p->w.cols / p->parts;
            wc = (size_t)(c / per) * (size_t)(p->full_cols / p->parts) + (size_t)(p->col0 + c % per);
        } else {
            int per = p->w.rows / p->parts;
            wr = (size_t)(r / per) * (size_t)(p->full_rows / p->parts) + (size_t)(p->row0 + r % per);
        }
    }
    return wr * (size_t)p->full_cols + wc;
}

ptdp_param *ptdp_model_find(ptdp_model *m, const char *name)
{
    for (int i = 0; i < m->nparams; i++)
        if (strcmp(m->params[i].name, name) == 0)
            return &m->params[i];
    return NULL;
}

/* ------------------------------------------------------ one micro-batch */

int ptdp_batch_load(ptdp_device *dev, ptdp_model *m, ptdp_batch *b)
{
    b->x = (ptdp_tensor){ 0 };
    b->tokens = b->labels = NULL;
    int rc;
    if (m->first_stage && m->input_tokens) {
        size_t n = (size_t)b->rows * (size_t)m->input_cols;
        b->tokens = ptdp_alloc(dev, (n > 0 ? n : 1) * sizeof(int64_t), PTDP_MEM_OTHER, "data.tokens");
        if (b->tokens == NULL)
            return PTDP_ENOMEM;
    } else if (m->first_stage &&
               (rc = ptdp_tensor_alloc(dev, &b->x, "data.x", PTDP_MEM_OTHER, b->rows, m->input_cols)) != 0) {
        return rc;
    }
    if (m->last_stage) {
        size_t n = (size_t)b->rows * (size_t)m->label_cols;
        b->labels = ptdp_alloc(dev, (n > 0 ? n : 1) * sizeof(int64_t), PTDP_MEM_OTHER, "data.y");
        if (b->labels == NULL)
            return PTDP_ENOMEM;
    }
    if (m->first_stage || m->last_stage)
        m->ops->fill_batch(m, b);
    return PTDP_OK;
}

int ptdp_batch_boundary_cols(const ptdp_model *m, const ptdp_batch *b)
{
    if (b->tlen <= 0 || m->input_cols <= 0)
        return m->boundary_cols;
    return (int)((long long)m->boundary_cols * b->tlen / m->input_cols);
}

void ptdp_acts_begin(ptdp_acts *acts, const ptdp_batch *b, long step, bool recompute)
{
    memset(acts, 0, sizeof *acts);
    acts->rows = b->rows;
    acts->first_sample = b->first;
    acts->step = step;
    acts->labels = b->labels;
    acts->recompute = recompute;
    acts->alive = true;
    acts->t0 = b->t0;
    acts->tlen = b->tlen;
}

void ptdp_batch_free(ptdp_device *dev, ptdp_batch *b)
{
    ptdp_tensor_free(dev, &b->x);
    ptdp_free(dev, b->tokens);
    ptdp_free(dev, b->labels);
    b->tokens = b->labels = NULL;
}

int ptdp_model_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_batch *b,
                       ptdp_tensor input, long step, bool recompute, ptdp_tensor *out)
{
    return m->ops->forward(dev, m, acts, b, input, step, recompute, out);
}

int ptdp_model_backward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                        double loss_scale, ptdp_tensor *dx)
{
    return m->ops->backward(dev, m, acts, dout, loss_scale, dx);
}

void ptdp_acts_free(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts)
{
    if (acts->alive || acts->saved != NULL)
        m->ops->acts_free(dev, m, acts);
    acts->alive = false;
}

int ptdp_model_grads_ready(ptdp_device *dev, ptdp_model *m, const ptdp_param *last)
{
    ptdp_model *d = m->device != NULL ? m->device : m;   /* the hook lives on the device */
    if (d->grads_ready == NULL || last == NULL)
        return PTDP_OK;
    return d->grads_ready(dev, d, last->offset + ptdp_tensor_numel(last->g), d->grads_ready_ctx);
}

void ptdp_model_begin_unit(ptdp_model *m)
{
    /* a new unit only once the current one holds a parameter */
    if (m->nparams > 0 && m->params[m->nparams - 1].unit == m->nunits - 1)
        m->nunits++;
    m->subunit_open = false;   /* a subunit lies inside one unit */
}

void ptdp_model_begin_subunit(ptdp_model *m)
{
    /* a new subunit unless the open one holds no parameter yet */
    if (!m->subunit_open || (m->nparams > 0 && m->params[m->nparams - 1].subunit == m->nsubunits - 1))
        m->nsubunits++;
    m->subunit_open = true;
}

int ptdp_model_unit(ptdp_device *dev, ptdp_model *m, const ptdp_param *p, ptdp_unit_event ev)
{
    ptdp_model *d = m->device != NULL ? m->device : m;   /* the hook lives on the device */
    if (d->unit_hook == NULL || p == NULL)
        return PTDP_OK;
    return d->unit_hook(dev, d, p->unit, ev, d->unit_hook_ctx);
}

int ptdp_model_subunit(ptdp_device *dev, ptdp_model *m, const ptdp_param *p, ptdp_unit_event ev)
{
    ptdp_model *d = m->device != NULL ? m->device : m;
    if (d->subunit_hook == NULL || p == NULL || p->subunit < 0)
        return PTDP_OK;
    return d->subunit_hook(dev, d, p->subunit, ev, d->unit_hook_ctx);
}

int ptdp_model_backward_input(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                              double loss_scale, ptdp_tensor *dx, ptdp_wgrad *w)
{
    if (m->ops->backward_input == NULL)
        return ptdp_fail(dev, PTDP_EINVAL, "model %s cannot split its backward into B and W", m->ops->name);
    size_t *held = w->held, *peak = w->peak;   /* the caller's stage-wide count */
    /* The records point into the device's gradient buffer, which ZeRO-2
     * re-points between B and W: a chunk's parameters are windows of it,
     * their offsets the device's (a chunk has no buffer of its own). */
    const ptdp_model *d = m->device != NULL ? m->device : m;
    ptdp_wgrad_init(w, &d->flat_g, d->numel);
    w->held = held;
    w->peak = peak;
    return m->ops->backward_input(dev, m, acts, dout, loss_scale, dx, w);
}

int ptdp_model_backward_weight(ptdp_device *dev, ptdp_model *m, ptdp_wgrad *w)
{
    (void)m;   /* the records know their gradients (offsets into the device's flat_g) */
    return ptdp_wgrad_run(dev, w);
}

/* ------------------------------------------- the whole model from shards */

/* ||g||^2 of the whole model, each parameter once.  A TP-replicated
 * parameter has an identical gradient on every TP rank, so only TP rank 0
 * counts it; a shard counts its own elements; a copy that a group of its
 * `also` keeps equal (the last stage's tied embedding) counts only on the
 * group's rank 0; the TP group then sums the shards, and the PP group sums
 * the stages.  (DP replicas hold the same all-reduced gradient, so each
 * computes the same total.) */
bool ptdp_param_summed_over(const ptdp_param *p, ptdp_group g)
{
    return p->sum.replicas == g || (p->sum.also & PTDP_GROUP_BIT(g)) != 0;
}

/* The chunk of device d whose parameters include p (NULL without chunks). */
/* MoE parallel folding (moe_fold.c): the experts' TP groups cut finer than attention's. */
static bool folded(const ptdp_mesh *m)
{
    return m->etp > 0 && m->etp < m->tp;
}

static const ptdp_model *chunk_holding(const ptdp_model *d, const ptdp_param *p)
{
    for (int c = 0; d->chunks != NULL && c < d->virtual_stages; c++)
        if (p >= d->chunks[c].params && p < d->chunks[c].params + d->chunks[c].nparams)
            return &d->chunks[c];
    return NULL;
}

/* DualPipe: the mirror group keeps a stage's two copies equal, and a tied
 * embedding's four copies (two on each end) too: the down copy counts (its
 * device's chunk 0), and of the tied ones only the model's first stage's. */
static bool dual_counted(const ptdp_model *m, const ptdp_param *p)
{
    const ptdp_model *k = chunk_holding(m->device != NULL ? m->device : m, p);
    if (k == NULL || k->chunk != 0)
        return false;
    return (p->sum.also & PTDP_GROUP_BIT(PTDP_GROUP_EMB)) == 0 || k->first_stage;
}

bool ptdp_param_counted_here(const ptdp_model *m, const ptdp_param *p)
{
    /* replicated over TP: TP rank 0's; an expert's under folding over its experts' TP group (moe_fold.c) */
    const int t = folded(m->mesh) && p->sum.replicas == PTDP_GROUP_EDP ? m->mesh->tp_rank % m->mesh->etp
                                                                       : m->mesh->tp_rank;
    if (p->shard == PTDP_SHARD_NONE && t != 0)
        return false;
    for (int g = 0; g < PTDP_GROUP_COUNT; g++) {
        if (two_copies(m) && (g == PTDP_GROUP_EMB || g == PTDP_GROUP_MIRROR))
            continue;   /* dual_counted decides */
        ptdp_comm *c = p->sum.also & PTDP_GROUP_BIT(g) ? ptdp_mesh_group(m->mesh, (ptdp_group)g) : NULL;
        if (c != NULL && ptdp_comm_rank(c) != 0)
            return false;   /* the group's rank 0 counts it */
    }
    if (two_copies(m))
        return dual_counted(m, p);
    /* A V's copies on one device (a tied embedding on stage 0): the first counts. */
    const ptdp_model *d = m->device != NULL ? m->device : m;
    for (int i = 0; ends_together(m) && p->sum.also != 0 && i < d->nparams && &d->params[i] < p; i++)
        if (d->params[i].sum.also == p->sum.also && strcmp(d->params[i].name, p->name) == 0)
            return false;
    return true;
}

int ptdp_model_sum_over_shards(ptdp_model *m, double *x)
{
    int rc = PTDP_OK;
    if (m->mesh->tp > 1)
        rc = ptdp_all_reduce(m->mesh->tp_comm, x, x, 1, PTDP_F64, PTDP_SUM);
    if (rc == 0 && m->mesh->pp > 1)
        rc = ptdp_all_reduce(m->mesh->pp_comm, x, x, 1, PTDP_F64, PTDP_SUM);
    return rc;
}

/* The gradient norm's one rule, over the declared groups (ptdp_grad_sum).
 * Which copy of an element counts is ptdp_param_counted_here's answer;
 * whose squares then add up is the question here.  After the sum over
 * its replicas a device holds, of parameter p,
 *
 *   p whole (plain DP)       the same as every other replica of p: the
 *                            squares add up over the DP ranks BESIDE p's
 *                            replicas — those that hold other tensors in
 *                            p's place: none for DP's own replicas, the EP
 *                            group for an expert's expert-DP group (mesh.h:
 *                            DP = EDP x EP, each EP rank its own experts)
 *   its shard (ZeRO)         its own, unlike any other DP rank's: the
 *                            squares add up over the whole DP group
 *                            (under HSDP over the shard group: the
 *                            replica groups hold the same shards)
 *
 * and always over TP and PP (ptdp_model_sum_over_shards), which hold other
 * shards and other stages.  A group of one device sums nothing.
 *
 * Under MoE parallel folding (moe_fold.c) an expert's replicas, its
 * expert-DP group, span TP ranks as well as DP ranks, and its EP group
 * too: summing over EP and then TP would count a shard tp / etp times.
 * There the whole expert-DP group's rank 0 counts each whole shard
 * (ptdp_param_norm_counts), and the squares add up over the DP group and
 * then TP: every rank of the stage once. */
static ptdp_group beside_replicas(const ptdp_mesh *m, ptdp_group replicas)
{
    if (replicas == PTDP_GROUP_EDP && folded(m))
        return PTDP_GROUP_DP;   /* ptdp_param_norm_counts: the EDP group's rank 0, over tp x dp */
    return replicas == PTDP_GROUP_EDP ? PTDP_GROUP_EP : PTDP_GROUP_COUNT;
}

void ptdp_model_unit_bounds(const ptdp_model *m, size_t *begin, size_t *end)
{
    for (int i = m->nparams - 1; i >= 0; i--)   /* its first parameter's offset, walking down */
        begin[m->params[i].unit] = m->params[i].offset;
    for (int i = 0; i < m->nparams; i++)   /* its last one's end, walking up */
        end[m->params[i].unit] = m->params[i].offset + ptdp_tensor_numel(m->params[i].w);
}

bool ptdp_param_norm_counts(const ptdp_model *m, const ptdp_param *p, bool sharded)
{
    if (!ptdp_param_counted_here(m, p))
        return false;
    if (sharded || p->sum.replicas != PTDP_GROUP_EDP || !folded(m->mesh))
        return true;
    return ptdp_comm_rank(ptdp_mesh_group(m->mesh, PTDP_GROUP_EDP)) == 0;
}

ptdp_group ptdp_param_norm_group(const ptdp_model *m, const ptdp_param *p, bool sharded)
{
    /* under HSDP (zero_hsdp.c) ZeRO's shards are the shard group's */
    const ptdp_group shards = ptdp_mesh_group(m->mesh, PTDP_GROUP_SHARD) != NULL ? PTDP_GROUP_SHARD : PTDP_GROUP_DP;
    const ptdp_group g = sharded ? shards : beside_replicas(m->mesh, p->sum.replicas);
    ptdp_comm *c = g < PTDP_GROUP_COUNT ? ptdp_mesh_group(m->mesh, g) : NULL;
    return c != NULL && ptdp_comm_size(c) > 1 ? g : PTDP_GROUP_COUNT;
}

int ptdp_model_norm_sum(ptdp_model *m, double partial[PTDP_GROUP_COUNT + 1], unsigned groups, double *sumsq)
{
    double x = partial[PTDP_GROUP_COUNT];   /* this device's alone to count */
    int rc = PTDP_OK;
    for (int g = 0; rc == 0 && g < PTDP_GROUP_COUNT; g++) {
        if (!(groups & PTDP_GROUP_BIT(g)))
            continue;
        rc = ptdp_all_reduce(ptdp_mesh_group(m->mesh, (ptdp_group)g), &partial[g], &partial[g], 1, PTDP_F64,
                             PTDP_SUM);
        x += partial[g];
    }
    if (rc == 0)
        rc = ptdp_model_sum_over_shards(m, &x);
    *sumsq = x;
    return rc;
}

int ptdp_model_grad_sumsq(ptdp_device *dev, ptdp_model *m, double *sumsq)
{
    (void)dev;
    double partial[PTDP_GROUP_COUNT + 1] = { 0 };
    unsigned groups = 0;
    for (int i = 0; i < m->nparams; i++) {   /* each replica holds the whole: the float views */
        const ptdp_group g = ptdp_param_norm_group(m, &m->params[i], false);
        groups |= g < PTDP_GROUP_COUNT ? PTDP_GROUP_BIT(g) : 0;
        if (ptdp_param_norm_counts(m, &m->params[i], false))
            partial[g] += ptdp_sum_squares(m->params[i].g.data, ptdp_tensor_numel(m->params[i].g));
    }
    return ptdp_model_norm_sum(m, partial, groups, sumsq);
}

bool ptdp_model_has_groups(const ptdp_model *m)
{
    for (int i = 0; i < m->nparams; i++)
        if (m->params[i].sum.also != 0)
            return true;
    return false;
}

int ptdp_model_check_groups(ptdp_device *dev, const ptdp_model *m)
{
    for (int i = 0; i < m->nparams; i++)
        for (int g = 0; g < PTDP_GROUP_COUNT; g++)
            if ((m->params[i].sum.also & PTDP_GROUP_BIT(g)) && ptdp_mesh_group(m->mesh, (ptdp_group)g) == NULL)
                return ptdp_fail(dev, PTDP_EINVAL, "%s: its gradient is summed over mesh group %d, which this "
                                 "device has no part in (was it built? model.h, ops->groups)", m->params[i].name, g);
    return PTDP_OK;
}

/* One chunk's parameters of group g, each all-reduced over it. */
static int sum_group(ptdp_device *dev, ptdp_model *m, ptdp_group g)
{
    ptdp_comm *c = ptdp_mesh_group(m->mesh, g);
    for (int i = 0; i < m->nparams; i++) {
        ptdp_param *p = &m->params[i];
        if (!(p->sum.also & PTDP_GROUP_BIT(g)))
            continue;
        if (c == NULL)
            return ptdp_fail(dev, PTDP_EINVAL, "%s: its gradient is summed over mesh group %d, which this "
                             "device has no part in (was it built? model.h, ops->groups)", p->name, (int)g);
        if (ends_together(m) && ptdp_comm_size(c) == 1)
            continue;   /* a V's copies: summed on the device already */
        if (two_copies(m) && (g == PTDP_GROUP_EMB || g == PTDP_GROUP_MIRROR))
            continue;   /* DualPipe's: summed first (sum_dual_copies) */
        int rc = ptdp_all_reduce(c, p->g.data, p->g.data, ptdp_tensor_numel(p->g), PTDP_REAL, PTDP_SUM);
        if (rc != 0)
            return rc;
        if (g == PTDP_GROUP_FOLD)   /* MoE parallel folding's router: the re-layout's bytes (moe_fold.c) */
            ptdp_count(dev->counts, "moe_fold_bytes", 0, 2.0 * (ptdp_comm_size(c) - 1) / ptdp_comm_size(c) *
                                                         (double)ptdp_tensor_numel(p->g) * sizeof(ptdp_real));
    }
    return PTDP_OK;
}

/* Two copies of one tensor in two chunks of this device, both summed over
 * group g (a tied embedding under a V: stage 0 holds the model's first
 * chunk and its last): each becomes their sum here, as the all-reduce over
 * two devices would make it (a + b, the same either way round). */
static void sum_copies_on_device(ptdp_model *m, ptdp_group g)
{
    for (int c = 0; m->chunks != NULL && c < m->virtual_stages; c++) {
        ptdp_model *a = &m->chunks[c];
        for (int i = 0; i < a->nparams; i++) {
            ptdp_param *p = &a->params[i];
            if (!(p->sum.also & PTDP_GROUP_BIT(g)))
                continue;
            for (int k = c + 1; k < m->virtual_stages; k++)
                for (int j = 0; j < m->chunks[k].nparams; j++) {
                    ptdp_param *q = &m->chunks[k].params[j];
                    if (!(q->sum.also & PTDP_GROUP_BIT(g)) || strcmp(p->name, q->name) != 0 ||
                        ptdp_tensor_numel(p->g) != ptdp_tensor_numel(q->g))
                        continue;
                    const size_t n = ptdp_tensor_numel(p->g);
                    for (size_t e = 0; e < n; e++)
                        q->g.data[e] = p->g.data[e] = p->g.data[e] + q->g.data[e];
                }
        }
    }
}

/* DualPipe: stage s of the down copy lies on stage s (chunk 0), its up
 * copy on stage p - 1 - s (chunk 1).  First each stage's two copies are
 * summed over the mirror group — a + b, the DP all-reduce of the DP-2
 * pipeline DualPipe folds — the two devices walking their chunks in the
 * model's order (by first block) so their all-reduces pair up; then a tied
 * embedding, whose four copies are now two sums on each end device, is
 * summed on the device, as the embedding group of that pipeline would. */
static int sum_dual_copies(ptdp_device *dev, ptdp_model *m)
{
    ptdp_comm *mirror = ptdp_mesh_group(m->mesh, PTDP_GROUP_MIRROR);
    if (mirror == NULL || m->chunks == NULL || m->virtual_stages != 2)
        return ptdp_fail(dev, PTDP_EINVAL, "DualPipe: device %d has no mirror group or not two chunks", dev->rank);
    const int first = m->chunks[0].layer_begin < m->chunks[1].layer_begin ? 0 : 1;
    for (int k = 0; k < 2; k++) {
        ptdp_model *c = &m->chunks[first ^ k];
        for (int i = 0; i < c->nparams; i++) {
            ptdp_param *p = &c->params[i];
            int rc = ptdp_all_reduce(mirror, p->g.data, p->g.data, ptdp_tensor_numel(p->g), PTDP_REAL, PTDP_SUM);
            if (rc != 0)
                return rc;
        }
    }
    sum_copies_on_device(m, PTDP_GROUP_EMB);
    return PTDP_OK;
}

int ptdp_model_check_mirror(ptdp_device *dev, const ptdp_model *m, long step)
{
    ptdp_comm *mirror = ptdp_mesh_group(m->mesh, PTDP_GROUP_MIRROR);
    if (!two_copies(m) || mirror == NULL || m->chunks == NULL || m->flat_w == NULL)
        return PTDP_OK;
    uint64_t hash[2] = { 1469598103934665603ull, 0 };
    const int first = m->chunks[0].layer_begin < m->chunks[1].layer_begin ? 0 : 1;
    for (int k = 0; k < 2; k++) {        /* the model's order: the same bytes on both */
        const ptdp_model *c = &m->chunks[first ^ k];
        for (int i = 0; i < c->nparams; i++) {
            const unsigned char *b = (const unsigned char *)(m->flat_w + c->params[i].offset);
            for (size_t e = 0; e < ptdp_tensor_numel(c->params[i].w) * sizeof(ptdp_real); e++)
                hash[0] = (hash[0] ^ b[e]) * 1099511628211ull;
        }
    }
    hash[1] = hash[0];
    int rc = ptdp_all_gather(mirror, PTDP_IN_PLACE, hash, 2, PTDP_I64);
    if (rc == 0 && hash[0] != hash[1])
        return ptdp_fail(dev, PTDP_ECHECK, "DualPipe's two copies differ after step %ld: stage %d's hash %016llx, "
                         "its mirror's %016llx", step, m->mesh->pp_rank, (unsigned long long)hash[0],
                         (unsigned long long)hash[1]);
    return rc;
}

int ptdp_model_sum_groups(ptdp_device *dev, ptdp_model *m)
{
    int rc = two_copies(m) ? sum_dual_copies(dev, m) : PTDP_OK;
    if (rc != 0)
        return rc;
    /* Copies on this device first; then, over a group of more than this
     * device, the all-reduces. */
    for (int g = 0; ends_together(m) && g < PTDP_GROUP_COUNT; g++)
        sum_copies_on_device(m, (ptdp_group)g);
    /* A chunked device: chunk by chunk (its SP LayerNorms over TP; the tied
     * embedding on model chunk 0 and on the last one).  Every
     * device of a group runs its chunks and groups in the same order, so
     * their collectives pair up. */
    for (int c = 0; rc == 0 && c < (m->chunks ? m->virtual_stages : 1); c++)
        for (int g = 0; rc == 0 && g < PTDP_GROUP_COUNT; g++)
            rc = sum_group(dev, ptdp_model_chunk(m, c), (ptdp_group)g);
    return rc;
}

/* ------------------------------------------------------- weight decay */

int ptdp_model_decay_ranges(const ptdp_model *m, size_t lo, size_t hi, ptdp_decay_fn fn, void *ctx)
{
    /* Parameters tile the flat buffer in order, so one walk finds the
     * stretches; neighbours with the same rule merge into one call. */
    size_t begin = lo;
    bool decay = true;
    int have = 0;
    for (int i = 0; i < m->nparams; i++) {
        const ptdp_param *p = &m->params[i];
        size_t b = p->offset, e = p->offset + ptdp_tensor_numel(p->w);
        if (b < lo)
            b = lo;
        if (e > hi)
            e = hi;
        if (b >= e)
            continue;
        if (have && decay != !p->no_decay) {
            int rc = fn(begin, b, decay, ctx);
            if (rc != 0)
                return rc;
            begin = b;
        }
        decay = !p->no_decay;
        have = 1;
    }
    return have && begin < hi ? fn(begin, hi, decay, ctx) : PTDP_OK;
}
