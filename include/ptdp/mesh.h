/*
 * mesh.h — one dp x tp x pp grid of devices, and its groups.
 *
 * World = dp * tp * pp devices.  Ranks are laid out as in Megatron-LM:
 * tp varies fastest, then dp, then pp:
 *
 *     world rank = tp_rank + tp * (dp_rank + dp * pp_rank)
 *
 *   dp=2 tp=2 pp=2:      stage 0            stage 1
 *                     dp0: [0 1]         dp0: [4 5]      [a b] = one TP group
 *                     dp1: [2 3]         dp1: [6 7]
 *
 * Why tp fastest: tensor parallelism talks the most (two all-reduces per
 * block, forward and backward, on the critical path), so its groups should
 * be neighbours — on a real machine, GPUs on one NVLink switch.  DP talks
 * once per step, PP only to the next stage.
 *
 * The three groups come from the world communicator by ptdp_comm_split:
 *   tp group: same (dp, pp), ordered by tp rank
 *   dp group: same (tp, pp), ordered by dp rank
 *   pp group: same (tp, dp), ordered by stage
 *
 * Context parallelism (cp.h) adds a fourth axis, between tp and dp
 * (Megatron-LM's tp-cp-dp-pp order): the cp devices of one replica hold
 * different positions of the same sequences.
 *
 *     world rank = tp_rank + tp * (cp_rank + cp * (dp_rank + dp * pp_rank))
 *
 *   cp group: same (dp, tp, pp), ordered by cp rank: the attention ring
 *   dp group: with cp > 1 it is every device of the same (tp, pp), dp x cp
 *             of them ordered by dp, then cp: each holds a part of the
 *             gradient (its samples, its positions), and one all-reduce or
 *             ZeRO's reduce-scatter over this group sums them all.
 *             dp and dp_rank still count the replicas (the data split).
 *
 * Groups by name.  A parameter declares over which groups its gradient is
 * summed (model.h, ptdp_grad_sum), naming them by ptdp_group; the mesh
 * answers with the communicator (ptdp_mesh_group).  Beyond the grid's four
 * axes the mesh builds, on request, groups that cut across them, as
 * Megatron-LM's parallel_state does:
 *
 *   emb group: stage 0 and the last stage of one pipeline, same (dp, cp,
 *              tp), ordered by stage (under a V stage 0 alone: it holds
 *              both ends; under DualPipe's two copies built but summed on
 *              each end device; pp_layout) — the two copies of a tied
 *              embedding
 *
 *     pp=4 tp=1 dp=2:   stage 0   1   2   3
 *                       dp0: [0]  2   4  [6]     [0 6] one emb group
 *                       dp1: [1]  3   5  [7]     [1 7] another
 *
 *   mirror group: under DualPipe's two copies (pp_layout) stages r and p - 1 - r of one
 *              pipeline, same (dp, cp, tp), ordered by stage: each holds
 *              stage r of one copy of the model and stage p - 1 - r of the
 *              other, so every gradient is summed over it
 *
 *     pp=4 tp=1 dp=1:   stage 0   1   2   3      {0 3} {1 2}
 *
 *   tp_share group: tp_share consecutive ranks of one TP group (same dp,
 *              cp, pp), ordered by TP rank — the ranks that hold one copy
 *              of a tensor TP cannot cut finer than tp / tp_share ways
 *
 *     tp=4, tp_share 2:  tp rank 0 1 2 3     {0 1} {2 3}
 *
 *   ep group:  with expert parallelism (--ep N), N consecutive members
 *              of a DP group (in its order: dp, then cp), as Megatron-LM's
 *              tp-cp-ep-dp-pp: EP is borrowed from the data-parallel ranks
 *   edp group: the members of a DP group with the same EP rank, ordered
 *              by DP index — the replicas of one EP rank's experts
 *
 *     dp=4 ep=2 (tp=pp=1):  dp index   0   1   2   3
 *                           ep rank    0   1   0   1     ep  {0 1} {2 3}
 *                           edp rank   0   0   1   1     edp {0 2} {1 3}
 *
 *   with --etp e < tp (MoE parallel folding, moe_fold.c) the experts
 *   have their own layout over a stage's tp x cp x dp ranks, Megatron's
 *   etp-ep-edp: a TP group's tokens are cut into tp / e slices of whole
 *   sequences, slice s = tp_rank / e, and the token holder
 *   h = s + (tp / e) j  (j the DP index) is what EP and EDP then cut:
 *   etp group:  the e consecutive TP ranks of one slice (same h)
 *   fold group: the tp / e ranks of a TP group with the same tp_rank mod e
 *   ep group:   N consecutive token holders with the same tp_rank mod e
 *   edp group:  the token holders with the same EP rank and tp_rank mod e
 *
 *     tp=2 dp=2 ep=4 etp=1:  tp rank  0 1 | 0 1      ep {0 1 2 3}: EP
 *                            dp index 0 0 | 1 1      spans the TP ranks
 *                            h        0 1 | 2 3      fold {0 1} {2 3}
 *
 *   shard group:   with --shard-group N (HSDP, zero_hsdp.c), N consecutive
 *              members of a DP group (dp_rank / N the same), ordered by DP
 *              rank: ZeRO's states are cut 1/N inside it
 *   replica group: the members of a DP group with the same index inside
 *              their shard group, ordered by DP rank — the dp / N copies
 *              of one shard, whose gradients an all-reduce sums
 *
 *     dp=4 shard 2 (tp=pp=1):  dp rank       0   1   2   3
 *                              shard rank    0   1   0   1   shard   {0 1} {2 3}
 *                              replica rank  0   0   1   1   replica {0 2} {1 3}
 *
 *   qgz_node and qgz_cross groups: with --zero-qgz (ZeRO++, zero3_qgz.c), the
 *              qgz_node consecutive members of ZeRO's group (the DP group, or
 *              the shard group) in one node, ordered by DP rank, and the
 *              members with the same place d mod qgz_node in every node of
 *              it, ordered by node:
 *
 *     dp=8 qgz_node 4:  dp rank     0 1 2 3 | 4 5 6 7
 *                       qgz_node    {0 1 2 3} {4 5 6 7}
 *                       qgz_cross   {0 4} {1 5} {2 6} {3 7}
 *
 *   hpz group: with --zero-hpz (ZeRO++, zero_hpz.c), the hpz consecutive
 *              members of a DP group that sit in one node (dp_rank / hpz
 *              the same), ordered by DP rank; hpz divides the shard group
 *              (or dp), so each lies inside one shard group
 *
 * Built only when a model asks (ptdp_mesh_add_group, a split of the
 * world): a split is an exchange of (color, key) and the virtual clock
 * charges its latency, so a model without a tied embedding pays for none,
 * and a run without --ep builds no EP group.
 */
