/*
 * exercise.c — lesson 10: ZeRO-3 and overlap.
 *
 * Replace each PTDP_BLANK(...) line with your code, then run the check:
 *     meson setup build-student -Dexercises=student      (once)
 *     meson test -C build-student --suite tutorial-10 -v
 * README.md explains the idea; solution.c is the answer (try first).
 *
 * ZeRO-3 (Rajbhandari et al. 2020; PyTorch's FSDP) shards the parameters
 * themselves: rank k keeps shard k of every unit and nothing else.  A unit
 * exists whole on a rank only while it computes:
 *
 *   unit u         [ shard 0 | shard 1 | shard 2 | shard 3 ]   numel elements
 *   rank 1 keeps             [ shard 1 ]  = w_shard, at offset off
 *
 *   forward of u    all-gather u into a fresh buffer w   (N-1)/N |u|   free w after
 *   backward of u   all-gather it again                  (N-1)/N |u|   free w after
 *                   reduce-scatter its gradient g        (N-1)/N |u|   g_shard += my shard
 *
 * Three collectives of every unit per micro-batch: 3 (N-1)/N S bytes, the
 * ZeRO paper's 3Ψ against plain DP's 2Ψ.  What it buys: a rank holds its
 * shards plus ONE unit of parameters, not the model.
 *
 * The overlap: a collective started with ptdp_all_gather_start (or
 * ptdp_reduce_scatter_start) runs on the device's communication stream
 * while the compute stream goes on; ptdp_wait(&request) makes the compute
 * stream wait for its end, and only then may its result be used.  So:
 *
 *   compute   [wait]▇▇ fwd 0 ▇▇▇▇▇▇ fwd 1 ▇▇▇▇▇▇ fwd 2 ▇▇▇
 *   comm       [g0 ][g1 ]         [g2 ]                     gather the NEXT unit
 *                   ^ started as fwd 0 begins, waited as fwd 1 begins
 *
 * One unit more is gathered at once (two units), and the step gets shorter
 * by what the communication stream hides under the compute.
 *
 * Blank 8, at the end, is HSDP: the same gradient sum in two stages, a
 * reduce-scatter inside a shard group and an all-reduce across the
 * replicas (README.md's HSDP section).
 *
 * lesson.h has the structures (z->unit[u]: numel, off, len, w_shard,
 * g_shard, w, g, and the two requests gather and reduce) and the model's
 * compute, which the check gives you: lesson_unit_forward(dev, z, u) and
 * lesson_unit_backward(dev, z, u), which use z->unit[u].w (and .g).
 */
#include "blank.h"
#include "lesson.h"

#include <string.h>

#include "ptdp/error.h"

/* ------------------------------------------------- the pieces */

int lesson_gather(ptdp_device *dev, lesson_zero3 *z, int u, bool start)
{
    lesson_unit *x = &z->unit[u];
    /* Blank 1: unit u's parameters, whole, in a fresh buffer x->w:
     *   - numel elements from my arena, category PTDP_MEM_PARAMS (ptdp_alloc;
     *     return PTDP_ENOMEM if it gives NULL);
     *   - my shard (x->w_shard, len elements) at its place, x->w + x->off;
     *   - an all-gather over z->dp of the numel elements IN PLACE
     *     (PTDP_IN_PLACE, comm.h), which brings every other rank's shard:
     *     ptdp_all_gather if !start, else ptdp_all_gather_start(…, &x->gather).
     * Return the collective's status. */
    PTDP_BLANK(1, "gather unit u into a fresh buffer: my shard at w + off, then the in-place all-gather");
}

int lesson_reduce_scatter(ptdp_device *dev, lesson_zero3 *z, int u, bool start)
{
    lesson_unit *x = &z->unit[u];
    /* Blank 2: x->g holds MY micro-batch's gradient of unit u.  With one
     * collective over z->dp, in place, make my shard of it [off, off + len)
     * the sum over every rank: ptdp_reduce_scatter if !start, else
     * ptdp_reduce_scatter_start(…, &x->reduce).  Return its status. */
    PTDP_BLANK(2, "reduce-scatter unit u's gradient, in place: my shard of the sum over the ranks");
}

