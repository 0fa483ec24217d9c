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
 */
#ifndef PTDP_MESH_H
#define PTDP_MESH_H

#include <stdbool.h>

#include "comm.h"

struct ptdp_device;

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

#endif
