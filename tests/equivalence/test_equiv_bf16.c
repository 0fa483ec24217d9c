/*
 * test_equiv_bf16.c — `--precision bf16` trains like one device in bf16,
 * and like float within bf16's rounding.
 *
 * Under bf16 mixed precision (mixed.h) parameters and gradients are stored
 * as bf16, the arithmetic runs in float and the optimizer steps float
 * master weights.  A mesh cannot equal one device bit for bit any more —
 * it rounds its partial sums to bf16 (2^-8 relative) in other places than
 * one device does — so the claims are:
 *
 *   1. a mesh equals the bf16 single-device baseline within
 *      PTDP_TOLERANCE_BF16 (1e-2, --check's rule) in every step's loss and
 *      gradient norm and every final parameter, over a matrix: MLP and GPT;
 *      dp 2 and 4; ZeRO 0-3; tp (with sp); pp under 1F1B and GPipe; cp;
 *      micro-batches; full and selective recomputation; --overlap; a
 *      mixture of experts with expert parallelism (and tp, ZeRO-1);
 *
 *          mesh (bf16) ──┐
 *                        ├── within 1e-2     (float: 1e-4; double: 1e-10)
 *          one device (bf16) ┘
 *
 *      and over 20 steps (cp 2; tp 2 with sp) every loss within 1e-2 and
 *      every parameter but attention's key bias too: its true gradient is
 *      0, AdamW walks its rounding noise by about lr a step, and --check
 *      allows the parameters 2 lr a step (ptdp_tolerance_bf16_params);
 *   2. bf16 tracks float: for 20 steps every loss within 2% of the float
 *      run's on the same mesh (bf16 keeps 8 significant bits, the master
 *      weights keep the small updates);
 *   3. --overlap moves the same bf16 bits at other (virtual) times: with and
 *      without it the losses and final states are bit-identical; and so
 *      are no recomputation, selective and full (the activations rounded
 *      where they are made, the first time and again);
 *   4. the master weights keep what bf16 drops: updates far below half a
 *      bf16 step add up in them as in float, off the bf16 grid;
 *   5. checkpoints: a bf16 run saved at step 3 and resumed to step 6 equals
 *      the six uninterrupted steps bit for bit (master weights, moments,
 *      losses); a bf16 checkpoint resumes in float and a float one in bf16.
 *
 * The float build only (tests/meson.build): ptdp-f64 refuses bf16.
 */
#include "equiv.h"
#include "ptdp/bf16.h"
#include "ptdp/gpt.h"
#include "ptdp/models.h"
#include "ptdp/state.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

static const harness_tcase bf16_tests = { .name = "bf16", .timeout_s = 240 };

typedef struct {
    bool gpt;
    int dp, tp, pp, cp, m, zero;
    const char *schedule;
    bool sp, recompute, selective, overlap;
    bool a2a;           /* --cp-algo a2a: Ulysses' attention */
    int experts, ep;    /* a mixture of experts, spread over ep ranks */
} bf16_case;

