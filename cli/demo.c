/*
 * demo.c — `ptdp demo`: one model trained on 1 device and on 8, side by side.
 *
 * What a classroom sees in under half a minute:
 *   1. the losses of the single-device baseline and of a dp 2 x tp 2 x pp 2
 *      run, step by step, equal to float precision;
 *   2. where the memory went: each device of the 3D run holds 1/tp of the
 *      split layers of 1/pp of the blocks;
 *   3. the pipeline's timeline and its bubble, measured and by formula;
 *   4. where to start the course;
 *   5. a page of the 8-device run, demo.html (--html FILE elsewhere): its
 *      loss, each device's timeline, memory and bytes (html_train.c).
 * `ptdp demo NAME` runs a model's own demo, through its CLI table
 * (model_flags.h): `ptdp demo gpt` (cli/models/gpt_demo.c) does the same
 * for a small GPT, then asks it sums it never saw.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "model_flags.h"
#include "html_pages.h"
#include "paths.h"
#include "ptdp/models.h"
#include "ptdp/error.h"
#include "ptdp/schedule.h"
#include "ptdp/train.h"

/* The models with a demo of their own (`ptdp demo NAME`), one line each. */
static void model_demos(const char *before)
{
    for (int i = 0; i < ptdp_model_count(); i++) {
        const ptdp_model_ops *ops = ptdp_model_at(i);
        const ptdp_model_cli *cli = ptdp_model_cli_for(ops);
        if (cli->demo != NULL)
            printf("%s%s: ptdp demo %s\n", before, cli->demo_summary ? cli->demo_summary : "its demo", ops->name);
    }
}

static void demo_usage(void)
{
    printf("usage: ptdp demo [--steps N] [--micro-batches M] [--blas-threads N] [--html FILE]\n"
           "       ptdp demo MODEL [--help]   (a model's own demo, below)\n");
    model_demos("       ");
    printf("\n"
           "Train the reference %s on one device and on dp 2 x tp 2 x pp 2 = 8 devices with the\n"
           "same seed, and show that they agree; then where the memory went and the pipeline's\n"
           "bubble.  Defaults: 12 steps, 4 micro-batches.  --blas-threads N: threads per device\n"
           "for its matrix products, 1..256 (default: cores / devices; the same bits for any N).\n"
           "--html FILE: where the page of the 8-device run goes (default demo.html, here).\n",
           ptdp_model_cli_noun(ptdp_model_at(0)));
}

static int blas_threads;   /* --blas-threads; 0: the default */

static ptdp_launch_opts opts_of(ptdp_launch_result *lr, bool keep_traces)
{
    ptdp_launch_opts o = { 0 };
    o.blas_threads = blas_threads;
    o.result = lr;
    o.watchdog_s = 60;
    o.keep_traces = keep_traces;   /* the page draws each device's timeline */
    return o;
}

static int run(ptdp_train_config *c, ptdp_launch_result *lr, ptdp_train_result *res, const char *what)
{
    char msg[PTDP_MSG_MAX];
    ptdp_launch_opts o = opts_of(lr, c->dp * c->tp * c->pp > 1);
    int rc = ptdp_train(c, &o, NULL, NULL, res, msg, sizeof msg);
    if (rc != 0)
        fprintf(stderr, "ptdp demo: the %s run failed: %s\n", what, msg);
    return rc;
}

static size_t peak_max(const ptdp_launch_result *lr, int cat)
{
    size_t m = 0;
    for (int r = 0; r < lr->world_size; r++) {
        size_t v = cat < 0 ? lr->devices[r].mem.peak_total : lr->devices[r].mem.peak[cat];
        if (v > m)
            m = v;
    }
    return m;
}

