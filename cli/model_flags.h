/*
 * model_flags.h — the model's flags, read one way for every command, and
 * the model's side of the command line.
 *
 *     --model NAME    a registered model (models.h): mlp|gpt|…
 *     every model     --hidden N  --ffn N  --layers N
 *     its own         each model's table (cli/models/): the MLP's --d-in
 *                     --classes, the GPT's --heads --seq-len --vocab
 *                     --vocab-multiple --data, …
 *
 *   ptdp_model_flags ──► which model (--model, or the command's default)
 *        │                 its flags (ptdp_model_cli.flags) into cfg
 *        ▼                 its defaults for what was not typed
 *   ptdp_model_cli   ──► finish (its data, cross-checks), help, and what
 *   (one per model,        `ptdp train` prints and reports about it
 *    cli/models/)
 *
 * `ptdp train` and `ptdp bench train` both describe the model with these
 * flags, and both fill a ptdp_model_config (ptdp/model.h) from them.  A
 * command puts its defaults in the state, says which limits apply, and
 * offers every argument to the model flags inside its own loop:
 *
 *     ptdp_model_flags mf;
 *     ptdp_model_flags_init(&mf, &my_defaults);
 *     while (ptdp_args_next(&a)) {
 *         …
 *         else if (ptdp_model_flag_is(&a)) rc = ptdp_model_flag_read(&a, PTDP_FLAGS_RUN, &mf);
 *         …
 *     }
 *     if (ptdp_model_flags_finish("train", &mf) != 0) return PTDP_EXIT_USAGE;
 *     cfg.model = mf.cfg;
 *
 * finish applies the chosen model's defaults to what was not typed, refuses
 * another model's flags ("--heads is a flag of --model gpt"), and runs the
 * model's own finish (the GPT reads --data or makes the built-in corpus and
 * checks --vocab against it).  A bad value reads the same in every command
 * (args.h):
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
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "args.h"
#include "ptdp/launch.h"
#include "ptdp/models.h"
#include "ptdp/train.h"

/* Which largest values apply: `ptdp train` takes what an arena can hold,
 * `ptdp bench …` keeps to what a benchmark run can finish. */
typedef enum { PTDP_FLAGS_RUN = 0, PTDP_FLAGS_BENCH, PTDP_FLAGS_TIERS } ptdp_model_flag_tier;

/* One flag of a model: --name N into the int at `field` of
 * ptdp_model_config (with `real`, --name X into the double there, between
 * smallest and largest[tier]), or (field PTDP_FLAG_PATH) a path kept in
 * the flags' `data`. */
#define PTDP_FLAG_PATH ((size_t)-1)
typedef struct {
    const char *name;                  /* "--heads"                         */
    size_t field;                      /* offsetof(ptdp_model_config, heads) */
    int smallest;
    int largest[PTDP_FLAGS_TIERS];
    bool real;                         /* a double, not an int              */
} ptdp_model_flag;

/* A flag whose value is a word (smallest PTDP_FLAG_WORDS): --name WORD,
 * the word's index among ptdp_model_flag_words(name) into the int. */
#define PTDP_FLAG_WORDS (-2147483647 - 1)
const char *const *ptdp_model_flag_words(const char *name, int *n);

#define PTDP_MODEL_FLAGS_GIVEN_MAX 32

typedef struct ptdp_model_flags {
    ptdp_model_config cfg;       /* the model as typed, then completed      */
    ptdp_model_config defaults[PTDP_MAX_MODELS];   /* per registered model:
                                    the command's for its own model, the
                                    model's (ptdp_model_cli.defaults) else */
    const char *given[PTDP_MODEL_FLAGS_GIVEN_MAX];  /* the flags typed     */
    int ngiven;
    double given_value[PTDP_MODEL_FLAGS_GIVEN_MAX]; /* ... and their values:
                                    two models may share a flag's name
                                    (--heads) with their own places for it  */
    const char *data;            /* a path flag's value (the GPT's --data)  */
    unsigned char *corpus;       /* the model's data (malloc'd), or NULL    */
    size_t corpus_len;
    uint64_t seed;               /* for built-in data                       */
} ptdp_model_flags;

/* A figure a model draws of its own insides, for `ptdp figures` (the same
 * as a line of cli/figures/figures.c's table): NAME.svg, --only NAME. */
typedef struct {
    const char *name;
    const char *summary;
    int (*draw)(const char *path, char *msg, size_t msglen);   /* 0 or PTDP_E…, msg */
} ptdp_model_figure;

/* A model's side of the command line: its flags and defaults, and what
 * `ptdp train` prints and reports about it.  Every function may be NULL. */
