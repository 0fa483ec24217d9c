/*
 * test_plan_time.c — the planner's step time against the simulator's.
 *
 * For each layout below, ptdp_plan_time_of predicts the step; the same
 * layout runs through ptdp_train (ptdp_plan_train_config gives its
 * configuration) under the same profile, and its virtual step time — the
 * step's makespan over every device, ptdp_step_log.virtual_s — must be the
 * plan's within 5%:
 *
 *     |plan - measured| / measured <= 0.05
 *
 * The layouts cover every term of the time model: DP buckets (blocking and
 * overlapped), TP and SP collectives, the four schedules, CP's ring,
 * ZeRO 1, 2 and 3 with and without --overlap, selective and full
 * recomputation, bf16.  The second step is measured (the first one's
 * devices start a little apart, after setting up their groups).  The log
 * shows the table, plan beside measured.
 *
 * A long schedule is not played out: past the warm-up every group of
 * micro-batches adds the same time (plan_time.c), so two short plays give
 * the line.  test_long_schedules_follow_the_line checks the line against
 * the whole schedule played out, every schedule, with stages of unequal
 * cost; and the 1-trillion-parameter GPT's layouts are priced sanely (their
 * time a call is printed; `ptdp bench plan` holds the speed target).
 *
 * --fp8 (clock.h): the planner prices it as the run charges it (within
 * 5%, on dgx-h100 and on dgx-a100-80g, which has no FP8 peak; under TP
 * and CP with the amax all-reduces of a whole-tensor scale); its step
 * falls against bf16's on dgx-h100, and on dgx-a100-80g a block costs
 * bf16's plus exactly its quantization passes, (4 + 1) bytes an operand
 * element at HBM bandwidth.
 */
#define _POSIX_C_SOURCE 200809L   /* setenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "plan_vs_train.h"
#include "ptdp/fp8_quant.h"
#include "ptdp/gpt.h"
#include "ptdp/model_plan.h"
#include "ptdp/models.h"
#include "ptdp/plan.h"
#include "ptdp/train.h"

static const harness_tcase agree_tests = { .name = "agree", .timeout_s = 240 };
static const harness_tcase unit_tests = { .name = "terms", .timeout_s = 30 };

typedef struct {
    const char *what;
    int dp, tp, pp, cp, b, v;
    const char *schedule;
    ptdp_recompute recompute;
    int zero;
    bool sp, overlap, bf16;
    const char *profile;
    int layers;
} row;

static ptdp_plan_request request(const row *r, int batch)
{
    ptdp_plan_request rq = ptdp_plan_request_defaults();
    /* 8 heads, which tp 8 divides; the built-in corpus's 62 tokens */
    rq.model = gpt_of((gpt_shape){ .layers = r->layers > 0 ? r->layers : 4, .hidden = 64, .ffn = 256,
                                   .heads = 8, .seq_len = 32, .vocab = 62 }, 0);
    rq.batch = batch;
    rq.gpus = r->dp * r->tp * r->pp * (r->cp > 1 ? r->cp : 1);
    rq.profile = ptdp_profile_find(r->profile ? r->profile : "dgx-a100");
    rq.bf16 = r->bf16;
    return rq;
}

static ptdp_plan_layout layout_of(const row *r, int batch)
{
    return plan_layout((plan_layout_fields){ .dp = r->dp, .tp = r->tp, .pp = r->pp, .cp = r->cp, .b = r->b, .v = r->v,
                                              .zero = r->zero, .recompute = r->recompute, .schedule = r->schedule,
                                              .sp = r->sp, .overlap = r->overlap }, batch);
}

enum { BATCH = 8 };

