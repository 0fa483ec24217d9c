/*
 * figure_hsdp.c — hsdp.svg: one step of ZeRO-3, of HSDP and of ZeRO++'s
 * hpZ, qwZ and qgZ on 2 nodes of 4 devices, each collective drawn on the link
 * it uses, with the bytes a device sent in it.
 *
 * ZeRO-3 over dp = 8 cuts every state in 8 and gathers and reduce-scatters
 * over all 8 ranks, so every one of its collectives spans both nodes and
 * is priced at InfiniBand's speed.  HSDP with shard groups of N = 4 (one
 * node each) runs the same ZeRO-3 inside the node, and sums each shard
 * across the R = 2 replicas — the only traffic that leaves a node:
 *
 *     ZeRO-3                                 HSDP, --shard-group 4
 *     ┌ node 0 ───────┐ ┌ node 1 ───────┐    ┌ node 0 ───────┐ ┌ node 1 ───────┐
 *     │ 0   1   2   3 │ │ 4   5   6   7 │    │ 0   1   2   3 │ │ 4   5   6   7 │
 *     └───────────────┘ └───────────────┘    └─┬─┬─┬─┬───────┘ └─┬─┬─┬─┬───────┘
 *     ═══ one group of 8: 2 gathers +           ═ shard groups (NVLink):  │ │ │ │ replica groups
 *         1 reduce-scatter, 3(N-1)/N S            2 gathers + 1 reduce-    all-reduce of a
 *                                                 scatter, 3(N-1)/N S      shard, 2(R-1)/(RN) S
 *
 * Below them ZeRO++ keeps one group of 8 and cuts what crosses the nodes
 * otherwise: hpZ (--zero-hpz, on a profile of 4 GPUs a node) keeps 1/4 of
 * each unit the forward gathered and gathers the backward's inside the
 * node — 2(N-1)/N S across, (k-1)/k S inside; qwZ (--zero-qwz) sends the
 * forward's gather as INT8 blocks — (N-1)/N (2S + W), W the padded INT8
 * wires a gather puts in the all-gathers; qgZ (--zero-qgz) replaces the
 * gradient's reduce-scatter by two all-to-alls of INT4 codes, inside the
 * node (k-1) m X, then across (m-1) X — X a device's slots of codes and
 * block scales (zero3_qgz.c), m = 2 nodes of k = 4.
 *
 * (S the gradient's bytes, M = 1 micro-batch.)  The bytes are measured:
 * five real one-step runs of ptdp_train with --zero 3 (plain, --shard-group
 * 4, hpZ, qwZ, qgZ), each device's bytes by group (the run's communication
 * statistics); the figure is refused (PTDP_ECHECK) if any differs from its
 * formula by more than the step's few scalars (the norm's, the loss's).  Which link a group
 * uses follows from its members and nodes of 4 (world rank r in node r / 4,
 * as the clock's cluster profiles place them).
 */
#include <stdio.h>
#include <string.h>

#include "figures.h"
#include "ptdp/error.h"
#include "ptdp/launch.h"
#include "ptdp/models.h"
#include "ptdp/train.h"

enum { DP = 8, NODE = 4, SHARD = 4, R = DP / SHARD };

typedef struct {
    const char *model;        /* the default model's name (models.h) */
    double S;                 /* a device's gradient bytes */
    double dp[DP];            /* ZeRO-3: bytes each device sent in the DP group */
    double shard[DP], replica[DP];   /* HSDP: in its shard and replica groups */
    double hpz_dp[DP], hpz_node[DP]; /* hpZ: across (the DP group) and inside (the hpz group) */
    double qwz_dp[DP], qwz_W[DP];    /* qwZ: the DP group's bytes; the INT8 wires W of a gather */
    double qgz_dp[DP], qgz_node[DP], qgz_cross[DP], qgz_X[DP];   /* qgZ: the gathers' group, its two
                                                                all-to-alls' groups, a device's slots X */
} hsdp_bytes;

