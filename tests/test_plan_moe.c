/*
 * test_plan_moe.c — the planner's memory and step time of a mixture of
 * experts against what `ptdp train` measures on the same layout.
 *
 * For each layout below, ptdp_plan_memory_of and ptdp_plan_time_of
 * predict the busiest device's peak and the step; ptdp_train runs the
 * layout (ptdp_plan_train_config) for two steps on a tiny GPT whose
 * blocks' MLPs are mixtures of experts, and the arena's largest peak and
 * the second step's virtual time must be the plan's within 5%:
 *
 *     |plan - measured| / measured <= 0.05
 *
 * The planner assumes uniform routing: each expert gets k R / E of a
 * device's R token rows, at most its capacity.  A freshly initialised
 * router does not route uniformly, so the layouts here are those where
 * the assumption is exact, not approximately true:
 *
 *   top-k = E          every token goes to every expert: each expert
 *                      receives exactly R rows, each EP rank R E / ep
 *                      from each source, whatever the router's logits
 *   a small capacity   c = 1/8 with k 2 of E 4 and 32 positions: an
 *                      expert takes ceil(c k T / E) = 2 choices a
 *                      sequence, and every expert is chosen at least
 *                      twice in every sequence (16 on average), so every
 *                      expert's rows are exactly its capacity
 *
 * (the router's choices still matter to the gates, not to the rows).
 * The measured loads are not given to the planner: it is tested where
 * its assumption holds, and says the assumption where it is used.
 *
 * The layouts cover expert parallelism with DP, TP, PP and CP, the
 * expert-DP group (dp 4 ep 2), ZeRO 1 and 2 (the experts' states over
 * their own copies), --overlap, full and selective recomputation, GPipe,
 * ZB-H1 and interleaved schedules, bf16, mixtures every other block, a
 * layout over two nodes (the all-to-all on the network), and DeepSeek's
 * first dense blocks and shared experts.  And the
 * search: every ep it offers divides dp x cp and E, its bound stays below
 * every step.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "plan_vs_train.h"
#include "ptdp/arena.h"
#include "ptdp/gpt.h"
#include "ptdp/mesh.h"
#include "ptdp/model_plan.h"
#include "ptdp/plan.h"
#include "ptdp/plan_search.h"
#include "ptdp/train.h"
#include "ptdp/ep.h"
#include "ptdp/error.h"
#include "ptdp/fp8_quant.h"

static const harness_tcase moe_tests = { .name = "plan_moe", .timeout_s = 60 };

typedef struct {
    const char *name;
    int layers, batch;
    int dp, tp, pp, ep, b;
    int E, k, every;
    double capacity;
    int zero;
    ptdp_recompute recompute;
    const char *schedule;
    const char *profile;
    bool overlap, bf16;
    int v, cp;
    int dense;                  /* --moe-dense-first: blocks 0..K-1 dense */
    int shared;                 /* --moe-shared-experts S                 */
    int etp;                    /* --etp (MoE parallel folding); 0: tp    */
} moe_case;

