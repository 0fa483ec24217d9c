/*
 * figure_zero_overlap.c — zero_overlap.svg: one ZeRO-3 step in virtual
 * time, with --overlap and without, on two devices of a GPU profile.
 *
 * ZeRO-3 (zero3.c) keeps 1/N of each unit's parameters; before a unit's
 * forward and again before its backward it all-gathers the rest, and after
 * its backward it reduce-scatters the unit's gradient.  Blocking, each of
 * those waits on the compute stream:
 *
 *   device 0        [AG e][AG b0] b0 fwd [AG b1] b1 fwd … [AG b1] b1 bwd [RS b1][AG b0] b0 bwd [RS b0] …
 *
 * With --overlap the next unit's gather starts on the communication stream
 * as soon as this one is there (prefetch), and a unit's reduce-scatter runs
 * while the backward goes on:
 *
 *   device 0           b0 fwd  b1 fwd  head …  b1 bwd  b0 bwd
 *   device 0 comm   [AG b0][AG b1][AG ..]   [AG b0][RS b1][RS b0]
 *
 * What is drawn is read back from the run's own Chrome trace (trace.h:
 * ptdp_train writes it, one event per line, this file reads the virtual
 * clock's events of the second step): the default GPT, dp = N = 2, one
 * micro-batch of 128 sequences — enough compute per unit that, on
 * dgx-a100, a gather fits under a block's forward.  The caption prints
 * both step times, the communication hidden under compute, and the DP
 * bytes of the step against 3M(N-1)/N S.
 *
 * The figure is refused (PTDP_ECHECK) if a device's step moves other than
 * the formula's bytes, if the comm track lacks gathers or reduce-scatters,
 * or if --overlap is not faster.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "figures.h"
#include "ptdp/clock.h"
#include "ptdp/error.h"
#include "ptdp/zero.h"

enum { N = 2, M = 1, BATCH = 256, STEPS = 2, MAX_EVENTS = 4096 };
#define COMM_TID 1000            /* trace.c: a device's communication stream */

typedef struct {
    char name[48], cat[16];
    int tid;
    double t0, t1, bytes;        /* microseconds of virtual time */
} event;

typedef struct {
    event ev[MAX_EVENTS];
    int n;
    double step_t0, step_t1;     /* the second step on device 0, us */
    double step_s;               /* ptdp_train's log of it           */
    double hidden_s;             /* comm under compute, per step, mean over devices */
    double psi;
    const char *noun;            /* the model, for the text: "GPT"   */
} run_trace;

/* ---- running and reading the trace ------------------------------------------- */

static int read_trace(const char *file, run_trace *r, char *msg, size_t msglen)
{
    FILE *f = fopen(file, "r");
    if (f == NULL) {
        snprintf(msg, msglen, "cannot read the trace %s back", file);
        return PTDP_EIO;
    }
    char line[512];
    r->n = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        event e;
        int pid;
        double ts, dur;
        if (sscanf(line, "{\"name\":\"%47[^\"]\",\"cat\":\"%15[^\"]\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
                         "\"ts\":%lf,\"dur\":%lf,\"args\":{\"bytes\":%lf",
                   e.name, e.cat, &pid, &e.tid, &ts, &dur, &e.bytes) != 7 || pid != 0)
            continue;      /* metadata, or the wall clock's copy */
        if (r->n == MAX_EVENTS)
            break;
        e.t0 = ts;
        e.t1 = ts + dur;
        r->ev[r->n++] = e;
    }
    fclose(f);
    /* the second step on device 0: between the ends of the two optimizer steps */
    int seen = 0;
    double ends[STEPS] = { 0 };
    for (int i = 0; i < r->n && seen < STEPS; i++)
        if (r->ev[i].tid == 0 && strcmp(r->ev[i].name, "optimizer") == 0)
            ends[seen++] = r->ev[i].t1;
    if (seen < STEPS) {
        snprintf(msg, msglen, "the trace %s holds %d optimizer steps, not %d", file, seen, STEPS);
        return PTDP_ECHECK;
    }
    r->step_t0 = ends[0];
    r->step_t1 = ends[1];
    return PTDP_OK;
}

