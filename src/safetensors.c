/*
 * safetensors.c — write and read the safetensors checkpoint format.
 *
 *     [ N: u64 little-endian ][ N bytes of JSON, space-padded to 8k ][ data ]
 *
 *     {"__metadata__":{"seed":"1"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},…}
 *
 * The lesson is about trust.  Writing, we are careful about *crashes*: the
 * bytes go to a temporary file next to the target, are fsync'ed, and only
 * then renamed over it — rename is atomic, so a reader sees the old file or
 * the new one, never half of either (and the data is laid out largest element
 * first, so each tensor sits at a multiple of its element size and a reader
 * may view it in place).  Reading, we are careful about *input*:
 * a checkpoint may be truncated, bit-flipped or not a checkpoint at all, so
 * every length is checked against the bytes really present and every
 * product (numel = d0·d1·…, bytes = numel·size) is checked for overflow
 * before anything is indexed.  Only a file that passes everything is opened.
 *
 * The file reads top-down: the format's vocabulary (dtypes, little-endian
 * bytes), then the writer (header JSON, atomic write), then the reader (read
 * the bytes, parse the JSON, check the layout), then typed access.
 */
#include "ptdp/safetensors.h"

#include "ptdp/error.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The reference implementation refuses headers above 100 MB; so do we, so a
 * garbage length prefix never makes us parse (or allocate for) a monster. */
#define MAX_HEADER_BYTES ((uint64_t)100 << 20)

/* ------------------------------------------------------------------------ */
/* The vocabulary: dtype names as the format spells them                    */
/* ------------------------------------------------------------------------ */

static const struct {
    const char *name;
    ptdp_dtype dtype;
    size_t size;
} dtypes[] = {
    {"F32", PTDP_F32, 4}, {"F64", PTDP_F64, 8}, {"I32", PTDP_I32, 4},
    {"I64", PTDP_I64, 8}, {"U8", PTDP_U8, 1},
};
#define N_DTYPES ((int)(sizeof dtypes / sizeof dtypes[0]))

static int dtype_index(ptdp_dtype t)
{
    for (int i = 0; i < N_DTYPES; i++)
        if (dtypes[i].dtype == t) return i;
    return -1;
}

static const char *dtype_name(ptdp_dtype t)
{
    int i = dtype_index(t);
    return i < 0 ? "?" : dtypes[i].name;
}

/* ------------------------------------------------------------------------ */
/* Little-endian bytes, whatever the host                                    */
/* ------------------------------------------------------------------------ */

/* Assembling a value from its bytes, least significant first, is correct on
 * any host; on a little-endian one the compiler turns it into a plain load. */
static uint64_t load_le(const unsigned char *p, size_t size)
{
    uint64_t v = 0;
    for (size_t i = 0; i < size; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void store_le(unsigned char *p, uint64_t v, size_t size)
{
    for (size_t i = 0; i < size; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static bool host_is_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

/* ------------------------------------------------------------------------ */
/* Messages and checked arithmetic                                            */
/* ------------------------------------------------------------------------ */

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static int fail(char *msg, size_t msglen, int code, const char *fmt, ...)
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
static const char *errno_text(int err, char *buf, size_t len)
{
    if (strerror_r(err, buf, len) != 0) snprintf(buf, len, "error %d", err);
    return buf;
}

/* a·b and a+b, refusing to wrap: every size in a file is attacker-controlled. */
static bool mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a) return false;
    *out = a * b;
    return true;
}

static bool add_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    if (b > UINT64_MAX - a) return false;
    *out = a + b;
    return true;
}

/* numel = d0·d1·…·d(ndim-1), 1 for a scalar; false if it exceeds INT64_MAX. */
static bool numel_of(int ndim, const int64_t *shape, uint64_t *numel)
{
    uint64_t n = 1;
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0 || !mul_ok(n, (uint64_t)shape[d], &n)) return false;
    *numel = n;
    return n <= (uint64_t)INT64_MAX;
}

int64_t ptdp_st_numel(const ptdp_st_tensor *t)
{
    uint64_t n;
    return numel_of(t->ndim, t->shape, &n) ? (int64_t)n : -1;
}

/* "[64, 16]" — shapes in messages look like PyTorch's. */
static const char *shape_text(int ndim, const int64_t *shape, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < ndim && at < len; d++)
        at += (size_t)snprintf(buf + at, len - at, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (at < len) snprintf(buf + at, len - at, "]");
    return buf;
}

/* Well-formed UTF-8 (no overlong forms, no surrogates, at most U+10FFFF), as
 * the JSON standard and the reference reader require. */
static bool utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        unsigned lo = 0x80, hi = 0xBF;   /* allowed range of the 2nd byte */
        if (c < 0x80) { i++; continue; }
        else if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0) lo = 0xA0;          /* overlong */
            if (c == 0xED) hi = 0x9F;          /* surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0) lo = 0x90;          /* overlong */
            if (c == 0xF4) hi = 0x8F;          /* beyond U+10FFFF */
        } else return false;
        if (n - i < len || s[i + 1] < lo || s[i + 1] > hi) return false;
        for (size_t k = 2; k < len; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) return false;
        i += len;
    }
    return true;
}

/* Sort string pointers and report the first name that occurs twice. */
static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static const char *first_duplicate(const char **names, size_t n)
{
    qsort(names, n, sizeof *names, cmp_str_ptr);
    for (size_t i = 1; i < n; i++)
        if (strcmp(names[i - 1], names[i]) == 0) return names[i];
    return NULL;
}

