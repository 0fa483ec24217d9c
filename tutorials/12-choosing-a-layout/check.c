/*
 * check.c — lesson 12: is your memory per GPU right, and does your layout fit?
 *
 * Your functions against ptdp's own numbers, blank by blank:
 *
 *   1. V_pad            ptdp_gpt_pad_vocab, over vocabularies, multiples, tp
 *   2. stage params     what ptdp train allocates: the parameter elements of
 *                       every stage's GPUs of a small GPT at tp 1, 2 and pp
 *                       1, 2, 4 (ptdp_train_result.param_elements)
 *   3. model states     ptdp_zero_state_bytes (zero.h), every stage, dp 1..8,
 *                       float and bf16
 *   4. in flight        ptdp_schedule_peak_in_flight of the schedules
 *                       themselves (schedule.h), GPipe and 1F1B
 *   5. block acts       ptdp_gpt_block_act_elements (gpt.h), which
 *                       tests/test_gpt.c measures to the byte
 *   6. stage memory     the sum of the above, then against what a real run
 *                       measures (ptdp train's arena peaks: the model states
 *                       to the byte, the activations at least yours) and
 *                       against the planner's own terms (ptdp_plan_memory_of)
 *   7. your layout      valid (ptdp_plan_layout_check), 32 GPUs, 512
 *                       sequences, within the GPU's memory by your formula
 *                       and by the planner; its step time beside the
 *                       planner's best (ptdp_plan_time_of, ptdp_plan_search)
 *
 * A wrong number is compared with the classic mistakes (no padding, not
 * divided by tp, every layer on every stage, ZeRO-1 sharding the
 * parameters, m micro-batches in flight under 1F1B, …) and named.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lesson.h"
#include "tutorial.h"

#include "ptdp/error.h"
#include "ptdp/gpt.h"
#include "ptdp/plan.h"
#include "ptdp/schedule.h"
#include "ptdp/train.h"
#include "ptdp/zero.h"

static const int R = (int)sizeof(ptdp_real);

/* The small GPT the runs train: 4 blocks, so pp 1, 2 and 4 divide them. */
static const lesson_gpt SMALL = { .layers = 4, .hidden = 32, .heads = 4, .ffn = 128, .seq_len = 16,
                                  .vocab = 100, .vocab_multiple = 8 };

/* The lesson's model and cluster (README.md, "Your turn"): the PTD-P
 * paper's 7.5B GPT (Narayanan et al. 2021, table 1) on 4 DGX A100 nodes. */
static const lesson_gpt TASK = { .layers = 36, .hidden = 4096, .heads = 32, .ffn = 16384, .seq_len = 2048,
                                 .vocab = 51200, .vocab_multiple = 64 };
enum { TASK_GPUS = 32, TASK_BATCH = 512 };
static const char *const TASK_PROFILE = "dgx-a100-80g";

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b));
}

static ptdp_model_config model_config(const lesson_gpt *g)
{
    ptdp_model_config c = ptdp_gpt_default_config();
    c.ops = &ptdp_gpt_ops;
    c.layers = g->layers;
    c.hidden = g->hidden;
    ptdp_gpt(&c)->heads = g->heads;
    c.ffn = g->ffn;
    ptdp_gpt(&c)->seq_len = g->seq_len;
    ptdp_gpt(&c)->vocab = g->vocab;
    ptdp_gpt(&c)->vocab_multiple = g->vocab_multiple;
    return c;
}

/* A step 1 failed: a blank still empty (say which and stop) or an error. */
static bool failed(int rc, const char *what)
{
    if (rc == 0)
        return false;
    if (!tutorial_report_blank())
        tutorial_wrong("%s returned %d (%s)", what, rc, ptdp_strerror(rc));
    return true;
}

/* ------------------------------------------------------------ 1. V_pad */

