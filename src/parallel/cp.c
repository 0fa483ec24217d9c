/*
 * cp.c — ring attention over a context-parallel group (cp.h).
 *
 * The rank keeps its queries; the key/value block it holds at step s came
 * from rank r - s.  For each pair (query share, key share) that is not
 * wholly in the future, one head at a time:
 *
 *   forward    S = Q K^T / sqrt(hd)          the scores of the pair   (GEMM)
 *              per query t: keys up to position t only (causal);
 *              m' = max(m, max_s S), rescale l and y by e^(m - m'),
 *              l += sum_s e^(S - m'),  P = e^(S - m') (dropped, scaled)
 *              y += P V                                               (GEMM)
 *              at the end y /= l, lse = m + log l
 *
 *   backward   P = e^(S - lse)               the probabilities again
 *              D = dropout(P)
 *              dV += D^T dY,  dP = dropout'(dY V^T)                   (GEMMs)
 *              dS = P (dP - delta),  delta_t = dY_t . y_t
 *              dQ += dS K / sqrt(hd),  dK += dS^T Q / sqrt(hd)          (GEMMs)
 *
 * (delta_t = sum_s P dP over ALL keys of query t, which no single block
 * sees: dY_t . y_t is the same number, flash attention's identity.)
 *
 * The ring: every step each rank sends its block to the right and
 * receives the next from the left.  Sends rendezvous (comm.h), so even
 * ranks send first and odd ranks receive first — with an odd N the last
 * rank and rank 0 are both even, and rank 0's receive still finds rank
 * N - 1's send once rank 1 has taken rank 0's.
 */
#include "ptdp/cp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/rng.h"

#ifdef PTDP_DOUBLE
#define EXP exp
#define LOG log
#else
#define EXP expf
#define LOG logf
#endif

enum { TAG_RING = 0x43 };

ptdp_cp_layout ptdp_cp_layout_of(int T, int cp, int rank, bool zigzag)
{
    ptdp_cp_layout l = { 0 };
    if (zigzag) {
        l.nshares = 2;
        l.len = T / (2 * cp);
        l.first[0] = rank * l.len;
        l.first[1] = (2 * cp - 1 - rank) * l.len;
    } else {
        l.nshares = 1;
        l.len = T / cp;
        l.first[0] = rank * l.len;
    }
    return l;
}

int ptdp_cp_position(const ptdp_cp_layout *l, int t)
{
    return l->first[t / l->len] + t % l->len;
}

double ptdp_ring_attention_scores(int T, int cp, int rank, bool zigzag)
{
    ptdp_cp_layout q = ptdp_cp_layout_of(T, cp, rank, zigzag);
    double n = 0;
    for (int owner = 0; owner < cp; owner++) {
        ptdp_cp_layout k = ptdp_cp_layout_of(T, cp, owner, zigzag);
        for (int i = 0; i < q.nshares; i++)
            for (int j = 0; j < k.nshares; j++)
                if (!ptdp_cp_in_future(q.first[i], k.first[j], q.len))
                    n += (double)q.len * k.len;
    }
    return n;
}

double ptdp_ring_elements_per_block(int B, int T, int width, int N, int forwards)
{
    const double X = (double)B * (T / N) * width;
    return N > 1 ? (2.0 * forwards * (N - 1) + 4.0 * (N - 1) + 2) * X : 0;
}

/* Pass `count` reals of *buf to the right, take the left's into *spare,
 * then swap the two: afterwards *buf holds the left neighbour's block. */
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

/* Rows [r0, r0 + n) and columns [c0, c0 + w) of t, as a view. */
static ptdp_tensor block(ptdp_tensor t, int r0, int n, int c0, int w)
{
    return (ptdp_tensor){ .data = ptdp_at(t, r0, c0), .rows = n, .cols = w, .stride = t.stride };
}

static ptdp_tensor square(ptdp_real *data, int n)
{
    return (ptdp_tensor){ .data = data, .rows = n, .cols = n, .stride = n };
}

