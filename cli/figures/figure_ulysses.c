/*
 * figure_ulysses.c — ulysses.svg: Ulysses' two all-to-alls on N = 4.
 *
 * Context parallelism gives rank r positions r T/N .. (r+1) T/N - 1 of
 * every head.  Ulysses trades that for a head split around attention:
 *
 *      before (rank r)               all-to-all              during attention (rank r)
 *   [T/N positions, nh heads] ───────────────────────►  [T positions, nh/N heads]
 *                              block j: my positions,
 *                              rank j's heads
 *
 * and the same all-to-all the other way after it.  Here T = 8, nh = 4: a
 * rank holds 2 positions of 4 heads, then 8 positions of 1 head.  Each
 * cell is one (position, head); its colour is the head, its number the
 * position.  The layout is checked on 4 real devices: every rank packs
 * its cells (10 position + head) for ptdp_all_to_all, unpacks, and must
 * hold exactly the cells drawn on the right — and after the way back
 * exactly its own again; each all-to-all sends (N-1)/N of a rank's cells.
 *
 * Per block a rank sends 4 such all-to-alls (q, k, v there; attention's
 * output back), each (N-1)/N of its T/N x C values:
 *     4 (N-1)/N^2 T C       against ring attention's K and V, N-1 times:
 *     2 (N-1)/N   T C
 */
#include <stdio.h>
#include <string.h>

#include "figures.h"
#include "ptdp/comm.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/launch.h"

enum { N = 4, T = 8, NH = 4, TL = T / N, HL = NH / N };

static ptdp_real cell(int pos, int head)
{
    return (ptdp_real)(10 * pos + head);
}

/* ---- the re-layout on four real devices ------------------------------------ */

/* Block j of `packed` = my TL positions of rank j's HL heads; the
 * all-to-all; block i of `arrived` = rank i's positions of my heads. */
static int heads_from_sequence(ptdp_comm *c, const ptdp_real *x, ptdp_real *out)
{
    ptdp_real packed[TL * NH], arrived[TL * NH];
    for (int j = 0; j < N; j++)
        for (int t = 0; t < TL; t++)
            for (int h = 0; h < HL; h++)
                packed[(j * TL + t) * HL + h] = x[t * NH + j * HL + h];
    int rc = ptdp_all_to_all(c, packed, arrived, TL * HL, PTDP_REAL);
    for (int i = 0; rc == 0 && i < N; i++)
        memcpy(out + i * TL * HL, arrived + i * TL * HL, TL * HL * sizeof *out);
    return rc;
}

/* The way back: block j = rank j's positions of my heads; block i lands
 * in the columns of rank i's heads. */
static int sequence_from_heads(ptdp_comm *c, const ptdp_real *y, ptdp_real *back)
{
    ptdp_real arrived[TL * NH];
    int rc = ptdp_all_to_all(c, y, arrived, TL * HL, PTDP_REAL);
    for (int i = 0; rc == 0 && i < N; i++)
        for (int t = 0; t < TL; t++)
            for (int h = 0; h < HL; h++)
                back[t * NH + i * HL + h] = arrived[(i * TL + t) * HL + h];
    return rc;
}

static int ulysses_check_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    const int r = dev->rank;
    ptdp_real x[TL * NH], mid[T * HL], back[TL * NH];
    for (int t = 0; t < TL; t++)
        for (int h = 0; h < NH; h++)
            x[t * NH + h] = cell(r * TL + t, h);
    int rc = heads_from_sequence(dev->world, x, mid);
    for (int t = 0; rc == 0 && t < T; t++)
        for (int h = 0; h < HL; h++)
            if (mid[t * HL + h] != cell(t, r * HL + h))
                return ptdp_fail(dev, PTDP_ECHECK, "ulysses: rank %d holds %g where position %d of head %d "
                                 "belongs", r, (double)mid[t * HL + h], t, r * HL + h);
    if (rc == 0)
        rc = sequence_from_heads(dev->world, mid, back);
    if (rc == 0 && memcmp(back, x, sizeof x) != 0)
        return ptdp_fail(dev, PTDP_ECHECK, "ulysses: rank %d's positions did not come back", r);
    return rc;
}

/* 0 if the layouts hold on 4 devices; *sent = the bytes one rank sent in
 * the two all-to-alls (every rank the same). */
static int run_real_ulysses(double *sent, char *msg, size_t msglen)
{
    ptdp_launch_result lr;
    memset(&lr, 0, sizeof lr);
    ptdp_launch_opts o = { .watchdog_s = 30, .result = &lr };
    int err = ptdp_launch(N, ulysses_check_device, NULL, &o);
    if (err != 0)
        snprintf(msg, msglen, "Ulysses' re-layout on 4 devices failed: %s", lr.message);
    const double want = 2.0 * (N - 1) * TL * HL * sizeof(ptdp_real);
    for (int d = 0; d < N && err == 0; d++) {
        *sent = lr.devices[d].comm.bytes_sent[PTDP_COLL_ALL_TO_ALL];
        if (*sent != want) {
            snprintf(msg, msglen, "ulysses: device %d sent %.0f bytes, 2 x (N-1)/N of its cells = %.0f", d,
                     *sent, want);
            err = PTDP_ECHECK;
        }
    }
    ptdp_launch_result_free(&lr);
    return err;
}

