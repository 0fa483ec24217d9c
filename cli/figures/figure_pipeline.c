/*
 * figure_pipeline.c — pipeline_schedules.svg: GPipe above 1F1B, with the bubble.
 *
 * Both schedules come from the generators the training executor runs
 * (schedule.h), are validated, and are played by ptdp_schedule_simulate
 * with uniform costs, forward 1 and backward 2 time units per micro-batch
 * and stage (the executor's virtual time under --profile ideal is the same
 * timeline).  Drawn on one time axis, the two have the same makespan and
 * the same bubble,
 *
 *     bubble = (p - 1) / (m + p - 1)        p = 4, m = 8:  3/11 = 27.3%
 *
 * and differ in what a stage must keep: GPipe holds the activations of all
 * m micro-batches before the first backward, 1F1B at most p - s on stage s.
 *
 * filling_the_bubble.svg puts the two schedules that shrink the bubble
 * under them, same p, m and work per micro-batch:
 *
 *     interleaved, v = 2 chunks per stage   (p - 1)/(v m + p - 1) = 3/19 = 15.8%
 *     ZB-H1, B = W = 1 (half a backward)    (p - 1)/(3m + p - 1)  = 3/27 = 11.1%
 *
 * dualpipev.svg and dualpipe.svg draw DeepSeek's two schedules beside
 * ZB-H1 (their own comments below).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "figures.h"
#include "ptdp/error.h"
#include "ptdp/schedule.h"

enum { P = 4, M = 8 };

enum {
    LEFT = 86, RIGHT = 170, LANE = 28, LANE_GAP = 5,
    PANEL_H = 46 + P * (LANE + LANE_GAP) + 40
};
static const double PX_PER_TIME = 22;

typedef struct {
    ptdp_schedule *s;
    ptdp_schedule_timeline *t;
} timed_schedule;

/* The same work per micro-batch and stage for every schedule: forward 1,
 * backward 2 — split as B 1 + W 1 — and a chunk's share 1/v of it. */
static int make_v(const ptdp_schedule_entry *e, int v, timed_schedule *ts, char *msg, size_t msglen)
{
    const ptdp_schedule_costs costs = { .forward = 1.0 / v, .backward = 2.0 / v, .send = 0,
                                        .backward_input = 1, .backward_weight = 1 };
    ts->s = NULL;
    ts->t = NULL;
    int err = ptdp_schedule_build(e, P, M, v, &ts->s);
    if (err == 0)
        err = ptdp_schedule_simulate(ts->s, &costs, &ts->t);
    if (err != 0)
        snprintf(msg, msglen, "schedule %s (p = %d, m = %d): %s", e->name, P, M, ptdp_strerror(err));
    return err;
}

static int make(const ptdp_schedule_entry *e, timed_schedule *ts, char *msg, size_t msglen)
{
    return make_v(e, 1, ts, msg, msglen);
}

static void release(timed_schedule *ts)
{
    ptdp_schedule_timeline_destroy(ts->t);
    ptdp_schedule_destroy(ts->s);
}

static void release_all(timed_schedule *ts, int n)
{
    for (int i = 0; i < n; i++)
        release(&ts[i]);
}

/* The longest makespan of n timed schedules: the width every panel shares. */
static double longest(const timed_schedule *ts, int n)
{
    double makespan = 0;
    for (int i = 0; i < n; i++)
        makespan = ts[i].t->makespan > makespan ? ts[i].t->makespan : makespan;
    return makespan;
}

static double x_of(double time) { return LEFT + time * PX_PER_TIME; }

/* One schedule: a title with the bubble, then the timeline as every
 * schedule is drawn (ptdp_schedule_draw: grey = idle), on the axis both
 * panels share. */
static void draw_timeline(ptdp_svg *svg, const timed_schedule *ts, const char *title,
                          const char *how, double makespan, double y)
{
    const ptdp_schedule *s = ts->s;
    const ptdp_schedule_timeline *t = ts->t;
    ptdp_svg_group_begin(svg, s->name, 0, y);
    const char *words;
    const double formula = ptdp_schedule_bubble_formula(s, &words);
    ptdp_svg_text(svg, 20, 18, 14, PTDP_SVG_BOLD, NULL,
                  "%s \u2014 bubble measured %.1f%%, formula %s = %.1f%%",
                  title, 100.0 * t->bubble, words, 100.0 * formula);
    ptdp_svg_text(svg, 20, 36, 12, PTDP_SVG_START, "#444444", "%s", how);
    const ptdp_schedule_frame frame = {
        .left = LEFT, .top = 46, .lane = LANE, .gap = LANE_GAP, .px_per_time = PX_PER_TIME,
        .axis_end = makespan, .max_ticks = 11,
    };
    ptdp_schedule_draw(svg, s, t, &frame);
    ptdp_svg_group_end(svg);
}

