/*
 * test_zero.c — ZeRO stages 1 and 2: the ranges, the memory, the bytes,
 * the numbers and the checkpoints.
 *
 *   ranges      shards tile the flat buffer (ZeRO-1: shard k of every DP
 *               bucket on rank k); the norm's ranges count every
 *               element of the whole model exactly once (TP-replicated
 *               parameters on tp rank 0 only); stage 2 accumulates
 *               reduce-scattered micro-batches into the shard
 *   table       one row a stage (zero_stages.c): each shards one state
 *               more, its hooks and gathers match, its price is the
 *               formula's (2, 2, M+1, 3M passes; the paper's bytes)
 *   norm        one rule over the declared groups: an expert's squares
 *               over the EP group under plain DP, everything over DP
 *               under ZeRO — each element of the whole model once
 *   memory      arena peaks per category, exactly: optimizer state 2 len_r
 *               (len_r from ptdp_share; ZeRO-1: of every DP bucket, so
 *               Ψ/N within an element a bucket), stage 2 gradients len_r,
 *               its bucket (comm) the full buffer
 *   bytes       summed over the DP group, per step: plain DP's all-reduce =
 *               2(N-1) S = ZeRO-1's reduce-scatter + all-gather = ZeRO-2's
 *               with M = 1; ZeRO-2 with M micro-batches (M+1)(N-1) S
 *   numbers     both stages equal the baseline (clipping and SGD momentum,
 *               so a wrong norm or a wrong shard shows), with the same
 *               gradient norm every step; replicas stay bit-identical
 *   checkpoints full tensors: a zero-1 checkpoint holds the optimizer state
 *               of zero 0, and loads into zero 0 / zero 2 and back, and into
 *               zero 1 --overlap on another mesh (other ranges)
 */
#include <math.h>

#include "equivalence/equiv.h"
#include "model_size.h"
#include "plan_vs_train.h"
#include "ptdp/device.h"
#include "ptdp/mesh.h"
#include "ptdp/model.h"
#include "ptdp/models.h"
#include "ptdp/zero.h"
#include "ptdp/launch.h"
#include "ptdp/comm.h"
#include "ptdp/mlp.h"
#include "ptdp/gpt.h"
#include "ptdp/plan.h"

static const harness_tcase zero_tests = { .name = "zero", .timeout_s = 120 };

/* Run cfg and keep the launch result (per-device memory, bytes, clocks). */
static void run_with_result(const ptdp_train_config *cfg, ptdp_launch_result *lr, ptdp_train_result *res)
{
    equiv_train(cfg, &(ptdp_launch_opts){ .result = lr }, NULL, res);
}

/* ------------------------------------------------------------ the ranges */

typedef struct {
    int dp, tp, pp;
    double bucket_mb;        /* 0: ptdp_zero_init (one bucket); else ZeRO-1 cut by DP's buckets */
    double counted;          /* all-reduced over the world: elements the norm counts */
    int buckets;             /* DP buckets of device 0's stage */
} ranges_arg;

HARNESS_MODEL_CONFIG(small_of, PTDP_MLP_CONFIG( .d_in = 5, .hidden = 6, .ffn = 8, .layers = 3, .classes = 4 ))
#define SMALL (*small_of())

