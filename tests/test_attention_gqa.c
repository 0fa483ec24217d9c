/*
 * test_attention_gqa.c — grouped-query attention against ordinary
 * multi-head attention with each kv head copied to its query heads (what
 * Meta's repeat_kv does).
 *
 *     GQA row:        [ q0 q1 q2 q3 | k0 k1 | v0 v1 ]          heads 4, kv 2
 *     reference row:  [ q0 q1 q2 q3 | k0 k0 k1 k1 | v0 v0 v1 v1 ]
 *
 *   forward    y and the probabilities equal the reference's
 *   backward   dq equals the reference's; dk and dv of a kv head equal the
 *              sums of its copies' gradients
 * for heads / kv_heads = 1, 2, 4 (and kv_heads = 1, multi-query), with
 * and without dropout, over the whole sequence and over a slice of
 * queries with the key and value gradients added (TeraPipe's call).  With
 * kv_heads = heads the GQA calls give the ordinary calls' bits; a group
 * that does not divide the heads is refused, naming both counts.
 */
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "op_check.h"
#include "ptdp/ops.h"

static const harness_tcase gqa_tests = { .name = "attention_gqa" };

enum { B = 2, T = 7, HD = 4, MAXH = 8 };

/* heads, kv_heads */
static const int CONFIGS[][2] = { { 4, 4 }, { 4, 2 }, { 4, 1 }, { 8, 2 } };
enum { NCONFIG = sizeof CONFIGS / sizeof CONFIGS[0] };

typedef struct {
    int heads, kv, group, q0, q1, Tq;
    bool accumulate;
    ptdp_attn_dropout drop;
    ptdp_real *qkv, *ref, *dqkv, *dref, *y, *yref, *dy, *probs, *pref, *scratch;
} gqa_case;

static ptdp_real *reals(size_t n)
{
    ptdp_real *p = calloc(n, sizeof(ptdp_real));
    ck_assert(p != NULL);
    return p;
}

/* Random q, k, v for the GQA row, and the reference row with kv head
 * h / group copied to query head h. */
static void make_case(gqa_case *c, int config, double p, bool slice)
{
    c->heads = CONFIGS[config][0], c->kv = CONFIGS[config][1], c->group = c->heads / c->kv;
    c->q0 = slice ? 2 : 0, c->q1 = slice ? 5 : T, c->Tq = c->q1 - c->q0, c->accumulate = slice;
    c->drop = (ptdp_attn_dropout){ .p = p, .key = 11, .sample0 = 3, .head0 = 0, .heads_total = c->heads };
    const int H = c->heads, K = c->kv, wg = (H + 2 * K) * HD, wr = 3 * H * HD, rows = B * T;
    c->qkv = reals((size_t)rows * wg), c->dqkv = reals((size_t)rows * wg);
    c->ref = reals((size_t)rows * wr), c->dref = reals((size_t)rows * wr);
    c->y = reals((size_t)B * c->Tq * H * HD), c->yref = reals((size_t)B * c->Tq * H * HD);
    c->dy = reals((size_t)B * c->Tq * H * HD);
    c->probs = reals((size_t)B * H * c->Tq * c->q1), c->pref = reals((size_t)B * H * c->Tq * c->q1);
    c->scratch = reals(2 * (size_t)T * T);
    op_fill_random(op_view(c->qkv, rows, wg, wg), 1.5);
    op_fill_random(op_view(c->dy, B * c->Tq, H * HD, H * HD), 1.0);
    if (c->accumulate)   /* what earlier slices left in the key and value gradients */
        op_fill_random(op_view(c->dqkv, rows, wg, wg), 1.0);
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < H; h++) {
            const int g = h / c->group;
            memcpy(&c->ref[r * wr + h * HD], &c->qkv[r * wg + h * HD], sizeof(ptdp_real) * HD);
            memcpy(&c->ref[r * wr + (H + h) * HD], &c->qkv[r * wg + (H + g) * HD], sizeof(ptdp_real) * HD);
            memcpy(&c->ref[r * wr + (2 * H + h) * HD], &c->qkv[r * wg + (H + K + g) * HD], sizeof(ptdp_real) * HD);
        }
}

