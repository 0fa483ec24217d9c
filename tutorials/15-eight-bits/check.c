/*
 * check.c — lesson 15: is your E4M3 cast the library's on every input that
 * can go wrong, is your blockwise quantization ptdp_fp8_quantize's bit for
 * bit, and does a tensor split over TP come out as one device's?
 *
 *   blanks 1-3  lesson_e4m3_from_float against ptdp_fp8_from_float on
 *               every E4M3 value (both signs), every midpoint between two
 *               neighbours (the ties) and the floats just above and below
 *               it, values beyond ±448, ±infinity, NaN, subnormals
 *   blank 4     lesson_scale: amax / 448, 1 for amax 0
 *   blanks 5-6  lesson_quantize_blockwise in 1 × 128 tiles (edge tiles
 *               partial, an all-zero row, an outlier): every scale, code
 *               and dequantized value of ptdp_fp8_quantize (blockwise)
 *   blank 7     lesson_tp_tensorwise on 2 devices, a column-parallel
 *               weight's rows split: one device's codes; when they differ,
 *               how many and by how much
 *   blanks 8-9  lesson_tp_blockwise on 2 devices, a matrix split by
 *               columns, 128, 64 and 192 a rank: one device's tiles —
 *               a tile the split cuts needs both halves' amax
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lesson.h"
#include "tutorial.h"

#include "ptdp/error.h"
#include "ptdp/fp8.h"
#include "ptdp/fp8_quant.h"

static const ptdp_fp8_format *const F = &ptdp_fp8_e4m3;

static float v8(uint8_t code)
{
    return ptdp_fp8_to_float(F, code);
}

/* ================================================= blanks 1-3: the cast */

typedef enum { VALUE, MIDPOINT, ABOVE_MID, BELOW_MID, BEYOND, SPECIAL, TINY } probe_kind;
typedef struct {
    float x;
    probe_kind kind;
    uint8_t lo;            /* VALUE: its code; the *_MID kinds: the lower neighbour */
} probe;

enum { MAX_PROBES = 2048 };

static int add(probe *p, int n, float x, probe_kind kind, uint8_t lo)
{
    if (n < MAX_PROBES)
        p[n++] = (probe){ x, kind, lo };
    return n;
}

/* Every input the cast can get wrong, both signs. */
static int make_probes(probe *p)
{
    static const float beyond[] = { 449.0f, 460.0f, 464.0f, 465.0f, 480.0f, 1e4f, FLT_MAX };
    static const float tiny[] = { 1e-45f, FLT_MIN, 0x1p-12f, 0x1p-10f, 0x1.8p-10f, 0x1p-7f };
    int n = 0;
    for (int neg = 0; neg < 2; neg++) {
        const uint8_t sign = neg ? 0x80 : 0x00;
        const float sg = neg ? -1.0f : 1.0f;
        for (int m = 0; m <= 0x7E; m++)
            n = add(p, n, v8((uint8_t)(sign | m)), VALUE, (uint8_t)(sign | m));
        for (int m = 0; m < 0x7E; m++) {
            const float mid = (v8((uint8_t)m) + v8((uint8_t)(m + 1))) / 2;   /* exact: one bit more */
            n = add(p, n, sg * mid, MIDPOINT, (uint8_t)(sign | m));
            n = add(p, n, sg * nextafterf(mid, INFINITY), ABOVE_MID, (uint8_t)(sign | m));
            n = add(p, n, sg * nextafterf(mid, 0), BELOW_MID, (uint8_t)(sign | m));
        }
        n = add(p, n, sg * nextafterf(448.0f, INFINITY), BEYOND, 0);
        for (size_t i = 0; i < sizeof beyond / sizeof beyond[0]; i++)
            n = add(p, n, sg * beyond[i], BEYOND, 0);
        n = add(p, n, sg * INFINITY, SPECIAL, 0);
        n = add(p, n, neg ? -NAN : NAN, SPECIAL, 0);
        for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++)
            n = add(p, n, sg * tiny[i], TINY, 0);
    }
    return n;
}

/* Your code for x (0xFF00 | rc when the cast fails). */
static unsigned mine_of(float x)
{
    uint8_t c = 0xAA;
    const int rc = lesson_e4m3_from_float(x, &c);
    return rc != 0 ? 0xFF00u | (unsigned)(-rc & 0xFF) : c;
}