static int ranges_device(ptdp_device *dev, void *arg)
{
    ranges_arg *a = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    ptdp_zero z;
    int rc = ptdp_mesh_init(dev, a->dp, a->tp, a->pp, &mesh);
    if (rc == 0)
        rc = ptdp_model_init(dev, &m, &SMALL, &mesh, NULL, 3, 0.0);
    if (rc == 0)
        rc = ptdp_zero_init_buckets(dev, &z, &m, 1, a->bucket_mb);
    if (rc != 0)
        return rc;
    size_t off, len;
    if (a->bucket_mb == 0) {   /* one bucket: the whole buffer, one shard */
        ptdp_share(m.numel, a->dp, mesh.dp_rank, &off, &len);
        DEVICE_CHECK(dev, z.off == off && z.len == len && z.nranges == (len > 0),
                     "dp=%d tp=%d pp=%d: the chunk is not ptdp_share(numel, dp, dp rank)", a->dp, a->tp, a->pp);
    }
    /* per bucket: my range is ptdp_share(|bucket|, dp, dp rank) of it, what
     * its in-place reduce-scatter leaves me; the state packed in order */
    int p = 0;
    size_t at = 0;
    for (int b = 0; b < z.buckets.nbuckets; b++) {
        const ptdp_bucket *bk = &z.buckets.buckets[b];
        ptdp_share(bk->end - bk->begin, a->dp, mesh.dp_rank, &off, &len);
        if (len == 0)
            continue;
        DEVICE_CHECK(dev, p < z.nranges && z.ranges[p].begin == bk->begin + off && z.ranges[p].end == bk->begin + off + len &&
                     z.ranges[p].at == at, "dp=%d tp=%d pp=%d bucket-mb %g: piece %d is not my chunk of bucket %d",
                     a->dp, a->tp, a->pp, a->bucket_mb, p, b);
        p++;
        at += len;
    }
    DEVICE_CHECK(dev, p == z.nranges && at == z.len, "dp=%d tp=%d pp=%d bucket-mb %g: %d pieces of %zu elements, "
                 "the buckets give %d of %zu", a->dp, a->tp, a->pp, a->bucket_mb, z.nranges, z.len, p, at);
    /* within one element per bucket of numel / dp (ptdp_share's remainders) */
    DEVICE_CHECK(dev, fabs((double)z.len - (double)m.numel / a->dp) < z.buckets.nbuckets + 1e-9,
                 "dp=%d: %zu elements owned of %zu in %d buckets", a->dp, z.len, m.numel, z.buckets.nbuckets);
    double mine = 0;
    for (int r = 0; r < z.nnorm; r++) {
        size_t b, e, at;
        DEVICE_CHECK(dev, z.norm[r].begin < z.norm[r].end, "dp=%d tp=%d pp=%d: range %d is empty", a->dp, a->tp,
                     a->pp, r);
        /* inside my ranges, in flat and shard order alike (a range may span
         * adjacent ranges: with dp 1 each range is a whole bucket) */
        for (size_t x = z.norm[r].begin; x < z.norm[r].end; x = e)
            DEVICE_CHECK(dev, ptdp_zero_owned(&z, x, z.norm[r].end, &b, &e, &at) && b == x &&
                         at == z.norm[r].at + (x - z.norm[r].begin),
                         "dp=%d tp=%d pp=%d: range %d lies outside my pieces", a->dp, a->tp, a->pp, r);
        DEVICE_CHECK(dev, r == 0 || z.norm[r].begin > z.norm[r - 1].end,
                     "dp=%d tp=%d pp=%d: ranges not sorted, disjoint and merged", a->dp, a->tp, a->pp);
        mine += (double)(z.norm[r].end - z.norm[r].begin);
    }
    rc = ptdp_all_reduce(dev->world, &mine, &mine, 1, PTDP_F64, PTDP_SUM);
    double owned = (double)z.len, numel = (double)m.numel;
    if (rc == 0)   /* the DP ranks' ranges tile the stage's buffer */
        rc = ptdp_all_reduce(mesh.dp_comm, &owned, &owned, 1, PTDP_F64, PTDP_SUM);
    DEVICE_CHECK(dev, rc != 0 || owned == numel, "dp=%d tp=%d pp=%d bucket-mb %g: the DP ranks own %.0f of %.0f elements",
                 a->dp, a->tp, a->pp, a->bucket_mb, owned, numel);
    if (dev->rank == 0) {
        a->counted = mine;
        a->buckets = z.buckets.nbuckets;
    }
    ptdp_zero_free(dev, &z, &m);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return rc;
}

