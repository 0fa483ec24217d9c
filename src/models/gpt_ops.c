/*
 * gpt_ops.c — the ops a GPT block calls, each with what is not its math:
 * the rounding to bf16 of the activation it keeps, the tensor-parallel
 * collective that ends a piece of work, and the clock's charge for it.
 *
 *   op             forward                        backward
 *   ln             LN (SP: this rank's rows)      LN' (+= into the stream's gradient)
 *   column_linear  SP: gather x into the region;  SP: gather x again (overlapped with
 *                  x W^T + b                      dx); dx, dW (now or W's), db; charge;
 *                                                  f, or SP: scatter out of the region
 *   gelu           GELU                            GELU'
 *   row_linear     x W^T; charge; g, or SP:        dx, dW (now or W's), db
 *                  scatter out of the region
 *   residual       skip + dropout(branch + b)      dropout'; SP: gather into the region
 *
 * each op's forward beside its backward, below.  The two linears are the
 * parallel-linear op (parallel_linear.h), the one door of every GEMM of
 * the model — its router and experts too (gpt_moe.c): it holds TP's and
 * SP's joins, the precision recipe (bf16 rounds a complete output where it
 * is made), the charge before the join and the sink of dW; these wrappers
 * give it the pass (ptdp_gpt_linear_pass) and the GPT's prices.
 *
 * bf16 (act_bf16.h): under --precision bf16 every activation a block keeps
 * is rounded where it is made — here, by the op that makes it — so the
 * next op reads the value a GPU would have written.
 *
 * The clock (gpt_cost.h): the work between two collectives is one charge,
 * priced by gpt_cost.c with the functions the planner uses (plan_time.c),
 * and made just before the collective that ends it: the virtual times of
 * the model and of the plan are the same numbers.  The embedding's and the
 * head's prices are 0 under the "ideal" profile (gpt_cost.c), so the
 * stages are uniform, as the MLP's.
 *
 * TP and SP (tp.h, sp.h): a column-parallel layer reads all R rows of its
 * input; without SP they are there already (f's forward is the identity),
 * under SP the block keeps only this rank's rows of the LayerNorm's output
 * and the layer gathers them along the sequence into a transient R x C
 * buffer, freed after its product — twice: in the forward for x W^T, and
 * in the backward for dW = dy^T x (Megatron-LM, Korthikanti et al. 2022):
 *
 *   forward    LN ─► shard (kept, Rl x C) ─all-gather─► x (R x C) ─► x W^T ─► free x
 *   backward   shard ─all-gather─► s->dfull (R x C)      dx = dy W   (no x needed)
 *                                        └───────────► dW += dy^T x  (now, or the
 *                                                      sink copies x for W: wgrad.h)
 *
 * one more all-gather of (tp-1)/tp R C elements per layer and backward
 * than keeping the gathered x, for (tp-1)/tp of its memory.  Under
 * --overlap (m->overlap) the backward's gather runs on the communication
 * stream under dx's GEMM (clock.h); without, it is charged before it.  A
 * row-parallel layer's partial sums are summed by g's all-reduce, or under
 * SP reduce-scattered along the sequence into this rank's region rows.
 */
#include <stdio.h>

#include "models/gpt_pass.h"
#include "ptdp/act_bf16.h"
#include "ptdp/error.h"
#include "ptdp/ops.h"
#include "ptdp/sp.h"
#include "runtime/device_impl.h"

#define LN_EPS 1e-5

void ptdp_gpt_pass_begin(ptdp_gpt_pass *k, ptdp_device *dev, ptdp_model *m, const ptdp_acts *acts,
                         ptdp_wgrad *wg)
{
    *k = (ptdp_gpt_pass){ .dev = dev, .m = m, .acts = acts, .wg = wg, .w0 = ptdp_wall_now() };
    k->shape = ptdp_gpt_shape_of(m, acts, wg != NULL);
    k->shape.fp8 = dev->fp8;     /* the linear layers' products priced in FP8 (gpt_cost.h) */
    k->shape.bf16 = dev->bf16;
}

void ptdp_gpt_pass_name(ptdp_gpt_pass *k, const char *what, const char *wwhat)
{
    snprintf(k->what, sizeof k->what, "%s", what);
    snprintf(k->wwhat, sizeof k->wwhat, "%s", wwhat);
}

/* Every activation and scratch tensor here is an op's output, written whole
 * before it is read: no zero-fill (arena.h), a tenth of a step saved. */
int ptdp_gpt_act(ptdp_gpt_pass *k, ptdp_tensor *t, const char *name, int rows, int cols)
{
    if (k->rc == 0)
        k->rc = ptdp_tensor_alloc_uninit(k->dev, t, name, PTDP_MEM_ACTS, rows, cols);
    return k->rc;
}

ptdp_real *ptdp_gpt_act_reals(ptdp_gpt_pass *k, size_t n, const char *name)
{
    if (k->rc != 0)
        return NULL;
    ptdp_real *r = ptdp_alloc_uninit(k->dev, (n > 0 ? n : 1) * sizeof(ptdp_real), PTDP_MEM_ACTS, name);
    if (r == NULL)
        k->rc = PTDP_ENOMEM;
    return r;
}

