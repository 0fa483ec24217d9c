/*
 * comm.c — the public collectives and messages: check, meet, run, account.
 *
 * Every collective call goes through the same five steps, whatever the
 * operation and whatever the backend:
 *
 *   1. check the arguments      a bad root or a NULL buffer fails the
 *                               device with the call's name and file:line
 *   2. meet the group           post my call, wait for every member's
 *   3. check agreement          same operation, count, type, op, root?
 *                               otherwise report every member's call
 *   4. move the data            ops->all_reduce[algo](…) etc.
 *   5. account                  bytes per operation and per group, the
 *                               virtual clock, one trace event
 *
 * The virtual clock of a collective (clock.h):
 *
 *   start = max over members of their clock     (the last one to arrive)
 *   end   = start + cost(op, S bytes, n)        (modelled on real links)
 *   idle += start - my clock;  comm += cost
 *
 * Point-to-point messages model an asynchronous send, as GPUs overlap
 * sends with compute: the sender is charged alpha + bytes/beta and moves
 * on; the message arrives at t_send + alpha + bytes/beta; a receive
 * completes at max(t_recv, arrival).  (On the host the send still blocks
 * until the receiver has copied the data — that is the rendezvous.)
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "comm_impl.h"
#include "ptdp/clock.h"
#include "ptdp/error.h"
#include "ptdp/tensor.h"
#include "ptdp/trace.h"

/* ----------------------------------------------------------------- names */

static const char *const algo_names[PTDP_ALGO_COUNT] = { "default", "naive", "ring", "shm" };
static const char *const coll_names[PTDP_COLL_COUNT] = {
    "barrier", "broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter",
    "gather", "scatter", "all_to_all", "send", "recv", "split",
};
static const char *const op_names[PTDP_OP_COUNT] = { "sum", "avg", "max", "min" };

const char *ptdp_algo_name(ptdp_algo a)
{
    return (unsigned)a < PTDP_ALGO_COUNT ? algo_names[a] : "?";
}

int ptdp_algo_parse(const char *s, ptdp_algo *out)
{
    for (int a = 0; s && a < PTDP_ALGO_COUNT; a++)
        if (strcmp(s, algo_names[a]) == 0) {
            *out = (ptdp_algo)a;
            return 0;
        }
    return PTDP_EINVAL;
}

const char *ptdp_coll_name(ptdp_coll c)
{
    return (unsigned)c < PTDP_COLL_COUNT ? coll_names[c] : "?";
}

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
    if (c)
        c->ops->free(c);
}

static const char *base_name(const char *file)
{
    const char *slash = file ? strrchr(file, '/') : NULL;
    return slash ? slash + 1 : file ? file : "?";
}

/* ----------------------------------------------------- 1. the arguments */

static bool reduces(ptdp_coll op)
{
    return op == PTDP_COLL_REDUCE || op == PTDP_COLL_ALL_REDUCE || op == PTDP_COLL_REDUCE_SCATTER;
}

static bool rooted(ptdp_coll op)
{
    return op == PTDP_COLL_BROADCAST || op == PTDP_COLL_REDUCE ||
           op == PTDP_COLL_GATHER || op == PTDP_COLL_SCATTER;
}

static bool has_algo(ptdp_coll op)
{
    return op == PTDP_COLL_ALL_REDUCE || op == PTDP_COLL_REDUCE_SCATTER ||
           op == PTDP_COLL_ALL_GATHER;
}

