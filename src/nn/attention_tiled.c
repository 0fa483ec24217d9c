/*
 * attention_tiled.c — causal attention in tiles (FlashAttention's algorithm,
 * Dao et al. 2022): the same y as attention.c, without ever holding the
 * T x T probabilities.
 *
 * attention.c makes all of S = Q K^T / sqrt(hd) for a head, softmaxes it and
 * keeps P (B nh T T numbers) for the backward; half of it is the masked
 * future.  Here the queries go in tiles of TILE rows and, for each, the key
 * tiles at or before it — the future ones are never computed:
 *
 *          key tiles →
 *     q  ┌────┬────┬────┬──┐         each query tile i meets key tiles
 *     ↓  │█▙  │    │    │  │         0..i: i full ones (█) and its own
 *        ├────┼────┼────┼──┤         diagonal one, causal inside (▙);
 *        │████│█▙  │    │  │         the blank future is skipped: about
 *        ├────┼────┼────┼──┤         T²/2 + T TILE/2 scores a head
 *        │████│████│█▙  │  │         instead of T²
 *        ├────┼────┼────┼──┤         (T need not be a multiple of TILE:
 *        │████│████│████│▙ │          the last tile is shorter)
 *        └────┴────┴────┴──┘
 *
 * Forward, one query row t, an online softmax over its key tiles j (the
 * merge ring attention does across CP blocks, cp.c):
 *
 *     S_j = q_t K_j^T / sqrt(hd)             (one GEMM for the tile pair)
 *     m' = max(m, max_s S_j[s])               the running maximum
 *     l  = l e^(m - m') + sum_s e^(S_j[s] - m')
 *     o  = o e^(m - m') + D_j V_j,  D_j = dropout(e^(S_j - m'))   (GEMM)
 *     at the end:  y_t = o / l,   lse_t = m + log l   (kept: B nh T numbers)
 *
 * Backward, given dY, from y and lse only:
 *
 *     delta_t = sum_j dY[t][j] y[t][j]        (= sum_s P dP: FlashAttention's
 *                                              identity, every key at once)
 *     per tile pair:  P = e^(S - lse)         the probabilities again
 *                     D = dropout(P)
 *                     dV += D^T dY,  dP = dropout'(dY V^T)          (GEMMs)
 *                     dS = P ⊙ (dP − delta)
 *                     dQ += dS K / sqrt(hd),  dK += dS^T Q / sqrt(hd) (GEMMs)
 *
 * delta needs y, which Ulysses holds in the other layout (positions, not
 * heads): ptdp_attention_tiled_delta makes it apart, where y lies, and
 * ptdp_attention_tiled_backward_delta takes it instead of y.
 *
 * The interface is attention.c's slice of queries [q0, q1) against keys
 * [0, q1) (q0 = 0, q1 = T a whole sequence; TeraPipe's token slices
 * otherwise), with grouped-query heads: query head h reads kv head
 * h / (heads / kv_heads), and a kv head's dK, dV sum its query heads'.
 * The dropout mask is attention.c's (ptdp_attn_dropout_kept, by global
 * indices), regenerated per tile.  The sums are taken in other orders than
 * attention.c's, so y agrees with it to rounding, not bit for bit.
 */
#include "ptdp/ops.h"

#include "nn/row_max.h"
#include "ptdp/error.h"

#include <math.h>
#include <string.h>

enum { TILE = PTDP_ATTENTION_TILE };

size_t ptdp_attention_tiled_scratch(void)
{
    return 2 * (size_t)TILE * TILE;
}

/* The scores the tiles compute for one head's queries [q0, q1): every
 * (query tile, key tile) pair not wholly in the future, each a full
 * rectangle (the diagonal tile's future half is computed, then masked). */
double ptdp_attention_tiled_scores(int q0, int q1)
{
    double n = 0;
    for (int a = q0; a < q1; a += TILE) {
        const int tq = q1 - a < TILE ? q1 - a : TILE, last = a + tq - 1;
        for (int kb = 0; kb <= last; kb += TILE)
            n += (double)tq * (q1 - kb < TILE ? q1 - kb : TILE);
    }
    return n;
}

static ptdp_tensor view(ptdp_tensor t, int r0, int rows, int c0, int cols)
{
    return (ptdp_tensor){ .data = ptdp_at(t, r0, c0), .rows = rows, .cols = cols, .stride = t.stride };
}

