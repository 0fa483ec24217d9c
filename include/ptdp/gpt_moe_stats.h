/*
 * gpt_moe_stats.h — what a GPT's mixture-of-experts blocks did in a
 * training step: the balance loss, the tokens each expert took and the
 * choices dropped, per MoE block (gpt_moe_stats.c).
 *
 * A GPT with MoE blocks publishes them in the run's counters (counters.h,
 * model.h's publish and count), numbers of each step:
 *
 *   "aux_loss"       a number   the balance losses of all its blocks
 *   "moe_load"       n x E      kept choices per expert (tokens it ran,
 *                               k per token when nothing is dropped)
 *   "moe_dropped"    n          choices beyond an expert's capacity
 *   "moe_aux_loss"   n          each block's balance loss
 *
 * one row per MoE block j = 0 .. n-1 in layer order (ptdp_gpt_moe_layer),
 * summed over the step's micro-batches and over every device that routes
 * tokens (dp x cp, each stage its own blocks; tp rank 0 alone, since
 * every TP rank routes the same tokens).  The two losses read as means
 * over the global batch's sequences (PTDP_COUNT_PER_SAMPLE), as the loss
 * does.  So for B sequences of T tokens, top-k:
 *
 *   sum_e load[e] + dropped = k B T,   load[e] <= ceil(c k T / E) B,
 *   sum over blocks of moe_aux_loss = the step's aux_loss.
 */
#ifndef PTDP_GPT_MOE_STATS_H
#define PTDP_GPT_MOE_STATS_H

#include "ptdp/model.h"

/* How many MoE blocks the configuration has (0: a dense GPT, which
 * publishes nothing). */
int  ptdp_gpt_moe_blocks(const ptdp_model_config *c);
/* The global layer l of MoE block j (0 .. ptdp_gpt_moe_blocks - 1), or -1. */
int  ptdp_gpt_moe_layer(const ptdp_model_config *c, int j);

#endif
