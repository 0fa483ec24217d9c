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
 *
 * Large outputs are stored with non-temporal ("streaming") stores where
 * the CPU has them (SSE2).  An ordinary store to a line not in the cache
 * first reads the line (write-allocate), so writing S bytes moves 2S
 * through memory; a streaming store writes S and no more — a third less
 * traffic for a two-output tile, which is what a large all_reduce is
 * bound by.  Below STREAM_MIN_BYTES of output a call's results may still
 * be in the cache when the caller reads them, so it keeps ordinary
 * stores.  The bits are the same either way; an sfence before returning
 * makes the streamed lines visible before the barrier that publishes them.
 *
 * bfloat16 (bf16.h) has no arithmetic of its own: each pair is widened to
 * float (exact), combined in float, and rounded back to bf16 — as NCCL
 * reduces bf16.  The rounding after every pair is part of the order:
 * (a + b) + c rounds twice, so a sum of k bf16 buffers is k - 1 roundings,
 * the same ones on every run.
 */
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "comm/comm_impl.h"
#include "ptdp/bf16.h"

#define TILE_BYTES 4096
#define STREAM_MIN_BYTES ((size_t)16 << 20)   /* half the largest last-level caches of a laptop or VM */

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
#define KERNELS(T, NAME, ADD, MAX, MIN, DIV)                                          \
    static void NAME##_combine(T *restrict out, const T *restrict a,                 \
                               const T *restrict b, size_t n, ptdp_op op)            \
    {                                                                                 \
        switch (op) {                                                                 \
        case PTDP_MAX: BLOCKED_LOOP(n, out[i] = MAX(a[i], b[i])); break;              \
        case PTDP_MIN: BLOCKED_LOOP(n, out[i] = MIN(a[i], b[i])); break;              \
        default:       BLOCKED_LOOP(n, out[i] = ADD(a[i], b[i])); break;  /* SUM, AVG */ \
        }                                                                             \
    }                                                                                 \
    static void NAME##_accumulate(T *restrict acc, const T *restrict b, size_t n,    \
                                  ptdp_op op)                                         \
    {                                                                                 \
        switch (op) {                                                                 \
        case PTDP_MAX: BLOCKED_LOOP(n, acc[i] = MAX(acc[i], b[i])); break;            \
        case PTDP_MIN: BLOCKED_LOOP(n, acc[i] = MIN(acc[i], b[i])); break;            \
        default:       BLOCKED_LOOP(n, acc[i] = ADD(acc[i], b[i])); break;            \
        }                                                                             \
    }                                                                                 \
    static void NAME##_divide(T *buf, size_t n, int k)                                \
    {                                                                                 \
        BLOCKED_LOOP(n, buf[i] = DIV(buf[i], k));                                     \
    }

#define MAX_PLAIN(x, y) ((x) > (y) ? (x) : (y))
#define MIN_PLAIN(x, y) ((x) < (y) ? (x) : (y))
#define ADD_FLOAT(x, y) ((x) + (y))
#define ADD_I32(x, y)   ((int32_t)((uint32_t)(x) + (uint32_t)(y)))
#define ADD_I64(x, y)   ((int64_t)((uint64_t)(x) + (uint64_t)(y)))
#define ADD_U8(x, y)    ((uint8_t)((x) + (y)))
#define DIV_F32(x, k)   ((x) / (float)(k))
#define DIV_F64(x, k)   ((x) / (double)(k))
#define DIV_I32(x, k)   ((x) / (int32_t)(k))
#define DIV_I64(x, k)   ((x) / (int64_t)(k))
#define DIV_U8(x, k)    ((uint8_t)((x) / (uint8_t)(k)))

/* bf16: widen both to float, combine, round back to bf16. */
#define BF16_F(x)       ptdp_bf16_to_float(x)
#define ADD_BF16(x, y)  ptdp_bf16_from_float(BF16_F(x) + BF16_F(y))
#define MAX_BF16(x, y)  ptdp_bf16_from_float(MAX_PLAIN(BF16_F(x), BF16_F(y)))
#define MIN_BF16(x, y)  ptdp_bf16_from_float(MIN_PLAIN(BF16_F(x), BF16_F(y)))
#define DIV_BF16(x, k)  ptdp_bf16_from_float(BF16_F(x) / (float)(k))

KERNELS(float, f32, ADD_FLOAT, MAX_PLAIN, MIN_PLAIN, DIV_F32)
KERNELS(double, f64, ADD_FLOAT, MAX_PLAIN, MIN_PLAIN, DIV_F64)
KERNELS(int32_t, i32, ADD_I32, MAX_PLAIN, MIN_PLAIN, DIV_I32)
KERNELS(int64_t, i64, ADD_I64, MAX_PLAIN, MIN_PLAIN, DIV_I64)
KERNELS(uint8_t, u8, ADD_U8, MAX_PLAIN, MIN_PLAIN, DIV_U8)
KERNELS(ptdp_bf16, bf16, ADD_BF16, MAX_BF16, MIN_BF16, DIV_BF16)

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
    case PTDP_BF16: REDUCE2(bf16);
    default: break;
    }
}

void ptdp_divide(void *buf, size_t n, ptdp_dtype t, int k)
{
    switch (t) {
    case PTDP_F32:  f32_divide(buf, n, k);  break;
    case PTDP_F64:  f64_divide(buf, n, k);  break;
    case PTDP_I32:  i32_divide(buf, n, k);  break;
    case PTDP_I64:  i64_divide(buf, n, k);  break;
    case PTDP_U8:   u8_divide(buf, n, k);   break;
    case PTDP_BF16: bf16_divide(buf, n, k); break;
    default: break;
    }
}

/* dst = src (bytes), with streaming stores for the 16-byte-aligned part
 * where the CPU has them; the caller fences. */
static void stream_copy(void *dst, const void *src, size_t bytes)
{
#if defined(__SSE2__)
    unsigned char *d = dst;
    const unsigned char *s = src;
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    if (head > bytes)
        head = bytes;
    memcpy(d, s, head);
    size_t i = head;
    for (; i + 16 <= bytes; i += 16)
        _mm_stream_si128((__m128i *)(d + i), _mm_loadu_si128((const __m128i *)(s + i)));
    memcpy(d + i, s + i, bytes - i);
#else
    memcpy(dst, src, bytes);
#endif
}

void ptdp_reduce_many(void *const *out, int nout, const void *const *in, int k, size_t n,
                      ptdp_dtype t, ptdp_op op)
{
    size_t es = ptdp_dtype_size(t);
    size_t per_tile = TILE_BYTES / es;
    alignas(64) unsigned char acc[TILE_BYTES];
    const bool stream = n * es * (size_t)nout >= STREAM_MIN_BYTES;

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
        for (int o = 0; o < nout; o++) {    /* the tile is final: store it */
            if (stream)
                stream_copy((char *)out[o] + off, tile, m * es);
            else
                ptdp_copy((char *)out[o] + off, tile, m * es);
        }
    }
#if defined(__SSE2__)
    if (stream)
        _mm_sfence();
#endif
}
