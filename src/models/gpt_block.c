/*
 * gpt_block.c — one transformer block of the GPT (pre-LayerNorm, as
 * GPT-2), its forward beside its backward, each a list of ops in the
 * order of the math:
 *
 *     x2  = x  + drop(attention(LN1(x) W_attn^T + b) W_proj^T + b)
 *     out = x2 + drop(GELU(LN2(x2) W_fc^T + b) W_fcproj^T + b)
 *
 *            ┌─ ln ─ column_linear ─ attention ─ row_linear ─┐
 *     x ─────┴──────────────────────────────────────── residual ─► x2
 *            ┌─ ln ─ column_linear ─ gelu ────── row_linear ─┐
 *     x2 ────┴──────────────────────────────────────── residual ─► out
 *
 * and the backward walks it right to left: each residual passes the
 * stream's gradient dh through unchanged and into its branch, whose
 * LayerNorm adds the branch's gradient back into dh.
 *
 * The ops (gpt_ops.c) hold what is not the math: TP's and SP's
 * collectives, the clock (each row_linear forward, each column_linear
 * backward, charges the piece of work it ends, priced by gpt_cost.c) and
 * bf16's rounding of what the block keeps.  The attention core
 * (gpt_attention.c) holds CP's ring, token slices and selective
 * recomputation.  Errors stick in the pass (gpt_pass.h): the block returns
 * the first.
 */
#include <stdio.h>

#include "models/gpt_pass.h"
#include "ptdp/error.h"

static uint64_t key(const ptdp_gpt_pass *k, int layer, const char *where)
{
    return ptdp_gpt_dropout_key(k->m, layer, where);
}

static void name(ptdp_gpt_pass *k, int layer, const char *direction)
{
    snprintf(k->what, sizeof k->what, "block %d %s", layer, direction);
    snprintf(k->wwhat, sizeof k->wwhat, "block %d wgrad", layer);
}

/* Subunit p's event (model.h): under bf16 a subunit of the block's unit — a
 * linear layer with its bias, or with the LayerNorm before it
 * (gpt_model.c) — is widened to float for the ops between its BEGIN and
 * END alone, and a backward's float gradient of it lives as long. */
static void subunit(ptdp_gpt_pass *k, const ptdp_param *p, ptdp_unit_event ev)
{
    if (k->rc == 0)
        k->rc = ptdp_model_subunit(k->dev, k->m, p, ev);
}

static ptdp_real *reals(ptdp_gpt_pass *k, size_t n, const char *what)
{
    return ptdp_alloc_uninit(k->dev, (n > 0 ? n : 1) * sizeof(ptdp_real), PTDP_MEM_ACTS, what);
}

/* What the block keeps (region rows Rl = R, or R / tp under SP, for the
 * residual stream, the LayerNorm outputs and their statistics; R rows for
 * the TP region's tensors), its output, and under SP a row-parallel
 * layer's R rows of partial sums (freed at the block's end). */
static void block_alloc(ptdp_gpt_pass *k, ptdp_gpt_block_acts *a, ptdp_tensor *out, ptdp_tensor *part, bool moe)
{
    const int C = k->shape.C, Cl = k->shape.Cl, Fl = k->shape.Fl, R = k->shape.R, Rl = k->shape.Rl;
    ptdp_gpt_act(k, &a->ln1, "acts.ln1", Rl, C);
    ptdp_gpt_act(k, &a->qkv, "acts.qkv", R, 3 * Cl);
    ptdp_gpt_act(k, &a->y, "acts.attn_y", R, Cl);
    ptdp_gpt_act(k, &a->x2, "acts.x2", Rl, C);
    ptdp_gpt_act(k, &a->ln2, "acts.ln2", Rl, C);
    if (!moe) {   /* an MoE block keeps its experts' rows instead (gpt_moe.c) */
        ptdp_gpt_act(k, &a->fc, "acts.fc", R, Fl);
        ptdp_gpt_act(k, &a->gelu, "acts.gelu", R, Fl);
    }
    if (ptdp_gpt_act(k, out, "acts.x", Rl, C) != 0)
        return;
    a->ln1_mean = reals(k, (size_t)Rl, "acts.ln1_mean");
    a->ln1_rstd = reals(k, (size_t)Rl, "acts.ln1_rstd");
    a->ln2_mean = reals(k, (size_t)Rl, "acts.ln2_mean");
    a->ln2_rstd = reals(k, (size_t)Rl, "acts.ln2_rstd");
    a->probs = reals(k, ptdp_gpt_probs_len(k->m, k->acts), "acts.probs");   /* or CP's log-sum-exps */
    if (!a->ln1_mean || !a->ln1_rstd || !a->ln2_mean || !a->ln2_rstd || !a->probs)
        k->rc = PTDP_ENOMEM;
    if (k->m->mesh->sp)
        ptdp_gpt_act(k, part, "acts.partial", R, C);
    k->w0 = ptdp_wall_now();
}

