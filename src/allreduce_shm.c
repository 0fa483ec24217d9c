/*
 * allreduce_shm.c — all_reduce over shared memory: reduce my slice, then
 * copy the others' slices.
 *
 * Cut the vector into N slices (ptdp_chunk).  Rank r owns slice r:
 *
 *   phase 1, reduce-scatter     rank r reads slice r of every member's
 *                               send, in rank order, and writes the result
 *                               into slice r of its recv
 *
 *          send0 [a0|b0|c0]     rank 0: recv0[a] = a0+a1+a2
 *          send1 [a1|b1|c1] ──► rank 1: recv1[b] = b0+b1+b2
 *          send2 [a2|b2|c2]     rank 2: recv2[c] = c0+c1+c2
 *
 *   barrier                     every slice is final
 *
 *   phase 2, all-gather         rank r copies slice m from rank m's recv
 *
 *   barrier                     nobody returns while its recv is read
 *
 * This is the ring's reduce-scatter + all-gather without the ring: on
 * shared memory any device can read any buffer, so the N-1 hops collapse
 * into one.  Each element is reduced exactly once, by its owner, in rank
 * order, then copied: every member ends with the same bits.
 *
 * Traffic per device (len_r = |slice r|, S the vector; equal slices give
 * the textbook (N-1)/N S per phase, 2(N-1)/N S for the all_reduce):
 *   reduce-scatter  receives (N-1) len_r    (the others' slice r)
 *                   sends    S - len_r      (its slices m ≠ r, to their owners)
 *   all-gather      receives S - len_r      (the other slices)
 *                   sends    (N-1) len_r    (its slice, to N-1 members)
 */
#include <string.h>

#include "comm_impl.h"
#include "ptdp/tensor.h"

static size_t bytes_of(const ptdp_call *k, size_t n)
{
    return n * ptdp_dtype_size(k->dtype);
}

/* Phase 1: out = slice r of every member's input, reduced in rank order. */
static void reduce_my_slice(const ptdp_comm *c, const ptdp_call *const *calls,
                            void *out, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    size_t off, len;
    ptdp_chunk(mine->count, c->size, c->rank, &off, &len);

    const void *in[PTDP_MAX_DEVICES];
    for (int m = 0; m < c->size; m++)
        in[m] = (const char *)calls[m]->send + bytes_of(mine, off);
    ptdp_reduce_many(out, in, c->size, len, mine->dtype, mine->rop);

    t->recv += (double)bytes_of(mine, len) * (c->size - 1);
    t->sent += (double)bytes_of(mine, mine->count - len);
}

/* Phase 2: copy every other member's slice from where it sits in its
 * buffer (`from_recv`: its recv, else its send) to my recv. */
static void copy_other_slices(const ptdp_comm *c, const ptdp_call *const *calls,
                              int from_recv, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    size_t off, len;
    for (int m = 0; m < c->size; m++) {
        if (m == c->rank)
            continue;
        ptdp_chunk(mine->count, c->size, m, &off, &len);
        const char *src = from_recv ? (const char *)calls[m]->recv + bytes_of(mine, off)
                                    : (const char *)calls[m]->send;
        ptdp_copy((char *)mine->recv + bytes_of(mine, off), src, bytes_of(mine, len));
    }
    ptdp_chunk(mine->count, c->size, c->rank, &off, &len);
    t->recv += (double)bytes_of(mine, mine->count - len);
    t->sent += (double)bytes_of(mine, len) * (c->size - 1);
}

int ptdp_shm_all_reduce(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    size_t off, len;
    ptdp_chunk(mine->count, c->size, c->rank, &off, &len);

    reduce_my_slice(c, calls, (char *)mine->recv + bytes_of(mine, off), t);
    int rc = ptdp_shm_barrier(c, mine);
    if (rc)
        return rc;
    copy_other_slices(c, calls, 1, t);
    return ptdp_shm_barrier(c, mine);
}

/* Phase 1 alone.  In place, the input is recv and my slice stays at its
 * offset; otherwise recv holds just my slice. */
int ptdp_shm_reduce_scatter(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    size_t off, len;
    ptdp_chunk(mine->count, c->size, c->rank, &off, &len);

    void *out = mine->in_place ? (char *)mine->recv + bytes_of(mine, off) : mine->recv;
    reduce_my_slice(c, calls, out, t);
    return ptdp_shm_barrier(c, mine);
}

/* Phase 2 alone: every member's send is its slice (in place, the slice
 * already sits in its recv, where its posted send points). */
int ptdp_shm_all_gather(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    size_t off, len;
    ptdp_chunk(mine->count, c->size, c->rank, &off, &len);

    if (!mine->in_place)
        ptdp_copy((char *)mine->recv + bytes_of(mine, off), mine->send, bytes_of(mine, len));
    copy_other_slices(c, calls, 0, t);
    return ptdp_shm_barrier(c, mine);
}
