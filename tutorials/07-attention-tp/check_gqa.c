/*
 * check_gqa.c — lesson 07, blanks 6 and 7: grouped-query attention under
 * TP, when there are more ranks than kv heads.
 *
 * The llama's attention, small: C = 16, H = 4 query heads of hd = 4, K = 2
 * kv heads (and K = 1, multi-query), no biases, B = 3 sequences of T = 4
 * tokens.  One device computes, in double,
 *
 *     q = x wq^T   k = x wk^T   v = x wv^T       (wk, wv: K hd rows only)
 *     y = attention: query head h with kv head h / (H/K)      out = y wo^T
 *
 * and, from a random dout, the gradients of wk and wv — the attention's
 * backward adds into each kv head the shares of the H/K query heads that
 * read it — then one SGD step, w -= lr dw.  Then on tp devices, for
 * (K, tp) = (2, 1), (2, 2), (2, 4) and (1, 4), each rank: wq's rows of
 * its query heads and wo's columns (views), your blank 6's rows of wk and
 * wv, the same forward (g: one all-reduce of out) and backward on its
 * heads, the sum your blank 7 declares (lesson_sum_declared), the same
 * step.  Then:
 *
 *   blank 6  each rank holds the rows of the kv heads its query heads
 *            read, row for row; no communication
 *   blank 7  every rank's gradient of its kv rows is one device's; after
 *            the step the copies of one kv head are still equal — and
 *            one device's
 *
 *     K 2, tp 4:  rank        0      1      2      3
 *                 query head  0      1      2      3
 *                 kv head     0      0      1      1
 *                 gradient    share  share  share  share   (own heads')
 *                             └─ sum ┘      └─ sum ┘       (TP_SHARE)
 *
 * to 1e-10.  A wrong gradient is named by what it equals: the rank's own
 * query heads' share alone (no sum: the copies drift apart), or the sum
 * over the whole TP group (another kv head's gradient added in).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_gqa.h"
#include "lesson.h"
#include "tutorial.h"

#include "ptdp/error.h"
#include "ptdp/ops.h"
#include "ptdp/rng.h"

enum { C = 16, H = 4, HD = C / H, T = 4, BATCH = 3, R = BATCH * T, KMAX = 2, MAX_TP = 4 };
enum { KV = KMAX * HD * C };   /* the most reals of wk (or wv) a rank holds */
static const struct { int K, tp; } CONFIGS[] = { { 2, 1 }, { 2, 2 }, { 2, 4 }, { 1, 4 } };
enum { NCONFIGS = sizeof CONFIGS / sizeof CONFIGS[0] };
static const double TOL = 1e-10, LR = 0.1;
static const ptdp_real UNWRITTEN = 1000;   /* a shard starts as this */

static double diff(double got, double want)
{
    double e = fabs(got - want);
    return e == e ? e : INFINITY;
}

static bool same(const ptdp_real *a, const ptdp_real *b, int n)
{
    for (int i = 0; i < n; i++)
        if (diff(a[i], b[i]) > TOL)
            return false;
    return true;
}

/* The first index where a and b differ beyond TOL (n if none). */
static int first_diff(const ptdp_real *a, const ptdp_real *b, int n)
{
    int i = 0;
    while (i < n && diff(a[i], b[i]) <= TOL)
        i++;
    return i;
}

/* ------------------------------------------ one pass, on any device */

/* The buffers of one pass: the most one device needs (H heads, KMAX kv). */
typedef struct {
    ptdp_real qkv[R * (H + 2 * KMAX) * HD], dqkv[R * (H + 2 * KMAX) * HD];
    ptdp_real y[R * H * HD], dy[R * H * HD], probs[BATCH * H * T * T], scratch[2 * T * T];
} gqa_work;

/* The attention of `heads` query heads and `kv` kv heads on the whole x:
 * out = y wo^T (this device's term), then from dout the gradients dwk and
 * dwv of its kv rows (overwritten).  The same code for one device (all H
 * and K heads) and for a rank (its heads): one reference. */
