/*
 * comm.c — the public collectives and messages: check, meet, run, account.
 *
 * Every collective call goes through the same five steps, whatever the
 * operation and whatever the backend:
 *
 *   1. check the arguments      a bad root or a NULL buffer fails the
 *                               device with the call's name and file:line
 *                               (check.c)
 *   2. meet the group           post my call, wait for every member's
 *   3. check agreement          same operation, count, type, op, root?
 *                               otherwise report every member's call
 *                               (check.c)
 *   4. move the data            ops->all_reduce[algo](…) etc.
 *   5. account                  bytes per operation and per group, the
 *                               virtual clock, one trace event
 *
 * The virtual clock of a collective (clock.h):
 *
 *   start = max over members of their clock     (the last one to arrive)
 *   end   = start + cost(op, S bytes, n)        (modelled on real links)
 *
 * where the links are the network when the members' world ranks span more
 * than one node of the profile (clock.h: ptdp_cost_collective_nodes); the
 * communicator counts its nodes once, at its first collective.
 *   idle += start - my clock;  comm += cost
 *
 * A non-blocking collective (…_start, then ptdp_wait; stream.c) takes the
 * same five steps at its start, with the same rule on the members'
 * communication streams instead of their compute streams:
 *
 *   start = max over members of max(caller's clock, its stream's clock)
 *   end   = start + cost;   the stream is busy until end, the caller goes on
 *
 * and so does a blocking collective marked overlappable inside an
 * overlapped F&B pair (pair.c), whose clock at the meeting is its stream's
 * (at least where the pair began), not its caller's.
 *
 * Point-to-point messages model an asynchronous send, as GPUs overlap
 * sends with compute: the sender is charged alpha + bytes/beta and moves
 * on; the message arrives at t_send + alpha + bytes/beta; a receive
 * completes at max(t_recv, arrival).  (On the host the send still blocks
 * until the receiver has copied the data — that is the rendezvous.)
 * Between world ranks in different nodes alpha and beta are the network's
 * (ptdp_cost_message_between).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "comm/comm_impl.h"
#include "ptdp/clock.h"
#include "ptdp/error.h"
#include "ptdp/tensor.h"
#include "ptdp/trace.h"
#include "runtime/device_impl.h"

int ptdp_comm_rank(const ptdp_comm *c) { return c ? c->rank : -1; }
int ptdp_comm_size(const ptdp_comm *c) { return c ? c->size : 0; }
const char *ptdp_comm_name(const ptdp_comm *c) { return c ? c->name : "(null)"; }
struct ptdp_device *ptdp_comm_device(const ptdp_comm *c) { return c ? c->dev : NULL; }

int ptdp_comm_world_rank(const ptdp_comm *c, int r)
{
    return c && r >= 0 && r < c->size ? c->world_rank[r] : -1;
}

void ptdp_comm_free(ptdp_comm *c)
{
    if (c) {
        ptdp_stream_release(c);
        c->ops->free(c);
    }
}

/* -------------------------------------------------------- 5. account */

static void count_bytes(ptdp_device *dev, const ptdp_comm *c, ptdp_coll op, ptdp_traffic t)
{
    ptdp_comm_stats *s = &dev->stats;
    s->calls[op]++;
    s->bytes_sent[op] += t.sent;
    s->bytes_recv[op] += t.recv;
    s->total_sent += t.sent;
    s->total_recv += t.recv;

    /* Per group name; past PTDP_MAX_GROUP_NAMES names the last slot
     * collects the rest as "(other)". */
    int g = 0;
    while (g < s->ngroups && strcmp(s->group[g].name, c->name) != 0)
        g++;
    if (g == s->ngroups) {
        if (s->ngroups < PTDP_MAX_GROUP_NAMES) {
            snprintf(s->group[g].name, sizeof s->group[g].name, "%s", c->name);
            s->ngroups++;
        } else {
            g = PTDP_MAX_GROUP_NAMES - 1;
            snprintf(s->group[g].name, sizeof s->group[g].name, "(other)");
        }
    }
    s->group[g].sent += t.sent;
    s->group[g].recv += t.recv;
    s->group[g].calls++;
}

