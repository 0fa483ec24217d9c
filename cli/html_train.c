/*
 * html_train.c — `ptdp train --html FILE`: a run as a page.
 *
 * What the page shows, top to bottom (html_pages.h):
 *
 *     the run         the mesh, the schedule, the loss first and last, the virtual
 *                     time, the bubble — by key from the --report JSON it embeds
 *     --check         the verdict line, when --check ran
 *     the loss        a curve, one point a step, from the --log lines it embeds
 *                     (id "ptdp-log", the very lines --log writes)
 *     the timeline    each device on the virtual clock, from its trace (the events
 *                     --trace writes): compute, each collective and send/recv in its
 *                     colour, the mouse on a bar names it with its bytes
 *
 *                       device 0  ▇▇▇▇▒▒░░▇▇▇▇▇▇▒▒▒      ▇ compute  ▒ all_reduce
 *                       device 1  ▇▇▇▇▇▇▒▒▇▇▇▇  ░░       ░ send/recv   (blank: idle)
 *
 *     memory          each device's peak per category      devices[r].memory_peak_bytes
 *     bytes           each device's bytes a step per group  devices[r].bytes_sent_per_step
 *                     and, from the trace, per collective kind
 *     time            compute / communication / idle        devices[r].virtual_s
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "html_pages.h"
#include "ptdp/error.h"
#include "ptdp/html.h"
#include "ptdp/mesh.h"
#include "ptdp/models.h"
#include "ptdp/svg.h"
#include "ptdp/trace.h"

#define MIB 1048576.0

static const char *const palette[] = { "#d9822b", "#8e5ea2", "#c44e52", "#3f9e4d", "#17becf", "#bcbd22",
                                       "#7f7f7f", "#e377c2", "#8c564b", "#1f3f7f" };
#define NPALETTE 10
#define MAXKINDS 16

/* ---- the run ------------------------------------------------------------------ */

static void the_run(ptdp_html *h, const ptdp_train_page *p)
{
    const ptdp_train_config *c = p->c;
    const ptdp_train_result *res = p->res;
    double virtual_s = 0, first = NAN, last = NAN;   /* as the report sums them */
    for (int i = 0; i < res->steps; i++)
        virtual_s += res->log[i].virtual_s;
    if (res->steps > 0) {
        first = res->log[0].loss;
        last = res->log[res->steps - 1].loss;
    }
    ptdp_html_raw(h, "<h2>The run</h2>\n<table>\n");
    ptdp_html_row_string(h, "model", "config.model.name", ptdp_model_name(&c->model));
    ptdp_html_row_string(h, "precision", "precision", PTDP_REAL_NAME);
    ptdp_html_row_number(h, "devices", "config.world", p->lr->world_size, 0);
    ptdp_html_row_number(h, "dp", "config.dp", c->dp, 0);
    ptdp_html_row_number(h, "tp", "config.tp", c->tp, 0);
    ptdp_html_row_number(h, "pp", "config.pp", c->pp, 0);
    ptdp_html_row_number(h, "cp", "config.cp", ptdp_train_cp(c), 0);
    ptdp_html_row_number(h, "ep", "config.ep", c->ep > 1 ? c->ep : 1, 0);
    ptdp_html_row_number(h, "ZeRO stage", "config.zero", c->zero, 0);
    ptdp_html_row_number(h, "batch", "config.batch", c->batch, 0);
    ptdp_html_row_number(h, "micro-batches", "config.micro_batches", c->micro_batches, 0);
    ptdp_html_row_string(h, "schedule", "config.schedule", ptdp_train_schedule(c)->name);
    ptdp_html_row_number(h, "steps", "config.steps", c->steps, 0);
    ptdp_html_row_number(h, "loss, first step", "run.first_loss", first, 6);
    ptdp_html_row_number(h, "loss, last step", "run.last_loss", last, 6);
    ptdp_html_row_number(h, "virtual time of the steps, s", "run.virtual_s", virtual_s, 4);
    if (c->pp > 1) {
        ptdp_html_row_number(h, "bubble measured", "run.bubble_measured", res->bubble_measured, 4);
        ptdp_html_row_number(h, "bubble by the formula", "run.bubble_formula", res->bubble_formula, 4);
    }
    ptdp_html_raw(h, "</table>\n");
    if (p->check != NULL) {
        ptdp_html_raw(h, "<p><b>");
        ptdp_html_text(h, "%s", p->check);
        ptdp_html_raw(h, "</b> (<code>--check</code>: the same run on one device)</p>\n");
    }
}

