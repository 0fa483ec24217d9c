/*
 * dp_impl.h — data parallelism's pieces that ZeRO and the trainer use
 * (private to src/).
 *
 * The public DP (dp.h) is "all-reduce the gradient buckets after the
 * backward".  Around it, for the rest of the library: the buckets' sums
 * started during the last backward and waited for before the optimizer
 * (--overlap), the gather of the parameters after a sharded update (ZeRO
 * stage 1 by buckets), and the check that the replicas agree.
 *
 *   backward ──overlap_begin── grads_ready: start bucket b ──overlap_end──▶ wait ──▶ optimizer
 */

#ifndef PTDP_PARALLEL_DP_IMPL_H
#define PTDP_PARALLEL_DP_IMPL_H

#include <stdbool.h>
#include "ptdp/dp.h"

/* The group bucket b is summed over: dp (the DP group), or its own (the
 * expert-DP group of an expert bucket, mesh.h). */
ptdp_comm *ptdp_ddp_comm(ptdp_comm *dp, const ptdp_model *m, const ptdp_bucket *b);

/* ZeRO-1: all-gather every bucket of the parameter store in place, in
 * order: rank k's shard of each bucket goes to every rank. */
int  ptdp_ddp_all_gather_params(ptdp_comm *dp, const ptdp_ddp *d, ptdp_model *m);

/* Overlap.  Before the last micro-batch's backward: arm the model's
 * grads_ready hook, so that every bucket starts its all-reduce (non-
 * blocking) as soon as the backward has completed it. */
int  ptdp_ddp_overlap_begin(ptdp_comm *dp, ptdp_ddp *d, ptdp_model *m);

/* After that backward: disarm, and start the buckets still waiting (the
 * last ones, which the backward completes as it ends). */
int  ptdp_ddp_overlap_end(struct ptdp_device *dev, ptdp_ddp *d, ptdp_model *m);

/* Before the optimizer: wait for every bucket's all-reduce, in order. */
int  ptdp_ddp_wait(ptdp_ddp *d);

/* --verify-replicas: every DP rank's parameter store (m->flat_w, or
 * flat_w16 under bf16) is the same bits, by a 64-bit FNV-1a hash each,
 * all-gathered over dp (an expert's over its expert-DP group).  PTDP_ECHECK naming the first rank that differs
 * after `step`.  Collective over dp. */
int  ptdp_ddp_check_replicas(struct ptdp_device *dev, ptdp_comm *dp, const ptdp_model *m, long step);

#endif
