/*
 * solution.c — lesson 06: ZeRO-1, the optimizer state sharded across DP.
 *
 * The answer to exercise.c (try that first).  src/parallel/zero.c is the library's
 * version (stages 1 and 2), used by `ptdp train --zero 1`.
 *
 * Plain data parallelism: every one of the N ranks all-reduces the whole
 * gradient, then runs AdamW on the whole model — N identical updates, and
 * N copies of AdamW's two moments, 2P elements each for P parameters.
 * ZeRO-1 (Rajbhandari et al. 2020) cuts the flat buffers into N shards;
 * rank k owns shard k and is the only one to update it:
 *
 *   flat buffer    | shard 0 | shard 1 | shard 2 | shard 3 |
 *   owner            rank 0    rank 1    rank 2    rank 3
 *
 *   1. reduce-scatter g   rank k gets shard k of the sum       (N-1)/N S
 *   2. AdamW on shard k   with the moments of shard k only     no bytes
 *   3. all-gather w       every rank gets every updated shard  (N-1)/N S
 *
 * An all-reduce IS a reduce-scatter followed by an all-gather (lesson 01's
 * ring), so ZeRO-1 sends exactly plain DP's 2(N-1)/N S bytes per step: it
 * only moves the optimizer into the middle, where each rank holds 1/N of
 * the summed gradient.  What it saves is memory:
 *
 *   optimizer state per rank    plain DP 2P        ZeRO-1 2P/N
 *
 * Shards cut through parameters (a weight matrix may belong half to rank
 * 1, half to rank 2): fine, because AdamW works element by element.
 */
#include "lesson.h"

#include "ptdp/error.h"
#include "ptdp/tensor.h"
#include "ptdp/comm.h"

int lesson_zero_init(ptdp_device *dev, lesson_zero *z)
{
    /* My shard: the one the collectives give my rank (comm.h). */
    ptdp_share(z->numel, ptdp_comm_size(z->dp), ptdp_comm_rank(z->dp), &z->off, &z->len);
    /* The optimizer state of my shard only. */
    z->exp_avg = ptdp_alloc(dev, z->len * sizeof(ptdp_real), PTDP_MEM_OPTIM, "zero1.exp_avg");
    z->exp_avg_sq = ptdp_alloc(dev, z->len * sizeof(ptdp_real), PTDP_MEM_OPTIM, "zero1.exp_avg_sq");
    if (z->exp_avg == NULL || z->exp_avg_sq == NULL)
        return PTDP_ENOMEM;
    return PTDP_OK;
}

int lesson_zero_step(lesson_zero *z, long step)
{
    /* 1. My shard of the gradient, summed over the DP ranks, lands at its
     *    own offset of g (in place). */
    int rc = ptdp_reduce_scatter(z->dp, PTDP_IN_PLACE, z->g, z->numel, PTDP_REAL, PTDP_SUM);
    if (rc != 0)
        return rc;
    /* 2. AdamW on my shard: parameters, gradient and moments of [off, off + len). */
    ptdp_adamw_step(z->w + z->off, z->g + z->off, z->exp_avg, z->exp_avg_sq, z->len, &z->adamw, step);
    /* 3. Everyone gets everyone's updated shard. */
    return ptdp_all_gather(z->dp, PTDP_IN_PLACE, z->w, z->numel, PTDP_REAL);
}

void lesson_zero_free(ptdp_device *dev, lesson_zero *z)
{
    ptdp_free(dev, z->exp_avg_sq);
    ptdp_free(dev, z->exp_avg);
    z->exp_avg = z->exp_avg_sq = NULL;
}
