/*
 * bf16.c — rounding doubles to bfloat16 once, and the array conversions.
 *
 * The float conversions are two lines each and live inline in bf16.h (the
 * idea and the bit picture are there).  This file adds what takes a thought:
 *
 * Rounding a double to bf16.  The obvious route, double → float → bf16,
 * rounds twice, and two correct roundings do not make one.  A double just
 * above a bf16 tie, by less than half a float step, first rounds *onto* the
 * tie (a float), which ties-to-even then sends the wrong way:
 *
 *     bf16 values         1                                   1 + 2^-7
 *                         |----------------- tie ------------------|
 *                                           1 + 2^-8
 *     x = 1 + 2^-8 + 2^-40                     ^x   (above the tie: should round up)
 *     (float)x = 1 + 2^-8 exactly  → a tie → to even → 1      (wrong: one bf16 step low)
 *
 * PyTorch does exactly this (c10::BFloat16 is built from a float, so a
 * float64 tensor's .to(torch.bfloat16) goes through float32): only x within
 * half a float step of a bf16 tie is affected, and there the two results
 * differ by one bf16 step (tests/pytorch/check_bf16.py shows both).  ptdp rounds once instead, with the textbook
 * repair: the first rounding goes to *odd* (Boldo & Melquiond, "Emulation
 * of FMA and correctly rounded sums: proved algorithms using rounding to
 * odd", 2008).  Round-to-odd keeps a float that was exact, and otherwise
 * takes of its two float neighbours the one with an odd last bit.  A bf16
 * tie is an even float (its low 16 bits are 0x8000), so an inexact x never
 * lands on one and stays on its own side of it; and float has 16 more bits
 * than bf16 (at least 2 are needed), also among the denormals.  The second
 * rounding, float → bf16 to nearest even, then gives the correctly rounded
 * result.
 */
#include "ptdp/bf16.h"

#include <float.h>
#include <math.h>

#define BF16_INF     UINT16_C(0x7F80)
#define BF16_NEG_INF UINT16_C(0xFF80)

/* double → float, rounded to odd: exact values stay, an inexact one goes
 * to whichever float neighbour of x has an odd last bit.  |x| <= FLT_MAX. */
static float round_to_odd_float(double x)
{
    float f = (float)x;                       /* to nearest: a neighbour of x */
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((double)f != x && (bits & 1u) == 0) {
        /* The other neighbour, one step towards x.  Floats are sign and
         * magnitude, so the magnitude bits step by one either way (from
         * ±0 this gives the smallest denormal of x's sign). */
        if (fabs((double)f) > fabs(x))
            bits -= 1u;
        else
            bits += 1u;
        memcpy(&f, &bits, sizeof f);
    }
    return f;
}

ptdp_bf16 ptdp_bf16_from_double(double x)
{
    if (isnan(x))
        return PTDP_BF16_NAN;
    /* Beyond FLT_MAX is beyond the largest bf16 plus half a step: infinity.
     * Handled here because converting such a double to float is undefined
     * in C (without Annex F). */
    if (fabs(x) > FLT_MAX)
        return x > 0 ? BF16_INF : BF16_NEG_INF;
    return ptdp_bf16_from_float(round_to_odd_float(x));
}

ptdp_real ptdp_bf16_round(ptdp_real x)
{
#ifdef PTDP_DOUBLE
    return (ptdp_real)ptdp_bf16_to_float(ptdp_bf16_from_double(x));
#else
    return ptdp_bf16_to_float(ptdp_bf16_from_float(x));
#endif
}

/* ------------------------------------------------------------- arrays */

void ptdp_bf16_from_float_array(ptdp_bf16 *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = ptdp_bf16_from_float(src[i]);
}

void ptdp_bf16_to_float_array(float *dst, const ptdp_bf16 *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = ptdp_bf16_to_float(src[i]);
}

void ptdp_bf16_from_double_array(ptdp_bf16 *dst, const double *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = ptdp_bf16_from_double(src[i]);
}

void ptdp_bf16_to_double_array(double *dst, const ptdp_bf16 *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = (double)ptdp_bf16_to_float(src[i]);   /* both widenings are exact */
}

void ptdp_bf16_from_real_array(ptdp_bf16 *dst, const ptdp_real *src, size_t n)
{
#ifdef PTDP_DOUBLE
    ptdp_bf16_from_double_array(dst, src, n);
#else
    ptdp_bf16_from_float_array(dst, src, n);
#endif
}

void ptdp_bf16_to_real_array(ptdp_real *dst, const ptdp_bf16 *src, size_t n)
{
#ifdef PTDP_DOUBLE
    ptdp_bf16_to_double_array(dst, src, n);
#else
    ptdp_bf16_to_float_array(dst, src, n);
#endif
}
