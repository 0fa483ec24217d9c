/*
 * figure_moe_fold.c — moe_folding.svg: MoE parallel folding, attention's
 * groups and the experts' groups over the same four ranks.
 *
 * Attention runs tp 2 x dp 2: TP pairs {0 1} {2 3} share their rows (a TP
 * group's sequences), DP pairs {0 2} {1 3} hold other sequences.  With
 * --ep 4 --etp 1 (moe_fold.c) the experts fold the same ranks etp 1 x
 * ep 4: each TP rank routes its slice of its TP group's sequences (slice
 * s = tp_rank), the four slices form one EP group spanning the TP pairs,
 * every rank holds E/4 whole experts, and the fold group — the ranks of a
 * TP group with the same experts' TP rank, here the TP pair itself —
 * all-gathers the slices back into the TP group's rows:
 *
 *     rank           0        1        2        3
 *     attention      TP {0 1}          TP {2 3}            DP {0 2} {1 3}
 *     rows           [a b]    [a b]    [c d]    [c d]
 *     routes         a        b        c        d          slice = tp_rank
 *     experts        0 1      2 3      4 5      6 7        EP {0 1 2 3}
 *     after          [a b]    [a b]    [c d]    [c d]      fold all-gather
 *
 * Four real devices build the mesh with ep 4 and etp 1 and ask it for the
 * groups a folded run builds (ptdp_mesh_add_group); each then all-gathers
 * its slice's label over its fold group.  The figure draws what they
 * report, checked against the rule first.
 */
#include <stdio.h>
#include <string.h>

#include "figures.h"
#include "ptdp/coll.h"
#include "ptdp/comm.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/launch.h"
#include "ptdp/mesh.h"

enum { DP = 2, TP = 2, EP = 4, ETP = 1, WORLD = DP * TP, EXPERTS = 8, PER_RANK = EXPERTS / EP };

typedef struct {
    int dp_rank, tp_rank;
    int ep_rank, ep_members[EP];   /* world ranks, in group order */
    int etp_size, edp_size, fold_size;
    int fold_members[TP / ETP];
    double rows[TP / ETP];         /* the fold group's all-gather: each slice's label */
} device_view;

typedef struct {
    device_view dev[WORLD];
} fold_report;

/* ---- ask four real devices ------------------------------------------------------ */

static void members(ptdp_comm *c, int *out, int n)
{
    for (int r = 0; r < ptdp_comm_size(c) && r < n; r++)
        out[r] = ptdp_comm_world_rank(c, r);
}

static int describe_device(ptdp_device *dev, void *arg)
{
    fold_report *rep = arg;
    ptdp_mesh mesh;
    int rc = ptdp_mesh_init(dev, DP, TP, 1, &mesh);
    if (rc != 0)
        return rc;
    device_view *v = &rep->dev[dev->rank];
    v->dp_rank = mesh.dp_rank;
    v->tp_rank = mesh.tp_rank;
    mesh.ep = EP;
    mesh.etp = ETP;
    const ptdp_group want[] = { PTDP_GROUP_EP, PTDP_GROUP_EDP, PTDP_GROUP_ETP, PTDP_GROUP_FOLD };
    for (int g = 0; rc == 0 && g < 4; g++)
        rc = ptdp_mesh_add_group(dev, &mesh, want[g]);
    if (rc == 0) {
        ptdp_comm *ep = ptdp_mesh_group(&mesh, PTDP_GROUP_EP), *fold = ptdp_mesh_group(&mesh, PTDP_GROUP_FOLD);
        v->ep_rank = ptdp_comm_rank(ep);
        members(ep, v->ep_members, EP);
        members(fold, v->fold_members, TP / ETP);
        v->etp_size = ptdp_comm_size(ptdp_mesh_group(&mesh, PTDP_GROUP_ETP));
        v->edp_size = ptdp_comm_size(ptdp_mesh_group(&mesh, PTDP_GROUP_EDP));
        v->fold_size = ptdp_comm_size(fold);
        const double mine = 10 * mesh.dp_rank + mesh.tp_rank;   /* slice tp_rank of TP group dp_rank */
        rc = ptdp_all_gather(fold, &mine, v->rows, TP / ETP, PTDP_F64);
    }
    ptdp_mesh_free(&mesh);
    return rc;
}

