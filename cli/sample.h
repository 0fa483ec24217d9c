/*
 * sample.h — text from a GPT's parameters, for `ptdp sample` and the demo.
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
} ptdp_sample_options;

/* Build cfg's GPT on one device with the whole tensors of state, extend the
 * prompt by o->tokens tokens and print prompt and continuation on stdout
 * (bytes that do not print as \xHH).  cmd names the command in messages.
 * Returns an exit code: 0, 1 (failed) or 2 (a prompt byte the model does
 * not know). */
int ptdp_sample_print(const char *cmd, const ptdp_model_config *cfg, const ptdp_state *state,
                      const ptdp_sample_options *o);

#endif
