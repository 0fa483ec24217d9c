/*
 * pool.h — a device's helper threads (private to the library).
 *
 * A device is one thread.  When the machine has more cores than devices,
 * each device also owns a small pool of helper threads that share its large
 * matrix products (nn/blas.c splits them).  The pool knows nothing of BLAS:
 * it runs fn(arg, part, parts) for part = 0 .. parts-1, part 0 on the
 * calling device thread and the others on its helpers, and returns when all
 * are done.  See pool.c for the waiting and the choice of thread counts.
 */
#ifndef PTDP_RUNTIME_POOL_H
#define PTDP_RUNTIME_POOL_H

#include <stdbool.h>
#include <stddef.h>

typedef struct ptdp_pool ptdp_pool;
typedef void (*ptdp_pool_fn)(void *arg, int part, int parts);

/* A pool of `threads` in all: the caller plus threads-1 helpers (none for
 * threads <= 1).  spin: may a waiter spin briefly before it blocks (only
 * when every thread of the run has a core).  Returns 0 or PTDP_ENOMEM. */
int  ptdp_pool_create(ptdp_pool **out, int threads, bool spin);
void ptdp_pool_destroy(ptdp_pool *p);
int  ptdp_pool_threads(const ptdp_pool *p);

/* Run fn(arg, part, parts) for every part < parts (parts <= threads). */
void ptdp_pool_run(ptdp_pool *p, int parts, ptdp_pool_fn fn, void *arg);

/* Part `part` of `parts`' block of n items, [*first, *end): the items
 * n part / parts up to n (part + 1) / parts — every item in exactly one
 * block, the blocks' sizes within one of each other. */
static inline void ptdp_pool_block(size_t n, int part, int parts, size_t *first, size_t *end)
{
    *first = n * (size_t)part / (size_t)parts;
    *end = n * (size_t)(part + 1) / (size_t)parts;
}

/* fn on every thread of the current pool when the pass has at least
 * `min` units of work (elements, bytes), else on the calling thread alone:
 * below that, waking the helpers costs more than they save.  Each pass
 * measured its own `min`. */
void ptdp_pool_share(double work, double min, ptdp_pool_fn fn, void *arg);

/* dst[0 .. bytes) set to zero, in blocks shared with the current pool's
 * helpers when it is large (a step's gradients: GPT-2's 0.5 GB). */
void ptdp_pool_clear(void *dst, size_t bytes);

/* The pool of the device this thread plays (set by the launcher), or NULL. */
void       ptdp_pool_set_current(ptdp_pool *p);
ptdp_pool *ptdp_pool_current(void);

/* Cores online (sysconf), at least 1. */
int  ptdp_cores(void);

/* Threads per device for `devices` devices on this host: `asked` if > 0;
 * else OPENBLAS_NUM_THREADS when set to a positive number; else
 * cores / devices, at least 1. */
int  ptdp_pool_threads_for(int asked, int devices);

#endif
