/*
 * gpt_figure_attention.c — attention_tp.svg: how tensor parallelism cuts a GPT's
 * attention and its vocabulary (lesson 07).
 *
 * Two devices build a tp = 2 mesh and the default GPT with ptdp_model_init,
 * as `ptdp train --model gpt --tp 2` does, and report, for every element of
 * their shards, where it sits in the whole tensor (ptdp_param_whole_index):
 *
 *   attn.c_attn.weight [3C, C]   rows, by head: rank r owns the q, k and v
 *                                rows of heads [r nh/tp, (r+1) nh/tp) —
 *                                three slices, one in each C-row block
 *   attn.c_attn.bias   [3C]      the same entries
 *   attn.c_proj.weight [C, C]    columns: the same heads' inputs
 *   wte                [V_pad, C]  rows (vocab-parallel), padding rows marked;
 *                                built twice: --vocab-multiple 64 (the
 *                                default) and 8
 *
 * The figure is refused (PTDP_ECHECK) unless the shards cover each tensor
 * exactly once: every element held by one rank, none by two, none by none.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../figures/figures.h"
#include "gpt_figures.h"
#include "ptdp/error.h"
#include "ptdp/gpt.h"
#include "ptdp/launch.h"
#include "ptdp/mesh.h"
#include "ptdp/model.h"
#include "ptdp/models.h"

enum { TP = 2, MAX_ELEMS = 1 << 15, SMALL_MULTIPLE = 8 };
enum { ATTN_W, ATTN_B, PROJ_W, WTE, NTENSORS };
static const char *const tensor_names[NTENSORS] = {
    "transformer.h.0.attn.c_attn.weight", "transformer.h.0.attn.c_attn.bias",
    "transformer.h.0.attn.c_proj.weight", "transformer.wte.weight",
};

typedef struct {
    int full_rows, full_cols;
    unsigned char held[TP][MAX_ELEMS];   /* held[r][whole index]: rank r has it */
} coverage;

typedef struct {
    ptdp_model_config cfg;
    coverage t[NTENSORS];
    size_t numel[TP];                    /* parameters each rank holds */
} attn_layout;

/* ---- ask a real tp = 2 GPT --------------------------------------------------- */

static int describe_device(ptdp_device *dev, void *arg)
{
    attn_layout *a = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    int rc = ptdp_mesh_init(dev, 1, TP, 1, &mesh);
    if (rc != 0)
        return rc;
    if ((rc = ptdp_model_init(dev, &m, &a->cfg, &mesh, NULL, 1, 0.0)) != 0) {
        ptdp_mesh_free(&mesh);
        return rc;
    }
    const int r = mesh.tp_rank;
    for (int k = 0; k < NTENSORS && rc == 0; k++) {
        const ptdp_param *p = ptdp_model_find(&m, tensor_names[k]);
        if (p == NULL) {
            rc = ptdp_fail(dev, PTDP_EINVAL, "attention figure: the GPT has no %s", tensor_names[k]);
            break;
        }
        coverage *c = &a->t[k];
        if ((size_t)p->full_rows * (size_t)p->full_cols > MAX_ELEMS) {
            rc = ptdp_fail(dev, PTDP_EINVAL, "attention figure: %s is %d x %d, more than %d elements",
                           p->name, p->full_rows, p->full_cols, MAX_ELEMS);
            break;
        }
        c->full_rows = p->full_rows;
        c->full_cols = p->full_cols;
        for (int i = 0; i < p->w.rows; i++)
            for (int j = 0; j < p->w.cols; j++) {
                size_t at = ptdp_param_whole_index(p, i, j);
                if (at < MAX_ELEMS)
                    c->held[r][at]++;
            }
    }
    a->numel[r] = m.numel;
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return rc;
}

/* Every element of the whole tensor held by exactly one rank. */
static int check_cover(const coverage *c, const char *name, char *msg, size_t msglen)
{
    size_t n = (size_t)c->full_rows * (size_t)c->full_cols;
    for (size_t i = 0; i < n; i++) {
        int holders = 0;
        for (int r = 0; r < TP; r++)
            holders += c->held[r][i];
        if (holders != 1) {
            snprintf(msg, msglen, "%s: element (%zu, %zu) of the whole %d x %d is held %d times, not once",
                     name, i / (size_t)c->full_cols, i % (size_t)c->full_cols, c->full_rows, c->full_cols,
                     holders);
            return PTDP_ECHECK;
        }
    }
    return 0;
}

