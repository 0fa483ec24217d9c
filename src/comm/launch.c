/*
 * launch.c — start N simulated devices and wait for them: the set-up every
 * backend shares, written once, and the threads backend.
 *
 *   ptdp_launch(N, fn, arg, opts)
 *     ├─ check the request      N, fn, the algorithm, the watchdog
 *     ├─ open (backend)         what this process owns: threads all N
 *     │                         devices, a process (MPI) its one
 *     ├─ the world              the waiting machinery (runtime/wait.h):
 *     │                         the abort flag, the first failure, the
 *     │                         watchdog; the backend's hooks
 *     ├─ my devices             arena (opts->device_mem), profile, all_reduce
 *     │                         algorithm, trace, helper threads, and the
 *     │                         world communicator (backend)
 *     ├─ run (backend)          rc = fn(dev, arg) on each; a nonzero rc
 *     │                         fails the device; wait until all returned
 *     ├─ the outcome            status, failing rank and message; per
 *     │                         device memory / communication / clocks,
 *     │                         merged over the processes (backend)
 *     ├─ the trace              merged (backend), written by one host
 *     └─ close                  my devices, the backend, the world
 *
 * The two backends differ only in what a process owns and how a device is
 * started (launch_impl.h has the table):
 *
 *        threads (this file)                processes (comm/mpi/mpi.c)
 *   ┌─ one process ───────────────┐     ┌─ process 0 ─┐  ┌─ process 1 ─┐
 *   │ world: flag, first failure  │     │ world       │  │ world       │
 *   │ dev 0   dev 1   …   dev N-1 │     │ dev 0       │  │ dev 1       │ …
 *   │ thread  thread      thread  │     │ this thread │  │ this thread │
 *   └─────────────────────────────┘     └──────◄─ MPI ─►──────────────┘
 *
 * Why here, in comm/, and not beside the devices in runtime/: launching is
 * what gives every device its world communicator, so it sits on top of a
 * backend.
 *
 * Failure is collective (device.h): ptdp_fail records the first failure
 * (code, rank, message), raises the world's abort flag and wakes every
 * sleeping device, so every pending and later collective returns
 * PTDP_EABORTED and each thread unwinds on its own.  A process cannot
 * raise a flag in another's memory: the processes backend's on_fail ends
 * the job instead (MPI_Abort), so nobody is left waiting either way.
 *
 * A device is cores / devices worth of work.  OpenBLAS is kept
 * single-threaded (its thread count is global to the process, and N devices
 * would each start its pool on the same cores); instead each device gets a
 * pool of its own helper threads (runtime/pool.c), opts->blas_threads in
 * all, that share its large products by blocks of rows (nn/blas.c) with the
 * same bits for any count (a process under MPI keeps one).  The pools start
 * before the devices and end after every device has returned.
 */
#include "ptdp/launch.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/launch_impl.h"
#include "comm/shm/shm.h"
#include "ptdp/comm.h"
#include "ptdp/mpi.h"
#include "ptdp/error.h"
#include "comm/mpi_impl.h"
#include "runtime/device_impl.h"

#if defined(PTDP_HAVE_OPENBLAS_SET_NUM_THREADS)
void openblas_set_num_threads(int num_threads);
#endif

/* ------------------------------------------------------------ the request */

static void set_result(ptdp_launch_result *res, int status, int rank, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static void set_result(ptdp_launch_result *res, int status, int rank, const char *fmt, ...)
{
    if (!res)
        return;
    res->status = status;
    res->failed_rank = rank;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->message, sizeof res->message, fmt, ap);
    va_end(ap);
}

/* What no backend can run: 0, or PTDP_EINVAL with why in the result. */
static int check_request(int world_size, ptdp_device_fn fn, const ptdp_launch_opts *o)
{
    if (world_size < 1 || world_size > PTDP_MAX_DEVICES) {
        set_result(o->result, PTDP_EINVAL, -1, "world size %d is not between 1 and %d devices",
                   world_size, PTDP_MAX_DEVICES);
        return PTDP_EINVAL;
    }
    if (!fn || (unsigned)o->algo >= PTDP_ALGO_COUNT || o->watchdog_s < 0) {
        set_result(o->result, PTDP_EINVAL, -1, "%s", !fn ? "no device function"
                   : o->watchdog_s < 0 ? "negative watchdog" : "unknown all_reduce algorithm");
        return PTDP_EINVAL;
    }
    return 0;
}

/* Spin while waiting only if every thread on this host can have a core
 * (device.h). */
