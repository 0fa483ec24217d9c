/*
 * train_report.c — the per-run report: what every device held, sent and did.
 *
 * At the end of `ptdp train`, for each device (rank, and its mesh
 * coordinates dp, tp, pp):
 *
 *   memory   peak bytes of each arena category (params, grads, optim, acts,
 *            comm, other) and of their sum — each peak on its own, so the
 *            categories need not add up to the total
 *   bytes    sent in each group (dp, tp, pp), per step
 *   time     virtual compute, communication and idle time over the whole
 *            run, from the device's clock (set-up included: building the
 *            mesh is three splits, each timed as a barrier)
 *
 * beside the formulas a student can check them with, e.g. the DP traffic
 * 2(N-1)/N x gradient bytes per device and step.  --report FILE writes the
 * same figures as JSON (schema in docs/report-schema.md), atomically
 * (ptdp/file.h): a temporary file, fsync, rename.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../args.h"
#include "ptdp/ep.h"
#include "ptdp/bf16.h"
#include "ptdp/error.h"
#include "ptdp/file.h"
#include "../model_flags.h"
#include "ptdp/json.h"
#include "ptdp/models.h"
#include "ptdp/mesh.h"
#include "ptdp/zero.h"
#include "ptdp/schedule.h"
#include "ptdp/launch.h"
#include "report.h"
#include "../html_pages.h"

#define REPORT_SCHEMA "ptdp-train-report/1"

/* The groups a run's bytes are told by: data, tensor and pipeline
 * parallelism, the GPT's embedding group (its tied wte's gradients, stage 0
 * and the last stage: gpt.h), context parallelism's ring (cp.h), and
 * expert parallelism's all-to-alls and expert-DP gradient sums (mesh.h),
 * and HSDP's shard and replica groups (zero_hsdp.c), which carry ZeRO's
 * traffic in place of the DP group's under --shard-group. */
static const char *const group_names[11] = { "dp", "tp", "pp", "emb", "cp", "ep", "edp", "shard", "replica",
                                              "etp", "fold" };
#define NGROUPS 11
#define NGROUPS_BEFORE_HSDP 7   /* the report's keys without shard groups */
#define NGROUPS_BEFORE_FOLD 9   /* ... and without MoE parallel folding's */

/* HSDP's shard groups' size when there are several (--shard-group N < dp,
 * zero_hsdp.c), else 0: ZeRO over the whole DP group. */
static int shard_groups_of(const ptdp_train_config *c)
{
    return c->shard_group > 0 && c->shard_group < c->dp ? c->shard_group : 0;
}

/* The ranks ZeRO cuts its states over: the shard group, or the DP group. */
static int zero_ranks(const ptdp_train_config *c)
{
    return shard_groups_of(c) > 0 ? shard_groups_of(c) : c->dp * ptdp_train_cp(c);
}

/* Rank r's coordinates, and "r (dp,tp,pp)" — "r (dp,cp,tp,pp)" under CP —
 * for the tables. */
static void coords(const ptdp_train_config *c, int r, int *d, int *cp, int *t, int *p, char *who, size_t n)
{
    ptdp_mesh_coords_cp(c->dp, ptdp_train_cp(c), c->tp, c->pp, r, d, cp, t, p);
    if (ptdp_train_cp(c) > 1)
        snprintf(who, n, "%d (%d,%d,%d,%d)", r, *d, *cp, *t, *p);
    else
        snprintf(who, n, "%d (%d,%d,%d)", r, *d, *t, *p);
}

/* Bytes a device sent in the group called `name` (0 if it never used it). */
static double group_sent(const ptdp_comm_stats *s, const char *name)
{
    for (int g = 0; g < s->ngroups; g++)
        if (strcmp(s->group[g].name, name) == 0)
            return s->group[g].sent;
    return 0;
}

const char *ptdp_report_group_name(int g)
{
    return g >= 0 && g < NGROUPS ? group_names[g] : NULL;
}

int ptdp_report_groups(const ptdp_train_config *c)
{
    if (ptdp_train_fold_slices(c) > 1)   /* MoE parallel folding's keys with it (moe_fold.c) */
        return NGROUPS;
    return shard_groups_of(c) > 0 ? NGROUPS_BEFORE_FOLD : NGROUPS_BEFORE_HSDP;   /* HSDP's keys with it */
}

double ptdp_report_group_sent(const ptdp_comm_stats *s, const char *name)
{
    return group_sent(s, name);
}

/* Elements of device r's parameters (= of its gradients): its stage and
 * its TP shard, as the run counted them (ptdp_train_result). */
static double device_elements(const ptdp_train_result *res, int r)
{
    return res != NULL && res->param_elements != NULL ? (double)res->param_elements[r] : 0;
}

/* A device's number of the run's counter `name` (counters.h), or 0 when
 * nothing published it. */
static double device_count(const ptdp_train_result *res, int r, const char *name)
{
    const double *x = ptdp_train_device_counts(res, r, name);
    return x != NULL ? x[0] : 0;
}

/* Of device r's parameter elements, the experts' under expert parallelism
 * (ep.h's counter; 0 without). */
static double expert_elements(const ptdp_train_result *res, int r)
{
    return device_count(res, r, "expert_elements");
}

/* Does any device send in group g?  (The emb column only when it does.) */
static bool group_used(const ptdp_launch_result *lr, int g)
{
    for (int r = 0; r < lr->world_size; r++)
        if (group_sent(&lr->devices[r].comm, group_names[g]) > 0)
            return true;
    return g < 3;
}

static double per_step(double x, const ptdp_train_config *c)
{
    return c->steps > 0 ? x / c->steps : 0;
}

/* ------------------------------------------------------------ the tables */

static void print_memory(const ptdp_train_config *c, const ptdp_launch_result *lr)
{
    char b[PTDP_MEM_NCAT + 1][32];
    printf("peak memory per device (each category's own peak):\n  %-14s",
           ptdp_train_cp(c) > 1 ? "device (dp,cp,tp,pp)" : "device (dp,tp,pp)");
    for (int k = 0; k < PTDP_MEM_NCAT; k++)
        printf(" %11s", ptdp_mem_category_name((ptdp_mem_category)k));
    printf(" %11s\n", "total");
    for (int r = 0; r < lr->world_size; r++) {
        const ptdp_mem_stats *m = &lr->devices[r].mem;
        int d, q, t, p;
        char who[32];
        coords(c, r, &d, &q, &t, &p, who, sizeof who);
        printf("  %-17s", who);
        for (int k = 0; k < PTDP_MEM_NCAT; k++)
            printf(" %11s", ptdp_format_bytes((double)m->peak[k], b[k], sizeof b[k]));
        printf(" %11s\n", ptdp_format_bytes((double)m->peak_total, b[PTDP_MEM_NCAT], sizeof b[0]));
    }
}

static void print_traffic_and_time(const ptdp_train_config *c, const ptdp_launch_result *lr)
{
    char b[NGROUPS + 1][32];
    printf("bytes sent per device and step (mean of %d step%s) by group; virtual time of the whole run:\n  %-17s",
           c->steps, c->steps == 1 ? "" : "s", ptdp_train_cp(c) > 1 ? "device (dp,cp,tp,pp)" : "device (dp,tp,pp)");
    for (int g = 0; g < NGROUPS; g++)
        if (group_used(lr, g))
            printf(" %9s sent", group_names[g]);
    printf(" %11s %11s %11s %11s\n", "total sent", "compute us", "comm us", "idle us");
    for (int r = 0; r < lr->world_size; r++) {
        const ptdp_device_summary *s = &lr->devices[r];
        int d, q, t, p;
        char who[32];
        coords(c, r, &d, &q, &t, &p, who, sizeof who);
        printf("  %-17s", who);
        for (int g = 0; g < NGROUPS; g++)
            if (group_used(lr, g))
                printf(" %14s", ptdp_format_bytes(per_step(group_sent(&s->comm, group_names[g]), c), b[g],
                                                  sizeof b[g]));
        printf(" %11s %11.2f %11.2f %11.2f\n", ptdp_format_bytes(per_step(s->comm.total_sent, c), b[NGROUPS],
                                                                sizeof b[NGROUPS]),
               s->clock.compute_s * 1e6, s->clock.comm_s * 1e6, s->clock.idle_s * 1e6);
    }
}

