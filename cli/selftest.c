/*
 * selftest.c — `ptdp selftest`: do the collectives give the right answer
 * here, on this machine, with N devices?
 *
 * Every check runs one collective on N devices and compares each device's
 * result with a sequential reference that the device computes alone:
 *
 *     inputs      x_r[i] = ((31 r + 17 i) mod 13) - 6     (rank r, element i)
 *     all_reduce  sum_r x_r[i]  (or max)    every device, every element
 *     reduce_scatter  the same, only rank r's chunk
 *     all_gather  x_owner(i)[i]             owner(i): whose chunk holds i
 *     broadcast   x_root[i]
 *     send/recv   x_{r-1}[i]                around a ring
 *
 * The inputs are small integers, so every summation order gives exactly the
 * same float: a single wrong bit is a failure, and equality with the
 * reference also proves every device holds bit-identical values.  Counts
 * include 0, 1, a prime, and one not divisible by the group size.  Byte
 * accounting is checked against the textbook figures of comm.h.
 *
 * Each check is its own ptdp_launch, so one failure (or hang, ended by the
 * watchdog) is reported and the rest still run.  Exit status 0 if all pass.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "ptdp/clock.h"
#include "ptdp/comm.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/tensor.h"
#include "ptdp/launch.h"

static const size_t counts[] = { 0, 1, 7, 1000, 65539 };
#define NCOUNTS (sizeof counts / sizeof counts[0])

typedef enum {
    CHECK_ALL_REDUCE,          /* sum, out of place, with check->algo    */
    CHECK_ALL_REDUCE_MAX,      /* max, in place (send == recv)           */
    CHECK_REDUCE_SCATTER,
    CHECK_ALL_GATHER,
    CHECK_BROADCAST,
    CHECK_SEND_RECV
} check_kind;

typedef struct {
    const char *title;
    check_kind kind;
    ptdp_algo algo;
} selftest_check;

static const selftest_check checks[] = {
    { "all_reduce naive   sum, out of place",    CHECK_ALL_REDUCE,     PTDP_ALGO_NAIVE   },
    { "all_reduce ring    sum, out of place",    CHECK_ALL_REDUCE,     PTDP_ALGO_RING    },
    { "all_reduce shm     sum, out of place",    CHECK_ALL_REDUCE,     PTDP_ALGO_SHM     },
    { "all_reduce default max, in place",        CHECK_ALL_REDUCE_MAX, PTDP_ALGO_DEFAULT },
    { "reduce_scatter     sum, out of place",    CHECK_REDUCE_SCATTER, PTDP_ALGO_DEFAULT },
    { "all_gather         out of place",         CHECK_ALL_GATHER,     PTDP_ALGO_DEFAULT },
    { "broadcast          from the last rank",   CHECK_BROADCAST,      PTDP_ALGO_DEFAULT },
    { "send/recv          around a ring",        CHECK_SEND_RECV,      PTDP_ALGO_DEFAULT },
};
#define NCHECKS (int)(sizeof checks / sizeof checks[0])

static ptdp_real input(int rank, size_t i)
{
    return (ptdp_real)((int)((31u * (unsigned)rank + 17u * (unsigned)(i % 13)) % 13u) - 6);
}

/* The sequential reference for element i (global index) of the result. */
static ptdp_real reference(check_kind kind, int n, int rank, size_t count, size_t i)
{
    ptdp_real acc;
    switch (kind) {
    case CHECK_ALL_REDUCE:
    case CHECK_REDUCE_SCATTER:
        acc = 0;
        for (int r = 0; r < n; r++)
            acc += input(r, i);
        return acc;
    case CHECK_ALL_REDUCE_MAX:
        acc = input(0, i);
        for (int r = 1; r < n; r++)
            if (input(r, i) > acc)
                acc = input(r, i);
        return acc;
    case CHECK_ALL_GATHER:
        for (int r = 0; r < n; r++) {
            size_t off, len;
            ptdp_share(count, n, r, &off, &len);
            if (i < off + len)
                return input(r, i);
        }
        return 0;
    case CHECK_BROADCAST:
        return input(n - 1, i);
    default:
        return input((rank + n - 1) % n, i);
    }
}

/* Run the check's operation once on `count` elements.  send holds this
 * rank's inputs laid out by global index; recv gets the result. */
