/*
 * test_equiv_zero3.c — ZeRO-3 trains exactly like one device.
 *
 * Under ZeRO-3 (zero.h, zero3.c) no device keeps a whole parameter: each
 * unit (a block, the embeddings, the head) is all-gathered before its
 * forward and again before its backward, freed after, and its gradient is
 * reduce-scattered at the unit's BACKWARD_END into a 1/N shard that the
 * optimizer updates range by range.  Three claims, for the MLP and the
 * GPT, in float and double:
 *
 *   1. equal to the single-device baseline by --check's rule (1e-10 in
 *      double, 1e-4 in float) over a matrix of meshes: dp 2 and 4 (and
 *      cp alone, whose ranks ZeRO counts as data-parallel), composed with
 *      tp, sp, cp, pp under 1F1B and GPipe, micro-batches, full and
 *      selective recomputation, dropout, uneven stages, TeraPipe's token
 *      slices and --overlap (prefetched gathers, non-blocking
 *      reduce-scatters);
 *   2. --overlap moves the same bits at other (virtual) times, so with and
 *      without it the losses and final states agree bit for bit;
 *   3. checkpoints: a state saved under ZeRO-3 is whole tensors, written
 *      range by range; it loads into ZeRO-0 on another mesh, and a ZeRO-0
 *      one into ZeRO-3 on another mesh (another N: the ranges cut again),
 *      both like training without stopping.
 */
#include "equiv.h"
#include "ptdp/gpt.h"
#include "ptdp/state.h"

static const harness_tcase zero3_tests = { .name = "zero3", .timeout_s = 120 };

typedef struct {
    bool gpt;
    int dp, tp, pp, cp, m;
    const char *schedule;
    bool sp, recompute, selective, overlap;
    double dropout;
    const int *stage_layers;
    int token_slices;
} z3_case;

static const int UNEVEN[] = { 3, 1 };       /* 4 blocks on 2 stages, 3 + 1 */
static const int UNEVEN3[] = { 1, 2, 1 };   /* on 3 stages */

static const z3_case CASES[] = {
    /* MLP: dp alone, then with everything else */
    { .dp = 2, .m = 1 },
    { .dp = 4, .m = 2 },
    { .dp = 2, .tp = 2, .m = 2, .dropout = 0.1 },
    { .dp = 2, .pp = 2, .m = 4 },
    { .dp = 2, .pp = 2, .m = 4, .schedule = "gpipe", .recompute = true },
    { .dp = 2, .pp = 2, .m = 2, .stage_layers = UNEVEN, .overlap = true },
    { .dp = 2, .pp = 3, .m = 3, .stage_layers = UNEVEN3, .dropout = 0.1 },
    { .dp = 2, .m = 4, .overlap = true, .recompute = true, .dropout = 0.1 },
    { .dp = 4, .pp = 2, .m = 2, .overlap = true },
    { .dp = 2, .tp = 2, .pp = 2, .m = 2, .schedule = "gpipe", .overlap = true },
    /* GPT: the tied embedding on one stage, then across two */
    { .gpt = true, .dp = 2, .m = 1 },
    { .gpt = true, .dp = 2, .pp = 2, .m = 2 },
    { .gpt = true, .dp = 4, .m = 2, .overlap = true },
    { .gpt = true, .dp = 2, .tp = 2, .m = 2, .sp = true, .dropout = 0.1 },
    { .gpt = true, .dp = 2, .cp = 2, .m = 1 },
    { .gpt = true, .dp = 1, .cp = 2, .m = 2, .overlap = true },
    { .gpt = true, .dp = 2, .m = 2, .selective = true, .dropout = 0.1 },
    { .gpt = true, .dp = 2, .pp = 2, .m = 2, .schedule = "gpipe", .token_slices = 2 },
    { .gpt = true, .dp = 2, .pp = 2, .m = 2, .schedule = "gpipe", .recompute = true, .overlap = true },
    { .gpt = true, .dp = 2, .tp = 2, .pp = 2, .m = 2, .sp = true, .overlap = true, .dropout = 0.1 },
    { .gpt = true, .dp = 2, .pp = 2, .m = 4, .stage_layers = UNEVEN, .selective = true, .overlap = true },
};
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

/* The GPT of the other equivalence suites: small, several heads. */
static void small_gpt(ptdp_train_config *c, int tp)
{
    c->model = equiv_small_gpt(tp);
    c->batch = 16;
    c->steps = 2;
    c->lr = 1e-3;          /* as test_equiv_terapipe.c: token slices round differently in float */
}

static ptdp_train_config config_of(const z3_case *k)
{
    const int tp = k->tp > 0 ? k->tp : 1, pp = k->pp > 0 ? k->pp : 1;
    ptdp_train_config c = equiv_config(k->dp, tp, pp, k->m);
    if (k->gpt)
        small_gpt(&c, tp);
    c.zero = 3;
    c.cp = k->cp;
    c.schedule = ptdp_schedule_find(k->schedule);
    c.sp = k->sp;
    c.recompute = k->recompute;
    c.recompute_core = k->selective;
    c.overlap = k->overlap;
    c.dropout = k->dropout;
    c.stage_layers = k->stage_layers;
    c.token_slices = k->token_slices;
    c.verify_replicas = true;   /* the replicas' parameters agree bit for bit after each step */
    return c;
}

static void describe(const z3_case *k, const ptdp_train_config *c, char *out, size_t n)
{
    snprintf(out, n, "%s zero 3 dp=%d tp=%d%s cp=%d pp=%d m=%d %s%s%s%s%s dropout=%g slices=%d",
             k->gpt ? "gpt" : "mlp", c->dp, c->tp, c->sp ? " sp" : "", ptdp_train_cp(c), c->pp, c->micro_batches,
             ptdp_train_schedule(c)->name, c->stage_layers ? " uneven" : "", c->recompute ? " recompute" : "",
             c->recompute_core ? " selective" : "", c->overlap ? " overlap" : "", c->dropout,
             ptdp_train_token_slices(c));
}