static void trace_event(ptdp_device *dev, const char *name, const char *cat,
                        double v0, double v1, double w0, double w1, double bytes)
{
    ptdp_trace_event e;
    memset(&e, 0, sizeof e);
    snprintf(e.name, sizeof e.name, "%s", name);
    snprintf(e.cat, sizeof e.cat, "%s", cat);
    e.v0 = v0;
    e.v1 = v1;
    e.w0 = w0 - dev->wall0;
    e.w1 = w1 - dev->wall0;
    e.bytes = bytes;
    ptdp_trace_add(dev->trace, &e);
}

/* Bytes S of the cost model (clock.h): the full vector, for all_to_all
 * one device's whole send buffer, for all_to_allv the most any member
 * sends to or receives from the others (its link is the busiest). */
static size_t model_bytes(const ptdp_comm *c, const ptdp_call *k, const ptdp_call *const *calls)
{
    size_t bytes = k->count * ptdp_dtype_size(k->dtype);
    if (k->op == PTDP_COLL_ALL_TO_ALLV) {
        unsigned long long busiest = 0;
        for (int r = 0; r < c->size; r++) {
            if (calls[r]->vsent > busiest)
                busiest = calls[r]->vsent;
            if (calls[r]->vrecv > busiest)
                busiest = calls[r]->vrecv;
        }
        return (size_t)busiest;
    }
    return k->op == PTDP_COLL_ALL_TO_ALL ? bytes * (size_t)c->size : bytes;
}

/* How many nodes the members span: counted once (the profile and the
 * members of a communicator never change). */
static int comm_nodes(ptdp_comm *c)
{
    if (c->nodes == 0)
        c->nodes = ptdp_profile_nodes_spanned(c->dev->profile, c->world_rank, c->size);
    return c->nodes;
}

/* One message between members `from` and `to` of c. */
static double message_cost(const ptdp_comm *c, size_t bytes, int from, int to)
{
    return ptdp_cost_message_between(c->dev->profile, bytes, c->world_rank[from], c->world_rank[to]);
}

static void account_collective(ptdp_comm *c, const ptdp_call *mine, const ptdp_call *const *calls,
                               ptdp_traffic t, double wall_start, ptdp_request *req)
{
    ptdp_device *dev = c->dev;
    double start = mine->clock;
    for (int r = 0; r < c->size; r++)
        if (calls[r]->clock > start)
            start = calls[r]->clock;
    ptdp_coll model = mine->op == PTDP_COLL_SPLIT ? PTDP_COLL_BARRIER : mine->op;
    double cost = ptdp_cost_collective_nodes(dev->profile, model, model_bytes(c, mine, calls), c->size, comm_nodes(c));
    if (req != NULL || ptdp_pair_overlaps(dev)) {   /* on the communication stream: the caller goes on */
        char name[48];
        snprintf(name, sizeof name, "%s %s", ptdp_coll_name(mine->op), c->name);
        count_bytes(dev, c, mine->op, t);
        if (req != NULL)
            ptdp_stream_record(dev, req, name, start, cost, t.sent, wall_start,
                               dev->trace ? ptdp_wall_now() : 0.0);
        else
            ptdp_pair_charge(dev, name, start, cost, t.sent, wall_start, dev->trace ? ptdp_wall_now() : 0.0);
        return;
    }
    double idle = start - dev->clock.now;
    if (ptdp_pair_marked(dev))   /* overlappable, but no pair to hide it: exposed */
        dev->clock.pairable_s += cost;

    dev->clock.idle_s += idle;
    dev->clock.comm_s += cost;
    dev->clock.now = start + cost;
    count_bytes(dev, c, mine->op, t);

    if (dev->trace) {
        double wall_end = ptdp_wall_now();
        char name[48];
        if (idle > 0)
            trace_event(dev, "wait", "idle", start - idle, start, wall_start, wall_start, 0);
        snprintf(name, sizeof name, "%s %s", ptdp_coll_name(mine->op), c->name);
        trace_event(dev, name, "comm", start, start + cost, wall_start, wall_end, t.sent);
    }
}

/* ------------------------------------------------- the collective path */

/* Steps 2–5 for a collective whose arguments are checked; on the
 * communication stream if req is not NULL. */
