/*
 * zero3.c — ZeRO stage 3 (FSDP): the parameters themselves are sharded,
 * and a unit of them exists on a device only while it computes.
 *
 * Stages 1 and 2 (zero.c) still keep every parameter on every DP rank:
 * P of them, whatever N.  Stage 3 keeps 1/N.  The model is cut into units
 * (model.h: a block, the embeddings, the head), and each unit into N
 * shards; rank k keeps shard k of every unit — its parameters, their
 * gradient, their optimizer state — and gathers the rest only when the
 * model says it is about to use the unit (ptdp_model_unit):
 *
 *   unit u of the flat buffer      [ shard 0 | shard 1 | shard 2 | shard 3 ]
 *   rank 1 keeps                              [ shard 1 ]
 *
 *   FORWARD_BEGIN u    all-gather u's shards into a buffer ("params")   (N-1)/N |u|
 *                      point u's parameter views into it
 *   FORWARD_END u      free it: the views point at nothing again
 *   BACKWARD_BEGIN u   all-gather again, and a zeroed gradient buffer
 *                      for u ("grads") that the backward adds into
 *   BACKWARD_END u     reduce-scatter the gradient buffer              (N-1)/N |u|
 *                      add my shard into the gradient shard, free both
 *
 * Per micro-batch that is two gathers and one reduce-scatter of every
 * unit, 3 (N-1)/N S bytes: the ZeRO paper's 3Ψ against plain DP's 2Ψ.
 * The memory it buys, per device, with P parameters and AdamW:
 *
 *   params  P/N  + the units gathered at once   (one, two with prefetch)
 *   grads   P/N  + one unit's gradient buffer
 *   optim   2P/N
 *
 * The calls nest: a unit already gathered is not gathered again (a tied
 * embedding that the first and last layers of one stage both use), and is
 * freed at its last END.  Under --overlap the next unit's gather starts on
 * the communication stream as soon as a unit is gathered (prefetch: the
 * next in forward order in a forward, in backward order in a backward),
 * and a unit's reduce-scatter runs while the backward goes on; the data
 * moves at once all the same (stream.c), so the bits are the blocking
 * run's.  One stream serves both, in the order they start: in a backward
 * the next unit's gather queues behind the previous unit's reduce-scatter,
 * so it runs under this unit's compute only if that compute outlasts the
 * reduce-scatter (a forward has no reduce-scatters in the way):
 *
 *   compute   [ bwd u-1 ][ bwd u          ][ bwd u+1 ]
 *   comm          [ RS u-1 ][ gather u+1 ][ RS u ][ gather u+2 ]
 *
 * Since DP ranks run the same schedule over the same model, they make the
 * same unit events in the same order — and so the same collectives.
 *
 * With --fp8-comm (zero3_fp8.c) a unit holding weights that --fp8
 * quantizes travels as their E4M3 codes, one byte an element, and the rest
 * in the store's type; the scales need an all-reduce of amaxes first, and
 * the bits the model reads are the ones it would have quantized itself.
 *
 * With --zero-qgz (ZeRO++'s qgZ, zero3_qgz.c) a unit's reduce-scatter is
 * replaced by two all-to-alls of INT4 or INT8 codes, inside the node and
 * then across nodes, each summing what it received.
 *
 * With --zero-hpz (ZeRO++'s hpZ, zero_hpz.c) a forward's gather also leaves
 * each device 1/k of the unit, k its node's DP ranks, and a backward's
 * gather reads those secondary shards over the node group instead of the
 * primary ones over the whole group: the same bits, 2 of the 3 passes
 * across nodes instead of 3.
 *
 * Mixed precision (mixed.h) uses the same events, with or without ZeRO-3:
 * the stores hold bf16, and the model computes in float.  A unit's bf16
 * parameters (gathered, or read from the whole store m->flat_w16) are
 * widened into a float working copy at BEGIN; at a backward's END its
 * float gradient is rounded into the bf16 store — summed into the whole
 * gradient store m->flat_g16 (stages 0 to 2), or reduce-scattered in bf16
 * (stage 3):
 *
 *   stage 3, bf16   gather bf16 unit ──widen──► float copy ──► model
 *                   model ──► float grad ──round──► bf16 ──reduce-scatter──► += shard
 *   stages 0–2      flat_w16[u] ──widen──► float copy ──► model
 *                   model ──► float grad ──round, +=──► flat_g16[u]
 *
 * A unit the model cut into subunits (a GPT block: its linear layers) is
 * widened subunit by subunit instead, between the subunit's own BEGIN and END
 * (ptdp_model_subunit, below): the gathered bf16 unit stays while the unit is
 * in use, and only the subunit computing is in float.
 */
