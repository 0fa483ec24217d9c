/*
 * ops.h — the numerical operations of the model, each forward beside its backward.
 *
 * The model is three ops deep:
 *
 *     x ──► linear ──► gelu ──► linear ──► … ──► linear ──► softmax-xent ──► loss
 *       y = x W^T + b   0.5x(1+tanh(…))                      -log p[label]
 *
 * and backpropagation runs the same ops' backward functions in reverse, each
 * one turning dL/d(output) into dL/d(input) and dL/d(parameters).
 *
 * Rules every op follows:
 *   - Pure functions on ptdp_tensor: they never allocate, never communicate
 *     and never touch a device or its clock.  A model's linear layers run
 *     through the parallel-linear op (parallel_linear.h), which adds TP's
 *     joins, the precision recipe, the clock's charge and W's sink around
 *     these products.  A model prices its own work: the GPT in gpt_cost.c
 *     (GEMMs through the profile's curve, clock.h, attention's included),
 *     the MLP in mlp.c; both take the elementwise counts of the
 *     ptdp_*_flops helpers below (LayerNorm, GELU, the cross-entropy's
 *     backward).
 *   - Any tensor argument may be a strided view (stride > cols), e.g. a
 *     tensor-parallel column slice of a full weight: ops index with
 *     data[i * stride + j] and pass the stride to BLAS as the leading dimension.
 *   - Shapes (and labels in range) are preconditions, checked with
 *     PTDP_REQUIRE (error.h): inside a device a wrong shape fails the device
 *     with a message naming the op and the shapes, and the op does nothing.
 *   - Deterministic: the same inputs give bit-identical outputs (BLAS runs
 *     single-threaded inside a device), so data-parallel replicas never drift.
 *
 * Flop counting convention: one flop per add, subtract, multiply or divide,
 * one per exp, log or tanh; a product of (m x k) by (k x n) costs 2 m n k.
 */
#ifndef PTDP_OPS_H
#define PTDP_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor.h"

/* ---------------------------------------------------------------- matmul */

/* C = alpha op(A) op(B) + beta C, where op(X) is X or X^T: the raw GEMM for
 * code that needs a product other than nn.Linear's (e.g. the data
 * generator's x T).  C is m x n, op(A) m x k, op(B) k x n.  beta == 0
 * overwrites C without reading it. */
void ptdp_matmul(ptdp_tensor c, ptdp_tensor a, bool trans_a, ptdp_tensor b, bool trans_b,
                 double alpha, double beta);
/* 2 m n k */
double ptdp_matmul_flops(int m, int n, int k);
/* A grouped pass (a mixture's experts: many small products side by side).
 * Between begin and end, the calling thread's ptdp_matmul products must be
 * independent (none reads another's output, and their operands stay put
 * until end): the small ones are queued and run at end, each whole on one
 * of the device's helper threads (nn/blas.c), so they share the cores as
 * one large product would.  Every product is the same call as alone: the
 * same bits. */
void ptdp_matmul_group_begin(void);
void ptdp_matmul_group_end(void);
/* The kernels the BLAS chose for this CPU (OpenBLAS's core name, e.g.
 * "Haswell"), or "unknown" for a BLAS that does not say. */
const char *ptdp_blas_kernels(void);

/* The products a piece of code asks for, recorded (for `ptdp bench train`:
 * "the same GEMMs alone").  Between start and stop every ptdp_matmul of
 * the calling thread appends its shape here (not its operands). */
typedef struct {
    bool trans_a, trans_b;
    int m, n, k;
    double alpha, beta;
} ptdp_gemm_shape;
typedef struct {
    ptdp_gemm_shape *calls;       /* malloc'd; free() when done            */
    int n, cap;
    bool overflow;                /* out of host memory: some were missed  */
} ptdp_gemm_log;
void ptdp_gemm_log_start(ptdp_gemm_log *log);
void ptdp_gemm_log_stop(void);

/* ---------------------------------------------------------------- linear */

/* y = x W^T (+ b): nn.Linear. x: B x in, w: out x in, b: 1 x out or NULL, y: B x out (overwritten). */
void ptdp_linear_forward(ptdp_tensor y, ptdp_tensor x, ptdp_tensor w, const ptdp_tensor *b);
/* Backward of y = x W^T + b given dy (B x out):
 *   dx  = dy W           (dx may be NULL: not needed, e.g. the first layer's input)
 *   dW += dy^T x         (accumulates: gradient accumulation over micro-batches)
 *   db += column sums of dy   (db may be NULL)
 * if accumulate_dx is true, dx += dy W instead of =.
 * Outputs must not overlap inputs (dx is not dy, x or w). */
