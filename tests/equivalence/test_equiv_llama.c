/*
 * test_equiv_llama.c — the llama model (llama.h) trains under each
 * parallelism it runs under and equals its single-device baseline
 * (equiv_check: --check's rule, 1e-10 in double, 1e-4 in float):
 *
 *   dp, pp, dp x pp            the replicas' sums; the stage boundary
 *   ZeRO 1, 2, 3               sharded optimizer, gradients, parameters
 *                              (each block a unit gathered whole)
 *   every schedule             of the registry, on pp 2 (with chunks where
 *                              the row takes them; B and W split where it
 *                              splits them)
 *   tp (tp divides kv heads)   wq by heads, wk/wv by kv heads, w1/w3 by the
 *                              same rows of F, wo/w2 row-parallel, the
 *                              vocab-parallel embedding and head; with dp,
 *                              pp and ZeRO; recomputation full and selective
 *   tp > kv heads              a copy of the kv head a rank's query heads
 *                              read, its gradient summed over the ranks
 *                              sharing it (the TP_SHARE group)
 *   sp                         the stream and the norms split along the
 *                              sequence over TP, with the above
 *   cp                         the ring (each chunk rotated at its global
 *                              positions) and Ulysses (as far as the kv
 *                              heads allow), with tp, sp, dp, pp, ZeRO
 *   bf16 (float build)         against the bf16 baseline, within 1e-2
 *   a mixture of experts       4 SwiGLU experts (parallel/moe.c with the
 *                              llama's FFN): alone, ep 2 and 4 (each
 *                              rank E/ep experts, tokens by all-to-all,
 *                              their gradients over the expert-DP group),
 *                              ep x tp (each expert split like the dense
 *                              FFN), ep x dp with ZeRO 1/2, ZeRO 3 (no ep),
 *                              pp with a split backward (the experts' and
 *                              the gate's dW in W) and DualPipeV, capacity
 *                              drops, --moe-every 2, top-1, cp 2, full and
 *                              selective recomputation; bf16 with ep x tp;
 *                              DeepSeek-V3's sigmoid router, and its bias
 *                              moved after each step (--moe-bias-update)
 *                              under dp x tp x ep, DualPipeV, cp, ZeRO 1/2;
 *                              group-limited routing (--moe-groups)
 *
 * and refuses, naming the flag, what it does not run under yet.
 *
 * The model: C 16, 4 heads of 4, 2 kv heads, F 24, 4 layers, T 8, on the
 * plain built-in sums (V 64), rope theta 100 (a short sequence still turns).
 */
#include <stdio.h>
#include <string.h>

#include "equiv.h"
#include "ptdp/llama.h"
#include "ptdp/schedule.h"

static const harness_tcase llama_tests = { .name = "llama", .timeout_s = 300 };

static ptdp_train_config llama_config(int dp, int tp, int pp, int m)
{
    ptdp_train_config c = equiv_config(dp, tp, pp, m);
    c.model = PTDP_LLAMA_CONFIG(.hidden = 16, .ffn = 24, .layers = 4, .heads = 4, .kv_heads = 2, .seq_len = 8,
                                .vocab = 64, .rope_theta = 100.0);
    c.batch = 8;
    c.steps = 3;
    return c;
}

/* dp x tp x pp, each against one device. */
LOOP_TEST(llama_tests, test_meshes_equal_one_device, 7)
{
    static const int mesh[7][4] = { { 2, 1, 1, 1 }, { 1, 1, 2, 2 }, { 2, 1, 2, 2 }, { 1, 2, 1, 1 },
                                    { 2, 2, 1, 2 }, { 1, 2, 2, 2 }, { 2, 2, 2, 2 } };
    ptdp_train_config c = llama_config(mesh[_i][0], mesh[_i][1], mesh[_i][2], mesh[_i][3]);
    equiv_check(&c);
}
END_TEST

