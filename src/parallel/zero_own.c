/*
 * zero_own.c — what a device owns under ZeRO, as its row cuts it: a list
 * of ranges of the flat buffer, each with its place `at` in the device's
 * shard buffers (gradient shard, optimizer state, stage 3's parameter
 * shard), and where a flat element's gradient lies once it is summed.
 *
 *   plain DP    one range, the whole buffer; DP's buckets all-reduced
 *   ZeRO-1      my shard of every DP bucket (zero.h's picture)
 *   ZeRO-2      my shard of every run of one replica group: the whole
 *               buffer without experts, one range
 *   ZeRO-3      my shard of every unit (zero3.c)
 *
 *   flat buffer   | bucket 0      | bucket 1      |
 *   ZeRO-1, dp 1          [ at 0 ]        [ at 1 ]      the state packed
 *
 * ptdp_share cuts each bucket (or run, or unit) over its replicas: DP's,
 * or an expert bucket's expert-DP group.
 */
#include "ptdp/zero.h"

#include <stdlib.h>

#include "ptdp/comm.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/mixed.h"
#include "parallel/dp_impl.h"
#include "parallel/zero_impl.h"

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

size_t ptdp_zero_grad_index(const ptdp_zero *z, size_t flat, size_t at)
{
    return z->row->shards_grads ? at : flat;
}

/* Plain DP: every rank updates the whole buffer, one range; DP's buckets
 * are all-reduced. */
int ptdp_zero_own_whole(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, double bucket_mb)
{
    z->len = m->numel;
    if (ptdp_ddp_init(&z->buckets, m, bucket_mb > 0 ? bucket_mb : 1e9) != 0)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    if ((z->ranges = malloc(sizeof *z->ranges)) == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    z->nranges = 1;
    z->ranges[0] = (ptdp_zero_range){ z->off, z->off + z->len, 0 };
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

int ptdp_zero_own_bucket_shards(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, double bucket_mb)
{
    return bucket_ranges(dev, z, m, bucket_mb);
}

int ptdp_zero_own_run_shards(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, double bucket_mb)
{
    (void)bucket_mb;   /* one bucket per run: reduce-scattered whole after every backward */
    return bucket_ranges(dev, z, m, 0);
}

void ptdp_zero_point_gradients(ptdp_model *m, ptdp_real *flat)
{
    m->flat_g = flat;
    for (int i = 0; i < m->nparams; i++)
        m->params[i].g.data = flat ? flat + m->params[i].offset : NULL;
}

void *ptdp_zero_grad_store(const ptdp_zero *z, ptdp_model *m)
{
    return z->store == PTDP_BF16 ? (void *)m->flat_g16 : (void *)m->flat_g;
}