/* Bytes per parameter of each model state: the store's element (this
 * build's ptdp_real, or bf16's 2 under --precision bf16: mixed.h) for a
 * parameter and a gradient; the optimizer's slots (AdamW 2, SGD with
 * momentum 1), each a ptdp_real, plus the float master weight under bf16. */
static void state_bytes(const ptdp_train_config *c, double *bw, double *bg, double *bo)
{
    const int slots = c->optimizer == PTDP_OPT_ADAMW ? 2 : c->momentum > 0 ? 1 : 0;
    const ptdp_zero_sizes b = ptdp_zero_sizes_of(c->bf16, slots);   /* zero.h */
    *bw = b.bw;
    *bg = b.bg;
    *bo = b.bo;
}

/* The backwards whose gradients ZeRO-2 reduce-scatters a step: one per
 * (chunk, micro-batch) when interleaved, per (micro-batch, token slice)
 * with TeraPipe; a split backward (zb-h1) reduce-scatters ZeRO-2's bucket
 * after B and again after W (pp.c): twice per micro-batch. */
static int gradient_sums(const ptdp_train_config *c)
{
    int M = c->micro_batches * ptdp_train_virtual_stages(c) * ptdp_train_token_slices(c);
    const ptdp_schedule_entry *e = ptdp_train_schedule(c);
    return ptdp_zero_backwards(ptdp_zero_stage_of(c->zero), M, (e->caps & PTDP_SCHED_SPLIT_BACKWARD) != 0);
}

int ptdp_report_gradient_sums(const ptdp_train_config *c)
{
    return gradient_sums(c);
}

/* --zero-qgz (zero3_qgz.c): the gradient's reduce-scatter, M(N-1)/N S b,
 * leaves ZeRO's group for qgZ's two groups (train_report_qgz.c). */
static double qgz_change(const ptdp_train_config *c, const ptdp_train_result *res, int r, int N, int M, double b)
{
    if (c->zero_qgz <= 0 || N <= 1)
        return 0;
    return -(double)M * (N - 1.0) / N * device_elements(res, r) * b;
}

/* Expert parallelism per device and step (means over devices): the EP
 * group's all-to-alls measured, by the formula from the loads they moved
 * (ep.h's counter "ep_bytes") and by the uniform-routing estimate;
 * the expert-DP group's gradient sums measured and by DP's formula with
 * the experts' elements over N / ep. */
typedef struct { double ep, ep_formula, ep_uniform, edp, edp_formula; } ep_traffic;

/* The expert-DP group's size: the token holders of a stage, tp / etp
 * slices of each of the dp x cp replicas, over ep. */
static int edp_size(const ptdp_train_config *c)
{
    return ptdp_train_fold_slices(c) * c->dp * ptdp_train_cp(c) / (c->ep > 1 ? c->ep : 1);
}

/* Without ZeRO's sharded optimizer each replica holds its experts whole,
 * and the gradient norm adds their squares in one double all-reduce a
 * step (model.c): over the EP group, or under folding over the DP group. */
static double expert_norm_bytes(const ptdp_train_config *c, int N)
{
    return ptdp_zero_stage_of(c->zero)->shards_optim || N <= 1 ? 0.0 : 2.0 * (N - 1) / N * sizeof(double);
}

static ep_traffic ep_traffic_of(const ptdp_train_config *c, const ptdp_launch_result *lr,
                                const ptdp_train_result *res)
{
    ep_traffic t = { 0 };
    const int Ne = edp_size(c), M = gradient_sums(c);
    double bw, bg, bo;
    state_bytes(c, &bw, &bg, &bo);
    for (int r = 0; r < lr->world_size; r++) {
        t.ep += per_step(group_sent(&lr->devices[r].comm, "ep"), c);
        t.ep_formula += per_step(device_count(res, r, "ep_bytes"), c);
        t.edp += per_step(group_sent(&lr->devices[r].comm, "edp"), c);
        t.edp_formula += bg / sizeof(ptdp_real) * ptdp_zero_dp_bytes_per_step(c->zero, (size_t)expert_elements(res, r),
                                                                             Ne, M);
    }
    const double n = lr->world_size > 0 ? lr->world_size : 1;
    t.ep /= n;
    t.ep_formula /= n;
    t.edp /= n;
    t.edp_formula /= n;
    /* without ZeRO (a stage whose row shards nothing) each replica holds
     * its EP rank's experts whole: the gradient norm adds their squares
     * over the EP group, one double all-reduced a step, 2(N-1)/N x 8
     * bytes a device on average (zero.c) */
    if (ptdp_train_fold_slices(c) == 1)
        t.ep_formula += expert_norm_bytes(c, c->ep > 1 ? c->ep : 1);
    const ptdp_model_cli *cli = ptdp_model_cli_of(&c->model);
    t.ep_uniform = cli->ep_uniform_bytes != NULL ? cli->ep_uniform_bytes(c) : NAN;
    return t;
}

/* Per step, the mean over devices of the EP all-to-alls' time (the
 * collectives marked overlappable, pair.h) and of the part of it hidden
 * under overlapped F&B pairs' compute; the rest was exposed. */
static void ep_clock_means(const ptdp_train_config *c, const ptdp_launch_result *lr, double *a2a, double *hidden)
{
    *a2a = *hidden = 0;
    for (int r = 0; r < lr->world_size; r++) {
        *a2a += lr->devices[r].clock.pairable_s;
        *hidden += lr->devices[r].clock.pair_hidden_s;
    }
    double n = (double)lr->world_size * (c->steps > 0 ? c->steps : 1);
    *a2a /= n > 0 ? n : 1;
    *hidden /= n > 0 ? n : 1;
}

/* On a cluster of nodes (ep_nodes.c): the dispatch's rows that leave
 * their node, per device and step (means), as the all-to-all sends them
 * and one copy a remote node as DeepEP would; the combine mirrors them. */
static bool ep_network(const ptdp_train_config *c, const ptdp_launch_result *lr, const ptdp_train_result *res,
                       double *net, double *per_node)
{
    bool counted = false;
    *net = *per_node = 0;
    for (int r = 0; r < lr->world_size; r++) {
        counted = counted || ptdp_train_device_counts(res, r, "ep_net_rows") != NULL;
        *net += per_step(device_count(res, r, "ep_net_rows"), c) / lr->world_size;
        *per_node += per_step(device_count(res, r, "ep_net_rows_per_node"), c) / lr->world_size;
    }
    return counted && *net > 0;   /* an EP group inside one node sends nothing over the network */
}

/* Those rows priced on the profile's two link levels, seconds a step over
 * the EP exchanges (dispatch and combine, forward and backward, and the
 * forward again under full recompute), each moving the forward
 * dispatch's rows: the all-to-all sends each network row over the
 * device's NIC; DeepEP's pattern sends one copy a remote node over it and
 * forwards every choice inside the target node over NVLink (bandwidth
 * terms only; latency aside). */
static void ep_network_seconds(const ptdp_train_config *c, const ptdp_profile *p, double net, double per_node,
                               double *a2a, double *deepep)
{
    const double row = (double)c->model.hidden * sizeof(ptdp_real), n = c->recompute ? 6 : 4;
    const double nic = p->net_beta_Bps > 0 ? p->net_beta_Bps : p->beta_Bps, link = p->beta_Bps;
    *a2a = nic > 0 ? n * net * row / nic : 0;
    *deepep = (nic > 0 ? n * per_node * row / nic : 0) + (link > 0 ? n * net * row / link : 0);
}