/* ---- the loss ----------------------------------------------------------------- */

static int loss_curve(ptdp_html *h, const ptdp_train_result *res)
{
    const int n = res->completed;
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++)
        if (isfinite(res->log[i].loss)) {
            lo = fmin(lo, res->log[i].loss);
            hi = fmax(hi, res->log[i].loss);
        }
    if (n == 0 || !(hi >= lo))
        return PTDP_OK;
    const double left = 70, top = 20, w = 600, ht = 180, span = hi > lo ? hi - lo : 1;
    ptdp_svg svg;
    ptdp_svg_begin(&svg, left + w + 30, top + ht + 40);
    ptdp_svg_line(&svg, left, top + ht, left + w, top + ht, "#333333", 1, NULL);
    ptdp_svg_line(&svg, left, top, left, top + ht, "#333333", 1, NULL);
    ptdp_svg_text(&svg, left - 6, top + 4, 10, PTDP_SVG_END, "#333333", "%.6g", hi);
    ptdp_svg_text(&svg, left - 6, top + ht, 10, PTDP_SVG_END, "#333333", "%.6g", lo);
    ptdp_svg_text(&svg, left, top + ht + 16, 10, PTDP_SVG_MIDDLE, "#333333", "%ld", res->log[0].step);
    ptdp_svg_text(&svg, left + w, top + ht + 16, 10, PTDP_SVG_MIDDLE, "#333333", "%ld", res->log[n - 1].step);
    ptdp_svg_text(&svg, left + w / 2, top + ht + 32, 11, PTDP_SVG_MIDDLE, NULL, "step");
    for (int i = 0; i < n; i++) {
        const double l = res->log[i].loss;
        if (!isfinite(l))
            continue;
        const double x = left + (n > 1 ? w * i / (n - 1) : w / 2), y = top + ht - ht * (l - lo) / span;
        if (i + 1 < n && isfinite(res->log[i + 1].loss)) {
            const double x2 = left + w * (i + 1) / (n - 1), y2 = top + ht - ht * (res->log[i + 1].loss - lo) / span;
            ptdp_svg_line(&svg, x, y, x2, y2, "#3b73c4", 1.5, NULL);
        }
        ptdp_svg_group_begin(&svg, NULL, 0, 0);
        ptdp_svg_title(&svg, "step %ld: loss %.17g", res->log[i].step, l);
        const double xs[4] = { x - 3, x, x + 3, x }, ys[4] = { y, y - 3, y, y + 3 };
        ptdp_svg_polygon(&svg, xs, ys, 4, "#3b73c4");
        ptdp_svg_group_end(&svg);
    }
    int rc = ptdp_svg_end(&svg);
    ptdp_html_raw(h, "<h2>The loss</h2>\n<p class=\"note\">One point a step (the mean over the global batch), "
                     "from the <code>--log</code> lines this page holds (id <code>ptdp-log</code>); rest the "
                     "mouse on a point for its value.</p>\n");
    ptdp_html_svg(h, &svg);
    ptdp_svg_free(&svg);
    return rc;
}

/* ---- the timeline --------------------------------------------------------------- */

/* Kinds of event by name, in order of first appearance: compute, then each
 * collective or send/recv; their bytes summed per device. */
typedef struct {
    char name[48];
    const char *colour;
} kind;