static double sent_in(const ptdp_comm_stats *s, const char *group)
{
    for (int g = 0; g < s->ngroups; g++)
        if (strcmp(s->group[g].name, group) == 0)
            return s->group[g].sent;
    return 0;
}

/* The five runs. */
typedef enum { RUN_ZERO3, RUN_HSDP, RUN_HPZ, RUN_QWZ, RUN_QGZ } run_kind;

static void keep_bytes(run_kind k, const ptdp_launch_result *lr, const ptdp_train_result *tr, int r, hsdp_bytes *b)
{
    const ptdp_comm_stats *s = &lr->devices[r].comm;
    const double *W = ptdp_train_device_counts(tr, r, "qwz_gather_bytes");
    const double *X = ptdp_train_device_counts(tr, r, "qgz_slot_bytes");
    switch (k) {
    case RUN_ZERO3: b->dp[r] = sent_in(s, "dp"); break;
    case RUN_HSDP:  b->shard[r] = sent_in(s, "shard"), b->replica[r] = sent_in(s, "replica"); break;
    case RUN_HPZ:   b->hpz_dp[r] = sent_in(s, "dp"), b->hpz_node[r] = sent_in(s, "hpz"); break;
    case RUN_QWZ:   b->qwz_dp[r] = sent_in(s, "dp"), b->qwz_W[r] = W != NULL ? W[0] : 0; break;
    case RUN_QGZ:
        b->qgz_dp[r] = sent_in(s, "dp"), b->qgz_node[r] = sent_in(s, "qgz_node");
        b->qgz_cross[r] = sent_in(s, "qgz_cross"), b->qgz_X[r] = X != NULL ? X[0] : 0;
        break;
    }
}

/* One step of ptdp train's default model at dp 8, ZeRO-3, as run k; each
 * device's bytes by group into b. */
static int one_step(run_kind k, hsdp_bytes *b, char *msg, size_t msglen)
{
    ptdp_train_config c = ptdp_train_defaults();
    c.dp = DP;
    c.zero = 3;
    c.shard_group = k == RUN_HSDP ? SHARD : 0;
    c.zero_hpz = k == RUN_HPZ ? NODE : 0;     /* the DP ranks of a node of 4 */
    c.zero_qwz = k == RUN_QWZ ? 2048 : 0;     /* ZeRO++'s block */
    if (k == RUN_QGZ) {   /* INT4 codes, blocks of 2048, nodes of 4 DP ranks */
        c.zero_qgz = 4;
        c.zero_qgz_block = 2048;
        c.zero_qgz_node = NODE;
    }
    c.steps = 1;
    c.batch = 64;
    ptdp_launch_result lr;
    ptdp_train_result tr;
    memset(&lr, 0, sizeof lr);
    memset(&tr, 0, sizeof tr);
    const ptdp_launch_opts o = { .watchdog_s = 60, .result = &lr,
                                 .profile = k == RUN_HPZ || k == RUN_QGZ ? ptdp_profile_find("hgx-a100-4") : NULL };
    char why[PTDP_MSG_MAX] = "";
    int err = ptdp_train(&c, &o, NULL, NULL, &tr, why, sizeof why);
    if (err != 0)
        snprintf(msg, msglen, "ptdp_train --dp %d --zero 3 (run %d): %s", DP, (int)k, lr.message[0] ? lr.message : why);
    for (int r = 0; err == 0 && r < DP; r++) {
        b->S = (double)tr.param_elements[0] * sizeof(ptdp_real);
        b->model = ptdp_model_name(&c.model);
        keep_bytes(k, &lr, &tr, r, b);
    }
    ptdp_train_result_free(&tr);
    ptdp_launch_result_free(&lr);
    return err;
}

/* Each device's bytes against its formula: ZeRO-3's 3M(N-1)/N S (M = 1)
 * over its group; HSDP's replica all-reduce 2(R-1)/(R N) S.  The gradient
 * norm's sum adds a double or two to the group it runs in. */
