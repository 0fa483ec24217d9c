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
 * filled it, overlapping with the rest of the backward.  Here collectives
 * block, so buckets run one after another once the last micro-batch's
 * backward is done; what they still show is the trade between the number of
 * messages (each pays alpha) and their size.
 */
#include "ptdp/dp.h"

#include <stdlib.h>

#include "ptdp/comm.h"
#include "ptdp/error.h"

int ptdp_ddp_init(ptdp_ddp *d, const ptdp_model *m, double bucket_mb)
{
    d->nbuckets = 0;
    d->buckets = calloc((size_t)(m->nparams > 0 ? m->nparams : 1), sizeof *d->buckets);
    if (d->buckets == NULL)
        return PTDP_ENOMEM;
    size_t cap = bucket_mb > 0 ? (size_t)(bucket_mb * 1024 * 1024) / sizeof(ptdp_real) : 0;
    if (cap == 0)
        cap = 1;
    for (int i = 0; i < m->nparams; i++) {
        const ptdp_param *p = &m->params[i];
        size_t n = ptdp_tensor_numel(p->g);
        ptdp_bucket *cur = d->nbuckets > 0 ? &d->buckets[d->nbuckets - 1] : NULL;
        /* Open a new bucket when this parameter would overflow the current one. */
        if (cur == NULL || (cur->end - cur->begin) + n > cap) {
            cur = &d->buckets[d->nbuckets++];
            *cur = (ptdp_bucket){ .begin = p->offset, .end = p->offset, .first_param = i };
        }
        cur->end = p->offset + n;
        cur->last_param = i;
    }
    return PTDP_OK;
}

void ptdp_ddp_free(ptdp_ddp *d)
{
    free(d->buckets);
    d->buckets = NULL;
    d->nbuckets = 0;
}

int ptdp_ddp_all_reduce(ptdp_comm *dp, const ptdp_ddp *d, ptdp_model *m)
{
    if (ptdp_comm_size(dp) == 1)
        return PTDP_OK;
    for (int b = 0; b < d->nbuckets; b++) {
        ptdp_real *g = m->flat_g + d->buckets[b].begin;
        int rc = ptdp_all_reduce(dp, g, g, d->buckets[b].end - d->buckets[b].begin, PTDP_REAL, PTDP_SUM);
        if (rc != 0)
            return rc;
    }
    return PTDP_OK;
}