static int kind_of(kind *k, int *n, const ptdp_trace_event *e)
{
    const char *name = strcmp(e->cat, "compute") == 0 ? "compute"
                     : strcmp(e->cat, "send") == 0 ? "send" : strcmp(e->cat, "recv") == 0 ? "recv" : e->name;
    for (int i = 0; i < *n; i++)
        if (strcmp(k[i].name, name) == 0)
            return i;
    if (*n == MAXKINDS)
        return MAXKINDS - 1;   /* the last kind takes the rest */
    snprintf(k[*n].name, sizeof k[*n].name, "%s", name);
    k[*n].colour = strcmp(name, "compute") == 0 ? "#3b73c4" : strcmp(e->cat, "idle") == 0 ? "#e3e3e3"
                 : palette[*n % NPALETTE];
    return (*n)++;
}

typedef struct {
    kind k[MAXKINDS];
    int nk;
    double end;
    long shown, hidden;
} timeline_stats;

static void lane(ptdp_svg *svg, const ptdp_trace *t, int r, double x0, double y, double per, timeline_stats *ts)
{
    const ptdp_trace_event *e = ptdp_trace_events(t);
    for (size_t i = 0; i < ptdp_trace_count(t); i++) {
        const int k = kind_of(ts->k, &ts->nk, &e[i]);
        const double w = (e[i].v1 - e[i].v0) * per;
        if (!(w >= 0.25)) {      /* narrower than a quarter of a unit: not seen */
            ts->hidden++;
            continue;
        }
        ts->shown++;
        const double ly = y + (e[i].track ? 16 : 0), lh = e[i].track ? 6 : 14;
        ptdp_svg_group_begin(svg, NULL, 0, 0);
        ptdp_svg_title(svg, "device %d: %s (%s) %.6g to %.6g s%s%.0f bytes", r, e[i].name, e[i].cat, e[i].v0, e[i].v1,
                       e[i].bytes > 0 ? ", " : "", e[i].bytes);
        ptdp_svg_rect(svg, x0 + e[i].v0 * per, ly, w, lh, ts->k[k].colour, NULL);
        ptdp_svg_group_end(svg);
    }
}

static int timeline(ptdp_html *h, const ptdp_launch_result *lr, timeline_stats *ts)
{
    memset(ts, 0, sizeof *ts);
    if (lr->traces == NULL)
        return PTDP_OK;
    const int n = lr->world_size;
    for (int r = 0; r < n; r++) {
        const ptdp_trace_event *e = ptdp_trace_events(lr->traces[r]);
        for (size_t i = 0; i < ptdp_trace_count(lr->traces[r]); i++)
            ts->end = fmax(ts->end, e[i].v1);
    }
    const double left = 80, w = 1100, row = 28, per = ts->end > 0 ? w / ts->end : 0;
    ptdp_svg svg;
    ptdp_svg_begin(&svg, left + w + 20, 30 + n * row + 60);
    for (int r = 0; r < n; r++) {
        const double y = 20 + r * row;
        ptdp_svg_text(&svg, left - 8, y + 12, 11, PTDP_SVG_END, NULL, "device %d", r);
        ptdp_svg_rect(&svg, left, y, w, 14, "#f4f4f4", NULL);
        lane(&svg, lr->traces[r], r, left, y, per, ts);
    }
    const double ay = 20 + n * row + 4;
    ptdp_svg_line(&svg, left, ay, left + w, ay, "#333333", 1, NULL);
    ptdp_svg_text(&svg, left, ay + 14, 10, PTDP_SVG_MIDDLE, "#333333", "0");
    ptdp_svg_text(&svg, left + w, ay + 14, 10, PTDP_SVG_MIDDLE, "#333333", "%.4g s", ts->end);
    double x = left;
    for (int k = 0; k < ts->nk; k++) {   /* the legend */
        ptdp_svg_rect(&svg, x, ay + 26, 12, 12, ts->k[k].colour, NULL);
        ptdp_svg_text(&svg, x + 16, ay + 36, 11, PTDP_SVG_START, NULL, "%s", ts->k[k].name);
        x += 30 + 7.0 * (double)strlen(ts->k[k].name);
    }
    int rc = ptdp_svg_end(&svg);
    ptdp_html_raw(h, "<h2>The timeline</h2>\n<p class=\"note\">Each device on the virtual clock, the whole run "
                     "(set-up included), from the events <code>--trace</code> writes: compute and each "
                     "communication in its colour, the blank between them idle; a thin bar under a lane is the "
                     "device's communication stream (non-blocking collectives). Rest the mouse on a bar for its "
                     "name, times and bytes.");
    if (ts->hidden > 0) {
        char note[160];
        snprintf(note, sizeof note, " Of the %ld events, %ld too short to see at this scale are left out.",
                 ts->shown + ts->hidden, ts->hidden);
        ptdp_html_text(h, "%s", note);
    }
    ptdp_html_raw(h, "</p>\n");
    ptdp_html_svg(h, &svg);
    ptdp_svg_free(&svg);
    return rc;
}

