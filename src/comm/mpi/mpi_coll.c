/*
 * mpi_coll.c — the all-reduce algorithms, and their halves, as messages
 * between processes.
 *
 * The rule that makes a process run bit-identical to a thread run: every
 * element is reduced by the same function, over the same inputs, in the
 * same order.  So each algorithm here is its threads twin with the reads of
 * another device's memory replaced by messages:
 *
 *   "shm" (the default)      threads: rank r reads slice r of every
 *                            member's buffer.  Processes: an all-to-all
 *                            brings slice r of every member's input to rank
 *                            r (the reads, done as messages), which reduces
 *                            them in rank order with ptdp_reduce_many — the
 *                            very call the threads make — and an all-gather
 *                            hands every slice to every member (the writes).
 *
 *        send0 [a0|b0]   ──all-to-all──►  rank 0: a0 a1   reduce   a ──all-gather──► [a|b]
 *        send1 [a1|b1]                    rank 1: b0 b1   ──────►  b                 [a|b]
 *
 *   ring                     the same steps as allreduce_ring.c: at step s
 *                            send segment r-s-1 right, receive segment r-s-2
 *                            from the left, add my part to what arrives
 *                            (ptdp_reduce2(sum, mine, incoming): the same
 *                            operands in the same order), then pass the
 *                            complete segments around once more.
 *
 *   naive                    reduce to rank 0, broadcast (mpi_rooted.c).
 *
 *   mpi (--algo mpi)         MPI_Allreduce itself (blocking: see below);
 *                            the library picks the
 *                            algorithm and the order of the sums (by size
 *                            and process count), so the bits may differ
 *                            from the threads' in the last place; results
 *                            agree within --check's tolerance, and every
 *                            member still gets the same bits.
 *
 * Traffic is counted with the threads backend's formulas (allreduce_shm.c,
 * allreduce_ring.c), so the byte reports of the two backends agree; for
 * --algo mpi with the ring's, the textbook 2(N-1)/N S.
 */
#include <stdlib.h>
#include <string.h>

#include "comm/mpi/mpi_backend.h"
#include "ptdp/clock.h"
#include "ptdp/error.h"
#include "ptdp/mpi.h"
#include "ptdp/tensor.h"

enum { RING_TAG = 1 };

static int mod(int a, int n)
{
    return ((a % n) + n) % n;
}

static size_t bytes_of(const ptdp_call *k, size_t n)
{
    return n * ptdp_dtype_size(k->dtype);
}

/* ------------------------------------------------ "shm": direct slices */

/* Bring slice r (mine) of every member's input here, in rank order, and
 * reduce it into out.  Counts the reduce-scatter's traffic as shm does. */
static int reduce_my_slice(ptdp_comm *c, const ptdp_call *mine, void *out, ptdp_traffic *t)
{
    int scount[PTDP_MAX_DEVICES], sdispl[PTDP_MAX_DEVICES];
    int rcount[PTDP_MAX_DEVICES], rdispl[PTDP_MAX_DEVICES];
    size_t off, len, S = bytes_of(mine, mine->count);
    ptdp_share(mine->count, c->size, c->rank, &off, &len);
    size_t L = bytes_of(mine, len);
    int rc = ptdp_mpi_count(c, S, &(int){ 0 });
    if (rc == 0)
        rc = ptdp_mpi_count(c, L * (size_t)c->size, &(int){ 0 });
    if (rc)
        return rc;
    for (int m = 0; m < c->size; m++) {
        size_t o, l;
        ptdp_share(mine->count, c->size, m, &o, &l);
        scount[m] = (int)bytes_of(mine, l);
        sdispl[m] = (int)bytes_of(mine, o);
        rcount[m] = (int)L;
        rdispl[m] = (int)(L * (size_t)m);
    }
    char *slices = ptdp_mpi_scratch(c, L * (size_t)c->size + 1);
    if (!slices)
        return PTDP_ENOMEM;
    MPI_Request req;
    MPI_Ialltoallv(mine->send, scount, sdispl, MPI_BYTE, slices, rcount, rdispl, MPI_BYTE,
                   mpi_group_of(c)->coll, &req);
    ptdp_wait_why why = ptdp_mpi_why(c, mine);
    if ((rc = ptdp_mpi_wait(c->dev, 1, &req, &why)) != 0)
        return rc;
    const void *in[PTDP_MAX_DEVICES];
    for (int m = 0; m < c->size; m++)
        in[m] = slices + L * (size_t)m;
    ptdp_reduce_many(&out, 1, in, c->size, len, mine->dtype, mine->rop);
    t->recv += (double)L * (c->size - 1);
    t->sent += (double)(S - L);
    return 0;
}

