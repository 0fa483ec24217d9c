/*
 * test_ops.c — linear, GELU and softmax cross-entropy against independent references.
 *
 * Three kinds of evidence, in both precisions unless said otherwise:
 *   - naive formulas: a triple loop in double for every matrix product, the
 *     textbook softmax, the GELU derivative written out;
 *   - central finite differences (double build only: in float the difference
 *     quotient itself is too noisy to judge 1e-6):  dL/dθ ≈ (L(θ+h) - L(θ-h)) / 2h
 *     for a scalar L = sum(output ⊙ R) with a fixed random R, so dL/dout = R;
 *   - closed forms: GELU at known points, cross-entropy of small rows, the
 *     vocab-parallel partials summed over 2-4 column slices equal to the whole.
 * Every tensor is also tried as a strided view, as tensor parallelism hands
 * the ops column slices of larger matrices.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "op_check.h"
#include "ptdp/ops.h"

#define PI 3.14159265358979323846

/* OP_REL (op_check.h): agreement with a double reference, relative to the
 * sum of |terms|. */

/* ------------------------------------------------------------ helpers */

/* Columns [c0, c0 + n) of t, keeping its stride. */
static ptdp_tensor cols(ptdp_tensor t, int c0, int n)
{
    return op_view(t.data + c0, t.rows, n, t.stride);
}

/* Every element of a padded buffer outside the view must keep its sentinel. */
static void check_padding(const ptdp_real *buf, int rows, int stride, int c0, int cols, ptdp_real sentinel)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < stride; j++)
            if (j < c0 || j >= c0 + cols)
                ck_assert_msg(buf[i * stride + j] == sentinel, "wrote outside the view at (%d, %d)", i, j);
}

/* ----------------------------------------------------- naive references */

/* y = x W^T (+ b) by the triple loop, in double; also the sum of |terms| per
 * element, the scale that float rounding errors are relative to. */
static void naive_linear(double *y, double *mag, ptdp_tensor x, ptdp_tensor w, const ptdp_tensor *b)
{
    for (int i = 0; i < x.rows; i++)
        for (int o = 0; o < w.rows; o++) {
            double s = b ? op_at(*b, 0, o) : 0.0, a = fabs(s);
            for (int k = 0; k < x.cols; k++) {
                s += op_at(x, i, k) * op_at(w, o, k);
                a += fabs(op_at(x, i, k) * op_at(w, o, k));
            }
            y[i * w.rows + o] = s;
            mag[i * w.rows + o] = a;
        }
}

static double gelu_ref(double x)
{
    double k = sqrt(2.0 / PI), t = tanh(k * (x + 0.044715 * x * x * x));
    return 0.5 * x * (1.0 + t);
}

