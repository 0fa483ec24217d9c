/*
 * tp.h — tensor parallelism in Megatron-LM's vocabulary.
 *
 * A weight matrix is cut across the devices of a TP group; each computes
 * its part; the parts are joined by concatenation (all-gather) or by a sum
 * (all-reduce).  Four conjugate operators say where the joins happen:
 *
 *   operator                      forward          backward
 *   f  copy to TP region          identity         all-reduce (sum)
 *   g  reduce from TP region      all-reduce       identity
 *      gather from TP region      all-gather cols  split (keep own cols)
 *      scatter to TP region       split            all-gather cols
 *
 * The MLP block  y = GELU(x A^T) B^T  is then
 *
 *        x ──f──► [x A_r^T] ──GELU──► [· B_r^T] ──g──► y
 *                 column-parallel      row-parallel
 *                 (A split by rows:    (B split by columns:
 *                  each rank owns       each rank owns ffn/tp inputs,
 *                  ffn/tp outputs)     partial sums added by g)
 *
 * so a block costs exactly one all-reduce of B x h forward (g) and one
 * backward (f): GELU is applied element-wise to the local slice and needs
 * no communication, which is why A is split by rows and B by columns.
 * The two layers are parallel_linear.h's, every model's linear layers go
 * through them.
 */
#ifndef PTDP_TP_H
#define PTDP_TP_H

#include <stdbool.h>
#include <stdint.h>

#include "comm.h"
#include "tensor.h"

struct ptdp_device;

/* f: forward identity (x is already replicated on every rank); backward
 * all-reduce of the input gradient dx, in place. */
int ptdp_tp_copy_to_region_backward(ptdp_comm *tp, ptdp_tensor dx);
/* g: forward all-reduce of the partial outputs y, in place; backward identity. */
int ptdp_tp_reduce_from_region_forward(ptdp_comm *tp, ptdp_tensor y);
/* Gather: full = [local_0 | local_1 | …] (columns in rank order). */
int ptdp_tp_gather_from_region_forward(struct ptdp_device *dev, ptdp_comm *tp,
                                       ptdp_tensor local, ptdp_tensor full);
/* …and its backward: this rank's columns of dfull. */
void ptdp_tp_gather_from_region_backward(ptdp_comm *tp, ptdp_tensor dfull, ptdp_tensor dlocal);
/* Scatter: local = this rank's columns of full. */
void ptdp_tp_scatter_to_region_forward(ptdp_comm *tp, ptdp_tensor full, ptdp_tensor local);
/* …and its backward: dfull = [dlocal_0 | dlocal_1 | …]. */
int ptdp_tp_scatter_to_region_backward(struct ptdp_device *dev, ptdp_comm *tp,
                                       ptdp_tensor dlocal, ptdp_tensor dfull);

/* The column- and row-parallel linear layers built on f and g, Megatron's
 * ColumnParallelLinear and RowParallelLinear: parallel_linear.h. */

/* Vocab-parallel softmax cross-entropy: rank r holds logit columns
 * [col0, col0 + cols) of every row and never sees the others.
 *   m_i = max over all ranks (all-reduce MAX of the local row maxima)
 *   s_i = sum over all ranks of exp(l_ij - m_i)        (all-reduce SUM)
 *   t_i = l_i,label (the one rank that holds it, all-reduce SUM)
 *   loss_i = log s_i + m_i - t_i
 * Three all-reduces of B numbers instead of gathering B x C logits.
 * rowmax and sumexp (B doubles each) are kept for the backward; picked
 * (B doubles) is scratch. */
int ptdp_tp_xent_forward(ptdp_comm *tp, ptdp_tensor logits_local, int col0,
                         const int64_t *labels, double *rowmax, double *sumexp, double *picked,
                         double *loss_sum);
/* dlogits_r = scale * (exp(l - m)/s - onehot) on this rank's columns: no communication. */
void ptdp_tp_xent_backward(ptdp_tensor dlogits_local, ptdp_tensor logits_local, int col0,
                           const int64_t *labels, const double *rowmax, const double *sumexp,
                           double scale);

/* Vocab-parallel embedding (Megatron-LM's VocabParallelEmbedding): rank r
 * holds rows [row0, row0 + rows) of the V x C table.  Each rank looks up
 * the ids that fall in its rows and leaves zeros for the rest; one
 * all-reduce (sum) adds the one rank that had each row:
 *
 *   ids 3 9 1      rank 0 (rows 0-4): [e3  0  e1]
 *                  rank 1 (rows 5-9): [ 0 e9   0]  ──all-reduce──► [e3 e9 e1]
 *
 * x: ids count x C, replicated afterwards. */
int  ptdp_tp_embedding_forward(ptdp_comm *tp, ptdp_tensor x, ptdp_tensor table_local, int64_t row0,
                               const int64_t *ids);
/* dx is the same on every rank (x was replicated); each adds it into the
 * rows it holds.  No communication. */
void ptdp_tp_embedding_backward(ptdp_tensor dtable_local, int64_t row0, const int64_t *ids, ptdp_tensor dx);

/* Dropout (p, scale 1/(1-p)) with a counter-based mask: element (i, j) of a
 * (rows x cols) activation is dropped when uniform(key, (sample0 + i) *
 * full_cols + col0 + j) < p.  Keyed by GLOBAL sample and feature indices, a
 * split activation gets a different mask on each TP rank (its own columns)
 * and a replicated one the same mask on every rank — both exactly the
 * single-device mask.  Backward regenerates the mask: nothing is stored. */
void ptdp_tp_dropout(ptdp_tensor t, double p, uint64_t key, int64_t sample0,
                        int full_cols, int col0);
#endif
