/*
 * test_equiv_moe.c — a GPT whose MLPs are mixtures of experts trains like
 * one device on every layout it runs on.
 *
 * Tokens are local: each device routes its own sequences, and the capacity
 * and the balance loss are per sequence, so splitting the batch over DP or
 * the blocks over PP changes no choice, no drop and no statistic.  Each row
 * is one layout against the single-device baseline by --check's rule (1e-10
 * in double, 1e-4 in float), on the equivalence suites' small GPT with 4
 * experts:
 *
 *   layout             what it proves
 *   dp 2, dp 4         each rank's tokens routed alone; expert gradients
 *                      summed over DP like any other
 *   pp 2 (both         MoE blocks on every stage; each stage's balance
 *     schedules), zb   loss added in its own backward
 *   ZeRO 1, 2          expert and router states sharded like the others
 *   recompute          full and selective: the routing done again is the same
 *   dropout            the residual's masks around the mixture
 *   capacity 0.5, 1    drops in position order, per sequence
 *   --moe-every 2      MoE and dense blocks mixed
 *   top-k 1, 2         Switch's and Mixtral's routing
 *   tp 2               each expert split like the dense MLP, its partial
 *                      outputs and input gradients summed over TP where
 *                      the experts ran
 *   cp 2               each sequence's balance statistics summed over the
 *                      CP group (ring and Ulysses)
 *   ep 2, ep 4         expert parallelism: each EP rank holds E/ep experts,
 *                      tokens dispatched and combined by all-to-all, expert
 *                      gradients summed over the expert-DP group (with pp,
 *                      ZeRO 1/2, recompute, capacity, zb-h1; --overlap's
 *                      buckets, each over its own group)
 *   sigmoid            DeepSeek-V3's router; with --moe-bias-update its
 *                      bias moved after each step from the loads summed
 *                      over dp x cp: every replica the baseline's bias
 *   groups 2           group-limited routing: a token's top k from the
 *                      experts of its best group
 *
 * And the layouts it does not run on yet are refused before any work.
 */
#include "equiv.h"
#include "ptdp/gpt.h"

#include <string.h>

static const harness_tcase moe_tests = { .name = "moe", .timeout_s = 120 };

typedef struct {
    int dp, pp, m, zero, top_k, every, ep, tp, cp;
    bool a2a;
    const char *schedule;
    double capacity, dropout;
    bool recompute, selective, overlap;
    bool sigmoid;           /* DeepSeek-V3's router, route scale 2.5        */
    double bias_update;     /* its loss-free balance's step u (sigmoid)     */
    int groups, group_top_k;   /* group-limited routing (0: none)          */
} moe_case;

static const moe_case cases[] = {
    { .dp = 2, .m = 1 },
    { .dp = 4, .m = 1, .top_k = 1 },
    { .pp = 2, .m = 2 },
    { .pp = 2, .m = 4, .schedule = "gpipe", .every = 2 },
    { .pp = 2, .m = 4, .schedule = "zb-h1" },
    { .dp = 2, .m = 2, .zero = 1 },
    { .dp = 2, .m = 1, .zero = 2, .dropout = 0.1 },
    { .dp = 2, .pp = 2, .m = 2, .recompute = true },
    { .dp = 2, .m = 1, .selective = true },
    { .dp = 2, .m = 1, .capacity = 0.5 },
    { .dp = 2, .pp = 2, .m = 2, .capacity = 1.0, .top_k = 1 },
    { .dp = 2, .m = 2, .every = 2, .capacity = 1.25 },
    { .dp = 2, .m = 1, .ep = 2 },
    { .dp = 4, .m = 2, .ep = 2, .zero = 1, .overlap = true },
    { .dp = 4, .m = 2, .ep = 4, .zero = 2, .dropout = 0.1, .top_k = 1 },
    { .dp = 2, .pp = 2, .m = 2, .ep = 2, .recompute = true },
    { .dp = 2, .pp = 2, .m = 4, .ep = 2, .schedule = "zb-h1", .capacity = 1.0 },
    { .dp = 4, .m = 1, .ep = 2, .every = 2, .selective = true, .capacity = 0.5 },
    { .tp = 2, .m = 1 },
    { .dp = 2, .tp = 2, .m = 2, .ep = 2, .zero = 1 },
    { .dp = 2, .tp = 2, .pp = 2, .m = 2, .ep = 2, .recompute = true, .capacity = 1.0 },
    { .cp = 2, .m = 1 },
    { .dp = 2, .cp = 2, .m = 1, .ep = 4, .zero = 2 },
    { .cp = 2, .pp = 2, .m = 2, .ep = 2, .a2a = true, .recompute = true },
    { .dp = 2, .m = 1, .sigmoid = true },
    { .tp = 2, .m = 1, .sigmoid = true },
    { .dp = 2, .m = 2, .ep = 2, .capacity = 1.0, .sigmoid = true },
    { .pp = 2, .m = 2, .sigmoid = true, .recompute = true },
    { .dp = 2, .tp = 2, .m = 2, .ep = 2, .zero = 1, .sigmoid = true },
    { .dp = 2, .cp = 2, .m = 1, .ep = 4, .zero = 2, .sigmoid = true },
    { .dp = 2, .m = 2, .sigmoid = true, .bias_update = 0.01 },
    { .tp = 2, .pp = 2, .m = 2, .sigmoid = true, .bias_update = 0.01, .recompute = true },
    { .dp = 2, .tp = 2, .m = 2, .ep = 2, .zero = 1, .sigmoid = true, .bias_update = 0.01 },
    { .dp = 2, .cp = 2, .m = 1, .ep = 4, .zero = 2, .sigmoid = true, .bias_update = 0.01 },
    { .pp = 2, .m = 4, .schedule = "zb-h1", .sigmoid = true, .bias_update = 0.01, .capacity = 1.0 },
    { .dp = 2, .tp = 2, .m = 2, .ep = 2, .groups = 2, .group_top_k = 1 },
    { .dp = 2, .cp = 2, .m = 1, .ep = 2, .zero = 1, .sigmoid = true, .bias_update = 0.01, .groups = 2,
      .group_top_k = 1 },
};

