/*
 * bench_memory.c — how fast can N threads move bytes through host memory?
 *
 * A collective between devices that live in one process is, underneath, a
 * series of loads and stores: its speed limit is the host's memory bandwidth,
 * not a link.  So before timing collectives we measure that limit, the way
 * John McCalpin's STREAM benchmark does, with the same number of threads as
 * there are devices:
 *
 *     copy    c[i] = a[i]               2 x 8 bytes per element
 *     triad   c[i] = a[i] + s * b[i]    3 x 8 bytes per element
 *
 *     thread 0: [a0 ........] [b0 ........] [c0 ........]
 *     thread 1: [a1 ........] [b1 ........] [c1 ........]     each array far
 *        ...                                                   larger than any
 *     barrier ─► all threads stream at once ─► barrier          cache
 *
 * bandwidth = (threads x bytes moved per thread) / (first thread's start to
 * last thread's end), best of several repetitions (STREAM's convention: the
 * best run is the one least disturbed by the rest of the machine).  The
 * span, not the slowest thread's own time: with more threads than cores
 * the threads take turns, and a thread that ran alone timed only its turn
 * (8 threads on 2 cores "measured" 4x the bus, 160 GB/s).
 *
 * The arrays total 256 MiB each across threads (16 MiB per thread at least),
 * several times the last-level cache of laptops and small servers, so the
 * bytes really come from DRAM.
 */
#include "bench.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../args.h"
#include "ptdp/clock.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/launch.h"
#include "ptdp/comm.h"

#define MEMBW_TOTAL_BYTES ((size_t)256 << 20)   /* per array, all threads */
#define MEMBW_MIN_BYTES   ((size_t)16 << 20)    /* per array, per thread  */
#define MEMBW_REPS 6                            /* the first is a warm-up */

typedef struct {
    double begin, end;             /* ptdp_wall_now at a kernel's ends      */
} membw_span;

typedef struct {
    size_t n;                      /* doubles per array per thread          */
    int reps;
    membw_span *copy;              /* [rank * reps + rep]                   */
    membw_span *triad;
} membw_run;

/* The two kernels.  `restrict` promises the arrays do not overlap, so the
 * compiler may vectorise the loops as STREAM's Fortran would. */
void ptdp_stream_copy(double *restrict c, const double *restrict a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        c[i] = a[i];
}

static void stream_triad(double *restrict c, const double *restrict a,
                         const double *restrict b, double s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        c[i] = a[i] + s * b[i];
}

static int membw_device(ptdp_device *dev, void *arg)
{
    membw_run *run = arg;
    size_t bytes = run->n * sizeof(double);
    double *a = ptdp_alloc(dev, bytes, PTDP_MEM_OTHER, "stream.a");
    double *b = ptdp_alloc(dev, bytes, PTDP_MEM_OTHER, "stream.b");
    double *c = ptdp_alloc(dev, bytes, PTDP_MEM_OTHER, "stream.c");
    if (!a || !b || !c)
        return dev->status ? dev->status : PTDP_ENOMEM;

    /* Touch every page before timing, so page faults are not measured. */
    for (size_t i = 0; i < run->n; i++) {
        a[i] = 1.0;
        b[i] = 2.0;
        c[i] = 0.0;
    }
    /* copy reads a, writes c; triad reads a and b, writes c: a and b keep
     * their values, so every repetition does the same work. */

    int rc = 0;
    for (int rep = 0; rep < run->reps && rc == 0; rep++) {
        if ((rc = ptdp_barrier(dev->world)) != 0)
            break;
        membw_span *copy = &run->copy[dev->rank * run->reps + rep];
        copy->begin = ptdp_wall_now();
        ptdp_stream_copy(c, a, run->n);
        copy->end = ptdp_wall_now();

        if ((rc = ptdp_barrier(dev->world)) != 0)
            break;
        membw_span *triad = &run->triad[dev->rank * run->reps + rep];
        triad->begin = ptdp_wall_now();
        stream_triad(c, a, b, 3.0, run->n);
        triad->end = ptdp_wall_now();
    }
    /* c = 1 + 3 * 2 after every triad: check it, so the loops cannot be
     * optimised away and a broken kernel cannot report a bandwidth. */
    if (rc == 0 && (c[0] != 7.0 || c[run->n - 1] != 7.0))
        rc = ptdp_fail(dev, PTDP_ECHECK, "memory benchmark: triad gave %g, expected 7", c[0]);

    ptdp_free(dev, c);
    ptdp_free(dev, b);
    ptdp_free(dev, a);
    return rc;
}

/* Best repetition (the first is a warm-up) of all threads' bytes over the
 * span from the first start to the last end. */
static double best_rate(const membw_span *spans, int threads, int reps, double bytes_all)
{
    double best = 0.0;
    for (int rep = 1; rep < reps; rep++) {
        double begin = spans[rep].begin, end = spans[rep].end;
        for (int r = 1; r < threads; r++) {
            const membw_span *s = &spans[r * reps + rep];
            begin = s->begin < begin ? s->begin : begin;
            end = s->end > end ? s->end : end;
        }
        if (end > begin && bytes_all / (end - begin) > best)
            best = bytes_all / (end - begin);
    }
    return best;
}