/* The rank holding element (i, j) (after check_cover: exactly one). */
static int owner(const coverage *c, int i, int j)
{
    size_t at = (size_t)i * (size_t)c->full_cols + (size_t)j;
    for (int r = 0; r < TP; r++)
        if (c->held[r][at])
            return r;
    return -1;
}

static int build(attn_layout *a, int vocab_multiple, char *msg, size_t msglen)
{
    ptdp_gpt(&a->cfg)->vocab_multiple = vocab_multiple;
    ptdp_launch_result lr;
    memset(&lr, 0, sizeof lr);
    ptdp_launch_opts o = { .watchdog_s = 30, .result = &lr };
    int err = ptdp_launch(TP, describe_device, a, &o);
    if (err != 0)
        snprintf(msg, msglen, "building the tp = %d GPT (--vocab-multiple %d) failed: %s", TP, vocab_multiple,
                 lr.message);
    ptdp_launch_result_free(&lr);
    for (int k = 0; k < NTENSORS && err == 0; k++)
        err = check_cover(&a->t[k], tensor_names[k], msg, msglen);
    return err;
}

/* ---- drawing ----------------------------------------------------------------- */

/* A run [first, last] of rows (or columns) held by one rank. */
typedef struct {
    int first, last, rank;
} run;

/* The runs of the rows (by_rows) or columns of c, by owner; at most max. */
static int runs_of(const coverage *c, bool by_rows, run *out, int max)
{
    int n = 0, len = by_rows ? c->full_rows : c->full_cols;
    for (int i = 0; i < len; i++) {
        int r = by_rows ? owner(c, i, 0) : owner(c, 0, i);
        if (n > 0 && out[n - 1].rank == r && out[n - 1].last == i - 1)
            out[n - 1].last = i;
        else if (n < max)
            out[n++] = (run){ i, i, r };
    }
    return n;
}

static void stripes(ptdp_svg *s, double x, double y, double w, double h)
{
    if (h < 6) {   /* a row or two: one line through them */
        ptdp_svg_line(s, x, y + h / 2, x + w, y + h / 2, "white", 1.0, NULL);
        return;
    }
    for (double yy = y + 2; yy < y + h; yy += 4)
        ptdp_svg_line(s, x, yy, x + w, yy, "white", 1.6, NULL);
}

/* c_attn.weight (rows by head in three blocks) and its bias beside it. */
static void draw_c_attn(ptdp_svg *s, const attn_layout *a, double x, double y, double scale)
{
    const coverage *w = &a->t[ATTN_W], *b = &a->t[ATTN_B];
    const int C = a->cfg.hidden, hd = C / ptdp_gpt(&a->cfg)->heads;
    const double W = w->full_cols * scale;
    run rw[16], rb[16];
    int nw = runs_of(w, true, rw, 16), nb = runs_of(b, false, rb, 16);
    ptdp_svg_text(s, x + W / 2, y - 8, 11, PTDP_SVG_MIDDLE, "#333333", "C = %d", w->full_cols);
    ptdp_svg_text(s, x + W + 10, y - 8, 11, PTDP_SVG_MIDDLE, "#333333", "bias");
    for (int k = 0; k < nw; k++) {
        const run *q = &rw[k];
        double ry = y + q->first * scale, rh = (q->last - q->first + 1) * scale;
        int block = q->first / C, h0 = (q->first % C) / hd, h1 = (q->last % C) / hd;
        ptdp_svg_rect(s, x, ry, W, rh, fig_rank_color(q->rank), "white");
        ptdp_svg_text(s, x + W + 24, ry + rh / 2 - 2, 11, PTDP_SVG_START, NULL, "rank %d \u00b7 %c rows %d\u2013%d",
                      q->rank, "qkv"[block < 3 ? block : 0], q->first, q->last);
        ptdp_svg_text(s, x + W + 24, ry + rh / 2 + 12, 11, PTDP_SVG_START, "#555555", "heads %d\u2013%d", h0, h1);
    }
    for (int k = 0; k < nb; k++) {
        const run *q = &rb[k];
        ptdp_svg_rect(s, x + W + 6, y + q->first * scale, 8, (q->last - q->first + 1) * scale,
                      fig_rank_color(q->rank), "white");
    }
    for (int block = 0; block < 3; block++) {
        ptdp_svg_text(s, x - 8, y + (block + 0.5) * C * scale + 5, 14, PTDP_SVG_END | PTDP_SVG_BOLD, NULL, "%c",
                      "qkv"[block]);
        if (block > 0)
            ptdp_svg_line(s, x - 14, y + block * C * scale, x + W + 16, y + block * C * scale, "#222222", 1.5,
                          "4 3");
    }
}

