/*
 * reduce.c — the arithmetic inside every reducing collective.
 *
 *   out[i] = a[i] op b[i]          op ∈ {sum, max, min}; avg = sum, then / n
 *
 * One plain loop per element type and operation, so the compiler can
 * vectorise each (they are the whole cost of a large all_reduce besides
 * the copies).  Integers add in unsigned arithmetic: wrapping is defined,
 * signed overflow would not be.
 *
 * ptdp_reduce_many() combines k buffers left to right, (((in0 op in1) op
 * in2) op …), tile by tile, and stores each finished tile into one or more
 * outputs:
 *
 *      in0 ─┐                              ┌─► out0
 *      in1 ─┼─► acc (one tile, in L1) ─────┼─► out1
 *      in2 ─┘                              └─► …
 *
 * Each input is read from memory once and each output written once, and
 * because a tile is finished before it is stored, an output may be one of
 * the inputs (an in-place all_reduce reduces into its own send buffer).
 * The fixed left-to-right order is what makes results bit-identical from
 * run to run.
 */
#include <stdint.h>
#include <string.h>

#include "comm/comm_impl.h"

#define TILE_BYTES 4096

/* Run BODY for i in [0, n): in blocks of 16 with a fixed trip count, then
 * the rest one by one.  The fixed-length inner loop is what gcc -O2's
 * cautious vectoriser (it refuses loops of unknown length) turns into
 * SIMD instructions; clang vectorises either way. */
#define BLOCKED_LOOP(n, BODY)                                                  \
    do {                                                                       \
        size_t b0_ = 0;                                                        \
        for (; b0_ + 16 <= (n); b0_ += 16)                                     \
            for (size_t i = b0_; i < b0_ + 16; i++)                            \
                BODY;                                                          \
        for (size_t i = b0_; i < (n); i++)                                     \
            BODY;                                                              \
    } while (0)

/* For each element type: out = a op b (three distinct buffers), acc = acc
 * op b, and buf = buf / k.  `restrict` promises the buffers are distinct,
 * which lets the compiler vectorise without run-time overlap checks. */
#define KERNELS(T, NAME, ADD)                                                         \
    static void NAME##_combine(T *restrict out, const T *restrict a,                 \
                               const T *restrict b, size_t n, ptdp_op op)            \
    {                                                                                 \
        switch (op) {                                                                 \
        case PTDP_MAX: BLOCKED_LOOP(n, out[i] = a[i] > b[i] ? a[i] : b[i]); break;    \
        case PTDP_MIN: BLOCKED_LOOP(n, out[i] = a[i] < b[i] ? a[i] : b[i]); break;    \
        default:       BLOCKED_LOOP(n, out[i] = ADD(a[i], b[i])); break;  /* SUM, AVG */ \
        }                                                                             \
    }                                                                                 \
    static void NAME##_accumulate(T *restrict acc, const T *restrict b, size_t n,    \
                                  ptdp_op op)                                         \
    {                                                                                 \
        switch (op) {                                                                 \
        case PTDP_MAX: BLOCKED_LOOP(n, acc[i] = acc[i] > b[i] ? acc[i] : b[i]); break; \
        case PTDP_MIN: BLOCKED_LOOP(n, acc[i] = acc[i] < b[i] ? acc[i] : b[i]); break; \
        default:       BLOCKED_LOOP(n, acc[i] = ADD(acc[i], b[i])); break;            \
        }                                                                             \
    }                                                                                 \
    static void NAME##_divide(T *buf, size_t n, T k)                                  \
    {                                                                                 \
        BLOCKED_LOOP(n, buf[i] = buf[i] / k);                                         \
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

#define REDUCE2(NAME)                                                  \
    if (out == a)                                                      \
        NAME##_accumulate(out, b, n, op);                              \
    else                                                               \
        NAME##_combine(out, a, b, n, op);                              \
    break

void ptdp_reduce2(void *out, const void *a, const void *b, size_t n, ptdp_dtype t, ptdp_op op)
{
    switch (t) {
    case PTDP_F32: REDUCE2(f32);
    case PTDP_F64: REDUCE2(f64);
    case PTDP_I32: REDUCE2(i32);
    case PTDP_I64: REDUCE2(i64);
    case PTDP_U8:  REDUCE2(u8);
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

void ptdp_reduce_many(void *const *out, int nout, const void *const *in, int k, size_t n,
                      ptdp_dtype t, ptdp_op op)
{
    size_t es = ptdp_dtype_size(t);
    size_t per_tile = TILE_BYTES / es;
    alignas(64) unsigned char acc[TILE_BYTES];

    for (size_t i0 = 0; i0 < n; i0 += per_tile) {
        size_t m = n - i0 < per_tile ? n - i0 : per_tile;
        size_t off = i0 * es;
        const void *tile = acc;
        if (k == 1) {
            tile = (const char *)in[0] + off;
        } else {
            ptdp_reduce2(acc, (const char *)in[0] + off, (const char *)in[1] + off, m, t, op);
            for (int j = 2; j < k; j++)
                ptdp_reduce2(acc, acc, (const char *)in[j] + off, m, t, op);
            if (op == PTDP_AVG)
                ptdp_divide(acc, m, t, k);
        }
        for (int o = 0; o < nout; o++)      /* the tile is final: store it */
            ptdp_copy((char *)out[o] + off, tile, m * es);
    }
}
