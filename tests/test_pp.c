/*
 * test_pp.c — what a pipeline costs, measured on the real executor.
 *
 * The schedules are proven correct as data in test_schedule.c; the
 * equivalence suite proves the pipeline trains like one device.  This file
 * measures what a student of pipelines should see:
 *
 *   memory    each stage's arena peak of activations is, to the byte,
 *                 k * (one micro-batch's activations) + one backward's scratch
 *             with k = m for GPipe and k = min(p - stage, m) for 1F1B;
 *             with --recompute only each block's input stays (and the
 *             stage's own input on stage 0, the output layer's on the
 *             last), and one block is redone at a time in the backward:
 *                 (k - 1) * kept + (kept + one block redone) + scratch
 *             and the trained weights are bit-identical.
 *   bubble    under the "ideal" profile every stage idles exactly
 *                 (p - 1) / (m + p - 1)
 *             of the step, for both schedules (and with recompute: t_b grows
 *             by t_f on every stage alike, so the fraction does not move).
 *   DP        with dp > 1 the gradient all-reduce runs once per step per
 *             bucket, after the last backward — not once per micro-batch.
 *   trace     each stage's track holds its forwards, backwards, sends,
 *             receives, and its idle time (receive waits, collective waits).
 *   executor  a schedule that orders every send before its receive (the
 *             naive 1F1B) deadlocks under rendezvous send/recv, and the
 *             watchdog names the stages stuck in their sends; the real
 *             schedules run through the same executor, holding exactly the
 *             micro-batches the schedule says.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "equivalence/equiv.h"
#include "pp_step.h"
#include "ptdp/ptdp.h"

/* ------------------------------------------------------------- helpers */

/* A small model: 12 blocks so that pp = 2, 3, 4 all give uniform stages. */
static ptdp_train_config small_config(int dp, int pp, int m, const char *schedule)
{
    ptdp_train_config c = {
        .model = PTDP_MLP_CONFIG( .d_in = 12, .hidden = 16, .ffn = 32, .layers = 12, .classes = 8 ),
        .dp = dp, .tp = 1, .pp = pp, .micro_batches = m, .batch = 96, .steps = 2,
        .optimizer = PTDP_OPT_ADAMW, .lr = 1e-2, .bucket_mb = 0.004, .seed = 5, .schedule = ptdp_schedule_find(schedule),
    };
    return c;
}

static const char *const SCHEDULES[] = { "gpipe", "1f1b" };

/* ------------------------------------------------------------- memory */

static const harness_tcase memory_tests = { .name = "memory", .timeout_s = 60 };

/*
 * Bytes of the category "acts" one micro-batch of `rows` samples leaves on
 * `stage` (mlp.c, pp.c), counted from the shapes:
 *
 *   resident  what survives the forward until the backward:
 *               acts.input   rows x (d_in on stage 0, else h)
 *               acts.h       rows x h, one per local block + 1
 *               acts.a/gelu  rows x d_ff, two per local block
 *               last stage:  logits rows x C, rowmax and sumexp (double)
 *   input     acts.input: the stage input
 *   kept      what --recompute full keeps (mlp.c): stage 0's acts.input
 *             (the input layer's backward reads it), each block's input h,
 *             the last stage's h into the output layer
 *   redone    the most one micro-batch holds in its recomputing backward:
 *             kept (without the last h) + the block redone (a, gelu and its
 *             output h), or on the last stage kept + the output layer
 *             redone (logits, rowmax, sumexp) if that is more
 *   scratch   what one backward adds while it runs:
 *               pp.recv_grad rows x h   (the received dout; not on the last stage)
 *               pp.send_grad rows x h   (dx to send back; not on stage 0)
 *               grad.h, grad.tmp rows x h, grad.ff rows x d_ff
 *
 * A forward adds less (pp.recv_act and pp.send_act, rows x h each, or the
 * loss's rows doubles), so the peak falls inside a backward.
 */
typedef struct {
    size_t resident, input, kept, redone, scratch;
} mb_bytes;

