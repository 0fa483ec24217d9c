/*
 * test_pp_chunks.c — interleaved 1F1B on the real executor: v model chunks
 * per stage, activations round the ring of stages v times.
 *
 *   chunk:   0   1 | 2   3        p = 2, v = 2: stage s holds chunks s and
 *   stage:   0   1 | 0   1        s + p; the message chunk 1 -> chunk 2 goes
 *   chunk:   0   0 | 1   1        from stage 1 back to stage 0
 *
 * What a student should see, each measured here:
 *
 *   layout    chunk c of stage s is the model's chunk c p + s of p v;
 *             its parameters are a window of the device's one flat buffer
 *   bubble    under the ideal profile  (p - 1) / (v m + p - 1)  — v times
 *             smaller a fill and drain than 1F1B's (p - 1) / (m + p - 1)
 *             (exact when t_b = 2 t_f, or p = 2, or m = p with t_b <= 2 t_f;
 *             otherwise the executor's bubble is the schedule's own timing
 *             simulation with the model's t_f and t_b, to the last digit)
 *   bytes     a micro-batch crosses p v - 1 chunk boundaries each way where
 *             1F1B crosses p - 1: the pipeline's point-to-point bytes grow
 *             by exactly (p v - 1) / (p - 1), "about v"
 *   memory    each stage holds up to the schedule's peak of (chunk,
 *             micro-batch) units, the longer warm-up's (v - 1) p extra ones
 *   executor  an out-of-order action names its chunk
 *   state     a checkpoint saved at pp 2 v 2 has the usual tensor names and
 *             loads at pp 1
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "equivalence/equiv.h"
#include "pp_step.h"
#include "ptdp/ptdp.h"

/* A small MLP with 24 blocks: p v = 4, 6, 8 and 12 all cut it evenly. */
static ptdp_train_config chunk_config(int dp, int pp, int m, int v)
{
    ptdp_train_config c = {
        .model = PTDP_MLP_CONFIG( .d_in = 12, .hidden = 16, .ffn = 32, .layers = 24, .classes = 8 ),
        .dp = dp, .tp = 1, .pp = pp, .micro_batches = m, .batch = 8 * m * dp, .steps = 2,
        .optimizer = PTDP_OPT_ADAMW, .lr = 1e-2, .bucket_mb = 0.004, .seed = 5,
        .schedule = ptdp_schedule_find(v > 0 ? "interleaved" : "1f1b"), .virtual_stages = v,
    };
    return c;
}

/* ------------------------------------------------------------- layout */

static const harness_tcase layout_tests = { .name = "layout", .timeout_s = 60 };

typedef struct {
    int pp, v;
    const int *stage_layers;
} layout_arg;

static int layout_device(ptdp_device *dev, void *arg)
{
    const layout_arg *a = arg;
    ptdp_model_config cfg = PTDP_MLP_CONFIG( .d_in = 6, .hidden = 8, .ffn = 16, .layers = 12, .classes = 4 );
    ptdp_mesh mesh;
    ptdp_model m;
    int rc = ptdp_mesh_init(dev, 1, 1, a->pp, &mesh);
    if (rc != 0)
        return rc;
    if ((rc = ptdp_model_init_v(dev, &m, &cfg, &mesh, a->stage_layers, a->v, 3, 0.0)) != 0) {
        ptdp_mesh_free(&mesh);
        return rc;
    }
    const int p = a->pp, s = mesh.pp_rank;
    DEVICE_CHECK(dev, m.virtual_stages == a->v && m.chunks != NULL, "v %d", m.virtual_stages);
    DEVICE_CHECK(dev, m.first_stage == (s == 0) && m.last_stage == (s == p - 1), "stage %d", s);
    /* params[] is chunk v-1's window, …, chunk 0's: the same structs */
    int next = 0;
    size_t numel = 0;
    for (int c = a->v - 1; c >= 0; c--) {
        ptdp_model *k = ptdp_model_chunk(&m, c);
        int g = c * p + s, begin, count;
        ptdp_stage_range(cfg.layers, p * a->v, a->stage_layers, g, &begin, &count);
        DEVICE_CHECK(dev, k->layer_begin == begin && k->layer_end == begin + count,
                     "stage %d chunk %d: blocks [%d, %d), want [%d, %d)", s, c, k->layer_begin, k->layer_end,
                     begin, begin + count);
        DEVICE_CHECK(dev, k->first_stage == (g == 0) && k->last_stage == (g == p * a->v - 1), "piece %d", g);
        DEVICE_CHECK(dev, k->params == m.params + next, "stage %d chunk %d: not a window of params[]", s, c);
        next += k->nparams;
        numel += k->numel;
    }
    DEVICE_CHECK(dev, next == m.nparams && numel == m.numel, "%d of %d params", next, m.nparams);
    /* the views tile the device's flat buffers */
    size_t off = 0;
    for (int i = 0; i < m.nparams; i++) {
        DEVICE_CHECK(dev, m.params[i].offset == off && m.params[i].w.data == m.flat_w + off &&
                     m.params[i].g.data == m.flat_g + off, "%s at %zu", m.params[i].name, m.params[i].offset);
        off += ptdp_tensor_numel(m.params[i].w);
    }
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return PTDP_OK;
}