/* ---- bytes by kind and link level ------------------------------------------- */

/* Where a rank sits: node r / gpus_per_node, as the clock places it. */
static int node_of(const ptdp_profile *prof, int r)
{
    return prof->gpus_per_node > 0 ? r / prof->gpus_per_node : 0;
}

/* Device r's group `g` as world ranks in group-rank order (ranks grow with
 * every coordinate, so ascending world ranks): the four axes of the grid
 * and the world; hpZ's node groups (--zero-hpz: the DP ranks d with the
 * same d / k, mesh.c) and HSDP's shard groups (the same d / N) and replica
 * groups (the same d mod N, --shard-group N).  0 for the groups a model or
 * a parallelism adds (emb, ep, edp), which the grid alone does not place. */
static int group_members(const ptdp_train_config *c, int world, int r, const char *g, int *out)
{
    static const char *const axes[] = { "dp", "cp", "tp", "pp", "world", "hpz", "shard", "replica" };
    int axis = -1;
    for (int a = 0; a < 8; a++)
        if (strcmp(g, axes[a]) == 0)
            axis = a;
    const bool hsdp = c->shard_group > 0 && c->shard_group < c->dp;
    if (axis < 0 || (axis == 5 && c->zero_hpz <= 0) || (axis >= 6 && !hsdp))
        return 0;
    const int k = axis == 5 ? c->zero_hpz : axis == 6 ? c->shard_group : 0;
    int me[4], x[4], n = 0;
    ptdp_mesh_coords_cp(c->dp, ptdp_train_cp(c), c->tp, c->pp, r, &me[0], &me[1], &me[2], &me[3]);
    for (int q = 0; q < world; q++) {
        ptdp_mesh_coords_cp(c->dp, ptdp_train_cp(c), c->tp, c->pp, q, &x[0], &x[1], &x[2], &x[3]);
        bool same = true;
        for (int a = 0; a < 4; a++)
            same = same && (axis == 4 || a == axis || x[a] == me[a]);
        if (k > 0)   /* hpZ's node group, HSDP's shard group: a DP group's ranks with my d / k */
            same = x[1] == me[1] && x[2] == me[2] && x[3] == me[3] && x[0] / k == me[0] / k;
        if (axis == 7)   /* HSDP's replica group: the DP ranks with my d mod N */
            same = x[1] == me[1] && x[2] == me[2] && x[3] == me[3] &&
                   x[0] % c->shard_group == me[0] % c->shard_group;
        if (same)
            out[n++] = q;
    }
    return n;
}

/* An event's kind ("all_reduce tp", "send pp") and link level: "within a
 * node", "across nodes" (a member of its group, or a send's peer, on
 * another node), or "not placed" (emb, ep, edp). */