static const row ROWS[] = {
    { "dp 2 x tp 2",                      2, 2, 1, 1, 4, 1, NULL, PTDP_RECOMPUTE_NONE, 0, false, false, false, NULL, 0 },
    { "dp 2 --overlap, pp 2",             2, 1, 2, 1, 2, 1, NULL, PTDP_RECOMPUTE_NONE, 0, false, true, false, NULL, 0 },
    { "tp 2 --sp, pp 2 1f1b",             1, 2, 2, 1, 1, 1, "1f1b", PTDP_RECOMPUTE_NONE, 0, true, false, false, NULL, 0 },
    { "pp 4 gpipe",                       1, 1, 4, 1, 1, 1, "gpipe", PTDP_RECOMPUTE_NONE, 0, false, false, false, NULL, 0 },
    { "pp 4 zb-h1",                       1, 1, 4, 1, 1, 1, "zb-h1", PTDP_RECOMPUTE_NONE, 0, false, false, false, NULL, 0 },
    { "pp 2 interleaved v 2",             1, 1, 2, 1, 2, 2, "interleaved", PTDP_RECOMPUTE_NONE, 0, false, false, false, NULL, 0 },
    { "cp 2 x tp 2, selective",           1, 2, 1, 2, 8, 1, NULL, PTDP_RECOMPUTE_SELECTIVE, 0, false, false, false, NULL, 0 },
    { "dp 4, zero 1 (a reduce-scatter a bucket)", 4, 1, 1, 1, 2, 1, NULL, PTDP_RECOMPUTE_NONE, 1, false, false, false,
      NULL, 0 },
    { "dp 4, zero 1 --overlap",           4, 1, 1, 1, 2, 1, NULL, PTDP_RECOMPUTE_NONE, 1, false, true, false, NULL, 0 },
    { "dp 2, zero 1, bf16, tp 2",         2, 2, 1, 1, 4, 1, NULL, PTDP_RECOMPUTE_NONE, 1, false, false, true, NULL, 0 },
    { "dp 2, zero 2, pp 2, full",         2, 1, 2, 1, 2, 1, NULL, PTDP_RECOMPUTE_FULL, 2, false, false, false, NULL, 0 },
    { "dp 2, zero 2 --overlap, pp 2",     2, 1, 2, 1, 2, 1, NULL, PTDP_RECOMPUTE_NONE, 2, false, true, false, NULL, 0 },
    { "dp 4, zero 3",                     4, 1, 1, 1, 1, 1, NULL, PTDP_RECOMPUTE_NONE, 3, false, false, false, NULL, 0 },
    { "dp 2 x cp 2, zero 3 --overlap",    2, 1, 1, 2, 2, 1, NULL, PTDP_RECOMPUTE_NONE, 3, false, true, false, NULL, 0 },
    { "dp 2 x tp 2 x pp 2, zb-h1",        2, 2, 2, 1, 1, 1, "zb-h1", PTDP_RECOMPUTE_NONE, 0, false, false, false, NULL, 0 },
    { "laptop-cpu: dp 2 x pp 2, full",    2, 1, 2, 1, 1, 1, NULL, PTDP_RECOMPUTE_FULL, 0, false, false, false,
      "laptop-cpu", 0 },
    { "laptop-cpu: pp 4 zb-h1",           1, 1, 4, 1, 1, 1, "zb-h1", PTDP_RECOMPUTE_NONE, 0, false, false, false,
      "laptop-cpu", 0 },
    { "laptop-cpu: pp 2 interleaved, sel.", 1, 1, 2, 1, 1, 2, "interleaved", PTDP_RECOMPUTE_SELECTIVE, 0, false,
      false, false, "laptop-cpu", 0 },
    { "laptop-cpu: tp 2 --sp x cp 2, zero 3 --overlap", 2, 2, 1, 2, 4, 1, NULL, PTDP_RECOMPUTE_NONE, 3, true, true,
      false, "laptop-cpu", 0 },
    { "ideal: dp 2 --overlap x pp 2, gpipe", 2, 1, 2, 1, 1, 1, "gpipe", PTDP_RECOMPUTE_NONE, 0, false, true, false,
      "ideal", 0 },
    /* two nodes of 8: TP inside a node, DP or the pipeline across; GEMMs
     * at the A100's efficiency for their shape */
    { "dgx-a100-80g: dp 2 x tp 8 (2 nodes)",  2, 8, 1, 1, 4, 1, NULL, PTDP_RECOMPUTE_NONE, 0, false, false, true,
      "dgx-a100-80g", 0 },
    { "dgx-a100-80g: pp 2 x tp 8 --sp, zb-h1", 1, 8, 2, 1, 1, 1, "zb-h1", PTDP_RECOMPUTE_NONE, 0, true, false, false,
      "dgx-a100-80g", 0 },
    { "dgx-a100-80g: dp 4 x cp 2 x tp 2, zero 3 --overlap", 4, 2, 1, 2, 2, 1, NULL, PTDP_RECOMPUTE_SELECTIVE, 3,
      false, true, true, "dgx-a100-80g", 0 },
    { "dgx-h100: dp 2 x pp 4 interleaved, zero 1", 2, 1, 4, 1, 1, 2, "interleaved", PTDP_RECOMPUTE_FULL, 1, false,
      false, false, "dgx-h100", 8 },
    { "laptop-cpu: dp 2 --overlap, bf16", 2, 1, 1, 1, 2, 1, NULL, PTDP_RECOMPUTE_NONE, 0, false, true, true,
      "laptop-cpu", 0 },
};
#define NROWS ((int)(sizeof ROWS / sizeof ROWS[0]))

