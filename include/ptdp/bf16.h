/*
 * bf16.h — bfloat16: float's top half, the storage type of mixed precision.
 *
 * A bfloat16 is a float with the low 16 bits of its mantissa cut off:
 *
 *     float   │s│ exponent (8) │      mantissa (23)                      │
 *             31 30         23 22                                       0
 *     bf16    │s│ exponent (8) │ mantissa (7) │  ← the top 16 bits of a float
 *             15 14          7 6            0
 *
 * Same sign, same 8-bit exponent, so the same range as float (±3.4e38, and
 * denormals down to 2^-133), but only 8 significant bits (1 implicit + 7):
 * about 3 decimal digits, a relative step of 2^-8 = 0.4%.  That is why mixed
 * precision keeps float "master" weights in the optimizer: an update of
 * lr·g ≈ 1e-3 · |p| is below half a bf16 step and would simply vanish if it
 * were added to the bf16 parameter itself.  What bf16 buys is half the bytes
 * for parameters, gradients and their communication — and, unlike fp16, no
 * loss scaling, since gradients keep float's exponent range.
 *
 * Widening is exact:  float = bits << 16.  Narrowing rounds to nearest,
 * ties to even, exactly as PyTorch's c10::BFloat16 (round_to_nearest_even):
 *
 *     bits + 0x7FFF + (bit 16 of bits),  keep the top 16 bits
 *
 * The 0x7FFF rounds up whatever is above the halfway point 0x8000; the
 * extra 1, added only when the kept part is odd, makes the halfway point
 * itself round up to even (and stay put when already even).  A carry out
 * of the mantissa increments the exponent, which is exactly right — the
 * largest finite values round up to infinity, as round-to-nearest-even
 * requires.  NaN is the one input the trick gets wrong (a NaN with only low
 * mantissa bits would round to infinity), so any NaN becomes the quiet NaN
 * 0x7FC0, as in PyTorch; ±inf stay ±inf.
 *
 * Bytes per parameter under bf16 mixed precision with AdamW:
 *     2 (bf16 parameter) + 2 (bf16 gradient) + 4 + 4 + 4 (float master, m, v) = 16.
 *
 * The scalar conversions are inline: they run once per element inside the
 * reduce kernels and the optimizer, where a call per element would cost
 * more than the conversion.  The array conversions are in src/core/bf16.c.
 */
#ifndef PTDP_BF16_H
#define PTDP_BF16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "types.h"

typedef uint16_t ptdp_bf16;

#define PTDP_BF16_NAN UINT16_C(0x7FC0)   /* the quiet NaN every NaN becomes */

/* bf16 → float: exact, the 16 bits become a float's top half. */
static inline float ptdp_bf16_to_float(ptdp_bf16 b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof f);     /* reinterpret, without breaking aliasing rules */
    return f;
}

/* float → bf16, round to nearest, ties to even (c10::BFloat16's rule). */
static inline ptdp_bf16 ptdp_bf16_from_float(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & UINT32_C(0x7FFFFFFF)) > UINT32_C(0x7F800000))   /* NaN: exponent all ones, mantissa not 0 */
        return PTDP_BF16_NAN;
    uint32_t round_bias = UINT32_C(0x7FFF) + ((bits >> 16) & 1u);
    return (ptdp_bf16)((bits + round_bias) >> 16);   /* never overflows: bits <= 0xFF800000 here */
}

/* double → bf16, rounded once, directly (not double → float → bf16, which
 * rounds twice and can land on the wrong side of a tie: see bf16.c). */
ptdp_bf16 ptdp_bf16_from_double(double x);

/* The value x becomes when stored as bf16, as a ptdp_real (x rounded to
 * bf16 and widened back): what a bf16 parameter holds.  In the double
 * build x is rounded directly from double. */
ptdp_real ptdp_bf16_round(ptdp_real x);

/* Arrays, n elements; dst and src must not overlap. */
void ptdp_bf16_from_float_array(ptdp_bf16 *dst, const float *src, size_t n);
void ptdp_bf16_to_float_array(float *dst, const ptdp_bf16 *src, size_t n);
void ptdp_bf16_from_double_array(ptdp_bf16 *dst, const double *src, size_t n);
void ptdp_bf16_to_double_array(double *dst, const ptdp_bf16 *src, size_t n);
/* The same for ptdp_real (float or double, whichever this build uses). */
void ptdp_bf16_from_real_array(ptdp_bf16 *dst, const ptdp_real *src, size_t n);
void ptdp_bf16_to_real_array(ptdp_real *dst, const ptdp_bf16 *src, size_t n);

#endif
