/*
 * zero_impl.h — ZeRO's calls for the trainer and for ZeRO's own files
 * (private to src/).
 *
 * The public ZeRO (zero.h) is the state (struct ptdp_zero), its setup, the
 * reduce of the gradients, the table of stages and their price.  Here: the
 * trainer's calls around a step, the shard ranges the optimizer walks, what
 * checkpoints and --verify-replicas read, and the operations the table's
 * rows point at, by the file that holds them:
 *
 *   zero_stages.c   the table (one row per stage) and the price
 *   zero.c          set-up: the stores a row keeps; the calls that read it
 *   zero_own.c      what a device owns: ranges of the flat buffer
 *   zero_sum.c      the gradient's way to the optimizer: DP's buckets,
 *                   stage 2's bucket a backward, the declared groups, the norm
 *   zero3.c         the units: stage 3's gathers and sums, bf16's widening
 *   zero_hsdp.c     HSDP: ZeRO inside shard groups, all-reduced across them
 *   zero_hpz.c      ZeRO++'s hpZ: ZeRO-3's secondary pieces inside the node
 *   zero_step.c     the optimizer on what a device owns
 *
 *   init ─▶ set_overlap ─▶ optim_init ─▶ [before_backward … after_backward]×M
 *        ─▶ finish_gradients (zero.h) ─▶ grad_sumsq ─▶ step (update, clear, gather)
 */

#ifndef PTDP_PARALLEL_ZERO_IMPL_H
#define PTDP_PARALLEL_ZERO_IMPL_H

#include <stdbool.h>
#include "ptdp/counters.h"
#include "ptdp/zero.h"

/* ||g||^2 of the whole model from every rank's shard (collective over DP,
 * TP and PP); `grad` is what ptdp_zero_reduce_gradients gave. */
int  ptdp_zero_grad_sumsq(ptdp_zero *z, const ptdp_model *m, const void *grad, double *sumsq);

/* After the update of my shard: every rank gets every shard of the
 * parameters, by the row's gather (stages 1, bucket by bucket, and 2;
 * stage 3 keeps them sharded, plain DP holds them all). */
int  ptdp_zero_gather_params(ptdp_zero *z, ptdp_model *m);

/* Where range i's parameters and gradient begin, for the optimizer, whose
 * state for the range begins at `at`: the full buffers at the range's flat
 * offset, or the shards at `at` where the row shards them (stage 3's
 * parameters, the gradients of stages 2 and 3).
 * `grad` is what ptdp_zero_reduce_gradients gave. */
void *ptdp_zero_range_params(ptdp_zero *z, ptdp_model *m, int i);
void *ptdp_zero_range_grad(const ptdp_zero *z, void *grad, int i);

/* ---- the trainer's calls, in the order of a step ----
 *
 *   ptdp_zero_init_buckets, ptdp_zero_set_overlap, ptdp_zero_optim_init
 *   per backward:  ptdp_zero_before_backward … ptdp_zero_after_backward
 *   per step:      ptdp_zero_finish_gradients   DP's sum (all-reduce, or
 *                                               ZeRO's reduce-scatters), then
 *                                               the declared groups (model.h)
 *                  ptdp_zero_grad_sumsq          the norm
 *                  ptdp_zero_step                the optimizer on what I own,
 *                                               cleared gradients, the gather
 */
/* --overlap: DP's buckets (stages 0 and 1) start in the last backward of a
 * step, stage 2's reduce-scatters and stage 3's gathers on the stream. */
void ptdp_zero_set_overlap(ptdp_zero *z, bool overlap);

/* The optimizer o and its state for the len elements I own, in the arena
 * ("optim.exp_avg" and "optim.exp_avg_sq", or "optim.momentum_buffer"). */
int  ptdp_zero_optim_init(struct ptdp_device *dev, ptdp_zero *z, const ptdp_optimizer *o);

/* Around every micro-batch's backward (B and W alike); `last`: the stage's
 * last BACKWARD of the step, whose gradients are final as it goes (arms
 * --overlap's bucket sums).  Stage 2's bucket, as the two above. */
