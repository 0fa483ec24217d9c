/*
 * tensor.c — row-major 2-D tensors, views, and the copies TP and PP need.
 *
 * Element (i, j) lives at data[i * stride + j].  A view of some rows or
 * columns is just another (data, rows, cols, stride): no copy, no memory.
 * Every helper below therefore walks row by row and honours each side's
 * stride, so a tensor-parallel shard can be copied straight out of, or into,
 * the full matrix it is a column range of:
 *
 *      full (stride 8)             shard = cols view [2, 5)
 *     ┌─┬─┬─────┬─┬─┬─┐            data = full.data + 2, rows 3, cols 3,
 *     │ │ │█ █ █│ │ │ │            stride 8: row i starts 8 elements
 *     │ │ │█ █ █│ │ │ │            after row i-1, not 3
 *     │ │ │█ █ █│ │ │ │
 *     └─┴─┴─────┴─┴─┴─┘
 *
 * Slicing and concatenation are written as views plus one copy, which is
 * exactly how they are drawn: concat_cols copies part k into the column
 * range of dst that part k occupies.
 *
 * Shapes that do not fit are caught (PTDP_REQUIRE, error.h): inside a device
 * the device fails with a message naming the function and the shapes — a
 * lesson's wrong slice is a sentence, not an abort — and the call does
 * nothing (a view out of range is empty).
 */
#include "ptdp/tensor.h"

#include "ptdp/error.h"

#include <math.h>
#include <stdio.h>
#include <string.h>



ptdp_tensor ptdp_tensor_wrap(ptdp_real *data, int rows, int cols)
{
    ptdp_tensor t;
    if (!PTDP_REQUIRE(rows >= 0 && cols >= 0, "a %d x %d tensor", rows, cols))
        rows = cols = 0;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.rows = rows;
    t.cols = cols;
    t.stride = cols;
    return t;
}

/* ---- Views ---------------------------------------------------------------- */

/* The element offset of (i, j), kept away from a NULL base so that an empty
 * tensor's views stay NULL instead of becoming NULL + offset. */
static ptdp_real *offset(ptdp_tensor t, int i, int j)
{
    return t.data == NULL ? NULL : ptdp_at(t, i, j);
}

ptdp_tensor ptdp_tensor_rows(ptdp_tensor t, int r0, int n)
{
    ptdp_tensor v = t;
    if (!PTDP_REQUIRE(r0 >= 0 && n >= 0 && r0 + n <= t.rows,
                      "rows [%d, %d) of a tensor of %d rows (r0 = %d, n = %d)", r0, r0 + n, t.rows, r0, n)) {
        v.data = NULL;   /* empty: every op given it does nothing */
        v.rows = v.cols = 0;
        v.owned = false;
        return v;
    }
    v.data = n > 0 ? offset(t, r0, 0) : t.data;
    v.rows = n;
    v.owned = false;
    return v;
}

ptdp_tensor ptdp_tensor_cols(ptdp_tensor t, int c0, int n)
{
    ptdp_tensor v = t;
    if (!PTDP_REQUIRE(c0 >= 0 && n >= 0 && c0 + n <= t.cols,
                      "columns [%d, %d) of a tensor of %d columns (c0 = %d, n = %d)", c0, c0 + n, t.cols, c0, n)) {
        v.data = NULL;
        v.rows = v.cols = 0;
        v.owned = false;
        return v;
    }
    v.data = n > 0 ? offset(t, 0, c0) : t.data;
    v.cols = n;
    v.owned = false;
    return v;
}

/* ---- Element-wise helpers -------------------------------------------------- */

void ptdp_tensor_zero(ptdp_tensor t)
{
    ptdp_tensor_fill(t, 0);
}

void ptdp_tensor_fill(ptdp_tensor t, ptdp_real v)
{
    if (t.cols == 0)
        return;
    for (int i = 0; i < t.rows; i++) {
        ptdp_real *row = ptdp_at(t, i, 0);
        for (int j = 0; j < t.cols; j++)
            row[j] = v;
    }
}