/* ZeRO 1, 2 and 3 on dp 2, then dp 2 x tp 2 x pp 2. */
LOOP_TEST(llama_tests, test_zero_stages_equal_one_device, 6)
{
    ptdp_train_config c = _i < 3 ? llama_config(2, 1, 1, 1) : llama_config(2, 2, 2, 2);
    c.zero = _i % 3 + 1;
    equiv_check(&c);
}
END_TEST

/* Every schedule of the registry on pp 2, 4 micro-batches: 2 chunks a
 * stage where the row takes chunks. */
LOOP_TEST(llama_tests, test_every_schedule_equals_one_device, ptdp_schedule_count())
{
    const ptdp_schedule_entry *e = ptdp_schedule_at(_i);
    ptdp_train_config c = llama_config(1, 1, 2, 4);
    c.schedule = e;
    c.virtual_stages = (e->caps & PTDP_SCHED_CHUNKS) ? 2 : 1;
    char msg[512];
    ck_assert_msg(ptdp_train_validate(&c, msg, sizeof msg) == 0, "--schedule %s: %s", e->name, msg);
    equiv_check(&c);
}
END_TEST

/* tp 4 > 2 kv heads: each rank a copy of the kv head its query heads read,
 * its gradient summed over the two ranks sharing it (TP_SHARE, mesh.h) —
 * alone, with dp and each ZeRO stage, with pp, recomputed, and with a
 * split backward (zb-h1: the copies' dW in W, summed after). */
LOOP_TEST(llama_tests, test_kv_heads_shared_over_tp_equal_one_device, 7)
{
    static const int mesh[7][5] = { { 1, 4, 1, 1, 0 }, { 2, 4, 1, 2, 0 }, { 2, 4, 1, 2, 1 }, { 2, 4, 1, 2, 2 },
                                    { 2, 4, 1, 2, 3 }, { 1, 4, 2, 2, 0 }, { 1, 4, 2, 4, 0 } };
    ptdp_train_config c = llama_config(mesh[_i][0], mesh[_i][1], mesh[_i][2], mesh[_i][3]);
    c.zero = mesh[_i][4];
    c.recompute = _i == 5;
    if (_i == 6)
        c.schedule = ptdp_schedule_first_with(PTDP_SCHED_SPLIT_BACKWARD);
    equiv_check(&c);
}
END_TEST

/* Checkpoints under Meta's names: 3 steps at tp 4 (kv heads' copies), saved,
 * loaded at tp 1 x pp 2 and trained 3 more — the 6 steps of one device
 * without stopping, to --check's tolerance (the meshes differ). */
TEST(llama_tests, test_checkpoint_moves_between_meshes)
{
    ptdp_train_config first = llama_config(1, 4, 1, 2), second = llama_config(1, 1, 2, 2);
    ptdp_train_config full = llama_config(1, 1, 1, 1);
    full.steps = 6;
    ptdp_state reference, resumed;
    ptdp_train_result rfull, rlog;
    equiv_resume_beside(&full, &first, &second, &reference, &rfull, &resumed, &rlog);
    ck_assert_int_eq(rlog.completed, 3);
    equiv_losses_agree(rlog.log, rfull.log + 3, 3, PTDP_TOLERANCE, "tp 4 saved, pp 2 loaded");
    ptdp_check_report rep;   /* (not equiv_states_agree: the rows of tokens the data never holds have an
                                honest zero in Adam's second moment) */
    ck_assert_msg(ptdp_check_states(&resumed, &reference, PTDP_TOLERANCE, &rep), "%s differs by %g", rep.worst,
                  rep.max_abs);
    ptdp_state_free(&reference);
    ptdp_state_free(&resumed);
    ptdp_train_result_free(&rfull);
    ptdp_train_result_free(&rlog);
}
END_TEST

