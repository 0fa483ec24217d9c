/*
 * solution.c — lesson 08, the answer: splitting the sequence (context
 * parallelism, ring attention with zigzag shares; SP's kept shard).
 *
 * (exercise.c is this file with the blanks still empty.  Try it first.)
 *
 * Each of the N devices holds 2 of the sequence's 2N shares; its queries
 * stay home and the keys and values travel round the ring, N - 1 passes:
 *
 *   T = 16, N = 2:  shares of 4     0-3   4-7   8-11  12-15
 *                   zigzag          r0    r1    r1    r0
 *
 *   step 0: each rank has its own k, v      step 1: its left neighbour's
 *
 * For each (my query share, visiting key share) that is not wholly in the
 * future, every query's partial over those keys is merged into what it
 * has so far (online softmax); y = o / l at the end.
 *
 * The llama turns q and k by their positions (RoPE) before the ring: each
 * row at its GLOBAL position in the sequence, not its row number here.
 */
#include <math.h>

#include "lesson.h"

#include "ptdp/comm.h"
#include "ptdp/error.h"
#include "ptdp/ops.h"
#include "ptdp/sp.h"

enum { TAG_RING = 0x48 };

/* ------------------------------------------------------- the shares */

int lesson_zigzag_shares(int T, int n, int rank, int first[2], int *len)
{
    *len = T / (2 * n);
    first[0] = rank * *len;                  /* an early share ...          */
    first[1] = (2 * n - 1 - rank) * *len;    /* ... and its mirror, a late one */
    return PTDP_OK;
}

/* ------------------------------------------------ the future test */

int lesson_future_block(int q_first, int k_first, int len, bool *skip)
{
    int q_last = q_first + len - 1;
    *skip = k_first > q_last;     /* every key after every query: causal masks it all */
    return PTDP_OK;
}

/* ----------------------------------- one block's partial (worked example) */

/* One query against one key share.  For example (hd = 1, no 1/sqrt(hd)):
 * the query at position 5 with q = 1, a share of 4 keys from position 4,
 * k = (2, 0, 1, 3), v = (10, 20, 30, 40).  Keys 6 and 7 are in the query's
 * future: masked, visible = 5 - 4 + 1 = 2 keys, scores (2, 0).
 *     m = 2,   l = e^0 + e^-2 = 1.1353,   o = 10 e^0 + 20 e^-2 = 12.707
 * A share whose first key is after q_pos gives the empty partial
 * (m = -inf, l = 0, o = 0) — but blank 2 skips such shares before this. */

void lesson_block_partial(const ptdp_real *q, const ptdp_real *k, const ptdp_real *v, int stride, int q_pos,
                          int k_first, int len, int hd, lesson_partial *out)
{
    const double scale = 1.0 / sqrt((double)hd);
    ptdp_real score[64];
    int visible = q_pos - k_first + 1;        /* keys k_first .. q_pos: causal */
    if (visible > len)
        visible = len;
    out->m = -INFINITY;                       /* empty until a key is seen */
    out->l = 0;
    for (int j = 0; j < hd; j++)
        out->o[j] = 0;
    for (int s = 0; s < visible; s++) {       /* the scores, and their max */
        double d = 0;
        for (int j = 0; j < hd; j++)
            d += (double)q[j] * k[(size_t)s * stride + j];
        score[s] = (ptdp_real)(d * scale);
        if (score[s] > out->m)
            out->m = score[s];
    }
    for (int s = 0; s < visible; s++) {       /* l and o, against that max */
        ptdp_real e = exp(score[s] - out->m);
        out->l += e;
        for (int j = 0; j < hd; j++)
            out->o[j] += e * v[(size_t)s * stride + j];
    }
}

/* ---------------------------------------------- the online-softmax merge */

int lesson_merge(lesson_partial *a, const lesson_partial *b, int hd)
{
    if (b->l == 0)                            /* b saw no key: nothing to add */
        return PTDP_OK;
    ptdp_real m = a->m > b->m ? a->m : b->m;  /* the new max */
    ptdp_real sa = exp(a->m - m);             /* 0 when a is empty */
    ptdp_real sb = exp(b->m - m);
    a->l = a->l * sa + b->l * sb;
    for (int j = 0; j < hd; j++)
        a->o[j] = a->o[j] * sa + b->o[j] * sb;
    a->m = m;
    return PTDP_OK;
}

/* ------------------------------------------------------ the ring */