void ptdp_tensor_copy(ptdp_tensor dst, ptdp_tensor src)
{
    if (!PTDP_REQUIRE(dst.rows == src.rows && dst.cols == src.cols, "dst %d x %d, src %d x %d",
                      dst.rows, dst.cols, src.rows, src.cols))
        return;
    if (dst.rows == 0 || dst.cols == 0)
        return;
    /* Both contiguous: one copy of the whole block. */
    if (ptdp_tensor_contiguous(dst) && ptdp_tensor_contiguous(src)) {
        memcpy(dst.data, src.data, ptdp_tensor_numel(dst) * sizeof(ptdp_real));
        return;
    }
    for (int i = 0; i < dst.rows; i++)
        memcpy(ptdp_at(dst, i, 0), ptdp_at(src, i, 0), (size_t)dst.cols * sizeof(ptdp_real));
}

void ptdp_tensor_add(ptdp_tensor dst, ptdp_tensor src)
{
    if (!PTDP_REQUIRE(dst.rows == src.rows && dst.cols == src.cols, "dst %d x %d, src %d x %d",
                      dst.rows, dst.cols, src.rows, src.cols))
        return;
    if (dst.cols == 0)
        return;
    for (int i = 0; i < dst.rows; i++) {
        ptdp_real *d = ptdp_at(dst, i, 0);
        const ptdp_real *s = ptdp_at(src, i, 0);
        for (int j = 0; j < dst.cols; j++)
            d[j] += s[j];
    }
}

/* ---- Slices and concatenation: a view plus a copy --------------------------- */

void ptdp_tensor_slice_cols(ptdp_tensor dst, ptdp_tensor src, int c0)
{
    ptdp_tensor_copy(dst, ptdp_tensor_cols(src, c0, dst.cols));
}

void ptdp_tensor_slice_rows(ptdp_tensor dst, ptdp_tensor src, int r0)
{
    ptdp_tensor_copy(dst, ptdp_tensor_rows(src, r0, dst.rows));
}

void ptdp_tensor_concat_cols(ptdp_tensor dst, const ptdp_tensor *parts, int n)
{
    int c0 = 0;
    for (int k = 0; k < n; k++) {
        ptdp_tensor_copy(ptdp_tensor_cols(dst, c0, parts[k].cols), parts[k]);
        c0 += parts[k].cols;
    }
    PTDP_REQUIRE(c0 == dst.cols, "the parts have %d columns, dst %d", c0, dst.cols);
}

void ptdp_tensor_concat_rows(ptdp_tensor dst, const ptdp_tensor *parts, int n)
{
    int r0 = 0;
    for (int k = 0; k < n; k++) {
        ptdp_tensor_copy(ptdp_tensor_rows(dst, r0, parts[k].rows), parts[k]);
        r0 += parts[k].rows;
    }
    PTDP_REQUIRE(r0 == dst.rows, "the parts have %d rows, dst %d", r0, dst.rows);
}

/* ---- Comparison ------------------------------------------------------------ */

/* In double whatever ptdp_real is, so a float tensor's difference is not
 * rounded once more.  A NaN on either side makes *max_abs_diff NaN (it is
 * not skipped, as a plain `d > max` would), so a check written
 * `!(diff <= tol)` fails on it. */
void ptdp_tensor_max_diff(ptdp_tensor a, ptdp_tensor b, double *max_abs_diff, double *max_abs_b)
{
    if (!PTDP_REQUIRE(a.rows == b.rows && a.cols == b.cols, "a %d x %d, b %d x %d", a.rows, a.cols,
                      b.rows, b.cols)) {
        *max_abs_diff = NAN;   /* never "equal" */
        *max_abs_b = 0;
        return;
    }
    double max_d = 0.0, max_b = 0.0;
    for (int i = 0; i < a.rows && a.cols > 0; i++) {
        const ptdp_real *ra = ptdp_at(a, i, 0);
        const ptdp_real *rb = ptdp_at(b, i, 0);
        for (int j = 0; j < a.cols; j++) {
            double d = fabs((double)ra[j] - (double)rb[j]);
            double m = fabs((double)rb[j]);
            if (d > max_d || isnan(d))      /* once NaN, d > NaN is false */
                max_d = d;
            if (m > max_b || isnan(m))
                max_b = m;
        }
    }
    if (max_abs_diff != NULL)
        *max_abs_diff = max_d;
    if (max_abs_b != NULL)
        *max_abs_b = max_b;
}

/* ---- Sharding ---------------------------------------------------------------- */
