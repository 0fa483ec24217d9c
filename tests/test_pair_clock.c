/*
 * test_pair_clock.c — an overlapped F&B pair on the two-stream clock
 * (pair.h).
 *
 * Inside ptdp_pair_begin … ptdp_pair_end a blocking collective marked
 * overlappable runs on the communication stream from the pair's start;
 * the compute stream waits for it at the end:
 *
 *   compute   |▇▇▇ F ▇▇▇▇▇▇ B ▇▇▇▇▇▇▇|░░|
 *   comm      |a2a(F) ····· a2a(B) ·····|      pair = max(F + B, 2 x)
 *
 * which is the pair rule of ptdp schedule's timer (schedule_sim.c): the
 * same F, B and all-to-all time x give the same pair time in both.  The
 * bits are the blocking call's; unmarked collectives and serial pairs
 * keep the blocking times; a member that begins its pair later holds the
 * stream back, and that wait is idle, not communication.
 */
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "ptdp/clock.h"
#include "ptdp/comm.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/launch.h"
#include "ptdp/pair.h"
#include "ptdp/schedule.h"

static const harness_tcase pair_tests = { .name = "pair", .timeout_s = 60 };

enum { DEVICES = 2, COUNT = 4096 };   /* doubles to each member per all-to-all */

/* F, B and the start delay of rank 1, in units of one all-to-all's time x. */
typedef struct {
    double f, b, late;
    bool serial;
    double pair[DEVICES];     /* out: each rank's pair time, seconds, */
    double idle[DEVICES];     /* of it idle (waiting for a member)    */
    double exposed[DEVICES];  /* and communication (comm_s)           */
    double x;                 /* out: one all-to-all's modelled time  */
} pair_case;

static const double CASES[][2] = {
    { 0.5, 0.5 },   /* all-to-all bound: 2x           */
    { 2.0, 3.0 },   /* compute bound: F + B = 5x      */
    { 0.2, 2.5 },   /* B alone covers both: 2.7x      */
    { 0.1, 1.2 },   /* just short: 2x                 */
};

static double a2a_time(const ptdp_profile *p)
{
    return ptdp_cost_collective(p, PTDP_COLL_ALL_TO_ALL, (size_t)COUNT * sizeof(double) * DEVICES, DEVICES);
}

/* One marked all-to-all; its bits checked against what rank r sent. */
static int marked_all_to_all(ptdp_device *dev, int tag)
{
    double send[DEVICES * COUNT], recv[DEVICES * COUNT];
    for (int j = 0; j < DEVICES * COUNT; j++)
        send[j] = tag * 1000.0 + dev->rank * 10.0 + j / COUNT;   /* block j / COUNT goes to that rank */
    bool was = ptdp_pair_mark(dev, true);
    int rc = ptdp_all_to_all(dev->world, send, recv, COUNT, PTDP_F64);
    ptdp_pair_mark(dev, was);
    if (rc != 0)
        return rc;
    for (int i = 0; i < DEVICES; i++)
        DEVICE_CHECK(dev, recv[i * COUNT] == tag * 1000.0 + i * 10.0 + dev->rank, "block from %d: %g", i,
                     recv[i * COUNT]);
    return 0;
}