void ptdp_linear_backward(ptdp_tensor *dx, ptdp_tensor dw, ptdp_tensor *db,
                          ptdp_tensor dy, ptdp_tensor x, ptdp_tensor w, bool accumulate_dx);
/* 2 B in out + B out (the bias; every Linear of the model has one). */
double ptdp_linear_flops_forward(int batch, int in, int out);
/* 4 B in out + B out: dx (2 B in out), dW (2 B in out), db (B out).
 * Without dx (the first layer) subtract ptdp_matmul_flops(batch, in, out). */
double ptdp_linear_flops_backward(int batch, int in, int out);
/* Its two halves when a split backward defers dW (wgrad.h): B's dx and db,
 * 2 B in out + B out, and W's dW, 2 B in out. */
double ptdp_linear_flops_backward_input(int batch, int in, int out);
double ptdp_linear_flops_backward_weight(int batch, int in, int out);
/* y += b broadcast over rows (b: 1 x y.cols) */
void ptdp_add_bias(ptdp_tensor y, ptdp_tensor b);
/* db += column sums of dy (db: 1 x dy.cols) */
void ptdp_bias_backward(ptdp_tensor db, ptdp_tensor dy);

/* ------------------------------------------------------------------- exp */

/* x[j] = e^x[j] for j < n, bit for bit libm's exp (expf in float) of each
 * element — vectorised where that is known to hold (exp.c). */
void ptdp_exp_inplace(ptdp_real *x, size_t n);
/* Whether ptdp_exp_inplace runs vectorised on this machine and build. */
bool ptdp_exp_vectorised(void);

/* ------------------------------------------------------------------ gelu */

/* GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))) (PyTorch gelu(approximate="tanh")).
 * y may alias x. */
void ptdp_gelu_forward(ptdp_tensor y, ptdp_tensor x);
/* dx = dy * gelu'(x) (x is the forward's input); dx may alias dy. */
void ptdp_gelu_backward(ptdp_tensor dx, ptdp_tensor dy, ptdp_tensor x);
/* 9 per element forward, 19 backward (counted in gelu.c). */
double ptdp_gelu_flops_forward(size_t n);
double ptdp_gelu_flops_backward(size_t n);

/* ------------------------------------------------- softmax cross-entropy */

/* Softmax cross-entropy over rows of logits (B x C) with integer labels in [0, C).
 * Returns the SUM over rows of -log softmax(logits)[label], computed stably in double (row max subtracted).
 * Not the mean: the caller decides the scaling (it matters for data parallelism). */
double ptdp_xent_forward(ptdp_tensor logits, const int64_t *labels);
/* dlogits = scale * (softmax(logits) - onehot(label)); dlogits may alias logits. */
void ptdp_xent_backward(ptdp_tensor dlogits, ptdp_tensor logits, const int64_t *labels, double scale);
/* About 5 per logit backward (subtract, exp, multiply, subtract, multiply). */
double ptdp_xent_flops_backward(int batch, int classes);

/* Vocab-parallel (tensor-parallel) cross-entropy, where each rank holds the
 * column slice [col0, col0 + logits.cols) of the full B x C logits.  For row
 * i, with M = the global row max and S = sum over ALL columns of exp(l - M):
 *
 *     loss_i = log S + M - l[label_i]
 *
 * Every rank computes partials over its slice, the TP group combines them
 * (all_reduce max of the maxima, then all_reduce sum of the sums and of the
 * picked logits), and every rank can then finish the loss and its slice of
 * the gradient.  All outputs are arrays of B doubles.
 *
 *   ptdp_row_max     out[i] = max_j logits[i][j]                  → all_reduce MAX
 *   ptdp_row_sum_exp out[i] = sum_j exp(logits[i][j] - max[i])     → all_reduce SUM
 *                    (max = the GLOBAL maxima)
 *   ptdp_pick_label  out[i] = logits[i][labels[i] - col0] if the
 *                    label falls in this slice, else 0             → all_reduce SUM
 */
