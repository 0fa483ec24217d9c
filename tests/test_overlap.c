/*
 * test_overlap.c — the communication stream, and --overlap's DP buckets.
 *
 * A non-blocking collective (comm.h: …_start, then ptdp_wait) runs on the
 * device's communication stream (clock.h):
 *
 *   start = max over members of max(caller's clock, its stream's clock)
 *   end   = start + cost            the caller's clock does not move
 *   wait:   now = max(now, end)     hidden = the part never waited for
 *
 * and moves the same bits as the blocking call.  --overlap starts each DP
 * bucket's all-reduce inside the last micro-batch's backward (dp.h): the
 * same final state bit for bit, a shorter step under a GPU profile, shorter
 * by about the communication the backward hid.  Under ZeRO-1 the same
 * buckets are reduce-scattered instead (each rank owns chunk k of every
 * bucket, zero.h), started the same way: the same bits, the same bytes, a
 * shorter step.  Under ZeRO-2 it starts each micro-batch's reduce-scatter
 * and waits before the next backward (zero.h): the same bits again, and a
 * shorter step.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "equivalence/equiv.h"
#include "harness.h"
#include "ptdp/clock.h"
#include "ptdp/comm.h"
#include "ptdp/device.h"
#include "ptdp/launch.h"
#include "ptdp/state.h"

static const harness_tcase stream_tests = { .name = "stream", .timeout_s = 60 };
static const harness_tcase overlap_tests = { .name = "overlap", .timeout_s = 300 };

enum { N = 1000 };

/* Rank r computes r x 10 us, then starts two all-reduces and computes
 * 200 us more; rank 0 also checks a third, waited for at once. */
static int stream_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    const ptdp_profile *p = dev->profile;
    const int n = dev->world_size, r = dev->rank;
    ptdp_real a[N], b[N], want[N];
    for (int i = 0; i < N; i++)
        a[i] = b[i] = want[i] = (ptdp_real)(0.1 * (i + 1) * (r + 1));
    DEVICE_TRY(ptdp_all_reduce(dev->world, want, want, N, PTDP_REAL, PTDP_SUM));   /* the blocking bits */
    double t0 = dev->clock.now, busy = dev->clock.comm_s;
    ptdp_compute_seconds(dev, "before", 10e-6 * r, ptdp_wall_now());

    ptdp_request q1 = { 0 }, q2 = { 0 };
    double mine = dev->clock.now;
    DEVICE_TRY(ptdp_all_reduce_start(dev->world, a, a, N, PTDP_REAL, PTDP_SUM, &q1));
    DEVICE_CHECK(dev, dev->clock.now == mine, "start moved the compute stream: %g -> %g", mine, dev->clock.now);
    double cost = ptdp_cost_collective(p, PTDP_COLL_ALL_REDUCE, N * sizeof(ptdp_real), n);
    double last = t0 + 10e-6 * (n - 1);   /* the latest member's start */
    DEVICE_CHECK(dev, fabs(q1.start - last) < 1e-12, "start %g, the latest member's clock %g", q1.start, last);
    DEVICE_CHECK(dev, fabs(q1.end - (last + cost)) < 1e-12, "end %g, want %g", q1.end, last + cost);
    /* the stream serialises: the second begins where the first ends */
    DEVICE_TRY(ptdp_all_reduce_start(dev->world, b, b, N, PTDP_REAL, PTDP_SUM, &q2));
    DEVICE_CHECK(dev, fabs(q2.start - q1.end) < 1e-12, "second start %g, first end %g", q2.start, q1.end);
    DEVICE_CHECK(dev, dev->clock.comm_free == q2.end, "the stream is free at %g, not %g", dev->clock.comm_free,
                 q2.end);
    /* not waited for: the results are hidden (NaN), a too-early read fails */
    for (int i = 0; i < N; i++)
        DEVICE_CHECK(dev, isnan(a[i]) && isnan(b[i]), "element %d readable before the wait", i);

    /* compute past both ends: the waits cost nothing, all of it hidden */
    ptdp_compute_seconds(dev, "after", 200e-6, ptdp_wall_now());
    double now = dev->clock.now;
    DEVICE_TRY(ptdp_wait(&q1));
    DEVICE_TRY(ptdp_wait(&q2));
    for (int i = 0; i < N; i++)
        DEVICE_CHECK(dev, a[i] == want[i] && b[i] == want[i], "element %d differs from the blocking call's", i);
    DEVICE_CHECK(dev, dev->clock.now == now, "a wait past the end moved the clock");
    DEVICE_CHECK(dev, fabs(dev->clock.hidden_s - 2 * cost) < 1e-12, "hidden %g, want %g", dev->clock.hidden_s,
                 2 * cost);
    DEVICE_CHECK(dev, fabs(dev->clock.stream_s - 2 * cost) < 1e-12, "stream %g", dev->clock.stream_s);
    DEVICE_CHECK(dev, !q1.active && !q2.active, "waited requests stay active");

    /* waited for at once: all of it exposed, the compute stream at its end */
    ptdp_request q3 = { 0 };
    DEVICE_TRY(ptdp_reduce_scatter_start(dev->world, PTDP_IN_PLACE, a, N, PTDP_REAL, PTDP_SUM, &q3));
    now = dev->clock.now;
    DEVICE_TRY(ptdp_wait(&q3));
    DEVICE_CHECK(dev, fabs(dev->clock.now - q3.end) < 1e-12 && q3.end > now, "wait ended at %g, not %g",
                 dev->clock.now, q3.end);
    double rs = ptdp_cost_collective(p, PTDP_COLL_REDUCE_SCATTER, N * sizeof(ptdp_real), n);
    DEVICE_CHECK(dev, fabs(dev->clock.comm_s - busy - rs) < 1e-12, "exposed %g, want the whole %g",
                 dev->clock.comm_s - busy, rs);
    DEVICE_CHECK(dev, fabs(dev->clock.hidden_s - 2 * cost) < 1e-12, "the third hid something");
    return 0;
}