static int check_bytes(const hsdp_bytes *b, char *msg, size_t msglen)
{
    const double slack = 16 * sizeof(double);   /* the step's scalars: the norm's and the loss's sums */
    const double z3 = 3.0 * (DP - 1) / DP * b->S, sh = 3.0 * (SHARD - 1) / SHARD * b->S;
    const double rep = 2.0 * (R - 1) / (R * SHARD) * b->S;
    const double across = 2.0 * (DP - 1) / DP * b->S, inside = (NODE - 1.0) / NODE * b->S;
    for (int r = 0; r < DP; r++) {
        const double qwz = (DP - 1.0) / DP * (2 * b->S + b->qwz_W[r]);
        const double got[] = { b->dp[r], b->shard[r], b->replica[r], b->hpz_dp[r], b->hpz_node[r], b->qwz_dp[r],
                               b->qgz_dp[r], b->qgz_node[r], b->qgz_cross[r] };
        const double want[] = { z3, sh, rep, across, inside, qwz, across, (NODE - 1.0) * (DP / NODE) * b->qgz_X[r],
                                (DP / NODE - 1.0) * b->qgz_X[r] };
        static const char *const what[] = { "ZeRO-3's DP group", "HSDP's shard group", "HSDP's replica group",
                                            "hpZ's DP group", "hpZ's node group", "qwZ's DP group",
                                            "qgZ's DP group (the gathers)", "qgZ's node all-to-all",
                                            "qgZ's cross-node all-to-all" };
        for (int k = 0; k < 9; k++)
            if (got[k] < want[k] - 0.5 || got[k] > want[k] + slack) {
                snprintf(msg, msglen, "device %d sent %.0f B in %s, the formula %.0f B", r, got[k], what[k],
                         want[k]);
                return PTDP_ECHECK;
            }
    }
    return PTDP_OK;
}

/* ---- drawing ------------------------------------------------------------------ */

enum { DEV_W = 52, DEV_H = 40, DEV_GAP = 10, NODE_PAD = 12, NODE_GAP = 24, PANEL_W = 560, TOP = 130 };

static double node_x(double x0, int n) { return x0 + n * (NODE * (DEV_W + DEV_GAP) - DEV_GAP + 2 * NODE_PAD + NODE_GAP); }
static double dev_x(double x0, int r) { return node_x(x0, r / NODE) + NODE_PAD + (r % NODE) * (DEV_W + DEV_GAP); }

static void draw_nodes(ptdp_svg *s, double x0)
{
    const double w = NODE * (DEV_W + DEV_GAP) - DEV_GAP + 2 * NODE_PAD;
    for (int n = 0; n < DP / NODE; n++) {
        ptdp_svg_rect(s, node_x(x0, n), TOP - 22, w, DEV_H + 34, "none", "#777777");
        ptdp_svg_text(s, node_x(x0, n) + 6, TOP - 8, 11, PTDP_SVG_BOLD, "#555555", "node %d (NVLink inside)", n);
    }
    for (int r = 0; r < DP; r++) {
        ptdp_svg_rect(s, dev_x(x0, r), TOP, DEV_W, DEV_H, "#f7f7f7", "#555555");
        ptdp_svg_rect(s, dev_x(x0, r), TOP, 6, DEV_H, fig_rank_color(r), "#555555");
        ptdp_svg_text(s, dev_x(x0, r) + DEV_W / 2.0 + 3, TOP + 25, 13, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, NULL, "%d",
                      r);
    }
}

#define IB "#d62728"
#define NVL "#2ca02c"

