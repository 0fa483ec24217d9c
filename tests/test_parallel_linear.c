/*
 * test_parallel_linear.c — the one parallel-linear op (parallel_linear.h)
 * against one device's nn.Linear.
 *
 *   split    column- and row-parallel layers on 1, 2 and 4 ranks give one
 *            device's y, dx, dW and db exactly (small integers: every sum
 *            is exact in any order), the bias once
 *   group    a group of layers on their rows of a stacked input gives its
 *            members' results one by one, with ONE all-reduce for a
 *            row-parallel group's outputs
 *   recipe   bf16 rounds a complete output (column) and leaves a row
 *            layer's partial sums alone
 *   clock    a call that ends a piece charges flops / peak, one that does
 *            not charges nothing
 *   wgrad    with a sink dW waits for W, which then adds the immediate bits
 *            and charges what the layer said
 */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "ptdp/bf16.h"
#include "ptdp/clock.h"
#include "ptdp/mesh.h"
#include "ptdp/ops.h"
#include "ptdp/parallel_linear.h"
#include "ptdp/wgrad.h"

static const harness_tcase linear_tests = { .name = "parallel_linear", .timeout_s = 60 };

static const int TPS[] = { 1, 2, 4 };
#define NTPS 3
#define B 5
#define IN 8
#define OUT 12

/* Small integers: every product and sum below is exact. */
static void fill(ptdp_tensor t, int salt)
{
    for (int i = 0; i < t.rows; i++)
        for (int j = 0; j < t.cols; j++)
            *ptdp_at(t, i, j) = (ptdp_real)((i * 3 + j * 5 + salt) % 7 - 3);
}

static int alloc(ptdp_device *dev, ptdp_tensor *t, int rows, int cols)
{
    return ptdp_tensor_alloc(dev, t, "test", PTDP_MEM_OTHER, rows, cols);
}

static int expect_same(ptdp_device *dev, const char *what, ptdp_tensor got, ptdp_tensor want)
{
    for (int i = 0; i < got.rows; i++)
        for (int j = 0; j < got.cols; j++)
            DEVICE_CHECK(dev, *ptdp_at(got, i, j) == *ptdp_at(want, i, j), "%s (%d,%d) = %g, want %g", what, i, j,
                         (double)*ptdp_at(got, i, j), (double)*ptdp_at(want, i, j));
    return 0;
}

/* One device's layer: y = x W^T + b, and its backward from dy. */
typedef struct {
    ptdp_tensor x, w, b, y, dy, dx, dw, db;
} dense;

static int dense_init(ptdp_device *dev, dense *d)
{
    DEVICE_TRY(alloc(dev, &d->x, B, IN));
    DEVICE_TRY(alloc(dev, &d->w, OUT, IN));
    DEVICE_TRY(alloc(dev, &d->b, 1, OUT));
    DEVICE_TRY(alloc(dev, &d->y, B, OUT));
    DEVICE_TRY(alloc(dev, &d->dy, B, OUT));
    DEVICE_TRY(alloc(dev, &d->dx, B, IN));
    DEVICE_TRY(alloc(dev, &d->dw, OUT, IN));
    DEVICE_TRY(alloc(dev, &d->db, 1, OUT));
    fill(d->x, 1);
    fill(d->w, 2);
    fill(d->b, 3);
    fill(d->dy, 4);
    ptdp_linear_forward(d->y, d->x, d->w, &d->b);
    ptdp_linear_backward(&d->dx, d->dw, &d->db, d->dy, d->x, d->w, false);
    return 0;
}

/* A parameter of this rank: its weights w and its gradient g. */
static int param(ptdp_device *dev, ptdp_param *p, ptdp_tensor whole_part)
{
    memset(p, 0, sizeof *p);
    DEVICE_TRY(alloc(dev, &p->w, whole_part.rows, whole_part.cols));
    DEVICE_TRY(alloc(dev, &p->g, whole_part.rows, whole_part.cols));
    ptdp_tensor_copy(p->w, whole_part);
    return 0;
}

/* ------------------------------------------------------------- split */