/* _i: (pp, v, cut) from the table. */
LOOP_TEST(layout_tests, test_chunks_are_the_models_windows, 4)
{
    static const int uneven[] = { 1, 2, 3, 1, 4, 1 };   /* p 3, v 2: 12 blocks */
    static const layout_arg cases[] = {
        { 2, 2, NULL }, { 4, 3, NULL }, { 3, 2, uneven }, { 2, 6, NULL },
    };
    layout_arg a = cases[_i];
    harness_launch_ok(a.pp, layout_device, &a, NULL, NULL);
}
END_TEST

/* ------------------------------------------------------------- bubble */

static const harness_tcase bubble_tests = { .name = "bubble", .timeout_s = 60 };

/* The ideal profile: only the blocks cost time (the MLP's input and
 * output layers, links and the optimizer are free), so each chunk is
 * uniform and the textbook formula holds where the schedule meets it. */
LOOP_TEST(bubble_tests, test_bubble_ideal_equals_formula, 9)
{
    static const int cases[][4] = {   /* dp, pp, m, v */
        { 1, 2, 2, 2 }, { 1, 2, 4, 2 }, { 1, 2, 4, 3 }, { 1, 2, 8, 4 }, { 1, 2, 6, 6 },
        { 1, 3, 3, 2 }, { 1, 4, 4, 2 }, { 1, 4, 4, 3 }, { 2, 2, 4, 2 },
    };
    int dp = cases[_i][0], pp = cases[_i][1], m = cases[_i][2], v = cases[_i][3];
    ptdp_train_config c = chunk_config(dp, pp, m, v);
    ptdp_launch_result lr;
    ptdp_launch_opts o = { .profile = ptdp_profile_find("ideal"), .result = &lr };
    ptdp_train_result r;
    equiv_train(&c, &o, NULL, &r);
    double formula = (double)(pp - 1) / (double)(v * m + pp - 1);
    ck_assert_msg(fabs(r.bubble_formula - formula) < 1e-15, "formula %.17g", r.bubble_formula);
    ck_assert_str_eq(r.bubble_words, "(p-1)/(v*m+p-1)");
    ck_assert_msg(fabs(r.bubble_measured - formula) < 1e-9, "dp=%d pp=%d m=%d v=%d: measured %.12f, formula %.12f",
                  dp, pp, m, v, r.bubble_measured, formula);
    for (int d = 0; d < lr.world_size; d++) {
        const ptdp_clock *k = &lr.devices[d].clock;
        double idle = 1.0 - k->compute_s / k->now;
        ck_assert_msg(fabs(idle - formula) < 1e-9, "pp=%d m=%d v=%d device %d: idle %.12f, formula %.12f", pp, m,
                      v, d, idle, formula);
    }
    /* and v times the chunks is less bubble than 1F1B on the same mesh */
    c.schedule = ptdp_schedule_find("1f1b");
    c.virtual_stages = 0;
    ptdp_train_result f;
    equiv_train(&c, &(ptdp_launch_opts){ .profile = o.profile }, NULL, &f);
    ck_assert_msg(r.bubble_measured < f.bubble_measured, "interleaved %.6f, 1f1b %.6f", r.bubble_measured,
                  f.bubble_measured);
    ptdp_launch_result_free(&lr);
    ptdp_train_result_free(&r);
    ptdp_train_result_free(&f);
}
END_TEST

