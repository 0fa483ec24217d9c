/*
 * model.c — where the parameters of one device live, and how they start.
 *
 * A device holds one pipeline stage (a contiguous range of blocks, plus the
 * input layer on stage 0 and the output layer on the last stage) and, under
 * tensor parallelism, one shard of each split matrix:
 *
 *   parameter          whole shape    TP split           local shape
 *   in.weight          [h, d_in]      replicated         [h, d_in]
 *   blocks.l.fc1.w     [d_ff, h]      rows (outputs)     [d_ff/tp, h]
 *   blocks.l.fc1.b     [d_ff]         with its rows      [d_ff/tp]
 *   blocks.l.fc2.w     [h, d_ff]      columns (inputs)   [h, d_ff/tp]
 *   blocks.l.fc2.b     [h]            replicated         [h]
 *   out.weight         [C, h]         rows (classes)     [C/tp, h]
 *   out.bias           [C]            with its rows      [C/tp]
 *
 * The replicated ones need no communication of their own: their gradients
 * are made only from tensors that are already identical on every TP rank.
 * in.weight and in.bias get dh^T X and colsum dh, where X is the same data
 * and dh has just been summed by f's backward all-reduces; fc2.bias gets
 * colsum dz, dz being the gradient of the block output after g (its dropout
 * mask keyed by global indices, so the same on every rank).  An all-reduce
 * leaves every member the same bits (comm.h), so these gradients, and the
 * optimizer steps they drive, are bit-identical: the replicas never drift
 * (test_tp.c trains a few steps and compares their bytes across TP ranks).
 *
 * The parameters sit in ONE flat buffer, in the order the backward produces
 * their gradients (out first, in last); the gradients in a second buffer of
 * the same layout.  Each ptdp_param is a view into both.
 *
 * Initialisation draws element (i, j) of the WHOLE tensor from the stream
 * named after the parameter at index i * cols + j, so a shard starting at
 * (row0, col0) draws exactly the numbers the single device drew there.
 */
#include "ptdp/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/comm.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/optim.h"
#include "ptdp/rng.h"

#define INIT_STD 0.02

void ptdp_stage_range(int n_layers, int pp, const int *stage_layers, int stage, int *begin, int *count)
{
    int b = 0;
    for (int s = 0; s <= stage; s++) {
        int n = stage_layers ? stage_layers[s] : n_layers / pp + (s < n_layers % pp ? 1 : 0);
        if (s == stage) {
            *begin = b;
            *count = n;
        }
        b += n;
    }
}

/* Describe one parameter: its whole shape, its local shard and its place. */
static ptdp_param *add_param(ptdp_model *m, const char *name, int full_rows, int full_cols,
                             bool is_bias, ptdp_shard shard, int row0, int col0, int rows, int cols)
{
    ptdp_param *p = &m->params[m->nparams++];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->full_rows = full_rows;
    p->full_cols = full_cols;
    p->is_bias = is_bias;
    p->shard = shard;
    p->row0 = row0;
    p->col0 = col0;
    p->offset = m->numel;
    p->w = (ptdp_tensor){ .rows = rows, .cols = cols, .stride = cols };
    snprintf(p->w.name, sizeof p->w.name, "%s", name);
    p->g = p->w;
    m->numel += (size_t)rows * (size_t)cols;
    return p;
}

/* The parameter list of this stage and shard, output layer first. */
static void lay_out(ptdp_model *m)
{
    const ptdp_model_config *c = &m->cfg;
    int t = m->mesh->tp_rank, h = c->d_model;
    int fl = m->ff_local, cl = m->classes_local;
    char name[PTDP_NAME_MAX];

    if (m->has_output) {
        m->out_w = add_param(m, "out.weight", c->n_classes, h, false, PTDP_SHARD_ROWS, t * cl, 0, cl, h);
        m->out_b = add_param(m, "out.bias", 1, c->n_classes, true, PTDP_SHARD_ROWS, 0, t * cl, 1, cl);
    }
    for (int l = m->layer_end - 1; l >= m->layer_begin; l--) {
        ptdp_block_params *b = &m->blocks[l - m->layer_begin];
        snprintf(name, sizeof name, "blocks.%d.fc2.bias", l);
        b->fc2_b = add_param(m, name, 1, h, true, PTDP_SHARD_NONE, 0, 0, 1, h);
        snprintf(name, sizeof name, "blocks.%d.fc2.weight", l);
        b->fc2_w = add_param(m, name, h, c->d_ff, false, PTDP_SHARD_COLS, 0, t * fl, h, fl);
        snprintf(name, sizeof name, "blocks.%d.fc1.weight", l);
        b->fc1_w = add_param(m, name, c->d_ff, h, false, PTDP_SHARD_ROWS, t * fl, 0, fl, h);
        snprintf(name, sizeof name, "blocks.%d.fc1.bias", l);
        b->fc1_b = add_param(m, name, 1, c->d_ff, true, PTDP_SHARD_ROWS, 0, t * fl, 1, fl);
    }
    if (m->has_input) {
        m->in_w = add_param(m, "in.weight", h, c->d_in, false, PTDP_SHARD_NONE, 0, 0, h, c->d_in);
        m->in_b = add_param(m, "in.bias", 1, h, true, PTDP_SHARD_NONE, 0, 0, 1, h);
    }
}

