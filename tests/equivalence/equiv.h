/*
 * equiv.h — shared helpers of the equivalence suites: run a configuration
 * and the single-device baseline, compare by --check's rule.
 */
#ifndef PTDP_TESTS_EQUIV_H
#define PTDP_TESTS_EQUIV_H

#include <check.h>
#include <stdio.h>
#include <string.h>

#include "ptdp/error.h"
#include "ptdp/train.h"

/* A small model so that a whole matrix runs in seconds. */
static inline ptdp_train_config equiv_config(int dp, int tp, int pp, int m)
{
    ptdp_train_config c = {
        .model = { .d_in = 12, .hidden = 16, .ffn = 32, .layers = 4, .classes = 8 },
        .dp = dp, .tp = tp, .pp = pp, .micro_batches = m, .batch = 48, .steps = 4,
        .optimizer = PTDP_OPT_ADAMW, .lr = 1e-2, .bucket_mb = 0.004, .seed = 42, .schedule = "1f1b",
    };
    return c;
}

static inline ptdp_launch_opts equiv_opts(void)
{
    ptdp_launch_opts o = { 0 };
    o.watchdog_s = 20;
    return o;
}

/* Run cfg; fill *final and *res.  Fails the test on error. */
static inline void equiv_run(const ptdp_train_config *cfg, ptdp_state *final, ptdp_train_result *res)
{
    char msg[PTDP_MSG_MAX];
    ptdp_train_config c = *cfg;
    ck_assert_int_eq(ptdp_state_init(final, &c.model, c.optimizer, c.momentum > 0), 0);
    c.final_state = final;
    ptdp_launch_opts o = equiv_opts();
    int rc = ptdp_train(&c, &o, NULL, NULL, res, msg, sizeof msg);
    ck_assert_msg(rc == 0, "dp=%d tp=%d pp=%d m=%d failed: %s", c.dp, c.tp, c.pp, c.micro_batches, msg);
}

/* cfg against its baseline (dp = tp = pp = 1, one micro-batch). */
static inline void equiv_check(const ptdp_train_config *cfg)
{
    ptdp_train_config b = *cfg;
    b.dp = b.tp = b.pp = 1;
    b.micro_batches = 1;
    b.recompute = false;
    b.zero = 0;
    b.stage_layers = NULL;
    ptdp_state fs, fb;
    ptdp_train_result rs, rb;
    equiv_run(cfg, &fs, &rs);
    equiv_run(&b, &fb, &rb);
    for (int i = 0; i < cfg->steps; i++)
        ck_assert_msg(ptdp_check_value(rs.log[i].loss, rb.log[i].loss, PTDP_TOLERANCE),
                      "dp=%d tp=%d pp=%d m=%d %s: step %d loss %.15g vs baseline %.15g", cfg->dp, cfg->tp,
                      cfg->pp, cfg->micro_batches, cfg->schedule, i + 1, rs.log[i].loss, rb.log[i].loss);
    ptdp_check_report rep;
    ck_assert_msg(ptdp_check_states(&fs, &fb, PTDP_TOLERANCE, &rep),
                  "dp=%d tp=%d pp=%d m=%d %s: %s differs by %g (relative %g)", cfg->dp, cfg->tp, cfg->pp,
                  cfg->micro_batches, cfg->schedule, rep.worst, rep.max_abs, rep.max_rel);
    /* the run must actually have trained: the loss moved */
    ck_assert(rb.log[0].loss != rb.log[cfg->steps - 1].loss);
    ptdp_train_result_free(&rs);
    ptdp_train_result_free(&rb);
    ptdp_state_free(&fs);
    ptdp_state_free(&fb);
}

#endif