/* Sequence parallelism: the stream and the norms on this rank's positions
 * (the norms' gradients summed over TP), each column-parallel layer's input
 * gathered, each row-parallel layer's sums reduce-scattered — at tp 2 and
 * at tp 4 over 2 kv heads, with dp and ZeRO-3, pp with a split backward,
 * and recomputed. */
LOOP_TEST(llama_tests, test_sequence_parallel_equals_one_device, 6)
{
    static const int mesh[6][5] = { { 1, 2, 1, 1, 0 }, { 1, 4, 1, 2, 0 }, { 2, 2, 1, 2, 3 }, { 1, 2, 2, 4, 0 },
                                    { 1, 2, 2, 2, 0 }, { 1, 4, 1, 1, 0 } };
    ptdp_train_config c = llama_config(mesh[_i][0], mesh[_i][1], mesh[_i][2], mesh[_i][3]);
    c.zero = mesh[_i][4];
    c.sp = true;
    if (_i == 3)
        c.schedule = ptdp_schedule_first_with(PTDP_SCHED_SPLIT_BACKWARD);
    c.recompute = _i == 4;
    c.recompute_core = _i == 5;
    equiv_check(&c);
}
END_TEST

/* Context parallelism by the ring: zigzag (each rank's two chunks rotated
 * at their global positions) and contiguous, cp 4, with tp and SP, with
 * one kv head (multi-query: only it travels), with dp, pp, ZeRO and
 * selective recomputation (the ring keeps its log-sum-exps). */
LOOP_TEST(llama_tests, test_context_parallel_equals_one_device, 6)
{
    static const int mesh[6][4] = { { 1, 1, 1, 1 }, { 1, 1, 1, 1 }, { 1, 1, 1, 1 }, { 1, 2, 1, 2 },
                                    { 1, 1, 1, 1 }, { 2, 1, 2, 2 } };
    ptdp_train_config c = llama_config(mesh[_i][0], mesh[_i][1], mesh[_i][2], mesh[_i][3]);
    c.cp = _i == 2 ? 4 : 2;
    c.cp_contiguous = _i == 1;
    c.sp = _i == 3;
    if (_i == 4)
        ptdp_llama_settings_of(&c.model)->kv_heads = 1;
    c.zero = _i == 5 ? 1 : 0;
    c.recompute_core = _i == 5;
    equiv_check(&c);
}
END_TEST

/* Context parallelism by Ulysses' all-to-alls: each CP rank whole
 * sequences of its query heads and of the kv heads they read — zigzag and
 * contiguous, cp 4 over 4 kv heads, tp 2 x cp 2 with SP, dp x pp with
 * ZeRO and selective recomputation (the probabilities again, on whole
 * sequences), full recomputation. */
LOOP_TEST(llama_tests, test_ulysses_equals_one_device, 5)
{
    static const int mesh[5][4] = { { 1, 1, 1, 1 }, { 1, 1, 1, 1 }, { 1, 2, 1, 2 }, { 2, 1, 2, 2 },
                                    { 1, 1, 2, 2 } };
    ptdp_train_config c = llama_config(mesh[_i][0], mesh[_i][1], mesh[_i][2], mesh[_i][3]);
    c.cp = _i == 1 ? 4 : 2;
    c.cp_a2a = true;
    c.cp_contiguous = _i == 0;
    if (_i == 1 || _i == 2)   /* 4 kv heads: cp 4, or 2 a TP rank over cp 2 */
        ptdp_llama_settings_of(&c.model)->kv_heads = 4;
    c.sp = _i == 2;
    c.zero = _i == 3 ? 2 : 0;
    c.recompute_core = _i == 3;
    c.recompute = _i == 4;
    equiv_check(&c);
}
END_TEST

/* Recomputation, full and selective, under tp 2 x pp 2. */
LOOP_TEST(llama_tests, test_recompute_equals_one_device, 2)
{
    ptdp_train_config c = llama_config(1, 2, 2, 2);
    c.recompute = _i == 0;
    c.recompute_core = _i == 1;
    equiv_check(&c);
}
END_TEST

