/*
 * tensor.h — a small row-major 2-D tensor of ptdp_real.
 *
 * A tensor is a pointer, a shape and a row stride.  An owned tensor has
 * stride == cols; a column view (e.g. the slice of a weight that one
 * tensor-parallel rank owns, taken out of the full matrix) keeps its
 * parent's stride.  Views never own memory and are passed by value.
 *
 *        cols ──────────►
 *   rows ┌──────────────────┐   element (i, j) is data[i * stride + j]
 *    │   │    ┌────┐        │
 *    │   │    │view│        │   ptdp_tensor_cols(t, c0, n) keeps stride
 *    ▼   │    └────┘        │
 *        └──────────────────┘
 *
 * Owned tensors are allocated from a device's arena (ptdp_tensor_alloc in
 * device.h), so the
 * arena's accounting sees every one of them.
 */
#ifndef PTDP_TENSOR_H
#define PTDP_TENSOR_H

#include <stdbool.h>
#include <stddef.h>

#include "arena.h"
#include "types.h"

#define PTDP_NAME_MAX 64

typedef struct {
    ptdp_real *data;
    int rows, cols;
    int stride;                  /* elements from one row to the next        */
    bool owned;                  /* true: allocated by ptdp_tensor_alloc     */
    char name[PTDP_NAME_MAX];    /* e.g. "blocks.3.fc1.weight"                */
} ptdp_tensor;


/* A tensor over caller-owned memory (stride = cols), not arena-accounted:
 * for tests and for wrapping buffers that already live in an arena. */
ptdp_tensor ptdp_tensor_wrap(ptdp_real *data, int rows, int cols);

/* Views: rows [r0, r0+n) or columns [c0, c0+n) of t. */
ptdp_tensor ptdp_tensor_rows(ptdp_tensor t, int r0, int n);
ptdp_tensor ptdp_tensor_cols(ptdp_tensor t, int c0, int n);

static inline size_t ptdp_tensor_numel(ptdp_tensor t) { return (size_t)t.rows * (size_t)t.cols; }
static inline bool   ptdp_tensor_contiguous(ptdp_tensor t) { return t.stride == t.cols || t.rows <= 1; }
static inline ptdp_real *ptdp_at(ptdp_tensor t, int i, int j) { return t.data + (size_t)i * t.stride + j; }

void ptdp_tensor_zero(ptdp_tensor t);
void ptdp_tensor_fill(ptdp_tensor t, ptdp_real v);
/* dst = src; shapes must match (views allowed on both sides). */
void ptdp_tensor_copy(ptdp_tensor dst, ptdp_tensor src);
/* dst += src */
void ptdp_tensor_add(ptdp_tensor dst, ptdp_tensor src);
/* dst = the column range [c0, c0+dst.cols) of src (a copy, not a view). */
void ptdp_tensor_slice_cols(ptdp_tensor dst, ptdp_tensor src, int c0);
/* dst = the row range [r0, r0+dst.rows) of src. */
void ptdp_tensor_slice_rows(ptdp_tensor dst, ptdp_tensor src, int r0);
/* dst = [parts[0] | parts[1] | …] side by side (columns add up to dst.cols). */
void ptdp_tensor_concat_cols(ptdp_tensor dst, const ptdp_tensor *parts, int n);
/* dst = parts stacked top to bottom (rows add up to dst.rows). */
void ptdp_tensor_concat_rows(ptdp_tensor dst, const ptdp_tensor *parts, int n);
/* Largest |a - b| and largest |b| over all elements; shapes must match. */
void ptdp_tensor_max_diff(ptdp_tensor a, ptdp_tensor b, double *max_abs_diff, double *max_abs_b);


#endif
