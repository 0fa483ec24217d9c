/*
 * figure_tp.c — tp_splits.svg: how tensor parallelism cuts the model.
 *
 * Four devices build a tp = 4 mesh and the default model with
 * ptdp_model_init, exactly as training does, and report the descriptors of
 * their shards (whole shape, local shape, offset).  The figure draws each
 * whole matrix to scale and every rank's shard where its offsets put it:
 *
 *   fc1.weight A [ffn, h]   rows     column-parallel: rank r owns ffn/tp outputs
 *   fc2.weight B [h, ffn]   columns  row-parallel:    rank r owns ffn/tp inputs
 *   out.weight   [C, h]      rows     vocab-parallel:  rank r owns C/tp classes
 *
 * and above them the block's data flow with its two conjugate operators:
 * f (identity forward, all-reduce backward) before fc1 and g (all-reduce
 * forward, identity backward) after fc2 — see tp.h.  B is fc2's weight, so
 * the number of samples is written "batch" (X is batch x h), never "B".
 */
#include <stdio.h>
#include <string.h>

#include "../model_flags.h"
#include "figures.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/mesh.h"
#include "ptdp/model.h"
#include "ptdp/models.h"
#include "ptdp/launch.h"

enum { TP = 4 };

typedef struct {
    int full_rows, full_cols, rows, cols, row0, col0;
    ptdp_shard shard;
} shard_info;

typedef struct {
    ptdp_model_config cfg;
    shard_info fc1[TP], fc2[TP], out[TP];   /* one per rank, written by that rank */
    size_t numel[TP];                       /* elements each rank holds          */
    size_t total;                           /* elements of the whole model (rank 0) */
    char replicated[512];                   /* unsplit parameters, by rank 0     */
} tp_layout;

/* ---- ask a real tp = 4 model ------------------------------------------------ */

static void describe(const ptdp_param *p, shard_info *out)
{
    *out = (shard_info){ p->full_rows, p->full_cols, p->w.rows, p->w.cols, p->row0, p->col0, p->shard };
}

/* "blocks.3.fc2.bias" → "blocks.l.fc2.bias": one entry for all blocks. */
static void add_replicated(char *list, size_t len, const char *name, const shard_info *s)
{
    char generic[PTDP_NAME_MAX + 16];
    int l;
    char rest[PTDP_NAME_MAX];
    if (sscanf(name, "blocks.%d.%63s", &l, rest) == 2)
        snprintf(generic, sizeof generic, "blocks.l.%s", rest);
    else
        snprintf(generic, sizeof generic, "%s", name);
    if (strstr(list, generic) != NULL)
        return;
    size_t at = strlen(list);
    if (s->full_rows == 1)
        snprintf(list + at, len - at, "%s%s [%d]", at ? ", " : "", generic, s->full_cols);
    else
        snprintf(list + at, len - at, "%s%s [%d \u00d7 %d]", at ? ", " : "", generic, s->full_rows,
                 s->full_cols);
}

static int tp_describe_device(ptdp_device *dev, void *arg)
{
    tp_layout *t = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    int rc = ptdp_mesh_init(dev, 1, TP, 1, &mesh);
    if (rc != 0)
        return rc;
    if ((rc = ptdp_model_init(dev, &m, &t->cfg, &mesh, NULL, 1, 0.0)) != 0) {
        ptdp_mesh_free(&mesh);
        return rc;
    }
    const int r = mesh.tp_rank;
    ptdp_param *fc1 = ptdp_model_find(&m, "blocks.0.fc1.weight");
    ptdp_param *fc2 = ptdp_model_find(&m, "blocks.0.fc2.weight");
    ptdp_param *out = ptdp_model_find(&m, "out.weight");
    if (fc1 == NULL || fc2 == NULL || out == NULL) {
        rc = ptdp_fail(dev, PTDP_EINVAL, "tp figure: the model has no blocks.0.fc1/fc2 or out.weight");
    } else {
        describe(fc1, &t->fc1[r]);
        describe(fc2, &t->fc2[r]);
        describe(out, &t->out[r]);
        t->numel[r] = m.numel;
        for (int i = 0; r == 0 && i < m.nparams; i++) {
            shard_info s;
            describe(&m.params[i], &s);
            t->total += (size_t)s.full_rows * (size_t)s.full_cols;
            if (s.shard == PTDP_SHARD_NONE)
                add_replicated(t->replicated, sizeof t->replicated, m.params[i].name, &s);
        }
    }
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return rc;
}

