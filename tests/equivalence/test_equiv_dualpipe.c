/*
 * test_equiv_dualpipe.c — DualPipe trains exactly like one device, and is
 * data parallelism over two pipelines folded onto one.
 *
 * DualPipe on p devices holds two copies of the model cut into p stages:
 * device r runs stage r of the down copy on micro-batches 0 .. m/2 - 1 and
 * stage p - 1 - r of the up copy on the rest, each copy taking half of the
 * samples.  That is `--dp 2 --pp p --micro-batches m/2` — two replicas,
 * each with half the batch — with replica 1's pipeline turned round and
 * laid on the same devices:
 *
 *   DualPipe, p = 4             1F1B, dp = 2, pp = 4, m/2 each
 *   device 0  [d0][u3]          replica 0  [s0][s1][s2][s3]   first half
 *   device 1  [d1][u2]          replica 1  [s0][s1][s2][s3]   second half
 *   device 2  [d2][u1]
 *   device 3  [d3][u0]          (d: down copy = replica 0, u: up = replica 1)
 *
 * The mirror group {r, p - 1 - r} sums stage r's two copies as DP's
 * all-reduce sums the replicas' (a + b), then a tied embedding's copies are
 * summed on the end devices as the embedding group would; each stage runs
 * its copy's micro-batches in order (whole backwards, or B now and W later
 * first in first out, which touch different parameters).  So, in float and
 * double, for the MLP, the GPT and a mixture of experts:
 *
 *   1. every run equals the single-device baseline by --check's rule, with
 *      dp, tp (the GPT with --sp), ep, ZeRO 1 and 2, --recompute, dropout,
 *      and its two copies stay bit for bit equal (verify_replicas hashes
 *      them over the mirror group after every step);
 *   2. without dp it equals the DP-2 pipeline above bit for bit: the same
 *      losses and the same final state (the down copy's, which a
 *      checkpoint saves).  With dp the mirror sum comes before DP's, where
 *      DP 2 dp would add all 2 dp replicas in one all-reduce: equal by 1.
 *   3. a checkpoint (one copy) resumes both copies: 1 + 1 steps are 2.
 */
#include "equiv.h"
#include "ptdp/gpt.h"
#include "ptdp/state.h"

static const harness_tcase dual_tests = { .name = "dualpipe", .timeout_s = 300 };

typedef equiv_pipe_case dual_case;

static const dual_case CASES[] = {
    /* MLP: the two copies alone; m/2 of 2 and 3; p 4 */
    { 0, 1, 1, 2, 4, 0, 0, false, false, 0.0 },
    { 0, 1, 1, 2, 6, 0, 0, false, false, 0.1 },
    { 0, 1, 1, 4, 8, 0, 0, false, true, 0.0 },
    /* MLP: composed with dp, tp, ZeRO */
    { 0, 2, 1, 2, 4, 1, 0, false, false, 0.1 },
    { 0, 2, 1, 2, 4, 2, 0, false, false, 0.0 },
    { 0, 1, 2, 2, 4, 0, 0, false, true, 0.0 },
    /* GPT: a tied embedding's four copies, two on each end */
    { 1, 1, 1, 2, 4, 0, 0, false, false, 0.1 },
    { 1, 1, 1, 4, 8, 0, 0, false, false, 0.0 },
    { 1, 1, 2, 2, 4, 0, 0, true, true, 0.0 },
    { 1, 2, 1, 2, 4, 1, 0, false, false, 0.0 },
    { 1, 2, 1, 2, 4, 2, 0, false, true, 0.1 },
    /* mixture of experts under expert parallelism */
    { 2, 2, 1, 2, 4, 0, 2, false, false, 0.0 },
    { 2, 2, 1, 2, 4, 1, 2, false, true, 0.0 },
};
enum { NCASES = (int)(sizeof CASES / sizeof CASES[0]) };

/* Three steps of the MLP (two of the GPT); the two copies compared after
 * every step (verify_replicas). */
static ptdp_train_config config_of(const dual_case *k, const char *schedule, int dp, int m)
{
    ptdp_train_config c = equiv_pipe_config(k, schedule, dp, k->pp, m, k->pp);
    if (k->model == 0)
        c.steps = 3;
    c.verify_replicas = true;
    return c;
}

LOOP_TEST(dual_tests, test_dualpipe_equals_baseline, NCASES)
{
    ptdp_train_config c = config_of(&CASES[_i], "dualpipe", CASES[_i].dp, CASES[_i].m);
    equiv_check(&c);
}
END_TEST

