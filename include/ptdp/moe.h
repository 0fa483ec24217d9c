/*
 * moe.h — a mixture of experts in place of some blocks' feed-forward, for
 * any model whose blocks have one: its settings, which blocks it
 * replaces, and what a training step counts of it.
 *
 *   block l:  out = h + FFN(norm(h))                    dense
 *             out = h + sum_j g_j expert_{e_j}(norm(h)) MoE: the token's
 *                                                       top-k of E experts
 *
 * The router's arithmetic is moe_route.h; the block's machinery — the
 * router's linear layer, the dispatch to the experts (an all-to-all under
 * expert parallelism, ep.h), the combine, their backward — is one piece
 * (src/parallel/moe.c) that every model's block calls with its own kind
 * of expert — a GELU MLP with biases, a SwiGLU feed-forward: each model's
 * header says which.  The settings below are the same flags for every
 * model:
 *
 *   --moe-experts E   experts per MoE block (0: every block dense)
 *   --moe-every n     block l is MoE when (l + 1) mod n = 0 (n at most
 *                     --layers: flags that make no block a mixture are
 *                     refused)
 *   --moe-dense-first K   DeepSeek's first dense blocks: blocks 0..K-1
 *                     stay dense, and --moe-every counts from block K —
 *                     block l >= K is MoE when (l - K + 1) mod n = 0 (0,
 *                     the default: from block 0, as above)
 *   --moe-ffn F_e     an expert's hidden width (0: the model's --ffn)
 *   --moe-shared-experts S   DeepSeek's shared experts: S experts every
 *                     token takes, beside its k routed ones — one FFN of
 *                     width S F_e (the model's FFN kind), its output added
 *                     to the routed experts' gated sum; split over TP like
 *                     the dense FFN, never dispatched (0, the default:
 *                     none)
 *   --moe-top-k k     experts a token chooses
 *   --moe-capacity-factor c   slots per expert and sequence ceil(c k T / E)
 *                     (omitted: dropless, 0 in the settings; typed: above 0)
 *   --moe-aux-loss a  the balance loss's weight alpha
 *   --moe-score softmax|sigmoid   Mixtral's router (softmax, the default)
 *                     or DeepSeek-V3's (moe_route.h): sigmoid affinities
 *                     s, the top k of s + b chosen, b the block's expert
 *                     bias (a buffer: no gradient, no weight decay, zero
 *                     at init, saved in checkpoints — a parameter the
 *                     model declares only under sigmoid, so softmax files
 *                     are what they were)
 *   --moe-route-scale lambda   sigmoid: the gates lambda s_j / sum s (1)
 *   --moe-z-loss beta ST-MoE's router z-loss, beta x the mean over tokens
 *                     of (log sum_e exp z_e)^2, either router (0: none)
 *   --moe-groups G    DeepSeek-V3's group-limited routing (moe_route.h):
 *   --moe-group-top-k M   the E experts in G groups of E/G consecutive
 *                     ones; a token's top k only among the experts of its
 *                     M best groups, a group's score the sum of its top
 *                     floor(k/M) values of s + b (softmax: of z), ties to
 *                     the lower group.  1, 1: no limit.  E divisible by
 *                     G, M <= G, 1 <= floor(k/M) <= E/G, k <= M E/G.
 *   --moe-bias-update u   sigmoid: after each optimizer step, b_e +=
 *                     u sign(mean_e L - L_e), L_e the choices of expert e
 *                     (before capacity) over the step's whole global batch
 *                     (summed over the stage's DP group, dp x cp: one
 *                     all-reduce of n E doubles, moe_bias.c); 0, the
 *                     default: the bias stays 0.  Not yet with bf16's
 *                     stores, ZeRO-3's shards or DualPipe's two copies
 *                     (refused by name).
 *
 * A checkpoint records E, n, F_e and k as shapes a --load must match, and
 * c and alpha (sigmoid: lambda and u too; beta when not 0) as settings a resumed run takes
 * unless they are typed
 * (model.h's ptdp_meta_setting; moe_settings.c).
 *
 * A model with MoE blocks publishes in the run's counters (counters.h,
 * model.h's publish and count), numbers of each step:
 *
 *   "aux_loss"       a number   the balance losses of all its blocks
 *   "moe_load"       n x E      kept choices per expert (tokens it ran,
 *                               k per token when nothing is dropped)
 *   "moe_dropped"    n          choices beyond an expert's capacity
 *   "moe_aux_loss"   n          each block's balance loss
 *   "z_loss"         a number   --moe-z-loss alone: the router z-losses
 *                               of all its blocks (moe_z_loss.c)
 *   "moe_z_loss"     n          --moe-z-loss alone: each block's
 *   "moe_bias_bytes" a number   --moe-bias-update alone, per device for
 *                               the run: what the expert loads'
 *                               all-reduce over the DP group sent, by its
 *                               formula 2 (N-1)/N x 8 n E a step
 *
 * one row per MoE block j = 0 .. n-1 in layer order (ptdp_moe_layer),
 * summed over the step's micro-batches and over every device that routes
 * tokens (dp x cp, each stage its own blocks; tp rank 0 alone, since
 * every TP rank routes the same tokens).  The two losses read as means
 * over the global batch's sequences (PTDP_COUNT_PER_SAMPLE), as the loss
 * does, and so do the z-losses.  So for B sequences of T tokens, top-k:
 *
 *   sum_e load[e] + dropped = k B T,   load[e] <= ceil(c k T / E) B,
 *   sum over blocks of moe_aux_loss = the step's aux_loss.
 */