static void print_ep_network(const ptdp_train_config *c, const ptdp_launch_result *lr, const ptdp_train_result *res,
                             const ptdp_profile *p)
{
    double net, per_node, a2a, deepep;
    if (!ep_network(c, lr, res, &net, &per_node))
        return;   /* one node, or an EP group inside one */
    const double row = (double)c->model.hidden * sizeof(ptdp_real);
    char a[32], b[32], nic[32], link[32];
    printf("  across nodes: the forward dispatch sends %.0f rows a step over the network (%s), one a choice of an "
           "expert\n  in another node; one copy a remote node, forwarded inside it (DeepEP), would send %.0f (%s); "
           "the combine\n  mirrors it\n", net, ptdp_format_bytes(net * row, a, sizeof a), per_node,
           ptdp_format_bytes(per_node * row, b, sizeof b));
    ep_network_seconds(c, p, net, per_node, &a2a, &deepep);
    printf("  priced on two link levels (%s: a GPU's NIC %s/s, NVLink %s/s) over the %d exchanges a block and\n"
           "  micro-batch: the all-to-all's network rows %.2f us a step; DeepEP's, one copy a node over the NIC and\n"
           "  every choice forwarded on NVLink, %.2f us (bandwidth terms, rows x C x %zu B a link; latency aside)\n", p->name, ptdp_format_bytes(p->net_beta_Bps, nic, sizeof nic),
           ptdp_format_bytes(p->beta_Bps, link, sizeof link), c->recompute ? 6 : 4, a2a * 1e6, deepep * 1e6,
           sizeof(ptdp_real));
}

/* MoE parallel folding's re-layout per device and step (means over
 * devices): the fold group's all-gathers measured and by moe_fold.c's
 * formula, (S-1)/S R C x element each (the counter "moe_fold_bytes"). */
static void fold_traffic(const ptdp_train_config *c, const ptdp_launch_result *lr, const ptdp_train_result *res,
                         double *measured, double *formula)
{
    *measured = *formula = 0;
    for (int r = 0; r < lr->world_size; r++) {
        *measured += per_step(group_sent(&lr->devices[r].comm, "fold"), c);
        *formula += per_step(device_count(res, r, "moe_fold_bytes"), c);
    }
    *measured /= lr->world_size > 0 ? lr->world_size : 1;
    *formula /= lr->world_size > 0 ? lr->world_size : 1;
}

static void print_fold(const ptdp_train_config *c, const ptdp_launch_result *lr, const ptdp_train_result *res)
{
    double measured, formula;
    fold_traffic(c, lr, res, &measured, &formula);
    const int S = ptdp_train_fold_slices(c);
    printf("MoE parallel folding, experts' TP %d of attention's %d: each TP group's rows in %d slices of whole "
           "sequences,\n  one a rank, routed there; the fold group's all-gathers (a block's output, forward, and "
           "its input\n  gradient, backward) rebuild the rows: measured %.0f B per device and step, formula %.0f B "
           "((S-1)/S R C x %zu B each);\n  expert-DP groups of %d = tp / etp x dp x cp / ep\n", c->etp, c->tp, S,
           measured, formula, sizeof(ptdp_real), edp_size(c));
}

static void print_expert_parallel(const ptdp_train_config *c, const ptdp_launch_result *lr,
                                  const ptdp_train_result *res, const ptdp_profile *p)
{
    if (c->steps == 0 || (c->ep <= 1 && ptdp_train_fold_slices(c) == 1))
        return;
    if (ptdp_train_fold_slices(c) > 1)
        print_fold(c, lr, res);
    const ep_traffic t = ep_traffic_of(c, lr, res);
    if (c->ep <= 1) {   /* folding alone: the experts whole on each rank, summed over the expert-DP group */
        printf("expert data parallelism, N = %d: the experts' gradients summed over the ranks holding the same "
               "experts,\n  measured %.0f B per device and step, formula %.0f B (DP's rule with the experts' "
               "elements)\n", edp_size(c), t.edp, t.edp_formula);
        return;
    }
    const int Ne = edp_size(c);
    const int a2a = c->recompute ? 6 : 4;   /* dispatch and combine, forward and backward (and forward again) */
    printf("expert parallelism, N = %d: EP bytes sent per device and step (means over devices)\n"
           "  measured %.0f B; formula %.0f B from the measured loads: the rows routed to experts held elsewhere\n"
           "  x C x %zu B in each of %d all-to-alls a MoE block and micro-batch, the counts%s;\n"
           "  if the router spread every token evenly, k T_r C (N-1)/N each: %.0f B\n", c->ep, t.ep, t.ep_formula,
           c->bf16 ? sizeof(ptdp_bf16) : sizeof(ptdp_real), a2a, expert_norm_bytes(c, 2) > 0 && ptdp_train_fold_slices(c) == 1 ? ",\n  the experts' gradient norm (a double, 2(N-1)/N x 8 B)" : "",
           t.ep_uniform);
    if (c->fp8.comm) {   /* --fp8-comm: the forward dispatch's rows as codes and scales (ep.h) */
        const int C = c->model.hidden, tc = c->fp8.recipe->act_tile[1];
        printf("  --fp8-comm: the forward dispatch sends a row as C codes of 1 B + %d scale%s (1x%d tiles) x %zu B "
               "= %.0f B,\n  in place of C x %zu B = %zu B (bf16's C x 2 B = %d B); the other three all-to-alls "
               "as before\n", (C + tc - 1) / tc, (C + tc - 1) / tc == 1 ? "" : "s", tc, sizeof(ptdp_real),
               ptdp_ep_fp8_row_bytes(c->fp8.recipe, C), sizeof(ptdp_real), (size_t)C * sizeof(ptdp_real), 2 * C);
    }
    print_ep_network(c, lr, res, p);
    printf("expert data parallelism, N / ep = %d: the experts' gradients summed over the ranks holding the same "
           "experts,\n  measured %.0f B per device and step, formula %.0f B (DP's rule with the experts' elements)\n",
           Ne, t.edp, t.edp_formula);
    double time, hidden;
    ep_clock_means(c, lr, &time, &hidden);
    if (hidden > 0 || c->serial_pairs)   /* a schedule of overlapped F&B pairs (pair.h) */
        printf("  EP all-to-alls %.2f us per device and step, of which %.2f us under the compute of F&B pairs "
               "(%.0f%% hidden; %.2f us exposed)%s\n", time * 1e6, hidden * 1e6,
               time > 0 ? 100.0 * hidden / time : 0.0, (time - hidden) * 1e6,
               c->serial_pairs ? " (--no-pair-overlap)" : "");
}

/* --fp8-comm under ZeRO-3 (zero3_fp8.c): each of a step's 2M gathers
 * puts W bytes in its all-gathers' buffers instead of S b — every FP8
 * weight element a 1-B code, each unit's N wires padded to the largest —
 * and all-reduces T amaxes first.  Device r's gathers a step, by the
 * formula: 2M ((N-1)/N W + 2(N-1)/N T r). */
static double fp8_gathers(const ptdp_train_result *res, int r, int N, int M)
{
    const double W = device_count(res, r, "fp8_gather_bytes"), T = device_count(res, r, "fp8_gather_tiles");
    return 2.0 * M * (N - 1.0) / N * (W + 2.0 * T * sizeof(ptdp_real));
}

/* What that changes in the stage's formula 3M(N-1)/N S b. */
static double fp8_gather_change(const ptdp_train_config *c, const ptdp_train_result *res, int r, int N, int M,
                                double b)
{
    if (c->zero != 3 || !c->fp8.comm || N <= 1)
        return 0;
    return fp8_gathers(res, r, N, M) - 2.0 * M * (N - 1.0) / N * device_elements(res, r) * b;
}

