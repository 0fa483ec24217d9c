/*
 * wait.h — how a device waits for other devices, and how a failure stops them
 * all (private to the library).
 *
 * Every wait in ptdp — a barrier, a message that has not arrived, a peer
 * that has not taken our data yet — goes through one primitive,
 * ptdp_wait_until(), which waits for a condition on shared atomics:
 *
 *     spin a few microseconds ──► still not ready? ──► sleep on my condition
 *     (only while devices do      (most waits end       variable in slices of
 *      not outnumber cores)        while spinning)       25 ms, re-checking:
 *                                                         ready? aborted?
 *                                                         watchdog? peer gone?
 *
 * Spinning is what makes a 4 KiB all-reduce take well under a microsecond
 * when every device has its own core; sleeping is what keeps 16 devices on
 * 2 cores from burning each other's time slices.  Each slice also notices a
 * world abort (another device failed), the watchdog deadline, and a peer
 * that has already returned from its device function, so no wait can hang.
 *
 * The sleeper/waker handshake is Dekker's: the sleeper announces itself
 * (sleeping = 1) and then re-checks the condition; the waker changes the
 * condition and then looks for sleepers.  With sequentially consistent
 * atomics on both sides at least one of them sees the other, so a wake-up is
 * never lost, and a waker that finds nobody asleep makes no system call.
 *
 * The world (struct ptdp_world) is the state all devices of one
 * ptdp_launch share: the parking spot of each device, the abort flag and
 * the first failure.
 */
#ifndef PTDP_WAIT_H
#define PTDP_WAIT_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "ptdp/coll.h"
#include "ptdp/device.h"

/* What a waiting device is waiting in, for the watchdog's report. */
typedef struct {
    ptdp_coll op;
    const char *group;          /* communicator name                        */
    const char *file;
    int line;
    int peer;                   /* p2p: the peer's rank in the group, or -1 */
    int tag;
    const int *members;         /* world ranks whose return would leave     */
    int nmembers;               /*   this wait unsatisfiable                */
    /* The peers are past the point of no return: they will get here in
     * bounded time (a collective's closing barrier after its meeting, a
     * copy a peer has claimed), and until they do they may still read our
     * buffers.  An abort does not end such a wait; the watchdog still does. */
    bool past_abort;
} ptdp_wait_why;

/* One device's parking spot.  Its own cache line: wakers read `sleeping`
 * on every barrier, and it must not share a line with another device's. */
typedef struct {
    alignas(64) atomic_int sleeping;    /* 1 while its owner may be asleep  */
    atomic_int finished;                /* 1 once its device fn returned    */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    /* Under `lock`: what the device waits in, published when it falls
     * asleep (the fast, spinning path publishes nothing). */
    bool waiting;
    double since;                       /* wall time the wait began         */
    char what[192];
} ptdp_parker;

struct ptdp_world {
    int size;
    bool spin;                          /* spinning allowed?                */
    double watchdog_s;
    atomic_int aborted;
    pthread_mutex_t fail_lock;          /* guards the first failure         */
    int fail_code, fail_rank;
    char fail_msg[PTDP_MSG_MAX];
    ptdp_device *devices[PTDP_MAX_DEVICES];
    ptdp_parker parkers[PTDP_MAX_DEVICES];
    /* A world of processes (comm/mpi) holds one device per process: a
     * failure cannot raise a flag in the others' memory, so after recording
     * it, ptdp_world_fail hands it to on_fail, which ends the job.  NULL for
     * threads. */
    void (*on_fail)(ptdp_device *dev, int code, const char *msg);
    void (*before_abort)(void *ctx);    /* called by on_fail first (launch.h) */
    void *before_abort_ctx;
    /* Combine host memory over the processes (launch.h, ptdp_host_merge);
     * NULL for threads, who share one host. */
    int (*host_merge)(ptdp_device *dev, void *buf, size_t bytes);
};

typedef bool (*ptdp_ready_fn)(const void *arg);

/* Initialise / destroy the world's waiting machinery (not the devices). */
int  ptdp_world_init(struct ptdp_world *w, int size, bool spin, double watchdog_s);
void ptdp_world_destroy(struct ptdp_world *w);

/* Wait until ready(arg) is true.  Returns 0, PTDP_EABORTED (another device
 * failed; never for a why->past_abort wait), or the code of the failure this wait itself raised: the watchdog
 * (PTDP_ETIMEDOUT) or a member of `why` that returned while we still wait
 * for it (PTDP_EMISMATCH). */
int  ptdp_wait_until(ptdp_device *self, ptdp_ready_fn ready, const void *arg,
                     const ptdp_wait_why *why);

/* Wake device `world_rank` if it sleeps.  Call after changing what it waits
 * for (with a seq_cst store). */
void ptdp_wake(struct ptdp_world *w, int world_rank);
/* Wake every sleeping device: abort, a device that returned. */
void ptdp_wake_all(struct ptdp_world *w);

/* Set the abort flag and wake everybody. */
void ptdp_world_abort(struct ptdp_world *w);
/* Has any device of the world failed? */
bool ptdp_world_aborted(const struct ptdp_world *w);

/* The one way a failure enters the world: record it as dev's error (its
 * first one wins) and as the world's (the first of all devices wins), raise
 * the abort flag and wake everybody.  Returns code (PTDP_EUSER if code was
 * not negative: a failure is never "ok").  ptdp_fail (device.c) formats its
 * message and calls this; so does the watchdog below, so the dependency
 * runs one way: devices use the waiting layer, never the reverse. */
int  ptdp_world_fail(ptdp_device *dev, int code, const char *msg);

/* "recv from rank 1 tag 0 in group 'pp' at pp.c:120": what `why` waits in. */
void ptdp_wait_describe(const ptdp_wait_why *why, char *buf, size_t len);

/* Write "rank 0: waiting in …; rank 1: finished; …" for every device. */
void ptdp_world_report(struct ptdp_world *w, char *buf, size_t len);

/*
 * A barrier for the members of one group: one counter that only grows.
 *
 * Every arrival takes a ticket (fetch-and-add).  With n members, tickets
 * k·n … k·n + n-1 belong to crossing k, which is complete once the counter
 * reaches (k+1)·n: the holder of the last ticket of a crossing sees that
 * itself and wakes the others, who wait for the counter to get there.
 *
 *      tickets  0 1 2 | 3 4 5 | 6 7 8      (n = 3)
 *               crossing 0    crossing 1 …
 *
 * Nobody can take a ticket of crossing k+1 before crossing k is complete
 * (it would have to leave crossing k first), so the counter needs no reset
 * and the barrier is reusable at once — the job the "sense" flag does in a
 * classic sense-reversing barrier.  One cache line, one atomic operation
 * per arrival; 64 bits do not wrap in the life of the universe.
 *
 * Leaving on an abort is all or nothing.  A waiter that sees the abort
 * takes its ticket back (compare-and-swap the counter down) unless the
 * crossing completed in the meantime — then it crosses like everyone
 * else.  So no member goes on believing all arrived while one of them has
 * left to free the buffers the others are about to read.
 */
typedef struct {
    alignas(64) atomic_ullong arrivals;
    int n;
    const int *world_rank;              /* members, to wake them            */
} ptdp_barrier;

void ptdp_barrier_init(ptdp_barrier *b, int n, const int *world_rank);
int  ptdp_barrier_cross(ptdp_barrier *b, ptdp_device *self, const ptdp_wait_why *why);

#endif