/* Send my block to the right, receive the left's into *spare, swap: even
 * ranks send first, odd ranks receive first (sends rendezvous). */
static int ring_pass(ptdp_comm *cp, ptdp_real **buf, ptdp_real **spare, size_t count)
{
    const int n = ptdp_comm_size(cp), r = ptdp_comm_rank(cp);
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    int rc;
    if (r % 2 == 0) {
        if ((rc = ptdp_send(cp, *buf, count, PTDP_REAL, right, TAG_RING)) == 0)
            rc = ptdp_recv(cp, *spare, count, PTDP_REAL, left, TAG_RING);
    } else {
        if ((rc = ptdp_recv(cp, *spare, count, PTDP_REAL, left, TAG_RING)) == 0)
            rc = ptdp_send(cp, *buf, count, PTDP_REAL, right, TAG_RING);
    }
    ptdp_real *t = *buf;
    *buf = *spare;
    *spare = t;
    return rc;
}

int lesson_ring_attention(ptdp_device *dev, ptdp_tensor y, ptdp_tensor qkv, int T, int heads, int hd,
                          long *blocks)
{
    ptdp_comm *cp = dev->world;
    const int n = ptdp_comm_size(cp), r = ptdp_comm_rank(cp), W = heads * hd;
    int qf[2] = { 0 }, kf[2] = { 0 }, len = 0, rc;
    if ((rc = lesson_zigzag_shares(T, n, r, qf, &len)) != 0)
        return rc;
    if (!PTDP_REQUIRE(len > 0 && len <= 64 && hd <= LESSON_MAX_HD && qkv.rows == 2 * len &&
                          qkv.cols == 3 * W && y.rows == 2 * len && y.cols == W,
                      "len %d, hd %d, qkv %d x %d, y %d x %d", len, hd, qkv.rows, qkv.cols, y.rows, y.cols))
        return PTDP_EINVAL;
    const size_t count = (size_t)2 * len * 2 * W;           /* k | v of my 2 len rows */
    ptdp_real *kv = ptdp_alloc(dev, count * sizeof(ptdp_real), PTDP_MEM_COMM, "ring.kv");
    ptdp_real *spare = ptdp_alloc(dev, count * sizeof(ptdp_real), PTDP_MEM_COMM, "ring.kv_in");
    lesson_partial *acc = ptdp_alloc(dev, (size_t)2 * len * heads * sizeof *acc, PTDP_MEM_ACTS, "ring.partials");
    if (kv == NULL || spare == NULL || acc == NULL) {
        rc = PTDP_ENOMEM;
        goto out;
    }
    for (int t = 0; t < 2 * len; t++) {                      /* my k | v travel */
        for (int c = 0; c < 2 * W; c++)
            kv[(size_t)t * 2 * W + c] = *ptdp_at(qkv, t, W + c);
        for (int h = 0; h < heads; h++) {                    /* every query: empty */
            acc[t * heads + h].m = -INFINITY;
            acc[t * heads + h].l = 0;
            for (int j = 0; j < hd; j++)
                acc[t * heads + h].o[j] = 0;
        }
    }
    for (int step = 0; step < n; step++) {
        const int owner = (r - step + n) % n;                /* whose k, v I hold now */
        if ((rc = lesson_zigzag_shares(T, n, owner, kf, &len)) != 0)
            goto out;
        for (int qi = 0; qi < 2; qi++)
            for (int kj = 0; kj < 2; kj++) {
                bool skip;
                if ((rc = lesson_future_block(qf[qi], kf[kj], len, &skip)) != 0)
                    goto out;
                if (skip)
                    continue;
                (*blocks)++;
                for (int t = qi * len; t < (qi + 1) * len; t++)
                    for (int h = 0; h < heads; h++) {
                        lesson_partial p;
                        const ptdp_real *k = kv + (size_t)kj * len * 2 * W + h * hd;
                        lesson_block_partial(ptdp_at(qkv, t, h * hd), k, k + W, 2 * W, qf[qi] + t % len,
                                             kf[kj], len, hd, &p);
                        if ((rc = lesson_merge(&acc[t * heads + h], &p, hd)) != 0)
                            goto out;
                    }
            }
        if (step + 1 < n && (rc = ring_pass(cp, &kv, &spare, count)) != 0)
            goto out;
    }
    for (int t = 0; t < 2 * len; t++)                        /* y = o / l */
        for (int h = 0; h < heads; h++)
            for (int j = 0; j < hd; j++)
                *ptdp_at(y, t, h * hd + j) = acc[t * heads + h].o[j] / acc[t * heads + h].l;
out:
    ptdp_free(dev, kv);
    ptdp_free(dev, spare);
    ptdp_free(dev, acc);
    return rc;
}