static const char *value_text(char *buf, size_t len, unsigned code)
{
    if (code > 0xFF)
        snprintf(buf, len, "an error");
    else if (ptdp_fp8_is_nan(F, (uint8_t)code))
        snprintf(buf, len, "0x%02X (NaN)", code);
    else
        snprintf(buf, len, "0x%02X (%.9g)", code, (double)v8((uint8_t)code));
    return buf;
}

static void describe(char *buf, size_t len, const probe *p)
{
    char a[48], b[48];
    switch (p->kind) {
    case VALUE:
        snprintf(buf, len, "E4M3's value %s", value_text(a, sizeof a, p->lo));
        break;
    case MIDPOINT:
    case ABOVE_MID:
    case BELOW_MID:
        snprintf(buf, len, "%s the midpoint of %s and %s",
                 p->kind == MIDPOINT ? "exactly" : p->kind == ABOVE_MID ? "just above" : "just below",
                 value_text(a, sizeof a, p->lo), value_text(b, sizeof b, (unsigned)p->lo + 1));
        break;
    case BEYOND:
        snprintf(buf, len, "beyond E4M3's largest value, 448");
        break;
    case SPECIAL:
        snprintf(buf, len, "%s", isnan(p->x) ? "not a number" : "infinity");
        break;
    case TINY:
        snprintf(buf, len, "below E4M3's smallest normal value 2^-6");
        break;
    }
}

/* How does your cast round?  Two ties (1.0625: between 0x38 even and 0x39;
 * 1.1875: between 0x39 and 0x3A even) and a value just past the first. */
typedef enum { ROUNDS_RIGHT, TRUNCATES, TIES_AWAY, ROUNDS_OTHERWISE } rounding;

static rounding how_it_rounds(void)
{
    const unsigned t1 = mine_of(1.0625f), t2 = mine_of(1.1875f), t3 = mine_of(nextafterf(1.0625f, 2.0f));
    if (t1 == 0x38 && t2 == 0x3A && t3 == 0x39)
        return ROUNDS_RIGHT;
    if (t1 == 0x38 && t2 == 0x39 && t3 == 0x38)
        return TRUNCATES;
    if (t1 == 0x39 && t2 == 0x3A && t3 == 0x39)
        return TIES_AWAY;
    return ROUNDS_OTHERWISE;
}

static void explain_cast(const probe *p, unsigned mine, uint8_t want)
{
    char what[160], a[48], b[48];
    describe(what, sizeof what, p);
    tutorial_wrong("the cast of x = %.9g (%s): you gave %s; ptdp_fp8_from_float gives %s.", (double)p->x, what,
                   value_text(a, sizeof a, mine), value_text(b, sizeof b, want));
    const unsigned mag = mine & 0x7Fu;
    if (mine <= 0xFF && fabsf(p->x) >= 448.0f && (mag == 0x78 || mag == 0x7F))
        tutorial_note("the cast overflows to infinity instead of saturating: %s is %s, but E4M3 (\"fn\") has no "
                      "infinity — IEEE's pattern, exponent all ones and mantissa 0, is 0x78 = 256 here, and 0x7F is "
                      "NaN.  Beyond ±448, infinity included, the cast saturates to ±448, 0x7E with x's sign "
                      "(blank 1): a clipped value keeps a training step finite, an infinity would poison every "
                      "sum it enters", mag == 0x78 ? "0x78" : "0x7F", mag == 0x78 ? "256" : "NaN");
    else if (fabsf(p->x) >= 448.0f)
        tutorial_note("beyond ±448 (infinity too) the cast saturates to ±448: 0x7E with x's sign (blank 1)");
    else if (isnan(p->x))
        tutorial_note("NaN stays NaN: 0x7F, 0xFF for a negative NaN (blank 1)");
    else if (p->kind == MIDPOINT || p->kind == ABOVE_MID || p->kind == BELOW_MID || p->kind == TINY) {
        const rounding r = how_it_rounds();
        if (r == TRUNCATES)
            tutorial_note("the cast truncates instead of rounding to nearest: every x between two codes goes to the "
                          "lower one — x = 1.1875, half way between 0x39 (1.125) and 0x3A (1.25), gave 0x39, and the "
                          "float just above 1.0625, nearer 1.125, gave 0x38 (1) (blank 2: n = the nearest integer "
                          "to q; exactly half way, the even one)");
        else if (r == TIES_AWAY)
            tutorial_note("a tie rounded away from zero (roundf's rule): x = 1.0625, half way between 0x38 (1) and 0x39 "
                          "(1.125), gave 0x39.  Ties go to the even code — 0x38, mantissa 000 — so that rounding "
                          "errors do not all lean one way (blank 2)");
        else
            tutorial_note("blank 2: n = the nearest integer to q; when q's fraction is exactly 0.5, the even one.  "
                          "Below 2^-6 the subnormals: k = -6, steps of 2^-9, code = n (blank 3)");
    } else
        tutorial_note("an E4M3 value casts to its own code: q = |x| / 2^(k-3) is an integer n, and the code is "
                      "(k + 6) << 3 plus n, with x's sign in bit 7 (blank 3)");
}