static int bad_call(ptdp_comm *c, const ptdp_call *call, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int bad_call(ptdp_comm *c, const ptdp_call *call, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return ptdp_fail(c->dev, PTDP_EINVAL, "ptdp_%s at %s:%d (group '%s', rank %d of %d): %s",
                     ptdp_coll_name(call->op), base_name(call->file), call->line,
                     c->name, c->rank, c->size, why);
}

/* A buffer of `n` elements must exist when n > 0. */
static int check_buffer(ptdp_comm *c, const ptdp_call *call, const void *p, size_t n,
                        const char *what)
{
    if (n > 0 && p == NULL)
        return bad_call(c, call, "%s is NULL for %zu elements", what, n);
    return 0;
}

/* Two buffers are the same (in place) or do not overlap at all. */
static int check_overlap(ptdp_comm *c, const ptdp_call *call, const void *a, size_t an,
                         const void *b, size_t bn, bool same_allowed)
{
    uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
    if (!a || !b || an == 0 || bn == 0)
        return 0;
    if (a0 == b0 && same_allowed)
        return 0;
    if (a0 < b0 + bn && b0 < a0 + an)
        return bad_call(c, call, "send and recv buffers overlap%s",
                        same_allowed ? " without being the same (in place)" : "");
    return 0;
}

/* Element counts of this rank's send and recv buffers for the call. */
static void buffer_sizes(const ptdp_comm *c, const ptdp_call *call, size_t *ns, size_t *nr)
{
    size_t off, mine;
    ptdp_chunk(call->count, c->size, c->rank, &off, &mine);
    bool root = call->root == c->rank;
    switch (call->op) {
    case PTDP_COLL_BROADCAST:      *ns = 0; *nr = call->count; break;
    case PTDP_COLL_REDUCE:         *ns = call->count; *nr = root ? call->count : 0; break;
    case PTDP_COLL_ALL_REDUCE:     *ns = call->count; *nr = call->count; break;
    case PTDP_COLL_ALL_GATHER:     *ns = call->in_place ? 0 : mine; *nr = call->count; break;
    case PTDP_COLL_REDUCE_SCATTER: *ns = call->in_place ? 0 : call->count;
                                   *nr = call->in_place ? call->count : mine; break;
    case PTDP_COLL_GATHER:         *ns = mine; *nr = root ? call->count : 0; break;
    case PTDP_COLL_SCATTER:        *ns = root ? call->count : 0; *nr = mine; break;
    case PTDP_COLL_ALL_TO_ALL:     *ns = call->count * (size_t)c->size; *nr = *ns; break;
    case PTDP_COLL_SEND:           *ns = call->count; *nr = 0; break;
    case PTDP_COLL_RECV:           *ns = 0; *nr = call->count; break;
    default:                       *ns = 0; *nr = 0; break;
    }
}

static int check_call(ptdp_comm *c, ptdp_call *call, const void *send)
{
    if ((unsigned)call->dtype >= PTDP_DTYPE_COUNT)
        return bad_call(c, call, "unknown element type %d", (int)call->dtype);
    if (reduces(call->op) && (unsigned)call->rop >= PTDP_OP_COUNT)
        return bad_call(c, call, "unknown reduction %d", (int)call->rop);
    if (rooted(call->op) && (call->root < 0 || call->root >= c->size))
        return bad_call(c, call, "root %d is not a rank of a group of %d", call->root, c->size);
    if ((unsigned)call->algo >= PTDP_ALGO_COUNT)
        return bad_call(c, call, "unknown algorithm %d", (int)call->algo);
    size_t es = ptdp_dtype_size(call->dtype);
    size_t limit = SIZE_MAX / es / (size_t)c->size;
    if (call->count > limit)
        return bad_call(c, call, "count %zu is too large", call->count);

    /* Resolve PTDP_IN_PLACE: the input then lives inside recv. */
    if (send == PTDP_IN_PLACE) {
        if (call->op != PTDP_COLL_ALL_GATHER && call->op != PTDP_COLL_REDUCE_SCATTER)
            return bad_call(c, call, "PTDP_IN_PLACE is only for all_gather and reduce_scatter "
                            "(all_reduce and reduce take send == recv)");
        size_t off, len;
        ptdp_chunk(call->count, c->size, c->rank, &off, &len);
        call->in_place = 1;
        call->send = call->op == PTDP_COLL_ALL_GATHER && call->recv
                         ? (const char *)call->recv + off * es : call->recv;
    } else {
        call->send = send;
    }

    size_t ns, nr;
    buffer_sizes(c, call, &ns, &nr);
    int rc;
    if ((rc = check_buffer(c, call, call->send, ns, "send")) != 0 ||
        (rc = check_buffer(c, call, call->recv, nr, call->op == PTDP_COLL_BROADCAST ? "buf" : "recv")) != 0)
        return rc;
    if (call->in_place)
        return check_buffer(c, call, call->recv, call->count, "recv");
    bool same_ok = call->op == PTDP_COLL_ALL_REDUCE || call->op == PTDP_COLL_REDUCE;
    return check_overlap(c, call, call->send, ns * es, call->recv, nr * es, same_ok);
}

/* ------------------------------------------------------ 3. agreement */

static void describe_call(const ptdp_call *k, char *buf, size_t len)
{
    char dtype[8];
    const char *name = ptdp_dtype_name(k->dtype);
    size_t i = 0;
    for (; name && name[i] && i + 1 < sizeof dtype; i++)
        dtype[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
    dtype[i] = '\0';

    int n = snprintf(buf, len, "%s", ptdp_coll_name(k->op));
    if (k->op != PTDP_COLL_BARRIER && k->op != PTDP_COLL_SPLIT)
        n += snprintf(buf + n, len - (size_t)n, " count=%zu %s", k->count, dtype);
    if (reduces(k->op))
        n += snprintf(buf + n, len - (size_t)n, " op=%s", op_names[k->rop]);
    if (rooted(k->op))
        n += snprintf(buf + n, len - (size_t)n, " root=%d", k->root);
    if (has_algo(k->op))
        n += snprintf(buf + n, len - (size_t)n, " algo=%s", ptdp_algo_name(k->algo));
    snprintf(buf + n, len - (size_t)n, " at %s:%d", base_name(k->file), k->line);
}

static bool same_call(const ptdp_call *a, const ptdp_call *b)
{
    if (a->op != b->op || a->seq != b->seq)
        return false;
    if (a->op == PTDP_COLL_BARRIER || a->op == PTDP_COLL_SPLIT)
        return true;
    return a->count == b->count && a->dtype == b->dtype &&
           (!reduces(a->op) || a->rop == b->rop) &&
           (!rooted(a->op) || a->root == b->root) &&
           (!has_algo(a->op) || a->algo == b->algo);
}

static int check_agreement(ptdp_comm *c, const ptdp_call *const *calls)
{
    int n = c->size;
    for (int r = 1; r < n; r++)
        if (!same_call(calls[0], calls[r]))
            goto mismatch;
    return 0;

mismatch:;
    char msg[PTDP_MSG_MAX];
    int used = snprintf(msg, sizeof msg, "mismatched collectives in group '%s' (call #%llu):",
                        c->name, calls[c->rank]->seq);
    for (int r = 0; r < n && used < (int)sizeof msg; r++) {
        char one[192];
        describe_call(calls[r], one, sizeof one);
        used += snprintf(msg + used, sizeof msg - (size_t)used, "%s rank %d %s",
                         r ? ";" : "", r, one);
    }
    return ptdp_fail(c->dev, PTDP_EMISMATCH, "%s", msg);
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

/* Bytes S of the cost model (clock.h): the full vector, or for all_to_all
 * one device's whole send buffer. */
static size_t model_bytes(const ptdp_comm *c, const ptdp_call *k)
{
    size_t bytes = k->count * ptdp_dtype_size(k->dtype);
    return k->op == PTDP_COLL_ALL_TO_ALL ? bytes * (size_t)c->size : bytes;
}

static void account_collective(ptdp_comm *c, const ptdp_call *mine, const ptdp_call *const *calls,
                               ptdp_traffic t, double wall_start)
{
    ptdp_device *dev = c->dev;
    double start = mine->clock;
    for (int r = 0; r < c->size; r++)
        if (calls[r]->clock > start)
            start = calls[r]->clock;
    ptdp_coll model = mine->op == PTDP_COLL_SPLIT ? PTDP_COLL_BARRIER : mine->op;
    double cost = ptdp_cost_collective(dev->profile, model, model_bytes(c, mine), c->size);
    double idle = start - dev->clock.now;

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

/* Steps 2–5 for a collective whose arguments are checked. */
static int run_collective(ptdp_comm *c, ptdp_call *mine, ptdp_coll_fn move)
{
    ptdp_device *dev = c->dev;
    double wall_start = dev->trace ? ptdp_wall_now() : 0.0;
    const ptdp_call *calls[PTDP_MAX_DEVICES];
    ptdp_traffic t = { 0.0, 0.0 };

    mine->clock = dev->clock.now;
    mine->seq = c->ncalls++;
    int rc = c->ops->meet(c, mine, calls);
    if (rc == 0)
        rc = check_agreement(c, calls);
    /* The group met: no one is still in an earlier call, and everyone
     * agreed, so the algorithm may read the other members' buffers. */
    if (rc == 0 && move)
        rc = move(c, calls, &t);
    if (rc == 0)
        account_collective(c, mine, calls, t, wall_start);
    return rc;
}

/* The common start of every public call: a usable communicator in a world
 * that has not failed. */
static int enter(ptdp_comm *c)
{
    if (!c || !c->dev)
        return PTDP_EINVAL;
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

static ptdp_algo resolve_algo(const ptdp_comm *c, ptdp_algo a)
{
    if (a == PTDP_ALGO_DEFAULT)
        a = c->dev->algo;
    return a == PTDP_ALGO_DEFAULT ? PTDP_ALGO_SHM : a;
}

int ptdp_barrier_at(ptdp_comm *c, const char *file, int line)
{
    int rc = enter(c);
    if (rc)
        return rc;
    ptdp_call k = new_call(PTDP_COLL_BARRIER, 0, PTDP_U8, file, line);
    return run_collective(c, &k, NULL);     /* meeting is the barrier */
}

int ptdp_broadcast_at(ptdp_comm *c, void *buf, size_t count, ptdp_dtype t,
                      int root, const char *file, int line)
{
    int rc = enter(c);
    if (rc)
        return rc;
    ptdp_call k = new_call(PTDP_COLL_BROADCAST, count, t, file, line);
    k.root = root;
    k.recv = buf;
    if ((rc = check_call(c, &k, buf)) != 0)
        return rc;
    return run_collective(c, &k, c->ops->broadcast);
}

int ptdp_reduce_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                   ptdp_dtype t, ptdp_op op, int root, const char *file, int line)
{
    int rc = enter(c);
    if (rc)
        return rc;
    ptdp_call k = new_call(PTDP_COLL_REDUCE, count, t, file, line);
    k.rop = op;
    k.root = root;
    k.recv = recv;
    if ((rc = check_call(c, &k, send)) != 0)
        return rc;
    return run_collective(c, &k, c->ops->reduce);
}

int ptdp_all_reduce_algo_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                            ptdp_dtype t, ptdp_op op, ptdp_algo algo,
                            const char *file, int line)
{
    int rc = enter(c);
    if (rc)
        return rc;
    ptdp_call k = new_call(PTDP_COLL_ALL_REDUCE, count, t, file, line);
    k.rop = op;
    k.algo = algo;
    k.recv = recv;
    if ((rc = check_call(c, &k, send)) != 0)
        return rc;
    k.algo = resolve_algo(c, algo);
    return run_collective(c, &k, c->ops->all_reduce[k.algo]);
}

int ptdp_all_reduce_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                       ptdp_dtype t, ptdp_op op, const char *file, int line)
{
    return ptdp_all_reduce_algo_at(c, send, recv, count, t, op, PTDP_ALGO_DEFAULT, file, line);
}

/* reduce_scatter and all_gather run as the ring when the device's algorithm
 * is the ring, and over shared memory otherwise (naive has no such half). */
static ptdp_algo half_algo(const ptdp_comm *c)
{
    return resolve_algo(c, PTDP_ALGO_DEFAULT) == PTDP_ALGO_RING ? PTDP_ALGO_RING : PTDP_ALGO_SHM;
}

int ptdp_all_gather_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                       ptdp_dtype t, const char *file, int line)
{
    int rc = enter(c);
    if (rc)
        return rc;
    ptdp_call k = new_call(PTDP_COLL_ALL_GATHER, count, t, file, line);
    k.recv = recv;
    if ((rc = check_call(c, &k, send)) != 0)
        return rc;
    k.algo = half_algo(c);
    return run_collective(c, &k, c->ops->all_gather[k.algo]);
}

int ptdp_reduce_scatter_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                           ptdp_dtype t, ptdp_op op, const char *file, int line)
{
    int rc = enter(c);
    if (rc)
        return rc;
    ptdp_call k = new_call(PTDP_COLL_REDUCE_SCATTER, count, t, file, line);
    k.rop = op;
    k.recv = recv;
    if ((rc = check_call(c, &k, send)) != 0)
        return rc;
    k.algo = half_algo(c);
    return run_collective(c, &k, c->ops->reduce_scatter[k.algo]);
}