/* Every member's slice into every member's recv (in place: mine is there). */
static int gather_slices(ptdp_comm *c, const ptdp_call *mine, const void *my_slice, ptdp_traffic *t)
{
    int count[PTDP_MAX_DEVICES], displ[PTDP_MAX_DEVICES];
    for (int m = 0; m < c->size; m++) {
        size_t o, l;
        ptdp_share(mine->count, c->size, m, &o, &l);
        count[m] = (int)bytes_of(mine, l);
        displ[m] = (int)bytes_of(mine, o);
    }
    int rc = ptdp_mpi_count(c, bytes_of(mine, mine->count), &(int){ 0 });
    if (rc)
        return rc;
    MPI_Request req;
    MPI_Iallgatherv(my_slice ? my_slice : MPI_IN_PLACE, count[c->rank], MPI_BYTE, mine->recv, count, displ,
                    MPI_BYTE, mpi_group_of(c)->coll, &req);
    ptdp_wait_why why = ptdp_mpi_why(c, mine);
    if ((rc = ptdp_mpi_wait(c->dev, 1, &req, &why)) != 0)
        return rc;
    size_t L = (size_t)count[c->rank];
    t->recv += (double)(bytes_of(mine, mine->count) - L);
    t->sent += (double)L * (c->size - 1);
    return 0;
}

int ptdp_mpi_direct_all_reduce(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    size_t off, len;
    ptdp_share(mine->count, c->size, c->rank, &off, &len);
    int rc = reduce_my_slice(c, mine, (char *)mine->recv + bytes_of(mine, off), t);
    return rc ? rc : gather_slices(c, mine, NULL, t);
}

int ptdp_mpi_direct_reduce_scatter(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    size_t off, len;
    ptdp_share(mine->count, c->size, c->rank, &off, &len);
    void *out = mine->in_place ? (char *)mine->recv + bytes_of(mine, off) : mine->recv;
    return reduce_my_slice(c, mine, out, t);
}

int ptdp_mpi_direct_all_gather(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    return gather_slices(c, mine, mine->in_place ? NULL : mine->send, t);
}

/* ------------------------------------------------------------- ring */

typedef struct {
    size_t off[PTDP_MAX_DEVICES], len[PTDP_MAX_DEVICES];   /* in bytes */
    size_t max_len;
} segments;

static int cut(ptdp_comm *c, const ptdp_call *k, segments *ch)
{
    size_t es = ptdp_dtype_size(k->dtype);
    ch->max_len = 0;
    for (int i = 0; i < c->size; i++) {
        ptdp_share(k->count, c->size, i, &ch->off[i], &ch->len[i]);
        ch->off[i] *= es;
        ch->len[i] *= es;
        if (ch->len[i] > ch->max_len)
            ch->max_len = ch->len[i];
    }
    return ptdp_mpi_count(c, ch->max_len, &(int){ 0 });
}

