/*
 * mlp.c — forward and backward of one pipeline stage, one micro-batch.
 *
 *  stage 0 only        every local block l                          last stage only
 *  ┌──────────┐   ┌────────────────────────────────────────────┐   ┌──────────────────┐
 *  │ h = X W^T│──►│ a = h A_l^T + a_l     (column-parallel, f) │──►│ z = h W_out^T + b │
 *  │     + b  │   │ g = dropout(GELU(a))  (local slice)        │   │ loss = xent(z, y) │
 *  └──────────┘   │ z = g B_l^T (g: all-reduce) + b_l          │   │ (vocab-parallel)  │
 *                 │ h = h + dropout(z)                         │   └──────────────────┘
 *                 └────────────────────────────────────────────┘
 *
 * The backward walks the same boxes right to left; every op's gradient
 * comes from nn/ (gelu.c, xent.c) or parallel/ (tp.c), next to its
 * forward, and the four linear layers run through the parallel-linear op
 * (parallel_linear.h: the split, bf16's rounding, the clock's charge, W's
 * sink).  Gradients ACCUMULATE
 * (+=) into the model's gradient buffer, so M micro-batches add up to the
 * gradient of their union — gradient accumulation needs nothing else.
 *
 * Activations: a micro-batch keeps, per block, its input h, the fc1 output
 * a and the GELU output g (category "acts"; ptdp_mlp_saved in mlp.h), freed
 * at the end of its backward.  With full recomputation (acts->recompute)
 * it keeps each block's input h[i] alone (and the last stage h[nb], the
 * output layer's input), and the backward runs each block's forward again
 * just before that block's backward, inside its unit's backward gather
 * (model.h), one block's a and g alive at a time: per micro-batch
 * (nb + 1) rows h kept, instead of nb (h + 2 ffn/tp) + h.  The masks of
 * dropout are regenerated from the counter-based generator, so the
 * recomputed forward is the same; the input layer is not redone.
 * Under --precision bf16 a block's h, a and g are rounded to bf16 where
 * they are made and kept as one bf16 buffer until its backward (act_bf16.h).
 *
 * Split backward (zero-bubble schedules, wgrad.h): ptdp_mlp_backward_input
 * with a sink runs all of the above but the dW += dY^T X product of every
 * linear layer (two a block, and the input and output layers'), which it
 * records with copies of dY and X for the later W; the biases' column sums
 * stay in B.
 * Per linear layer a block's F, B and W are one product each:
 *
 *   fc1  F: h A^T     B: dA_out A  (dX)    W: dA_out^T h    2 rows h ffn/tp flops each
 *   fc2  F: g B^T     B: dz B      (dX)    W: dz^T g        2 rows h ffn/tp flops each
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/act_bf16.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/mlp.h"
#include "ptdp/ops.h"
#include "ptdp/parallel_linear.h"
#include "ptdp/rng.h"
#include "ptdp/tp.h"
#include "ptdp/wgrad.h"
#include "models/mlp_table.h"
#include "parallel/model_impl.h"
#include "runtime/device_impl.h"

/* Dropout streams: one per block and place, keyed by global indices. */
static uint64_t dropout_key(const ptdp_model *m, int layer, const char *where)
{
    char name[PTDP_NAME_MAX];
    snprintf(name, sizeof name, "dropout.blocks.%d.%s", layer, where);
    return ptdp_rng_key(m->seed, name);
}

/* Account compute in the virtual clock: the products (GEMMs) and the rest
 * (biases, GELU, residuals).  Under the "ideal" profile only the blocks'
 * products cost: the input and output layers and the element-wise work
 * are free, so pipeline stages are exactly uniform and a block's forward,
 * its backward's dX products ("B") and its dW products ("W") cost the
 * same, 4 rows hidden ffn/tp flops each — the textbook F = B = W = 1 under
 * which the bubble formulas hold to the last digit (1F1B's backward,
 * B + W, stays 2 F). */
static bool ideal(const ptdp_device *dev)
{
    return dev->profile != NULL && dev->profile->ideal;
}

