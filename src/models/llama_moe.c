/*
 * llama_moe.c — the llama's mixture of experts: its own SwiGLU feed-forward
 * as the expert, plugged into the mixture every model shares
 * (parallel/moe.c: the router, the capacity, the balance loss, the
 * dispatch and combine, EP's all-to-alls), under the names of Mistral's
 * reference MoeLayer (Mixtral: `feed_forward.experts.e.w1/w2/w3`, the
 * router `feed_forward.gate`).
 *
 *   expert_e(x) = w2_e (silu(w1_e x) ⊙ w3_e x)        no biases, as the dense FFN
 *   out         = sum_j g_j expert_{e_j}(n2)           g: softmax of the top-k z = n2 gateᵀ
 *
 *   stacked rows of    x ──► w1 (COLUMN, one group) ──► a ┐
 *   the local experts    ──► w3 (COLUMN, one group) ──► b ┴─► silu(a) ⊙ b = g
 *                                          ──► w2 (ROW, one group: one all-reduce) ──► y
 *   each kept row keeps a, b and g (F_e/tp each), as the dense block keeps them a token
 *
 *   parameter (Mixtral's name)                     whole      TP split   EP      decay
 *   layers.i.feed_forward.experts.e.w1.weight      [F_e, C]   rows       E/ep    yes
 *   layers.i.feed_forward.experts.e.w2.weight      [C, F_e]   columns    a rank  yes
 *   layers.i.feed_forward.experts.e.w3.weight      [F_e, C]   rows (w1's)        yes
 *   layers.i.feed_forward.gate.weight              [E, C]     replicated         yes
 *   layers.i.feed_forward.gate.expert_bias         [E]        replicated         no
 *     (--moe-score sigmoid alone: DeepSeek-V3's selection bias, moe.h)
 *
 * Under TP each expert is split like the dense FFN (llama_block.c): w1 and
 * w3 by the same rows of F_e (silu(a) ⊙ b pairs element j of a with element
 * j of b), w2 by columns — so the group's partial sums are all-reduced
 * once in the forward (g), and w1's and w3's input gradients, added
 * first, once in the backward (one f for both, as the dense block's).  The
 * gate is whole on every TP rank and runs in storage precision (float
 * under bf16: Megatron's fp32 router).  Under --ep an expert lives on one
 * EP rank and its gradient is summed over the expert-DP group (model.h).
 * Initialised as the dense FFN: w1, w3 and the gate N(0, 0.02²), w2
 * N(0, (0.02 / sqrt(2 L))²).
 *
 * The clock: the gate's GEMM with the norm's pending flops; each expert's
 * three GEMMs (2 n C F_e each, on its n rows through the GEMM curve as the
 * dense layers' products; under --fp8 at the FP8 peak with their
 * operands' quantization) and its gate, by its rows; the combine's
 * 2 k C a token after it (the block's last charge).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "models/llama_pass.h"
#include "ptdp/act_bf16.h"
#include "ptdp/error.h"
#include "ptdp/mesh.h"
#include "ptdp/ops.h"

#define INIT_STD 0.02

/* ------------------------------------------------ the SwiGLU expert */

/* An expert's product of (m x k) by (k x n) on its own rows, through the
 * GEMM curve as the dense layers' (clock.h: a few rows make a thin product
 * that fills part of the GPU's tiles); under --fp8 at the FP8 peak with
 * the quantization of the `quantized` elements of its operands. */
static double expert_product(const ptdp_moe_local *f, double m, double n, double k, double quantized)
{
    const ptdp_device *dev = ((const ptdp_llama_pass *)f->model)->dev;
    return dev->fp8 ? ptdp_fp8_gemm_cost_flops(dev->profile, dev->bf16, m, n, k, quantized)
                    : ptdp_gemm_cost_flops(dev->profile, m, n, k);
}

/* Member e of a group: local expert e's w1, w3 (column-parallel) or w2
 * (row-parallel).  A dW W runs later is priced as its GEMM, dW = dYᵀ X:
 * F_e x C over the n rows for w1 and w3 (under --fp8 X quantized: n C),
 * C x F_e for w2 (n F_e). */
