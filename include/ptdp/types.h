/*
 * types.h — element types.
 *
 * ptdp is built twice from the same sources: with ptdp_real = float (the
 * library libptdp and the CLI `ptdp`) and with ptdp_real = double (libptdp_f64
 * and `ptdp-f64`, compiled with -DPTDP_DOUBLE).  Double precision is what lets
 * an equivalence check say "equal to 1e-10": in float, summing the same
 * numbers in a different order already differs by ~1e-7 relative.
 */
#ifndef PTDP_TYPES_H
#define PTDP_TYPES_H

#include <stddef.h>
#include <stdint.h>

/* Element types that travel through collectives and files. */
typedef enum {
    PTDP_F32 = 0,
    PTDP_F64,
    PTDP_I32,
    PTDP_I64,
    PTDP_U8,
    PTDP_BF16,          /* bfloat16 (bf16.h); appended, so the others keep their numbers */
    PTDP_F8_E4M3,       /* FP8 codes (fp8.h), one byte each: a value only with its */
    PTDP_F8_E5M2,       /* tile's scale beside it, so collectives never reduce them */
    PTDP_DTYPE_COUNT
} ptdp_dtype;

size_t      ptdp_dtype_size(ptdp_dtype t);
const char *ptdp_dtype_name(ptdp_dtype t);   /* "F32", "F64", "BF16", … (safetensors spelling) */

#ifdef PTDP_DOUBLE
typedef double ptdp_real;
#define PTDP_REAL       PTDP_F64
#define PTDP_REAL_NAME  "f64"
#define PTDP_TOLERANCE  1e-10   /* --check tolerance in double */
#else
typedef float ptdp_real;
#define PTDP_REAL       PTDP_F32
#define PTDP_REAL_NAME  "f32"
#define PTDP_TOLERANCE  1e-4    /* --check tolerance in float */
#endif
/* --check tolerance of a --precision bf16 run against its bf16 baseline
 * (mixed.h): measured below 1.3e-4 in loss and 2.1e-3 in parameters over
 * 20 steps of eight GPT meshes, but for attention's key bias (below;
 * docs: docs/precision.md, "bf16 mixed precision"). */
#define PTDP_TOLERANCE_BF16 1e-2

/* The parameters' tolerance of a bf16 --check after `steps` steps at
 * learning rate lr: PTDP_TOLERANCE_BF16, or AdamW's reach when that is
 * larger.  AdamW divides each gradient by its own running size, so an
 * element whose gradient is rounding noise steps by about lr either way
 * each step, and two runs that round differently can end 2 lr a step
 * apart.  Attention's key bias is such an element: its true gradient is 0
 * (softmax ignores a constant added to a row of scores), and with bf16
 * activations its computed one is bf16's rounding.  SGD has no such
 * amplification. */
static inline double ptdp_tolerance_bf16_params(double lr, long steps, int adamw)
{
    const double reach = adamw ? 2 * lr * (double)steps : 0;
    return reach > PTDP_TOLERANCE_BF16 ? reach : PTDP_TOLERANCE_BF16;
}

/* Split `count` items into `parts` nearly equal contiguous shares: the first
 * count % parts shares get one item more.  Used by every sharding in ptdp
 * (reduce-scatter shares, DP shards, stage layers) so they all agree. */
void ptdp_share(size_t count, int parts, int index, size_t *offset, size_t *len);

#endif
