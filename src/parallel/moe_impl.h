/*
 * parallel/moe_impl.h — a mixture of experts as a piece of any model's
 * block (moe.c), private to src/: what a model gives it for one pass, the
 * kind of expert the model plugs in, and what a block keeps between its
 * forward and its backward; the settings' checks (moe_settings.c) and the
 * step's counters (moe_stats.c).
 *
 *   the model's block           moe.c                             the model's expert kind
 *   n = norm(h) ──────────► router z = n W_r^T, top-k, gates
 *                           dispatch (EP: all-to-all) ───────► forward: y = FFN_e(x) for
 *                                                              each local expert's rows
 *   out = h + Σ g_j y ◄──── combine (EP: all-to-all back) ◄─── (GELU MLP, SwiGLU, …)
 *
 * What differs between models is only the expert: its weights, the
 * activations it keeps per row and its forward and backward over the
 * stacked rows of its local experts (ptdp_moe_expert_kind).  Everything
 * else — the router's linear layer in storage precision, the capacity,
 * the balance loss (whole sequences under CP), the EP exchange, the
 * combine and the backward of all of them — is here, once.
 */
#ifndef PTDP_PARALLEL_MOE_IMPL_H
#define PTDP_PARALLEL_MOE_IMPL_H

#include <stdbool.h>

#include "ptdp/counters.h"
#include "ptdp/mesh.h"
#include "ptdp/model.h"
#include "ptdp/moe.h"
#include "ptdp/parallel_linear.h"

/* ------------------------------------------------- the expert's kind */

#define PTDP_MOE_KEEP_MAX 3

/* The local experts' FFN over their stacked rows, as the expert's kind
 * sees it: `here` rows, local expert l on rows[l] of them in turn.  Each
 * expert is split over TP like the model's dense FFN: F of its hidden
 * units on this rank. */
typedef struct {
    const ptdp_linear_pass *linear;   /* the model's (TP, recipe, W's sink,
                                    clock) for the experts' groups        */
    void *model;                 /* the model's pass                      */
    const void *experts;         /* this block's local experts (the model's) */
    int local, here;             /* local experts; the rows they run      */
    const int *rows;             /* [local]: each expert's rows, in order  */
    int F, C;                    /* hidden units on this rank; the width  */
    ptdp_tensor keep[PTDP_MOE_KEEP_MAX];     /* here x F: what the forward
                                                keeps for the backward    */
    ptdp_tensor scratch[PTDP_MOE_KEEP_MAX];  /* here x F: the backward's  */
} ptdp_moe_local;

/* A kind of expert: the names of its kept and scratch tensors (the
 * arena's, here x F each), and its forward and backward.  forward: y
 * (here x C) = the experts of x, keep[] filled, y summed over TP (each
 * rank's share of the hidden units gives a partial sum).  backward: from
 * dy, the experts' gradients (dW now, or W's under a split backward) and
 * dx (here x C, overwritten) summed over TP.  0, or the failure. */
typedef struct {
    int nkeep, nscratch;
    const char *keep[PTDP_MOE_KEEP_MAX], *scratch[PTDP_MOE_KEEP_MAX];
    int (*forward)(const ptdp_moe_local *f, ptdp_tensor x, ptdp_tensor y);
    int (*backward)(const ptdp_moe_local *f, ptdp_tensor x, ptdp_tensor dy, ptdp_tensor dx);
} ptdp_moe_expert_kind;

/* ---------------------------------------------------------- one pass */

typedef struct ptdp_moe_acts ptdp_moe_acts;
typedef struct ptdp_moe_tally ptdp_moe_tally;