LOOP_TEST(agree_tests, test_plan_step_time_is_the_simulators, NROWS)
{
    const row *r = &ROWS[_i];
    ptdp_plan_request rq = request(r, BATCH);
    ck_assert_ptr_nonnull(rq.profile);
    ptdp_plan_layout l = layout_of(r, BATCH);
    char msg[PTDP_MSG_MAX];
    ck_assert_msg(ptdp_plan_layout_check(&rq, &l, msg, sizeof msg) == 0, "%s: %s", r->what, msg);
    ptdp_plan_time t;
    ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &t), 0);
    double got = plan_measured_step(&rq, &l), err = (t.step_s - got) / got;
    printf("plan-time  %-52s  plan %10.3f us  measured %10.3f us  %+6.2f%%  (bubble %.3f, dp exposed %.3f us)\n",
           r->what, t.step_s * 1e6, got * 1e6, 100 * err, t.bubble, t.dp_exposed_s * 1e6);
    fflush(stdout);
    ck_assert_msg(fabs(err) <= 0.05, "%s: plan %.6g s, measured %.6g s: %+.2f%% (more than 5%%)", r->what,
                  t.step_s, got, 100 * err);
}
END_TEST

/* ------------------------------------------------------------------ FP8 */

/* Row r's layout: the plan's step with --fp8 R or without (NULL), and
 * with it the simulator's. */
static double fp8_step(const row *r, const char *recipe, double *measured)
{
    ptdp_plan_request rq = request(r, BATCH);
    rq.fp8 = recipe != NULL ? ptdp_fp8_recipe_find(recipe) : NULL;
    const ptdp_plan_layout l = layout_of(r, BATCH);
    ptdp_plan_time t;
    ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &t), 0);
    *measured = plan_measured_step(&rq, &l);
    printf("%-36s %-10s: step plan %9.3f us measured %9.3f us %+6.2f%%\n", r->what, recipe ? recipe : "bf16",
           t.step_s * 1e6, *measured * 1e6, 100 * (t.step_s / *measured - 1));
    ck_assert_msg(fabs(t.step_s / *measured - 1) <= 0.05, "%s --fp8 %s: plan %g s, measured %g s", r->what,
                  recipe ? recipe : "(none)", t.step_s, *measured);
    return t.step_s;
}

/* dp 4, ZeRO-1, bf16: the step falls on dgx-h100, rises on dgx-a100-80g
 * (the bf16 peak and the quantization on top), planned as it runs. */
TEST(agree_tests, test_fp8_plan_is_the_simulators)
{
    static const char *const profiles[] = { "dgx-h100", "dgx-a100-80g" };
    for (int i = 0; i < 2; i++) {
        const row r = { profiles[i], 4, 1, 1, 1, 2, 1, NULL, PTDP_RECOMPUTE_NONE, 1, false, false, true, profiles[i],
                        0 };
        double m16, m8;
        const double p16 = fp8_step(&r, NULL, &m16), p8 = fp8_step(&r, "tensorwise", &m8);
        if (i == 0)   /* the FP8 peak */
            ck_assert_msg(p8 < p16 && m8 < m16, "dgx-h100: fp8 plan %g measured %g s, bf16 %g, %g s", p8, m8, p16,
                          m16);
        else          /* the bf16 peak, and the quantization on top */
            ck_assert_msg(p8 > p16 && m8 > m16, "dgx-a100-80g: fp8 plan %g measured %g s, bf16 %g, %g s", p8, m8,
                          p16, m16);
    }
}
END_TEST

