/*
 * fp8_cmd.c — `ptdp fp8 quantize`: every float tensor of a safetensors file
 * quantized to FP8 by one recipe, written beside its scales and its
 * dequantized values, so the arithmetic can be checked bit for bit.
 *
 *     ptdp fp8 quantize in.st out.st --recipe blockwise --format e4m3 --tile 1x128
 *
 *     in.st                          out.st
 *     ┌──────────────────┐           ┌──────────────────────────────────────────────┐
 *     │ w   F32 [4, 300] │  ──────►  │ w          F8_E4M3 [4, 300]   the codes      │
 *     │ …                │           │ w.scale    F32     [4, 3]     a scale a tile │
 *     └──────────────────┘           │ w.dequant  F32     [4, 300]   code · scale   │
 *                                    └──────────────────────────────────────────────┘
 *
 * A tensor is quantized as a matrix: its last dimension the columns, the
 * others the rows (fp8_quant.h); t.scale is the tile grid, in tile order.
 * ptdp-f64 computes in double and writes t.scale and t.dequant as F64 (in
 * F32 its scales would be rounded once more).  The delayed recipe, with no
 * earlier steps in a file, is each tensor's first step (its own amax) —
 * unless --amax-history gives the amaxes of earlier steps.  --tensors picks
 * some tensors of a file that holds others (a checkpoint's step count is
 * an integer: it cannot be quantized, and is refused when asked for).
 *
 * Everything is checked before anything is written (flags, then the file's
 * tensors), and the output is written atomically (safetensors.h).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "commands.h"
#include "paths.h"
#include "ptdp/error.h"
#include "ptdp/fp8_quant.h"
#include "ptdp/safetensors.h"

#define CMD "fp8 quantize"
#define HISTORY_MAX 1024     /* Transformer Engine's default history length */

typedef struct {
    const char *in, *out;
    const ptdp_fp8_recipe *recipe;
    const ptdp_fp8_format *format;
    int tile_rows, tile_cols;              /* 0 x 0: the recipe's activation tile */
    ptdp_real history[HISTORY_MAX];
    int history_count;
    bool history_given;
    const char *tensors;                   /* --tensors a,b,c, or NULL: every tensor */
} fp8_options;

static void usage(FILE *f)
{
    char formats[128] = "";
    for (int i = 0; i < ptdp_fp8_format_count(); i++)
        snprintf(formats + strlen(formats), sizeof formats - strlen(formats), "%s%s (max %g)", i ? " or " : "",
                 ptdp_fp8_format_at(i)->name, ptdp_fp8_format_at(i)->max);
    strncat(formats, ": rounded to nearest, ties to even, saturating at +-max; NaN stays NaN",
            sizeof formats - strlen(formats) - 1);
    fprintf(f,
        "usage: ptdp fp8 quantize IN.st OUT.st --recipe R --format e4m3|e5m2 [--tile RxC]\n"
        "                         [--amax-history A,B,...] [--tensors NAME,...]\n"
        "\n"
        "Quantize the float tensors of IN.st to FP8 and write OUT.st with, for each tensor t,\n"
        "t (the codes, dtype F8_E4M3 or F8_E5M2), t.scale (a scale a tile, in tile order) and\n"
        "t.dequant (each code's value times its tile's scale).  A tensor is a matrix of its last\n"
        "dimension's columns; tiles are cut row-major, the edge ones partial.\n"
        "\n");
    ptdp_help_wrapped(f, "  --recipe R", "how the tiles are cut and scaled, one of:");
    for (int i = 0; i < ptdp_fp8_recipe_count(); i++) {
        char name[32];
        snprintf(name, sizeof name, "      %s", ptdp_fp8_recipe_at(i)->name);
        ptdp_help_wrapped(f, name, ptdp_fp8_recipe_at(i)->summary);
    }
    ptdp_help_wrapped(f, "  --format F", formats);
    ptdp_help_wrapped(f, "  --tile RxC", "the tile, rows x columns (blockwise: 1x128 unless given, 128x128 for "
                      "weights; mxfp8: 1x32 or 32x1; tensorwise and delayed have one tile, the tensor)");
    ptdp_help_wrapped(f, "  --amax-history A,B,...", "delayed only: the amaxes of earlier steps, oldest first; "
                      "the scale is their max / max (default: none, the first step: its own amax)");
    ptdp_help_wrapped(f, "  --tensors A,B,...", "quantize these tensors of IN.st only (default: every tensor; "
                      "each must be float: F32, F64 or BF16)");
    fprintf(f,
        "\n"
        "Exit status: 0 written, 1 IN.st unreadable or OUT.st not written, 2 a bad command line\n"
        "or a tensor that cannot be quantized.\n");
}

