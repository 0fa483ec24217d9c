/*
 * bench_fp8.c — `ptdp bench fp8`: what FP8 costs in quality, measured.
 *
 * One model, one seed, one stream of batches, trained for the same steps
 * in every precision the build has: the build's float (the reference),
 * bf16 (mixed precision, the float build only) and each FP8 recipe of
 * fp8_quant.h (tensorwise, delayed, blockwise, mxfp8: every linear layer's
 * products from quantized operands, fp8_linear.h).  Each run starts from
 * the same parameters and reads the same batches, so the loss curves differ
 * only by what the precision rounds:
 *
 *     gap_p(s)  = loss_p(s) − loss_float(s)          at step s
 *     rel_p(s)  = gap_p(s) / loss_float(s)
 *     tail gap  = mean of gap_p(s) over the last tenth of the steps
 *                 (one step's loss is one batch's: the mean is steadier)
 *
 *   loss │╲                      float ────   bf16 ─ ─   FP8 ·····
 *        │ ╲___
 *        │     ╲_______             the question is not "is FP8 worse"
 *        │          ─────____       but "by more than bf16 is?": bf16's
 *        └──────────────────── s    own gap is the yardstick
 *
 * and, when the model trains on the built-in sums (no --data), what it
 * learnt: the held-out sums answered exactly (`ptdp sample --held-out`,
 * ptdp_sample_score_sums), asked in float from the run's master weights —
 * the parameters FP8 training keeps.  Beside each run its wall time: FP8
 * is emulated here (each operand cast bit by bit), so it is slower than
 * float, where an FP8 tensor core is faster; --repeat R keeps the median
 * of R runs, and checks that the R runs gave the same losses bit for bit.
 *
 * The defaults are `ptdp demo gpt`'s GPT (2 blocks, C 64, T 32, AdamW lr
 * 3e-3, the first registered model that can be sampled); --layers 4 --data
 * FILE --lr 1e-3 makes it a 4-layer GPT on a text (at 3e-3 that one's float
 * and double runs already part: docs/benchmarks.md).  The figure
 * fp8_loss_curves (cli/figures/figure_fp8.c) draws the first 60 steps of
 * the default runs (ptdp_fp8_bench_config, ptdp_fp8_bench_train).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../args.h"
#include "../model_flags.h"
#include "bench.h"
#include "ptdp/error.h"
#include "ptdp/json.h"
#include "ptdp/launch.h"
#include "ptdp/mesh.h"
#include "ptdp/models.h"
#include "ptdp/sample.h"
#include "ptdp/state.h"
#include "ptdp/train.h"

/* `ptdp demo gpt`'s learning rate (cli/models/gpt_demo.c): the default
 * GPT learns the sums at it within about a thousand steps. */
#define FP8_BENCH_LR 3e-3
#define FP8_BENCH_STEPS 120
#define FP8_BENCH_QGZ_BLOCK 2048   /* qgZ's blocks: --zero-quant-block's default */
#define FP8_BENCH_MAX_STEPS 100000

/* ---- the precisions compared ---------------------------------------------- */

int ptdp_fp8_bench_precisions(ptdp_fp8_bench_precision *out, int max)
{
    int n = 0;
    if (n < max)
        out[n++] = (ptdp_fp8_bench_precision){ .name = PTDP_REAL_NAME };
#ifndef PTDP_DOUBLE
    if (n < max)   /* bf16 keeps float master weights: the float build only */
        out[n++] = (ptdp_fp8_bench_precision){ .name = "bf16", .bf16 = true };
#endif
    for (int i = 0; i < ptdp_fp8_recipe_count() && n < max; i++)
        out[n++] = (ptdp_fp8_bench_precision){ .name = ptdp_fp8_recipe_at(i)->name,
                                                .recipe = ptdp_fp8_recipe_at(i) };
    return n;
}

/* ---- one run: train, then ask the held-out sums ---------------------------- */

typedef struct {
    ptdp_model_config cfg;
    const ptdp_state *state;
    int right, asked;
} score_job;

/* One device builds the model whole, takes the run's parameters and asks
 * every held-out sum (as ptdp sample --held-out does). */
