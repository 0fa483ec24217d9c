/*
 * gpt_moe_stats.h — what a GPT's mixture-of-experts blocks did in a
 * training step: the balance loss, the tokens each expert took and the
 * choices dropped, per MoE block (gpt_moe_stats.c).
 *
 * A GPT with MoE blocks publishes them in the run's counters, as every
 * model with a mixture of experts does: moe.h has the names ("aux_loss",
 * "moe_load", "moe_dropped", "moe_aux_loss"), one row per MoE block j in
 * layer order, and the identities they obey.
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