/* ---- parse ---------------------------------------------------------------- */

/* "128" as a tile size: digits only, 1 .. 2^30. */
static bool tile_size(const char *s, size_t len, int *out)
{
    long v = 0;
    if (len == 0 || len > 10)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v > (1L << 30))
        return false;
    *out = (int)v;
    return true;
}

static int parse_tile(const char *v, fp8_options *o)
{
    const char *x = strchr(v, 'x');
    if (strchr(v, '-') != NULL)
        return ptdp_usage_error(CMD, "--tile %s: a size is negative: both must be at least 1", v);
    if (x == NULL || !tile_size(v, (size_t)(x - v), &o->tile_rows) ||
        !tile_size(x + 1, strlen(x + 1), &o->tile_cols))
        return ptdp_usage_error(CMD, "--tile %s: not a tile: write ROWSxCOLS, two whole numbers from 1 to "
                                "%ld, e.g. 1x128", v, 1L << 30);
    if (o->tile_rows == 0 || o->tile_cols == 0)
        return ptdp_usage_error(CMD, "--tile %s: a size is 0: both must be at least 1", v);
    return 0;
}

/* "3.5,448,0.25": the amaxes of earlier steps, each finite and >= 0. */
static int parse_history(const char *v, fp8_options *o)
{
    const char *p = v;
    o->history_given = true;
    for (;;) {
        char *end = NULL;
        errno = 0;
#ifdef PTDP_DOUBLE
        const double a = strtod(p, &end);
#else
        const float a = strtof(p, &end);    /* rounded once, from the decimal */
#endif
        if (end == p || (*end != ',' && *end != '\0') || errno == ERANGE || !isfinite(a) || a < 0)
            return ptdp_usage_error(CMD, "--amax-history %s: item %d is not an amax: each must be a finite "
                                    "number >= 0, e.g. 3.5,448", v, o->history_count + 1);
        if (o->history_count == HISTORY_MAX)
            return ptdp_usage_error(CMD, "--amax-history %s: at most %d amaxes", v, HISTORY_MAX);
        o->history[o->history_count++] = a;
        if (*end == '\0')
            return 0;
        p = end + 1;
    }
}

static int parse_flag(ptdp_args *a, fp8_options *o)
{
    const char *recipes[16], *formats[4], *v = NULL;
    int nr = ptdp_fp8_recipe_count(), nf = ptdp_fp8_format_count(), which = 0, rc;
    for (int i = 0; i < nr; i++)
        recipes[i] = ptdp_fp8_recipe_at(i)->name;
    for (int i = 0; i < nf; i++)
        formats[i] = ptdp_fp8_format_at(i)->name;
    if (ptdp_args_is(a, "--recipe")) {
        if ((rc = ptdp_args_enum(a, recipes, nr, &which)) == 0)
            o->recipe = ptdp_fp8_recipe_at(which);
        return rc;
    }
    if (ptdp_args_is(a, "--format")) {
        if ((rc = ptdp_args_enum(a, formats, nf, &which)) == 0)
            o->format = ptdp_fp8_format_at(which);
        return rc;
    }
    if (ptdp_args_is(a, "--tile"))
        return (rc = ptdp_args_string(a, &v)) != 0 ? rc : parse_tile(v, o);
    if (ptdp_args_is(a, "--amax-history"))
        return (rc = ptdp_args_string(a, &v)) != 0 ? rc : parse_history(v, o);
    if (ptdp_args_is(a, "--tensors"))
        return ptdp_args_string(a, &o->tensors);
    if (a->flag[0] == '\0' && o->in == NULL)
        o->in = a->arg;
    else if (a->flag[0] == '\0' && o->out == NULL)
        o->out = a->arg;
    else
        return ptdp_args_unknown(a);
    return 0;
}

