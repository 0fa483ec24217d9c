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
 * comes from ops.c / tp.c, next to its forward.  Gradients ACCUMULATE
 * (+=) into the model's gradient buffer, so M micro-batches add up to the
 * gradient of their union — gradient accumulation needs nothing else.
 *
 * Activations: a micro-batch keeps, per block, its input h, the fc1 output
 * a and the GELU output g (category "acts"), freed at the end of its
 * backward.  With recompute it keeps only the stage input and runs the
 * forward again inside the backward (the masks of dropout are regenerated
 * from the counter-based generator, so the recomputed forward is the same).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/model.h"
#include "ptdp/ops.h"
#include "ptdp/rng.h"
#include "ptdp/tp.h"

/* Dropout streams: one per block and place, keyed by global indices. */
static uint64_t dropout_key(const ptdp_model *m, int layer, const char *where)
{
    char name[PTDP_NAME_MAX];
    snprintf(name, sizeof name, "dropout.blocks.%d.%s", layer, where);
    return ptdp_rng_key(m->seed, name);
}

/* Account compute in the virtual clock.  Under the "ideal" profile the input
 * and output layers cost nothing, so pipeline stages are exactly uniform
 * and the textbook bubble formula holds to the last digit. */
static void account(ptdp_device *dev, const char *what, double flops, double w0, bool edge_layer)
{
    if (edge_layer && dev->profile != NULL && dev->profile->ideal)
        flops = 0;
    ptdp_compute(dev, what, flops, w0);
}

static int alloc_act(ptdp_device *dev, ptdp_tensor *t, const char *name, int rows, int cols)
{
    return ptdp_tensor_alloc(dev, t, name, PTDP_MEM_ACTS, rows, cols);
}

void ptdp_acts_free(ptdp_device *dev, ptdp_acts *acts)
{
    if (acts->h != NULL)
        for (int i = 0; i <= acts->nblocks; i++)
            ptdp_tensor_free(dev, &acts->h[i]);
    if (acts->a != NULL)
        for (int i = 0; i < acts->nblocks; i++) {
            ptdp_tensor_free(dev, &acts->a[i]);
            ptdp_tensor_free(dev, &acts->g[i]);
        }
    ptdp_tensor_free(dev, &acts->logits);
    ptdp_free(dev, acts->rowmax);
    ptdp_free(dev, acts->sumexp);
    acts->rowmax = acts->sumexp = NULL;
    free(acts->h);
    free(acts->a);
    free(acts->g);
    acts->h = acts->a = acts->g = NULL;
}

/* Everything after the stage input: run the stage and keep what the
 * backward needs.  Used by the forward, and again by a recomputing backward. */
