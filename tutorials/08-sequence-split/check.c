/*
 * check.c — lesson 08: does your ring attention equal one device's, and is
 * its work balanced?
 *
 * One sequence, 2 heads of hd = 4, q, k and v drawn at random (double).
 * One device computes the causal attention of the whole sequence
 * (ptdp_attention_forward, attention.c).  Then:
 *
 *   blank 1  lesson_zigzag_shares   on the host, N = 1 .. 4, T = 24: shares
 *                                   of T/(2N); every position held by
 *                                   exactly one rank
 *   all      lesson_ring_attention  (done for you, calls blanks 1-3) on N =
 *                                   1 .. 4 devices, T = 24 and T = 2N (shares
 *                                   of one position): every rank's y equal to
 *                                   one device's at its positions, to 1e-10;
 *                                   then the (query share, key share) pairs
 *                                   each rank computed: none wholly in the
 *                                   future (blank 2), and as many on every
 *                                   rank (blank 1: zigzag balances the work)
 *   blank 4  lesson_block_backward  on the host, T = 24 in 4 shares, one
 *                                   head: every query against every share
 *                                   not in its future, summed, equal to
 *                                   ptdp_attention_backward's dq, dk, dv
 *
 * When y is wrong the check probes your functions on the host to name the
 * blank: the future test on every pair of shares (does it skip a share that
 * holds keys a query must see?), and the merge on partials made of known
 * scores (is the max kept?  are l and o rescaled?  is an empty partial
 * handled?).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_rope.h"
#include "lesson.h"
#include "tutorial.h"

#include "ptdp/arena.h"
#include "ptdp/error.h"
#include "ptdp/ops.h"
#include "ptdp/rng.h"

enum { HEADS = 2, HD = 4, W = HEADS * HD, MAX_N = 4, T_BIG = 24 };
static const double TOL = 1e-10;
static const ptdp_real UNWRITTEN = 1000;   /* y starts as this on every rank */

static double diff(double a, double b)
{
    double d = fabs(a - b);
    return isnan(d) ? INFINITY : d;
}

/* ============================================== blank 1: who holds what */

static bool check_shares(void)
{
    const int T = T_BIG;
    for (int n = 1; n <= MAX_N; n++) {
        int held[T_BIG] = { 0 };
        for (int r = 0; r < n; r++) {
            int first[2] = { -1, -1 }, len = -1;
            if (lesson_zigzag_shares(T, n, r, first, &len) != 0) {
                if (!tutorial_report_blank())
                    tutorial_wrong("blank 1: lesson_zigzag_shares returned an error for rank %d of %d", r, n);
                return false;
            }
            if (len != T / (2 * n)) {
                tutorial_wrong("N %d, T %d, blank 1: rank %d's shares have len %d; they should have T/(2N) = %d.", n,
                               T, r, len, T / (2 * n));
                tutorial_note("Zigzag cuts the sequence into 2N shares (not N): two per rank.");
                return false;
            }
            for (int c = 0; c < 2; c++)
                for (int t = 0; t < len; t++) {
                    int p = first[c] + t;
                    if (p < 0 || p >= T) {
                        tutorial_wrong("N %d, T %d, blank 1: rank %d's share %d starts at %d: position %d is not in "
                                       "the sequence [0, %d).", n, T, r, c, first[c], p, T);
                        return false;
                    }
                    held[p]++;
                }
        }
        for (int p = 0; p < T; p++) {
            if (held[p] == 1)
                continue;
            int len = T / (2 * n), share = p / len;
            if (held[p] == 0)
                tutorial_wrong("N %d, T %d, blank 1: position %d (share %d) is held by no rank; another is held "
                               "twice.", n, T, p, share);
            else
                tutorial_wrong("N %d, T %d, blank 1: position %d (share %d) is held %d times.", n, T, p, share,
                               held[p]);
            for (int r = 0; r < n; r++) {
                int first[2] = { 0 }, l = len;
                lesson_zigzag_shares(T, n, r, first, &l);
                tutorial_note("rank %d holds positions %d-%d and %d-%d", r, first[0], first[0] + l - 1, first[1],
                              first[1] + l - 1);
            }
            tutorial_note("Each of the 2N = %d shares must belong to exactly one rank: rank r holds share r and "
                          "share 2N-1-r (its mirror from the end), not N-1-r.", 2 * n);
            return false;
        }
    }
    tutorial_ok("blank 1: N = 1 to %d, T = %d: every position held by exactly one rank, in 2 shares of T/(2N)",
                MAX_N, T);
    return true;
}

