/*
 * test_llama.c — the llama model (llama.h) on its own: Meta's names and
 * shapes, Meta's rule for F, the configurations it refuses with the flag
 * to fix, and (double) its gradient against central differences through
 * a whole tiny model — one block, grouped-query attention, rotary
 * positions, SwiGLU and the RMSNorms in every path.
 *
 *   loss(w + eps e_k) - loss(w - eps e_k)
 *   ------------------------------------- = dloss/dw_k  (to O(eps^2))
 *                  2 eps
 *
 * And what sampling needs of it (sample.h): the logits its table gives are
 * those the loss was computed from; greedy text is, token by token, the
 * argmax of a forward on the last T tokens; seeded draws repeat.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "grad_check.h"
#include "harness.h"
#include "ptdp/error.h"
#include "ptdp/llama.h"
#include "ptdp/mesh.h"
#include "ptdp/models.h"
#include "ptdp/sample.h"

static const harness_tcase llama_tests = { .name = "llama", .timeout_s = 120 };

/* One block: C 8, H 4 heads of 2, K 2 kv heads, F 12, T 5, V 64 (the
 * plain built-in sums' bytes are below 64). */
static ptdp_model_config tiny(void)
{
    return PTDP_LLAMA_CONFIG(.hidden = 8, .ffn = 12, .layers = 1, .heads = 4, .kv_heads = 2, .seq_len = 5,
                             .vocab = 64, .rope_theta = 10.0);
}

/* ---------------------------------------------------- names and shapes */

TEST(llama_tests, test_names_and_shapes_are_metas)
{
    ptdp_model_config c = PTDP_LLAMA_CONFIG(.hidden = 16, .ffn = 40, .layers = 2, .heads = 4, .kv_heads = 2,
                                            .seq_len = 8, .vocab = 32);
    ptdp_param_info p[64];
    const int n = ptdp_llama_ops.list_params(&c, p);
    ck_assert_int_eq(n, 2 + 9 * 2 + 1);
    static const struct { const char *name; int rows, cols; } want[] = {
        { "tok_embeddings.weight", 32, 16 },
        { "layers.0.attention.wq.weight", 16, 16 }, { "layers.0.attention.wk.weight", 8, 16 },
        { "layers.0.attention.wv.weight", 8, 16 }, { "layers.0.attention.wo.weight", 16, 16 },
        { "layers.0.feed_forward.w1.weight", 40, 16 }, { "layers.0.feed_forward.w2.weight", 16, 40 },
        { "layers.0.feed_forward.w3.weight", 40, 16 }, { "layers.0.attention_norm.weight", 1, 16 },
        { "layers.0.ffn_norm.weight", 1, 16 },
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        ck_assert_str_eq(p[k].name, want[k].name);
        ck_assert_int_eq(p[k].rows, want[k].rows);
        ck_assert_int_eq(p[k].cols, want[k].cols);
        ck_assert(p[k].is_bias == (want[k].rows == 1));   /* a norm's weight is saved as [C] */
    }
    ck_assert_str_eq(p[n - 2].name, "norm.weight");
    ck_assert_str_eq(p[n - 1].name, "output.weight");   /* untied: its own [V, C] */
    ck_assert_int_eq(p[n - 1].rows, 32);
}
END_TEST

/* Meta's ModelArgs: hidden_dim = int(2 (4 dim) / 3) rounded up to multiple_of:
 * Llama 2 7B's 4096 -> 11008, 13B's 5120 -> 13824. */
TEST(llama_tests, test_ffn_by_metas_rule)
{
    ck_assert_int_eq(ptdp_llama_meta_ffn(4096, 256), 11008);
    ck_assert_int_eq(ptdp_llama_meta_ffn(5120, 256), 13824);
    ck_assert_int_eq(ptdp_llama_meta_ffn(64, 256), 256);
    ptdp_model_config c = PTDP_LLAMA_CONFIG(.hidden = 64, .layers = 1, .heads = 4, .seq_len = 8, .vocab = 8);
    ck_assert_int_eq(c.ffn, 256);
    ck_assert_int_eq(ptdp_llama_kv_heads(&c), 4);   /* --kv-heads defaults to --heads */
}
END_TEST

/* ------------------------------------------------------- what it refuses */

static void refused(const ptdp_model_config *c, int tp, const char *part)
{
    char msg[512] = "";
    ck_assert_int_eq(ptdp_llama_ops.check(c, tp, 1, msg, sizeof msg), PTDP_EINVAL);
    ck_assert_msg(strstr(msg, part) != NULL, "wanted \"%s\" in: %s", part, msg);
}

