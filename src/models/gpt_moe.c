/*
 * gpt_moe.c — the GPT's mixture of experts: its MLP as the expert, plugged
 * into the mixture every model shares (parallel/moe.c: the router, the
 * capacity, the balance loss, the dispatch and combine, EP's all-to-alls).
 *
 *   expert(x) = GELU(x W_fc^T + b_fc) W_proj^T + b_proj      (the dense MLP's)
 *
 *   stacked rows   x ──► c_fc (COLUMN, one group) ──► h ──► GELU ──► g
 *   of the local              ──► c_proj (ROW, one group: one all-reduce) ──► y
 *   experts        what each kept row keeps: h and g (F/tp each)
 *
 * The local experts run as two groups of linear layers (parallel_linear.h):
 * member e is local expert e on its rows of the stacked buffers — c_fc
 * column-parallel, c_proj row-parallel, each split over TP like the dense
 * MLP's (gpt_model.c), one charge and one TP sum for all of them.  Under a
 * split backward (ZB-H1, DualPipe) their dW waits for W like every other
 * linear's.  Under --precision bf16 h is rounded by the op and g here, as
 * the dense MLP's, and the router runs in float (Megatron's fp32 router).
 *
 * The block's other prices — LN2, the residual share and the router, as
 * the dense block pays them — are gpt_cost.c's, given to the mixture.
 */
#include "models/gpt_pass.h"
#include "models/gpt_table.h"
#include "parallel/moe_impl.h"
#include "ptdp/error.h"
#include "ptdp/mesh.h"
#include "ptdp/ops.h"
#include "ptdp/parallel_linear.h"

/* ------------------------------------------------ the GPT's expert */

/* Member e of a group: local expert e, c_fc or c_proj.  A dW W runs later
 * is priced by its rows, as the experts' forward and backward are
 * (gpt_cost.h: through the GEMM curve, under --fp8 at the FP8 peak with
 * its quantization). */
static ptdp_linear_layer expert_fc(const void *of, int e)
{
    const ptdp_moe_local *f = of;
    const ptdp_gpt_pass *k = f->model;
    const ptdp_gpt_expert *x = &((const ptdp_gpt_expert *)f->experts)[e];
    return (ptdp_linear_layer){
        .split = PTDP_SPLIT_COLUMN, .w = x->fc_w, .b = x->fc_b,
        .w_flops = ptdp_gpt_cost_expert_dw_fc(k->dev->profile, &k->shape, f->rows[e], f->F),
    };
}

static ptdp_linear_layer expert_proj(const void *of, int e)
{
    const ptdp_moe_local *f = of;
    const ptdp_gpt_pass *k = f->model;
    const ptdp_gpt_expert *x = &((const ptdp_gpt_expert *)f->experts)[e];
    return (ptdp_linear_layer){
        .split = PTDP_SPLIT_ROW, .w = x->proj_w, .b = x->proj_b,
        .w_flops = ptdp_gpt_cost_expert_dw_proj(k->dev->profile, &k->shape, f->rows[e], f->F),
    };
}

/* Each local expert over its rows: h = x W_fc^T + b, g = GELU(h), y = g W_proj^T + b,
 * charged by its rows (each product through the GEMM curve; under --fp8
 * at the FP8 peak with the quantization of its operands, gpt_cost.h).  Under TP each rank holds F/tp of every
 * expert's hidden units: the group's partial sums g W_proj^T are
 * all-reduced over the TP group where the experts ran, once for all (g of
 * Megatron's f/g), then each bias — so the outputs go home whole, and the
 * router's gates see the same y on every TP rank. */
static int mlp_forward(const ptdp_moe_local *f, ptdp_tensor x, ptdp_tensor y)
{
    ptdp_gpt_pass *k = f->model;
    const ptdp_linear_group fc = { PTDP_SPLIT_COLUMN, f->local, f->rows, expert_fc, f };
    const ptdp_linear_group proj = { PTDP_SPLIT_ROW, f->local, f->rows, expert_proj, f };
    const ptdp_tensor h = f->keep[0], g = f->keep[1];
    ptdp_linear_charge price = { 0 };
    for (int e = 0; e < f->local; e++) {
        const int n = f->rows[e];
        if (n > 0)
            price.flops += ptdp_gpt_cost_expert_forward(k->dev->profile, &k->shape, n, f->F, true);
    }
    ptdp_linear_pass c = *f->linear;   /* bf16: h rounded, as the dense MLP's c_fc output */
    k->rc = ptdp_parallel_linear_group_forward(&c, &fc, h, x, NULL);
    if (k->rc != 0)
        return k->rc;
    ptdp_gelu_forward(g, h);
    ptdp_gpt_round(k, g);
    return k->rc = ptdp_parallel_linear_group_forward(&c, &proj, y, g, &price);
}

/* Each local expert backward: its gradients (dW now, or W's), and dx of
 * its inputs, summed over the TP ranks' shares (f's backward, once). */
