/*
 * gpt_moe_bench.h — `ptdp bench moe` for the GPT (gpt_moe_bench.c): a
 * dense GPT beside a mixture of experts of the same active size, at
 * expert parallelism 1, 2 and 4, on the virtual clock: the step's time
 * and the bytes each device sends in its dp, edp and ep groups, the EP
 * all-to-alls beside the uniform-routing estimate.
 */
#ifndef PTDP_CLI_GPT_MOE_BENCH_H
#define PTDP_CLI_GPT_MOE_BENCH_H

/* argv[0] is "moe".  An exit status: 0, 1 if a run fails or a count that
 * has an exact formula (parameters, all-to-alls, the counts' bytes)
 * differs from it, 2 for bad flags. */
int ptdp_gpt_bench_moe(int argc, char **argv);

#endif