static int score_device(ptdp_device *dev, void *arg)
{
    score_job *j = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    int rc = ptdp_state_model_whole(dev, j->state, &j->cfg, &mesh, &m);
    if (rc != 0)
        return rc;
    rc = ptdp_sample_score_sums(dev, &m, &j->right, &j->asked);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return rc;
}

static int score(const ptdp_model_config *cfg, const ptdp_state *state, int *right, int *asked, char *msg,
                 size_t msglen)
{
    score_job j = { .cfg = *cfg, .state = state };
    ptdp_launch_result res;
    ptdp_launch_opts lo = { .result = &res };
    int rc = ptdp_launch(1, score_device, &j, &lo);
    if (rc != 0)
        snprintf(msg, msglen, "asking the held-out sums: %s", res.message);
    ptdp_launch_result_free(&res);
    *right = j.right;
    *asked = j.asked;
    return rc;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One training of cfg in precision p: its losses into out (the first time)
 * or checked equal to them (a repeat), its wall time into *wall.  A run
 * that diverges is a result, not a failure: out->completed says where. */
static int train_once(const ptdp_train_config *cfg, ptdp_fp8_bench_run *out, bool first, ptdp_state *final,
                      double *wall, char *msg, size_t msglen)
{
    ptdp_train_config c = *cfg;
    c.final_state = final;
    ptdp_train_result res;
    memset(&res, 0, sizeof res);
    char why[PTDP_MSG_MAX];
    ptdp_launch_opts o = { .watchdog_s = PTDP_DEFAULT_WATCHDOG_S };
    const double t0 = now_s();
    int rc = ptdp_train(&c, &o, NULL, NULL, &res, why, sizeof why);
    *wall = now_s() - t0;
    if (rc != 0 && rc != PTDP_ENONFINITE) {
        snprintf(msg, msglen, "%s: %s", out->prec.name, why);
        ptdp_train_result_free(&res);
        return rc;
    }
    if (first) {
        out->completed = res.completed;
        if (rc == PTDP_ENONFINITE)
            snprintf(out->diverged, sizeof out->diverged, "%s", why);
        for (int i = 0; i < res.completed; i++)
            out->loss[i] = res.log[i].loss;
    }
    bool same = res.completed == out->completed;
    for (int i = 0; same && i < res.completed; i++)
        same = res.log[i].loss == out->loss[i];
    ptdp_train_result_free(&res);
    if (!same) {
        snprintf(msg, msglen, "%s: a repeated run gave other losses: the runs are not deterministic",
                 out->prec.name);
        return PTDP_ECHECK;
    }
    return 0;
}

int ptdp_fp8_bench_train(const ptdp_train_config *base, const ptdp_fp8_bench_precision *p, bool held_out,
                         int repeat, ptdp_fp8_bench_run *out, char *msg, size_t msglen)
{
    memset(out, 0, sizeof *out);
    out->prec = *p;
    out->steps = base->steps;
    ptdp_train_config cfg = *base;
    cfg.bf16 = p->bf16;
    cfg.fp8 = (ptdp_fp8_settings){ .recipe = p->recipe };
    cfg.zero_qwz_emulate = p->qwz_ranks;   /* qwZ: one device quantizing as N ranks' ZeRO-3 would */
    cfg.zero_qwz_emulate_block = p->qwz_block;
    if (p->qgz_bits > 0) {   /* qgZ: one device summing each of N ranks' micro-batches as its all-to-alls would */
        cfg.micro_batches *= p->qgz_ranks;
        cfg.zero_qgz_emulate = cfg.zero_qgz_emulate_dp = p->qgz_ranks;
        cfg.zero_qgz_emulate_bits = p->qgz_bits;
        cfg.zero_qgz_node = p->qgz_node;
        cfg.zero_qgz_block = FP8_BENCH_QGZ_BLOCK;
    }
    int rc = ptdp_train_validate(&cfg, msg, msglen);
    if (rc != 0)
        return rc;
    out->loss = calloc((size_t)cfg.steps, sizeof *out->loss);
    double *walls = calloc((size_t)repeat, sizeof *walls);
    ptdp_state final;
    memset(&final, 0, sizeof final);
    if (out->loss == NULL || walls == NULL || ptdp_state_init(&final, &cfg.model, cfg.optimizer, false) != 0) {
        snprintf(msg, msglen, "%s: host out of memory", p->name);
        free(walls);
        ptdp_state_free(&final);
        return PTDP_ENOMEM;
    }
    for (int r = 0; r < repeat && rc == 0; r++)
        rc = train_once(&cfg, out, r == 0, &final, &walls[r], msg, msglen);
    qsort(walls, (size_t)repeat, sizeof *walls, cmp_double);
    out->wall_s = repeat % 2 ? walls[repeat / 2] : 0.5 * (walls[repeat / 2 - 1] + walls[repeat / 2]);
    free(walls);
    if (rc == 0 && held_out && out->completed == out->steps)
        rc = score(&cfg.model, &final, &out->right, &out->asked, msg, msglen);
    ptdp_state_free(&final);
    return rc;
}

void ptdp_fp8_bench_run_free(ptdp_fp8_bench_run *r)
{
    free(r->loss);
    r->loss = NULL;
}

/* ---- the gaps ---------------------------------------------------------------- */

ptdp_fp8_bench_gap ptdp_fp8_bench_gap_of(const ptdp_fp8_bench_run *r, const ptdp_fp8_bench_run *ref)
{
    ptdp_fp8_bench_gap g = { .final = NAN, .rel = NAN, .tail = NAN, .max_abs = NAN };
    const int n = r->steps;
    if (r->completed < n || ref->completed < n || n < 1)
        return g;
    g.final = r->loss[n - 1] - ref->loss[n - 1];
    g.rel = g.final / ref->loss[n - 1];
    const int tail = n / 10 > 0 ? n / 10 : 1;
    double sum = 0;
    for (int i = n - tail; i < n; i++)
        sum += r->loss[i] - ref->loss[i];
    g.tail = sum / tail;
    g.max_abs = 0;
    for (int i = 0; i < n; i++)
        g.max_abs = fmax(g.max_abs, fabs(r->loss[i] - ref->loss[i]));
    return g;
}

/* ---- the command --------------------------------------------------------------- */

typedef struct {
    ptdp_train_config cfg;
    ptdp_model_flags mf;
    int every, repeat;
    int recipes[8], nrecipes;     /* --recipes: indices of FP8 recipes run   */
    bool recipes_given, json;
    int qwz[4];                   /* --qwz: qwZ's blocks B run (none: 0 of them) */
    int nqwz, qwz_ranks;          /* ... and the ZeRO group N (--qwz-ranks) */
    char qwz_names[4][24];        /* "qwz-B" */
    int qgz[2];                   /* --qgz: qgZ's bits run, 4 and/or 8 (none: 0) */
    int nqgz, qgz_ranks, qgz_node;   /* ... its ZeRO group N and node k      */
    char qgz_names[2][24];        /* "qgz-int4" */
} fp8_bench_opts;

/* The first registered model that can be sampled: the transformer of
 * `ptdp demo` (its defaults, on its built-in sums), or NULL. */
static const ptdp_model_ops *default_model(void)
{
    for (int i = 0; i < ptdp_model_count(); i++)
        if (ptdp_model_can_sample(ptdp_model_at(i)))
            return ptdp_model_at(i);
    return NULL;
}

static void usage(void)
{
    const ptdp_model_ops *ops = default_model();
    char recipes[128] = "";
    for (int i = 0; i < ptdp_fp8_recipe_count(); i++)
        snprintf(recipes + strlen(recipes), sizeof recipes - strlen(recipes), "%s%s", i ? "," : "",
                 ptdp_fp8_recipe_at(i)->name);
    printf("usage: ptdp bench fp8 [--steps N] [--batch B] [--lr X] [--seed S] [--recipes R,...]\n"
           "                      [--qwz B,... [--qwz-ranks N]] [--qgz b,... [--qgz-ranks N]\n"
           "                      [--qgz-node k]] [--every K] [--repeat R] [--json]\n"
           "                      [model flags]\n"
           "\n"
           "Train one model from the same parameters on the same batches in %s, bf16 and each FP8\n"
           "recipe (docs/fp8.md), and print each run's loss every K steps, its final loss, its gap to\n"
           "%s's (absolute, relative, and the mean over the last tenth of the steps), the held-out\n"
           "sums it answers exactly (on the built-in sums) and its wall time.\n"
           "\n"
           "  --steps N       steps of every run (default %d)\n"
           "  --batch B       the global batch (default 64)\n"
           "  --lr X          AdamW's learning rate (default %g, ptdp demo's)\n"
           "  --seed S        parameters and data (default 1)\n"
           "  --recipes LIST  the FP8 recipes run (default all: %s; none with --qwz or --qgz)\n"
           "  --qwz B,...     also ZeRO++'s qwZ (docs/zero.md): the forward's weights quantized in INT8\n"
           "                  blocks of B of each of --qwz-ranks N (default 8) ZeRO-3 shards, on one\n"
           "                  device as --check's (the same numbers as the N devices' run)\n"
           "  --qgz b,...     also ZeRO++'s qgZ (docs/zero.md): each micro-batch's gradient of --qgz-ranks\n"
           "                  N (default 8) ranks summed by its two all-to-alls of b-bit codes (4, 8),\n"
           "                  in nodes of --qgz-node k (default 4), blocks of %d, on one device as\n"
           "                  --check's (the same numbers as the N devices' run)\n"
           "  --every K       print the loss every K steps (default: N/4)\n"
           "  --repeat R      runs of each precision; the median wall time is kept, the losses must\n"
           "                  repeat bit for bit (default 1)\n"
           "  --json          one JSON object a run on stdout instead of the table\n"
           "\n"
           "The model: ptdp train's model flags, by default --model %s with its defaults (ptdp demo's,\n"
           "on the built-in sums); e.g. --layers 4 --data FILE for 4 layers on a text.\n",
           PTDP_REAL_NAME, PTDP_REAL_NAME, FP8_BENCH_STEPS, FP8_BENCH_LR, recipes, FP8_BENCH_QGZ_BLOCK,
           ops != NULL ? ops->name : "?");
}

/* The default model's defaults, as `ptdp train --model NAME` has them. */
static ptdp_model_config model_defaults(const ptdp_model_ops *ops)
{
    const ptdp_model_cli *cli = ptdp_model_cli_for(ops);
    ptdp_model_config m = cli->defaults != NULL ? cli->defaults() : (ptdp_model_config){ 0 };
    m.ops = ops;
    return m;
}

/* One flag of the command's own: 1 if it was one (rc set), 0 if not. */
static int own_flag(ptdp_args *a, fp8_bench_opts *o, int *seed, int *rc)
{
    const int n = ptdp_fp8_recipe_count();
    const char *names[8];
    for (int i = 0; i < n && i < 8; i++)
        names[i] = ptdp_fp8_recipe_at(i)->name;
    if (ptdp_args_is(a, "--steps")) *rc = ptdp_args_int(a, 1, FP8_BENCH_MAX_STEPS, &o->cfg.steps);
    else if (ptdp_args_is(a, "--batch")) *rc = ptdp_args_int(a, 1, 1 << 16, &o->cfg.batch);
    else if (ptdp_args_is(a, "--lr")) *rc = ptdp_args_double(a, 1e-12, 10, &o->cfg.lr);
    else if (ptdp_args_is(a, "--seed")) *rc = ptdp_args_int(a, 0, 2147483647, seed);
    else if (ptdp_args_is(a, "--every")) *rc = ptdp_args_int(a, 1, FP8_BENCH_MAX_STEPS, &o->every);
    else if (ptdp_args_is(a, "--repeat")) *rc = ptdp_args_int(a, 1, 9, &o->repeat);
    else if (ptdp_args_is(a, "--json")) *rc = ptdp_args_switch(a, &o->json);
    else if (ptdp_args_is(a, "--qwz")) *rc = ptdp_args_int_list(a, 1, 1 << 24, o->qwz, 4, &o->nqwz);
    else if (ptdp_args_is(a, "--qwz-ranks")) *rc = ptdp_args_int(a, 2, 1 << 16, &o->qwz_ranks);
    else if (ptdp_args_is(a, "--qgz")) *rc = ptdp_args_int_list(a, 1, 64, o->qgz, 2, &o->nqgz);
    else if (ptdp_args_is(a, "--qgz-ranks")) *rc = ptdp_args_int(a, 2, 1 << 16, &o->qgz_ranks);
    else if (ptdp_args_is(a, "--qgz-node")) *rc = ptdp_args_int(a, 2, 1 << 16, &o->qgz_node);
    else if (ptdp_args_is(a, "--recipes")) {
        *rc = ptdp_args_enum_list(a, names, n < 8 ? n : 8, o->recipes, 8, &o->nrecipes);
        o->recipes_given = true;
    } else
        return 0;
    return 1;
}

/* --qgz's bits (4 or 8), ranks N and node k: N = k m for m >= 2 nodes,
 * and the batch cut evenly into the N ranks' micro-batches. */
static int qgz_flags(fp8_bench_opts *o)
{
    if ((o->qgz_ranks > 0 || o->qgz_node > 0) && o->nqgz == 0)
        return ptdp_usage_error("bench fp8", "--qgz-%s %d is the ZeRO group qgZ's all-to-alls sum over: it needs "
                                "--qgz b", o->qgz_ranks > 0 ? "ranks" : "node",
                                o->qgz_ranks > 0 ? o->qgz_ranks : o->qgz_node);
    for (int i = 0; i < o->nqgz; i++)
        if (o->qgz[i] != 4 && o->qgz[i] != 8)
            return ptdp_usage_error("bench fp8", "--qgz %d: qgZ sends INT4 or INT8 codes; use 4, 8 or 4,8", o->qgz[i]);
    o->qgz_ranks = o->qgz_ranks > 0 ? o->qgz_ranks : 8;
    o->qgz_node = o->qgz_node > 0 ? o->qgz_node : 4;
    if (o->nqgz > 0 && (o->qgz_node >= o->qgz_ranks || o->qgz_ranks % o->qgz_node != 0))
        return ptdp_usage_error("bench fp8", "--qgz-node %d must cut --qgz-ranks %d into two or more nodes",
                                o->qgz_node, o->qgz_ranks);
    const int U = o->qgz_ranks * (o->cfg.micro_batches > 0 ? o->cfg.micro_batches : 1);
    if (o->nqgz > 0 && o->cfg.batch % U != 0)
        return ptdp_usage_error("bench fp8", "--qgz: --batch %d must split evenly into --qgz-ranks %d ranks' "
                                "micro-batches (%d)", o->cfg.batch, o->qgz_ranks, U);
    return 0;
}

/* The flags: 0, -1 after --help, or PTDP_EXIT_USAGE. */
static int parse(int argc, char **argv, fp8_bench_opts *o)
{
    memset(o, 0, sizeof *o);
    o->cfg = ptdp_train_defaults();
    o->cfg.lr = FP8_BENCH_LR;
    o->cfg.steps = FP8_BENCH_STEPS;
    o->repeat = 1;
    int seed = (int)o->cfg.seed;
    const ptdp_model_ops *ops = default_model();
    if (ops == NULL)
        return ptdp_usage_error("bench fp8", "no registered model can be sampled: nothing to train on the sums");
    const ptdp_model_config first = model_defaults(ops);
    ptdp_model_flags_init(&o->mf, &first);
    ptdp_args a;
    ptdp_args_init(&a, "bench fp8", argc, argv, 1);
    while (ptdp_args_next(&a)) {
        int rc = 0;
        if (ptdp_args_is(&a, "--help")) { usage(); return -1; }
        else if (own_flag(&a, o, &seed, &rc)) { }
        else if (ptdp_model_flag_is(&a)) rc = ptdp_model_flag_read(&a, PTDP_FLAGS_BENCH, &o->mf);
        else rc = ptdp_args_unknown(&a);
        if (rc)
            return PTDP_EXIT_USAGE;
    }
    if (a.status)
        return PTDP_EXIT_USAGE;
    o->cfg.seed = (uint64_t)seed;
    o->mf.seed = o->cfg.seed;
    if (ptdp_model_flags_finish("bench fp8", &o->mf) != 0)
        return PTDP_EXIT_USAGE;
    o->cfg.model = o->mf.cfg;
    if (!o->recipes_given && o->nqwz == 0 && o->nqgz == 0)
        for (o->nrecipes = 0; o->nrecipes < ptdp_fp8_recipe_count() && o->nrecipes < 8; o->nrecipes++)
            o->recipes[o->nrecipes] = o->nrecipes;
    if (o->qwz_ranks > 0 && o->nqwz == 0)
        return ptdp_usage_error("bench fp8", "--qwz-ranks %d is the ZeRO group qwZ's blocks follow: it needs "
                                "--qwz B", o->qwz_ranks);
    if (o->qwz_ranks == 0)
        o->qwz_ranks = 8;
    if (qgz_flags(o) != 0)
        return PTDP_EXIT_USAGE;
    if (o->every == 0)
        o->every = o->cfg.steps / 4 > 0 ? o->cfg.steps / 4 : 1;
    if (o->every > o->cfg.steps)
        return ptdp_usage_error("bench fp8", "--every %d is more than --steps %d: no loss would be printed "
                                "between the first and the last (try --every %d)", o->every, o->cfg.steps,
                                o->cfg.steps);
    char msg[PTDP_MSG_MAX];
    if (ptdp_train_validate(&o->cfg, msg, sizeof msg) != 0)
        return ptdp_usage_error("bench fp8", "%s", msg);
    return 0;
}

/* The steps whose loss is printed: 1, every K-th, and the last. */
static bool shown(int step, int every, int steps)
{
    return step == 1 || step % every == 0 || step == steps;
}

static const char *data_name(const fp8_bench_opts *o)
{
    return o->mf.data != NULL ? o->mf.data : "the built-in sums";
}

static void print_header(const fp8_bench_opts *o, bool held_out)
{
    const ptdp_model_cli *cli = ptdp_model_cli_of(&o->cfg.model);
    printf("ptdp bench fp8: ");
    if (cli->bench_describe != NULL)
        cli->bench_describe(stdout, &o->cfg.model);
    else
        printf("%s", ptdp_model_name(&o->cfg.model));
    printf("\n  on %s, batch %d, AdamW lr %g, seed %llu, %d steps, one device; every run from the same\n"
           "  parameters on the same batches.  gap: the loss minus %s's at the last step (rel: over %s's);\n"
           "  tail: the mean gap over the last %d steps;%s wall: %s of %d run%s\n\n",
           data_name(o), o->cfg.batch, o->cfg.lr, (unsigned long long)o->cfg.seed, o->cfg.steps, PTDP_REAL_NAME,
           PTDP_REAL_NAME, o->cfg.steps / 10 > 0 ? o->cfg.steps / 10 : 1,
           held_out ? " held-out: the sums never in the training text answered exactly;\n " : "",
           o->repeat > 1 ? "the median" : "one", o->repeat, o->repeat == 1 ? "" : "s");
    printf("%-11s", "precision");
    for (int s = 1; s <= o->cfg.steps; s++)
        if (shown(s, o->every, o->cfg.steps)) {
            char w[16];
            snprintf(w, sizeof w, "step %d", s);
            printf(" %*s", (int)strlen(w) + 4, w);
        }
    printf(" %10s %8s %10s %9s", "gap", "rel", "tail", "max|gap|");
    if (held_out)
        printf(" %18s", "held-out");
    printf(" %8s\n", "wall s");
}

static void print_row(const fp8_bench_opts *o, const ptdp_fp8_bench_run *r, const ptdp_fp8_bench_run *ref,
                      bool held_out)
{
    printf("%-11s", r->prec.name);
    for (int s = 1; s <= o->cfg.steps; s++)
        if (shown(s, o->every, o->cfg.steps)) {
            char w[16];
            snprintf(w, sizeof w, "step %d", s);
            if (s <= r->completed)
                printf(" %*.4f", (int)strlen(w) + 4, r->loss[s - 1]);
            else
                printf(" %*s", (int)strlen(w) + 4, "-");
        }
    const ptdp_fp8_bench_gap g = ptdp_fp8_bench_gap_of(r, ref);
    if (r == ref)
        printf(" %10s %8s %10s %9s", "-", "-", "-", "-");
    else if (isfinite(g.final))
        printf(" %+10.4f %+7.2f%% %+10.4f %9.4f", g.final, 100 * g.rel, g.tail, g.max_abs);
    else
        printf(" %10s %8s %10s %9s", "diverged", "", "", "");
    if (held_out && r->asked > 0)
        printf(" %5d/%-4d %6.1f%%", r->right, r->asked, 100.0 * r->right / r->asked);
    else if (held_out)
        printf(" %18s", "-");
    printf(" %8.2f\n", r->wall_s);
    if (r->diverged[0] != '\0')
        printf("  %s: %s\n", r->prec.name, r->diverged);
    fflush(stdout);
}

/* One run as one JSON object on a line (numbers through ptdp_json_number:
 * a diverged run's gaps are null). */
static void print_json(const fp8_bench_opts *o, const ptdp_fp8_bench_run *r, const ptdp_fp8_bench_run *ref,
                       bool held_out)
{
    char x[8][PTDP_JSON_NUMBER_MAX];
    const ptdp_fp8_bench_gap g = ptdp_fp8_bench_gap_of(r, ref);
    const int n = r->steps;
    printf("{\"bench\": \"fp8\", \"model\": \"%s\", \"layers\": %d, \"hidden\": %d, \"data\": ",
           ptdp_model_name(&o->cfg.model), o->cfg.model.layers, o->cfg.model.hidden);
    if (o->mf.data != NULL)
        ptdp_json_write_string(stdout, o->mf.data);
    else
        printf("null");
    printf(", \"batch\": %d, \"lr\": %s, \"seed\": %llu, \"precision\": \"%s\", \"fp8_recipe\": ", o->cfg.batch,
           ptdp_json_number(o->cfg.lr, x[0]), (unsigned long long)o->cfg.seed, r->prec.name);
    if (r->prec.recipe != NULL)
        printf("\"%s\"", r->prec.recipe->name);
    else
        printf("null");
    if (r->prec.qwz_block > 0)   /* qwZ's runs alone */
        printf(", \"qwz_block\": %d, \"qwz_ranks\": %d", r->prec.qwz_block, r->prec.qwz_ranks);
    if (r->prec.qgz_bits > 0)   /* qgZ's runs alone */
        printf(", \"qgz_bits\": %d, \"qgz_block\": %d, \"qgz_ranks\": %d, \"qgz_node\": %d", r->prec.qgz_bits,
               FP8_BENCH_QGZ_BLOCK, r->prec.qgz_ranks, r->prec.qgz_node);
    printf(", \"steps\": %d, \"completed\": %d, \"loss\": [", n, r->completed);
    for (int i = 0; i < r->completed; i++)
        printf("%s%s", i ? ", " : "", ptdp_json_number(r->loss[i], x[0]));
    printf("], \"final_loss\": %s, \"gap\": %s, \"rel_gap\": %s, \"tail_gap\": %s, \"max_abs_gap\": %s",
           ptdp_json_number(r->completed == n ? r->loss[n - 1] : NAN, x[1]), ptdp_json_number(g.final, x[2]),
           ptdp_json_number(g.rel, x[3]), ptdp_json_number(g.tail, x[4]), ptdp_json_number(g.max_abs, x[5]));
    if (held_out && r->asked > 0)
        printf(", \"held_out_right\": %d, \"held_out_asked\": %d", r->right, r->asked);
    else
        printf(", \"held_out_right\": null, \"held_out_asked\": null");
    printf(", \"wall_s\": %s, \"repeat\": %d}\n", ptdp_json_number(r->wall_s, x[6]), o->repeat);
    fflush(stdout);
}

/* Every run's configuration checked before the first one starts. */
static int check_all(const fp8_bench_opts *o, const ptdp_fp8_bench_precision *p, int n)
{
    for (int i = 0; i < n; i++) {
        ptdp_train_config c = o->cfg;
        c.bf16 = p[i].bf16;
        c.fp8 = (ptdp_fp8_settings){ .recipe = p[i].recipe };
        char msg[PTDP_MSG_MAX];
        if (ptdp_train_validate(&c, msg, sizeof msg) != 0)
            return ptdp_usage_error("bench fp8", "%s: %s", p[i].name, msg);
    }
    return 0;
}

/* The precisions --recipes leaves: the float and bf16, then the recipes
 * in the order typed. */
static int chosen(const fp8_bench_opts *o, ptdp_fp8_bench_precision *out, int max)
{
    ptdp_fp8_bench_precision all[16];
    const int n = ptdp_fp8_bench_precisions(all, 16);
    int k = 0;
    for (int i = 0; i < n && k < max; i++)
        if (all[i].recipe == NULL)
            out[k++] = all[i];
    for (int j = 0; j < o->nrecipes && k < max; j++)
        for (int i = 0; i < n; i++)
            if (all[i].recipe == ptdp_fp8_recipe_at(o->recipes[j]))
                out[k++] = all[i];
    for (int j = 0; j < o->nqwz && k < max; j++)
        out[k++] = (ptdp_fp8_bench_precision){ .name = o->qwz_names[j], .qwz_block = o->qwz[j],
                                               .qwz_ranks = o->qwz_ranks };
    for (int j = 0; j < o->nqgz && k < max; j++)
        out[k++] = (ptdp_fp8_bench_precision){ .name = o->qgz_names[j], .qgz_bits = o->qgz[j],
                                               .qgz_ranks = o->qgz_ranks, .qgz_node = o->qgz_node };
    return k;
}

static int run_all(fp8_bench_opts *o)
{
    for (int j = 0; j < o->nqwz; j++)
        snprintf(o->qwz_names[j], sizeof o->qwz_names[j], "qwz-%d", o->qwz[j]);
    for (int j = 0; j < o->nqgz; j++)
        snprintf(o->qgz_names[j], sizeof o->qgz_names[j], "qgz-int%d", o->qgz[j]);
    ptdp_fp8_bench_precision p[16];
    const int n = chosen(o, p, 16);
    int status = check_all(o, p, n);
    if (status != 0)
        return status;
    const bool held_out = o->mf.data == NULL && ptdp_model_can_sample(ptdp_model_of(&o->cfg.model)) &&
                          ptdp_model_of(&o->cfg.model)->sampling->vocab(&o->cfg.model) > '=';
    ptdp_fp8_bench_run runs[16];
    memset(runs, 0, sizeof runs);
    if (!o->json)
        print_header(o, held_out);
    char msg[PTDP_MSG_MAX];
    for (int i = 0; i < n && status == 0; i++) {
        ptdp_progress("bench fp8: %s, %d run%s of %d steps", p[i].name, o->repeat, o->repeat == 1 ? "" : "s",
                      o->cfg.steps);
        const int rc = ptdp_fp8_bench_train(&o->cfg, &p[i], held_out, o->repeat, &runs[i], msg, sizeof msg);
        ptdp_progress_done();
        if (rc != 0) {
            fprintf(stderr, "ptdp bench fp8: %s\n", msg);
            status = PTDP_EXIT_FAIL;
        } else if (o->json)
            print_json(o, &runs[i], &runs[0], held_out);
        else
            print_row(o, &runs[i], &runs[0], held_out);
    }
    for (int i = 0; i < n; i++)
        ptdp_fp8_bench_run_free(&runs[i]);
    return status;
}

int ptdp_fp8_bench_config(int argc, char **argv, ptdp_train_config *cfg, ptdp_model_flags *mf)
{
    fp8_bench_opts o;
    int rc = parse(argc, argv, &o);
    if (rc != 0) {
        ptdp_model_flags_free(&o.mf);
        return rc < 0 ? PTDP_EXIT_USAGE : rc;
    }
    *cfg = o.cfg;
    *mf = o.mf;   /* its data, which cfg's model reads, now mf's to free */
    return 0;
}

int ptdp_bench_fp8_cmd(int argc, char **argv)
{
    fp8_bench_opts o;
    int rc = parse(argc, argv, &o);
    if (rc == 0)
        rc = run_all(&o);
    ptdp_model_flags_free(&o.mf);
    return rc < 0 ? PTDP_EXIT_OK : rc;
}
