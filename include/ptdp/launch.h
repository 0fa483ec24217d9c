/*
 * launch.h — start N simulated devices and wait for them.
 *
 * Threads by default; with opts.backend = PTDP_BACKEND_MPI, under mpirun,
 * each process is one device and ptdp_launch makes this process's (mpi.h).
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

/* Who plays the devices: threads of this process (the default), or one
 * process per device started by mpirun (mpi.h; built with -Dmpi). */
typedef enum { PTDP_BACKEND_THREADS = 0, PTDP_BACKEND_MPI } ptdp_backend;

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
    ptdp_trace    **traces;        /* with opts->keep_traces: world_size
                                      traces, each device's events (NULL on
                                      a process that does not hold them all);
                                      freed by ptdp_launch_result_free      */
} ptdp_launch_result;

typedef struct {
    size_t device_mem;             /* arena capacity; 0 = default (4 GiB)   */
    double watchdog_s;             /* 0 = default (60 s)                    */
    const ptdp_profile *profile;   /* NULL = ptdp_profile_default()         */
    ptdp_algo algo;                /* all_reduce algorithm                  */
    const char *trace_path;        /* write a Chrome trace here, or NULL    */
    int keep_traces;               /* 1: record the traces and hand them to
                                      result->traces (a page draws them)    */
    int spin;                      /* -1/0 auto: spin only while devices do
                                      not outnumber cores; 1 never spin     */
    ptdp_launch_result *result;    /* filled if not NULL; free with
                                      ptdp_launch_result_free               */
    ptdp_backend backend;          /* threads (0) or MPI processes          */
    /* Processes (MPI): a failure ends the job (MPI_Abort) before the host
     * can write what it holds; the failing process calls this first, to
     * keep what must survive (ptdp train: the --log of the steps
     * completed).  Threads return from ptdp_launch instead: unused. */
    void (*before_abort)(void *ctx);
    void *before_abort_ctx;
    int blas_threads;              /* threads per device for its matrix
                                      products; 0 = ptdp_blas_threads(0, N)
                                      (threads; processes under MPI keep
                                      one thread each)                      */
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

/* Threads each of `devices` devices on this host uses for its matrix
 * products: `asked` if > 0; else OPENBLAS_NUM_THREADS when it is a positive
 * number (per device); else cores / devices, at least 1.  The bits of every
 * result are the same whatever the count (src/nn/blas.c). */
int  ptdp_blas_threads(int asked, int devices);

/*
 * One host, or one per process.  Threads share the host's memory, so what
 * a device writes into a host table (a step's numbers, its shard of a
 * checkpoint) every other device and the caller see.  With processes (the
 * MPI backend) each process's host holds only what its own device wrote.
 * ptdp_host_merge brings the rest in: every process's copy of buf becomes
 * the bitwise OR of all of them —
 *
 *      process 0: [x0 | 0  | 0 ]
 *      process 1: [0  | x1 | 0 ]   ──OR──►  every process: [x0 | x1 | x2]
 *      process 2: [0  | 0  | x2]
 *
 * — exact when every byte is written by one device (or identically by
 * several, as replicas do) and left zero by the others.  It is host
 * bookkeeping, not device communication: no bytes or virtual time are
 * counted.  Every device calls it at the same point, like a collective.
 * With threads it does nothing and returns 0.
 */
int  ptdp_host_merge(ptdp_device *dev, void *buf, size_t bytes);
/* True when every device of the run shares this host (threads). */
bool ptdp_host_shared(const ptdp_device *dev);
/* The host that prints and writes files: always with threads; with
 * processes, rank 0's. */
bool ptdp_host_is_root(const ptdp_launch_opts *opts);

#endif
