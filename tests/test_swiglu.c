/*
 * test_swiglu.c — SwiGLU's gate h = silu(a) ⊙ b and its backward.
 *
 *   hand        silu(0) = 0, silu(1) = 1 / (1 + e^{−1}), silu(−1) =
 *               −e^{−1} / (1 + e^{−1}), and their derivatives written out
 *   far tails   a = ±1000 (and ±100, where e^{|a|} overflows a float) stay
 *               finite: silu(1000) = 1000, silu(−1000) = 0, da = dh b or 0
 *   formula     random strided rows against the formulas in double
 *   gradients   da and db by central differences (double build)
 *   in place    h may be a; da and db may be dh and a
 */
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "op_check.h"
#include "ptdp/ops.h"

static const harness_tcase swiglu_tests = { .name = "swiglu" };

static double sigmoid_ref(double a)
{
    return 1 / (1 + exp(-a));
}

static double da_ref(double dh, double a, double b)
{
    const double s = sigmoid_ref(a);
    return dh * b * s * (1 + a * (1 - s));
}

TEST(swiglu_tests, test_swiglu_hand_computed_values)
{
    enum { N = 3 };
    ptdp_real a[N] = { 0, 1, -1 }, b[N] = { 5, 2, 3 }, h[N], dh[N] = { 1, 1, 2 }, da[N], db[N];
    const double e = exp(-1.0), s1 = 1 / (1 + e), sm = e / (1 + e);   /* σ(1), σ(−1) */
    const double tol = sizeof(ptdp_real) == 4 ? 4e-7 : 1e-15;
    ptdp_swiglu_forward(op_view(h, 1, N, N), op_view(a, 1, N, N), op_view(b, 1, N, N));
    ASSERT_CLOSE(h[0], 0.0, tol);
    ASSERT_CLOSE(h[1], 2 * s1, tol);
    ASSERT_CLOSE(h[2], 3 * -sm, tol);
    ptdp_swiglu_backward(op_view(da, 1, N, N), op_view(db, 1, N, N), op_view(dh, 1, N, N), op_view(a, 1, N, N),
                         op_view(b, 1, N, N));
    /* da = dh b σ (1 + a (1 − σ)): at 0, 5 · 1/2; at 1, 2 σ(1)(1 + σ(−1)); at −1, 2 · 3 σ(−1)(1 − σ(1)) */
    ASSERT_CLOSE(da[0], 2.5, tol);
    ASSERT_CLOSE(da[1], 2 * s1 * (1 + sm), tol);
    ASSERT_CLOSE(da[2], 6 * sm * (1 - s1), tol);
    ASSERT_CLOSE(db[0], 0.0, tol);                       /* db = dh silu(a) */
    ASSERT_CLOSE(db[1], s1, tol);
    ASSERT_CLOSE(db[2], 2 * -sm, tol);
    ck_assert(ptdp_swiglu_flops_forward(10) == 50.0);
    ck_assert(ptdp_swiglu_flops_backward(10) == 110.0);
}
END_TEST

TEST(swiglu_tests, test_swiglu_far_tails_stay_finite)
{
    enum { N = 6 };
    ptdp_real a[N] = { 1000, -1000, 100, -100, 89, -89 }, b[N] = { 2, 2, -3, -3, 1, 1 };
    ptdp_real h[N], dh[N] = { 1, 1, 1, 1, 1, 1 }, da[N], db[N];
    ptdp_swiglu_forward(op_view(h, 1, N, N), op_view(a, 1, N, N), op_view(b, 1, N, N));
    ptdp_swiglu_backward(op_view(da, 1, N, N), op_view(db, 1, N, N), op_view(dh, 1, N, N), op_view(a, 1, N, N),
                         op_view(b, 1, N, N));
    for (int i = 0; i < N; i++)
        ck_assert_msg(isfinite(h[i]) && isfinite(da[i]) && isfinite(db[i]), "a = %g: h %g, da %g, db %g",
                      (double)a[i], (double)h[i], (double)da[i], (double)db[i]);
    ck_assert(h[0] == 2000 && db[0] == 1000 && da[0] == 2);     /* σ(1000) = 1 exactly */
    ck_assert(h[1] == 0 && db[1] == 0 && da[1] == 0);           /* σ(−1000) = 0 exactly */
    ASSERT_CLOSE(h[2], -300, 1e-9);
    ASSERT_CLOSE(da[3], 0, 1e-38);
    ASSERT_CLOSE(h[5], 0, 1e-30);
}
END_TEST

