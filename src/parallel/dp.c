/*
 * dp.c — data parallelism: all-reduce the gradients, bucket by bucket.
 *
 * See dp.h for why the reduction is a sum.  The buckets follow the flat
 * gradient buffer, which model.c lays out in backward order:
 *
 *   flat gradients:  | out.w out.b | blocks.7 … | … blocks.0 | in.w in.b |
 *   buckets:         |<-- bucket 0 -->|<-- bucket 1 -->| … |<- last ->|
 *
 * In PyTorch DDP a bucket's all-reduce starts as soon as the backward has
 * filled it, overlapping with the rest of the backward.  Without --overlap
 * the buckets run one after another, blocking, once the last micro-batch's
 * backward is done; what they show is the trade between the number of
 * messages (each pays alpha) and their size.  With --overlap (dp.h) each
 * starts on the communication stream as soon as the backward has filled
 * it: the same calls in the same order, started earlier.  Under ZeRO-1
 * (`scatter`, zero.h) a bucket is reduce-scattered instead: the same
 * buckets, the same moments, half the bytes before the optimizer and the
 * other half after it (ptdp_ddp_all_gather_params).
 */
#include "ptdp/dp.h"

#include <stdlib.h>

#include "ptdp/comm.h"
#include "ptdp/error.h"
#include "ptdp/mixed.h"
#include "parallel/dp_impl.h"
#include "parallel/model_impl.h"

int ptdp_ddp_init(ptdp_ddp *d, const ptdp_model *m, double bucket_mb)
{
    d->nbuckets = 0;
    d->comm = NULL;
    d->started = 0;
    d->scatter = false;
    d->buckets = calloc((size_t)(m->nparams > 0 ? m->nparams : 1), sizeof *d->buckets);
    d->requests = calloc((size_t)(m->nparams > 0 ? m->nparams : 1), sizeof *d->requests);
    if (d->buckets == NULL || d->requests == NULL) {
        ptdp_ddp_free(d);
        return PTDP_ENOMEM;
    }
    size_t cap = bucket_mb > 0 ? (size_t)(bucket_mb * 1024 * 1024) / sizeof(ptdp_real) : 0;
    if (cap == 0)
        cap = 1;
    for (int i = 0; i < m->nparams; i++) {
        const ptdp_param *p = &m->params[i];
        size_t n = ptdp_tensor_numel(p->g);
        ptdp_bucket *cur = d->nbuckets > 0 ? &d->buckets[d->nbuckets - 1] : NULL;
        /* Open a new bucket when this parameter would overflow the current
         * one, or is summed over another group. */
        if (cur == NULL || (cur->end - cur->begin) + n > cap || cur->group != p->sum.replicas) {
            cur = &d->buckets[d->nbuckets++];
            *cur = (ptdp_bucket){ .begin = p->offset, .end = p->offset, .first_param = i,
                                  .group = p->sum.replicas };
        }
        cur->end = p->offset + n;
        cur->last_param = i;
    }
    return PTDP_OK;
}

void ptdp_ddp_free(ptdp_ddp *d)
{
    free(d->buckets);
    free(d->requests);
    d->buckets = NULL;
    d->requests = NULL;
    d->nbuckets = 0;
}

/* Bucket b of the gradient store: float, or bf16 under mixed precision
 * (mixed.h), summed in its own type — bf16 sends half the bytes. */
static void *bucket_at(const ptdp_ddp *d, ptdp_model *m, int b)
{
    return m->bf16 ? ptdp_store_at(PTDP_BF16, m->flat_g16, d->buckets[b].begin)
                   : (void *)(m->flat_g + d->buckets[b].begin);
}

ptdp_comm *ptdp_ddp_comm(ptdp_comm *dp, const ptdp_model *m, const ptdp_bucket *b)
{
    return b->group == PTDP_GROUP_DP ? dp : ptdp_mesh_group(m->mesh, b->group);
}

int ptdp_ddp_all_reduce(ptdp_comm *dp, const ptdp_ddp *d, ptdp_model *m)
{
    for (int b = 0; b < d->nbuckets; b++) {
        void *g = bucket_at(d, m, b);
        size_t n = d->buckets[b].end - d->buckets[b].begin;
        ptdp_comm *c = ptdp_ddp_comm(dp, m, &d->buckets[b]);
        if (ptdp_comm_size(c) == 1)
            continue;
        int rc = d->scatter ? ptdp_reduce_scatter(c, PTDP_IN_PLACE, g, n, ptdp_model_store(m), PTDP_SUM)
                            : ptdp_all_reduce(c, g, g, n, ptdp_model_store(m), PTDP_SUM);
        if (rc != 0)
            return rc;
    }
    return PTDP_OK;
}

int ptdp_ddp_all_gather_params(ptdp_comm *dp, const ptdp_ddp *d, ptdp_model *m)
{
    for (int b = 0; b < d->nbuckets; b++) {
        void *w = m->bf16 ? ptdp_store_at(PTDP_BF16, m->flat_w16, d->buckets[b].begin)
                          : (void *)(m->flat_w + d->buckets[b].begin);
        ptdp_comm *c = ptdp_ddp_comm(dp, m, &d->buckets[b]);
        if (ptdp_comm_size(c) == 1)
            continue;
        int rc = ptdp_all_gather(c, PTDP_IN_PLACE, w, d->buckets[b].end - d->buckets[b].begin, ptdp_model_store(m));
        if (rc != 0)
            return rc;
    }
    return PTDP_OK;
}

