/*
 * fp8_quant.c — scaled FP8: tiles, amaxes, scales, casts (the recipes and
 * the picture of the tiles are in fp8_quant.h; the formats in fp8.h).
 *
 * Quantizing one tile of a tensor, in the order the code runs:
 *
 *     x  ──► amax = max |x|  ──► s = amax / max          (or 2^(⌊log₂ amax⌋ − emax))
 *                                 │
 *     x  ──► x / s ──cast──► code ──► value(code) · s  ──► dequantized x
 *                              (saturating, ties to even)
 *
 * The rules a caller could get wrong, decided once here:
 *
 *   amax skips NaN and ±inf.  A scale must be a finite positive number, or
 *   every other value of the tile loses its meaning (inf / inf is NaN);
 *   so ±inf saturates to ±max like any value beyond the range, and NaN
 *   becomes the NaN code.
 *
 *   s = amax / max is computed in ptdp_real, and a quotient of 0 (amax 0,
 *   or an amax so small that amax / max underflows) gives s = 1: an all-zero
 *   tile quantizes to zeros with a harmless scale, and nothing divides by 0.
 *
 *   the MX scale's exponent ⌊log₂ amax⌋ − emax is clamped to E8M0's
 *   −127 .. 127, so s is always a power of two that float holds exactly
 *   (2^-127 is a float subnormal).
 *
 *   x / s and value · s are one division and one multiplication of
 *   ptdp_real each — what a kernel with float registers does, and what the
 *   independent reference (tests/fp8_reference.py) does in float32.
 */
#include "ptdp/fp8_quant.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ptdp/error.h"

const ptdp_fp8_recipe ptdp_fp8_tensorwise = {
    .name = "tensorwise", .summary = "one scale for the whole tensor: amax / max",
    .whole_tensor = true,
};

const ptdp_fp8_recipe ptdp_fp8_blockwise = {
    .name = "blockwise",
    .summary = "a scale per tile (DeepSeek-V3): 1x128 activations and gradients, 128x128 weights",
    .act_tile = { 1, 128 }, .weight_tile = { 128, 128 },
};

const ptdp_fp8_recipe ptdp_fp8_mxfp8 = {
    .name = "mxfp8", .summary = "a power-of-two scale (E8M0) per 32 values (OCP MX v1.0): 1x32 tiles",
    .power_of_two = true, .act_tile = { 1, 32 }, .weight_tile = { 1, 32 }, .tile_values = 32,
};

const ptdp_fp8_recipe ptdp_fp8_delayed = {
    .name = "delayed",
    .summary = "one scale from the max of earlier steps' amaxes (Transformer Engine); "
               "the first step's own amax",
    .whole_tensor = true, .uses_history = true,
};

static const ptdp_fp8_recipe *const recipes[] = {
    &ptdp_fp8_tensorwise, &ptdp_fp8_blockwise, &ptdp_fp8_mxfp8, &ptdp_fp8_delayed,
};
#define N_RECIPES ((int)(sizeof recipes / sizeof recipes[0]))

int ptdp_fp8_recipe_count(void) { return N_RECIPES; }

const ptdp_fp8_recipe *ptdp_fp8_recipe_at(int i)
{
    return i >= 0 && i < N_RECIPES ? recipes[i] : NULL;
}

const ptdp_fp8_recipe *ptdp_fp8_recipe_find(const char *name)
{
    for (int i = 0; name != NULL && i < N_RECIPES; i++)
        if (strcmp(recipes[i]->name, name) == 0)
            return recipes[i];
    return NULL;
}

/* ---------------------------------------------------------------- tiles */

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int fail(char *msg, size_t msglen, const char *fmt, ...)
{
    if (msg != NULL && msglen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, msglen, fmt, ap);
        va_end(ap);
    }
    return PTDP_EINVAL;
}

