/*
 * gpt_figure_sp.c — sp_block.svg: which tensors sequence parallelism splits
 * along which axis, in one block of the GPT (sp.h).
 *
 * Two devices build a tp = 2 mesh, set mesh.sp as `ptdp train --tp 2 --sp`
 * does, build the default GPT with ptdp_model_init and run one forward of
 * one micro-batch (B = the default batch).  Each rank reports the shapes of
 * what block 0 keeps (ptdp_gpt_saved_of(acts)->blocks[0]) and how its
 * parameters are cut, and the same again without SP, so the figure draws
 * measured shapes:
 *
 *        SP region                    TP region                        SP region
 *   x [B T/tp C] ─LN1─► ln1 [B T/tp C] ─ḡ─c_attn─► qkv [B T 3C/tp] ─► y ─c_proj─► g ─► x2 [B T/tp C]
 *   x2           ─LN2─► ln2 [B T/tp C] ─ḡ─c_fc──►  fc  [B T F/tp]  ─► gelu ─c_proj─► g ─► out
 *                  ḡ: all-gather along T into a transient buffer (backward:
 *                     reduce-scatter of dx, and the shard all-gathered again for dW)
 *                  g: reduce-scatter along T (backward: all-gather)
 *
 * Which positions a rank holds is measured too: rank r's rows of x are
 * found, by value, among the whole sequence of x that plain TP keeps.
 * The caption adds the activations per block by the formula
 * (ptdp_gpt_block_act_elements) beside the bytes the arena kept — the
 * forward of the model, and of one block more — and the bytes of one real
 * training step with and without --sp.  The figure is refused
 * (PTDP_ECHECK) if any shape disagrees with the layout of sp.h.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../figures/figures.h"
#include "gpt_figures.h"
#include "ptdp/arena.h"
#include "ptdp/coll.h"
#include "ptdp/error.h"
#include "ptdp/gpt.h"
#include "ptdp/launch.h"
#include "ptdp/mesh.h"
#include "ptdp/model.h"
#include "ptdp/models.h"

enum { TP = 2, TP_ALONE = 0, SP = 1 };

typedef struct {
    int rows, cols;
} shape;

/* What one rank saw in one layout (TP alone or SP). */
typedef struct {
    shape x, ln1, qkv, y, x2, ln2, fc, gelu, out;   /* block 0's kept tensors; out = block 1's x */
    size_t kept[2];             /* acts bytes the forward kept: layers, layers + 1 */
    int pos_first, pos_last;    /* SP: positions of x (sample 0) found in TP's x */
    double pos_err;             /* the largest difference of those matches */
    /* block 0's parameters on this rank */
    int attn_row0, attn_rows, proj_col0, proj_cols, fc_row0, fc_rows, fcproj_col0, fcproj_cols;
    int ln_cols, ln_replicated, ln_sp;   /* of the four LayerNorm tensors: C, how many replicated / flagged */
    int heads_local;
} rank_view;

typedef struct {
    ptdp_model_config cfg;
    int batch;
    uint64_t seed;
    rank_view v[2][TP];         /* [TP_ALONE or SP][tp rank] */
    ptdp_real *x_whole;         /* T x C: sample 0 of x under TP alone (rank 0) */
    ptdp_real *x_sp[TP];        /* T/tp x C: sample 0 of x under SP, each rank  */
} sp_layout;

/* ---- ask a real tp = 2 GPT, with and without SP ------------------------------- */

static shape shape_of(ptdp_tensor t)
{
    return (shape){ t.rows, t.cols };
}

static void read_params(ptdp_model *m, rank_view *v)
{
    const ptdp_gpt_block *b = &ptdp_gpt_of(m)->blocks[0];
    v->attn_row0 = b->attn_w->row0;
    v->attn_rows = b->attn_w->w.rows;
    v->proj_col0 = b->proj_w->col0;
    v->proj_cols = b->proj_w->w.cols;
    v->fc_row0 = b->fc_w->row0;
    v->fc_rows = b->fc_w->w.rows;
    v->fcproj_col0 = b->fc_proj_w->col0;
    v->fcproj_cols = b->fc_proj_w->w.cols;
    const ptdp_param *ln[] = { b->ln1_w, b->ln1_b, b->ln2_w, b->ln2_b };
    v->ln_cols = b->ln1_w->full_cols;
    for (int i = 0; i < 4; i++) {
        v->ln_replicated += ln[i]->shard == PTDP_SHARD_NONE && ln[i]->w.cols == ln[i]->full_cols;
        v->ln_sp += ptdp_param_summed_over(ln[i], PTDP_GROUP_TP);
    }
    v->heads_local = ptdp_gpt_of(m)->heads_local;
}

/* One forward of micro-batch 0 with `layers` blocks; the kept acts bytes,
 * and (record) the shapes and sample 0 of x. */
