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
 *
 * Overlap (--overlap), as DDP does: during the LAST micro-batch's backward
 * (the earlier ones only accumulate, DDP's no_sync), the model reports each
 * block whose gradients are complete (ptdp_model_grads_ready); those form a
 * growing prefix of flat_g, and every bucket inside it starts its
 * all-reduce at once on the communication stream (comm.h, clock.h).  The
 * backward goes on computing meanwhile; the optimizer waits for them all.
 *
 *   compute   ── backward: out  block 3  block 2  block 1  block 0  in ─|wait|─ optimizer
 *   comm                  [b0]     [b1 ──]  [b2 ──]  [b3 ──]  [b4 ──]  [b5]
 *                                                   hidden            ^exposed
 *
 * The same calls on the same data in the same order as without overlap, so
 * the same bits; only the virtual time differs.  What overlap cannot hide:
 * the buckets that fill last (the first layers' gradients, done when the
 * backward ends) are summed after it.
 *
 * ZeRO-1 (zero.h) uses the same buckets with `scatter` set: each bucket is
 * reduce-scattered instead of all-reduced — DP rank k keeps shard k of
 * every bucket, summed — and after the optimizer the parameters are
 * all-gathered bucket by bucket (Megatron-LM's distributed optimizer):
 *
 *   bucket b of flat_g   [ shard 0 | shard 1 ]   all-reduce:      both, summed, on both ranks
 *                        [ k = 0   | k = 1   ]   reduce-scatter:  shard k, summed, on rank k
 *
 * Blocking or started from the grads_ready hook, the calls are the same.
 *
 * A bucket holds parameters of one replica group only (model.h,
 * ptdp_grad_sum.replicas): the DP group, or, for the experts of a run with
 * expert parallelism, the expert-DP group (mesh.h) — the ranks that hold
 * the same experts.  A bucket is summed over its own group:
 *
 *   flat_g   | head … block 1's MLP | block 1's experts | block 0 … |
 *   buckets  |<-- DP -->|<-- DP --->|<------ EDP ------>|<-- DP --->|
 */
#ifndef PTDP_DP_H
#define PTDP_DP_H

#include <stdbool.h>
#include <stddef.h>

#include "comm.h"
#include "model.h"

struct ptdp_device;

typedef struct {
    size_t begin, end;
    int first_param, last_param;
    ptdp_group group;       /* its parameters' replicas: DP, or EDP        */
} ptdp_bucket;

typedef struct {
    int nbuckets;
    ptdp_bucket *buckets;   /* host memory: bookkeeping, not device data */
    /* overlap (ptdp_ddp_overlap_begin … ptdp_ddp_wait) */
    ptdp_comm *comm;        /* the DP group of the armed backward (a bucket
                               of another group: that group, ptdp_ddp_comm) */
    int started;            /* buckets whose all-reduce has started        */
    ptdp_request *requests; /* [nbuckets], host                            */
    bool scatter;           /* ZeRO-1: reduce-scatter each bucket in place
                               (shard ptdp_share(|b|, N, k) to DP rank k)
                               instead of all-reducing it                  */
} ptdp_ddp;

/* Cut m's flat gradient buffer into buckets of at most bucket_mb MiB (a
 * parameter larger than that gets a bucket of its own), and wherever the
 * replica group changes. */
int  ptdp_ddp_init(ptdp_ddp *d, const ptdp_model *m, double bucket_mb);
void ptdp_ddp_free(ptdp_ddp *d);
/* All-reduce (sum) every bucket in the DP group, in order (reduce-scatter
 * with `scatter`). */
int  ptdp_ddp_all_reduce(ptdp_comm *dp, const ptdp_ddp *d, ptdp_model *m);

#endif
