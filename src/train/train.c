/*
 * train.c — one loop for every configuration, from one device to dp x tp x pp.
 *
 * Each device thread runs device_main: build the mesh (mesh.c), its stage
 * and shard of the model (models.h), the schedule (schedule.c), and then
 * `steps` times:
 *
 *   pipeline step (pp.c)  ── F/B of every micro-batch of this DP shard,
 *                            sends and receives between stages
 *                            (ZeRO-2: a reduce-scatter after each backward)
 *   optimizer_step        ── DP all-reduce of the gradients (dp.c),
 *                            or ZeRO-1's reduce-scatter (zero.c)
 *                            gradient norm of the whole model, clip
 *                            AdamW / SGD on the chunk this device updates:
 *                            the whole flat buffer, or its 1/dp under ZeRO
 *                            zero the gradients; ZeRO: all-gather the parameters
 *
 * With --schedule interleaved --virtual-stages v the model of a device is
 * v chunks (model.h): pieces s, s + p, … of p v.  Nothing else in the loop
 * changes — DP, ZeRO, the optimizer and checkpoints see the device's one
 * flat buffer — but the schedule, and the bubble formula it reports:
 *
 *   bubble = (p - 1) / (v m + p - 1)       (1F1B: v = 1)
 *
 * The loss is the mean over the GLOBAL batch B: every micro-batch scales
 * its loss gradient by 1/B, and DP sums (dp.h explains why that, and not an
 * average of averages, is what equals the single device).
 *
 * Logging is host bookkeeping, not device communication: each device
 * writes its numbers for the step into the run's table, and the last
 * device to finish a step prints it.  The loss is summed there from the
 * last stage's shards, so logging adds no collective and no byte to what
 * the lessons count.  With one process per device (MPI) every process has
 * a table of its own; the hosts merge them (ptdp_host_merge, launch.h),
 * also outside the counted bytes and the virtual clock.
 */
#include "ptdp/train.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/dp.h"
#include "ptdp/error.h"
#include "ptdp/mesh.h"
#include "ptdp/models.h"
#include "ptdp/mixed.h"
#include "ptdp/optim.h"
#include "ptdp/pp.h"
#include "ptdp/schedule.h"
#include "ptdp/zero.h"

/* ------------------------------------------------------- the run's table */

typedef struct {
    double v0, v1, w0, w1, bytes, loss, grad_norm;
    double phase_end, busy;       /* pipeline phase: end (virtual), compute+comm in it */
} device_step;

typedef struct {
    const ptdp_train_config *cfg;
    int world;
    long first_step;              /* global steps already taken (resume) */
    device_step *ds;              /* [steps][world]                      */
    int *done;                    /* [steps] devices finished            */
    int next_report;
    pthread_mutex_t mu;
    ptdp_step_observer observer;
    void *observer_ctx;
    ptdp_train_result *result;
    size_t *peak_acts;            /* [world]                             */
    size_t *peak_wgrad;           /* [world]: bytes held for W           */
    int *peak_in_flight;          /* [world]                             */
    int targets_per_sample;       /* the model's label_cols (device 0)   */
} run;

static ptdp_step_log summarize(run *r, int s)
{
    const ptdp_train_config *c = r->cfg;
    ptdp_step_log log = { .step = r->first_step + s + 1 };
    double v0 = INFINITY, v1 = -INFINITY, loss = 0;
    for (int d = 0; d < r->world; d++) {
        const device_step *x = &r->ds[(size_t)s * r->world + d];
        v0 = fmin(v0, x->v0);
        v1 = fmax(v1, x->v1);
        log.wall_s = fmax(log.wall_s, x->w1 - x->w0);
        log.bytes += x->bytes;
        loss += x->loss;
    }
    log.virtual_s = v1 - v0;
    log.loss = loss / ((double)c->batch * r->targets_per_sample);
    log.grad_norm = r->ds[(size_t)s * r->world].grad_norm;
    return log;
}

