/*
 * test_gpt.c — the GPT on its own: gradients against central differences,
 * what tensor parallelism sends, what a micro-batch keeps, the tied
 * embedding, the checkpoint's names, and generation.
 *
 *   gradients   (double) every parameter of a tiny GPT, with dropout, at
 *               tp 1: the analytic gradient equals (L(w+e) - L(w-e)) / 2e
 *   tp traffic  per step of one micro-batch at tp 2: two all-reduces of
 *               B T C per block forward (the c_projs' g) and two backward
 *               (c_attn's and c_fc's f), one for the embedding forward and
 *               one for the head backward, plus the vocab-parallel
 *               cross-entropy's three of B T numbers — and nothing else
 *   activations the bytes one micro-batch keeps per block are
 *               ptdp_gpt_block_act_elements x R, at tp 1, tp 2 and tp 2
 *               with sequence parallelism (less); with selective
 *               recomputation, without the attention probabilities; with
 *               context parallelism, T/cp positions and a log-sum-exp
 *               (under Ulysses, --cp-algo a2a, the probabilities of
 *               whole sequences of nh/(tp cp) heads instead);
 *               under bf16 (act_bf16.h) 2 bytes an element but the
 *               LayerNorm statistics and log-sum-exps, about half
 *   sp          the LayerNorms' gradients are partial sums until the
 *               model's sync all-reduces them over TP; SP's bytes are TP's
 *               plus that all-reduce and the backward's all-gather of
 *               each kept LayerNorm shard
 *   tied wte    with pp 2 the last stage's copy equals stage 0's after
 *               training, bit for bit, and the norm counts it once
 *   checkpoint  nanoGPT's names and whole shapes, V and V_pad
 *   generation  greedy is deterministic; a sampled text is the same for a
 *               seed; no padded token is ever drawn
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grad_check.h"
#include "gpt_shape.h"
#include "harness.h"
#include "ptdp/gpt.h"
#include "ptdp/launch.h"
#include "ptdp/mesh.h"
#include "ptdp/models.h"
#include "ptdp/state.h"
#include "ptdp/train.h"

static const harness_tcase gpt_tests = { .name = "gpt", .timeout_s = 120 };

/* A tiny GPT: hidden 8, 2 heads of 4, ffn 12, 2 layers, seq-len 5, the
 * built-in sums (62 tokens) padded to 64 x tp. */
static ptdp_model_config tiny(int tp)
{
    return gpt_of((gpt_shape){ .layers = 2, .hidden = 8, .ffn = 12, .heads = 2, .seq_len = 5, .vocab = 62 }, tp);
}

/* ---------------------------------------------------------- gradients */
#ifdef PTDP_DOUBLE

static int fd_device(ptdp_device *dev, void *arg)
{
    ptdp_model_config cfg = tiny(1);
    return grad_check_model(dev, &cfg, 0.2, 0.01, arg);   /* dropout 0.2 on every path */
}

TEST(gpt_tests, test_gradients_match_central_differences)
{
    grad_check_expect(fd_device);
}
END_TEST
#endif

/* ---------------------------------------------------------- tp traffic */

static int tp_step_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_model_config cfg = tiny(2);
    ptdp_mesh mesh;
    ptdp_model m;
    DEVICE_TRY(harness_model_on_mesh(dev, &cfg, 1, 2, 1, 5, &mesh, &m));
    ptdp_batch b = { .first = 0, .rows = 3 };
    DEVICE_TRY(ptdp_batch_load(dev, &m, &b));
    int g = harness_group_index(&dev->stats, "tp");
    unsigned long long calls0 = g >= 0 ? dev->stats.group[g].calls : 0;
    double sent0 = g >= 0 ? dev->stats.group[g].sent : 0;
    ptdp_acts acts;
    DEVICE_TRY(ptdp_model_forward(dev, &m, &acts, &b, (ptdp_tensor){ 0 }, 0, false, NULL));
    DEVICE_TRY(ptdp_model_backward(dev, &m, &acts, NULL, 1.0 / 15, NULL));
    g = harness_group_index(&dev->stats, "tp");
    DEVICE_CHECK(dev, g >= 0, "no tp group in the statistics");
    const int L = cfg.layers, R = 3 * ptdp_gpt(&cfg)->seq_len, C = cfg.hidden, N = 2;
    /* all-reduces of R x C reals: 2 per block each way, the embedding, the
     * head; and the cross-entropy's three of R doubles */
    double big = 2.0 * (N - 1) / N * R * C * sizeof(ptdp_real);
    double small = 2.0 * (N - 1) / N * R * sizeof(double);
    unsigned long long calls = dev->stats.group[g].calls - calls0;
    double sent = dev->stats.group[g].sent - sent0;
    DEVICE_CHECK(dev, calls == (unsigned long long)(4 * L + 2 + 3), "tp calls %llu, want %d", calls, 4 * L + 5);
    DEVICE_CHECK(dev, sent == (4 * L + 2) * big + 3 * small, "tp bytes %.0f, want %.0f", sent,
                 (4 * L + 2) * big + 3 * small);
    ptdp_batch_free(dev, &b);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return 0;
}

