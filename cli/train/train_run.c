/*
 * train_run.c — run a configuration, print what happened, check it.
 *
 * After the steps, the summary a student reads:
 *   - the mesh relations with their values: DP = world / (TP x PP) and
 *     gradient-accumulation steps = B / (micro-batch x DP);
 *   - the per-device report (train_report.c): peak memory by category
 *     (parameters of split layers fall as 1/tp; activations show the
 *     pipeline schedule; ZeRO divides optimizer state by dp), bytes sent per
 *     group and virtual time per step; --report FILE writes it as JSON;
 *   - with pp > 1, the measured bubble beside the schedule's formula,
 *     (p - 1) / (m + p - 1), or (p - 1) / (v m + p - 1) interleaved, and
 *     the pipeline's point-to-point bytes;
 *   - with --check, the baseline's loss beside every step's, and the
 *     largest parameter difference.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../args.h"
#include "../model_flags.h"
#include "ptdp/cp.h"
#include "ptdp/error.h"
#include "ptdp/file.h"
#include "ptdp/json.h"
#include "ptdp/mesh.h"
#include "ptdp/safetensors.h"
#include "ptdp/schedule.h"
#include "ptdp/launch.h"
#include "report.h"
#include "../html_pages.h"

typedef struct {
    bool quiet, tty;
    int steps;
    long first;          /* global step number of this run's first step */
    const char *what;    /* "training", "baseline" */
} printer;

/* When the step lines are off (--quiet, or the --check baseline), a long run
 * still shows that it moves: one line on a terminal's stderr, rewritten in
 * place, erased at the end. */
static void progress(const printer *p, const ptdp_step_log *l)
{
    if (!p->tty || p->steps <= 0)
        return;
    long done = l->step - p->first + 1;
    int width = 30, filled = (int)(width * done / p->steps);
    fprintf(stderr, "\r  %s [%.*s%*s] step %ld/%d", p->what, filled, "##############################",
            width - filled, "", done, p->steps);
    if (done >= p->steps)
        fprintf(stderr, "\r%*s\r", width + 40, "");
    fflush(stderr);
}

static void print_step(const ptdp_step_log *l, void *ctx)
{
    printer *p = ctx;
    if (p->quiet) {
        progress(p, l);
        return;
    }
    char b[32];
    /* Virtual time is what the step would take on the profile's GPUs:
     * microseconds for the default model, so print it in us. */
    printf("step %4ld  loss %.6f  |g| %.4e  virtual %10.2f us  wall %8.2f ms  sent %s (all devices)\n",
           l->step, l->loss, l->grad_norm, l->virtual_s * 1e6, l->wall_s * 1e3,
           ptdp_format_bytes(l->bytes, b, sizeof b));
    fflush(stdout);
}

/* The pipeline's point-to-point traffic: each micro-batch crosses every
 * boundary between pieces once each way, p v - 1 of them (p - 1 without
 * chunks), so interleaving multiplies the bytes by (p v - 1) / (p - 1).
 * Context parallelism's ring sends too; then the line is left out. */
static void print_pipeline_bytes(const ptdp_train_config *c, const ptdp_launch_result *lr)
{
    if (ptdp_train_cp(c) > 1 || c->steps == 0)
        return;
    const int p = c->pp, v = ptdp_train_virtual_stages(c), m = c->micro_batches;
    const ptdp_pp_layout l = ptdp_train_layout(c);
    double sent = 0;
    for (int r = 0; r < lr->world_size; r++)
        sent += lr->devices[r].comm.bytes_sent[PTDP_COLL_SEND];
    char b[32];
    if (ptdp_pp_layout_copies(&l) == 2) {   /* two copies of p - 1 boundaries, m / 2 micro-batches each */
        printf("  point-to-point per step: %s in all = 2 m (p - 1) = 2 x %d x %d = %d boundary crossings per "
               "pipeline%s (m / 2 micro-batches down one copy, m / 2 up the other: 1F1B's)\n",
               ptdp_format_bytes(sent / c->steps, b, sizeof b), m, p - 1, 2 * m * (p - 1),
               c->dp * c->tp > 1 ? " (x dp x tp)" : "");
        return;
    }
    if (ptdp_pp_layout_ends_together(&l)) {   /* a V: 2p - 1 boundaries, the tip's on one device */
        printf("  point-to-point per step: %s in all = 2 m (2p - 2) = 2 x %d x %d = %d boundary crossings per "
               "pipeline%s (the V's tip, stage %d to %d, stays on one device)\n",
               ptdp_format_bytes(sent / c->steps, b, sizeof b), m, 2 * p - 2, 2 * m * (2 * p - 2),
               c->dp * c->tp > 1 ? " (x dp x tp)" : "", p - 1, p);
        return;
    }
    printf("  point-to-point per step: %s in all = %s = 2 x %d x %d = %d boundary crossings per pipeline%s",
           ptdp_format_bytes(sent / c->steps, b, sizeof b), v > 1 ? "2 m (p v - 1)" : "2 m (p - 1)", m,
           p * v - 1, 2 * m * (p * v - 1), c->dp * c->tp > 1 ? " (x dp x tp)" : "");
    if (v > 1)
        printf("; (p v - 1) / (p - 1) = %.3g x 1F1B's", (double)(p * v - 1) / (p - 1));
    if (ptdp_train_token_slices(c) > 1)
        printf(", each in %d token slices (the same bytes in %d messages)", ptdp_train_token_slices(c),
               ptdp_train_token_slices(c));
    printf("\n");
}