typedef struct {
    const ptdp_model_ops *ops;         /* the model it speaks for           */
    const ptdp_model_flag *flags;      /* its own flags                     */
    int nflags;
    /* Its defaults when it is not the command's default model. */
    ptdp_model_config (*defaults)(void);
    /* After the flags: its data and cross-checks.  0 or PTDP_EXIT_USAGE. */
    int  (*finish)(const char *cmd, ptdp_model_flags *f);
    /* The run's seed is settled: remake seed-dependent data, and hand the
     * data to `into` (the same model's config, filled from a checkpoint,
     * which holds no data). */
    int  (*reseed)(const char *cmd, ptdp_model_flags *f, uint64_t seed, ptdp_model_config *into);
    /* Its help lines (d: the command's defaults for the default model). */
    void (*help)(FILE *out, const ptdp_model_config *d);
    /* `ptdp train` once tp is known (and a checkpoint to load, or NULL):
     * fix what depends on them; f: the flags as typed.  0, or
     * PTDP_EXIT_FAIL (the checkpoint unreadable) or PTDP_EXIT_USAGE (a typed
     * flag contradicts it) after printing. */
    int  (*prepare)(ptdp_train_config *c, const struct ptdp_model_flags *f, const char *load);
    /* The "model …" line of train's header (mb: a micro-batch's samples). */
    void (*describe)(const ptdp_train_config *c, int mb, const char *data_name);
    /* --report's model keys after "name": `, "d_in": 6, …`. */
    void (*report_keys)(FILE *f, const ptdp_train_config *c);
    /* Optional (NULL: none): with expert parallelism (--ep), the bytes a
     * device's EP all-to-alls would send per step if the router spread
     * every token's k choices evenly over the E experts — the uniform
     * estimate printed beside the measured loads' formula (ep.h). */
    double (*ep_uniform_bytes)(const ptdp_train_config *c);
    /* Lines after the run (what a micro-batch keeps, …). */
    void (*summary)(const ptdp_train_config *c, const ptdp_launch_result *lr);
    /* Optional (NULL: none): what the run's counters the model published
     * (model.h's publish, read by name from res: counters.h) come to over
     * the run — --report's keys of the run after the first and last step
     * of each number a step ("last_aux_loss"), and the lines printed after
     * the summary.  (--log writes every counter of a step itself.) */
    void (*report_stats)(FILE *f, const ptdp_train_config *c, const ptdp_train_result *res);
    void (*print_stats)(const ptdp_train_config *c, const ptdp_train_result *res);
    /* --dump-data: x holds tokens (int64) or features, x_cols and y_cols
     * per sample (y_cols 0: one label, y is [steps, B]). */
    void (*samples)(const ptdp_model_config *m, bool *tokens, int *x_cols, int *y_cols);
    /* `ptdp demo NAME` (argv[0] is NAME), and its line in `ptdp demo`'s
     * closing words: what it shows. */
    int  (*demo)(int argc, char **argv);
    const char *demo_summary;

    /* ---- `ptdp plan` (cli/plan_cmd.c, plan_print.c), for a model with a
     * planning table (model_plan.h); all NULL / 0 for the others. */
    /* Its own flags with the planner's largest values (largest[0]). */
    const ptdp_model_flag *plan_flags;
    int nplan_flags;
    /* Its help lines for `ptdp plan --help`. */
    void (*plan_help)(FILE *out);
    /* Its parameters, the whole model (the table's "GPT of 1.01T …"). */
    double (*plan_parameters)(const ptdp_model_config *m);
    /* The table's first line: the model, its sizes, the batch. */
    void (*plan_header)(FILE *f, const ptdp_model_config *m, const char *params, long long batch);
    /* Its flags on the `ptdp train` line that runs a layout
     * (" --model … --layers …"). */
    void (*plan_train_flags)(FILE *f, const ptdp_model_config *m);
    /* --explain's model FLOPs a step, term by term (the count's formula
     * with the numbers), then the rate per GPU. */
    void (*plan_flops)(FILE *f, const ptdp_model_config *m, long long batch, double model_flops,
                       double tflops_per_gpu);
    /* Optional (NULL: --ffn defaults to 4 x --hidden): once its flags are
     * read (given: the flags typed), what they leave to derive and the
     * checks between them, as `ptdp train`'s finish makes them.  0, or
     * PTDP_EXIT_USAGE after printing what is wrong. */
    int  (*plan_finish)(ptdp_model_config *m, const char *const *given, int ngiven);

    /* ---- `ptdp bench train` and `ptdp bench zero` (cli/bench/) */
    /* Its sizes for `ptdp bench train` (PyTorch's in bench/train.sh) and
     * that command's batch; NULL: its defaults and batch 64. */
    void (*bench_defaults)(ptdp_model_config *m, int *batch);
    /* The model in a benchmark's first line: "mlp, d_in 1024, …, 10 classes". */
    void (*bench_describe)(FILE *f, const ptdp_model_config *m);
    /* `bench train --json`'s keys of its own after "model", each followed
     * by ", " (`"seq_len": 256, …`); a step of `batch` samples took step_s. */
    void (*bench_json_keys)(FILE *f, const ptdp_model_config *m, int batch, double step_s);
    /* `bench train`'s targets: forward + backward over its GEMMs alone, and
     * the step time over PyTorch's (0: 1.2 and 0.8). */
    double bench_gemm_target, bench_torch_target;
    /* `ptdp bench activations` (argv[0] "activations"): the activation
     * memory a block keeps, formula beside arena, against Korthikanti et
     * al.'s table; NULL for a model without attention to tabulate. */
    int  (*bench_activations)(int argc, char **argv);
    /* `ptdp bench moe` (argv[0] "moe"): the model dense beside a mixture
     * of experts of the same active parameters, at expert parallelism 1, 2
     * and 4 on the virtual clock; NULL for a model without experts. */
    int  (*bench_moe)(int argc, char **argv);

    /* ---- `ptdp figures` (cli/figures/) */
    /* Its default config on its built-in data (*data malloc'd, to free after
     * the runs), for the figures that train a model of sequences under ZeRO.
     * 0 or PTDP_ENOMEM with the reason in msg. */
    int  (*figure_model)(ptdp_model_config *cfg, unsigned char **data, char *msg, size_t msglen);
    /* The figures of its own insides, listed with the others. */
    const ptdp_model_figure *figures;
    int nfigures;
} ptdp_model_cli;

