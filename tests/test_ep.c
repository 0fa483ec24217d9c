/*
 * test_ep.c — expert parallelism's exchanges (ep.h) on hand-made loads.
 *
 *   exchanges  N = 1, 2, 4 devices, E = 4 and 8 experts, loads with zero
 *              rows for some experts and (N = 4) a rank that sends nothing:
 *              the plan's counts are the senders' loads; dispatch puts
 *              every row where the contract says (local expert order, then
 *              source rank, then the source's order), bit for bit;
 *              combine(dispatch(x)) = x; combine is dispatch's adjoint,
 *              <dispatch x, y> = <x, combine y> summed over the group
 *              (small integers: exact in both precisions); the counters'
 *              all_to_allv bytes equal the rows functions x cols x element,
 *              the counts' all_to_all (N-1) local ints; staging is freed;
 *              the counter EP publishes, "ep_bytes" (counters.h), adds up
 *              to every byte the comm layer measured the exchanges send
 *   uniform    every rank sends each expert the same rows: each exchange's
 *              measured bytes equal k T_r C (N-1)/N x element
 *   refused    E not a multiple of N, a negative load, negative columns
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ptdp/arena.h"
#include "ptdp/counters.h"
#include "ptdp/error.h"
#include "ptdp/ep.h"

static const harness_tcase ep_tests = { .name = "ep", .timeout_s = 60 };

enum { COLS = 3, MAX_N = 4, MAX_E = 8, MAX_ROWS = 64 };

/* ====================================================== exchanges */

/* Rows rank s sends expert e: zeros for some experts, none at all from
 * rank 2 of 4. */
static int load_of(int N, int s, int e)
{
    if (N == 4 && s == 2)
        return 0;
    return (3 * s + 5 * e + e / 4 + 1) % 4 + (e == 0 ? s : 0);
}

/* Row j of source s for expert e, column c: says where it came from. */
static ptdp_real code(int s, int e, int j, int c)
{
    return (ptdp_real)((((s * 16 + e) * 16 + j) * 4) + c);
}

/* A small integer for the adjoint's products: exact sums in float too. */
static ptdp_real small(int a, int b)
{
    return (ptdp_real)((a * 7 + b * 3) % 7 - 3);
}

typedef struct {
    int E;
    double dot_dispatch[MAX_N], dot_combine[MAX_N];   /* <dispatch x, y>, <x, combine y> per rank */
    ptdp_counters counters;                           /* EP's, published (ptdp_ep_publish) */
    double device_counts[MAX_N][2];                   /* each rank's row of the run */
} exchange_arg;

/* out of a dispatch on my rank: local expert l, source s, row j, column c. */
static int check_order(ptdp_device *dev, const ptdp_ep_plan *p, const ptdp_real *out)
{
    size_t row = 0;
    for (int l = 0; l < p->local; l++)
        for (int s = 0; s < p->N; s++) {
            const int e = p->rank * p->local + l;
            for (int j = 0; j < load_of(p->N, s, e); j++, row++)
                for (int c = 0; c < COLS; c++)
                    DEVICE_CHECK(dev, out[row * COLS + c] == code(s, e, j, c),
                                 "N %d E %d rank %d: row %zu column %d holds %g, want expert %d row %d from rank %d",
                                 p->N, p->E, p->rank, row, c, (double)out[row * COLS + c], e, j, s);
        }
    DEVICE_CHECK(dev, row == p->received, "rows checked %zu, received %zu", row, p->received);
    return 0;
}