int lesson_add_grad(ptdp_device *dev, lesson_zero3 *z, int u)
{
    lesson_unit *x = &z->unit[u];
    /* Blank 3: after the reduce-scatter, add my shard of x->g into
     * x->g_shard (len elements: it sums the step's micro-batches), then
     * free x->g (ptdp_free) and set it to NULL. */
    PTDP_BLANK(3, "add my shard of the reduce-scattered gradient into g_shard; free g");
    return PTDP_OK;
}

/* Given: the gathered parameters go; a zeroed gradient buffer comes. */
void lesson_release(ptdp_device *dev, lesson_zero3 *z, int u)
{
    ptdp_free(dev, z->unit[u].w);
    z->unit[u].w = NULL;
}

int lesson_grad_buffer(ptdp_device *dev, lesson_zero3 *z, int u)
{
    lesson_unit *x = &z->unit[u];
    x->g = ptdp_alloc(dev, x->numel * sizeof(ptdp_real), PTDP_MEM_GRADS, "unit.g");
    return x->g != NULL ? PTDP_OK : PTDP_ENOMEM;
}

/* ------------------------------------------ the blocking micro-batch */

int lesson_micro_batch(ptdp_device *dev, lesson_zero3 *z)
{
    const int L = z->nunits;
    int rc;
    /* Blank 4: the forward, units 0, 1, …, L - 1: gather the unit
     * (blocking), run lesson_unit_forward, and FREE its parameters
     * (lesson_release) before the next unit — that is the whole saving.
     * Return any error. */
    PTDP_BLANK(4, "the forward: for each unit, gather, forward, release");
    /* Blank 5: the backward, units L - 1, …, 1, 0: gather the unit again,
     * give it a zeroed gradient buffer (lesson_grad_buffer), run
     * lesson_unit_backward, release its parameters, then reduce-scatter
     * its gradient (blocking) and add my shard (lesson_add_grad). */
    PTDP_BLANK(5, "the backward: for each unit from the last, gather, gradient buffer, backward, release, reduce-scatter, add");
    return PTDP_OK;
}

/* ---------------------------------------- the overlapped micro-batch */

int lesson_micro_batch_overlap(ptdp_device *dev, lesson_zero3 *z)
{
    const int L = z->nunits;
    int rc;
    /* Blank 6: the forward again, overlapped.  Start unit 0's gather
     * (nothing to hide it under); then for each unit u: wait for its
     * gather (ptdp_wait(&z->unit[u].gather)), START the next unit's
     * gather (u + 1, if there is one) so that it runs while u computes,
     * forward, release.  At most two units are gathered at once. */
    PTDP_BLANK(6, "the overlapped forward: wait for unit u, start unit u + 1's gather, forward, release");
    /* Blank 7: the backward, overlapped.  Start unit L - 1's gather; for
     * each unit u from the last: wait for its gather, start the gather of
     * the unit the backward needs next, gradient buffer, backward,
     * release; then the reduce-scatter STARTED after the previous unit's
     * backward (u + 1's) has run under this one: wait for it and add its
     * shard; start unit u's.  After the loop, wait for the last one and
     * add it: the step must end with every collective waited for. */
    PTDP_BLANK(7, "the overlapped backward: prefetch the next unit, start each reduce-scatter, wait for it one unit later");
    return PTDP_OK;
}

/* ------------------------------------------------------------ HSDP */

int lesson_hsdp_sum(ptdp_device *dev, lesson_zero3 *z, int u)
{
    lesson_unit *x = &z->unit[u];
    /* Blank 8: HSDP.  The dp ranks are cut into shard groups of N
     * (z->shard) and replica groups of R = dp/N (z->replica: the ranks
     * holding the same shard as I do).  x->g holds MY micro-batch's
     * gradient; make my shard of it [off, off + len) the sum over ALL dp
     * ranks, in FSDP2's two stages:
     *   - a reduce-scatter of the numel elements, in place, over z->shard
     *     (my shard of the sum over my shard group);
     *   - an all-reduce of my len elements at x->g + x->off, in place
     *     (send == recv), over z->replica (the sum over the groups).
     * Both PTDP_SUM: the backward already divided by the whole batch B.
     * Then add the shard into g_shard and free g: lesson_add_grad. */
    PTDP_BLANK(8, "HSDP: reduce-scatter in the shard group, then all-reduce my shard across the replica group, add");
}
