/*
 * lesson.h — lesson 02: the function you write in exercise.c, which the
 * check calls.
 */
#ifndef LESSON_02_H
#define LESSON_02_H

#include "ptdp/comm.h"
#include "ptdp/mlp_data.h"
#include "ptdp/device.h"
#include "ptdp/model.h"
#include "ptdp/mlp.h"

/* One data-parallel rank's view of a training step. */
typedef struct {
    ptdp_model *model;      /* this rank's replica of the whole model          */
    ptdp_mlp_data *data;     /* sample i is a pure function of i (data.h)       */
    ptdp_comm *dp;          /* the data-parallel group                         */
    int global_batch;       /* B: samples per step, over all the DP ranks      */
    int micro_batches;      /* M: micro-batches per rank per step              */
} lesson_dp;

/* Make model->flat_g (zero on entry), on every DP rank, the gradient of the
 * mean loss over step `step`'s global batch, samples [step B, (step+1) B):
 * each rank runs the forward and backward of its shard of the batch, in M
 * micro-batches, then the ranks combine their gradients.  *loss_sum gets the
 * sum of the per-sample losses of this rank's samples.  Returns 0 or a
 * PTDP_E… code. */
int lesson_dp_gradients(ptdp_device *dev, const lesson_dp *d, long step, double *loss_sum);

#endif