static int run_collective(ptdp_comm *c, ptdp_call *mine, ptdp_coll_fn move, ptdp_request *req)
{
    ptdp_device *dev = c->dev;
    double wall_start = dev->trace ? ptdp_wall_now() : 0.0;
    const ptdp_call *calls[PTDP_MAX_DEVICES];
    ptdp_traffic t = { 0.0, 0.0 };

    mine->clock = req != NULL ? ptdp_stream_ready(dev) : ptdp_pair_overlaps(dev) ? ptdp_pair_ready(dev)
                                                                                : dev->clock.now;
    mine->seq = c->ncalls++;
    int rc = c->ops->meet(c, mine, calls);
    if (rc == 0)
        rc = ptdp_check_agreement(c, calls);
    /* The group met: no one is still in an earlier call, and everyone
     * agreed, so the algorithm may read the other members' buffers. */
    if (rc == 0 && move)
        rc = move(c, calls, &t);
    if (rc == 0)
        account_collective(c, mine, calls, t, wall_start, req);
    return rc;
}

/* The common start of every public call: a usable communicator in a world
 * that has not failed. */
static int enter(ptdp_comm *c, ptdp_coll op, const char *file, int line)
{
    if (!c || !c->dev) {
        /* No communicator, so no device through it: the thread's own
         * device (runtime/device.c) fails with the call site. */
        ptdp_device *dev = ptdp_device_current();
        if (dev == NULL)
            return PTDP_EINVAL;
        const char *slash = file ? strrchr(file, '/') : NULL;
        return ptdp_fail(dev, PTDP_EINVAL, "ptdp_%s at %s:%d: the communicator is NULL (a group this device "
                         "is not a member of, or one not made yet)", ptdp_coll_name(op),
                         slash ? slash + 1 : file ? file : "?", line);
    }
    return ptdp_aborted(c->dev) ? PTDP_EABORTED : 0;
}

static ptdp_call new_call(ptdp_coll op, size_t count, ptdp_dtype t, const char *file, int line)
{
    ptdp_call k;
    memset(&k, 0, sizeof k);
    k.op = op;
    k.count = count;
    k.dtype = t;
    k.root = 0;
    k.algo = PTDP_ALGO_DEFAULT;
    k.file = file;
    k.line = line;
    return k;
}

/* DEFAULT means the device's algorithm (--algo), itself DEFAULT = shm. */
static ptdp_algo resolve_algo(const ptdp_comm *c, ptdp_algo a)
{
    if (a == PTDP_ALGO_DEFAULT)
        a = c->dev->algo;
    return a == PTDP_ALGO_DEFAULT ? PTDP_ALGO_SHM : a;
}

/* The backend operation that moves a checked call's data.  reduce_scatter
 * and all_gather run as the ring when the device's algorithm is the ring,
 * and over shared memory otherwise (naive has no such halves). */
static ptdp_coll_fn backend_op(ptdp_comm *c, ptdp_call *k)
{
    const struct ptdp_comm_ops *ops = c->ops;
    ptdp_algo half = resolve_algo(c, PTDP_ALGO_DEFAULT) == PTDP_ALGO_RING ? PTDP_ALGO_RING
                                                                            : PTDP_ALGO_SHM;
    switch (k->op) {
    case PTDP_COLL_BROADCAST:      return ops->broadcast;
    case PTDP_COLL_REDUCE:         return ops->reduce;
    case PTDP_COLL_GATHER:         return ops->gather;
    case PTDP_COLL_SCATTER:        return ops->scatter;
    case PTDP_COLL_ALL_TO_ALL:     return ops->all_to_all;
    case PTDP_COLL_ALL_TO_ALLV:    return ops->all_to_allv;
    case PTDP_COLL_ALL_REDUCE:     k->algo = resolve_algo(c, k->algo);
                                   return ops->all_reduce[k->algo];
    case PTDP_COLL_ALL_GATHER:     k->algo = half;
                                   return ops->all_gather[k->algo];
    case PTDP_COLL_REDUCE_SCATTER: k->algo = half;
                                   return ops->reduce_scatter[k->algo];
    default:                       return NULL;   /* barrier: meeting is all */
    }
}

/* Steps 1 to 5 for one collective call, started on the communication
 * stream if req is not NULL. */
