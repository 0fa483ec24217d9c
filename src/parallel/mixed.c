/*
 * mixed.c — the arithmetic on a store of ptdp_real or bf16 (mixed.h).
 *
 * Each function is one loop per type.  For a ptdp_real store it does what
 * the float code always did (a copy, an add, optim.h's ptdp_sum_squares),
 * so a run without --precision bf16 keeps its bits.  For bf16, every value
 * is widened to float, combined in float, and rounded back once:
 *
 *   g16[i] = bf16( float(g16[i]) + g[i] )      a gradient accumulated
 */
#include "ptdp/mixed.h"

#include <string.h>

#include "ptdp/optim.h"

void ptdp_store_to_real(ptdp_dtype t, ptdp_real *dst, const void *src, size_t n)
{
    if (t == PTDP_BF16)
        ptdp_bf16_to_real_array(dst, src, n);
    else if (n > 0)
        memcpy(dst, src, n * sizeof(ptdp_real));
}

void ptdp_store_from_real(ptdp_dtype t, void *dst, const ptdp_real *src, size_t n)
{
    if (t == PTDP_BF16)
        ptdp_bf16_from_real_array(dst, src, n);
    else if (n > 0)
        memcpy(dst, src, n * sizeof(ptdp_real));
}

void ptdp_store_add(ptdp_dtype t, void *dst, const void *src, size_t n)
{
    if (t == PTDP_BF16) {
        ptdp_bf16 *d = dst;
        const ptdp_bf16 *s = src;
        for (size_t i = 0; i < n; i++)
            d[i] = ptdp_bf16_from_float(ptdp_bf16_to_float(d[i]) + ptdp_bf16_to_float(s[i]));
    } else {
        ptdp_real *d = dst;
        const ptdp_real *s = src;
        for (size_t i = 0; i < n; i++)
            d[i] += s[i];
    }
}

void ptdp_store_add_real(ptdp_dtype t, void *dst, const ptdp_real *src, size_t n)
{
    if (t == PTDP_BF16) {
        ptdp_bf16 *d = dst;
        for (size_t i = 0; i < n; i++)
            d[i] = ptdp_bf16_from_float((float)(ptdp_bf16_to_float(d[i]) + src[i]));
    } else {
        ptdp_real *d = dst;
        for (size_t i = 0; i < n; i++)
            d[i] += src[i];
    }
}

double ptdp_store_sum_squares(ptdp_dtype t, const void *src, size_t n)
{
    if (t != PTDP_BF16)
        return ptdp_sum_squares(src, n);
    const ptdp_bf16 *s = src;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        double x = ptdp_bf16_to_float(s[i]);
        sum += x * x;
    }
    return sum;
}
