/*
 * test_plan_llama_moe.c — the planner's memory and step time of a llama
 * whose feed-forwards are mixtures of SwiGLU experts, against what `ptdp
 * train` measures on the same layout.
 *
 * For each layout below, ptdp_plan_memory_of and ptdp_plan_time_of
 * predict the busiest device's peak and the step; ptdp_train runs the
 * layout (ptdp_plan_train_config) for two steps on a tiny llama (8 query
 * heads, 2 kv heads) whose blocks hold E = 4 experts of three matrices
 * each (w1, w3, w2), and the arena's largest peak and the second step's
 * virtual time must be the plan's within 5% (plan_vs_train.h):
 *
 *     |plan - measured| / measured <= 0.05
 *
 * As test_plan_moe.c for the GPT, the layouts are those where the
 * planner's uniform routing is exact: top-k = E (every expert takes every
 * row), or a capacity of c = 1/8 with k 2 of E 4 and 32 positions (every
 * expert full at ceil(c k T / E) = 2 choices a sequence).
 *
 * The layouts cover expert parallelism with DP, TP, PP and CP, the
 * expert-DP group, ZeRO 1 and 2, full and selective recomputation,
 * GPipe and ZB-H1, bf16, and DeepSeek's pieces: the sigmoid router with
 * its selection bias, the first dense blocks, the shared experts.  And
 * the model's FLOPs of a step by formula, the layouts the search offers.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "plan_vs_train.h"
#include "ptdp/llama.h"
#include "ptdp/model_plan.h"
#include "ptdp/moe.h"
#include "ptdp/plan.h"
#include "ptdp/plan_search.h"
#include "ptdp/train.h"
#include "ptdp/error.h"

static const harness_tcase llama_moe_tests = { .name = "plan_llama_moe", .timeout_s = 120 };

typedef struct {
    const char *name;
    int layers, batch;
    int dp, tp, pp, cp, ep, b;
    int k, every, dense, shared;
    double capacity;
    int zero;
    ptdp_recompute recompute;
    const char *schedule;
    bool bf16, sigmoid;
    double tol;                 /* 0: 5%                                  */
    int etp;                    /* --etp (MoE parallel folding); 0: tp    */
} llama_moe_case;