/* The flags as typed, then together: 0, -1 after --help, or exit 2. */
static int parse(int argc, char **argv, fp8_options *o)
{
    ptdp_args a;
    ptdp_args_init(&a, CMD, argc, argv, 1);
    while (ptdp_args_next(&a)) {
        if (ptdp_args_is(&a, "--help")) {
            usage(stdout);
            return -1;
        }
        if (parse_flag(&a, o) != 0)
            return PTDP_EXIT_USAGE;
    }
    if (a.status)
        return PTDP_EXIT_USAGE;
    if (o->in == NULL || o->out == NULL)
        return ptdp_usage_error(CMD, "expected IN.st and OUT.st (see ptdp fp8 quantize --help)");
    if (o->recipe == NULL)
        return ptdp_usage_error(CMD, "--recipe is needed: tensorwise, blockwise, mxfp8 or delayed");
    if (o->format == NULL)
        return ptdp_usage_error(CMD, "--format is needed: e4m3 or e5m2");
    char msg[256];
    if (ptdp_fp8_tile_check(o->recipe, o->tile_rows, o->tile_cols, msg, sizeof msg) != 0)
        return ptdp_usage_error(CMD, "--tile %dx%d: %s", o->tile_rows, o->tile_cols, msg);
    if (o->history_given && !o->recipe->uses_history)
        return ptdp_usage_error(CMD, "--amax-history is for --recipe delayed, not --recipe %s", o->recipe->name);
    struct stat st;
    if (stat(o->in, &st) != 0 && errno == ENOENT)
        return ptdp_usage_error(CMD, "IN.st %s: no such file", o->in);
    const ptdp_cli_file in = { "IN.st", o->in }, out = { "OUT.st", o->out };
    return ptdp_cli_check_files(CMD, &in, 1, &out, 1);
}

/* ---- the file's tensors, checked before any work ------------------------- */

/* One input tensor and what it becomes. */
typedef struct {
    const ptdp_st_tensor *in;
    ptdp_fp8_tiling tiling;
    uint8_t *codes;
    ptdp_real *dequant, *amax, *scale;
    char scale_name[PTDP_ST_NAME_MAX], dequant_name[PTDP_ST_NAME_MAX];
    /* for the summary line */
    long long at_max, nan, zero;
    double worst;                          /* max |x - dequant| over finite x */
} quantized;

static bool is_float(ptdp_dtype d) { return d == PTDP_F32 || d == PTDP_F64 || d == PTDP_BF16; }

/* The tensor as a matrix: rows = the product of all dimensions but the
 * last, cols = the last (a scalar is 1 x 1); false when its values (and so
 * its tiles) are more than an int counts. */
static bool as_matrix(const ptdp_st_tensor *t, int *rows, int *cols)
{
    int64_t r = 1, c = t->ndim > 0 ? t->shape[t->ndim - 1] : 1;
    for (int d = 0; d + 1 < t->ndim; d++) {
        if (t->shape[d] > INT_MAX)
            return false;
        r *= t->shape[d];                  /* both <= INT_MAX: fits int64 */
        if (r > INT_MAX)
            return false;
    }
    if (c > INT_MAX || r * c > INT_MAX)     /* both <= INT_MAX: no wrap */
        return false;
    *rows = (int)r;
    *cols = (int)c;
    return true;
}

/* The tensors to quantize: --tensors' names in their order, or every
 * tensor of the file.  *n of them in q; 0 or exit 2. */