/* What an m x k by k x n product charges: 2mnk flops, divided by the
 * profile's GEMM efficiency for its shape (clock.h) — exactly 2mnk under a
 * profile without a curve. */
static double product_flops(const ptdp_device *dev, int m, int n, int k)
{
    return ptdp_gemm_cost_flops(dev->profile, m, n, k);
}

/* A product of one of the quantized layers (all but the output layer,
 * model.h), `quantized` the elements of the operands it quantizes under
 * --fp8: at the FP8 peak, with the quantization passes (device.h) —
 *     y = x W^T   Q(X), Q(W)      dx = dy W   Q(dY), Q(W)      dW   Q(X) */
static double linear_flops(const ptdp_device *dev, int m, int n, int k, double quantized)
{
    return ptdp_linear_cost_flops(dev, m, n, k, quantized);
}

static double price(const ptdp_device *dev, double gemm_flops, double other_flops, bool edge_layer)
{
    return !ideal(dev) ? gemm_flops + other_flops : edge_layer ? 0 : gemm_flops;
}

/* A piece of work the linear op does not end (parallel_linear.h charges
 * those it ends, at a price of the same rule). */
static void account(ptdp_device *dev, const char *what, double gemm_flops, double other_flops, double w0,
                    bool edge_layer)
{
    ptdp_compute(dev, what, price(dev, gemm_flops, other_flops, edge_layer), w0);
}

/* The parallel-linear op's pass (parallel_linear.h): the TP group, the
 * recipe (bf16 rounds a layer's complete output where it is made), W's
 * sink, and the clock: what it charges is named `what`, from *w0. */
static ptdp_linear_pass linear_pass(ptdp_device *dev, const ptdp_model *m, ptdp_wgrad *wg, const char *what,
                                    const char *wwhat, double *w0)
{
    return (ptdp_linear_pass){ .dev = dev, .tp = m->mesh->tp_comm,
                               .recipe = m->bf16 ? PTDP_RECIPE_BF16 : PTDP_RECIPE_STORAGE, .fp8 = m->fp8, .wg = wg,
                               .what = what, .wwhat = wwhat, .w0 = w0 };
}

/* A charge of the op: the piece of work it ends. */
static ptdp_linear_charge charge_of(double flops)
{
    return (ptdp_linear_charge){ .flops = flops };
}

/* What a deferred dW product charges when W runs it (wgrad.h). */
static double w_cost(const ptdp_device *dev, double gemm_flops, bool edge_layer)
{
    return edge_layer && ideal(dev) ? 0 : gemm_flops;
}

static int alloc_act(ptdp_device *dev, ptdp_tensor *t, const char *name, int rows, int cols)
{
    return ptdp_tensor_alloc(dev, t, name, PTDP_MEM_ACTS, rows, cols);
}

/* Under --precision bf16 (act_bf16.h) each activation is rounded to bf16
 * where it is made, and a block's h, a and g are kept as one bf16 buffer
 * from the end of its forward to the start of its backward; the last
 * block's output h (the head's input) as another.  The stage input x
 * stays as it arrived: the data, or the float the pipeline sent. */
static void round_bf16(const ptdp_model *m, ptdp_tensor t)
{
    if (m->bf16)
        ptdp_act_round(t);
}

static int block_slots(ptdp_mlp_saved *sv, int i, ptdp_act_slot *s)
{
    s[0] = (ptdp_act_slot){ .t = &sv->h[i] };
    s[1] = (ptdp_act_slot){ .t = &sv->a[i] };
    s[2] = (ptdp_act_slot){ .t = &sv->g[i] };
    return 3;
}

