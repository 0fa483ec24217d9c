/*
 * check_rope.c — lesson 08, blank 6: rotary positions under context
 * parallelism (the llama).
 *
 * RoPE turns each query and key by an angle that grows with its position,
 * a = pos · theta^(-2i/hd) for the pair (2i, 2i+1) of a head, so that
 *
 *     (R_t q) . (R_s k) = q . R_(s-t) k        depends on t - s alone.
 *
 * One device turns row t of the sequence at position t.  Under zigzag CP
 * rank r holds shares r and 2N-1-r: its local row t is position
 * first[t / len] + t % len, and that — not t, not t % len — is the angle
 * its row must turn by, or every score it computes pairs the wrong
 * offsets: the same weights, another model.
 *
 *   T = 24, N = 2:  rank 0 rows   0 .. 5  |  6 .. 11
 *                          pos    0 .. 5  | 18 .. 23      (shares 0, 3)
 *
 * One sequence, 2 heads of hd = 4, theta 10000.  One device turns q and k
 * of the whole sequence (ptdp_rope_forward at 0 .. T-1) and computes its
 * causal attention.  Then on N = 1 .. 4 devices each rank turns its rows
 * with your blank 6 and runs the ring (lesson_ring_attention, already
 * checked): every rank's y must equal one device's to 1e-10.  When it does
 * not, the check reads back each row you turned and finds the position it
 * was turned at (the angle is a function of the position), and names the
 * mistake: local row numbers, positions counted from each share's start,
 * k or q left unturned, v turned.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_rope.h"
#include "lesson.h"
#include "tutorial.h"

#include "ptdp/error.h"
#include "ptdp/ops.h"
#include "ptdp/rng.h"

enum { HEADS = 2, HD = 4, W = HEADS * HD, Q3 = 3 * W, MAX_N = 4, T = 24 };
static const double THETA = 10000, TOL = 1e-10;

static double diff(double a, double b)
{
    double d = fabs(a - b);
    return isnan(d) ? INFINITY : d;
}

typedef struct {
    int n;
    const ptdp_real *qkv;          /* T x 3W, not turned: the whole sequence */
    ptdp_real turned[MAX_N][T * Q3];   /* each rank's rows after blank 6 */
    ptdp_real y[MAX_N][T * W];
    int pos[MAX_N][T];             /* local row t is position pos[r][t] */
    int rows[MAX_N];
} rope_run;

static int rope_device(ptdp_device *dev, void *arg)
{
    rope_run *x = arg;
    const int r = dev->rank;
    int first[2] = { 0 }, len = 0, rc;
    if ((rc = lesson_zigzag_shares(T, x->n, r, first, &len)) != 0)
        return rc;
    const int rows = 2 * len;
    ptdp_tensor qkv, y;
    if ((rc = ptdp_tensor_alloc(dev, &qkv, "qkv", PTDP_MEM_ACTS, rows, Q3)) != 0 ||
        (rc = ptdp_tensor_alloc(dev, &y, "y", PTDP_MEM_ACTS, rows, W)) != 0)
        return rc;
    for (int t = 0; t < rows; t++) {
        x->pos[r][t] = first[t / len] + t % len;
        memcpy(ptdp_at(qkv, t, 0), x->qkv + (size_t)x->pos[r][t] * Q3, Q3 * sizeof(ptdp_real));
    }
    x->rows[r] = rows;
    if ((rc = lesson_rope_rows(qkv, T, x->n, r, HEADS, HD, THETA)) != 0)
        return rc;
    memcpy(x->turned[r], qkv.data, (size_t)rows * Q3 * sizeof(ptdp_real));
    long blocks = 0;
    if ((rc = lesson_ring_attention(dev, y, qkv, T, HEADS, HD, &blocks)) != 0)
        return rc;
    memcpy(x->y[r], y.data, (size_t)rows * W * sizeof(ptdp_real));
    return PTDP_OK;
}

/* ------------------------------------------ which position, read back */

/* The position p in [0, T) at which part (0 q, 1 k, 2 v) of `orig` turns
 * into `got` (position 0 turns nothing), or -1 if none does. */
static int turned_at(const ptdp_real *orig, const ptdp_real *got, int part)
{
    for (int p = 0; p < T; p++) {
        ptdp_real row[W];
        const int64_t pos = p;
        memcpy(row, orig + part * W, sizeof row);
        ptdp_rope_forward(ptdp_tensor_wrap(row, 1, W), 0, HEADS, HD, &pos, 1, THETA);
        bool same = true;
        for (int j = 0; j < W; j++)
            same = same && diff(row[j], got[part * W + j]) <= 1e-12;
        if (same)
            return p;
    }
    return -1;
}

/* What rank r's rows were turned at, against each candidate rule. */
typedef struct {
    int r, t, part, at;          /* the first row turned wrong, and where */
    bool rank_local, share_local, q_still, k_still, v_turned;
} rope_probe;

