/*
 * exercise.c — lesson 15: eight bits — write the E4M3 cast, a scale per
 * tile, and the amax a tensor split over TP must share.
 *
 * Replace each PTDP_BLANK(...) line with your code, then run the check:
 *     meson setup build-student -Dexercises=student      (once)
 *     meson test -C build-student --suite tutorial-15 -v
 * README.md explains the idea; solution.c is the answer (try first).
 *
 * One byte holds a number as sign, exponent and mantissa (E4M3: 4 and 3
 * bits, bias 7).  Its values, one binade [2^k, 2^(k+1)) at a time, are 8
 * steps of 2^(k-3); below 2^-6 the subnormals continue the last step, 2^-9:
 *
 *      0   2^-9 ... 7·2^-9 │ 2^-6 ... │ ... │ 1  1.125  1.25 ... 1.875 │ 2 ... │ 256 288 ... 448
 *      └─ subnormals m·2^-9 ┘            step 2^-3 around 1            step 32 at the top
 *
 *   cast(x):  NaN → 0x7F | sign;  |x| ≥ 448 (∞ too) → 0x7E | sign (saturate)
 *             k = max(⌊log₂|x|⌋, -6);  q = |x| / 2^(k-3)  (exact);  n = round(q), ties to even
 *             code = sign | ((k + 6) << 3) + n        (n = 16 carries into the next binade)
 *
 * FP8 alone holds ±448 with 3 mantissa bits, so a tensor is cut into tiles
 * and each tile gets a scale s = amax / 448; FP8 stores x / s:
 *
 *     amax = max |x| over the tile  ──►  s = amax / 448 (0 → 1)  ──►  code = cast(x / s)
 *                                                                   value = value(code) · s
 *
 * A tensor split over TP must be quantized as one device would quantize it
 * whole: each rank's amax is only its shard's, so the ranks max-reduce it
 * first — and a 1 × 128 tile that straddles the split has a part on each
 * side, whose amaxes must meet too.
 */
#include "blank.h"
#include "lesson.h"

#include <math.h>

#include "ptdp/comm.h"
#include "ptdp/error.h"
#include "ptdp/fp8.h"

int lesson_e4m3_from_float(float x, uint8_t *code)
{
    const uint8_t sign = signbit(x) ? 0x80 : 0x00;
    const float a = fabsf(x);
    /* Blank 1: what has no nearest code of its own. */
    PTDP_BLANK(1, "NaN → 0x7F with x's sign; |x| ≥ 448, infinity too → what, in a format with no infinity? Then return");
    /* a's binade [2^k, 2^(k+1)), or the subnormals' step for a < 2^-6 */
    int e;
    frexpf(a, &e);                     /* a = f · 2^e, f in [1/2, 1): ⌊log₂ a⌋ = e - 1 */
    const int k = a < 0x1p-6f ? -6 : e - 1;
    /* The E4M3 values near a are 2^(k-3) apart: q counts those steps.
     * Multiplying by a power of two is exact, so q is a itself, rescaled. */
    const float q = ldexpf(a, 3 - k);
    /* Blank 2: q to the nearest integer n; exactly half way, to the even one. */
    int n;
    PTDP_BLANK(2, "n = q rounded to the nearest integer: what if q's fraction is exactly 0.5?");
    /* Blank 3: the code: exponent field k + 6 (0 for the subnormals), then n. */
    PTDP_BLANK(3, "*code = sign | the exponent field shifted over the 3 mantissa bits, plus n (n = 8 .. 16 or a subnormal's 0 .. 8)");
    return PTDP_OK;
}

int lesson_scale(ptdp_real amax, ptdp_real *s)
{
    /* Blank 4: amax / 448; an all-zero tile (s = 0) gets 1. */
    PTDP_BLANK(4, "*s = the scale that maps amax onto E4M3's largest value; and for amax 0?");
    return PTDP_OK;
}

/* The cast of a ptdp_real, and a code's value — the library's.  (x / s is
 * a double here: casting it to float for your cast above would round
 * twice, and could land on a tie x / s was not on.) */
static uint8_t cast(ptdp_real v)
{
    return ptdp_fp8_from_real(&ptdp_fp8_e4m3, v);
}

static ptdp_real value(uint8_t code)
{
    return ptdp_fp8_to_real(&ptdp_fp8_e4m3, code);
}

int lesson_quantize_blockwise(const ptdp_real *x, int rows, int cols, int tile, ptdp_real *scale, uint8_t *codes,
                              ptdp_real *dequant)
{
    const int across = (cols + tile - 1) / tile;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < across; j++) {
            const int c0 = j * tile, c1 = cols - c0 < tile ? cols : c0 + tile;
            const ptdp_real *row = x + (size_t)r * (size_t)cols;
            ptdp_real amax = 0;
            /* Blank 5: tile (r, j)'s amax, over its columns c0 .. c1 - 1. */
            PTDP_BLANK(5, "amax = the largest |row[c]| over the tile's columns");
            ptdp_real *s = &scale[r * across + j];
            int rc = lesson_scale(amax, s);
            if (rc != 0)
                return rc;
            /* Blank 6: each value of the tile, through its scale and back. */
            PTDP_BLANK(6, "for each column of the tile: codes[i] = cast(x[i] and the scale), dequant[i] = value(codes[i]) and the scale");
        }
    return PTDP_OK;
}

int lesson_tp_tensorwise(ptdp_comm *tp, const ptdp_real *shard, int n, ptdp_real *scale, uint8_t *codes,
                         ptdp_real *dequant)
{
    ptdp_real amax = 0;
    for (int i = 0; i < n; i++)
        if (fabs(shard[i]) > amax)
            amax = fabs(shard[i]);
    /* Blank 7: amax is my shard's; one scale means the whole weight's. */
    PTDP_BLANK(7, "make amax the whole weight's amax: one collective over tp (which op?)");
    const int scale_rc = lesson_scale(amax, scale);
    if (scale_rc != 0)
        return scale_rc;
    for (int i = 0; i < n; i++) {
        codes[i] = cast(shard[i] / *scale);
        dequant[i] = value(codes[i]) * *scale;
    }
    return PTDP_OK;
}

int lesson_tp_blockwise(ptdp_comm *tp, const ptdp_real *shard, int rows, int shard_cols, int tile, int *tile_of,
                        ptdp_real *amax, uint8_t *codes, ptdp_real *dequant)
{
    const int N = ptdp_comm_size(tp), col0 = ptdp_comm_rank(tp) * shard_cols;
    const int across = (shard_cols * N + tile - 1) / tile;   /* the whole matrix's tiles a row */
    /* Blank 8: my column c is the whole matrix's column col0 + c. */
    PTDP_BLANK(8, "tile_of[c] for each of my columns: which 1 x tile tile of the WHOLE matrix's row holds it?");
    for (int i = 0; i < rows * across; i++)
        amax[i] = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < shard_cols; c++) {
            const ptdp_real v = fabs(shard[r * shard_cols + c]);
            if (v > amax[r * across + tile_of[c]])
                amax[r * across + tile_of[c]] = v;
        }
    /* Blank 9: a tile cut by the split has a part on each side. */
    PTDP_BLANK(9, "the tiles' amaxes: a tile the split cuts has parts on two ranks; one collective over tp");
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < shard_cols; c++) {
            ptdp_real s;
            const int scale_rc = lesson_scale(amax[r * across + tile_of[c]], &s);
            if (scale_rc != 0)
                return scale_rc;
            const int i = r * shard_cols + c;
            codes[i] = cast(shard[i] / s);
            dequant[i] = value(codes[i]) * s;
        }
    return PTDP_OK;
}
