/*
 * zero.c — ZeRO stages 1 and 2: each DP rank updates only its shard
 * (stage 3, the parameters' sharding, is zero3.c; the once-per-step part
 * here serves it too).
 *
 * zero.h has the idea, the memory table and the bytes.  This file is the
 * once-per-step part, in the order it runs:
 *
 *   stage 2, after every micro-batch's backward:
 *       bucket (full size) --reduce-scatter--> my shard --+=--> grad_shard
 *   once per step:
 *       stage 1: reduce-scatter the full gradient in place, bucket by bucket
 *                (with --overlap: wait for what the backward started)
 *       norm over my ranges, all-reduced over DP, TP, PP    (the trainer clips
 *       AdamW on my ranges of the parameters                 and steps between)
 *       all-gather the parameters in place (stage 1: bucket by bucket)
 *
 * In place means a range stays at its own offset of the flat buffer, so
 * its gradient and parameters have the same element indices on every
 * rank; its optimizer state sits at `at` of the compact shard.
 */
#include "ptdp/zero.h"

#include <stdlib.h>
#include <string.h>

#include "ptdp/comm.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/mixed.h"
#include "ptdp/optim.h"
#include "parallel/dp_impl.h"
#include "parallel/model_impl.h"
#include "parallel/zero_impl.h"

/* ----------------------------------------------------------------- setup */

bool ptdp_zero_owned(const ptdp_zero *z, size_t begin, size_t end, size_t *b, size_t *e, size_t *at)
{
    for (int i = 0; i < z->nranges; i++) {
        const ptdp_zero_range *r = &z->ranges[i];
        size_t lo = begin > r->begin ? begin : r->begin, hi = end < r->end ? end : r->end;
        if (lo < hi) {
            *b = lo;
            *e = hi;
            *at = r->at + (lo - r->begin);
            return true;
        }
    }
    return false;
}

/* Where the gradient of flat element `flat`, held at shard index `at`,
 * lies in the store ptdp_zero_reduce_gradients gives: the full buffer
 * (stages 0 and 1) or the shard (2 and 3). */
static size_t grad_index(const ptdp_zero *z, size_t flat, size_t at)
{
    return z->stage >= 2 ? at : flat;
}

/* The ranges of what I own that the norm counts: the intersection of my
 * ranges with each counted parameter, adjacent ranges merged. */
static int norm_ranges(ptdp_zero *z, const ptdp_model *m)
{
    z->nnorm = 0;
    z->norm = calloc((size_t)m->nparams + 1, sizeof *z->norm);
    if (z->norm == NULL)
        return PTDP_ENOMEM;
    for (int i = 0; i < m->nparams; i++) {
        const ptdp_param *p = &m->params[i];
        size_t b, e, at;
        if (!ptdp_param_counted_here(m, p))
            continue;   /* the same gradient on every TP rank: count it once */
        if (!ptdp_zero_owned(z, p->offset, p->offset + ptdp_tensor_numel(p->w), &b, &e, &at))
            continue;
        ptdp_zero_range *last = z->nnorm > 0 ? &z->norm[z->nnorm - 1] : NULL;
        if (last != NULL && last->end == b && last->at + (last->end - last->begin) == at)
            last->end = e;
        else
            z->norm[z->nnorm++] = (ptdp_zero_range){ b, e, at };
    }
    return PTDP_OK;
}

/* Point every parameter's gradient view into `flat` (or at nothing). */
static void point_gradients(ptdp_model *m, ptdp_real *flat)
{
    m->flat_g = flat;
    for (int i = 0; i < m->nparams; i++)
        m->params[i].g.data = flat ? flat + m->params[i].offset : NULL;
}

/* The element i of a store of this run's type. */
static void *at(const ptdp_zero *z, void *buf, size_t i)
{
    return ptdp_store_at(z->store, buf, i);
}

/* What the model's initial (float) buffers become: the stores each stage
 * keeps (zero.h's table), in the store's type; under bf16 also the float
 * master weights of what I own, bf16(initial value) widened, so that the
 * parameter the model sees is bf16(master) from the first step on.  Then
 * the model's float buffers go where something else now holds them. */
