/*
 * test_equiv_dp.c — data parallelism with gradient accumulation trains
 * exactly like one device: dp in {1,2,3,4} x M in {1,2,4}; replicas stay
 * bit-identical; the same run twice is bit-identical; 10 steps equal
 * 5 + save + load + 5, bit for bit.
 */
#include <stdlib.h>
#include <unistd.h>

#include "equiv.h"

START_TEST(test_dp_matrix)
{
    static const int dps[] = { 1, 2, 3, 4 }, ms[] = { 1, 2, 4 };
    int dp = dps[_i / 3], m = ms[_i % 3];
    ptdp_train_config c = equiv_config(dp, 1, 1, m);
    c.verify_replicas = true;   /* and the replicas never drift apart */
    equiv_check(&c);
}
END_TEST

START_TEST(test_sgd_momentum_clip_weight_decay)
{
    ptdp_train_config c = equiv_config(2, 1, 1, 2);
    c.optimizer = PTDP_OPT_SGD;
    c.momentum = 0.9;
    c.weight_decay = 0.01;
    c.clip_grad = 0.05;
    c.lr = 0.1;
    equiv_check(&c);
}
END_TEST

START_TEST(test_same_config_twice_is_bit_identical)
{
    ptdp_train_config c = equiv_config(3, 1, 1, 2);
    ptdp_state a, b;
    ptdp_train_result ra, rb;
    equiv_run(&c, &a, &ra);
    equiv_run(&c, &b, &rb);
    for (int i = 0; i < c.steps; i++)
        ck_assert(memcmp(&ra.log[i].loss, &rb.log[i].loss, sizeof(double)) == 0);
    for (int i = 0; i < a.ntensors; i++)
        ck_assert_msg(memcmp(a.t[i].data, b.t[i].data, (size_t)a.t[i].rows * a.t[i].cols * sizeof(ptdp_real)) == 0,
                      "%s differs between two identical runs", a.t[i].name);
    ptdp_train_result_free(&ra);
    ptdp_train_result_free(&rb);
    ptdp_state_free(&a);
    ptdp_state_free(&b);
}
END_TEST

START_TEST(test_resume_is_bit_identical)
{
    char path[] = "/tmp/ptdp-resume-XXXXXX";
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    close(fd);
    char msg[PTDP_MSG_MAX];
    ptdp_train_config c = equiv_config(2, 1, 1, 2);
    c.steps = 6;
    ptdp_state full, half, loaded, rest;
    ptdp_train_result r1, r2, r3;
    equiv_run(&c, &full, &r1);

    c.steps = 3;
    equiv_run(&c, &half, &r2);
    ck_assert_int_eq(ptdp_state_save(&half, path, msg, sizeof msg), 0);
    ck_assert_msg(ptdp_state_load(&loaded, path, &c.model, msg, sizeof msg) == 0, "%s", msg);
    ck_assert_int_eq(loaded.step, 3);
    c.resume = &loaded;
    equiv_run(&c, &rest, &r3);
    ck_assert_int_eq(r3.log[0].step, 4);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(memcmp(&r1.log[3 + i].loss, &r3.log[i].loss, sizeof(double)) == 0,
                      "step %d: %.17g vs resumed %.17g", 4 + i, r1.log[3 + i].loss, r3.log[i].loss);
    for (int i = 0; i < full.ntensors; i++)
        ck_assert_msg(memcmp(full.t[i].data, rest.t[i].data,
                             (size_t)full.t[i].rows * full.t[i].cols * sizeof(ptdp_real)) == 0,
                      "%s differs after resuming", full.t[i].name);
    unlink(path);
    ptdp_train_result_free(&r1);
    ptdp_train_result_free(&r2);
    ptdp_train_result_free(&r3);
    ptdp_state_free(&full);
    ptdp_state_free(&half);
    ptdp_state_free(&loaded);
    ptdp_state_free(&rest);
}
END_TEST

START_TEST(test_truncated_and_corrupt_checkpoints_are_errors)
{
    char path[] = "/tmp/ptdp-ckpt-XXXXXX";
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    close(fd);
    char msg[PTDP_MSG_MAX];
    ptdp_train_config c = equiv_config(1, 1, 1, 1);
    c.steps = 1;
    ptdp_state s, loaded;
    ptdp_train_result r;
    equiv_run(&c, &s, &r);
    ck_assert_int_eq(ptdp_state_save(&s, path, msg, sizeof msg), 0);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fclose(f);
    /* truncated */
    ck_assert_int_eq(truncate(path, len - 10), 0);
    ck_assert_int_eq(ptdp_state_load(&loaded, path, &c.model, msg, sizeof msg), PTDP_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(msg, path));
    /* a different model shape */
    ck_assert_int_eq(ptdp_state_save(&s, path, msg, sizeof msg), 0);
    ptdp_model_config other = c.model;
    other.hidden = 20;
    other.ffn = 40;
    ck_assert_int_eq(ptdp_state_load(&loaded, path, &other, msg, sizeof msg), PTDP_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(msg, "--hidden"));
    /* garbage */
    f = fopen(path, "wb");
    fputs("this is not a checkpoint at all", f);
    fclose(f);
    ck_assert_int_eq(ptdp_state_load(&loaded, path, &c.model, msg, sizeof msg), PTDP_ECORRUPT);
    unlink(path);
    ptdp_train_result_free(&r);
    ptdp_state_free(&s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("equivalence-dp");
    TCase *tc = tcase_create("dp");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_dp_matrix, 0, 12);
    tcase_add_test(tc, test_sgd_momentum_clip_weight_decay);
    tcase_add_test(tc, test_same_config_twice_is_bit_identical);
    tcase_add_test(tc, test_resume_is_bit_identical);
    tcase_add_test(tc, test_truncated_and_corrupt_checkpoints_are_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