static int check_plan(ptdp_device *dev, const ptdp_ep_plan *p, int E)
{
    const int N = dev->world_size, r = dev->rank, local = E / N;
    size_t sent = 0, received = 0, away = 0, back = 0;
    DEVICE_CHECK(dev, p->N == N && p->rank == r && p->E == E && p->local == local, "plan %d %d %d %d", p->N,
                 p->rank, p->E, p->local);
    for (int e = 0; e < E; e++) {
        DEVICE_CHECK(dev, p->send_rows[e] == load_of(N, r, e), "send_rows[%d] = %d", e, p->send_rows[e]);
        sent += (size_t)load_of(N, r, e);
        away += e / local != r ? (size_t)load_of(N, r, e) : 0;
    }
    for (int s = 0; s < N; s++)
        for (int l = 0; l < local; l++) {
            const int want = load_of(N, s, r * local + l);
            DEVICE_CHECK(dev, p->recv_rows[s * local + l] == want, "rank %d: recv_rows[%d] = %d, source %d sends %d",
                         r, s * local + l, p->recv_rows[s * local + l], s, want);
            received += (size_t)want;
            back += s != r ? (size_t)want : 0;
        }
    DEVICE_CHECK(dev, p->sent == sent && p->received == received, "sent %zu (want %zu), received %zu (want %zu)",
                 p->sent, sent, p->received, received);
    DEVICE_CHECK(dev, ptdp_ep_rows_dispatched_away(p) == away && ptdp_ep_rows_combined_away(p) == back,
                 "rows away %zu (want %zu), back %zu (want %zu)", ptdp_ep_rows_dispatched_away(p), away,
                 ptdp_ep_rows_combined_away(p), back);
    return 0;
}

static int exchange_device(ptdp_device *dev, void *arg)
{
    exchange_arg *a = arg;
    const int N = dev->world_size, r = dev->rank, E = a->E;
    const double elem = sizeof(ptdp_real);
    int load[MAX_E];
    ptdp_real x[MAX_ROWS * COLS], out[MAX_ROWS * COLS], back[MAX_ROWS * COLS], y[MAX_ROWS * COLS];
    size_t row = 0;
    for (int e = 0; e < E; e++) {
        load[e] = load_of(N, r, e);
        for (int j = 0; j < load[e]; j++, row++)
            for (int c = 0; c < COLS; c++)
                x[row * COLS + c] = code(r, e, j, c);
    }
    ptdp_mem_stats m0, m1;
    ptdp_arena_stats(dev->arena, &m0);
    const ptdp_comm_stats *st = &dev->stats;
    double c0 = st->bytes_sent[PTDP_COLL_ALL_TO_ALL], v0 = st->bytes_sent[PTDP_COLL_ALL_TO_ALLV];
    ptdp_counts counts = { .reg = &a->counters, .row = { [PTDP_COUNT_DEVICE] = a->device_counts[r] } };
    dev->counts = &counts;
    ptdp_ep_plan p;
    DEVICE_TRY(ptdp_ep_plan_init(dev, dev->world, E, load, &p));
    DEVICE_CHECK(dev, st->bytes_sent[PTDP_COLL_ALL_TO_ALL] - c0 == (N - 1) * (E / N) * (double)sizeof(int),
                 "the counts' all_to_all sent %g bytes", st->bytes_sent[PTDP_COLL_ALL_TO_ALL] - c0);
    DEVICE_TRY(check_plan(dev, &p, E));
    DEVICE_CHECK(dev, p.sent == row && p.received <= MAX_ROWS, "sent %zu, received %zu", p.sent, p.received);

    double s0 = st->bytes_sent[PTDP_COLL_ALL_TO_ALLV], r0 = st->bytes_recv[PTDP_COLL_ALL_TO_ALLV];
    DEVICE_TRY(ptdp_ep_dispatch(dev, dev->world, &p, x, COLS, out));
    double s1 = st->bytes_sent[PTDP_COLL_ALL_TO_ALLV], r1 = st->bytes_recv[PTDP_COLL_ALL_TO_ALLV];
    DEVICE_CHECK(dev, s1 - s0 == ptdp_ep_rows_dispatched_away(&p) * COLS * elem &&
                          r1 - r0 == ptdp_ep_rows_combined_away(&p) * COLS * elem,
                 "dispatch sent %g bytes, received %g", s1 - s0, r1 - r0);
    DEVICE_TRY(check_order(dev, &p, out));

    DEVICE_TRY(ptdp_ep_combine(dev, dev->world, &p, out, COLS, back));
    DEVICE_CHECK(dev, st->bytes_sent[PTDP_COLL_ALL_TO_ALLV] - s1 == ptdp_ep_rows_combined_away(&p) * COLS * elem,
                 "combine sent %g bytes", st->bytes_sent[PTDP_COLL_ALL_TO_ALLV] - s1);
    DEVICE_CHECK(dev, memcmp(back, x, p.sent * COLS * sizeof *x) == 0, "combine(dispatch(x)) is not x on rank %d", r);

    /* the adjoint, on small integers: <dispatch x, y> here, <x, combine y> there */
    for (size_t i = 0; i < p.sent * COLS; i++)
        x[i] = small(r, (int)i);
    for (size_t i = 0; i < p.received * COLS; i++)
        y[i] = small(r + 2, (int)i * 5);
    DEVICE_TRY(ptdp_ep_dispatch(dev, dev->world, &p, x, COLS, out));
    DEVICE_TRY(ptdp_ep_combine(dev, dev->world, &p, y, COLS, back));
    a->dot_dispatch[r] = a->dot_combine[r] = 0;
    for (size_t i = 0; i < p.received * COLS; i++)
        a->dot_dispatch[r] += (double)out[i] * y[i];
    for (size_t i = 0; i < p.sent * COLS; i++)
        a->dot_combine[r] += (double)x[i] * back[i];
    ptdp_ep_plan_free(&p);
    dev->counts = NULL;
    const double sent = st->bytes_sent[PTDP_COLL_ALL_TO_ALL] - c0 + st->bytes_sent[PTDP_COLL_ALL_TO_ALLV] - v0;
    const double *counted = ptdp_counters_in(&a->counters, "ep_bytes", PTDP_COUNT_DEVICE, a->device_counts[r]);
    DEVICE_CHECK(dev, counted != NULL && *counted == sent, "ep_bytes counted %g, the exchanges sent %g bytes",
                 counted != NULL ? *counted : -1.0, sent);
    ptdp_arena_stats(dev->arena, &m1);
    DEVICE_CHECK(dev, m1.current_total == m0.current_total && m1.allocations == m0.allocations,
                 "the exchanges left %zu bytes in the arena", m1.current_total - m0.current_total);
    return 0;
}

