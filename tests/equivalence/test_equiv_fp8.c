/*
 * test_equiv_fp8.c — FP8 training (--fp8, fp8_linear.h) equals one device
 * training with the same recipe, to 1e-10 in double.
 *
 * Every scale must be the one one device would take.  The claims:
 *
 *   1. each recipe, at the layouts that split a quantized tensor — TP's
 *      shards of W, x_r and dy_r (with SP's gathers), CP's positions (the
 *      ring and Ulysses), PP's stages and schedules (1F1B, ZB-H1's deferred
 *      dW, DualPipeV's V), ZeRO's stages, recomputation, a mixture of
 *      experts over EP (its dispatch in FP8 too) — passes --check's rule against ptdp_train_baseline,
 *      which runs the same micro-batches when a scale covers one;
 *   2. FP8 is not a no-op: the losses differ from the same run in double
 *      without it, and each recipe's from the others';
 *   3. what no one device's scale can match is refused, by name.
 *
 * Double only: in float a layout's other summation order flips the odd
 * code (PTDP_FP8_TOLERANCE_F32), which tests/cli/fp8_train.sh checks.
 */
#include "equiv.h"

#include <string.h>

#include "ptdp/fp8_linear.h"

static const harness_tcase fp8_tests = { .name = "fp8", .timeout_s = 300 };

typedef struct {
    const char *recipe;
    bool gpt;
    int dp, tp, pp, m, cp, zero, ep;
    bool sp, a2a, overlap, recompute, experts, comm;
    const char *schedule;
} fp8_case;

static const fp8_case CASES[] = {
    { "tensorwise", .dp = 2, .tp = 2 },
    { "delayed", .dp = 2, .m = 2, .tp = 2 },
    { "mxfp8", .pp = 2, .m = 2 },
    { "blockwise", .dp = 2, .zero = 1 },
    { "tensorwise", .dp = 2, .zero = 2, .overlap = true },
    { "delayed", .dp = 2, .zero = 3 },
    { "tensorwise", .gpt = true, .tp = 2, .sp = true },
    { "delayed", .gpt = true, .cp = 2 },
    { "mxfp8", .gpt = true, .cp = 2, .a2a = true },
    { "tensorwise", .gpt = true, .pp = 2, .m = 4, .schedule = "zb-h1" },
    { "delayed", .gpt = true, .pp = 2, .m = 4, .schedule = "dualpipev" },
    { "delayed", .gpt = true, .dp = 2, .tp = 2, .recompute = true },
    { "blockwise", .gpt = true, .dp = 2, .ep = 2, .experts = true },
    { "tensorwise", .gpt = true, .tp = 2, .experts = true },
    { "mxfp8", .gpt = true, .dp = 4, .ep = 2, .experts = true, .comm = true },
};
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

static int or1(int v) { return v > 0 ? v : 1; }

static ptdp_train_config config_of(const fp8_case *k)
{
    const int dp = or1(k->dp), tp = or1(k->tp), pp = or1(k->pp), m = or1(k->m);
    ptdp_train_config c = k->gpt ? equiv_gpt_config(dp, tp, pp, m, tp) : equiv_config(dp, tp, pp, m);
    c.fp8.recipe = ptdp_fp8_recipe_find(k->recipe);
    c.cp = k->cp;
    c.cp_a2a = k->a2a;
    c.sp = k->sp;
    c.zero = k->zero;
    c.overlap = k->overlap;
    c.recompute = k->recompute;
    c.ep = k->ep;
    c.fp8.comm = k->comm;
    if (k->schedule != NULL)
        c.schedule = ptdp_schedule_find(k->schedule);
    if (k->experts)
        equiv_gpt_experts(&c);
    return c;
}

/* ------------------------------------------------- 1. like one device */

LOOP_TEST(fp8_tests, test_fp8_equals_baseline, NCASES)
{
    ptdp_train_config c = config_of(&CASES[_i]);
    ck_assert_msg(c.fp8.recipe != NULL, "case %d: no recipe %s", _i, CASES[_i].recipe);
    equiv_check(&c);
}
END_TEST

/* ----------------------------------------------- 2. not a no-op */

static double last_loss(const ptdp_train_config *c)
{
    ptdp_train_result r;
    equiv_train(c, NULL, NULL, &r);
    const double loss = r.log[r.steps - 1].loss;
    ptdp_train_result_free(&r);
    return loss;
}

TEST(fp8_tests, test_fp8_changes_the_numbers)
{
    ptdp_train_config c = equiv_config(1, 1, 1, 1);
    const double plain = last_loss(&c);
    double seen[4];
    for (int i = 0; i < ptdp_fp8_recipe_count(); i++) {
        c.fp8.recipe = ptdp_fp8_recipe_at(i);
        seen[i] = last_loss(&c);
        ck_assert_msg(seen[i] != plain, "--fp8 %s: the loss %.17g is the unquantized run's", c.fp8.recipe->name,
                      plain);
        for (int j = 0; j < i; j++)
            if (!(ptdp_fp8_recipe_at(i)->uses_history || ptdp_fp8_recipe_at(j)->uses_history))
                ck_assert_msg(seen[i] != seen[j], "--fp8 %s and %s give the same loss %.17g",
                              ptdp_fp8_recipe_at(i)->name, ptdp_fp8_recipe_at(j)->name, seen[i]);
    }
    c.fp8.recipe = &ptdp_fp8_tensorwise;
    c.fp8.grad = &ptdp_fp8_e4m3;
    ck_assert_msg(last_loss(&c) != seen[0], "--fp8-grad-format e4m3 gives e5m2's loss");
}
END_TEST

/* --------------------------------------------- 3. refused, named */

TEST(fp8_tests, test_fp8_refusals)
{
    ptdp_train_config c = equiv_gpt_config(1, 2, 1, 1, 2);
    c.fp8.recipe = &ptdp_fp8_blockwise;
    equiv_refused(&c, "--fp8 blockwise with --tp 2: c_attn.weight (96 x 32) is split by rows");
    c = equiv_config(1, 2, 1, 1);
    c.fp8.recipe = &ptdp_fp8_mxfp8;   /* fc1 by rows: 32 / 2 = 16 rows, dy's 1x32 tiles cut */
    equiv_refused(&c, "--fp8 mxfp8 with --tp 2: fc1.weight (32 x 16) is split by rows, each rank 16 of every 32");
    c = config_of(&CASES[12]);
    c.fp8.recipe = &ptdp_fp8_tensorwise;
    equiv_refused(&c, "--fp8 tensorwise with --ep 2");
    c = equiv_config(1, 1, 1, 1);
    c.fp8.history = 4;
    equiv_refused(&c, "--fp8-amax-history 4 is delayed scaling's: it needs --fp8 delayed");
    c.fp8.recipe = &ptdp_fp8_blockwise;
    equiv_refused(&c, "--fp8-amax-history 4 is delayed scaling's, and --fp8 blockwise keeps no history");
}
END_TEST

int main(void)
{
    return harness_main("equiv_fp8");
}
