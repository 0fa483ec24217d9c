/*
 * gpt_cost.c — the GPT's work priced for the virtual clock (gpt_cost.h).
 *
 * A linear layer y = x W^T + b of rows x in -> out is three pieces of work
 * (ops.h counts them the same way):
 *
 *   forward    y = x W^T          GEMM (R x in) by (in x out)   m R, n out, k in
 *              + b                R out
 *   backward   dx = dy W          GEMM (R x out) by (out x in)  m R, n in,  k out
 *              dW = dy^T x        GEMM (out x R) by (R x in)    m out, n in, k R
 *              db = sum dy        R out
 *
 * and attention, per sequence and head (T positions, head size hd):
 *
 *   forward    S = Q K^T          GEMM T x T by hd      2 T T hd
 *              softmax            5 per score
 *              Y = P V            GEMM T x hd by T      2 T T hd
 *   backward   dP = dY V^T, dV = P^T dY, dQ = dS K, dK = dS^T Q
 *                                 four GEMMs            8 T T hd
 *              softmax'           4 per score
 *
 * Under CP the ring computes (chunk x chunk) blocks, those not wholly in
 * the future (cp.h); a token slice (TeraPipe) tlen queries against the
 * t0 + tlen keys before them.  The elementwise counts are ops.h's:
 * LayerNorm 8 / 16 per element, GELU 9 / 19, the cross-entropy's backward
 * 5 per logit (its forward is not charged); and bias + dropout + residual
 * 3 per element of the region.
 */
#include "gpt_cost.h"

#include "ptdp/cp.h"
#include "ptdp/gpt.h"
#include "ptdp/ops.h"

static double gemm(const ptdp_profile *p, double m, double n, double k)
{
    return ptdp_gemm_cost_flops(p, m, n, k);
}

/* A linear layer's three products (R rows of `in` features to `out`),
 * under --fp8 from FP8 operands, each paying for the operands it
 * quantizes (gpt_cost.h); without FP8 exactly gemm's. */
static double linear(const ptdp_profile *p, const ptdp_gpt_shape *s, double m, double n, double k,
                     double quantized)
{
    return s->fp8 ? ptdp_fp8_gemm_cost_flops(p, s->bf16, m, n, k, quantized) : gemm(p, m, n, k);
}

/* y = x W^T:  Q(X), Q(W) */
static double linear_fwd(const ptdp_profile *p, const ptdp_gpt_shape *s, double out, double in)
{
    return linear(p, s, s->R, out, in, (double)s->R * in + out * in);
}

/* dx = dy W:  Q(dY), Q(W) */
static double linear_dx(const ptdp_profile *p, const ptdp_gpt_shape *s, double out, double in)
{
    return linear(p, s, s->R, in, out, (double)s->R * out + out * in);
}

/* dW = dy^T x:  Q(X) */
static double linear_dw(const ptdp_profile *p, const ptdp_gpt_shape *s, double out, double in)
{
    return linear(p, s, out, in, s->R, (double)s->R * in);
}

/* The embedding and the head: nothing under the ideal profile. */
static bool free_edges(const ptdp_profile *p)
{
    return p != NULL && p->ideal;
}

ptdp_gpt_shape ptdp_gpt_shape_make(const ptdp_model_config *c, int rows, int tp, bool sp, int cp, int cp_rank,
                                   bool cp_zigzag)
{
    const ptdp_gpt_settings *gpt = ptdp_gpt(c);
    const int vp = gpt->vocab_padded > 0 ? gpt->vocab_padded : ptdp_gpt_pad_vocab(gpt->vocab, gpt->vocab_multiple, tp);
    const int hd = gpt->heads > 0 ? c->hidden / gpt->heads : 0;
    const int hl = gpt->heads / tp;
    ptdp_gpt_shape s = {
        .rows = rows, .C = c->hidden, .heads = hl, .hd = hd, .Cl = hl * hd, .Fl = c->ffn / tp,
        .Vl = vp / tp, .T = gpt->seq_len, .cp = cp > 1 ? cp : 1, .cp_rank = cp > 1 ? cp_rank : 0,
        .cp_zigzag = cp_zigzag,
    };
    s.R = rows * (gpt->seq_len / s.cp);
    s.Rl = sp && tp > 1 ? s.R / tp : s.R;
    return s;
}

/* ----------------------------------------------------------- attention */

static double ulysses_core(const ptdp_gpt_shape *s, double *bh);