/* _i: N = 1, 2, 4 (_i % 3), E = 4 then 8 */
LOOP_TEST(ep_tests, test_dispatch_order_round_trip_adjoint_and_bytes, 6)
{
    static const int Ns[] = { 1, 2, 4 };
    const int N = Ns[_i % 3];
    static exchange_arg a;
    memset(&a, 0, sizeof a);
    a.E = _i < 3 ? 4 : 8;
    ptdp_counters_init(&a.counters);
    ck_assert_int_eq(ptdp_ep_publish(&a.counters), PTDP_OK);
    ck_assert_int_eq(a.counters.len[PTDP_COUNT_DEVICE], 2);   /* ep_bytes, expert_elements */
    harness_launch_ok(N, exchange_device, &a, NULL, NULL);
    double dd = 0, dc = 0;
    for (int r = 0; r < N; r++) {
        dd += a.dot_dispatch[r];
        dc += a.dot_combine[r];
    }
    ck_assert_msg(dd == dc, "N %d E %d: <dispatch x, y> = %g, <x, combine y> = %g", N, a.E, dd, dc);
    ck_assert_msg(dd != 0, "N %d E %d: an adjoint test of zero products cannot fail", N, a.E);
}
END_TEST

/* ====================================================== uniform routing */

enum { K = 2, PER_EXPERT = 3 };