/* The shards of one matrix must tile it: inside it, and areas adding up. */
static int check_tiling(const shard_info *s, const char *name, char *msg, size_t msglen)
{
    size_t area = 0;
    for (int r = 0; r < TP; r++) {
        if (s[r].row0 < 0 || s[r].col0 < 0 || s[r].row0 + s[r].rows > s[r].full_rows ||
            s[r].col0 + s[r].cols > s[r].full_cols) {
            snprintf(msg, msglen, "%s: rank %d's shard lies outside the whole matrix", name, r);
            return PTDP_ECHECK;
        }
        area += (size_t)s[r].rows * (size_t)s[r].cols;
    }
    if (area != (size_t)s[0].full_rows * (size_t)s[0].full_cols) {
        snprintf(msg, msglen, "%s: the shards cover %zu of %d x %d elements", name, area,
                 s[0].full_rows, s[0].full_cols);
        return PTDP_ECHECK;
    }
    return 0;
}

/* ---- drawing ------------------------------------------------------------------ */

/* A box with a title and a shape under it; `stack` > 1 draws one copy per
 * rank behind it, offset, in the ranks' colours. */
static void flow_box(ptdp_svg *s, double x, double y, double w, double h, int stack,
                     const char *title, const char *shape)
{
    for (int r = stack - 1; r >= 0; r--)
        ptdp_svg_rect(s, x + 4 * r, y - 4 * r, w, h, stack > 1 ? fig_rank_color(r) : "#eeeeee", "#555555");
    ptdp_svg_text(s, x + w / 2, y + 17, 12, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, stack > 1 ? "white" : NULL,
                  "%s", title);
    ptdp_svg_text(s, x + w / 2, y + 32, 11, PTDP_SVG_MIDDLE, stack > 1 ? "white" : NULL, "%s", shape);
}

static void flow_arrow(ptdp_svg *s, double x0, double x1, double y)
{
    double xs[2] = { x0, x1 }, ys[2] = { y, y };
    ptdp_svg_arrow(s, xs, ys, 2, "#333333", 1.5, 7);
}

static void conjugate(ptdp_svg *s, double cx, double cy, const char *name, const char *fwd,
                      const char *bwd)
{
    ptdp_svg_rect(s, cx - 13, cy - 13, 26, 26, "#fff3c4", "#b8860b");
    ptdp_svg_text(s, cx, cy + 5, 14, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, "#7a5a00", "%s", name);
    ptdp_svg_text(s, cx, cy + 44, 11, PTDP_SVG_MIDDLE, "#7a5a00", "forward: %s", fwd);
    ptdp_svg_text(s, cx, cy + 58, 11, PTDP_SVG_MIDDLE, "#7a5a00", "backward: %s", bwd);
}

static void draw_flow(ptdp_svg *s, const tp_layout *t, double y)
{
    const int h = t->cfg.hidden, fl = t->fc1[0].rows;
    char shape[64];
    snprintf(shape, sizeof shape, "batch \u00d7 %d", h);
    flow_box(s, 30, y, 84, 44, 1, "X", shape);
    flow_arrow(s, 114, 152, y + 22);
    conjugate(s, 166, y + 22, "f", "identity", "all-reduce dX");
    flow_arrow(s, 180, 226, y + 22);
    snprintf(shape, sizeof shape, "batch \u00d7 %d on rank r", fl);
    flow_box(s, 226, y, 176, 44, TP, "GELU(X A_r\u1d40)", shape);
    flow_arrow(s, 414, 462, y + 22);
    ptdp_svg_text(s, 438, y + 14, 10, PTDP_SVG_MIDDLE, "#555555", "no talk");
    snprintf(shape, sizeof shape, "batch \u00d7 %d partial sum", h);
    flow_box(s, 462, y, 176, 44, TP, "Y_r B_r\u1d40", shape);
    flow_arrow(s, 650, 696, y + 22);
    conjugate(s, 710, y + 22, "g", "all-reduce", "identity");
    flow_arrow(s, 724, 770, y + 22);
    snprintf(shape, sizeof shape, "batch \u00d7 %d", h);
    flow_box(s, 770, y, 150, 44, 1, "Z = \u03a3_r Y_r B_r\u1d40 + b", shape);
}

