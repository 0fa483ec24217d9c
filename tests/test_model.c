/*
 * test_model.c — the reference MLP on its own: gradients against finite
 * differences, shards equal to slices, stage cuts, data determinism; and
 * the model interface's declaration of where a gradient is summed; a
 * model whose table says nothing of sampling is not sampled (sample.h).
 */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "ptdp/mlp_data.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/mesh.h"
#include "ptdp/model.h"
#include "ptdp/models.h"
#include "ptdp/sample.h"
#include "ptdp/state.h"
#include "ptdp/launch.h"
#include "ptdp/zero.h"
#include "ptdp/mlp.h"

static const harness_tcase model_tests = { .name = "model", .timeout_s = 60 };

HARNESS_MODEL_CONFIG(cfg_of, PTDP_MLP_CONFIG( .d_in = 5, .hidden = 6, .ffn = 8, .layers = 2, .classes = 4 ))
#define CFG (*cfg_of())

/* ---------------------------------------------------------- gradients */
#ifdef PTDP_DOUBLE   /* finite differences need double precision */

typedef struct { int checked; double worst; int status; } fd_result;

/* loss of the whole batch (mean), with the model as it is now */
static double batch_loss(ptdp_device *dev, ptdp_model *m, ptdp_tensor x, int64_t *y)
{
    ptdp_acts acts;
    ptdp_model_forward(dev, m, &acts, &(ptdp_batch){ .first = 0, .rows = x.rows, .x = x, .labels = y }, x, 0, false, NULL);
    double loss = acts.loss_sum / x.rows;
    ptdp_acts_free(dev, m, &acts);
    return loss;
}

static int fd_device(ptdp_device *dev, void *arg)
{
    fd_result *r = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    ptdp_mlp_data data;
    int B = 7;
    DEVICE_TRY(harness_model_on_mesh(dev, &CFG, 1, 1, 1, 3, &mesh, &m));
    DEVICE_TRY(ptdp_mlp_data_init(dev, &data, 3, ptdp_mlp(&CFG)->d_in, ptdp_mlp(&CFG)->classes));
    /* Larger weights than the 0.02 init, so every path carries signal. */
    for (size_t k = 0; k < m.numel; k++)
        m.flat_w[k] = (ptdp_real)(m.flat_w[k] * 20 + 0.01 * sin((double)k));
    ptdp_tensor x;
    int64_t y[7];
    DEVICE_TRY(ptdp_tensor_alloc(dev, &x, "x", PTDP_MEM_OTHER, B, ptdp_mlp(&CFG)->d_in));
    ptdp_mlp_data_batch(&data, 0, B, x, y);

    ptdp_acts acts;
    DEVICE_TRY(ptdp_model_forward(dev, &m, &acts, &(ptdp_batch){ .first = 0, .rows = x.rows, .x = x, .labels = y }, x, 0, false, NULL));
    DEVICE_TRY(ptdp_model_backward(dev, &m, &acts, NULL, 1.0 / B, NULL));

    /* Central differences on every parameter element (the model is tiny). */
    for (size_t k = 0; k < m.numel; k++) {
        ptdp_real keep = m.flat_w[k];
        double eps = 1e-5;
        m.flat_w[k] = (ptdp_real)(keep + eps);
        double up = batch_loss(dev, &m, x, y);
        m.flat_w[k] = (ptdp_real)(keep - eps);
        double down = batch_loss(dev, &m, x, y);
        m.flat_w[k] = keep;
        double fd = (up - down) / (2 * eps), an = m.flat_g[k];
        double err = fabs(fd - an) / fmax(1e-4, fabs(fd) + fabs(an));
        if (err > r->worst)
            r->worst = err;
        r->checked++;
    }
    ptdp_tensor_free(dev, &x);
    ptdp_mlp_data_free(dev, &data);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return 0;
}

TEST(model_tests, test_gradients_match_finite_differences)
{
    fd_result r = { 0 };
    harness_launch_ok(1, fd_device, &r, NULL, NULL);
    ck_assert_int_eq(r.checked, 284);   /* 36 + 2 x 110 + 28 parameters, every one checked */
    ck_assert_msg(r.worst < 1e-6, "worst relative gradient error %g", r.worst);
}
END_TEST
#endif

/* ------------------------------------------------- shards are slices */

typedef struct { int tp; ptdp_state *state; } shard_arg;

static int shard_device(ptdp_device *dev, void *arg)
{
    shard_arg *a = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    int rc = ptdp_mesh_init(dev, 1, a->tp, 1, &mesh);
    if (rc == 0)
        rc = ptdp_model_init(dev, &m, &CFG, &mesh, NULL, 11, 0.0);
    if (rc != 0)
        return rc;
    for (int i = 0; i < m.nparams; i++) {
        const ptdp_param *p = &m.params[i];
        if (p->shard != PTDP_SHARD_NONE || mesh.tp_rank == 0)
            ptdp_param_to_state(p, p->w, ptdp_state_find(a->state, p->name));
    }
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return 0;
}