/* ------------------------------------------------- a mixture of experts */

typedef struct {
    int dp, tp, pp, m, ep, cp, zero, every, top_k;
    double capacity;
    bool split, dualpipev, recompute, selective;
    bool sigmoid;           /* DeepSeek-V3's router, route scale 2.5        */
    double bias_update;     /* its loss-free balance's step u (sigmoid)     */
    int groups, group_top_k;   /* group-limited routing (0: none)          */
} moe_case;

static const moe_case moe_cases[] = {
    { .m = 1 },
    { .dp = 2, .m = 1, .ep = 2 },
    { .dp = 4, .m = 2, .ep = 4 },
    { .dp = 2, .tp = 2, .m = 2, .ep = 2 },
    { .dp = 4, .tp = 2, .m = 1, .ep = 2, .zero = 1 },
    { .dp = 4, .m = 2, .ep = 2, .zero = 2 },
    { .dp = 2, .m = 2, .zero = 3 },
    { .dp = 2, .tp = 2, .pp = 2, .m = 2, .zero = 3, .every = 2 },
    { .dp = 2, .pp = 2, .m = 4, .ep = 2, .split = true },
    { .dp = 2, .pp = 2, .m = 4, .ep = 2, .dualpipev = true },
    { .dp = 2, .m = 1, .ep = 2, .capacity = 1.0 },
    { .dp = 2, .pp = 2, .m = 2, .capacity = 0.5, .top_k = 1, .every = 2 },
    { .dp = 2, .cp = 2, .m = 1, .ep = 2 },
    { .dp = 2, .tp = 2, .pp = 2, .m = 2, .ep = 2, .recompute = true, .capacity = 1.25 },
    { .dp = 2, .m = 1, .ep = 2, .selective = true },
    { .dp = 2, .tp = 2, .m = 2, .ep = 2, .sigmoid = true },
    { .dp = 2, .pp = 2, .m = 4, .ep = 2, .dualpipev = true, .sigmoid = true },
    { .dp = 2, .m = 2, .zero = 3, .sigmoid = true },
    { .dp = 2, .cp = 2, .m = 1, .ep = 2, .sigmoid = true, .capacity = 0 },
    { .dp = 2, .pp = 2, .m = 2, .capacity = 0.5, .top_k = 1, .every = 2, .sigmoid = true },
    /* the bias moved after each step by the loads summed over dp x cp */
    { .dp = 2, .tp = 2, .m = 2, .ep = 2, .sigmoid = true, .bias_update = 0.01 },
    { .dp = 2, .pp = 2, .m = 4, .ep = 2, .dualpipev = true, .sigmoid = true, .bias_update = 0.01 },
    { .dp = 2, .cp = 2, .m = 1, .ep = 2, .sigmoid = true, .bias_update = 0.01 },
    { .dp = 4, .m = 2, .ep = 2, .zero = 2, .sigmoid = true, .bias_update = 0.01, .capacity = 1.0 },
    { .dp = 2, .pp = 2, .m = 2, .zero = 1, .recompute = true, .every = 2, .sigmoid = true, .bias_update = 0.01 },
    /* group-limited routing: 2 groups of 2, a token's top 2 from its best group */
    { .dp = 2, .tp = 2, .m = 2, .ep = 2, .sigmoid = true, .bias_update = 0.01, .groups = 2, .group_top_k = 1 },
    { .dp = 2, .pp = 2, .m = 2, .zero = 2, .groups = 2, .group_top_k = 1 },
    { .dp = 2, .cp = 2, .m = 1, .ep = 2, .sigmoid = true, .groups = 2, .group_top_k = 1, .top_k = 1 },
};