#include "ptdp/zero.h"

#include <stdlib.h>
#include <string.h>

#include "ptdp/comm.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/mixed.h"
#include "parallel/zero3_fp8.h"
#include "parallel/zero3_qgz.h"
#include "parallel/zero3_qwz.h"
#include "parallel/zero_impl.h"

/* Point the views of unit u's parameters (or gradients) into buf, a copy
 * of the unit's stretch of the flat buffer, or at nothing. */
static void point_unit(ptdp_model *m, int u, const ptdp_zero_unit *unit, ptdp_real *buf, bool grads)
{
    for (int i = 0; i < m->nparams; i++) {
        ptdp_param *p = &m->params[i];
        if (p->unit != u)
            continue;
        ptdp_real *at = buf != NULL ? buf + (p->offset - unit->begin) : NULL;
        if (grads)
            p->g.data = at;
        else
            p->w.data = at;
    }
}

/* ------------------------------------------------------------ gathering */

/* Start (or do) the gather of unit u's parameters, in the store's type:
 * my shard in its place, then an all-gather in place fills the others'.
 * A backward's gather under --zero-hpz reads the node group's secondary
 * pieces instead (zero_hpz.c): the same bits, inside the node. */
static int gather(ptdp_device *dev, ptdp_zero *z, const ptdp_model *m, int k, bool start, bool backward)
{
    ptdp_zero_unit *u = &z->units[k];
    if (ptdp_zero3_fp8_gathers(z, m, k))
        return ptdp_zero3_fp8_gather(dev, z, m, k, start);
    if (z->qwz_block > 0 && !backward)   /* ZeRO++'s qwZ: a forward's gather in INT8 */
        return ptdp_zero3_qwz_gather(dev, z, k, start);
    const size_t n = u->end - u->begin, es = ptdp_store_size(z->store);
    u->gathered = ptdp_alloc_uninit(dev, (n > 0 ? n : 1) * es, PTDP_MEM_PARAMS, "zero3.gathered");
    if (u->gathered == NULL)
        return PTDP_ENOMEM;
    u->prefetched = start;
    u->from_node = false;
    if (backward && ptdp_zero_hpz_holds(z, u))
        return ptdp_zero_hpz_gather(z, u, start);
    memcpy(ptdp_store_at(z->store, u->gathered, u->off), ptdp_store_at(z->store, z->param_shard, u->at), u->len * es);
    if (start)
        return ptdp_all_gather_start(z->dp, PTDP_IN_PLACE, u->gathered, n, z->store, &u->gather);
    return ptdp_all_gather(z->dp, PTDP_IN_PLACE, u->gathered, n, z->store);
}

/* Whether the units are sharded and gathered (the row shards the
 * parameters: ZeRO-3), or read from the whole store (bf16 alone). */
static bool sharded(const ptdp_zero *z)
{
    return z->row->shards_params;
}

/* --overlap: the unit the model will ask for next, gathered ahead. */
static int prefetch(ptdp_device *dev, ptdp_zero *z, const ptdp_model *m, int next, bool backward)
{
    if (!z->overlap || !sharded(z) || next < 0 || next >= z->nunits)
        return PTDP_OK;
    ptdp_zero_unit *u = &z->units[next];
    if (u->w != NULL || u->gathered != NULL)
        return PTDP_OK;   /* gathered already, or on its way */
    return gather(dev, z, m, next, true, backward);
}

