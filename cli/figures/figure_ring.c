/*
 * figure_ring.c — ring_allreduce.svg: the ring all-reduce, step by step.
 *
 * N = 4 devices, each buffer cut into N chunks a, b, c, d.  The picture
 * follows the chunk-index formula of src/allreduce_ring.c, played on sets
 * of contributions instead of numbers:
 *
 *   reduce-scatter step s = 0..N-2:  rank r sends chunk (r - s - 1) mod N
 *                                     to r + 1, which ADDS its own part
 *   all-gather     step s = 0..N-2:  rank r sends chunk (r - s) mod N
 *                                     to r + 1, which COPIES it
 *
 *        start              reduce-scatter step 1         …  after 2(N-1) steps
 *   dev 0  a0 b0 c0 d0      dev 0  a0 b0 c0 d0+d3            every device holds
 *   dev 1  a1 b1 c1 d1      dev 1  a0+a1 b1 c1 d1            a0+a1+a2+a3, b…, c…, d…
 *     …                       …
 *
 * A set of contributions is a bitmask (bit k = device k's part is in the
 * sum).  Device k contributing the number 2^k to a real ring all-reduce
 * makes the arithmetic spell out the same bitmask, so the figure's states
 * are checked against ptdp_all_reduce_algo(..., PTDP_ALGO_RING) on four
 * real devices: every element must equal the formula's mask (15 at the end),
 * and each device's sent bytes must equal 2(N-1)/N * S.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "figures.h"
#include "ptdp/comm.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/tensor.h"
#include "ptdp/launch.h"

enum { N = 4, STEPS = 2 * (N - 1), COUNT = 1024 };

static int mod(int a, int n)
{
    return ((a % n) + n) % n;
}

/* ---- the ring, played on sets of contributions ------------------------------ */

typedef struct {
    unsigned holds[N][N];   /* holds[d][c]: whose parts device d's chunk c sums */
    int sent[N];            /* the chunk device r sent to r + 1; -1 at the start */
} ring_state;

static void ring_start(ring_state *st)
{
    for (int d = 0; d < N; d++) {
        st->sent[d] = -1;
        for (int c = 0; c < N; c++)
            st->holds[d][c] = 1u << d;
    }
}

/* Step k = 0 .. 2(N-1)-1 of the whole all-reduce: the formula of
 * allreduce_ring.c, every device at once, reading the state before the step. */
static void ring_step(const ring_state *before, int k, ring_state *after)
{
    const int reduce = k < N - 1, s = reduce ? k : k - (N - 1);
    *after = *before;
    for (int r = 0; r < N; r++) {
        int segment = reduce ? mod(r - s - 1, N) : mod(r - s, N), right = mod(r + 1, N);
        after->sent[r] = segment;
        after->holds[right][segment] = reduce ? before->holds[right][segment] | before->holds[r][segment]
                                            : before->holds[r][segment];
    }
}

/* ---- the same on four real devices ---------------------------------------- */

typedef struct {
    const ring_state *half, *end;   /* after the reduce-scatter; at the end */
} ring_check;

static int expect(ptdp_device *dev, const char *what, const ptdp_real *x, size_t n, int segment,
                  unsigned mask)
{
    for (size_t i = 0; i < n; i++)
        if (x[i] != (ptdp_real)mask)
            return ptdp_fail(dev, PTDP_ECHECK, "ring %s: device %d, chunk %c, element %zu holds %g "
                             "but the ring formula says %u", what, dev->rank, 'a' + segment, i,
                             (double)x[i], mask);
    return 0;
}

/* Device d contributes 2^d everywhere; after the reduce-scatter its chunk d
 * must hold the formula's half-way mask, after the all-reduce every chunk
 * the final one. */