TEST(gpt_tests, test_tp_sends_two_all_reduces_per_block_each_way)
{
    harness_launch_ok(2, tp_step_device, NULL, NULL, NULL);
}
END_TEST

/* ---------------------------------------------------------- activations */

typedef struct { int tp; bool sp, selective, bf16; int cp; size_t kept[2]; bool a2a; int heads; bool tiled; } acts_arg;

/* The activation bytes one micro-batch keeps after its forward, with
 * `layers` blocks on the device. */
static int acts_device(ptdp_device *dev, void *arg)
{
    acts_arg *a = arg;
    for (int k = 0; k < 2; k++) {
        ptdp_model_config cfg = tiny(a->tp);
        cfg.layers = 2 + k;
        ptdp_gpt(&cfg)->seq_len = a->cp > 1 ? 8 : a->sp ? 6 : ptdp_gpt(&cfg)->seq_len;   /* divisible by 2 cp (and then tp), or tp */
        if (a->heads > 0)
            ptdp_gpt(&cfg)->heads = a->heads;
        ptdp_mesh mesh;
        ptdp_model m;
        DEVICE_TRY(ptdp_mesh_init_cp(dev, 1, a->cp > 1 ? a->cp : 1, a->tp, 1, &mesh));
        mesh.sp = a->sp;
        mesh.cp_a2a = a->a2a;
        DEVICE_TRY(ptdp_model_init(dev, &m, &cfg, &mesh, NULL, 5, 0.0));
        m.recompute_core = a->selective;
        m.attention_tiled = a->tiled;
        m.bf16 = a->bf16;   /* activations only: the parameters stay as they are */
        size_t kept;
        DEVICE_TRY(harness_forward_kept(dev, &m, 4, &kept));
        if (dev->rank == 0)
            a->kept[k] = kept;
        ptdp_model_free(dev, &m);
        ptdp_mesh_free(&mesh);
    }
    return 0;
}

/* tp 1, tp 2, tp 2 with SP; then selective recomputation at tp 1 and tp 2
 * with SP; then context parallelism, cp 2 at tp 1, cp 2 x tp 2, and cp 2 x
 * tp 2 with SP; then four of them again with bf16 activations */
