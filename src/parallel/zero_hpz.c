/*
 * zero_hpz.c — ZeRO++'s hpZ (Wang et al. 2023, arXiv 2306.10209): a
 * secondary partition of ZeRO-3's parameters inside each node, so that the
 * backward's gather of a unit never leaves the node.
 *
 * ZeRO-3 (zero3.c) gathers every unit twice a micro-batch over its whole
 * group of N ranks — before the forward and again before the backward —
 * and reduce-scatters its gradient once.  When the group spans nodes, all
 * three cross the slow links: 3M(N-1)/N S bytes a device and step, S its
 * parameters' bytes, M the micro-batches.  hpZ notices that after the
 * forward's gather every device of a node holds the whole unit, so each
 * can keep 1/k of it (k = the group's ranks inside one node), and the
 * backward's gather reads those k pieces inside the node instead of the N
 * primary shards across nodes:
 *
 *   N = 8, k = 4          node 0                      node 1
 *   primary shards      p0   p1   p2   p3   │   p4   p5   p6   p7
 *   forward gather      ◄──────────── all 8 (crosses nodes) ──────────►
 *   secondary pieces    s0   s1   s2   s3   │   s0   s1   s2   s3
 *                       (1/4 of the unit each, a copy of what was gathered)
 *   backward gather     ◄── 4, in node 0 ──►│◄── 4, in node 1 ──►
 *   reduce-scatter      ◄──────────── all 8 (crosses nodes) ──────────►
 *
 * A device and step, cross-node:  3M(N-1)/N S  ─►  2M(N-1)/N S,
 *                     in the node:        0   ─►   M(k-1)/k S,
 * for a secondary copy of S/k a device (the paper's 2Ψ/k in bf16),
 * alive from a unit's forward to its backward: "zero.hpz_secondary" in
 * the arena's params.  The pieces are copies of the gathered bits, and a
 * gather only moves bits, so the run is bit-identical to ZeRO-3's.
 *
 * The parameters change only at the optimizer step, so a piece kept by
 * any forward of this step is valid for every backward of the step; the
 * pieces left (a forward with no backward) are dropped before the
 * optimizer (ptdp_zero3_sum).  The node group is the mesh's hpz group
 * (mesh.c), k consecutive DP ranks: the caller derives k from the
 * cluster profile's GPUs a node, and it divides ZeRO's group, which is the
 * DP group or HSDP's shard group (zero_hsdp.c).
 */
#include "ptdp/zero.h"

#include <string.h>

#include "ptdp/comm.h"
#include "ptdp/counters.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/mesh.h"
#include "ptdp/mixed.h"
#include "parallel/zero_impl.h"

int ptdp_zero_hpz_init(ptdp_device *dev, ptdp_zero *z, ptdp_model *m)
{
    ptdp_mesh *mesh = (ptdp_mesh *)m->mesh;
    z->node = NULL;
    z->hpz_bytes = 0;
    if (mesh->hpz <= 0)
        return PTDP_OK;
    const int N = ptdp_comm_size(z->dp), k = mesh->hpz;
    if (!z->row->shards_params || k < 2 || k >= N || N % k != 0)
        return ptdp_fail(dev, PTDP_EINVAL, "--zero-hpz: a node group of %d DP ranks inside ZeRO-3's group of %d: "
                         "it needs --zero 3 and a node of 2 or more ranks, fewer than the group and dividing it",
                         k, N);
    int rc = ptdp_mesh_add_group(dev, mesh, PTDP_GROUP_HPZ);
    if (rc != 0)
        return rc;
    z->node = ptdp_mesh_group(mesh, PTDP_GROUP_HPZ);
    return PTDP_OK;
}

int ptdp_zero_hpz_publish(ptdp_counters *reg)
{
    return ptdp_counters_publish(reg, "hpz_secondary_peak", PTDP_COUNT_DEVICE, PTDP_COUNT_NUMBER, 0);
}

/* My piece of a unit of n elements: ptdp_share over the node group. */
static void secondary_share(const ptdp_zero *z, size_t n, size_t *off, size_t *len)
{
    ptdp_share(n, ptdp_comm_size(z->node), ptdp_comm_rank(z->node), off, len);
}

/* After a forward's gather of u (u->gathered whole, in the store's type):
 * keep my piece, unless a forward of this step kept it already. */
int ptdp_zero_hpz_keep(ptdp_device *dev, ptdp_zero *z, ptdp_zero_unit *u)
{
    if (z->node == NULL)
        return PTDP_OK;
    u->forwards++;
    if (u->secondary != NULL)
        return PTDP_OK;
    const size_t es = ptdp_store_size(z->store);
    size_t off, len;
    secondary_share(z, u->end - u->begin, &off, &len);
    u->secondary = ptdp_alloc_uninit(dev, (len > 0 ? len : 1) * es, PTDP_MEM_PARAMS, "zero.hpz_secondary");
    if (u->secondary == NULL)
        return PTDP_ENOMEM;
    memcpy(u->secondary, ptdp_store_at(z->store, u->gathered, off), len * es);
    z->hpz_bytes += len * es;
    double *peak = ptdp_counts_of(dev->counts, "hpz_secondary_peak");
    if (peak != NULL && (double)z->hpz_bytes > peak[0])
        peak[0] = (double)z->hpz_bytes;
    return PTDP_OK;
}

bool ptdp_zero_hpz_holds(const ptdp_zero *z, const ptdp_zero_unit *u)
{
    return z->node != NULL && u->secondary != NULL;
}

/* A backward's gather of u into u->gathered (allocated, n elements) from
 * the node group's pieces: mine in its place, an all-gather in place over
 * the node fills the others'.  Started (--overlap's prefetch) or done. */
int ptdp_zero_hpz_gather(ptdp_zero *z, ptdp_zero_unit *u, bool start)
{
    const size_t n = u->end - u->begin, es = ptdp_store_size(z->store);
    size_t off, len;
    secondary_share(z, n, &off, &len);
    memcpy(ptdp_store_at(z->store, u->gathered, off), u->secondary, len * es);
    u->from_node = true;
    if (start)
        return ptdp_all_gather_start(z->node, PTDP_IN_PLACE, u->gathered, n, z->store, &u->gather);
    return ptdp_all_gather(z->node, PTDP_IN_PLACE, u->gathered, n, z->store);
}

static void drop(ptdp_device *dev, ptdp_zero *z, ptdp_zero_unit *u)
{
    if (u->secondary == NULL)
        return;
    size_t off, len;
    secondary_share(z, u->end - u->begin, &off, &len);
    z->hpz_bytes -= len * ptdp_store_size(z->store);
    ptdp_free(dev, u->secondary);
    u->secondary = NULL;
}

/* A backward of u ended (the unit released): the piece goes with the last
 * backward of the forwards that kept it. */
void ptdp_zero_hpz_backward_done(ptdp_device *dev, ptdp_zero *z, ptdp_zero_unit *u)
{
    if (z->node == NULL)
        return;
    if (u->forwards > 0)
        u->forwards--;
    if (u->forwards == 0)
        drop(dev, z, u);
}

/* Before the optimizer changes the parameters (and at the end): no piece
 * may outlive the step whose parameters it copied. */
void ptdp_zero_hpz_drop_all(ptdp_device *dev, ptdp_zero *z)
{
    if (z->node == NULL)
        return;
    for (int i = 0; i < z->nunits; i++) {
        drop(dev, z, &z->units[i]);
        z->units[i].forwards = 0;
    }
}
