/*
 * wgrad.c — weight gradients now, or recorded for a later W (wgrad.h).
 *
 * Why W can wait: dW = dY^T X is read by nothing but the optimizer step,
 * which comes after every micro-batch's backward; dX = dY W is what the
 * previous layer needs next.  So B runs the dX products and keeps, for each
 * linear layer, exactly the two operands of its dW product:
 *
 *     item k:  dW_k (an offset into the gradient buffer)
 *              dY_k  rows x out   ┐  copies in the arena, category "acts",
 *              X_k   rows x in    ┘  named "zb.wgrad": its peaks count them
 *
 * and W runs dW_k += dY_k^T X_k for k = 0, 1, … — the order the unsplit
 * backward ran them, with the same BLAS call on bit-identical operands.
 * A production system would keep X alive instead of copying it (the bytes
 * are the same); a copy keeps the models' activation bookkeeping unchanged.
 */
#include "ptdp/wgrad.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/ops.h"
#include "runtime/device_impl.h"

void ptdp_wgrad_init(ptdp_wgrad *w, ptdp_real *const *base, size_t base_len)
{
    memset(w, 0, sizeof *w);
    w->base = base;
    w->base_len = base_len;
}

size_t ptdp_wgrad_linear_bytes(int rows, int in, int out)
{
    return (size_t)rows * (size_t)(in + out) * sizeof(ptdp_real);
}

/* ------------------------------------------------------------ recording */

/* The bytes a tensor of the arena holds for W, and the stage-wide count. */
static void count(ptdp_wgrad *w, ptdp_tensor t, int sign)
{
    size_t b = ptdp_tensor_numel(t) * sizeof(ptdp_real);
    if (sign > 0) {
        w->bytes += b;
        if (w->held != NULL) {
            *w->held += b;
            if (w->peak != NULL && *w->held > *w->peak)
                *w->peak = *w->held;
        }
    } else {
        w->bytes -= b;
        if (w->held != NULL)
            *w->held -= b;
    }
}

static ptdp_wgrad_item *next_item(ptdp_device *dev, ptdp_wgrad *w, ptdp_tensor dw, double flops,
                                  const char *what)
{
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 16;
        ptdp_wgrad_item *it = realloc(w->items, (size_t)cap * sizeof *it);
        if (it == NULL) {
            ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory recording weight gradients", dev->rank);
            return NULL;
        }
        w->items = it;
        w->cap = cap;
    }
    ptdp_wgrad_item *it = &w->items[w->n++];
    memset(it, 0, sizeof *it);
    /* Where dW lives: an offset into the model's gradient buffer, which
     * ZeRO-2 may replace between B and W; a raw pointer without one. */
    if (w->base != NULL && *w->base != NULL && dw.data >= *w->base && dw.data < *w->base + w->base_len)
        it->offset = (size_t)(dw.data - *w->base);
    else
        it->raw = dw.data;
    it->rows = dw.rows;
    it->cols = dw.cols;
    it->stride = dw.stride;
    it->flops = flops;
    snprintf(it->what, sizeof it->what, "%s", what);
    w->pending = true;
    return it;
}

/* An owned bit-for-bit copy of t in the arena, counted for W. */
static int keep(ptdp_device *dev, ptdp_wgrad *w, ptdp_tensor *copy, ptdp_tensor t)
{
    int rc = ptdp_tensor_alloc_uninit(dev, copy, "zb.wgrad", PTDP_MEM_ACTS, t.rows, t.cols);
    if (rc != 0)
        return rc;
    ptdp_tensor_copy(*copy, t);
    count(w, *copy, +1);
    return PTDP_OK;
}

