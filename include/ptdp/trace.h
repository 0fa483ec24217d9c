/*
 * trace.h — what every device did, when, in both clocks.
 *
 * Each device appends events (compute, each collective, send, recv, waiting)
 * to its own trace; ptdp_launch writes all of them as one Chrome trace
 * (chrome://tracing, https://ui.perfetto.dev) with two processes, "virtual
 * time" and "wall time", and one track (thread) per device in each — two
 * for a device that ran non-blocking collectives: "device R" (its compute
 * stream) and "device R comm" (its communication stream).
 */
#ifndef PTDP_TRACE_H
#define PTDP_TRACE_H

#include <stddef.h>

typedef struct ptdp_trace ptdp_trace;

typedef struct {
    char   name[48];     /* "fc1 fwd", "all_reduce", "send→3", …           */
    char   cat[16];      /* "compute", "comm", "send", "recv", "idle"      */
    double v0, v1;       /* virtual start and end, seconds                 */
    double w0, w1;       /* wall start and end, seconds since launch       */
    double bytes;        /* bytes sent by this device in the event, or 0   */
    int    track;        /* 0: the compute stream; 1: the communication
                            stream (non-blocking collectives, clock.h)     */
} ptdp_trace_event;

ptdp_trace *ptdp_trace_create(int rank);
void        ptdp_trace_destroy(ptdp_trace *t);
/* Append an event; silently stops recording (and says so once on stderr)
 * past a large limit rather than exhausting host memory. */
void        ptdp_trace_add(ptdp_trace *t, const ptdp_trace_event *e);
size_t      ptdp_trace_count(const ptdp_trace *t);
const ptdp_trace_event *ptdp_trace_events(const ptdp_trace *t);

/* Write the traces of n devices to `path` in the Chrome trace-event JSON
 * format, atomically (temporary file, fsync, rename).  Returns 0 or
 * PTDP_EIO with a message in msg. */
int ptdp_trace_write_chrome(const char *path, ptdp_trace *const *traces, int n,
                            char *msg, size_t msglen);

#endif
