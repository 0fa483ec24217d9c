/*
 * reduce_kernels.c — the arithmetic inside every reducing collective.
 *
 *   out[i] = a[i] op b[i]          op ∈ {sum, max, min}; avg = sum, then / n
 *
 * One plain loop per element type and operation, so the compiler can
 * vectorise each (they are the whole cost of a large all_reduce besides
 * the copies).  Integers add in unsigned arithmetic: wrapping is defined,
 * signed overflow would not be.
 *
 * ptdp_reduce_many() combines k buffers left to right, (((in0 op in1) op
 * in2) op …), tile by tile:
 *
 *      in0 ─┐
 *      in1 ─┼─► acc (one tile, in L1) ──► out
 *      in2 ─┘
 *
 * Each input is read from memory once and the output written once, and
 * because the tile is finished before it is stored, `out` may be one of
 * the inputs (an in-place all_reduce reduces into its own send buffer).
 * The fixed left-to-right order is what makes results bit-identical from
 * run to run.
 */
#include <stdint.h>
#include <string.h>

#include "comm_impl.h"

#define TILE_BYTES 8192

#define KERNELS(T, NAME, ADD)                                                        \
    static void NAME##_sum(T *out, const T *a, const T *b, size_t n)                \
    {                                                                                \
        for (size_t i = 0; i < n; i++)                                               \
            out[i] = ADD(a[i], b[i]);                                                \
    }                                                                                \
    static void NAME##_max(T *out, const T *a, const T *b, size_t n)                \
    {                                                                                \
        for (size_t i = 0; i < n; i++)                                               \
            out[i] = a[i] > b[i] ? a[i] : b[i];                                      \
    }                                                                                \
    static void NAME##_min(T *out, const T *a, const T *b, size_t n)                \
    {                                                                                \
        for (size_t i = 0; i < n; i++)                                               \
            out[i] = a[i] < b[i] ? a[i] : b[i];                                      \
    }                                                                                \
    static void NAME##_divide(T *buf, size_t n, T k)                                 \
    {                                                                                \
        for (size_t i = 0; i < n; i++)                                               \
            buf[i] = buf[i] / k;                                                     \
    }                                                                                \
    static void NAME##_reduce2(void *out, const void *a, const void *b, size_t n,   \
                               ptdp_op op)                                           \
    {                                                                                \
        switch (op) {                                                                \
        case PTDP_MAX: NAME##_max(out, a, b, n); break;                              \
        case PTDP_MIN: NAME##_min(out, a, b, n); break;                              \
        default:       NAME##_sum(out, a, b, n); break; /* SUM and AVG */            \
        }                                                                            \
    }

#define ADD_FLOAT(x, y) ((x) + (y))
#define ADD_I32(x, y)   ((int32_t)((uint32_t)(x) + (uint32_t)(y)))
#define ADD_I64(x, y)   ((int64_t)((uint64_t)(x) + (uint64_t)(y)))
#define ADD_U8(x, y)    ((uint8_t)((x) + (y)))

KERNELS(float, f32, ADD_FLOAT)
KERNELS(double, f64, ADD_FLOAT)
KERNELS(int32_t, i32, ADD_I32)
KERNELS(int64_t, i64, ADD_I64)
KERNELS(uint8_t, u8, ADD_U8)

void ptdp_reduce2(void *out, const void *a, const void *b, size_t n, ptdp_dtype t, ptdp_op op)
{
    switch (t) {
    case PTDP_F32: f32_reduce2(out, a, b, n, op); break;
    case PTDP_F64: f64_reduce2(out, a, b, n, op); break;
    case PTDP_I32: i32_reduce2(out, a, b, n, op); break;
    case PTDP_I64: i64_reduce2(out, a, b, n, op); break;
    case PTDP_U8:  u8_reduce2(out, a, b, n, op);  break;
    default: break;
    }
}

void ptdp_divide(void *buf, size_t n, ptdp_dtype t, int k)
{
    switch (t) {
    case PTDP_F32: f32_divide(buf, n, (float)k);   break;
    case PTDP_F64: f64_divide(buf, n, (double)k);  break;
    case PTDP_I32: i32_divide(buf, n, (int32_t)k); break;
    case PTDP_I64: i64_divide(buf, n, (int64_t)k); break;
    case PTDP_U8:  u8_divide(buf, n, (uint8_t)k);  break;
    default: break;
    }
}

void ptdp_reduce_many(void *out, const void *const *in, int k, size_t n, ptdp_dtype t, ptdp_op op)
{
    size_t es = ptdp_dtype_size(t);
    size_t per_tile = TILE_BYTES / es;
    alignas(64) unsigned char acc[TILE_BYTES];

    if (k == 1) {
        ptdp_copy(out, in[0], n * es);
        return;
    }
    for (size_t i0 = 0; i0 < n; i0 += per_tile) {
        size_t m = n - i0 < per_tile ? n - i0 : per_tile;
        size_t off = i0 * es;
        ptdp_reduce2(acc, (const char *)in[0] + off, (const char *)in[1] + off, m, t, op);
        for (int j = 2; j < k; j++)
            ptdp_reduce2(acc, acc, (const char *)in[j] + off, m, t, op);
        if (op == PTDP_AVG)
            ptdp_divide(acc, m, t, k);
        memcpy((char *)out + off, acc, m * es);
    }
}
