/*
 * gpt_demo.c — `ptdp demo gpt`: a small GPT trained on 1 device and on 8,
 * side by side, then asked to add.
 *
 * The transformer half of the classroom demo.  The built-in corpus is lines
 * of sums ("12+35=047", gpt_data.c); the default GPT (2 blocks, 4 heads,
 * C 64, T 32) learns their form within a hundred steps and, at the demo's
 * lr 3e-3, the sums themselves within about a thousand.  Run B splits it
 * the way Megatron-LM does:
 *
 *   dp 2   two replicas, each on half of every batch; gradients all-reduced
 *   tp 2   attention by heads (2 of the 4 per rank), the MLP by columns and
 *          rows, the embedding and the head by vocabulary rows
 *   pp 2   the blocks in two stages; the first holds wte, the last its own
 *          copy for the tied head, the two copies' gradients summed each step
 *
 * and still trains exactly like one device: over the first 40 steps the
 * losses agree step by step, and so does every parameter (--check's rule).
 * B then trains on alone, continues a prompt greedily, one byte at a time
 * (ptdp sample), and is asked every sum the corpus leaves out: the share
 * it answers exactly is what it learnt (ptdp sample --held-out).
 *
 * Why only 40 steps side by side: the loss soon sits on a plateau (~2.5,
 * the entropy of the characters alone) until the model finds how the sums
 * work, and leaving a plateau amplifies any difference exponentially — two
 * runs 1e-9 apart at step 20 can be 1e-1 apart at step 200 in float (at
 * --lr 5e-3, 1e-5 apart in double: ptdp-f64 train --model gpt --lr 5e-3
 * --steps 200 --check --dp 2 --tp 2 --pp 2).  The difference is rounding, the order in which
 * the devices add; the growth is the training's own.  So equality is
 * checked where it is meaningful, over a few steps, as --check and the
 * equivalence tests do.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../args.h"
#include "../commands.h"
#include "../model_flags.h"
#include "../sample.h"
#include "ptdp/error.h"
#include "ptdp/gpt.h"
#include "ptdp/train.h"
#include "gpt_demo.h"

/* The demo's own run: long enough, and fast enough, to learn the sums
 * (ptdp train --model gpt keeps its defaults, lr 1e-3 and 10 steps). */
#define DEMO_STEPS 1000
#define DEMO_LR 3e-3

static void usage(void)
{
    printf("usage: ptdp demo gpt [--steps N] [--prompt TEXT]\n"
           "\n"
           "Train the default GPT on the built-in sums for 40 steps on one device and on dp 2 x tp 2\n"
           "x pp 2 = 8 devices with the same seed and show that they agree (losses and every\n"
           "parameter); then train the 8-device run on to --steps, let it continue the prompt and\n"
           "ask it the sums its training text left out.\n"
           "Defaults: %d steps at lr %g, prompt \"12+35=\".\n", DEMO_STEPS, DEMO_LR);
}

static int run(ptdp_train_config *c, ptdp_train_result *res, ptdp_state *final, const char *what)
{
    char msg[PTDP_MSG_MAX];
    ptdp_launch_opts o = { 0 };
    o.watchdog_s = 60;
    int rc = ptdp_state_init(final, &c->model, c->optimizer, false);
    if (rc != 0) {
        fprintf(stderr, "ptdp demo gpt: host out of memory\n");
        return rc;
    }
    c->final_state = final;
    rc = ptdp_train(c, &o, NULL, NULL, res, msg, sizeof msg);
    if (rc != 0)
        fprintf(stderr, "ptdp demo gpt: the %s run failed: %s\n", what, msg);
    return rc;
}

enum { SIDE_BY_SIDE = 40 };   /* steps run on both, compared */

/* The demo's flags: 0, -1 after --help, or PTDP_EXIT_USAGE. */
static int parse(int argc, char **argv, int *steps, const char **prompt)
{
    ptdp_args a;
    ptdp_args_init(&a, "demo gpt", argc, argv, 1);
    while (ptdp_args_next(&a)) {
        int rc = 0;
        if (ptdp_args_is(&a, "--help")) { usage(); return -1; }
        else if (ptdp_args_is(&a, "--steps")) rc = ptdp_args_int(&a, 1, 5000, steps);
        else if (ptdp_args_is(&a, "--prompt")) rc = ptdp_args_string(&a, prompt);
        else rc = ptdp_args_unknown(&a);
        if (rc)
            return PTDP_EXIT_USAGE;
    }
    if (a.status)
        return PTDP_EXIT_USAGE;
    if ((*prompt)[0] == '\0')
        return ptdp_usage_error("demo gpt", "--prompt '': give at least one character to continue");
    return 0;
}