int ptdp_gather_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                   ptdp_dtype t, int root, const char *file, int line)
{
    int rc = enter(c);
    if (rc)
        return rc;
    ptdp_call k = new_call(PTDP_COLL_GATHER, count, t, file, line);
    k.root = root;
    k.recv = recv;
    if ((rc = check_call(c, &k, send)) != 0)
        return rc;
    return run_collective(c, &k, c->ops->gather);
}

int ptdp_scatter_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                    ptdp_dtype t, int root, const char *file, int line)
{
    int rc = enter(c);
    if (rc)
        return rc;
    ptdp_call k = new_call(PTDP_COLL_SCATTER, count, t, file, line);
    k.root = root;
    k.recv = recv;
    if ((rc = check_call(c, &k, send)) != 0)
        return rc;
    return run_collective(c, &k, c->ops->scatter);
}

int ptdp_all_to_all_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                       ptdp_dtype t, const char *file, int line)
{
    int rc = enter(c);
    if (rc)
        return rc;
    ptdp_call k = new_call(PTDP_COLL_ALL_TO_ALL, count, t, file, line);
    k.recv = recv;
    if ((rc = check_call(c, &k, send)) != 0)
        return rc;
    return run_collective(c, &k, c->ops->all_to_all);
}

int ptdp_comm_split_at(ptdp_comm *c, int color, int key, const char *name,
                       ptdp_comm **out, const char *file, int line)
{
    int rc = enter(c);
    if (rc)
        return rc;
    ptdp_call k = new_call(PTDP_COLL_SPLIT, 0, PTDP_U8, file, line);
    k.color = color;
    k.key = key;
    if (!out)
        return bad_call(c, &k, "out is NULL");
    *out = NULL;

    const ptdp_call *calls[PTDP_MAX_DEVICES];
    ptdp_device *dev = c->dev;
    double wall_start = dev->trace ? ptdp_wall_now() : 0.0;
    k.clock = dev->clock.now;
    k.seq = c->ncalls++;
    if ((rc = c->ops->meet(c, &k, calls)) != 0 || (rc = check_agreement(c, calls)) != 0)
        return rc;
    if ((rc = c->ops->split(c, calls, name ? name : "group", out)) != 0)
        return rc;
    ptdp_traffic none = { 0.0, 0.0 };
    account_collective(c, &k, calls, none, wall_start);
    return 0;
}