/* Blocks of the ring's (chunk x chunk) products on this CP rank: the
 * score elements cp.c computes, ptdp_ring_attention_scores, by blocks. */
static double ring_blocks(const ptdp_gpt_shape *s, int *share)
{
    const ptdp_cp_layout q = ptdp_cp_layout_of(s->T, s->cp, s->cp_rank, s->cp_zigzag);
    *share = q.len;
    return q.len > 0 ? ptdp_ring_attention_scores(s->T, s->cp, s->cp_rank, s->cp_zigzag) / ((double)q.len * q.len)
                     : 0;
}

double ptdp_gpt_cost_attention_core(const ptdp_profile *p, const ptdp_gpt_shape *s, bool backward)
{
    double bh = (double)s->rows * s->heads;
    const int hd = s->hd;
    double nq, nk, blocks;     /* each of `blocks` products: nq queries by nk keys */
    if (s->cp > 1 && s->cp_a2a) {
        nq = nk = ulysses_core(s, &bh);
        blocks = 1;
    } else if (s->tlen > 0) {
        nq = s->tlen;
        nk = s->t0 + s->tlen;
        blocks = 1;
    } else if (s->cp > 1) {
        int c;
        blocks = ring_blocks(s, &c);
        nq = nk = c;
    } else {
        nq = nk = s->T;
        blocks = 1;
    }
    if (s->tiled) {     /* the tiles not in the future: nq queries by nk keys on average */
        nk = ptdp_attention_tiled_scores((int)(nk - nq), (int)nk) / nq;
        if (backward)   /* S = Q K^T again, P = e^(S - lse) 2 a score, then the four products */
            return bh * (gemm(p, nq, nk, hd) + gemm(p, nq, nk, hd) + gemm(p, nq, hd, nk) + gemm(p, nk, hd, nq) +
                         gemm(p, nk, hd, nq)) + bh * nq * nk * (2 + 4);
    }
    const double scores = blocks * nq * nk;
    if (!backward)      /* S = Q K^T, Y = P V;  softmax 5 a score */
        return bh * blocks * (gemm(p, nq, nk, hd) + gemm(p, nq, hd, nk)) + bh * scores * 5;
    /* dP = dY V^T, dS K, dS^T Q, P^T dY;  softmax' 4 a score */
    return bh * blocks * (gemm(p, nq, nk, hd) + gemm(p, nq, hd, nk) + gemm(p, nk, hd, nq) + gemm(p, nk, hd, nq)) +
           bh * scores * 4;
}

/* ------------------------------------------------------------- forward */

/* LN1 (region rows), qkv = ln1 W_qkv^T + b, the core, y W_o^T (its bias
 * comes after the sum over TP). */
double ptdp_gpt_cost_attn_forward(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    const double R = s->R, C = s->C, Cl = s->Cl;
    return ptdp_layernorm_flops_forward((size_t)s->Rl * s->C) + linear_fwd(p, s, 3 * Cl, C) + R * 3 * Cl +
           ptdp_gpt_cost_attention_core(p, s, false) + linear_fwd(p, s, C, Cl);
}

/* The attention's bias, dropout and residual (3 per region element), LN2,
 * c_fc with its bias, GELU, and c_proj's product. */
double ptdp_gpt_cost_mlp_forward(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    const double R = s->R, C = s->C, Fl = s->Fl;
    return 3.0 * s->Rl * C + ptdp_layernorm_flops_forward((size_t)s->Rl * s->C) + linear_fwd(p, s, Fl, C) +
           R * Fl + ptdp_gelu_flops_forward((size_t)s->R * s->Fl) + linear_fwd(p, s, C, Fl);
}

/* The MLP's bias, dropout and residual. */
double ptdp_gpt_cost_block_out_forward(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    (void)p;
    return 3.0 * s->Rl * s->C;
}

/* An MoE block's MLP beside its experts (gpt_moe.c charges those as they
 * run, by their measured rows): LN2 and the dense MLP's 3 per element of
 * the region, as the dense block pays them, and the router z = h W_r^T. */
double ptdp_gpt_cost_moe_forward(const ptdp_profile *p, const ptdp_gpt_shape *s, int E)
{
    return 3.0 * s->Rl * s->C + ptdp_layernorm_flops_forward((size_t)s->Rl * s->C) + gemm(p, s->R, E, s->C);
}