/* --zero-qwz (zero3_qwz.c): each of a step's M forward gathers puts W
 * bytes (INT8 codes and a scale a block, each unit's wires padded to its
 * largest rank's) in place of S b; the backward's stays exact. */
static double qwz_gather_change(const ptdp_train_config *c, const ptdp_train_result *res, int r, int N, int M,
                                double b)
{
    if (c->zero_qwz <= 0 || N <= 1)
        return 0;
    return M * (N - 1.0) / N * (device_count(res, r, "qwz_gather_bytes") - device_elements(res, r) * b);
}

static void print_qwz_gather(const ptdp_train_config *c, const ptdp_train_result *res, int N, double b)
{
    if (c->zero_qwz <= 0 || N <= 1)
        return;
    const double S = device_elements(res, 0), W = device_count(res, 0, "qwz_gather_bytes");
    char x[4][32];
    printf("  --zero-qwz: a forward gather of device 0's units puts W = %s in the all-gathers (S = %.0f INT8 "
           "codes\n  and a %zu-B scale a block of %d of each rank's shard, each unit's wires padded to its largest "
           "rank's)\n  in place of S %.0f = %s (bf16's 2S = %s); each rank sends (N-1)/N W = %s; the backward's "
           "gather stays exact\n", ptdp_format_bytes(W, x[0], sizeof x[0]), S, sizeof(ptdp_real), c->zero_qwz, b,
           ptdp_format_bytes(S * b, x[1], sizeof x[1]), ptdp_format_bytes(2 * S, x[2], sizeof x[2]),
           ptdp_format_bytes((N - 1.0) / N * W, x[3], sizeof x[3]));
}

static void print_fp8_gather(const ptdp_train_config *c, const ptdp_train_result *res, int N, double b)
{
    if (c->zero != 3 || !c->fp8.comm || N <= 1)
        return;
    const double S = device_elements(res, 0), q = device_count(res, 0, "fp8_gather_elements");
    const double T = device_count(res, 0, "fp8_gather_tiles"), W = device_count(res, 0, "fp8_gather_bytes");
    const double share = (N - 1.0) / N;
    char x[5][32];
    printf("  --fp8-comm: a gather of device 0's units sends its q = %.0f FP8 weight elements (of S = %.0f) as "
           "1-B codes\n  and the rest as %.0f-B values, W = %s with each unit's wires padded to its largest "
           "rank's (unpadded q + (S-q) %.0f = %s),\n  after an all-reduce of T = %.0f amaxes: (N-1)/N W + "
           "2(N-1)/N T %zu = %s, against (N-1)/N S %.0f = %s (in bf16, (N-1)/N 2S = %s)\n",
           q, S, b, ptdp_format_bytes(W, x[0], sizeof x[0]), b, ptdp_format_bytes(q + (S - q) * b, x[1], sizeof x[1]),
           T, sizeof(ptdp_real), ptdp_format_bytes(share * (W + 2 * T * sizeof(ptdp_real)), x[2], sizeof x[2]), b,
           ptdp_format_bytes(share * S * b, x[3], sizeof x[3]), ptdp_format_bytes(share * 2 * S, x[4], sizeof x[4]));
}

/* HSDP's traffic a step, means over devices: measured in the shard and
 * replica groups, and by the formula — the row's passes inside the shard
 * group of N, and one all-reduce of the shard, 2(R-1)/(RN) S, across the
 * R = dp / N replicas (zero_hsdp.c). */
typedef struct { double shard, shard_formula, replica, replica_formula, grads; } hsdp_traffic;

static hsdp_traffic hsdp_traffic_of(const ptdp_train_config *c, const ptdp_launch_result *lr,
                                    const ptdp_train_result *res)
{
    hsdp_traffic t = { 0 };
    const int N = shard_groups_of(c), R = N > 0 ? c->dp / N : 1, M = gradient_sums(c);
    double bw, bg, bo;
    state_bytes(c, &bw, &bg, &bo);
    for (int r = 0; N > 0 && r < lr->world_size; r++) {
        const double S = device_elements(res, r);
        t.shard += per_step(group_sent(&lr->devices[r].comm, "shard"), c);
        t.replica += per_step(group_sent(&lr->devices[r].comm, "replica"), c);
        /* hpZ (zero_hpz.c) moves the backward's gather into the node group: 2 of ZeRO-3's 3 passes stay */
        t.shard_formula += bg / sizeof(ptdp_real) * ptdp_zero_dp_bytes_per_step(c->zero, (size_t)S, N, M) *
                           (c->zero_hpz > 0 ? 2.0 / 3.0 : 1.0);
        t.shard_formula += fp8_gather_change(c, res, r, N, M, bg);   /* --fp8-comm's codes (zero3_fp8.c) */
        t.shard_formula += qwz_gather_change(c, res, r, N, M, bg);   /* qwZ's INT8 (zero3_qwz.c) */
        t.shard_formula += qgz_change(c, res, r, N, M, bg);          /* qgZ's all-to-alls (zero3_qgz.c) */
        t.replica_formula += 2.0 * (R - 1) / R * (S / N) * bg;
        t.grads += S * bg;
    }
    const double n = lr->world_size > 0 ? lr->world_size : 1;
    t.shard /= n;
    t.shard_formula /= n;
    t.replica /= n;
    t.replica_formula /= n;
    t.grads /= n;
    return t;
}

/* The shard group's formula: the row's, or ZeRO-3's passes as hpZ, FP8's
 * or qwZ's gathers change them — less the reduce-scatter under qgZ, whose
 * all-to-alls have their own groups (train_report_qgz.c). */
static const char *hsdp_shard_rule(const ptdp_train_config *c, char *rule, size_t n)
{
    const char *gathers = c->zero_qgz > 0 ? "M(N-1)/N S" : "2M(N-1)/N S";   /* qgZ: no reduce-scatter here */
    if (c->zero_hpz > 0)
        snprintf(rule, n, "%s (hpZ)", gathers);
    else if (c->zero == 3 && c->fp8.comm)
        snprintf(rule, n, "%s2M((N-1)/N W + 2(N-1)/N T r) (FP8 gathers)", c->zero_qgz > 0 ? "" : "M(N-1)/N S + ");
    else if (c->zero_qwz > 0)
        snprintf(rule, n, "%s + M(N-1)/N W (qwZ's forward gathers)", gathers);
    else if (c->zero_qgz > 0)
        snprintf(rule, n, "2M(N-1)/N S (the gathers; qgZ's all-to-alls below)");
    else
        snprintf(rule, n, "%s", ptdp_zero_stage_of(c->zero)->dp_rule);
    return rule;
}

static void print_hsdp(const ptdp_train_config *c, const ptdp_launch_result *lr, const ptdp_train_result *res)
{
    const int N = shard_groups_of(c), R = c->dp / N;
    const hsdp_traffic t = hsdp_traffic_of(c, lr, res);
    char b[5][32];
    printf("HSDP, %d shard groups of N = %d, R = %d replicas of each shard: bytes sent per device and step "
           "(S = %s of gradients per device, mean)\n", R, N, R, ptdp_format_bytes(t.grads, b[0], sizeof b[0]));
    char rule[128];
    printf("  shard group   %s inside it: formula %s = %s, measured %s\n", ptdp_zero_stage_of(c->zero)->name,
           hsdp_shard_rule(c, rule, sizeof rule),
           ptdp_format_bytes(t.shard_formula, b[1], sizeof b[1]),
           ptdp_format_bytes(t.shard, b[2], sizeof b[2]));
    printf("  replica group the shard all-reduced once a step: formula 2(R-1)/(RN) S = %s, measured %s\n",
           ptdp_format_bytes(t.replica_formula, b[3], sizeof b[3]), ptdp_format_bytes(t.replica, b[4], sizeof b[4]));
}

