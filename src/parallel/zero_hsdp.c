/*
 * zero_hsdp.c — hybrid sharded data parallelism (HSDP): ZeRO inside a
 * shard group, plain data parallelism across the copies of each shard.
 *
 * ZeRO over all N_dp ranks cuts every state into N_dp shards, and every
 * reduce-scatter and gather then spans the whole DP group — across nodes,
 * over the slow links.  HSDP (PyTorch FSDP2's HSDP, torchtitan's default
 * over many nodes) cuts the DP group into R = dp / N shard groups of N
 * consecutive ranks (one node, say): a ZeRO stage runs inside each as if
 * it were the whole DP group, and the R groups hold R copies of the same
 * shards.  The rank with index k inside its shard group holds shard k, as
 * does index k of every other shard group: those R ranks are a replica
 * group.
 *
 *   dp = 8, N = 4, R = 2       shard rank:  0    1    2    3
 *
 *   shard group 0  (node 0)     dp 0 ░    dp 1 ░    dp 2 ░    dp 3 ░
 *                                 │         │         │         │   replica
 *   shard group 1  (node 1)     dp 4 ░    dp 5 ░    dp 6 ░    dp 7 ░  groups
 *
 *   ── reduce-scatter, all-gather: inside a row (a shard group)
 *   │  all-reduce of one shard:    down a column (a replica group)
 *
 * The gradient's sum over all dp ranks, in FSDP2's order: each shard group
 * reduce-scatters (shard k gets the sum over its group's N ranks), then
 * each replica group all-reduces its shard (the sum over the R groups):
 *
 *   g_k = sum over groups r of ( sum over i in group r of g_i )_k
 *
 * the same sum as ZeRO's one reduce-scatter over dp, taken in another
 * order.  Bytes a device and step for the gradient, S its bytes:
 *
 *   reduce-scatter (N-1)/N S  in the shard group  (ZeRO-2: each backward)
 *   all-reduce     2(R-1)/(RN) S  across the replicas  (once a step)
 *
 * plus the stage's gathers of the parameters, inside the shard group only
 * ((N-1)/N S each).  With N = dp there is one shard group and no replica
 * group: ZeRO as it was.  With N = 1 every state is whole and the
 * all-reduce spans all dp ranks: plain DP's sum.
 *
 * In the code a shard group IS ZeRO's DP group (z->dp: every row's own,
 * gather and sum run over it unchanged, zero_stages.c), and this file adds
 * the replica group and its one all-reduce, after the row's sum and
 * before the declared groups (zero_sum.c) and the norm, whose squares are
 * summed over the shard group alone: the replicas hold the same shard.
 * The all-reduce runs once a step on the accumulated shard (FSDP2 can
 * skip it between micro-batches too: set_requires_all_reduce), so ZeRO-2's
 * M reduce-scatters share one.  Only the replica of index 0 writes its
 * shards to a checkpoint (state_shards.c); every replica reads them.
 * --verify-replicas, which ZeRO-3 otherwise skips (no DP rank holds a
 * whole replica), compares the replicas of each shard.
 */
#include "ptdp/zero.h"

#include <stdint.h>

#include "ptdp/comm.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/mesh.h"
#include "ptdp/mixed.h"
#include "parallel/zero_impl.h"

int ptdp_zero_hsdp_init(ptdp_device *dev, ptdp_zero *z, ptdp_model *m)
{
    ptdp_mesh *mesh = (ptdp_mesh *)m->mesh;
    z->dp = mesh->dp_comm;
    z->replicas = NULL;
    if (mesh->shard <= 0 || mesh->shard >= mesh->dp)
        return PTDP_OK;   /* one shard group: the DP group itself */
    int rc = ptdp_mesh_add_group(dev, mesh, PTDP_GROUP_SHARD);
    if (rc == 0)
        rc = ptdp_mesh_add_group(dev, mesh, PTDP_GROUP_REPLICA);
    if (rc != 0)
        return rc;
    z->dp = ptdp_mesh_group(mesh, PTDP_GROUP_SHARD);
    z->replicas = ptdp_mesh_group(mesh, PTDP_GROUP_REPLICA);
    return PTDP_OK;
}

int ptdp_zero_hsdp_sum(ptdp_zero *z, ptdp_model *m)
{
    if (z->replicas == NULL || ptdp_comm_size(z->replicas) == 1)
        return PTDP_OK;
    if (z->row->shards_grads)   /* stages 2, 3: my shard, [len] */
        return ptdp_all_reduce(z->replicas, z->grad_shard, z->grad_shard, z->len, z->store, PTDP_SUM);
    void *g = ptdp_zero_grad_store(z, m);   /* stage 1: my range of each bucket, in place */
    for (int i = 0; i < z->nranges; i++) {
        void *x = ptdp_store_at(z->store, g, z->ranges[i].begin);
        int rc = ptdp_all_reduce(z->replicas, x, x, z->ranges[i].end - z->ranges[i].begin, z->store, PTDP_SUM);
        if (rc != 0)
            return rc;
    }
    return PTDP_OK;
}

bool ptdp_zero_writes_shard(const ptdp_zero *z)
{
    return z->replicas == NULL || ptdp_comm_rank(z->replicas) == 0;
}

/* --verify-replicas under ZeRO-3, whose DP ranks hold no whole replicas:
 * with shard groups the replicas of my shard must still hold the same
 * bits — its parameters, and under bf16 its float master weights.  A
 * 64-bit FNV-1a hash of each, compared over the replica group. */
static uint64_t fnv1a(uint64_t h, const void *p, size_t bytes)
{
    const unsigned char *b = p;
    for (size_t k = 0; k < bytes; k++)
        h = (h ^ b[k]) * 1099511628211ull;
    return h;
}

int ptdp_zero_hsdp_check_replicas(ptdp_device *dev, const ptdp_zero *z, long step)
{
    if (z->replicas == NULL || !z->row->shards_params || ptdp_comm_size(z->replicas) == 1)
        return PTDP_OK;
    const int n = ptdp_comm_size(z->replicas);
    uint64_t all[PTDP_MAX_DEVICES];
    uint64_t h = fnv1a(1469598103934665603ull, z->param_shard, z->len * ptdp_store_size(z->store));
    if (z->master != NULL)
        h = fnv1a(h, z->master, z->len * sizeof(ptdp_real));
    all[ptdp_comm_rank(z->replicas)] = h;
    int rc = ptdp_all_gather(z->replicas, PTDP_IN_PLACE, all, (size_t)n, PTDP_I64);
    for (int r = 1; rc == 0 && r < n; r++)
        if (all[r] != all[0])
            return ptdp_fail(dev, PTDP_ECHECK, "HSDP replicas of a shard differ after step %ld: replica %d has hash "
                             "%016llx, replica 0 %016llx", step, r, (unsigned long long)all[r],
                             (unsigned long long)all[0]);
    return rc;
}
