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
 * (mixed.h): measured below 2.2e-3 in parameters and 1.6e-4 in loss over
 * 20 steps of six meshes (docs: README, "bf16"). */
#define PTDP_TOLERANCE_BF16 1e-2

/* Split `count` items into `parts` nearly equal contiguous chunks: the first
 * count % parts chunks get one item more.  Used by every sharding in ptdp
 * (reduce-scatter chunks, DP shards, stage layers) so they all agree. */
void ptdp_chunk(size_t count, int parts, int index, size_t *offset, size_t *len);

#endif
