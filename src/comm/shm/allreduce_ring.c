/*
 * allreduce_ring.c — the ring all-reduce: reduce-scatter, then all-gather.
 *
 * The devices stand in a ring; each only ever talks to its neighbours:
 * it sends to the right (rank + 1) and receives from the left (rank - 1).
 * Cut the vector into N segments (ptdp_share).
 *
 *   reduce-scatter, N-1 steps.  At step s rank r sends segment r-s-1 and
 *   receives segment r-s-2, adding its own contribution to what arrives.
 *   A segment travels once around the ring collecting every member's part
 *   (mine + arriving) and ends, complete, at the rank with its number.
 *   N = 3, segments a b c, x_r = rank r's part of segment x:
 *
 *      link      step 0    step 1       after N-1 = 2 steps
 *     0 ──► 1    c0        b0+b2        rank 0 holds a = a0+(a2+a1)
 *     1 ──► 2    a1        c1+c0        rank 1 holds b = b1+(b0+b2)
 *     2 ──► 0    b2        a2+a1        rank 2 holds c = c2+(c1+c0)
 *
 *   all-gather, N-1 steps.  At step s rank r sends segment r-s and receives
 *   segment r-s-1, now copying: every complete segment travels around once.
 *
 * Each step moves one segment per link, so a device sends (N-1) segments per
 * phase: 2(N-1)/N · S in all — independent of N, which is why NCCL uses
 * rings for large messages.  Exactly: the reduce-scatter sends every segment
 * but r and receives every segment but r-1; the all-gather sends every segment
 * but r+1 and receives every segment but r.
 *
 * The order of each segment's sum is fixed (it starts at its number + 1 and
 * goes around), so results repeat bit for bit, and after the all-gather
 * every member holds the same copy of each segment.
 *
 * A step is a sendrecv through a one-slot mailbox per device: I post a
 * pointer to my outgoing segment, take my left neighbour's, and wait until
 * my right neighbour has taken mine before the next step.
 *
 * Leaving the ring early (another device failed) must not free a buffer
 * my right neighbour is still reading, nor leave my left neighbour
 * waiting for me: I mark my left's mailbox "taken for good", then wait —
 * through the abort — until my right has taken, or given up on, all I
 * posted (ring_leave).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "comm/shm/shm.h"
#include "ptdp/error.h"
#include "ptdp/tensor.h"

static int mod(int a, int n)
{
    return ((a % n) + n) % n;
}

/* --------------------------------------------------- one ring step */

typedef struct {
    const atomic_ullong *word;
    unsigned long long step;
} step_wait;

static bool reached(const void *arg)
{
    const step_wait *sw = arg;
    return atomic_load(sw->word) >= sw->step;
}

/* A ring step waits for one neighbour only; the others may legitimately
 * have finished the collective already. */
static ptdp_wait_why neighbour_why(const ptdp_comm *c, const ptdp_call *mine, int neighbour)
{
    ptdp_wait_why why = ptdp_shm_why(c, mine);
    why.members = &c->world_rank[neighbour];
    why.nmembers = 1;
    return why;
}

/* Leave the ring with code rc: my left neighbour need not wait for me to
 * take anything more, and my buffers stay mine until my right neighbour
 * has taken, or given up on, everything I posted — it is past the meeting
 * too, so that comes in bounded time (the watchdog still applies). */
static int ring_leave(ptdp_comm *c, const ptdp_call *mine, int rc)
{
    struct shm_group *g = shm_group_of(c);
    shm_member *me = &g->member[c->rank];
    int left = mod(c->rank - 1, c->size), right = mod(c->rank + 1, c->size);

    atomic_store(&g->member[left].taken, ULLONG_MAX);
    ptdp_wake(c->dev->w, c->world_rank[left]);

    ptdp_wait_why why = neighbour_why(c, mine, right);
    why.past_abort = true;
    step_wait taken = { &me->taken, me->ring_step };
    int late = ptdp_wait_until(c->dev, reached, &taken, &why);
    return late ? late : rc;
}

/* Post `outgoing` for my right neighbour; return my left neighbour's. */
static int ring_exchange(ptdp_comm *c, const ptdp_call *mine, const void *outgoing,
                         const void **incoming)
{
    struct shm_group *g = shm_group_of(c);
    shm_member *me = &g->member[c->rank];
    int left = mod(c->rank - 1, c->size), right = mod(c->rank + 1, c->size);
    unsigned long long step = ++me->ring_step;

    me->data = outgoing;
    atomic_store(&me->posted, step);
    ptdp_wake(c->dev->w, c->world_rank[right]);

    ptdp_wait_why why = neighbour_why(c, mine, left);
    step_wait arrived = { &g->member[left].posted, step };
    int rc = ptdp_wait_until(c->dev, reached, &arrived, &why);
    if (rc)
        return ring_leave(c, mine, rc);
    *incoming = g->member[left].data;
    return 0;
}

/* I am done with my left neighbour's segment; wait until my right neighbour
 * is done with mine (then I may reuse or return my buffer). */
static int ring_release(ptdp_comm *c, const ptdp_call *mine)
{
    struct shm_group *g = shm_group_of(c);
    shm_member *me = &g->member[c->rank];
    int left = mod(c->rank - 1, c->size);

    atomic_store(&g->member[left].taken, me->ring_step);
    ptdp_wake(c->dev->w, c->world_rank[left]);

    ptdp_wait_why why = neighbour_why(c, mine, mod(c->rank + 1, c->size));
    step_wait taken = { &me->taken, me->ring_step };
    int rc = ptdp_wait_until(c->dev, reached, &taken, &why);
    return rc ? ring_leave(c, mine, rc) : 0;
}

