/*
 * test_p2p.c — blocking rendezvous send/recv: order, tags, groups, the
 * deadlock-free even/odd exchange, mismatches, deadlocks named by the
 * watchdog, the virtual clock of a message, byte counts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ptdp/ptdp.h"

static const harness_tcase p2p_tests = { .name = "p2p", .timeout_s = 30 };

/* The failure tests' watchdogs: 10 s, or half a second where the watchdog
 * itself is what is tested. */
static const ptdp_launch_opts short_watchdog = { .watchdog_s = 10 }, half_second = { .watchdog_s = 0.5 };

/* ------------------------------------------------------------ order */

static int stream_in_order(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_comm *c = dev->world;
    for (int i = 0; i < 200; i++) {
        int64_t v[3] = { i, -i, 7 };
        if (dev->rank == 0) {
            DEVICE_TRY(ptdp_send(c, v, 3, PTDP_I64, 1, 5));
        } else {
            int64_t got[3] = { 0 };
            DEVICE_TRY(ptdp_recv(c, got, 3, PTDP_I64, 0, 5));
            DEVICE_CHECK(dev, got[0] == i && got[1] == -i && got[2] == 7, "message %d arrived as %lld", i,
                         (long long)got[0]);
        }
    }
    return 0;
}

TEST(p2p_tests, test_messages_arrive_in_order)
{
    ptdp_launch_result res;
    harness_launch_ok(2, stream_in_order, NULL, NULL, &res);
    ck_assert_int_eq(res.devices[0].comm.calls[PTDP_COLL_SEND], 200);
    ck_assert_int_eq(res.devices[1].comm.calls[PTDP_COLL_RECV], 200);
    ck_assert_double_eq(res.devices[0].comm.bytes_sent[PTDP_COLL_SEND], 200.0 * 24);
    ck_assert_double_eq(res.devices[1].comm.bytes_recv[PTDP_COLL_RECV], 200.0 * 24);
    ck_assert_double_eq(res.devices[1].comm.bytes_sent[PTDP_COLL_RECV], 0);
    ptdp_launch_result_free(&res);
}
END_TEST

/* Rank 2 receives by (source, tag) whatever order the senders start in. */
static int pick_by_source_and_tag(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_comm *c = dev->world;
    double x = 10.0 * dev->rank;
    switch (dev->rank) {
    case 0:
        return ptdp_send(c, &x, 1, PTDP_F64, 2, 7);
    case 1: {
        int rc = ptdp_send(c, &x, 1, PTDP_F64, 2, 8);
        x = 11;
        return rc ? rc : ptdp_send(c, &x, 1, PTDP_F64, 2, 9);
    }
    default: {
        double a = 0, b = 0, d = 0;
        DEVICE_TRY(ptdp_recv(c, &a, 1, PTDP_F64, 1, 8));
        DEVICE_TRY(ptdp_recv(c, &d, 1, PTDP_F64, 1, 9));
        DEVICE_TRY(ptdp_recv(c, &b, 1, PTDP_F64, 0, 7));
        DEVICE_CHECK(dev, a == 10.0 && b == 0.0 && d == 11.0, "got %g %g %g", a, b, d);
        return 0;
    }
    }
}

TEST(p2p_tests, test_source_and_tag)
{
    harness_launch_ok(3, pick_by_source_and_tag, NULL, NULL, NULL);
}
END_TEST

/* A shift around a ring of 8 without deadlock: even ranks send first, odd
 * ranks receive first, so no cycle of blocking sends can form. */
static int even_odd_shift(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_comm *pp;
    int rc = ptdp_comm_split(dev->world, 0, dev->rank, "pp", &pp);
    if (rc)
        return rc;
    int r = ptdp_comm_rank(pp), n = ptdp_comm_size(pp);
    int right = (r + 1) % n, left = (r + n - 1) % n;
    float out[100], in[100];
    for (int i = 0; i < 100; i++)
        out[i] = (float)(r * 1000 + i);
    for (int round = 0; round < 20 && rc == 0; round++) {
        if (r % 2 == 0) {
            rc = ptdp_send(pp, out, 100, PTDP_F32, right, round);
            if (rc == 0)
                rc = ptdp_recv(pp, in, 100, PTDP_F32, left, round);
        } else {
            rc = ptdp_recv(pp, in, 100, PTDP_F32, left, round);
            if (rc == 0)
                rc = ptdp_send(pp, out, 100, PTDP_F32, right, round);
        }
        for (int i = 0; rc == 0 && i < 100; i++)
            DEVICE_CHECK(dev, in[i] == (float)(left * 1000 + i), "rank %d got %g from %d", r, (double)in[i], left);
    }
    ptdp_comm_free(pp);
    return rc;
}

