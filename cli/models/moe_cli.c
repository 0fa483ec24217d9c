/*
 * moe_cli.c — a mixture of experts on the command line, for every model
 * that has one (moe_cli.h): its flags' cross-checks, its settings in
 * --report, EP's uniform estimate, and the experts as the run shows them —
 * per MoE block and step, the tokens each expert took (its load), the
 * choices dropped beyond an expert's capacity, and the balance loss, read
 * by name from the run's counters, which the model published (moe.h).
 *
 *   --log, each step    "moe_load": [[l_0 … l_E-1], …]   one row per MoE block
 *                       "moe_dropped": [d, …]            (train_run.c writes
 *                       "moe_aux_loss": [a, …]           every counter a step)
 *                                                        sums to "aux_loss"
 *   --report, "run"     "moe_choices_per_step": k B T
 *                       "moe_blocks": [{"block": l, "first_load", "first_dropped",
 *                        "last_load", "last_dropped", "load", "dropped" (the
 *                        run's totals), "first_aux_loss", "last_aux_loss"}, …]
 *   after the run       one line per MoE block: its last step's loads
 *
 * Every token of the global batch makes k choices, so a step's row obeys
 * sum_e load[e] + dropped = k B T whatever the layout; a block's balance
 * loss here is its share of aux_loss, the mean over the B sequences.
 */
#include "moe_cli.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/bf16.h"
#include "ptdp/ep.h"
#include "ptdp/json.h"

#define J(x) ptdp_json_number((x), (char[PTDP_JSON_NUMBER_MAX]){ 0 })

/* ------------------------------------------------------------ the flags */

static bool typed(const char *const *given, int ngiven, const char *flag)
{
    for (int i = 0; i < ngiven; i++)
        if (strcmp(given[i], flag) == 0)
            return true;
    return false;
}

/* DeepSeek-V3's router's flags as typed: a route scale above 0 (0 is
 * what leaving it out means: 1), for a sigmoid router alone (softmax
 * gates sum to 1 and have no bias). */
static int deepseek_typed(const char *cmd, const char *const *given, int ngiven, const ptdp_moe_settings *s)
{
    static const char *const sigmoid_only[] = { "--moe-route-scale", "--moe-bias-update" };
    for (size_t k = 0; k < sizeof sigmoid_only / sizeof sigmoid_only[0]; k++)
        if (typed(given, ngiven, sigmoid_only[k]) && s->score != PTDP_MOE_SIGMOID)
            return ptdp_usage_error(cmd, "%s needs --moe-score sigmoid (DeepSeek-V3's router: sigmoid "
                                    "affinities, the expert bias; this run's router is softmax)", sigmoid_only[k]);
    if (typed(given, ngiven, "--moe-route-scale") && !(s->route_scale > 0 && isfinite(s->route_scale)))
        return ptdp_usage_error(cmd, "--moe-route-scale %g: must be above 0 (the gates lambda s_j / sum s)",
                                s->route_scale);
    if (typed(given, ngiven, "--moe-bias-update") && !(s->bias_update >= 0 && isfinite(s->bias_update)))
        return ptdp_usage_error(cmd, "--moe-bias-update %g: must be 0 or more (b_e += u sign(mean L - L_e) "
                                "after each step; 0: the bias stays 0)", s->bias_update);
    return 0;
}

/* One rule for `ptdp train` and `ptdp plan`: a typed capacity factor is
 * above 0, since 0 is what leaving the flag out means (dropless) — the
 * settings' 0 cannot tell "typed 0" from "not typed", so the flags as
 * typed are checked here, where they are known. */
int ptdp_moe_cli_typed(const char *cmd, const char *const *given, int ngiven, const ptdp_moe_settings *s,
                       const char *dense)
{
    static const char *const moe[] = { "--moe-every", "--moe-ffn", "--moe-top-k", "--moe-capacity-factor",
                                       "--moe-aux-loss", "--moe-score", "--moe-route-scale",
                                       "--moe-bias-update", "--moe-groups", "--moe-group-top-k",
                                       "--moe-z-loss", "--moe-dense-first", "--moe-shared-experts" };
    if (s->experts == 0) {
        for (size_t k = 0; k < sizeof moe / sizeof moe[0]; k++)
            if (typed(given, ngiven, moe[k]))
                return ptdp_usage_error(cmd, "%s needs --moe-experts E (a mixture of E experts; 0, the default, "
                                        "is %s)", moe[k], dense);
        return 0;
    }
    if (typed(given, ngiven, "--moe-capacity-factor") && !(s->capacity > 0))
        return ptdp_usage_error(cmd, "--moe-capacity-factor %g: must be above 0 (omit it: dropless)", s->capacity);
    if (s->aux_loss < 0)
        return ptdp_usage_error(cmd, "--moe-aux-loss %g: must be 0 or more", s->aux_loss);
    if (typed(given, ngiven, "--moe-z-loss") && !(s->z_loss >= 0 && isfinite(s->z_loss)))
        return ptdp_usage_error(cmd, "--moe-z-loss %g: must be 0 or more (beta x the mean of (log sum_e "
                                "exp z_e)^2; 0: no z-loss)", s->z_loss);
    if (s->top_k > s->experts)
        return ptdp_usage_error(cmd, "--moe-top-k %d: must be at most --moe-experts %d", s->top_k, s->experts);
    return deepseek_typed(cmd, given, ngiven, s);
}