static int split_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_mesh mesh;
    DEVICE_TRY(ptdp_mesh_init(dev, 1, dev->world_size, 1, &mesh));
    const int n = mesh.tp, r = mesh.tp_rank, ol = OUT / n, il = IN / n;
    dense d;
    DEVICE_TRY(dense_init(dev, &d));
    ptdp_linear_pass c = { .dev = dev, .tp = mesh.tp_comm };

    /* column: my rows of W and b, my columns of y; dx summed by f */
    ptdp_param w, b;
    ptdp_tensor y, dx;
    DEVICE_TRY(param(dev, &w, ptdp_tensor_rows(d.w, r * ol, ol)));
    DEVICE_TRY(param(dev, &b, ptdp_tensor_cols(d.b, r * ol, ol)));
    DEVICE_TRY(alloc(dev, &y, B, ol));
    DEVICE_TRY(alloc(dev, &dx, B, IN));
    const ptdp_linear_layer col = { .split = PTDP_SPLIT_COLUMN, .w = &w, .b = &b };
    DEVICE_TRY(ptdp_parallel_linear_forward(&c, &col, y, d.x, NULL));
    DEVICE_TRY(expect_same(dev, "column y", y, ptdp_tensor_cols(d.y, r * ol, ol)));
    ptdp_tensor dy = ptdp_tensor_cols(d.dy, r * ol, ol);
    DEVICE_TRY(ptdp_parallel_linear_backward(&c, &col, &dx, dy, d.x, NULL));
    DEVICE_TRY(expect_same(dev, "column dx (f)", dx, d.dx));
    DEVICE_TRY(expect_same(dev, "column dW", w.g, ptdp_tensor_rows(d.dw, r * ol, ol)));
    DEVICE_TRY(expect_same(dev, "column db", b.g, ptdp_tensor_cols(d.db, r * ol, ol)));

    /* row: my columns of W and x; y summed by g, the bias once */
    ptdp_param wr, br;
    ptdp_tensor yr, dxr, xr;
    DEVICE_TRY(param(dev, &wr, ptdp_tensor_cols(d.w, r * il, il)));
    DEVICE_TRY(param(dev, &br, d.b));
    DEVICE_TRY(alloc(dev, &yr, B, OUT));
    DEVICE_TRY(alloc(dev, &dxr, B, il));
    DEVICE_TRY(alloc(dev, &xr, B, il));
    ptdp_tensor_copy(xr, ptdp_tensor_cols(d.x, r * il, il));
    const ptdp_linear_layer row = { .split = PTDP_SPLIT_ROW, .w = &wr, .b = &br };
    DEVICE_TRY(ptdp_parallel_linear_forward(&c, &row, yr, xr, NULL));
    DEVICE_TRY(expect_same(dev, "row y (g, the bias once)", yr, d.y));
    DEVICE_TRY(ptdp_parallel_linear_backward(&c, &row, &dxr, d.dy, xr, NULL));
    DEVICE_TRY(expect_same(dev, "row dx", dxr, ptdp_tensor_cols(d.dx, r * il, il)));
    DEVICE_TRY(expect_same(dev, "row dW", wr.g, ptdp_tensor_cols(d.dw, r * il, il)));
    DEVICE_TRY(expect_same(dev, "row db (whole, every rank)", br.g, d.db));
    ptdp_mesh_free(&mesh);
    return 0;
}

LOOP_TEST(linear_tests, test_column_and_row_give_one_devices_linear, NTPS)
{
    harness_launch_ok(TPS[_i], split_device, NULL, NULL, NULL);
}
END_TEST

/* ------------------------------------------------------------- group */

/* Three members on rows 2, 0 and 3 of a stacked input, each its own W. */
#define MEMBERS 3
static const int ROWS[MEMBERS] = { 2, 0, 3 };

typedef struct {
    ptdp_param w[MEMBERS], b[MEMBERS];
    ptdp_linear_split split;
} members;

static ptdp_linear_layer member(const void *of, int i)
{
    const members *m = of;
    return (ptdp_linear_layer){ .split = m->split, .w = &m->w[i], .b = &m->b[i] };
}

