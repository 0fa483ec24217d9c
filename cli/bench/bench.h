/*
 * bench.h — what the two halves of `ptdp bench` share.
 *
 * bench_memory.c measures how fast N threads can stream through host memory
 * (the ceiling); bench_collectives.c times the collectives and compares them
 * with that ceiling.
 */
#ifndef PTDP_CLI_BENCH_H
#define PTDP_CLI_BENCH_H

#include <stdbool.h>
#include <stddef.h>

/* STREAM-style host memory bandwidth of `threads` threads together.  Bytes
 * are counted as STREAM counts them: a copy a[i] = b[i] moves 2 x 8 bytes, a
 * triad a[i] = b[i] + s*c[i] moves 3 x 8 bytes (the hidden read of a[i]
 * before it is written, "write-allocate", is not counted). */
typedef struct {
    int threads;
    size_t array_bytes;   /* each of the 3 arrays of each thread         */
    int reps;             /* timed repetitions; the best one is kept     */
    double copy_Bps;      /* all threads together, bytes per second      */
    double triad_Bps;
} ptdp_membw;

/* Measure with `threads` device threads (ptdp_launch).  Returns 0, or a
 * PTDP_E… code with the reason in msg. */
int ptdp_bench_memory(int threads, double watchdog_s, ptdp_membw *out,
                      char *msg, size_t msglen);

/* The ceiling the collectives are compared with: the faster of copy and
 * triad, i.e. the most this host was seen to move. */
double ptdp_membw_ceiling(const ptdp_membw *m);

/* `ptdp bench memory …` */
int ptdp_bench_memory_cmd(int argc, char **argv);

/* `ptdp bench train …` (bench_train.c): the training step of the reference
 * MLP against its GEMMs, PyTorch's (bench/train.sh) and dp=2. */
int ptdp_bench_train_cmd(int argc, char **argv);

/* Progress on stderr: one line rewritten in place (\r) on a terminal, plain
 * lines otherwise (logs, CI).  ptdp_progress_done clears the line. */
void ptdp_progress(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
void ptdp_progress_done(void);

#endif
