/*
 * lesson.h — lesson 14: the functions you write in exercise.c, which the
 * check calls.
 *
 * An MoE block on an EP group of N ranks, E experts, local = E / N each:
 * rank r holds experts r local .. (r+1) local - 1.  Each rank routes its
 * own tokens and stacks its kept choices expert by expert (load[e] rows
 * for expert e, in position order): the rows for rank d's experts are one
 * block, already in destination-rank order.
 */
#ifndef LESSON_14_H
#define LESSON_14_H

#include "ptdp/comm.h"
#include "ptdp/types.h"

/* Blanks 1-2: one token's router.  z holds its E logits.  choice[0 .. k)
 * gets the k largest, largest first, ties to the lower expert index;
 * gate[j] the softmax of the k chosen logits (softmax_of, given, is the
 * library's softmax).  Returns 0 or a PTDP_E… code. */
int lesson_route(const ptdp_real *z, int E, int k, int *choice, ptdp_real *gate);

/* Blank 3: the counts.  load[E]: the rows I send each expert.
 * recv_rows[s local + l] gets the rows source s sends me for my local
 * expert l.  One ptdp_all_to_all over ep.  Returns 0 or a PTDP_E… code. */
int lesson_exchange_counts(ptdp_comm *ep, int E, const int *load, int *recv_rows);

/* Blanks 4-5: the dispatch.  x: my stacked rows (sum of load rows of
 * `cols` reals, expert by expert) -> out: the rows of my experts in LOCAL
 * EXPERT ORDER (for each local expert l, for each source s in rank order,
 * s's rows for expert l in s's order).  One ptdp_all_to_allv into scratch
 * (as many reals as out), then the reorder.  Returns 0 or a PTDP_E… code. */
int lesson_dispatch(ptdp_comm *ep, int E, const int *load, const int *recv_rows, const ptdp_real *x, int cols,
                    ptdp_real *out, ptdp_real *scratch);

/* Blanks 6-7: the combine's exchange, the dispatch backwards.  y: my
 * experts' outputs, in local expert order -> stacked: every row back at
 * its place in its sender's stack (as x was).  scratch as for the
 * dispatch.  Returns 0 or a PTDP_E… code. */
int lesson_combine(ptdp_comm *ep, int E, const int *load, const int *recv_rows, const ptdp_real *y, int cols,
                   ptdp_real *stacked, ptdp_real *scratch);

/* Blank 8: the combine's sum.  rows tokens, k choices each: out[t] =
 * sum over j of gate[t k + j] x stacked row slot[t k + j], j in order
 * (slot -1: a dropped choice, nothing).  Returns 0 or a PTDP_E… code. */
int lesson_gated_sum(int rows, int k, int cols, const ptdp_real *gate, const int *slot, const ptdp_real *stacked,
                     ptdp_real *out);

/* Blank 9: where an expert's gradient is summed.  dp_ranks[0 .. dp): the
 * world ranks of my DP group, in DP order; the EP groups are `ep`
 * consecutive members of it (member i has EP rank i mod ep).  Fills out
 * with the world ranks, in DP order, over which the gradient of the
 * experts held by DP member `member` is summed; returns how many, or a
 * PTDP_E… code. */
int lesson_expert_grad_ranks(const int *dp_ranks, int dp, int ep, int member, int *out);

/* ---- Part 2: DeepSeek-V3's router and its auxiliary-loss-free balance ---- */

/* Blank 10: group-limited routing's group scores.  v[E]: a token's values
 * s + b; the E experts are G groups of E/G consecutive ones.  score[g] =
 * the sum of the n = floor(k/M) largest v of group g.  Returns 0 or a
 * PTDP_E… code. */
int lesson_group_scores(const ptdp_real *v, int E, int G, int n, ptdp_real *score);

/* Blank 11: DeepSeek-V3's router for one token.  s = sigmoid(z); the top
 * k of s + b (bias b[E]) among the experts of the M best of G groups (G
 * 1: no groups); choice[0 .. k) largest s + b first, ties to the lower
 * index; gate[j] = lambda s_j / (sum of the chosen s).  Returns 0 or a
 * PTDP_E… code. */
int lesson_route_sigmoid(const ptdp_real *z, const ptdp_real *bias, int E, int k, int G, int M, double lambda,
                         int *choice, ptdp_real *gate);

/* Blanks 12-13: the loss-free balance's step on one replica, after an
 * optimizer step.  L[E]: in, the choices of each expert among MY tokens
 * this step; out, the choices over the whole global batch (summed over
 * the DP group dp, the replicas that route different tokens).  Then b_e
 * += u sign(mean L - L_e), sign(0) = 0.  Returns 0 or a PTDP_E… code. */
int lesson_balance_bias(ptdp_comm *dp, int E, double u, double *L, ptdp_real *bias);

/* Blank 14: MoE parallel folding's groups (--etp below --tp, cp 1, one
 * stage).  World rank = tp_rank + tp dp_rank.  The experts' TP groups are
 * etp consecutive ranks of a TP group; a TP group's rows are shared out
 * over its S = tp / etp slices (slice s = tp_rank / etp), and the token
 * holders h = s + S dp_rank are cut into EP groups of `ep` consecutive
 * holders among the ranks of one experts' TP rank e = tp_rank mod etp;
 * the expert-DP group of a rank is the holders with its EP rank and its
 * e.  Fills ep_ranks and edp_ranks with the world ranks of `rank`'s EP
 * group and expert-DP group, each in holder order, and their sizes.
 * Returns 0 or a PTDP_E… code. */
int lesson_fold_groups(int tp, int dp, int etp, int ep, int rank, int *ep_ranks, int *n_ep, int *edp_ranks,
                       int *n_edp);

#endif