#define R(how) PTDP_RECOMPUTE_##how
static const moe_case cases[] = {
    /* name                    L  B dp tp pp ep b  E  k  n  cap    z  recompute schedule      profile
         overlap bf16 v cp */
    { "one device, k = E",     2, 4, 1, 1, 1, 1, 2, 4, 4, 1, 0,    0, R(NONE),  "1f1b",        NULL,
      false, false, 1, 1, 0, 0, 0 },
    { "dp 2 ep 2",             2, 8, 2, 1, 1, 2, 2, 4, 4, 1, 0,    0, R(NONE),  "1f1b",        NULL,
      false, false, 1, 1, 0, 0, 0 },
    { "dp 2 ep 2 zero 1",      2, 8, 2, 1, 1, 2, 2, 4, 4, 1, 0,    1, R(NONE),  "1f1b",        NULL,
      false, false, 1, 1, 0, 0, 0 },
    { "dp 2 ep 2 zero 2",      2, 8, 2, 1, 1, 2, 2, 4, 4, 1, 0,    2, R(NONE),  "1f1b",        NULL,
      false, false, 1, 1, 0, 0, 0 },
    { "dp 4 ep 2 zero 1",      2, 8, 4, 1, 1, 2, 1, 4, 4, 1, 0,    1, R(NONE),  "1f1b",        NULL,
      false, false, 1, 1, 0, 0, 0 },
    { "dp 2 tp 2 ep 2",        2, 8, 2, 2, 1, 2, 2, 4, 4, 1, 0,    0, R(NONE),  "1f1b",        NULL,
      false, false, 1, 1, 0, 0, 0 },
    { "dp 2 pp 2 ep 2",        4, 8, 2, 1, 2, 2, 1, 4, 4, 1, 0,    0, R(NONE),  "1f1b",        NULL,
      false, false, 1, 1, 0, 0, 0 },
    { "dp 2 ep 2 full",        2, 8, 2, 1, 1, 2, 2, 4, 4, 1, 0,    0, R(FULL),  "1f1b",        NULL,
      false, false, 1, 1, 0, 0, 0 },
    { "dp 2 ep 2 selective",   2, 8, 2, 1, 1, 2, 2, 4, 4, 1, 0,    0, R(SELECTIVE), "1f1b",        NULL,
      false, false, 1, 1, 0, 0, 0 },
    { "capacity, dp 2 ep 2",   2, 8, 2, 1, 1, 2, 2, 4, 2, 1, 0.125, 0, R(NONE),  "1f1b",        NULL,
      false, false, 1, 1, 0, 0, 0 },
    { "every 2nd, pp 2 gpipe", 4, 8, 2, 1, 2, 2, 1, 4, 4, 2, 0,    1, R(NONE),  "gpipe",       NULL,
      false, false, 1, 1, 0, 0, 0 },
    { "ep 4 over 2 nodes",     2, 8, 4, 2, 1, 4, 1, 4, 4, 1, 0,    1, R(NONE),  "1f1b",        "dgx-a100-80g",
      false, false, 1, 1, 0, 0, 0 },
    { "dp 2 ep 2 overlap",     2, 8, 2, 1, 1, 2, 2, 4, 4, 1, 0,    1, R(NONE),  "1f1b",        NULL,
      true, false, 1, 1, 0, 0, 0 },
    { "dp 4 ep 2 overlap",     2, 8, 4, 1, 1, 2, 1, 4, 4, 1, 0,    0, R(NONE),  "1f1b",        NULL,
      true, false, 1, 1, 0, 0, 0 },
    { "cp 2 ep 2 (dropless)",  2, 4, 1, 1, 1, 2, 2, 4, 4, 1, 0,    1, R(NONE),  "1f1b",        NULL,
      false, false, 1, 2, 0, 0, 0 },
    { "pp 2 zb-h1 ep 2",       4, 8, 2, 1, 2, 2, 1, 4, 4, 1, 0,    0, R(NONE),  "zb-h1",       NULL,
      false, false, 1, 1, 0, 0, 0 },
    { "pp 2 interleaved ep 2", 4, 8, 2, 1, 2, 2, 1, 4, 4, 1, 0,    1, R(NONE),  "interleaved", NULL,
      false, false, 2, 1, 0, 0, 0 },
    { "bf16 dp 2 ep 2 zero 1", 2, 8, 2, 1, 1, 2, 2, 4, 4, 1, 0,    1, R(NONE),  "1f1b",        NULL,
      false, true, 1, 1, 0, 0, 0 },
    /* DeepSeek's first dense blocks: stage 0 holds dense block 0 and MoE block 1 */
    { "dense first 1, pp 2",   4, 8, 2, 1, 2, 2, 1, 4, 4, 1, 0,    1, R(NONE),  "1f1b",        NULL,
      false, false, 1, 1, 1, 0, 0 },
    /* K = 2, every 2nd from there: block 3 alone */
    { "dense first 2, every 2nd", 4, 8, 2, 1, 2, 2, 1, 4, 4, 2, 0,  0, R(NONE),  "gpipe",       NULL,
      false, false, 1, 1, 2, 0, 0 },
    /* DeepSeek's shared experts: one MLP of S F_e every token takes, beside the routed ones */
    { "shared 1, dp 2 ep 2",   2, 8, 2, 1, 1, 2, 2, 4, 4, 1, 0,    1, R(NONE),  "1f1b",        NULL,
      false, false, 1, 1, 0, 1, 0 },
    { "shared 2, tp 2 ep 2 zb-h1", 4, 8, 2, 2, 2, 2, 1, 4, 4, 1, 0, 0, R(NONE), "zb-h1",       NULL,
      false, false, 1, 1, 0, 2, 0 },
    { "shared 1, full",        2, 8, 2, 1, 1, 2, 2, 4, 4, 1, 0,    1, R(FULL),  "1f1b",        NULL,
      false, false, 1, 1, 0, 1, 0 },
    { "shared 1, bf16",        2, 8, 2, 1, 1, 2, 2, 4, 4, 1, 0,    1, R(NONE),  "1f1b",        NULL,
      false, true, 1, 1, 0, 1, 0 },
    /* MoE parallel folding: each TP rank routes its slice, the experts split etp ways */
    { "fold: tp 2 etp 1 ep 4", 2, 8, 2, 2, 1, 4, 2, 4, 4, 1, 0,    0, R(NONE),  "1f1b",        NULL,
      false, false, 1, 1, 0, 0, 1 },
    { "fold: tp 2 etp 1 ep 1", 2, 8, 2, 2, 1, 1, 2, 4, 4, 1, 0,    1, R(NONE),  "1f1b",        NULL,
      false, false, 1, 1, 0, 0, 1 },
    { "fold: tp 4 etp 2 ep 2", 2, 8, 1, 4, 1, 2, 2, 4, 4, 1, 0,    0, R(NONE),  "1f1b",        NULL,
      false, false, 1, 1, 0, 0, 2 },
    { "fold: pp 2 zero 1 shared", 4, 8, 2, 2, 2, 4, 2, 4, 4, 1, 0, 1, R(NONE),  "1f1b",        NULL,
      false, false, 1, 1, 0, 1, 1 },
    { "fold: capacity",        2, 8, 2, 2, 1, 4, 2, 4, 2, 1, 0.125, 0, R(NONE), "1f1b",       NULL,
      false, false, 1, 1, 0, 0, 1 },
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))
#undef R

