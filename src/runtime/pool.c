/*
 * pool.c — a device's helper threads: run the parts of one job, wait for all.
 *
 * A device is a thread.  On a laptop with 8 cores and one device, the other
 * 7 cores would sit idle, so each device may own helpers:
 *
 *     device thread ──run(job, 3 parts)──┬── part 0 (itself)
 *                                        ├── helper 1: part 1
 *                                        └── helper 2: part 2
 *                    ◄── all done ───────┘
 *
 * Threads per device (ptdp_pool_threads_for): what the caller asks
 * (--blas-threads N); else OPENBLAS_NUM_THREADS, read as "this many per
 * device"; else cores / devices, at least 1 — so devices × threads never
 * outnumber the cores by default.  The operating system places the threads;
 * with no more threads than cores it gives each its own core, and ptdp pins
 * nothing (pinning is not POSIX).
 *
 * Waiting is the rule of runtime/wait.h: spin briefly, then block.  A helper
 * with nothing to do spins a moment on the job counter (the next product is
 * often microseconds away) and then sleeps on a condition variable; the
 * device waiting for its helpers does the same.  Spinning is allowed only
 * when every thread of the run has a core (the launcher decides).  Every
 * hand-over goes through the one mutex, so no wake-up is lost:
 *
 *     device:  lock; job, pending = parts-1, generation++; broadcast; unlock
 *     helper:  lock; wait until generation moved; unlock; run its part;
 *              lock; if --pending == 0 signal the device; unlock
 *
 * A part never fails and never waits for another device, so a device in
 * ptdp_pool_run always comes back; a failing device stops the others
 * through the communicator as before, and the launcher ends the pools after
 * every device thread has returned.
 */
#include "runtime/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptdp/error.h"

enum { POOL_MAX_THREADS = 256, SPIN_ROUNDS = 20000 };

struct ptdp_pool {
    int threads;                      /* caller + helpers                 */
    bool spin;
    pthread_mutex_t lock;
    pthread_cond_t work, done;
    atomic_uint generation;           /* one more per job                 */
    atomic_int pending;               /* helper parts not finished        */
    bool stop;                        /* under lock                       */
    ptdp_pool_fn fn;                  /* the job: written before the      */
    void *arg;                        /*   generation moves               */
    int parts;
    int started;                      /* helpers running                  */
    struct helper { ptdp_pool *pool; int part; pthread_t tid; } *helpers;
};

static _Thread_local ptdp_pool *current;

void ptdp_pool_set_current(ptdp_pool *p) { current = p; }
ptdp_pool *ptdp_pool_current(void) { return current; }
int ptdp_pool_threads(const ptdp_pool *p) { return p ? p->threads : 1; }

/* ------------------------------------------------------------ helpers */

/* Spin a moment for the generation to leave `seen`, then sleep for it. */
static bool next_job(ptdp_pool *p, unsigned seen)
{
    for (int i = 0; p->spin && i < SPIN_ROUNDS; i++)
        if (atomic_load(&p->generation) != seen)
            break;
    pthread_mutex_lock(&p->lock);
    while (atomic_load(&p->generation) == seen && !p->stop)
        pthread_cond_wait(&p->work, &p->lock);
    bool go = !p->stop;
    pthread_mutex_unlock(&p->lock);
    return go;
}

static void *helper_main(void *h_)
{
    struct helper *h = h_;
    ptdp_pool *p = h->pool;
    unsigned seen = 0;
    while (next_job(p, seen)) {
        pthread_mutex_lock(&p->lock);           /* the job, as published  */
        seen = atomic_load(&p->generation);
        ptdp_pool_fn fn = p->fn;
        void *arg = p->arg;
        int parts = p->parts;
        pthread_mutex_unlock(&p->lock);
        if (h->part >= parts)
            continue;                           /* not needed this time   */
        fn(arg, h->part, parts);
        pthread_mutex_lock(&p->lock);
        if (atomic_fetch_sub(&p->pending, 1) == 1)
            pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->lock);
    }
    return NULL;
}

