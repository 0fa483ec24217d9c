/*
 * figure_mesh.c — mesh_groups.svg: the dp x tp x pp grid, its ranks and groups.
 *
 * Eight devices call ptdp_mesh_init(dev, 2, 2, 2) as training does, and
 * each reports its coordinates and, for each of its three groups, the world
 * rank of every member (ptdp_comm_world_rank) and its own rank in it.  The
 * figure draws what they report:
 *
 *   world rank = tp_rank + tp · (dp_rank + dp · pp_rank)     tp fastest
 *
 *                stage 0        stage 1
 *      dp 0      [0  1]         [4  5]       TP groups: a row of one stage
 *      dp 1      [2  3]         [6  7]       DP groups: a column of one stage
 *                                            PP groups: the same place in each stage
 *
 * and one small copy of the grid per kind of group, each group in its own
 * colour, with the members' ranks in the group.  Before drawing, the
 * reports are checked against the formula and the rules of mesh.h (a group
 * holds the devices that agree on the two other coordinates, ranked by its
 * own): a figure of a wrong mesh is refused.
 */
#include <stdio.h>
#include <string.h>

#include "figures.h"
#include "ptdp/comm.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/launch.h"
#include "ptdp/mesh.h"

enum { DP = 2, TP = 2, PP = 2, WORLD = DP * TP * PP, KINDS = 3 };
enum { K_TP, K_DP, K_PP };

static const char *const kind_name[KINDS] = { "TP", "DP", "PP" };

typedef struct {
    int coord[KINDS];                 /* tp_rank, dp_rank, pp_rank          */
    int size[KINDS];                  /* of each group                      */
    int rank_in[KINDS];               /* my rank in each group              */
    int members[KINDS][WORLD];        /* world ranks, in group-rank order   */
} device_groups;

typedef struct {
    device_groups dev[WORLD];         /* indexed by world rank */
} mesh_report;

/* ---- ask eight real devices ------------------------------------------------- */

static int mesh_describe_device(ptdp_device *dev, void *arg)
{
    mesh_report *rep = arg;
    ptdp_mesh mesh;
    int rc = ptdp_mesh_init(dev, DP, TP, PP, &mesh);
    if (rc != 0)
        return rc;
    device_groups *g = &rep->dev[dev->rank];
    ptdp_comm *comm[KINDS] = { mesh.tp_comm, mesh.dp_comm, mesh.pp_comm };
    g->coord[K_TP] = mesh.tp_rank;
    g->coord[K_DP] = mesh.dp_rank;
    g->coord[K_PP] = mesh.pp_rank;
    for (int k = 0; k < KINDS; k++) {
        g->size[k] = ptdp_comm_size(comm[k]);
        g->rank_in[k] = ptdp_comm_rank(comm[k]);
        for (int r = 0; r < g->size[k] && r < WORLD; r++)
            g->members[k][r] = ptdp_comm_world_rank(comm[k], r);
    }
    ptdp_mesh_free(&mesh);
    return 0;
}

/* The rules of mesh.h, on what the devices reported. */
static int check_report(const mesh_report *rep, char *msg, size_t msglen)
{
    static const int sizes[KINDS] = { TP, DP, PP };
    for (int w = 0; w < WORLD; w++) {
        const device_groups *g = &rep->dev[w];
        int want = ptdp_mesh_world_rank(DP, TP, PP, g->coord[K_DP], g->coord[K_TP], g->coord[K_PP]);
        if (want != w || w != g->coord[K_TP] + TP * (g->coord[K_DP] + DP * g->coord[K_PP])) {
            snprintf(msg, msglen, "device %d has coordinates (dp %d, tp %d, pp %d): the formula gives %d", w,
                     g->coord[K_DP], g->coord[K_TP], g->coord[K_PP], want);
            return PTDP_ECHECK;
        }
        for (int k = 0; k < KINDS; k++) {
            if (g->size[k] != sizes[k] || g->rank_in[k] != g->coord[k] || g->members[k][g->rank_in[k]] != w) {
                snprintf(msg, msglen, "device %d: its %s group has size %d and ranks it %d, expected %d and %d", w,
                         kind_name[k], g->size[k], g->rank_in[k], sizes[k], g->coord[k]);
                return PTDP_ECHECK;
            }
            for (int r = 0; r < g->size[k]; r++) {
                const device_groups *o = &rep->dev[g->members[k][r]];
                for (int j = 0; j < KINDS; j++)
                    if ((j == k ? o->coord[j] != r : o->coord[j] != g->coord[j])) {
                        snprintf(msg, msglen, "device %d's %s group: member %d (world %d) breaks the rule "
                                 "\"same other coordinates, ranked by its own\"", w, kind_name[k], r,
                                 g->members[k][r]);
                        return PTDP_ECHECK;
                    }
            }
        }
    }
    return 0;
}

/* "{4, 5}": a group's members, world ranks in group-rank order. */
static void group_text(const device_groups *g, int kind, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "{");
    for (int r = 0; r < g->size[kind] && at < len; r++)
        at += (size_t)snprintf(buf + at, len - at, "%s%d", r ? ", " : "", g->members[kind][r]);
    if (at < len)
        snprintf(buf + at, len - at, "}");
}

