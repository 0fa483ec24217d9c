/*
 * check.c — lesson 03: does your tensor-parallel MLP block equal the dense one?
 *
 * One block, y = GELU(x A^T + a) B^T + b (A = fc1's weight, B = fc2's),
 * with a batch of 6 samples, h = 8 and ffn = 24, computed densely on the
 * host (ptdp's ops, one device's worth) and then by your functions on
 * tp = 1, 2, 3 and 4 devices:
 *
 *   shards     lesson_column_shard(A, a), lesson_row_shard(B)
 *   forward    a_r = column_forward(x)   g_r = GELU(a_r)   y = row_forward(g_r)
 *   backward   dg_r = row_backward(dy)   da_r = GELU'(a_r) dg_r   dx = column_backward(da_r)
 *
 * Every rank must hold y and dx equal to the dense ones (double, 1e-10),
 * its slices of dA, da, dB equal to the dense gradients' slices, and db
 * equal to the dense db; and the block must cost exactly one all-reduce of
 * batch x h reals in the forward (g) and one in the backward (f).
 *
 * The gradients the contract says are overwritten (dx of the column-parallel
 * backward, dx_local of the row-parallel one) start filled with stale
 * numbers, as a reused buffer would be: accumulating into them shows.
 *
 * Each rank remembers which of your functions it is in; if the library
 * refuses a call there (a view out of range, shapes that do not fit:
 * PTDP_REQUIRE fails the device with the call's name), the check names your
 * function, its blank and the shapes it was given.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lesson.h"
#include "tutorial.h"

#include "ptdp/error.h"
#include "ptdp/ops.h"
#include "ptdp/rng.h"
#include "ptdp/comm.h"

enum { BATCH = 6, H = 8, FF = 24, MAX_TP = 4 };

/* The dense block: parameters, input, upstream gradient, and what one
 * device computes from them. */
typedef struct {
    ptdp_real A[FF * H], a[FF], B[H * FF], b[H];     /* fc1 [FF, H], fc2 [H, FF] */
    ptdp_real x[BATCH * H], dy[BATCH * H];
    ptdp_real pre[BATCH * FF], act[BATCH * FF], y[BATCH * H];
    ptdp_real dA[FF * H], da[FF], dB[H * FF], db[H], dx[BATCH * H];
    ptdp_real dg[BATCH * FF];                        /* fc2's dx: dy B, before GELU' */
    ptdp_real stale_dx[BATCH * H], stale_dg[BATCH * FF];   /* "what dx held before" */
} dense_block;

static void fill(ptdp_real *v, size_t n, const char *stream, double scale)
{
    uint64_t key = ptdp_rng_key(3, stream);
    for (size_t i = 0; i < n; i++)
        v[i] = (ptdp_real)(scale * ptdp_rng_normal(key, i));
}

static ptdp_tensor T(ptdp_real *data, int rows, int cols)
{
    return ptdp_tensor_wrap(data, rows, cols);
}

static void dense_forward_backward(dense_block *d)
{
    fill(d->A, FF * H, "A", 0.5);
    fill(d->a, FF, "a", 0.5);
    fill(d->B, H * FF, "B", 0.5);
    fill(d->b, H, "b", 0.5);
    fill(d->x, BATCH * H, "x", 1.0);
    fill(d->dy, BATCH * H, "dy", 1.0);
    fill(d->stale_dx, BATCH * H, "stale dx", 1.0);
    fill(d->stale_dg, BATCH * FF, "stale dg", 1.0);
    ptdp_tensor a = T(d->a, 1, FF), b = T(d->b, 1, H), db = T(d->db, 1, H), da = T(d->da, 1, FF);
    ptdp_tensor dx = T(d->dx, BATCH, H);
    ptdp_real dact[BATCH * FF];
    ptdp_tensor dact_t = T(dact, BATCH, FF);

    ptdp_linear_forward(T(d->pre, BATCH, FF), T(d->x, BATCH, H), T(d->A, FF, H), &a);
    ptdp_gelu_forward(T(d->act, BATCH, FF), T(d->pre, BATCH, FF));
    ptdp_linear_forward(T(d->y, BATCH, H), T(d->act, BATCH, FF), T(d->B, H, FF), &b);

    ptdp_linear_backward(&dact_t, T(d->dB, H, FF), &db, T(d->dy, BATCH, H), T(d->act, BATCH, FF),
                         T(d->B, H, FF), false);
    memcpy(d->dg, dact, sizeof d->dg);
    ptdp_gelu_backward(dact_t, dact_t, T(d->pre, BATCH, FF));
    ptdp_linear_backward(&dx, T(d->dA, FF, H), &da, dact_t, T(d->x, BATCH, H), T(d->A, FF, H), false);
}

