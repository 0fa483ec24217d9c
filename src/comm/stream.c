/*
 * stream.c — the communication stream: non-blocking collectives on the
 * virtual clock, and waiting for them.
 *
 * A GPU runs its kernels on streams; NCCL collectives usually run on a
 * stream of their own, so a gradient bucket's all-reduce proceeds while the
 * backward keeps computing.  Each ptdp device has two virtual clocks for
 * that (clock.h): the compute stream `now` and the communication stream
 * `comm_free`.
 *
 *   start  (comm.c)  begins at  s = max over members of max(now, comm_free)
 *                    ends at    e = s + cost          (the blocking call's cost)
 *                    comm_free := e;  now does not move
 *   wait   (here)    now := max(now, e)
 *
 *   compute   ──────── backward ────────────|w|── optimizer
 *   comm          [s0 ── e0][s1 ──── e1][s2 ── e2]
 *                                       ^now at wait
 *
 * The stream serialises its own collectives (the second starts when the
 * first ends), as one NCCL communicator on one stream does.  What the
 * compute stream never waits for is hidden; at the wait, of the stall
 * e - now, the part inside [s, e] is exposed communication (comm_s) and the
 * part before s was spent waiting for the other members (idle_s), so
 * compute_s + comm_s + idle_s still adds up to the compute stream's time:
 *
 *   exposed = e - max(s, now)   (0 if now >= e)      hidden = cost - exposed
 *
 * The host moves the data at the start, in the device's thread, exactly as
 * the blocking call does: the bits are the blocking call's; only the
 * virtual time runs on the other stream.
 *
 * On a GPU the result is not there before the wait, so a program that reads
 * it early is wrong even when it happens to work.  Here it could never be
 * seen to fail, so the start hides the result until the wait:
 *
 *   start   result ──copy──▶ held (host memory, one block per request)
 *           recv   := all bits set      NaN in f32/f64/bf16, -1 in ints
 *   wait    recv   := held; free held   the blocking call's bits again
 *
 * A read before the wait meets NaN, which spreads into every value it
 * touches, and the run's checks fail.  A correct program sees no
 * difference: the same bits, bytes and virtual times.  The held blocks of
 * a communicator are listed on it, so a request abandoned when a run fails
 * (never waited for) is freed with its communicator (ptdp_comm_free).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_impl.h"
#include "ptdp/error.h"
#include "ptdp/trace.h"

double ptdp_stream_ready(const ptdp_device *dev)
{
    return dev->clock.comm_free > dev->clock.now ? dev->clock.comm_free : dev->clock.now;
}

static void trace_on(ptdp_device *dev, int track, const char *name, const char *cat,
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
    e.track = track;
    ptdp_trace_add(dev->trace, &e);
}

void ptdp_stream_charge(ptdp_device *dev, const char *name, double start, double cost, double bytes,
                        double wall_start, double wall_end)
{
    dev->clock.comm_free = start + cost;
    dev->clock.stream_s += cost;
    if (dev->trace)
        trace_on(dev, 1, name, "comm", start, start + cost, wall_start, wall_end, bytes);
}

void ptdp_stream_record(ptdp_device *dev, ptdp_request *req, const char *name, double start,
                        double cost, double bytes, double wall_start, double wall_end)
{
    ptdp_stream_charge(dev, name, start, cost, bytes, wall_start, wall_end);
    req->dev = dev;
    req->active = 1;
    req->start = start;
    req->end = start + cost;
    snprintf(req->name, sizeof req->name, "%s", name);
}

/* ------------------------------------- the result, held until the wait */

struct ptdp_held {
    struct ptdp_held *next;      /* the communicator's other held results */
    void *recv;                  /* where the result goes back            */
    size_t bytes;
    unsigned char data[];        /* the result                            */
};

/* Where the call's result lies in recv: all of it, except for an in-place
 * reduce_scatter, whose result is this rank's segment inside recv. */
static void result_of(const ptdp_comm *c, const ptdp_call *k, unsigned char **at, size_t *bytes)
{
    size_t es = ptdp_dtype_size(k->dtype), off, len;
    *at = k->recv;
    *bytes = k->count * es;
    if (k->op == PTDP_COLL_REDUCE_SCATTER) {
        ptdp_share(k->count, c->size, c->rank, &off, &len);
        *bytes = len * es;
        if (k->in_place)
            *at += off * es;
    }
}

void ptdp_stream_hold(ptdp_comm *c, const ptdp_call *k, ptdp_request *req)
{
    unsigned char *at;
    size_t bytes;
    result_of(c, k, &at, &bytes);
    req->comm = c;
    req->held = NULL;
    if (bytes == 0)
        return;
    /* No host memory for the copy: the result stays readable, which a
     * correct program cannot tell apart; only the guard is lost. */
    struct ptdp_held *h = malloc(sizeof *h + bytes);
    if (h == NULL)
        return;
    h->recv = at;
    h->bytes = bytes;
    memcpy(h->data, at, bytes);
    memset(at, 0xff, bytes);
    h->next = c->held;
    c->held = h;
    req->held = h;
}

/* The result back into recv, and its block off the communicator's list. */
static void give_back(ptdp_request *req)
{
    struct ptdp_held *h = req->held, **p = &req->comm->held;
    while (*p != NULL && *p != h)
        p = &(*p)->next;
    if (*p == h)
        *p = h->next;
    memcpy(h->recv, h->data, h->bytes);
    free(h);
    req->held = NULL;
}

void ptdp_stream_release(ptdp_comm *c)
{
    while (c->held != NULL) {
        struct ptdp_held *h = c->held;
        c->held = h->next;
        free(h);
    }
}

/* ------------------------------------------------------------ the wait */

int ptdp_wait(ptdp_request *req)
{
    if (req == NULL || !req->active)
        return PTDP_OK;
    ptdp_device *dev = req->dev;
    req->active = 0;
    if (req->held != NULL)
        give_back(req);
    if (ptdp_aborted(dev))
        return PTDP_EABORTED;
    double now = dev->clock.now, cost = req->end - req->start;
    double exposed = req->end > now ? req->end - (req->start > now ? req->start : now) : 0.0;
    dev->clock.hidden_s += cost - exposed;
    if (req->end <= now)
        return PTDP_OK;
    double stall = req->end - now;
    dev->clock.comm_s += exposed;
    dev->clock.idle_s += stall - exposed;
    dev->clock.now = req->end;
    if (dev->trace) {
        char name[48];
        double w = ptdp_wall_now();
        snprintf(name, sizeof name, "wait %.40s", req->name);
        trace_on(dev, 0, name, "wait", now, req->end, w, w, 0);
    }
    return PTDP_OK;
}
