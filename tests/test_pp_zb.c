/*
 * test_pp_zb.c — ZB-H1 runs: the executor's B and W, its bubble in virtual
 * time, and the bytes W waits on.
 *
 *   bubble   under --profile ideal the MLP's F, B and W of a block each
 *            cost its two products, F = B = W; the measured makespan is
 *            m(F + B + W) + (p - 1)(F + B - W), a bubble of
 *            (p - 1) / (3m + p - 1) (m >= p), to 1e-9 — and 1F1B's stays
 *            (p - 1) / (m + p - 1) with the same model.  The GPT's B holds
 *            attention's T^2 work, so B != W: its bubble is the
 *            simulator's with F, B and W measured on one device.
 *   memory   a stage keeps, per micro-batch between its B and its W, a
 *            copy of dY and X of every linear layer: rows x (in + out)
 *            reals each; the executor reports the most it held at once
 *            (ptdp_pp_step.wgrad_peak_bytes), which must be that times the
 *            most micro-batches the stage's list has between B and W.
 *   order    W before its B, W twice, or a B never followed by its W is
 *            named by the executor.
 */
#include "gpt_shape.h"
#include "equivalence/equiv.h"
#include "pp_step.h"
#include "ptdp/gpt.h"
#include "ptdp/mesh.h"
#include "ptdp/models.h"
#include "ptdp/pp.h"
#include "ptdp/schedule.h"
#include "ptdp/wgrad.h"
#include "ptdp/mlp.h"

static ptdp_train_config mlp_config(int dp, int pp, int m, const char *schedule)
{
    ptdp_train_config c = {
        .model = PTDP_MLP_CONFIG( .d_in = 12, .hidden = 16, .ffn = 32, .layers = 12, .classes = 8 ),
        .dp = dp, .tp = 1, .pp = pp, .micro_batches = m, .batch = 96, .steps = 2,
        .optimizer = PTDP_OPT_ADAMW, .lr = 1e-2, .bucket_mb = 0.004, .seed = 5, .schedule = ptdp_schedule_find(schedule),
    };
    return c;
}

/* ------------------------------------------------------------- bubble */

static const harness_tcase bubble_tests = { .name = "bubble", .timeout_s = 60 };

LOOP_TEST(bubble_tests, test_zb_h1_bubble_ideal_equals_formula, 16)
{
    static const int cases[][3] = {   /* dp, pp, m */
        { 1, 2, 2 }, { 1, 2, 6 }, { 1, 3, 3 }, { 1, 3, 8 }, { 1, 4, 4 }, { 1, 4, 12 }, { 1, 6, 6 }, { 2, 2, 4 },
    };
    int k = _i / 2, dp = cases[k][0], pp = cases[k][1], m = cases[k][2];
    const char *name = _i % 2 ? "1f1b" : "zb-h1";
    ptdp_train_config c = mlp_config(dp, pp, m, name);
    ptdp_schedule *s;
    ck_assert_int_eq(ptdp_schedule_create(name, pp, m, &s), 0);
    double formula = ptdp_schedule_bubble_formula(s, NULL);
    ptdp_schedule_destroy(s);
    double textbook = _i % 2 ? (double)(pp - 1) / (m + pp - 1) : (double)(pp - 1) / (3 * m + pp - 1);
    ck_assert_msg(fabs(formula - textbook) < 1e-15, "%s formula %.17g", name, formula);

    ptdp_launch_result lr;
    ptdp_launch_opts o = { .profile = ptdp_profile_find("ideal"), .result = &lr };
    ptdp_train_result r;
    equiv_train(&c, &o, NULL, &r);
    ck_assert_msg(fabs(r.bubble_measured - formula) < 1e-9, "%s dp=%d pp=%d m=%d: measured %.12f, formula %.12f",
                  name, dp, pp, m, r.bubble_measured, formula);
    for (int d = 0; d < lr.world_size; d++) {   /* every stage idles (p-1)(F+B-W) of each step */
        const ptdp_clock *ck = &lr.devices[d].clock;
        double idle = 1.0 - ck->compute_s / ck->now;
        ck_assert_msg(fabs(idle - formula) < 1e-9, "%s pp=%d m=%d device %d: idle %.12f, formula %.12f", name,
                      pp, m, d, idle, formula);
    }
    ptdp_launch_result_free(&lr);
    ptdp_train_result_free(&r);
}
END_TEST

