/*
 * figure_plan.c — plan_layouts.svg: every layout of one model on one
 * cluster, its memory per GPU against its step time, from the planner.
 *
 * The model is lesson 12's: the 7.5B GPT of the PTD-P paper's table 1
 * (36 layers, hidden 4096, 32 heads, seq-len 2048, vocab 51200), a batch
 * of 512 sequences, on 32 GPUs of the dgx-a100-80g profile, in the
 * build's reals (float: 4 bytes, as the lesson's stage 0 by hand; the
 * lesson's check prices 8, as ptdp-f64's planner), never bf16.
 * ptdp_plan_search is asked with no memory limit, so it returns every
 * valid layout with its memory (plan_memory.c) and step (plan_time.c);
 * the GPU's memory is then drawn as a line, and the layouts left of it
 * are the ones `ptdp plan` would print, the best K ringed and named.
 *
 * (1F1B, no context or sequence parallelism: one family, readable.)
 *
 *   step s │ ·  ∘ ·       ·  │  ·          ∘ none  ∘ selective  ∘ full
 *          │  ∘· ∘  ·  ·     │    ·   ·    (filled: fits; hollow: does not)
 *          │ ①②③  ·    ·     │ ·     ·
 *          └─────────────────┴──────────  memory per GPU (GiB, log)
 *                         80 GiB
 *
 * Both axes are logarithmic: the layouts span orders of magnitude in
 * both.  What it shows: the fastest layouts sit just inside the line —
 * memory buys speed (less recomputation, bigger micro-batches, less
 * pipeline) until it runs out.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "figures.h"
#include "../model_flags.h"
#include "ptdp/error.h"
#include "ptdp/models.h"
#include "ptdp/plan.h"

enum { TOP = 5 };
static const double PI = 3.14159265358979323846;
static const double GiB = 1024.0 * 1024.0 * 1024.0;
static const char *const PROFILE = "dgx-a100-80g";
static const char *const RECOMPUTE_COLOR[PTDP_RECOMPUTE_COUNT] = { "#4e79a7", "#59a14f", "#e15759" };

/* the plot area and its two log ranges */
typedef struct {
    double x, y, w, h;
    double xlo, xhi, ylo, yhi;      /* log10 of the data */
} chart;

static double px(const chart *c, double v)
{
    return c->x + (log10(v) - c->xlo) / (c->xhi - c->xlo) * c->w;
}

static double py(const chart *c, double v)
{
    return c->y + c->h - (log10(v) - c->ylo) / (c->yhi - c->ylo) * c->h;
}

/* Decades and their 2 and 5 as grid lines, labelled with fmt. */
static void log_ticks(ptdp_svg *s, const chart *c, bool x_axis, double scale)
{
    const double lo = x_axis ? c->xlo : c->ylo, hi = x_axis ? c->xhi : c->yhi;
    for (int d = (int)floor(lo); d <= (int)ceil(hi); d++)
        for (int k = 0; k < 3; k++) {
            static const double mult[] = { 1, 2, 5 };
            double v = mult[k] * pow(10, d), lv = log10(v);
            if (lv < lo - 1e-9 || lv > hi + 1e-9)
                continue;
            char label[32];
            snprintf(label, sizeof label, "%g", v / scale);
            if (x_axis) {
                double X = px(c, v);
                ptdp_svg_line(s, X, c->y, X, c->y + c->h, "#e4e4e4", 1, NULL);
                ptdp_svg_text(s, X, c->y + c->h + 16, 11, PTDP_SVG_MIDDLE, "#333333", "%s", label);
            } else {
                double Y = py(c, v);
                ptdp_svg_line(s, c->x, Y, c->x + c->w, Y, "#e4e4e4", 1, NULL);
                ptdp_svg_text(s, c->x - 6, Y + 4, 11, PTDP_SVG_END, "#333333", "%s", label);
            }
        }
}

/* A point: a small circle drawn as an octagon (svg.h has no circle). */
static void dot(ptdp_svg *s, double x, double y, double r, const char *fill, const char *stroke)
{
    double xs[8], ys[8];
    for (int i = 0; i < 8; i++) {
        xs[i] = x + r * cos(i * PI / 4 + PI / 8);
        ys[i] = y + r * sin(i * PI / 4 + PI / 8);
    }
    if (fill != NULL)
        ptdp_svg_polygon(s, xs, ys, 8, fill);
    if (stroke != NULL) {
        double cx[9], cy[9];
        memcpy(cx, xs, sizeof xs);
        memcpy(cy, ys, sizeof ys);
        cx[8] = xs[0];
        cy[8] = ys[0];
        ptdp_svg_polyline(s, cx, cy, 9, stroke, 1, NULL);
    }
}

static void describe(const ptdp_plan_layout *l, char *buf, size_t len)
{
    snprintf(buf, len, "dp %d tp %d pp %d%s, b %d, %s%s, recompute %s, ZeRO-%d", l->dp, l->tp, l->pp,
             l->sp ? " sp" : "", l->micro_batch_size, l->schedule != NULL ? l->schedule->name : "",
             l->virtual_stages > 1 ? " v>1" : "", ptdp_recompute_name(l->recompute), l->zero);
}

