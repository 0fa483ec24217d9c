/*
 * faults.c — what goes wrong between processes, on purpose (the MPI suite's
 * faults.sh runs it under mpirun).
 *
 *   faults deadlock    every rank receives first from its right neighbour:
 *                      a cycle of receives no send will ever match
 *
 *        rank 0 ──recv from 1──► rank 1 ──recv from 2──► … ──recv from 0──► rank 0
 *
 *                      The watchdog (1 s here) must end the job with the
 *                      threads backend's report: who waits for whom.
 *   faults fail        rank 1 fails while rank 0 waits for its message: the
 *                      job must end (MPI_Abort) with rank 1's message, not hang.
 *   faults mismatch    rank 1 all-reduces 5 elements where the others give 4:
 *                      every rank's call (operation, count, file:line) is
 *                      reported, as with threads, and the job ends.
 *   faults ring        the ring all-reduce of lesson 01 over processes: every
 *                      rank ends with 0 + 1 + … + (N-1) in every element, the
 *                      same bits as threads.
 *   faults alltoallv   uneven counts, zeros among them, learnt by
 *                      ptdp_all_to_all_counts: every block arrives where the
 *                      receiver's displacements put it.
 *   faults vmismatch   rank 1 sends rank 2 one element more than rank 2
 *                      expects: both call sites are reported.
 *   faults ep          expert parallelism's exchanges (ep.h), 8 experts,
 *                      uneven loads, zeros and a rank that sends nothing:
 *                      the dispatch puts every row in local expert order,
 *                      the combine brings it home, each sending its rows
 *                      for other ranks' experts.
 */
#include <stdio.h>
#include <string.h>

#include "ptdp/comm.h"
#include "ptdp/ep.h"
#include "ptdp/error.h"
#include "ptdp/launch.h"
#include "ptdp/mpi.h"

static int deadlock(ptdp_device *dev, void *arg)
{
    (void)arg;
    double x = 0;
    int right = (dev->rank + 1) % dev->world_size;
    int rc = ptdp_recv(dev->world, &x, 1, PTDP_F64, right, 0);
    if (rc == 0)
        rc = ptdp_send(dev->world, &x, 1, PTDP_F64, right, 0);
    return rc;
}

static int fail(ptdp_device *dev, void *arg)
{
    (void)arg;
    double x = 0;
    if (dev->rank == 1)
        return ptdp_fail(dev, PTDP_EUSER, "rank 1 gives up before its send");
    if (dev->rank == 0)
        return ptdp_recv(dev->world, &x, 1, PTDP_F64, 1, 0);
    return 0;
}

static int mismatch(ptdp_device *dev, void *arg)
{
    (void)arg;
    double x[5] = { 0 };
    return ptdp_all_reduce(dev->world, x, x, dev->rank == 1 ? 5 : 4, PTDP_F64, PTDP_SUM);
}

static int ring(ptdp_device *dev, void *arg)
{
    (void)arg;
    double x[1000];
    for (int i = 0; i < 1000; i++)
        x[i] = dev->rank;
    int rc = ptdp_all_reduce_algo(dev->world, x, x, 1000, PTDP_F64, PTDP_SUM, PTDP_ALGO_RING);
    double want = dev->world_size * (dev->world_size - 1) / 2.0;
    for (int i = 0; rc == 0 && i < 1000; i++)
        if (x[i] != want)
            return ptdp_fail(dev, PTDP_ECHECK, "rank %d: x[%d] = %g, expected %g", dev->rank, i, x[i], want);
    return rc;
}

/* Rank i sends rank j (i + 2j) mod 4 elements, each 100 i + j. */
static int alltoallv(ptdp_device *dev, void *arg)
{
    (void)arg;
    const int n = dev->world_size, me = dev->rank;
    size_t sc[PTDP_MAX_DEVICES] = { 0 }, rcn[PTDP_MAX_DEVICES] = { 0 };
    double send[4 * PTDP_MAX_DEVICES] = { 0 }, recv[4 * PTDP_MAX_DEVICES] = { 0 };
    size_t at = 0;
    for (int j = 0; j < n; j++) {
        sc[j] = (size_t)((me + 2 * j) % 4);
        for (size_t e = 0; e < sc[j]; e++)
            send[at++] = 100.0 * me + j;
    }
    int rc = ptdp_all_to_all_counts(dev->world, sc, rcn);
    if (rc == 0)
        rc = ptdp_all_to_allv(dev->world, send, sc, NULL, recv, rcn, NULL, PTDP_F64);
    at = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        if (rcn[i] != (size_t)((i + 2 * me) % 4))
            return ptdp_fail(dev, PTDP_ECHECK, "rank %d: %zu counts from rank %d", me, rcn[i], i);
        for (size_t e = 0; e < rcn[i]; e++, at++)
            if (recv[at] != 100.0 * i + me)
                return ptdp_fail(dev, PTDP_ECHECK, "rank %d: element %zu from rank %d = %g", me, e, i, recv[at]);
    }
    return rc;
}