static const bf16_case CASES[] = {
    /* MLP: dp and every ZeRO stage, then composed */
    { .dp = 2, .m = 1 },
    { .dp = 2, .m = 2, .zero = 1 },
    { .dp = 4, .m = 2, .zero = 2 },
    { .dp = 2, .m = 2, .zero = 3 },
    { .dp = 4, .m = 1, .zero = 3, .overlap = true },
    { .dp = 2, .m = 4, .overlap = true },
    { .dp = 2, .tp = 2, .m = 2, .zero = 1 },
    { .dp = 2, .pp = 2, .m = 4 },
    { .dp = 2, .pp = 2, .m = 4, .zero = 2, .schedule = "gpipe", .recompute = true },
    { .dp = 2, .pp = 2, .m = 2, .zero = 3, .overlap = true },
    { .dp = 2, .tp = 2, .pp = 2, .m = 2, .zero = 3, .schedule = "gpipe" },
    /* GPT: the tied embedding, attention, sp, cp */
    { .gpt = true, .dp = 2, .m = 1 },
    { .gpt = true, .dp = 2, .m = 2, .zero = 3, .overlap = true },
    { .gpt = true, .dp = 4, .m = 1, .zero = 2 },
    { .gpt = true, .dp = 2, .tp = 2, .m = 2, .sp = true, .zero = 1 },
    { .gpt = true, .dp = 2, .cp = 2, .m = 1, .zero = 3 },
    { .gpt = true, .dp = 2, .pp = 2, .m = 2, .selective = true },
    { .gpt = true, .dp = 2, .pp = 2, .m = 2, .zero = 3, .schedule = "gpipe", .recompute = true },
    /* ZeRO-1's ranges (one per DP bucket) and the embedding tied across stages */
    { .gpt = true, .dp = 2, .pp = 2, .m = 2, .zero = 1, .overlap = true },
    /* Ulysses (--cp-algo a2a): the probabilities of whole sequences of a
     * rank's heads, rounded where they are made */
    { .gpt = true, .dp = 2, .cp = 2, .m = 1, .zero = 3, .a2a = true },
    { .gpt = true, .dp = 1, .tp = 2, .cp = 2, .m = 2, .sp = true, .selective = true, .a2a = true },
    { .gpt = true, .dp = 2, .m = 1, .experts = 4, .ep = 2 },
    { .gpt = true, .dp = 2, .tp = 2, .m = 2, .zero = 1, .experts = 4, .ep = 2, .recompute = true },
};
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

/* The GPT of the other equivalence suites: small, several heads. */
static void small_gpt(ptdp_train_config *c, int tp)
{
    c->model = equiv_small_gpt(tp);
    c->batch = 16;
}

static ptdp_train_config config_of(const bf16_case *k)
{
    const int tp = k->tp > 0 ? k->tp : 1, pp = k->pp > 0 ? k->pp : 1;
    ptdp_train_config c = equiv_config(k->dp, tp, pp, k->m);
    if (k->gpt)
        small_gpt(&c, tp);
    if (k->experts > 0) {   /* the router in float, the experts' rows rounded where made (gpt_moe.c) */
        ptdp_gpt(&c.model)->moe_experts = k->experts;
        ptdp_gpt(&c.model)->moe_ffn = 24;
        c.ep = k->ep;
    }
    /* AdamW at the CLI's lr, 1e-3: equiv_config's 1e-2 moves an element whose
     * gradient is almost zero (its sign a matter of rounding) by ±lr a step,
     * a difference of 3e-2 after 3 steps that is Adam's, not bf16's */
    c.lr = 1e-3;
    c.steps = 3;
    c.bf16 = true;
    c.zero = k->zero;
    c.cp = k->cp;
    c.cp_a2a = k->a2a;
    if (k->schedule != NULL)
        c.schedule = ptdp_schedule_find(k->schedule);
    c.sp = k->sp;
    c.recompute = k->recompute;
    c.recompute_core = k->selective;
    c.overlap = k->overlap;
    c.verify_replicas = true;   /* the replicas' bf16 parameters agree bit for bit after each step */
    return c;
}

static void describe(const ptdp_train_config *c, char *out, size_t n)
{
    snprintf(out, n, "%s bf16 zero %d dp=%d tp=%d%s cp=%d%s ep=%d pp=%d m=%d %s%s%s%s",
             ptdp_model_name(&c->model), c->zero, c->dp, c->tp, c->sp ? " sp" : "", ptdp_train_cp(c),
             c->cp_a2a ? " a2a" : "", c->ep > 1 ? c->ep : 1, c->pp,
             c->micro_batches, ptdp_train_schedule(c)->name, c->recompute ? " recompute" : "",
             c->recompute_core ? " selective" : "", c->overlap ? " overlap" : "");
}

/* ------------------------------------------ 1. like one device in bf16 */

/* Train c and its single-device baseline (bf16 too: float's would be
 * 1e-2 away for other reasons); every step's loss within
 * PTDP_TOLERANCE_BF16 of the baseline's. */
