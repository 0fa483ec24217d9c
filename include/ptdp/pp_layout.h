/*
 * pp_layout.h — where the model's chunks lie on a pipeline's devices: one
 * value, built in one place (pp_layout.c), read by the schedules, the
 * executor, the model's set-up, the mesh's groups, the checkpoints and the
 * planner.
 *
 * A pipeline of p devices holding v model chunks each cuts the model into
 * model chunks and hands each to one (device, chunk) pair.  Three shapes:
 *
 *   RING (flat, interleaved 1F1B)   v chunks a device, chunk c of device s
 *                                   the model's chunk g = c p + s of p v:
 *
 *       model chunk g:  0   1   2   3 | 4   5   6   7           p = 4, v = 2
 *       device:         0   1   2   3 | 0   1   2   3
 *       chunk c:        0   0   0   0 | 1   1   1   1
 *
 *   V (DualPipeV)                   v = 2: device s holds g = s and 2p-1-s,
 *                                   so the activations go down the devices
 *                                   and back up; device 0 holds both ends:
 *
 *       model chunk g:  0   1   2   3 | 4   5   6   7           p = 4
 *       device:         0   1   2   3 | 3   2   1   0           device 3 hands
 *       chunk c:        0   0   0   0 | 1   1   1   1           g 3 to g 4 itself
 *
 *   DUAL (DualPipe)                 v = 2, two copies of a model of p
 *                                   chunks: device s holds chunk s of the
 *                                   "down" copy (its chunk 0) and chunk
 *                                   p-1-s of the "up" copy (its chunk 1);
 *                                   micro-batches 0 .. m/2-1 go down, the
 *                                   rest up:
 *
 *       device:      0     1     2     3             p = 4
 *       chunk 0:   [d0]->[d1]->[d2]->[d3] -> loss    down copy, g = 0 .. 3
 *       chunk 1:   [u3]<-[u2]<-[u1]<-[u0] <- data    up copy,   g = 4 + stage of the up copy
 *
 *     so both end devices read data and compute a loss, and devices s and
 *     p-1-s (the mirror group, mesh.h) hold the same two model chunks,
 *     whose gradients are summed.
 *
 * A model chunk's blocks come from ptdp_stage_range over the chunks of
 * its copy (ptdp_pp_layout_chunks): p v round a ring or down a V, p for
 * each of DualPipe's copies.
 */
#ifndef PTDP_PP_LAYOUT_H
#define PTDP_PP_LAYOUT_H

#include <stdbool.h>

/* The three shapes (a schedule's registry row names its shape). */
typedef enum {
    PTDP_CHUNKS_RING = 0,
    PTDP_CHUNKS_V,
    PTDP_CHUNKS_DUAL,
} ptdp_chunk_layout;

typedef struct {
    ptdp_chunk_layout shape;
    int pp;          /* devices along the pipeline (the schedule's stages) */
    int v;           /* model chunks each device holds: 1 flat, v round a
                        ring, 2 in a V or DualPipe's two copies             */
} ptdp_pp_layout;

/* The layout of `shape` on pp devices: a ring of v chunks a device (v < 1
 * counts as 1), or a V or two copies, which always hold 2. */
ptdp_pp_layout ptdp_pp_layout_make(ptdp_chunk_layout shape, int pp, int v);

/* Copies of the model the pipeline holds: 2 under DUAL, else 1. */
int  ptdp_pp_layout_copies(const ptdp_pp_layout *l);
/* Model chunks one copy is cut into: p v round a ring or down a V, p for
 * each of two copies. */
int  ptdp_pp_layout_chunks(const ptdp_pp_layout *l);

/* The model chunk g (0 .. copies x chunks - 1) at device `stage`'s chunk
 * `chunk`, and back; with two copies g >= p is the up copy's chunk g - p. */
int  ptdp_pp_layout_global(const ptdp_pp_layout *l, int stage, int chunk);
void ptdp_pp_layout_place(const ptdp_pp_layout *l, int g, int *stage, int *chunk);
/* Its place in its own copy's chain, 0 .. chunks - 1 (what ptdp_stage_range
 * takes): g, or g - p for the up copy. */
int  ptdp_pp_layout_in_copy(const ptdp_pp_layout *l, int stage, int chunk);

/* Does the model chunk at (stage, chunk) read the data (first) / compute a
 * loss (last)?  In a V both ends are on device 0; each copy has its own. */
bool ptdp_pp_layout_is_first(const ptdp_pp_layout *l, int stage, int chunk);
bool ptdp_pp_layout_is_last(const ptdp_pp_layout *l, int stage, int chunk);
/* Does device `stage` hold a first / last model chunk (of either copy)? */
bool ptdp_pp_layout_holds_first(const ptdp_pp_layout *l, int stage);
bool ptdp_pp_layout_holds_last(const ptdp_pp_layout *l, int stage);
/* Does the boundary after (stage, chunk) stay on the device (the V's tip:
 * the chunk's output is the next one's input, handed over without a
 * message)?  false for a last chunk. */
bool ptdp_pp_layout_hands_on(const ptdp_pp_layout *l, int stage, int chunk);
/* Does (stage, chunk) take its input from / give its output to another
 * device (a message), rather than the data, the loss or a hand-over? */
bool ptdp_pp_layout_remote_before(const ptdp_pp_layout *l, int stage, int chunk);
bool ptdp_pp_layout_remote_after(const ptdp_pp_layout *l, int stage, int chunk);
/* Does a device's chunk run micro-batch mb of m?  Always, but with two
 * copies, where chunk 0 runs micro-batches 0 .. m/2 - 1 and chunk 1 the
 * rest. */
bool ptdp_pp_layout_runs(const ptdp_pp_layout *l, int chunk, int mb, int m);

/* The device holding the same model chunks as `stage` (DUAL: p - 1 -
 * stage, the mirror group), or -1 without copies. */
int  ptdp_pp_layout_mirror(const ptdp_pp_layout *l, int stage);
/* Whether one device holds both ends of the model (a V's device 0): a tied
 * embedding's two copies are then summed on the device, not over a group. */
bool ptdp_pp_layout_ends_together(const ptdp_pp_layout *l);
/* Boundaries between devices that one micro-batch's activations cross
 * (and its gradients, back): p v - 1 round a ring, 2p - 2 down and up a V
 * (its tip stays on a device), p - 1 through one of two copies. */
int  ptdp_pp_layout_crossings(const ptdp_pp_layout *l);

#endif
