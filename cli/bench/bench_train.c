/*
 * bench_train.c — `ptdp bench train`: how fast does the reference MLP train,
 * and how close is it to what this machine allows?
 *
 * The fixed model: d_in 1024, hidden 1024, ffn 4096, 4 blocks,
 * 10 classes, global batch B = 64, AdamW, in the build's precision.  One
 * training step costs, counting 2 m n k per product (ops.h):
 *
 *     forward   2 B (d_in h + 2 L h ffn + h C)      ≈  4.4 GFLOP
 *     backward  twice the forward (dx and dW)        ≈  8.7 GFLOP
 *     AdamW     15 flops on each of the 34.6 M parameters, but memory-bound:
 *               it reads parameters, gradients, m and v and writes back three
 *               of them, 7 x 139 MB in float, whatever the batch
 *
 * What is measured, all in this one run, every time the median over the
 * timed steps (the first `--warmup` steps of every measurement are not
 * timed):
 *
 *   1. the baseline, taken apart — one device runs the library's own pieces
 *      in the order ptdp_train runs them, timing each phase:
 *          forward + backward     ptdp_model_forward, ptdp_model_backward
 *          optimizer              gradient norm (ptdp_sum_squares),
 *                                 ptdp_adamw_step, zero the gradients
 *          GEMMs alone            the same matrix products, same shapes and
 *                                 transposes, through the same ptdp_matmul
 *                                 (the library's one door to BLAS), with
 *                                 nothing around them
 *      forward + backward / GEMMs alone is what everything that is not a
 *      matrix product (bias, GELU, softmax, residual, copies) costs.  And
 *      the machine's own GEMM speed: one square 2048^3 product through the
 *      same door on the same thread; the step's GEMMs at their GFLOP/s over
 *      its GFLOP/s is how well their shapes (attention's small per-head
 *      products, the transposes) use the machine.
 *   2. ptdp_train with dp = 1 and with dp = 2 on the same global batch (and
 *      dp = 2 with ZeRO-1, the optimizer step sharded, when the build has
 *      it): the wall time of a step as the training loop logs it (largest
 *      device).  dp = 1 runs twice, just before the phases of 1 and just
 *      after them, and its step is the median of both runs' timed steps:
 *      the loop's target compares it with the phases, a few percent, and a
 *      shared host's speed drifts by more than that over a minute.
 *      And dp = 1 again with every core: the device's products shared by
 *      ptdp_blas_threads(--blas-threads, 1) threads (default: all cores,
 *      or OPENBLAS_NUM_THREADS), what a student's one-device run gets on
 *      a laptop; the same losses (src/nn/blas.c).  Every other measurement
 *      keeps one thread per device, so the speed-ups below compare devices,
 *      not thread counts.
 *   3. the hardware's own limit for two devices: one baseline run at the
 *      per-device batch B/2 alone, then two such runs at the same time (two
 *      host threads, each calling ptdp_train):
 *
 *      Both speed-ups are measured against the same reference, the
 *      baseline at the per-device batch: one device running B/2.
 *
 *          concurrent speed-up = 2 t(B/2 alone) / t(B/2 concurrently)   ≤ 2
 *          dp = 2 speed-up     = 2 t(B/2 alone) / t(dp = 2, B)
 *          target: dp = 2 / concurrent = t(concurrently) / t(dp = 2)  ≥ 0.85
 *
 *      Two independent runs share nothing but the machine (cores, caches,
 *      memory bandwidth); dp = 2 does the same work plus the gradient
 *      all-reduce and the lock-step it imposes — so the ratio is exactly
 *      what data parallelism costs over the hardware's own limit.
 *
 *      For information, the speed-up over ONE device on the whole batch B,
 *      t(dp = 1, B) / t(dp = 2, B), is lower: it also contains
 *          t(B) / (2 t(B/2 alone))     how a step's time scales with its batch
 *      which is below 1 whatever DP does (the optimizer costs the same at
 *      any batch, small GEMMs run slower) — unless DP also shares the
 *      optimizer step (ZeRO-1), which independent runs cannot.
 *
 * A fast wrong answer is not reported: the losses of (1), of dp = 2 and of
 * ZeRO-1 must agree with the dp = 1 run's by --check's rule, or the command
 * fails.
 * bench/train.sh runs this beside the same model in PyTorch and
 * prints the ratios against the targets of docs/benchmarks.md ("Training benchmark").
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../args.h"
#include "../model_flags.h"
#include "bench.h"
#include "ptdp/clock.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/launch.h"
#include "ptdp/mesh.h"
#include "ptdp/model.h"
#include "ptdp/models.h"
#include "ptdp/ops.h"
#include "ptdp/optim.h"
#include "ptdp/train.h"

#define MAX_STEPS 1000

/* What `ptdp bench train` was asked for: filled by parse, checked by
 * validate, used by every measurement. */
typedef struct {
    ptdp_model_config model;
    int batch, steps, warmup;
    bool json;
    double watchdog_s;
    int blas_threads;              /* the all-cores line; 0 = every core   */
    int attention;                 /* --attention: 0 full, 1 tiled, -1 not given */
    bool attention_tiled;          /* settled: ptdp_attention_tiles (args.h) */
} bench_cfg;