static int ring_check_device(ptdp_device *dev, void *arg)
{
    const ring_check *rc = arg;
    ptdp_real *buf = ptdp_alloc(dev, COUNT * sizeof(ptdp_real), PTDP_MEM_COMM, "figure.ring.buf");
    ptdp_real *mine = ptdp_alloc(dev, COUNT / N * sizeof(ptdp_real), PTDP_MEM_COMM, "figure.ring.chunk");
    if (buf == NULL || mine == NULL)
        return PTDP_ENOMEM;
    for (size_t i = 0; i < COUNT; i++)
        buf[i] = (ptdp_real)(1u << dev->rank);

    int err = ptdp_reduce_scatter(dev->world, buf, mine, COUNT, PTDP_REAL, PTDP_SUM);
    if (err == 0)
        err = expect(dev, "reduce-scatter", mine, COUNT / N, dev->rank,
                     rc->half->holds[dev->rank][dev->rank]);
    if (err == 0)
        err = ptdp_all_reduce_algo(dev->world, buf, buf, COUNT, PTDP_REAL, PTDP_SUM, PTDP_ALGO_RING);
    for (int c = 0; c < N && err == 0; c++)
        err = expect(dev, "all-reduce", buf + c * (COUNT / N), COUNT / N, c, rc->end->holds[dev->rank][c]);
    ptdp_free(dev, mine);
    ptdp_free(dev, buf);
    return err;
}

/* Run the check; *sent = bytes each device sent in the all-reduce (they
 * must all be equal, and equal 2(N-1)/N * S). */
static int run_real_ring(const ring_state *half, const ring_state *end, double *sent,
                         char *msg, size_t msglen)
{
    ring_check rc = { half, end };
    ptdp_launch_result lr;
    memset(&lr, 0, sizeof lr);
    ptdp_launch_opts o = { .algo = PTDP_ALGO_RING, .watchdog_s = 30, .result = &lr };
    int err = ptdp_launch(N, ring_check_device, &rc, &o);
    if (err != 0)
        snprintf(msg, msglen, "the 4-device ring all-reduce failed: %s", lr.message);
    const double S = COUNT * (double)sizeof(ptdp_real), want = 2.0 * (N - 1) / N * S;
    for (int d = 0; d < N && err == 0; d++) {
        *sent = lr.devices[d].comm.bytes_sent[PTDP_COLL_ALL_REDUCE];
        if (*sent != want) {
            snprintf(msg, msglen, "ring all-reduce: device %d sent %.0f bytes, 2(N-1)/N * S = %.0f",
                     d, *sent, want);
            err = PTDP_ECHECK;
        }
    }
    ptdp_launch_result_free(&lr);
    return err;
}

/* ---- drawing ------------------------------------------------------------------ */

enum {
    LW = 50,            /* device labels                         */
    CW = 74, CH = 24,   /* one chunk cell                        */
    RG = 18,            /* gap between device rows (the arrows)   */
    TOP0 = 42,          /* first row, inside a panel              */
    PW = LW + N * CW + 24, PH = TOP0 + N * (CH + RG) + 4,
    MARGIN = 20, COLGAP = 36, PANELS_Y = 100
};

static double cell_x(int c) { return LW + c * CW; }
static double row_y(int d)  { return TOP0 + d * (CH + RG); }

static int popcount(unsigned m)
{
    int n = 0;
    for (; m; m >>= 1)
        n += (int)(m & 1u);
    return n;
}

/* Shades of one blue: the more parts a chunk sums, the darker. */
static const char *fill_of(int parts)
{
    static const char *const shade[] = { "#ffffff", "#deebf7", "#9ecae1", "#4a90c8", "#08519c" };
    return shade[parts < 0 ? 0 : parts > N ? N : parts];
}

/* "a1+a2+a3": the parts in the order the ring adds them, starting at the
 * device after the chunk's number; "Σa" once all N are in. */
static void label_of(unsigned mask, int segment, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    if (mask == (1u << N) - 1) {
        snprintf(buf, len, "\u03a3%c", 'a' + segment);
        return;
    }
    for (int k = 0; k < N; k++) {
        int d = mod(segment + 1 + k, N);
        if (mask & (1u << d))
            at += (size_t)snprintf(buf + at, len - at, "%s%c%d", at ? "+" : "", 'a' + segment, d);
    }
}

static void outline(ptdp_svg *s, double x, double y, double w, double h)
{
    double xs[5] = { x, x + w, x + w, x, x }, ys[5] = { y, y, y + h, y + h, y };
    ptdp_svg_polyline(s, xs, ys, 5, "#111111", 2.5, NULL);
}

