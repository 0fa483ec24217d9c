/*
 * test_gpt_moe_stats.c — what a step counts of a GPT's experts
 * (gpt_moe_stats.h): the counters it publishes, and that a pipeline step
 * counts each micro-batch's route once, whatever the layout.
 *
 *   published  6 layers, --moe-every 3: MoE blocks 2 and 5; "aux_loss" a
 *              number, "moe_load" 2 x E, "moe_dropped" and "moe_aux_loss" 2
 *              each, numbers of a step counted by TP rank 0; a dense GPT
 *              publishes none
 *
 *   a step     4 layers, --moe-every 2 (MoE blocks 1 and 3), B = 4 sequences
 *              of T = 8 in 2 micro-batches, top-2 of 4: the counts summed
 *              over the stages are the same at pp 1 and pp 2, with and
 *              without full recomputation (which routes each micro-batch
 *              twice), and obey sum_e load[e] = k B T, dropped = 0, the
 *              blocks' aux summing to the stages' balance losses
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_shape.h"
#include "harness.h"
#include "ptdp/counters.h"
#include "ptdp/gpt.h"
#include "ptdp/gpt_moe_stats.h"
#include "ptdp/mesh.h"
#include "ptdp/models.h"
#include "ptdp/pp.h"
#include "ptdp/schedule.h"

static const harness_tcase stats_tests = { .name = "moe-stats", .timeout_s = 120 };

enum { E = 4, K = 2, T = 8, B = 4, M = 2, LAYERS = 4, N = 1 + 2 * (E + 2) };

static ptdp_model_config config(int layers, int every)
{
    ptdp_model_config c = gpt_of((gpt_shape){ .layers = layers, .seq_len = T, .vocab = 62 }, 1);
    ptdp_gpt(&c)->moe_experts = E;
    ptdp_gpt(&c)->moe_top_k = K;
    ptdp_gpt(&c)->moe_every = every;
    return c;
}

/* c's counters as the model publishes them. */
static ptdp_counters published(const ptdp_model_config *c)
{
    ptdp_counters reg;
    ptdp_counters_init(&reg);
    ck_assert_int_eq(ptdp_gpt_ops.publish(c, &reg), 0);
    return reg;
}

TEST(stats_tests, test_counters_are_the_moe_blocks_in_layer_order)
{
    ptdp_model_config c = config(6, 3);
    ck_assert_int_eq(ptdp_gpt_moe_blocks(&c), 2);
    ck_assert_int_eq(ptdp_gpt_moe_layer(&c, 0), 2);
    ck_assert_int_eq(ptdp_gpt_moe_layer(&c, 1), 5);
    ck_assert_int_eq(ptdp_gpt_moe_layer(&c, 2), -1);
    const ptdp_moe_settings s = ptdp_gpt_moe_settings(&c);   /* every model's rule (moe.h) */
    for (int l = 0; l < 6; l++)
        ck_assert_int_eq(ptdp_moe_block_is_moe(&s, l), l == 2 || l == 5);
    ptdp_counters reg = published(&c);
    static const struct { const char *name; int ndim, rows, len; unsigned flags; } want[] = {
        { "aux_loss", 0, 1, 1, PTDP_COUNT_TP_ONCE | PTDP_COUNT_PER_SAMPLE },
        { "moe_load", 2, 2, 2 * E, PTDP_COUNT_TP_ONCE },
        { "moe_dropped", 1, 2, 2, PTDP_COUNT_TP_ONCE },
        { "moe_aux_loss", 1, 2, 2, PTDP_COUNT_TP_ONCE | PTDP_COUNT_PER_SAMPLE },
    };
    ck_assert_int_eq(reg.n, 4);
    for (int i = 0; i < 4; i++) {   /* in the order --log writes them */
        ck_assert_str_eq(reg.c[i].name, want[i].name);
        ck_assert_int_eq(reg.c[i].kind, PTDP_COUNT_STEP);
        ck_assert_int_eq(reg.c[i].shape.ndim, want[i].ndim);
        ck_assert_int_eq(reg.c[i].shape.dim[0], want[i].rows);
        ck_assert_int_eq(reg.c[i].len, want[i].len);
        ck_assert_uint_eq(reg.c[i].flags, want[i].flags);
    }
    ck_assert_int_eq(reg.len[PTDP_COUNT_STEP], N);
    ptdp_gpt(&c)->moe_experts = 0;
    ck_assert_int_eq(published(&c).n, 0);
}
END_TEST