/* One ring step: my outgoing segment to the right, the left's into incoming. */
static int ring_step(ptdp_comm *c, const ptdp_call *mine, const void *out, size_t out_len,
                     void *in, size_t in_len)
{
    MPI_Comm comm = mpi_group_of(c)->coll;
    int left = mod(c->rank - 1, c->size), right = mod(c->rank + 1, c->size);
    MPI_Request req[2];
    MPI_Irecv(in, (int)in_len, MPI_BYTE, left, RING_TAG, comm, &req[0]);
    MPI_Isend(out, (int)out_len, MPI_BYTE, right, RING_TAG, comm, &req[1]);
    /* A ring step waits for its neighbours only. */
    ptdp_wait_why why = ptdp_mpi_why(c, mine);
    why.members = &c->world_rank[left];
    why.nmembers = 1;
    return ptdp_mpi_wait(c->dev, 2, req, &why);
}

/* allreduce_ring.c's reduce-scatter, step for step: the running sum of a
 * segment is kept at work + off until passed on; segment r ends in out. */
static int ring_reduce_scatter(ptdp_comm *c, const ptdp_call *mine, const segments *ch,
                               const char *send, char *work, char *out, char *incoming, ptdp_traffic *t)
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
        int rc = ring_step(c, mine, outgoing, ch->len[send_segment], incoming, ch->len[recv_segment]);
        if (rc)
            return rc;
        ptdp_reduce2(sum, send + ch->off[recv_segment], incoming, ch->len[recv_segment] / es,
                     mine->dtype, mine->rop);
        t->sent += (double)ch->len[send_segment];
        t->recv += (double)ch->len[recv_segment];
    }
    return 0;
}

/* The all-gather: every complete segment travels around once, received
 * straight into its place in buf. */
static int ring_all_gather(ptdp_comm *c, const ptdp_call *mine, const segments *ch, char *buf, ptdp_traffic *t)
{
    int n = c->size, r = c->rank;
    for (int s = 0; s < n - 1; s++) {
        int send_segment = mod(r - s, n), recv_segment = mod(r - s - 1, n);
        int rc = ring_step(c, mine, buf + ch->off[send_segment], ch->len[send_segment],
                           buf + ch->off[recv_segment], ch->len[recv_segment]);
        if (rc)
            return rc;
        t->sent += (double)ch->len[send_segment];
        t->recv += (double)ch->len[recv_segment];
    }
    return 0;
}

int ptdp_mpi_ring_all_reduce(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    segments ch;
    int rc = cut(c, mine, &ch);
    if (rc)
        return rc;
    char *incoming = ptdp_mpi_scratch(c, ch.max_len + 1);
    if (!incoming)
        return PTDP_ENOMEM;
    char *recv = mine->recv, *my_segment = recv + ch.off[c->rank];
    /* recv is the workspace, as with threads (in place too). */
    if ((rc = ring_reduce_scatter(c, mine, &ch, mine->send, recv, my_segment, incoming, t)) != 0)
        return rc;
    if (mine->rop == PTDP_AVG)
        ptdp_divide(my_segment, ch.len[c->rank] / ptdp_dtype_size(mine->dtype), mine->dtype, c->size);
    return ring_all_gather(c, mine, &ch, recv, t);
}

int ptdp_mpi_ring_reduce_scatter(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    segments ch;
    int rc = cut(c, mine, &ch);
    if (rc)
        return rc;
    size_t S = bytes_of(mine, mine->count), pad = (S + 63) / 64 * 64;
    /* Out of place the running sums need a workspace of the full vector. */
    char *scratch = ptdp_mpi_scratch(c, pad + ch.max_len + 1);
    if (!scratch)
        return PTDP_ENOMEM;
    char *work = mine->in_place ? (char *)mine->recv : scratch;
    char *out = mine->in_place ? work + ch.off[c->rank] : (char *)mine->recv;
    rc = ring_reduce_scatter(c, mine, &ch, mine->send, work, out, scratch + pad, t);
    if (rc == 0 && mine->rop == PTDP_AVG)
        ptdp_divide(out, ch.len[c->rank] / ptdp_dtype_size(mine->dtype), mine->dtype, c->size);
    return rc;
}