static void train_beside_baseline(const ptdp_train_config *c, const char *what, ptdp_state *fs, ptdp_state *fb,
                                  ptdp_train_result *rs, ptdp_train_result *rb)
{
    ptdp_train_config b = equiv_baseline(c);
    ck_assert(b.bf16);
    equiv_train(c, NULL, fs, rs);
    equiv_train(&b, NULL, fb, rb);
    for (int i = 0; i < c->steps; i++)
        ck_assert_msg(isfinite(rs->log[i].loss) && ptdp_check_value(rs->log[i].loss, rb->log[i].loss,
                                                                    PTDP_TOLERANCE_BF16),
                      "%s: step %d loss %.9g vs bf16 baseline %.9g", what, i + 1, rs->log[i].loss, rb->log[i].loss);
}

LOOP_TEST(bf16_tests, test_bf16_mesh_equals_bf16_baseline, NCASES)
{
    ptdp_train_config c = config_of(&CASES[_i]);
    char what[256];
    describe(&c, what, sizeof what);
    ptdp_state fs, fb;
    ptdp_train_result rs, rb;
    train_beside_baseline(&c, what, &fs, &fb, &rs, &rb);
    for (int i = 0; i < c.steps; i++) {
        const ptdp_step_log *s = &rs.log[i], *l = &rb.log[i];
        ck_assert_msg(l->grad_norm > 0, "%s: step %d: no gradient", what, i + 1);
        ck_assert_msg(ptdp_check_value(s->grad_norm, l->grad_norm, PTDP_TOLERANCE_BF16),
                      "%s: step %d gradient norm %.9g vs bf16 baseline %.9g", what, i + 1, s->grad_norm, l->grad_norm);
    }
    ck_assert_msg(rb.log[0].loss != rb.log[c.steps - 1].loss, "%s: the baseline's loss never moved", what);
    ptdp_check_report rep;
    ck_assert_msg(ptdp_check_states(&fs, &fb, PTDP_TOLERANCE_BF16, &rep), "%s: %s differs by %g (relative %g)", what,
                  rep.worst, rep.max_abs, rep.max_rel);
    ptdp_state_free(&fs);
    ptdp_state_free(&fb);
    ptdp_train_result_free(&rs);
    ptdp_train_result_free(&rb);
}
END_TEST

/* ------------------------- 1b. 20 steps: AdamW's reach on the key bias */

/* The largest |a - b| over a tensor's elements, leaving out [skip0, skip1). */
static double largest_diff(const ptdp_state_tensor *x, const ptdp_state_tensor *y, size_t skip0, size_t skip1)
{
    const size_t n = (size_t)x->rows * (size_t)x->cols;
    double worst = 0;
    for (size_t i = 0; i < n; i++)
        if (i < skip0 || i >= skip1)
            worst = fmax(worst, fabs((double)x->data[i] - (double)y->data[i]));
    return worst;
}

/* Over 20 steps a bf16 mesh and its bf16 baseline drift apart where a
 * gradient is rounding noise: attention's key bias, whose true gradient
 * is 0 (softmax ignores a constant added to a row of scores), walks by
 * about lr a step under AdamW, differently in each.  --check allows the
 * parameters 2 lr a step (ptdp_tolerance_bf16_params); everything but the
 * key bias stays within PTDP_TOLERANCE_BF16, and so does every loss. */
static const int LONG[] = { 15, 14 };   /* cp 2; tp 2 with sp */