static int forward_once(ptdp_device *dev, sp_layout *a, ptdp_mesh *mesh, int layout, int layers, bool record,
                        size_t *kept)
{
    ptdp_model_config cfg = a->cfg;
    cfg.layers = layers;
    ptdp_model m;
    int rc = ptdp_model_init(dev, &m, &cfg, mesh, NULL, a->seed, 0.0);
    if (rc != 0)
        return rc;
    ptdp_batch b = { .first = 0, .rows = a->batch };
    if ((rc = ptdp_batch_load(dev, &m, &b)) != 0) {
        ptdp_model_free(dev, &m);
        return rc;
    }
    ptdp_mem_stats before, after;
    ptdp_arena_stats(dev->arena, &before);
    ptdp_acts acts;
    rc = ptdp_model_forward(dev, &m, &acts, &b, (ptdp_tensor){ 0 }, 0, false, NULL);
    if (rc == 0) {
        ptdp_arena_stats(dev->arena, &after);
        *kept = after.current[PTDP_MEM_ACTS] - before.current[PTDP_MEM_ACTS];
        const ptdp_gpt_saved *sv = ptdp_gpt_saved_of(&acts);
        rank_view *v = &a->v[layout][mesh->tp_rank];
        if (record && sv->nblocks < 2) {
            rc = ptdp_fail(dev, PTDP_EINVAL, "sp figure: the model has %d blocks, the figure needs 2", sv->nblocks);
        } else if (record) {
            const ptdp_gpt_block_acts *k = &sv->blocks[0];
            v->x = shape_of(k->x);
            v->ln1 = shape_of(k->ln1);
            v->qkv = shape_of(k->qkv);
            v->y = shape_of(k->y);
            v->x2 = shape_of(k->x2);
            v->ln2 = shape_of(k->ln2);
            v->fc = shape_of(k->fc);
            v->gelu = shape_of(k->gelu);
            v->out = shape_of(sv->blocks[1].x);
            read_params(&m, v);
            const int T = ptdp_gpt(&cfg)->seq_len, C = cfg.hidden;
            int rows = layout == SP ? T / TP : T;
            ptdp_real *dst = layout == SP ? a->x_sp[mesh->tp_rank] : mesh->tp_rank == 0 ? a->x_whole : NULL;
            if (dst != NULL && k->x.rows >= rows && k->x.cols == C)
                for (int i = 0; i < rows; i++)
                    memcpy(dst + (size_t)i * C, k->x.data + (size_t)i * k->x.stride, (size_t)C * sizeof *dst);
        }
        ptdp_acts_free(dev, &m, &acts);
    }
    ptdp_batch_free(dev, &b);
    ptdp_model_free(dev, &m);
    return rc;
}

static int describe_device(ptdp_device *dev, void *arg)
{
    sp_layout *a = arg;
    ptdp_mesh mesh;
    int rc = ptdp_mesh_init(dev, 1, TP, 1, &mesh);
    if (rc != 0)
        return rc;
    for (int layout = TP_ALONE; layout <= SP && rc == 0; layout++) {
        mesh.sp = layout == SP;   /* before the model: it decides the model's layout */
        rank_view *v = &a->v[layout][mesh.tp_rank];
        for (int k = 0; k < 2 && rc == 0; k++)
            rc = forward_once(dev, a, &mesh, layout, a->cfg.layers + k, k == 0, &v->kept[k]);
    }
    ptdp_mesh_free(&mesh);
    return rc;
}

/* ---- the checks: every shape as sp.h lays it out -------------------------------- */

static int expect(shape got, int rows, int cols, const char *what, int layout, int r, char *msg, size_t msglen)
{
    if (got.rows == rows && got.cols == cols)
        return 0;
    snprintf(msg, msglen, "%s on rank %d%s is %d x %d, the layout says %d x %d", what, r,
             layout == SP ? " (sp)" : " (tp alone)", got.rows, got.cols, rows, cols);
    return PTDP_ECHECK;
}

/* Rank r's rows of x (sample 0) among the whole sequence: each local row t
 * matches the whole row of smallest difference, which must be row first + t. */
