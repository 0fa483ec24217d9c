/*
 * ep_nodes.c — what expert parallelism sends over the network, on a
 * cluster of nodes (the profile's gpus_per_node): how many of a token's
 * routed rows leave its node, as the all-to-all sends them and as DeepEP
 * would send them.
 *
 * The all-to-all (ep.c) sends one row per kept choice: a token whose k
 * experts sit on two GPUs of one remote node crosses the network twice.
 * DeepEP's dispatch sends it once to each remote node it needs and
 * forwards it to the node's GPUs on NVLink:
 *
 *   token t, k = 4, experts on:   node 1 GPU 0 | node 1 GPU 3 | node 2 GPU 1 | my node
 *   all-to-all                    3 rows over the network
 *   one copy a node (DeepEP)      2 rows over the network (+ 1 NVLink hop in node 1)
 *
 * Group-limited routing (--moe-groups G --moe-group-top-k M, G the EP
 * group's nodes: E/G consecutive experts a node) caps the second at M a
 * token, whatever k — the reason DeepSeek-V3 routes to 4 of its 8 nodes.
 * The combine brings the same rows back the same way.
 *
 * Counted here, per device and for the whole run, from a block's routing
 * (each micro-batch's first forward): "ep_net_rows" (kept choices whose
 * expert sits in another node) and "ep_net_rows_per_node" (the distinct
 * remote nodes of each token, summed).  The report prints both as bytes;
 * the virtual clock charges the all-to-all as it runs.
 */
#include "parallel/ep_impl.h"

#include "ptdp/counters.h"
#include "ptdp/device.h"

int ptdp_ep_nodes_publish(ptdp_counters *reg)
{
    int rc = ptdp_counters_publish(reg, "ep_net_rows", PTDP_COUNT_DEVICE, PTDP_COUNT_NUMBER, 0);
    return rc == 0 ? ptdp_counters_publish(reg, "ep_net_rows_per_node", PTDP_COUNT_DEVICE, PTDP_COUNT_NUMBER, 0)
                   : rc;
}

/* The node of the EP rank holding expert e. */
static int node_of(ptdp_comm *ep, int e, int local, int per_node)
{
    return ptdp_comm_world_rank(ep, e / local) / per_node;
}

void ptdp_ep_count_nodes(ptdp_device *dev, ptdp_comm *ep, int E, int rows, int k, const int *choice,
                         const int *slot)
{
    const int per_node = dev->profile != NULL ? dev->profile->gpus_per_node : 0;
    if (ep == NULL || per_node <= 0 || E <= 0)
        return;   /* one node: nothing crosses a network */
    const int local = E / ptdp_comm_size(ep), mine = dev->rank / per_node;
    double net = 0, per_node_rows = 0;
    for (int r = 0; r < rows; r++) {
        int seen[k > 0 ? k : 1], n = 0;   /* this token's remote nodes so far */
        for (int j = 0; j < k; j++) {
            const size_t c = (size_t)r * k + j;
            if (slot[c] < 0)
                continue;   /* dropped by the capacity: never sent */
            const int node = node_of(ep, choice[c], local, per_node);
            if (node == mine)
                continue;
            net += 1;
            int q = 0;
            while (q < n && seen[q] != node)
                q++;
            if (q == n)
                seen[n++] = node;
        }
        per_node_rows += n;
    }
    ptdp_count(dev->counts, "ep_net_rows", 0, net);
    ptdp_count(dev->counts, "ep_net_rows_per_node", 0, per_node_rows);
}