LOOP_TEST(gpt_tests, test_activations_per_block_follow_the_formula, 12)
{
    static const int bf16_of[] = { 0, 2, 3, 6 };
    const int k = _i < 8 ? _i : bf16_of[_i - 8];
    acts_arg a = { .tp = k == 0 || k == 3 || k == 5 ? 1 : 2, .sp = k == 2 || k == 4 || k == 7,
                   .selective = k == 3 || k == 4, .cp = k >= 5 ? 2 : 1, .bf16 = _i >= 8 };
    harness_launch_ok(a.tp * a.cp, acts_device, &a, NULL, NULL);
    ptdp_model_config cfg = tiny(a.tp);
    ptdp_gpt(&cfg)->seq_len = a.cp > 1 ? 8 : a.sp ? 6 : ptdp_gpt(&cfg)->seq_len;
    double want = ptdp_gpt_block_act_bytes(&cfg, 4, a.tp, a.cp, a.sp, a.selective, a.bf16);
    double got = (double)a.kept[1] - (double)a.kept[0];   /* one block more */
    /* the arena rounds every block up to 64 bytes: at most 64 per tensor */
    ck_assert_msg(got >= want && got <= want + 13 * 64, "tp %d%s%s cp %d%s: one more block keeps %.0f B, formula %.0f B",
                  a.tp, a.sp ? " sp" : "", a.selective ? " selective" : "", a.cp, a.bf16 ? " bf16" : "", got, want);
    if (a.bf16) {   /* about half of float's: all but the statistics */
        const double f = ptdp_gpt_block_act_bytes(&cfg, 4, a.tp, a.cp, a.sp, a.selective, false);
        const double fe = (a.cp > 1 ? ptdp_gpt_block_act_elements_cp(&cfg, 4, a.tp, a.cp, a.sp)
                           : a.selective ? ptdp_gpt_block_act_elements_selective(&cfg, 4, a.tp, a.sp)
                                         : ptdp_gpt_block_act_elements(&cfg, 4, a.tp, a.sp)) * sizeof(ptdp_real);
        ck_assert_msg(f == fe && want < 0.62 * f, "bf16 %.0f B, float %.0f B (elements x %zu: %.0f)", want, f,
                      sizeof(ptdp_real), fe);
    }
    if (a.sp && !a.selective) {   /* and SP keeps less than TP alone */
        acts_arg t = { .tp = 2 };
        harness_launch_ok(2, acts_device, &t, NULL, NULL);
        double tp_only = ptdp_gpt_block_act_elements(&cfg, 4, 2, false) * sizeof(ptdp_real);
        ck_assert_msg(want < tp_only, "sp %.0f B, tp alone %.0f B", want, tp_only);
    }
}
END_TEST

/* Ulysses (--cp-algo a2a): cp 2 at tp 1, cp 2 x tp 2 with SP (4 heads: one
 * a rank), selective recomputation, and bf16; each by
 * ptdp_gpt_block_act_bytes_a2a, and the probabilities of whole sequences
 * of nh/(tp cp) heads in place of the ring's log-sum-exps. */
LOOP_TEST(gpt_tests, test_ulysses_activations_per_block_follow_the_formula, 4)
{
    acts_arg a = { .tp = _i == 1 ? 2 : 1, .sp = _i == 1, .selective = _i == 2, .cp = 2, .bf16 = _i == 3,
                   .a2a = true, .heads = 4 };
    harness_launch_ok(a.tp * a.cp, acts_device, &a, NULL, NULL);
    ptdp_model_config cfg = tiny(a.tp);
    ptdp_gpt(&cfg)->seq_len = 8;
    ptdp_gpt(&cfg)->heads = 4;
    const double want = ptdp_gpt_block_act_bytes_a2a(&cfg, 4, a.tp, a.cp, a.sp, a.selective, a.bf16);
    const double got = (double)a.kept[1] - (double)a.kept[0];
    ck_assert_msg(got >= want && got <= want + 13 * 64, "a2a tp %d%s%s cp %d%s: one more block keeps %.0f B, "
                  "formula %.0f B", a.tp, a.sp ? " sp" : "", a.selective ? " selective" : "", a.cp,
                  a.bf16 ? " bf16" : "", got, want);
    const double probs = 4.0 * (4 / a.tp / a.cp) * 8 * 8, lse = 4.0 * (4 / a.tp) * (8 / a.cp);
    ck_assert(ptdp_gpt_block_act_elements_a2a(&cfg, 4, a.tp, a.cp, a.sp, a.selective) ==
              ptdp_gpt_block_act_elements_cp(&cfg, 4, a.tp, a.cp, a.sp) - lse + (a.selective ? 0 : probs));
}
END_TEST

/* --attention tiled: a log-sum-exp a query in place of the probabilities in
 * every layout — tp 1, tp 2 with SP, selective recomputation (nothing more
 * to drop), the ring (the same as without the flag), Ulysses, and bf16
 * (the log-sum-exps in float) — each by ptdp_gpt_block_act_bytes_tiled,
 * which is CP's count at any cp. */