/* ======================================================================== */
/* Writing                                                                  */
/* ======================================================================== */

/* A growing string for the header JSON. */
typedef struct {
    char *buf;
    size_t len, cap;
    bool oom;
} strbuf;

static void sb_put(strbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->buf, cap);
        if (!p) { b->oom = true; return; }
        b->buf = p;
        b->cap = cap;
    }
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = '\0';
}

static void sb_puts(strbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_u64(strbuf *b, uint64_t v)
{
    char num[24];
    sb_put(b, num, (size_t)snprintf(num, sizeof num, "%" PRIu64, v));
}

/* A JSON string literal: quote, backslash and control characters escaped;
 * UTF-8 passes through unchanged. */
static void sb_json_string(strbuf *b, const char *s)
{
    sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        switch (c) {
        case '"':  sb_puts(b, "\\\""); break;
        case '\\': sb_puts(b, "\\\\"); break;
        case '\b': sb_puts(b, "\\b"); break;
        case '\f': sb_puts(b, "\\f"); break;
        case '\n': sb_puts(b, "\\n"); break;
        case '\r': sb_puts(b, "\\r"); break;
        case '\t': sb_puts(b, "\\t"); break;
        default:
            if (c < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                sb_puts(b, esc);
            } else {
                sb_put(b, s, 1);
            }
        }
    }
    sb_put(b, "\"", 1);
}

/* Refuse what would make a file other readers reject. */
static int check_write_args(const char *path, const ptdp_st_tensor *t, int n,
                            const char *const *keys, const char *const *values, int n_meta,
                            char *msg, size_t msglen)
{
    if (!path || n < 0 || n_meta < 0 || (n > 0 && !t) || (n_meta > 0 && (!keys || !values)))
        return fail(msg, msglen, PTDP_EINVAL, "safetensors write: bad arguments");
    for (int i = 0; i < n; i++) {
        size_t len = strnlen(t[i].name, PTDP_ST_NAME_MAX);
        uint64_t numel;
        if (len == 0 || len == PTDP_ST_NAME_MAX || strcmp(t[i].name, "__metadata__") == 0 ||
            !utf8_valid((const unsigned char *)t[i].name, len))
            return fail(msg, msglen, PTDP_EINVAL,
                        "%s: tensor %d: name must be 1..%d bytes of UTF-8 and not __metadata__",
                        path, i, PTDP_ST_NAME_MAX - 1);
        if (dtype_index(t[i].dtype) < 0)
            return fail(msg, msglen, PTDP_EINVAL, "%s: tensor '%s': unsupported dtype %d",
                        path, t[i].name, (int)t[i].dtype);
        if (t[i].ndim < 0 || t[i].ndim > PTDP_ST_MAX_NDIM ||
            !numel_of(t[i].ndim, t[i].shape, &numel))
            return fail(msg, msglen, PTDP_EINVAL,
                        "%s: tensor '%s': rank must be 0..%d with non-negative dimensions",
                        path, t[i].name, PTDP_ST_MAX_NDIM);
        if (numel > 0 && !t[i].data)
            return fail(msg, msglen, PTDP_EINVAL, "%s: tensor '%s': no data", path, t[i].name);
    }
    for (int i = 0; i < n_meta; i++)
        if (!keys[i] || !values[i] ||
            !utf8_valid((const unsigned char *)keys[i], strlen(keys[i])) ||
            !utf8_valid((const unsigned char *)values[i], strlen(values[i])))
            return fail(msg, msglen, PTDP_EINVAL,
                        "%s: metadata entry %d must be two UTF-8 strings", path, i);

    const char **names = malloc(((size_t)n + (size_t)n_meta + 1) * sizeof *names);
    if (!names) return fail(msg, msglen, PTDP_ENOMEM, "%s: out of host memory", path);
    for (int i = 0; i < n; i++) names[i] = t[i].name;
    const char *dup = first_duplicate(names, (size_t)n);
    int rc = dup ? fail(msg, msglen, PTDP_EINVAL, "%s: tensor name '%s' used twice", path, dup) : 0;
    if (rc == 0) {
        for (int i = 0; i < n_meta; i++) names[i] = keys[i];
        dup = first_duplicate(names, (size_t)n_meta);
        if (dup) rc = fail(msg, msglen, PTDP_EINVAL, "%s: metadata key '%s' used twice", path, dup);
    }
    free(names);
    return rc;
}

/* The order of the data: 8-byte elements first, then 4-byte, then bytes,
 * each group in the caller's order.  The data section starts at a multiple
 * of 8, so every tensor then starts at a multiple of its own element size —
 * what a reader that maps the file and views the bytes in place (torch via
 * safe_open) needs.  The reference writer aligns the same way. */
static void plan_layout(const ptdp_st_tensor *t, int n, int *layout)
{
    static const size_t sizes[] = {8, 4, 2, 1};
    int k = 0;
    for (int s = 0; s < 4; s++)
        for (int i = 0; i < n; i++)
            if (dtypes[dtype_index(t[i].dtype)].size == sizes[s]) layout[k++] = i;
}

/* The header: metadata first (as the reference writer does), then each
 * tensor in layout order with data_offsets that follow one another from 0,
 * then spaces up to a multiple of 8 so the data section starts 8-byte
 * aligned. */