static int run_once(ptdp_device *dev, const selftest_check *ck, size_t count,
                    ptdp_real *send, ptdp_real *recv)
{
    ptdp_comm *c = dev->world;
    int n = dev->world_size, rank = dev->rank;
    size_t off, len;
    ptdp_share(count, n, rank, &off, &len);
    switch (ck->kind) {
    case CHECK_ALL_REDUCE:
        return ptdp_all_reduce_algo(c, send, recv, count, PTDP_REAL, PTDP_SUM, ck->algo);
    case CHECK_ALL_REDUCE_MAX:
        memcpy(recv, send, count * sizeof(ptdp_real));
        return ptdp_all_reduce(c, recv, recv, count, PTDP_REAL, PTDP_MAX);
    case CHECK_REDUCE_SCATTER:
        return ptdp_reduce_scatter(c, send, recv, count, PTDP_REAL, PTDP_SUM);
    case CHECK_ALL_GATHER:
        return ptdp_all_gather(c, send + off, recv, count, PTDP_REAL);
    case CHECK_BROADCAST:
        memcpy(recv, send, count * sizeof(ptdp_real));
        return ptdp_broadcast(c, recv, count, PTDP_REAL, n - 1);
    default: {
        /* Rendezvous sends: if every device sent first, all would wait for
         * a receiver forever.  Even ranks send first, odd ranks receive
         * first, so no cycle of waiting sends can form. */
        int next = (rank + 1) % n, prev = (rank + n - 1) % n;
        int rc;
        if (rank % 2 == 0) {
            rc = ptdp_send(c, send, count, PTDP_REAL, next, 7);
            if (rc == 0)
                rc = ptdp_recv(c, recv, count, PTDP_REAL, prev, 7);
        } else {
            rc = ptdp_recv(c, recv, count, PTDP_REAL, prev, 7);
            if (rc == 0)
                rc = ptdp_send(c, send, count, PTDP_REAL, next, 7);
        }
        return rc;
    }
    }
}

/* The bytes this device must send for one call (comm.h), or -1 if the
 * contract does not fix it (naive all_reduce, broadcast trees). */
static double textbook_bytes_sent(const selftest_check *ck, int n, size_t count)
{
    double S = (double)count * sizeof(ptdp_real);
    switch (ck->kind) {
    case CHECK_ALL_REDUCE:
        return ck->algo == PTDP_ALGO_NAIVE ? -1.0 : 2.0 * (n - 1) / n * S;
    case CHECK_REDUCE_SCATTER:
    case CHECK_ALL_GATHER:
        return (double)(n - 1) / n * S;
    case CHECK_SEND_RECV:
        return S;
    default:
        return -1.0;
    }
}

static ptdp_coll accounted_as(check_kind kind)
{
    switch (kind) {
    case CHECK_ALL_REDUCE:
    case CHECK_ALL_REDUCE_MAX: return PTDP_COLL_ALL_REDUCE;
    case CHECK_REDUCE_SCATTER: return PTDP_COLL_REDUCE_SCATTER;
    case CHECK_ALL_GATHER:     return PTDP_COLL_ALL_GATHER;
    case CHECK_BROADCAST:      return PTDP_COLL_BROADCAST;
    default:                   return PTDP_COLL_SEND;
    }
}

static int selftest_device(ptdp_device *dev, void *arg)
{
    const selftest_check *ck = arg;
    int n = dev->world_size, rank = dev->rank;
    size_t max = counts[NCOUNTS - 1];
    ptdp_real *send = ptdp_alloc(dev, max * sizeof(ptdp_real), PTDP_MEM_COMM, "selftest.send");
    ptdp_real *recv = ptdp_alloc(dev, max * sizeof(ptdp_real), PTDP_MEM_COMM, "selftest.recv");
    if (!send || !recv)
        return dev->status ? dev->status : PTDP_ENOMEM;

    int rc = 0;
    for (size_t k = 0; k < NCOUNTS && rc == 0; k++) {
        size_t count = counts[k];
        for (size_t i = 0; i < count; i++) {
            send[i] = input(rank, i);
            recv[i] = (ptdp_real)NAN;          /* any element left unwritten fails */
        }
        double sent_before = dev->stats.bytes_sent[accounted_as(ck->kind)];
        if ((rc = run_once(dev, ck, count, send, recv)) != 0)
            break;
        double sent = dev->stats.bytes_sent[accounted_as(ck->kind)] - sent_before;

        size_t off = 0, len = count;
        if (ck->kind == CHECK_REDUCE_SCATTER)
            ptdp_share(count, n, rank, &off, &len);
        for (size_t j = 0; j < len; j++) {
            ptdp_real want = reference(ck->kind, n, rank, count, off + j);
            if (!(recv[j] == want)) {
                rc = ptdp_fail(dev, PTDP_ECHECK,
                               "count %zu: device %d holds %g at element %zu, reference %g",
                               count, rank, (double)recv[j], off + j, (double)want);
                break;
            }
        }
        /* Bytes: exact when count divides evenly, else within a chunk's
         * rounding (one element per step). */
        double want_sent = textbook_bytes_sent(ck, n, count);
        double slack = count % (size_t)n ? 2.0 * n * sizeof(ptdp_real) : 0.0;
        if (rc == 0 && want_sent >= 0 && fabs(sent - want_sent) > slack)
            rc = ptdp_fail(dev, PTDP_ECHECK,
                           "count %zu: device %d counted %.0f bytes sent, textbook %.0f",
                           count, rank, sent, want_sent);
    }
    ptdp_free(dev, recv);
    ptdp_free(dev, send);
    return rc;
}