/* c_proj.weight: columns by head. */
static void draw_c_proj(ptdp_svg *s, const attn_layout *a, double x, double y, double scale)
{
    const coverage *p = &a->t[PROJ_W];
    const int hd = a->cfg.hidden / ptdp_gpt(&a->cfg)->heads;
    run rc[16];
    int n = runs_of(p, false, rc, 16);
    const double H = p->full_rows * scale;
    ptdp_svg_text(s, x + p->full_cols * scale / 2, y - 8, 11, PTDP_SVG_MIDDLE, "#333333", "C = %d (inputs: y, the heads side by side)",
                  p->full_cols);
    ptdp_svg_text(s, x - 8, y + H / 2 + 4, 11, PTDP_SVG_END, "#333333", "C = %d", p->full_rows);
    for (int k = 0; k < n; k++) {
        const run *q = &rc[k];
        double cx = x + q->first * scale, cw = (q->last - q->first + 1) * scale;
        ptdp_svg_rect(s, cx, y, cw, H, fig_rank_color(q->rank), "white");
        ptdp_svg_text(s, cx + cw / 2, y + H / 2 - 10, 12, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, "white", "rank %d", q->rank);
        ptdp_svg_text(s, cx + cw / 2, y + H / 2 + 5, 11, PTDP_SVG_MIDDLE, "white", "cols %d\u2013%d", q->first,
                      q->last);
        ptdp_svg_text(s, cx + cw / 2, y + H / 2 + 19, 11, PTDP_SVG_MIDDLE, "white", "heads %d\u2013%d",
                      q->first / hd, q->last / hd);
    }
}

/* wte: rows by rank, the padding rows (>= V) striped. */
static void draw_wte(ptdp_svg *s, const coverage *w, int vocab, int multiple, double x, double y, double scale)
{
    run rr[16];
    int n = runs_of(w, true, rr, 16);
    const double W = w->full_cols * 0.75;
    ptdp_svg_text(s, x, y - 24, 12, PTDP_SVG_BOLD, NULL, "--vocab-multiple %d", multiple);
    ptdp_svg_text(s, x, y - 8, 11, PTDP_SVG_START, "#333333", "V_pad = %d", w->full_rows);
    for (int k = 0; k < n; k++) {
        const run *q = &rr[k];
        double ry = y + q->first * scale, rh = (q->last - q->first + 1) * scale;
        ptdp_svg_rect(s, x, ry, W, rh, fig_rank_color(q->rank), "white");
        if (q->last >= vocab) {
            int p0 = q->first > vocab ? q->first : vocab;
            stripes(s, x, y + p0 * scale, W, (q->last - p0 + 1) * scale);
        }
        ptdp_svg_text(s, x + W + 8, ry + 12, 11, PTDP_SVG_START, NULL, "rank %d", q->rank);
        ptdp_svg_text(s, x + W + 8, ry + 26, 11, PTDP_SVG_START, "#555555", "rows %d\u2013%d", q->first, q->last);
        if (q->last >= vocab) {
            int p0 = q->first > vocab ? q->first : vocab;
            ptdp_svg_text(s, x + W + 8, ry + 40, 11, PTDP_SVG_START, "#555555", "padding %d\u2013%d", p0, q->last);
        }
    }
    ptdp_svg_line(s, x - 6, y + vocab * scale, x + W + 6, y + vocab * scale, "#222222", 1.5, "4 3");
    ptdp_svg_text(s, x - 8, y + vocab * scale + 4, 10, PTDP_SVG_END, "#333333", "V = %d", vocab);
}