/* ----------------------------------------------------- the phases */

typedef struct {
    size_t off[PTDP_MAX_DEVICES], len[PTDP_MAX_DEVICES];   /* in bytes */
} segments;

static void cut(const ptdp_comm *c, const ptdp_call *k, segments *ch)
{
    size_t es = ptdp_dtype_size(k->dtype);
    for (int i = 0; i < c->size; i++) {
        ptdp_share(k->count, c->size, i, &ch->off[i], &ch->len[i]);
        ch->off[i] *= es;
        ch->len[i] *= es;
    }
}

/* Reduce-scatter.  `send` is my contribution; the running sum of segment c
 * is kept at work + off(c) until passed on; the complete segment r (my
 * rank) is written to `out`. */
static int ring_reduce_scatter(ptdp_comm *c, const ptdp_call *mine, const segments *ch,
                               const char *send, char *work, char *out, ptdp_traffic *t)
{
    int n = c->size, r = c->rank;
    size_t es = ptdp_dtype_size(mine->dtype);
    if (n == 1) {
        ptdp_copy(out, send, ch->len[0]);
        return 0;
    }
    for (int s = 0; s < n - 1; s++) {
        int send_segment = mod(r - s - 1, n), recv_segment = mod(r - s - 2, n);
        const char *outgoing = s == 0 ? send + ch->off[send_segment] : work + ch->off[send_segment];
        char *sum = s == n - 2 ? out : work + ch->off[recv_segment];
        const void *incoming;

        int rc = ring_exchange(c, mine, outgoing, &incoming);
        if (rc)
            return rc;
        ptdp_reduce2(sum, send + ch->off[recv_segment], incoming, ch->len[recv_segment] / es,
                     mine->dtype, mine->rop);
        t->sent += (double)ch->len[send_segment];
        t->recv += (double)ch->len[recv_segment];
        if ((rc = ring_release(c, mine)) != 0)
            return rc;
    }
    return 0;
}

/* All-gather.  Segment r of buf is mine; afterwards buf holds every segment. */
static int ring_all_gather(ptdp_comm *c, const ptdp_call *mine, const segments *ch,
                           char *buf, ptdp_traffic *t)
{
    int n = c->size, r = c->rank;
    for (int s = 0; s < n - 1; s++) {
        int send_segment = mod(r - s, n), recv_segment = mod(r - s - 1, n);
        const void *incoming;

        int rc = ring_exchange(c, mine, buf + ch->off[send_segment], &incoming);
        if (rc)
            return rc;
        ptdp_copy(buf + ch->off[recv_segment], incoming, ch->len[recv_segment]);
        t->sent += (double)ch->len[send_segment];
        t->recv += (double)ch->len[recv_segment];
        if ((rc = ring_release(c, mine)) != 0)
            return rc;
    }
    return 0;
}

/* --------------------------------------------------- the collectives */

int ptdp_ring_all_reduce(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    segments ch;
    cut(c, mine, &ch);
    char *recv = mine->recv;
    char *my_segment = recv + ch.off[c->rank];

    /* recv is the workspace: segment c's running sum replaces my part of
     * segment c, which has just been added (in place, send == recv, too). */
    int rc = ring_reduce_scatter(c, mine, &ch, mine->send, recv, my_segment, t);
    if (rc)
        return rc;
    if (mine->rop == PTDP_AVG)
        ptdp_divide(my_segment, ch.len[c->rank] / ptdp_dtype_size(mine->dtype), mine->dtype, c->size);
    return ring_all_gather(c, mine, &ch, recv, t);
}

/* Out of place the running sums need a workspace of the full vector (the
 * member's scratch, kept between calls); in place, recv is the workspace. */
static char *workspace(ptdp_comm *c, size_t bytes)
{
    shm_member *me = &shm_group_of(c)->member[c->rank];
    if (me->scratch_bytes < bytes) {
        void *p = realloc(me->scratch, bytes);
        if (!p)
            return NULL;
        me->scratch = p;
        me->scratch_bytes = bytes;
    }
    return me->scratch;
}

int ptdp_ring_reduce_scatter(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    segments ch;
    cut(c, mine, &ch);
    size_t S = mine->count * ptdp_dtype_size(mine->dtype);
    char *work = mine->in_place ? (char *)mine->recv : workspace(c, S);
    if (!work && S > 0)
        return ring_leave(c, mine, ptdp_fail(c->dev, PTDP_ENOMEM, "ring reduce_scatter: no host "
                                             "memory for a %zu-byte workspace", S));
    char *out = mine->in_place ? work + ch.off[c->rank] : (char *)mine->recv;

    int rc = ring_reduce_scatter(c, mine, &ch, mine->send, work, out, t);
    if (rc == 0 && mine->rop == PTDP_AVG)
        ptdp_divide(out, ch.len[c->rank] / ptdp_dtype_size(mine->dtype), mine->dtype, c->size);
    return rc;
}

int ptdp_ring_all_gather(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    segments ch;
    cut(c, mine, &ch);
    char *recv = mine->recv;
    if (!mine->in_place)
        ptdp_copy(recv + ch.off[c->rank], mine->send, ch.len[c->rank]);
    return ring_all_gather(c, mine, &ch, recv, t);
}
