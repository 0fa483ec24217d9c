/*
 * safetensors.c — the safetensors checkpoint format: its vocabulary, and
 * typed reads from an opened file.
 *
 *     [ N: u64 little-endian ][ N bytes of JSON, space-padded to 8k ][ data ]
 *
 *     {"__metadata__":{"seed":"1"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},…}
 *
 * The lesson is about trust.  Writing (safetensors_write.c), we are careful
 * about *crashes*: the bytes go to a temporary file next to the target, are
 * fsync'ed, and only then renamed over it — rename is atomic, so a reader
 * sees the old file or the new one, never half of either (and the data is
 * laid out largest element first, so each tensor sits at a multiple of its
 * element size and a reader may view it in place).  Reading
 * (safetensors_open.c), we are careful about *input*: a checkpoint may be
 * truncated, bit-flipped or not a checkpoint at all, so every length is
 * checked against the bytes really present and every product
 * (numel = d0·d1·…, bytes = numel·size) is checked for overflow before
 * anything is indexed.  Only a file that passes everything is opened.
 *
 * This file holds what both sides share — dtypes, element counts, messages —
 * and then what a caller does with a file that has passed: look tensors up
 * and copy them out, converting the file's little-endian F32/F64/BF16/I64 into
 * native values.
 */
#include "io/safetensors_impl.h"

#include "ptdp/bf16.h"
#include "ptdp/error.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* The vocabulary: dtype names as the format spells them                    */
/* ------------------------------------------------------------------------ */

static const struct {
    const char *name;
    ptdp_dtype dtype;
    size_t size;
} dtypes[] = {
    {"F32", PTDP_F32, 4}, {"F64", PTDP_F64, 8}, {"I32", PTDP_I32, 4},
    {"I64", PTDP_I64, 8}, {"U8", PTDP_U8, 1}, {"BF16", PTDP_BF16, 2},
    /* FP8 codes, one byte each, spelt as the reference library spells them */
    {"F8_E4M3", PTDP_F8_E4M3, 1}, {"F8_E5M2", PTDP_F8_E5M2, 1},
};
#define N_DTYPES ((int)(sizeof dtypes / sizeof dtypes[0]))

static int dtype_index(ptdp_dtype t)
{
    for (int i = 0; i < N_DTYPES; i++)
        if (dtypes[i].dtype == t) return i;
    return -1;
}

size_t ptdp_st_dtype_size(ptdp_dtype t)
{
    int i = dtype_index(t);
    return i < 0 ? 0 : dtypes[i].size;
}

const char *ptdp_st_dtype_name(ptdp_dtype t)
{
    int i = dtype_index(t);
    return i < 0 ? "?" : dtypes[i].name;
}

bool ptdp_st_dtype_parse(const char *name, ptdp_dtype *out)
{
    for (int i = 0; i < N_DTYPES; i++)
        if (strcmp(name, dtypes[i].name) == 0) {
            *out = dtypes[i].dtype;
            return true;
        }
    return false;
}

/* ------------------------------------------------------------------------ */
/* Element counts                                                            */
/* ------------------------------------------------------------------------ */

bool ptdp_st_numel_of(int ndim, const int64_t *shape, uint64_t *numel)
{
    uint64_t n = 1;
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0 || !ptdp_st_mul_ok(n, (uint64_t)shape[d], &n)) return false;
    *numel = n;
    return n <= (uint64_t)INT64_MAX;
}

int64_t ptdp_st_numel(const ptdp_st_tensor *t)
{
    uint64_t n;
    return ptdp_st_numel_of(t->ndim, t->shape, &n) ? (int64_t)n : -1;
}

/* ------------------------------------------------------------------------ */
/* Messages                                                                  */
/* ------------------------------------------------------------------------ */

