/*
 * test_equiv_model_in_a_file.c — a model of its own, written in this one
 * file and registered through the public interface (models.h), trains
 * under every parallelism and equals its single-device baseline.
 *
 * The model, "resmlp": L residual blocks of a tensor-parallel MLP on the
 * features themselves, and a squared error against a one-hot target:
 *
 *   h_0 = x                                   x: a sample's `hidden` features
 *   h_l = h_(l-1) + W2 GELU(W1 h_(l-1) + b1) + b2
 *   loss = 1/2 || h_L - onehot(y) ||^2        y in 0 .. hidden-1
 *
 *   W1 [ffn, hidden]  column-parallel: rank r holds rows r ffn/tp ..
 *   W2 [hidden, ffn]  row-parallel: rank r holds the same columns; its
 *                     partial products are summed by one all-reduce (g)
 *
 * Nothing outside this file knows it: the training loop, DP, PP, ZeRO and
 * the checkpoints reach it through its ptdp_model_ops, and the validation
 * through its capabilities (no sequences, no attention).  That is the
 * test of the model interface: if the loop had to know the model, this
 * file could not exist.
 *
 * It also counts (counters.h): it publishes three counters of its own, and
 * the run's result shows them summed over whatever mesh ran it —
 *
 *   resmlp_loss     a step's    the last stage's loss_sum, a mean per
 *                               sample: the step's loss, bit for bit
 *   resmlp_rows     a step's    rows each block ran, one entry per block,
 *                               TP rank 0's: B each, whatever the mesh
 *   resmlp_forwards a device's  its forwards over the run: steps x M
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "equiv.h"
#include "ptdp/counters.h"
#include "ptdp/models.h"
#include "ptdp/ops.h"
#include "ptdp/rng.h"
#include "ptdp/tp.h"

/* ------------------------------------------------------ the whole model */

static int res_check(const ptdp_model_config *c, int tp, int pp, char *msg, size_t n)
{
    (void)pp;
    if (c->hidden < 2 || c->ffn < 1 || c->layers < 1) {
        snprintf(msg, n, "resmlp: --hidden %d, --ffn %d, --layers %d: too small", c->hidden, c->ffn, c->layers);
        return PTDP_EINVAL;
    }
    if (c->ffn % tp != 0) {
        snprintf(msg, n, "resmlp: --tp %d must divide --ffn %d", tp, c->ffn);
        return PTDP_EINVAL;
    }
    return PTDP_OK;
}

static int res_list_params(const ptdp_model_config *c, ptdp_param_info *out)
{
    static const char *const what[4] = { "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias" };
    for (int l = 0; out != NULL && l < c->layers; l++) {
        const int rows[4] = { c->ffn, 1, c->hidden, 1 }, cols[4] = { c->hidden, c->ffn, c->ffn, c->hidden };
        for (int k = 0; k < 4; k++) {
            ptdp_param_info *p = &out[4 * l + k];
            snprintf(p->name, sizeof p->name, "blocks.%d.%s", l, what[k]);
            p->rows = rows[k];
            p->cols = cols[k];
            p->is_bias = k % 2 == 1;
        }
    }
    return 4 * c->layers;
}

static int res_metadata(const ptdp_model_config *c, const char **keys, char (*values)[32], const char **flags,
                        int max)
{
    const char *k[] = { "d_model", "d_ff", "n_layers" }, *f[] = { "--hidden", "--ffn", "--layers" };
    const int v[] = { c->hidden, c->ffn, c->layers };
    int n = 0;
    for (; n < 3 && n < max; n++) {
        keys[n] = k[n];
        flags[n] = f[n];
        snprintf(values[n], 32, "%d", v[n]);
    }
    return n;
}

static int res_from_metadata(ptdp_model_config *c, const char *key, long long value)
{
    int *field = strcmp(key, "d_model") == 0 ? &c->hidden : strcmp(key, "d_ff") == 0 ? &c->ffn
               : strcmp(key, "n_layers") == 0 ? &c->layers : NULL;
    if (field == NULL || value < 0 || value > 0x7fffffff)
        return PTDP_EINVAL;
    *field = (int)value;
    return PTDP_OK;
}

/* ------------------------------------------------ one stage and shard */

typedef struct { ptdp_param *w1, *b1, *w2, *b2; } res_block;
typedef struct { res_block *blocks; } res_impl;

/* What a micro-batch keeps: each block's input, pre-activation and GELU
 * output, and the stage output. */
