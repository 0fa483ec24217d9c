/*
 * test_equiv_terapipe.c — TeraPipe's token slices train exactly like one
 * device.
 *
 * With --token-slices k each micro-batch's sequences go through the
 * pipeline as k slices of positions, GPipe's order over the m k units:
 * forwards in order, backwards last first, each slice's attention reading
 * the keys and values the earlier slices left on the stage (gpt_kv.c).
 * Equal to the single-device baseline by --check's rule (1e-10 in double,
 * 1e-4 in float, at the GPT's lr) for even and uneven slices, one token a slice, and
 * composed with dp, tp (with and without --sp), ZeRO 1 and 2, full and
 * selective recomputation, dropout and several micro-batches.
 */
#include "equiv.h"
#include "ptdp/gpt.h"

static const harness_tcase terapipe_tests = { .name = "terapipe", .timeout_s = 120 };

typedef struct { int dp, tp, pp, m, k, zero; bool sp, recompute, selective; double dropout; } tp_case;

static const tp_case CASES[] = {
    { 1, 1, 2, 1, 2, 0, false, false, false, 0.0 },
    { 1, 1, 2, 1, 3, 0, false, false, false, 0.1 },   /* uneven: 3 3 2 of 8 */
    { 1, 1, 4, 1, 8, 0, false, false, false, 0.0 },   /* one token a slice */
    { 1, 1, 2, 2, 4, 0, false, true, false, 0.1 },
    { 1, 1, 2, 2, 2, 0, false, false, true, 0.0 },
    { 2, 1, 2, 2, 2, 1, false, false, false, 0.0 },
    { 2, 1, 2, 1, 4, 2, false, false, false, 0.1 },
    { 1, 2, 2, 1, 2, 0, false, false, false, 0.0 },
    { 1, 2, 2, 2, 2, 0, true, false, false, 0.1 },
    { 2, 2, 2, 1, 4, 2, true, true, false, 0.0 },
};

static ptdp_train_config config_of(const tp_case *k)
{
    ptdp_train_config c = equiv_config(k->dp, k->tp, k->pp, k->m);
    c.model = equiv_small_gpt(k->tp);
    c.batch = 8;
    c.steps = 2;
    /* The GPT's own default lr (gpt.h).  Slices sum each weight gradient in
     * k pieces, not one: a different rounding in float.  AdamW's first steps
     * divide a gradient by its own size, so where a gradient is nearly zero
     * a rounding difference becomes a step difference of up to lr times
     * its relative change — at the suite's lr 1e-2 that reaches 1.5e-4 in
     * float, past --check's 1e-4; at 1e-3 it stays under it. */
    c.lr = 1e-3;
    c.schedule = ptdp_schedule_find("gpipe");
    c.token_slices = k->k;
    c.zero = k->zero;
    c.sp = k->sp;
    c.recompute = k->recompute;
    c.recompute_core = k->selective;
    c.dropout = k->dropout;
    c.verify_replicas = k->dp > 1;
    return c;
}

LOOP_TEST(terapipe_tests, test_token_slices_equal_baseline, (int)(sizeof CASES / sizeof CASES[0]))
{
    ptdp_train_config c = config_of(&CASES[_i]);
    equiv_check(&c);
}
END_TEST

int main(void)
{
    return harness_main("equiv_terapipe");
}