TEST(zero_tests, test_norm_ranges_count_every_element_once)
{
    /* dp 3 cuts shards through parameters; tp 2 replicates in.* and fc2.bias */
    static const int shapes[][3] = { { 3, 1, 1 }, { 3, 2, 1 }, { 2, 2, 3 }, { 5, 1, 2 }, { 1, 4, 1 } };
    /* one bucket (ptdp_zero_init), and ZeRO-1 as ptdp_train cuts it: by DP
     * buckets of 40 bytes (every parameter its own bucket here) and 200 */
    static const double bucket_mb[] = { 0, 40.0 / (1 << 20), 200.0 / (1 << 20) };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        for (size_t k = 0; k < sizeof bucket_mb / sizeof bucket_mb[0]; k++) {
            ranges_arg a = { .dp = shapes[i][0], .tp = shapes[i][1], .pp = shapes[i][2], .bucket_mb = bucket_mb[k] };
            harness_launch_ok(a.dp * a.tp * a.pp, ranges_device, &a, NULL, NULL);
            ck_assert_msg(a.counted == (double)model_size_total(&SMALL),
                          "dp=%d tp=%d pp=%d bucket-mb %g: the norm counts %.0f elements, the model has %zu", a.dp,
                          a.tp, a.pp, a.bucket_mb, a.counted, model_size_total(&SMALL));
            ck_assert_msg(k == 0 ? a.buckets == 1 : a.buckets > 1, "bucket-mb %g: %d buckets", a.bucket_mb, a.buckets);
        }
    }
}
END_TEST

/* ------------------------------------------------------------- the table */

TEST(zero_tests, test_the_table_has_one_row_a_stage_and_its_price)
{
    ck_assert(ptdp_zero_stage_of(-1) == NULL && ptdp_zero_stage_of(4) == NULL);
    for (int k = 0; k <= 3; k++) {
        const ptdp_zero_stage *r = ptdp_zero_stage_of(k);
        ck_assert(r != NULL && r->stage == k && r->own != NULL && r->sum != NULL);
        /* each stage shards what the one before it did, and one state more */
        ck_assert_int_eq(r->shards_optim + r->shards_grads + r->shards_params, k);
        ck_assert(!r->shards_params || r->shards_grads);
        ck_assert(!r->shards_grads || r->shards_optim);
        /* a row that keeps the parameters whole after a sharded update gathers them */
        ck_assert((r->gather != NULL) == (r->shards_optim && !r->shards_params));
        /* hooks around a backward come in pairs, with a bucket to hand out */
        ck_assert((r->backward_begin != NULL) == (r->backward_end != NULL));
        ck_assert((r->backward_begin != NULL) == r->grad_bucket);
        ck_assert(r->buckets == (r->path <= PTDP_ZERO_PATH_REDUCE_SCATTER));
    }
    /* the passes of (N-1)/N S a step: 2, 2, M + 1, 3M */
    for (int M = 1; M <= 4; M++) {
        ck_assert_int_eq(ptdp_zero_dp_passes(ptdp_zero_stage_of(0), M), 2);
        ck_assert_int_eq(ptdp_zero_dp_passes(ptdp_zero_stage_of(1), M), 2);
        ck_assert_int_eq(ptdp_zero_dp_passes(ptdp_zero_stage_of(2), M), M + 1);
        ck_assert_int_eq(ptdp_zero_dp_passes(ptdp_zero_stage_of(3), M), 3 * M);
        ck_assert(ptdp_zero3_dp_bytes_per_step(1000, 4, M, true) == ptdp_zero_dp_bytes_per_step(3, 1000, 4, M));
    }
    /* a split backward (B, W) reduce-scatters stage 2's bucket twice */
    for (int k = 0; k <= 3; k++)
        ck_assert_int_eq(ptdp_zero_backwards(ptdp_zero_stage_of(k), 3, true), k == 2 ? 6 : 3);
    /* bytes a parameter: float AdamW 4 + 4 + 8, bf16 2 + 2 + 12; SGD without momentum keeps nothing */
    const double R = sizeof(ptdp_real);
    ptdp_zero_sizes f = ptdp_zero_sizes_of(false, 2), h = ptdp_zero_sizes_of(true, 2), s = ptdp_zero_sizes_of(false, 0);
    ck_assert(f.bw == R && f.bg == R && f.bo == 2 * R && s.bo == 0);
    ck_assert(h.bw == 2 && h.bg == 2 && h.bo == 3 * R);
    /* what a device holds with the paper's share psi / N is the paper's formula */
    const double psi = 1 << 20;
    for (int k = 0; k <= 3; k++) {
        ptdp_zero_bytes a = ptdp_zero_state_bytes(k, psi, 8, 2, 2, 12);
        ptdp_zero_bytes b = ptdp_zero_device_states(ptdp_zero_stage_of(k), psi, psi / 8, (ptdp_zero_sizes){ 2, 2, 12 });
        ck_assert_msg(a.params == b.params && a.grads == b.grads && a.optim == b.optim, "stage %d", k);
    }
}
END_TEST