static void gqa_pass(gqa_work *w, int heads, int kv, ptdp_tensor x, ptdp_tensor wq, ptdp_tensor wk, ptdp_tensor wv,
                     ptdp_tensor wo, ptdp_tensor dout, ptdp_tensor out, ptdp_tensor dwk, ptdp_tensor dwv)
{
    const int Q = heads * HD, KD = kv * HD;
    ptdp_tensor qkv = ptdp_tensor_wrap(w->qkv, R, Q + 2 * KD), dqkv = ptdp_tensor_wrap(w->dqkv, R, Q + 2 * KD);
    ptdp_tensor y = ptdp_tensor_wrap(w->y, R, Q), dy = ptdp_tensor_wrap(w->dy, R, Q);
    ptdp_linear_forward(ptdp_tensor_cols(qkv, 0, Q), x, wq, NULL);          /* q | k | v */
    ptdp_linear_forward(ptdp_tensor_cols(qkv, Q, KD), x, wk, NULL);
    ptdp_linear_forward(ptdp_tensor_cols(qkv, Q + KD, KD), x, wv, NULL);
    ptdp_attention_gqa_forward(y, w->probs, qkv, T, heads, kv, HD, NULL, NULL);
    ptdp_linear_forward(out, y, wo, NULL);
    ptdp_matmul(dy, dout, false, wo, false, 1.0, 0.0);                     /* dy = dout wo */
    ptdp_attention_gqa_backward(dqkv, dy, qkv, w->probs, T, heads, kv, HD, NULL, w->scratch);
    ptdp_matmul(dwk, ptdp_tensor_cols(dqkv, Q, KD), true, x, false, 1.0, 0.0);        /* dk^T x */
    ptdp_matmul(dwv, ptdp_tensor_cols(dqkv, Q + KD, KD), true, x, false, 1.0, 0.0);   /* dv^T x */
}

/* ------------------------------------------------------- one device */

typedef struct {
    int K;
    ptdp_real x[R * C], wq[H * HD * C], wk[KV], wv[KV], wo[C * H * HD], dout[R * C];
    ptdp_real out[R * C], dwk[KV], dwv[KV];
} gqa_dense;

static void fill(ptdp_real *v, int n, const char *stream)
{
    uint64_t key = ptdp_rng_key(7, stream);
    for (int i = 0; i < n; i++)
        v[i] = (ptdp_real)(0.5 * ptdp_rng_normal(key, (uint64_t)i));
}

static void dense_compute(gqa_dense *d, int K)
{
    static gqa_work w;
    d->K = K;
    fill(d->x, R * C, "gqa.x");
    fill(d->wq, H * HD * C, "gqa.wq");
    fill(d->wk, K * HD * C, "gqa.wk");
    fill(d->wv, K * HD * C, "gqa.wv");
    fill(d->wo, C * H * HD, "gqa.wo");
    fill(d->dout, R * C, "gqa.dout");
    gqa_pass(&w, H, K, ptdp_tensor_wrap(d->x, R, C), ptdp_tensor_wrap(d->wq, H * HD, C),
             ptdp_tensor_wrap(d->wk, K * HD, C), ptdp_tensor_wrap(d->wv, K * HD, C),
             ptdp_tensor_wrap(d->wo, C, H * HD), ptdp_tensor_wrap(d->dout, R, C), ptdp_tensor_wrap(d->out, R, C),
             ptdp_tensor_wrap(d->dwk, K * HD, C), ptdp_tensor_wrap(d->dwv, K * HD, C));
}

/* ------------------------------------------------------ tp devices */

/* What rank r holds of wk (or wv): its shard, its gradient before and
 * after the declared sum, and the shard after the step. */
typedef struct {
    ptdp_real shard[KV], own[KV], summed[KV], stepped[KV];
} kv_rank;

typedef struct {
    int tp;
    const gqa_dense *d;
    gqa_work work[MAX_TP];
    kv_rank k[MAX_TP], v[MAX_TP];
    ptdp_real out[MAX_TP][R * C];
    unsigned long long shard_calls[MAX_TP];
    ptdp_grad_sum sum;
    int tp_share;
} gqa_run;

