/*
 * gpt_sample.c — the GPT's own names for generation, kept for whoever
 * calls them: the model-neutral sampler (sample.c) on a GPT, which its
 * table's part for sampling describes (gpt_model.c, model.h).
 *
 *   ptdp_gpt_generate    ──►  ptdp_sample_generate     a GPT whole on
 *   ptdp_gpt_score_sums  ──►  ptdp_sample_score_sums   this device
 */
#include "ptdp/gpt.h"

#include "ptdp/error.h"

/* The GPT's names: its model, whole on this device, or the old refusal. */
static int whole_gpt(ptdp_device *dev, ptdp_model *m)
{
    if (ptdp_gpt_of(m) == NULL || !m->first_stage || !m->last_stage || m->mesh->tp != 1)
        return ptdp_fail(dev, PTDP_EINVAL, "generation runs a whole GPT on one device");
    return PTDP_OK;
}

int ptdp_gpt_generate(ptdp_device *dev, ptdp_model *m, int64_t *ids, int len, int n,
                      const ptdp_gpt_sample_opts *o)
{
    int rc = whole_gpt(dev, m);
    return rc != 0 ? rc : ptdp_sample_generate(dev, m, ids, len, n, o);
}

int ptdp_gpt_score_sums(ptdp_device *dev, ptdp_model *m, int *right, int *asked)
{
    *right = *asked = 0;
    if (ptdp_gpt(&m->cfg)->vocab <= '=')
        return ptdp_fail(dev, PTDP_EINVAL, "the model does not know the tokens of a sum (digits, + and =)");
    int rc = whole_gpt(dev, m);
    return rc != 0 ? rc : ptdp_sample_score_sums(dev, m, right, asked);
}
