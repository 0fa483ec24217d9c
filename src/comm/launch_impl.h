/*
 * launch_impl.h — what a backend gives the launcher (private to comm/).
 *
 * Every launch does the same things (comm/launch.c): make the world's
 * waiting machinery, give each device its arena, clocks, profile, trace
 * and helper threads, run fn on it, stop every device when one fails,
 * collect what each device looked like, write the trace.  A backend only
 * says what its process owns and how a device is started:
 *
 *                      threads (launch.c)          processes (comm/mpi/mpi.c)
 *   open               all N devices; a shared-    MPI_Init; device r = my MPI
 *                      memory group for the world  rank; the host's communicators
 *   world_comm         over the shm group          over a copy of MPI_COMM_WORLD
 *   run                a thread per device, join   the device in this thread,
 *                                                  then wait for every rank
 *   merge_summaries    — (one host)                all-gather every rank's
 *   merge_traces       — (one host)                every rank's events to rank 0
 *   on_fail            — (the flag is enough)      end the job (MPI_Abort)
 *   host_merge         — (one memory)              OR the hosts' copies
 *   close              drop the group              free the communicators
 *
 * In a build without MPI, comm/mpi/mpi_none.c gives a processes backend
 * whose open says how to get one.
 */
#ifndef PTDP_COMM_LAUNCH_IMPL_H
#define PTDP_COMM_LAUNCH_IMPL_H

#include "ptdp/launch.h"
#include "ptdp/trace.h"
#include "runtime/pool.h"
#include "runtime/wait.h"

typedef struct ptdp_launch_backend ptdp_launch_backend;

/* What this process holds during one launch.  The backend's open fills the
 * part marked (open); launch.c the rest. */
typedef struct {
    struct ptdp_world world;               /* first: 64-byte aligned        */
    ptdp_device dev[PTDP_MAX_DEVICES];     /* dev[r] for the devices I own  */
    ptdp_pool *pool[PTDP_MAX_DEVICES];     /* each one's helper threads     */
    double wall_s[PTDP_MAX_DEVICES];       /* each one's run, wall clock    */
    int n;                                 /* devices in the world          */
    int first, count;                      /* (open) I own first..+count-1  */
    int on_host;                           /* (open) devices sharing this
                                              host's cores: may they spin? */
    int threads;                           /* (open) per device, for its
                                              matrix products               */
    bool spin;                             /* may a waiting device spin?    */
    double watchdog_s;                     /* the deadline of any wait      */
    ptdp_device_fn fn;
    void *arg;
    const ptdp_launch_opts *opts;
    const ptdp_launch_backend *backend;
    void *own;                             /* (open) the backend's state    */
} ptdp_launch_state;

struct ptdp_launch_backend {
    /* This process's part of the world: check the request, set up what the
     * process shares, say which devices it owns.  0, or a code and msg. */
    int  (*open)(ptdp_launch_state *L, char *msg, size_t len);
    /* Device dev's world communicator, or NULL (out of memory). */
    ptdp_comm *(*world_comm)(ptdp_launch_state *L, ptdp_device *dev);
    /* Start every device I own — play(L, r) in the thread that plays
     * device r — and return when every device of the world has returned. */
    void (*run)(ptdp_launch_state *L, void (*play)(ptdp_launch_state *L, int r));
    /* The other processes' parts of the result: every device's summary
     * (mine are in all[first..]; all may be NULL: out of memory), every
     * device's trace (mine are in traces[first..]; true if this process
     * now holds them all and writes the file).  NULL: one process. */
    void (*merge_summaries)(ptdp_launch_state *L, ptdp_device_summary *all);
    bool (*merge_traces)(ptdp_launch_state *L, ptdp_trace **traces);
    /* Undo open. */
    void (*close)(ptdp_launch_state *L);
    /* The world's hooks (runtime/wait.h): NULL for threads. */
    void (*on_fail)(ptdp_device *dev, int code, const char *msg);
    int  (*host_merge)(ptdp_device *dev, void *buf, size_t bytes);
};

/* The two backends: threads (launch.c), processes (comm/mpi/mpi.c, or
 * mpi_none.c without MPI). */
extern const ptdp_launch_backend ptdp_threads_backend;
extern const ptdp_launch_backend ptdp_mpi_backend;

#endif
