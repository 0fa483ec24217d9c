/*
 * figure_ring_attention.c — ring_attention.svg: which key/value block each
 * rank of a CP group holds at each ring step, and which (query chunk, key
 * chunk) pairs it computes, for the zigzag and the contiguous layouts (cp.h).
 *
 * N = 4 ranks, T = 32 positions.  Zigzag cuts the sequence into 2N = 8
 * chunks of 4 and gives rank r chunks r and 7 - r; contiguous gives rank r
 * the chunk r of 8.  At step s rank r holds the block of rank r - s (mod N),
 * and for each pair (my query chunk q, visiting key chunk k):
 *
 *   k starts after q's last position    skipped: wholly in the future
 *   k overlaps q's positions            computed with the causal mask (the diagonal)
 *   otherwise                           computed in full
 *
 *               step 0         step 1         step 2         step 3
 *   rank 0    kv0: 0, 7      kv3: 3, 4      kv2: 2, 5      kv1: 1, 6
 *             q0 [◣][ ]      q0 [ ][ ]      q0 [ ][ ]      q0 [ ][ ]
 *             q7 [■][◣]      q7 [■][■]      q7 [■][■]      q7 [■][■]
 *
 * Everything is taken from the library: the chunks from ptdp_cp_layout_of,
 * the owner of a block from the ring's rule, the skip from cp.c's test.
 * Each computed pair costs len x len score elements (masked or not); the
 * figure is refused (PTDP_ECHECK, no file) unless each rank's sum over its
 * cells equals ptdp_ring_attention_scores, in both layouts.  Then a real
 * 4-device ptdp_ring_attention_forward runs in each layout and the bytes
 * each device sent must be N - 1 passes of its B T/N 2C block.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "figures.h"
#include "ptdp/coll.h"
#include "ptdp/comm.h"
#include "ptdp/cp.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/launch.h"
#include "ptdp/tensor.h"

enum { N = 4, T = 32 };
/* the real run: B sequences, C = HEADS x HD channels */
enum { RB = 2, HEADS = 2, HD = 4, C = HEADS * HD };

/* ---- the cells, from the library -------------------------------------------- */

typedef enum { PAIR_SKIPPED, PAIR_MASKED, PAIR_FULL } pair_kind;

/* cp.h's rule (ptdp_cp_in_future): key chunk from kfirst against the query chunk [qfirst, qfirst + len). */
static pair_kind kind_of(int qfirst, int kfirst, int len)
{
    if (ptdp_cp_in_future(qfirst, kfirst, len))   /* wholly in the future: skipped */
        return PAIR_SKIPPED;
    if (kfirst + len - 1 > qfirst)          /* some key after some query: causal mask */
        return PAIR_MASKED;
    return PAIR_FULL;
}

typedef struct {
    ptdp_cp_layout q, k;                    /* my queries, the visiting block */
    int owner;                              /* the block's rank: r - step */
    pair_kind kind[2][2];                   /* [query chunk][key chunk] */
    double scores;                          /* score elements computed */
} cell;

typedef struct {
    bool zigzag;
    cell cells[N][N];                       /* [rank][step] */
    double total[N];                        /* per rank, summed over the cells */
    double library[N];                      /* ptdp_ring_attention_scores */
} layout_grid;

static int build_grid(layout_grid *g, bool zigzag, char *msg, size_t msglen)
{
    memset(g, 0, sizeof *g);
    g->zigzag = zigzag;
    for (int r = 0; r < N; r++) {
        for (int step = 0; step < N; step++) {
            cell *c = &g->cells[r][step];
            c->owner = (r - step + N) % N;
            c->q = ptdp_cp_layout_of(T, N, r, zigzag);
            c->k = ptdp_cp_layout_of(T, N, c->owner, zigzag);
            for (int i = 0; i < c->q.nshares; i++)
                for (int j = 0; j < c->k.nshares; j++) {
                    c->kind[i][j] = kind_of(c->q.first[i], c->k.first[j], c->q.len);
                    if (c->kind[i][j] != PAIR_SKIPPED)
                        c->scores += (double)c->q.len * c->k.len;
                }
            g->total[r] += c->scores;
        }
        g->library[r] = ptdp_ring_attention_scores(T, N, r, zigzag);
        if (g->total[r] != g->library[r]) {
            snprintf(msg, msglen, "%s layout, rank %d: the cells count %.0f score elements, "
                     "ptdp_ring_attention_scores says %.0f", zigzag ? "zigzag" : "contiguous", r,
                     g->total[r], g->library[r]);
            return PTDP_ECHECK;
        }
    }
    return 0;
}

/* ---- a real ring: the bytes each device sends --------------------------------- */