static int make_stores(ptdp_device *dev, ptdp_zero *z, ptdp_model *m)
{
    const size_t es = ptdp_store_size(z->store), len = z->len > 0 ? z->len : 1;
    const bool bf16 = z->store == PTDP_BF16;
    if (bf16) {
        if ((z->master = ptdp_alloc(dev, len * sizeof(ptdp_real), PTDP_MEM_OPTIM, "optim.master")) == NULL)
            return PTDP_ENOMEM;
        for (int i = 0; i < z->nranges; i++)
            for (size_t k = z->ranges[i].begin; k < z->ranges[i].end; k++)
                z->master[z->ranges[i].at + (k - z->ranges[i].begin)] =
                    ptdp_bf16_to_float(ptdp_bf16_from_float((float)m->flat_w[k]));
    }
    if (z->stage == 3) {   /* my shards of every unit */
        if ((z->param_shard = ptdp_alloc(dev, len * es, PTDP_MEM_PARAMS, "zero3.param_shard")) == NULL)
            return PTDP_ENOMEM;
        for (int i = 0; i < z->nranges; i++)
            ptdp_store_from_real(z->store, at(z, z->param_shard, z->ranges[i].at), m->flat_w + z->ranges[i].begin,
                                 z->ranges[i].end - z->ranges[i].begin);
    } else if (bf16) {
        if ((m->flat_w16 = ptdp_alloc(dev, (m->numel > 0 ? m->numel : 1) * es, PTDP_MEM_PARAMS, "params.bf16")) == NULL)
            return PTDP_ENOMEM;
        ptdp_store_from_real(PTDP_BF16, m->flat_w16, m->flat_w, m->numel);
    }
    if (z->stage >= 2) {   /* the persistent gradient is my shard only */
        const char *name = z->stage == 2 ? "zero2.grad_shard" : "zero3.grad_shard";
        if ((z->grad_shard = ptdp_alloc(dev, len * es, PTDP_MEM_GRADS, name)) == NULL)
            return PTDP_ENOMEM;
    } else if (bf16) {
        if ((m->flat_g16 = ptdp_alloc(dev, (m->numel > 0 ? m->numel : 1) * es, PTDP_MEM_GRADS, "grads.bf16")) == NULL)
            return PTDP_ENOMEM;
    }
    /* Stage 2 replaces the full-size gradient by a bucket that lives during
     * each backward; stage 3 and bf16 give the model its float views only
     * while it uses a unit (zero3.c). */
    if (z->stage >= 2 || bf16) {
        ptdp_free(dev, m->flat_g);
        point_gradients(m, NULL);
    }
    if (z->stage == 3 || bf16) {
        ptdp_free(dev, m->flat_w);
        m->flat_w = NULL;
        for (int i = 0; i < m->nparams; i++)
            m->params[i].w.data = NULL;
        ptdp_zero3_hook(m, z);
    }
    return PTDP_OK;
}

/* Stage 1: DP's buckets, each reduce-scattered, and my shard of each one
 * a range, its state packed one after the other (zero.h's picture).
 * Stage 2 cuts the same way with buckets as large as they get: one per
 * run of parameters of one replica group (the whole buffer, one range,
 * without expert parallelism). */