/* A unit becomes present: gathered now, or its prefetch waited for
 * (stage 3), and after a forward's gather my hpZ piece kept; then, under
 * bf16, widened into the float copy the model reads. */
static int acquire(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, int k, bool backward)
{
    ptdp_zero_unit *u = &z->units[k];
    if (u->users++ > 0)
        return PTDP_OK;
    int rc = PTDP_OK;
    const void *src;
    if (sharded(z)) {
        if (u->prefetched) {
            u->prefetched = false;
            rc = ptdp_wait(&u->gather);
        } else if (u->gathered == NULL) {
            rc = gather(dev, z, m, k, false, backward);
        }
        if (rc == 0 && u->qwz && backward) {   /* a forward's INT8 prefetch: a backward gathers exact */
            ptdp_free(dev, u->gathered);
            u->gathered = NULL;
            u->qwz = false;
            rc = gather(dev, z, m, k, false, true);
        }
        if (rc == 0 && u->qwz) {   /* qwZ: the float unit from the INT8 wires */
            if ((rc = ptdp_zero3_qwz_rebuild(dev, z, k)) == 0)
                point_unit(m, k, u, u->w, false);
            return rc;
        }
        if (rc == 0 && ptdp_zero3_fp8_gathers(z, m, k)) {   /* the float unit from the codes */
            if ((rc = ptdp_zero3_fp8_rebuild(dev, z, m, k)) == 0)
                point_unit(m, k, u, u->w, false);
            return rc;
        }
        if (rc == 0 && !backward)
            rc = ptdp_zero_hpz_keep(dev, z, u);
        if (rc != 0)
            return rc;
        src = u->gathered;
    } else {
        src = ptdp_store_at(PTDP_BF16, m->flat_w16, u->begin);   /* bf16, the whole store */
    }
    if (u->in_subunits)
        return PTDP_OK;   /* bf16, gathered or in the store: widened subunit by subunit */
    if (z->store == PTDP_BF16) {
        size_t n = u->end - u->begin;
        if ((u->w = ptdp_alloc_uninit(dev, (n > 0 ? n : 1) * sizeof(ptdp_real), PTDP_MEM_PARAMS,
                                      "bf16.working")) == NULL)
            return PTDP_ENOMEM;
        ptdp_store_to_real(PTDP_BF16, u->w, src, n);
        if (!sharded(z) && !backward && z->qwz_ranks > 0)   /* bf16's --check device of a qwZ run */
            ptdp_qwz_quantize_unit(u->w, n, z->qwz_ranks, z->qwz_block);
        ptdp_free(dev, u->gathered);
        u->gathered = NULL;
    } else {
        u->w = u->gathered;   /* float: the gathered buffer is the model's */
    }
    point_unit(m, k, u, u->w, false);
    return PTDP_OK;
}

static void release(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, int k, bool backward)
{
    ptdp_zero_unit *u = &z->units[k];
    if (u->users <= 0 || --u->users > 0)
        return;
    if (backward)
        ptdp_zero_hpz_backward_done(dev, z, u);
    ptdp_zero3_fp8_release(z, m, k);
    point_unit(m, k, u, NULL, false);
    if (u->gathered != u->w)
        ptdp_free(dev, u->gathered);
    ptdp_free(dev, u->w);
    u->w = NULL;
    u->gathered = NULL;
}

/* ------------------------------------------------------------ gradients */

/* g_k += (the unit's gradient summed over the DP ranks)_k, then free it. */
static void accumulate(ptdp_device *dev, ptdp_zero *z, void *buf, size_t off, size_t len, size_t at)
{
    ptdp_store_add(z->store, ptdp_store_at(z->store, z->grad_shard, at), ptdp_store_at(z->store, buf, off), len);
    ptdp_free(dev, buf);
}

