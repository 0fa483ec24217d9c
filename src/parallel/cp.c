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
 * Grouped-query attention (ops.h's gqa): the rows are [q of H heads | k of
 * K heads | v of K heads] and query head h reads kv head h / (H/K), so only
 * K heads of keys and values travel — 2 R K hd reals a step where multi-
 * head attention sends 2 R H hd — and a kv head's gradient, travelling
 * beside it, sums the H/K query heads that share it.  K = H is the
 * multi-head ring, bit for bit (the same operations in the same order).
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
    if (zigzag && cp > 1) {     /* one rank holds the whole sequence, in order:
                                 * T need not even be even */
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

/* The key shares of every owner tile the sequence in shares of len
 * (0, len, 2 len, ...), each starting at a multiple of len; one is not in
 * the future of the query share at q_first when it starts at or before
 * it: q_first / len + 1 of them, each len x len scores — in O(1) where
 * walking the owners is O(cp) (the planner asks at cp in the thousands). */
double ptdp_ring_attention_scores(int T, int cp, int rank, bool zigzag)
{
    const ptdp_cp_layout q = ptdp_cp_layout_of(T, cp, rank, zigzag);
    double blocks = 0;
    for (int i = 0; i < q.nshares && q.len > 0; i++)
        blocks += q.first[i] / q.len + 1;
    return blocks * q.len * q.len;
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
    int kv_heads, Wk, group;         /* K, K hd, H / K: h reads kv h / group */
    int c;                           /* a share's length (the pairs' side)  */
    bool zigzag;
    const ptdp_attn_dropout *drop;   /* NULL when p = 0 */
    double scale;                    /* 1 / sqrt(hd)                        */
    ptdp_real dscale;                /* 1 / (1 - p): a kept probability's   */
} ring;

static bool setup(ring *g, ptdp_comm *cp, ptdp_tensor qkv, int T, int heads, int kv_heads, int hd, bool zigzag,
                  const ptdp_attn_dropout *dropout)
{
    if (!PTDP_REQUIRE(kv_heads > 0 && heads % kv_heads == 0, "%d kv heads for %d heads", kv_heads, heads))
        return false;
    g->kv_heads = kv_heads;
    g->Wk = kv_heads * hd;
    g->group = heads / kv_heads;
    g->N = ptdp_comm_size(cp);
    g->r = ptdp_comm_rank(cp);
    g->T = T;
    g->heads = heads;
    g->hd = hd;
    g->W = heads * hd;
    g->zigzag = zigzag;
    g->drop = dropout != NULL && dropout->p > 0 ? dropout : NULL;
    const int parts = zigzag ? 2 * g->N : g->N;
    if (!PTDP_REQUIRE(T > 0 && T % parts == 0 && qkv.cols == g->W + 2 * g->Wk && qkv.rows % (T / g->N) == 0,
                      "T %d over %d %s chunks, qkv %d x %d, %d heads of %d", T, parts,
                      zigzag ? "zigzag" : "contiguous", qkv.rows, qkv.cols, heads, hd))
        return false;
    g->Tl = T / g->N;
    g->B = qkv.rows / g->Tl;
    g->c = ptdp_cp_layout_of(T, g->N, g->r, zigzag).len;
    g->scale = 1.0 / sqrt((double)hd);
    g->dscale = g->drop ? (ptdp_real)(1.0 / (1.0 - g->drop->p)) : 1;
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

/* Where query row t of pair p keeps its statistics (m, l, lse, delta):
 * per sequence, head and local position. */
static size_t stat_index(const ring *g, const pair *p, int t)
{
    return ((size_t)p->b * g->heads + p->h) * g->Tl + (size_t)p->qi * g->c + t;
}

/* How many keys of pair p query row t sees (causal): up to its position. */
static int visible_keys(const ring *g, const pair *p, int t)
{
    const int tq = p->qp + t;
    return tq - p->kp + 1 < g->c ? tq - p->kp + 1 : g->c;
}

/* Does dropout keep the probability of query row t and key s of pair p? */
static bool kept(const ring *g, const pair *p, int t, int s)
{
    return ptdp_attn_dropout_kept(g->drop, g->drop->sample0 + p->b, g->drop->head0 + p->h, g->T,
                                  p->qp + t, p->kp + s);
}

/* ------------------------------------------------------------ forward */

/* The online-softmax merge of one query row with a new block of scores:
 * m' = max(m, max_s S), rescale l and y by e^(m - m'), l += sum_s e^(S - m'),
 * and the row becomes P = e^(S - m') (dropped, scaled), 0 in the future. */
static void merge_row(const ring *g, const pair *p, int t, ptdp_real *row, ptdp_real *m, ptdp_real *l,
                      ptdp_tensor y)
{
    const int c = g->c, valid = visible_keys(g, p, t);
    if (valid <= 0) {               /* this query sees none of these keys */
        memset(row, 0, (size_t)c * sizeof *row);
        return;
    }
    const size_t idx = stat_index(g, p, t);
    ptdp_real mb = row[0];
    for (int s = 1; s < valid; s++)
        mb = row[s] > mb ? row[s] : mb;
    const ptdp_real mnew = m[idx] > mb ? m[idx] : mb;
    const ptdp_real alpha = EXP(m[idx] - mnew);   /* 0 on the first block */
    double sum = 0;
    for (int s = 0; s < valid; s++) {
        ptdp_real e = EXP(row[s] - mnew);
        sum += e;
        if (g->drop != NULL)
            e = kept(g, p, t, s) ? e * g->dscale : 0;
        row[s] = e;
    }
    for (int s = valid; s < c; s++)
        row[s] = 0;
    l[idx] = l[idx] * alpha + (ptdp_real)sum;
    m[idx] = mnew;
    ptdp_real *yr = ptdp_at(y, p->qr + t, p->h * g->hd);
    for (int j = 0; j < g->hd; j++)
        yr[j] *= alpha;
}

/* A block's partial attention for one pair: its scores S = Q K^T / sqrt(hd),
 * merged row by row into the running softmax, then y += P V. */
static void forward_pair(const ring *g, const pair *p, ptdp_tensor qkv, ptdp_tensor kvt, ptdp_tensor y,
                         ptdp_real *S, ptdp_real *m, ptdp_real *l)
{
    const int c = g->c, hd = g->hd, col = p->h * hd, kcol = p->h / g->group * hd;
    ptdp_matmul(square(S, c), block(qkv, p->qr, c, col, hd), false, block(kvt, p->kr, c, kcol, hd), true,
                g->scale, 0.0);
    for (int t = 0; t < c; t++)
        merge_row(g, p, t, S + (size_t)t * c, m, l, y);
    ptdp_matmul(block(y, p->qr, c, col, hd), square(S, c), false, block(kvt, p->kr, c, g->Wk + kcol, hd), false,
                1.0, 1.0);   /* y += P V */
}

/* After the last block: y = o / l, and keep lse = m + log l (l was kept in lse). */
static void forward_finish(const ring *g, ptdp_tensor y, ptdp_real *lse, const ptdp_real *m)
{
    for (int b = 0; b < g->B; b++)
        for (int h = 0; h < g->heads; h++)
            for (int t = 0; t < g->Tl; t++) {
                const size_t idx = ((size_t)b * g->heads + h) * g->Tl + t;
                ptdp_real *yr = ptdp_at(y, b * g->Tl + t, h * g->hd);
                const ptdp_real inv = (ptdp_real)(1.0 / lse[idx]);
                for (int j = 0; j < g->hd; j++)
                    yr[j] *= inv;
                lse[idx] = m[idx] + LOG(lse[idx]);
            }
}

int ptdp_ring_attention_forward(ptdp_device *dev, ptdp_comm *cp, ptdp_tensor y, ptdp_real *lse,
                                ptdp_tensor qkv, int T, int heads, int hd, bool zigzag,
                                const ptdp_attn_dropout *dropout)
{
    return ptdp_ring_attention_gqa_forward(dev, cp, y, lse, qkv, T, heads, heads, hd, zigzag, dropout);
}

int ptdp_ring_attention_gqa_forward(ptdp_device *dev, ptdp_comm *cp, ptdp_tensor y, ptdp_real *lse,
                                    ptdp_tensor qkv, int T, int heads, int kv_heads, int hd, bool zigzag,
                                    const ptdp_attn_dropout *dropout)
{
    ring g;
    if (!setup(&g, cp, qkv, T, heads, kv_heads, hd, zigzag, dropout) ||
        !PTDP_REQUIRE(y.rows == qkv.rows && y.cols == g.W, "y %d x %d for qkv %d x %d", y.rows, y.cols,
                      qkv.rows, qkv.cols))
        return PTDP_EINVAL;
    const int c = g.c, W = g.W, Wk = g.Wk;
    const size_t rows = (size_t)g.B * g.Tl, nstat = (size_t)g.B * heads * g.Tl;
    ptdp_real *kv = ptdp_alloc_uninit(dev, rows * 2 * Wk * sizeof(ptdp_real), PTDP_MEM_COMM, "ring.kv");
    ptdp_real *spare = ptdp_alloc_uninit(dev, rows * 2 * Wk * sizeof(ptdp_real), PTDP_MEM_COMM, "ring.kv_in");
    ptdp_real *S = ptdp_alloc_uninit(dev, (size_t)c * c * sizeof(ptdp_real), PTDP_MEM_ACTS, "ring.scores");
    ptdp_real *m = ptdp_alloc_uninit(dev, nstat * sizeof(ptdp_real), PTDP_MEM_ACTS, "ring.max");
    pair *pairs = malloc((size_t)g.B * heads * 4 * sizeof *pairs);
    int rc = PTDP_OK;
    if (kv == NULL || spare == NULL || S == NULL || m == NULL || pairs == NULL) {
        rc = PTDP_ENOMEM;
        goto out;
    }
    /* my keys and values travel; l (the running sums) accumulates in lse */
    ptdp_tensor_copy(ptdp_tensor_wrap(kv, (int)rows, 2 * Wk), block(qkv, 0, (int)rows, W, 2 * Wk));
    ptdp_tensor_fill(y, 0);
    for (size_t i = 0; i < nstat; i++) {
        m[i] = -INFINITY;
        lse[i] = 0;
    }

    for (int step = 0; step < g.N; step++) {
        const ptdp_tensor kvt = ptdp_tensor_wrap(kv, (int)rows, 2 * Wk);
        const int np = step_pairs(&g, step, pairs);
        for (int k = 0; k < np; k++)
            forward_pair(&g, &pairs[k], qkv, kvt, y, S, m, lse);
        if (step + 1 < g.N && (rc = ring_pass(cp, &kv, &spare, rows * 2 * Wk)) != 0)
            goto out;
    }
    forward_finish(&g, y, lse, m);
out:
    ptdp_free(dev, kv);
    ptdp_free(dev, spare);
    ptdp_free(dev, S);
    ptdp_free(dev, m);
    free(pairs);
    return rc;
}

/* ----------------------------------------------------------- backward */

/* delta_t = dY_t . y_t, per sequence, head and query row. */
static void backward_delta(const ring *g, ptdp_real *delta, ptdp_tensor dy, ptdp_tensor y)
{
    const int hd = g->hd;
    for (int b = 0; b < g->B; b++)
        for (int h = 0; h < g->heads; h++)
            for (int t = 0; t < g->Tl; t++) {
                const ptdp_real *a = ptdp_at(dy, b * g->Tl + t, h * hd), *o = ptdp_at(y, b * g->Tl + t, h * hd);
                double d = 0;
                for (int j = 0; j < hd; j++)
                    d += (double)a[j] * o[j];
                delta[((size_t)b * g->heads + h) * g->Tl + t] = (ptdp_real)d;
            }
}

/* What the backward of one pair reads and writes besides the block. */
typedef struct {
    ptdp_tensor qkv, dqkv, dy;
    const ptdp_real *lse, *delta;
    ptdp_real *P, *G;               /* c x c each: P, and D, then dP, then dS */
} backward_io;

/* The probabilities again, P = e^(S - lse) on the causal part (S already
 * in P), and D = dropout(P) in G. */
static void recompute_probs(const ring *g, const pair *p, const backward_io *io)
{
    const int c = g->c;
    for (int t = 0; t < c; t++) {
        const int valid = visible_keys(g, p, t);
        const ptdp_real l = io->lse[stat_index(g, p, t)];
        ptdp_real *pr = io->P + (size_t)t * c, *dr = io->G + (size_t)t * c;
        for (int s = 0; s < c; s++) {
            pr[s] = s < valid ? EXP(pr[s] - l) : 0;
            dr[s] = pr[s];
            if (g->drop != NULL && s < valid)
                dr[s] = kept(g, p, t, s) ? pr[s] * g->dscale : 0;
        }
    }
}

/* dS = P (dP - delta), dP = dropout'(dY V^T) (in G) dropped as D was. */
static void score_grads(const ring *g, const pair *p, const backward_io *io)
{
    const int c = g->c;
    for (int t = 0; t < c; t++) {
        const ptdp_real d = io->delta[stat_index(g, p, t)];
        const ptdp_real *pr = io->P + (size_t)t * c;
        ptdp_real *gr = io->G + (size_t)t * c;
        for (int s = 0; s < c; s++) {
            ptdp_real dp = gr[s];
            if (g->drop != NULL)
                dp = kept(g, p, t, s) ? dp * g->dscale : 0;
            gr[s] = pr[s] * (dp - d);   /* 0 where P is 0: the future */
        }
    }
}

/* One pair's gradients: dQ into dqkv, dK and dV into the travelling block. */
static void backward_pair(const ring *g, const pair *p, const backward_io *io, ptdp_tensor kvt, ptdp_tensor dkvt)
{
    const int c = g->c, hd = g->hd, col = p->h * hd, kcol = p->h / g->group * hd;
    const ptdp_tensor Q = block(io->qkv, p->qr, c, col, hd), K = block(kvt, p->kr, c, kcol, hd);
    const ptdp_tensor V = block(kvt, p->kr, c, g->Wk + kcol, hd);
    const ptdp_tensor dY = block(io->dy, p->qr, c, col, hd);
    ptdp_matmul(square(io->P, c), Q, false, K, true, g->scale, 0.0);
    recompute_probs(g, p, io);
    /* dV += D^T dY */
    ptdp_matmul(block(dkvt, p->kr, c, g->Wk + kcol, hd), square(io->G, c), true, dY, false, 1.0, 1.0);
    /* dP = dY V^T; dS = P (dP - delta) */
    ptdp_matmul(square(io->G, c), dY, false, V, true, 1.0, 0.0);
    score_grads(g, p, io);
    /* dQ += dS K / sqrt(hd),  dK += dS^T Q / sqrt(hd) */
    ptdp_matmul(block(io->dqkv, p->qr, c, col, hd), square(io->G, c), false, K, false, g->scale, 1.0);
    ptdp_matmul(block(dkvt, p->kr, c, kcol, hd), square(io->G, c), true, Q, false, g->scale, 1.0);
}

/* After the last step the block I hold is my right neighbour's: its
 * gradient goes home, and mine comes from the left, into dqkv's K and V. */
static int gradients_home(const ring *g, ptdp_comm *cp, ptdp_real *blk, ptdp_real *spare, size_t half,
                          ptdp_tensor dqkv)
{
    const int rows = g->B * g->Tl, W = g->W, Wk = g->Wk;
    ptdp_real *mine = blk + half, *in = spare + half;
    if (g->N > 1) {
        int rc = ring_pass(cp, &mine, &in, half);
        if (rc != 0)
            return rc;
    }
    ptdp_tensor_copy(block(dqkv, 0, rows, W, 2 * Wk), ptdp_tensor_wrap(mine, rows, 2 * Wk));
    return 0;
}

int ptdp_ring_attention_backward(ptdp_device *dev, ptdp_comm *cp, ptdp_tensor dqkv, ptdp_tensor dy,
                                 ptdp_tensor qkv, ptdp_tensor y, const ptdp_real *lse, int T, int heads,
                                 int hd, bool zigzag, const ptdp_attn_dropout *dropout)
{
    return ptdp_ring_attention_gqa_backward(dev, cp, dqkv, dy, qkv, y, lse, T, heads, heads, hd, zigzag, dropout);
}

int ptdp_ring_attention_gqa_backward(ptdp_device *dev, ptdp_comm *cp, ptdp_tensor dqkv, ptdp_tensor dy,
                                     ptdp_tensor qkv, ptdp_tensor y, const ptdp_real *lse, int T, int heads,
                                     int kv_heads, int hd, bool zigzag, const ptdp_attn_dropout *dropout)
{
    ring g;
    if (!setup(&g, cp, qkv, T, heads, kv_heads, hd, zigzag, dropout) ||
        !PTDP_REQUIRE(dqkv.rows == qkv.rows && dqkv.cols == qkv.cols && dy.rows == qkv.rows &&
                          dy.cols == g.W && y.rows == qkv.rows && y.cols == g.W,
                      "dqkv %d x %d, dy %d x %d, y %d x %d for qkv %d x %d", dqkv.rows, dqkv.cols, dy.rows,
                      dy.cols, y.rows, y.cols, qkv.rows, qkv.cols))
        return PTDP_EINVAL;
    const int c = g.c, W = g.W, Wk = g.Wk;
    const size_t rows = (size_t)g.B * g.Tl, half = rows * 2 * Wk, nstat = (size_t)g.B * heads * g.Tl;
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
    const backward_io io = { qkv, dqkv, dy, lse, delta, P, P + (size_t)c * c };
    ptdp_tensor_copy(ptdp_tensor_wrap(blk, (int)rows, 2 * Wk), block(qkv, 0, (int)rows, W, 2 * Wk));
    memset(blk + half, 0, half * sizeof(ptdp_real));
    ptdp_tensor_fill(block(dqkv, 0, (int)rows, 0, W), 0);
    backward_delta(&g, delta, dy, y);

    for (int step = 0; step < g.N; step++) {
        const ptdp_tensor kvt = ptdp_tensor_wrap(blk, (int)rows, 2 * Wk);
        const ptdp_tensor dkvt = ptdp_tensor_wrap(blk + half, (int)rows, 2 * Wk);
        const int np = step_pairs(&g, step, pairs);
        for (int k = 0; k < np; k++)
            backward_pair(&g, &pairs[k], &io, kvt, dkvt);
        if (step + 1 < g.N && (rc = ring_pass(cp, &blk, &spare, 2 * half)) != 0)
            goto out;
    }
    rc = gradients_home(&g, cp, blk, spare, half, dqkv);
out:
    ptdp_free(dev, blk);
    ptdp_free(dev, spare);
    ptdp_free(dev, P);
    ptdp_free(dev, delta);
    free(pairs);
    return rc;
}