static void draw_zero3(ptdp_svg *s, const hsdp_bytes *b, double x0)
{
    ptdp_svg_text(s, x0, TOP - 50, 14, PTDP_SVG_BOLD, NULL, "ZeRO-3 over dp %d (--zero 3)", DP);
    draw_nodes(s, x0);
    const double y = TOP + DEV_H + 30, xa = dev_x(x0, 0) + DEV_W / 2.0, xb = dev_x(x0, DP - 1) + DEV_W / 2.0;
    for (int r = 0; r < DP; r++)
        ptdp_svg_line(s, dev_x(x0, r) + DEV_W / 2.0, TOP + DEV_H, dev_x(x0, r) + DEV_W / 2.0, y, IB, 2, NULL);
    ptdp_svg_line(s, xa, y, xb, y, IB, 4, NULL);
    ptdp_svg_text(s, x0, y + 22, 12, PTDP_SVG_BOLD, IB, "one group of %d across both nodes (InfiniBand):", DP);
    ptdp_svg_text(s, x0, y + 40, 12, PTDP_SVG_START, "#333333",
                  "2 all-gathers of P + 1 reduce-scatter of G: 3(N\u22121)/N S = %.1f KiB a device", b->dp[0] / 1024);
    ptdp_svg_text(s, x0, y + 64, 12.5, PTDP_SVG_BOLD, NULL, "in groups that leave a node: %.1f KiB a device",
                  b->dp[0] / 1024);
}

static void draw_hsdp(ptdp_svg *s, const hsdp_bytes *b, double x0)
{
    ptdp_svg_text(s, x0, TOP - 50, 14, PTDP_SVG_BOLD, NULL, "HSDP: --zero 3 --shard-group %d", SHARD);
    draw_nodes(s, x0);
    const double y = TOP + DEV_H + 14;
    for (int n = 0; n < DP / SHARD; n++) {   /* a shard group: one node */
        ptdp_svg_line(s, dev_x(x0, n * SHARD) + 4, y, dev_x(x0, n * SHARD + SHARD - 1) + DEV_W - 4, y, NVL, 4, NULL);
    }
    for (int k = 0; k < SHARD; k++) {   /* a replica group: rank k of each shard group */
        const double xa = dev_x(x0, k) + DEV_W / 2.0, xb = dev_x(x0, SHARD + k) + DEV_W / 2.0, yk = y + 16 + 8 * k;
        ptdp_svg_line(s, xa, TOP + DEV_H, xa, yk, IB, 1.5, NULL);
        ptdp_svg_line(s, xb, TOP + DEV_H, xb, yk, IB, 1.5, NULL);
        ptdp_svg_line(s, xa, yk, xb, yk, IB, 1.5, NULL);
    }
    const double t = y + 16 + 8 * SHARD + 10;
    ptdp_svg_text(s, x0, t, 12, PTDP_SVG_BOLD, NVL, "shard groups of %d, one a node (NVLink):", SHARD);
    ptdp_svg_text(s, x0, t + 18, 12, PTDP_SVG_START, "#333333",
                  "2 all-gathers + 1 reduce-scatter: 3(N\u22121)/N S = %.1f KiB a device", b->shard[0] / 1024);
    ptdp_svg_text(s, x0, t + 38, 12, PTDP_SVG_BOLD, IB, "replica groups of %d, across the nodes (InfiniBand):", R);
    ptdp_svg_text(s, x0, t + 56, 12, PTDP_SVG_START, "#333333",
                  "all-reduce of the shard: 2(R\u22121)/(R N) S = %.1f KiB a device", b->replica[0] / 1024);
    ptdp_svg_text(s, x0, t + 80, 12.5, PTDP_SVG_BOLD, NULL, "in groups that leave a node: %.1f KiB a device",
                  b->replica[0] / 1024);
}

