/*
 * figure_training.c — memory_per_device.svg and loss_curves.svg, from real runs.
 *
 * Both figures train the default model (what `ptdp train` runs without
 * flags) with ptdp_train and draw what the runs report:
 *
 *   memory_per_device   each device's arena peaks by category (launch result),
 *                       for eight configurations — ZeRO-1 and ZeRO-2 among
 *                       them, with ZeRO-2's bucket in category "comm" — and
 *                       the eight devices of the 3D run one by one;
 *   loss_curves         the loss of every step of the single-device baseline
 *                       and of dp 2 x tp 2 x pp 2 — one curve over the other,
 *                       because they are the same training run.
 *
 *   MiB │ ▆                      params, grads and optimizer state fall as
 *       │ █ ▆ ▄                  1/tp and 1/pp; data parallelism keeps a full
 *       │ █ █ █ ▂ ▂ ▂            replica (ZeRO shards its optimizer state and
 *       └─────────────           gradients); GPipe keeps m micro-batches of
 *                                activations, 1F1B at most p.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "figures.h"
#include "ptdp/error.h"
#include "ptdp/mesh.h"
#include "ptdp/launch.h"

/* ---- one training run -------------------------------------------------------- */

typedef struct {
    ptdp_train_result res;
    ptdp_launch_result launch;
} run_result;

static void run_free(run_result *r)
{
    ptdp_train_result_free(&r->res);
    ptdp_launch_result_free(&r->launch);
}

static int train(ptdp_train_config *c, const char *label, run_result *out, char *msg, size_t msglen)
{
    memset(out, 0, sizeof *out);
    char why[PTDP_MSG_MAX];
    if (ptdp_train_validate(c, why, sizeof why) != 0) {
        snprintf(msg, msglen, "%s: %s", label, why);
        return PTDP_EINVAL;
    }
    ptdp_launch_opts o = { .watchdog_s = 60, .result = &out->launch };
    int err = ptdp_train(c, &o, NULL, NULL, &out->res, why, sizeof why);
    if (err != 0) {
        snprintf(msg, msglen, "training %s failed: %s", label, why);
        run_free(out);
    }
    return err;
}

/* ---- shared chart pieces ---------------------------------------------------------- */

typedef struct {
    double x, y, w, h;        /* the plot area, pixels */
    double lo, hi;            /* the y range, data units */
} chart;

static double y_of(const chart *c, double v)
{
    return c->y + c->h - (v - c->lo) / (c->hi - c->lo) * c->h;
}

/* Grid lines and labels every `step` from lo to hi, with as many decimals
 * as the step needs (0.5 → one, 0.02 → two). */
static void y_axis(ptdp_svg *s, const chart *c, double step, const char *title)
{
    int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    for (double v = ceil(c->lo / step - 1e-9) * step; v <= c->hi + 1e-9 * step; v += step) {
        if (fabs(v) < 1e-9 * step)
            v = 0;      /* print 0, not -0 */
        ptdp_svg_line(s, c->x, y_of(c, v), c->x + c->w, y_of(c, v), "#e4e4e4", 1, NULL);
        ptdp_svg_text(s, c->x - 6, y_of(c, v) + 4, 11, PTDP_SVG_END, "#333333", "%.*f", decimals, v);
    }
    ptdp_svg_line(s, c->x, c->y, c->x, c->y + c->h, "#333333", 1, NULL);
    ptdp_svg_line(s, c->x, c->y + c->h, c->x + c->w, c->y + c->h, "#333333", 1, NULL);
    ptdp_svg_text(s, c->x, c->y - 10, 11, PTDP_SVG_START, "#333333", "%s", title);
}

static void legend_entry(ptdp_svg *s, double x, double y, const char *fill, const char *label)
{
    ptdp_svg_rect(s, x, y - 11, 13, 13, fill, NULL);
    ptdp_svg_text(s, x + 18, y, 12, PTDP_SVG_START, NULL, "%s", label);
}

/* ---- memory per device ------------------------------------------------------------- */

static const char *const category_color[PTDP_MEM_NCAT] = {
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#bab0ac",
};