#ifndef PTDP_MESH_H
#define PTDP_MESH_H

#include <stdbool.h>

#include "comm.h"
#include "pp_layout.h"

struct ptdp_device;

/* The mesh's groups, by name: what a parameter's gradient is summed over. */
typedef enum {
    PTDP_GROUP_DP = 0,   /* dp x cp: the data-parallel replicas (dp_comm) */
    PTDP_GROUP_TP,       /* tp_comm                                       */
    PTDP_GROUP_PP,       /* pp_comm                                       */
    PTDP_GROUP_CP,       /* cp_comm                                       */
    PTDP_GROUP_EMB,      /* stage 0 and the last stage: same dp, cp, tp    */
    PTDP_GROUP_EP,       /* expert parallelism: ep consecutive DP ranks    */
    PTDP_GROUP_EDP,      /* expert data parallelism: the DP ranks of one EP
                            rank, dp x cp / ep of them                    */
    PTDP_GROUP_MIRROR,   /* DualPipe's copies: stages r and p-1-r, which
                            hold the same two model stages              */
    PTDP_GROUP_TP_SHARE, /* tp_share consecutive ranks of a TP group, which
                            hold the same copy of a tensor TP cannot
                            split further (a kv head read by tp_share
                            ranks' query heads)                        */
    PTDP_GROUP_SHARD,    /* HSDP: shard consecutive DP ranks, which cut
                            ZeRO's states between them                */
    PTDP_GROUP_REPLICA,  /* HSDP: the DP ranks with the same index in
                            their shard group, dp / shard of them      */
    PTDP_GROUP_HPZ,      /* ZeRO++'s hpZ: hpz consecutive DP ranks, the
                            ones inside one node, holding ZeRO-3's
                            secondary partition (zero_hpz.c)          */
    PTDP_GROUP_ETP,      /* MoE parallel folding: the experts' TP group,
                            etp consecutive ranks of a TP group (built
                            only when etp < tp: else the TP group)    */
    PTDP_GROUP_FOLD,     /* MoE parallel folding: the tp / etp ranks of a
                            TP group with the same experts' TP rank,
                            each routing its slice of the TP group's
                            tokens (moe_fold.c)                      */
    PTDP_GROUP_QGZ_NODE, /* ZeRO++'s qgZ: the qgz_node consecutive ranks of
                            ZeRO's group inside one node, its first
                            all-to-all (zero3_qgz.c)                  */
    PTDP_GROUP_QGZ_CROSS,/* ZeRO++'s qgZ: the ranks of ZeRO's group with the
                            same place in their node, one a node, its
                            second all-to-all (zero3_qgz.c)           */
    PTDP_GROUP_COUNT
} ptdp_group;

/* A set of groups, one bit each. */
#define PTDP_GROUP_BIT(g) (1u << (unsigned)(g))