/* ------------------------------------------------- your functions */

/* Which of your functions a rank is in, so that a device failed inside one
 * (the library refused a call: PTDP_REQUIRE) is explained in its terms. */
typedef enum {
    IN_NONE = -1,
    IN_COLUMN_SHARD,
    IN_ROW_SHARD,
    IN_COLUMN_FORWARD,
    IN_ROW_FORWARD,
    IN_ROW_BACKWARD,
    IN_COLUMN_BACKWARD,
} student_fn;

static const struct {
    const char *name;
    int blank;          /* 0: the worked example, no blank */
} student_fns[] = {
    [IN_COLUMN_SHARD] = { "lesson_column_shard", 1 },
    [IN_ROW_SHARD] = { "lesson_row_shard", 2 },
    [IN_COLUMN_FORWARD] = { "lesson_column_forward", 0 },
    [IN_ROW_FORWARD] = { "lesson_row_forward", 4 },
    [IN_ROW_BACKWARD] = { "lesson_row_backward", 5 },
    [IN_COLUMN_BACKWARD] = { "lesson_column_backward", 3 },
};

/* The shapes (rows x cols) of what the check passes to fn on tp ranks. */
static void describe_arguments(student_fn fn, int tp, char *out, size_t len)
{
    int n = FF / tp;
    switch (fn) {
    case IN_COLUMN_SHARD:
        snprintf(out, len, "w (fc1's weight) %d x %d, b %d x %d", FF, H, 1, FF);
        break;
    case IN_ROW_SHARD:
        snprintf(out, len, "w (fc2's weight) %d x %d", H, FF);
        break;
    case IN_COLUMN_FORWARD:
        snprintf(out, len, "y_local %d x %d, x %d x %d, w_local %d x %d, b_local %d x %d", BATCH, n, BATCH, H, n,
                 H, 1, n);
        break;
    case IN_ROW_FORWARD:
        snprintf(out, len, "y %d x %d, x_local %d x %d, w_local %d x %d, b %d x %d", BATCH, H, BATCH, n, H, n, 1,
                 H);
        break;
    case IN_ROW_BACKWARD:
        snprintf(out, len, "dx_local %d x %d, dw_local %d x %d, db %d x %d, dy %d x %d, x_local %d x %d, "
                 "w_local %d x %d", BATCH, n, H, n, 1, H, BATCH, H, BATCH, n, H, n);
        break;
    case IN_COLUMN_BACKWARD:
        snprintf(out, len, "dx %d x %d, dw_local %d x %d, db_local %d x %d, dy_local %d x %d, x %d x %d, "
                 "w_local %d x %d", BATCH, H, n, H, 1, n, BATCH, n, BATCH, H, n, H);
        break;
    default:
        snprintf(out, len, "?");
    }
}

/* The device failed inside fn with the library's message `msg`
 * ("ptdp_tensor_rows: rows [0, 24) of a tensor of 8 rows …"). */
