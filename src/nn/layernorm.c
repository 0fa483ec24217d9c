/*
 * layernorm.c — Layer normalisation over the last dimension, and its backward.
 *
 * Each row x (C numbers) is centred and scaled to unit variance, then given
 * a learned scale w and shift b (torch.nn.LayerNorm, eps 1e-5):
 *
 *     mu   = (1/C) sum_j x_j
 *     var  = (1/C) sum_j (x_j - mu)^2          biased, as torch
 *     rstd = 1 / sqrt(var + eps)
 *     xhat = (x - mu) rstd
 *     y    = xhat ⊙ w + b
 *
 *     x ─► [ − mu ] ─► [ × rstd ] ─► xhat ─► [ ⊙ w + b ] ─► y
 *            └──── mu, rstd kept per row for the backward ────┘
 *
 * Backward, with g = dy ⊙ w (the gradient reaching xhat):
 *
 *     db += sum_rows dy                   dw += sum_rows dy ⊙ xhat
 *     dx  = rstd (g − mean_j(g) − xhat mean_j(g ⊙ xhat))
 *
 * The last line is the chain rule through mu and rstd, which both depend
 * on every x_j: moving one x_j shifts the mean of the row and its spread.
 * The backward recomputes xhat from x, mu and rstd instead of keeping it:
 * one row of C numbers saved per row of activations.
 *
 * Row sums are taken in double, in index order: the same row gives the
 * same bits every time, and a TP rank that normalises the same (replicated)
 * row as another gets the same answer.
 */
#include "ptdp/ops.h"

#include "ptdp/error.h"

#include <math.h>

void ptdp_layernorm_forward(ptdp_tensor y, ptdp_real *mean, ptdp_real *rstd, ptdp_tensor x,
                            ptdp_tensor w, ptdp_tensor b, double eps)
{
    if (!PTDP_REQUIRE(y.rows == x.rows && y.cols == x.cols && w.cols == x.cols && b.cols == x.cols,
                      "y %d x %d, x %d x %d, w %d, b %d", y.rows, y.cols, x.rows, x.cols, w.cols, b.cols))
        return;
    const int C = x.cols;
    for (int i = 0; i < x.rows; i++) {
        const ptdp_real *xr = ptdp_at(x, i, 0);
        ptdp_real *yr = ptdp_at(y, i, 0);
        double sum = 0;
        for (int j = 0; j < C; j++)
            sum += xr[j];
        const double mu = sum / C;
        double sq = 0;
        for (int j = 0; j < C; j++) {
            const double d = xr[j] - mu;
            sq += d * d;
        }
        const double rs = 1.0 / sqrt(sq / C + eps);
        const ptdp_real m = (ptdp_real)mu, r = (ptdp_real)rs;
        for (int j = 0; j < C; j++)                 /* y may be x: read, then write */
            yr[j] = (xr[j] - m) * r * w.data[j] + b.data[j];
        mean[i] = m;
        rstd[i] = r;
    }
}

void ptdp_layernorm_backward(ptdp_tensor dx, ptdp_tensor dw, ptdp_tensor db, ptdp_tensor dy,
                             ptdp_tensor x, ptdp_tensor w, const ptdp_real *mean,
                             const ptdp_real *rstd, bool accumulate_dx)
{
    if (!PTDP_REQUIRE(dx.rows == x.rows && dx.cols == x.cols && dy.rows == x.rows && dy.cols == x.cols &&
                      dw.cols == x.cols && db.cols == x.cols && w.cols == x.cols,
                      "dx %d x %d, dy %d x %d, x %d x %d, w %d", dx.rows, dx.cols, dy.rows, dy.cols,
                      x.rows, x.cols, w.cols))
        return;
    const int C = x.cols;
    for (int i = 0; i < x.rows; i++) {
        const ptdp_real *xr = ptdp_at(x, i, 0), *dyr = ptdp_at(dy, i, 0);
        ptdp_real *dxr = ptdp_at(dx, i, 0);
        const ptdp_real m = mean[i], r = rstd[i];
        /* mean_j(g) and mean_j(g ⊙ xhat), g = dy ⊙ w */
        double sg = 0, sgx = 0;
        for (int j = 0; j < C; j++) {
            const ptdp_real xhat = (xr[j] - m) * r, g = dyr[j] * w.data[j];
            sg += g;
            sgx += (double)g * xhat;
            dw.data[j] += dyr[j] * xhat;
            db.data[j] += dyr[j];
        }
        const ptdp_real mg = (ptdp_real)(sg / C), mgx = (ptdp_real)(sgx / C);
        for (int j = 0; j < C; j++) {
            const ptdp_real xhat = (xr[j] - m) * r, g = dyr[j] * w.data[j];
            const ptdp_real v = r * (g - mg - xhat * mgx);
            dxr[j] = accumulate_dx ? dxr[j] + v : v;   /* dx may be dy: read, then write */
        }
    }
}

/* Forward per element: sum, (x − mu)^2 and its sum (3), then (x − mu) · r · w + b (4). */
double ptdp_layernorm_flops_forward(size_t n)
{
    return 8.0 * (double)n;
}

/* Backward per element: xhat (2), g (1), the two sums (3), dw and db (3),
 * xhat and g again (3), dx (4). */
double ptdp_layernorm_flops_backward(size_t n)
{
    return 16.0 * (double)n;
}