/* An arrow for each device's send: down to the next row, and from the last
 * row around the right side back to the first. */
static void send_arrows(ptdp_svg *s, const ring_state *st)
{
    for (int r = 0; r < N; r++) {
        double cx = cell_x(st->sent[r]) + CW / 2.0, bottom = row_y(r) + CH;
        if (r < N - 1) {
            double xs[2] = { cx, cx }, ys[2] = { bottom + 1, row_y(r + 1) - 1 };
            ptdp_svg_arrow(s, xs, ys, 2, "#333333", 1.5, 6);
        } else {
            double side = cell_x(N) + 12, over = row_y(0) - 8, under = bottom + 8;
            double xs[6] = { cx, cx, side, side, cx, cx };
            double ys[6] = { bottom + 1, under, under, over, over, row_y(0) - 1 };
            ptdp_svg_arrow(s, xs, ys, 6, "#333333", 1.5, 6);
        }
    }
}

static void draw_panel(ptdp_svg *s, const ring_state *st, int step, double x, double y)
{
    ptdp_svg_group_begin(s, NULL, x, y);
    if (step == 0) {
        ptdp_svg_text(s, 0, 12, 12, PTDP_SVG_BOLD, NULL,
                      "start: device k holds its own parts ak, bk, ck, dk");
    } else {
        /* the chunk is (r - shift) mod N: shift s + 1 in the reduce-scatter, s in the all-gather */
        int reduce = step <= N - 1, shift = reduce ? step : step - N;
        char segment[16] = "r";
        if (shift > 0)
            snprintf(segment, sizeof segment, "r\u2212%d", shift);
        ptdp_svg_text(s, 0, 12, 12, PTDP_SVG_BOLD, NULL, "step %d: device r sends chunk %s, the receiver %s",
                      step, segment, reduce ? "adds" : "copies");
    }
    for (int c = 0; c < N; c++)
        ptdp_svg_text(s, cell_x(c) + CW / 2.0, 30, 11, PTDP_SVG_MIDDLE, "#666666", "chunk %c", 'a' + c);

    for (int d = 0; d < N; d++) {
        ptdp_svg_rect(s, 0, row_y(d) + 7, 10, 10, fig_rank_color(d), NULL);
        ptdp_svg_text(s, 14, row_y(d) + 16, 11, PTDP_SVG_START, NULL, "dev %d", d);
        for (int c = 0; c < N; c++) {
            int parts = popcount(st->holds[d][c]);
            char label[64];
            label_of(st->holds[d][c], c, label, sizeof label);
            ptdp_svg_rect(s, cell_x(c) + 2, row_y(d), CW - 4, CH, fill_of(parts), "#8aa9c6");
            ptdp_svg_text(s, cell_x(c) + CW / 2.0, row_y(d) + 16, 10.5, PTDP_SVG_MIDDLE,
                          parts >= 3 ? "white" : "#111111", "%s", label);
        }
    }
    if (step > 0) {
        for (int r = 0; r < N; r++)
            outline(s, cell_x(st->sent[r]) + 2, row_y(mod(r + 1, N)), CW - 4, CH);
        send_arrows(s, st);
    }
    ptdp_svg_group_end(s);
}