#ifndef PTDP_MOE_H
#define PTDP_MOE_H

#include <stdbool.h>

#include "moe_route.h"

/* A mixture of experts' settings, the same for every model. */
typedef struct {
    int experts;            /* E; 0: every block dense           --moe-experts */
    int every;              /* block l is MoE when (l+1) mod n = 0 --moe-every */
    int ffn;                /* an expert's hidden size; 0: --ffn   --moe-ffn   */
    int top_k;              /* experts a token chooses          --moe-top-k    */
    double capacity;        /* slots per expert and sequence: ceil(c k T / E);
                               0: dropless           --moe-capacity-factor    */
    double aux_loss;        /* the balance loss's weight alpha --moe-aux-loss  */
    int score;              /* ptdp_moe_score: 0 softmax, 1 sigmoid --moe-score */
    int groups;             /* G groups of E/G experts; 0 reads 1 --moe-groups */
    int group_top_k;        /* M groups a token may use; 0 reads 1
                                                      --moe-group-top-k       */
    int dense_first;        /* K: blocks 0..K-1 stay dense   --moe-dense-first */
    int shared;             /* S shared experts: one FFN of width S F_e every
                               token takes               --moe-shared-experts */
    double route_scale;     /* sigmoid gates' lambda; 0 reads 1 --moe-route-scale */
    double bias_update;     /* u of the bias update; 0: none --moe-bias-update */
    double z_loss;          /* the router z-loss's weight beta; 0: none
                                                      --moe-z-loss            */
} ptdp_moe_settings;

/* The defaults of the flags (with experts 0: a dense model). */
#define PTDP_MOE_DEFAULTS ((ptdp_moe_settings){ .every = 1, .top_k = 2, .aux_loss = 0.01 })

/* Whether global block l is a mixture of experts: experts > 0, l >= K
 * (dense_first) and (l - K + 1) mod every = 0. */
bool ptdp_moe_block_is_moe(const ptdp_moe_settings *s, int l);
/* How many of `layers` blocks are (0: a dense model, which publishes
 * nothing), and the global layer of MoE block j (0 .. n-1), or -1. */
int  ptdp_moe_blocks(const ptdp_moe_settings *s, int layers);
int  ptdp_moe_layer(const ptdp_moe_settings *s, int layers, int j);
/* An expert's hidden size: s->ffn, or the model's ffn when it is 0. */
int  ptdp_moe_ffn(const ptdp_moe_settings *s, int ffn);

#endif