static bool check_vocab(void)
{
    static const int vocabs[] = { 62, 100, 50257, 51200 }, multiples[] = { 64, 8, 128, 1 }, tps[] = { 1, 2, 3, 8 };
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 4; c++) {
                int v = vocabs[a], mult = multiples[b], tp = tps[c], got = -1;
                if (failed(lesson_padded_vocab(v, mult, tp, &got), "lesson_padded_vocab"))
                    return false;
                int want = ptdp_gpt_pad_vocab(v, mult, tp);
                if (got == want)
                    continue;
                tutorial_wrong("V_pad of vocab %d, multiple %d, tp %d: you said %d, ptdp pads to %d", v, mult, tp,
                               got, want);
                if (got == v)
                    tutorial_note("that is no padding at all: every TP rank must own V_pad / tp rows, each slice "
                                  "a multiple of %d (blank 1)", mult);
                else if (got == ptdp_gpt_pad_vocab(v, mult, 1))
                    tutorial_note("that is a multiple of %d only, not of %d x tp = %d: the rows are split over the "
                                  "TP ranks and each rank's slice must be a multiple of %d (blank 1)",
                                  mult, mult, mult * tp, mult);
                else
                    tutorial_note("V_pad is the smallest multiple of multiple x tp = %d that is >= %d (blank 1)",
                                  mult * tp, v);
                return false;
            }
    tutorial_ok("V_pad: the vocabulary padded to a multiple of vocab_multiple x tp, 64 cases");
    return true;
}

/* ----------------------------------------------- runs of ptdp train */

typedef struct {
    ptdp_train_result res;
    ptdp_launch_result launch;
} run;

static int run_small(int tp, int pp, int m, const char *schedule, run *r, char *msg, size_t len)
{
    ptdp_train_config c = ptdp_train_defaults();
    c.model = model_config(&SMALL);
    c.dp = 1;
    c.tp = tp;
    c.pp = pp;
    c.micro_batches = m;
    c.batch = 4 * m;                 /* micro-batches of b = 4 sequences */
    c.steps = 1;
    c.schedule = ptdp_schedule_find(schedule);
    ptdp_launch_opts o = { 0 };
    o.result = &r->launch;
    return ptdp_train(&c, &o, NULL, NULL, &r->res, msg, len);
}

static void run_free(run *r)
{
    ptdp_train_result_free(&r->res);
    ptdp_launch_result_free(&r->launch);
}

/* ------------------------------------------------------ 2. stage params */

/* The mistakes, each as your function would answer with it. */
static double block_params(const lesson_gpt *g, int tp)
{
    const double C = g->hidden, F = g->ffn;
    return 4 * C + 3 * C * C / tp + 3 * C / tp + C * C / tp + C + F * C / tp + F / tp + C * F / tp + C;
}

static void diagnose_params(const lesson_gpt *g, int tp, int pp, int s, double got, double want)
{
    const double C = g->hidden, T = g->seq_len, vl = (double)ptdp_gpt_pad_vocab(g->vocab, g->vocab_multiple, tp) / tp;
    const double blocks = g->layers / pp, rest = want - blocks * block_params(g, tp);
    const double emb = s == 0 ? vl * C + T * C : 0, head = s == pp - 1 && pp > 1 ? vl * C : 0;
    if (tp > 1 && near(got, blocks * block_params(g, 1) + (rest - vl * C * ((s == 0) + (head > 0))) +
                                vl * tp * C * ((s == 0) + (head > 0))))
        tutorial_note("that is the whole model's tensors, not one GPU's shard: the split ones (c_attn, both "
                      "c_proj, c_fc, wte) are divided by tp = %d (blank 2)", tp);
    else if (tp > 1 && near(got, blocks * block_params(g, 1) + rest))
        tutorial_note("the blocks are counted whole: c_attn, the two c_proj and c_fc hold 1/tp = 1/%d of their "
                      "weights on each GPU (blank 2)", tp);
    else if (pp > 1 && near(got, g->layers * block_params(g, tp) + rest))
        tutorial_note("that counts all %d blocks on every stage: a stage holds L / pp = %d of them (blank 2)",
                      g->layers, g->layers / pp);
    else if (head > 0 && near(got, want - head))
        tutorial_note("the last stage of a pipeline keeps its own copy of wte for the head (tied, its gradient "
                      "summed with stage 0's): V_pad/tp x C = %.0f more (blank 2)", head);
    else if (s == 0 && near(got, want - T * C))
        tutorial_note("wpe, the position embedding (T x C = %.0f, whole on every TP rank), is missing (blank 2)",
                      T * C);
    else if (near(got, want - vl * C + (double)g->vocab / tp * C) || near(got, want - vl * C + (double)g->vocab * C / tp))
        tutorial_note("wte has V_pad rows, not V: use lesson_padded_vocab (blank 2)");
    else if (pp == 1 && near(got, want + vl * C))
        tutorial_note("with one stage the head IS wte (tied): no second copy (blank 2)");
    else if (s != 0 && emb == 0 && near(got, want + vl * C + T * C))
        tutorial_note("wte and wpe live on stage 0 only (blank 2)");
    else
        tutorial_note("a stage holds its L/pp blocks; stage 0 wte (V_pad/tp x C) and wpe (T x C); the last ln_f "
                      "(2C) and, with pp > 1, the head's copy of wte (blank 2)");
}

