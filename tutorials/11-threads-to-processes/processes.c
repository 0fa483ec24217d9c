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
 *   and on both backends every device checks its own result against the
 *   true sum of the ranks' values (1e-10): two runs of one wrong function
 *   agree with each other, not with the sum.  If lesson 01 still has an
 *   empty blank, the check names it, as lesson 01's own check does.
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
#include "ptdp/comm.h"
#include "ptdp/error.h"
#include "ptdp/launch.h"
#include "ptdp/mpi.h"

/* The build this check belongs to (meson.build passes it): where lesson
 * 01's own check runs on the same lesson 01 file — a student's
 * build-student, not the reference build. */
#ifndef TUTORIAL11_BUILD_DIR
#define TUTORIAL11_BUILD_DIR "build"
#endif
#include "tutorial.h"

#define COUNT 4099            /* not a multiple of the ring: uneven segments */

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

/* What device 0 ends with, in the host memory of its process, and what
 * every device found against the true sum. */
typedef struct {
    ptdp_real sum[COUNT];
    double virtual_s;
    ptdp_real wrong[PTDP_MAX_DEVICES];  /* elements off the true sum, per rank (summed over the world) */
    long first[PTDP_MAX_DEVICES];       /* rank r's first such element, or -1 (rank r's process only) */
    double got[PTDP_MAX_DEVICES], want[PTDP_MAX_DEVICES];
    bool blank;                         /* lesson 01 has a blank still empty */
} outcome;

/* Rank r's value at element i: sums whose last bits depend on the order. */
static double value(int r, int i) { return sin(1.0 + r * 7919.0 + i); }

/* My result against the true sum; then every rank's count of wrong
 * elements to every rank (through the library's all-reduce, after the
 * clock was read). */
static int judge(ptdp_device *dev, outcome *out, const ptdp_real *buf)
{
    ptdp_real wrong[PTDP_MAX_DEVICES] = { 0 };
    out->first[dev->rank] = -1;
    for (int i = 0; i < COUNT; i++) {
        double want = 0;
        for (int r = 0; r < dev->world_size; r++)
            want += (ptdp_real)value(r, i);
        if (!(fabs(buf[i] - want) <= 1e-10 * fmax(1.0, fabs(want)))) {
            if (wrong[dev->rank]++ == 0) {
                out->first[dev->rank] = i;
                out->got[dev->rank] = buf[i];
                out->want[dev->rank] = want;
            }
        }
    }
    ptdp_real all[PTDP_MAX_DEVICES];
    int rc = ptdp_all_reduce(dev->world, wrong, all, PTDP_MAX_DEVICES, PTDP_REAL, PTDP_SUM);
    if (rc == 0 && dev->rank == 0)
        memcpy(out->wrong, all, sizeof all);
    return rc;
}

static int ring(ptdp_device *dev, void *arg)
{
    outcome *out = arg;
    ptdp_real *buf = ptdp_alloc(dev, COUNT * sizeof *buf, PTDP_MEM_COMM, "buf");
    if (buf == NULL)
        return PTDP_ENOMEM;
    for (int i = 0; i < COUNT; i++)
        buf[i] = (ptdp_real)value(dev->rank, i);
    int rc = lesson_ring_all_reduce(dev, dev->world, buf, COUNT);
    if (rc == PTDP_EUSER) {
        /* A blank (blank.h): every rank reaches the same one before its
         * partner waits for it, so the run ends here, without an abort. */
        out->blank = true;
        rc = 0;
    } else if (rc == 0) {
        if (dev->rank == 0) {
            memcpy(out->sum, buf, sizeof out->sum);
            out->virtual_s = dev->clock.now;
        }
        rc = judge(dev, out, buf);
    }
    ptdp_free(dev, buf);
    return rc;
}

/* "1 process", "4 processes" */
static const char *plural(int n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

/* The true sum: 0 if every rank of `what` holds it. */
static int against_truth(const outcome *o, int size, const char *what)
{
    int bad = 0;
    for (int r = 0; r < size; r++)
        bad += o->wrong[r] != 0;
    if (bad == 0)
        return 0;
    printf("WRONG lesson 01's ring all-reduce on %d %s: %d of %d %s not hold the sum of the ranks' "
           "values", size, what, bad, size, plural(size, "rank does", "ranks do"));
    if (o->first[0] >= 0)
        printf(" (rank 0: %.0f of %d elements, first element %ld: %.10g, the sum is %.10g)", (double)o->wrong[0],
               COUNT, o->first[0], o->got[0], o->want[0]);
    printf(".\n      Both backends run the same function, so they agree with each other even when it is "
           "wrong:\n      lesson 01's check says where (meson test -C %s --suite tutorial-01 -v).\n",
           TUTORIAL11_BUILD_DIR);
    return 1;
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
    if (rc == 0 && procs.blank) {
        if (rank == 0 && tutorial_report_blank())
            printf("lesson 11: lesson 01 is not finished yet \xe2\x80\x94 fill the blank named above, pass "
                   "lesson 01's check, then run this one again.\n");
        ptdp_mpi_finish();
        return 1;
    }
    if (rc == 0 && rank == 0) {
        o.backend = PTDP_BACKEND_THREADS;
        rc = ptdp_launch(size, ring, &threads, &o);
        if (rc != 0)
            fprintf(stderr, "tutorial-11: the threads run failed: %s\n", res.message);
        ptdp_launch_result_free(&res);
    }
    int status = 0;
    if (rc == 0 && rank == 0)
        status = against_truth(&procs, size, plural(size, "process", "processes")) ||
                 against_truth(&threads, size, plural(size, "thread", "threads"));
    if (rc == 0 && rank == 0 && status == 0) {
        int differ = 0;
        for (int i = 0; i < COUNT; i++)
            differ += memcmp(&procs.sum[i], &threads.sum[i], sizeof procs.sum[i]) != 0;
        if (differ == 0 && procs.virtual_s == threads.virtual_s) {
            printf("ok    lesson 01's ring all-reduce on %d %s: the true sum, and the threads' bits in all %d "
                   "elements, virtual time %.3f us on both backends\n", size, plural(size, "process", "processes"),
                   COUNT, procs.virtual_s * 1e6);
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