static ptdp_plan_request request_of(const moe_case *k)
{
    /* the built-in corpus's 62 tokens */
    ptdp_model_config m = gpt_of((gpt_shape){ .layers = k->layers, .hidden = 64, .ffn = 256, .heads = 4, .seq_len = 32,
                                              .vocab = 62 }, 0);
    ptdp_gpt_settings *g = ptdp_gpt(&m);
    g->moe_experts = k->E;
    g->moe_top_k = k->k;
    g->moe_every = k->every;
    g->moe_dense_first = k->dense;
    g->moe_shared_experts = k->shared;
    g->moe_ffn = 128;
    g->moe_capacity = k->capacity;
    return plan_question(m, k->batch, k->dp * k->tp * k->pp * (k->cp > 1 ? k->cp : 1), k->profile, k->bf16);
}

static ptdp_plan_layout layout_of(const moe_case *k)
{
    ptdp_plan_layout l = plan_layout((plan_layout_fields){ .dp = k->dp, .tp = k->tp, .pp = k->pp, .cp = k->cp,
                                                           .ep = k->ep, .b = k->b, .v = k->v, .zero = k->zero,
                                                           .recompute = k->recompute, .schedule = k->schedule,
                                                           .overlap = k->overlap },
                                     k->batch);
    l.etp = k->etp;
    return l;
}

LOOP_TEST(moe_tests, test_plan_moe_is_the_simulators, NCASES)
{
    plan_row_vs_train(cases[_i].name, request_of(&cases[_i]), layout_of(&cases[_i]));
}
END_TEST

/* How often the planner prices a mixture (the planning table's moe, its
 * attention's GEMMs at their efficiency): the GPT's table, with moe
 * counted. */
static int moe_prices;
static ptdp_model_plan counted_plan;
static ptdp_model_ops counted_ops;

static bool counted_moe(const ptdp_profile *p, const ptdp_model_config *c, int layer, int b, int tp, int cp, int ep,
                        int etp, ptdp_plan_core core, bool split, bool bf16, bool fp8, ptdp_plan_moe *out)
{
    moe_prices++;
    return ptdp_gpt_ops.plan->moe(p, c, layer, b, tp, cp, ep, etp, core, split, bf16, fp8, out);
}