/* The rule, on what the devices reported: one EP group of all four ranks
 * in slice order, EP rank = world rank, experts' TP and expert-DP groups
 * of one, the fold group = the TP pair, and its all-gather rebuilds the
 * TP group's two slices in order. */
static int check_report(const fold_report *rep, char *msg, size_t msglen)
{
    for (int w = 0; w < WORLD; w++) {
        const device_view *v = &rep->dev[w];
        bool ok = v->tp_rank == w % TP && v->dp_rank == w / TP && v->ep_rank == w && v->etp_size == ETP &&
                  v->edp_size == 1 && v->fold_size == TP / ETP;
        for (int r = 0; r < EP; r++)
            ok = ok && v->ep_members[r] == r;
        for (int s = 0; s < TP / ETP; s++)
            ok = ok && v->fold_members[s] == w / TP * TP + s && v->rows[s] == 10 * v->dp_rank + s;
        if (!ok) {
            snprintf(msg, msglen, "device %d: EP rank %d, fold group {%d, %d} gathering %g, %g break the folding "
                     "rule (one EP group over the TP pairs, fold group = the TP pair)", w, v->ep_rank,
                     v->fold_members[0], v->fold_members[1], v->rows[0], v->rows[1]);
            return PTDP_ECHECK;
        }
    }
    return 0;
}

/* ---- drawing ------------------------------------------------------------------ */

enum { BOX_W = 220, BOX_H = 96, GAP = 24, X0 = 40, Y_ATT = 150, Y_EXP = 360 };

static double box_x(int w) { return X0 + w * (BOX_W + GAP); }

static const char *const slice_name[DP][TP] = { { "a", "b" }, { "c", "d" } };

/* Attention's layout: the TP pairs bracketed, every rank with its TP
 * group's two slices of sequences. */
static void draw_attention(ptdp_svg *s, const fold_report *rep)
{
    for (int g = 0; g < DP; g++) {
        const double x0 = box_x(g * TP), x1 = box_x(g * TP + TP - 1) + BOX_W;
        ptdp_svg_rect(s, x0 - 8, Y_ATT - 30, x1 - x0 + 16, BOX_H + 38, "none", "#777777");
        ptdp_svg_text(s, (x0 + x1) / 2, Y_ATT - 12, 12, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, "#333333",
                      "TP group {%d, %d}: the same rows, heads split", g * TP, g * TP + 1);
    }
    for (int w = 0; w < WORLD; w++) {
        const device_view *v = &rep->dev[w];
        const double x = box_x(w);
        ptdp_svg_rect(s, x, Y_ATT, BOX_W, BOX_H, "#f7f7f7", "#555555");
        ptdp_svg_rect(s, x, Y_ATT, 10, BOX_H, fig_rank_color(w), "#555555");
        ptdp_svg_text(s, x + 20, Y_ATT + 22, 14, PTDP_SVG_BOLD, NULL, "rank %d \u00b7 dp %d, tp %d", w, v->dp_rank,
                      v->tp_rank);
        for (int j = 0; j < TP; j++) {
            ptdp_svg_rect(s, x + 20 + j * 60, Y_ATT + 36, 52, 26, j == v->tp_rank ? "#c7e9c0" : "#e5e5e5", "#555555");
            ptdp_svg_text(s, x + 46 + j * 60, Y_ATT + 54, 13, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, NULL, "%s",
                          slice_name[v->dp_rank][j]);
        }
        ptdp_svg_text(s, x + 20, Y_ATT + 82, 11, PTDP_SVG_START, "#333333", "routes slice %s (green)",
                      slice_name[v->dp_rank][v->tp_rank]);
    }
    ptdp_svg_text(s, X0, Y_ATT + BOX_H + 34, 12, PTDP_SVG_BOLD, "#08519c",
                  "DP groups {0, 2} and {1, 3}: other sequences; dense gradients summed over them");
}

/* The experts' layout: one EP group over all four ranks, two whole
 * experts a rank, and each fold group's all-gather as the devices
 * reported it. */
