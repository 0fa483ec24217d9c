/*
 * price_impl.h — what each parallelism costs, told by the parallelism
 * itself, for the planner (src/plan/) and nobody else.
 *
 * A parallelism's price is the collectives its code makes and the buffers
 * it holds, as formulas of a layout's shapes: written once, beside the
 * code it prices, with the formula it follows.  The planner keeps the
 * search and the sums: which groups a layout has, which units a stage
 * runs, and in what order their terms add up.
 *
 *   src/plan/  plan_time.c  plan_memory.c  plan_search.c
 *        │  asks each parallelism for its terms
 *        ▼
 *   mesh_price.c   the layout's groups: their devices and the nodes they span
 *   tp_price.c     TP: 2 all-reduces of R C a block each way (f and g);
 *                  SP: an all-gather + a reduce-scatter for each, its
 *                  LayerNorm shards gathered again for dW, its buffers
 *   cp_price.c     CP: the ring of K, V (cp - 1 passes), its buffers
 *   ep_price.c     EP: the counts, dispatch and combine all-to-alls
 *   dp_price.c     DP: the gradient buckets (2(N-1)/N S each), DualPipe's
 *                  mirror sum
 *   zero_stages.c  ZeRO: the rows' model states (zero.h), a shard, the
 *                  optimizer's share, ZeRO-3's units and walk
 *   shard_price.c  ZeRO-3's collectives a unit by link level: full
 *                  sharding, HSDP, ZeRO++'s hpZ, qwZ and qgZ
 *   schedule.h     the schedules: their rows' in-flight counts, deferred
 *                  W and timing line (schedule_registry.c)
 *
 * A price returns its terms, never their sum with the caller's: the
 * planner adds them in its own order, because a sum of doubles depends on
 * the order it is made in.
 */
#ifndef PTDP_PARALLEL_PRICE_IMPL_H
#define PTDP_PARALLEL_PRICE_IMPL_H

#include <stdbool.h>

#include "ptdp/clock.h"
#include "ptdp/zero.h"

/* ------------------------------------------------------------ a group */

/* A group of devices a collective runs over, as the cost model sees it:
 * the cluster's profile, how many devices, how many nodes they span. */
typedef struct {
    const ptdp_profile *profile;
    int n;
    int nodes;
} ptdp_price_group;

/* One collective of `bytes` (S, clock.h's meaning) over g: clock.h's
 * ptdp_cost_collective_nodes; nothing in a group of one. */
static inline double ptdp_price_collective(const ptdp_price_group *g, ptdp_coll op, double bytes)
{
    return g->n > 1 ? ptdp_cost_collective_nodes(g->profile, op, (uint64_t)bytes, g->n, g->nodes) : 0.0;
}

/* ------------------------------------------------ the mesh (mesh_price.c) */

/* The group of n devices `stride` world ranks apart, from rank 0. */
ptdp_price_group ptdp_price_group_of(const ptdp_profile *p, int n, int stride);

/* A layout's groups: TP, CP, DP (dp x cp: DP's and ZeRO's sums), EP and
 * expert DP (an expert's dp cp / ep copies); under MoE parallel folding
 * (etp below tp, moe_fold.c) the experts' TP group, the fold group of a
 * TP group's tp/etp slices, and EP and expert DP over the slices. */
typedef struct {
    const ptdp_profile *p;
    int dp, tp, pp, cp, ndp;
    int ep, nedp;
    int etp, slices;                /* the experts' TP size; tp / etp     */
    ptdp_price_group tp_group, cp_group, dp_group, ep_group, edp_group;
    ptdp_price_group etp_group, fold_group;
} ptdp_price_mesh;
void ptdp_price_mesh_of(ptdp_price_mesh *m, const ptdp_profile *p, int dp, int tp, int pp, int cp, int ep, int etp);
/* The world rank of pipeline stage `stage`'s first device. */
int ptdp_price_mesh_stage_rank(const ptdp_price_mesh *m, int stage);

/* A forward's and a backward's time on the compute stream. */
typedef struct {
    double f, b;
} ptdp_price_fb;