#define R(how) PTDP_RECOMPUTE_##how
static const llama_moe_case cases[] = {
    /* name                       L  B dp tp pp cp ep b  k  n  K  S  cap    z  recompute        schedule
         bf16   sigmoid */
    { "one device, k = E",        2, 4, 1, 1, 1, 1, 1, 2, 4, 1, 0, 0, 0,     0, R(NONE),      "1f1b",
      false, false, 0, 0 },
    { "dp 2 ep 2",                2, 8, 2, 1, 1, 1, 2, 2, 4, 1, 0, 0, 0,     0, R(NONE),      "1f1b",
      false, false, 0, 0 },
    { "dp 2 ep 2 zero 2",         2, 8, 2, 1, 1, 1, 2, 2, 4, 1, 0, 0, 0,     2, R(NONE),      "1f1b",
      false, false, 0, 0 },
    { "dp 4 ep 2 zero 1",         2, 8, 4, 1, 1, 1, 2, 1, 4, 1, 0, 0, 0,     1, R(NONE),      "1f1b",
      false, false, 0, 0 },
    { "dp 2 tp 2 ep 2",           2, 8, 2, 2, 1, 1, 2, 2, 4, 1, 0, 0, 0,     0, R(NONE),      "1f1b",
      false, false, 0, 0 },
    { "dp 2 pp 2 ep 2",           4, 8, 2, 1, 2, 1, 2, 1, 4, 1, 0, 0, 0,     0, R(NONE),      "1f1b",
      false, false, 0, 0 },
    { "cp 2 ep 2",                2, 4, 1, 1, 1, 2, 2, 2, 4, 1, 0, 0, 0,     1, R(NONE),      "1f1b",
      false, false, 0, 0 },
    { "capacity, dp 2 ep 2",      2, 8, 2, 1, 1, 1, 2, 2, 2, 1, 0, 0, 0.125, 0, R(NONE),      "1f1b",
      false, false, 0, 0 },
    { "full",                     2, 8, 2, 1, 1, 1, 2, 2, 4, 1, 0, 0, 0,     0, R(FULL),      "1f1b",
      false, false, 0, 0 },
    { "selective",                2, 8, 2, 1, 1, 1, 2, 2, 4, 1, 0, 0, 0,     0, R(SELECTIVE), "1f1b",
      false, false, 0, 0 },
    /* ZB-H1's memory is a bound (plan_memory.c: every W a stage owes, d of
     * them, held beside every micro-batch in flight); the run holds d - 1
     * beside the B that makes the d-th.  A routed row's W keeps as much as
     * its activations (three layers' operands): 11% above the run here */
    { "pp 2 zb-h1 ep 2",          4, 8, 2, 1, 2, 1, 2, 1, 4, 1, 0, 0, 0,     0, R(NONE),      "zb-h1",
      false, false, 0.15, 0 },
    { "dualpipev dp 2 pp 2 ep 2", 4, 8, 2, 1, 2, 1, 2, 1, 4, 1, 0, 0, 0,     0, R(NONE),      "dualpipev",
      false, false, 0, 0 },
    { "dualpipe dp 2 pp 2 ep 2",  4, 8, 2, 1, 2, 1, 2, 1, 4, 1, 0, 1, 0,     1, R(NONE),      "dualpipe",
      false, true, 0, 0 },
    { "every 2nd, pp 2 gpipe",    4, 8, 2, 1, 2, 1, 2, 1, 4, 2, 0, 0, 0,     1, R(NONE),      "gpipe",
      false, false, 0, 0 },
    { "bf16 dp 2 ep 2 zero 1",    2, 8, 2, 1, 1, 1, 2, 2, 4, 1, 0, 0, 0,     1, R(NONE),      "1f1b",
      true,  false, 0, 0 },
    /* DeepSeek-V3's pieces: the sigmoid router and its bias, dense first blocks, shared experts */
    { "sigmoid, dp 2 ep 2",       2, 8, 2, 1, 1, 1, 2, 2, 4, 1, 0, 0, 0,     1, R(NONE),      "1f1b",
      false, true, 0, 0 },
    { "dense first 1, pp 2",      4, 8, 2, 1, 2, 1, 2, 1, 4, 1, 1, 0, 0,     1, R(NONE),      "1f1b",
      false, true, 0, 0 },
    { "shared 1, dp 2 ep 2",      2, 8, 2, 1, 1, 1, 2, 2, 4, 1, 0, 1, 0,     1, R(NONE),      "1f1b",
      false, true, 0, 0 },
    { "shared 2, tp 2 zb-h1",     4, 8, 2, 2, 2, 1, 2, 1, 4, 1, 0, 2, 0,     0, R(NONE),      "zb-h1",
      false, false, 0.15, 0 },
    { "shared 1, full, bf16",     2, 8, 2, 1, 1, 1, 2, 2, 4, 1, 1, 1, 0,     1, R(FULL),      "1f1b",
      true,  true, 0, 0 },
    /* MoE parallel folding: each TP rank routes its slice of the TP group's rows */
    { "fold: tp 2 etp 1 ep 4",    2, 8, 2, 2, 1, 1, 4, 2, 4, 1, 0, 0, 0,     0, R(NONE),      "1f1b",
      false, false, 0, 1 },
    { "fold: sigmoid shared zero 1", 2, 8, 2, 2, 1, 1, 2, 2, 4, 1, 0, 1, 0,  1, R(NONE),      "1f1b",
      false, true, 0, 1 },
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))
#undef R

/* C 64, 8 query heads of 8, 2 kv heads, F 128, T 32, V 64; E 4 experts
 * of F_e 64. */
static ptdp_plan_request request_of(const llama_moe_case *k)
{
    ptdp_model_config m = PTDP_LLAMA_CONFIG(.hidden = 64, .ffn = 128, .layers = k->layers, .heads = 8,
                                            .kv_heads = 2, .seq_len = 32, .vocab = 64);
    ptdp_moe_settings *s = &ptdp_llama(&m)->moe;
    *s = PTDP_MOE_DEFAULTS;
    s->experts = 4;
    s->ffn = 64;
    s->top_k = k->k;
    s->every = k->every;
    s->dense_first = k->dense;
    s->shared = k->shared;
    s->capacity = k->capacity;
    s->score = k->sigmoid ? PTDP_MOE_SIGMOID : PTDP_MOE_SOFTMAX;
    return plan_question(m, k->batch, k->dp * k->tp * k->pp * k->cp, NULL, k->bf16);
}

static ptdp_plan_layout layout_of(const llama_moe_case *k)
{
    ptdp_plan_layout l = plan_layout((plan_layout_fields){ .dp = k->dp, .tp = k->tp, .pp = k->pp, .cp = k->cp,
                                                           .ep = k->ep, .b = k->b, .zero = k->zero,
                                                           .recompute = k->recompute, .schedule = k->schedule },
                                     k->batch);
    l.etp = k->etp;
    return l;
}

