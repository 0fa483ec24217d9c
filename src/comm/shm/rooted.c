/*
 * rooted.c — the simple collectives of the threads backend: broadcast,
 * reduce, gather, scatter, all_to_all and all_to_allv.
 *
 * Each reads the other members' buffers directly (their addresses come
 * from the calls posted at the meeting, group.c), then crosses the
 * group's barrier so nobody returns while its buffers are still read:
 *
 *     meet ──► every member copies what it needs from the others ──► barrier
 *
 * Byte accounting (S = count elements in bytes, N members, segment r of
 * ptdp_share is len_r; a byte is sent by the device whose buffer it leaves
 * and received by the device whose buffer it enters):
 *
 *     broadcast    root sends (N-1) S            others receive S
 *     reduce       root receives (N-1) S         others send S
 *     gather       root receives S - len_root    others send len_r
 *     scatter      root sends S - len_root       others receive len_r
 *     all_to_all   each sends and receives (N-1) blocks of count elements
 *     all_to_allv  each sends the counts it gives the others, receives
 *                  the counts it expects from them (its own block stays)
 *
 * Only reduce computes, at the root in rank order (in0 op in1 op …), so
 * its bits do not depend on timing.
 */
#include "comm/shm/shm.h"
#include "ptdp/tensor.h"

static size_t bytes_of(const ptdp_call *k, size_t n)
{
    return n * ptdp_dtype_size(k->dtype);
}

/* Root's buffer → everyone else's. */
int ptdp_shm_broadcast(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank], *root = calls[mine->root];
    size_t S = bytes_of(mine, mine->count);
    if (c->rank != mine->root) {
        ptdp_copy(mine->recv, root->recv, S);
        t->recv += (double)S;
    } else {
        t->sent += (double)S * (c->size - 1);
    }
    return ptdp_shm_barrier(c, mine);
}

/* Root reads every member's send in rank order: in0 op in1 op … */
int ptdp_shm_reduce(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    size_t S = bytes_of(mine, mine->count);
    if (c->rank == mine->root) {
        const void *in[PTDP_MAX_DEVICES];
        for (int r = 0; r < c->size; r++)
            in[r] = calls[r]->send;
        ptdp_reduce_many(&mine->recv, 1, in, c->size, mine->count, mine->dtype, mine->rop);
        t->recv += (double)S * (c->size - 1);
    } else {
        t->sent += (double)S;
    }
    return ptdp_shm_barrier(c, mine);
}

/* Root copies segment r of its recv from rank r's send. */
int ptdp_shm_gather(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    size_t off, len;
    if (c->rank == mine->root) {
        for (int r = 0; r < c->size; r++) {
            ptdp_share(mine->count, c->size, r, &off, &len);
            ptdp_copy((char *)mine->recv + bytes_of(mine, off), calls[r]->send, bytes_of(mine, len));
            if (r != c->rank)
                t->recv += (double)bytes_of(mine, len);
        }
    } else {
        ptdp_share(mine->count, c->size, c->rank, &off, &len);
        t->sent += (double)bytes_of(mine, len);
    }
    return ptdp_shm_barrier(c, mine);
}

/* Rank r copies segment r of root's send. */
int ptdp_shm_scatter(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank], *root = calls[mine->root];
    size_t off, len;
    ptdp_share(mine->count, c->size, c->rank, &off, &len);
    ptdp_copy(mine->recv, (const char *)root->send + bytes_of(mine, off), bytes_of(mine, len));
    if (c->rank != mine->root) {
        t->recv += (double)bytes_of(mine, len);
    } else {
        t->sent += (double)bytes_of(mine, mine->count - len);
    }
    return ptdp_shm_barrier(c, mine);
}

/* Rank i's block for me = rank i's send_counts[me] elements at its
 * send_displs[me], into my recv at recv_displs[i].  Every member first
 * checks the whole table (the same verdict everywhere: all fail or none
 * copies) — and crosses the closing barrier either way, since the tables
 * it reads live in the other members' calls (their stacks) until they
 * return. */
int ptdp_shm_all_to_allv(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    int rc = ptdp_check_v_agreement(c, calls);
    if (rc == 0) {
        const size_t es = ptdp_dtype_size(mine->dtype);
        for (int i = 0; i < c->size; i++)
            ptdp_copy((char *)mine->recv + mine->rdispls[i] * es,
                      (const char *)calls[i]->send + calls[i]->sdispls[c->rank] * es, mine->rcounts[i] * es);
        t->sent += (double)mine->vsent;
        t->recv += (double)mine->vrecv;
    }
    int crossed = ptdp_shm_barrier(c, mine);
    return rc ? rc : crossed;
}

/* Block i of my recv = block (my rank) of rank i's send. */
int ptdp_shm_all_to_all(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    size_t block = bytes_of(mine, mine->count);
    for (int r = 0; r < c->size; r++)
        ptdp_copy((char *)mine->recv + (size_t)r * block,
               (const char *)calls[r]->send + (size_t)c->rank * block, block);
    t->sent += (double)block * (c->size - 1);
    t->recv += (double)block * (c->size - 1);
    return ptdp_shm_barrier(c, mine);
}