/* Under TP and CP a whole-tensor scale max-reduces the amax of every
 * split operand (plan_time.c's fp8_amax_reduces): planned as it runs, and
 * a tiled recipe (mxfp8, 1 x 32 tiles) reduces nothing. */
TEST(agree_tests, test_fp8_amax_reduces_planned)
{
    static const row rows[] = {
        { "dgx-h100: dp 2 x tp 2", 2, 2, 1, 1, 4, 1, NULL, PTDP_RECOMPUTE_NONE, 1, false, false, true, "dgx-h100", 0 },
        { "dgx-h100: cp 2 x tp 2 --sp", 1, 2, 1, 2, 8, 1, NULL, PTDP_RECOMPUTE_NONE, 0, true, false, true, "dgx-h100",
          0 },
    };
    for (int i = 0; i < 2; i++) {
        double m;
        fp8_step(&rows[i], "tensorwise", &m);
        fp8_step(&rows[i], "delayed", &m);
        fp8_step(&rows[i], "mxfp8", &m);
    }
}
END_TEST

/* --fp8 delayed max-reduces its step amaxes over DP once a step
 * (fp8_linear.c): 3 reals a parameter tensor of the device's model.  The
 * plan's step is tensorwise's plus exactly that all-reduce, its own term
 * (fp8_amax_s), and the simulator's step to 1e-6 — at dp 4 the GPT's
 * 2 + 4 x 12 + 2 tensors, 624 bytes; at dp 2 x pp 2 each stage its own
 * (the last 2 x 12 + 2 and the tied embedding's copy: 324 bytes), the
 * step the slowest stage's end after it (within 1% of the term). */
TEST(agree_tests, test_fp8_delayed_prices_its_amax_table)
{
    static const row rows[] = {
        { "dgx-h100: dp 4", 4, 1, 1, 1, 2, 1, NULL, PTDP_RECOMPUTE_NONE, 1, false, false, true, "dgx-h100", 0 },
        { "dgx-h100: dp 2 x pp 2", 2, 1, 2, 1, 2, 1, NULL, PTDP_RECOMPUTE_NONE, 0, false, false, true, "dgx-h100",
          0 },
    };
    const double bytes[] = { 3 * 52 * sizeof(ptdp_real), 3 * 27 * sizeof(ptdp_real) };
    for (int i = 0; i < 2; i++) {
        ptdp_plan_request rq = request(&rows[i], BATCH);
        const ptdp_plan_layout l = layout_of(&rows[i], BATCH);
        ptdp_plan_time tw, dl;
        rq.fp8 = ptdp_fp8_recipe_find("tensorwise");
        ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &tw), 0);
        rq.fp8 = ptdp_fp8_recipe_find("delayed");
        ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &dl), 0);
        const double want = ptdp_cost_collective_nodes(rq.profile, PTDP_COLL_ALL_REDUCE, (uint64_t)bytes[i],
                                                       rows[i].dp, 1);
        ck_assert_msg(tw.fp8_amax_s == 0 && dl.fp8_amax_s == want, "%s: the amax table %.9g s, want %.9g s",
                      rows[i].what, dl.fp8_amax_s, want);
        /* one stage: the step's difference; two: the slower stage's end, near it */
        const double tol = rows[i].pp == 1 ? 1e-12 * dl.step_s : 0.01 * want;
        ck_assert_msg(fabs(dl.step_s - tw.step_s - want) <= tol, "%s: delayed %.12g s, tensorwise "
                      "%.12g s: apart by %.9g s, the all-reduce %.9g s", rows[i].what, dl.step_s, tw.step_s,
                      dl.step_s - tw.step_s, want);
        const double m = plan_measured_step(&rq, &l);
        printf("%-24s delayed: step plan %.9g s measured %.9g s (the amax table %.4g s)\n", rows[i].what,
               dl.step_s, m, want);
        ck_assert_msg(fabs(dl.step_s / m - 1) <= 1e-6, "%s --fp8 delayed: plan %.9g s, measured %.9g s",
                      rows[i].what, dl.step_s, m);
    }
}
END_TEST

