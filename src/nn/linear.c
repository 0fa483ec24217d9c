/*
 * linear.c — nn.Linear, forward and backward, as three matrix products.
 *
 * Forward, for a batch of B rows (PyTorch's weight layout [out, in]):
 *
 *     y = x W^T + b          x: B x in,  W: out x in,  b: 1 x out,  y: B x out
 *     y[i][o] = b[o] + sum_k x[i][k] W[o][k]
 *
 * Backward, given dy = dL/dy (B x out), by the chain rule on that sum:
 *
 *     dL/dx[i][k] = sum_o dy[i][o] W[o][k]       →  dx = dy W        (B x in)
 *     dL/dW[o][k] = sum_i dy[i][o] x[i][k]       →  dW = dy^T x      (out x in)
 *     dL/db[o]    = sum_i dy[i][o]               →  db = column sums of dy
 *
 *          x ─────┐
 *                 ├──► y = x W^T + b           forward:  one GEMM
 *          W ─────┘
 *         dx ◄──── dy W                        backward: two GEMMs,
 *         dW ◄──── dy^T x   (+= across micro-batches)    one column sum
 *
 * dW and db ACCUMULATE (+=): with gradient accumulation the backward of every
 * micro-batch adds into the same gradient buffer, which the training loop
 * zeroes once per step.  dx is usually overwritten; a residual connection
 * (h = h + f(h)) asks for dx += instead, so the branch's gradient adds to the
 * one already flowing through the skip path.
 *
 * Cost: each GEMM of (m x k) by (k x n) is m n k multiply-adds, 2 m n k flops,
 * so forward 2 B in out, backward twice that — the "backward costs 2x the
 * forward" rule behind the usual 6 N flops per token of training.
 */
#include "ptdp/ops.h"

#include <stdlib.h>

#include "ptdp/error.h"


#include "nn/blas.h"

/* ---------------------------------------------------------------- matmul */

/* The recorder of ops.h: one per thread (a device is a thread). */
static _Thread_local ptdp_gemm_log *recording;

void ptdp_gemm_log_start(ptdp_gemm_log *log)
{
    log->n = 0;
    log->overflow = false;
    recording = log;
}

void ptdp_gemm_log_stop(void)
{
    recording = NULL;
}

static void record(bool ta, bool tb, int m, int n, int k, double alpha, double beta)
{
    ptdp_gemm_log *l = recording;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        ptdp_gemm_shape *c = realloc(l->calls, (size_t)cap * sizeof *c);
        if (c == NULL) {
            l->overflow = true;
            return;
        }
        l->calls = c;
        l->cap = cap;
    }
    l->calls[l->n++] = (ptdp_gemm_shape){ ta, tb, m, n, k, alpha, beta };
}

void ptdp_matmul(ptdp_tensor c, ptdp_tensor a, bool trans_a, ptdp_tensor b, bool trans_b,
                 double alpha, double beta)
{
    int m = trans_a ? a.cols : a.rows;
    int k = trans_a ? a.rows : a.cols;
    int kb = trans_b ? b.cols : b.rows;
    int n = trans_b ? b.rows : b.cols;
    if (!PTDP_REQUIRE(k == kb && c.rows == m && c.cols == n,
                      "op(a) %d x %d times op(b) %d x %d into c %d x %d", m, k, kb, n, c.rows, c.cols))
        return;
    if (recording != NULL)
        record(trans_a, trans_b, m, n, k, alpha, beta);
    ptdp_gemm(trans_a, trans_b, m, n, k, alpha, a.data, ptdp_blas_ld(a),
              b.data, ptdp_blas_ld(b), beta, c.data, ptdp_blas_ld(c));
}

double ptdp_matmul_flops(int m, int n, int k)
{
    return 2.0 * m * n * k;
}

#if defined(PTDP_HAVE_OPENBLAS_GET_CORENAME)
char *openblas_get_corename(void);
#endif

const char *ptdp_blas_kernels(void)
{
#if defined(PTDP_HAVE_OPENBLAS_GET_CORENAME)
    const char *name = openblas_get_corename();
    return name != NULL && *name != '\0' ? name : "unknown";
#else
    return "unknown";
#endif
}

/* ------------------------------------------------------------------ bias */

void ptdp_add_bias(ptdp_tensor y, ptdp_tensor b)
{
    if (!PTDP_REQUIRE(b.rows == 1 && b.cols == y.cols, "bias %d x %d for y %d x %d", b.rows, b.cols,
                      y.rows, y.cols))
        return;
    for (int i = 0; i < y.rows; i++) {
        ptdp_real *row = ptdp_at(y, i, 0);
        for (int j = 0; j < y.cols; j++)
            row[j] += b.data[j];
    }
}

