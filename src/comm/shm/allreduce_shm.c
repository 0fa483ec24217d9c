/*
 * allreduce_shm.c — all_reduce over shared memory: each device reduces its
 * slice of every buffer and stores the result into every buffer.
 *
 * Cut the vector into N slices (ptdp_share).  Rank r owns slice r.  After
 * the meeting (every member's buffer addresses are known):
 *
 *   rank r reads slice r of every member's send, in rank order, one small
 *   tile at a time, and stores each finished tile into slice r of every
 *   member's recv
 *
 *          send0 [a0|b0|c0]                       recv0 [a|b|c]
 *          send1 [a1|b1|c1]  ──► rank 0: a = a0+a1+a2 ──► recv1 [a|b|c]
 *          send2 [a2|b2|c2]      rank 1: b = …         recv2 [a|b|c]
 *                                rank 2: c = …
 *   barrier: nobody returns while its buffers are still read or written
 *
 * This is the ring's reduce-scatter + all-gather without the ring: on
 * shared memory any device can reach any buffer, so the N-1 hops of each
 * phase collapse into one, and the two phases fuse — the all-gather is
 * the reducer storing its tile N times instead of once.  That moves the
 * least memory any all_reduce can (each input read once, each output
 * written once: 2N·S bytes for all devices) and crosses only two barriers,
 * which is why it is the default.  Each element is reduced exactly once,
 * by its owner, in rank order: every member ends with the same bits.
 *
 * reduce_scatter and all_gather are the two halves on their own: reduce
 * slice r into my own recv only; copy every other member's slice.
 *
 * Traffic per device (len_r = |slice r|; equal slices give the textbook
 * (N-1)/N S per half, 2(N-1)/N S for the all_reduce):
 *   reduce-scatter  receives (N-1) len_r    (the others' slice r)
 *                   sends    S - len_r      (its slices m ≠ r, to their owners)
 *   all-gather      receives S - len_r      (the other slices)
 *                   sends    (N-1) len_r    (its slice, to N-1 members)
 *   all_reduce      both, so S + (N-2) len_r sent and received
 */
#include <string.h>

#include "comm/shm/shm.h"
#include "ptdp/tensor.h"

static size_t bytes_of(const ptdp_call *k, size_t n)
{
    return n * ptdp_dtype_size(k->dtype);
}

/* Reduce slice r of every member's input (in rank order) into each of
 * `nout` outputs.  Counts the reduce-scatter's traffic. */
static void reduce_my_slice(const ptdp_comm *c, const ptdp_call *const *calls,
                            void *const *out, int nout, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    size_t off, len;
    ptdp_share(mine->count, c->size, c->rank, &off, &len);

    const void *in[PTDP_MAX_DEVICES];
    for (int m = 0; m < c->size; m++)
        in[m] = (const char *)calls[m]->send + bytes_of(mine, off);
    ptdp_reduce_many(out, nout, in, c->size, len, mine->dtype, mine->rop);

    t->recv += (double)bytes_of(mine, len) * (c->size - 1);
    t->sent += (double)bytes_of(mine, mine->count - len);
}

/* The all-gather's traffic: my slice goes to N-1 members, theirs to me. */
static void count_all_gather(const ptdp_comm *c, const ptdp_call *mine, ptdp_traffic *t)
{
    size_t off, len;
    ptdp_share(mine->count, c->size, c->rank, &off, &len);
    t->recv += (double)bytes_of(mine, mine->count - len);
    t->sent += (double)bytes_of(mine, len) * (c->size - 1);
}

int ptdp_shm_all_reduce(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    size_t off, len;
    ptdp_share(mine->count, c->size, c->rank, &off, &len);

    void *out[PTDP_MAX_DEVICES];                  /* slice r of every recv */
    for (int m = 0; m < c->size; m++)
        out[m] = (char *)calls[m]->recv + bytes_of(mine, off);
    reduce_my_slice(c, calls, out, c->size, t);
    count_all_gather(c, mine, t);
    return ptdp_shm_barrier(c, mine);
}

/* The first half alone.  In place, the input is recv and my slice stays at
 * its offset; otherwise recv holds just my slice. */
int ptdp_shm_reduce_scatter(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    size_t off, len;
    ptdp_share(mine->count, c->size, c->rank, &off, &len);

    void *out = mine->in_place ? (char *)mine->recv + bytes_of(mine, off) : mine->recv;
    reduce_my_slice(c, calls, &out, 1, t);
    return ptdp_shm_barrier(c, mine);
}

/* The second half alone: copy every member's slice from its send (in
 * place, the slice already sits in its recv, where its posted send
 * points). */
int ptdp_shm_all_gather(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    for (int m = 0; m < c->size; m++) {
        size_t off, len;
        ptdp_share(mine->count, c->size, m, &off, &len);
        ptdp_copy((char *)mine->recv + bytes_of(mine, off), calls[m]->send, bytes_of(mine, len));
    }
    count_all_gather(c, mine, t);
    return ptdp_shm_barrier(c, mine);
}