static void explain_refused_call(student_fn fn, int rank, int tp, const char *msg)
{
    char args[256];
    int blank = student_fns[fn].blank, n = FF / tp;
    describe_arguments(fn, tp, args, sizeof args);
    if (blank > 0)
        tutorial_note("Rank %d was in %s (blank %d) when the library refused that call.", rank,
                      student_fns[fn].name, blank);
    else
        tutorial_note("Rank %d was in %s when the library refused that call.", rank, student_fns[fn].name);
    bool rows = strncmp(msg, "ptdp_tensor_rows:", 17) == 0, cols = strncmp(msg, "ptdp_tensor_cols:", 17) == 0;
    if (fn == IN_ROW_SHARD && rows) {
        tutorial_note("ptdp_tensor_rows cuts the outputs: the rows of fc2's weight, %d x %d, which has only %d.",
                      H, FF, H);
        tutorial_note("The row-parallel fc2 is cut by its INPUTS, the columns: rank r owns columns");
        tutorial_note("[r*%d, (r+1)*%d) of all %d rows.  Use ptdp_tensor_cols (blank 2).", n, n, H);
    } else if (fn == IN_COLUMN_SHARD && rows && strstr(msg, "of a tensor of 1 rows") != NULL) {
        tutorial_note("The bias b is one row, 1 x %d: its entries are columns.  Rank r's entries of b", FF);
        tutorial_note("are ptdp_tensor_cols(b, r*%d, %d) (blank 1).", n, n);
    } else if (fn == IN_COLUMN_SHARD && cols) {
        tutorial_note("ptdp_tensor_cols cuts the inputs: the columns of fc1's weight, %d x %d, which has", FF, H);
        tutorial_note("only %d.  The column-parallel fc1 is cut by its OUTPUTS, the rows: rank r owns rows", H);
        tutorial_note("[r*%d, (r+1)*%d) of all %d columns.  Use ptdp_tensor_rows for w (blank 1).", n, n, H);
    } else {
        tutorial_note("Its arguments, on tp %d: %s.", tp, args);
        if (fn == IN_ROW_BACKWARD || fn == IN_COLUMN_BACKWARD)
            tutorial_note("ptdp_linear_backward(&dx, dw, &db, dy, x, w, accumulate_dx): dy is batch x out,\n"
                          "x batch x in, w out x in (ops.h).  Are the arguments in that order?");
        else
            tutorial_note("ptdp_linear_forward(y, x, w, &b or NULL): y is batch x out, x batch x in,\n"
                          "w out x in, b 1 x out; ptdp_add_bias(y, b) (ops.h).  Are the arguments in that order?");
    }
}

/* ------------------------------------------------------- one TP run */

typedef struct {
    int tp;
    const dense_block *dense;
    /* per rank, for the host's verdicts */
    ptdp_real y[MAX_TP][BATCH * H], dx[MAX_TP][BATCH * H], db[MAX_TP][H];
    ptdp_real dA[MAX_TP][FF * H], da[MAX_TP][FF], dB[MAX_TP][H * FF];   /* the local slices */
    ptdp_real dg[MAX_TP][BATCH * FF];      /* lesson_row_backward's dx_local, before GELU' */
    student_fn in_fn[MAX_TP];              /* where each rank is, or was when it failed    */
    unsigned long long fwd_calls[MAX_TP], bwd_calls[MAX_TP];           /* collectives of any kind */
    unsigned long long fwd_reduces[MAX_TP], bwd_reduces[MAX_TP];       /* all-reduces among them  */
    double fwd_bytes[MAX_TP], bwd_bytes[MAX_TP];                        /* all-reduce bytes sent   */
} tp_run;

static unsigned long long collective_calls(const ptdp_comm_stats *s)
{
    unsigned long long n = 0;
    for (int k = 0; k < PTDP_COLL_COUNT; k++)
        n += s->calls[k];
    return n;
}

/* A tensor of the device, holding a copy of `src` (rows x cols) or zeros. */
static int device_tensor(ptdp_device *dev, ptdp_tensor *t, const char *name, int rows, int cols,
                         const ptdp_real *src)
{
    int rc = ptdp_tensor_alloc(dev, t, name, PTDP_MEM_OTHER, rows, cols);
    if (rc == 0 && src != NULL)
        memcpy(t->data, src, (size_t)rows * (size_t)cols * sizeof(ptdp_real));
    return rc;
}

/* Is `v` a rows x cols view whose element (i, j) is whole(i0 + i, j0 + j)? */
static bool is_view_of(ptdp_tensor v, ptdp_tensor whole, int i0, int j0, int rows, int cols)
{
    if (v.rows != rows || v.cols != cols || v.data == NULL)
        return false;
    const ptdp_real *lo = whole.data, *hi = whole.data + ptdp_tensor_numel(whole);
    const ptdp_real *first = v.data, *last = v.data + (size_t)(rows - 1) * (size_t)v.stride + (cols - 1);
    if (first < lo || last >= hi)
        return false;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            if (*ptdp_at(v, i, j) != *ptdp_at(whole, i0 + i, j0 + j))
                return false;
    return true;
}

/* Rank r enters your function fn. */
static void enter_student(tp_run *x, int r, student_fn fn)
{
    x->in_fn[r] = fn;
}