static mb_bytes micro_batch_bytes(const ptdp_train_config *c, int stage)
{
    const ptdp_model_config *m = &c->model;
    size_t es = sizeof(ptdp_real), rows = (size_t)(c->batch / (c->dp * c->micro_batches));
    size_t h = (size_t)m->hidden, ff = (size_t)m->ffn;
    int begin, nb;
    ptdp_stage_range(m->layers, c->pp, c->stage_layers, stage, &begin, &nb);
    bool first = stage == 0, last = stage == c->pp - 1;
    mb_bytes b;
    b.input = rows * (first ? (size_t)ptdp_mlp(m)->d_in : h) * es;
    b.resident = b.input + (size_t)(nb + 1) * rows * h * es + 2 * (size_t)nb * rows * ff * es;
    if (last)
        b.resident += rows * (size_t)ptdp_mlp(m)->classes * es + 2 * rows * sizeof(double);
    b.scratch = (last ? 0 : rows * h * es) + (first ? 0 : rows * h * es) + 2 * rows * h * es + rows * ff * es;
    const size_t x0 = first ? b.input : 0, out = rows * (size_t)ptdp_mlp(m)->classes * es + 2 * rows * sizeof(double);
    b.kept = x0 + (size_t)nb * rows * h * es + (last ? rows * h * es : 0);
    b.redone = x0 + (size_t)(nb + 1) * rows * h * es + 2 * rows * ff * es;
    if (last && b.kept + out > b.redone)
        b.redone = b.kept + out;
    return b;
}

/* The textbook in-flight count: GPipe m, 1F1B min(p - stage, m). */
static int textbook_in_flight(const char *schedule, int pp, int m, int stage)
{
    return strcmp(schedule, "gpipe") == 0 ? m : (pp - stage < m ? pp - stage : m);
}

static size_t expected_peak(const ptdp_train_config *c, int stage)
{
    mb_bytes b = micro_batch_bytes(c, stage);
    size_t k = (size_t)textbook_in_flight(ptdp_train_schedule(c)->name, c->pp, c->micro_batches, stage);
    if (c->recompute)   /* k micro-batches' kept inputs, one of them redoing a block */
        return (k - 1) * b.kept + b.redone + b.scratch;
    return k * b.resident + b.scratch;
}

/* _i: (pp, m) from the table, x schedule. */
LOOP_TEST(memory_tests, test_activation_peaks_per_stage, 10)
{
    static const int cases[][2] = { { 4, 8 }, { 4, 2 }, { 3, 6 }, { 2, 1 }, { 2, 16 } };
    int pp = cases[_i / 2][0], m = cases[_i / 2][1];
    const char *schedule = SCHEDULES[_i % 2];
    ptdp_train_config c = small_config(1, pp, m, schedule);
    ptdp_train_result plain, recomputed;
    equiv_train(&c, NULL, NULL, &plain);
    c.recompute = true;
    equiv_train(&c, NULL, NULL, &recomputed);

    ptdp_schedule *s;
    ck_assert_int_eq(ptdp_schedule_create(schedule, pp, m, &s), 0);
    for (int st = 0; st < pp; st++) {
        /* the schedule's own count agrees with the textbook */
        int k = ptdp_schedule_peak_in_flight(s, st);
        ck_assert_int_eq(k, textbook_in_flight(schedule, pp, m, st));
        c.recompute = false;
        mb_bytes b = micro_batch_bytes(&c, st);
        ck_assert_msg(plain.peak_acts[st] == expected_peak(&c, st),
                      "%s pp=%d m=%d stage %d: peak acts %zu bytes, expected %d x %zu + %zu = %zu", schedule,
                      pp, m, st, plain.peak_acts[st], k, b.resident, b.scratch, expected_peak(&c, st));
        c.recompute = true;
        ck_assert_msg(recomputed.peak_acts[st] == expected_peak(&c, st),
                      "%s pp=%d m=%d stage %d recompute: peak acts %zu bytes, expected %d x %zu + %zu + %zu = %zu",
                      schedule, pp, m, st, recomputed.peak_acts[st], k - 1, b.kept, b.redone, b.scratch,
                      expected_peak(&c, st));
        /* recompute saves all but the kept inputs of k - 1 micro-batches, and of
         * the one in its backward all but one block */
        ck_assert_uint_eq(plain.peak_acts[st] - recomputed.peak_acts[st],
                          (size_t)(k - 1) * (b.resident - b.kept) + (b.resident - b.redone));
    }
    /* With m >= p, 1F1B's stage 0 holds one micro-batch more than stage 1 */
    if (strcmp(schedule, "1f1b") == 0 && pp > 1 && m >= pp)
        ck_assert_uint_gt(plain.peak_acts[0], plain.peak_acts[1]);
    ptdp_schedule_destroy(s);
    ptdp_train_result_free(&plain);
    ptdp_train_result_free(&recomputed);
}
END_TEST