static double gelu_grad_ref(double x)
{
    double k = sqrt(2.0 / PI), t = tanh(k * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

/* ---------------------------------------------------------- linear: forward */

static const harness_tcase linear_tests = { .name = "linear" };

/* Run y = x W^T + b with every operand a column view inside a wider padded
 * buffer (stride > cols) and compare with the triple loop. */
static void linear_forward_case(int B, int in, int out, int pad, bool bias)
{
    int sx = in + pad, sw = in + 2 * pad, sy = out + pad;
    ptdp_real *xb = malloc(sizeof(ptdp_real) * (size_t)B * sx);
    ptdp_real *wb = malloc(sizeof(ptdp_real) * (size_t)out * sw);
    ptdp_real *yb = malloc(sizeof(ptdp_real) * (size_t)B * sy);
    ptdp_real bb[64];
    double *ref = malloc(sizeof(double) * (size_t)B * out), *mag = malloc(sizeof(double) * (size_t)B * out);
    const ptdp_real sentinel = (ptdp_real)777;
    op_fill_all(yb, (size_t)B * sy, sentinel);

    ptdp_tensor x = op_view(xb + pad / 2, B, in, sx);      /* a column slice of x  */
    ptdp_tensor w = op_view(wb + pad, out, in, sw);        /* a column slice of W  */
    ptdp_tensor y = op_view(yb + pad, B, out, sy);
    ptdp_tensor b = op_view(bb, 1, out, out);
    op_fill_random(op_view(xb, B, sx, sx), 1.0);
    op_fill_random(op_view(wb, out, sw, sw), 1.0);
    op_fill_random(b, 1.0);

    ptdp_linear_forward(y, x, w, bias ? &b : NULL);
    naive_linear(ref, mag, x, w, bias ? &b : NULL);
    for (int i = 0; i < B; i++)
        for (int o = 0; o < out; o++)
            ASSERT_CLOSE(op_at(y, i, o), ref[i * out + o], OP_REL * mag[i * out + o] + 1e-30);
    check_padding(yb, B, sy, pad, out, sentinel);
    free(xb); free(wb); free(yb); free(ref); free(mag);
}

TEST(linear_tests, linear_forward_matches_triple_loop)
{
    linear_forward_case(5, 7, 3, 0, true);
    linear_forward_case(5, 7, 3, 0, false);
    linear_forward_case(1, 1, 1, 0, true);
    linear_forward_case(16, 33, 17, 0, true);
}
END_TEST

TEST(linear_tests, linear_forward_on_strided_views)
{
    linear_forward_case(5, 7, 3, 4, true);
    linear_forward_case(9, 12, 20, 6, false);
    linear_forward_case(1, 3, 2, 5, true);
}
END_TEST

/* A tensor-parallel column-parallel layer: the full layer's output columns
 * [c0, c0+n) are what the layer with W's rows [c0, c0+n) computes; a
 * row-parallel layer: the partial products over input slices sum to y. */
TEST(linear_tests, linear_shards_compose_to_the_full_layer)
{
    enum { B = 4, IN = 10, OUT = 6 };
    ptdp_real x[B * IN], w[OUT * IN], b[OUT], y[B * OUT], part[B * OUT], sum[B * OUT];
    op_fill_random(op_view(x, B, IN, IN), 1.0);
    op_fill_random(op_view(w, OUT, IN, IN), 1.0);
    op_fill_random(op_view(b, 1, OUT, OUT), 1.0);
    ptdp_tensor bt = op_view(b, 1, OUT, OUT);
    ptdp_linear_forward(op_view(y, B, OUT, OUT), op_view(x, B, IN, IN), op_view(w, OUT, IN, IN), &bt);

    /* column-parallel: rows 2..5 of W (a row range: contiguous) → y[:, 2:6] */
    ptdp_tensor b_part = op_view(b + 2, 1, 4, 4);
    ptdp_linear_forward(op_view(part, B, 4, 4), op_view(x, B, IN, IN), op_view(w + 2 * IN, 4, IN, IN), &b_part);
    for (int i = 0; i < B; i++)
        for (int j = 0; j < 4; j++)
            ASSERT_CLOSE(part[i * 4 + j], y[i * OUT + 2 + j], 1e-5);

    /* row-parallel: x[:, 0:3] W[:, 0:3]^T + x[:, 3:10] W[:, 3:10]^T + b = y */
    ptdp_linear_forward(op_view(sum, B, OUT, OUT), op_view(x, B, 3, IN), op_view(w, OUT, 3, IN), &bt);
    ptdp_linear_forward(op_view(part, B, OUT, OUT), op_view(x + 3, B, 7, IN), op_view(w + 3, OUT, 7, IN), NULL);
    for (int i = 0; i < B * OUT; i++)
        ASSERT_CLOSE(sum[i] + part[i], y[i], 1e-5);
}
END_TEST

TEST(linear_tests, linear_degenerate_sizes)
{
    ptdp_real x[4] = { 1, 2, 3, 4 }, w[6] = { 0 }, b[3] = { 1, 2, 3 }, y[6];
    ptdp_tensor bt = op_view(b, 1, 3, 3);
    /* in = 0: the product is empty, y = b */
    op_fill_all(y, 6, 99);
    ptdp_linear_forward(op_view(y, 2, 3, 3), op_view(x, 2, 0, 0), op_view(w, 3, 0, 0), &bt);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            ck_assert(y[i * 3 + j] == b[j]);
    ptdp_linear_forward(op_view(y, 2, 3, 3), op_view(x, 2, 0, 0), op_view(w, 3, 0, 0), NULL);
    for (int i = 0; i < 6; i++)
        ck_assert(y[i] == 0);
    /* one row: its stride is never used to step, whatever it says */
    ptdp_real w1[6] = { 1, 2, 3, 4, 5, 6 };
    ptdp_linear_forward(op_view(y, 1, 3, 0), op_view(x, 1, 2, 0), op_view(w1, 3, 2, 2), &bt);
    ck_assert(y[0] == 1 + 1 * 1 + 2 * 2 && y[1] == 2 + 3 + 8 && y[2] == 3 + 5 + 12);
    /* batch 0: nothing is written */
    op_fill_all(y, 6, 99);
    ptdp_linear_forward(op_view(y, 0, 3, 3), op_view(x, 0, 2, 2), op_view(w, 3, 2, 2), &bt);
    for (int i = 0; i < 6; i++)
        ck_assert(y[i] == 99);
}
END_TEST

/* ---------------------------------------------------------- matmul */

TEST(linear_tests, matmul_all_transposes)
{
    enum { M = 4, N = 5, K = 3 };
    ptdp_real a[M * K], at_[K * M], b[K * N], bt[N * K], c[M * N], c0[M * N];
    op_fill_random(op_view(a, M, K, K), 1.0);
    op_fill_random(op_view(b, K, N, N), 1.0);
    op_fill_random(op_view(c0, M, N, N), 1.0);
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++)
            at_[k * M + i] = a[i * K + k];
    for (int k = 0; k < K; k++)
        for (int j = 0; j < N; j++)
            bt[j * K + k] = b[k * N + j];
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            memcpy(c, c0, sizeof c);
            ptdp_matmul(op_view(c, M, N, N), ta ? op_view(at_, K, M, M) : op_view(a, M, K, K), ta,
                        tb ? op_view(bt, N, K, K) : op_view(b, K, N, N), tb, 0.5, 2.0);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double s = 2.0 * c0[i * N + j];
                    for (int k = 0; k < K; k++)
                        s += 0.5 * a[i * K + k] * b[k * N + j];
                    ASSERT_CLOSE(c[i * N + j], s, 1e-5);
                }
        }
    /* beta = 0 overwrites C without reading it: NaN garbage does not leak in */
    op_fill_all(c, M * N, (ptdp_real)NAN);
    ptdp_matmul(op_view(c, M, N, N), op_view(a, M, K, K), false, op_view(b, K, N, N), false, 1.0, 0.0);
    for (int i = 0; i < M * N; i++)
        ck_assert(isfinite(c[i]));
    ck_assert(ptdp_matmul_flops(M, N, K) == 2.0 * M * N * K);
}
END_TEST

