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
 * Device threads never call ck_assert: they write their first failure into
 * their rank's slot of a `verdicts` table, which the test thread asserts
 * empty after ptdp_launch returns.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/mlp_data.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/mesh.h"
#include "ptdp/model.h"
#include "ptdp/models.h"
#include "ptdp/mlp.h"
#include "ptdp/ops.h"
#include "ptdp/optim.h"
#include "ptdp/rng.h"
#include "ptdp/tp.h"
#include "ptdp/train.h"
#include "ptdp/comm.h"

static const int TPS[] = { 1, 2, 4 };
#define NTPS 3
#define SR ((double)sizeof(ptdp_real))

/* ------------------------------------------------------------- harness */

typedef struct {
    char why[PTDP_MAX_DEVICES][320];
} verdicts;

/* Record the first failed expectation of this rank (devices never ck_assert). */
#define EXPECT(v, dev, cond, ...)                                                         \
    do {                                                                                  \
        if (!(cond) && (v)->why[(dev)->rank][0] == '\0')                                  \
            snprintf((v)->why[(dev)->rank], sizeof (v)->why[0], __VA_ARGS__);            \
    } while (0)

static void launch(int n, ptdp_device_fn fn, void *arg, ptdp_algo algo)
{
    ptdp_launch_result res;
    ptdp_launch_opts o = { .watchdog_s = 20, .algo = algo, .result = &res };
    int rc = ptdp_launch(n, fn, arg, &o);
    ck_assert_msg(rc == 0, "launch of %d devices failed: %s", n, res.message);
    ptdp_launch_result_free(&res);
}