static int find_positions(sp_layout *a, int r, char *msg, size_t msglen)
{
    const int T = ptdp_gpt(&a->cfg)->seq_len, C = a->cfg.hidden, Tl = T / TP;
    rank_view *v = &a->v[SP][r];
    v->pos_first = -1;
    v->pos_err = 0;
    for (int t = 0; t < Tl; t++) {
        int best = -1;
        double best_d = INFINITY;
        for (int p = 0; p < T; p++) {
            double d = 0;
            for (int j = 0; j < C; j++)
                d = fmax(d, fabs((double)a->x_sp[r][(size_t)t * C + j] - (double)a->x_whole[(size_t)p * C + j]));
            if (d < best_d) {
                best_d = d;
                best = p;
            }
        }
        if (t == 0)
            v->pos_first = best;
        if (best != v->pos_first + t || best_d > 1e-5) {
            snprintf(msg, msglen, "rank %d's row %d of x under sp is closest to position %d (difference %.3g), "
                     "not to position %d", r, t, best, best_d, v->pos_first + t);
            return PTDP_ECHECK;
        }
        v->pos_err = fmax(v->pos_err, best_d);
    }
    v->pos_last = v->pos_first + Tl - 1;
    if (v->pos_first != r * Tl) {
        snprintf(msg, msglen, "rank %d holds positions %d-%d under sp, the layout says %d-%d", r, v->pos_first,
                 v->pos_last, r * Tl, (r + 1) * Tl - 1);
        return PTDP_ECHECK;
    }
    return 0;
}

static int check_layout(sp_layout *a, char *msg, size_t msglen)
{
    const ptdp_model_config *c = &a->cfg;
    const int R = a->batch * ptdp_gpt(c)->seq_len, C = c->hidden, F = c->ffn, Cl = C / TP, Fl = F / TP;
    int err = 0;
    for (int layout = TP_ALONE; layout <= SP && err == 0; layout++)
        for (int r = 0; r < TP && err == 0; r++) {
            const rank_view *v = &a->v[layout][r];
            const int Rl = layout == SP ? R / TP : R;   /* the SP regions' rows */
#define EXPECT(field, rows, cols) if (err == 0) err = expect(v->field, rows, cols, #field, layout, r, msg, msglen)
            EXPECT(x, Rl, C);
            EXPECT(ln1, Rl, C);
            EXPECT(qkv, R, 3 * Cl);
            EXPECT(y, R, Cl);
            EXPECT(x2, Rl, C);
            EXPECT(ln2, Rl, C);
            EXPECT(fc, R, Fl);
            EXPECT(gelu, R, Fl);
            EXPECT(out, Rl, C);
#undef EXPECT
            if (err != 0)
                break;
            if (v->attn_row0 != r * Cl || v->attn_rows != 3 * Cl || v->proj_col0 != r * Cl || v->proj_cols != Cl ||
                v->fc_row0 != r * Fl || v->fc_rows != Fl || v->fcproj_col0 != r * Fl || v->fcproj_cols != Fl ||
                v->heads_local != ptdp_gpt(c)->heads / TP) {
                snprintf(msg, msglen, "rank %d: block 0's c_attn, c_fc or c_projs are not cut by head and by F/tp",
                         r);
                err = PTDP_ECHECK;
            } else if (v->ln_cols != C || v->ln_replicated != 4 || v->ln_sp != (layout == SP ? 4 : 0)) {
                snprintf(msg, msglen, "rank %d%s: of block 0's four LayerNorm tensors %d are replicated and %d "
                         "declared summed over TP (want 4 and %d)", r, layout == SP ? " (sp)" : "",
                         v->ln_replicated, v->ln_sp, layout == SP ? 4 : 0);
                err = PTDP_ECHECK;
            }
        }
    for (int r = 0; r < TP && err == 0; r++)
        err = find_positions(a, r, msg, msglen);
    /* one block more keeps the formula's bytes, each tensor rounded up to
     * 64 bytes by the arena (13 tensors per block at most) */
    for (int layout = TP_ALONE; layout <= SP && err == 0; layout++) {
        const rank_view *v = &a->v[layout][0];
        double want = ptdp_gpt_block_act_elements(c, a->batch, TP, layout == SP) * sizeof(ptdp_real);
        double got = (double)v->kept[1] - (double)v->kept[0];
        if (got < want || got > want + 13 * 64) {
            snprintf(msg, msglen, "one block more kept %.0f B%s, the formula says %.0f B", got,
                     layout == SP ? " under sp" : "", want);
            err = PTDP_ECHECK;
        }
    }
    return err;
}

/* ---- one training step each: the bytes -------------------------------------- */

/* What rank 0 sent in its TP group during one step. */
typedef struct {
    double sent;
    unsigned long long all_reduce, all_gather, reduce_scatter;
} step_comm;

