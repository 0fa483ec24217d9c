/*
 * figure_zero.c — zero_ownership.svg: who holds which chunk under ZeRO, in bytes.
 *
 * Three real runs of ptdp_train, default model, AdamW, dp = N = 4, M = 2
 * micro-batches, 2 steps, one per --zero stage.  ZeRO cuts the flat buffers
 * into N chunks (ptdp_share) and DP rank k owns chunk k (zero.h):
 *
 *   per device, AdamW        params   grads                 optim
 *   plain DP (zero 0)        P        P                     2P
 *   zero 1                   P        P                     2P/N
 *   zero 2                   P        P/N  (+ P, comm)      2P/N
 *
 * The left half draws it, device by device and chunk by chunk: a chunk in
 * its owner's colour is the device's own (it updates it), a grey one a copy
 * it must hold whole, an empty one a chunk it does not hold.  The right half
 * prints each category's formula beside the peak the arena measured
 * (launch result, devices[].mem.peak), and the DP bytes per step beside
 * ptdp_zero_dp_bytes_per_step — stage 2 buys its gradient memory with
 * a reduce-scatter after every backward.  The full-size "comm" bucket that
 * stage 2 keeps while one backward runs is drawn too: in this
 * implementation it makes ZeRO-2's peak total higher than ZeRO-1's.
 *
 * The figure is refused (PTDP_ECHECK) if any device's measured peak of
 * params, grads, optim or comm is not the formula's, or the DP bytes are off.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "figures.h"
#include "ptdp/error.h"
#include "ptdp/launch.h"
#include "ptdp/models.h"
#include "ptdp/zero.h"

enum { N = 4, M = 2, STEPS = 2, STAGES = 3 };
enum { ROWS = 5 };   /* params, grads, optim m, optim v, comm */

typedef struct {
    ptdp_mem_stats mem[N];
    double dp_sent[N];        /* bytes sent in the DP group per step */
} zero_run;

static double group_sent(const ptdp_comm_stats *s, const char *name)
{
    for (int g = 0; g < s->ngroups; g++)
        if (strcmp(s->group[g].name, name) == 0)
            return s->group[g].sent;
    return 0;
}

static size_t model_numel(const ptdp_model_config *cfg)
{
    const ptdp_model_ops *ops = ptdp_model_of(cfg);
    ptdp_param_info info[128];
    int n = ops->list_params(cfg, NULL);
    if (n <= 0 || n > 128)
        return 0;
    ops->list_params(cfg, info);
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += (size_t)info[i].rows * (size_t)info[i].cols;
    return total;
}

static int run_stage(int stage, zero_run *out, char *msg, size_t msglen)
{
    ptdp_train_config c = ptdp_train_defaults();
    c.dp = N;
    c.micro_batches = M;
    c.steps = STEPS;
    c.zero = stage;
    ptdp_train_result res;
    ptdp_launch_result lr;
    memset(&res, 0, sizeof res);
    memset(&lr, 0, sizeof lr);
    char why[PTDP_MSG_MAX];
    ptdp_launch_opts o = { .watchdog_s = 60, .result = &lr };
    int err = ptdp_train(&c, &o, NULL, NULL, &res, why, sizeof why);
    if (err != 0)
        snprintf(msg, msglen, "training dp %d with --zero %d failed: %s", N, stage, why);
    for (int d = 0; d < N && err == 0; d++) {
        out->mem[d] = lr.devices[d].mem;
        out->dp_sent[d] = group_sent(&lr.devices[d].comm, "dp") / STEPS;
    }
    ptdp_train_result_free(&res);
    ptdp_launch_result_free(&lr);
    return err;
}

/* What zero.h says device k holds, in bytes, for each category: each state
 * whole, or the device's chunk of it where the stage's row shards it
 * (ptdp_zero_device_states, AdamW's two moments), and the full-size
 * gradient bucket of a row that keeps one while a backward runs. */
static void formula(int stage, size_t numel, int k, double bytes[PTDP_MEM_NCAT])
{
    const ptdp_zero_stage *row = ptdp_zero_stage_of(stage);
    size_t off, len;
    ptdp_share(numel, N, k, &off, &len);
    const ptdp_zero_bytes b = ptdp_zero_device_states(row, (double)numel, (double)len, ptdp_zero_sizes_of(false, 2));
    for (int c = 0; c < PTDP_MEM_NCAT; c++)
        bytes[c] = 0;
    bytes[PTDP_MEM_PARAMS] = b.params;
    bytes[PTDP_MEM_GRADS] = b.grads;
    bytes[PTDP_MEM_OPTIM] = b.optim;
    bytes[PTDP_MEM_COMM] = row->grad_bucket ? (double)numel * sizeof(ptdp_real) : 0;
}