typedef struct {
    const ptdp_schedule *schedule;
    bool recompute;
    ptdp_counters reg;
    double row[PTDP_MAX_DEVICES][N];   /* each device's counters of the step */
} step_arg;

static int step_device(ptdp_device *dev, void *arg)
{
    step_arg *a = arg;
    ptdp_model_config cfg = config(LAYERS, 2);
    ptdp_mesh mesh;
    ptdp_model m;
    DEVICE_TRY(harness_model_on_mesh(dev, &cfg, 1, 1, a->schedule->pp, 3, &mesh, &m));
    ptdp_counts counts = { .reg = &a->reg, .row = { [PTDP_COUNT_STEP] = a->row[dev->rank] }, .tp_lead = true };
    dev->counts = &counts;
    ptdp_pp_step st = {
        .model = &m, .schedule = a->schedule, .step = 0, .shard_first = 0, .shard_rows = B, .micro_batches = M,
        .recompute = a->recompute, .loss_scale = 1.0 / (B * T),
    };
    int rc = ptdp_pp_run_step(dev, &st);
    dev->counts = NULL;
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return rc;
}

/* The step's counters at pp, summed over its stages. */
static void step_counts(int pp, bool recompute, double *sum)
{
    ptdp_schedule *s;
    ck_assert_int_eq(ptdp_schedule_create("1f1b", pp, M, &s), 0);
    static step_arg a;
    memset(&a, 0, sizeof a);
    a.schedule = s;
    a.recompute = recompute;
    ptdp_model_config cfg = config(LAYERS, 2);
    a.reg = published(&cfg);
    harness_launch_ok(pp, step_device, &a, NULL, NULL);
    memset(sum, 0, N * sizeof *sum);
    for (int d = 0; d < pp; d++)
        for (int q = 0; q < N; q++)
            sum[q] += a.row[d][q];
    ptdp_schedule_destroy(s);
}

TEST(stats_tests, test_every_layout_counts_each_route_once)
{
    /* the row: aux_loss, moe_load [2][E], moe_dropped [2], moe_aux_loss [2] */
    enum { AUX = 0, LOAD = 1, DROPPED = 1 + 2 * E, BLOCK_AUX = DROPPED + 2 };
    double want[N], got[N];
    step_counts(1, false, want);
    for (int j = 0; j < 2; j++) {
        double sum = 0;
        for (int e = 0; e < E; e++)
            sum += want[LOAD + j * E + e];
        ck_assert_double_eq(sum, K * B * T);
        ck_assert_double_eq(want[DROPPED + j], 0);
    }
    ck_assert_double_eq_tol(want[BLOCK_AUX] + want[BLOCK_AUX + 1], want[AUX], 1e-12 * fabs(want[AUX]));
    ck_assert(want[AUX] > 0);
    static const struct { int pp; bool recompute; } layouts[] = { { 1, true }, { 2, false }, { 2, true } };
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        step_counts(layouts[i].pp, layouts[i].recompute, got);
        for (int q = 0; q < N; q++)
            ck_assert_msg(got[q] == want[q] || ((q == AUX || q >= BLOCK_AUX) && fabs(got[q] - want[q]) < 1e-9),
                          "pp %d%s: count %d is %g, one device's %g", layouts[i].pp,
                          layouts[i].recompute ? ", recompute" : "", q, got[q], want[q]);
    }
}
END_TEST

int main(void)
{
    return harness_main("gpt-moe-stats");
}
