/*
 * mixed.h — mixed precision: parameters and gradients stored as bf16, the
 * arithmetic in float, float master weights in the optimizer.
 *
 * `--precision bf16` (the float build, `ptdp`) keeps, per parameter,
 *
 *   store          bytes   what                                     category
 *   parameter       2      bf16, what the model computes with       params
 *   gradient        2      bf16, what DP and ZeRO sum and shard     grads
 *   master weight   4      float: the optimizer updates it …        optim
 *   AdamW m, v      4 + 4  float                                    optim
 *                  ──
 *                  16      the ZeRO paper's 2Ψ + 2Ψ + 12Ψ
 *
 * … and writes the parameter back as bf16(master) (optim.h's
 * ptdp_adamw_step_bf16).  The model's own views stay float (ptdp_tensor): a
 * unit's bf16 parameters are widened into a float working copy when the
 * model begins to use it and dropped when it is done — or, for a unit the
 * model cut into subunits (model.h: a GPT block's linear layers), one subunit
 * at a time around the op that reads it; the gradient is computed in float
 * and added into the bf16 gradient store, rounded, when the unit's (or the
 * subunit's) backward ends (zero3.c runs both, with or without ZeRO-3).  So every
 * matrix product multiplies bf16-valued weights in float, as a GPU's bf16
 * GEMM does with float accumulation.  The activations a micro-batch keeps
 * for its backward are bf16 too: rounded where they are made and stored
 * as bf16 from a block's forward to its backward (act_bf16.h).
 *
 * Everything that moves or sums whole stores — DP's all-reduce, ZeRO's
 * reduce-scatters and gathers — does it in the store's type, so bf16 halves
 * their bytes; the reduction adds in float and rounds each partial sum to
 * bf16, as NCCL does (comm/reduce.c).  This file is the arithmetic on a
 * store whose type is either ptdp_real or bf16.
 */
#ifndef PTDP_MIXED_H
#define PTDP_MIXED_H

#include <stddef.h>

#include "bf16.h"
#include "types.h"

/* Bytes per element of a store (PTDP_REAL or PTDP_BF16). */
static inline size_t ptdp_store_size(ptdp_dtype t)
{
    return t == PTDP_BF16 ? sizeof(ptdp_bf16) : sizeof(ptdp_real);
}

/* Element i of a store. */
static inline void *ptdp_store_at(ptdp_dtype t, void *buf, size_t i)
{
    return buf == NULL ? NULL : (char *)buf + i * ptdp_store_size(t);
}

/* dst[i] = src[i] (widened: exact). */
void   ptdp_store_to_real(ptdp_dtype t, ptdp_real *dst, const void *src, size_t n);
/* dst[i] = src[i] (narrowed to bf16: rounded to nearest even). */
void   ptdp_store_from_real(ptdp_dtype t, void *dst, const ptdp_real *src, size_t n);
/* dst[i] += src[i], the sum rounded to the store's type: gradient accumulation. */
void   ptdp_store_add(ptdp_dtype t, void *dst, const void *src, size_t n);
void   ptdp_store_add_real(ptdp_dtype t, void *dst, const ptdp_real *src, size_t n);
/* Sum of src[i]^2 in double, in order (ptdp_sum_squares for a float store). */
double ptdp_store_sum_squares(ptdp_dtype t, const void *src, size_t n);

#endif
