/*
 * attention.c — causal self-attention of several heads, and its backward.
 *
 * For one sequence of T positions and one head of size hd, with the
 * head's queries Q, keys K and values V (T x hd each, cut out of the
 * c_attn output as strided views, no copy):
 *
 *     S = Q K^T / sqrt(hd)                    T x T scores        (one GEMM)
 *     P = softmax over s <= t of S[t][s]      causal: position t sees 0..t
 *     D = dropout(P)                          (identity when p = 0)
 *     Y = D V                                 T x hd              (one GEMM)
 *
 *          keys s →                       the mask keeps s <= t, so the
 *     t  ┌─────────────┐                  first token attends to itself,
 *     ↓  │█            │                  the last one to every token
 *        │█ █          │
 *        │█ █ █        │   P (kept for the backward: B nh T T numbers —
 *        │█ █ █ █      │   the 5 a s / h term of Korthikanti et al.)
 *        └─────────────┘
 *
 * The heads are independent: under tensor parallelism a rank holds nh/tp
 * of them and runs exactly this on its own (attention needs no
 * communication of its own; Megatron-LM's split by heads).
 *
 * Backward, for one sequence and head, given dY:
 *
 *     dD = dY V^T           dV = D^T dY                         (GEMMs)
 *     dP = dropout'(dD)     the same mask, the same 1/(1-p)
 *     dS[t][s] = P[t][s] (dP[t][s] − sum_s' P[t][s'] dP[t][s'])  (softmax')
 *     dQ = dS K / sqrt(hd)  dK = dS^T Q / sqrt(hd)                (GEMMs)
 *
 * TeraPipe's token slices (pp.h) run the same for the queries of one slice
 * [q0, q1) against every key before them, [0, q1): S is (q1 - q0) x q1,
 * the earlier slices' keys and values come from a cache of the whole
 * sequence, and their gradients are added into it (the slices' backwards
 * run last slice first, so a slice's keys have every later query's share
 * by the time its own backward reads them):
 *
 *          keys 0 .. q1-1 →
 *     q0 ┌──────────┬───┐        rows: this slice's queries
 *        │██████████│█  │        left: the keys of earlier slices (cached)
 *     q1 │██████████│███│        right: its own, causal
 *        └──────────┴───┘
 *
 * Grouped-query attention (Ainslie et al. 2023; Llama 2 70B, Llama 3)
 * keeps fewer key/value heads than query heads: heads / kv_heads query
 * heads share one kv head, which divides the K/V cache and their
 * projections by the group size.  The packed row holds each kv head once:
 *
 *     [ q0 q1 q2 q3 | k0 k1 | v0 v1 ]     heads 4, kv_heads 2: groups of 2
 *       q0, q1 ──► k0, v0                 query head h reads kv head h / group
 *       q2, q3 ──► k1, v1                 (Meta's repeat_kv, without its copy)
 *
 * Forward: each query head runs the lines above with its group's K and V.
 * Backward: dK and dV of a kv head are the sums of the group's query
 * heads' shares.  kv_heads = heads is ordinary multi-head attention,
 * with the very same calls; kv_heads = 1 is multi-query attention.
 *
 * The dropout mask is counter-based (rng.h), keyed by GLOBAL indices —
 * the sample, the query head among all nh, the query and the key — so a TP
 * rank with heads 4..7 drops exactly what one device drops for those heads,
 * and the backward regenerates the mask instead of storing it.
 */
#include "ptdp/ops.h"

#include "nn/row_max.h"
#include "ptdp/error.h"

#include <math.h>

#include "ptdp/rng.h"

/* Head h's block of a (rows x width) activation for the sequence starting
 * at row r0: T rows, hd columns from column c0, the parent's stride. */
static ptdp_tensor head_view(ptdp_tensor t, int r0, int T, int c0, int hd)
{
    return (ptdp_tensor){ .data = ptdp_at(t, r0, c0), .rows = T, .cols = hd, .stride = t.stride };
}

static ptdp_tensor matrix(ptdp_real *data, int rows, int cols)
{
    return (ptdp_tensor){ .data = data, .rows = rows, .cols = cols, .stride = cols };
}