/* …and leaves it with status rc: the device's own failure (a call the
 * library refused inside fn) wins, and then fn stays recorded. */
static int leave_student(tp_run *x, ptdp_device *dev, int rc)
{
    if (dev->status != 0)
        return dev->status;
    if (rc == 0)
        x->in_fn[dev->rank] = IN_NONE;
    return rc;
}

static int check_shards(tp_run *x, ptdp_device *dev, ptdp_comm *tp, ptdp_tensor A, ptdp_tensor a,
                        ptdp_tensor Bw, ptdp_tensor *A_r, ptdp_tensor *a_r, ptdp_tensor *B_r)
{
    int r = ptdp_comm_rank(tp), n = FF / ptdp_comm_size(tp);
    enter_student(x, r, IN_COLUMN_SHARD);
    int rc = leave_student(x, dev, lesson_column_shard(tp, A, a, A_r, a_r));
    if (rc != 0)
        return rc;
    if (!is_view_of(*A_r, A, r * n, 0, n, H) || !is_view_of(*a_r, a, 0, r * n, 1, n))
        return tutorial_device_wrong(dev,
            "rank %d's fc1 shard is %d x %d and its bias %d x %d.\nColumn-parallel splits the OUTPUTS: "
            "rank r owns rows [r*%d, (r+1)*%d) of the %d x %d weight\n(all %d columns, ptdp_tensor_rows) "
            "and the same %d entries of the bias (ptdp_tensor_cols).", r, A_r->rows, A_r->cols, a_r->rows,
            a_r->cols, n, n, FF, H, H, n);
    enter_student(x, r, IN_ROW_SHARD);
    if ((rc = leave_student(x, dev, lesson_row_shard(tp, Bw, B_r))) != 0)
        return rc;
    if (!is_view_of(*B_r, Bw, 0, r * n, H, n))
        return tutorial_device_wrong(dev,
            "rank %d's fc2 shard is %d x %d.\nRow-parallel splits the INPUTS: rank r owns columns "
            "[r*%d, (r+1)*%d) of the %d x %d weight (all %d rows, ptdp_tensor_cols).", r, B_r->rows,
            B_r->cols, n, n, H, FF, H);
    return PTDP_OK;
}