static int check_stage(int stage, size_t numel, const zero_run *r, char *msg, size_t msglen)
{
    static const ptdp_mem_category checked[] = { PTDP_MEM_PARAMS, PTDP_MEM_GRADS, PTDP_MEM_OPTIM, PTDP_MEM_COMM };
    for (int k = 0; k < N; k++) {
        double want[PTDP_MEM_NCAT];
        formula(stage, numel, k, want);
        for (size_t i = 0; i < sizeof checked / sizeof checked[0]; i++) {
            ptdp_mem_category c = checked[i];
            if ((double)r->mem[k].peak[c] != want[c]) {
                snprintf(msg, msglen, "--zero %d, device %d: measured peak %s %zu B, the formula says %.0f B",
                         stage, k, ptdp_mem_category_name(c), r->mem[k].peak[c], want[c]);
                return PTDP_ECHECK;
            }
        }
        /* the gradient norm adds one all-reduce of one number over DP: a few bytes */
        double bytes = ptdp_zero_dp_bytes_per_step(stage, numel, N, M);
        if (fabs(r->dp_sent[k] - bytes) > 64) {
            snprintf(msg, msglen, "--zero %d, device %d: %.0f DP bytes per step, the formula says %.0f", stage, k,
                     r->dp_sent[k], bytes);
            return PTDP_ECHECK;
        }
    }
    return 0;
}

/* ---- drawing ------------------------------------------------------------------ */

enum {
    LABEL_X = 20, DEV_X = 96, BAR_W = 112, DEV_GAP = 16, BAR_H = 13, BAR_GAP = 4,
    TABLE_X = 616, STAGE_H = 142, STAGES_Y = 118
};

static const char *const comm_color = "#76b7b2";

typedef enum { HELD_OWN, HELD_COPY, NOT_HELD, WHOLE } cell_kind;

/* One buffer of one device: N chunk cells. */
static void buffer(ptdp_svg *s, double x, double y, const cell_kind *cells, const char *whole_color)
{
    const double w = (double)BAR_W / N;
    for (int c = 0; c < N; c++) {
        double cx = x + c * w;
        switch (cells[c]) {
        case HELD_OWN:  ptdp_svg_rect(s, cx, y, w, BAR_H, fig_rank_color(c), "white"); break;
        case HELD_COPY: ptdp_svg_rect(s, cx, y, w, BAR_H, "#d5d5d5", "white"); break;
        case WHOLE:     ptdp_svg_rect(s, cx, y, w, BAR_H, whole_color, "white"); break;
        case NOT_HELD: {
            double xs[5] = { cx + 0.5, cx + w - 0.5, cx + w - 0.5, cx + 0.5, cx + 0.5 };
            double ys[5] = { y + 0.5, y + 0.5, y + BAR_H - 0.5, y + BAR_H - 0.5, y + 0.5 };
            ptdp_svg_polyline(s, xs, ys, 5, "#bbbbbb", 1, "3 2");
            break;
        }
        }
    }
}

/* What device k holds of each row's buffer under `stage`: nothing owned
 * where the stage shards nothing (plain DP), else chunk k its own and the
 * others copies, or not held where the stage's row shards that state. */
static void cells_of(int stage, int row, int k, cell_kind *cells)
{
    const ptdp_zero_stage *z = ptdp_zero_stage_of(stage);
    for (int c = 0; c < N; c++) {
        if (!z->shards_optim) {
            cells[c] = row == 4 ? NOT_HELD : WHOLE;
            continue;
        }
        const cell_kind other_params = z->shards_params ? NOT_HELD : HELD_COPY;   /* all, after the all-gather */
        switch (row) {
        case 0: cells[c] = c == k ? HELD_OWN : other_params; break;                /* params */
        case 1: cells[c] = c == k ? HELD_OWN : z->shards_grads ? NOT_HELD : HELD_COPY; break;   /* grads */
        case 4: cells[c] = z->grad_bucket ? WHOLE : NOT_HELD; break;               /* the comm bucket */
        default: cells[c] = c == k ? HELD_OWN : NOT_HELD; break;                   /* optim m, v */
        }
    }
}

/* A row's rule as the figure sets it: "2(N-1)/N S" as "2(N\u22121)/N \u00b7 S"
 * (a minus sign, and a dot before S). */
static const char *typeset_rule(const char *rule, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = '\0';
    for (const char *p = rule; *p != '\0' && at < n; p++) {
        const char *glyph = *p == '-' ? "\u2212" : strcmp(p, " S") == 0 ? " \u00b7 " : (char[2]){ *p, '\0' };
        at += (size_t)snprintf(buf + at, n - at, "%s", glyph);
    }
    return buf;
}

/* One line of the table: what, its formula, the formula's bytes (none if
 * negative), the measured bytes. */