/* GPipe against 1F1B on one configuration: the headline of the pipeline lesson. */
TEST(memory_tests, test_gpipe_holds_m_1f1b_holds_p_minus_rank)
{
    ptdp_train_config c = small_config(1, 4, 8, "gpipe");
    ptdp_train_result g, f;
    equiv_train(&c, NULL, NULL, &g);
    c.schedule = ptdp_schedule_find("1f1b");
    equiv_train(&c, NULL, NULL, &f);
    for (int st = 0; st < 4; st++) {
        mb_bytes b = micro_batch_bytes(&c, st);
        ck_assert_uint_eq((g.peak_acts[st] - b.scratch) / b.resident, 8);
        ck_assert_uint_eq((g.peak_acts[st] - b.scratch) % b.resident, 0);
        ck_assert_uint_eq((f.peak_acts[st] - b.scratch) / b.resident, (size_t)(4 - st));
        ck_assert_uint_eq((f.peak_acts[st] - b.scratch) % b.resident, 0);
    }
    ptdp_train_result_free(&g);
    ptdp_train_result_free(&f);
}
END_TEST

/* The recomputed forward is the same computation on the same bits, so the
 * trained weights and every step's loss are bit-identical, not just close. */
LOOP_TEST(memory_tests, test_recompute_is_bit_identical, 4)
{
    ptdp_train_config c = small_config(1, 4, 8, SCHEDULES[_i % 2]);
    c.steps = 3;
    c.dropout = _i / 2 ? 0.1 : 0.0;
    ptdp_state a, b;
    ptdp_train_result ra, rb;
    equiv_train(&c, NULL, &a, &ra);
    c.recompute = true;
    equiv_train(&c, NULL, &b, &rb);
    equiv_losses_agree(rb.log, ra.log, c.steps, 0, "with --recompute");
    equiv_states_agree(&b, &a, 0, "with --recompute");
    ptdp_train_result_free(&ra);
    ptdp_train_result_free(&rb);
    ptdp_state_free(&a);
    ptdp_state_free(&b);
}
END_TEST

/* ------------------------------------------------------------- bubble */

static const harness_tcase bubble_tests = { .name = "bubble", .timeout_s = 60 };

/*
 * The ideal profile: blocks cost flops / peak, everything else (input and
 * output layers, links, optimizer) is free.  Then every device's virtual
 * clock ends at steps x makespan and its compute time is steps x busy, so
 * 1 - compute / now is that stage's idle fraction, and the run's measured
 * bubble (their mean) must be the formula.
 */
LOOP_TEST(bubble_tests, test_bubble_ideal_equals_formula, 44)
{
    static const int cases[][3] = {   /* dp, pp, m */
        { 1, 2, 1 }, { 1, 2, 4 }, { 1, 3, 2 }, { 1, 3, 6 }, { 1, 4, 1 }, { 1, 4, 4 },
        { 1, 4, 8 }, { 1, 4, 16 }, { 1, 6, 12 }, { 2, 2, 4 }, { 2, 3, 8 },
    };
    int k = _i / 4, dp = cases[k][0], pp = cases[k][1], m = cases[k][2];
    ptdp_train_config c = small_config(dp, pp, m, SCHEDULES[_i % 2]);
    c.recompute = _i / 2 % 2;
    ptdp_launch_result lr;
    ptdp_launch_opts o = { .profile = ptdp_profile_find("ideal"), .result = &lr };
    ck_assert_ptr_nonnull(o.profile);
    ptdp_train_result r;
    equiv_train(&c, &o, NULL, &r);
    double formula = (double)(pp - 1) / (double)(m + pp - 1);
    ck_assert_msg(fabs(r.bubble_formula - formula) < 1e-15, "formula %.17g", r.bubble_formula);
    ck_assert_msg(fabs(ptdp_bubble_formula(pp, m) - formula) < 1e-15, "schedule.h formula");
    ck_assert_msg(fabs(r.bubble_measured - formula) < 1e-9, "%s%s dp=%d pp=%d m=%d: measured %.12f, formula %.12f",
                  c.schedule->name, c.recompute ? " recompute" : "", dp, pp, m, r.bubble_measured, formula);
    /* and every stage alone idles the same fraction */
    for (int d = 0; d < lr.world_size; d++) {
        const ptdp_clock *k = &lr.devices[d].clock;
        double idle = 1.0 - k->compute_s / k->now;
        ck_assert_msg(fabs(idle - formula) < 1e-9, "%s dp=%d pp=%d m=%d device %d: idle %.12f, formula %.12f",
                      c.schedule->name, dp, pp, m, d, idle, formula);
    }
    ptdp_launch_result_free(&lr);
    ptdp_train_result_free(&r);
}
END_TEST

