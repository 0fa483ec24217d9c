/*
 * fp8_linear.h — FP8 training through the one linear op: what a device
 * needs to quantize a GEMM's operands as one device would (parallel_linear.h
 * calls it; the formats are fp8.h's, the recipes fp8_quant.h's).
 *
 * An FP8 tensor core multiplies codes and adds in float.  Emulated: each
 * operand is quantized (amax → scale → cast) and its dequantized values,
 * value(code) · s, go into an ordinary float GEMM — the same products, the
 * same float accumulation:
 *
 *     forward     Y  = Q₄(X) Q₄(W)ᵀ (+ b)         Q₄: E4M3, the act tile for X,
 *     backward    dX = Q₅(dY) Q₄(W)                    the weight tile for W
 *                 dW += Q₅(dY)ᵀ Q₄(X)             Q₅: E5M2 (or E4M3), the act tile
 *
 * Each tensor is quantized once per use, from the stored values: the
 * backward quantizes X and W again and gets the forward's bits (the same
 * values, the same amax, the same scale; a delayed scale changes only
 * between steps).  Master weights, the optimizer, norms, softmax, the loss,
 * the router and the output head stay in float (DeepSeek-V3 and torchtitan
 * keep the head out of FP8).
 *
 * Why a parallel run quantizes like one device.  A scale is a function of
 * the whole tensor one device would hold, so every rank that holds part of
 * it must agree on the amax before taking the scale:
 *
 *     tensor     split over TP when         split over rows when
 *     W          its parameter is sharded   never
 *     X          W is split by columns      CP / Ulysses (each rank its
 *                (row-parallel: x_r)        positions of the sequence)
 *     dY         W is split by rows         the same
 *                (column-parallel: dy_r)
 *
 *   one scale (tensorwise, delayed):  amax max-reduced over the TP group,
 *                                     then over the CP group (activations)
 *   tiles (blockwise, mxfp8):         each tile must lie on one rank — a
 *                                     split that cuts a tile is refused
 *                                     before the run (ptdp_fp8_split_check)
 *                                     — and then needs no reduction at all:
 *
 *        W: 256 x 64 rows split over tp 2, tiles 128 x 128
 *        ┌──────────────┐  rank 0: tile 0            one device: tile 0
 *        │   tile 0     │                                         tile 1
 *        ├──────────────┤  rank 1: tile 1            the same tiles, the same scales
 *        │   tile 1     │
 *        └──────────────┘
 *
 *   Data parallelism needs nothing: each replica's micro-batches are
 *   micro-batches one device would run.  SP gathers X before a column-
 *   parallel product and dY arrives whole for a row-parallel one.
 *
 * Delayed scaling (Transformer Engine) keeps, per weight and per operand
 * (X, W, dY), the amaxes of the last H steps.  A step's amax is the max
 * over all its micro-batches (those of every DP replica: one all-reduce
 * of the whole table at the optimizer step), so the histories stay
 * identical everywhere, as on one device running all the micro-batches.
 */
#ifndef PTDP_FP8_LINEAR_H
#define PTDP_FP8_LINEAR_H

#include <stddef.h>

#include "comm.h"
#include "fp8_quant.h"
#include "model.h"
#include "tensor.h"

struct ptdp_device;

/* --check's loss tolerance of an FP8 run in float (the double build keeps
 * 1e-10, which every layout meets).  A layout that sums in another float
 * order (TP's partial sums, CP's ring) leaves an input an ulp from one
 * device's, and now and then that ulp crosses an FP8 rounding midpoint:
 * the code moves a whole FP8 step (2^-3 or 2^-2 of the value's binade).
 * Measured on the GPT over 10 steps at tp 2 with SP, cp 2 and dp 2 x tp 2,
 * tensorwise, delayed and mxfp8: losses apart by at most 7.7e-4 (2e-4 of
 * the loss); the parameters by 4.3e-3, within AdamW's 2 lr a step. */
#define PTDP_FP8_TOLERANCE_F32 1e-3