static int run(bool overlap, const char *trace, run_trace *r, char *msg, size_t msglen)
{
    ptdp_model_config model;
    unsigned char *corpus;
    int err = fig_default_model(&model, &corpus, &r->noun, msg, msglen);
    if (err != 0)
        return err;
    ptdp_train_config c = ptdp_train_defaults();
    c.model = model;
    c.dp = N;
    c.micro_batches = M;
    c.batch = BATCH;
    c.steps = STEPS;
    c.zero = 3;
    c.overlap = overlap;
    ptdp_train_result res;
    ptdp_launch_result lr;
    memset(&res, 0, sizeof res);
    memset(&lr, 0, sizeof lr);
    ptdp_launch_opts o = { .watchdog_s = 60, .profile = ptdp_profile_find("dgx-a100"), .trace_path = trace,
                           .result = &lr };
    char why[PTDP_MSG_MAX];
    err = ptdp_train(&c, &o, NULL, NULL, &res, why, sizeof why);
    if (err != 0)
        snprintf(msg, msglen, "ZeRO-3 on dp %d%s failed: %s", N, overlap ? " with --overlap" : "", why);
    else if (lr.trace_status != 0) {
        snprintf(msg, msglen, "%s", lr.trace_message);
        err = lr.trace_status;
    }
    if (err == 0) {
        r->step_s = res.log[STEPS - 1].virtual_s;
        r->psi = (double)res.param_elements[0];
        r->hidden_s = 0;
        for (int d = 0; d < N; d++)
            r->hidden_s += lr.devices[d].clock.hidden_s / (N * STEPS);
        err = read_trace(trace, r, msg, msglen);
    }
    unlink(trace);
    ptdp_train_result_free(&res);
    ptdp_launch_result_free(&lr);
    free(corpus);
    return err;
}

/* Inside device d's step: its bytes sent, and (on its comm track) how
 * many gathers and reduce-scatters. */
static void count_step(const run_trace *r, int d, double *bytes, int *gathers, int *scatters)
{
    *bytes = 0;
    *gathers = *scatters = 0;
    for (int i = 0; i < r->n; i++) {
        const event *e = &r->ev[i];
        if ((e->tid != d && e->tid != COMM_TID + d) || e->t0 < r->step_t0 - 1e-6 || e->t0 >= r->step_t1 - 1e-6)
            continue;
        *bytes += e->bytes;
        if (e->tid == COMM_TID + d) {
            *gathers += strncmp(e->name, "all_gather", 10) == 0;
            *scatters += strncmp(e->name, "reduce_scatter", 14) == 0;
        }
    }
}

/* ---- drawing --------------------------------------------------------------------- */

enum { TRACK_X = 170, TRACK_W = 780, TRACK_H = 22, TRACK_GAP = 8 };

static const char *color_of(const event *e)
{
    if (strcmp(e->cat, "wait") == 0)
        return "#e6e6e6";
    if (strncmp(e->name, "all_gather", 10) == 0)
        return "#f28e2b";
    if (strncmp(e->name, "reduce_scatter", 14) == 0)
        return "#e15759";
    if (strcmp(e->cat, "comm") == 0)
        return "#b07aa1";
    if (strcmp(e->name, "optimizer") == 0)
        return "#59a14f";
    return strstr(e->name, "bwd") != NULL ? "#2f5d8a" : "#76a5d3";
}

/* "AG", "RS", "norm"; a compute event by its unit: "block 1 fwd" is "b1". */
static const char *short_name(const event *e, char *buf, size_t n)
{
    int k;
    if (strncmp(e->name, "all_gather", 10) == 0) return "AG";
    if (strncmp(e->name, "reduce_scatter", 14) == 0) return "RS";
    if (strncmp(e->name, "all_reduce", 10) == 0) return "norm";
    if (strncmp(e->name, "embed", 5) == 0) return "emb";
    if (strncmp(e->name, "head", 4) == 0) return "head";
    if (strcmp(e->name, "optimizer") == 0) return "opt";
    if (sscanf(e->name, "block %d", &k) == 1) {
        snprintf(buf, n, "b%d", k);
        return buf;
    }
    return e->name;
}

/* The next event of thread tid after event i, or -1. */
static int next_on(const run_trace *r, int i, int tid)
{
    for (int j = i + 1; j < r->n; j++)
        if (r->ev[j].tid == tid)
            return j;
    return -1;
}

/* One track: the step's events of thread tid, from x = TRACK_X; compute
 * events of one name that follow each other are drawn and named as one. */
