/*
 * schedule_draw.c — a timeline as text and as the GPipe paper's figure.
 *
 * Both drawings put one lane per stage and let time flow to the right; only
 * compute occupies a lane, so everything else — waiting for a message, the
 * warm-up before the first input arrives, the tail after the last
 * backward — shows as idle, the bubble:
 *
 *   1F1B, p = 4, m = 8, t_f = 1, t_b = 2:
 *   stage 0 |F0F1F2F3............B0<<F4B1<<F5B2<<F6B3<<F7B4<<..B5<<..B6<<..B7<<|
 *   stage 3 |......F0B0<<F1B1<<F2B2<<F3B3<<F4B4<<F5B5<<F6B6<<F7B7<<............|
 *
 * A box is its label (F or B, then the micro-batch) padded with '>' for a
 * forward and '<' for a backward.  A "quantum" of time, the shortest compute
 * action, takes as many columns as the longest label, so every box holds
 * its label.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"
#include "ptdp/file.h"
#include "ptdp/schedule.h"

/* ---- shared geometry ---------------------------------------------------------- */

static int is_drawn(ptdp_action_kind k)
{
    return k == PTDP_ACT_FORWARD || k == PTDP_ACT_BACKWARD;
}

/* The shortest positive compute duration: the unit of the horizontal axis.
 * Coarser only when the drawing would exceed `max_quanta` units (one tiny
 * action beside huge ones), which would truncate some labels. */
static double quantum_of(const ptdp_schedule *s, const ptdp_schedule_timeline *t,
                         double max_quanta)
{
    double q = 0;
    for (int st = 0; st < s->pp; st++)
        for (int i = 0; i < s->stage[st].count; i++) {
            double d = t->time[st][i].end - t->time[st][i].start;
            if (is_drawn(s->stage[st].actions[i].kind) && d > 0 && (q == 0 || d < q))
                q = d;
        }
    if (q == 0)
        q = 1.0;
    return t->makespan / q > max_quanta ? t->makespan / max_quanta : q;
}

/* Time between axis ticks: 1, 2 or 5 times a power of ten, at least
 * `min_units` quanta apart so the numbers do not collide. */
static double tick_step(double quantum, double min_units)
{
    double step = quantum;
    for (double decade = 1e-9; decade < 1e12; decade *= 10)
        for (int f = 0; f < 3; f++) {
            step = decade * (f == 0 ? 1 : f == 1 ? 2 : 5);
            if (step >= quantum * min_units)
                return step;
        }
    return step;
}

static int digits(int n)
{
    int d = 1;
    while (n >= 10) {
        n /= 10;
        d++;
    }
    return d;
}

static int column(double time, double quantum, int per_quantum)
{
    return (int)floor(time / quantum * per_quantum + 0.5);
}

/* ---- ASCII ---------------------------------------------------------------- */

static void ascii_row(const ptdp_schedule *s, const ptdp_schedule_timeline *t, int st,
                      double q, int cpq, char *row, int width)
{
    memset(row, '.', (size_t)width);
    row[width] = '\0';
    for (int i = 0; i < s->stage[st].count; i++) {
        const ptdp_action *a = &s->stage[st].actions[i];
        if (!is_drawn(a->kind))
            continue;
        int c0 = column(t->time[st][i].start, q, cpq);
        int c1 = column(t->time[st][i].end, q, cpq);
        char label[16];
        int n = snprintf(label, sizeof label, "%c%d",
                         a->kind == PTDP_ACT_FORWARD ? 'F' : 'B', a->mb);
        for (int c = c0; c < c1 && c < width; c++)
            row[c] = c - c0 < n ? label[c - c0] : a->kind == PTDP_ACT_FORWARD ? '>' : '<';
    }
}

int ptdp_schedule_ascii(const ptdp_schedule *s, const ptdp_schedule_timeline *t, FILE *out)
{
    if (s == NULL || t == NULL || out == NULL || t->pp != s->pp)
        return PTDP_EINVAL;
    const int cpq = 1 + digits(s->micro_batches - 1);      /* columns per quantum */
    const double q = quantum_of(s, t, 20000.0 / cpq);
    const int width = column(t->makespan, q, cpq);
    char *row = malloc((size_t)width + 2);
    if (row == NULL)
        return PTDP_ENOMEM;

    fprintf(out, "%s: %d stage%s, %d micro-batch%s, makespan %g "
                 "(one column = %g time units)\n",
            s->name, s->pp, s->pp == 1 ? "" : "s", s->micro_batches,
            s->micro_batches == 1 ? "" : "es", t->makespan, q / cpq);
    for (int st = 0; st < s->pp; st++) {
        ascii_row(s, t, st, q, cpq, row, width);
        fprintf(out, "stage %-2d|%s| idle %5.1f%%  peak %d mb\n", st, row,
                t->makespan > 0 ? 100.0 * t->idle[st] / t->makespan : 0.0,
                ptdp_schedule_peak_in_flight(s, st));
    }

    /* The time axis: a '+' at every tick, its value below, aligned with the
     * left edge of the column where that time begins. */
    const double step = tick_step(q, 8.0 / cpq + 1);
    memset(row, '-', (size_t)width + 1);
    row[width + 1] = '\0';
    for (double x = 0; x <= t->makespan + 1e-9; x += step)
        row[column(x, q, cpq)] = '+';
    row[width] = '+';
    fprintf(out, "        %s\ntime    ", row);
    int at = 0;
    for (double x = 0; x <= t->makespan + 1e-9; x += step) {
        int c = column(x, q, cpq);
        if (c >= at)
            at += fprintf(out, "%*s%g", c - at, "", x);
    }
    fputc('\n', out);
    free(row);

    fprintf(out, "F<k> forward and B<k> backward of micro-batch k, . idle; "
                 "peak = micro-batches whose activations are alive at once\n");
    const int p = s->pp, m = s->micro_batches;
    fprintf(out, "bubble: measured %.6f (idle / makespan, mean over stages); "
                 "formula (p-1)/(m+p-1) = %d/%d = %.6f (uniform stages, free links)\n",
            t->bubble, p - 1, m + p - 1, ptdp_bubble_formula(p, m));
    return ferror(out) ? PTDP_EIO : PTDP_OK;
}