static void lines(ptdp_svg *s, double x, double y, const char *const *text, int n)
{
    for (int i = 0; i < n; i++)
        ptdp_svg_text(s, x, y + 16 * i, 11.5, PTDP_SVG_START, "#333333", "%s", text[i]);
}

/* The default GPT on the built-in corpus, V from its tokens, as `ptdp
 * train --model gpt` sets it, built at tp = 2 twice: at its default
 * --vocab-multiple (big) and at SMALL_MULTIPLE (small). */
static int build_both(attn_layout *big, attn_layout *small, char *msg, size_t msglen)
{
    memset(big, 0, sizeof *big);
    memset(small, 0, sizeof *small);
    ptdp_model_config cfg = ptdp_gpt_default_config();
    unsigned char *corpus = NULL;
    size_t len = ptdp_gpt_builtin_corpus(ptdp_train_defaults().seed, PTDP_GPT_CORPUS_LINES, &corpus);
    if (len == 0) {
        free(corpus);
        snprintf(msg, msglen, "out of host memory making the built-in corpus");
        return PTDP_ENOMEM;
    }
    for (size_t i = 0; i < len; i++)
        if (corpus[i] + 1 > ptdp_gpt(&cfg)->vocab)
            ptdp_gpt(&cfg)->vocab = corpus[i] + 1;
    ptdp_gpt(&cfg)->corpus = corpus;
    ptdp_gpt(&cfg)->corpus_len = len;
    big->cfg = small->cfg = cfg;
    int err = build(big, ptdp_gpt(&cfg)->vocab_multiple, msg, msglen);
    if (err == 0)
        err = build(small, SMALL_MULTIPLE, msg, msglen);
    free(corpus);
    return err;
}

/* The middle column: c_proj's columns, and what the split costs in
 * all-reduces. */
static void draw_proj_panel(ptdp_svg *s, const attn_layout *a, double px, double top)
{
    const int C = a->cfg.hidden;
    ptdp_svg_text(s, px, top - 52, 13, PTDP_SVG_BOLD, NULL, "attn.c_proj.weight [%d \u00d7 %d]", C, C);
    ptdp_svg_text(s, px, top - 36, 12, PTDP_SVG_START, "#08519c", "row-parallel: the same heads' columns");
    draw_c_proj(s, a, px + 40, top, 2.0);
    static const char *const text[6] = {
        "Rank r attends with its own heads' q, k, v:",
        "no communication.  Its y_r \u00b7 P_r\u1d40 is a partial",
        "sum: one all-reduce (g), then the bias, once.",
        "Per block: 2 all-reduces forward (attention",
        "and MLP c_proj), 2 backward (f before c_attn",
        "and c_fc); +1 embedding forward, +1 head backward.",
    };
    lines(s, px, top + C * 2.0 + 28, text, 6);
}

/* The notes under the figure: how V_pad is chosen, which ranks hold only
 * padding, the vocab-parallel lookup, the parameters per device. */