/* --fp8: which tensors are quantized, in what, by which tiles and scales,
 * and which reductions make a split tensor's scale one device's. */
static void print_fp8(const ptdp_train_config *c, const ptdp_profile *prof)
{
    const ptdp_fp8_recipe *r = c->fp8.recipe;
    if (r == NULL)
        return;
    const ptdp_fp8_format *g = c->fp8.grad != NULL ? c->fp8.grad : &ptdp_fp8_e5m2;
    printf("  fp8 %s: every linear layer's X and W in e4m3 (max %g), dY in %s (max %g), products summed in "
           "float;\n    ", r->name, ptdp_fp8_e4m3.max, g->name, g->max);
    if (r->uses_history)
        printf("one scale a tensor, amax / max from the largest amax of the last %d steps (the first step its "
               "own;\n    a step's amaxes max-reduced over DP),", c->fp8.history > 0 ? c->fp8.history
                                                                                    : PTDP_FP8_HISTORY_DEFAULT);
    else if (r->whole_tensor)
        printf("one scale a tensor, amax / max,");
    if (r->whole_tensor)
        printf(" its amax max-reduced over TP where the tensor is split and over CP for activations;\n    ");
    else
        printf("a %s per tile: X and dY %dx%d, W %dx%d (no tile on two ranks, so no reduction);\n    ",
               r->power_of_two ? "power-of-two scale" : "scale", r->act_tile[0], r->act_tile[1], r->weight_tile[0],
               r->weight_tile[1]);
    printf("the head, router, norms, softmax, loss and optimizer stay in float\n");
    if (prof->peak_flops_fp8 <= 0 && prof->peak_flops_bf16 > 0)   /* a GPU without FP8 (clock.h) */
        printf("    (%s has no FP8 tensor cores: its clock charges the products at the bf16 peak, %.4g TFLOP/s)\n",
               prof->name, ptdp_profile_peak_fp8(prof) / 1e12);
}