LOOP_TEST(gpt_tests, test_tiled_activations_per_block_follow_the_formula, 6)
{
    acts_arg a = { .tp = _i == 1 ? 2 : 1, .sp = _i == 1, .selective = _i == 2, .cp = _i == 3 || _i == 4 ? 2 : 1,
                   .a2a = _i == 4, .bf16 = _i == 5, .heads = 4, .tiled = true };
    harness_launch_ok(a.tp * a.cp, acts_device, &a, NULL, NULL);
    ptdp_model_config cfg = tiny(a.tp);
    ptdp_gpt(&cfg)->seq_len = a.cp > 1 ? 8 : a.sp ? 6 : ptdp_gpt(&cfg)->seq_len;
    ptdp_gpt(&cfg)->heads = 4;
    const double want = ptdp_gpt_block_act_bytes_tiled(&cfg, 4, a.tp, a.cp, a.sp, a.bf16);
    const double got = (double)a.kept[1] - (double)a.kept[0];
    ck_assert_msg(got >= want && got <= want + 13 * 64, "tiled tp %d%s%s cp %d%s%s: one more block keeps %.0f B, "
                  "formula %.0f B", a.tp, a.sp ? " sp" : "", a.selective ? " selective" : "", a.cp,
                  a.a2a ? " a2a" : "", a.bf16 ? " bf16" : "", got, want);
    const int T = ptdp_gpt(&cfg)->seq_len;
    const double lse = 4.0 * (4 / a.tp) * (T / a.cp), probs = 4.0 * (4 / a.tp) * T * T;
    if (a.cp == 1 && !a.bf16)   /* the probabilities gone, the log-sum-exps come */
        ck_assert(ptdp_gpt_block_act_elements_tiled(&cfg, 4, a.tp, 1, a.sp) ==
                  ptdp_gpt_block_act_elements(&cfg, 4, a.tp, a.sp) - probs + lse);
}
END_TEST

/* ------------------------------------------------ sequence parallelism */

/* One micro-batch at tp 2: the ln_1 weight gradient of block 0 on each
 * rank, before and after the model's gradient sync, and the TP bytes. */
typedef struct {
    bool sp;
    double before[2][16], after[2][16];
    double tp_sent;
} sp_arg;

static int sp_device(ptdp_device *dev, void *arg)
{
    sp_arg *a = arg;
    ptdp_model_config cfg = tiny(2);
    ptdp_gpt(&cfg)->seq_len = 6;
    ptdp_mesh mesh;
    ptdp_model m;
    const int tp = ptdp_comm_size(dev->world);
    DEVICE_TRY(ptdp_mesh_init(dev, 1, tp, 1, &mesh));
    mesh.sp = a->sp;
    DEVICE_TRY(ptdp_model_init(dev, &m, &cfg, &mesh, NULL, 5, 0.0));
    for (int i = 0; i < m.nparams; i++)   /* LayerNorms with weights of their own */
        if (strstr(m.params[i].name, ".ln_") != NULL)
            for (int j = 0; j < m.params[i].w.cols; j++)
                m.params[i].w.data[j] += (ptdp_real)(0.1 * sin(j + i));
    ptdp_batch b = { .first = 2, .rows = 3 };
    DEVICE_TRY(ptdp_batch_load(dev, &m, &b));
    ptdp_acts acts;
    DEVICE_TRY(ptdp_model_forward(dev, &m, &acts, &b, (ptdp_tensor){ 0 }, 0, false, NULL));
    DEVICE_TRY(ptdp_model_backward(dev, &m, &acts, NULL, 1.0 / 18, NULL));
    ptdp_param *ln = ptdp_model_find(&m, "transformer.h.0.ln_1.weight");
    DEVICE_CHECK(dev, ln != NULL && ptdp_param_summed_over(ln, PTDP_GROUP_TP) == a->sp, "ln_1 declared summed over TP under SP only");
    for (int j = 0; j < cfg.hidden; j++)
        a->before[mesh.tp_rank][j] = ln->g.data[j];
    DEVICE_TRY(ptdp_model_sum_groups(dev, &m));
    for (int j = 0; j < cfg.hidden; j++)
        a->after[mesh.tp_rank][j] = ln->g.data[j];
    int g = harness_group_index(&dev->stats, "tp");
    if (mesh.tp_rank == 0)
        a->tp_sent = g >= 0 ? dev->stats.group[g].sent : 0;
    ptdp_batch_free(dev, &b);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return 0;
}

