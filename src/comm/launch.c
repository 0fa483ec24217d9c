/*
 * launch.c — start N simulated devices, each a thread, and wait for them.
 *
 *   ptdp_launch(N, fn, arg, opts)
 *     ├─ the world: waiting machinery (runtime/wait.h), one shared-memory
 *     │             group of N (comm/shm)
 *     ├─ per device: arena (opts->device_mem), trace, world communicator,
 *     │              profile, all_reduce algorithm
 *     ├─ N threads:  rc = fn(dev, arg); a nonzero rc fails the device
 *     ├─ join all
 *     └─ result:     status, failing rank and message, per-device
 *                    memory / communication / clock summaries; trace file
 *
 * Why here, in comm/, and not beside the devices in runtime/: launching is
 * what gives every device its world communicator, so it sits on top of a
 * backend.  This is the threads backend's launcher; a backend of one process
 * per device (MPI) starts its devices with mpirun instead, and its launch
 * makes the one device of its process.
 *
 * Failure is collective (device.h): ptdp_fail records the first failure
 * (code, rank, message), raises the world's abort flag and wakes every
 * sleeping device, so every pending and later collective returns
 * PTDP_EABORTED and each thread unwinds on its own.
 *
 * A device is cores / devices worth of work.  OpenBLAS is kept
 * single-threaded (its thread count is global to the process, and N devices
 * would each start its pool on the same cores); instead each device gets a
 * pool of its own helper threads (runtime/pool.c), opts->blas_threads in
 * all, that share its large products by blocks of rows (nn/blas.c) with the
 * same bits for any count.  The pools start before the devices and end
 * after every device has returned.
 */
#include "ptdp/launch.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/mpi/mpi_launch.h"
#include "comm/shm/shm.h"
#include "ptdp/comm.h"
#include "ptdp/mpi.h"
#include "ptdp/error.h"
#include "ptdp/trace.h"
#include "runtime/pool.h"
#include "runtime/wait.h"
#include "comm/mpi_impl.h"
#include "runtime/device_impl.h"

#if defined(PTDP_HAVE_OPENBLAS_SET_NUM_THREADS)
void openblas_set_num_threads(int num_threads);
#endif

/* ------------------------------------------------------------ threads */

typedef struct {
    ptdp_device *dev;
    ptdp_device_fn fn;
    void *arg;
    double wall_s;
    ptdp_pool *pool;                    /* its helper threads              */
} device_thread;

static void *device_main(void *p)
{
    device_thread *th = p;
    ptdp_device *dev = th->dev;
    dev->wall0 = ptdp_wall_now();
    ptdp_device_set_current(dev);
    ptdp_pool_set_current(th->pool);
    int rc = th->fn(dev, th->arg);
    ptdp_pool_set_current(NULL);
    ptdp_device_set_current(NULL);
    if (rc != 0 && dev->status == 0 && !ptdp_aborted(dev))
        ptdp_fail(dev, rc, "device %d returned %d (%s)", dev->rank, rc, ptdp_strerror(rc));
    else if (rc != 0 && dev->status == 0)
        dev->status = rc;                  /* unwound after another failed */
    th->wall_s = ptdp_wall_now() - dev->wall0;

    /* Anyone still waiting for this device will never be served by it. */
    struct ptdp_world *w = dev->w;
    atomic_store(&w->parkers[dev->rank].finished, 1);
    ptdp_wake_all(w);
    return NULL;
}

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

/* Spin while waiting only if every device can have a core (device.h). */
static bool may_spin(int world_size, int spin_opt)
{
    if (spin_opt == 1)
        return false;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 && world_size <= cores;
}

/* Everything one launch owns, freed in one place. */
typedef struct {
    struct ptdp_world world;
    ptdp_device dev[PTDP_MAX_DEVICES];
    device_thread th[PTDP_MAX_DEVICES];
    pthread_t tid[PTDP_MAX_DEVICES];
} launch_state;

static void destroy_devices(launch_state *L, int n)
{
    for (int r = 0; r < n; r++) {
        ptdp_comm_free(L->dev[r].world);
        if (L->dev[r].arena)
            ptdp_arena_destroy(L->dev[r].arena);
        if (L->dev[r].trace)
            ptdp_trace_destroy(L->dev[r].trace);
        ptdp_pool_destroy(L->th[r].pool);
    }
}

static int create_devices(launch_state *L, int n, const ptdp_launch_opts *o)
{
    int world_rank[PTDP_MAX_DEVICES];
    for (int r = 0; r < n; r++)
        world_rank[r] = r;
    struct shm_group *group = ptdp_shm_group_create(n, world_rank);
    if (!group)
        return PTDP_ENOMEM;
    size_t capacity = o->device_mem ? o->device_mem : PTDP_DEFAULT_DEVICE_MEM;
    ptdp_algo algo = o->algo == PTDP_ALGO_DEFAULT ? PTDP_ALGO_SHM : o->algo;
    for (int r = 0; r < n; r++) {
        ptdp_device *d = &L->dev[r];
        d->rank = r;
        d->world_size = n;
        d->profile = o->profile ? o->profile : ptdp_profile_default();
        d->algo = algo;
        d->w = &L->world;
        L->world.devices[r] = d;
        d->arena = ptdp_arena_create(capacity, r);
        d->world = ptdp_shm_comm_create(group, d, r, "world");
        if (o->trace_path)
            d->trace = ptdp_trace_create(r);
        int threads = ptdp_blas_threads(o->blas_threads, n);
        int prc = ptdp_pool_create(&L->th[r].pool, threads, may_spin(n * threads, o->spin));
        if (!d->arena || !d->world || (o->trace_path && !d->trace) || prc != 0) {
            /* Drop the group references no communicator took. */
            for (int k = d->world ? r + 1 : r; k < n; k++)
                ptdp_shm_group_release(group);
            destroy_devices(L, r + 1);
            return PTDP_ENOMEM;
        }
    }
    return 0;
}