/* 1. the losses, step by step: the same run within the build's tolerance? */
static bool print_losses(const ptdp_train_result *ra, const ptdp_train_result *rb, int steps)
{
    printf("  step   loss on 1 device   loss on 8 devices   difference\n");
    double worst = 0;
    for (int i = 0; i < steps; i++) {
        double d = fabs(ra->log[i].loss - rb->log[i].loss);
        worst = fmax(worst, d);
        printf("  %4ld   %16.7f   %17.7f   %10.1e\n", ra->log[i].step, ra->log[i].loss, rb->log[i].loss, d);
    }
    bool same = worst <= PTDP_TOLERANCE * fmax(1.0, ra->log[0].loss);
    printf("  → %s: the largest difference is %.1e (%s arithmetic; tolerance %.0e)\n\n",
           same ? "the same training run" : "THE RUNS DIFFER", worst, PTDP_REAL_NAME, PTDP_TOLERANCE);
    return same;
}

/* 2. the memory: one device of each run, category by category. */
static void print_memory(const ptdp_launch_result *la, const ptdp_launch_result *lb)
{
    char b1[32], b2[32], b3[32], b4[32];
    printf("  peak memory of one device      params       grads       optim        acts\n");
    printf("  A: 1 device              %11s %11s %11s %11s\n",
           ptdp_format_bytes((double)peak_max(la, PTDP_MEM_PARAMS), b1, sizeof b1),
           ptdp_format_bytes((double)peak_max(la, PTDP_MEM_GRADS), b2, sizeof b2),
           ptdp_format_bytes((double)peak_max(la, PTDP_MEM_OPTIM), b3, sizeof b3),
           ptdp_format_bytes((double)peak_max(la, PTDP_MEM_ACTS), b4, sizeof b4));
    printf("  B: largest of 8 devices  %11s %11s %11s %11s\n",
           ptdp_format_bytes((double)peak_max(lb, PTDP_MEM_PARAMS), b1, sizeof b1),
           ptdp_format_bytes((double)peak_max(lb, PTDP_MEM_GRADS), b2, sizeof b2),
           ptdp_format_bytes((double)peak_max(lb, PTDP_MEM_OPTIM), b3, sizeof b3),
           ptdp_format_bytes((double)peak_max(lb, PTDP_MEM_ACTS), b4, sizeof b4));
    printf("  → each device of B holds half the blocks (pp 2), and of those half of every split\n"
           "    matrix (tp 2): about 1/4 of the parameters, gradients and optimizer state.\n\n");
}

/* 3. the pipeline of B: its 1F1B schedule drawn, and the real run's bubble. */
static void print_pipeline(const ptdp_train_config *par, const ptdp_train_result *rb)
{
    ptdp_schedule *s = NULL;
    ptdp_schedule_timeline *t = NULL;
    ptdp_schedule_costs costs = { .forward = 1, .backward = 2, .send = 0 };
    if (ptdp_schedule_build(ptdp_train_schedule(par), par->pp, par->micro_batches, 1, &s) == 0 &&
        ptdp_schedule_simulate(s, &costs, &t) == 0) {
        printf("  the pipeline of B, one step (forward 1, backward 2 time units):\n");
        ptdp_schedule_ascii(s, t, stdout);
    }
    ptdp_schedule_timeline_destroy(t);
    ptdp_schedule_destroy(s);
    printf("  in the real run (virtual time of the default GPU profile, links included):\n"
           "    bubble %.3f, formula (p-1)/(m+p-1) = %.3f\n\n", rb->bubble_measured, rb->bubble_formula);
}

/* 5. the page of B (html_train.c), and where it is. */
static int write_page(const char *html, const ptdp_train_config *par, ptdp_launch_result *lb,
                      const ptdp_train_result *rb, bool same)
{
    char verdict[160];
    snprintf(verdict, sizeof verdict, "%s: B's losses against A's (1 device), step by step",
             same ? "the same training run" : "THE RUNS DIFFER");
    const ptdp_launch_opts ob = opts_of(lb, true);
    if (ptdp_train_write_page("demo", html, par, &ob, lb, rb, verdict) != PTDP_EXIT_OK)
        return PTDP_EXIT_FAIL;
    printf("the page of B: %s — open it in a browser (its loss, each device's timeline, memory, bytes)\n\n",
           html);
    return PTDP_EXIT_OK;
}