/* The formula of the stage's row and of the algorithm that ran.  The
 * naive all-reduce (reduce to rank 0, broadcast) sends as much in all
 * as the ring, but unevenly: the root sends (N-1) S, every other rank
 * S — a mean of 2(N-1)/N S. */
static void dp_rule(const ptdp_train_config *c, const ptdp_train_result *res, ptdp_algo algo, int N, char *rule,
                    size_t n)
{
    const ptdp_zero_stage *row = ptdp_zero_stage_of(c->zero);
    if (row->path == PTDP_ZERO_PATH_ALL_REDUCE && algo == PTDP_ALGO_NAIVE)
        snprintf(rule, n, "naive, root (N-1) S and the others S: a mean of 2(N-1)/N S");
    else
        snprintf(rule, n, "%s%s", row->dp_rule, c->recompute ? row->recompute_rule : "");
    if (c->zero == 3 && c->fp8.comm && N > 1)   /* --fp8-comm: the gathers' codes and amaxes */
        snprintf(rule + strlen(rule), n - strlen(rule), ", its gathers 2M((N-1)/N W + 2(N-1)/N T %zu) in "
                 "place of 2M(N-1)/N S", sizeof(ptdp_real));
    if (c->zero_qwz > 0 && N > 1)   /* qwZ: the forward gathers' INT8 */
        snprintf(rule + strlen(rule), n - strlen(rule), ", its forward gathers M(N-1)/N W (qwZ) in place of "
                 "M(N-1)/N S");
    if (c->zero_qgz > 0 && N > 1)   /* qgZ: the gradient's sum in its own two groups */
        snprintf(rule + strlen(rule), n - strlen(rule), ", less its reduce-scatter M(N-1)/N S (qgZ's all-to-alls "
                 "below)");
    if (device_count(res, 0, "moe_bias_bytes") > 0)   /* --moe-bias-update: the loads' all-reduce too */
        snprintf(rule + strlen(rule), n - strlen(rule), " + 2(N-1)/N 8 n E (expert loads)");
    if (device_count(res, 0, "fp8_amax_bytes") > 0)   /* --fp8 delayed: the step amaxes' all-reduce */
        snprintf(rule + strlen(rule), n - strlen(rule), " + 2(N-1)/N 3P %zu (delayed's amaxes)", sizeof(ptdp_real));
}

/* The DP traffic beside its formula, and what ZeRO bought with it. */
static void print_data_parallel(const ptdp_train_config *c, const ptdp_launch_result *lr,
                                const ptdp_train_result *res, ptdp_algo algo)
{
    if (c->dp * ptdp_train_cp(c) == 1 || c->steps == 0)
        return;
    int N = zero_ranks(c), M = gradient_sums(c);
    const bool split = M != c->micro_batches * ptdp_train_virtual_stages(c) * ptdp_train_token_slices(c);
    double measured = 0, formula = 0, grads = 0, bw, bg, bo;
    state_bytes(c, &bw, &bg, &bo);
    const double shrink = bg / sizeof(ptdp_real);   /* bf16 moves 2 bytes an element */
    for (int r = 0; r < lr->world_size; r++) {
        double S = device_elements(res, r) - expert_elements(res, r);   /* the experts': the EDP group's */
        measured += per_step(group_sent(&lr->devices[r].comm, "dp"), c);
        formula += shrink * ptdp_zero_dp_bytes_per_step(c->zero, (size_t)S, N, M);   /* the row's passes */
        formula += fp8_gather_change(c, res, r, N, M, bg);   /* --fp8-comm's codes (zero3_fp8.c) */
        formula += qwz_gather_change(c, res, r, N, M, bg);   /* qwZ's INT8 (zero3_qwz.c) */
        formula += qgz_change(c, res, r, N, M, bg);          /* qgZ's all-to-alls (zero3_qgz.c) */
        formula += per_step(device_count(res, r, "moe_bias_bytes"), c);   /* the expert loads' sum (moe.h) */
        if (ptdp_train_fold_slices(c) > 1)   /* folding: the experts' squares over DP (model.c) */
            formula += expert_norm_bytes(c, c->dp * ptdp_train_cp(c));
        formula += per_step(device_count(res, r, "fp8_amax_bytes"), c);   /* delayed's step amaxes (fp8_linear.h) */
        grads += S * bg;
    }
    measured /= lr->world_size;
    formula /= lr->world_size;
    grads /= lr->world_size;
    char b[4][32], rule[192];
    dp_rule(c, res, algo, N, rule, sizeof rule);
    const ptdp_zero_stage *row = ptdp_zero_stage_of(c->zero);
    if (shard_groups_of(c) > 0)
        print_hsdp(c, lr, res);
    else if (c->zero_hpz > 0)   /* its bytes by link level: ptdp_report_print_hpz */
        printf("data parallelism, N = %d: ZeRO-3 with hpZ, its bytes by link level below\n", N);
    else
        printf("data parallelism, N = %d: DP bytes sent per device and step, formula %s = %s "
               "(S = %s of gradients per device, mean), measured %s\n",
               N, rule, ptdp_format_bytes(formula, b[0], sizeof b[0]), ptdp_format_bytes(grads, b[1], sizeof b[1]),
               ptdp_format_bytes(measured, b[2], sizeof b[2]));
    print_fp8_gather(c, res, N, bg);
    print_qwz_gather(c, res, N, bg);
    if (!row->shards_optim)
        return;
    const ptdp_mem_stats *m0 = &lr->devices[0].mem;
    /* Each state in bytes of its own element: gradients bg (2 in bf16),
     * the optimizer's slots (and bf16's float master) bo (state_bytes). */
    const double psi0 = device_elements(res, 0), S0 = psi0 * bg;
    int slots = c->optimizer == PTDP_OPT_ADAMW ? 2 : c->momentum > 0 ? 1 : 0;
    printf("  %s on device 0: ", row->name);
    if (slots > 0)
        printf("optimizer state %s (without ZeRO %s: 1/%d of it)",
               ptdp_format_bytes((double)m0->peak[PTDP_MEM_OPTIM], b[0], sizeof b[0]),
               ptdp_format_bytes(psi0 * bo, b[1], sizeof b[1]), N);
    else
        printf("no optimizer state to shard (SGD without momentum), each rank updates 1/%d", N);
    if (!row->shards_grads) {
        printf("; the same bytes as plain DP\n");
        return;
    }
    if (row->shards_params) {
        printf(",\n  gradients %s and parameters %s at their peaks: 1/%d of %s each (%s), plus the units "
               "gathered at once\n", ptdp_format_bytes((double)m0->peak[PTDP_MEM_GRADS], b[2], sizeof b[2]),
               ptdp_format_bytes((double)m0->peak[PTDP_MEM_PARAMS], b[3], sizeof b[3]), N,
               ptdp_format_bytes(S0, b[0], sizeof b[0]), ptdp_format_bytes(S0 / N, b[1], sizeof b[1]));
        printf("  the price: every unit gathered before its forward and again before its backward, its gradient "
               "reduce-scattered after: 3M(N-1)/N S per step for M = %d, against plain DP's 2(N-1)/N S\n", M);
        return;
    }
    if (c->bf16)   /* the peak adds the float gradients of the units in use (zero3.c) */
        printf(",\n  gradients %s at their peak: the bf16 shard, 1/%d of %s (%s), + %s of float gradients of the "
               "units in use;\n", ptdp_format_bytes((double)m0->peak[PTDP_MEM_GRADS], b[2], sizeof b[2]), N,
               ptdp_format_bytes(S0, b[3], sizeof b[3]), ptdp_format_bytes(S0 / N, b[0], sizeof b[0]),
               ptdp_format_bytes((double)m0->peak[PTDP_MEM_GRADS] - S0 / N, b[1], sizeof b[1]));
    else
        printf(", gradients %s (1/%d of %s);\n", ptdp_format_bytes((double)m0->peak[PTDP_MEM_GRADS], b[2],
               sizeof b[2]), N, ptdp_format_bytes(S0, b[3], sizeof b[3]));
    printf("  the price: a reduce-scatter after each of the M = %d backwards%s, (M+1)(N-1)/N S instead of 2(N-1)/N S "
           "(x%.2f bytes);\n  a full-size bucket (category comm) lives while one backward runs (zero.h explains)\n",
           M, split ? " (B and W each count: a split backward reduce-scatters twice)" : "", (M + 1) / 2.0);
}