bool ptdp_attn_dropout_kept(const ptdp_attn_dropout *d, int64_t sample, int head, int T, int t, int s)
{
    uint64_t index = (((uint64_t)sample * (uint64_t)d->heads_total + (uint64_t)head) * (uint64_t)T +
                      (uint64_t)t) * (uint64_t)T + (uint64_t)s;
    return ptdp_rng_uniform(d->key, index) >= d->p;
}

/* dst = dropout(src) for queries q0 .. q0 + rows - 1 (row i is position
 * q0 + i) against keys 0 .. cols - 1, on the causal part (s <= q0 + i), the
 * future set to 0; dst may be src. */
static void drop(ptdp_real *dst, const ptdp_real *src, int rows, int cols, int q0, int T,
                 const ptdp_attn_dropout *d, int64_t sample, int head)
{
    const ptdp_real scale = (ptdp_real)(1.0 / (1.0 - d->p));
    for (int i = 0; i < rows; i++)
        for (int s = 0; s < cols; s++) {
            size_t k = (size_t)i * cols + s;
            dst[k] = s <= q0 + i && ptdp_attn_dropout_kept(d, sample, head, T, q0 + i, s) ? src[k] * scale : 0;
        }
}

/* ------------------------------------------------------- the softmaxes
 *
 * Both the softmax and its backward are row by row, with a row sum in
 * double taken in index order: a chain of additions, each waiting for the
 * last.  Four rows' chains are independent, so the rows go four at a
 * time and the chains interleave (ordered_sums) — each row's additions
 * the same and in the same order, the same bits; and what is element by
 * element goes in loops of its own, which the compiler vectorises, the
 * exps in one call for the row (exp.c: libm's bits, eight at a time where
 * the machine allows). */
#define ROWS 4

/* out[r] = sum_{s < n[r]} a[r][s] (b NULL) or sum_{s < n[r]} a[r][s] b[r][s]
 * (a float product, exact in double), in double and in index order, for
 * nr <= ROWS rows; the part all four rows have runs as four chains at once. */
static void ordered_sums(double *out, const ptdp_real *const *a, const ptdp_real *const *b, const int *n, int nr)
{
    int common = 0;
    for (int r = 0; r < nr; r++)
        out[r] = 0;
    if (nr == ROWS) {
        common = n[0] < n[1] ? n[0] : n[1];
        common = common < n[2] ? common : n[2];
        common = common < n[3] ? common : n[3];
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        if (b == NULL)
            for (int s = 0; s < common; s++) {
                s0 += a[0][s];
                s1 += a[1][s];
                s2 += a[2][s];
                s3 += a[3][s];
            }
        else
            for (int s = 0; s < common; s++) {
                s0 += (double)a[0][s] * b[0][s];
                s1 += (double)a[1][s] * b[1][s];
                s2 += (double)a[2][s] * b[2][s];
                s3 += (double)a[3][s] * b[3][s];
            }
        out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
    }
    for (int r = 0; r < nr; r++)   /* each row's rest, on the same chain */
        for (int s = common; s < n[r]; s++)
            out[r] += b == NULL ? (double)a[r][s] : (double)a[r][s] * b[r][s];
}

/* Row i of S (query q0 + i) becomes softmax over s <= q0 + i; the rest 0:
 *     P[t][s] = e^{S[t][s] - M_t} / sum_{s' <= t} e^{S[t][s'] - M_t},  M_t = max_{s <= t} S[t][s] */
static void causal_softmax(ptdp_real *S, int rows, int cols, int q0)
{
    for (int i0 = 0; i0 < rows; i0 += ROWS) {
        const int nr = rows - i0 < ROWS ? rows - i0 : ROWS;
        ptdp_real *row[ROWS];
        int n[ROWS];
        double sum[ROWS];
        for (int r = 0; r < nr; r++) {
            row[r] = S + (size_t)(i0 + r) * cols;
            n[r] = q0 + i0 + r + 1;             /* s <= t = q0 + i */
            const ptdp_real max = ptdp_max_lanes(row[r], n[r]);
            for (int s = 0; s < n[r]; s++)
                row[r][s] -= max;
            ptdp_exp_inplace(row[r], (size_t)n[r]);
            for (int s = n[r]; s < cols; s++)
                row[r][s] = 0;
        }
        ordered_sums(sum, (const ptdp_real *const *)row, NULL, n, nr);
        for (int r = 0; r < nr; r++) {
            const ptdp_real inv = (ptdp_real)(1.0 / sum[r]);
            for (int s = 0; s < n[r]; s++)
                row[r][s] *= inv;
        }
    }
}