static int collective_on(ptdp_comm *c, ptdp_call *k, const void *send, ptdp_request *req)
{
    int rc = enter(c, k->op, k->file, k->line);
    if (rc == 0)
        rc = ptdp_check_call(c, k, send);
    if (rc == 0 && req != NULL && req->active)
        rc = ptdp_bad_call(c, k, "the request is still active (started and not waited for)");
    if (rc)
        return rc;
    ptdp_coll_fn move = backend_op(c, k);
    if (move == NULL && k->op != PTDP_COLL_BARRIER)
        return ptdp_bad_call(c, k, "the %s backend has no algorithm %s", c->ops->backend,
                             ptdp_algo_name(k->algo));
    return run_collective(c, k, move, req);
}

static int collective(ptdp_comm *c, ptdp_call *k, const void *send)
{
    return collective_on(c, k, send, NULL);
}

int ptdp_barrier_at(ptdp_comm *c, const char *file, int line)
{
    ptdp_call k = new_call(PTDP_COLL_BARRIER, 0, PTDP_U8, file, line);
    return collective(c, &k, NULL);
}

int ptdp_broadcast_at(ptdp_comm *c, void *buf, size_t count, ptdp_dtype t,
                      int root, const char *file, int line)
{
    ptdp_call k = new_call(PTDP_COLL_BROADCAST, count, t, file, line);
    k.root = root;
    k.recv = buf;
    return collective(c, &k, buf);
}

int ptdp_reduce_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                   ptdp_dtype t, ptdp_op op, int root, const char *file, int line)
{
    ptdp_call k = new_call(PTDP_COLL_REDUCE, count, t, file, line);
    k.rop = op;
    k.root = root;
    k.recv = recv;
    return collective(c, &k, send);
}

int ptdp_all_reduce_algo_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                            ptdp_dtype t, ptdp_op op, ptdp_algo algo,
                            const char *file, int line)
{
    ptdp_call k = new_call(PTDP_COLL_ALL_REDUCE, count, t, file, line);
    k.rop = op;
    k.algo = algo;
    k.recv = recv;
    return collective(c, &k, send);
}

int ptdp_all_reduce_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                       ptdp_dtype t, ptdp_op op, const char *file, int line)
{
    return ptdp_all_reduce_algo_at(c, send, recv, count, t, op, PTDP_ALGO_DEFAULT, file, line);
}

int ptdp_all_gather_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                       ptdp_dtype t, const char *file, int line)
{
    ptdp_call k = new_call(PTDP_COLL_ALL_GATHER, count, t, file, line);
    k.recv = recv;
    return collective(c, &k, send);
}

int ptdp_reduce_scatter_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                           ptdp_dtype t, ptdp_op op, const char *file, int line)
{
    ptdp_call k = new_call(PTDP_COLL_REDUCE_SCATTER, count, t, file, line);
    k.rop = op;
    k.recv = recv;
    return collective(c, &k, send);
}

/* Steps 1 to 5 on the communication stream; the result then waits aside
 * for ptdp_wait, recv poisoned (stream.c). */
static int start_on(ptdp_comm *c, ptdp_call *k, const void *send, ptdp_request *req)
{
    int rc = collective_on(c, k, send, req);
    if (rc == 0)
        ptdp_stream_hold(c, k, req);
    return rc;
}

/* A start needs somewhere to put what ptdp_wait waits for. */
static int start_without_request(ptdp_comm *c, ptdp_call *k)
{
    int rc = enter(c, k->op, k->file, k->line);
    return rc ? rc : ptdp_bad_call(c, k, "req is NULL (a non-blocking call needs a ptdp_request)");
}

int ptdp_all_reduce_start_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                             ptdp_dtype t, ptdp_op op, ptdp_request *req,
                             const char *file, int line)
{
    ptdp_call k = new_call(PTDP_COLL_ALL_REDUCE, count, t, file, line);
    k.rop = op;
    k.recv = recv;
    if (req == NULL)
        return start_without_request(c, &k);
    return start_on(c, &k, send, req);
}

int ptdp_reduce_scatter_start_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                                 ptdp_dtype t, ptdp_op op, ptdp_request *req,
                                 const char *file, int line)
{
    ptdp_call k = new_call(PTDP_COLL_REDUCE_SCATTER, count, t, file, line);
    k.rop = op;
    k.recv = recv;
    if (req == NULL)
        return start_without_request(c, &k);
    return start_on(c, &k, send, req);
}