typedef struct { bool zigzag; } ring_arg;

static int ring_device(ptdp_device *dev, void *arg)
{
    const ring_arg *a = arg;
    const int Tl = T / N;
    ptdp_tensor qkv, y;
    int err = ptdp_tensor_alloc(dev, &qkv, "figure.cp.qkv", PTDP_MEM_ACTS, RB * Tl, 3 * C);
    if (err == 0)
        err = ptdp_tensor_alloc(dev, &y, "figure.cp.y", PTDP_MEM_ACTS, RB * Tl, C);
    if (err != 0)
        return err;
    ptdp_real *lse = ptdp_alloc(dev, sizeof(ptdp_real) * RB * HEADS * Tl, PTDP_MEM_ACTS, "figure.cp.lse");
    if (lse == NULL)
        return PTDP_ENOMEM;
    for (int i = 0; i < qkv.rows; i++)
        for (int j = 0; j < qkv.cols; j++)
            *ptdp_at(qkv, i, j) = (ptdp_real)((i * 7 + j * 3 + dev->rank) % 11) / 11;
    err = ptdp_ring_attention_forward(dev, dev->world, y, lse, qkv, T, HEADS, HD, a->zigzag, NULL);
    ptdp_free(dev, lse);
    ptdp_tensor_free(dev, &y);
    ptdp_tensor_free(dev, &qkv);
    return err;
}

/* *sent = the bytes each device sent in one forward (all equal, or refused). */
static int run_real_ring(bool zigzag, double *sent, char *msg, size_t msglen)
{
    ring_arg a = { zigzag };
    ptdp_launch_result lr;
    memset(&lr, 0, sizeof lr);
    ptdp_launch_opts o = { .watchdog_s = 30, .result = &lr };
    int err = ptdp_launch(N, ring_device, &a, &o);
    if (err != 0)
        snprintf(msg, msglen, "the 4-device ring attention failed: %s", lr.message);
    const double want = (N - 1) * (double)RB * (T / N) * 2 * C * sizeof(ptdp_real);
    for (int d = 0; d < N && err == 0; d++) {
        *sent = lr.devices[d].comm.bytes_sent[PTDP_COLL_SEND];
        if (*sent != want) {
            snprintf(msg, msglen, "ring attention (%s): device %d sent %.0f B, (N-1) B T/N 2C reals = %.0f B",
                     zigzag ? "zigzag" : "contiguous", d, *sent, want);
            err = PTDP_ECHECK;
        }
    }
    ptdp_launch_result_free(&lr);
    return err;
}

/* ---- drawing ------------------------------------------------------------------ */

#define FULL_FILL    "#3182bd"
#define MASKED_FILL  "#fd8d3c"
#define SKIPPED_FILL "#f0f0f0"
#define EDGE         "#888888"

enum { MARGIN = 20, LW = 120, SQ = 22 };

/* One pair's square at (x, y): full, the lower triangle (keys up to the
 * query) for the diagonal, or empty grey. */
static void pair_square(ptdp_svg *s, double x, double y, pair_kind k)
{
    ptdp_svg_rect(s, x, y, SQ, SQ, k == PAIR_FULL ? FULL_FILL : k == PAIR_MASKED ? "#ffffff" : SKIPPED_FILL,
                  NULL);
    if (k == PAIR_MASKED) {
        const double xs[] = { x, x, x + SQ }, ys[] = { y, y + SQ, y + SQ };
        ptdp_svg_polygon(s, xs, ys, 3, MASKED_FILL);
    }
    ptdp_svg_rect(s, x, y, SQ, SQ, "none", EDGE);
}

static void share_list(const ptdp_cp_layout *l, char *buf, size_t len)
{
    if (l->nshares == 1)
        snprintf(buf, len, "chunk %d", l->first[0] / l->len);
    else
        snprintf(buf, len, "chunks %d, %d", l->first[0] / l->len, l->first[1] / l->len);
}

static int count_kind(const cell *c, pair_kind k)
{
    int n = 0;
    for (int i = 0; i < c->q.nshares; i++)
        for (int j = 0; j < c->k.nshares; j++)
            n += c->kind[i][j] == k;
    return n;
}

