/*
 * test_tp.c — tensor parallelism piece by piece, against the dense computation.
 *
 * Megatron-LM tests its mappings by giving every rank an input made from its
 * rank and checking the result against a closed form (a sum over ranks is
 * n(n+1)/2 times the pattern; a gather puts rank k's block at columns
 * [k c, (k+1) c)).  We do the same for tp in {1, 2, 4}:
 *
 *   the four conjugate operators       f, g, gather, scatter; forward and backward
 *   column- and row-parallel linear    against y = x W^T + b computed densely
 *   vocab-parallel cross-entropy       against the gathered logits; no all_gather
 *   the MLP block                      one all-reduce of B x h forward, one backward,
 *                                      and the bytes 2(N-1)/N * B h * sizeof(real)
 *   replicated parameters              bit-identical on every TP rank after training
 *   dropout                            split masks = slices of the one-device mask,
 *                                      replicated masks identical across ranks
 *   gradient norm                      each parameter once (and what twice would give)
 *   parameter memory                   the split layers' bytes fall as 1/tp, exactly
 *
 * Test data are small integers wherever a product is checked, so that every
 * sum is exact in float and double alike and "equal" can mean bit-equal
 * whatever order BLAS or the all-reduce adds in.
 *
 * Devices check with DEVICE_CHECK (harness.h): the first failed expectation
 * fails its device, stops the others, and comes back through the launch
 * result with its rank and file:line.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "equivalence/equiv.h"
#include "ptdp/comm.h"
#include "ptdp/device.h"
#include "ptdp/mesh.h"
#include "ptdp/mlp.h"
#include "ptdp/mlp_data.h"
#include "ptdp/model.h"
#include "ptdp/models.h"
#include "ptdp/ops.h"
#include "ptdp/optim.h"
#include "ptdp/parallel_linear.h"
#include "ptdp/rng.h"
#include "ptdp/tp.h"

static const int TPS[] = { 1, 2, 4 };
#define NTPS 3
#define SR ((double)sizeof(ptdp_real))

/* ------------------------------------------------------------- helpers */

static int tp_mesh(ptdp_device *dev, ptdp_mesh *mesh)
{
    return ptdp_mesh_init(dev, 1, dev->world_size, 1, mesh);
}

/* Tensors of one device test, allocated (category "other") and freed as a
 * list: { &t, "name", rows, cols }. */
typedef struct {
    ptdp_tensor *t;
    const char *name;
    int rows, cols;
} tensor_spec;
#define NSPECS(specs) ((int)(sizeof(specs) / sizeof(specs)[0]))

static int make_tensors(ptdp_device *dev, const tensor_spec *specs, int n)
{
    for (int k = 0; k < n; k++)
        DEVICE_TRY(ptdp_tensor_alloc(dev, specs[k].t, specs[k].name, PTDP_MEM_OTHER, specs[k].rows, specs[k].cols));
    return 0;
}

static void free_tensors(ptdp_device *dev, const tensor_spec *specs, int n)
{
    for (int k = 0; k < n; k++)
        ptdp_tensor_free(dev, specs[k].t);
}

/* got = scale * want, element by element and exactly (small integers). */
static int expect_equal(ptdp_device *dev, const char *what, ptdp_tensor got, ptdp_tensor want, double scale)
{
    for (int i = 0; i < got.rows; i++)
        for (int j = 0; j < got.cols; j++)
            DEVICE_CHECK(dev, (double)*ptdp_at(got, i, j) == scale * (double)*ptdp_at(want, i, j),
                         "%s (%d,%d) = %g, want %g", what, i, j, (double)*ptdp_at(got, i, j),
                         scale * (double)*ptdp_at(want, i, j));
    return 0;
}

/* Communication of one device between two moments. */
typedef struct {
    unsigned long long calls[PTDP_COLL_COUNT];
    double sent[PTDP_COLL_COUNT];
    unsigned long long tp_calls;     /* in the group named "tp" */
    double tp_sent;
} traffic;

static traffic traffic_now(const ptdp_device *dev)
{
    traffic t;
    memset(&t, 0, sizeof t);
    for (int k = 0; k < PTDP_COLL_COUNT; k++) {
        t.calls[k] = dev->stats.calls[k];
        t.sent[k] = dev->stats.bytes_sent[k];
    }
    int g = harness_group_index(&dev->stats, "tp");
    if (g >= 0) {
        t.tp_calls = dev->stats.group[g].calls;
        t.tp_sent = dev->stats.group[g].sent;
    }
    return t;
}

static traffic traffic_since(const ptdp_device *dev, traffic t0)
{
    traffic t = traffic_now(dev);
    for (int k = 0; k < PTDP_COLL_COUNT; k++) {
        t.calls[k] -= t0.calls[k];
        t.sent[k] -= t0.sent[k];
    }
    t.tp_calls -= t0.tp_calls;
    t.tp_sent -= t0.tp_sent;
    return t;
}

/* Calls of every collective other than `except` (PTDP_COLL_COUNT: all). */
static unsigned long long calls_except(const traffic *t, ptdp_coll except)
{
    unsigned long long n = 0;
    for (int k = 0; k < PTDP_COLL_COUNT; k++)
        if (k != (int)except)
            n += t->calls[k];
    return n;
}

/* `what` made `calls` calls of `coll`, sending `bytes` in them, and no
 * other collective; coll = PTDP_COLL_COUNT: no communication at all. */
static int expect_traffic(ptdp_device *dev, const char *what, const traffic *d, ptdp_coll coll,
                          unsigned long long calls, double bytes)
{
    DEVICE_CHECK(dev, calls_except(d, coll) == 0, "%s made %llu calls of other collectives", what,
                 calls_except(d, coll));
    if (coll == PTDP_COLL_COUNT)
        return 0;
    DEVICE_CHECK(dev, d->calls[coll] == calls, "%s made %llu calls of %s, want %llu", what, d->calls[coll],
                 ptdp_coll_name(coll), calls);
    DEVICE_CHECK(dev, d->sent[coll] == bytes, "%s sent %g bytes, want %g", what, d->sent[coll], bytes);
    return 0;
}

/* The textbook all-reduce volume per device: 2(N-1)/N * S (0 for N = 1,
 * where the operators skip the collective altogether). */
static double all_reduce_bytes(int n, double s)
{
    return n > 1 ? 2.0 * (n - 1) / n * s : 0.0;
}

/* ------------------------------------------- f and g: the sum operators */

static const harness_tcase operator_tests = { .name = "operators", .timeout_s = 30 };

enum { OR = 3, OC = 8 };   /* rows and columns of the operator tests */

/* t(i, j) = scale * (i*OC + j + 1): rank r contributes (r+1) times the
 * pattern, so the sum over the group is n(n+1)/2 times it. */
