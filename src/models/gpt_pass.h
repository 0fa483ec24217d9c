/*
 * models/gpt_pass.h — private to the GPT's files: one pass (a forward or a
 * backward of one micro-batch on one stage) and the ops its blocks call.
 *
 * A block's code is a list of op calls in the order of the math; what is
 * not the math lives in the ops and in three places below it:
 *
 *   gpt_block.c      ln_1, c_attn, attention, c_proj, residual,
 *                    ln_2, c_fc, gelu, c_proj, residual      (and backward)
 *        │ calls
 *        ▼
 *   gpt_ops.c        each op: its kernel (ops.h), the rounding to bf16 of
 *                    what it keeps, the TP / SP collective that ends a
 *                    piece of work and the clock charge of that piece
 *   gpt_attention.c  the attention core: whole sequences, CP's ring or a
 *                    token slice, selective recomputation
 *   gpt_regions.c    which rows this device holds: CP's positions, a token
 *                    slice's, SP's share of them; dropout by global position
 *
 * and gpt.c runs a stage: the embedding (gpt_embed_head.c), the blocks,
 * LN_f, the head and the loss (gpt_embed_head.c again), and keeps what a
 * micro-batch needs between its forward and its backward.
 *
 * Errors stick: the first op that fails stores its status in pass->rc and
 * every later op of the pass does nothing, so a block reads as its ops
 * and ends with `return k->rc`.
 */
#ifndef PTDP_MODELS_GPT_PASS_H
#define PTDP_MODELS_GPT_PASS_H

#include <stdbool.h>
#include <stdint.h>

#include "ptdp/act_bf16.h"
#include "ptdp/gpt.h"
#include "gpt_cost.h"
#include "ptdp/parallel_linear.h"
#include "ptdp/wgrad.h"

/* One forward or backward of one micro-batch on one device. */
typedef struct {
    ptdp_device *dev;
    ptdp_model *m;
    const ptdp_acts *acts;
    ptdp_gpt_shape shape;       /* what the clock prices (gpt_cost.h)        */
    ptdp_wgrad *wg;             /* backward: W's sink for the dW products, or
                                   NULL to run them now (wgrad.h)           */
    char what[32];              /* the clock's name for the current work     */
    char wwhat[32];             /* ... and for the dW products W will run    */
    double w0;                  /* wall clock when the current piece began   */
    bool units_held;            /* full recomputation: the backward holds the
                                   tail's units (model.h) around the tail's
                                   forward again, which makes no unit event */
    double loss_scale;          /* backward: the loss's scale (1 / (global
                                   batch x label_cols)), for the balance
                                   loss's gradient
                                   an MoE block adds itself (gpt_moe.c)    */
    int rc;                     /* the first failure; then every op is a no-op */
} ptdp_gpt_pass;

/* The scratch of one backward.  R token rows, but tmp and dln_local have
 * region rows (all R, or this rank's positions under SP, where dfull holds
 * a gathered tensor: the gradient into a row-parallel layer, then the
 * LayerNorm output a column-parallel layer's dW needs, gathered again). */
typedef struct {
    ptdp_tensor tmp, dln, dln_local, dfull, dff, dy, dqkv;
    ptdp_real *att;             /* 2 T T: the attention backward's scratch  */
} ptdp_gpt_scratch;

/* ------------------------------------------------ gpt_regions.c */

int ptdp_gpt_cp_size(const ptdp_model *m);                    /* 1 without CP */
bool ptdp_gpt_cp_ring(const ptdp_model *m);                   /* CP's attention: the ring */
bool ptdp_gpt_cp_ulysses(const ptdp_model *m);                /* ... or Ulysses' all-to-alls */
bool ptdp_gpt_sliced(const ptdp_acts *a);                     /* a token slice (TeraPipe) */
int ptdp_gpt_local_T(const ptdp_model *m, const ptdp_acts *a); /* T, T / cp or tlen */
int ptdp_gpt_region_rows(const ptdp_model *m, int R);         /* R, or R / tp under SP */
int ptdp_gpt_region_position(const ptdp_model *m, const ptdp_acts *a, int i);
void ptdp_gpt_take_positions(const ptdp_model *m, const ptdp_acts *a, int64_t *dst, const int64_t *src, int rows);
void ptdp_gpt_positions(const ptdp_model *m, const ptdp_acts *a, ptdp_tensor wpe, ptdp_tensor x, int rows,
                        bool backward);
