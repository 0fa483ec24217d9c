/*
 * act_bf16.h — activations kept as bf16 between a micro-batch's forward
 * and its backward (`--precision bf16`, mixed.h).
 *
 * A GPU training in bf16 writes every activation as bf16: a product's
 * output, a LayerNorm's, GELU's, the residual stream.  The next op reads
 * those 16 bits, and so does the backward, which is why the activations
 * of the memory formulas (Korthikanti et al.: s b h (34 + 5 a s / h)
 * bytes a layer) count 2 bytes an element.  ptdp's ops compute in
 * ptdp_real, so a model under bf16 does two things:
 *
 *   1. rounds each activation it keeps where it is made, in place
 *      (ptdp_act_round), before the next op reads it: the forward
 *      computes with the bf16 values a GPU would have written;
 *
 *   2. stores what it keeps as bf16: a block's forward works in float
 *      tensors, then ptdp_act_pack moves them into one bf16 buffer (half
 *      the bytes; exact, since the values are already bf16) and frees the
 *      floats; the block's backward ptdp_act_unpack-s them into float
 *      tensors again (exact: widening) and frees the bf16.
 *
 *      forward of block i                       backward of block i
 *      ┌── float working tensors ──┐  pack      ┌── float tensors ──┐
 *      │ ln1 qkv y x2 ln2 fc gelu …│ ───────►   │ ln1 qkv y x2 …    │ ◄─ unpack ─ bf16 buffer
 *      └───────────────────────────┘ bf16 buffer└───────────────────┘
 *                                    (kept: 2 bytes an element)
 *
 * So one block's float copy exists at a time, as with the parameters'
 * float working copy of a unit (zero3.c); what stays float is small or
 * float on GPUs too: the LayerNorm statistics (apex keeps mean and
 * 1/std in float), the logits (Megatron's cross-entropy upcasts them) and
 * the softmax statistics.
 */
#ifndef PTDP_ACT_BF16_H
#define PTDP_ACT_BF16_H

#include <stddef.h>

#include "bf16.h"
#include "device.h"
#include "tensor.h"

/* t's values rounded to bf16 (to nearest even), in place. */
void ptdp_act_round(ptdp_tensor t);
void ptdp_act_round_reals(ptdp_real *x, size_t n);

/* One kept activation: a whole tensor, or n reals (the probabilities). */
typedef struct {
    ptdp_tensor *t;           /* or NULL, and then:                  */
    ptdp_real **reals;        /*   *reals (may be NULL: nothing kept) */
    size_t n;                 /*   of n elements                      */
    const char *name;         /*   its name in the arena              */
} ptdp_act_slot;

/* The bf16 buffer a group of slots packs into. */
typedef struct {
    ptdp_bf16 *data;
    size_t n;                 /* elements                              */
    unsigned held;            /* bit i: slot i had values and is in it */
} ptdp_act_packed;

#define PTDP_ACT_SLOTS_MAX 16

/* Move the slots' values into one new bf16 buffer `name` (category acts),
 * rounding, then free the float tensors; each tensor keeps its shape and
 * name with data NULL.  A slot with nothing to keep is skipped. */
int ptdp_act_pack(ptdp_device *dev, ptdp_act_packed *pk, const ptdp_act_slot *slots, int nslots, const char *name);
/* The reverse: allocate each slot's float tensor again (its name, its
 * shape), widen its values into it, and free the bf16 buffer.  A no-op
 * when nothing is packed. */
int ptdp_act_unpack(ptdp_device *dev, ptdp_act_packed *pk, const ptdp_act_slot *slots, int nslots);
/* Free a packed buffer (a micro-batch dropped before its backward). */
void ptdp_act_packed_free(ptdp_device *dev, ptdp_act_packed *pk);

#endif