/* The best K, ringed and named beside the chart from *ly down; a number
 * that would sit on an earlier one (two layouts a pixel apart) moves up a
 * line. */
static void draw_best(ptdp_svg *s, const chart *ch, const ptdp_plan_candidate *c, const int *best, int nbest,
                      double *ly)
{
    double nx[TOP], ny[TOP];
    ptdp_svg_text(s, ch->x + ch->w + 24, *ly, 13, PTDP_SVG_START | PTDP_SVG_BOLD, NULL, "the best %d that fit", nbest);
    for (int k = 0; k < nbest; k++) {
        const ptdp_plan_candidate *b = &c[best[k]];
        double x = px(ch, b->memory.total / GiB), y = py(ch, b->time.step_s);
        dot(s, x, y, 7, NULL, "#000000");
        nx[k] = x - 9;
        ny[k] = y - 7;
        for (int j = 0; j < k; j++)
            if (fabs(nx[j] - nx[k]) < 12 && fabs(ny[j] - ny[k]) < 11) {
                ny[k] = ny[j] - 12;
                j = -1;   /* and look again from the first */
            }
        ptdp_svg_text(s, nx[k], ny[k], 11, PTDP_SVG_END | PTDP_SVG_BOLD, NULL, "%d", k + 1);
        char d[128];
        describe(&b->layout, d, sizeof d);
        *ly += 40;
        ptdp_svg_text(s, ch->x + ch->w + 24, *ly, 12, PTDP_SVG_START | PTDP_SVG_BOLD, NULL, "%d. %s", k + 1, d);
        ptdp_svg_text(s, ch->x + ch->w + 36, *ly + 15, 11, PTDP_SVG_START, "#333333",
                      "%.1f GiB, step %.2f s, %.0f model TFLOP/s a GPU", b->memory.total / GiB, b->time.step_s,
                      b->time.model_tflops_per_gpu);
    }
}

/* Lesson 12's question: the 7.5B model on 32 GPUs of PROFILE, one family
 * of layouts (1F1B, no CP, no SP) in the build's reals.  0, or PTDP_EINVAL
 * with msg when the profile is missing. */
static int lesson12_request(ptdp_plan_request *rq, char *msg, size_t msglen)
{
    *rq = ptdp_plan_request_defaults();   /* the planner's model */
    rq->model.layers = 36;
    rq->model.hidden = 4096;
    rq->model.ffn = 4 * 4096;
    ptdp_model_cli_set(&rq->model, "--heads", 32);
    ptdp_model_cli_set(&rq->model, "--seq-len", 2048);
    ptdp_model_cli_set(&rq->model, "--vocab", 51200);
    rq->batch = 512;
    rq->gpus = 32;
    rq->bf16 = false;                     /* lesson 12's precision: reals, not bf16 */
    rq->cp = 1;                           /* one family of layouts, readable: 1F1B, no CP, no SP */
    rq->sp = 0;
    rq->schedule = &ptdp_schedule_row_1f1b;
    rq->profile = ptdp_profile_find(PROFILE);
    if (rq->profile == NULL || rq->profile->mem_bytes <= 0) {
        snprintf(msg, msglen, "the profile %s (with its device memory) is not in this build", PROFILE);
        return PTDP_EINVAL;
    }
    return 0;
}

/* The chart's log ranges over every layout and the GPU's memory; the
 * best TOP that fit (c is sorted by step time) and how many fit. */
static chart chart_of(const ptdp_plan_candidate *c, int n, double mem, int *best, int *nbest, int *nfit)
{
    double mlo = INFINITY, mhi = 0, slo = INFINITY, shi = 0;
    *nbest = *nfit = 0;
    for (int i = 0; i < n; i++) {
        mlo = fmin(mlo, c[i].memory.total / GiB);     /* the x axis in GiB */
        mhi = fmax(mhi, c[i].memory.total / GiB);
        slo = fmin(slo, c[i].time.step_s);
        shi = fmax(shi, c[i].time.step_s);
        if (c[i].memory.total <= mem) {
            (*nfit)++;
            if (*nbest < TOP)
                best[(*nbest)++] = i;
        }
    }
    mhi = fmax(mhi, mem / GiB);
    mlo = fmin(mlo, mem / GiB);
    chart ch = { .x = 80, .y = 70, .w = 560, .h = 480 };
    ch.xlo = floor(log10(mlo) * 5) / 5;
    ch.xhi = ceil(log10(mhi) * 5) / 5;
    ch.ylo = floor(log10(slo) * 5) / 5;
    ch.yhi = ceil(log10(shi) * 5) / 5;
    return ch;
}

/* Every layout (the ones that do not fit hollow), the best ringed and
 * named beside the chart, the legend. */