static bool check_params(void)
{
    static const int layouts[][2] = { { 1, 1 }, { 2, 1 }, { 1, 2 }, { 2, 2 }, { 1, 4 } };
    char msg[PTDP_MSG_MAX];
    for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; k++) {
        const int tp = layouts[k][0], pp = layouts[k][1];
        run r;
        if (run_small(tp, pp, pp, "1f1b", &r, msg, sizeof msg) != 0) {
            tutorial_wrong("ptdp train of the small GPT at tp %d, pp %d failed: %s", tp, pp, msg);
            return false;
        }
        for (int s = 0; s < pp; s++) {
            double got = -1, want = (double)r.res.param_elements[s * tp];   /* dp 1: rank = tp rank + tp x stage */
            if (failed(lesson_stage_params(&SMALL, tp, pp, s, &got), "lesson_stage_params")) {
                run_free(&r);
                return false;
            }
            if (!near(got, want)) {
                tutorial_wrong("stage %d of tp %d, pp %d (the small GPT: L %d, C %d, F %d, T %d, V %d): you count "
                               "%.0f parameter elements, ptdp train allocates %.0f", s, tp, pp, SMALL.layers,
                               SMALL.hidden, SMALL.ffn, SMALL.seq_len, SMALL.vocab, got, want);
                diagnose_params(&SMALL, tp, pp, s, got, want);
                run_free(&r);
                return false;
            }
        }
        run_free(&r);
    }
    tutorial_ok("parameters per GPU: every stage of tp 1, 2 x pp 1, 2, 4 equals what ptdp train allocates");
    return true;
}

/* ------------------------------------------------------ 3. model states */

static bool check_states(void)
{
    const double psi = 1234567;
    for (int bf = 0; bf < 2; bf++)
        for (int zero = 0; zero <= 3; zero++)
            for (int dp = 1; dp <= 8; dp *= 2) {
                lesson_memory got = { -1, -1, -1, 0, 0 };
                if (failed(lesson_model_states(psi, dp, zero, bf, R, &got), "lesson_model_states"))
                    return false;
                const double w = bf ? 2 : R, o = (bf ? 3 : 2) * (double)R;
                ptdp_zero_bytes want = ptdp_zero_state_bytes(zero, psi, dp, w, w, o);
                if (near(got.params, want.params) && near(got.grads, want.grads) && near(got.optim, want.optim))
                    continue;
                tutorial_wrong("psi %.0f parameters, ZeRO-%d over dp %d, %s: you said params %.0f, grads %.0f, "
                               "optim %.0f bytes; the ZeRO paper (zero.h) %.0f, %.0f, %.0f", psi, zero, dp,
                               bf ? "bf16" : "float", got.params, got.grads, got.optim, want.params, want.grads,
                               want.optim);
                if (zero < 3 && dp > 1 && near(got.params, want.params / dp))
                    tutorial_note("ZeRO-%d leaves the parameters whole on every GPU: only stage 3 divides them "
                                  "by dp (blank 3)", zero);
                else if (zero < 2 && dp > 1 && near(got.grads, want.grads / dp))
                    tutorial_note("ZeRO-%d leaves the gradients whole: stage 2 is the first to shard them (blank 3)",
                                  zero);
                else if (zero >= 1 && dp > 1 && near(got.optim, want.optim * dp))
                    tutorial_note("ZeRO-%d shards the optimizer state: o psi / dp, not o psi (blank 3)", zero);
                else if (zero >= 2 && dp > 1 && near(got.grads, want.grads * dp))
                    tutorial_note("ZeRO-%d shards the gradients too: g psi / dp (blank 3)", zero);
                else if (zero == 3 && dp > 1 && near(got.params, want.params * dp))
                    tutorial_note("ZeRO-3 shards the parameters: w psi / dp (blank 3)");
                else if (bf && near(got.optim, want.optim * 2 / 3))
                    tutorial_note("under bf16 the optimizer keeps float master weights beside the two moments: "
                                  "3 x %d bytes a parameter, the paper's 12 (blank 3)", R);
                else if (bf && near(got.params, want.params * R / 2))
                    tutorial_note("under bf16 a parameter is 2 bytes, and so is its gradient (blank 3)");
                else if (!bf && near(got.optim, want.optim * 3 / 2))
                    tutorial_note("in float there is no master copy: AdamW keeps two moments, 2 x %d bytes (blank 3)",
                                  R);
                else
                    tutorial_note("w, g, o = %d, %d, %d bytes a parameter in float (2, 2, %d under bf16); stage 1 "
                                  "divides o by dp, stage 2 g too, stage 3 w too (blank 3)", R, R, 2 * R, 3 * R);
                return false;
            }
    tutorial_ok("model states: ZeRO 0 to 3, dp 1 to 8, float and bf16, as zero.h's ptdp_zero_state_bytes");
    return true;
}

