/*
 * solution.c — lesson 01, the answer: the ring all-reduce from send and recv.
 *
 * (exercise.c is this file with the blanks still empty.  Try it first.)
 *
 * N devices stand in a ring; each talks only to its neighbours: it sends
 * to the right (rank + 1) and receives from the left (rank - 1).  The
 * vector is cut into N segments (ptdp_share).
 *
 *   reduce-scatter, N-1 steps: pass a partial sum to the right, add your
 *   own part to the one arriving from the left.  After N-1 steps rank r
 *   holds segment r summed over all N devices.
 *
 *   all-gather, N-1 steps: pass a finished segment to the right, copy the
 *   one arriving from the left into place.  After N-1 steps every rank
 *   holds every finished segment.
 *
 *   N = 3, segments a b c              after reduce-scatter   after all-gather
 *   rank 0: a0 b0 c0                  rank 0: A  .  .        A B C
 *   rank 1: a1 b1 c1                  rank 1: .  B  .        A B C
 *   rank 2: a2 b2 c2                  rank 2: .  .  C        A B C
 *                                     (A = a0 + a1 + a2, …)
 *
 * Every step sends one segment, S/N bytes: 2(N-1) steps send 2(N-1)/N * S
 * bytes per device, whatever N is.
 */
#include "lesson.h"

#include "ptdp/error.h"
#include "ptdp/tensor.h"
#include "ptdp/comm.h"

enum { TAG_REDUCE_SCATTER = 1, TAG_ALL_GATHER = 2 };

/* a mod n in [0, n), also for negative a (C's % keeps the sign of a). */
static int mod(int a, int n)
{
    return ((a % n) + n) % n;
}

int lesson_ring_exchange(ptdp_comm *comm, const ptdp_real *out, size_t nout,
                         ptdp_real *in, size_t nin, int tag)
{
    int rank = ptdp_comm_rank(comm), n = ptdp_comm_size(comm);
    int right = mod(rank + 1, n), left = mod(rank - 1, n);
    int rc;

    /* Blank 1: send to the right, receive from the left — in which order?
     * ptdp_send returns only once the right neighbour has taken the
     * message (a rendezvous), so if every rank sent first, every rank would
     * wait for a receive nobody has posted: a cycle of waiting sends. */
    /* Break the cycle: even ranks send first, odd ranks receive first.
     * With N odd, ranks N-1 and 0 are both even: rank N-1's send waits
     * until rank 0 has finished its own send, then rank 0 receives it. */
    if (rank % 2 == 0) {
        rc = ptdp_send(comm, out, nout, PTDP_REAL, right, tag);
        if (rc == 0)
            rc = ptdp_recv(comm, in, nin, PTDP_REAL, left, tag);
    } else {
        rc = ptdp_recv(comm, in, nin, PTDP_REAL, left, tag);
        if (rc == 0)
            rc = ptdp_send(comm, out, nout, PTDP_REAL, right, tag);
    }
    return rc;
}

int lesson_ring_all_reduce(ptdp_device *dev, ptdp_comm *comm, ptdp_real *buf, size_t count)
{
    int n = ptdp_comm_size(comm), r = ptdp_comm_rank(comm);
    if (n == 1)
        return PTDP_OK;                 /* the sum over one device is its buffer */

    /* Segment c is buf[off[c] .. off[c] + len[c]); segment 0 is the largest. */
    size_t off[PTDP_MAX_DEVICES], len[PTDP_MAX_DEVICES];
    for (int c = 0; c < n; c++)
        ptdp_share(count, n, c, &off[c], &len[c]);
    ptdp_real *incoming = ptdp_alloc(dev, len[0] * sizeof *incoming, PTDP_MEM_COMM, "ring.incoming");
    if (incoming == NULL)
        return PTDP_ENOMEM;
    int rc = PTDP_OK;

    /* Phase 1, reduce-scatter.  The partial sum that arrives at step s
     * already holds s + 1 devices' parts; adding mine makes s + 2.  After
     * the last step (s = N-2) the segment I add to is complete. */
    for (int s = 0; s < n - 1; s++) {
        int send_segment, recv_segment;
        /* Blank 2: which segment do I send at step s, and which arrives from
         * my left neighbour?  Segment c should end, complete, at rank c. */
        /* So segment c starts its trip at rank c+1: at step 0 rank r sends
         * segment r-1, and every step moves each segment one rank to the right. */
        send_segment = mod(r - s - 1, n);
        recv_segment = mod(r - s - 2, n);
        rc = lesson_ring_exchange(comm, buf + off[send_segment], len[send_segment],
                                  incoming, len[recv_segment], TAG_REDUCE_SCATTER);
        if (rc != 0)
            break;
        /* Blank 3: the left neighbour's partial sum of segment recv_segment is
         * in `incoming`; my own part of that segment is still in buf. */
        ptdp_real *mine = buf + off[recv_segment];
        for (size_t i = 0; i < len[recv_segment]; i++)
            mine[i] += incoming[i];
    }

    /* Phase 2, all-gather.  I hold finished segment r; pass finished segments
     * around once, copying each straight into place. */
    for (int s = 0; s < n - 1 && rc == 0; s++) {
        int send_segment, recv_segment;
        /* Blank 4: which finished segment do I pass on at step s, and which
         * arrives? */
        /* First the one I finished, r; then the one that arrived last step. */
        send_segment = mod(r - s, n);
        recv_segment = mod(r - s - 1, n);
        rc = lesson_ring_exchange(comm, buf + off[send_segment], len[send_segment],
                                  buf + off[recv_segment], len[recv_segment], TAG_ALL_GATHER);
    }

    ptdp_free(dev, incoming);
    return rc;
}