static int kv_local(int K, int tp) { return K >= tp ? K / tp : 1; }

/* The kv head rank r's first query head reads: the right answer. */
static int kv_first(int K, int tp, int r) { return r * (H / tp) / (H / K); }

static unsigned long long collective_calls(const ptdp_device *dev)
{
    unsigned long long n = 0;
    for (int k = 0; k < PTDP_COLL_COUNT; k++)
        n += dev->stats.calls[k];
    return n;
}

static int device_copy(ptdp_device *dev, ptdp_tensor *t, const char *name, const ptdp_real *from, int rows,
                       int cols)
{
    int rc = ptdp_tensor_alloc(dev, t, name, PTDP_MEM_OTHER, rows, cols);
    if (rc == 0)
        memcpy(t->data, from, (size_t)rows * cols * sizeof *from);
    return rc;
}

/* Blank 7's declaration is one the lesson's mesh can carry out: the
 * replicas left DP, groups it has, and a tp_share that cuts the TP group
 * into equal groups.  (The same answer on every rank: each decides alike.) */
static const unsigned KNOWN_GROUPS = PTDP_GROUP_BIT(PTDP_GROUP_DP) | PTDP_GROUP_BIT(PTDP_GROUP_PP) |
                                     PTDP_GROUP_BIT(PTDP_GROUP_CP) | PTDP_GROUP_BIT(PTDP_GROUP_TP) |
                                     PTDP_GROUP_BIT(PTDP_GROUP_TP_SHARE);

static bool declaration_usable(ptdp_grad_sum sum, int tp_share, int tp)
{
    return sum.replicas == PTDP_GROUP_DP && (sum.also & ~KNOWN_GROUPS) == 0 &&
           (!(sum.also & PTDP_GROUP_BIT(PTDP_GROUP_TP_SHARE)) || (tp_share >= 1 && tp % tp_share == 0));
}

/* Why it is not (on the host, after the run). */
static bool judge_declaration(const gqa_run *x)
{
    const int K = x->d->K, tp = x->tp;
    if (declaration_usable(x->sum, x->tp_share, tp))
        return true;
    if (x->sum.replicas != PTDP_GROUP_DP) {
        tutorial_wrong("K %d, tp %d, blank 7: sum->replicas is group %d.", K, tp, (int)x->sum.replicas);
        tutorial_note("Leave it PTDP_GROUP_DP: the data-parallel replicas sum every parameter first; the question "
                      "here is what comes after (sum->also).");
    } else if (x->sum.also & ~KNOWN_GROUPS) {
        tutorial_wrong("K %d, tp %d, blank 7: sum->also names a group (0x%x) that has nothing to do with a kv head's "
                       "copies.", K, tp, x->sum.also & ~KNOWN_GROUPS);
        tutorial_note("The ranks holding copies of a kv head are in one TP group: all of it (PTDP_GROUP_TP), or one "
                      "of its TP_SHARE groups (PTDP_GROUP_TP_SHARE).");
    } else {
        tutorial_wrong("K %d, tp %d, blank 7: *tp_share = %d: the TP_SHARE groups are tp_share consecutive TP ranks, "
                       "so it must divide tp = %d.", K, tp, x->tp_share, tp);
        if (tp < K && x->tp_share == 0)
            tutorial_note("tp / K rounds down to 0 when tp < K: there no rank shares a kv head — tp_share 1, or no "
                          "TP_SHARE at all.");
    }
    return false;
}

/* A rank's kv rows through the sum and the step: summed and stepped. */
static int sum_and_step(ptdp_device *dev, ptdp_grad_sum sum, int tp_share, kv_rank *k, ptdp_tensor w, ptdp_tensor g)
{
    int rc = lesson_sum_declared(dev->world, sum, tp_share, g);
    if (rc != 0)
        return rc;
    memcpy(k->summed, g.data, ptdp_tensor_numel(g) * sizeof *g.data);
    for (size_t i = 0; i < ptdp_tensor_numel(w); i++)
        w.data[i] -= (ptdp_real)LR * g.data[i];                     /* SGD: w -= lr dw */
    memcpy(k->stepped, w.data, ptdp_tensor_numel(w) * sizeof *w.data);
    return PTDP_OK;
}