int ptdp_fp8_tile_check(const ptdp_fp8_recipe *r, int tile_rows, int tile_cols, char *msg, size_t msglen)
{
    if (tile_rows == 0 && tile_cols == 0)
        return 0;
    if (tile_rows <= 0 || tile_cols <= 0)
        return fail(msg, msglen, "%s: a tile of %dx%d: both sizes must be at least 1", r->name,
                    tile_rows, tile_cols);
    if (r->whole_tensor)
        return fail(msg, msglen, "%s has one tile, the whole tensor: no %dx%d tile to choose", r->name,
                    tile_rows, tile_cols);
    const int v = r->tile_values;
    if (v > 0 && !(tile_rows == 1 && tile_cols == v) && !(tile_rows == v && tile_cols == 1))
        return fail(msg, msglen, "%s's tiles hold %d values (1x%d or %dx1), not %dx%d", r->name, v, v, v,
                    tile_rows, tile_cols);
    return 0;
}

int ptdp_fp8_tiling_init(ptdp_fp8_tiling *t, const ptdp_fp8_recipe *r, int rows, int cols,
                         int tile_rows, int tile_cols, char *msg, size_t msglen)
{
    int rc = ptdp_fp8_tile_check(r, tile_rows, tile_cols, msg, msglen);
    if (rc != 0)
        return rc;
    if (rows < 0 || cols < 0)
        return fail(msg, msglen, "%s: a matrix of %d x %d", r->name, rows, cols);
    if (r->whole_tensor) {
        *t = (ptdp_fp8_tiling){ rows, cols, rows, cols, 1, 1 };
        return 0;
    }
    if (tile_rows == 0) {
        tile_rows = r->act_tile[0];
        tile_cols = r->act_tile[1];
    }
    /* ⌈rows / r⌉ without rows + r - 1, which could wrap */
    const int down = rows / tile_rows + (rows % tile_rows != 0), across = cols / tile_cols + (cols % tile_cols != 0);
    if ((long long)down * across > INT_MAX)
        return fail(msg, msglen, "%s: %d x %d tiles of %dx%d: more than %d", r->name, down, across, tile_rows,
                    tile_cols, INT_MAX);
    *t = (ptdp_fp8_tiling){ rows, cols, tile_rows, tile_cols, down, across };
    return 0;
}

/* Tile i's rows [*r0, *r1) and columns [*c0, *c1): row-major tile order,
 * the last tile of a row or column cut short at the matrix's edge. */
static void tile_bounds(const ptdp_fp8_tiling *t, int i, int *r0, int *r1, int *c0, int *c1)
{
    const int down = i / t->grid_cols, across = i % t->grid_cols;
    *r0 = down * t->tile_rows;
    *c0 = across * t->tile_cols;
    *r1 = t->rows - *r0 < t->tile_rows ? t->rows : *r0 + t->tile_rows;
    *c1 = t->cols - *c0 < t->tile_cols ? t->cols : *c0 + t->tile_cols;
}

/* ------------------------------------------------------- the history */

void ptdp_fp8_history_init(ptdp_fp8_history *h, ptdp_real *slots, int length)
{
    *h = (ptdp_fp8_history){ .length = length > 0 ? length : 0, .count = 0, .amax = slots };
}

void ptdp_fp8_history_record(ptdp_fp8_history *h, ptdp_real amax)
{
    if (h->length == 0)
        return;
    if (h->count == h->length) {       /* full: the oldest goes */
        memmove(h->amax, h->amax + 1, (size_t)(h->length - 1) * sizeof *h->amax);
        h->count--;
    }
    h->amax[h->count++] = amax;
}

ptdp_real ptdp_fp8_history_amax(const ptdp_fp8_history *h, ptdp_real current)
{
    if (h == NULL || h->count == 0)
        return current;
    ptdp_real m = h->amax[0];
    for (int i = 1; i < h->count; i++)
        if (h->amax[i] > m)
            m = h->amax[i];
    return m;
}

/* ------------------------------------------------------ the three steps */

static bool fits(const ptdp_fp8_tiling *t, ptdp_tensor x, const char *what)
{
    return PTDP_REQUIRE(x.rows == t->rows && x.cols == t->cols, "%s is %d x %d, the tiling %d x %d",
                        what, x.rows, x.cols, t->rows, t->cols);
}

