/*
 * exercise.c — lesson 14: a mixture of experts on an EP group — write the
 * router, the dispatch, the combine, and where an expert's gradient is
 * summed.
 *
 * Replace each PTDP_BLANK(...) line with your code, then run the check:
 *     meson setup build-student -Dexercises=student      (once)
 *     meson test -C build-student --suite tutorial-14 -v
 * README.md explains the idea; solution.c is the answer (try first).
 *
 * A token's router picks k of E experts and weighs them:
 *
 *   z = h W_r^T (E logits)  ──►  top k, ties to the lower index  ──►  gates = softmax of those k
 *
 * Under expert parallelism the experts are spread over the EP group and
 * every token travels to the ranks of its experts and back.  N = 2, E = 4
 * (rank 0: experts 0 1, rank 1: experts 2 3):
 *
 *   rank 0 stacked x: [e0 e0 | e1 | e2 | e3 e3]      rank 1: [e0 | e1 e1 | e2 | e3]
 *                      ─ to rank 0 ─ ─ to rank 1 ─
 *   counts   all_to_all of `local` counts a pair: what each source sends me per expert
 *   dispatch all_to_allv ──► wire order, by source: [from 0: e0 e0 e1 | from 1: e0 e1 e1]
 *            reorder     ──► local expert order:   [e0: 0 0 1 | e1: 0 1 1]  (one GEMM per expert)
 *   combine  the reorder backwards, the all_to_allv back, then out[t] = sum_j g_j y[slot]
 *
 * Part 2 (at the end): DeepSeek-V3's sigmoid router — the top k of s + b
 * in the M best groups, gates lambda s_j / sum s — and its loss-free
 * bias, b_e += u sign(mean L - L_e) from the loads summed over DP.
 */
#include "blank.h"
#include "lesson.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "ptdp/comm.h"
#include "ptdp/error.h"

/* softmax of the n values x[idx[j]] (idx NULL: x[j]) into p — the
 * library's, so that your gates can equal its bit for bit. */
static void softmax_of(const ptdp_real *x, const int *idx, int n, ptdp_real *p)
{
    double top = -INFINITY, sum = 0.0;
    for (int j = 0; j < n; j++)
        top = fmax(top, (double)x[idx ? idx[j] : j]);
    for (int j = 0; j < n; j++)
        sum += exp((double)x[idx ? idx[j] : j] - top);
    for (int j = 0; j < n; j++)
        p[j] = (ptdp_real)(exp((double)x[idx ? idx[j] : j] - top) / sum);
}

int lesson_route(const ptdp_real *z, int E, int k, int *choice, ptdp_real *gate)
{
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            bool taken = false;
            for (int q = 0; q < j; q++)
                taken = taken || choice[q] == e;
            /* Blank 1: the largest logit not taken yet; a tie keeps the lower index. */
            PTDP_BLANK(1, "if e is not taken and beats the best so far (a tie keeps the lower index), best = e");
        }
        choice[j] = best;
    }
    /* Blank 2: the gates.  Over which logits is the softmax taken? */
    PTDP_BLANK(2, "set gate[0 .. k) with softmax_of: a softmax over which logits?");
    return PTDP_OK;
}

int lesson_exchange_counts(ptdp_comm *ep, int E, const int *load, int *recv_rows)
{
    const int N = ptdp_comm_size(ep), local = E / N;
    /* Blank 3: load's block for rank d is load[d local ..]: `local` counts
     * a pair, and block s of what arrives is source s's counts for my experts. */
    PTDP_BLANK(3, "exchange the counts: one ptdp_all_to_all of `local` PTDP_I32 counts a pair, load into recv_rows");
}

/* Reals a pair exchanges in a dispatch: to[d] my rows for rank d's
 * experts, from[s] source s's rows for mine, each x cols. */
static int pair_counts(int N, int local, const int *load, const int *recv_rows, int cols, size_t *to, size_t *from)
{
    for (int d = 0; d < N; d++) {
        to[d] = from[d] = 0;
        /* Blank 4: sum rank d's experts' rows of load, and source d's rows of recv_rows. */
        PTDP_BLANK(4, "to[d]: your rows for rank d's experts x cols; from[d]: source d's rows for your experts x cols");
    }
    return PTDP_OK;
}

