/*
 * test_attention_tiled.c — attention in tiles (attention_tiled.c) against
 * the whole-matrix attention (attention.c), values and gradients.
 *
 *   forward    y equals attention.c's; lse_t = log sum_s e^(S[t][s]) over
 *              the keys t sees, from the full kernel's own scores
 *   backward   dq, dk, dv equal attention.c's (written, or added to what
 *              earlier slices left with accumulate_kv)
 * for T = 5, 64, 65 and 150 (below one tile of 64, one exactly, one and a
 * row, two and a part), heads / kv_heads = 1, 2, 4, with and without
 * dropout, over whole sequences and over a slice of queries (TeraPipe's
 * call, q0 not on a tile's edge).  Built in double and in float; the sums
 * go in another order, so the agreement is to rounding (OP_REL scaled).
 * The backward from a delta given (Ulysses' call, delta made by
 * ptdp_attention_tiled_delta) equals the backward from y.  The count of
 * scores the tiles compute is checked against a walk of the tiles by hand.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "op_check.h"
#include "ptdp/ops.h"

static const harness_tcase tiled_tests = { .name = "attention_tiled" };

enum { B = 2, HD = 8 };

static const int LENGTHS[] = { 5, 64, 65, 150 };
/* heads, kv_heads */
static const int CONFIGS[][2] = { { 4, 4 }, { 4, 2 }, { 4, 1 } };
enum { NLEN = 4, NCONFIG = 3 };

static ptdp_real *reals(size_t n)
{
    ptdp_real *p = calloc(n, sizeof(ptdp_real));
    ck_assert(p != NULL);
    return p;
}

typedef struct {
    int T, H, K, q0, q1, Tq, wq, wy;
    bool slice;
    ptdp_attn_dropout drop;
    ptdp_real *qkv, *dy, *y, *yref, *lse, *probs, *dqkv, *dref, *before, *scratch, *sref;
} tiled_case;

static void make_case(tiled_case *c, int len, int config, double p, bool slice)
{
    c->T = LENGTHS[len], c->H = CONFIGS[config][0], c->K = CONFIGS[config][1];
    c->slice = slice && c->T > 3;
    c->q0 = c->slice ? c->T / 3 + 1 : 0, c->q1 = c->slice ? c->T - 1 : c->T, c->Tq = c->q1 - c->q0;
    c->wq = (c->H + 2 * c->K) * HD, c->wy = c->H * HD;
    c->drop = (ptdp_attn_dropout){ .p = p, .key = 7, .sample0 = 5, .head0 = 2, .heads_total = 8 };
    const size_t rows = (size_t)B * c->T, yrows = (size_t)B * c->Tq;
    c->qkv = reals(rows * c->wq), c->dqkv = reals(rows * c->wq), c->dref = reals(rows * c->wq);
    c->before = reals(rows * c->wq);
    c->dy = reals(yrows * c->wy), c->y = reals(yrows * c->wy), c->yref = reals(yrows * c->wy);
    c->lse = reals((size_t)B * c->H * c->Tq), c->probs = reals((size_t)B * c->H * c->Tq * c->q1);
    c->scratch = reals(ptdp_attention_tiled_scratch()), c->sref = reals(2 * (size_t)c->T * c->T);
    op_fill_random(op_view(c->qkv, (int)rows, c->wq, c->wq), 2.0);
    op_fill_random(op_view(c->dy, (int)yrows, c->wy, c->wy), 1.0);
    /* In a slice, what later slices left in the key and value gradients,
     * to be added to; over a whole sequence, what a write must replace. */
    op_fill_random(op_view(c->before, (int)rows, c->wq, c->wq), 1.0);
    memcpy(c->dqkv, c->before, sizeof(ptdp_real) * rows * c->wq);
    memcpy(c->dref, c->before, sizeof(ptdp_real) * rows * c->wq);
}