/* Free everything the forward made but the stage input. */
static void free_computed(ptdp_device *dev, ptdp_mlp_saved *sv)
{
    if (sv->packed != NULL)
        for (int i = 0; i < sv->nblocks; i++)
            ptdp_act_packed_free(dev, &sv->packed[i]);
    ptdp_act_packed_free(dev, &sv->tail_packed);
    free(sv->packed);
    sv->packed = NULL;
    if (sv->h != NULL)
        for (int i = 0; i <= sv->nblocks; i++)
            ptdp_tensor_free(dev, &sv->h[i]);
    if (sv->a != NULL)
        for (int i = 0; i < sv->nblocks; i++) {
            ptdp_tensor_free(dev, &sv->a[i]);
            ptdp_tensor_free(dev, &sv->g[i]);
        }
    ptdp_tensor_free(dev, &sv->logits);
    ptdp_free(dev, sv->rowmax);
    ptdp_free(dev, sv->sumexp);
    sv->rowmax = sv->sumexp = NULL;
    free(sv->h);
    free(sv->a);
    free(sv->g);
    sv->h = sv->a = sv->g = NULL;
}

void ptdp_mlp_acts_free(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts)
{
    (void)m;
    ptdp_mlp_saved *sv = acts->saved;
    if (sv != NULL) {
        free_computed(dev, sv);
        ptdp_tensor_free(dev, &sv->x);
        free(sv);
    }
    acts->saved = NULL;
    acts->alive = false;
}

ptdp_mlp_saved *ptdp_mlp_saved_of(ptdp_acts *acts)
{
    return acts->saved;
}

/* The arrays of what a micro-batch keeps, per block. */
static int alloc_saved(ptdp_device *dev, ptdp_mlp_saved *sv)
{
    const int nb = sv->nblocks;
    sv->h = calloc((size_t)nb + 1, sizeof *sv->h);
    sv->a = calloc((size_t)(nb > 0 ? nb : 1), sizeof *sv->a);
    sv->g = calloc((size_t)(nb > 0 ? nb : 1), sizeof *sv->g);
    sv->packed = calloc((size_t)(nb > 0 ? nb : 1), sizeof *sv->packed);
    if (sv->h == NULL || sv->a == NULL || sv->g == NULL || sv->packed == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    return PTDP_OK;
}

/* h_0: the input layer on stage 0, else the received activation. */
static int input_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, ptdp_mlp_saved *sv)
{
    const ptdp_mlp *p = m->impl;
    int rows = acts->rows, hd = m->cfg.hidden, rc;
    if ((rc = alloc_act(dev, &sv->h[0], "acts.h", rows, hd)) != 0)
        return rc;
    if (m->first_stage) {
        if ((rc = ptdp_model_unit(dev, m, p->in_w, PTDP_UNIT_FORWARD_BEGIN)) != 0)
            return rc;
        double w0 = ptdp_wall_now();
        ptdp_linear_pass lp = linear_pass(dev, m, NULL, "in fwd", NULL, &w0);
        const ptdp_linear_layer in = { .split = PTDP_SPLIT_NONE, .w = p->in_w, .b = p->in_b };   /* whole */
        const int d_in = ptdp_mlp(&m->cfg)->d_in;
        const double gemm = linear_flops(dev, rows, hd, d_in, (double)rows * d_in + (double)hd * d_in);
        const ptdp_linear_charge cost = charge_of(price(dev, gemm, (double)rows * hd, true));
        if ((rc = ptdp_parallel_linear_forward(&lp, &in, sv->h[0], sv->x, &cost)) != 0)
            return rc;
        return ptdp_model_unit(dev, m, p->in_w, PTDP_UNIT_FORWARD_END);
    }
    ptdp_tensor_copy(sv->h[0], sv->x);
    round_bf16(m, sv->h[0]);
    return PTDP_OK;
}

/* Block i: h[i] in; a[i], g[i] and h[i+1] made here.  `held`: its unit is
 * held by the backward (full recomputation), so no unit event of its own. */