static int tp_device(ptdp_device *dev, void *arg)
{
    tp_run *x = arg;
    const dense_block *d = x->dense;
    ptdp_comm *tp = dev->world;
    int r = dev->rank, n = FF / x->tp, rc;
    ptdp_tensor A, a, Bw, b, in, dy, A_r, a_r, B_r;
    ptdp_tensor pre_r, act_r, y, dact_r, dx, dA_r, da_r, dB_r, db;

    /* Every rank starts with the whole parameters, x and dy (replicated). */
    if ((rc = device_tensor(dev, &A, "A", FF, H, d->A)) || (rc = device_tensor(dev, &a, "a", 1, FF, d->a)) ||
        (rc = device_tensor(dev, &Bw, "B", H, FF, d->B)) || (rc = device_tensor(dev, &b, "b", 1, H, d->b)) ||
        (rc = device_tensor(dev, &in, "x", BATCH, H, d->x)) ||
        (rc = device_tensor(dev, &dy, "dy", BATCH, H, d->dy)) ||
        (rc = device_tensor(dev, &pre_r, "pre_r", BATCH, n, NULL)) ||
        (rc = device_tensor(dev, &act_r, "act_r", BATCH, n, NULL)) ||
        (rc = device_tensor(dev, &y, "y", BATCH, H, NULL)) ||
        (rc = device_tensor(dev, &dact_r, "dact_r", BATCH, n, d->stale_dg)) ||
        (rc = device_tensor(dev, &dx, "dx", BATCH, H, d->stale_dx)) ||
        (rc = device_tensor(dev, &dA_r, "dA_r", n, H, NULL)) ||
        (rc = device_tensor(dev, &da_r, "da_r", 1, n, NULL)) ||
        (rc = device_tensor(dev, &dB_r, "dB_r", H, n, NULL)) ||
        (rc = device_tensor(dev, &db, "db", 1, H, NULL)))
        return rc;
    /* dx and dact_r (row_backward's dx_local) hold stale numbers, as a
     * reused buffer would: the contract says they are overwritten. */
    if ((rc = check_shards(x, dev, tp, A, a, Bw, &A_r, &a_r, &B_r)) != 0)
        return rc;

    const ptdp_comm_stats *st = &dev->stats;
    unsigned long long c0 = collective_calls(st), r0 = st->calls[PTDP_COLL_ALL_REDUCE];
    double b0 = st->bytes_sent[PTDP_COLL_ALL_REDUCE];
    enter_student(x, r, IN_COLUMN_FORWARD);
    if ((rc = leave_student(x, dev, lesson_column_forward(tp, pre_r, in, A_r, a_r))) != 0)
        return rc;
    ptdp_gelu_forward(act_r, pre_r);                       /* on my slice: no communication */
    enter_student(x, r, IN_ROW_FORWARD);
    if ((rc = leave_student(x, dev, lesson_row_forward(tp, y, act_r, B_r, b))) != 0)
        return rc;
    x->fwd_calls[r] = collective_calls(st) - c0;
    x->fwd_reduces[r] = st->calls[PTDP_COLL_ALL_REDUCE] - r0;
    x->fwd_bytes[r] = st->bytes_sent[PTDP_COLL_ALL_REDUCE] - b0;

    c0 = collective_calls(st);
    r0 = st->calls[PTDP_COLL_ALL_REDUCE];
    b0 = st->bytes_sent[PTDP_COLL_ALL_REDUCE];
    enter_student(x, r, IN_ROW_BACKWARD);
    if ((rc = leave_student(x, dev, lesson_row_backward(tp, dact_r, dB_r, db, dy, act_r, B_r))) != 0)
        return rc;
    memcpy(x->dg[r], dact_r.data, (size_t)BATCH * (size_t)n * sizeof(ptdp_real));
    ptdp_gelu_backward(dact_r, dact_r, pre_r);
    enter_student(x, r, IN_COLUMN_BACKWARD);
    if ((rc = leave_student(x, dev, lesson_column_backward(tp, dx, dA_r, da_r, dact_r, in, A_r))) != 0)
        return rc;
    x->bwd_calls[r] = collective_calls(st) - c0;
    x->bwd_reduces[r] = st->calls[PTDP_COLL_ALL_REDUCE] - r0;
    x->bwd_bytes[r] = st->bytes_sent[PTDP_COLL_ALL_REDUCE] - b0;

    memcpy(x->y[r], y.data, sizeof x->y[r]);
    memcpy(x->dx[r], dx.data, sizeof x->dx[r]);
    memcpy(x->db[r], db.data, sizeof x->db[r]);
    memcpy(x->dA[r], dA_r.data, (size_t)n * H * sizeof(ptdp_real));
    memcpy(x->da[r], da_r.data, (size_t)n * sizeof(ptdp_real));
    memcpy(x->dB[r], dB_r.data, (size_t)H * n * sizeof(ptdp_real));
    return PTDP_OK;     /* the arena goes with the device */
}

/* ---------------------------------------------------------- verdicts */

/* Largest |got - want| over rows x cols, got[i][j] against want[i0+i][j0+j]. */
static double max_diff(const ptdp_real *got, int rows, int cols, const ptdp_real *want, int want_cols,
                       int i0, int j0, int *where)
{
    double worst = 0;
    *where = 0;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            double e = fabs((double)got[i * cols + j] - (double)want[(i0 + i) * want_cols + j0 + j]);
            if (e > worst) {
                worst = e;
                *where = i * cols + j;
            }
        }
    return worst;
}

static const double TOL = 1e-10;

static bool check_forward(const tp_run *x, const char *what)
{
    const dense_block *d = x->dense;
    for (int r = 0; r < x->tp; r++) {
        int at;
        double e = max_diff(x->y[r], BATCH, H, d->y, H, 0, 0, &at);
        if (e <= TOL)
            continue;
        tutorial_wrong("%s, forward: rank %d's y[%d][%d] is %.6g; the dense block's is %.6g.", what, r,
                       at / H, at % H, (double)x->y[r][at], (double)d->y[at]);
        /* Was the bias counted tp times? */
        int at2;
        ptdp_real shifted[BATCH * H];
        for (int i = 0; i < BATCH * H; i++)
            shifted[i] = x->y[r][i] - (ptdp_real)(x->tp - 1) * d->b[i % H];
        if (x->tp > 1 && max_diff(shifted, BATCH, H, d->y, H, 0, 0, &at2) <= 1e-9)
            tutorial_note("y is off by exactly (tp - 1) * b: the bias was added on every rank before the sum "
                          "(blank 4).\nAdd it once, after g's all-reduce.");
        else if (x->tp > 1 && x->fwd_reduces[r] == 0)
            tutorial_note("rank %d made no all-reduce in the forward: its y is only its own term x_r B_r^T; "
                          "g's forward sums the terms of all ranks.", r);
        else
            tutorial_note("The row-parallel output is the sum over ranks of x_r B_r^T, plus b once.");
        return false;
    }
    return true;
}