static void draw_layouts(ptdp_svg *s, const chart *ch, const ptdp_plan_candidate *c, int n, double mem,
                         const int *best, int nbest)
{
    for (int pass = 0; pass < 2; pass++)
        for (int i = n - 1; i >= 0; i--) {
            bool fits = c[i].memory.total <= mem;
            if (fits != (pass == 1))
                continue;
            const char *col = RECOMPUTE_COLOR[c[i].layout.recompute];
            dot(s, px(ch, c[i].memory.total / GiB), py(ch, c[i].time.step_s), 3, fits ? col : NULL, fits ? NULL : col);
        }
    double ly = ch->y + 10;
    draw_best(s, ch, c, best, nbest, &ly);
    ly += 50;
    for (int r = 0; r < PTDP_RECOMPUTE_COUNT; r++, ly += 20) {
        dot(s, ch->x + ch->w + 30, ly - 4, 4, RECOMPUTE_COLOR[r], RECOMPUTE_COLOR[r]);
        ptdp_svg_text(s, ch->x + ch->w + 42, ly, 12, PTDP_SVG_START, NULL, "recompute %s", ptdp_recompute_name(r));
    }
    dot(s, ch->x + ch->w + 30, ly - 4, 4, NULL, "#333333");
    ptdp_svg_text(s, ch->x + ch->w + 42, ly, 12, PTDP_SVG_START, NULL, "hollow: does not fit");
}

int fig_plan_layouts(const char *path, char *msg, size_t msglen)
{
    ptdp_plan_request rq;
    int err = lesson12_request(&rq, msg, msglen);
    if (err != 0)
        return err;
    const double mem = rq.profile->mem_bytes;

    /* every valid layout: no memory limit */
    ptdp_plan_candidate *c = NULL;
    int n = 0;
    if ((err = ptdp_plan_search(&rq, 1e30, &c, &n, msg, msglen)) != 0)
        return err;
    if (n == 0) {
        free(c);
        snprintf(msg, msglen, "the planner found no layout");
        return PTDP_EINVAL;
    }
    int best[TOP], nbest, nfit;
    const chart ch = chart_of(c, n, mem, best, &nbest, &nfit);

    ptdp_svg s;
    if (ptdp_svg_begin(&s, 1080, 660) != 0) {
        free(c);
        snprintf(msg, msglen, "out of memory");
        return PTDP_ENOMEM;
    }
    const char *title = ptdp_model_of(&rq.model)->caps.title;   /* "the GPT" */
    title = title == NULL ? ptdp_model_name(&rq.model) : title + (strncmp(title, "the ", 4) == 0 ? 4 : 0);
    ptdp_svg_text(&s, 20, 26, 16, PTDP_SVG_START | PTDP_SVG_BOLD, NULL,
                  "ptdp plan: every layout of a 7.5B %s on %d GPUs (%s, %s)", title, rq.gpus, PROFILE,
                  PTDP_REAL_NAME);
    ptdp_svg_text(&s, 20, 46, 12, PTDP_SVG_START, "#333333",
                  "L 36, h 4096, 32 heads, s 2048, V 51200, B 512; 1F1B, cp 1, no SP: %d valid layouts, %d fit in "
                  "%.0f GiB. Memory per GPU by plan_memory.c, step time by plan_time.c.", n, nfit, mem / GiB);
    log_ticks(&s, &ch, true, 1);
    log_ticks(&s, &ch, false, 1);
    ptdp_svg_line(&s, ch.x, ch.y + ch.h, ch.x + ch.w, ch.y + ch.h, "#333333", 1, NULL);
    ptdp_svg_line(&s, ch.x, ch.y, ch.x, ch.y + ch.h, "#333333", 1, NULL);
    ptdp_svg_text(&s, ch.x + ch.w / 2, ch.y + ch.h + 36, 12, PTDP_SVG_MIDDLE, NULL,
                  "memory per GPU, GiB (the peak stage; log)");
    ptdp_svg_text(&s, ch.x, ch.y - 10, 12, PTDP_SVG_START, NULL, "step time, s (log)");

    /* the GPU's memory */
    double X = px(&ch, mem / GiB);
    ptdp_svg_line(&s, X, ch.y, X, ch.y + ch.h, "#333333", 2, "6 4");
    ptdp_svg_text(&s, X + 4, ch.y + 12, 11, PTDP_SVG_START, "#333333", "%.0f GiB: one GPU", mem / GiB);
    draw_layouts(&s, &ch, c, n, mem, best, nbest);
    ptdp_svg_text(&s, 20, 628, 11, PTDP_SVG_START, "#555555",
                  "The same ranking: ptdp plan --model %s --layers 36 --hidden 4096 --heads 32 --seq-len 2048 "
                  "--vocab 51200 --batch 512 --gpus 32", ptdp_model_name(&rq.model));
    ptdp_svg_text(&s, 20, 644, 11, PTDP_SVG_START, "#555555", "    --profile %s --schedule %s --cp 1 --sp off --top 5",
                  PROFILE, rq.schedule->name);
    free(c);
    return fig_finish(&s, path, msg, msglen);
}