/* One cell at (x, y): the block's owner and chunks, the pairs, the count. */
static void draw_cell(ptdp_svg *s, const cell *c, double x, double y, double w, double h)
{
    char shares[32];
    share_list(&c->k, shares, sizeof shares);
    ptdp_svg_rect(s, x, y, w, h, "#ffffff", "#cccccc");
    ptdp_svg_rect(s, x, y, 5, h, fig_rank_color(c->owner), NULL);
    ptdp_svg_text(s, x + 12, y + 16, 11, PTDP_SVG_START, NULL, "kv of rank %d: %s", c->owner, shares);
    const double gx = x + 36, gy = y + 32;
    for (int j = 0; j < c->k.nshares; j++)
        ptdp_svg_text(s, gx + j * SQ + SQ / 2.0, gy - 4, 9, PTDP_SVG_MIDDLE, "#555555", "k%d",
                      c->k.first[j] / c->k.len);
    for (int i = 0; i < c->q.nshares; i++) {
        ptdp_svg_text(s, gx - 5, gy + i * SQ + 15, 9, PTDP_SVG_END, "#555555", "q%d", c->q.first[i] / c->q.len);
        for (int j = 0; j < c->k.nshares; j++)
            pair_square(s, gx + j * SQ, gy + i * SQ, c->kind[i][j]);
    }
    const double tx = gx + c->k.nshares * SQ + 10;
    const int full = count_kind(c, PAIR_FULL), masked = count_kind(c, PAIR_MASKED);
    const int skipped = count_kind(c, PAIR_SKIPPED);
    if (c->q.nshares * c->k.nshares == 1) {
        ptdp_svg_text(s, tx, gy + 10, 10, PTDP_SVG_START, "#333333", "%s",
                      full ? "full" : masked ? "masked" : "skipped");
        ptdp_svg_text(s, tx, gy + 23, 10, PTDP_SVG_START, "#333333", "%.0f scores", c->scores);
    } else {
        ptdp_svg_text(s, tx, gy + 8, 10, PTDP_SVG_START, "#333333", "%d full, %d masked", full, masked);
        ptdp_svg_text(s, tx, gy + 21, 10, PTDP_SVG_START, "#333333", "%d skipped", skipped);
        ptdp_svg_text(s, tx, gy + 38, 10, PTDP_SVG_START | PTDP_SVG_BOLD, "#333333", "%.0f scores", c->scores);
    }
}

/* The grid of one layout with its top-left at (x, y); returns its height. */
static double draw_grid(ptdp_svg *s, const layout_grid *g, double x, double y, double cw, double ch)
{
    const double top = y + 18, tx = x + LW + N * cw + 14;
    for (int step = 0; step < N; step++)
        ptdp_svg_text(s, x + LW + step * cw + cw / 2, y + 8, 12, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, NULL,
                      "step %d", step);
    ptdp_svg_text(s, tx, y + 8, 12, PTDP_SVG_BOLD, NULL, "scores per rank");
    for (int r = 0; r < N; r++) {
        const double ry = top + r * ch;
        char shares[32];
        share_list(&g->cells[r][0].q, shares, sizeof shares);
        ptdp_svg_text(s, x, ry + ch / 2 - 4, 13, PTDP_SVG_BOLD, fig_rank_color(r), "rank %d", r);
        ptdp_svg_text(s, x, ry + ch / 2 + 12, 10, PTDP_SVG_START, "#333333", "queries: %s", shares);
        for (int step = 0; step < N; step++)
            draw_cell(s, &g->cells[r][step], x + LW + step * cw + 2, ry + 2, cw - 4, ch - 4);
        ptdp_svg_text(s, tx, ry + ch / 2 + 4, 13, PTDP_SVG_BOLD, NULL, "%.0f", g->total[r]);
        ptdp_svg_text(s, tx + 40, ry + ch / 2 + 4, 11, PTDP_SVG_START, "#333333", "= %.4g \u00d7 rank 0",
                      g->total[r] / g->total[0]);
    }
    return 18 + N * ch;
}

static void legend(ptdp_svg *s, double x, double y)
{
    static const struct { pair_kind k; const char *what; } items[] = {
        { PAIR_FULL, "computed in full" },
        { PAIR_MASKED, "computed with the causal mask (the diagonal pair)" },
        { PAIR_SKIPPED, "skipped: the key chunk is wholly in the query chunk's future" },
    };
    for (int i = 0; i < 3; i++) {
        static const double at[] = { 0, 150, 480 };
        pair_square(s, x + at[i], y, items[i].k);
        ptdp_svg_text(s, x + at[i] + SQ + 6, y + 15, 11, PTDP_SVG_START, NULL, "%s", items[i].what);
    }
}