/* ---------------------------------------------------------- linear: backward */

/* The backward against the naive sums, on strided views, with dW and db
 * pre-filled to show they accumulate, and dx both overwritten and
 * accumulated. */
static void linear_backward_case(bool accumulate_dx, bool with_dx, bool with_db)
{
    enum { B = 6, IN = 5, OUT = 4, P = 3 };
    ptdp_real xb[B * (IN + P)], wb[OUT * (IN + P)], dyb[B * (OUT + P)];
    ptdp_real dxb[B * (IN + P)], dwb[OUT * (IN + P)], db[OUT];
    ptdp_tensor x = op_view(xb + 1, B, IN, IN + P), w = op_view(wb + 2, OUT, IN, IN + P);
    ptdp_tensor dy = op_view(dyb + 3, B, OUT, OUT + P);
    ptdp_tensor dx = op_view(dxb + 1, B, IN, IN + P), dw = op_view(dwb + 2, OUT, IN, IN + P);
    ptdp_tensor dbt = op_view(db, 1, OUT, OUT);
    op_fill_random(op_view(xb, B, IN + P, IN + P), 1.0);
    op_fill_random(op_view(wb, OUT, IN + P, IN + P), 1.0);
    op_fill_random(op_view(dyb, B, OUT + P, OUT + P), 1.0);
    op_fill_random(op_view(dxb, B, IN + P, IN + P), 1.0);
    op_fill_random(op_view(dwb, OUT, IN + P, IN + P), 1.0);
    op_fill_random(dbt, 1.0);
    ptdp_real dx0[B * (IN + P)], dw0[OUT * (IN + P)], db0[OUT];
    memcpy(dx0, dxb, sizeof dx0);
    memcpy(dw0, dwb, sizeof dw0);
    memcpy(db0, db, sizeof db0);

    ptdp_linear_backward(with_dx ? &dx : NULL, dw, with_db ? &dbt : NULL, dy, x, w, accumulate_dx);

    for (int i = 0; i < B; i++)
        for (int k = 0; k < IN; k++) {
            double s = 0, mag = 0;
            for (int o = 0; o < OUT; o++) {
                s += op_at(dy, i, o) * op_at(w, o, k);
                mag += fabs(op_at(dy, i, o) * op_at(w, o, k));
            }
            double before = dx0[i * (IN + P) + 1 + k];
            double want = !with_dx ? before : accumulate_dx ? before + s : s;
            ASSERT_CLOSE(op_at(dx, i, k), want, OP_REL * (mag + fabs(before)) + 1e-30);
        }
    for (int o = 0; o < OUT; o++)
        for (int k = 0; k < IN; k++) {
            double before = dw0[o * (IN + P) + 2 + k], s = before, mag = fabs(before);
            for (int i = 0; i < B; i++) {
                s += op_at(dy, i, o) * op_at(x, i, k);
                mag += fabs(op_at(dy, i, o) * op_at(x, i, k));
            }
            ASSERT_CLOSE(op_at(dw, o, k), s, OP_REL * mag);
        }
    for (int o = 0; o < OUT; o++) {
        double s = db0[o], mag = fabs(db0[o]);
        for (int i = 0; i < B && with_db; i++) {
            s += op_at(dy, i, o);
            mag += fabs(op_at(dy, i, o));
        }
        ASSERT_CLOSE(db[o], s, OP_REL * mag);
    }
    /* the padding around dx and dW is untouched */
    for (int i = 0; i < B; i++)
        for (int j = 0; j < IN + P; j++)
            if (j < 1 || j >= 1 + IN)
                ck_assert(dxb[i * (IN + P) + j] == dx0[i * (IN + P) + j]);
    for (int o = 0; o < OUT; o++)
        for (int j = 0; j < IN + P; j++)
            if (j < 2 || j >= 2 + IN)
                ck_assert(dwb[o * (IN + P) + j] == dw0[o * (IN + P) + j]);
}