TEST(llama_tests, test_bad_shapes_name_their_flag)
{
    ptdp_model_config c = tiny();
    char msg[512];
    ck_assert_int_eq(ptdp_llama_ops.check(&c, 2, 1, msg, sizeof msg), PTDP_OK);
    ptdp_llama(&c)->kv_heads = 3;
    refused(&c, 1, "--kv-heads 3 must divide --heads 4");
    c = tiny();
    ptdp_llama(&c)->heads = 8;   /* d = 1: no pairs */
    ptdp_llama(&c)->kv_heads = 8;
    refused(&c, 1, "is odd");
    c = tiny();
    ptdp_llama(&c)->rope_theta = 0;
    refused(&c, 1, "--rope-theta");
    c = tiny();
    ptdp_llama(&c)->norm_eps = NAN;
    refused(&c, 1, "--norm-eps");
    c = tiny();
    ptdp_llama(&c)->rope_theta = INFINITY;
    refused(&c, 1, "--rope-theta");
    c = tiny();
    char ok[512];
    ck_assert_int_eq(ptdp_llama_ops.check(&c, 4, 1, ok, sizeof ok), PTDP_OK);   /* tp 4 > K 2: copies */
    refused(&c, 8, "--tp 8 must divide --heads 4");
    ptdp_llama(&c)->heads = 3 * 2;
    ptdp_llama(&c)->kv_heads = 3;
    c.hidden = 12;
    refused(&c, 2, "--tp 2 must divide --kv-heads 3");
}
END_TEST

/* ----------------------------------------------------------- sampling */

/* The tiny llama whole on one device, initialised from seed 5. */
static int build(ptdp_device *dev, ptdp_mesh *mesh, ptdp_model *m)
{
    ptdp_model_config cfg = tiny();
    DEVICE_TRY(ptdp_mesh_init(dev, 1, 1, 1, mesh));
    return ptdp_model_init(dev, m, &cfg, mesh, NULL, 5, 0.0);
}

/* A forward of 3 sequences with their labels: the loss from the logits
 * the table gives, sum over rows of log sum_v exp(z_v) - z_label, is the
 * loss the head computed. */
static int logits_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_mesh mesh;
    ptdp_model m;
    DEVICE_TRY(build(dev, &mesh, &m));
    ptdp_batch b = { .first = 11, .rows = 3 };
    DEVICE_TRY(ptdp_batch_load(dev, &m, &b));
    ptdp_acts acts;
    DEVICE_TRY(ptdp_model_forward(dev, &m, &acts, &b, (ptdp_tensor){ 0 }, 0, false, NULL));
    const ptdp_tensor z = m.ops->sampling->logits(&acts);
    const int T = ptdp_model_positions(&m.cfg), V = m.ops->sampling->vocab(&m.cfg);
    DEVICE_CHECK(dev, z.rows == 3 * T && z.cols == V, "logits %d x %d, want %d x %d", z.rows, z.cols, 3 * T, V);
    double loss = 0;
    for (int r = 0; r < z.rows; r++) {
        const ptdp_real *row = ptdp_at(z, r, 0);
        double max = row[0], sum = 0;
        for (int v = 1; v < V; v++)
            max = fmax(max, row[v]);
        for (int v = 0; v < V; v++)
            sum += exp(row[v] - max);
        loss += max + log(sum) - row[b.labels[r]];
    }
#ifdef PTDP_DOUBLE
    const double tol = 1e-12;
#else
    const double tol = 1e-5;
#endif
    DEVICE_CHECK(dev, fabs(loss - acts.loss_sum) <= tol * fabs(acts.loss_sum), "loss from the logits %.12g, "
                 "the head's %.12g", loss, acts.loss_sum);
    ptdp_acts_free(dev, &m, &acts);
    ptdp_batch_free(dev, &b);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return 0;
}

TEST(llama_tests, test_sampling_logits_are_the_losss)
{
    ck_assert(ptdp_model_can_sample(&ptdp_llama_ops));
    harness_launch_ok(1, logits_device, NULL, NULL, NULL);
}
END_TEST