/* The planner prices a layout's model states itself (plan_memory.c); the
 * row's price gives its numbers from what a device holds: numel elements,
 * ceil(numel / N) of them per sharded state for stages 1 and 2, the
 * planner's own per-unit share for stage 3 (whose gathered units it adds
 * on top), float AdamW. */
TEST(zero_tests, test_the_price_gives_the_planners_model_states)
{
    ptdp_plan_request rq = ptdp_plan_request_defaults();
    rq.model = gpt_of((gpt_shape){ .layers = 8, .hidden = 256, .ffn = 1024,
                                   .heads = 8, .seq_len = 128, .vocab = 1000 }, 0);
    rq.batch = 32;
    rq.gpus = 8;
    ptdp_plan_layout l = { .dp = 4, .tp = 2, .pp = 1, .cp = 1, .micro_batch_size = 1, .micro_batches = 8,
                           .virtual_stages = 1 };
    l.schedule = ptdp_schedule_find("1f1b");
    const ptdp_zero_sizes b = ptdp_zero_sizes_of(false, 2);
    for (int z = 0; z <= 3; z++) {
        const ptdp_zero_stage *row = ptdp_zero_stage_of(z);
        char msg[PTDP_MSG_MAX];
        ptdp_plan_memory m;
        l.zero = z;
        ck_assert_msg(ptdp_plan_layout_check(&rq, &l, msg, sizeof msg) == 0, "%s", msg);
        ck_assert_int_eq(ptdp_plan_memory_of(&rq, &l, &m), 0);
        const double share = z == 3 ? m.optim / b.bo : z > 0 ? ceil(m.psi / l.dp) : m.psi;
        const ptdp_zero_bytes want = ptdp_zero_device_states(row, m.psi, share, b);
        ck_assert_msg(m.params - m.params_units == want.params && m.optim == want.optim &&
                      (row->shards_params ? m.grads > want.grads : m.grads == want.grads),
                      "zero %d: the planner's %.0f %.0f %.0f, the row's %.0f %.0f %.0f", z, m.params - m.params_units,
                      m.grads, m.optim, want.params, want.grads, want.optim);
        ck_assert(!row->grad_bucket || m.comm >= m.psi * b.bg);   /* ZeRO-2's bucket, during a backward */
    }
}
END_TEST

/* -------------------------------------------------- the norm's groups */

/* dp 2 split into ep 2 (an expert-DP group of one), a weight declared an
 * expert's, as gpt_moe.c declares its experts' under --ep: each EP rank
 * holds other experts.  The norm's one rule (model.c), applied to element
 * counts instead of squares, must count the dense parameters once and each
 * EP rank's expert once: numel + |expert|. */
typedef struct { int stage; unsigned groups; int terms, params; } norm_arg;

static int norm_groups_device(ptdp_device *dev, void *arg)
{
    norm_arg *a = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    ptdp_zero z;
    DEVICE_TRY(ptdp_mesh_init(dev, 2, 1, 1, &mesh));
    mesh.ep = 2;
    DEVICE_TRY(ptdp_mesh_add_group(dev, &mesh, PTDP_GROUP_EP));
    DEVICE_TRY(ptdp_mesh_add_group(dev, &mesh, PTDP_GROUP_EDP));
    DEVICE_TRY(ptdp_model_init(dev, &m, &SMALL, &mesh, NULL, 3, 0.0));
    m.params[1].sum.replicas = PTDP_GROUP_EDP;
    DEVICE_TRY(ptdp_zero_init(dev, &z, &m, a->stage));
    double partial[PTDP_GROUP_COUNT + 1] = { 0 };
    for (int r = 0; r < z.nnorm; r++)
        partial[z.norm[r].over] += (double)(z.norm[r].end - z.norm[r].begin);
    double x = partial[PTDP_GROUP_COUNT];
    for (int g = 0; g < PTDP_GROUP_COUNT; g++)
        if (z.norm_groups & PTDP_GROUP_BIT(g)) {
            DEVICE_TRY(ptdp_all_reduce(ptdp_mesh_group(&mesh, (ptdp_group)g), &partial[g], &partial[g], 1, PTDP_F64,
                                       PTDP_SUM));
            x += partial[g];
        }
    DEVICE_CHECK(dev, x == (double)m.numel + (double)ptdp_tensor_numel(m.params[1].w),
                 "zero %d: the norm counts %.0f elements, want %zu dense and expert + the other EP rank's expert",
                 a->stage, x, m.numel);
    if (dev->rank == 0) {
        a->groups = z.norm_groups;
        a->terms = z.nnorm;
        a->params = m.nparams;
    }
    ptdp_zero_free(dev, &z, &m);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return PTDP_OK;
}

