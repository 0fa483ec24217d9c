/*
 * test_equiv_zb.c — ZB-H1 trains exactly like one device, and like 1F1B.
 *
 * ZB-H1 runs 1F1B's forwards and input-gradient passes (B) in 1F1B's
 * order and defers the weight-gradient passes (W) into the bubbles.  Two
 * claims, for the MLP and the GPT, in float and double:
 *
 *   1. equal to the single-device baseline by --check's rule (1e-10 in
 *      double, 1e-4 in float), composed with dp, tp (the GPT with --sp),
 *      cp, ZeRO 1 and 2, --recompute and dropout;
 *   2. equal to 1F1B of the same mesh bit for bit.  Why it must hold: a
 *      weight receives its gradient only in W, a bias or LayerNorm only in
 *      B, and both run micro-batch 0, 1, 2, … in order, each with the same
 *      products on the same operands (wgrad.h) — so every gradient element
 *      sees the same additions in the same order.  Under ZeRO-2 B and W
 *      each reduce-scatter their own bucket; the other's elements are
 *      exact zeros there, and x + 0 = x.
 */
#include "equiv.h"
#include "ptdp/gpt.h"
#include "ptdp/state.h"

static const harness_tcase zb_tests = { .name = "zb", .timeout_s = 120 };

typedef struct { bool gpt; int dp, tp, pp, m, zero; bool sp; int cp; bool recompute; double dropout; } zb_case;

static const zb_case CASES[] = {
    /* MLP: the pipeline alone, m below, at and above p */
    { false, 1, 1, 2, 1, 0, false, 1, false, 0.0 },
    { false, 1, 1, 2, 4, 0, false, 1, false, 0.0 },
    { false, 1, 1, 4, 4, 0, false, 1, false, 0.0 },
    { false, 1, 1, 4, 8, 0, false, 1, true, 0.0 },
    { false, 1, 1, 3, 6, 0, false, 1, false, 0.1 },
    { false, 1, 1, 1, 4, 0, false, 1, false, 0.0 },
    /* MLP: composed with dp, tp, ZeRO */
    { false, 2, 1, 2, 4, 0, false, 1, false, 0.1 },
    { false, 1, 2, 2, 4, 0, false, 1, true, 0.0 },
    { false, 2, 1, 2, 4, 1, false, 1, false, 0.0 },
    { false, 2, 1, 2, 4, 2, false, 1, false, 0.0 },
    { false, 2, 2, 2, 2, 2, false, 1, false, 0.1 },
    /* GPT: tied embedding on one stage, then pipelines with everything */
    { true, 1, 1, 1, 2, 0, false, 1, false, 0.0 },
    { true, 1, 1, 2, 4, 0, false, 1, false, 0.1 },
    { true, 1, 2, 2, 2, 0, true, 1, false, 0.0 },
    { true, 1, 1, 2, 2, 0, false, 2, false, 0.1 },
    { true, 2, 1, 2, 2, 1, false, 1, true, 0.0 },
    { true, 2, 1, 2, 2, 2, false, 1, false, 0.0 },
    { true, 1, 2, 2, 4, 0, true, 1, true, 0.1 },
    { true, 2, 2, 2, 2, 2, true, 1, true, 0.1 },
    { true, 1, 2, 2, 2, 0, true, 2, false, 0.1 },
};

static ptdp_train_config config_of(const zb_case *k, const char *schedule)
{
    ptdp_train_config c = k->gpt ? equiv_gpt_config(k->dp, k->tp, k->pp, k->m, k->tp)
                                 : equiv_config(k->dp, k->tp, k->pp, k->m);
    c.zero = k->zero;
    c.sp = k->sp;
    if (k->cp > 1)
        c.cp = k->cp;
    c.recompute = k->recompute;
    c.dropout = k->dropout;
    c.schedule = ptdp_schedule_find(schedule);
    c.verify_replicas = k->dp > 1;
    return c;
}

LOOP_TEST(zb_tests, test_zb_h1_equals_baseline, (int)(sizeof CASES / sizeof CASES[0]))
{
    ptdp_train_config c = config_of(&CASES[_i], "zb-h1");
    equiv_check(&c);
}
END_TEST

LOOP_TEST(zb_tests, test_zb_h1_equals_1f1b_bit_for_bit, (int)(sizeof CASES / sizeof CASES[0]))
{
    const zb_case *k = &CASES[_i];
    ptdp_train_config zb = config_of(k, "zb-h1"), one = config_of(k, "1f1b");
    char what[128];
    snprintf(what, sizeof what, "%s dp=%d tp=%d%s cp=%d pp=%d m=%d zero=%d: zb-h1 vs 1f1b", k->gpt ? "gpt" : "mlp",
             k->dp, k->tp, k->sp ? " sp" : "", k->cp, k->pp, k->m, k->zero);
    equiv_runs_same_bits(&zb, &one, what);
}
END_TEST

int main(void)
{
    return harness_main("equiv_zb");
}
