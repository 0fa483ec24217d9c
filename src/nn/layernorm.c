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

/* Speed without a bit changed.  Each row's sums run in double, in index
 * order: a chain of additions, each waiting ~4 cycles for the one before.
 * Four rows' chains are independent, so the rows go four at a time and
 * their chains interleave — the same additions in the same order per row,
 * four times as many in flight.  What is element by element (xhat, g, dw,
 * db, the outputs) goes in separate loops the compiler vectorises. */
#define LN_ROWS 4
#define LN_SPAN 256

/* --------------------------------------------------------------- forward */

/* mean and rstd of nr <= LN_ROWS rows xr[r] of C numbers:
 * mu = (1/C) sum_j x_j,  rstd = 1 / sqrt((1/C) sum_j (x_j - mu)^2 + eps). */
static void row_stats(const ptdp_real *const *xr, int nr, int C, double eps, ptdp_real *mean, ptdp_real *rstd)
{
    double sum[LN_ROWS] = { 0 }, sq[LN_ROWS] = { 0 }, mu[LN_ROWS];
    if (nr == LN_ROWS) {   /* four chains at once, unrolled so they stay in registers */
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (int j = 0; j < C; j++) {
            s0 += xr[0][j];
            s1 += xr[1][j];
            s2 += xr[2][j];
            s3 += xr[3][j];
        }
        sum[0] = s0, sum[1] = s1, sum[2] = s2, sum[3] = s3;
    } else {
        for (int r = 0; r < nr; r++)
            for (int j = 0; j < C; j++)
                sum[r] += xr[r][j];
    }
    for (int r = 0; r < nr; r++)
        mu[r] = sum[r] / C;
    if (nr == LN_ROWS) {
        double q0 = 0, q1 = 0, q2 = 0, q3 = 0;
        for (int j = 0; j < C; j++) {
            const double d0 = xr[0][j] - mu[0], d1 = xr[1][j] - mu[1];
            const double d2 = xr[2][j] - mu[2], d3 = xr[3][j] - mu[3];
            q0 += d0 * d0;
            q1 += d1 * d1;
            q2 += d2 * d2;
            q3 += d3 * d3;
        }
        sq[0] = q0, sq[1] = q1, sq[2] = q2, sq[3] = q3;
    } else {
        for (int r = 0; r < nr; r++)
            for (int j = 0; j < C; j++) {
                const double d = xr[r][j] - mu[r];
                sq[r] += d * d;
            }
    }
    for (int r = 0; r < nr; r++) {
        mean[r] = (ptdp_real)mu[r];
        rstd[r] = (ptdp_real)(1.0 / sqrt(sq[r] / C + eps));
    }
}

void ptdp_layernorm_forward(ptdp_tensor y, ptdp_real *mean, ptdp_real *rstd, ptdp_tensor x,
                            ptdp_tensor w, ptdp_tensor b, double eps)
{
    if (!PTDP_REQUIRE(y.rows == x.rows && y.cols == x.cols && w.cols == x.cols && b.cols == x.cols,
                      "y %d x %d, x %d x %d, w %d, b %d", y.rows, y.cols, x.rows, x.cols, w.cols, b.cols))
        return;
    const int C = x.cols;
    for (int i0 = 0; i0 < x.rows; i0 += LN_ROWS) {
        const int nr = x.rows - i0 < LN_ROWS ? x.rows - i0 : LN_ROWS;
        const ptdp_real *xr[LN_ROWS];
        for (int r = 0; r < nr; r++)
            xr[r] = ptdp_at(x, i0 + r, 0);
        row_stats(xr, nr, C, eps, mean + i0, rstd + i0);
        for (int r = 0; r < nr; r++) {   /* y = (x - mu) rstd w + b, vectorised */
            ptdp_real *yr = ptdp_at(y, i0 + r, 0);
            const ptdp_real m = mean[i0 + r], rs = rstd[i0 + r];
            for (int j = 0; j < C; j++)   /* y may be x: read, then write */
                yr[j] = (xr[r][j] - m) * rs * w.data[j] + b.data[j];
        }
    }
}

/* -------------------------------------------------------------- backward */

/* Rows [i0, i0 + nr) of the backward, given dy, x, mean, rstd. */
typedef struct {
    const ptdp_real *x[LN_ROWS], *dy[LN_ROWS];
    ptdp_real m[LN_ROWS], r[LN_ROWS];
    int nr;
} ln_rows;

/* Columns [j0, j0 + n) of four rows in one loop: xhat and g = dy ⊙ w into
 * xh and g, and the four rows' terms of dw += dy ⊙ xhat and db += dy added
 * one after the other, as four passes row after row would add them, with
 * a quarter of the passes over dw and db. */