int ptdp_moe_cli_finish(const char *cmd, const ptdp_model_flags *f, const ptdp_moe_settings *s, const char *dense)
{
    return ptdp_moe_cli_typed(cmd, f->given, f->ngiven, s, dense);
}

/* Whether a checkpoint holds a mixture of experts: a router anywhere. */
static bool holds_experts(ptdp_st_file *f, const char *suffix, char *router, size_t n)
{
    for (int i = 0; i < ptdp_st_count(f); i++)
        if (strstr(ptdp_st_get(f, i)->name, suffix) != NULL) {
            snprintf(router, n, "%s", ptdp_st_get(f, i)->name);
            return true;
        }
    return false;
}

int ptdp_moe_cli_load_matches(const char *load, ptdp_st_file *f, const ptdp_moe_settings *s,
                              const ptdp_moe_cli_names *names)
{
    char router[160] = "";
    const bool file = holds_experts(f, names->router, router, sizeof router), run = s->experts > 0;
    const char *e = ptdp_st_meta(f, "moe_experts");
    if (file && !run)
        return ptdp_usage_error("train", "--load %s holds a mixture of experts (%s, %s experts) and this run's "
                                "%s is dense: give --moe-experts %s and the --moe-* settings it was saved with",
                                load, router, e ? e : "its", names->model, e ? e : "E");
    if (!file && run)
        return ptdp_usage_error("train", "--moe-experts %d contradicts --load %s: it holds a dense %s (%s): leave "
                                "--moe-experts out", s->experts, load, names->model, names->dense);
    const char *k = ptdp_st_meta(f, "moe_dense_first");   /* written when K > 0: absent reads 0 */
    const long file_k = k != NULL ? strtol(k, NULL, 10) : 0;
    if (file && file_k != s->dense_first)
        return ptdp_usage_error("train", "--load %s: model shape mismatch: the checkpoint has moe_dense_first=%ld "
                                "(%s), this run --moe-dense-first %d: %s %ld", load, file_k,
                                file_k > 0 ? "its first blocks dense" : "experts from block 0", s->dense_first,
                                file_k > 0 ? "give --moe-dense-first" : "leave out --moe-dense-first, or give", file_k);
    char shared[160] = "";   /* DeepSeek's shared experts: their tensors, named */
    const bool file_shared = holds_experts(f, ".shared_experts.", shared, sizeof shared);
    const char *sv = ptdp_st_meta(f, "moe_shared_experts");
    const long file_s = sv != NULL ? strtol(sv, NULL, 10) : 0;
    if (file && (file_shared != (s->shared > 0) || (file_shared && file_s != s->shared)))
        return ptdp_usage_error("train", "--load %s: model shape mismatch: the checkpoint holds %s%s%s, this run "
                                "--moe-shared-experts %d: %s %ld", load, file_shared ? "shared experts (" : "no shared "
                                "experts", file_shared ? shared : "", file_shared ? ")" : "", s->shared,
                                file_shared ? "give --moe-shared-experts" : "leave out --moe-shared-experts, or give",
                                file_s);
    char bias[160] = "";   /* a sigmoid router's expert bias, or none (softmax) */
    const bool file_bias = holds_experts(f, ".expert_bias", bias, sizeof bias);
    if (file && file_bias && s->score != PTDP_MOE_SIGMOID)
        return ptdp_usage_error("train", "--load %s holds a sigmoid router (%s) and this run's is softmax: give "
                                "--moe-score sigmoid", load, bias);
    if (file && !file_bias && s->bias_update > 0) {   /* the buffer the update moves: next to the router */
        char want[160];
        const size_t stem = strlen(router) > strlen("weight") ? strlen(router) - strlen("weight") : 0;
        snprintf(want, sizeof want, "%.*sexpert_bias", (int)stem, router);
        return ptdp_usage_error("train", "--moe-bias-update %g needs the expert bias, and --load %s has no %s (a "
                                "softmax router's file): leave --moe-bias-update and --moe-score out",
                                s->bias_update, load, want);
    }
    if (file && !file_bias && s->score == PTDP_MOE_SIGMOID)
        return ptdp_usage_error("train", "--moe-score sigmoid contradicts --load %s: it holds a softmax router, "
                                "without the expert bias (no *.expert_bias): leave --moe-score out", load);
    return 0;
}