/* The measurement is a measurement: with real costs (edge layers, links
 * with latency) the bubble is larger than the textbook's. */
LOOP_TEST(bubble_tests, test_bubble_real_profile_exceeds_formula, 2)
{
    ptdp_train_config c = small_config(1, 4, 8, SCHEDULES[_i]);
    ptdp_launch_opts o = { .profile = ptdp_profile_find("dgx-a100") };
    ptdp_train_result r;
    equiv_train(&c, &o, NULL, &r);
    ck_assert_msg(r.bubble_measured > r.bubble_formula + 0.01, "measured %.6f, formula %.6f", r.bubble_measured,
                  r.bubble_formula);
    ck_assert(r.bubble_measured < 1.0);
    ptdp_train_result_free(&r);
}
END_TEST

/* ------------------------------------------- data parallelism composes */

static const harness_tcase dp_tests = { .name = "dp", .timeout_s = 60 };

/* Each stage's DDP buckets and parameter count, from the library itself. */
typedef struct {
    const ptdp_train_config *cfg;
    int nbuckets[PTDP_MAX_DEVICES];
    size_t numel[PTDP_MAX_DEVICES];
} stage_info;

static int stage_info_device(ptdp_device *dev, void *arg)
{
    stage_info *si = arg;
    const ptdp_train_config *c = si->cfg;
    ptdp_mesh mesh;
    ptdp_model m;
    ptdp_ddp ddp;
    int rc = ptdp_mesh_init(dev, 1, 1, c->pp, &mesh);
    if (rc == 0)
        rc = ptdp_model_init(dev, &m, &c->model, &mesh, c->stage_layers, c->seed, 0.0);
    if (rc != 0)
        return rc;
    DEVICE_TRY(ptdp_ddp_init(&ddp, &m, c->bucket_mb));
    si->nbuckets[mesh.pp_rank] = ddp.nbuckets;
    si->numel[mesh.pp_rank] = m.numel;
    ptdp_ddp_free(&ddp);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return 0;
}

static void stage_info_of(const ptdp_train_config *c, stage_info *si)
{
    memset(si, 0, sizeof *si);
    si->cfg = c;
    harness_launch_ok(c->pp, stage_info_device, si, NULL, NULL);
}