/* One block's forward and backward flops as mlp.c counts them under the
 * ideal profile (tp 1): only its two products, forward 2 x 2 rows h ffn,
 * backward twice that (dX and dW of each). */
static void mlp_block_flops(const ptdp_model_config *mc, int rows, double *f, double *b)
{
    *f = 2 * ptdp_matmul_flops(rows, mc->ffn, mc->hidden);
    *b = 2 * *f;
}

/* Megatron's warm-up is timed for t_b = 2 t_f, which is what the MLP's
 * products cost under the ideal profile: the measured bubble is the
 * schedule's own simulation with those t_f and t_b (the executor runs the
 * list the simulation timed), and that is the formula. */
LOOP_TEST(bubble_tests, test_bubble_ideal_equals_the_schedule_simulation, 3)
{
    static const int cases[][3] = { { 4, 8, 2 }, { 3, 6, 2 }, { 4, 8, 3 } };   /* pp, m, v */
    int pp = cases[_i][0], m = cases[_i][1], v = cases[_i][2];
    ptdp_train_config c = chunk_config(1, pp, m, v);
    c.steps = 1;
    const ptdp_profile *ideal = ptdp_profile_find("ideal");
    ptdp_train_result r;
    equiv_train(&c, &(ptdp_launch_opts){ .profile = ideal }, NULL, &r);

    double f, b;
    mlp_block_flops(&c.model, c.batch / m, &f, &b);
    int blocks = c.model.layers / (pp * v);
    ptdp_schedule_costs costs = { .forward = blocks * f / ideal->peak_flops,
                                  .backward = blocks * b / ideal->peak_flops };
    ptdp_schedule *s;
    ptdp_schedule_timeline *t;
    ck_assert_int_eq(ptdp_schedule_create_v("interleaved", pp, m, v, &s), 0);
    ck_assert_int_eq(ptdp_schedule_simulate(s, &costs, &t), 0);
    ck_assert_msg(fabs(r.bubble_measured - t->bubble) < 1e-9, "pp=%d m=%d v=%d: measured %.12f, simulated %.12f",
                  pp, m, v, r.bubble_measured, t->bubble);
    ck_assert_msg(fabs(r.bubble_measured - r.bubble_formula) < 1e-9, "measured %.12f, formula %.12f",
                  r.bubble_measured, r.bubble_formula);
    ptdp_schedule_timeline_destroy(t);
    ptdp_schedule_destroy(s);
    ptdp_train_result_free(&r);
}
END_TEST

/* ------------------------------------------------------------- bytes */

static const harness_tcase bytes_tests = { .name = "bytes", .timeout_s = 60 };

/* Point-to-point bytes of a run, all devices (the pipeline's only sends). */
static double p2p_bytes(const ptdp_launch_result *lr)
{
    double sum = 0;
    for (int d = 0; d < lr->world_size; d++)
        sum += lr->devices[d].comm.bytes_sent[PTDP_COLL_SEND];
    return sum;
}

/* Each micro-batch crosses p v - 1 boundaries forward and as many back,
 * each a rows x hidden activation or gradient: 2 m (p v - 1) messages per
 * DP replica and step, against 1F1B's 2 m (p - 1). */