static void print_header(const ptdp_train_config *c, const char *data_name, const ptdp_profile *prof)
{
    const int cp = ptdp_train_cp(c);
    int world = c->dp * cp * c->tp * c->pp, mb = c->batch / (c->dp * c->micro_batches);
    if (cp > 1)
        printf("ptdp train (%s): %d devices = dp %d x cp %d (%s%s) x tp %d x pp %d%s%s", PTDP_REAL_NAME, world, c->dp,
               cp, c->cp_contiguous ? "contiguous" : "zigzag", c->cp_a2a ? ", Ulysses all-to-all" : "", c->tp, c->pp,
               c->sp ? " with sequence parallelism" : "",
               c->recompute_core ? ", selective recompute (the attention core)" : "");
    else
        printf("ptdp train (%s): %d device%s = dp %d x tp %d x pp %d%s%s", PTDP_REAL_NAME, world,
               world == 1 ? "" : "s", c->dp, c->tp, c->pp, c->sp ? " with sequence parallelism" : "",
               c->recompute_core ? ", selective recompute (the attention core)" : "");
    const bool folded = ptdp_train_fold_slices(c) > 1;   /* MoE parallel folding (moe_fold.c) */
    if (folded)
        printf(", the experts folded: TP %d, EP %d, expert-DP %d over each stage's tp x cp x dp = %d ranks",
               c->etp, c->ep > 1 ? c->ep : 1, c->tp / c->etp * c->dp * cp / (c->ep > 1 ? c->ep : 1),
               c->tp * cp * c->dp);
    else if (c->ep > 1)
        printf(", expert parallelism over ep %d of the dp x cp ranks (expert-DP groups of %d)", c->ep,
               c->dp * cp / c->ep);
    const char *sched = ptdp_train_schedule(c)->name;
    const ptdp_pp_layout l = ptdp_train_layout(c);
    if (c->pp > 1 && ptdp_pp_layout_copies(&l) == 2)
        printf(", schedule %s: two copies of the model's %d stages, stage s holding stage s of one and %d - s of "
               "the other%s", sched, c->pp, c->pp - 1, c->recompute ? ", with recompute" : "");
    else if (c->pp > 1 && l.v > 1)
        printf(", schedule %s with %d model chunks per stage%s", sched, l.v, c->recompute ? " and recompute" : "");
    else if (c->pp > 1 && ptdp_train_token_slices(c) > 1)
        printf(", schedule %s over %d token slices of each sequence (TeraPipe)%s", sched,
               ptdp_train_token_slices(c), c->recompute ? " with recompute" : "");
    else if (c->pp > 1)
        printf(", schedule %s%s", sched, c->recompute ? " with recompute" : "");
    if (c->attention_tiled)   /* --attention tiled; the ring's chunks are its tiles already */
        printf(", attention in tiles%s", cp > 1 && !c->cp_a2a ? " (the ring's own: its chunks)" : "");
    const ptdp_model_config *m = &c->model;
    ptdp_model_cli_of(m)->describe(c, mb, data_name);
    print_fp8(c, prof);
    if (cp > 1)
        printf("  DP = world / (CP x TP x PP) = %d / (%d x %d x %d) = %d;  "
               "gradient-accumulation steps = B / (micro-batch x DP) = %d / (%d x %d) = %d\n"
               "  each device holds %d of the %d positions of a sequence; gradients are summed over dp x cp = %d\n",
               world, cp, c->tp, c->pp, c->dp, c->batch, mb, c->dp, c->batch / (mb * c->dp),
               ptdp_model_positions(&c->model) / cp, ptdp_model_positions(&c->model), c->dp * cp);
    else
        printf("  DP = world / (TP x PP) = %d / (%d x %d) = %d;  "
               "gradient-accumulation steps = B / (micro-batch x DP) = %d / (%d x %d) = %d\n",
               world, c->tp, c->pp, c->dp, c->batch, mb, c->dp, c->batch / (mb * c->dp));
    if (world > 1 && world <= 16 && cp > 1) {
        printf("  mesh (rank = tp + %d cp + %d dp + %d pp):", c->tp, c->tp * cp, c->tp * cp * c->dp);
        for (int r = 0; r < world; r++) {
            int d, q, t, p;
            ptdp_mesh_coords_cp(c->dp, cp, c->tp, c->pp, r, &d, &q, &t, &p);
            printf("%s r%d=(dp%d,cp%d,tp%d,pp%d)", r % 4 == 0 && r ? "\n                                     " : "",
                   r, d, q, t, p);
        }
        printf("\n");
    } else if (world > 1 && world <= 16) {
        printf("  mesh (rank = tp + %d dp + %d pp):", c->tp, c->tp * c->dp);
        for (int r = 0; r < world; r++) {
            int d, t, p;
            ptdp_mesh_coords(c->dp, c->tp, c->pp, r, &d, &t, &p);
            printf("%s r%d=(dp%d,tp%d,pp%d)", r % 4 == 0 && r ? "\n                              " : "", r, d, t, p);
        }
        printf("\n");
    }
}

/* One JSON line per step, written atomically (file.h): the step's numbers,
 * then every counter of a step the run published, in the order published
 * (counters.h: "aux_loss", a GPT's "moe_load", …). */
/* Step i's line of the log, without its newline. */
static void log_line(FILE *f, const ptdp_train_result *r, int i)
{
    const ptdp_step_log *l = &r->log[i];
    char a[PTDP_JSON_NUMBER_MAX], b[PTDP_JSON_NUMBER_MAX], v[PTDP_JSON_NUMBER_MAX],
         w[PTDP_JSON_NUMBER_MAX], n[PTDP_JSON_NUMBER_MAX];
    fprintf(f, "{\"step\": %ld, \"loss\": %s, \"grad_norm\": %s, \"virtual_s\": %s, "
               "\"wall_s\": %s, \"bytes\": %s",
            l->step, ptdp_json_number(l->loss, a), ptdp_json_number(l->grad_norm, b),
            ptdp_json_number(l->virtual_s, v), ptdp_json_number(l->wall_s, w), ptdp_json_number(l->bytes, n));
    for (int k = 0; k < r->counters.n; k++)
        if (r->counters.c[k].kind == PTDP_COUNT_STEP)
            ptdp_report_json_counter(f, &r->counters.c[k], ptdp_train_step_counts(r, i, r->counters.c[k].name));
    fputs("}", f);
}