/* dp 2 x pp 2: dp-group calls per step = buckets of the stage, for any M. */
TEST(dp_tests, test_dp_all_reduce_once_per_step)
{
    static const int ms[] = { 1, 4, 8 };
    ptdp_train_config c = small_config(2, 2, 4, "1f1b");
    c.steps = 3;
    stage_info si;
    stage_info_of(&c, &si);
    ck_assert_int_gt(si.nbuckets[0], 1);    /* several buckets: each one is a call */
    unsigned long long calls_at_m1[PTDP_MAX_DEVICES] = { 0 };
    for (int k = 0; k < 3; k++) {
        c.micro_batches = ms[k];
        c.schedule = ptdp_schedule_find(SCHEDULES[k % 2]);
        ptdp_launch_result lr;
        ptdp_launch_opts o = { .result = &lr };
        ptdp_train_result r;
        equiv_train(&c, &o, NULL, &r);
        for (int d = 0; d < lr.world_size; d++) {
            int dp_rank, tp_rank, stage;
            ptdp_mesh_coords(c.dp, c.tp, c.pp, d, &dp_rank, &tp_rank, &stage);
            const ptdp_comm_stats *s = &lr.devices[d].comm;
            int g = harness_group_index(s, "dp");
            ck_assert_msg(g >= 0, "device %d has no 'dp' group statistics", d);
            ck_assert_msg(s->group[g].calls == (unsigned long long)c.steps * si.nbuckets[stage],
                          "m=%d device %d (stage %d): %llu dp calls in %d steps, expected %d per step (buckets)",
                          c.micro_batches, d, stage, s->group[g].calls, c.steps, si.nbuckets[stage]);
            /* each step moves the stage's whole gradient once: 2(N-1)/N * S = S for N = 2 */
            ck_assert_msg(fabs(s->group[g].sent - (double)c.steps * si.numel[stage] * sizeof(ptdp_real)) < 0.5,
                          "m=%d device %d: %.0f bytes sent in the dp group", c.micro_batches, d, s->group[g].sent);
            if (k == 0)
                calls_at_m1[d] = s->group[g].calls;
            else
                ck_assert_uint_eq(s->group[g].calls, calls_at_m1[d]);
            /* while the pipeline's messages do scale with M: one each way per micro-batch */
            int p = harness_group_index(s, "pp");
            ck_assert_int_ge(p, 0);
            ck_assert_uint_eq(s->calls[PTDP_COLL_SEND], (unsigned long long)c.steps * c.micro_batches);
            ck_assert_uint_eq(s->calls[PTDP_COLL_RECV], (unsigned long long)c.steps * c.micro_batches);
        }
        ptdp_launch_result_free(&lr);
        ptdp_train_result_free(&r);
    }
}
END_TEST

/* ------------------------------------------------------------- trace */

static const harness_tcase trace_tests = { .name = "trace", .timeout_s = 60 };

typedef harness_trace_event trace_event;   /* harness.h */

/* What one device's track held, per step (counts) and over the run. */
typedef struct {
    int fwd, bwd, send, recv, dp_reduce, in_fwd, steps;
    double idle, end;   /* microseconds */
} trace_counts;

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/*
 * dp 2 x pp 2 x M 4, ideal profile.  Per device and step, in the order
 * the trace records them (the virtual-time process, pid 0):
 *   forwards   "block l fwd" for each local block and micro-batch
 *   backwards  "block l bwd", likewise
 *   sends      "send→<peer> pp" — M of them, to the next stage (activations)
 *              or the previous one (gradients)
 *   receives   "recv←<peer> pp" — M of them
 *   the dp all-reduce, once per bucket, only after every backward of the step
 *   then "optimizer"
 * Idle: receives that wait and waits before collectives; under the ideal
 * profile a transfer is free, so their time is all idle, and it must add
 * up to the stage's bubble (p - 1) / (m + p - 1).
 */
