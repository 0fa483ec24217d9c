/*
 * processes.c — lesson 01's ring all-reduce, unchanged, on processes.
 *
 * Lesson 01's lesson_ring_all_reduce only calls ptdp_send and ptdp_recv on
 * a communicator.  It never asks whether its neighbours are threads of the
 * same process or processes of their own, so the same object file runs on
 * both backends:
 *
 *   mpirun -n 4 tutorial-11-processes
 *
 *     1. every process is one device (--backend mpi): the ring over MPI
 *        messages, each rank keeping its result in its own memory
 *     2. rank 0 alone then runs the same function on 4 device threads
 *        (the threads backend)
 *     3. rank 0 compares: the same bits in every element, and the same
 *        virtual time — the clock comes with each message (the sender's
 *        time travels in the message's header), not from shared memory
 *
 *   process 0 ──msg──► process 1 ──msg──► process 2 ──msg──► process 3 ─┐
 *       ▲                                                                 │
 *       └──────────────────────────────msg───────────────────────────────┘
 *
 * The check links lesson 01's solution.c (or, with -Dexercises=student,
 * your exercise.c).  Exit 0 when both backends agree, 1 otherwise.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../01-collectives/lesson.h"
#include "ptdp/error.h"
#include "ptdp/launch.h"
#include "ptdp/mpi.h"

#define COUNT 4099            /* not a multiple of the ring: uneven chunks */

/* Lesson 01's check watches every message; here they go straight through. */
int lesson_send_at(ptdp_comm *comm, const void *buf, size_t count, ptdp_dtype t,
                   int dst, int tag, const char *file, int line)
{
    return ptdp_send_at(comm, buf, count, t, dst, tag, file, line);
}

int lesson_recv_at(ptdp_comm *comm, void *buf, size_t count, ptdp_dtype t,
                   int src, int tag, const char *file, int line)
{
    return ptdp_recv_at(comm, buf, count, t, src, tag, file, line);
}

/* What device 0 ends with, in the host memory of its process. */
typedef struct {
    ptdp_real sum[COUNT];
    double virtual_s;
} outcome;

static int ring(ptdp_device *dev, void *arg)
{
    outcome *out = arg;
    ptdp_real *buf = ptdp_alloc(dev, COUNT * sizeof *buf, PTDP_MEM_COMM, "buf");
    if (buf == NULL)
        return PTDP_ENOMEM;
    for (int i = 0; i < COUNT; i++)    /* sums whose last bits depend on the order */
        buf[i] = (ptdp_real)sin(1.0 + dev->rank * 7919.0 + i);
    int rc = lesson_ring_all_reduce(dev, dev->world, buf, COUNT);
    if (rc == 0 && dev->rank == 0) {
        memcpy(out->sum, buf, sizeof out->sum);
        out->virtual_s = dev->clock.now;
    }
    ptdp_free(dev, buf);
    return rc;
}

int main(void)
{
    int rank, size;
    char msg[PTDP_MSG_MAX];
    ptdp_mpi_quiet();
    if (ptdp_mpi_start(&rank, &size, msg, sizeof msg) != 0) {
        fprintf(stderr, "tutorial-11: %s\n", msg);
        return 1;
    }
    static outcome procs, threads;
    ptdp_launch_result res;
    ptdp_launch_opts o = { .backend = PTDP_BACKEND_MPI, .watchdog_s = 5, .result = &res };
    int rc = ptdp_launch(size, ring, &procs, &o);
    ptdp_launch_result_free(&res);
    if (rc == 0 && rank == 0) {
        o.backend = PTDP_BACKEND_THREADS;
        rc = ptdp_launch(size, ring, &threads, &o);
        if (rc != 0)
            fprintf(stderr, "tutorial-11: the threads run failed: %s\n", res.message);
        ptdp_launch_result_free(&res);
    }
    int status = 0;
    if (rc == 0 && rank == 0) {
        int differ = 0;
        for (int i = 0; i < COUNT; i++)
            differ += memcmp(&procs.sum[i], &threads.sum[i], sizeof procs.sum[i]) != 0;
        if (differ == 0 && procs.virtual_s == threads.virtual_s) {
            printf("ok    lesson 01's ring all-reduce on %d processes: the threads' bits in all %d elements, "
                   "virtual time %.3f us on both backends\n", size, COUNT, procs.virtual_s * 1e6);
        } else {
            printf("WRONG %d of %d elements differ between processes and threads; virtual time %.3f us "
                   "(processes) vs %.3f us (threads)\n", differ, COUNT, procs.virtual_s * 1e6,
                   threads.virtual_s * 1e6);
            status = 1;
        }
    }
    ptdp_mpi_finish();
    return rc != 0 ? 1 : status;
}