static const char *link_of(const ptdp_train_page *p, int r, const ptdp_trace_event *e, char *kind, size_t len)
{
    const char *group = strrchr(e->name, ' ');
    group = group != NULL ? group + 1 : e->name;
    const bool p2p = strcmp(e->cat, "send") == 0;
    if (p2p)
        snprintf(kind, len, "send %s", group);
    else
        snprintf(kind, len, "%s", e->name);
    int members[64];
    const int n = group_members(p->c, p->lr->world_size, r, group, members);
    if (n == 0)
        return "not placed";
    bool away = false;
    if (p2p) {
        const char *arrow = strstr(e->name, "\xe2\x86\x92");   /* "send→dst": dst a rank of the group */
        const int dst = arrow != NULL ? atoi(arrow + 3) : -1;
        away = dst >= 0 && dst < n && node_of(p->profile, members[dst]) != node_of(p->profile, r);
    } else {
        for (int i = 0; i < n; i++)
            away = away || node_of(p->profile, members[i]) != node_of(p->profile, r);
    }
    return away ? "across nodes" : "within a node";
}

/* Every device's bytes over the run by kind and link level, from its trace:
 * a row each, a column a device. */
static void bytes_by_link(ptdp_html *h, const ptdp_train_page *p, int devices)
{
    enum { ROWS = 32 };
    static struct { char kind[64]; const char *level; double bytes[64]; } row[ROWS];
    int rows = 0;
    for (int r = 0; r < devices; r++) {
        const ptdp_trace_event *e = ptdp_trace_events(p->lr->traces[r]);
        for (size_t i = 0; i < ptdp_trace_count(p->lr->traces[r]); i++) {
            if (!(e[i].bytes > 0))
                continue;
            char kind[64];
            const char *level = link_of(p, r, &e[i], kind, sizeof kind);
            int k = 0;
            while (k < rows && (strcmp(row[k].kind, kind) != 0 || row[k].level != level))
                k++;
            if (k == rows && rows < ROWS) {
                memset(&row[rows], 0, sizeof row[rows]);
                snprintf(row[rows].kind, sizeof row[rows].kind, "%s", kind);
                row[rows++].level = level;
            }
            if (k < rows)
                row[k].bytes[r] += e[i].bytes;
        }
    }
    ptdp_html_raw(h, "<p class=\"note\">By kind of communication and link level, bytes sent over the whole "
                     "run, from the trace's events (what <code>--trace</code> writes); a device sits in node "
                     "rank / GPUs per node of the profile:</p>\n<table>\n<tr><th class=\"l\">kind</th>"
                     "<th class=\"l\">link</th>");
    for (int r = 0; r < devices; r++) {
        char cell[48];
        snprintf(cell, sizeof cell, "<th>device %d</th>", r);
        ptdp_html_raw(h, cell);
    }
    ptdp_html_raw(h, "</tr>\n");
    for (int k = 0; k < rows; k++) {
        ptdp_html_raw(h, "<tr><td class=\"l\">");
        ptdp_html_text(h, "%s", row[k].kind);
        ptdp_html_raw(h, "</td><td class=\"l\">");
        ptdp_html_text(h, "%s", row[k].level);
        ptdp_html_raw(h, "</td>");
        for (int r = 0; r < devices; r++) {
            char cell[64];
            snprintf(cell, sizeof cell, "<td>%.0f</td>", row[k].bytes[r]);
            ptdp_html_raw(h, cell);
        }
        ptdp_html_raw(h, "</tr>\n");
    }
    ptdp_html_raw(h, "</table>\n");
}

/* ---- per device: memory, bytes, time ------------------------------------------- */

