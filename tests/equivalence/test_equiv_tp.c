/*
 * test_equiv_tp.c — tensor parallelism trains exactly like one device.
 *
 *   tp in {1, 2, 4, 8} x dp in {1, 2}     losses and parameters = the baseline's
 *   dropout on (tp 2 and 4, dp 2)          the masks come from global indices
 *   the logged gradient norm, clipping     each parameter counted once
 *   re-sharding checkpoints                saved at tp=2, resumed at tp=4 (and
 *                                          4 -> 1): the same as never stopping
 *
 * The model of equiv.h has d_ff 32 and 8 classes, so tp = 8 leaves 4 hidden
 * units and one class per rank.
 */
#include <stdio.h>

#include "equiv.h"

static const harness_tcase tp_tests = { .name = "tp", .timeout_s = 120 };

LOOP_TEST(tp_tests, test_tp_matrix, 8)
{
    static const int tps[] = { 1, 2, 4, 8 }, dps[] = { 1, 2 };
    ptdp_train_config c = equiv_config(dps[_i % 2], tps[_i / 2], 1, 1);
    c.verify_replicas = true;
    equiv_check(&c);
}
END_TEST

TEST(tp_tests, test_tp_with_micro_batches)
{
    ptdp_train_config c = equiv_config(2, 4, 1, 3);
    equiv_check(&c);
}
END_TEST

LOOP_TEST(tp_tests, test_tp_with_dropout, 3)
{
    /* tp 2 and 4 with dp 2, and tp 4 with micro-batches and recompute (the
     * recomputed forward must draw the same masks) */
    static const int tps[] = { 2, 4, 4 }, ms[] = { 1, 1, 2 };
    ptdp_train_config c = equiv_config(2, tps[_i], 1, ms[_i]);
    c.dropout = 0.2;
    c.recompute = _i == 2;
    equiv_check(&c);

    /* …and dropout is really on: without it the run differs */
    ptdp_train_config off = c;
    off.dropout = 0;
    ptdp_state a, b;
    equiv_train(&c, NULL, &a, NULL);
    equiv_train(&off, NULL, &b, NULL);
    ptdp_check_report rep;
    /* Adam moves a weight by about lr a step: dropout's other gradients
     * leave some weight at least lr away */
    ck_assert_msg(!ptdp_check_states(&a, &b, c.lr, &rep), "dropout 0.2 changed nothing (%g)", rep.max_abs);
    ptdp_state_free(&a);
    ptdp_state_free(&b);
}
END_TEST

/* The norm printed in the log (and used by --clip-grad) equals the
 * baseline's: shards summed across TP, replicated parameters once
 * (equiv_check compares it at every step). */
LOOP_TEST(tp_tests, test_tp_grad_norm_equals_baseline, 2)
{
    ptdp_train_config c = equiv_config(1, _i == 0 ? 2 : 4, 1, 1);
    equiv_check(&c);
}
END_TEST

TEST(tp_tests, test_tp_clip_grad)
{
    /* a max norm below every step's norm: the clip coefficient, and so the
     * whole trajectory, depends on counting each parameter exactly once
     * (equiv_check makes sure the clip acts at every step) */
    ptdp_train_config c = equiv_config(2, 4, 1, 1);
    c.optimizer = PTDP_OPT_SGD;
    c.momentum = 0.9;
    c.lr = 0.5;
    c.clip_grad = 0.01;
    equiv_check(&c);
}
END_TEST

/* Save after 3 steps at tp = from, resume 3 steps at tp = to; the result
 * equals 6 straight steps on one device.  Checkpoints hold whole tensors:
 * each device wrote its shard into them and reads its new shard back. */
static void reshard(int from, int to, int dp_from, int dp_to)
{
    ptdp_train_config straight = equiv_config(1, 1, 1, 1), first = equiv_config(dp_from, from, 1, 1);
    ptdp_train_config second = equiv_config(dp_to, to, 1, 1);
    straight.steps = 6;
    first.steps = second.steps = 3;
    ptdp_state full, rest;
    ptdp_train_result r1, r3;
    equiv_resume_beside(&straight, &first, &second, &full, &r1, &rest, &r3);
    char what[64];
    snprintf(what, sizeof what, "tp %d -> %d", from, to);
    equiv_losses_agree(r3.log, r1.log + 3, 3, PTDP_TOLERANCE, what);
    ptdp_check_report rep;
    ck_assert_msg(ptdp_check_states(&rest, &full, PTDP_TOLERANCE, &rep), "%s: %s differs by %g from the straight run",
                  what, rep.worst, rep.max_abs);
    /* the optimizer moments were re-sharded too (check_states skips them) */
    equiv_states_agree(&rest, &full, PTDP_TOLERANCE, what);
    ptdp_train_result_free(&r1);
    ptdp_train_result_free(&r3);
    ptdp_state_free(&full);
    ptdp_state_free(&rest);
}

TEST(tp_tests, test_checkpoint_tp2_resumes_at_tp4)
{
    reshard(2, 4, 1, 1);
}
END_TEST

TEST(tp_tests, test_checkpoint_tp4_resumes_at_tp1)
{
    reshard(4, 1, 2, 1);
}
END_TEST

int main(void)
{
    return harness_main("equivalence-tp");
}
