/*
 * moe_route.h — a mixture of experts' router on numbers (moe_route.c):
 * which k of E experts each token chooses, with what gates, which choices
 * a capacity drops, the balance loss, and their backward.  Any model's
 * MoE block runs it (parallel/moe.c); tests and the course call it on
 * hand-made logits.
 *
 *   z      = h W_r^T                      logits, a row of E per token
 *   top-k  = the k largest z of a token   ties to the lower index
 *   g_j    = softmax over those k logits  (Mixtral's gates)
 *   aux    = alpha sum_i f_i P_i          the balance loss, per sequence
 *
 * or, with the score PTDP_MOE_SIGMOID (DeepSeek-V3's router):
 *
 *   s      = sigmoid(z)                   affinities, each in (0, 1)
 *   top-k  = the k largest s + b          b: the expert bias, which only
 *                                         selects (ties to the lower index)
 *   g_j    = lambda s_j / sum_chosen s    lambda: the route scale
 *   P_i    = mean of s_i / sum_e s_e      the balance loss's (sequence-wise)
 *
 * and with groups G > 1 (DeepSeek-V3's group-limited routing,
 * moe_groups.c) the top k is taken only among the experts of the M best
 * of G groups of E/G consecutive experts, a group's score the sum of its
 * top floor(k/M) values of s + b (softmax: of z).
 */
#ifndef PTDP_MOE_ROUTE_H
#define PTDP_MOE_ROUTE_H

#include "types.h"

/* The router on hand-made numbers, for whole
 * sequences of T positions: `rows` tokens (a multiple of T) with their
 * logits z (rows x E, z = h W_r^T).  Each token chooses the k largest
 * logits (ties to the lower expert index; choice[r k + j] in that order),
 * its gates are the softmax over those k logits, probs (rows x E) the
 * softmax over all E.  With capacity c > 0 each expert takes at most
 * ceil(c k T / E) choices of a sequence, in position order; a choice
 * beyond is dropped (slot -1, and the kept gates are not renormalised).
 * A kept choice's slot is its row in the experts' stacked buffers: expert
 * by expert, in position order.  load[E] counts the kept choices of the
 * whole micro-batch, *dropped the others.  Returns the balance loss summed
 * over the sequences, sum_seq alpha sum_i f_i P_i, with f_i = E / (k T) x
 * the sequence's tokens choosing i (before dropping) and P_i the mean of
 * probs[., i] over the sequence.
 *
 * With the score PTDP_MOE_SIGMOID a token chooses the k largest s + b (s =
 * sigmoid(z), b = s->bias), its gates are lambda s_j / sum of its chosen
 * s, probs holds s itself, and P_i is the mean of s_i / sum_e s_e. */
typedef enum {
    PTDP_MOE_SOFTMAX = 0,   /* Mixtral's: gates the softmax of the top k    */
    PTDP_MOE_SIGMOID        /* DeepSeek-V3's: sigmoid affinities, a bias   */
} ptdp_moe_score;

typedef struct {
    int T, E, k;
    ptdp_moe_score score;   /* 0: softmax (route_scale, bias unread)       */
    double capacity;        /* 0: dropless                                  */
    double alpha;
    double route_scale;     /* sigmoid: the gates' scale lambda; 0 reads 1  */
    const ptdp_real *bias;  /* sigmoid: [E], added to s to choose; NULL: 0  */
    int groups;             /* G groups of E/G experts; 0 or 1: no limit    */
    int group_top_k;        /* M: the groups a token may choose from        */
} ptdp_moe_route_shape;
double ptdp_moe_route(const ptdp_moe_route_shape *s, int rows, const ptdp_real *z, int *choice, ptdp_real *gate,
                      int *slot, ptdp_real *probs, int *load, int *dropped);
/* One token's choices, the simple selection's (choice[j] the j-th largest
 * of z[0..E), ties to the lower index, and what it always chose for a NaN:
 * top_k.c), in O(E log k) comparisons; returns how many it made. */
long long ptdp_moe_top_k(const ptdp_real *z, int E, int k, int *choice);
/* Group-limited routing (moe_groups.c): v (E, the values a token's top k
 * is chosen on: s + b, or z) keeps the experts of the M = group_top_k best
 * of s->groups groups and the others become -infinity, so that the top k
 * cannot choose them.  A group's score: the sum of its floor(k/M) largest
 * v (ties: the lower group).  Nothing changes with groups <= 1 or M >= G. */
void ptdp_moe_group_limit(const ptdp_moe_route_shape *s, ptdp_real *v);
/* ST-MoE's router z-loss (moe_z_loss.c): beta sum_r lse_r^2 / T_seq over
 * rows of logits z (rows x E), lse_r = log sum_e exp z_re — a sequence's
 * share of beta x the mean over its T_seq tokens — and its backward, which
 * adds scale beta 2 lse_r softmax(z_r) / T_seq to dz. */
double ptdp_moe_z_loss(int rows, int E, int T_seq, double beta, const ptdp_real *z);
void ptdp_moe_z_loss_backward(int rows, int E, int T_seq, double beta, const ptdp_real *z, double scale,
                              ptdp_real *dz);
/* Its backward: dz (rows x E, overwritten) from dgate (rows x k, 0 for a
 * dropped choice) through the k-way softmax (sigmoid: the normalised
 * gates and the sigmoid), plus scale x the balance loss's gradient
 * through probs (f_i carries none; the bias none either). */
void ptdp_moe_route_backward(const ptdp_moe_route_shape *s, int rows, const int *choice, const ptdp_real *gate,
                             const ptdp_real *probs, const ptdp_real *dgate, double scale, ptdp_real *dz);
/* Context parallelism (cp.h) cuts each sequence over the CP group: a
 * rank's rows hold T of a sequence's T_seq positions, and the balance
 * loss needs the whole sequence.  ptdp_moe_sequence_stats gives this
 * rank's part for each of rows / T sequences — counts[b E + i], the
 * choices of expert i before dropping, and psum[b E + i], the sum of
 * probs[., i]; summed over the group, ptdp_moe_balance makes the loss of
 * `seqs` sequences from them (f_i = E/(k T_seq) counts, P_i = psum /
 * T_seq), and ptdp_moe_route_backward_whole the gradient with the whole
 * sequences' counts (NULL: these rows', T_seq = T: the plain backward). */
void ptdp_moe_sequence_stats(const ptdp_moe_route_shape *s, int rows, const int *choice, const ptdp_real *probs,
                             double *counts, double *psum);
double ptdp_moe_balance(const ptdp_moe_route_shape *s, int seqs, int T_seq, const double *counts,
                        const double *psum);
void ptdp_moe_route_backward_whole(const ptdp_moe_route_shape *s, int rows, const int *choice, const ptdp_real *gate,
                                   const ptdp_real *probs, const ptdp_real *dgate, double scale, int T_seq,
                                   const double *counts, ptdp_real *dz);

#endif