uint64_t ptdp_gpt_dropout_key(const ptdp_model *m, int layer, const char *where);
void ptdp_gpt_region_dropout(const ptdp_model *m, const ptdp_acts *acts, ptdp_tensor t, uint64_t key);
size_t ptdp_gpt_probs_len(const ptdp_model *m, const ptdp_acts *acts);
ptdp_gpt_shape ptdp_gpt_shape_of(const ptdp_model *m, const ptdp_acts *a, bool split);

/* ---------------------------------------------------- gpt_ops.c */

void ptdp_gpt_pass_begin(ptdp_gpt_pass *k, ptdp_device *dev, ptdp_model *m, const ptdp_acts *acts,
                         ptdp_wgrad *wg);
void ptdp_gpt_pass_name(ptdp_gpt_pass *k, const char *what, const char *wwhat);
/* Arena helpers: activations (category acts), written whole before read. */
int ptdp_gpt_act(ptdp_gpt_pass *k, ptdp_tensor *t, const char *name, int rows, int cols);
ptdp_real *ptdp_gpt_act_reals(ptdp_gpt_pass *k, size_t n, const char *name);
/* Round an activation to bf16 under --precision bf16 (act_bf16.h). */
void ptdp_gpt_round(ptdp_gpt_pass *k, ptdp_tensor t);
void ptdp_gpt_round_reals(ptdp_gpt_pass *k, ptdp_real *x, size_t n);

/* The clock: the piece of work since the last charge or collective, as
 * gpt_cost.c prices it. */
typedef double (*ptdp_gpt_cost_fn)(const ptdp_profile *p, const ptdp_gpt_shape *s);
void ptdp_gpt_charge(ptdp_gpt_pass *k, ptdp_gpt_cost_fn cost);
/* The parallel-linear op's pass for k (parallel_linear.h): the TP group,
 * SP's sequences, the recipe (bf16 or storage), W's sink, the clock's
 * names and wall start — every GEMM of the GPT goes through it. */
ptdp_linear_pass ptdp_gpt_linear_pass(ptdp_gpt_pass *k);

/* forward */
void ptdp_gpt_ln(ptdp_gpt_pass *k, ptdp_tensor out, ptdp_real *mean, ptdp_real *rstd, ptdp_tensor x,
                 const ptdp_param *w, const ptdp_param *b);
void ptdp_gpt_column_linear(ptdp_gpt_pass *k, ptdp_tensor y, ptdp_tensor x, const ptdp_param *w,
                            const ptdp_param *b);
void ptdp_gpt_gelu(ptdp_gpt_pass *k, ptdp_tensor y, ptdp_tensor x);
void ptdp_gpt_row_linear(ptdp_gpt_pass *k, ptdp_tensor out, ptdp_tensor part, ptdp_tensor x, const ptdp_param *w,
                         ptdp_gpt_cost_fn cost);
void ptdp_gpt_residual(ptdp_gpt_pass *k, ptdp_tensor out, const ptdp_param *b, uint64_t drop_key,
                       ptdp_tensor skip);

/* backward */
void ptdp_gpt_residual_backward(ptdp_gpt_pass *k, ptdp_tensor *d, ptdp_tensor dout, uint64_t drop_key,
                                ptdp_gpt_scratch *s);
void ptdp_gpt_row_linear_backward(ptdp_gpt_pass *k, ptdp_tensor dx, ptdp_tensor dy, ptdp_tensor x,
                                  const ptdp_param *w, ptdp_param *b);