static ptdp_tensor matrix(ptdp_real *data, int rows, int cols)
{
    return (ptdp_tensor){ .data = data, .rows = rows, .cols = cols, .stride = cols };
}

/* One head of one sequence: its views, where its tiles lie, its dropout. */
typedef struct {
    ptdp_tensor q, k, v;          /* q: the slice's rows; k, v: rows 0 .. q1-1 */
    int q0, q1, T;
    double scale;                 /* 1 / sqrt(hd) */
    const ptdp_attn_dropout *drop;  /* NULL when p = 0 */
    int64_t sample;
    int head;
} head;

/* A tile pair: queries [a, a + tq) (global positions), keys [kb, kb + tk). */
typedef struct {
    int a, tq, kb, tk;
} tiles;

/* The row sums below run in lanes: a chain of dependent adds waits on
 * each one's latency, independent lanes overlap, and the compiler turns
 * the fixed-width inner loops into vector instructions.  The sums are
 * double, each lane in index order and the lanes added in a fixed order,
 * so a run's bits do not depend on the machine or the threads.  (The row
 * maximum, exact in any order, is row_max.h's.) */
enum { LANES = 4 };

/* sum_s a[s] b[s] over s < n, in double (b NULL: sum_s a[s]). */
static double row_dot(const ptdp_real *a, const ptdp_real *b, int n)
{
    double acc[LANES] = { 0 };
    int s = 0;
    if (b == NULL)
        for (; s + LANES <= n; s += LANES)
            for (int j = 0; j < LANES; j++)
                acc[j] += a[s + j];
    else
        for (; s + LANES <= n; s += LANES)
            for (int j = 0; j < LANES; j++)
                acc[j] += (double)a[s + j] * b[s + j];
    for (; s < n; s++)
        acc[0] += b == NULL ? a[s] : (double)a[s] * b[s];
    double r = acc[0];
    for (int j = 1; j < LANES; j++)
        r += acc[j];
    return r;
}

/* How many keys of the pair query row i sees: those at or before it. */
static int visible(const tiles *p, int i)
{
    const int n = p->a + i - p->kb + 1;
    return n < p->tk ? n : p->tk;
}

/* dst[i][s] = dropout(src[i][s]) for the pair's rows (tk columns); dst may
 * be src.  A 0 stays 0 without drawing (P's masked future; in dD the
 * future is not 0, but P's zeros cancel it in dS = P (dP - delta)). */
static void drop_tile(const head *H, const tiles *p, ptdp_real *dst, const ptdp_real *src)
{
    const ptdp_real scale = (ptdp_real)(1.0 / (1.0 - H->drop->p));
    for (int i = 0; i < p->tq; i++)
        for (int s = 0; s < p->tk; s++) {
            const size_t k = (size_t)i * p->tk + s;
            dst[k] = src[k] != 0 && ptdp_attn_dropout_kept(H->drop, H->sample, H->head, H->T, p->a + i, p->kb + s)
                         ? src[k] * scale : 0;
        }
}

/* S = Q_tile K_tile^T / sqrt(hd) into S (tq x tk). */
static void scores(const head *H, const tiles *p, ptdp_real *S)
{
    ptdp_matmul(matrix(S, p->tq, p->tk), view(H->q, p->a - H->q0, p->tq, 0, H->q.cols), false,
                view(H->k, p->kb, p->tk, 0, H->k.cols), true, H->scale, 0.0);
}

/* ------------------------------------------------------------- forward */

/* The online-softmax merge of the pair's scores into the running m and l of
 * its query rows; S becomes e^(S - m') (0 in the future) and the rows of o
 * (y's) are rescaled by e^(m - m').  first: o holds nothing yet. */
static void merge_tile(const tiles *p, ptdp_real *S, double *m, double *l, ptdp_tensor o, bool first)
{
    for (int i = 0; i < p->tq; i++) {
        ptdp_real *row = S + (size_t)i * p->tk;
        const int n = visible(p, i);
        if (n <= 0) {                         /* a query before this whole tile */
            memset(row, 0, (size_t)p->tk * sizeof *row);
            continue;
        }
        const double mb = ptdp_max_lanes(row, n);
        const double mnew = first || mb > m[i] ? mb : m[i];
        const ptdp_real shift = (ptdp_real)mnew;
        for (int s = 0; s < n; s++)
            row[s] -= shift;
        ptdp_exp_inplace(row, (size_t)n);
        const double sum = row_dot(row, NULL, n);
        for (int s = n; s < p->tk; s++)
            row[s] = 0;
        if (!first) {
            const double alpha = exp(m[i] - mnew);
            ptdp_real *yr = ptdp_at(o, i, 0);
            for (int j = 0; j < o.cols; j++)
                yr[j] = (ptdp_real)(yr[j] * alpha);
            l[i] *= alpha;
        }
        l[i] = first ? sum : l[i] + sum;
        m[i] = mnew;
    }
}