int fig_ring_attention(const char *path, char *msg, size_t msglen)
{
    static layout_grid zig, con;
    int err = build_grid(&zig, true, msg, msglen);
    if (err == 0)
        err = build_grid(&con, false, msg, msglen);
    double sent_zig = 0, sent_con = 0;
    if (err == 0)
        err = run_real_ring(true, &sent_zig, msg, msglen);
    if (err == 0)
        err = run_real_ring(false, &sent_con, msg, msglen);
    if (err != 0)
        return err;

    const double zcw = 200, zch = 86, ccw = 160, cch = 66;
    const double width = 2 * MARGIN + LW + N * zcw + 170;
    const double zy = 150, cy = zy + 18 + N * zch + 56, capy = cy + 18 + N * cch + 34;
    const double height = capy + 5 * 17 + 10;
    ptdp_svg s;
    ptdp_svg_begin(&s, width, height);
    ptdp_svg_text(&s, MARGIN, 26, 17, PTDP_SVG_BOLD, NULL,
                  "Ring attention on N = 4 ranks, T = %d: the key/value blocks travel, the queries stay", T);
    ptdp_svg_text(&s, MARGIN, 46, 12, PTDP_SVG_START, "#333333",
                  "At step s rank r holds the block of rank r \u2212 s (mod 4) and computes its (query chunk, "
                  "key chunk) pairs; then every rank passes the block to r + 1.");
    ptdp_svg_text(&s, MARGIN, 63, 12, PTDP_SVG_START, "#333333",
                  "In each cell: rows q are the rank's query chunks, columns k the visiting key chunks; the "
                  "bar on the left is the colour of the block's owner.");
    legend(&s, MARGIN, 78);

    ptdp_svg_text(&s, MARGIN, zy - 18, 14, PTDP_SVG_BOLD, "#08519c",
                  "zigzag: %d chunks of %d positions, rank r holds chunks r and %d \u2212 r",
                  2 * N, zig.cells[0][0].q.len, 2 * N - 1);
    draw_grid(&s, &zig, MARGIN, zy, zcw, zch);

    ptdp_svg_text(&s, MARGIN, cy - 18, 14, PTDP_SVG_BOLD, "#08519c",
                  "contiguous: %d chunks of %d positions, rank r holds chunk r", N, con.cells[0][0].q.len);
    draw_grid(&s, &con, MARGIN, cy, ccw, cch);

    char zl[96], cl[96];
    snprintf(zl, sizeof zl, "%.0f, %.0f, %.0f, %.0f", zig.total[0], zig.total[1], zig.total[2], zig.total[3]);
    snprintf(cl, sizeof cl, "%.0f, %.0f, %.0f, %.0f", con.total[0], con.total[1], con.total[2], con.total[3]);
    const double per_step = (double)RB * (T / N) * 2 * C * sizeof(ptdp_real);
    ptdp_svg_text(&s, MARGIN, capy, 12, PTDP_SVG_BOLD, NULL,
                  "Work per rank: zigzag %s, equal on every rank; contiguous %s = %.4g, %.4g, %.4g, %.4g "
                  "times rank 0's.", zl, cl, con.total[0] / con.total[0], con.total[1] / con.total[0],
                  con.total[2] / con.total[0], con.total[3] / con.total[0]);
    ptdp_svg_text(&s, MARGIN, capy + 17, 12, PTDP_SVG_START, "#333333",
                  "Score elements of one sequence and head, summed over the cells (a computed pair costs "
                  "len \u00d7 len, masked or not); each equals ptdp_ring_attention_scores: checked, or no figure.");
    ptdp_svg_text(&s, MARGIN, capy + 34, 12, PTDP_SVG_START, "#333333",
                  "Both layouts move the same bytes: measured in a real 4-device ptdp_ring_attention_forward "
                  "(B = %d, C = %d, %zu-byte reals), each step sends B T/N 2C per rank,", RB, C,
                  sizeof(ptdp_real));
    ptdp_svg_text(&s, MARGIN, capy + 51, 12, PTDP_SVG_START, "#333333",
                  "%d \u00d7 %d \u00d7 %d = %d reals = %.0f B, over N \u2212 1 = %d passes: %.0f B sent per rank "
                  "(zigzag), %.0f B (contiguous).", RB, T / N, 2 * C, RB * (T / N) * 2 * C, per_step, N - 1,
                  sent_zig, sent_con);
    ptdp_svg_text(&s, MARGIN, capy + 68, 12, PTDP_SVG_START, "#333333",
                  "Zigzag pairs an early chunk with a late one, so every rank has %d computed pairs of %d "
                  "positions; contiguous: rank 0 computes %d pair of %d positions, rank 3 computes %d.",
                  (int)(zig.total[0] / (zig.cells[0][0].q.len * zig.cells[0][0].q.len)),
                  zig.cells[0][0].q.len, (int)(con.total[0] / (con.cells[0][0].q.len * con.cells[0][0].q.len)),
                  con.cells[0][0].q.len, (int)(con.total[N - 1] / (con.cells[0][0].q.len * con.cells[0][0].q.len)));
    return fig_finish(&s, path, msg, msglen);
}