/* ============================================ the ring, and its probes */

typedef struct {
    int n, T;
    const ptdp_real *qkv;                  /* T x 3W: the whole sequence */
    ptdp_real y[MAX_N][T_BIG * W];
    int pos[MAX_N][T_BIG];                 /* local row t is position pos[r][t] */
    int rows[MAX_N];
    long blocks[MAX_N];
} ring_run;

static int ring_device(ptdp_device *dev, void *arg)
{
    ring_run *x = arg;
    const int r = dev->rank;
    int first[2] = { 0 }, len = 0, rc;
    if ((rc = lesson_zigzag_shares(x->T, x->n, r, first, &len)) != 0)
        return rc;
    const int rows = 2 * len;
    ptdp_real *q = ptdp_alloc(dev, (size_t)rows * 3 * W * sizeof *q, PTDP_MEM_ACTS, "qkv");
    ptdp_real *y = ptdp_alloc(dev, (size_t)rows * W * sizeof *y, PTDP_MEM_ACTS, "y");
    if (q == NULL || y == NULL)
        return PTDP_ENOMEM;
    for (int t = 0; t < rows; t++) {
        int p = first[t / len] + t % len;
        x->pos[r][t] = p;
        memcpy(q + (size_t)t * 3 * W, x->qkv + (size_t)p * 3 * W, 3 * W * sizeof *q);
    }
    for (int i = 0; i < rows * W; i++)
        y[i] = UNWRITTEN;
    x->rows[r] = rows;
    if ((rc = lesson_ring_attention(dev, ptdp_tensor_wrap(y, rows, W), ptdp_tensor_wrap(q, rows, 3 * W), x->T,
                                    HEADS, HD, &x->blocks[r])) != 0)
        return rc;
    memcpy(x->y[r], y, (size_t)rows * W * sizeof *y);
    ptdp_free(dev, q);
    ptdp_free(dev, y);
    return PTDP_OK;
}

/* A needed key share that blank 2 skips, or a wholly future one it keeps:
 * looks at every pair of shares of len = 1 .. 4 in a sequence of 8 shares. */
static bool probe_future(bool want_needed_skipped, int *qa, int *ka, int *la)
{
    for (int len = 1; len <= 4; len++)
        for (int qc = 0; qc < 8; qc++)
            for (int kc = 0; kc < 8; kc++) {
                bool skip = false;
                if (lesson_future_block(qc * len, kc * len, len, &skip) != 0)
                    return false;
                bool future = kc > qc;
                if (want_needed_skipped ? (skip && !future) : (!skip && future)) {
                    *qa = qc * len;
                    *ka = kc * len;
                    *la = len;
                    return true;
                }
            }
    return false;
}

/* A pair of rank r's (query share, key share) wholly in the future that
 * blank 2 keeps. */
static bool future_kept(int T, int n, int r, int *qa, int *ka)
{
    int qf[2] = { 0 }, kf[2] = { 0 }, len = 0;
    lesson_zigzag_shares(T, n, r, qf, &len);
    for (int o = 0; o < n; o++) {
        lesson_zigzag_shares(T, n, o, kf, &len);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                bool skip = true;
                if (lesson_future_block(qf[i], kf[j], len, &skip) == 0 && !skip && kf[j] > qf[i] + len - 1) {
                    *qa = qf[i];
                    *ka = kf[j];
                    return true;
                }
            }
    }
    return false;
}

/* The partial of scores s[0..n), the key with score s having the value
 * (s, 1, -s, s^2): what a correct partial holds.  n = 0 is the empty one. */
static lesson_partial partial_of(const double *s, int n)
{
    lesson_partial p = { .m = -INFINITY, .l = 0 };
    for (int i = 0; i < n; i++)
        p.m = s[i] > p.m ? s[i] : p.m;
    for (int i = 0; i < n; i++) {
        double e = exp(s[i] - p.m), v[HD] = { s[i], 1, -s[i], s[i] * s[i] };
        p.l += e;
        for (int j = 0; j < HD; j++)
            p.o[j] += e * v[j];
    }
    return p;
}

static bool same_partial(const lesson_partial *a, const lesson_partial *b)
{
    if (!(a->m == b->m || diff(a->m, b->m) <= TOL) || diff(a->l, b->l) > TOL)
        return false;
    for (int j = 0; j < HD; j++)
        if (diff(a->o[j], b->o[j]) > TOL)
            return false;
    return true;
}