static int group_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_mesh mesh;
    DEVICE_TRY(ptdp_mesh_init(dev, 1, dev->world_size, 1, &mesh));
    const int n = mesh.tp, r = mesh.tp_rank, il = IN / n, R = 5;
    ptdp_linear_pass c = { .dev = dev, .tp = mesh.tp_comm };
    members m = { .split = PTDP_SPLIT_ROW };
    ptdp_tensor x, y, want, dy, dx, dxw;
    DEVICE_TRY(alloc(dev, &x, R, il));
    DEVICE_TRY(alloc(dev, &y, R, OUT));
    DEVICE_TRY(alloc(dev, &want, R, OUT));
    DEVICE_TRY(alloc(dev, &dy, R, OUT));
    DEVICE_TRY(alloc(dev, &dx, R, il));
    DEVICE_TRY(alloc(dev, &dxw, R, il));
    fill(x, 7 + r);
    fill(dy, 8);
    for (int i = 0; i < MEMBERS; i++) {
        ptdp_tensor w, b;
        DEVICE_TRY(alloc(dev, &w, OUT, il));
        DEVICE_TRY(alloc(dev, &b, 1, OUT));
        fill(w, 10 * i + r);
        fill(b, i);
        DEVICE_TRY(param(dev, &m.w[i], w));
        DEVICE_TRY(param(dev, &m.b[i], b));
    }
    /* the members one by one: each its own g */
    for (int i = 0, off = 0; i < MEMBERS; off += ROWS[i], i++)
        if (ROWS[i] > 0) {
            const ptdp_linear_layer l = member(&m, i);
            DEVICE_TRY(ptdp_parallel_linear_forward(&c, &l, ptdp_tensor_rows(want, off, ROWS[i]),
                                                    ptdp_tensor_rows(x, off, ROWS[i]), NULL));
            ptdp_tensor dxi = ptdp_tensor_rows(dxw, off, ROWS[i]);
            DEVICE_TRY(ptdp_parallel_linear_backward(&c, &l, &dxi, ptdp_tensor_rows(dy, off, ROWS[i]),
                                                     ptdp_tensor_rows(x, off, ROWS[i]), NULL));
        }
    /* the group: one g for all */
    const ptdp_linear_group g = { PTDP_SPLIT_ROW, MEMBERS, ROWS, member, &m };
    const unsigned long long calls0 = dev->stats.calls[PTDP_COLL_ALL_REDUCE];
    DEVICE_TRY(ptdp_parallel_linear_group_forward(&c, &g, y, x, NULL));
    DEVICE_CHECK(dev, dev->stats.calls[PTDP_COLL_ALL_REDUCE] - calls0 == (n > 1 ? 1u : 0u),
                 "a row-parallel group made %llu all-reduces", dev->stats.calls[PTDP_COLL_ALL_REDUCE] - calls0);
    DEVICE_TRY(expect_same(dev, "group y", y, want));
    DEVICE_TRY(ptdp_parallel_linear_group_backward(&c, &g, &dx, dy, x, NULL));
    DEVICE_TRY(expect_same(dev, "group dx", dx, dxw));
    ptdp_mesh_free(&mesh);
    return 0;
}

LOOP_TEST(linear_tests, test_a_group_is_its_members_with_one_join, NTPS)
{
    harness_launch_ok(TPS[_i], group_device, NULL, NULL, NULL);
}
END_TEST

/* ------------------------------------------- recipe, clock, W's sink */