static void four_rows(const ln_rows *L, int j0, int n, const ptdp_real *restrict w, ptdp_real *restrict dw,
                      ptdp_real *restrict db, ptdp_real (*restrict xh)[LN_SPAN], ptdp_real (*restrict g)[LN_SPAN])
{
    const ptdp_real *restrict x0 = L->x[0] + j0, *restrict x1 = L->x[1] + j0;
    const ptdp_real *restrict x2 = L->x[2] + j0, *restrict x3 = L->x[3] + j0;
    const ptdp_real *restrict y0 = L->dy[0] + j0, *restrict y1 = L->dy[1] + j0;
    const ptdp_real *restrict y2 = L->dy[2] + j0, *restrict y3 = L->dy[3] + j0;
    const ptdp_real m0 = L->m[0], m1 = L->m[1], m2 = L->m[2], m3 = L->m[3];
    const ptdp_real r0 = L->r[0], r1 = L->r[1], r2 = L->r[2], r3 = L->r[3];
    for (int j = 0; j < n; j++) {
        const ptdp_real h0 = (x0[j] - m0) * r0, h1 = (x1[j] - m1) * r1;
        const ptdp_real h2 = (x2[j] - m2) * r2, h3 = (x3[j] - m3) * r3;
        xh[0][j] = h0, xh[1][j] = h1, xh[2][j] = h2, xh[3][j] = h3;
        g[0][j] = y0[j] * w[j0 + j], g[1][j] = y1[j] * w[j0 + j];
        g[2][j] = y2[j] * w[j0 + j], g[3][j] = y3[j] * w[j0 + j];
        dw[j0 + j] = dw[j0 + j] + y0[j] * h0 + y1[j] * h1 + y2[j] * h2 + y3[j] * h3;
        db[j0 + j] = db[j0 + j] + y0[j] + y1[j] + y2[j] + y3[j];
    }
}

/* Columns [j0, j0 + n) of the rows: xhat and g = dy ⊙ w into xh and g,
 * dw += dy ⊙ xhat and db += dy (row after row, as one row at a time
 * would), then the rows' sums sum_j g and sum_j g xhat carried on. */
static void backward_span(const ln_rows *L, int j0, int n, const ptdp_real *w, ptdp_real *dw, ptdp_real *db,
                           double *sg, double *sgx)
{
    ptdp_real xh[LN_ROWS][LN_SPAN], g[LN_ROWS][LN_SPAN];
    if (L->nr == LN_ROWS) {
        four_rows(L, j0, n, w, dw, db, xh, g);
        double a0 = sg[0], a1 = sg[1], a2 = sg[2], a3 = sg[3];   /* eight chains at once */
        double b0 = sgx[0], b1 = sgx[1], b2 = sgx[2], b3 = sgx[3];
        for (int j = 0; j < n; j++) {
            a0 += g[0][j];
            b0 += (double)g[0][j] * xh[0][j];
            a1 += g[1][j];
            b1 += (double)g[1][j] * xh[1][j];
            a2 += g[2][j];
            b2 += (double)g[2][j] * xh[2][j];
            a3 += g[3][j];
            b3 += (double)g[3][j] * xh[3][j];
        }
        sg[0] = a0, sg[1] = a1, sg[2] = a2, sg[3] = a3;
        sgx[0] = b0, sgx[1] = b1, sgx[2] = b2, sgx[3] = b3;
        return;
    }
    for (int r = 0; r < L->nr; r++) {
        const ptdp_real *xr = L->x[r] + j0, *dyr = L->dy[r] + j0, m = L->m[r], rs = L->r[r];
        for (int j = 0; j < n; j++) {
            xh[r][j] = (xr[j] - m) * rs;
            g[r][j] = dyr[j] * w[j0 + j];
            dw[j0 + j] += dyr[j] * xh[r][j];
            db[j0 + j] += dyr[j];
            sg[r] += g[r][j];
            sgx[r] += (double)g[r][j] * xh[r][j];
        }
    }
}

/* dx (= or +=) rstd (g − mean_j(g) − xhat mean_j(g ⊙ xhat)) for one row. */
static void backward_dx(ptdp_real *dxr, const ptdp_real *xr, const ptdp_real *dyr, const ptdp_real *w, int C,
                        ptdp_real m, ptdp_real r, ptdp_real mg, ptdp_real mgx, bool accumulate_dx)
{
    if (accumulate_dx) {
        for (int j = 0; j < C; j++) {   /* dx may be dy: read, then write */
            const ptdp_real xhat = (xr[j] - m) * r, g = dyr[j] * w[j];
            dxr[j] = dxr[j] + r * (g - mg - xhat * mgx);
        }
    } else {
        for (int j = 0; j < C; j++) {
            const ptdp_real xhat = (xr[j] - m) * r, g = dyr[j] * w[j];
            dxr[j] = r * (g - mg - xhat * mgx);
        }
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
    for (int i0 = 0; i0 < x.rows; i0 += LN_ROWS) {
        ln_rows L = { .nr = x.rows - i0 < LN_ROWS ? x.rows - i0 : LN_ROWS };
        double sg[LN_ROWS] = { 0 }, sgx[LN_ROWS] = { 0 };
        for (int r = 0; r < L.nr; r++) {
            L.x[r] = ptdp_at(x, i0 + r, 0);
            L.dy[r] = ptdp_at(dy, i0 + r, 0);
            L.m[r] = mean[i0 + r];
            L.r[r] = rstd[i0 + r];
        }
        for (int j0 = 0; j0 < C; j0 += LN_SPAN)   /* mean_j(g) and mean_j(g ⊙ xhat), g = dy ⊙ w */
            backward_span(&L, j0, C - j0 < LN_SPAN ? C - j0 : LN_SPAN, w.data, dw.data, db.data, sg, sgx);
        for (int r = 0; r < L.nr; r++)
            backward_dx(ptdp_at(dx, i0 + r, 0), L.x[r], L.dy[r], w.data, C, L.m[r], L.r[r],
                        (ptdp_real)(sg[r] / C), (ptdp_real)(sgx[r] / C), accumulate_dx);
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