static bool check_cast(void)
{
    static probe p[MAX_PROBES];
    const int n = make_probes(p);
    int values = 0, ties = 0;
    for (int i = 0; i < n; i++) {
        const uint8_t want = ptdp_fp8_from_float(F, p[i].x);
        const unsigned mine = mine_of(p[i].x);
        if (tutorial_report_blank())
            return false;
        if (mine != want) {
            explain_cast(&p[i], mine, want);
            return false;
        }
        values += p[i].kind == VALUE;
        ties += p[i].kind == MIDPOINT;
    }
    tutorial_ok("the cast, %d inputs: the %d E4M3 values, the %d midpoints between neighbours (ties to even) and the "
                "floats just above and below each, beyond ±448, ±infinity, NaN, subnormals: ptdp_fp8_from_float's "
                "code every time", n, values, ties);
    return true;
}

/* ================================================== blank 4: the scale */

static bool check_scale(void)
{
    static const ptdp_real AMAX[] = { 448, 1, 3.5, 1e-3, 0, 4.9e-324 };
    for (size_t i = 0; i < sizeof AMAX / sizeof AMAX[0]; i++) {
        ptdp_real mine = -7, want;
        const int rc = lesson_scale(AMAX[i], &mine);
        if (rc != 0) {
            if (!tutorial_report_blank())
                tutorial_wrong("lesson_scale returned %d (%s)", rc, ptdp_strerror(rc));
            return false;
        }
        ptdp_fp8_scales(&ptdp_fp8_blockwise, F, &AMAX[i], 1, NULL, &want);
        if (mine == want)
            continue;
        tutorial_wrong("the scale of amax %g: you gave %.17g; the library's is %.17g", (double)AMAX[i],
                       (double)mine, (double)want);
        if (AMAX[i] > 0 && mine == 448 / AMAX[i])
            tutorial_note("the scale inverted: 448 / amax.  FP8 stores x / s, and s = amax / 448 puts the tile's "
                          "largest |x| exactly on 448 (blank 4)");
        else if (want == 1)
            tutorial_note("amax %g gives amax / 448 = 0: dividing by a scale of 0 would make every value of the tile "
                          "NaN (0 / 0) or infinite; a scale of 0 becomes 1 (blank 4)", (double)AMAX[i]);
        else
            tutorial_note("blank 4: s = amax / 448, the largest |x| of the tile onto E4M3's largest value");
        return false;
    }
    tutorial_ok("the scale: amax / 448, and 1 for amax 0 (or an amax so small that amax / 448 is 0)");
    return true;
}

/* ===================================== blanks 5-6: blockwise, 1 × 128 tiles */

enum { TILE = 128, MAX_R = 4, MAX_C = 384, MAX_ELEMS = MAX_R * MAX_C, MAX_TILES = MAX_R * 3 };

/* A value of about ±1 (a hash of i: no pattern a wrong answer could fit). */
static ptdp_real wiggle(int i)
{
    return (ptdp_real)(((unsigned)i * 2654435761u >> 7) % 2001u) / 1000.0 - 1.0;
}

typedef struct {
    int rows, cols;
    ptdp_real x[MAX_ELEMS];
} matrix;

/* Row r: magnitudes 1, 1e-3 and 0 (an all-zero row); an outlier; or,
 * `ties`, a row of scale 1 (amax 448) whose next two values, rounded to
 * float, would land exactly on E4M3 ties they are not on. */
static void make_matrix(matrix *m, int rows, int cols, bool outlier, bool ties)
{
    m->rows = rows;
    m->cols = cols;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            m->x[r * cols + c] = r == 2 ? 0 : wiggle(r * cols + c + cols) * (r == 3 ? 1e-3 : 1);
    if (outlier)
        m->x[1 * cols + 200] = 1000;    /* row 1, tile 1 */
    if (ties) {
        m->x[0] = 448;
        m->x[1] = 1.0625 + 0x1p-30;     /* float: 1.0625, the tie of 1 and 1.125 */
        m->x[2] = -(1.1875 - 0x1p-30);  /* float: -1.1875, the tie of -1.125 and -1.25 */
    }
}

