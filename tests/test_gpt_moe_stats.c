/*
 * test_gpt_moe_stats.c — what a step counts of a GPT's experts
 * (gpt_moe_stats.h): the layout of the numbers, and that a pipeline step
 * counts each micro-batch's route once, whatever the layout.
 *
 *   layout   6 layers, --moe-every 3: MoE blocks 2 and 5, rows of E + 2
 *            numbers (load[E], dropped, aux); a dense GPT has none
 *
 *   a step   4 layers, --moe-every 2 (MoE blocks 1 and 3), B = 4 sequences
 *            of T = 8 in 2 micro-batches, top-2 of 4: the counts summed
 *            over the stages are the same at pp 1 and pp 2, with and
 *            without full recomputation (which routes each micro-batch
 *            twice), and obey sum_e load[e] = k B T, dropped = 0, the
 *            blocks' aux summing to the stages' balance losses
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ptdp/gpt.h"
#include "ptdp/gpt_moe_stats.h"
#include "ptdp/mesh.h"
#include "ptdp/models.h"
#include "ptdp/pp.h"
#include "ptdp/schedule.h"

static const harness_tcase stats_tests = { .name = "moe-stats", .timeout_s = 120 };

enum { E = 4, K = 2, T = 8, B = 4, M = 2, LAYERS = 4, N = 2 * (E + 2) };

static ptdp_model_config config(int layers, int every)
{
    ptdp_model_config c = ptdp_gpt_default_config();
    c.layers = layers;
    ptdp_gpt(&c)->seq_len = T;
    ptdp_gpt(&c)->vocab = 62;
    ptdp_gpt(&c)->vocab_padded = ptdp_gpt_pad_vocab(62, 64, 1);
    ptdp_gpt(&c)->moe_experts = E;
    ptdp_gpt(&c)->moe_top_k = K;
    ptdp_gpt(&c)->moe_every = every;
    return c;
}

TEST(stats_tests, test_rows_are_the_moe_blocks_in_layer_order)
{
    ptdp_model_config c = config(6, 3);
    double stats[2 * (E + 2)];
    for (int i = 0; i < 2 * (E + 2); i++)
        stats[i] = i;
    ck_assert_int_eq(ptdp_gpt_moe_blocks(&c), 2);
    ck_assert_int_eq(ptdp_gpt_moe_stats_len(&c), 2 * (E + 2));
    const ptdp_gpt_moe_block_stats r0 = ptdp_gpt_moe_stats_row(&c, stats, 0);
    const ptdp_gpt_moe_block_stats r1 = ptdp_gpt_moe_stats_row(&c, stats, 1);
    ck_assert_int_eq(r0.layer, 2);
    ck_assert_int_eq(r1.layer, 5);
    ck_assert_ptr_eq(r1.load, stats + E + 2);
    ck_assert_double_eq(r0.dropped, E);
    ck_assert_double_eq(r1.aux, 2 * (E + 2) - 1);
    ptdp_gpt(&c)->moe_experts = 0;
    ck_assert_int_eq(ptdp_gpt_moe_stats_len(&c), 0);
}
END_TEST

typedef struct {
    const ptdp_schedule *schedule;
    bool recompute;
    double stats[PTDP_MAX_DEVICES][N];
    double aux[PTDP_MAX_DEVICES];
} step_arg;

static int step_device(ptdp_device *dev, void *arg)
{
    step_arg *a = arg;
    ptdp_model_config cfg = config(LAYERS, 2);
    ptdp_mesh mesh;
    ptdp_model m;
    DEVICE_TRY(ptdp_mesh_init(dev, 1, 1, a->schedule->pp, &mesh));
    DEVICE_TRY(ptdp_model_init(dev, &m, &cfg, &mesh, NULL, 3, 0.0));
    ptdp_pp_step st = {
        .model = &m, .schedule = a->schedule, .step = 0, .shard_first = 0, .shard_rows = B, .micro_batches = M,
        .recompute = a->recompute, .loss_scale = 1.0 / (B * T),
        .stats = a->stats[dev->rank],
    };
    int rc = ptdp_pp_run_step(dev, &st);
    a->aux[dev->rank] = st.aux_sum;
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return rc;
}

/* The step's counts at pp, summed over its stages (and their aux). */
static void step_counts(int pp, bool recompute, double *sum, double *aux)
{
    ptdp_schedule *s;
    ck_assert_int_eq(ptdp_schedule_create("1f1b", pp, M, &s), 0);
    static step_arg a;
    memset(&a, 0, sizeof a);
    a.schedule = s;
    a.recompute = recompute;
    harness_launch_ok(pp, step_device, &a, NULL, NULL);
    memset(sum, 0, N * sizeof *sum);
    *aux = 0;
    for (int d = 0; d < pp; d++) {
        for (int q = 0; q < N; q++)
            sum[q] += a.stats[d][q];
        *aux += a.aux[d];
    }
    ptdp_schedule_destroy(s);
}

TEST(stats_tests, test_every_layout_counts_each_route_once)
{
    double want[N], want_aux, got[N], got_aux;
    step_counts(1, false, want, &want_aux);
    for (int j = 0; j < 2; j++) {
        double sum = 0;
        for (int e = 0; e < E; e++)
            sum += want[j * (E + 2) + e];
        ck_assert_double_eq(sum, K * B * T);
        ck_assert_double_eq(want[j * (E + 2) + E], 0);
    }
    ck_assert_double_eq_tol(want[E + 1] + want[2 * (E + 2) - 1], want_aux, 1e-12 * fabs(want_aux));
    ck_assert(want_aux > 0);
    static const struct { int pp; bool recompute; } layouts[] = { { 1, true }, { 2, false }, { 2, true } };
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        step_counts(layouts[i].pp, layouts[i].recompute, got, &got_aux);
        for (int q = 0; q < N; q++)
            ck_assert_msg(got[q] == want[q] || (q % (E + 2) == E + 1 && fabs(got[q] - want[q]) < 1e-9),
                          "pp %d%s: count %d is %g, one device's %g", layouts[i].pp,
                          layouts[i].recompute ? ", recompute" : "", q, got[q], want[q]);
    }
}
END_TEST

int main(void)
{
    return harness_main("gpt-moe-stats");
}