void ptdp_row_max(double *out, ptdp_tensor logits);
void ptdp_row_sum_exp(double *out, ptdp_tensor logits, const double *max);
void ptdp_pick_label(double *out, ptdp_tensor logits, const int64_t *labels, int col0);
/* Sum over the B rows of log sumexp[i] + max[i] - picked[i]: the loss sum,
 * equal to ptdp_xent_forward of the full logits. */
double ptdp_xent_from_partials(int rows, const double *max, const double *sumexp, const double *picked);
/* dlogits = scale * (exp(l - max) / sumexp - onehot) on this slice (the
 * one-hot is 1 only where labels[i] - col0 is a column of the slice).
 * dlogits may alias logits. */
void ptdp_xent_backward_shard(ptdp_tensor dlogits, ptdp_tensor logits, const int64_t *labels,
                              int col0, const double *max, const double *sumexp, double scale);

/* ------------------------------------------------------------ layernorm */

/* y = (x - mean) / sqrt(var + eps) * w + b over each row (biased variance,
 * as torch.nn.LayerNorm); mean and rstd (rows numbers each) are kept for
 * the backward.  y may alias x. */
void ptdp_layernorm_forward(ptdp_tensor y, ptdp_real *mean, ptdp_real *rstd, ptdp_tensor x,
                            ptdp_tensor w, ptdp_tensor b, double eps);
/* dw += sum dy xhat, db += sum dy, dx = (or += with accumulate_dx) the
 * input gradient.  dx may alias dy unless accumulating. */
void ptdp_layernorm_backward(ptdp_tensor dx, ptdp_tensor dw, ptdp_tensor db, ptdp_tensor dy,
                             ptdp_tensor x, ptdp_tensor w, const ptdp_real *mean,
                             const ptdp_real *rstd, bool accumulate_dx);
double ptdp_layernorm_flops_forward(size_t n);
double ptdp_layernorm_flops_backward(size_t n);

/* -------------------------------------------------------------- rmsnorm */

/* y = x / sqrt(mean_j(x_j^2) + eps) * w over each row (no mean subtracted,
 * no bias: Meta's llama RMSNorm); w is 1 x C; rstd (rows numbers) is kept
 * for the backward.  y may alias x. */
void ptdp_rmsnorm_forward(ptdp_tensor y, ptdp_real *rstd, ptdp_tensor x, ptdp_tensor w, double eps);
/* dw += sum over rows dy * x * rstd; dx = (or += with accumulate_dx)
 *     rstd (dy w − xhat mean_j(dy w xhat)),  xhat = x rstd.
 * dx may alias dy unless accumulating. */
void ptdp_rmsnorm_backward(ptdp_tensor dx, ptdp_tensor dw, ptdp_tensor dy, ptdp_tensor x, ptdp_tensor w,
                           const ptdp_real *rstd, bool accumulate_dx);
/* 4 per element forward, 11 backward (counted in rmsnorm.c). */
double ptdp_rmsnorm_flops_forward(size_t n);
double ptdp_rmsnorm_flops_backward(size_t n);

/* ---------------------------------------------------------------- rope */

/* Rotary position embeddings (Meta's llama3 apply_rotary_emb), in place:
 * within each of the `heads` heads of width hd (even, at most 1024) stored
 * side by side from column col0 of each row, the pair (2i, 2i+1) turns by
 * a = pos · theta^(−2i/hd):
 *     (x0, x1) → (x0 cos a − x1 sin a,  x0 sin a + x1 cos a)
 * x has (B T) rows; row b T + t is at GLOBAL position pos[t] (T entries:
 * under context parallelism the caller passes its chunks' positions). */
void ptdp_rope_forward(ptdp_tensor x, int col0, int heads, int hd, const int64_t *pos, int T, double theta);
/* The transpose of the rotation (the rotation by −a), in place on dx. */
void ptdp_rope_backward(ptdp_tensor dx, int col0, int heads, int hd, const int64_t *pos, int T, double theta);
/* 3 per rotated element, either direction. */
double ptdp_rope_flops(size_t rows, int heads, int hd);

/* -------------------------------------------------------------- swiglu */

/* SwiGLU's gate: h = silu(a) ⊙ b, silu(a) = a σ(a); h may alias a or b. */
void ptdp_swiglu_forward(ptdp_tensor h, ptdp_tensor a, ptdp_tensor b);
/* da = dh b σ(a) (1 + a (1 − σ(a))),  db = dh silu(a)  (overwritten;
 * either may alias dh, a or b). */
