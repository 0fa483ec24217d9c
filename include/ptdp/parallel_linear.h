/*
 * parallel_linear.h — the one door of every GEMM-bearing layer: a linear layer
 * y = x Wᵀ + b run on a device of a tensor-parallel group.
 *
 * The math is nn.Linear's (ops.h); what the door adds is everything a
 * layer of a parallel model needs around the products, so that a model's
 * code says only which layer runs on what:
 *
 *   split    how the TP group shares W (Megatron-LM's ColumnParallelLinear
 *            and RowParallelLinear, with their conjugate f and g, tp.h):
 *
 *     NONE     y = x Wᵀ + b                     every rank the whole W (or no TP)
 *     COLUMN   y_r = x W_rᵀ + b_r               W split by rows (outputs):
 *              f: forward identity,             x replicated, y split;
 *                 backward dx = Σ_r dy_r W_r    all-reduce of the input gradient
 *     ROW      y = Σ_r x_r W_rᵀ  (+ b)          W split by columns (inputs):
 *              g: forward all-reduce,           x split, y replicated; the bias
 *                 backward identity             once, after the sum
 *
 *            x ──f──► [ x A_rᵀ ] ──GELU──► [ · B_rᵀ ] ──g──► y     one all-reduce
 *                      COLUMN               ROW                    each way
 *
 *            under sequence parallelism (sp.h) f's forward is an all-gather
 *            of x along the sequence and g a reduce-scatter into this
 *            rank's positions; their backwards swap them.
 *
 *   recipe   how a GEMM's operands are prepared and its output kept: in
 *            storage precision (float or double), or as bf16 activations
 *            (a complete output rounded where it is made, act_bf16.h) —
 *            or FP8 (fp8_linear.h): X and W quantized to scaled E4M3
 *            in the forward, dY to E5M2 in the backward, the one place
 *            a number format enters the products.
 *   clock    the piece of work a call ends, priced by the model and
 *            charged (ptdp_compute) before the call's collective, so the
 *            virtual timeline shows compute, then communication.
 *   wgrad    where dW = dYᵀ X goes: now, or recorded for a later W
 *            (wgrad.h: zero-bubble schedules split B and W).
 *
 * Forward beside backward, for one layer of one rank:
 *
 *   forward                              backward
 *   SP COLUMN: x ← all-gather(x)         dX = dY W      (or +=)
 *   Y = x Wᵀ (+ b unless a sum follows)  dW += dYᵀ X    now, or W's record
 *   bf16: round Y (NONE, COLUMN)         db += colsum dY
 *   charge the piece                     charge the piece
 *   ROW: g — all-reduce, or SP's         COLUMN: f — all-reduce dX, or SP's
 *        reduce-scatter; then + b               reduce-scatter (its X gathered
 *                                               again first, under dX's GEMM)
 *
 * A group (a mixture's experts, each a layer on its own rows of one
 * stacked input, ptdp_linear_group) runs every member's products and then
 * one charge and one collective for them all.
 */
#ifndef PTDP_PARALLEL_LINEAR_H
#define PTDP_PARALLEL_LINEAR_H

#include <stdbool.h>

#include "comm.h"
#include "model.h"
#include "tensor.h"
#include "wgrad.h"

struct ptdp_device;
struct ptdp_fp8_linear;

typedef enum {
    PTDP_SPLIT_NONE = 0,      /* whole W on every rank                        */
    PTDP_SPLIT_COLUMN,        /* W split by rows: this rank's outputs         */
    PTDP_SPLIT_ROW            /* W split by columns: this rank's inputs       */
} ptdp_linear_split;

/* How a GEMM's operands are prepared and its output kept. */
typedef enum {
    PTDP_RECIPE_STORAGE = 0,  /* as stored: float or double throughout        */
    PTDP_RECIPE_BF16          /* bf16 activations: a complete output (NONE,
                                 COLUMN) rounded to bf16 where it is made; a
                                 ROW layer's partial sums are rounded by
                                 whoever completes them (bias, residual)      */
} ptdp_linear_recipe;

/* One pass of a model (a forward or a backward of one micro-batch): the
 * device, its TP group, and how the calls of the pass are kept. */
typedef struct {
    struct ptdp_device *dev;
    ptdp_comm *tp;              /* the TP group (size 1: no TP)              */
    int sp_samples;             /* > 0: sequence parallelism, the sequences
                                   of the micro-batch (sp.h's samples)       */
    bool overlap;               /* SP: the backward's all-gather of X on the
                                   communication stream, under dX's GEMM    */
    ptdp_tensor sp_full;        /* SP: R rows of the caller's scratch — a ROW
                                   forward's partial sums, a COLUMN
                                   backward's input gathered again          */
    ptdp_tensor sp_local;       /* SP: a COLUMN backward's input gradient,
                                   this rank's positions (the scatter's)     */
    ptdp_linear_recipe recipe;
    struct ptdp_fp8_linear *fp8;  /* --fp8: GEMM operands quantized
                                     (fp8_linear.h); NULL: off             */
    ptdp_wgrad *wg;             /* W's sink for dW, or NULL: dW now          */
    const char *what;           /* the clock's name for the current piece    */
    const char *wwhat;          /* ... and for the dW products W will run    */
    double *w0;                 /* wall clock the current piece began (may be
                                   NULL: no clock — nothing is charged)     */
} ptdp_linear_pass;

/* One layer of a call: its split, this rank's weight and bias (the
 * parameters' w and g), and what its backward does. */