TEST(linear_tests, linear_backward_matches_naive_sums)
{
    linear_backward_case(false, true, true);
    linear_backward_case(true, true, true);
    linear_backward_case(false, false, true);
    linear_backward_case(false, true, false);
}
END_TEST

TEST(linear_tests, bias_add_and_backward)
{
    ptdp_real yb[3 * 5], b[2] = { 10, 20 }, db[2] = { 1, 2 };
    for (int i = 0; i < 15; i++)
        yb[i] = (ptdp_real)i;
    ptdp_tensor y = op_view(yb + 1, 3, 2, 5);          /* columns 1..2 of a 3 x 5 */
    ptdp_add_bias(y, op_view(b, 1, 2, 2));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 5; j++) {
            double want = i * 5 + j + (j == 1 ? 10 : j == 2 ? 20 : 0);
            ck_assert(yb[i * 5 + j] == (ptdp_real)want);
        }
    /* db += column sums: column 1 holds 1+6+11 + 3*10, column 2 2+7+12 + 3*20 */
    ptdp_bias_backward(op_view(db, 1, 2, 2), y);
    ck_assert(db[0] == 1 + 18 + 30);
    ck_assert(db[1] == 2 + 21 + 60);
}
END_TEST

TEST(linear_tests, linear_flop_counts)
{
    ck_assert(ptdp_linear_flops_forward(4, 3, 2) == 2.0 * 4 * 3 * 2 + 4 * 2);
    ck_assert(ptdp_linear_flops_backward(4, 3, 2) == 4.0 * 4 * 3 * 2 + 4 * 2);
    /* the backward costs twice the forward's matmul */
    ck_assert(ptdp_linear_flops_backward(64, 1024, 4096) - 64.0 * 4096 ==
              2 * (ptdp_linear_flops_forward(64, 1024, 4096) - 64.0 * 4096));
}
END_TEST

#ifdef PTDP_DOUBLE
/* L(x, W, b) = sum(y ⊙ R) with y = x W^T + b, so dy = R.  Each parameter and
 * input is nudged by ±h and the central difference compared with the
 * backward's gradient. */
