/*
 * gpt_moe_wall.h — `ptdp bench moe --wall`: one device's step in wall time,
 * the dense GPT beside the mixture of equal active FLOPs (gpt_moe_wall.c).
 */
#ifndef PTDP_CLI_GPT_MOE_WALL_H
#define PTDP_CLI_GPT_MOE_WALL_H

#include <stddef.h>

#include "ptdp/model.h"

typedef struct {
    int batch;         /* sequences a step                              */
    int warmup, timed; /* steps a run: untimed, then timed (median)     */
    int rounds;        /* dense and MoE runs, interleaved (median)      */
    double watchdog_s;
} ptdp_moe_wall_opts;

/* Both runs valid (ptdp_train_validate), why in msg if not. */
int ptdp_moe_wall_validate(const ptdp_model_config *dense, const ptdp_model_config *moe, const ptdp_moe_wall_opts *o,
                           char *msg, size_t len);

/* Run the rounds and print the table; an exit code. */
int ptdp_moe_wall(const ptdp_model_config *dense, const ptdp_model_config *moe, const ptdp_moe_wall_opts *o);

#endif