static int mlp_backward(const ptdp_moe_local *f, ptdp_tensor x, ptdp_tensor dy, ptdp_tensor dx)
{
    ptdp_gpt_pass *k = f->model;
    const ptdp_linear_group fc = { PTDP_SPLIT_COLUMN, f->local, f->rows, expert_fc, f };
    const ptdp_linear_group proj = { PTDP_SPLIT_ROW, f->local, f->rows, expert_proj, f };
    ptdp_tensor dH = f->scratch[0];
    ptdp_linear_pass c = *f->linear;
    const bool later = ptdp_linear_pass_defers(&c);   /* the dW products are W's */
    ptdp_linear_charge price = { 0 };
    for (int e = 0; e < f->local; e++) {
        const int n = f->rows[e];
        if (n > 0)
            price.flops += ptdp_gpt_cost_expert_backward(k->dev->profile, &k->shape, n, f->F, later, true);
    }
    k->rc = ptdp_parallel_linear_group_backward(&c, &proj, &dH, dy, f->keep[1], NULL);
    if (k->rc != 0)
        return k->rc;
    ptdp_gelu_backward(dH, dH, f->keep[0]);
    return k->rc = ptdp_parallel_linear_group_backward(&c, &fc, &dx, dH, x, &price);
}

static const ptdp_moe_expert_kind gpt_mlp = {
    .nkeep = 2, .keep = { "acts.moe_fc", "acts.moe_gelu" },
    .nscratch = 1, .scratch = { "grad.moe_fc" },
    .forward = mlp_forward, .backward = mlp_backward,
};

/* ------------------------------------------------ the block's mixture */

/* The mixture's pass for block i of this pass: the GPT's linear pass, its
 * settings, a rank's positions (CP: T/cp of the sequence's T), each
 * expert's F/tp, and the micro-batch's tally. */
static ptdp_moe_pass mixture(ptdp_gpt_pass *k, int i, const ptdp_moe_settings *s)
{
    ptdp_gpt_saved *sv = k->acts != NULL ? k->acts->saved : NULL;
    return (ptdp_moe_pass){
        .dev = k->dev, .mesh = k->m->mesh, .linear = ptdp_gpt_linear_pass(k), .settings = s,
        .T = k->shape.T / k->shape.cp, .T_seq = k->shape.T, .F = ptdp_gpt_moe_ffn(&k->m->cfg) / ptdp_moe_expert_tp_size(k->m->mesh),
        .router = ptdp_gpt_of(k->m)->blocks[i].router, .bias = ptdp_gpt_of(k->m)->blocks[i].expert_bias,
        .choices = ptdp_gpt_of(k->m)->blocks[i].choices,
        .kind = &gpt_mlp, .model = k,
        .experts = ptdp_gpt_of(k->m)->blocks[i].experts,
        .shared = ptdp_gpt_of(k->m)->blocks[i].shared.fc_w != NULL ? &ptdp_gpt_of(k->m)->blocks[i].shared : NULL,
        .F_shared = s->shared * ptdp_gpt_moe_ffn(&k->m->cfg) / k->m->mesh->tp,   /* --moe-shared-experts */
        .tally = sv != NULL ? &sv->moe_tally : NULL, .block = i, .nblocks = sv != NULL ? sv->nblocks : 0,
        .rc = k->rc,
    };
}

/* The shape the router's products are priced at: the rows it routes, R,
 * or under MoE parallel folding (moe_fold.c) this rank's slice of them. */
static ptdp_gpt_shape routed_shape(const ptdp_gpt_pass *k)
{
    ptdp_gpt_shape s = k->shape;
    s.R /= ptdp_moe_fold_slices(k->m->mesh);
    return s;
}

void ptdp_gpt_moe_forward(ptdp_gpt_pass *k, int i, ptdp_gpt_block_acts *a, ptdp_tensor out)
{
    const ptdp_moe_settings s = ptdp_gpt_moe_settings(&k->m->cfg);
    if (k->rc != 0)
        return;
    ptdp_moe_pass p = mixture(k, i, &s);
    const ptdp_gpt_shape routed = routed_shape(k);
    p.router_flops = ptdp_gpt_cost_moe_forward(k->dev->profile, &routed, s.experts);
    k->rc = ptdp_moe_forward(&p, &a->moe, a->ln2, out);
}

void ptdp_gpt_moe_backward(ptdp_gpt_pass *k, int i, ptdp_gpt_block_acts *a, ptdp_tensor d, ptdp_gpt_scratch *s)
{
    const ptdp_moe_settings ms = ptdp_gpt_moe_settings(&k->m->cfg);
    if (k->rc != 0 || a->moe == NULL)
        return;
    ptdp_moe_pass p = mixture(k, i, &ms);
    /* the loss's scale is 1 / (global batch x label_cols) a position:
     * the balance loss is a mean over sequences, label_cols times that */
    p.per_sequence = k->loss_scale * k->m->label_cols;
    const ptdp_gpt_shape routed = routed_shape(k);
    p.router_flops = ptdp_gpt_cost_moe_backward(k->dev->profile, &routed, ms.experts);
    p.router_w_flops = ptdp_gpt_cost_dw_router(k->dev->profile, &routed, ms.experts);
    k->rc = ptdp_moe_backward(&p, a->moe, a->ln2, d, s->dln);
}

void ptdp_gpt_moe_free(ptdp_device *dev, ptdp_gpt_block_acts *a)
{
    ptdp_moe_free(dev, &a->moe);
}

double ptdp_gpt_moe_aux(const ptdp_gpt_block_acts *a)
{
    return ptdp_moe_aux(a->moe);
}