static int one_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    dense d;
    DEVICE_TRY(dense_init(dev, &d));
    for (int i = 0; i < B; i++)   /* not bf16 values: rounding shows */
        for (int k = 0; k < IN; k++)
            *ptdp_at(d.x, i, k) = (ptdp_real)(0.1 + 0.013 * i - 0.007 * k);
    ptdp_linear_forward(d.y, d.x, d.w, &d.b);
    ptdp_param w, b;
    ptdp_tensor y;
    DEVICE_TRY(param(dev, &w, d.w));
    DEVICE_TRY(param(dev, &b, d.b));
    DEVICE_TRY(alloc(dev, &y, B, OUT));
    double w0 = ptdp_wall_now();
    ptdp_linear_pass c = { .dev = dev, .recipe = PTDP_RECIPE_BF16, .what = "test", .wwhat = "test W", .w0 = &w0 };

    /* bf16: a column output rounded where made, a row's partial sums not */
    const ptdp_linear_layer col = { .split = PTDP_SPLIT_COLUMN, .w = &w, .b = &b };
    const ptdp_linear_layer row = { .split = PTDP_SPLIT_ROW, .w = &w, .b = &b };
    DEVICE_TRY(ptdp_parallel_linear_forward(&c, &col, y, d.x, NULL));
    bool rounded = true, differs = false;
    for (int i = 0; i < B; i++)
        for (int o = 0; o < OUT; o++) {
            rounded &= *ptdp_at(y, i, o) == ptdp_bf16_round(*ptdp_at(d.y, i, o));
            differs |= *ptdp_at(y, i, o) != *ptdp_at(d.y, i, o);
        }
    DEVICE_CHECK(dev, rounded && differs, "bf16's column output is not the rounded product");
    DEVICE_TRY(ptdp_parallel_linear_forward(&c, &row, y, d.x, NULL));
    DEVICE_TRY(expect_same(dev, "bf16's row partial sums", y, d.y));

    /* the clock: a charge is flops / peak, no charge nothing */
    double t0 = dev->clock.now;
    DEVICE_TRY(ptdp_parallel_linear_forward(&c, &row, y, d.x, NULL));
    DEVICE_CHECK(dev, dev->clock.now == t0, "a call that ends no piece charged %g s", dev->clock.now - t0);
    const ptdp_linear_charge cost = { .flops = 1e6 };
    DEVICE_TRY(ptdp_parallel_linear_forward(&c, &row, y, d.x, &cost));
    const double want = 1e6 / dev->profile->peak_flops;
    DEVICE_CHECK(dev, fabs(dev->clock.now - t0 - want) <= 1e-9 * want, "charged %g s, want %g s",
                 dev->clock.now - t0, want);

    /* W's sink: dW waits (db does not), then W adds the immediate bits */
    ptdp_wgrad wg;
    ptdp_wgrad_init(&wg, NULL, 0);
    c.wg = &wg;
    c.recipe = PTDP_RECIPE_STORAGE;
    ptdp_tensor dx;
    DEVICE_TRY(alloc(dev, &dx, B, IN));
    const ptdp_linear_layer later = { .split = PTDP_SPLIT_NONE, .w = &w, .b = &b, .w_flops = 2e6 };
    DEVICE_CHECK(dev, ptdp_linear_pass_defers(&c), "a pass with a sink defers dW");
    DEVICE_TRY(ptdp_parallel_linear_backward(&c, &later, &dx, d.dy, d.x, NULL));
    bool zero = true;
    for (int o = 0; o < OUT; o++)
        for (int k = 0; k < IN; k++)
            zero &= *ptdp_at(w.g, o, k) == 0;
    DEVICE_CHECK(dev, zero && wg.n == 1, "dW ran in B (%d records)", wg.n);
    DEVICE_TRY(expect_same(dev, "db in B", b.g, d.db));
    t0 = dev->clock.now;
    DEVICE_TRY(ptdp_wgrad_run(dev, &wg));
    DEVICE_CHECK(dev, fabs(dev->clock.now - t0 - 2e6 / dev->profile->peak_flops) <= 1e-9 * want,
                 "W charged %g s", dev->clock.now - t0);
    ptdp_tensor once;
    DEVICE_TRY(alloc(dev, &once, OUT, IN));
    ptdp_linear_backward(NULL, once, NULL, d.dy, d.x, d.w, false);
    DEVICE_TRY(expect_same(dev, "deferred dW", w.g, once));
    return 0;
}

TEST(linear_tests, test_recipe_clock_and_deferred_weight_gradient)
{
    harness_launch_ok(1, one_device, NULL, NULL, NULL);
}
END_TEST

/* A split backward's halves add up to the whole: B's dx and db, W's dW. */
TEST(linear_tests, test_backward_flops_halves)
{
    for (int b = 1; b < 40; b += 7)
        ck_assert(ptdp_linear_flops_backward_input(b, 24, 40) + ptdp_linear_flops_backward_weight(b, 24, 40) ==
                  ptdp_linear_flops_backward(b, 24, 40));
}
END_TEST

int main(void)
{
    return harness_main("parallel_linear");
}