static int step_bytes(const ptdp_model_config *model, bool sp, step_comm *out, char *msg, size_t msglen)
{
    ptdp_train_config c = ptdp_train_defaults();
    c.model = *model;
    c.tp = TP;
    c.sp = sp;
    c.steps = 1;
    char why[PTDP_MSG_MAX];
    if (ptdp_train_validate(&c, why, sizeof why) != 0) {
        snprintf(msg, msglen, "--tp %d%s: %s", TP, sp ? " --sp" : "", why);
        return PTDP_EINVAL;
    }
    ptdp_train_result res;
    ptdp_launch_result lr;
    memset(&res, 0, sizeof res);
    memset(&lr, 0, sizeof lr);
    ptdp_launch_opts o = { .watchdog_s = 60, .result = &lr };
    int err = ptdp_train(&c, &o, NULL, NULL, &res, why, sizeof why);
    if (err != 0)
        snprintf(msg, msglen, "training one step at --tp %d%s failed: %s", TP, sp ? " --sp" : "", why);
    else {
        const ptdp_comm_stats *st = &lr.devices[0].comm;
        int g = 0;
        while (g < st->ngroups && strcmp(st->group[g].name, "tp") != 0)
            g++;
        if (g == st->ngroups) {
            snprintf(msg, msglen, "one step at --tp %d%s: device 0 reports no group \"tp\"", TP, sp ? " --sp" : "");
            err = PTDP_ECHECK;
        } else {
            /* dp = pp = 1: every collective of the run is in the TP group */
            *out = (step_comm){ st->group[g].sent, st->calls[PTDP_COLL_ALL_REDUCE], st->calls[PTDP_COLL_ALL_GATHER],
                                st->calls[PTDP_COLL_REDUCE_SCATTER] };
        }
    }
    ptdp_train_result_free(&res);
    ptdp_launch_result_free(&lr);
    return err;
}

/* ---- drawing ------------------------------------------------------------------ */

enum { BOX_W = 150, BOX_H = 118 };
enum glyph_kind { SPLIT_T, SPLIT_COLS, WHOLE };

/* A tensor's T x columns picture: split along T (rows), along its columns,
 * or whole on every rank (grey). */
static void glyph(ptdp_svg *s, double x, double y, enum glyph_kind kind, const char *cols)
{
    const double w = 60, h = 34;
    if (kind == WHOLE) {
        ptdp_svg_rect(s, x, y, w, h, "#bdbdbd", "#555555");
    } else {
        for (int r = 0; r < TP; r++) {
            if (kind == SPLIT_T)
                ptdp_svg_rect(s, x, y + r * h / TP, w, h / TP, fig_rank_color(r), "white");
            else
                ptdp_svg_rect(s, x + r * w / TP, y, w / TP, h, fig_rank_color(r), "white");
        }
    }
    ptdp_svg_text(s, x - 5, y + h / 2 + 4, 10, PTDP_SVG_END, "#555555", "T");
    ptdp_svg_text(s, x + w + 5, y + h / 2 + 4, 10, PTDP_SVG_START, "#555555", "%s", cols);
}

/* One kept tensor: its name, its picture, its measured shape per rank and
 * what each rank holds (two lines, in the ranks' colours unless whole). */
static void tensor_box(ptdp_svg *s, double x, double y, const char *name, enum glyph_kind kind, const char *cols,
                       shape sh, int batch, const char *line0, const char *line1)
{
    ptdp_svg_rect(s, x, y, BOX_W, BOX_H, "white", "#777777");
    ptdp_svg_text(s, x + BOX_W / 2, y + 17, 13, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, NULL, "%s", name);
    glyph(s, x + (BOX_W - 60) / 2, y + 26, kind, cols);
    ptdp_svg_text(s, x + BOX_W / 2, y + 78, 11, PTDP_SVG_MIDDLE, NULL, "%d \u00d7 %d \u00d7 %d per rank", batch,
                  sh.rows / batch, sh.cols);
    ptdp_svg_text(s, x + BOX_W / 2, y + 94, 11, PTDP_SVG_MIDDLE, kind == WHOLE ? "#555555" : fig_rank_color(0),
                  "%s", line0);
    ptdp_svg_text(s, x + BOX_W / 2, y + 109, 11, PTDP_SVG_MIDDLE, kind == WHOLE ? "#555555" : fig_rank_color(1),
                  "%s", line1);
}

static void arrow(ptdp_svg *s, double x0, double x1, double y, const char *above, const char *below)
{
    double xs[2] = { x0, x1 }, ys[2] = { y, y };
    ptdp_svg_arrow(s, xs, ys, 2, "#333333", 1.5, 7);
    if (above != NULL)
        ptdp_svg_text(s, (x0 + x1) / 2, y - 7, 11, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, "#333333", "%s", above);
    if (below != NULL)
        ptdp_svg_text(s, (x0 + x1) / 2, y + 15, 10, PTDP_SVG_MIDDLE, "#555555", "%s", below);
}

/* A join between the regions: ḡ (all-gather forward) or g (reduce-scatter
 * forward), its backward partner written under the row. */
