/*
 * test_plan_llama.c — the planner's memory and step time of a llama
 * against what `ptdp train` measures on the same layout.
 *
 * For each layout below, ptdp_plan_memory_of and ptdp_plan_time_of
 * predict the busiest device's peak and the step; ptdp_train runs the
 * layout (ptdp_plan_train_config) for two steps on a tiny llama (8 query
 * heads, 2 kv heads: grouped K and V, SwiGLU, RMSNorm, an untied head),
 * and the arena's largest peak and the second step's virtual time must be
 * the plan's within 5% (plan_vs_train.h):
 *
 *     |plan - measured| / measured <= 0.05
 *
 * The layouts cover what the llama's planning table says differently
 * from the GPT's: TP by kv heads (tp 2 = K) and over them (tp 4, 8 > K:
 * a copy of one kv head a rank, its gradient summed over the ranks that
 * share it), SP (five column-parallel layers each gathering its input),
 * CP's ring of grouped K and V (zigzag: every rank the same work), its
 * untied head across the pipeline (no embedding group), ZeRO 1, 2 and 3
 * (a block widened whole under bf16: no subunits), bf16 (activations in
 * float), selective and full recomputation, and every schedule — on the
 * textbook profile, on a cluster's GEMM curve and on two nodes.  And the
 * search: every layout it offers is one the llama runs (tp by its rule),
 * its bound below every step.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "plan_vs_train.h"
#include "ptdp/llama.h"
#include "ptdp/model_plan.h"
#include "ptdp/plan.h"
#include "ptdp/plan_search.h"
#include "ptdp/train.h"
#include "ptdp/error.h"

static const harness_tcase llama_tests = { .name = "plan_llama", .timeout_s = 240 };

typedef struct {
    const char *name;
    int layers, batch;
    int dp, tp, pp, cp, b, v;
    int zero;
    ptdp_recompute recompute;
    const char *schedule;
    const char *profile;
    bool sp, overlap, bf16;
} llama_case;

#define R(how) PTDP_RECOMPUTE_##how
static const llama_case cases[] = {
    /* name                      L  B dp tp pp cp b  v  z  recompute      schedule       profile
         sp     overlap bf16 */
    { "one device",              2, 4, 1, 1, 1, 1, 2, 1, 0, R(NONE),      "1f1b",        NULL,
      false, false, false },
    { "dp 2",                    2, 8, 2, 1, 1, 1, 2, 1, 0, R(NONE),      "1f1b",        NULL,
      false, false, false },
    { "dp 2 overlap",            2, 8, 2, 1, 1, 1, 2, 1, 0, R(NONE),      "1f1b",        NULL,
      false, true,  false },
    { "tp 2 = kv heads",         2, 4, 1, 2, 1, 1, 2, 1, 0, R(NONE),      "1f1b",        NULL,
      false, false, false },
    { "tp 4 > kv heads",         2, 4, 1, 4, 1, 1, 2, 1, 0, R(NONE),      "1f1b",        NULL,
      false, false, false },
    { "tp 4 > kv, dp 2 zero 1",  2, 8, 2, 4, 1, 1, 2, 1, 1, R(NONE),      "1f1b",        NULL,
      false, false, false },
    { "tp 8 > kv, sp",           2, 4, 1, 8, 1, 1, 2, 1, 0, R(NONE),      "1f1b",        NULL,
      true,  false, false },
    { "tp 2 sp",                 2, 4, 1, 2, 1, 1, 2, 1, 0, R(NONE),      "1f1b",        NULL,
      true,  false, false },
    { "tp 2 sp overlap",         2, 4, 1, 2, 1, 1, 2, 1, 0, R(NONE),      "1f1b",        NULL,
      true,  true,  false },
    { "cp 2 ring",               2, 4, 1, 1, 1, 2, 2, 1, 0, R(NONE),      "1f1b",        NULL,
      false, false, false },
    { "cp 4 ring selective",     2, 4, 1, 1, 1, 4, 2, 1, 0, R(SELECTIVE), "1f1b",        NULL,
      false, false, false },
    { "cp 2 tp 4 > kv",          2, 4, 1, 4, 1, 2, 2, 1, 0, R(NONE),      "1f1b",        NULL,
      false, false, false },
    { "cp 2 tp 2 sp",            2, 4, 1, 2, 1, 2, 2, 1, 0, R(NONE),      "1f1b",        NULL,
      true,  false, false },
    { "pp 2 1f1b",               4, 8, 1, 1, 2, 1, 1, 1, 0, R(NONE),      "1f1b",        NULL,
      false, false, false },
    { "pp 4 gpipe",              4, 8, 1, 1, 4, 1, 1, 1, 0, R(NONE),      "gpipe",       NULL,
      false, false, false },
    { "pp 2 interleaved v 2",    4, 8, 1, 1, 2, 1, 1, 2, 0, R(NONE),      "interleaved", NULL,
      false, false, false },
    { "pp 4 zb-h1",              4, 8, 1, 1, 4, 1, 1, 1, 0, R(NONE),      "zb-h1",       NULL,
      false, false, false },
    { "dp 2 zero 2",             2, 8, 2, 1, 1, 1, 2, 1, 2, R(NONE),      "1f1b",        NULL,
      false, false, false },
    { "dp 2 zero 3",             2, 8, 2, 1, 1, 1, 2, 1, 3, R(NONE),      "1f1b",        NULL,
      false, false, false },
    { "dp 2 zero 3 overlap",     2, 8, 2, 1, 1, 1, 2, 1, 3, R(NONE),      "1f1b",        NULL,
      false, true,  false },
    { "dp 2 x cp 2 zero 2",      2, 8, 2, 1, 1, 2, 2, 1, 2, R(NONE),      "1f1b",        NULL,
      false, false, false },
    { "selective",               2, 4, 1, 1, 1, 1, 4, 1, 0, R(SELECTIVE), "1f1b",        NULL,
      false, false, false },
    { "full, pp 2",              4, 8, 1, 1, 2, 1, 2, 1, 0, R(FULL),      "1f1b",        NULL,
      false, false, false },
    { "full, tp 2 sp",           2, 4, 1, 2, 1, 1, 2, 1, 0, R(FULL),      "1f1b",        NULL,
      true,  false, false },
    { "bf16",                    2, 4, 1, 1, 1, 1, 2, 1, 0, R(NONE),      "1f1b",        NULL,
      false, false, true  },
    { "bf16 dp 2 zero 1 tp 2",   2, 8, 2, 2, 1, 1, 2, 1, 1, R(NONE),      "1f1b",        NULL,
      false, false, true  },
    { "bf16 dp 2 zero 3",        2, 8, 2, 1, 1, 1, 2, 1, 3, R(NONE),      "1f1b",        NULL,
      false, false, true  },
    { "bf16 pp 2 full",          4, 8, 1, 1, 2, 1, 2, 1, 0, R(FULL),      "1f1b",        NULL,
      false, false, true  },
    { "3d: dp 2 tp 2 pp 2 sp",   4, 8, 2, 2, 2, 1, 1, 1, 1, R(SELECTIVE), "1f1b",        NULL,
      true,  false, false },
    { "dgx-h100: tp 8 sp pp 2",  4, 8, 1, 8, 2, 1, 1, 1, 0, R(NONE),      "1f1b",        "dgx-h100",
      true,  false, true  },
    { "dgx-h100: dp 2 x tp 8",   2, 8, 2, 8, 1, 1, 2, 1, 1, R(NONE),      "1f1b",        "dgx-h100",
      false, false, true  },
    { "laptop-cpu: cp 2 pp 2",   4, 8, 1, 1, 2, 2, 1, 1, 0, R(FULL),      "gpipe",       "laptop-cpu",
      false, false, false },
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))
#undef R