/* A case of probe_merge: a's keys, b's keys, their union, in words. */
typedef struct { const double *a; int na; const double *b; int nb; const double *u; int nu; const char *what; } merge_case;

/* The larger max merged into a smaller one gave a (from a0 and b) with
 * the right max and neither l nor o rescaled, while `other` (a smaller
 * max into a larger: a's factor is 1 anyway) merges right — the factors
 * were computed after a->m was overwritten with the new max. */
static bool max_set_first(const lesson_partial *a, const lesson_partial *a0, const lesson_partial *b,
                          const merge_case *other)
{
    if (diff(a->m, fmax(a0->m, b->m)) > TOL || diff(a->l, a0->l + b->l) > TOL)
        return false;
    for (int j = 0; j < HD; j++)
        if (diff(a->o[j], a0->o[j] + b->o[j]) > TOL)
            return false;
    lesson_partial x = partial_of(other->a, other->na), y = partial_of(other->b, other->nb);
    const lesson_partial want = partial_of(other->u, other->nu);
    return lesson_merge(&x, &y, HD) == 0 && same_partial(&x, &want);
}

/* Merge partials of known scores and (when `say`) tell what is wrong, in
 * words; false when blank 3 answers every probe right. */
static bool probe_merge(bool say)
{
    /* key sets of one query: a low one and a high one, and their union */
    static const double lo[] = { 0.5, -1.0, 1.0 }, hi[] = { 3.0, 2.0 };
    static const double all_lh[] = { 0.5, -1.0, 1.0, 3.0, 2.0 };
    static const double all_hl[] = { 3.0, 2.0, 0.5, -1.0, 1.0 };
    static const double eq[] = { 0.0, 3.0 }, all_he[] = { 3.0, 2.0, 0.0, 3.0 };
    const merge_case cases[] = {
        { lo, 3, hi, 2, all_lh, 5, "a block with a larger max merged into a smaller one" },
        { hi, 2, lo, 3, all_hl, 5, "a block with a smaller max merged into a larger one" },
        { hi, 2, eq, 2, all_he, 4, "two blocks with the same max" },
        { NULL, 0, hi, 2, hi, 2, "a block merged into an empty partial (m = -inf, l = 0)" },
        { hi, 2, NULL, 0, hi, 2, "an empty partial merged into a block" },
        { NULL, 0, NULL, 0, NULL, 0, "an empty partial merged into an empty one" },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        lesson_partial a = partial_of(cases[c].a, cases[c].na), b = partial_of(cases[c].b, cases[c].nb);
        const lesson_partial want = partial_of(cases[c].u, cases[c].nu), a0 = a;
        if (lesson_merge(&a, &b, HD) != 0) {
            tutorial_report_blank();
            return true;
        }
        if (same_partial(&a, &want))
            continue;
        if (!say)
            return true;
        tutorial_note("Blank 3, %s:\n  m_a = %g, l_a = %.6g;  m_b = %g, l_b = %.6g  gave m = %g, l = %.6g, o[0] = %.6g\n"
                      "  the partial of both key sets is m = %g, l = %.6g, o[0] = %.6g.", cases[c].what,
                      (double)a0.m, (double)a0.l, (double)b.m, (double)b.l, (double)a.m, (double)a.l,
                      (double)a.o[0], (double)want.m, (double)want.l, (double)want.o[0]);
        if (cases[c].nu == 0)
            tutorial_note("Two empty partials: m' = -inf, and e^(m_a - m') is e^(-inf + inf) = NaN.  Nothing to merge "
                          "when b is empty (l_b = 0): return a as it is.");
        else if (isnan(a.m) || isnan(a.l))
            tutorial_note("NaN: e^(m - m') with m = m' = -inf is e^NaN.  An empty partial (l = 0) adds nothing: "
                          "leave a as it is when b is empty.");
        else if (c == 0 && max_set_first(&a, &a0, &b, &cases[1]))
            tutorial_note("l' = l_a + l_b and o' = o_a + o_b, yet a smaller max merged into a larger one comes out right:\n"
                          "your factor e^(m_a - m') came out 1 because a->m already held m' when you computed it.  "
                          "Keep m_a\nuntil both factors are computed: set a->m = m' last (blank 3).");
        else if (diff(a.m, want.m) > TOL)
            tutorial_note("The max was not kept: after a merge, l and o are sums of e^(s - m'), so a->m must become "
                          "m' = max(m_a, m_b);\nelse the next merge rescales them from the old max.");
        else if (diff(a.l, a0.l + b.l) <= TOL)
            tutorial_note("l' = l_a + l_b: the running sum was not rescaled.  l_a counts e^(s - m_a), l_b e^(s - m_b); "
                          "bring both to the new max: l' = l_a e^(m_a - m') + l_b e^(m_b - m').");
        else if (diff(a.l, want.l) > TOL)
            tutorial_note("l is wrong: l' = l_a e^(m_a - m') + l_b e^(m_b - m').");
        else if (diff(a.o[0], a0.o[0] + b.o[0]) <= TOL)
            tutorial_note("l is right but o' = o_a + o_b: o was not rescaled.  o is a sum of e^(s - m) v like l, "
                          "so it takes the same factors: o' = o_a e^(m_a - m') + o_b e^(m_b - m').");
        else
            tutorial_note("o is wrong: o' = o_a e^(m_a - m') + o_b e^(m_b - m'), entry by entry (hd of them).");
        return true;
    }
    return false;
}