static int stage_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts)
{
    const ptdp_model_config *c = &m->cfg;
    ptdp_comm *tp = m->mesh->tp_comm;
    int rows = acts->rows, nb = acts->nblocks, hd = c->d_model, rc;
    int ff0 = m->mesh->tp_rank * m->ff_local;

    acts->h = calloc((size_t)nb + 1, sizeof *acts->h);
    acts->a = calloc((size_t)(nb > 0 ? nb : 1), sizeof *acts->a);
    acts->g = calloc((size_t)(nb > 0 ? nb : 1), sizeof *acts->g);
    if (acts->h == NULL || acts->a == NULL || acts->g == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);

    /* h_0: the input layer on stage 0, else the received activation. */
    if ((rc = alloc_act(dev, &acts->h[0], "acts.h", rows, hd)) != 0)
        return rc;
    double w0 = ptdp_wall_now();
    if (m->has_input) {
        ptdp_linear_forward(acts->h[0], acts->x, m->in_w->w, &m->in_b->w);
        account(dev, "in fwd", ptdp_linear_flops_forward(rows, c->d_in, hd), w0, true);
    } else {
        ptdp_tensor_copy(acts->h[0], acts->x);
    }

    for (int i = 0; i < nb; i++) {
        const ptdp_block_params *b = &m->blocks[i];
        int layer = m->layer_begin + i;
        char what[32];
        if ((rc = alloc_act(dev, &acts->a[i], "acts.a", rows, m->ff_local)) != 0 ||
            (rc = alloc_act(dev, &acts->g[i], "acts.gelu", rows, m->ff_local)) != 0 ||
            (rc = alloc_act(dev, &acts->h[i + 1], "acts.h", rows, hd)) != 0)
            return rc;
        ptdp_tensor h_in = acts->h[i], h_out = acts->h[i + 1];

        w0 = ptdp_wall_now();
        ptdp_column_linear_forward(dev, tp, acts->a[i], h_in, b->fc1_w->w, &b->fc1_b->w, NULL);
        ptdp_gelu_forward(acts->g[i], acts->a[i]);
        ptdp_dropout_apply(acts->g[i], m->dropout, dropout_key(m, layer, "fc1"), acts->first_sample, c->d_ff, ff0);
        ptdp_linear_forward(h_out, acts->g[i], b->fc2_w->w, NULL);    /* partial sum of z */
        snprintf(what, sizeof what, "block %d fwd", layer);
        account(dev, what, ptdp_linear_flops_forward(rows, hd, m->ff_local) +
                ptdp_gelu_flops_forward((size_t)rows * m->ff_local) +
                ptdp_matmul_flops(rows, hd, m->ff_local), w0, false);

        /* g: the one all-reduce of the block's forward; bias after the sum. */
        if ((rc = ptdp_tp_reduce_from_region_forward(tp, h_out)) != 0)
            return rc;
        w0 = ptdp_wall_now();
        ptdp_add_bias(h_out, b->fc2_b->w);
        ptdp_dropout_apply(h_out, m->dropout, dropout_key(m, layer, "out"), acts->first_sample, hd, 0);
        ptdp_tensor_add(h_out, h_in);                                  /* the residual */
        account(dev, what, 2.0 * rows * hd, w0, false);
    }

    if (m->has_output) {
        if ((rc = alloc_act(dev, &acts->logits, "acts.logits", rows, m->classes_local)) != 0)
            return rc;
        acts->rowmax = ptdp_alloc(dev, (size_t)rows * sizeof(double), PTDP_MEM_ACTS, "acts.rowmax");
        acts->sumexp = ptdp_alloc(dev, (size_t)rows * sizeof(double), PTDP_MEM_ACTS, "acts.sumexp");
        double *picked = ptdp_alloc(dev, (size_t)rows * sizeof(double), PTDP_MEM_ACTS, "acts.picked");
        if (acts->rowmax == NULL || acts->sumexp == NULL || picked == NULL) {
            ptdp_free(dev, picked);
            return PTDP_ENOMEM;
        }
        w0 = ptdp_wall_now();
        ptdp_column_linear_forward(dev, tp, acts->logits, acts->h[nb], m->out_w->w, &m->out_b->w, NULL);
        account(dev, "out fwd", ptdp_linear_flops_forward(rows, hd, m->classes_local), w0, true);
        rc = ptdp_tp_xent_forward(tp, acts->logits, m->mesh->tp_rank * m->classes_local, acts->labels,
                                  acts->rowmax, acts->sumexp, picked, &acts->loss_sum);
        ptdp_free(dev, picked);
        if (rc != 0)
            return rc;
    }
    return PTDP_OK;
}

/* Drop everything but the stage input (recompute keeps x alone). */
static void keep_only_input(ptdp_device *dev, ptdp_acts *acts)
{
    ptdp_tensor x = acts->x;
    acts->x = (ptdp_tensor){ 0 };
    ptdp_acts_free(dev, acts);
    acts->x = x;
}

int ptdp_model_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts,
                       ptdp_tensor x, const int64_t *labels, int64_t first_sample, long step,
                       bool recompute, ptdp_tensor *out)
{
    memset(acts, 0, sizeof *acts);
    acts->rows = x.rows;
    acts->first_sample = first_sample;
    acts->step = step;
    acts->labels = labels;
    acts->recompute = recompute;
    acts->nblocks = m->layer_end - m->layer_begin;
    acts->alive = true;
    int rc = ptdp_tensor_alloc(dev, &acts->x, "acts.input", PTDP_MEM_ACTS, x.rows, x.cols);
    if (rc != 0)
        return rc;
    ptdp_tensor_copy(acts->x, x);
    if ((rc = stage_forward(dev, m, acts)) != 0)
        return rc;
    if (!m->has_output && out != NULL)
        ptdp_tensor_copy(*out, acts->h[acts->nblocks]);
    if (recompute)
        keep_only_input(dev, acts);
    return PTDP_OK;
}