/* The argmax over the V tokens of row `at` of a forward on ctx (T tokens). */
static int argmax_after(ptdp_device *dev, ptdp_model *m, int64_t *ctx, int at, int64_t *best)
{
    ptdp_acts acts;
    ptdp_batch b = { .first = 0, .rows = 1, .tokens = ctx };
    DEVICE_TRY(ptdp_model_forward(dev, m, &acts, &b, (ptdp_tensor){ 0 }, 0, false, NULL));
    const ptdp_real *row = ptdp_at(m->ops->sampling->logits(&acts), at, 0);
    *best = 0;
    for (int v = 1; v < ptdp_llama(&m->cfg)->vocab; v++)
        if (row[v] > row[*best])
            *best = v;
    ptdp_acts_free(dev, m, &acts);
    return 0;
}

/* Greedy text from "1+", 12 tokens (past T = 5: the window slides), then
 * each token again as the argmax of the test's own forward on the T
 * tokens before it (fewer at first, padded with zeros after them). */
static int greedy_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_mesh mesh;
    ptdp_model m;
    DEVICE_TRY(build(dev, &mesh, &m));
    int64_t ids[2 + 12] = { '1', '+' };
    const ptdp_sample_opts greedy = { 0 };
    DEVICE_TRY(ptdp_sample_generate(dev, &m, ids, 2, 12, &greedy));
    const int T = ptdp_llama(&m.cfg)->seq_len;
    for (int n = 2; n < 2 + 12; n++) {
        int64_t ctx[8] = { 0 }, want;
        const int used = n < T ? n : T;
        memcpy(ctx, ids + n - used, (size_t)used * sizeof *ctx);
        DEVICE_TRY(argmax_after(dev, &m, ctx, used - 1, &want));
        DEVICE_CHECK(dev, ids[n] == want, "token %d: the sampler chose %lld, the forward's argmax is %lld", n,
                     (long long)ids[n], (long long)want);
    }
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return 0;
}

TEST(llama_tests, test_greedy_text_is_the_argmax_of_a_forward)
{
    harness_launch_ok(1, greedy_device, NULL, NULL, NULL);
}
END_TEST

typedef struct { int64_t ids[4][24]; } draws;

/* Temperature 1.5 from "1": seeds 7, 7, 8; and top-k 1 at seed 9 (the
 * greedy text: one token to draw from). */
static int draws_device(ptdp_device *dev, void *arg)
{
    draws *d = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    DEVICE_TRY(build(dev, &mesh, &m));
    const ptdp_sample_opts o[4] = { { 1.5, 0, 7 }, { 1.5, 0, 7 }, { 1.5, 0, 8 }, { 1.5, 1, 9 } };
    for (int k = 0; k < 4; k++) {
        d->ids[k][0] = '1';
        DEVICE_TRY(ptdp_sample_generate(dev, &m, d->ids[k], 1, 23, &o[k]));
    }
    int64_t greedy[24] = { '1' };
    DEVICE_TRY(ptdp_sample_generate(dev, &m, greedy, 1, 23, &(ptdp_sample_opts){ 0 }));
    DEVICE_CHECK(dev, memcmp(greedy, d->ids[3], sizeof greedy) == 0, "top-k 1 is not the greedy text");
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return 0;
}

TEST(llama_tests, test_seeded_draws_repeat)
{
    draws a = { 0 }, b = { 0 };
    harness_launch_ok(1, draws_device, &a, NULL, NULL);
    harness_launch_ok(1, draws_device, &b, NULL, NULL);
    ck_assert_mem_eq(a.ids, b.ids, sizeof a.ids);                /* the same text, twice */
    ck_assert_mem_eq(a.ids[0], a.ids[1], sizeof a.ids[0]);       /* the same seed */
    ck_assert_msg(memcmp(a.ids[0], a.ids[2], sizeof a.ids[0]) != 0, "seeds 7 and 8 drew the same 23 tokens");
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 24; i++)
            ck_assert_msg(a.ids[k][i] >= 0 && a.ids[k][i] < 64, "token %lld is not one of 0..63",
                          (long long)a.ids[k][i]);
}
END_TEST

/* ---------------------------------------------------------- gradients */
#ifdef PTDP_DOUBLE

static int fd_device(ptdp_device *dev, void *arg)
{
    ptdp_model_config cfg = tiny();
    return grad_check_model(dev, &cfg, 0.0, 0.1, arg);   /* no dropout: the llama has none */
}

TEST(llama_tests, test_gradients_match_central_differences)
{
    grad_check_expect(fd_device);
}
END_TEST
#endif

int main(void)
{
    return harness_main("llama");
}