static bool may_spin(int threads_on_host, int spin_opt)
{
    if (spin_opt == 1)
        return false;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 && threads_on_host <= cores;
}

/* ------------------------------------------------------- the world, devices */

/* The waiting machinery every device of this process shares, with the
 * backend's hooks: what a failure does beyond the flag, how hosts merge. */
static int make_world(ptdp_launch_state *L)
{
    L->spin = may_spin(L->on_host, L->opts->spin);
    if (ptdp_world_init(&L->world, L->n, L->spin, L->watchdog_s) != 0)
        return PTDP_ENOMEM;
    L->world.on_fail = L->backend->on_fail;
    L->world.host_merge = L->backend->host_merge;
    L->world.before_abort = L->opts->before_abort;
    L->world.before_abort_ctx = L->opts->before_abort_ctx;
    return 0;
}

/* Device r: everything it owns.  Every part is made even if one before it
 * failed, so every process takes part in the backend's collective calls. */
static int make_device(ptdp_launch_state *L, int r)
{
    const ptdp_launch_opts *o = L->opts;
    ptdp_device *d = &L->dev[r];
    d->rank = r;
    d->world_size = L->n;
    d->profile = o->profile ? o->profile : ptdp_profile_default();
    d->algo = o->algo == PTDP_ALGO_DEFAULT ? PTDP_ALGO_SHM : o->algo;
    d->w = &L->world;
    L->world.devices[r] = d;
    d->arena = ptdp_arena_create(o->device_mem ? o->device_mem : PTDP_DEFAULT_DEVICE_MEM, r);
    d->world = L->backend->world_comm(L, d);
    const bool tracing = o->trace_path != NULL || (o->keep_traces && o->result != NULL);
    if (tracing)
        d->trace = ptdp_trace_create(r);
    int prc = ptdp_pool_create(&L->pool[r], L->threads, may_spin(L->on_host * L->threads, o->spin));
    return !d->arena || !d->world || (tracing && !d->trace) || prc != 0 ? PTDP_ENOMEM : 0;
}

static void destroy_devices(ptdp_launch_state *L, int end)
{
    for (int r = L->first; r < end; r++) {
        ptdp_comm_free(L->dev[r].world);
        ptdp_arena_destroy(L->dev[r].arena);
        ptdp_trace_destroy(L->dev[r].trace);
        ptdp_pool_destroy(L->pool[r]);
    }
}

static int make_devices(ptdp_launch_state *L)
{
    for (int r = L->first; r < L->first + L->count; r++)
        if (make_device(L, r) != 0) {
            destroy_devices(L, r + 1);
            return PTDP_ENOMEM;
        }
    return 0;
}

/* ------------------------------------------------------------------- run */

/* A device's life, whoever plays it (a thread here, a process's main
 * thread under MPI; the backend's run calls it): fn, then a nonzero return
 * fails it unless another's failure is what it unwinds from, then its wall
 * time and "returned". */
static void play_device(ptdp_launch_state *L, int rank)
{
    ptdp_device *dev = &L->dev[rank];
    dev->wall0 = ptdp_wall_now();
    ptdp_device_set_current(dev);
    ptdp_pool_set_current(L->pool[rank]);
    int rc = L->fn(dev, L->arg);
    ptdp_pool_set_current(NULL);
    ptdp_device_set_current(NULL);
    if (rc != 0 && dev->status == 0 && !ptdp_aborted(dev))
        ptdp_fail(dev, rc, "device %d returned %d (%s)", dev->rank, rc, ptdp_strerror(rc));
    else if (rc != 0 && dev->status == 0)
        dev->status = rc;                  /* unwound after another failed */
    L->wall_s[rank] = ptdp_wall_now() - dev->wall0;

    /* Anyone still waiting for this device will never be served by it. */
    atomic_store(&L->world.parkers[rank].finished, 1);
    ptdp_wake_all(&L->world);
}

/* --------------------------------------------------------------- outcome */

/* The first failure, and what every device looked like when it finished:
 * mine from here, the others' from their processes. */
static int outcome(ptdp_launch_state *L)
{
    struct ptdp_world *w = &L->world;
    ptdp_launch_result *res = L->opts->result;
    ptdp_device_summary *all = calloc((size_t)L->n, sizeof *all);
    for (int r = L->first; all && r < L->first + L->count; r++) {
        ptdp_arena_stats(L->dev[r].arena, &all[r].mem);
        all[r].comm = L->dev[r].stats;
        all[r].clock = L->dev[r].clock;
        all[r].wall_s = L->wall_s[r];
    }
    if (L->backend->merge_summaries)
        L->backend->merge_summaries(L, all);
    int rc = w->fail_code;
    if (res && rc)
        set_result(res, rc, w->fail_rank, "%s", w->fail_msg);
    if (res)
        res->devices = all;
    else
        free(all);
    return rc;
}