/* ---- SVG ------------------------------------------------------------------ */

enum { LEFT = 72, TOP = 44, LANE = 28, GAP = 6, RIGHT = 84, PX_PER_QUANTUM = 28 };

static double x_of(double time, double q) { return LEFT + time / q * PX_PER_QUANTUM; }
static int    y_of(int stage)             { return TOP + stage * (LANE + GAP); }

static void svg_body(FILE *f, const ptdp_schedule *s, const ptdp_schedule_timeline *t)
{
    const double q = quantum_of(s, t, 4000);
    double width = x_of(t->makespan, q) + RIGHT;
    if (width < 800)
        width = 800;      /* room for the title and the legend */
    const int axis_y = y_of(s->pp) + 4, height = axis_y + 56;

    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%d\" "
               "viewBox=\"0 0 %.0f %d\" font-family=\"Helvetica, Arial, sans-serif\">\n",
            width, height, width, height);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%d\" fill=\"white\"/>\n",
            width, height);
    /* s->name comes from the registry or a caller: keep it to safe characters. */
    char name[sizeof s->name];
    for (size_t i = 0; i < sizeof name; i++)
        name[i] = s->name[i] && strchr("<>&\"'", s->name[i]) ? '_' : s->name[i];
    fprintf(f, "<text x=\"%d\" y=\"24\" font-size=\"15\" font-weight=\"bold\">%s schedule: "
               "p = %d stages, m = %d micro-batches, bubble %.1f%% "
               "(formula (p-1)/(m+p-1) = %.1f%%)</text>\n", LEFT, name, s->pp,
            s->micro_batches, 100.0 * t->bubble,
            100.0 * ptdp_bubble_formula(s->pp, s->micro_batches));

    for (int st = 0; st < s->pp; st++) {
        const int y = y_of(st);
        fprintf(f, "<text x=\"8\" y=\"%d\" font-size=\"12\">stage %d</text>\n",
                y + LANE / 2 + 4, st);
        /* The lane itself is the idle colour: whatever no box covers is bubble. */
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#e6e6e6\"/>\n",
                LEFT, y, x_of(t->makespan, q) - LEFT, LANE);
        for (int i = 0; i < s->stage[st].count; i++) {
            const ptdp_action *a = &s->stage[st].actions[i];
            if (!is_drawn(a->kind))
                continue;
            const int fwd = a->kind == PTDP_ACT_FORWARD;
            const double x0 = x_of(t->time[st][i].start, q), x1 = x_of(t->time[st][i].end, q);
            fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\" "
                       "stroke=\"white\" stroke-width=\"1\"/>\n",
                    x0, y, x1 - x0, LANE, fwd ? "#3b73c4" : "#3f9e4d");
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" fill=\"white\" "
                       "text-anchor=\"middle\">%c%d</text>\n",
                    (x0 + x1) / 2, y + LANE / 2 + 4, fwd ? 'F' : 'B', a->mb);
        }
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" fill=\"#555\">idle %.1f%%</text>\n",
                x_of(t->makespan, q) + 8, y + LANE / 2 + 4,
                t->makespan > 0 ? 100.0 * t->idle[st] / t->makespan : 0.0);
    }

    /* Time axis with ticks, then the legend. */
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\"/>\n",
            LEFT, axis_y, x_of(t->makespan, q), axis_y);
    const double step = tick_step(q, 2);
    for (double x = 0; x <= t->makespan + 1e-9; x += step)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\"/>\n"
                   "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\">%g</text>\n",
                x_of(x, q), axis_y, x_of(x, q), axis_y + 5, x_of(x, q), axis_y + 17, x);
    fprintf(f, "<text x=\"8\" y=\"%d\" font-size=\"10\">time</text>\n", axis_y + 17);
    static const struct { const char *fill, *label; } legend[] = {
        { "#3b73c4", "forward" }, { "#3f9e4d", "backward" }, { "#e6e6e6", "idle (bubble)" },
    };
    for (int i = 0; i < 3; i++)
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" fill=\"%s\"/>"
                   "<text x=\"%d\" y=\"%d\" font-size=\"11\">%s</text>\n",
                LEFT + i * 120, axis_y + 30, legend[i].fill,
                LEFT + i * 120 + 20, axis_y + 41, legend[i].label);
    fprintf(f, "</svg>\n");
}

/* Written atomically (file.h): a reader sees the old file or the whole new
 * one, never half a picture. */
int ptdp_schedule_svg(const ptdp_schedule *s, const ptdp_schedule_timeline *t,
                      const char *path, char *msg, size_t msglen)
{
    if (s == NULL || t == NULL || path == NULL || t->pp != s->pp) {
        snprintf(msg, msglen, "ptdp_schedule_svg: no schedule, timeline or path");
        return PTDP_EINVAL;
    }
    ptdp_atomic_file f;
    int rc = ptdp_atomic_open(&f, path, msg, msglen);
    if (rc != 0)
        return rc;
    svg_body(ptdp_atomic_stream(&f), s, t);
    return ptdp_atomic_commit(&f, msg, msglen);
}