/* softmax', in place over dP (rows x cols, row i the query q0 + i):
 *     dS[t][s] = P[t][s] (dP[t][s] − sum_{s' <= t} P[t][s'] dP[t][s']),  0 for s > t */
static void causal_softmax_backward(ptdp_real *dP, const ptdp_real *P, int rows, int cols, int q0)
{
    for (int i0 = 0; i0 < rows; i0 += ROWS) {
        const int nr = rows - i0 < ROWS ? rows - i0 : ROWS;
        const ptdp_real *pr[ROWS];
        ptdp_real *gr[ROWS];
        int n[ROWS];
        double dot[ROWS];
        for (int r = 0; r < nr; r++) {
            pr[r] = P + (size_t)(i0 + r) * cols;
            gr[r] = dP + (size_t)(i0 + r) * cols;
            n[r] = q0 + i0 + r + 1;
        }
        ordered_sums(dot, pr, (const ptdp_real *const *)gr, n, nr);
        for (int r = 0; r < nr; r++) {
            const ptdp_real d = (ptdp_real)dot[r];
            for (int s = 0; s < n[r]; s++)
                gr[r][s] = pr[r][s] * (gr[r][s] - d);
            for (int s = n[r]; s < cols; s++)
                gr[r][s] = 0;
        }
    }
}

/* ------------------------------------------------------------ the heads
 *
 * Grouped-query attention: heads / kv_heads query heads read one kv head,
 * query head h the kv head h / group.  kv_heads = heads is multi-head
 * attention (every group one head: the very same calls as before there
 * were groups), kv_heads = 1 multi-query. */

/* The columns of query head h's q and of its kv head's k and v in a packed
 * row [q of heads | k of kv_heads | v of kv_heads]. */
typedef struct {
    int q, k, v;
} qkv_cols;

static qkv_cols head_cols(int h, int heads, int kv_heads, int hd)
{
    const int g = h / (heads / kv_heads);
    return (qkv_cols){ .q = h * hd, .k = (heads + g) * hd, .v = (heads + kv_heads + g) * hd };
}

/* The queries of a slice [q0, q1) see the keys [0, q1): the whole sequence
 * is the slice q0 = 0, q1 = T, and then every matrix below is T x T. */
void ptdp_attention_gqa_forward_slice(ptdp_tensor y, ptdp_real *probs, ptdp_tensor qkv, int T, int q0, int q1,
                                      int heads, int kv_heads, int hd, const ptdp_attn_dropout *dropout,
                                      ptdp_real *scratch)
{
    const int Tq = q1 - q0, Tk = q1;
    if (!PTDP_REQUIRE(heads > 0 && kv_heads > 0 && heads % kv_heads == 0 && hd > 0 &&
                      qkv.cols == (heads + 2 * kv_heads) * hd && y.cols == heads * hd && T > 0 &&
                      qkv.rows % T == 0 && 0 <= q0 && q0 < q1 && q1 <= T && y.rows == qkv.rows / T * Tq,
                      "qkv %d x %d, y %d x %d, T %d, queries [%d, %d), %d heads and %d kv heads of %d", qkv.rows,
                      qkv.cols, y.rows, y.cols, T, q0, q1, heads, kv_heads, hd))
        return;
    const int B = qkv.rows / T;
    const double scale = 1.0 / sqrt((double)hd);
    const bool dropping = dropout != NULL && dropout->p > 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < heads; h++) {
            const qkv_cols c = head_cols(h, heads, kv_heads, hd);
            ptdp_tensor q = head_view(qkv, b * T + q0, Tq, c.q, hd);
            ptdp_tensor k = head_view(qkv, b * T, Tk, c.k, hd);
            ptdp_tensor v = head_view(qkv, b * T, Tk, c.v, hd);
            ptdp_real *P = probs + ((size_t)b * heads + h) * (size_t)Tq * Tk;
            ptdp_matmul(matrix(P, Tq, Tk), q, false, k, true, scale, 0.0);   /* S = Q K^T / sqrt(hd) */
            causal_softmax(P, Tq, Tk, q0);
            const ptdp_real *D = P;
            if (dropping) {              /* the masked-out future stays 0 */
                drop(scratch, P, Tq, Tk, q0, T, dropout, dropout->sample0 + b, dropout->head0 + h);
                D = scratch;
            }
            ptdp_matmul(head_view(y, b * Tq, Tq, h * hd, hd), matrix((ptdp_real *)D, Tq, Tk), false, v, false,
                        1.0, 0.0);                                          /* Y = D V */
        }
}