/* ---------------------------------------------------------- 4. in flight */

static bool check_in_flight(void)
{
    static const char *const names[] = { "1f1b", "gpipe" };
    static const int pms[][2] = { { 1, 1 }, { 2, 1 }, { 2, 4 }, { 4, 2 }, { 4, 8 }, { 8, 16 } };
    for (int k = 0; k < 2; k++)
        for (size_t j = 0; j < sizeof pms / sizeof pms[0]; j++) {
            const int p = pms[j][0], m = pms[j][1];
            ptdp_schedule *s = NULL;
            if (ptdp_schedule_create(names[k], p, m, &s) != 0) {
                tutorial_wrong("the %s schedule of p %d, m %d could not be made", names[k], p, m);
                return false;
            }
            for (int st = 0; st < p; st++) {
                int got = -1, want = ptdp_schedule_peak_in_flight(s, st);
                if (failed(lesson_in_flight(names[k], p, m, st, &got), "lesson_in_flight")) {
                    ptdp_schedule_destroy(s);
                    return false;
                }
                if (got == want)
                    continue;
                tutorial_wrong("%s, p %d stages, m %d micro-batches, stage %d: you said %d in flight, the schedule "
                               "holds at most %d", names[k], p, m, st, got, want);
                if (k == 0 && got == m)
                    tutorial_note("m is GPipe's count; 1F1B starts a backward after p - stage forwards, so stage "
                                  "%d holds min(p - stage, m) = %d (blank 4)", st, want);
                else if (k == 0 && got == p)
                    tutorial_note("p is stage 0's count only: stage s holds p - s, the last stage one (blank 4)");
                else if (k == 0 && got == p - st)
                    tutorial_note("never more than there are micro-batches: min(p - stage, m) (blank 4)");
                else if (k == 1)
                    tutorial_note("GPipe runs all m forwards before any backward: every stage holds m (blank 4)");
                else
                    tutorial_note("1F1B: min(p - stage, m); GPipe: m (blank 4)");
                ptdp_schedule_destroy(s);
                return false;
            }
            ptdp_schedule_destroy(s);
        }
    tutorial_ok("micro-batches in flight: 1F1B min(p - stage, m) and GPipe m, as the schedules hold them");
    return true;
}

/* ------------------------------------------------------- 5. block acts */

static bool check_block_acts(void)
{
    const lesson_gpt *models[] = { &SMALL, &TASK };
    for (int k = 0; k < 2; k++)
        for (int tp = 1; tp <= 4; tp *= 2)
            for (int sel = 0; sel < 2; sel++) {
                const lesson_gpt *g = models[k];
                ptdp_model_config c = model_config(g);
                const int b = 3;
                double got = -1;
                ptdp_recompute r = sel ? PTDP_RECOMPUTE_SELECTIVE : PTDP_RECOMPUTE_NONE;
                if (failed(lesson_block_acts(g, b, tp, r, &got), "lesson_block_acts"))
                    return false;
                double want = sel ? ptdp_gpt_block_act_elements_selective(&c, b, tp, false)
                                  : ptdp_gpt_block_act_elements(&c, b, tp, false);
                if (near(got, want))
                    continue;
                const double T = g->seq_len, probs = (double)b * (g->heads / tp) * T * T;
                tutorial_wrong("one block, b %d, C %d, F %d, T %d, %d heads, tp %d%s: you said %.0f elements, "
                               "gpt.h %.0f", b, g->hidden, g->ffn, g->seq_len, g->heads, tp,
                               sel ? ", selective recomputation" : "", got, want);
                if (sel && near(got, want + probs))
                    tutorial_note("selective recomputation keeps no T x T probabilities: the backward computes "
                                  "them again (blank 5)");
                else if (!sel && near(got, want - probs))
                    tutorial_note("the attention's probabilities are missing: b (nh/tp) T^2 = %.0f (blank 5)", probs);
                else if (tp > 1 && !sel && near(got, want - probs + probs * tp))
                    tutorial_note("each GPU holds the probabilities of its nh/tp heads only (blank 5)");
                else
                    tutorial_note("b T (4C + 4C/tp + 2F/tp + 4) + b (nh/tp) T^2, the last term only without "
                                  "selective recomputation (blank 5)");
                return false;
            }
    tutorial_ok("activations a micro-batch keeps per block: gpt.h's formula, tp 1 to 4, with and without "
                "selective recomputation");
    return true;
}