size_t ptdp_stream_array_bytes(int threads)
{
    size_t per_thread = MEMBW_TOTAL_BYTES / (size_t)threads;
    return per_thread < MEMBW_MIN_BYTES ? MEMBW_MIN_BYTES : per_thread;
}

int ptdp_bench_memory(int threads, double watchdog_s, ptdp_membw *out,
                      char *msg, size_t msglen)
{
    size_t per_thread = ptdp_stream_array_bytes(threads);

    membw_run run = { per_thread / sizeof(double), MEMBW_REPS, NULL, NULL };
    run.copy = calloc((size_t)threads * MEMBW_REPS, sizeof(membw_span));
    run.triad = calloc((size_t)threads * MEMBW_REPS, sizeof(membw_span));
    if (!run.copy || !run.triad) {
        free(run.copy);
        free(run.triad);
        snprintf(msg, msglen, "memory benchmark: out of host memory");
        return PTDP_ENOMEM;
    }

    ptdp_launch_result result;
    memset(&result, 0, sizeof result);
    ptdp_launch_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.device_mem = 3 * per_thread + ((size_t)1 << 20);
    opts.watchdog_s = watchdog_s;
    opts.result = &result;

    int rc = ptdp_launch(threads, membw_device, &run, &opts);
    if (rc != 0) {
        snprintf(msg, msglen, "memory benchmark: %s", result.message);
    } else {
        double n_all = (double)run.n * sizeof(double) * threads;
        out->threads = threads;
        out->array_bytes = run.n * sizeof(double);
        out->reps = MEMBW_REPS - 1;
        out->copy_Bps = best_rate(run.copy, threads, MEMBW_REPS, 2.0 * n_all);
        out->triad_Bps = best_rate(run.triad, threads, MEMBW_REPS, 3.0 * n_all);
    }
    ptdp_launch_result_free(&result);
    free(run.copy);
    free(run.triad);
    return rc;
}

double ptdp_membw_ceiling(const ptdp_membw *m)
{
    return m->copy_Bps > m->triad_Bps ? m->copy_Bps : m->triad_Bps;
}

/* ---- progress line ------------------------------------------------------ */

static int progress_width;   /* characters of the line now on screen (TTY) */

void ptdp_progress(const char *fmt, ...)
{
    char line[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (isatty(STDERR_FILENO)) {
        int len = (int)strlen(line);
        /* pad with spaces over what is left of a longer previous line */
        fprintf(stderr, "\r%s%*s", line, progress_width > len ? progress_width - len : 0, "");
        progress_width = len;
    } else {
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
}

void ptdp_progress_done(void)
{
    if (progress_width > 0) {
        fprintf(stderr, "\r%*s\r", progress_width, "");
        fflush(stderr);
        progress_width = 0;
    }
}

/* ---- ptdp bench memory ------------------------------------------------- */

static void memory_usage(void)
{
    printf("usage: ptdp bench memory [--devices N] [--watchdog S]\n"
           "\n"
           "Measure the host memory bandwidth with N threads (STREAM copy and triad),\n"
           "the ceiling that `ptdp bench collectives` compares collectives with.\n"
           "\n"
           "  --devices N    threads, one per simulated device (1-%d, default 2)\n"
           "  --watchdog S   fail if a barrier waits longer than S seconds (default 60)\n",
           PTDP_MAX_DEVICES);
}

int ptdp_bench_memory_cmd(int argc, char **argv)
{
    int devices = 2;
    double watchdog = PTDP_DEFAULT_WATCHDOG_S;
    ptdp_args a;
    ptdp_args_init(&a, "bench memory", argc, argv, 1);
    while (ptdp_args_next(&a)) {
        int rc;
        if (ptdp_args_is(&a, "--help")) {
            memory_usage();
            return PTDP_EXIT_OK;
        } else if (ptdp_args_is(&a, "--devices")) {
            rc = ptdp_args_int(&a, 1, PTDP_MAX_DEVICES, &devices);
        } else if (ptdp_args_is(&a, "--watchdog")) {
            rc = ptdp_args_double(&a, 0.1, 86400, &watchdog);
        } else {
            rc = ptdp_args_unknown(&a);
        }
        if (rc)
            return PTDP_EXIT_USAGE;
    }

    ptdp_membw m;
    char msg[PTDP_MSG_MAX];
    ptdp_progress("measuring memory bandwidth with %d thread%s…", devices, devices > 1 ? "s" : "");
    int rc = ptdp_bench_memory(devices, watchdog, &m, msg, sizeof msg);
    ptdp_progress_done();
    if (rc != 0) {
        fprintf(stderr, "ptdp bench memory: %s\n", msg);
        return PTDP_EXIT_FAIL;
    }
    printf("memory bandwidth, %d thread%s, 3 arrays of %zu MiB each per thread, best of %d:\n"
           "  copy   %7.2f GB/s\n"
           "  triad  %7.2f GB/s\n",
           m.threads, m.threads > 1 ? "s" : "", m.array_bytes >> 20, m.reps,
           m.copy_Bps / 1e9, m.triad_Bps / 1e9);
    return PTDP_EXIT_OK;
}