static int uniform_device(ptdp_device *dev, void *arg)
{
    const int E = *(const int *)arg, N = dev->world_size;
    int load[MAX_E];
    ptdp_real x[MAX_ROWS * COLS], out[MAX_ROWS * COLS];
    for (int e = 0; e < E; e++)
        load[e] = PER_EXPERT;
    for (int i = 0; i < E * PER_EXPERT * COLS; i++)
        x[i] = (ptdp_real)i;
    ptdp_ep_plan p;
    DEVICE_TRY(ptdp_ep_plan_init(dev, dev->world, E, load, &p));
    const long T_r = E * PER_EXPERT / K;   /* tokens whose k choices make the load */
    const double want = ptdp_ep_uniform_bytes(K, T_r, COLS, N, sizeof(ptdp_real));
    double s0 = dev->stats.bytes_sent[PTDP_COLL_ALL_TO_ALLV];
    DEVICE_TRY(ptdp_ep_dispatch(dev, dev->world, &p, x, COLS, out));
    double s1 = dev->stats.bytes_sent[PTDP_COLL_ALL_TO_ALLV];
    DEVICE_TRY(ptdp_ep_combine(dev, dev->world, &p, out, COLS, x));
    double s2 = dev->stats.bytes_sent[PTDP_COLL_ALL_TO_ALLV];
    DEVICE_CHECK(dev, s1 - s0 == want && s2 - s1 == want, "N %d: dispatch %g, combine %g bytes, k T_r C (N-1)/N = %g",
                 N, s1 - s0, s2 - s1, want);
    ptdp_ep_plan_free(&p);
    return 0;
}

/* _i: N = 2, 4; E = 8 */
LOOP_TEST(ep_tests, test_uniform_routing_sends_the_estimate, 2)
{
    int E = 8;
    harness_launch_ok(2 << _i, uniform_device, &E, NULL, NULL);
}
END_TEST

TEST(ep_tests, test_uniform_bytes_formula)
{
    ck_assert(ptdp_ep_uniform_bytes(2, 16, 8, 4, 8) == 2.0 * 16 * 8 * 3 / 4 * 8);
    ck_assert(ptdp_ep_uniform_bytes(2, 16, 8, 1, 8) == 0);
    ck_assert(ptdp_ep_uniform_bytes(1, 10, 4, 2, 4) == 80);
}
END_TEST

/* ====================================================== refused */

static int bad_experts(ptdp_device *dev, void *arg)
{
    (void)arg;
    const int load[3] = { 1, 1, 1 };
    ptdp_ep_plan p;
    return ptdp_ep_plan_init(dev, dev->world, 3, load, &p);
}

static int bad_load(ptdp_device *dev, void *arg)
{
    (void)arg;
    const int load[4] = { 1, dev->rank == 1 ? -2 : 0, 1, 1 };
    ptdp_ep_plan p;
    int rc = ptdp_ep_plan_init(dev, dev->world, 4, load, &p);
    ptdp_ep_plan_free(&p);
    return rc;
}

static int bad_cols(ptdp_device *dev, void *arg)
{
    (void)arg;
    const int load[2] = { 0, 0 };
    ptdp_real x[1], out[1];
    ptdp_ep_plan p;
    DEVICE_TRY(ptdp_ep_plan_init(dev, dev->world, 2, load, &p));
    int rc = ptdp_ep_dispatch(dev, dev->world, &p, x, -1, out);
    ptdp_ep_plan_free(&p);
    return rc;
}

TEST(ep_tests, test_bad_inputs_are_refused)
{
    HARNESS_LAUNCH_FAILS(2, bad_experts, NULL, PTDP_EINVAL, "ptdp_ep_plan_init", "3 experts", "2 ranks");
    HARNESS_LAUNCH_FAILS(2, bad_load, NULL, PTDP_EINVAL, "ptdp_ep_plan_init", "load[1] = -2");
    HARNESS_LAUNCH_FAILS(2, bad_cols, NULL, PTDP_EINVAL, "ptdp_ep_dispatch", "-1 columns");
}
END_TEST

int main(void)
{
    return harness_main("ep");
}