static int write_log(const char *path, const ptdp_train_result *r, char *msg, size_t len)
{
    ptdp_atomic_file f;
    int rc = ptdp_atomic_open(&f, path, msg, len);
    if (rc != 0)
        return rc;
    for (int i = 0; i < r->completed; i++) {
        log_line(ptdp_atomic_stream(&f), r, i);
        fputs("\n", ptdp_atomic_stream(&f));
    }
    return ptdp_atomic_commit(&f, msg, len);
}

/* Processes (MPI): a failing process ends the job before the host writes
 * anything (launch.h), so it keeps the --log of the steps completed first,
 * as the threads' failed run does.  Every process holds the whole table
 * (the hosts merge it each step): the steps reported so far are the log's
 * entries with a step number. */
typedef struct {
    const char *path;
    ptdp_train_result *res;
} log_keeper;

static void keep_log(void *ctx)
{
    log_keeper *k = ctx;
    if (k->path == NULL || k->res->log == NULL)
        return;
    ptdp_train_result done = *k->res;
    done.completed = 0;
    while (done.completed < done.steps && done.log[done.completed].step > 0)
        done.completed++;
    char msg[PTDP_MSG_MAX];
    write_log(k->path, &done, msg, sizeof msg);
}

/* A sample's shape as the model's CLI side says (none: nothing to dump). */
static void samples_of(const ptdp_model_config *m, bool *tokens, int *x_cols, int *y_cols)
{
    const ptdp_model_cli *cli = ptdp_model_cli_of(m);
    *tokens = false;
    *x_cols = *y_cols = 0;
    if (cli->samples != NULL)
        cli->samples(m, tokens, x_cols, y_cols);
}

/* --dump-data: the global batches, x and y.  The MLP's x is its features
 * [steps, B, d_in] and y its labels [steps, B]; the GPT's x its tokens and
 * y the next tokens, both I64 [steps, B, T]. */
static int dump_data(const char *path, const ptdp_train_config *c, char *msg, size_t len)
{
    bool tokens;
    int x_cols, y_cols;
    samples_of(&c->model, &tokens, &x_cols, &y_cols);
    ptdp_st_tensor t[2];
    memset(t, 0, sizeof t);
    snprintf(t[0].name, sizeof t[0].name, "x");
    t[0].dtype = tokens ? PTDP_I64 : PTDP_REAL;
    t[0].ndim = 3;
    t[0].shape[0] = c->steps;
    t[0].shape[1] = c->batch;
    t[0].shape[2] = x_cols;
    t[0].data = tokens ? (const void *)c->dump_tokens : (const void *)c->dump_x;
    snprintf(t[1].name, sizeof t[1].name, "y");
    t[1].dtype = PTDP_I64;
    t[1].ndim = y_cols > 0 ? 3 : 2;
    t[1].shape[0] = c->steps;
    t[1].shape[1] = c->batch;
    t[1].shape[2] = y_cols;
    t[1].data = c->dump_y;
    return ptdp_st_write(path, t, 2, NULL, NULL, 0, msg, len);
}

/* The baseline: the same run on one device (exempt from --device-mem). */
static int run_baseline(const ptdp_train_config *c, const ptdp_launch_opts *o,
                        ptdp_state *final, ptdp_train_result *res, char *msg, size_t len)
{
    ptdp_train_config b = ptdp_train_baseline(c);
    b.final_state = final;
    b.init_state = NULL;
    b.dump_x = NULL;
    b.dump_tokens = NULL;
    b.dump_y = NULL;
    ptdp_launch_opts bo = *o;
    bo.backend = PTDP_BACKEND_THREADS;   /* one device: a thread of rank 0 */
    if (bo.algo == PTDP_ALGO_MPI)
        bo.algo = PTDP_ALGO_DEFAULT;
    bo.device_mem = 0;
    bo.trace_path = NULL;
    bo.result = NULL;
    printer pr = { .quiet = true, .tty = isatty(STDERR_FILENO), .steps = c->steps,
                   .first = c->resume ? c->resume->step + 1 : 1, .what = "baseline" };
    return ptdp_train(&b, &bo, print_step, &pr, res, msg, len);
}

