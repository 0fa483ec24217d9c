/*
 * device.h — simulated accelerators and how to launch them.
 *
 * One POSIX thread plays one device.  ptdp_launch(N, fn, arg, opts) starts N
 * threads and hands each its ptdp_device: its rank, its own memory arena,
 * its clocks and statistics, and the world communicator.  Devices share
 * nothing else: all data moves through comm.h.
 *
 * Failure is collective.  A device that fails (out of memory, an error its
 * code returns, a mismatched collective, the watchdog) aborts the world:
 * every other device's pending and later communication returns
 * PTDP_EABORTED, each thread unwinds, and ptdp_launch reports the first
 * error and the rank that raised it.
 */
#ifndef PTDP_DEVICE_H
#define PTDP_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "arena.h"
#include "clock.h"
#include "comm.h"
#include "trace.h"

#define PTDP_MAX_DEVICES 64
#define PTDP_MSG_MAX 2048

typedef struct ptdp_world ptdp_world;   /* backend-private shared state */

typedef struct ptdp_device {
    int rank, world_size;
    ptdp_arena *arena;
    ptdp_comm *world;            /* every device                          */
    const ptdp_profile *profile; /* cost model of the virtual clock       */
    ptdp_algo algo;              /* all_reduce algorithm (resolved)       */
    ptdp_clock clock;            /* virtual time                          */
    double wall0;                /* wall time at launch                   */
    ptdp_comm_stats stats;       /* bytes and calls                       */
    ptdp_trace *trace;           /* NULL unless tracing                   */
    int status;                  /* first error of this device, or 0      */
    char error[PTDP_MSG_MAX];    /* its message                           */
    ptdp_world *w;
} ptdp_device;

typedef int (*ptdp_device_fn)(ptdp_device *dev, void *arg);

/* What each device looked like when it finished. */
typedef struct {
    ptdp_mem_stats  mem;
    ptdp_comm_stats comm;
    ptdp_clock      clock;
    double          wall_s;
} ptdp_device_summary;

typedef struct {
    int status;                    /* 0, or the first error's code          */
    int failed_rank;               /* its rank, or -1                       */
    char message[PTDP_MSG_MAX];    /* its message                           */
    int world_size;
    ptdp_device_summary *devices;  /* world_size entries (malloc'd)         */
} ptdp_launch_result;

typedef struct {
    size_t device_mem;             /* arena capacity; 0 = default (4 GiB)   */
    double watchdog_s;             /* 0 = default (60 s)                    */
    const ptdp_profile *profile;   /* NULL = ptdp_profile_default()         */
    ptdp_algo algo;                /* all_reduce algorithm                  */
    const char *trace_path;        /* write a Chrome trace here, or NULL    */
    int spin;                      /* -1/0 auto: spin only while devices do
                                      not outnumber cores; 1 never spin     */
    ptdp_launch_result *result;    /* filled if not NULL; free with
                                      ptdp_launch_result_free               */
} ptdp_launch_opts;

#define PTDP_DEFAULT_DEVICE_MEM ((size_t)4 << 30)
#define PTDP_DEFAULT_WATCHDOG_S 60.0

/* Run fn(dev, arg) on world_size (1..64) device threads and wait for all.
 * Returns 0, or the first failure's code (its message in opts->result, and
 * printed nowhere: the caller decides).  opts may be NULL. */
int  ptdp_launch(int world_size, ptdp_device_fn fn, void *arg, const ptdp_launch_opts *opts);
void ptdp_launch_result_free(ptdp_launch_result *r);

/* Record this device's failure (the first one wins its message), abort the
 * world so no other device waits forever, and return `code`.
 *   return ptdp_fail(dev, PTDP_EINVAL, "--tp %d does not divide …", tp); */
int  ptdp_fail(ptdp_device *dev, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* True once any device of the world has failed. */
bool ptdp_aborted(const ptdp_device *dev);

/* Allocate from dev's arena; on failure fails the device with the arena's
 * message (device, tensor, bytes asked, in use, capacity) and returns NULL. */
void *ptdp_alloc(ptdp_device *dev, size_t bytes, ptdp_mem_category cat, const char *name);
void  ptdp_free(ptdp_device *dev, void *p);

/* Account `flops` of work that started at wall time wall_start
 * (ptdp_wall_now()): advances the virtual clock by flops / peak and records
 * a trace event called `name`. */
void ptdp_compute(ptdp_device *dev, const char *name, double flops, double wall_start);
/* Advance the virtual clock by `seconds` of compute directly. */
void ptdp_compute_seconds(ptdp_device *dev, const char *name, double seconds, double wall_start);

#endif