/* Under SP each rank's LayerNorm sees only its positions: its gradient is
 * a partial sum, wrong on its own; the all-reduce over TP in the model's
 * sync makes it the single device's.  Leaving it out breaks equality. */
TEST(gpt_tests, test_sp_layernorm_gradients_need_their_all_reduce)
{
    sp_arg one = { .sp = false }, sp = { .sp = true };
    harness_launch_ok(1, sp_device, &one, NULL, NULL);
    harness_launch_ok(2, sp_device, &sp, NULL, NULL);
    double partial = 0, summed = 0, scale = 0;
    for (int j = 0; j < 8; j++) {
        scale = fmax(scale, fabs(one.after[0][j]));
        partial = fmax(partial, fabs(sp.before[0][j] - one.after[0][j]));
        summed = fmax(summed, fabs(sp.after[0][j] - one.after[0][j]) + fabs(sp.after[1][j] - one.after[0][j]));
        ck_assert_msg(fabs(sp.before[0][j] + sp.before[1][j] - one.after[0][j]) <= PTDP_TOLERANCE * fmax(1, scale),
                      "element %d: the two ranks' partial gradients do not add up to the whole", j);
    }
    ck_assert_msg(partial > 0.05 * scale, "before the sync a rank's gradient should be a partial sum (diff %g of %g)",
                  partial, scale);
    ck_assert_msg(summed <= PTDP_TOLERANCE * fmax(1, scale), "after the sync: %g from one device", summed);
}
END_TEST

/* An all-reduce is a reduce-scatter plus an all-gather: SP sends what TP
 * sends, plus the LayerNorms' gradient all-reduce — 2 tensors of C per
 * LayerNorm, 2L + 1 of them; each all-reduce of C reals over 2 ranks sends
 * 2(N-1)/N C = C reals — plus, because SP keeps only its shard of each
 * LayerNorm's output, one all-gather of it again in the backward of every
 * column-parallel layer that reads one (c_attn and c_fc of each block, and
 * the head): 2L + 1 all-gathers of R x C, each sending (N-1)/N R C. */
TEST(gpt_tests, test_sp_sends_what_tp_sends_and_its_regathers)
{
    sp_arg tp = { .sp = false }, sp = { .sp = true };
    harness_launch_ok(2, sp_device, &tp, NULL, NULL);
    harness_launch_ok(2, sp_device, &sp, NULL, NULL);
    const ptdp_model_config cfg = tiny(2);
    const int R = 3 * 6, N = 2;   /* sp_device's batch: 3 sequences of 6 */
    double ln = 2.0 * (2 * cfg.layers + 1) * cfg.hidden * sizeof(ptdp_real);
    double regather = (2 * cfg.layers + 1) * (N - 1.0) / N * R * cfg.hidden * sizeof(ptdp_real);
    ck_assert_msg(sp.tp_sent == tp.tp_sent + ln + regather,
                  "tp group bytes: sp %.0f, tp alone %.0f + LayerNorms %.0f + gathers again %.0f", sp.tp_sent,
                  tp.tp_sent, ln, regather);
}
END_TEST

/* ---------------------------------------------------------- tied wte */

TEST(gpt_tests, test_tied_copies_stay_equal)
{
    ptdp_train_config c = ptdp_train_defaults();
    c.model = tiny(2);
    c.pp = 2;
    c.tp = 2;
    c.micro_batches = 2;
    c.batch = 8;
    c.steps = 3;
    c.lr = 1e-2;
    ptdp_state s;
    ck_assert_int_eq(ptdp_state_init(&s, &c.model, c.optimizer, false), 0);
    c.final_state = &s;
    char msg[PTDP_MSG_MAX];
    ptdp_train_result res;
    ck_assert_msg(ptdp_train(&c, NULL, NULL, NULL, &res, msg, sizeof msg) == 0, "%s", msg);
    /* both stages wrote transformer.wte.weight into one whole tensor; had
     * they differed, the state would hold the later one: train once more
     * with pp 1 and compare the whole run instead */
    ptdp_train_config one = c;
    one.pp = 1;
    one.micro_batches = 1;
    ptdp_state s1;
    ck_assert_int_eq(ptdp_state_init(&s1, &one.model, one.optimizer, false), 0);
    one.final_state = &s1;
    ptdp_train_result res1;
    ck_assert_msg(ptdp_train(&one, NULL, NULL, NULL, &res1, msg, sizeof msg) == 0, "%s", msg);
    ptdp_check_report rep;
    ck_assert_msg(ptdp_check_states(&s, &s1, PTDP_TOLERANCE, &rep), "worst %s %g", rep.worst, rep.max_abs);
    for (int i = 0; i < c.steps; i++)   /* the norm counts the tied tensor once */
        ck_assert_msg(fabs(res.log[i].grad_norm - res1.log[i].grad_norm) <= PTDP_TOLERANCE * res1.log[i].grad_norm,
                      "step %d: |g| %g with pp 2, %g with pp 1", i + 1, res.log[i].grad_norm,
                      res1.log[i].grad_norm);
    ptdp_train_result_free(&res);
    ptdp_train_result_free(&res1);
    ptdp_state_free(&s);
    ptdp_state_free(&s1);
}
END_TEST

