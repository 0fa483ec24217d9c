/*
 * lesson.h — lesson 07: the functions you write in exercise.c, which the
 * check calls.
 *
 * GPT-2's names and shapes (nanoGPT), nn.Linear's [out, in] layout:
 *   C = hidden, nh = heads, hd = C / nh, n = C / tp (the rows of a rank's
 *   nh/tp heads), R = B T token rows, V_pad = the padded vocabulary.
 *
 *   c_attn.weight [3C, C], c_attn.bias [1, 3C]   q | k | v, C rows each
 *   c_proj.weight [C, C],  c_proj.bias [1, C]
 *   wte           [V_pad, C]
 *
 * "Local" tensors are this TP rank's part; the others are whole, the same
 * on every rank.
 */
#ifndef LESSON_07_H
#define LESSON_07_H

#include <stdint.h>

#include "ptdp/comm.h"
#include "ptdp/model.h"
#include "ptdp/tensor.h"

/* Blank 1.  Copy into w_local [3n, C] and b_local [1, 3n] the rows of
 * c_attn (and the bias entries) that belong to this rank's heads: rows
 * [r n, (r+1) n) of EACH of the three C-row blocks q, k and v, in that
 * order.  No communication: every rank has the whole tensors. */
int lesson_qkv_shard(ptdp_comm *tp, int heads, ptdp_tensor w, ptdp_tensor b,
                     ptdp_tensor w_local, ptdp_tensor b_local);

/* Done for you (the worked example).  c_proj is row-parallel: rank r owns
 * its heads' n INPUTS, columns [r n, (r+1) n) of the weight; *w_local is a
 * view into w.  The bias is not split. */
int lesson_proj_shard(ptdp_comm *tp, ptdp_tensor w, ptdp_tensor *w_local);

/* Blank 2.  c_proj, row-parallel: out [R, C] = y W^T + b, whole on every
 * rank (overwritten), from y_local [R, n] (my heads' outputs) and
 * w_local [C, n].  Exactly one all-reduce; the bias added once. */
int lesson_proj_forward(ptdp_comm *tp, ptdp_tensor out, ptdp_tensor y_local,
                        ptdp_tensor w_local, ptdp_tensor b);

/* What one rank's attention keeps between its steps (the check allocates it). */
typedef struct {
    ptdp_tensor qkv_local;     /* R x 3n: my heads' q | k | v                */
    ptdp_tensor y_local;       /* R x n:  my heads' outputs, side by side    */
    ptdp_real *probs;          /* B (nh/tp) T T softmax probabilities         */
} lesson_attn_work;

/* Done for you: the attention of one block on this rank,
 *   out = attention(x c_attn_local^T + b_local) c_proj_local^T  (+ g, + b)
 * x [R, C] whole; T positions per sequence. */
int lesson_attention_forward(ptdp_comm *tp, int heads, int T, ptdp_tensor out, ptdp_tensor x,
                             ptdp_tensor w_attn_local, ptdp_tensor b_attn_local,
                             ptdp_tensor w_proj_local, ptdp_tensor b_proj, lesson_attn_work *work);

/* Blank 3.  The vocab-parallel embedding: this rank holds rows
 * [r V_pad/tp, (r+1) V_pad/tp) of wte as wte_local [V_pad/tp, C].  x [R, C]
 * (overwritten) gets, for each token, wte[token] — whole, on every rank —
 * with exactly one all-reduce. */
int lesson_embedding_forward(ptdp_comm *tp, ptdp_tensor x, ptdp_tensor wte_local,
                             const int64_t *tokens);

/* ------------------------------------------------------ the backward
 *
 * The backward runs the attention's two linears in reverse.  Each TP
 * linear's backward takes the gradient of its output and gives the
 * gradient of its input and (added into) its weights' and bias's:
 *
 *   c_proj (row-parallel):    out = sum_r y_r P_r^T + b   (g: all-reduce)
 *       dy_r = dout P_r     dP_r += dout^T y_r     db += column sums of dout
 *   c_attn (column-parallel): qkv_r = x W_r^T + b_r       (f: identity)
 *       dx = sum_r dqkv_r W_r                dW_r += dqkv_r^T x
 *                                            db_r += column sums of dqkv_r
 *
 * Which of the two needs an all-reduce, and which none? */