typedef struct {
    int N, r, T, Tl, B, heads, hd, W;
    bool zigzag;
    const ptdp_attn_dropout *drop;   /* NULL when p = 0 */
} ring;

static bool setup(ring *g, ptdp_comm *cp, ptdp_tensor qkv, int T, int heads, int hd, bool zigzag,
                  const ptdp_attn_dropout *dropout)
{
    g->N = ptdp_comm_size(cp);
    g->r = ptdp_comm_rank(cp);
    g->T = T;
    g->heads = heads;
    g->hd = hd;
    g->W = heads * hd;
    g->zigzag = zigzag;
    g->drop = dropout != NULL && dropout->p > 0 ? dropout : NULL;
    const int parts = zigzag ? 2 * g->N : g->N;
    if (!PTDP_REQUIRE(T > 0 && T % parts == 0 && qkv.cols == 3 * g->W && qkv.rows % (T / g->N) == 0,
                      "T %d over %d %s chunks, qkv %d x %d, %d heads of %d", T, parts,
                      zigzag ? "zigzag" : "contiguous", qkv.rows, qkv.cols, heads, hd))
        return false;
    g->Tl = T / g->N;
    g->B = qkv.rows / g->Tl;
    return true;
}

/* One (query share, key share) pair of one sequence and head, not wholly
 * in the future: query rows qr.. of my positions from qp on, key rows
 * kr.. of the visiting block from kp on. */
typedef struct { int b, h, qi, qp, kp, qr, kr; } pair;

/* The pairs of a step, whose block came from rank r - step; at most
 * B heads 4 (pairs has room). */
static int step_pairs(const ring *g, int step, pair *pairs)
{
    const ptdp_cp_layout lq = ptdp_cp_layout_of(g->T, g->N, g->r, g->zigzag);
    const ptdp_cp_layout lk = ptdp_cp_layout_of(g->T, g->N, (g->r - step + g->N) % g->N, g->zigzag);
    const int c = lq.len;
    int n = 0;
    for (int b = 0; b < g->B; b++)
        for (int h = 0; h < g->heads; h++)
            for (int qi = 0; qi < lq.nshares; qi++)
                for (int kj = 0; kj < lk.nshares; kj++)
                    if (!ptdp_cp_in_future(lq.first[qi], lk.first[kj], c))   /* else skipped */
                        pairs[n++] = (pair){ .b = b, .h = h, .qi = qi, .qp = lq.first[qi], .kp = lk.first[kj],
                                             .qr = b * g->Tl + qi * c, .kr = b * g->Tl + kj * c };
    return n;
}

/* ------------------------------------------------------------ forward */

