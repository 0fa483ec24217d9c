/*
 * zero3_fp8.h — ZeRO-3's parameter all-gather in FP8 (--fp8-comm), for
 * zero3.c (private to src/; the idea, the formula and the picture open
 * zero3_fp8.c).
 */
#ifndef PTDP_PARALLEL_ZERO3_FP8_H
#define PTDP_PARALLEL_ZERO3_FP8_H

#include <stdbool.h>

#include "ptdp/counters.h"
#include "ptdp/model.h"
#include "ptdp/zero.h"

struct ptdp_device;

/* --fp8-comm: z->fp8 set from the model's FP8 (else NULL), and the device's
 * counters set for the report's formula: "fp8_gather_elements" (q: the
 * elements of its FP8 weights), "fp8_gather_tiles" (T: their amaxes) and
 * "fp8_gather_bytes" (W: what one gather of all its units puts in the
 * all-gathers' buffers, each FP8 unit's N wires padded to the largest).
 * After the units are laid out, before their subunits. */
int  ptdp_zero3_fp8_init(struct ptdp_device *dev, ptdp_zero *z, const ptdp_model *m);
/* The run's counters above (counters.h). */
int  ptdp_zero3_fp8_publish(ptdp_counters *reg);

/* Does unit k travel in FP8: --fp8-comm, and it holds a weight FP8
 * quantizes?  (A unit of none — the embeddings, the head — is gathered as
 * before.) */
bool ptdp_zero3_fp8_gathers(const ptdp_zero *z, const ptdp_model *m, int k);
/* Start (start) or do unit k's gather: the amaxes reduced and the scales
 * taken at once, then the wires' all-gather into u->gathered. */
int  ptdp_zero3_fp8_gather(struct ptdp_device *dev, ptdp_zero *z, const ptdp_model *m, int k, bool start);
/* Once gathered: the float unit u->w from the wires (the FP8 weights
 * dequantized, the rest widened), its weights held by the linear op;
 * the wires freed. */
int  ptdp_zero3_fp8_rebuild(struct ptdp_device *dev, ptdp_zero *z, const ptdp_model *m, int k);
/* Unit k released: its weights no longer held. */
void ptdp_zero3_fp8_release(ptdp_zero *z, const ptdp_model *m, int k);

#endif