/* Under --fp8 a mixture's experts are priced as the run charges them
 * (gpt_moe.c, gpt_cost.h): by their rows, each product through the GEMM
 * curve at the FP8 peak plus the quantization of its operands, (4 + 1)
 * bytes an element at HBM bandwidth.  On dgx-a100-80g (no FP8 peak: the
 * bf16 one) a routed row costs bf16's plus its rows' share — forward X of
 * c_fc (C) and of c_proj (F_e), backward dY of each (C, F_e) and X again
 * for each dW — and each local expert's two weights (2 F_e C) once a
 * forward and once a backward; on dgx-h100 its products at the FP8 peak:
 * a row's share of its expert's products on n = here / local rows, each
 * 2 m n k over the curve's efficiency (clock.h). */
TEST(moe_tests, test_fp8_prices_the_experts)
{
    const moe_case k = { "fp8", 2, 8, 2, 1, 1, 2, 1, 4, 2, 1, 0, 1, PTDP_RECOMPUTE_NONE, "1f1b", NULL,
                         false, false, 1, 1, 0, 0, 0 };
    ptdp_plan_request rq = request_of(&k);
    const ptdp_profile *a100 = ptdp_profile_find("dgx-a100-80g"), *h100 = ptdp_profile_find("dgx-h100");
    ptdp_plan_moe a, b, h16, h8;
    ck_assert(ptdp_gpt_ops.plan->moe(a100, &rq.model, 0, 2, 1, 1, 2, 0, PTDP_PLAN_CORE_KEPT, false, true, false, &a));
    ck_assert(ptdp_gpt_ops.plan->moe(a100, &rq.model, 0, 2, 1, 1, 2, 0, PTDP_PLAN_CORE_KEPT, false, true, true, &b));
    const double C = 64, F = 128, per = 312e12 * 5 / 2.039e12;   /* flops at the bf16 peak an element */
    const double row_f = a.row_fwd + per * (C + F), row_b = a.row_bwd + per * (C + F + F + C);
    ck_assert_msg(fabs(b.row_fwd - row_f) <= 1e-12 * row_f, "a row forward %.17g flops, want %.17g", b.row_fwd, row_f);
    ck_assert_msg(fabs(b.row_bwd - row_b) <= 1e-12 * row_b, "a row backward %.17g, want %.17g", b.row_bwd, row_b);
    ck_assert_double_eq(b.local, 2);
    const double wq = b.local * per * 2 * F * C;   /* the attention's FP8 beside it: a's and b's fwd apart by more */
    ck_assert_msg(b.fwd - a.fwd >= wq && b.bwd - a.bwd >= wq, "the experts' weights: fwd +%g, bwd +%g, want >= %g",
                  b.fwd - a.fwd, b.bwd - a.bwd, wq);
    ck_assert(ptdp_gpt_ops.plan->moe(h100, &rq.model, 0, 2, 1, 1, 2, 0, PTDP_PLAN_CORE_KEPT, false, true, false, &h16));
    ck_assert(ptdp_gpt_ops.plan->moe(h100, &rq.model, 0, 2, 1, 1, 2, 0, PTDP_PLAN_CORE_KEPT, false, true, true, &h8));
    /* dgx-h100: the row's products (forward two, backward four) at the
     * FP8 peak, the rest as in bf16 */
    const double ratio = ptdp_profile_peak(h100, 1) / ptdp_profile_peak_fp8(h100);
    const double n = h16.here / h16.local, fc = ptdp_gemm_cost_flops(h100, n, F, C) / n;
    const double proj = ptdp_gemm_cost_flops(h100, n, C, F) / n;
    const double dw = (ptdp_gemm_cost_flops(h100, F, C, n) + ptdp_gemm_cost_flops(h100, C, F, n)) / n;
    const double ph = ptdp_profile_peak(h100, 1) * 5 / h100->hbm_Bps;
    const double hf = h16.row_fwd + (fc + proj) * (ratio - 1) + ph * (C + F);
    const double hb = h16.row_bwd + (fc + proj + dw) * (ratio - 1) + ph * (2 * C + 2 * F);
    ck_assert_msg(fc > 2 * n * F * C / n, "a thin product on the curve: %g flops a row, more than 2 C F_e", fc);
    ck_assert_msg(fabs(h8.row_fwd - hf) <= 1e-12 * hf && fabs(h8.row_bwd - hb) <= 1e-12 * hb,
                  "dgx-h100: a row %.17g, %.17g flops in FP8, want %.17g, %.17g", h8.row_fwd, h8.row_bwd, hf, hb);
    ck_assert(ratio < 1);
}
END_TEST

