/*
 * moe_gate_values.c — ptdp's DeepSeek-V3 router on random numbers, written
 * to a safetensors file for check_deepseek_gate.py to replay in DeepSeek's
 * own Gate.
 *
 *     moe_gate_values OUT.st [--tokens N] [--dim C] [--experts E] [--top-k k]
 *                     [--groups G] [--group-top-k M] [--route-scale r]
 *                     [--bias-std b] [--seed S]
 *
 * The router of one MoE block, as the block runs it (parallel/moe.c): the
 * logits through ptdp's linear op, then ptdp_moe_route with the sigmoid
 * score, the expert bias, the groups and the route scale:
 *
 *     z = h W_r^T                       ptdp_linear_forward (nn.Linear's)
 *     s = sigmoid(z)                    ptdp_moe_route (moe_route.c,
 *     top k of s + b, only in the M     moe_groups.c)
 *       best of G groups (a group's
 *       score: its top floor(k/M) s + b)
 *     gate_j = r s_j / sum_chosen s
 *
 *   router.weight        real [E, C]   W_r, normal / sqrt(C)
 *   router.expert_bias   real [E]      b, normal x b_std
 *   h                    real [N, C]   the tokens, standard normal
 *   choice               I32  [N, k]   the chosen experts, largest s + b first
 *   gate                 real [N, k]   their gates
 *
 * `real` is the build's ptdp_real (F32 for libptdp, F64 for libptdp_f64);
 * every random number is ptdp's counter-based one (rng.h), by stream name.
 * The settings go into the file's metadata under DeepSeek's ModelArgs
 * names.  Bad settings: a message naming the option, exit 2.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/moe_route.h"
#include "ptdp/ops.h"
#include "ptdp/rng.h"
#include "ptdp/safetensors.h"
#include "ptdp/tensor.h"

typedef struct {
    int tokens, dim, experts, top_k, groups, group_top_k;
    double route_scale, bias_std;
    long seed;
} gate_settings;

/* One option's value: an integer or a number, whole and finite. */
static int read_option(const char *name, const char *text, gate_settings *g)
{
    struct { const char *name; int *i; double *d; } opts[] = {
        { "--tokens", &g->tokens, NULL }, { "--dim", &g->dim, NULL }, { "--experts", &g->experts, NULL },
        { "--top-k", &g->top_k, NULL }, { "--groups", &g->groups, NULL },
        { "--group-top-k", &g->group_top_k, NULL }, { "--route-scale", NULL, &g->route_scale },
        { "--bias-std", NULL, &g->bias_std }, { "--seed", NULL, NULL },
    };
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        if (strcmp(name, opts[i].name) != 0)
            continue;
        char *end;
        double v = strtod(text, &end);
        if (end == text || *end != '\0' || !isfinite(v) || (opts[i].d == NULL && (v != floor(v) || fabs(v) > 1e9))) {
            fprintf(stderr, "moe_gate_values: %s %s: not %s\n", name, text, opts[i].d ? "a number" : "an integer");
            return 2;
        }
        if (opts[i].i != NULL)
            *opts[i].i = (int)v;
        else if (opts[i].d != NULL)
            *opts[i].d = v;
        else
            g->seed = (long)v;
        return 0;
    }
    fprintf(stderr, "moe_gate_values: unknown option %s\n", name);
    return 2;
}

/* The rules ptdp train's flags obey (moe_settings.c), so that the file
 * holds a routing ptdp would run. */
static int check_settings(const gate_settings *g)
{
    const int E = g->experts, k = g->top_k, G = g->groups, M = g->group_top_k;
    const char *bad = NULL;
    if (g->tokens < 1 || g->tokens > 100000) bad = "--tokens: between 1 and 100000";
    else if (g->dim < 1 || g->dim > 100000) bad = "--dim: between 1 and 100000";
    else if (E < 1 || E > 4096) bad = "--experts: between 1 and 4096";
    else if (k < 1 || k > E) bad = "--top-k: between 1 and --experts";
    else if (G < 1 || E % G != 0) bad = "--groups: must divide --experts";
    else if (M < 1 || M > G) bad = "--group-top-k: between 1 and --groups";
    else if (k / M < 1 || k / M > E / G) bad = "--group-top-k: floor(top-k / group-top-k) between 1 and experts/groups";
    else if (M * (E / G) < k) bad = "--group-top-k: the chosen groups must hold top-k experts";
    else if (!(g->route_scale > 0)) bad = "--route-scale: above 0";
    else if (!(g->bias_std >= 0)) bad = "--bias-std: 0 or more";
    if (bad != NULL)
        fprintf(stderr, "moe_gate_values: %s\n", bad);
    return bad != NULL ? 2 : 0;
}

