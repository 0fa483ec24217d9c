/*
 * lesson.h — lesson 04b: the functions you write in exercise.c, which the
 * check calls, and the ones the check gives you.
 *
 * A pipeline stage's forward and backward for one micro-batch, as the model
 * interface (include/ptdp/model.h) has them, but with activation
 * recomputation: the forward keeps a copy of the stage input and nothing
 * else; the backward runs the forward again from that copy, then the plain
 * backward.  The check plugs them into ptdp's pipeline executor in place
 * of the model's own.
 */
#ifndef LESSON_04B_H
#define LESSON_04B_H

#include "ptdp/model.h"

/* What one micro-batch keeps from its forward to its backward. */
typedef struct {
    ptdp_batch batch;    /* which samples, and their labels on the last stage
                            (the executor keeps those until the backward)   */
    long step;           /* the training step, as the model interface passes
                            it.  Not a dropout key: a mask is keyed by the
                            sample's global index, step x B + row (batch.first
                            + row), which already differs from step to step */
    ptdp_tensor input;   /* YOUR copy of the stage input: arena, "acts"      */
    ptdp_acts full;      /* what the plain forward keeps: everything it made.
                            Empty between your forward and your backward.    */
} lesson_kept;

/* ---- given (check.c): the stage's plain forward and backward ---------- */

/* Run the stage on micro-batch b — stage 0 reads b->x, the others `input`
 * — and keep everything the backward needs in *full (category "acts").
 * `out` receives the stage output (NULL: not wanted); on the last stage
 * full->loss_sum is the micro-batch's loss. */
int  lesson_plain_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *full, const ptdp_batch *b,
                          ptdp_tensor input, long step, ptdp_tensor *out);
/* The backward from what *full keeps: ADDS into the gradients, writes the
 * input gradient to dx (if not NULL), and frees what *full kept. */
int  lesson_plain_backward(ptdp_device *dev, ptdp_model *m, ptdp_acts *full, const ptdp_tensor *dout,
                           double loss_scale, ptdp_tensor *dx);
/* Free what *full keeps, without a backward. */
void lesson_plain_free(ptdp_device *dev, ptdp_model *m, ptdp_acts *full);

/* ---- yours (exercise.c) ------------------------------------------------ */

/* The forward of micro-batch b with recomputation: the stage output into
 * `out` (as the plain forward), but afterwards the arena keeps only a copy
 * of the stage input, in kept->input.  Returns 0 or a PTDP_E… code. */
int lesson_forward(ptdp_device *dev, ptdp_model *m, lesson_kept *kept, const ptdp_batch *b,
                   ptdp_tensor input, long step, ptdp_tensor *out);
/* Its backward: the forward again, once, from kept->input; then the plain
 * backward; then nothing of the micro-batch is left.  Returns 0 or a
 * PTDP_E… code. */
int lesson_backward(ptdp_device *dev, ptdp_model *m, lesson_kept *kept, const ptdp_tensor *dout,
                    double loss_scale, ptdp_tensor *dx);

#endif