/* ------------------------------------------ one step of the backward */

int lesson_block_backward(const ptdp_real *q, const ptdp_real *k, const ptdp_real *v, int stride, int q_pos,
                          int k_first, int len, int hd, ptdp_real m, ptdp_real l, ptdp_real D,
                          const ptdp_real *dy, ptdp_real *dq, ptdp_real *dk, ptdp_real *dv)
{
    const double scale = 1.0 / sqrt((double)hd);
    int visible = q_pos - k_first + 1;        /* causal, as the forward */
    if (visible > len)
        visible = len;
    for (int s = 0; s < visible; s++) {
        const ptdp_real *ks = k + (size_t)s * stride, *vs = v + (size_t)s * stride;
        double score = 0, dp = 0;
        for (int j = 0; j < hd; j++) {
            score += (double)q[j] * ks[j];
            dp += (double)dy[j] * vs[j];
        }
        /* the FINAL probability: the query's m and l over every key, which
         * the forward's merges left — not this share's own */
        ptdp_real p = exp((ptdp_real)(score * scale) - m) / l;
        ptdp_real ds = p * (dp - D);          /* the softmax's Jacobian: minus y's own share */
        for (int j = 0; j < hd; j++) {
            dv[(size_t)s * stride + j] += p * dy[j];
            dk[(size_t)s * stride + j] += ds * q[j] * scale;
            dq[j] += ds * ks[j] * scale;
        }
    }
    return PTDP_OK;
}

/* ------------------------ sequence parallelism: the shard, gathered again */

/* A rank keeps only its T/N positions of the LayerNorm output; its weight
 * shard's gradient sums over EVERY position:
 *
 *   kept (this rank)   ──all-gather──►  x: every position   dW += dy^T x
 *   [b][T/N] x C                        [b][T] x C          (out x C)
 *                                       freed after: only the shard stays
 */
int lesson_sp_weight_grad(ptdp_device *dev, ptdp_comm *tp, ptdp_tensor dw, ptdp_tensor dy, ptdp_tensor kept,
                          int samples)
{
    ptdp_tensor x;
    int rc = ptdp_tensor_alloc(dev, &x, "sp.gathered", PTDP_MEM_ACTS, dy.rows, kept.cols);
    if (rc != 0)
        return rc;
    rc = ptdp_sp_all_gather(dev, tp, x, kept, samples);    /* every rank's positions, in order */
    if (rc == 0)
        ptdp_matmul(dw, dy, true, x, false, 1.0, 1.0);      /* dW += dy^T x over every position */
    ptdp_tensor_free(dev, &x);                              /* keep only the shard */
    return rc;
}

/* ----------------------------------- rotary positions (the llama) */

/* RoPE turns each query and key by an angle that grows with its position,
 * so that q_t . k_s depends on t - s alone.  On one device row t is
 * position t.  Here rank r's rows are two shares from far apart:
 *
 *   T = 16, N = 2, rank 0:   rows   0  1  2  3 | 4  5  6  7
 *                            pos    0  1  2  3 | 12 13 14 15
 *
 * and the keys that visit it round the ring were turned by their owner. */
int lesson_rope_rows(ptdp_tensor qkv, int T, int n, int rank, int heads, int hd, double theta)
{
    int64_t pos[LESSON_MAX_ROWS];
    int first[2], len, rc = lesson_zigzag_shares(T, n, rank, first, &len);
    if (rc != 0)
        return rc;
    if (!PTDP_REQUIRE(2 * len <= LESSON_MAX_ROWS && qkv.rows == 2 * len, "qkv %d rows, 2 len = %d", qkv.rows, 2 * len))
        return PTDP_EINVAL;
    for (int t = 0; t < 2 * len; t++)
        pos[t] = first[t / len] + t % len;     /* GLOBAL: not t, not t % len */
    ptdp_rope_forward(qkv, 0, heads, hd, pos, 2 * len, theta);            /* q */
    ptdp_rope_forward(qkv, heads * hd, heads, hd, pos, 2 * len, theta);   /* k */
    return PTDP_OK;
}
