/*
 * fp8_quant.h — the recipes of FP8 training: how a tensor is cut into tiles,
 * and how each tile's scale is chosen, so that its values fit FP8 (fp8.h).
 *
 * FP8 alone holds ±448 (E4M3) with 3 mantissa bits; a gradient of 1e-6 or
 * an activation of 3000 does not fit.  So each tile of a tensor gets a
 * scale s, and FP8 stores x / s:
 *
 *     amax  = max |x| over the tile            (NaN and ±inf left out)
 *     s     = amax / max                       tensorwise, blockwise, delayed
 *                                              (amax 0 → s = 1)
 *     s     = 2^(⌊log₂ amax⌋ − emax)           mxfp8 (E8M0: a power of two;
 *                                              emax 8 for E4M3, 15 for E5M2)
 *     code  = cast(x / s)                      nearest, ties to even, saturating
 *     value = value(code) · s                  what the GEMM then multiplies
 *
 * The tiles, r × c, in row-major order; the edge tiles are what is left:
 *
 *          cols = 300, tile 1 × 128                  tile 2 × 128, rows = 3
 *        ┌─────────┬─────────┬────┐               ┌─────────┬─────────┬────┐
 *   row 0│    0    │    1    │ 2  │               │    0    │    1    │ 2  │
 *   row 1│    3    │    4    │ 5  │               │         │         │    │
 *        └─────────┴─────────┴────┘               ├─────────┼─────────┼────┤
 *          128       128      44                  │    3    │    4    │ 5  │
 *                                                 └─────────┴─────────┴────┘
 *
 * The recipes (one table row each, resolved once by name):
 *
 *   tensorwise   one tile, the whole tensor; s = amax / max.
 *   blockwise    DeepSeek-V3's: activations and gradients 1 × 128 (a tile
 *                per 128 values of a row), weights 128 × 128; the same rule
 *                per tile.  An outlier only coarsens its own tile.
 *   mxfp8        OCP Microscaling (MX v1.0): tiles of 32 values along the
 *                dimension a product sums over (1 × 32, or 32 × 1), s a
 *                power of two kept as an 8-bit exponent (E8M0), clamped to
 *                2^-127 .. 2^127; amax 0 → s = 1.  Dividing by s only moves
 *                the exponent, and |x| / s < 2^(emax+1), above max = 1.75 ·
 *                2^emax: a tile's largest values may saturate.
 *   delayed      Transformer Engine's: tensorwise, but s comes from the max
 *                of the last H amaxes recorded at EARLIER steps (the
 *                history), so the scale is known before the tensor is —
 *                the first step, with no history yet, uses the current
 *                amax.  A value above the history's amax saturates.
 *
 * The three steps are separate calls, because a tensor split over devices
 * must be quantized as the one tensor one device would see:
 *
 *     ptdp_fp8_amax(&t, x, amax)                 each tile's amax (local)
 *         └─ max-reduce amax over the ranks holding parts of the tensor
 *            (TP/SP/CP shards of one tile: ptdp_all_reduce(…, PTDP_MAX))
 *     ptdp_fp8_scales(r, f, amax, n, hist, s)    scales from the (global) amaxes
 *     ptdp_fp8_history_record(hist, amax[0])     delayed: after the step's scale
 *     ptdp_fp8_cast(f, &t, x, s, codes, dq)      codes and/or dequantized values
 *
 * ptdp_fp8_quantize does all of them for one device (the command-line
 * tool's and the tests' case).  Everything is in ptdp_real: the float build
 * divides, multiplies and casts floats, the double build doubles.
 */
#ifndef PTDP_FP8_QUANT_H
#define PTDP_FP8_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fp8.h"
#include "tensor.h"
#include "types.h"

/* A recipe, one table row: read its values, never compare its name. */
typedef struct ptdp_fp8_recipe {
    const char *name;          /* "tensorwise", "blockwise", "mxfp8", "delayed"     */
    const char *summary;       /* one line for --help                               */
    bool whole_tensor;         /* one tile: the whole tensor (no tile to choose)    */
    bool power_of_two;         /* s = 2^(⌊log₂ amax⌋ − emax), else amax / max       */
    bool uses_history;         /* s from the amax history (delayed)                 */
    int act_tile[2];           /* activations' and gradients' tile r × c (0 × 0: whole) */
    int weight_tile[2];        /* weights' tile                                     */
    int tile_values;           /* v > 0: a tile is a vector of v values, 1 × v or v × 1 (0: any) */
} ptdp_fp8_recipe;

extern const ptdp_fp8_recipe ptdp_fp8_tensorwise, ptdp_fp8_blockwise, ptdp_fp8_mxfp8,
    ptdp_fp8_delayed;

int ptdp_fp8_recipe_count(void);
const ptdp_fp8_recipe *ptdp_fp8_recipe_at(int i);
const ptdp_fp8_recipe *ptdp_fp8_recipe_find(const char *name);   /* NULL if none */

/* May recipe r cut tiles of tile_rows × tile_cols?  0, or PTDP_EINVAL with
 * the reason in msg ("mxfp8's tiles hold 32 values: 1x32 or 32x1, not 4x4").
 * 0 × 0 asks for the recipe's activation tile, and is always allowed. */