/* Blank 4.  c_proj's backward on this rank: from dout [R, C] (whole, the
 * same on every rank), y_local [R, n] (my heads' outputs) and w_local
 * [C, n] (my columns of c_proj.weight): dy_local [R, n] (overwritten),
 * and ADD into dw_local [C, n] and db [1, C] (the whole bias, on every
 * rank). */
int lesson_proj_backward(ptdp_comm *tp, ptdp_tensor dy_local, ptdp_tensor dw_local, ptdp_tensor db,
                         ptdp_tensor dout, ptdp_tensor y_local, ptdp_tensor w_local);
/* Blank 5.  c_attn's backward on this rank: from dqkv_local [R, 3n] (the
 * gradient of my heads' q | k | v), x [R, C] (whole) and w_local [3n, C]
 * (my rows of c_attn.weight): dx [R, C] (overwritten; whole on every
 * rank), and ADD into dw_local [3n, C] and db_local [1, 3n]. */
int lesson_qkv_backward(ptdp_comm *tp, ptdp_tensor dx, ptdp_tensor dw_local, ptdp_tensor db_local,
                        ptdp_tensor dqkv_local, ptdp_tensor x, ptdp_tensor w_local);

/* ------------------------- grouped-query attention (the llama's wq, wk, wv)
 *
 * Meta's names and shapes: H query heads and K kv heads (K divides H) of
 * hd columns each, no biases:
 *
 *   wq [H hd, C]   wk [K hd, C]   wv [K hd, C]   wo [C, H hd]
 *
 * Query head h attends with kv head h / (H/K): H/K query heads in a row
 * share one (Meta's repeat_kv).  Under TP rank r runs query heads
 * [r H/tp, (r+1) H/tp) — wq's rows [r H hd/tp, (r+1) H hd/tp), a view —
 * and needs the kv heads those read: K/tp of them when tp <= K, and when
 * tp > K ONE kv head, which tp/K ranks then hold a copy of. */

/* Blank 6.  Copy into wk_local and wv_local [Kl hd, C] (Kl = K/tp, or 1
 * when tp > K) the rows of wk and wv [K hd, C] of the kv heads this rank's
 * query heads read.  No communication. */
int lesson_kv_shard(ptdp_comm *tp, int heads, int kv_heads, ptdp_tensor wk, ptdp_tensor wv,
                    ptdp_tensor wk_local, ptdp_tensor wv_local);

/* Blank 7.  Declare where the gradient of this rank's wk and wv rows is
 * summed, as a model declares it for each parameter (model.h's
 * ptdp_grad_sum, mesh.h's groups): sum->also, the groups beyond the data-
 * parallel replicas, and *tp_share, the size of the PTDP_GROUP_TP_SHARE
 * groups — that many consecutive TP ranks, {0 .. tp_share-1},
 * {tp_share .. 2 tp_share-1}, … (1 when no such group is needed).  They
 * arrive as the default: sum = { .replicas = PTDP_GROUP_DP, .also = 0 },
 * *tp_share = 1. */
int lesson_kv_grad_sum(int tp, int kv_heads, ptdp_grad_sum *sum, int *tp_share);

/* Done for you: what the library does with that declaration once a step
 * (model.c's sum_group, mesh.c's split_tp_share): all-reduce g over each
 * group of sum.also — here the TP group and its TP_SHARE groups; dp = cp =
 * pp = 1, so their groups are single devices and sum nothing. */
int lesson_sum_declared(ptdp_comm *tp, ptdp_grad_sum sum, int tp_share, ptdp_tensor g);

#endif