/* db[o] += sum_i dy[i][o].  Row by row, so the inner loop walks memory
 * contiguously; each db[o] still sums its column in row order i = 0, 1, …
 * Four rows a pass add their terms one after the other, as four passes
 * would, with a quarter of the loads and stores of db. */
void ptdp_bias_backward(ptdp_tensor db, ptdp_tensor dy)
{
    if (!PTDP_REQUIRE(db.rows == 1 && db.cols == dy.cols, "db %d x %d for dy %d x %d", db.rows, db.cols,
                      dy.rows, dy.cols))
        return;
    ptdp_real *restrict d = db.data;
    int i = 0;
    for (; i + 4 <= dy.rows; i += 4) {
        const ptdp_real *restrict r0 = ptdp_at(dy, i, 0), *restrict r1 = ptdp_at(dy, i + 1, 0);
        const ptdp_real *restrict r2 = ptdp_at(dy, i + 2, 0), *restrict r3 = ptdp_at(dy, i + 3, 0);
        for (int j = 0; j < dy.cols; j++)
            d[j] = d[j] + r0[j] + r1[j] + r2[j] + r3[j];
    }
    for (; i < dy.rows; i++) {
        const ptdp_real *row = ptdp_at(dy, i, 0);
        for (int j = 0; j < dy.cols; j++)
            d[j] += row[j];
    }
}

/* ---------------------------------------------------------------- linear */

void ptdp_linear_forward(ptdp_tensor y, ptdp_tensor x, ptdp_tensor w, const ptdp_tensor *b)
{
    if (!PTDP_REQUIRE(x.cols == w.cols && y.rows == x.rows && y.cols == w.rows,
                      "y %d x %d = x %d x %d times W^T of W %d x %d", y.rows, y.cols, x.rows, x.cols,
                      w.rows, w.cols))
        return;
    if (b) {
        /* Start every row of y at b, then let GEMM add x W^T on top
         * (beta = 1): one pass over y instead of two. */
        if (!PTDP_REQUIRE(b->rows == 1 && b->cols == y.cols, "bias %d x %d for y %d x %d", b->rows,
                          b->cols, y.rows, y.cols))
            return;
        if (recording != NULL)   /* the product as ptdp_matmul would record it */
            record(false, true, y.rows, y.cols, x.cols, 1.0, 1.0);
        ptdp_gemm_bias(false, true, y.rows, y.cols, x.cols, x.data, ptdp_blas_ld(x), w.data, ptdp_blas_ld(w),
                       b->data, y.data, ptdp_blas_ld(y));
        return;
    }
    /* y (B x out) = x (B x in) · W^T (in x out) */
    ptdp_matmul(y, x, false, w, true, 1.0, 0.0);
}

void ptdp_linear_backward(ptdp_tensor *dx, ptdp_tensor dw, ptdp_tensor *db,
                          ptdp_tensor dy, ptdp_tensor x, ptdp_tensor w, bool accumulate_dx)
{
    if (!PTDP_REQUIRE(dy.rows == x.rows && dy.cols == w.rows && x.cols == w.cols &&
                      dw.rows == w.rows && dw.cols == w.cols,
                      "dy %d x %d, x %d x %d, W %d x %d, dW %d x %d", dy.rows, dy.cols, x.rows, x.cols,
                      w.rows, w.cols, dw.rows, dw.cols))
        return;

    /* dx (B x in) = dy (B x out) · W (out x in) */
    if (dx) {
        if (!PTDP_REQUIRE(dx->rows == x.rows && dx->cols == x.cols, "dx %d x %d for x %d x %d",
                          dx->rows, dx->cols, x.rows, x.cols))
            return;
        ptdp_matmul(*dx, dy, false, w, false, 1.0, accumulate_dx ? 1.0 : 0.0);
    }
    /* dW (out x in) += dy^T (out x B) · x (B x in) */
    ptdp_matmul(dw, dy, true, x, false, 1.0, 1.0);
    /* db (1 x out) += column sums of dy */
    if (db)
        ptdp_bias_backward(*db, dy);
}

double ptdp_linear_flops_forward(int batch, int in, int out)
{
    return ptdp_matmul_flops(batch, out, in) + (double)batch * out;
}

double ptdp_linear_flops_backward(int batch, int in, int out)
{
    return ptdp_matmul_flops(batch, in, out)      /* dx */
         + ptdp_matmul_flops(out, in, batch)      /* dW */
         + (double)batch * out;                   /* db */
}

double ptdp_linear_flops_backward_input(int batch, int in, int out)
{
    return ptdp_matmul_flops(batch, in, out) + (double)batch * out;   /* dx, db */
}

double ptdp_linear_flops_backward_weight(int batch, int in, int out)
{
    return ptdp_matmul_flops(out, in, batch);                          /* dW */
}
