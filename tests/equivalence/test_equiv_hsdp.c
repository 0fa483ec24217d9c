/*
 * test_equiv_hsdp.c — HSDP (--shard-group N, zero_hsdp.c) trains exactly
 * like one device.
 *
 * ZeRO's stages 1, 2 and 3 run inside shard groups of N consecutive DP
 * ranks, and each shard's gradient is all-reduced across its dp / N
 * replicas.  Three claims:
 *
 *   1. equal to the single-device baseline by --check's rule (1e-10 in
 *      double) for N in {1, 2, dp} with dp 4 alone, dp x tp and dp x pp,
 *      ZeRO 1, 2 and 3 (a few of them here, every one in
 *      test_equiv_hsdp_wide.c, suite slow), the gradient clipped at every
 *      step so that the norm's group (the shard group) is checked too;
 *   2. a checkpoint saved under shard groups and resumed gives the bits of
 *      the run that never stopped;
 *   3. what cannot run is refused before any work, naming --shard-group.
 */
#include "equiv.h"
#include "ptdp/state.h"

static const harness_tcase hsdp_tests = { .name = "hsdp", .timeout_s = 120 };

typedef struct { int dp, tp, pp, zero, shard; bool gpt, overlap; } hsdp_case;

static const hsdp_case CASES[] = {
    { .dp = 4, .zero = 1, .shard = 2 },
    { .dp = 4, .zero = 2, .shard = 1 },
    { .dp = 4, .zero = 3, .shard = 2 },
    { .dp = 4, .tp = 2, .zero = 2, .shard = 2 },
    { .dp = 4, .pp = 2, .zero = 3, .shard = 2, .overlap = true },
    { .dp = 4, .pp = 2, .zero = 1, .shard = 1, .gpt = true },   /* the tied embedding across stages */
};
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

static ptdp_train_config config_of(const hsdp_case *k)
{
    const int tp = k->tp > 0 ? k->tp : 1, pp = k->pp > 0 ? k->pp : 1;
    ptdp_train_config c = equiv_config(k->dp, tp, pp, pp > 1 ? 2 : 1);
    if (k->gpt) {
        c.model = equiv_small_gpt(tp);
        c.batch = 16;
        c.steps = 2;
        c.lr = 1e-3;
    }
    c.zero = k->zero;
    c.shard_group = k->shard;
    c.overlap = k->overlap;
    c.clip_grad = 1e-3;           /* clips at every step: the norm must be right */
    c.verify_replicas = true;     /* every DP rank's parameters the same bits */
    return c;
}

/* ------------------------------------------------- 1. like one device */

LOOP_TEST(hsdp_tests, test_hsdp_equals_baseline, NCASES)
{
    ptdp_train_config c = config_of(&CASES[_i]);
    equiv_check(&c);   /* losses, gradient norms, every parameter */
}
END_TEST

/* ------------------------------------------------ 2. checkpoints */

/* 3 steps under shard groups, saved, loaded into the same run for 3 more:
 * the bits of 6 steps without stopping (parameters and optimizer state). */
TEST(hsdp_tests, test_hsdp_resume_is_uninterrupted)
{
    for (int zero = 1; zero <= 3; zero++) {
        ptdp_train_config whole = equiv_config(4, 1, 1, 1), part;
        whole.zero = zero;
        whole.shard_group = 2;
        whole.steps = 6;
        part = whole;
        part.steps = 3;
        ptdp_state a, b;
        ptdp_train_result log;
        char what[64];
        snprintf(what, sizeof what, "zero %d dp 4 shard-group 2", zero);
        equiv_resume_beside(&whole, &part, &part, &a, NULL, &b, &log);
        ck_assert_int_eq(log.completed, 3);
        equiv_states_same_bits(&b, &a, what);
        ptdp_state_free(&a);
        ptdp_state_free(&b);
        ptdp_train_result_free(&log);
    }
}
END_TEST

/* --------------------------------------------- 3. refused, named */

TEST(hsdp_tests, test_hsdp_refusals)
{
    ptdp_train_config c = equiv_config(4, 1, 1, 1);
    c.shard_group = 2;
    equiv_refused(&c, "--shard-group 2 shards ZeRO's states");   /* no --zero */
    c.zero = 1;
    c.shard_group = 3;
    equiv_refused(&c, "--shard-group 3 must divide --dp 4");
    c.shard_group = 8;
    equiv_refused(&c, "--shard-group 8 is more than --dp 4");
    c.shard_group = -1;
    equiv_refused(&c, "--shard-group -1");
    c.shard_group = 2;
    c.ep = 2;
    equiv_refused(&c, "--shard-group 2 with --ep 2");
    c.ep = 0;
    c.model = equiv_small_gpt(1);
    c.cp = 2;
    c.batch = 16;
    equiv_refused(&c, "--shard-group 2 with --cp 2");
}
END_TEST

int main(void)
{
    return harness_main("equiv_hsdp");
}