/* --trace: one file, one track per device, written by the host that holds
 * them all.  A file that cannot be written is an output of its own
 * (launch.h): reported in the result, or returned when there is none. */
static int write_trace(ptdp_launch_state *L, int rc)
{
    const ptdp_launch_opts *o = L->opts;
    ptdp_trace *traces[PTDP_MAX_DEVICES] = { 0 };
    for (int r = L->first; r < L->first + L->count; r++)
        traces[r] = L->dev[r].trace;
    bool writer = L->backend->merge_traces ? L->backend->merge_traces(L, traces) : true;
    char msg[PTDP_MSG_MAX];
    int trc = writer && o->trace_path ? ptdp_trace_write_chrome(o->trace_path, traces, L->n, msg, sizeof msg) : 0;
    if (trc != 0 && o->result != NULL) {
        o->result->trace_status = trc;
        snprintf(o->result->trace_message, sizeof o->result->trace_message, "%s", msg);
    } else if (trc != 0 && rc == 0) {
        rc = trc;                /* nobody asked for a result: say it here */
    }
    /* keep_traces: the writer hands every trace over to the result */
    ptdp_launch_result *res = o->result;
    if (writer && o->keep_traces && res != NULL && (res->traces = calloc((size_t)L->n, sizeof *res->traces))) {
        for (int r = 0; r < L->n; r++) {
            res->traces[r] = traces[r];
            traces[r] = NULL;
            if (r >= L->first && r < L->first + L->count)
                L->dev[r].trace = NULL;          /* the result's now */
        }
    }
    for (int r = 0; r < L->n; r++)
        if (r < L->first || r >= L->first + L->count)
            ptdp_trace_destroy(traces[r]);       /* the other processes' */
    return rc;
}

/* ---------------------------------------------------------------- launch */

/* This launch's state, the backend chosen; NULL when out of memory. */
static ptdp_launch_state *new_state(int world_size, ptdp_device_fn fn, void *arg, const ptdp_launch_opts *o)
{
    void *mem = NULL;                    /* 64-byte aligned: see wait.h */
    if (posix_memalign(&mem, 64, sizeof(ptdp_launch_state)) != 0)
        return NULL;
    ptdp_launch_state *L = memset(mem, 0, sizeof *L);
    L->n = world_size;
    L->fn = fn;
    L->arg = arg;
    L->opts = o;
    L->watchdog_s = o->watchdog_s > 0 ? o->watchdog_s : PTDP_DEFAULT_WATCHDOG_S;
    L->backend = o->backend == PTDP_BACKEND_MPI ? &ptdp_mpi_backend : &ptdp_threads_backend;
    return L;
}

/* Everything between the backend's open and close. */
static int run_world(ptdp_launch_state *L)
{
    ptdp_launch_result *res = L->opts->result;
    int rc = make_world(L);
    if (rc) {
        set_result(res, rc, -1, "out of host memory starting %d devices", L->n);
        return rc;
    }
    if ((rc = make_devices(L)) != 0) {
        set_result(res, rc, -1, "out of host memory creating %d devices", L->n);
    } else {
        L->backend->run(L, play_device);
        rc = outcome(L);
        if (L->opts->trace_path || (L->opts->keep_traces && res != NULL))
            rc = write_trace(L, rc);
        destroy_devices(L, L->first + L->count);
    }
    ptdp_world_destroy(&L->world);
    return rc;
}

int ptdp_launch(int world_size, ptdp_device_fn fn, void *arg, const ptdp_launch_opts *opts)
{
    const ptdp_launch_opts defaults = { 0 }, *o = opts ? opts : &defaults;
    ptdp_launch_result *res = o->result;
    if (res) {
        memset(res, 0, sizeof *res);
        res->failed_rank = -1;
        res->world_size = world_size;
    }
    int rc = check_request(world_size, fn, o);
    if (rc)
        return rc;
    ptdp_launch_state *L = new_state(world_size, fn, arg, o);
    if (!L) {
        set_result(res, PTDP_ENOMEM, -1, "out of host memory starting %d devices", world_size);
        return PTDP_ENOMEM;
    }
    char msg[PTDP_MSG_MAX];
    if ((rc = L->backend->open(L, msg, sizeof msg)) != 0) {
        set_result(res, rc, -1, "%s", msg);
    } else {
#if defined(PTDP_HAVE_OPENBLAS_SET_NUM_THREADS)
        openblas_set_num_threads(1);
#endif
        rc = run_world(L);
        L->backend->close(L);
    }
    free(L);
    return rc;
}