/* The pairs rank r should compute: its shares against every rank's, the
 * wholly future ones skipped. */
static long pairs_needed(int T, int n, int r)
{
    int qf[2] = { 0 }, kf[2] = { 0 }, len = 0;
    long count = 0;
    lesson_zigzag_shares(T, n, r, qf, &len);
    for (int o = 0; o < n; o++) {
        lesson_zigzag_shares(T, n, o, kf, &len);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                count += kf[j] <= qf[i] + len - 1;
    }
    return count;
}

static bool run_ring(int n, int T, const ptdp_real *qkv, const ptdp_real *yref, char *ok_text, size_t ok_size)
{
    char what[48];
    snprintf(what, sizeof what, "N %d, T %d", n, T);
    ring_run *x = calloc(1, sizeof *x);
    if (x == NULL)
        return false;
    x->n = n;
    x->T = T;
    x->qkv = qkv;
    bool ok = tutorial_launch(what, n, ring_device, x) == 0;
    /* 1. the values */
    for (int r = 0; ok && r < n; r++)
        for (int t = 0; ok && t < x->rows[r]; t++)
            for (int c = 0; ok && c < W; c++) {
                const int p = x->pos[r][t];
                const double got = x->y[r][t * W + c], want = yref[p * W + c];
                if (diff(got, want) <= TOL)
                    continue;
                ok = false;
                tutorial_wrong("%s: rank %d's y at position %d (head %d, [%d]) is %.6g; one device's is %.6g.", what,
                               r, p, c / HD, c % HD, got, want);
                int qa, ka, la;
                if (probe_future(true, &qa, &ka, &la))
                    tutorial_note("Blank 2 skips a key share that is needed: query share %d-%d, key share %d-%d "
                                  "(len %d).\nKey %d is at or before query %d, which must see it: skip only when the "
                                  "first key comes AFTER the query share's last position, %d + %d - 1.",
                                  qa, qa + la - 1, ka, ka + la - 1, la, ka, qa + la - 1, qa, la);
                else if (!probe_merge(true))
                    tutorial_note("Your blanks 2 and 3 answer the check's own probes right; compare your shares "
                                  "(blank 1) with lesson.h: local row t is position first[t / len] + t %% len.");
            }
    /* 2. the work: pairs computed, none wholly in the future, the same on every rank */
    long lo = 0, hi = 0;
    for (int r = 0; ok && r < n; r++) {
        long need = pairs_needed(T, n, r);
        if (x->blocks[r] > need) {
            int qa, ka, la = T / (2 * n);
            ok = false;
            tutorial_wrong("%s, blank 2: y is right, but rank %d computed %ld (query share, key share) pairs of %d x %d "
                           "scores; only %ld are not wholly in the future.", what, r, x->blocks[r], T / (2 * n),
                           T / (2 * n), need);
            if (future_kept(T, n, r, &qa, &ka) || probe_future(false, &qa, &ka, &la))
                tutorial_note("Query share %d-%d, key share %d-%d was computed: every one of its keys comes after "
                              "every query, so causal masking throws all %d x %d scores away.\nSkip it: *skip = "
                              "true when the first key is after the query share's last position.",
                              qa, qa + la - 1, ka, ka + la - 1, la, la);
        } else if (x->blocks[r] < need) {
            ok = false;
            tutorial_wrong("%s, blank 2: rank %d computed %ld pairs; %ld are not wholly in the future.", what, r,
                           x->blocks[r], need);
        }
        lo = r == 0 || x->blocks[r] < lo ? x->blocks[r] : lo;
        hi = r == 0 || x->blocks[r] > hi ? x->blocks[r] : hi;
    }
    if (ok && hi != lo) {
        ok = false;
        tutorial_wrong("%s, blank 1: y is right, but the work is unbalanced: largest / smallest = %.2f.", what,
                       (double)hi / (double)lo);
        for (int r = 0; r < n; r++) {
            int first[2] = { 0 }, len = 1;
            lesson_zigzag_shares(T, n, r, first, &len);
            tutorial_note("rank %d holds shares %d and %d and computes %ld blocks of scores", r, first[0] / len,
                          first[1] / len, x->blocks[r]);
        }
        tutorial_note("A late share sees more keys than an early one.  Zigzag pairs them: rank r holds share r and "
                      "share 2N-1-r, and every rank then computes 2N+1 blocks.");
    }
    if (ok)
        snprintf(ok_text, ok_size, "%ld of its %d (query share, key share) pairs", lo, 4 * n);
    free(x);
    return ok;
}