TEST(zero_tests, test_norm_sums_each_stretch_over_its_declared_group)
{
    for (int stage = 0; stage <= 2; stage++) {
        norm_arg a = { .stage = stage };
        harness_launch_ok(2, norm_groups_device, &a, NULL, NULL);
        /* whole replicas: the expert's squares over the EP group, the dense
         * ones nowhere (each replica holds them all), one term a parameter;
         * ZeRO's shards: everything over DP, neighbours joined */
        const unsigned want = stage == 0 ? PTDP_GROUP_BIT(PTDP_GROUP_EP) : PTDP_GROUP_BIT(PTDP_GROUP_DP);
        ck_assert_msg(a.groups == want, "zero %d: the norm sums over groups %#x, want %#x", stage, a.groups, want);
        ck_assert_msg(stage == 0 ? a.terms == a.params : a.terms <= 3, "zero %d: %d terms of %d parameters", stage,
                      a.terms, a.params);
    }
}
END_TEST

/* Stage 2 by hand on dp = 2: each "backward" writes (rank + 1) * (i + 1)
 * into element i; after two of them my shard holds 2 * (1 + 2) * (i + 1). */
static int bucket_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_mesh mesh;
    ptdp_model m;
    ptdp_zero z;
    DEVICE_TRY(harness_model_on_mesh(dev, &SMALL, 2, 1, 1, 3, &mesh, &m));
    DEVICE_TRY(ptdp_zero_init(dev, &z, &m, 2));
    DEVICE_CHECK(dev, m.flat_g == NULL && m.params[0].g.data == NULL,
                 "stage 2 kept the full gradient buffer between backwards");
    for (int mb = 0; mb < 2; mb++) {
        DEVICE_TRY(ptdp_zero_backward_begin(dev, &z, &m));
        DEVICE_CHECK(dev, m.flat_g != NULL && m.params[1].g.data == m.flat_g + m.params[1].offset,
                     "the bucket is not where the gradient views point");
        for (size_t i = 0; i < m.numel; i++)
            m.flat_g[i] += (ptdp_real)((dev->rank + 1) * (double)(i + 1));
        DEVICE_TRY(ptdp_zero_backward_end(dev, &z, &m));
        DEVICE_CHECK(dev, m.flat_g == NULL, "the bucket outlived its reduce-scatter");
    }
    void *gv = NULL;
    DEVICE_TRY(ptdp_zero_reduce_gradients(&z, &m, &gv));
    const ptdp_real *g = gv, *shard = z.grad_shard;   /* a float store */
    for (size_t k = 0; k < z.len; k++)
        DEVICE_CHECK(dev, g[k] == (ptdp_real)(6.0 * (double)(z.off + k + 1)),
                     "the shard is not the sum over ranks and micro-batches: element %zu is %g", z.off + k,
                     (double)g[k]);
    ptdp_zero_clear_gradients(&z, &m);
    for (size_t k = 0; k < z.len; k++)
        DEVICE_CHECK(dev, shard[k] == 0, "clear left a gradient behind at %zu", z.off + k);
    ptdp_zero_free(dev, &z, &m);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return 0;
}

TEST(zero_tests, test_stage2_accumulates_reduce_scattered_micro_batches)
{
    harness_launch_ok(2, bucket_device, NULL, NULL, NULL);
}
END_TEST