typedef struct {
    ptdp_real amax[MAX_TILES], scale[MAX_TILES], dq[MAX_ELEMS];
    uint8_t codes[MAX_ELEMS];
} quantized;

static void library_blockwise(const matrix *m, int tile, quantized *q)
{
    ptdp_fp8_tiling t;
    char msg[128];
    ptdp_real copy[MAX_ELEMS];
    memcpy(copy, m->x, sizeof(ptdp_real) * (size_t)(m->rows * m->cols));
    if (ptdp_fp8_tiling_init(&t, &ptdp_fp8_blockwise, m->rows, m->cols, 1, tile, msg, sizeof msg) != 0)
        return;
    ptdp_fp8_quantize(&ptdp_fp8_blockwise, F, &t, ptdp_tensor_wrap(copy, m->rows, m->cols), NULL, q->amax, q->scale,
                      q->codes, ptdp_tensor_wrap(q->dq, m->rows, m->cols));
}

static void explain_block_scale(const matrix *m, int i, const quantized *mine, const quantized *lib)
{
    const int across = (m->cols + TILE - 1) / TILE, r = i / across, j = i % across;
    const int c0 = j * TILE, c1 = m->cols - c0 < TILE ? m->cols : c0 + TILE;
    tutorial_wrong("blockwise, %d x %d: tile %d of row %d (columns %d .. %d) has your scale %.17g; ptdp_fp8_quantize's "
                   "is %.17g (amax %g / 448)", m->rows, m->cols, j, r, c0, c1 - 1, (double)mine->scale[i],
                   (double)lib->scale[i], (double)lib->amax[i]);
    ptdp_real row_amax = 0;
    for (int c = 0; c < m->cols; c++)
        row_amax = fmax(row_amax, fabs(m->x[r * m->cols + c]));
    if (mine->scale[i] == row_amax / 448 && row_amax != lib->amax[i])
        tutorial_note("that is the whole row's amax: a 1 x 128 tile is 128 columns of one row, the last one of a row "
                      "what is left (blank 5: columns c0 .. c1 - 1 only)");
    else
        tutorial_note("blank 5: amax = max |x| over the tile's columns c0 .. c1 - 1 of its row");
}

static void explain_block_value(const matrix *m, const quantized *mine, const quantized *lib, bool codes)
{
    const int across = (m->cols + TILE - 1) / TILE;
    int differ = 0, first = -1;
    double worst = 0;
    for (int i = 0; i < m->rows * m->cols; i++) {
        const bool bad = codes ? mine->codes[i] != lib->codes[i] : mine->dq[i] != lib->dq[i];
        differ += bad;
        if (bad && first < 0)
            first = i;
        worst = fmax(worst, fabs((double)(mine->dq[i] - lib->dq[i])));
    }
    const int r = first / m->cols, c = first % m->cols;
    const ptdp_real x = m->x[first], s = lib->scale[r * across + c / TILE];
    char got[48], want[48];
    if (codes) {
        snprintf(got, sizeof got, "code 0x%02X", (unsigned)mine->codes[first]);
        snprintf(want, sizeof want, "0x%02X", (unsigned)lib->codes[first]);
    } else {
        snprintf(got, sizeof got, "dequantized value %.9g", (double)mine->dq[first]);
        snprintf(want, sizeof want, "%.9g", (double)lib->dq[first]);
    }
    tutorial_wrong("blockwise, %d x %d: x[%d][%d] = %.17g (scale %.6g) gave %s; ptdp_fp8_quantize's is %s — %d of %d "
                   "%s differ, the dequantized values by up to %.3g", m->rows, m->cols, r, c, (double)x, (double)s, got,
                   want, differ, m->rows * m->cols, codes ? "codes" : "values", worst);
    if (codes && mine->codes[first] == ptdp_fp8_from_float(F, (float)(x / s)) &&
        mine->codes[first] != lib->codes[first])
        tutorial_note("rounded twice: x / s = %.17g is a double, and your code is the cast of it rounded to float "
                      "first (%.9g), which lands exactly on a tie of two E4M3 values that x / s itself is not on; "
                      "cast it once, from the double (blank 6: the given cast(), not a float cast)", (double)(x / s),
                      (double)(float)(x / s));
    else if (codes && mine->codes[first] == ptdp_fp8_from_real(F, x * s))
        tutorial_note("the scale inverted: you cast x · s; FP8 stores x / s, which brings the tile's largest |x| to "
                      "448 — x · s (s = amax / 448) shrinks the values by another s and most of them vanish into "
                      "zero or the subnormals (blank 6: cast(x / s), then value · s)");
    else if (!codes && mine->dq[first] == ptdp_fp8_to_real(F, lib->codes[first]) / s)
        tutorial_note("dequantized by dividing: value(code) · s undoes the x / s of the cast (blank 6)");
    else
        tutorial_note("blank 6: code = cast(x / s), dequantized value = value(code) · s");
}

