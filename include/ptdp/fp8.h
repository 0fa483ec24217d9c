/*
 * fp8.h — the two 8-bit float formats of FP8 training (OCP FP8): E4M3 for
 * precision (weights, activations), E5M2 for range (gradients).
 *
 * An FP8 code is one byte, sign, exponent and mantissa, like a tiny float:
 *
 *     E4M3 "fn"  │s│ e e e e │ m m m │     bias 7,  max 448   = 1.75 · 2^8
 *                 7 6     3   2   0
 *     E5M2       │s│ e e e e e │ m m │     bias 15, max 57344 = 1.75 · 2^15
 *                 7 6       2   1 0
 *
 *     code = s << 7 | magnitude           (-x is x's code with bit 7 set)
 *
 *     e = 0        subnormal   (-1)^s · m · 2^(1 - bias - M)          (M mantissa bits)
 *     e > 0        normal      (-1)^s · (2^M + m) · 2^(e - bias - M)
 *
 *   E4M3 "fn" (finite, NaN): no infinities; only S.1111.111 (0x7F, 0xFF) is
 *   NaN, so e = 15 holds normal values up to 0x7E = 1.75 · 2^8 = 448.  The
 *   smallest subnormal is 2^-9.
 *   E5M2 is IEEE-like: e = 31 is infinity (m = 0: 0x7C, 0xFC) or NaN
 *   (m ≠ 0); max 0x7B = 1.75 · 2^15 = 57344, smallest subnormal 2^-16.
 *
 * On the number line the codes of one sign are in the order of their
 * values, so code + 1 is the next value up: within a binade [2^k, 2^(k+1))
 * the 2^M values are a step 2^(k - M) apart, and the subnormals continue the
 * same step below the smallest normal (E4M3: 8 values per binade, 1/8 apart
 * around 1; 448 and 416 are the two largest).
 *
 * The cast from float (or double) rounds to nearest, ties to even, and
 * SATURATES: whatever is beyond max (infinity included) becomes ±max, never
 * infinity — a training step then keeps a finite, clipped value where an
 * overflow would have poisoned the sum.  NaN becomes NaN (0x7F, with x's
 * sign: 0xFF for -NaN), in both formats.  Every code decodes exactly in
 * float: at most 4 significant bits and exponents within float's range.
 *
 * How the cast stays exact (fp8.c): the input's own bits are read as an
 * integer significand M times a power of two, shifted right to FP8's step
 * at that magnitude, and the bits shifted out decide the rounding (more
 * than half: up; exactly half: to the even neighbour).  There is only that
 * one rounding, so nothing can double-round; a float is cast through the
 * same code after its exact widening to double.
 */
#ifndef PTDP_FP8_H
#define PTDP_FP8_H

#include <stdbool.h>
#include <stdint.h>

#include "types.h"

/* A format, one table row: resolve its name once (ptdp_fp8_format_find),
 * then read the row's values. */
typedef struct ptdp_fp8_format {
    const char *name;        /* "e4m3", "e5m2": as --format spells it             */
    ptdp_dtype dtype;        /* PTDP_F8_E4M3, PTDP_F8_E5M2: the safetensors dtype  */
    int exp_bits, man_bits;  /* 4, 3 | 5, 2                                        */
    int bias;                /* 7 | 15                                             */
    uint8_t max_code;        /* 0x7E | 0x7B: the largest finite magnitude          */
    double max;              /* 448 | 57344                                        */
    int mx_emax;             /* 8 | 15: max's exponent, MX's emax_elem (fp8_quant.h) */
    bool has_inf;            /* false | true: E5M2's e = all ones, m = 0           */
} ptdp_fp8_format;

extern const ptdp_fp8_format ptdp_fp8_e4m3, ptdp_fp8_e5m2;

#define PTDP_FP8_NAN UINT8_C(0x7F)   /* the NaN a cast gives, | 0x80 for -NaN */

/* The formats in a fixed order (E4M3, E5M2), and a name's row (NULL if none). */
int ptdp_fp8_format_count(void);
const ptdp_fp8_format *ptdp_fp8_format_at(int i);
const ptdp_fp8_format *ptdp_fp8_format_find(const char *name);

/* x → the nearest code, ties to even, saturating at ±max; NaN → NaN. */
uint8_t ptdp_fp8_from_double(const ptdp_fp8_format *f, double x);
uint8_t ptdp_fp8_from_float(const ptdp_fp8_format *f, float x);
uint8_t ptdp_fp8_from_real(const ptdp_fp8_format *f, ptdp_real x);

/* A code's value, exactly (±infinity for E5M2's 0x7C/0xFC; a quiet NaN of
 * the code's sign for a NaN code). */
float ptdp_fp8_to_float(const ptdp_fp8_format *f, uint8_t code);
static inline ptdp_real ptdp_fp8_to_real(const ptdp_fp8_format *f, uint8_t code)
{
    return (ptdp_real)ptdp_fp8_to_float(f, code);   /* widening to double is exact */
}

/* True for the codes that decode to NaN. */
bool ptdp_fp8_is_nan(const ptdp_fp8_format *f, uint8_t code);

#endif