static int gqa_device(ptdp_device *dev, void *arg)
{
    gqa_run *x = arg;
    const gqa_dense *d = x->d;
    const int r = dev->rank, K = d->K, Hl = H / x->tp, Kl = kv_local(K, x->tp);
    ptdp_tensor in, wq, wk, wv, wo, dout, wk_l, wv_l, out, gk, gv;
    int rc;
    if ((rc = device_copy(dev, &in, "x", d->x, R, C)) || (rc = device_copy(dev, &wq, "wq", d->wq, H * HD, C)) ||
        (rc = device_copy(dev, &wk, "wk", d->wk, K * HD, C)) || (rc = device_copy(dev, &wv, "wv", d->wv, K * HD, C)) ||
        (rc = device_copy(dev, &wo, "wo", d->wo, C, H * HD)) || (rc = device_copy(dev, &dout, "dout", d->dout, R, C)) ||
        (rc = ptdp_tensor_alloc(dev, &wk_l, "wk local", PTDP_MEM_OTHER, Kl * HD, C)) ||
        (rc = ptdp_tensor_alloc(dev, &wv_l, "wv local", PTDP_MEM_OTHER, Kl * HD, C)) ||
        (rc = ptdp_tensor_alloc(dev, &out, "out", PTDP_MEM_OTHER, R, C)) ||
        (rc = ptdp_tensor_alloc(dev, &gk, "wk local grad", PTDP_MEM_OTHER, Kl * HD, C)) ||
        (rc = ptdp_tensor_alloc(dev, &gv, "wv local grad", PTDP_MEM_OTHER, Kl * HD, C)))
        return rc;
    ptdp_tensor_fill(wk_l, UNWRITTEN);
    ptdp_tensor_fill(wv_l, UNWRITTEN);
    const unsigned long long calls = collective_calls(dev);
    if ((rc = lesson_kv_shard(dev->world, H, K, wk, wv, wk_l, wv_l)) != 0)
        return rc;
    x->shard_calls[r] = collective_calls(dev) - calls;
    memcpy(x->k[r].shard, wk_l.data, ptdp_tensor_numel(wk_l) * sizeof(ptdp_real));
    memcpy(x->v[r].shard, wv_l.data, ptdp_tensor_numel(wv_l) * sizeof(ptdp_real));

    /* my query heads' rows of wq, my heads' columns of wo: views */
    gqa_pass(&x->work[r], Hl, Kl, in, ptdp_tensor_rows(wq, r * Hl * HD, Hl * HD), wk_l, wv_l,
             ptdp_tensor_cols(wo, r * Hl * HD, Hl * HD), dout, out, gk, gv);
    if ((rc = ptdp_all_reduce(dev->world, out.data, out.data, (size_t)R * C, PTDP_REAL, PTDP_SUM)) != 0)
        return rc;                                                   /* g */
    memcpy(x->out[r], out.data, sizeof x->out[r]);
    memcpy(x->k[r].own, gk.data, ptdp_tensor_numel(gk) * sizeof(ptdp_real));
    memcpy(x->v[r].own, gv.data, ptdp_tensor_numel(gv) * sizeof(ptdp_real));

    ptdp_grad_sum sum = { .replicas = PTDP_GROUP_DP };
    int share = 1;
    if ((rc = lesson_kv_grad_sum(x->tp, K, &sum, &share)) != 0)
        return rc;
    if (r == 0) {   /* the same on every rank: the check reads rank 0's */
        x->sum = sum;
        x->tp_share = share;
    }
    if (!declaration_usable(sum, share, x->tp))   /* the host says why */
        return PTDP_OK;
    if ((rc = sum_and_step(dev, sum, share, &x->k[r], wk_l, gk)) != 0)
        return rc;
    return sum_and_step(dev, sum, share, &x->v[r], wv_l, gv);
}

/* -------------------------------------------------- blank 6: placement */

/* Which kv head's hd rows of w [K hd, C] the hd x C values at s are: its
 * index, -1 if still UNWRITTEN, -2 if none. */