int fig_pipeline_schedules(const char *path, char *msg, size_t msglen)
{
    timed_schedule gpipe, ofob;
    int err = make(&ptdp_schedule_row_gpipe, &gpipe, msg, msglen);
    if (err == 0)
        err = make(&ptdp_schedule_row_1f1b, &ofob, msg, msglen);
    else
        ofob = (timed_schedule){ NULL, NULL };
    if (err != 0) {
        release(&gpipe);
        release(&ofob);
        return err;
    }
    double makespan = gpipe.t->makespan > ofob.t->makespan ? gpipe.t->makespan : ofob.t->makespan;

    const double width = x_of(makespan) + RIGHT, top = 62;
    const double height = top + 2 * PANEL_H + 70;
    ptdp_svg s;
    ptdp_svg_begin(&s, width, height);
    ptdp_svg_text(&s, 20, 26, 17, PTDP_SVG_BOLD, NULL,
                  "Pipeline schedules: p = %d stages, m = %d micro-batches, "
                  "forward 1 and backward 2 time units",
                  P, M);
    ptdp_svg_text(&s, 20, 46, 12, PTDP_SVG_START, "#333333",
                  "Timed by ptdp_schedule_simulate on the action lists the executor runs; grey = a stage "
                  "with nothing to do (the bubble).");
    char how[160];
    snprintf(how, sizeof how, "all %d forwards, then all backwards: stage s keeps the activations of "
             "all m = %d micro-batches", M, M);
    draw_timeline(&s, &gpipe, "GPipe", how, makespan, top);
    snprintf(how, sizeof how, "p \u2212 s \u2212 1 warm-up forwards on stage s, then one forward, "
             "one backward: stage s keeps at most p \u2212 s");
    draw_timeline(&s, &ofob, "1F1B", how, makespan, top + PANEL_H);

    const double ly = top + 2 * PANEL_H + 8;
    static const struct { const char *fill, *label; } legend[] = {
        { "#3b73c4", "forward Fk of micro-batch k" }, { "#3f9e4d", "backward Bk" },
        { "#e3e3e3", "idle (bubble)" },
    };
    for (int i = 0; i < 3; i++) {
        ptdp_svg_rect(&s, LEFT + i * 210, ly, 14, 14, legend[i].fill, NULL);
        ptdp_svg_text(&s, LEFT + i * 210 + 20, ly + 12, 12, PTDP_SVG_START, NULL, "%s", legend[i].label);
    }
    const int same = fabs(gpipe.t->makespan - ofob.t->makespan) < 1e-9 &&
                     fabs(gpipe.t->bubble - ofob.t->bubble) < 1e-9;
    ptdp_svg_text(&s, LEFT, ly + 38, 12, PTDP_SVG_START, "#333333",
                  "%s 1F1B's gain is memory (\u201ckeeps\u201d = micro-batches whose activations are alive "
                  "at once).", same ? "Same makespan, same bubble:" : "Makespans differ;");
    release(&gpipe);
    release(&ofob);
    return fig_finish(&s, path, msg, msglen);
}

