/*
 * lesson.h — lesson 06: the functions you write in exercise.c, which the
 * check calls.
 *
 * One DP rank's optimizer under ZeRO-1.  The model's parameters and
 * gradients are two flat buffers of numel elements (model.h), the same
 * layout on every rank of the DP group.
 */
#ifndef LESSON_06_H
#define LESSON_06_H

#include <stddef.h>

#include "ptdp/comm.h"
#include "ptdp/device.h"
#include "ptdp/optim.h"

typedef struct {
    ptdp_comm *dp;                  /* the data-parallel group: N ranks          */
    ptdp_real *w;                   /* the flat parameters, numel, a full replica */
    ptdp_real *g;                   /* the flat gradients, numel: on entry to a
                                       step, this rank's samples' part only      */
    size_t numel;
    ptdp_adamw_config adamw;        /* lr, betas, eps, weight decay              */

    /* Set by lesson_zero_init: */
    size_t off, len;                /* my shard: elements [off, off + len)       */
    ptdp_real *exp_avg, *exp_avg_sq;   /* AdamW's two moments of my shard:
                                          len each, in my arena, "optim"         */
} lesson_zero;

/* Choose this rank's shard and allocate the optimizer state it keeps.
 * Returns 0 or a PTDP_E… code. */
int  lesson_zero_init(ptdp_device *dev, lesson_zero *z);
/* One optimizer step (step = 1 for the first): afterwards w holds the new
 * parameters, the same on every rank.  g may be overwritten (the check
 * zeroes it for the next step).  Returns 0 or a PTDP_E… code. */
int  lesson_zero_step(lesson_zero *z, long step);
void lesson_zero_free(ptdp_device *dev, lesson_zero *z);

#endif