static void fill_base(ptdp_tensor t, double scale)
{
    for (int i = 0; i < t.rows; i++)
        for (int j = 0; j < t.cols; j++)
            *ptdp_at(t, i, j) = (ptdp_real)(scale * (i * OC + j + 1));
}

/* f backward (copy to region) sums dx from every slice of the layer; g
 * forward (reduce from region) sums the partial products: both are one
 * in-place all-reduce over the TP group. */
static const struct {
    const char *name;
    int (*op)(ptdp_comm *tp, ptdp_tensor t);
} SUMS[] = {
    { "f backward", ptdp_tp_copy_to_region_backward },
    { "g forward", ptdp_tp_reduce_from_region_forward },
};

static int f_and_g_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_mesh mesh;
    DEVICE_TRY(tp_mesh(dev, &mesh));
    int n = mesh.tp, r = mesh.tp_rank;
    double bytes = all_reduce_bytes(n, OR * OC * SR);
    ptdp_tensor t, sum, wide, want_wide;
    const tensor_spec specs[] = {
        { &t, "t", OR, OC }, { &sum, "sum", OR, OC }, { &wide, "wide", OR, OC + 4 }, { &want_wide, "want", OR, OC + 4 },
    };
    DEVICE_TRY(make_tensors(dev, specs, NSPECS(specs)));
    fill_base(sum, n * (n + 1) / 2.0);

    for (size_t k = 0; k < sizeof SUMS / sizeof SUMS[0]; k++) {
        fill_base(t, r + 1);
        traffic t0 = traffic_now(dev);
        DEVICE_TRY(SUMS[k].op(mesh.tp_comm, t));
        traffic d = traffic_since(dev, t0);
        DEVICE_TRY(expect_equal(dev, SUMS[k].name, t, sum, 1));
        DEVICE_TRY(expect_traffic(dev, SUMS[k].name, &d, PTDP_COLL_ALL_REDUCE, n > 1, bytes));
        DEVICE_CHECK(dev, d.tp_sent == bytes, "%s sent %g bytes in group tp", SUMS[k].name, d.tp_sent);
    }

    /* The same on a column view (a strided tensor): only the view is summed. */
    ptdp_tensor_fill(wide, -7);
    ptdp_tensor_fill(want_wide, -7);
    fill_base(ptdp_tensor_cols(wide, 2, OC), r + 1);
    fill_base(ptdp_tensor_cols(want_wide, 2, OC), n * (n + 1) / 2.0);
    DEVICE_TRY(ptdp_tp_reduce_from_region_forward(mesh.tp_comm, ptdp_tensor_cols(wide, 2, OC)));
    DEVICE_TRY(expect_equal(dev, "g forward on a view", wide, want_wide, 1));
    free_tensors(dev, specs, NSPECS(specs));
    ptdp_mesh_free(&mesh);
    return 0;
}

LOOP_TEST(operator_tests, test_f_and_g_sum_over_ranks, NTPS)
{
    harness_launch_ok(TPS[_i], f_and_g_device, NULL, NULL, NULL);
}
END_TEST

/* ----------------------------------- gather and scatter: the concat pair */

/* Gather forward and scatter backward concatenate every rank's columns in
 * rank order (one all-gather); gather backward and scatter forward keep
 * this rank's columns of a replicated tensor (no communication). */
static const struct {
    const char *name;
    int (*op)(ptdp_device *dev, ptdp_comm *tp, ptdp_tensor local, ptdp_tensor full);
} CONCATS[] = {
    { "gather forward", ptdp_tp_gather_from_region_forward },
    { "scatter backward", ptdp_tp_scatter_to_region_backward },
};
static const struct {
    const char *name;
    void (*op)(ptdp_comm *tp, ptdp_tensor full, ptdp_tensor local);
} SPLITS[] = {
    { "gather backward", ptdp_tp_gather_from_region_backward },
    { "scatter forward", ptdp_tp_scatter_to_region_forward },
};

/* Rank k's block holds 1000 k + 10 i + j: after a concatenation, column
 * k c + j of row i must read exactly that.  A replicated tensor holds
 * 10 i + col, so rank r's columns read 10 i + r c + j. */
static int gather_scatter_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_mesh mesh;
    DEVICE_TRY(tp_mesh(dev, &mesh));
    int n = mesh.tp, r = mesh.tp_rank, c = OC / n;
    ptdp_tensor local, full, blocks, replicated;
    const tensor_spec specs[] = {
        { &local, "local", OR, c }, { &full, "full", OR, OC }, { &blocks, "blocks", OR, OC },
        { &replicated, "replicated", OR, OC },
    };
    DEVICE_TRY(make_tensors(dev, specs, NSPECS(specs)));
    for (int i = 0; i < OR; i++)
        for (int col = 0; col < OC; col++) {
            *ptdp_at(blocks, i, col) = (ptdp_real)(1000 * (col / c) + 10 * i + col % c);
            *ptdp_at(replicated, i, col) = (ptdp_real)(10 * i + col);
        }

    for (size_t k = 0; k < sizeof CONCATS / sizeof CONCATS[0]; k++) {
        ptdp_tensor_copy(local, ptdp_tensor_cols(blocks, r * c, c));
        ptdp_tensor_zero(full);
        traffic t0 = traffic_now(dev);
        DEVICE_TRY(CONCATS[k].op(dev, mesh.tp_comm, local, full));
        traffic d = traffic_since(dev, t0);
        DEVICE_TRY(expect_equal(dev, CONCATS[k].name, full, blocks, 1));
        DEVICE_TRY(expect_traffic(dev, CONCATS[k].name, &d, PTDP_COLL_ALL_GATHER, n > 1, (n - 1.0) / n * OR * OC * SR));
    }
    for (size_t k = 0; k < sizeof SPLITS / sizeof SPLITS[0]; k++) {
        ptdp_tensor_zero(local);
        traffic t0 = traffic_now(dev);
        SPLITS[k].op(mesh.tp_comm, replicated, local);
        traffic d = traffic_since(dev, t0);
        DEVICE_TRY(expect_equal(dev, SPLITS[k].name, local, ptdp_tensor_cols(replicated, r * c, c), 1));
        DEVICE_TRY(expect_traffic(dev, SPLITS[k].name, &d, PTDP_COLL_COUNT, 0, 0));
    }

    /* the gather's staging buffer went back to the arena */
    ptdp_mem_stats ms;
    ptdp_arena_stats(dev->arena, &ms);
    DEVICE_CHECK(dev, ms.current[PTDP_MEM_COMM] == 0, "%zu bytes of communication buffers left",
                 ms.current[PTDP_MEM_COMM]);
    free_tensors(dev, specs, NSPECS(specs));
    ptdp_mesh_free(&mesh);
    return 0;
}