static int which_head(const ptdp_real *s, const ptdp_real *w, int K)
{
    bool unwritten = true;
    for (int i = 0; i < HD * C; i++)
        unwritten = unwritten && s[i] == UNWRITTEN;
    if (unwritten)
        return -1;
    for (int j = 0; j < K; j++)
        if (memcmp(s, w + (size_t)j * HD * C, HD * C * sizeof *s) == 0)
            return j;
    return -2;
}

/* "the rows of kv head 0, rows never written": what each kv slot holds. */
static void say_heads(const int *got, int n, char *buf, size_t len)
{
    size_t at = 0;
    for (int i = 0; i < n && at + 32 < len; i++)
        at += (size_t)(got[i] >= 0 ? snprintf(buf + at, len - at, "%sthe rows of kv head %d", i ? ", " : "", got[i])
                                   : snprintf(buf + at, len - at, "%s%s", i ? ", " : "",
                                              got[i] == -1 ? "rows never written" : "rows of no kv head"));
}

/* Rank r's wk (or wv) shard: the kv heads its query heads read? */
static bool judge_placement(const gqa_run *x, int r, const char *tensor, const ptdp_real *shard,
                            const ptdp_real *whole)
{
    const int K = x->d->K, tp = x->tp, Kl = kv_local(K, tp), h0 = r * (H / tp), want0 = kv_first(K, tp, r);
    int got[KMAX];
    bool right = true, mod = true, unwritten = false;
    for (int i = 0; i < Kl; i++) {
        got[i] = which_head(shard + (size_t)i * HD * C, whole, K);
        right = right && got[i] == want0 + i;
        mod = mod && got[i] == (h0 % K) + i;
        unwritten = unwritten || got[i] == -1;
    }
    if (right)
        return true;
    char g[96], q[32], kv[32];
    say_heads(got, Kl, g, sizeof g);
    if (H / tp > 1)
        snprintf(q, sizeof q, "query heads %d\xe2\x80\x93%d read", h0, h0 + H / tp - 1);
    else
        snprintf(q, sizeof q, "query head %d reads", h0);
    if (Kl > 1)
        snprintf(kv, sizeof kv, "kv heads %d\xe2\x80\x93%d", want0, want0 + Kl - 1);
    else
        snprintf(kv, sizeof kv, "kv head %d", want0);
    tutorial_wrong("K %d, tp %d, blank 6: rank %d's %s shard holds %s; its %s %s.", K, tp, r, tensor, g, q, kv);
    if (unwritten)
        tutorial_note("%s's rows were never copied: wk AND wv need the kv head's rows (blank 6).", tensor);
    else if (mod)
        tutorial_note("You took h mod K = %d mod %d = %d.  That deals the kv heads out in turn (q0 → k0, q1 → k1, "
                      "q2 → k0, …), as torch's tile\nwould; Meta's repeat_kv repeats each kv head H/K = %d times in a "
                      "row (q0, q1 → k0; q2, q3 → k1): query head h reads kv head\nh / (H/K) = %d / %d = %d (blank 6).",
                      h0, K, h0 % K, H / K, h0, H / K, want0);
    else
        tutorial_note("Query head h reads kv head h / (H/K).  Rank %d's first query head is r H/tp = %d, so its kv "
                      "head is %d / %d = %d:\nrows [%d, %d) of wk and of wv (blank 6).", r, h0, h0, H / K, want0,
                      want0 * HD, (want0 + Kl) * HD);
    return false;
}

static bool check_placement(const gqa_run *x)
{
    for (int r = 0; r < x->tp; r++) {
        if (!judge_placement(x, r, "wk", x->k[r].shard, x->d->wk) ||
            !judge_placement(x, r, "wv", x->v[r].shard, x->d->wv))
            return false;
        if (x->shard_calls[r] != 0) {
            tutorial_wrong("K %d, tp %d, blank 6: rank %d made %llu collective call%s in lesson_kv_shard.",
                           x->d->K, x->tp, r, x->shard_calls[r], x->shard_calls[r] == 1 ? "" : "s");
            tutorial_note("A shard needs no communication: every rank has the whole wk and wv and copies its rows.");
            return false;
        }
    }
    return true;
}