static void draw_experts(ptdp_svg *s, const fold_report *rep)
{
    static const char *const fill[EP] = { "#fde0c5", "#facba6", "#c6dbef", "#9ecae1" };
    const double x0 = box_x(0), x1 = box_x(WORLD - 1) + BOX_W;
    ptdp_svg_rect(s, x0 - 8, Y_EXP - 30, x1 - x0 + 16, BOX_H + 38, "none", "#e6550d");
    ptdp_svg_text(s, (x0 + x1) / 2, Y_EXP - 12, 12, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, "#e6550d",
                  "EP group {%d, %d, %d, %d}: all-to-alls of the routed rows, across the TP pairs",
                  rep->dev[0].ep_members[0], rep->dev[0].ep_members[1], rep->dev[0].ep_members[2],
                  rep->dev[0].ep_members[3]);
    for (int w = 0; w < WORLD; w++) {
        const device_view *v = &rep->dev[w];
        const double x = box_x(w);
        ptdp_svg_rect(s, x, Y_EXP, BOX_W, BOX_H, "#f7f7f7", "#555555");
        ptdp_svg_rect(s, x, Y_EXP, 10, BOX_H, fig_rank_color(w), "#555555");
        ptdp_svg_text(s, x + 20, Y_EXP + 22, 14, PTDP_SVG_BOLD, NULL, "rank %d \u00b7 EP rank %d", w, v->ep_rank);
        for (int j = 0; j < PER_RANK; j++) {
            ptdp_svg_rect(s, x + 20 + j * 96, Y_EXP + 32, 88, 24, fill[v->ep_rank], "#555555");
            ptdp_svg_text(s, x + 64 + j * 96, Y_EXP + 49, 12, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, NULL,
                          "expert %d", v->ep_rank * PER_RANK + j);
        }
        ptdp_svg_text(s, x + 20, Y_EXP + 74, 11, PTDP_SVG_START, "#333333", "fold {%d, %d} all-gathers: %s %s",
                      v->fold_members[0], v->fold_members[1], slice_name[v->dp_rank][(int)v->rows[0] % 10],
                      slice_name[v->dp_rank][(int)v->rows[1] % 10]);
        ptdp_svg_text(s, x + 20, Y_EXP + 90, 11, PTDP_SVG_START, "#333333", "whole: experts' TP %d, expert-DP %d",
                      v->etp_size, v->edp_size);
    }
}

int fig_moe_fold(const char *path, char *msg, size_t msglen)
{
    static fold_report rep;
    memset(&rep, 0, sizeof rep);
    int err = fig_ask_devices(WORLD, describe_device, &rep, "the folded groups on tp 2 x dp 2", msg, msglen);
    if (err == 0)
        err = check_report(&rep, msg, msglen);
    if (err != 0)
        return err;

    ptdp_svg s;
    ptdp_svg_begin(&s, 1020, 540);
    ptdp_svg_text(&s, 20, 26, 17, PTDP_SVG_BOLD, NULL,
                  "MoE parallel folding: tp %d x dp %d for attention, etp %d x ep %d for the experts, the same %d ranks",
                  TP, DP, ETP, EP, WORLD);
    ptdp_svg_text(&s, 20, 46, 12, PTDP_SVG_START, "#333333",
                  "--tp 2 --dp 2 --ep 4 --etp 1: each TP rank routes its slice of its TP group's sequences; the "
                  "experts are not split, and EP spans the TP pairs.");
    ptdp_svg_text(&s, 20, 64, 12, PTDP_SVG_START, "#333333",
                  "The mesh's own groups on %d real devices (ptdp_mesh_add_group); the fold lines are a real "
                  "all-gather of each slice's label.", WORLD);
    ptdp_svg_text(&s, 20, 96, 14, PTDP_SVG_BOLD, "#08519c", "Attention's layout (tp x dp)");
    draw_attention(&s, &rep);
    ptdp_svg_text(&s, 20, Y_EXP - 46, 14, PTDP_SVG_BOLD, "#e6550d", "The experts' layout (etp x ep x edp)");
    draw_experts(&s, &rep);
    ptdp_svg_text(&s, 20, Y_EXP + BOX_H + 40, 12.5, PTDP_SVG_BOLD, NULL,
                  "Expert gradients: over the expert-DP group (here one rank). The router's: over DP and the fold "
                  "group, since each slice used it on other rows.");
    ptdp_svg_text(&s, 20, Y_EXP + BOX_H + 58, 12.5, PTDP_SVG_BOLD, NULL,
                  "Bytes a block: the fold all-gather, (S-1)/S R C each way (S = tp / etp = 2), beside the EP "
                  "all-to-alls of the routed rows.");
    return fig_finish(&s, path, msg, msglen);
}