/* The planner's step of a mixture under --fp8 blockwise (the tiles: EP
 * refuses one scale a tensor) against the simulator's, on both profiles:
 * the experts' products at the FP8 peak (dgx-h100), the quantization on
 * top of bf16's (dgx-a100-80g).  Every token routed to every expert (k =
 * E), so the rows are the plan's and the step is the simulator's to 1e-6
 * (the experts priced as without --fp8 left it 0.7% short). */
TEST(moe_tests, test_fp8_plan_moe_is_the_simulators)
{
    static const char *const profiles[] = { "dgx-h100", "dgx-a100-80g" };
    for (int i = 0; i < 2; i++) {
        const moe_case k = { profiles[i], 2, 8, 2, 1, 1, 2, 2, 4, 4, 1, 0, 1, PTDP_RECOMPUTE_NONE, "1f1b",
                             profiles[i], false, true, 1, 1, 0, 0, 0 };
        ptdp_plan_request rq = request_of(&k);
        rq.fp8 = ptdp_fp8_recipe_find("blockwise");
        const ptdp_plan_layout l = layout_of(&k);
        ptdp_plan_time t;
        ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &t), 0);
        const double m = plan_measured_step(&rq, &l);
        printf("fp8 blockwise, %-14s step plan %.9g s, measured %.9g s\n", profiles[i], t.step_s, m);
        ck_assert_msg(fabs(t.step_s / m - 1) <= 1e-6, "%s --fp8 blockwise: step plan %.9g s, measured %.9g s",
                      profiles[i], t.step_s, m);
    }
}
END_TEST

/* --fp8-comm: EP's forward dispatch sends each routed row as C E4M3
 * codes of 1 B and its 1 x c tiles' scales, two all-to-alls (ep.h), in
 * place of C reals.  Dp 2 ep 2, k = E = 4: a device sends kept (ep-1)/ep =
 * 512 rows of C = 64 a block, 2 blocks; the plan's EP term moves by
 * exactly 2 (a2a(512 C r) - a2a(512 C) - a2a(512 tiles r)) with blockwise
 * (1 x 128 tiles: one scale a row) and mxfp8 (1 x 32: two), and its step
 * is the simulator's (ptdp train --fp8-comm) to 1e-6.  (Rows this short
 * save fewer bytes than the second all-to-all's latency costs: the term
 * grows here, as the run's does.) */
TEST(moe_tests, test_fp8_comm_prices_the_dispatch)
{
    static const char *const recipes[] = { "blockwise", "mxfp8" };
    static const double tiles[] = { 1, 2 };
    const moe_case k = { "fp8-comm", 2, 8, 2, 1, 1, 2, 2, 4, 4, 1, 0, 1, PTDP_RECOMPUTE_NONE, "1f1b", "dgx-h100",
                         false, true, 1, 1, 0, 0, 0 };
    for (int i = 0; i < 2; i++) {
        ptdp_plan_request rq = request_of(&k);
        const ptdp_plan_layout l = layout_of(&k);
        rq.fp8 = ptdp_fp8_recipe_find(recipes[i]);
        ptdp_plan_time plain, comm;
        ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &plain), 0);
        rq.fp8_comm = true;
        ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &comm), 0);
        const double rows = 2 * 32 * 4 / 2.0, C = 64, r = sizeof(ptdp_real);
        const ptdp_profile *p = rq.profile;
        /* the plain dispatch's rows go as bf16 under bf16 (ep.h), 2 B an element */
        const double a2a_rows = ptdp_cost_collective_nodes(p, PTDP_COLL_ALL_TO_ALLV, (uint64_t)(rows * C * 2), 2, 1);
        const double a2a_fp8 = ptdp_cost_collective_nodes(p, PTDP_COLL_ALL_TO_ALLV, (uint64_t)(rows * C), 2, 1) +
                               ptdp_cost_collective_nodes(p, PTDP_COLL_ALL_TO_ALLV, (uint64_t)(rows * tiles[i] * r),
                                                          2, 1);
        const double want = 2 * (a2a_rows - a2a_fp8);
        ck_assert_msg(fabs(plain.ep_comm_s - comm.ep_comm_s - want) <= 1e-12 * plain.ep_comm_s,
                      "--fp8 %s --fp8-comm: EP %.9g s, without %.9g s: apart %.9g s, want %.9g s", recipes[i],
                      comm.ep_comm_s, plain.ep_comm_s, plain.ep_comm_s - comm.ep_comm_s, want);
        ck_assert(ptdp_ep_fp8_row_bytes(rq.fp8, 64) == C + tiles[i] * r);
        const double m = plan_measured_step(&rq, &l);
        printf("--fp8 %-9s --fp8-comm: step plan %.9g s, measured %.9g s (EP %.4g s, without %.4g s)\n",
               recipes[i], comm.step_s, m, comm.ep_comm_s, plain.ep_comm_s);
        ck_assert_msg(fabs(comm.step_s / m - 1) <= 1e-6, "--fp8 %s --fp8-comm: step plan %.9g s, measured %.9g s",
                      recipes[i], comm.step_s, m);
    }
}
END_TEST

