/*
 * train_report_hpz.c — the report's lines for ZeRO++'s hpZ (--zero-hpz,
 * src/parallel/zero_hpz.c): ZeRO-3's bytes by link level, and the
 * secondary copy it pays for them, each measured beside its formula.
 *
 * Per device and step, S its parameters' bytes in the store's type, N
 * ZeRO-3's group (the DP group, or HSDP's shard group: it spans nodes),
 * k the DP ranks of one node, M the micro-batches:
 *
 *                    ZeRO-3               with hpZ
 *   across nodes     3M(N-1)/N S          2M(N-1)/N S   forward's gather + reduce-scatter
 *   inside a node    0                    M(k-1)/k S    backward's gather over the node
 *   secondary copy   0                    S/k           from a unit's forward to its backward
 *
 * "Across nodes" is ZeRO's group's traffic — every collective of a group
 * that spans nodes is priced on its slowest hop, the one that leaves a node
 * (clock.c) — plus the norm's one double; "inside" is the node group's.
 */
#include <stdio.h>

#include "../html_pages.h"
#include "ptdp/arena.h"
#include "ptdp/json.h"
#include "ptdp/zero.h"
#include "report.h"

#define J(x) ptdp_json_number((x), (char[PTDP_JSON_NUMBER_MAX]){ 0 })

typedef struct {
    double across, across_formula, without_hpz, inside, inside_formula, secondary, secondary_formula, S;
} hpz_figures;

/* Means over devices of the measured bytes a step and of the formulas. */
static hpz_figures hpz_figures_of(const ptdp_train_config *c, const ptdp_launch_result *lr,
                                  const ptdp_train_result *res)
{
    hpz_figures t = { 0 };
    const bool hsdp = c->shard_group > 0 && c->shard_group < c->dp;
    const int N = hsdp ? c->shard_group : c->dp, k = c->zero_hpz;
    const double M = (double)c->micro_batches * ptdp_train_virtual_stages(c) * ptdp_train_token_slices(c);
    const double es = ptdp_zero_sizes_of(c->bf16, 0).bg, steps = c->steps > 0 ? c->steps : 1;
    for (int r = 0; r < lr->world_size; r++) {
        const double S = (res->param_elements != NULL ? (double)res->param_elements[r] : 0) * es;
        const double *peak = ptdp_train_device_counts(res, r, "hpz_secondary_peak");
        t.across += ptdp_report_group_sent(&lr->devices[r].comm, hsdp ? "shard" : "dp") / steps;
        t.inside += ptdp_report_group_sent(&lr->devices[r].comm, "hpz") / steps;
        t.across_formula += (c->zero_qgz > 0 ? 1.0 : 2.0) * M * (N - 1) / N * S;   /* qgZ: no reduce-scatter */
        t.without_hpz += 3.0 * M * (N - 1) / N * S;
        t.inside_formula += M * (k - 1) / k * S;
        t.secondary += peak != NULL ? peak[0] : 0;
        t.secondary_formula += S / k;
        t.S += S;
    }
    const double n = lr->world_size > 0 ? lr->world_size : 1;
    t.across /= n;
    t.across_formula /= n;
    t.without_hpz /= n;
    t.inside /= n;
    t.inside_formula /= n;
    t.secondary /= n;
    t.secondary_formula /= n;
    t.S /= n;
    return t;
}

void ptdp_report_print_hpz(const ptdp_train_config *c, const ptdp_launch_result *lr, const ptdp_train_result *res)
{
    if (c->zero_hpz <= 0 || c->steps == 0)
        return;
    const hpz_figures t = hpz_figures_of(c, lr, res);
    const bool hsdp = c->shard_group > 0 && c->shard_group < c->dp;
    const int N = hsdp ? c->shard_group : c->dp, k = c->zero_hpz;
    char b[8][32];
    printf("ZeRO++ hpZ, node groups of k = %d DP ranks inside ZeRO-3's %s of N = %d: bytes sent per device and "
           "step by link level (S = %s of parameters per device, mean)\n", k, hsdp ? "shard group" : "DP group", N,
           ptdp_format_bytes(t.S, b[0], sizeof b[0]));
    printf("  across nodes  the forward's gather%s: formula %s = %s, measured %s "
           "(ZeRO-3 without hpZ: 3M(N-1)/N S = %s)\n",
           c->zero_qgz > 0 ? " (qgZ's all-to-alls sum the gradient, below)" : " and the reduce-scatter",
           c->zero_qgz > 0 ? "M(N-1)/N S" : "2M(N-1)/N S", ptdp_format_bytes(t.across_formula, b[1], sizeof b[1]),
           ptdp_format_bytes(t.across, b[2], sizeof b[2]), ptdp_format_bytes(t.without_hpz, b[3], sizeof b[3]));
    printf("  inside a node the backward's gather of the secondary pieces: formula M(k-1)/k S = %s, measured %s\n",
           ptdp_format_bytes(t.inside_formula, b[4], sizeof b[4]), ptdp_format_bytes(t.inside, b[5], sizeof b[5]));
    printf("  memory        the secondary copy (params, \"zero.hpz_secondary\") at its peak: formula 1/k S = %s, "
           "measured %s\n", ptdp_format_bytes(t.secondary_formula, b[6], sizeof b[6]),
           ptdp_format_bytes(t.secondary, b[7], sizeof b[7]));
}

void ptdp_report_json_hpz(FILE *f, const ptdp_train_config *c, const ptdp_launch_result *lr,
                          const ptdp_train_result *res)
{
    if (c->zero_hpz <= 0)
        return;
    const hpz_figures t = hpz_figures_of(c, lr, res);
    fprintf(f, ", \"hpz_bytes_per_step\": {\"across_nodes\": {\"measured\": %s, \"formula\": %s, "
               "\"without_hpz\": %s}, \"inside_node\": {\"measured\": %s, \"formula\": %s}}, "
               "\"hpz_secondary_bytes\": {\"measured\": %s, \"formula\": %s}",
            J(t.across), J(t.across_formula), J(t.without_hpz), J(t.inside), J(t.inside_formula), J(t.secondary),
            J(t.secondary_formula));
}