typedef struct { int nb; ptdp_tensor *h, *a, *g; } res_saved;

static int res_init(ptdp_device *dev, ptdp_model *m)
{
    const ptdp_model_config *c = &m->cfg;
    const int nb = m->layer_end - m->layer_begin, t = m->mesh->tp_rank, fl = c->ffn / m->mesh->tp;
    const int h = c->hidden;
    res_impl *p = calloc(1, sizeof *p);
    if (p == NULL || (p->blocks = calloc((size_t)nb, sizeof *p->blocks)) == NULL) {
        free(p);
        return ptdp_fail(dev, PTDP_ENOMEM, "resmlp: host out of memory");
    }
    m->impl = p;
    m->input_cols = h;
    m->label_cols = 1;
    m->boundary_cols = h;
    int rc = ptdp_model_reserve_params(dev, m, 4 * nb);
    char name[PTDP_NAME_MAX];
    for (int l = m->layer_end - 1; rc == 0 && l >= m->layer_begin; l--) {   /* backward order */
        res_block *b = &p->blocks[l - m->layer_begin];
        ptdp_model_begin_unit(m);
        snprintf(name, sizeof name, "blocks.%d.fc2.bias", l);
        b->b2 = ptdp_model_add_param(dev, m, name, 1, h, true, PTDP_SHARD_NONE, 0, 0, 1, h, PTDP_INIT_ZEROS, 0);
        snprintf(name, sizeof name, "blocks.%d.fc2.weight", l);
        b->w2 = ptdp_model_add_param(dev, m, name, h, c->ffn, false, PTDP_SHARD_COLS, 0, t * fl, h, fl,
                                     PTDP_INIT_NORMAL, 0.2);
        snprintf(name, sizeof name, "blocks.%d.fc1.weight", l);
        b->w1 = ptdp_model_add_param(dev, m, name, c->ffn, h, false, PTDP_SHARD_ROWS, t * fl, 0, fl, h,
                                     PTDP_INIT_NORMAL, 0.2);
        snprintf(name, sizeof name, "blocks.%d.fc1.bias", l);
        b->b1 = ptdp_model_add_param(dev, m, name, 1, c->ffn, true, PTDP_SHARD_ROWS, 0, t * fl, 1, fl,
                                     PTDP_INIT_NORMAL, 0.1);
        if (b->w1 == NULL || b->b1 == NULL || b->w2 == NULL || b->b2 == NULL)
            rc = PTDP_ENOMEM;
    }
    return rc;
}

static void res_free(ptdp_device *dev, ptdp_model *m)
{
    (void)dev;
    res_impl *p = m->impl;
    if (p != NULL)
        free(p->blocks);
    free(p);
    m->impl = NULL;
}

/* Sample i's features and target, counter-based: the same wherever it runs. */
static void res_fill_batch(ptdp_model *m, ptdp_batch *b)
{
    const int h = m->cfg.hidden;
    const uint64_t kx = ptdp_rng_key(m->seed, "resmlp.x"), ky = ptdp_rng_key(m->seed, "resmlp.y");
    for (int r = 0; r < b->rows; r++) {
        const uint64_t i = (uint64_t)(b->first + r);
        for (int j = 0; b->x.data != NULL && j < h; j++)
            b->x.data[(size_t)r * h + j] = (ptdp_real)ptdp_rng_normal(kx, i * (uint64_t)h + (uint64_t)j);
        if (b->labels != NULL)
            b->labels[r] = (int64_t)(ptdp_rng_bits(ky, i) % (uint64_t)h);
    }
}

static void res_acts_free(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts)
{
    (void)m;
    res_saved *sv = acts->saved;
    if (sv != NULL) {
        for (int i = 0; i <= sv->nb; i++) {
            ptdp_tensor_free(dev, &sv->h[i]);
            if (i < sv->nb) {
                ptdp_tensor_free(dev, &sv->a[i]);
                ptdp_tensor_free(dev, &sv->g[i]);
            }
        }
        free(sv->h);
        free(sv->a);
        free(sv->g);
        free(sv);
    }
    acts->saved = NULL;
    acts->alive = false;
}

/* One block forward: a = h W1_r^T + b1_r, g = GELU(a), z = g W2_r^T summed
 * over TP, h' = h + z + b2. */