/* Where source s's rows for my local expert l start in the wire order
 * (by source, each source's rows expert by expert): rows before it. */
static size_t wire_row(int local, const int *recv_rows, int s, int l)
{
    size_t row = 0;
    for (int i = 0; i < s * local + l; i++)
        row += (size_t)recv_rows[i];
    return row;
}

int lesson_dispatch(ptdp_comm *ep, int E, const int *load, const int *recv_rows, const ptdp_real *x, int cols,
                    ptdp_real *out, ptdp_real *scratch)
{
    const int N = ptdp_comm_size(ep), local = E / N;
    size_t to[N], from[N];
    int rc = pair_counts(N, local, load, recv_rows, cols, to, from);
    if (rc == 0)
        rc = ptdp_all_to_allv(ep, x, to, NULL, scratch, from, NULL, PTDP_REAL);
    if (rc != 0)
        return rc;
    /* Blank 5: scratch is by source; out wants expert l's rows from every
     * source together (wire_row finds where source s's rows for l start). */
    PTDP_BLANK(5, "copy scratch (by source) into out in local expert order: for each expert l, each source s");
    return PTDP_OK;
}

int lesson_combine(ptdp_comm *ep, int E, const int *load, const int *recv_rows, const ptdp_real *y, int cols,
                   ptdp_real *stacked, ptdp_real *scratch)
{
    const int N = ptdp_comm_size(ep), local = E / N;
    size_t to[N], from[N];
    int rc = pair_counts(N, local, load, recv_rows, cols, to, from);
    if (rc != 0)
        return rc;
    /* Blank 6: y is in local expert order; put each block back where it
     * arrived: scratch in wire order, by source. */
    PTDP_BLANK(6, "copy y (by local expert) into scratch in the order the rows arrived: by source");
    /* Blank 7: the all_to_allv back: what came from s returns to s, and
     * what I sent to d comes home into my stack. */
    PTDP_BLANK(7, "ptdp_all_to_allv from scratch into stacked, and return its status: which counts go where?");
}

int lesson_gated_sum(int rows, int k, int cols, const ptdp_real *gate, const int *slot, const ptdp_real *stacked,
                     ptdp_real *out)
{
    memset(out, 0, (size_t)rows * cols * sizeof *out);
    for (int t = 0; t < rows; t++)
        for (int j = 0; j < k; j++) {
            const int s = slot[t * k + j];
            /* Blank 8: a kept choice adds its expert's row times its gate. */
            PTDP_BLANK(8, "if choice j is kept (s >= 0), add its row of stacked, weighed, to out[t]");
        }
    return PTDP_OK;
}

int lesson_expert_grad_ranks(const int *dp_ranks, int dp, int ep, int member, int *out)
{
    int n = 0;
    /* Blank 9: which DP members hold the same experts as `member`? */
    PTDP_BLANK(9, "fill out with the world ranks whose gradients of member's experts are summed; return how many");
    return n;
}

/* ======== Part 2: DeepSeek-V3's router and its auxiliary-loss-free balance
 *
 *   s = sigmoid(z)                 each expert's affinity, on its own
 *   v = s + b                      b: the expert bias — it only SELECTS
 *   groups: score_g = sum of the floor(k/M) largest v of group g; keep the M best
 *   top k of v among the kept groups' experts
 *   g_j = lambda s_j / sum of the chosen s          (no b in the gates)
 *
 * and after each optimizer step, on every replica alike:
 *
 *   L_e = the choices of expert e over the WHOLE global batch   (all-reduce over DP)
 *   b_e += u sign(mean L - L_e),  sign(0) = 0
 */

/* sigmoid(z) = 1 / (1 + e^-z) in double: the library's. */
static double sigmoid_of(double z)
{
    return 1.0 / (1.0 + exp(-z));
}