LOOP_TEST(bf16_tests, test_bf16_check_over_20_steps, (int)(sizeof LONG / sizeof LONG[0]))
{
    ptdp_train_config c = config_of(&CASES[LONG[_i]]);
    c.steps = 20;
    char what[256];
    describe(&c, what, sizeof what);
    ptdp_state fs, fb;
    ptdp_train_result rs, rb;
    train_beside_baseline(&c, what, &fs, &fb, &rs, &rb);
    const double reach = ptdp_tolerance_bf16_params(c.lr, c.steps, 1);
    ck_assert(reach == 2 * c.lr * c.steps && reach > PTDP_TOLERANCE_BF16);
    ptdp_check_report rep;
    ck_assert_msg(ptdp_check_states(&fs, &fb, reach, &rep), "%s: %s differs by %g", what, rep.worst, rep.max_abs);
    ck_assert_int_eq(fs.ntensors, fb.ntensors);
    double key_bias = 0;
    for (int i = 0; i < fs.ntensors; i++) {
        const ptdp_state_tensor *x = &fs.t[i], *y = &fb.t[i];
        const size_t n = (size_t)x->rows * (size_t)x->cols, C = n / 3;
        const bool qkv_bias = strstr(x->name, "attn.c_attn.bias") != NULL;
        ck_assert_str_eq(x->name, y->name);
        double d = largest_diff(x, y, qkv_bias ? C : 0, qkv_bias ? 2 * C : 0);
        ck_assert_msg(d <= PTDP_TOLERANCE_BF16, "%s: %s differs by %g outside the key bias", what, x->name, d);
        if (qkv_bias)   /* the key bias alone: leave out the query's and the value's */
            for (size_t k = C; k < 2 * C; k++)
                key_bias = fmax(key_bias, fabs((double)x->data[k] - (double)y->data[k]));
    }
    printf("%s: after 20 steps the key bias is %.3g from the baseline's (allowed %.3g)\n", what, key_bias, reach);
    ptdp_state_free(&fs);
    ptdp_state_free(&fb);
    ptdp_train_result_free(&rs);
    ptdp_train_result_free(&rb);
}
END_TEST

/* -------------------------------------------- 2. bf16 tracks float */

/* Meshes of CASES run 20 steps in bf16 and in float. */
static const int TRACK[] = { 3, 9, 12, 15 };

LOOP_TEST(bf16_tests, test_bf16_tracks_float_for_20_steps, (int)(sizeof TRACK / sizeof TRACK[0]))
{
    ptdp_train_config h = config_of(&CASES[TRACK[_i]]), f = h;
    h.steps = f.steps = 20;
    f.bf16 = false;
    char what[256];
    describe(&h, what, sizeof what);
    ptdp_train_result rh, rf;
    equiv_train(&h, NULL, NULL, &rh);
    equiv_train(&f, NULL, NULL, &rf);
    double worst = 0;
    for (int i = 0; i < h.steps; i++) {
        double rel = fabs(rh.log[i].loss - rf.log[i].loss) / fabs(rf.log[i].loss);
        worst = fmax(worst, rel);
        ck_assert_msg(rel <= 0.02, "%s: step %d: bf16 loss %.9g, float %.9g: %.2f%% apart", what, i + 1,
                      rh.log[i].loss, rf.log[i].loss, 100 * rel);
    }
    /* both trained, and bf16 is not float in disguise */
    ck_assert_msg(rf.log[19].loss < rf.log[0].loss, "%s: the float run did not learn", what);
    ck_assert_msg(rh.log[19].loss < rh.log[0].loss, "%s: the bf16 run did not learn", what);
    ck_assert_msg(worst > 0, "%s: bf16 and float losses identical: is bf16 on?", what);
    ptdp_train_result_free(&rh);
    ptdp_train_result_free(&rf);
}
END_TEST

/* ------------------------------------- 3. --overlap: the same bits */

/* Cases of CASES where --overlap can change something: buckets (ZeRO-1's
 * reduce-scattered), ZeRO-3's prefetches, pipelines, the GPT. */
static const int BITS[] = { 0, 1, 2, 3, 6, 7, 9, 12, 14, 15, 17, 18 };

LOOP_TEST(bf16_tests, test_bf16_overlap_same_bits, (int)(sizeof BITS / sizeof BITS[0]))
{
    ptdp_train_config plain = config_of(&CASES[BITS[_i]]), ov = plain;
    plain.overlap = false;
    ov.overlap = true;
    char what[256];
    describe(&ov, what, sizeof what);
    equiv_runs_same_bits(&ov, &plain, what);
}
END_TEST

/* --------------------------- 3b. recomputation: the same bits */

/* Recomputing is running the forward again: under bf16 the recomputed
 * activations are rounded where they are made, as the first forward's
 * were, and the probabilities selective recomputation makes again are
 * rounded as kept ones are (act_bf16.h) — so no recomputation, selective
 * and full train the same bits.  The GPT on one device and on dp 2 x pp 2. */