/* --------------------------------------------------- point to point */

static int check_peer(ptdp_comm *c, ptdp_call *k, int peer)
{
    if (peer < 0 || peer >= c->size)
        return bad_call(c, k, "rank %d is not a rank of a group of %d", peer, c->size);
    if (peer == c->rank)
        return bad_call(c, k, "a blocking %s to itself (rank %d) would wait forever",
                        ptdp_coll_name(k->op), peer);
    return 0;
}

int ptdp_send_at(ptdp_comm *c, const void *buf, size_t count, ptdp_dtype t,
                 int dst, int tag, const char *file, int line)
{
    int rc = enter(c);
    if (rc)
        return rc;
    ptdp_device *dev = c->dev;
    ptdp_call k = new_call(PTDP_COLL_SEND, count, t, file, line);
    k.root = dst;
    k.tag = tag;
    if ((rc = check_peer(c, &k, dst)) != 0 || (rc = check_call(c, &k, buf)) != 0)
        return rc;

    double wall_start = dev->trace ? ptdp_wall_now() : 0.0;
    ptdp_traffic tr = { 0.0, 0.0 };
    k.clock = dev->clock.now;
    if ((rc = c->ops->send(c, &k, &tr)) != 0)
        return rc;

    /* The sender pays alpha + bytes/beta and goes on (see the top). */
    double cost = ptdp_cost_message(dev->profile, count * ptdp_dtype_size(t));
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
    int rc = enter(c);
    if (rc)
        return rc;
    ptdp_device *dev = c->dev;
    ptdp_call k = new_call(PTDP_COLL_RECV, count, t, file, line);
    k.root = src;
    k.tag = tag;
    k.recv = buf;
    if ((rc = check_peer(c, &k, src)) != 0 || (rc = check_call(c, &k, NULL)) != 0)
        return rc;

    double wall_start = dev->trace ? ptdp_wall_now() : 0.0;
    ptdp_traffic tr = { 0.0, 0.0 };
    ptdp_call sender;
    k.clock = dev->clock.now;
    rc = c->ops->recv(c, &k, &sender, &tr);
    if (rc == PTDP_EMISMATCH) {
        char mine[192], theirs[192];
        describe_call(&k, mine, sizeof mine);
        describe_call(&sender, theirs, sizeof theirs);
        return ptdp_fail(dev, PTDP_EMISMATCH,
                         "mismatched message in group '%s' tag %d: rank %d %s; rank %d %s",
                         c->name, tag, src, theirs, c->rank, mine);
    }
    if (rc)
        return rc;

    /* Arrival = the send's start + its transfer; we may have waited. */
    double arrival = sender.clock + ptdp_cost_message(dev->profile, count * ptdp_dtype_size(t));
    double done = arrival > k.clock ? arrival : k.clock;
    dev->clock.idle_s += done - k.clock;
    dev->clock.now = done;
    count_bytes(dev, c, PTDP_COLL_RECV, tr);
    if (dev->trace) {
        char name[48];
        snprintf(name, sizeof name, "recv\xe2\x86\x90%d %s", src, c->name);
        trace_event(dev, name, "recv", k.clock, done, wall_start, ptdp_wall_now(), 0);
    }
    return 0;
}
