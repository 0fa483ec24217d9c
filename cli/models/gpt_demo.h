/*
 * gpt_demo.h — `ptdp demo gpt` (gpt_demo.c), through the GPT's CLI table
 * (gpt_cli.c).
 */
#ifndef PTDP_CLI_GPT_DEMO_H
#define PTDP_CLI_GPT_DEMO_H

/* argv[0] is "gpt".  An exit status: 0, 1 if a run fails, 2 for bad flags. */
int ptdp_gpt_demo(int argc, char **argv);

#endif