/* Outside the tile holding the outlier: the largest |dequantized - x| / |x|
 * of a nonzero x, how many nonzero x there are (*nonzero), and how many
 * came back as 0 (*zeroed). */
static double error_outside(const matrix *m, const ptdp_real *dq, int r_out, int tile_out, int *nonzero, int *zeroed)
{
    double worst = 0;
    *nonzero = *zeroed = 0;
    for (int i = 0; i < m->rows * m->cols; i++)
        if (m->x[i] != 0 && !(i / m->cols == r_out && (i % m->cols) / TILE == tile_out)) {
            worst = fmax(worst, fabs((double)(dq[i] - m->x[i])) / fabs((double)m->x[i]));
            *nonzero += 1;
            *zeroed += dq[i] == 0;
        }
    return worst;
}

static void outlier_note(const matrix *m, const quantized *block)
{
    ptdp_fp8_tiling t;
    char msg[128];
    ptdp_real copy[MAX_ELEMS], dq[MAX_ELEMS], amax, scale;
    memcpy(copy, m->x, sizeof(ptdp_real) * (size_t)(m->rows * m->cols));
    if (ptdp_fp8_tiling_init(&t, &ptdp_fp8_tensorwise, m->rows, m->cols, 0, 0, msg, sizeof msg) != 0)
        return;
    ptdp_fp8_quantize(&ptdp_fp8_tensorwise, F, &t, ptdp_tensor_wrap(copy, m->rows, m->cols), NULL, &amax, &scale,
                      NULL, ptdp_tensor_wrap(dq, m->rows, m->cols));
    int n, zb, zt;
    const double eb = error_outside(m, block->dq, 1, 1, &n, &zb), et = error_outside(m, dq, 1, 1, &n, &zt);
    tutorial_note("an outlier of 1000 in row 1's tile 1; of the %d other nonzero values, blockwise: %d come back as "
                  "0, the others within %.3g%% of themselves; under one tensorwise scale, 1000 / 448 for all: %d "
                  "come back as 0 (off by up to %.3g%%)", n, zb, 100 * eb, zt, 100 * et);
}

static bool check_blockwise(void)
{
    static const struct { int rows, cols; bool outlier, ties; } CASES[] = { { 4, 300, true, false },
                                                                            { 2, 5, false, true },
                                                                            { 4, 256, false, false } };
    static matrix m;
    static quantized mine, lib, first;
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        make_matrix(&m, CASES[k].rows, CASES[k].cols, CASES[k].outlier, CASES[k].ties);
        memset(&mine, 0xAA, sizeof mine);
        library_blockwise(&m, TILE, &lib);
        const int rc = lesson_quantize_blockwise(m.x, m.rows, m.cols, TILE, mine.scale, mine.codes, mine.dq);
        if (rc != 0) {
            if (!tutorial_report_blank())
                tutorial_wrong("lesson_quantize_blockwise returned %d (%s)", rc, ptdp_strerror(rc));
            return false;
        }
        const int tiles = m.rows * ((m.cols + TILE - 1) / TILE);
        for (int i = 0; i < tiles; i++)
            if (mine.scale[i] != lib.scale[i]) {
                explain_block_scale(&m, i, &mine, &lib);
                return false;
            }
        if (memcmp(mine.codes, lib.codes, (size_t)(m.rows * m.cols)) != 0 ||
            memcmp(mine.dq, lib.dq, sizeof(ptdp_real) * (size_t)(m.rows * m.cols)) != 0) {
            explain_block_value(&m, &mine, &lib, memcmp(mine.codes, lib.codes, (size_t)(m.rows * m.cols)) != 0);
            return false;
        }
        if (k == 0)
            first = lib;
    }
    tutorial_ok("blockwise in 1 x 128 tiles: 4 x 300 (tiles of 128, 128 and 44 columns, an all-zero row, an "
                "outlier), 2 x 5 (x / s near ties), 4 x 256: every scale, code and dequantized value of ptdp_fp8_quantize, bit for bit");
    make_matrix(&m, CASES[0].rows, CASES[0].cols, true, false);
    outlier_note(&m, &first);
    return true;
}