void ptdp_attention_gqa_forward(ptdp_tensor y, ptdp_real *probs, ptdp_tensor qkv, int T, int heads, int kv_heads,
                                int hd, const ptdp_attn_dropout *dropout, ptdp_real *scratch)
{
    ptdp_attention_gqa_forward_slice(y, probs, qkv, T, 0, T, heads, kv_heads, hd, dropout, scratch);
}

void ptdp_attention_forward_slice(ptdp_tensor y, ptdp_real *probs, ptdp_tensor qkv, int T, int q0, int q1,
                                  int heads, int hd, const ptdp_attn_dropout *dropout, ptdp_real *scratch)
{
    ptdp_attention_gqa_forward_slice(y, probs, qkv, T, q0, q1, heads, heads, hd, dropout, scratch);
}

void ptdp_attention_forward(ptdp_tensor y, ptdp_real *probs, ptdp_tensor qkv, int T, int heads,
                            int hd, const ptdp_attn_dropout *dropout, ptdp_real *scratch)
{
    ptdp_attention_gqa_forward_slice(y, probs, qkv, T, 0, T, heads, heads, hd, dropout, scratch);
}

/* One query head's backward (rows of sample b): dQ written; dK and dV of
 * its kv head added with beta_kv = 1, or written with 0. */
typedef struct {
    ptdp_tensor q, k, v, dq, dk, dv, dy;
    const ptdp_real *P;
    int Tq, Tk, q0, T;
    double scale, beta_kv;
} head_backward;

static void backward_head(const head_backward *H, const ptdp_attn_dropout *dropout, int64_t sample, int head,
                          ptdp_real *scratch)
{
    const int Tq = H->Tq, Tk = H->Tk;
    const bool dropping = dropout != NULL && dropout->p > 0;
    ptdp_real *dP = scratch, *D = scratch + (size_t)Tq * Tk;
    /* dV = D^T dY, with D the dropped probabilities (made again) */
    const ptdp_real *Dh = H->P;
    if (dropping) {
        drop(D, H->P, Tq, Tk, H->q0, H->T, dropout, sample, head);
        Dh = D;
    }
    ptdp_matmul(H->dv, matrix((ptdp_real *)Dh, Tq, Tk), true, H->dy, false, 1.0, H->beta_kv);
    /* dD = dY V^T, then back through the dropout: dP */
    ptdp_matmul(matrix(dP, Tq, Tk), H->dy, false, H->v, true, 1.0, 0.0);
    if (dropping)
        drop(dP, dP, Tq, Tk, H->q0, H->T, dropout, sample, head);
    /* softmax': dS = P (dP − rowsum(P dP)), in place over dP */
    causal_softmax_backward(dP, H->P, Tq, Tk, H->q0);
    /* dQ = dS K / sqrt(hd),  dK = dS^T Q / sqrt(hd) */
    ptdp_matmul(H->dq, matrix(dP, Tq, Tk), false, H->k, false, H->scale, 0.0);
    ptdp_matmul(H->dk, matrix(dP, Tq, Tk), true, H->q, false, H->scale, H->beta_kv);
}