/* ------------------------------------------------------ 6. stage memory */

/* The reference, from the library's pieces. */
static lesson_memory reference_memory(const lesson_gpt *g, const lesson_layout *l, int s, double psi)
{
    ptdp_model_config c = model_config(g);
    const double w = l->bf16 ? 2 : R, o = (l->bf16 ? 3 : 2) * (double)R;
    ptdp_zero_bytes z = ptdp_zero_state_bytes(l->zero, psi, l->dp, w, w, o);
    ptdp_schedule *sched = NULL;
    int in_flight = 0;
    if (ptdp_schedule_create(l->schedule, l->pp, l->micro_batches, &sched) == 0) {
        in_flight = ptdp_schedule_peak_in_flight(sched, s);
        ptdp_schedule_destroy(sched);
    }
    const double blocks = g->layers / l->pp, b = l->micro_batch_size;
    double acts;
    if (l->recompute == PTDP_RECOMPUTE_FULL)
        acts = in_flight * blocks * b * g->seq_len * g->hidden + ptdp_gpt_block_act_elements(&c, (int)b, l->tp, false);
    else if (l->recompute == PTDP_RECOMPUTE_SELECTIVE)
        acts = in_flight * blocks * ptdp_gpt_block_act_elements_selective(&c, (int)b, l->tp, false);
    else
        acts = in_flight * blocks * ptdp_gpt_block_act_elements(&c, (int)b, l->tp, false);
    lesson_memory m = { z.params, z.grads, z.optim, acts * (l->bf16 ? 2 : R), 0 };   /* bf16 activations */
    m.total = m.params + m.grads + m.optim + m.acts;
    return m;
}

static bool same_memory(const lesson_memory *a, const lesson_memory *b)
{
    return near(a->params, b->params) && near(a->grads, b->grads) && near(a->optim, b->optim) &&
           near(a->acts, b->acts) && near(a->total, b->total);
}

static void print_memory(const char *who, const lesson_memory *m)
{
    tutorial_note("%-6s params %.0f  grads %.0f  optim %.0f  acts %.0f  total %.0f bytes", who, m->params,
                  m->grads, m->optim, m->acts, m->total);
}

static bool check_stage_memory_one(const lesson_gpt *g, const lesson_layout *l, int s, lesson_memory *got)
{
    double psi = 0;
    if (failed(lesson_stage_params(g, l->tp, l->pp, s, &psi), "lesson_stage_params") ||
        failed(lesson_stage_memory(g, l, s, R, got), "lesson_stage_memory"))
        return false;
    lesson_memory want = reference_memory(g, l, s, psi);
    if (same_memory(got, &want))
        return true;
    tutorial_wrong("stage %d of dp %d x tp %d x pp %d, b %d, m %d, %s, recompute %s, ZeRO-%d: your memory differs",
                   s, l->dp, l->tp, l->pp, l->micro_batch_size, l->micro_batches, l->schedule,
                   ptdp_recompute_name(l->recompute), l->zero);
    print_memory("yours", got);
    print_memory("right", &want);
    if (!near(got->total, got->params + got->grads + got->optim + got->acts))
        tutorial_note("total must be the sum of the four (blank 6)");
    else if (!near(got->params, want.params) || !near(got->grads, want.grads) || !near(got->optim, want.optim))
        tutorial_note("the model states are lesson_model_states of lesson_stage_params's count, with the "
                      "layout's dp, zero and bf16 (blank 6)");
    else if (l->bf16 && near(got->acts, want.acts * R / 2))
        tutorial_note("under bf16 the activations a micro-batch keeps are bf16 too: 2 bytes an element, not "
                      "real_bytes (blank 6)");
    else if (l->recompute == PTDP_RECOMPUTE_FULL)
        tutorial_note("full recomputation: (in flight x blocks x b T C + block(none)) x 2 or real_bytes (blank 6)");
    else
        tutorial_note("activations: in flight on THIS stage x its L/pp blocks x one block's x real_bytes (blank 6)");
    return false;
}

