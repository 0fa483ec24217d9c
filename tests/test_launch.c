/*
 * test_launch.c — devices and failure: launching 1..64 devices, many
 * devices on few cores, the launch result, failure propagation, out of
 * memory, mismatched collectives, the watchdog, argument checks.
 *
 * Every failure test sets a short watchdog, so a bug that hangs instead of
 * failing still ends the test in seconds.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "ptdp/ptdp.h"

static const harness_tcase launch_tests = { .name = "launch", .timeout_s = 60 };

/* The failure tests' watchdogs: 10 s, or half a second where the watchdog
 * itself is what is tested. */
static const ptdp_launch_opts short_watchdog = { .watchdog_s = 10 }, half_second = { .watchdog_s = 0.5 };

static void sleep_s(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------- launch */

typedef struct {
    atomic_int seen[64];
    atomic_int sizes_ok;
} who;

static int record_rank(ptdp_device *dev, void *arg)
{
    who *w = arg;
    atomic_fetch_add(&w->seen[dev->rank], 1);
    if (dev->world_size == ptdp_comm_size(dev->world) && dev->rank == ptdp_comm_rank(dev->world) &&
        dev->arena && dev->profile && dev->algo == PTDP_ALGO_SHM &&
        ptdp_comm_device(dev->world) == dev && strcmp(ptdp_comm_name(dev->world), "world") == 0)
        atomic_fetch_add(&w->sizes_ok, 1);
    return ptdp_barrier(dev->world);
}

TEST(launch_tests, test_launch_sizes)
{
    static const int ns[] = { 1, 2, 7, 64 };
    for (int i = 0; i < 4; i++) {
        who w;
        memset(&w, 0, sizeof w);
        ptdp_launch_result res;
        harness_launch_ok(ns[i], record_rank, &w, NULL, &res);
        ck_assert_int_eq(res.status, 0);
        ck_assert_int_eq(res.failed_rank, -1);
        ck_assert_int_eq(res.world_size, ns[i]);
        ck_assert_ptr_nonnull(res.devices);
        for (int r = 0; r < 64; r++)
            ck_assert_int_eq(atomic_load(&w.seen[r]), r < ns[i]);
        ck_assert_int_eq(atomic_load(&w.sizes_ok), ns[i]);
        ptdp_launch_result_free(&res);
    }
    /* opts may be NULL */
    ck_assert_int_eq(ptdp_launch(3, record_rank, &(who){ 0 }, NULL), 0);
}
END_TEST

TEST(launch_tests, test_invalid_world_size)
{
    static const int bad[] = { 0, -1, 65, 1000 };
    for (int i = 0; i < 4; i++) {
        ptdp_launch_result res;
        ck_assert_int_eq(harness_launch(bad[i], record_rank, NULL, NULL, &res), PTDP_EINVAL);
        ck_assert_int_eq(res.status, PTDP_EINVAL);
        ASSERT_HAS(res.message, "world size");
        ck_assert_ptr_null(res.devices);
        ptdp_launch_result_free(&res);
    }
    ptdp_launch_result res;
    ck_assert_int_eq(harness_launch(2, NULL, NULL, NULL, &res), PTDP_EINVAL);
    ASSERT_HAS(res.message, "no device function");
}
END_TEST

/* 16 devices on 2 cores: waiting must sleep, not spin. */
static int busy_collectives(ptdp_device *dev, void *arg)
{
    (void)arg;
    float *x = ptdp_alloc(dev, 1000 * sizeof *x, PTDP_MEM_COMM, "x");
    if (!x)
        return PTDP_ENOMEM;
    for (int i = 0; i < 1000; i++)
        x[i] = 1.0f;
    for (int it = 0; it < 100; it++) {
        int rc = ptdp_all_reduce(dev->world, x, x, 1000, PTDP_F32, PTDP_AVG);
        if (rc == 0)
            rc = ptdp_barrier(dev->world);
        if (rc)
            return rc;
    }
    for (int i = 0; i < 1000; i++)
        DEVICE_CHECK(dev, x[i] == 1.0f, "x[%d] = %g", i, (double)x[i]);
    return 0;
}

TEST(launch_tests, test_sixteen_devices_quickly)
{
    double t0 = ptdp_wall_now();
    ptdp_launch_result res;
    harness_launch_ok(16, busy_collectives, NULL, NULL, &res);
    double t = ptdp_wall_now() - t0;
    /* 200 collectives; a spinning implementation takes minutes here. */
    ck_assert_msg(t < 15.0, "16 devices took %.1f s", t);
    for (int r = 0; r < 16; r++) {
        ck_assert_int_eq(res.devices[r].comm.calls[PTDP_COLL_ALL_REDUCE], 100);
        ck_assert_int_eq(res.devices[r].comm.calls[PTDP_COLL_BARRIER], 100);
        ck_assert(res.devices[r].wall_s > 0);
    }
    ptdp_launch_result_free(&res);
}
END_TEST

/* Never spinning (opts.spin = 1) changes the speed, not the results. */
TEST(launch_tests, test_without_spinning)
{
    harness_launch_ok(2, busy_collectives, NULL, &(ptdp_launch_opts){ .spin = 1 }, NULL);
}
END_TEST

/* ------------------------------------------------------------ results */

static int use_memory_and_compute(ptdp_device *dev, void *arg)
{
    (void)arg;
    void *a = ptdp_alloc(dev, 1000, PTDP_MEM_PARAMS, "w");
    void *b = ptdp_alloc(dev, 3000, PTDP_MEM_ACTS, "act");
    if (!a || !b)
        return PTDP_ENOMEM;
    ptdp_free(dev, b);
    ptdp_compute(dev, "matmul", 2e9 * (dev->rank + 1), ptdp_wall_now());
    float x[16] = { 0 };
    return ptdp_all_reduce(dev->world, x, x, 16, PTDP_F32, PTDP_SUM);
}

TEST(launch_tests, test_result_summaries_and_trace)
{
    char path[] = "/tmp/ptdp_test_trace_XXXXXX";
    harness_temp_file(path);
    ptdp_launch_result res;
    harness_launch_ok(3, use_memory_and_compute, NULL, &(ptdp_launch_opts){ .trace_path = path }, &res);
    double peak = ptdp_profile_default()->peak_flops;
    for (int r = 0; r < 3; r++) {
        const ptdp_device_summary *s = &res.devices[r];
        ck_assert_uint_eq(s->mem.current[PTDP_MEM_PARAMS], 1000);
        ck_assert_uint_eq(s->mem.peak[PTDP_MEM_ACTS], 3000);
        ck_assert_uint_eq(s->mem.current[PTDP_MEM_ACTS], 0);
        ck_assert_double_eq_tol(s->clock.compute_s, 2e9 * (r + 1) / peak, 1e-15);
        /* the all_reduce starts when rank 2's compute ends */
        ck_assert_double_eq_tol(s->clock.idle_s, 2e9 * (2 - r) / peak, 1e-12);
        ck_assert_int_eq(s->comm.calls[PTDP_COLL_ALL_REDUCE], 1);
        ck_assert_str_eq(s->comm.group[0].name, "world");
    }
    ptdp_launch_result_free(&res);

    char *text = harness_read_file(path, NULL);
    remove(path);
    ASSERT_HAS(text, "matmul");
    ASSERT_HAS(text, "all_reduce world");
    free(text);
}
END_TEST

/* ----------------------------------------------- failure propagation */

typedef struct {
    int failing_rank;
    int mode;                 /* 0: ptdp_fail; 1: return -9; 2: return 3 */
    int returned[8];
    int late_call[8];         /* a call made after the failure */
} failure;

static int fail_while_others_wait(ptdp_device *dev, void *arg)
{
    failure *f = arg;
    int rc;
    if (dev->rank == f->failing_rank) {
        sleep_s(0.05);        /* let the others block first */
        if (f->mode == 0)
            rc = ptdp_fail(dev, PTDP_EINVAL, "rank %d gives up", dev->rank);
        else
            rc = f->mode == 1 ? PTDP_EUSER : 3;
    } else if (dev->rank == 0) {
        float x;              /* rank 0 waits in a recv from the failing rank */
        rc = ptdp_recv(dev->world, &x, 1, PTDP_F32, f->failing_rank, 0);
    } else {
        float x[4] = { 0 };   /* everyone else waits in an all_reduce */
        rc = ptdp_all_reduce(dev->world, x, x, 4, PTDP_F32, PTDP_SUM);
    }
    f->returned[dev->rank] = rc;
    if (dev->rank != f->failing_rank)
        f->late_call[dev->rank] = ptdp_barrier(dev->world);
    return rc;
}

TEST(launch_tests, test_failure_propagates)
{
    for (int mode = 0; mode < 3; mode++) {
        failure f;
        memset(&f, 0, sizeof f);
        f.failing_rank = 2;
        f.mode = mode;
        ptdp_launch_result res;
        double t0 = ptdp_wall_now();
        int rc = harness_launch(5, fail_while_others_wait, &f, NULL, &res);
        ck_assert_msg(ptdp_wall_now() - t0 < 5.0, "failure took %.1f s to propagate",
                      ptdp_wall_now() - t0);
        int want = mode == 0 ? PTDP_EINVAL : PTDP_EUSER;
        ck_assert_int_eq(rc, want);
        ck_assert_int_eq(res.status, want);
        ck_assert_int_eq(res.failed_rank, 2);
        if (mode == 0)
            ASSERT_HAS(res.message, "rank 2 gives up");
        else if (mode == 1)
            ASSERT_HAS(res.message, "device 2 returned -9 (user code failed)");
        else
            ASSERT_HAS(res.message, "device 2 returned 3");
        for (int r = 0; r < 5; r++) {
            if (r == 2)
                continue;
            ck_assert_int_eq(f.returned[r], PTDP_EABORTED);
            ck_assert_int_eq(f.late_call[r], PTDP_EABORTED);
        }
        ptdp_launch_result_free(&res);
    }
}
END_TEST

static int check_aborted_flag(ptdp_device *dev, void *arg)
{
    (void)arg;
    if (dev->rank == 1)
        return ptdp_fail(dev, PTDP_ECHECK, "bad numbers");
    while (!ptdp_aborted(dev))
        sleep_s(0.001);
    return dev->status == 0 ? 0 : -100;     /* the others did not fail */
}

TEST(launch_tests, test_aborted_flag)
{
    ptdp_launch_result res;
    ck_assert_int_eq(harness_launch(3, check_aborted_flag, NULL, &short_watchdog, &res), PTDP_ECHECK);
    ck_assert_int_eq(res.failed_rank, 1);
    ck_assert_str_eq(res.message, "bad numbers");
    ptdp_launch_result_free(&res);
}
END_TEST

/* A failure elsewhere must not let a member leave a collective while its
 * peers still read its buffers.  Ranks 0-2 run collectives on heap
 * buffers they poison and free the moment each call returns; rank 3 fails
 * at a different instant each launch.  A member that left early would
 * make a peer read freed memory: AddressSanitizer (the sanitizer stage
 * runs this suite) reports it; without it, a run that returned 0 after
 * reading poison fails its sum check. */
typedef struct {
    int launch;
} abort_race;

static int collective_kind(int i)
{
    return i % 4;       /* shm all-reduce, ring all-reduce, ring all-gather, broadcast */
}

static int one_collective(ptdp_comm *g, int kind, float *buf, float *out, size_t n)
{
    switch (kind) {
    case 0:  return ptdp_all_reduce_algo(g, buf, out, n, PTDP_F32, PTDP_SUM, PTDP_ALGO_SHM);
    case 1:  return ptdp_all_reduce_algo(g, buf, out, n, PTDP_F32, PTDP_SUM, PTDP_ALGO_RING);
    case 2:  return ptdp_all_gather(g, buf, out, n / 3, PTDP_F32);
    default: return ptdp_broadcast(g, buf, n, PTDP_F32, 1);
    }
}

static int collectives_until_abort(ptdp_device *dev, void *arg)
{
    const abort_race *a = arg;
    ptdp_comm *g = NULL;
    int rc = ptdp_comm_split(dev->world, dev->rank < 3 ? 0 : -1, dev->rank, "three", &g);
    if (rc)
        return rc;
    if (dev->rank == 3) {
        sleep_s(0.0002 * (a->launch % 16));
        return ptdp_fail(dev, PTDP_EUSER, "rank 3 fails at launch %d", a->launch);
    }
    const size_t n = 3 * 4096;
    for (int i = 0; rc == 0 && i < 100000; i++) {
        float *buf = malloc(n * sizeof *buf), *out = malloc(n * sizeof *out);
        if (!buf || !out) {
            free(buf);
            free(out);
            return PTDP_ENOMEM;
        }
        for (size_t j = 0; j < n; j++)
            buf[j] = 1.0f;
        rc = one_collective(g, collective_kind(i), buf, out, n);
        float want = collective_kind(i) < 2 ? 3.0f : 1.0f, got = collective_kind(i) == 3 ? buf[n - 1] : out[0];
        for (size_t j = 0; j < n; j++)
            buf[j] = -1e30f;            /* poison, then free: a late reader sees both */
        free(buf);
        free(out);
        if (rc == 0 && got != want)
            return ptdp_fail(dev, PTDP_ECHECK, "collective %d returned 0 with %g, not %g", i, got, want);
    }
    ptdp_comm_free(g);
    return rc;
}

TEST(launch_tests, test_abort_never_frees_a_buffer_in_use)
{
    for (int launch = 0; launch < 48; launch++) {
        abort_race a = { launch };
        ptdp_launch_result res;
        ck_assert_int_eq(harness_launch(4, collectives_until_abort, &a, &short_watchdog, &res), PTDP_EUSER);
        ck_assert_int_eq(res.failed_rank, 3);
        ptdp_launch_result_free(&res);
    }
}
END_TEST

/* -------------------------------------------------------- out of memory */

static int allocate_too_much(ptdp_device *dev, void *arg)
{
    (void)arg;
    if (!ptdp_alloc(dev, 512 << 10, PTDP_MEM_PARAMS, "embedding"))
        return PTDP_ENOMEM;
    if (dev->rank == 1 && !ptdp_alloc(dev, 768 << 10, PTDP_MEM_ACTS, "blocks.0.fc1.out"))
        return PTDP_ENOMEM;
    return ptdp_barrier(dev->world);
}

TEST(launch_tests, test_out_of_memory_message)
{
    ptdp_launch_result res;
    ptdp_launch_opts o = short_watchdog;
    o.device_mem = 1 << 20;
    ck_assert_int_eq(harness_launch(3, allocate_too_much, NULL, &o, &res), PTDP_ENOMEM);
    ck_assert_int_eq(res.failed_rank, 1);
    ASSERT_HAS(res.message, "device 1");
    ASSERT_HAS(res.message, "blocks.0.fc1.out");
    ASSERT_HAS(res.message, "768.00 KiB");     /* asked */
    ASSERT_HAS(res.message, "512.00 KiB");     /* in use */
    ASSERT_HAS(res.message, "1.00 MiB");       /* capacity */
    ptdp_launch_result_free(&res);
}
END_TEST

/* ------------------------------------------------------------ mismatch */

typedef struct {
    int kind;
    int line[8];
} mismatch;

static int mismatched_calls(ptdp_device *dev, void *arg)
{
    mismatch *m = arg;
    static float x[2048], y[2048];   /* never touched: the calls fail first */
    ptdp_comm *c = dev->world;
    int r = dev->rank, rc = 0;
    float *xs = x + r * 256, *ys = y + r * 256;
    ptdp_barrier(c);                 /* make it call #1, not #0 */
    switch (m->kind) {
    case 0:                          /* a different operation */
        if (r == 1) {
            m->line[r] = __LINE__ + 1;
            rc = ptdp_all_gather(c, xs, ys, 512, PTDP_F32);
        } else {
            m->line[r] = __LINE__ + 1;
            rc = ptdp_all_reduce(c, xs, ys, 256, PTDP_F32, PTDP_SUM);
        }
        break;
    case 1:                          /* a different count */
        m->line[r] = __LINE__ + 1;
        rc = ptdp_all_reduce(c, xs, ys, r == 2 ? 200 : 256, PTDP_F32, PTDP_SUM);
        break;
    case 2:                          /* a different root */
        m->line[r] = __LINE__ + 1;
        rc = ptdp_broadcast(c, xs, 8, PTDP_F32, r == 0 ? 1 : 0);
        break;
    case 3:                          /* a different type */
        m->line[r] = __LINE__ + 1;
        rc = ptdp_all_reduce(c, xs, ys, 16, r == 1 ? PTDP_I32 : PTDP_F32, PTDP_SUM);
        break;
    default:                         /* a different reduction */
        m->line[r] = __LINE__ + 1;
        rc = ptdp_all_reduce(c, xs, ys, 16, PTDP_F32, r == 0 ? PTDP_MAX : PTDP_SUM);
        break;
    }
    return rc;
}

TEST(launch_tests, test_mismatch_detected)
{
    /* One clause per distinct call, the odd rank's first (core/ranks.h). */
    static const char *const expect[5][2] = {
        { "rank 1: all_gather count=512 f32", "ranks 0, 2: all_reduce count=256 f32 op=sum algo=shm" },
        { "rank 2: all_reduce count=200", "ranks 0-1: all_reduce count=256" },
        { "rank 0: broadcast count=8 f32 root=1", "ranks 1-2: broadcast count=8 f32 root=0" },
        { "rank 1: all_reduce count=16 i32", "ranks 0, 2: all_reduce count=16 f32" },
        { "rank 0: all_reduce count=16 f32 op=max", "ranks 1-2: all_reduce count=16 f32 op=sum" },
    };
    for (int kind = 0; kind < 5; kind++) {
        mismatch m;
        memset(&m, 0, sizeof m);
        m.kind = kind;
        ptdp_launch_result res;
        ck_assert_int_eq(harness_launch(3, mismatched_calls, &m, &short_watchdog, &res), PTDP_EMISMATCH);
        ASSERT_HAS(res.message, "mismatched collectives in group 'world' (call #1)");
        ASSERT_HAS(res.message, expect[kind][0]);
        ASSERT_HAS(res.message, expect[kind][1]);
        ck_assert_msg(strstr(res.message, expect[kind][0]) < strstr(res.message, expect[kind][1]),
                      "the odd call must come first: %s", res.message);
        for (int r = 0; r < 3; r++) {
            char where[64];
            snprintf(where, sizeof where, "test_launch.c:%d", m.line[r]);
            ASSERT_HAS(res.message, where);
        }
        ptdp_launch_result_free(&res);
    }
}
END_TEST

/* At 64 devices the rank at fault is named first, not cut off the end. */
static int last_rank_counts_differently(ptdp_device *dev, void *arg)
{
    (void)arg;
    static float x[64][17];
    return ptdp_all_reduce(dev->world, x[dev->rank], x[dev->rank], dev->rank == 63 ? 17 : 16,
                           PTDP_F32, PTDP_SUM);
}

TEST(launch_tests, test_mismatch_at_64_devices_names_the_odd_rank)
{
    ptdp_launch_result res;
    ck_assert_int_eq(harness_launch(64, last_rank_counts_differently, NULL, &short_watchdog, &res),
                     PTDP_EMISMATCH);
    ASSERT_HAS(res.message, "): rank 63: all_reduce count=17 f32 op=sum");
    ASSERT_HAS(res.message, "; ranks 0-62: all_reduce count=16 f32 op=sum");
    ptdp_launch_result_free(&res);
}
END_TEST

/* A send nobody receives, at 64 devices: the watchdog names the sender. */
static int last_rank_sends_to_nobody(ptdp_device *dev, void *arg)
{
    (void)arg;
    float v = 1;
    if (dev->rank == 63)
        return ptdp_send(dev->world, &v, 1, PTDP_F32, 0, 9);
    return ptdp_barrier(dev->world);
}

TEST(launch_tests, test_watchdog_at_64_devices_names_the_odd_rank)
{
    /* 3 s, not 0.5: 64 threads on 2 cores under ThreadSanitizer take more
     * than half a second to reach their calls, and the report must find
     * each of them waiting, none still running. */
    const ptdp_launch_opts three_seconds = { .watchdog_s = 3 };
    ptdp_launch_result res;
    ck_assert_int_eq(harness_launch(64, last_rank_sends_to_nobody, NULL, &three_seconds, &res), PTDP_ETIMEDOUT);
    ASSERT_HAS(res.message, "rank 63: waiting in send to rank 0 tag 9 in group 'world'");
    ASSERT_HAS(res.message, "ranks 0-62: waiting in barrier in group 'world'");
    ptdp_launch_result_free(&res);
}
END_TEST

/* ------------------------------------------------------------ watchdog */

static int one_device_is_slow(ptdp_device *dev, void *arg)
{
    (void)arg;
    if (dev->rank == 1)
        sleep_s(1.5);          /* longer than the watchdog */
    return ptdp_barrier(dev->world);
}

TEST(launch_tests, test_watchdog_names_the_waiters)
{
    ptdp_launch_result res;
    double t0 = ptdp_wall_now();
    ck_assert_int_eq(harness_launch(3, one_device_is_slow, NULL, &half_second, &res), PTDP_ETIMEDOUT);
    ck_assert(ptdp_wall_now() - t0 < 5.0);
    ASSERT_HAS(res.message, "watchdog");
    ASSERT_HAS(res.message, "waiting in barrier in group 'world' at test_launch.c");
    ASSERT_HAS(res.message, "rank 1: running");
    ptdp_launch_result_free(&res);
}
END_TEST

static int one_device_returns_early(ptdp_device *dev, void *arg)
{
    (void)arg;
    if (dev->rank == 2)
        return 0;              /* forgets the barrier */
    return ptdp_barrier(dev->world);
}

TEST(launch_tests, test_returned_device_is_named)
{
    ptdp_launch_result res;
    double t0 = ptdp_wall_now();
    ck_assert_int_eq(harness_launch(3, one_device_returns_early, NULL, NULL, &res), PTDP_EMISMATCH);
    ck_assert_msg(ptdp_wall_now() - t0 < 2.0, "took %.1f s", ptdp_wall_now() - t0);
    ASSERT_HAS(res.message, "rank 2 has already returned");
    ASSERT_HAS(res.message, "rank 2: finished");
    ptdp_launch_result_free(&res);
}
END_TEST

/* A NULL communicator: the device fails with the call site (the thread's
 * device, runtime/device.c), not "device 0 returned -1". */
static int calls_with_no_group(ptdp_device *dev, void *arg)
{
    (void)dev;
    (void)arg;
    float x = 1;
    return ptdp_all_reduce(NULL, &x, &x, 1, PTDP_F32, PTDP_SUM); /* NULL_CALL */
}
enum { NULL_CALL_LINE = __LINE__ - 2 };   /* the line of the call above */

TEST(launch_tests, test_null_communicator_names_the_call)
{
    ptdp_launch_result res;
    ck_assert_int_eq(harness_launch(2, calls_with_no_group, NULL, &short_watchdog, &res), PTDP_EINVAL);
    char where[96];
    snprintf(where, sizeof where, "ptdp_all_reduce at test_launch.c:%d: the communicator is NULL", (int)NULL_CALL_LINE);
    ASSERT_HAS(res.message, where);
    ptdp_launch_result_free(&res);
}
END_TEST

/* A view out of range fails the device with a sentence, never an abort. */
static int slices_too_far(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_real data[12] = { 0 };
    ptdp_tensor w = ptdp_tensor_wrap(data, 4, 3);
    ptdp_tensor v = ptdp_tensor_rows(w, 2 + dev->rank, 2);   /* rank 1: rows [3, 5) of 4 */
    return v.rows == 2 ? 0 : PTDP_EINVAL;
}

TEST(launch_tests, test_view_out_of_range_fails_the_device)
{
    ptdp_launch_result res;
    ck_assert_int_eq(harness_launch(2, slices_too_far, NULL, &short_watchdog, &res), PTDP_EINVAL);
    ck_assert_int_eq(res.failed_rank, 1);
    ASSERT_HAS(res.message, "ptdp_tensor_rows: rows [3, 5) of a tensor of 4 rows");
    ptdp_launch_result_free(&res);
}
END_TEST

/* A trace that cannot be written is an output of its own: the run stands. */
static int quick_barrier(ptdp_device *dev, void *arg)
{
    (void)arg;
    return ptdp_barrier(dev->world);
}

TEST(launch_tests, test_unwritable_trace_does_not_fail_the_run)
{
    ptdp_launch_result res;
    ptdp_launch_opts o = short_watchdog;
    o.trace_path = "/nonexistent-directory/t.json";
    ck_assert_int_eq(harness_launch(2, quick_barrier, NULL, &o, &res), 0);
    ck_assert_int_eq(res.trace_status, PTDP_EIO);
    ASSERT_HAS(res.trace_message, "/nonexistent-directory/t.json");
    ptdp_launch_result_free(&res);
    o.result = NULL;             /* nobody asked for a result: it is returned */
    ck_assert_int_eq(ptdp_launch(2, quick_barrier, NULL, &o), PTDP_EIO);
}
END_TEST

/* ------------------------------------------------------ argument checks */

typedef struct {
    int kind, line;
} bad_args;

static int call_badly(ptdp_device *dev, void *arg)
{
    bad_args *b = arg;
    float x[8] = { 0 };
    ptdp_comm *c = dev->world;
    if (dev->rank == 1) {
        float y;
        return ptdp_recv(c, &y, 1, PTDP_F32, 0, 0);   /* aborted, not hung */
    }
    b->line = __LINE__ + 2;
    switch (b->kind) {
    case 0: return ptdp_all_reduce(c, NULL, x, 8, PTDP_F32, PTDP_SUM);
    case 1: return ptdp_broadcast(c, x, 8, PTDP_F32, 2);
    case 2: return ptdp_all_reduce(c, x, x + 1, 4, PTDP_F32, PTDP_SUM);
    case 3: return ptdp_all_reduce(c, PTDP_IN_PLACE, x, 8, PTDP_F32, PTDP_SUM);
    case 4: return ptdp_send(c, x, 1, PTDP_F32, 0, 0);
    case 5: return ptdp_all_reduce(c, x, x, 8, PTDP_F32, (ptdp_op)7);
    default: return ptdp_all_reduce(c, x, x, 8, (ptdp_dtype)42, PTDP_SUM);
    }
}

TEST(launch_tests, test_bad_arguments)
{
    static const char *const expect[] = {
        "send is NULL for 8 elements", "root 2 is not a rank of a group of 2",
        "overlap", "PTDP_IN_PLACE is only for", "to itself", "unknown reduction 7",
        "unknown element type 42",
    };
    for (int kind = 0; kind < 7; kind++) {
        bad_args b = { kind, 0 };
        ptdp_launch_result res;
        ck_assert_int_eq(harness_launch(2, call_badly, &b, &short_watchdog, &res), PTDP_EINVAL);
        ck_assert_int_eq(res.failed_rank, 0);
        ASSERT_HAS(res.message, expect[kind]);
        char where[64];
        snprintf(where, sizeof where, "at test_launch.c:%d (group 'world', rank 0 of 2)",
                 b.line + kind);
        ASSERT_HAS(res.message, where);
        ptdp_launch_result_free(&res);
    }
}
END_TEST

int main(void)
{
    return harness_main("launch");
}