static int check_against_baseline(const ptdp_train_config *c, const ptdp_launch_opts *o,
                                  const ptdp_train_result *res, const ptdp_state *final, char *verdict,
                                  size_t verdict_len)
{
    char msg[PTDP_MSG_MAX];
    ptdp_state base;
    ptdp_train_result bres;
    if (ptdp_state_init(&base, &c->model, c->optimizer, c->momentum > 0) != 0) {
        fprintf(stderr, "ptdp train: host out of memory\n");
        return PTDP_EXIT_FAIL;
    }
    if (c->zero_qgz > 0)   /* qgZ's one device sums each rank's micro-batch as its all-to-alls (zero3_qgz.c) */
        printf("check: running the single-device baseline (same seed, batch %d in the %d ranks' %d micro-batches, "
               "each rank's gradient summed as qgZ's all-to-alls would)…\n", c->batch, c->dp,
               c->dp * c->micro_batches);
    else
        printf("check: running the single-device baseline (same seed, batch %d in one piece)…\n", c->batch);
    if (run_baseline(c, o, &base, &bres, msg, sizeof msg) != 0) {
        fprintf(stderr, "ptdp train: --check: the baseline failed: %s\n", msg);
        ptdp_state_free(&base);
        return PTDP_EXIT_FAIL;
    }
    /* bf16 cannot equal one device bit for bit, nor to float's 1e-4: the
     * mesh rounds its partial sums to bf16 (2^-8 relative) in other places
     * than one device does, and AdamW turns the rounding of a near-zero
     * gradient into a step of up to lr either way (mixed.h). */
    const bool fp8_float = c->fp8.recipe != NULL && PTDP_REAL == PTDP_F32;   /* fp8_linear.h */
    double tol = c->bf16 ? PTDP_TOLERANCE_BF16 : fp8_float ? PTDP_FP8_TOLERANCE_F32 : PTDP_TOLERANCE, worst = 0;
    bool ok = true;
    printf("  %6s  %18s  %18s  %10s\n", "step", "loss", "baseline", "|diff|");
    for (int i = 0; i < res->steps; i++) {
        double a = res->log[i].loss, b = bres.log[i].loss, d = a > b ? a - b : b - a;
        bool step_ok = ptdp_check_value(a, b, tol);
        ok = ok && step_ok;
        if (d > worst)
            worst = d;
        printf("  %6ld  %18.12f  %18.12f  %10.3e%s\n", res->log[i].step, a, b, d, step_ok ? "" : "  MISMATCH");
    }
    ptdp_check_report rep;
    const bool adamw = c->optimizer == PTDP_OPT_ADAMW;
    double ptol = c->bf16 ? ptdp_tolerance_bf16_params(c->lr, res->steps, adamw) : tol;
    /* FP8 in float: a code an ulp flips (PTDP_FP8_TOLERANCE_F32) changes
     * its element's gradient, and AdamW turns that into a step of up to lr
     * either way — bf16's reach.  In double 1e-10 holds (docs/fp8.md). */
    if (fp8_float && adamw && 2 * c->lr * (double)res->steps > ptol)
        ptol = 2 * c->lr * (double)res->steps;
    bool params_ok = ptdp_check_states(final, &base, ptol, &rep);
    printf("  parameters: largest |a - b| %.3e, largest |a - b| / max(1, max|b|) %.3e (%s)\n",
           rep.max_abs, rep.max_rel, rep.worst);
    ok = ok && params_ok;
    char ptext[96] = "";
    if (ptol != tol)   /* AdamW's reach: types.h */
        snprintf(ptext, sizeof ptext, "; parameters %.0e, AdamW's 2 lr a step", ptol);
    snprintf(verdict, verdict_len, "check %s: tolerance %.0e (%s%s), largest loss difference %.3e",
             ok ? "PASSED" : "FAILED", tol,
             c->bf16 ? "bf16 against a bf16 baseline" : fp8_float ? "f32 with FP8's flipped codes" : PTDP_REAL_NAME,
             ptext, worst);
    printf("%s\n", verdict);
    ptdp_train_result_free(&bres);
    ptdp_state_free(&base);
    return ok ? PTDP_EXIT_OK : PTDP_EXIT_FAIL;
}

/* A pipeline's bubble beside the schedule's formula, its sends, and each
 * stage's peak activations (and what a split backward held for W). */