/* F's all-to-all, F, B's all-to-all, B — as one pair (or serial). */
static int pair_device(ptdp_device *dev, void *arg)
{
    pair_case *pc = arg;
    const double x = a2a_time(dev->profile);
    DEVICE_TRY(ptdp_barrier(dev->world));
    ptdp_pair_set_serial(dev, pc->serial);
    if (dev->rank == 1)
        ptdp_compute_seconds(dev, "late", pc->late * x, ptdp_wall_now());
    const ptdp_clock k0 = dev->clock;
    ptdp_pair_begin(dev);
    DEVICE_TRY(marked_all_to_all(dev, 1));
    ptdp_compute_seconds(dev, "F", pc->f * x, ptdp_wall_now());
    DEVICE_TRY(marked_all_to_all(dev, 2));
    ptdp_compute_seconds(dev, "B", pc->b * x, ptdp_wall_now());
    ptdp_pair_end(dev);
    const ptdp_clock *k = &dev->clock;
    pc->pair[dev->rank] = k->now - k0.now;
    pc->idle[dev->rank] = k->idle_s - k0.idle_s;
    pc->exposed[dev->rank] = k->comm_s - k0.comm_s;
    pc->x = x;
    /* the compute stream's time still adds up, and the stream carried both */
    double spent = (k->compute_s - k0.compute_s) + (k->comm_s - k0.comm_s) + (k->idle_s - k0.idle_s);
    DEVICE_CHECK(dev, fabs(spent - (k->now - k0.now)) < 1e-15, "compute + comm + idle = %g, the pair %g", spent,
                 k->now - k0.now);
    DEVICE_CHECK(dev, fabs(k->pairable_s - k0.pairable_s - 2 * x) < 1e-15, "overlappable %g, want %g",
                 k->pairable_s - k0.pairable_s, 2 * x);
    if (pc->serial) {
        DEVICE_CHECK(dev, k->stream_s == k0.stream_s && k->pair_hidden_s == 0, "a serial pair used the stream");
        return 0;
    }
    double hidden = k->pair_hidden_s - k0.pair_hidden_s, exposed = k->comm_s - k0.comm_s;
    DEVICE_CHECK(dev, fabs(k->stream_s - k0.stream_s - 2 * x) < 1e-15, "stream %g", k->stream_s - k0.stream_s);
    DEVICE_CHECK(dev, fabs(hidden + exposed - 2 * x) < 1e-15, "hidden %g + exposed %g, want %g", hidden, exposed,
                 2 * x);
    DEVICE_CHECK(dev, k->hidden_s - k0.hidden_s == hidden, "hidden_s and pair_hidden_s disagree");
    return 0;
}

/* The pair time of ptdp schedule's timer: DualPipeV on 2 devices, its
 * first overlapped pair, with the same F, B and all-to-all time. */
static double simulated_pair(double f, double b, double x)
{
    ptdp_schedule *s = NULL;
    ptdp_schedule_timeline *t = NULL;
    ck_assert_int_eq(ptdp_schedule_create("dualpipev", 2, 4, &s), PTDP_OK);
    const ptdp_schedule_costs c = { .forward = f, .backward = b, .alltoall = x };
    ck_assert_int_eq(ptdp_schedule_simulate(s, &c, &t), PTDP_OK);
    double pair = -1;
    for (int i = 0; pair < 0 && i + 1 < s->stage[0].count; i++)
        if (s->stage[0].actions[i].pair)
            pair = t->time[0][i + 1].end - t->time[0][i].start;
    ptdp_schedule_timeline_destroy(t);
    ptdp_schedule_destroy(s);
    ck_assert_msg(pair >= 0, "dualpipev on 2 devices has no overlapped pair on device 0");
    return pair;
}

LOOP_TEST(pair_tests, test_pair_takes_max_of_compute_and_all_to_alls, 4)
{
    pair_case pc = { .f = CASES[_i][0], .b = CASES[_i][1] };
    ptdp_launch_opts o = { .profile = ptdp_profile_find("dgx-a100") };
    harness_launch_ok(DEVICES, pair_device, &pc, &o, NULL);
    const double x = pc.x, want = fmax((pc.f + pc.b) * x, 2 * x);
    const double sim = simulated_pair(pc.f * x, pc.b * x, x);
    for (int r = 0; r < DEVICES; r++) {
        ck_assert_msg(fabs(pc.pair[r] - want) < 1e-15, "F %gx B %gx: rank %d's pair %g s, max(F + B, 2x) = %g s",
                      pc.f, pc.b, r, pc.pair[r], want);
        ck_assert_msg(fabs(pc.pair[r] - sim) < 1e-15, "F %gx B %gx: rank %d's pair %g s, ptdp schedule's %g s",
                      pc.f, pc.b, r, pc.pair[r], sim);
    }
}
END_TEST