static int bucket_ranges(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, double bucket_mb)
{
    /* one bucket larger than any buffer: the whole buffer */
    if (ptdp_ddp_init(&z->buckets, m, bucket_mb > 0 ? bucket_mb : 1e9) != 0)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    z->buckets.scatter = true;
    if ((z->ranges = calloc((size_t)(z->buckets.nbuckets > 0 ? z->buckets.nbuckets : 1), sizeof *z->ranges)) == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    z->len = 0;
    for (int b = 0; b < z->buckets.nbuckets; b++) {
        const ptdp_bucket *bk = &z->buckets.buckets[b];
        ptdp_comm *c = ptdp_ddp_comm(z->dp, m, bk);   /* DP's, or an expert bucket's expert-DP group */
        const int n = ptdp_comm_size(c), k = ptdp_comm_rank(c);
        size_t off, len;
        ptdp_share(bk->end - bk->begin, n, k, &off, &len);   /* what the reduce-scatter leaves me */
        if (len == 0)
            continue;
        z->ranges[z->nranges++] = (ptdp_zero_range){ bk->begin + off, bk->begin + off + len, z->len };
        z->len += len;
    }
    z->off = z->nranges > 0 ? z->ranges[0].begin : 0;
    return PTDP_OK;
}

int ptdp_zero_init(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, int stage)
{
    return ptdp_zero_init_buckets(dev, z, m, stage, 0);
}

int ptdp_zero_init_buckets(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, int stage, double bucket_mb)
{
    memset(z, 0, sizeof *z);
    if (stage < 0 || stage > 3)
        return ptdp_fail(dev, PTDP_EINVAL, "ZeRO stage %d: only 0, 1, 2 and 3 exist here", stage);
    if (ptdp_model_check_groups(dev, m) != 0)
        return PTDP_EINVAL;
    z->stage = stage;
    z->dp = m->mesh->dp_comm;
    for (int i = 0; i < m->nparams; i++) {   /* DP's buckets and shards, or (stages 0-2) the expert-DP group's */
        const ptdp_group g = m->params[i].sum.replicas;
        if (g != PTDP_GROUP_DP && (g != PTDP_GROUP_EDP || stage == 3))
            return ptdp_fail(dev, PTDP_EINVAL, "%s is replicated over mesh group %d: the gradient sums here are "
                             "over DP's replicas, or the expert-DP group's without ZeRO-3 (model.h, "
                             "ptdp_grad_sum)", m->params[i].name, (int)g);
        if (ptdp_mesh_group(m->mesh, g) == NULL)
            return ptdp_fail(dev, PTDP_EINVAL, "%s is replicated over mesh group %d, which was not built (mesh.h)",
                             m->params[i].name, (int)g);
    }
    z->numel = m->numel;
    z->store = ptdp_model_store(m);
#ifdef PTDP_DOUBLE
    if (z->store == PTDP_BF16)
        return ptdp_fail(dev, PTDP_EINVAL, "bf16 mixed precision keeps float master weights: it needs the float "
                         "build (ptdp), not the double one");
#endif
    if (stage == 3 || z->store == PTDP_BF16) {
        int rc = ptdp_zero3_init(dev, z, m);   /* the units; stage 3: my ranges of them */
        if (rc != 0)
            return rc;
    }
    if (stage == 1 || stage == 2) {
        int rc = bucket_ranges(dev, z, m, stage == 1 ? bucket_mb : 0);
        if (rc != 0)
            return rc;
    } else if (stage == 0) {
        z->len = m->numel;   /* plain DP: every rank updates the whole buffer */
        if (ptdp_ddp_init(&z->buckets, m, bucket_mb > 0 ? bucket_mb : 1e9) != 0)   /* all-reduced */
            return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
        if ((z->ranges = malloc(sizeof *z->ranges)) == NULL)
            return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
        z->nranges = 1;
        z->ranges[0] = (ptdp_zero_range){ z->off, z->off + z->len, 0 };
    }
    if (norm_ranges(z, m) != 0)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    return make_stores(dev, z, m);
}

void ptdp_zero_free(ptdp_device *dev, ptdp_zero *z, ptdp_model *m)
{
    ptdp_free(dev, z->opt_b);
    ptdp_free(dev, z->opt_a);
    z->opt_a = z->opt_b = NULL;
    if (z->bucket != NULL) {          /* a backward that failed half-way */
        ptdp_free(dev, z->bucket);
        point_gradients(m, NULL);
        if (z->store == PTDP_BF16)
            m->flat_g16 = NULL;
        z->bucket = NULL;
    }
    if (z->pending != NULL) {         /* a step that failed before its wait */
        ptdp_free(dev, z->pending);
        z->pending = NULL;
    }
    if (z->stage == 3 || z->store == PTDP_BF16)
        ptdp_zero3_free(dev, z, m);
    ptdp_free(dev, z->grad_shard);
    z->grad_shard = NULL;
    ptdp_free(dev, z->param_shard);
    z->param_shard = NULL;
    ptdp_free(dev, z->master);
    z->master = NULL;
    free(z->norm);
    z->norm = NULL;
    z->nnorm = 0;
    free(z->ranges);
    z->ranges = NULL;
    z->nranges = 0;
    ptdp_ddp_free(&z->buckets);   /* the data of a started collective has moved at once (stream.c) */
}

/* ----------------------------------------- stage 2: around each backward */

/* Gradient accumulation, on the shard: g_k += (sum over ranks of mb's g)_k,
 * from a bucket whose reduce-scatter is done; then the bucket is freed. */
static void accumulate_and_free(ptdp_device *dev, ptdp_zero *z, void *bucket)
{
    for (int i = 0; i < z->nranges; i++)   /* one range; one per replica group's run with experts */
        ptdp_store_add(z->store, at(z, z->grad_shard, z->ranges[i].at), at(z, bucket, z->ranges[i].begin),
                       z->ranges[i].end - z->ranges[i].begin);
    ptdp_free(dev, bucket);
}

/* Stage 2: each run of one replica group reduce-scattered (or, stage 1,
 * its parameters gathered) in place over its group: the whole buffer over
 * DP without expert parallelism. */
static int over_runs(ptdp_zero *z, ptdp_model *m, void *buf, bool gather)
{
    for (int b = 0; b < z->buckets.nbuckets; b++) {
        const ptdp_bucket *r = &z->buckets.buckets[b];
        ptdp_comm *c = ptdp_ddp_comm(z->dp, m, r);
        void *x = at(z, buf, r->begin);
        int rc = gather ? ptdp_all_gather(c, PTDP_IN_PLACE, x, r->end - r->begin, z->store)
                        : ptdp_reduce_scatter(c, PTDP_IN_PLACE, x, r->end - r->begin, z->store, PTDP_SUM);
        if (rc != 0)
            return rc;
    }
    return PTDP_OK;
}

/* Overlap: wait for the reduce-scatter started after the previous backward. */
static int finish_pending(ptdp_device *dev, ptdp_zero *z)
{
    if (z->pending == NULL)
        return PTDP_OK;
    int rc = ptdp_wait(&z->request);
    if (rc == 0)
        accumulate_and_free(dev, z, z->pending);
    else
        ptdp_free(dev, z->pending);
    z->pending = NULL;
    return rc;
}

int ptdp_zero_backward_begin(ptdp_device *dev, ptdp_zero *z, ptdp_model *m)
{
    if (z->stage != 2)
        return PTDP_OK;
    int rc = finish_pending(dev, z);   /* one bucket at a time */
    if (rc != 0)
        return rc;
    /* Zero-filled by the arena: the backward accumulates into it (under
     * bf16 through zero3.c's flush of each unit into m->flat_g16). */
    z->bucket = ptdp_alloc(dev, z->numel * ptdp_store_size(z->store), PTDP_MEM_COMM, "zero2.grad_bucket");
    if (z->bucket == NULL)
        return PTDP_ENOMEM;
    if (z->store == PTDP_BF16)
        m->flat_g16 = z->bucket;
    else
        point_gradients(m, z->bucket);
    return PTDP_OK;
}

int ptdp_zero_backward_end(ptdp_device *dev, ptdp_zero *z, ptdp_model *m)
{
    if (z->stage != 2)
        return PTDP_OK;
    /* This micro-batch's gradient, summed over the DP ranks' micro-batches
     * of the same index: shard k lands at its offset inside the bucket. */
    void *bucket = z->bucket;
    z->bucket = NULL;
    point_gradients(m, NULL);
    if (z->store == PTDP_BF16)
        m->flat_g16 = NULL;
    if (z->overlap && z->buckets.nbuckets == 1) {   /* waited for before the next bucket, or the optimizer
                                                       (one run; expert runs are blocking) */
        z->pending = bucket;
        return ptdp_reduce_scatter_start(z->dp, PTDP_IN_PLACE, bucket, z->numel, z->store, PTDP_SUM,
                                         &z->request);
    }
    int rc = over_runs(z, m, bucket, false);
    if (rc == 0)
        accumulate_and_free(dev, z, bucket);
    else
        ptdp_free(dev, bucket);
    return rc;
}

/* -------------------------------------------------------- once per step */

/* ZeRO and a parameter whose gradient is summed over a group beyond DP
 * (model.h, ptdp_grad_sum: a tied embedding's copies on two stages, an SP
 * LayerNorm's on the TP ranks): once the gradient is reduce-scattered it
 * is spread over the DP ranks' shards — and differently on the two
 * stages, whose flat buffers differ.  Make each such tensor's DP-summed
 * gradient whole on every DP rank (an all-reduce of the ranges, zeros
 * elsewhere: adding zeros changes no bit), sum it over its further groups
 * (ptdp_model_sum_groups), and take my range back into `shard`, the store
 * ptdp_zero_reduce_gradients gives (grad_index says where).  As with plain
 * DP, the DP sum comes first and the copies are added by one all-reduce,
 * so every copy holds the same bits whatever algorithm ran. */
static int sum_groups_whole(ptdp_zero *z, ptdp_model *m, void *shard, bool summed)
{
    ptdp_device *dev = ptdp_comm_device(z->dp);
    int rc = PTDP_OK;
    if (!ptdp_model_has_groups(m))
        return PTDP_OK;
    ptdp_real **whole = calloc((size_t)m->nparams, sizeof *whole);
    if (whole == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    for (int i = 0; rc == 0 && i < m->nparams; i++) {
        ptdp_param *p = &m->params[i];
        if (p->sum.also == 0)
            continue;
        size_t n = ptdp_tensor_numel(p->g), b, e, at;
        if ((whole[i] = ptdp_alloc(dev, n * sizeof(ptdp_real), PTDP_MEM_COMM, "zero2.tied")) == NULL) {
            rc = PTDP_ENOMEM;
            break;
        }
        if (ptdp_zero_owned(z, p->offset, p->offset + n, &b, &e, &at))
            ptdp_store_to_real(z->store, whole[i] + (b - p->offset),
                               ptdp_store_at(z->store, shard, grad_index(z, b, at)), e - b);
        /* the pieces of it over its replicas: DP's, or an expert's expert-DP group
         * (an expert with a further group: DualPipe's mirror) */
        ptdp_comm *replicas = p->sum.replicas == PTDP_GROUP_DP ? z->dp : ptdp_mesh_group(m->mesh, p->sum.replicas);
        if (!summed)   /* stage 0 (bf16) holds the DP sum whole already */
            rc = ptdp_all_reduce(replicas, whole[i], whole[i], n, PTDP_REAL, PTDP_SUM);
        p->g.data = whole[i];
    }
    if (rc == 0)
        rc = ptdp_model_sum_groups(dev, m);
    for (int i = 0; i < m->nparams; i++) {
        ptdp_param *p = &m->params[i];
        if (whole[i] == NULL)
            continue;
        size_t n = ptdp_tensor_numel(p->g), b, e, at;
        if (rc == 0 && ptdp_zero_owned(z, p->offset, p->offset + n, &b, &e, &at))
            ptdp_store_from_real(z->store, ptdp_store_at(z->store, shard, grad_index(z, b, at)),
                                 whole[i] + (b - p->offset), e - b);
        p->g.data = m->flat_g ? m->flat_g + p->offset : NULL;   /* back where it was */
        ptdp_free(dev, whole[i]);
    }
    free(whole);
    return rc;
}

/* The full gradient store of stages 0 and 1. */
static void *grad_store(ptdp_zero *z, ptdp_model *m)
{
    return z->store == PTDP_BF16 ? (void *)m->flat_g16 : (void *)m->flat_g;
}

int ptdp_zero_reduce_gradients(ptdp_zero *z, ptdp_model *m, void **grad)
{
    int rc = PTDP_OK;
    if (z->stage == 1) {
        /* the same reduce-scatters, bucket by bucket, either way (zero.h) */
        rc = z->overlap ? ptdp_ddp_wait(&z->buckets) : ptdp_ddp_all_reduce(z->dp, &z->buckets, m);
        *grad = grad_store(z, m);
        if (rc == 0)
            rc = sum_groups_whole(z, m, *grad, false);
    } else if (z->stage == 2) {
        if ((rc = finish_pending(ptdp_comm_device(z->dp), z)) == 0)
            rc = sum_groups_whole(z, m, z->grad_shard, false);
        *grad = z->grad_shard;
    } else if (z->stage == 3) {
        if ((rc = ptdp_zero3_finish(ptdp_comm_device(z->dp), z)) == 0)
            rc = sum_groups_whole(z, m, z->grad_shard, false);
        *grad = z->grad_shard;
    } else {
        /* stage 0: the caller's all-reduce has summed it; under bf16 the
         * model's float views exist only in a backward, so the tied copies
         * are added here, as for the shards */
        *grad = grad_store(z, m);
        if (z->store == PTDP_BF16)
            rc = sum_groups_whole(z, m, *grad, true);
    }
    return rc;
}

/* Whether some parameters are experts held apart by expert parallelism. */
static bool experts_apart(const ptdp_model *m)
{
    for (int i = 0; i < m->nparams; i++)
        if (m->params[i].sum.replicas == PTDP_GROUP_EDP)
            return ptdp_comm_size(ptdp_mesh_group(m->mesh, PTDP_GROUP_EP)) > 1;
    return false;
}

/* Plain DP with expert parallelism: every replica holds the whole dense
 * gradient, but only its EP rank's experts — so the dense squares are
 * counted here and the experts' summed over the EP group. */
static int stage0_experts_sumsq(const ptdp_zero *z, const ptdp_model *m, const void *grad, double *local)
{
    double dense = 0, experts = 0;
    for (int i = 0; i < m->nparams; i++) {
        const ptdp_param *p = &m->params[i];
        if (!ptdp_param_counted_here(m, p))
            continue;
        const double s = ptdp_store_sum_squares(z->store, at(z, (void *)grad, p->offset), ptdp_tensor_numel(p->w));
        *(p->sum.replicas == PTDP_GROUP_EDP ? &experts : &dense) += s;
    }
    int rc = ptdp_all_reduce(ptdp_mesh_group(m->mesh, PTDP_GROUP_EP), &experts, &experts, 1, PTDP_F64, PTDP_SUM);
    *local = dense + experts;
    return rc;
}

int ptdp_zero_grad_sumsq(ptdp_zero *z, const ptdp_model *m, const void *grad, double *sumsq)
{
    /* grad holds element begin of the flat buffer at grad_index (stage 1:
     * begin itself; 2 and 3: at, from ptdp_zero_owned). */
    double local = 0;
    for (int r = 0; r < z->nnorm; r++)
        local += ptdp_store_sum_squares(z->store, at(z, (void *)grad, grad_index(z, z->norm[r].begin, z->norm[r].at)),
                                        z->norm[r].end - z->norm[r].begin);
    int rc = PTDP_OK;
    if (z->stage == 0 && experts_apart(m))   /* replicas count the dense part, the EP ranks each their experts */
        rc = stage0_experts_sumsq(z, m, grad, &local);
    else if (z->stage > 0 && ptdp_comm_size(z->dp) > 1)
        rc = ptdp_all_reduce(z->dp, &local, &local, 1, PTDP_F64, PTDP_SUM);
    if (rc == 0)
        rc = ptdp_model_sum_over_shards((ptdp_model *)m, &local);
    *sumsq = local;
    return rc;
}

int ptdp_zero_gather_params(ptdp_zero *z, ptdp_model *m)
{
    if (z->stage == 0 || z->stage == 3)   /* replicas already, or kept sharded */
        return PTDP_OK;
    if (z->stage == 1)   /* my shard of each bucket to every rank */
        return ptdp_ddp_all_gather_params(z->dp, &z->buckets, m);
    return over_runs(z, m, z->store == PTDP_BF16 ? (void *)m->flat_w16 : (void *)m->flat_w, true);
}

void *ptdp_zero_param_shard(ptdp_zero *z, ptdp_model *m)
{
    if (z->stage == 3)
        return z->param_shard;
    return at(z, z->store == PTDP_BF16 ? (void *)m->flat_w16 : (void *)m->flat_w, z->off);
}

void *ptdp_zero_range_params(ptdp_zero *z, ptdp_model *m, int i)
{
    if (z->stage == 3)
        return at(z, z->param_shard, z->ranges[i].at);
    return at(z, z->store == PTDP_BF16 ? (void *)m->flat_w16 : (void *)m->flat_w, z->ranges[i].begin);
}

void *ptdp_zero_range_grad(const ptdp_zero *z, void *grad, int i)
{
    return at(z, grad, grad_index(z, z->ranges[i].begin, z->ranges[i].at));
}

void ptdp_zero_clear_gradients(ptdp_zero *z, ptdp_model *m)
{
    if (z->stage >= 2)
        memset(z->grad_shard, 0, z->len * ptdp_store_size(z->store));
    else
        memset(grad_store(z, m), 0, z->numel * ptdp_store_size(z->store));
}

/* ------------------------------------------------ the trainer's calls */

void ptdp_zero_set_overlap(ptdp_zero *z, bool overlap)
{
    z->overlap = overlap;
}

int ptdp_zero_optim_init(ptdp_device *dev, ptdp_zero *z, const ptdp_optimizer *o)
{
    z->optim = *o;
    size_t bytes = z->len * sizeof(ptdp_real);
    if (o->kind == PTDP_OPT_ADAMW) {
        z->opt_a = ptdp_alloc(dev, bytes, PTDP_MEM_OPTIM, "optim.exp_avg");
        z->opt_b = z->opt_a ? ptdp_alloc(dev, bytes, PTDP_MEM_OPTIM, "optim.exp_avg_sq") : NULL;
        if (z->opt_b == NULL)
            return PTDP_ENOMEM;
    } else if (o->momentum > 0) {
        if ((z->opt_a = ptdp_alloc(dev, bytes, PTDP_MEM_OPTIM, "optim.momentum_buffer")) == NULL)
            return PTDP_ENOMEM;
    }
    return PTDP_OK;
}

/* With --overlap the stage's last backward of the step starts each DP
 * bucket's all-reduce (ZeRO-1: reduce-scatter, of the same buckets) as
 * soon as the backward has completed it (dp.h); the rest start after.
 * (ZeRO-2 and 3 start theirs non-blocking from their own calls.) */
static bool overlaps_buckets(const ptdp_zero *z, bool last)
{
    return z->overlap && last && z->stage <= 1;
}

int ptdp_zero_before_backward(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, bool last)
{
    int rc = ptdp_zero_backward_begin(dev, z, m);
    if (rc == 0 && overlaps_buckets(z, last))
        rc = ptdp_ddp_overlap_begin(z->dp, &z->buckets, m);
    return rc;
}

int ptdp_zero_after_backward(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, bool last)
{
    int rc = ptdp_zero_backward_end(dev, z, m);
    if (rc == 0 && overlaps_buckets(z, last))
        rc = ptdp_ddp_overlap_end(dev, &z->buckets, m);
    return rc;
}

int ptdp_zero_finish_gradients(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, void **grad)
{
    /* Plain DP: every bucket all-reduced (started in the backward under
     * --overlap), then the declared groups on the whole float gradient
     * (under bf16 the float views exist only in a backward: zero.c's
     * sum_groups_whole does it, as for ZeRO's shards). */
    if (z->stage == 0) {
        int rc = z->overlap ? ptdp_ddp_wait(&z->buckets) : ptdp_ddp_all_reduce(z->dp, &z->buckets, m);
        if (rc == 0 && !m->bf16)
            rc = ptdp_model_sum_groups(dev, m);
        if (rc != 0)
            return rc;
    }
    return ptdp_zero_reduce_gradients(z, m, grad);
}

int ptdp_zero_check_replicas(ptdp_device *dev, ptdp_zero *z, const ptdp_model *m, long step)
{
    if (z->stage == 3)
        return PTDP_OK;   /* no replicas: every DP rank holds its own shard of the parameters */
    return ptdp_ddp_check_replicas(dev, z->dp, m, step);
}

ptdp_real *ptdp_zero_optim_state(const ptdp_zero *z, int slot)
{
    return slot == 0 ? z->opt_a : slot == 1 ? z->opt_b : NULL;
}

bool ptdp_zero_shards_optim(const ptdp_zero *z)
{
    return z->stage > 0;
}

bool ptdp_zero_params_replicated(const ptdp_zero *z)
{
    return z->stage != 3;
}

ptdp_real *ptdp_zero_exact_params(const ptdp_zero *z)
{
    if (z->store == PTDP_BF16)
        return z->master;
    return z->stage == 3 ? (ptdp_real *)z->param_shard : NULL;
}

void ptdp_zero_params_written(ptdp_zero *z)
{
    if (z->store == PTDP_BF16 && z->stage == 3)   /* my bf16 shards: bf16 of the master */
        ptdp_store_from_real(PTDP_BF16, z->param_shard, z->master, z->len);
}

double ptdp_zero_dp_bytes_per_step(int stage, size_t numel, int dp, int micro_batches)
{
    double S = (double)numel * sizeof(ptdp_real), share = (double)(dp - 1) / dp;
    int passes = stage == 2 ? micro_batches + 1    /* reduce-scatters + one all-gather */
               : stage == 3 ? 3 * micro_batches    /* two gathers and a reduce-scatter each */
               : 2;
    return passes * share * S;
}

double ptdp_zero3_dp_bytes_per_step(size_t numel, int dp, int micro_batches, bool recompute)
{
    (void)recompute;   /* a unit's forward again runs inside its backward's gather: no gather more */
    double S = (double)numel * sizeof(ptdp_real), share = (double)(dp - 1) / dp;
    return 3.0 * micro_batches * share * S;
}

ptdp_zero_bytes ptdp_zero_state_bytes(int stage, double psi, int dp, double bw, double bg, double bo)
{
    double N = dp > 0 ? dp : 1;
    ptdp_zero_bytes b = { bw * psi, bg * psi, bo * psi };
    if (stage >= 1)
        b.optim /= N;
    if (stage >= 2)
        b.grads /= N;
    if (stage >= 3)
        b.params /= N;
    return b;
}