static int select_tensors(const fp8_options *o, const ptdp_st_file *f, quantized *q, int *n)
{
    *n = 0;
    if (o->tensors == NULL) {
        for (int i = 0; i < ptdp_st_count(f); i++)
            q[(*n)++].in = ptdp_st_get(f, i);
        return 0;
    }
    for (const char *p = o->tensors;; p++) {
        char name[PTDP_ST_NAME_MAX];
        const size_t len = strcspn(p, ",");
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), p);
        const ptdp_st_tensor *t = len < sizeof name ? ptdp_st_find(f, name) : NULL;
        if (t == NULL)
            return ptdp_usage_error(CMD, "--tensors %s: IN.st %s has no tensor '%.*s'", o->tensors, o->in,
                                    (int)len, p);
        for (int k = 0; k < *n; k++)
            if (q[k].in == t)
                return ptdp_usage_error(CMD, "--tensors %s: '%s' is named twice", o->tensors, name);
        if (*n == ptdp_st_count(f))
            return ptdp_usage_error(CMD, "--tensors %s: more names than IN.st has tensors", o->tensors);
        q[(*n)++].in = t;
        p += len;
        if (*p == '\0')
            return 0;
    }
}

/* No two outputs of one name: 'a.scale' quantized beside 'a'. */
static int check_names(const fp8_options *o, const quantized *q, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            const char *name = q[j].in->name;
            if (strcmp(name, q[i].scale_name) == 0 || strcmp(name, q[i].dequant_name) == 0)
                return ptdp_usage_error(CMD, "IN.st %s: tensors '%s' and '%s' would both be written as '%s': "
                                        "rename one, or leave one out (--tensors)", o->in, q[i].in->name,
                                        name, name);
        }
    return 0;
}

/* A tensor quantizable, and the names of its outputs: 0 or exit 2. */
static int check_tensor(const fp8_options *o, const ptdp_st_tensor *t, quantized *q)
{
    char msg[256];
    int rows, cols;
    q->in = t;
    if (!is_float(t->dtype))
        return ptdp_usage_error(CMD, "IN.st %s: tensor '%s' is %s: only float tensors (F32, F64, BF16) "
                                "are quantized (choose some with --tensors)", o->in, t->name,
                                ptdp_dtype_name(t->dtype));
    if (strlen(t->name) + strlen(".dequant") >= PTDP_ST_NAME_MAX)
        return ptdp_usage_error(CMD, "IN.st %s: tensor '%s': '%s.dequant' would be longer than %d bytes",
                                o->in, t->name, t->name, PTDP_ST_NAME_MAX - 1);
    snprintf(q->scale_name, sizeof q->scale_name, "%s.scale", t->name);
    snprintf(q->dequant_name, sizeof q->dequant_name, "%s.dequant", t->name);
    if (!as_matrix(t, &rows, &cols))
        return ptdp_usage_error(CMD, "IN.st %s: tensor '%s' is too large: at most %d values", o->in, t->name,
                                INT_MAX);
    if (ptdp_fp8_tiling_init(&q->tiling, o->recipe, rows, cols, o->tile_rows, o->tile_cols, msg, sizeof msg))
        return ptdp_usage_error(CMD, "IN.st %s: tensor '%s': %s", o->in, t->name, msg);
    return 0;
}

/* ---- quantize ------------------------------------------------------------- */

static void summarize(const ptdp_fp8_format *fmt, quantized *q, const ptdp_real *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const unsigned magnitude = q->codes[i] & 0x7Fu;
        q->at_max += magnitude == fmt->max_code;
        q->nan += ptdp_fp8_is_nan(fmt, q->codes[i]);
        q->zero += magnitude == 0;
        const double d = fabs((double)x[i] - (double)q->dequant[i]);
        if (isfinite((double)x[i]) && d > q->worst)
            q->worst = d;
    }
}

