/*
 * shard_price.c — what ZeRO-3's three collectives cost a unit on a cluster
 * of two link levels, for full sharding and for the options that move its
 * bytes off the slow links: HSDP (zero_hsdp.c), ZeRO++'s hpZ (zero_hpz.c),
 * qwZ (zero3_qwz.c) and qgZ (quantized gradients, priced from the paper
 * until it runs).  The planner (plan_time.c) walks its units with these
 * prices and sums their bytes by link level; the comparison (`ptdp plan
 * --compare-zero`) prints them side by side.
 *
 * A unit of n elements, S = n x store bytes (2 in bf16), over ZeRO's group
 * of N ranks (the DP group, or HSDP's shard group), k of them in one node,
 * R = dp / N replicas of each shard; a device sends, for each micro-batch:
 *
 *   collective        ZeRO-3         + HSDP          + hpZ          + qwZ            + qgZ
 *   forward gather    (N-1)/N S      N ranks         -              (N-1)/N W_q      -
 *   backward gather   (N-1)/N S      N ranks         (k-1)/k S      -                -
 *                                                    in the node
 *   gradient sum      (N-1)/N S      N ranks         -              -                (k-1)/k Q(n)   in the node,
 *                     reduce-scatter                                                 (m-1)/m Q(n/k) across
 *   replicas, once a step            2(R-1)/R S/N
 *
 *   W_q  = N (ceil(n/N) + ceil(ceil(n/N)/B) R_s)   INT8 codes and a float scale (R_s bytes) a
 *          block of B, each rank's wire padded to the largest (zero3_qwz.c)
 *   Q(x) = ceil(x b / 8) + ceil(x / B_g) 4          b-bit codes (4 or 8) and a float scale a
 *          block of B_g: qgZ's formula (ptdp_qgz_price_bytes, the one place)
 *   m    = N / k nodes; qgZ's second all-to-all runs over the m ranks of
 *          the same place in each node, each on its own NIC
 *
 *       node 0 (k = 4)             node 1
 *     g0  g1  g2  g3   │   g4  g5  g6  g7        forward gather:   ◄──── all N ────►
 *     └──────────┘     │   └──────────┘          hpZ's backward:   ◄ k ►  ◄ k ►
 *      a2a, reduce     │    a2a, reduce          qgZ:  a2a in each node, then
 *     g0 ◄──────────────────► g4                       g_i ◄─► g_{i+k} across
 *
 * Link levels.  A group is inside one node or it spans several; the clock
 * prices a spanning group's every ring step on its slowest hop, the one
 * that leaves the node (clock.c), so all the bytes of a group that spans
 * nodes are counted "cross-node" (ptdp train's report counts them so:
 * run.hpz_bytes_per_step.across_nodes), and a group inside a node's
 * "intra-node".  The ZeRO++ paper counts volume per node (M, the model's
 * bytes, leaves a node once for each ring collective; qgZ's second hop
 * sends M/(Z k) a GPU, k GPUs a node: M/Z a node): ptdp_shard_price_unit's
 * bytes are a device's, and docs/plan.md converts.
 *
 * Time: each collective by the clock's cost model on its group (alpha +
 * bytes/beta a ring step); qgZ as two all-to-alls, its quantization
 * kernels not priced (the paper fuses them with the reduction).
 */
#include <math.h>

#include "parallel/price_impl.h"

/* ------------------------------------------------------------ the groups */