int ptdp_all_gather_start_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                             ptdp_dtype t, ptdp_request *req, const char *file, int line)
{
    ptdp_call k = new_call(PTDP_COLL_ALL_GATHER, count, t, file, line);
    k.recv = recv;
    if (req == NULL)
        return start_without_request(c, &k);
    return start_on(c, &k, send, req);
}

int ptdp_gather_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                   ptdp_dtype t, int root, const char *file, int line)
{
    ptdp_call k = new_call(PTDP_COLL_GATHER, count, t, file, line);
    k.root = root;
    k.recv = recv;
    return collective(c, &k, send);
}

int ptdp_scatter_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                    ptdp_dtype t, int root, const char *file, int line)
{
    ptdp_call k = new_call(PTDP_COLL_SCATTER, count, t, file, line);
    k.root = root;
    k.recv = recv;
    return collective(c, &k, send);
}

int ptdp_all_to_all_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                       ptdp_dtype t, const char *file, int line)
{
    ptdp_call k = new_call(PTDP_COLL_ALL_TO_ALL, count, t, file, line);
    k.recv = recv;
    return collective(c, &k, send);
}

int ptdp_all_to_allv_at(ptdp_comm *c, const void *send, const size_t *send_counts,
                        const size_t *send_displs, void *recv, const size_t *recv_counts,
                        const size_t *recv_displs, ptdp_dtype t, const char *file, int line)
{
    int rc = enter(c, PTDP_COLL_ALL_TO_ALLV, file, line);
    if (rc)
        return rc;
    /* Packed displacements live here: the call is blocking, so they
     * outlive every member's reading of them. */
    size_t packed_send[PTDP_MAX_DEVICES], packed_recv[PTDP_MAX_DEVICES];
    ptdp_call k = new_call(PTDP_COLL_ALL_TO_ALLV, 0, t, file, line);
    k.recv = recv;
    k.scounts = send_counts;
    k.rcounts = recv_counts;
    k.sdispls = send_displs ? send_displs : packed_send;
    k.rdispls = recv_displs ? recv_displs : packed_recv;
    if ((rc = ptdp_check_tables(c, &k, send_displs ? NULL : packed_send,
                                recv_displs ? NULL : packed_recv)) != 0)
        return rc;
    return collective(c, &k, send);
}

int ptdp_all_to_all_counts_at(ptdp_comm *c, const size_t *send_counts, size_t *recv_counts,
                              const char *file, int line)
{
    int rc = enter(c, PTDP_COLL_ALL_TO_ALL, file, line);
    if (rc)
        return rc;
    int64_t out[PTDP_MAX_DEVICES], in[PTDP_MAX_DEVICES];
    ptdp_call k = new_call(PTDP_COLL_ALL_TO_ALL, 1, PTDP_I64, file, line);
    if (send_counts == NULL || recv_counts == NULL)
        return ptdp_bad_call(c, &k, "ptdp_all_to_all_counts: %s is NULL",
                             send_counts == NULL ? "send_counts" : "recv_counts");
    for (int j = 0; j < c->size; j++)
        out[j] = (int64_t)send_counts[j];
    k.recv = in;
    if ((rc = collective(c, &k, out)) != 0)
        return rc;
    for (int i = 0; i < c->size; i++)
        recv_counts[i] = (size_t)in[i];
    return 0;
}

int ptdp_comm_split_at(ptdp_comm *c, int color, int key, const char *name,
                       ptdp_comm **out, const char *file, int line)
{
    int rc = enter(c, PTDP_COLL_SPLIT, file, line);
    if (rc)
        return rc;
    ptdp_call k = new_call(PTDP_COLL_SPLIT, 0, PTDP_U8, file, line);
    k.color = color;
    k.key = key;
    if (!out)
        return ptdp_bad_call(c, &k, "out is NULL");
    *out = NULL;

    const ptdp_call *calls[PTDP_MAX_DEVICES];
    ptdp_device *dev = c->dev;
    double wall_start = dev->trace ? ptdp_wall_now() : 0.0;
    k.clock = dev->clock.now;
    k.seq = c->ncalls++;
    if ((rc = c->ops->meet(c, &k, calls)) != 0 || (rc = ptdp_check_agreement(c, calls)) != 0)
        return rc;
    if ((rc = c->ops->split(c, calls, name ? name : "group", out)) != 0)
        return rc;
    ptdp_traffic none = { 0.0, 0.0 };
    account_collective(c, &k, calls, none, wall_start, NULL);
    return 0;
}

