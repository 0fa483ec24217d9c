/*
 * models/llama_pass.h — private to the llama's files: its parameters on
 * one stage and shard, what a micro-batch keeps, and one pass (a forward
 * or a backward of one micro-batch) with the ops its block calls.
 *
 *   llama_model.c   shapes, checks, names, the parameters laid out, the table
 *   llama.c         a stage: the embedding, the blocks, the final norm, the
 *                   head and the loss; what a micro-batch keeps
 *   llama_block.c   one block, forward beside backward, a list of op calls:
 *
 *     n1 ─ wq ┐                          ┌ (GQA: query head h reads kv head h/(H/K))
 *          wk ├─ qkv ─ rope(q, k) ─ attn ─ y ─ wo ─┐
 *          wv ┘                                    + x ─► h
 *     n2 ─ w1 ─ a ┐
 *          w3 ─ b ┴─ silu(a) b ─ g ─ w2 ──────────┐
 *                                                 + h ─► out
 *
 * Every GEMM goes through the parallel-linear op (parallel_linear.h): it
 * owns TP's split and joins, the bf16 recipe, the clock and W's sink.
 * Errors stick: the first failing op stores its status in the pass and
 * every later op does nothing, so a block ends with `return k->rc`.
 */
#ifndef PTDP_MODELS_LLAMA_PASS_H
#define PTDP_MODELS_LLAMA_PASS_H

#include <stdbool.h>
#include <stdint.h>

#include "parallel/moe_impl.h"
#include "ptdp/llama.h"
#include "ptdp/parallel_linear.h"
#include "ptdp/wgrad.h"

/* One expert of an MoE block: a SwiGLU feed-forward (TP shards). */
typedef struct {
    ptdp_param *w1, *w3, *w2;
} ptdp_llama_expert;

/* One block's parameters on this device (TP shards).  An MoE block has no
 * w1, w3, w2 of its own but a gate (the router) and its experts. */
typedef struct {
    ptdp_param *attention_norm, *wq, *wk, *wv, *wo;
    ptdp_param *ffn_norm, *w1, *w3, *w2;
    ptdp_param *gate;               /* MoE: [E, C]; NULL when dense         */
    ptdp_param *expert_bias;        /* MoE under sigmoid: b [E]; else NULL  */
    double *choices;                /* --moe-bias-update: the step's choices
                                       per expert [E] (host); else NULL     */
    ptdp_llama_expert *experts;     /* MoE: this EP rank's (host); NULL when
                                       dense                                */
    ptdp_llama_expert shared;       /* MoE, --moe-shared-experts S: one SwiGLU
                                       of S F_e every token takes; its
                                       params NULL without                 */
} ptdp_llama_block;

/* What the llama keeps beside the interface's fields (model->impl). */
typedef struct {
    ptdp_param *tok_embeddings;     /* stage 0                               */
    ptdp_param *norm, *output;      /* last stage                            */
    ptdp_llama_block *blocks;       /* [layer_end - layer_begin]             */
    int heads_local, kv_local;      /* H / tp; K / tp, or 1 (a copy) if tp > K */
    int hd, ffn_local, vocab_local; /* d, F / tp, V / tp                     */
    int64_t *positions;             /* [T/cp]: a row's global position (CP's
                                       chunks: cp.h's layout; else 0..T-1)  */
    const unsigned char *corpus;    /* the data (first and last stage)       */
    size_t corpus_len;
    void *corpus_block;
} ptdp_llama;

/* What one block of one micro-batch keeps (R = B T rows). */
typedef struct {
    ptdp_tensor x;                  /* the block's input                     */
    ptdp_real *rstd1, *rstd2;       /* RMSNorm's 1/rms a row                  */
    ptdp_tensor n1;                 /* attention_norm's output               */
    ptdp_tensor qkv;                /* R x (Hl + 2 Kl) d: q, k rotated, v
                                       (Ulysses: kept in the head layout)   */
    ptdp_real *probs;               /* B Hl T T (none: selective recompute);
                                       CP: the ring's log-sum-exps, B Hl T/cp;
                                       Ulysses: B Hl/cp Tg Tg               */
    ptdp_tensor y;                  /* the heads' outputs: wo's input        */
    ptdp_tensor h;                  /* after the attention's residual        */
    ptdp_tensor n2;                 /* ffn_norm's output                     */
    ptdp_tensor a, b;               /* w1 n2 and w3 n2 (R x F/tp each)       */
    ptdp_tensor g;                  /* silu(a) b: w2's input                 */
    ptdp_moe_acts *moe;             /* an MoE block's routing and experts'
                                       rows instead of a, b and g           */
} ptdp_llama_block_acts;