typedef struct {
    int dp, tp, pp;                 /* group sizes                         */
    int dp_rank, tp_rank, pp_rank;  /* this device's coordinates           */
    ptdp_comm *dp_comm, *tp_comm, *pp_comm;   /* never NULL (size 1 ok)     */
    bool sp;                        /* sequence parallelism in the TP group
                                       (sp.h); false after init, set by the
                                       caller before the model is built    */
    int cp, cp_rank;                /* context parallelism (cp.h); 1 and 0
                                       without                              */
    ptdp_comm *cp_comm;             /* never NULL (size 1 ok)               */
    bool cp_zigzag;                 /* the chunks: zigzag (true after init)
                                       or contiguous                        */
    bool cp_a2a;                    /* attention: Ulysses' all-to-alls
                                       (ulysses.h), or the ring (false
                                       after init, cp.h)                   */
    int ep;                         /* expert parallelism: the EP group's
                                       size, dividing dp x cp (1 after init;
                                       set by the caller before the model) */
    int etp;                        /* MoE parallel folding (moe_fold.c):
                                       the experts' TP size, dividing tp;
                                       0 after init: tp, no folding (set by
                                       the caller before the model)        */
    ptdp_pp_layout pp_layout;       /* where each stage's model chunks lie
                                       (pp_layout.h): round a ring, as a V
                                       (stage 0 holds the first and the
                                       last), or two copies (the mirror
                                       group); a ring of one chunk after
                                       init, set by the caller before the
                                       model                               */
    int tp_share;                   /* the TP_SHARE groups' size, dividing
                                       tp (1 after init; set from the model,
                                       model.h, before it is built)        */
    ptdp_comm *extra[PTDP_GROUP_COUNT];   /* groups beyond the four axes, by
                                       id, once built (ptdp_mesh_add_group);
                                       NULL: not built, or not a member    */
    unsigned extra_built;           /* PTDP_GROUP_BIT of each one built    */
    int shard;                      /* HSDP (zero_hsdp.c): the shard
                                       groups' size, dividing dp; 0 after
                                       init: no shard groups (ZeRO over the
                                       whole DP group); set by the caller
                                       before asking for the groups        */
    int hpz;                        /* ZeRO++'s hpZ (zero_hpz.c): the DP
                                       ranks a node holds, dividing the
                                       shard group (or dp); 0 after init:
                                       off; set by the caller before ZeRO  */
    int qwz;                        /* ZeRO++'s qwZ (zero3_qwz.c): the
                                       forward gathers' INT8 block B; 0
                                       after init: off; set before ZeRO    */
    int qwz_ranks;                  /* bf16's --check device of a qwZ run:
                                       the ZeRO group's N (zero.h)         */
    int qgz_bits;                   /* ZeRO++'s qgZ (zero3_qgz.c): the
                                       gradient codes' bits, 4 or 8; 0 after
                                       init: off; set before ZeRO          */
    int qgz_block;                  /* ... its blocks of B elements        */
    int qgz_node;                   /* ... the ranks of ZeRO's group in one
                                       node, dividing it                   */
} ptdp_mesh;

/* The world rank of grid coordinates (tp fastest, then dp, then pp). */
int ptdp_mesh_world_rank(int dp, int tp, int pp, int dp_rank, int tp_rank, int pp_rank);
/* Coordinates of a world rank. */
void ptdp_mesh_coords(int dp, int tp, int pp, int world_rank, int *dp_rank, int *tp_rank, int *pp_rank);

/* Collective over dev->world: build this device's groups.  The world size
 * must equal dp * tp * pp (PTDP_EINVAL otherwise, with a message). */
int  ptdp_mesh_init(struct ptdp_device *dev, int dp, int tp, int pp, ptdp_mesh *m);
/* The same with a cp axis: world = dp * cp * tp * pp. */
int  ptdp_mesh_init_cp(struct ptdp_device *dev, int dp, int cp, int tp, int pp, ptdp_mesh *m);
/* Coordinates of a world rank on a dp x cp x tp x pp grid. */
void ptdp_mesh_coords_cp(int dp, int cp, int tp, int pp, int world_rank, int *dp_rank, int *cp_rank,
                         int *tp_rank, int *pp_rank);
void ptdp_mesh_free(ptdp_mesh *m);

/* The communicator of group g on this device: one of the four axes, or a
 * group built by ptdp_mesh_add_group (NULL where this device is not in
 * one, or before it is built). */
ptdp_comm *ptdp_mesh_group(const ptdp_mesh *m, ptdp_group g);
/* Collective over dev->world: build group g beyond the four axes
 * (PTDP_GROUP_EMB, none with pp 1; PTDP_GROUP_EP and PTDP_GROUP_EDP, none
 * with ep 1, where the DP group is both; PTDP_GROUP_SHARD and
 * PTDP_GROUP_REPLICA from m->shard, which must divide dp, with cp 1;
 * PTDP_GROUP_HPZ from m->hpz, which must divide it, or dp, with cp 1).  A group built
 * already is kept, so every device must ask for the same groups in the
 * same order.  The mesh frees it. */
int  ptdp_mesh_add_group(struct ptdp_device *dev, ptdp_mesh *m, ptdp_group g);

#endif