/* --------------------------------------------------- point to point */

int ptdp_send_at(ptdp_comm *c, const void *buf, size_t count, ptdp_dtype t,
                 int dst, int tag, const char *file, int line)
{
    int rc = enter(c, PTDP_COLL_SEND, file, line);
    if (rc)
        return rc;
    ptdp_device *dev = c->dev;
    ptdp_call k = new_call(PTDP_COLL_SEND, count, t, file, line);
    k.root = dst;
    k.tag = tag;
    if ((rc = ptdp_check_peer(c, &k, dst)) != 0 || (rc = ptdp_check_call(c, &k, buf)) != 0)
        return rc;

    double wall_start = dev->trace ? ptdp_wall_now() : 0.0;
    ptdp_traffic tr = { 0.0, 0.0 };
    k.clock = dev->clock.now;
    if ((rc = c->ops->send(c, &k, &tr)) != 0)
        return rc;

    /* The sender pays alpha + bytes/beta and goes on (see the top). */
    double cost = message_cost(c, count * ptdp_dtype_size(t), c->rank, dst);
    dev->clock.comm_s += cost;
    dev->clock.now = k.clock + cost;
    count_bytes(dev, c, PTDP_COLL_SEND, tr);
    if (dev->trace) {
        char name[48];
        snprintf(name, sizeof name, "send\xe2\x86\x92%d %s", dst, c->name);
        trace_event(dev, name, "send", k.clock, k.clock + cost, wall_start, ptdp_wall_now(), tr.sent);
    }
    return 0;
}

int ptdp_recv_at(ptdp_comm *c, void *buf, size_t count, ptdp_dtype t,
                 int src, int tag, const char *file, int line)
{
    int rc = enter(c, PTDP_COLL_RECV, file, line);
    if (rc)
        return rc;
    ptdp_device *dev = c->dev;
    ptdp_call k = new_call(PTDP_COLL_RECV, count, t, file, line);
    k.root = src;
    k.tag = tag;
    k.recv = buf;
    if ((rc = ptdp_check_peer(c, &k, src)) != 0 || (rc = ptdp_check_call(c, &k, NULL)) != 0)
        return rc;

    double wall_start = dev->trace ? ptdp_wall_now() : 0.0;
    ptdp_traffic tr = { 0.0, 0.0 };
    ptdp_call sender;
    memset(&sender, 0, sizeof sender);
    k.clock = dev->clock.now;
    rc = c->ops->recv(c, &k, &sender, &tr);
    /* A mismatch the backend saw in the sender's call (it is in `sender`);
     * a sender that returned without sending failed this device in the
     * waiting layer already, with a report of its own. */
    if (rc == PTDP_EMISMATCH && dev->status == 0) {
        char mine[192], theirs[192];
        ptdp_describe_call(&k, mine, sizeof mine);
        ptdp_describe_call(&sender, theirs, sizeof theirs);
        return ptdp_fail(dev, PTDP_EMISMATCH,
                         "mismatched message in group '%s' tag %d: rank %d %s; rank %d %s",
                         c->name, tag, src, theirs, c->rank, mine);
    }
    if (rc)
        return rc;

    /* Arrival = the send's start + its transfer; we may have waited. */
    double arrival = sender.clock + message_cost(c, count * ptdp_dtype_size(t), src, c->rank);
    double done = arrival > k.clock ? arrival : k.clock;
    dev->clock.idle_s += done - k.clock;
    dev->clock.now = done;
    count_bytes(dev, c, PTDP_COLL_RECV, tr);
    if (dev->trace) {
        /* Show the wait for the sender as idle — a pipeline's bubble is
         * made of these — and the transfer itself as the recv. */
        double sent = sender.clock > k.clock ? sender.clock : k.clock;
        char name[48];
        if (sent > k.clock)
            trace_event(dev, "wait", "idle", k.clock, sent, wall_start, wall_start, 0);
        snprintf(name, sizeof name, "recv\xe2\x86\x90%d %s", src, c->name);
        trace_event(dev, name, "recv", sent, done, wall_start, ptdp_wall_now(), 0);
    }
    return 0;
}
