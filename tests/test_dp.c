/*
 * test_dp.c — why data parallelism scales the loss gradient by 1/B and sums.
 *
 * Three DP ranks share a global batch of 10 samples: shards of 4, 3 and 3,
 * each cut into 2 micro-batches (2+2, 2+1, 2+1).  Scaling every sample's
 * loss gradient by 1/B and summing across micro-batches and ranks gives the
 * single-device gradient of the mean loss.  Averaging per micro-batch, then
 * over micro-batches, then over ranks weighs a sample of a 1-sample
 * micro-batch twice as much as one of a 2-sample micro-batch: wrong.
 */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "ptdp/mlp_data.h"
#include "ptdp/device.h"
#include "ptdp/dp.h"
#include "ptdp/mesh.h"
#include "ptdp/model.h"
#include "ptdp/models.h"
#include "ptdp/optim.h"
#include "ptdp/launch.h"
#include "ptdp/comm.h"
#include "ptdp/mlp.h"

static const harness_tcase dp_tests = { .name = "dp", .timeout_s = 60 };

HARNESS_MODEL_CONFIG(cfg_of, PTDP_MLP_CONFIG( .d_in = 6, .hidden = 8, .ffn = 16, .layers = 2, .classes = 5 ))
#define CFG (*cfg_of())
enum { B = 10, M = 2, MAXP = 4096 };

typedef struct {
    bool average_of_averages;   /* the pitfall */
    int micro_batches;
    ptdp_real grad[MAXP];
    size_t numel;
} dp_arg;

static int dp_device(ptdp_device *dev, void *arg)
{
    dp_arg *a = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    ptdp_mlp_data data;
    ptdp_ddp ddp;
    int n = dev->world_size;
    DEVICE_TRY(harness_model_on_mesh(dev, &CFG, n, 1, 1, 7, &mesh, &m));
    DEVICE_TRY(ptdp_mlp_data_init(dev, &data, 7, ptdp_mlp(&CFG)->d_in, ptdp_mlp(&CFG)->classes));
    DEVICE_TRY(ptdp_ddp_init(&ddp, &m, 0.001));
    DEVICE_CHECK(dev, m.numel <= MAXP, "%zu parameters, room for %d", m.numel, MAXP);

    size_t shard_off, shard_len;
    ptdp_share(B, n, mesh.dp_rank, &shard_off, &shard_len);
    for (int k = 0; k < a->micro_batches; k++) {
        size_t off, len;
        ptdp_share(shard_len, a->micro_batches, k, &off, &len);
        ptdp_tensor x;
        int64_t y[B];
        DEVICE_TRY(ptdp_tensor_alloc(dev, &x, "x", PTDP_MEM_OTHER, (int)len, ptdp_mlp(&CFG)->d_in));
        ptdp_mlp_data_batch(&data, (int64_t)(shard_off + off), (int)len, x, y);
        ptdp_acts acts;
        DEVICE_TRY(ptdp_model_forward(dev, &m, &acts, &(ptdp_batch){ .first = (int64_t)(shard_off + off), .rows = x.rows, .x = x, .labels = y }, x, 0, false, NULL));
        /* right: 1/B for every sample; wrong: the micro-batch's own mean */
        double scale = a->average_of_averages ? 1.0 / (double)len : 1.0 / B;
        DEVICE_TRY(ptdp_model_backward(dev, &m, &acts, NULL, scale, NULL));
        ptdp_tensor_free(dev, &x);
    }
    if (a->average_of_averages) {
        ptdp_scale(m.flat_g, m.numel, 1.0 / a->micro_batches);       /* mean over micro-batches */
        DEVICE_TRY(ptdp_all_reduce(mesh.dp_comm, m.flat_g, m.flat_g, m.numel, PTDP_REAL, PTDP_AVG));
    } else {
        DEVICE_TRY(ptdp_ddp_all_reduce(mesh.dp_comm, &ddp, &m));
    }
    if (mesh.dp_rank == 0) {
        memcpy(a->grad, m.flat_g, m.numel * sizeof(ptdp_real));
        a->numel = m.numel;
    }
    ptdp_ddp_free(&ddp);
    ptdp_mlp_data_free(dev, &data);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return 0;
}

static double max_rel_diff(const dp_arg *a, const dp_arg *b)
{
    double d = 0, mx = 0;
    for (size_t k = 0; k < b->numel; k++) {
        d = fmax(d, fabs((double)a->grad[k] - (double)b->grad[k]));
        mx = fmax(mx, fabs((double)b->grad[k]));
    }
    return d / fmax(mx, 1e-30);
}

TEST(dp_tests, test_sum_of_1_over_B_equals_the_full_batch_on_unequal_shards)
{
    static dp_arg base, right, wrong;
    base = (dp_arg){ .micro_batches = 1 };
    right = (dp_arg){ .micro_batches = M };
    wrong = (dp_arg){ .micro_batches = M, .average_of_averages = true };
    harness_launch_ok(1, dp_device, &base, NULL, NULL);
    harness_launch_ok(3, dp_device, &right, NULL, NULL);
    harness_launch_ok(3, dp_device, &wrong, NULL, NULL);
    ck_assert_uint_eq(base.numel, right.numel);
    double ok = max_rel_diff(&right, &base), bad = max_rel_diff(&wrong, &base);
    ck_assert_msg(ok <= 10 * PTDP_TOLERANCE, "1/B + sum differs from the baseline by %g", ok);
    /* The pitfall is not a rounding error: it is several percent. */
    ck_assert_msg(bad > 1e-2, "average of averages unexpectedly matched (%g)", bad);
}
END_TEST

TEST(dp_tests, test_buckets_follow_the_backward_order)
{
    /* The flat buffer begins with the output layer and ends with the input
     * layer; buckets tile it without gaps, each at parameter boundaries. */
    static dp_arg unused;
    (void)unused;
    ptdp_model m = { 0 };
    ptdp_param params[3] = { 0 };
    size_t sizes[3] = { 100, 300, 50 }, off = 0;
    for (int i = 0; i < 3; i++) {
        params[i].offset = off;
        params[i].g = (ptdp_tensor){ .rows = 1, .cols = (int)sizes[i], .stride = (int)sizes[i] };
        off += sizes[i];
    }
    m.params = params;
    m.nparams = 3;
    m.numel = off;
    ptdp_ddp d;
    /* a bucket of 350 elements' worth */
    ck_assert_int_eq(ptdp_ddp_init(&d, &m, 350.0 * sizeof(ptdp_real) / (1024 * 1024)), 0);
    ck_assert_int_eq(d.nbuckets, 2);
    ck_assert_uint_eq(d.buckets[0].begin, 0);
    ck_assert_uint_eq(d.buckets[0].end, 100);
    ck_assert_uint_eq(d.buckets[1].begin, 100);
    ck_assert_uint_eq(d.buckets[1].end, 450);
    ptdp_ddp_free(&d);
}
END_TEST

int main(void)
{
    return harness_main("dp");
}
