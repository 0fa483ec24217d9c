/*
 * gpt_text.h — the GPT's data on the command line, for every model of
 * tokens that reads its text as the GPT does (gpt_cli.c):
 *
 *   --data FILE   its bytes, one token per byte (V = 256)
 *   (none)        the built-in lines of sums, made from the run's seed,
 *                 each sample starting on a line
 */
#ifndef PTDP_CLI_GPT_TEXT_H
#define PTDP_CLI_GPT_TEXT_H

#include "../model_flags.h"

/* Read the text into f->corpus: *vocab (typed, or: 256 with --data, else
 * the larger of own_vocab and what the sums use) checked against its
 * tokens, seq_len against its length, *line set (the sums' line, or 0).
 * 0 or PTDP_EXIT_USAGE after printing. */
int ptdp_gpt_cli_text(const char *cmd, ptdp_model_flags *f, int *vocab, int own_vocab, int seq_len, int *line);

/* The run's seed is settled: the built-in text made again from it (a
 * given --data stays).  0 or PTDP_EXIT_USAGE. */
int ptdp_gpt_cli_text_reseed(const char *cmd, ptdp_model_flags *f, uint64_t seed);

#endif
