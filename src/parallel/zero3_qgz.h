/*
 * zero3_qgz.h — ZeRO++'s qgZ (--zero-qgz) for zero3.c and the trainer
 * (private to src/; the idea, the formula and the picture open
 * zero3_qgz.c).
 */
#ifndef PTDP_PARALLEL_ZERO3_QGZ_H
#define PTDP_PARALLEL_ZERO3_QGZ_H

#include <stddef.h>
#include <stdint.h>

#include "ptdp/counters.h"
#include "ptdp/model.h"
#include "ptdp/zero.h"

struct ptdp_device;

/* The bytes of one slot, a shard's piece on the wire for shards of at most
 * L elements: ⌈L bits/8⌉ of codes, then ⌈L/B⌉ scales of sizeof(ptdp_real). */
size_t ptdp_qgz_slot_bytes(size_t L, int bits, int B);

/* The run's counter "qgz_slot_bytes" (per device: X, the sum over its
 * units of a slot's bytes, L = ⌈|u|/N⌉), published, and set once the
 * units are laid out; the mesh's qgz fields copied into z and its two
 * groups built (PTDP_EINVAL, with a message, unless they cut ZeRO's group
 * into 2 or more nodes of 2 or more ranks). */
int  ptdp_zero3_qgz_publish(ptdp_counters *reg);
int  ptdp_zero3_qgz_init(struct ptdp_device *dev, ptdp_zero *z, ptdp_model *m);

/* In place of unit k's reduce-scatter: its float gradient g (the unit's
 * n elements) summed over ZeRO's group by the two quantized all-to-alls,
 * and my shard of the sum added into z->grad_shard. */
int  ptdp_zero3_qgz_reduce(struct ptdp_device *dev, ptdp_zero *z, int k, const ptdp_real *g);

/* --check's one device of a qgZ run: a unit hook (chained after any hook
 * set before it, qwZ's) that keeps each micro-batch's gradient of every
 * unit apart — the one device runs dp x M micro-batches, replica r's i-th
 * as its r M + i-th — and at the last one replaces the step's gradient by
 * what the ranks' quantized all-to-alls would sum: ZeRO groups of N ranks
 * in nodes of k, R = dp / N replicas.  _free removes it. */
int  ptdp_zero_qgz_emulate(struct ptdp_device *dev, ptdp_model *m, int dp, int N, int k, int M, int bits, int B);
void ptdp_zero_qgz_emulate_free(ptdp_model *m);

#endif
