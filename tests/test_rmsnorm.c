/*
 * test_rmsnorm.c — RMSNorm's forward and backward against a hand-computed
 * row, the formula in double, and finite differences.
 *
 *   hand        x = (3, 4), w = (1, 2), eps 0: rms = sqrt(12.5), xhat =
 *               (0.6, 0.8) sqrt 2, y = (0.6, 1.6) sqrt 2; with dy = (1, 0)
 *               dw = (0.6 sqrt 2, 0), dx = (0.128, −0.096) sqrt 2
 *   formula     random strided rows against y = x / sqrt(mean x^2 + eps) w
 *               and dx = rstd (g − xhat mean(g xhat)) in double
 *   gradients   dx and dw by central differences (double build)
 *   in place    y may be x; dx may be dy; accumulate_dx adds, dw accumulates
 */
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "op_check.h"
#include "ptdp/ops.h"

static const harness_tcase rmsnorm_tests = { .name = "rmsnorm" };

TEST(rmsnorm_tests, test_rmsnorm_hand_computed_row)
{
    ptdp_real x[2] = { 3, 4 }, w[2] = { 1, 2 }, y[2], rstd[1], dy[2] = { 1, 0 }, dx[2], dw[2] = { 0, 0 };
    const double r2 = sqrt(2.0), tol = sizeof(ptdp_real) == 4 ? 1e-6 : 1e-15;
    ptdp_rmsnorm_forward(op_view(y, 1, 2, 2), rstd, op_view(x, 1, 2, 2), op_view(w, 1, 2, 2), 0.0);
    ASSERT_CLOSE(rstd[0], r2 / 5, tol);                 /* 1 / sqrt(12.5) */
    ASSERT_CLOSE(y[0], 0.6 * r2, tol);
    ASSERT_CLOSE(y[1], 1.6 * r2, tol);
    ptdp_rmsnorm_backward(op_view(dx, 1, 2, 2), op_view(dw, 1, 2, 2), op_view(dy, 1, 2, 2), op_view(x, 1, 2, 2),
                          op_view(w, 1, 2, 2), rstd, false);
    /* g = (1, 0), mean(g xhat) = 0.3 sqrt 2, dx = rstd (g − xhat 0.3 sqrt 2) = rstd (0.64, −0.48) */
    ASSERT_CLOSE(dw[0], 0.6 * r2, tol);
    ASSERT_CLOSE(dw[1], 0.0, tol);
    ASSERT_CLOSE(dx[0], 0.128 * r2, tol);
    ASSERT_CLOSE(dx[1], -0.096 * r2, tol);
    ck_assert(ptdp_rmsnorm_flops_forward(10) == 40.0);
    ck_assert(ptdp_rmsnorm_flops_backward(10) == 110.0);
}
END_TEST

enum { R = 5, C = 13, S = 17 };
static const double EPS = 1e-5;

/* x, w, dy random; the views strided inside wider rows. */
typedef struct {
    ptdp_real xb[R * S], yb[R * S], dyb[R * S], dxb[R * S], w[C], dw[C], rstd[R];
    ptdp_tensor x, y, dy, dx, W, dW;
} rms_case;

static void make_case(rms_case *k)
{
    op_fill_random(op_view(k->xb, R, S, S), 2.0);
    op_fill_random(op_view(k->dyb, R, S, S), 1.0);
    op_fill_random(op_view(k->w, 1, C, C), 1.5);
    op_fill_all(k->yb, R * S, 555);
    op_fill_all(k->dxb, R * S, 555);
    op_fill_all(k->dw, C, 0);
    k->x = op_view(k->xb + 1, R, C, S);
    k->y = op_view(k->yb + 3, R, C, S);
    k->dy = op_view(k->dyb + 2, R, C, S);
    k->dx = op_view(k->dxb + 4, R, C, S);
    k->W = op_view(k->w, 1, C, C);
    k->dW = op_view(k->dw, 1, C, C);
}