int  ptdp_zero_before_backward(struct ptdp_device *dev, ptdp_zero *z, ptdp_model *m, bool last);
int  ptdp_zero_after_backward(struct ptdp_device *dev, ptdp_zero *z, ptdp_model *m, bool last);

/* The optimizer on every range I own, the gradient (from
 * ptdp_zero_finish_gradients) multiplied by clip first (< 1: clipping;
 * under bf16 while widening it), each tensor with its decay rule; step is
 * the 1-based optimizer step.  Then the gradients cleared, the clock
 * charged, and the parameters gathered (ptdp_zero_gather_params). */
int  ptdp_zero_step(struct ptdp_device *dev, ptdp_zero *z, ptdp_model *m, void *grad, double clip, long step);

/* ---- for checkpoints and checks ---- */
/* --verify-replicas: the DP ranks' parameters are the same bits
 * (ptdp_ddp_check_replicas); under stage 3, which keeps no replicas,
 * nothing to check. */
int  ptdp_zero_check_replicas(struct ptdp_device *dev, ptdp_zero *z, const ptdp_model *m, long step);

/* Optimizer state slot 0 (AdamW's m, SGD's momentum) or 1 (AdamW's v):
 * [len], range by range from its `at`; NULL if the optimizer has none. */
ptdp_real *ptdp_zero_optim_state(const ptdp_zero *z, int slot);

/* Whether every DP rank keeps its own slice of the optimizer state (ZeRO,
 * stages 1 to 3), not the same whole state as every other (stage 0). */
bool ptdp_zero_shards_optim(const ptdp_zero *z);

/* Whether the DP ranks hold whole replicas of the parameters (stages 0 to
 * 2), not each its own shard (stage 3). */
bool ptdp_zero_params_replicated(const ptdp_zero *z);

/* The exact parameters of what I own, float, range by range from `at`: the
 * master weights under bf16, the parameter shard under stage 3; NULL when
 * the model's own views hold them (float, stages 0 to 2). */
ptdp_real *ptdp_zero_exact_params(const ptdp_zero *z);

/* After writing the exact parameters (a checkpoint read): make the stores
 * the model reads from them (bf16 stage 3: its bf16 shards). */
void ptdp_zero_params_written(ptdp_zero *z);

/* Whether the trainer calls ptdp_zero_before_backward and
 * ptdp_zero_after_backward around every backward: the row has hooks there
 * (stage 2's bucket), or --overlap arms DP's buckets in the last one. */
bool ptdp_zero_backward_hooks(const ptdp_zero *z);

/* Whether set-up freed the model's full-size buffers for the row's shards
 * or bf16's stores (so the arena's peaks start after it). */
bool ptdp_zero_freed_model_buffers(const ptdp_zero *z);

/* ---- the rows' operations (zero_stages.c points at them) ----
 *
 * own: the ranges this device owns and updates (and the DP buckets) */
int  ptdp_zero_own_whole(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, double bucket_mb);        /* 0 */
int  ptdp_zero_own_bucket_shards(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, double bucket_mb); /* 1 */
int  ptdp_zero_own_run_shards(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, double bucket_mb);    /* 2 */
int  ptdp_zero3_own_unit_shards(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, double bucket_mb);  /* 3 */
/* around every backward: stage 2's full-size bucket, reduce-scattered after */
int  ptdp_zero2_bucket_begin(ptdp_device *dev, ptdp_zero *z, ptdp_model *m);
int  ptdp_zero2_bucket_end(ptdp_device *dev, ptdp_zero *z, ptdp_model *m);
/* once a step: DP's buckets summed (all-reduced, or reduce-scattered); the
 * last backward's reduce-scatter waited for (2); every unit's (3) */
int  ptdp_zero_sum_buckets(ptdp_device *dev, ptdp_zero *z, ptdp_model *m);
int  ptdp_zero2_sum(ptdp_device *dev, ptdp_zero *z, ptdp_model *m);
int  ptdp_zero3_sum(ptdp_device *dev, ptdp_zero *z, ptdp_model *m);
/* after the optimizer: the parameters gathered bucket by bucket (1), or
 * run by run (2) */
