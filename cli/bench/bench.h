/*
 * bench.h — what the two halves of `ptdp bench` share.
 *
 * bench_memory.c measures how fast N threads can stream through host memory
 * (the ceiling); bench_collectives.c times the collectives and compares them
 * with that ceiling; bench_train.c times a training step; bench_zero.c
 * measures ZeRO's memory table with zero_measure.c (which the figure
 * zero_memory uses too); bench_fp8.c trains one model in float, bf16 and
 * each FP8 recipe (the figure fp8_loss_curves draws its runs).
 */
#ifndef PTDP_CLI_BENCH_H
#define PTDP_CLI_BENCH_H

#include <stdbool.h>
#include <stddef.h>

#include "ptdp/fp8_quant.h"
#include "ptdp/launch.h"
#include "ptdp/ops.h"
#include "ptdp/train.h"
#include "ptdp/zero.h"

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

/* STREAM's copy kernel, c[i] = a[i] for i < n (2 x 8 bytes an element), and
 * the size of each of its arrays with `threads` threads (256 MiB over all
 * threads, at least 16 MiB each: far larger than the caches), for a copy
 * timed between a collective's samples (bench_collectives.c). */
void ptdp_stream_copy(double *restrict c, const double *restrict a, size_t n);
size_t ptdp_stream_array_bytes(int threads);

/* The ceiling the collectives are compared with: the faster of copy and
 * triad, i.e. the most this host was seen to move. */
double ptdp_membw_ceiling(const ptdp_membw *m);

/* `ptdp bench memory …` */
int ptdp_bench_memory_cmd(int argc, char **argv);

/* `ptdp bench train …` (bench_train.c): the training step of the reference
 * MLP against its GEMMs, PyTorch's (bench/train.sh) and dp=2. */
int ptdp_bench_train_cmd(int argc, char **argv);

/* The machine's GEMM speed (bench_train.c): the median of `reps` (1..7)
 * square PTDP_BENCH_SQUARE_N^3 products through ptdp_matmul on dev's
 * threads, after one untimed; 2 n^3 flops each.  0 or PTDP_E… */
#define PTDP_BENCH_SQUARE_N 2048
struct ptdp_device;
int ptdp_bench_square_gemm(struct ptdp_device *dev, int reps, double *median_s);

/* Operands of a product of shape g (bench_train.c): op(A) m x k, op(B)
 * k x n and C m x n in dev's arena, filled with ordinary numbers (no
 * denormals, which would make the products slow for the wrong reason).
 * 0 or PTDP_ENOMEM. */
int ptdp_bench_gemm_operands(struct ptdp_device *dev, const ptdp_gemm_shape *g, ptdp_tensor *a, ptdp_tensor *b,
                             ptdp_tensor *c);

/* The step's own products, each at its own shape (floor_shapes.c, for
 * `ptdp bench floor --shapes`): one forward + backward of `model` at
 * `batch` on one device of `threads` BLAS threads records them; each
 * distinct shape is then timed alone, its calls back to back, the best of
 * `reps` rounds, each round timing the square product once too.  0, or a
 * PTDP_E… code with the reason in msg. */
typedef struct {
    int m, n, k;
    bool trans_a, trans_b, beta;   /* beta: C read (beta != 0)          */
    int calls;                     /* of this shape in the step         */
    double best_s;                 /* all its calls, the best of reps   */
} ptdp_floor_shape;
typedef struct {
    int products;         /* the step's calls                           */
    int shapes;           /* distinct shapes among them                 */
    double flops;         /* the calls' 2 m n k                         */
    double own_s;         /* Σ over shapes of its calls' best time      */
    double square_s;      /* the square product, best of one per round  */
    ptdp_floor_shape *each;   /* [shapes], malloc'd: free() when done   */
} ptdp_floor_shapes;
int ptdp_bench_floor_shapes(const ptdp_model_config *model, int batch, int threads, int reps,
                            size_t device_mem, double watchdog_s, ptdp_floor_shapes *out, char *msg,
                            size_t msglen);

/* `ptdp bench floor …` (bench_floor.c): the least time a step of a model
 * can take on N cores: its GEMM flops at the square product's speed plus
 * AdamW's bytes at the copy bandwidth (bench/gpt2.sh's floor). */
int ptdp_bench_floor_cmd(int argc, char **argv);

/* `ptdp bench zero …` (bench_zero.c): the ZeRO paper's model states per
 * device, stage by stage, by the formula and by the arena; the DP bytes per
 * step; the virtual step with and without --overlap. */
int ptdp_bench_zero_cmd(int argc, char **argv);

/* `ptdp bench plan …` (bench_plan.c): the planner's search, timed. */
int ptdp_bench_plan_cmd(int argc, char **argv);

/* ---- `ptdp bench fp8 …` (bench_fp8.c), whose runs the figure
 * fp8_loss_curves draws too: one model trained in each precision. */
int ptdp_bench_fp8_cmd(int argc, char **argv);

/* The configuration `ptdp bench fp8 ARGV` trains (argv[0] "fp8"; with no
 * flags its defaults: ptdp demo's model on the built-in sums, AdamW lr
 * 3e-3), into cfg, its data held by mf (free with ptdp_model_flags_free
 * after the runs).  0, or PTDP_EXIT_USAGE after printing why. */
struct ptdp_model_flags;
int ptdp_fp8_bench_config(int argc, char **argv, ptdp_train_config *cfg, struct ptdp_model_flags *mf);