int ptdp_st_fail(char *msg, size_t msglen, int code, const char *fmt, ...)
{
    if (msg && msglen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, msglen, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* strerror is not thread-safe; the XSI strerror_r is (POSIX, and what glibc
 * and macOS give without _GNU_SOURCE). */
const char *ptdp_st_errno_text(int err, char *buf, size_t len)
{
    if (strerror_r(err, buf, len) != 0) snprintf(buf, len, "error %d", err);
    return buf;
}

const char *ptdp_st_shape_text(int ndim, const int64_t *shape, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < ndim && at < len; d++)
        at += (size_t)snprintf(buf + at, len - at, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (at < len) snprintf(buf + at, len - at, "]");
    return buf;
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

const char *ptdp_st_first_duplicate(const char **names, size_t n)
{
    qsort(names, n, sizeof *names, cmp_str_ptr);
    for (size_t i = 1; i < n; i++)
        if (strcmp(names[i - 1], names[i]) == 0) return names[i];
    return NULL;
}

/* ======================================================================== */
/* Access to an opened file                                                 */
/* ======================================================================== */

int ptdp_st_count(const ptdp_st_file *f) { return f ? f->n : 0; }

const ptdp_st_tensor *ptdp_st_get(const ptdp_st_file *f, int i)
{
    return (f && i >= 0 && i < f->n) ? &f->entries[i].t : NULL;
}

const ptdp_st_tensor *ptdp_st_find(const ptdp_st_file *f, const char *name)
{
    if (!f || !name) return NULL;
    int lo = 0, hi = f->n - 1;   /* binary search of the name-sorted index */
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(name, f->by_name[mid]->t.name);
        if (c == 0) return &f->by_name[mid]->t;
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return NULL;
}

const char *ptdp_st_meta(const ptdp_st_file *f, const char *key)
{
    if (!f || !key) return NULL;
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_values[i];
    return NULL;
}

int ptdp_st_meta_count(const ptdp_st_file *f)
{
    return f ? f->n_meta : 0;
}

const char *ptdp_st_meta_key(const ptdp_st_file *f, int i)
{
    return f && i >= 0 && i < f->n_meta ? f->meta_keys[i] : NULL;
}

/* The checks both typed readers share: present, the right shape. */
static int find_checked(const ptdp_st_file *f, const char *name, int ndim, const int64_t *shape,
                        const ptdp_st_tensor **out, char *msg, size_t msglen)
{
    char want[96], have[96];
    if (!f || !name || ndim < 0 || ndim > PTDP_ST_MAX_NDIM || (ndim > 0 && !shape))
        return ptdp_st_fail(msg, msglen, PTDP_EINVAL, "safetensors read: bad arguments");
    const ptdp_st_tensor *t = ptdp_st_find(f, name);
    if (!t)
        return ptdp_st_fail(msg, msglen, PTDP_ECORRUPT, "%s: no tensor '%s' (expected shape %s)",
                            f->path, name, ptdp_st_shape_text(ndim, shape, want, sizeof want));
    bool same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
    if (!same)
        return ptdp_st_fail(msg, msglen, PTDP_ECORRUPT, "%s: tensor '%s' has shape %s, expected %s",
                            f->path, name, ptdp_st_shape_text(t->ndim, t->shape, have, sizeof have),
                            ptdp_st_shape_text(ndim, shape, want, sizeof want));
    *out = t;
    return 0;
}

/* A double into ptdp_real: overflow to float is defined here as ±infinity
 * instead of being left to the (undefined) conversion. */
static ptdp_real to_real(double v)
{
#ifndef PTDP_DOUBLE
    if (isfinite(v) && fabs(v) > FLT_MAX) return v > 0 ? INFINITY : -INFINITY;
#endif
    return (ptdp_real)v;
}

/* The bytes in the file are little-endian and may be unaligned, so each
 * element is assembled from its bytes and then reinterpreted (memcpy, not a
 * pointer cast, which would break the aliasing and alignment rules). */
int ptdp_st_read_real(const ptdp_st_file *f, const char *name, int ndim, const int64_t *shape,
                      ptdp_real *dst, char *msg, size_t msglen)
{
    const ptdp_st_tensor *t;
    int rc = find_checked(f, name, ndim, shape, &t, msg, msglen);
    if (rc != 0) return rc;
    if (t->dtype != PTDP_F32 && t->dtype != PTDP_F64 && t->dtype != PTDP_BF16)
        return ptdp_st_fail(msg, msglen, PTDP_ECORRUPT,
                            "%s: tensor '%s' has dtype %s, expected F32, F64 or BF16", f->path,
                            name, ptdp_st_dtype_name(t->dtype));
    const unsigned char *src = t->data;
    int64_t n = ptdp_st_numel(t);
    for (int64_t i = 0; i < n; i++) {
        if (t->dtype == PTDP_F32) {
            uint32_t bits = (uint32_t)ptdp_st_load_le(src + 4 * i, 4);
            float v;
            memcpy(&v, &bits, 4);
            dst[i] = (ptdp_real)v;
        } else if (t->dtype == PTDP_BF16) {      /* widening is exact (bf16.h) */
            dst[i] = (ptdp_real)ptdp_bf16_to_float((ptdp_bf16)ptdp_st_load_le(src + 2 * i, 2));
        } else {
            uint64_t bits = ptdp_st_load_le(src + 8 * i, 8);
            double v;
            memcpy(&v, &bits, 8);
            dst[i] = to_real(v);
        }
    }
    return 0;
}

int ptdp_st_read_i64(const ptdp_st_file *f, const char *name, int ndim, const int64_t *shape,
                     int64_t *dst, char *msg, size_t msglen)
{
    const ptdp_st_tensor *t;
    int rc = find_checked(f, name, ndim, shape, &t, msg, msglen);
    if (rc != 0) return rc;
    if (t->dtype != PTDP_I64)
        return ptdp_st_fail(msg, msglen, PTDP_ECORRUPT,
                            "%s: tensor '%s' has dtype %s, expected I64", f->path, name,
                            ptdp_st_dtype_name(t->dtype));
    const unsigned char *src = t->data;
    int64_t n = ptdp_st_numel(t);
    for (int64_t i = 0; i < n; i++) {
        uint64_t bits = ptdp_st_load_le(src + 8 * i, 8);
        memcpy(&dst[i], &bits, 8);   /* two's complement, without a signed conversion */
    }
    return 0;
}
