/*
 * fp8.c — casting to and from the FP8 formats, exactly (formats: fp8.h).
 *
 * The cast, for |x| below max (beyond it, and infinity, saturate to max):
 *
 *     |x| = M · 2^(E - 52)            a double's bits: M the 53-bit significand
 *                                     with its leading 1, E the unbiased exponent
 *     k   = max(E, 1 - bias)          x's binade, or the subnormals' one
 *     q   = k - man_bits              the step between FP8 values near x: 2^q
 *     n   = round(|x| / 2^q)          = round(M / 2^s), s = 52 + q - E
 *
 *         M  = 1 0 1 1 0 0 1 … 0 1 1 0 1 0 0 0 … 0     (53 bits)
 *              └── n (kept) ──┘└─ shifted out (s bits) ─┘
 *                              ▲ the first bit shifted out is the half:
 *                                rest > half → up; rest = half → up only if n is odd
 *
 *     code = ((k + bias - 1) << man_bits) + n
 *
 * The code formula needs no case for subnormals or carries: below the
 * smallest normal k + bias - 1 = 0 and the code is n itself (exponent field
 * 0, mantissa n), and when n rounds up to 2^(man_bits + 1) the addition
 * carries into the exponent field, which is exactly the next binade's first
 * value — FP8 codes of one sign count up the number line.
 *
 * Why it cannot double-round: the only rounding is the integer one above,
 * on the bits of x itself.  A float input is widened to double first, and
 * float → double is exact (every float is a double), so a float and its
 * double are cast identically.  Dividing by the step is a shift of the
 * integer M, never a floating-point operation that could round on its own.
 * (The tempting alternative, rounding to some intermediate float format
 * first and then to FP8, can land exactly on an FP8 tie that x itself was
 * not on, and then ties-to-even sends it the wrong way.)
 *
 * x so small that s ≥ 54 is below half the smallest subnormal: it rounds to
 * ±0 (M < 2^53, so M / 2^54 < 1/2).  Double subnormals are all far below it.
 */
#include "ptdp/fp8.h"

#include <math.h>
#include <string.h>

const ptdp_fp8_format ptdp_fp8_e4m3 = {
    .name = "e4m3", .dtype = PTDP_F8_E4M3, .exp_bits = 4, .man_bits = 3, .bias = 7,
    .max_code = 0x7E, .max = 448.0, .mx_emax = 8, .has_inf = false,
};

const ptdp_fp8_format ptdp_fp8_e5m2 = {
    .name = "e5m2", .dtype = PTDP_F8_E5M2, .exp_bits = 5, .man_bits = 2, .bias = 15,
    .max_code = 0x7B, .max = 57344.0, .mx_emax = 15, .has_inf = true,
};

static const ptdp_fp8_format *const formats[] = { &ptdp_fp8_e4m3, &ptdp_fp8_e5m2 };
#define N_FORMATS ((int)(sizeof formats / sizeof formats[0]))

int ptdp_fp8_format_count(void) { return N_FORMATS; }

const ptdp_fp8_format *ptdp_fp8_format_at(int i)
{
    return i >= 0 && i < N_FORMATS ? formats[i] : NULL;
}

const ptdp_fp8_format *ptdp_fp8_format_find(const char *name)
{
    for (int i = 0; name != NULL && i < N_FORMATS; i++)
        if (strcmp(formats[i]->name, name) == 0)
            return formats[i];
    return NULL;
}

/* ------------------------------------------------------------- the cast */

uint8_t ptdp_fp8_from_double(const ptdp_fp8_format *f, double x)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    const uint8_t sign = (uint8_t)((bits >> 63) << 7);
    const uint64_t magnitude = bits & UINT64_C(0x7FFFFFFFFFFFFFFF);
    if (magnitude > UINT64_C(0x7FF0000000000000))     /* NaN: exponent all ones, mantissa ≠ 0 */
        return sign | PTDP_FP8_NAN;
    if (fabs(x) >= f->max)                             /* saturate (infinity too) */
        return sign | f->max_code;
    const int biased = (int)(magnitude >> 52);
    if (biased == 0)                                   /* ±0, or a double subnormal: rounds to ±0 */
        return sign;
    const uint64_t M = (magnitude & ((UINT64_C(1) << 52) - 1)) | (UINT64_C(1) << 52);
    const int E = biased - 1023, emin = 1 - f->bias;
    const int k = E > emin ? E : emin;
    const int s = 52 + (k - f->man_bits) - E;          /* 49 .. 53 for values that round above 0 */
    if (s >= 54)
        return sign;
    uint64_t n = M >> s;
    const uint64_t rest = M & ((UINT64_C(1) << s) - 1), half = UINT64_C(1) << (s - 1);
    if (rest > half || (rest == half && (n & 1u)))
        n++;
    const uint64_t code = ((uint64_t)(k + f->bias - 1) << f->man_bits) + n;
    /* x < max, and max is an FP8 value, so rounding cannot pass it: the
     * clamp only states the saturation once more. */
    return sign | (uint8_t)(code > f->max_code ? f->max_code : code);
}

uint8_t ptdp_fp8_from_float(const ptdp_fp8_format *f, float x)
{
    return ptdp_fp8_from_double(f, (double)x);         /* exact widening: one rounding */
}

uint8_t ptdp_fp8_from_real(const ptdp_fp8_format *f, ptdp_real x)
{
    return ptdp_fp8_from_double(f, (double)x);
}

/* ------------------------------------------------------------ the value */

bool ptdp_fp8_is_nan(const ptdp_fp8_format *f, uint8_t code)
{
    const unsigned magnitude = code & 0x7Fu, man_mask = (1u << f->man_bits) - 1;
    if (!f->has_inf)
        return magnitude == 0x7Fu;
    return (magnitude >> f->man_bits) == (1u << f->exp_bits) - 1 && (magnitude & man_mask) != 0;
}

/* 2^e for the exponents FP8's values need (-16 .. 15: normal floats),
 * from its bits — exact, and cheaper than ldexpf in a loop over a tensor. */
static float pow2f(int e)
{
    const uint32_t bits = (uint32_t)(e + 127) << 23;
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

float ptdp_fp8_to_float(const ptdp_fp8_format *f, uint8_t code)
{
    const unsigned magnitude = code & 0x7Fu, man_mask = (1u << f->man_bits) - 1;
    const unsigned e = magnitude >> f->man_bits, m = magnitude & man_mask;
    const bool negative = (code & 0x80u) != 0;
    float v;
    if (ptdp_fp8_is_nan(f, code))
        v = NAN;
    else if (f->has_inf && e == (1u << f->exp_bits) - 1)
        v = INFINITY;
    else if (e == 0)                                   /* m · 2^(1 - bias - M) */
        v = (float)m * pow2f(1 - f->bias - f->man_bits);
    else                                               /* (2^M + m) · 2^(e - bias - M) */
        v = (float)((1u << f->man_bits) + m) * pow2f((int)e - f->bias - f->man_bits);
    return negative ? -v : v;
}