LOOP_TEST(llama_moe_tests, test_plan_llama_moe_is_the_simulators, NCASES)
{
    const ptdp_plan_request rq = request_of(&cases[_i]);
    const ptdp_plan_layout l = layout_of(&cases[_i]);
    plan_vs_train(cases[_i].name, &rq, &l, cases[_i].tol > 0 ? cases[_i].tol : 0.05);
}
END_TEST

/* A step's model FLOPs: a dense llama's, each mixture's SwiGLU (6 C F a
 * token) replaced by its k routed and S shared experts (6 C F_e (k + S))
 * and the gate (2 C E); a capacity's dropped choices leave the model's
 * count and leave the hardware's. */
TEST(llama_moe_tests, test_step_flops_of_a_mixture)
{
    const llama_moe_case k = { "flops", 4, 8, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1, 0, 0, PTDP_RECOMPUTE_NONE, "1f1b",
                               false, true, 0, 0 };
    ptdp_plan_request rq = request_of(&k);
    const ptdp_model_plan *mp = rq.model.ops->plan;
    double dense_m, dense_h, model, hardware;
    ptdp_model_config dense = rq.model;
    ptdp_llama(&dense)->moe.experts = 0;
    mp->step_flops(&dense, 8, false, false, &dense_m, &dense_h);
    mp->step_flops(&rq.model, 8, false, false, &model, &hardware);
    const double T = 32, C = 64, F = 128, Fe = 64, E = 4;
    const double want = dense_m + 3 * 3 * 8 * T * C * (6 * Fe * (2 + 1) + 2 * E - 6 * F);   /* 3 of 4 blocks */
    ck_assert_double_eq_tol(model, want, 1e-12 * want);
    ck_assert_double_eq_tol(hardware, model, 1e-12 * model);
    ck_assert_int_eq(mp->experts(&rq.model), 4);
    ck_assert_int_eq(mp->moe_blocks(&rq.model, 0, 4), 3);
    ck_assert_int_eq(mp->moe_blocks(&rq.model, 0, 1), 0);
    ptdp_llama(&rq.model)->moe.capacity = 1e-6;   /* one slot an expert a sequence: 4 of 64 choices kept */
    mp->step_flops(&rq.model, 8, false, false, &model, &hardware);
    const double less = 3 * 3 * 8 * 6 * C * Fe * (2 * T - 4);
    ck_assert_double_eq_tol(model, want, 1e-12 * want);
    ck_assert_double_eq_tol(hardware, want - less, 1e-12 * want);
}
END_TEST

/* The search over a mixture's layouts on 8 GPUs: every ep it offers
 * divides dp x cp and E, never with ZeRO-3 or SP (the llama refuses them
 * with experts), and each lower bound stays below its step. */
TEST(llama_moe_tests, test_search_over_expert_parallelism)
{
    const llama_moe_case k = { "search", 2, 8, 1, 1, 1, 1, 1, 1, 2, 1, 0, 0, 0, 0, PTDP_RECOMPUTE_NONE, "1f1b",
                               false, false, 0, 0 };
    ptdp_plan_request rq = request_of(&k);
    rq.gpus = 8;
    int nall = 0, spread = 0;
    ptdp_plan_candidate *all = plan_search_all(&rq, &nall);
    for (int i = 0; i < nall; i++) {
        const ptdp_plan_layout *l = &all[i].layout;
        const int ep = l->ep > 1 ? l->ep : 1, slices = l->etp > 0 && l->etp < l->tp ? l->tp / l->etp : 1;
        ck_assert_msg((slices * l->dp * l->cp) % ep == 0 && 4 % ep == 0, "dp %d cp %d tp %d etp %d ep %d", l->dp,
                      l->cp, l->tp, l->etp, ep);
        ck_assert_msg(l->zero != 3 && !l->sp, "a layout the llama refuses with experts (ZeRO-3 or SP)");
        spread += ep > 1;
    }
    ck_assert_int_gt(spread, 0);
    printf("search: %d layouts, %d with ep > 1; the best: dp %d ep %d tp %d pp %d\n", nall, spread,
           all[0].layout.dp, all[0].layout.ep, all[0].layout.tp, all[0].layout.pp);
    free(all);
}
END_TEST

int main(void) { return harness_main("plan_llama_moe"); }
