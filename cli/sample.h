/*
 * sample.h — text from a model's parameters, for `ptdp sample` (sample.c)
 * and the demos: any model whose table says how to sample it (model.h's
 * ptdp_model_sampling).
 */
#ifndef PTDP_CLI_SAMPLE_H
#define PTDP_CLI_SAMPLE_H

#include "ptdp/model.h"
#include "ptdp/state.h"

typedef struct {
    const char *load;       /* ptdp sample's --load (not read by ptdp_sample_print) */
    const char *prompt;     /* what to continue */
    int tokens, top_k, seed;
    double temperature;     /* 0: greedy */
    bool held_out;          /* instead: score the held-out sums (gpt_data.c) */
} ptdp_sample_options;

/* Build cfg's model (one that can be sampled, ptdp_model_can_sample) on one
 * device with the whole tensors of state, extend the prompt by o->tokens
 * tokens and print prompt and continuation on stdout (bytes that do not
 * print as \xHH); with o->held_out, print instead how many held-out sums it
 * answers exactly (ptdp_sample_score_sums).  cmd names the command in
 * messages.  Returns an exit code: 0, 1 (failed) or 2 (a prompt byte the
 * model does not know). */
int ptdp_sample_print(const char *cmd, const ptdp_model_config *cfg, const ptdp_state *state,
                      const ptdp_sample_options *o);

#endif
