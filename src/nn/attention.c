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
 * The dropout mask is counter-based (rng.h), keyed by GLOBAL indices —
 * the sample, the head among all nh heads, the query and the key — so a TP
 * rank with heads 4..7 drops exactly what one device drops for those heads,
 * and the backward regenerates the mask instead of storing it.
 */
#include "ptdp/ops.h"

#include "ptdp/error.h"

#include <math.h>

#include "ptdp/rng.h"

#ifdef PTDP_DOUBLE
#define EXP exp
#else
#define EXP expf
#endif

/* Head h's block of a (rows x width) activation for the sequence starting
 * at row r0: T rows, hd columns from column c0, the parent's stride. */
static ptdp_tensor head_view(ptdp_tensor t, int r0, int T, int c0, int hd)
{
    return (ptdp_tensor){ .data = ptdp_at(t, r0, c0), .rows = T, .cols = hd, .stride = t.stride };
}

static ptdp_tensor square(ptdp_real *data, int T)
{
    return (ptdp_tensor){ .data = data, .rows = T, .cols = T, .stride = T };
}

bool ptdp_attn_dropout_kept(const ptdp_attn_dropout *d, int64_t sample, int head, int T, int t, int s)
{
    uint64_t index = (((uint64_t)sample * (uint64_t)d->heads_total + (uint64_t)head) * (uint64_t)T +
                      (uint64_t)t) * (uint64_t)T + (uint64_t)s;
    return ptdp_rng_uniform(d->key, index) >= d->p;
}

/* dst = dropout(src) on the causal part (s <= t); dst may be src. */
static void drop(ptdp_real *dst, const ptdp_real *src, int T, const ptdp_attn_dropout *d,
                 int64_t sample, int head)
{
    const ptdp_real scale = (ptdp_real)(1.0 / (1.0 - d->p));
    for (int t = 0; t < T; t++)
        for (int s = 0; s <= t; s++) {
            size_t k = (size_t)t * T + s;
            dst[k] = ptdp_attn_dropout_kept(d, sample, head, T, t, s) ? src[k] * scale : 0;
        }
}

/* Row t of S becomes softmax over s <= t; the rest of the row is 0. */
static void causal_softmax(ptdp_real *S, int T)
{
    for (int t = 0; t < T; t++) {
        ptdp_real *row = S + (size_t)t * T;
        ptdp_real max = row[0];
        for (int s = 1; s <= t; s++)
            max = row[s] > max ? row[s] : max;
        double sum = 0;
        for (int s = 0; s <= t; s++) {
            row[s] = EXP(row[s] - max);
            sum += row[s];
        }
        const ptdp_real inv = (ptdp_real)(1.0 / sum);
        for (int s = 0; s <= t; s++)
            row[s] *= inv;
        for (int s = t + 1; s < T; s++)
            row[s] = 0;
    }
}

void ptdp_attention_forward(ptdp_tensor y, ptdp_real *probs, ptdp_tensor qkv, int T, int heads,
                            int hd, const ptdp_attn_dropout *dropout, ptdp_real *scratch)
{
    const int width = heads * hd;
    if (!PTDP_REQUIRE(qkv.cols == 3 * width && y.cols == width && y.rows == qkv.rows && T > 0 &&
                      qkv.rows % T == 0, "qkv %d x %d, y %d x %d, T %d, %d heads of %d", qkv.rows, qkv.cols,
                      y.rows, y.cols, T, heads, hd))
        return;
    const int B = qkv.rows / T;
    const double scale = 1.0 / sqrt((double)hd);
    const bool dropping = dropout != NULL && dropout->p > 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < heads; h++) {
            ptdp_tensor q = head_view(qkv, b * T, T, h * hd, hd);
            ptdp_tensor k = head_view(qkv, b * T, T, width + h * hd, hd);
            ptdp_tensor v = head_view(qkv, b * T, T, 2 * width + h * hd, hd);
            ptdp_real *P = probs + ((size_t)b * heads + h) * (size_t)T * T;
            ptdp_matmul(square(P, T), q, false, k, true, scale, 0.0);       /* S = Q K^T / sqrt(hd) */
            causal_softmax(P, T);
            const ptdp_real *D = P;
            if (dropping) {
                drop(scratch, P, T, dropout, dropout->sample0 + b, dropout->head0 + h);
                for (int t = 0; t < T; t++)          /* the masked-out future stays 0 */
                    for (int s = t + 1; s < T; s++)
                        scratch[(size_t)t * T + s] = 0;
                D = scratch;
            }
            ptdp_matmul(head_view(y, b * T, T, h * hd, hd), square((ptdp_real *)D, T), false, v, false,
                        1.0, 0.0);                                          /* Y = D V */
        }
}

