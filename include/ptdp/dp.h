/*
 * dp.h — data parallelism: the gradient all-reduce, in buckets.
 *
 * Each DP rank holds a full replica of its (stage of the) model and a shard
 * of the global batch.  After the last micro-batch's backward the replicas'
 * gradients differ; one all-reduce (sum) in the DP group makes them the
 * gradient of the whole batch again, on every rank, so the replicas take
 * the same optimizer step and stay identical.
 *
 * Why a SUM and not an average: the loss is the mean over the GLOBAL batch
 * B, so every micro-batch scales its loss gradient by 1/B (not by 1/its own
 * size) and the gradients of all micro-batches on all ranks simply add up:
 *
 *   grad = (1/B) sum_i dloss_i = sum_ranks sum_microbatches (1/B) sum_{i in mb} dloss_i
 *
 * Averaging per micro-batch and then again across ranks computes
 *   (1/dp) sum_ranks (1/M) sum_mb (1/|mb|) sum_{i in mb} dloss_i
 * which weighs every sample by 1/(dp M |mb|): equal to the above only when
 * every micro-batch has the same size.  tests/test_dp.c shows the
 * difference on deliberately unequal shards.
 *
 * Buckets, as PyTorch DDP: the flat gradient buffer is laid out in the
 * order the backward produces gradients (output layer first), and cut at
 * parameter boundaries into buckets of about --bucket-mb MiB.  Each bucket
 * is one all-reduce; fewer, larger messages pay the latency alpha less often.
 */
#ifndef PTDP_DP_H
#define PTDP_DP_H

#include <stddef.h>

#include "model.h"

struct ptdp_device;

typedef struct { size_t begin, end; int first_param, last_param; } ptdp_bucket;

typedef struct {
    int nbuckets;
    ptdp_bucket *buckets;   /* host memory: bookkeeping, not device data */
} ptdp_ddp;

/* Cut m's flat gradient buffer into buckets of at most bucket_mb MiB (a
 * parameter larger than that gets a bucket of its own). */
int  ptdp_ddp_init(ptdp_ddp *d, const ptdp_model *m, double bucket_mb);
void ptdp_ddp_free(ptdp_ddp *d);
/* All-reduce (sum) every bucket in the DP group, in order. */
int  ptdp_ddp_all_reduce(ptdp_comm *dp, const ptdp_ddp *d, ptdp_model *m);

#endif
