/*
 * zero3_qwz.h — ZeRO++'s qwZ (--zero-qwz) for zero3.c and the trainer
 * (private to src/; the idea, the formula and the picture open
 * zero3_qwz.c).
 */
#ifndef PTDP_PARALLEL_ZERO3_QWZ_H
#define PTDP_PARALLEL_ZERO3_QWZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptdp/counters.h"
#include "ptdp/model.h"
#include "ptdp/zero.h"

struct ptdp_device;

/* x[0..n) in blocks of B from its start: each block's scale amax/127 (1
 * for zeros), each code round(x/s) to even, clamped to ±127 (NaN: 0);
 * codes, scales (⌈n/B⌉) and out (q s; may be x itself) each optional. */
void   ptdp_qwz_quantize(const ptdp_real *x, size_t n, int B, int8_t *codes, ptdp_real *scales, ptdp_real *out);
/* The same with codes in [-qmax, qmax] and scales amax/qmax (qgZ's INT4:
 * qmax 7, zero3_qgz.c). */
void   ptdp_quantize_blocks(const ptdp_real *x, size_t n, int B, int qmax, int8_t *codes, ptdp_real *scales,
                            ptdp_real *out);
size_t ptdp_qwz_blocks(size_t n, int B);
/* A unit's n values w quantized in place as N ranks' shards would be
 * (ptdp_share's cut, blocks of B from each shard's start). */
void   ptdp_qwz_quantize_unit(ptdp_real *w, size_t n, int N, int B);
/* The bytes of the largest rank's wire for unit u over N ranks. */
size_t ptdp_qwz_wire_bytes(const ptdp_zero_unit *u, int N, int B);

/* The run's counter "qwz_gather_bytes" (per device: W, what one forward
 * gather of all its units puts in the all-gathers' buffers, N wires of the
 * largest rank's each), published, and set once the units are laid out. */
int  ptdp_zero3_qwz_publish(ptdp_counters *reg);
void ptdp_zero3_qwz_count(struct ptdp_device *dev, const ptdp_zero *z);

/* ZeRO-3: start (start) or do unit k's forward gather in INT8 into
 * u->gathered; once it has arrived, rebuild the float unit u->w. */
int  ptdp_zero3_qwz_gather(struct ptdp_device *dev, ptdp_zero *z, int k, bool start);
int  ptdp_zero3_qwz_rebuild(struct ptdp_device *dev, ptdp_zero *z, int k);

/* --check's one device: its units quantized as N ranks' shards would be,
 * in blocks of B, in place in m->flat_w while a forward is the first to
 * hold them, restored when the last user ends (a unit hook; the model's
 * float buffer whole, no other hook).  _free removes it.  Under bf16 the
 * unit hook is ZeRO's own (zero3.c), which quantizes the widened unit
 * when z->qwz_ranks is set (the mesh's qwz_ranks). */
int  ptdp_zero_qwz_emulate(struct ptdp_device *dev, ptdp_model *m, int N, int B);
void ptdp_zero_qwz_emulate_free(ptdp_model *m);

#endif