/* C 64, 8 query heads of 8, 2 kv heads, F 128, T 32, V 64. */
static ptdp_plan_request request_of(const llama_case *k)
{
    return plan_question(PTDP_LLAMA_CONFIG(.hidden = 64, .ffn = 128, .layers = k->layers, .heads = 8, .kv_heads = 2,
                                           .seq_len = 32, .vocab = 64),
                         k->batch, k->dp * k->tp * k->pp * k->cp, k->profile, k->bf16);
}

static ptdp_plan_layout layout_of(const llama_case *k)
{
    return plan_layout((plan_layout_fields){ .dp = k->dp, .tp = k->tp, .pp = k->pp, .cp = k->cp, .b = k->b, .v = k->v,
                                              .zero = k->zero, .recompute = k->recompute, .schedule = k->schedule,
                                              .sp = k->sp, .overlap = k->overlap },
                       k->batch);
}

LOOP_TEST(llama_tests, test_plan_llama_is_the_simulators, NCASES)
{
    plan_row_vs_train(cases[_i].name, request_of(&cases[_i]), layout_of(&cases[_i]));
}
END_TEST

/* The search over a llama's layouts on 8 GPUs: every tp it offers splits
 * the heads as the llama does (tp | K, or K | tp and tp | H), some go
 * past the kv heads, and the lower bound of each step stays below it. */