static const int RECOMPUTE[] = { 11, 16 };

LOOP_TEST(bf16_tests, test_bf16_recompute_same_bits, (int)(sizeof RECOMPUTE / sizeof RECOMPUTE[0]))
{
    ptdp_train_config none = config_of(&CASES[RECOMPUTE[_i]]);
    none.recompute = none.recompute_core = false;
    ptdp_train_config sel = none, full = none;
    sel.recompute_core = true;
    full.recompute = true;
    char what[256];
    describe(&none, what, sizeof what);
    ptdp_state fn, fs, ff;
    ptdp_train_result rn, rs, rf;
    equiv_train(&none, NULL, &fn, &rn);
    equiv_train(&sel, NULL, &fs, &rs);
    equiv_train(&full, NULL, &ff, &rf);
    for (int i = 0; i < none.steps; i++)
        ck_assert_msg(rn.log[i].loss == rs.log[i].loss && rn.log[i].loss == rf.log[i].loss,
                      "%s: step %d loss %.9g, selective %.9g, full %.9g", what, i + 1, rn.log[i].loss, rs.log[i].loss,
                      rf.log[i].loss);
    equiv_states_same_bits(&fn, &fs, "selective recomputation");
    equiv_states_same_bits(&fn, &ff, "full recomputation");
    ptdp_state_free(&fn);
    ptdp_state_free(&fs);
    ptdp_state_free(&ff);
    ptdp_train_result_free(&rn);
    ptdp_train_result_free(&rs);
    ptdp_train_result_free(&rf);
}
END_TEST

/* ---------------------------- 4. the master weights keep the small updates */

/* The master weights keep what bf16 drops.  At lr 1e-5 an AdamW update
 * (about lr per element) is far below half a bf16 step (2^-9 |p|), so it
 * would vanish if it were added to the bf16 parameter itself: each step
 * would start again from the unchanged bf16 value.  The float master
 * weights add the updates up: after 10 steps they have moved as far as
 * float's parameters (the sum of |final - initial| within 20%), and off
 * the bf16 grid. */
static double moved(const ptdp_state *a, const ptdp_state *b, size_t *off_grid, size_t *total)
{
    double sum = 0;
    for (int i = 0; i < a->ntensors; i++) {
        const ptdp_state_tensor *x = &a->t[i], *y = &b->t[i];
        if (strncmp(x->name, "optim.", 6) == 0)
            continue;   /* the moments, not parameters */
        for (size_t e = 0; e < (size_t)x->rows * (size_t)x->cols; e++) {
            sum += fabs((double)x->data[e] - (double)y->data[e]);
            *off_grid += ptdp_bf16_round(x->data[e]) != x->data[e];
            (*total)++;
        }
    }
    return sum;
}

static const int MASTER[] = { 0, 3, 12 };

LOOP_TEST(bf16_tests, test_bf16_master_weights_add_up_small_updates, (int)(sizeof MASTER / sizeof MASTER[0]))
{
    ptdp_train_config h = config_of(&CASES[MASTER[_i]]), f;
    h.lr = 1e-5;
    h.steps = 10;
    f = h;
    f.bf16 = false;
    char what[256];
    describe(&h, what, sizeof what);
    ptdp_state h0, h1, f0, f1;
    ck_assert_int_eq(ptdp_state_init(&h0, &h.model, h.optimizer, false), 0);
    ck_assert_int_eq(ptdp_state_init(&f0, &f.model, f.optimizer, false), 0);
    h.init_state = &h0;
    f.init_state = &f0;
    equiv_train(&h, NULL, &h1, NULL);
    equiv_train(&f, NULL, &f1, NULL);
    size_t off_grid = 0, total = 0, ignore = 0, ignore_total = 0;
    double mh = moved(&h1, &h0, &off_grid, &total), mf = moved(&f1, &f0, &ignore, &ignore_total);
    ck_assert_msg(mf > 0 && fabs(mh / mf - 1) < 0.2, "%s: in 10 steps at lr 1e-5 the bf16 run's master weights "
                  "moved %g in all, float's parameters %g", what, mh, mf);
    ck_assert_msg(off_grid > total * 9 / 10, "%s: only %zu of %zu master weights lie off the bf16 grid", what,
                  off_grid, total);
    ptdp_state_free(&h0);
    ptdp_state_free(&h1);
    ptdp_state_free(&f0);
    ptdp_state_free(&f1);
}
END_TEST