/* =============================== blank 7: a weight's amax over tp = 2 */

enum { TP = 2, W_ROWS = 8, W_COLS = 64, W_SHARD = W_ROWS / TP * W_COLS };

typedef struct {
    ptdp_real w[W_ROWS * W_COLS], one_dq[W_ROWS * W_COLS], one_scale;
    uint8_t one_codes[W_ROWS * W_COLS];
    int differ[TP];          /* each device writes its own */
    double worst[TP];
    ptdp_real scale[TP];
} tensorwise_job;

/* The weight, as one device holds it; its largest |value| in rank 1's rows. */
static void make_weight(tensorwise_job *job)
{
    for (int i = 0; i < W_ROWS * W_COLS; i++)
        job->w[i] = wiggle(i + 7);
    job->w[6 * W_COLS + 10] = -3.3;
    ptdp_fp8_tiling t;
    char msg[128];
    ptdp_real copy[W_ROWS * W_COLS], amax;
    memcpy(copy, job->w, sizeof copy);
    if (ptdp_fp8_tiling_init(&t, &ptdp_fp8_tensorwise, W_ROWS, W_COLS, 0, 0, msg, sizeof msg) == 0)
        ptdp_fp8_quantize(&ptdp_fp8_tensorwise, F, &t, ptdp_tensor_wrap(copy, W_ROWS, W_COLS), NULL, &amax,
                          &job->one_scale, job->one_codes, ptdp_tensor_wrap(job->one_dq, W_ROWS, W_COLS));
}

static int tensorwise_device(ptdp_device *dev, void *arg)
{
    tensorwise_job *job = arg;
    const int r = dev->rank, off = r * W_SHARD;
    ptdp_real dq[W_SHARD], scale = -7;
    uint8_t codes[W_SHARD];
    const int rc = lesson_tp_tensorwise(dev->world, job->w + off, W_SHARD, &scale, codes, dq);
    if (rc != 0)
        return rc;
    job->differ[r] = 0;
    job->worst[r] = 0;
    for (int i = 0; i < W_SHARD; i++) {
        job->differ[r] += codes[i] != job->one_codes[off + i];
        job->worst[r] = fmax(job->worst[r], fabs((double)(dq[i] - job->one_dq[off + i])));
    }
    job->scale[r] = scale;
    return 0;
}

/* max |w| over rank `rank`'s rows. */
static ptdp_real shard_amax(const tensorwise_job *job, int rank)
{
    ptdp_real m = 0;
    for (int i = 0; i < W_SHARD; i++)
        m = fmax(m, fabs(job->w[rank * W_SHARD + i]));
    return m;
}

/* Rank `rank`'s shard quantized on its own (no reduction): codes that
 * differ from one device's, and the largest difference in value. */
static int alone(const tensorwise_job *job, int rank, double *worst, ptdp_real *scale)
{
    ptdp_fp8_tiling t;
    char msg[128];
    ptdp_real copy[W_SHARD], dq[W_SHARD], amax;
    uint8_t codes[W_SHARD];
    memcpy(copy, job->w + rank * W_SHARD, sizeof copy);
    if (ptdp_fp8_tiling_init(&t, &ptdp_fp8_tensorwise, W_ROWS / TP, W_COLS, 0, 0, msg, sizeof msg) != 0)
        return -1;
    ptdp_fp8_quantize(&ptdp_fp8_tensorwise, F, &t, ptdp_tensor_wrap(copy, W_ROWS / TP, W_COLS), NULL, &amax, scale,
                      codes, ptdp_tensor_wrap(dq, W_ROWS / TP, W_COLS));
    int differ = 0;
    *worst = 0;
    for (int i = 0; i < W_SHARD; i++) {
        differ += codes[i] != job->one_codes[rank * W_SHARD + i];
        *worst = fmax(*worst, fabs((double)(dq[i] - job->one_dq[rank * W_SHARD + i])));
    }
    return differ;
}

