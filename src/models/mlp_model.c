/*
 * mlp_model.c — the MLP as a model: its shapes and their checks, its
 * parameters on one stage and shard, its checkpoint names, its data, and
 * the table of functions the rest of ptdp calls (model.h).
 *
 *   parameter          whole shape       TP split           local shape
 *   in.weight          [hidden, d_in]    replicated         [hidden, d_in]
 *   in.bias            [hidden]          replicated         [hidden]
 *   blocks.l.fc1.w     [ffn, hidden]     rows (outputs)     [ffn/tp, hidden]
 *   blocks.l.fc1.b     [ffn]             with its rows      [ffn/tp]
 *   blocks.l.fc2.w     [hidden, ffn]     columns (inputs)   [hidden, ffn/tp]
 *   blocks.l.fc2.b     [hidden]          replicated         [hidden]
 *   out.weight         [classes, hidden] rows (classes)     [classes/tp, hidden]
 *   out.bias           [classes]         with its rows      [classes/tp]
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
 * Weights start N(0, 0.02^2), biases 0 (model.c draws them).
 */
#include "ptdp/mlp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"
#include "parallel/fp8_linear_impl.h"
#include "models/mlp_table.h"

#define INIT_STD 0.02

/* ------------------------------------------------- the whole model */

static int mlp_check(const ptdp_model_config *m, int tp, int pp, char *msg, size_t n)
{
    const ptdp_mlp_settings *mlp = ptdp_mlp(m);
    (void)pp;
#define BAD(...) do { snprintf(msg, n, __VA_ARGS__); return PTDP_EINVAL; } while (0)
    if (mlp->d_in < 1) BAD("--d-in %d: must be at least 1", mlp->d_in);
    if (m->hidden < 1) BAD("--hidden %d: must be at least 1", m->hidden);
    if (m->ffn < 1) BAD("--ffn %d: must be at least 1", m->ffn);
    if (m->layers < 1) BAD("--layers %d: must be at least 1", m->layers);
    if (mlp->classes < 2) BAD("--classes %d: must be at least 2", mlp->classes);
    if (tp >= 1 && (m->ffn % tp != 0 || mlp->classes % tp != 0)) {
        char valid[256] = "";
        size_t len = 0;
        for (int t = 1; t <= PTDP_MAX_DEVICES && t <= m->ffn; t++)
            if (m->ffn % t == 0 && mlp->classes % t == 0 && len + 8 < sizeof valid)
                len += (size_t)snprintf(valid + len, sizeof valid - len, "%s%d", len ? ", " : "", t);
        BAD("--tp %d must divide --ffn %d and --classes %d (valid --tp: %s)", tp, m->ffn, mlp->classes, valid);
    }
#undef BAD
    return PTDP_OK;
}

/* The layout beyond the shapes: --fp8's tiles against the TP split of
 * fc1 (by rows) and fc2 (by columns); the input layer is whole and the
 * output layer, the head, keeps its precision.  No experts to spread. */
static int mlp_check_run(const ptdp_model_config *c, const ptdp_model_run *r, char *msg, size_t n)
{
    if (r->ep > 1) {
        snprintf(msg, n, "--ep %d spreads a mixture of experts' experts over devices, and --model mlp has no "
                 "experts: use a model with a mixture of experts (--moe-experts E)", r->ep);
        return PTDP_EINVAL;
    }
    if (r->etp > 0 && r->etp != r->tp) {
        snprintf(msg, n, "--etp %d sets a mixture of experts' own TP size, and --model mlp has no experts: use a "
                 "model with a mixture of experts (--moe-experts E), or leave --etp out", r->etp);
        return PTDP_EINVAL;
    }
    const ptdp_fp8_weight w[] = {
        { "fc1.weight", c->ffn, c->hidden, PTDP_SHARD_ROWS, 1 }, { "fc2.weight", c->hidden, c->ffn, PTDP_SHARD_COLS, 1 },
    };
    return ptdp_fp8_split_check_all(r->fp8, w, 2, r->tp, msg, n);
}