/* ------------------------------------------------ blank 7: the sum */

/* The ranks that hold kv head j, [lo, hi]: its query heads' ranks. */
static void holders(int K, int tp, int j, int *lo, int *hi)
{
    const int s = tp > K ? tp / K : 1;
    *lo = tp > K ? j * s : j / kv_local(K, tp);
    *hi = tp > K ? *lo + s - 1 : *lo;
}

/* After the step two copies of one kv head differ: say how they drifted. */
static bool check_copies(const gqa_run *x, const char *tensor, const kv_rank *k)
{
    const int K = x->d->K, tp = x->tp, n = HD * C;
    for (int j = 0; j < K; j++) {
        int lo, hi;
        holders(K, tp, j, &lo, &hi);
        for (int r = lo + 1; r <= hi; r++) {
            const int e = first_diff(k[lo].stepped, k[r].stepped, n);
            if (e == n)
                continue;
            tutorial_wrong("K %d, tp %d, blank 7: after one step the copies of kv head %d drifted apart: %s[%d][%d] is "
                           "%.6g on rank %d and %.6g on rank %d.", K, tp, j, tensor, j * HD + e / C, e % C,
                           (double)k[lo].stepped[e], lo, (double)k[r].stepped[e], r);
            bool unsummed = true;
            for (int q = lo; q <= hi; q++)
                unsummed = unsummed && same(k[q].own, k[q].summed, n);
            if (unsummed)
                tutorial_note("Each copy took its step along its own query heads' share of the gradient alone: nothing "
                              "was summed.\nOne device's gradient of kv head %d is the sum over the H/K = %d query heads "
                              "that read it, and they sit on the tp/K = %d ranks %d\xe2\x80\x93%d:\ndeclare the sum over "
                              "them — sum->also |= PTDP_GROUP_BIT(PTDP_GROUP_TP_SHARE), *tp_share = tp/K (blank 7).\n"
                              "Every further step moves the copies further apart: one parameter, %d different models.",
                              j, H / K, hi - lo + 1, lo, hi, hi - lo + 1);
            else
                tutorial_note("Your sum left them unequal: kv head %d's copies are on the %d ranks %d\xe2\x80\x93%d, and "
                              "all of them must be in one group of the sum (*tp_share = tp/K = %d) (blank 7).", j,
                              hi - lo + 1, lo, hi, hi - lo + 1);
            return false;
        }
    }
    return true;
}

/* Rank r's summed gradient against one device's rows of its kv heads. */
static bool check_gradient(const gqa_run *x, const char *tensor, const kv_rank *k, const ptdp_real *dense)
{
    const int K = x->d->K, tp = x->tp, Kl = kv_local(K, tp), n = Kl * HD * C;
    for (int r = 0; r < tp; r++) {
        const ptdp_real *want = dense + (size_t)kv_first(K, tp, r) * HD * C;
        const int e = first_diff(k[r].summed, want, n);
        if (e == n)
            continue;
        tutorial_wrong("K %d, tp %d, blank 7: rank %d's gradient of %s[%d][%d] (kv head %d) is %.6g; one device's is "
                       "%.6g.", K, tp, r, tensor, kv_first(K, tp, r) * HD + e / C, e % C, kv_first(K, tp, r) + e / (HD * C),
                       (double)k[r].summed[e], (double)want[e]);
        ptdp_real all[KV] = { 0 };
        for (int q = 0; q < tp; q++)
            for (int i = 0; i < n; i++)
                all[i] += k[q].own[i];
        int lo, hi;
        holders(K, tp, kv_first(K, tp, r), &lo, &hi);
        if (tp > 1 && same(k[r].summed, all, n))
            tutorial_note("That is the sum over the whole TP group: %s, and their gradients were added\ninto "
                          "kv head %d's.  Sum over the ranks that share a kv head only: %s (blank 7).",
                          tp > K ? "other ranks hold another kv head, another tensor" : "every rank holds its own kv "
                          "heads, other tensors", kv_first(K, tp, r),
                          tp > K ? "PTDP_GROUP_TP_SHARE, tp/K ranks" : "at tp <= K none shares one, nothing to sum");
        else if (same(k[r].summed, k[r].own, n))
            tutorial_note("That is rank %d's own query heads' share alone: the kv head is read by the query heads of "
                          "ranks %d\xe2\x80\x93%d,\nand its gradient is the sum of their shares (blank 7).", r, lo, hi);
        else
            tutorial_note("The gradient of kv head %d is the sum of the shares of the query heads that read it: those "
                          "of ranks %d\xe2\x80\x93%d (blank 7).", kv_first(K, tp, r), lo, hi);
        return false;
    }
    return true;
}

