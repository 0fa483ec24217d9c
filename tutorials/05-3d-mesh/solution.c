/*
 * solution.c — lesson 05: the three groups of a dp x tp x pp mesh.
 *
 * The answer to exercise.c (try that first).  src/parallel/mesh.c is the library's
 * own version.
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
 * and the devices that pass the same color form one group, ranked by key.
 * So a group's color must be equal on its members and differ from every
 * other group's: a number made of the two coordinates that stay fixed
 * along the group, one-to-one (a two-digit number in mixed radix).  Its key
 * is the coordinate that runs along it, so that rank in the group = that
 * coordinate.  (With this layout the world rank already grows along every
 * axis, so ties broken by world rank would give the same order here; the
 * key says what is meant instead of relying on it, and the check proves it
 * by running again with the world's ranks numbered backwards.)
 */
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

    /* TP: the devices with my dp and pp coordinates, in tp order. */
    color = m->dp_rank + dp * m->pp_rank;
    key = m->tp_rank;
    if ((rc = ptdp_comm_split(dev->world, color, key, "tp", &m->tp_comm)) != 0)
        goto fail;

    /* DP: the devices with my tp and pp coordinates, in dp order. */
    color = m->tp_rank + tp * m->pp_rank;
    key = m->dp_rank;
    if ((rc = ptdp_comm_split(dev->world, color, key, "dp", &m->dp_comm)) != 0)
        goto fail;

    /* PP: the devices with my tp and dp coordinates, in stage order. */
    color = m->tp_rank + tp * m->dp_rank;
    key = m->pp_rank;
    if ((rc = ptdp_comm_split(dev->world, color, key, "pp", &m->pp_comm)) != 0)
        goto fail;
    return PTDP_OK;
fail:
    ptdp_mesh_free(m);
    return rc;
}
