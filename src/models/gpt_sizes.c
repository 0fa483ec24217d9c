/*
 * gpt_sizes.c — the GPT's sizes from its config alone: the padded
 * vocabulary and what a micro-batch keeps per block (gpt.h's formulas).
 * Pure arithmetic, below everything else of the GPT, so that the model
 * (gpt_model.c), its clock charges (gpt_cost.c) and its planning table
 * (gpt_plan.c) all read them without calling one another:
 *
 *   gpt_model.c ──┐
 *   gpt_plan.c ───┼──► gpt_sizes.c      V_pad = ceil(V / (k tp)) k tp
 *   gpt_cost.c ───┘                     K_block = B T (4C + 4C/tp + 2F/tp + 4)
 *                                                 + B (nh/tp) T²   (gpt.h)
 *                                       SP: B T (8C + 2F + 4) / tp + B (nh/tp) T²
 *                                       tiled: B (nh/tp) T log-sum-exps, not T²
 */
#include "ptdp/gpt.h"

#include "models/gpt_table.h"
#include "ptdp/ops.h"

int ptdp_gpt_pad_vocab(int vocab, int multiple, int tp)
{
    long unit = (long)multiple * tp;
    if (unit < 1)
        return vocab;
    long v = (vocab + unit - 1) / unit * unit;
    return v > 0x7fffffff ? -1 : (int)v;
}

double ptdp_gpt_block_act_elements_cp(const ptdp_model_config *c, int batch, int tp, int cp, bool sp)
{
    const ptdp_gpt_settings *gpt = ptdp_gpt(c);
    const double B = batch, Tq = gpt->seq_len / cp, C = c->hidden, F = c->ffn;
    if (sp)
        return B * Tq * (4 * C / tp + (3 * C + C) / tp + 2 * F / tp + 4.0 / tp) + B * (gpt->heads / tp) * Tq;
    return B * Tq * (4 * C + (3 * C + C) / tp + 2 * F / tp + 4) + B * (gpt->heads / tp) * Tq;
}

double ptdp_gpt_block_act_elements_selective(const ptdp_model_config *c, int batch, int tp, bool sp)
{
    const ptdp_gpt_settings *gpt = ptdp_gpt(c);
    return ptdp_gpt_block_act_elements(c, batch, tp,
                                       sp) - (double)batch * (gpt->heads / tp) * gpt->seq_len * gpt->seq_len;
}

double ptdp_gpt_block_act_elements(const ptdp_model_config *c, int batch, int tp, bool sp)
{
    const ptdp_gpt_settings *gpt = ptdp_gpt(c);
    const double B = batch, T = gpt->seq_len, C = c->hidden, F = c->ffn;
    if (sp)
        return B * T * (4 * C / tp + (3 * C + C) / tp + 2 * F / tp + 4.0 / tp) + B * (gpt->heads / tp) * T * T;
    return B * T * (4 * C + (3 * C + C) / tp + 2 * F / tp + 4) + B * (gpt->heads / tp) * T * T;
}

double ptdp_gpt_block_act_bytes(const ptdp_model_config *c, int batch, int tp, int cp, bool sp, bool selective,
                                bool bf16)
{
    const ptdp_gpt_settings *gpt = ptdp_gpt(c);
    cp = cp > 1 ? cp : 1;
    const double e = cp > 1 ? ptdp_gpt_block_act_elements_cp(c, batch, tp, cp, sp)
                     : selective ? ptdp_gpt_block_act_elements_selective(c, batch, tp, sp)
                                 : ptdp_gpt_block_act_elements(c, batch, tp, sp);
    if (!bf16)
        return e * sizeof(ptdp_real);
    const double rows = (double)batch * (gpt->seq_len / cp);
    const double stats = 4 * (sp ? rows / tp : rows);                            /* LayerNorms' mean, 1/std */
    const double lse = cp > 1 ? (double)batch * (gpt->heads / tp) * (gpt->seq_len / cp) : 0;   /* CP's log-sum-exps */
    return (e - stats - lse) * sizeof(ptdp_bf16) + (stats + lse) * sizeof(ptdp_real);
}

/* Under Ulysses (--cp-algo a2a, ulysses.h) a block keeps CP's T/cp
 * positions of everything outside attention (qkv in the head layout, the
 * same count), and of attention the probabilities of whole sequences of
 * its nh/(tp cp) heads where the ring keeps a log-sum-exp a query — or
 * nothing under selective recomputation. */
double ptdp_gpt_block_act_elements_a2a(const ptdp_model_config *c, int batch, int tp, int cp, bool sp,
                                       bool selective)
{
    const ptdp_gpt_settings *gpt = ptdp_gpt(c);
    const double B = batch, T = gpt->seq_len;
    const double lse = B * (gpt->heads / tp) * (gpt->seq_len / cp);
    const double probs = selective ? 0 : B * (gpt->heads / tp / cp) * T * T;
    return ptdp_gpt_block_act_elements_cp(c, batch, tp, cp, sp) - lse + probs;
}

double ptdp_gpt_block_act_bytes_a2a(const ptdp_model_config *c, int batch, int tp, int cp, bool sp, bool selective,
                                    bool bf16)
{
    const double e = ptdp_gpt_block_act_elements_a2a(c, batch, tp, cp, sp, selective);
    if (!bf16)
        return e * sizeof(ptdp_real);
    const double rows = (double)batch * (ptdp_gpt(c)->seq_len / cp);
    const double stats = 4 * (sp ? rows / tp : rows);                            /* LayerNorms' mean, 1/std */
    return (e - stats) * sizeof(ptdp_bf16) + stats * sizeof(ptdp_real);
}

