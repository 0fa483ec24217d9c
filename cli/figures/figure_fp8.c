/*
 * figure_fp8.c — fp8_loss_curves.svg: one GPT trained in float, bf16 and
 * each FP8 recipe, the curves on one plot and their gaps to float's below.
 *
 * The runs are `ptdp bench fp8 --steps 60`'s (ptdp_fp8_bench_config and
 * ptdp_fp8_bench_train, bench_fp8.c): the first 60 steps of its default
 * runs — ptdp demo's GPT on the built-in sums, batch 64, AdamW lr 3e-3 —
 * every run from the same parameters on the same batches.  Above, loss(s) for every precision — one bundle of
 * curves, since they are nearly the same run; below, what tells them apart:
 *
 *     gap_p(s) = loss_p(s) − loss_float(s)
 *
 *   loss │╲╲                       gap │    ·  ·     FP8 recipes
 *        │  ╲╲___                      │─ ─ ─ ─ ─    bf16
 *        │      ──────                0├──────────   float (0 by definition)
 *        └─────────── s                └─────────── s
 *
 * The caption names each run's gap at the last step beside bf16's, the
 * yardstick: a precision everyone trains in.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench/bench.h"
#include "../model_flags.h"
#include "figures.h"
#include "ptdp/error.h"

enum { FIG_STEPS = 60, FIG_RUNS = 16 };

typedef struct {
    double x, y, w, h;        /* the plot area, pixels */
    double lo, hi;            /* the y range, data units */
} panel;

static double px(const panel *p, int i, int n) { return p->x + (double)i / (n > 1 ? n - 1 : 1) * p->w; }
static double py(const panel *p, double v) { return p->y + p->h - (v - p->lo) / (p->hi - p->lo) * p->h; }

/* Grid lines every `step`, labelled with the decimals the step needs. */
static void axes(ptdp_svg *s, const panel *p, double step, const char *title, bool steps_below)
{
    const int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    for (double v = ceil(p->lo / step - 1e-9) * step; v <= p->hi + 1e-9 * step; v += step) {
        const double shown = fabs(v) < 1e-9 * step ? 0 : v;   /* 0, not -0 */
        ptdp_svg_line(s, p->x, py(p, shown), p->x + p->w, py(p, shown), "#e4e4e4", 1, NULL);
        ptdp_svg_text(s, p->x - 6, py(p, shown) + 4, 11, PTDP_SVG_END, "#333333", "%.*f", decimals, shown);
    }
    ptdp_svg_line(s, p->x, p->y, p->x, p->y + p->h, "#333333", 1, NULL);
    ptdp_svg_line(s, p->x, p->y + p->h, p->x + p->w, p->y + p->h, "#333333", 1, NULL);
    ptdp_svg_text(s, p->x, p->y - 8, 11, PTDP_SVG_START, "#333333", "%s", title);
    for (int st = 1; steps_below && st <= FIG_STEPS; st++)
        if (st == 1 || st % 10 == 0) {
            const double x = px(p, st - 1, FIG_STEPS);
            ptdp_svg_line(s, x, p->y + p->h, x, p->y + p->h + 5, "#333333", 1, NULL);
            ptdp_svg_text(s, x, p->y + p->h + 18, 11, PTDP_SVG_MIDDLE, "#333333", "%d", st);
        }
}

/* How each precision is drawn: float thick, bf16 dashed, FP8 thin. */
static void style(const ptdp_fp8_bench_precision *p, int k, const char **color, double *width, const char **dash)
{
    static const char *const fp8_colors[] = { "#e15759", "#59a14f", "#f28e2b", "#b07aa1", "#76b7b2", "#9c755f" };
    *dash = NULL;
    if (p->recipe == NULL && !p->bf16) {
        *color = "#4e79a7";
        *width = 4.5;
    } else if (p->bf16) {
        *color = "#333333";
        *width = 2;
        *dash = "7 5";
    } else {
        *color = fp8_colors[k % 6];
        *width = 1.6;
    }
}