static bool check_stage_memory(void)
{
    /* several layouts of the small GPT and of the task's, every stage */
    const lesson_layout layouts[] = {
        { 1, 1, 1, 4, 1, "1f1b", PTDP_RECOMPUTE_NONE, 0, false, false, false },
        { 2, 2, 2, 4, 4, "1f1b", PTDP_RECOMPUTE_NONE, 1, false, false, false },
        { 4, 1, 4, 2, 8, "1f1b", PTDP_RECOMPUTE_SELECTIVE, 2, true, false, false },
        { 2, 1, 2, 4, 4, "gpipe", PTDP_RECOMPUTE_FULL, 3, false, false, false },
        { 1, 8, 4, 1, 512, "1f1b", PTDP_RECOMPUTE_SELECTIVE, 0, false, false, false },
    };
    lesson_memory got;
    for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; k++) {
        const lesson_gpt *g = k + 1 < sizeof layouts / sizeof layouts[0] ? &SMALL : &TASK;
        for (int s = 0; s < layouts[k].pp; s++)
            if (!check_stage_memory_one(g, &layouts[k], s, &got))
                return false;
    }
    tutorial_ok("memory per GPU: model states + in flight x blocks x per-block, every stage of 5 layouts");

    /* Against a real run: tp 2, pp 2, m 4 of b 4, 1F1B, float, ZeRO off. */
    char msg[PTDP_MSG_MAX];
    run r;
    const lesson_layout l = { 1, 2, 2, 4, 4, "1f1b", PTDP_RECOMPUTE_NONE, 0, false, false, false };
    if (run_small(2, 2, 4, "1f1b", &r, msg, sizeof msg) != 0) {
        tutorial_wrong("ptdp train of the small GPT at tp 2, pp 2 failed: %s", msg);
        return false;
    }
    bool ok = true;
    for (int s = 0; s < 2 && ok; s++) {
        if (!check_stage_memory_one(&SMALL, &l, s, &got)) {
            ok = false;
            break;
        }
        const ptdp_mem_stats *mem = &r.launch.devices[s * 2].mem;
        const double mp = (double)mem->peak[PTDP_MEM_PARAMS], mg = (double)mem->peak[PTDP_MEM_GRADS],
                     mo = (double)mem->peak[PTDP_MEM_OPTIM], ma = (double)r.res.peak_acts[s];
        /* the arena rounds each tensor up to 64 bytes */
        if (fabs(got.params - mp) > 64 * 64 || fabs(got.grads - mg) > 64 * 64 || fabs(got.optim - mo) > 64 * 64 ||
            got.acts > ma) {
            tutorial_wrong("stage %d of the run (tp 2, pp 2, 1F1B, m 4 of b 4): measured params %.0f grads %.0f optim "
                           "%.0f acts %.0f bytes, yours %.0f %.0f %.0f %.0f", s, mp, mg, mo, ma, got.params,
                           got.grads, got.optim, got.acts);
            ok = false;
            break;
        }
        tutorial_ok("stage %d of a real run (ptdp train --model gpt --tp 2 --pp 2 --micro-batches 4): model states "
                    "%.0f bytes as measured; activations yours %.0f, measured peak %.0f (%.2fx: the embedding or "
                    "head and the backward's own buffers on top of the blocks)", s, got.params + got.grads + got.optim,
                    got.acts, ma, ma / got.acts);
    }
    run_free(&r);
    return ok;
}

/* The planner's terms for the same layouts (ptdp_plan_memory_of). */
static ptdp_plan_request task_request(void)
{
    ptdp_plan_request rq = ptdp_plan_request_defaults();
    rq.model = model_config(&TASK);
    rq.batch = TASK_BATCH;
    rq.gpus = TASK_GPUS;
    rq.profile = ptdp_profile_find(TASK_PROFILE);
    rq.bf16 = false;
    return rq;
}