LOOP_TEST(bytes_tests, test_p2p_bytes_grow_by_the_boundaries, 5)
{
    static const int cases[][4] = { { 1, 2, 2, 2 }, { 1, 2, 4, 3 }, { 1, 4, 4, 2 }, { 1, 3, 6, 4 }, { 2, 2, 4, 2 } };
    int dp = cases[_i][0], pp = cases[_i][1], m = cases[_i][2], v = cases[_i][3];
    ptdp_train_config c = chunk_config(dp, pp, m, v);
    ptdp_launch_result li, lf;
    ptdp_train_result ri, rf;
    equiv_train(&c, &(ptdp_launch_opts){ .result = &li }, NULL, &ri);
    c.schedule = ptdp_schedule_find("1f1b");
    c.virtual_stages = 0;
    equiv_train(&c, &(ptdp_launch_opts){ .result = &lf }, NULL, &rf);
    double rows = c.batch / (dp * m), message = rows * c.model.hidden * sizeof(ptdp_real);
    double want_i = (double)c.steps * dp * 2 * m * (pp * v - 1) * message;
    double want_f = (double)c.steps * dp * 2 * m * (pp - 1) * message;
    ck_assert_msg(p2p_bytes(&li) == want_i, "interleaved pp=%d m=%d v=%d: %.0f bytes, want %.0f", pp, m, v,
                  p2p_bytes(&li), want_i);
    ck_assert_msg(p2p_bytes(&lf) == want_f, "1f1b pp=%d m=%d: %.0f bytes, want %.0f", pp, m, p2p_bytes(&lf),
                  want_f);
    double ratio = p2p_bytes(&li) / p2p_bytes(&lf);
    ck_assert_msg(fabs(ratio - (double)(pp * v - 1) / (pp - 1)) < 1e-12, "ratio %.6f, want (pv-1)/(p-1) = %.6f",
                  ratio, (double)(pp * v - 1) / (pp - 1));
    ck_assert(ratio >= v);   /* "about v", never less: pv-1 >= v(p-1) */
    ptdp_launch_result_free(&li);
    ptdp_launch_result_free(&lf);
    ptdp_train_result_free(&ri);
    ptdp_train_result_free(&rf);
}
END_TEST

/* ------------------------------------------------- the executor, by hand */

static const harness_tcase executor_tests = { .name = "executor", .timeout_s = 60 };

HARNESS_MODEL_CONFIG(chunk_model_of, PTDP_MLP_CONFIG( .d_in = 6, .hidden = 8, .ffn = 16, .layers = 12, .classes = 5 ))
#define CHUNK_MODEL (*chunk_model_of())

/* Each stage holds exactly the (chunk, micro-batch) units the schedule
 * counts — the warm-up's longer run of forwards — and every chunking
 * computes the same loss as 1F1B. */
LOOP_TEST(executor_tests, test_executor_holds_the_schedules_tasks, 4)
{
    static const int cases[][3] = { { 2, 2, 2 }, { 2, 4, 3 }, { 3, 6, 2 }, { 4, 8, 3 } };   /* pp, m, v */
    int pp = cases[_i][0], m = cases[_i][1], v = cases[_i][2];
    double loss[2];
    for (int k = 0; k < 2; k++) {
        ptdp_schedule *s;
        ck_assert_int_eq(ptdp_schedule_create_v(k ? "1f1b" : "interleaved", pp, m, k ? 1 : v, &s), 0);
        pp_step_arg a = { .schedule = s, .model = CHUNK_MODEL, .batch = 4 * m };
        ptdp_launch_result lr;
        harness_launch_ok(pp, pp_step_device, &a, NULL, &lr);
        for (int st = 0; st < pp; st++) {
            ck_assert_int_eq(a.peak_in_flight[st], ptdp_schedule_peak_in_flight(s, st));
            ck_assert_uint_eq(lr.devices[st].mem.current[PTDP_MEM_ACTS], 0);
        }
        if (k == 0)   /* stage 0's warm-up: 2 (p - 1) + (v - 1) p forwards, then one more in flight */
            ck_assert_int_eq(a.peak_in_flight[0], (2 * (pp - 1) + (v - 1) * pp + 1 < m * v)
                                                      ? 2 * (pp - 1) + (v - 1) * pp + 1 : m * v);
        loss[k] = a.loss_sum;
        ptdp_launch_result_free(&lr);
        ptdp_schedule_destroy(s);
    }
    ck_assert(loss[0] > 0);
    ck_assert_msg(fabs(loss[0] - loss[1]) <= 1e-5 * loss[1], "interleaved loss %.17g, 1f1b %.17g", loss[0], loss[1]);
}
END_TEST

/* A hand-written chunked list where stage 0 runs its chunk 1 (the model's chunk 2) before
 * receiving its input from stage 1: the message names the chunk. */