int ptdp_launch(int world_size, ptdp_device_fn fn, void *arg, const ptdp_launch_opts *opts)
{
    ptdp_launch_opts defaults;
    memset(&defaults, 0, sizeof defaults);
    const ptdp_launch_opts *o = opts ? opts : &defaults;
    ptdp_launch_result *res = o->result;
    if (res) {
        memset(res, 0, sizeof *res);
        res->failed_rank = -1;
        res->world_size = world_size;
    }
    if (world_size < 1 || world_size > PTDP_MAX_DEVICES) {
        set_result(res, PTDP_EINVAL, -1, "world size %d is not between 1 and %d devices",
                   world_size, PTDP_MAX_DEVICES);
        return PTDP_EINVAL;
    }
    if (!fn || (unsigned)o->algo >= PTDP_ALGO_COUNT || o->watchdog_s < 0) {
        set_result(res, PTDP_EINVAL, -1, "%s", !fn ? "no device function"
                   : o->watchdog_s < 0 ? "negative watchdog" : "unknown all_reduce algorithm");
        return PTDP_EINVAL;
    }
    /* One process per device: mpirun made the processes (comm/mpi). */
    if (o->backend == PTDP_BACKEND_MPI)
        return ptdp_mpi_launch(world_size, fn, arg, o);
    if (o->algo == PTDP_ALGO_MPI) {
        set_result(res, PTDP_EINVAL, -1, "the all_reduce algorithm mpi is MPI_Allreduce: it needs the MPI "
                   "backend (one process per device), not threads");
        return PTDP_EINVAL;
    }

#if defined(PTDP_HAVE_OPENBLAS_SET_NUM_THREADS)
    openblas_set_num_threads(1);
#endif

    void *mem = NULL;                    /* 64-byte aligned: see wait.h */
    launch_state *L = posix_memalign(&mem, 64, sizeof *L) == 0 ? memset(mem, 0, sizeof *L) : NULL;
    char msg[PTDP_MSG_MAX];
    double watchdog = o->watchdog_s > 0 ? o->watchdog_s : PTDP_DEFAULT_WATCHDOG_S;
    if (!L || ptdp_world_init(&L->world, world_size, may_spin(world_size, o->spin), watchdog) != 0) {
        free(L);
        set_result(res, PTDP_ENOMEM, -1, "out of host memory starting %d devices", world_size);
        return PTDP_ENOMEM;
    }
    int rc = create_devices(L, world_size, o);
    if (rc) {
        ptdp_world_destroy(&L->world);
        free(L);
        set_result(res, rc, -1, "out of host memory creating %d devices", world_size);
        return rc;
    }

    int started = 0;
    for (; started < world_size; started++) {
        L->th[started] = (device_thread){ &L->dev[started], fn, arg, 0.0, L->th[started].pool };
        if (pthread_create(&L->tid[started], NULL, device_main, &L->th[started]) != 0) {
            ptdp_fail(&L->dev[started], PTDP_ENOMEM, "could not start the thread of device %d",
                      started);
            break;
        }
    }
    for (int r = 0; r < started; r++)
        pthread_join(L->tid[r], NULL);

    /* The outcome. */
    struct ptdp_world *w = &L->world;
    rc = w->fail_code;
    if (res) {
        if (rc)
            set_result(res, rc, w->fail_rank, "%s", w->fail_msg);
        res->devices = calloc((size_t)world_size, sizeof *res->devices);
        for (int r = 0; res->devices && r < world_size; r++) {
            ptdp_device_summary *s = &res->devices[r];
            ptdp_arena_stats(L->dev[r].arena, &s->mem);
            s->comm = L->dev[r].stats;
            s->clock = L->dev[r].clock;
            s->wall_s = L->th[r].wall_s;
        }
    }
    if (o->trace_path) {
        ptdp_trace *traces[PTDP_MAX_DEVICES];
        for (int r = 0; r < world_size; r++)
            traces[r] = L->dev[r].trace;
        int trc = ptdp_trace_write_chrome(o->trace_path, traces, world_size, msg, sizeof msg);
        if (trc != 0 && res != NULL) {
            res->trace_status = trc;
            snprintf(res->trace_message, sizeof res->trace_message, "%s", msg);
        } else if (trc != 0 && rc == 0) {
            rc = trc;            /* nobody asked for a result: say it here */
        }
    }
    destroy_devices(L, world_size);
    ptdp_world_destroy(w);
    free(L);
    return rc;
}

int ptdp_blas_threads(int asked, int devices)
{
    return ptdp_pool_threads_for(asked, devices);
}

void ptdp_launch_result_free(ptdp_launch_result *r)
{
    if (r) {
        free(r->devices);
        r->devices = NULL;
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
