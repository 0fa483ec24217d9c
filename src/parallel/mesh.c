/*
 * mesh.c — build the DP, TP and PP groups of one dp x tp x pp grid.
 *
 * Every device calls ptdp_comm_split three times on the world communicator,
 * once per kind of group.  The color says which group a device joins (all
 * devices that share the other two coordinates), the key its rank inside it:
 *
 *   tp group  color = (dp_rank, pp_rank)   key = tp_rank
 *   dp group  color = (tp_rank, pp_rank)   key = dp_rank
 *   pp group  color = (tp_rank, dp_rank)   key = pp_rank
 */
#include "ptdp/mesh.h"

#include "ptdp/device.h"
#include "ptdp/error.h"

int ptdp_mesh_world_rank(int dp, int tp, int pp, int dp_rank, int tp_rank, int pp_rank)
{
    (void)pp;
    return tp_rank + tp * (dp_rank + dp * pp_rank);
}

void ptdp_mesh_coords(int dp, int tp, int pp, int world_rank, int *dp_rank, int *tp_rank, int *pp_rank)
{
    (void)pp;
    *tp_rank = world_rank % tp;
    *dp_rank = (world_rank / tp) % dp;
    *pp_rank = world_rank / (tp * dp);
}

void ptdp_mesh_coords_cp(int dp, int cp, int tp, int pp, int world_rank, int *dp_rank, int *cp_rank,
                         int *tp_rank, int *pp_rank)
{
    (void)pp;
    *tp_rank = world_rank % tp;
    *cp_rank = (world_rank / tp) % cp;
    *dp_rank = (world_rank / (tp * cp)) % dp;
    *pp_rank = world_rank / (tp * cp * dp);
}

int ptdp_mesh_init(ptdp_device *dev, int dp, int tp, int pp, ptdp_mesh *m)
{
    return ptdp_mesh_init_cp(dev, dp, 1, tp, pp, m);
}

/* With cp = 1 this is the dp x tp x pp grid above, group for group. */
int ptdp_mesh_init_cp(ptdp_device *dev, int dp, int cp, int tp, int pp, ptdp_mesh *m)
{
    *m = (ptdp_mesh){ .dp = dp, .tp = tp, .pp = pp, .cp = cp, .cp_zigzag = true };
    if (dp < 1 || cp < 1 || tp < 1 || pp < 1 || dp * cp * tp * pp != dev->world_size)
        return ptdp_fail(dev, PTDP_EINVAL, "mesh dp=%d x cp=%d x tp=%d x pp=%d needs %d devices, the world has %d",
                         dp, cp, tp, pp, dp * cp * tp * pp, dev->world_size);
    ptdp_mesh_coords_cp(dp, cp, tp, pp, dev->rank, &m->dp_rank, &m->cp_rank, &m->tp_rank, &m->pp_rank);
    const int replica = m->cp_rank + cp * m->dp_rank;   /* dp then cp: the gradient group's order */

    int rc = ptdp_comm_split(dev->world, replica + dp * cp * m->pp_rank, m->tp_rank, "tp", &m->tp_comm);
    if (rc == 0)
        rc = ptdp_comm_split(dev->world, m->tp_rank + tp * m->pp_rank, replica, "dp", &m->dp_comm);
    if (rc == 0)
        rc = ptdp_comm_split(dev->world, m->tp_rank + tp * replica, m->pp_rank, "pp", &m->pp_comm);
    if (rc == 0)
        rc = ptdp_comm_split(dev->world, m->tp_rank + tp * (m->dp_rank + dp * m->pp_rank), m->cp_rank, "cp",
                             &m->cp_comm);
    if (rc != 0)
        ptdp_mesh_free(m);
    return rc;
}

void ptdp_mesh_free(ptdp_mesh *m)
{
    ptdp_comm_free(m->tp_comm);
    ptdp_comm_free(m->dp_comm);
    ptdp_comm_free(m->pp_comm);
    ptdp_comm_free(m->cp_comm);
    m->tp_comm = m->dp_comm = m->pp_comm = m->cp_comm = NULL;
}
