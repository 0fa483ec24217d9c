/*
 * test_equiv_dualpipev.c — DualPipeV trains exactly like one device, and
 * like 1F1B on twice the stages.
 *
 * DualPipeV on p devices cuts the model into 2p stages laid out as a V:
 * device r runs stage r and stage 2p - 1 - r, the last device hands stage
 * p - 1's output to its own stage p, and device 0 holds both the first and
 * the last stage — with a GPT, both copies of the tied embedding, summed on
 * the device.  Two claims, for the MLP, the GPT and a mixture of experts, in
 * float and double:
 *
 *   1. equal to the single-device baseline by --check's rule (1e-10 in
 *      double, 1e-4 in float), composed with dp, tp (the GPT with --sp),
 *      ep, ZeRO 1 and 2, --recompute and dropout;
 *   2. equal to 1F1B on 2p devices bit for bit: the same 2p stages with the
 *      same blocks, and every gradient element sees the same additions in
 *      the same order — each stage runs micro-batch 0, 1, 2, … through its
 *      backward (whole, or B now and W later in first-in first-out order,
 *      which touch different parameters: wgrad.h), and the tied
 *      embedding's two copies are summed once, a + b, on device 0 as over
 *      the embedding group of 1F1B's first and last device.
 */
#include "equiv.h"
#include "ptdp/gpt.h"
#include "ptdp/state.h"

static const harness_tcase v_tests = { .name = "dualpipev", .timeout_s = 300 };

typedef equiv_pipe_case v_case;

static const v_case CASES[] = {
    /* MLP: the V alone, m at and above 2p, p 2 and 3 */
    { 0, 1, 1, 2, 4, 0, 0, false, false, 0.0 },
    { 0, 1, 1, 2, 6, 0, 0, false, false, 0.0 },
    { 0, 1, 1, 3, 6, 0, 0, false, true, 0.1 },
    /* MLP: composed with dp, tp, ZeRO */
    { 0, 2, 1, 2, 4, 1, 0, false, false, 0.1 },
    { 0, 2, 1, 2, 4, 2, 0, false, false, 0.0 },
    { 0, 1, 2, 2, 4, 0, 0, false, true, 0.0 },
    /* GPT: the tied embedding's copies both on device 0 */
    { 1, 1, 1, 2, 4, 0, 0, false, false, 0.0 },
    { 1, 1, 1, 2, 4, 0, 0, false, false, 0.1 },
    { 1, 1, 2, 2, 4, 0, 0, true, true, 0.0 },
    { 1, 2, 1, 2, 4, 1, 0, false, false, 0.0 },
    { 1, 2, 1, 2, 4, 2, 0, false, true, 0.1 },
    /* mixture of experts under expert parallelism */
    { 2, 2, 1, 2, 4, 0, 2, false, false, 0.0 },
    { 2, 2, 1, 2, 4, 1, 2, false, true, 0.0 },
};

/* 2p stages need 2p layers at least. */
static ptdp_train_config config_of(const v_case *k, const char *schedule, int pp)
{
    ptdp_train_config c = equiv_pipe_config(k, schedule, k->dp, pp, k->m, 2 * k->pp);
    c.verify_replicas = k->dp > 1;
    return c;
}

LOOP_TEST(v_tests, test_dualpipev_equals_baseline, (int)(sizeof CASES / sizeof CASES[0]))
{
    ptdp_train_config c = config_of(&CASES[_i], "dualpipev", CASES[_i].pp);
    equiv_check(&c);
}
END_TEST

LOOP_TEST(v_tests, test_dualpipev_equals_1f1b_on_twice_the_stages_bit_for_bit,
          (int)(sizeof CASES / sizeof CASES[0]))
{
    const v_case *k = &CASES[_i];
    ptdp_train_config v = config_of(k, "dualpipev", k->pp), one = config_of(k, "1f1b", 2 * k->pp);
    char what[128];
    snprintf(what, sizeof what, "%s dp=%d tp=%d%s pp=%d m=%d zero=%d ep=%d: dualpipev vs 1f1b on %d stages",
             equiv_pipe_model_name(k), k->dp, k->tp, k->sp ? " sp" : "", k->pp, k->m, k->zero, k->ep, 2 * k->pp);
    equiv_runs_same_bits(&v, &one, what);
}
END_TEST

/* The flags it cannot run with: refused before the first step, by name. */
TEST(v_tests, test_what_it_refuses)
{
    static const struct { int pp, m, v, zero; bool bf16; const char *words; } no[] = {
        { 2, 3, 0, 0, false, "--micro-batches 3 is fewer than 2 x --pp = 4" },
        { 2, 4, 3, 0, false, "--virtual-stages 3" },
        { 2, 4, 0, 3, false, "--zero 3" },
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        v_case k = { .model = 0, .dp = 2, .tp = 1, .pp = no[i].pp, .m = no[i].m };
        ptdp_train_config c = config_of(&k, "dualpipev", k.pp);
        c.virtual_stages = no[i].v;
        c.zero = no[i].zero;
        char msg[512] = "";
        int rc = ptdp_train_validate(&c, msg, sizeof msg);
        ck_assert_msg(rc == PTDP_EINVAL && strstr(msg, no[i].words) != NULL, "%s: %s", no[i].words, msg);
    }
    v_case k = { .model = 1, .dp = 1, .tp = 1, .pp = 3, .m = 6 };
    ptdp_train_config c = config_of(&k, "dualpipev", 3);
    c.model.layers = 4;
    c.batch = 12;
    equiv_refused(&c, "need --layers >= 6");
}
END_TEST

int main(void)
{
    return harness_main("equiv_dualpipev");
}
