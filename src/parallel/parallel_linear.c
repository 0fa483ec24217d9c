/*
 * parallel_linear.c — the one parallel-linear op (parallel_linear.h): a
 * linear layer y = x Wᵀ + b on one rank of a tensor-parallel group, with
 * its split, its precision recipe, its clock charge and its weight
 * gradient's sink in one place.
 *
 * Megatron-LM's two layers (Shoeybi et al. 2019), for a TP group of t:
 *
 *   column-parallel   W = [W_0; …; W_{t-1}] split by rows (outputs)
 *                     y_r = x W_rᵀ + b_r          x replicated, y split
 *                     dx  = Σ_r dy_r W_r          f: the all-reduce, backward
 *   row-parallel      W = [W_0 … W_{t-1}] split by columns (inputs)
 *                     y   = Σ_r x_r W_rᵀ + b      g: the all-reduce, forward
 *                     dx_r = dy W_r               x split, dy whole
 *
 *           ┌──────── rank 0 ────────┐
 *     x ─f─►│ x A_0ᵀ ─GELU─ · B_0ᵀ ──┤
 *           └────────────────────────┘ ─g─► y = Σ_r GELU(x A_rᵀ) B_rᵀ + b
 *           ┌──────── rank 1 ────────┐
 *     x ─f─►│ x A_1ᵀ ─GELU─ · B_1ᵀ ──┤
 *           └────────────────────────┘
 *
 * and each rank's products are nn.Linear's (linear.c):
 *
 *     forward    Y  = X Wᵀ (+ b)        backward   dX  = dY W
 *                                                  dW += dYᵀ X   (now, or W's)
 *                                                  db += colsum dY
 *
 * The bias goes into the GEMM (beta = 1 on rows preset to b) unless a sum
 * over TP follows, where it is added once after it: tp copies of b would
 * be summed otherwise.
 *
 * Under sequence parallelism (sp.h) the TP group also splits the sequence
 * outside the layers: f's forward becomes an all-gather of x along the
 * sequence and g a reduce-scatter into this rank's positions.  The gathered
 * x is not kept: a column-parallel backward gathers it again for dW, under
 * dX's GEMM (which needs no x) when the gather runs on the communication
 * stream (--overlap; Korthikanti et al. 2022).
 *
 * The virtual clock sees a rank compute, then communicate: a call that ends
 * a piece of work charges it (priced by the model, which knows what else
 * the piece held) before the call's collective, and the next piece's wall
 * clock starts after it.
 */
#include "ptdp/parallel_linear.h"

#include <stdlib.h>
#include <string.h>

#include "ptdp/bf16.h"
#include "ptdp/clock.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "parallel/fp8_linear_impl.h"
#include "ptdp/ops.h"
#include "ptdp/sp.h"
#include "ptdp/tp.h"
#include "runtime/device_impl.h"

static int tp_size(const ptdp_linear_pass *c)
{
    return c->tp != NULL ? ptdp_comm_size(c->tp) : 1;
}

static bool sequence_parallel(const ptdp_linear_pass *c)
{
    return c->sp_samples > 0;
}

bool ptdp_linear_pass_defers(const ptdp_linear_pass *c)
{
    return c->wg != NULL;
}

/* ---------------------------------------------------------------- recipe */

/* The operands a product reads under the recipe.  Storage and bf16 use
 * them as they are: a bf16 activation was rounded where it was made (keep,
 * below) and a bf16 weight widens to float exactly (mixed.h).  FP8
 * (fp8_linear.h) reads quantized copies — X and W in E4M3 in the forward,
 * dY in E5M2 in the backward, each scale from an amax reduced wherever the
 * tensor is split — made here for n members at once and released after
 * their products.  A weight that keeps its precision (the output head,
 * model.h) and a pass without FP8 get the tensors themselves. */
typedef struct {
    int n;
    bool copies;           /* dst are transients to release              */
    ptdp_tensor one;       /* n = 1: dst points here                    */
    ptdp_tensor *dst;
} operands;

static bool quantizes(const ptdp_linear_pass *c, const ptdp_linear_layer *l)
{
    return c->fp8 != NULL && !l->w->keeps_precision;
}

