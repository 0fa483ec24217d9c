/*
 * exercise.c — lesson 04b: activation recomputation in a pipeline stage.
 *
 * Replace each PTDP_BLANK(...) line with your code, then run the check:
 *     meson setup build-student -Dexercises=student      (once)
 *     meson test -C build-student --suite tutorial-04b -v
 * README.md explains the idea; solution.c is the answer (try first).
 *
 * A micro-batch's forward leaves activations behind for its backward:
 * every block's input, its fc1 output, its GELU output.  Under 1F1B a stage
 * holds up to p - s micro-batches of them at once (lesson 04), under GPipe
 * all m.  Recomputation (Chen et al. 2016, "checkpointing") keeps only the
 * stage input and runs the forward again when the backward needs the rest:
 *
 *   plain       forward:  [x | h1 a1 g1 | h2 a2 g2 | …]  kept    backward: uses them
 *   recompute   forward:  [x]  kept, the rest dropped
 *               backward: forward again from x -> [x | h1 a1 g1 | …], then the plain backward
 *
 * Memory per micro-batch held: the input alone instead of everything; the
 * price is one more forward per micro-batch, about a third more compute
 * (a backward costs two forwards).  The bubble is unchanged.
 *
 * Tools: ptdp_tensor_alloc(dev, &t, "name", PTDP_MEM_ACTS, rows, cols),
 * ptdp_tensor_copy(dst, src), ptdp_tensor_free(dev, &t) (device.h,
 * tensor.h), and the plain stage of lesson.h: lesson_plain_forward,
 * lesson_plain_backward, lesson_plain_free.
 */
#include "lesson.h"

#include "blank.h"
#include "ptdp/device.h"
#include "ptdp/error.h"

int lesson_forward(ptdp_device *dev, ptdp_model *m, lesson_kept *kept, const ptdp_batch *b,
                   ptdp_tensor input, long step, ptdp_tensor *out)
{
    /* The stage input: the data on stage 0, the received activation after. */
    const ptdp_tensor x = m->first_stage ? b->x : input;
    kept->batch = *b;
    kept->step = step;

    /* The plain forward: the output for the next stage (the loss on the
     * last), and everything it made, in kept->full. */
    int rc = lesson_plain_forward(dev, m, &kept->full, b, input, step, out);
    if (rc != 0)
        return rc;

    /* Blank 1: keep a copy of x in kept->input: a tensor of x's shape from
     * the arena, category PTDP_MEM_ACTS, with x's values.  (Why a copy?
     * The executor frees x as soon as this function returns.) */
    PTDP_BLANK(1, "keep a copy of the stage input x in kept->input");

    /* Blank 2: drop everything else the plain forward kept. */
    PTDP_BLANK(2, "drop the rest: what kept->full holds");
    return PTDP_OK;
}

int lesson_backward(ptdp_device *dev, ptdp_model *m, lesson_kept *kept, const ptdp_tensor *dout,
                    double loss_scale, ptdp_tensor *dx)
{
    /* The same micro-batch again, its input now your copy. */
    ptdp_batch again = kept->batch;
    again.x = kept->input;
    int rc;

    /* Blank 3: run the plain forward once more, on `again` from your copy,
     * at the step it first ran (kept->step), so that kept->full holds
     * everything again: the same samples (kept->batch) draw the same
     * dropout masks, keyed by their global indices.
     * No output is wanted this time (it was sent already): out = NULL.
     * Return its status if it fails. */
    PTDP_BLANK(3, "run the forward again, from kept->input, into kept->full");

    /* Blank 4: the plain backward on kept->full (it frees what it used);
     * then free your copy of the input.  Return the backward's status. */
    PTDP_BLANK(4, "the plain backward, then free the copy");
}