static void join(ptdp_svg *s, double cx, double cy, double label_y, bool gather)
{
    ptdp_svg_rect(s, cx - 14, cy - 14, 28, 28, "#fff3c4", "#b8860b");
    ptdp_svg_text(s, cx, cy + 5, 15, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, "#7a5a00", "%s", gather ? "g\u0304" : "g");
    ptdp_svg_text(s, cx, label_y, 11, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, "#7a5a00", "%s: %s along T",
                  gather ? "g\u0304" : "g", gather ? "all-gather" : "reduce-scatter");
    ptdp_svg_text(s, cx, label_y + 14, 11, PTDP_SVG_MIDDLE, "#7a5a00", "backward: %s",
                  gather ? "reduce-scatter, and all-gather again" : "all-gather");
}

/* The x positions of a row: five boxes and two joins (the gather after
 * the kept LayerNorm output, box 1). */
typedef struct {
    double box[5], join[2];
} row_x;

static row_x row_layout(double left)
{
    row_x p;
    p.box[0] = left;
    p.box[1] = p.box[0] + BOX_W + 74;
    p.join[0] = p.box[1] + BOX_W + 40 + 15;
    p.box[2] = p.join[0] + 15 + 74;
    p.box[3] = p.box[2] + BOX_W + 74;
    p.join[1] = p.box[3] + BOX_W + 74 + 15;
    p.box[4] = p.join[1] + 15 + 96;
    return p;
}

/* The regions behind a row: SP, TP, SP. */
static void regions(ptdp_svg *s, const row_x *p, double y, int Tl)
{
    const double top = y - 30, h = BOX_H + 78;
    ptdp_svg_rect(s, p->box[0] - 12, top, p->join[0] - p->box[0] + 12, h, "#eaf5e6", NULL);
    ptdp_svg_rect(s, p->join[0], top, p->join[1] - p->join[0], h, "#e6eef8", NULL);
    ptdp_svg_rect(s, p->join[1], top, p->box[4] + BOX_W + 12 - p->join[1], h, "#eaf5e6", NULL);
    ptdp_svg_text(s, p->box[0] - 4, top + 16, 11, PTDP_SVG_START | PTDP_SVG_BOLD, "#2e6b26",
                  "SP region: T/tp = %d per rank", Tl);
    ptdp_svg_text(s, p->join[0] + 16, top + 16, 11, PTDP_SVG_START | PTDP_SVG_BOLD, "#22508a",
                  "TP region: the whole sequence, the columns split by head (attention) or by F/tp (MLP)");
    ptdp_svg_text(s, p->box[4] - 60, top + 16, 11, PTDP_SVG_START | PTDP_SVG_BOLD, "#2e6b26", "SP region");
}

static void lines(ptdp_svg *s, double x, double y, const char *const *text, int n)
{
    for (int i = 0; i < n; i++)
        ptdp_svg_text(s, x, y + 16 * i, 11.5, PTDP_SVG_START, "#333333", "%s", text[i]);
}

/* The title, the sizes and the legend. */
static void draw_header(ptdp_svg *s, const sp_layout *a)
{
    const ptdp_model_config *c = &a->cfg;
    const int B = a->batch, T = ptdp_gpt(c)->seq_len, C = c->hidden, F = c->ffn, nh = ptdp_gpt(c)->heads;
    const int hd = C / nh;
    ptdp_svg_text(s, 20, 26, 17, PTDP_SVG_BOLD, NULL,
                  "Sequence parallelism in one GPT block, tp = %d: which tensor is split along which axis", TP);
    ptdp_svg_text(s, 20, 46, 12, PTDP_SVG_START, "#333333",
                  "Shapes read from what block 0 keeps after one forward on each rank of the default GPT built "
                  "with mesh.sp (ptdp train --model gpt --tp %d --sp):", TP);
    ptdp_svg_text(s, 20, 62, 12, PTDP_SVG_START, "#333333",
                  "B = %d sequences, T = %d, C = %d, F = %d, nh = %d heads of %d.  Positions found by value in "
                  "the whole x that TP alone keeps.", B, T, C, F, nh, hd);
    /* the legend */
    const double ly = 84;
    for (int r = 0; r < TP; r++) {
        ptdp_svg_rect(s, 20 + 90 * r, ly - 10, 12, 12, fig_rank_color(r), NULL);
        ptdp_svg_text(s, 37 + 90 * r, ly, 11, PTDP_SVG_START, NULL, "rank %d", r);
    }
    ptdp_svg_rect(s, 200, ly - 10, 12, 12, "#bdbdbd", "#555555");
    ptdp_svg_text(s, 217, ly, 11, PTDP_SVG_START, NULL,
                  "whole: the same on every rank.  Each picture: T down, the columns across.");

}

/* Row 1, attention: x split along T, LN1, the gather, c_attn by heads,
 * attention, c_proj's partial sums reduce-scattered back to x2.  Returns
 * the y of its notes. */