TEST(linear_tests, linear_backward_finite_differences)
{
    enum { B = 3, IN = 4, OUT = 5 };
    ptdp_real x[B * IN], w[OUT * IN], b[OUT], r[B * OUT], y[B * OUT];
    ptdp_real dx[B * IN], dw[OUT * IN] = { 0 }, db[OUT] = { 0 };
    ptdp_tensor X = op_view(x, B, IN, IN), W = op_view(w, OUT, IN, IN), Bt = op_view(b, 1, OUT, OUT);
    ptdp_tensor R = op_view(r, B, OUT, OUT), Y = op_view(y, B, OUT, OUT);
    ptdp_tensor dX = op_view(dx, B, IN, IN), dW = op_view(dw, OUT, IN, IN), dB = op_view(db, 1, OUT, OUT);
    op_fill_random(X, 1.0);
    op_fill_random(W, 1.0);
    op_fill_random(Bt, 1.0);
    op_fill_random(R, 1.0);
    ptdp_linear_backward(&dX, dW, &dB, R, X, W, false);

    ptdp_real *targets[3] = { x, w, b };
    ptdp_real *grads[3] = { dx, dw, db };
    int sizes[3] = { B * IN, OUT * IN, OUT };
    const double h = 1e-6;
    for (int t = 0; t < 3; t++)
        for (int e = 0; e < sizes[t]; e++) {
            double L[2], keep = targets[t][e];
            for (int s = 0; s < 2; s++) {
                targets[t][e] = (ptdp_real)(keep + (s ? -h : h));
                ptdp_linear_forward(Y, X, W, &Bt);
                L[s] = 0;
                for (int i = 0; i < B * OUT; i++)
                    L[s] += y[i] * r[i];
            }
            targets[t][e] = (ptdp_real)keep;
            double numeric = (L[0] - L[1]) / (2 * h);
            ASSERT_CLOSE(grads[t][e], numeric, 1e-6 * fmax(1.0, fabs(numeric)));
        }
}
END_TEST
#endif

/* --------------------------------------------------------------- exp */

static const harness_tcase exp_tests = { .name = "exp" };

enum { EXP_RUN = 1001 };

/* a[i] = e^a[i] by ptdp_exp_inplace; the count of elements whose bits
 * differ from libm's exp of each. */
static uint64_t exp_mismatches(ptdp_real *a)
{
    ptdp_real b[EXP_RUN];
    uint64_t bad = 0;
    for (int i = 0; i < EXP_RUN; i++)
#ifdef PTDP_DOUBLE
        b[i] = exp(a[i]);
#else
        b[i] = expf(a[i]);
#endif
    ptdp_exp_inplace(a, EXP_RUN);
    for (int i = 0; i < EXP_RUN; i++)
        bad += memcmp(&a[i], &b[i], sizeof a[i]) != 0;
    return bad;
}

/* ptdp_exp_inplace is libm's exp bit for bit, vectorised or not: every
 * 97th float (44 million, every exponent and sign, the NaNs, infinities
 * and the ranges past overflow and underflow among them), in runs of 1001
 * so that groups of eight and the tails are both tried; in the double
 * build 2 million random bit patterns and a fine grid of [-750, 750]. */
TEST(exp_tests, exp_matches_libm_bit_for_bit)
{
    static ptdp_real a[EXP_RUN];
    uint64_t bad = 0;
#ifdef PTDP_DOUBLE
    for (int k = 0; k < 2000; k++) {
        for (int i = 0; i < EXP_RUN; i++) {
            const uint64_t w = (uint64_t)(op_uniform() * 4294967296.0) << 32 | (uint64_t)(op_uniform() * 4294967296.0);
            memcpy(&a[i], &w, sizeof w);
        }
        bad += exp_mismatches(a);
    }
    for (int k = 0; k < 1500; k++) {
        for (int i = 0; i < EXP_RUN; i++)
            a[i] = -750.0 + ((double)k * EXP_RUN + i) / 1024.0;
        bad += exp_mismatches(a);
    }
#else
    for (uint64_t u = 0; u < (1ULL << 32);) {
        for (int i = 0; i < EXP_RUN; i++, u += 97) {
            const uint32_t w = (uint32_t)u;
            memcpy(&a[i], &w, sizeof w);
        }
        bad += exp_mismatches(a);
    }
#endif
    ck_assert_msg(bad == 0, "%llu elements differ from libm's exp (vectorised: %d)", (unsigned long long)bad,
                  (int)ptdp_exp_vectorised());
}
END_TEST

/* -------------------------------------------------------------- GELU */

static const harness_tcase gelu_tests = { .name = "gelu" };