/* One tensor: read, quantize, summarize.  0, or exit 1 (the message printed). */
static int quantize_one(const fp8_options *o, const ptdp_st_file *f, quantized *q)
{
    char msg[1024];
    const size_t n = (size_t)q->tiling.rows * (size_t)q->tiling.cols;
    const int tiles = ptdp_fp8_tile_count(&q->tiling);
    ptdp_real *x = malloc((n ? n : 1) * sizeof *x);
    q->codes = malloc(n ? n : 1);
    q->dequant = malloc((n ? n : 1) * sizeof *q->dequant);
    q->amax = malloc((size_t)(tiles ? tiles : 1) * sizeof *q->amax);
    q->scale = malloc((size_t)(tiles ? tiles : 1) * sizeof *q->scale);
    if (!x || !q->codes || !q->dequant || !q->amax || !q->scale) {
        free(x);
        fprintf(stderr, "ptdp %s: tensor '%s': host out of memory\n", CMD, q->in->name);
        return PTDP_EXIT_FAIL;
    }
    if (ptdp_st_read_real(f, q->in->name, q->in->ndim, q->in->shape, x, msg, sizeof msg) != 0) {
        free(x);
        fprintf(stderr, "ptdp %s: %s\n", CMD, msg);
        return PTDP_EXIT_FAIL;
    }
    ptdp_real slots[HISTORY_MAX];          /* every tensor starts from the same history */
    ptdp_fp8_history h;
    ptdp_fp8_history_init(&h, slots, HISTORY_MAX);
    for (int i = 0; i < o->history_count; i++)
        ptdp_fp8_history_record(&h, o->history[i]);
    ptdp_tensor xt = ptdp_tensor_wrap(x, q->tiling.rows, q->tiling.cols);
    ptdp_tensor dq = ptdp_tensor_wrap(q->dequant, q->tiling.rows, q->tiling.cols);
    ptdp_fp8_quantize(o->recipe, o->format, &q->tiling, xt, &h, q->amax, q->scale, q->codes, dq);
    summarize(o->format, q, x, n);
    free(x);
    return 0;
}

/* ---- write, then say what was done ---------------------------------------- */

static int write_out(const fp8_options *o, const quantized *q, int n)
{
    char msg[1024], tile[32];
    ptdp_st_tensor *t = calloc((size_t)(3 * n + 1), sizeof *t);
    if (t == NULL) {
        fprintf(stderr, "ptdp %s: host out of memory\n", CMD);
        return PTDP_EXIT_FAIL;
    }
    for (int i = 0; i < n; i++) {
        const ptdp_st_tensor *in = q[i].in;
        ptdp_st_tensor *codes = &t[3 * i], *scale = &t[3 * i + 1], *dequant = &t[3 * i + 2];
        *codes = *in;                                    /* its name and shape */
        codes->dtype = o->format->dtype;
        codes->data = q[i].codes;
        *dequant = *in;
        snprintf(dequant->name, sizeof dequant->name, "%s", q[i].dequant_name);
        dequant->dtype = PTDP_REAL;
        dequant->data = q[i].dequant;
        *scale = (ptdp_st_tensor){ .dtype = PTDP_REAL, .ndim = 2, .data = q[i].scale,
                                   .shape = { q[i].tiling.grid_rows, q[i].tiling.grid_cols } };
        snprintf(scale->name, sizeof scale->name, "%s", q[i].scale_name);
    }
    if (o->recipe->whole_tensor)
        snprintf(tile, sizeof tile, "whole tensor");
    else if (o->tile_rows == 0)
        snprintf(tile, sizeof tile, "%dx%d", o->recipe->act_tile[0], o->recipe->act_tile[1]);
    else
        snprintf(tile, sizeof tile, "%dx%d", o->tile_rows, o->tile_cols);
    const char *keys[3] = { "fp8.recipe", "fp8.format", "fp8.tile" };
    const char *values[3] = { o->recipe->name, o->format->name, tile };
    int rc = ptdp_st_write(o->out, t, 3 * n, keys, values, 3, msg, sizeof msg);
    free(t);
    if (rc != 0) {
        fprintf(stderr, "ptdp %s: %s\n", CMD, msg);
        return PTDP_EXIT_FAIL;
    }
    return 0;
}

