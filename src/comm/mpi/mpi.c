/*
 * mpi.c — the process-level side of the MPI backend (mpi.h), and the
 * launcher's processes backend (comm/launch_impl.h): what a process owns
 * under mpirun, and how its device is started.
 *
 * The threads' backend (comm/launch.c) owns N devices and starts N threads.
 * Here mpirun has made the N processes; each owns one device, and the
 * launch's shared set-up (launch.c) does the rest, as for threads:
 *
 *   ptdp_mpi_start      MPI_Init; rank and size; ranks > 0 fall silent
 *   ptdp_launch(N, fn)  (backend MPI), what this file adds to launch.c:
 *     ├─ open           mpirun's world size is the run's N; I own device
 *     │                 rank; the host's communicators
 *     ├─ world_comm     over a copy of MPI_COMM_WORLD
 *     ├─ run            fn(dev, arg) in this thread; then wait until every
 *     │                 rank has returned (mpi_wait.c)
 *     ├─ merge          every rank's memory, bytes and clocks, all-gathered,
 *     │                 so rank 0 reports the whole world; every rank's
 *     │                 trace events to rank 0, which writes the file
 *     └─ close          the host's communicators
 *
 * Failure.  Threads raise a flag every device sees.  A process cannot
 * reach into the others, so a failing device ends the job (on_fail): its
 * message goes to the terminal (rank 0's stderr or, on another rank, the
 * stderr it had before it fell silent), then MPI_Abort.  mpirun then stops
 * every process, as it does when a process dies on a signal (kill -9):
 * nobody is left waiting.
 *
 * Why not the blocking calls (MPI_Allreduce …) everywhere: a blocking call
 * cannot be given a deadline, so the watchdog could not say who waits for
 * whom.  Every wait polls non-blocking requests (mpi_wait.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/launch_impl.h"
#include "comm/mpi/mpi_backend.h"
#include "ptdp/error.h"
#include "ptdp/mpi.h"
#include "ptdp/trace.h"
#include "comm/mpi_impl.h"
#include "runtime/device_impl.h"

static int started;
static MPI_Comm host_comm = MPI_COMM_NULL;     /* merges of host memory     */
static MPI_Comm status_comm = MPI_COMM_NULL;   /* "what are you waiting in?" */

/* ------------------------------------------------------------ process */

bool ptdp_mpi_built(void)
{
    return true;
}

/* MPI's own errors (a dead peer, a bad argument) are fatal, as by default;
 * this handler only makes sure a silent rank's message is seen. */
