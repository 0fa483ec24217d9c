/*
 * solution.c — lesson 04b: activation recomputation in a pipeline stage.
 *
 * The answer to exercise.c (try that first).  src/models/mlp.c does the
 * same inside the model (`ptdp train --recompute`).
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
 */
#include "lesson.h"

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

    /* Keep a copy of the input, in the arena.  Not x itself: the executor
     * frees its tensor as soon as the forward returns. */
    if ((rc = ptdp_tensor_alloc(dev, &kept->input, "recompute.input", PTDP_MEM_ACTS, x.rows, x.cols)) != 0)
        return rc;
    ptdp_tensor_copy(kept->input, x);

    /* Drop the rest. */
    lesson_plain_free(dev, m, &kept->full);
    return PTDP_OK;
}

int lesson_backward(ptdp_device *dev, ptdp_model *m, lesson_kept *kept, const ptdp_tensor *dout,
                    double loss_scale, ptdp_tensor *dx)
{
    /* The same micro-batch again, its input now your copy. */
    ptdp_batch again = kept->batch;
    again.x = kept->input;

    /* The forward once more, from the copy: everything the backward needs
     * is back in kept->full (no output wanted: it was sent already). */
    int rc = lesson_plain_forward(dev, m, &kept->full, &again, kept->input, kept->step, NULL);
    if (rc != 0)
        return rc;

    /* The plain backward (it frees what it used), then the copy. */
    rc = lesson_plain_backward(dev, m, &kept->full, dout, loss_scale, dx);
    ptdp_tensor_free(dev, &kept->input);
    return rc;
}