/* The groups of one kind, each once, in the order of their first member;
 * group_of[w] = which of them holds device w.  Returns their number. */
static int distinct_groups(const mesh_report *rep, int kind, int *first_member, int *group_of)
{
    int n = 0;
    for (int w = 0; w < WORLD; w++) {
        int lead = rep->dev[w].members[kind][0], g = 0;
        while (g < n && first_member[g] != lead)
            g++;
        if (g == n)
            first_member[n++] = lead;
        group_of[w] = g;
    }
    return n;
}

/* ---- drawing ------------------------------------------------------------------ */

enum { BOX_W = 180, BOX_H = 66, BOX_GAP = 12, STAGE_GAP = 50, GRID_X = 80, GRID_Y = 140 };

/* Top-left corner of device (dp, tp, pp) in the big grid. */
static double grid_x(int tp, int pp) { return GRID_X + pp * (TP * (BOX_W + BOX_GAP) + STAGE_GAP) + tp * (BOX_W + BOX_GAP); }
static double grid_y(int dp) { return GRID_Y + dp * (BOX_H + BOX_GAP); }

static void draw_grid(ptdp_svg *s, const mesh_report *rep)
{
    for (int p = 0; p < PP; p++) {
        double x0 = grid_x(0, p), x1 = grid_x(TP - 1, p) + BOX_W;
        ptdp_svg_text(s, (x0 + x1) / 2, GRID_Y - 34, 13, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, NULL,
                      "stage %d (pp_rank %d)", p, p);
        for (int t = 0; t < TP; t++)
            ptdp_svg_text(s, grid_x(t, p) + BOX_W / 2.0, GRID_Y - 12, 11, PTDP_SVG_MIDDLE, "#555555",
                          "tp_rank %d", t);
    }
    for (int d = 0; d < DP; d++)
        ptdp_svg_text(s, GRID_X - 12, grid_y(d) + BOX_H / 2.0 + 4, 11, PTDP_SVG_END, "#555555", "dp_rank %d", d);
    for (int w = 0; w < WORLD; w++) {
        const device_groups *g = &rep->dev[w];
        int t = g->coord[K_TP], d = g->coord[K_DP], p = g->coord[K_PP];
        double x = grid_x(t, p), y = grid_y(d);
        ptdp_svg_rect(s, x, y, BOX_W, BOX_H, "#f7f7f7", "#555555");
        ptdp_svg_rect(s, x, y, 10, BOX_H, fig_rank_color(w), "#555555");
        ptdp_svg_text(s, x + 20, y + 31, 24, PTDP_SVG_START | PTDP_SVG_BOLD, NULL, "%d", w);
        ptdp_svg_text(s, x + 50, y + 19, 11, PTDP_SVG_START, NULL, "dp %d \u00b7 tp %d \u00b7 pp %d", d, t, p);
        ptdp_svg_text(s, x + 50, y + 35, 11, PTDP_SVG_START, "#555555", "%d + %d\u00b7(%d + %d\u00b7%d) = %d", t,
                      TP, d, DP, p, w);
        char tpg[32], dpg[32], ppg[32];
        group_text(g, K_TP, tpg, sizeof tpg);
        group_text(g, K_DP, dpg, sizeof dpg);
        group_text(g, K_PP, ppg, sizeof ppg);
        ptdp_svg_text(s, x + 20, y + 56, 10, PTDP_SVG_START, "#333333", "tp %s dp %s pp %s", tpg, dpg, ppg);
    }
}

/* A small copy of the grid: each group of `kind` in its own colour, each
 * device showing its world rank and (small) its rank in the group. */
enum { MINI_W = 40, MINI_H = 30, MINI_GAP = 4, MINI_STAGE_GAP = 22, MINI_Y = 42 };