TEST(model_tests, test_tp_shards_equal_slices_of_the_whole)
{
    ptdp_state whole, split;
    ck_assert_int_eq(ptdp_state_init(&whole, &CFG, PTDP_OPT_ADAMW, false), 0);
    ck_assert_int_eq(ptdp_state_init(&split, &CFG, PTDP_OPT_ADAMW, false), 0);
    shard_arg a1 = { 1, &whole }, a4 = { 4, &split };
    harness_launch_ok(1, shard_device, &a1, NULL, NULL);
    harness_launch_ok(4, shard_device, &a4, NULL, NULL);
    for (int i = 0; i < whole.ntensors; i++) {
        size_t n = (size_t)whole.t[i].rows * whole.t[i].cols;
        ck_assert_msg(memcmp(whole.t[i].data, split.t[i].data, n * sizeof(ptdp_real)) == 0,
                      "%s differs between tp=1 and tp=4", whole.t[i].name);
    }
    /* and the weights are not all zero */
    ptdp_state_tensor *w = ptdp_state_find(&whole, "blocks.1.fc2.weight");
    double s = 0;
    for (int k = 0; k < w->rows * w->cols; k++)
        s += w->data[k] * w->data[k];
    ck_assert(s > 0);
    ptdp_state_free(&whole);
    ptdp_state_free(&split);
}
END_TEST

TEST(model_tests, test_stage_range)
{
    int b, n;
    int starts[3], counts[3];
    for (int s = 0; s < 3; s++) {
        ptdp_stage_range(8, 3, NULL, s, &b, &n);
        starts[s] = b;
        counts[s] = n;
    }
    /* balanced: the first 8 mod 3 = 2 stages take one block more */
    ck_assert_int_eq(counts[0], 3);
    ck_assert_int_eq(counts[1], 3);
    ck_assert_int_eq(counts[2], 2);
    ck_assert_int_eq(starts[2], 6);
    int explicit_layers[] = { 1, 5, 2 };
    ptdp_stage_range(8, 3, explicit_layers, 1, &b, &n);
    ck_assert_int_eq(b, 1);
    ck_assert_int_eq(n, 5);
}
END_TEST

/* -------------------------------------------------------------- data */

typedef struct { int64_t labels[2][16]; ptdp_real x[2][16 * 5]; } data_arg;

static int data_device(ptdp_device *dev, void *arg)
{
    data_arg *a = arg;
    ptdp_mlp_data d;
    DEVICE_TRY(ptdp_mlp_data_init(dev, &d, 5, 5, 4));
    /* all 16 at once, then as two shards of 9 and 7 */
    ptdp_mlp_data_batch(&d, 100, 16, ptdp_tensor_wrap(a->x[0], 16, 5), a->labels[0]);
    ptdp_mlp_data_batch(&d, 100, 9, ptdp_tensor_wrap(a->x[1], 9, 5), a->labels[1]);
    ptdp_mlp_data_batch(&d, 109, 7, ptdp_tensor_wrap(a->x[1] + 9 * 5, 7, 5), a->labels[1] + 9);
    ptdp_mlp_data_free(dev, &d);
    return 0;
}

TEST(model_tests, test_data_is_a_function_of_the_index)
{
    data_arg a;
    harness_launch_ok(1, data_device, &a, NULL, NULL);
    ck_assert(memcmp(a.labels[0], a.labels[1], sizeof a.labels[0]) == 0);
    ck_assert(memcmp(a.x[0], a.x[1], sizeof a.x[0]) == 0);
    int seen[4] = { 0 };
    for (int i = 0; i < 16; i++) {
        ck_assert(a.labels[0][i] >= 0 && a.labels[0][i] < 4);
        seen[a.labels[0][i]]++;
    }
    ck_assert_msg(seen[0] + seen[1] + seen[2] + seen[3] == 16 && (seen[0] < 16), "labels not all one class");
}
END_TEST

/* ------------------------------------ where gradients are summed (model.h) */

/* A parameter declares the groups its gradient is summed over, and the one
 * generic path (ptdp_zero_finish_gradients) sums it there: on dp 2 x tp 2,
 * the MLP's blocks.0.fc2.bias declared "DP and TP" ends as the sum over
 * all four devices, every other element as the sum over its two DP ranks —
 * whole (stage 0) or in each rank's ZeRO-1 range.  Every gradient is set
 * by hand to (world rank + 1)(k mod 7 + 1)/4, exact in float. */
typedef struct { int stage; ptdp_group extra; } groups_arg;