LOOP_TEST(operator_tests, test_gather_and_scatter_concatenate_in_rank_order, NTPS)
{
    harness_launch_ok(TPS[_i], gather_scatter_device, NULL, NULL, NULL);
}
END_TEST

/* ------------------------------------------- column- and row-parallel */

/* A small integer in [-3, 3], a different pattern per `seed`. */
static ptdp_real ival(int seed, int i, int j)
{
    return (ptdp_real)((seed * 31 + i * 7 + j * 3 + (i * j) % 5) % 7 - 3);
}

static void fill_ival(ptdp_tensor t, int seed)
{
    for (int i = 0; i < t.rows; i++)
        for (int j = 0; j < t.cols; j++)
            *ptdp_at(t, i, j) = ival(seed, i, j);
}

/* The dense layer y = x W^T + b with x [B x in], W [out x in], and its
 * gradients for an output gradient dy [B x out]:
 *     dx = dy W      dW = dy^T x      db = the column sums of dy
 * all by the triple loop, on every rank: the reference a TP layer's shards
 * must be slices of.  x, W, b, dy are the patterns seed .. seed + 3. */
typedef struct {
    ptdp_tensor x, w, b, dy, y, dx, dw, db;
    tensor_spec specs[8];
} dense_linear;

static int dense_linear_init(ptdp_device *dev, dense_linear *d, int batch, int in, int out, int seed)
{
    const tensor_spec specs[8] = {
        { &d->x, "dense x", batch, in }, { &d->w, "dense W", out, in }, { &d->b, "dense b", 1, out },
        { &d->dy, "dense dy", batch, out }, { &d->y, "dense y", batch, out }, { &d->dx, "dense dx", batch, in },
        { &d->dw, "dense dW", out, in }, { &d->db, "dense db", 1, out },
    };
    memcpy(d->specs, specs, sizeof specs);
    DEVICE_TRY(make_tensors(dev, d->specs, NSPECS(specs)));
    fill_ival(d->x, seed);
    fill_ival(d->w, seed + 1);
    fill_ival(d->b, seed + 2);
    fill_ival(d->dy, seed + 3);
    for (int i = 0; i < batch; i++)
        for (int o = 0; o < out; o++) {
            double sum = *ptdp_at(d->b, 0, o);
            for (int k = 0; k < in; k++)
                sum += (double)*ptdp_at(d->x, i, k) * (double)*ptdp_at(d->w, o, k);
            *ptdp_at(d->y, i, o) = (ptdp_real)sum;
        }
    for (int i = 0; i < batch; i++)
        for (int k = 0; k < in; k++) {
            double sum = 0;
            for (int o = 0; o < out; o++)
                sum += (double)*ptdp_at(d->dy, i, o) * (double)*ptdp_at(d->w, o, k);
            *ptdp_at(d->dx, i, k) = (ptdp_real)sum;
        }
    for (int o = 0; o < out; o++) {
        double colsum = 0;
        for (int i = 0; i < batch; i++)
            colsum += *ptdp_at(d->dy, i, o);
        *ptdp_at(d->db, 0, o) = (ptdp_real)colsum;
        for (int k = 0; k < in; k++) {
            double sum = 0;
            for (int i = 0; i < batch; i++)
                sum += (double)*ptdp_at(d->dy, i, o) * (double)*ptdp_at(d->x, i, k);
            *ptdp_at(d->dw, o, k) = (ptdp_real)sum;
        }
    }
    return 0;
}

/* Column-parallel: W [LOUT x LIN], its LOUT outputs split.
 * Row-parallel:    W [LIN x LOUT], its LOUT inputs split. */
enum { LB = 4, LIN = 6, LOUT = 8 };

static int column_linear_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_mesh mesh;
    DEVICE_TRY(tp_mesh(dev, &mesh));
    ptdp_comm *tp = mesh.tp_comm;
    int n = mesh.tp, ol = LOUT / n, o0 = mesh.tp_rank * ol;
    dense_linear d;
    DEVICE_TRY(dense_linear_init(dev, &d, LB, LIN, LOUT, 1));
    ptdp_tensor w, b, y, full, dy, dx, dw, db;
    const tensor_spec specs[] = {
        { &w, "w_r", ol, LIN }, { &b, "b_r", 1, ol }, { &y, "y_r", LB, ol }, { &full, "y", LB, LOUT },
        { &dy, "dy_r", LB, ol }, { &dx, "dx", LB, LIN }, { &dw, "dw_r", ol, LIN }, { &db, "db_r", 1, ol },
    };
    DEVICE_TRY(make_tensors(dev, specs, NSPECS(specs)));
    ptdp_tensor_copy(w, ptdp_tensor_rows(d.w, o0, ol));   /* my rows of the dense W, b and dy */
    ptdp_tensor_copy(b, ptdp_tensor_cols(d.b, o0, ol));
    ptdp_tensor_copy(dy, ptdp_tensor_cols(d.dy, o0, ol));

    /* forward without gather: my output columns, no communication (f forward = identity) */
    traffic t0 = traffic_now(dev);
    DEVICE_TRY(ptdp_tp_column_linear_forward(dev, tp, y, d.x, w, &b, NULL));
    traffic t = traffic_since(dev, t0);
    DEVICE_TRY(expect_equal(dev, "column forward y", y, ptdp_tensor_cols(d.y, o0, ol), 1));
    DEVICE_TRY(expect_traffic(dev, "column forward", &t, PTDP_COLL_COUNT, 0, 0));
    /* forward with gather: the whole y on every rank */
    t0 = traffic_now(dev);
    DEVICE_TRY(ptdp_tp_column_linear_forward(dev, tp, y, d.x, w, &b, &full));
    t = traffic_since(dev, t0);
    DEVICE_TRY(expect_equal(dev, "gathered y", full, d.y, 1));
    DEVICE_TRY(expect_traffic(dev, "column forward with gather", &t, PTDP_COLL_ALL_GATHER, n > 1,
                              (n - 1.0) / n * LB * LOUT * SR));

    /* backward, twice: the weight gradients accumulate, dx is overwritten;
     * dx = dy W over ALL outputs: f backward summed the slices */
    for (int pass = 1; pass <= 2; pass++) {
        t0 = traffic_now(dev);
        DEVICE_TRY(ptdp_tp_column_linear_backward(tp, &dx, dw, &db, dy, d.x, w));
        t = traffic_since(dev, t0);
        DEVICE_TRY(expect_traffic(dev, "column backward", &t, PTDP_COLL_ALL_REDUCE, n > 1,
                                  all_reduce_bytes(n, LB * LIN * SR)));
        DEVICE_TRY(expect_equal(dev, "column backward dx", dx, d.dx, 1));
        DEVICE_TRY(expect_equal(dev, "column backward dW", dw, ptdp_tensor_rows(d.dw, o0, ol), pass));
        DEVICE_TRY(expect_equal(dev, "column backward db", db, ptdp_tensor_cols(d.db, o0, ol), pass));
    }
    free_tensors(dev, specs, NSPECS(specs));
    free_tensors(dev, d.specs, NSPECS(d.specs));
    ptdp_mesh_free(&mesh);
    return 0;
}