TEST(p2p_tests, test_even_odd_ring_shift)
{
    ptdp_launch_result res;
    harness_launch_ok(8, even_odd_shift, NULL, NULL, &res);
    for (int r = 0; r < 8; r++) {
        ck_assert_double_eq(res.devices[r].comm.total_sent, 20 * 400.0);
        ck_assert_double_eq(res.devices[r].comm.total_recv, 20 * 400.0);
        ck_assert_str_eq(res.devices[r].comm.group[1].name, "pp");
    }
    ptdp_launch_result_free(&res);
}
END_TEST

/* --------------------------------------------------------- mismatches */

typedef struct {
    int kind;
    int send_line, recv_line;
} p2p_mismatch;

static int mismatched_message(ptdp_device *dev, void *arg)
{
    p2p_mismatch *m = arg;
    float x[16] = { 0 };
    if (dev->rank == 0) {
        m->send_line = __LINE__ + 1;
        return ptdp_send(dev->world, x, 10, PTDP_F32, 1, 3);
    }
    m->recv_line = __LINE__ + 1;
    return ptdp_recv(dev->world, x, m->kind == 0 ? 12 : 10, m->kind == 0 ? PTDP_F32 : PTDP_I32, 0, 3);
}

TEST(p2p_tests, test_count_and_type_mismatch)
{
    for (int kind = 0; kind < 2; kind++) {
        p2p_mismatch m = { kind, 0, 0 };
        ptdp_launch_result res;
        ck_assert_int_eq(harness_launch(2, mismatched_message, &m, &short_watchdog, &res), PTDP_EMISMATCH);
        ck_assert_int_eq(res.failed_rank, 1);
        char where[64];
        snprintf(where, sizeof where, "rank 0 send count=10 f32 at test_p2p.c:%d", m.send_line);
        ASSERT_HAS(res.message, where);
        snprintf(where, sizeof where, "rank 1 recv count=%d %s at test_p2p.c:%d",
                 kind == 0 ? 12 : 10, kind == 0 ? "f32" : "i32", m.recv_line);
        ASSERT_HAS(res.message, where);
        ptdp_launch_result_free(&res);
    }
}
END_TEST

/* --------------------------------------------------------- deadlocks */

typedef struct {
    int kind;
    int line[2];
} deadlock;

static int deadlocked_pair(ptdp_device *dev, void *arg)
{
    deadlock *d = arg;
    float x = 0;
    int other = 1 - dev->rank;
    if (d->kind == 0) {                     /* both send first */
        d->line[dev->rank] = __LINE__ + 1;
        int rc = ptdp_send(dev->world, &x, 1, PTDP_F32, other, 0);
        return rc ? rc : ptdp_recv(dev->world, &x, 1, PTDP_F32, other, 0);
    }
    if (dev->rank == 0) {                   /* tags in the wrong order */
        d->line[0] = __LINE__ + 1;
        int rc = ptdp_send(dev->world, &x, 1, PTDP_F32, 1, 1);
        return rc ? rc : ptdp_send(dev->world, &x, 1, PTDP_F32, 1, 2);
    }
    d->line[1] = __LINE__ + 1;
    int rc = ptdp_recv(dev->world, &x, 1, PTDP_F32, 0, 2);
    return rc ? rc : ptdp_recv(dev->world, &x, 1, PTDP_F32, 0, 1);
}

TEST(p2p_tests, test_watchdog_names_deadlock)
{
    for (int kind = 0; kind < 2; kind++) {
        deadlock d;
        memset(&d, 0, sizeof d);
        d.kind = kind;
        ptdp_launch_result res;
        double t0 = ptdp_wall_now();
        ck_assert_int_eq(harness_launch(2, deadlocked_pair, &d, &half_second, &res), PTDP_ETIMEDOUT);
        ck_assert(ptdp_wall_now() - t0 < 5.0);
        char want[160];
        if (kind == 0) {
            for (int r = 0; r < 2; r++) {
                snprintf(want, sizeof want, "rank %d: waiting in send to rank %d tag 0 in group "
                         "'world' at test_p2p.c:%d", r, 1 - r, d.line[r]);
                ASSERT_HAS(res.message, want);
            }
        } else {
            snprintf(want, sizeof want, "rank 0: waiting in send to rank 1 tag 1 in group "
                     "'world' at test_p2p.c:%d", d.line[0]);
            ASSERT_HAS(res.message, want);
            snprintf(want, sizeof want, "rank 1: waiting in recv from rank 0 tag 2 in group "
                     "'world' at test_p2p.c:%d", d.line[1]);
            ASSERT_HAS(res.message, want);
        }
        ASSERT_HAS(res.message, "watchdog");
        ptdp_launch_result_free(&res);
    }
}
END_TEST