static int operands_of(ptdp_linear_pass *c, bool fp8, ptdp_fp8_role role, int n, const ptdp_param *const *w,
                       const ptdp_tensor *src, operands *o)
{
    *o = (operands){ .n = n, .copies = fp8 };
    o->dst = n == 1 ? &o->one : calloc((size_t)(n > 0 ? n : 1), sizeof *o->dst);
    if (o->dst == NULL)
        return ptdp_fail(c->dev, PTDP_ENOMEM, "host out of memory for %d operands", n);
    if (!fp8) {
        for (int i = 0; i < n; i++)
            o->dst[i] = src[i];
        return PTDP_OK;
    }
    int rc = ptdp_fp8_linear_quantize(c->dev, c->fp8, role, c->tp, n, w, src, o->dst);
    if (rc != 0)
        o->copies = false;   /* nothing to release */
    return rc;
}

/* One layer's operand. */
static int operand(ptdp_linear_pass *c, const ptdp_linear_layer *l, ptdp_fp8_role role, ptdp_tensor t,
                   operands *o)
{
    return operands_of(c, quantizes(c, l), role, 1, &l->w, &t, o);
}

static void release(ptdp_linear_pass *c, operands *o)
{
    if (o->copies)
        ptdp_fp8_linear_release(c->dev, o->n, o->dst);
    if (o->dst != &o->one)
        free(o->dst);
    *o = (operands){ 0 };
}

/* A complete output as the recipe keeps it: bf16 rounds it where it is
 * made, so the next op reads the value a GPU would have written. */
static void keep(const ptdp_linear_pass *c, ptdp_tensor y)
{
    if (c->recipe != PTDP_RECIPE_BF16)
        return;
    for (int i = 0; i < y.rows; i++) {
        ptdp_real *row = ptdp_at(y, i, 0);
        for (int j = 0; j < y.cols; j++)
            row[j] = ptdp_bf16_round(row[j]);
    }
}

/* ----------------------------------------------------------------- clock */

/* The piece of work since the last charge or collective. */
static void charge(ptdp_linear_pass *c, double flops)
{
    if (c->w0 == NULL)
        return;
    ptdp_compute(c->dev, c->what, flops, *c->w0);
    *c->w0 = ptdp_wall_now();
}

/* After a collective the next piece's wall clock starts again. */
static int joined(ptdp_linear_pass *c, int rc)
{
    if (c->w0 != NULL)
        *c->w0 = ptdp_wall_now();
    return rc;
}

/* -------------------------------------------------------------- products */

/* Y = X Wᵀ (+ b in the GEMM), from the recipe's operands. */
static int product(ptdp_linear_pass *c, const ptdp_linear_layer *l, ptdp_tensor y, ptdp_tensor x,
                   const ptdp_param *b)
{
    operands X, W;
    int rc = operand(c, l, PTDP_FP8_X, x, &X);
    if (rc == 0 && (rc = operand(c, l, PTDP_FP8_W, l->w->w, &W)) == 0) {
        ptdp_linear_forward(y, X.dst[0], W.dst[0], b != NULL ? &b->w : NULL);
        release(c, &W);
    }
    release(c, &X);
    return rc;
}

/* dX = dY W (or +=), dW += dYᵀ X now or recorded for W, db += colsum dY:
 * the unsplit order, from the recipe's operands (db from dY as stored:
 * a sum a GPU takes in float, outside the FP8 GEMM). */
static int products_backward(ptdp_linear_pass *c, const ptdp_linear_layer *l, ptdp_tensor *dx, ptdp_tensor dy,
                             ptdp_tensor x, const operands *W, const operands *dY, const operands *X, int i)
{
    const ptdp_tensor w = W->dst[i], dYq = dY->dst[i], Xq = X->dst[i];
    ptdp_tensor bias_g = l->b != NULL ? l->b->g : (ptdp_tensor){ 0 };
    ptdp_tensor *db = l->b != NULL ? &bias_g : NULL;
    if (c->wg == NULL && !quantizes(c, l)) {   /* the unsplit backward, exactly */
        ptdp_linear_backward(dx, l->w->g, db, dYq, Xq, w, l->accumulate_dx);
        return PTDP_OK;
    }
    const ptdp_tensor dw = l->w->g;
    if (!PTDP_REQUIRE(dy.rows == x.rows && dy.cols == w.rows && x.cols == w.cols && dw.rows == w.rows &&
                      dw.cols == w.cols, "dy %d x %d, x %d x %d, W %d x %d, dW %d x %d", dy.rows, dy.cols, x.rows,
                      x.cols, w.rows, w.cols, dw.rows, dw.cols))
        return PTDP_EINVAL;
    if (dx != NULL)
        ptdp_matmul(*dx, dYq, false, w, false, 1.0, l->accumulate_dx ? 1.0 : 0.0);
    int rc = ptdp_wgrad_gemm(c->dev, c->wg, dw, dYq, Xq, l->w_flops, c->wwhat);
    if (rc == 0 && db != NULL)
        ptdp_bias_backward(*db, dy);
    return rc;
}