LOOP_TEST(operator_tests, test_column_parallel_linear_equals_dense, NTPS)
{
    harness_launch_ok(TPS[_i], column_linear_device, NULL, NULL, NULL);
}
END_TEST

/* Row-parallel: W is [LIN x LOUT] (outputs LIN, inputs LOUT), split by its
 * LOUT input columns; x [LB x LOUT] arrives split the same way. */
static int row_linear_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_mesh mesh;
    DEVICE_TRY(tp_mesh(dev, &mesh));
    ptdp_comm *tp = mesh.tp_comm;
    int n = mesh.tp, cl = LOUT / n, c0 = mesh.tp_rank * cl;
    dense_linear d;
    DEVICE_TRY(dense_linear_init(dev, &d, LB, LOUT, LIN, 5));
    ptdp_tensor x, w, y, dx, dw, db;
    const tensor_spec specs[] = {
        { &x, "x_r", LB, cl }, { &w, "w_r", LIN, cl }, { &y, "y", LB, LIN }, { &dx, "dx_r", LB, cl },
        { &dw, "dw_r", LIN, cl }, { &db, "db", 1, LIN },
    };
    DEVICE_TRY(make_tensors(dev, specs, NSPECS(specs)));
    ptdp_tensor_copy(x, ptdp_tensor_cols(d.x, c0, cl));   /* my input columns of x and W */
    ptdp_tensor_copy(w, ptdp_tensor_cols(d.w, c0, cl));

    /* forward: one all-reduce (g), and the bias added once after it */
    traffic t0 = traffic_now(dev);
    DEVICE_TRY(ptdp_tp_row_linear_forward(tp, y, x, w, &d.b));
    traffic t = traffic_since(dev, t0);
    DEVICE_TRY(expect_equal(dev, "row forward y (bias once)", y, d.y, 1));
    DEVICE_TRY(expect_traffic(dev, "row forward", &t, PTDP_COLL_ALL_REDUCE, n > 1,
                              all_reduce_bytes(n, LB * LIN * SR)));

    /* backward: g backward is the identity, so nothing is communicated;
     * db is the whole bias's gradient, on every rank */
    t0 = traffic_now(dev);
    ptdp_tp_row_linear_backward(&dx, dw, &db, d.dy, x, w);
    t = traffic_since(dev, t0);
    DEVICE_TRY(expect_traffic(dev, "row backward", &t, PTDP_COLL_COUNT, 0, 0));
    DEVICE_TRY(expect_equal(dev, "row backward dx", dx, ptdp_tensor_cols(d.dx, c0, cl), 1));
    DEVICE_TRY(expect_equal(dev, "row backward dW", dw, ptdp_tensor_cols(d.dw, c0, cl), 1));
    DEVICE_TRY(expect_equal(dev, "row backward db", db, d.db, 1));
    free_tensors(dev, specs, NSPECS(specs));
    free_tensors(dev, d.specs, NSPECS(d.specs));
    ptdp_mesh_free(&mesh);
    return 0;
}

LOOP_TEST(operator_tests, test_row_parallel_linear_equals_dense, NTPS)
{
    harness_launch_ok(TPS[_i], row_linear_device, NULL, NULL, NULL);
}
END_TEST

/* ------------------------------------------ vocab-parallel cross-entropy */

enum { XB = 8, XC = 16 };

/* Odd rows have logits in the hundreds (exp would overflow without the
 * global max), even rows small ones; the row maximum falls on different
 * ranks for different rows. */
static ptdp_real logit(int i, int c)
{
    double scale = i % 2 ? 70.0 : 0.3;
    return (ptdp_real)(scale * (((i * 37 + c * 11) % 23) - 11) + 0.25 * c);
}

static int64_t label_of(int i) { return (i * 5 + 3) % XC; }

static int xent_device(ptdp_device *dev, void *arg)
{
    const double *tol = arg;
    ptdp_mesh mesh;
    DEVICE_TRY(tp_mesh(dev, &mesh));
    int n = mesh.tp, cl = XC / n, c0 = mesh.tp_rank * cl;
    ptdp_tensor lg, dl, full, dfull;
    const tensor_spec specs[] = {
        { &lg, "logits_r", XB, cl }, { &dl, "dlogits_r", XB, cl }, { &full, "logits", XB, XC },
        { &dfull, "dlogits", XB, XC },
    };
    DEVICE_TRY(make_tensors(dev, specs, NSPECS(specs)));
    double *stats = ptdp_alloc(dev, 3 * XB * sizeof(double), PTDP_MEM_OTHER, "xent stats");
    if (stats == NULL)
        return PTDP_ENOMEM;
    int64_t labels[XB];
    for (int i = 0; i < XB; i++) {
        labels[i] = label_of(i);
        for (int c = 0; c < cl; c++)
            *ptdp_at(lg, i, c) = logit(i, c0 + c);
    }
    double *rowmax = stats, *sumexp = stats + XB, *picked = stats + 2 * XB, loss = NAN;
    const double scale = 1.0 / XB;

    /* the vocab-parallel way: three all-reduces of B doubles (max, sum of
     * exp, picked logit), no gather */
    traffic t0 = traffic_now(dev);
    DEVICE_TRY(ptdp_tp_xent_forward(mesh.tp_comm, lg, c0, labels, rowmax, sumexp, picked, &loss));
    ptdp_tp_xent_backward(dl, lg, c0, labels, rowmax, sumexp, scale);
    traffic d = traffic_since(dev, t0);
    DEVICE_TRY(expect_traffic(dev, "the vocab-parallel cross-entropy", &d, PTDP_COLL_ALL_REDUCE, n > 1 ? 3 : 0,
                              3 * all_reduce_bytes(n, XB * sizeof(double))));

    /* the gathered way, as the reference: all logits on every rank */
    DEVICE_TRY(ptdp_tp_gather_from_region_forward(dev, mesh.tp_comm, lg, full));
    double ref = ptdp_xent_forward(full, labels);
    ptdp_xent_backward(dfull, full, labels, scale);
    DEVICE_CHECK(dev, isfinite(loss) && fabs(loss - ref) <= *tol * fmax(1.0, fabs(ref)),
                 "vocab-parallel loss %.17g, gathered %.17g", loss, ref);
    for (int i = 0; i < XB; i++)
        for (int c = 0; c < cl; c++) {
            double got = *ptdp_at(dl, i, c), want = *ptdp_at(dfull, i, c0 + c);
            DEVICE_CHECK(dev, fabs(got - want) <= *tol, "dlogits(%d,%d) = %.17g, gathered %.17g", i, c0 + c, got, want);
        }
    ptdp_free(dev, stats);
    free_tensors(dev, specs, NSPECS(specs));
    ptdp_mesh_free(&mesh);
    return 0;
}