/* Its backward beside the experts': the bias's R C, as the dense MLP's,
 * and the router's dX = dZ W_r and (unless split: W's) dW_r = dZ^T h. */
double ptdp_gpt_cost_moe_backward(const ptdp_profile *p, const ptdp_gpt_shape *s, int E)
{
    double f = (double)s->R * s->C + gemm(p, s->R, s->C, E);
    if (!s->split)
        f += ptdp_gpt_cost_dw_router(p, s, E);
    return f;
}

/* The router's dW_r = dZ^T h (E x C over the R token rows). */
double ptdp_gpt_cost_dw_router(const ptdp_profile *p, const ptdp_gpt_shape *s, int E)
{
    return gemm(p, E, s->C, s->R);
}

/* ------------------------------------------------------------- experts */

/* An expert's product of (m x k) by (k x n) on its own rows, through the
 * same GEMM curve as the dense layers' (clock.h): an expert that gets a
 * few rows runs a thin product that fills a fraction of the GPU's tiles
 * and waits on its weights' bytes, as on the hardware — the reason
 * fine-grained experts reach a lower MFU than a dense MLP of the same
 * active flops.  Under --fp8 at the FP8 peak with the quantization of the
 * `quantized` elements of its operands.  (A textbook profile has no
 * curve: exactly 2 m n k.) */
static double expert_product(const ptdp_profile *p, const ptdp_gpt_shape *s, double m, double n, double k,
                             double quantized)
{
    return s->fp8 ? ptdp_fp8_gemm_cost_flops(p, s->bf16, m, n, k, quantized) : gemm(p, m, n, k);
}

/* c_fc (C -> F) and its bias, GELU, c_proj (F -> C) and its bias on n
 * rows; under --fp8 each product quantizes its X (n in) and, with
 * `weights`, its W (F C) as the dense layers do. */
double ptdp_gpt_cost_expert_forward(const ptdp_profile *p, const ptdp_gpt_shape *s, double n, int F, bool weights)
{
    const double C = s->C, nF = n * F, nC = n * C, W = weights ? F * C : 0;
    return expert_product(p, s, n, F, C, nC + W) + nF + ptdp_gelu_flops_forward((size_t)nF) +
           expert_product(p, s, n, C, F, nF + W) + nC;
}

/* dW = dY^T X of c_fc (F x C over the n rows, Q(X): n C) and of c_proj
 * (C x F, Q(g): n F), as W charges them. */
double ptdp_gpt_cost_expert_dw_fc(const ptdp_profile *p, const ptdp_gpt_shape *s, double n, int F)
{
    return expert_product(p, s, F, s->C, n, n * s->C);
}

double ptdp_gpt_cost_expert_dw_proj(const ptdp_profile *p, const ptdp_gpt_shape *s, double n, int F)
{
    return expert_product(p, s, s->C, F, n, n * F);
}

/* Backward: c_proj's dX = dY W (Q(dY) n C, Q(W)) and db, GELU's, c_fc's dX
 * (Q(dY) n F, Q(W)) and db; unless `later` (W's) both dW. */
double ptdp_gpt_cost_expert_backward(const ptdp_profile *p, const ptdp_gpt_shape *s, double n, int F, bool later,
                                     bool weights)
{
    const double C = s->C, nF = n * F, nC = n * C, W = weights ? F * C : 0;
    const double dx = expert_product(p, s, n, F, C, nC + W) + nC + ptdp_gelu_flops_backward((size_t)nF) +
                      expert_product(p, s, n, C, F, nF + W) + nF;
    return later ? dx : dx + ptdp_gpt_cost_expert_dw_proj(p, s, n, F) + ptdp_gpt_cost_expert_dw_fc(p, s, n, F);
}

double ptdp_gpt_cost_block_forward(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    return ptdp_gpt_cost_attn_forward(p, s) + ptdp_gpt_cost_mlp_forward(p, s) +
           ptdp_gpt_cost_block_out_forward(p, s);
}

/* ------------------------------------------------------------ backward */

/* dW (out x in) = dy^T x over the R token rows. */
double ptdp_gpt_cost_dw_linear(const ptdp_profile *p, const ptdp_gpt_shape *s, int out, int in)
{
    return linear_dw(p, s, out, in);
}

double ptdp_gpt_cost_dw_attn(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    return ptdp_gpt_cost_dw_linear(p, s, 3 * s->Cl, s->C);
}

