/*
 * exercise.c — lesson 02: the gradient of a data-parallel step.
 *
 * Replace each PTDP_BLANK(...) line with your code, then run the check:
 *     meson setup build-student -Dexercises=student      (once)
 *     meson test -C build-student --suite tutorial-02 -v
 * README.md explains the idea; solution.c is the answer (try first).
 *
 * Every DP rank holds a whole replica of the model and takes a shard of
 * the global batch B.  The loss of the step is the mean over the batch,
 *
 *     L = (1/B) sum_i loss_i,       dL/dw = sum_i (1/B) dloss_i/dw,
 *
 * a sum over samples, so it can be cut anywhere: each rank sums over its
 * own samples, one micro-batch at a time (gradients accumulate, +=), and
 * one all-reduce (sum) adds the ranks' parts.  Every rank then holds the
 * gradient of the whole batch and takes the same optimizer step.
 *
 *     B = 10, dp = 3, M = 2        rank 0: samples 0-3   micro-batches 0-1 | 2-3
 *                                  rank 1: samples 4-6   micro-batches 4-5 | 6
 *                                  rank 2: samples 7-9   micro-batches 7-8 | 9
 *     each rank: g_r = sum over its samples of (1/B) dloss_i
 *     all-reduce: g = g_0 + g_1 + g_2 on every rank
 */
#include "blank.h"
#include "lesson.h"

#include "ptdp/error.h"
#include "ptdp/tensor.h"

/* Forward and backward one micro-batch: `rows` samples from global sample
 * `first`.  The backward multiplies every sample's loss gradient by `scale`
 * and ADDS the result to model->flat_g. */
static int forward_backward(ptdp_device *dev, const lesson_dp *d, long step, int64_t first, int rows,
                            double scale, double *loss_sum)
{
    ptdp_model *m = d->model;
    ptdp_tensor x;
    int64_t *labels = ptdp_alloc(dev, (size_t)rows * sizeof *labels, PTDP_MEM_OTHER, "lesson.labels");
    if (labels == NULL)
        return PTDP_ENOMEM;
    int rc = ptdp_tensor_alloc(dev, &x, "lesson.x", PTDP_MEM_OTHER, rows, ptdp_mlp(&m->cfg)->d_in);
    if (rc == 0) {
        ptdp_acts acts;
        ptdp_mlp_data_batch(d->data, first, rows, x, labels);
        rc = ptdp_model_forward(dev, m, &acts, &(ptdp_batch){ .first = first, .rows = x.rows, .x = x, .labels = labels }, x, step, false, NULL);
        if (rc == 0) {
            *loss_sum += acts.loss_sum;
            rc = ptdp_model_backward(dev, m, &acts, NULL, scale, NULL);
        }
        ptdp_tensor_free(dev, &x);
    }
    ptdp_free(dev, labels);
    return rc;
}

int lesson_dp_gradients(ptdp_device *dev, const lesson_dp *d, long step, double *loss_sum)
{
    ptdp_model *m = d->model;
    int B = d->global_batch;
    int64_t step_first = (int64_t)step * B;      /* the step's samples: [step B, (step+1) B) */
    size_t shard_off, shard_len;
    int rc = PTDP_OK;
    *loss_sum = 0;

    /* Blank 1: which samples of the step are mine?  Cut the B samples into
     * as many shards as the DP group has ranks (ptdp_share, types.h) and
     * take the shard with my rank's number.  Samples step_first + shard_off
     * and on are mine, shard_len of them. */
    PTDP_BLANK(1, "set shard_off and shard_len: my shard of the B samples");

    for (int k = 0; k < d->micro_batches && rc == 0; k++) {
        size_t off, len;
        ptdp_share(shard_len, d->micro_batches, k, &off, &len);   /* micro-batch k of my shard */
        if (len == 0)
            continue;
        double scale;
        /* Blank 2: by what must this micro-batch's loss gradient be
         * multiplied, so that the sum over ALL micro-batches of ALL ranks is
         * the gradient of L = (1/B) sum_i loss_i? */
        PTDP_BLANK(2, "set scale: this micro-batch's loss-gradient scale");
        rc = forward_backward(dev, d, step, step_first + (int64_t)(shard_off + off), (int)len, scale, loss_sum);
    }
    if (rc != 0)
        return rc;

    /* Blank 3: flat_g holds MY part of the gradient, sum over my samples of
     * (1/B) dloss_i.  Make every rank hold the whole gradient. */
    PTDP_BLANK(3, "combine the ranks' gradients in model->flat_g");
}