typedef struct {
    ptdp_tensor input;              /* other stages: the received x          */
    int64_t *tokens;                /* stage 0                               */
    int64_t *labels;                /* CP: this rank's positions' labels     */
    int nblocks;
    ptdp_llama_block_acts *blocks;
    ptdp_tensor x_out;              /* the last block's output               */
    ptdp_real *rstdf;               /* last stage: the final norm's          */
    ptdp_tensor nf;                 /* the head's input                      */
    ptdp_tensor logits;             /* R x V/tp                              */
    double *rowmax, *sumexp;        /* softmax statistics per token          */
    double aux_sum;                 /* this stage's MoE blocks' balance loss,
                                       summed over the micro-batch's sequences */
    ptdp_moe_tally *moe_tally;      /* ... and their loads, drops and losses
                                       block by block (moe_stats.c; host)   */
} ptdp_llama_saved;

/* One forward or backward of one micro-batch on one device. */
typedef struct {
    ptdp_device *dev;
    ptdp_model *m;
    const ptdp_acts *acts;
    int R, T;                       /* rows (B T) and positions: T/cp of a
                                       sequence's Tg under CP                */
    int Tg;                         /* a whole sequence's positions          */
    int Rl;                         /* the residual stream's and the norms'
                                       rows: R, or under SP this rank's R/tp
                                       positions (sp.h)                     */
    ptdp_tensor part;               /* SP: a row-parallel layer's R rows of
                                       partial sums (the caller's scratch)  */
    ptdp_wgrad *wg;                 /* backward: W's sink, or NULL: dW now   */
    char what[32], wwhat[32];       /* the clock's names                     */
    double w0;                      /* wall clock the current piece began    */
    double pending;                 /* flops of the elementwise work since
                                       the last charge (added to the next)   */
    double loss_scale;              /* backward: the loss's scale, 1 / (global
                                       batch x T), for an MoE block's balance
                                       loss (llama_moe.c)                   */
    int rc;
} ptdp_llama_pass;

/* The backward's scratch: R rows each, but dn (Rl: the norm's rows). */
typedef struct {
    ptdp_tensor dn;                 /* the gradient into a norm's output (C) */
    ptdp_tensor dfull;              /* SP: dh gathered along the sequence, the
                                       row-parallel layers' dy (R x C)      */
    ptdp_tensor xfull, dxfull;      /* SP: a column-parallel layer's input
                                       gathered again for dW, and its dx
                                       before the reduce-scatter (R x C)    */
    ptdp_tensor dlocal;             /* SP: that dx scattered (Rl x C)        */
    ptdp_tensor dy;                 /* into the heads' outputs (Hl d)        */
    ptdp_tensor dqkv;               /* into q, k, v ((Hl + 2 Kl) d)          */
    ptdp_tensor dg, da, db;         /* into g, a, b (F / tp)                 */
    ptdp_real *att;                 /* 2 T T: the attention backward's       */
} ptdp_llama_scratch;

static inline ptdp_llama *ptdp_llama_of(ptdp_model *m)
{
    return m->impl;
}

/* ------------------------------------------------ llama_block.c */

void ptdp_llama_pass_begin(ptdp_llama_pass *k, ptdp_device *dev, ptdp_model *m, const ptdp_acts *acts,
                           ptdp_wgrad *wg);
void ptdp_llama_pass_name(ptdp_llama_pass *k, const char *what, const char *wwhat);
int ptdp_llama_act(ptdp_llama_pass *k, ptdp_tensor *t, const char *name, int rows, int cols);
ptdp_real *ptdp_llama_reals(ptdp_llama_pass *k, size_t n, const char *name);
void ptdp_llama_round(ptdp_llama_pass *k, ptdp_tensor t);
/* RMSNorm of x into y (the model's eps), rstd kept; its backward. */
void ptdp_llama_norm(ptdp_llama_pass *k, ptdp_tensor y, ptdp_real *rstd, ptdp_tensor x, const ptdp_param *w);
void ptdp_llama_norm_backward(ptdp_llama_pass *k, ptdp_tensor dx, ptdp_tensor dy, ptdp_tensor x,
                              const ptdp_param *w, const ptdp_real *rstd, bool accumulate_dx);