void ptdp_swiglu_backward(ptdp_tensor da, ptdp_tensor db, ptdp_tensor dh, ptdp_tensor a, ptdp_tensor b);
/* 5 per element forward, 11 backward (counted in swiglu.c). */
double ptdp_swiglu_flops_forward(size_t n);
double ptdp_swiglu_flops_backward(size_t n);

/* ------------------------------------------------------------ attention */

/* Dropout on the attention probabilities, keyed by global indices: element
 * (t, s) of head `head0 + h` of sample `sample0 + b` is dropped when
 * uniform(key, ((sample heads_total + head) T + t) T + s) < p. */
typedef struct {
    double p;
    uint64_t key;
    int64_t sample0;      /* global index of the first sequence          */
    int head0;            /* global index of the first local head        */
    int heads_total;      /* heads of the whole model                    */
} ptdp_attn_dropout;

/* The mask itself: keep the probability of query t for key s (positions
 * in a sequence of T) of sample `sample` and global head `head`?  One
 * definition, for attention.c and ring attention (cp.c) alike. */
bool ptdp_attn_dropout_kept(const ptdp_attn_dropout *d, int64_t sample, int head, int T, int t, int s);

/* Causal self-attention (attention.c).  qkv: (B T) x (3 heads hd), each row
 * [q of every head | k of every head | v of every head]; y: (B T) x (heads
 * hd), the heads side by side.  probs receives the softmax probabilities,
 * B heads T T numbers, kept for the backward.  dropout may be NULL; with
 * p > 0 it needs T T reals of scratch. */
void ptdp_attention_forward(ptdp_tensor y, ptdp_real *probs, ptdp_tensor qkv, int T, int heads,
                            int hd, const ptdp_attn_dropout *dropout, ptdp_real *scratch);
/* dqkv (overwritten) from dy; scratch holds 2 T T reals. */
void ptdp_attention_backward(ptdp_tensor dqkv, ptdp_tensor dy, ptdp_tensor qkv, const ptdp_real *probs,
                             int T, int heads, int hd, const ptdp_attn_dropout *dropout,
                             ptdp_real *scratch);
/* The same for the queries of one slice of each sequence, positions
 * [q0, q1), against the keys [0, q1) (TeraPipe; q0 = 0, q1 = T is the
 * above).  qkv holds the WHOLE sequences, (B T) x (3 heads hd): rows q0..q1-1
 * of each the slice's q, k, v, rows 0..q0-1 the earlier slices' k and v.
 * y: (B (q1-q0)) x (heads hd); probs B heads (q1-q0) q1 numbers; scratch
 * (q1-q0) q1 reals (forward, with dropout), twice that (backward).  The
 * backward writes dq for rows q0..q1-1 of dqkv and writes — or with
 * accumulate_kv adds — dk and dv for rows 0..q1-1. */
void ptdp_attention_forward_slice(ptdp_tensor y, ptdp_real *probs, ptdp_tensor qkv, int T, int q0, int q1,
                                  int heads, int hd, const ptdp_attn_dropout *dropout, ptdp_real *scratch);
void ptdp_attention_backward_slice(ptdp_tensor dqkv, ptdp_tensor dy, ptdp_tensor qkv, const ptdp_real *probs,
                                   int T, int q0, int q1, int heads, int hd, const ptdp_attn_dropout *dropout,
                                   bool accumulate_kv, ptdp_real *scratch);

/* Grouped-query attention: the packed row is [q of `heads` heads | k of
 * `kv_heads` heads | v of `kv_heads` heads], width (heads + 2 kv_heads) hd,
 * and query head h attends with kv head h / (heads / kv_heads) (kv_heads
 * divides heads; kv_heads = heads is the attention above, bit for bit, and
 * kv_heads = 1 multi-query).  y, probs, dy, scratch and dropout's head
 * indices are per query head, as above.  The backward's dK and dV of a kv
 * head are the sums over the query heads that share it. */
void ptdp_attention_gqa_forward(ptdp_tensor y, ptdp_real *probs, ptdp_tensor qkv, int T, int heads, int kv_heads,
                                int hd, const ptdp_attn_dropout *dropout, ptdp_real *scratch);