static bool check_ring(int n)
{
    const int Ts[2] = { T_BIG, 2 * n };
    char text[2][64];
    for (int k = 0; k < 2; k++) {
        const int T = Ts[k];
        ptdp_real *qkv = malloc((size_t)T * 3 * W * sizeof *qkv), *y = malloc((size_t)T * W * sizeof *y);
        ptdp_real *probs = malloc((size_t)HEADS * T * T * sizeof *probs);
        bool ok = qkv != NULL && y != NULL && probs != NULL;
        if (ok) {
            uint64_t key = ptdp_rng_key(8, "qkv");
            for (int i = 0; i < T * 3 * W; i++)
                qkv[i] = (ptdp_real)ptdp_rng_normal(key, (uint64_t)T * 1000 + i);
            ptdp_attention_forward(ptdp_tensor_wrap(y, T, W), probs, ptdp_tensor_wrap(qkv, T, 3 * W), T, HEADS, HD,
                                   NULL, NULL);
            ok = run_ring(n, T, qkv, y, text[k], sizeof text[k]);
        }
        free(qkv);
        free(y);
        free(probs);
        if (!ok)
            return false;
    }
    tutorial_ok("N %d: y equals one device's (T = %d and %d); every rank computed %s (T = %d), wholly future "
                "ones skipped", n, Ts[0], Ts[1], text[0], Ts[0]);
    return true;
}

/* The ring never merges two empty partials (every block it computes gives
 * each query a key); a merge must still handle them. */
static bool check_merge_alone(void)
{
    if (probe_merge(false)) {
        tutorial_wrong("blank 3: y is right, but your merge fails a case the check tries on its own:");
        probe_merge(true);
        return false;
    }
    tutorial_ok("blank 3: merges of partials with larger, smaller and equal maxima, and of empty ones (m = -inf, "
                "l = 0), equal the partial of the union");
    return true;
}

/* ============================ blank 4: one step of the backward, for the ring */

enum { BT = T_BIG, BN = 2, BLEN = BT / (2 * BN), Q3 = 3 * HD };

/* The gradients of one head's q | k | v (rows of 3 HD) from the share
 * steps: every query against every key share not wholly in its future,
 * with the query's final m, l and D = dy . y.  `step` is the student's
 * function or a variant of the check's own. */
typedef int (*block_bwd_fn)(const ptdp_real *, const ptdp_real *, const ptdp_real *, int, int, int, int, int,
                            ptdp_real, ptdp_real, ptdp_real, const ptdp_real *, ptdp_real *, ptdp_real *,
                            ptdp_real *);