TEST(gelu_tests, gelu_known_values)
{
    /* 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))), evaluated independently */
    static const double xs[] = { 0, 1, -1, 2, -2, 0.5, -0.75, 3, 10, -10 };
    static const double ys[] = { 0.0, 0.8411919906082768, -0.15880800939172324, 1.954597694087775,
                                 -0.04540230591222494, 0.34571400982514394, -0.17003944483437966,
                                 2.996362607918227, 10.0, -0.0 };
    enum { N = sizeof xs / sizeof xs[0] };
    ptdp_real x[N], y[N];
    for (int i = 0; i < N; i++)
        x[i] = (ptdp_real)xs[i];
    ptdp_gelu_forward(op_view(y, 1, N, N), op_view(x, 1, N, N));
    for (int i = 0; i < N; i++)
        ASSERT_CLOSE(y[i], ys[i], (sizeof(ptdp_real) == 4 ? 3e-7 : 1e-15) * fmax(1.0, fabs(ys[i])));
    /* in place: y may be x */
    ptdp_gelu_forward(op_view(x, 1, N, N), op_view(x, 1, N, N));
    for (int i = 0; i < N; i++)
        ck_assert(x[i] == y[i]);
}
END_TEST

TEST(gelu_tests, gelu_on_strided_view_matches_formula)
{
    enum { R = 7, C = 9, S = 12 };
    ptdp_real xb[R * S], yb[R * S];
    op_fill_random(op_view(xb, R, S, S), 4.0);
    op_fill_all(yb, R * S, 555);
    ptdp_tensor x = op_view(xb + 2, R, C, S), y = op_view(yb + 1, R, C, S);
    ptdp_gelu_forward(y, x);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            ASSERT_CLOSE(op_at(y, i, j), gelu_ref(op_at(x, i, j)), OP_REL * fmax(1.0, fabs(op_at(x, i, j))));
    check_padding(yb, R, S, 1, C, 555);
}
END_TEST

TEST(gelu_tests, gelu_backward_matches_derivative_formula)
{
    enum { R = 5, C = 11 };
    ptdp_real x[R * C], dy[R * C], dx[R * C];
    op_fill_random(op_view(x, R, C, C), 5.0);
    op_fill_random(op_view(dy, R, C, C), 1.0);
    ptdp_gelu_backward(op_view(dx, R, C, C), op_view(dy, R, C, C), op_view(x, R, C, C));
    for (int i = 0; i < R * C; i++)
        ASSERT_CLOSE(dx[i], dy[i] * gelu_grad_ref(x[i]), 4 * OP_REL * fmax(1.0, fabs(x[i])));
    /* in place: dx may be dy */
    ptdp_gelu_backward(op_view(dy, R, C, C), op_view(dy, R, C, C), op_view(x, R, C, C));
    for (int i = 0; i < R * C; i++)
        ck_assert(dy[i] == dx[i]);
    ck_assert(ptdp_gelu_flops_forward(10) == 90.0);
    ck_assert(ptdp_gelu_flops_backward(10) == 190.0);
}
END_TEST

#ifdef PTDP_DOUBLE
TEST(gelu_tests, gelu_backward_finite_differences)
{
    enum { N = 41 };
    ptdp_real x[N], dy[N], dx[N], yp, ym;
    for (int i = 0; i < N; i++) {
        x[i] = -5.0 + 0.25 * i;     /* -5 … 5, through the dip and both tails */
        dy[i] = 1.0;
    }
    ptdp_gelu_backward(op_view(dx, 1, N, N), op_view(dy, 1, N, N), op_view(x, 1, N, N));
    const double h = 1e-5;
    for (int i = 0; i < N; i++) {
        ptdp_real xp = x[i] + h, xm = x[i] - h;
        ptdp_gelu_forward(op_view(&yp, 1, 1, 1), op_view(&xp, 1, 1, 1));
        ptdp_gelu_forward(op_view(&ym, 1, 1, 1), op_view(&xm, 1, 1, 1));
        double numeric = (yp - ym) / (2 * h);
        ASSERT_CLOSE(dx[i], numeric, 1e-6 * fmax(1.0, fabs(numeric)));
    }
}
END_TEST
#endif

/* ---------------------------------------------------- cross-entropy */

static const harness_tcase xent_tests = { .name = "xent" };

