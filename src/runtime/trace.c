/*
 * trace.c — per-device event lists, written as one Chrome trace.
 *
 * Each device appends what it did (compute, a collective, send, recv, idle)
 * with its virtual and wall start and end.  At the end the lists are written
 * in the Chrome trace-event format that https://ui.perfetto.dev and
 * chrome://tracing open: one JSON object holding "traceEvents", where
 *
 *   {"ph":"X", "pid":P, "tid":R, "ts":µs, "dur":µs, "name":…, "args":{…}}
 *
 * is a "complete" event (a bar from ts to ts+dur) on thread R of process P,
 * and "ph":"M" metadata events give processes and threads their names.
 * Every event appears twice, once per clock:
 *
 *   process 0 "virtual time"   device 0  ▇▇▇▇ ░░ ▇▇▇▇▇▇ ▒▒▒
 *                              device 1  ▇▇▇▇▇▇ ▒▒▒ ▇▇▇▇
 *   process 1 "wall time"      device 0  ▇▇ ░ ▇▇▇▇ ▒
 *                              device 1  ▇▇▇▇ ▒▒ ▇▇
 *
 * A device that started non-blocking collectives (comm.h) has a second
 * track, "device R comm" (thread id PTDP_TRACE_COMM_TID + R, sorted right
 * below "device R"), where its communication stream's collectives lie under
 * the compute that hid them.
 *
 * Tracing is instrumentation, not device memory: events live in host memory
 * (malloc), not in the arena, and recording stops with one warning past
 * PTDP_TRACE_MAX_EVENTS per device, since a trace much larger than that
 * (about 300 bytes of JSON per event) no longer opens in a browser.
 *
 * The file is written atomically (file.h): into a temporary file next to the
 * target, flushed and fsync'ed, then renamed over it, so a reader sees the
 * old trace or the new one, never half of one.
 */
#include "ptdp/trace.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"
#include "ptdp/file.h"

#define PTDP_TRACE_MAX_EVENTS ((size_t)1 << 18)
#define PTDP_TRACE_COMM_TID 1000   /* + rank: a device's communication stream */

struct ptdp_trace {
    int rank;
    ptdp_trace_event *events;
    size_t count, capacity;
    size_t dropped;             /* events past the limit (or refused by malloc) */
};

/* ---- Recording ------------------------------------------------------------------ */

ptdp_trace *ptdp_trace_create(int rank)
{
    ptdp_trace *t = calloc(1, sizeof *t);
    if (t != NULL)
        t->rank = rank;
    return t;
}

void ptdp_trace_destroy(ptdp_trace *t)
{
    if (t == NULL)
        return;
    free(t->events);
    free(t);
}

void ptdp_trace_add(ptdp_trace *t, const ptdp_trace_event *e)
{
    if (t == NULL)
        return;
    if (t->count == t->capacity) {
        size_t cap = t->capacity ? 2 * t->capacity : 1024;
        if (cap > PTDP_TRACE_MAX_EVENTS)
            cap = PTDP_TRACE_MAX_EVENTS;
        ptdp_trace_event *grown = NULL;
        if (cap > t->capacity)
            grown = realloc(t->events, cap * sizeof *grown);
        if (grown == NULL) {
            if (t->dropped++ == 0)
                fprintf(stderr, "ptdp: trace of device %d is full (%zu events); "
                        "later events are not recorded\n", t->rank, t->count);
            return;
        }
        t->events = grown;
        t->capacity = cap;
    }
    t->events[t->count++] = *e;
}

size_t ptdp_trace_count(const ptdp_trace *t)
{
    return t ? t->count : 0;
}

const ptdp_trace_event *ptdp_trace_events(const ptdp_trace *t)
{
    return t ? t->events : NULL;
}

/* ---- JSON output ------------------------------------------------------------- */

/* A JSON string: quotes, backslashes and control characters escaped; valid
 * UTF-8 (such as the arrow in "send→3") passes through; a broken sequence,
 * e.g. a name cut in the middle of a character, becomes U+FFFD. */
