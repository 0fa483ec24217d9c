/*
 * xent.c — softmax cross-entropy, whole and in vocab-parallel partials.
 *
 * For one row of logits l (C classes) and its label y:
 *
 *     p_j  = exp(l_j) / sum_k exp(l_k)                 softmax
 *     loss = -log p_y = log sum_k exp(l_k) - l_y
 *
 * exp(1e4) overflows even a double, so every row first subtracts its
 * maximum M (softmax does not change when all logits shift together):
 *
 *     loss = log S + M - l_y,        S = sum_k exp(l_k - M)  ∈ [1, C]
 *
 * and the sums run in double whatever the build's precision.
 *
 * Gradient: d loss / d l_j = p_j - [j == y], i.e. softmax minus one-hot.
 * The forward returns the SUM of the row losses, never the mean: whether to
 * divide by the micro-batch, the data-parallel shard or the global batch is
 * the training loop's decision (the gradient's `scale` carries it), and
 * getting it wrong is the classic data-parallel scaling bug.
 *
 * Vocab-parallel form (Megatron's VocabParallelCrossEntropy).  Under tensor
 * parallelism rank r holds only the logit columns [col0, col0 + n):
 *
 *         rank 0       rank 1       rank 2
 *     ┌────────────┬────────────┬────────────┐
 *     │ l[:, 0:4]  │ l[:, 4:8]  │ l[:, 8:12] │  row maxima       → all_reduce MAX = M
 *     └────────────┴────────────┴────────────┘  sum exp(l - M)   → all_reduce SUM = S
 *                                                l_y, 0 off-slice → all_reduce SUM
 *
 * Three B-element reductions replace gathering the B x C logits; the loss
 * and each rank's slice of p - onehot then follow from (M, S, l_y) locally.
 * The whole-row functions below are the same three partials with one slice.
 */
#include "ptdp/ops.h"

#include "ptdp/error.h"
#include "runtime/pool.h"
#include <math.h>

/* ---------------------------------------------------- one row, one slice */

static double row_max(const ptdp_real *l, int n)
{
    double m = -INFINITY;
    for (int j = 0; j < n; j++)
        if (l[j] > m)
            m = l[j];
    return m;
}

static double row_sum_exp(const ptdp_real *l, int n, double max)
{
    double s = 0.0;
    for (int j = 0; j < n; j++)
        s += exp((double)l[j] - max);
    return s;
}

/* The label's column within the slice [col0, col0 + n), or -1 if elsewhere. */
static int local_label(int64_t label, int col0, int n)
{
    int64_t j = label - col0;
    return j >= 0 && j < n ? (int)j : -1;
}

/* d = scale * (exp(l - max) / sumexp - onehot) over one row of one slice.
 * Each element is read before it is written, so d may be l. */
static void row_grad(ptdp_real *d, const ptdp_real *l, int n, int label_col,
                     double max, double sumexp, double scale)
{
    double inv = 1.0 / sumexp;
    for (int j = 0; j < n; j++) {
        double p = exp((double)l[j] - max) * inv;
        d[j] = (ptdp_real)(scale * (p - (j == label_col ? 1.0 : 0.0)));
    }
}

/* -------------------------------------------------------- the whole row */

double ptdp_xent_forward(ptdp_tensor logits, const int64_t *labels)
{
    double total = 0.0;
    for (int i = 0; i < logits.rows; i++) {
        const ptdp_real *l = ptdp_at(logits, i, 0);
        if (!PTDP_REQUIRE(labels[i] >= 0 && labels[i] < logits.cols, "label %lld of row %d is not a class "
                          "0..%d", (long long)labels[i], i, logits.cols - 1))
            return NAN;
        double m = row_max(l, logits.cols);
        double s = row_sum_exp(l, logits.cols, m);
        total += log(s) + m - (double)l[labels[i]];
    }
    return total;
}

void ptdp_xent_backward(ptdp_tensor dlogits, ptdp_tensor logits, const int64_t *labels, double scale)
{
    if (!PTDP_REQUIRE(dlogits.rows == logits.rows && dlogits.cols == logits.cols,
                      "dlogits %d x %d, logits %d x %d", dlogits.rows, dlogits.cols, logits.rows, logits.cols))
        return;
    for (int i = 0; i < logits.rows; i++) {
        const ptdp_real *l = ptdp_at(logits, i, 0);
        if (!PTDP_REQUIRE(labels[i] >= 0 && labels[i] < logits.cols, "label %lld of row %d is not a class "
                          "0..%d", (long long)labels[i], i, logits.cols - 1))
            return;
        double m = row_max(l, logits.cols);
        double s = row_sum_exp(l, logits.cols, m);
        row_grad(ptdp_at(dlogits, i, 0), l, logits.cols, (int)labels[i], m, s, scale);
    }
}