/* One layer's backward products: its three operands, then the products. */
static int layer_backward(ptdp_linear_pass *c, const ptdp_linear_layer *l, ptdp_tensor *dx, ptdp_tensor dy,
                          ptdp_tensor x)
{
    operands W = { 0 }, dY = { 0 }, X = { 0 };
    int rc = operand(c, l, PTDP_FP8_W, l->w->w, &W);
    if (rc == 0)
        rc = operand(c, l, PTDP_FP8_DY, dy, &dY);
    if (rc == 0)
        rc = operand(c, l, PTDP_FP8_X, x, &X);
    if (rc == 0)
        rc = products_backward(c, l, dx, dy, x, &W, &dY, &X, 0);
    release(c, &X);
    release(c, &dY);
    release(c, &W);
    return rc;
}

/* --------------------------------------------------------------- forward */

/* NONE and COLUMN: f's forward is the identity — or under SP the
 * all-gather of this rank's positions into a transient of y's rows. */
static int column_forward(ptdp_linear_pass *c, const ptdp_linear_layer *l, ptdp_tensor y, ptdp_tensor x,
                          const ptdp_linear_charge *cost)
{
    ptdp_tensor full = x;
    int rc = PTDP_OK;
    const bool gather = l->split == PTDP_SPLIT_COLUMN && sequence_parallel(c);
    if (gather) {
        if ((rc = ptdp_tensor_alloc_uninit(c->dev, &full, "acts.sp_gathered", PTDP_MEM_ACTS, y.rows, x.cols)) != 0)
            return rc;
        rc = joined(c, ptdp_sp_all_gather(c->dev, c->tp, full, x, c->sp_samples));
    }
    if (rc == 0)
        rc = product(c, l, y, full, l->b);
    if (gather)
        ptdp_tensor_free(c->dev, &full);
    if (rc == 0) {
        keep(c, y);
        if (cost != NULL)
            charge(c, cost->flops);
    }
    return rc;
}

/* ROW: this rank's partial sums (into c->sp_full under SP), the piece
 * charged, then g — the all-reduce in place, or SP's reduce-scatter into
 * y — and the bias after the sum. */
static int row_forward(ptdp_linear_pass *c, const ptdp_linear_layer *l, ptdp_tensor y, ptdp_tensor x,
                       const ptdp_linear_charge *cost)
{
    const bool sum = tp_size(c) > 1;
    const ptdp_tensor part = sequence_parallel(c) ? c->sp_full : y;
    int rc = product(c, l, part, x, sum ? NULL : l->b);
    if (rc != 0)
        return rc;
    if (cost != NULL)
        charge(c, cost->flops);
    if (c->tp == NULL)
        return PTDP_OK;
    rc = sequence_parallel(c) ? ptdp_sp_reduce_scatter(c->dev, c->tp, y, part, c->sp_samples)
                              : ptdp_tp_reduce_from_region_forward(c->tp, y);   /* g */
    rc = joined(c, rc);
    if (rc == 0 && sum && l->b != NULL)
        ptdp_add_bias(y, l->b->w);
    return rc;
}

int ptdp_parallel_linear_forward(ptdp_linear_pass *c, const ptdp_linear_layer *l, ptdp_tensor y, ptdp_tensor x,
                                 const ptdp_linear_charge *cost)
{
    return l->split == PTDP_SPLIT_ROW ? row_forward(c, l, y, x, cost) : column_forward(c, l, y, x, cost);
}