int ptdp_model_backward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts,
                        const ptdp_tensor *dout, double loss_scale, ptdp_tensor *dx)
{
    const ptdp_model_config *c = &m->cfg;
    ptdp_comm *tp = m->mesh->tp_comm;
    int rows = acts->rows, nb = acts->nblocks, hd = c->d_model, rc;
    int ff0 = m->mesh->tp_rank * m->ff_local;
    ptdp_tensor dh = { 0 }, tmp = { 0 }, dg = { 0 };

    if (acts->recompute) {
        double loss = acts->loss_sum;   /* the first forward's, kept as is */
        if ((rc = stage_forward(dev, m, acts)) != 0)
            goto done;
        acts->loss_sum = loss;
    }
    if ((rc = alloc_act(dev, &dh, "grad.h", rows, hd)) != 0 ||
        (rc = alloc_act(dev, &tmp, "grad.tmp", rows, hd)) != 0 ||
        (rc = alloc_act(dev, &dg, "grad.ff", rows, m->ff_local)) != 0)
        goto done;

    double w0 = ptdp_wall_now();
    if (m->has_output) {
        /* dlogits = (softmax - onehot) / B, then through the output layer;
         * its f backward all-reduces dh across the TP ranks' class slices. */
        ptdp_tp_xent_backward(acts->logits, acts->logits, m->mesh->tp_rank * m->classes_local,
                              acts->labels, acts->rowmax, acts->sumexp, loss_scale);
        ptdp_linear_backward(&dh, m->out_w->g, &m->out_b->g, acts->logits, acts->h[nb], m->out_w->w, false);
        account(dev, "out bwd", ptdp_linear_flops_backward(rows, hd, m->classes_local) +
                ptdp_xent_flops_backward(rows, m->classes_local), w0, true);
        if ((rc = ptdp_tp_copy_to_region_backward(tp, dh)) != 0)
            goto done;
    } else {
        ptdp_tensor_copy(dh, *dout);
    }

    for (int i = nb - 1; i >= 0; i--) {
        const ptdp_block_params *b = &m->blocks[i];
        int layer = m->layer_begin + i;
        char what[32];
        snprintf(what, sizeof what, "block %d bwd", layer);
        w0 = ptdp_wall_now();
        /* z's gradient is dh through the output dropout (same mask). */
        ptdp_tensor dz = dh;
        if (m->dropout > 0) {
            ptdp_tensor_copy(tmp, dh);
            ptdp_dropout_apply(tmp, m->dropout, dropout_key(m, layer, "out"), acts->first_sample, hd, 0);
            dz = tmp;
        }
        /* Row-parallel fc2: dg = dz B_r, dB_r += dz^T g, db += colsum dz — no communication. */
        ptdp_row_linear_backward(&dg, b->fc2_w->g, &b->fc2_b->g, dz, acts->g[i], b->fc2_w->w);
        ptdp_dropout_apply(dg, m->dropout, dropout_key(m, layer, "fc1"), acts->first_sample, c->d_ff, ff0);
        ptdp_gelu_backward(dg, dg, acts->a[i]);
        /* Column-parallel fc1: tmp = dg A_r here, summed over TP by f's backward. */
        ptdp_linear_backward(&tmp, b->fc1_w->g, &b->fc1_b->g, dg, acts->h[i], b->fc1_w->w, false);
        account(dev, what, ptdp_linear_flops_backward(rows, hd, m->ff_local) +
                ptdp_linear_flops_backward(rows, m->ff_local, hd) +
                ptdp_gelu_flops_backward((size_t)rows * m->ff_local), w0, false);
        if ((rc = ptdp_tp_copy_to_region_backward(tp, tmp)) != 0)
            goto done;
        ptdp_tensor_add(dh, tmp);   /* the residual adds both paths */
    }

    w0 = ptdp_wall_now();
    if (m->has_input) {
        ptdp_linear_backward(NULL, m->in_w->g, &m->in_b->g, dh, acts->x, m->in_w->w, false);
        account(dev, "in bwd", ptdp_linear_flops_backward(rows, c->d_in, hd) -
                ptdp_matmul_flops(rows, c->d_in, hd), w0, true);
    } else if (dx != NULL) {
        ptdp_tensor_copy(*dx, dh);
    }
done:
    ptdp_tensor_free(dev, &dh);
    ptdp_tensor_free(dev, &tmp);
    ptdp_tensor_free(dev, &dg);
    ptdp_acts_free(dev, acts);
    ptdp_tensor_free(dev, &acts->x);
    acts->alive = false;
    return rc;
}