/* ---- drawing ------------------------------------------------------------------ */

enum { CS = 26, GAP = 30, TOP = 96, LEFT = 24 };

static const char *head_color(int h)
{
    static const char *const c[NH] = { "#9ecae1", "#fdd0a2", "#c7e9c0", "#dadaeb" };
    return c[h % NH];
}

/* Rank r's cells: `rows` positions from `pos0`, the heads [h0, h0 + nh). */
static void draw_cells(ptdp_svg *s, double x, double y, int pos0, int rows, int h0, int nh)
{
    for (int t = 0; t < rows; t++)
        for (int h = 0; h < nh; h++) {
            double cx = x + h * CS, cy = y + t * CS;
            ptdp_svg_rect(s, cx, cy, CS, CS, head_color(h0 + h), "#555555");
            ptdp_svg_text(s, cx + CS / 2.0, cy + CS / 2.0 + 4, 11, PTDP_SVG_MIDDLE, NULL, "%d", pos0 + t);
        }
}

static void draw_column(ptdp_svg *s, double x, const char *title, bool by_heads)
{
    ptdp_svg_text(s, x, TOP - 16, 12, PTDP_SVG_BOLD, NULL, "%s", title);
    for (int r = 0; r < N; r++) {
        double y = TOP + r * (T * CS / 2.0 + GAP);
        ptdp_svg_text(s, x, y + 12, 11, PTDP_SVG_START, fig_rank_color(r), "rank %d", r);
        if (by_heads) {          /* 8 positions of one head, in two columns of 4 */
            draw_cells(s, x + 52, y, 0, T / 2, r * HL, HL);
            draw_cells(s, x + 52 + CS + 6, y, T / 2, T / 2, r * HL, HL);
        } else {
            draw_cells(s, x + 52, y, r * TL, TL, 0, NH);
        }
    }
}

static void draw_notes(ptdp_svg *s, double x, double y, double sent)
{
    const double line = 16;
    ptdp_svg_text(s, x, y, 12, PTDP_SVG_BOLD, NULL, "checked on 4 devices with ptdp_all_to_all:");
    ptdp_svg_text(s, x, y += line, 11, PTDP_SVG_START, NULL,
                  "every rank holds the cells drawn, and after the way back its own again;");
    ptdp_svg_text(s, x, y += line, 11, PTDP_SVG_START, NULL,
                  "each rank sent %.0f B in the two all-to-alls: 2 x (N\u22121)/N of its %d cells.", sent, TL * NH);
    ptdp_svg_text(s, x, y += line + 6, 12, PTDP_SVG_BOLD, NULL, "per block and rank (q, k, v there; y back):");
    ptdp_svg_text(s, x, y += line, 11, PTDP_SVG_START, NULL,
                  "Ulysses 4(N\u22121)/N\u00b2 T C  =  0.75 T C at N = 4;   ring attention's K and V: "
                  "2(N\u22121)/N T C = 1.5 T C.");
    ptdp_svg_text(s, x, y += line, 11, PTDP_SVG_START, NULL,
                  "The price: N must divide the heads (nh/tp with tensor parallelism).");
}

int fig_ulysses(const char *path, char *msg, size_t msglen)
{
    double sent = 0;
    int err = run_real_ulysses(&sent, msg, msglen);
    if (err != 0)
        return err;
    const double col = 52 + NH * CS + 70, rows_h = N * (T * CS / 2.0 + GAP);
    const double width = 2 * LEFT + 3 * col + 40, height = TOP + rows_h + 110;
    ptdp_svg s;
    ptdp_svg_begin(&s, width, height);
    ptdp_svg_text(&s, LEFT, 26, 17, PTDP_SVG_BOLD, NULL,
                  "Ulysses on cp = 4: trade the sequence split for a head split around attention");
    ptdp_svg_text(&s, LEFT, 46, 12, PTDP_SVG_START, "#333333",
                  "T = 8 positions, nh = 4 heads; a cell is one (position, head): its colour the head, its number "
                  "the position.");
    ptdp_svg_text(&s, LEFT, 63, 12, PTDP_SVG_START, "#333333",
                  "all-to-all: block j of rank r = its positions of rank j's heads; the way back is the same "
                  "exchange reversed.");
    draw_column(&s, LEFT, "before: T/N positions, all heads", false);
    draw_column(&s, LEFT + col + 20, "attention: all positions, nh/N heads", true);
    draw_column(&s, LEFT + 2 * (col + 20), "after: T/N positions, all heads", false);
    for (int k = 0; k < 2; k++) {
        double x0 = LEFT + k * (col + 20) + 52 + NH * CS + 8, xs[2] = { x0, x0 + 52 }, ys[2] = { TOP + 150, TOP + 150 };
        ptdp_svg_arrow(&s, xs, ys, 2, "#333333", 2, 8);
        ptdp_svg_text(&s, x0 + 26, TOP + 140, 11, PTDP_SVG_MIDDLE, NULL, "all-to-all");
    }
    draw_notes(&s, LEFT, TOP + rows_h + 10, sent);
    return fig_finish(&s, path, msg, msglen);
}