static void track(ptdp_svg *s, const run_trace *r, int tid, double y, double scale, const char *label)
{
    ptdp_svg_text(s, 20, y + TRACK_H - 7, 11.5, tid >= COMM_TID ? PTDP_SVG_START : PTDP_SVG_BOLD,
                  tid >= COMM_TID ? "#555555" : NULL, "%s", label);
    ptdp_svg_rect(s, TRACK_X, y, (r->step_t1 - r->step_t0) * scale, TRACK_H, "#fafafa", "#dddddd");
    int merged_until = -1;       /* the last event of a run drawn as one */
    for (int i = 0; i < r->n; i++) {
        const event *e = &r->ev[i];
        if (e->tid != tid || e->t0 < r->step_t0 - 1e-6 || e->t0 >= r->step_t1 - 1e-6)
            continue;
        if (i <= merged_until)
            continue;
        double t1 = e->t1;
        int j = i, k;
        while (strcmp(e->cat, "compute") == 0 && (k = next_on(r, j, tid)) >= 0 &&
               strcmp(r->ev[k].name, e->name) == 0 && fabs(r->ev[k].t0 - t1) < 1e-3) {
            t1 = r->ev[k].t1;
            j = k;
        }
        double x = TRACK_X + (e->t0 - r->step_t0) * scale, w = (t1 - e->t0) * scale;
        if (w > 0.2)
            ptdp_svg_rect(s, x, y + 2, w, TRACK_H - 4, color_of(e), "white");
        char buf[16];
        const char *name = short_name(e, buf, sizeof buf);
        if (strcmp(e->cat, "wait") != 0 && w > 6.5 * strlen(name) + 4)
            ptdp_svg_text(s, x + w / 2, y + TRACK_H - 7, 10, PTDP_SVG_MIDDLE,
                          strcmp(e->cat, "compute") == 0 && strstr(e->name, "fwd") ? "#10253a" : "white",
                          "%s", name);
        merged_until = j;
    }
}

static void time_axis(ptdp_svg *s, double y, double span_us, double scale)
{
    double step = ptdp_svg_tick_step(span_us, 10);
    ptdp_svg_line(s, TRACK_X, y, TRACK_X + span_us * scale, y, "#999999", 1, NULL);
    for (double t = 0; t <= span_us + 1e-9; t += step) {
        double x = TRACK_X + t * scale;
        ptdp_svg_line(s, x, y, x, y + 4, "#999999", 1, NULL);
        ptdp_svg_text(s, x, y + 16, 10, PTDP_SVG_MIDDLE, "#555555", "%g", t);
    }
    ptdp_svg_text(s, TRACK_X + span_us * scale, y + 30, 10.5, PTDP_SVG_END, "#555555",
                  "virtual time from the start of step %d, µs (dgx-a100 profile)", STEPS);
}

static void legend(ptdp_svg *s, double y)
{
    static const struct { const char *color, *text; } items[] = {
        { "#76a5d3", "forward (b0 = block 0)" }, { "#2f5d8a", "backward" },
        { "#f28e2b", "AG: all-gather a unit" }, { "#e15759", "RS: reduce-scatter its gradient" },
        { "#b07aa1", "norm: all-reduce of ‖g‖²" }, { "#e6e6e6", "waiting" },
    };
    double x = 20;
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        ptdp_svg_rect(s, x, y - 10, 12, 12, items[i].color, NULL);
        ptdp_svg_text(s, x + 17, y, 11, PTDP_SVG_START, NULL, "%s", items[i].text);
        x += 17 + 5.9 * strlen(items[i].text) + 14;
    }
}

/* Both runs, each writing its trace beside the figure (and removing it). */
static int run_both(const char *path, run_trace *ovl, run_trace *blk, char *msg, size_t msglen)
{
    size_t n = strlen(path) + 32;
    char *trace = malloc(n);
    if (trace == NULL) {
        snprintf(msg, msglen, "out of host memory");
        return PTDP_ENOMEM;
    }
    snprintf(trace, n, "%s.trace.json", path);
    int err = run(true, trace, ovl, msg, msglen);
    if (err == 0)
        err = run(false, trace, blk, msg, msglen);
    free(trace);
    return err;
}

/* The checks: the formula's bytes, both kinds of collective on the comm
 * stream, and a shorter step. */
static int check_runs(const run_trace *ovl, const run_trace *blk, char *msg, size_t msglen)
{
    const double want = ptdp_zero3_dp_bytes_per_step((size_t)ovl->psi, N, M, false);
    for (int d = 0; d < N; d++) {
        double bytes;
        int gathers, scatters;
        count_step(ovl, d, &bytes, &gathers, &scatters);
        if (fabs(bytes - want) > 64) {
            snprintf(msg, msglen, "device %d sent %.0f B in step %d, 3M(N-1)/N S says %.0f B", d, bytes, STEPS, want);
            return PTDP_ECHECK;
        }
        if (gathers == 0 || scatters == 0) {
            snprintf(msg, msglen, "device %d's comm track holds %d gathers and %d reduce-scatters: --overlap put "
                     "nothing under the compute", d, gathers, scatters);
            return PTDP_ECHECK;
        }
    }
    if (!(ovl->step_s < blk->step_s)) {
        snprintf(msg, msglen, "--overlap's step (%.2f us) is not shorter than the blocking one (%.2f us)",
                 ovl->step_s * 1e6, blk->step_s * 1e6);
        return PTDP_ECHECK;
    }
    return 0;
}