/* -------------------------------------------------------------- backward */

/* COLUMN under SP: x is this rank's positions.  It is gathered again into
 * c->sp_full around dX = dY W, which needs no input — started on the
 * communication stream before dX under --overlap, waited for after it;
 * without, done before dX — then dW += dYᵀ x (or recorded: the sink copies
 * sp_full, valid until W) and db, each part charged (parallel_linear.h). */
static int sp_column_products(ptdp_linear_pass *c, const ptdp_linear_layer *l, ptdp_tensor *dx, ptdp_tensor dy,
                              ptdp_tensor x, const ptdp_linear_charge *cost)
{
    operands W = { 0 }, dY = { 0 }, X = { 0 };
    ptdp_sp_gather g = { 0 };
    int rc = operand(c, l, PTDP_FP8_W, l->w->w, &W);   /* before the gather: their amaxes' */
    if (rc == 0)                                        /* all-reduces keep every rank's order */
        rc = operand(c, l, PTDP_FP8_DY, dy, &dY);
    charge(c, cost->before);
    if (rc == 0 && c->overlap)
        rc = ptdp_sp_all_gather_start(c->dev, c->tp, c->sp_full, x, c->sp_samples, &g);
    else if (rc == 0)
        rc = joined(c, ptdp_sp_all_gather(c->dev, c->tp, c->sp_full, x, c->sp_samples));
    if (rc == 0) {
        ptdp_matmul(*dx, dY.dst[0], false, W.dst[0], false, 1.0, 0.0);   /* dX = dY W */
        charge(c, cost->dx);
    }
    const int waited = joined(c, ptdp_sp_all_gather_wait(&g));   /* x is in */
    if (rc == 0)
        rc = waited;
    if (rc == 0)
        rc = operand(c, l, PTDP_FP8_X, c->sp_full, &X);
    if (rc == 0)
        rc = ptdp_wgrad_gemm(c->dev, c->wg, l->w->g, dY.dst[0], X.dst[0], l->w_flops, c->wwhat);
    if (rc == 0 && l->b != NULL)
        ptdp_bias_backward(l->b->g, dy);                   /* db */
    if (rc == 0 && c->wg == NULL)   /* else the product is W's, charged there */
        charge(c, cost->dw);
    release(c, &X);
    release(c, &dY);
    release(c, &W);
    return rc;
}

int ptdp_parallel_linear_backward(ptdp_linear_pass *c, const ptdp_linear_layer *l, ptdp_tensor *dx, ptdp_tensor dy,
                                  ptdp_tensor x, const ptdp_linear_charge *cost)
{
    const bool column = l->split == PTDP_SPLIT_COLUMN;
    int rc;
    if (column && sequence_parallel(c)) {
        if (!PTDP_REQUIRE(dx != NULL && cost != NULL && !l->accumulate_dx,
                          "a sequence-parallel column backward makes dx and is charged in parts"))
            return PTDP_EINVAL;
        if ((rc = sp_column_products(c, l, dx, dy, x, cost)) != 0)
            return rc;
        return joined(c, ptdp_sp_reduce_scatter(c->dev, c->tp, c->sp_local, *dx, c->sp_samples));   /* f */
    }
    if ((rc = layer_backward(c, l, dx, dy, x)) != 0)
        return rc;
    if (cost != NULL)
        charge(c, cost->flops);
    if (!column || dx == NULL || c->tp == NULL)
        return PTDP_OK;
    return joined(c, ptdp_tp_copy_to_region_backward(c->tp, *dx));   /* f: dx was this rank's dy_r W_r */
}

/* ---------------------------------------------------------------- groups */

/* Member i's rows of a stacked tensor. */
static ptdp_tensor member_rows(const ptdp_linear_group *g, ptdp_tensor t, int off, int i)
{
    return ptdp_tensor_rows(t, off, g->rows[i]);
}

/* A group's operands of one role: every member's (its rows of the stacked
 * x, y or dy, or its weight), quantized in one call even where a member
 * has no rows here — the amaxes' all-reduce then has the same n on every
 * rank. */