TEST(zero_tests, test_validate_rejects_unknown_stages)
{
    char msg[256];
    ptdp_train_config c = equiv_config(2, 1, 1, 1);
    c.zero = 4;
    const char *said = equiv_refused(&c, "--zero 4");
    ASSERT_HAS(said, "0 (off), 1");
    ASSERT_HAS(said, "3 (+ parameters)");
    c.zero = -1;
    ck_assert_int_eq(ptdp_train_validate(&c, msg, sizeof msg), PTDP_EINVAL);
    c.zero = 2;
    ck_assert_int_eq(ptdp_train_validate(&c, msg, sizeof msg), 0);
    c.zero = 3;   /* stage 3 exists (test_zero3.c) */
    ck_assert_int_eq(ptdp_train_validate(&c, msg, sizeof msg), 0);
}
END_TEST

/* ------------------------------------------------------------ the memory */

/* What each device owns under ZeRO-1 as ptdp_train cuts it (by c's DP
 * buckets): ptdp_share of every bucket, so Ψ/N within an element a bucket. */
typedef struct { const ptdp_train_config *c; size_t len[PTDP_MAX_DEVICES]; } owned_arg;

static int owned_device(ptdp_device *dev, void *arg)
{
    owned_arg *a = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    ptdp_zero z;
    int rc = ptdp_mesh_init(dev, a->c->dp, a->c->tp, a->c->pp, &mesh);
    if (rc == 0)
        rc = ptdp_model_init(dev, &m, &a->c->model, &mesh, a->c->stage_layers, a->c->seed, 0.0);
    if (rc == 0)
        rc = ptdp_zero_init_buckets(dev, &z, &m, 1, a->c->bucket_mb);
    if (rc != 0)
        return rc;
    a->len[dev->rank] = z.len;
    ptdp_zero_free(dev, &z, &m);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return PTDP_OK;
}

LOOP_TEST(zero_tests, test_memory_per_category_is_exact, 9)
{
    /* dp 4 (shards may be equal) and dp 3 (they are not: the first numel % 3 are longer) */
    static const int shapes[][3] = { { 4, 1, 1 }, { 3, 1, 1 }, { 2, 2, 2 } };
    const int *s = shapes[_i / 3];
    int stage = _i % 3;
    ptdp_train_config c = equiv_config(s[0], s[1], s[2], 4);
    c.zero = stage;
    c.steps = 2;
    ptdp_launch_result lr;
    ptdp_train_result res;
    run_with_result(&c, &lr, &res);
    owned_arg own = { .c = &c };
    harness_launch_ok(c.dp * c.tp * c.pp, owned_device, &own, NULL, NULL);
    const size_t R = sizeof(ptdp_real);
    for (int r = 0; r < lr.world_size; r++) {
        int d, t, p;
        ptdp_mesh_coords(c.dp, c.tp, c.pp, r, &d, &t, &p);
        size_t P = model_size_stage(&c, p), off, len;
        ptdp_share(P, c.dp, d, &off, &len);
        if (stage == 1)   /* shard d of every DP bucket (zero.h): what the rank really owns */
            len = own.len[r];
        const ptdp_mem_stats *m = &lr.devices[r].mem;
        size_t want_optim = 2 * (stage == 0 ? P : len) * R;
        size_t want_grads = (stage == 2 ? len : P) * R;
        size_t want_comm = stage == 2 ? P * R : 0;
        ck_assert_msg(m->peak[PTDP_MEM_PARAMS] == P * R, "zero %d device %d: params %zu, want %zu", stage, r,
                      m->peak[PTDP_MEM_PARAMS], P * R);
        ck_assert_msg(m->peak[PTDP_MEM_OPTIM] == want_optim, "zero %d device %d: optim %zu, want 2 x %zu elements",
                      stage, r, m->peak[PTDP_MEM_OPTIM], want_optim / R / 2);
        ck_assert_msg(m->peak[PTDP_MEM_GRADS] == want_grads, "zero %d device %d: grads %zu, want %zu", stage, r,
                      m->peak[PTDP_MEM_GRADS], want_grads);
        ck_assert_msg(m->peak[PTDP_MEM_COMM] == want_comm, "zero %d device %d: comm %zu, want %zu", stage, r,
                      m->peak[PTDP_MEM_COMM], want_comm);
        if (stage == 2 && c.dp > 1)   /* the point: a strict saving, about 1/dp */
            ck_assert(len < P && len * c.dp >= P && (len - 1) * c.dp < P);
        if (stage == 1 && c.dp > 1)   /* about 1/dp: within an element per bucket (ZeRO-1 by buckets) */
            ck_assert_msg(len < P && fabs((double)len - (double)P / c.dp) < (double)P * sizeof(ptdp_real) /
                          (c.bucket_mb * 1024 * 1024) + 2, "zero 1 device %d: %zu of %zu elements", r, len, P);
    }
    ptdp_launch_result_free(&lr);
    ptdp_train_result_free(&res);
}
END_TEST