static int block_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, ptdp_mlp_saved *sv, int i, bool held)
{
    const ptdp_model_config *c = &m->cfg;
    const ptdp_mlp *p = m->impl;
    const ptdp_mlp_block *b = &p->blocks[i];
    int rows = acts->rows, hd = c->hidden, fl = p->ffn_local, layer = m->layer_begin + i, rc;
    int ff0 = m->mesh->tp_rank * fl;
    char what[32];
    if ((rc = alloc_act(dev, &sv->a[i], "acts.a", rows, fl)) != 0 ||
        (rc = alloc_act(dev, &sv->g[i], "acts.gelu", rows, fl)) != 0 ||
        (rc = alloc_act(dev, &sv->h[i + 1], "acts.h", rows, hd)) != 0)
        return rc;
    ptdp_tensor h_in = sv->h[i], h_out = sv->h[i + 1];
    if (!held && (rc = ptdp_model_unit(dev, m, b->fc1_w, PTDP_UNIT_FORWARD_BEGIN)) != 0)
        return rc;

    double w0 = ptdp_wall_now();
    snprintf(what, sizeof what, "block %d fwd", layer);
    ptdp_linear_pass lp = linear_pass(dev, m, NULL, what, NULL, &w0);
    const ptdp_linear_layer fc1 = { .split = PTDP_SPLIT_COLUMN, .w = b->fc1_w, .b = b->fc1_b };
    const ptdp_linear_layer fc2 = { .split = PTDP_SPLIT_ROW, .w = b->fc2_w };   /* its bias after the sum */
    const double gemms = linear_flops(dev, rows, fl, hd, (double)rows * hd + (double)fl * hd) +
                         linear_flops(dev, rows, hd, fl, (double)rows * fl + (double)hd * fl);
    const double rest = (double)rows * fl + ptdp_gelu_flops_forward((size_t)rows * fl);
    const ptdp_linear_charge cost = charge_of(price(dev, gemms, rest, false));
    /* column-parallel fc1 (f's forward is the identity), its output rounded under bf16 */
    if ((rc = ptdp_parallel_linear_forward(&lp, &fc1, sv->a[i], h_in, NULL)) != 0)
        return rc;
    ptdp_gelu_forward(sv->g[i], sv->a[i]);
    ptdp_tp_dropout(sv->g[i], m->dropout, dropout_key(m, layer, "fc1"), acts->first_sample, c->ffn, ff0);
    round_bf16(m, sv->g[i]);
    /* row-parallel fc2: the partial sums of z, the piece charged, then g —
     * the one all-reduce of the block's forward; the bias after the sum. */
    if ((rc = ptdp_parallel_linear_forward(&lp, &fc2, h_out, sv->g[i], &cost)) != 0)
        return rc;
    ptdp_add_bias(h_out, b->fc2_b->w);
    ptdp_tp_dropout(h_out, m->dropout, dropout_key(m, layer, "out"), acts->first_sample, hd, 0);
    ptdp_tensor_add(h_out, h_in);                                  /* the residual */
    round_bf16(m, h_out);
    account(dev, what, 0, 2.0 * rows * hd, w0, false);
    return held ? PTDP_OK : ptdp_model_unit(dev, m, b->fc1_w, PTDP_UNIT_FORWARD_END);
}

/* What block i keeps once its forward has ended: h, a and g (as one bf16
 * buffer under bf16); with full recomputation its input h[i] alone. */
static int keep_block(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, ptdp_mlp_saved *sv, int i)
{
    ptdp_act_slot slots[3];
    int ns = block_slots(sv, i, slots);
    if (acts->recompute) {
        ptdp_tensor_free(dev, &sv->a[i]);
        ptdp_tensor_free(dev, &sv->g[i]);
        ns = 1;                 /* slot 0: h[i] */
    }
    return m->bf16 ? ptdp_act_pack(dev, &sv->packed[i], slots, ns, "acts.block_bf16") : PTDP_OK;
}