static int ring_backward_all(block_bwd_fn step, const ptdp_real *qkv, const ptdp_real *y, const ptdp_real *dy,
                             ptdp_real *dqkv)
{
    memset(dqkv, 0, (size_t)BT * Q3 * sizeof *dqkv);
    const double scale = 1.0 / sqrt((double)HD);
    for (int i = 0; i < BT; i++) {
        const ptdp_real *q = qkv + (size_t)i * Q3;
        double m = -INFINITY, l = 0, D = 0;
        for (int s = 0; s <= i; s++) {        /* the forward's final m and l over keys 0 .. i */
            double d = 0;
            for (int j = 0; j < HD; j++)
                d += (double)q[j] * qkv[(size_t)s * Q3 + HD + j];
            m = fmax(m, d * scale);
        }
        for (int s = 0; s <= i; s++) {
            double d = 0;
            for (int j = 0; j < HD; j++)
                d += (double)q[j] * qkv[(size_t)s * Q3 + HD + j];
            l += exp(d * scale - m);
        }
        for (int j = 0; j < HD; j++)
            D += (double)dy[i * HD + j] * y[i * HD + j];
        for (int c = 0; c < 2 * BN && c * BLEN <= i; c++) {
            const size_t k0 = (size_t)c * BLEN * Q3;
            int rc = step(q, qkv + k0 + HD, qkv + k0 + 2 * HD, Q3, i, c * BLEN, BLEN, HD, (ptdp_real)m,
                          (ptdp_real)l, (ptdp_real)D, dy + (size_t)i * HD, dqkv + (size_t)i * Q3,
                          dqkv + k0 + HD, dqkv + k0 + 2 * HD);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

/* The mistake this variant makes: ds without - D. */
static int step_without_d(const ptdp_real *q, const ptdp_real *k, const ptdp_real *v, int stride, int q_pos,
                          int k_first, int len, int hd, ptdp_real m, ptdp_real l, ptdp_real D,
                          const ptdp_real *dy, ptdp_real *dq, ptdp_real *dk, ptdp_real *dv)
{
    (void)D;
    return lesson_block_backward(q, k, v, stride, q_pos, k_first, len, hd, m, l, 0, dy, dq, dk, dv);
}

/* Which of v, q, k (2, 0, 1: dv needs only p) first differs beyond TOL,
 * -1 if none. */
static int first_wrong(const ptdp_real *got, const ptdp_real *want, int *row, int *col)
{
    static const int order[3] = { 2, 0, 1 };
    for (int o = 0; o < 3; o++)
        for (int i = 0, part = order[o]; i < BT; i++)
            for (int j = 0; j < HD; j++)
                if (diff(got[i * Q3 + part * HD + j], want[i * Q3 + part * HD + j]) > TOL) {
                    *row = i;
                    *col = j;
                    return part;
                }
    return -1;
}

/* dq and dk are sqrt(hd) times the right ones (the scale left out). */
static bool unscaled(const ptdp_real *got, const ptdp_real *want)
{
    for (int i = 0; i < BT; i++)
        for (int j = 0; j < 2 * HD; j++)
            if (diff(got[i * Q3 + j], want[i * Q3 + j] * sqrt((double)HD)) > TOL)
                return false;
    return true;
}

static bool check_block_backward(void)
{
    static ptdp_real qkv[BT * Q3], y[BT * HD], dy[BT * HD], probs[BT * BT], scratch[2 * BT * BT];
    static ptdp_real want[BT * Q3], got[BT * Q3], alt[BT * Q3];
    uint64_t key = ptdp_rng_key(8, "backward");
    for (int i = 0; i < BT * Q3; i++)
        qkv[i] = (ptdp_real)ptdp_rng_normal(key, (uint64_t)i);
    for (int i = 0; i < BT * HD; i++)
        dy[i] = (ptdp_real)ptdp_rng_normal(key, (uint64_t)(BT * Q3 + i));
    ptdp_attention_forward(ptdp_tensor_wrap(y, BT, HD), probs, ptdp_tensor_wrap(qkv, BT, Q3), BT, 1, HD, NULL, NULL);
    ptdp_attention_backward(ptdp_tensor_wrap(want, BT, Q3), ptdp_tensor_wrap(dy, BT, HD),
                            ptdp_tensor_wrap(qkv, BT, Q3), probs, BT, 1, HD, NULL, scratch);
    if (ring_backward_all(lesson_block_backward, qkv, y, dy, got) != 0) {
        tutorial_report_blank();
        return false;
    }
    int row, col, part = first_wrong(got, want, &row, &col);
    if (part < 0) {
        tutorial_ok("blank 4: T = %d in %d shares of %d, every query against every share not in its future: dq, "
                    "dk, dv equal ptdp_attention_backward's", BT, 2 * BN, BLEN);
        return true;
    }
    static const char *name[3] = { "dq", "dk", "dv" };
    tutorial_wrong("blank 4: %s at position %d [%d] is %.6g; ptdp_attention_backward's is %.6g.", name[part], row, col,
                   (double)got[row * Q3 + part * HD + col], (double)want[row * Q3 + part * HD + col]);
    int r2, c2;
    ring_backward_all(step_without_d, qkv, y, dy, alt);   /* the student's own step, handed D = 0 */
    if (part == 2)
        tutorial_note("dv_s += p_s dy, with p_s = e^(score - m) / l: the query's FINAL m and l, over every key "
                      "(the forward's merges\nleft them), not this share's own max and sum (blank 4).");
    else if (first_wrong(got, alt, &r2, &c2) < 0)
        tutorial_note("dv is right, dq and dk not, and D changes nothing: ds_s = p_s (dp_s - D).  Each "
                      "probability pulls on the\nothers through the softmax's sum: minus D = dy . y, the "
                      "output's own share (blank 4).");
    else if (unscaled(got, want))
        tutorial_note("dv is right, dq and dk are sqrt(hd) = %g times too large: the scores were q . k / sqrt(hd), "
                      "so dk_s += ds_s q / sqrt(hd)\nand dq += ds_s k_s / sqrt(hd) — the scores' own scale "
                      "(blank 4).", sqrt((double)HD));
    else
        tutorial_note("dv is right: ds_s = p_s (dp_s - D), then dk_s += ds_s q / sqrt(hd) and dq += ds_s k_s / "
                      "sqrt(hd) (blank 4).");
    return false;
}

/* ======================= blank 5: SP's weight gradient from the kept shard */

enum { SP_T = 8, SP_B = 2, SP_C = 4, SP_OUT = 3, SP_MAX_N = 4 };

typedef struct {
    int n;
    ptdp_real x[SP_B * SP_T * SP_C];                 /* the whole LayerNorm output */
    ptdp_real dw[SP_MAX_N][SP_OUT * SP_C];           /* each rank's answer */
    double kept_more[SP_MAX_N];                      /* acts bytes left after the call */
} sp_run;

/* Rank r's dy: the gradient of its own output columns, at every position. */
static ptdp_real sp_dy(int r, int row, int j)
{
    return (ptdp_real)ptdp_rng_normal(ptdp_rng_key(8, "sp.dy"), (uint64_t)((r * SP_B * SP_T + row) * SP_OUT + j));
}

static int sp_device(ptdp_device *dev, void *arg)
{
    sp_run *x = arg;
    const int r = dev->rank, Tl = SP_T / x->n, R = SP_B * SP_T;
    ptdp_tensor kept, dy, dw;
    int rc;
    if ((rc = ptdp_tensor_alloc(dev, &kept, "kept", PTDP_MEM_ACTS, SP_B * Tl, SP_C)) != 0 ||
        (rc = ptdp_tensor_alloc(dev, &dy, "dy", PTDP_MEM_ACTS, R, SP_OUT)) != 0 ||
        (rc = ptdp_tensor_alloc(dev, &dw, "dw", PTDP_MEM_GRADS, SP_OUT, SP_C)) != 0)
        return rc;
    for (int b = 0; b < SP_B; b++)   /* my positions of each sequence */
        memcpy(ptdp_at(kept, b * Tl, 0), x->x + ((size_t)b * SP_T + (size_t)r * Tl) * SP_C,
               (size_t)Tl * SP_C * sizeof(ptdp_real));
    for (int i = 0; i < R; i++)
        for (int j = 0; j < SP_OUT; j++)
            *ptdp_at(dy, i, j) = sp_dy(r, i, j);
    ptdp_mem_stats before, after;
    ptdp_arena_stats(dev->arena, &before);
    if ((rc = lesson_sp_weight_grad(dev, dev->world, dw, dy, kept, SP_B)) != 0)
        return rc;
    ptdp_arena_stats(dev->arena, &after);
    x->kept_more[r] = (double)after.current[PTDP_MEM_ACTS] - (double)before.current[PTDP_MEM_ACTS];
    memcpy(x->dw[r], dw.data, sizeof x->dw[r]);
    return PTDP_OK;
}

/* dW of rank r over the rows whose position is in [p0, p1) of each sequence. */
static void sp_want(const sp_run *x, int r, int p0, int p1, double *dw)
{
    for (int k = 0; k < SP_OUT * SP_C; k++)
        dw[k] = 0;
    for (int b = 0; b < SP_B; b++)
        for (int t = p0; t < p1; t++)
            for (int i = 0; i < SP_OUT; i++)
                for (int j = 0; j < SP_C; j++)
                    dw[i * SP_C + j] += (double)sp_dy(r, b * SP_T + t, i) * x->x[(b * SP_T + t) * SP_C + j];
}

static bool sp_same(const ptdp_real *got, const double *want)
{
    for (int k = 0; k < SP_OUT * SP_C; k++)
        if (diff(got[k], want[k]) > TOL)
            return false;
    return true;
}

static bool check_sp_weight_grad(void)
{
    static sp_run x;
    for (int i = 0; i < SP_B * SP_T * SP_C; i++)
        x.x[i] = (ptdp_real)ptdp_rng_normal(ptdp_rng_key(8, "sp.x"), (uint64_t)i);
    for (int n = 2; n <= SP_MAX_N; n += 2) {
        char what[48];
        snprintf(what, sizeof what, "N %d, %d sequences of T %d", n, SP_B, SP_T);
        x.n = n;
        if (tutorial_launch(what, n, sp_device, &x) != 0)
            return false;
        const int Tl = SP_T / n, R = SP_B * SP_T;
        for (int r = 0; r < n; r++) {
            double want[SP_OUT * SP_C], mine[SP_OUT * SP_C];
            sp_want(&x, r, 0, SP_T, want);
            if (!sp_same(x.dw[r], want)) {
                int k = 0;
                while (k + 1 < SP_OUT * SP_C && diff(x.dw[r][k], want[k]) <= TOL)
                    k++;
                tutorial_wrong("%s, blank 5: rank %d's dw[%d][%d] is %.6g; dy^T x over every position gives %.6g.",
                               what, r, k / SP_C, k % SP_C, (double)x.dw[r][k], want[k]);
                sp_want(&x, r, r * Tl, (r + 1) * Tl, mine);
                if (sp_same(x.dw[r], mine))
                    tutorial_note("That is the sum over your rank's own %d positions only: dw += dy^T kept.  Your "
                                  "weight shard's gradient sums over EVERY position,\nand the other positions' x are "
                                  "on the other ranks: all-gather the kept shards (ptdp_sp_all_gather) into a "
                                  "buffer of\n%d rows, then dw += dy^T x (blank 5).", Tl, R);
                else
                    tutorial_note("dw += dy^T x, x every rank's shard gathered in sequence order (ptdp_sp_all_gather: "
                                  "row b T + t is position t of sequence b), added into dw (blank 5).");
                return false;
            }
            if (x.kept_more[r] != 0) {
                tutorial_wrong("%s, blank 5: dw is right, but rank %d's backward ended keeping %.0f B more of "
                               "activations than it began with.", what, r, x.kept_more[r]);
                tutorial_note("That is the gathered x (%d x %d reals = %.0f B): SP keeps only its shard, 1/N of it, "
                              "and gathers it again\nwhen dW needs it — free the buffer once dw is made (blank 5).", R,
                              SP_C, (double)R * SP_C * sizeof(ptdp_real));
                return false;
            }
        }
    }
    tutorial_ok("blank 5: N = 2 and 4, %d sequences of T = %d: every rank's dw is dy^T x over every position, and "
                "the gathered x is gone after: only the shard is kept", SP_B, SP_T);
    return true;
}

int main(void)
{
    tutorial_begin("08", "splitting the sequence: zigzag shares, the future test, the online-softmax merge");
    bool ok = check_shares();
    for (int n = 1; ok && n <= MAX_N; n++)
        ok = check_ring(n);
    if (ok)
        ok = check_merge_alone();
    if (ok)
        ok = check_block_backward();
    if (ok)
        tutorial_note("with zigzag every rank computes 2N+1 of its 4N pairs: about half, the causal half, the same "
                      "on every rank (ptdp train --model gpt --cp 2 --check)");
    if (ok)
        ok = check_sp_weight_grad();
    if (ok)
        tutorial_note("SP keeps 1/N of each LayerNorm output and sends it again in every backward (ptdp train "
                      "--model gpt --tp 4 --sp prints both)");
    if (ok)
        ok = check_rope();   /* blank 6: the llama's rotary positions (check_rope.c) */
    if (ok)
        tutorial_note("q_t . k_s depends on t - s alone: each rank turns its own rows at their global positions, "
                      "and the keys travel turned (ptdp train --model llama --cp 2 --check)");
    return tutorial_end();
}
