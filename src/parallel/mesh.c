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
 *
 * and, asked for by a model, more: the embedding group
 *
 *   emb group color = (dp_rank, cp_rank, tp_rank) on stage 0 and the last
 *             stage, none on the others              key = pp_rank
 *
 * the TP sub-groups of tp_share consecutive TP ranks
 *
 *   tp_share group color = (dp_rank, cp_rank, pp_rank, tp_rank / tp_share)
 *                                                    key = tp_rank
 *
 * and, with --ep N, the expert groups (j = cp_rank + cp dp_rank, the DP
 * index):
 *
 *   ep group  color = (tp_rank, pp_rank, j / N)      key = j mod N
 *   edp group color = (tp_rank, pp_rank, j mod N)    key = j / N
 *
 * and, with --shard-group N (HSDP), the same cut of the DP group by DP rank:
 *
 *   shard group   color = (tp_rank, pp_rank, dp_rank / N)  key = dp_rank mod N
 *   replica group color = (tp_rank, pp_rank, dp_rank mod N) key = dp_rank / N
 *
 * (under MoE parallel folding, --etp below tp, all four groups cut a
 * stage's tp x cp x dp ranks instead: split_folded, mesh.h's picture)
 * and, with --zero-hpz (ZeRO++'s hpZ), the DP ranks of one node, k of them:
 *
 *   hpz group     color = (tp_rank, pp_rank, dp_rank / k)  key = dp_rank mod k
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
    *m = (ptdp_mesh){ .dp = dp, .tp = tp, .pp = pp, .cp = cp, .cp_zigzag = true, .ep = 1, .tp_share = 1,
                      .pp_layout = ptdp_pp_layout_make(PTDP_CHUNKS_RING, pp, 1) };
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

ptdp_comm *ptdp_mesh_group(const ptdp_mesh *m, ptdp_group g)
{
    switch (g) {
    case PTDP_GROUP_DP: return m->dp_comm;
    case PTDP_GROUP_TP: return m->tp_comm;
    case PTDP_GROUP_PP: return m->pp_comm;
    case PTDP_GROUP_CP: return m->cp_comm;
    default: return g >= 0 && g < PTDP_GROUP_COUNT ? m->extra[g] : NULL;
    }
}

/* The embedding group: the stages that hold the model's first chunk and
 * its last (pp_layout), whose two copies of a tied embedding are summed in
 * it.  Every device takes part in the split, the middle stages with no
 * color.  Round a ring: stage 0 and the last stage.  Under a V stage 0
 * holds both ends: a group of one, the two copies summed on the device
 * (ptdp_model_sum_groups).  Under DualPipe's two copies each end holds
 * both ends of one copy or the other, and after the mirror group's sums
 * the copies are added on each device: the group is built as usual and
 * left unused (ptdp_model_sum_groups). */
static int split_embedding(ptdp_device *dev, ptdp_mesh *m)
{
    if (m->pp == 1)
        return PTDP_OK;
    const ptdp_pp_layout *l = &m->pp_layout;
    const bool member = ptdp_pp_layout_holds_first(l, m->pp_rank) || ptdp_pp_layout_holds_last(l, m->pp_rank);
    const int cp = m->cp > 0 ? m->cp : 1;
    const int color = member ? (m->dp_rank * cp + m->cp_rank) * m->tp + m->tp_rank : -1;
    return ptdp_comm_split(dev->world, color, m->pp_rank, "emb", &m->extra[PTDP_GROUP_EMB]);
}

/* DualPipe's mirror group: stages r and p - 1 - r of one pipeline (same
 * dp, cp, tp), which hold the same two model stages, one of each copy. */
static int split_mirror(ptdp_device *dev, ptdp_mesh *m)
{
    const int cp = m->cp > 0 ? m->cp : 1, p = m->pp;
    const int pair = m->pp_rank < p - 1 - m->pp_rank ? m->pp_rank : p - 1 - m->pp_rank;
    const int color = ((m->dp_rank * cp + m->cp_rank) * m->tp + m->tp_rank) * ((p + 1) / 2) + pair;
    return ptdp_comm_split(dev->world, color, m->pp_rank, "mirror", &m->extra[PTDP_GROUP_MIRROR]);
}

/* MoE parallel folding's groups (etp < tp): token holder h = s + S j,
 * slice s = tp_rank / etp of S = tp / etp, DP index j = cp_rank + cp
 * dp_rank; e = tp_rank mod etp.  EP rank h mod ep of EP group h / ep, EDP
 * rank h / ep of EDP group h mod ep, each within its (e, pp); ETP rank e
 * of the ETP group h; fold rank s of the fold group (j, e), within pp. */
static int split_folded(ptdp_device *dev, ptdp_mesh *m, ptdp_group g)
{
    const int cp = m->cp > 0 ? m->cp : 1, E = m->etp, S = m->tp / E, N = m->ep > 1 ? m->ep : 1;
    const int j = m->cp_rank + cp * m->dp_rank, s = m->tp_rank / E, e = m->tp_rank % E, h = s + S * j;
    const int holders = S * m->dp * cp;   /* token holders of a stage, per experts' TP rank */
    if (m->tp % E != 0 || holders % N != 0)
        return ptdp_fail(dev, PTDP_EINVAL, "--etp %d x --ep %d must divide tp x cp x dp = %d, with --etp "
                         "dividing --tp %d", E, N, m->tp * cp * m->dp, m->tp);
    const int across = e + E * m->pp_rank;
    switch (g) {
    case PTDP_GROUP_EP:
        return N > 1 ? ptdp_comm_split(dev->world, h / N + holders / N * across, h % N, "ep", &m->extra[g])
                     : PTDP_OK;
    case PTDP_GROUP_EDP: return ptdp_comm_split(dev->world, h % N + N * across, h / N, "edp", &m->extra[g]);
    case PTDP_GROUP_ETP:
        return ptdp_comm_split(dev->world, h + holders * m->pp_rank, e, "etp", &m->extra[g]);
    default:
        return ptdp_comm_split(dev->world, j + m->dp * cp * across, s, "fold", &m->extra[g]);
    }
}

/* Expert parallelism's two groups, cut from the DP group: DP index j =
 * cp_rank + cp dp_rank (the DP group's order) is EP rank j mod ep of the
 * EP group j / ep, and EDP rank j / ep of the EDP group j mod ep.  Every
 * device is in one of each, within its (tp, pp). */
static int split_experts(ptdp_device *dev, ptdp_mesh *m, ptdp_group g)
{
    const int cp = m->cp > 0 ? m->cp : 1, N = m->ep, j = m->cp_rank + cp * m->dp_rank;
    if (m->etp > 0 && m->etp < m->tp)
        return split_folded(dev, m, g);
    if (N <= 1 || g == PTDP_GROUP_ETP || g == PTDP_GROUP_FOLD)
        return PTDP_OK;
    if ((m->dp * cp) % N != 0)
        return ptdp_fail(dev, PTDP_EINVAL, "--ep %d must divide dp x cp = %d", N, m->dp * cp);
    const int across = m->tp_rank + m->tp * m->pp_rank, groups = m->dp * cp / N;
    if (g == PTDP_GROUP_EP)
        return ptdp_comm_split(dev->world, j / N + groups * across, j % N, "ep", &m->extra[g]);
    return ptdp_comm_split(dev->world, j % N + N * across, j / N, "edp", &m->extra[g]);
}

/* TP_SHARE: TP ranks t with the same t / tp_share, within one TP group. */
static int split_tp_share(ptdp_device *dev, ptdp_mesh *m)
{
    const int cp = m->cp > 0 ? m->cp : 1, s = m->tp_share > 0 ? m->tp_share : 1;
    if (m->tp % s != 0)
        return ptdp_fail(dev, PTDP_EINVAL, "a TP sub-group of %d must divide --tp %d", s, m->tp);
    const int tp_group = (m->pp_rank * m->dp + m->dp_rank) * cp + m->cp_rank;
    return ptdp_comm_split(dev->world, tp_group * (m->tp / s) + m->tp_rank / s, m->tp_rank, "tp_share",
                           &m->extra[PTDP_GROUP_TP_SHARE]);
}

/* HSDP's two groups: DP rank d is rank d mod N of shard group d / N and
 * rank d / N of replica group d mod N, within its (tp, pp). */
static int split_hsdp(ptdp_device *dev, ptdp_mesh *m, ptdp_group g)
{
    const int N = m->shard, d = m->dp_rank;
    if (N < 1 || m->dp % N != 0 || m->cp > 1)
        return ptdp_fail(dev, PTDP_EINVAL, "shard groups of %d: need a size dividing dp = %d, and cp 1 (cp = %d)",
                         N, m->dp, m->cp);
    const int across = m->tp_rank + m->tp * m->pp_rank, groups = m->dp / N;
    if (g == PTDP_GROUP_SHARD)
        return ptdp_comm_split(dev->world, d / N + groups * across, d % N, "shard", &m->extra[g]);
    return ptdp_comm_split(dev->world, d % N + N * across, d / N, "replica", &m->extra[g]);
}

/* hpZ's node groups: DP rank d is rank d mod k of node group d / k, within
 * its (tp, pp).  k divides the shard group (or dp), so a node group lies
 * inside one shard group. */
static int split_hpz(ptdp_device *dev, ptdp_mesh *m)
{
    const int k = m->hpz, d = m->dp_rank, N = m->shard > 0 ? m->shard : m->dp;
    if (k < 1 || N % k != 0 || m->dp % k != 0 || m->cp > 1)
        return ptdp_fail(dev, PTDP_EINVAL, "hpZ's node groups of %d: need a size dividing the shard group %d "
                         "and dp = %d, and cp 1 (cp = %d)", k, N, m->dp, m->cp);
    const int across = m->tp_rank + m->tp * m->pp_rank, groups = m->dp / k;
    return ptdp_comm_split(dev->world, d / k + groups * across, d % k, "hpz", &m->extra[PTDP_GROUP_HPZ]);
}

/* qgZ's two groups inside ZeRO's group of N (the shard group, or dp):
 * DP rank d has place d mod k in node (d mod N) / k of ZeRO group d / N. */
static int split_qgz(ptdp_device *dev, ptdp_mesh *m, ptdp_group g)
{
    const int k = m->qgz_node, d = m->dp_rank, N = m->shard > 0 ? m->shard : m->dp;
    if (k < 1 || N % k != 0 || m->dp % N != 0 || m->cp > 1)
        return ptdp_fail(dev, PTDP_EINVAL, "qgZ's node groups of %d: need a size dividing ZeRO's group %d "
                         "and dp = %d, and cp 1 (cp = %d)", k, N, m->dp, m->cp);
    const int across = m->tp_rank + m->tp * m->pp_rank;
    if (g == PTDP_GROUP_QGZ_NODE)
        return ptdp_comm_split(dev->world, d / k + m->dp / k * across, d % k, "qgz_node", &m->extra[g]);
    const int color = (d / N) * k + d % k;   /* ZeRO's group, then my place in my node */
    return ptdp_comm_split(dev->world, color + m->dp / (N / k) * across, (d % N) / k, "qgz_cross", &m->extra[g]);
}

int ptdp_mesh_add_group(ptdp_device *dev, ptdp_mesh *m, ptdp_group g)
{
    if (g < PTDP_GROUP_EMB || g >= PTDP_GROUP_COUNT)
        return g >= 0 && g < PTDP_GROUP_EMB ? PTDP_OK   /* the four axes exist */
               : ptdp_fail(dev, PTDP_EINVAL, "the mesh has no group %d to build", (int)g);
    if (m->extra[g] != NULL || m->extra_built & PTDP_GROUP_BIT(g))
        return PTDP_OK;
    m->extra_built |= PTDP_GROUP_BIT(g);
    switch (g) {
    case PTDP_GROUP_MIRROR: return split_mirror(dev, m);
    case PTDP_GROUP_EMB: return split_embedding(dev, m);
    case PTDP_GROUP_TP_SHARE: return split_tp_share(dev, m);
    case PTDP_GROUP_SHARD:
    case PTDP_GROUP_REPLICA: return split_hsdp(dev, m, g);
    case PTDP_GROUP_HPZ: return split_hpz(dev, m);
    case PTDP_GROUP_QGZ_NODE:
    case PTDP_GROUP_QGZ_CROSS: return split_qgz(dev, m, g);
    default: return split_experts(dev, m, g);
    }
}

void ptdp_mesh_free(ptdp_mesh *m)
{
    for (int g = 0; g < PTDP_GROUP_COUNT; g++) {
        ptdp_comm_free(m->extra[g]);
        m->extra[g] = NULL;
    }
    m->extra_built = 0;
    ptdp_comm_free(m->tp_comm);
    ptdp_comm_free(m->dp_comm);
    ptdp_comm_free(m->pp_comm);
    ptdp_comm_free(m->cp_comm);
    m->tp_comm = m->dp_comm = m->pp_comm = m->cp_comm = NULL;
}
