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
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "equiv.h"

START_TEST(test_tp_matrix)
{
    static const int tps[] = { 1, 2, 4, 8 }, dps[] = { 1, 2 };
    ptdp_train_config c = equiv_config(dps[_i % 2], tps[_i / 2], 1, 1);
    c.verify_replicas = true;
    equiv_check(&c);
}
END_TEST

START_TEST(test_tp_with_micro_batches)
{
    ptdp_train_config c = equiv_config(2, 4, 1, 3);
    equiv_check(&c);
}
END_TEST

START_TEST(test_tp_with_dropout)
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
    ptdp_train_result ra, rb;
    equiv_run(&c, &a, &ra);
    equiv_run(&off, &b, &rb);
    ptdp_check_report rep;
    ck_assert_msg(!ptdp_check_states(&a, &b, 100 * PTDP_TOLERANCE, &rep), "dropout 0.2 changed nothing (%g)",
                  rep.max_abs);
    ptdp_train_result_free(&ra);
    ptdp_train_result_free(&rb);
    ptdp_state_free(&a);
    ptdp_state_free(&b);
}
END_TEST

/* The norm printed in the log (and used by --clip-grad) equals the
 * baseline's: shards summed across TP, replicated parameters once. */
START_TEST(test_tp_grad_norm_equals_baseline)
{
    int tp = _i == 0 ? 2 : 4;
    ptdp_train_config c = equiv_config(1, tp, 1, 1), b = equiv_config(1, 1, 1, 1);
    ptdp_state fs, fb;
    ptdp_train_result rs, rb;
    equiv_run(&c, &fs, &rs);
    equiv_run(&b, &fb, &rb);
    for (int i = 0; i < c.steps; i++) {
        ck_assert(rb.log[i].grad_norm > 0);
        ck_assert_msg(ptdp_check_value(rs.log[i].grad_norm, rb.log[i].grad_norm, PTDP_TOLERANCE),
                      "tp=%d step %d: |g| %.17g, baseline %.17g", tp, i + 1, rs.log[i].grad_norm,
                      rb.log[i].grad_norm);
    }
    ptdp_train_result_free(&rs);
    ptdp_train_result_free(&rb);
    ptdp_state_free(&fs);
    ptdp_state_free(&fb);
}
END_TEST

START_TEST(test_tp_clip_grad)
{
    /* a max norm below every step's norm: the clip coefficient, and so the
     * whole trajectory, depends on counting each parameter exactly once */
    ptdp_train_config c = equiv_config(2, 4, 1, 1);
    c.optimizer = PTDP_OPT_SGD;
    c.momentum = 0.9;
    c.lr = 0.5;
    c.clip_grad = 0.01;
    ptdp_state s;
    ptdp_train_result r;
    equiv_run(&c, &s, &r);
    for (int i = 0; i < c.steps; i++)
        ck_assert_msg(r.log[i].grad_norm > c.clip_grad, "step %d: |g| %g does not clip", i + 1, r.log[i].grad_norm);
    ptdp_train_result_free(&r);
    ptdp_state_free(&s);
    equiv_check(&c);
}
END_TEST

/* Save after 3 steps at tp = from, resume 3 steps at tp = to; the result
 * equals 6 straight steps on one device.  Checkpoints hold whole tensors:
 * each device wrote its shard into them and reads its new shard back. */
static void reshard(int from, int to, int dp_from, int dp_to)
{
    char path[] = "/tmp/ptdp-reshard-XXXXXX";
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    close(fd);
    char msg[PTDP_MSG_MAX];
    ptdp_train_config straight = equiv_config(1, 1, 1, 1), first = equiv_config(dp_from, from, 1, 1);
    ptdp_train_config second = equiv_config(dp_to, to, 1, 1);
    straight.steps = 6;
    first.steps = second.steps = 3;
    ptdp_state full, half, loaded, rest;
    ptdp_train_result r1, r2, r3;
    equiv_run(&straight, &full, &r1);
    equiv_run(&first, &half, &r2);
    ck_assert_msg(ptdp_state_save(&half, path, msg, sizeof msg) == 0, "%s", msg);
    ck_assert_msg(ptdp_state_load(&loaded, path, &second.model, msg, sizeof msg) == 0, "%s", msg);
    ck_assert_int_eq(loaded.step, 3);
    second.resume = &loaded;
    equiv_run(&second, &rest, &r3);
    ck_assert_int_eq(r3.log[0].step, 4);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(ptdp_check_value(r3.log[i].loss, r1.log[3 + i].loss, PTDP_TOLERANCE),
                      "tp %d -> %d, step %d: loss %.17g, straight run %.17g", from, to, 4 + i, r3.log[i].loss,
                      r1.log[3 + i].loss);
    ptdp_check_report rep;
    ck_assert_msg(ptdp_check_states(&rest, &full, PTDP_TOLERANCE, &rep),
                  "tp %d -> %d: %s differs by %g from the straight run", from, to, rep.worst, rep.max_abs);
    /* the optimizer moments were re-sharded too (check_states skips them) */
    for (int i = 0; i < full.ntensors; i++) {
        const ptdp_state_tensor *a = &rest.t[i], *b = &full.t[i];
        double worst = 0, mx = 0;
        for (size_t k = 0; k < (size_t)a->rows * a->cols; k++) {
            worst = fmax(worst, fabs((double)a->data[k] - (double)b->data[k]));
            mx = fmax(mx, fabs((double)b->data[k]));
        }
        /* relative to the tensor's own scale: exp_avg_sq is ~1e-6, far below the 1 of max(1, |b|) */
        ck_assert_msg(worst <= PTDP_TOLERANCE * mx, "tp %d -> %d: %s differs by %g (largest value %g)", from, to,
                      a->name, worst, mx);
    }
    unlink(path);
    ptdp_train_result_free(&r1);
    ptdp_train_result_free(&r2);
    ptdp_train_result_free(&r3);
    ptdp_state_free(&full);
    ptdp_state_free(&half);
    ptdp_state_free(&loaded);
    ptdp_state_free(&rest);
}

START_TEST(test_checkpoint_tp2_resumes_at_tp4)
{
    reshard(2, 4, 1, 1);
}
END_TEST

START_TEST(test_checkpoint_tp4_resumes_at_tp1)
{
    reshard(4, 1, 2, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("equivalence-tp");
    TCase *tc = tcase_create("tp");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_tp_matrix, 0, 8);
    tcase_add_test(tc, test_tp_with_micro_batches);
    tcase_add_loop_test(tc, test_tp_with_dropout, 0, 3);
    tcase_add_loop_test(tc, test_tp_grad_norm_equals_baseline, 0, 2);
    tcase_add_test(tc, test_tp_clip_grad);
    tcase_add_test(tc, test_checkpoint_tp2_resumes_at_tp4);
    tcase_add_test(tc, test_checkpoint_tp4_resumes_at_tp1);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