/* One forward or backward of one MoE block, as the model sets it up. */
typedef struct {
    ptdp_device *dev;
    const ptdp_mesh *mesh;
    ptdp_linear_pass linear;     /* the model's: TP group, recipe, W's sink,
                                    the clock's names and start (no SP)   */
    const ptdp_moe_settings *settings;
    int T;                       /* a rank's positions of a sequence      */
    int T_seq;                   /* a whole sequence's: T cp under CP,
                                    whose group sums the balance loss's
                                    statistics                            */
    int F;                       /* an expert's hidden units on this rank */
    const ptdp_param *router;    /* W_r [E, C], whole on every TP rank    */
    const ptdp_param *bias;      /* sigmoid: the expert bias [E], whole on
                                    every rank; NULL: none (softmax)      */
    double *choices;             /* --moe-bias-update: the block's choices
                                    per expert this step [E], before the
                                    capacity (a training step's first route
                                    of each micro-batch adds); NULL: none */
    double router_flops;         /* the piece the router's call ends: the
                                    forward's z = n W_r^T, the backward's
                                    dX = dZ W_r (and dW_r unless W runs it),
                                    with what the model charges beside   */
    double router_w_flops;       /* backward: dW_r, when W runs it         */
    double per_sequence;         /* backward: the balance loss's gradient
                                    scale, 1 / global batch               */
    const ptdp_moe_expert_kind *kind;
    void *model;                 /* for the kind: the model's pass         */
    const void *experts;         /* ... and this block's local experts     */
    const void *shared;          /* --moe-shared-experts: the block's one
                                    shared FFN (the kind's expert, S F_e
                                    wide), or NULL                        */
    int F_shared;                /* its hidden units on this rank: S F_e/tp */
    ptdp_linear_pass expert_linear;   /* set by moe.c: `linear` in the
                                    experts' TP group (moe_fold.c)       */
    ptdp_moe_tally **tally;      /* forward: the micro-batch's tally (NULL:
                                    counts nowhere), the block's row      */
    int block, nblocks;
    int rc;                      /* the first failure; then nothing runs  */
} ptdp_moe_pass;

/* out (R x C) = the block's mixture of n (R x C, whole on every TP rank):
 * route, dispatch, the experts, combine; *acts keeps the routing and what
 * the experts keep (set at once, so that ptdp_moe_free cleans up after a
 * failure).  Returns p->rc. */
int    ptdp_moe_forward(ptdp_moe_pass *p, ptdp_moe_acts **acts, ptdp_tensor n, ptdp_tensor out);
/* From d, the gradient of out: the experts' and the router's gradients
 * (with the balance loss's, p->per_sequence a sequence) and dn (R x C,
 * overwritten), the gradient into n.  Returns p->rc. */
int    ptdp_moe_backward(ptdp_moe_pass *p, const ptdp_moe_acts *a, ptdp_tensor n, ptdp_tensor d, ptdp_tensor dn);
/* What *a holds, back to the arena (a no-op for NULL). */
void   ptdp_moe_free(ptdp_device *dev, ptdp_moe_acts **a);
/* Its balance loss alpha sum_i f_i P_i summed over the micro-batch's
 * sequences (0 for NULL: a dense block). */
double ptdp_moe_aux(const ptdp_moe_acts *a);

/* ------------------------------------------------ moe_settings.c */

/* The settings alone, for a model of `layers` blocks whose dense FFN is
 * `ffn` wide: top-k within E, a capacity factor and a balance weight that
 * are numbers, at least one block a mixture (--moe-every at most
 * --layers), an expert's width that tp divides (`split`: how the model
 * splits each expert, said when it does not).  0, or PTDP_EINVAL with the
 * message. */
int ptdp_moe_check(const ptdp_moe_settings *s, int ffn, int layers, int tp, const char *split, char *msg, size_t n);
/* What a run's layout asks of a mixture: E a multiple of --ep, no --ep
 * for a dense model (`dense`: "this GPT is dense"), and not yet a capacity
 * under CP, SP's or token slices' splits of a sequence.  0, or PTDP_EINVAL
 * with the message. */
int ptdp_moe_check_run(const ptdp_moe_settings *s, const ptdp_model_run *r, const char *dense, char *msg,
                       size_t n);

/* What a checkpoint records of a mixture beyond its shapes (model.h's
 * settings hook): the settings that change the math, each a real —
 *
 *   moe_capacity_factor   --moe-capacity-factor   0: dropless
 *   moe_aux_loss          --moe-aux-loss          the balance weight alpha
 *   moe_route_scale       --moe-route-scale       sigmoid only: lambda
 *   moe_bias_update       --moe-bias-update       sigmoid only: u
 *   moe_groups            --moe-groups            G > 1 only: G
 *   moe_group_top_k       --moe-group-top-k       G > 1 only: M
 *   moe_z_loss            --moe-z-loss            beta > 0 only: beta
 *
 * none for a dense model.  _settings writes them (the number, at most
 * max); _from_metadata_real reads one back: 0, or PTDP_EINVAL for another
 * key or a value the flag refuses (not a number >= 0). */
int ptdp_moe_settings_metadata(const ptdp_moe_settings *s, ptdp_meta_setting *out, int max);
/* The shapes beyond E, n, F_e and k, into the model's metadata (model.h),
 * each only where it is not the default, so files without them are what
 * they were: the router's score ("moe_score" 1 for sigmoid: the blocks
 * hold an expert bias), the first dense blocks ("moe_dense_first" K
 * when K > 0: which blocks hold experts) and the shared experts
 * ("moe_shared_experts" S when S > 0: the blocks hold their FFN).  The
 * number. */