TEST(stream_tests, test_stream_start_wait_and_bits)
{
    ptdp_launch_opts o = { .profile = ptdp_profile_find("dgx-a100") };
    harness_launch_ok(3, stream_device, NULL, &o, NULL);
}
END_TEST

/* Rank 0 fails with two collectives started and never waited for, one on
 * a group of its own: the results held aside until the waits are freed
 * with their communicators (LeakSanitizer, in the sanitizer build, would
 * report them otherwise). */
static int abandon_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_real a[N], b[N];
    for (int i = 0; i < N; i++)
        a[i] = b[i] = (ptdp_real)i;
    ptdp_comm *all = NULL;
    DEVICE_TRY(ptdp_comm_split(dev->world, 0, dev->rank, "all", &all));
    ptdp_request q1 = { 0 }, q2 = { 0 };
    int rc = ptdp_all_reduce_start(dev->world, a, a, N, PTDP_REAL, PTDP_SUM, &q1);
    if (rc == 0)
        rc = ptdp_all_gather_start(all, PTDP_IN_PLACE, b, N, PTDP_REAL, &q2);
    if (rc == 0 && dev->rank == 0)
        rc = ptdp_fail(dev, PTDP_EINVAL, "failing with two requests in flight");
    ptdp_comm_free(all);
    return rc;
}

TEST(stream_tests, test_stream_abandoned_requests_are_freed)
{
    ptdp_launch_result res;
    memset(&res, 0, sizeof res);
    ck_assert_int_ne(harness_launch(2, abandon_device, NULL, NULL, &res), 0);
    ck_assert_ptr_nonnull(strstr(res.message, "two requests in flight"));
    ptdp_launch_result_free(&res);
}
END_TEST

/* ------------------------------------------------------------ --overlap */

static ptdp_train_config overlap_config(int dp, int pp, bool overlap)
{
    ptdp_train_config c = equiv_overlap_config(dp, pp, 2, overlap);
    c.bucket_mb = 0.05;
    return c;
}

