/*
 * model_flags.h — the model's flags, read one way for every command.
 *
 *     --d-in N  --hidden N  --ffn N  --layers N  --classes N
 *
 * `ptdp train` and `ptdp bench train` both describe the model with these
 * flags, and both fill a ptdp_model_config (ptdp/model.h) from them.  A
 * command puts its defaults in the config, says how large each value may
 * be, and offers every argument to the model flags inside its own loop:
 *
 *     static const ptdp_model_flag_limits max = { 1 << 20, 1 << 20, 1 << 22, 4096, 1 << 22 };
 *     ptdp_model_config model = { .d_in = 32, .hidden = 64, .ffn = 0, .layers = 8, .classes = 16 };
 *     while (ptdp_args_next(&a)) {
 *         …
 *         else if (ptdp_model_flag_is(&a)) rc = ptdp_model_flag_read(&a, &max, &model);
 *         …
 *     }
 *     ptdp_model_flags_finish(&model);     // ffn still 0: 4 x hidden
 *
 * so a bad value reads the same in every command (args.h):
 *
 *     ptdp train: --hidden 0: must be between 1 and 1048576
 *
 * A default ffn of 0 means "4 x hidden, whatever --hidden says" (the
 * transformer's usual d_ff = 4 d_model); a command that wants a fixed
 * default writes the number instead.
 */
#ifndef PTDP_CLI_MODEL_FLAGS_H
#define PTDP_CLI_MODEL_FLAGS_H

#include <stdbool.h>
#include <stdio.h>

#include "args.h"
#include "ptdp/model.h"

/* The largest value each flag accepts (the smallest is 1, and 2 classes). */
typedef struct {
    int d_in, hidden, ffn, layers, classes;
} ptdp_model_flag_limits;

/* True if the current argument is one of the model's flags. */
bool ptdp_model_flag_is(const ptdp_args *a);

/* Read the current model flag's value into its field of *m: 0, or
 * PTDP_EXIT_USAGE after printing what is wrong (args.h). */
int ptdp_model_flag_read(ptdp_args *a, const ptdp_model_flag_limits *max, ptdp_model_config *m);

/* After the flags: an ffn left at 0 becomes 4 x hidden. */
void ptdp_model_flags_finish(ptdp_model_config *m);

/* The help line of the model's flags, with the command's defaults. */
void ptdp_model_flags_help(FILE *f, const ptdp_model_config *defaults);

#endif