/* GPipe, 1F1B, interleaved (v = 2) and ZB-H1 on one time axis. */
int fig_filling_the_bubble(const char *path, char *msg, size_t msglen)
{
    enum { N = 4 };
    static const struct { const ptdp_schedule_entry *e; int v; const char *title, *how; } rows[N] = {
        { &ptdp_schedule_row_gpipe, 1, "GPipe", "all forwards, then all backwards" },
        { &ptdp_schedule_row_1f1b, 1, "1F1B", "the same bubble; stage s keeps at most p \u2212 s micro-batches" },
        { &ptdp_schedule_row_interleaved, 2, "Interleaved 1F1B, v = 2",
          "each stage holds 2 chunks (pieces s and s + p): fill and drain shrink by v; "
          "a longer warm-up keeps more (paler = chunk 1)" },
        { &ptdp_schedule_row_zb_h1, 1, "ZB-H1", "the backward split into B (input gradient) and W (weight gradients): "
          "W waits, filling the bubble" },
    };
    timed_schedule ts[N];
    int err = 0, made = 0;
    for (; made < N && err == 0; made++)
        err = make_v(rows[made].e, rows[made].v, &ts[made], msg, msglen);
    if (err != 0) {
        release_all(ts, made);
        return err;
    }
    const double makespan = longest(ts, N);

    const double width = x_of(makespan) + RIGHT, top = 62;
    const double height = top + N * PANEL_H + 104;
    ptdp_svg s;
    ptdp_svg_begin(&s, width, height);
    ptdp_svg_text(&s, 20, 26, 17, PTDP_SVG_BOLD, NULL,
                  "Filling the bubble: p = %d stages, m = %d micro-batches, the same work per micro-batch",
                  P, M);
    ptdp_svg_text(&s, 20, 46, 12, PTDP_SVG_START, "#333333",
                  "forward 1, backward 2 (B 1 + W 1) time units per micro-batch and stage, a chunk 1/v of it; "
                  "timed by ptdp_schedule_simulate on the lists the executor runs.");
    for (int i = 0; i < N; i++)
        draw_timeline(&s, &ts[i], rows[i].title, rows[i].how, makespan, top + i * PANEL_H);
    const double ly = top + N * PANEL_H + 8;
    static const struct { const char *fill, *label; } legend[] = {
        { "#3b73c4", "forward" }, { "#3f9e4d", "backward (ZB-H1: B)" },
        { "#d9822b", "W: weight gradients" }, { "#e3e3e3", "idle (bubble)" },
    };
    for (int i = 0; i < 4; i++) {
        ptdp_svg_rect(&s, LEFT + i * 190, ly, 14, 14, legend[i].fill, NULL);
        ptdp_svg_text(&s, LEFT + i * 190 + 20, ly + 12, 12, PTDP_SVG_START, NULL, "%s", legend[i].label);
    }
    ptdp_svg_text(&s, LEFT, ly + 38, 12, PTDP_SVG_START, "#333333",
                  "Makespans %g, %g, %g and %g time units for the same %d units of work per stage.",
                  ts[0].t->makespan, ts[1].t->makespan, ts[2].t->makespan, ts[3].t->makespan, 3 * M);
    ptdp_svg_text(&s, LEFT, ly + 56, 12, PTDP_SVG_START, "#333333",
                  "\u201ckeeps\u201d = activations alive at once (interleaved: chunk-micro-batches, each half "
                  "a stage's);");
    ptdp_svg_text(&s, LEFT, ly + 74, 12, PTDP_SVG_START, "#333333",
                  "ZB-H1's B also leaves each linear layer's input and output gradient for W: stage s owes up "
                  "to %d, %d, %d, %d W passes.", ptdp_schedule_peak_deferred(ts[3].s, 0),
                  ptdp_schedule_peak_deferred(ts[3].s, 1), ptdp_schedule_peak_deferred(ts[3].s, 2),
                  ptdp_schedule_peak_deferred(ts[3].s, 3));
    release_all(ts, N);
    return fig_finish(&s, path, msg, msglen);
}

/* ---- dualpipev.svg --------------------------------------------------------------- */

/*
 * DualPipeV beside ZB-H1 on the same 2p = 8 stages and m = 10 micro-batches
 * (the reference's picture: 4 ranks, 10 micro-batches), the same work per
 * stage (F = B = W = 1, a whole backward 2): ZB-H1 needs 8 devices,
 * DualPipeV 4, each holding stages r and 7 - r, the V drawn on the left.
 *
 *   ZB-H1, 8 devices      (p - 1)/(3m + p - 1) = 7/37 = 18.9%
 *   DualPipeV, 4 devices  (p - 1)/(3m + p - 1) = 3/33 =  9.1%    p = devices
 */
enum { V_DEVICES = 4, V_M = 10 };

static int make_pm(const ptdp_schedule_entry *e, int p, int m, double alltoall, timed_schedule *ts, char *msg,
                   size_t msglen)
{
    const ptdp_schedule_costs costs = { .forward = 1, .backward = 2, .send = 0,
                                        .backward_input = 1, .backward_weight = 1, .alltoall = alltoall };
    ts->s = NULL;
    ts->t = NULL;
    int err = ptdp_schedule_build(e, p, m, 1, &ts->s);
    if (err == 0)
        err = ptdp_schedule_simulate(ts->s, &costs, &ts->t);
    if (err != 0)
        snprintf(msg, msglen, "schedule %s (p = %d, m = %d): %s", e->name, p, m, ptdp_strerror(err));
    return err;
}

