/*
 * lesson.h — lesson 09: the functions you write in exercise.c, which the
 * check calls.
 *
 * The two generators fill an empty schedule (ptdp_schedule_alloc_v: s->pp
 * stages, s->micro_batches micro-batches, s->virtual_stages chunks per
 * stage) with every stage's compute only — forwards and backwards, pushed
 * with ptdp_schedule_push_chunk; the check then places the sends and
 * receives with ptdp_schedule_place_comms (schedule.h).  Like the
 * library's ptdp_schedule_interleaved, ptdp_schedule_zb_h1 and
 * ptdp_schedule_dualpipev, except that they return a status, so that an
 * unfinished one can say so.  The last, lesson_dualpipe_sum, runs on
 * devices: DualPipe's two copies of each stage, summed.
 */
#ifndef LESSON_09_H
#define LESSON_09_H

#include <stddef.h>

#include "ptdp/device.h"
#include "ptdp/schedule.h"

/* Interleaved 1F1B, p stages of v chunks each: the stage's k-th forward
 * (k = 0 .. m v - 1; the same on every stage) runs chunk *chunk on
 * micro-batch *mb.  Returns 0 or a PTDP_E… code. */
int lesson_interleaved_forward(int p, int v, int k, int *chunk, int *mb);

/* The same for the stage's k-th backward. */
int lesson_interleaved_backward(int p, int v, int k, int *chunk, int *mb);

/* Megatron-LM's interleaved 1F1B (s->virtual_stages = v chunks per stage;
 * m a multiple of p).  Returns 0 or a PTDP_E… code. */
int lesson_interleaved(ptdp_schedule *s);

/* ZB-H1: 1F1B's forwards and input-gradient backwards (B), with the weight
 * gradients (W) deferred into the bubbles.  Returns 0 or a PTDP_E… code. */
int lesson_zb_h1(ptdp_schedule *s);

/* DualPipeV on p devices, m >= 2p micro-batches: how many times device r
 * repeats each of the reference schedule's eight phases, count[0..7].
 * Returns 0 or a PTDP_E… code. */
int lesson_dualpipev_phases(int p, int r, int m, int count[8]);

/* DualPipeV: device r's compute, the eight phases repeated as
 * lesson_dualpipev_phases says (s: s->pp devices, s->virtual_stages = 2,
 * s->layout = PTDP_CHUNKS_V, ptdp_schedule_alloc_v).  Returns 0 or a
 * PTDP_E… code. */
int lesson_dualpipev(ptdp_schedule *s);

/* DualPipe on p = dev->world_size devices (p even): device r = dev->rank
 * holds stage r of the down copy (chunk 0, g[0]) and stage p - 1 - r of
 * the up copy (chunk 1, g[1]), n gradients each, from the micro-batches
 * its copy ran.  Sums each stage's two copies, so that both hold a + b.
 * Returns 0 or a PTDP_E… code. */
int lesson_dualpipe_sum(ptdp_device *dev, ptdp_real *g[2], size_t n);

#endif
