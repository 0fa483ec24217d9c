/*
 * rmsnorm.c — root-mean-square normalisation over the last dimension, and
 * its backward.
 *
 * LayerNorm without the centring and without the shift (Zhang & Sennrich
 * 2019; Meta's llama RMSNorm): each row x (C numbers) is divided by its
 * root mean square, then given a learned scale w:
 *
 *     ms   = (1/C) sum_j x_j^2
 *     rstd = 1 / sqrt(ms + eps)
 *     xhat = x rstd
 *     y    = xhat ⊙ w
 *
 *     x ─► [ × rstd ] ─► xhat ─► [ ⊙ w ] ─► y
 *            └── rstd kept per row for the backward ──┘
 *
 * Backward, with g = dy ⊙ w (the gradient reaching xhat):
 *
 *     dw += sum_rows dy ⊙ xhat
 *     dx  = rstd (g − xhat mean_j(g ⊙ xhat))
 *
 * The second term is the chain rule through rstd, which depends on every
 * x_j (d rstd / d x_k = −rstd^3 x_k / C); there is no mean to move, so
 * LayerNorm's "− mean_j(g)" term is absent.  The backward recomputes xhat
 * from x and rstd instead of keeping it.
 *
 * Row sums are taken in double, in index order (as layernorm.c): the same
 * row gives the same bits every time, on any rank that holds it.
 */
#include "ptdp/ops.h"

#include "ptdp/error.h"

#include <math.h>

/* --------------------------------------------------------------- forward */

void ptdp_rmsnorm_forward(ptdp_tensor y, ptdp_real *rstd, ptdp_tensor x, ptdp_tensor w, double eps)
{
    if (!PTDP_REQUIRE(y.rows == x.rows && y.cols == x.cols && w.cols == x.cols && x.cols > 0,
                      "y %d x %d, x %d x %d, w %d", y.rows, y.cols, x.rows, x.cols, w.cols))
        return;
    const int C = x.cols;
    for (int i = 0; i < x.rows; i++) {
        const ptdp_real *xr = ptdp_at(x, i, 0);
        double sq = 0;                                  /* sum_j x_j^2, in order */
        for (int j = 0; j < C; j++)
            sq += (double)xr[j] * xr[j];
        const ptdp_real rs = (ptdp_real)(1.0 / sqrt(sq / C + eps));
        rstd[i] = rs;
        ptdp_real *yr = ptdp_at(y, i, 0);
        for (int j = 0; j < C; j++)                     /* y may be x: read, then write */
            yr[j] = xr[j] * rs * w.data[j];
    }
}

/* -------------------------------------------------------------- backward */

void ptdp_rmsnorm_backward(ptdp_tensor dx, ptdp_tensor dw, ptdp_tensor dy, ptdp_tensor x, ptdp_tensor w,
                           const ptdp_real *rstd, bool accumulate_dx)
{
    if (!PTDP_REQUIRE(dx.rows == x.rows && dx.cols == x.cols && dy.rows == x.rows && dy.cols == x.cols &&
                      dw.cols == x.cols && w.cols == x.cols && x.cols > 0,
                      "dx %d x %d, dy %d x %d, x %d x %d, w %d, dw %d", dx.rows, dx.cols, dy.rows, dy.cols,
                      x.rows, x.cols, w.cols, dw.cols))
        return;
    const int C = x.cols;
    for (int i = 0; i < x.rows; i++) {
        const ptdp_real *xr = ptdp_at(x, i, 0), *dyr = ptdp_at(dy, i, 0), rs = rstd[i];
        double sgx = 0;                                 /* sum_j g_j xhat_j, g = dy ⊙ w */
        for (int j = 0; j < C; j++) {
            const ptdp_real xhat = xr[j] * rs, g = dyr[j] * w.data[j];
            dw.data[j] += dyr[j] * xhat;                /* dw += dy ⊙ xhat, row after row */
            sgx += (double)g * xhat;
        }
        const ptdp_real mgx = (ptdp_real)(sgx / C);
        ptdp_real *dxr = ptdp_at(dx, i, 0);
        for (int j = 0; j < C; j++) {                   /* dx = rstd (g − xhat mean(g ⊙ xhat)) */
            const ptdp_real xhat = xr[j] * rs, g = dyr[j] * w.data[j];
            const ptdp_real d = rs * (g - xhat * mgx);
            dxr[j] = accumulate_dx ? dxr[j] + d : d;    /* dx may be dy: read, then write */
        }
    }
}

/* Forward per element: x^2 and its sum (2), then x · rstd · w (2). */
double ptdp_rmsnorm_flops_forward(size_t n)
{
    return 4.0 * (double)n;
}

/* Backward per element: xhat and g (2), dw (2), the sum of g xhat (2),
 * xhat and g again (2), dx (3). */
double ptdp_rmsnorm_flops_backward(size_t n)
{
    return 11.0 * (double)n;
}