int ptdp_model_init(ptdp_device *dev, ptdp_model *m, const ptdp_model_config *cfg,
                    const ptdp_mesh *mesh, const int *stage_layers, uint64_t seed, double dropout)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    m->mesh = mesh;
    m->seed = seed;
    m->dropout = dropout;
    if (cfg->d_ff % mesh->tp != 0 || cfg->n_classes % mesh->tp != 0)
        return ptdp_fail(dev, PTDP_EINVAL, "tp=%d must divide d_ff=%d and n_classes=%d",
                         mesh->tp, cfg->d_ff, cfg->n_classes);
    m->ff_local = cfg->d_ff / mesh->tp;
    m->classes_local = cfg->n_classes / mesh->tp;
    int count = 0;
    ptdp_stage_range(cfg->n_layers, mesh->pp, stage_layers, mesh->pp_rank, &m->layer_begin, &count);
    m->layer_end = m->layer_begin + count;
    m->has_input = mesh->pp_rank == 0;
    m->has_output = mesh->pp_rank == mesh->pp - 1;

    /* Host bookkeeping: the list of views (not device data). */
    m->params = calloc((size_t)4 * count + 4, sizeof *m->params);
    m->blocks = calloc((size_t)(count > 0 ? count : 1), sizeof *m->blocks);
    if (m->params == NULL || m->blocks == NULL) {
        ptdp_model_free(dev, m);
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory describing the model", dev->rank);
    }
    lay_out(m);

    m->flat_w = ptdp_alloc(dev, m->numel * sizeof(ptdp_real), PTDP_MEM_PARAMS, "parameters");
    m->flat_g = m->flat_w ? ptdp_alloc(dev, m->numel * sizeof(ptdp_real), PTDP_MEM_GRADS, "gradients") : NULL;
    if (m->flat_g == NULL) {
        ptdp_model_free(dev, m);
        return PTDP_ENOMEM;
    }
    for (int i = 0; i < m->nparams; i++) {
        ptdp_param *p = &m->params[i];
        p->w.data = m->flat_w + p->offset;
        p->g.data = m->flat_g + p->offset;
        if (p->is_bias)
            continue;   /* biases start at 0 (the arena zero-fills) */
        uint64_t key = ptdp_rng_key(seed, p->name);
        for (int r = 0; r < p->w.rows; r++)
            for (int c = 0; c < p->w.cols; c++) {
                uint64_t whole = (uint64_t)(p->row0 + r) * (uint64_t)p->full_cols + (uint64_t)(p->col0 + c);
                *ptdp_at(p->w, r, c) = (ptdp_real)(INIT_STD * ptdp_rng_normal(key, whole));
            }
    }
    return PTDP_OK;
}

void ptdp_model_free(ptdp_device *dev, ptdp_model *m)
{
    ptdp_free(dev, m->flat_g);
    ptdp_free(dev, m->flat_w);
    free(m->params);
    free(m->blocks);
    m->params = NULL;
    m->blocks = NULL;
    m->flat_w = m->flat_g = NULL;
}

ptdp_param *ptdp_model_find(ptdp_model *m, const char *name)
{
    for (int i = 0; i < m->nparams; i++)
        if (strcmp(m->params[i].name, name) == 0)
            return &m->params[i];
    return NULL;
}

/* ||g||^2 of the whole model, each parameter once.  A TP-replicated
 * parameter has an identical gradient on every TP rank, so only TP rank 0
 * counts it; a shard counts its own elements; the TP group then sums the
 * shards, and the PP group sums the stages.  (DP replicas hold the same
 * all-reduced gradient, so each computes the same total.) */
bool ptdp_param_counted_here(const ptdp_model *m, const ptdp_param *p)
{
    return p->shard != PTDP_SHARD_NONE || m->mesh->tp_rank == 0;
}

int ptdp_model_sum_over_shards(ptdp_model *m, double *x)
{
    int rc = PTDP_OK;
    if (m->mesh->tp > 1)
        rc = ptdp_all_reduce(m->mesh->tp_comm, x, x, 1, PTDP_F64, PTDP_SUM);
    if (rc == 0 && m->mesh->pp > 1)
        rc = ptdp_all_reduce(m->mesh->pp_comm, x, x, 1, PTDP_F64, PTDP_SUM);
    return rc;
}

int ptdp_model_grad_sumsq(ptdp_device *dev, ptdp_model *m, double *sumsq)
{
    (void)dev;
    double local = 0;
    for (int i = 0; i < m->nparams; i++)
        if (ptdp_param_counted_here(m, &m->params[i]))
            local += ptdp_sum_squares(m->params[i].g.data, ptdp_tensor_numel(m->params[i].g));
    int rc = ptdp_model_sum_over_shards(m, &local);
    *sumsq = local;
    return rc;
}
