/*
 * bench_floor.c — `ptdp bench floor`: the least time a training step of a
 * model could take on N cores of this machine, from two measured speeds.
 *
 * A step is matrix products (forward, then dX and dW backward) and an
 * optimizer that streams every parameter's state through memory.  Neither
 * can run faster than the machine's best at it, so
 *
 *     floor = GEMM flops of a step  /  the square sgemm's FLOP/s on N threads
 *           + AdamW's bytes a step  /  the copy bandwidth of N threads
 *
 *     GEMM flops   the model's own count (its planning table's step_flops,
 *                  model_plan.h: MFU's count); for the GPT, R = B T rows,
 *                  6 flops per row and matmul parameter plus attention:
 *                    6 R (L (4 C^2 + 2 C F) + V C) + 12 L B T^2 C
 *                  = 72 B T L C^2 (1 + T/(6C) + V/(12 L C))   when F = 4C
 *                  (Q K^T and P V over all T^2 scores, as ptdp computes them)
 *     AdamW bytes  7 x sizeof(real) x N parameters: per parameter it reads
 *                  p, g, m, v and writes p, m, v
 *
 *     square sgemm   one device, N BLAS threads: C = A B, 2048^3, through
 *                    ptdp_matmul (bench_train.c), 2 n^3 flops; the best of
 *                    --reps, as STREAM keeps its best (the floor is the
 *                    machine at its fastest)
 *     copy           STREAM's copy c[i] = a[i] on N threads (bench_memory.c),
 *                    16 bytes an element as STREAM counts them
 *
 *     step  ┌──────────── GEMMs at the square sgemm's speed ────────────┬─ AdamW ─┐
 *     floor │ forward products │ backward products (dX, dW)            │ 28 B/par│
 *           └───────────────────────────────────────────────────────────┴─────────┘
 *
 * Nothing else a step does (LayerNorm, softmax, GELU, the loss, copies) is
 * counted, and the products are taken at the square shape's speed, which
 * thin products (attention's T x hd by hd x T) do not reach: a real step
 * is slower.  bench/gpt2.sh divides each step it measures by this floor.
 *
 * --shapes also times the step's own products, each at its own shape
 * (floor_shapes.c), and prints the shapes' floor: those products alone +
 * the same AdamW.  A step's distance from the floor then splits into what
 * its shapes cost (the shapes' floor / the floor) and what everything
 * around the products costs (a step / the shapes' floor).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../args.h"
#include "../model_flags.h"
#include "bench.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/launch.h"
#include "ptdp/model_plan.h"
#include "ptdp/models.h"
#include "ptdp/ops.h"

typedef struct {
    ptdp_model_config model;
    int batch, threads, reps;
    bool json, shapes;
    size_t device_mem;                 /* --shapes' arena; 0: the default */
    double watchdog_s;
} floor_cfg;

typedef struct {
    double gemm_flops, params, adamw_bytes;
    double square_s, square_flops_s, copy_Bps;
    double gemm_floor_s, adamw_floor_s;
    ptdp_floor_shapes shapes;          /* with --shapes */
} floor_result;

static bool has_plan(const ptdp_model_caps *caps)
{
    return caps->plannable;
}

/* ---- what a step must do: the model's count ------------------------------ */

static double tensors_sum(const ptdp_plan_tensors *t)
{
    double s = 0;
    for (int i = 0; i < t->n; i++)
        s += t->size[i];
    return s;
}

/* Its GEMM flops and its parameters on one device (tp 1), from the model's
 * planning table: the embeddings, L blocks, the head's own tensors. */
static void step_work(const floor_cfg *c, floor_result *r)
{
    const ptdp_model_plan *plan = ptdp_model_of(&c->model)->plan;
    double hardware;
    plan->step_flops(&c->model, c->batch, false, false, &r->gemm_flops, &hardware);
    ptdp_plan_params p;
    memset(&p, 0, sizeof p);
    plan->params(&c->model, 1, false, &p);
    r->params = tensors_sum(&p.embed) + c->model.layers * tensors_sum(&p.block) + tensors_sum(&p.head);
    r->adamw_bytes = 7.0 * sizeof(ptdp_real) * r->params;
}