TEST(llama_tests, test_search_over_the_llamas_layouts)
{
    const llama_case k = { "search", 2, 8, 1, 1, 1, 1, 1, 1, 0, PTDP_RECOMPUTE_NONE, "1f1b", NULL, false, false,
                           false };
    ptdp_plan_request rq = request_of(&k);
    rq.gpus = 8;
    int nall = 0, past_kv = 0;
    ptdp_plan_candidate *all = plan_search_all(&rq, &nall);
    for (int i = 0; i < nall; i++) {
        const ptdp_plan_layout *l = &all[i].layout;
        ck_assert_msg(2 % l->tp == 0 || (l->tp % 2 == 0 && 8 % l->tp == 0), "tp %d", l->tp);
        past_kv += l->tp > 2;
    }
    ck_assert_int_gt(past_kv, 0);
    printf("search: %d layouts, %d with tp > kv heads; the best: dp %d tp %d pp %d cp %d\n", nall, past_kv,
           all[0].layout.dp, all[0].layout.tp, all[0].layout.pp, all[0].layout.cp);
    free(all);
}
END_TEST

/* What the llama's table says of Llama 3 405B on 16 GPUs (tp 8 pp 2): its
 * parameters (2 V C + L (2 C² + 2 C K d + 3 C F + 2 C) + C, by the planner's
 * units summed over the mesh), the ring's K and V a CP rank passes (K d /
 * tp wide, or d when tp > K), and a step's model FLOPs by formula. */
TEST(llama_tests, test_the_table_at_llama_3_405b)
{
    ptdp_plan_request rq = ptdp_plan_request_defaults();
    rq.model = PTDP_LLAMA_CONFIG(.hidden = 16384, .ffn = 53248, .layers = 126, .heads = 128, .kv_heads = 8,
                                 .seq_len = 8192, .vocab = 128256);
    const ptdp_model_plan *mp = rq.model.ops->plan;
    ptdp_plan_params p;
    mp->params(&rq.model, 8, false, &p);
    double block = 0, ends = 0;
    for (int j = 0; j < p.block.n; j++)
        block += p.block.size[j];
    for (int j = 0; j < p.embed.n; j++)
        ends += p.embed.size[j];
    for (int j = 0; j < p.head.n; j++)
        ends += p.head.size[j];
    const double C = 16384, F = 53248, V = 128256, Kd = 8 * 128;
    const double whole = 2 * V * C + 126 * (2 * C * C + 2 * C * Kd + 3 * C * F + 2 * C) + C;
    /* the norms are replicated over TP: counted once, the shards tp times */
    const double planned = 8 * (126 * block + ends) - 7 * (126 * 2 * C + C);
    ck_assert_msg(fabs(planned - whole) < 0.5, "the table's tensors add up to %.0f, the model has %.0f", planned,
                  whole);
    ck_assert(!p.tied && p.share_block == 0);
    ptdp_plan_dims d8, d16;
    mp->dims(&rq.model, 1, 8, true, 16, &d8);
    mp->dims(&rq.model, 1, 16, true, 16, &d16);
    ck_assert_double_eq(d8.KVl, 128);    /* K d / tp = 8 x 128 / 8 */
    ck_assert_double_eq(d16.KVl, 128);   /* tp 16 > K: one kv head, d wide */
    mp->params(&rq.model, 16, false, &p);
    ck_assert_int_eq(p.share_block, 2);   /* wk and wv, a copy each two ranks */
    double model, hardware;
    mp->step_flops(&rq.model, 1, true, false, &model, &hardware);
    const double T = 8192, fwd = T * (126 * (4 * C * C + 4 * C * Kd + 6 * C * F + 4 * T * C) + 2 * C * V);
    ck_assert_double_eq_tol(model, 3 * fwd, 1e-9 * model);
    ck_assert_double_eq_tol(hardware, 4 * fwd, 1e-9 * hardware);
}
END_TEST

int main(void) { return harness_main("plan_llama"); }
