/*
 * zero.h — ZeRO: shard the optimizer state (stage 1) and the gradients
 * (stage 2) across the data-parallel group.
 *
 * Plain data parallelism keeps, on every one of the N replicas, the whole
 * parameter buffer P, the whole gradient G and the whole optimizer state
 * (AdamW: two moments, 2P) — and all N replicas compute the same update.
 * ZeRO (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training
 * Trillion Parameter Models", 2020) cuts the flat buffers into N chunks with
 * ptdp_chunk; DP rank k owns chunk k and is the only one to update it:
 *
 *   flat buffer (backward order)  | chunk 0 | chunk 1 | chunk 2 | chunk 3 |
 *   owner                           dp 0      dp 1      dp 2      dp 3
 *
 * Chunks cut through parameters; that is fine because AdamW is element-wise
 * (optim.h), so updating the pieces gives the bits of updating the whole.
 *
 * Stage 1 — the optimizer state is sharded (2P/N per rank):
 *   backward of all M micro-batches   full G on every rank, as in plain DP
 *   reduce-scatter G                  rank k: chunk k summed over ranks   (N-1)/N S
 *   norm, clip, AdamW on chunk k      with the moments of chunk k only
 *   all-gather P                      every rank has the whole new P      (N-1)/N S
 * Bytes per step 2(N-1)/N S: exactly plain DP's all-reduce, which IS a
 * reduce-scatter followed by an all-gather — ZeRO-1 only moves the update
 * in between, where each rank holds 1/N of the summed gradient.
 *
 * Stage 2 — the gradients are sharded too (G/N per rank):
 *   after EVERY micro-batch's backward, reduce-scatter its gradient and add
 *   my chunk to a persistent gradient shard; the full-size buffer that the
 *   backward wrote is freed.  Bytes per step: M reduce-scatters + one
 *   all-gather = (M+1)(N-1)/N S — the same as stage 1 for M = 1, more for
 *   M > 1: the gradient memory is bought with communication.
 *
 *   per device, AdamW        params   grads                 optim
 *   plain DP (zero 0)        P        P                     2P
 *   zero 1                   P        P                     2 len_k
 *   zero 2                   P        len_k  (+ P, comm)    2 len_k       len_k = |chunk k| ~ P/N
 *
 * What the arena shows for stage 2: this model's backward writes the
 * gradient of every parameter of the stage before it returns, so one
 * full-size buffer must exist while one micro-batch's backward runs.  It is
 * the reduce-scatter's send buffer (DeepSpeed's "reduce bucket"), tagged
 * category "comm" and freed right after the reduce-scatter; category
 * "grads" holds only the persistent shard.  A layer-by-layer backward that
 * reduce-scattered each layer as soon as it is done would shrink the bucket
 * to one layer; here the peak of "comm" stays P.
 *
 * The gradient norm must count every element of the whole model once.  No
 * rank holds the whole summed gradient any more, so each sums the squares
 * of its own chunk — only the pieces that belong to parameters it counts
 * (a TP-replicated parameter is counted on tp rank 0 only, as in
 * ptdp_model_grad_sumsq) — and the partial sums are all-reduced over DP,
 * then TP, then PP.  Chunk boundaries cut through parameters, so the pieces
 * are precomputed once as ranges of the flat buffer.
 */
#ifndef PTDP_ZERO_H
#define PTDP_ZERO_H

#include <stddef.h>

#include "comm.h"
#include "model.h"

struct ptdp_device;

typedef struct { size_t begin, end; } ptdp_zero_range;   /* [begin, end) of the flat buffer */

typedef struct {
    int stage;                  /* 0 (plain DP: one chunk, the whole buffer), 1 or 2 */
    ptdp_comm *dp;              /* the DP group                                     */
    size_t numel;               /* elements of the flat buffers                     */
    size_t off, len;            /* my chunk: ptdp_chunk(numel, dp, dp rank)          */
    int nnorm;
    ptdp_zero_range *norm;      /* host: the pieces of my chunk the norm counts     */
    ptdp_real *grad_shard;      /* stage 2: [len], my chunk of the step's gradient ("grads") */
    ptdp_real *bucket;          /* stage 2: [numel] while a backward runs ("comm"), else NULL */
    /* Stage 2 with overlap (--overlap): the reduce-scatter after a backward
     * starts non-blocking (comm.h) and is waited for — its chunk added to
     * the shard, its bucket freed — only before the next backward's bucket
     * is allocated or before the optimizer, so it runs on the communication
     * stream under whatever the stage computes in between (the next
     * micro-batch's forward).  One bucket at a time, as without overlap. */
    bool overlap;
    ptdp_real *pending;         /* the bucket being reduce-scattered, or NULL */
    ptdp_request request;
} ptdp_zero;

/* Set up `stage` (0, 1 or 2) for model m in m->mesh's DP group.  Stage 2
 * frees the model's full-size gradient buffer (m->flat_g becomes NULL
 * between backwards) and allocates the shard.  PTDP_EINVAL for another stage. */
int  ptdp_zero_init(struct ptdp_device *dev, ptdp_zero *z, ptdp_model *m, int stage);
void ptdp_zero_free(struct ptdp_device *dev, ptdp_zero *z, ptdp_model *m);

/* Stage 2, around every micro-batch's backward (no-ops for stages 0 and 1):
 * begin gives the model a zeroed full-size gradient buffer; end
 * reduce-scatters it over DP, adds my chunk to the shard and frees it. */
int  ptdp_zero_backward_begin(struct ptdp_device *dev, ptdp_zero *z, ptdp_model *m);
int  ptdp_zero_backward_end(struct ptdp_device *dev, ptdp_zero *z, ptdp_model *m);

/* Once per step, after the last backward (stages 1 and 2): *grad points to
 * my chunk of the gradient summed over the DP group, len elements.  Stage 1
 * reduce-scatters the full buffer in place; stage 2 has done it already. */
int  ptdp_zero_reduce_gradients(ptdp_zero *z, ptdp_model *m, ptdp_real **grad);
/* ||g||^2 of the whole model from every rank's chunk (collective over DP,
 * TP and PP); `grad` is what ptdp_zero_reduce_gradients gave. */
int  ptdp_zero_grad_sumsq(ptdp_zero *z, const ptdp_model *m, const ptdp_real *grad, double *sumsq);
/* After the update of my chunk: every rank gets every chunk of the parameters. */
int  ptdp_zero_gather_params(ptdp_zero *z, ptdp_model *m);
/* Zero what holds the next step's gradient: the full buffer (stage 1) or the shard (stage 2). */
void ptdp_zero_clear_gradients(ptdp_zero *z, ptdp_model *m);

/* Bytes a device sends in its DP group per step for the gradients and
 * parameters, by the textbook formula with S = numel elements: plain DP
 * 2(N-1)/N S, zero 1 the same, zero 2 (M+1)(N-1)/N S.  For printing the trade. */
double ptdp_zero_dp_bytes_per_step(int stage, size_t numel, int dp, int micro_batches);

#endif