/* --overlap: the reduce-scatter started at the previous BACKWARD_END. */
static int finish_pending(ptdp_device *dev, ptdp_zero *z)
{
    if (z->pending == NULL)
        return PTDP_OK;
    int rc = ptdp_wait(&z->request);
    if (rc == 0)
        accumulate(dev, z, z->pending, z->pending_off, z->pending_len, z->pending_at);
    else
        ptdp_free(dev, z->pending);
    z->pending = NULL;
    return rc;
}

static int grads_begin(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, int k)
{
    ptdp_zero_unit *u = &z->units[k];
    if (u->grad_users++ > 0)
        return PTDP_OK;
    size_t n = u->end - u->begin;
    if (u->in_subunits) {   /* each subunit's float gradient is its own (subunit_end) */
        if (sharded(z) && (u->g16 = ptdp_alloc(dev, (n > 0 ? n : 1) * sizeof(ptdp_bf16), PTDP_MEM_GRADS,
                                                  "zero3.unit_grad_bf16")) == NULL)
            return PTDP_ENOMEM;
        return PTDP_OK;
    }
    /* zero-filled by the arena: the backward adds into it */
    if ((u->g = ptdp_alloc(dev, (n > 0 ? n : 1) * sizeof(ptdp_real), PTDP_MEM_GRADS, "zero3.unit_grad")) == NULL)
        return PTDP_ENOMEM;
    point_unit(m, k, u, u->g, true);
    return PTDP_OK;
}

static int grads_end(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, int k)
{
    ptdp_zero_unit *u = &z->units[k];
    if (u->grad_users <= 0 || --u->grad_users > 0)
        return PTDP_OK;
    ptdp_real *gf = u->g;
    size_t n = u->end - u->begin;
    u->g = NULL;
    point_unit(m, k, u, NULL, true);
    void *g = gf;
    if (u->in_subunits) {   /* the subunits rounded theirs already */
        if (!sharded(z))
            return PTDP_OK;
        g = u->g16;
        u->g16 = NULL;
    } else if (!sharded(z)) {   /* bf16, unsharded: round it into the gradient store */
        ptdp_store_add_real(PTDP_BF16, ptdp_store_at(PTDP_BF16, m->flat_g16, u->begin), gf, n);
        ptdp_free(dev, gf);
        return PTDP_OK;
    } else if (z->store == PTDP_BF16) {   /* sent and summed in bf16: half the bytes */
        if ((g = ptdp_alloc_uninit(dev, (n > 0 ? n : 1) * sizeof(ptdp_bf16), PTDP_MEM_GRADS, "zero3.unit_grad_bf16"))
            == NULL) {
            ptdp_free(dev, gf);
            return PTDP_ENOMEM;
        }
        ptdp_store_from_real(PTDP_BF16, g, gf, n);
        ptdp_free(dev, gf);
    }
    if (z->qgz_bits > 0) {   /* ZeRO++'s qgZ: two quantized all-to-alls in its place (float) */
        int rc = ptdp_zero3_qgz_reduce(dev, z, k, gf);
        ptdp_free(dev, gf);
        return rc;
    }
    int rc = finish_pending(dev, z);   /* one unit's reduce-scatter at a time */
    if (rc != 0) {
        ptdp_free(dev, g);
        return rc;
    }
    if (z->overlap) {   /* waited for at the next unit's END, or before the optimizer */
        z->pending = g;
        z->pending_off = u->off;
        z->pending_len = u->len;
        z->pending_at = u->at;
        return ptdp_reduce_scatter_start(z->dp, PTDP_IN_PLACE, g, n, z->store, PTDP_SUM, &z->request);
    }
    rc = ptdp_reduce_scatter(z->dp, PTDP_IN_PLACE, g, n, z->store, PTDP_SUM);
    if (rc == 0)
        accumulate(dev, z, g, u->off, u->len, u->at);
    else
        ptdp_free(dev, g);
    return rc;
}

/* ------------------------------------------------ the model's unit events */