LOOP_TEST(trace_tests, test_trace_shows_stages_and_idle, 2)
{
    char path[] = "/tmp/ptdp-pp-trace-XXXXXX";
    harness_temp_file(path);
    const int M = 4;
    ptdp_train_config c = small_config(2, 2, M, SCHEDULES[_i]);
    c.model.hidden = 64;   /* events of a microsecond or more: the file's */
    c.model.ffn = 256;     /* 1 ns resolution is then fine for the sums  */
    c.batch = 64;
    c.steps = 2;
    stage_info si;
    stage_info_of(&c, &si);
    ptdp_launch_result lr;
    ptdp_launch_opts o = { .profile = ptdp_profile_find("ideal"), .trace_path = path, .result = &lr };
    ptdp_train_result r;
    equiv_train(&c, &o, NULL, &r);

    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    int world = c.dp * c.pp;
    trace_counts dev[8];
    memset(dev, 0, sizeof dev);
    char line[1024];
    while (fgets(line, sizeof line, f) != NULL) {
        trace_event e;
        if (!harness_parse_trace_event(line, &e) || e.pid != 0)
            continue;
        ck_assert(e.tid >= 0 && e.tid < world);
        int dp_rank, tp_rank, stage;
        ptdp_mesh_coords(c.dp, c.tp, c.pp, e.tid, &dp_rank, &tp_rank, &stage);
        int begin, nb;
        ptdp_stage_range(c.model.layers, c.pp, NULL, stage, &begin, &nb);
        trace_counts *d = &dev[e.tid];
        d->end = fmax(d->end, e.ts + e.dur);
        if (strcmp(e.cat, "compute") == 0 && ends_with(e.name, " fwd") && strncmp(e.name, "block ", 6) == 0) {
            int layer = atoi(e.name + 6);
            ck_assert_msg(layer >= begin && layer < begin + nb, "stage %d ran block %d", stage, layer);
            d->fwd++;
        } else if (strcmp(e.cat, "compute") == 0 && ends_with(e.name, " bwd") && strncmp(e.name, "block ", 6) == 0) {
            d->bwd++;
        } else if (strcmp(e.name, "in fwd") == 0) {
            ck_assert_int_eq(stage, 0);
            d->in_fwd++;
        } else if (strcmp(e.cat, "send") == 0) {
            char want[32];
            snprintf(want, sizeof want, "send\xe2\x86\x92%d pp", stage == 0 ? 1 : 0);
            ck_assert_str_eq(e.name, want);
            d->send++;
        } else if (strcmp(e.cat, "recv") == 0) {
            char want[32];
            snprintf(want, sizeof want, "recv\xe2\x86\x90%d pp", stage == 0 ? 1 : 0);
            ck_assert_str_eq(e.name, want);
            d->recv++;
            d->idle += e.dur;
        } else if (strcmp(e.cat, "idle") == 0) {
            d->idle += e.dur;
        } else if (strcmp(e.name, "all_reduce dp") == 0) {
            /* after the last backward of the step, never in between */
            ck_assert_msg(d->bwd == M * nb, "device %d: a dp all-reduce after %d of %d backwards", e.tid, d->bwd,
                          M * nb);
            d->dp_reduce++;
        } else if (strcmp(e.name, "optimizer") == 0) {
            /* one step of this stage, complete; a block's forward is two
             * events, before and after its all-reduce (g, mlp.c) */
            ck_assert_int_eq(d->fwd, 2 * M * nb);
            ck_assert_int_eq(d->bwd, M * nb);
            ck_assert_int_eq(d->send, M);
            ck_assert_int_eq(d->recv, M);
            ck_assert_int_eq(d->in_fwd, stage == 0 ? M : 0);
            ck_assert_int_eq(d->dp_reduce, si.nbuckets[stage]);
            d->fwd = d->bwd = d->send = d->recv = d->dp_reduce = d->in_fwd = 0;
            d->steps++;
        }
    }
    fclose(f);
    unlink(path);
    double formula = (double)(c.pp - 1) / (double)(M + c.pp - 1);
    for (int d = 0; d < world; d++) {
        ck_assert_int_eq(dev[d].steps, c.steps);
        ck_assert_double_gt(dev[d].idle, 0);
        /* the trace's idle is the clock's idle, and the bubble */
        ck_assert_msg(fabs(dev[d].idle * 1e-6 - lr.devices[d].clock.idle_s) < 1e-3 * lr.devices[d].clock.idle_s,
                      "device %d: idle %.6g us in the trace, %.6g us in the clock", d, dev[d].idle,
                      lr.devices[d].clock.idle_s * 1e6);
        ck_assert_msg(fabs(dev[d].idle / dev[d].end - formula) < 2e-3, "device %d: idle %.6f of the run, bubble %.6f",
                      d, dev[d].idle / dev[d].end, formula);
    }
    ptdp_launch_result_free(&lr);
    ptdp_train_result_free(&r);
}
END_TEST

/* ------------------------------------------------- the executor, by hand */

static const harness_tcase executor_tests = { .name = "executor", .timeout_s = 60 };

HARNESS_MODEL_CONFIG(step_model_of, PTDP_MLP_CONFIG( .d_in = 6, .hidden = 8, .ffn = 16, .layers = 4, .classes = 5 ))
#define STEP_MODEL (*step_model_of())

