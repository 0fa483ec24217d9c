/*
 * zero_sum.c — the gradient's way from the backward to the optimizer under
 * every ZeRO stage: the rows' sums over DP (zero_stages.c), the groups a
 * parameter declares beyond its replicas, and the gradient norm.
 *
 * What each row does, in the order it runs (zero.h has the idea):
 *
 *   stage 2, after every backward:
 *       bucket (full size) --reduce-scatter--> my shard --+=--> grad_shard
 *   once a step:
 *       stages 0, 1: every DP bucket all-reduced (0) or reduce-scattered
 *                    (1), in place (with --overlap: the sums the last
 *                    backward started, waited for)
 *       stages 2, 3: the last reduce-scatter waited for (3: zero3.c)
 *       HSDP: my shard all-reduced across its replicas (zero_hsdp.c)
 *       the declared groups (a tied embedding's copies, SP's LayerNorms)
 *       the norm over what I own, summed over its groups, TP, PP
 *                                                 (the trainer clips and steps)
 *       all-gather the parameters in place (1: bucket by bucket; 2: run by run)
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
#include "parallel/dp_impl.h"
#include "parallel/model_impl.h"
#include "parallel/zero_impl.h"

/* The element i of a store of this run's type. */
static void *at(const ptdp_zero *z, void *buf, size_t i)
{
    return ptdp_store_at(z->store, buf, i);
}

/* ------------------------------------------------ stages 0 and 1: buckets */

int ptdp_zero_sum_buckets(ptdp_device *dev, ptdp_zero *z, ptdp_model *m)
{
    (void)dev;   /* the same calls on the same buckets either way (zero.h) */
    return z->overlap ? ptdp_ddp_wait(&z->buckets) : ptdp_ddp_all_reduce(z->dp, &z->buckets, m);
}

int ptdp_zero_gather_buckets(ptdp_zero *z, ptdp_model *m)
{
    return ptdp_ddp_all_gather_params(z->dp, &z->buckets, m);   /* my shard of each bucket to every rank */
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

/* Each run of one replica group reduce-scattered (or its parameters
 * gathered) in place over its group: the whole buffer over DP without
 * expert parallelism. */
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

int ptdp_zero2_bucket_begin(ptdp_device *dev, ptdp_zero *z, ptdp_model *m)
{
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
        ptdp_zero_point_gradients(m, z->bucket);
    return PTDP_OK;
}

int ptdp_zero2_bucket_end(ptdp_device *dev, ptdp_zero *z, ptdp_model *m)
{
    /* This micro-batch's gradient, summed over the DP ranks' micro-batches
     * of the same index: shard k lands at its offset inside the bucket. */
    void *bucket = z->bucket;
    z->bucket = NULL;
    ptdp_zero_point_gradients(m, NULL);
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

int ptdp_zero2_sum(ptdp_device *dev, ptdp_zero *z, ptdp_model *m)
{
    (void)m;
    return finish_pending(dev, z);   /* the last backward's */
}

int ptdp_zero_gather_runs(ptdp_zero *z, ptdp_model *m)
{
    return over_runs(z, m, z->store == PTDP_BF16 ? (void *)m->flat_w16 : (void *)m->flat_w, true);
}

/* ------------------------------------------------- the declared groups */

/* ZeRO and a parameter whose gradient is summed over a group beyond DP
 * (model.h, ptdp_grad_sum: a tied embedding's copies on two stages, an SP
 * LayerNorm's on the TP ranks): once the gradient is reduce-scattered it
 * is spread over the DP ranks' shards — and differently on the two
 * stages, whose flat buffers differ.  Make each such tensor's DP-summed
 * gradient whole on every DP rank (an all-reduce of the ranges, zeros
 * elsewhere: adding zeros changes no bit), sum it over its further groups
 * (ptdp_model_sum_groups), and take my range back into `shard`, the store
 * ptdp_zero_reduce_gradients gives (ptdp_zero_grad_index says where).  As
 * with plain DP, the DP sum comes first and the copies are added by one
 * all-reduce, so every copy holds the same bits whatever algorithm ran.
 * `summed`: every replica holds the DP sum whole already (plain DP under
 * bf16, whose float views exist only in a backward). */
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
        size_t n = ptdp_tensor_numel(p->g), b, e, k;
        if ((whole[i] = ptdp_alloc(dev, n * sizeof(ptdp_real), PTDP_MEM_COMM, "zero2.tied")) == NULL) {
            rc = PTDP_ENOMEM;
            break;
        }
        if (ptdp_zero_owned(z, p->offset, p->offset + n, &b, &e, &k))
            ptdp_store_to_real(z->store, whole[i] + (b - p->offset), at(z, shard, ptdp_zero_grad_index(z, b, k)),
                               e - b);
        /* the pieces of it over its replicas: DP's, or an expert's expert-DP group
         * (an expert with a further group: DualPipe's mirror) */
        ptdp_comm *replicas = p->sum.replicas == PTDP_GROUP_DP ? z->dp : ptdp_mesh_group(m->mesh, p->sum.replicas);
        if (!summed)
            rc = ptdp_all_reduce(replicas, whole[i], whole[i], n, PTDP_REAL, PTDP_SUM);
        p->g.data = whole[i];
    }
    if (rc == 0)
        rc = ptdp_model_sum_groups(dev, m);
    for (int i = 0; i < m->nparams; i++) {
        ptdp_param *p = &m->params[i];
        if (whole[i] == NULL)
            continue;
        size_t n = ptdp_tensor_numel(p->g), b, e, k;
        if (rc == 0 && ptdp_zero_owned(z, p->offset, p->offset + n, &b, &e, &k))
            ptdp_store_from_real(z->store, at(z, shard, ptdp_zero_grad_index(z, b, k)), whole[i] + (b - p->offset),
                                 e - b);
        p->g.data = m->flat_g ? m->flat_g + p->offset : NULL;   /* back where it was */
        ptdp_free(dev, whole[i]);
    }
    free(whole);
    return rc;
}

