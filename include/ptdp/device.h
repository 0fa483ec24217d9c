/*
 * device.h — one simulated accelerator, and the services its code uses.
 *
 * One POSIX thread plays one device (launch.h starts them).  A device has
 * its rank, its own memory arena, its clocks and statistics, and the world
 * communicator.  Devices share nothing else: all data moves through comm.h.
 *
 * The services every module above uses — and the only ones:
 *
 *   ptdp_fail      this device failed: record why, stop every device
 *   ptdp_aborted   has any device failed?
 *   ptdp_alloc     memory from the device's arena, tagged with a category
 *   ptdp_tensor_alloc   the same for a tensor
 *   ptdp_compute   account work on the virtual clock (and in the trace)
 *
 * Failure is collective.  A device that fails (out of memory, an error its
 * code returns, a mismatched collective, the watchdog) aborts the world:
 * every other device's pending and later communication returns
 * PTDP_EABORTED, each thread unwinds, and the launch reports the first
 * error and the rank that raised it.
 */
#ifndef PTDP_DEVICE_H
#define PTDP_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "arena.h"
#include "clock.h"
#include "coll.h"
#include "tensor.h"

#define PTDP_MAX_DEVICES 64
#define PTDP_MSG_MAX 2048

typedef struct ptdp_world ptdp_world;   /* what the devices of one launch share (runtime) */
typedef struct ptdp_comm ptdp_comm;     /* comm.h                                          */
typedef struct ptdp_trace ptdp_trace;   /* trace.h                                         */
typedef struct ptdp_counts ptdp_counts; /* counters.h                                      */

typedef struct ptdp_device {
    int rank, world_size;
    ptdp_arena *arena;
    ptdp_comm *world;            /* every device                          */
    const ptdp_profile *profile; /* cost model of the virtual clock       */
    int bf16;                    /* 1: compute at the profile's bf16 peak
                                    (the training loop under bf16)        */
    int fp8;                     /* 1: the linear layers' products from FP8
                                    operands (--fp8): the models price them
                                    at the FP8 peak with their operands'
                                    quantization (device_impl.h)           */
    ptdp_algo algo;              /* all_reduce algorithm (resolved)       */
    ptdp_clock clock;            /* virtual time                          */
    double wall0;                /* wall time at launch                   */
    ptdp_comm_stats stats;       /* bytes and calls                       */
    ptdp_trace *trace;           /* NULL unless tracing                   */
    ptdp_counts *counts;         /* where it adds the run's named counters
                                    (counters.h); NULL outside a training
                                    run: whatever it counts goes nowhere   */
    int status;                  /* first error of this device, or 0      */
    char error[PTDP_MSG_MAX];    /* its message                           */
    ptdp_world *w;
} ptdp_device;

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

/* Allocate a zero-filled rows x cols tensor in dev's arena.  On out of
 * memory: returns PTDP_ENOMEM and fails the device (ptdp_fail) with the
 * arena's message, which names `name`.  rows or cols may be 0. */
int  ptdp_tensor_alloc(struct ptdp_device *dev, ptdp_tensor *t, const char *name,
                       ptdp_mem_category cat, int rows, int cols);
/* The same without the zero-fill (arena.h): for an output written whole
 * before it is read. */
void *ptdp_alloc_uninit(ptdp_device *dev, size_t bytes, ptdp_mem_category cat, const char *name);
/* Free an owned tensor (views are ignored) and clear *t. */
void ptdp_tensor_free(struct ptdp_device *dev, ptdp_tensor *t);

/* Account `flops` of work that started at wall time wall_start
 * (ptdp_wall_now()): advances the virtual clock by flops / peak and records
 * a trace event called `name`.  peak = ptdp_profile_peak(profile, bf16):
 * the bf16 peak when the device computes in bf16 and the profile gives one. */
void ptdp_compute(ptdp_device *dev, const char *name, double flops, double wall_start);
/* Advance the virtual clock by `seconds` of compute directly. */
void ptdp_compute_seconds(ptdp_device *dev, const char *name, double seconds, double wall_start);

#endif