static void selftest_usage(void)
{
    printf("usage: ptdp selftest [--devices N] [--watchdog S]\n"
           "\n"
           "Check every collective (all_reduce with each algorithm, reduce_scatter,\n"
           "all_gather, broadcast, send/recv) on N devices against a sequential\n"
           "reference, for element counts 0, 1, 7, 1000 and 65539.\n"
           "\n"
           "  --devices N    devices (threads), 1-%d (default 4)\n"
           "  --watchdog S   fail a check whose collective waits longer than S seconds\n"
           "                 (default 20)\n"
           "\n"
           "Exit status 0 if every check passes, 1 otherwise.\n",
           PTDP_MAX_DEVICES);
}

typedef struct {
    int devices;
    double watchdog_s;
} selftest_options;

/* Each flag as typed: 0, -1 after --help, or PTDP_EXIT_USAGE.  The two
 * flags do not depend on each other, so there is no validate step. */
static int parse(int argc, char **argv, selftest_options *o)
{
    o->devices = 4;
    o->watchdog_s = 20.0;
    ptdp_args a;
    ptdp_args_init(&a, "selftest", argc, argv, 1);
    while (ptdp_args_next(&a)) {
        int rc;
        if (ptdp_args_is(&a, "--help")) {
            selftest_usage();
            return -1;
        } else if (ptdp_args_is(&a, "--devices")) {
            rc = ptdp_args_int(&a, 1, PTDP_MAX_DEVICES, &o->devices);
        } else if (ptdp_args_is(&a, "--watchdog")) {
            rc = ptdp_args_double(&a, 0.1, 86400, &o->watchdog_s);
        } else {
            rc = ptdp_args_unknown(&a);
        }
        if (rc)
            return PTDP_EXIT_USAGE;
    }
    return 0;
}

/* One check on its own launch: prints PASS or FAIL, returns true if passed. */
static bool run_check(const selftest_check *ck, const selftest_options *o)
{
    ptdp_launch_result result;
    memset(&result, 0, sizeof result);
    ptdp_launch_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.device_mem = (size_t)8 << 20;
    opts.watchdog_s = o->watchdog_s;
    opts.algo = ck->algo;
    opts.result = &result;

    double t0 = ptdp_wall_now();
    int rc = ptdp_launch(o->devices, selftest_device, (void *)ck, &opts);
    double dt = ptdp_wall_now() - t0;
    if (rc == 0)
        printf("PASS  %-40s %6.3f s\n", ck->title, dt);
    else
        printf("FAIL  %-40s device %d: %s\n", ck->title, result.failed_rank, result.message);
    fflush(stdout);
    ptdp_launch_result_free(&result);
    return rc == 0;
}

static int run(const selftest_options *o)
{
    int devices = o->devices;
    printf("ptdp selftest: %d device%s, elements %s, counts 0, 1, 7, 1000, 65539\n",
           devices, devices > 1 ? "s" : "", PTDP_REAL_NAME);
    int passed = 0, failed = 0, skipped = 0;
    for (int k = 0; k < NCHECKS; k++) {
        const selftest_check *ck = &checks[k];
        if (ck->kind == CHECK_SEND_RECV && devices == 1) {
            /* a rendezvous send to oneself can never complete */
            printf("SKIP  %-40s (needs 2 devices)\n", ck->title);
            skipped++;
        } else if (run_check(ck, o)) {
            passed++;
        } else {
            failed++;
        }
    }
    printf("selftest: %d passed, %d failed", passed, failed);
    if (skipped)
        printf(", %d skipped", skipped);
    printf(" (%d device%s)\n", devices, devices > 1 ? "s" : "");
    return failed ? PTDP_EXIT_FAIL : PTDP_EXIT_OK;
}

int ptdp_cmd_selftest(int argc, char **argv)
{
    selftest_options o;
    int rc = parse(argc, argv, &o);
    if (rc != 0)
        return rc < 0 ? PTDP_EXIT_OK : rc;
    return run(&o);
}