/* Every mixture's block is alike, so a layout prices one, however many
 * blocks and stages it has: the memory model once, the step's time once
 * (twice with a split backward) — not once a block and stage (the work
 * then grew with --layers: 64 blocks on 4 stages priced 48 times in the
 * memory and 192 in the time).  Same numbers as the GPT's own table. */
TEST(moe_tests, test_a_layout_prices_one_mixture)
{
    const moe_case k = { "count", 64, 8, 2, 1, 4, 2, 1, 4, 2, 1, 0, 1, PTDP_RECOMPUTE_NONE, "1f1b", NULL,
                         false, false, 1, 1, 0, 0, 0 };
    ptdp_plan_request rq = request_of(&k);
    const ptdp_plan_layout l = layout_of(&k);
    ptdp_plan_memory mem, mem_counted;
    ptdp_plan_time t, t_counted;
    ck_assert_int_eq(ptdp_plan_memory_of(&rq, &l, &mem), 0);
    ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &t), 0);
    counted_plan = *ptdp_gpt_ops.plan;
    counted_plan.moe = counted_moe;
    counted_ops = ptdp_gpt_ops;
    counted_ops.plan = &counted_plan;
    rq.model.ops = &counted_ops;
    moe_prices = 0;
    ck_assert_int_eq(ptdp_plan_memory_of(&rq, &l, &mem_counted), 0);
    ck_assert_msg(moe_prices == 1, "the memory of 64 mixtures on 4 stages priced %d of them", moe_prices);
    moe_prices = 0;
    ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &t_counted), 0);
    ck_assert_msg(moe_prices == 1, "the step of 64 mixtures on 4 stages priced %d of them", moe_prices);
    ck_assert(mem_counted.total == mem.total && t_counted.step_s == t.step_s);
    ck_assert(t.model_flops > 0 && mem.total > 0);
}
END_TEST

/* A capacity that drops nearly every choice (c = 1e-6: one slot an
 * expert a sequence, 8 of its 8192 choices kept) makes the step shorter,
 * since the experts run 8 rows, not 8192 — but the GPUs compute no
 * faster: the hardware count has the rows the experts run, so its
 * TFLOP/s stay below dropless's on the same layout (it once counted every
 * choice and read 428 TFLOP/s a GPU, 87% of an H100, against 229
 * dropless), and the model count (every token's k experts, dropped or
 * not) is the dropless model's.  The Mixtral-like GPT of the capacity's
 * reproduction, dp 32 ep 8 tp 2 on 64 H100s. */
