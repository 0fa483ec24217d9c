/*
 * wait.c — the one way a device waits: spin briefly, then sleep in slices.
 *
 *   ready? ─yes─► return 0
 *     │no
 *   spin ≤ 50 µs (only if every device has a core of its own)
 *     │still not ready
 *   sleeping = 1 ──► loop: ready? aborted? watchdog? a needed peer returned?
 *                          else sleep ≤ 25 ms on my condition variable
 *
 * Why not pthread_barrier_t or semaphores?  They are not portable (macOS has
 * neither barrier nor unnamed semaphores), each crossing is a system call
 * (40–90 µs in a VM), and they cannot notice that another device failed.
 * The sleep slices bound how late an abort or the watchdog is noticed even
 * if a wake-up went astray; the Dekker handshake (see wait.h) means none
 * does.
 */
#include "runtime/wait.h"

#include "core/ranks.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ptdp/clock.h"
#include "ptdp/error.h"

#define SPIN_SECONDS  50e-6   /* longer than a typical load imbalance of a
                                 small collective, far shorter than a
                                 scheduler time slice                     */
#define SLEEP_SLICE_S 0.025   /* how often a sleeper re-checks the world  */

static inline void cpu_relax(void)
{
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __asm__ __volatile__("pause");
#elif defined(__GNUC__) && defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* ---------------------------------------------------------------- world */

int ptdp_world_init(struct ptdp_world *w, int size, bool spin, double watchdog_s)
{
    memset(w, 0, sizeof *w);
    w->size = size;
    w->spin = spin;
    w->watchdog_s = watchdog_s;
    w->fail_rank = -1;
    atomic_init(&w->aborted, 0);
    if (pthread_mutex_init(&w->fail_lock, NULL) != 0)
        return PTDP_ENOMEM;
    for (int r = 0; r < size; r++) {
        ptdp_parker *p = &w->parkers[r];
        atomic_init(&p->sleeping, 0);
        atomic_init(&p->finished, 0);
        pthread_condattr_t attr;
        pthread_condattr_init(&attr);
#if !defined(__APPLE__)
        /* Sleep slices on the monotonic clock where POSIX lets us choose. */
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
#endif
        int bad = pthread_mutex_init(&p->lock, NULL) != 0;
        if (!bad && pthread_cond_init(&p->wake, &attr) != 0) {
            pthread_mutex_destroy(&p->lock);
            bad = 1;
        }
        pthread_condattr_destroy(&attr);
        if (bad) {
            w->size = r;
            ptdp_world_destroy(w);
            return PTDP_ENOMEM;
        }
    }
    return 0;
}

void ptdp_world_destroy(struct ptdp_world *w)
{
    for (int r = 0; r < w->size; r++) {
        pthread_cond_destroy(&w->parkers[r].wake);
        pthread_mutex_destroy(&w->parkers[r].lock);
    }
    pthread_mutex_destroy(&w->fail_lock);
}

void ptdp_wake(struct ptdp_world *w, int world_rank)
{
    ptdp_parker *p = &w->parkers[world_rank];
    if (atomic_load(&p->sleeping)) {          /* Dekker: after our store  */
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
    }
}

void ptdp_wake_all(struct ptdp_world *w)
{
    for (int r = 0; r < w->size; r++)
        ptdp_wake(w, r);
}

void ptdp_world_abort(struct ptdp_world *w)
{
    atomic_store(&w->aborted, 1);
    ptdp_wake_all(w);
}

bool ptdp_world_aborted(const struct ptdp_world *w)
{
    return atomic_load(&w->aborted) != 0;
}

int ptdp_world_fail(ptdp_device *dev, int code, const char *msg)
{
    if (code >= 0)
        code = PTDP_EUSER;                 /* a failure is never "ok" */
    if (dev->status == 0) {
        dev->status = code;
        snprintf(dev->error, sizeof dev->error, "%s", msg);
    }
    struct ptdp_world *w = dev->w;
    pthread_mutex_lock(&w->fail_lock);
    if (w->fail_code == 0) {               /* the first failure wins */
        w->fail_code = code;
        w->fail_rank = dev->rank;
        snprintf(w->fail_msg, sizeof w->fail_msg, "%s", msg);
    }
    pthread_mutex_unlock(&w->fail_lock);
    ptdp_world_abort(w);
    if (w->on_fail)
        w->on_fail(dev, code, msg);        /* processes: ends the job */
    return code;
}

/* ------------------------------------------------------------- reporting */

void ptdp_wait_describe(const ptdp_wait_why *why, char *buf, size_t len)
{
    const char *file = why->file ? why->file : "?";
    const char *slash = strrchr(file, '/');
    if (slash)
        file = slash + 1;
    if (why->op == PTDP_COLL_SEND || why->op == PTDP_COLL_RECV) {
        char world[32] = "";           /* the report's ranks are world ranks */
        if (why->members[0] != why->peer)
            snprintf(world, sizeof world, " (world rank %d)", why->members[0]);
        snprintf(buf, len, "%s %s rank %d%s tag %d in group '%s' at %s:%d",
                 ptdp_coll_name(why->op), why->op == PTDP_COLL_SEND ? "to" : "from",
                 why->peer, world, why->tag, why->group, file, why->line);
    } else {
        snprintf(buf, len, "%s in group '%s' at %s:%d",
                 ptdp_coll_name(why->op), why->group, file, why->line);
    }
}

void ptdp_world_report(struct ptdp_world *w, char *buf, size_t len)
{
    /* What each device is in, grouped: "ranks 0-62: waiting in barrier in
     * group 'world' at a.c:12; rank 63: finished" (core/ranks.h). */
    static _Thread_local char state[PTDP_MAX_DEVICES][200];
    const char *text[PTDP_MAX_DEVICES];
    for (int r = 0; r < w->size; r++) {
        ptdp_parker *p = &w->parkers[r];
        pthread_mutex_lock(&p->lock);
        if (atomic_load(&p->finished))
            snprintf(state[r], sizeof state[r], "finished");
        else if (p->waiting)
            snprintf(state[r], sizeof state[r], "waiting in %s", p->what);
        else
            snprintf(state[r], sizeof state[r], "running");
        pthread_mutex_unlock(&p->lock);
        text[r] = state[r];
    }
    ptdp_describe_ranks(text, w->size, buf, len);
}

/* -------------------------------------------------------------- waiting */

/* Has a device we wait for returned from its device function?  Reading its
 * `finished` flag first and the condition after makes the answer certain:
 * everything it did for us happened before it set the flag. */
static int member_gone(struct ptdp_world *w, const ptdp_device *self,
                       const ptdp_wait_why *why, ptdp_ready_fn ready, const void *arg)
{
    for (int i = 0; i < why->nmembers; i++) {
        int m = why->members[i];
        if (m != self->rank && atomic_load(&w->parkers[m].finished))
            return ready(arg) ? -1 : m;
    }
    return -1;
}

static void deadline_in(struct timespec *ts, double seconds)
{
#if defined(__APPLE__)
    clock_gettime(CLOCK_REALTIME, ts);
#else
    clock_gettime(CLOCK_MONOTONIC, ts);
#endif
    long ns = ts->tv_nsec + (long)(seconds * 1e9);
    ts->tv_sec += ns / 1000000000L;
    ts->tv_nsec = ns % 1000000000L;
}

static int wait_asleep(ptdp_device *self, ptdp_ready_fn ready, const void *arg,
                       const ptdp_wait_why *why)
{
    struct ptdp_world *w = self->w;
    ptdp_parker *p = &w->parkers[self->rank];
    double start = ptdp_wall_now();
    int rc = 0, gone = -1;

    pthread_mutex_lock(&p->lock);
    p->waiting = true;
    p->since = start;
    ptdp_wait_describe(why, p->what, sizeof p->what);
    atomic_store(&p->sleeping, 1);            /* Dekker: before re-checking */
    for (;;) {
        if (ready(arg))
            break;
        if (!why->past_abort && atomic_load(&w->aborted)) {
            rc = PTDP_EABORTED;
            break;
        }
        if (ptdp_wall_now() - start > w->watchdog_s) {
            rc = PTDP_ETIMEDOUT;
            break;
        }
        if ((gone = member_gone(w, self, why, ready, arg)) >= 0) {
            rc = PTDP_EMISMATCH;
            break;
        }
        struct timespec ts;
        deadline_in(&ts, SLEEP_SLICE_S);
        int e = pthread_cond_timedwait(&p->wake, &p->lock, &ts);
        (void)e;                              /* woken, timed out: re-check */
    }
    atomic_store(&p->sleeping, 0);
    pthread_mutex_unlock(&p->lock);

    if (rc == PTDP_ETIMEDOUT || rc == PTDP_EMISMATCH) {
        /* Report while our own state still says what we wait in. */
        char report[PTDP_MSG_MAX], mine[192], msg[PTDP_MSG_MAX];
        ptdp_world_report(w, report, sizeof report);
        ptdp_wait_describe(why, mine, sizeof mine);
        int n;
        if (rc == PTDP_ETIMEDOUT)
            n = snprintf(msg, sizeof msg, "watchdog: rank %d waited %.1f s in %s; ",
                         self->rank, ptdp_wall_now() - start, mine);
        else
            n = snprintf(msg, sizeof msg, "rank %d waits in %s, but rank %d has already returned "
                         "from its device function without making the matching call; ",
                         self->rank, mine, gone);
        size_t used = n > 0 && (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
        size_t room = sizeof msg - 1 - used, len = strlen(report);
        memcpy(msg + used, report, len < room ? len : room);
        msg[used + (len < room ? len : room)] = '\0';
        ptdp_world_fail(self, rc, msg);
    }
    pthread_mutex_lock(&p->lock);
    p->waiting = false;
    pthread_mutex_unlock(&p->lock);
    return rc;
}

int ptdp_wait_until(ptdp_device *self, ptdp_ready_fn ready, const void *arg,
                    const ptdp_wait_why *why)
{
    struct ptdp_world *w = self->w;
    if (ready(arg))
        return 0;
    if (w->spin) {
        double until = 0.0;
        for (unsigned i = 1;; i++) {
            if (ready(arg))
                return 0;
            if (!why->past_abort && atomic_load_explicit(&w->aborted, memory_order_relaxed))
                return PTDP_EABORTED;
            cpu_relax();
            if ((i & 127) == 0) {             /* read the clock rarely     */
                double now = ptdp_wall_now();
                if (until == 0.0)
                    until = now + SPIN_SECONDS;
                else if (now > until)
                    break;
            }
        }
    }
    return wait_asleep(self, ready, arg, why);
}

/* -------------------------------------------------------------- barrier */

void ptdp_barrier_init(ptdp_barrier *b, int n, const int *world_rank)
{
    atomic_init(&b->arrivals, 0);
    b->n = n;
    b->world_rank = world_rank;
}

typedef struct {
    const atomic_ullong *arrivals;
    unsigned long long complete;
} barrier_wait;

static bool crossing_complete(const void *arg)
{
    const barrier_wait *bw = arg;
    return atomic_load(bw->arrivals) >= bw->complete;
}

int ptdp_barrier_cross(ptdp_barrier *b, ptdp_device *self, const ptdp_wait_why *why)
{
    unsigned long long n = (unsigned long long)b->n;
    unsigned long long ticket = atomic_fetch_add(&b->arrivals, 1);
    unsigned long long complete = (ticket / n + 1) * n;
    if (ticket + 1 == complete) {
        /* The last ticket of this crossing: release the others. */
        for (int i = 0; i < b->n; i++)
            if (b->world_rank[i] != self->rank)
                ptdp_wake(self->w, b->world_rank[i]);
        return 0;
    }
    barrier_wait bw = { &b->arrivals, complete };
    int rc = ptdp_wait_until(self, crossing_complete, &bw, why);
    if (rc != PTDP_EABORTED)
        return rc;
    /* Aborted: take my ticket back, unless the last one arrived meanwhile
     * (then the others already read my buffers, and I cross with them). */
    unsigned long long now = atomic_load(&b->arrivals);
    while (now < complete)
        if (atomic_compare_exchange_weak(&b->arrivals, &now, now - 1))
            return PTDP_EABORTED;
    return 0;
}