static void print_summary(const fp8_options *o, const quantized *q, int n)
{
    printf("ptdp fp8 quantize: %s, %s (max %g): %s -> %s\n", o->recipe->name, o->format->name,
           o->format->max, o->in, o->out);
    if (o->history_count > 0) {
        double m = 0;
        for (int k = 0; k < o->history_count; k++)
            m = fmax(m, (double)o->history[k]);
        printf("  amax history: %d earlier step%s, max %.6g\n", o->history_count,
               o->history_count == 1 ? "" : "s", m);
    }
    for (int i = 0; i < n; i++) {
        const quantized *e = &q[i];
        const int tiles = ptdp_fp8_tile_count(&e->tiling);
        double amax = 0, lo = tiles ? (double)e->scale[0] : 0, hi = lo;
        for (int k = 0; k < tiles; k++) {
            amax = fmax(amax, (double)e->amax[k]);
            lo = fmin(lo, (double)e->scale[k]);
            hi = fmax(hi, (double)e->scale[k]);
        }
        printf("  %s: %d x %d, %d tile%s of %dx%d, amax %.6g, scale %.6g .. %.6g; codes at max %lld, "
               "NaN %lld, zero %lld; max |x - dequant| %.6g\n", e->in->name, e->tiling.rows, e->tiling.cols,
               tiles, tiles == 1 ? "" : "s", e->tiling.tile_rows, e->tiling.tile_cols, amax, lo, hi,
               e->at_max, e->nan, e->zero, e->worst);
    }
}

static void free_all(quantized *q, int n)
{
    for (int i = 0; q != NULL && i < n; i++) {
        free(q[i].codes);
        free(q[i].dequant);
        free(q[i].amax);
        free(q[i].scale);
    }
    free(q);
}

static int quantize_file(const fp8_options *o)
{
    char msg[1024];
    ptdp_st_file *f = NULL;
    if (ptdp_st_open(o->in, &f, msg, sizeof msg) != 0) {
        fprintf(stderr, "ptdp %s: IN.st %s\n", CMD, msg);
        return PTDP_EXIT_FAIL;
    }
    int n = 0;
    quantized *q = calloc((size_t)(ptdp_st_count(f) + 1), sizeof *q);
    int status = q == NULL ? PTDP_EXIT_FAIL : select_tensors(o, f, q, &n);
    if (q == NULL)
        fprintf(stderr, "ptdp %s: host out of memory\n", CMD);
    for (int i = 0; status == PTDP_EXIT_OK && i < n; i++)
        status = check_tensor(o, q[i].in, &q[i]);
    if (status == PTDP_EXIT_OK)
        status = check_names(o, q, n);
    for (int i = 0; status == PTDP_EXIT_OK && i < n; i++)
        status = quantize_one(o, f, &q[i]);
    if (status == PTDP_EXIT_OK && (status = write_out(o, q, n)) == PTDP_EXIT_OK)
        print_summary(o, q, n);
    free_all(q, n);
    ptdp_st_close(f);
    return status;
}

static int quantize_cmd(int argc, char **argv)
{
    fp8_options *o = calloc(1, sizeof *o);
    if (o == NULL) {
        fprintf(stderr, "ptdp %s: host out of memory\n", CMD);
        return PTDP_EXIT_FAIL;
    }
    int rc = parse(argc, argv, o);
    rc = rc < 0 ? PTDP_EXIT_OK : rc != 0 ? rc : quantize_file(o);
    free(o);
    return rc;
}

static void fp8_usage(FILE *f)
{
    fprintf(f, "usage: ptdp fp8 <what> [flags]\n"
               "\n"
               "  quantize   quantize a safetensors file's float tensors to FP8 (E4M3 or E5M2) by a\n"
               "             recipe: tensorwise, blockwise, mxfp8 or delayed; writes codes, scales and\n"
               "             dequantized values\n"
               "\n"
               "`ptdp fp8 quantize --help` lists its flags.\n");
}

int ptdp_cmd_fp8(int argc, char **argv)
{
    if (argc < 2) {
        fp8_usage(stderr);
        return PTDP_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fp8_usage(stdout);
        return PTDP_EXIT_OK;
    }
    if (strcmp(argv[1], "quantize") == 0)
        return quantize_cmd(argc - 1, argv + 1);
    return ptdp_usage_error("fp8", "unknown command '%s': use quantize (see ptdp fp8 --help)", argv[1]);
}
