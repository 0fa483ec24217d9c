/*
 * wgrad.h — the weight gradients of a backward, computed now or deferred.
 *
 * A linear layer's backward is three products (linear.c):
 *
 *     dX  = dY W          the gradient the previous layer (and stage) waits for
 *     dW += dY^T X        nobody waits for it until the optimizer step
 *     db += colsum dY
 *
 * Zero-bubble pipelines (Qi et al. 2024, ZB-H1) split a stage's backward in
 * two actions: B computes every dX (and the cheap bias and LayerNorm
 * gradients), W computes every dW later, in what would have been a bubble.
 * For that W needs dY and X of every linear layer after B has freed the
 * micro-batch's activations, so B copies them into the device's arena:
 *
 *     B (micro-batch k)                          W (micro-batch k), later
 *     ┌───────────────────────────────┐          ┌──────────────────────────┐
 *     │ dX = dY W      ──► send to s-1 │         │ for item in order:       │
 *     │ db += colsum dY                │         │   dW += dY^T X           │
 *     │ record (dW, copy of dY,        │──────►  │ free the copies          │
 *     │         copy of X)  "zb.wgrad" │ arena   └──────────────────────────┘
 *     │ free the activations           │ ("acts")
 *     └───────────────────────────────┘
 *
 *   bytes held per linear layer and micro-batch between B and W:
 *       rows x (in + out) x sizeof(ptdp_real)      (this shard's in and out)
 *
 *   flops of a linear layer of rows x in -> out:
 *       F  = 2 rows in out       (X W^T)
 *       B  = 2 rows in out       (dY W)            B = F
 *       W  = 2 rows in out       (dY^T X)          W = F
 *
 * Every weight-gradient product of the models goes through
 * ptdp_wgrad_gemm — the parallel-linear op's backward calls it for every
 * linear layer, experts and routers included (parallel_linear.h): with a
 * NULL sink it runs at once, exactly the product ptdp_linear_backward
 * runs; with a sink it is recorded, and ptdp_wgrad_run later runs the same
 * product on the same operands (bit-identical copies), in the order they
 * were recorded — the order the unsplit backward runs them.  A gradient
 * that receives two contributions in one backward (the tied embedding of a
 * one-stage GPT: the head's product and the lookups' scatter-add) gets both
 * in W, in the unsplit order, so a split backward of a micro-batch gives
 * the unsplit one's bits.
 *
 * The gradient a record adds into is kept as an offset into the model's
 * gradient buffer (`base`), not as a pointer: ZeRO-2 gives the model a
 * fresh buffer around each action, so the buffer of B may not be the one
 * of W.
 */
#ifndef PTDP_WGRAD_H
#define PTDP_WGRAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

struct ptdp_device;

typedef enum {
    PTDP_WGRAD_GEMM = 0,      /* dw += dy^T x                                  */
    PTDP_WGRAD_EMBEDDING      /* dw[ids[i] - row0] += dy[i] (rows it holds)    */
} ptdp_wgrad_kind;

typedef struct {
    ptdp_wgrad_kind kind;
    size_t offset;            /* dw: elements from *base (or a raw pointer)    */
    ptdp_real *raw;           /* dw's data when there is no base               */
    int rows, cols, stride;   /* dw's shape                                    */
    ptdp_tensor dy, x;        /* owned copies ("zb.wgrad"); x unused for
                                 EMBEDDING                                      */
    int64_t *ids;             /* EMBEDDING: owned copy of dy.rows ids          */
    int64_t row0;
    double flops;             /* what W charges the virtual clock for it       */
    char what[32];            /* the trace's name for it                       */
} ptdp_wgrad_item;

typedef struct ptdp_wgrad {
    ptdp_real *const *base;   /* the gradient buffer the records point into
                                 (&model->flat_g), or NULL                      */
    size_t base_len;          /* its elements                                   */
    int n, cap;
    ptdp_wgrad_item *items;   /* host bookkeeping                               */
    size_t bytes;             /* arena bytes held for W now                     */
    size_t *held, *peak;      /* optional: a stage-wide count of the bytes held
                                 for W by every pending sink, and its peak      */
    bool pending;             /* recorded by a B, not yet run by its W          */
} ptdp_wgrad;

/* An empty sink whose records point into the base_len elements at *base
 * (base may be NULL: raw pointers). */
void ptdp_wgrad_init(ptdp_wgrad *w, ptdp_real *const *base, size_t base_len);

/* dw += dy^T x: now if w is NULL (the unsplit backward), else recorded with
 * copies of dy and x.  `flops` is what W charges when it runs the product
 * later (the caller has charged it already if it runs now); `what` names it
 * in the trace.  0, or PTDP_ENOMEM (the device failed, naming "zb.wgrad"). */
int  ptdp_wgrad_gemm(struct ptdp_device *dev, ptdp_wgrad *w, ptdp_tensor dw, ptdp_tensor dy,
                     ptdp_tensor x, double flops, const char *what);

/* ptdp_embedding_backward (dtable[ids[i] - row0] += dx[i]) now, or
 * recorded with copies of dx and ids. */
int  ptdp_wgrad_embedding(struct ptdp_device *dev, ptdp_wgrad *w, ptdp_tensor dtable, int64_t row0,
                          const int64_t *ids, ptdp_tensor dx, double flops, const char *what);

/* W: run the records in order into the gradient views, charge their flops
 * on the virtual clock, free the copies.  0 (an empty sink does nothing). */
int  ptdp_wgrad_run(struct ptdp_device *dev, ptdp_wgrad *w);

/* Free the copies without running them (a failed or abandoned step). */
void ptdp_wgrad_free(struct ptdp_device *dev, ptdp_wgrad *w);

/* The bytes a sink holds for W of one linear layer of `rows` rows,
 * in -> out features: rows x (in + out) reals. */
size_t ptdp_wgrad_linear_bytes(int rows, int in, int out);

#endif
