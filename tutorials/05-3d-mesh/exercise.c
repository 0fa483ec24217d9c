/*
 * exercise.c — lesson 05: the three groups of a dp x tp x pp mesh.
 *
 * Replace each PTDP_BLANK(...) line with your code, then run the check:
 *     meson setup build-student -Dexercises=student      (once)
 *     meson test -C build-student --suite tutorial-05 -v
 * README.md explains the idea; solution.c is the answer (try first).
 *
 * World = dp * tp * pp devices, laid out as in Megatron-LM, tp fastest:
 *
 *     world rank = tp_rank + tp * (dp_rank + dp * pp_rank)
 *
 *   dp = 2, tp = 2, pp = 2        stage 0     stage 1
 *                         dp 0    [0  1]      [4  5]      [a b] = a TP group
 *                         dp 1    [2  3]      [6  7]
 *
 *   TP groups  {0,1} {2,3} {4,5} {6,7}   same dp and pp, in tp order
 *   DP groups  {0,2} {1,3} {4,6} {5,7}   same tp and pp, in dp order
 *   PP groups  {0,4} {1,5} {2,6} {3,7}   same tp and dp, in stage order
 *
 * Every device is in exactly one group of each kind.  ptdp_comm_split
 * (comm.h, as MPI_Comm_split) builds them all at once: every device calls
 *
 *     ptdp_comm_split(world, color, key, name, &group)
 *
 * and the devices that pass the same color form one group, ranked by key
 * (ties broken by rank in dev->world: do not count on them; the check
 * also runs with a world numbered backwards).  So for each kind of group, ask:
 *   - which coordinates are the same on all its members, and how do you
 *     turn them into ONE number that no other group shares?
 *   - which coordinate runs along the group, and should be its rank?
 */
#include "blank.h"
#include "lesson.h"

#include "ptdp/error.h"
#include "ptdp/comm.h"

int lesson_mesh_create(ptdp_device *dev, int dp, int tp, int pp, ptdp_mesh *m)
{
    *m = (ptdp_mesh){ .dp = dp, .tp = tp, .pp = pp };
    if (dp < 1 || tp < 1 || pp < 1 || dp * tp * pp != dev->world_size)
        return ptdp_fail(dev, PTDP_EINVAL, "mesh dp=%d x tp=%d x pp=%d needs %d devices, the world has %d",
                         dp, tp, pp, dp * tp * pp, dev->world_size);
    /* My coordinates in the grid. */
    ptdp_mesh_coords(dp, tp, pp, dev->rank, &m->dp_rank, &m->tp_rank, &m->pp_rank);
    int color, key, rc;

    /* Blank 1: my TP group is the tp devices with my dp and pp
     * coordinates; my rank in it must be my tp_rank. */
    PTDP_BLANK(1, "set color and key of my TP group");
    if ((rc = ptdp_comm_split(dev->world, color, key, "tp", &m->tp_comm)) != 0)
        goto fail;

    /* Blank 2: my DP group is the dp devices with my tp and pp
     * coordinates — the replicas of my shard of my stage; my rank in it
     * must be my dp_rank. */
    PTDP_BLANK(2, "set color and key of my DP group");
    if ((rc = ptdp_comm_split(dev->world, color, key, "dp", &m->dp_comm)) != 0)
        goto fail;

    /* Blank 3: my pipeline is the pp devices with my tp and dp
     * coordinates, one per stage; my rank in it must be my stage,
     * pp_rank. */
    PTDP_BLANK(3, "set color and key of my PP group");
    if ((rc = ptdp_comm_split(dev->world, color, key, "pp", &m->pp_comm)) != 0)
        goto fail;
    return PTDP_OK;
fail:
    ptdp_mesh_free(m);
    return rc;
}