LOOP_TEST(operator_tests, test_vocab_parallel_xent_equals_gathered_without_gathering, NTPS + 1)
{
    static const double tol = sizeof(ptdp_real) == sizeof(double) ? 1e-12 : 1e-6;
    /* tp 8 too: two classes per rank */
    int n = _i < NTPS ? TPS[_i] : 8;
    harness_launch_ok(n, xent_device, (void *)&tol, NULL, NULL);
}
END_TEST

/* ------------------------------------------------------- a model under TP */

static const harness_tcase model_tests = { .name = "model", .timeout_s = 30 };

/* What every model test sets up on a device: the TP mesh over the whole
 * world, the model, its data, and one batch of `rows` samples. */
enum { MAX_ROWS = 8 };

typedef struct {
    ptdp_mesh mesh;
    ptdp_model m;
    ptdp_mlp_data data;
    ptdp_tensor x;
    int64_t y[MAX_ROWS];
} tp_model;

static int tp_model_init(ptdp_device *dev, tp_model *t, const ptdp_model_config *cfg, uint64_t seed, double dropout,
                         int rows)
{
    const ptdp_mlp_settings *mlp = ptdp_mlp(cfg);
    DEVICE_CHECK(dev, rows <= MAX_ROWS, "%d rows, room for %d", rows, MAX_ROWS);
    DEVICE_TRY(tp_mesh(dev, &t->mesh));
    DEVICE_TRY(ptdp_model_init(dev, &t->m, cfg, &t->mesh, NULL, seed, dropout));
    DEVICE_TRY(ptdp_mlp_data_init(dev, &t->data, seed, mlp->d_in, mlp->classes));
    return ptdp_tensor_alloc(dev, &t->x, "x", PTDP_MEM_OTHER, rows, mlp->d_in);
}

/* The forward of the batch of samples [first, first + rows) at `step`. */
static int tp_model_forward(ptdp_device *dev, tp_model *t, ptdp_acts *acts, int64_t first, long step)
{
    ptdp_mlp_data_batch(&t->data, first, t->x.rows, t->x, t->y);
    ptdp_batch b = { .first = first, .rows = t->x.rows, .x = t->x, .labels = t->y };
    return ptdp_model_forward(dev, &t->m, acts, &b, t->x, step, false, NULL);
}

static void tp_model_free(ptdp_device *dev, tp_model *t)
{
    ptdp_tensor_free(dev, &t->x);
    ptdp_mlp_data_free(dev, &t->data);
    ptdp_model_free(dev, &t->m);
    ptdp_mesh_free(&t->mesh);
}

/* ---------------------------------------------- the MLP block's traffic */

/* One forward and one backward of a model with L blocks, counted.
 *
 *   forward:  L all-reduces of B x h (g, one per block)
 *             + 3 all-reduces of B doubles (the cross-entropy: max, sum of
 *               exp, picked logit)
 *   backward: L all-reduces of B x h (f of each block's fc1)
 *             + 1 all-reduce of B x h (f of the output layer: dh summed
 *               over the class slices)
 *
 * so each block adds exactly one all-reduce of B x h forward and one
 * backward, 2(N-1)/N * B h sizeof(real) bytes each; nothing is gathered. */
enum { MB = 8 };
HARNESS_MODEL_CONFIG(count_cfg_of, PTDP_MLP_CONFIG( .d_in = 4, .hidden = 16, .ffn = 32, .layers = 1, .classes = 8 ))
#define COUNT_CFG (*count_cfg_of())

typedef struct {
    int layers;
    traffic fwd[PTDP_MAX_DEVICES], bwd[PTDP_MAX_DEVICES];
} count_arg;

static int count_device(ptdp_device *dev, void *arg)
{
    count_arg *a = arg;
    ptdp_model_config cfg = COUNT_CFG;
    cfg.layers = a->layers;
    tp_model t;
    DEVICE_TRY(tp_model_init(dev, &t, &cfg, 5, 0.0, MB));
    ptdp_acts acts;
    traffic t0 = traffic_now(dev);
    DEVICE_TRY(tp_model_forward(dev, &t, &acts, 0, 0));
    a->fwd[dev->rank] = traffic_since(dev, t0);
    t0 = traffic_now(dev);
    DEVICE_TRY(ptdp_model_backward(dev, &t.m, &acts, NULL, 1.0 / MB, NULL));
    a->bwd[dev->rank] = traffic_since(dev, t0);
    tp_model_free(dev, &t);
    return 0;
}

