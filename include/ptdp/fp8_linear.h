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

/* What a device does with them lives in src/parallel/fp8_linear_impl.h
 * (the quantization the parallel-linear op calls, the histories, the
 * tile check a model's check_run makes). */

#endif