/* The llama above, each block's FFN 4 SwiGLU experts of width 24. */
static ptdp_train_config moe_config(const moe_case *k)
{
    ptdp_train_config c = llama_config(k->dp > 0 ? k->dp : 1, k->tp > 0 ? k->tp : 1, k->pp > 0 ? k->pp : 1, k->m);
    ptdp_moe_settings *s = &ptdp_llama_settings_of(&c.model)->moe;
    *s = (ptdp_moe_settings){ .experts = 4, .every = k->every > 0 ? k->every : 1, .ffn = 24,
                              .top_k = k->top_k > 0 ? k->top_k : 2, .capacity = k->capacity,
                              .aux_loss = 0.05,     /* large enough to move the router */
                              .score = k->sigmoid ? PTDP_MOE_SIGMOID : PTDP_MOE_SOFTMAX,
                              .route_scale = k->sigmoid ? 2.5 : 0, .bias_update = k->bias_update,
                              .groups = k->groups, .group_top_k = k->group_top_k };
    c.batch = 16;
    c.ep = k->ep;
    c.cp = k->cp;
    c.zero = k->zero;
    c.recompute = k->recompute;
    c.recompute_core = k->selective;
    c.verify_replicas = k->dp > 1;
    if (k->split)
        c.schedule = ptdp_schedule_first_with(PTDP_SCHED_SPLIT_BACKWARD);
    if (k->dualpipev)   /* its V holds two chunks a device: no --virtual-stages (the schedule registry's rule) */
        c.schedule = ptdp_schedule_find("dualpipev");
    return c;
}

LOOP_TEST(llama_tests, test_mixture_of_experts_equals_one_device, (int)(sizeof moe_cases / sizeof moe_cases[0]))
{
    ptdp_train_config c = moe_config(&moe_cases[_i]);
    char msg[512];
    ck_assert_msg(ptdp_train_validate(&c, msg, sizeof msg) == 0, "case %d: %s", _i, msg);
    equiv_check(&c);
}
END_TEST

/* What a mixture does not run under yet, and its bad layouts: refused
 * before any work, naming the flags. */
TEST(llama_tests, test_mixture_refusals_name_the_flags)
{
    static const struct { moe_case k; bool sp; int experts; const char *say; } no[] = {
        { { .dp = 2, .tp = 2, .m = 1 }, .sp = true, .experts = 4, .say = "--moe-experts 4 with --sp" },
        { { .dp = 2, .m = 1, .ep = 2, .zero = 3 }, .experts = 4, .say = "--ep 2 and --zero 3" },
        { { .cp = 2, .m = 1, .capacity = 1.0 }, .experts = 4, .say = "--cp and --moe-capacity-factor" },
        { { .dp = 4, .m = 1, .ep = 4 }, .experts = 6, .say = "--moe-experts 6 must divide by --ep 4" },
        { { .dp = 2, .m = 1, .ep = 2 }, .experts = 0, .say = "this llama model is dense" },
        { { .tp = 4, .m = 1 }, .experts = 4, .say = "--moe-ffn 30 must divide by --tp 4" },
        { { .dp = 2, .m = 1, .zero = 3, .sigmoid = true, .bias_update = 0.01 }, .experts = 4,
          .say = "--moe-bias-update 0.01 with --zero 3" },
        { { .dp = 2, .m = 1, .bias_update = 0.01 }, .experts = 4, .say = "--moe-bias-update 0.01 moves" },
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        ptdp_train_config c = moe_config(&no[i].k);
        ptdp_moe_settings *s = &ptdp_llama_settings_of(&c.model)->moe;
        s->experts = no[i].experts;
        s->ffn = i == 5 ? 30 : s->ffn;
        c.sp = no[i].sp;
        equiv_refused(&c, no[i].say);
    }
}
END_TEST

#ifndef PTDP_DOUBLE
/* --precision bf16 (float build: ptdp-f64 refuses bf16): each mesh against
 * the bf16 baseline, every loss and every final parameter within
 * PTDP_TOLERANCE_BF16, as --check allows (AdamW at lr 1e-3); the last a
 * mixture of experts at ep 2 x tp 2 (the gate in float, the experts' rows
 * rounded where made). */