void ptdp_gpt_round(ptdp_gpt_pass *k, ptdp_tensor t)
{
    if (k->rc == 0 && k->m->bf16)
        ptdp_act_round(t);
}

void ptdp_gpt_round_reals(ptdp_gpt_pass *k, ptdp_real *x, size_t n)
{
    if (k->rc == 0 && k->m->bf16)
        ptdp_act_round_reals(x, n);
}

void ptdp_gpt_charge(ptdp_gpt_pass *k, ptdp_gpt_cost_fn cost)
{
    if (k->rc != 0)
        return;
    ptdp_compute(k->dev, k->what, cost(k->dev->profile, &k->shape), k->w0);
    k->w0 = ptdp_wall_now();
}

/* After a collective the wall clock of the next piece starts again. */
static void collective_done(ptdp_gpt_pass *k, int rc)
{
    if (k->rc == 0)
        k->rc = rc;
    k->w0 = ptdp_wall_now();
}
/* --------------------------------------------------------- LayerNorm */

/* LayerNorm of the region rows x into out (the same rows: under SP this
 * rank's positions only, the shard the block keeps). */
void ptdp_gpt_ln(ptdp_gpt_pass *k, ptdp_tensor out, ptdp_real *mean, ptdp_real *rstd, ptdp_tensor x,
                 const ptdp_param *w, const ptdp_param *b)
{
    if (k->rc != 0)
        return;
    ptdp_layernorm_forward(out, mean, rstd, x, w->w, b->w, LN_EPS);
    ptdp_gpt_round(k, out);
}

void ptdp_gpt_ln_backward(ptdp_gpt_pass *k, ptdp_tensor dx, ptdp_tensor dy, ptdp_tensor x, const ptdp_param *w,
                          const ptdp_param *b, const ptdp_real *mean, const ptdp_real *rstd, bool accumulate_dx)
{
    if (k->rc == 0)
        ptdp_layernorm_backward(dx, w->g, b->g, dy, x, w->w, mean, rstd, accumulate_dx);
}

/* -------------------------------------------- column-parallel linear */

/* The parallel-linear op's pass for this one (parallel_linear.h). */
ptdp_linear_pass ptdp_gpt_linear_pass(ptdp_gpt_pass *k)
{
    const ptdp_mesh *mesh = k->m->mesh;
    return (ptdp_linear_pass){
        .dev = k->dev, .tp = mesh->tp_comm, .sp_samples = mesh->sp ? k->acts->rows : 0, .overlap = k->m->overlap,
        .recipe = k->m->bf16 ? PTDP_RECIPE_BF16 : PTDP_RECIPE_STORAGE, .fp8 = k->m->fp8, .wg = k->wg, .what = k->what,
        .wwhat = k->wwhat, .w0 = &k->w0,
    };
}

/* y = x W^T + b on this rank's output columns (f's forward is the
 * identity); under SP x is this rank's shard, gathered along the sequence
 * into a transient R x C first and freed after the product. */
void ptdp_gpt_column_linear(ptdp_gpt_pass *k, ptdp_tensor y, ptdp_tensor x, const ptdp_param *w,
                            const ptdp_param *b)
{
    if (k->rc != 0)
        return;
    ptdp_linear_pass c = ptdp_gpt_linear_pass(k);
    k->rc = ptdp_parallel_linear_forward(&c, &(ptdp_linear_layer){ .split = PTDP_SPLIT_COLUMN, .w = w, .b = b }, y,
                                         x, NULL);
}

/* A column-parallel layer's backward into s->dln (b NULL: no bias, the
 * head), the piece of work charged at `cost` (in three parts around SP's
 * gather of x again into s->dfull), then f (or SP's scatter) into
 * s->dln_local. */
void ptdp_gpt_column_linear_backward(ptdp_gpt_pass *k, ptdp_gpt_scratch *s, ptdp_tensor dy, ptdp_tensor x,
                                     const ptdp_param *w, ptdp_param *b, const ptdp_gpt_column_backward_cost *cost)
{
    if (k->rc != 0)
        return;
    const ptdp_profile *p = k->dev->profile;
    const ptdp_gpt_shape *sh = &k->shape;
    ptdp_linear_pass c = ptdp_gpt_linear_pass(k);
    c.sp_full = s->dfull;
    c.sp_local = s->dln_local;
    const ptdp_linear_layer l = { .split = PTDP_SPLIT_COLUMN, .w = w, .b = b, .w_flops = cost->w(p, sh) };
    const ptdp_linear_charge price = { .flops = cost->whole(p, sh), .before = cost->before(p, sh),
                                       .dx = cost->dx(p, sh), .dw = cost->dw(p, sh) };
    k->rc = ptdp_parallel_linear_backward(&c, &l, &s->dln, dy, x, &price);
}

/* -------------------------------------------------------------- GELU */

