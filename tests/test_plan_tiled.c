/*
 * test_plan_tiled.c — the planner under --attention tiled (attention_tiled.c):
 * its step and memory against the simulator's, for the GPT and the llama.
 *
 * In tiles a block keeps a log-sum-exp a query (b hl T numbers) where the
 * whole matrix keeps b hl T^2 probabilities, computes only the tiles not
 * in the future and makes S again in the backward; the ring (cp > 1) is
 * tiled already and runs as it does.  The planner prices all of that from
 * the same functions the run charges (model_plan.h's ptdp_plan_core), so
 * on each layout below its step equals the virtual clock's and its memory
 * the arena's peak, within 5%, as for the whole matrix (test_plan_*.c);
 * and at T 256 the plan's memory falls by the probabilities it no longer
 * keeps.
 */
#include "plan_vs_train.h"

#include "ptdp/llama.h"
#include "ptdp/ops.h"

static const harness_tcase tiled_tests = { .name = "plan_tiled", .timeout_s = 120 };

typedef struct {
    const char *name;
    bool llama;
    int seq, batch;
    plan_layout_fields l;
    bool bf16;
} tiled_case;

#define R(how) PTDP_RECOMPUTE_##how
static const tiled_case cases[] = {
    { "gpt one device",         false, 128, 4, { .dp = 1, .tp = 1, .pp = 1, .b = 2, .recompute = R(NONE) }, false },
    { "gpt dp 2 zero 1",        false, 128, 8, { .dp = 2, .tp = 1, .pp = 1, .b = 2, .zero = 1, .recompute = R(NONE) },
      false },
    { "gpt tp 2 sp",            false, 128, 4, { .dp = 1, .tp = 2, .pp = 1, .b = 2, .sp = true, .recompute = R(NONE) },
      false },
    { "gpt pp 2 1f1b",          false, 128, 8, { .dp = 1, .tp = 1, .pp = 2, .b = 2, .recompute = R(NONE) }, false },
    { "gpt pp 2 zb-h1",         false, 128, 8, { .dp = 1, .tp = 1, .pp = 2, .b = 2, .recompute = R(NONE),
                                                 .schedule = "zb-h1" }, false },
    { "gpt selective",          false, 128, 4, { .dp = 1, .tp = 1, .pp = 1, .b = 2, .recompute = R(SELECTIVE) },
      false },
    { "gpt full",               false, 128, 4, { .dp = 1, .tp = 1, .pp = 1, .b = 2, .recompute = R(FULL) }, false },
    { "gpt bf16 tp 2",          false, 128, 4, { .dp = 1, .tp = 2, .pp = 1, .b = 2, .recompute = R(NONE) }, true },
    { "gpt cp 2 (the ring's)",  false, 128, 4, { .dp = 1, .tp = 1, .pp = 1, .cp = 2, .b = 2, .recompute = R(NONE) },
      false },
    { "llama one device",       true,  128, 4, { .dp = 1, .tp = 1, .pp = 1, .b = 2, .recompute = R(NONE) }, false },
    { "llama tp 2 dp 2",        true,  128, 8, { .dp = 2, .tp = 2, .pp = 1, .b = 2, .recompute = R(NONE) }, false },
    { "llama pp 2 full",        true,  128, 8, { .dp = 1, .tp = 1, .pp = 2, .b = 2, .recompute = R(FULL) }, false },
    { "llama bf16",             true,  128, 4, { .dp = 1, .tp = 1, .pp = 1, .b = 2, .recompute = R(NONE) }, true },
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))
#undef R

/* GPT: C 64, 4 heads, F 256, 2 layers, V 64; the llama: C 64, 4 heads of
 * which 2 kv heads, F 128, 2 layers, V 64. */
static ptdp_plan_request request_of(const tiled_case *k, bool tiled)
{
    ptdp_model_config m = k->llama ? PTDP_LLAMA_CONFIG(.hidden = 64, .ffn = 128, .layers = 2, .heads = 4,
                                                       .kv_heads = 2, .seq_len = k->seq, .vocab = 64)
                                   : gpt_of((gpt_shape){ .layers = 2, .hidden = 64, .ffn = 256, .heads = 4,
                                                         .seq_len = k->seq, .vocab = 64 }, 0);
    const int gpus = k->l.dp * k->l.tp * k->l.pp * (k->l.cp > 0 ? k->l.cp : 1);
    ptdp_plan_request rq = plan_question(m, k->batch, gpus, NULL, k->bf16);
    rq.attention_tiled = tiled;
    return rq;
}

LOOP_TEST(tiled_tests, test_plan_in_tiles_is_the_simulators, NCASES)
{
    const ptdp_plan_request rq = request_of(&cases[_i], true);
    const ptdp_plan_layout l = plan_layout(cases[_i].l, cases[_i].batch);
    plan_vs_train(cases[_i].name, &rq, &l, 0.05);
}
END_TEST

/* At T 256 the probabilities are most of a block's activations: the plan
 * in tiles keeps b hl T (T - 1) fewer numbers a block and micro-batch in
 * flight, and its backward's scratch holds two tiles (ptdp_attention_tiled_
 * scratch) where the whole matrix's holds dP and dS, 2 T^2; and its step
 * is shorter (half the scores' products, plus S again in the backward,
 * against the whole square four times). */
TEST(tiled_tests, test_tiles_drop_the_probabilities)
{
    const tiled_case k = { "gpt T 256", false, 256, 4, { .dp = 1, .tp = 1, .pp = 1, .b = 2,
                                                         .recompute = PTDP_RECOMPUTE_NONE }, false };
    const ptdp_plan_request full = request_of(&k, false), tiled = request_of(&k, true);
    const ptdp_plan_layout l = plan_layout(k.l, k.batch);
    ptdp_plan_memory mf, mt;
    ptdp_plan_time tf, tt;
    ck_assert_int_eq(ptdp_plan_memory_of(&full, &l, &mf), 0);
    ck_assert_int_eq(ptdp_plan_memory_of(&tiled, &l, &mt), 0);
    ck_assert_int_eq(ptdp_plan_time_of(&full, &l, &tf), 0);
    ck_assert_int_eq(ptdp_plan_time_of(&tiled, &l, &tt), 0);
    const double T = 256, hl = 4, b = 2, L = 2, r = sizeof(ptdp_real), probs = L * b * hl * T * (T - 1) * r;
    const double scratch = (2 * T * T - (double)ptdp_attention_tiled_scratch()) * r;
    printf("T 256: acts %.0f B whole, %.0f B in tiles (%.0f fewer: the probabilities less the log-sum-exps "
           "%.0f, the scratch %.0f); step %.3f us, %.3f us\n", mf.acts, mt.acts, mf.acts - mt.acts, probs,
           scratch, tf.step_s * 1e6, tt.step_s * 1e6);
    ck_assert_double_eq_tol(mf.acts - mt.acts, probs + scratch, 1e-9 * probs);
    ck_assert(tt.step_s < tf.step_s);
}
END_TEST

int main(void) { return harness_main("plan_tiled"); }
