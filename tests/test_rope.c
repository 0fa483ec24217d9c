/*
 * test_rope.c — rotary position embeddings: the rotation's own laws, a
 * hand-computed row, global positions, and the gradient.
 *
 *   hand          hd 4, theta 10^4, position 1: pair 0 turns by 1 rad,
 *                 pair 1 by 10^4^(−1/2) = 0.01 rad
 *   laws          each pair keeps its norm; position 0 is the identity (bit
 *                 for bit); forward then backward is the identity; turning
 *                 twice by position p is turning once by 2p
 *   columns       only the heads from col0 are touched; every head of a
 *                 row turns alike; sample b's row b T + t is at pos[t]
 *   global pos    a context-parallel chunk with its global positions
 *                 equals those rows of the whole sequence rotated
 *   gradient      backward(R) = d sum(forward(x) ⊙ R) / dx by central
 *                 differences (double build)
 */
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "op_check.h"
#include "ptdp/ops.h"

static const harness_tcase rope_tests = { .name = "rope" };

static const double THETA = 10000.0;

TEST(rope_tests, test_rope_hand_computed_row)
{
    ptdp_real x[4] = { 1, 0, 0, 1 };
    const int64_t pos[1] = { 1 };
    ptdp_rope_forward(op_view(x, 1, 4, 4), 0, 1, 4, pos, 1, THETA);
    const double tol = sizeof(ptdp_real) == 4 ? 1e-7 : 1e-16;
    ASSERT_CLOSE(x[0], cos(1.0), tol);          /* (1, 0) → (cos 1, sin 1) */
    ASSERT_CLOSE(x[1], sin(1.0), tol);
    ASSERT_CLOSE(x[2], -sin(0.01), tol);        /* (0, 1) → (−sin 0.01, cos 0.01) */
    ASSERT_CLOSE(x[3], cos(0.01), tol);
    ck_assert(ptdp_rope_flops(10, 2, 4) == 240.0);
}
END_TEST

enum { B = 2, T = 5, HEADS = 3, HD = 8, COL0 = 4, WIDTH = COL0 + HEADS * HD + 3 };

static void random_rows(ptdp_real *x, int rows)
{
    op_fill_random(op_view(x, rows, WIDTH, WIDTH), 1.0);
}

TEST(rope_tests, test_rope_keeps_norms_and_undoes_itself)
{
    static ptdp_real x[B * T * WIDTH], x0[B * T * WIDTH];
    const int64_t pos[T] = { 0, 1, 7, 100, 4093 };
    random_rows(x, B * T);
    memcpy(x0, x, sizeof x);
    ptdp_tensor X = op_view(x, B * T, WIDTH, WIDTH);
    ptdp_rope_forward(X, COL0, HEADS, HD, pos, T, THETA);
    for (int r = 0; r < B * T; r++)
        for (int j = 0; j < WIDTH; j++) {
            const int c = j - COL0;
            if (c < 0 || c >= HEADS * HD)          /* outside the heads: untouched */
                ck_assert(x[r * WIDTH + j] == x0[r * WIDTH + j]);
            else if (r % T == 0)                   /* position 0: the identity, bit for bit */
                ck_assert(x[r * WIDTH + j] == x0[r * WIDTH + j]);
            if (c >= 0 && c < HEADS * HD && c % 2 == 0) {
                const double a0 = x0[r * WIDTH + j], a1 = x0[r * WIDTH + j + 1];
                const double b0 = x[r * WIDTH + j], b1 = x[r * WIDTH + j + 1];
                ASSERT_CLOSE(b0 * b0 + b1 * b1, a0 * a0 + a1 * a1, 4 * OP_REL);
            }
        }
    ptdp_rope_backward(X, COL0, HEADS, HD, pos, T, THETA);
    for (int i = 0; i < B * T * WIDTH; i++)
        ASSERT_CLOSE(x[i], x0[i], 4 * OP_REL);
}
END_TEST

TEST(rope_tests, test_rope_twice_by_p_is_once_by_2p)
{
    static ptdp_real x[T * WIDTH], y[T * WIDTH];
    const int64_t pos[T] = { 1, 3, 10, 250, 2047 }, twice[T] = { 2, 6, 20, 500, 4094 };
    random_rows(x, T);
    memcpy(y, x, sizeof x);
    ptdp_rope_forward(op_view(x, T, WIDTH, WIDTH), COL0, HEADS, HD, pos, T, THETA);
    ptdp_rope_forward(op_view(x, T, WIDTH, WIDTH), COL0, HEADS, HD, pos, T, THETA);
    ptdp_rope_forward(op_view(y, T, WIDTH, WIDTH), COL0, HEADS, HD, twice, T, THETA);
    for (int i = 0; i < T * WIDTH; i++)
        ASSERT_CLOSE(x[i], y[i], 8 * OP_REL);
}
END_TEST