int ptdp_ring_attention_forward(ptdp_device *dev, ptdp_comm *cp, ptdp_tensor y, ptdp_real *lse,
                                ptdp_tensor qkv, int T, int heads, int hd, bool zigzag,
                                const ptdp_attn_dropout *dropout)
{
    ring g;
    if (!setup(&g, cp, qkv, T, heads, hd, zigzag, dropout) ||
        !PTDP_REQUIRE(y.rows == qkv.rows && y.cols == g.W, "y %d x %d for qkv %d x %d", y.rows, y.cols,
                      qkv.rows, qkv.cols))
        return PTDP_EINVAL;
    const ptdp_cp_layout lq = ptdp_cp_layout_of(T, g.N, g.r, zigzag);
    const int c = lq.len, W = g.W;
    const size_t rows = (size_t)g.B * g.Tl, nstat = (size_t)g.B * heads * g.Tl;
    const double scale = 1.0 / sqrt((double)hd);
    const ptdp_real dscale = g.drop ? (ptdp_real)(1.0 / (1.0 - g.drop->p)) : 1;
    ptdp_real *kv = ptdp_alloc_uninit(dev, rows * 2 * W * sizeof(ptdp_real), PTDP_MEM_COMM, "ring.kv");
    ptdp_real *spare = ptdp_alloc_uninit(dev, rows * 2 * W * sizeof(ptdp_real), PTDP_MEM_COMM, "ring.kv_in");
    ptdp_real *S = ptdp_alloc_uninit(dev, (size_t)c * c * sizeof(ptdp_real), PTDP_MEM_ACTS, "ring.scores");
    ptdp_real *m = ptdp_alloc_uninit(dev, nstat * sizeof(ptdp_real), PTDP_MEM_ACTS, "ring.max");
    pair *pairs = malloc((size_t)g.B * heads * 4 * sizeof *pairs);
    int rc = PTDP_OK;
    if (kv == NULL || spare == NULL || S == NULL || m == NULL || pairs == NULL) {
        rc = PTDP_ENOMEM;
        goto out;
    }
    /* my keys and values travel; l (the running sums) accumulates in lse */
    ptdp_tensor_copy(ptdp_tensor_wrap(kv, (int)rows, 2 * W), block(qkv, 0, (int)rows, W, 2 * W));
    ptdp_tensor_fill(y, 0);
    for (size_t i = 0; i < nstat; i++) {
        m[i] = -INFINITY;
        lse[i] = 0;
    }

    for (int step = 0; step < g.N; step++) {
        const ptdp_tensor kvt = ptdp_tensor_wrap(kv, (int)rows, 2 * W);
        const int np = step_pairs(&g, step, pairs);
        for (int k = 0; k < np; k++) {
            const int b = pairs[k].b, h = pairs[k].h, qi = pairs[k].qi, qp = pairs[k].qp;
            const int kp = pairs[k].kp, qr = pairs[k].qr, kr = pairs[k].kr;
            ptdp_matmul(square(S, c), block(qkv, qr, c, h * hd, hd), false,
                        block(kvt, kr, c, h * hd, hd), true, scale, 0.0);
            for (int t = 0; t < c; t++) {
                ptdp_real *row = S + (size_t)t * c;
                const int tq = qp + t, valid = tq - kp + 1 < c ? tq - kp + 1 : c;
                if (valid <= 0) {               /* this query sees none of these keys */
                    memset(row, 0, (size_t)c * sizeof *row);
                    continue;
                }
                const size_t idx = ((size_t)b * heads + h) * g.Tl + (size_t)qi * c + t;
                ptdp_real mb = row[0];
                for (int s = 1; s < valid; s++)
                    mb = row[s] > mb ? row[s] : mb;
                const ptdp_real mnew = m[idx] > mb ? m[idx] : mb;
                const ptdp_real alpha = EXP(m[idx] - mnew);   /* 0 on the first block */
                double sum = 0;
                for (int s = 0; s < valid; s++) {
                    ptdp_real e = EXP(row[s] - mnew);
                    sum += e;
                    if (g.drop != NULL)
                        e = ptdp_attn_dropout_kept(g.drop, g.drop->sample0 + b, g.drop->head0 + h, T, tq, kp + s)
                                ? e * dscale : 0;
                    row[s] = e;
                }
                for (int s = valid; s < c; s++)
                    row[s] = 0;
                lse[idx] = lse[idx] * alpha + (ptdp_real)sum;
                m[idx] = mnew;
                ptdp_real *yr = ptdp_at(y, qr + t, h * hd);
                for (int j = 0; j < hd; j++)
                    yr[j] *= alpha;
            }
            ptdp_matmul(block(y, qr, c, h * hd, hd), square(S, c), false,
                        block(kvt, kr, c, W + h * hd, hd), false, 1.0, 1.0);   /* y += P V */
        }
        if (step + 1 < g.N && (rc = ring_pass(cp, &kv, &spare, rows * 2 * W)) != 0)
            goto out;
    }
    /* y = o / l; keep lse = m + log l */
    for (int b = 0; b < g.B; b++)
        for (int h = 0; h < heads; h++)
            for (int t = 0; t < g.Tl; t++) {
                const size_t idx = ((size_t)b * heads + h) * g.Tl + t;
                ptdp_real *yr = ptdp_at(y, b * g.Tl + t, h * hd);
                const ptdp_real inv = (ptdp_real)(1.0 / lse[idx]);
                for (int j = 0; j < hd; j++)
                    yr[j] *= inv;
                lse[idx] = m[idx] + LOG(lse[idx]);
            }
out:
    ptdp_free(dev, kv);
    ptdp_free(dev, spare);
    ptdp_free(dev, S);
    ptdp_free(dev, m);
    free(pairs);
    return rc;
}