/* One trace event (harness.h). */
typedef harness_trace_event event;

/* The run's virtual time: its steps' makespans added. */
static double max_step_virtual(const ptdp_train_result *r)
{
    double s = 0;
    for (int i = 0; i < r->completed; i++)
        s += r->log[i].virtual_s;
    return s;
}

/* One configuration trained twice under dgx-a100, without and with
 * --overlap (the second config): [0] and [1] of each. */
typedef struct {
    ptdp_launch_result l[2];
    ptdp_state s[2];
    ptdp_train_result r[2];
} overlap_pair;

static void train_pair(const ptdp_train_config *plain, const ptdp_train_config *ov, overlap_pair *p)
{
    const ptdp_train_config *c[2] = { plain, ov };
    for (int k = 0; k < 2; k++) {
        ptdp_launch_opts o = { .profile = ptdp_profile_find("dgx-a100"), .result = &p->l[k] };
        equiv_train(c[k], &o, &p->s[k], &p->r[k]);
    }
}

static void pair_free(overlap_pair *p)
{
    for (int k = 0; k < 2; k++) {
        ptdp_state_free(&p->s[k]);
        ptdp_train_result_free(&p->r[k]);
        ptdp_launch_result_free(&p->l[k]);
    }
}

/* With --overlap every device hid some of its stream's time (and no more
 * than it), nothing ran on the stream without, and the run is shorter. */
static void assert_hidden_and_shorter(const overlap_pair *p, const char *what)
{
    const ptdp_launch_result *l0 = &p->l[0], *l1 = &p->l[1];
    for (int d = 0; d < l1->world_size; d++) {
        ck_assert_msg(l0->devices[d].clock.stream_s == 0, "without --overlap nothing runs on the stream");
        ck_assert_msg(l1->devices[d].clock.hidden_s > 0 && l1->devices[d].clock.hidden_s <= l1->devices[d].clock.stream_s,
                      "%s: device %d hid %g of %g", what, d, l1->devices[d].clock.hidden_s,
                      l1->devices[d].clock.stream_s);
    }
    double t0 = max_step_virtual(&p->r[0]), t1 = max_step_virtual(&p->r[1]);
    ck_assert_msg(t1 < t0, "%s: %g s, without %g s: no shorter", what, t1, t0);
}

/* dp 2 (_i = 0) and dp 2 x pp 2 (_i = 1), with and without --overlap,
 * under dgx-a100: the same bits, and a shorter run. */
LOOP_TEST(overlap_tests, test_overlap_same_bits_shorter_step, 2)
{
    const int pp = _i + 1;
    ptdp_train_config plain = overlap_config(2, pp, false), ov = overlap_config(2, pp, true);
    overlap_pair p;
    train_pair(&plain, &ov, &p);
    equiv_losses_agree(p.r[1].log, p.r[0].log, plain.steps, 0, "--overlap against without");
    equiv_states_agree(&p.s[1], &p.s[0], 0, "--overlap against without");
    assert_hidden_and_shorter(&p, "--overlap");

    /* Stage 0 ends its last backward last (1F1B), so its exposed
     * communication sets the step: the run is shorter by what stage 0 hid.
     * (The last stage hides more, but only into time it would have waited
     * for stage 0 anyway.) */
    double t0 = max_step_virtual(&p.r[0]), t1 = max_step_virtual(&p.r[1]), stream = 0;
    double hidden = p.l[1].devices[0].clock.hidden_s;
    for (int d = 0; d < p.l[1].world_size; d++)
        stream = fmax(stream, p.l[1].devices[d].clock.stream_s);
    ck_assert_msg(fabs((t0 - t1) - hidden) < 1e-3 * t0, "saved %g s, device 0 hid %g s", t0 - t1, hidden);
    ck_assert_msg(hidden <= stream, "hidden %g more than the stream's %g", hidden, stream);
    pair_free(&p);
}
END_TEST