/* Textbook softmax in double with the max subtracted. */
static void softmax_ref(double *p, ptdp_tensor l, int i)
{
    double m = -INFINITY, s = 0;
    for (int j = 0; j < l.cols; j++)
        m = fmax(m, op_at(l, i, j));
    for (int j = 0; j < l.cols; j++)
        s += exp(op_at(l, i, j) - m);
    for (int j = 0; j < l.cols; j++)
        p[j] = exp(op_at(l, i, j) - m) / s;
}

TEST(xent_tests, xent_closed_forms)
{
    ptdp_real l[2 * 3] = { 0, 0, 0, 1, 2, 3 };
    int64_t y[2] = { 1, 2 };
    /* row 0: log 3; row 1: log(e + e^2 + e^3) - 3 */
    double want = log(3.0) + (log(exp(1.0) + exp(2.0) + exp(3.0)) - 3.0);
    ASSERT_CLOSE(ptdp_xent_forward(op_view(l, 2, 3, 3), y), want, 1e-14);
    /* the sum, not the mean: one row alone is its own loss */
    ASSERT_CLOSE(ptdp_xent_forward(op_view(l, 1, 3, 3), y), log(3.0), 1e-15);

    ptdp_real d[6];
    ptdp_xent_backward(op_view(d, 2, 3, 3), op_view(l, 2, 3, 3), y, 0.5);
    /* row 0: 0.5 * (1/3 - [j == 1]) */
    ASSERT_CLOSE(d[0], 0.5 / 3, 1e-7);
    ASSERT_CLOSE(d[1], 0.5 * (1.0 / 3 - 1), 1e-7);
    ASSERT_CLOSE(d[2], 0.5 / 3, 1e-7);
    /* each row of softmax - onehot sums to zero */
    ASSERT_CLOSE(d[3] + d[4] + d[5], 0.0, 1e-7);
}
END_TEST

TEST(xent_tests, xent_stable_on_large_logits)
{
    ptdp_real l[3 * 3] = { 1e4, 0, -1e4,
                           1e4, 1e4, -1e4,
                           -1e4, -1e4, -1e4 };
    int64_t y[3] = { 1, 0, 2 };
    /* row 0: -log p_1 = 1e4 (exactly, up to exp(-1e4) = 0);
     * row 1: two equal winners: log 2;  row 2: all equal: log 3 */
    double loss = ptdp_xent_forward(op_view(l, 3, 3, 3), y);
    ck_assert(isfinite(loss));
    ASSERT_CLOSE(loss, 1e4 + log(2.0) + log(3.0), 1e-9);

    ptdp_real d[9];
    ptdp_xent_backward(op_view(d, 3, 3, 3), op_view(l, 3, 3, 3), y, 1.0);
    double want[9] = { 1, -1, 0,   0.5 - 1, 0.5, 0,   1.0 / 3, 1.0 / 3, 1.0 / 3 - 1 };
    for (int i = 0; i < 9; i++) {
        ck_assert(isfinite(d[i]));
        ASSERT_CLOSE(d[i], want[i], 1e-7);
    }
}
END_TEST

TEST(xent_tests, xent_backward_matches_softmax_minus_onehot)
{
    enum { B = 6, C = 7, S = 10 };
    ptdp_real lb[B * S], db[B * S];
    int64_t y[B] = { 0, 6, 3, 3, 1, 5 };
    op_fill_random(op_view(lb, B, S, S), 8.0);
    op_fill_all(db, B * S, 321);
    ptdp_tensor l = op_view(lb + 2, B, C, S), d = op_view(db + 1, B, C, S);
    const double scale = 1.0 / 48;
    ptdp_xent_backward(d, l, y, scale);

    double loss = 0, p[C];
    for (int i = 0; i < B; i++) {
        softmax_ref(p, l, i);
        loss -= log(p[y[i]]);
        for (int j = 0; j < C; j++)
            ASSERT_CLOSE(op_at(d, i, j), scale * (p[j] - (j == y[i])), (sizeof(ptdp_real) == 4 ? 1e-7 : 1e-14) * scale);
    }
    check_padding(db, B, S, 1, C, 321);
    ASSERT_CLOSE(ptdp_xent_forward(l, y), loss, 1e-12 * loss);

    /* in place: dlogits may be logits */
    ptdp_real copy[B * S];
    memcpy(copy, lb, sizeof copy);
    ptdp_xent_backward(op_view(copy + 2, B, C, S), op_view(copy + 2, B, C, S), y, scale);
    for (int i = 0; i < B; i++)
        for (int j = 0; j < C; j++)
            ck_assert(copy[i * S + 2 + j] == op_at(d, i, j));
}
END_TEST