static ptdp_linear_layer member(const ptdp_moe_local *f, int e, int which, ptdp_linear_split split)
{
    const ptdp_llama_expert *x = &((const ptdp_llama_expert *)f->experts)[e];
    const ptdp_param *w[] = { x->w1, x->w3, x->w2 };
    const double n = f->rows[e], in = which == 2 ? f->F : f->C, out = which == 2 ? f->C : f->F;
    return (ptdp_linear_layer){ .split = split, .w = w[which], .accumulate_dx = which == 1,
                                .w_flops = expert_product(f, out, in, n, n * in) };
}

static ptdp_linear_layer expert_w1(const void *of, int e)
{
    return member(of, e, 0, PTDP_SPLIT_COLUMN);
}

static ptdp_linear_layer expert_w3(const void *of, int e)   /* backward: dx += db w3 */
{
    return member(of, e, 1, PTDP_SPLIT_COLUMN);
}

static ptdp_linear_layer expert_w2(const void *of, int e)
{
    return member(of, e, 2, PTDP_SPLIT_ROW);
}

/* The experts' flops by their rows: three GEMMs of 2 n C F_e (each twice
 * in the backward, dX and dW, unless W runs dW) and the gate's.  Each
 * product quantizes under --fp8 what the dense layers' do (llama_block.c):
 * forward X and W (w1, w3: n x C by C x F_e, n C + F_e C; w2: n x F_e by
 * F_e x C, n F_e + C F_e), dX dY and W (w2: n x C by C x F_e, n C + C F_e;
 * w1, w3: n x F_e by F_e x C, n F_e + F_e C), dW X (member above). */
static double experts_flops(const ptdp_moe_local *f, bool backward, bool later)
{
    double flops = 0;
    for (int e = 0; e < f->local; e++) {
        if (f->rows[e] == 0)
            continue;
        const double rows = f->rows[e], F = f->F, C = f->C, n = rows * F, x = rows * C, W = F * C;
        const double in_c = expert_product(f, rows, F, C, x + W), in_f = expert_product(f, rows, C, F, n + W);
        if (!backward)
            flops += 2 * in_c + in_f + ptdp_swiglu_flops_forward((size_t)n);
        else
            flops += in_c + 2 * in_f +
                     (later ? 0 : expert_product(f, C, F, rows, n) + 2 * expert_product(f, F, C, rows, x)) +
                     ptdp_swiglu_flops_backward((size_t)n);
    }
    return flops;
}

/* a = x w1ᵀ, b = x w3ᵀ (each rounded under bf16 by the op), g = silu(a) ⊙ b
 * (rounded here), y = g w2ᵀ summed over TP where the experts ran. */
static int swiglu_forward(const ptdp_moe_local *f, ptdp_tensor x, ptdp_tensor y)
{
    ptdp_llama_pass *k = f->model;
    const ptdp_linear_group w1 = { PTDP_SPLIT_COLUMN, f->local, f->rows, expert_w1, f };
    const ptdp_linear_group w3 = { PTDP_SPLIT_COLUMN, f->local, f->rows, expert_w3, f };
    const ptdp_linear_group w2 = { PTDP_SPLIT_ROW, f->local, f->rows, expert_w2, f };
    const ptdp_tensor a = f->keep[0], b = f->keep[1], g = f->keep[2];
    const ptdp_linear_charge price = { .flops = experts_flops(f, false, false) };
    ptdp_linear_pass c = *f->linear;
    if ((k->rc = ptdp_parallel_linear_group_forward(&c, &w1, a, x, NULL)) != 0 ||
        (k->rc = ptdp_parallel_linear_group_forward(&c, &w3, b, x, NULL)) != 0)
        return k->rc;
    ptdp_swiglu_forward(g, a, b);
    if (k->m->bf16)   /* as the dense block's g (act_bf16.h) */
        ptdp_act_round(g);
    return k->rc = ptdp_parallel_linear_group_forward(&c, &w2, y, g, &price);
}

/* dg = dy w2 (and dW2), da and db through the gate, then dx = da w1 + db w3
 * (and dW1, dW3): w1's products alone (NONE: no sum yet), w3's added to
 * them and the sum all-reduced over TP once (f). */