/* The GPT's costs on one device: a model of one stage's blocks, whose edge
 * layers are free under the ideal profile, so its F, B and W are a stage's. */
typedef struct { ptdp_model_config model; int rows; double f, b, w; } costs_arg;

static int costs_device(ptdp_device *dev, void *arg)
{
    costs_arg *a = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    DEVICE_TRY(harness_model_on_mesh(dev, &a->model, 1, 1, 1, 5, &mesh, &m));
    ptdp_batch b = { .first = 0, .rows = a->rows };
    DEVICE_TRY(ptdp_batch_load(dev, &m, &b));
    ptdp_acts acts;
    ptdp_wgrad w = { 0 };
    double t0 = dev->clock.now;
    DEVICE_TRY(ptdp_model_forward(dev, &m, &acts, &b, (ptdp_tensor){ 0 }, 0, false, NULL));
    double t1 = dev->clock.now;
    DEVICE_TRY(ptdp_model_backward_input(dev, &m, &acts, NULL, 1.0, NULL, &w));
    double t2 = dev->clock.now;
    DEVICE_TRY(ptdp_model_backward_weight(dev, &m, &w));
    a->f = t1 - t0;
    a->b = t2 - t1;
    a->w = dev->clock.now - t2;
    ptdp_batch_free(dev, &b);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return 0;
}

LOOP_TEST(bubble_tests, test_zb_h1_gpt_bubble_equals_simulation, 3)
{
    static const int cases[][2] = { { 2, 4 }, { 4, 4 }, { 4, 8 } };   /* pp, m */
    int pp = cases[_i][0], m = cases[_i][1];
    ptdp_train_config c = equiv_config(1, 1, pp, m);
    /* the built-in sums' 62 tokens */
    c.model = gpt_of((gpt_shape){ .layers = 8, .hidden = 32, .ffn = 64, .heads = 8, .seq_len = 16, .vocab = 62 }, 0);
    c.batch = 2 * m;
    c.schedule = ptdp_schedule_find("zb-h1");
    ptdp_launch_opts o = { .profile = ptdp_profile_find("ideal") };

    costs_arg a = { .model = c.model, .rows = c.batch / m };
    a.model.layers = c.model.layers / pp;
    harness_launch_ok(1, costs_device, &a, &o, NULL);
    ck_assert_msg(a.b > a.w && a.w > 0, "GPT B %g, W %g: attention is in B", a.b, a.w);

    ptdp_schedule *s;
    ptdp_schedule_timeline *t;
    ck_assert_int_eq(ptdp_schedule_create("zb-h1", pp, m, &s), 0);
    ptdp_schedule_costs k = { .forward = a.f, .backward = a.b + a.w, .backward_input = a.b, .backward_weight = a.w };
    ck_assert_int_eq(ptdp_schedule_simulate(s, &k, &t), 0);
    ptdp_train_result r;
    equiv_train(&c, &o, NULL, &r);
    printf("gpt zb-h1 pp=%d m=%d: F %.3g B %.3g W %.3g s, bubble measured %.6f, simulated %.6f, "
           "F=B=W formula %.6f\n", pp, m, a.f, a.b, a.w, r.bubble_measured, t->bubble,
           ptdp_schedule_bubble_formula(s, NULL));
    ck_assert_msg(fabs(r.bubble_measured - t->bubble) < 1e-9, "pp=%d m=%d: measured %.12f, simulated %.12f", pp, m,
                  r.bubble_measured, t->bubble);
    ptdp_schedule_timeline_destroy(t);
    ptdp_schedule_destroy(s);
    ptdp_train_result_free(&r);
}
END_TEST

/* ------------------------------------------------- executor, by hand */

static const harness_tcase executor_tests = { .name = "executor", .timeout_s = 60 };

