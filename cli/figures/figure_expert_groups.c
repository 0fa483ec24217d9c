/*
 * figure_expert_groups.c — expert_groups.svg: where expert parallelism
 * lives on the mesh, and which group sums which gradient.
 *
 * EP is borrowed from the data-parallel ranks (Megatron's order tp-cp-ep-
 * dp-pp, torchtitan's dp2ep): with dp = 4 and ep = N = 2, consecutive DP
 * ranks form an EP group, and EP rank r holds experts r E/N … (r+1) E/N - 1;
 * the devices holding the same experts form an expert-DP group:
 *
 *     DP rank        0        1        2        3
 *     EP group      {0, 1}            {2, 3}             ep_rank = dp_rank mod N
 *     EP rank        0        1        0        1
 *     experts       0, 1     2, 3     0, 1     2, 3
 *     expert-DP     {0, 2}   {1, 3}   {0, 2}   {1, 3}     dp / N replicas of an expert
 *
 *   dense gradients (attention, router, embeddings): summed over all of DP
 *   expert gradients: summed over the expert-DP group only — the other EP
 *   rank's replicas hold other experts, whose gradients are not theirs
 *
 * Four real devices build the dp 4 mesh with ep 2 and ask it for both
 * groups (ptdp_mesh_add_group, the ones a run with --ep builds); each
 * device then all-reduces a dense "gradient" (its DP rank + 1) over DP and
 * an expert one (the same) over its expert-DP group.  The figure draws the
 * groups and sums the devices report, checked against the rule first.
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

enum { DP = 4, EP = 2, EXPERTS = 4, PER_RANK = EXPERTS / EP };

typedef struct {
    int dp_rank;
    int ep_rank, ep_members[EP];              /* world ranks, in group order */
    int edp_rank, edp_members[DP / EP];
    double dense_sum, expert_sum;             /* the two all-reduces        */
} device_view;

typedef struct {
    device_view dev[DP];
} groups_report;

/* ---- ask four real devices ------------------------------------------------------ */

static int describe_device(ptdp_device *dev, void *arg)
{
    groups_report *rep = arg;
    ptdp_mesh mesh;
    int rc = ptdp_mesh_init(dev, DP, 1, 1, &mesh);
    if (rc != 0)
        return rc;
    device_view *v = &rep->dev[dev->rank];
    v->dp_rank = mesh.dp_rank;
    mesh.ep = EP;
    if ((rc = ptdp_mesh_add_group(dev, &mesh, PTDP_GROUP_EP)) == 0 &&
        (rc = ptdp_mesh_add_group(dev, &mesh, PTDP_GROUP_EDP)) == 0) {
        ptdp_comm *ep = ptdp_mesh_group(&mesh, PTDP_GROUP_EP), *edp = ptdp_mesh_group(&mesh, PTDP_GROUP_EDP);
        v->ep_rank = ptdp_comm_rank(ep);
        v->edp_rank = ptdp_comm_rank(edp);
        for (int r = 0; r < ptdp_comm_size(ep) && r < EP; r++)
            v->ep_members[r] = ptdp_comm_world_rank(ep, r);
        for (int r = 0; r < ptdp_comm_size(edp) && r < DP / EP; r++)
            v->edp_members[r] = ptdp_comm_world_rank(edp, r);
        const double g = mesh.dp_rank + 1;
        if ((rc = ptdp_all_reduce(mesh.dp_comm, &g, &v->dense_sum, 1, PTDP_F64, PTDP_SUM)) == 0)
            rc = ptdp_all_reduce(edp, &g, &v->expert_sum, 1, PTDP_F64, PTDP_SUM);
    }
    ptdp_mesh_free(&mesh);
    return rc;
}

/* The rule, on what the devices reported: EP groups of consecutive DP
 * ranks, expert-DP groups of equal EP rank, and the sums over each. */
static int check_report(const groups_report *rep, char *msg, size_t msglen)
{
    for (int w = 0; w < DP; w++) {
        const device_view *v = &rep->dev[w];
        double expert = 0;
        for (int q = v->dp_rank % EP; q < DP; q += EP)
            expert += q + 1;
        bool ok = v->dp_rank == w && v->ep_rank == w % EP && v->edp_rank == w / EP &&
                  v->dense_sum == DP * (DP + 1) / 2 && v->expert_sum == expert;
        for (int r = 0; r < EP; r++)
            ok = ok && v->ep_members[r] == w / EP * EP + r;
        for (int r = 0; r < DP / EP; r++)
            ok = ok && v->edp_members[r] == w % EP + r * EP;
        if (!ok) {
            snprintf(msg, msglen, "device %d: EP rank %d of {%d, %d}, expert-DP rank %d, sums %g and %g break the "
                     "rule (EP groups of consecutive DP ranks)", w, v->ep_rank, v->ep_members[0], v->ep_members[1],
                     v->edp_rank, v->dense_sum, v->expert_sum);
            return PTDP_ECHECK;
        }
    }
    return 0;
}

/* ---- drawing ------------------------------------------------------------------ */

enum { BOX_W = 200, BOX_H = 118, GAP = 24, X0 = 40, Y0 = 150 };

static double box_x(int w) { return X0 + w * (BOX_W + GAP); }