static int on_unit(ptdp_device *dev, ptdp_model *m, int k, ptdp_unit_event ev, void *ctx)
{
    ptdp_zero *z = ctx;
    if (k < 0 || k >= z->nunits)
        return ptdp_fail(dev, PTDP_EINVAL, "ZeRO-3: unit %d of a model with %d", k, z->nunits);
    int rc = PTDP_OK;
    switch (ev) {
    case PTDP_UNIT_FORWARD_BEGIN:    /* a forward walks the units from the last down */
        if ((rc = acquire(dev, z, m, k, false)) == 0)
            rc = prefetch(dev, z, m, k - 1, false);
        break;
    case PTDP_UNIT_BACKWARD_BEGIN:   /* a backward from the first up (params[] order) */
        if ((rc = acquire(dev, z, m, k, true)) == 0 && (rc = grads_begin(dev, z, m, k)) == 0)
            rc = prefetch(dev, z, m, k + 1, true);
        break;
    case PTDP_UNIT_BACKWARD_END:
        rc = grads_end(dev, z, m, k);
        release(dev, z, m, k, true);
        break;
    case PTDP_UNIT_FORWARD_END:
        release(dev, z, m, k, false);
        break;
    }
    return rc;
}

/* ------------------------------------------------------------ subunits */

/* Under bf16 a unit the model cut into subunits (model.h: the GPT's linear
 * layers) is never widened whole: its bf16 parameters stay as they are —
 * gathered (stage 3) or in the store — and a subunit is widened into a
 * float copy at its BEGIN, its float gradient made beside it in a
 * backward and rounded at its END, into the unit's bf16 gradient (stage
 * 3, reduce-scattered at the unit's END as before) or added into the
 * gradient store.  Each element is rounded once either way, so the bits
 * are a whole unit's; what changes is the float that is alive:
 *
 *   whole unit   gathered bf16 |u| ─► float |u| + float grad |u| ─► bf16 grad |u|
 *   in subunits    gathered bf16 |u| + bf16 grad |u|   (stage 3)
 *                + float |p| + float grad |p|        one subunit at a time */
static void point_subunit(ptdp_model *m, int k, const ptdp_zero_subunit *pc, ptdp_real *buf, bool grads)
{
    for (int i = 0; i < m->nparams; i++) {
        ptdp_param *p = &m->params[i];
        if (p->subunit != k)
            continue;
        ptdp_real *at = buf != NULL ? buf + (p->offset - pc->begin) : NULL;
        if (grads)
            p->g.data = at;
        else
            p->w.data = at;
    }
}

static int subunit_begin(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, int k, bool backward)
{
    ptdp_zero_subunit *pc = &z->subunits[k];
    const ptdp_zero_unit *u = &z->units[pc->unit];
    const size_t n = pc->end - pc->begin;
    if (u->users <= 0)
        return ptdp_fail(dev, PTDP_EINVAL, "subunit %d of unit %d begins outside its unit", k, pc->unit);
    if (pc->users++ == 0) {
        const void *src = sharded(z) ? ptdp_store_at(PTDP_BF16, u->gathered, pc->begin - u->begin)
                                        : ptdp_store_at(PTDP_BF16, m->flat_w16, pc->begin);
        if ((pc->w = ptdp_alloc_uninit(dev, (n > 0 ? n : 1) * sizeof(ptdp_real), PTDP_MEM_PARAMS,
                                       "bf16.working")) == NULL)
            return PTDP_ENOMEM;
        ptdp_store_to_real(PTDP_BF16, pc->w, src, n);
        point_subunit(m, k, pc, pc->w, false);
    }
    if (backward && pc->grad_users++ == 0) {   /* zero-filled: the backward adds into it */
        if ((pc->g = ptdp_alloc(dev, (n > 0 ? n : 1) * sizeof(ptdp_real), PTDP_MEM_GRADS, "bf16.subunit_grad")) == NULL)
            return PTDP_ENOMEM;
        point_subunit(m, k, pc, pc->g, true);
    }
    return PTDP_OK;
}