/* ------------------------------------------------- TP and SP (tp_price.c) */

/* S below is a block's activation on one device, R C reals in bytes. */

/* One block's TP collectives, as its model counts them: without SP the
 * all-reduces of its f and g operators each way (a GPT's: 2 and 2, in
 * attention and the MLP); under SP (sp.c) the all-gathers and
 * reduce-scatters each way, and of the backward's all-gathers the
 * `regathers` that gather a column-parallel layer's input again for dW
 * (a GPT's ln_1 and ln_2 shards). */
typedef struct {
    int all_reduce_f, all_reduce_b;
    int gather_f, scatter_f;
    int gather_b, scatter_b, regathers;
} ptdp_tp_block_colls;
/* Each of S; the regathers by ptdp_sp_price_regather, dx_s[i] the seconds
 * of the input-gradient product that can hide regather i. */
ptdp_price_fb ptdp_tp_price_block(const ptdp_price_group *tp, double S, bool sp, bool overlap,
                                  const ptdp_tp_block_colls *n, const double *dx_s);
/* The vocab-parallel embedding: its partial rows all-reduced forward (SP:
 * reduce-scattered; its backward all-gathers). */
ptdp_price_fb ptdp_tp_price_embed(const ptdp_price_group *tp, double S, bool sp);
/* LN_f, the head and the vocab-parallel loss: the loss's 3 all-reduces
 * of R doubles forward; the head's f backward (SP: the gather before the
 * head, the reduce-scatter after, LN_f's shard gathered again under
 * dx_s). */
ptdp_price_fb ptdp_tp_price_head(const ptdp_price_group *tp, double S, double R, bool sp, bool overlap, double dx_s);
/* A mixture of experts' block (dense attention, TP-split experts): the
 * attention's all-reduce of S over tp, the experts' outputs' of
 * rows_bytes, the rows they ran, over their own TP group etp (tp's unless
 * folded, moe_fold.c), and the shared experts' output's of shared_bytes
 * over tp (0: none) — the same forward and backward. */
double ptdp_tp_price_moe_block(const ptdp_price_group *tp, const ptdp_price_group *etp, double S, double rows_bytes,
                               double shared_bytes);
/* SP's all-gather of a LayerNorm shard again in the backward, for a
 * column-parallel layer's dW: blocking, or under --overlap beside the
 * input-gradient product (dx_s seconds), its excess only. */
double ptdp_sp_price_regather(const ptdp_price_group *tp, double S, bool overlap, double dx_s);

/* SP's buffers on top of what a micro-batch keeps, in elements (sp.c's
 * gathers and scatters, parallel_linear.c's partial sums); 0 without SP. */
typedef struct {
    double block_fwd;    /* in a block's forward                         */
    double embed_fwd;    /* in the embedding's forward                   */
    double linear_fwd;   /* while one linear layer runs forward          */
    double bwd;          /* in a backward                                */
    double head;         /* LN_f's shard and its gather before the head   */
} ptdp_sp_buffers;
ptdp_sp_buffers ptdp_sp_price_buffers(bool sp, double R, double Rl, double C);

/* ------------------------------------------------------ CP (cp_price.c) */

/* The ring of one block's attention over cp devices `stride` world ranks
 * apart, kv bytes of K and V a device (2 R Cl reals). */
ptdp_price_fb ptdp_cp_price_ring(const ptdp_profile *p, int cp, int stride, double kv);
/* The ring's buffers in elements (cp.c's ring.* allocations), on a
 * device of R rows, Cl attention width, hl heads, b samples of Tq
 * positions; backward: the backward's. */
double ptdp_cp_price_buffers(double R, double Cl, double b, double hl, double Tq, bool backward);

/* ------------------------------------------------------ EP (ep_price.c) */

/* A mixture's exchanges a micro-batch (ep.c), each its own term: the
 * counts, one all-to-all (dispatch or combine) of the routed rows, and
 * under CP the routing's counts summed over the whole sequence. */
