/*
 * moe_route.c — a mixture of experts' router on numbers: which k of E
 * experts each token chooses, with what gates, which choices a capacity
 * drops, the balance loss, and their backward (parallel/moe.c runs it in
 * any model's block; moe_route.h declares it for tests and the course).
 *
 *   z      = h W_r^T                      logits, a row of E per token
 *   top-k  = the k largest z of a token   ties to the lower index (top_k.c)
 *   g_j    = softmax over those k logits  (Mixtral's softmax-then-renormalise)
 *   p      = softmax over all E           what the balance loss reads
 *   aux    = alpha sum_i f_i P_i          per sequence: f_i = E/(k T) x the
 *                                         tokens choosing i (no gradient),
 *                                         P_i = the mean of p_i over it
 *
 *   token t:  z = [ 2.1  0.3  1.7  1.7 ]   k = 2:  experts 0 and 2 (2 before 3)
 *             g = softmax(2.1, 1.7) = [0.60, 0.40]
 *
 * Capacity (GShard's groups, one sequence a group): each expert takes at
 * most ceil(c k T / E) choices of a sequence, in position order; the kept
 * choices are stacked expert by expert, each in position order — the
 * order the dispatch sends them in (ep.h).
 *
 * Backward: through the k-way softmax, dz_j = g_j (dg_j - sum_l g_l dg_l);
 * through the balance loss, dp_i = alpha f_i / T for each of the
 * sequence's tokens, then through the E-way softmax.  Under CP a rank holds
 * T of a sequence's T_seq positions: the counts and the sums of p come
 * from the whole CP group (ptdp_moe_sequence_stats, summed).
 *
 * DeepSeek-V3's sigmoid router (score PTDP_MOE_SIGMOID), the same steps:
 *
 *   s      = sigmoid(z)                   each expert's affinity, alone
 *   top-k  = the k largest s + b          b (the expert bias, a buffer)
 *                                         only selects: no gradient
 *   g_j    = lambda s_j / S               S = sum of the chosen s
 *   p_i    = s_i / Q                      Q = sum_e s_e: the balance loss's
 *                                         P_i = the mean of p_i (sequence-wise)
 *
 *   token t:  z = [ 0.0  2.0  1.0  1.0 ],  b = [ 0.9  0  0  0 ],  k = 2
 *             s = [ 0.50 0.88 0.73 0.73 ], s + b = [ 1.40 0.88 0.73 0.73 ]
 *             experts 0 and 1; g = [0.50, 0.88] / 1.38 = [0.36, 0.64]
 *
 * With --moe-groups G the top k of either router is taken among the
 * experts of the M best groups only (moe_groups.c); nothing else changes.
 *
 * Backward: ds_j = (lambda dg_j - sum_l g_l dg_l) / S for the chosen,
 * plus ds_e = (u_e - sum_i u_i p_i) / Q from the balance loss (u_i =
 * alpha f_i / T, as above); then dz = ds s (1 - s).
 */
#include "ptdp/moe_route.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "runtime/pool.h"

/* ------------------------------------------------------------ routing */

/* Mixtral's choice of one token: the top k of z, or (--moe-groups) of z
 * with the experts outside the M best groups at -infinity. */
static void softmax_choose(const ptdp_moe_route_shape *sh, const ptdp_real *z, int *choice)
{
    if (sh->groups <= 1) {
        ptdp_moe_top_k(z, sh->E, sh->k, choice);
        return;
    }
    ptdp_real v[sh->E > 0 ? sh->E : 1];
    memcpy(v, z, (size_t)sh->E * sizeof *v);
    ptdp_moe_group_limit(sh, v);
    ptdp_moe_top_k(v, sh->E, sh->k, choice);
}

/* softmax of n values read at x[idx[j]] (idx NULL: x[j]) into p. */
static void softmax(const ptdp_real *x, const int *idx, int n, ptdp_real *p)
{
    double top = -INFINITY, sum = 0.0;
    for (int j = 0; j < n; j++)
        top = fmax(top, (double)x[idx ? idx[j] : j]);
    for (int j = 0; j < n; j++)
        sum += exp((double)x[idx ? idx[j] : j] - top);
    for (int j = 0; j < n; j++)
        p[j] = (ptdp_real)(exp((double)x[idx ? idx[j] : j] - top) / sum);
}