static void free_case(tiled_case *c)
{
    ptdp_real *all[] = { c->qkv, c->dy, c->y, c->yref, c->lse, c->probs, c->dqkv, c->dref, c->before, c->scratch,
                         c->sref };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

static void run_case(tiled_case *c)
{
    const int rows = B * c->T, yrows = B * c->Tq;
    const ptdp_tensor qkv = op_view(c->qkv, rows, c->wq, c->wq), dy = op_view(c->dy, yrows, c->wy, c->wy);
    const ptdp_tensor y = op_view(c->y, yrows, c->wy, c->wy), yref = op_view(c->yref, yrows, c->wy, c->wy);
    ptdp_attention_tiled_forward(y, c->lse, qkv, c->T, c->q0, c->q1, c->H, c->K, HD, &c->drop, c->scratch);
    ptdp_attention_tiled_backward(op_view(c->dqkv, rows, c->wq, c->wq), dy, qkv, y, c->lse, c->T, c->q0, c->q1,
                                  c->H, c->K, HD, &c->drop, c->slice, c->scratch);
    ptdp_attention_gqa_forward_slice(yref, c->probs, qkv, c->T, c->q0, c->q1, c->H, c->K, HD, &c->drop, c->sref);
    ptdp_attention_gqa_backward_slice(op_view(c->dref, rows, c->wq, c->wq), dy, qkv, c->probs, c->T, c->q0, c->q1,
                                      c->H, c->K, HD, &c->drop, c->slice, c->sref);
}

/* lse of query row i of head h, sample b, from the scores themselves. */
static double lse_by_hand(const tiled_case *c, int b, int h, int i)
{
    const int t = c->q0 + i, g = h / (c->H / c->K);
    const ptdp_real *q = &c->qkv[((size_t)b * c->T + t) * c->wq + h * HD];
    double s[256], m = -INFINITY, sum = 0;
    for (int k = 0; k <= t; k++) {
        const ptdp_real *kr = &c->qkv[((size_t)b * c->T + k) * c->wq + (c->H + g) * HD];
        double d = 0;
        for (int j = 0; j < HD; j++)
            d += (double)q[j] * kr[j];
        s[k] = d / sqrt((double)HD);
        m = s[k] > m ? s[k] : m;
    }
    for (int k = 0; k <= t; k++)
        sum += exp(s[k] - m);
    return m + log(sum);
}

LOOP_TEST(tiled_tests, test_tiled_equals_full_attention, NLEN * NCONFIG * 4)
{
    tiled_case c;
    const int len = _i % NLEN, config = _i / NLEN % NCONFIG, variant = _i / NLEN / NCONFIG;
    make_case(&c, len, config, variant % 2 ? 0.2 : 0.0, variant / 2 == 1);
    run_case(&c);
    const double tol = 64 * OP_REL;
    for (size_t i = 0; i < (size_t)B * c.Tq * c.wy; i++)
        ASSERT_CLOSE(c.y[i], c.yref[i], tol);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < c.H; h++)
            for (int i = 0; i < c.Tq; i++)
                ASSERT_CLOSE(c.lse[((size_t)b * c.H + h) * c.Tq + i], lse_by_hand(&c, b, h, i), tol);
    for (size_t r = 0; r < (size_t)B * c.T; r++) {
        const int t = (int)(r % (size_t)c.T);
        for (int j = 0; j < c.wq; j++) {
            const size_t k = r * c.wq + j;
            const bool query = j < c.wy && t >= c.q0 && t < c.q1, key = j >= c.wy && t < c.q1;
            if (query || key)
                ASSERT_CLOSE(c.dqkv[k], c.dref[k], tol);
            else   /* rows past the slice's keys, and other slices' queries: untouched */
                ck_assert(c.dqkv[k] == c.before[k]);
        }
    }
    free_case(&c);
}
END_TEST

/* delta = dY . y made apart and given: the same gradients as from y (the
 * same bits in double; in float delta is rounded to float once). */
LOOP_TEST(tiled_tests, test_tiled_backward_from_delta_equals_from_y, NCONFIG * 2)
{
    tiled_case c;
    make_case(&c, 3, _i % NCONFIG, _i / NCONFIG ? 0.2 : 0.0, false);
    run_case(&c);
    const int rows = B * c.T, yrows = B * c.Tq;
    ptdp_real *delta = reals((size_t)yrows * c.H), *dqkv = reals((size_t)rows * c.wq);
    ptdp_attention_tiled_delta(op_view(delta, yrows, c.H, c.H), op_view(c.dy, yrows, c.wy, c.wy),
                               op_view(c.y, yrows, c.wy, c.wy), HD);
    ptdp_attention_tiled_backward_delta(op_view(dqkv, rows, c.wq, c.wq), op_view(c.dy, yrows, c.wy, c.wy),
                                        op_view(c.qkv, rows, c.wq, c.wq), op_view(delta, yrows, c.H, c.H), c.lse,
                                        c.T, 0, c.T, c.H, c.K, HD, &c.drop, false, c.scratch);
    for (size_t i = 0; i < (size_t)rows * c.wq; i++)
        ASSERT_CLOSE(dqkv[i], c.dqkv[i], 16 * OP_REL);
    free(delta), free(dqkv);
    free_case(&c);
}
END_TEST

/* The count the clock charges: every (query tile, key tile) pair up to the
 * diagonal, by hand for small cases, and about half of T² for long ones. */
TEST(tiled_tests, test_tiled_scores_count_the_pairs_of_tiles)
{
    ck_assert(ptdp_attention_tiled_scores(0, 5) == 25);
    ck_assert(ptdp_attention_tiled_scores(0, 64) == 64 * 64);
    ck_assert(ptdp_attention_tiled_scores(0, 65) == 64 * 64 + 1 * 64 + 1 * 1);
    ck_assert(ptdp_attention_tiled_scores(0, 128) == 3 * 64 * 64);
    ck_assert(ptdp_attention_tiled_scores(64, 128) == 2 * 64 * 64);   /* a slice: its tile sees two */
    const double n = ptdp_attention_tiled_scores(0, 1024);
    ck_assert(n == 1024.0 * 1024 / 2 + 1024 * 64 / 2);
}
END_TEST

int main(void)
{
    return harness_main("attention_tiled");
}