LOOP_TEST(model_tests, test_mlp_block_one_all_reduce_each_way, 2 * NTPS)
{
    /* _i: tp (3) x algorithm (default = shm, ring) */
    static const ptdp_algo algos[] = { PTDP_ALGO_DEFAULT, PTDP_ALGO_RING };
    int n = TPS[_i % NTPS];
    ptdp_algo algo = algos[_i / NTPS];
    static count_arg a[2];
    static const int layers[2] = { 1, 3 };
    double bh = MB * COUNT_CFG.hidden * SR, b8 = MB * sizeof(double);
    for (int k = 0; k < 2; k++) {
        memset(&a[k], 0, sizeof a[k]);
        a[k].layers = layers[k];
        harness_launch_ok(n, count_device, &a[k], &(ptdp_launch_opts){ .algo = algo }, NULL);
        int L = layers[k];
        bool many = n > 1;
        for (int r = 0; r < n; r++) {
            const traffic *f = &a[k].fwd[r], *b = &a[k].bwd[r];
            ck_assert_msg(f->calls[PTDP_COLL_ALL_GATHER] == 0 && b->calls[PTDP_COLL_ALL_GATHER] == 0,
                          "tp=%d: the logits were gathered", n);
            ck_assert_msg(calls_except(f, PTDP_COLL_ALL_REDUCE) == 0 && calls_except(b, PTDP_COLL_ALL_REDUCE) == 0,
                          "tp=%d: collectives other than all-reduce", n);
            ck_assert_msg(f->calls[PTDP_COLL_ALL_REDUCE] == (many ? (unsigned)L + 3 : 0u),
                          "tp=%d L=%d rank %d: %llu all-reduces forward, want L + 3", n, L, r,
                          f->calls[PTDP_COLL_ALL_REDUCE]);
            ck_assert_msg(b->calls[PTDP_COLL_ALL_REDUCE] == (many ? (unsigned)L + 1 : 0u),
                          "tp=%d L=%d rank %d: %llu all-reduces backward, want L + 1", n, L, r,
                          b->calls[PTDP_COLL_ALL_REDUCE]);
            double want_f = L * all_reduce_bytes(n, bh) + 3 * all_reduce_bytes(n, b8);
            double want_b = (L + 1) * all_reduce_bytes(n, bh);
            ck_assert_msg(f->sent[PTDP_COLL_ALL_REDUCE] == want_f && f->tp_sent == want_f,
                          "tp=%d L=%d: forward sent %g (group tp %g), want %g", n, L, f->sent[PTDP_COLL_ALL_REDUCE],
                          f->tp_sent, want_f);
            ck_assert_msg(b->sent[PTDP_COLL_ALL_REDUCE] == want_b && b->tp_sent == want_b,
                          "tp=%d L=%d: backward sent %g (group tp %g), want %g", n, L, b->sent[PTDP_COLL_ALL_REDUCE],
                          b->tp_sent, want_b);
            ck_assert(f->tp_calls == f->calls[PTDP_COLL_ALL_REDUCE] && b->tp_calls == b->calls[PTDP_COLL_ALL_REDUCE]);
        }
    }
    /* One block alone: the difference between 3 blocks and 1, halved. */
    const traffic *f1 = &a[0].fwd[0], *f3 = &a[1].fwd[0], *b1 = &a[0].bwd[0], *b3 = &a[1].bwd[0];
    ck_assert_uint_eq((f3->calls[PTDP_COLL_ALL_REDUCE] - f1->calls[PTDP_COLL_ALL_REDUCE]) / 2, n > 1 ? 1 : 0);
    ck_assert_uint_eq((b3->calls[PTDP_COLL_ALL_REDUCE] - b1->calls[PTDP_COLL_ALL_REDUCE]) / 2, n > 1 ? 1 : 0);
    ck_assert(((f3->sent[PTDP_COLL_ALL_REDUCE] - f1->sent[PTDP_COLL_ALL_REDUCE]) / 2) == all_reduce_bytes(n, bh));
    ck_assert(((b3->sent[PTDP_COLL_ALL_REDUCE] - b1->sent[PTDP_COLL_ALL_REDUCE]) / 2) == all_reduce_bytes(n, bh));
}
END_TEST

/* ------------------------------------------------ replicas after training */

/* A few AdamW steps with dropout on, the loop of train.c reduced to its
 * core.  The TP-replicated parameters (in.weight, in.bias, every fc2.bias)
 * must then hold the same bits on every TP rank — with no communication of
 * their own: their gradients are computed from tensors that are already
 * identical on every rank (model.c says why).  This catches a replicated
 * gradient made from rank-local data (a backward mask keyed by rank, a
 * skipped f); a forward that differs per rank is re-synchronised by the
 * next all-reduce and shows in the dropout test below instead. */
HARNESS_MODEL_CONFIG(rep_cfg_of, PTDP_MLP_CONFIG( .d_in = 6, .hidden = 8, .ffn = 32, .layers = 3, .classes = 8 ))
#define REP_CFG (*rep_cfg_of())
enum { RB = 8, RSTEPS = 4 };

static int train_a_little(ptdp_device *dev, tp_model *t, int steps, ptdp_real *opt_m, ptdp_real *opt_v)
{
    ptdp_adamw_config ac = ptdp_adamw_default_config();
    ac.lr = 1e-2;
    for (int s = 0; s < steps; s++) {
        ptdp_acts acts;
        DEVICE_TRY(tp_model_forward(dev, t, &acts, (int64_t)s * RB, s));
        DEVICE_TRY(ptdp_model_backward(dev, &t->m, &acts, NULL, 1.0 / RB, NULL));
        ptdp_adamw_step(t->m.flat_w, t->m.flat_g, opt_m, opt_v, t->m.numel, &ac, s + 1);
        memset(t->m.flat_g, 0, t->m.numel * sizeof(ptdp_real));
    }
    return 0;
}

/* All-gather the bytes of p through the TP group; 1 if every rank's copy
 * equals rank 0's, 0 if some differs, negative on error. */
static int same_on_every_tp_rank(ptdp_device *dev, ptdp_comm *tp, const ptdp_param *p)
{
    int n = ptdp_comm_size(tp), r = ptdp_comm_rank(tp);
    size_t bytes = ptdp_tensor_numel(p->w) * sizeof(ptdp_real);
    unsigned char *all = ptdp_alloc(dev, bytes * (size_t)n, PTDP_MEM_COMM, "replica bytes");
    if (all == NULL)
        return PTDP_ENOMEM;
    memcpy(all + bytes * (size_t)r, p->w.data, bytes);
    int rc = ptdp_all_gather(tp, PTDP_IN_PLACE, all, bytes * (size_t)n, PTDP_U8);
    int same = 1;
    for (int k = 1; rc == 0 && k < n; k++)
        if (memcmp(all, all + bytes * (size_t)k, bytes) != 0)
            same = 0;
    ptdp_free(dev, all);
    return rc != 0 ? rc : same;
}

static int replicas_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    tp_model t;
    DEVICE_TRY(tp_model_init(dev, &t, &REP_CFG, 9, 0.1, RB));
    ptdp_real *opt = ptdp_alloc(dev, 2 * t.m.numel * sizeof(ptdp_real), PTDP_MEM_OPTIM, "adamw m, v");
    const ptdp_param *in_w = ptdp_mlp_of(&t.m)->in_w;
    size_t in_bytes = ptdp_tensor_numel(in_w->w) * sizeof(ptdp_real);
    ptdp_real *in_w0 = ptdp_alloc(dev, in_bytes, PTDP_MEM_OTHER, "in.weight before");
    if (opt == NULL || in_w0 == NULL)
        return PTDP_ENOMEM;
    memcpy(in_w0, in_w->w.data, in_bytes);
    DEVICE_TRY(train_a_little(dev, &t, RSTEPS, opt, opt + t.m.numel));
    DEVICE_CHECK(dev, memcmp(in_w0, in_w->w.data, in_bytes) != 0, "in.weight did not train");

    int replicated = 0;
    for (int i = 0; i < t.m.nparams; i++) {
        const ptdp_param *p = &t.m.params[i];
        int same = same_on_every_tp_rank(dev, t.mesh.tp_comm, p);
        if (same < 0)
            return same;
        if (p->shard == PTDP_SHARD_NONE) {
            replicated++;
            DEVICE_CHECK(dev, same == 1, "replicated %s differs between TP ranks after %d steps", p->name, RSTEPS);
        } else if (t.mesh.tp > 1) {
            /* the comparison can tell: different shards do differ */
            DEVICE_CHECK(dev, same == 0, "shards of %s are identical on every rank", p->name);
        }
    }
    DEVICE_CHECK(dev, replicated == 2 + REP_CFG.layers,
                 "%d replicated parameters, want in.weight, in.bias and %d fc2.bias", replicated, REP_CFG.layers);
    ptdp_free(dev, in_w0);
    ptdp_free(dev, opt);
    tp_model_free(dev, &t);
    return 0;
}