static int group_operands(ptdp_linear_pass *c, const ptdp_linear_group *g, ptdp_fp8_role role, ptdp_tensor stacked,
                          operands *o)
{
    const int n = g->n;
    const ptdp_param **w = calloc((size_t)(n > 0 ? n : 1), sizeof *w);
    ptdp_tensor *src = calloc((size_t)(n > 0 ? n : 1), sizeof *src);
    int rc = w != NULL && src != NULL ? PTDP_OK : ptdp_fail(c->dev, PTDP_ENOMEM, "host out of memory for %d members", n);
    bool fp8 = c->fp8 != NULL;
    for (int i = 0, off = 0; rc == 0 && i < n; off += g->rows[i], i++) {
        const ptdp_linear_layer l = g->member(g->of, i);
        w[i] = l.w;
        src[i] = role == PTDP_FP8_W ? l.w->w : member_rows(g, stacked, off, i);
        fp8 = fp8 && quantizes(c, &l);
    }
    if (rc == 0)
        rc = operands_of(c, fp8, role, n, w, src, o);
    free(src);
    free(w);
    return rc;
}

/* Every member's products, then the recipe's keep of the complete outputs,
 * the charge, and a ROW group's one g for all, each bias after it. */
int ptdp_parallel_linear_group_forward(ptdp_linear_pass *c, const ptdp_linear_group *g, ptdp_tensor y,
                                       ptdp_tensor x, const ptdp_linear_charge *cost)
{
    const bool sum = g->split == PTDP_SPLIT_ROW && tp_size(c) > 1;
    if (!PTDP_REQUIRE(!sequence_parallel(c), "a group of linear layers under sequence parallelism"))
        return PTDP_EINVAL;
    operands X = { 0 }, W = { 0 };
    int rc = group_operands(c, g, PTDP_FP8_X, x, &X);
    if (rc == 0)
        rc = group_operands(c, g, PTDP_FP8_W, x, &W);
    ptdp_matmul_group_begin();   /* the members' products side by side */
    for (int i = 0, off = 0; rc == 0 && i < g->n; off += g->rows[i], i++)
        if (g->rows[i] > 0) {
            const ptdp_linear_layer l = g->member(g->of, i);
            const ptdp_param *b = sum ? NULL : l.b;
            ptdp_linear_forward(member_rows(g, y, off, i), X.dst[i], W.dst[i], b != NULL ? &b->w : NULL);
        }
    ptdp_matmul_group_end();
    release(c, &W);
    release(c, &X);
    if (rc != 0)
        return rc;
    if (g->split != PTDP_SPLIT_ROW)
        keep(c, y);
    if (cost != NULL)
        charge(c, cost->flops);
    if (!sum)
        return PTDP_OK;
    rc = joined(c, ptdp_tp_reduce_from_region_forward(c->tp, y));   /* g, once */
    for (int i = 0, off = 0; rc == 0 && i < g->n; off += g->rows[i], i++) {
        const ptdp_linear_layer l = g->member(g->of, i);
        if (g->rows[i] > 0 && l.b != NULL)
            ptdp_add_bias(member_rows(g, y, off, i), l.b->w);
    }
    return rc;
}

/* Every member's backward products, the charge, and a COLUMN group's one
 * f for all the input gradients. */
int ptdp_parallel_linear_group_backward(ptdp_linear_pass *c, const ptdp_linear_group *g, ptdp_tensor *dx,
                                        ptdp_tensor dy, ptdp_tensor x, const ptdp_linear_charge *cost)
{
    if (!PTDP_REQUIRE(!sequence_parallel(c), "a group of linear layers under sequence parallelism"))
        return PTDP_EINVAL;
    operands W = { 0 }, dY = { 0 }, X = { 0 };
    int rc = group_operands(c, g, PTDP_FP8_W, x, &W);
    if (rc == 0)
        rc = group_operands(c, g, PTDP_FP8_DY, dy, &dY);
    if (rc == 0)
        rc = group_operands(c, g, PTDP_FP8_X, x, &X);
    ptdp_matmul_group_begin();   /* the members' products side by side */
    for (int i = 0, off = 0; rc == 0 && i < g->n; off += g->rows[i], i++)
        if (g->rows[i] > 0) {
            const ptdp_linear_layer l = g->member(g->of, i);
            ptdp_tensor dxi = dx != NULL ? member_rows(g, *dx, off, i) : (ptdp_tensor){ 0 };
            rc = products_backward(c, &l, dx != NULL ? &dxi : NULL, member_rows(g, dy, off, i),
                                   member_rows(g, x, off, i), &W, &dY, &X, i);
        }
    ptdp_matmul_group_end();
    release(c, &X);
    release(c, &dY);
    release(c, &W);
    if (rc != 0)
        return rc;
    if (cost != NULL)
        charge(c, cost->flops);
    if (g->split != PTDP_SPLIT_COLUMN || dx == NULL || tp_size(c) == 1)
        return PTDP_OK;
    return joined(c, ptdp_tp_copy_to_region_backward(c->tp, *dx));   /* f, once */
}

