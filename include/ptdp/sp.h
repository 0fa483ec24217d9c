/*
 * sp.h — sequence parallelism (Megatron-LM, Korthikanti et al. 2022): the
 * TP group also splits the sequence, where tensor parallelism left the
 * activations whole.
 *
 * Under plain TP every rank holds the whole B x T x C activation in the
 * LayerNorm, dropout and residual regions — the same numbers tp times.
 * Under SP rank r holds positions [r T/tp, (r+1) T/tp) of every sequence
 * there, and the two joins of a TP block change:
 *
 *            SP region            TP region               SP region
 *   x[T/tp] ─LN─► ──all-gather──► [column-par ... row-par] ──reduce-scatter──► + x[T/tp]
 *                 (seq. gather)                             (seq. scatter)
 *   backward:      reduce-scatter                            all-gather
 *                  (+ all-gather of the kept LN shard, for dW)
 *
 * An all-reduce is a reduce-scatter followed by an all-gather, so the
 * joins' bytes are those of TP; what falls is the activation memory of
 * the SP regions (LayerNorm inputs, outputs and statistics, dropout,
 * residuals), by tp.  A column-parallel layer's weight gradient dW = dy^T x
 * needs the whole gathered x: Megatron keeps only the shard and gathers it
 * again in the backward, under the dx product — one more all-gather of
 * (tp-1)/tp of R x C per layer, for (tp-1)/tp of its memory (the GPT:
 * gpt_ops.c).  The other price: a replicated parameter used in an SP
 * region — the LayerNorms'
 * weights and biases — sees only its rank's positions, so its gradient is
 * a partial sum that one all-reduce over TP completes (the parameter
 * declares it: summed over DP and TP, model.h's ptdp_grad_sum).
 *
 * Layout: a full tensor has samples x T rows, sample-major ([b][t]); its
 * SP shard samples x T/tp rows ([b][t_local]).  The collectives move
 * rank-major blocks ([r][b][t_local]), so each call permutes through a
 * scratch buffer of the full size (memory category "comm").
 */
#ifndef PTDP_SP_H
#define PTDP_SP_H

#include "comm.h"
#include "tensor.h"

struct ptdp_device;

/* gather_from_sequence_parallel_region forward (and the backward of
 * reduce_scatter_to_sequence_parallel_region): full = every rank's shard,
 * in sequence order.  full: samples x T rows, local: samples x T/tp rows,
 * both C columns and contiguous. */
int ptdp_sp_all_gather(struct ptdp_device *dev, ptdp_comm *tp, ptdp_tensor full, ptdp_tensor local,
                       int samples);

/* reduce_scatter_to_sequence_parallel_region forward (and the backward of
 * the gather): local = this rank's positions of the sum over the ranks of
 * full (each rank's partial sums). */
int ptdp_sp_reduce_scatter(struct ptdp_device *dev, ptdp_comm *tp, ptdp_tensor local, ptdp_tensor full,
                           int samples);

/* The all-gather on the communication stream (comm.h's non-blocking
 * collectives, clock.h's two streams): started, then waited for and laid
 * out in sequence order.  Between the two `full` must not be read (it is
 * written at the wait); the rank-major buffer ("sp.gather", memory
 * category "comm") lives until the wait.  Started by every member in the
 * same order, as the blocking call; the same bits and bytes. */
typedef struct {
    ptdp_request req;
    struct ptdp_device *dev;
    ptdp_real *ranked;          /* until the wait                           */
    ptdp_tensor full;
    int samples, n;
} ptdp_sp_gather;

int ptdp_sp_all_gather_start(struct ptdp_device *dev, ptdp_comm *tp, ptdp_tensor full, ptdp_tensor local,
                             int samples, ptdp_sp_gather *g);
int ptdp_sp_all_gather_wait(ptdp_sp_gather *g);

#endif