/* Per step, the mean over devices of the communication stream's time (the
 * non-blocking collectives: --overlap's DP buckets) and of the part of it
 * the compute stream never waited for (clock.h). */
static void overlap_means(const ptdp_train_config *c, const ptdp_launch_result *lr, double *stream, double *hidden)
{
    *stream = *hidden = 0;
    for (int r = 0; r < lr->world_size; r++) {
        *stream += lr->devices[r].clock.stream_s;
        *hidden += lr->devices[r].clock.hidden_s;
    }
    double n = (double)lr->world_size * (c->steps > 0 ? c->steps : 1);
    *stream /= n > 0 ? n : 1;
    *hidden /= n > 0 ? n : 1;
}

/* --overlap: how much of the DP communication the backward hid (under
 * ZeRO-2: the compute between one backward and the next, zero.h); under
 * --sp the stream also carries SP's backward all-gathers (gpt_ops.c). */
static void print_overlap(const ptdp_train_config *c, const ptdp_launch_result *lr)
{
    if (!c->overlap || c->steps == 0)
        return;
    double stream, hidden;
    overlap_means(c, lr, &stream, &hidden);
    printf("overlap: DP communication%s %.2f us per step and device, of which %.2f us under %s "
           "(%.0f%% hidden; %.2f us exposed)\n",
           c->sp ? " and SP's backward all-gathers (under the input-gradient products)" : "", stream * 1e6,
           hidden * 1e6,
           ptdp_zero_stage_of(c->zero)->overlap_under,
           stream > 0 ? 100.0 * hidden / stream : 0.0, (stream - hidden) * 1e6);
}

/* The model states of device 0 beside the ZeRO paper's formula (zero.h):
 * its own bytes per parameter (this build's float or double; AdamW's two
 * moments), the measured peaks of params, grads and optim — which add to
 * the formula what lives for a moment: ZeRO-2's bucket is "comm", ZeRO-3's
 * gathered units are "params" and its unit gradients "grads". */
static ptdp_zero_bytes model_state_formula(const ptdp_train_config *c, const ptdp_train_result *res, int r)
{
    double bw, bg, bo;
    state_bytes(c, &bw, &bg, &bo);
    const int N = zero_ranks(c);
    const double Se = expert_elements(res, r);   /* sharded over the expert-DP group, N / ep (folding: edp_size) */
    ptdp_zero_bytes d = ptdp_zero_state_bytes(c->zero, device_elements(res, r) - Se, N, bw, bg, bo);
    ptdp_zero_bytes e = ptdp_zero_state_bytes(c->zero, Se, edp_size(c), bw, bg, bo);
    return (ptdp_zero_bytes){ d.params + e.params, d.grads + e.grads, d.optim + e.optim };
}

static void print_model_states(const ptdp_train_config *c, const ptdp_launch_result *lr,
                               const ptdp_train_result *res)
{
    int N = zero_ranks(c);
    if (c->dp * ptdp_train_cp(c) == 1 || c->steps == 0 || res == NULL)
        return;
    double bw, bg, bo;
    state_bytes(c, &bw, &bg, &bo);
    double psi = device_elements(res, 0);
    ptdp_zero_bytes f = model_state_formula(c, res, 0);
    const ptdp_mem_stats *m0 = &lr->devices[0].mem;
    char b[6][32];
    printf("model states on device 0, psi = %.0f parameters, N = %d, %g + %g + %g bytes each%s "
           "(the ZeRO paper's formula; measured peaks):\n", psi, N, bw, bg, bo,
           c->bf16 ? " (bf16 parameter and gradient; float master, m, v)" : "");
    printf("  params %s (%s)  grads %s (%s)  optim %s (%s)\n",
           ptdp_format_bytes(f.params, b[0], sizeof b[0]),
           ptdp_format_bytes((double)m0->peak[PTDP_MEM_PARAMS], b[1], sizeof b[1]),
           ptdp_format_bytes(f.grads, b[2], sizeof b[2]),
           ptdp_format_bytes((double)m0->peak[PTDP_MEM_GRADS], b[3], sizeof b[3]),
           ptdp_format_bytes(f.optim, b[4], sizeof b[4]),
           ptdp_format_bytes((double)m0->peak[PTDP_MEM_OPTIM], b[5], sizeof b[5]));
}

void ptdp_report_print(const ptdp_train_config *c, const ptdp_launch_result *lr, const ptdp_train_result *res,
                       ptdp_algo algo, const ptdp_profile *prof)
{
    print_memory(c, lr);
    print_traffic_and_time(c, lr);
    print_data_parallel(c, lr, res, algo);
    ptdp_report_print_hpz(c, lr, res);
    ptdp_report_print_qgz(c, lr, res);
    print_expert_parallel(c, lr, res, prof != NULL ? prof : ptdp_profile_default());
    print_model_states(c, lr, res);
    print_overlap(c, lr);
}

/* ------------------------------------------------------------------ JSON */

/* A number as JSON: %.17g, or null for NaN and infinity (json.h).  Each use
 * has a buffer of its own, alive until the end of the statement. */
#define J(x) ptdp_json_number((x), (char[PTDP_JSON_NUMBER_MAX]){ 0 })

/* ZeRO-3's group (the dp group, or HSDP's shard group) a step, per device
 * (means): measured; by the formula with the gathers `change` makes (and
 * the dp group's small sums: delayed's amaxes, the expert loads); and by
 * ZeRO-3's formula without them. */
typedef struct { double measured, formula, without; } gather_bytes;
typedef double (*gather_change)(const ptdp_train_config *c, const ptdp_train_result *res, int r, int N, int M,
                                double b);

static gather_bytes zero3_gather_bytes(const ptdp_train_config *c, const ptdp_launch_result *lr,
                                       const ptdp_train_result *res, gather_change change)
{
    const int N = zero_ranks(c), M = gradient_sums(c);
    double bw, bg, bo;
    gather_bytes t = { 0 };
    state_bytes(c, &bw, &bg, &bo);
    for (int r = 0; r < lr->world_size; r++) {
        const double plain = bg / sizeof(ptdp_real) * ptdp_zero_dp_bytes_per_step(3, (size_t)device_elements(res, r),
                                                                                  N, M);
        t.measured += per_step(group_sent(&lr->devices[r].comm, shard_groups_of(c) > 0 ? "shard" : "dp"), c);
        t.without += plain;
        t.formula += plain + change(c, res, r, N, M, bg) + qgz_change(c, res, r, N, M, bg);
        if (shard_groups_of(c) == 0)
            t.formula += per_step(device_count(res, r, "fp8_amax_bytes") + device_count(res, r, "moe_bias_bytes"), c);
    }
    const double n = lr->world_size;
    return (gather_bytes){ t.measured / n, t.formula / n, t.without / n };
}

/* The report's "fp8_gather_bytes_per_step" (--fp8-comm under ZeRO-3) and
 * "qwz_gather_bytes_per_step" (--zero-qwz), each with device 0's terms. */