void ptdp_shard_price_groups(ptdp_shard_options *o, const ptdp_profile *p, int ndp, int tp, int shard_group,
                             bool node_groups)
{
    const int N = shard_group > 0 && shard_group < ndp ? shard_group : ndp;
    o->zero = ptdp_price_group_of(p, N, tp);
    o->replica = ptdp_price_group_of(p, ndp / N, N * tp);
    /* the ranks of ZeRO's group in one node: what hpZ and qgZ's first hop use */
    int k = p->gpus_per_node > 0 && p->gpus_per_node % tp == 0 ? p->gpus_per_node / tp : 1;
    if (!node_groups || k < 2 || k >= N || N % k != 0)
        k = 1;
    o->node = ptdp_price_group_of(p, k, tp);
    const int kd = p->gpus_per_node > 0 && p->gpus_per_node % tp == 0 ? p->gpus_per_node / tp : 1;
    o->kd = kd < ndp ? kd : ndp;
    o->across = ptdp_price_group_of(p, N / k, k * tp);
}

/* ------------------------------------------------------------ the bytes */

ptdp_price_link ptdp_shard_price_link(const ptdp_price_group *g, ptdp_coll op, double bytes, int kd)
{
    ptdp_price_link l = { 0 };
    if (g->n < 2)
        return l;
    const double sent = (op == PTDP_COLL_ALL_REDUCE ? 2.0 : 1.0) * (g->n - 1) / g->n * bytes;
    const double c = (double)g->n / g->nodes;   /* members a node */
    if (g->nodes > 1) {
        l.cross = sent;
        l.node = (kd > c ? kd / c : 1) * sent;
    } else {
        l.intra = sent;
    }
    l.s = ptdp_price_collective(g, op, bytes);
    return l;
}

double ptdp_qwz_price_wire(double n, int N, int block)
{
    const double len = ceil(n / N);
    return N * (len + ceil(len / block) * (double)sizeof(ptdp_real));
}

/* qgZ's wire, the one formula to check against the run when it lands:
 * x gradient elements as b-bit codes, ceil(x b / 8) bytes, and one float
 * scale (4 bytes) a block of `block` elements. */
double ptdp_qgz_price_bytes(double x, int bits, int block)
{
    return ceil(x * bits / 8.0) + ceil(x / block) * 4.0;
}

ptdp_shard_unit ptdp_shard_price_unit(const ptdp_shard_options *o, double n)
{
    const ptdp_coll AG = PTDP_COLL_ALL_GATHER, A2A = PTDP_COLL_ALL_TO_ALL;
    const double S = n * o->store;
    const int N = o->zero.n, k = o->node.n;
    ptdp_shard_unit u = { 0 };
    u.gather_f = ptdp_shard_price_link(&o->zero, AG, o->qwz_block > 0 ? ptdp_qwz_price_wire(n, N, o->qwz_block) : S,
                                       o->kd);
    u.gather_b = ptdp_shard_price_link(o->hpz && k > 1 ? &o->node : &o->zero, AG, S, o->kd);
    if (o->qgz_bits > 0 && k > 1) {   /* two hops: in the node, then across */
        const ptdp_price_link in = ptdp_shard_price_link(&o->node, A2A, ptdp_qgz_price_bytes(n, o->qgz_bits,
                                                                                              o->qgz_block), o->kd);
        const ptdp_price_link out = ptdp_shard_price_link(&o->across, A2A, ptdp_qgz_price_bytes(n / k, o->qgz_bits,
                                                                                                 o->qgz_block), o->kd);
        u.reduce = (ptdp_price_link){ .intra = in.intra + out.intra, .cross = in.cross + out.cross,
                                      .s = in.s + out.s, .node = in.node + out.node };
    } else if (o->qgz_bits > 0) {   /* ZeRO's group in one node, or a rank a node: one all-to-all */
        u.reduce = ptdp_shard_price_link(&o->zero, A2A, ptdp_qgz_price_bytes(n, o->qgz_bits, o->qgz_block), o->kd);
    } else {
        u.reduce = ptdp_shard_price_link(&o->zero, PTDP_COLL_REDUCE_SCATTER, S, o->kd);
    }
    return u;
}

ptdp_price_link ptdp_shard_price_replicas(const ptdp_shard_options *o, double shard)
{
    return ptdp_shard_price_link(&o->replica, PTDP_COLL_ALL_REDUCE, shard * o->store, o->kd);
}