static void table_row(ptdp_svg *s, double y, const char *cat, const char *rule, double formula_bytes,
                      double measured, int how)
{
    char a[32], b[32];
    ptdp_svg_text(s, TABLE_X, y, 11.5, PTDP_SVG_START | how, NULL, "%s", cat);
    ptdp_svg_text(s, TABLE_X + 84, y, 11.5, PTDP_SVG_START | how, "#333333", "%s", rule);
    if (formula_bytes >= 0)
        ptdp_svg_text(s, TABLE_X + 250, y, 11.5, PTDP_SVG_END | how, "#333333", "%s",
                      ptdp_format_bytes(formula_bytes, a, sizeof a));
    ptdp_svg_text(s, TABLE_X + 336, y, 11.5, PTDP_SVG_END | PTDP_SVG_BOLD, NULL, "%s",
                  ptdp_format_bytes(measured, b, sizeof b));
}

static void draw_stage(ptdp_svg *s, int stage, size_t numel, const zero_run *r, double y)
{
    static const char *const title[STAGES] = {
        "plain DP (--zero 0): every device holds and updates everything",
        "ZeRO-1 (--zero 1): the optimizer state sharded",
        "ZeRO-2 (--zero 2): the gradients sharded too",
    };
    static const char *const row_name[ROWS] = { "params", "grads", "optim m", "optim v", "comm" };
    const ptdp_zero_stage *z = ptdp_zero_stage_of(stage);
    const char *const rules[4] = {   /* params, grads, optim, comm: whole, or 1/N where the row shards it */
        z->shards_params ? "P/N" : "P", z->shards_grads ? "P/N" : "P", z->shards_optim ? "2P/N" : "2P",
        z->grad_bucket ? "P (bucket)" : "\u2014",
    };
    ptdp_svg_text(s, LABEL_X, y, 13, PTDP_SVG_BOLD, NULL, "%s", title[stage]);
    const double by = y + 14;
    for (int row = 0; row < ROWS; row++) {
        double ry = by + row * (BAR_H + BAR_GAP);
        ptdp_svg_text(s, LABEL_X, ry + BAR_H - 2, 11, PTDP_SVG_START, "#333333", "%s", row_name[row]);
        for (int k = 0; k < N; k++) {
            cell_kind cells[N];
            cells_of(stage, row, k, cells);
            buffer(s, DEV_X + k * (BAR_W + DEV_GAP), ry, cells, row == 4 ? comm_color : "#9e9e9e");
        }
    }
    if (z->grad_bucket)
        ptdp_svg_text(s, DEV_X + N * (BAR_W + DEV_GAP) - 8, by + 4 * (BAR_H + BAR_GAP) + BAR_H + 14, 10,
                      PTDP_SVG_END, "#555555",
                      "comm: the full-size gradient one backward writes, reduce-scattered and freed after it");

    /* the table: device 0's formula and its measured peaks (every device's were checked) */
    double f[PTDP_MEM_NCAT];
    formula(stage, numel, 0, f);
    const ptdp_mem_stats *m = &r->mem[0];
    static const ptdp_mem_category cats[4] = { PTDP_MEM_PARAMS, PTDP_MEM_GRADS, PTDP_MEM_OPTIM, PTDP_MEM_COMM };
    for (int i = 0; i < 4; i++)
        table_row(s, by + 10 + i * 16, ptdp_mem_category_name(cats[i]), rules[i], f[cats[i]],
                  (double)m->peak[cats[i]], 0);
    table_row(s, by + 10 + 4 * 16, "total", "(with acts, data)", -1, (double)m->peak_total, PTDP_SVG_BOLD);
    ptdp_svg_line(s, TABLE_X, by + 10 + 4 * 16 + 6, TABLE_X + 336, by + 10 + 4 * 16 + 6, "#dddddd", 1, NULL);
    char rule[64];
    table_row(s, by + 10 + 5 * 16 + 6, "DP sent/step", typeset_rule(z->dp_rule, rule, sizeof rule),
              ptdp_zero_dp_bytes_per_step(stage, numel, N, M), r->dp_sent[0], 0);
}