LOOP_TEST(model_tests, test_replicated_parameters_stay_bit_identical, 2)
{
    harness_launch_ok(_i == 0 ? 2 : 4, replicas_device, NULL, NULL, NULL);
}
END_TEST

/* ------------------------------------------------------------- dropout */

/* The mask on its own: a split activation's mask on rank r is columns
 * [r F/n, (r+1) F/n) of the one-device mask; a replicated one is the
 * one-device mask itself on every rank. */
TEST(model_tests, test_dropout_mask_is_a_slice_of_the_single_device_mask)
{
    enum { R = 6, F = 32, H = 8 };
    const double p = 0.5;
    const int64_t sample0 = 40;
    uint64_t key = ptdp_rng_key(3, "dropout.test");
    static ptdp_real whole[R * F], local[4][R * F], rep[4][R * H], rep1[R * H];
    ptdp_tensor tw = ptdp_tensor_wrap(whole, R, F);
    ptdp_tensor_fill(tw, 1);
    ptdp_tp_dropout(tw, p, key, sample0, F, 0);
    int dropped = 0;
    for (int k = 0; k < R * F; k++) {
        ck_assert_msg(whole[k] == 0 || whole[k] == 2, "kept values are scaled by 1/(1-p)");
        dropped += whole[k] == 0;
    }
    ck_assert_msg(dropped > R * F / 4 && dropped < 3 * R * F / 4, "%d of %d dropped at p = 0.5", dropped, R * F);
    ptdp_tensor t1 = ptdp_tensor_wrap(rep1, R, H);
    ptdp_tensor_fill(t1, 1);
    ptdp_tp_dropout(t1, p, key, sample0, H, 0);

    for (int n = 2; n <= 4; n *= 2) {
        int c = F / n;
        for (int r = 0; r < n; r++) {
            ptdp_tensor tl = ptdp_tensor_wrap(local[r], R, c);
            ptdp_tensor_fill(tl, 1);
            ptdp_tp_dropout(tl, p, key, sample0, F, r * c);
            for (int i = 0; i < R; i++)
                for (int j = 0; j < c; j++)
                    ck_assert_msg(local[r][i * c + j] == whole[i * F + r * c + j],
                                  "tp=%d rank %d: split mask (%d,%d) is not the single-device mask's", n, r, i, j);
            ptdp_tensor tr = ptdp_tensor_wrap(rep[r], R, H);
            ptdp_tensor_fill(tr, 1);
            ptdp_tp_dropout(tr, p, key, sample0, H, 0);
            ck_assert_msg(memcmp(rep[r], rep1, sizeof rep1) == 0, "tp=%d rank %d: replicated mask differs", n, r);
        }
        /* the split masks differ between ranks: each rank drops its own units */
        ck_assert_msg(memcmp(local[0], local[1], (size_t)R * c * sizeof(ptdp_real)) != 0,
                      "tp=%d: ranks 0 and 1 drew the same split mask", n);
    }
}
END_TEST

/* The masks inside the model: the GELU output of block l on TP rank r has
 * its zeros exactly where the one-device model's columns [r d_ff/n, …)
 * have them; the block outputs (replicated) are bit-identical on every TP
 * rank and equal the one-device ones. */
HARNESS_MODEL_CONFIG(drop_cfg_of, PTDP_MLP_CONFIG( .d_in = 4, .hidden = 16, .ffn = 32, .layers = 2, .classes = 8 ))
#define DROP_CFG (*drop_cfg_of())
enum { DB = 8, DL = 2, DFF = 32, DH = 16 };

typedef struct {
    ptdp_real g[PTDP_MAX_DEVICES][DL][DB * DFF];   /* rank r's GELU outputs (its columns) */
    ptdp_real h[PTDP_MAX_DEVICES][DL][DB * DH];    /* block outputs                        */
    double loss[PTDP_MAX_DEVICES];
} drop_arg;

static int drop_device(ptdp_device *dev, void *arg)
{
    drop_arg *a = arg;
    tp_model t;
    DEVICE_TRY(tp_model_init(dev, &t, &DROP_CFG, 11, 0.5, DB));
    ptdp_acts acts;
    /* step 3's samples: the masks key on global sample indices */
    DEVICE_TRY(tp_model_forward(dev, &t, &acts, 3 * DB, 3));
    const ptdp_mlp_saved *sv = ptdp_mlp_saved_of(&acts);
    for (int l = 0; l < DL; l++) {
        ptdp_tensor_copy(ptdp_tensor_wrap(a->g[dev->rank][l], DB, ptdp_mlp_of(&t.m)->ffn_local), sv->g[l]);
        ptdp_tensor_copy(ptdp_tensor_wrap(a->h[dev->rank][l], DB, DH), sv->h[l + 1]);
    }
    a->loss[dev->rank] = acts.loss_sum;
    DEVICE_TRY(ptdp_model_backward(dev, &t.m, &acts, NULL, 1.0 / DB, NULL));
    tp_model_free(dev, &t);
    return 0;
}

LOOP_TEST(model_tests, test_dropout_masks_in_the_model, 2)
{
    static drop_arg one, many;
    memset(&one, 0, sizeof one);
    memset(&many, 0, sizeof many);
    int n = _i == 0 ? 2 : 4, c = DFF / n;
    double tol = PTDP_TOLERANCE;
    harness_launch_ok(1, drop_device, &one, NULL, NULL);
    harness_launch_ok(n, drop_device, &many, NULL, NULL);
    int zeros = 0, differ = 0;
    for (int l = 0; l < DL; l++) {
        for (int r = 0; r < n; r++)
            for (int i = 0; i < DB; i++)
                for (int j = 0; j < c; j++) {
                    ptdp_real got = many.g[r][l][i * c + j], want = one.g[0][l][i * DFF + r * c + j];
                    ck_assert_msg((got == 0) == (want == 0), "tp=%d block %d rank %d: GELU output (%d,%d) is %g, "
                                  "one device %g: different dropout masks", n, l, r, i, r * c + j,
                                  (double)got, (double)want);
                    ck_assert_msg(fabs((double)got - (double)want) <= tol * fmax(1.0, fabs((double)want)),
                                  "tp=%d block %d (%d,%d): %g vs %g", n, l, i, r * c + j, (double)got, (double)want);
                    zeros += want == 0;
                    differ += (many.g[0][l][i * c + j] == 0) != (many.g[1][l][i * c + j] == 0);
                }
        for (int r = 0; r < n; r++) {
            ck_assert_msg(memcmp(many.h[r][l], many.h[0][l], sizeof many.h[0][l]) == 0,
                          "tp=%d block %d: the replicated output differs on rank %d (its mask)", n, l, r);
            for (int k = 0; k < DB * DH; k++)
                ck_assert(fabs((double)many.h[r][l][k] - (double)one.h[0][l][k]) <=
                          tol * fmax(1.0, fabs((double)one.h[0][l][k])));
        }
    }
    ck_assert_msg(zeros > 0 && differ > 0, "dropout p = 0.5 dropped %d units; rank masks differ at %d places",
                  zeros, differ);
    ck_assert(fabs(many.loss[0] - one.loss[0]) <= tol * fmax(1.0, one.loss[0]));
}
END_TEST