static double draw_attention_row(ptdp_svg *s, const sp_layout *a, const char *p0, const char *p1)
{
    const ptdp_model_config *c = &a->cfg;
    const int B = a->batch, Tl = ptdp_gpt(c)->seq_len / TP;
    const rank_view *v0 = &a->v[SP][0], *v1 = &a->v[SP][1];
    const int C = c->hidden, hd = C / ptdp_gpt(c)->heads;
    char l0[64], l1[64];
    /* row 1: attention */
    const double y1 = 150, mid1 = y1 + BOX_H / 2;
    row_x p = row_layout(32);
    regions(s, &p, y1, Tl);
    tensor_box(s, p.box[0], y1, "x", SPLIT_T, "C", v0->x, B, p0, p1);
    arrow(s, p.box[0] + BOX_W, p.box[1], mid1, "LN1", "stats local");
    tensor_box(s, p.box[1], y1, "ln1", SPLIT_T, "C", v0->ln1, B, p0, p1);
    arrow(s, p.box[1] + BOX_W, p.join[0] - 14, mid1, NULL, NULL);
    join(s, p.join[0], mid1, y1 + BOX_H + 20, true);
    arrow(s, p.join[0] + 14, p.box[2], mid1, "c_attn", "column-par.");
    snprintf(l0, sizeof l0, "rank 0: q k v, heads %d\u2013%d", v0->attn_row0 / hd,
             (v0->attn_row0 + v0->attn_rows / 3) / hd - 1);
    snprintf(l1, sizeof l1, "rank 1: q k v, heads %d\u2013%d", v1->attn_row0 / hd,
             (v1->attn_row0 + v1->attn_rows / 3) / hd - 1);
    tensor_box(s, p.box[2], y1, "qkv", SPLIT_COLS, "3C", v0->qkv, B, l0, l1);
    arrow(s, p.box[2] + BOX_W, p.box[3], mid1, "attention", "its heads");
    snprintf(l0, sizeof l0, "rank 0: heads %d\u2013%d", v0->proj_col0 / hd, (v0->proj_col0 + v0->proj_cols) / hd - 1);
    snprintf(l1, sizeof l1, "rank 1: heads %d\u2013%d", v1->proj_col0 / hd, (v1->proj_col0 + v1->proj_cols) / hd - 1);
    tensor_box(s, p.box[3], y1, "y", SPLIT_COLS, "C", v0->y, B, l0, l1);
    arrow(s, p.box[3] + BOX_W, p.join[1] - 14, mid1, "c_proj", "partial sums");
    join(s, p.join[1], mid1, y1 + BOX_H + 20, false);
    arrow(s, p.join[1] + 14, p.box[4], mid1, "+ b, dropout", "+ x (residual)");
    tensor_box(s, p.box[4], y1, "x2", SPLIT_T, "C", v0->x2, B, p0, p1);

    char buf[5][240];
    const double f1 = y1 + BOX_H + 72;
    snprintf(buf[0], sizeof buf[0],
             "ln_1.weight, ln_1.bias [%d]: replicated, but each rank normalises only its positions, so their "
             "gradient is a partial sum: gradient all-reduced over TP.", v0->ln_cols);
    snprintf(buf[1], sizeof buf[1],
             "attn.c_attn.weight: %d \u00d7 %d per rank (the q, k and v rows of its %d heads); attn.c_proj.weight: "
             "%d \u00d7 %d per rank (their columns), its bias added after g.", v0->attn_rows, C, v0->heads_local, C,
             v0->proj_cols);
    lines(s, 20, f1, (const char *const[]){ buf[0], buf[1] }, 2);
    return f1;

}

/* Row 2, the MLP, the same way below row 1's notes at f1; returns the y of
 * its own notes. */