int ptdp_mpi_ring_all_gather(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    segments ch;
    int rc = cut(c, mine, &ch);
    if (rc)
        return rc;
    char *recv = mine->recv;
    if (!mine->in_place)
        ptdp_copy(recv + ch.off[c->rank], mine->send, ch.len[c->rank]);
    return ring_all_gather(c, mine, &ch, recv, t);
}

/* ------------------------------------------------- the library's own */

static MPI_Datatype mpi_type(ptdp_dtype t)
{
    switch (t) {
    case PTDP_F32: return MPI_FLOAT;
    case PTDP_F64: return MPI_DOUBLE;
    case PTDP_I32: return MPI_INT32_T;
    case PTDP_I64: return MPI_INT64_T;
    case PTDP_U8:  return MPI_UINT8_T;
    default:       return MPI_DATATYPE_NULL;
    }
}

/* MPI_Allreduce; AVG is a sum divided by N afterwards.  A type MPI has no
 * name for goes the default way. */
int ptdp_mpi_library_all_reduce(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    MPI_Datatype type = mpi_type(mine->dtype);
    if (type == MPI_DATATYPE_NULL)
        return ptdp_mpi_direct_all_reduce(c, calls, t);
    int n = 0, rc = ptdp_mpi_count(c, mine->count, &n);
    if (rc)
        return rc;
    MPI_Op op = mine->rop == PTDP_MAX ? MPI_MAX : mine->rop == PTDP_MIN ? MPI_MIN : MPI_SUM;
    /* The blocking call, the library's fastest path (its non-blocking twin
     * runs a slower generic schedule that only moves when polled).  It
     * needs no deadline: after the meeting every member is inside this very
     * call, so nobody can be waited for who is not coming — only a dead
     * process, and mpirun ends the job then. */
    MPI_Allreduce(mine->send == mine->recv ? MPI_IN_PLACE : mine->send, mine->recv, n, type, op,
                  mpi_group_of(c)->coll);
    if (mine->rop == PTDP_AVG)
        ptdp_divide(mine->recv, mine->count, mine->dtype, c->size);
    /* The ring's bytes: every segment but r, r-1 (reduce-scatter) and r+1, r
     * (all-gather). */
    segments ch;
    cut(c, mine, &ch);
    size_t S = bytes_of(mine, mine->count);
    if (c->size > 1) {
        int r = c->rank, N = c->size;
        t->sent += (double)(S - ch.len[r]) + (double)(S - ch.len[mod(r + 1, N)]);
        t->recv += (double)(S - ch.len[mod(r - 1, N)]) + (double)(S - ch.len[r]);
    }
    return 0;
}

/* The raw yardstick for the benchmark (mpi.h): the library's blocking call
 * with nothing of ptdp around it. */
int ptdp_mpi_time_all_reduce(ptdp_device *dev, const void *send, void *recv, size_t count,
                             int dtype, int samples, int batch, double *seconds)
{
    MPI_Datatype type = mpi_type((ptdp_dtype)dtype);
    int n = 0, rc = ptdp_mpi_count(dev->world, count, &n);
    if (rc)
        return rc;
    if (type == MPI_DATATYPE_NULL)
        return ptdp_fail(dev, PTDP_EINVAL, "MPI has no type for %s", ptdp_dtype_name((ptdp_dtype)dtype));
    MPI_Comm comm = mpi_group_of(dev->world)->coll;
    for (int s = 0; s < samples; s++) {
        MPI_Barrier(comm);
        double t0 = ptdp_wall_now();
        for (int b = 0; b < batch; b++)
            MPI_Allreduce(send, recv, n, type, MPI_SUM, comm);
        seconds[s] = (ptdp_wall_now() - t0) / batch;
    }
    return 0;
}
