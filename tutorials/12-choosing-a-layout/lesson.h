/*
 * lesson.h — lesson 12: the functions you write in exercise.c, which the
 * check calls.
 *
 * The memory of one GPU of a layout, by hand, as ptdp's GPT keeps it
 * (gpt.h, zero.h, schedule.h), then a layout of your own for a model that
 * fits nowhere without thought.  Counts are in elements (double, as
 * models at scale do not fit in an int); bytes are elements times the
 * bytes of what holds them: `real_bytes` is sizeof(ptdp_real) — 8 in this
 * course's double build, 4 in `ptdp plan`'s float build.
 */
#ifndef LESSON_12_H
#define LESSON_12_H

#include <stdbool.h>

#include "ptdp/plan.h"

/* A GPT as --model gpt has it (gpt.h): C = hidden, F = ffn, nh = heads,
 * T = seq_len, V = vocab padded to a multiple of vocab_multiple x tp. */
typedef struct {
    int layers, hidden, heads, ffn, seq_len, vocab, vocab_multiple;
} lesson_gpt;

/* A layout: N = dp x tp x pp GPUs, micro-batches of b sequences, m of them
 * per replica and step, under a schedule, a recomputation and a ZeRO
 * stage; sequence parallelism and overlapped DP/ZeRO traffic on or off.
 * (cp 1, one chunk per stage.)  Your memory formulas (blanks 5, 6) count
 * sp off; the planner prices sp and overlap as ptdp train runs them. */
typedef struct {
    int dp, tp, pp;
    int micro_batch_size;           /* b                                      */
    int micro_batches;              /* m = B / (b dp)                         */
    const char *schedule;           /* "1f1b" or "gpipe"                      */
    ptdp_recompute recompute;       /* none, selective, full                  */
    int zero;                       /* 0 .. 3                                 */
    bool bf16;                      /* bf16 parameters and gradients          */
    bool sp;                        /* sequence parallelism (--sp; tp > 1)    */
    bool overlap;                   /* DP/ZeRO traffic under the backward
                                       (--overlap; dp > 1 or sp)              */
} lesson_layout;

/* Bytes on one GPU. */
typedef struct {
    double params, grads, optim;    /* the model states                      */
    double acts;                    /* activations at the stage's peak       */
    double total;                   /* their sum                             */
} lesson_memory;

/* Blank 1: V_pad, the embedding's rows: the smallest multiple of
 * multiple x tp that is >= vocab. */
int lesson_padded_vocab(int vocab, int multiple, int tp, int *v_pad);

/* Blank 2: the parameter elements one GPU of pipeline stage `stage` holds
 * (its tensor-parallel shard). */
int lesson_stage_params(const lesson_gpt *g, int tp, int pp, int stage, double *elements);

/* Blank 3: the model states of psi parameters on one GPU of a DP group of
 * dp, under ZeRO stage `zero`: fills out->params, grads, optim (bytes). */
int lesson_model_states(double psi, int dp, int zero, bool bf16, int real_bytes, lesson_memory *out);

/* Blank 4: micro-batches whose activations stage `stage` holds at once. */
int lesson_in_flight(const char *schedule, int pp, int micro_batches, int stage, int *n);

/* Blank 5: activation elements one micro-batch of b sequences keeps per
 * block on one GPU of a TP group of tp (recompute none or selective). */
int lesson_block_acts(const lesson_gpt *g, int b, int tp, ptdp_recompute r, double *elements);

/* Blank 6: everything on one GPU of stage `stage`. */
int lesson_stage_memory(const lesson_gpt *g, const lesson_layout *l, int stage, int real_bytes,
                        lesson_memory *out);

/* Blank 7: your layout for the lesson's model on the lesson's cluster
 * (check.c and README.md say which): set every field of *l. */
int lesson_choose_layout(lesson_layout *l);

#endif