static void json_zero3_gathers(FILE *f, const ptdp_train_config *c, const ptdp_launch_result *lr,
                               const ptdp_train_result *res)
{
    if (zero_ranks(c) <= 1 || c->steps == 0)
        return;
    if (c->zero == 3 && c->fp8.comm) {
        const gather_bytes t = zero3_gather_bytes(c, lr, res, fp8_gather_change);
        fprintf(f, ", \"fp8_gather_bytes_per_step\": {\"measured\": %s, \"formula\": %s, \"without_fp8\": %s, "
                   "\"fp8_elements\": %.0f, \"amaxes\": %.0f, \"gathered_bytes\": %.0f}",
                J(t.measured), J(t.formula), J(t.without), device_count(res, 0, "fp8_gather_elements"),
                device_count(res, 0, "fp8_gather_tiles"), device_count(res, 0, "fp8_gather_bytes"));
    }
    if (c->zero_qwz > 0) {
        const gather_bytes t = zero3_gather_bytes(c, lr, res, qwz_gather_change);
        fprintf(f, ", \"qwz_gather_bytes_per_step\": {\"measured\": %s, \"formula\": %s, \"without_qwz\": %s, "
                   "\"block\": %d, \"gathered_bytes\": %.0f}",
                J(t.measured), J(t.formula), J(t.without), c->zero_qwz, device_count(res, 0, "qwz_gather_bytes"));
    }
}

static void json_device(FILE *f, const ptdp_train_config *c, const ptdp_device_summary *s,
                        const ptdp_train_result *res, int r)
{
    int d, q, t, p;
    char who[32];
    coords(c, r, &d, &q, &t, &p, who, sizeof who);
    double other = s->comm.total_sent;
    fprintf(f, "    {\"rank\": %d, \"dp_rank\": %d, \"tp_rank\": %d, \"pp_rank\": %d, \"cp_rank\": %d, "
               "\"param_elements\": %s,\n", r, d, t, p, q, J(device_elements(res, r)));
    fprintf(f, "     \"memory_peak_bytes\": {");
    for (int k = 0; k < PTDP_MEM_NCAT; k++)
        fprintf(f, "\"%s\": %zu, ", ptdp_mem_category_name((ptdp_mem_category)k), s->mem.peak[k]);
    fprintf(f, "\"total\": %zu},\n", s->mem.peak_total);
    /* the ZeRO paper's params, grads and optimizer state for this device (zero.h) */
    ptdp_zero_bytes zb = model_state_formula(c, res, r);
    fprintf(f, "     \"model_states_formula_bytes\": {\"params\": %s, \"grads\": %s, \"optim\": %s},\n",
            J(zb.params), J(zb.grads), J(zb.optim));
    const int ngroups = ptdp_report_groups(c);
    fprintf(f, "     \"bytes_sent\": {");
    for (int g = 0; g < ngroups; g++) {
        double x = group_sent(&s->comm, group_names[g]);
        other -= x;
        fprintf(f, "\"%s\": %s, ", group_names[g], J(x));
    }
    fprintf(f, "\"other\": %s, \"total\": %s},\n", J(other), J(s->comm.total_sent));
    fprintf(f, "     \"bytes_sent_per_step\": {");
    for (int g = 0; g < ngroups; g++)
        fprintf(f, "\"%s\": %s, ", group_names[g], J(per_step(group_sent(&s->comm, group_names[g]), c)));
    fprintf(f, "\"total\": %s},\n", J(per_step(s->comm.total_sent, c)));
    fprintf(f, "     \"virtual_s\": {\"compute\": %s, \"comm\": %s, \"idle\": %s, \"end\": %s, "
               "\"comm_stream\": %s, \"comm_hidden\": %s},\n",
            J(s->clock.compute_s), J(s->clock.comm_s), J(s->clock.idle_s), J(s->clock.now),
            J(s->clock.stream_s), J(s->clock.hidden_s));
    fprintf(f, "     \"wall_s\": %s}", J(s->wall_s));
}

/* The config keys added after cp_layout's line: CP's attention algorithm
 * (cp.h's ring, or ulysses.h's all-to-alls), expert parallelism's group
 * (1: none), and each device's BLAS threads as the run had them
 * (--blas-threads, launch.h). */
static void json_config_more(FILE *f, const ptdp_train_config *c, const ptdp_launch_opts *o, int world)
{
    fprintf(f, "             \"cp_algo\": \"%s\",\n", c->cp_a2a ? "a2a" : "ring");
    fprintf(f, "             \"ep\": %d,\n", c->ep > 1 ? c->ep : 1);
    if (ptdp_train_fold_slices(c) > 1)   /* MoE parallel folding: the experts' own TP size */
        fprintf(f, "             \"etp\": %d,\n", c->etp);
    if (c->shard_group > 0)   /* --shard-group given (HSDP, zero_hsdp.c) */
        fprintf(f, "             \"shard_group\": %d,\n", c->shard_group);
    if (c->zero_hpz > 0)   /* --zero-hpz (zero_hpz.c): the node group's DP ranks */
        fprintf(f, "             \"zero_hpz\": %d,\n", c->zero_hpz);
    if (c->zero_qgz > 0)   /* --zero-qgz (zero3_qgz.c): its bits, block and node's DP ranks */
        fprintf(f, "             \"zero_qgz\": {\"bits\": %d, \"block\": %d, \"node\": %d},\n", c->zero_qgz,
                c->zero_qgz_block, c->zero_qgz_node);
    if (c->fp8.recipe != NULL) {   /* --fp8 (fp8_linear.h): the recipe, dY's format, delayed's H */
        fprintf(f, "             \"fp8\": \"%s\",\n", c->fp8.recipe->name);
        fprintf(f, "             \"fp8_grad_format\": \"%s\",\n", c->fp8.grad != NULL ? c->fp8.grad->name : "e5m2");
        if (c->fp8.comm)
            fprintf(f, "             \"fp8_comm\": true,\n");
        if (c->fp8.recipe->uses_history)
            fprintf(f, "             \"fp8_amax_history\": %d,\n",
                    c->fp8.history > 0 ? c->fp8.history : PTDP_FP8_HISTORY_DEFAULT);
    }
    if (ptdp_model_of(&c->model)->caps.attention)   /* --attention, as settled (attention_tiled.c) */
        fprintf(f, "             \"attention\": \"%s\",\n", c->attention_tiled ? "tiled" : "full");
    fprintf(f, "             \"pair_overlap\": %s,\n", c->serial_pairs ? "false" : "true");
    fprintf(f, "             \"blas_threads\": %d,\n", ptdp_blas_threads(o->blas_threads, world));
}

/* Every number of a step the run published (counters.h: an auxiliary
 * loss beside the cross-entropy, …) at the run's first and last step:
 * "first_NAME", "last_NAME".  Lists are left to their publisher's own
 * lines (report_stats). */
static void json_first_last(FILE *f, const ptdp_train_result *res)
{
    for (int i = 0; res->steps > 0 && i < res->counters.n; i++) {
        const ptdp_counter *k = &res->counters.c[i];
        if (k->kind != PTDP_COUNT_STEP || k->shape.ndim != 0)
            continue;
        fprintf(f, ", \"first_%s\": %s, \"last_%s\": %s", k->name, J(ptdp_train_step_counts(res, 0, k->name)[0]),
                k->name, J(ptdp_train_step_counts(res, res->steps - 1, k->name)[0]));
    }
}

/* A counter's numbers as a --log key (counters.h): `, "NAME": x`, a list
 * [x, …], or a list of lists [[x, …], …], as its shape says. */
void ptdp_report_json_counter(FILE *f, const ptdp_counter *k, const double *x)
{
    fprintf(f, ", \"%s\": ", k->name);
    if (k->shape.ndim == 0) {
        fputs(J(x[0]), f);
        return;
    }
    const int rows = k->shape.ndim == 2 ? k->shape.dim[0] : 1, cols = k->len / rows;
    fputs(k->shape.ndim == 2 ? "[" : "", f);
    for (int r = 0; r < rows; r++) {
        fprintf(f, "%s[", r ? ", " : "");
        for (int q = 0; q < cols; q++)
            fprintf(f, "%s%s", q ? ", " : "", J(x[(size_t)r * cols + q]));
        fputc(']', f);
    }
    fputs(k->shape.ndim == 2 ? "]" : "", f);
}

