/*
 * pair.c — an overlapped F&B pair's collectives on the communication
 * stream (pair.h has the idea and its limits).
 *
 * Inside a pair, a marked blocking collective (comm.c asks
 * ptdp_pair_overlaps) is charged as a non-blocking one started at the
 * pair's beginning would be:
 *
 *   my clock at the meeting   max(stream, t0)    (not the compute stream:
 *                                                 the caller has gone on)
 *   start = max over members;  end = start + cost;  stream := end
 *
 * and the pair remembers its overlappable collectives' summed cost, the
 * last one's end, and where the stream's last unbroken run of them began
 * (the tail: a start later than the previous end, waiting for a member or
 * behind other work on the stream, begins a new run).  At the end, with
 * T the compute stream's time:
 *
 *   compute   |▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇|T ░░░░░░ |
 *   comm      |▒▒▒ ▒▒▒▒   (gap)   |tail ▒▒▒▒▒▒|end
 *
 *   exposed = end - T                          T within the tail
 *           = (end - tail) + min(tail - T, earlier cost)   T before it
 *   now := max(T, end);  comm += exposed;  idle += (end - T) - exposed
 *   hidden = cost - exposed
 *
 * exact when the stream has no gap after T (members in step); otherwise
 * the earlier runs are taken to lie just before the tail — an upper bound
 * of the exposed part, never more than the wait.  So compute + comm + idle
 * still add up to the compute stream's time, as after ptdp_wait.
 */
#include "ptdp/pair.h"

#include <stdio.h>
#include <string.h>

#include "comm/comm_impl.h"
#include "ptdp/trace.h"

void ptdp_pair_set_serial(ptdp_device *dev, bool serial)
{
    dev->clock.pair.serial = serial;
}

bool ptdp_pair_mark(ptdp_device *dev, bool on)
{
    const bool was = dev->clock.pair.marked != 0;
    dev->clock.pair.marked = on;
    return was;
}

void ptdp_pair_begin(ptdp_device *dev)
{
    ptdp_pair_state *p = &dev->clock.pair;
    if (p->serial)
        return;
    p->open = 1;
    p->count = 0;
    p->t0 = dev->clock.now;
    p->cost = p->end = p->tail = 0;
}

/* ------------------------------------------------ comm.c's side of it */

bool ptdp_pair_marked(const ptdp_device *dev)
{
    return dev->clock.pair.marked != 0;
}

bool ptdp_pair_overlaps(const ptdp_device *dev)
{
    return dev->clock.pair.open && dev->clock.pair.marked;
}

double ptdp_pair_ready(const ptdp_device *dev)
{
    const ptdp_clock *k = &dev->clock;
    return k->comm_free > k->pair.t0 ? k->comm_free : k->pair.t0;
}

void ptdp_pair_charge(ptdp_device *dev, const char *name, double start, double cost, double bytes,
                      double wall_start, double wall_end)
{
    ptdp_pair_state *p = &dev->clock.pair;
    ptdp_stream_charge(dev, name, start, cost, bytes, wall_start, wall_end);
    if (p->count == 0 || start > p->end)
        p->tail = start;
    p->end = start + cost;
    p->cost += cost;
    p->count++;
    dev->clock.pairable_s += cost;
}

/* --------------------------------------------------------- the end */

/* Of the overlappable collectives' time, what lies after T (pictured at
 * the top). */
static double exposed_after(const ptdp_pair_state *p, double T)
{
    if (T >= p->end)
        return 0.0;
    if (T >= p->tail)
        return p->end - T;
    const double run = p->end - p->tail, earlier = p->cost - run;
    const double gap = p->tail - T;
    return run + (earlier <= 0 ? 0.0 : earlier < gap ? earlier : gap);
}

void ptdp_pair_end(ptdp_device *dev)
{
    ptdp_clock *k = &dev->clock;
    ptdp_pair_state *p = &k->pair;
    if (!p->open)
        return;
    p->open = 0;
    if (p->count == 0)
        return;
    const double T = k->now, exposed = exposed_after(p, T);
    const double hidden = p->cost > exposed ? p->cost - exposed : 0.0;
    k->hidden_s += hidden;
    k->pair_hidden_s += hidden;
    if (p->end <= T)
        return;
    k->comm_s += exposed;
    k->idle_s += p->end - T - exposed;
    k->now = p->end;
    if (dev->trace) {
        ptdp_trace_event e;
        memset(&e, 0, sizeof e);
        snprintf(e.name, sizeof e.name, "wait F&B pair's collectives");
        snprintf(e.cat, sizeof e.cat, "wait");
        e.v0 = T;
        e.v1 = p->end;
        e.w0 = e.w1 = ptdp_wall_now() - dev->wall0;
        ptdp_trace_add(dev->trace, &e);
    }
}
