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

#endif