/* MoE parallel folding (moe_fold.c): the re-layout's bytes a step, per
 * device (means), and without EP the expert-DP group's sums. */
static void json_fold(FILE *f, const ptdp_train_config *c, const ptdp_launch_result *lr, const ptdp_train_result *res)
{
    if (ptdp_train_fold_slices(c) == 1)
        return;
    double measured, formula;
    fold_traffic(c, lr, res, &measured, &formula);
    fprintf(f, ", \"moe_fold_bytes_per_step\": {\"measured\": %s, \"formula\": %s}", J(measured), J(formula));
    if (c->ep <= 1) {
        const ep_traffic t = ep_traffic_of(c, lr, res);
        fprintf(f, ", \"edp_bytes_per_step\": {\"measured\": %s, \"formula\": %s}", J(t.edp), J(t.edp_formula));
    }
}

static void json_report(FILE *f, const ptdp_train_config *c, const ptdp_launch_opts *o,
                        const ptdp_launch_result *lr, const ptdp_train_result *res)
{
    const ptdp_profile *prof = o->profile ? o->profile : ptdp_profile_default();
    const ptdp_model_config *m = &c->model;
    fprintf(f, "{\n  \"schema\": \"%s\",\n  \"precision\": \"%s\",\n  \"real_bytes\": %zu,\n", REPORT_SCHEMA,
            PTDP_REAL_NAME, sizeof(ptdp_real));
    fprintf(f, "  \"config\": {\"world\": %d, \"dp\": %d, \"tp\": %d, \"pp\": %d, \"zero\": %d, "
               "\"micro_batches\": %d, \"batch\": %d, \"steps\": %d, \"cp\": %d, \"cp_layout\": \"%s\",\n",
            lr->world_size, c->dp, c->tp, c->pp, c->zero, c->micro_batches, c->batch, c->steps, ptdp_train_cp(c),
            c->cp_contiguous ? "contiguous" : "zigzag");
    json_config_more(f, c, o, lr->world_size);
    fprintf(f, "             \"schedule\": \"%s\", \"recompute\": %s, \"recompute_mode\": \"%s\", \"sp\": %s, "
               "\"optimizer\": \"%s\", \"algo\": \"%s\", \"profile\": \"%s\", \"virtual_stages\": %d, "
               "\"token_slices\": %d, \"overlap\": %s, \"store\": \"%s\",\n",
               ptdp_train_schedule(c)->name, c->recompute ? "true" : "false",
               c->recompute ? "full" : c->recompute_core ? "selective" : "none", c->sp ? "true" : "false",
            c->optimizer == PTDP_OPT_SGD ? "sgd" : "adamw", ptdp_algo_name(o->algo), prof->name,
            ptdp_train_virtual_stages(c), ptdp_train_token_slices(c), c->overlap ? "true" : "false",
            c->bf16 ? "bf16" : PTDP_REAL_NAME);
    fprintf(f, "             \"model\": {\"name\": \"%s\"", ptdp_model_name(m));
    ptdp_model_cli_of(m)->report_keys(f, c);
    fprintf(f, "}},\n");
    double makespan = 0, first = NAN, last = NAN;   /* no step: null, not a loss of 0 */
    for (int i = 0; i < res->steps; i++)
        makespan += res->log[i].virtual_s;
    if (res->steps > 0) {
        first = res->log[0].loss;
        last = res->log[res->steps - 1].loss;
    }
    double stream, hidden;
    overlap_means(c, lr, &stream, &hidden);
    fprintf(f, "  \"run\": {\"first_loss\": %s, \"last_loss\": %s, \"virtual_s\": %s, "
               "\"comm_stream_s_per_step\": %s, \"comm_hidden_s_per_step\": %s",
            J(first), J(last), J(makespan), J(stream), J(hidden));
    if (c->pp > 1)
        fprintf(f, ", \"bubble_measured\": %s, \"bubble_formula\": %s",
                J(res->bubble_measured), J(res->bubble_formula));
    json_fold(f, c, lr, res);
    if (c->ep > 1) {   /* expert parallelism: its two groups' bytes a step, per device (means) */
        const ep_traffic t = ep_traffic_of(c, lr, res);
        fprintf(f, ", \"ep_bytes_per_step\": {\"measured\": %s, \"formula\": %s, \"uniform\": %s}, "
                   "\"edp_bytes_per_step\": {\"measured\": %s, \"formula\": %s}",
                J(t.ep), J(t.ep_formula), J(t.ep_uniform), J(t.edp), J(t.edp_formula));
        double a2a, hidden;
        ep_clock_means(c, lr, &a2a, &hidden);
        fprintf(f, ", \"ep_hidden_s_per_step\": %s, \"ep_exposed_s_per_step\": %s", J(hidden), J(a2a - hidden));
        double net, per_node;
        if (ep_network(c, lr, res, &net, &per_node)) {   /* a cluster of nodes (ep_nodes.c) */
            double a2a_s, deepep_s;
            ep_network_seconds(c, prof, net, per_node, &a2a_s, &deepep_s);
            fprintf(f, ", \"ep_net_rows_per_step\": {\"all_to_all\": %s, \"one_a_node\": %s}", J(net), J(per_node));
            fprintf(f, ", \"ep_net_seconds_per_step\": {\"all_to_all\": %s, \"one_a_node\": %s}", J(a2a_s),
                    J(deepep_s));
        }
    }
    if (shard_groups_of(c) > 0) {   /* HSDP: its two groups' bytes a step, per device (means) */
        const hsdp_traffic t = hsdp_traffic_of(c, lr, res);
        fprintf(f, ", \"hsdp_bytes_per_step\": {\"shard\": {\"measured\": %s, \"formula\": %s}, "
                   "\"replica\": {\"measured\": %s, \"formula\": %s}}",
                J(t.shard), J(t.shard_formula), J(t.replica), J(t.replica_formula));
    }
    ptdp_report_json_hpz(f, c, lr, res);   /* --zero-hpz: its link levels and secondary copy */
    ptdp_report_json_qgz(f, c, lr, res);   /* --zero-qgz: the gradient's link levels */
    json_zero3_gathers(f, c, lr, res);     /* --fp8-comm under ZeRO-3, --zero-qwz */
    json_first_last(f, res);
    if (ptdp_model_cli_of(m)->report_stats != NULL)   /* the model's counters: first, last step, totals */
        ptdp_model_cli_of(m)->report_stats(f, c, res);
    fprintf(f, "},\n  \"devices\": [\n");
    for (int r = 0; r < lr->world_size; r++) {
        json_device(f, c, &lr->devices[r], res, r);
        fprintf(f, "%s\n", r + 1 < lr->world_size ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
}

int ptdp_report_json_text(const ptdp_train_config *c, const ptdp_launch_opts *o, const ptdp_launch_result *lr,
                          const ptdp_train_result *res, char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    FILE *f = open_memstream(text, len);
    if (f == NULL)
        return PTDP_ENOMEM;
    json_report(f, c, o, lr, res);
    if (fclose(f) != 0) {
        free(*text);
        *text = NULL;
        return PTDP_ENOMEM;
    }
    return PTDP_OK;
}

int ptdp_report_write_json(const char *path, const ptdp_train_config *c, const ptdp_launch_opts *o,
                           const ptdp_launch_result *lr, const ptdp_train_result *res,
                           char *msg, size_t msglen)
{
    ptdp_atomic_file f;
    int rc = ptdp_atomic_open(&f, path, msg, msglen);
    if (rc != 0)
        return rc;
    json_report(ptdp_atomic_stream(&f), c, o, lr, res);
    return ptdp_atomic_commit(&f, msg, msglen);
}