static void subunit_end(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, int k, bool backward)
{
    ptdp_zero_subunit *pc = &z->subunits[k];
    const ptdp_zero_unit *u = &z->units[pc->unit];
    const size_t n = pc->end - pc->begin;
    if (backward && pc->grad_users > 0 && --pc->grad_users == 0) {
        if (sharded(z))   /* rounded once, as a whole unit's would be */
            ptdp_store_from_real(PTDP_BF16, ptdp_store_at(PTDP_BF16, u->g16, pc->begin - u->begin), pc->g, n);
        else
            ptdp_store_add_real(PTDP_BF16, ptdp_store_at(PTDP_BF16, m->flat_g16, pc->begin), pc->g, n);
        point_subunit(m, k, pc, NULL, true);
        ptdp_free(dev, pc->g);
        pc->g = NULL;
    }
    if (pc->users > 0 && --pc->users == 0) {
        point_subunit(m, k, pc, NULL, false);
        ptdp_free(dev, pc->w);
        pc->w = NULL;
    }
}

static int on_subunit(ptdp_device *dev, ptdp_model *m, int k, ptdp_unit_event ev, void *ctx)
{
    ptdp_zero *z = ctx;
    if (k < 0 || k >= z->nsubunits)
        return ptdp_fail(dev, PTDP_EINVAL, "bf16: subunit %d of a model with %d", k, z->nsubunits);
    if (!z->units[z->subunits[k].unit].in_subunits)
        return PTDP_OK;   /* float: the unit's buffer is the model's */
    const bool backward = ev == PTDP_UNIT_BACKWARD_BEGIN || ev == PTDP_UNIT_BACKWARD_END;
    if (ev == PTDP_UNIT_FORWARD_BEGIN || ev == PTDP_UNIT_BACKWARD_BEGIN)
        return subunit_begin(dev, z, m, k, backward);
    subunit_end(dev, z, m, k, backward);
    return PTDP_OK;
}

