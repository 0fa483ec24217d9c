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
 */
#include <stdio.h>
#include <string.h>

#include "ptdp/comm.h"
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

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    ptdp_device_fn fn = strcmp(mode, "deadlock") == 0 ? deadlock : strcmp(mode, "fail") == 0 ? fail
                      : strcmp(mode, "mismatch") == 0 ? mismatch : strcmp(mode, "ring") == 0 ? ring : NULL;
    if (fn == NULL) {
        fprintf(stderr, "usage: faults deadlock|fail|mismatch|ring (under mpirun)\n");
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