/* ------------------------------------------------------ the threads backend */

/* A thread per device, all in this process: they share one memory, so the
 * world communicator is a shared-memory group (comm/shm), a failure is a
 * flag they all see, and the result is already here. */
typedef struct {
    struct shm_group *group;            /* the world's, one reference each */
    int taken;                          /*   communicators made over it    */
    pthread_t tid[PTDP_MAX_DEVICES];
    struct device_thread {
        ptdp_launch_state *L;
        int rank;
        void (*play)(ptdp_launch_state *L, int r);
    } job[PTDP_MAX_DEVICES];
} threads_state;

static int threads_open(ptdp_launch_state *L, char *msg, size_t len)
{
    if (L->opts->algo == PTDP_ALGO_MPI) {
        snprintf(msg, len, "the all_reduce algorithm mpi is MPI_Allreduce: it needs the MPI "
                 "backend (one process per device), not threads");
        return PTDP_EINVAL;
    }
    threads_state *T = calloc(1, sizeof *T);
    int world_rank[PTDP_MAX_DEVICES];
    for (int r = 0; r < L->n; r++)
        world_rank[r] = r;
    if (!T || !(T->group = ptdp_shm_group_create(L->n, world_rank))) {
        free(T);
        snprintf(msg, len, "out of host memory starting %d devices", L->n);
        return PTDP_ENOMEM;
    }
    L->own = T;
    L->first = 0;
    L->count = L->on_host = L->n;
    L->threads = ptdp_blas_threads(L->opts->blas_threads, L->n);
    return 0;
}

static ptdp_comm *threads_world_comm(ptdp_launch_state *L, ptdp_device *dev)
{
    threads_state *T = L->own;
    ptdp_comm *c = ptdp_shm_comm_create(T->group, dev, dev->rank, "world");
    T->taken += c != NULL;
    return c;
}

static void *device_thread(void *p)
{
    struct device_thread *job = p;
    job->play(job->L, job->rank);
    return NULL;
}

static void threads_run(ptdp_launch_state *L, void (*play)(ptdp_launch_state *L, int r))
{
    threads_state *T = L->own;
    int started = 0;
    for (; started < L->n; started++) {
        T->job[started] = (struct device_thread){ L, started, play };
        if (pthread_create(&T->tid[started], NULL, device_thread, &T->job[started]) != 0) {
            ptdp_fail(&L->dev[started], PTDP_ENOMEM, "could not start the thread of device %d", started);
            break;
        }
    }
    for (int r = 0; r < started; r++)
        pthread_join(T->tid[r], NULL);
}

static void threads_close(ptdp_launch_state *L)
{
    threads_state *T = L->own;
    for (int k = T->taken; k < L->n; k++)   /* the references no communicator took */
        ptdp_shm_group_release(T->group);
    free(T);
}

const ptdp_launch_backend ptdp_threads_backend = {
    .open = threads_open,
    .world_comm = threads_world_comm,
    .run = threads_run,
    .close = threads_close,
};

/* --------------------------------------------------------- helper threads */

int ptdp_blas_threads(int asked, int devices)
{
    return ptdp_pool_threads_for(asked, devices);
}

void ptdp_launch_result_free(ptdp_launch_result *r)
{
    if (r) {
        free(r->devices);
        r->devices = NULL;
        for (int i = 0; r->traces != NULL && i < r->world_size; i++)
            ptdp_trace_destroy(r->traces[i]);
        free(r->traces);
        r->traces = NULL;
    }
}

/* ------------------------------------------------------------ hosts */

int ptdp_host_merge(ptdp_device *dev, void *buf, size_t bytes)
{
    /* Threads share this host: what every device wrote is already here. */
    return dev->w->host_merge ? dev->w->host_merge(dev, buf, bytes) : 0;
}

bool ptdp_host_shared(const ptdp_device *dev)
{
    return dev->w->host_merge == NULL;
}

bool ptdp_host_is_root(const ptdp_launch_opts *opts)
{
    return opts == NULL || opts->backend != PTDP_BACKEND_MPI || ptdp_mpi_rank() <= 0;
}
