/*
 * gpt_moe_stats.h — what a GPT's mixture-of-experts blocks did in a
 * training step: the tokens each expert took, the choices dropped, and the
 * balance loss, per MoE block (gpt_moe_stats.c).
 *
 * The numbers are the model's step statistics (model.h: stats_len and
 * stats_add), one row per MoE block in layer order, E + 2 numbers each:
 *
 *              load[0]  load[1] … load[E-1]   dropped   aux
 *   block l0   kept choices per expert         choices   sum over the
 *   block l1   (tokens it ran, k per token      beyond    step's sequences
 *   …           when nothing is dropped)        capacity  of alpha sum f_i P_i
 *
 * summed over the step's micro-batches and over every device that routes
 * tokens (dp x cp, each stage its own blocks; tp rank 0 alone, since every
 * TP rank routes the same tokens).  So for B sequences of T tokens, top-k:
 *
 *   sum_e load[e] + dropped = k B T,   load[e] <= ceil(c k T / E) B,
 *   sum over blocks of aux / B = the step's aux_loss.
 */
#ifndef PTDP_GPT_MOE_STATS_H
#define PTDP_GPT_MOE_STATS_H

#include "ptdp/model.h"

/* One MoE block's row of a step's statistics. */
typedef struct {
    int layer;              /* the block's global index l                   */
    const double *load;     /* [E]: kept choices per expert                 */
    double dropped;         /* choices beyond an expert's capacity          */
    double aux;             /* the balance loss summed over the sequences   */
} ptdp_gpt_moe_block_stats;

/* How many MoE blocks the configuration has. */
int  ptdp_gpt_moe_blocks(const ptdp_model_config *c);
/* The statistics' length: MoE blocks x (E + 2); 0 for a dense GPT. */
int  ptdp_gpt_moe_stats_len(const ptdp_model_config *c);
/* Row j (0 .. ptdp_gpt_moe_blocks - 1) of a step's statistics. */
ptdp_gpt_moe_block_stats ptdp_gpt_moe_stats_row(const ptdp_model_config *c, const double *stats, int j);

#endif