/* "ranks 0–1 hold kv head 0, ranks 2–3 kv head 1" (tp > K) or "rank 0
 * holds kv head 0, rank 1 kv head 1" (tp <= K). */
static void say_groups(int K, int tp, char *buf, size_t len)
{
    size_t at = 0;
    const int Kl = kv_local(K, tp);
    for (int j = 0; j < K && at + 48 < len; j += Kl) {
        int lo, hi;
        holders(K, tp, j, &lo, &hi);
        const char *verb = j == 0 ? (lo == hi ? " holds" : " hold") : "";
        if (lo == hi)
            at += (size_t)snprintf(buf + at, len - at, "%srank %d%s ", j ? ", " : "", lo, verb);
        else
            at += (size_t)snprintf(buf + at, len - at, "%sranks %d\xe2\x80\x93%d%s ", j ? ", " : "", lo, hi, verb);
        if (Kl == 1)
            at += (size_t)snprintf(buf + at, len - at, "kv head %d", j);
        else
            at += (size_t)snprintf(buf + at, len - at, "kv heads %d\xe2\x80\x93%d", j, j + Kl - 1);
    }
}

static bool check_config(int K, int tp, const gqa_dense *d)
{
    char what[32];
    snprintf(what, sizeof what, "K %d, tp %d", K, tp);
    gqa_run *x = calloc(1, sizeof *x);
    if (x == NULL)
        return false;
    x->tp = tp;
    x->d = d;
    bool ok = tutorial_launch(what, tp, gqa_device, x) == 0 && check_placement(x) && judge_declaration(x);
    for (int r = 0; ok && r < tp; r++) {
        const int e = first_diff(x->out[r], d->out, R * C);
        if (e < R * C) {
            ok = false;
            tutorial_wrong("%s: rank %d's attention output out[%d][%d] is %.6g; one device's is %.6g.", what, r, e / C,
                           e % C, (double)x->out[r][e], (double)d->out[e]);
        }
    }
    ok = ok && check_copies(x, "wk", x->k) && check_copies(x, "wv", x->v) && check_gradient(x, "wk", x->k, d->dwk) &&
         check_gradient(x, "wv", x->v, d->dwv);
    if (ok) {
        char groups[128];
        say_groups(K, tp, groups, sizeof groups);
        if (tp > K)
            tutorial_ok("%s, blanks 6, 7: %s; each copy's gradient summed over its %d ranks (TP_SHARE); after "
                        "a step every copy equals one device's", what, groups, tp / K);
        else
            tutorial_ok("%s, blanks 6, 7: %s; no kv head on two ranks, nothing more to sum; after a step wk, wv "
                        "equal one device's", what, groups);
    }
    free(x);
    return ok;
}

bool check_gqa(void)
{
    static gqa_dense dense[KMAX + 1];
    bool ok = true;
    for (int c = 0; ok && c < NCONFIGS; c++) {
        const int K = CONFIGS[c].K;
        if (dense[K].K != K)
            dense_compute(&dense[K], K);
        ok = check_config(K, CONFIGS[c].tp, &dense[K]);
    }
    if (ok)
        tutorial_note("tp > K: a kv head's copies and the sum of their gradients, declared by the parameter "
                      "(ptdp-f64 train --model llama --tp 4 --vocab 64 --check)");
    return ok;
}
