/*
 * html_plan.c — `ptdp plan --html FILE`: the layouts ranked, as a page.
 *
 * What the page shows, every number from `ptdp plan --json`'s text, which
 * it embeds (html_pages.h):
 *
 *     the table     the rows `ptdp plan` prints, best first: dp tp pp cp ep, b, M,
 *                   schedule, v, recompute, zero, sp, memory/GPU, step, tokens/s, TFLOP/s
 *     memory bars   each layout's peak per GPU cut by category, the bytes the
 *                   implementation allocates (plan_memory.c):
 *                     #1 [params|grads|optim|  acts  |c|o]      total
 *     time bars     the step, its pipeline bubble (bubble x step) hatched off, and
 *                   one micro-batch on the slowest stage: forward, backward, and the
 *                   communication inside them (TP, CP, EP) and one PP message
 *
 * The bars of all layouts share one scale, so a glance compares them; the
 * mouse resting on a segment names it and its value.
 */
#include <stdio.h>
#include <string.h>

#include "html_pages.h"
#include "ptdp/error.h"
#include "ptdp/fp8_quant.h"
#include "ptdp/html.h"
#include "ptdp/svg.h"

#define GIB 1073741824.0

static void cell_number(ptdp_html *h, int i, const char *name, double x, int digits)
{
    char key[160];
    snprintf(key, sizeof key, "candidates.%d.%s", i, name);
    ptdp_html_raw(h, "<td>");
    ptdp_html_number(h, key, x, digits);
    ptdp_html_raw(h, "</td>");
}

static void cell_string(ptdp_html *h, int i, const char *name, const char *text)
{
    char key[160];
    snprintf(key, sizeof key, "candidates.%d.%s", i, name);
    ptdp_html_raw(h, "<td class=\"l\">");
    ptdp_html_string(h, key, text);
    ptdp_html_raw(h, "</td>");
}

static void table(ptdp_html *h, const ptdp_plan_candidate *c, int n)
{
    ptdp_html_raw(h, "<h2>The layouts, best first</h2>\n<table>\n<tr><th>#</th><th>dp</th><th>ep</th><th>tp</th>"
                     "<th>pp</th><th>cp</th><th>b</th><th>M</th><th class=\"l\">schedule</th><th>v</th>"
                     "<th class=\"l\">recompute</th><th>zero</th><th>sp</th><th>memory/GPU GiB</th>"
                     "<th>fits</th><th>step s</th><th>tokens/s</th><th>TFLOP/s/GPU model</th><th>hw</th></tr>\n");
    for (int i = 0; i < n; i++) {
        const ptdp_plan_layout *l = &c[i].layout;
        char key[96];
        ptdp_html_raw(h, "<tr>");
        char rank[32];
        snprintf(rank, sizeof rank, "<th>%d</th>", i + 1);
        ptdp_html_raw(h, rank);
        cell_number(h, i, "dp", l->dp, 0);
        cell_number(h, i, "ep", l->ep > 1 ? l->ep : 1, 0);
        cell_number(h, i, "tp", l->tp, 0);
        cell_number(h, i, "pp", l->pp, 0);
        cell_number(h, i, "cp", l->cp, 0);
        cell_number(h, i, "micro_batch_size", l->micro_batch_size, 0);
        cell_number(h, i, "micro_batches", l->micro_batches, 0);
        cell_string(h, i, "schedule", (l->schedule != NULL ? l->schedule : ptdp_schedule_default())->name);
        cell_number(h, i, "virtual_stages", l->virtual_stages, 0);
        cell_string(h, i, "recompute", ptdp_recompute_name(l->recompute));
        cell_number(h, i, "zero", l->zero, 0);
        cell_string(h, i, "sp", l->sp ? "true" : "false");
        snprintf(key, sizeof key, "candidates.%d.memory_per_gpu_bytes", i);
        ptdp_html_raw(h, "<td>");
        ptdp_html_scaled(h, key, c[i].memory.total, GIB, 4);
        ptdp_html_raw(h, "</td>");
        cell_string(h, i, "fits", c[i].fits ? "true" : "false");
        cell_number(h, i, "step_s", c[i].time.step_s, 4);
        cell_number(h, i, "tokens_per_s", c[i].time.tokens_per_s, 4);
        cell_number(h, i, "model_tflops_per_gpu", c[i].time.model_tflops_per_gpu, 4);
        cell_number(h, i, "hardware_tflops_per_gpu", c[i].time.hardware_tflops_per_gpu, 4);
        ptdp_html_raw(h, "</tr>\n");
    }
    ptdp_html_raw(h, "</table>\n");
}