/* One query tile against its key tiles 0 .. its own, into y's rows and lse. */
static void forward_tile(const head *H, int a, int tq, ptdp_tensor y, ptdp_real *lse, ptdp_real *S)
{
    double m[TILE], l[TILE];
    ptdp_tensor o = view(y, a - H->q0, tq, 0, y.cols);
    for (int kb = 0; kb <= a + tq - 1; kb += TILE) {
        const tiles p = { .a = a, .tq = tq, .kb = kb, .tk = H->q1 - kb < TILE ? H->q1 - kb : TILE };
        scores(H, &p, S);
        merge_tile(&p, S, m, l, o, kb == 0);
        if (H->drop != NULL)
            drop_tile(H, &p, S, S);
        ptdp_matmul(o, matrix(S, tq, p.tk), false, view(H->v, kb, p.tk, 0, H->v.cols), false, 1.0,
                    kb == 0 ? 0.0 : 1.0);                          /* o = o alpha + D V */
    }
    for (int i = 0; i < tq; i++) {                                 /* y = o / l, lse = m + log l */
        ptdp_real *yr = ptdp_at(o, i, 0);
        const ptdp_real inv = (ptdp_real)(1.0 / l[i]);
        for (int j = 0; j < o.cols; j++)
            yr[j] *= inv;
        lse[a - H->q0 + i] = (ptdp_real)(m[i] + log(l[i]));
    }
}

/* The columns of query head h's q and of its kv head's k and v in a packed
 * row [q of heads | k of kv_heads | v of kv_heads] (attention.c's). */
static head head_of(ptdp_tensor qkv, int b, int h, int T, int q0, int q1, int heads, int kv_heads, int hd,
                    const ptdp_attn_dropout *dropout)
{
    const int g = h / (heads / kv_heads);
    const bool dropping = dropout != NULL && dropout->p > 0;
    return (head){
        .q = view(qkv, b * T + q0, q1 - q0, h * hd, hd),
        .k = view(qkv, b * T, q1, (heads + g) * hd, hd),
        .v = view(qkv, b * T, q1, (heads + kv_heads + g) * hd, hd),
        .q0 = q0, .q1 = q1, .T = T, .scale = 1.0 / sqrt((double)hd),
        .drop = dropping ? dropout : NULL,
        .sample = dropping ? dropout->sample0 + b : 0, .head = dropping ? dropout->head0 + h : 0,
    };
}

static bool shapes_ok(ptdp_tensor qkv, ptdp_tensor y, int T, int q0, int q1, int heads, int kv_heads, int hd)
{
    return PTDP_REQUIRE(heads > 0 && kv_heads > 0 && heads % kv_heads == 0 && hd > 0 &&
                        qkv.cols == (heads + 2 * kv_heads) * hd && y.cols == heads * hd && T > 0 &&
                        qkv.rows % T == 0 && 0 <= q0 && q0 < q1 && q1 <= T && y.rows == qkv.rows / T * (q1 - q0),
                        "qkv %d x %d, y %d x %d, T %d, queries [%d, %d), %d heads and %d kv heads of %d", qkv.rows,
                        qkv.cols, y.rows, y.cols, T, q0, q1, heads, kv_heads, hd);
}

void ptdp_attention_tiled_forward(ptdp_tensor y, ptdp_real *lse, ptdp_tensor qkv, int T, int q0, int q1,
                                  int heads, int kv_heads, int hd, const ptdp_attn_dropout *dropout,
                                  ptdp_real *scratch)
{
    if (!shapes_ok(qkv, y, T, q0, q1, heads, kv_heads, hd))
        return;
    const int B = qkv.rows / T, Tq = q1 - q0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < heads; h++) {
            const head H = head_of(qkv, b, h, T, q0, q1, heads, kv_heads, hd, dropout);
            ptdp_tensor yh = view(y, b * Tq, Tq, h * hd, hd);
            ptdp_real *l = lse + ((size_t)b * heads + h) * (size_t)Tq;
            for (int a = q0; a < q1; a += TILE)
                forward_tile(&H, a, q1 - a < TILE ? q1 - a : TILE, yh, l, scratch);
        }
}