/* ZeRO++ keeps ZeRO-3's group of 8 (its lines red) and cuts what crosses. */
static void draw_zeropp(ptdp_svg *s, const hsdp_bytes *b, double x0, double dy, bool hpz)
{
    ptdp_svg_group_begin(s, hpz ? "hpz" : "qwz", 0, dy);
    ptdp_svg_text(s, x0, TOP - 50, 14, PTDP_SVG_BOLD, NULL, hpz ? "ZeRO++ hpZ: --zero 3 --zero-hpz (4 GPUs a node)"
                                                                : "ZeRO++ qwZ: --zero 3 --zero-qwz (blocks of 2048)");
    draw_nodes(s, x0);
    const double y = TOP + DEV_H + 30, xa = dev_x(x0, 0) + DEV_W / 2.0, xb = dev_x(x0, DP - 1) + DEV_W / 2.0;
    for (int r = 0; r < DP; r++)
        ptdp_svg_line(s, dev_x(x0, r) + DEV_W / 2.0, TOP + DEV_H, dev_x(x0, r) + DEV_W / 2.0, y, IB, 2, NULL);
    ptdp_svg_line(s, xa, y, xb, y, IB, 4, NULL);
    for (int n = 0; hpz && n < DP / NODE; n++)   /* the node groups: the backward's gather */
        ptdp_svg_line(s, dev_x(x0, n * NODE) + 4, TOP + DEV_H + 12, dev_x(x0, n * NODE + NODE - 1) + DEV_W - 4,
                      TOP + DEV_H + 12, NVL, 4, NULL);
    if (hpz) {
        ptdp_svg_text(s, x0, y + 22, 12, PTDP_SVG_BOLD, IB, "the forward's gather + the reduce-scatter, over 8:");
        ptdp_svg_text(s, x0, y + 40, 12, PTDP_SVG_START, "#333333", "2(N\u22121)/N S = %.1f KiB a device",
                      b->hpz_dp[0] / 1024);
        ptdp_svg_text(s, x0, y + 58, 12, PTDP_SVG_BOLD, NVL, "the backward's gather of the kept 1/4, in the node:");
        ptdp_svg_text(s, x0, y + 76, 12, PTDP_SVG_START, "#333333", "(k\u22121)/k S = %.1f KiB a device",
                      b->hpz_node[0] / 1024);
    } else {
        ptdp_svg_text(s, x0, y + 22, 12, PTDP_SVG_BOLD, IB, "the forward's gather in INT8, the rest exact, over 8:");
        ptdp_svg_text(s, x0, y + 40, 12, PTDP_SVG_START, "#333333",
                      "(N\u22121)/N (W + 2S) = %.1f KiB a device (W = %.1f KiB of INT8 wires a gather)",
                      b->qwz_dp[0] / 1024, b->qwz_W[0] / 1024);
    }
    ptdp_svg_text(s, x0, y + (hpz ? 100 : 64), 12.5, PTDP_SVG_BOLD, NULL, "in groups that leave a node: %.1f KiB a device",
                  (hpz ? b->hpz_dp[0] : b->qwz_dp[0]) / 1024);
    ptdp_svg_group_end(s);
}

/* qgZ: ZeRO-3's gathers over the group of 8 (red), the gradient as two
 * all-to-alls of INT4 codes — inside each node (green), then between the
 * ranks with the same place in their node (red, thin). */
static void draw_qgz(ptdp_svg *s, const hsdp_bytes *b, double x0, double dy)
{
    ptdp_svg_group_begin(s, "qgz", 0, dy);
    ptdp_svg_text(s, x0, TOP - 50, 14, PTDP_SVG_BOLD, NULL, "ZeRO++ qgZ: --zero 3 --zero-qgz (INT4, 4 GPUs a node)");
    draw_nodes(s, x0);
    const double y = TOP + DEV_H + 12;
    for (int n = 0; n < DP / NODE; n++)   /* the node groups: the first all-to-all */
        ptdp_svg_line(s, dev_x(x0, n * NODE) + 4, y, dev_x(x0, n * NODE + NODE - 1) + DEV_W - 4, y, NVL, 4, NULL);
    for (int k = 0; k < NODE; k++) {   /* the cross groups: rank k of each node, the second */
        const double xa = dev_x(x0, k) + DEV_W / 2.0, xb = dev_x(x0, NODE + k) + DEV_W / 2.0, yk = y + 14 + 8 * k;
        ptdp_svg_line(s, xa, TOP + DEV_H, xa, yk, IB, 1.5, NULL);
        ptdp_svg_line(s, xb, TOP + DEV_H, xb, yk, IB, 1.5, NULL);
        ptdp_svg_line(s, xa, yk, xb, yk, IB, 1.5, NULL);
    }
    const double t = y + 14 + 8 * NODE + 12;
    ptdp_svg_text(s, x0, t, 12, PTDP_SVG_BOLD, IB, "the 2 gathers over 8, exact: 2(N−1)/N S = %.1f KiB a device",
                  b->qgz_dp[0] / 1024);
    ptdp_svg_text(s, x0, t + 18, 12, PTDP_SVG_BOLD, NVL, "the gradient's INT4 all-to-all in the node:");
    ptdp_svg_text(s, x0, t + 36, 12, PTDP_SVG_START, "#333333", "(k−1) m X = %.1f KiB a device (X = %.1f KiB "
                  "of codes and scales)", b->qgz_node[0] / 1024, b->qgz_X[0] / 1024);
    ptdp_svg_text(s, x0, t + 54, 12, PTDP_SVG_BOLD, IB, "then across the nodes: (m−1) X = %.1f KiB a device",
                  b->qgz_cross[0] / 1024);
    ptdp_svg_text(s, x0, t + 78, 12.5, PTDP_SVG_BOLD, NULL, "in groups that leave a node: %.1f KiB a device",
                  (b->qgz_dp[0] + b->qgz_cross[0]) / 1024);
    ptdp_svg_group_end(s);
}