/* ------------------------------------------------- 1. like one device */

LOOP_TEST(zero3_tests, test_zero3_equals_baseline, NCASES)
{
    ptdp_train_config c = config_of(&CASES[_i]);
    equiv_check(&c);   /* losses, gradient norms, every parameter */
}
END_TEST

/* ------------------------------------- 2. --overlap: the same bits */

/* The cases of CASES that --overlap changes most: pipelines (a forward of
 * one micro-batch between two backwards), tp with sp, cp, recomputation,
 * the tied embedding, dp 4. */
static const int BITS[] = { 1, 4, 5, 9, 11, 12, 15, 18, 19, 20 };

LOOP_TEST(zero3_tests, test_zero3_overlap_same_bits, (int)(sizeof BITS / sizeof BITS[0]))
{
    const z3_case *k = &CASES[BITS[_i]];
    ptdp_train_config plain = config_of(k), ov = plain;
    plain.overlap = false;
    ov.overlap = true;
    char what[256];
    describe(k, &ov, what, sizeof what);
    equiv_runs_same_bits(&ov, &plain, what);
}
END_TEST

/* ------------------------------------------------ 3. checkpoints */

/* first (3 steps) saved, loaded into second (3 more): like six steps of
 * first's mesh without ZeRO.  Every tensor, the optimizer state included. */
static void resume_case(ptdp_train_config first, ptdp_train_config second, bool check_moments, const char *what)
{
    first.steps = second.steps = 3;
    ptdp_train_config full = first;
    full.zero = 0;
    full.overlap = false;
    full.steps = 6;
    ptdp_state reference, resumed;
    ptdp_train_result log;
    equiv_resume_beside(&full, &first, &second, &reference, NULL, &resumed, &log);
    ck_assert_int_eq(log.completed, 3);
    if (check_moments) {
        equiv_states_agree(&resumed, &reference, PTDP_TOLERANCE, what);
    } else {   /* the GPT: Adam's second moment may hold exact zeros (test_equiv_zb.c) */
        ck_assert_int_eq(resumed.ntensors, reference.ntensors);
        for (int i = 0; i < resumed.ntensors; i++) {
            const ptdp_state_tensor *x = &resumed.t[i], *y = &reference.t[i];
            ck_assert_str_eq(x->name, y->name);
            double worst = 0, largest = 0;
            for (size_t e = 0; e < (size_t)x->rows * (size_t)x->cols; e++) {
                worst = fmax(worst, fabs((double)x->data[e] - (double)y->data[e]));
                largest = fmax(largest, fabs((double)y->data[e]));
            }
            /* double: relative to the tensor's own scale (exp_avg_sq is
             * ~1e-6); float: --check's max(1, |b|), since AdamW turns a
             * rounding of a nearly zero gradient into ~1e-4 of lr */
            double scale = sizeof(ptdp_real) == sizeof(double) ? largest : fmax(1.0, largest);
            ck_assert_msg(worst <= PTDP_TOLERANCE * scale, "%s: %s differs by %g (largest %g)", what, x->name,
                          worst, largest);
        }
    }
    ptdp_state_free(&reference);
    ptdp_state_free(&resumed);
    ptdp_train_result_free(&log);
}

TEST(zero3_tests, test_zero3_checkpoint_reshards_mlp)
{
    /* ZeRO-3 on dp 3 x tp 2 (three ranges per unit, cut through TP shards)
     * -> ZeRO-0 on pp 2, one device per stage */
    ptdp_train_config first = equiv_config(3, 2, 1, 2), second = equiv_config(1, 1, 2, 2);
    first.zero = 3;
    resume_case(first, second, true, "mlp: zero 3 dp 3 tp 2 -> zero 0 pp 2");
    /* ZeRO-0 on dp 2 -> ZeRO-3 on dp 4 x pp 2 with --overlap */
    first = equiv_config(2, 1, 1, 1);
    second = equiv_config(4, 1, 2, 2);
    second.zero = 3;
    second.overlap = true;
    resume_case(first, second, true, "mlp: zero 0 dp 2 -> zero 3 dp 4 pp 2 overlap");
    /* ZeRO-3 on dp 2 -> ZeRO-3 on dp 3 x tp 2: other N, other ranges */
    first = equiv_config(2, 1, 2, 2);
    first.zero = 3;
    second = equiv_config(3, 2, 1, 1);
    second.zero = 3;
    resume_case(first, second, true, "mlp: zero 3 dp 2 pp 2 -> zero 3 dp 3 tp 2");
}
END_TEST

TEST(zero3_tests, test_zero3_checkpoint_reshards_gpt)
{
    /* the tied embedding: one stage's wte, two stages' wte and head */
    /* (the vocabulary padded for tp 2 on both sides: a checkpoint's shape) */
    ptdp_train_config first = equiv_config(2, 1, 2, 2), second = equiv_config(1, 2, 1, 1);
    small_gpt(&first, 2);
    small_gpt(&second, 2);
    first.zero = 3;
    resume_case(first, second, false, "gpt: zero 3 dp 2 pp 2 -> zero 0 tp 2");
    first = equiv_config(1, 2, 1, 2);
    second = equiv_config(2, 1, 2, 2);
    small_gpt(&first, 2);
    small_gpt(&second, 2);
    second.zero = 3;
    second.cp = 2;
    resume_case(first, second, false, "gpt: zero 0 tp 2 -> zero 3 dp 2 cp 2 pp 2");
}
END_TEST

int main(void)
{
    return harness_main("equiv_zero3");
}