/* One stacked bar a device: n values each, one scale for all. */
static int device_bars(ptdp_html *h, int devices, int n, const double *v, const char *const *names,
                       const char *unit, double scale)
{
    double most = 0;
    for (int r = 0; r < devices; r++) {
        double sum = 0;
        for (int k = 0; k < n; k++)
            sum += v[r * n + k];
        most = fmax(most, sum);
    }
    const double left = 80, w = 600, row = 20, per = most > 0 ? w / most : 0;
    ptdp_svg svg;
    ptdp_svg_begin(&svg, left + w + 20, 34 + devices * row);
    double lx = left;
    for (int k = 0; k < n; k++) {
        ptdp_svg_rect(&svg, lx, 6, 12, 12, palette[k % NPALETTE], NULL);
        ptdp_svg_text(&svg, lx + 16, 16, 11, PTDP_SVG_START, NULL, "%s", names[k]);
        lx += 30 + 7.0 * (double)strlen(names[k]);
    }
    for (int r = 0; r < devices; r++) {
        const double y = 28 + r * row;
        double x = left;
        ptdp_svg_text(&svg, left - 8, y + 11, 11, PTDP_SVG_END, NULL, "device %d", r);
        for (int k = 0; k < n; k++) {
            const double bw = v[r * n + k] * per;
            if (!(bw > 0))
                continue;
            ptdp_svg_group_begin(&svg, NULL, 0, 0);
            ptdp_svg_title(&svg, "device %d: %s %.6g %s", r, names[k], v[r * n + k] / scale, unit);
            ptdp_svg_rect(&svg, x, y, bw, 14, palette[k % NPALETTE], "white");
            ptdp_svg_group_end(&svg);
            x += bw;
        }
    }
    int rc = ptdp_svg_end(&svg);
    ptdp_html_svg(h, &svg);
    ptdp_svg_free(&svg);
    return rc;
}

/* The table under the bars: a row a device, each value by its key
 * devices.R.GROUP.NAME, shown in `unit` (scale) to 4 digits. */
static void device_table(ptdp_html *h, int devices, int n, const double *v, const char *const *names,
                         const char *group, const char *unit, double scale)
{
    ptdp_html_raw(h, "<table>\n<tr><th>device</th>");
    for (int k = 0; k < n; k++) {
        ptdp_html_raw(h, "<th>");
        ptdp_html_text(h, "%s %s", names[k], unit);
        ptdp_html_raw(h, "</th>");
    }
    ptdp_html_raw(h, "</tr>\n");
    for (int r = 0; r < devices; r++) {
        char key[128];
        snprintf(key, sizeof key, "devices.%d.rank", r);
        ptdp_html_raw(h, "<tr><td>");
        ptdp_html_number(h, key, r, 0);
        ptdp_html_raw(h, "</td>");
        for (int k = 0; k < n; k++) {
            snprintf(key, sizeof key, "devices.%d.%s.%s", r, group, names[k]);
            ptdp_html_raw(h, "<td>");
            if (scale != 1)
                ptdp_html_scaled(h, key, v[r * n + k], scale, 4);
            else
                ptdp_html_number(h, key, v[r * n + k], 4);
            ptdp_html_raw(h, "</td>");
        }
        ptdp_html_raw(h, "</tr>\n");
    }
    ptdp_html_raw(h, "</table>\n");
}

static int memory(ptdp_html *h, const ptdp_launch_result *lr)
{
    const int n = lr->world_size;
    double v[64 * (PTDP_MEM_NCAT + 1)] = { 0 };
    const char *names[PTDP_MEM_NCAT + 1];
    for (int k = 0; k < PTDP_MEM_NCAT; k++)
        names[k] = ptdp_mem_category_name((ptdp_mem_category)k);
    names[PTDP_MEM_NCAT] = "total";
    for (int r = 0; r < n && r < 64; r++) {
        for (int k = 0; k < PTDP_MEM_NCAT; k++)
            v[r * (PTDP_MEM_NCAT + 1) + k] = (double)lr->devices[r].mem.peak[k];
        v[r * (PTDP_MEM_NCAT + 1) + PTDP_MEM_NCAT] = (double)lr->devices[r].mem.peak_total;
    }
    ptdp_html_raw(h, "<h2>Memory per device</h2>\n<p class=\"note\">Each category's peak in the device's arena "
                     "(the peaks fall at different moments, so the parts need not add up to the total).</p>\n");
    double bars[64 * PTDP_MEM_NCAT] = { 0 };
    for (int r = 0; r < n && r < 64; r++)
        for (int k = 0; k < PTDP_MEM_NCAT; k++)
            bars[r * PTDP_MEM_NCAT + k] = v[r * (PTDP_MEM_NCAT + 1) + k];
    int rc = device_bars(h, n < 64 ? n : 64, PTDP_MEM_NCAT, bars, names, "MiB", MIB);
    device_table(h, n < 64 ? n : 64, PTDP_MEM_NCAT + 1, v, names, "memory_peak_bytes", "MiB", MIB);
    return rc;
}