/* ------------------------------------------------------------ backward */

/* delta_t = dY_t . y_t of each head, rows x heads from rows x (heads hd):
 * the softmax's row sum sum_s P dP of every key at once.  Its own pass, so
 * that Ulysses can take it where y lies (ulysses.h) and send it instead. */
void ptdp_attention_tiled_delta(ptdp_tensor delta, ptdp_tensor dy, ptdp_tensor y, int hd)
{
    if (!PTDP_REQUIRE(hd > 0 && dy.rows == y.rows && dy.cols == y.cols && delta.rows == y.rows &&
                      delta.cols * hd == y.cols, "delta %d x %d for dy %d x %d, y %d x %d, heads of %d",
                      delta.rows, delta.cols, dy.rows, dy.cols, y.rows, y.cols, hd))
        return;
    for (int r = 0; r < y.rows; r++)
        for (int h = 0; h < delta.cols; h++) {
            *ptdp_at(delta, r, h) = (ptdp_real)row_dot(ptdp_at(dy, r, h * hd), ptdp_at(y, r, h * hd), hd);
        }
}

/* One head's gradients: dq of the slice's rows; dk, dv of rows 0 .. q1-1
 * (write_kv: the first tile pair to reach a key tile writes its rows, else
 * every pair adds into them); dy the slice's, and its delta made from y
 * (the slice's) or given (one column of a delta tensor). */
typedef struct {
    ptdp_tensor dq, dk, dv, dy, y, delta;
    const ptdp_real *lse;
    bool write_kv;
} head_grads;

/* The pair's backward: P again from lse, then dV, dS, dQ, dK. */
static void backward_pair(const head *H, const tiles *p, const head_grads *G, const double *delta, ptdp_real *P,
                          ptdp_real *dP)
{
    const int r = p->a - H->q0;
    const ptdp_tensor dy = view(G->dy, r, p->tq, 0, G->dy.cols), dq = view(G->dq, r, p->tq, 0, G->dq.cols);
    const ptdp_tensor kt = view(H->k, p->kb, p->tk, 0, H->k.cols), vt = view(H->v, p->kb, p->tk, 0, H->v.cols);
    /* the first query tile to reach key tile kb: the slice's first, or the
     * one that starts at or before it (none before did) */
    const double kv_beta = G->write_kv && (p->a == H->q0 || p->kb >= p->a) ? 0.0 : 1.0;
    scores(H, p, P);
    for (int i = 0; i < p->tq; i++) {                              /* P = e^(S - lse), 0 in the future */
        ptdp_real *row = P + (size_t)i * p->tk;
        const int n = visible(p, i) > 0 ? visible(p, i) : 0;
        for (int s = 0; s < n; s++)
            row[s] -= G->lse[r + i];
        ptdp_exp_inplace(row, (size_t)n);
        for (int s = n; s < p->tk; s++)
            row[s] = 0;
    }
    const ptdp_real *D = P;                                        /* dV += D^T dY */
    if (H->drop != NULL) {
        drop_tile(H, p, dP, P);
        D = dP;
    }
    ptdp_matmul(view(G->dv, p->kb, p->tk, 0, G->dv.cols), matrix((ptdp_real *)D, p->tq, p->tk), true, dy, false,
                1.0, kv_beta);
    ptdp_matmul(matrix(dP, p->tq, p->tk), dy, false, vt, true, 1.0, 0.0);   /* dD = dY V^T */
    if (H->drop != NULL)
        drop_tile(H, p, dP, dP);                                   /* dP = dropout'(dD) */
    for (int i = 0; i < p->tq; i++) {                              /* dS = P (dP - delta) */
        ptdp_real *g = dP + (size_t)i * p->tk;
        const ptdp_real *pr = P + (size_t)i * p->tk, d = (ptdp_real)delta[i];
        for (int s = 0; s < p->tk; s++)
            g[s] = pr[s] * (g[s] - d);
    }
    ptdp_matmul(dq, matrix(dP, p->tq, p->tk), false, kt, false, H->scale, p->kb == 0 ? 0.0 : 1.0);
    ptdp_matmul(view(G->dk, p->kb, p->tk, 0, G->dk.cols), matrix(dP, p->tq, p->tk), true,
                view(H->q, r, p->tq, 0, H->q.cols), false, H->scale, kv_beta);
}