/* A device finished step s: record, and report every step now complete. */
static int step_done(ptdp_device *dev, run *r, int s, const device_step *x)
{
    int rank = dev->rank, rc = 0;
    pthread_mutex_lock(&r->mu);
    r->ds[(size_t)s * r->world + rank] = *x;
    r->done[s]++;
    if (!ptdp_host_shared(dev)) {
        /* One device per host (processes, MPI): the row holds this
         * device's entry alone until the hosts merge theirs (launch.h). */
        rc = ptdp_host_merge(dev, &r->ds[(size_t)s * r->world], (size_t)r->world * sizeof *r->ds);
        r->done[s] = rc == 0 ? r->world : 0;
    }
    while (r->next_report < r->cfg->steps && r->done[r->next_report] == r->world) {
        ptdp_step_log log = summarize(r, r->next_report);
        if (r->result != NULL && r->result->log != NULL)
            r->result->log[r->next_report] = log;
        if (r->observer != NULL)
            r->observer(&log, r->observer_ctx);
        r->next_report++;
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

/* One device per host (processes, MPI): each host's tables hold only its
 * own device's entries and shards; merge them, so that every host (rank
 * 0's prints and saves) holds the whole run's, as threads do (launch.h). */
static int merge_hosts(ptdp_device *dev, run *r)
{
    const ptdp_train_config *c = r->cfg;
    size_t w = (size_t)r->world;
    int rc = ptdp_host_merge(dev, r->peak_acts, w * sizeof *r->peak_acts);
    if (rc == 0)
        rc = ptdp_host_merge(dev, r->peak_wgrad, w * sizeof *r->peak_wgrad);
    if (rc == 0)
        rc = ptdp_host_merge(dev, r->peak_in_flight, w * sizeof *r->peak_in_flight);
    if (rc == 0 && r->result != NULL && r->result->param_elements != NULL)
        rc = ptdp_host_merge(dev, r->result->param_elements, w * sizeof *r->result->param_elements);
    ptdp_state *states[2] = { c->final_state, c->init_state };
    for (int k = 0; k < 2; k++)
        for (int i = 0; rc == 0 && states[k] != NULL && i < states[k]->ntensors; i++) {
            ptdp_state_tensor *t = &states[k]->t[i];
            rc = ptdp_host_merge(dev, t->data, (size_t)t->rows * (size_t)t->cols * sizeof *t->data);
        }
    return rc;
}

/* ------------------------------------------------------ one device's run */

typedef struct {
    run *r;
    ptdp_mesh mesh;
    ptdp_model model;
    ptdp_ddp ddp;
    ptdp_zero zero;                /* the pieces this device updates (zero.h) */
    ptdp_real *opt_a, *opt_b;      /* AdamW m and v, or SGD momentum in opt_a:
                                      zero.len elements, piece i's from its at */
    long global_step;              /* 1-based step being taken                */
    const ptdp_pp_step *pp_step;   /* the step being run (its loss so far)    */
    double grad_norm;
    double busy0, phase_end, phase_busy;   /* the pipeline phase, for the bubble */
} device_ctx;

/* Which device writes a parameter's whole tensor: one per shard. */
static bool writes_param(const device_ctx *d, const ptdp_param *p)
{
    return d->mesh.dp_rank == 0 && d->mesh.cp_rank == 0 && (p->shard != PTDP_SHARD_NONE || d->mesh.tp_rank == 0);
}

/* The elements [k0, k1) of p's optimizer state that this device holds: p
 * intersected with its ZeRO chunk (the whole of p without ZeRO).  Chunks cut
 * through parameters, so a checkpoint gets each tensor's state in pieces,
 * one per DP rank — and holds the full tensors, whatever the stage. */
static bool optim_slice(const device_ctx *d, const ptdp_param *p, size_t *k0, size_t *k1, size_t *at)
{
    size_t b, e;
    if (!ptdp_zero_owned(&d->zero, p->offset, p->offset + ptdp_tensor_numel(p->w), &b, &e, at))
        return false;
    *k0 = b - p->offset;
    *k1 = e - p->offset;
    return true;
}

/* Who writes the optimizer state of p: without ZeRO the replicas agree and
 * DP rank 0 writes; with ZeRO every DP rank writes its own slice. */
static bool writes_optim(const device_ctx *d, const ptdp_param *p)
{
    return (d->zero.stage > 0 || (d->mesh.dp_rank == 0 && d->mesh.cp_rank == 0)) &&
           (p->shard != PTDP_SHARD_NONE || d->mesh.tp_rank == 0);
}

/* Local elements [k0, k1) of p (row-major in its shard) to or from the whole tensor. */
static void copy_elements(const ptdp_param *p, size_t k0, size_t k1, ptdp_real *local,
                          ptdp_state_tensor *whole, bool to_whole)
{
    size_t cols = (size_t)p->w.cols;
    for (size_t k = k0; k < k1; k++) {
        ptdp_real *x = &whole->data[ptdp_param_whole_index(p, (int)(k / cols), (int)(k % cols))];
        if (to_whole)
            *x = local[k - k0];
        else
            local[k - k0] = *x;
    }
}

/* Optimizer slot k, from shard element `at` on (opt_a / opt_b hold what
 * this device owns, in the order of ptdp_zero_owned's shard). */
static ptdp_real *optim_at(const device_ctx *d, int slot, size_t at)
{
    return (slot == 0 ? d->opt_a : d->opt_b) + at;
}

/* Copy this device's shards (and optimizer state) into / out of a host state. */
/* Under ZeRO-3 no device holds a whole parameter: like the optimizer
 * state, each DP rank writes (and reads) the elements it owns, and the
 * host state still holds whole tensors — no communication.  Under bf16 the
 * exact parameters are the float master weights (the model's bf16 ones
 * are bf16 of them), which the optimizer state's owners write the same way.
 * NULL: the model's own views hold them (float, without ZeRO-3). */
static ptdp_real *exact_params(const ptdp_zero *z)
{
    if (z->store == PTDP_BF16)
        return z->master;
    return z->stage == 3 ? (ptdp_real *)z->param_shard : NULL;
}

static void save_state(device_ctx *d, ptdp_state *s, bool with_optim)
{
    int slots = with_optim ? ptdp_state_optim_slots(s) : 0;
    ptdp_real *mine = exact_params(&d->zero);
    for (int i = 0; i < d->model.nparams; i++) {
        const ptdp_param *p = &d->model.params[i];
        size_t k0, k1, at;
        if (mine == NULL && writes_param(d, p))
            ptdp_param_to_state(p, p->w, ptdp_state_find(s, p->name));
        if (!writes_optim(d, p) || !optim_slice(d, p, &k0, &k1, &at))
            continue;
        if (mine != NULL)
            copy_elements(p, k0, k1, mine + at, ptdp_state_find(s, p->name), true);
        for (int k = 0; k < slots && (k == 0 ? d->opt_a : d->opt_b) != NULL; k++) {
            char name[2 * PTDP_NAME_MAX];
            snprintf(name, sizeof name, "optim.%.63s.%s", p->name, ptdp_state_slot_name(s, k));
            copy_elements(p, k0, k1, optim_at(d, k, at), ptdp_state_find(s, name), true);
        }
    }
}

/* bf16 without ZeRO-3: every device holds the whole bf16 parameter. */
static int load_bf16_param(ptdp_device *dev, device_ctx *d, const ptdp_param *p, const ptdp_state_tensor *t)
{
    size_t n = ptdp_tensor_numel(p->w);
    ptdp_tensor whole = p->w;
    if ((whole.data = malloc((n > 0 ? n : 1) * sizeof(ptdp_real))) == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    ptdp_param_from_state(p, whole, t);
    ptdp_store_from_real(PTDP_BF16, d->model.flat_w16 + p->offset, whole.data, n);
    free(whole.data);
    return PTDP_OK;
}

static int load_state(ptdp_device *dev, device_ctx *d, const ptdp_state *cs)
{
    ptdp_state *s = (ptdp_state *)cs;   /* read only */
    int slots = ptdp_state_optim_slots(s);
    ptdp_zero *z = &d->zero;
    ptdp_real *mine = exact_params(z);
    for (int i = 0; i < d->model.nparams; i++) {
        const ptdp_param *p = &d->model.params[i];
        const ptdp_state_tensor *t = ptdp_state_find(s, p->name);
        if (t == NULL)
            return ptdp_fail(dev, PTDP_ECORRUPT, "checkpoint has no tensor %s", p->name);
        size_t k0, k1, at;
        if (mine == NULL)
            ptdp_param_from_state(p, p->w, t);
        else if (z->store == PTDP_BF16 && z->stage < 3 && load_bf16_param(dev, d, p, t) != 0)
            return PTDP_ENOMEM;
        if (!optim_slice(d, p, &k0, &k1, &at))
            continue;
        if (mine != NULL)
            copy_elements(p, k0, k1, mine + at, (ptdp_state_tensor *)t, false);
        for (int k = 0; k < slots && (k == 0 ? d->opt_a : d->opt_b) != NULL; k++) {
            char name[2 * PTDP_NAME_MAX];
            snprintf(name, sizeof name, "optim.%.63s.%s", p->name, ptdp_state_slot_name(s, k));
            copy_elements(p, k0, k1, optim_at(d, k, at), ptdp_state_find(s, name), false);
        }
    }
    if (z->store == PTDP_BF16 && z->stage == 3)   /* my bf16 chunks: bf16 of the master */
        ptdp_store_from_real(PTDP_BF16, z->param_shard, z->master, z->len);
    return PTDP_OK;
}

/* DP replicas must stay bit-identical: they start equal, all-reduce to the
 * same gradient (a fixed reduction order gives every rank the same bits)
 * and take the same step.  Check it with a 64-bit FNV-1a hash per replica. */
static int verify_replicas(ptdp_device *dev, device_ctx *d)
{
    int n = ptdp_comm_size(d->mesh.dp_comm);   /* dp x cp: every copy of these parameters */
    if (n == 1)
        return PTDP_OK;
    uint64_t hash = 1469598103934665603ull, all[PTDP_MAX_DEVICES];
    if (d->zero.stage == 3)
        return PTDP_OK;   /* no replicas: every DP rank holds its own chunk of the parameters */
    const bool bf16 = d->model.bf16;
    const unsigned char *b = bf16 ? (const unsigned char *)d->model.flat_w16 : (const unsigned char *)d->model.flat_w;
    for (size_t k = 0; k < d->model.numel * ptdp_store_size(ptdp_model_store(&d->model)); k++)
        hash = (hash ^ b[k]) * 1099511628211ull;
    all[ptdp_comm_rank(d->mesh.dp_comm)] = hash;
    int rc = ptdp_all_gather(d->mesh.dp_comm, PTDP_IN_PLACE, all, (size_t)n, PTDP_I64);
    for (int r = 1; rc == 0 && r < n; r++)
        if (all[r] != all[0])
            return ptdp_fail(dev, PTDP_ECHECK, "DP replicas differ after step %ld: dp rank %d has hash %016llx, "
                             "dp rank 0 %016llx", d->global_step, r, (unsigned long long)all[r],
                             (unsigned long long)all[0]);
    return rc;
}

/* The optimizer on one stretch [begin, end) of the flat buffers (element
 * indices of the model) inside one of this device's pieces, with or
 * without weight decay: AdamW and SGD are element-wise, so a stretch at a
 * time gives the bits of one call on the whole. */
typedef struct {
    device_ctx *d;
    void *w, *g;               /* the piece's parameters and gradient (float, or bf16), from its begin */
    size_t begin, at;          /* the piece being updated: flat element begin; its state from `at` */
    double clip;               /* bf16: the clipping coefficient (1: none) */
    double flops;
} update;

/* Mixed precision (mixed.h): the bf16 gradient widened to float a block at
 * a time (and clipped there, not in bf16), the float master weights and
 * moments stepped, and the bf16 parameters written as bf16(master). */
static int update_bf16(update *u, size_t i0, size_t k, size_t n, double wd)
{
    device_ctx *d = u->d;
    const ptdp_train_config *c = d->r->cfg;
#ifdef PTDP_DOUBLE
    (void)i0, (void)k, (void)n, (void)wd, (void)c;
    return PTDP_EINVAL;   /* validation refuses bf16 in the double build */
#else
    enum { BLOCK = 1024 };
    float g[BLOCK];
    ptdp_real *master = d->zero.master;
    const ptdp_bf16 *g16 = u->g;
    ptdp_bf16 *w16 = u->w;
    for (size_t i = 0; i < n; i += BLOCK) {
        size_t b = n - i < BLOCK ? n - i : BLOCK, j = k + i, jw = i0 + i;   /* state, piece */
        ptdp_bf16_to_float_array(g, g16 + jw, b);
        if (u->clip < 1)
            ptdp_scale(g, b, u->clip);
        if (c->optimizer == PTDP_OPT_ADAMW) {
            ptdp_adamw_config ac = ptdp_adamw_default_config();
            ac.lr = c->lr;
            ac.weight_decay = wd;
            ptdp_adamw_step_bf16(master + j, g, d->opt_a + j, d->opt_b + j, w16 + jw, b, &ac, d->global_step);
        } else {
            ptdp_sgd_config sc = { .lr = c->lr, .momentum = c->momentum, .weight_decay = wd };
            ptdp_sgd_step_bf16(master + j, g, d->opt_a ? d->opt_a + j : NULL, w16 + jw, b, &sc, d->global_step);
        }
    }
    if (c->optimizer == PTDP_OPT_ADAMW) {
        u->flops += ptdp_adamw_bf16_flops(n);
    } else {
        ptdp_sgd_config sc = { .lr = c->lr, .momentum = c->momentum, .weight_decay = wd };
        u->flops += ptdp_sgd_bf16_flops(n, &sc);
    }
    return PTDP_OK;
#endif
}

static int update_range(size_t begin, size_t end, bool decay, void *ctx)
{
    update *u = ctx;
    device_ctx *d = u->d;
    const ptdp_train_config *c = d->r->cfg;
    size_t i = begin - u->begin, k = u->at + i, n = end - begin;   /* in the piece; in the state */
    double wd = decay ? c->weight_decay : 0.0;
    if (d->model.bf16)
        return update_bf16(u, i, k, n, wd);
    ptdp_real *w = u->w, *g = u->g;
    if (c->optimizer == PTDP_OPT_ADAMW) {
        ptdp_adamw_config ac = ptdp_adamw_default_config();
        ac.lr = c->lr;
        ac.weight_decay = wd;
        ptdp_adamw_step(w + i, g + i, d->opt_a + k, d->opt_b + k, n, &ac, d->global_step);
        u->flops += ptdp_adamw_flops(n);
    } else {
        ptdp_sgd_config sc = { .lr = c->lr, .momentum = c->momentum, .weight_decay = wd };
        ptdp_sgd_step(w + i, g + i, d->opt_a ? d->opt_a + k : NULL, n, &sc, d->global_step);
        u->flops += ptdp_sgd_flops(n, &sc);
    }
    return PTDP_OK;
}

/* The last action of every stage's schedule: the once-per-step part.
 * Every device updates one chunk of its flat buffers: the whole buffer
 * without ZeRO, its 1/dp chunk with it (zero.h). */
static int optimizer_step(ptdp_device *dev, void *ctx)
{
    device_ctx *d = ctx;
    const ptdp_train_config *c = d->r->cfg;
    ptdp_model *m = &d->model;
    ptdp_zero *z = &d->zero;
    int rc;

    /* A loss that is NaN or infinite ends the run here, before any of this
     * step's updates: on the last stage, before the norm's collectives, so
     * every other device stops at them (their reduction needs this one).
     * Every last-stage device says the same words; the first one wins. */
    if (m->last_stage && d->pp_step != NULL && !isfinite(d->pp_step->loss_sum))
        return ptdp_fail(dev, PTDP_ENONFINITE, "step %ld: the loss is not finite: training diverged "
                         "(a smaller --lr, or --clip-grad, may help)", d->global_step);

    /* The pipeline phase of the step ends here: measure its bubble before
     * the once-per-step work, which every stage does alike. */
    d->phase_end = dev->clock.now;
    d->phase_busy = dev->clock.compute_s + dev->clock.comm_s - d->busy0;

    /* Data parallelism: once per step, after the last micro-batch's backward.
     * Plain DP all-reduces every bucket; ZeRO-1 reduce-scatters; ZeRO-2 has
     * reduce-scattered after every backward already.  Then a tensor the
     * model holds on two stages (a tied embedding) gets the sum of both
     * copies' gradients (ZeRO does it inside ptdp_zero_reduce_gradients). */
    if (z->stage == 0 && ((rc = c->overlap ? ptdp_ddp_wait(&d->ddp)   /* started in the backward */
                                           : ptdp_ddp_all_reduce(d->mesh.dp_comm, &d->ddp, m)) != 0 ||
                          (!m->bf16 && (rc = ptdp_model_sync_gradients(dev, m)) != 0)))   /* bf16: in zero.c */
        return rc;
    void *g;
    if ((rc = ptdp_zero_reduce_gradients(z, m, &g)) != 0)
        return rc;
    double sumsq;
    if ((rc = ptdp_zero_grad_sumsq(z, m, g, &sumsq)) != 0)
        return rc;
    d->grad_norm = sqrt(sumsq);
    /* The norm is the same on every device (one sum over the whole model),
     * so every device stops here, with the same words. */
    if (!isfinite(d->grad_norm))
        return ptdp_fail(dev, PTDP_ENONFINITE, "step %ld: the gradient norm is %s: training diverged "
                         "(a smaller --lr, or --clip-grad, may help)", d->global_step,
                         isnan(d->grad_norm) ? "NaN" : "infinite");

    double w0 = ptdp_wall_now();
    double coef = c->clip_grad > 0 ? ptdp_clip_coefficient(d->grad_norm, c->clip_grad) : 1;
    update u = { .d = d, .clip = coef, .flops = 0 };
    for (int i = 0; i < z->npieces; i++) {   /* one piece; one per bucket (ZeRO-1) or unit (ZeRO-3) */
        u.begin = z->pieces[i].begin;
        u.at = z->pieces[i].at;
        u.w = ptdp_zero_piece_params(z, m, i);
        u.g = ptdp_zero_piece_grad(z, g, i);
        if (coef < 1 && !m->bf16)
            ptdp_scale(u.g, z->pieces[i].end - z->pieces[i].begin, coef);   /* bf16: while widening */
        if ((rc = ptdp_model_decay_ranges(m, z->pieces[i].begin, z->pieces[i].end, update_range, &u)) != 0)
            return rc;
    }
    double flops = u.flops;
    ptdp_zero_clear_gradients(z, m);
    /* The ideal profile is the textbook pipeline: only the blocks' products cost time. */
    ptdp_compute(dev, "optimizer", dev->profile->ideal ? 0 : flops, w0);
    /* ZeRO: every rank updated one chunk; now everyone gets all of them. */
    if ((rc = ptdp_zero_gather_params(z, m)) != 0)
        return rc;
    return c->verify_replicas ? verify_replicas(dev, d) : PTDP_OK;
}

/* The executor (pp.c) hands control back to the trainer at the schedule's
 * OPTIMIZER_STEP action, once per step; ZeRO-2 also acts around every
 * micro-batch's backward: give the model a gradient buffer before, and
 * reduce-scatter it into this rank's shard after (zero.h).  With --overlap
 * the stage's last backward of the step starts each DP bucket's all-reduce
 * (ZeRO-1: reduce-scatter, of the same buckets) as soon as the backward has
 * completed it (dp.h); the rest start after.  (ZeRO-2 with --overlap starts
 * its reduce-scatters non-blocking instead, inside zero.c.) */
static ptdp_ddp *overlapped_buckets(device_ctx *d)
{
    if (!d->r->cfg->overlap || !d->pp_step->last_backward || d->zero.stage > 1)
        return NULL;
    return d->zero.stage == 1 ? &d->zero.buckets : &d->ddp;
}

static int around_backward_begin(ptdp_device *dev, void *ctx)
{
    device_ctx *d = ctx;
    int rc = ptdp_zero_backward_begin(dev, &d->zero, &d->model);
    ptdp_ddp *b = overlapped_buckets(d);
    if (rc == 0 && b != NULL)
        rc = ptdp_ddp_overlap_begin(d->mesh.dp_comm, b, &d->model);
    return rc;
}

static int around_backward_end(ptdp_device *dev, void *ctx)
{
    device_ctx *d = ctx;
    int rc = ptdp_zero_backward_end(dev, &d->zero, &d->model);
    ptdp_ddp *b = overlapped_buckets(d);
    if (rc == 0 && b != NULL)
        rc = ptdp_ddp_overlap_end(dev, b, &d->model);
    return rc;
}

/* With token slices the schedule's "micro-batches" are the m k units
 * (micro-batch, slice), slice fastest (pp.h). */
static int make_schedule(ptdp_device *dev, const ptdp_train_config *c, ptdp_schedule **out)
{
    const char *name = c->schedule ? c->schedule : "1f1b";
    const int units = c->micro_batches * ptdp_train_token_slices(c);
    if (ptdp_schedule_create_v(name, c->pp, units, ptdp_train_virtual_stages(c), out) != 0)
        return ptdp_fail(dev, PTDP_EINVAL, "cannot build the %s schedule for pp=%d, m=%d, v=%d",
                         name, c->pp, units, ptdp_train_virtual_stages(c));
    return PTDP_OK;
}

static int device_setup(ptdp_device *dev, device_ctx *d)
{
    const ptdp_train_config *c = d->r->cfg;
    int rc;
    dev->bf16 = c->bf16;   /* products at the profile's bf16 peak, if it has one */
    if ((rc = ptdp_mesh_init_cp(dev, c->dp, ptdp_train_cp(c), c->tp, c->pp, &d->mesh)) != 0)
        return rc;
    d->mesh.cp_zigzag = !c->cp_contiguous;
    d->mesh.sp = c->sp;     /* before the model: it decides the model's layout */
    if ((rc = ptdp_model_init_v(dev, &d->model, &c->model, &d->mesh, c->stage_layers,
                                ptdp_train_virtual_stages(c), c->seed, c->dropout)) != 0)
        return rc;
    d->model.recompute_attention = c->recompute_attention;
    d->model.bf16 = c->bf16;   /* before ZeRO, which makes the stores (mixed.h) */
    for (int k = 0; d->model.chunks != NULL && k < d->model.virtual_stages; k++)
        d->model.chunks[k].recompute_attention = c->recompute_attention;
    if ((rc = ptdp_zero_init_buckets(dev, &d->zero, &d->model, c->zero, c->bucket_mb)) != 0)   /* ZeRO-1: DP's */
        return rc;
    d->zero.overlap = c->overlap && c->zero >= 1;   /* its reduce-scatters (and ZeRO-3's gathers) on the stream */
    if (ptdp_ddp_init(&d->ddp, &d->model, c->bucket_mb) != 0)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    /* The optimizer state covers the chunk this device updates. */
    size_t bytes = d->zero.len * sizeof(ptdp_real);
    if (c->optimizer == PTDP_OPT_ADAMW) {
        d->opt_a = ptdp_alloc(dev, bytes, PTDP_MEM_OPTIM, "optim.exp_avg");
        d->opt_b = d->opt_a ? ptdp_alloc(dev, bytes, PTDP_MEM_OPTIM, "optim.exp_avg_sq") : NULL;
        if (d->opt_b == NULL)
            return PTDP_ENOMEM;
    } else if (c->momentum > 0) {
        if ((d->opt_a = ptdp_alloc(dev, bytes, PTDP_MEM_OPTIM, "optim.momentum_buffer")) == NULL)
            return PTDP_ENOMEM;
    }
    if (c->resume != NULL && (rc = load_state(dev, d, c->resume)) != 0)
        return rc;
    if (c->init_state != NULL)
        save_state(d, c->init_state, false);
    if (dev->rank == 0)           /* read by the host after step 0 (mutex) */
        d->r->targets_per_sample = d->model.label_cols;
    if (d->r->result != NULL && d->r->result->param_elements != NULL)
        d->r->result->param_elements[dev->rank] = d->model.numel;   /* its own slot */
    /* ZeRO-2 freed the model's full-size gradient buffer a moment ago (ZeRO-3
     * its parameters too): start the peaks from the set-up device, so they
     * show training, not set-up. */
    if (c->zero >= 2 || c->bf16)
        ptdp_arena_reset_peaks(dev->arena);
    return PTDP_OK;
}

static void device_teardown(ptdp_device *dev, device_ctx *d)
{
    ptdp_free(dev, d->opt_b);
    ptdp_free(dev, d->opt_a);
    ptdp_ddp_free(&d->ddp);
    ptdp_zero_free(dev, &d->zero, &d->model);
    ptdp_model_free(dev, &d->model);
    ptdp_mesh_free(&d->mesh);
}

static int device_main(ptdp_device *dev, void *arg)
{
    run *r = arg;
    const ptdp_train_config *c = r->cfg;
    device_ctx d = { .r = r };
    ptdp_schedule *sched = NULL;
    int rc = device_setup(dev, &d);
    if (rc == 0)
        rc = make_schedule(dev, c, &sched);

    size_t shard_off, shard_len;
    ptdp_chunk((size_t)c->batch, c->dp, d.mesh.dp_rank, &shard_off, &shard_len);
    for (int s = 0; rc == 0 && s < c->steps; s++) {
        long step = r->first_step + s;    /* 0-based global step */
        d.global_step = step + 1;
        device_step x = { .v0 = dev->clock.now, .w0 = ptdp_wall_now(), .bytes = dev->stats.total_sent };
        double busy0 = dev->clock.compute_s + dev->clock.comm_s;

        if ((c->dump_x != NULL || c->dump_tokens != NULL) && dev->rank == 0) {
            /* Device 0 is on the first stage and, when pp = 1, the last:
             * the model fills whatever its stages hold a data source for
             * (its chunk 0, the model's first piece, when interleaved). */
            ptdp_model *m = ptdp_model_chunk(&d.model, 0);
            ptdp_batch gb = {
                .first = step * (int64_t)c->batch, .rows = c->batch,
                .labels = c->dump_y + (size_t)s * c->batch * m->label_cols,
            };
            if (m->input_tokens && c->dump_tokens != NULL)
                gb.tokens = c->dump_tokens + (size_t)s * c->batch * m->input_cols;
            else if (!m->input_tokens && c->dump_x != NULL)
                gb.x = ptdp_tensor_wrap(c->dump_x + (size_t)s * c->batch * m->input_cols, c->batch, m->input_cols);
            m->ops->fill_batch(m, &gb);
        }
        ptdp_pp_step st = {
            .model = &d.model, .schedule = sched, .step = step,
            .shard_first = step * (int64_t)c->batch + (int64_t)shard_off, .shard_rows = (int)shard_len,
            .micro_batches = c->micro_batches, .token_slices = ptdp_train_token_slices(c),
            .recompute = c->recompute,
            .loss_scale = 1.0 / ((double)c->batch * d.model.label_cols),
            .optimizer_step = optimizer_step, .optimizer_ctx = &d,
            .backward_begin = c->zero == 2 || c->overlap ? around_backward_begin : NULL,
            .backward_end = c->zero == 2 || c->overlap ? around_backward_end : NULL,
        };
        d.busy0 = busy0;
        d.pp_step = &st;
        rc = ptdp_pp_run_step(dev, &st);
        d.pp_step = NULL;   /* ends with the schedule's OPTIMIZER_STEP */
        if (rc != 0)
            break;
        x.phase_end = d.phase_end;
        x.busy = d.phase_busy;
        if (st.peak_in_flight > r->peak_in_flight[dev->rank])
            r->peak_in_flight[dev->rank] = st.peak_in_flight;
        if (st.wgrad_peak_bytes > r->peak_wgrad[dev->rank])
            r->peak_wgrad[dev->rank] = st.wgrad_peak_bytes;
        x.v1 = dev->clock.now;
        x.w1 = ptdp_wall_now();
        x.bytes = dev->stats.total_sent - x.bytes;
        x.loss = d.model.last_stage && d.mesh.tp_rank == 0 ? st.loss_sum : 0;
        x.grad_norm = d.grad_norm;
        if ((rc = step_done(dev, r, s, &x)) != 0)
            break;
    }
    if (rc == 0 && c->final_state != NULL)
        save_state(&d, c->final_state, true);
    ptdp_mem_stats ms;
    ptdp_arena_stats(dev->arena, &ms);
    r->peak_acts[dev->rank] = ms.peak[PTDP_MEM_ACTS];
    if (rc == 0 && !ptdp_host_shared(dev))
        rc = merge_hosts(dev, r);
    ptdp_schedule_destroy(sched);
    device_teardown(dev, &d);
    return rc;
}

/* ------------------------------------------------------------ the host */

static void bubble(run *r, ptdp_train_result *res)
{
    const ptdp_train_config *c = r->cfg;
    /* The schedule's own formula: (p-1)/(m+p-1), or (p-1)/(v m+p-1) for
     * the interleaved one (schedule.h).  Validation built it already. */
    ptdp_schedule *s;
    res->bubble_formula = ptdp_bubble_formula(c->pp, c->micro_batches);
    res->bubble_words = "(p-1)/(m+p-1)";
    if (c->token_slices > 1) {
        /* TeraPipe: GPipe over m k units, as if the slices cost the same;
         * later slices attend to more keys, so the measured bubble differs */
        res->bubble_formula = ptdp_bubble_formula(c->pp, c->micro_batches * c->token_slices);
        res->bubble_words = "(p-1)/(k*m+p-1), uniform slices";
    } else if (ptdp_schedule_create_v(c->schedule ? c->schedule : "1f1b", c->pp, c->micro_batches,
                                      ptdp_train_virtual_stages(c), &s) == 0) {
        res->bubble_formula = ptdp_schedule_bubble_formula(s, &res->bubble_words);
        ptdp_schedule_destroy(s);
    }
    /* Idle fraction of every device's pipeline phase, averaged over devices
     * and steps.  The phase starts when the first device of the step starts
     * and ends when the last one reaches its optimizer step. */
    double sum = 0;
    int count = 0;
    for (int s = 0; s < c->steps; s++) {
        double t0 = INFINITY, t1 = -INFINITY;
        for (int d = 0; d < r->world; d++) {
            const device_step *x = &r->ds[(size_t)s * r->world + d];
            t0 = fmin(t0, x->v0);
            t1 = fmax(t1, x->phase_end);
        }
        if (!(t1 > t0))
            continue;
        for (int d = 0; d < r->world; d++) {
            sum += 1.0 - r->ds[(size_t)s * r->world + d].busy / (t1 - t0);
            count++;
        }
    }
    res->bubble_measured = count ? sum / count : 0;
}

int ptdp_train(const ptdp_train_config *cfg, const ptdp_launch_opts *opts,
               ptdp_step_observer observer, void *observer_ctx,
               ptdp_train_result *result, char *msg, size_t msglen)
{
    int rc = ptdp_train_validate(cfg, msg, msglen);
    if (rc != 0)
        return rc;
    int world = cfg->dp * ptdp_train_cp(cfg) * cfg->tp * cfg->pp;
    run r = {
        .cfg = cfg, .world = world, .observer = observer, .observer_ctx = observer_ctx,
        .first_step = cfg->resume ? cfg->resume->step : 0, .result = result,
        .targets_per_sample = 1,
    };
    size_t steps = (size_t)(cfg->steps > 0 ? cfg->steps : 1);
    r.ds = calloc(steps * (size_t)world, sizeof *r.ds);
    r.done = calloc(steps, sizeof *r.done);
    r.peak_acts = calloc((size_t)world, sizeof *r.peak_acts);
    r.peak_wgrad = calloc((size_t)world, sizeof *r.peak_wgrad);
    r.peak_in_flight = calloc((size_t)world, sizeof *r.peak_in_flight);
    if (result != NULL) {
        memset(result, 0, sizeof *result);
        result->steps = cfg->steps;
        result->log = calloc(steps, sizeof *result->log);
        result->peak_acts = calloc((size_t)cfg->pp, sizeof *result->peak_acts);
        result->peak_wgrad = calloc((size_t)cfg->pp, sizeof *result->peak_wgrad);
        result->param_elements = calloc((size_t)world, sizeof *result->param_elements);
    }
    if (r.ds == NULL || r.done == NULL || r.peak_acts == NULL || r.peak_in_flight == NULL || r.peak_wgrad == NULL ||
        (result != NULL && (result->log == NULL || result->peak_acts == NULL || result->peak_wgrad == NULL ||
                            result->param_elements == NULL))) {
        snprintf(msg, msglen, "host out of memory");
        rc = PTDP_ENOMEM;
        goto out;
    }
    pthread_mutex_init(&r.mu, NULL);
    for (ptdp_state *s = cfg->final_state; s != NULL; s = NULL) {
        s->seed = cfg->seed;
        s->batch = cfg->batch;
        s->step = r.first_step + cfg->steps;
    }
    if (cfg->init_state != NULL) {
        cfg->init_state->seed = cfg->seed;
        cfg->init_state->batch = cfg->batch;
        cfg->init_state->step = r.first_step;
    }

    ptdp_launch_result local;
    ptdp_launch_opts o = opts ? *opts : (ptdp_launch_opts){ 0 };
    if (o.result == NULL)
        o.result = &local;
    rc = ptdp_launch(world, device_main, &r, &o);
    if (rc != 0)
        snprintf(msg, msglen, "%s", o.result->message);
    if (result != NULL)
        result->completed = r.next_report;
    if (o.result == &local)
        ptdp_launch_result_free(&local);
    pthread_mutex_destroy(&r.mu);

    if (rc == 0 && result != NULL) {
        bubble(&r, result);
        for (int d = 0; d < world; d++) {
            int dp_rank, cp_rank, tp_rank, pp_rank;
            ptdp_mesh_coords_cp(cfg->dp, ptdp_train_cp(cfg), cfg->tp, cfg->pp, d, &dp_rank, &cp_rank, &tp_rank,
                                &pp_rank);
            if (r.peak_acts[d] > result->peak_acts[pp_rank])
                result->peak_acts[pp_rank] = r.peak_acts[d];
            if (r.peak_wgrad[d] > result->peak_wgrad[pp_rank])
                result->peak_wgrad[pp_rank] = r.peak_wgrad[d];
        }
    }
out:
    free(r.ds);
    free(r.done);
    free(r.peak_acts);
    free(r.peak_wgrad);
    free(r.peak_in_flight);
    return rc;
}

void ptdp_train_result_free(ptdp_train_result *r)
{
    free(r->log);
    free(r->peak_acts);
    free(r->peak_wgrad);
    free(r->param_elements);
    r->log = NULL;
    r->peak_acts = NULL;
    r->peak_wgrad = NULL;
    r->param_elements = NULL;
}

/* ----------------------------------------------------------------- check */

bool ptdp_check_value(double a, double b, double tol)
{
    return fabs(a - b) <= tol * fmax(1.0, fabs(b));
}

bool ptdp_check_states(const ptdp_state *a, const ptdp_state *b, double tol, ptdp_check_report *rep)
{
    memset(rep, 0, sizeof *rep);
    rep->ok = true;
    double worst_ratio = -1;
    for (int i = 0; i < b->ntensors && i < a->ntensors; i++) {
        const ptdp_state_tensor *ta = &a->t[i], *tb = &b->t[i];
        if (strncmp(tb->name, "optim.", 6) == 0)
            continue;    /* parameters are what must match; moments follow them */
        double max_abs = 0, max_b = 0;
        size_t n = (size_t)tb->rows * (size_t)tb->cols;
        for (size_t k = 0; k < n; k++) {
            double d = fabs((double)ta->data[k] - (double)tb->data[k]);
            double mb = fabs((double)tb->data[k]);
            max_abs = fmax(max_abs, d);
            max_b = fmax(max_b, mb);
        }
        /* "relative" as the rule measures it: against max(1, max|b|). */
        double ratio = max_abs / fmax(1.0, max_b);
        rep->max_abs = fmax(rep->max_abs, max_abs);
        rep->max_rel = fmax(rep->max_rel, ratio);
        if (ratio > worst_ratio) {
            worst_ratio = ratio;
            snprintf(rep->worst, sizeof rep->worst, "%s", tb->name);
        }
        if (!(max_abs <= tol * fmax(1.0, max_b)))
            rep->ok = false;
    }
    return rep->ok;
}