static ptdp_plan_layout plan_layout(const lesson_layout *l)
{
    ptdp_plan_layout p;
    memset(&p, 0, sizeof p);
    p.dp = l->dp;
    p.tp = l->tp;
    p.pp = l->pp;
    p.cp = 1;
    p.micro_batch_size = l->micro_batch_size;
    p.micro_batches = l->micro_batches;
    p.virtual_stages = 1;
    p.schedule = ptdp_schedule_find(l->schedule);
    p.recompute = l->recompute;
    p.zero = l->zero;
    p.sp = l->sp;
    p.overlap = l->overlap;
    return p;
}

static void compare_with_planner(void)
{
    const lesson_layout layouts[] = {
        { 4, 8, 1, 1, 128, "1f1b", PTDP_RECOMPUTE_SELECTIVE, 1, false, false, false },
        { 2, 4, 4, 1, 256, "1f1b", PTDP_RECOMPUTE_NONE, 0, false, false, false },
        { 1, 8, 4, 2, 256, "1f1b", PTDP_RECOMPUTE_FULL, 0, false, false, false },
    };
    ptdp_plan_request rq = task_request();
    for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; k++) {
        const lesson_layout *l = &layouts[k];
        ptdp_plan_layout pl = plan_layout(l);
        ptdp_plan_memory pm;
        lesson_memory got;
        if (rq.profile == NULL || ptdp_plan_memory_of(&rq, &pl, &pm) != 0 ||
            lesson_stage_memory(&TASK, l, pm.stage, R, &got) != 0) {
            tutorial_note("(the planner could not price dp %d x tp %d x pp %d here)", l->dp, l->tp, l->pp);
            continue;
        }
        /* the model states are the same arithmetic; the planner's activations
         * add the stage's input, the head's logits and one backward's scratch */
        const bool same = near(got.params, pm.params) && near(got.grads, pm.grads) && near(got.optim, pm.optim);
        char line[512];
        snprintf(line, sizeof line, "the 7.5B GPT at dp %d x tp %d x pp %d, b %d, recompute %s, ZeRO-%d, stage %d (the "
                 "planner's peak): params %.3g, grads %.3g, optim %.3g GB %s ptdp_plan_memory_of's; activations "
                 "%.3g GB, the planner's %.3g (%.2fx)", l->dp, l->tp, l->pp, l->micro_batch_size,
                 ptdp_recompute_name(l->recompute), l->zero, pm.stage, got.params / 1e9, got.grads / 1e9,
                 got.optim / 1e9, same ? "=" : "differ from", got.acts / 1e9, pm.acts / 1e9, pm.acts / got.acts);
        if (same)
            tutorial_ok("%s", line);
        else
            tutorial_note("%s (planner: %.3g, %.3g, %.3g GB)", line, pm.params / 1e9, pm.grads / 1e9, pm.optim / 1e9);
    }
}

/* ------------------------------------------------------- 7. your layout */