/* ------------------------------------------------------------ overlap */

/* Start bucket b's all-reduce (ZeRO-1: reduce-scatter) on the
 * communication stream. */
static int start_bucket(ptdp_ddp *d, ptdp_model *m, int b)
{
    void *g = bucket_at(d, m, b);
    size_t n = d->buckets[b].end - d->buckets[b].begin;
    ptdp_comm *c = ptdp_ddp_comm(d->comm, m, &d->buckets[b]);
    if (ptdp_comm_size(c) == 1)
        return PTDP_OK;   /* its request stays empty: ptdp_wait returns at once */
    if (d->scatter)
        return ptdp_reduce_scatter_start(c, PTDP_IN_PLACE, g, n, ptdp_model_store(m), PTDP_SUM, &d->requests[b]);
    return ptdp_all_reduce_start(c, g, g, n, ptdp_model_store(m), PTDP_SUM, &d->requests[b]);
}

/* The model's grads_ready hook: [0, ready) of flat_g is final, so every
 * bucket that ends inside it can be summed now (buckets in order, as the
 * blocking path sums them). */
static int on_grads_ready(ptdp_device *dev, ptdp_model *m, size_t ready, void *ctx)
{
    (void)dev;
    ptdp_ddp *d = ctx;
    int rc = PTDP_OK;
    while (rc == 0 && d->started < d->nbuckets && d->buckets[d->started].end <= ready)
        rc = start_bucket(d, m, d->started++);
    return rc;
}

int ptdp_ddp_overlap_begin(ptdp_comm *dp, ptdp_ddp *d, ptdp_model *m)
{
    d->comm = dp;
    d->started = 0;
    bool alone = true;   /* every bucket's group one device (an expert-DP group may be more than DP's) */
    for (int b = 0; b < d->nbuckets; b++)
        alone = alone && ptdp_comm_size(ptdp_ddp_comm(dp, m, &d->buckets[b])) == 1;
    if (alone) {   /* nothing to sum: never arm */
        d->started = d->nbuckets;
        return PTDP_OK;
    }
    m->grads_ready = on_grads_ready;
    m->grads_ready_ctx = d;
    return PTDP_OK;
}

int ptdp_ddp_overlap_end(ptdp_device *dev, ptdp_ddp *d, ptdp_model *m)
{
    m->grads_ready = NULL;
    m->grads_ready_ctx = NULL;
    /* the whole buffer is final now */
    return d->comm != NULL ? on_grads_ready(dev, m, m->numel, d) : PTDP_OK;
}

int ptdp_ddp_wait(ptdp_ddp *d)
{
    int rc = PTDP_OK;
    for (int b = 0; b < d->nbuckets; b++) {
        int w = ptdp_wait(&d->requests[b]);
        if (rc == 0)
            rc = w;
    }
    d->comm = NULL;
    d->started = 0;
    return rc;
}

/* ------------------------------------------------------------ replicas */

/* DP replicas must stay bit-identical: they start equal, all-reduce to the
 * same gradient (a fixed reduction order gives every rank the same bits)
 * and take the same step.  Check it with a 64-bit FNV-1a hash per replica
 * group: the parameters summed over the DP group, then (expert
 * parallelism) those summed over the expert-DP group, each compared among
 * the ranks that hold the same copy. */
static int check_group(ptdp_device *dev, ptdp_comm *c, const ptdp_model *m, ptdp_group g, long step)
{
    int n = ptdp_comm_size(c);
    if (n == 1)
        return PTDP_OK;
    uint64_t hash = 1469598103934665603ull, all[PTDP_MAX_DEVICES];
    const size_t es = ptdp_store_size(ptdp_model_store(m));
    const unsigned char *b = m->bf16 ? (const unsigned char *)m->flat_w16 : (const unsigned char *)m->flat_w;
    for (int i = 0; i < m->nparams; i++)
        if (m->params[i].sum.replicas == g)
            for (size_t k = m->params[i].offset * es; k < (m->params[i].offset + ptdp_tensor_numel(m->params[i].w)) * es; k++)
                hash = (hash ^ b[k]) * 1099511628211ull;
    all[ptdp_comm_rank(c)] = hash;
    int rc = ptdp_all_gather(c, PTDP_IN_PLACE, all, (size_t)n, PTDP_I64);
    for (int r = 1; rc == 0 && r < n; r++)
        if (all[r] != all[0])
            return ptdp_fail(dev, PTDP_ECHECK, "%s replicas differ after step %ld: rank %d of the group has hash "
                             "%016llx, rank 0 %016llx", g == PTDP_GROUP_DP ? "DP" : "expert-DP", step, r,
                             (unsigned long long)all[r], (unsigned long long)all[0]);
    return rc;
}

int ptdp_ddp_check_replicas(ptdp_device *dev, ptdp_comm *dp, const ptdp_model *m, long step)
{
    int rc = check_group(dev, dp, m, PTDP_GROUP_DP, step);   /* dp x cp: every copy of these parameters */
    for (int i = 0; rc == 0 && i < m->nparams; i++)
        if (m->params[i].sum.replicas == PTDP_GROUP_EDP) {
            rc = check_group(dev, ptdp_mesh_group(m->mesh, PTDP_GROUP_EDP), m, PTDP_GROUP_EDP, step);
            break;
        }
    return rc;
}