static void print_pipeline(const ptdp_train_config *c, const ptdp_launch_result *lr, const ptdp_train_result *res)
{
    char b[32];
    const int v = ptdp_train_virtual_stages(c);
    const ptdp_pp_layout l = ptdp_train_layout(c);
    const char *sched = ptdp_train_schedule(c)->name;
    if (ptdp_pp_layout_copies(&l) == 2)
        printf("pipeline (%s, %d stages x 2 copies, %d micro-batches, half each way): bubble measured %.4f, "
               "formula %s = %.4f\n", sched, c->pp, c->micro_batches, res->bubble_measured,
               res->bubble_words, res->bubble_formula);
    else if (v > 1)
        printf("pipeline (%s, %d stages x %d virtual stages, %d micro-batch%s): bubble measured %.4f, "
               "formula %s = %.4f\n", sched, c->pp, v, c->micro_batches, c->micro_batches == 1 ? "" : "es",
               res->bubble_measured, res->bubble_words, res->bubble_formula);
    else if (ptdp_train_token_slices(c) > 1)
        printf("pipeline (%s, %d stages, %d micro-batch%s x %d token slices): bubble measured %.4f, "
               "formula %s = %.4f\n", sched, c->pp, c->micro_batches, c->micro_batches == 1 ? "" : "es",
               ptdp_train_token_slices(c), res->bubble_measured, res->bubble_words, res->bubble_formula);
    else
        printf("pipeline (%s, %d stages, %d micro-batch%s): bubble measured %.4f, formula %s = %.4f\n",
               sched, c->pp, c->micro_batches, c->micro_batches == 1 ? "" : "es",
               res->bubble_measured, res->bubble_words ? res->bubble_words : "(p-1)/(m+p-1)",
               res->bubble_formula);
    print_pipeline_bytes(c, lr);
    printf("  peak activation memory per stage:");
    for (int s = 0; s < c->pp; s++)
        printf(" %s", ptdp_format_bytes((double)res->peak_acts[s], b, sizeof b));
    printf("\n");
    bool split = false;
    for (int s = 0; s < c->pp; s++)
        split |= res->peak_wgrad[s] > 0;
    if (split) {   /* a split backward: what B left for W, inside those peaks */
        printf("  of which held for W (each linear layer's input and output gradient, copied by B):");
        for (int s = 0; s < c->pp; s++)
            printf(" %s", ptdp_format_bytes((double)res->peak_wgrad[s], b, sizeof b));
        printf("\n");
    }
}

/* The run's files, each on its own: one that cannot be written is
 * reported and makes the status 1, and the others are still written. */
static int write_outputs(const ptdp_train_config *c, const ptdp_launch_opts *opts, const ptdp_train_outputs *out,
                         const ptdp_launch_result *lr, const ptdp_train_result *res, ptdp_state *init,
                         ptdp_state *final)
{
    char msg[PTDP_MSG_MAX];
    int status = PTDP_EXIT_OK;
    if (out->report != NULL &&
        ptdp_report_write_json(out->report, c, opts, lr, res, msg, sizeof msg) != 0) {
        fprintf(stderr, "ptdp train: --report %s\n", msg);
        status = PTDP_EXIT_FAIL;
    }
    if (out->log != NULL && write_log(out->log, res, msg, sizeof msg) != 0) {
        fprintf(stderr, "ptdp train: --log %s\n", msg);
        status = PTDP_EXIT_FAIL;
    }
    if (out->save_init != NULL && ptdp_state_save(init, out->save_init, msg, sizeof msg) != 0) {
        fprintf(stderr, "ptdp train: --save-init %s\n", msg);
        status = PTDP_EXIT_FAIL;
    }
    if (out->save != NULL && ptdp_state_save(final, out->save, msg, sizeof msg) != 0) {
        fprintf(stderr, "ptdp train: --save %s\n", msg);
        status = PTDP_EXIT_FAIL;
    }
    if (out->dump != NULL && dump_data(out->dump, c, msg, sizeof msg) != 0) {
        fprintf(stderr, "ptdp train: --dump-data %s\n", msg);
        status = PTDP_EXIT_FAIL;
    }
    return status;
}

/* --dump-data's buffers for every sample of the run (tokens or features,
 * and the labels); 0, or PTDP_ENOMEM. */
static int dump_buffers(ptdp_train_config *c)
{
    size_t rows = (size_t)c->steps * c->batch;
    bool tokens;
    int x_cols, y_cols;
    samples_of(&c->model, &tokens, &x_cols, &y_cols);
    if (tokens)
        c->dump_tokens = calloc(rows * x_cols + 1, sizeof(int64_t));
    else
        c->dump_x = calloc(rows * x_cols + 1, sizeof(ptdp_real));
    c->dump_y = calloc(rows * (y_cols > 0 ? y_cols : 1) + 1, sizeof(int64_t));
    return (tokens ? (void *)c->dump_tokens : (void *)c->dump_x) == NULL || c->dump_y == NULL ? PTDP_ENOMEM : 0;
}