/* Curve of run r in panel p: its losses, or (ref) its gaps to ref's. */
static void curve(ptdp_svg *s, const panel *p, const ptdp_fp8_bench_run *r, const ptdp_fp8_bench_run *ref,
                  const char *color, double width, const char *dash)
{
    double xs[FIG_STEPS], ys[FIG_STEPS];
    const int n = r->completed < ref->completed ? r->completed : ref->completed;
    for (int i = 0; i < n; i++) {
        xs[i] = px(p, i, FIG_STEPS);
        ys[i] = py(p, ref == r ? r->loss[i] : r->loss[i] - ref->loss[i]);
    }
    ptdp_svg_polyline(s, xs, ys, n, color, width, dash);
}

/* The y ranges: all losses above, all gaps (and 0) below. */
static void ranges(const ptdp_fp8_bench_run *runs, int n, panel *top, panel *bottom, double *tstep, double *bstep)
{
    double lo = INFINITY, hi = -INFINITY, glo = 0, ghi = 0;
    for (int k = 0; k < n; k++)
        for (int i = 0; i < runs[k].completed && i < runs[0].completed; i++) {
            lo = fmin(lo, runs[k].loss[i]);
            hi = fmax(hi, runs[k].loss[i]);
            glo = fmin(glo, runs[k].loss[i] - runs[0].loss[i]);
            ghi = fmax(ghi, runs[k].loss[i] - runs[0].loss[i]);
        }
    *tstep = ptdp_svg_tick_step(hi - lo, 6);
    top->lo = floor(lo / *tstep) * *tstep;
    top->hi = ceil(hi / *tstep) * *tstep;
    *bstep = ptdp_svg_tick_step(ghi - glo, 6);
    bottom->lo = floor(glo / *bstep) * *bstep;
    bottom->hi = ceil(ghi / *bstep) * *bstep;
    if (bottom->hi <= bottom->lo)
        bottom->hi = bottom->lo + *bstep;
}

static void draw(ptdp_svg *s, const ptdp_train_config *base, const ptdp_fp8_bench_run *runs, int n, const char *noun)
{
    panel top = { 90, 90, 620, 250, 0, 1 }, bottom = { 90, 400, 620, 160, 0, 1 };
    double tstep, bstep;
    ranges(runs, n, &top, &bottom, &tstep, &bstep);
    ptdp_svg_text(s, 20, 26, 17, PTDP_SVG_BOLD, NULL, "Training loss in %s, bf16 and FP8: one %s, the same "
                  "batches", PTDP_REAL_NAME, noun);
    ptdp_svg_text(s, 20, 46, 12, PTDP_SVG_START, "#333333", "ptdp demo's %s on the built-in sums, batch %d, AdamW "
                  "lr %g, %d steps, one device; every run from the same parameters (ptdp bench fp8).", noun,
                  base->batch, base->lr, FIG_STEPS);
    axes(s, &top, tstep, "loss (mean cross-entropy over the batch)", false);
    axes(s, &bottom, bstep, "gap to " PTDP_REAL_NAME ": loss - loss(" PTDP_REAL_NAME ")", true);
    ptdp_svg_text(s, bottom.x + bottom.w / 2, bottom.y + bottom.h + 38, 12, PTDP_SVG_MIDDLE, "#333333", "step");
    double ly = top.y + 6;
    for (int k = n - 1; k >= 0; k--) {   /* float last: on top */
        const char *color, *dash;
        double width;
        style(&runs[k].prec, k, &color, &width, &dash);
        curve(s, &top, &runs[k], &runs[k], color, width, dash);
        if (k > 0)
            curve(s, &bottom, &runs[k], &runs[0], color, width, dash);
    }
    for (int k = 0; k < n; k++) {
        const char *color, *dash;
        double width;
        style(&runs[k].prec, k, &color, &width, &dash);
        const ptdp_fp8_bench_gap g = ptdp_fp8_bench_gap_of(&runs[k], &runs[0]);
        ptdp_svg_line(s, 740, ly, 774, ly, color, width, dash);
        if (k == 0)
            ptdp_svg_text(s, 782, ly + 4, 12, PTDP_SVG_START, NULL, "%s (the reference)", runs[k].prec.name);
        else if (isfinite(g.final))
            ptdp_svg_text(s, 782, ly + 4, 12, PTDP_SVG_START, NULL, "%s: gap %+.4f (%+.2f%%)", runs[k].prec.name,
                          g.final, 100 * g.rel);
        else
            ptdp_svg_text(s, 782, ly + 4, 12, PTDP_SVG_START, "#c00000", "%s: diverged at step %d",
                          runs[k].prec.name, runs[k].completed + 1);
        ly += 24;
    }
    ptdp_svg_text(s, 740, ly + 10, 11, PTDP_SVG_START, "#333333", "gaps at step %d", FIG_STEPS);
}