/* One matrix at `scale` pixels per element, its shards coloured by rank
 * and placed by their offsets.  `rows_split`: the label names rows, else
 * columns.  One-line labels when a shard is too flat for three lines. */
static void draw_matrix(ptdp_svg *s, const shard_info *sh, double x, double y, double scale,
                        const char *dim_rows, const char *dim_cols)
{
    const double W = sh[0].full_cols * scale, H = sh[0].full_rows * scale;
    ptdp_svg_text(s, x + W / 2, y - 8, 11, PTDP_SVG_MIDDLE, "#333333", "%s = %d", dim_cols, sh[0].full_cols);
    ptdp_svg_text(s, x - 8, y + H / 2 + 4, 11, PTDP_SVG_END, "#333333", "%s = %d", dim_rows, sh[0].full_rows);
    for (int r = 0; r < TP; r++) {
        const shard_info *p = &sh[r];
        double sx = x + p->col0 * scale, sy = y + p->row0 * scale;
        double sw = p->cols * scale, shh = p->rows * scale, cx = sx + sw / 2;
        int by_rows = p->shard == PTDP_SHARD_ROWS;
        int first = by_rows ? p->row0 : p->col0, n = by_rows ? p->rows : p->cols;
        ptdp_svg_rect(s, sx, sy, sw, shh, fig_rank_color(r), "white");
        if (shh >= 48) {
            ptdp_svg_text(s, cx, sy + shh / 2 - 10, 12, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, "white",
                          "rank %d", r);
            ptdp_svg_text(s, cx, sy + shh / 2 + 5, 11, PTDP_SVG_MIDDLE, "white",
                          "[%d \u00d7 %d]", p->rows, p->cols);
            ptdp_svg_text(s, cx, sy + shh / 2 + 19, 11, PTDP_SVG_MIDDLE, "white", "%s %d\u2013%d",
                          by_rows ? "rows" : "cols", first, first + n - 1);
        } else {
            ptdp_svg_text(s, cx, sy + shh / 2 + 4, 11, PTDP_SVG_MIDDLE, "white",
                          "rank %d \u00b7 [%d \u00d7 %d] \u00b7 %s %d\u2013%d", r, p->rows, p->cols,
                          by_rows ? "rows" : "cols", first, first + n - 1);
        }
    }
}

static void lines(ptdp_svg *s, double x, double y, const char *const *text, int n)
{
    for (int i = 0; i < n; i++)
        ptdp_svg_text(s, x, y + 15 * i, 11, PTDP_SVG_START, "#333333", "%s", text[i]);
}