/* --fp8-comm under ZeRO-3: each block's gather sends the elements of its
 * four FP8 weights (c_attn 3C x C, c_proj C x C, c_fc F x C, c_proj C x F)
 * as 1-byte codes and the rest (biases, norms, the embeddings, the head) in
 * bf16, after an all-reduce of the weights' amaxes over the ZeRO group: 4
 * (tensorwise), 7 tiles of 128 x 128 (blockwise: 2 + 1 + 2 + 2 at C 64,
 * F 256), 1536 of 1 x 32 (mxfp8: 192·2 + 64·2 + 256·2 + 64·8).  The GPT
 * of the rows above, bf16, dp 4, ZeRO-3: ψ = 4 x 49984 + 6144 + 128, ψ_q =
 * 4 x 49152; one round ψ_q + 2 (ψ - ψ_q) + 4 amaxes bytes against 2ψ.
 * And on a GPT large enough for bytes to tell (C 1024, seq 256, dp 4, M 2,
 * no overlap: every gather on the critical path, twice a micro-batch) the
 * step moves by exactly 2 M L (gather in FP8 - gather in bf16). */
TEST(unit_tests, test_fp8_comm_prices_zero3_gathers)
{
    static const char *const recipes[] = { "tensorwise", "blockwise", "mxfp8", "delayed" };
    static const double amaxes[] = { 4, 7, 1536, 4 };
    const row r = { "zero-3", 4, 1, 1, 1, 2, 1, NULL, PTDP_RECOMPUTE_NONE, 3, false, false, true, "dgx-h100", 0 };
    const double psi = 4 * 49984.0 + 6144 + 128, q = 4 * 49152.0;
    for (int i = 0; i < 4; i++) {
        ptdp_plan_request rq = request(&r, BATCH);
        const ptdp_plan_layout l = layout_of(&r, BATCH);
        rq.fp8 = ptdp_fp8_recipe_find(recipes[i]);
        ptdp_plan_time plain, comm;
        ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &plain), 0);
        rq.fp8_comm = true;
        ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &comm), 0);
        ck_assert(plain.zero3_gather_bytes == 0 && plain.zero3_psi == 0);
        const double want = q + 2 * (psi - q) + 4 * amaxes[i] * sizeof(ptdp_real);
        ck_assert_msg(comm.zero3_psi == psi && comm.zero3_psi_fp8 == q && comm.zero3_amaxes == 4 * amaxes[i] &&
                      comm.zero3_gather_bytes == want && comm.zero3_gather_bytes_store == 2 * psi,
                      "--fp8 %s: psi %.0f (want %.0f), fp8 %.0f (%.0f), amaxes %.0f (%.0f), %.0f bytes (%.0f), "
                      "store %.0f (%.0f)", recipes[i], comm.zero3_psi, psi, comm.zero3_psi_fp8, q, comm.zero3_amaxes,
                      4 * amaxes[i], comm.zero3_gather_bytes, want, comm.zero3_gather_bytes_store, 2 * psi);
    }
    ptdp_plan_request rq = ptdp_plan_request_defaults();
    rq.model = gpt_of((gpt_shape){ .layers = 4, .hidden = 1024, .ffn = 4096, .heads = 8, .seq_len = 256,
                                   .vocab = 1024 }, 0);
    rq.batch = 8;
    rq.gpus = 4;
    rq.profile = ptdp_profile_find("dgx-h100");
    rq.bf16 = true;
    rq.fp8 = ptdp_fp8_recipe_find("blockwise");
    const ptdp_plan_layout l = { .dp = 4, .tp = 1, .pp = 1, .cp = 1, .micro_batch_size = 1, .micro_batches = 2,
                                 .virtual_stages = 1, .recompute = PTDP_RECOMPUTE_NONE, .zero = 3,
                                 .schedule = ptdp_schedule_find("1f1b") };
    ptdp_plan_time plain, comm;
    ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &plain), 0);
    rq.fp8_comm = true;
    ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &comm), 0);
    const double C = 1024, F = 4096, wq = 3 * C * C + C * C + F * C + C * F, block = wq + 3 * C + F + C + 6 * C;
    const double tiles = 24 * 8 + 8 * 8 + 32 * 8 + 8 * 32;
    const double g16 = ptdp_cost_collective_nodes(rq.profile, PTDP_COLL_ALL_GATHER, (uint64_t)(2 * block), 4, 1);
    const double g8 = ptdp_cost_collective_nodes(rq.profile, PTDP_COLL_ALL_REDUCE,
                                                 (uint64_t)(tiles * sizeof(ptdp_real)), 4, 1) +
                      ptdp_cost_collective_nodes(rq.profile, PTDP_COLL_ALL_GATHER,
                                                 (uint64_t)(wq + 2 * (block - wq)), 4, 1);
    const double want = 2 * 2 * 4 * (g8 - g16);
    printf("zero-3, C 1024: step %.9g s with --fp8-comm, %.9g s without: %+.4g s, want %+.4g s\n", comm.step_s,
           plain.step_s, comm.step_s - plain.step_s, want);
    ck_assert_msg(want < 0 && fabs(comm.step_s - plain.step_s - want) <= 1e-9 * plain.step_s,
                  "--fp8-comm: step %.12g s, without %.12g s, apart %.9g s, want %.9g s", comm.step_s, plain.step_s,
                  comm.step_s - plain.step_s, want);
}
END_TEST