/* One step of s on pp devices (pp_step.h), told micro_batches. */
static int run_schedule(const ptdp_schedule *s, int micro_batches, double watchdog_s, pp_step_arg *a,
                        ptdp_launch_result *lr)
{
    memset(a, 0, sizeof *a);
    a->schedule = s;
    a->model = STEP_MODEL;
    a->batch = 4 * s->micro_batches;
    a->micro_batches = micro_batches;
    return harness_launch(s->pp, pp_step_device, a, &(ptdp_launch_opts){ .watchdog_s = watchdog_s }, lr);
}

/* The real schedules through the executor: each stage holds exactly the
 * micro-batches the schedule promises, runs the optimizer once, and every
 * schedule computes the same loss. */
LOOP_TEST(executor_tests, test_executor_follows_the_schedule, 5)
{
    static const int cases[][2] = { { 2, 1 }, { 2, 5 }, { 3, 4 }, { 4, 8 }, { 4, 2 } };
    int pp = cases[_i][0], m = cases[_i][1];
    double loss[2];
    for (int k = 0; k < 2; k++) {
        ptdp_schedule *s;
        ck_assert_int_eq(ptdp_schedule_create(SCHEDULES[k], pp, m, &s), 0);
        pp_step_arg a;
        ptdp_launch_result lr;
        int rc = run_schedule(s, m, 10, &a, &lr);
        ck_assert_msg(rc == 0, "%s pp=%d m=%d: %s", SCHEDULES[k], pp, m, lr.message);
        for (int st = 0; st < pp; st++) {
            ck_assert_int_eq(a.peak_in_flight[st], ptdp_schedule_peak_in_flight(s, st));
            ck_assert_int_eq(a.peak_in_flight[st], textbook_in_flight(SCHEDULES[k], pp, m, st));
            ck_assert_int_eq(a.optimizer_calls[st], 1);
            /* everything a step allocates is given back */
            ck_assert_uint_eq(lr.devices[st].mem.current[PTDP_MEM_ACTS], 0);
        }
        loss[k] = a.loss_sum;
        ptdp_launch_result_free(&lr);
        ptdp_schedule_destroy(s);
    }
    ck_assert(loss[0] > 0);
    ck_assert_msg(memcmp(&loss[0], &loss[1], sizeof(double)) == 0, "gpipe loss %.17g, 1f1b %.17g", loss[0], loss[1]);
}
END_TEST

/* Every send before its receive: under rendezvous send/recv two neighbours
 * both send and wait for each other.  The validator predicts it; the
 * executor then really hangs, and the watchdog (1 s here) ends the run with
 * PTDP_ETIMEDOUT and a report naming each stage waiting in its send. */
LOOP_TEST(executor_tests, test_naive_1f1b_deadlocks_and_watchdog_names_stages, 2)
{
    static const int cases[][2] = { { 2, 2 }, { 4, 8 } };
    int pp = cases[_i][0], m = cases[_i][1];
    ptdp_schedule *s;
    ck_assert_int_eq(ptdp_schedule_generate(ptdp_schedule_1f1b, PTDP_PLACE_SEND_FIRST, "1f1b-naive", pp, m, &s), 0);
    ptdp_schedule_verdict v;
    ck_assert_int_eq(ptdp_schedule_validate(s, &v), PTDP_EINVAL);
    ck_assert_int_eq(v.deadlock, 1);

    pp_step_arg a;
    ptdp_launch_result lr;
    double t0 = ptdp_wall_now();
    int rc = run_schedule(s, m, 1.0, &a, &lr);
    double took = ptdp_wall_now() - t0;
    ck_assert_msg(rc == PTDP_ETIMEDOUT, "rc %d (%s): %s", rc, ptdp_strerror(rc), lr.message);
    ck_assert_int_eq(lr.status, PTDP_ETIMEDOUT);
    ck_assert_msg(took < 5.0, "the watchdog took %.1f s", took);
    ASSERT_HAS(lr.message, "watchdog");
    /* Every stage is where the validator said it would block: in the send
     * of its verdict line, to that peer, with that micro-batch's tag
     * (pp.c: 2 mb for activations, 2 mb + 1 for gradients). */
    for (int st = 0; st < pp; st++) {
        char key[64], want[128];
        snprintf(key, sizeof key, "stage %d blocked at action ", st);
        const char *line = strstr(v.message, key);
        ck_assert_msg(line != NULL, "verdict without stage %d: %s", st, v.message);
        const ptdp_action *act = &s->stage[st].actions[atoi(line + strlen(key))];
        ck_assert(act->kind == PTDP_ACT_SEND_FORWARD || act->kind == PTDP_ACT_SEND_BACKWARD);
        snprintf(want, sizeof want, "rank %d: waiting in send to rank %d tag %d in group 'pp' at pp.c:", st,
                 act->peer, 2 * act->mb + (act->kind == PTDP_ACT_SEND_BACKWARD));
        ASSERT_HAS(lr.message, want);
    }
    /* no stage got to its optimizer step */
    for (int st = 0; st < pp; st++)
        ck_assert_int_eq(a.optimizer_calls[st], 0);
    ptdp_launch_result_free(&lr);

    /* the same executor with the even/odd order: done, no watchdog */
    ptdp_schedule_destroy(s);
    ck_assert_int_eq(ptdp_schedule_create("1f1b", pp, m, &s), 0);
    ck_assert_int_eq(run_schedule(s, m, 1.0, &a, &lr), 0);
    ptdp_launch_result_free(&lr);
    ptdp_schedule_destroy(s);
}
END_TEST