typedef struct {
    double counts, a2a, cp_counts;
} ptdp_ep_price;
/* kept routed rows of C elements a device of r bytes on the wire (the
 * storage type's, or bf16's 2), local experts a rank of E, b samples; ep
 * the EP group, cp the CP group. */
ptdp_ep_price ptdp_ep_price_block(const ptdp_price_group *ep, const ptdp_price_group *cp, double kept, double local,
                                  double E, double b, double C,
                                  double r);
/* --fp8-comm: the forward dispatch of those rows as FP8 (ep.c's
 * ptdp_ep_dispatch_fp8): two all-to-alls, each row's C codes of 1 B, then
 * its `tiles` scales (reals) — in place of one a2a. */
double ptdp_ep_price_dispatch_fp8(const ptdp_price_group *ep, double kept, double C, double tiles);

/* ------------------------------------------------------ DP (dp_price.c) */

/* DP's buckets (dp.c) walked in flat order: a bucket closes when the
 * next tensor overflows its cap or belongs to the other group (the
 * experts', summed over the expert-DP group); each is summed by `op`
 * (all-reduce; ZeRO's reduce-scatter, with its gathers counted when
 * `gather`), one after another, or under --overlap each started once the
 * backward has made it.  Fill it with ptdp_dp_price_begin, then for each
 * unit ptdp_dp_price_unit and its tensors, then ptdp_dp_price_end. */
typedef struct {
    const ptdp_price_group *dp, *edp;
    ptdp_coll op;
    double cap, store;           /* elements a bucket; bytes an element      */
    bool overlap, gather;
    double fill, t_ready, t_before, stream, sum, gathered;
    bool open, experts;
} ptdp_dp_buckets;

/* The bucket cap, in elements, of --bucket-mb (1 when 0). */
double ptdp_dp_price_cap(double bucket_mb);
/* last_b: when the last backward starts (the walk's first unit's start). */
void ptdp_dp_price_begin(ptdp_dp_buckets *w, const ptdp_price_group *dp, const ptdp_price_group *edp, ptdp_coll op,
                         double cap, double store, bool overlap, bool gather, double last_b);
/* The next unit, whose backward takes bwd seconds. */
void ptdp_dp_price_unit(ptdp_dp_buckets *w, double bwd);
/* Its tensor of `size` elements, an expert's or not; first: its first. */
void ptdp_dp_price_tensor(ptdp_dp_buckets *w, double size, bool experts, bool first);
/* The last bucket, sent by `end` (the pipeline's end): the time the
 * compute stream spends or waits on the buckets after it; the whole
 * traffic's time in *total, the gathers' in *gather. */
double ptdp_dp_price_end(ptdp_dp_buckets *w, double end, double *total, double *gather);

/* DualPipe's mirror (model.c sum_dual_copies): a tensor of `bytes`
 * all-reduced over the two devices holding the same stages, added to *t;
 * under a ZeRO row that shards, first made whole over its replicas
 * (zero.c sum_groups_whole: `whole`, NULL otherwise), added after. */
void ptdp_dp_price_mirror(double *t, const ptdp_price_group *pair, const ptdp_price_group *whole, double bytes);

/* ------------------------------------------- ZeRO (zero_stages.c) */

/* Rank 0's shard of n elements over N ranks, ptdp_share's rounding:
 * ceil(n / N). */
double ptdp_zero_price_shard(double n, int N);
/* The elements a device's optimizer updates under row: all numel, or
 * under a row that shards it numel / ndp, the experts' over their own
 * group: (numel - experts) / ndp + experts / nedp. */
double ptdp_zero_price_optimizer_share(const ptdp_zero_stage *row, double numel, double experts, int ndp, int nedp);
/* ZeRO-3's units present beside the shards (zero3.c), float: the one
 * computing (unit elements, its largest), the tied embeddings for the
 * whole pass (tied), under --overlap the next one prefetched; in a
 * backward each with its gradient, and under --overlap the previous
 * unit's, still being reduce-scattered.  Bytes added to params, grads. */
void ptdp_zero3_price_units(double unit, double tied, bool overlap, double real, double store, double *params,
                            double *grads);