/* A precision a run trains in: the build's float, bf16 or an FP8 recipe. */
typedef struct {
    const char *name;                  /* PTDP_REAL_NAME, "bf16", the recipe's */
    bool bf16;                         /* --precision bf16                     */
    const ptdp_fp8_recipe *recipe;     /* --fp8 R, or NULL                     */
    int qwz_block, qwz_ranks;          /* ZeRO++'s qwZ as N ranks' shards would
                                          quantize the forward's weights, blocks
                                          of B (zero3_qwz.c's one device), or 0 */
    int qgz_bits, qgz_ranks, qgz_node; /* ZeRO++'s qgZ as N ranks in nodes of k
                                          would sum each micro-batch's gradient,
                                          INT4 or INT8 codes in blocks of 2048
                                          (zero3_qgz.c's one device), or 0     */
} ptdp_fp8_bench_precision;

/* The build's precisions into out (at most max): its float first, then
 * bf16 (the float build only), then every FP8 recipe.  Returns how many. */
int ptdp_fp8_bench_precisions(ptdp_fp8_bench_precision *out, int max);

/* One run: the loss of every step (the first `completed`: fewer when the
 * run diverged, `diverged` saying why), the median wall time of the
 * repeats, and the held-out sums answered exactly (asked 0: not asked). */
typedef struct {
    ptdp_fp8_bench_precision prec;
    int steps, completed;
    double *loss;                      /* [steps] */
    double wall_s;
    int right, asked;
    char diverged[PTDP_MSG_MAX];
} ptdp_fp8_bench_run;

/* Train `base` (one device) in precision p `repeat` times from its seed:
 * the same losses each time or PTDP_ECHECK; held_out: then ask the
 * held-out sums.  0 or PTDP_E… with the reason in msg (a diverged run is
 * 0, out->completed < steps).  Free out with ptdp_fp8_bench_run_free. */
int ptdp_fp8_bench_train(const ptdp_train_config *base, const ptdp_fp8_bench_precision *p, bool held_out,
                         int repeat, ptdp_fp8_bench_run *out, char *msg, size_t msglen);
void ptdp_fp8_bench_run_free(ptdp_fp8_bench_run *r);

/* A run's gap to the reference's (both whole; NaN where either diverged):
 * at the last step (absolute and / the reference's loss), its mean over the
 * last tenth of the steps, and the largest |gap| over all of them. */
typedef struct {
    double final, rel, tail, max_abs;
} ptdp_fp8_bench_gap;
ptdp_fp8_bench_gap ptdp_fp8_bench_gap_of(const ptdp_fp8_bench_run *r, const ptdp_fp8_bench_run *ref);

/* A precision of the model states: bytes per parameter (bw), per gradient
 * (bg) and of optimizer state per parameter (bo), and whether a training
 * run in it exists (else its numbers are the formula only). */
typedef struct {
    const char *name;             /* PTDP_REAL_NAME, "bf16"                 */
    double bw, bg, bo;
    bool measured;
} ptdp_zero_precision;

/* One --zero stage, measured by ptdp_train (zero_measure.c; the figure
 * zero_memory draws it too). */
typedef struct {
    int stage, dp, micro_batches, steps;
    ptdp_zero_precision prec;
    double psi;                                /* parameters per device       */
    double cuts;                               /* ZeRO-1: at most this many DP
                                                  buckets, each cut by ptdp_share
                                                  (zero.h); 0 for the others  */
    ptdp_zero_bytes formula;                   /* ptdp_zero_state_bytes        */
    ptdp_mem_stats rest[PTDP_MAX_DEVICES];     /* after set-up (--steps 0)     */
    ptdp_mem_stats peak[PTDP_MAX_DEVICES];     /* training                     */
    double dp_sent, dp_formula;                /* DP bytes per device and step */
    double step_s;                             /* virtual, the last step       */
    double overlap_step_s;                     /* with --overlap; < 0 refused  */
    double overlap_hidden_s;                   /* communication hidden a step  */
    double overlap_peak_params;                /* device 0, with --overlap     */
    char overlap_note[PTDP_MSG_MAX];           /* why --overlap was refused    */
} ptdp_zero_measure;

/* The precision called name, or NULL. */
const ptdp_zero_precision *ptdp_zero_precision_of(const char *name);
/* Run `base` (its dp, micro-batches, model, steps) at --zero `stage`: at
 * rest, training, and with --overlap where allowed.  0 or PTDP_E… with
 * the reason in msg (PTDP_EINVAL for a precision no run exists in). */
int ptdp_zero_measure_stage(const ptdp_train_config *base, const ptdp_launch_opts *opts,
                            const ptdp_zero_precision *prec, int stage, ptdp_zero_measure *out,
                            char *msg, size_t msglen);
/* Every device's persistent states (at rest) against the formula; why not
 * in `why`.  `layers`: the model's, bounding the chunks' rounding. */
bool ptdp_zero_states_match(const ptdp_zero_measure *m, int layers, char *why, size_t n);
/* The DP bytes per step against the formula (a few bytes of norm aside). */
bool ptdp_zero_bytes_match(const ptdp_zero_measure *m);

/* Progress on stderr: one line rewritten in place (\r) on a terminal, plain
 * lines otherwise (logs, CI).  ptdp_progress_done clears the line. */
void ptdp_progress(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
void ptdp_progress_done(void);

#endif