/* ------------------------------------------------------------- the bytes */

/* Summed over the devices: bytes sent by reduce-scatters and all-gathers,
 * and by all-reduces. */
static void coll_bytes(const ptdp_launch_result *lr, double *rs_ag, double *ar)
{
    *rs_ag = *ar = 0;
    for (int r = 0; r < lr->world_size; r++) {
        const ptdp_comm_stats *s = &lr->devices[r].comm;
        *rs_ag += s->bytes_sent[PTDP_COLL_REDUCE_SCATTER] + s->bytes_sent[PTDP_COLL_ALL_GATHER];
        *ar += s->bytes_sent[PTDP_COLL_ALL_REDUCE];
    }
}

TEST(zero_tests, test_bytes_zero1_equal_plain_dp_and_zero2_pays_per_micro_batch)
{
    const int N = 4, steps = 3;
    ptdp_train_config c = equiv_config(N, 1, 1, 1);
    c.steps = steps;
    double S = (double)model_size_stage(&c, 0) * sizeof(ptdp_real);
    double want = steps * 2.0 * (N - 1) * S;   /* summed over the N devices */
    ptdp_launch_result lr;
    ptdp_train_result res;
    double rs_ag, ar;

    run_with_result(&c, &lr, &res);            /* plain DP: all-reduce only */
    coll_bytes(&lr, &rs_ag, &ar);
    ck_assert_msg(ar == want && rs_ag == 0, "plain DP: all-reduce %.0f bytes, want 2(N-1) S x steps = %.0f", ar, want);
    ptdp_launch_result_free(&lr);
    ptdp_train_result_free(&res);

    for (int stage = 1; stage <= 2; stage++) {
        for (int M = 1; M <= 4; M *= 4) {
            c.zero = stage;
            c.micro_batches = M;
            run_with_result(&c, &lr, &res);
            coll_bytes(&lr, &rs_ag, &ar);
            double expect = stage == 2 ? steps * (double)(M + 1) * (N - 1) * S : want;
            ck_assert_msg(rs_ag == expect, "zero %d, M %d: reduce-scatter + all-gather %.0f bytes, want %.0f",
                          stage, M, rs_ag, expect);
            /* the one all-reduce left: the norm's partial sums, one double */
            ck_assert_msg(ar == steps * 2.0 * (N - 1) * sizeof(double), "zero %d: all-reduce %.0f bytes", stage, ar);
            /* and the DP group's mean per device is the helper's formula */
            double dp_sent = 0;
            for (int r = 0; r < N; r++) {
                int g = harness_group_index(&lr.devices[r].comm, "dp");
                ck_assert_int_ge(g, 0);
                dp_sent += lr.devices[r].comm.group[g].sent;
            }
            double formula = ptdp_zero_dp_bytes_per_step(stage, model_size_stage(&c, 0), N, M);
            ck_assert(fabs(dp_sent / N / steps - 2.0 * (N - 1) / N * sizeof(double) - formula) <= 1e-9 * formula);
            ptdp_launch_result_free(&lr);
            ptdp_train_result_free(&res);
        }
    }
    /* the trade, printed as the CLI prints it */
    ck_assert(ptdp_zero_dp_bytes_per_step(2, 1000, 4, 4) == 2.5 * ptdp_zero_dp_bytes_per_step(1, 1000, 4, 4));
    ck_assert(ptdp_zero_dp_bytes_per_step(2, 1000, 4, 1) == ptdp_zero_dp_bytes_per_step(0, 1000, 4, 1));
}
END_TEST

/* ----------------------------------------------------------- the numbers */