/* What B learnt: the prompt continued by a sum's 3 digits, then every
 * held-out sum asked (ptdp sample, ptdp sample --held-out). */
static int ask(const ptdp_model_config *cfg, const ptdp_state *last, const char *prompt)
{
    ptdp_sample_options so = { .prompt = prompt, .tokens = 3, .seed = 1 };
    printf("  B continues \"%s\" (greedy, 3 bytes; ptdp sample):\n", prompt);
    fflush(stdout);
    int rc = ptdp_sample_print("demo gpt", cfg, last, &so);
    if (rc != 0)
        return rc;
    so.held_out = true;
    printf("\n  B is asked the sums its training text never held (ptdp sample --held-out):\n  ");
    fflush(stdout);
    return ptdp_sample_print("demo gpt", cfg, last, &so);
}

/* The GPT as `ptdp train --model gpt` makes it (the model flags' defaults),
 * on dp 2 x tp 2 x pp 2 with the demo's steps and lr, its vocabulary padded
 * for tp 2 (the baseline uses the same, as --check does).  0, or the exit
 * status of a usage error. */
static int demo_config(int steps, const char *prompt, ptdp_model_flags *mf, ptdp_train_config *par)
{
    *par = ptdp_train_defaults();
    ptdp_model_flags_init(mf, &par->model);
    mf->cfg.ops = &ptdp_gpt_ops;
    mf->seed = par->seed;
    if (ptdp_model_flags_finish("demo gpt", mf) != 0)
        return PTDP_EXIT_USAGE;
    for (const char *p = prompt; *p; p++)
        if ((unsigned char)*p >= ptdp_gpt(&mf->cfg)->vocab)
            return ptdp_usage_error("demo gpt", "--prompt: '%c' is not in the sums' alphabet (digits, + and =)",
                                    *p);
    par->model = mf->cfg;
    par->lr = DEMO_LR;
    par->dp = par->tp = par->pp = 2;
    par->micro_batches = 2;
    par->steps = steps;
    ptdp_gpt(&par->model)->vocab_padded = ptdp_gpt_pad_vocab(ptdp_gpt(&par->model)->vocab,
                                                             ptdp_gpt(&par->model)->vocab_multiple, par->tp);
    return 0;
}

static void say_what(const ptdp_train_config *par)
{
    const ptdp_model_config *g = &par->model;
    printf("ptdp demo gpt: the same GPT (%d blocks, %d heads, C %d, T %d, V %d padded to %d; batch %d)\n"
           "trained with seed %d on the built-in sums (\"12+35=047\"), AdamW lr %g\n"
           "  A: 1 device (the reference)\n"
           "  B: 8 devices = dp 2 x tp 2 (attention by heads, vocabulary by rows) x pp 2 (tied\n"
           "     embedding on the first and last stage), 1F1B, %d micro-batches\n\n",
           g->layers, ptdp_gpt(g)->heads, g->hidden, ptdp_gpt(g)->seq_len, ptdp_gpt(g)->vocab, ptdp_gpt(g)->vocab_padded,
           par->batch, (int)par->seed, par->lr, par->micro_batches);
    fflush(stdout);
}

/* 1. the losses side by side, every 5 steps; 2. every parameter, gathered
 * into whole tensors (nanoGPT's names).  Whether A and B are one run. */