void ptdp_moe_cli_report_keys(FILE *f, const ptdp_moe_settings *s, int ffn)
{
    if (s->experts > 0)   /* a mixture of experts: its settings (dense runs print none) */
        fprintf(f, ", \"moe_experts\": %d, \"moe_every\": %d, \"moe_ffn\": %d, \"moe_top_k\": %d, "
                   "\"moe_capacity_factor\": %s, \"moe_aux_loss\": %s", s->experts, s->every,
                ptdp_moe_ffn(s, ffn), s->top_k, s->capacity > 0 ? J(s->capacity) : "null", J(s->aux_loss));
    if (s->experts > 0 && s->score == PTDP_MOE_SIGMOID)   /* DeepSeek-V3's router (softmax runs print none) */
        fprintf(f, ", \"moe_score\": \"sigmoid\", \"moe_route_scale\": %s, \"moe_bias_update\": %s",
                J(s->route_scale > 0 ? s->route_scale : 1.0), J(s->bias_update));
    if (s->experts > 0 && s->groups > 1)   /* group-limited routing (runs without print none) */
        fprintf(f, ", \"moe_groups\": %d, \"moe_group_top_k\": %d", s->groups,
                s->group_top_k > 0 ? s->group_top_k : 1);
    if (s->experts > 0 && s->dense_first > 0)   /* DeepSeek's first dense blocks (runs without print none) */
        fprintf(f, ", \"moe_dense_first\": %d", s->dense_first);
    if (s->experts > 0 && s->shared > 0)   /* DeepSeek's shared experts (runs without print none) */
        fprintf(f, ", \"moe_shared_experts\": %d", s->shared);
    if (s->experts > 0 && s->z_loss > 0)   /* the router z-loss (runs without print none) */
        fprintf(f, ", \"moe_z_loss\": %s", J(s->z_loss));
}

/* Expert parallelism's uniform estimate per device and step: each MoE
 * block of the stage (the mean over stages), each micro-batch, sends
 * k T_r C (N-1)/N in each of its 4 all-to-alls (dispatch and combine,
 * forward and backward; 6 when full recomputation redoes the forward),
 * T_r = the micro-batch's tokens on the rank, plus one exchange of the
 * counts, E/N per pair, per forward. */
double ptdp_moe_cli_ep_uniform_bytes(const ptdp_train_config *c, const ptdp_moe_settings *s, int seq_len)
{
    const ptdp_model_config *m = &c->model;
    const int N = c->ep > 1 ? c->ep : 1, f = c->recompute ? 2 : 1;
    const int slices = ptdp_train_fold_slices(c);   /* folded: a slice's rows */
    const long Tr = (long)(c->batch / (c->dp * c->micro_batches)) * (seq_len / ptdp_train_cp(c)) / slices;
    const int blocks = ptdp_moe_blocks(s, m->layers);
    const size_t r = c->bf16 ? sizeof(ptdp_bf16) : sizeof(ptdp_real);   /* bf16: the rows travel as bf16 (ep.h) */
    const double rows = ptdp_ep_uniform_bytes(s->top_k, Tr, 1, N, 1);   /* k T_r (N-1)/N rows away */
    const double dispatch = c->fp8.comm && c->fp8.recipe != NULL   /* --fp8-comm: codes and scales a row */
                                ? rows * ptdp_ep_fp8_row_bytes(c->fp8.recipe, m->hidden)
                                : ptdp_ep_uniform_bytes(s->top_k, Tr, m->hidden, N, r);
    const double per_forward = dispatch + ptdp_ep_uniform_bytes(s->top_k, Tr, m->hidden, N, r) +
                               (double)(N - 1) * (s->experts / N) * sizeof(int32_t);
    const double per_backward = 2 * ptdp_ep_uniform_bytes(s->top_k, Tr, m->hidden, N, r);
    return (double)blocks / c->pp * c->micro_batches * (f * per_forward + per_backward);
}

/* ----------------------------------------------------- the run's experts */