/* The parameter list in state_dict order (forward order), as name/shape. */
static int mlp_list_params(const ptdp_model_config *c, ptdp_param_info *out)
{
    const ptdp_mlp_settings *mlp = ptdp_mlp(c);
    int n = 0;
#define ADD(nm, r, cc, bias) do { if (out) { snprintf(out[n].name, sizeof out[n].name, "%s", nm); \
        out[n].rows = (r); out[n].cols = (cc); out[n].is_bias = (bias); } n++; } while (0)
    char name[PTDP_NAME_MAX];
    ADD("in.weight", c->hidden, mlp->d_in, false);
    ADD("in.bias", 1, c->hidden, true);
    for (int l = 0; l < c->layers; l++) {
        snprintf(name, sizeof name, "blocks.%d.fc1.weight", l); ADD(name, c->ffn, c->hidden, false);
        snprintf(name, sizeof name, "blocks.%d.fc1.bias", l);   ADD(name, 1, c->ffn, true);
        snprintf(name, sizeof name, "blocks.%d.fc2.weight", l); ADD(name, c->hidden, c->ffn, false);
        snprintf(name, sizeof name, "blocks.%d.fc2.bias", l);   ADD(name, 1, c->hidden, true);
    }
    ADD("out.weight", mlp->classes, c->hidden, false);
    ADD("out.bias", 1, mlp->classes, true);
#undef ADD
    return n;
}

/* The checkpoint's names for the shapes (its format: keep them). */
static int mlp_metadata(const ptdp_model_config *c, const char **keys, char (*values)[32],
                        const char **flags, int max)
{
    const char *k[] = { "d_in", "d_model", "d_ff", "n_layers", "n_classes" };
    const char *f[] = { "--d-in", "--hidden", "--ffn", "--layers", "--classes" };
    const int v[] = { ptdp_mlp(c)->d_in, c->hidden, c->ffn, c->layers, ptdp_mlp(c)->classes };
    int n = 0;
    for (; n < 5 && n < max; n++) {
        keys[n] = k[n];
        flags[n] = f[n];
        snprintf(values[n], 32, "%d", v[n]);
    }
    return n;
}

/* A metadata key back into its field (a checkpoint read without flags). */
static int mlp_from_metadata(ptdp_model_config *c, const char *key, long long value)
{
    const struct { const char *key; int *field; } t[] = {
        { "d_in", &ptdp_mlp(c)->d_in },
        { "d_model", &c->hidden },
        { "d_ff", &c->ffn },
        { "n_layers", &c->layers },
        { "n_classes", &ptdp_mlp(c)->classes },
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++)
        if (strcmp(key, t[k].key) == 0 && value >= 0 && value <= 0x7fffffff) {
            *t[k].field = (int)value;
            return PTDP_OK;
        }
    return PTDP_EINVAL;
}

/* ------------------------------------------------- one stage and shard */

/* The parameter list of this stage and shard, output layer first. */
static int lay_out(ptdp_device *dev, ptdp_model *m, ptdp_mlp *p)
{
    const ptdp_model_config *c = &m->cfg;
    const ptdp_mlp_settings *mlp = ptdp_mlp(c);
    int t = m->mesh->tp_rank, h = c->hidden;
    int fl = p->ffn_local, cl = p->classes_local;
    char name[PTDP_NAME_MAX];
#define ADD(...) (ptdp_model_add_param(dev, m, __VA_ARGS__))
#define LIN ptdp_model_linear_weight   /* a linear layer's W (model.h) */
#define W PTDP_INIT_NORMAL, INIT_STD
#define ZERO PTDP_INIT_ZEROS, 0.0

    /* Units (model.h): the output layer, each block, the input layer. */
    if (m->last_stage) {
        ptdp_model_begin_unit(m);
        p->out_w = ADD("out.weight", mlp->classes, h, false, PTDP_SHARD_ROWS, t * cl, 0, cl, h, W);
        if (p->out_w != NULL)
            p->out_w->keeps_precision = true;   /* --fp8 leaves the head in float */
        p->out_b = ADD("out.bias", 1, mlp->classes, true, PTDP_SHARD_ROWS, 0, t * cl, 1, cl, ZERO);
    }
    for (int l = m->layer_end - 1; l >= m->layer_begin; l--) {
        ptdp_mlp_block *b = &p->blocks[l - m->layer_begin];
        ptdp_model_begin_unit(m);
        snprintf(name, sizeof name, "blocks.%d.fc2.bias", l);
        b->fc2_b = ADD(name, 1, h, true, PTDP_SHARD_NONE, 0, 0, 1, h, ZERO);
        snprintf(name, sizeof name, "blocks.%d.fc2.weight", l);
        b->fc2_w = LIN(ADD(name, h, c->ffn, false, PTDP_SHARD_COLS, 0, t * fl, h, fl, W));
        snprintf(name, sizeof name, "blocks.%d.fc1.weight", l);
        b->fc1_w = LIN(ADD(name, c->ffn, h, false, PTDP_SHARD_ROWS, t * fl, 0, fl, h, W));
        snprintf(name, sizeof name, "blocks.%d.fc1.bias", l);
        b->fc1_b = ADD(name, 1, c->ffn, true, PTDP_SHARD_ROWS, 0, t * fl, 1, fl, ZERO);
    }
    if (m->first_stage) {
        ptdp_model_begin_unit(m);
        p->in_w = LIN(ADD("in.weight", h, mlp->d_in, false, PTDP_SHARD_NONE, 0, 0, h, mlp->d_in, W));
        p->in_b = ADD("in.bias", 1, h, true, PTDP_SHARD_NONE, 0, 0, 1, h, ZERO);
    }
#undef LIN
#undef ADD
#undef W
#undef ZERO
    return ptdp_aborted(dev) ? PTDP_EABORTED : PTDP_OK;
}

