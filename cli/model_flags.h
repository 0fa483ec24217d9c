/*
 * model_flags.h — the model's flags, read one way for every command.
 *
 *     --model mlp|gpt
 *     both        --hidden N  --ffn N  --layers N
 *     the MLP     --d-in N  --classes N
 *     the GPT     --heads N  --seq-len N  --vocab N  --vocab-multiple N  --data FILE
 *
 * `ptdp train` and `ptdp bench train` both describe the model with these
 * flags, and both fill a ptdp_model_config (ptdp/model.h) from them.  A
 * command puts its defaults in the state, says how large each value may
 * be, and offers every argument to the model flags inside its own loop:
 *
 *     ptdp_model_flags mf;
 *     ptdp_model_flags_init(&mf, &my_mlp_defaults);
 *     while (ptdp_args_next(&a)) {
 *         …
 *         else if (ptdp_model_flag_is(&a)) rc = ptdp_model_flag_read(&a, &max, &mf);
 *         …
 *     }
 *     if (ptdp_model_flags_finish("train", &mf) != 0) return PTDP_EXIT_USAGE;
 *     cfg.model = mf.cfg;
 *
 * finish applies the chosen model's defaults to what was not typed, refuses
 * the other model's flags ("--heads is a flag of --model gpt"), reads
 * --data (a regular, non-empty file; its bytes are the tokens, V = 256)
 * or makes the built-in corpus, and checks --vocab against the data.  A
 * bad value reads the same in every command (args.h):
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
#include <stdint.h>
#include <stdio.h>

#include "args.h"
#include "ptdp/model.h"

/* The largest value each flag accepts (the smallest is 1, and 2 classes). */
typedef struct {
    int d_in, hidden, ffn, layers, classes;
    int heads, seq_len, vocab;
} ptdp_model_flag_limits;

typedef struct {
    ptdp_model_config cfg;       /* the model as typed, then completed      */
    ptdp_model_config mlp;       /* the command's MLP defaults              */
    ptdp_model_config gpt;       /* its GPT defaults (ptdp_gpt_default_config
                                    unless the command sets others)        */
    unsigned given;              /* which flags were typed (one bit each)   */
    const char *data;            /* --data FILE, or NULL                    */
    unsigned char *corpus;       /* the GPT's text (malloc'd), or NULL      */
    size_t corpus_len;
    uint64_t seed;               /* for the built-in corpus                 */
} ptdp_model_flags;

/* Start with the command's MLP defaults (ffn 0: 4 x hidden). */
void ptdp_model_flags_init(ptdp_model_flags *f, const ptdp_model_config *mlp_defaults);

/* True if the current argument is one of the model's flags. */
bool ptdp_model_flag_is(const ptdp_args *a);

/* Read the current model flag's value: 0, or PTDP_EXIT_USAGE after printing
 * what is wrong (args.h). */
int ptdp_model_flag_read(ptdp_args *a, const ptdp_model_flag_limits *max, ptdp_model_flags *f);

/* After the flags (f->seed set to the run's seed first): the chosen
 * model's defaults, its data, the cross-checks.  0 or PTDP_EXIT_USAGE. */
int ptdp_model_flags_finish(const char *cmd, ptdp_model_flags *f);

/* The run's seed is settled (a resumed run takes its checkpoint's): make
 * the built-in corpus again from it, so a resumed run reads the same text.
 * 0 or PTDP_EXIT_USAGE. */
int ptdp_model_flags_reseed(const char *cmd, ptdp_model_flags *f, uint64_t seed);

/* The data's largest token + 1: the smallest --vocab the data allows. */
int ptdp_model_flags_min_vocab(const ptdp_model_flags *f);

/* Free the corpus (after the run). */
void ptdp_model_flags_free(ptdp_model_flags *f);

/* The help lines of the model's flags, with the command's defaults. */
void ptdp_model_flags_help(FILE *out, const ptdp_model_config *mlp_defaults);

#endif