static double draw_mlp_row(ptdp_svg *s, const sp_layout *a, double f1, const char *p0, const char *p1)
{
    const ptdp_model_config *c = &a->cfg;
    const int B = a->batch, Tl = ptdp_gpt(c)->seq_len / TP;
    const rank_view *v0 = &a->v[SP][0], *v1 = &a->v[SP][1];
    const int C = c->hidden;
    char l0[64], l1[64], buf[2][240];
    row_x p = row_layout(32);
    /* row 2: MLP */
    const double y2 = f1 + 78, mid2 = y2 + BOX_H / 2;
    regions(s, &p, y2, Tl);
    tensor_box(s, p.box[0], y2, "x2", SPLIT_T, "C", v0->x2, B, p0, p1);
    arrow(s, p.box[0] + BOX_W, p.box[1], mid2, "LN2", "stats local");
    tensor_box(s, p.box[1], y2, "ln2", SPLIT_T, "C", v0->ln2, B, p0, p1);
    arrow(s, p.box[1] + BOX_W, p.join[0] - 14, mid2, NULL, NULL);
    join(s, p.join[0], mid2, y2 + BOX_H + 20, true);
    arrow(s, p.join[0] + 14, p.box[2], mid2, "c_fc", "column-par.");
    snprintf(l0, sizeof l0, "rank 0: columns %d\u2013%d", v0->fc_row0, v0->fc_row0 + v0->fc_rows - 1);
    snprintf(l1, sizeof l1, "rank 1: columns %d\u2013%d", v1->fc_row0, v1->fc_row0 + v1->fc_rows - 1);
    tensor_box(s, p.box[2], y2, "fc", SPLIT_COLS, "F", v0->fc, B, l0, l1);
    arrow(s, p.box[2] + BOX_W, p.box[3], mid2, "GELU", "local");
    tensor_box(s, p.box[3], y2, "gelu", SPLIT_COLS, "F", v0->gelu, B, l0, l1);
    arrow(s, p.box[3] + BOX_W, p.join[1] - 14, mid2, "c_proj", "partial sums");
    join(s, p.join[1], mid2, y2 + BOX_H + 20, false);
    arrow(s, p.join[1] + 14, p.box[4], mid2, "+ b, dropout", "+ x2 (residual)");
    tensor_box(s, p.box[4], y2, "out", SPLIT_T, "C", v0->out, B, p0, p1);

    const double f2 = y2 + BOX_H + 72;
    snprintf(buf[0], sizeof buf[0],
             "ln_2.weight, ln_2.bias [%d]: replicated, gradient all-reduced over TP (and ln_f's too).  out is "
             "block 1's x, measured there: the next block starts split along T.", v0->ln_cols);
    snprintf(buf[1], sizeof buf[1],
             "mlp.c_fc.weight: %d \u00d7 %d per rank (F/tp rows); mlp.c_proj.weight: %d \u00d7 %d per rank (the "
             "same F/tp columns).  The embedding ends in a g too, the head starts with a g\u0304.",
             v0->fc_rows, C, C, v0->fcproj_cols);
    lines(s, 20, f2, (const char *const[]){ buf[0], buf[1] }, 2);
    return f2;

}

/* The caption below row 2's notes at f2: the activation formula beside the
 * arena, and the bytes SP sends beside TP's. */
static void draw_caption(ptdp_svg *s, const sp_layout *a, const step_comm comm[2], double f2)
{
    const ptdp_model_config *c = &a->cfg;
    const int B = a->batch, C = c->hidden;
    const rank_view *v0 = &a->v[SP][0];
    char buf[5][240];
    /* the caption: the formula, the arena, the bytes */
    const double foot = f2 + 50;
    const double e_sp = ptdp_gpt_block_act_elements(c, B, TP, true);
    const double e_tp = ptdp_gpt_block_act_elements(c, B, TP, false);
    const rank_view *t0 = &a->v[TP_ALONE][0];
    ptdp_svg_text(s, 20, foot, 13, PTDP_SVG_BOLD, NULL, "What SP saves, and what it costs");
    snprintf(buf[0], sizeof buf[0],
             "Activations a micro-batch keeps per block on each rank (ptdp_gpt_block_act_elements): %.0f elements "
             "with SP, %.0f with TP alone (%.1f%%).", e_sp, e_tp, 100.0 * e_sp / e_tp);
    snprintf(buf[1], sizeof buf[1],
             "Measured in rank 0's arena (category acts): the %d-block forward kept %zu B with SP, %zu B with TP "
             "alone; one block more adds %zu B and %zu B", c->layers, v0->kept[0], t0->kept[0],
             v0->kept[1] - v0->kept[0], t0->kept[1] - t0->kept[0]);
    const bool exact = v0->kept[1] - v0->kept[0] == (size_t)(e_sp * sizeof(ptdp_real)) &&
                       t0->kept[1] - t0->kept[0] == (size_t)(e_tp * sizeof(ptdp_real));
    snprintf(buf[2], sizeof buf[2],
             "(the formula's %.0f B and %.0f B%s).  Everything a block keeps falls by tp: ln1 and ln2 are kept as "
             "shards, gathered again for c_attn's and c_fc's dW.", e_sp * sizeof(ptdp_real),
             e_tp * sizeof(ptdp_real), exact ? ", exactly" : ", each tensor rounded up to 64 B");
    /* SP's extra bytes: the ring all-reduce of the LayerNorms' gradients,
     * each device sending 2 (tp - 1) / tp of them, and the backward's
     * all-gather again of each kept LayerNorm shard (ln_1, ln_2 of every
     * block, ln_f), (tp - 1) / tp of B T C each */
    const double ln_elems = (4.0 * c->layers + 2) * C;
    const double ln_bytes = 2.0 * (TP - 1) / TP * ln_elems * sizeof(ptdp_real);
    const double regather = (2.0 * c->layers + 1) * (TP - 1) / TP * B * ptdp_gpt(c)->seq_len * C * sizeof(ptdp_real);
    const double more = comm[SP].sent - comm[TP_ALONE].sent;
    snprintf(buf[3], sizeof buf[3],
             "Rank 0 sends in one training step: %.0f B with --sp (%llu reduce-scatters, %llu all-gathers, %llu "
             "all-reduces), %.0f B without (%llu all-reduces):", comm[SP].sent, comm[SP].reduce_scatter,
             comm[SP].all_gather, comm[SP].all_reduce, comm[TP_ALONE].sent, comm[TP_ALONE].all_reduce);
    if (more == ln_bytes + regather)
        snprintf(buf[4], sizeof buf[4],
                 "an all-reduce is a reduce-scatter plus an all-gather; the %.0f B more are the all-reduce of the "
                 "LayerNorms' %.0f gradients and the %d shards gathered again (%.0f B).", more, ln_elems,
                 2 * c->layers + 1, regather);
    else
        snprintf(buf[4], sizeof buf[4],
                 "an all-reduce is a reduce-scatter plus an all-gather; the difference, %.0f B, is not the %.0f B of "
                 "the LayerNorms' gradient all-reduce and the %.0f B of the shards gathered again.", more, ln_bytes,
                 regather);
    lines(s, 20, foot + 20, (const char *const[]){ buf[0], buf[1], buf[2], buf[3], buf[4] }, 5);
}

