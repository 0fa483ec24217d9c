/*
 * gpt_cost.h — what each piece of the GPT's work charges the virtual clock,
 * in flops at the device's peak: one function per charge the GPT makes (a
 * block's in gpt_block.c through its ops, gpt_ops.c; the embedding's and
 * the head's in gpt.c), so the model that runs and the planner that
 * predicts it (through gpt_plan.c) price the same work with the same arithmetic.
 *
 * Every matrix product goes through the profile's GEMM curve (clock.h):
 *
 *     a product (m x k) by (k x n)   ptdp_gemm_cost_flops(p, m, n, k)
 *                                    = 2 m n k / efficiency(m, n, k)
 *     elementwise work               its flop count, at the peak
 *
 * and under --fp8 (s->fp8) a linear layer's products, but the head's, at
 * the FP8 peak plus their operands' quantization (clock.h):
 *
 *     forward  Y = Q(X) Q(W)^T      ptdp_fp8_gemm_cost_flops(.., R in + out in)
 *     dX = Q(dY) Q(W)               quantizes dY and W:  R out + out in
 *     dW = Q(dY)^T Q(X)             quantizes X (dY's codes are dX's): R in
 *
 * and attention's two (forward) or four (backward) products per sequence
 * and head are batched GEMMs of their own shape: T x T by hd (Q K^T), T x T
 * by T x hd (P V), or under CP one (chunk x chunk) block per pair the ring
 * computes.  Without a curve every product costs exactly 2 m n k, and all
 * counts are integers below 2^53: regrouping the sums changes no bit.
 *
 *   one block, forward                    one block, backward
 *   ┌ attn_forward ───────────┐ g         ┌ mlp_backward ─────────┐ f
 *   │ LN1, x W_qkv, core, W_o │──►        │ c_proj, GELU, c_fc    │──►
 *   └─────────────────────────┘           └───────────────────────┘
 *   ┌ mlp_forward ────────────┐ g         ┌ attn_backward ────────┐ f
 *   │ +res, LN2, c_fc, GELU,  │──►        │ LN2, c_proj, core,    │──►
 *   │ c_proj                  │           │ c_attn (+ selective)  │
 *   └─────────────────────────┘           └───────────────────────┘
 *   ┌ block_out_forward ──────┐           ┌ ln1_backward ─────────┐
 *   │ bias, dropout, residual │           │ LN1, the residual     │
 *   └─────────────────────────┘           └───────────────────────┘
 *
 * With a split backward (zero-bubble schedules) the four dW products of a
 * block (an MoE block's: its attention's two, the router's and each
 * expert's two), the head's and the embedding's scatter-add are charged by
 * W (the dw_* functions; the experts' by their rows, gpt_moe.c) and left out of B.  Under the "ideal" profile the
 * embedding and the head cost nothing (clock.c).
 */
#ifndef PTDP_GPT_COST_H
#define PTDP_GPT_COST_H

#include <stdbool.h>

#include "ptdp/clock.h"
#include "ptdp/model.h"

/* The shapes of one micro-batch on one device. */
typedef struct {
    int rows;          /* sequences in the micro-batch                     */
    int R;             /* token rows: rows x the positions computed here   */
    int Rl;            /* region rows: R, or R / tp under SP               */
    int C;             /* hidden                                          */
    int Cl;            /* this rank's attention width: heads_local x hd    */
    int Fl;            /* this rank's MLP width                            */
    int Vl;            /* this rank's vocabulary rows                      */
    int heads;         /* this rank's heads                                */
    int hd;            /* head size                                        */
    int T;             /* seq_len                                          */
    int cp, cp_rank;   /* context parallelism (1, 0 without)               */
    bool cp_zigzag;
    bool cp_a2a;       /* CP's attention as Ulysses' (ulysses.h): whole
                          sequences of heads / cp heads, not the ring     */
    int t0, tlen;      /* a token slice (tlen 0: whole sequences)          */
    bool selective;    /* the attention core runs again in the backward    */
    bool tiled;        /* --attention tiled, whole sequences or a slice:
                          the tiles' scores (attention_tiled.c), S made
                          again in the backward, nothing run again      */
    bool split;        /* B and W apart: the weight products wait for W    */
    bool fp8;          /* --fp8: the linear layers' products from FP8
                          operands, at the FP8 peak with their operands'
                          quantization (clock.h; the head keeps float)     */
    bool bf16;         /* the device computes in bf16: the peak the
                          charges are flops at (ptdp_profile_peak)         */
} ptdp_gpt_shape;