/* The V: one row per device, its two stages, and the path a micro-batch
 * takes, down through the chunks 0 and back up through the chunks 1. */
static void draw_v(ptdp_svg *svg, double x, double y)
{
    const double row = LANE + LANE_GAP, box = 34;
    double xs[2 * V_DEVICES], ys[2 * V_DEVICES];
    ptdp_svg_text(svg, x, y - 8, 12, PTDP_SVG_BOLD, NULL, "the V: device r holds stages r and %d \u2212 r",
                  2 * V_DEVICES - 1);
    for (int r = 0; r < V_DEVICES; r++) {
        const double cy = y + r * row;
        ptdp_svg_text(svg, x + 52, cy + LANE / 2.0 + 4, 11, PTDP_SVG_END, NULL, "device %d", r);
        for (int c = 0; c < 2; c++) {
            const int stage = c == 0 ? r : 2 * V_DEVICES - 1 - r;
            const double bx = x + 60 + stage * (box + 6);     /* by stage: the rows make a V */
            ptdp_svg_rect(svg, bx, cy, box, LANE, c == 0 ? "#3b73c4" : "#89abdc", "white");
            ptdp_svg_text(svg, bx + box / 2, cy + LANE / 2.0 + 4, 11, PTDP_SVG_MIDDLE, "white", "%d", stage);
            xs[stage] = bx + box / 2;
            ys[stage] = cy + LANE / 2.0;
        }
    }
    ptdp_svg_polyline(svg, xs, ys, 2 * V_DEVICES, "#333333", 1.5, NULL);
    ptdp_svg_text(svg, x + 60 + 2 * V_DEVICES * (box + 6) + 10, y + LANE / 2.0 + 4, 11, PTDP_SVG_START,
                  "#444444", "data and loss on device 0;");
    ptdp_svg_text(svg, x + 60 + 2 * V_DEVICES * (box + 6) + 10, y + LANE / 2.0 + 20, 11, PTDP_SVG_START,
                  "#444444", "stage %d \u2192 %d stays on device %d", V_DEVICES - 1, V_DEVICES, V_DEVICES - 1);
}

int fig_dualpipev(const char *path, char *msg, size_t msglen)
{
    timed_schedule zb, dpv;
    int err = make_pm(&ptdp_schedule_row_zb_h1, 2 * V_DEVICES, V_M, 0, &zb, msg, msglen);
    if (err == 0 && (err = make_pm(&ptdp_schedule_row_dualpipev, V_DEVICES, V_M, 0, &dpv, msg, msglen)) != 0)
        release(&zb);
    if (err != 0)
        return err;
    const double makespan = zb.t->makespan > dpv.t->makespan ? zb.t->makespan : dpv.t->makespan;
    const double zb_h = 46 + 2 * V_DEVICES * (LANE + LANE_GAP) + 40;
    const double dpv_h = 46 + V_DEVICES * (LANE + LANE_GAP) + 40;
    const double top = 62, v_top = top + zb_h + dpv_h + 30;
    const double notes = v_top + V_DEVICES * (LANE + LANE_GAP) + 14;
    const double width = x_of(makespan) + RIGHT, height = notes + 3 * 18 + 20;
    ptdp_svg s;
    ptdp_svg_begin(&s, width, height);
    ptdp_svg_text(&s, 20, 26, 17, PTDP_SVG_BOLD, NULL,
                  "DualPipeV: %d stages on %d devices, m = %d micro-batches, the same work per stage",
                  2 * V_DEVICES, V_DEVICES, V_M);
    ptdp_svg_text(&s, 20, 46, 12, PTDP_SVG_START, "#333333",
                  "forward 1, B 1, W 1 time units per micro-batch and stage (a whole backward 2, an F&B pair 3); "
                  "timed by ptdp_schedule_simulate on the lists the executor runs.");
    draw_timeline(&s, &zb, "ZB-H1 on 8 devices", "one stage per device; W deferred into the bubbles",
                  makespan, top);
    draw_timeline(&s, &dpv, "DualPipeV on 4 devices",
                  "stage r (dark) and stage 7 \u2212 r (pale) per device; a black border: an F&B pair, "
                  "one micro-batch's forward beside another's backward",
                  makespan, top + zb_h);
    draw_v(&s, 20, v_top);
    double idle = 0;
    for (int r = 0; r < V_DEVICES; r++)
        idle += dpv.t->idle[r] / V_DEVICES;
    ptdp_svg_text(&s, 20, notes + 4, 12, PTDP_SVG_START, "#333333",
                  "DualPipe's table (PP = %d stages): bubble (PP/2\u22121)(F&B+B\u22123W) = %d \u00d7 (3+2\u22123) = %d "
                  "per device; measured %g.", 2 * V_DEVICES, V_DEVICES - 1, 2 * (V_DEVICES - 1), idle);
    ptdp_svg_text(&s, 20, notes + 22, 12, PTDP_SVG_START, "#333333",
                  "Activations: PP+1 = %d stage-micro-batches per device; kept here %d, %d, %d, %d.",
                  2 * V_DEVICES + 1, ptdp_schedule_peak_in_flight(dpv.s, 0), ptdp_schedule_peak_in_flight(dpv.s, 1),
                  ptdp_schedule_peak_in_flight(dpv.s, 2), ptdp_schedule_peak_in_flight(dpv.s, 3));
    ptdp_svg_text(&s, 20, notes + 40, 12, PTDP_SVG_START, "#333333",
                  "Parameters: 2 stages of %d per device, 1\u00d7 the model / %d; ZB-H1 needs twice the devices "
                  "for makespan %g against %g.", 2 * V_DEVICES, V_DEVICES, zb.t->makespan, dpv.t->makespan);
    release(&zb);
    release(&dpv);
    return fig_finish(&s, path, msg, msglen);
}