/* sigmoid(z) = 1 / (1 + e^-z), in double. */
static double sigmoid(double z)
{
    return 1.0 / (1.0 + exp(-z));
}

/* DeepSeek-V3's choice of one token: s = sigmoid(z) into probs, the top k
 * of s + b, the gates lambda s_j / S (S: the sum of the chosen s). */
static void route_sigmoid(const ptdp_moe_route_shape *sh, const ptdp_real *z, int *choice, ptdp_real *gate,
                          ptdp_real *probs)
{
    const int E = sh->E, k = sh->k;
    const double lambda = sh->route_scale > 0 ? sh->route_scale : 1.0;
    ptdp_real v[E > 0 ? E : 1];
    for (int e = 0; e < E; e++) {
        probs[e] = (ptdp_real)sigmoid((double)z[e]);
        v[e] = probs[e] + (sh->bias != NULL ? sh->bias[e] : (ptdp_real)0);
    }
    ptdp_moe_group_limit(sh, v);   /* --moe-groups: only the M best groups' experts */
    ptdp_moe_top_k(v, E, k, choice);
    double S = 0.0;
    for (int j = 0; j < k; j++)
        S += probs[choice[j]];
    for (int j = 0; j < k; j++)
        gate[j] = (ptdp_real)(lambda * probs[choice[j]] / S);
}

/* What the balance loss averages of one token's row of probs: the row
 * itself (softmax), or s_e / sum s (sigmoid: each affinity normalised). */
static void balance_probs(const ptdp_moe_route_shape *sh, const ptdp_real *row, double *p)
{
    double Q = 1.0;
    if (sh->score == PTDP_MOE_SIGMOID) {
        Q = 0.0;
        for (int e = 0; e < sh->E; e++)
            Q += row[e];
    }
    for (int e = 0; e < sh->E; e++)
        p[e] = sh->score == PTDP_MOE_SIGMOID ? row[e] / Q : (double)row[e];
}

/* The slots per expert and sequence: ceil(c k T / E), or every choice. */
static int capacity(const ptdp_moe_route_shape *s)
{
    if (s->capacity <= 0)
        return s->T * s->k;
    double c = ceil(s->capacity * s->k * s->T / s->E);
    return c > s->T * s->k ? s->T * s->k : (int)c;
}

/* Sequence b's balance loss, alpha sum_i f_i P_i: the counts in one pass
 * over its T k choices (not one pass an expert: T k E). */
static double balance(const ptdp_moe_route_shape *s, const int *choice, const ptdp_real *probs, int b)
{
    int count[s->E > 0 ? s->E : 1];
    memset(count, 0, sizeof count);
    for (size_t c = (size_t)b * s->T * s->k; c < (size_t)(b + 1) * s->T * s->k; c++)
        count[choice[c]]++;
    /* P_i: the mean over the sequence of p_i (softmax: the probability
     * itself; sigmoid: s_i / sum_e s_e) — each P_i summed in t order */
    double P[s->E > 0 ? s->E : 1], p[s->E > 0 ? s->E : 1], aux = 0.0;
    memset(P, 0, sizeof P);
    for (int t = 0; t < s->T; t++) {
        balance_probs(s, probs + ((size_t)b * s->T + t) * s->E, p);
        for (int e = 0; e < s->E; e++)
            P[e] += p[e];
    }
    for (int e = 0; e < s->E; e++)
        aux += (double)s->E / ((double)s->k * s->T) * count[e] * (P[e] / s->T);
    return s->alpha * aux;
}

/* Each token's own part of the routing — its choices, gates and
 * probabilities, from its logits alone — for tokens [r0, r1). */
typedef struct {
    const ptdp_moe_route_shape *s;
    const ptdp_real *z;
    int *choice;
    ptdp_real *gate, *probs;
    int rows;
} tokens_job;

static void route_tokens(void *arg, int part, int parts)
{
    const tokens_job *j = arg;
    const ptdp_moe_route_shape *s = j->s;
    const int E = s->E, k = s->k;
    size_t first, end;
    ptdp_pool_block((size_t)j->rows, part, parts, &first, &end);
    const int r0 = (int)first, r1 = (int)end;
    for (int r = r0; r < r1 && s->score == PTDP_MOE_SIGMOID; r++)
        route_sigmoid(s, j->z + (size_t)r * E, j->choice + (size_t)r * k, j->gate + (size_t)r * k,
                      j->probs + (size_t)r * E);
    for (int r = r0; r < r1 && s->score != PTDP_MOE_SIGMOID; r++) {
        softmax_choose(s, j->z + (size_t)r * E, j->choice + (size_t)r * k);
        softmax(j->z + (size_t)r * E, j->choice + (size_t)r * k, k, j->gate + (size_t)r * k);
        softmax(j->z + (size_t)r * E, NULL, E, j->probs + (size_t)r * E);
    }
}