LOOP_TEST(zero_tests, test_zero_equals_baseline_with_clipping, 14)
{
    static const int shapes[][4] = {   /* dp, tp, pp, M */
        { 2, 1, 1, 1 }, { 3, 1, 1, 4 }, { 4, 1, 1, 2 }, { 2, 2, 1, 4 }, { 2, 1, 2, 4 }, { 2, 2, 2, 2 }, { 3, 2, 1, 1 },
    };
    const int *s = shapes[_i / 2];
    ptdp_train_config c = equiv_config(s[0], s[1], s[2], s[3]);
    c.zero = 1 + _i % 2;
    /* SGD with momentum follows the clipped gradient's scale (AdamW would
     * mostly cancel it), so a norm that counted an element twice or missed
     * one changes the result; the clip is below every step's norm. */
    c.optimizer = PTDP_OPT_SGD;
    c.momentum = 0.9;
    c.weight_decay = 0.01;
    c.lr = 0.5;
    c.clip_grad = 0.05;
    c.verify_replicas = true;   /* the all-gather leaves the replicas bit-identical */
    equiv_check(&c);   /* losses, gradient norms, parameters */
}
END_TEST

LOOP_TEST(zero_tests, test_zero_adamw_gpipe_and_recompute, 2)
{
    ptdp_train_config c = equiv_config(2, 2, 2, 4);
    c.zero = 1 + _i;
    c.schedule = ptdp_schedule_find("gpipe");
    c.recompute = true;
    c.weight_decay = 0.1;
    equiv_check(&c);   /* losses, gradient norms, parameters */
}
END_TEST

/* ------------------------------------------------------- the checkpoints */

TEST(zero_tests, test_checkpoints_are_full_tensors_across_stages)
{
    /* dp 3 x tp 2: shards cut through parameters and through TP shards */
    ptdp_train_config c = equiv_config(3, 2, 1, 2);
    c.steps = 3;
    ptdp_state plain, z1, z2, resumed, reference;
    c.zero = 0;
    equiv_train(&c, NULL, &plain, NULL);
    c.zero = 1;
    equiv_train(&c, NULL, &z1, NULL);
    c.zero = 2;
    equiv_train(&c, NULL, &z2, NULL);
    /* every tensor, the optimizer state included */
    equiv_states_agree(&z1, &plain, PTDP_TOLERANCE, "zero-1 vs zero-0 checkpoint");
    equiv_states_agree(&z2, &plain, PTDP_TOLERANCE, "zero-2 vs zero-0 checkpoint");

    /* a zero-1 checkpoint, through a file, continues as zero 0 on another
     * mesh — and a zero-0 one as zero 2 — like six steps without stopping */
    ptdp_train_config full = c;
    full.zero = 0;
    full.steps = 6;
    equiv_train(&full, NULL, &reference, NULL);
    ptdp_train_result log;
    ptdp_train_config first = c, rest = equiv_config(2, 1, 2, 2);
    first.zero = 1;
    rest.steps = 3;
    equiv_resume(&first, &rest, &resumed, &log);
    equiv_states_agree(&resumed, &reference, PTDP_TOLERANCE, "zero 1 -> zero 0");
    ptdp_state_free(&resumed);
    ptdp_train_result_free(&log);

    first.zero = 0;
    rest = equiv_config(4, 2, 1, 1);
    rest.steps = 3;
    rest.zero = 2;
    equiv_resume(&first, &rest, &resumed, &log);
    equiv_states_agree(&resumed, &reference, PTDP_TOLERANCE, "zero 0 -> zero 2");
    ptdp_state_free(&resumed);
    ptdp_train_result_free(&log);

    /* ZeRO-1 to ZeRO-1 on another mesh, with --overlap: the ranges (shard
     * k of every DP bucket) are cut otherwise on dp 2 x pp 2 than on dp 3 x
     * tp 2, and each rank reads its own from the full tensors */
    first.zero = 1;
    rest = equiv_config(2, 1, 2, 2);
    rest.steps = 3;
    rest.zero = 1;
    rest.overlap = true;
    equiv_resume(&first, &rest, &resumed, &log);
    equiv_states_agree(&resumed, &reference, PTDP_TOLERANCE, "zero 1 -> zero 1 --overlap on another mesh");
    ptdp_train_result_free(&log);

    ptdp_state_free(&plain);
    ptdp_state_free(&z1);
    ptdp_state_free(&z2);
    ptdp_state_free(&resumed);
    ptdp_state_free(&reference);
}
END_TEST

int main(void)
{
    return harness_main("zero");
}