static int block_forward(ptdp_device *dev, ptdp_model *m, const res_block *b, res_saved *sv, int i)
{
    const int rows = sv->h[i].rows, h = m->cfg.hidden, fl = b->w1->w.rows;
    int rc;
    if ((rc = ptdp_tensor_alloc(dev, &sv->a[i], "acts.a", PTDP_MEM_ACTS, rows, fl)) != 0 ||
        (rc = ptdp_tensor_alloc(dev, &sv->g[i], "acts.g", PTDP_MEM_ACTS, rows, fl)) != 0 ||
        (rc = ptdp_tensor_alloc(dev, &sv->h[i + 1], "acts.h", PTDP_MEM_ACTS, rows, h)) != 0 ||
        (rc = ptdp_model_unit(dev, m, b->w1, PTDP_UNIT_FORWARD_BEGIN)) != 0)
        return rc;
    ptdp_linear_forward(sv->a[i], sv->h[i], b->w1->w, &b->b1->w);
    ptdp_gelu_forward(sv->g[i], sv->a[i]);
    ptdp_linear_forward(sv->h[i + 1], sv->g[i], b->w2->w, NULL);
    if ((rc = ptdp_tp_reduce_from_region_forward(m->mesh->tp_comm, sv->h[i + 1])) != 0)
        return rc;
    ptdp_add_bias(sv->h[i + 1], b->b2->w);
    ptdp_tensor_add(sv->h[i + 1], sv->h[i]);
    return ptdp_model_unit(dev, m, b->w1, PTDP_UNIT_FORWARD_END);
}

static int res_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_batch *b, ptdp_tensor input,
                       long step, bool recompute, ptdp_tensor *out)
{
    const res_impl *p = m->impl;
    const ptdp_tensor x = m->first_stage ? b->x : input;
    const int nb = m->layer_end - m->layer_begin, h = m->cfg.hidden;
    memset(acts, 0, sizeof *acts);
    acts->rows = b->rows;
    acts->first_sample = b->first;
    acts->step = step;
    acts->labels = b->labels;
    acts->recompute = recompute;   /* this model keeps everything either way */
    acts->alive = true;
    res_saved *sv = calloc(1, sizeof *sv);
    if (sv == NULL || (sv->h = calloc((size_t)nb + 1, sizeof *sv->h)) == NULL ||
        (sv->a = calloc((size_t)nb, sizeof *sv->a)) == NULL || (sv->g = calloc((size_t)nb, sizeof *sv->g)) == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "resmlp: host out of memory");
    acts->saved = sv;
    sv->nb = nb;
    int rc = ptdp_tensor_alloc(dev, &sv->h[0], "acts.h", PTDP_MEM_ACTS, x.rows, x.cols);
    if (rc != 0)
        return rc;
    ptdp_tensor_copy(sv->h[0], x);
    for (int i = 0; i < nb; i++)
        if ((rc = block_forward(dev, m, &p->blocks[i], sv, i)) != 0)
            return rc;
    if (m->last_stage)   /* 1/2 || h_L - onehot(y) ||^2 per sample */
        for (int r = 0; r < b->rows; r++)
            for (int j = 0; j < h; j++) {
                double d = sv->h[nb].data[(size_t)r * h + j] - (j == b->labels[r] ? 1.0 : 0.0);
                acts->loss_sum += 0.5 * d * d;
            }
    else if (out != NULL)
        ptdp_tensor_copy(*out, sv->h[nb]);
    return PTDP_OK;
}

/* One block backward, dh the gradient of its output (in place: becomes the
 * gradient of its input); tmp and dg are scratch. */
static int block_backward(ptdp_device *dev, ptdp_model *m, const res_block *b, res_saved *sv, int i,
                          ptdp_tensor dh, ptdp_tensor tmp, ptdp_tensor dg)
{
    int rc;
    if ((rc = ptdp_model_unit(dev, m, b->w1, PTDP_UNIT_BACKWARD_BEGIN)) != 0)
        return rc;
    ptdp_linear_backward(&dg, b->w2->g, &b->b2->g, dh, sv->g[i], b->w2->w, false);   /* row-parallel */
    ptdp_gelu_backward(dg, dg, sv->a[i]);
    ptdp_linear_backward(&tmp, b->w1->g, &b->b1->g, dg, sv->h[i], b->w1->w, false);  /* column-parallel */
    if ((rc = ptdp_tp_copy_to_region_backward(m->mesh->tp_comm, tmp)) != 0)          /* f: sum over TP */
        return rc;
    ptdp_tensor_add(dh, tmp);   /* the residual adds both paths */
    if ((rc = ptdp_model_unit(dev, m, b->w1, PTDP_UNIT_BACKWARD_END)) != 0)
        return rc;
    return ptdp_model_grads_ready(dev, m, b->b1);
}