static void put_string(FILE *f, const char *s, size_t max)
{
    const unsigned char *p = (const unsigned char *)s;
    const unsigned char *end = p + strnlen(s, max);
    fputc('"', f);
    while (p < end) {
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc(c, f);
            p++;
        } else if (c < 0x20) {
            fprintf(f, "\\u%04x", c);
            p++;
        } else if (c < 0x80) {
            fputc(c, f);
            p++;
        } else {
            /* the sequence length its lead byte announces; 0x80–0xC1 and
             * 0xF5–0xFF never lead one */
            int len = c >= 0xC2 && c <= 0xDF ? 2
                    : c >= 0xE0 && c <= 0xEF ? 3
                    : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
            bool ok = len > 0 && end - p >= len;
            for (int k = 1; ok && k < len; k++)
                ok = (p[k] & 0xC0) == 0x80;
            if (ok) {
                fwrite(p, 1, (size_t)len, f);
                p += len;
            } else {
                fputs("\\ufffd", f);
                p++;
            }
        }
    }
    fputc('"', f);
}

/* Seconds to microseconds, the unit of "ts" and "dur"; JSON has no NaN. */
static double micros(double seconds)
{
    return isfinite(seconds) ? seconds * 1e6 : 0.0;
}

static void put_metadata(FILE *f, const char *what, int pid, int tid, const char *name, bool *first)
{
    fprintf(f, "%s\n{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":",
            *first ? "" : ",", what, pid, tid);
    put_string(f, name, strlen(name));
    fputs("}}", f);
    *first = false;
}

/* Does t hold events of the communication stream? */
static bool has_comm_track(const ptdp_trace *t)
{
    for (size_t i = 0; t != NULL && i < t->count; i++)
        if (t->events[i].track == 1)
            return true;
    return false;
}

static void put_sort_index(FILE *f, int pid, int tid, int index)
{
    fprintf(f, ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
               "\"args\":{\"sort_index\":%d}}", pid, tid, index);
}

static void put_event(FILE *f, const ptdp_trace_event *e, int pid, int tid,
                      double t0, double t1, bool *first)
{
    double dur = micros(t1) - micros(t0);
    fprintf(f, "%s\n{\"name\":", *first ? "" : ",");
    put_string(f, e->name, sizeof e->name);
    fputs(",\"cat\":", f);
    put_string(f, e->cat, sizeof e->cat);
    fprintf(f, ",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
               "\"args\":{\"bytes\":%.0f}}",
            pid, tid, micros(t0), dur > 0 ? dur : 0.0, isfinite(e->bytes) ? e->bytes : 0.0);
    *first = false;
}

static void put_trace(FILE *f, ptdp_trace *const *traces, int n)
{
    static const char *const clock_names[2] = { "virtual time", "wall time" };
    bool first = true;
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", f);
    for (int pid = 0; pid < 2; pid++) {
        put_metadata(f, "process_name", pid, 0, clock_names[pid], &first);
        for (int d = 0; d < n; d++) {
            if (traces[d] == NULL)
                continue;
            char name[32];
            int rank = traces[d]->rank;
            snprintf(name, sizeof name, "device %d", rank);
            put_metadata(f, "thread_name", pid, rank, name, &first);
            if (has_comm_track(traces[d])) {
                snprintf(name, sizeof name, "device %d comm", rank);
                put_metadata(f, "thread_name", pid, PTDP_TRACE_COMM_TID + rank, name, &first);
                put_sort_index(f, pid, rank, 2 * rank);
                put_sort_index(f, pid, PTDP_TRACE_COMM_TID + rank, 2 * rank + 1);
            }
        }
    }
    for (int pid = 0; pid < 2; pid++)
        for (int d = 0; d < n; d++) {
            const ptdp_trace *t = traces[d];
            for (size_t i = 0; t != NULL && i < t->count; i++) {
                const ptdp_trace_event *e = &t->events[i];
                int tid = e->track == 1 ? PTDP_TRACE_COMM_TID + t->rank : t->rank;
                if (pid == 0)
                    put_event(f, e, pid, tid, e->v0, e->v1, &first);
                else
                    put_event(f, e, pid, tid, e->w0, e->w1, &first);
            }
        }
    fputs("\n]}\n", f);
}

/* ---- Writing ------------------------------------------------------------------ */

int ptdp_trace_write_chrome(const char *path, ptdp_trace *const *traces, int n,
                            char *msg, size_t msglen)
{
    ptdp_atomic_file f;
    int rc = ptdp_atomic_open(&f, path, msg, msglen);
    if (rc != 0)
        return rc;
    put_trace(ptdp_atomic_stream(&f), traces, n);
    return ptdp_atomic_commit(&f, msg, msglen);
}