static void mlp_free(ptdp_device *dev, ptdp_model *m)
{
    ptdp_mlp *p = m->impl;
    if (p == NULL)
        return;
    ptdp_mlp_data_free(dev, &p->data);
    free(p->blocks);
    free(p);
    m->impl = NULL;
}

static int mlp_init(ptdp_device *dev, ptdp_model *m)
{
    const ptdp_model_config *c = &m->cfg;
    const ptdp_mlp_settings *mlp = ptdp_mlp(c);
    int nb = m->layer_end - m->layer_begin;
    ptdp_mlp *p = calloc(1, sizeof *p);
    if (p != NULL)
        p->blocks = calloc((size_t)(nb > 0 ? nb : 1), sizeof *p->blocks);
    m->impl = p;
    if (p == NULL || p->blocks == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory describing the model", dev->rank);
    p->ffn_local = c->ffn / m->mesh->tp;
    p->classes_local = mlp->classes / m->mesh->tp;
    m->input_cols = mlp->d_in;
    m->label_cols = 1;
    m->boundary_cols = c->hidden;
    int rc = ptdp_model_reserve_params(dev, m, 4 * nb + 4);
    if (rc == 0)
        rc = lay_out(dev, m, p);
    /* The data: inputs on the first stage, labels on the last. */
    if (rc == 0 && (m->first_stage || m->last_stage))
        rc = ptdp_mlp_data_init(dev, &p->data, m->seed, mlp->d_in, mlp->classes);
    return rc;
}

static void mlp_fill_batch(ptdp_model *m, ptdp_batch *b)
{
    ptdp_mlp *p = m->impl;
    ptdp_mlp_data_batch(&p->data, b->first, b->rows, b->x, b->labels);
}

ptdp_mlp *ptdp_mlp_of(ptdp_model *m)
{
    return m != NULL && m->ops == &ptdp_mlp_ops ? m->impl : NULL;
}

ptdp_model_config ptdp_mlp_default_config(void)
{
    return PTDP_MLP_CONFIG(.d_in = 32, .hidden = 64, .ffn = 256, .layers = 8, .classes = 16);
}

const ptdp_model_ops ptdp_mlp_ops = {
    .name = "mlp",
    .caps = { .title = "the MLP" },
    .check = mlp_check,
    .check_run = mlp_check_run,
    .list_params = mlp_list_params,
    .metadata = mlp_metadata,
    .from_metadata = mlp_from_metadata,
    .init = mlp_init,
    .free = mlp_free,
    .fill_batch = mlp_fill_batch,
    .forward = ptdp_mlp_forward,
    .backward = ptdp_mlp_backward,
    .acts_free = ptdp_mlp_acts_free,
    .backward_input = ptdp_mlp_backward_input,
};