/* ---- what the machine can do: two speeds --------------------------------- */

typedef struct {
    int reps;
    double best_s;
} square_run;

/* The best of `reps` products, each after an untimed one: STREAM's
 * convention (bench_memory.c), the run least disturbed by the rest of a
 * shared machine — a floor takes the machine at its fastest. */
static int square_device(ptdp_device *dev, void *arg)
{
    square_run *s = arg;
    int rc = 0;
    for (int i = 0; rc == 0 && i < s->reps; i++) {
        double t = 0;
        rc = ptdp_bench_square_gemm(dev, 1, &t);
        if (rc == 0 && (i == 0 || t < s->best_s))
            s->best_s = t;
    }
    return rc;
}

static int measure(const floor_cfg *c, floor_result *r)
{
    square_run sq = { .reps = c->reps };
    ptdp_launch_result lr;
    memset(&lr, 0, sizeof lr);
    ptdp_launch_opts o = { 0 };
    o.watchdog_s = c->watchdog_s;
    o.blas_threads = c->threads;
    o.result = &lr;
    ptdp_progress("square %d^3 sgemm on %d thread%s", PTDP_BENCH_SQUARE_N, c->threads, c->threads > 1 ? "s" : "");
    int rc = ptdp_launch(1, square_device, &sq, &o);
    if (rc != 0) {
        ptdp_progress_done();
        fprintf(stderr, "ptdp bench floor: square sgemm: %s\n", lr.message);
        ptdp_launch_result_free(&lr);
        return PTDP_EXIT_FAIL;
    }
    ptdp_launch_result_free(&lr);
    ptdp_progress("copy bandwidth on %d thread%s", c->threads, c->threads > 1 ? "s" : "");
    ptdp_membw m;
    char msg[PTDP_MSG_MAX];
    rc = ptdp_bench_memory(c->threads, c->watchdog_s, &m, msg, sizeof msg);
    ptdp_progress_done();
    if (rc != 0) {
        fprintf(stderr, "ptdp bench floor: %s\n", msg);
        return PTDP_EXIT_FAIL;
    }
    r->square_s = sq.best_s;
    r->copy_Bps = m.copy_Bps;
    if (c->shapes) {
        rc = ptdp_bench_floor_shapes(&c->model, c->batch, c->threads, c->reps, c->device_mem, c->watchdog_s,
                                     &r->shapes, msg, sizeof msg);
        ptdp_progress_done();
        if (rc != 0) {
            fprintf(stderr, "ptdp bench floor: the step's own products: %s\n", msg);
            return PTDP_EXIT_FAIL;
        }
        if (r->shapes.square_s < r->square_s)   /* the best of both sets of rounds */
            r->square_s = r->shapes.square_s;
    }
    r->square_flops_s = ptdp_matmul_flops(PTDP_BENCH_SQUARE_N, PTDP_BENCH_SQUARE_N, PTDP_BENCH_SQUARE_N) /
                        r->square_s;
    r->gemm_floor_s = r->gemm_flops / r->square_flops_s;
    r->adamw_floor_s = r->adamw_bytes / r->copy_Bps;
    return PTDP_EXIT_OK;
}

/* ---- printing ------------------------------------------------------------ */

/* OPENBLAS_CORETYPE as set ("" when not): a kernel's name is letters and
 * digits, anything else is shown as "?" so the JSON stays valid. */