int ptdp_moe_shape_metadata(const ptdp_moe_settings *s, const char **keys, char (*values)[32], const char **flags,
                            int max);
int ptdp_moe_from_metadata_real(ptdp_moe_settings *s, const char *key, double value);

/* The experts this device holds: E / ep of them from *first (EP rank r:
 * r E / ep), all E without expert parallelism (mesh.h). */
int ptdp_moe_experts_here(const ptdp_mesh *mesh, int E, int *first);

/* ------------------------------------------------ moe_fold.c */

/* MoE parallel folding (--etp e below tp): the experts' own layout.  The
 * slices a TP group's rows are shared out over, tp / e (1: no folding). */
int ptdp_moe_fold_slices(const ptdp_mesh *m);
/* The experts' TP group, its size and this rank's place in it: the TP
 * group's, or under folding the etp group's. */
ptdp_comm *ptdp_moe_expert_tp(const ptdp_mesh *m);
int ptdp_moe_expert_tp_size(const ptdp_mesh *m);
int ptdp_moe_expert_tp_rank(const ptdp_mesh *m);
/* This rank's slice of x's rows (whole sequences: x.rows divisible by the
 * slices), a view. */
ptdp_tensor ptdp_moe_fold_slice(const ptdp_mesh *m, ptdp_tensor x);
/* whole's rows rebuilt from the fold group's slices, each rank's in place
 * at its rows: one all-gather, counted in "moe_fold_bytes". */
int ptdp_moe_fold_gather(ptdp_device *dev, const ptdp_mesh *m, ptdp_tensor whole);
/* Where an expert's gradient is summed: its expert-DP group (under EP or
 * folding), else the DP group. */
ptdp_group ptdp_moe_expert_replicas(const ptdp_mesh *m);
/* Declares the router's gradient summed over the fold group too (under
 * folding: each slice used it on other rows). */
void ptdp_moe_fold_router(const ptdp_mesh *m, ptdp_param *router);
/* The run's counter of the re-layout's bytes. */
int ptdp_moe_fold_publish(ptdp_counters *reg);

/* ---------------------------------------------------- moe_bias.c */

/* The loss-free balance's step (moe_bias.c), once after each optimizer
 * step, for the n MoE blocks of a stage's model chunk: choices[j] [E]
 * their step's choices per expert on this device, bias[j] their expert
 * bias.  The choices are summed over the stage's DP group (dp x cp: the
 * devices that route different tokens) by one all-reduce of n E doubles,
 * then b_e += u sign(mean L - L_e) and the choices are zeroed.  0, or the
 * collective's failure. */
int ptdp_moe_bias_step(ptdp_device *dev, const ptdp_mesh *mesh, double u, int E, int n, ptdp_real *const *bias,
                       double *const *choices);
/* The bytes one device sends a step for it: a ring all-reduce of n E
 * doubles over N devices, 2 (N - 1) / N x 8 n E. */
double ptdp_moe_bias_bytes(int E, int n, int N);

/* --------------------------------------------------- moe_stats.c */

/* The counters of moe.h for a model of `layers` blocks: named when it has
 * MoE blocks, nothing for a dense one.  0, or the registry's refusal. */
int  ptdp_moe_publish(const ptdp_moe_settings *s, int layers, ptdp_counters *reg);
/* A route of the stage's block `block` (of nblocks) for one micro-batch:
 * its kept choices per expert, dropped choices, balance loss and z-loss
 * (0 without --moe-z-loss) into *t
 * (made at the first): the first route of a block counts, full
 * recomputation's second does not.  0, or the device's failure. */
int  ptdp_moe_tally_add(ptdp_device *dev, ptdp_moe_tally **t, int nblocks, int E, int block, const int *load,
                        int dropped, double aux, double zloss);
void ptdp_moe_tally_free(ptdp_moe_tally **t);
/* Whether block `block` of the tally *t has counted its route (false for
 * no tally yet): full recomputation's second route has. */
bool ptdp_moe_tally_counted(const ptdp_moe_tally *t, int block);
/* After a micro-batch's forward on the stage of blocks [begin, end): its
 * balance loss aux_sum (this stage's blocks', counted once) and the
 * tally's rows (with --moe-z-loss, their z-losses summed into "z_loss"),
 * added into the device's counters of the step. */
void ptdp_moe_count(const ptdp_moe_settings *s, int begin, int end, const ptdp_moe_tally *t, double aux_sum,
                    ptdp_counts *counts);

#endif