/* The CLI side of cfg's model (cli/models/models_cli.c), or one with no
 * flags and no hooks for a model that has none. */
const ptdp_model_cli *ptdp_model_cli_of(const ptdp_model_config *cfg);
/* The same for a registered model's table of functions. */
const ptdp_model_cli *ptdp_model_cli_for(const ptdp_model_ops *ops);

/* Set cfg's own flag `name` ("--heads") to value through its model's CLI
 * table, for a command that builds a config of the model it was given
 * (bench, figures) without knowing the model's fields.  0, or PTDP_EINVAL
 * if the model has no such flag. */
int ptdp_model_cli_set(ptdp_model_config *cfg, const char *name, int value);
/* The value of cfg's own flag `name`, or 0 if its model has none. */
int ptdp_model_cli_get(const ptdp_model_config *cfg, const char *name);

/* The model as a noun for a sentence: its title without the article
 * ("the MLP" -> "MLP"), or its name if it has no title; "?" for NULL. */
const char *ptdp_model_cli_noun(const ptdp_model_ops *ops);

/* Start with the command's defaults for its default model (ffn 0: 4 x
 * hidden); the other models start from their own. */
void ptdp_model_flags_init(ptdp_model_flags *f, const ptdp_model_config *defaults);

/* The defaults of one model in f, for a command to change. */
ptdp_model_config *ptdp_model_flags_defaults(ptdp_model_flags *f, const ptdp_model_ops *ops);

/* Whether `name` ("--vocab") was typed. */
bool ptdp_model_flags_given(const ptdp_model_flags *f, const char *name);

/* True if the current argument is one of the model's flags. */
bool ptdp_model_flag_is(const ptdp_args *a);

/* Read the current model flag's value: 0, or PTDP_EXIT_USAGE after printing
 * what is wrong (args.h). */
int ptdp_model_flag_read(ptdp_args *a, ptdp_model_flag_tier tier, ptdp_model_flags *f);

/* After the flags (f->seed set to the run's seed first): the chosen
 * model's defaults, its data, the cross-checks.  0 or PTDP_EXIT_USAGE. */
int ptdp_model_flags_finish(const char *cmd, ptdp_model_flags *f);

/* The run's seed is settled (a resumed run takes its checkpoint's): make
 * seed-dependent data again from it, so a resumed run reads the same text,
 * and give the data to `into`, the config the checkpoint filled (nothing,
 * if it names another model).  0 or PTDP_EXIT_USAGE. */
int ptdp_model_flags_reseed(const char *cmd, ptdp_model_flags *f, uint64_t seed, ptdp_model_config *into);

/* Free the model's data (after the run). */
void ptdp_model_flags_free(ptdp_model_flags *f);

/* The help lines of the model's flags, with the command's defaults. */
void ptdp_model_flags_help(FILE *out, const ptdp_model_config *defaults);

#endif
