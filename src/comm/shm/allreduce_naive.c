/*
 * allreduce_naive.c — the all_reduce everyone writes first: reduce to a
 * root, then broadcast from it.
 *
 *      reduce                       broadcast
 *   1 ──x1──┐                    ┌──y──► 1
 *   2 ──x2──┼──► 0: y = x0+x1+…  ┼──y──► 2
 *   3 ──x3──┘                    └──y──► 3
 *
 * Rank 0 reads every member's buffer in rank order, then everyone copies
 * rank 0's result.  Correct and deterministic, but rank 0's link carries
 * everything: it receives (N-1) S and sends (N-1) S while each other
 * device sends S and receives S.  The busiest link grows with N, which is
 * the problem the ring (allreduce_ring.c) solves: 2(N-1)/N · S on every
 * link, whatever N.
 */
#include "comm/shm/shm.h"

int ptdp_naive_all_reduce(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    /* An all_reduce call carries root 0 (comm.c), so the rooted reduce and
     * broadcast of rooted.c are exactly the two halves. */
    int rc = ptdp_shm_reduce(c, calls, t);
    if (rc)
        return rc;
    return ptdp_shm_broadcast(c, calls, t);
}