static bool check_backward(const tp_run *x, const char *what)
{
    const dense_block *d = x->dense;
    int n = FF / x->tp;
    for (int r = 0; r < x->tp; r++) {
        int at;
        double e;
        if ((e = max_diff(x->dB[r], H, n, d->dB, FF, 0, r * n, &at)) > TOL) {
            tutorial_wrong("%s, backward: rank %d's fc2 weight gradient differs from the dense one's columns "
                           "[%d, %d) by %.3g.", what, r, r * n, (r + 1) * n, e);
            tutorial_note("dB_r = dy^T x_r: the whole dy (g's backward is the identity) and my input columns.");
            return false;
        }
        if ((e = max_diff(x->db[r], 1, H, d->db, H, 0, 0, &at)) > TOL) {
            tutorial_wrong("%s, backward: rank %d's fc2 bias gradient is %.6g in entry %d; the dense one is %.6g.",
                           what, r, (double)x->db[r][at], at, (double)d->db[at]);
            if (fabs((double)x->db[r][at] - x->tp * (double)d->db[at]) < 1e-9)
                tutorial_note("That is tp times too much: db = colsum dy is already whole on every rank; "
                              "summing it over the ranks adds tp copies.");
            return false;
        }
        if ((e = max_diff(x->dg[r], BATCH, n, d->dg, FF, 0, r * n, &at)) > TOL) {
            int i = at / n, j = at % n;
            tutorial_wrong("%s, backward: rank %d's dx_local from lesson_row_backward, [%d][%d], is %.6g; the "
                           "dense gradient's\nentry there (dy B, column %d) is %.6g.", what, r, i, j,
                           (double)x->dg[r][at], r * n + j, (double)d->dg[i * FF + r * n + j]);
            ptdp_real stale_added[BATCH * FF];
            for (int k = 0; k < BATCH * n; k++)
                stale_added[k] = x->dg[r][k] - d->stale_dg[k];
            if (max_diff(stale_added, BATCH, n, d->dg, FF, 0, r * n, &at) <= 1e-9)
                tutorial_note("It is the gradient plus what dx_local held before: accumulate_dx = true adds "
                              "dy W_r to it.\nThe contract says dx_local is overwritten: pass false (blank 5).");
            else
                tutorial_note("dx_r = dy B_r: the whole dy (g's backward is the identity) times my weight "
                              "columns (blank 5).");
            return false;
        }
        if ((e = max_diff(x->dA[r], n, H, d->dA, H, r * n, 0, &at)) > TOL ||
            (e = max_diff(x->da[r], 1, n, d->da, FF, 0, r * n, &at)) > TOL) {
            tutorial_wrong("%s, backward: rank %d's fc1 gradients differ from the dense ones' rows [%d, %d) "
                           "by %.3g.", what, r, r * n, (r + 1) * n, e);
            tutorial_note("Is dg_r = dy B_r (row-parallel backward) right, with no all-reduce of its own?");
            return false;
        }
        if ((e = max_diff(x->dx[r], BATCH, H, d->dx, H, 0, 0, &at)) > TOL) {
            tutorial_wrong("%s, backward: rank %d's dx[%d][%d] is %.6g; the dense block's is %.6g.", what, r,
                           at / H, at % H, (double)x->dx[r][at], (double)d->dx[at]);
            ptdp_real stale_added[BATCH * H];
            for (int k = 0; k < BATCH * H; k++)
                stale_added[k] = x->dx[r][k] - (ptdp_real)x->tp * d->stale_dx[k];
            if (max_diff(stale_added, BATCH, H, d->dx, H, 0, 0, &at) <= 1e-9) {
                if (x->tp == 1)
                    tutorial_note("It is the gradient plus what dx held before: accumulate_dx = true adds "
                                  "da A to dx.");
                else
                    tutorial_note("It is the gradient plus %d times what dx held before: accumulate_dx = true "
                                  "adds each rank's part\nto its old dx, and f's all-reduce sums all %d of "
                                  "them.", x->tp, x->tp);
                tutorial_note("The contract says dx is overwritten: pass false (blank 3).");
            } else if (x->tp > 1 && x->bwd_reduces[r] == 0) {
                tutorial_note("rank %d made no all-reduce in the backward: its dx is only its own slice's "
                              "part, da_r A_r.\nx fed every rank's outputs; f's backward sums the parts.", r);
            }
            return false;
        }
    }
    return true;
}