/* ...and the run agrees: ptdp train --fp8-comm at dp 4, ZeRO-3, bf16
 * (the plan's train line carries the flag), its step the plan's to 1e-3
 * (the plan leaves out each rank's wire padded to the largest one's), and
 * not the step without --fp8-comm (the gathers did change). */
TEST(agree_tests, test_fp8_comm_zero3_planned_as_it_runs)
{
    static const char *const recipes[] = { "tensorwise", "mxfp8" };
    const row r = { "dgx-h100: dp 4, zero 3", 4, 1, 1, 1, 2, 1, NULL, PTDP_RECOMPUTE_NONE, 3, false, false, true,
                    "dgx-h100", 0 };
    for (int i = 0; i < 2; i++) {
        ptdp_plan_request rq = request(&r, BATCH);
        const ptdp_plan_layout l = layout_of(&r, BATCH);
        rq.fp8 = ptdp_fp8_recipe_find(recipes[i]);
        const double without = plan_measured_step(&rq, &l);
        rq.fp8_comm = true;
        ptdp_plan_time t;
        ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &t), 0);
        const double with = plan_measured_step(&rq, &l);
        printf("%-36s %-10s: --fp8-comm step plan %9.3f us measured %9.3f us %+6.3f%% (without %9.3f us)\n", r.what,
               recipes[i], t.step_s * 1e6, with * 1e6, 100 * (t.step_s / with - 1), without * 1e6);
        ck_assert_msg(fabs(t.step_s / with - 1) <= 1e-3, "--fp8 %s --fp8-comm: plan %g s, measured %g s", recipes[i],
                      t.step_s, with);
        ck_assert_msg(with != without, "--fp8 %s: the run with --fp8-comm took the step without it", recipes[i]);
    }
}
END_TEST

/* On dgx-a100-80g (no FP8 peak) a block's forward under --fp8 is bf16's
 * plus its four linear layers' quantization passes — X and W of each:
 *
 *     c_attn R C + 3C C,  c_proj R C + C C,  c_fc R C + F C,  c_proj R F + C F
 *
 * elements, (4 + 1) bytes each at 2.039 TB/s, in flops at the bf16 peak;
 * the head keeps float: its forward unchanged. */