/* The last stage: logits from h[nb], and the loss.  `held` as above. */
static int output_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, ptdp_mlp_saved *sv, bool held)
{
    const ptdp_mlp *p = m->impl;
    int rows = acts->rows, hd = m->cfg.hidden, cl = p->classes_local, rc;
    if ((rc = alloc_act(dev, &sv->logits, "acts.logits", rows, cl)) != 0)
        return rc;
    sv->rowmax = ptdp_alloc(dev, (size_t)rows * sizeof(double), PTDP_MEM_ACTS, "acts.rowmax");
    sv->sumexp = ptdp_alloc(dev, (size_t)rows * sizeof(double), PTDP_MEM_ACTS, "acts.sumexp");
    double *picked = ptdp_alloc(dev, (size_t)rows * sizeof(double), PTDP_MEM_ACTS, "acts.picked");
    if (sv->rowmax == NULL || sv->sumexp == NULL || picked == NULL) {
        ptdp_free(dev, picked);
        return PTDP_ENOMEM;
    }
    if (!held && (rc = ptdp_model_unit(dev, m, p->out_w, PTDP_UNIT_FORWARD_BEGIN)) != 0) {
        ptdp_free(dev, picked);
        return rc;
    }
    double w0 = ptdp_wall_now();
    /* column-parallel over the classes; a bf16 product's output, then the loss in float */
    ptdp_linear_pass lp = linear_pass(dev, m, NULL, "out fwd", NULL, &w0);
    const ptdp_linear_layer out = { .split = PTDP_SPLIT_COLUMN, .w = p->out_w, .b = p->out_b };
    const ptdp_linear_charge cost = charge_of(price(dev, product_flops(dev, rows, cl, hd), (double)rows * cl, true));
    rc = ptdp_parallel_linear_forward(&lp, &out, sv->logits, sv->h[sv->nblocks], &cost);
    if (rc == 0)
        rc = ptdp_tp_xent_forward(m->mesh->tp_comm, sv->logits, m->mesh->tp_rank * cl, acts->labels, sv->rowmax,
                                  sv->sumexp, picked, &acts->loss_sum);
    ptdp_free(dev, picked);
    if (rc != 0 || held)
        return rc;
    return ptdp_model_unit(dev, m, p->out_w, PTDP_UNIT_FORWARD_END);
}

/* The logits and their statistics. */
static void free_output(ptdp_device *dev, ptdp_mlp_saved *sv)
{
    ptdp_tensor_free(dev, &sv->logits);
    ptdp_free(dev, sv->rowmax);
    ptdp_free(dev, sv->sumexp);
    sv->rowmax = sv->sumexp = NULL;
}

/* Everything after the stage input: run the stage and keep what the
 * backward needs. */
static int stage_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, ptdp_mlp_saved *sv)
{
    int rc;
    if ((rc = alloc_saved(dev, sv)) != 0 || (rc = input_forward(dev, m, acts, sv)) != 0)
        return rc;
    for (int i = 0; i < sv->nblocks; i++)
        if ((rc = block_forward(dev, m, acts, sv, i, false)) != 0 || (rc = keep_block(dev, m, acts, sv, i)) != 0)
            return rc;
    return m->last_stage ? output_forward(dev, m, acts, sv, false) : PTDP_OK;
}

