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
 * its label.  A split backward draws B (the input's gradient) and W (the
 * weights', padded with '='); with model chunks a label says which chunk,
 * F3.1 (micro-batch 3 through the stage's chunk 1), and the SVG pales the
 * colour of each later chunk.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"
#include "ptdp/schedule.h"

/* ---- shared geometry ---------------------------------------------------------- */

static int is_drawn(ptdp_action_kind k)
{
    return k == PTDP_ACT_FORWARD || k == PTDP_ACT_BACKWARD || k == PTDP_ACT_BACKWARD_INPUT ||
           k == PTDP_ACT_BACKWARD_WEIGHT;
}

static char letter(ptdp_action_kind k)
{
    return k == PTDP_ACT_FORWARD ? 'F' : k == PTDP_ACT_BACKWARD_WEIGHT ? 'W' : 'B';
}

/* "F3", or "F3.1" when the schedule has chunks. */
static int label_of(const ptdp_schedule *s, const ptdp_action *a, char *buf, size_t len)
{
    if (s->virtual_stages > 1)
        return snprintf(buf, len, "%c%d.%d", letter(a->kind), a->mb, a->chunk);
    return snprintf(buf, len, "%c%d", letter(a->kind), a->mb);
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
 * `min_quanta` quanta apart so the numbers do not collide.  The power of ten
 * comes from the quantum itself, so a schedule timed in 1e-12 or in 1e300
 * units gets ticks of its own scale. */
static double tick_step(double quantum, double min_quanta)
{
    const double want = quantum * min_quanta;
    double decade = pow(10, floor(log10(want)));
    if (!(decade > 0))
        return want;    /* below the smallest power of ten a double holds */
    for (int f = 0; f < 4; f++) {
        static const double factor[] = { 1, 2, 5, 10 };
        if (decade * factor[f] >= want * (1 - 1e-12))
            return decade * factor[f];
    }
    return 10 * decade;
}

/* The last time worth a tick: the makespan, give or take rounding (a part in
 * 1e9 of it, at most 1e-9 as for unit times). */
static double axis_limit(double makespan)
{
    return makespan + fmin(1e-9, 1e-9 * makespan);
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

/* The column where `time` begins; never past INT_MAX, whatever the ratio. */
static int column(double time, double quantum, int per_quantum)
{
    const double c = floor(time / quantum * per_quantum + 0.5);
    return c < INT_MAX ? (int)c : INT_MAX;
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
        char label[24];
        int n = label_of(s, a, label, sizeof label);
        char pad = a->kind == PTDP_ACT_FORWARD ? '>' : a->kind == PTDP_ACT_BACKWARD_WEIGHT ? '=' : '<';
        for (int c = c0; c < c1 && c < width; c++)
            row[c] = c - c0 < n ? label[c - c0] : pad;
    }
}

int ptdp_schedule_ascii(const ptdp_schedule *s, const ptdp_schedule_timeline *t, FILE *out)
{
    if (s == NULL || t == NULL || out == NULL || t->pp != s->pp)
        return PTDP_EINVAL;
    const int cpq = 1 + digits(s->micro_batches - 1) +     /* columns per quantum */
                    (s->virtual_stages > 1 ? 1 + digits(s->virtual_stages - 1) : 0);
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
    const double step = tick_step(q, 8.0 / cpq + 1), last = axis_limit(t->makespan);
    memset(row, '-', (size_t)width + 1);
    row[width + 1] = '\0';
    for (double x = 0; x <= last && column(x, q, cpq) <= width; x += step)
        row[column(x, q, cpq)] = '+';
    row[width] = '+';
    fprintf(out, "        %s\ntime    ", row);
    int at = 0;
    for (double x = 0; x <= last && column(x, q, cpq) <= width; x += step) {
        int c = column(x, q, cpq);
        if (c >= at)
            at += fprintf(out, "%*s%g", c - at, "", x);
    }
    fputc('\n', out);
    free(row);

    const bool split = s->entry != NULL && (s->entry->caps & PTDP_SCHED_SPLIT_BACKWARD);
    fprintf(out, "F<k> forward and B<k> backward of micro-batch k%s%s, . idle; "
                 "peak = micro-batches whose activations are alive at once%s\n",
            split ? " (B: its input's gradient only), W<k> its weight gradients" : "",
            s->virtual_stages > 1 ? "; F<k>.<c> through the stage's chunk c" : "",
            s->layout == PTDP_CHUNKS_DUAL ? " (chunk 0 the down copy, 1 the up copy; each a whole stage)"
            : s->virtual_stages > 1 ? " (in chunk-micro-batches, each 1/v of a stage's)" : "");
    const char *words;
    double formula = ptdp_schedule_bubble_formula(s, &words);
    /* Every formula is (p - 1) / (its denominator), DualPipe's (p - 2) / (…):
     * show the fraction. */
    const int top = s->layout == PTDP_CHUNKS_DUAL ? s->pp - 2 : s->pp - 1;
    char fraction[48] = "";
    if (formula > 0)
        snprintf(fraction, sizeof fraction, " = %d/%.0f", top, top / formula);
    fprintf(out, "bubble: measured %.6f (idle / makespan, mean over stages); "
                 "formula %s%s = %.6f (uniform stages, free links%s)\n", t->bubble, words, fraction, formula,
            s->layout != PTDP_CHUNKS_RING ? ", F = B = W, an F&B pair F + B, m >= 2p"
            : split ? ", F = B = W, m >= p" : "");
    return ferror(out) ? PTDP_EIO : PTDP_OK;
}

/* ---- SVG ------------------------------------------------------------------ */

static double x_at(const ptdp_schedule_frame *f, double time) { return f->left + time * f->px_per_time; }

/* Forward blue, backward (or B) green, W orange; chunk c of v mixed with
 * white by c / (v + 1), so a stage's later chunks are paler. */
static const unsigned colours[3] = { 0x3b73c4, 0x3f9e4d, 0xd9822b };

static void box_colour(const ptdp_schedule *s, const ptdp_action *a, char fill[8])
{
    unsigned rgb = colours[a->kind == PTDP_ACT_FORWARD ? 0 : a->kind == PTDP_ACT_BACKWARD_WEIGHT ? 2 : 1];
    double w = (double)a->chunk / (s->virtual_stages + 1);
    unsigned out = 0;
    for (int shift = 16; shift >= 0; shift -= 8) {
        double c = (rgb >> shift) & 0xff;
        out |= (unsigned)(c + (255 - c) * w + 0.5) << shift;
    }
    snprintf(fill, 8, "#%06x", out);
}

/* An overlapped pair (DualPipeV's F&B) in one black border, as in the
 * reference's figure: the forward and the backward beside it, whose
 * communication each hides under the other's compute. */
static void draw_pairs(ptdp_svg *svg, const ptdp_schedule *s, const ptdp_schedule_timeline *t,
                       const ptdp_schedule_frame *f, int st, double ly)
{
    const ptdp_stage_actions *list = &s->stage[st];
    for (int i = 0; i < list->count; i++) {
        if (!list->actions[i].pair)
            continue;
        int j = i + 1;
        while (j < list->count && !is_drawn(list->actions[j].kind))
            j++;
        if (j == list->count)
            continue;
        const double x0 = x_at(f, t->time[st][i].start), x1 = x_at(f, t->time[st][j].end);
        ptdp_svg_rect(svg, x0, ly, x1 - x0, f->lane, "none", "black");
    }
}

void ptdp_schedule_draw(ptdp_svg *svg, const ptdp_schedule *s, const ptdp_schedule_timeline *t,
                        const ptdp_schedule_frame *f)
{
    const double lane = f->lane, px = f->px_per_time;
    for (int st = 0; st < s->pp; st++) {
        const double ly = f->top + st * (lane + f->gap);
        ptdp_svg_text(svg, f->left - 10, ly + lane / 2.0 + 4, 12, PTDP_SVG_END, NULL, "stage %d", st);
        /* The lane itself is the idle colour: whatever no box covers is bubble. */
        ptdp_svg_rect(svg, x_at(f, 0), ly, t->makespan * px, lane, "#e3e3e3", NULL);
        for (int i = 0; i < s->stage[st].count; i++) {
            const ptdp_action *a = &s->stage[st].actions[i];
            if (!is_drawn(a->kind))
                continue;
            const double x0 = x_at(f, t->time[st][i].start), x1 = x_at(f, t->time[st][i].end);
            char fill[8], label[24];
            box_colour(s, a, fill);
            label_of(s, a, label, sizeof label);
            if (f->mark_micro_batches) {
                ptdp_svg_group_begin_data(svg, "mb", a->mb);
                ptdp_svg_title(svg, "%s on stage %d: time %g to %g", label, st, t->time[st][i].start,
                               t->time[st][i].end);
            }
            ptdp_svg_rect(svg, x0, ly, x1 - x0, lane, fill, "white");
            /* A label wider than its box (about 6 units a character at
             * size 10) shrinks to the micro-batch, or goes. */
            if ((double)strlen(label) * 6.0 > x1 - x0)
                snprintf(label, sizeof label, "%d", a->mb);
            if ((double)strlen(label) * 6.0 <= x1 - x0)
                ptdp_svg_text(svg, (x0 + x1) / 2, ly + lane / 2.0 + 4, 10, PTDP_SVG_MIDDLE, "white", "%s",
                              label);
            if (f->mark_micro_batches)
                ptdp_svg_group_end(svg);
        }
        draw_pairs(svg, s, t, f, st, ly);
        ptdp_svg_text(svg, x_at(f, f->axis_end) + 10, ly + lane / 2.0 + 4, 11, PTDP_SVG_START, "#444444",
                      "idle %4.1f%% \u00b7 keeps %d", t->makespan > 0 ? 100.0 * t->idle[st] / t->makespan : 0,
                      ptdp_schedule_peak_in_flight(s, st));
    }

    const double ay = f->top + s->pp * (lane + f->gap) + 2;
    ptdp_svg_line(svg, x_at(f, 0), ay, x_at(f, f->axis_end), ay, "#333333", 1, NULL);
    double step = ptdp_svg_tick_step(f->axis_end, f->max_ticks);
    if (!(step > 0))
        step = f->axis_end > 0 ? f->axis_end : 1;
    const double last = axis_limit(f->axis_end);
    for (double x = 0; x <= last; x += step) {
        ptdp_svg_line(svg, x_at(f, x), ay, x_at(f, x), ay + 5, "#333333", 1, NULL);
        ptdp_svg_text(svg, x_at(f, x), ay + 17, 10, PTDP_SVG_MIDDLE, "#333333", "%g", x);
    }
    ptdp_svg_text(svg, f->left - 10, ay + 17, 10, PTDP_SVG_END, "#333333", "time");
}

/* `ptdp schedule --svg`: one timeline, a title with the bubble and a legend.
 * The horizontal scale gives the shortest box (the quantum) 28 units, room
 * for its label. */
int ptdp_schedule_picture(const ptdp_schedule *s, const ptdp_schedule_timeline *t, int mark_micro_batches,
                          ptdp_svg *out)
{
    const double q = quantum_of(s, t, 4000);
    ptdp_schedule_frame f = {
        .left = 72, .top = 44, .lane = 28, .gap = 6,
        .px_per_time = 28 / q < 1e300 ? 28 / q : 1e300,   /* q may be as small as a denormal */
        .axis_end = t->makespan, .max_ticks = 12, .mark_micro_batches = mark_micro_batches,
    };
    double width = x_at(&f, t->makespan) + 130;
    if (width < 900)
        width = 900;      /* room for the title and the legend */
    const double legend_y = f.top + s->pp * (f.lane + f.gap) + 32;

    ptdp_svg svg;
    ptdp_svg_begin(&svg, width, legend_y + 30);
    const char *words;
    double formula = ptdp_schedule_bubble_formula(s, &words);
    char chunks[32] = "";
    if (s->virtual_stages > 1)
        snprintf(chunks, sizeof chunks, ", v = %d chunks", s->virtual_stages);
    ptdp_svg_text(&svg, f.left, 24, 15, PTDP_SVG_BOLD, NULL,
                  "%s schedule: p = %d stages, m = %d micro-batches%s, bubble %.1f%% "
                  "(formula %s = %.1f%%)", s->name, s->pp, s->micro_batches, chunks,
                  100.0 * t->bubble, words, 100.0 * formula);
    ptdp_schedule_draw(&svg, s, t, &f);
    const int split = s->entry != NULL && (s->entry->caps & PTDP_SCHED_SPLIT_BACKWARD);
    const struct { const char *fill, *label; } legend[] = {
        { "#3b73c4", "forward" }, { "#3f9e4d", split ? "B: input gradient" : "backward" },
        { "#e3e3e3", "idle (bubble)" }, { "#d9822b", "W: weight gradients" },
    };
    for (int i = 0; i < (split ? 4 : 3); i++) {
        ptdp_svg_rect(&svg, f.left + i * 150, legend_y, 14, 14, legend[i].fill, NULL);
        ptdp_svg_text(&svg, f.left + i * 150 + 20, legend_y + 11, 11, PTDP_SVG_START, NULL, "%s",
                      legend[i].label);
    }
    if (s->virtual_stages > 1)
        ptdp_svg_text(&svg, f.left + 3 * 150, legend_y + 11, 11, PTDP_SVG_START, NULL,
                      "Fk.c: micro-batch k through chunk c (paler: later chunks)");
    *out = svg;
    return ptdp_svg_end(out);
}

int ptdp_schedule_svg(const ptdp_schedule *s, const ptdp_schedule_timeline *t,
                      const char *path, char *msg, size_t msglen)
{
    if (s == NULL || t == NULL || path == NULL || t->pp != s->pp) {
        snprintf(msg, msglen, "ptdp_schedule_svg: no schedule, timeline or path");
        return PTDP_EINVAL;
    }
    ptdp_svg svg;
    int rc = ptdp_schedule_picture(s, t, 0, &svg);
    if (rc != 0)
        snprintf(msg, msglen, "%s: drawing failed (%s)", path, ptdp_strerror(rc));
    else
        rc = ptdp_svg_save(&svg, path, msg, msglen);
    ptdp_svg_free(&svg);
    return rc;
}
