/*
 * mesh_price.c — a layout's groups as the cost model sees them: how many
 * devices each holds and how many nodes they span, from the world rank
 * mesh.c gives every device (price_impl.h).
 *
 *   world rank = tp_rank + tp (cp_rank + cp (dp_rank + dp pp_rank))
 *
 *   tp group    tp consecutive ranks                     stride 1
 *   cp group    cp ranks, tp apart                        stride tp
 *   dp group    the dp x cp ranks of one stage with one   stride tp
 *               tp_rank (ZeRO's and DP's sums)
 *   ep group    ep consecutive members of the dp group    stride tp
 *   edp group   every ep-th member of it: an expert's     stride tp ep
 *               copies (dp cp / ep of them)
 *
 * and under MoE parallel folding (etp below tp, mesh.h) the etp group of
 * etp consecutive ranks, the fold group of a TP group's tp/etp slices
 * (stride etp), and EP and expert DP over the slices, token holder h at
 * world rank (h mod S) etp + tp (h div S).
 *
 * Measured from rank 0's group: a node holds gpus_per_node consecutive
 * ranks, so a group of tp <= gpus_per_node stays inside one node and a
 * strided one crosses the network when its ranks do (clock.h prices a
 * collective over `nodes` nodes).
 */
#include "parallel/price_impl.h"

/* Nodes a group of n members `stride` ranks apart spans, from rank 0. */
static int span(const ptdp_profile *p, int n, int stride)
{
    if (p->gpus_per_node <= 0 || n <= 1)
        return 1;
    int first = ptdp_profile_node(p, 0), last = ptdp_profile_node(p, (n - 1) * stride);
    return last - first + 1 < n ? last - first + 1 : n;
}

ptdp_price_group ptdp_price_group_of(const ptdp_profile *p, int n, int stride)
{
    return (ptdp_price_group){ .profile = p, .n = n, .nodes = span(p, n, stride) };
}

/* Under folding a group of n token holders h (mesh.h: slice s = h mod S
 * at world rank s etp, replica h div S at tp x it), `step` holders
 * apart, from rank 0: the nodes from its first rank to its last. */
static ptdp_price_group holders(const ptdp_price_mesh *m, int n, int step)
{
    const int h = (n - 1) * step, last = (h % m->slices) * m->etp + m->tp * (h / m->slices);
    const ptdp_profile *p = m->p;
    int nodes = 1;
    if (p->gpus_per_node > 0 && n > 1) {
        nodes = ptdp_profile_node(p, last) - ptdp_profile_node(p, 0) + 1;
        nodes = nodes < n ? nodes : n;
    }
    return (ptdp_price_group){ .profile = p, .n = n, .nodes = nodes };
}

void ptdp_price_mesh_of(ptdp_price_mesh *m, const ptdp_profile *p, int dp, int tp, int pp, int cp, int ep, int etp)
{
    m->p = p;
    m->dp = dp;
    m->tp = tp;
    m->pp = pp;
    m->cp = cp > 1 ? cp : 1;
    m->ndp = m->dp * m->cp;
    m->ep = ep > 1 ? ep : 1;
    m->nedp = m->ndp / m->ep > 0 ? m->ndp / m->ep : 1;
    m->tp_group = ptdp_price_group_of(p, m->tp, 1);
    m->cp_group = ptdp_price_group_of(p, m->cp, m->tp);
    m->dp_group = ptdp_price_group_of(p, m->ndp, m->tp);
    m->ep_group = ptdp_price_group_of(p, m->ep, m->tp);
    m->edp_group = ptdp_price_group_of(p, m->nedp, m->tp * m->ep);
    m->etp = etp > 0 && etp < tp ? etp : tp;
    m->slices = tp / m->etp;
    m->etp_group = m->tp_group;
    m->fold_group = ptdp_price_group_of(p, 1, 1);
    if (m->slices > 1) {   /* MoE parallel folding: EP and expert DP cut the slices (mesh.h) */
        m->nedp = m->slices * m->ndp / m->ep;
        m->etp_group = ptdp_price_group_of(p, m->etp, 1);
        m->fold_group = ptdp_price_group_of(p, m->slices, m->etp);
        m->ep_group = holders(m, m->ep, 1);
        m->edp_group = holders(m, m->nedp, m->ep);
    }
}

int ptdp_price_mesh_stage_rank(const ptdp_price_mesh *m, int stage)
{
    return m->tp * (m->cp * (m->dp * stage));
}