static bool check_tp_tensorwise(void)
{
    static tensorwise_job job;
    make_weight(&job);
    if (tutorial_launch("tensorwise over tp = 2", TP, tensorwise_device, &job) != 0)
        return false;
    double own_worst;
    ptdp_real own_scale;
    const int own = alone(&job, 0, &own_worst, &own_scale);
    const int differ = job.differ[0] + job.differ[1];
    if (differ > 0) {
        tutorial_wrong("tensorwise over tp = 2 (a weight of %d x %d, %d rows a rank): %d of %d codes differ from one device "
                       "quantizing the whole weight (rank 0: %d, rank 1: %d); the dequantized values by up to %.3g",
                       W_ROWS, W_COLS, W_ROWS / TP, differ, W_ROWS * W_COLS, job.differ[0], job.differ[1],
                       fmax(job.worst[0], job.worst[1]));
        if (job.scale[0] == own_scale && job.scale[0] != job.one_scale)
            tutorial_note("the amax over your shard only: rank 0's scale is %.6g, its own rows' amax / 448; the whole "
                          "weight's is %.6g (its largest |value|, 3.3, is in rank 1's rows).  One scale means one "
                          "amax for the whole tensor: max-reduce it over tp before the scale (blank 7: "
                          "ptdp_all_reduce(tp, &amax, &amax, 1, PTDP_REAL, PTDP_MAX))", (double)job.scale[0],
                          (double)job.one_scale);
        else if (job.scale[0] == (shard_amax(&job, 0) + shard_amax(&job, 1)) / 448)
            tutorial_note("the amaxes summed: your scale %.6g is (%.4g + %.4g) / 448, the sum of the ranks' amaxes.  "
                          "The whole weight's amax is the largest of theirs: the reduction's op is PTDP_MAX, not "
                          "PTDP_SUM (blank 7)", (double)job.scale[0], (double)shard_amax(&job, 0),
                          (double)shard_amax(&job, 1));
        else
            tutorial_note("blank 7: every rank's scale must be the whole weight's amax / 448 = %.6g",
                          (double)job.one_scale);
        return false;
    }
    tutorial_ok("tensorwise over tp = 2, a weight of %d x %d split by rows: one scale from the max-reduced amax; every "
                "code and dequantized value is one device's", W_ROWS, W_COLS);
    tutorial_note("without the reduction rank 0 would scale by its own amax (%.4g, not %.4g): %d of its %d codes "
                  "different, the dequantized values by up to %.3g", (double)shard_amax(&job, 0),
                  (double)(job.one_scale * 448), own, W_SHARD, own_worst);
    return true;
}

/* ========================= blanks 8-9: 1 × 128 tiles over a column split */

enum { B_ROWS = 3 };

typedef struct {
    matrix m;                /* the whole matrix: B_ROWS x 2 shard_cols */
    int shard_cols;
    quantized one;
    int differ[TP], first[TP];   /* first: the first differing index of the shard, or -1 */
    double worst[TP];
} blockwise_job;

/* The right half of every tile four times the left: a tile cut in the
 * middle has halves of different amax. */
static void make_split_matrix(blockwise_job *job, int shard_cols)
{
    matrix *m = &job->m;
    job->shard_cols = shard_cols;
    m->rows = B_ROWS;
    m->cols = TP * shard_cols;
    for (int r = 0; r < m->rows; r++)
        for (int c = 0; c < m->cols; c++)
            m->x[r * m->cols + c] = wiggle(r * m->cols + c + 3) * (c % TILE >= TILE / 2 ? 4 : 1);
    library_blockwise(m, TILE, &job->one);
}

static int blockwise_device(ptdp_device *dev, void *arg)
{
    blockwise_job *job = arg;
    const int r = dev->rank, sc = job->shard_cols, cols = job->m.cols;
    ptdp_real shard[B_ROWS * MAX_C / TP], dq[B_ROWS * MAX_C / TP], amax[B_ROWS * 3];
    uint8_t codes[B_ROWS * MAX_C / TP];
    int tile_of[MAX_C / TP];
    for (int i = 0; i < B_ROWS; i++)
        memcpy(shard + i * sc, job->m.x + i * cols + r * sc, sizeof(ptdp_real) * (size_t)sc);
    const int rc = lesson_tp_blockwise(dev->world, shard, B_ROWS, sc, TILE, tile_of, amax, codes, dq);
    if (rc != 0)
        return rc;
    job->differ[r] = 0;
    job->first[r] = -1;
    job->worst[r] = 0;
    for (int i = 0; i < B_ROWS * sc; i++) {
        const int whole = (i / sc) * cols + r * sc + i % sc;
        const bool bad = codes[i] != job->one.codes[whole] || dq[i] != job->one.dq[whole];
        job->differ[r] += bad;
        if (bad && job->first[r] < 0)
            job->first[r] = i;
        job->worst[r] = fmax(job->worst[r], fabs((double)(dq[i] - job->one.dq[whole])));
    }
    return 0;
}