static int build_header(const char *path, const ptdp_st_tensor *tensors, const int *layout, int n,
                        const char *const *keys, const char *const *values, int n_meta,
                        strbuf *hdr, char *msg, size_t msglen)
{
    uint64_t offset = 0;
    sb_puts(hdr, "{");
    if (n_meta > 0) {
        sb_puts(hdr, "\"__metadata__\":{");
        for (int i = 0; i < n_meta; i++) {
            if (i) sb_puts(hdr, ",");
            sb_json_string(hdr, keys[i]);
            sb_puts(hdr, ":");
            sb_json_string(hdr, values[i]);
        }
        sb_puts(hdr, "}");
    }
    for (int k = 0; k < n; k++) {
        const ptdp_st_tensor *t = &tensors[layout[k]];
        uint64_t numel = 0, bytes, end;
        numel_of(t->ndim, t->shape, &numel);   /* checked by check_write_args */
        if (!mul_ok(numel, dtypes[dtype_index(t->dtype)].size, &bytes) ||
            !add_ok(offset, bytes, &end))
            return fail(msg, msglen, PTDP_EINVAL, "%s: tensor '%s' is too large", path, t->name);
        if (n_meta > 0 || k > 0) sb_puts(hdr, ",");
        sb_json_string(hdr, t->name);
        sb_puts(hdr, ":{\"dtype\":\"");
        sb_puts(hdr, dtype_name(t->dtype));
        sb_puts(hdr, "\",\"shape\":[");
        for (int d = 0; d < t->ndim; d++) {
            if (d) sb_puts(hdr, ",");
            sb_u64(hdr, (uint64_t)t->shape[d]);
        }
        sb_puts(hdr, "],\"data_offsets\":[");
        sb_u64(hdr, offset);
        sb_puts(hdr, ",");
        sb_u64(hdr, end);
        sb_puts(hdr, "]}");
        offset = end;
    }
    sb_puts(hdr, "}");
    while (!hdr->oom && hdr->len % 8 != 0) sb_puts(hdr, " ");
    if (hdr->oom) return fail(msg, msglen, PTDP_ENOMEM, "%s: out of host memory", path);
    return 0;
}