static void draw_vocab_notes(ptdp_svg *s, const attn_layout *big, const attn_layout *small, double foot)
{
    const int V = ptdp_gpt(&big->cfg)->vocab, default_multiple = ptdp_gpt(&big->cfg)->vocab_multiple;
    const int vp_big = big->t[WTE].full_rows, vp_small = small->t[WTE].full_rows;
    char buf[4][200];
    snprintf(buf[0], sizeof buf[0],
             "V_pad is the smallest multiple of --vocab-multiple \u00d7 tp that is \u2265 V (ptdp_gpt_pad_vocab): "
             "%d \u00d7 %d \u2192 %d, %d padding rows; %d \u00d7 %d \u2192 %d, %d padding rows.",
             default_multiple, TP, vp_big, vp_big - V, SMALL_MULTIPLE, TP, vp_small, vp_small - V);
    /* ranks whose rows are all padding, at the default multiple */
    int only_padding = 0, first_only = -1;
    for (int r = 0; r < TP; r++)
        if (r * (vp_big / TP) >= V) {
            only_padding++;
            first_only = first_only < 0 ? r : first_only;
        }
    if (only_padding > 0)
        snprintf(buf[1], sizeof buf[1],
                 "At --vocab-multiple %d, rank%s %d%s hold%s padding only: rows no token names (initialised, "
                 "trained, in the softmax).", default_multiple, only_padding == 1 ? "" : "s", first_only,
                 only_padding == 1 ? "" : "–last", only_padding == 1 ? "s" : "");
    else
        snprintf(buf[1], sizeof buf[1],
                 "Padding rows are rows no token names (initialised, trained, in the softmax).");
    snprintf(buf[2], sizeof buf[2],
             "The lookup: rank r adds wte[token] if r V_pad/tp \u2264 token < (r+1) V_pad/tp, zeros otherwise; one "
             "all-reduce sums the ranks.");
    snprintf(buf[3], sizeof buf[3],
             "Per device: %zu of the model's parameters at --vocab-multiple %d, %zu at %d.", big->numel[0],
             default_multiple, small->numel[0], SMALL_MULTIPLE);
    lines(s, 20, foot, (const char *const[]){ buf[0], buf[1], buf[2], buf[3] }, 4);
}

int fig_attention_tp(const char *path, char *msg, size_t msglen)
{
    static attn_layout big, small;   /* ~0.5 MiB each: off the stack */
    int err = build_both(&big, &small, msg, msglen);
    if (err != 0)
        return err;

    const ptdp_model_config *cfg = &big.cfg;
    const int C = cfg->hidden, nh = ptdp_gpt(cfg)->heads, hd = C / nh, V = ptdp_gpt(cfg)->vocab;
    const double top = 150, scale = 1.5;
    const double height = top + 3 * C * scale + 36 + 4 * 16 + 8;
    ptdp_svg s;
    ptdp_svg_begin(&s, 1060, height);
    ptdp_svg_text(&s, 20, 26, 17, PTDP_SVG_BOLD, NULL,
                  "Tensor parallelism in attention, tp = %d: the heads split, and the vocabulary", TP);
    ptdp_svg_text(&s, 20, 46, 12, PTDP_SVG_START, "#333333",
                  "Read from the shards ptdp_model_init gives each rank of the default GPT (C = %d, nh = %d heads "
                  "of hd = %d, V = %d tokens);", C, nh, hd, V);
    ptdp_svg_text(&s, 20, 62, 12, PTDP_SVG_START, "#333333",
                  "block 0 shown, every block is cut the same way.  Each tensor checked: every element held by "
                  "exactly one rank.");

    /* c_attn */
    ptdp_svg_text(&s, 20, top - 52, 13, PTDP_SVG_BOLD, NULL, "attn.c_attn.weight [%d \u00d7 %d]", 3 * C, C);
    ptdp_svg_text(&s, 20, top - 36, 12, PTDP_SVG_START, "#08519c", "column-parallel, by head: q, k and v rows");
    draw_c_attn(&s, &big, 50, top, scale);

    /* c_proj */
    draw_proj_panel(&s, &big, 400, top);

    /* wte, twice */
    const double wx = 680;
    ptdp_svg_text(&s, wx, top - 52, 13, PTDP_SVG_BOLD, NULL, "transformer.wte.weight [V_pad \u00d7 %d]", C);
    ptdp_svg_text(&s, wx, top - 36, 12, PTDP_SVG_START, "#08519c", "vocab-parallel rows; striped: padding");
    draw_wte(&s, &big.t[WTE], V, ptdp_gpt(cfg)->vocab_multiple, wx + 40, top + 14, 1.5);
    draw_wte(&s, &small.t[WTE], V, SMALL_MULTIPLE, wx + 240, top + 14, 1.5);

    draw_vocab_notes(&s, &big, &small, top + 3 * C * scale + 36);
    return fig_finish(&s, path, msg, msglen);
}
