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
 */
#include <stdio.h>
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

void ptdp_stream_record(ptdp_device *dev, ptdp_request *req, const char *name, double start,
                        double cost, double bytes, double wall_start, double wall_end)
{
    dev->clock.comm_free = start + cost;
    dev->clock.stream_s += cost;
    req->dev = dev;
    req->active = 1;
    req->start = start;
    req->end = start + cost;
    snprintf(req->name, sizeof req->name, "%s", name);
    if (dev->trace)
        trace_on(dev, 1, name, "comm", start, start + cost, wall_start, wall_end, bytes);
}

int ptdp_wait(ptdp_request *req)
{
    if (req == NULL || !req->active)
        return PTDP_OK;
    ptdp_device *dev = req->dev;
    req->active = 0;
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