int fig_zero_ownership(const char *path, char *msg, size_t msglen)
{
    ptdp_train_config c = ptdp_train_defaults();
    const size_t numel = model_numel(&c.model);
    if (numel == 0) {
        snprintf(msg, msglen, "cannot list the default model's parameters");
        return PTDP_ECHECK;
    }
    static zero_run runs[STAGES];
    for (int z = 0; z < STAGES; z++) {
        int err = run_stage(z, &runs[z], msg, msglen);
        if (err == 0)
            err = check_stage(z, numel, &runs[z], msg, msglen);
        if (err != 0)
            return err;
    }

    char p[32], q[32];
    ptdp_svg s;
    ptdp_svg_begin(&s, 980, STAGES_Y + STAGES * STAGE_H + 82);
    ptdp_svg_text(&s, 20, 26, 17, PTDP_SVG_BOLD, NULL,
                  "ZeRO on dp = N = %d: who holds which chunk, and the bytes each device keeps", N);
    ptdp_svg_text(&s, 20, 46, 12, PTDP_SVG_START, "#333333",
                  "Default model, P = %zu parameters = %s (%s), AdamW (m and v: 2P), M = %d micro-batches; "
                  "3 runs of ptdp_train, %d steps each.", numel,
                  ptdp_format_bytes((double)numel * sizeof(ptdp_real), p, sizeof p), PTDP_REAL_NAME, M, STEPS);

    /* legend and column heads */
    const double ly = 72;
    ptdp_svg_rect(&s, 20, ly - 10, 12, 12, fig_rank_color(0), NULL);
    ptdp_svg_rect(&s, 32, ly - 10, 12, 12, fig_rank_color(1), NULL);
    ptdp_svg_text(&s, 50, ly, 11, PTDP_SVG_START, NULL, "chunk k, owned and updated by dp rank k");
    ptdp_svg_rect(&s, 290, ly - 10, 12, 12, "#d5d5d5", NULL);
    ptdp_svg_text(&s, 308, ly, 11, PTDP_SVG_START, NULL, "held whole, not owned");
    {
        double xs[5] = { 440.5, 451.5, 451.5, 440.5, 440.5 }, ys[5] = { ly - 9.5, ly - 9.5, ly + 1.5, ly + 1.5, ly - 9.5 };
        ptdp_svg_polyline(&s, xs, ys, 5, "#bbbbbb", 1, "3 2");
    }
    ptdp_svg_text(&s, 458, ly, 11, PTDP_SVG_START, NULL, "not held");
    ptdp_svg_rect(&s, 520, ly - 10, 12, 12, "#9e9e9e", NULL);
    ptdp_svg_text(&s, 538, ly, 11, PTDP_SVG_START, NULL, "whole, no owner");
    for (int k = 0; k < N; k++)
        ptdp_svg_text(&s, DEV_X + k * (BAR_W + DEV_GAP) + BAR_W / 2.0, STAGES_Y - 14, 11,
                      PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, fig_rank_color(k), "device %d (dp rank %d)", k, k);
    ptdp_svg_text(&s, TABLE_X, STAGES_Y - 14, 11, PTDP_SVG_BOLD, NULL, "device 0");
    ptdp_svg_text(&s, TABLE_X + 84, STAGES_Y - 14, 11, PTDP_SVG_BOLD, NULL, "formula (zero.h)");
    ptdp_svg_text(&s, TABLE_X + 336, STAGES_Y - 14, 11, PTDP_SVG_END | PTDP_SVG_BOLD, NULL, "measured");

    for (int z = 0; z < STAGES; z++) {
        double y = STAGES_Y + 8 + z * STAGE_H;
        if (z > 0)
            ptdp_svg_line(&s, 20, y - 22, 960, y - 22, "#dddddd", 1, NULL);
        draw_stage(&s, z, numel, &runs[z], y);
    }
    const double ny = STAGES_Y + STAGES * STAGE_H + 8;
    ptdp_svg_text(&s, 20, ny, 12, PTDP_SVG_START, "#333333",
                  "Measured by each device's arena: the high-water mark of each category (device 0 shown; all %d "
                  "devices were checked against the formula).", N);
    ptdp_svg_text(&s, 20, ny + 18, 12, PTDP_SVG_START, "#333333",
                  "ZeRO-1 costs no extra bytes (S = P, the gradient): an all-reduce is a reduce-scatter then an "
                  "all-gather, and the update moves in between.");
    /* the bucket's price, as measured: compare the two stages' peak totals */
    const double t1 = (double)runs[1].mem[0].peak_total, t2 = (double)runs[2].mem[0].peak_total;
    ptdp_svg_text(&s, 20, ny + 36, 12, PTDP_SVG_START, "#333333",
                  "ZeRO-2 reduce-scatters after each of the M backwards, and keeps a full-size bucket while one "
                  "runs: its peak total, %s, is", ptdp_format_bytes(t2, p, sizeof p));
    ptdp_svg_text(&s, 20, ny + 54, 12, PTDP_SVG_START, "#333333",
                  "%s ZeRO-1's %s here.  A backward that reduce-scattered layer by layer would shrink the bucket "
                  "to one layer (zero.h).", t2 > t1 ? "above" : t2 < t1 ? "below" : "equal to",
                  ptdp_format_bytes(t1, q, sizeof q));
    return fig_finish(&s, path, msg, msglen);
}