LOOP_TEST(dual_tests, test_dualpipe_equals_dp2_1f1b_bit_for_bit, NCASES)
{
    const dual_case *k = &CASES[_i];
    if (k->dp > 1)
        return;   /* the sums' order differs with dp (see above): test 1 covers it */
    ptdp_train_config d = config_of(k, "dualpipe", 1, k->m), two = config_of(k, "1f1b", 2, k->m / 2);
    char what[160];
    snprintf(what, sizeof what, "%s tp=%d%s pp=%d m=%d%s: dualpipe vs 1f1b dp=2 m=%d", equiv_pipe_model_name(k), k->tp,
             k->sp ? " sp" : "", k->pp, k->m, k->dropout > 0 ? " dropout" : "", k->m / 2);
    equiv_runs_same_bits(&d, &two, what);
}
END_TEST

/* A checkpoint holds one copy (the down copy's, under the usual names),
 * and a run resumed from it loads it into both: 1 + 1 steps are 2 steps,
 * bit for bit — with a tied embedding and ZeRO-1's sliced optimizer state. */
TEST(dual_tests, test_a_checkpoint_resumes_both_copies)
{
    const dual_case k = { 1, 2, 1, 2, 4, 1, 0, false, false, 0.0 };
    ptdp_train_config whole = config_of(&k, "dualpipe", 2, 4), first = whole, second = whole;
    whole.steps = 2;
    first.steps = second.steps = 1;
    ptdp_state a, b;
    ptdp_train_result ra, rb;
    equiv_resume_beside(&whole, &first, &second, &a, &ra, &b, &rb);
    equiv_losses_agree(&ra.log[1], &rb.log[0], 1, 0, "gpt dp=2 zero=1 dualpipe: step 2, resumed");
    equiv_states_same_bits(&a, &b, "gpt dp=2 zero=1 dualpipe: 2 steps, or 1 and 1 resumed");
    ptdp_state_free(&a);
    ptdp_state_free(&b);
    ptdp_train_result_free(&ra);
    ptdp_train_result_free(&rb);
}
END_TEST

/* Twice the parameters of 1F1B on the same devices: a stage of each copy. */
TEST(dual_tests, test_each_device_holds_two_stages)
{
    dual_case k = { .model = 0, .dp = 1, .tp = 1, .pp = 2, .m = 4 };
    ptdp_train_config d = config_of(&k, "dualpipe", 1, 4), one = config_of(&k, "1f1b", 1, 4);
    d.steps = one.steps = 1;
    ptdp_train_result rd, r1;
    equiv_train(&d, NULL, NULL, &rd);
    equiv_train(&one, NULL, NULL, &r1);
    ck_assert(rd.param_elements != NULL && r1.param_elements != NULL);
    /* with p = 2 each device holds the whole model: stage r and stage 1 - r */
    ck_assert_int_eq(rd.param_elements[0], r1.param_elements[0] + r1.param_elements[1]);
    ck_assert_int_eq(rd.param_elements[1], rd.param_elements[0]);
    ptdp_train_result_free(&rd);
    ptdp_train_result_free(&r1);
}
END_TEST

/* The flags it cannot run with: refused before the first step, by name. */
TEST(dual_tests, test_what_it_refuses)
{
    static const struct { int pp, m, v, zero; bool overlap; const char *words; } no[] = {
        { 3, 6, 0, 0, false, "even --pp" },
        { 2, 5, 0, 0, false, "--micro-batches 5 must be even" },
        { 4, 6, 0, 0, false, "at least 2 x --pp = 8" },
        { 2, 4, 3, 0, false, "--virtual-stages 3" },
        { 2, 4, 0, 3, false, "--zero 3 with --schedule dualpipe" },
        { 2, 4, 0, 0, true, "--overlap with --schedule dualpipe" },
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        dual_case k = { .model = 0, .dp = 2, .tp = 1, .pp = no[i].pp };
        ptdp_train_config c = config_of(&k, "dualpipe", 2, no[i].m);
        c.batch = 120;   /* divisible by dp x m for every m above: the schedule's rule speaks */
        c.virtual_stages = no[i].v;
        c.zero = no[i].zero;
        c.overlap = no[i].overlap;
        char msg[512] = "";
        int rc = ptdp_train_validate(&c, msg, sizeof msg);
        ck_assert_msg(rc == PTDP_EINVAL && strstr(msg, no[i].words) != NULL, "%s: %s", no[i].words, msg);
    }
}
END_TEST

int main(void)
{
    return harness_main("equiv_dualpipe");
}