static double grad_value(int rank, size_t k)
{
    return (rank + 1) * (double)(k % 7 + 1) * 0.25;
}

static int declared_groups_device(ptdp_device *dev, void *arg)
{
    const groups_arg *a = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    ptdp_zero z;
    DEVICE_TRY(ptdp_mesh_init(dev, 2, 2, 1, &mesh));
    int rc = ptdp_model_init(dev, &m, &CFG, &mesh, NULL, 1, 0.0);
    if (rc != 0) {   /* another device's refusal may abort this one's set-up */
        ptdp_mesh_free(&mesh);
        return rc;
    }
    ptdp_param *p = ptdp_model_find(&m, "blocks.0.fc2.bias");
    DEVICE_CHECK(dev, p != NULL && p->sum.replicas == PTDP_GROUP_DP && p->sum.also == 0, "DP alone by default");
    p->sum.also = PTDP_GROUP_BIT(a->extra);
    DEVICE_CHECK(dev, ptdp_param_summed_over(p, PTDP_GROUP_DP) && ptdp_param_summed_over(p, a->extra),
                 "declared over DP and group %d", (int)a->extra);
    DEVICE_CHECK(dev, ptdp_param_counted_here(&m, p) == (mesh.tp_rank == 0), "counted by tp rank 0 only");
    rc = ptdp_zero_init(dev, &z, &m, a->stage);   /* refuses a group never built */
    if (rc != 0) {
        ptdp_model_free(dev, &m);
        ptdp_mesh_free(&mesh);
        return rc;
    }
    for (size_t k = 0; k < m.numel; k++)
        m.flat_g[k] = (ptdp_real)grad_value(dev->rank, k);
    void *g;
    rc = ptdp_zero_finish_gradients(dev, &z, &m, &g);
    for (size_t k = 0; rc == 0 && k < m.numel; k++) {
        size_t b, e, at;
        if (!ptdp_zero_owned(&z, k, k + 1, &b, &e, &at))
            continue;   /* another DP rank's range */
        bool declared = k >= p->offset && k < p->offset + ptdp_tensor_numel(p->g);
        double want = grad_value(mesh.tp_rank, k) + grad_value(mesh.tp_rank + 2, k);
        if (declared)
            want += grad_value(1 - mesh.tp_rank, k) + grad_value(3 - mesh.tp_rank, k);
        DEVICE_CHECK(dev, m.flat_g[k] == (ptdp_real)want, "element %zu%s: %g, want %g", k,
                     declared ? " (declared)" : "", (double)m.flat_g[k], want);
    }
    ptdp_zero_free(dev, &z, &m);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return rc;
}

TEST(model_tests, test_declared_groups_are_summed)
{
    for (int stage = 0; stage <= 1; stage++) {
        groups_arg a = { .stage = stage, .extra = PTDP_GROUP_TP };
        harness_launch_ok(4, declared_groups_device, &a, NULL, NULL);
    }
}
END_TEST

/* A group the model never asked the mesh for (ops->groups) cannot be
 * summed over: said at set-up (ZeRO's init), with the parameter's name, by
 * every device before any collective — not skipped, and not found in the
 * middle of a step while other devices still sum their buckets. */
TEST(model_tests, test_a_group_not_built_is_an_error)
{
    groups_arg a = { .stage = 0, .extra = PTDP_GROUP_EMB };
    ptdp_launch_result r;
    ck_assert_int_eq(harness_launch(4, declared_groups_device, &a, NULL, &r), PTDP_EINVAL);
    ASSERT_HAS(r.message, "blocks.0.fc2.bias");
    ASSERT_HAS(r.message, "no part in");
    ptdp_launch_result_free(&r);
}
END_TEST

/* ------------------------------------------------------------ sampling */

/* The MLP has no ops->sampling: generation refuses it by its title, naming
 * the models that can be sampled, before any forward. */
static int sample_mlp_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_mesh mesh;
    ptdp_model m;
    DEVICE_TRY(harness_model_on_mesh(dev, &CFG, 1, 1, 1, 3, &mesh, &m));
    int64_t ids[4] = { 1 };
    int rc = ptdp_sample_generate(dev, &m, ids, 1, 3, &(ptdp_sample_opts){ 0 });
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return rc;
}

TEST(model_tests, test_a_model_without_sampling_is_refused)
{
    ck_assert(!ptdp_model_can_sample(&ptdp_mlp_ops));
    char names[128];
    ptdp_sample_models(names, sizeof names, ", ");
    ASSERT_HAS(names, "gpt");
    HARNESS_LAUNCH_FAILS(1, sample_mlp_device, NULL, PTDP_EINVAL, "the MLP cannot be sampled", names);
}
END_TEST

int main(void)
{
    return harness_main("model");
}