/* ZeRO-3's walk over a chunk's units (zero3.c): a gather before each
 * unit, a reduce-scatter after it in a backward; with --overlap the next
 * unit's gather starts on the communication stream as soon as this one
 * is present, and the reduce-scatters run there one at a time. */
typedef struct {
    bool overlap, backward;
    int units;
    double t, stream, rs_end, ready;
} ptdp_zero3_walk;
void ptdp_zero3_price_walk_begin(ptdp_zero3_walk *w, bool overlap, bool backward);
/* The next unit: its gather, its compute, its reduce-scatter, and the
 * next unit's gather (has_next false: none). */
void ptdp_zero3_price_walk_unit(ptdp_zero3_walk *w, double gather, double compute, double rs, bool has_next,
                                double next_gather);

/* ------------------------------------- ZeRO-3's options (shard_price.c) */

/* A device's bytes of some collectives inside a node and across nodes,
 * their seconds, and the bytes that leave a node (every copy of the group
 * in it: the ZeRO++ paper's count). */
typedef struct {
    double intra, cross, s, node;
} ptdp_price_link;

/* The groups a ZeRO-3 unit's collectives run over, and the options. */
typedef struct {
    ptdp_price_group zero;      /* ZeRO's group: dp x cp, or HSDP's shard group */
    ptdp_price_group replica;   /* HSDP: the dp / N copies of a shard (n 1: none) */
    ptdp_price_group node;      /* the k ranks of ZeRO's group in a node (n 1: none) */
    ptdp_price_group across;    /* qgZ's second hop: a rank a node, N / k */
    double store;               /* bytes of a stored parameter or gradient */
    int kd;                     /* the layout's DP ranks in a node (1: a rank a node) */
    bool hpz;                   /* hpZ: the backward's gather over `node` */
    int qwz_block;              /* qwZ: INT8 forward gathers, a scale a block; 0 exact */
    int qgz_bits, qgz_block;    /* qgZ: b-bit gradient all-to-alls; 0 the reduce-scatter */
} ptdp_shard_options;

/* ZeRO-3's three collectives of one unit, a micro-batch. */
typedef struct {
    ptdp_price_link gather_f, gather_b, reduce;
} ptdp_shard_unit;

/* The groups of a layout: ZeRO's over ndp ranks tp world ranks apart, or
 * shard groups of shard_group (0 or ndp: one); node_groups: the node's k
 * ranks of it (the profile's GPUs a node / tp, when it cuts the group in
 * two or more, else none).  The options are the caller's to set. */
void ptdp_shard_price_groups(ptdp_shard_options *o, const ptdp_profile *p, int ndp, int tp, int shard_group,
                             bool node_groups);
/* A device's bytes of one collective of `bytes` (S, clock.h's meaning)
 * over g, on g's level ((n-1)/n S; an all-reduce twice), and its time;
 * across nodes, what leaves a node of kd DP ranks: each of its kd / c
 * copies of g (c of g's members a node) sends its ring's (n-1)/n S once
 * (an all-to-all of one member a node: each member's). */
ptdp_price_link ptdp_shard_price_link(const ptdp_price_group *g, ptdp_coll op, double bytes, int kd);
/* A unit of n elements. */
ptdp_shard_unit ptdp_shard_price_unit(const ptdp_shard_options *o, double n);
/* HSDP's all-reduce of a shard of `shard` elements over the replicas. */
ptdp_price_link ptdp_shard_price_replicas(const ptdp_shard_options *o, double shard);
/* qwZ's forward gather buffer of a unit of n elements over N ranks in
 * blocks of `block`: every rank's INT8 codes and float scales, padded to
 * the largest rank's (zero3_qwz.c). */
double ptdp_qwz_price_wire(double n, int N, int block);
/* qgZ's wire of x gradient elements: ceil(x bits / 8) bytes of codes and a
 * 4-byte float scale a block (PTDP_QGZ_BLOCK elements, qwZ's default
 * block: the paper gives none). */
#define PTDP_QGZ_BLOCK 2048
double ptdp_qgz_price_bytes(double x, int bits, int block);

#endif