/* The fourth slot of the right column: the legend and what was measured. */
static void draw_notes(ptdp_svg *s, double x, double y, double sent)
{
    const double S = COUNT * (double)sizeof(ptdp_real);
    ptdp_svg_group_begin(s, "notes", x, y);
    ptdp_svg_text(s, 0, 12, 12, PTDP_SVG_BOLD, NULL, "colour = how many parts a chunk sums");
    for (int p = 1; p <= N; p++) {
        ptdp_svg_rect(s, (p - 1) * 84, 22, 18, 14, fill_of(p), "#8aa9c6");
        ptdp_svg_text(s, (p - 1) * 84 + 22, 33, 11, PTDP_SVG_START, NULL, "%d", p);
    }
    ptdp_svg_text(s, 0, 60, 11, PTDP_SVG_START, NULL, "\u03a3a = a0+a1+a2+a3: chunk a complete");
    outline(s, 1, 70, 18, 14);
    ptdp_svg_text(s, 26, 81, 11, PTDP_SVG_START, NULL, "received in this step");

    static const double line = 16;
    double ty = 104;
    ptdp_svg_text(s, 0, ty, 12, PTDP_SVG_BOLD, NULL, "bytes: 2(N\u22121)/N \u00b7 S per device");
    ptdp_svg_text(s, 0, ty += line, 11, PTDP_SVG_START, NULL,
                  "one chunk of S/N per step, 2(N\u22121) steps: for N = 4,");
    ptdp_svg_text(s, 0, ty += line, 11, PTDP_SVG_START, NULL,
                  "2\u00b73/4 \u00b7 S = 1.5 S, and never more than 2 S for any N.");
    ptdp_svg_text(s, 0, ty += line, 11, PTDP_SVG_START, NULL,
                  "measured: each device sent %.0f B of S = %.0f B.", sent, S);
    ptdp_svg_text(s, 0, ty += line + 6, 12, PTDP_SVG_BOLD, NULL,
                  "checked against a real 4-device ring all-reduce:");
    ptdp_svg_text(s, 0, ty += line, 11, PTDP_SVG_START, NULL,
                  "device d contributes 2^d, so a sum spells its parts in bits;");
    ptdp_svg_text(s, 0, ty += line, 11, PTDP_SVG_START, NULL,
                  "every element ends as 15 = 1+2+4+8 on every device.");
    ptdp_svg_group_end(s);
}

int fig_ring_allreduce(const char *path, char *msg, size_t msglen)
{
    ring_state st[STEPS + 1];
    ring_start(&st[0]);
    for (int k = 0; k < STEPS; k++)
        ring_step(&st[k], k, &st[k + 1]);
    for (int d = 0; d < N; d++)
        for (int c = 0; c < N; c++)
            if (st[STEPS].holds[d][c] != (1u << N) - 1) {
                snprintf(msg, msglen, "the ring formula left device %d's chunk %c incomplete", d, 'a' + c);
                return PTDP_ECHECK;
            }
    double sent = 0;
    int err = run_real_ring(&st[N - 1], &st[STEPS], &sent, msg, msglen);
    if (err != 0)
        return err;

    const double width = 2 * MARGIN + 2 * PW + COLGAP, height = PANELS_Y + N * PH + 10;
    ptdp_svg s;
    ptdp_svg_begin(&s, width, height);
    ptdp_svg_text(&s, MARGIN, 26, 17, PTDP_SVG_BOLD, NULL,
                  "Ring all-reduce on N = 4 devices: reduce-scatter, then all-gather");
    ptdp_svg_text(&s, MARGIN, 46, 12, PTDP_SVG_START, "#333333",
                  "Each buffer is cut into 4 chunks a..d; \u201ca1+a2\u201d is the sum of device 1's and "
                  "device 2's parts of chunk a.");
    ptdp_svg_text(&s, MARGIN, 63, 12, PTDP_SVG_START, "#333333",
                  "Arrows: what every device sends to its right neighbour r+1 (mod 4) at the same time.");
    const double right = MARGIN + PW + COLGAP;
    ptdp_svg_text(&s, MARGIN, 88, 14, PTDP_SVG_BOLD, "#08519c",
                  "reduce-scatter: N\u22121 = 3 steps");
    ptdp_svg_text(&s, right, 88, 14, PTDP_SVG_BOLD, "#08519c", "all-gather: N\u22121 = 3 steps");
    ptdp_svg_line(&s, right - COLGAP / 2.0, 76, right - COLGAP / 2.0, height - 10, "#cccccc", 1, NULL);

    for (int k = 0; k <= STEPS; k++) {
        int col = k < N ? 0 : 1, row = k < N ? k : k - N;
        draw_panel(&s, &st[k], k, col ? right : MARGIN, PANELS_Y + row * PH);
    }
    draw_notes(&s, right, PANELS_Y + (N - 1) * PH, sent);
    return fig_finish(&s, path, msg, msglen);
}