typedef struct {
    ptdp_linear_split split;
    const ptdp_param *w;
    const ptdp_param *b;        /* NULL: none (or the caller adds it, e.g.
                                   with dropout and the residual); in the
                                   GEMM unless a sum over TP follows (ROW,
                                   tp > 1): then once, after the sum         */
    bool accumulate_dx;         /* backward: dx += dy W, not = (a second
                                   branch into a gradient already there)     */
    double w_flops;             /* what W charges for dW, when deferred      */
} ptdp_linear_layer;

/* What a call charges the virtual clock, in flops at the device's peak:
 * the whole piece of work it ends (the model's price of everything since
 * the last charge, this layer's products included).  A COLUMN backward
 * under SP charges it in three parts around the all-gather of X, whose
 * sum is the piece: `before` (up to dX; the gather starts after it),
 * `dx` (dX = dY W and db, under the gather), `dw` (dW, unless deferred). */
typedef struct {
    double flops;
    double before, dx, dw;
} ptdp_linear_charge;

/* y = x Wᵀ + b through the layer's split (the picture above).  y and x:
 *   NONE, COLUMN   x: R rows (under SP this rank's positions, gathered into
 *                  a transient of R rows first), y: R rows
 *   ROW            x: R rows, y: R rows, or under SP this rank's positions
 *                  (the partial sums in c->sp_full)
 * charge: NULL, or the piece this call ends.  0 or an error status. */
int  ptdp_parallel_linear_forward(ptdp_linear_pass *c, const ptdp_linear_layer *l, ptdp_tensor y,
                                  ptdp_tensor x, const ptdp_linear_charge *charge);

/* dx = dy W (dx NULL: not wanted), dW += dyᵀ x (now, or recorded in
 * c->wg), db += colsum dy, the charge, then the layer's join:
 *   NONE, ROW      nothing (g's backward is the identity: dy is whole)
 *   COLUMN         f: dx summed over TP in place; under SP x is this rank's
 *                  positions (gathered again into c->sp_full for dW) and
 *                  the sum is reduce-scattered into c->sp_local. */
int  ptdp_parallel_linear_backward(ptdp_linear_pass *c, const ptdp_linear_layer *l, ptdp_tensor *dx,
                                   ptdp_tensor dy, ptdp_tensor x, const ptdp_linear_charge *charge);

/* Whether the calls of c defer dW to W (the caller prices B without it). */
bool ptdp_linear_pass_defers(const ptdp_linear_pass *c);

/* A group: n layers of one split, member i on rows [off_i, off_i +
 * rows[i]) of a stacked input and output (off_i the rows before it), its
 * layer given by member(of, i).  One charge and one collective for all:
 * a ROW group's partial sums all-reduced at once (then each bias), a
 * COLUMN group's input gradients summed at once.  No SP. */
typedef struct {
    ptdp_linear_split split;
    int n;
    const int *rows;
    ptdp_linear_layer (*member)(const void *of, int i);
    const void *of;
} ptdp_linear_group;

int  ptdp_parallel_linear_group_forward(ptdp_linear_pass *c, const ptdp_linear_group *g, ptdp_tensor y,
                                        ptdp_tensor x, const ptdp_linear_charge *charge);
/* dx: the stacked input gradients, overwritten (NULL: not wanted). */
int  ptdp_parallel_linear_group_backward(ptdp_linear_pass *c, const ptdp_linear_group *g, ptdp_tensor *dx,
                                         ptdp_tensor dy, ptdp_tensor x, const ptdp_linear_charge *charge);

/* ------------------------------------------------ the textbook calls */

/* Megatron's two layers in their plainest form, tensors in and out: the
 * op with no clock, the storage recipe and dW now.
 *
 * Column-parallel linear: y_r = x W_r^T + b_r with W split by rows (outputs).
 * The input x is replicated (f forward); the output stays split unless
 * `full` is given, in which case it is gathered there too. */
int ptdp_tp_column_linear_forward(struct ptdp_device *dev, ptdp_comm *tp, ptdp_tensor y_local,
                                  ptdp_tensor x, ptdp_tensor w_local, const ptdp_tensor *b_local,
                                  ptdp_tensor *full);
/* dW_r += dy_r^T x, db_r += colsum dy_r, and dx = all-reduce(dy_r W_r)
 * (f backward; dx is overwritten).  dx may be NULL. */
int ptdp_tp_column_linear_backward(ptdp_comm *tp, ptdp_tensor *dx, ptdp_tensor dw_local,
                                   ptdp_tensor *db_local, ptdp_tensor dy_local, ptdp_tensor x,
                                   ptdp_tensor w_local);
/* Row-parallel linear: y = sum_r x_r W_r^T (g: all-reduce) + b, with W
 * split by columns (inputs) and x arriving already split.  The bias is
 * added once, after the sum — adding it on every rank would count it tp times. */
int ptdp_tp_row_linear_forward(ptdp_comm *tp, ptdp_tensor y, ptdp_tensor x_local,
                               ptdp_tensor w_local, const ptdp_tensor *b);
/* dx_r = dy W_r (no communication: dy is replicated after g), dW_r += dy^T x_r,
 * db += colsum dy — identical on every rank, so the replicated bias stays
 * identical without any communication of its own. */
void ptdp_tp_row_linear_backward(ptdp_tensor *dx_local, ptdp_tensor dw_local, ptdp_tensor *db,
                                 ptdp_tensor dy, ptdp_tensor x_local, ptdp_tensor w_local);

#endif