static int swiglu_backward(const ptdp_moe_local *f, ptdp_tensor x, ptdp_tensor dy, ptdp_tensor dx)
{
    ptdp_llama_pass *k = f->model;
    const ptdp_linear_group w1 = { PTDP_SPLIT_NONE, f->local, f->rows, expert_w1, f };
    const ptdp_linear_group w3 = { PTDP_SPLIT_COLUMN, f->local, f->rows, expert_w3, f };
    const ptdp_linear_group w2 = { PTDP_SPLIT_ROW, f->local, f->rows, expert_w2, f };
    ptdp_tensor dg = f->scratch[0], da = f->scratch[1], db = f->scratch[2];
    ptdp_linear_pass c = *f->linear;
    const ptdp_linear_charge price = { .flops = experts_flops(f, true, ptdp_linear_pass_defers(&c)) };
    if ((k->rc = ptdp_parallel_linear_group_backward(&c, &w2, &dg, dy, f->keep[2], NULL)) != 0)
        return k->rc;
    ptdp_swiglu_backward(da, db, dg, f->keep[0], f->keep[1]);
    if ((k->rc = ptdp_parallel_linear_group_backward(&c, &w1, &dx, da, x, NULL)) != 0)
        return k->rc;
    return k->rc = ptdp_parallel_linear_group_backward(&c, &w3, &dx, db, x, &price);
}

static const ptdp_moe_expert_kind swiglu = {
    .nkeep = 3, .keep = { "acts.moe_w1", "acts.moe_w3", "acts.moe_swiglu" },
    .nscratch = 3, .scratch = { "grad.moe_swiglu", "grad.moe_w1", "grad.moe_w3" },
    .forward = swiglu_forward, .backward = swiglu_backward,
};

/* ------------------------------------------------ the block's mixture */

/* The mixture's pass for block i: the block's linear pass, a rank's
 * positions (CP: T/cp of the sequence's T), each expert's F_e/tp, the
 * micro-batch's tally. */
static ptdp_moe_pass mixture(ptdp_llama_pass *k, ptdp_linear_pass linear, int i)
{
    const ptdp_llama *l = ptdp_llama_of(k->m);
    const ptdp_moe_settings *s = &ptdp_llama(&k->m->cfg)->moe;
    ptdp_llama_saved *sv = k->acts != NULL ? k->acts->saved : NULL;
    return (ptdp_moe_pass){
        .dev = k->dev, .mesh = k->m->mesh, .linear = linear, .settings = s, .T = k->T,
        .T_seq = k->Tg, .F = ptdp_moe_ffn(s, k->m->cfg.ffn) / ptdp_moe_expert_tp_size(k->m->mesh), .router = l->blocks[i].gate,
        .bias = l->blocks[i].expert_bias, .choices = l->blocks[i].choices, .kind = &swiglu, .model = k,
        .experts = l->blocks[i].experts,
        .shared = l->blocks[i].shared.w1 != NULL ? &l->blocks[i].shared : NULL,   /* --moe-shared-experts */
        .F_shared = s->shared * ptdp_moe_ffn(s, k->m->cfg.ffn) / k->m->mesh->tp,
        .tally = sv != NULL ? &sv->moe_tally : NULL, .block = i, .nblocks = sv != NULL ? sv->nblocks : 0,
        .rc = k->rc,
    };
}

/* z = n2 gateᵀ charged with the norm's pending flops; the combine's
 * 2 k C a token pending for the block's last charge. */
void ptdp_llama_moe_forward(ptdp_llama_pass *k, ptdp_linear_pass linear, int i, ptdp_llama_block_acts *a,
                            ptdp_tensor out)
{
    const ptdp_moe_settings *s = &ptdp_llama(&k->m->cfg)->moe;
    if (k->rc != 0)
        return;
    ptdp_moe_pass p = mixture(k, linear, i);
    const double R = (double)k->R / ptdp_moe_fold_slices(k->m->mesh);   /* the rows it routes (moe_fold.c) */
    p.router_flops = k->pending + ptdp_matmul_flops((size_t)R, s->experts, out.cols);
    k->pending = 0;
    k->rc = ptdp_moe_forward(&p, &a->moe, a->n2, out);
    k->pending += 2.0 * R * s->top_k * out.cols;
}

/* The gate's dX (and dW unless W runs it) with the combine's backward
 * (dy and dgate, 4 k C a token) and the dispatch's scatter-add (k C). */