static void mpi_error(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0, rank = ptdp_mpi_rank();
    MPI_Error_string(*code, text, &len);
    dprintf(ptdp_mpi_stderr(), "ptdp: rank %d: MPI error: %s\n", rank, text);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

int ptdp_mpi_start(int *rank, int *size, char *msg, size_t len)
{
    if (!started) {
        int init = 0, provided;
        MPI_Initialized(&init);
        if (!init && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            snprintf(msg, len, "MPI_Init failed");
            return PTDP_EIO;
        }
        started = 1;
        MPI_Errhandler eh;
        MPI_Comm_create_errhandler(mpi_error, &eh);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return 0;
}

int ptdp_mpi_rank(void)
{
    int r = -1;
    if (started)
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

void ptdp_mpi_finish(void)
{
    int fin = 0;
    if (started && (MPI_Finalized(&fin), !fin))
        MPI_Finalize();
    started = 0;
}

/* ---------------------------------------------------------- the world */

static void end_the_job(ptdp_device *dev, int code, const char *msg)
{
    dprintf(ptdp_mpi_stderr(), "ptdp: rank %d of %d failed (%s): %s\n"
            "ptdp: rank %d ends the job (MPI_Abort)\n",
            dev->rank, dev->world_size, ptdp_strerror(code), msg, dev->rank);
    if (dev->w->before_abort != NULL)   /* what the host must keep (launch.h) */
        dev->w->before_abort(dev->w->before_abort_ctx);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static int merge_hosts(ptdp_device *dev, void *buf, size_t bytes)
{
    static const ptdp_wait_why why = { .op = PTDP_COLL_ALL_REDUCE, .group = "host", .file = __FILE__,
                                       .line = __LINE__, .peer = -1 };
    for (size_t done = 0; done < bytes;) {
        size_t n = bytes - done < ((size_t)1 << 30) ? bytes - done : (size_t)1 << 30;
        MPI_Request req;
        MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + done, (int)n, MPI_BYTE, MPI_BOR, host_comm, &req);
        int rc = ptdp_mpi_wait(dev, 1, &req, &why);
        if (rc)
            return rc;
        done += n;
    }
    return 0;
}

/* ------------------------------------------------ the processes backend */

/* The processes of this node: they share its cores. */
static int processes_on_node(void)
{
    MPI_Comm node;
    int local = 1;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
    return local;
}

/* This process owns one device, its MPI rank; every rank calls every MPI
 * function here (they are collective), so open either fails everywhere or
 * nowhere but out of memory. */
static int mpi_open(ptdp_launch_state *L, char *msg, size_t len)
{
    int rank, size;
    int rc = ptdp_mpi_start(&rank, &size, msg, len);
    if (rc)
        return rc;
    if (size != L->n) {
        snprintf(msg, len, "mpirun started %d processes, but the run needs %d devices "
                 "(one process per device)", size, L->n);
        return PTDP_EINVAL;
    }
    L->first = rank;
    L->count = 1;
    L->on_host = L->opts->spin == 1 ? 1 : processes_on_node();   /* 1: never spins, no need to ask */
    L->threads = 1;                       /* one thread per process */
    MPI_Comm_dup(MPI_COMM_WORLD, &status_comm);
    MPI_Comm_dup(MPI_COMM_WORLD, &host_comm);
    return 0;
}

static ptdp_comm *mpi_world_comm(ptdp_launch_state *L, ptdp_device *dev)
{
    int world_rank[PTDP_MAX_DEVICES];
    for (int r = 0; r < L->n; r++)
        world_rank[r] = r;
    MPI_Comm world;
    MPI_Comm_dup(MPI_COMM_WORLD, &world);
    ptdp_comm *c = ptdp_mpi_comm_create(world, dev, world_rank, "world");
    if (c == NULL)
        MPI_Comm_free(&world);
    return c;
}

/* My device in this thread; then wait, answering "finished", until every
 * rank has returned. */
static void mpi_run(ptdp_launch_state *L, void (*play)(ptdp_launch_state *L, int r))
{
    ptdp_mpi_wait_setup(status_comm, L->watchdog_s, L->spin);
    play(L, L->first);
    ptdp_mpi_wait_finish(&L->dev[L->first]);
}

/* Every device's summary on every rank: rank 0 reports them.  Every rank
 * takes part, result or not. */
static void mpi_merge_summaries(ptdp_launch_state *L, ptdp_device_summary *all)
{
    if (all == NULL) {
        ptdp_fail(&L->dev[L->first], PTDP_ENOMEM, "host out of memory gathering the devices' summaries");
        return;                                            /* (ended the job) */
    }
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, (int)sizeof *all, MPI_BYTE, host_comm);
}

/* --trace: every rank's events to rank 0, which writes the one file the
 * threads backend writes (one track per device). */
static bool mpi_merge_traces(ptdp_launch_state *L, ptdp_trace **traces)
{
    ptdp_device *dev = &L->dev[L->first];
    unsigned long long count = ptdp_trace_count(dev->trace);
    size_t es = sizeof(ptdp_trace_event);
    if (dev->rank != 0) {
        MPI_Send(&count, 1, MPI_UNSIGNED_LONG_LONG, 0, 0, host_comm);
        MPI_Send(ptdp_trace_events(dev->trace), (int)(count * es), MPI_BYTE, 0, 1, host_comm);
        return false;
    }
    ptdp_trace_event *buf = NULL;
    for (int r = 1; r < L->n; r++) {
        MPI_Recv(&count, 1, MPI_UNSIGNED_LONG_LONG, r, 0, host_comm, MPI_STATUS_IGNORE);
        ptdp_trace_event *more = realloc(buf, count * es + 1);
        traces[r] = ptdp_trace_create(r);
        if (!more || !traces[r]) {
            ptdp_fail(dev, PTDP_ENOMEM, "--trace: host out of memory for device %d's events", r);
            break;                                         /* (ended the job) */
        }
        buf = more;
        MPI_Recv(buf, (int)(count * es), MPI_BYTE, r, 1, host_comm, MPI_STATUS_IGNORE);
        for (unsigned long long i = 0; i < count; i++)
            ptdp_trace_add(traces[r], &buf[i]);
    }
    free(buf);
    return true;
}

static void mpi_close(ptdp_launch_state *L)
{
    MPI_Comm_free(&status_comm);
    MPI_Comm_free(&host_comm);
    ptdp_mpi_wait_setup(MPI_COMM_NULL, L->watchdog_s, 0);
}

const ptdp_launch_backend ptdp_mpi_backend = {
    .open = mpi_open,
    .world_comm = mpi_world_comm,
    .run = mpi_run,
    .merge_summaries = mpi_merge_summaries,
    .merge_traces = mpi_merge_traces,
    .close = mpi_close,
    .on_fail = end_the_job,
    .host_merge = merge_hosts,
};