static void draw_device(ptdp_svg *s, const device_view *v, int w)
{
    static const char *const expert_fill[EXPERTS] = { "#fde0c5", "#facba6", "#c6dbef", "#9ecae1" };
    const double x = box_x(w), y = Y0;
    ptdp_svg_rect(s, x, y, BOX_W, BOX_H, "#f7f7f7", "#555555");
    ptdp_svg_rect(s, x, y, 10, BOX_H, fig_rank_color(w), "#555555");
    ptdp_svg_text(s, x + 20, y + 22, 14, PTDP_SVG_BOLD, NULL, "device %d \u00b7 DP rank %d", w, v->dp_rank);
    ptdp_svg_text(s, x + 20, y + 40, 11, PTDP_SVG_START, "#333333", "EP rank %d of EP group {%d, %d}", v->ep_rank,
                  v->ep_members[0], v->ep_members[1]);
    for (int j = 0; j < PER_RANK; j++) {
        const int e = v->ep_rank * PER_RANK + j;
        ptdp_svg_rect(s, x + 20 + j * 88, y + 50, 80, 26, expert_fill[e], "#555555");
        ptdp_svg_text(s, x + 60 + j * 88, y + 68, 12, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, NULL, "expert %d", e);
    }
    ptdp_svg_text(s, x + 20, y + 94, 11, PTDP_SVG_START, "#333333", "dense sum over DP: %g", v->dense_sum);
    ptdp_svg_text(s, x + 20, y + 110, 11, PTDP_SVG_START, "#333333", "expert sum over {%d, %d}: %g",
                  v->edp_members[0], v->edp_members[1], v->expert_sum);
}

/* The EP groups as brackets above the devices, the expert-DP groups as
 * links below them, each in its own colour. */
static void draw_groups(ptdp_svg *s, const groups_report *rep)
{
    static const char *const color[] = { "#e6550d", "#3182bd" };
    for (int g = 0; g < DP / EP; g++) {
        const double x0 = box_x(g * EP), x1 = box_x(g * EP + EP - 1) + BOX_W;
        ptdp_svg_rect(s, x0 - 8, Y0 - 34, x1 - x0 + 16, BOX_H + 42, "none", "#777777");
        ptdp_svg_text(s, (x0 + x1) / 2, Y0 - 14, 12, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, "#333333",
                      "EP group {%d, %d}: all-to-alls of the tokens", rep->dev[g * EP].ep_members[0],
                      rep->dev[g * EP].ep_members[1]);
    }
    for (int r = 0; r < EP; r++) {
        const device_view *v = &rep->dev[r];
        const double y = Y0 + BOX_H + 28 + r * 26;
        const double xa = box_x(v->edp_members[0]) + BOX_W / 2.0, xb = box_x(v->edp_members[1]) + BOX_W / 2.0;
        ptdp_svg_line(s, xa, Y0 + BOX_H, xa, y, color[r], 2, NULL);
        ptdp_svg_line(s, xb, Y0 + BOX_H, xb, y, color[r], 2, NULL);
        ptdp_svg_line(s, xa, y, xb, y, color[r], 2, NULL);
        ptdp_svg_text(s, xb + 10, y + 4, 12, PTDP_SVG_BOLD, color[r], "expert-DP group {%d, %d}: experts %d, %d",
                      v->edp_members[0], v->edp_members[1], r * PER_RANK, r * PER_RANK + 1);
    }
}

int fig_expert_groups(const char *path, char *msg, size_t msglen)
{
    static groups_report rep;
    memset(&rep, 0, sizeof rep);
    int err = fig_ask_devices(DP, describe_device, &rep, "the dp 4, ep 2 groups", msg, msglen);
    if (err == 0)
        err = check_report(&rep, msg, msglen);
    if (err != 0)
        return err;

    ptdp_svg s;
    ptdp_svg_begin(&s, 1060, 420);
    ptdp_svg_text(&s, 20, 26, 17, PTDP_SVG_BOLD, NULL,
                  "Expert parallelism on the mesh: dp %d, ep %d, E = %d experts", DP, EP, EXPERTS);
    ptdp_svg_text(&s, 20, 46, 12, PTDP_SVG_START, "#333333",
                  "EP is borrowed from the DP ranks: consecutive DP ranks form an EP group, EP rank r holds "
                  "experts r\u00b7E/N \u2026 (r+1)\u00b7E/N \u2212 1.");
    ptdp_svg_text(&s, 20, 64, 12, PTDP_SVG_START, "#333333",
                  "The mesh's own EP and expert-DP groups on %d real devices (ptdp_mesh_add_group), each sum a real "
                  "all-reduce of the device's DP rank + 1.", DP);
    ptdp_svg_text(&s, 20, 90, 13, PTDP_SVG_BOLD, "#08519c",
                  "ep_rank = dp_rank mod N \u00b7 EP group = dp_rank div N \u00b7 expert-DP group = the devices "
                  "of one EP rank (dp/N of them)");
    draw_groups(&s, &rep);
    for (int w = 0; w < DP; w++)
        draw_device(&s, &rep.dev[w], w);
    const double ny = Y0 + BOX_H + 28 + EP * 26 + 30;
    ptdp_svg_text(&s, 20, ny, 12.5, PTDP_SVG_BOLD, NULL,
                  "Dense gradients (attention, router, embeddings) are summed over all of DP: 1 + 2 + 3 + 4 = %g "
                  "on every device.", rep.dev[0].dense_sum);
    ptdp_svg_text(&s, 20, ny + 18, 12.5, PTDP_SVG_BOLD, NULL,
                  "Expert gradients only over the expert-DP group: {0, 2} sums %g, {1, 3} sums %g \u2014 "
                  "summing over all of DP would add other experts' gradients.", rep.dev[0].expert_sum,
                  rep.dev[1].expert_sum);
    return fig_finish(&s, path, msg, msglen);
}
