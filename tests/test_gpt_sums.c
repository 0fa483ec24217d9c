/*
 * test_gpt_sums.c — the built-in sums and how a GPT is scored on them
 * (gpt_data.c, gpt_sample.c).
 *
 *   corpus     every line "dd+dd=ddd\n", PTDP_GPT_SUM_LINE bytes, its sum
 *              right, and never a held-out sum (about 1 in 20 of them)
 *   samples    start on a line: '+' at 2, '=' at 5, '\n' at 9 of every
 *              window, so a digit's place is its position
 *   scorer     "07+35=" and "042" right; "42\n", "047", "420" wrong
 *   score      a tiny untrained model is asked every held-out sum once,
 *              and gets at most all of them right
 *
 *     held out ──► never in the text ──► asked of the model ──► right / asked
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ptdp/gpt.h"
#include "ptdp/launch.h"
#include "ptdp/mesh.h"
#include "ptdp/models.h"

static const harness_tcase sums_tests = { .name = "sums", .timeout_s = 60 };

static int held_out_count(void)
{
    int n = 0;
    for (int a = 0; a < 100; a++)
        for (int b = 0; b < 100; b++)
            n += ptdp_gpt_sum_held_out(a, b);
    return n;
}

TEST(sums_tests, test_scorer_on_known_strings)
{
    char q[7];
    ptdp_gpt_sum_prompt(7, 35, q);
    ck_assert_str_eq(q, "07+35=");
    ptdp_gpt_sum_prompt(99, 99, q);
    ck_assert_str_eq(q, "99+99=");
    ck_assert(ptdp_gpt_sum_correct(7, 35, "042"));
    ck_assert(ptdp_gpt_sum_correct(99, 99, "198"));
    ck_assert(ptdp_gpt_sum_correct(0, 0, "000\n"));
    ck_assert(!ptdp_gpt_sum_correct(7, 35, "42\n"));
    ck_assert(!ptdp_gpt_sum_correct(7, 35, "047"));
    ck_assert(!ptdp_gpt_sum_correct(7, 35, "420"));
    ck_assert(!ptdp_gpt_sum_correct(12, 35, "111"));
}
END_TEST

TEST(sums_tests, test_corpus_lines_are_fixed_width_right_and_never_held_out)
{
    const int n = held_out_count();
    ck_assert_msg(n > 300 && n < 700, "%d held-out sums: about 1 in 20 of 10000", n);
    unsigned char *text = NULL;
    size_t len = ptdp_gpt_builtin_corpus(1, 2000, &text);
    ck_assert_uint_eq(len, 2000 * PTDP_GPT_SUM_LINE);
    for (size_t at = 0; at < len; at += PTDP_GPT_SUM_LINE) {
        const char *l = (const char *)text + at;
        ck_assert_msg(l[2] == '+' && l[5] == '=' && l[9] == '\n', "line at %zu: %.10s", at, l);
        int a = atoi(l), b = atoi(l + 3);
        ck_assert_msg(ptdp_gpt_sum_correct(a, b, l + 6), "line at %zu: %.9s is not a right sum", at, l);
        ck_assert_msg(!ptdp_gpt_sum_held_out(a, b), "line at %zu: %.9s is held out", at, l);
    }
    free(text);
}
END_TEST

/* ------------------------------------------------- a tiny model's samples */

typedef struct {
    int64_t tokens[64 * 16];
    int right, asked;
} tiny_arg;

static int tiny_device(ptdp_device *dev, void *arg)
{
    tiny_arg *t = arg;
    ptdp_model_config cfg = ptdp_gpt_default_config();
    cfg.hidden = 16;
    cfg.ffn = 32;
    cfg.layers = 1;
    ptdp_gpt(&cfg)->heads = 2;
    ptdp_gpt(&cfg)->seq_len = 16;
    ptdp_gpt(&cfg)->vocab = 62;
    ptdp_gpt(&cfg)->vocab_padded = 64;
    ptdp_gpt(&cfg)->line = PTDP_GPT_SUM_LINE;             /* as the CLI gives the sums */
    ptdp_mesh mesh;
    unsigned char *text = NULL;
    ptdp_gpt(&cfg)->corpus_len = ptdp_gpt_builtin_corpus(1, 200, &text);
    ptdp_gpt(&cfg)->corpus = text;
    DEVICE_CHECK(dev, text != NULL, "out of memory");
    ptdp_model m;
    DEVICE_TRY(harness_model_on_mesh(dev, &cfg, 1, 1, 1, 5, &mesh, &m));
    ptdp_batch b = { .first = 0, .rows = 64, .tokens = t->tokens, .labels = NULL };
    m.ops->fill_batch(&m, &b);                       /* through the table, as the trainer does */
    DEVICE_TRY(ptdp_gpt_score_sums(dev, &m, &t->right, &t->asked));
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    free(text);
    return 0;
}

TEST(sums_tests, test_samples_start_on_a_line_and_every_held_out_sum_is_asked)
{
    tiny_arg *t = calloc(1, sizeof *t);
    ck_assert_ptr_nonnull(t);
    harness_launch_ok(1, tiny_device, t, NULL, NULL);
    for (int i = 0; i < 64; i++) {
        const int64_t *w = t->tokens + (size_t)i * 16;
        ck_assert_msg(w[2] == '+' && w[5] == '=' && w[9] == '\n' && w[12] == '+',
                      "sample %d does not start on a line: %c%c%c%c%c%c", i, (char)w[0], (char)w[1],
                      (char)w[2], (char)w[3], (char)w[4], (char)w[5]);
    }
    ck_assert_int_eq(t->asked, held_out_count());
    ck_assert_int_ge(t->right, 0);
    ck_assert_int_le(t->right, t->asked);
    free(t);
}
END_TEST

int main(void)
{
    return harness_main("gpt_sums");
}