/* --no-pair-overlap: the all-to-alls on the compute stream, F + B + 2x. */
TEST(pair_tests, test_serial_pair_keeps_the_blocking_time)
{
    pair_case pc = { .f = 2.0, .b = 3.0, .serial = true };
    ptdp_launch_opts o = { .profile = ptdp_profile_find("dgx-a100") };
    harness_launch_ok(DEVICES, pair_device, &pc, &o, NULL);
    for (int r = 0; r < DEVICES; r++)
        ck_assert_msg(fabs(pc.pair[r] - 7.0 * pc.x) < 1e-15, "rank %d: %g s, want F + B + 2x = %g s", r,
                      pc.pair[r], 7.0 * pc.x);
}
END_TEST

/* Rank 1 begins its pair 3x later: both all-to-alls wait for it on rank
 * 0's stream, which F + B = 0.5x cannot cover — rank 0 idles 3x - 0.5x
 * and waits for all 2x of communication; rank 1 hides 0.5x of it. */
TEST(pair_tests, test_a_late_member_holds_the_stream_and_that_is_idle)
{
    pair_case pc = { .f = 0.2, .b = 0.3, .late = 3.0 };
    ptdp_launch_opts o = { .profile = ptdp_profile_find("dgx-a100") };
    harness_launch_ok(DEVICES, pair_device, &pc, &o, NULL);
    const double x = pc.x;
    const double pair[DEVICES] = { 5.0 * x, 2.0 * x }, idle[DEVICES] = { 2.5 * x, 0.0 },
                 exposed[DEVICES] = { 2.0 * x, 1.5 * x };
    for (int r = 0; r < DEVICES; r++)
        ck_assert_msg(fabs(pc.pair[r] - pair[r]) < 1e-15 && fabs(pc.idle[r] - idle[r]) < 1e-15 &&
                          fabs(pc.exposed[r] - exposed[r]) < 1e-15,
                      "rank %d: pair %g (want %g), idle %g (want %g), exposed %g (want %g)", r, pc.pair[r], pair[r],
                      pc.idle[r], idle[r], pc.exposed[r], exposed[r]);
}
END_TEST

/* Unmarked collectives inside a pair, and marked ones outside any, are
 * the blocking calls they always were. */
static int blocking_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    const double x = a2a_time(dev->profile);
    double v[COUNT];
    for (int i = 0; i < COUNT; i++)
        v[i] = dev->rank + 1.0;
    DEVICE_TRY(ptdp_barrier(dev->world));
    ptdp_clock k0 = dev->clock;
    ptdp_pair_begin(dev);
    DEVICE_TRY(ptdp_all_reduce(dev->world, v, v, COUNT, PTDP_F64, PTDP_SUM));
    double ar = ptdp_cost_collective(dev->profile, PTDP_COLL_ALL_REDUCE, COUNT * sizeof(double), DEVICES);
    DEVICE_CHECK(dev, fabs(dev->clock.now - k0.now - ar) < 1e-15, "an unmarked all-reduce in a pair took %g, not %g",
                 dev->clock.now - k0.now, ar);
    ptdp_pair_end(dev);
    DEVICE_CHECK(dev, v[0] == 3.0 && dev->clock.stream_s == k0.stream_s, "sum %g, stream %g", v[0],
                 dev->clock.stream_s);
    k0 = dev->clock;
    DEVICE_TRY(marked_all_to_all(dev, 3));
    DEVICE_CHECK(dev, fabs(dev->clock.now - k0.now - x) < 1e-15 && dev->clock.pair_hidden_s == 0,
                 "a marked all-to-all outside a pair took %g, not %g", dev->clock.now - k0.now, x);
    DEVICE_CHECK(dev, fabs(dev->clock.pairable_s - x) < 1e-15, "overlappable %g, want %g", dev->clock.pairable_s, x);
    return 0;
}

TEST(pair_tests, test_unmarked_or_unpaired_collectives_block)
{
    ptdp_launch_opts o = { .profile = ptdp_profile_find("dgx-a100") };
    harness_launch_ok(DEVICES, blocking_device, NULL, &o, NULL);
}
END_TEST

int main(void)
{
    return harness_main("pair_clock");
}