/* ------------------------------------------------------- textbook calls */

/* Megatron's two layers, one call each, through the op above with no
 * clock, the storage recipe and dW now.  The op reads parameters: these
 * tensors dressed as two. */
static ptdp_param as_param(const ptdp_tensor *w, const ptdp_tensor *g)
{
    ptdp_param p;
    memset(&p, 0, sizeof p);
    if (w != NULL)
        p.w = *w;
    if (g != NULL)
        p.g = *g;
    return p;
}

int ptdp_tp_column_linear_forward(ptdp_device *dev, ptdp_comm *tp, ptdp_tensor y_local,
                               ptdp_tensor x, ptdp_tensor w_local, const ptdp_tensor *b_local,
                               ptdp_tensor *full)
{
    /* f forward: identity — x is already the same on every rank. */
    const ptdp_param w = as_param(&w_local, NULL), b = as_param(b_local, NULL);
    ptdp_linear_pass c = { .dev = dev, .tp = tp };
    const ptdp_linear_layer l = { PTDP_SPLIT_COLUMN, &w, b_local != NULL ? &b : NULL, false, 0 };
    int rc = ptdp_parallel_linear_forward(&c, &l, y_local, x, NULL);
    if (rc == 0 && full != NULL)
        rc = ptdp_tp_gather_from_region_forward(dev, tp, y_local, *full);
    return rc;
}

int ptdp_tp_column_linear_backward(ptdp_comm *tp, ptdp_tensor *dx, ptdp_tensor dw_local,
                                ptdp_tensor *db_local, ptdp_tensor dy_local, ptdp_tensor x,
                                ptdp_tensor w_local)
{
    /* f backward: dx of this slice alone is dy_r W_r; the op sums it. */
    const ptdp_param w = as_param(&w_local, &dw_local), b = as_param(NULL, db_local);
    ptdp_linear_pass c = { .tp = tp };
    const ptdp_linear_layer l = { PTDP_SPLIT_COLUMN, &w, db_local != NULL ? &b : NULL, false, 0 };
    return ptdp_parallel_linear_backward(&c, &l, dx, dy_local, x, NULL);
}

int ptdp_tp_row_linear_forward(ptdp_comm *tp, ptdp_tensor y, ptdp_tensor x_local,
                            ptdp_tensor w_local, const ptdp_tensor *b)
{
    /* g forward: the all-reduce of the partial sums; the bias after it */
    const ptdp_param w = as_param(&w_local, NULL);
    ptdp_linear_pass c = { .tp = tp };
    const ptdp_linear_layer l = { PTDP_SPLIT_ROW, &w, NULL, false, 0 };
    int rc = ptdp_parallel_linear_forward(&c, &l, y, x_local, NULL);
    if (rc == 0 && b != NULL)
        ptdp_add_bias(y, *b);
    return rc;
}

void ptdp_tp_row_linear_backward(ptdp_tensor *dx_local, ptdp_tensor dw_local, ptdp_tensor *db,
                              ptdp_tensor dy, ptdp_tensor x_local, ptdp_tensor w_local)
{
    /* g backward: identity — dy is the gradient of the (replicated) sum. */
    const ptdp_param w = as_param(&w_local, &dw_local), bias = as_param(NULL, db);
    ptdp_linear_pass c = { 0 };
    const ptdp_linear_layer l = { PTDP_SPLIT_ROW, &w, db != NULL ? &bias : NULL, false, 0 };
    (void)ptdp_parallel_linear_backward(&c, &l, dx_local, dy, x_local, NULL);
}
