/*
 * ulysses.h — context parallelism's other attention: DeepSpeed-Ulysses
 * (Jacobs et al. 2023; Megatron-LM's --cp-comm-type a2a).
 *
 * Under CP a device holds T/N positions of every sequence (cp.h's zigzag
 * or contiguous shares) for all of its heads.  Heads are independent, so
 * around attention the CP group trades the split of the positions for a
 * split of the heads: one all-to-all, and each rank holds all T positions,
 * in order, of heads/N heads — whole sequences, whose causal attention is
 * exactly one device's (attention.c) — then one all-to-all back.
 *
 *   rank r before          block j of my send                rank r after
 *   [T/N positions,  ──►   my positions, rank j's heads  ──► [T positions,
 *    every head]           (N - 1 blocks travel)              heads r H/N ..]
 *
 *       heads →                                          heads (mine) →
 *   pos ┌──┬──┬──┬──┐                               pos  ┌──┐
 *   r   │j0│j1│j2│j3│  ── block j to rank j ──►     0..  │i0│ block i from
 *       └──┴──┴──┴──┘                               T-1  │i1│ rank i, at its
 *                                                        │i2│ positions
 *                                                        │i3│
 *                                                        └──┘
 *
 * Bytes: an all-to-all keeps 1/N of a tensor and sends the rest, (N-1)/N
 * of it.  A block sends q, k and v there (one all-to-all, the three side
 * by side) and y back; its backward dy there and dq, dk, dv back: per
 * device and block, with X = B (T/N) (C/tp) elements (y's size),
 *
 *   forward 4 X (N-1)/N,   backward 4 X (N-1)/N,   8 X (N-1)/N in all,
 *
 * against the ring's K and V, N - 1 times forward and twice (with their
 * gradients) backward, plus the gradients' last trip home: (6 (N-1) + 2) X.
 * Ulysses needs the heads on each rank (H = heads/tp) divisible by N.
 */
#ifndef PTDP_ULYSSES_H
#define PTDP_ULYSSES_H

#include <stdbool.h>

#include "comm.h"
#include "tensor.h"

struct ptdp_device;

/* seq: (B Tl) x (parts heads hd), this rank's Tl = T/N positions (its
 * cp.h layout, zigzag or contiguous) of `heads` heads of hd, in `parts`
 * blocks side by side (q | k | v: parts 3).  out: (B T) x (parts
 * (heads/N) hd), every position in order, of heads r heads/N .. of each
 * part.  out may share seq's storage: the pack reads all of seq before
 * anything is written.  Collective over cp; 0 or the device's failure. */
int ptdp_ulysses_heads_from_sequence(struct ptdp_device *dev, ptdp_comm *cp, ptdp_tensor seq, ptdp_tensor out,
                                     int T, int parts, int heads, int hd, bool zigzag);
/* The way back: heads (B T) x (parts (heads/N) hd) to out (B Tl) x (parts
 * heads hd); out may share the storage of `in`. */
int ptdp_ulysses_sequence_from_heads(struct ptdp_device *dev, ptdp_comm *cp, ptdp_tensor in, ptdp_tensor out,
                                     int T, int parts, int heads, int hd, bool zigzag);

/* Grouped-query attention's q | k | v (attention.c's packing): q of
 * `heads` heads, k and v of `kv_heads` each, side by side; rank r receives
 * query heads r heads/N .. and kv heads r kv_heads/N .. (those its query
 * heads read, h / (heads/kv_heads)), out (B T) x ((heads + 2 kv_heads)/N
 * hd).  Both head counts must divide by N: Ulysses' degree is capped by
 * the kv heads.  kv_heads = heads is the pair above with parts 3. */
int ptdp_ulysses_gqa_heads_from_sequence(struct ptdp_device *dev, ptdp_comm *cp, ptdp_tensor seq, ptdp_tensor out,
                                         int T, int heads, int kv_heads, int hd, bool zigzag);
int ptdp_ulysses_gqa_sequence_from_heads(struct ptdp_device *dev, ptdp_comm *cp, ptdp_tensor in, ptdp_tensor out,
                                         int T, int heads, int kv_heads, int hd, bool zigzag);

/* Elements one device sends in the CP group per block and micro-batch
 * (the formula above), for B sequences of T positions of `width` = C/tp
 * columns on a CP group of N, with `forwards` forward passes (2 under full
 * recomputation, which runs the forward again in the backward):
 *   (4 forwards + 4) X (N-1)/N,   X = B (T/N) width
 * (the ring's: ptdp_ring_elements_per_block, cp.h). */
double ptdp_ulysses_elements_per_block(int B, int T, int width, int N, int forwards);

#endif