/* ----------------------------------------------------------- backward */

int ptdp_ring_attention_backward(ptdp_device *dev, ptdp_comm *cp, ptdp_tensor dqkv, ptdp_tensor dy,
                                 ptdp_tensor qkv, ptdp_tensor y, const ptdp_real *lse, int T, int heads,
                                 int hd, bool zigzag, const ptdp_attn_dropout *dropout)
{
    ring g;
    if (!setup(&g, cp, qkv, T, heads, hd, zigzag, dropout) ||
        !PTDP_REQUIRE(dqkv.rows == qkv.rows && dqkv.cols == qkv.cols && dy.rows == qkv.rows &&
                          dy.cols == g.W && y.rows == qkv.rows && y.cols == g.W,
                      "dqkv %d x %d, dy %d x %d, y %d x %d for qkv %d x %d", dqkv.rows, dqkv.cols, dy.rows,
                      dy.cols, y.rows, y.cols, qkv.rows, qkv.cols))
        return PTDP_EINVAL;
    const ptdp_cp_layout lq = ptdp_cp_layout_of(T, g.N, g.r, zigzag);
    const int c = lq.len, W = g.W;
    const size_t rows = (size_t)g.B * g.Tl, half = rows * 2 * W, nstat = (size_t)g.B * heads * g.Tl;
    const double scale = 1.0 / sqrt((double)hd);
    const ptdp_real dscale = g.drop ? (ptdp_real)(1.0 / (1.0 - g.drop->p)) : 1;
    /* a travelling block: keys and values, then their gradient so far */
    ptdp_real *blk = ptdp_alloc_uninit(dev, 2 * half * sizeof(ptdp_real), PTDP_MEM_COMM, "ring.kv_dkv");
    ptdp_real *spare = ptdp_alloc_uninit(dev, 2 * half * sizeof(ptdp_real), PTDP_MEM_COMM, "ring.kv_dkv_in");
    ptdp_real *P = ptdp_alloc_uninit(dev, 2 * (size_t)c * c * sizeof(ptdp_real), PTDP_MEM_ACTS, "ring.probs");
    ptdp_real *delta = ptdp_alloc_uninit(dev, nstat * sizeof(ptdp_real), PTDP_MEM_ACTS, "ring.delta");
    pair *pairs = malloc((size_t)g.B * heads * 4 * sizeof *pairs);
    int rc = PTDP_OK;
    if (blk == NULL || spare == NULL || P == NULL || delta == NULL || pairs == NULL) {
        rc = PTDP_ENOMEM;
        goto out;
    }
    ptdp_real *G = P + (size_t)c * c;           /* dP, then dS */
    ptdp_tensor_copy(ptdp_tensor_wrap(blk, (int)rows, 2 * W), block(qkv, 0, (int)rows, W, 2 * W));
    memset(blk + half, 0, half * sizeof(ptdp_real));
    ptdp_tensor_fill(block(dqkv, 0, (int)rows, 0, W), 0);
    for (int b = 0; b < g.B; b++)                /* delta_t = dY_t . y_t per head */
        for (int h = 0; h < heads; h++)
            for (int t = 0; t < g.Tl; t++) {
                const ptdp_real *a = ptdp_at(dy, b * g.Tl + t, h * hd), *o = ptdp_at(y, b * g.Tl + t, h * hd);
                double d = 0;
                for (int j = 0; j < hd; j++)
                    d += (double)a[j] * o[j];
                delta[((size_t)b * heads + h) * g.Tl + t] = (ptdp_real)d;
            }

    for (int step = 0; step < g.N; step++) {
        const ptdp_tensor kvt = ptdp_tensor_wrap(blk, (int)rows, 2 * W);
        const ptdp_tensor dkvt = ptdp_tensor_wrap(blk + half, (int)rows, 2 * W);
        const int np = step_pairs(&g, step, pairs);
        for (int k = 0; k < np; k++) {
            const int b = pairs[k].b, h = pairs[k].h, qi = pairs[k].qi, qp = pairs[k].qp;
            const int kp = pairs[k].kp, qr = pairs[k].qr, kr = pairs[k].kr;
            const ptdp_tensor Q = block(qkv, qr, c, h * hd, hd), K = block(kvt, kr, c, h * hd, hd);
            const ptdp_tensor V = block(kvt, kr, c, W + h * hd, hd);
            const ptdp_tensor dY = block(dy, qr, c, h * hd, hd);
            /* P = e^(S - lse) on the causal part; D = dropout(P) in G for now */
            ptdp_matmul(square(P, c), Q, false, K, true, scale, 0.0);
            for (int t = 0; t < c; t++) {
                const int tq = qp + t, valid = tq - kp + 1 < c ? tq - kp + 1 : c;
                const ptdp_real l = lse[((size_t)b * heads + h) * g.Tl + (size_t)qi * c + t];
                ptdp_real *pr = P + (size_t)t * c, *dr = G + (size_t)t * c;
                for (int s = 0; s < c; s++) {
                    pr[s] = s < valid ? EXP(pr[s] - l) : 0;
                    dr[s] = pr[s];
                    if (g.drop != NULL && s < valid)
                        dr[s] = ptdp_attn_dropout_kept(g.drop, g.drop->sample0 + b, g.drop->head0 + h, T, tq, kp + s)
                                    ? pr[s] * dscale : 0;
                }
            }
            /* dV += D^T dY */
            ptdp_matmul(block(dkvt, kr, c, W + h * hd, hd), square(G, c), true, dY, false, 1.0, 1.0);
            /* dP = dropout'(dY V^T); dS = P (dP - delta) */
            ptdp_matmul(square(G, c), dY, false, V, true, 1.0, 0.0);
            for (int t = 0; t < c; t++) {
                const int tq = qp + t;
                const ptdp_real d = delta[((size_t)b * heads + h) * g.Tl + (size_t)qi * c + t];
                const ptdp_real *pr = P + (size_t)t * c;
                ptdp_real *gr = G + (size_t)t * c;
                for (int s = 0; s < c; s++) {
                    ptdp_real dp = gr[s];
                    if (g.drop != NULL)
                        dp = ptdp_attn_dropout_kept(g.drop, g.drop->sample0 + b, g.drop->head0 + h, T, tq, kp + s)
                                 ? dp * dscale : 0;
                    gr[s] = pr[s] * (dp - d);   /* 0 where P is 0: the future */
                }
            }
            /* dQ += dS K / sqrt(hd),  dK += dS^T Q / sqrt(hd) */
            ptdp_matmul(block(dqkv, qr, c, h * hd, hd), square(G, c), false, K, false, scale, 1.0);
            ptdp_matmul(block(dkvt, kr, c, h * hd, hd), square(G, c), true, Q, false, scale, 1.0);
        }
        if (step + 1 < g.N && (rc = ring_pass(cp, &blk, &spare, 2 * half)) != 0)
            goto out;
    }
    /* the block I hold now is my right neighbour's: its gradient goes home,
     * and mine comes from the left */
    if (g.N > 1) {
        ptdp_real *mine = blk + half, *in = spare + half;
        if ((rc = ring_pass(cp, &mine, &in, half)) != 0)
            goto out;
        ptdp_tensor_copy(block(dqkv, 0, (int)rows, W, 2 * W), ptdp_tensor_wrap(mine, (int)rows, 2 * W));
    } else {
        ptdp_tensor_copy(block(dqkv, 0, (int)rows, W, 2 * W), ptdp_tensor_wrap(blk + half, (int)rows, 2 * W));
    }
out:
    ptdp_free(dev, blk);
    ptdp_free(dev, spare);
    ptdp_free(dev, P);
    ptdp_free(dev, delta);
    free(pairs);
    return rc;
}