/* Row b T + t of every sample turns by pos[t], every head alike, each pair
 * by pos theta^(−2i/hd) — the formula written out in double. */
TEST(rope_tests, test_rope_matches_formula_for_every_sample_and_head)
{
    static ptdp_real x[B * T * WIDTH], x0[B * T * WIDTH];
    const int64_t pos[T] = { 3, 9, 0, 64, 1000 };
    random_rows(x, B * T);
    memcpy(x0, x, sizeof x);
    ptdp_rope_forward(op_view(x, B * T, WIDTH, WIDTH), COL0, HEADS, HD, pos, T, THETA);
    for (int r = 0; r < B * T; r++)
        for (int h = 0; h < HEADS; h++)
            for (int i = 0; i < HD / 2; i++) {
                const int j = r * WIDTH + COL0 + h * HD + 2 * i;
                const double a = (double)pos[r % T] * pow(THETA, -2.0 * i / HD);
                const double w0 = x0[j] * cos(a) - x0[j + 1] * sin(a), w1 = x0[j] * sin(a) + x0[j + 1] * cos(a);
                ASSERT_CLOSE(x[j], w0, 4 * OP_REL);
                ASSERT_CLOSE(x[j + 1], w1, 4 * OP_REL);
            }
}
END_TEST

/* Context parallelism's zigzag: of a sequence of 8 cut in 4 chunks of 2
 * over 2 ranks, rank 0 holds chunks 0 and 3 (positions 0 1 6 7), and its
 * rows rotated by those global positions equal the whole sequence's. */
TEST(rope_tests, test_rope_chunk_at_global_positions_equals_the_whole_sequence)
{
    enum { TW = 8, TL = 4 };
    static ptdp_real whole[B * TW * WIDTH], part[B * TL * WIDTH];
    const int64_t all[TW] = { 0, 1, 2, 3, 4, 5, 6, 7 }, mine[TL] = { 0, 1, 6, 7 };
    random_rows(whole, B * TW);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < TL; t++)
            memcpy(part + (b * TL + t) * WIDTH, whole + (b * TW + mine[t]) * WIDTH, sizeof(ptdp_real) * WIDTH);
    ptdp_rope_forward(op_view(whole, B * TW, WIDTH, WIDTH), COL0, HEADS, HD, all, TW, THETA);
    ptdp_rope_forward(op_view(part, B * TL, WIDTH, WIDTH), COL0, HEADS, HD, mine, TL, THETA);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < TL; t++)
            ck_assert(memcmp(part + (b * TL + t) * WIDTH, whole + (b * TW + mine[t]) * WIDTH,
                             sizeof(ptdp_real) * WIDTH) == 0);
}
END_TEST

#ifdef PTDP_DOUBLE
TEST(rope_tests, test_rope_backward_finite_differences)
{
    static ptdp_real x[B * T * WIDTH], y[B * T * WIDTH], r[B * T * WIDTH], g[B * T * WIDTH];
    const int64_t pos[T] = { 2, 5, 11, 31, 77 };
    random_rows(x, B * T);
    random_rows(r, B * T);
    memcpy(g, r, sizeof r);
    ptdp_rope_backward(op_view(g, B * T, WIDTH, WIDTH), COL0, HEADS, HD, pos, T, THETA);
    ptdp_tensor Y = op_view(y, B * T, WIDTH, WIDTH), Rt = op_view(r, B * T, WIDTH, WIDTH);
    for (int i = 0; i < B * T * WIDTH; i++) {
        const ptdp_real keep = x[i];
        double L[2];
        for (int side = 0; side < 2; side++) {
            x[i] = keep + (side ? -OP_FD_H : OP_FD_H);
            memcpy(y, x, sizeof x);
            ptdp_rope_forward(Y, COL0, HEADS, HD, pos, T, THETA);
            L[side] = op_dot(Y, Rt);
        }
        x[i] = keep;
        const double numeric = (L[0] - L[1]) / (2 * OP_FD_H);
        ASSERT_CLOSE(g[i], numeric, OP_FD_REL * fmax(1, fabs(numeric)));
    }
}
END_TEST
#endif

int main(void)
{
    return harness_main("rope");
}