/* write(2) until everything is out: it may write less than asked. */
static int write_all(int fd, const void *buf, size_t n)
{
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* A tensor's bytes in little-endian order: as they are on a little-endian
 * host, byte-swapped through a small buffer on a big-endian one. */
static int write_tensor_data(int fd, const ptdp_st_tensor *t)
{
    uint64_t numel = 0;
    numel_of(t->ndim, t->shape, &numel);
    size_t size = dtypes[dtype_index(t->dtype)].size;
    if (numel == 0) return 0;
    if (size == 1 || host_is_little_endian()) return write_all(fd, t->data, (size_t)(numel * size));

    unsigned char chunk[1 << 16];
    const unsigned char *src = t->data;
    for (uint64_t i = 0; i < numel;) {
        size_t k = 0;
        for (; k + size <= sizeof chunk && i < numel; k += size, i++) {
            uint64_t v = 0;   /* the element's value, read in host order */
            if (size == 4) { uint32_t u; memcpy(&u, src + i * size, 4); v = u; }
            else memcpy(&v, src + i * size, 8);
            store_le(chunk + k, v, size);
        }
        if (write_all(fd, chunk, k) != 0) return -1;
    }
    return 0;
}

/* fsync the directory so the rename itself survives a crash.  Not every file
 * system allows it (some return EINVAL): the data is safe either way. */
static void sync_directory_of(const char *path)
{
    char *dir = strdup(path);
    if (!dir) return;
    char *slash = strrchr(dir, '/');
    const char *d = ".";
    if (slash == dir) d = "/";
    else if (slash) { *slash = '\0'; d = dir; }
    int fd = open(d, O_RDONLY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

/* Distinct temporary names per process and per call, so two threads saving
 * at once never collide; O_EXCL refuses any name that exists already. */
static atomic_uint tmp_counter;

/* Temporary file, fsync, rename: the new file appears whole or not at all. */
static int write_atomically(const char *path, const strbuf *hdr, const ptdp_st_tensor *tensors,
                            const int *layout, int n, char *msg, size_t msglen)
{
    size_t tmp_len = strlen(path) + 48;
    char *tmp = malloc(tmp_len), err[128];
    if (!tmp) return fail(msg, msglen, PTDP_ENOMEM, "%s: out of host memory", path);
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(tmp, tmp_len, "%s.tmp.%ld.%u", path, (long)getpid(),
                 atomic_fetch_add(&tmp_counter, 1u));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        int rc = fail(msg, msglen, PTDP_EIO, "%s: cannot create temporary file %s: %s", path,
                      tmp, errno_text(errno, err, sizeof err));
        free(tmp);
        return rc;
    }

    /* prefix, header, data; then make it durable before it takes the name */
    unsigned char prefix[8];
    store_le(prefix, (uint64_t)hdr->len, 8);
    const char *step = "write";
    bool ok = write_all(fd, prefix, 8) == 0 && write_all(fd, hdr->buf, hdr->len) == 0;
    for (int k = 0; ok && k < n; k++) ok = write_tensor_data(fd, &tensors[layout[k]]) == 0;
    if (ok) { step = "fsync"; ok = fsync(fd) == 0; }
    int saved = errno;
    if (close(fd) != 0 && ok) { step = "close"; ok = false; saved = errno; }
    if (ok) { step = "rename to"; ok = rename(tmp, path) == 0; saved = errno; }

    int rc = 0;
    if (ok) {
        sync_directory_of(path);
    } else {
        unlink(tmp);   /* the old file at `path`, if any, was never touched */
        rc = fail(msg, msglen, PTDP_EIO, "%s: %s %s failed: %s", path, step,
                  strcmp(step, "rename to") == 0 ? path : tmp, errno_text(saved, err, sizeof err));
    }
    free(tmp);
    return rc;
}

int ptdp_st_write(const char *path, const ptdp_st_tensor *tensors, int n,
                  const char *const *meta_keys, const char *const *meta_values, int n_meta,
                  char *msg, size_t msglen)
{
    int rc = check_write_args(path, tensors, n, meta_keys, meta_values, n_meta, msg, msglen);
    if (rc != 0) return rc;
    int *layout = malloc(((size_t)n + 1) * sizeof *layout);
    if (!layout) return fail(msg, msglen, PTDP_ENOMEM, "%s: out of host memory", path);
    plan_layout(tensors, n, layout);

    strbuf hdr = {0};
    rc = build_header(path, tensors, layout, n, meta_keys, meta_values, n_meta, &hdr, msg, msglen);
    if (rc == 0) rc = write_atomically(path, &hdr, tensors, layout, n, msg, msglen);
    free(hdr.buf);
    free(layout);
    return rc;
}

/* ======================================================================== */
/* Reading                                                                  */
/* ======================================================================== */

typedef struct {
    ptdp_st_tensor t;
    uint64_t begin, end;     /* data_offsets                          */
    int order;               /* position in the header, to break ties */
} st_entry;

struct ptdp_st_file {
    char *path;
    unsigned char *bytes;    /* the whole file                        */
    size_t size;
    size_t data_start, data_len;
    st_entry *entries;       /* sorted by data offset                 */
    int n, cap;
    const st_entry **by_name;/* sorted by name, for ptdp_st_find      */
    char **meta_keys, **meta_values;
    int n_meta, cap_meta;
};

/* Step 1: the bytes.  The whole file, or PTDP_EIO. */
static int read_whole_file(ptdp_st_file *f, char *msg, size_t msglen)
{
    char err[128];
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(msg, msglen, PTDP_EIO, "%s: cannot open: %s", f->path,
                    errno_text(errno, err, sizeof err));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fail(msg, msglen, PTDP_EIO, "%s: cannot stat: %s", f->path,
                    errno_text(e, err, sizeof err));
    }
    if (!S_ISREG(st.st_mode) || st.st_size < 0 || (uintmax_t)st.st_size > (uintmax_t)SIZE_MAX - 1) {
        close(fd);
        return fail(msg, msglen, PTDP_EIO, "%s: not a regular file", f->path);
    }
    size_t want = (size_t)st.st_size;
    f->bytes = malloc(want + 1);
    if (!f->bytes) {
        close(fd);
        return fail(msg, msglen, PTDP_ENOMEM, "%s: out of host memory reading %zu bytes",
                    f->path, want);
    }
    size_t got = 0;
    while (got < want) {   /* a file that shrinks while we read is just shorter */
        ssize_t r = read(fd, f->bytes + got, want - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            return fail(msg, msglen, PTDP_EIO, "%s: read failed: %s", f->path,
                        errno_text(e, err, sizeof err));
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    close(fd);
    f->size = got;
    return 0;
}

/* Step 2: the JSON header — a small recursive-descent parser for exactly
 * the grammar the format allows:
 *
 *   header   = "{" [ entry { "," entry } ] "}"
 *   entry    = string ":" ( tensor | metadata )    metadata under "__metadata__"
 *   tensor   = "{" "dtype": string, "shape": [ uint… ], "data_offsets": [ uint, uint ] "}"
 *   metadata = "{" [ string ":" string { "," string ":" string } ] "}"
 */
typedef struct {
    const unsigned char *start, *p, *end;
    ptdp_st_file *f;
    char *msg;
    size_t msglen;
} json;

static int json_error(json *j, const char *what)
{
    return fail(j->msg, j->msglen, PTDP_ECORRUPT, "%s: bad header JSON at byte %zu: %s",
                j->f->path, (size_t)(j->p - j->start), what);
}

static void skip_ws(json *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int expect(json *j, char c, const char *what)
{
    skip_ws(j);
    if (j->p >= j->end || *j->p != (unsigned char)c) return json_error(j, what);
    j->p++;
    return 0;
}

static int hex4(json *j, unsigned *out)
{
    unsigned v = 0;
    if (j->end - j->p < 4) return json_error(j, "truncated \\u escape");
    for (int i = 0; i < 4; i++) {
        unsigned c = *j->p++, d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return json_error(j, "bad hex digit in \\u escape");
        v = v * 16 + d;
    }
    *out = v;
    return 0;
}

/* A string, decoded to UTF-8 in a fresh malloc'd buffer (*out, *len).  The
 * decoded form is never longer than the literal, so one allocation of the
 * literal's size suffices.  A NUL (\u0000) would silently cut a C string, so
 * it is refused. */
static int parse_string(json *j, char **out, size_t *len)
{
    if (expect(j, '"', "expected a string") != 0) return PTDP_ECORRUPT;
    const unsigned char *q = j->p;
    while (q < j->end && *q != '"') q += (*q == '\\' && j->end - q > 1) ? 2 : 1;
    if (q >= j->end) return json_error(j, "unterminated string");
    if (!utf8_valid(j->p, (size_t)(q - j->p))) return json_error(j, "string is not valid UTF-8");

    char *s = malloc((size_t)(q - j->p) + 1);
    if (!s) return fail(j->msg, j->msglen, PTDP_ENOMEM, "%s: out of host memory", j->f->path);
    size_t n = 0;
    int rc = 0;
    while (rc == 0 && *j->p != '"') {
        unsigned c = *j->p++;
        if (c < 0x20) { j->p--; rc = json_error(j, "control character in string"); break; }
        if (c != '\\') { s[n++] = (char)c; continue; }
        c = *j->p++;
        switch (c) {
        case '"': case '\\': case '/': s[n++] = (char)c; break;
        case 'b': s[n++] = '\b'; break;
        case 'f': s[n++] = '\f'; break;
        case 'n': s[n++] = '\n'; break;
        case 'r': s[n++] = '\r'; break;
        case 't': s[n++] = '\t'; break;
        case 'u': {
            unsigned cp = 0, lo = 0;
            if ((rc = hex4(j, &cp)) != 0) break;
            if (cp >= 0xDC00 && cp <= 0xDFFF) { rc = json_error(j, "lone low surrogate"); break; }
            if (cp >= 0xD800 && cp <= 0xDBFF) {   /* a UTF-16 pair: \uD83D\uDE00 */
                if (j->end - j->p < 2 || j->p[0] != '\\' || j->p[1] != 'u') {
                    rc = json_error(j, "high surrogate without its low half");
                    break;
                }
                j->p += 2;
                if ((rc = hex4(j, &lo)) != 0) break;
                if (lo < 0xDC00 || lo > 0xDFFF) { rc = json_error(j, "bad surrogate pair"); break; }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (cp == 0) { rc = json_error(j, "NUL character (\\u0000) in string"); break; }
            if (cp < 0x80) s[n++] = (char)cp;
            else if (cp < 0x800) {
                s[n++] = (char)(0xC0 | (cp >> 6));
                s[n++] = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                s[n++] = (char)(0xE0 | (cp >> 12));
                s[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                s[n++] = (char)(0x80 | (cp & 0x3F));
            } else {
                s[n++] = (char)(0xF0 | (cp >> 18));
                s[n++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                s[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                s[n++] = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default: j->p--; rc = json_error(j, "unknown escape in string");
        }
    }
    if (rc != 0) { free(s); return rc; }
    j->p++;   /* the closing quote */
    s[n] = '\0';
    *out = s;
    *len = n;
    return 0;
}

/* A non-negative integer (JSON's grammar: no leading zeros, no sign), as
 * shapes and offsets are; fractions, exponents and overflow are refused. */
static int parse_uint(json *j, uint64_t *out)
{
    skip_ws(j);
    const unsigned char *first = j->p;
    uint64_t v = 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        if (!mul_ok(v, 10, &v) || !add_ok(v, (uint64_t)(*j->p - '0'), &v))
            return json_error(j, "number too large");
        j->p++;
    }
    if (j->p == first) return json_error(j, "expected a non-negative integer");
    if (*first == '0' && j->p - first > 1) return json_error(j, "number with a leading zero");
    if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E'))
        return json_error(j, "expected an integer, found a fraction or exponent");
    *out = v;
    return 0;
}

/* [u, u, …] with at most `max` elements. */
static int parse_uint_array(json *j, uint64_t *vals, int max, int *count, const char *too_many)
{
    int rc = expect(j, '[', "expected '['");
    *count = 0;
    skip_ws(j);
    if (rc == 0 && j->p < j->end && *j->p == ']') { j->p++; return 0; }
    while (rc == 0) {
        if (*count == max) return json_error(j, too_many);
        if ((rc = parse_uint(j, &vals[(*count)++])) != 0) break;
        skip_ws(j);
        if (j->p < j->end && *j->p == ',') { j->p++; continue; }
        rc = expect(j, ']', "expected ',' or ']' in array");
        break;
    }
    return rc;
}

static int add_entry(json *j, st_entry **e)
{
    ptdp_st_file *f = j->f;
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 16;
        st_entry *p = realloc(f->entries, (size_t)cap * sizeof *p);
        if (!p) return fail(j->msg, j->msglen, PTDP_ENOMEM, "%s: out of host memory", f->path);
        f->entries = p;
        f->cap = cap;
    }
    *e = &f->entries[f->n];
    memset(*e, 0, sizeof **e);
    (*e)->order = f->n++;
    return 0;
}

/* One field of a tensor entry, its key already read; `seen` has a bit per
 * field, so each may appear once. */
enum { SEEN_DTYPE = 1, SEEN_SHAPE = 2, SEEN_OFFSETS = 4 };

static int parse_tensor_field(json *j, st_entry *e, const char *key, unsigned *seen)
{
    char what[PTDP_ST_NAME_MAX + 96];
    const char *name = e->t.name;
    uint64_t vals[PTDP_ST_MAX_NDIM];
    int count, rc;

    if (strcmp(key, "dtype") == 0 && !(*seen & SEEN_DTYPE)) {
        char *dt;
        size_t len;
        *seen |= SEEN_DTYPE;
        if ((rc = parse_string(j, &dt, &len)) != 0) return rc;
        int k = 0;
        while (k < N_DTYPES && strcmp(dt, dtypes[k].name) != 0) k++;
        if (k < N_DTYPES) e->t.dtype = dtypes[k].dtype;
        else snprintf(what, sizeof what, "tensor '%s': dtype '%.16s' is not one ptdp reads "
                      "(F32, F64, I32, I64, U8)", name, dt);
        free(dt);
        return k < N_DTYPES ? 0 : json_error(j, what);
    }
    if (strcmp(key, "shape") == 0 && !(*seen & SEEN_SHAPE)) {
        *seen |= SEEN_SHAPE;
        snprintf(what, sizeof what, "tensor '%s': more than %d dimensions", name,
                 PTDP_ST_MAX_NDIM);
        if ((rc = parse_uint_array(j, vals, PTDP_ST_MAX_NDIM, &count, what)) != 0) return rc;
        e->t.ndim = count;
        for (int d = 0; d < count; d++) {
            if (vals[d] > (uint64_t)INT64_MAX) return json_error(j, "dimension too large");
            e->t.shape[d] = (int64_t)vals[d];
        }
        return 0;
    }
    if (strcmp(key, "data_offsets") == 0 && !(*seen & SEEN_OFFSETS)) {
        *seen |= SEEN_OFFSETS;
        snprintf(what, sizeof what, "tensor '%s': data_offsets must be [begin, end]", name);
        if ((rc = parse_uint_array(j, vals, 2, &count, what)) != 0) return rc;
        if (count != 2) return json_error(j, what);
        e->begin = vals[0];
        e->end = vals[1];
        return 0;
    }
    snprintf(what, sizeof what, "tensor '%s': unexpected or repeated field '%.32s'", name, key);
    return json_error(j, what);
}

/* {"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}: fields in any order,
 * each exactly once. */
static int parse_tensor(json *j, const char *name, size_t name_len)
{
    if (name_len >= PTDP_ST_NAME_MAX) return json_error(j, "tensor name longer than 127 bytes");
    st_entry *e = NULL;
    int rc = add_entry(j, &e);
    if (rc != 0) return rc;
    memcpy(e->t.name, name, name_len + 1);

    unsigned seen = 0;
    if ((rc = expect(j, '{', "expected '{' for a tensor")) != 0) return rc;
    for (;;) {
        char *key;
        size_t key_len;
        if ((rc = parse_string(j, &key, &key_len)) != 0) return rc;
        rc = expect(j, ':', "expected ':'");
        if (rc == 0) rc = parse_tensor_field(j, e, key, &seen);
        free(key);
        if (rc != 0) return rc;
        skip_ws(j);
        if (j->p < j->end && *j->p == ',') { j->p++; continue; }
        if ((rc = expect(j, '}', "expected ',' or '}' in a tensor")) != 0) return rc;
        break;
    }
    if (seen != (SEEN_DTYPE | SEEN_SHAPE | SEEN_OFFSETS)) {
        char what[PTDP_ST_NAME_MAX + 48];
        snprintf(what, sizeof what, "tensor '%s' lacks %s", name,
                 !(seen & SEEN_DTYPE) ? "\"dtype\"" : !(seen & SEEN_SHAPE) ? "\"shape\""
                                                                         : "\"data_offsets\"");
        return json_error(j, what);
    }
    return 0;
}

/* {"key":"value", …}: strings only, as the reference reader demands. */
static int parse_metadata(json *j)
{
    ptdp_st_file *f = j->f;
    int rc = expect(j, '{', "__metadata__ must be an object");
    skip_ws(j);
    if (rc == 0 && j->p < j->end && *j->p == '}') { j->p++; return 0; }
    while (rc == 0) {
        char *key = NULL, *value = NULL;
        size_t len;
        if (f->n_meta == f->cap_meta) {
            int cap = f->cap_meta ? 2 * f->cap_meta : 8;
            char **k = realloc(f->meta_keys, (size_t)cap * sizeof *k);
            if (k) f->meta_keys = k;
            char **v = k ? realloc(f->meta_values, (size_t)cap * sizeof *v) : NULL;
            if (v) f->meta_values = v;
            if (!k || !v)
                return fail(j->msg, j->msglen, PTDP_ENOMEM, "%s: out of host memory", f->path);
            f->cap_meta = cap;
        }
        if ((rc = parse_string(j, &key, &len)) != 0) break;
        if ((rc = expect(j, ':', "expected ':'")) == 0) {
            skip_ws(j);
            if (j->p < j->end && *j->p != '"')
                rc = json_error(j, "__metadata__ values must be strings");
            else
                rc = parse_string(j, &value, &len);
        }
        if (rc != 0) { free(key); break; }
        f->meta_keys[f->n_meta] = key;
        f->meta_values[f->n_meta++] = value;
        skip_ws(j);
        if (j->p < j->end && *j->p == ',') { j->p++; continue; }
        rc = expect(j, '}', "expected ',' or '}' in __metadata__");
        break;
    }
    return rc;
}

static int parse_header(ptdp_st_file *f, const unsigned char *hdr, size_t len,
                        char *msg, size_t msglen)
{
    json j = {hdr, hdr, hdr + len, f, msg, msglen};
    bool seen_meta = false;
    int rc = expect(&j, '{', "the header must be a JSON object");
    skip_ws(&j);
    bool empty = rc == 0 && j.p < j.end && *j.p == '}';
    if (empty) j.p++;
    while (rc == 0 && !empty) {
        char *key;
        size_t key_len;
        if ((rc = parse_string(&j, &key, &key_len)) != 0) break;
        if ((rc = expect(&j, ':', "expected ':'")) == 0) {
            if (strcmp(key, "__metadata__") != 0) rc = parse_tensor(&j, key, key_len);
            else if (seen_meta) rc = json_error(&j, "__metadata__ appears twice");
            else { seen_meta = true; rc = parse_metadata(&j); }
        }
        free(key);
        if (rc != 0) break;
        skip_ws(&j);
        if (j.p < j.end && *j.p == ',') { j.p++; continue; }
        rc = expect(&j, '}', "expected ',' or '}' after an entry");
        break;
    }
    skip_ws(&j);   /* the padding */
    if (rc == 0 && j.p != j.end) rc = json_error(&j, "unexpected bytes after the header object");
    return rc;
}

/* Step 3: the layout.  Each tensor's byte range must be exactly numel·size
 * long, and the ranges, sorted, must tile the data section:
 *
 *     0        e0=b1         e1=b2                  e2 = data section length
 *     |  t0    |     t1      |         t2           |
 */
static int cmp_offset(const void *a, const void *b)
{
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

static int cmp_entry_name(const void *a, const void *b)
{
    return strcmp((*(const st_entry *const *)a)->t.name, (*(const st_entry *const *)b)->t.name);
}

static int check_layout(ptdp_st_file *f, char *msg, size_t msglen)
{
    char sh[96];
    for (int i = 0; i < f->n; i++) {
        st_entry *e = &f->entries[i];
        uint64_t numel, bytes;
        bool fits = numel_of(e->t.ndim, e->t.shape, &numel) &&
                    mul_ok(numel, dtypes[dtype_index(e->t.dtype)].size, &bytes);
        if (e->end < e->begin)
            return fail(msg, msglen, PTDP_ECORRUPT, "%s: tensor '%s': data_offsets [%" PRIu64
                        ", %" PRIu64 "] run backwards", f->path, e->t.name, e->begin, e->end);
        if (!fits || e->end - e->begin != bytes)
            return fail(msg, msglen, PTDP_ECORRUPT, "%s: tensor '%s' of dtype %s and shape %s "
                        "needs %s%" PRIu64 " bytes, but data_offsets [%" PRIu64 ", %" PRIu64
                        "] hold %" PRIu64, f->path, e->t.name, dtype_name(e->t.dtype),
                        shape_text(e->t.ndim, e->t.shape, sh, sizeof sh),
                        fits ? "" : "more than ", fits ? bytes : UINT64_MAX,
                        e->begin, e->end, e->end - e->begin);
    }
    if (f->n > 1) qsort(f->entries, (size_t)f->n, sizeof *f->entries, cmp_offset);

    uint64_t expected = 0;   /* where the next tensor must begin */
    for (int i = 0; i < f->n; i++) {
        const st_entry *e = &f->entries[i];
        const char *prev = i ? f->entries[i - 1].t.name : NULL;
        if (e->begin > expected)
            return fail(msg, msglen, PTDP_ECORRUPT, "%s: gap: bytes %" PRIu64 "..%" PRIu64
                        " of the data section (before tensor '%s'%s%s%s) belong to no tensor",
                        f->path, expected, e->begin, e->t.name, prev ? ", after '" : "",
                        prev ? prev : "", prev ? "'" : "");
        if (e->begin < expected)
            return fail(msg, msglen, PTDP_ECORRUPT, "%s: tensors '%s' and '%s' overlap at bytes %"
                        PRIu64 "..%" PRIu64 " of the data section", f->path, prev, e->t.name,
                        e->begin, expected);
        expected = e->end;
    }
    if (expected > f->data_len)
        return fail(msg, msglen, PTDP_ECORRUPT, "%s: truncated: header says %" PRIu64
                    " bytes of data, file has %zu", f->path, expected, f->data_len);
    if (expected < f->data_len)
        return fail(msg, msglen, PTDP_ECORRUPT, "%s: %zu bytes after the last tensor belong to "
                    "no tensor (header says %" PRIu64 " bytes of data, file has %zu)", f->path,
                    (size_t)(f->data_len - expected), expected, f->data_len);

    for (int i = 0; i < f->n; i++)
        f->entries[i].t.data = f->bytes + f->data_start + f->entries[i].begin;

    /* names must be unique: sort an index by name, which ptdp_st_find reuses */
    f->by_name = malloc(((size_t)f->n + 1) * sizeof *f->by_name);
    if (!f->by_name) return fail(msg, msglen, PTDP_ENOMEM, "%s: out of host memory", f->path);
    for (int i = 0; i < f->n; i++) f->by_name[i] = &f->entries[i];
    qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_entry_name);
    for (int i = 1; i < f->n; i++)
        if (strcmp(f->by_name[i - 1]->t.name, f->by_name[i]->t.name) == 0)
            return fail(msg, msglen, PTDP_ECORRUPT, "%s: tensor '%s' appears twice", f->path,
                        f->by_name[i]->t.name);

    const char **keys = malloc(((size_t)f->n_meta + 1) * sizeof *keys);
    if (!keys) return fail(msg, msglen, PTDP_ENOMEM, "%s: out of host memory", f->path);
    for (int i = 0; i < f->n_meta; i++) keys[i] = f->meta_keys[i];
    const char *dup = first_duplicate(keys, (size_t)f->n_meta);
    int rc = dup ? fail(msg, msglen, PTDP_ECORRUPT, "%s: __metadata__ key '%s' appears twice",
                        f->path, dup) : 0;
    free(keys);
    return rc;
}

int ptdp_st_open(const char *path, ptdp_st_file **out, char *msg, size_t msglen)
{
    if (!path || !out) return fail(msg, msglen, PTDP_EINVAL, "safetensors open: bad arguments");
    *out = NULL;
    ptdp_st_file *f = calloc(1, sizeof *f);
    if (f) f->path = strdup(path);
    if (!f || !f->path) {
        free(f);
        return fail(msg, msglen, PTDP_ENOMEM, "%s: out of host memory", path);
    }

    int rc = read_whole_file(f, msg, msglen);
    if (rc == 0 && f->size < 8)
        rc = fail(msg, msglen, PTDP_ECORRUPT, "%s: %s (%zu bytes; a safetensors file starts with "
                  "an 8-byte header length)", path, f->size ? "too short" : "empty file", f->size);
    if (rc == 0) {
        uint64_t hlen = load_le(f->bytes, 8);
        if (hlen > MAX_HEADER_BYTES)
            rc = fail(msg, msglen, PTDP_ECORRUPT, "%s: header length %" PRIu64 " exceeds the "
                      "format's limit of %" PRIu64 " bytes: not a safetensors file?", path, hlen,
                      MAX_HEADER_BYTES);
        else if (hlen > f->size - 8)
            rc = fail(msg, msglen, PTDP_ECORRUPT, "%s: truncated header: the length prefix says %"
                      PRIu64 " bytes of header, but only %zu bytes follow it", path, hlen,
                      f->size - 8);
        else {
            f->data_start = 8 + (size_t)hlen;
            f->data_len = f->size - f->data_start;
            rc = parse_header(f, f->bytes + 8, (size_t)hlen, msg, msglen);
        }
    }
    if (rc == 0) rc = check_layout(f, msg, msglen);
    if (rc != 0) {
        ptdp_st_close(f);
        return rc;
    }
    *out = f;
    return 0;
}

void ptdp_st_close(ptdp_st_file *f)
{
    if (!f) return;
    for (int i = 0; i < f->n_meta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_values[i]);
    }
    free(f->meta_keys);
    free(f->meta_values);
    free(f->by_name);
    free(f->entries);
    free(f->bytes);
    free(f->path);
    free(f);
}

/* ------------------------------------------------------------------------ */
/* Access                                                                    */
/* ------------------------------------------------------------------------ */

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

/* The checks both typed readers share: present, the right shape. */
static int find_checked(const ptdp_st_file *f, const char *name, int ndim, const int64_t *shape,
                        const ptdp_st_tensor **out, char *msg, size_t msglen)
{
    char want[96], have[96];
    if (!f || !name || ndim < 0 || ndim > PTDP_ST_MAX_NDIM || (ndim > 0 && !shape))
        return fail(msg, msglen, PTDP_EINVAL, "safetensors read: bad arguments");
    const ptdp_st_tensor *t = ptdp_st_find(f, name);
    if (!t)
        return fail(msg, msglen, PTDP_ECORRUPT, "%s: no tensor '%s' (expected shape %s)",
                    f->path, name, shape_text(ndim, shape, want, sizeof want));
    bool same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
    if (!same)
        return fail(msg, msglen, PTDP_ECORRUPT, "%s: tensor '%s' has shape %s, expected %s",
                    f->path, name, shape_text(t->ndim, t->shape, have, sizeof have),
                    shape_text(ndim, shape, want, sizeof want));
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

int ptdp_st_read_real(const ptdp_st_file *f, const char *name, int ndim, const int64_t *shape,
                      ptdp_real *dst, char *msg, size_t msglen)
{
    const ptdp_st_tensor *t;
    int rc = find_checked(f, name, ndim, shape, &t, msg, msglen);
    if (rc != 0) return rc;
    if (t->dtype != PTDP_F32 && t->dtype != PTDP_F64)
        return fail(msg, msglen, PTDP_ECORRUPT, "%s: tensor '%s' has dtype %s, expected F32 or F64",
                    f->path, name, dtype_name(t->dtype));
    const unsigned char *src = t->data;
    int64_t n = ptdp_st_numel(t);
    for (int64_t i = 0; i < n; i++) {
        if (t->dtype == PTDP_F32) {
            uint32_t bits = (uint32_t)load_le(src + 4 * i, 4);
            float v;
            memcpy(&v, &bits, 4);
            dst[i] = (ptdp_real)v;
        } else {
            uint64_t bits = load_le(src + 8 * i, 8);
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
        return fail(msg, msglen, PTDP_ECORRUPT, "%s: tensor '%s' has dtype %s, expected I64",
                    f->path, name, dtype_name(t->dtype));
    const unsigned char *src = t->data;
    int64_t n = ptdp_st_numel(t);
    for (int64_t i = 0; i < n; i++) {
        uint64_t bits = load_le(src + 8 * i, 8);
        memcpy(&dst[i], &bits, 8);   /* two's complement, without a signed conversion */
    }
    return 0;
}
