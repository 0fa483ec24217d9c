/*
 * lesson.h — lesson 15: the functions you write in exercise.c, which the
 * check calls.
 *
 * Everything is E4M3 (fp8.h): bias 7, 3 mantissa bits, max 448, smallest
 * subnormal 2^-9, no infinity, NaN 0x7F (0xFF negative).  A scale s per
 * tile brings a tile's values into range: FP8 stores x / s.
 */
#ifndef LESSON_15_H
#define LESSON_15_H

#include <stdint.h>

#include "ptdp/comm.h"
#include "ptdp/types.h"

/* Blanks 1-3: x → its E4M3 code: the nearest value, ties to the even
 * code; beyond ±448 (infinity too) saturates to ±448 (0x7E | sign);
 * NaN → 0x7F | sign.  Returns 0 or a PTDP_E… code. */
int lesson_e4m3_from_float(float x, uint8_t *code);

/* Blank 4: the scale of a tile whose largest |x| is amax: amax / 448, and
 * 1 for amax 0 (nothing to scale; never divide by 0). */
int lesson_scale(ptdp_real amax, ptdp_real *s);

/* Blanks 5-6: blockwise quantization of a rows × cols matrix x (row-major)
 * in 1 × tile tiles — tile (r, j) is row r, columns j tile ..
 * min((j+1) tile, cols) - 1, the last one of a row partial.  scale gets
 * rows × ⌈cols / tile⌉ scales in row-major tile order; codes[i] =
 * cast(x[i] / s), dequant[i] = value(codes[i]) · s.  Returns 0 or a PTDP_E…
 * code. */
int lesson_quantize_blockwise(const ptdp_real *x, int rows, int cols, int tile, ptdp_real *scale, uint8_t *codes,
                              ptdp_real *dequant);

/* Blank 7: a column-parallel weight's shard (its rows; n values) on the
 * TP group tp, quantized tensorwise as one device would the whole weight:
 * one scale for all of it, written to *scale.  Returns 0 or a PTDP_E… code. */
int lesson_tp_tensorwise(ptdp_comm *tp, const ptdp_real *shard, int n, ptdp_real *scale, uint8_t *codes,
                         ptdp_real *dequant);

/* Blanks 8-9: a rows × (shard_cols · N) matrix split by columns over the
 * N ranks of tp — rank r holds columns r shard_cols .. (r+1) shard_cols - 1,
 * as `shard` (rows × shard_cols, row-major) — quantized in the WHOLE
 * matrix's 1 × tile tiles, as one device would.  Scratch: tile_of for
 * shard_cols ints, amax for rows × ⌈shard_cols N / tile⌉ reals (every tile
 * of the whole matrix).  codes and dequant: the shard's.  Returns 0 or a
 * PTDP_E… code. */
int lesson_tp_blockwise(ptdp_comm *tp, const ptdp_real *shard, int rows, int shard_cols, int tile, int *tile_of,
                        ptdp_real *amax, uint8_t *codes, ptdp_real *dequant);

#endif