/* Most micro-batches of a stage's list between their B and their W. */
LOOP_TEST(executor_tests, test_zb_h1_w_bytes_and_in_flight, 4)
{
    static const int cases[][2] = { { 2, 4 }, { 3, 3 }, { 4, 4 }, { 4, 8 } };   /* pp, m */
    int pp = cases[_i][0], M = cases[_i][1];
    ptdp_schedule *s;
    ck_assert_int_eq(ptdp_schedule_create("zb-h1", pp, M, &s), 0);
    pp_step_arg a = { .schedule = s, .batch = 4 * M,
                   .model = PTDP_MLP_CONFIG( .d_in = 12, .hidden = 16, .ffn = 32, .layers = 2 * pp, .classes = 8 ) };
    harness_launch_ok(pp, pp_step_device, &a, NULL, NULL);
    const int rows = a.batch / M, h = a.model.hidden;
    for (int st = 0; st < pp; st++) {
        /* two blocks of fc1 (h -> ffn) and fc2 (ffn -> h); in and out layers on the edges */
        size_t per_mb = 2 * 2 * ptdp_wgrad_linear_bytes(rows, h, a.model.ffn);
        if (st == 0)
            per_mb += ptdp_wgrad_linear_bytes(rows, ptdp_mlp(&a.model)->d_in, h);
        if (st == pp - 1)
            per_mb += ptdp_wgrad_linear_bytes(rows, h, ptdp_mlp(&a.model)->classes);
        size_t want = per_mb * (size_t)ptdp_schedule_peak_deferred(s, st);
        printf("zb-h1 pp=%d m=%d stage %d: W held at most %zu bytes = %d micro-batches x %zu\n", pp, M, st,
               a.wgrad_peak[st], ptdp_schedule_peak_deferred(s, st), per_mb);
        ck_assert_msg(a.wgrad_peak[st] == want, "pp=%d m=%d stage %d: W held %zu bytes, formula %zu", pp, M, st,
                      a.wgrad_peak[st], want);
        ck_assert_int_eq(a.peak_in_flight[st], ptdp_schedule_peak_in_flight(s, st));
        ck_assert_msg(a.acts_after[st] == 0, "stage %d: %zu bytes of acts left", st, a.acts_after[st]);
    }
    ptdp_schedule_destroy(s);
}
END_TEST

/* Hand-written one-stage lists with B and W out of order. */
LOOP_TEST(executor_tests, test_executor_names_b_and_w_out_of_order, 3)
{
    static const char *const want[] = {
        "action 1 (BACKWARD_WEIGHT of micro-batch 0): its BACKWARD_INPUT has not run (W before B)",
        "action 3 (BACKWARD_WEIGHT of micro-batch 0): no BACKWARD_INPUT left weight gradients",
        "micro-batch 0 has a BACKWARD_INPUT but no BACKWARD_WEIGHT",
    };
    ptdp_schedule *s;
    ck_assert_int_eq(ptdp_schedule_alloc("broken", 1, 1, &s), 0);
    ptdp_schedule_push(s, 0, PTDP_ACT_FORWARD, 0);
    if (_i == 0)
        ptdp_schedule_push(s, 0, PTDP_ACT_BACKWARD_WEIGHT, 0);
    ptdp_schedule_push(s, 0, PTDP_ACT_BACKWARD_INPUT, 0);
    if (_i == 1) {
        ptdp_schedule_push(s, 0, PTDP_ACT_BACKWARD_WEIGHT, 0);
        ptdp_schedule_push(s, 0, PTDP_ACT_BACKWARD_WEIGHT, 0);
    }
    ptdp_schedule_push(s, 0, PTDP_ACT_OPTIMIZER_STEP, -1);
    pp_step_arg a = { .schedule = s, .batch = 4, .model = PTDP_MLP_CONFIG( .d_in = 12, .hidden = 16, .ffn = 32,
                                                                       .layers = 1, .classes = 8 ) };
    ptdp_launch_result lr;
    ck_assert_int_eq(harness_launch(1, pp_step_device, &a, NULL, &lr), PTDP_EINVAL);
    ck_assert_msg(strstr(lr.message, want[_i]) != NULL, "message '%s', want '%s'", lr.message, want[_i]);
    ptdp_launch_result_free(&lr);
    ptdp_schedule_destroy(s);
}
END_TEST

int main(void)
{
    return harness_main("pp_zb");
}