/* The shape of a micro-batch of `rows` sequences of model c on a device of
 * a tp x cp group (sp: sequence parallelism; cp_rank: its place in the CP
 * ring), whole sequences. */
ptdp_gpt_shape ptdp_gpt_shape_make(const ptdp_model_config *c, int rows, int tp, bool sp, int cp, int cp_rank,
                                   bool cp_zigzag);

/* Attention's core for one micro-batch: the batched GEMMs and the softmax. */
double ptdp_gpt_cost_attention_core(const ptdp_profile *p, const ptdp_gpt_shape *s, bool backward);

/* A block's forward, in its three charges. */
double ptdp_gpt_cost_attn_forward(const ptdp_profile *p, const ptdp_gpt_shape *s);
double ptdp_gpt_cost_mlp_forward(const ptdp_profile *p, const ptdp_gpt_shape *s);
double ptdp_gpt_cost_block_out_forward(const ptdp_profile *p, const ptdp_gpt_shape *s);
/* An MoE block's LN2, residual share and router (its experts are charged
 * by their rows, gpt_moe.c); and their backward (without the router's dW
 * when s->split), and that dW as W charges it. */
double ptdp_gpt_cost_moe_forward(const ptdp_profile *p, const ptdp_gpt_shape *s, int E);
double ptdp_gpt_cost_moe_backward(const ptdp_profile *p, const ptdp_gpt_shape *s, int E);
double ptdp_gpt_cost_dw_router(const ptdp_profile *p, const ptdp_gpt_shape *s, int E);
/* A mixture's expert (the GPT's MLP, F of its width on this rank) on n
 * routed rows, its products through the GEMM curve as the dense layers'
 * (an n-row product: few rows, a thin product), as gpt_moe.c charges it
 * (n may be fractional: the planner's rows an expert): forward;
 * backward (without the dW products when `later`: W's); each dW as W
 * charges it.  Under --fp8 each product at the FP8 peak with its
 * operands' quantization, as the dense layers' (above); `weights`: with
 * the quantization of the expert's two weights (once an expert that runs;
 * false: only what grows with the rows, the planner's price of a row). */
double ptdp_gpt_cost_expert_forward(const ptdp_profile *p, const ptdp_gpt_shape *s, double n, int F, bool weights);
double ptdp_gpt_cost_expert_backward(const ptdp_profile *p, const ptdp_gpt_shape *s, double n, int F, bool later,
                                     bool weights);
double ptdp_gpt_cost_expert_dw_fc(const ptdp_profile *p, const ptdp_gpt_shape *s, double n, int F);
double ptdp_gpt_cost_expert_dw_proj(const ptdp_profile *p, const ptdp_gpt_shape *s, double n, int F);
/* A block's backward, in its three charges (without the dW products when
 * s->split; with the attention core again when s->selective). */
double ptdp_gpt_cost_mlp_backward(const ptdp_profile *p, const ptdp_gpt_shape *s);
double ptdp_gpt_cost_attn_backward(const ptdp_profile *p, const ptdp_gpt_shape *s);
double ptdp_gpt_cost_ln1_backward(const ptdp_profile *p, const ptdp_gpt_shape *s);
/* A block's whole forward and backward: the sums of the above. */
double ptdp_gpt_cost_block_forward(const ptdp_profile *p, const ptdp_gpt_shape *s);
double ptdp_gpt_cost_block_backward(const ptdp_profile *p, const ptdp_gpt_shape *s);

/* Sequence parallelism keeps only its shard of the LayerNorm outputs, and
 * a column-parallel layer's backward all-gathers it again for its dW
 * (parallel_linear.c, through gpt_ops.c): the layer's piece of work is then charged in three parts
 * around that gather —
 *
 *   before  the piece's work up to the layer's dX   (the gather starts
 *                                                     here: --overlap)
 *   dx      dX = dY W and db  (needs no input)       the gather runs under
 *                                                     it on the comm stream
 *   dw      dW = dY^T X  (0 when split: W's)         waits for the gather
 *
 * their sum the piece's whole price (mlp_backward, attn_backward); without
 * SP the piece is charged whole, as before.  The gather moves the R x C
 * gathered input: ptdp_gpt_sp_gather_bytes, (tp-1)/tp of it sent by each
 * rank, twice a block (c_fc's and c_attn's) and once for the head. */