/* A schedule made for another m (or another pp) is an error, not a write
 * past the executor's micro-batch table. */
TEST(executor_tests, test_executor_rejects_a_mismatched_schedule)
{
    ptdp_schedule *s;
    ck_assert_int_eq(ptdp_schedule_create("1f1b", 2, 4, &s), 0);
    pp_step_arg a;
    ptdp_launch_result lr;
    int rc = run_schedule(s, 2, 5, &a, &lr);
    ck_assert_int_eq(rc, PTDP_EINVAL);
    ASSERT_HAS(lr.message, "micro-batches");
    ptdp_launch_result_free(&lr);
    ptdp_schedule_destroy(s);
}
END_TEST

/* A hand-written list that forwards on stage 1 before receiving: the
 * executor names the action instead of computing on nothing, and the
 * stage waiting for it is released (aborted), not left to the watchdog. */
TEST(executor_tests, test_executor_names_an_out_of_order_action)
{
    ptdp_schedule *s;
    ck_assert_int_eq(ptdp_schedule_alloc("broken", 2, 1, &s), 0);
    ptdp_schedule_push(s, 0, PTDP_ACT_FORWARD, 0);
    ptdp_schedule_push(s, 0, PTDP_ACT_SEND_FORWARD, 0);
    ptdp_schedule_push(s, 0, PTDP_ACT_RECV_BACKWARD, 0);
    ptdp_schedule_push(s, 0, PTDP_ACT_BACKWARD, 0);
    ptdp_schedule_push(s, 0, PTDP_ACT_OPTIMIZER_STEP, -1);
    ptdp_schedule_push(s, 1, PTDP_ACT_FORWARD, 0);        /* no RECV_FORWARD first */
    ptdp_schedule_push(s, 1, PTDP_ACT_RECV_FORWARD, 0);
    ptdp_schedule_push(s, 1, PTDP_ACT_BACKWARD, 0);
    ptdp_schedule_push(s, 1, PTDP_ACT_SEND_BACKWARD, 0);
    ptdp_schedule_push(s, 1, PTDP_ACT_OPTIMIZER_STEP, -1);
    ck_assert_int_eq(ptdp_schedule_validate(s, NULL), PTDP_EINVAL);
    pp_step_arg a;
    ptdp_launch_result lr;
    double t0 = ptdp_wall_now();
    ck_assert_int_eq(run_schedule(s, 1, 30, &a, &lr), PTDP_EINVAL);
    ck_assert(ptdp_wall_now() - t0 < 5.0);
    ck_assert_int_eq(lr.failed_rank, 1);
    ASSERT_HAS(lr.message, "stage 1, action 0 (FORWARD of micro-batch 0): its input was not received");
    ptdp_launch_result_free(&lr);
    ptdp_schedule_destroy(s);
}
END_TEST

int main(void)
{
    return harness_main("pp");
}
