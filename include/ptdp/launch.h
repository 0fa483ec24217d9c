/*
 * launch.h — start N simulated devices and wait for them.
 *
 * ptdp_launch(N, fn, arg, opts) starts N device threads and hands each its
 * ptdp_device (device.h): rank, arena, clocks, and a world communicator
 * over the shared-memory backend.  It returns when every device's fn has
 * returned, with the first failure (code, rank, message) and, per device,
 * its peak memory, bytes sent and clocks.
 *
 *   static int hello(ptdp_device *dev, void *arg)
 *   {
 *       double x = dev->rank;
 *       return ptdp_all_reduce(dev->world, &x, &x, 1, PTDP_F64, PTDP_SUM);
 *   }
 *   …
 *   ptdp_launch(4, hello, NULL, NULL);          every device ends with x = 6
 */
#ifndef PTDP_LAUNCH_H
#define PTDP_LAUNCH_H

#include "device.h"

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
    int trace_status;              /* 0, or why the trace file (trace_path)
                                      could not be written: an output of its
                                      own, which does not fail the run      */
    char trace_message[PTDP_MSG_MAX];
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
 * printed nowhere: the caller decides).  opts may be NULL.  A trace that
 * cannot be written is reported in result->trace_status and trace_message
 * (the run itself may have succeeded); without a result it is returned. */
int  ptdp_launch(int world_size, ptdp_device_fn fn, void *arg, const ptdp_launch_opts *opts);
void ptdp_launch_result_free(ptdp_launch_result *r);

#endif