TEST(unit_tests, test_fp8_block_adds_its_quantization)
{
    const row r = { "fp8", 1, 1, 1, 1, 4, 1, NULL, PTDP_RECOMPUTE_NONE, 0, false, false, true, "dgx-a100-80g", 0 };
    const ptdp_plan_request rq = request(&r, BATCH);
    const ptdp_model_plan *mp = ptdp_model_of(&rq.model)->plan;
    ptdp_plan_flops f16, f8;
    mp->flops(rq.profile, &rq.model, 4, 1, false, 1, false, false, true, false, &f16);
    mp->flops(rq.profile, &rq.model, 4, 1, false, 1, false, false, true, true, &f8);
    const double R = 4 * 32, C = 64, F = 256;
    const double q = (R * C + 3 * C * C) + (R * C + C * C) + (R * C + F * C) + (R * F + C * F);
    const double want = f16.block_fwd + 312e12 * 5 * q / 2.039e12;
    ck_assert_msg(fabs(f8.block_fwd - want) <= 1e-12 * want, "block forward %.17g flops, want %.17g", f8.block_fwd,
                  want);
    ck_assert(f8.head_fwd == f16.head_fwd && f8.embed_fwd == f16.embed_fwd);
}
END_TEST

/* ------------------------------------------------------ the FLOP counts */

TEST(unit_tests, test_model_and_hardware_flops)
{
    const row r = { "pp 2", 1, 1, 2, 1, 1, 1, NULL, PTDP_RECOMPUTE_NONE, 0, false, false, false, NULL, 0 };
    ptdp_plan_request rq = request(&r, BATCH);
    ptdp_plan_layout l = layout_of(&r, BATCH);
    ptdp_plan_time none, full, sel;
    ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &none), 0);
    l.recompute = PTDP_RECOMPUTE_FULL;
    ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &full), 0);
    l.recompute = PTDP_RECOMPUTE_SELECTIVE;
    ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &sel), 0);
    /* 72 B s l h^2 (1 + s/6h + V/12lh), by hand: B 8, s 32, l 4, h 64, V 62 */
    const double B = 8, s = 32, L = 4, h = 64, V = 62;
    const double want = 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
    ck_assert_double_eq_tol(none.model_flops, want, 1e-6 * want);
    ck_assert_double_eq_tol(none.hardware_flops, want, 1e-6 * want);
    ck_assert_double_eq_tol(full.model_flops, want, 1e-6 * want);
    /* full: the forward again, blocks (1/3 of 72) and the head's logits */
    const double again = 24 * B * s * L * h * h * (1 + s / (6 * h)) + 2 * B * s * h * V;
    ck_assert_double_eq_tol(full.hardware_flops, want + again, 1e-6 * want);
    ck_assert_double_eq_tol(sel.hardware_flops, want + 4 * B * s * s * h * L, 1e-6 * want);
    /* recomputation costs time; tokens/s and TFLOP/s follow the step */
    ck_assert(full.step_s > none.step_s && sel.step_s > none.step_s);
    ck_assert_double_eq_tol(none.tokens_per_s, B * s / none.step_s, 1e-9 * none.tokens_per_s);
    ck_assert_double_eq_tol(none.model_tflops_per_gpu, want / (none.step_s * 2) / 1e12,
                            1e-9 * none.model_tflops_per_gpu);
    ck_assert(full.hardware_tflops_per_gpu > full.model_tflops_per_gpu);
    ck_assert(none.bubble > 0 && none.bubble < 1);
}
END_TEST

/* ------------------------------------------------ long schedules, fast */

static double step_of(const ptdp_plan_request *rq, const ptdp_plan_layout *l, bool play_all)
{
    if (play_all)
        setenv("PTDP_PLAN_PLAY_ALL", "1", 1);
    else
        unsetenv("PTDP_PLAN_PLAY_ALL");
    ptdp_plan_time t;
    ck_assert_int_eq(ptdp_plan_time_of(rq, l, &t), 0);
    unsetenv("PTDP_PLAN_PLAY_ALL");
    return t.step_s;
}