/* --------------------------------------------------------- gradient norm */

/* ||g||^2 counts every parameter once.  A naive sum of every rank's local
 * gradients over the TP group counts each replicated parameter tp times:
 *   naive = true + (tp - 1) * ||g_replicated||^2. */
typedef struct {
    double sumsq[PTDP_MAX_DEVICES], naive[PTDP_MAX_DEVICES], replicated[PTDP_MAX_DEVICES];
} norm_arg;

static int norm_device(ptdp_device *dev, void *arg)
{
    norm_arg *a = arg;
    tp_model t;
    DEVICE_TRY(tp_model_init(dev, &t, &REP_CFG, 13, 0.0, RB));
    ptdp_acts acts;
    DEVICE_TRY(tp_model_forward(dev, &t, &acts, 0, 0));
    DEVICE_TRY(ptdp_model_backward(dev, &t.m, &acts, NULL, 1.0 / RB, NULL));
    DEVICE_TRY(ptdp_model_grad_sumsq(dev, &t.m, &a->sumsq[dev->rank]));
    double naive = ptdp_sum_squares(t.m.flat_g, t.m.numel), rep = 0;
    for (int i = 0; i < t.m.nparams; i++)
        if (t.m.params[i].shard == PTDP_SHARD_NONE)
            rep += ptdp_sum_squares(t.m.params[i].g.data, ptdp_tensor_numel(t.m.params[i].g));
    if (t.mesh.tp > 1)
        DEVICE_TRY(ptdp_all_reduce(t.mesh.tp_comm, &naive, &naive, 1, PTDP_F64, PTDP_SUM));
    a->naive[dev->rank] = naive;
    a->replicated[dev->rank] = rep;
    tp_model_free(dev, &t);
    return 0;
}

LOOP_TEST(model_tests, test_grad_norm_counts_each_parameter_once, 2)
{
    static norm_arg one, many;
    memset(&one, 0, sizeof one);
    memset(&many, 0, sizeof many);
    int n = _i == 0 ? 2 : 4;
    double tol = 10 * PTDP_TOLERANCE;
    harness_launch_ok(1, norm_device, &one, NULL, NULL);
    harness_launch_ok(n, norm_device, &many, NULL, NULL);
    double base = one.sumsq[0];
    ck_assert(base > 0 && one.replicated[0] > 0);
    for (int r = 0; r < n; r++) {
        ck_assert_msg(fabs(many.sumsq[r] - base) <= tol * base, "tp=%d rank %d: ||g||^2 %.17g, one device %.17g",
                      n, r, many.sumsq[r], base);
        /* what counting the replicas tp times would have given */
        double twice = base + (n - 1) * one.replicated[0];
        ck_assert_msg(fabs(many.naive[r] - twice) <= tol * twice, "naive sum %.17g, predicted %.17g",
                      many.naive[r], twice);
        /* …which --check would see: the norm moves by 100x its tolerance and more */
        ck_assert_msg(fabs(sqrt(many.naive[r]) - sqrt(base)) > 100 * PTDP_TOLERANCE * sqrt(base),
                      "double counting would not even be visible (%.17g vs %.17g)", many.naive[r], base);
    }
}
END_TEST

/* ------------------------------------------------------ parameter memory */

/* Peak parameter bytes per device, exactly:
 *   replicated  in.weight h d_in + in.bias h + L fc2.bias h
 *   split       (L (d_ff h + d_ff + h d_ff) + C h + C) / tp
 * With replicated parameters this small, tp = 4 holds close to 1/4. */
TEST(model_tests, test_parameter_memory_falls_as_one_over_tp)
{
    const ptdp_model_config mc = PTDP_MLP_CONFIG( .d_in = 4, .hidden = 8, .ffn = 64, .layers = 2, .classes = 32 );
    const int tps[] = { 1, 2, 4, 8 };
    size_t peak[4];
    size_t rep = (size_t)mc.hidden * ptdp_mlp(&mc)->d_in + mc.hidden + (size_t)mc.layers * mc.hidden;
    size_t split = (size_t)mc.layers * (2 * (size_t)mc.ffn * mc.hidden + mc.ffn) +
                   (size_t)ptdp_mlp(&mc)->classes * mc.hidden + ptdp_mlp(&mc)->classes;
    for (int k = 0; k < 4; k++) {
        ptdp_train_config c = {
            .model = mc, .dp = 1, .tp = tps[k], .pp = 1, .micro_batches = 1, .batch = 8, .steps = 1,
            .optimizer = PTDP_OPT_ADAMW, .lr = 1e-3, .bucket_mb = 0.25, .seed = 1, .schedule = ptdp_schedule_find("1f1b"),
        };
        ptdp_launch_result lr;
        equiv_train(&c, &(ptdp_launch_opts){ .result = &lr }, NULL, NULL);
        size_t want = (rep + split / (size_t)tps[k]) * sizeof(ptdp_real);
        for (int r = 0; r < tps[k]; r++) {
            ck_assert_msg(lr.devices[r].mem.peak[PTDP_MEM_PARAMS] == want, "tp=%d device %d: %zu parameter bytes, "
                          "want (%zu + %zu/%d) x %zu = %zu", tps[k], r, lr.devices[r].mem.peak[PTDP_MEM_PARAMS],
                          rep, split, tps[k], sizeof(ptdp_real), want);
            ck_assert_uint_eq(lr.devices[r].mem.peak[PTDP_MEM_GRADS], want);   /* gradients mirror them */
        }
        peak[k] = lr.devices[0].mem.peak[PTDP_MEM_PARAMS];
        ptdp_launch_result_free(&lr);
    }
    double ratio = (double)peak[2] / (double)peak[0];
    ck_assert_msg(ratio > 0.25 && ratio < 0.27, "tp=4 holds %.4f of tp=1's parameters", ratio);
}
END_TEST

int main(void)
{
    return harness_main("tp");
}