/* One stacked bar: segments of `values` (n of them) from x0, `per` units
 * per second or byte, each with its colour and a hover title. */
typedef struct {
    const char *name, *colour;
    double value;
} segment;

static void bar(ptdp_svg *svg, double x0, double y, double height, double per, const segment *seg, int n,
                const char *unit, double unit_scale)
{
    double x = x0;
    for (int k = 0; k < n; k++) {
        const double w = seg[k].value * per;
        if (!(w > 0))
            continue;
        ptdp_svg_group_begin(svg, NULL, 0, 0);
        ptdp_svg_title(svg, "%s %.4g %s", seg[k].name, seg[k].value / unit_scale, unit);
        ptdp_svg_rect(svg, x, y, w, height, seg[k].colour, "white");
        ptdp_svg_group_end(svg);
        x += w;
    }
}

static void legend(ptdp_svg *svg, double x, double y, const segment *seg, int n)
{
    for (int k = 0; k < n; k++) {
        ptdp_svg_rect(svg, x, y - 10, 12, 12, seg[k].colour, NULL);
        ptdp_svg_text(svg, x + 16, y, 11, PTDP_SVG_START, NULL, "%s", seg[k].name);
        x += 24 + 7.0 * (double)strlen(seg[k].name);
    }
}

/* Memory per GPU by category, every layout on one scale. */
static int memory_bars(ptdp_html *h, const ptdp_plan_candidate *c, int n)
{
    double most = 0;
    for (int i = 0; i < n; i++)
        most = c[i].memory.params + c[i].memory.grads + c[i].memory.optim + c[i].memory.acts + c[i].memory.comm +
               c[i].memory.other > most ? c[i].memory.params + c[i].memory.grads + c[i].memory.optim +
               c[i].memory.acts + c[i].memory.comm + c[i].memory.other : most;
    const double width = 640, per = most > 0 ? width / most : 0, row = 22;
    ptdp_svg svg;
    ptdp_svg_begin(&svg, width + 120, 40 + n * row);
    for (int i = 0; i < n; i++) {
        const ptdp_plan_memory *m = &c[i].memory;
        const segment seg[] = { { "params", "#3b73c4", m->params }, { "grads", "#3f9e4d", m->grads },
                                { "optim", "#d9822b", m->optim }, { "acts", "#8e5ea2", m->acts },
                                { "comm", "#c44e52", m->comm }, { "other", "#999999", m->other } };
        const double y = 30 + i * row;
        ptdp_svg_text(&svg, 40, y + 13, 12, PTDP_SVG_END, NULL, "#%d", i + 1);
        bar(&svg, 50, y, 16, per, seg, 6, "GiB", GIB);
        if (i == 0)
            legend(&svg, 50, 16, seg, 6);
    }
    int rc = ptdp_svg_end(&svg);
    ptdp_html_raw(h, "<h2>Memory per GPU</h2>\n<p class=\"note\">Each layout's peak by category (the bytes "
                     "the implementation allocates, the peak's parts); rest the mouse on a part for its size. "
                     "The table's memory/GPU is the peak.</p>\n");
    ptdp_html_svg(h, &svg);
    ptdp_svg_free(&svg);
    return rc;
}