double ptdp_moe_route(const ptdp_moe_route_shape *s, int rows, const ptdp_real *z, int *choice, ptdp_real *gate,
                      int *slot, ptdp_real *probs, int *load, int *dropped)
{
    const int E = s->E, k = s->k, cap = capacity(s);
    int used[E > 0 ? E : 1], fill[E > 0 ? E : 1];
    double aux = 0.0;
    memset(load, 0, (size_t)E * sizeof *load);
    *dropped = 0;
    /* the tokens apart, shared with the device's helpers when there are
     * enough of them to pay a wake-up (each token's work is its own) */
    tokens_job j = { s, z, choice, gate, probs, rows };
    ptdp_pool_share((double)rows * E, 32768.0, route_tokens, &j);
    /* keep in position order, sequence by sequence: slot = 0 kept, -1 not */
    for (int b = 0; b < rows / s->T; b++) {
        memset(used, 0, sizeof used);
        for (int t = 0; t < s->T; t++)
            for (int j = 0; j < k; j++) {
                const size_t c = ((size_t)b * s->T + t) * k + j;
                const bool keep = used[choice[c]] < cap;
                used[choice[c]] += keep;
                load[choice[c]] += keep;
                *dropped += !keep;
                slot[c] = keep ? 0 : -1;
            }
        aux += balance(s, choice, probs, b);
    }
    /* the stacked rows: expert by expert, each in position order */
    for (int e = 0, off = 0; e < E; off += load[e], e++)
        fill[e] = off;
    for (size_t c = 0; c < (size_t)rows * k; c++)
        if (slot[c] == 0)
            slot[c] = fill[choice[c]]++;
    return aux;
}

/* ------------------------------------- a sequence split over CP ranks */

void ptdp_moe_sequence_stats(const ptdp_moe_route_shape *s, int rows, const int *choice, const ptdp_real *probs,
                             double *counts, double *psum)
{
    const int E = s->E, k = s->k, T = s->T;
    memset(counts, 0, (size_t)(rows / T) * E * sizeof *counts);
    memset(psum, 0, (size_t)(rows / T) * E * sizeof *psum);
    double p[E > 0 ? E : 1];
    for (int b = 0; b < rows / T; b++)
        for (int t = 0; t < T; t++) {
            const size_t r = (size_t)b * T + t;
            for (int j = 0; j < k; j++)
                counts[(size_t)b * E + choice[r * k + j]] += 1;
            balance_probs(s, probs + r * E, p);
            for (int e = 0; e < E; e++)
                psum[(size_t)b * E + e] += p[e];
        }
}


double ptdp_moe_balance(const ptdp_moe_route_shape *s, int seqs, int T_seq, const double *counts,
                        const double *psum)
{
    double aux = 0.0;
    for (int b = 0; b < seqs; b++) {
        double one = 0.0;
        for (int e = 0; e < s->E; e++)
            one += (double)s->E / ((double)s->k * T_seq) * counts[(size_t)b * s->E + e] *
                   (psum[(size_t)b * s->E + e] / T_seq);
        aux += s->alpha * one;
    }
    return aux;
}

/* The balance loss's weights of sequence b, u_i = scale alpha f_i / T_seq
 * with f_i = E / (k T_seq) x its choices of i: the whole sequence's counts
 * (CP: summed over the group), or these T rows', in one pass over their
 * choices. */
static void balance_weights(const ptdp_moe_route_shape *s, int b, const int *choice, double scale, int T_seq,
                            const double *counts, double *u)
{
    const int E = s->E, k = s->k, T = s->T;
    if (counts != NULL)
        memcpy(u, counts + (size_t)b * E, (size_t)E * sizeof *u);
    else {
        memset(u, 0, (size_t)E * sizeof *u);
        for (size_t c = (size_t)b * T * k; c < (size_t)(b + 1) * T * k; c++)
            u[choice[c]] += 1;
    }
    for (int e = 0; e < E; e++)
        u[e] = scale * s->alpha * ((double)E / ((double)k * T_seq) * u[e]) / T_seq;
}