/* A kv head's dK and dV are the sums over its group's query heads: the
 * group's first head writes them (or, with accumulate_kv, adds), the
 * others add, in the order of the heads. */
void ptdp_attention_gqa_backward_slice(ptdp_tensor dqkv, ptdp_tensor dy, ptdp_tensor qkv, const ptdp_real *probs,
                                       int T, int q0, int q1, int heads, int kv_heads, int hd,
                                       const ptdp_attn_dropout *dropout, bool accumulate_kv, ptdp_real *scratch)
{
    const int Tq = q1 - q0, Tk = q1;
    if (!PTDP_REQUIRE(heads > 0 && kv_heads > 0 && heads % kv_heads == 0 && hd > 0 &&
                      qkv.cols == (heads + 2 * kv_heads) * hd && dqkv.cols == qkv.cols && dqkv.rows == qkv.rows &&
                      dy.cols == heads * hd && T > 0 && qkv.rows % T == 0 && 0 <= q0 && q0 < q1 && q1 <= T &&
                      dy.rows == qkv.rows / T * Tq,
                      "qkv %d x %d, dqkv %d x %d, dy %d x %d, T %d, queries [%d, %d), %d heads and %d kv heads "
                      "of %d", qkv.rows, qkv.cols, dqkv.rows, dqkv.cols, dy.rows, dy.cols, T, q0, q1, heads,
                      kv_heads, hd))
        return;
    const int B = qkv.rows / T, group = heads / kv_heads;
    const bool dropping = dropout != NULL && dropout->p > 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < heads; h++) {
            const qkv_cols c = head_cols(h, heads, kv_heads, hd);
            const bool first = h % group == 0;
            const head_backward H = {
                .q = head_view(qkv, b * T + q0, Tq, c.q, hd),
                .k = head_view(qkv, b * T, Tk, c.k, hd),
                .v = head_view(qkv, b * T, Tk, c.v, hd),
                .dq = head_view(dqkv, b * T + q0, Tq, c.q, hd),
                .dk = head_view(dqkv, b * T, Tk, c.k, hd),
                .dv = head_view(dqkv, b * T, Tk, c.v, hd),
                .dy = head_view(dy, b * Tq, Tq, h * hd, hd),
                .P = probs + ((size_t)b * heads + h) * (size_t)Tq * Tk,
                .Tq = Tq, .Tk = Tk, .q0 = q0, .T = T,
                .scale = 1.0 / sqrt((double)hd),
                .beta_kv = accumulate_kv || !first ? 1.0 : 0.0,
            };
            backward_head(&H, dropout, dropping ? dropout->sample0 + b : 0, dropping ? dropout->head0 + h : 0,
                          scratch);
        }
}

void ptdp_attention_gqa_backward(ptdp_tensor dqkv, ptdp_tensor dy, ptdp_tensor qkv, const ptdp_real *probs, int T,
                                 int heads, int kv_heads, int hd, const ptdp_attn_dropout *dropout,
                                 ptdp_real *scratch)
{
    ptdp_attention_gqa_backward_slice(dqkv, dy, qkv, probs, T, 0, T, heads, kv_heads, hd, dropout, false,
                                      scratch);
}

void ptdp_attention_backward_slice(ptdp_tensor dqkv, ptdp_tensor dy, ptdp_tensor qkv, const ptdp_real *probs,
                                   int T, int q0, int q1, int heads, int hd, const ptdp_attn_dropout *dropout,
                                   bool accumulate_kv, ptdp_real *scratch)
{
    ptdp_attention_gqa_backward_slice(dqkv, dy, qkv, probs, T, q0, q1, heads, heads, hd, dropout, accumulate_kv,
                                      scratch);
}

void ptdp_attention_backward(ptdp_tensor dqkv, ptdp_tensor dy, ptdp_tensor qkv, const ptdp_real *probs,
                             int T, int heads, int hd, const ptdp_attn_dropout *dropout,
                             ptdp_real *scratch)
{
    ptdp_attention_gqa_backward_slice(dqkv, dy, qkv, probs, T, 0, T, heads, heads, hd, dropout, false, scratch);
}