static bool side_by_side(const ptdp_train_result *ra, const ptdp_train_result *rb, const ptdp_state *sa,
                         const ptdp_state *sb, int both)
{
    printf("  step   loss on 1 device   loss on 8 devices   difference\n");
    double worst = 0;
    for (int i = 0; i < both; i++) {
        double d = fabs(ra->log[i].loss - rb->log[i].loss);
        worst = fmax(worst, d);
        if (i == 0 || (i + 1) % 5 == 0 || i + 1 == both)
            printf("  %4ld   %16.7f   %17.7f   %10.1e\n", ra->log[i].step, ra->log[i].loss, rb->log[i].loss, d);
    }
    bool same_loss = worst <= PTDP_TOLERANCE * fmax(1.0, ra->log[0].loss);
    ptdp_check_report rep;
    bool same_params = ptdp_check_states(sb, sa, PTDP_TOLERANCE, &rep);
    bool same = same_loss && same_params;
    printf("  → after %d steps: losses differ by at most %.1e, parameters by %.1e (%s):\n"
           "    %s (%s arithmetic; tolerance %.0e)\n\n",
           both, worst, rep.max_abs, rep.worst, same ? "the same training run" : "THE RUNS DIFFER",
           PTDP_REAL_NAME, PTDP_TOLERANCE);
    return same;
}

/* 3. B trains on alone to `steps`, from where it stands (its checkpoint
 * sb, in memory), into rc and sc.  0 or the run's error. */
static int train_on(const ptdp_train_config *par, const ptdp_state *sb, int steps, int both,
                    ptdp_train_result *rc, ptdp_state *sc)
{
    ptdp_train_config more = *par;
    more.steps = steps - both;
    more.resume = sb;
    printf("  B trains on alone to step %d:\n", steps);
    fflush(stdout);
    if (run(&more, rc, sc, "8-device") != 0)
        return PTDP_EXIT_FAIL;
    int every = (steps - both) / 5 > 0 ? (steps - both) / 5 : 1;
    for (int i = 0; i < more.steps; i++)
        if ((i + 1) % every == 0 || i + 1 == more.steps)
            printf("  %4ld   %17.7f\n", rc->log[i].step, rc->log[i].loss);
    printf("\n");
    return 0;
}

int ptdp_gpt_demo(int argc, char **argv)
{
    int steps = DEMO_STEPS;
    const char *prompt = "12+35=";
    int parsed = parse(argc, argv, &steps, &prompt);
    if (parsed != 0)
        return parsed < 0 ? PTDP_EXIT_OK : parsed;
    ptdp_train_config par;
    ptdp_model_flags mf;
    int bad = demo_config(steps, prompt, &mf, &par);
    if (bad != 0) {
        ptdp_model_flags_free(&mf);
        return bad;
    }
    const int both = steps < SIDE_BY_SIDE ? steps : SIDE_BY_SIDE;
    par.steps = both;
    ptdp_train_config base = par;
    base.dp = base.tp = base.pp = 1;
    base.micro_batches = 1;
    say_what(&par);

    ptdp_train_result ra, rb, rc_;
    ptdp_state sa, sb, sc;
    memset(&ra, 0, sizeof ra);
    memset(&rb, 0, sizeof rb);
    memset(&rc_, 0, sizeof rc_);
    memset(&sa, 0, sizeof sa);
    memset(&sb, 0, sizeof sb);
    memset(&sc, 0, sizeof sc);
    int status = PTDP_EXIT_FAIL;
    if (run(&base, &ra, &sa, "single-device") != 0 || run(&par, &rb, &sb, "8-device") != 0 ||
        !side_by_side(&ra, &rb, &sa, &sb, both) ||
        (steps > both && train_on(&par, &sb, steps, both, &rc_, &sc) != 0))
        goto out;
    /* 4. what it learnt */
    int rc = ask(&par.model, steps > both ? &sc : &sb, prompt);
    if (rc != 0) {
        status = rc;
        goto out;
    }
    printf("\nnext: ptdp train --model gpt --dp 2 --tp 2 --pp 2 --check   (any mesh, against one device)\n"
           "      ptdp train --model gpt --steps %d --lr %g --save gpt.st && ptdp sample --load gpt.st --held-out\n",
           DEMO_STEPS, DEMO_LR);
    status = PTDP_EXIT_OK;
out:
    ptdp_train_result_free(&ra);
    ptdp_train_result_free(&rb);
    ptdp_train_result_free(&rc_);
    ptdp_state_free(&sa);
    ptdp_state_free(&sb);
    ptdp_state_free(&sc);
    ptdp_model_flags_free(&mf);
    return status;
}