static void free_case(gqa_case *c)
{
    ptdp_real *all[] = { c->qkv, c->ref, c->dqkv, c->dref, c->y, c->yref, c->dy, c->probs, c->pref, c->scratch };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

/* Both forwards and backwards: GQA on the GQA row, the ordinary attention
 * on the reference row. */
static void run_case(gqa_case *c)
{
    const int H = c->heads, K = c->kv, wg = (H + 2 * K) * HD, wr = 3 * H * HD, rows = B * T;
    ptdp_tensor qkv = op_view(c->qkv, rows, wg, wg), ref = op_view(c->ref, rows, wr, wr);
    ptdp_tensor y = op_view(c->y, B * c->Tq, H * HD, H * HD), yref = op_view(c->yref, B * c->Tq, H * HD, H * HD);
    ptdp_tensor dy = op_view(c->dy, B * c->Tq, H * HD, H * HD);
    const ptdp_attn_dropout *d = &c->drop;
    ptdp_attention_gqa_forward_slice(y, c->probs, qkv, T, c->q0, c->q1, H, K, HD, d, c->scratch);
    ptdp_attention_forward_slice(yref, c->pref, ref, T, c->q0, c->q1, H, HD, d, c->scratch);
    ptdp_attention_gqa_backward_slice(op_view(c->dqkv, rows, wg, wg), dy, qkv, c->probs, T, c->q0, c->q1, H, K, HD,
                                      d, c->accumulate, c->scratch);
    ptdp_attention_backward_slice(op_view(c->dref, rows, wr, wr), dy, ref, c->pref, T, c->q0, c->q1, H, HD, d,
                                  false, c->scratch);
}

LOOP_TEST(gqa_tests, test_gqa_equals_attention_with_kv_heads_copied, NCONFIG * 4)
{
    gqa_case c;
    make_case(&c, _i % NCONFIG, _i / NCONFIG % 2 ? 0.25 : 0.0, _i / NCONFIG / 2 == 1);
    ptdp_real *dqkv_before = reals((size_t)B * T * (c.heads + 2 * c.kv) * HD);
    memcpy(dqkv_before, c.dqkv, sizeof(ptdp_real) * (size_t)B * T * (c.heads + 2 * c.kv) * HD);
    run_case(&c);
    const int H = c.heads, K = c.kv, wg = (H + 2 * K) * HD, wr = 3 * H * HD;
    const double tol = 16 * OP_REL * c.group;
    for (size_t i = 0; i < (size_t)B * H * c.Tq * c.q1; i++)
        ASSERT_CLOSE(c.probs[i], c.pref[i], OP_REL);
    for (size_t i = 0; i < (size_t)B * c.Tq * H * HD; i++)
        ASSERT_CLOSE(c.y[i], c.yref[i], tol);
    for (int r = 0; r < B * T; r++) {
        const bool query = r % T >= c.q0 && r % T < c.q1, key = r % T < c.q1;
        for (int j = 0; j < H * HD; j++)           /* dq of the slice's rows */
            if (query)
                ASSERT_CLOSE(c.dqkv[r * wg + j], c.dref[r * wr + j], tol);
        for (int g = 0; g < K; g++)
            for (int j = 0; j < HD; j++)
                for (int kv = 0; kv < 2; kv++) {   /* dk, then dv: the group's sum (+ what was there) */
                    const int col = (H + kv * K + g) * HD + j;
                    double want = c.accumulate ? dqkv_before[r * wg + col] : 0.0;
                    for (int h = g * c.group; h < (g + 1) * c.group && key; h++)
                        want += c.dref[r * wr + (H + kv * H + h) * HD + j];
                    if (key)
                        ASSERT_CLOSE(c.dqkv[r * wg + col], want, tol);
                }
    }
    /* kv_heads = heads: the GQA row is the ordinary row, and the bits are the ordinary calls' */
    if (K == H) {
        ck_assert(memcmp(c.qkv, c.ref, sizeof(ptdp_real) * (size_t)B * T * wr) == 0);
        ck_assert(memcmp(c.probs, c.pref, sizeof(ptdp_real) * (size_t)B * H * c.Tq * c.q1) == 0);
        ck_assert(memcmp(c.y, c.yref, sizeof(ptdp_real) * (size_t)B * c.Tq * H * HD) == 0);
        if (!c.accumulate)
            ck_assert(memcmp(c.dqkv, c.dref, sizeof(ptdp_real) * (size_t)B * T * wr) == 0);
    }
    free(dqkv_before);
    free_case(&c);
}
END_TEST

/* The whole-sequence calls are the slice q0 = 0, q1 = T. */
TEST(gqa_tests, test_gqa_whole_sequence_calls_are_the_full_slice)
{
    gqa_case c;
    make_case(&c, 1, 0.25, false);
    run_case(&c);
    const int H = c.heads, K = c.kv, wg = (H + 2 * K) * HD, rows = B * T;
    ptdp_real *y = reals((size_t)rows * H * HD), *dqkv = reals((size_t)rows * wg);
    ptdp_real *probs = reals((size_t)B * H * T * T);
    ptdp_tensor qkv = op_view(c.qkv, rows, wg, wg);
    ptdp_attention_gqa_forward(op_view(y, rows, H * HD, H * HD), probs, qkv, T, H, K, HD, &c.drop, c.scratch);
    ptdp_attention_gqa_backward(op_view(dqkv, rows, wg, wg), op_view(c.dy, rows, H * HD, H * HD), qkv, probs, T, H,
                                K, HD, &c.drop, c.scratch);
    ck_assert(memcmp(y, c.y, sizeof(ptdp_real) * (size_t)rows * H * HD) == 0);
    ck_assert(memcmp(probs, c.probs, sizeof(ptdp_real) * (size_t)B * H * T * T) == 0);
    ck_assert(memcmp(dqkv, c.dqkv, sizeof(ptdp_real) * (size_t)rows * wg) == 0);
    free(y), free(dqkv), free(probs);
    free_case(&c);
}
END_TEST

static void three_kv_heads_for_four(void)
{
    static ptdp_real qkv[T * (4 + 6) * HD], y[T * 4 * HD], probs[4 * T * T];
    ptdp_attention_gqa_forward(op_view(y, T, 4 * HD, 4 * HD), probs, op_view(qkv, T, 10 * HD, 10 * HD), T, 4, 3,
                               HD, NULL, NULL);
}

TEST(gqa_tests, test_gqa_refuses_a_group_that_does_not_divide_the_heads)
{
    char err[1024] = "";
    const int status = harness_run_child(three_kv_heads_for_four, err, sizeof err);
    ck_assert_msg(status != 0, "the child should have stopped");
    ASSERT_HAS(err, "4 heads and 3 kv heads");
}
END_TEST

int main(void)
{
    return harness_main("attention_gqa");
}
