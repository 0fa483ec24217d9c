/*
 * bf16_values.c — ptdp's bf16 rounding of a few thousand values, written to
 * a safetensors file for check_bf16.py to compare with PyTorch's.
 *
 *     bf16_values OUT.st
 *
 *     x       F32  [n]   float bit patterns: a spread of bf16 values, each
 *                        exact, just below, at and just above its tie;
 *                        ±0, ±inf, NaNs, denormals, the largest finite
 *                        values; random patterns
 *     x_bf16  BF16 [n]   ptdp_bf16_from_float(x)
 *     d       F64  [m]   doubles at and within half a float step of bf16 ties
 *     d_bf16  BF16 [m]   ptdp_bf16_from_double(d): rounded once (bf16.c)
 *
 * The file goes through ptdp's own BF16 writer, so PyTorch reading it back
 * also checks the dtype's bytes.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ptdp/bf16.h"
#include "ptdp/safetensors.h"

enum { MAX_X = 16384, MAX_D = 4096 };

static float float_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT.st\n", argv[0]);
        return 2;
    }
    static float x[MAX_X];
    static double d[MAX_D];
    static ptdp_bf16 xb[MAX_X], db[MAX_D];
    static const uint32_t specials[] = {
        0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
        0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF, 0xFF7FFFFF, 0x00000001, 0x00008000, 0x00018000,
        0x007FFFFF, 0x00800000, 0x3F808000, 0x3F818000,
    };
    static const uint32_t lows[] = { 0x0000, 0x7FFF, 0x8000, 0x8001 };
    int n = 0, m = 0;
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
        x[n++] = float_of_bits(specials[i]);
    for (uint32_t b = 0; b < 0x10000; b += 37)
        for (int k = 0; k < 4; k++)
            x[n++] = float_of_bits(b << 16 | lows[k]);
    uint64_t s = 1;
    while (n < 10000) {                      /* xorshift64: any patterns will do */
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        x[n++] = float_of_bits((uint32_t)s);
    }
    for (uint32_t b = 0x0080; b < 0x7F80 && m + 3 <= MAX_D; b += 29) {
        double tie = (double)float_of_bits(b << 16 | 0x8000), half = tie - ptdp_bf16_to_float((ptdp_bf16)b);
        d[m++] = tie;
        d[m++] = tie + half * 0x1p-30;       /* its float is the tie: the corner */
        d[m++] = -(tie - half * 0x1p-30);
    }
    ptdp_bf16_from_float_array(xb, x, (size_t)n);
    ptdp_bf16_from_double_array(db, d, (size_t)m);

    ptdp_st_tensor t[4] = {
        { .name = "x", .dtype = PTDP_F32, .ndim = 1, .shape = { n }, .data = x },
        { .name = "x_bf16", .dtype = PTDP_BF16, .ndim = 1, .shape = { n }, .data = xb },
        { .name = "d", .dtype = PTDP_F64, .ndim = 1, .shape = { m }, .data = d },
        { .name = "d_bf16", .dtype = PTDP_BF16, .ndim = 1, .shape = { m }, .data = db },
    };
    char msg[512];
    if (ptdp_st_write(argv[1], t, 4, NULL, NULL, 0, msg, sizeof msg) != 0) {
        fprintf(stderr, "bf16_values: %s\n", msg);
        return 1;
    }
    return 0;
}