/* ------------------------------------------------ 5. checkpoints */

/* 3 steps saved, 3 more resumed on the same mesh: the 6 uninterrupted
 * steps bit for bit — the master weights (the checkpoint's parameters),
 * both moments, and the losses of steps 4-6. */
static const int RESUME[] = { 1, 3, 12 };

LOOP_TEST(bf16_tests, test_bf16_resume_bit_for_bit, (int)(sizeof RESUME / sizeof RESUME[0]))
{
    ptdp_train_config half = config_of(&CASES[RESUME[_i]]), full = half;
    full.steps = 6;
    char what[256];
    describe(&half, what, sizeof what);
    ptdp_state reference, resumed;
    ptdp_train_result rfull, rlog;
    equiv_resume_beside(&full, &half, &half, &reference, &rfull, &resumed, &rlog);
    ck_assert_int_eq(rlog.completed, 3);
    equiv_losses_agree(rlog.log, rfull.log + 3, 3, 0, what);
    equiv_states_same_bits(&resumed, &reference, what);
    ptdp_state_free(&reference);
    ptdp_state_free(&resumed);
    ptdp_train_result_free(&rfull);
    ptdp_train_result_free(&rlog);
}
END_TEST

/* A checkpoint of one precision resumed in the other: it loads, it trains
 * on (steps 4-6 numbered on, their losses finite and within 2% of six
 * uninterrupted steps in the second precision), and its loss keeps falling. */
static void cross_resume(ptdp_train_config first, ptdp_train_config second, const char *what)
{
    ptdp_train_config full = second;
    full.steps = 6;
    ptdp_state reference, resumed;
    ptdp_train_result rfull, rlog;
    equiv_resume_beside(&full, &first, &second, &reference, &rfull, &resumed, &rlog);
    ck_assert_int_eq(rlog.completed, 3);
    for (int i = 0; i < 3; i++) {
        double got = rlog.log[i].loss, want = rfull.log[3 + i].loss;
        ck_assert_msg(isfinite(got) && fabs(got - want) <= 0.02 * fabs(want),
                      "%s: step %d: loss %.9g, six steps without stopping %.9g", what, 4 + i, got, want);
    }
    ck_assert_msg(rlog.log[2].loss < rfull.log[0].loss, "%s: the loss did not fall", what);
    ptdp_check_report rep;
    ck_assert_msg(ptdp_check_states(&resumed, &reference, 2 * PTDP_TOLERANCE_BF16, &rep),
                  "%s: %s differs by %g from six steps without stopping", what, rep.worst, rep.max_abs);
    ptdp_state_free(&reference);
    ptdp_state_free(&resumed);
    ptdp_train_result_free(&rfull);
    ptdp_train_result_free(&rlog);
}

TEST(bf16_tests, test_bf16_checkpoint_crosses_precisions)
{
    ptdp_train_config first = config_of(&CASES[3]), second = config_of(&CASES[7]);
    second.bf16 = false;   /* bf16 zero 3 dp 2 -> float dp 2 pp 2 */
    cross_resume(first, second, "mlp: bf16 zero 3 dp 2 -> float dp 2 pp 2");
    first = config_of(&CASES[6]);
    first.bf16 = false;    /* float dp 2 tp 2 -> bf16 zero 2 dp 4 */
    second = config_of(&CASES[2]);
    cross_resume(first, second, "mlp: float dp 2 tp 2 zero 1 -> bf16 dp 4 zero 2");
    first = config_of(&CASES[12]);
    second = config_of(&CASES[11]);
    second.bf16 = false;   /* the GPT: bf16 zero 3 -> float */
    cross_resume(first, second, "gpt: bf16 zero 3 dp 2 -> float dp 2");
}
END_TEST

int main(void)
{
    return harness_main("equiv_bf16");
}