static void draw(ptdp_svg *s, const sp_layout *a, const step_comm comm[2])
{
    const rank_view *v0 = &a->v[SP][0], *v1 = &a->v[SP][1];
    char p0[64], p1[64];
    snprintf(p0, sizeof p0, "rank 0: positions %d\u2013%d", v0->pos_first, v0->pos_last);
    snprintf(p1, sizeof p1, "rank 1: positions %d\u2013%d", v1->pos_first, v1->pos_last);
    draw_header(s, a);
    const double f1 = draw_attention_row(s, a, p0, p1);
    draw_caption(s, a, comm, draw_mlp_row(s, a, f1, p0, p1));
}

int fig_sp_block(const char *path, char *msg, size_t msglen)
{
    /* The default GPT on the built-in corpus, V from its tokens, as
     * `ptdp train --model gpt` sets it; B the default batch. */
    static sp_layout a;
    memset(&a, 0, sizeof a);
    a.cfg = ptdp_gpt_default_config();
    a.batch = ptdp_train_defaults().batch;
    a.seed = ptdp_train_defaults().seed;
    unsigned char *corpus = NULL;
    size_t len = ptdp_gpt_builtin_corpus(a.seed, PTDP_GPT_CORPUS_LINES, &corpus);
    const size_t TC = (size_t)ptdp_gpt(&a.cfg)->seq_len * a.cfg.hidden;
    a.x_whole = malloc(TC * sizeof *a.x_whole);
    for (int r = 0; r < TP; r++)
        a.x_sp[r] = malloc(TC / TP * sizeof *a.x_sp[r]);
    int err = 0;
    if (len == 0 || a.x_whole == NULL || a.x_sp[0] == NULL || a.x_sp[1] == NULL) {
        snprintf(msg, msglen, "out of host memory");
        err = PTDP_ENOMEM;
    }
    if (err == 0) {
        for (size_t i = 0; i < len; i++)
            if (corpus[i] + 1 > ptdp_gpt(&a.cfg)->vocab)
                ptdp_gpt(&a.cfg)->vocab = corpus[i] + 1;
        ptdp_gpt(&a.cfg)->corpus = corpus;
        ptdp_gpt(&a.cfg)->corpus_len = len;
        ptdp_launch_result lr;
        memset(&lr, 0, sizeof lr);
        ptdp_launch_opts o = { .watchdog_s = 60, .result = &lr };
        if ((err = ptdp_launch(TP, describe_device, &a, &o)) != 0)
            snprintf(msg, msglen, "building the tp = %d GPT and its forward failed: %s", TP, lr.message);
        ptdp_launch_result_free(&lr);
    }
    if (err == 0)
        err = check_layout(&a, msg, msglen);
    step_comm comm[2];
    memset(comm, 0, sizeof comm);
    if (err == 0)
        err = step_bytes(&a.cfg, false, &comm[TP_ALONE], msg, msglen);
    if (err == 0)
        err = step_bytes(&a.cfg, true, &comm[SP], msg, msglen);
    if (err == 0) {
        ptdp_svg s;
        ptdp_svg_begin(&s, 1310, 766);
        draw(&s, &a, comm);
        err = fig_finish(&s, path, msg, msglen);
    }
    free(corpus);
    free(a.x_whole);
    for (int r = 0; r < TP; r++)
        free(a.x_sp[r]);
    return err;
}