void ptdp_llama_moe_backward(ptdp_llama_pass *k, ptdp_linear_pass linear, int i, ptdp_llama_block_acts *a,
                             ptdp_tensor d, ptdp_llama_scratch *s)
{
    const ptdp_moe_settings *ms = &ptdp_llama(&k->m->cfg)->moe;
    const double R = (double)k->R / ptdp_moe_fold_slices(k->m->mesh);   /* the rows it routes (moe_fold.c) */
    const double gemm = ptdp_matmul_flops((size_t)R, ms->experts, d.cols);
    if (k->rc != 0 || a->moe == NULL)
        return;
    ptdp_moe_pass p = mixture(k, linear, i);
    /* the loss's scale is 1 / (global batch x T) a position: the balance
     * loss is a mean over sequences, T times that */
    p.per_sequence = k->loss_scale * k->m->label_cols;
    p.router_flops = k->pending + 5.0 * R * ms->top_k * d.cols + gemm + (k->wg == NULL ? gemm : 0);
    p.router_w_flops = gemm;
    k->pending = 0;
    k->rc = ptdp_moe_backward(&p, a->moe, a->n2, d, s->dn);
}

/* ---------------------------------------------- parameters and counters */

int ptdp_llama_moe_list_params(const ptdp_model_config *c, int l, ptdp_param_info *out)
{
    const ptdp_moe_settings *s = &ptdp_llama(c)->moe;
    const int C = c->hidden, F = ptdp_moe_ffn(s, c->ffn), E = s->experts;
    int n = 0;
#define ADD(r, cc, ...) do { if (out) { snprintf(out[n].name, sizeof out[n].name, __VA_ARGS__); \
        out[n].rows = (r); out[n].cols = (cc); out[n].is_bias = false; } n++; } while (0)
    for (int e = 0; e < E; e++) {
        ADD(F, C, "layers.%d.feed_forward.experts.%d.w1.weight", l, e);
        ADD(C, F, "layers.%d.feed_forward.experts.%d.w2.weight", l, e);
        ADD(F, C, "layers.%d.feed_forward.experts.%d.w3.weight", l, e);
    }
    if (s->shared > 0) {   /* the shared experts: one SwiGLU of S F_e */
        ADD(s->shared * F, C, "layers.%d.feed_forward.shared_experts.w1.weight", l);
        ADD(C, s->shared * F, "layers.%d.feed_forward.shared_experts.w2.weight", l);
        ADD(s->shared * F, C, "layers.%d.feed_forward.shared_experts.w3.weight", l);
    }
    ADD(E, C, "layers.%d.feed_forward.gate.weight", l);
    if (s->score == PTDP_MOE_SIGMOID) {   /* DeepSeek-V3's selection bias [E] */
        ADD(1, E, "layers.%d.feed_forward.gate.expert_bias", l);
        if (out)
            out[n - 1].is_bias = true;
    }
#undef ADD
    return n;
}

int ptdp_llama_moe_lay_out(ptdp_device *dev, ptdp_model *m, ptdp_llama_block *b, int l)
{
    const ptdp_moe_settings *s = &ptdp_llama(&m->cfg)->moe;
    const int C = m->cfg.hidden, F = ptdp_moe_ffn(s, m->cfg.ffn), E = s->experts;
    const int t = ptdp_moe_expert_tp_rank(m->mesh), Fl = F / ptdp_moe_expert_tp_size(m->mesh);   /* moe_fold.c */
    const double proj_std = INIT_STD / sqrt(2.0 * m->cfg.layers);
    char name[PTDP_NAME_MAX];
    int e0 = 0;
    const int El = ptdp_moe_experts_here(m->mesh, E, &e0);
    if ((b->experts = calloc((size_t)El, sizeof *b->experts)) == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory describing the experts", dev->rank);
#define ADD(what, e, ...) (snprintf(name, sizeof name, "layers.%d.feed_forward.experts.%d.%s", l, e, what), \
                           ptdp_model_add_param(dev, m, name, __VA_ARGS__))
#define LIN ptdp_model_linear_weight   /* a linear layer's W (model.h) */
    for (int e = e0 + El - 1; e >= e0; e--) {   /* global index e, local e - e0 */
        ptdp_llama_expert *x = &b->experts[e - e0];
        x->w2 = LIN(ADD("w2.weight", e, C, F, false, PTDP_SHARD_COLS, 0, t * Fl, C, Fl, PTDP_INIT_NORMAL, proj_std));
        x->w3 = LIN(ADD("w3.weight", e, F, C, false, PTDP_SHARD_ROWS, t * Fl, 0, Fl, C, PTDP_INIT_NORMAL, INIT_STD));
        x->w1 = LIN(ADD("w1.weight", e, F, C, false, PTDP_SHARD_ROWS, t * Fl, 0, Fl, C, PTDP_INIT_NORMAL, INIT_STD));
        if (x->w1 == NULL)
            return PTDP_EINVAL;
        /* summed over the ranks that hold the same experts (mesh.h) */
        x->w1->sum.replicas = x->w3->sum.replicas = x->w2->sum.replicas = ptdp_moe_expert_replicas(m->mesh);
    }
#undef ADD
    if (s->shared > 0) {   /* one SwiGLU of S F_e, split over TP like the dense one, summed over DP */
        const int S = s->shared * F, Sl = S / m->mesh->tp, t = m->mesh->tp_rank;   /* attention's layout */
#define ADD(what, ...) (snprintf(name, sizeof name, "layers.%d.feed_forward.shared_experts.%s", l, what), \
                        ptdp_model_add_param(dev, m, name, __VA_ARGS__))
        ptdp_llama_expert *x = &b->shared;
        x->w2 = LIN(ADD("w2.weight", C, S, false, PTDP_SHARD_COLS, 0, t * Sl, C, Sl, PTDP_INIT_NORMAL, proj_std));
        x->w3 = LIN(ADD("w3.weight", S, C, false, PTDP_SHARD_ROWS, t * Sl, 0, Sl, C, PTDP_INIT_NORMAL, INIT_STD));
        x->w1 = LIN(ADD("w1.weight", S, C, false, PTDP_SHARD_ROWS, t * Sl, 0, Sl, C, PTDP_INIT_NORMAL, INIT_STD));
#undef ADD
        if (x->w1 == NULL)
            return PTDP_EINVAL;
    }