/* The caption: the FP8 runs' gaps against bf16's, the yardstick. */
static void caption(ptdp_svg *s, const ptdp_fp8_bench_run *runs, int n)
{
    double worst = 0, bf16 = NAN;
    const char *worst_name = "";
    for (int k = 1; k < n; k++) {
        const ptdp_fp8_bench_gap g = ptdp_fp8_bench_gap_of(&runs[k], &runs[0]);
        if (runs[k].prec.bf16)
            bf16 = g.final;
        else if (!(fabs(g.final) <= fabs(worst))) {
            worst = g.final;
            worst_name = runs[k].prec.name;
        }
    }
    ptdp_svg_text(s, 20, 625, 12.5, PTDP_SVG_BOLD, NULL, "At step %d the largest FP8 gap is %s's, %+.4f%s", FIG_STEPS,
                  worst_name, worst, isfinite(bf16) ? "" : ".");
    if (isfinite(bf16))
        ptdp_svg_text(s, 20, 645, 12, PTDP_SVG_START, "#333333", "bf16's own gap is %+.4f: FP8 rounds each operand "
                      "of a product to 3 mantissa bits (E4M3) or 2 (E5M2), bf16 to 7.", bf16);
    ptdp_svg_text(s, 20, 665, 12, PTDP_SVG_START, "#333333", "Longer runs and their held-out sums: ptdp bench fp8 "
                  "(docs/benchmarks.md).");
}

int fig_fp8_loss_curves(const char *path, char *msg, size_t msglen)
{
    /* ptdp bench fp8 --steps 60: the first steps of its default runs */
    char steps[16];
    snprintf(steps, sizeof steps, "%d", FIG_STEPS);
    char *argv[] = { "fp8", "--steps", steps, NULL };
    ptdp_train_config base;
    ptdp_model_flags mf;
    if (ptdp_fp8_bench_config(3, argv, &base, &mf) != 0) {
        snprintf(msg, msglen, "ptdp bench fp8 --steps %d: refused", FIG_STEPS);
        return PTDP_EINVAL;
    }
    const char *noun = ptdp_model_cli_noun(ptdp_model_of(&base.model));
    int err = 0;
    ptdp_fp8_bench_precision p[FIG_RUNS];
    const int n = ptdp_fp8_bench_precisions(p, FIG_RUNS);
    ptdp_fp8_bench_run runs[FIG_RUNS];
    memset(runs, 0, sizeof runs);
    for (int k = 0; k < n && err == 0; k++)
        err = ptdp_fp8_bench_train(&base, &p[k], false, 1, &runs[k], msg, msglen);
    if (err == 0 && runs[0].completed < FIG_STEPS) {
        snprintf(msg, msglen, "the %s run diverged: %s", runs[0].prec.name, runs[0].diverged);
        err = PTDP_ECHECK;
    }
    ptdp_svg s;
    if (err == 0 && (err = ptdp_svg_begin(&s, 1080, 690)) == 0) {
        draw(&s, &base, runs, n, noun);
        caption(&s, runs, n);
        err = fig_finish(&s, path, msg, msglen);
    }
    for (int k = 0; k < n; k++)
        ptdp_fp8_bench_run_free(&runs[k]);
    ptdp_model_flags_free(&mf);
    return err;
}