void ptdp_attention_backward(ptdp_tensor dqkv, ptdp_tensor dy, ptdp_tensor qkv, const ptdp_real *probs,
                             int T, int heads, int hd, const ptdp_attn_dropout *dropout,
                             ptdp_real *scratch)
{
    const int width = heads * hd;
    if (!PTDP_REQUIRE(qkv.cols == 3 * width && dqkv.cols == 3 * width && dqkv.rows == qkv.rows &&
                      dy.cols == width && dy.rows == qkv.rows && T > 0 && qkv.rows % T == 0,
                      "qkv %d x %d, dqkv %d x %d, dy %d x %d, T %d, %d heads of %d", qkv.rows, qkv.cols,
                      dqkv.rows, dqkv.cols, dy.rows, dy.cols, T, heads, hd))
        return;
    const int B = qkv.rows / T;
    const double scale = 1.0 / sqrt((double)hd);
    const bool dropping = dropout != NULL && dropout->p > 0;
    ptdp_real *dP = scratch, *D = scratch + (size_t)T * T;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < heads; h++) {
            ptdp_tensor q = head_view(qkv, b * T, T, h * hd, hd);
            ptdp_tensor k = head_view(qkv, b * T, T, width + h * hd, hd);
            ptdp_tensor v = head_view(qkv, b * T, T, 2 * width + h * hd, hd);
            ptdp_tensor dq = head_view(dqkv, b * T, T, h * hd, hd);
            ptdp_tensor dk = head_view(dqkv, b * T, T, width + h * hd, hd);
            ptdp_tensor dv = head_view(dqkv, b * T, T, 2 * width + h * hd, hd);
            ptdp_tensor dyh = head_view(dy, b * T, T, h * hd, hd);
            const ptdp_real *P = probs + ((size_t)b * heads + h) * (size_t)T * T;
            const int64_t sample = dropping ? dropout->sample0 + b : 0;
            const int head = dropping ? dropout->head0 + h : 0;

            /* dV = D^T dY, with D the dropped probabilities (made again) */
            const ptdp_real *Dh = P;
            if (dropping) {
                drop(D, P, T, dropout, sample, head);
                for (int t = 0; t < T; t++)
                    for (int s = t + 1; s < T; s++)
                        D[(size_t)t * T + s] = 0;
                Dh = D;
            }
            ptdp_matmul(dv, square((ptdp_real *)Dh, T), true, dyh, false, 1.0, 0.0);
            /* dD = dY V^T, then back through the dropout: dP */
            ptdp_matmul(square(dP, T), dyh, false, v, true, 1.0, 0.0);
            if (dropping)
                drop(dP, dP, T, dropout, sample, head);
            /* softmax': dS = P (dP − rowsum(P dP)), in place over dP */
            for (int t = 0; t < T; t++) {
                const ptdp_real *pr = P + (size_t)t * T;
                ptdp_real *gr = dP + (size_t)t * T;
                double dot = 0;
                for (int s = 0; s <= t; s++)
                    dot += (double)pr[s] * gr[s];
                const ptdp_real d = (ptdp_real)dot;
                for (int s = 0; s <= t; s++)
                    gr[s] = pr[s] * (gr[s] - d);
                for (int s = t + 1; s < T; s++)
                    gr[s] = 0;
            }
            /* dQ = dS K / sqrt(hd),  dK = dS^T Q / sqrt(hd) */
            ptdp_matmul(dq, square(dP, T), false, k, false, scale, 0.0);
            ptdp_matmul(dk, square(dP, T), true, q, false, scale, 0.0);
        }
}

/* Per sequence and head: the two GEMMs (4 T T hd) and the softmax (about
 * 5 per score: max, subtract, exp, sum, scale), counted over the whole
 * square as the GEMMs compute it. */
double ptdp_attention_flops_forward(int batch, int T, int heads, int hd)
{
    return (double)batch * heads * (4.0 * T * T * hd + 5.0 * T * T);
}

/* Four GEMMs (8 T T hd) and the softmax backward (about 4 per score). */
double ptdp_attention_flops_backward(int batch, int T, int heads, int hd)
{
    return (double)batch * heads * (8.0 * T * T * hd + 4.0 * T * T);
}
