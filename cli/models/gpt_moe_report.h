/*
 * gpt_moe_report.h — what `ptdp train` writes of a GPT's experts per run
 * (gpt_moe_report.c), from the counters the model published: the
 * model_flags.h hooks report_stats and print_stats of the GPT.  (Each
 * step's keys --log writes itself, as it does every counter of a step.)
 */
#ifndef PTDP_CLI_GPT_MOE_REPORT_H
#define PTDP_CLI_GPT_MOE_REPORT_H

#include <stdio.h>

#include "ptdp/train.h"

void ptdp_gpt_moe_report_keys(FILE *f, const ptdp_train_config *c, const ptdp_train_result *res);
void ptdp_gpt_moe_print(const ptdp_train_config *c, const ptdp_train_result *res);

#endif