void ptdp_fp8_amax(const ptdp_fp8_tiling *t, ptdp_tensor x, ptdp_real *amax)
{
    if (!fits(t, x, "x"))
        return;
    for (int i = 0; i < ptdp_fp8_tile_count(t); i++) {
        int r0, r1, c0, c1;
        tile_bounds(t, i, &r0, &r1, &c0, &c1);
        ptdp_real m = 0;
        for (int r = r0; r < r1; r++)
            for (int c = c0; c < c1; c++) {
                const ptdp_real v = (ptdp_real)fabs((double)*ptdp_at(x, r, c));   /* exact */
                if (isfinite(v) && v > m)
                    m = v;
            }
        amax[i] = m;
    }
}

/* One tile's scale from the amax it is to cover. */
static ptdp_real scale_of(const ptdp_fp8_recipe *r, const ptdp_fp8_format *f, ptdp_real amax)
{
    if (r->power_of_two) {
        if (!(amax > 0))
            return 1;
        int e;
        frexp((double)amax, &e);              /* amax = m · 2^e, m in [1/2, 1): ⌊log₂ amax⌋ = e − 1 */
        int x = e - 1 - f->mx_emax;
        x = x < -127 ? -127 : x > 127 ? 127 : x;
        return (ptdp_real)ldexp(1.0, x);
    }
    const ptdp_real s = amax / (ptdp_real)f->max;
    return s > 0 ? s : 1;
}

void ptdp_fp8_scales(const ptdp_fp8_recipe *r, const ptdp_fp8_format *f, const ptdp_real *amax,
                     int n, const ptdp_fp8_history *h, ptdp_real *scale)
{
    for (int i = 0; i < n; i++)
        scale[i] = scale_of(r, f, r->uses_history ? ptdp_fp8_history_amax(h, amax[i]) : amax[i]);
}

ptdp_real ptdp_fp8_value_scaled(const ptdp_fp8_format *f, uint8_t code, ptdp_real s)
{
    const ptdp_real v = ptdp_fp8_to_real(f, code);
    return ptdp_fp8_is_nan(f, code) ? v : v * s;
}

ptdp_real ptdp_fp8_cast_one(const ptdp_fp8_format *f, ptdp_real x, ptdp_real s, uint8_t *code)
{
    *code = ptdp_fp8_from_real(f, x / s);
    return ptdp_fp8_value_scaled(f, *code, s);
}

void ptdp_fp8_cast(const ptdp_fp8_format *f, const ptdp_fp8_tiling *t, ptdp_tensor x,
                   const ptdp_real *scale, uint8_t *codes, ptdp_tensor dequant)
{
    if (!fits(t, x, "x") || (dequant.data != NULL && !fits(t, dequant, "dequant")))
        return;
    for (int i = 0; i < ptdp_fp8_tile_count(t); i++) {
        int r0, r1, c0, c1;
        tile_bounds(t, i, &r0, &r1, &c0, &c1);
        const ptdp_real s = scale[i];
        for (int r = r0; r < r1; r++)
            for (int c = c0; c < c1; c++) {
                uint8_t code;
                const ptdp_real v = ptdp_fp8_cast_one(f, *ptdp_at(x, r, c), s, &code);
                if (codes != NULL)
                    codes[(size_t)r * (size_t)t->cols + (size_t)c] = code;
                if (dequant.data != NULL)
                    *ptdp_at(dequant, r, c) = v;
            }
    }
}

void ptdp_fp8_quantize(const ptdp_fp8_recipe *r, const ptdp_fp8_format *f, const ptdp_fp8_tiling *t,
                       ptdp_tensor x, ptdp_fp8_history *h, ptdp_real *amax, ptdp_real *scale,
                       uint8_t *codes, ptdp_tensor dequant)
{
    const int n = ptdp_fp8_tile_count(t);
    ptdp_fp8_amax(t, x, amax);
    ptdp_fp8_scales(r, f, amax, n, h, scale);
    if (r->uses_history && h != NULL && n > 0)
        ptdp_fp8_history_record(h, amax[0]);
    ptdp_fp8_cast(f, t, x, scale, codes, dequant);
}