/* The step with its bubble, and one micro-batch's phases on the slowest stage. */
static int time_bars(ptdp_html *h, const ptdp_plan_candidate *c, int n)
{
    double most = 0, most_mb = 0;
    for (int i = 0; i < n; i++) {
        const ptdp_plan_time *t = &c[i].time;
        most = t->step_s > most ? t->step_s : most;
        const double mb = t->forward_s + t->backward_s;
        most_mb = mb > most_mb ? mb : most_mb;
    }
    const double width = 420, row = 22, x1 = 60 + width + 40;
    const double per = most > 0 ? width / most : 0, per_mb = most_mb > 0 ? width / most_mb : 0;
    ptdp_svg svg;
    ptdp_svg_begin(&svg, x1 + width + 40, 56 + n * row);
    ptdp_svg_text(&svg, 60, 14, 12, PTDP_SVG_BOLD, NULL, "the step");
    ptdp_svg_text(&svg, x1, 14, 12, PTDP_SVG_BOLD, NULL, "one micro-batch on the slowest stage");
    for (int i = 0; i < n; i++) {
        const ptdp_plan_time *t = &c[i].time;
        const double y = 46 + i * row;
        const segment step[] = { { "working", "#3b73c4", t->step_s * (1 - t->bubble) },
                                 { "bubble", "#e3e3e3", t->step_s * t->bubble } };
        const segment mb[] = { { "forward", "#3b73c4", t->forward_s }, { "backward", "#3f9e4d", t->backward_s } };
        const segment comm[] = { { "TP comm", "#d9822b", t->tp_comm_s }, { "CP comm", "#8e5ea2", t->cp_comm_s },
                                 { "EP comm", "#c44e52", t->ep_comm_s }, { "PP message", "#999999", t->pp_comm_s } };
        ptdp_svg_text(&svg, 50, y + 13, 12, PTDP_SVG_END, NULL, "#%d", i + 1);
        bar(&svg, 60, y, 16, per, step, 2, "s", 1);
        bar(&svg, x1, y, 9, per_mb, mb, 2, "s", 1);
        bar(&svg, x1, y + 9, 7, per_mb, comm, 4, "s", 1);
        if (i == 0) {
            legend(&svg, 60, 32, step, 2);
            legend(&svg, x1, 32, mb, 2);
            legend(&svg, x1 + 160, 32, comm, 4);
        }
    }
    int rc = ptdp_svg_end(&svg);
    ptdp_html_raw(h, "<h2>Time</h2>\n<p class=\"note\">Left: the step, its pipeline bubble (the idle fraction "
                     "times the step) in grey. Right: one micro-batch's forward and backward on the slowest "
                     "stage, and below them the communication they wait for (TP, CP, EP) and one PP message. "
                     "The key terms of each layout:</p>\n");
    ptdp_html_svg(h, &svg);
    ptdp_svg_free(&svg);
    return rc;
}

/* The terms of the time bars, by key, under them; under --fp8 delayed
 * its amax table's all-reduce a step too (--json's fp8.amax_table_s). */
static void time_table(ptdp_html *h, const ptdp_plan_request *rq, const ptdp_plan_candidate *c, int n)
{
    const bool amaxes = rq->fp8 != NULL && rq->fp8->uses_history;
    ptdp_html_raw(h, "<table>\n<tr><th>#</th><th>step s</th><th>bubble</th><th>forward s</th><th>backward s</th>"
                     "<th>TP comm s</th><th>CP comm s</th><th>EP comm s</th><th>PP message s</th>"
                     "<th>DP comm s</th><th>DP exposed s</th><th>optimizer s</th>");
    ptdp_html_raw(h, amaxes ? "<th>FP8 amaxes s</th></tr>\n" : "</tr>\n");
    static const char *const names[] = { "forward_s", "backward_s", "tp_comm_s", "cp_comm_s", "ep_comm_s",
                                         "pp_comm_s", "dp_comm_s", "dp_exposed_s", "optimizer_s" };
    for (int i = 0; i < n; i++) {
        const ptdp_plan_time *t = &c[i].time;
        const double v[] = { t->forward_s, t->backward_s, t->tp_comm_s, t->cp_comm_s, t->ep_comm_s, t->pp_comm_s,
                             t->dp_comm_s, t->dp_exposed_s, t->optimizer_s };
        char rank[32], key[64];
        snprintf(rank, sizeof rank, "<tr><th>%d</th>", i + 1);
        ptdp_html_raw(h, rank);
        cell_number(h, i, "step_s", t->step_s, 4);
        snprintf(key, sizeof key, "candidates.%d.time.bubble", i);
        ptdp_html_raw(h, "<td>");
        ptdp_html_number(h, key, t->bubble, 4);
        ptdp_html_raw(h, "</td>");
        for (int k = 0; k < 9; k++) {
            snprintf(key, sizeof key, "time.%s", names[k]);
            cell_number(h, i, key, v[k], 4);
        }
        if (amaxes)
            cell_number(h, i, "fp8.amax_table_s", t->fp8_amax_s, 4);
        ptdp_html_raw(h, "</tr>\n");
    }
    ptdp_html_raw(h, "</table>\n");
}

int ptdp_html_plan(const char *path, const plan_options *o, const ptdp_plan_candidate *c, int n,
                   const char *json, size_t len, char *msg, size_t msglen)
{
    ptdp_html h;
    ptdp_html_begin(&h, "ptdp plan: the fastest layouts that fit");
    table(&h, c, n);
    int rc = memory_bars(&h, c, n);
    if (rc == PTDP_OK)
        rc = time_bars(&h, c, n);
    time_table(&h, &o->rq, c, n);
    ptdp_html_data(&h, json, len);
    return ptdp_html_finish(&h, rc, path, msg, msglen);
}