int  ptdp_zero_gather_buckets(ptdp_zero *z, ptdp_model *m);
int  ptdp_zero_gather_runs(ptdp_zero *z, ptdp_model *m);

/* ---- HSDP (zero_hsdp.c) ---- */
/* z->dp: the DP group, or with the mesh's shard groups (mesh->shard < dp)
 * the shard group, and z->replicas the replica group (built here). */
int  ptdp_zero_hsdp_init(ptdp_device *dev, ptdp_zero *z, ptdp_model *m);
/* After the row's sum: my shard's gradient all-reduced over the replica
 * group (nothing without one). */
int  ptdp_zero_hsdp_sum(ptdp_zero *z, ptdp_model *m);
/* Whether this device writes its shard of the optimizer state (and
 * exact parameters) to a checkpoint: the replica of index 0 (every device
 * without replica groups). */
bool ptdp_zero_writes_shard(const ptdp_zero *z);
/* --verify-replicas under ZeRO-3 with replica groups: my shard's bits
 * equal on every replica (PTDP_ECHECK, with the hashes, if not). */
int  ptdp_zero_hsdp_check_replicas(ptdp_device *dev, const ptdp_zero *z, long step);

/* ---- ZeRO++'s hpZ (zero_hpz.c) ---- */
/* z->node: with the mesh's hpz (> 0) the node group inside z->dp, built
 * here (PTDP_EINVAL, with a message, unless ZeRO-3 and 2 <= hpz < |z->dp|
 * dividing it); NULL without. */
int  ptdp_zero_hpz_init(ptdp_device *dev, ptdp_zero *z, ptdp_model *m);
/* The run's counter "hpz_secondary_peak" (bytes, per device: the most
 * secondary pieces alive at once), published by the trainer with hpZ. */
int  ptdp_zero_hpz_publish(ptdp_counters *reg);
/* After a forward's gather of unit u: keep my piece of it (counted). */
int  ptdp_zero_hpz_keep(ptdp_device *dev, ptdp_zero *z, ptdp_zero_unit *u);
/* Whether the backward can gather u inside the node (a piece is kept). */
bool ptdp_zero_hpz_holds(const ptdp_zero *z, const ptdp_zero_unit *u);
/* The backward's gather of u into u->gathered over the node group:
 * started (start) or done. */
int  ptdp_zero_hpz_gather(ptdp_zero *z, ptdp_zero_unit *u, bool start);
/* A backward of u ended: the piece freed after the last one. */
void ptdp_zero_hpz_backward_done(ptdp_device *dev, ptdp_zero *z, ptdp_zero_unit *u);
/* Every piece freed (before the optimizer, at the end). */
void ptdp_zero_hpz_drop_all(ptdp_device *dev, ptdp_zero *z);

/* ---- shared by ZeRO's files (zero_own.c) ---- */
/* Point every parameter's gradient view into `flat` (or at nothing). */
void ptdp_zero_point_gradients(ptdp_model *m, ptdp_real *flat);
/* The full gradient store (float, or bf16 under mixed precision) of a row
 * that keeps the gradient whole. */
void *ptdp_zero_grad_store(const ptdp_zero *z, ptdp_model *m);
/* Where the gradient of flat element `flat`, held at shard index `at`, lies
 * in the store ptdp_zero_reduce_gradients gives: the full buffer, or the
 * shard of a row that shards the gradients. */
size_t ptdp_zero_grad_index(const ptdp_zero *z, size_t flat, size_t at);
/* The norm's terms (zero_sum.c): what I own of the parameters I count,
 * each with the group its squares are summed over (ptdp_param_norm_group). */
int  ptdp_zero_norm_terms(ptdp_zero *z, const ptdp_model *m);

/* The units, for zero.c (zero3.c): their stretches of the flat buffer
 * (and subunits) for ZeRO-3 and bf16; the hook that serves the model's
 * unit events. */
int  ptdp_zero3_init(ptdp_device *dev, ptdp_zero *z, ptdp_model *m);
void ptdp_zero3_hook(ptdp_model *m, ptdp_zero *z);
void ptdp_zero3_free(ptdp_device *dev, ptdp_zero *z, ptdp_model *m);

#endif