int ptdp_fp8_tile_check(const ptdp_fp8_recipe *r, int tile_rows, int tile_cols, char *msg, size_t msglen);

/* ------------------------------------------------------------- tiles */

/* A matrix cut into tiles.  A tensor of any rank is a matrix here: its last
 * dimension the columns, the product of the others the rows ([B, T, C] is
 * B·T rows of C, as a linear layer sees it). */
typedef struct {
    int rows, cols;            /* the matrix                                       */
    int tile_rows, tile_cols;  /* r × c (the whole matrix for a whole-tensor recipe) */
    int grid_rows, grid_cols;  /* tiles down and across: ⌈rows/r⌉ × ⌈cols/c⌉, or 1 × 1 */
} ptdp_fp8_tiling;

/* The tiles of a rows × cols matrix under r with the given tile (0 × 0: the
 * recipe's activation tile; pass r->weight_tile for a weight).  A whole-
 * tensor recipe has exactly one tile, even for an empty matrix (its scale
 * then 1).  PTDP_EINVAL (msg says why) for a tile r does not allow, a
 * negative size, or more tiles than an int counts. */
int ptdp_fp8_tiling_init(ptdp_fp8_tiling *t, const ptdp_fp8_recipe *r, int rows, int cols,
                         int tile_rows, int tile_cols, char *msg, size_t msglen);
static inline int ptdp_fp8_tile_count(const ptdp_fp8_tiling *t)
{
    return t->grid_rows * t->grid_cols;
}
/* The tile element (r, c) lies in (tile order: row-major over the grid). */
static inline int ptdp_fp8_tile_of(const ptdp_fp8_tiling *t, int r, int c)
{
    return (r / t->tile_rows) * t->grid_cols + c / t->tile_cols;
}

/* ------------------------------------------------- the amax history */

#define PTDP_FP8_HISTORY_DEFAULT 16   /* H, as --fp8-amax-history's default */

/* The amaxes of one tensor at earlier steps, oldest first, in the caller's
 * memory (`length` slots: the device's arena, saved with the checkpoint as
 * amax[0 .. count)).  The recorded amaxes must be the max-reduced ones, so
 * that every replica keeps the same history. */
typedef struct {
    int length;                /* H: how many are kept                    */
    int count;                 /* recorded so far, at most H              */
    ptdp_real *amax;           /* amax[0] the oldest, amax[count-1] the newest */
} ptdp_fp8_history;

void ptdp_fp8_history_init(ptdp_fp8_history *h, ptdp_real *slots, int length);
/* Append a step's amax; with H recorded, the oldest is dropped. */
void ptdp_fp8_history_record(ptdp_fp8_history *h, ptdp_real amax);
/* The amax a delayed scale is taken from: the max of the recorded ones, or
 * `current` when none is (the first step). */
ptdp_real ptdp_fp8_history_amax(const ptdp_fp8_history *h, ptdp_real current);

/* ------------------------------------------------- the three steps */

/* amax[i] = max |x| over tile i (tile order), NaN and ±inf left out; 0 for
 * a tile of none.  x is t->rows × t->cols (a view: any stride). */
void ptdp_fp8_amax(const ptdp_fp8_tiling *t, ptdp_tensor x, ptdp_real *amax);

/* scale[i] for each of n tiles from its amax, by r's rule for format f.
 * A delayed recipe has one tile and takes its amax from h (the history
 * before this step is recorded; NULL or empty: amax[0]). */
void ptdp_fp8_scales(const ptdp_fp8_recipe *r, const ptdp_fp8_format *f, const ptdp_real *amax,
                     int n, const ptdp_fp8_history *h, ptdp_real *scale);

/* For every element: code = cast(x / s), value = value(code) · s (a NaN
 * code's value is its NaN itself), s its tile's scale.  codes (rows·cols,
 * row-major, no stride) and dequant (a view of the same shape, which may be
 * x itself: in place) are each optional (NULL, or a tensor with data NULL). */
void ptdp_fp8_cast(const ptdp_fp8_format *f, const ptdp_fp8_tiling *t, ptdp_tensor x,
                   const ptdp_real *scale, uint8_t *codes, ptdp_tensor dequant);

/* One element of ptdp_fp8_cast: *code = cast(x / s); returns value(code) · s
 * (a NaN code's value: the NaN).  For a caller that holds a tensor's
 * elements in another order (ZeRO-3's shard of a flat unit, zero3_fp8.c). */
ptdp_real ptdp_fp8_cast_one(const ptdp_fp8_format *f, ptdp_real x, ptdp_real s, uint8_t *code);
/* Its second half: value(code) · s (a NaN code's value: the NaN). */
ptdp_real ptdp_fp8_value_scaled(const ptdp_fp8_format *f, uint8_t code, ptdp_real s);

/* All three on one device: amax and scale (ptdp_fp8_tile_count(t) each) are
 * written, h (delayed only; may be NULL) is read and then records amax[0].
 * The caller whose tensor is split over devices calls the steps instead. */
void ptdp_fp8_quantize(const ptdp_fp8_recipe *r, const ptdp_fp8_format *f, const ptdp_fp8_tiling *t,
                       ptdp_tensor x, ptdp_fp8_history *h, ptdp_real *amax, ptdp_real *scale,
                       uint8_t *codes, ptdp_tensor dequant);

#endif