/* Through the parallel-linear op, priced by the GEMM's flops (and the
 * elementwise work pending): y = x W^T. */
void ptdp_llama_linear(ptdp_llama_pass *k, ptdp_linear_split split, ptdp_tensor y, ptdp_tensor x,
                       const ptdp_param *w);
void ptdp_llama_linear_backward(ptdp_llama_pass *k, ptdp_linear_split split, ptdp_tensor *dx, ptdp_tensor dy,
                                ptdp_tensor x, const ptdp_param *w, bool accumulate_dx);
/* n column-parallel layers that read one input x (Rl rows: the norm's),
 * each with its dy: dn (Rl rows) = the sum of their input gradients over
 * TP — one f for all (their products, then one all-reduce), or under SP
 * each layer's reduce-scatter into s->dlocal, added up. */
void ptdp_llama_columns_backward(ptdp_llama_pass *k, ptdp_llama_scratch *s, const ptdp_param *const *w,
                                 const ptdp_tensor *dy, int n, ptdp_tensor x);
/* SP: the gradient dh (Rl rows) as a row-parallel layer's backward needs
 * it, all R rows (gathered into s->dfull); itself without SP. */
ptdp_tensor ptdp_llama_grad_into_tp(ptdp_llama_pass *k, ptdp_llama_scratch *s, ptdp_tensor dh);
/* Everything since the last charge, on the clock. */
void ptdp_llama_charge(ptdp_llama_pass *k);

int ptdp_llama_block_forward(ptdp_llama_pass *k, int i, ptdp_llama_block_acts *a, ptdp_tensor *out);
int ptdp_llama_block_backward(ptdp_llama_pass *k, int i, ptdp_llama_block_acts *a, ptdp_tensor dh,
                              ptdp_llama_scratch *s);
/* Everything block a made but its input x. */
void ptdp_llama_block_free_work(ptdp_device *dev, ptdp_llama_block_acts *a);

/* ------------------------------------------------ llama_moe.c */

/* Block i's mixture of experts (parallel/moe.c with SwiGLU experts),
 * through the block's linear pass: out (R x C) = sum over the token's kept
 * choices of gate x expert(n2); keeps its routing and the experts' rows in
 * a->moe, counts the route in the micro-batch's tally. */
void ptdp_llama_moe_forward(ptdp_llama_pass *k, ptdp_linear_pass linear, int i, ptdp_llama_block_acts *a,
                            ptdp_tensor out);
/* From d, the gradient of out: the experts' and the gate's gradients (with
 * the balance loss's) and s->dn, the gradient into n2. */
void ptdp_llama_moe_backward(ptdp_llama_pass *k, ptdp_linear_pass linear, int i, ptdp_llama_block_acts *a,
                             ptdp_tensor d, ptdp_llama_scratch *s);
/* Block l's experts and gate: their whole tensors (Meta's list order), and
 * this device's shards of them (backward order: the experts last first,
 * then the gate). */
int  ptdp_llama_moe_list_params(const ptdp_model_config *c, int l, ptdp_param_info *out);
int  ptdp_llama_moe_lay_out(ptdp_device *dev, ptdp_model *m, ptdp_llama_block *b, int l);
/* The table's publish and count: the mixture's counters (moe.h). */
int  ptdp_llama_moe_publish(const ptdp_model_config *c, ptdp_counters *reg);
void ptdp_llama_moe_count(const ptdp_model *m, const ptdp_acts *acts, ptdp_counts *counts);
/* After each optimizer step: --moe-bias-update's step of the stage's
 * expert biases (moe_bias.c). */
int  ptdp_llama_moe_after_step(ptdp_device *dev, ptdp_model *m);

/* ------------------------------------------------ llama.c */

int  ptdp_llama_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_batch *b,
                        ptdp_tensor input, long step, bool recompute, ptdp_tensor *out);
int  ptdp_llama_backward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                         double loss_scale, ptdp_tensor *dx);
int  ptdp_llama_backward_input(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                               double loss_scale, ptdp_tensor *dx, ptdp_wgrad *w);
void ptdp_llama_acts_free(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts);

#endif
