/*
 * test_equiv_dp.c — data parallelism with gradient accumulation trains
 * exactly like one device: dp in {1,2,3,4} x M in {1,2,4}; replicas stay
 * bit-identical; the same run twice is bit-identical; 6 steps equal
 * 3 + save + load + 3, bit for bit; broken checkpoints are errors.
 */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "equiv.h"

static const harness_tcase dp_tests = { .name = "dp", .timeout_s = 120 };

LOOP_TEST(dp_tests, test_dp_matrix, 12)
{
    static const int dps[] = { 1, 2, 3, 4 }, ms[] = { 1, 2, 4 };
    int dp = dps[_i / 3], m = ms[_i % 3];
    ptdp_train_config c = equiv_config(dp, 1, 1, m);
    c.verify_replicas = true;   /* and the replicas never drift apart */
    equiv_check(&c);
}
END_TEST

TEST(dp_tests, test_sgd_momentum_clip_weight_decay)
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

TEST(dp_tests, test_same_config_twice_is_bit_identical)
{
    ptdp_train_config c = equiv_config(3, 1, 1, 2);
    ptdp_state a, b;
    ptdp_train_result ra, rb;
    equiv_train(&c, NULL, &a, &ra);
    equiv_train(&c, NULL, &b, &rb);
    equiv_losses_agree(ra.log, rb.log, c.steps, 0, "two identical runs");
    equiv_states_agree(&a, &b, 0, "two identical runs");
    ptdp_train_result_free(&ra);
    ptdp_train_result_free(&rb);
    ptdp_state_free(&a);
    ptdp_state_free(&b);
}
END_TEST

TEST(dp_tests, test_resume_is_bit_identical)
{
    ptdp_train_config c = equiv_config(2, 1, 1, 2);
    c.steps = 6;
    ptdp_state full, rest;
    ptdp_train_result r1, r2;
    equiv_train(&c, NULL, &full, &r1);
    c.steps = 3;
    equiv_resume(&c, &c, &rest, &r2);
    equiv_losses_agree(r2.log, r1.log + 3, 3, 0, "resumed");
    equiv_states_agree(&rest, &full, 0, "resumed");
    ptdp_train_result_free(&r1);
    ptdp_train_result_free(&r2);
    ptdp_state_free(&full);
    ptdp_state_free(&rest);
}
END_TEST

TEST(dp_tests, test_truncated_and_corrupt_checkpoints_are_errors)
{
    char path[] = "/tmp/ptdp-ckpt-XXXXXX";
    harness_temp_file(path);
    char msg[PTDP_MSG_MAX];
    ptdp_train_config c = equiv_config(1, 1, 1, 1);
    c.steps = 1;
    ptdp_state s, loaded;
    equiv_train(&c, NULL, &s, NULL);
    ck_assert_int_eq(ptdp_state_save(&s, path, msg, sizeof msg), 0);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    /* truncated */
    ck_assert_int_eq(truncate(path, st.st_size - 10), 0);
    ck_assert_int_eq(ptdp_state_load(&loaded, path, &c.model, msg, sizeof msg), PTDP_ECORRUPT);
    ASSERT_HAS(msg, path);
    /* a different model shape */
    ck_assert_int_eq(ptdp_state_save(&s, path, msg, sizeof msg), 0);
    ptdp_model_config other = c.model;
    other.hidden = 20;
    other.ffn = 40;
    ck_assert_int_eq(ptdp_state_load(&loaded, path, &other, msg, sizeof msg), PTDP_ECORRUPT);
    ASSERT_HAS(msg, "--hidden");
    /* garbage */
    FILE *f = fopen(path, "wb");
    fputs("this is not a checkpoint at all", f);
    fclose(f);
    ck_assert_int_eq(ptdp_state_load(&loaded, path, &c.model, msg, sizeof msg), PTDP_ECORRUPT);
    unlink(path);
    ptdp_state_free(&s);
}
END_TEST

int main(void)
{
    return harness_main("equivalence-dp");
}