LOOP_TEST(llama_tests, test_bf16_equals_bf16_baseline, 4)
{
    static const int mesh[4][5] = { { 2, 1, 1, 1, 0 }, { 2, 2, 1, 2, 3 }, { 1, 2, 2, 4, 1 }, { 2, 2, 1, 2, 1 } };
    ptdp_train_config c = llama_config(mesh[_i][0], mesh[_i][1], mesh[_i][2], mesh[_i][3]);
    if (_i == 3)
        c = moe_config(&(moe_case){ .dp = 2, .tp = 2, .m = 2, .ep = 2 });
    c.zero = mesh[_i][4];
    c.bf16 = true;
    c.lr = 1e-3;
    c.recompute_core = _i == 2;
    const ptdp_train_config b = equiv_baseline(&c);
    ptdp_state fs, fb;
    ptdp_train_result rs, rb;
    equiv_train(&c, NULL, &fs, &rs);
    equiv_train(&b, NULL, &fb, &rb);
    for (int i = 0; i < c.steps; i++)
        ck_assert_msg(ptdp_check_value(rs.log[i].loss, rb.log[i].loss, PTDP_TOLERANCE_BF16), "mesh %d step %d: %.9g "
                      "vs %.9g", _i, i + 1, rs.log[i].loss, rb.log[i].loss);
    ck_assert(rb.log[0].loss != rb.log[c.steps - 1].loss);
    ptdp_check_report rep;
    ck_assert_msg(ptdp_check_states(&fs, &fb, PTDP_TOLERANCE_BF16, &rep), "mesh %d: %s differs by %g", _i,
                  rep.worst, rep.max_abs);
    ptdp_state_free(&fs);
    ptdp_state_free(&fb);
    ptdp_train_result_free(&rs);
    ptdp_train_result_free(&rb);
}
END_TEST
#endif

/* What it does not run under yet: refused before any work, naming the flag. */
TEST(llama_tests, test_what_it_does_not_run_under_is_refused)
{
    char msg[512];
    ptdp_train_config c = llama_config(1, 1, 1, 1);
    c.cp = 4;   /* Ulysses over 4 ranks, 2 kv heads: capped by the kv heads */
    c.cp_a2a = true;
    ck_assert_int_eq(ptdp_train_validate(&c, msg, sizeof msg), PTDP_EINVAL);
    ck_assert_msg(strstr(msg, "--cp-algo a2a with --cp 4") && strstr(msg, "capped by the kv heads"), "%s", msg);
    c = llama_config(1, 2, 1, 1);   /* tp 2 over 1 kv head: one shared copy, which no CP rank can split */
    ptdp_llama_settings_of(&c.model)->kv_heads = 1;
    c.cp = 2;
    c.cp_a2a = true;
    ck_assert_int_eq(ptdp_train_validate(&c, msg, sizeof msg), PTDP_EINVAL);
    ck_assert_msg(strstr(msg, "one shared copy") && strstr(msg, "--cp-algo ring"), "%s", msg);
    c = llama_config(1, 3, 1, 1);   /* tp 3: neither divides nor is divided by 2 kv heads */
    ck_assert_int_eq(ptdp_train_validate(&c, msg, sizeof msg), PTDP_EINVAL);
    ck_assert_msg(strstr(msg, "--tp 3 must divide --kv-heads 2"), "%s", msg);
    c = llama_config(2, 1, 1, 1);   /* a dense llama has no experts to spread */
    c.ep = 2;
    ck_assert_int_eq(ptdp_train_validate(&c, msg, sizeof msg), PTDP_EINVAL);
    ck_assert_msg(strstr(msg, "--ep 2") && strstr(msg, "llama model is dense"), "%s", msg);
}
END_TEST

int main(void)
{
    return harness_main("equivalence-llama");
}