static void draw_kind(ptdp_svg *s, const mesh_report *rep, int kind, double x, double y, const char *title,
                      const char *rule, const char *use)
{
    static const char *const group_color[] = { "#a6cee3", "#b2df8a", "#fdbf6f", "#cab2d6" };
    int first[WORLD], group_of[WORLD];
    int n = distinct_groups(rep, kind, first, group_of);
    ptdp_svg_group_begin(s, NULL, x, y);
    ptdp_svg_text(s, 0, 0, 13, PTDP_SVG_BOLD, NULL, "%s", title);
    ptdp_svg_text(s, 0, 17, 11, PTDP_SVG_START, "#333333", "%s", rule);
    for (int p = 0; p < PP; p++)
        ptdp_svg_text(s, p * (TP * (MINI_W + MINI_GAP) + MINI_STAGE_GAP), MINI_Y - 4, 9.5, PTDP_SVG_START,
                      "#777777", "stage %d", p);
    for (int w = 0; w < WORLD; w++) {
        const device_groups *g = &rep->dev[w];
        int t = g->coord[K_TP], d = g->coord[K_DP], p = g->coord[K_PP];
        double bx = p * (TP * (MINI_W + MINI_GAP) + MINI_STAGE_GAP) + t * (MINI_W + MINI_GAP);
        double by = MINI_Y + d * (MINI_H + MINI_GAP);
        ptdp_svg_rect(s, bx, by, MINI_W, MINI_H, group_color[group_of[w] % 4], "#555555");
        ptdp_svg_text(s, bx + 5, by + 19, 13, PTDP_SVG_START | PTDP_SVG_BOLD, NULL, "%d", w);
        ptdp_svg_text(s, bx + MINI_W - 4, by + MINI_H - 4, 9, PTDP_SVG_END, "#333333", "#%d", g->rank_in[kind]);
    }
    double ly = MINI_Y + DP * (MINI_H + MINI_GAP) + 16;
    char list[128] = "", one[32];
    for (int i = 0; i < n; i++) {
        group_text(&rep->dev[first[i]], kind, one, sizeof one);
        size_t at = strlen(list);
        snprintf(list + at, sizeof list - at, "%s%s", i ? " " : "", one);
    }
    ptdp_svg_text(s, 0, ly, 12, PTDP_SVG_BOLD, NULL, "%d groups: %s", n, list);
    ptdp_svg_text(s, 0, ly + 16, 11, PTDP_SVG_START, "#333333", "%s", use);
    ptdp_svg_group_end(s);
}

int fig_mesh_groups(const char *path, char *msg, size_t msglen)
{
    static mesh_report rep;
    memset(&rep, 0, sizeof rep);
    int err = fig_ask_devices(WORLD, mesh_describe_device, &rep, "the dp 2 x tp 2 x pp 2 mesh", msg, msglen);
    if (err == 0)
        err = check_report(&rep, msg, msglen);
    if (err != 0)
        return err;

    ptdp_svg s;
    ptdp_svg_begin(&s, 980, 570);
    ptdp_svg_text(&s, 20, 26, 17, PTDP_SVG_BOLD, NULL,
                  "The 3D mesh: dp %d \u00d7 tp %d \u00d7 pp %d = %d devices, and their groups", DP, TP, PP, WORLD);
    ptdp_svg_text(&s, 20, 46, 12, PTDP_SVG_START, "#333333",
                  "Built by ptdp_mesh_init on %d real devices, as training builds it; each device's groups "
                  "read back with ptdp_comm_world_rank.", WORLD);
    ptdp_svg_text(&s, 20, 72, 13, PTDP_SVG_BOLD, "#08519c",
                  "world rank = tp_rank + tp \u00b7 (dp_rank + dp \u00b7 pp_rank) \u2014 tp fastest, then dp, "
                  "then pp, as in Megatron-LM");
    draw_grid(&s, &rep);

    const double ky = GRID_Y + DP * (BOX_H + BOX_GAP) + 40;
    ptdp_svg_line(&s, 20, ky - 22, 960, ky - 22, "#cccccc", 1, "4 4");
    draw_kind(&s, &rep, K_TP, 20, ky, "TP groups", "same dp and pp, ranked by tp_rank",
              "all-reduce activations in every block");
    draw_kind(&s, &rep, K_DP, 345, ky, "DP groups", "same tp and pp, ranked by dp_rank",
              "all-reduce gradients once a step");
    draw_kind(&s, &rep, K_PP, 670, ky, "PP groups", "same tp and dp, ranked by stage",
              "send activations on, gradients back");

    const device_groups *five = &rep.dev[5];
    char tpg[32], dpg[32], ppg[32];
    group_text(five, K_TP, tpg, sizeof tpg);
    group_text(five, K_DP, dpg, sizeof dpg);
    group_text(five, K_PP, ppg, sizeof ppg);
    const double ny = ky + MINI_Y + DP * (MINI_H + MINI_GAP) + 64;
    ptdp_svg_text(&s, 20, ny, 12, PTDP_SVG_START, "#333333",
                  "In the small grids, #k is the device's rank in that group (the key of ptdp_comm_split); "
                  "colour = one group.");
    /* the other member of each of device 5's groups (each has two) */
    int peer[KINDS];
    for (int k = 0; k < KINDS; k++)
        peer[k] = five->members[k][five->members[k][0] == 5 ? 1 : 0];
    ptdp_svg_text(&s, 20, ny + 18, 12.5, PTDP_SVG_BOLD, NULL,
                  "Device 5 (dp %d, tp %d, pp %d): TP group %s, DP group %s, PP group %s \u2014 it all-reduces "
                  "with %d in every block,", five->coord[K_DP], five->coord[K_TP], five->coord[K_PP], tpg, dpg, ppg,
                  peer[K_TP]);
    ptdp_svg_text(&s, 20, ny + 36, 12.5, PTDP_SVG_BOLD, NULL,
                  "its gradients with %d (the other replica of the same shard), and passes micro-batches "
                  "back to %d.", peer[K_DP], peer[K_PP]);
    return fig_finish(&s, path, msg, msglen);
}