/* ---------------------------------------------------------- checkpoint */

TEST(gpt_tests, test_checkpoint_has_nanogpt_names)
{
    ptdp_model_config cfg = tiny(1);
    ptdp_state s;
    ck_assert_int_eq(ptdp_state_init(&s, &cfg, PTDP_OPT_ADAMW, false), 0);
    static const struct { const char *name; int rows, cols; } want[] = {
        { "transformer.wte.weight", 64, 8 }, { "transformer.wpe.weight", 5, 8 },
        { "transformer.h.0.ln_1.weight", 1, 8 }, { "transformer.h.1.attn.c_attn.weight", 24, 8 },
        { "transformer.h.1.attn.c_attn.bias", 1, 24 }, { "transformer.h.0.attn.c_proj.weight", 8, 8 },
        { "transformer.h.0.mlp.c_fc.weight", 12, 8 }, { "transformer.h.0.mlp.c_proj.weight", 8, 12 },
        { "transformer.ln_f.bias", 1, 8 }, { "optim.transformer.wte.weight.exp_avg_sq", 64, 8 },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ptdp_state_tensor *t = ptdp_state_find(&s, want[i].name);
        ck_assert_msg(t != NULL, "no %s", want[i].name);
        ck_assert_int_eq(t->rows, want[i].rows);
        ck_assert_int_eq(t->cols, want[i].cols);
    }
    ck_assert_ptr_null(ptdp_state_find(&s, "lm_head.weight"));   /* tied: stored once, as wte */
    ck_assert_int_eq(s.ntensors, 3 * (2 + 2 * 12 + 2));
    ptdp_state_free(&s);
}
END_TEST

/* ---------------------------------------------------------- generation */

typedef struct { int64_t ids[3][24]; } gen_arg;

static int gen_device(ptdp_device *dev, void *arg)
{
    gen_arg *g = arg;
    ptdp_model_config cfg = tiny(1);
    ptdp_mesh mesh;
    ptdp_model m;
    DEVICE_TRY(harness_model_on_mesh(dev, &cfg, 1, 1, 1, 5, &mesh, &m));
    const ptdp_gpt_sample_opts o[3] = { { 0, 0, 1 }, { 1.5, 0, 7 }, { 1.5, 0, 7 } };
    for (int k = 0; k < 3; k++) {
        g->ids[k][0] = '1';
        DEVICE_TRY(ptdp_gpt_generate(dev, &m, g->ids[k], 1, 23, &o[k]));
    }
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return 0;
}

TEST(gpt_tests, test_generation_is_deterministic_and_never_padded)
{
    gen_arg a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    harness_launch_ok(1, gen_device, &a, NULL, NULL);
    harness_launch_ok(1, gen_device, &b, NULL, NULL);
    ck_assert_mem_eq(a.ids, b.ids, sizeof a.ids);                 /* the same text, twice */
    ck_assert_mem_eq(a.ids[1], a.ids[2], sizeof a.ids[1]);        /* the same seed */
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 24; i++)
            ck_assert_msg(a.ids[k][i] >= 0 && a.ids[k][i] < 62, "token %lld is not one of 0..61",
                          (long long)a.ids[k][i]);
}
END_TEST

int main(void)
{
    return harness_main("gpt");
}