static bool probe_rows(const rope_run *x, rope_probe *pr)
{
    *pr = (rope_probe){ .r = -1, .rank_local = true, .share_local = true, .q_still = true, .k_still = true };
    for (int r = 0; r < x->n; r++) {
        const int len = x->rows[r] / 2;
        for (int t = 0; t < x->rows[r]; t++) {
            const ptdp_real *orig = x->qkv + (size_t)x->pos[r][t] * Q3, *got = x->turned[r] + (size_t)t * Q3;
            const int g = x->pos[r][t];
            for (int part = 0; part < 3; part++) {
                const int at = turned_at(orig, got, part), want = part < 2 ? g : 0;
                if (part < 2) {
                    pr->rank_local = pr->rank_local && at == t;
                    pr->share_local = pr->share_local && at == t % len;
                }
                if (part == 0)
                    pr->q_still = pr->q_still && at == 0;
                if (part == 1)
                    pr->k_still = pr->k_still && at == 0;
                if (part == 2)
                    pr->v_turned = pr->v_turned || at != 0;
                if (at != want && pr->r < 0) {   /* the first row turned wrong */
                    pr->r = r;
                    pr->t = t;
                    pr->part = part;
                    pr->at = at;
                }
            }
        }
    }
    return pr->r >= 0;
}

/* The y of rank r is wrong: say which rows were turned at what. */
static void diagnose(const rope_run *x)
{
    rope_probe pr;
    if (!probe_rows(x, &pr)) {
        tutorial_note("Every row's q and k were turned at its global position and v not, yet y differs: is "
                      "anything else in qkv changed? (blank 6)");
        return;
    }
    static const char *part[3] = { "q", "k", "v" };
    const int len = x->rows[pr.r] / 2, g = x->pos[pr.r][pr.t];
    if (pr.at >= 0)
        tutorial_note("Rank %d turned %s of its row %d (position %d, share %d) at position %d.", pr.r, part[pr.part],
                      pr.t, g, g / len, pr.at);
    else
        tutorial_note("Rank %d's %s of its row %d (position %d) is not that row turned at any position of the "
                      "sequence.", pr.r, part[pr.part], pr.t, g);
    if (pr.part == 2)
        tutorial_note("v was turned: RoPE turns q and k only — the score q . k carries the positions; v is what is "
                      "averaged, and stays as it is (blank 6).");
    else if (pr.share_local)
        tutorial_note("Each share was turned from 0: its local positions 0..len-1 = 0..%d.  Share %d starts at "
                      "position %d, and the score\nof a query and a key then pairs their offsets within their shares, "
                      "not t - s: the same weights, another model.\nTurn row t at its GLOBAL position first[t / len] + "
                      "t %% len (blank 6).", len - 1, g / len, g - g % len);
    else if (pr.rank_local)
        tutorial_note("Your rows were turned at their local numbers 0..2 len-1 = 0..%d: right on one device, where "
                      "row t is position t,\nbut rank %d's rows are shares %d and %d of the sequence.  Turn row t at "
                      "its GLOBAL position first[t / len] + t %% len (blank 6).", 2 * len - 1, pr.r,
                      x->pos[pr.r][0] / len, x->pos[pr.r][len] / len);
    else if (pr.part == 1 && pr.k_still)
        tutorial_note("k was never turned: the score of q_t and k_s then depends on t alone, not on t - s.  Turn k "
                      "as q: columns from heads hd (blank 6).");
    else if (pr.part == 0 && pr.q_still)
        tutorial_note("q was never turned: the score of q_t and k_s then depends on s alone, not on t - s.  Turn q "
                      "as k: columns from 0 (blank 6).");
    else
        tutorial_note("Row t of rank r is position first[t / len] + t %% len of the zigzag shares; turn q and k of "
                      "each row there (blank 6).");
}

/* ----------------------------------------------------------- the check */

static bool check_n(int n, const ptdp_real *qkv, const ptdp_real *yref)
{
    char what[48];
    snprintf(what, sizeof what, "N %d, T %d, blank 6", n, T);
    rope_run *x = calloc(1, sizeof *x);
    if (x == NULL)
        return false;
    x->n = n;
    x->qkv = qkv;
    bool ok = tutorial_launch(what, n, rope_device, x) == 0;
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
                diagnose(x);
            }
    free(x);
    return ok;
}

bool check_rope(void)
{
    static ptdp_real qkv[T * Q3], turned[T * Q3], y[T * W], probs[HEADS * T * T];
    const uint64_t key = ptdp_rng_key(8, "rope.qkv");
    for (int i = 0; i < T * Q3; i++)
        qkv[i] = (ptdp_real)ptdp_rng_normal(key, (uint64_t)i);
    int64_t pos[T];
    for (int t = 0; t < T; t++)
        pos[t] = t;                              /* one device: row t is position t */
    memcpy(turned, qkv, sizeof qkv);
    ptdp_tensor whole = ptdp_tensor_wrap(turned, T, Q3);
    ptdp_rope_forward(whole, 0, HEADS, HD, pos, T, THETA);
    ptdp_rope_forward(whole, W, HEADS, HD, pos, T, THETA);
    ptdp_attention_forward(ptdp_tensor_wrap(y, T, W), probs, whole, T, HEADS, HD, NULL, NULL);
    for (int n = 1; n <= MAX_N; n++)
        if (!check_n(n, qkv, y))
            return false;
    tutorial_ok("blank 6: N = 1 to %d, T = %d: q and k of every row turned at its global position, v not; y equals "
                "one device's", MAX_N, T);
    return true;
}