static int res_backward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                        double loss_scale, ptdp_tensor *dx)
{
    const res_impl *p = m->impl;
    res_saved *sv = acts->saved;
    const int rows = acts->rows, h = m->cfg.hidden, nb = sv->nb;
    const int fl = nb > 0 ? p->blocks[0].w1->w.rows : 1;
    ptdp_tensor dh = { 0 }, tmp = { 0 }, dg = { 0 };
    int rc;
    if ((rc = ptdp_tensor_alloc(dev, &dh, "grad.h", PTDP_MEM_ACTS, rows, h)) != 0 ||
        (rc = ptdp_tensor_alloc(dev, &tmp, "grad.tmp", PTDP_MEM_ACTS, rows, h)) != 0 ||
        (rc = ptdp_tensor_alloc(dev, &dg, "grad.ff", PTDP_MEM_ACTS, rows, fl)) != 0)
        goto done;
    if (m->last_stage)   /* d loss / d h_L = (h_L - onehot(y)) / B */
        for (int r = 0; r < rows; r++)
            for (int j = 0; j < h; j++)
                dh.data[(size_t)r * h + j] = (ptdp_real)(loss_scale * (sv->h[nb].data[(size_t)r * h + j] -
                                                                       (j == acts->labels[r] ? 1.0 : 0.0)));
    else
        ptdp_tensor_copy(dh, *dout);
    for (int i = nb - 1; i >= 0 && rc == 0; i--)
        rc = block_backward(dev, m, &p->blocks[i], sv, i, dh, tmp, dg);
    if (rc == 0 && !m->first_stage && dx != NULL)
        ptdp_tensor_copy(*dx, dh);
done:
    ptdp_tensor_free(dev, &dh);
    ptdp_tensor_free(dev, &tmp);
    ptdp_tensor_free(dev, &dg);
    res_acts_free(dev, m, acts);
    return rc;
}

/* --------------------------------------------------- what it counts */

static int res_publish(const ptdp_model_config *c, ptdp_counters *reg)
{
    int rc = ptdp_counters_publish(reg, "resmlp_loss", PTDP_COUNT_STEP, PTDP_COUNT_NUMBER,
                                   PTDP_COUNT_TP_ONCE | PTDP_COUNT_PER_SAMPLE);
    if (rc == 0)
        rc = ptdp_counters_publish(reg, "resmlp_rows", PTDP_COUNT_STEP, PTDP_COUNT_LIST(c->layers),
                                   PTDP_COUNT_TP_ONCE);
    if (rc == 0)
        rc = ptdp_counters_publish(reg, "resmlp_forwards", PTDP_COUNT_DEVICE, PTDP_COUNT_NUMBER, 0);
    return rc;
}

static void res_count(const ptdp_model *m, const ptdp_acts *acts, ptdp_counts *counts)
{
    if (m->last_stage)
        ptdp_count(counts, "resmlp_loss", 0, acts->loss_sum);
    for (int l = m->layer_begin; l < m->layer_end; l++)
        ptdp_count(counts, "resmlp_rows", l, acts->rows);
    ptdp_count(counts, "resmlp_forwards", 0, 1);
}

static const ptdp_model_ops resmlp_ops = {
    .name = "resmlp",
    .caps = { .title = "the residual MLP" },
    .check = res_check,
    .list_params = res_list_params,
    .metadata = res_metadata,
    .from_metadata = res_from_metadata,
    .init = res_init,
    .free = res_free,
    .fill_batch = res_fill_batch,
    .forward = res_forward,
    .backward = res_backward,
    .acts_free = res_acts_free,
    .publish = res_publish,
    .count = res_count,
};

/* ------------------------------------------------------------- tests */

static const harness_tcase model_tests = { .name = "model in a file", .timeout_s = 300 };

static ptdp_train_config resmlp_config(int dp, int tp, int pp, int zero)
{
    ck_assert_int_eq(ptdp_model_register(&resmlp_ops), PTDP_OK);
    ptdp_train_config c = equiv_config(dp, tp, pp, 2);
    c.model = (ptdp_model_config){ .ops = ptdp_model_lookup("resmlp"), .hidden = 8, .ffn = 16, .layers = 4 };
    c.zero = zero;
    c.batch = 24;
    return c;
}

