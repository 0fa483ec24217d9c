/*
 * gpt_activations.h — `ptdp bench activations` for the GPT
 * (gpt_activations.c): Korthikanti et al.'s table 2 of activation memory
 * per transformer block, ptdp's formula beside the arena's measurement.
 */
#ifndef PTDP_CLI_GPT_ACTIVATIONS_H
#define PTDP_CLI_GPT_ACTIVATIONS_H

/* argv[0] is "activations".  An exit status: 0, 1 if a measurement differs
 * from its formula (or a run fails), 2 for bad flags. */
int ptdp_gpt_bench_activations(int argc, char **argv);

#endif
