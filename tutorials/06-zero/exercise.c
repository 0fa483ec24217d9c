/*
 * exercise.c — lesson 06: ZeRO-1, the optimizer state sharded across DP.
 *
 * Replace each PTDP_BLANK(...) line with your code, then run the check:
 *     meson setup build-student -Dexercises=student      (once)
 *     meson test -C build-student --suite tutorial-06 -v
 * README.md explains the idea; solution.c is the answer (try first).
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
#include "blank.h"
#include "lesson.h"

#include "ptdp/error.h"
#include "ptdp/tensor.h"

int lesson_zero_init(ptdp_device *dev, lesson_zero *z)
{
    /* Blank 1: my shard of the numel elements.  Take the one the chunked
     * collectives give my rank of the DP group: ptdp_share (types.h) —
     * the first numel % N ranks hold one element more. */
    PTDP_BLANK(1, "set z->off and z->len: my shard of the flat buffers");
    /* Blank 2: AdamW's two moments, for my shard only, from my arena:
     * ptdp_alloc(dev, bytes, PTDP_MEM_OPTIM, "a name") — zero-filled. */
    PTDP_BLANK(2, "allocate z->exp_avg and z->exp_avg_sq");
    if (z->exp_avg == NULL || z->exp_avg_sq == NULL)
        return PTDP_ENOMEM;
    return PTDP_OK;
}

int lesson_zero_step(lesson_zero *z, long step)
{
    int rc;
    /* Blank 3: g holds the gradient of MY samples.  With one collective
     * over z->dp, make shard [off, off + len) of g the sum over all ranks,
     * at its own offset (in place: PTDP_IN_PLACE, comm.h).  Return its
     * status if it fails. */
    PTDP_BLANK(3, "reduce-scatter the gradients: my shard of their sum");
    /* Blank 4: AdamW (optim.h, ptdp_adamw_step with z->adamw) on my shard
     * only: its parameters, its gradient, its moments. */
    PTDP_BLANK(4, "AdamW on my shard");
    /* Blank 5: every rank has updated its own shard of w, and only that.
     * Give every rank the whole new w, with one collective. */
    PTDP_BLANK(5, "all-gather the parameters");
}

void lesson_zero_free(ptdp_device *dev, lesson_zero *z)
{
    ptdp_free(dev, z->exp_avg_sq);
    ptdp_free(dev, z->exp_avg);
    z->exp_avg = z->exp_avg_sq = NULL;
}