/* The small GPT with 4 experts of width 24 in the blocks k names. */
static ptdp_train_config moe_config(const moe_case *k)
{
    const int dp = k->dp > 0 ? k->dp : 1, pp = k->pp > 0 ? k->pp : 1;
    ptdp_train_config c = equiv_config(dp, k->tp > 0 ? k->tp : 1, pp, k->m);
    c.model = equiv_small_gpt(1);
    ptdp_gpt_settings *g = ptdp_gpt(&c.model);
    g->moe_experts = 4;
    g->moe_every = k->every > 0 ? k->every : 1;
    g->moe_ffn = 24;
    g->moe_top_k = k->top_k > 0 ? k->top_k : 2;
    g->moe_capacity = k->capacity;
    g->moe_aux_loss = 0.05;                   /* large enough to move the router */
    g->moe_score = k->sigmoid ? PTDP_MOE_SIGMOID : PTDP_MOE_SOFTMAX;
    g->moe_route_scale = k->sigmoid ? 2.5 : 0;
    g->moe_bias_update = k->bias_update;
    g->moe_groups = k->groups;
    g->moe_group_top_k = k->group_top_k;
    c.batch = 16;
    c.steps = 3;
    c.weight_decay = 0.1;
    c.zero = k->zero;
    c.schedule = ptdp_schedule_find(k->schedule);
    c.dropout = k->dropout;
    c.recompute = k->recompute;
    c.recompute_core = k->selective;
    c.verify_replicas = dp > 1;
    c.ep = k->ep;
    c.overlap = k->overlap;
    c.cp = k->cp;
    c.cp_a2a = k->a2a;
    return c;
}

LOOP_TEST(moe_tests, test_moe_layout_equals_baseline, (int)(sizeof cases / sizeof cases[0]))
{
    ptdp_train_config c = moe_config(&cases[_i]);
    equiv_check(&c);
}
END_TEST

/* What a mixture of experts does not run on yet: refused by name. */
TEST(moe_tests, test_unsupported_layouts_are_refused)
{
    static const struct { int tp, cp, zero, slices; bool sp; double capacity; const char *flag; } no[] = {
        { .cp = 2, .capacity = 1.0, .flag = "--cp and --moe-capacity-factor" },
        { .tp = 2, .sp = true, .flag = "--sp" },
        { .zero = 3, .flag = "--zero 3" },
        { .slices = 2, .flag = "--token-slices" },
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        moe_case k = { .dp = 2, .m = 1 };
        ptdp_train_config c = moe_config(&k);
        c.tp = no[i].tp > 0 ? no[i].tp : 1;
        c.cp = no[i].cp > 0 ? no[i].cp : 1;
        c.zero = no[i].zero;
        c.token_slices = no[i].slices;
        c.sp = no[i].sp;
        ptdp_gpt(&c.model)->moe_capacity = no[i].capacity;
        if (no[i].slices > 0) {
            c.schedule = ptdp_schedule_find("gpipe");
            c.pp = 2;
            c.micro_batches = 2;
        }
        char msg[512] = "";
        ck_assert_int_eq(ptdp_train_validate(&c, msg, sizeof msg), PTDP_EINVAL);
        ck_assert_msg(strstr(msg, no[i].flag) != NULL && strstr(msg, "--moe-experts") != NULL,
                      "case %zu: '%s' names neither %s nor --moe-experts", i, msg, no[i].flag);
    }
}
END_TEST

/* Expert parallelism's own refusals, before any work, naming the flags. */
TEST(moe_tests, test_bad_expert_parallel_layouts_are_refused)
{
    static const struct { int dp, ep, experts, zero; bool overlap, mlp; const char *say; } no[] = {
        { .dp = 3, .ep = 2, .experts = 4, .say = "--ep 2 must divide --dp x --cp = 3" },
        { .dp = 4, .ep = 4, .experts = 6, .say = "--moe-experts 6 must divide by --ep 4" },
        { .dp = 2, .ep = 2, .experts = 0, .say = "give --moe-experts" },
        { .dp = 2, .ep = 2, .experts = 4, .overlap = true, .zero = 2, .say = "--overlap with --ep 2 and --zero 2" },
        { .dp = 2, .ep = 2, .mlp = true, .say = "--model mlp has no experts" },
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        moe_case k = { .dp = no[i].dp, .m = 1, .ep = no[i].ep };
        ptdp_train_config c = moe_config(&k);
        c.batch = 12 * no[i].dp;
        ptdp_gpt(&c.model)->moe_experts = no[i].experts;
        ptdp_gpt(&c.model)->moe_top_k = no[i].experts > 0 ? 2 : 1;
        c.overlap = no[i].overlap;
        c.zero = no[i].zero;
        if (no[i].mlp)
            c.model = equiv_config(no[i].dp, 1, 1, 1).model;
        equiv_refused(&c, no[i].say);
    }
}
END_TEST

int main(void)
{
    return harness_main("equivalence-moe");
}
