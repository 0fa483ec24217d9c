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
 */
#include "ptdp/gpt.h"

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