/* Block i: a->x (region rows x C) in, *out (the same, allocated here) out. */
int ptdp_gpt_block_forward(ptdp_gpt_pass *k, int i, ptdp_gpt_block_acts *a, ptdp_tensor *out)
{
    const ptdp_gpt_block *w = &ptdp_gpt_of(k->m)->blocks[i];
    const int layer = k->m->layer_begin + i;
    ptdp_tensor part = { 0 };
    name(k, layer, "fwd");
    block_alloc(k, a, out, &part, w->experts != NULL);

    /* attention: x2 = x + drop(attention(LN1(x) c_attn^T + b) c_proj^T + b) */
    subunit(k, w->attn_w, PTDP_UNIT_FORWARD_BEGIN);
    ptdp_gpt_ln(k, a->ln1, a->ln1_mean, a->ln1_rstd, a->x, w->ln1_w, w->ln1_b);
    ptdp_gpt_column_linear(k, a->qkv, a->ln1, w->attn_w, w->attn_b);
    subunit(k, w->attn_w, PTDP_UNIT_FORWARD_END);
    ptdp_gpt_attention(k, i, a);
    subunit(k, w->proj_w, PTDP_UNIT_FORWARD_BEGIN);
    ptdp_gpt_row_linear(k, a->x2, part, a->y, w->proj_w, ptdp_gpt_cost_attn_forward);
    ptdp_gpt_residual(k, a->x2, w->proj_b, key(k, layer, "attn_out"), a->x);
    subunit(k, w->proj_w, PTDP_UNIT_FORWARD_END);

    /* MLP: out = x2 + drop(GELU(LN2(x2) c_fc^T + b) c_proj^T + b),
     * or a mixture of experts: out = x2 + drop(sum_j g_j expert_j(LN2(x2)))
     * (whose block is one subunit-less unit: fc_w is NULL, no-op subunits) */
    subunit(k, w->fc_w, PTDP_UNIT_FORWARD_BEGIN);
    ptdp_gpt_ln(k, a->ln2, a->ln2_mean, a->ln2_rstd, a->x2, w->ln2_w, w->ln2_b);
    if (w->experts != NULL) {
        ptdp_gpt_moe_forward(k, i, a, *out);
    } else {
        ptdp_gpt_column_linear(k, a->fc, a->ln2, w->fc_w, w->fc_b);
        subunit(k, w->fc_w, PTDP_UNIT_FORWARD_END);
        ptdp_gpt_gelu(k, a->gelu, a->fc);
        subunit(k, w->fc_proj_w, PTDP_UNIT_FORWARD_BEGIN);
        ptdp_gpt_row_linear(k, *out, part, a->gelu, w->fc_proj_w, ptdp_gpt_cost_mlp_forward);
    }
    ptdp_gpt_residual(k, *out, w->fc_proj_b, key(k, layer, "mlp_out"), a->x2);
    subunit(k, w->fc_proj_w, PTDP_UNIT_FORWARD_END);
    ptdp_gpt_charge(k, ptdp_gpt_cost_block_out_forward);

    ptdp_tensor_free(k->dev, &part);
    return k->rc;
}

/* Block i, right to left: dh (region rows x C) is the gradient of the
 * block's output on entry and of its input on return.  The dW products go
 * to k->wg when the backward is split (wgrad.h). */
int ptdp_gpt_block_backward(ptdp_gpt_pass *k, int i, ptdp_gpt_block_acts *a, ptdp_tensor dh, ptdp_gpt_scratch *s)
{
    ptdp_gpt_block *w = &ptdp_gpt_of(k->m)->blocks[i];
    const int layer = k->m->layer_begin + i;
    ptdp_tensor d;
    name(k, layer, "bwd");
    k->w0 = ptdp_wall_now();

    /* MLP: out = x2 + drop(GELU(LN2(x2) c_fc^T + b) c_proj^T + b), or experts */
    ptdp_gpt_residual_backward(k, &d, dh, key(k, layer, "mlp_out"), s);
    if (w->experts != NULL) {
        ptdp_gpt_moe_backward(k, i, a, d, s);
    } else {
        subunit(k, w->fc_proj_w, PTDP_UNIT_BACKWARD_BEGIN);
        ptdp_gpt_row_linear_backward(k, s->dff, d, a->gelu, w->fc_proj_w, w->fc_proj_b);
        subunit(k, w->fc_proj_w, PTDP_UNIT_BACKWARD_END);
        ptdp_gpt_gelu_backward(k, s->dff, a->fc);
        subunit(k, w->fc_w, PTDP_UNIT_BACKWARD_BEGIN);
        ptdp_gpt_column_linear_backward(k, s, s->dff, a->ln2, w->fc_w, w->fc_b, &ptdp_gpt_cost_fc_backward);
    }
    ptdp_gpt_ln_backward(k, dh, s->dln_local, a->x2, w->ln2_w, w->ln2_b, a->ln2_mean, a->ln2_rstd, true);
    subunit(k, w->fc_w, PTDP_UNIT_BACKWARD_END);

    /* attention: x2 = x + drop(attention(LN1(x) c_attn^T + b) c_proj^T + b) */
    ptdp_gpt_residual_backward(k, &d, dh, key(k, layer, "attn_out"), s);
    subunit(k, w->proj_w, PTDP_UNIT_BACKWARD_BEGIN);
    ptdp_gpt_row_linear_backward(k, s->dy, d, a->y, w->proj_w, w->proj_b);
    subunit(k, w->proj_w, PTDP_UNIT_BACKWARD_END);
    ptdp_gpt_attention_backward(k, i, a, s);
    subunit(k, w->attn_w, PTDP_UNIT_BACKWARD_BEGIN);
    ptdp_gpt_column_linear_backward(k, s, s->dqkv, a->ln1, w->attn_w, w->attn_b, &ptdp_gpt_cost_qkv_backward);
    ptdp_gpt_ln_backward(k, dh, s->dln_local, a->x, w->ln1_w, w->ln1_b, a->ln1_mean, a->ln1_rstd, true);
    subunit(k, w->attn_w, PTDP_UNIT_BACKWARD_END);
    ptdp_gpt_charge(k, ptdp_gpt_cost_ln1_backward);
    return k->rc;
}