double ptdp_gpt_cost_dw_attn_proj(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    return ptdp_gpt_cost_dw_linear(p, s, s->C, s->Cl);
}

double ptdp_gpt_cost_dw_fc(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    return ptdp_gpt_cost_dw_linear(p, s, s->Fl, s->C);
}

double ptdp_gpt_cost_dw_fc_proj(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    return ptdp_gpt_cost_dw_linear(p, s, s->C, s->Fl);
}

double ptdp_gpt_cost_block_w(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    return ptdp_gpt_cost_dw_fc_proj(p, s) + ptdp_gpt_cost_dw_fc(p, s) + ptdp_gpt_cost_dw_attn_proj(p, s) +
           ptdp_gpt_cost_dw_attn(p, s);
}

/* c_proj's dx (and dW) and db, GELU's backward, c_fc's dx (and dW), db. */
double ptdp_gpt_cost_mlp_backward(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    const double R = s->R, C = s->C, Fl = s->Fl;
    double f = linear_dx(p, s, C, Fl) + R * C + ptdp_gelu_flops_backward((size_t)s->R * s->Fl) +
               linear_dx(p, s, Fl, C) + R * Fl;
    if (!s->split)
        f += ptdp_gpt_cost_dw_fc_proj(p, s) + ptdp_gpt_cost_dw_fc(p, s);
    return f;
}

/* LN2's backward, the attention c_proj's dx (dW) and db, the core again
 * (selective), the core's backward, c_attn's dx (dW) and db. */
double ptdp_gpt_cost_attn_backward(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    const double R = s->R, C = s->C, Cl = s->Cl;
    double f = ptdp_layernorm_flops_backward((size_t)s->Rl * s->C) + linear_dx(p, s, C, Cl) + R * C +
               linear_dx(p, s, 3 * Cl, C) + R * 3 * Cl + ptdp_gpt_cost_attention_core(p, s, true);
    if (s->selective && !s->tiled && (s->cp == 1 || s->cp_a2a))   /* the ring and tiles keep lse: nothing again */
        f += ptdp_gpt_cost_attention_core(p, s, false);
    if (!s->split)
        f += ptdp_gpt_cost_dw_attn_proj(p, s) + ptdp_gpt_cost_dw_attn(p, s);
    return f;
}

/* --------------------------- SP: a column-parallel layer's backward in three */

/* c_proj's dx (and dW) and db, GELU's backward: up to c_fc's dX. */
double ptdp_gpt_cost_mlp_backward_before_fc(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    const double R = s->R, C = s->C, Fl = s->Fl;
    double f = linear_dx(p, s, C, Fl) + R * C + ptdp_gelu_flops_backward((size_t)s->R * s->Fl);
    if (!s->split)
        f += ptdp_gpt_cost_dw_fc_proj(p, s);
    return f;
}

/* c_fc's dX = dY W and db. */
double ptdp_gpt_cost_dx_fc(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    return linear_dx(p, s, s->Fl, s->C) + (double)s->R * s->Fl;
}

double ptdp_gpt_cost_sp_dw_fc(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    return s->split ? 0 : ptdp_gpt_cost_dw_fc(p, s);
}

/* LN2's backward, the attention c_proj's dx (dW) and db, the core again
 * (selective) and its backward: up to c_attn's dX. */
double ptdp_gpt_cost_attn_backward_before_qkv(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    const double R = s->R, C = s->C, Cl = s->Cl;
    double f = ptdp_layernorm_flops_backward((size_t)s->Rl * s->C) + linear_dx(p, s, C, Cl) + R * C +
               ptdp_gpt_cost_attention_core(p, s, true);
    if (s->selective && s->cp == 1)
        f += ptdp_gpt_cost_attention_core(p, s, false);
    if (!s->split)
        f += ptdp_gpt_cost_dw_attn_proj(p, s);
    return f;
}

/* c_attn's dX = dY W and db. */
double ptdp_gpt_cost_dx_qkv(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    return linear_dx(p, s, 3.0 * s->Cl, s->C) + (double)s->R * 3 * s->Cl;
}

double ptdp_gpt_cost_sp_dw_qkv(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    return s->split ? 0 : ptdp_gpt_cost_dw_attn(p, s);
}

const ptdp_gpt_column_backward_cost ptdp_gpt_cost_fc_backward = {
    ptdp_gpt_cost_mlp_backward, ptdp_gpt_cost_mlp_backward_before_fc, ptdp_gpt_cost_dx_fc, ptdp_gpt_cost_sp_dw_fc,
    ptdp_gpt_cost_dw_fc,
};

