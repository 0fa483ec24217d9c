/*
 * gpt_moe_report.c — a GPT's experts as the run shows them: per MoE block
 * and step, the tokens each expert took (its load), the choices dropped
 * beyond an expert's capacity, and the balance loss — read by name from
 * the run's counters, which the model published (gpt_moe_stats.h).
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
#include "gpt_moe_report.h"

#include "ptdp/gpt.h"
#include "ptdp/gpt_moe_stats.h"
#include "ptdp/json.h"

#define J(x) ptdp_json_number((x), (char[PTDP_JSON_NUMBER_MAX]){ 0 })

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

static block_step block_at(const ptdp_train_config *c, const ptdp_train_result *res, int s, int j)
{
    const int E = ptdp_gpt(&c->model)->moe_experts;
    return (block_step){ .layer = ptdp_gpt_moe_layer(&c->model, j),
                         .load = ptdp_train_step_counts(res, s, "moe_load") + (size_t)j * E,
                         .dropped = ptdp_train_step_counts(res, s, "moe_dropped")[j],
                         .aux = ptdp_train_step_counts(res, s, "moe_aux_loss")[j] };
}

/* Block j of the run: its first and last step, and its totals. */
static void report_block(FILE *f, const ptdp_train_config *c, const ptdp_train_result *res, int j)
{
    const int E = ptdp_gpt(&c->model)->moe_experts, S = res->steps;
    const block_step first = block_at(c, res, 0, j), last = block_at(c, res, S - 1, j);
    double load[E > 0 ? E : 1], dropped = 0;
    for (int e = 0; e < E; e++)
        load[e] = 0;
    for (int s = 0; s < S; s++) {
        const block_step b = block_at(c, res, s, j);
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
 * counters (a GPT with MoE blocks, gpt_moe_stats.h). */
static bool has_stats(const ptdp_train_config *c, const ptdp_train_result *res)
{
    const int n = ptdp_gpt_moe_blocks(&c->model);
    const ptdp_counter *load = ptdp_counters_find(&res->counters, "moe_load");
    return res->steps > 0 && n > 0 && load != NULL && load->shape.dim[0] == n &&
           ptdp_counters_find(&res->counters, "moe_dropped") != NULL &&
           ptdp_counters_find(&res->counters, "moe_aux_loss") != NULL;
}

/* k B T: the choices every step routes. */
static double choices_per_step(const ptdp_train_config *c)
{
    return (double)ptdp_gpt(&c->model)->moe_top_k * c->batch * ptdp_gpt(&c->model)->seq_len;
}

void ptdp_gpt_moe_report_keys(FILE *f, const ptdp_train_config *c, const ptdp_train_result *res)
{
    if (!has_stats(c, res))
        return;
    fprintf(f, ", \"moe_choices_per_step\": %s, \"moe_blocks\": [", J(choices_per_step(c)));
    for (int j = 0; j < ptdp_gpt_moe_blocks(&c->model); j++) {
        fprintf(f, "%s", j ? ", " : "");
        report_block(f, c, res, j);
    }
    fprintf(f, "]");
}

void ptdp_gpt_moe_print(const ptdp_train_config *c, const ptdp_train_result *res)
{
    const int E = ptdp_gpt(&c->model)->moe_experts;
    if (!has_stats(c, res))
        return;
    printf("experts' loads, the last step (tokens each expert took of k B T = %.0f choices):\n",
           choices_per_step(c));
    for (int j = 0; j < ptdp_gpt_moe_blocks(&c->model); j++) {
        const block_step b = block_at(c, res, res->steps - 1, j);
        printf("  block %d:", b.layer);
        for (int e = 0; e < E && e < 16; e++)
            printf(" %.0f", b.load[e]);
        printf("%s, dropped %.0f, balance loss %.6g\n", E > 16 ? " …" : "", b.dropped, b.aux);
    }
}