static void explain_split(const blockwise_job *job)
{
    const int sc = job->shard_cols, rank = job->first[0] >= 0 ? 0 : 1, i = job->first[rank];
    const int row = i / sc, col = rank * sc + i % sc, j = col / TILE;
    const int c0 = j * TILE, c1 = (job->m.cols - c0 < TILE ? job->m.cols : c0 + TILE) - 1;
    tutorial_wrong("1 x 128 tiles over tp = 2, %d columns a rank: %d of %d codes or values differ from one device "
                   "quantizing the whole %d x %d matrix, by up to %.3g; the first is rank %d's row %d, column %d "
                   "(the whole matrix's column %d)", sc, job->differ[0] + job->differ[1], job->m.rows * job->m.cols,
                   job->m.rows, job->m.cols, fmax(job->worst[0], job->worst[1]), rank, row, i % sc, col);
    if (c0 / sc != c1 / sc)
        tutorial_note("its tile straddles the split: tile %d of row %d, columns %d .. %d, is cut at column %d — rank 0 "
                      "holds %d .. %d, rank 1 %d .. %d — and its one scale needs the amax of both parts.  Blank 8: "
                      "tile_of[c] counts the whole matrix's tiles, (col0 + c) / tile; blank 9: max-reduce the "
                      "tiles' amaxes over tp.  (A split at a multiple of 128 columns cuts no tile: then each rank's "
                      "tiles are whole, and no amax needs to cross the split.)", j, row, c0, c1, (c0 / sc + 1) * sc,
                      c0, (c0 / sc + 1) * sc - 1, (c0 / sc + 1) * sc, c1);
    else
        tutorial_note("its tile, columns %d .. %d of row %d, lies on rank %d alone: tile_of[c] must be the whole "
                      "matrix's tile of column col0 + c, not the shard's (blank 8)", c0, c1, row, c0 / sc);
}

/* Each rank quantizing its shard in its own 1 x 128 tiles, no reduction. */
static int shards_alone(const blockwise_job *job, double *worst)
{
    const int sc = job->shard_cols, cols = job->m.cols;
    static matrix shard;
    static quantized q;
    int differ = 0;
    *worst = 0;
    for (int r = 0; r < TP; r++) {
        shard.rows = B_ROWS;
        shard.cols = sc;
        for (int i = 0; i < B_ROWS; i++)
            memcpy(shard.x + i * sc, job->m.x + i * cols + r * sc, sizeof(ptdp_real) * (size_t)sc);
        library_blockwise(&shard, TILE, &q);
        for (int i = 0; i < B_ROWS * sc; i++) {
            const int whole = (i / sc) * cols + r * sc + i % sc;
            differ += q.codes[i] != job->one.codes[whole];
            *worst = fmax(*worst, fabs((double)(q.dq[i] - job->one.dq[whole])));
        }
    }
    return differ;
}

static bool check_tp_blockwise(void)
{
    static const int SPLITS[] = { 128, 64, 192 };
    static blockwise_job job;
    for (size_t k = 0; k < sizeof SPLITS / sizeof SPLITS[0]; k++) {
        make_split_matrix(&job, SPLITS[k]);
        char what[96];
        snprintf(what, sizeof what, "1 x 128 tiles over tp = 2, %d columns a rank", SPLITS[k]);
        if (tutorial_launch(what, TP, blockwise_device, &job) != 0)
            return false;
        if (job.differ[0] + job.differ[1] > 0) {
            explain_split(&job);
            return false;
        }
    }
    tutorial_ok("1 x 128 tiles over tp = 2, a %d-row matrix split by columns: 128 a rank (every tile on one rank), "
                "64 (every tile cut in two) and 192 (the middle tile cut): every code and dequantized value is one "
                "device's", B_ROWS);
    make_split_matrix(&job, 64);
    double worst;
    const int differ = shards_alone(&job, &worst);
    tutorial_note("each rank tiling its own 64 columns, no amax crossing the split: %d of %d codes different, the "
                  "dequantized values by up to %.3g", differ, job.m.rows * job.m.cols, worst);
    return true;
}

int main(void)
{
    tutorial_begin("15", "eight bits: the E4M3 cast, blockwise scales, the amax over tensor parallelism");
    bool ok = check_cast();
    if (ok)
        ok = check_scale();
    if (ok)
        ok = check_blockwise();
    if (ok)
        ok = check_tp_tensorwise();
    if (ok)
        ok = check_tp_blockwise();
    return tutorial_end();
}