TEST(model_tests, test_registered_by_name)
{
    ck_assert_int_eq(ptdp_model_register(&resmlp_ops), PTDP_OK);
    ck_assert_ptr_eq(ptdp_model_lookup("resmlp"), &resmlp_ops);
    ptdp_model_ops other = resmlp_ops;   /* another table under a name taken */
    ck_assert_int_eq(ptdp_model_register(&other), PTDP_EINVAL);
    char names[128];
    ck_assert_ptr_nonnull(strstr(ptdp_model_names(names, sizeof names, "|"), "|resmlp"));
}
END_TEST

/* dp x tp x pp, each against one device. */
LOOP_TEST(model_tests, test_meshes_equal_one_device, 6)
{
    static const int mesh[6][3] = { { 2, 1, 1 }, { 1, 2, 1 }, { 1, 1, 2 }, { 2, 2, 1 }, { 2, 1, 2 }, { 2, 2, 2 } };
    ptdp_train_config c = resmlp_config(mesh[_i][0], mesh[_i][1], mesh[_i][2], 0);
    equiv_check(&c);
}
END_TEST

/* ZeRO 1, 2 and 3 on dp 2 x tp 2 x pp 2 (ZeRO-3 gathers its blocks as units). */
LOOP_TEST(model_tests, test_zero_stages_equal_one_device, 3)
{
    ptdp_train_config c = resmlp_config(2, 2, 2, _i + 1);
    equiv_check(&c);
}
END_TEST

/* Its counters, summed by the run's table over dp 2 x tp 2 x pp 2 as
 * the loss is: the loss again, bit for bit; B rows a block, each counted
 * once; M forwards a step on every device. */
TEST(model_tests, test_its_counters_sum_over_the_mesh)
{
    ptdp_train_config c = resmlp_config(2, 2, 2, 0);
    ptdp_launch_opts o = harness_opts(NULL);
    ptdp_train_result res;
    char msg[PTDP_MSG_MAX];
    ck_assert_msg(ptdp_train(&c, &o, NULL, NULL, &res, msg, sizeof msg) == 0, "%s", msg);
    ck_assert_int_eq(res.counters.n, 3);
    for (int s = 0; s < c.steps; s++) {
        const double *loss = ptdp_train_step_counts(&res, s, "resmlp_loss");
        const double *rows = ptdp_train_step_counts(&res, s, "resmlp_rows");
        ck_assert_msg(loss != NULL && *loss == res.log[s].loss, "step %d: counted %.17g, the loss %.17g", s,
                      loss != NULL ? *loss : -1.0, res.log[s].loss);
        for (int l = 0; l < c.model.layers; l++)
            ck_assert_msg(rows[l] == c.batch, "step %d, block %d: %g rows of %d", s, l, rows[l], c.batch);
    }
    ck_assert_ptr_null(ptdp_train_step_counts(&res, 0, "resmlp_forwards"));   /* a device's, not a step's */
    ck_assert_ptr_null(ptdp_train_step_counts(&res, c.steps, "resmlp_loss"));
    for (int r = 0; r < 8; r++) {
        const double *forwards = ptdp_train_device_counts(&res, r, "resmlp_forwards");
        ck_assert_msg(forwards != NULL && *forwards == (double)c.steps * c.micro_batches, "device %d: %g forwards",
                      r, forwards != NULL ? *forwards : -1.0);
    }
    ptdp_train_result_free(&res);
}
END_TEST

/* The validation asks the model's capabilities: this one has no sequence,
 * no attention and no split backward. */
TEST(model_tests, test_sequence_flags_refused_by_capability)
{
    ptdp_train_config c = resmlp_config(1, 2, 1, 0);
    char msg[512];
    c.sp = true;
    equiv_refused(&c, "the residual MLP has none");
    c.sp = false;
    c.cp = 2;
    equiv_refused(&c, "the residual MLP's samples have no sequence");
    c.cp = 1;
    c.recompute_core = true;
    equiv_refused(&c, "the residual MLP has no attention");
    c.recompute_core = false;
    c.pp = 2;
    c.schedule = ptdp_schedule_find("zb-h1");   /* it has no backward_input: its backward cannot be split */
    equiv_refused(&c, "the residual MLP cannot split its backward");
    c.schedule = ptdp_schedule_find("1f1b");
    ck_assert_int_eq(ptdp_train_validate(&c, msg, sizeof msg), PTDP_OK);
}
END_TEST

int main(void)
{
    return harness_main("equivalence-model-in-a-file");
}