/* In a split group the report gives the peer's group and world ranks. */
static int deadlock_in_pairs(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_comm *pair;
    int rc = ptdp_comm_split(dev->world, dev->rank % 2, dev->rank, "pair", &pair);
    if (rc)
        return rc;
    float x = 0;
    int other = 1 - ptdp_comm_rank(pair);
    rc = ptdp_send(pair, &x, 1, PTDP_F32, other, 0);
    ptdp_comm_free(pair);
    return rc;
}

TEST(p2p_tests, test_watchdog_in_subgroup)
{
    ptdp_launch_result res;
    ck_assert_int_eq(harness_launch(4, deadlock_in_pairs, NULL, &half_second, &res), PTDP_ETIMEDOUT);
    ASSERT_HAS(res.message, "rank 0: waiting in send to rank 1 (world rank 2) tag 0 in group 'pair'");
    ASSERT_HAS(res.message, "rank 3: waiting in send to rank 0 (world rank 1) tag 0 in group 'pair'");
    ptdp_launch_result_free(&res);
}
END_TEST

static int receive_from_returned(ptdp_device *dev, void *arg)
{
    (void)arg;
    float x;
    if (dev->rank == 1)
        return 0;
    return ptdp_recv(dev->world, &x, 1, PTDP_F32, 1, 0);
}

TEST(p2p_tests, test_peer_returned)
{
    ptdp_launch_result res;
    double t0 = ptdp_wall_now();
    ck_assert_int_eq(harness_launch(2, receive_from_returned, NULL, NULL, &res), PTDP_EMISMATCH);
    ck_assert(ptdp_wall_now() - t0 < 2.0);
    ASSERT_HAS(res.message, "recv from rank 1 tag 0");
    ASSERT_HAS(res.message, "rank 1 has already returned");
    ptdp_launch_result_free(&res);
}
END_TEST

/* ------------------------------------------------------ virtual time */

typedef struct {
    double sender_compute, receiver_compute;
    size_t count;
} timing;

static int timed_message(ptdp_device *dev, void *arg)
{
    timing *t = arg;
    static float buf[2][1 << 16];
    if (dev->rank == 0) {
        ptdp_compute_seconds(dev, "fwd", t->sender_compute, ptdp_wall_now());
        return ptdp_send(dev->world, buf[0], t->count, PTDP_F32, 1, 0);
    }
    ptdp_compute_seconds(dev, "fwd", t->receiver_compute, ptdp_wall_now());
    return ptdp_recv(dev->world, buf[1], t->count, PTDP_F32, 0, 0);
}

TEST(p2p_tests, test_message_virtual_time)
{
    const ptdp_profile *p = ptdp_profile_default();
    size_t count = 1 << 16;
    double cost = ptdp_cost_message(p, count * 4);
    ck_assert(cost > 0);

    /* An early receiver waits for the arrival. */
    timing early = { 1e-3, 0.0, count };
    ptdp_launch_result res;
    harness_launch_ok(2, timed_message, &early, NULL, &res);
    ck_assert_double_eq_tol(res.devices[0].clock.now, 1e-3 + cost, 1e-15);
    ck_assert_double_eq_tol(res.devices[0].clock.comm_s, cost, 1e-15);
    ck_assert_double_eq_tol(res.devices[1].clock.now, 1e-3 + cost, 1e-15);
    ck_assert_double_eq_tol(res.devices[1].clock.idle_s, 1e-3 + cost, 1e-15);
    ptdp_launch_result_free(&res);

    /* A late receiver finds the message there. */
    timing late = { 1e-3, 5e-3, count };
    harness_launch_ok(2, timed_message, &late, NULL, &res);
    ck_assert_double_eq_tol(res.devices[1].clock.now, 5e-3, 1e-15);
    ck_assert_double_eq_tol(res.devices[1].clock.idle_s, 0.0, 1e-15);
    ptdp_launch_result_free(&res);
}
END_TEST

static int zero_length(ptdp_device *dev, void *arg)
{
    (void)arg;
    if (dev->rank == 0)
        return ptdp_send(dev->world, NULL, 0, PTDP_F32, 1, 4);
    return ptdp_recv(dev->world, NULL, 0, PTDP_F32, 0, 4);
}

TEST(p2p_tests, test_zero_length_message)
{
    harness_launch_ok(2, zero_length, NULL, NULL, NULL);
}
END_TEST

int main(void)
{
    return harness_main("p2p");
}