/* --fp8 and its flags. */
typedef struct {
    const ptdp_fp8_recipe *recipe;   /* NULL: FP8 off                           */
    const ptdp_fp8_format *grad;     /* dY's format: E5M2 (NULL: E5M2), or E4M3
                                        (--fp8-grad-format e4m3, DeepSeek-V3)  */
    int history;                     /* delayed: H, the steps kept (0: default) */
    bool comm;                       /* --fp8-comm: EP's dispatch sends FP8
                                        rows and their scales (ep.h)       */
} ptdp_fp8_settings;

/* The operand of a GEMM being quantized. */
typedef enum {
    PTDP_FP8_X = 0,    /* a forward input: E4M3, the activation tile           */
    PTDP_FP8_W,        /* a weight: E4M3, the weight tile                     */
    PTDP_FP8_DY,       /* an output gradient: the gradient format, act tile    */
    PTDP_FP8_ROLES
} ptdp_fp8_role;

/* One device's FP8: the settings, the groups an activation's amax is
 * reduced over, and the delayed recipe's histories (one per weight of the
 * device's model and operand, in the arena as optimizer-like state). */
typedef struct ptdp_fp8_linear ptdp_fp8_linear;

/* rows: the CP group (the ranks holding other positions of a sequence), or
 * NULL; replicas: the DP group a delayed recipe's step amaxes are reduced
 * over.  m: the device's model (a weight's history is found by its place
 * in m->params).  0 or an error (out of memory, named). */
int  ptdp_fp8_linear_create(struct ptdp_device *dev, const ptdp_fp8_settings *s, const ptdp_model *m,
                            ptdp_comm *rows, ptdp_comm *replicas, ptdp_fp8_linear **out);
void ptdp_fp8_linear_destroy(struct ptdp_device *dev, ptdp_fp8_linear *f);
/* Its settings (f not NULL). */
const ptdp_fp8_settings *ptdp_fp8_linear_settings(const ptdp_fp8_linear *f);

/* Quantize n tensors of one role (a layer's operand: n = 1; a group of
 * experts: one each), member i belonging to weight w[i]: dst[i] is a new
 * transient ("acts.fp8") holding src[i]'s dequantized values.  A tensor
 * split over tp (the table above) has its amax max-reduced there, all n
 * in one all-reduce, so every rank calls this with the same n whatever
 * rows its members hold.  Free with ptdp_fp8_linear_release. */
int  ptdp_fp8_linear_quantize(struct ptdp_device *dev, ptdp_fp8_linear *f, ptdp_fp8_role role, ptdp_comm *tp,
                              int n, const ptdp_param *const *w, const ptdp_tensor *src, ptdp_tensor *dst);
void ptdp_fp8_linear_release(struct ptdp_device *dev, int n, ptdp_tensor *dst);

/* The optimizer step: a delayed recipe's step amaxes max-reduced over the
 * replicas and recorded in each history.  Nothing for the others. */
int  ptdp_fp8_linear_step(struct ptdp_device *dev, ptdp_fp8_linear *f);

/* The histories for a checkpoint: per weight of the device's model and
 * operand, `length` slots and the count recorded (ptdp_fp8_history).
 * NULL unless the recipe keeps one. */
ptdp_fp8_history *ptdp_fp8_linear_history(ptdp_fp8_linear *f, const ptdp_param *w, ptdp_fp8_role role);

/* Before a run: may a weight `name` of rows x cols, sharded `shard` over
 * tp ranks in `parts` equal blocks (model.h's ptdp_param), be quantized by
 * r like one device?  A tiled recipe needs every rank's piece of the split
 * dimension to be whole tiles — of the weight, and of the activation or
 * gradient split the same way.  0, or PTDP_EINVAL with the sizes and what
 * would work in msg. */
int  ptdp_fp8_split_check(const ptdp_fp8_recipe *r, const char *name, int rows, int cols, ptdp_shard shard,
                          int parts, int tp, char *msg, size_t msglen);

/* The same for a model's list of split weights (its check_run's). */
typedef struct {
    const char *name;
    int rows, cols;
    ptdp_shard shard;
    int parts;
} ptdp_fp8_weight;

int  ptdp_fp8_split_check_all(const ptdp_fp8_recipe *r, const ptdp_fp8_weight *w, int n, int tp, char *msg,
                              size_t msglen);

#endif