static const struct {
    const char *line1, *line2;
    int dp, tp, pp, micro_batches;
    const ptdp_schedule_entry *schedule;
    int zero;
} configs[] = {
    { "1 device", "baseline", 1, 1, 1, 1, &ptdp_schedule_row_1f1b, 0 },
    { "dp 2", "", 2, 1, 1, 1, &ptdp_schedule_row_1f1b, 0 },
    { "dp 2", "ZeRO-1", 2, 1, 1, 1, &ptdp_schedule_row_1f1b, 1 },
    { "dp 2", "ZeRO-2", 2, 1, 1, 1, &ptdp_schedule_row_1f1b, 2 },
    { "tp 2", "", 1, 2, 1, 1, &ptdp_schedule_row_1f1b, 0 },
    { "pp 2 GPipe", "m 8", 1, 1, 2, 8, &ptdp_schedule_row_gpipe, 0 },
    { "pp 2 1F1B", "m 8", 1, 1, 2, 8, &ptdp_schedule_row_1f1b, 0 },
    { "dp 2 tp 2 pp 2", "1F1B m 4", 2, 2, 2, 4, &ptdp_schedule_row_1f1b, 0 },
};
enum { NCONFIGS = sizeof configs / sizeof configs[0], WORLD_3D = 8 };

static const double MiB = 1024.0 * 1024.0;

static double stack_total(const ptdp_mem_stats *m)
{
    double t = 0;
    for (int k = 0; k < PTDP_MEM_NCAT; k++)
        t += (double)m->peak[k];
    return t;
}

/* One stacked bar: each category's own peak, params at the bottom. */
static void bar(ptdp_svg *s, const chart *c, double x, double w, const ptdp_mem_stats *m)
{
    double v = 0;
    for (int k = 0; k < PTDP_MEM_NCAT; k++) {
        double b = (double)m->peak[k] / MiB;
        if (b <= 0)
            continue;
        ptdp_svg_rect(s, x, y_of(c, v + b), w, y_of(c, v) - y_of(c, v + b), category_color[k], "white");
        v += b;
    }
}

/* Each configuration trained for 2 steps: its busiest device's arena (and
 * which rank that was), and every device's of the 3D run. */
static int measure_configs(ptdp_mem_stats *busiest, int *busiest_rank, ptdp_mem_stats *each, char *msg,
                           size_t msglen)
{
    for (int i = 0; i < NCONFIGS; i++) {
        ptdp_train_config c = ptdp_train_defaults();
        c.dp = configs[i].dp;
        c.tp = configs[i].tp;
        c.pp = configs[i].pp;
        c.micro_batches = configs[i].micro_batches;
        c.schedule = configs[i].schedule;
        c.zero = configs[i].zero;
        c.steps = 2;    /* the optimizer state exists from the first step on */
        run_result r;
        int err = train(&c, configs[i].line1, &r, msg, msglen);
        if (err != 0)
            return err;
        busiest_rank[i] = 0;
        for (int d = 1; d < r.launch.world_size; d++)
            if (r.launch.devices[d].mem.peak_total > r.launch.devices[busiest_rank[i]].mem.peak_total)
                busiest_rank[i] = d;
        busiest[i] = r.launch.devices[busiest_rank[i]].mem;
        if (r.launch.world_size == WORLD_3D)
            for (int d = 0; d < WORLD_3D; d++)
                each[d] = r.launch.devices[d].mem;
        run_free(&r);
    }
    return 0;
}

/* Left: the busiest device of each configuration, its peak total above. */
static void draw_busiest(ptdp_svg *s, const ptdp_mem_stats *busiest, const int *busiest_rank)
{
    double top = 0;
    for (int i = 0; i < NCONFIGS; i++)
        top = fmax(top, stack_total(&busiest[i]) / MiB);
    double step = ptdp_svg_tick_step(top, 6);
    chart left = { 70, 120, 760, 330, 0, ceil(top / step) * step };
    y_axis(s, &left, step, "MiB, the busiest device of each run");
    const double slot = left.w / NCONFIGS;
    for (int i = 0; i < NCONFIGS; i++) {
        double x = left.x + i * slot + slot * 0.22, w = slot * 0.56;
        bar(s, &left, x, w, &busiest[i]);
        ptdp_svg_text(s, x + w / 2, y_of(&left, stack_total(&busiest[i]) / MiB) - 6, 11, PTDP_SVG_MIDDLE,
                      "#333333", "%.2f", (double)busiest[i].peak_total / MiB);
        ptdp_svg_text(s, x + w / 2, left.y + left.h + 17, 11, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, NULL, "%s",
                      configs[i].line1);
        ptdp_svg_text(s, x + w / 2, left.y + left.h + 31, 11, PTDP_SVG_MIDDLE, "#444444", "%s",
                      configs[i].line2);
        if (configs[i].dp * configs[i].tp * configs[i].pp > 1)
            ptdp_svg_text(s, x + w / 2, left.y + left.h + 45, 10, PTDP_SVG_MIDDLE, "#777777",
                          "device %d of %d", busiest_rank[i], configs[i].dp * configs[i].tp * configs[i].pp);
    }
}