int lesson_group_scores(const ptdp_real *v, int E, int G, int n, ptdp_real *score)
{
    const int per = E / G;
    for (int g = 0; g < G; g++) {
        int top[n];
        ptdp_real unused[n];
        /* the n largest v of group g, largest first: your top k of blank 1 */
        int rc = lesson_route(v + (size_t)g * per, per, n, top, unused);
        if (rc != 0)
            return rc;
        /* Blank 10: the group's score, from its values v[g per + top[j]]. */
        PTDP_BLANK(10, "score[g] = the sum of group g's n largest v (top[0 .. n), largest first), added in double");
    }
    return PTDP_OK;
}

int lesson_route_sigmoid(const ptdp_real *z, const ptdp_real *bias, int E, int k, int G, int M, double lambda,
                         int *choice, ptdp_real *gate)
{
    ptdp_real s[E], v[E], unused[E];
    int rc = PTDP_OK;
    for (int e = 0; e < E; e++) {
        s[e] = (ptdp_real)sigmoid_of((double)z[e]);
        v[e] = s[e] + bias[e];   /* what the top k reads */
    }
    if (G > 1 && M < G) {   /* only the experts of the M best groups stay */
        const int per = E / G;
        ptdp_real score[G];
        int best[M];
        bool kept[G];
        rc = lesson_group_scores(v, E, G, k / M, score);
        if (rc == 0)
            rc = lesson_route(score, G, M, best, unused);   /* the M best groups, ties to the lower */
        if (rc != 0)
            return rc;
        for (int g = 0; g < G; g++)
            kept[g] = false;
        for (int j = 0; j < M; j++)
            kept[best[j]] = true;
        for (int e = 0; e < E; e++)
            if (!kept[e / per])
                v[e] = -INFINITY;
    }
    rc = lesson_route(v, E, k, choice, unused);   /* your top k, now of s + b */
    if (rc != 0)
        return rc;
    /* Blank 11: the gates.  What did the bias do, and what does it not do? */
    PTDP_BLANK(11, "gate[j] = lambda x the chosen expert's affinity over the sum of the chosen affinities (in double)");
    return PTDP_OK;
}

int lesson_balance_bias(ptdp_comm *dp, int E, double u, double *L, ptdp_real *bias)
{
    /* Blank 12: L holds the choices among MY tokens.  The update must use
     * the whole global batch's, and every replica must apply the same one. */
    PTDP_BLANK(12, "make L the whole global batch's load: one collective over dp (PTDP_F64), returning its status if it fails");
    double total = 0.0;
    for (int e = 0; e < E; e++)
        total += L[e];
    for (int e = 0; e < E; e++) {
        /* Blank 13: b_e += u sign(mean L - L_e), sign(0) = 0.  (E (mean L -
         * L_e) = total - E L_e is a whole number: a tie is exactly 0.) */
        PTDP_BLANK(13, "move bias[e] by u toward an even load: up when expert e is chosen less than the mean, down when more, not at all on a tie");
    }
    return PTDP_OK;
}

/* ======== Part 3: MoE parallel folding's groups
 *
 *   slice s = tp_rank / etp of S = tp / etp     token holder h = s + S dp_rank
 *   e = tp_rank mod etp                         the experts' TP rank
 */

int lesson_fold_groups(int tp, int dp, int etp, int ep, int rank, int *ep_ranks, int *n_ep, int *edp_ranks,
                       int *n_edp)
{
    *n_ep = *n_edp = 0;
    (void)tp, (void)dp, (void)etp, (void)ep, (void)rank, (void)ep_ranks, (void)edp_ranks;
    /* Blank 14: which token holder am I?  Then every token holder g with my
     * experts' TP rank e — world rank (g mod S) etp + e + tp (g div S) —
     * goes into my EP group (the holders that trade rows with me) or my
     * expert-DP group (the holders of my experts), or both, or neither. */
    PTDP_BLANK(14, "compute S, e and my holder h; for g over the S x dp holders with my e, fill ep_ranks (same h div ep) and edp_ranks (same h mod ep)");
}
