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
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "grad_check.h"
#include "harness.h"
#include "ptdp/error.h"
#include "ptdp/llama.h"
#include "ptdp/models.h"

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