/* Per logit of the backward: subtract, exp, multiply, subtract, multiply. */
double ptdp_xent_flops_backward(int batch, int classes)
{
    return 5.0 * batch * classes;
}

/* -------------------------------------------------- vocab-parallel partials */

/* The head's logits are the step's widest tensor (B T x V: 12.9 M numbers
 * for GPT-2 at T 64), and each pass below is row by row: its rows are
 * shared with the device's helper threads (runtime/pool.h), a block each.
 * A row's numbers come out of the same loop whichever thread runs it, and
 * every sum over rows (the loss) is taken afterwards in row order: the
 * bits do not depend on the thread count. */
#define MIN_SHARED_ELEMENTS 65536.0

typedef struct {
    double *out;                       /* a number a row (max, sum of e^x) */
    ptdp_tensor d, l;                  /* backward: dlogits, logits        */
    const double *max, *sumexp;
    const int64_t *labels;
    int col0;
    double scale;
} xent_job;

static void max_rows(void *arg, int part, int parts)
{
    const xent_job *x = arg;
    size_t i0, i1;
    ptdp_pool_block((size_t)x->l.rows, part, parts, &i0, &i1);
    for (size_t i = i0; i < i1; i++)
        x->out[i] = row_max(ptdp_at(x->l, (int)i, 0), x->l.cols);
}

static void sum_exp_rows(void *arg, int part, int parts)
{
    const xent_job *x = arg;
    size_t i0, i1;
    ptdp_pool_block((size_t)x->l.rows, part, parts, &i0, &i1);
    for (size_t i = i0; i < i1; i++)
        x->out[i] = row_sum_exp(ptdp_at(x->l, (int)i, 0), x->l.cols, x->max[i]);
}

static void grad_rows(void *arg, int part, int parts)
{
    const xent_job *x = arg;
    size_t i0, i1;
    ptdp_pool_block((size_t)x->l.rows, part, parts, &i0, &i1);
    for (size_t i = i0; i < i1; i++)
        row_grad(ptdp_at(x->d, (int)i, 0), ptdp_at(x->l, (int)i, 0), x->l.cols,
                 local_label(x->labels[i], x->col0, x->l.cols), x->max[i], x->sumexp[i], x->scale);
}

/* fn over the logits' rows: on the helpers too when they are many. */
static void over_rows(ptdp_pool_fn fn, xent_job *x)
{
    ptdp_pool_share(x->l.rows > 1 ? (double)x->l.rows * x->l.cols : 0, MIN_SHARED_ELEMENTS, fn, x);
}

void ptdp_row_max(double *out, ptdp_tensor logits)
{
    xent_job x = { .out = out, .l = logits };
    over_rows(max_rows, &x);
}

void ptdp_row_sum_exp(double *out, ptdp_tensor logits, const double *max)
{
    xent_job x = { .out = out, .l = logits, .max = max };
    over_rows(sum_exp_rows, &x);
}

void ptdp_pick_label(double *out, ptdp_tensor logits, const int64_t *labels, int col0)
{
    for (int i = 0; i < logits.rows; i++) {
        int j = local_label(labels[i], col0, logits.cols);
        out[i] = j >= 0 ? (double)*ptdp_at(logits, i, j) : 0.0;
    }
}

double ptdp_xent_from_partials(int rows, const double *max, const double *sumexp, const double *picked)
{
    double total = 0.0;
    for (int i = 0; i < rows; i++)
        total += log(sumexp[i]) + max[i] - picked[i];
    return total;
}

void ptdp_xent_backward_shard(ptdp_tensor dlogits, ptdp_tensor logits, const int64_t *labels,
                              int col0, const double *max, const double *sumexp, double scale)
{
    if (!PTDP_REQUIRE(dlogits.rows == logits.rows && dlogits.cols == logits.cols,
                      "dlogits %d x %d, logits %d x %d", dlogits.rows, dlogits.cols, logits.rows, logits.cols))
        return;
    xent_job x = { .d = dlogits, .l = logits, .max = max, .sumexp = sumexp, .labels = labels, .col0 = col0,
                   .scale = scale };
    over_rows(grad_rows, &x);
}