/* n numbers of stream `name`, standard normal times `scale`. */
static void normal(ptdp_real *x, size_t n, long seed, const char *name, double scale)
{
    const uint64_t key = ptdp_rng_key((uint64_t)seed, name);
    for (size_t i = 0; i < n; i++)
        x[i] = (ptdp_real)(scale * ptdp_rng_normal(key, i));
}

/* The file: the inputs, ptdp's choices and gates, the settings. */
static int write_file(const char *path, const gate_settings *g, const ptdp_real *w, const ptdp_real *b,
                      const ptdp_real *h, const int *choice, const ptdp_real *gate)
{
    const int N = g->tokens, C = g->dim, E = g->experts, k = g->top_k;
    ptdp_st_tensor t[5] = {
        { .name = "router.weight", .dtype = PTDP_REAL, .ndim = 2, .shape = { E, C }, .data = w },
        { .name = "router.expert_bias", .dtype = PTDP_REAL, .ndim = 1, .shape = { E }, .data = b },
        { .name = "h", .dtype = PTDP_REAL, .ndim = 2, .shape = { N, C }, .data = h },
        { .name = "choice", .dtype = PTDP_I32, .ndim = 2, .shape = { N, k }, .data = choice },
        { .name = "gate", .dtype = PTDP_REAL, .ndim = 2, .shape = { N, k }, .data = gate },
    };
    const char *keys[] = { "dim", "n_routed_experts", "n_activated_experts", "n_expert_groups",
                           "n_limited_groups", "route_scale", "real" };
    char values[6][32];
    snprintf(values[0], 32, "%d", C);
    snprintf(values[1], 32, "%d", E);
    snprintf(values[2], 32, "%d", k);
    snprintf(values[3], 32, "%d", g->groups);
    snprintf(values[4], 32, "%d", g->group_top_k);
    snprintf(values[5], 32, "%.17g", g->route_scale);
    const char *vals[] = { values[0], values[1], values[2], values[3], values[4], values[5], PTDP_REAL_NAME };
    char msg[512];
    if (ptdp_st_write(path, t, 5, keys, vals, 7, msg, sizeof msg) != 0) {
        fprintf(stderr, "moe_gate_values: %s\n", msg);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    gate_settings g = { .tokens = 512, .dim = 64, .experts = 32, .top_k = 8, .groups = 8, .group_top_k = 4,
                        .route_scale = 2.5, .bias_std = 0.1, .seed = 1 };
    if (argc < 2 || argv[1][0] == '-' || argc % 2 != 0) {
        fprintf(stderr, "usage: %s OUT.st [--tokens N] [--dim C] [--experts E] [--top-k k] [--groups G] "
                        "[--group-top-k M] [--route-scale r] [--bias-std b] [--seed S]\n", argv[0]);
        return 2;
    }
    for (int i = 2; i + 1 < argc; i += 2)
        if (read_option(argv[i], argv[i + 1], &g) != 0)
            return 2;
    if (check_settings(&g) != 0)
        return 2;
    const int N = g.tokens, C = g.dim, E = g.experts, k = g.top_k;
    ptdp_real *w = malloc(sizeof(ptdp_real) * (size_t)E * C), *b = malloc(sizeof(ptdp_real) * (size_t)E);
    ptdp_real *h = malloc(sizeof(ptdp_real) * (size_t)N * C), *z = malloc(sizeof(ptdp_real) * (size_t)N * E);
    ptdp_real *probs = malloc(sizeof(ptdp_real) * (size_t)N * E), *gate = malloc(sizeof(ptdp_real) * (size_t)N * k);
    int *choice = malloc(sizeof(int) * (size_t)N * k), *slot = malloc(sizeof(int) * (size_t)N * k);
    int *load = malloc(sizeof(int) * (size_t)E), dropped = 0, rc = 1;
    if (w && b && h && z && probs && gate && choice && slot && load) {
        normal(w, (size_t)E * C, g.seed, "router.weight", 1.0 / sqrt((double)C));
        normal(b, (size_t)E, g.seed, "router.expert_bias", g.bias_std);
        normal(h, (size_t)N * C, g.seed, "h", 1.0);
        ptdp_linear_forward(ptdp_tensor_wrap(z, N, E), ptdp_tensor_wrap(h, N, C), ptdp_tensor_wrap(w, E, C), NULL);
        const ptdp_moe_route_shape shape = { .T = N, .E = E, .k = k, .score = PTDP_MOE_SIGMOID, .capacity = 0,
                                             .alpha = 0, .route_scale = g.route_scale, .bias = b,
                                             .groups = g.groups, .group_top_k = g.group_top_k };
        ptdp_moe_route(&shape, N, z, choice, gate, slot, probs, load, &dropped);
        rc = write_file(argv[1], &g, w, b, h, choice, gate);
    } else
        fprintf(stderr, "moe_gate_values: out of memory\n");
    free(w); free(b); free(h); free(z); free(probs); free(gate); free(choice); free(slot); free(load);
    return rc;
}