/* ------------------------------------------------------------ the pool */

int ptdp_pool_create(ptdp_pool **out, int threads, bool spin)
{
    *out = NULL;
    if (threads < 1)
        threads = 1;
    if (threads > POOL_MAX_THREADS)
        threads = POOL_MAX_THREADS;
    ptdp_pool *p = calloc(1, sizeof *p);
    if (!p)
        return PTDP_ENOMEM;
    p->threads = threads;
    p->spin = spin;
    atomic_init(&p->generation, 0);
    atomic_init(&p->pending, 0);
    p->helpers = calloc((size_t)threads, sizeof *p->helpers);
    if (!p->helpers || pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p->helpers);
        free(p);
        return PTDP_ENOMEM;
    }
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    for (int i = 1; i < threads; i++) {
        struct helper *h = &p->helpers[p->started];
        *h = (struct helper){ p, i, 0 };
        if (pthread_create(&h->tid, NULL, helper_main, h) != 0) {
            ptdp_pool_destroy(p);
            return PTDP_ENOMEM;
        }
        p->started++;
    }
    *out = p;
    return 0;
}

void ptdp_pool_destroy(ptdp_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->started; i++)
        pthread_join(p->helpers[i].tid, NULL);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->lock);
    free(p->helpers);
    free(p);
}

void ptdp_pool_run(ptdp_pool *p, int parts, ptdp_pool_fn fn, void *arg)
{
    if (!p || parts > p->threads)
        parts = p ? p->threads : 1;
    if (parts <= 1) {
        fn(arg, 0, 1);
        return;
    }
    pthread_mutex_lock(&p->lock);
    p->fn = fn;
    p->arg = arg;
    p->parts = parts;
    atomic_store(&p->pending, parts - 1);
    atomic_fetch_add(&p->generation, 1);
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);

    fn(arg, 0, parts);                          /* our own part           */

    for (int i = 0; p->spin && i < SPIN_ROUNDS; i++)
        if (atomic_load(&p->pending) == 0)
            break;
    pthread_mutex_lock(&p->lock);               /* also orders their work */
    while (atomic_load(&p->pending) != 0)       /*   before what we do    */
        pthread_cond_wait(&p->done, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

/* ------------------------------------------------------------ counts */

int ptdp_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n < POOL_MAX_THREADS ? n : POOL_MAX_THREADS) : 1;
}

int ptdp_pool_threads_for(int asked, int devices)
{
    if (asked > 0)
        return asked < POOL_MAX_THREADS ? asked : POOL_MAX_THREADS;
    const char *env = getenv("OPENBLAS_NUM_THREADS");
    if (env && *env) {
        char *end;
        long n = strtol(env, &end, 10);
        if (*end == '\0' && n > 0)
            return n < POOL_MAX_THREADS ? (int)n : POOL_MAX_THREADS;
    }
    int per = ptdp_cores() / (devices > 0 ? devices : 1);
    return per > 0 ? per : 1;
}

void ptdp_pool_share(double work, double min, ptdp_pool_fn fn, void *arg)
{
    ptdp_pool *p = ptdp_pool_current();
    ptdp_pool_run(p, work >= min ? ptdp_pool_threads(p) : 1, fn, arg);
}

/* ---- clearing a large buffer ------------------------------------------ */

typedef struct { unsigned char *dst; size_t bytes; } clear_job;

static void clear_block(void *arg, int part, int parts)
{
    const clear_job *c = arg;
    size_t b0, b1;
    ptdp_pool_block(c->bytes, part, parts, &b0, &b1);
    memset(c->dst + b0, 0, b1 - b0);
}

void ptdp_pool_clear(void *dst, size_t bytes)
{
    clear_job c = { dst, bytes };
    ptdp_pool_share((double)bytes, 1 << 20, clear_block, &c);   /* below a MiB one memset is quicker */
}