/* Right: every device of the 3D run, labelled by its pipeline stage. */
static void draw_3d(ptdp_svg *s, const ptdp_mem_stats *each)
{
    double top = 0;
    for (int d = 0; d < WORLD_3D; d++)
        top = fmax(top, stack_total(&each[d]) / MiB);
    double step = ptdp_svg_tick_step(top, 6);
    chart right = { 900, 120, 250, 330, 0, ceil(top / step) * step };
    y_axis(s, &right, step, "MiB, each device of dp 2 \u00d7 tp 2 \u00d7 pp 2");
    const double rslot = right.w / WORLD_3D;
    for (int d = 0; d < WORLD_3D; d++) {
        double x = right.x + d * rslot + rslot * 0.18, w = rslot * 0.64;
        int dp, tp, pp;
        ptdp_mesh_coords(2, 2, 2, d, &dp, &tp, &pp);
        bar(s, &right, x, w, &each[d]);
        ptdp_svg_text(s, x + w / 2, right.y + right.h + 17, 11, PTDP_SVG_MIDDLE, NULL, "%d", d);
        if (tp == 0 && dp == 0)
            ptdp_svg_text(s, x + 2 * rslot, right.y + right.h + 33, 11, PTDP_SVG_MIDDLE, "#444444",
                          "stage %d", pp);
    }
    ptdp_svg_text(s, right.x + right.w / 2, right.y + right.h + 49, 10, PTDP_SVG_MIDDLE, "#777777",
                  "device (rank = tp + 2 dp + 4 pp)");
}

int fig_memory_per_device(const char *path, char *msg, size_t msglen)
{
    ptdp_mem_stats busiest[NCONFIGS], each[WORLD_3D];
    int busiest_rank[NCONFIGS];
    int err = measure_configs(busiest, busiest_rank, each, msg, msglen);
    if (err != 0)
        return err;

    ptdp_svg s;
    ptdp_svg_begin(&s, 1180, 608);
    ptdp_svg_text(&s, 20, 26, 17, PTDP_SVG_BOLD, NULL,
                  "Peak memory per device, default model (8 blocks, hidden 64), AdamW, batch 64");
    ptdp_svg_text(&s, 20, 46, 12, PTDP_SVG_START, "#333333",
                  "Measured by each device's arena during 2 training steps; bars stack each category's "
                  "own high-water mark.");
    /* The legend names the categories some device used. */
    for (int k = 0, at = 0; k < PTDP_MEM_NCAT; k++) {
        size_t used = 0;
        for (int i = 0; i < NCONFIGS; i++)
            used += busiest[i].peak[k];
        if (used > 0)
            legend_entry(&s, 20 + at++ * 110, 74, category_color[k],
                         ptdp_mem_category_name((ptdp_mem_category)k));
    }
    draw_busiest(&s, busiest, busiest_rank);
    draw_3d(&s, each);

    static const char *const notes[] = {
        "Numbers above the bars: the device's measured peak total.  dp 2 keeps a whole replica of parameters, gradients "
        "and optimizer state (only the",
        "activations halve: half the batch each); ZeRO-1 halves the optimizer state, ZeRO-2 the gradients too, but "
        "keeps a full-size bucket (comm)",
        "while a backward runs.  tp 2 and pp 2 halve all three.  GPipe keeps all 8 micro-batches' activations until "
        "the first backward, 1F1B at most",
        "p \u2212 s on stage s (stage 0 keeps more than stage 1).",
    };
    for (int i = 0; i < 4; i++)
        ptdp_svg_text(&s, 20, 530 + 17 * i, 12, PTDP_SVG_START, "#333333", "%s", notes[i]);
    return fig_finish(&s, path, msg, msglen);
}

/* ---- loss curves --------------------------------------------------------------------- */

enum { LOSS_STEPS = 30 };

static void curve(ptdp_svg *s, const chart *c, const ptdp_train_result *r, const char *color,
                  double width, const char *dash)
{
    double xs[LOSS_STEPS], ys[LOSS_STEPS];
    for (int i = 0; i < r->steps && i < LOSS_STEPS; i++) {
        xs[i] = c->x + (double)i / (LOSS_STEPS - 1) * c->w;
        ys[i] = y_of(c, r->log[i].loss);
    }
    ptdp_svg_polyline(s, xs, ys, r->steps < LOSS_STEPS ? r->steps : LOSS_STEPS, color, width, dash);
}