static int bytes(ptdp_html *h, const ptdp_train_page *p)
{
    const ptdp_launch_result *lr = p->lr;
    const int n = lr->world_size < 64 ? lr->world_size : 64;
    const char *names[16];
    int ng = 0;
    while (ng < 15 && ng < ptdp_report_groups(p->c) && ptdp_report_group_name(ng) != NULL) {
        names[ng] = ptdp_report_group_name(ng);
        ng++;
    }
    names[ng] = "total";
    double v[64 * 16] = { 0 };
    for (int r = 0; r < n; r++) {
        for (int g = 0; g < ng; g++)
            v[r * (ng + 1) + g] = p->c->steps > 0
                                  ? ptdp_report_group_sent(&lr->devices[r].comm, names[g]) / p->c->steps : 0;
        v[r * (ng + 1) + ng] = p->c->steps > 0 ? lr->devices[r].comm.total_sent / p->c->steps : 0;
    }
    ptdp_html_raw(h, "<h2>Bytes sent per step</h2>\n<p class=\"note\">Each device's bytes a step in each group "
                     "(dp, tp, pp, the tied embedding's, cp, ep, expert-dp; with --shard-group, HSDP's shard and "
                     "replica groups).</p>\n");
    double bars[64 * 16] = { 0 };
    for (int r = 0; r < n; r++)
        for (int g = 0; g < ng; g++)
            bars[r * ng + g] = v[r * (ng + 1) + g];
    int rc = device_bars(h, n, ng, bars, names, "KiB", 1024);
    device_table(h, n, ng + 1, v, names, "bytes_sent_per_step", "KiB", 1024);
    if (lr->traces != NULL)
        bytes_by_link(h, p, n);
    return rc;
}

static int times(ptdp_html *h, const ptdp_launch_result *lr)
{
    const int n = lr->world_size < 64 ? lr->world_size : 64;
    static const char *const names[] = { "compute", "comm", "idle", "end" };
    double v[64 * 4] = { 0 };
    for (int r = 0; r < n; r++) {
        const ptdp_clock *c = &lr->devices[r].clock;
        v[r * 4 + 0] = c->compute_s;
        v[r * 4 + 1] = c->comm_s;
        v[r * 4 + 2] = c->idle_s;
        v[r * 4 + 3] = c->now;
    }
    ptdp_html_raw(h, "<h2>Virtual time per device</h2>\n<p class=\"note\">The device's clock over the whole run: "
                     "compute + communication (what the compute stream waited for) + idle = end.</p>\n");
    double bars[64 * 3] = { 0 };
    for (int r = 0; r < n; r++)
        for (int k = 0; k < 3; k++)
            bars[r * 3 + k] = v[r * 4 + k];
    int rc = device_bars(h, n, 3, bars, names, "s", 1);
    device_table(h, n, 4, v, names, "virtual_s", "s", 1);
    return rc;
}

int ptdp_html_train(const char *path, const ptdp_train_page *p, const char *report, size_t report_len,
                    const char *log, size_t log_len, char *msg, size_t msglen)
{
    ptdp_html h;
    ptdp_html_begin(&h, "ptdp train: the run");
    the_run(&h, p);
    int rc = loss_curve(&h, p->res);
    static timeline_stats ts;    /* large: not on the stack */
    if (rc == PTDP_OK)
        rc = timeline(&h, p->lr, &ts);
    if (rc == PTDP_OK)
        rc = memory(&h, p->lr);
    if (rc == PTDP_OK)
        rc = bytes(&h, p);
    if (rc == PTDP_OK)
        rc = times(&h, p->lr);
    if (p->lr->world_size > 64)
        ptdp_html_raw(&h, "<p class=\"note\">The first 64 devices are drawn.</p>\n");
    ptdp_html_data(&h, report, report_len);
    ptdp_html_data_as(&h, "ptdp-log", log, log_len);
    return ptdp_html_finish(&h, rc, path, msg, msglen);
}