/* The DP group's bytes sent per device and step, mean over the devices. */
static double dp_bytes_per_step(const ptdp_launch_result *l, int steps)
{
    double sent = 0;
    for (int r = 0; r < l->world_size; r++) {
        int g = harness_group_index(&l->devices[r].comm, "dp");
        ck_assert_int_ge(g, 0);
        sent += l->devices[r].comm.group[g].sent;
    }
    return sent / l->world_size / steps;
}

/* ZeRO-1 with --overlap, with and without, under dgx-a100: every bucket's
 * reduce-scatter started in the last backward.  The same bits (losses,
 * norms, parameters, optimizer state), the same bytes — ZeRO-1's
 * 2(N-1)/N S and the norm's one double — and a shorter run.  Cases: dp 2;
 * dp 2 x pp 2; dp 2 x tp 2 with 4 micro-batches and clipping; dp 4; the
 * GPT on dp 2 x pp 2 (its embedding tied across the stages, each stage's
 * copy in pieces); and, in the float build, bf16 stores (mixed.h). */
#ifdef PTDP_DOUBLE
enum { ZERO1_CASES = 5 };
#else
enum { ZERO1_CASES = 6 };
#endif
LOOP_TEST(overlap_tests, test_overlap_zero1_same_bits_shorter, ZERO1_CASES)
{
    static const int shapes[][4] = {   /* dp, tp, pp, M */
        { 2, 1, 1, 2 }, { 2, 1, 2, 2 }, { 2, 2, 1, 4 }, { 4, 1, 1, 2 }, { 2, 1, 2, 2 }, { 2, 1, 1, 2 },
    };
    const int *k = shapes[_i];
    ptdp_train_config plain = overlap_config(k[0], k[2], false), ov;
    plain.tp = k[1];
    plain.micro_batches = k[3];
    plain.zero = 1;
    plain.clip_grad = _i == 2 ? 0.05 : 0;   /* a norm taken from the pieces, and used */
    if (_i == 4) {   /* the GPT of the equivalence suites, in buckets of a few parameters */
        plain.model = equiv_small_gpt(1);
        plain.batch = 64;
        plain.bucket_mb = 0.004;
    }
    plain.bf16 = _i == 5;
    ov = plain;
    ov.overlap = true;
    overlap_pair p;
    train_pair(&plain, &ov, &p);
    const ptdp_train_result *r0 = &p.r[0], *r1 = &p.r[1];
    char what[96];
    snprintf(what, sizeof what, "zero 1 --overlap against without (%s dp %d tp %d pp %d m %d%s)",
             _i == 4 ? "gpt" : "mlp", k[0], k[1], k[2], k[3], plain.bf16 ? " bf16" : "");
    equiv_losses_agree(r1->log, r0->log, plain.steps, 0, what);
    for (int i = 0; i < plain.steps; i++)
        ck_assert_msg(r1->log[i].grad_norm == r0->log[i].grad_norm, "%s: step %d norm %.17g, without %.17g", what,
                      i + 1, r1->log[i].grad_norm, r0->log[i].grad_norm);
    equiv_states_same_bits(&p.s[1], &p.s[0], what);

    const double b0 = dp_bytes_per_step(&p.l[0], plain.steps), b1 = dp_bytes_per_step(&p.l[1], plain.steps);
    const double S = (double)r0->param_elements[0] * (plain.bf16 ? 2 : sizeof(ptdp_real));
    const double formula = 2.0 * (k[0] - 1) / k[0] * S, norm = 2.0 * (k[0] - 1) / k[0] * sizeof(double);
    ck_assert_msg(b1 == b0, "%s: %.1f bytes per step, without %.1f", what, b1, b0);
    ck_assert_msg(k[2] > 1 || fabs(b0 - norm - formula) < 1e-9 * formula,
                  "%s: %.1f DP bytes per step, want 2(N-1)/N S = %.1f + %.1f for the norm", what, b0, formula, norm);
    assert_hidden_and_shorter(&p, what);
    pair_free(&p);
}
END_TEST