TEST(rmsnorm_tests, test_rmsnorm_matches_formula_on_strided_views)
{
    static rms_case k;
    make_case(&k);
    ptdp_rmsnorm_forward(k.y, k.rstd, k.x, k.W, EPS);
    ptdp_rmsnorm_backward(k.dx, k.dW, k.dy, k.x, k.W, k.rstd, false);
    double dw_ref[C] = { 0 };
    for (int i = 0; i < R; i++) {
        double ms = 0, sgx = 0;
        for (int j = 0; j < C; j++)
            ms += op_at(k.x, i, j) * op_at(k.x, i, j) / C;
        const double rs = 1 / sqrt(ms + EPS);
        ASSERT_CLOSE(k.rstd[i], rs, OP_REL * rs);
        for (int j = 0; j < C; j++) {
            const double xhat = op_at(k.x, i, j) * rs, g = op_at(k.dy, i, j) * k.w[j];
            ASSERT_CLOSE(op_at(k.y, i, j), xhat * k.w[j], 4 * OP_REL * fmax(1, fabs(xhat * k.w[j])));
            sgx += g * xhat / C;
            dw_ref[j] += op_at(k.dy, i, j) * xhat;
        }
        for (int j = 0; j < C; j++) {
            const double xhat = op_at(k.x, i, j) * rs, g = op_at(k.dy, i, j) * k.w[j];
            const double want = rs * (g - xhat * sgx);
            ASSERT_CLOSE(op_at(k.dx, i, j), want, 20 * OP_REL * rs * (fabs(g) + fabs(xhat * sgx) + 1));
        }
    }
    for (int j = 0; j < C; j++)
        ASSERT_CLOSE(k.dw[j], dw_ref[j], 20 * OP_REL * R);
    /* nothing written outside the views */
    for (int i = 0; i < R; i++)
        for (int j = 0; j < S; j++) {
            if (j < 3 || j >= 3 + C)
                ck_assert(k.yb[i * S + j] == 555);
            if (j < 4 || j >= 4 + C)
                ck_assert(k.dxb[i * S + j] == 555);
        }
}
END_TEST

TEST(rmsnorm_tests, test_rmsnorm_in_place_and_accumulation)
{
    static rms_case k;
    make_case(&k);
    ptdp_rmsnorm_forward(k.y, k.rstd, k.x, k.W, EPS);
    ptdp_rmsnorm_backward(k.dx, k.dW, k.dy, k.x, k.W, k.rstd, false);
    ptdp_real dw1[C], dx1[R * C];
    for (int j = 0; j < C; j++)
        dw1[j] = k.dw[j];
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            dx1[i * C + j] = *ptdp_at(k.dx, i, j);
    /* accumulate: dx += the same gradient, dw += the same sums */
    ptdp_rmsnorm_backward(k.dx, k.dW, k.dy, k.x, k.W, k.rstd, true);
    for (int j = 0; j < C; j++)   /* the same terms, added onto the first sum: equal to rounding */
        ASSERT_CLOSE(k.dw[j], 2.0 * dw1[j], 8 * OP_REL * R);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            ck_assert(*ptdp_at(k.dx, i, j) == dx1[i * C + j] + dx1[i * C + j]);
    /* dx may be dy */
    ptdp_rmsnorm_backward(k.dy, k.dW, k.dy, k.x, k.W, k.rstd, false);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            ck_assert(*ptdp_at(k.dy, i, j) == dx1[i * C + j]);
    /* y may be x */
    ptdp_real rstd2[R];
    ptdp_rmsnorm_forward(k.x, rstd2, k.x, k.W, EPS);
    for (int i = 0; i < R; i++) {
        ck_assert(rstd2[i] == k.rstd[i]);
        for (int j = 0; j < C; j++)
            ck_assert(*ptdp_at(k.x, i, j) == *ptdp_at(k.y, i, j));
    }
}
END_TEST

#ifdef PTDP_DOUBLE
/* L = sum(y ⊙ dy) for the case's x and w. */
static double loss(rms_case *k)
{
    ptdp_real rstd[R];
    ptdp_rmsnorm_forward(k->y, rstd, k->x, k->W, EPS);
    return op_dot(k->y, k->dy);
}

TEST(rmsnorm_tests, test_rmsnorm_backward_finite_differences)
{
    static rms_case k;
    make_case(&k);
    ptdp_rmsnorm_forward(k.y, k.rstd, k.x, k.W, EPS);
    ptdp_rmsnorm_backward(k.dx, k.dW, k.dy, k.x, k.W, k.rstd, false);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) {
            ptdp_real *p = ptdp_at(k.x, i, j), keep = *p;
            *p = keep + OP_FD_H;
            const double up = loss(&k);
            *p = keep - OP_FD_H;
            const double down = loss(&k);
            *p = keep;
            const double numeric = (up - down) / (2 * OP_FD_H);
            ASSERT_CLOSE(op_at(k.dx, i, j), numeric, OP_FD_REL * fmax(1, fabs(numeric)));
        }
    for (int j = 0; j < C; j++) {
        const ptdp_real keep = k.w[j];
        k.w[j] = keep + OP_FD_H;
        const double up = loss(&k);
        k.w[j] = keep - OP_FD_H;
        const double down = loss(&k);
        k.w[j] = keep;
        const double numeric = (up - down) / (2 * OP_FD_H);
        ASSERT_CLOSE(k.dw[j], numeric, OP_FD_REL * fmax(1, fabs(numeric)));
    }
}
END_TEST
#endif

int main(void)
{
    return harness_main("rmsnorm");
}