int ptdp_wgrad_gemm(ptdp_device *dev, ptdp_wgrad *w, ptdp_tensor dw, ptdp_tensor dy, ptdp_tensor x,
                    double flops, const char *what)
{
    if (w == NULL) {
        /* dW (out x in) += dy^T (out x B) · x (B x in): ptdp_linear_backward's call */
        ptdp_matmul(dw, dy, true, x, false, 1.0, 1.0);
        return PTDP_OK;
    }
    ptdp_wgrad_item *it = next_item(dev, w, dw, flops, what);
    if (it == NULL)
        return PTDP_ENOMEM;
    it->kind = PTDP_WGRAD_GEMM;
    int rc = keep(dev, w, &it->dy, dy);
    return rc != 0 ? rc : keep(dev, w, &it->x, x);
}

int ptdp_wgrad_embedding(ptdp_device *dev, ptdp_wgrad *w, ptdp_tensor dtable, int64_t row0,
                         const int64_t *ids, ptdp_tensor dx, double flops, const char *what)
{
    if (w == NULL) {
        ptdp_embedding_backward(dtable, row0, ids, dx);
        return PTDP_OK;
    }
    ptdp_wgrad_item *it = next_item(dev, w, dtable, flops, what);
    if (it == NULL)
        return PTDP_ENOMEM;
    it->kind = PTDP_WGRAD_EMBEDDING;
    it->row0 = row0;
    int rc = keep(dev, w, &it->dy, dx);
    if (rc != 0)
        return rc;
    size_t n = (size_t)dx.rows;
    if ((it->ids = ptdp_alloc_uninit(dev, (n > 0 ? n : 1) * sizeof *it->ids, PTDP_MEM_ACTS, "zb.wgrad")) == NULL)
        return PTDP_ENOMEM;
    memcpy(it->ids, ids, n * sizeof *ids);
    w->bytes += n * sizeof *ids;
    if (w->held != NULL) {
        *w->held += n * sizeof *ids;
        if (w->peak != NULL && *w->held > *w->peak)
            *w->peak = *w->held;
    }
    return PTDP_OK;
}

/* ------------------------------------------------------------ running W */

static void free_item(ptdp_device *dev, ptdp_wgrad *w, ptdp_wgrad_item *it)
{
    if (it->dy.data != NULL)
        count(w, it->dy, -1);
    if (it->x.data != NULL)
        count(w, it->x, -1);
    ptdp_tensor_free(dev, &it->dy);
    ptdp_tensor_free(dev, &it->x);
}

int ptdp_wgrad_run(ptdp_device *dev, ptdp_wgrad *w)
{
    for (int k = 0; k < w->n; k++) {
        ptdp_wgrad_item *it = &w->items[k];
        if (it->raw == NULL && *w->base == NULL)   /* ZeRO-2 gave B a bucket but not W */
            return ptdp_fail(dev, PTDP_EINVAL, "device %d: W of %s: the gradient buffer is gone "
                             "(its buffer must be given around W as around B)", dev->rank, it->what);
        ptdp_real *data = it->raw != NULL ? it->raw : *w->base + it->offset;
        ptdp_tensor dw = { .data = data, .rows = it->rows, .cols = it->cols, .stride = it->stride };
        double w0 = ptdp_wall_now();
        if (it->kind == PTDP_WGRAD_GEMM)
            ptdp_matmul(dw, it->dy, true, it->x, false, 1.0, 1.0);
        else
            ptdp_embedding_backward(dw, it->row0, it->ids, it->dy);
        ptdp_compute(dev, it->what, it->flops, w0);
    }
    ptdp_wgrad_free(dev, w);
    return PTDP_OK;
}

void ptdp_wgrad_free(ptdp_device *dev, ptdp_wgrad *w)
{
    for (int k = 0; k < w->n; k++) {
        ptdp_wgrad_item *it = &w->items[k];
        if (it->ids != NULL) {   /* before dy, whose rows count them */
            size_t b = (size_t)it->dy.rows * sizeof *it->ids;
            w->bytes -= b;
            if (w->held != NULL)
                *w->held -= b;
            ptdp_free(dev, it->ids);
            it->ids = NULL;
        }
        free_item(dev, w, it);
    }
    free(w->items);
    w->items = NULL;
    w->n = w->cap = 0;
    w->pending = false;
}