/* The sigmoid router's backward, one token at a time (the top of the
 * file): ds from the normalised gates, ds from the balance loss through
 * p = s / Q, then dz = ds s (1 - s).  The bias chose and has no gradient. */
static void sigmoid_backward(const ptdp_moe_route_shape *s, int rows, const int *choice, const ptdp_real *gate,
                             const ptdp_real *probs, const ptdp_real *dgate, double scale, int T_seq,
                             const double *counts, ptdp_real *dz)
{
    const int E = s->E, k = s->k, T = s->T;
    const double lambda = s->route_scale > 0 ? s->route_scale : 1.0;
    double u[E > 0 ? E : 1], ds[E > 0 ? E : 1], p[E > 0 ? E : 1];
    for (int b = 0; b < rows / T; b++) {
        balance_weights(s, b, choice, scale, T_seq, counts, u);
        for (int t = 0; t < T; t++) {
            const size_t r = (size_t)b * T + t, c0 = r * k;
            const ptdp_real *sr = probs + r * E;
            double S = 0.0, dot = 0.0, Q = 0.0, up = 0.0;
            for (int j = 0; j < k; j++) {   /* gates: ds_j = (lambda dg_j - sum_l g_l dg_l) / S */
                S += sr[choice[c0 + j]];
                dot += (double)gate[c0 + j] * dgate[c0 + j];
            }
            balance_probs(s, sr, p);   /* balance: ds_e = (u_e - sum_i u_i p_i) / Q */
            for (int e = 0; e < E; e++) {
                Q += sr[e];
                up += u[e] * p[e];
            }
            for (int e = 0; e < E; e++)
                ds[e] = (u[e] - up) / Q;
            for (int j = 0; j < k; j++)
                ds[choice[c0 + j]] += (lambda * dgate[c0 + j] - dot) / S;
            for (int e = 0; e < E; e++)   /* through the sigmoid: ds/dz = s (1 - s) */
                dz[r * E + e] = (ptdp_real)(ds[e] * sr[e] * (1.0 - sr[e]));
        }
    }
}

void ptdp_moe_route_backward(const ptdp_moe_route_shape *s, int rows, const int *choice, const ptdp_real *gate,
                             const ptdp_real *probs, const ptdp_real *dgate, double scale, ptdp_real *dz)
{
    ptdp_moe_route_backward_whole(s, rows, choice, gate, probs, dgate, scale, s->T, NULL, dz);
}

void ptdp_moe_route_backward_whole(const ptdp_moe_route_shape *s, int rows, const int *choice, const ptdp_real *gate,
                                   const ptdp_real *probs, const ptdp_real *dgate, double scale, int T_seq,
                                   const double *counts, ptdp_real *dz)
{
    const int E = s->E, k = s->k, T = s->T;
    double u[E > 0 ? E : 1];
    if (s->score == PTDP_MOE_SIGMOID) {
        sigmoid_backward(s, rows, choice, gate, probs, dgate, scale, T_seq, counts, dz);
        return;
    }
    memset(dz, 0, (size_t)rows * E * sizeof *dz);
    for (int r = 0; r < rows; r++) {   /* the gates: dz_j = g_j (dg_j - sum_l g_l dg_l) */
        const size_t c0 = (size_t)r * k;
        double dot = 0.0;
        for (int j = 0; j < k; j++)
            dot += (double)gate[c0 + j] * dgate[c0 + j];
        for (int j = 0; j < k; j++)
            dz[(size_t)r * E + choice[c0 + j]] += (ptdp_real)(gate[c0 + j] * (dgate[c0 + j] - dot));
    }
    for (int b = 0; b < rows / T; b++) {   /* the balance loss: dP_i = scale alpha f_i, over T */
        balance_weights(s, b, choice, scale, T_seq, counts, u);
        for (int t = 0; t < T; t++) {
            const size_t r = (size_t)b * T + t;
            double dot = 0.0;
            for (int e = 0; e < E; e++)
                dot += (double)probs[r * E + e] * u[e];
            for (int e = 0; e < E; e++)
                dz[r * E + e] += (ptdp_real)(probs[r * E + e] * (u[e] - dot));
        }
    }
}