/* ---- dualpipe.svg ---------------------------------------------------------------- */

/*
 * DualPipe beside ZB-H1 on the same p = 4 devices, m = 10 micro-batches of
 * the same size, the same work per device (F = B = W = 1): ZB-H1 runs the
 * model once, in 4 stages; DualPipe holds two copies, 5 micro-batches going
 * down one and 5 up the other, so each direction's fill and drain run
 * under the other's steady state.  Then both again with expert
 * parallelism's all-to-alls (1 per F or B): ZB-H1 waits for every one,
 * DualPipe's F&B pairs run them under the partner's compute.
 *
 *   ZB-H1      (p - 1)/(3m + p - 1) = 3/33 = 9.1%
 *   DualPipe   (p - 2)/(3m + p - 2) = 2/32 = 6.25%     p = devices, m in all
 */
enum { D_DEVICES = 4, D_M = 10 };

/* The two copies: one row per device, the down copy's stage r (dark) and
 * the up copy's stage p - 1 - r (pale), and the way each copy's
 * micro-batches go. */
static void draw_copies(ptdp_svg *svg, double x, double y)
{
    const double row = LANE + LANE_GAP, box = 44;
    double xs[2][D_DEVICES], ys[2][D_DEVICES];
    ptdp_svg_text(svg, x, y - 8, 12, PTDP_SVG_BOLD, NULL, "the two copies: device r holds stage r of the "
                  "down copy and stage %d \u2212 r of the up copy", D_DEVICES - 1);
    for (int r = 0; r < D_DEVICES; r++) {
        const double cy = y + r * row;
        ptdp_svg_text(svg, x + 52, cy + LANE / 2.0 + 4, 11, PTDP_SVG_END, NULL, "device %d", r);
        for (int c = 0; c < 2; c++) {
            const double bx = x + 60 + c * (box + 90);
            ptdp_svg_rect(svg, bx, cy, box, LANE, c == 0 ? "#3b73c4" : "#89abdc", "white");
            ptdp_svg_text(svg, bx + box / 2, cy + LANE / 2.0 + 4, 11, PTDP_SVG_MIDDLE, "white", "%s%d",
                          c == 0 ? "d" : "u", c == 0 ? r : D_DEVICES - 1 - r);
            xs[c][r] = bx + box + 10;
            ys[c][r] = cy + LANE / 2.0;
        }
    }
    ptdp_svg_polyline(svg, xs[0], ys[0], D_DEVICES, "#333333", 1.5, NULL);
    ptdp_svg_polyline(svg, xs[1], ys[1], D_DEVICES, "#333333", 1.5, NULL);
    ptdp_svg_text(svg, xs[0][0] + 6, y + LANE / 2.0 + 4, 11, PTDP_SVG_START, "#444444", "\u2193 mb 0..%d",
                  D_M / 2 - 1);
    ptdp_svg_text(svg, xs[1][0] + 6, y + LANE / 2.0 + 4, 11, PTDP_SVG_START, "#444444", "\u2191 mb %d..%d",
                  D_M / 2, D_M - 1);
    ptdp_svg_text(svg, x + 60 + 2 * (box + 90) + 10, y + LANE / 2.0 + 4, 11, PTDP_SVG_START, "#444444",
                  "data in and a loss out at both ends; stages r and %d \u2212 r hold the same two stages,",
                  D_DEVICES - 1);
    ptdp_svg_text(svg, x + 60 + 2 * (box + 90) + 10, y + LANE / 2.0 + 20, 11, PTDP_SVG_START, "#444444",
                  "their gradients summed before the step (the mirror group): 2\u00d7 the parameters");
}