static bool check_choice(void)
{
    lesson_layout l;
    memset(&l, 0, sizeof l);
    if (failed(lesson_choose_layout(&l), "lesson_choose_layout"))
        return false;
    const ptdp_profile *prof = ptdp_profile_find(TASK_PROFILE);
    if (prof == NULL || prof->mem_bytes <= 0) {
        tutorial_wrong("this build has no profile %s with a device memory: the check cannot judge a layout",
                       TASK_PROFILE);
        return false;
    }
    const double mem = prof->mem_bytes;
    if (l.schedule == NULL || (strcmp(l.schedule, "1f1b") != 0 && strcmp(l.schedule, "gpipe") != 0)) {
        tutorial_wrong("your layout's schedule is %s: say \"1f1b\" or \"gpipe\" (blank 7)",
                       l.schedule ? l.schedule : "not set");
        return false;
    }
    if ((long long)l.dp * l.tp * l.pp != TASK_GPUS) {
        tutorial_wrong("your layout uses dp %d x tp %d x pp %d = %lld GPUs; the cluster has %d: every GPU works "
                       "(blank 7)", l.dp, l.tp, l.pp, (long long)l.dp * l.tp * l.pp, TASK_GPUS);
        return false;
    }
    if ((long long)l.micro_batch_size * l.dp * l.micro_batches != TASK_BATCH) {
        tutorial_wrong("b %d x dp %d x m %d = %lld sequences a step; the batch is %d: m = B / (b dp) (blank 7)",
                       l.micro_batch_size, l.dp, l.micro_batches, (long long)l.micro_batch_size * l.dp * l.micro_batches,
                       TASK_BATCH);
        return false;
    }
    if (l.bf16) {
        tutorial_wrong("this course's build is double precision, where ptdp train refuses --precision bf16: choose "
                       "bf16 = false (blank 7)");
        return false;
    }
    ptdp_plan_request rq = task_request();
    ptdp_plan_layout pl = plan_layout(&l);
    char msg[PTDP_MSG_MAX];
    if (ptdp_plan_layout_check(&rq, &pl, msg, sizeof msg) != 0) {
        tutorial_wrong("ptdp train could not run your layout: %s (blank 7)", msg);
        return false;
    }
    /* yours: every stage within the GPU */
    double mine = 0;
    for (int s = 0; s < l.pp; s++) {
        lesson_memory m;
        if (failed(lesson_stage_memory(&TASK, &l, s, R, &m), "lesson_stage_memory"))
            return false;
        if (m.total > mem) {
            tutorial_wrong("stage %d of your layout needs %.1f GB by your own formula, the GPU has %.1f GB", s,
                           m.total / 1e9, mem / 1e9);
            tutorial_note("params %.1f grads %.1f optim %.1f acts %.1f GB: more tp or pp divides the first three, "
                          "ZeRO divides them by dp, recomputation or a smaller b the last (blank 7)",
                          m.params / 1e9, m.grads / 1e9, m.optim / 1e9, m.acts / 1e9);
            return false;
        }
        mine = fmax(mine, m.total);
    }
    /* the planner's */
    ptdp_plan_memory pm;
    ptdp_plan_time pt;
    int rc = ptdp_plan_memory_of(&rq, &pl, &pm);
    if (rc == 0)
        rc = ptdp_plan_time_of(&rq, &pl, &pt);
    if (rc != 0) {
        tutorial_wrong("the planner could not price your layout (%s)", ptdp_strerror(rc));
        return false;
    }
    if (pm.total > mem) {
        tutorial_wrong("by the planner your layout needs %.1f GB on stage %d (params %.1f grads %.1f optim %.1f "
                       "acts %.1f comm %.1f other %.1f), the GPU has %.1f GB: leave more room (blank 7)",
                       pm.total / 1e9, pm.stage, pm.params / 1e9, pm.grads / 1e9, pm.optim / 1e9, pm.acts / 1e9,
                       pm.comm / 1e9, pm.other / 1e9, mem / 1e9);
        return false;
    }
    tutorial_ok("your layout dp %d x tp %d x pp %d, b %d, m %d, %s, recompute %s, ZeRO-%d%s%s fits: %.1f GB of %.1f "
                "(the planner: %.1f GB on stage %d); step %.3f s, %.0f tokens/s", l.dp, l.tp, l.pp,
                l.micro_batch_size, l.micro_batches, l.schedule, ptdp_recompute_name(l.recompute), l.zero,
                l.sp ? ", sp" : "", l.overlap ? ", overlap" : "", mine / 1e9, mem / 1e9, pm.total / 1e9, pm.stage,
                pt.step_s, pt.tokens_per_s);
    ptdp_plan_candidate *c = NULL;
    int count = 0;
    rq.cp = 1;
    if (ptdp_plan_search(&rq, mem, &c, &count, msg, sizeof msg) == 0 && count > 0) {
        const ptdp_plan_layout *b = &c[0].layout;
        tutorial_note("the planner's best: dp %d x tp %d x pp %d, b %d, %s, recompute %s, ZeRO-%d%s%s: step %.3f s; "
                      "yours takes %.2fx its time", b->dp, b->tp, b->pp, b->micro_batch_size, b->schedule->name,
                      ptdp_recompute_name(b->recompute), b->zero, b->sp ? ", sp" : "", b->overlap ? ", overlap" : "",
                      c[0].time.step_s,
                      pt.step_s / c[0].time.step_s);
    } else {
        tutorial_note("(the planner's search found no best layout: %s)", msg);
    }
    free(c);
    return true;
}

int main(void)
{
    tutorial_begin("12", "choosing a layout: memory per GPU by hand, then a layout that fits");
    if (check_vocab() && check_params() && check_states() && check_in_flight() && check_block_acts() &&
        check_stage_memory()) {
        compare_with_planner();
        check_choice();
    }
    return tutorial_end();
}