void ptdp_gpt_gelu(ptdp_gpt_pass *k, ptdp_tensor y, ptdp_tensor x)
{
    if (k->rc != 0)
        return;
    ptdp_gelu_forward(y, x);
    ptdp_gpt_round(k, y);
}

void ptdp_gpt_gelu_backward(ptdp_gpt_pass *k, ptdp_tensor d, ptdp_tensor x)
{
    if (k->rc == 0)
        ptdp_gelu_backward(d, d, x);
}

/* ----------------------------------------------- row-parallel linear */

/* This rank's partial sums x W_r^T — into `out` under TP, into `part` (R
 * rows) under SP — the piece of work charged at `cost`, then summed out of
 * the TP region: g's all-reduce in place, or SP's reduce-scatter into
 * `out` (region rows).  The bias comes after the sum (residual). */
void ptdp_gpt_row_linear(ptdp_gpt_pass *k, ptdp_tensor out, ptdp_tensor part, ptdp_tensor x, const ptdp_param *w,
                         ptdp_gpt_cost_fn cost)
{
    if (k->rc != 0)
        return;
    ptdp_linear_pass c = ptdp_gpt_linear_pass(k);
    c.sp_full = part;
    const ptdp_linear_charge price = { .flops = cost(k->dev->profile, &k->shape) };
    k->rc = ptdp_parallel_linear_forward(&c, &(ptdp_linear_layer){ .split = PTDP_SPLIT_ROW, .w = w }, out, x, &price);
}

/* Into the TP region's backward: the gradient `d` of a row-parallel
 * layer's output (region rows) as its backward needs it, all R rows —
 * itself under TP (g's backward is the identity), gathered along the
 * sequence into s->dfull under SP. */
void ptdp_gpt_grad_into_tp(ptdp_gpt_pass *k, ptdp_tensor d, ptdp_gpt_scratch *s, ptdp_tensor *full)
{
    const ptdp_mesh *mesh = k->m->mesh;
    *full = d;
    if (k->rc != 0 || !mesh->sp)
        return;
    *full = s->dfull;
    collective_done(k, ptdp_sp_all_gather(k->dev, mesh->tp_comm, s->dfull, d, k->acts->rows));
}

/* A row-parallel layer's backward: local (g's backward is the identity). */
void ptdp_gpt_row_linear_backward(ptdp_gpt_pass *k, ptdp_tensor dx, ptdp_tensor dy, ptdp_tensor x,
                                  const ptdp_param *w, ptdp_param *b)
{
    if (k->rc != 0)
        return;
    ptdp_linear_pass c = ptdp_gpt_linear_pass(k);
    const ptdp_linear_layer l = { .split = PTDP_SPLIT_ROW, .w = w, .b = b,
                                  .w_flops = ptdp_gpt_cost_dw_linear(k->dev->profile, &k->shape, w->w.rows,
                                                                     w->w.cols) };
    k->rc = ptdp_parallel_linear_backward(&c, &l, &dx, dy, x, NULL);
}

/* ---------------------------------------------------------- residual */

/* out = (out + b) + skip, one pass instead of two (the same two additions
 * per element, in the same order). */
static void bias_and_skip(ptdp_tensor out, ptdp_tensor b, ptdp_tensor skip)
{
    for (int i = 0; i < out.rows; i++) {
        ptdp_real *restrict o = ptdp_at(out, i, 0);
        const ptdp_real *restrict s = ptdp_at(skip, i, 0), *restrict bias = b.data;
        for (int j = 0; j < out.cols; j++)
            o[j] = o[j] + bias[j] + s[j];
    }
}

/* out = skip + dropout(out + b): a residual branch joins the stream. */
void ptdp_gpt_residual(ptdp_gpt_pass *k, ptdp_tensor out, const ptdp_param *b, uint64_t drop_key,
                       ptdp_tensor skip)
{
    if (k->rc != 0)
        return;
    if (b != NULL && k->m->dropout <= 0 && out.rows == skip.rows && out.cols == skip.cols &&
        b->w.rows == 1 && b->w.cols == out.cols) {
        bias_and_skip(out, b->w, skip);   /* no dropout between the two sums */
    } else {
        if (b != NULL)   /* NULL: the branch added its own (an MoE block's experts) */
            ptdp_add_bias(out, b->w);
        ptdp_gpt_region_dropout(k->m, k->acts, out, drop_key);
        ptdp_tensor_add(out, skip);
    }
    ptdp_gpt_round(k, out);
}

/* The gradient of a residual branch's output: the stream's gradient dout
 * through the branch's dropout, then into the TP region (*d). */
void ptdp_gpt_residual_backward(ptdp_gpt_pass *k, ptdp_tensor *d, ptdp_tensor dout, uint64_t drop_key,
                                ptdp_gpt_scratch *s)
{
    *d = dout;
    if (k->rc != 0)
        return;
    if (k->m->dropout > 0) {
        ptdp_tensor_copy(s->tmp, dout);
        ptdp_gpt_region_dropout(k->m, k->acts, s->tmp, drop_key);
        *d = s->tmp;
    }
    ptdp_gpt_grad_into_tp(k, *d, s, d);
}