/* A failed run: why, the log of the steps that did complete (how a run
 * diverged, say), and the outputs a failed run does not write. */
static void report_failure(const ptdp_train_outputs *out, const ptdp_train_result *res, int rc, const char *why)
{
    char msg[PTDP_MSG_MAX];
    fprintf(stderr, "ptdp train: run failed (%s): %s\n", ptdp_strerror(rc), why);
    if (out->log != NULL && res->log != NULL) {
        if (write_log(out->log, res, msg, sizeof msg) != 0)
            fprintf(stderr, "ptdp train: --log %s\n", msg);
        else
            fprintf(stderr, "ptdp train: --log %s: the %d step%s completed\n", out->log, res->completed,
                    res->completed == 1 ? "" : "s");
    }
    const char *skipped[] = { out->save ? "--save" : NULL, out->save_init ? "--save-init" : NULL,
                              out->report ? "--report" : NULL, out->dump ? "--dump-data" : NULL,
                              out->html ? "--html" : NULL };
    for (int i = 0; i < 5; i++)
        if (skipped[i] != NULL)
            fprintf(stderr, "ptdp train: %s not written: the run failed\n", skipped[i]);
}

/* --html: the page holds the --report JSON and the --log lines as one
 * array, both made by the functions that write those files. */
int ptdp_train_write_page(const char *cmd, const char *path, const ptdp_train_config *c, const ptdp_launch_opts *opts,
                          const ptdp_launch_result *lr, const ptdp_train_result *res, const char *verdict)
{
    char *report = NULL, *log = NULL, msg[PTDP_MSG_MAX];
    size_t report_len = 0, log_len = 0;
    int rc = ptdp_report_json_text(c, opts, lr, res, &report, &report_len);
    FILE *f = rc == PTDP_OK ? open_memstream(&log, &log_len) : NULL;
    if (f != NULL) {
        fputs("[", f);
        for (int i = 0; i < res->completed; i++) {
            fputs(i ? ",\n " : "\n ", f);
            log_line(f, res, i);
        }
        fputs("\n]\n", f);
        rc = fclose(f) == 0 ? PTDP_OK : PTDP_ENOMEM;
    } else {
        rc = PTDP_ENOMEM;
    }
    const ptdp_train_page page = { c, lr, res, verdict, opts->profile ? opts->profile : ptdp_profile_default() };
    if (rc == PTDP_OK)
        rc = ptdp_html_train(path, &page, report, report_len, log, log_len, msg, sizeof msg);
    else
        snprintf(msg, sizeof msg, "%s: out of host memory", path);
    free(report);
    free(log);
    if (rc != PTDP_OK) {
        fprintf(stderr, "ptdp %s: --html %s\n", cmd, msg);
        return PTDP_EXIT_FAIL;
    }
    return PTDP_EXIT_OK;
}

/* What a run fills besides its result: the final state (--save, --check),
 * the initial one (--save-init), and --dump-data's buffers in the config.
 * prepare_run makes them (0, or PTDP_ENOMEM), release_run frees them. */
typedef struct {
    ptdp_state final, init;
    bool have_final, have_init;
} run_states;

static int prepare_run(ptdp_train_config *c, const ptdp_train_outputs *out, run_states *s)
{
    const bool momentum = c->momentum > 0;
    /* --fp8 delayed: its amax histories go into the checkpoint (state.h) */
    const int H = c->fp8.recipe != NULL && c->fp8.recipe->uses_history
                      ? (c->fp8.history > 0 ? c->fp8.history : PTDP_FP8_HISTORY_DEFAULT) : 0;
    memset(s, 0, sizeof *s);
    if (out->save != NULL || out->check) {
        if (ptdp_state_init(&s->final, &c->model, c->optimizer, momentum) != 0)
            return PTDP_ENOMEM;
        s->have_final = true;
        if (H > 0 && ptdp_state_add_fp8_history(&s->final, H) != 0)
            return PTDP_ENOMEM;
        c->final_state = &s->final;
    }
    if (out->save_init != NULL) {
        if (ptdp_state_init(&s->init, &c->model, c->optimizer, momentum) != 0)
            return PTDP_ENOMEM;
        s->have_init = true;
        if (H > 0 && ptdp_state_add_fp8_history(&s->init, H) != 0)
            return PTDP_ENOMEM;
        c->init_state = &s->init;
    }
    return out->dump != NULL ? dump_buffers(c) : PTDP_OK;
}