#ifdef PTDP_DOUBLE
TEST(xent_tests, xent_backward_finite_differences)
{
    enum { B = 3, C = 5 };
    ptdp_real l[B * C], d[B * C];
    int64_t y[B] = { 4, 0, 2 };
    op_fill_random(op_view(l, B, C, C), 3.0);
    const double scale = 0.25, h = 1e-5;
    ptdp_xent_backward(op_view(d, B, C, C), op_view(l, B, C, C), y, scale);
    for (int e = 0; e < B * C; e++) {
        double keep = l[e];
        l[e] = keep + h;
        double lp = scale * ptdp_xent_forward(op_view(l, B, C, C), y);
        l[e] = keep - h;
        double lm = scale * ptdp_xent_forward(op_view(l, B, C, C), y);
        l[e] = keep;
        double numeric = (lp - lm) / (2 * h);
        ASSERT_CLOSE(d[e], numeric, 1e-6 * fmax(1.0, fabs(numeric)));
    }
}
END_TEST
#endif

/* The vocab-parallel partials, computed slice by slice on column views of the
 * full logits and combined as the all-reduces would (max, then sums), give
 * the full loss and, slice by slice, the full gradient. */
static void sharded_case(int parts)
{
    enum { B = 6, C = 11 };
    ptdp_real l[B * C], full_d[B * C], shard_d[B * C];
    int64_t y[B] = { 0, 10, 5, 3, 8, 2 };
    op_fill_random(op_view(l, B, C, C), 6.0);
    l[2 * C + 7] = (ptdp_real)1e4;    /* one huge logit, off the label */
    ptdp_tensor L = op_view(l, B, C, C);
    const double scale = 1.0 / 3;

    /* uneven widths: the first C % parts slices get one column more */
    int c0[5], w[5];
    for (int r = 0, c = 0; r < parts; r++) {
        w[r] = C / parts + (r < C % parts);
        c0[r] = c;
        c += w[r];
    }
    double max[B], m_r[B], sumexp[B] = { 0 }, s_r[B], picked[B] = { 0 }, p_r[B];
    for (int i = 0; i < B; i++)
        max[i] = -INFINITY;
    for (int r = 0; r < parts; r++) {                         /* all_reduce MAX */
        ptdp_row_max(m_r, cols(L, c0[r], w[r]));
        for (int i = 0; i < B; i++)
            max[i] = fmax(max[i], m_r[i]);
    }
    for (int r = 0; r < parts; r++) {                         /* all_reduce SUM ×2 */
        ptdp_tensor slice = cols(L, c0[r], w[r]);
        ptdp_row_sum_exp(s_r, slice, max);
        ptdp_pick_label(p_r, slice, y, c0[r]);
        for (int i = 0; i < B; i++) {
            sumexp[i] += s_r[i];
            picked[i] += p_r[i];
        }
    }
    double whole = ptdp_xent_forward(L, y);
    double partials = ptdp_xent_from_partials(B, max, sumexp, picked);
    ck_assert(isfinite(partials));
    ASSERT_CLOSE(partials, whole, 1e-12 * whole);

    ptdp_xent_backward(op_view(full_d, B, C, C), L, y, scale);
    for (int r = 0; r < parts; r++)
        ptdp_xent_backward_shard(cols(op_view(shard_d, B, C, C), c0[r], w[r]),
                                 cols(L, c0[r], w[r]), y, c0[r], max, sumexp, scale);
    for (int i = 0; i < B * C; i++)
        ASSERT_CLOSE(shard_d[i], full_d[i], (sizeof(ptdp_real) == 4 ? 1e-7 : 1e-15) * scale);
}

TEST(xent_tests, xent_shards_combine_to_the_full_loss)
{
    for (int parts = 1; parts <= 4; parts++)
        sharded_case(parts);
}
END_TEST

/* ------------------------------------------------------------- main */

int main(void)
{
    return harness_main("ops-" PTDP_REAL_NAME);
}