int fig_dualpipe(const char *path, char *msg, size_t msglen)
{
    enum { N = 4 };
    static const struct { const ptdp_schedule_entry *e; double alltoall; const char *title, *how; } rows[N] = {
        { &ptdp_schedule_row_zb_h1, 0, "ZB-H1", "one copy in 4 stages; W deferred into the bubbles" },
        { &ptdp_schedule_row_dualpipe, 0, "DualPipe", "stage r of the down copy (dark), stage 3 \u2212 r of the up copy (pale); "
          "a black border: an F&B pair" },
        { &ptdp_schedule_row_zb_h1, 1, "ZB-H1 with all-to-alls", "expert parallelism: every F and B waits for its all-to-alls "
          "(1 each)" },
        { &ptdp_schedule_row_dualpipe, 1, "DualPipe with all-to-alls", "each pair runs its F's all-to-alls under its B's compute "
          "and the other way round" },
    };
    timed_schedule ts[N];
    int err = 0, made = 0;
    for (; made < N && err == 0; made++)
        err = make_pm(rows[made].e, D_DEVICES, D_M, rows[made].alltoall, &ts[made], msg, msglen);
    if (err != 0) {
        release_all(ts, made);
        return err;
    }
    const double makespan = longest(ts, N);
    const double top = 62, copies = top + N * PANEL_H + 24, notes = copies + D_DEVICES * (LANE + LANE_GAP) + 14;
    ptdp_svg s;
    ptdp_svg_begin(&s, x_of(makespan) + RIGHT, notes + 3 * 18 + 20);
    ptdp_svg_text(&s, 20, 26, 17, PTDP_SVG_BOLD, NULL, "DualPipe: two copies on %d devices, m = %d micro-batches "
                  "(%d each way), beside ZB-H1 on the same devices", D_DEVICES, D_M, D_M / 2);
    ptdp_svg_text(&s, 20, 46, 12, PTDP_SVG_START, "#333333",
                  "forward 1, B 1, W 1 time units per micro-batch and stage (a whole backward 2, an F&B pair 3); "
                  "timed by ptdp_schedule_simulate on the lists the executor runs.");
    for (int i = 0; i < N; i++)
        draw_timeline(&s, &ts[i], rows[i].title, rows[i].how, makespan, top + i * PANEL_H);
    draw_copies(&s, 20, copies);
    double idle = 0;
    for (int r = 0; r < D_DEVICES; r++)
        idle += ts[1].t->idle[r] / D_DEVICES;
    ptdp_svg_text(&s, 20, notes + 4, 12, PTDP_SVG_START, "#333333",
                  "DualPipe's table (PP = %d): bubble (PP/2\u22121)(F&B+B\u22123W) = %d \u00d7 (3+2\u22123) = %d per "
                  "device; measured %g.  Activations: PP+1 = %d micro-batches per device; kept here %d, %d, %d, %d.",
                  D_DEVICES, D_DEVICES / 2 - 1, D_DEVICES - 2, idle, D_DEVICES + 1,
                  ptdp_schedule_peak_in_flight(ts[1].s, 0), ptdp_schedule_peak_in_flight(ts[1].s, 1),
                  ptdp_schedule_peak_in_flight(ts[1].s, 2), ptdp_schedule_peak_in_flight(ts[1].s, 3));
    ptdp_svg_text(&s, 20, notes + 22, 12, PTDP_SVG_START, "#333333",
                  "Makespans %g against ZB-H1's %g; with all-to-alls %g against %g: the gain is the "
                  "communication hidden under the pairs.", ts[1].t->makespan, ts[0].t->makespan,
                  ts[3].t->makespan, ts[2].t->makespan);
    ptdp_svg_text(&s, 20, notes + 40, 12, PTDP_SVG_START, "#333333",
                  "DualPipeV (figures/dualpipev.svg) folds the two copies into one V: the same bubble on half "
                  "the devices, 1\u00d7 the parameters.");
    release_all(ts, N);
    return fig_finish(&s, path, msg, msglen);
}
