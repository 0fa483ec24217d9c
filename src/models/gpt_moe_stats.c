/*
 * gpt_moe_stats.c — what a GPT's mixture-of-experts blocks did in a
 * training step (gpt_moe_stats.h): the counters every model with MoE
 * blocks publishes and fills (moe.h, parallel/moe_stats.c), for the
 * GPT's layout of them.
 *
 *   route() of block i, micro-batch u ──► u's tally (sv->moe_tally)
 *   after u's forward (pp.c: the table's count) ──► the step's counters,
 *        with the stage's balance loss sv->aux_sum into "aux_loss"
 *   after the optimizer step (the table's after_step) ──► --moe-bias-update:
 *        each block's choices of the step move its expert bias
 *        (parallel/moe_bias.c)
 */
#include "ptdp/gpt_moe_stats.h"

#include "models/gpt_pass.h"
#include "models/gpt_table.h"
#include "parallel/moe_impl.h"
#include "ptdp/error.h"

int ptdp_gpt_moe_blocks(const ptdp_model_config *c)
{
    const ptdp_moe_settings s = ptdp_gpt_moe_settings(c);
    return ptdp_moe_blocks(&s, c->layers);
}

int ptdp_gpt_moe_layer(const ptdp_model_config *c, int j)
{
    const ptdp_moe_settings s = ptdp_gpt_moe_settings(c);
    return ptdp_moe_layer(&s, c->layers, j);
}

int ptdp_gpt_moe_publish(const ptdp_model_config *c, ptdp_counters *reg)
{
    const ptdp_moe_settings s = ptdp_gpt_moe_settings(c);
    return ptdp_moe_publish(&s, c->layers, reg);
}

void ptdp_gpt_moe_count(const ptdp_model *m, const ptdp_acts *acts, ptdp_counts *counts)
{
    const ptdp_gpt_saved *sv = acts->saved;
    const ptdp_moe_settings s = ptdp_gpt_moe_settings(&m->cfg);
    if (sv != NULL)
        ptdp_moe_count(&s, m->layer_begin, m->layer_end, sv->moe_tally, sv->aux_sum, counts);
}

/* --moe-bias-update: the stage's MoE blocks' expert biases, one step
 * toward an even load from the step's choices (moe_bias.c). */
int ptdp_gpt_moe_after_step(ptdp_device *dev, ptdp_model *m)
{
    const ptdp_moe_settings s = ptdp_gpt_moe_settings(&m->cfg);
    ptdp_gpt *g = m->impl;
    const int L = m->layer_end - m->layer_begin;
    if (s.bias_update <= 0 || g == NULL || L <= 0)
        return PTDP_OK;
    ptdp_real *bias[L];
    double *choices[L];
    int n = 0;
    for (int i = 0; i < L; i++)
        if (g->blocks[i].choices != NULL && g->blocks[i].expert_bias != NULL) {
            bias[n] = g->blocks[i].expert_bias->w.data;
            choices[n++] = g->blocks[i].choices;
        }
    return ptdp_moe_bias_step(dev, m->mesh, s.bias_update, s.experts, n, bias, choices);
}