const ptdp_gpt_column_backward_cost ptdp_gpt_cost_qkv_backward = {
    ptdp_gpt_cost_attn_backward, ptdp_gpt_cost_attn_backward_before_qkv, ptdp_gpt_cost_dx_qkv,
    ptdp_gpt_cost_sp_dw_qkv, ptdp_gpt_cost_dw_attn,
};

double ptdp_gpt_sp_gather_bytes(const ptdp_gpt_shape *s)
{
    return (double)s->R * s->C * sizeof(ptdp_real);
}

/* LN1's backward and the residual's sum. */
double ptdp_gpt_cost_ln1_backward(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    (void)p;
    return ptdp_layernorm_flops_backward((size_t)s->Rl * s->C) + 2.0 * s->Rl * s->C;
}

double ptdp_gpt_cost_block_backward(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    return ptdp_gpt_cost_mlp_backward(p, s) + ptdp_gpt_cost_attn_backward(p, s) + ptdp_gpt_cost_ln1_backward(p, s);
}

/* --------------------------------------------------- embedding and head */

/* Each region row gets its position's wpe row added (the lookup is a copy). */
double ptdp_gpt_cost_embed_forward(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    return free_edges(p) ? 0 : (double)s->Rl * s->C;
}

/* The scatter-add into wte (a weight gradient: W's when split), wpe's. */
double ptdp_gpt_cost_dw_embed(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    return free_edges(p) ? 0 : (double)s->R * s->C;
}

double ptdp_gpt_cost_embed_backward(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    if (free_edges(p))
        return 0;
    return (double)s->R * s->C + (s->split ? 0 : ptdp_gpt_cost_dw_embed(p, s));
}

/* LN_f over every row, z = h wte^T on this rank's vocabulary rows. */
double ptdp_gpt_cost_head_forward(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    if (free_edges(p))
        return 0;
    return ptdp_layernorm_flops_forward((size_t)s->R * s->C) + gemm(p, s->R, s->Vl, s->C);
}

double ptdp_gpt_cost_dw_head(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    return free_edges(p) ? 0 : gemm(p, s->Vl, s->C, s->R);
}

/* dz = softmax - onehot, dh = dz wte (and d wte = dz^T h). */
double ptdp_gpt_cost_head_backward(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    if (free_edges(p))
        return 0;
    double f = ptdp_xent_flops_backward(s->R, s->Vl) + gemm(p, s->R, s->C, s->Vl);
    if (!s->split)
        f += ptdp_gpt_cost_dw_head(p, s);
    return f;
}

/* The head's backward in SP's three parts (gpt_cost.h): the loss's
 * backward, dh = dz wte, d wte = dz^T h (unless split). */
double ptdp_gpt_cost_head_backward_before(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    return free_edges(p) ? 0 : ptdp_xent_flops_backward(s->R, s->Vl);
}

double ptdp_gpt_cost_dx_head(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    return free_edges(p) ? 0 : gemm(p, s->R, s->C, s->Vl);
}

double ptdp_gpt_cost_sp_dw_head(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    return s->split ? 0 : ptdp_gpt_cost_dw_head(p, s);
}

const ptdp_gpt_column_backward_cost ptdp_gpt_cost_head_column = {
    ptdp_gpt_cost_head_backward, ptdp_gpt_cost_head_backward_before, ptdp_gpt_cost_dx_head,
    ptdp_gpt_cost_sp_dw_head, ptdp_gpt_cost_dw_head,
};

double ptdp_gpt_cost_lnf_backward(const ptdp_profile *p, const ptdp_gpt_shape *s)
{
    return free_edges(p) ? 0 : ptdp_layernorm_flops_backward((size_t)s->Rl * s->C);
}

/* ------------------------------------------------------------- Ulysses */

/* Under Ulysses (ulysses.h) a CP rank's attention is one device's on
 * whole sequences — T queries by T keys — of heads / cp of its heads:
 * B (nh/(tp cp)) products of each shape; the all-to-alls around it are
 * collectives, priced by the communicator.  Returns T, and the products'
 * count in *bh. */
static double ulysses_core(const ptdp_gpt_shape *s, double *bh)
{
    *bh = (double)s->rows * (s->heads / s->cp);
    return s->T;
}