TEST(executor_tests, test_out_of_order_names_the_chunk)
{
    ptdp_schedule *s;
    ck_assert_int_eq(ptdp_schedule_alloc_v("broken", 2, 1, 2, &s), 0);
    ptdp_schedule_push_chunk(s, 0, PTDP_ACT_FORWARD, 0, 0);
    ptdp_schedule_push_chunk(s, 0, PTDP_ACT_SEND_FORWARD, 0, 0);
    ptdp_schedule_push_chunk(s, 0, PTDP_ACT_FORWARD, 0, 1);          /* before its RECV_FORWARD */
    ptdp_schedule_push_chunk(s, 0, PTDP_ACT_OPTIMIZER_STEP, -1, 0);
    ptdp_schedule_push_chunk(s, 1, PTDP_ACT_RECV_FORWARD, 0, 0);
    ptdp_schedule_push_chunk(s, 1, PTDP_ACT_FORWARD, 0, 0);
    ptdp_schedule_push_chunk(s, 1, PTDP_ACT_SEND_FORWARD, 0, 0);
    ptdp_schedule_push_chunk(s, 1, PTDP_ACT_OPTIMIZER_STEP, -1, 0);
    ck_assert_int_eq(ptdp_schedule_validate(s, NULL), PTDP_EINVAL);
    pp_step_arg a = { .schedule = s, .model = CHUNK_MODEL, .batch = 4 };
    ptdp_launch_result lr;
    ck_assert_int_eq(harness_launch(2, pp_step_device, &a, NULL, &lr), PTDP_EINVAL);
    ck_assert_int_eq(lr.failed_rank, 0);
    ASSERT_HAS(lr.message, "stage 0, action 2 (FORWARD of micro-batch 0, chunk 1): its input was not received");
    ptdp_launch_result_free(&lr);
    ptdp_schedule_destroy(s);
}
END_TEST

/* A schedule for another v is refused before any message. */
TEST(executor_tests, test_schedule_for_another_v_is_refused)
{
    ptdp_schedule *s;
    ck_assert_int_eq(ptdp_schedule_create_v("interleaved", 2, 2, 2, &s), 0);
    pp_step_arg a = { .schedule = s, .model = CHUNK_MODEL, .batch = 8, .model_v = 1 };
    ptdp_launch_result lr;
    ck_assert_int_eq(harness_launch(2, pp_step_device, &a, NULL, &lr), PTDP_EINVAL);
    ASSERT_HAS(lr.message, "the interleaved schedule runs 2 chunks per stage, the model has 1");
    ptdp_launch_result_free(&lr);
    ptdp_schedule_destroy(s);
}
END_TEST

/* ------------------------------------------------------------- state */

static const harness_tcase state_tests = { .name = "state", .timeout_s = 120 };

/* Saved at pp 2 v 2, the checkpoint holds the usual tensors (the same
 * names, the same values as one device's run within --check's rule) and
 * loads at pp 1: the two halves together equal never stopping. */
TEST(state_tests, test_checkpoint_interleaved_loads_at_pp1)
{
    ptdp_train_config first = equiv_config(1, 1, 2, 2);
    first.model.layers = 4;
    first.schedule = ptdp_schedule_find("interleaved");
    first.virtual_stages = 2;
    first.steps = 2;
    ptdp_train_config second = equiv_baseline(&first);
    ptdp_train_config whole = second;
    whole.steps = 4;

    /* the same names as one device's */
    ptdp_state a, b;
    ptdp_train_result ra, rb;
    equiv_train(&first, NULL, &a, &ra);
    equiv_train(&second, NULL, &b, &rb);
    equiv_states_agree(&a, &b, PTDP_TOLERANCE, "interleaved pp 2 v 2 against one device");

    ptdp_state end, straight;
    ptdp_train_result rend, rstraight;
    equiv_resume(&first, &second, &end, &rend);
    equiv_train(&whole, NULL, &straight, &rstraight);
    equiv_losses_agree(rend.log, rstraight.log + first.steps, second.steps, PTDP_TOLERANCE, "resumed at pp 1");
    equiv_states_agree(&end, &straight, PTDP_TOLERANCE, "resumed at pp 1");
    ptdp_state_free(&a);
    ptdp_state_free(&b);
    ptdp_state_free(&end);
    ptdp_state_free(&straight);
    ptdp_train_result_free(&ra);
    ptdp_train_result_free(&rb);
    ptdp_train_result_free(&rend);
    ptdp_train_result_free(&rstraight);
}
END_TEST

int main(void)
{
    return harness_main("pp-chunks");
}