static bench_cfg bench_defaults(void)
{
    bench_cfg d = {
        .model = ptdp_model_default_config(),
        .batch = 64, .steps = 8, .warmup = 2, .watchdog_s = PTDP_DEFAULT_WATCHDOG_S, .attention = -1,
    };
    const ptdp_model_cli *cli = ptdp_model_cli_of(&d.model);   /* the benchmark's sizes of it */
    if (cli->bench_defaults != NULL)
        cli->bench_defaults(&d.model, &d.batch);
    return d;
}

/* The largest model a benchmark run takes (model_flags.h). */

/* ---- statistics ---------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of x[0..n), reordering x. */
static double median(double *x, int n)
{
    if (n <= 0)
        return 0;
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* ---- the GEMMs of one step, alone ----------------------------------------- */

/* The products of one forward + backward, recorded as they ran
 * (ptdp_gemm_log, ops.h), are played again through the same door,
 * ptdp_matmul, on operands of their shapes: the only difference between
 * the two measurements is everything around the products.  Every product
 * gets operands of its own, so the GEMMs alone touch as much memory as
 * the model's (weights, activations, gradients). */
typedef struct {
    ptdp_tensor c, a, b;
    ptdp_gemm_shape g;
} gemm_call;

typedef struct {
    gemm_call *calls;
    int ncalls;
    double flops;
} gemm_plan;

/* A rows x cols operand in the arena, filled with ordinary numbers (no
 * denormals, which would make the products slow for the wrong reason). */
static int scratch(ptdp_device *dev, ptdp_tensor *t, const char *name, int rows, int cols)
{
    int rc = ptdp_tensor_alloc(dev, t, name, PTDP_MEM_ACTS, rows, cols);
    size_t n = ptdp_tensor_numel(*t);
    for (size_t i = 0; rc == 0 && i < n; i++)
        t->data[i] = (ptdp_real)(0.01 * (double)((int)(i % 13) - 6));
    return rc;
}

int ptdp_bench_gemm_operands(ptdp_device *dev, const ptdp_gemm_shape *g, ptdp_tensor *a, ptdp_tensor *b,
                             ptdp_tensor *c)
{
    int rc;
    if ((rc = scratch(dev, a, "gemm.a", g->trans_a ? g->k : g->m, g->trans_a ? g->m : g->k)) != 0 ||
        (rc = scratch(dev, b, "gemm.b", g->trans_b ? g->n : g->k, g->trans_b ? g->k : g->n)) != 0 ||
        (rc = scratch(dev, c, "gemm.c", g->m, g->n)) != 0)
        return rc;
    return PTDP_OK;
}

static int gemm_plan_init(ptdp_device *dev, gemm_plan *p, const ptdp_gemm_log *log)
{
    memset(p, 0, sizeof *p);
    if (log->overflow || (p->calls = calloc((size_t)(log->n > 0 ? log->n : 1), sizeof *p->calls)) == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "host out of memory");
    for (int i = 0; i < log->n; i++) {
        const ptdp_gemm_shape *g = &log->calls[i];
        gemm_call *c = &p->calls[p->ncalls++];
        c->g = *g;
        int rc = ptdp_bench_gemm_operands(dev, g, &c->a, &c->b, &c->c);
        if (rc != 0)
            return rc;
        p->flops += ptdp_matmul_flops(g->m, g->n, g->k);
    }
    return PTDP_OK;
}

static void gemm_plan_run(const gemm_plan *p)
{
    for (int i = 0; i < p->ncalls; i++) {
        const gemm_call *c = &p->calls[i];
        ptdp_matmul(c->c, c->a, c->g.trans_a, c->b, c->g.trans_b, c->g.alpha, c->g.beta);
    }
}

static void gemm_plan_free(ptdp_device *dev, gemm_plan *p)
{
    for (int i = 0; i < p->ncalls; i++) {
        ptdp_tensor_free(dev, &p->calls[i].a);
        ptdp_tensor_free(dev, &p->calls[i].b);
        ptdp_tensor_free(dev, &p->calls[i].c);
    }
    free(p->calls);
    p->calls = NULL;
}

/* ---- 1. the baseline, phase by phase, on one device ---------------------- */

typedef struct {
    const bench_cfg *cfg;
    double *fwd_bwd, *optim, *gemm;    /* [timed steps] seconds          */
    double *loss;                      /* [steps], every step            */
    double flops, gemm_flops;          /* of one forward + backward      */
    double square_s;                   /* one SQUARE_N^3 product, median */
} phase_run;

/* The machine's GEMM speed, as the step's products are held against it:
 * one large square product, n^3 multiply-adds, through the same door
 * (ptdp_matmul) on the device's threads (here one) — OpenBLAS at its best
 * shape.  `ptdp bench floor` times it on every core (bench.h). */
#define SQUARE_N PTDP_BENCH_SQUARE_N

int ptdp_bench_square_gemm(ptdp_device *dev, int reps, double *median_s)
{
    ptdp_tensor a = { 0 }, b = { 0 }, c = { 0 };
    double t[8];
    int rc = scratch(dev, &a, "square.a", SQUARE_N, SQUARE_N);
    if (rc == 0)
        rc = scratch(dev, &b, "square.b", SQUARE_N, SQUARE_N);
    if (rc == 0)
        rc = scratch(dev, &c, "square.c", SQUARE_N, SQUARE_N);
    for (int i = 0; rc == 0 && i <= reps && i < 8; i++) {   /* the first one a warm-up */
        const double t0 = ptdp_wall_now();
        ptdp_matmul(c, a, false, b, false, 1.0, 0.0);
        if (i > 0)
            t[i - 1] = ptdp_wall_now() - t0;
    }
    if (rc == 0)
        *median_s = median(t, reps < 7 ? reps : 7);
    ptdp_tensor_free(dev, &c);
    ptdp_tensor_free(dev, &b);
    ptdp_tensor_free(dev, &a);
    return rc;
}

/* Everything the phase-by-phase baseline holds on its device. */
typedef struct {
    ptdp_mesh mesh;
    ptdp_model model;
    gemm_plan plan;
    ptdp_gemm_log log;
    ptdp_real *exp_avg, *exp_avg_sq;
} phase_state;

static int phase_setup(ptdp_device *dev, phase_state *st, const bench_cfg *c)
{
    int rc;
    if ((rc = ptdp_mesh_init(dev, 1, 1, 1, &st->mesh)) != 0)
        return rc;
    /* Seed 1, as the ptdp_train runs below: the losses must agree. */
    if ((rc = ptdp_model_init(dev, &st->model, &c->model, &st->mesh, NULL, 1, 0.0)) != 0)
        return rc;
    st->model.attention_tiled = c->attention_tiled;   /* as ptdp train sets it, after init */
    size_t bytes = st->model.numel * sizeof(ptdp_real);
    if ((st->exp_avg = ptdp_alloc(dev, bytes, PTDP_MEM_OPTIM, "optim.exp_avg")) == NULL ||
        (st->exp_avg_sq = ptdp_alloc(dev, bytes, PTDP_MEM_OPTIM, "optim.exp_avg_sq")) == NULL)
        return PTDP_ENOMEM;
    return PTDP_OK;
}

static void phase_teardown(ptdp_device *dev, phase_state *st)
{
    gemm_plan_free(dev, &st->plan);
    free(st->log.calls);
    ptdp_free(dev, st->exp_avg_sq);
    ptdp_free(dev, st->exp_avg);
    if (st->model.ops != NULL)
        ptdp_model_free(dev, &st->model);
    ptdp_mesh_free(&st->mesh);
}

/* One step as ptdp_train takes it on one device, a timestamp between phases,
 * then the step's GEMMs again on their own.  The first step records them
 * (and makes their operands), untimed, as a warm-up step. */
static int phase_device(ptdp_device *dev, void *arg)
{
    phase_run *r = arg;
    const bench_cfg *c = r->cfg;
    int b = c->batch;
    phase_state st;
    memset(&st, 0, sizeof st);
    int rc = phase_setup(dev, &st, c);
    ptdp_model *m = &st.model;
    size_t bytes = m->numel * sizeof(ptdp_real);
    ptdp_adamw_config ac = ptdp_adamw_default_config();

    for (int s = 0; rc == 0 && s < c->warmup + c->steps; s++) {
        ptdp_progress("[2/8] baseline phases and GEMMs alone, step %d/%d", s + 1, c->warmup + c->steps);
        ptdp_batch batch = { .first = (int64_t)s * b, .rows = b };
        if ((rc = ptdp_batch_load(dev, m, &batch)) != 0)      /* not timed */
            break;

        if (s == 0)
            ptdp_gemm_log_start(&st.log);
        double c0 = dev->clock.compute_s, t0 = ptdp_wall_now();
        ptdp_acts acts;
        if ((rc = ptdp_model_forward(dev, m, &acts, &batch, (ptdp_tensor){ 0 }, s, false, NULL)) != 0 ||
            (rc = ptdp_model_backward(dev, m, &acts, NULL, 1.0 / ((double)b * m->label_cols), NULL)) != 0)
            break;
        double t1 = ptdp_wall_now();
        if (s == 0) {
            ptdp_gemm_log_stop();
            /* the flops as the model counts them for the virtual clock */
            r->flops = (dev->clock.compute_s - c0) * ptdp_profile_peak(dev->profile, dev->bf16);
            if ((rc = gemm_plan_init(dev, &st.plan, &st.log)) != 0)   /* untimed */
                break;
        }
        double t1b = ptdp_wall_now();
        /* (the norm is only logged here, as in ptdp_train without --clip-grad;
         * computed all the same, because the baseline computes it) */
        volatile double norm = sqrt(ptdp_sum_squares(m->flat_g, m->numel));
        (void)norm;
        ptdp_adamw_step(m->flat_w, m->flat_g, st.exp_avg, st.exp_avg_sq, m->numel, &ac, s + 1);
        memset(m->flat_g, 0, bytes);
        double t2 = ptdp_wall_now();
        gemm_plan_run(&st.plan);
        double t3 = ptdp_wall_now();

        r->loss[s] = acts.loss_sum / ((double)b * m->label_cols);
        if (s >= c->warmup) {
            r->fwd_bwd[s - c->warmup] = t1 - t0;
            r->optim[s - c->warmup] = t2 - t1b;
            r->gemm[s - c->warmup] = t3 - t2;
        }
        ptdp_batch_free(dev, &batch);
    }
    r->gemm_flops = st.plan.flops;
    ptdp_gemm_log_stop();
    phase_teardown(dev, &st);
    if (rc == 0) {
        ptdp_progress("[2/8] the machine's square %d^3 GEMM", SQUARE_N);
        rc = ptdp_bench_square_gemm(dev, 3, &r->square_s);
    }
    return rc;
}

/* ---- 2 and 3. ptdp_train runs -------------------------------------------- */

typedef struct {
    ptdp_train_config tc;
    const bench_cfg *cfg;
    const char *label;             /* for progress lines, NULL: none         */
    int blas_threads;              /* threads per device (1 unless asked)    */
    double step_s;                 /* median wall time of the timed steps    */
    double *loss;                  /* [steps] every step's loss, if not NULL */
    double *times;                 /* [timed steps] their wall times, if not
                                      NULL                                   */
    int rc;
    char msg[PTDP_MSG_MAX];
} train_run;

static void train_init(train_run *t, const bench_cfg *c, int dp, int batch, const char *label)
{
    memset(t, 0, sizeof *t);
    t->cfg = c;
    t->label = label;
    t->tc.model = c->model;
    t->tc.attention_tiled = c->attention_tiled;
    t->tc.dp = dp;
    t->tc.tp = t->tc.pp = 1;
    t->tc.micro_batches = 1;
    t->tc.batch = batch;
    t->tc.steps = c->warmup + c->steps;
    t->tc.optimizer = PTDP_OPT_ADAMW;
    t->tc.lr = 1e-3;
    t->tc.bucket_mb = 25;          /* PyTorch DDP's default bucket size      */
    t->tc.seed = 1;
    t->tc.schedule = ptdp_schedule_default();
    t->blas_threads = 1;
}

static void train_progress(const ptdp_step_log *l, void *ctx)
{
    const train_run *t = ctx;
    ptdp_progress("%s, step %ld/%d", t->label, l->step, t->tc.steps);
}

static void *train_thread(void *arg)
{
    train_run *t = arg;
    ptdp_launch_opts o = { 0 };
    o.watchdog_s = t->cfg->watchdog_s;
    o.blas_threads = t->blas_threads;
    ptdp_train_result res;
    memset(&res, 0, sizeof res);
    t->rc = ptdp_train(&t->tc, &o, t->label ? train_progress : NULL, t, &res, t->msg, sizeof t->msg);
    if (t->rc == 0) {
        double w[MAX_STEPS];
        int n = 0;
        for (int s = t->cfg->warmup; s < res.steps; s++)
            w[n++] = res.log[s].wall_s;
        for (int s = 0; t->times != NULL && s < n; s++)
            t->times[s] = w[s];
        t->step_s = median(w, n);
        for (int s = 0; t->loss != NULL && s < res.steps; s++)
            t->loss[s] = res.log[s].loss;
    }
    ptdp_train_result_free(&res);
    return NULL;
}

/* Two runs at the same time, each in its own host thread. */
static int run_concurrently(train_run *a, train_run *b)
{
    pthread_t ta, tb;
    if (pthread_create(&ta, NULL, train_thread, a) != 0)
        return PTDP_ENOMEM;
    if (pthread_create(&tb, NULL, train_thread, b) != 0) {
        pthread_join(ta, NULL);
        return PTDP_ENOMEM;
    }
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    return a->rc ? a->rc : b->rc;
}

/* ---- every measurement, and the losses that must agree ------------------- */

typedef struct {
    double fwd_bwd_s, optim_s, gemm_s, flops, gemm_flops;
    double square_s;               /* one SQUARE_N^3 product (square_gemm)   */
    double base_s, dp2_s, zero1_s, alone_s, conc_s;   /* zero1_s 0: not measured */
    double threads_s;              /* dp=1 with blas_threads per device      */
    int blas_threads;
    char zero1_note[PTDP_MSG_MAX];
} bench_result;

static bool losses_agree(const double *a, const double *b, int n, int *bad)
{
    for (int s = 0; s < n; s++)
        if (!isfinite(a[s]) || !ptdp_check_value(a[s], b[s], PTDP_TOLERANCE)) {
            *bad = s;
            return false;
        }
    return true;
}

/* A run's losses against dp=1's: 0, or print which step differs and 1. */
static int check_losses(const char *who, const double *loss, const double *base, int n)
{
    int bad;
    if (losses_agree(loss, base, n, &bad))
        return 0;
    fprintf(stderr, "ptdp bench train: %s's loss at step %d (%.9g) differs from ptdp_train dp=1's (%.9g)\n",
            who, bad + 1, loss[bad], base[bad]);
    return 1;
}

/* 1. The baseline's phases and its GEMMs alone, on one device: fills out's
 *    fwd_bwd_s, optim_s, gemm_s and gemm_flops, and every step's loss. */
static int measure_phases(const bench_cfg *c, double *loss, bench_result *out)
{
    int total = c->warmup + c->steps;
    double *times = calloc((size_t)3 * total, sizeof *times);
    if (times == NULL) {
        fprintf(stderr, "ptdp bench train: host out of memory\n");
        return PTDP_EXIT_FAIL;
    }
    phase_run pr = { .cfg = c, .fwd_bwd = times, .optim = times + total, .gemm = times + 2 * total,
                     .loss = loss };
    ptdp_launch_result lr;
    ptdp_launch_opts o = { 0 };
    o.watchdog_s = c->watchdog_s;
    o.blas_threads = 1;
    o.result = &lr;
    int rc = ptdp_launch(1, phase_device, &pr, &o);
    if (rc != 0) {
        ptdp_progress_done();
        fprintf(stderr, "ptdp bench train: baseline: %s\n", lr.message);
    } else {
        out->fwd_bwd_s = median(pr.fwd_bwd, c->steps);
        out->optim_s = median(pr.optim, c->steps);
        out->gemm_s = median(pr.gemm, c->steps);
        out->gemm_flops = pr.gemm_flops;
        out->flops = pr.flops;
        out->square_s = pr.square_s;
    }
    ptdp_launch_result_free(&lr);
    free(times);
    return rc != 0 ? PTDP_EXIT_FAIL : PTDP_EXIT_OK;
}

/* Every step's loss of the runs that must agree with one another; and the
 * timed steps of dp=1 run before the phases, which the one after them
 * joins (base_times: room for both). */
typedef struct {
    double *phases, *base, *dp2, *zero1, *threads, *before;
    double *base_times;
} run_losses;

/* 2. ptdp_train on the same global batch: dp = 1, dp = 2, and dp = 2 with
 *    ZeRO-1 (the optimizer step sharded, zero.h) where available;
 * 3. the hardware's limit: B/2 alone, then two B/2 runs at once.
 * Fills out's step times; *with_zero: whether ZeRO-1 ran. */
static int measure_training(const bench_cfg *c, const run_losses *l, bench_result *out, bool *with_zero)
{
    train_run base, threads, dp2, zero1, alone, conc[2];
    train_init(&base, c, 1, c->batch, "[3/8] ptdp_train dp=1, after the phases");
    train_init(&threads, c, 1, c->batch, "[4/8] ptdp_train dp=1, every core");
    threads.blas_threads = out->blas_threads = ptdp_blas_threads(c->blas_threads, 1);
    train_init(&dp2, c, 2, c->batch, "[5/8] ptdp_train dp=2");
    train_init(&zero1, c, 2, c->batch, "[6/8] ptdp_train dp=2 ZeRO-1");
    zero1.tc.zero = 1;
    base.loss = l->base;
    base.times = l->base_times + c->steps;
    threads.loss = l->threads;
    dp2.loss = l->dp2;
    zero1.loss = l->zero1;
    *with_zero = ptdp_train_validate(&zero1.tc, out->zero1_note, sizeof out->zero1_note) == 0;

    /* (only the first of the two concurrent runs reports progress: one
     * writer at a time) */
    train_init(&alone, c, 1, c->batch / 2, "[7/8] one run at B/2 alone");
    train_init(&conc[0], c, 1, c->batch / 2, "[8/8] two runs at B/2 at once");
    train_init(&conc[1], c, 1, c->batch / 2, NULL);

    train_run *order[] = { &base, &threads, &dp2, *with_zero ? &zero1 : NULL, &alone };
    train_run *failed = NULL;
    for (size_t i = 0; i < sizeof order / sizeof order[0] && failed == NULL; i++)
        if (order[i] != NULL && (train_thread(order[i]), order[i]->rc != 0))
            failed = order[i];
    if (failed == NULL && run_concurrently(&conc[0], &conc[1]) != 0)
        failed = conc[0].rc ? &conc[0] : &conc[1];
    ptdp_progress_done();
    if (failed != NULL) {
        fprintf(stderr, "ptdp bench train: %s: %s\n", failed->label ? failed->label : "concurrent runs",
                failed->msg[0] ? failed->msg : "cannot start a thread");
        return PTDP_EXIT_FAIL;
    }
    out->base_s = median(l->base_times, 2 * c->steps);   /* before and after the phases */
    out->threads_s = threads.step_s;
    out->dp2_s = dp2.step_s;
    out->zero1_s = *with_zero ? zero1.step_s : 0;
    out->alone_s = alone.step_s;
    out->conc_s = 0.5 * (conc[0].step_s + conc[1].step_s);
    return PTDP_EXIT_OK;
}

/* dp=1 before the phases, its timed steps into l->base_times: the step
 * is timed on both sides of the phases, so that a host whose speed drifts
 * over the minutes of a run (shared VMs do) moves the step and its phases
 * alike, and the loop's share (step / phases) is not the drift's. */
static int measure_before(const bench_cfg *c, const run_losses *l)
{
    train_run before;
    train_init(&before, c, 1, c->batch, "[1/8] ptdp_train dp=1, before the phases");
    before.loss = l->before;
    before.times = l->base_times;
    train_thread(&before);
    ptdp_progress_done();
    if (before.rc != 0) {
        fprintf(stderr, "ptdp bench train: %s: %s\n", before.label, before.msg);
        return PTDP_EXIT_FAIL;
    }
    return PTDP_EXIT_OK;
}

static int measure(const bench_cfg *c, bench_result *out)
{
    int total = c->warmup + c->steps;
    memset(out, 0, sizeof *out);
    double *buf = calloc((size_t)6 * total + 2 * (size_t)c->steps, sizeof *buf);
    if (buf == NULL) {
        fprintf(stderr, "ptdp bench train: host out of memory\n");
        return PTDP_EXIT_FAIL;
    }
    run_losses l = { .phases = buf, .base = buf + total, .dp2 = buf + 2 * total, .zero1 = buf + 3 * total,
                     .threads = buf + 4 * total, .before = buf + 5 * total, .base_times = buf + 6 * total };
    bool with_zero = false;
    int status = measure_before(c, &l);
    if (status == PTDP_EXIT_OK)
        status = measure_phases(c, l.phases, out);
    if (status == PTDP_EXIT_OK)
        status = measure_training(c, &l, out, &with_zero);

    /* No fast wrong answer: the same seed and data must give the same losses. */
    if (status == PTDP_EXIT_OK &&
        check_losses("dp=1 before the phases", l.before, l.base, total) +
        check_losses("the phase-by-phase baseline", l.phases, l.base, total) +
        check_losses("dp=1 on every core", l.threads, l.base, total) +
        check_losses("dp=2", l.dp2, l.base, total) +
        (with_zero ? check_losses("dp=2 ZeRO-1", l.zero1, l.base, total) : 0) != 0)
        status = PTDP_EXIT_FAIL;
    free(buf);
    return status;
}

/* The speed-ups, and the two factors the dp=2 target splits into. */
typedef struct {
    double dp2, concurrent, fraction;   /* against one device at B/2; fraction = dp2 / concurrent */
    double dp2_over_dp1;  /* t(dp=1, B) / t(dp=2, B): against one device on the whole batch */
    double batch_scaling; /* t(B) / (2 t(B/2 alone)): a step at B vs two at B/2 */
} speedups;

static speedups speedups_of(const bench_result *r)
{
    speedups s;
    s.dp2 = 2 * r->alone_s / r->dp2_s;
    s.concurrent = 2 * r->alone_s / r->conc_s;
    s.fraction = r->conc_s / r->dp2_s;
    s.dp2_over_dp1 = r->base_s / r->dp2_s;
    s.batch_scaling = r->base_s / (2 * r->alone_s);
    return s;
}

/* Which kernels ran the products: the square product's speed is theirs
 * (OpenBLAS picks them for the CPU when it loads, or OPENBLAS_CORETYPE
 * does). */
static void print_kernels(void)
{
    const char *forced = getenv("OPENBLAS_CORETYPE");
    printf("  BLAS kernels: %s%s%s%s\n", ptdp_blas_kernels(), forced ? " (OPENBLAS_CORETYPE=" : "",
           forced ? forced : "", forced ? ")" : "");
}

/* GFLOP/s of the square product, 2 n^3 flops. */
static double square_gflops(const bench_result *r)
{
    return ptdp_matmul_flops(SQUARE_N, SQUARE_N, SQUARE_N) / r->square_s / 1e9;
}

static void print_json(const bench_cfg *c, const bench_result *r)
{
    double b = c->batch;
    speedups s = speedups_of(r);
    printf("{\"bench\": \"train\", \"attention\": \"%s\", \"dtype\": \"%s\", \"d_in\": %d, \"hidden\": %d, \"ffn\": %d, "
           "\"layers\": %d, \"classes\": %d, \"batch\": %d, \"steps\": %d, \"warmup\": %d, "
           "\"flops_per_step\": %.6g, \"gemm_flops_per_step\": %.6g, "
           "\"fwd_bwd_s\": %.6g, \"optimizer_s\": %.6g, \"gemm_s\": %.6g, \"fwd_bwd_over_gemm\": %.6g, "
           "\"fwd_bwd_gflops\": %.6g, \"gemm_gflops\": %.6g, "
           "\"baseline_step_s\": %.6g, \"baseline_samples_per_s\": %.6g, \"baseline_gflops\": %.6g, "
           "\"dp2_step_s\": %.6g, \"dp2_samples_per_s\": %.6g, \"dp2_gflops\": %.6g, ",
           c->attention_tiled ? "tiled" : "full", PTDP_REAL_NAME, ptdp_model_cli_get(&c->model, "--d-in"), c->model.hidden, c->model.ffn, c->model.layers,
           ptdp_model_cli_get(&c->model, "--classes"), c->batch, c->steps, c->warmup, r->flops, r->gemm_flops,
           r->fwd_bwd_s, r->optim_s, r->gemm_s, r->fwd_bwd_s / r->gemm_s,
           r->flops / r->fwd_bwd_s / 1e9, r->gemm_flops / r->gemm_s / 1e9,
           r->base_s, b / r->base_s, r->flops / r->base_s / 1e9,
           r->dp2_s, b / r->dp2_s, r->flops / r->dp2_s / 1e9);
    printf("\"model\": \"%s\", ", ptdp_model_name(&c->model));
    const ptdp_model_cli *cli = ptdp_model_cli_of(&c->model);
    if (cli->bench_json_keys != NULL)
        cli->bench_json_keys(stdout, &c->model, c->batch, r->base_s);
    printf("\"square_gemm_n\": %d, \"square_gemm_s\": %.6g, \"square_gemm_gflops\": %.6g, \"blas_kernels\": \"%s\", "
           "\"gemm_share_of_square\": %.6g, ", SQUARE_N, r->square_s, square_gflops(r), ptdp_blas_kernels(),
           r->gemm_flops / r->gemm_s / 1e9 / square_gflops(r));
    printf("\"blas_threads\": %d, \"baseline_threads_step_s\": %.6g, \"threads_speedup\": %.6g, ",
           r->blas_threads, r->threads_s, r->base_s / r->threads_s);
    if (r->zero1_s > 0)
        printf("\"dp2_zero1_step_s\": %.6g, \"dp2_zero1_speedup\": %.6g, ", r->zero1_s, r->base_s / r->zero1_s);
    printf("\"alone_half_step_s\": %.6g, \"concurrent_half_step_s\": %.6g, "
           "\"dp2_speedup\": %.6g, \"concurrent_speedup\": %.6g, \"dp2_fraction_of_concurrent\": %.6g, "
           "\"dp2_speedup_over_dp1\": %.6g, \"batch_scaling\": %.6g}\n",
           r->alone_s, r->conc_s, s.dp2, s.concurrent, s.fraction, s.dp2_over_dp1, s.batch_scaling);
}

static void print_table(const bench_cfg *c, const bench_result *r)
{
    double b = c->batch;
    speedups s = speedups_of(r);
    const ptdp_model_cli *cli = ptdp_model_cli_of(&c->model);
    const bool is_default = ptdp_model_of(&c->model) == ptdp_model_at(0);
    printf("ptdp bench train (%s): ", PTDP_REAL_NAME);
    if (cli->bench_describe != NULL)
        cli->bench_describe(stdout, &c->model);
    else
        printf("%s, hidden %d, ffn %d, %d layers", ptdp_model_name(&c->model), c->model.hidden, c->model.ffn,
               c->model.layers);
    printf("; batch %d%s, AdamW%s\n", c->batch, ptdp_model_of(&c->model)->caps.sequences ? " sequences" : "",
           c->attention_tiled ? ", attention in tiles" : "");
    printf("  %.2f GFLOP per step (forward + backward); median of %d steps after %d warm-up\n\n",
           r->flops / 1e9, c->steps, c->warmup);
    printf("  %-46s %10s %12s %10s\n", "", "time (ms)", "samples/s", "GFLOP/s");
    printf("  %-46s %10.1f %12s %10.1f\n", "baseline forward + backward", 1e3 * r->fwd_bwd_s, "",
           r->flops / r->fwd_bwd_s / 1e9);
    printf("  %-46s %10.1f %12s %10.1f\n", "  its GEMMs alone (ptdp_matmul, same calls)", 1e3 * r->gemm_s, "",
           r->gemm_flops / r->gemm_s / 1e9);
    printf("  %-46s %10.1f %12s %10.1f\n", "  one square 2048^3 GEMM (the machine's speed)", 1e3 * r->square_s, "",
           square_gflops(r));
    printf("  %-46s %10.1f\n", "baseline optimizer (norm, AdamW, zero grads)", 1e3 * r->optim_s);
    printf("  %-46s %10.1f %12.1f %10.1f\n", "baseline step (ptdp train, dp=1)", 1e3 * r->base_s,
           b / r->base_s, r->flops / r->base_s / 1e9);
    char label[64];
    snprintf(label, sizeof label, "baseline step, %d thread%s (every core)", r->blas_threads,
             r->blas_threads == 1 ? "" : "s");
    printf("  %-46s %10.1f %12.1f %10.1f\n", label, 1e3 * r->threads_s, b / r->threads_s,
           r->flops / r->threads_s / 1e9);
    printf("  %-46s %10.1f %12.1f %10.1f\n", "dp=2 step (ptdp train, same global batch)", 1e3 * r->dp2_s,
           b / r->dp2_s, r->flops / r->dp2_s / 1e9);
    if (r->zero1_s > 0)
        printf("  %-46s %10.1f %12.1f %10.1f\n", "dp=2 step with ZeRO-1", 1e3 * r->zero1_s,
               b / r->zero1_s, r->flops / r->zero1_s / 1e9);
    else
        printf("  %-46s %10s   (%s)\n", "dp=2 step with ZeRO-1", "-", r->zero1_note);
    printf("  %-46s %10.1f %12.1f\n", "one baseline at batch B/2, alone", 1e3 * r->alone_s, b / 2 / r->alone_s);
    printf("  %-46s %10.1f %12.1f\n", "two baselines at batch B/2, concurrently", 1e3 * r->conc_s, b / r->conc_s);
    /* the model's own target: a transformer's softmax, LayerNorms and masks
     * are work no GEMM does */
    printf("\n  forward + backward / GEMMs alone       %6.3f   (target <= %.2f)\n", r->fwd_bwd_s / r->gemm_s,
           cli->bench_gemm_target > 0 ? cli->bench_gemm_target : 1.08);
    printf("  the step's GEMMs / the square GEMM's speed  %5.1f %%  (%s)\n",   /* the MLP's 64-row products: for information */
           100 * r->gemm_flops / r->gemm_s / 1e9 / square_gflops(r), is_default ? "for information" : "target >= 90 %");
    print_kernels();
    printf("  speed-ups against one device at the per-device batch B/2:\n");
    printf("    dp=2                                 %6.3f   = 2 t(B/2 alone) / t(dp=2)\n", s.dp2);
    printf("    two runs concurrently (the hardware) %6.3f   = 2 t(B/2 alone) / t(B/2 concurrently)\n",
           s.concurrent);
    printf("    dp=2 / concurrent                    %6.3f   = t(concurrently) / t(dp=2)  (target >= 0.85)\n",
           s.fraction);
    printf("  for information, against one device on the whole batch B:\n");
    snprintf(label, sizeof label, "%d threads over 1 (dp=1)", r->blas_threads);
    printf("    %-37s %6.3f   = t(1 thread) / t(%d threads)\n", label, r->base_s / r->threads_s,
           r->blas_threads);
    printf("    dp=2 speed-up over dp=1              %6.3f   = t(dp=1) / t(dp=2)\n", s.dp2_over_dp1);
    printf("    of which t(B) / 2 t(B/2 alone)       %6.3f   how a step's time scales with its batch\n",
           s.batch_scaling);
    printf("\nThe PyTorch comparison (step time <= %.2fx PyTorch's): bench/train.sh%s%s\n",
           cli->bench_torch_target > 0 ? cli->bench_torch_target : 0.8, is_default ? "" : " --model ",
           is_default ? "" : ptdp_model_name(&c->model));
}

/* ---- parse, validate, run ------------------------------------------------- */

static void usage(void)
{
    printf("usage: ptdp bench train [--steps N] [--warmup N] [--json] [--watchdog S] [--blas-threads N]\n"
           "                        [--d-in N --hidden N --ffn N --layers N --classes N --batch B]\n"
           "\n"
           "Time the training step of the reference %s: the baseline's forward + backward\n"
           "against its GEMMs alone, its optimizer, dp=1 and dp=2 on the same global batch,\n"
           "and two independent baseline runs at batch B/2 at once (the speed-up the machine\n"
           "allows two devices), each device on one thread; and dp=1 on every core.  AdamW, seed 1; every time is a median over the timed steps.\n"
           "\n"
           "  --steps N      timed steps per measurement (default 8)\n"
           "  --warmup N     untimed steps before them (default 2)\n", ptdp_model_cli_noun(ptdp_model_at(0)));
    const bench_cfg d = bench_defaults();
    ptdp_model_flags_help(stdout, &d.model);
    printf("  --batch B      global batch, even (default 64)\n"
           "  --json         one JSON object on stdout instead of the table\n"
           "  --watchdog S   fail if a collective waits longer than S seconds (default 60)\n"
           "  --blas-threads N  threads of the every-core line, 1..256 (default: the cores,\n"
           "                 or OPENBLAS_NUM_THREADS)\n"
           "  --attention full|tiled  a model's attention core as ptdp train --attention runs it\n"
           "                 (default: tiled when --seq-len is over 64, attention_tiled.c)\n");
}

/* Each flag as typed: 0, -1 after --help, or PTDP_EXIT_USAGE. */
static int parse(int argc, char **argv, bench_cfg *c)
{
    *c = bench_defaults();
    bool batch_given = false;
    ptdp_model_flags mf;
    ptdp_model_flags_init(&mf, &c->model);
    int batch[PTDP_MAX_MODELS];   /* each model's default batch here */
    for (int i = 0; i < ptdp_model_count() && i < PTDP_MAX_MODELS; i++) {
        const ptdp_model_ops *ops = ptdp_model_at(i);
        const ptdp_model_cli *cli = ptdp_model_cli_for(ops);
        batch[i] = c->batch;
        if (ops != ptdp_model_of(&c->model) && cli->bench_defaults != NULL)   /* the default's: bench_defaults() */
            cli->bench_defaults(ptdp_model_flags_defaults(&mf, ops), &batch[i]);
    }
    ptdp_args a;
    ptdp_args_init(&a, "bench train", argc, argv, 1);
    while (ptdp_args_next(&a)) {
        int rc;
        if (ptdp_args_is(&a, "--help")) { usage(); return -1; }
        else if (ptdp_args_is(&a, "--steps")) rc = ptdp_args_int(&a, 1, MAX_STEPS / 2, &c->steps);
        else if (ptdp_args_is(&a, "--warmup")) rc = ptdp_args_int(&a, 0, MAX_STEPS / 2, &c->warmup);
        else if (ptdp_model_flag_is(&a)) rc = ptdp_model_flag_read(&a, PTDP_FLAGS_BENCH, &mf);
        else if (ptdp_args_is(&a, "--batch")) {
            rc = ptdp_args_int(&a, 2, 1 << 16, &c->batch);
            batch_given = true;
        }
        else if (ptdp_args_is(&a, "--json")) rc = ptdp_args_switch(&a, &c->json);
        else if (ptdp_args_is(&a, "--watchdog")) rc = ptdp_args_double(&a, 0.1, 86400, &c->watchdog_s);
        else if (ptdp_args_is(&a, "--blas-threads")) rc = ptdp_args_int(&a, 1, 256, &c->blas_threads);
        else if (ptdp_args_is(&a, "--attention")) rc = ptdp_args_attention(&a, &c->attention);
        else rc = ptdp_args_unknown(&a);
        if (rc)
            return PTDP_EXIT_USAGE;
    }
    if (a.status || ptdp_model_flags_finish("bench train", &mf) != 0)
        return PTDP_EXIT_USAGE;
    c->model = mf.cfg;   /* the model's data, if any, lives until the process ends */
    c->attention_tiled = ptdp_attention_tiles(c->attention, ptdp_model_of(&c->model)->caps.attention, false,
                                              ptdp_model_positions(&c->model));
    for (int i = 0; !batch_given && i < ptdp_model_count() && i < PTDP_MAX_MODELS; i++)
        if (ptdp_model_at(i) == ptdp_model_of(&c->model))
            c->batch = batch[i];
    return 0;
}

/* The flags together, before the first measurement. */
static int validate(const bench_cfg *c)
{
    if (c->attention == 1 && !ptdp_model_of(&c->model)->caps.attention)   /* ptdp train's words */
        return ptdp_usage_error("bench train", "--attention tiled computes a model's attention in tiles, and "
                                "the %s has no attention", ptdp_model_cli_noun(ptdp_model_of(&c->model)));
    if (c->batch % 2 != 0)
        return ptdp_usage_error("bench train", "--batch %d must be even: dp=2 and the concurrent runs "
                                "use B/2 per device (try --batch %d)", c->batch, c->batch + 1);
    return 0;
}

static int run(const bench_cfg *c)
{
    bench_result r;
    int status = measure(c, &r);
    if (status != PTDP_EXIT_OK)
        return status;
    if (c->json)
        print_json(c, &r);
    else
        print_table(c, &r);
    return PTDP_EXIT_OK;
}

int ptdp_bench_train_cmd(int argc, char **argv)
{
    bench_cfg c;
    int rc = parse(argc, argv, &c);
    if (rc != 0)
        return rc < 0 ? PTDP_EXIT_OK : rc;
    if ((rc = validate(&c)) != 0)
        return rc;
    return run(&c);
}