static void backward_head(const head *H, const head_grads *G, ptdp_real *scratch)
{
    ptdp_real *P = scratch, *dP = scratch + (size_t)TILE * TILE;
    for (int a = H->q0; a < H->q1; a += TILE) {
        const int tq = H->q1 - a < TILE ? H->q1 - a : TILE;
        double delta[TILE];
        for (int i = 0; i < tq; i++) {                             /* delta_t = dY_t . y_t */
            if (G->y.data == NULL) {                               /* given */
                delta[i] = *ptdp_at(G->delta, a - H->q0 + i, 0);
                continue;
            }
            delta[i] = row_dot(ptdp_at(G->dy, a - H->q0 + i, 0), ptdp_at(G->y, a - H->q0 + i, 0), G->dy.cols);
        }
        for (int kb = 0; kb <= a + tq - 1; kb += TILE) {
            const tiles p = { .a = a, .tq = tq, .kb = kb, .tk = H->q1 - kb < TILE ? H->q1 - kb : TILE };
            backward_pair(H, &p, G, delta, P, dP);
        }
    }
}

/* The backward of every head, its delta from y (y.data != NULL) or from
 * the delta tensor's column. */
static void tiled_backward(ptdp_tensor dqkv, ptdp_tensor dy, ptdp_tensor qkv, ptdp_tensor y, ptdp_tensor delta,
                           const ptdp_real *lse, int T, int q0, int q1, int heads, int kv_heads, int hd,
                           const ptdp_attn_dropout *dropout, bool accumulate_kv, ptdp_real *scratch)
{
    if (!shapes_ok(qkv, dy, T, q0, q1, heads, kv_heads, hd) ||
        !PTDP_REQUIRE(dqkv.rows == qkv.rows && dqkv.cols == qkv.cols &&
                      (y.data != NULL ? y.rows == dy.rows && y.cols == dy.cols
                                      : delta.rows == dy.rows && delta.cols == heads),
                      "dqkv %d x %d for qkv %d x %d, dy %d x %d, y %d x %d, delta %d x %d", dqkv.rows, dqkv.cols,
                      qkv.rows, qkv.cols, dy.rows, dy.cols, y.rows, y.cols, delta.rows, delta.cols))
        return;
    const int B = qkv.rows / T, Tq = q1 - q0, group = heads / kv_heads;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < heads; h++) {
            const head H = head_of(qkv, b, h, T, q0, q1, heads, kv_heads, hd, dropout);
            const head d = head_of(dqkv, b, h, T, q0, q1, heads, kv_heads, hd, NULL);
            const head_grads G = {
                .dq = d.q, .dk = d.k, .dv = d.v,
                .dy = view(dy, b * Tq, Tq, h * hd, hd),
                .y = y.data != NULL ? view(y, b * Tq, Tq, h * hd, hd) : (ptdp_tensor){ 0 },
                .delta = y.data != NULL ? (ptdp_tensor){ 0 } : view(delta, b * Tq, Tq, h, 1),
                .lse = lse + ((size_t)b * heads + h) * (size_t)Tq,
                .write_kv = !accumulate_kv && h % group == 0,   /* the group's first head writes dK, dV */
            };
            backward_head(&H, &G, scratch);
        }
}

void ptdp_attention_tiled_backward(ptdp_tensor dqkv, ptdp_tensor dy, ptdp_tensor qkv, ptdp_tensor y,
                                   const ptdp_real *lse, int T, int q0, int q1, int heads, int kv_heads, int hd,
                                   const ptdp_attn_dropout *dropout, bool accumulate_kv, ptdp_real *scratch)
{
    if (PTDP_REQUIRE(y.data != NULL, "the tiled backward needs y"))
        tiled_backward(dqkv, dy, qkv, y, (ptdp_tensor){ 0 }, lse, T, q0, q1, heads, kv_heads, hd, dropout,
                       accumulate_kv, scratch);
}

void ptdp_attention_tiled_backward_delta(ptdp_tensor dqkv, ptdp_tensor dy, ptdp_tensor qkv, ptdp_tensor delta,
                                         const ptdp_real *lse, int T, int q0, int q1, int heads, int kv_heads,
                                         int hd, const ptdp_attn_dropout *dropout, bool accumulate_kv,
                                         ptdp_real *scratch)
{
    if (PTDP_REQUIRE(delta.data != NULL, "the tiled backward needs delta"))
        tiled_backward(dqkv, dy, qkv, (ptdp_tensor){ 0 }, delta, lse, T, q0, q1, heads, kv_heads, hd, dropout,
                       accumulate_kv, scratch);
}