int ptdp_cmd_demo(int argc, char **argv)
{
    if (argc > 1 && argv[1][0] != '-') {   /* ptdp demo NAME */
        const ptdp_model_ops *ops = ptdp_model_lookup(argv[1]);
        const ptdp_model_cli *cli = ops != NULL ? ptdp_model_cli_for(ops) : NULL;
        if (cli == NULL || cli->demo == NULL)
            return ptdp_usage_error("demo", "'%s' has no demo of its own (ptdp demo --help lists them)", argv[1]);
        return cli->demo(argc - 1, argv + 1);
    }
    int steps = 12, mbs = 4;
    const char *html = "demo.html";
    ptdp_args a;
    ptdp_args_init(&a, "demo", argc, argv, 1);
    while (ptdp_args_next(&a)) {
        int rc = 0;
        if (ptdp_args_is(&a, "--help")) { demo_usage(); return PTDP_EXIT_OK; }
        else if (ptdp_args_is(&a, "--steps")) rc = ptdp_args_int(&a, 1, 1000, &steps);
        else if (ptdp_args_is(&a, "--micro-batches")) rc = ptdp_args_int(&a, 1, 32, &mbs);
        else if (ptdp_args_is(&a, "--blas-threads")) rc = ptdp_args_int(&a, 1, 256, &blas_threads);
        else if (ptdp_args_is(&a, "--html")) rc = ptdp_args_string(&a, &html);
        else rc = ptdp_args_unknown(&a);
        if (rc)
            return PTDP_EXIT_USAGE;
    }
    const ptdp_cli_file page = { "--html", html };
    if (a.status || ptdp_cli_check_files("demo", NULL, 0, &page, 1) != 0)
        return PTDP_EXIT_USAGE;

    ptdp_train_config par = ptdp_train_defaults();
    par.dp = par.tp = par.pp = 2;
    par.micro_batches = mbs;
    par.steps = steps;
    par.lr = 3e-3;       /* a livelier loss curve for a short classroom run */
    if (par.batch % (par.dp * mbs) != 0)
        return ptdp_usage_error("demo", "--micro-batches %d must divide the per-replica batch %d",
                                mbs, par.batch / par.dp);
    ptdp_train_config base = par;
    base.dp = base.tp = base.pp = 1;
    base.micro_batches = 1;

    printf("ptdp demo: the same %s (%d blocks, hidden %d, batch %d, AdamW) trained twice with seed %d\n"
           "  A: 1 device (the reference)\n"
           "  B: 8 devices = dp 2 (data) x tp 2 (tensor) x pp 2 (pipeline, 1F1B, %d micro-batches)\n\n",
           ptdp_model_cli_noun(ptdp_model_of(&par.model)), par.model.layers, par.model.hidden, par.batch,
           (int)par.seed, mbs);
    fflush(stdout);

    ptdp_launch_result la, lb;
    ptdp_train_result ra, rb;
    memset(&la, 0, sizeof la);
    memset(&lb, 0, sizeof lb);
    memset(&ra, 0, sizeof ra);
    memset(&rb, 0, sizeof rb);
    int status = PTDP_EXIT_FAIL;
    if (run(&base, &la, &ra, "single-device") != 0 || run(&par, &lb, &rb, "8-device") != 0)
        goto out;

    const bool same = print_losses(&ra, &rb, steps);
    print_memory(&la, &lb);
    print_pipeline(&par, &rb);
    if (write_page(html, &par, &lb, &rb, same) != PTDP_EXIT_OK)
        goto out;
    model_demos("");
    printf("\n");
    printf("next: the course, tutorials/README.md, starting at tutorials/01-collectives/README.md.\n"
           "      Do it in a student build, whose checks run YOUR exercise.c files (the default\n"
           "      build checks the reference solutions, so its lesson tests pass untouched):\n"
           "        meson setup build-student -Dexercises=student\n"
           "        meson test -C build-student --suite tutorial-01 -v\n");
    status = same ? PTDP_EXIT_OK : PTDP_EXIT_FAIL;
out:
    ptdp_train_result_free(&ra);
    ptdp_train_result_free(&rb);
    ptdp_launch_result_free(&la);
    ptdp_launch_result_free(&lb);
    return status;
}