static bool check_communication(const tp_run *x, const char *what)
{
    int tp = x->tp;
    /* 2(N-1) chunk messages of ~S/N bytes; chunks differ by one element at most */
    double lo = 2.0 * (tp - 1) * floor((double)BATCH * H / tp) * sizeof(ptdp_real);
    double hi = 2.0 * (tp - 1) * ceil((double)BATCH * H / tp) * sizeof(ptdp_real);
    for (int r = 0; r < tp; r++) {
        const char *phase[2] = { "forward", "backward" };
        unsigned long long calls[2] = { x->fwd_calls[r], x->bwd_calls[r] };
        unsigned long long reduces[2] = { x->fwd_reduces[r], x->bwd_reduces[r] };
        double bytes[2] = { x->fwd_bytes[r], x->bwd_bytes[r] };
        for (int p = 0; p < 2; p++) {
            if (calls[p] == 1 && reduces[p] == 1 && bytes[p] >= lo && bytes[p] <= hi)
                continue;
            tutorial_wrong("%s: rank %d made %llu collective call%s in the %s (%llu all-reduce%s, %.0f bytes "
                           "sent).", what, r, calls[p], calls[p] == 1 ? "" : "s", phase[p], reduces[p],
                           reduces[p] == 1 ? "" : "s", bytes[p]);
            tutorial_note("The block needs exactly one all-reduce of batch x h = %d x %d reals in each "
                          "direction: g's in the forward, f's in the backward.", BATCH, H);
            if (reduces[p] > 1)
                tutorial_note("The other operator is the identity in that direction (g backward, f forward).");
            return false;
        }
    }
    return true;
}

static bool check_tp(int tp, const dense_block *dense)
{
    char what[32];
    snprintf(what, sizeof what, "tp %d", tp);
    tp_run *x = calloc(1, sizeof *x);
    if (x == NULL)
        return false;
    x->tp = tp;
    x->dense = dense;
    for (int r = 0; r < MAX_TP; r++)
        x->in_fn[r] = IN_NONE;
    ptdp_launch_result res;
    ptdp_launch_opts opts = { .result = &res };
    int rc = tutorial_launch_opts(what, tp, tp_device, x, &opts);
    int failed = res.failed_rank;
    if (rc == PTDP_EINVAL && failed >= 0 && failed < tp && x->in_fn[failed] != IN_NONE)
        explain_refused_call(x->in_fn[failed], failed, tp, res.message);
    ptdp_launch_result_free(&res);
    bool ok = rc == 0 && check_forward(x, what) && check_backward(x, what) &&
              (tp == 1 || check_communication(x, what));
    if (ok && tp == 1)
        tutorial_ok("tp 1: y, dx and every gradient equal to the dense block");
    else if (ok)
        tutorial_ok("tp %d: y, dx and the gradient slices equal the dense block; 1 all-reduce forward (g), "
                    "1 backward (f)", tp);
    free(x);
    return ok;
}

int main(void)
{
    tutorial_begin("03", "tensor parallelism: column- and row-parallel linear, f and g");
    static dense_block dense;
    dense_forward_backward(&dense);
    bool ok = true;
    for (int tp = 1; ok && tp <= MAX_TP; tp++)
        ok = check_tp(tp, &dense);
    if (ok)
        tutorial_note("each all-reduce sums batch x h = %d x %d reals, S = %d bytes: every device sends "
                      "2(tp-1)/tp * S (lesson 01)", BATCH, H, (int)(BATCH * H * sizeof(ptdp_real)));
    return tutorial_end();
}