typedef struct {
    double (*whole)(const ptdp_profile *p, const ptdp_gpt_shape *s);
    double (*before)(const ptdp_profile *p, const ptdp_gpt_shape *s);
    double (*dx)(const ptdp_profile *p, const ptdp_gpt_shape *s);
    double (*dw)(const ptdp_profile *p, const ptdp_gpt_shape *s);
    double (*w)(const ptdp_profile *p, const ptdp_gpt_shape *s);   /* dW's price in W, split */
} ptdp_gpt_column_backward_cost;
extern const ptdp_gpt_column_backward_cost ptdp_gpt_cost_fc_backward;     /* the MLP's c_fc   */
extern const ptdp_gpt_column_backward_cost ptdp_gpt_cost_qkv_backward;    /* c_attn            */
extern const ptdp_gpt_column_backward_cost ptdp_gpt_cost_head_column;     /* the head (LN_f's) */
double ptdp_gpt_cost_mlp_backward_before_fc(const ptdp_profile *p, const ptdp_gpt_shape *s);
double ptdp_gpt_cost_dx_fc(const ptdp_profile *p, const ptdp_gpt_shape *s);
double ptdp_gpt_cost_sp_dw_fc(const ptdp_profile *p, const ptdp_gpt_shape *s);
double ptdp_gpt_cost_attn_backward_before_qkv(const ptdp_profile *p, const ptdp_gpt_shape *s);
double ptdp_gpt_cost_dx_qkv(const ptdp_profile *p, const ptdp_gpt_shape *s);
double ptdp_gpt_cost_sp_dw_qkv(const ptdp_profile *p, const ptdp_gpt_shape *s);
double ptdp_gpt_cost_head_backward_before(const ptdp_profile *p, const ptdp_gpt_shape *s);
double ptdp_gpt_cost_dx_head(const ptdp_profile *p, const ptdp_gpt_shape *s);
double ptdp_gpt_cost_sp_dw_head(const ptdp_profile *p, const ptdp_gpt_shape *s);
/* The bytes S of one of SP's backward all-gathers (the collective's whole
 * buffer, clock.h): R x C reals. */
double ptdp_gpt_sp_gather_bytes(const ptdp_gpt_shape *s);

/* The four dW products of a block, as W charges them (each also part of
 * the backward when not split): dW_linear for a weight of out x in on
 * this device, then each of the four by name. */
double ptdp_gpt_cost_dw_linear(const ptdp_profile *p, const ptdp_gpt_shape *s, int out, int in);
double ptdp_gpt_cost_dw_attn(const ptdp_profile *p, const ptdp_gpt_shape *s);      /* c_attn          */
double ptdp_gpt_cost_dw_attn_proj(const ptdp_profile *p, const ptdp_gpt_shape *s); /* attention c_proj */
double ptdp_gpt_cost_dw_fc(const ptdp_profile *p, const ptdp_gpt_shape *s);        /* c_fc            */
double ptdp_gpt_cost_dw_fc_proj(const ptdp_profile *p, const ptdp_gpt_shape *s);   /* MLP c_proj      */
double ptdp_gpt_cost_block_w(const ptdp_profile *p, const ptdp_gpt_shape *s);      /* all four        */

/* The first stage: the embedding (lookups and positions), and its
 * backward (the scatter-add into wte's rows, unless split, and wpe's). */
double ptdp_gpt_cost_embed_forward(const ptdp_profile *p, const ptdp_gpt_shape *s);
double ptdp_gpt_cost_embed_backward(const ptdp_profile *p, const ptdp_gpt_shape *s);
double ptdp_gpt_cost_dw_embed(const ptdp_profile *p, const ptdp_gpt_shape *s);

/* The last stage: LN_f and the head's product; the loss's backward, the
 * head's products (dW unless split), then LN_f's backward. */
double ptdp_gpt_cost_head_forward(const ptdp_profile *p, const ptdp_gpt_shape *s);
double ptdp_gpt_cost_head_backward(const ptdp_profile *p, const ptdp_gpt_shape *s);
double ptdp_gpt_cost_lnf_backward(const ptdp_profile *p, const ptdp_gpt_shape *s);
double ptdp_gpt_cost_dw_head(const ptdp_profile *p, const ptdp_gpt_shape *s);

#endif