int ptdp_mlp_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_batch *b,
                     ptdp_tensor input, long step, bool recompute, ptdp_tensor *out)
{
    ptdp_tensor x = m->first_stage ? b->x : input;
    ptdp_acts_begin(acts, b, step, recompute);
    ptdp_mlp_saved *sv = calloc(1, sizeof *sv);
    if (sv == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    acts->saved = sv;
    sv->nblocks = m->layer_end - m->layer_begin;
    int rc = ptdp_tensor_alloc(dev, &sv->x, "acts.input", PTDP_MEM_ACTS, x.rows, x.cols);
    if (rc != 0)
        return rc;
    ptdp_tensor_copy(sv->x, x);
    if ((rc = stage_forward(dev, m, acts, sv)) != 0)
        return rc;
    if (!m->last_stage && out != NULL)
        ptdp_tensor_copy(*out, sv->h[sv->nblocks]);
    if (recompute) {   /* the blocks kept their inputs alone (keep_block); the last stage h[nb] too */
        free_output(dev, sv);
        if (!m->first_stage)
            ptdp_tensor_free(dev, &sv->x);   /* h[0] is it */
        if (!m->last_stage)
            ptdp_tensor_free(dev, &sv->h[sv->nblocks]);   /* sent */
    }
    if (m->bf16 && sv->h[sv->nblocks].data != NULL) {
        ptdp_act_slot tail = { .t = &sv->h[sv->nblocks] };
        if ((rc = ptdp_act_pack(dev, &sv->tail_packed, &tail, 1, "acts.tail_bf16")) != 0)
            return rc;
    }
    return PTDP_OK;
}

/* Full recomputation, the last stage: the output layer and the loss again
 * from the kept h[nb], inside the unit's backward (its BEGIN made here, not
 * by the backward); the loss stays the first forward's. */
static int output_again(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, ptdp_mlp_saved *sv)
{
    const ptdp_mlp *p = m->impl;
    ptdp_act_slot tail = { .t = &sv->h[sv->nblocks] };
    int rc;
    if ((rc = ptdp_model_unit(dev, m, p->out_w, PTDP_UNIT_BACKWARD_BEGIN)) != 0 ||
        (rc = ptdp_act_unpack(dev, &sv->tail_packed, &tail, 1)) != 0)   /* bf16 */
        return rc;
    const double loss = acts->loss_sum;
    rc = output_forward(dev, m, acts, sv, true);
    acts->loss_sum = loss;
    return rc;
}

/* Full recomputation: block i's forward again from its kept input h[i],
 * inside its unit's backward; its output h[i+1] dropped at once. */
static int block_again(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, ptdp_mlp_saved *sv, int i)
{
    int rc = block_forward(dev, m, acts, sv, i, true);
    ptdp_tensor_free(dev, &sv->h[i + 1]);
    return rc;
}

/* One micro-batch's backward in progress: dh, the gradient of the
 * residual stream, and the scratch beside it. */
typedef struct {
    ptdp_device *dev;
    ptdp_model *m;
    ptdp_acts *acts;
    ptdp_mlp_saved *sv;
    ptdp_wgrad *w;              /* W's sink for the dW products, or NULL  */
    ptdp_tensor dh, tmp, dg;
    double now;                 /* the dW products' flops, charged here
                                   only when they run here: 1, else 0    */
    bool again;                 /* full recomputation                    */
} mlp_bwd;

/* The last stage: dlogits = (softmax - onehot) / B, then through the
 * output layer (column-parallel); its f backward all-reduces dh across the
 * TP ranks' class slices. */
static int output_backward(mlp_bwd *k, double loss_scale)
{
    ptdp_device *dev = k->dev;
    ptdp_model *m = k->m;
    const ptdp_mlp *p = m->impl;
    ptdp_mlp_saved *sv = k->sv;
    const int rows = k->acts->rows, hd = m->cfg.hidden, cl = p->classes_local, nb = sv->nblocks;
    const double dw = product_flops(dev, cl, hd, rows);
    ptdp_act_slot tail = { .t = &sv->h[nb] };
    int rc;
    if ((!k->again && (rc = ptdp_model_unit(dev, m, p->out_w, PTDP_UNIT_BACKWARD_BEGIN)) != 0) ||
        (rc = ptdp_act_unpack(dev, &sv->tail_packed, &tail, 1)) != 0)   /* bf16 */
        return rc;
    double w0 = ptdp_wall_now();
    ptdp_tp_xent_backward(sv->logits, sv->logits, m->mesh->tp_rank * cl, k->acts->labels, sv->rowmax, sv->sumexp,
                          loss_scale);
    /* column-parallel over the classes: dh, then f sums it over the TP ranks' class slices */
    ptdp_linear_pass lp = linear_pass(dev, m, k->w, "out bwd", "out wgrad", &w0);
    const ptdp_linear_layer out = { .split = PTDP_SPLIT_COLUMN, .w = p->out_w, .b = p->out_b,
                                    .w_flops = w_cost(dev, dw, true) };
    const ptdp_linear_charge cost = charge_of(price(dev, product_flops(dev, rows, hd, cl) + k->now * dw,
                                                    (double)rows * cl + ptdp_xent_flops_backward(rows, cl), true));
    if ((rc = ptdp_parallel_linear_backward(&lp, &out, &k->dh, sv->logits, sv->h[nb], &cost)) != 0)
        return rc;
    if (m->bf16 || k->again)   /* done with the tail's float copy */
        ptdp_tensor_free(dev, &sv->h[nb]);
    if (k->again)
        free_output(dev, sv);
    /* the output layer's gradients are final (a data-parallel sum may start) */
    if ((rc = ptdp_model_unit(dev, m, p->out_w, PTDP_UNIT_BACKWARD_END)) != 0)
        return rc;
    return k->w == NULL ? ptdp_model_grads_ready(dev, m, p->out_b) : PTDP_OK;
}

/* Block i right to left: dh is its output's gradient on entry, its
 * input's on return (the residual adds both paths). */
static int block_backward(mlp_bwd *k, int i)
{
    ptdp_device *dev = k->dev;
    ptdp_model *m = k->m;
    const ptdp_mlp *p = m->impl;
    ptdp_mlp_saved *sv = k->sv;
    const ptdp_mlp_block *b = &p->blocks[i];
    const int rows = k->acts->rows, hd = m->cfg.hidden, fl = p->ffn_local, layer = m->layer_begin + i;
    const int64_t first = k->acts->first_sample;
    char what[32], wwhat[32];
    snprintf(what, sizeof what, "block %d bwd", layer);
    snprintf(wwhat, sizeof wwhat, "block %d wgrad", layer);
    const double dw1 = linear_flops(dev, hd, fl, rows, (double)rows * hd);   /* fc1's dW: Q(h) */
    const double dw2 = linear_flops(dev, hd, fl, rows, (double)rows * fl);   /* fc2's dW: Q(g) */
    ptdp_act_slot slots[3];
    int rc;
    if ((rc = ptdp_model_unit(dev, m, b->fc1_w, PTDP_UNIT_BACKWARD_BEGIN)) != 0 ||
        (rc = ptdp_act_unpack(dev, &sv->packed[i], slots, block_slots(sv, i, slots))) != 0 ||   /* bf16 */
        (k->again && (rc = block_again(dev, m, k->acts, sv, i)) != 0))
        return rc;
    double w0 = ptdp_wall_now();
    ptdp_linear_pass lp = linear_pass(dev, m, k->w, what, wwhat, &w0);
    const ptdp_linear_layer fc2 = { .split = PTDP_SPLIT_ROW, .w = b->fc2_w, .b = b->fc2_b,
                                    .w_flops = w_cost(dev, dw2, false) };
    const ptdp_linear_layer fc1 = { .split = PTDP_SPLIT_COLUMN, .w = b->fc1_w, .b = b->fc1_b,
                                    .w_flops = w_cost(dev, dw1, false) };
    const double gemms = linear_flops(dev, rows, fl, hd, (double)rows * hd + (double)hd * fl) +
                         linear_flops(dev, rows, hd, fl, (double)rows * fl + (double)fl * hd) +
                         k->now * (dw1 + dw2);
    const double rest = (double)rows * hd + (double)rows * fl + ptdp_gelu_flops_backward((size_t)rows * fl);
    const ptdp_linear_charge cost = charge_of(price(dev, gemms, rest, false));
    /* z's gradient is dh through the output dropout (same mask). */
    ptdp_tensor dz = k->dh;
    if (m->dropout > 0) {
        ptdp_tensor_copy(k->tmp, k->dh);
        ptdp_tp_dropout(k->tmp, m->dropout, dropout_key(m, layer, "out"), first, hd, 0);
        dz = k->tmp;
    }
    /* Row-parallel fc2 (g's backward is the identity): dg = dz B_r,
     * dB_r += dz^T g, db += colsum dz — no communication. */
    if ((rc = ptdp_parallel_linear_backward(&lp, &fc2, &k->dg, dz, sv->g[i], NULL)) != 0)
        return rc;
    ptdp_tp_dropout(k->dg, m->dropout, dropout_key(m, layer, "fc1"), first, m->cfg.ffn, m->mesh->tp_rank * fl);
    ptdp_gelu_backward(k->dg, k->dg, sv->a[i]);
    /* Column-parallel fc1: tmp = dg A_r here, the block's piece charged,
     * then summed over TP by f's backward. */
    if ((rc = ptdp_parallel_linear_backward(&lp, &fc1, &k->tmp, k->dg, sv->h[i], &cost)) != 0)
        return rc;
    ptdp_tensor_add(k->dh, k->tmp);   /* the residual adds both paths */
    if ((rc = ptdp_model_unit(dev, m, b->fc1_w, PTDP_UNIT_BACKWARD_END)) != 0 ||
        (k->w == NULL && (rc = ptdp_model_grads_ready(dev, m, b->fc1_b)) != 0))
        return rc;
    if (m->bf16 || k->again) {   /* one block's float copy at a time */
        ptdp_tensor_free(dev, &sv->h[i]);
        ptdp_tensor_free(dev, &sv->a[i]);
        ptdp_tensor_free(dev, &sv->g[i]);
    }
    return PTDP_OK;
}

/* Stage 0: the input layer's dW and db (its input needs no gradient). */
static int input_backward(mlp_bwd *k)
{
    ptdp_device *dev = k->dev;
    ptdp_model *m = k->m;
    const ptdp_mlp *p = m->impl;
    const int rows = k->acts->rows;
    const int hd = m->cfg.hidden, d_in = ptdp_mlp(&m->cfg)->d_in;   /* Q(dY), Q(W), Q(X): no dX, dY's all dW's */
    const double dw = linear_flops(dev, hd, d_in, rows, (double)rows * hd + (double)hd * d_in + (double)rows * d_in);
    int rc;
    if ((rc = ptdp_model_unit(dev, m, p->in_w, PTDP_UNIT_BACKWARD_BEGIN)) != 0)
        return rc;
    double w0 = ptdp_wall_now();
    ptdp_linear_pass lp = linear_pass(dev, m, k->w, "in bwd", "in wgrad", &w0);
    const ptdp_linear_layer in = { .split = PTDP_SPLIT_NONE, .w = p->in_w, .b = p->in_b,
                                   .w_flops = w_cost(dev, dw, true) };
    const ptdp_linear_charge cost = charge_of(price(dev, k->now * dw, (double)rows * m->cfg.hidden, true));
    if ((rc = ptdp_parallel_linear_backward(&lp, &in, NULL, k->dh, k->sv->x, &cost)) != 0)
        return rc;
    return ptdp_model_unit(dev, m, p->in_w, PTDP_UNIT_BACKWARD_END);
}

/* The backward of one micro-batch; with a sink w the dW products are
 * recorded there for a later W (wgrad.h) and not charged here.  With full
 * recomputation each block (and the output layer) runs its forward again
 * first, and is freed after: one block's activations at a time. */
int ptdp_mlp_backward_input(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                            double loss_scale, ptdp_tensor *dx, ptdp_wgrad *w)
{
    const ptdp_mlp *p = m->impl;
    mlp_bwd k = { .dev = dev, .m = m, .acts = acts, .sv = acts->saved, .w = w, .now = w == NULL ? 1.0 : 0.0,
                  .again = acts->recompute };
    const int rows = acts->rows, hd = m->cfg.hidden;
    int rc = PTDP_OK;
    if (k.again && m->last_stage)
        rc = output_again(dev, m, acts, k.sv);
    if (rc != 0 || (rc = alloc_act(dev, &k.dh, "grad.h", rows, hd)) != 0 ||
        (rc = alloc_act(dev, &k.tmp, "grad.tmp", rows, hd)) != 0 ||
        (rc = alloc_act(dev, &k.dg, "grad.ff", rows, p->ffn_local)) != 0)
        goto done;
    if (m->last_stage)
        rc = output_backward(&k, loss_scale);
    else
        ptdp_tensor_copy(k.dh, *dout);
    for (int i = k.sv->nblocks - 1; rc == 0 && i >= 0; i--)
        rc = block_backward(&k, i);
    if (rc == 0 && m->first_stage)
        rc = input_backward(&k);
    else if (rc == 0 && dx != NULL)
        ptdp_tensor_copy(*dx, k.dh);
done:
    ptdp_tensor_free(dev, &k.dh);
    ptdp_tensor_free(dev, &k.tmp);
    ptdp_tensor_free(dev, &k.dg);
    ptdp_mlp_acts_free(dev, m, acts);
    return rc;
}

int ptdp_mlp_backward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                      double loss_scale, ptdp_tensor *dx)
{
    return ptdp_mlp_backward_input(dev, m, acts, dout, loss_scale, dx, NULL);
}
