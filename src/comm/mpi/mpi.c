/*
 * mpi.c — the process-level side of the MPI backend (mpi.h), and the one
 * device of this process, under mpirun.
 *
 * The threads' launch (comm/launch.c) makes N devices and N threads.  Here
 * mpirun has made the N processes; each makes one device:
 *
 *   ptdp_mpi_start      MPI_Init; rank and size; ranks > 0 fall silent
 *   ptdp_launch(N, fn)  (backend MPI) ──► ptdp_mpi_launch:
 *     ├─ check          mpirun's world size is the run's N
 *     ├─ the device     rank = MPI rank, its arena, profile, algorithm;
 *     │                 the world communicator over a copy of MPI_COMM_WORLD
 *     ├─ fn(dev, arg)   in this thread
 *     ├─ finish         wait until every rank has returned (mpi_wait.c)
 *     └─ result         every rank's memory, bytes and clocks, all-gathered,
 *                       so rank 0 reports the whole world
 *
 * Failure.  Threads raise a flag every device sees.  A process cannot
 * reach into the others, so a failing device ends the job: its message
 * goes to the terminal (rank 0's stderr or, on another rank, the stderr it
 * had before it fell silent), then MPI_Abort.  mpirun then stops every
 * process, as it does when a process dies on a signal (kill -9): nobody
 * is left waiting.
 *
 * Why not the blocking calls (MPI_Allreduce …) everywhere: a blocking call
 * cannot be given a deadline, so the watchdog could not say who waits for
 * whom.  Every wait polls non-blocking requests (mpi_wait.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/mpi/mpi_backend.h"
#include "comm/mpi/mpi_launch.h"
#include "ptdp/error.h"
#include "ptdp/mpi.h"
#include "ptdp/trace.h"
#include "comm/mpi_impl.h"
#include "runtime/device_impl.h"

#if defined(PTDP_HAVE_OPENBLAS_SET_NUM_THREADS)
void openblas_set_num_threads(int num_threads);
#endif

static int started;
static MPI_Comm host_comm = MPI_COMM_NULL;

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

/* Spin while waiting only if this node's processes each have a core. */
static int may_spin(int spin_opt)
{
    if (spin_opt == 1)
        return 0;
    MPI_Comm node;
    int local = 1;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 && local <= cores;
}