int fig_tp_splits(const char *path, char *msg, size_t msglen)
{
    static tp_layout t;   /* a few KiB: off the stack */
    memset(&t, 0, sizeof t);
    t.cfg = ptdp_train_defaults().model;
    ptdp_launch_result lr;
    memset(&lr, 0, sizeof lr);
    ptdp_launch_opts o = { .watchdog_s = 30, .result = &lr };
    int err = ptdp_launch(TP, tp_describe_device, &t, &o);
    if (err != 0)
        snprintf(msg, msglen, "building the tp = 4 model failed: %s", lr.message);
    ptdp_launch_result_free(&lr);
    if (err == 0)
        err = check_tiling(t.fc1, "fc1.weight", msg, msglen);
    if (err == 0)
        err = check_tiling(t.fc2, "fc2.weight", msg, msglen);
    if (err == 0)
        err = check_tiling(t.out, "out.weight", msg, msglen);
    if (err != 0)
        return err;

    const int h = t.cfg.hidden, dff = t.cfg.ffn, C = ptdp_model_cli_get(&t.cfg, "--classes");
    const char *title = ptdp_model_of(&t.cfg)->caps.title;   /* "the MLP": the default model */
    title = title == NULL ? ptdp_model_name(&t.cfg) : title + (strncmp(title, "the ", 4) == 0 ? 4 : 0);
    const int fl = t.fc1[0].rows, cl = t.out[0].rows;
    const double top_of_matrices = 250;
    ptdp_svg s;
    ptdp_svg_begin(&s, 940, top_of_matrices + dff * 1.25 + 26 + 4 * 15 + 24 + 36);
    ptdp_svg_text(&s, 20, 26, 17, PTDP_SVG_BOLD, NULL,
                  "Tensor parallelism, tp = %d: one %s block and the output layer, cut four ways", TP, title);
    ptdp_svg_text(&s, 20, 46, 12, PTDP_SVG_START, "#333333",
                  "Shapes and offsets read from the parameters ptdp_model_init gives each rank "
                  "(default model: h = %d, d_ff = %d, C = %d).", h, dff, C);
    draw_flow(&s, &t, 80);

    char buf[4][160];
    /* fc1: tall, on the left */
    const double top = top_of_matrices;
    ptdp_svg_text(&s, 20, top - 46, 13, PTDP_SVG_BOLD, NULL, "fc1.weight A [%d \u00d7 %d]", dff, h);
    ptdp_svg_text(&s, 20, top - 30, 12, PTDP_SVG_START, "#08519c", "split by rows: column-parallel");
    draw_matrix(&s, t.fc1, 110, top, 1.25, "d_ff", "h");
    snprintf(buf[0], sizeof buf[0], "Rank r computes GELU(X A_r\u1d40): its %d of", fl);
    snprintf(buf[1], sizeof buf[1], "the %d hidden units.  GELU acts on each", dff);
    snprintf(buf[2], sizeof buf[2], "unit alone, so the split output needs");
    snprintf(buf[3], sizeof buf[3], "no communication before fc2.");
    lines(&s, 20, top + dff * 1.25 + 26, (const char *const[]){ buf[0], buf[1], buf[2], buf[3] }, 4);

    /* fc2: wide, top right */
    const double rx = 330;
    ptdp_svg_text(&s, rx, top - 46, 13, PTDP_SVG_BOLD, NULL, "fc2.weight B [%d \u00d7 %d]", h, dff);
    ptdp_svg_text(&s, rx, top - 30, 12, PTDP_SVG_START, "#08519c", "split by columns: row-parallel");
    draw_matrix(&s, t.fc2, rx + 70, top, 1.25, "h", "d_ff");
    snprintf(buf[0], sizeof buf[0],
             "Rank r multiplies its %d hidden units by B_r: a partial sum Y_r B_r\u1d40", fl);
    snprintf(buf[1], sizeof buf[1],
             "of the whole batch \u00d7 %d output.  g all-reduces the partial sums, once", h);
    snprintf(buf[2], sizeof buf[2], "per block forward (f does the same for dX backward); the bias is");
    snprintf(buf[3], sizeof buf[3], "replicated and added once, after the sum.");
    lines(&s, rx, top + h * 1.25 + 26, (const char *const[]){ buf[0], buf[1], buf[2], buf[3] }, 4);

    /* the output layer, bottom right */
    const double oy = top + h * 1.25 + 150;
    ptdp_svg_text(&s, rx, oy - 46, 13, PTDP_SVG_BOLD, NULL, "out.weight [%d \u00d7 %d]", C, h);
    ptdp_svg_text(&s, rx, oy - 30, 12, PTDP_SVG_START, "#08519c", "split by rows (classes): vocab-parallel");
    draw_matrix(&s, t.out, rx + 70, oy, 4.0, "C", "h");
    snprintf(buf[0], sizeof buf[0], "Rank r holds the logits of %d of the %d classes.  The softmax", cl, C);
    snprintf(buf[1], sizeof buf[1], "cross-entropy all-reduces batch numbers per quantity (row max, sum of");
    snprintf(buf[2], sizeof buf[2], "exp, the label's logit), never the batch \u00d7 %d logits.", C);
    lines(&s, rx, oy + C * 4.0 + 26, (const char *const[]){ buf[0], buf[1], buf[2] }, 3);

    const double foot = top + dff * 1.25 + 26 + 4 * 15 + 24;
    ptdp_svg_text(&s, 20, foot, 12, PTDP_SVG_BOLD, NULL, "Replicated on every rank:");
    ptdp_svg_text(&s, 200, foot, 12, PTDP_SVG_START, "#333333", "%s.", t.replicated);
    ptdp_svg_text(&s, 20, foot + 20, 12, PTDP_SVG_BOLD, NULL, "Per device:");
    ptdp_svg_text(&s, 200, foot + 20, 12, PTDP_SVG_START, "#333333",
                  "%zu of the model's %zu parameters (%.1f%%; 1/tp would be %.1f%%: the replicated ones "
                  "are held %d times).", t.numel[0], t.total, 100.0 * (double)t.numel[0] / (double)t.total,
                  100.0 / TP, TP);
    return fig_finish(&s, path, msg, msglen);
}