static void release_run(ptdp_train_config *c, run_states *s)
{
    if (s->have_final)
        ptdp_state_free(&s->final);
    if (s->have_init)
        ptdp_state_free(&s->init);
    c->final_state = c->init_state = NULL;
    free(c->dump_x);
    free(c->dump_tokens);
    free(c->dump_y);
    c->dump_x = NULL;
    c->dump_tokens = NULL;
    c->dump_y = NULL;
}

/* Train, a line per step (or the progress bar).  A process that fails
 * (MPI) keeps the --log of its completed steps before the job ends
 * (keep_log).  Returns ptdp_train's status, the reason in msg. */
static int run_training(ptdp_train_config *c, const ptdp_launch_opts *opts, const ptdp_train_outputs *out,
                        ptdp_launch_result *lr, ptdp_train_result *res, char *msg, size_t len)
{
    printer pr = { .quiet = out->quiet, .tty = isatty(STDERR_FILENO), .steps = c->steps,
                   .first = c->resume ? c->resume->step + 1 : 1, .what = "training" };
    memset(lr, 0, sizeof *lr);
    memset(res, 0, sizeof *res);
    ptdp_launch_opts o = *opts;
    o.result = lr;
    log_keeper keeper = { .path = out->log, .res = res };
    o.before_abort = keep_log;
    o.before_abort_ctx = &keeper;
    o.keep_traces = out->html != NULL;   /* the page draws each device's timeline */
    return ptdp_train(c, &o, print_step, &pr, res, msg, len);
}

/* After a run that completed: the per-device report, the pipeline's lines,
 * and the model's own (what a micro-batch keeps, its counters). */
static void print_summary(const ptdp_train_config *c, const ptdp_launch_result *lr, const ptdp_train_result *res,
                          const ptdp_launch_opts *opts)
{
    const ptdp_model_cli *cli = ptdp_model_cli_of(&c->model);
    ptdp_report_print(c, lr, res, opts->algo, opts->profile);
    if (c->pp > 1)
        print_pipeline(c, lr, res);
    if (cli->summary != NULL)
        cli->summary(c, lr);
    if (cli->print_stats != NULL)
        cli->print_stats(c, res);
}

int ptdp_train_and_report(ptdp_train_config *c, const ptdp_launch_opts *opts, const ptdp_train_outputs *out)
{
    /* One process per device (--backend mpi): every process trains and
     * merges its tables, rank 0 alone prints (the others are quiet) and
     * writes the files and the --check. */
    const bool root = ptdp_host_is_root(opts);
    run_states states;
    if (prepare_run(c, out, &states) != 0) {
        fprintf(stderr, "ptdp train: host out of memory\n");
        release_run(c, &states);
        return PTDP_EXIT_FAIL;
    }
    print_header(c, out->data_name, opts->profile != NULL ? opts->profile : ptdp_profile_default());
    char msg[PTDP_MSG_MAX];
    ptdp_launch_result lr;
    ptdp_train_result res;
    int status = PTDP_EXIT_OK;
    int rc = run_training(c, opts, out, &lr, &res, msg, sizeof msg);
    /* Every output on its own: one that cannot be written is reported and
     * makes the exit status 1, and the others are still written. */
    if (lr.trace_status != 0) {
        fprintf(stderr, "ptdp train: --trace %s\n", lr.trace_message);
        status = PTDP_EXIT_FAIL;
    }
    if (rc != 0) {
        report_failure(out, &res, rc, msg);
        status = PTDP_EXIT_FAIL;
    } else {
        print_summary(c, &lr, &res, opts);
        if (root && write_outputs(c, opts, out, &lr, &res, &states.init, &states.final) != PTDP_EXIT_OK)
            status = PTDP_EXIT_FAIL;
        char verdict[256] = "";
        if (root && out->check && status == PTDP_EXIT_OK)
            status = check_against_baseline(c, opts, &res, &states.final, verdict, sizeof verdict);
        if (root && out->html != NULL) {
            if (ptdp_train_write_page("train", out->html, c, opts, &lr, &res, verdict[0] ? verdict : NULL) != 0)
                status = PTDP_EXIT_FAIL;
            else
                printf("wrote %s\n", out->html);
        }
    }
    ptdp_train_result_free(&res);
    ptdp_launch_result_free(&lr);
    release_run(c, &states);
    return status;
}