/* [x_0, …, x_{n-1}] */
static void json_array(FILE *f, const double *x, int n)
{
    fputc('[', f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%s", i ? ", " : "", J(x[i]));
    fputc(']', f);
}

/* MoE block j at step s of the run, from the counters. */
typedef struct {
    int layer;              /* the block's global index l                   */
    const double *load;     /* [E]: kept choices per expert                 */
    double dropped;         /* choices beyond an expert's capacity          */
    double aux;             /* its balance loss, a mean over the sequences  */
} block_step;

static block_step block_at(const ptdp_train_config *c, const ptdp_train_result *res, const ptdp_moe_settings *m,
                           int s, int j)
{
    const int E = m->experts;
    return (block_step){ .layer = ptdp_moe_layer(m, c->model.layers, j),
                         .load = ptdp_train_step_counts(res, s, "moe_load") + (size_t)j * E,
                         .dropped = ptdp_train_step_counts(res, s, "moe_dropped")[j],
                         .aux = ptdp_train_step_counts(res, s, "moe_aux_loss")[j] };
}

/* Block j of the run: its first and last step, and its totals. */
static void report_block(FILE *f, const ptdp_train_config *c, const ptdp_train_result *res,
                         const ptdp_moe_settings *m, int j)
{
    const int E = m->experts, S = res->steps;
    const block_step first = block_at(c, res, m, 0, j), last = block_at(c, res, m, S - 1, j);
    double load[E > 0 ? E : 1], dropped = 0;
    for (int e = 0; e < E; e++)
        load[e] = 0;
    for (int s = 0; s < S; s++) {
        const block_step b = block_at(c, res, m, s, j);
        for (int e = 0; e < E; e++)
            load[e] += b.load[e];
        dropped += b.dropped;
    }
    fprintf(f, "{\"block\": %d, \"first_load\": ", first.layer);
    json_array(f, first.load, E);
    fprintf(f, ", \"first_dropped\": %s, \"last_load\": ", J(first.dropped));
    json_array(f, last.load, E);
    fprintf(f, ", \"last_dropped\": %s, \"load\": ", J(last.dropped));
    json_array(f, load, E);
    fprintf(f, ", \"dropped\": %s, \"first_aux_loss\": %s, \"last_aux_loss\": %s}", J(dropped), J(first.aux),
            J(last.aux));
}

/* True when the run has steps and the model published its blocks'
 * counters (a model with MoE blocks, moe.h). */
static bool has_stats(const ptdp_train_config *c, const ptdp_train_result *res, const ptdp_moe_settings *m)
{
    const int n = ptdp_moe_blocks(m, c->model.layers);
    const ptdp_counter *load = ptdp_counters_find(&res->counters, "moe_load");
    return res->steps > 0 && n > 0 && load != NULL && load->shape.dim[0] == n &&
           ptdp_counters_find(&res->counters, "moe_dropped") != NULL &&
           ptdp_counters_find(&res->counters, "moe_aux_loss") != NULL;
}

/* k B T: the choices every step routes. */
static double choices_per_step(const ptdp_train_config *c, const ptdp_moe_settings *m, int seq_len)
{
    return (double)m->top_k * c->batch * seq_len;
}

void ptdp_moe_cli_report_stats(FILE *f, const ptdp_train_config *c, const ptdp_train_result *res,
                               const ptdp_moe_settings *m, int seq_len)
{
    if (!has_stats(c, res, m))
        return;
    fprintf(f, ", \"moe_choices_per_step\": %s, \"moe_blocks\": [", J(choices_per_step(c, m, seq_len)));
    for (int j = 0; j < ptdp_moe_blocks(m, c->model.layers); j++) {
        fprintf(f, "%s", j ? ", " : "");
        report_block(f, c, res, m, j);
    }
    fprintf(f, "]");
}

void ptdp_moe_cli_print_stats(const ptdp_train_config *c, const ptdp_train_result *res, const ptdp_moe_settings *m,
                              int seq_len)
{
    const int E = m->experts;
    if (!has_stats(c, res, m))
        return;
    printf("experts' loads, the last step (tokens each expert took of k B T = %.0f choices):\n",
           choices_per_step(c, m, seq_len));
    for (int j = 0; j < ptdp_moe_blocks(m, c->model.layers); j++) {
        const block_step b = block_at(c, res, m, res->steps - 1, j);
        printf("  block %d:", b.layer);
        for (int e = 0; e < E && e < 16; e++)
            printf(" %.0f", b.load[e]);
        printf("%s, dropped %.0f, balance loss %.6g\n", E > 16 ? " …" : "", b.dropped, b.aux);
    }
}