static int fail_result(ptdp_launch_result *res, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* A launch that could not start: the code, and why in the result. */
static int fail_result(ptdp_launch_result *res, int code, const char *fmt, ...)
{
    if (res) {
        memset(res, 0, sizeof *res);
        res->status = code;
        res->failed_rank = -1;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(res->message, sizeof res->message, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* --trace: every rank's events to rank 0, which writes the one file the
 * threads backend writes (one track per device).  A file that cannot be
 * written is an output of its own (launch.h): reported in the result. */
static int write_trace(ptdp_device *dev, const char *path, ptdp_launch_result *res)
{
    const int n = dev->world_size;
    unsigned long long count = ptdp_trace_count(dev->trace);
    size_t es = sizeof(ptdp_trace_event);
    if (dev->rank != 0) {
        MPI_Send(&count, 1, MPI_UNSIGNED_LONG_LONG, 0, 0, host_comm);
        MPI_Send(ptdp_trace_events(dev->trace), (int)(count * es), MPI_BYTE, 0, 1, host_comm);
        return 0;
    }
    ptdp_trace *traces[PTDP_MAX_DEVICES] = { dev->trace };
    ptdp_trace_event *buf = NULL;
    for (int r = 1; r < n; r++) {
        MPI_Recv(&count, 1, MPI_UNSIGNED_LONG_LONG, r, 0, host_comm, MPI_STATUS_IGNORE);
        ptdp_trace_event *more = realloc(buf, count * es + 1);
        traces[r] = ptdp_trace_create(r);
        if (!more || !traces[r])
            return ptdp_fail(dev, PTDP_ENOMEM, "--trace: host out of memory for device %d's events", r);
        buf = more;
        MPI_Recv(buf, (int)(count * es), MPI_BYTE, r, 1, host_comm, MPI_STATUS_IGNORE);
        for (unsigned long long i = 0; i < count; i++)
            ptdp_trace_add(traces[r], &buf[i]);
    }
    free(buf);
    char msg[PTDP_MSG_MAX];
    int rc = ptdp_trace_write_chrome(path, traces, n, msg, sizeof msg);
    for (int r = 1; r < n; r++)
        ptdp_trace_destroy(traces[r]);
    if (rc != 0 && res != NULL) {
        res->trace_status = rc;
        snprintf(res->trace_message, sizeof res->trace_message, "%s", msg);
        rc = 0;
    }
    return rc;
}

int ptdp_mpi_launch(int world_size, ptdp_device_fn fn, void *arg, const ptdp_launch_opts *o)
{
    ptdp_launch_result *res = o->result;
    int rank, size;
    char msg[PTDP_MSG_MAX];
    int rc = ptdp_mpi_start(&rank, &size, msg, sizeof msg);
    if (rc)
        return fail_result(res, rc, "%s", msg);
    if (size != world_size)
        return fail_result(res, PTDP_EINVAL, "mpirun started %d processes, but the run needs %d devices "
                           "(one process per device)", size, world_size);
#if defined(PTDP_HAVE_OPENBLAS_SET_NUM_THREADS)
    openblas_set_num_threads(1);
#endif

    /* The waiting machinery of this process: one device of world_size. */
    struct ptdp_world *w = NULL;
    void *mem = NULL;
    if (posix_memalign(&mem, 64, sizeof *w) != 0 ||
        ptdp_world_init(w = memset(mem, 0, sizeof *w), world_size, false, o->watchdog_s) != 0) {
        free(mem);
        return fail_result(res, PTDP_ENOMEM, "out of host memory starting device %d of %d", rank, world_size);
    }
    w->on_fail = end_the_job;
    w->before_abort = o->before_abort;
    w->before_abort_ctx = o->before_abort_ctx;
    w->host_merge = merge_hosts;

    ptdp_device *dev = calloc(1, sizeof *dev);
    MPI_Comm world, status;
    MPI_Comm_dup(MPI_COMM_WORLD, &world);
    MPI_Comm_dup(MPI_COMM_WORLD, &status);
    MPI_Comm_dup(MPI_COMM_WORLD, &host_comm);
    ptdp_mpi_wait_setup(status, o->watchdog_s, may_spin(o->spin));
    int world_rank[PTDP_MAX_DEVICES];
    for (int r = 0; r < world_size; r++)
        world_rank[r] = r;
    if (dev) {
        dev->rank = rank;
        dev->world_size = world_size;
        dev->profile = o->profile ? o->profile : ptdp_profile_default();
        dev->algo = o->algo == PTDP_ALGO_DEFAULT ? PTDP_ALGO_SHM : o->algo;
        dev->w = w;
        w->devices[rank] = dev;
        dev->arena = ptdp_arena_create(o->device_mem ? o->device_mem : PTDP_DEFAULT_DEVICE_MEM, rank);
        dev->world = ptdp_mpi_comm_create(world, dev, world_rank, "world");
        if (o->trace_path)
            dev->trace = ptdp_trace_create(rank);
    }
    if (!dev || !dev->arena || !dev->world || (o->trace_path && !dev->trace)) {
        if (dev && dev->arena)
            ptdp_arena_destroy(dev->arena);
        if (dev && dev->trace)
            ptdp_trace_destroy(dev->trace);
        free(dev);
        ptdp_world_destroy(w);
        free(w);
        return fail_result(res, PTDP_ENOMEM, "out of host memory creating device %d of %d", rank, world_size);
    }

    /* The device's run, in this thread. */
    dev->wall0 = ptdp_wall_now();
    ptdp_device_set_current(dev);
    rc = fn(dev, arg);
    ptdp_device_set_current(NULL);
    if (rc != 0 && dev->status == 0)
        ptdp_fail(dev, rc, "device %d returned %d (%s)", dev->rank, rc, ptdp_strerror(rc));   /* ends the job */
    double wall_s = ptdp_wall_now() - dev->wall0;
    ptdp_mpi_wait_finish(dev);

    /* Every device's summary on every rank: rank 0 reports them.  Every
     * rank takes part, result or not. */
    ptdp_device_summary mine, *all = calloc((size_t)world_size, sizeof *all);
    memset(&mine, 0, sizeof mine);
    ptdp_arena_stats(dev->arena, &mine.mem);
    mine.comm = dev->stats;
    mine.clock = dev->clock;
    mine.wall_s = wall_s;
    if (!all)
        ptdp_fail(dev, PTDP_ENOMEM, "host out of memory gathering the devices' summaries");
    MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, host_comm);
    if (res) {
        memset(res, 0, sizeof *res);
        res->failed_rank = -1;
        res->world_size = world_size;
        res->devices = all;
    } else {
        free(all);
    }
    if (o->trace_path)
        rc = write_trace(dev, o->trace_path, res);
    ptdp_trace_destroy(dev->trace);
    ptdp_comm_free(dev->world);
    ptdp_arena_destroy(dev->arena);
    free(dev);
    MPI_Comm_free(&status);
    MPI_Comm_free(&host_comm);
    ptdp_mpi_wait_setup(MPI_COMM_NULL, o->watchdog_s, 0);
    ptdp_world_destroy(w);
    free(w);
    return rc;
}