static int vmismatch(ptdp_device *dev, void *arg)
{
    (void)arg;
    size_t sc[3] = { 1, 1, dev->rank == 1 ? 2 : 1 }, rcn[3] = { 1, 1, 1 };
    double send[4] = { 0 }, recv[4] = { 0 };
    return ptdp_all_to_allv(dev->world, send, sc, NULL, recv, rcn, NULL, PTDP_F64);
}

/* Rank s sends expert e ep_load(s, e) rows (rank 2 none); row j of them
 * is ep_code(s, e, j) in each of its 2 columns. */
static int ep_load(int s, int e)
{
    return s == 2 ? 0 : (s + 2 * e + e / 4) % 4;
}

static double ep_code(int s, int e, int j)
{
    return 1000.0 * s + 10.0 * e + j;
}

static int ep(ptdp_device *dev, void *arg)
{
    (void)arg;
    enum { E = 8, COLS = 2, ROWS = 64 };
    const int me = dev->rank;
    int load[E];
    double x[ROWS * COLS], y[ROWS * COLS], back[ROWS * COLS];
    size_t at = 0;
    for (int e = 0; e < E; e++) {
        load[e] = ep_load(me, e);
        for (int j = 0; j < load[e]; j++, at += COLS)
            x[at] = x[at + 1] = ep_code(me, e, j);
    }
    ptdp_ep_plan p;
    int rc = ptdp_ep_plan_init(dev, dev->world, E, load, &p);
    if (rc != 0)
        return rc;
    const double s0 = dev->stats.bytes_sent[PTDP_COLL_ALL_TO_ALLV];
    rc = ptdp_ep_dispatch(dev, dev->world, &p, x, COLS, y);
    const double sent = dev->stats.bytes_sent[PTDP_COLL_ALL_TO_ALLV] - s0;
    if (rc == 0)
        rc = ptdp_ep_combine(dev, dev->world, &p, y, COLS, back);
    at = 0;
    for (int l = 0; rc == 0 && l < p.local; l++)
        for (int s = 0; s < p.N; s++)
            for (int j = 0; j < ep_load(s, me * p.local + l); j++, at += COLS)
                if (y[at] != ep_code(s, me * p.local + l, j) || y[at + 1] != y[at])
                    rc = ptdp_fail(dev, PTDP_ECHECK, "rank %d: dispatched row %zu = %g", me, at / COLS, y[at]);
    if (rc == 0 && memcmp(back, x, p.sent * COLS * sizeof *x) != 0)
        rc = ptdp_fail(dev, PTDP_ECHECK, "rank %d: combine(dispatch(x)) is not x", me);
    if (rc == 0 && sent != (double)ptdp_ep_rows_dispatched_away(&p) * COLS * sizeof(double))
        rc = ptdp_fail(dev, PTDP_ECHECK, "rank %d: the dispatch sent %g bytes", me, sent);
    ptdp_ep_plan_free(&p);
    return rc;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    ptdp_device_fn fn = strcmp(mode, "deadlock") == 0 ? deadlock : strcmp(mode, "fail") == 0 ? fail
                      : strcmp(mode, "mismatch") == 0 ? mismatch : strcmp(mode, "ring") == 0 ? ring
                      : strcmp(mode, "alltoallv") == 0 ? alltoallv : strcmp(mode, "vmismatch") == 0 ? vmismatch
                      : strcmp(mode, "ep") == 0 ? ep : NULL;
    if (fn == NULL) {
        fprintf(stderr, "usage: faults deadlock|fail|mismatch|ring|alltoallv|vmismatch|ep (under mpirun)\n");
        return 2;
    }
    int rank, size;
    char msg[512];
    if (ptdp_mpi_start(&rank, &size, msg, sizeof msg) != 0) {
        fprintf(stderr, "faults: %s\n", msg);
        return 2;
    }
    ptdp_launch_result res;
    ptdp_launch_opts o = { .backend = PTDP_BACKEND_MPI, .watchdog_s = 1.0, .result = &res };
    int rc = ptdp_launch(size, fn, NULL, &o);
    if (rc == 0 && rank == 0)
        printf("faults %s: %d processes, no failure\n", mode, size);
    else if (rc != 0)
        fprintf(stderr, "faults %s: %s\n", mode, res.message);
    ptdp_launch_result_free(&res);
    ptdp_mpi_finish();
    return rc == 0 ? 0 : 1;
}