/* ZeRO-2 with --overlap: each micro-batch's reduce-scatter waits until the
 * next backward begins, hidden under the forward in between.  The same
 * bits; a shorter run; the first micro-batches' reduce-scatters hidden. */
LOOP_TEST(overlap_tests, test_overlap_zero2_same_bits_shorter, 2)
{
    const int pp = _i + 1;
    ptdp_train_config plain = overlap_config(2, pp, false), ov = overlap_config(2, pp, true);
    plain.zero = ov.zero = 2;
    plain.micro_batches = ov.micro_batches = 4;
    overlap_pair p;
    train_pair(&plain, &ov, &p);
    equiv_losses_agree(p.r[1].log, p.r[0].log, plain.steps, 0, "zero 2 --overlap against without");
    equiv_states_agree(&p.s[1], &p.s[0], 0, "zero 2 --overlap against without");
    assert_hidden_and_shorter(&p, "zero 2 --overlap");
    pair_free(&p);
}
END_TEST

/* The order of events on device 0 (dp 2, one stage, 2 micro-batches, 2
 * steps): every bucket's all-reduce (_i = 1, ZeRO-1: reduce-scatter) lies
 * on the communication track (tid 1000), starts after the last backward
 * has begun writing (after its first block's backward ends: the gradients
 * it sums exist), and the first one starts before that backward ends. */
LOOP_TEST(overlap_tests, test_overlap_trace_order, 2)
{
    char path[] = "/tmp/ptdp-overlap-trace-XXXXXX";
    harness_temp_file(path);
    ptdp_train_config c = overlap_config(2, 1, true);
    c.zero = _i;
    const char *bucket = _i == 1 ? "reduce_scatter dp" : "all_reduce dp";
    ptdp_launch_opts o = { .profile = ptdp_profile_find("dgx-a100"), .trace_path = path };
    equiv_train(&c, &o, NULL, NULL);

    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char line[1024];
    int bwd = 0, buckets = 0, steps = 0, early = 0;
    double first_done = -1, bwd_end = 0, first_start = -1;
    const int blocks_per_step = c.micro_batches * c.model.layers;
    while (fgets(line, sizeof line, f) != NULL) {
        event e;
        if (!harness_parse_trace_event(line, &e) || e.pid != 0)
            continue;
        if (e.tid == 0 && strncmp(e.name, "block ", 6) == 0 && strstr(e.name, " bwd") != NULL) {
            if (++bwd == blocks_per_step - c.model.layers + 1)   /* the last backward's first block */
                first_done = e.ts + e.dur;
            bwd_end = e.ts + e.dur;
        } else if (e.tid == 1000 && strcmp(e.name, bucket) == 0) {
            ck_assert_msg(bwd > blocks_per_step - c.model.layers, "a %s before the last backward", bucket);
            ck_assert_msg(e.ts >= first_done - 1e-3, "bucket starts at %g us, before its gradients (%g us)", e.ts,
                          first_done);
            if (first_start < 0)
                first_start = e.ts;
            buckets++;
        } else if (e.tid == 0 && strcmp(e.name, bucket) == 0) {
            ck_abort_msg("a DP %s on the compute track under --overlap", bucket);
        } else if (e.tid == 0 && strcmp(e.name, "optimizer") == 0) {
            ck_assert_msg(buckets > 1, "step %d: %d buckets", steps + 1, buckets);
            ck_assert_msg(first_start < bwd_end, "the first bucket starts at %g us, after the backward (%g us)",
                          first_start, bwd_end);
            early++;
            bwd = buckets = 0;
            first_start = first_done = -1;
            steps++;
        }
    }
    fclose(f);
    remove(path);
    ck_assert_int_eq(steps, c.steps);
    ck_assert_int_eq(early, c.steps);
}
END_TEST

int main(void)
{
    return harness_main("overlap");
}