#undef LIN
    snprintf(name, sizeof name, "layers.%d.feed_forward.gate.weight", l);
    b->gate = ptdp_model_add_param(dev, m, name, E, C, false, PTDP_SHARD_NONE, 0, 0, E, C, PTDP_INIT_NORMAL, INIT_STD);
    ptdp_moe_fold_router(m->mesh, b->gate);
    if (b->gate != NULL && s->score == PTDP_MOE_SIGMOID) {   /* zero, no gradient, no decay (a bias) */
        snprintf(name, sizeof name, "layers.%d.feed_forward.gate.expert_bias", l);
        b->expert_bias = ptdp_model_add_param(dev, m, name, 1, E, true, PTDP_SHARD_NONE, 0, 0, 1, E,
                                              PTDP_INIT_ZEROS, 0.0);
        if (s->bias_update > 0 && (b->choices = calloc((size_t)E, sizeof *b->choices)) == NULL)
            return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory counting the experts' loads",
                             dev->rank);
        return b->expert_bias != NULL ? PTDP_OK : PTDP_EINVAL;
    }
    return b->gate != NULL ? PTDP_OK : PTDP_EINVAL;
}

int ptdp_llama_moe_publish(const ptdp_model_config *c, ptdp_counters *reg)
{
    return ptdp_moe_publish(&ptdp_llama(c)->moe, c->layers, reg);
}

void ptdp_llama_moe_count(const ptdp_model *m, const ptdp_acts *acts, ptdp_counts *counts)
{
    const ptdp_llama_saved *sv = acts->saved;
    if (sv != NULL)
        ptdp_moe_count(&ptdp_llama(&m->cfg)->moe, m->layer_begin, m->layer_end, sv->moe_tally, sv->aux_sum,
                       counts);
}

/* --moe-bias-update: the stage's MoE blocks' expert biases, one step
 * toward an even load from the step's choices (moe_bias.c). */
int ptdp_llama_moe_after_step(ptdp_device *dev, ptdp_model *m)
{
    const ptdp_moe_settings *s = &ptdp_llama(&m->cfg)->moe;
    ptdp_llama *p = m->impl;
    const int L = m->layer_end - m->layer_begin;
    if (s->bias_update <= 0 || p == NULL || L <= 0)
        return PTDP_OK;
    ptdp_real *bias[L];
    double *choices[L];
    int n = 0;
    for (int i = 0; i < L; i++)
        if (p->blocks[i].choices != NULL && p->blocks[i].expert_bias != NULL) {
            bias[n] = p->blocks[i].expert_bias->w.data;
            choices[n++] = p->blocks[i].choices;
        }
    return ptdp_moe_bias_step(dev, m->mesh, s->bias_update, s->experts, n, bias, choices);
}