static void assert_verdicts(const verdicts *v, int n, const char *what)
{
    for (int r = 0; r < n; r++)
        ck_assert_msg(v->why[r][0] == '\0', "%s, tp=%d, rank %d: %s", what, n, r, v->why[r]);
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
    for (int g = 0; g < dev->stats.ngroups; g++)
        if (strcmp(dev->stats.group[g].name, "tp") == 0) {
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

/* The textbook all-reduce volume per device: 2(N-1)/N * S (0 for N = 1,
 * where the operators skip the collective altogether). */
static double all_reduce_bytes(int n, double s)
{
    return n > 1 ? 2.0 * (n - 1) / n * s : 0.0;
}

/* A small integer in [-3, 3], a different pattern per `seed`. */
static ptdp_real ival(int seed, int i, int j)
{
    return (ptdp_real)((seed * 31 + i * 7 + j * 3 + (i * j) % 5) % 7 - 3);
}

static ptdp_tensor make(ptdp_device *dev, const char *name, int rows, int cols)
{
    ptdp_tensor t = { 0 };
    if (ptdp_tensor_alloc(dev, &t, name, PTDP_MEM_OTHER, rows, cols) != 0)
        t.data = NULL;
    return t;
}

static int tp_mesh(ptdp_device *dev, ptdp_mesh *mesh)
{
    return ptdp_mesh_init(dev, 1, dev->world_size, 1, mesh);
}

/* ------------------------------------------- f and g: the sum operators */

enum { OR = 3, OC = 8 };   /* rows and columns of the operator tests */

/* base(i, j) = i*OC + j + 1; rank r contributes (r+1) base, so the sum over
 * the group is n(n+1)/2 base. */
static ptdp_real base_value(int i, int j) { return (ptdp_real)(i * OC + j + 1); }

static int f_and_g_device(ptdp_device *dev, void *arg)
{
    verdicts *v = arg;
    ptdp_mesh mesh;
    int rc = tp_mesh(dev, &mesh);
    if (rc != 0)
        return rc;
    int n = mesh.tp, r = mesh.tp_rank;
    double tri = n * (n + 1) / 2.0;
    ptdp_tensor t = make(dev, "t", OR, OC), wide = make(dev, "wide", OR, OC + 4);
    if (t.data == NULL || wide.data == NULL)
        return PTDP_ENOMEM;

    /* f backward (copy to region): dx from every slice of the layer is summed. */
    for (int i = 0; i < OR; i++)
        for (int j = 0; j < OC; j++)
            *ptdp_at(t, i, j) = (ptdp_real)(r + 1) * base_value(i, j);
    traffic t0 = traffic_now(dev);
    rc = ptdp_tp_copy_to_region_backward(mesh.tp_comm, t);
    traffic d = traffic_since(dev, t0);
    EXPECT(v, dev, rc == 0, "f backward returned %d", rc);
    for (int i = 0; i < OR; i++)
        for (int j = 0; j < OC; j++)
            EXPECT(v, dev, *ptdp_at(t, i, j) == tri * base_value(i, j), "f backward (%d,%d) = %g, want %g",
                   i, j, (double)*ptdp_at(t, i, j), tri * base_value(i, j));
    EXPECT(v, dev, d.calls[PTDP_COLL_ALL_REDUCE] == (n > 1 ? 1u : 0u) && calls_except(&d, PTDP_COLL_ALL_REDUCE) == 0,
           "f backward made %llu all-reduces, %llu other calls", d.calls[PTDP_COLL_ALL_REDUCE],
           calls_except(&d, PTDP_COLL_ALL_REDUCE));
    EXPECT(v, dev, d.sent[PTDP_COLL_ALL_REDUCE] == all_reduce_bytes(n, OR * OC * SR),
           "f backward sent %g bytes, want 2(N-1)/N S = %g", d.sent[PTDP_COLL_ALL_REDUCE],
           all_reduce_bytes(n, OR * OC * SR));

    /* g forward (reduce from region): the partial products are summed. */
    for (int i = 0; i < OR; i++)
        for (int j = 0; j < OC; j++)
            *ptdp_at(t, i, j) = (ptdp_real)(r + 1) * base_value(i, j);
    t0 = traffic_now(dev);
    rc = ptdp_tp_reduce_from_region_forward(mesh.tp_comm, t);
    d = traffic_since(dev, t0);
    EXPECT(v, dev, rc == 0, "g forward returned %d", rc);
    for (int i = 0; i < OR; i++)
        for (int j = 0; j < OC; j++)
            EXPECT(v, dev, *ptdp_at(t, i, j) == tri * base_value(i, j), "g forward (%d,%d) = %g, want %g",
                   i, j, (double)*ptdp_at(t, i, j), tri * base_value(i, j));
    EXPECT(v, dev, d.calls[PTDP_COLL_ALL_REDUCE] == (n > 1 ? 1u : 0u) && calls_except(&d, PTDP_COLL_ALL_REDUCE) == 0,
           "g forward made %llu all-reduces", d.calls[PTDP_COLL_ALL_REDUCE]);
    EXPECT(v, dev, d.tp_sent == all_reduce_bytes(n, OR * OC * SR), "g forward sent %g bytes in group tp", d.tp_sent);

    /* The same on a column view (a strided tensor): only the view is summed. */
    ptdp_tensor_fill(wide, -7);
    ptdp_tensor view = ptdp_tensor_cols(wide, 2, OC);
    for (int i = 0; i < OR; i++)
        for (int j = 0; j < OC; j++)
            *ptdp_at(view, i, j) = (ptdp_real)(r + 1) * base_value(i, j);
    rc = ptdp_tp_reduce_from_region_forward(mesh.tp_comm, view);
    EXPECT(v, dev, rc == 0, "g forward on a view returned %d", rc);
    for (int i = 0; i < OR; i++)
        for (int j = 0; j < OC + 4; j++) {
            double want = j >= 2 && j < 2 + OC ? tri * base_value(i, j - 2) : -7.0;
            EXPECT(v, dev, *ptdp_at(wide, i, j) == want, "g forward on a view: (%d,%d) = %g, want %g", i, j,
                   (double)*ptdp_at(wide, i, j), want);
        }
    ptdp_tensor_free(dev, &t);
    ptdp_tensor_free(dev, &wide);
    ptdp_mesh_free(&mesh);
    return 0;
}

START_TEST(test_f_and_g_sum_over_ranks)
{
    static verdicts v;
    memset(&v, 0, sizeof v);
    launch(TPS[_i], f_and_g_device, &v, PTDP_ALGO_DEFAULT);
    assert_verdicts(&v, TPS[_i], "f/g");
}
END_TEST

/* ----------------------------------- gather and scatter: the concat pair */

/* Rank k's block holds 1000 k + 10 i + j: after a gather, column k c + j
 * of row i must read exactly that. */
static int gather_scatter_device(ptdp_device *dev, void *arg)
{
    verdicts *v = arg;
    ptdp_mesh mesh;
    int rc = tp_mesh(dev, &mesh);
    if (rc != 0)
        return rc;
    int n = mesh.tp, r = mesh.tp_rank, c = OC / n;
    ptdp_tensor local = make(dev, "local", OR, c), full = make(dev, "full", OR, OC);
    if (local.data == NULL || full.data == NULL)
        return PTDP_ENOMEM;

    /* gather forward: full = [local_0 | … | local_{n-1}] */
    for (int i = 0; i < OR; i++)
        for (int j = 0; j < c; j++)
            *ptdp_at(local, i, j) = (ptdp_real)(1000 * r + 10 * i + j);
    traffic t0 = traffic_now(dev);
    rc = ptdp_tp_gather_from_region_forward(dev, mesh.tp_comm, local, full);
    traffic d = traffic_since(dev, t0);
    EXPECT(v, dev, rc == 0, "gather forward returned %d", rc);
    for (int i = 0; i < OR; i++)
        for (int col = 0; col < OC; col++) {
            double want = 1000.0 * (col / c) + 10 * i + col % c;
            EXPECT(v, dev, *ptdp_at(full, i, col) == want, "gather forward (%d,%d) = %g, want %g", i, col,
                   (double)*ptdp_at(full, i, col), want);
        }
    EXPECT(v, dev, d.calls[PTDP_COLL_ALL_GATHER] == (n > 1 ? 1u : 0u) && calls_except(&d, PTDP_COLL_ALL_GATHER) == 0,
           "gather forward: %llu all-gathers, %llu other calls", d.calls[PTDP_COLL_ALL_GATHER],
           calls_except(&d, PTDP_COLL_ALL_GATHER));
    EXPECT(v, dev, d.sent[PTDP_COLL_ALL_GATHER] == (n - 1.0) / n * OR * OC * SR,
           "gather forward sent %g bytes, want (N-1)/N S = %g", d.sent[PTDP_COLL_ALL_GATHER],
           (n - 1.0) / n * OR * OC * SR);

    /* gather backward: keep my columns of the (replicated) gradient; no communication */
    for (int i = 0; i < OR; i++)
        for (int col = 0; col < OC; col++)
            *ptdp_at(full, i, col) = (ptdp_real)(10 * i + col);
    t0 = traffic_now(dev);
    ptdp_tp_gather_from_region_backward(mesh.tp_comm, full, local);
    d = traffic_since(dev, t0);
    for (int i = 0; i < OR; i++)
        for (int j = 0; j < c; j++)
            EXPECT(v, dev, *ptdp_at(local, i, j) == 10 * i + r * c + j, "gather backward (%d,%d) = %g", i, j,
                   (double)*ptdp_at(local, i, j));
    EXPECT(v, dev, calls_except(&d, PTDP_COLL_COUNT) == 0, "gather backward communicated");

    /* scatter forward: my columns of a replicated tensor; no communication */
    ptdp_tensor_zero(local);
    t0 = traffic_now(dev);
    ptdp_tp_scatter_to_region_forward(mesh.tp_comm, full, local);
    d = traffic_since(dev, t0);
    for (int i = 0; i < OR; i++)
        for (int j = 0; j < c; j++)
            EXPECT(v, dev, *ptdp_at(local, i, j) == 10 * i + r * c + j, "scatter forward (%d,%d) = %g", i, j,
                   (double)*ptdp_at(local, i, j));
    EXPECT(v, dev, calls_except(&d, PTDP_COLL_COUNT) == 0, "scatter forward communicated");

    /* scatter backward: the gradient of a split is the concatenation */
    for (int i = 0; i < OR; i++)
        for (int j = 0; j < c; j++)
            *ptdp_at(local, i, j) = (ptdp_real)(1000 * r + 10 * i + j);
    ptdp_tensor_zero(full);
    t0 = traffic_now(dev);
    rc = ptdp_tp_scatter_to_region_backward(dev, mesh.tp_comm, local, full);
    d = traffic_since(dev, t0);
    EXPECT(v, dev, rc == 0, "scatter backward returned %d", rc);
    for (int i = 0; i < OR; i++)
        for (int col = 0; col < OC; col++) {
            double want = 1000.0 * (col / c) + 10 * i + col % c;
            EXPECT(v, dev, *ptdp_at(full, i, col) == want, "scatter backward (%d,%d) = %g, want %g", i, col,
                   (double)*ptdp_at(full, i, col), want);
        }
    EXPECT(v, dev, d.calls[PTDP_COLL_ALL_GATHER] == (n > 1 ? 1u : 0u), "scatter backward: %llu all-gathers",
           d.calls[PTDP_COLL_ALL_GATHER]);

    /* the gather's staging buffer went back to the arena */
    ptdp_mem_stats ms;
    ptdp_arena_stats(dev->arena, &ms);
    EXPECT(v, dev, ms.current[PTDP_MEM_COMM] == 0, "%zu bytes of communication buffers left",
           ms.current[PTDP_MEM_COMM]);
    ptdp_tensor_free(dev, &local);
    ptdp_tensor_free(dev, &full);
    ptdp_mesh_free(&mesh);
    return 0;
}

START_TEST(test_gather_and_scatter_concatenate_in_rank_order)
{
    static verdicts v;
    memset(&v, 0, sizeof v);
    launch(TPS[_i], gather_scatter_device, &v, PTDP_ALGO_DEFAULT);
    assert_verdicts(&v, TPS[_i], "gather/scatter");
}
END_TEST

/* ------------------------------------------- column- and row-parallel */

/* Column-parallel: W [LOUT x LIN], its LOUT outputs split.
 * Row-parallel:    W [LIN x LOUT], its LOUT inputs split. */
enum { LB = 4, LIN = 6, LOUT = 8 };

/* Dense reference values: x (seed 1), W (seed 2), b (seed 3), dy (seed 4). */
static double dense_xwt(int in, int i, int o)   /* (x W^T)(i, o) with W [.. x in] */
{
    double s = 0;
    for (int k = 0; k < in; k++)
        s += (double)ival(1, i, k) * (double)ival(2, o, k);
    return s;
}

static int column_linear_device(ptdp_device *dev, void *arg)
{
    verdicts *v = arg;
    ptdp_mesh mesh;
    int rc = tp_mesh(dev, &mesh);
    if (rc != 0)
        return rc;
    ptdp_comm *tp = mesh.tp_comm;
    int n = mesh.tp, ol = LOUT / n, o0 = mesh.tp_rank * ol;
    ptdp_tensor x = make(dev, "x", LB, LIN), w = make(dev, "w_r", ol, LIN), b = make(dev, "b_r", 1, ol);
    ptdp_tensor y = make(dev, "y_r", LB, ol), full = make(dev, "y", LB, LOUT), dy = make(dev, "dy_r", LB, ol);
    ptdp_tensor dx = make(dev, "dx", LB, LIN), dw = make(dev, "dw_r", ol, LIN), db = make(dev, "db_r", 1, ol);
    if (x.data == NULL || w.data == NULL || b.data == NULL || y.data == NULL || full.data == NULL ||
        dy.data == NULL || dx.data == NULL || dw.data == NULL || db.data == NULL)
        return PTDP_ENOMEM;
    for (int i = 0; i < LB; i++)
        for (int k = 0; k < LIN; k++)
            *ptdp_at(x, i, k) = ival(1, i, k);
    for (int o = 0; o < ol; o++) {                 /* my rows of the dense W and b */
        for (int k = 0; k < LIN; k++)
            *ptdp_at(w, o, k) = ival(2, o0 + o, k);
        *ptdp_at(b, 0, o) = ival(3, 0, o0 + o);
    }

    /* forward without gather: my output columns, no communication (f forward = identity) */
    traffic t0 = traffic_now(dev);
    rc = ptdp_tp_column_linear_forward(dev, tp, y, x, w, &b, NULL);
    traffic d = traffic_since(dev, t0);
    EXPECT(v, dev, rc == 0 && calls_except(&d, PTDP_COLL_COUNT) == 0, "column forward: rc %d, %llu calls", rc,
           calls_except(&d, PTDP_COLL_COUNT));
    for (int i = 0; i < LB; i++)
        for (int o = 0; o < ol; o++) {
            double want = dense_xwt(LIN, i, o0 + o) + ival(3, 0, o0 + o);
            EXPECT(v, dev, *ptdp_at(y, i, o) == want, "column forward y(%d,%d) = %g, want %g", i, o0 + o,
                   (double)*ptdp_at(y, i, o), want);
        }
    /* forward with gather: the whole y on every rank */
    t0 = traffic_now(dev);
    rc = ptdp_tp_column_linear_forward(dev, tp, y, x, w, &b, &full);
    d = traffic_since(dev, t0);
    EXPECT(v, dev, rc == 0 && d.calls[PTDP_COLL_ALL_GATHER] == (n > 1 ? 1u : 0u) &&
           calls_except(&d, PTDP_COLL_ALL_GATHER) == 0, "column forward with gather: rc %d, %llu all-gathers", rc,
           d.calls[PTDP_COLL_ALL_GATHER]);
    for (int i = 0; i < LB; i++)
        for (int o = 0; o < LOUT; o++) {
            double want = dense_xwt(LIN, i, o) + ival(3, 0, o);
            EXPECT(v, dev, *ptdp_at(full, i, o) == want, "gathered y(%d,%d) = %g, want %g", i, o,
                   (double)*ptdp_at(full, i, o), want);
        }

    /* backward, twice: the weight gradients accumulate, dx is overwritten */
    for (int i = 0; i < LB; i++)
        for (int o = 0; o < ol; o++)
            *ptdp_at(dy, i, o) = ival(4, i, o0 + o);
    for (int pass = 1; pass <= 2; pass++) {
        t0 = traffic_now(dev);
        rc = ptdp_tp_column_linear_backward(tp, &dx, dw, &db, dy, x, w);
        d = traffic_since(dev, t0);
        EXPECT(v, dev, rc == 0 && d.calls[PTDP_COLL_ALL_REDUCE] == (n > 1 ? 1u : 0u) &&
               calls_except(&d, PTDP_COLL_ALL_REDUCE) == 0, "column backward: rc %d, %llu all-reduces", rc,
               d.calls[PTDP_COLL_ALL_REDUCE]);
        EXPECT(v, dev, d.sent[PTDP_COLL_ALL_REDUCE] == all_reduce_bytes(n, LB * LIN * SR),
               "column backward sent %g bytes, want %g", d.sent[PTDP_COLL_ALL_REDUCE],
               all_reduce_bytes(n, LB * LIN * SR));
        for (int i = 0; i < LB; i++)
            for (int k = 0; k < LIN; k++) {
                double want = 0;   /* dx = dy W over ALL outputs: f backward summed the slices */
                for (int o = 0; o < LOUT; o++)
                    want += (double)ival(4, i, o) * (double)ival(2, o, k);
                EXPECT(v, dev, *ptdp_at(dx, i, k) == want, "column backward dx(%d,%d) = %g, want %g", i, k,
                       (double)*ptdp_at(dx, i, k), want);
            }
        for (int o = 0; o < ol; o++) {
            double wantb = 0;
            for (int i = 0; i < LB; i++)
                wantb += ival(4, i, o0 + o);
            EXPECT(v, dev, *ptdp_at(db, 0, o) == pass * wantb, "column backward db(%d) = %g, want %g", o0 + o,
                   (double)*ptdp_at(db, 0, o), pass * wantb);
            for (int k = 0; k < LIN; k++) {
                double want = 0;
                for (int i = 0; i < LB; i++)
                    want += (double)ival(4, i, o0 + o) * (double)ival(1, i, k);
                EXPECT(v, dev, *ptdp_at(dw, o, k) == pass * want, "column backward dW(%d,%d) = %g, want %g",
                       o0 + o, k, (double)*ptdp_at(dw, o, k), pass * want);
            }
        }
    }
    ptdp_tensor *all[] = { &x, &w, &b, &y, &full, &dy, &dx, &dw, &db };
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        ptdp_tensor_free(dev, all[k]);
    ptdp_mesh_free(&mesh);
    return 0;
}

START_TEST(test_column_parallel_linear_equals_dense)
{
    static verdicts v;
    memset(&v, 0, sizeof v);
    launch(TPS[_i], column_linear_device, &v, PTDP_ALGO_DEFAULT);
    assert_verdicts(&v, TPS[_i], "column-parallel linear");
}
END_TEST

/* Row-parallel: W is [LIN x LOUT] (outputs LIN, inputs LOUT), split by its
 * LOUT input columns; x [LB x LOUT] arrives split the same way. */
static int row_linear_device(ptdp_device *dev, void *arg)
{
    verdicts *v = arg;
    ptdp_mesh mesh;
    int rc = tp_mesh(dev, &mesh);
    if (rc != 0)
        return rc;
    ptdp_comm *tp = mesh.tp_comm;
    int n = mesh.tp, cl = LOUT / n, c0 = mesh.tp_rank * cl;
    ptdp_tensor x = make(dev, "x_r", LB, cl), w = make(dev, "w_r", LIN, cl), b = make(dev, "b", 1, LIN);
    ptdp_tensor y = make(dev, "y", LB, LIN), dy = make(dev, "dy", LB, LIN);
    ptdp_tensor dx = make(dev, "dx_r", LB, cl), dw = make(dev, "dw_r", LIN, cl), db = make(dev, "db", 1, LIN);
    if (x.data == NULL || w.data == NULL || b.data == NULL || y.data == NULL || dy.data == NULL ||
        dx.data == NULL || dw.data == NULL || db.data == NULL)
        return PTDP_ENOMEM;
    /* x(i, k) = ival(5, i, k) and W(o, k) = ival(6, o, k) over the whole k; I hold k in [c0, c0 + cl). */
    for (int i = 0; i < LB; i++)
        for (int k = 0; k < cl; k++)
            *ptdp_at(x, i, k) = ival(5, i, c0 + k);
    for (int o = 0; o < LIN; o++) {
        for (int k = 0; k < cl; k++)
            *ptdp_at(w, o, k) = ival(6, o, c0 + k);
        *ptdp_at(b, 0, o) = ival(7, 0, o);
    }

    /* forward: one all-reduce (g), and the bias added once after it */
    traffic t0 = traffic_now(dev);
    rc = ptdp_tp_row_linear_forward(tp, y, x, w, &b);
    traffic d = traffic_since(dev, t0);
    EXPECT(v, dev, rc == 0 && d.calls[PTDP_COLL_ALL_REDUCE] == (n > 1 ? 1u : 0u) &&
           calls_except(&d, PTDP_COLL_ALL_REDUCE) == 0, "row forward: rc %d, %llu all-reduces", rc,
           d.calls[PTDP_COLL_ALL_REDUCE]);
    EXPECT(v, dev, d.sent[PTDP_COLL_ALL_REDUCE] == all_reduce_bytes(n, LB * LIN * SR),
           "row forward sent %g bytes, want %g", d.sent[PTDP_COLL_ALL_REDUCE], all_reduce_bytes(n, LB * LIN * SR));
    for (int i = 0; i < LB; i++)
        for (int o = 0; o < LIN; o++) {
            double want = ival(7, 0, o);
            for (int k = 0; k < LOUT; k++)
                want += (double)ival(5, i, k) * (double)ival(6, o, k);
            EXPECT(v, dev, *ptdp_at(y, i, o) == want, "row forward y(%d,%d) = %g, want %g (bias once)", i, o,
                   (double)*ptdp_at(y, i, o), want);
        }

    /* backward: g backward is the identity, so nothing is communicated */
    for (int i = 0; i < LB; i++)
        for (int o = 0; o < LIN; o++)
            *ptdp_at(dy, i, o) = ival(8, i, o);
    t0 = traffic_now(dev);
    ptdp_tp_row_linear_backward(&dx, dw, &db, dy, x, w);
    d = traffic_since(dev, t0);
    EXPECT(v, dev, calls_except(&d, PTDP_COLL_COUNT) == 0, "row backward communicated");
    for (int i = 0; i < LB; i++)
        for (int k = 0; k < cl; k++) {
            double want = 0;
            for (int o = 0; o < LIN; o++)
                want += (double)ival(8, i, o) * (double)ival(6, o, c0 + k);
            EXPECT(v, dev, *ptdp_at(dx, i, k) == want, "row backward dx(%d,%d) = %g, want %g", i, c0 + k,
                   (double)*ptdp_at(dx, i, k), want);
        }
    for (int o = 0; o < LIN; o++) {
        double wantb = 0;
        for (int i = 0; i < LB; i++)
            wantb += ival(8, i, o);
        EXPECT(v, dev, *ptdp_at(db, 0, o) == wantb, "row backward db(%d) = %g, want %g (the whole bias, every rank)",
               o, (double)*ptdp_at(db, 0, o), wantb);
        for (int k = 0; k < cl; k++) {
            double want = 0;
            for (int i = 0; i < LB; i++)
                want += (double)ival(8, i, o) * (double)ival(5, i, c0 + k);
            EXPECT(v, dev, *ptdp_at(dw, o, k) == want, "row backward dW(%d,%d) = %g, want %g", o, c0 + k,
                   (double)*ptdp_at(dw, o, k), want);
        }
    }
    ptdp_tensor *all[] = { &x, &w, &b, &y, &dy, &dx, &dw, &db };
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        ptdp_tensor_free(dev, all[k]);
    ptdp_mesh_free(&mesh);
    return 0;
}

START_TEST(test_row_parallel_linear_equals_dense)
{
    static verdicts v;
    memset(&v, 0, sizeof v);
    launch(TPS[_i], row_linear_device, &v, PTDP_ALGO_DEFAULT);
    assert_verdicts(&v, TPS[_i], "row-parallel linear");
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

typedef struct {
    verdicts v;
    double tol;
} xent_arg;

static int xent_device(ptdp_device *dev, void *arg)
{
    xent_arg *a = arg;
    verdicts *v = &a->v;
    ptdp_mesh mesh;
    int rc = tp_mesh(dev, &mesh);
    if (rc != 0)
        return rc;
    int n = mesh.tp, cl = XC / n, c0 = mesh.tp_rank * cl;
    ptdp_tensor lg = make(dev, "logits_r", XB, cl), dl = make(dev, "dlogits_r", XB, cl);
    ptdp_tensor full = make(dev, "logits", XB, XC), dfull = make(dev, "dlogits", XB, XC);
    double *stats = ptdp_alloc(dev, 3 * XB * sizeof(double), PTDP_MEM_OTHER, "xent stats");
    if (lg.data == NULL || dl.data == NULL || full.data == NULL || dfull.data == NULL || stats == NULL)
        return PTDP_ENOMEM;
    int64_t labels[XB];
    for (int i = 0; i < XB; i++) {
        labels[i] = label_of(i);
        for (int c = 0; c < cl; c++)
            *ptdp_at(lg, i, c) = logit(i, c0 + c);
    }
    double *rowmax = stats, *sumexp = stats + XB, *picked = stats + 2 * XB, loss = NAN;
    const double scale = 1.0 / XB;

    /* the vocab-parallel way: three all-reduces of B doubles, no gather */
    traffic t0 = traffic_now(dev);
    rc = ptdp_tp_xent_forward(mesh.tp_comm, lg, c0, labels, rowmax, sumexp, picked, &loss);
    ptdp_tp_xent_backward(dl, lg, c0, labels, rowmax, sumexp, scale);
    traffic d = traffic_since(dev, t0);
    EXPECT(v, dev, rc == 0, "xent forward returned %d", rc);
    EXPECT(v, dev, d.calls[PTDP_COLL_ALL_GATHER] == 0, "the cross-entropy gathered the logits");
    EXPECT(v, dev, d.calls[PTDP_COLL_ALL_REDUCE] == (n > 1 ? 3u : 0u) && calls_except(&d, PTDP_COLL_ALL_REDUCE) == 0,
           "xent: %llu all-reduces (want 3: max, sum of exp, picked logit), %llu other calls",
           d.calls[PTDP_COLL_ALL_REDUCE], calls_except(&d, PTDP_COLL_ALL_REDUCE));
    EXPECT(v, dev, d.sent[PTDP_COLL_ALL_REDUCE] == 3 * all_reduce_bytes(n, XB * sizeof(double)),
           "xent sent %g bytes, want 3 x 2(N-1)/N x B x 8 = %g", d.sent[PTDP_COLL_ALL_REDUCE],
           3 * all_reduce_bytes(n, XB * sizeof(double)));

    /* the gathered way, as the reference: all logits on every rank */
    rc = ptdp_tp_gather_from_region_forward(dev, mesh.tp_comm, lg, full);
    EXPECT(v, dev, rc == 0, "gather returned %d", rc);
    double ref = ptdp_xent_forward(full, labels);
    ptdp_xent_backward(dfull, full, labels, scale);
    EXPECT(v, dev, isfinite(loss) && fabs(loss - ref) <= a->tol * fmax(1.0, fabs(ref)),
           "vocab-parallel loss %.17g, gathered %.17g", loss, ref);
    for (int i = 0; i < XB; i++)
        for (int c = 0; c < cl; c++) {
            double got = *ptdp_at(dl, i, c), want = *ptdp_at(dfull, i, c0 + c);
            EXPECT(v, dev, fabs(got - want) <= a->tol, "dlogits(%d,%d) = %.17g, gathered %.17g", i, c0 + c, got, want);
        }
    ptdp_free(dev, stats);
    ptdp_tensor_free(dev, &lg);
    ptdp_tensor_free(dev, &dl);
    ptdp_tensor_free(dev, &full);
    ptdp_tensor_free(dev, &dfull);
    ptdp_mesh_free(&mesh);
    return 0;
}

START_TEST(test_vocab_parallel_xent_equals_gathered_without_gathering)
{
    static xent_arg a;
    memset(&a, 0, sizeof a);
    a.tol = sizeof(ptdp_real) == sizeof(double) ? 1e-12 : 1e-6;
    /* tp 8 too: two classes per rank */
    int n = _i < NTPS ? TPS[_i] : 8;
    launch(n, xent_device, &a, PTDP_ALGO_DEFAULT);
    assert_verdicts(&a.v, n, "vocab-parallel cross-entropy");
}
END_TEST

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
static const ptdp_model_config COUNT_CFG = { .d_in = 4, .hidden = 16, .ffn = 32, .layers = 1, .classes = 8 };

typedef struct {
    int layers;
    traffic fwd[PTDP_MAX_DEVICES], bwd[PTDP_MAX_DEVICES];
    verdicts v;
} count_arg;

static int count_device(ptdp_device *dev, void *arg)
{
    count_arg *a = arg;
    ptdp_model_config cfg = COUNT_CFG;
    cfg.layers = a->layers;
    ptdp_mesh mesh;
    ptdp_model m;
    ptdp_mlp_data data;
    int rc;
    if ((rc = tp_mesh(dev, &mesh)) != 0 || (rc = ptdp_model_init(dev, &m, &cfg, &mesh, NULL, 5, 0.0)) != 0 ||
        (rc = ptdp_mlp_data_init(dev, &data, 5, cfg.d_in, cfg.classes)) != 0)
        return rc;
    ptdp_tensor x = make(dev, "x", MB, cfg.d_in);
    int64_t y[MB];
    if (x.data == NULL)
        return PTDP_ENOMEM;
    ptdp_mlp_data_batch(&data, 0, MB, x, y);
    ptdp_acts acts;
    traffic t0 = traffic_now(dev);
    rc = ptdp_model_forward(dev, &m, &acts, &(ptdp_batch){ .first = 0, .rows = x.rows, .x = x, .labels = y }, x, 0, false, NULL);
    a->fwd[dev->rank] = traffic_since(dev, t0);
    EXPECT(&a->v, dev, rc == 0, "forward returned %d", rc);
    t0 = traffic_now(dev);
    rc = ptdp_model_backward(dev, &m, &acts, NULL, 1.0 / MB, NULL);
    a->bwd[dev->rank] = traffic_since(dev, t0);
    EXPECT(&a->v, dev, rc == 0, "backward returned %d", rc);
    ptdp_tensor_free(dev, &x);
    ptdp_mlp_data_free(dev, &data);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return 0;
}

START_TEST(test_mlp_block_one_all_reduce_each_way)
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
        launch(n, count_device, &a[k], algo);
        assert_verdicts(&a[k].v, n, "MLP traffic");
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
static const ptdp_model_config REP_CFG = { .d_in = 6, .hidden = 8, .ffn = 32, .layers = 3, .classes = 8 };
enum { RB = 8, RSTEPS = 4 };

static int train_a_little(ptdp_device *dev, ptdp_model *m, ptdp_mlp_data *data, int steps, ptdp_real *opt_m,
                          ptdp_real *opt_v)
{
    ptdp_tensor x = make(dev, "x", RB, m->cfg.d_in);
    int64_t y[RB];
    if (x.data == NULL)
        return PTDP_ENOMEM;
    ptdp_adamw_config ac = ptdp_adamw_default_config();
    ac.lr = 1e-2;
    int rc = 0;
    for (int s = 0; rc == 0 && s < steps; s++) {
        ptdp_acts acts;
        ptdp_mlp_data_batch(data, (int64_t)s * RB, RB, x, y);
        if ((rc = ptdp_model_forward(dev, m, &acts, &(ptdp_batch){ .first = (int64_t)s * RB, .rows = x.rows, .x = x, .labels = y }, x, s, false, NULL)) != 0 ||
            (rc = ptdp_model_backward(dev, m, &acts, NULL, 1.0 / RB, NULL)) != 0)
            break;
        ptdp_adamw_step(m->flat_w, m->flat_g, opt_m, opt_v, m->numel, &ac, s + 1);
        memset(m->flat_g, 0, m->numel * sizeof(ptdp_real));
    }
    ptdp_tensor_free(dev, &x);
    return rc;
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
    verdicts *v = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    ptdp_mlp_data data;
    int rc;
    if ((rc = tp_mesh(dev, &mesh)) != 0 || (rc = ptdp_model_init(dev, &m, &REP_CFG, &mesh, NULL, 9, 0.1)) != 0 ||
        (rc = ptdp_mlp_data_init(dev, &data, 9, REP_CFG.d_in, REP_CFG.classes)) != 0)
        return rc;
    ptdp_real *opt = ptdp_alloc(dev, 2 * m.numel * sizeof(ptdp_real), PTDP_MEM_OPTIM, "adamw m, v");
    if (opt == NULL)
        return PTDP_ENOMEM;
    const ptdp_param *in_w = ptdp_mlp_of(&m)->in_w;
    ptdp_real *in_w0 = malloc(ptdp_tensor_numel(in_w->w) * sizeof(ptdp_real));
    if (in_w0 == NULL)
        return PTDP_ENOMEM;
    memcpy(in_w0, in_w->w.data, ptdp_tensor_numel(in_w->w) * sizeof(ptdp_real));
    if ((rc = train_a_little(dev, &m, &data, RSTEPS, opt, opt + m.numel)) != 0)
        return rc;
    EXPECT(v, dev, memcmp(in_w0, in_w->w.data, ptdp_tensor_numel(in_w->w) * sizeof(ptdp_real)) != 0,
           "in.weight did not train");
    free(in_w0);

    int replicated = 0;
    for (int i = 0; i < m.nparams; i++) {
        const ptdp_param *p = &m.params[i];
        int same = same_on_every_tp_rank(dev, mesh.tp_comm, p);
        if (same < 0)
            return same;
        if (p->shard == PTDP_SHARD_NONE) {
            replicated++;
            EXPECT(v, dev, same == 1, "replicated %s differs between TP ranks after %d steps", p->name, RSTEPS);
        } else if (mesh.tp > 1) {
            /* the comparison can tell: different shards do differ */
            EXPECT(v, dev, same == 0, "shards of %s are identical on every rank", p->name);
        }
    }
    EXPECT(v, dev, replicated == 2 + REP_CFG.layers,
           "%d replicated parameters, want in.weight, in.bias and %d fc2.bias", replicated, REP_CFG.layers);
    ptdp_free(dev, opt);
    ptdp_mlp_data_free(dev, &data);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return 0;
}

START_TEST(test_replicated_parameters_stay_bit_identical)
{
    static verdicts v;
    memset(&v, 0, sizeof v);
    int n = _i == 0 ? 2 : 4;
    launch(n, replicas_device, &v, PTDP_ALGO_DEFAULT);
    assert_verdicts(&v, n, "replicas");
}
END_TEST

/* ------------------------------------------------------------- dropout */

/* The mask on its own: a split activation's mask on rank r is columns
 * [r F/n, (r+1) F/n) of the one-device mask; a replicated one is the
 * one-device mask itself on every rank. */
START_TEST(test_dropout_mask_is_a_slice_of_the_single_device_mask)
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
static const ptdp_model_config DROP_CFG = { .d_in = 4, .hidden = 16, .ffn = 32, .layers = 2, .classes = 8 };
enum { DB = 8, DL = 2, DFF = 32, DH = 16 };

typedef struct {
    ptdp_real g[PTDP_MAX_DEVICES][DL][DB * DFF];   /* rank r's GELU outputs (its columns) */
    ptdp_real h[PTDP_MAX_DEVICES][DL][DB * DH];    /* block outputs                        */
    double loss[PTDP_MAX_DEVICES];
    verdicts v;
} drop_arg;

static int drop_device(ptdp_device *dev, void *arg)
{
    drop_arg *a = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    ptdp_mlp_data data;
    int rc;
    if ((rc = tp_mesh(dev, &mesh)) != 0 || (rc = ptdp_model_init(dev, &m, &DROP_CFG, &mesh, NULL, 11, 0.5)) != 0 ||
        (rc = ptdp_mlp_data_init(dev, &data, 11, DROP_CFG.d_in, DROP_CFG.classes)) != 0)
        return rc;
    ptdp_tensor x = make(dev, "x", DB, DROP_CFG.d_in);
    int64_t y[DB];
    if (x.data == NULL)
        return PTDP_ENOMEM;
    const int64_t first = 3 * DB;     /* step 3's samples: the masks key on global sample indices */
    ptdp_mlp_data_batch(&data, first, DB, x, y);
    ptdp_acts acts;
    if ((rc = ptdp_model_forward(dev, &m, &acts, &(ptdp_batch){ .first = first, .rows = x.rows, .x = x, .labels = y }, x, 3, false, NULL)) != 0)
        return rc;
    const ptdp_mlp_saved *sv = ptdp_mlp_saved_of(&acts);
    for (int l = 0; l < DL; l++) {
        ptdp_tensor_copy(ptdp_tensor_wrap(a->g[dev->rank][l], DB, ptdp_mlp_of(&m)->ffn_local), sv->g[l]);
        ptdp_tensor_copy(ptdp_tensor_wrap(a->h[dev->rank][l], DB, DH), sv->h[l + 1]);
    }
    a->loss[dev->rank] = acts.loss_sum;
    rc = ptdp_model_backward(dev, &m, &acts, NULL, 1.0 / DB, NULL);
    ptdp_tensor_free(dev, &x);
    ptdp_mlp_data_free(dev, &data);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return rc;
}

START_TEST(test_dropout_masks_in_the_model)
{
    static drop_arg one, many;
    memset(&one, 0, sizeof one);
    memset(&many, 0, sizeof many);
    int n = _i == 0 ? 2 : 4, c = DFF / n;
    double tol = PTDP_TOLERANCE;
    launch(1, drop_device, &one, PTDP_ALGO_DEFAULT);
    launch(n, drop_device, &many, PTDP_ALGO_DEFAULT);
    assert_verdicts(&many.v, n, "dropout");
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
    verdicts v;
} norm_arg;

static int norm_device(ptdp_device *dev, void *arg)
{
    norm_arg *a = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    ptdp_mlp_data data;
    int rc;
    if ((rc = tp_mesh(dev, &mesh)) != 0 || (rc = ptdp_model_init(dev, &m, &REP_CFG, &mesh, NULL, 13, 0.0)) != 0 ||
        (rc = ptdp_mlp_data_init(dev, &data, 13, REP_CFG.d_in, REP_CFG.classes)) != 0)
        return rc;
    ptdp_tensor x = make(dev, "x", RB, REP_CFG.d_in);
    int64_t y[RB];
    if (x.data == NULL)
        return PTDP_ENOMEM;
    ptdp_mlp_data_batch(&data, 0, RB, x, y);
    ptdp_acts acts;
    if ((rc = ptdp_model_forward(dev, &m, &acts, &(ptdp_batch){ .first = 0, .rows = x.rows, .x = x, .labels = y }, x, 0, false, NULL)) != 0 ||
        (rc = ptdp_model_backward(dev, &m, &acts, NULL, 1.0 / RB, NULL)) != 0 ||
        (rc = ptdp_model_grad_sumsq(dev, &m, &a->sumsq[dev->rank])) != 0)
        return rc;
    double naive = ptdp_sum_squares(m.flat_g, m.numel), rep = 0;
    for (int i = 0; i < m.nparams; i++)
        if (m.params[i].shard == PTDP_SHARD_NONE)
            rep += ptdp_sum_squares(m.params[i].g.data, ptdp_tensor_numel(m.params[i].g));
    if (mesh.tp > 1 && (rc = ptdp_all_reduce(mesh.tp_comm, &naive, &naive, 1, PTDP_F64, PTDP_SUM)) != 0)
        return rc;
    a->naive[dev->rank] = naive;
    a->replicated[dev->rank] = rep;
    ptdp_tensor_free(dev, &x);
    ptdp_mlp_data_free(dev, &data);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return 0;
}

START_TEST(test_grad_norm_counts_each_parameter_once)
{
    static norm_arg one, many;
    memset(&one, 0, sizeof one);
    memset(&many, 0, sizeof many);
    int n = _i == 0 ? 2 : 4;
    double tol = 10 * PTDP_TOLERANCE;
    launch(1, norm_device, &one, PTDP_ALGO_DEFAULT);
    launch(n, norm_device, &many, PTDP_ALGO_DEFAULT);
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
START_TEST(test_parameter_memory_falls_as_one_over_tp)
{
    const ptdp_model_config mc = { .d_in = 4, .hidden = 8, .ffn = 64, .layers = 2, .classes = 32 };
    const int tps[] = { 1, 2, 4, 8 };
    size_t peak[4];
    size_t rep = (size_t)mc.hidden * mc.d_in + mc.hidden + (size_t)mc.layers * mc.hidden;
    size_t split = (size_t)mc.layers * (2 * (size_t)mc.ffn * mc.hidden + mc.ffn) +
                   (size_t)mc.classes * mc.hidden + mc.classes;
    for (int k = 0; k < 4; k++) {
        ptdp_train_config c = {
            .model = mc, .dp = 1, .tp = tps[k], .pp = 1, .micro_batches = 1, .batch = 8, .steps = 1,
            .optimizer = PTDP_OPT_ADAMW, .lr = 1e-3, .bucket_mb = 0.25, .seed = 1, .schedule = "1f1b",
        };
        ptdp_launch_result lr;
        ptdp_launch_opts o = { .watchdog_s = 20, .result = &lr };
        ptdp_train_result res;
        char msg[PTDP_MSG_MAX];
        ck_assert_msg(ptdp_train(&c, &o, NULL, NULL, &res, msg, sizeof msg) == 0, "%s", msg);
        size_t want = (rep + split / (size_t)tps[k]) * sizeof(ptdp_real);
        for (int r = 0; r < tps[k]; r++) {
            ck_assert_msg(lr.devices[r].mem.peak[PTDP_MEM_PARAMS] == want, "tp=%d device %d: %zu parameter bytes, "
                          "want (%zu + %zu/%d) x %zu = %zu", tps[k], r, lr.devices[r].mem.peak[PTDP_MEM_PARAMS],
                          rep, split, tps[k], sizeof(ptdp_real), want);
            ck_assert_uint_eq(lr.devices[r].mem.peak[PTDP_MEM_GRADS], want);   /* gradients mirror them */
        }
        peak[k] = lr.devices[0].mem.peak[PTDP_MEM_PARAMS];
        ptdp_launch_result_free(&lr);
        ptdp_train_result_free(&res);
    }
    double ratio = (double)peak[2] / (double)peak[0];
    ck_assert_msg(ratio > 0.25 && ratio < 0.27, "tp=4 holds %.4f of tp=1's parameters", ratio);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tp");
    TCase *ops = tcase_create("operators");
    tcase_set_timeout(ops, 30);
    tcase_add_loop_test(ops, test_f_and_g_sum_over_ranks, 0, NTPS);
    tcase_add_loop_test(ops, test_gather_and_scatter_concatenate_in_rank_order, 0, NTPS);
    tcase_add_loop_test(ops, test_column_parallel_linear_equals_dense, 0, NTPS);
    tcase_add_loop_test(ops, test_row_parallel_linear_equals_dense, 0, NTPS);
    tcase_add_loop_test(ops, test_vocab_parallel_xent_equals_gathered_without_gathering, 0, NTPS + 1);
    suite_add_tcase(s, ops);

    TCase *model = tcase_create("model");
    tcase_set_timeout(model, 30);
    tcase_add_loop_test(model, test_mlp_block_one_all_reduce_each_way, 0, 2 * NTPS);
    tcase_add_loop_test(model, test_replicated_parameters_stay_bit_identical, 0, 2);
    tcase_add_test(model, test_dropout_mask_is_a_slice_of_the_single_device_mask);
    tcase_add_loop_test(model, test_dropout_masks_in_the_model, 0, 2);
    tcase_add_loop_test(model, test_grad_norm_counts_each_parameter_once, 0, 2);
    tcase_add_test(model, test_parameter_memory_falls_as_one_over_tp);
    suite_add_tcase(s, model);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