int fig_hsdp(const char *path, char *msg, size_t msglen)
{
    static hsdp_bytes b;
    memset(&b, 0, sizeof b);
    int err = 0;
    for (run_kind k = RUN_ZERO3; k <= RUN_QGZ && err == 0; k++)
        err = one_step(k, &b, msg, msglen);
    if (err == 0)
        err = check_bytes(&b, msg, msglen);
    if (err != 0)
        return err;
    ptdp_svg s;
    ptdp_svg_begin(&s, 2 * PANEL_W + 60, 1150);
    ptdp_svg_text(&s, 20, 26, 17, PTDP_SVG_BOLD, NULL,
                  "One step of ZeRO-3, of HSDP and of ZeRO++ on 2 nodes of %d devices (dp %d, one micro-batch)", NODE, DP);
    ptdp_svg_text(&s, 20, 46, 12, PTDP_SVG_START, "#333333",
                  "Bytes each device sent, measured by five real runs of ptdp train's default model (%s, S = %.1f KiB "
                  "of gradient); red: a group that spans both nodes, green: a group inside one.", b.model, b.S / 1024);
    draw_zero3(&s, &b, 20);
    draw_hsdp(&s, &b, 40 + PANEL_W);
    ptdp_svg_text(&s, 20, 400, 12.5, PTDP_SVG_BOLD, NULL,
                  "HSDP moves ZeRO-3's gathers and reduce-scatters inside the node and sends only %.1f%% of its "
                  "cross-node bytes, for a shard %d\u00d7 larger than ZeRO-3's (1/%d of the states, not 1/%d).",
                  100.0 * b.replica[0] / b.dp[0], R, SHARD, DP);
    draw_zeropp(&s, &b, 20, 390, true);
    draw_zeropp(&s, &b, 40 + PANEL_W, 390, false);
    ptdp_svg_text(&s, 20, 780, 12.5, PTDP_SVG_BOLD, NULL,
                  "ZeRO++ keeps ZeRO-3's 1/%d shards: hpZ sends %.1f%% of ZeRO-3's cross-node bytes (for 1/%d of each "
                  "unit kept), qwZ %.1f%% (its forward lossy: docs/zero.md).", DP, 100.0 * b.hpz_dp[0] / b.dp[0], NODE,
                  100.0 * b.qwz_dp[0] / b.dp[0]);
    draw_qgz(&s, &b, 20, 750);
    ptdp_svg_text(&s, 20, 1130, 12.5, PTDP_SVG_BOLD, NULL,
                  "qgZ sends %.1f%% of ZeRO-3's cross-node bytes: its gradient's crossing is %.1f KiB of INT4 codes "
                  "where the reduce-scatter's was %.1f KiB (its gradients lossy: docs/zero.md).",
                  100.0 * (b.qgz_dp[0] + b.qgz_cross[0]) / b.dp[0], b.qgz_cross[0] / 1024, b.dp[0] / 3 / 1024);
    return fig_finish(&s, path, msg, msglen);
}