/* After the DP sum, each group a parameter declares beyond its replicas:
 * on the model's float views where every replica holds the whole sum in
 * them (plain DP, float), else made whole first. */
static int sum_declared_groups(ptdp_zero *z, ptdp_model *m, void *grad)
{
    const bool whole = !z->row->shards_optim;   /* each rank summed all of it, not its shard */
    if (whole && z->store != PTDP_BF16)
        return ptdp_model_sum_groups(ptdp_comm_device(z->dp), m);
    return sum_groups_whole(z, m, grad, whole);
}

int ptdp_zero_reduce_gradients(ptdp_zero *z, ptdp_model *m, void **grad)
{
    int rc = z->row->sum(ptdp_comm_device(z->dp), z, m);
    if (rc == 0)
        rc = ptdp_zero_hsdp_sum(z, m);   /* HSDP: across the shard's replicas */
    *grad = z->row->shards_grads ? z->grad_shard : ptdp_zero_grad_store(z, m);
    return rc == 0 ? sum_declared_groups(z, m, *grad) : rc;
}

int ptdp_zero_finish_gradients(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, void **grad)
{
    (void)dev;
    return ptdp_zero_reduce_gradients(z, m, grad);
}

/* ------------------------------------------------------------- the norm */

/* The norm's terms: the intersection of what I own with each parameter I
 * count (ptdp_param_counted_here), each with the group its squares are
 * summed over (ptdp_param_norm_group: DP where the row gives each rank its
 * own shard of the summed gradient; else the DP ranks beside the
 * parameter's replicas).  norm_groups collects the groups of every
 * parameter, counted here or not, so every device of a group calls the
 * same all-reduces.  Adjacent terms join into one pass over a longer
 * stretch when all of a device's squares go to one sum; with several sums,
 * each parameter is a term of its own.  (The order of a floating-point sum
 * is part of its bits, and this is the order the norm has always taken.) */
int ptdp_zero_norm_terms(ptdp_zero *z, const ptdp_model *m)
{
    const bool sharded = z->row->shards_optim;
    bool several = false;
    int first = -1;
    z->nnorm = 0;
    z->norm_groups = 0;
    if ((z->norm = calloc((size_t)m->nparams + 1, sizeof *z->norm)) == NULL)
        return PTDP_ENOMEM;
    for (int i = 0; i < m->nparams; i++) {
        const int g = (int)ptdp_param_norm_group(m, &m->params[i], sharded);
        z->norm_groups |= g < PTDP_GROUP_COUNT ? PTDP_GROUP_BIT(g) : 0;
        several = several || (first >= 0 && g != first);
        first = first < 0 ? g : first;
    }
    for (int i = 0; i < m->nparams; i++) {
        const ptdp_param *p = &m->params[i];
        size_t b, e, k;
        if (!ptdp_param_norm_counts(m, p, sharded))
            continue;   /* the same gradient on every TP rank: count it once */
        if (!ptdp_zero_owned(z, p->offset, p->offset + ptdp_tensor_numel(p->w), &b, &e, &k))
            continue;
        ptdp_zero_norm_term *last = z->nnorm > 0 ? &z->norm[z->nnorm - 1] : NULL;
        if (!several && last != NULL && last->end == b && last->at + (last->end - last->begin) == k)
            last->end = e;
        else
            z->norm[z->nnorm++] = (ptdp_zero_norm_term){ b, e, k, (int)ptdp_param_norm_group(m, p, sharded) };
    }
    return PTDP_OK;
}

int ptdp_zero_grad_sumsq(ptdp_zero *z, const ptdp_model *m, const void *grad, double *sumsq)
{
    /* grad holds element begin of the flat buffer at ptdp_zero_grad_index
     * (the full buffer: begin itself; a shard: at, from ptdp_zero_owned). */
    double partial[PTDP_GROUP_COUNT + 1] = { 0 };
    for (int r = 0; r < z->nnorm; r++) {
        const ptdp_zero_norm_term *t = &z->norm[r];
        partial[t->over] += ptdp_store_sum_squares(z->store, at(z, (void *)grad, ptdp_zero_grad_index(z, t->begin, t->at)),
                                                   t->end - t->begin);
    }
    return ptdp_model_norm_sum((ptdp_model *)m, partial, z->norm_groups, sumsq);
}