static const char *coretype(void)
{
    const char *v = getenv("OPENBLAS_CORETYPE");
    if (v == NULL)
        return "";
    for (const char *p = v; *p != '\0'; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
            return "?";
    return v;
}

static void print_json(const floor_cfg *c, const floor_result *r)
{
    printf("{\"bench\": \"floor\", \"model\": \"%s\", \"dtype\": \"%s\", \"batch\": %d, \"positions\": %d, "
           "\"threads\": %d, \"params\": %.0f, \"gemm_flops_per_step\": %.6g, \"adamw_bytes_per_step\": %.6g, "
           "\"square_gemm_n\": %d, \"square_gemm_s\": %.6g, \"square_gemm_gflops\": %.6g, "
           "\"copy_GBps\": %.6g, \"blas_kernels\": \"%s\", \"openblas_coretype\": \"%s\", "
           "\"gemm_floor_s\": %.6g, \"adamw_floor_s\": %.6g, \"floor_s\": %.6g",
           ptdp_model_name(&c->model), PTDP_REAL_NAME, c->batch, ptdp_model_positions(&c->model), c->threads,
           r->params, r->gemm_flops, r->adamw_bytes, PTDP_BENCH_SQUARE_N, r->square_s, r->square_flops_s / 1e9,
           r->copy_Bps / 1e9, ptdp_blas_kernels(), coretype(), r->gemm_floor_s, r->adamw_floor_s,
           r->gemm_floor_s + r->adamw_floor_s);
    const ptdp_floor_shapes *s = &r->shapes;
    if (c->shapes)
        printf(", \"shapes_products\": %d, \"shapes_distinct\": %d, \"shapes_gemm_flops\": %.6g, "
               "\"shapes_gemm_s\": %.6g, \"shapes_gemm_gflops\": %.6g, \"shapes_floor_s\": %.6g",
               s->products, s->shapes, s->flops, s->own_s, s->flops / s->own_s / 1e9, s->own_s + r->adamw_floor_s);
    printf("}\n");
}

/* Each shape, the slowest (most of the step's time) first: where the
 * shapes' floor rises above the floor. */
static int by_time(const void *pa, const void *pb)
{
    const ptdp_floor_shape *a = pa, *b = pb;
    return (a->best_s < b->best_s) - (a->best_s > b->best_s);
}

static void print_shapes(const ptdp_floor_shapes *s, double square_flops_s)
{
    qsort(s->each, (size_t)s->shapes, sizeof *s->each, by_time);
    printf("\n    %-22s %-5s %6s %10s %9s %9s %11s\n", "m x n x k", "op", "calls", "ms", "GFLOP/s", "/ square",
           "above it ms");
    for (int i = 0; i < s->shapes; i++) {
        const ptdp_floor_shape *e = &s->each[i];
        char mnk[48];
        snprintf(mnk, sizeof mnk, "%d x %d x %d", e->m, e->n, e->k);
        double flops = e->calls * ptdp_matmul_flops(e->m, e->n, e->k);
        printf("    %-22s %c%c%-3s %6d %10.2f %9.1f %9.2f %11.2f\n", mnk, e->trans_a ? 'T' : 'N',
               e->trans_b ? 'T' : 'N', e->beta ? " +C" : "", e->calls, 1e3 * e->best_s, flops / e->best_s / 1e9,
               flops / e->best_s / square_flops_s, 1e3 * (e->best_s - flops / square_flops_s));
    }
    printf("    (op: A and B as stored, N or T; +C: the product adds into C. above it: the time past\n"
           "     the square sgemm's speed, what the shape costs)\n");
}

static void print_table(const floor_cfg *c, const floor_result *r)
{
    const char *forced = coretype();
    const ptdp_model_cli *cli = ptdp_model_cli_of(&c->model);
    printf("ptdp bench floor (%s): ", PTDP_REAL_NAME);
    if (cli->bench_describe != NULL)
        cli->bench_describe(stdout, &c->model);
    else
        printf("%s, hidden %d, ffn %d, %d layers", ptdp_model_name(&c->model), c->model.hidden, c->model.ffn,
               c->model.layers);
    printf("; batch %d; %d thread%s\n", c->batch, c->threads, c->threads > 1 ? "s" : "");
    printf("  BLAS kernels: %s (OPENBLAS_CORETYPE=%s)\n\n", ptdp_blas_kernels(), forced[0] ? forced : "unset");
    printf("  the machine, on %d thread%s:\n", c->threads, c->threads > 1 ? "s" : "");
    printf("    square %d^3 sgemm       %10.1f GFLOP/s   = 2 n^3 / %.1f ms (best of %d)\n",
           PTDP_BENCH_SQUARE_N, r->square_flops_s / 1e9, 1e3 * r->square_s, c->shapes ? 2 * c->reps : c->reps);
    printf("    copy bandwidth          %10.1f GB/s      STREAM copy, 16 B an element\n", r->copy_Bps / 1e9);
    printf("  a step:\n");
    printf("    GEMM flops              %10.2f GFLOP     the model's count (its planning table's step_flops)\n",
           r->gemm_flops / 1e9);
    printf("    AdamW bytes             %10.2f GB        = 7 x %zu B x %.0f parameters"
           " (read p g m v, write p m v)\n", r->adamw_bytes / 1e9, sizeof(ptdp_real), r->params);
    printf("  the floor:\n");
    printf("    GEMMs / sgemm speed     %10.1f ms\n", 1e3 * r->gemm_floor_s);
    printf("    AdamW / copy bandwidth  %10.1f ms\n", 1e3 * r->adamw_floor_s);
    printf("    floor                   %10.1f ms        no step of this model is faster on %d thread%s\n",
           1e3 * (r->gemm_floor_s + r->adamw_floor_s), c->threads, c->threads > 1 ? "s" : "");
    if (!c->shapes)
        return;
    const ptdp_floor_shapes *s = &r->shapes;
    double floor_s = r->gemm_floor_s + r->adamw_floor_s;
    printf("  the step's own products (one forward + backward, attention the whole T x T):\n");
    printf("    recorded                %10d calls     of %d shapes, %.2f GFLOP (the count above: %.2f)\n",
           s->products, s->shapes, s->flops / 1e9, r->gemm_flops / 1e9);
    printf("    each at its own shape   %10.1f ms        = %.1f GFLOP/s, %.2f of the square's speed"
           " (best of %d each)\n", 1e3 * s->own_s, s->flops / s->own_s / 1e9,
           s->flops / s->own_s / r->square_flops_s, c->reps);
    printf("    + AdamW: shapes' floor  %10.1f ms        = %.2f x the floor\n", 1e3 * (s->own_s + r->adamw_floor_s),
           (s->own_s + r->adamw_floor_s) / floor_s);
    print_shapes(s, r->square_flops_s);
}

/* ---- parse, validate, run ------------------------------------------------- */

static void usage(const ptdp_model_config *d)
{
    printf("usage: ptdp bench floor [--model M] [model flags] [--batch B] [--threads N] [--reps N]\n"
           "                        [--shapes [--device-mem SIZE]] [--json]\n"
           "\n"
           "The least time a training step could take on N cores: the step's GEMM flops at\n"
           "the speed of one square %d^3 sgemm on N threads, plus AdamW's bytes (7 x %zu B a\n"
           "parameter: read p g m v, write p m v) at the copy bandwidth of N threads.\n"
           "bench/gpt2.sh holds ptdp's, PyTorch's and llm.c's steps against it.\n"
           "\n", PTDP_BENCH_SQUARE_N, sizeof(ptdp_real));
    ptdp_model_flags_help(stdout, d);
    printf("  --batch B      samples a step (default 4)\n"
           "  --threads N    threads of both speeds, 1..256 (default: every core, or\n"
           "                 OPENBLAS_NUM_THREADS)\n"
           "  --reps N       timed square products, 1..7, the best kept (default 3)\n"
           "  --shapes       also time the step's own products, each at its own shape\n"
           "                 (one forward + backward records them; the best of --reps\n"
           "                 each), and print the shapes' floor: them + AdamW\n"
           "  --device-mem SIZE  --shapes' arena, e.g. 8G (default 4G; K/M/G 1024-based)\n"
           "  --json         one JSON object on stdout instead of the table\n"
           "  --watchdog S   fail if a device waits longer than S seconds (default 60)\n");
}

/* The first model the planner prices, at its command-line defaults. */
static ptdp_model_config floor_defaults(void)
{
    ptdp_model_config d = ptdp_model_default_config();
    const ptdp_model_ops *ops = ptdp_model_first_with(has_plan);
    const ptdp_model_cli *cli = ops != NULL ? ptdp_model_cli_for(ops) : NULL;
    if (cli != NULL && cli->defaults != NULL) {
        d = cli->defaults();
        d.ops = ops;
    }
    return d;
}

static int parse(int argc, char **argv, floor_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->model = floor_defaults();
    c->batch = 4;
    c->reps = 3;
    c->watchdog_s = PTDP_DEFAULT_WATCHDOG_S;
    ptdp_model_flags mf;
    ptdp_model_flags_init(&mf, &c->model);
    ptdp_args a;
    ptdp_args_init(&a, "bench floor", argc, argv, 1);
    while (ptdp_args_next(&a)) {
        int rc;
        if (ptdp_args_is(&a, "--help")) { usage(&c->model); return -1; }
        else if (ptdp_model_flag_is(&a)) rc = ptdp_model_flag_read(&a, PTDP_FLAGS_RUN, &mf);
        else if (ptdp_args_is(&a, "--batch")) rc = ptdp_args_int(&a, 1, 1 << 20, &c->batch);
        else if (ptdp_args_is(&a, "--threads")) rc = ptdp_args_int(&a, 1, 256, &c->threads);
        else if (ptdp_args_is(&a, "--reps")) rc = ptdp_args_int(&a, 1, 7, &c->reps);
        else if (ptdp_args_is(&a, "--json")) rc = ptdp_args_switch(&a, &c->json);
        else if (ptdp_args_is(&a, "--shapes")) rc = ptdp_args_switch(&a, &c->shapes);
        else if (ptdp_args_is(&a, "--device-mem")) rc = ptdp_args_size(&a, 4096, (size_t)1 << 40, &c->device_mem);
        else if (ptdp_args_is(&a, "--watchdog")) rc = ptdp_args_double(&a, 0.1, 86400, &c->watchdog_s);
        else rc = ptdp_args_unknown(&a);
        if (rc)
            return PTDP_EXIT_USAGE;
    }
    if (a.status || ptdp_model_flags_finish("bench floor", &mf) != 0)
        return PTDP_EXIT_USAGE;
    if (c->device_mem != 0 && !c->shapes)
        return ptdp_usage_error("bench floor", "--device-mem: only --shapes builds a model (add --shapes, or "
                                "drop --device-mem)");
    c->model = mf.cfg;   /* the model's data, if any, lives until the process ends */
    c->threads = ptdp_blas_threads(c->threads, 1);
    return 0;
}

/* The model's own rules for its shape (heads dividing the width, …), as
 * `ptdp train` checks them; and it must count its own work: only a model
 * with a planning table does. */
static int validate(const floor_cfg *c)
{
    const ptdp_model_ops *ops = ptdp_model_of(&c->model);
    char msg[PTDP_MSG_MAX];
    if (ptdp_model_check(&c->model, 1, 1, msg, sizeof msg) != 0)
        return ptdp_usage_error("bench floor", "%s", msg);
    if (ops->plan == NULL || ops->plan->step_flops == NULL || ops->plan->params == NULL) {
        const ptdp_model_ops *p = ptdp_model_first_with(has_plan);
        return ptdp_usage_error("bench floor", "--model %s: it has no planning table to count a step's flops "
                                "and parameters%s%s%s", ops->name, p != NULL ? " (try --model " : "",
                                p != NULL ? p->name : "", p != NULL ? ")" : "");
    }
    if (ops->plan->experts != NULL && ops->plan->experts(&c->model) > 0)
        return ptdp_usage_error("bench floor", "--moe-experts: the floor counts a dense model's step; a "
                                "mixture's GEMMs depend on its routing (drop --moe-experts)");
    return 0;
}

int ptdp_bench_floor_cmd(int argc, char **argv)
{
    floor_cfg c;
    int rc = parse(argc, argv, &c);
    if (rc != 0)
        return rc < 0 ? PTDP_EXIT_OK : rc;
    if ((rc = validate(&c)) != 0)
        return rc;
    floor_result r;
    memset(&r, 0, sizeof r);
    step_work(&c, &r);
    if ((rc = measure(&c, &r)) != PTDP_EXIT_OK)
        return rc;
    if (c.json)
        print_json(&c, &r);
    else
        print_table(&c, &r);
    free(r.shapes.each);
    return PTDP_EXIT_OK;
}