int fig_loss_curves(const char *path, char *msg, size_t msglen)
{
    ptdp_train_config base = ptdp_train_defaults(), par = ptdp_train_defaults();
    base.steps = par.steps = LOSS_STEPS;
    par.dp = par.tp = par.pp = 2;
    par.micro_batches = 4;
    run_result a, b;
    int err = train(&base, "the single-device baseline", &a, msg, msglen);
    if (err != 0)
        return err;
    if ((err = train(&par, "dp 2 x tp 2 x pp 2", &b, msg, msglen)) != 0) {
        run_free(&a);
        return err;
    }
    if (a.res.steps != LOSS_STEPS || b.res.steps != LOSS_STEPS) {
        snprintf(msg, msglen, "expected %d logged steps, got %d and %d", LOSS_STEPS, a.res.steps,
                 b.res.steps);
        run_free(&a);
        run_free(&b);
        return PTDP_ECHECK;
    }

    double lo = INFINITY, hi = -INFINITY, worst = 0;
    int worst_step = 1;
    bool same = true;
    for (int i = 0; i < LOSS_STEPS; i++) {
        double la = a.res.log[i].loss, lb = b.res.log[i].loss;
        same = same && ptdp_check_value(lb, la, PTDP_TOLERANCE);
        lo = fmin(lo, fmin(la, lb));
        hi = fmax(hi, fmax(la, lb));
        if (fabs(la - lb) > worst) {
            worst = fabs(la - lb);
            worst_step = (int)a.res.log[i].step;
        }
    }
    double step = ptdp_svg_tick_step(hi - lo, 6);
    chart c = { 80, 90, 800, 340, floor(lo / step) * step, ceil(hi / step) * step };

    ptdp_svg s;
    ptdp_svg_begin(&s, 980, 540);
    ptdp_svg_text(&s, 20, 26, 17, PTDP_SVG_BOLD, NULL,
                  "Training loss: one device against dp 2 \u00d7 tp 2 \u00d7 pp 2 = 8 devices (same seed)");
    ptdp_svg_text(&s, 20, 46, 12, PTDP_SVG_START, "#333333",
                  "Default model, AdamW lr %g, batch %d; the 3D run uses 1F1B with %d micro-batches "
                  "per replica.", base.lr, base.batch, par.micro_batches);
    y_axis(&s, &c, step, "loss (mean cross-entropy over the batch)");
    for (int i = 0; i < LOSS_STEPS; i++) {
        int st = (int)a.res.log[i].step;
        if (st != 1 && st % 5 != 0)
            continue;
        double x = c.x + (double)i / (LOSS_STEPS - 1) * c.w;
        ptdp_svg_line(&s, x, c.y + c.h, x, c.y + c.h + 5, "#333333", 1, NULL);
        ptdp_svg_text(&s, x, c.y + c.h + 18, 11, PTDP_SVG_MIDDLE, "#333333", "%d", st);
    }
    ptdp_svg_text(&s, c.x + c.w / 2, c.y + c.h + 38, 12, PTDP_SVG_MIDDLE, "#333333", "step");

    curve(&s, &c, &a.res, "#4e79a7", 4.5, NULL);
    curve(&s, &c, &b.res, "#e15759", 2, "7 5");

    const double lx = c.x + c.w - 300, ly = c.y + 14;
    ptdp_svg_rect(&s, lx - 10, ly - 6, 310, 52, "white", "#bbbbbb");
    ptdp_svg_line(&s, lx, ly + 8, lx + 34, ly + 8, "#4e79a7", 4.5, NULL);
    ptdp_svg_text(&s, lx + 42, ly + 12, 12, PTDP_SVG_START, NULL, "1 device (the baseline)");
    ptdp_svg_line(&s, lx, ly + 30, lx + 34, ly + 30, "#e15759", 2, "7 5");
    ptdp_svg_text(&s, lx + 42, ly + 34, 12, PTDP_SVG_START, NULL, "dp 2 \u00d7 tp 2 \u00d7 pp 2 (dashed)");

    ptdp_svg_text(&s, 20, c.y + c.h + 70, 12.5, PTDP_SVG_BOLD, same ? NULL : "#c00000",
                  "Largest difference over %d steps: %.2e (step %d, %s arithmetic) \u2014 %s the --check "
                  "tolerance %.0e.", LOSS_STEPS, worst, worst_step, PTDP_REAL_NAME,
                  same ? "within" : "BEYOND", PTDP_TOLERANCE);
    ptdp_svg_text(&s, 20, c.y + c.h + 90, 12, PTDP_SVG_START, "#333333",
                  "What remains is rounding: the 8 devices add the same numbers in another order "
                  "(sums split across tp, dp and micro-batches).");
    run_free(&a);
    run_free(&b);
    return fig_finish(&s, path, msg, msglen);
}