double ptdp_gpt_block_act_elements_tiled(const ptdp_model_config *c, int batch, int tp, int cp, bool sp)
{
    return ptdp_gpt_block_act_elements_cp(c, batch, tp, cp > 1 ? cp : 1, sp);
}

double ptdp_gpt_block_act_bytes_tiled(const ptdp_model_config *c, int batch, int tp, int cp, bool sp, bool bf16)
{
    cp = cp > 1 ? cp : 1;
    const double e = ptdp_gpt_block_act_elements_tiled(c, batch, tp, cp, sp);
    if (!bf16)
        return e * sizeof(ptdp_real);
    const double rows = (double)batch * (ptdp_gpt(c)->seq_len / cp);
    const double stats = 4 * (sp ? rows / tp : rows);                            /* LayerNorms' mean, 1/std */
    const double lse = (double)batch * (ptdp_gpt(c)->heads / tp) * (ptdp_gpt(c)->seq_len / cp);
    return (e - stats - lse) * sizeof(ptdp_bf16) + (stats + lse) * sizeof(ptdp_real);
}

/* Full recomputation (gpt.c), one stage holding the whole model: what the
 * backward of one micro-batch holds at its highest, in bytes.  X = B T C
 * (a block's input, kept as bf16 under bf16), A = one block's activations
 * (ptdp_gpt_block_act_elements, float while its block is redone), S = the
 * backward's scratch, b its element size:
 *
 *   block phase  (L-1) X b + (A + X + S) r    the other blocks' inputs; the
 *                                             block redone, its output X
 *                                             (dropped at once) and S
 *   tail phase   L X b + (X + C R + V_l R + 2 R + S) r + 2 R 8
 *                                             x_out again in float, LN_f's
 *                                             output, the logits, LN_f's
 *                                             and the softmax's statistics
 *   peak         8 R (the tokens) + the larger of the two
 *
 * with R = B T, r = sizeof(ptdp_real), b = 2 under bf16 else r, and
 * S = R (3 C + F/tp + 4 C/tp) + 2 T^2 (+ T^2 when dropout draws masks in
 * the redone attention).  No SP, no CP.  Under --attention tiled A keeps
 * log-sum-exps (ptdp_gpt_block_act_elements_tiled) and the forward's two
 * tiles of scratch, and S's 2 T^2 are the backward's two tiles. */
static double full_recompute_peak(const ptdp_model_config *c, int batch, int tp, bool bf16, bool dropout, bool tiled)
{
    const ptdp_gpt_settings *gpt = ptdp_gpt(c);
    const double R = (double)batch * gpt->seq_len, T = gpt->seq_len, C = c->hidden, L = c->layers;
    const double r = sizeof(ptdp_real), b = bf16 ? sizeof(ptdp_bf16) : r, X = R * C;
    const int vp = gpt->vocab_padded > 0 ? gpt->vocab_padded : ptdp_gpt_pad_vocab(gpt->vocab, gpt->vocab_multiple, tp);
    const double tiles = (double)ptdp_attention_tiled_scratch();   /* two tiles, 2 x 64 x 64 */
    const double S = R * (3 * C + c->ffn / tp + 4 * C / tp) + (tiled ? tiles : 2 * T * T);
    const double A = tiled ? ptdp_gpt_block_act_elements_tiled(c, batch, tp, 1, false) + tiles
                           : ptdp_gpt_block_act_elements(c, batch, tp, false) + (dropout ? T * T : 0);
    const double block = (L - 1) * X * b + (A + X + S) * r;
    const double tail = L * X * b + (X + C * R + (double)(vp / tp) * R + 2 * R + S) * r + 2 * R * 8;
    return 8 * R + (block > tail ? block : tail);
}

double ptdp_gpt_full_recompute_peak_bytes(const ptdp_model_config *c, int batch, int tp, bool bf16, bool dropout)
{
    return full_recompute_peak(c, batch, tp, bf16, dropout, false);
}

double ptdp_gpt_full_recompute_peak_bytes_tiled(const ptdp_model_config *c, int batch, int tp, bool bf16)
{
    return full_recompute_peak(c, batch, tp, bf16, false, true);
}

/* ---------------------------------------- a mixture of experts */

ptdp_moe_settings ptdp_gpt_moe_settings(const ptdp_model_config *c)
{
    const ptdp_gpt_settings *gpt = ptdp_gpt(c);
    return (ptdp_moe_settings){ .experts = gpt->moe_experts, .every = gpt->moe_every, .ffn = gpt->moe_ffn,
                                .top_k = gpt->moe_top_k, .capacity = gpt->moe_capacity,
                                .aux_loss = gpt->moe_aux_loss, .score = gpt->moe_score,
                                .route_scale = gpt->moe_route_scale, .bias_update = gpt->moe_bias_update,
                                .groups = gpt->moe_groups, .group_top_k = gpt->moe_group_top_k,
                                .z_loss = gpt->moe_z_loss, .dense_first = gpt->moe_dense_first,
                                .shared = gpt->moe_shared_experts };
}

bool ptdp_gpt_block_is_moe(const ptdp_model_config *c, int l)
{
    const ptdp_moe_settings s = ptdp_gpt_moe_settings(c);
    return ptdp_moe_block_is_moe(&s, l);
}

int ptdp_gpt_moe_ffn(const ptdp_model_config *c)
{
    const ptdp_moe_settings s = ptdp_gpt_moe_settings(c);
    return ptdp_moe_ffn(&s, c->ffn);
}