void ptdp_attention_gqa_backward(ptdp_tensor dqkv, ptdp_tensor dy, ptdp_tensor qkv, const ptdp_real *probs, int T,
                                 int heads, int kv_heads, int hd, const ptdp_attn_dropout *dropout, ptdp_real *scratch);
void ptdp_attention_gqa_forward_slice(ptdp_tensor y, ptdp_real *probs, ptdp_tensor qkv, int T, int q0, int q1,
                                      int heads, int kv_heads, int hd, const ptdp_attn_dropout *dropout,
                                      ptdp_real *scratch);
void ptdp_attention_gqa_backward_slice(ptdp_tensor dqkv, ptdp_tensor dy, ptdp_tensor qkv, const ptdp_real *probs,
                                       int T, int q0, int q1, int heads, int kv_heads, int hd,
                                       const ptdp_attn_dropout *dropout, bool accumulate_kv, ptdp_real *scratch);

/* The tiles' side: 64 queries by 64 keys. */
enum { PTDP_ATTENTION_TILE = 64 };

/* Causal attention in tiles (attention_tiled.c, FlashAttention's
 * algorithm): the queries [q0, q1) of each sequence against the keys
 * [0, q1), as ptdp_attention_gqa_forward_slice, but keeping for the
 * backward only each query's log-sum-exp: lse holds B heads (q1 - q0)
 * numbers, never the probabilities.  The backward reads y (the forward's
 * output) for delta_t = dY_t . y_t, writes dq for rows q0..q1-1 of dqkv and
 * writes — or with accumulate_kv adds — dk and dv for rows 0..q1-1.
 * scratch: ptdp_attention_tiled_scratch() reals, forward and backward. */
void ptdp_attention_tiled_forward(ptdp_tensor y, ptdp_real *lse, ptdp_tensor qkv, int T, int q0, int q1,
                                  int heads, int kv_heads, int hd, const ptdp_attn_dropout *dropout,
                                  ptdp_real *scratch);
void ptdp_attention_tiled_backward(ptdp_tensor dqkv, ptdp_tensor dy, ptdp_tensor qkv, ptdp_tensor y,
                                   const ptdp_real *lse, int T, int q0, int q1, int heads, int kv_heads, int hd,
                                   const ptdp_attn_dropout *dropout, bool accumulate_kv, ptdp_real *scratch);
/* The same with delta given instead of y: delta (B (q1 - q0)) x heads, row
 * b (q1-q0) + i column h = dY . y of that query and head, as
 * ptdp_attention_tiled_delta makes it (Ulysses makes it where y lies and
 * sends it: 1/hd of y's bytes). */
void ptdp_attention_tiled_backward_delta(ptdp_tensor dqkv, ptdp_tensor dy, ptdp_tensor qkv, ptdp_tensor delta,
                                         const ptdp_real *lse, int T, int q0, int q1, int heads, int kv_heads,
                                         int hd, const ptdp_attn_dropout *dropout, bool accumulate_kv,
                                         ptdp_real *scratch);
/* delta[r][h] = sum_j dy[r][h hd + j] y[r][h hd + j]: rows x heads. */
void ptdp_attention_tiled_delta(ptdp_tensor delta, ptdp_tensor dy, ptdp_tensor y, int hd);
size_t ptdp_attention_tiled_scratch(void);
/* The scores the tiles compute for one head's queries [q0, q1): the pairs
 * of tiles not wholly in the future, about (q1² − q0²)/2 + (q1 − q0) 64/2. */
double ptdp_attention_tiled_scores(int q0, int q1);

/* ------------------------------------------------------------ embeddings */

/* out[i] = row ids[i] - row0 of table, or zeros where the id is not one of
 * the table's rows (a vocab-parallel shard holds rows [row0, row0 + rows)). */
void ptdp_embedding_forward(ptdp_tensor out, ptdp_tensor table, int64_t row0, const int64_t *ids);
/* dtable[ids[i] - row0] += dout[i] for the ids the shard holds, in row order. */
void ptdp_embedding_backward(ptdp_tensor dtable, int64_t row0, const int64_t *ids, ptdp_tensor dout);
/* x[b T + t] += wpe[t], and its backward dwpe[t] += sum_b dx[b T + t]. */
void ptdp_positions_forward(ptdp_tensor x, ptdp_tensor wpe, int T);
void ptdp_positions_backward(ptdp_tensor dwpe, ptdp_tensor dx, int T);

#endif