enum { R = 4, C = 300, S = 305 };   /* wider than one span of 256 */

TEST(swiglu_tests, test_swiglu_matches_formula_on_strided_views)
{
    static ptdp_real ab[R * S], bb[R * S], hb[R * S], dhb[R * S], dab[R * S], dbb[R * S];
    const uint64_t drawn = op_rng_state;
    op_fill_random(op_view(ab, R, S, S), 8.0);
    op_fill_random(op_view(bb, R, S, S), 2.0);
    op_fill_random(op_view(dhb, R, S, S), 1.0);
    op_fill_all(hb, R * S, 555);
    op_fill_all(dab, R * S, 555);
    op_fill_all(dbb, R * S, 555);
    ptdp_tensor a = op_view(ab + 1, R, C, S), b = op_view(bb + 2, R, C, S), h = op_view(hb + 3, R, C, S);
    ptdp_tensor dh = op_view(dhb + 4, R, C, S), da = op_view(dab + 5, R, C, S), db = op_view(dbb, R, C, S);
    ptdp_swiglu_forward(h, a, b);
    ptdp_swiglu_backward(da, db, dh, a, b);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) {
            const double x = op_at(a, i, j), y = op_at(b, i, j), g = op_at(dh, i, j), silu = x * sigmoid_ref(x);
            ASSERT_CLOSE(op_at(h, i, j), silu * y, 4 * OP_REL * fmax(1, fabs(x * y)));
            ASSERT_CLOSE(op_at(db, i, j), g * silu, 4 * OP_REL * fmax(1, fabs(x)));
            ASSERT_CLOSE(op_at(da, i, j), da_ref(g, x, y), 8 * OP_REL * fmax(1, fabs(x * y)));
        }
    for (int i = 0; i < R; i++)
        for (int j = 0; j < S; j++) {
            ck_assert(j >= 3 && j < 3 + C ? 1 : hb[i * S + j] == 555);
            ck_assert(j >= 5 && j < 5 + C ? 1 : dab[i * S + j] == 555);
            ck_assert(j < C ? 1 : dbb[i * S + j] == 555);
        }
    /* in place: h may be a; da may be dh and db may be a */
    ptdp_real h_keep = *ptdp_at(h, 1, 7), da_keep = *ptdp_at(da, 2, 9), db_keep = *ptdp_at(db, 3, 11);
    ptdp_swiglu_backward(dh, a, dh, a, b);
    ck_assert(*ptdp_at(dh, 2, 9) == da_keep && *ptdp_at(a, 3, 11) == db_keep);
    op_rng_state = drawn;                                /* a again, as drawn first */
    op_fill_random(op_view(ab, R, S, S), 8.0);
    ptdp_swiglu_forward(a, a, b);
    ck_assert(*ptdp_at(a, 1, 7) == h_keep);
}
END_TEST

#ifdef PTDP_DOUBLE
TEST(swiglu_tests, test_swiglu_backward_finite_differences)
{
    enum { N = 41 };
    ptdp_real a[N], b[N], dh[N], da[N], db[N], hp, hm;
    for (int i = 0; i < N; i++) {
        a[i] = -10.0 + 0.5 * i;                          /* −10 … 10: both tails and the dip */
        b[i] = 1.5 - 0.07 * i;
        dh[i] = 1.0;
    }
    ptdp_swiglu_backward(op_view(da, 1, N, N), op_view(db, 1, N, N), op_view(dh, 1, N, N), op_view(a, 1, N, N),
                         op_view(b, 1, N, N));
    for (int i = 0; i < N; i++)
        for (int which = 0; which < 2; which++) {
            ptdp_real *p = which ? &b[i] : &a[i], keep = *p;
            *p = keep + OP_FD_H;
            ptdp_swiglu_forward(op_view(&hp, 1, 1, 1), op_view(&a[i], 1, 1, 1), op_view(&b[i], 1, 1, 1));
            *p = keep - OP_FD_H;
            ptdp_swiglu_forward(op_view(&hm, 1, 1, 1), op_view(&a[i], 1, 1, 1), op_view(&b[i], 1, 1, 1));
            *p = keep;
            const double numeric = (hp - hm) / (2 * OP_FD_H), got = which ? db[i] : da[i];
            ASSERT_CLOSE(got, numeric, OP_FD_REL * fmax(1, fabs(numeric)));
        }
}
END_TEST
#endif

int main(void)
{
    return harness_main("swiglu");
}