TEST(moe_tests, test_a_tiny_capacity_computes_no_faster_than_dropless)
{
    ptdp_plan_request rq = ptdp_plan_request_defaults();
    rq.model = gpt_of((gpt_shape){ .layers = 32, .hidden = 4096, .ffn = 14336,
                                   .heads = 32, .seq_len = 4096, .vocab = 32000 }, 0);
    ptdp_gpt_settings *g = ptdp_gpt(&rq.model);
    g->moe_experts = 8;
    g->moe_top_k = 2;
    g->moe_every = 1;
    rq.batch = 1024;
    rq.gpus = 64;
    rq.profile = ptdp_profile_find("dgx-h100");
    const ptdp_plan_layout l = { .dp = 32, .tp = 2, .pp = 1, .cp = 1, .ep = 8, .micro_batch_size = 1,
                                 .micro_batches = 32, .virtual_stages = 1, .recompute = PTDP_RECOMPUTE_NONE,
                                 .zero = 1, .overlap = true, .schedule = ptdp_schedule_find("1f1b") };
    ptdp_plan_time dropless, tiny;
    ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &dropless), 0);
    g->moe_capacity = 1e-6;
    ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &tiny), 0);
    printf("capacity 1e-6: step %.4g s, %.1f hardware TFLOP/s a GPU (model %.1f); dropless %.4g s, %.1f (%.1f)\n",
           tiny.step_s, tiny.hardware_tflops_per_gpu, tiny.model_tflops_per_gpu, dropless.step_s,
           dropless.hardware_tflops_per_gpu, dropless.model_tflops_per_gpu);
    ck_assert(tiny.step_s < dropless.step_s);
    ck_assert_msg(tiny.hardware_tflops_per_gpu <= dropless.hardware_tflops_per_gpu, "capacity 1e-6: %.1f hardware "
                  "TFLOP/s a GPU, above dropless's %.1f", tiny.hardware_tflops_per_gpu,
                  dropless.hardware_tflops_per_gpu);
    ck_assert(tiny.model_flops == dropless.model_flops && dropless.hardware_flops == dropless.model_flops);
    /* the experts' share: 3 x 32 blocks x B h 4 F_e (k s - 8) rows less */
    const double less = 3.0 * 32 * 1024 * 4096 * 4.0 * 14336 * (2.0 * 4096 - 8);
    ck_assert_double_eq_tol(tiny.hardware_flops, tiny.model_flops - less, 1e-9 * tiny.model_flops);
}
END_TEST

/* The search over a mixture's layouts: every ep it offers divides dp x cp
 * and E, some spread the experts, the lower bound of each step (plan_search.c:
 * the cheaper of a dense and a mixture's block) stays below the step, and
 * the best K with pruning are the first K of every layout timed. */
TEST(moe_tests, test_search_over_expert_parallelism)
{
    const moe_case k = { "search", 2, 8, 1, 1, 1, 1, 1, 4, 2, 1, 0, 0, PTDP_RECOMPUTE_NONE, "1f1b", NULL,
                         false, false, 1, 1, 0, 0, 0 };
    ptdp_plan_request rq = request_of(&k);
    rq.gpus = 8;
    ptdp_plan_candidate *top = NULL;
    int nall = 0, ntop = 0, spread = 0, folded = 0;
    ptdp_plan_candidate *all = plan_search_all(&rq, &nall);
    ptdp_plan_search_stats st;
    char msg[PTDP_MSG_MAX];
    for (int i = 0; i < nall; i++) {
        const ptdp_plan_layout *l = &all[i].layout;
        const int ep = l->ep > 1 ? l->ep : 1, slices = l->etp > 0 && l->etp < l->tp ? l->tp / l->etp : 1;
        ck_assert_msg(l->etp == 0 || l->tp % l->etp == 0, "tp %d etp %d", l->tp, l->etp);
        ck_assert_msg((slices * l->dp * l->cp) % ep == 0 && 4 % ep == 0, "dp %d cp %d tp %d etp %d ep %d", l->dp,
                      l->cp, l->tp, l->etp, ep);
        folded += slices > 1;
        ck_assert_msg(l->zero != 3 && !l->sp, "a layout the model refuses (ZeRO-3 or SP)");
        spread += ep > 1;
    }
    ck_assert_int_gt(spread, 0);
    ck_assert_int_gt(folded, 0);   /* MoE parallel folding's layouts are offered too */
    ck_assert_msg(ptdp_plan_search_top(&rq, 0, 5, &top, &ntop, &st, msg, sizeof msg) == 0, "%s", msg);
    for (int i = 0; i < ntop; i++)
        ck_assert(top[i].time.step_s == all[i].time.step_s && top[i].layout.ep == all[i].layout.ep);
    printf("search: %d layouts, %d with ep > 1; the best: dp %d ep %d tp %d pp %d\n", nall, spread,
           top[0].layout.dp, top[0].layout.ep, top[0].layout.tp, top[0].layout.pp);
    free(all);
    free(top);
}
END_TEST

int main(void) { return harness_main("plan_moe"); }