/* The tracks from y = top: every device and its comm stream with
 * --overlap, device 0 blocking, the time axis.  Returns the axis's y. */
static double draw_tracks(ptdp_svg *s, const run_trace *ovl, const run_trace *blk, double top, double span,
                          double scale)
{
    double y = top;
    ptdp_svg_text(s, 20, y - 4, 12.5, PTDP_SVG_BOLD, NULL, "--zero 3 --overlap: step %.2f µs", ovl->step_s * 1e6);
    y += 6;
    for (int d = 0; d < N; d++) {
        char label[32];
        snprintf(label, sizeof label, "device %d", d);
        track(s, ovl, d, y, scale, label);
        y += TRACK_H + 2;
        snprintf(label, sizeof label, "device %d comm", d);
        track(s, ovl, COMM_TID + d, y, scale, label);
        y += TRACK_H + TRACK_GAP + 4;
    }
    y += 14;
    ptdp_svg_text(s, 20, y - 4, 12.5, PTDP_SVG_BOLD, NULL, "--zero 3, blocking: step %.2f µs", blk->step_s * 1e6);
    y += 6;
    track(s, blk, 0, y, scale, "device 0");
    y += TRACK_H + 8;
    time_axis(s, y, span, scale);
    return y;
}

/* The caption from y: the step times, what device 0 sent, what stays exposed. */
static void draw_caption(ptdp_svg *s, const run_trace *ovl, const run_trace *blk, double ny)
{
    double bytes;
    int gathers, scatters;
    count_step(ovl, 0, &bytes, &gathers, &scatters);
    char b1[32], b2[32];
    ptdp_svg_text(s, 20, ny, 12, PTDP_SVG_START, "#333333",
                  "The step: %.2f µs blocking, %.2f µs with --overlap, %.2f µs saved; the comm stream ran %.2f µs "
                  "under compute (mean of the devices).", blk->step_s * 1e6, ovl->step_s * 1e6,
                  (blk->step_s - ovl->step_s) * 1e6, ovl->hidden_s * 1e6);
    ptdp_svg_text(s, 20, ny + 18, 12, PTDP_SVG_START, "#333333",
                  "Device 0 sent %s in the step = 3M(N−1)/N S, S = %s (+ the norm's 8 B): %d gathers and %d "
                  "reduce-scatters on its comm stream.",
                  ptdp_format_bytes(bytes, b1, sizeof b1), ptdp_format_bytes(ovl->psi * sizeof(ptdp_real), b2, sizeof b2),
                  gathers, scatters);
    ptdp_svg_text(s, 20, ny + 36, 12, PTDP_SVG_START, "#333333",
                  "Still exposed: the step's first unit (nothing to hide it under), the head's small units, the last "
                  "reduce-scatters before the norm.");
}

int fig_zero_overlap(const char *path, char *msg, size_t msglen)
{
    static run_trace ovl, blk;   /* large: off the stack */
    int err = run_both(path, &ovl, &blk, msg, msglen);
    if (err == 0)
        err = check_runs(&ovl, &blk, msg, msglen);
    if (err != 0)
        return err;

    const double span = fmax(ovl.step_t1 - ovl.step_t0, blk.step_t1 - blk.step_t0);
    const double scale = TRACK_W / span;
    ptdp_svg s;
    const double top = 118;
    const double height = top + 5 * (TRACK_H + 2) + 3 * (TRACK_GAP + 4) + 20 + 14 + 54 + 48;
    ptdp_svg_begin(&s, 980, height);
    ptdp_svg_text(&s, 20, 26, 17, PTDP_SVG_BOLD, NULL,
                  "ZeRO-3 with --overlap: gathers prefetched under compute, reduce-scatters under the backward");
    ptdp_svg_text(&s, 20, 46, 12, PTDP_SVG_START, "#333333",
                  "Default %s, Ψ = %.0f parameters in units (embeddings, 2 blocks, head), dp = N = %d, one "
                  "micro-batch of %d sequences; step %d,", ovl.noun, ovl.psi, N, BATCH / N, STEPS);
    ptdp_svg_text(&s, 20, 62, 12, PTDP_SVG_START, "#333333",
                  "read from ptdp_train's own trace.  Each device keeps 1/N of every unit and gathers the rest "
                  "for the unit's forward and again for its backward.");
    legend(&s, 88);
    const double y = draw_tracks(&s, &ovl, &blk, top, span, scale);
    draw_caption(&s, &ovl, &blk, y + 54);
    return fig_finish(&s, path, msg, msglen);
}
