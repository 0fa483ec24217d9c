/*
 * train_report_qgz.c — the report's lines for ZeRO++'s qgZ (--zero-qgz,
 * src/parallel/zero3_qgz.c): the gradient's bytes by link level, each
 * measured beside its formula, and the reduce-scatter's they replace.
 *
 * Per device and step, N ZeRO-3's group (the DP group, or HSDP's shard
 * group) in m = N/k nodes of k DP ranks, M the gradient sums a step (the
 * backwards ZeRO reduce-scatters after), X the device's slots, one a
 * unit: Σ_u slot(⌈|u|/N⌉), slot(L) = ⌈L b/8⌉ + ⌈L/B⌉ R (zero3_qgz.c):
 *
 *                     reduce-scatter         qgZ
 *   inside a node     0                      M (k-1) m X    the qgz_node group's all-to-all
 *   across nodes      M (N-1)/N S R          M (m-1) X      the qgz_cross group's
 *
 * "Measured" is each group's bytes sent (comm.c counts an all-to-all's
 * blocks to the other members); the formulas are the slots' arithmetic,
 * so a wire that sent more, or fewer, than its slots would show.
 */
#include <stdio.h>

#include "../html_pages.h"
#include "ptdp/json.h"
#include "ptdp/zero.h"
#include "report.h"

#define J(x) ptdp_json_number((x), (char[PTDP_JSON_NUMBER_MAX]){ 0 })

typedef struct {
    double inside, inside_formula, across, across_formula, reduce_scatter, X;
} qgz_figures;

/* Means over devices of the measured bytes a step and of the formulas. */
static qgz_figures qgz_figures_of(const ptdp_train_config *c, const ptdp_launch_result *lr,
                                  const ptdp_train_result *res)
{
    qgz_figures t = { 0 };
    const int N = c->shard_group > 0 ? c->shard_group : c->dp, k = c->zero_qgz_node, m = N / k;
    const double M = ptdp_report_gradient_sums(c), steps = c->steps > 0 ? c->steps : 1;
    for (int r = 0; r < lr->world_size; r++) {
        const double S = res->param_elements != NULL ? (double)res->param_elements[r] : 0;
        const double *x = ptdp_train_device_counts(res, r, "qgz_slot_bytes");
        const double X = x != NULL ? x[0] : 0;
        t.inside += ptdp_report_group_sent(&lr->devices[r].comm, "qgz_node") / steps;
        t.across += ptdp_report_group_sent(&lr->devices[r].comm, "qgz_cross") / steps;
        t.inside_formula += M * (k - 1) * m * X;
        t.across_formula += M * (m - 1) * X;
        t.reduce_scatter += M * (N - 1) / N * S * sizeof(ptdp_real);
        t.X += X;
    }
    const double n = lr->world_size > 0 ? lr->world_size : 1;
    t.inside /= n;
    t.inside_formula /= n;
    t.across /= n;
    t.across_formula /= n;
    t.reduce_scatter /= n;
    t.X /= n;
    return t;
}

void ptdp_report_print_qgz(const ptdp_train_config *c, const ptdp_launch_result *lr, const ptdp_train_result *res)
{
    if (c->zero_qgz <= 0 || c->steps == 0)
        return;
    const qgz_figures t = qgz_figures_of(c, lr, res);
    const int N = c->shard_group > 0 ? c->shard_group : c->dp, k = c->zero_qgz_node;
    char b[6][32];
    printf("ZeRO++ qgZ, INT%d codes in blocks of B = %d, ZeRO-3's group of N = %d in m = %d nodes of k = %d: "
           "gradient bytes sent per device and step by link level (X = %s: a slot a unit, mean)\n", c->zero_qgz,
           c->zero_qgz_block, N, N / k, k, ptdp_format_bytes(t.X, b[0], sizeof b[0]));
    printf("  inside a node the first all-to-all:  formula M(k-1)m X = %s, measured %s\n",
           ptdp_format_bytes(t.inside_formula, b[1], sizeof b[1]), ptdp_format_bytes(t.inside, b[2], sizeof b[2]));
    printf("  across nodes  the second all-to-all: formula M(m-1) X = %s, measured %s; the reduce-scatter's "
           "M(N-1)/N S %zu = %s (%.1fx)\n", ptdp_format_bytes(t.across_formula, b[3], sizeof b[3]),
           ptdp_format_bytes(t.across, b[4], sizeof b[4]), sizeof(ptdp_real),
           ptdp_format_bytes(t.reduce_scatter, b[5], sizeof b[5]),
           t.across > 0 ? t.reduce_scatter / t.across : 0.0);
}

void ptdp_report_json_qgz(FILE *f, const ptdp_train_config *c, const ptdp_launch_result *lr,
                          const ptdp_train_result *res)
{
    if (c->zero_qgz <= 0 || c->steps == 0)
        return;
    const qgz_figures t = qgz_figures_of(c, lr, res);
    fprintf(f, ", \"qgz_grad_bytes_per_step\": {\"inside_node\": {\"measured\": %s, \"formula\": %s}, "
               "\"across_nodes\": {\"measured\": %s, \"formula\": %s, \"reduce_scatter\": %s}, \"slot_bytes\": %s}",
            J(t.inside), J(t.inside_formula), J(t.across), J(t.across_formula), J(t.reduce_scatter), J(t.X));
}