void ptdp_gpt_gelu_backward(ptdp_gpt_pass *k, ptdp_tensor d, ptdp_tensor x);
void ptdp_gpt_column_linear_backward(ptdp_gpt_pass *k, ptdp_gpt_scratch *s, ptdp_tensor dy, ptdp_tensor x,
                                     const ptdp_param *w, ptdp_param *b, const ptdp_gpt_column_backward_cost *cost);
void ptdp_gpt_ln_backward(ptdp_gpt_pass *k, ptdp_tensor dx, ptdp_tensor dy, ptdp_tensor x, const ptdp_param *w,
                          const ptdp_param *b, const ptdp_real *mean, const ptdp_real *rstd, bool accumulate_dx);
void ptdp_gpt_grad_into_tp(ptdp_gpt_pass *k, ptdp_tensor d, ptdp_gpt_scratch *s, ptdp_tensor *full);

/* -------------------------------------------- gpt_attention.c */

/* y = softmax(q k^T / sqrt(hd) + causal mask) v for block i's heads,
 * keeping what its backward needs in a (the probabilities, or CP's
 * log-sum-exps; none under selective recomputation). */
void ptdp_gpt_attention(ptdp_gpt_pass *k, int i, ptdp_gpt_block_acts *a);
/* s->dqkv from s->dy. */
void ptdp_gpt_attention_backward(ptdp_gpt_pass *k, int i, ptdp_gpt_block_acts *a, ptdp_gpt_scratch *s);

/* ------------------------------------------- gpt_embed_head.c */

/* Stage 0's x; its backward into wte's and wpe's gradients. */
int ptdp_gpt_embed_forward(ptdp_gpt_pass *k, ptdp_gpt_saved *sv, ptdp_tensor x);
int ptdp_gpt_embed_backward(ptdp_gpt_pass *k, ptdp_gpt_saved *sv, ptdp_gpt_scratch *s, ptdp_tensor dh);
/* The last stage's LN_f, head and loss; the backward from the loss to dh. */
int ptdp_gpt_head_forward(ptdp_gpt_pass *k, ptdp_acts *acts, ptdp_gpt_saved *sv);
int ptdp_gpt_head_backward(ptdp_gpt_pass *k, ptdp_gpt_saved *sv, ptdp_gpt_scratch *s, ptdp_tensor dh,
                           double loss_scale);
/* What the last stage keeps as bf16 between them (act_bf16.h): LN_f's
 * input and output. */
int ptdp_gpt_tail_slots(ptdp_gpt_saved *sv, ptdp_act_slot *s);

/* ------------------------------------------------- gpt_moe.c */

/* Block i's mixture of experts (parallel/moe.c with the GPT's MLP as the
 * expert): out (R x C) = sum over the token's kept choices of gate x
 * expert(ln2), the experts' biases included; keeps its routing and the
 * experts' activations in a->moe, and counts the route in the
 * micro-batch's tally (gpt_moe_stats.c). */
void ptdp_gpt_moe_forward(ptdp_gpt_pass *k, int i, ptdp_gpt_block_acts *a, ptdp_tensor out);
/* From d, the gradient of the branch's output: the experts' and the
 * router's gradients (with the balance loss's, scaled by k->loss_scale),
 * and s->dln, the gradient into ln2. */
void ptdp_gpt_moe_backward(ptdp_gpt_pass *k, int i, ptdp_gpt_block_acts *a, ptdp_tensor d, ptdp_gpt_scratch *s);
/* What a->moe holds, back to the arena. */
void ptdp_gpt_moe_free(ptdp_device *dev, ptdp_gpt_block_acts *a);
/* Its balance loss alpha sum_i f_i P_i summed over the micro-batch's
 * sequences (0 for a dense block). */
double ptdp_gpt_moe_aux(const ptdp_gpt_block_acts *a);

/* ------------------------------------------------ gpt_block.c */

int ptdp_gpt_block_forward(ptdp_gpt_pass *k, int i, ptdp_gpt_block_acts *a, ptdp_tensor *out);
int ptdp_gpt_block_backward(ptdp_gpt_pass *k, int i, ptdp_gpt_block_acts *a, ptdp_tensor dh, ptdp_gpt_scratch *s);

#endif