TEST(unit_tests, test_long_schedules_follow_the_line)
{
    /* a large vocabulary makes the last stage the slowest */
    ptdp_plan_request rq = ptdp_plan_request_defaults();
    rq.model = gpt_of((gpt_shape){ .layers = 24, .hidden = 512, .ffn = 2048,
                                   .heads = 8, .seq_len = 256, .vocab = 50000 }, 0);
    const char *schedules[] = { "1f1b", "gpipe", "zb-h1", "interleaved" };
    const char *profiles[] = { "dgx-a100", "laptop-cpu" };
    int checked = 0;
    for (int k = 0; k < 4; k++)
        for (int pr = 0; pr < 2; pr++)
            for (int p = 2; p <= 8; p *= 2)
                for (int m = 9 * p; m <= 12 * p; m += p) {
                    rq.profile = ptdp_profile_find(profiles[pr]);
                    rq.batch = 2 * m;
                    rq.gpus = 2 * p;
                    ptdp_plan_layout l = {
                        .dp = 2, .tp = 1, .pp = p, .cp = 1, .micro_batch_size = 1, .micro_batches = m + (k < 3),
                        .virtual_stages = k == 3 ? 2 : 1, .recompute = (ptdp_recompute)(m % 3), .zero = m % 4,
                        .overlap = m % 2 == 0,
                    };
                    rq.batch = 2 * l.micro_batches;
                    l.schedule = ptdp_schedule_find(schedules[k]);
                    double line = step_of(&rq, &l, false), all = step_of(&rq, &l, true);
                    ck_assert_msg(fabs(line - all) <= 1e-12 * all, "%s p %d m %d: the line %.15g s, played out %.15g s",
                                  schedules[k], p, l.micro_batches, line, all);
                    checked++;
                }
    ck_assert_int_eq(checked, 4 * 2 * 3 * 4);
}
END_TEST

/* The PTD-P paper's largest GPT: 1T parameters (128 layers, h 25600, 160
 * heads, s 2048, V 51200) on 3072 GPUs, batch 3072. */
TEST(unit_tests, test_a_trillion_parameters_priced)
{
    ptdp_plan_request rq = ptdp_plan_request_defaults();
    rq.model = gpt_of((gpt_shape){ .layers = 128, .hidden = 25600, .ffn = 4 * 25600,
                                   .heads = 160, .seq_len = 2048, .vocab = 51200 }, 0);
    rq.batch = 3072;
    rq.gpus = 3072;
    rq.bf16 = true;
    rq.profile = ptdp_profile_find("dgx-a100");
    const struct { int tp, pp, v, b; const char *schedule; } L[] = {
        { 8, 64, 1, 1, "1f1b" }, { 8, 64, 2, 1, "interleaved" }, { 8, 32, 1, 1, "zb-h1" }, { 8, 64, 1, 2, "gpipe" },
        { 4, 64, 1, 1, "1f1b" },
    };
    for (int i = 0; i < (int)(sizeof L / sizeof L[0]); i++) {
        ptdp_plan_layout l = {
            .tp = L[i].tp, .pp = L[i].pp, .cp = 1, .dp = 3072 / (L[i].tp * L[i].pp), .micro_batch_size = L[i].b,
            .virtual_stages = L[i].v, .recompute = PTDP_RECOMPUTE_FULL, .zero = 1,
        };
        l.micro_batches = 3072 / (l.micro_batch_size * l.dp);
        l.schedule = ptdp_schedule_find(L[i].schedule);
        ptdp_plan_time t;
        double w0 = ptdp_wall_now();
        ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &t), 0);
        double w1 = ptdp_wall_now();
        for (int k = 0; k < 10; k++)
            ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &t), 0);
        double w2 = ptdp_wall_now();
        printf("plan-time  1T: tp %d pp %d dp %d v %d b %d m %d %-11s step %8.2f s, bubble %.3f, %6.1f model "
               "TFLOP/s a GPU; first call %.1f ms, then %.2f ms a call\n", l.tp, l.pp, l.dp, l.virtual_stages,
               l.micro_batch_size, l.micro_batches, l.schedule->name, t.step_s, t.bubble, t.model_tflops_per_gpu,
               1e3 * (w1 - w0), 1e3 * (w2 - w1) / 10);
        ck_assert(t.step_s > 0 && t.bubble > 0 && t.bubble < 1);
        ck_assert(t.hardware_tflops_per_gpu > t.model_tflops_per_gpu);
        /* The time a call takes is printed, not asserted: a sanitizer or a
         * loaded host multiplies it.  The speed target (every layout of this
         * model in 5 s on one core) is `ptdp bench plan`'s. */
    }
}
END_TEST

int main(void)
{
    return harness_main("plan_time");
}