/* The subunits' ranges, and which units are used in subunits (bf16 only). */
static int subunits_init(ptdp_device *dev, ptdp_zero *z, ptdp_model *m)
{
    z->nsubunits = m->nparams > 0 ? m->nsubunits : 0;
    if (z->nsubunits == 0)
        return PTDP_OK;
    z->subunits = calloc((size_t)z->nsubunits, sizeof *z->subunits);
    if (z->subunits == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    for (int i = m->nparams - 1; i >= 0; i--)
        if (m->params[i].subunit >= 0)
            z->subunits[m->params[i].subunit].begin = m->params[i].offset;
    for (int i = 0; i < m->nparams; i++) {
        const ptdp_param *p = &m->params[i];
        if (p->subunit < 0)
            continue;
        z->subunits[p->subunit].unit = p->unit;
        z->subunits[p->subunit].end = p->offset + ptdp_tensor_numel(p->w);
        z->units[p->unit].in_subunits = z->store == PTDP_BF16 && z->fp8 == NULL && z->qwz_block == 0;   /* rebuilt whole */
    }
    return PTDP_OK;
}

/* ------------------------------------------------------------ set-up */

int ptdp_zero3_init(ptdp_device *dev, ptdp_zero *z, ptdp_model *m)
{
    if (m->device != NULL || m->chunks != NULL)
        return ptdp_fail(dev, PTDP_EINVAL, "ZeRO-3 and bf16 manage one model chunk per device, not %d",
                         m->virtual_stages);
    z->nunits = m->nparams > 0 ? m->nunits : 0;
    z->units = calloc((size_t)(z->nunits > 0 ? z->nunits : 1), sizeof *z->units);
    if (z->units == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    /* A unit is a run of params[], so its stretch of the flat buffer is
     * from its first parameter's offset to its last one's end. */
    for (int i = m->nparams - 1; i >= 0; i--)
        z->units[m->params[i].unit].begin = m->params[i].offset;
    for (int i = 0; i < m->nparams; i++)
        z->units[m->params[i].unit].end = m->params[i].offset + ptdp_tensor_numel(m->params[i].w);
    z->qwz_block = m->mesh->qwz;   /* --zero-qwz (zero3_qwz.c) */
    z->qwz_ranks = m->mesh->qwz_ranks;
    ptdp_zero3_qwz_count(dev, z);
    int rc = ptdp_zero3_qgz_init(dev, z, m);   /* --zero-qgz (zero3_qgz.c): its groups */
    if (rc == 0)
        rc = ptdp_zero3_fp8_init(dev, z, m);   /* --fp8-comm: z->fp8, before the subunits */
    return rc == 0 ? subunits_init(dev, z, m) : rc;
}

/* ZeRO-3's row: my shard of every unit, ptdp_share of it over DP, packed
 * one after the other in the shard buffers. */
int ptdp_zero3_own_unit_shards(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, double bucket_mb)
{
    (void)m;
    (void)bucket_mb;   /* no buckets: a unit's gradient is reduce-scattered at its backward's end */
    const int N = ptdp_comm_size(z->dp), k = ptdp_comm_rank(z->dp);
    z->ranges = calloc((size_t)(z->nunits > 0 ? z->nunits : 1), sizeof *z->ranges);
    if (z->ranges == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    size_t at = 0;
    for (int u = 0; u < z->nunits; u++) {
        ptdp_zero_unit *x = &z->units[u];
        ptdp_share(x->end - x->begin, N, k, &x->off, &x->len);
        x->at = at;
        z->ranges[u] = (ptdp_zero_range){ x->begin + x->off, x->begin + x->off + x->len, at };
        at += x->len;
    }
    z->nranges = z->nunits;
    z->len = at;
    return PTDP_OK;
}

void ptdp_zero3_hook(ptdp_model *m, ptdp_zero *z)
{
    m->unit_hook = on_unit;
    m->subunit_hook = on_subunit;
    m->unit_hook_ctx = z;
}

/* ZeRO-3's sum, once a step before the optimizer: every reduce-scatter
 * done, no prefetch left over. */
int ptdp_zero3_sum(ptdp_device *dev, ptdp_zero *z, ptdp_model *m)
{
    (void)m;
    int rc = finish_pending(dev, z);
    for (int u = 0; u < z->nunits; u++) {
        ptdp_zero_unit *x = &z->units[u];
        if (!x->prefetched)
            continue;
        int w = ptdp_wait(&x->gather);   /* gathered ahead, never asked for */
        rc = rc ? rc : w;
        x->prefetched = false;
        if (x->users == 0) {
            ptdp_free(dev, x->gathered);
            ptdp_free(dev, x->fp8_scales);
            x->gathered = NULL;
            x->fp8_scales = NULL;
            x->qwz = false;
        }
    }
    ptdp_zero_hpz_drop_all(dev, z);   /* the optimizer is about to change what they copied */
    return rc;
}

void ptdp_zero3_free(ptdp_device *dev, ptdp_zero *z, ptdp_model *m)
{
    ptdp_zero_hpz_drop_all(dev, z);
    for (int u = 0; u < z->nunits; u++) {   /* what a failed step left */
        ptdp_zero_unit *x = &z->units[u];
        if (x->gathered != x->w)
            ptdp_free(dev, x->gathered);
        ptdp_free(dev, x->w);
        ptdp_free(dev, x->g);
        ptdp_free(dev, x->g16);
        ptdp_free(dev, x->fp8_scales);
    }
    for (int i = 0; i < z->nsubunits; i++) {
        ptdp_free(dev, z->subunits[i].w);
        ptdp_free(dev, z->subunits[i].g);
    }
    free(z->subunits);
    z->subunits = NULL;
    z->nsubunits = 0;
    for (int i = 0; i < m->nparams; i++)
        m->params[i].w.data = m->params[i].g.data = NULL;
    free(z->units);
    z->units = NULL;
    z->nunits = 0;
    m->unit_hook = NULL;
    m->subunit_hook = NULL;
    m->unit_hook_ctx = NULL;
}
