/*
 * safetensors_write.c — writing a checkpoint so that a crash cannot break it.
 *
 *     tensors, metadata ─► header JSON ─► ckpt.st.tmp.<pid>.<n> ─► fsync ─► rename ─► ckpt.st
 *                          (data layout)   prefix, header, data                (atomic)
 *
 * Four steps, in the order they run:
 *
 *   1. check the arguments: refuse anything another reader would reject
 *      (names that are empty, too long, not UTF-8, duplicated or reserved);
 *   2. plan the layout: 8-byte elements first, then 4-, 2-, 1-byte, so
 *      each tensor starts at a multiple of its element size;
 *   3. build the header: data_offsets that tile the data section from 0,
 *      the JSON padded with spaces to a multiple of 8;
 *   4. write atomically (file.h): a fresh temporary file in the same
 *      directory, all bytes, fsync, rename over the target, fsync of the
 *      directory.
 *
 * rename(2) replaces a name in one step, so a reader — or a restart after a
 * crash — sees the old checkpoint or the new one, never a mix.  Any failure
 * removes the temporary file and leaves the old checkpoint untouched.
 */
#include "io/json_read.h"
#include "io/safetensors_impl.h"

#include "ptdp/error.h"
#include "ptdp/file.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Step 1: the arguments.  Refuse what would make a file other readers reject. */
static int check_write_args(const char *path, const ptdp_st_tensor *t, int n,
                            const char *const *keys, const char *const *values, int n_meta,
                            char *msg, size_t msglen)
{
    if (!path || n < 0 || n_meta < 0 || (n > 0 && !t) || (n_meta > 0 && (!keys || !values)))
        return ptdp_st_fail(msg, msglen, PTDP_EINVAL, "safetensors write: bad arguments");
    for (int i = 0; i < n; i++) {
        size_t len = strnlen(t[i].name, PTDP_ST_NAME_MAX);
        uint64_t numel;
        if (len == 0 || len == PTDP_ST_NAME_MAX || strcmp(t[i].name, "__metadata__") == 0 ||
            !ptdp_utf8_valid((const unsigned char *)t[i].name, len))
            return ptdp_st_fail(msg, msglen, PTDP_EINVAL,
                                "%s: tensor %d: name must be 1..%d bytes of UTF-8 and not "
                                "__metadata__", path, i, PTDP_ST_NAME_MAX - 1);
        if (ptdp_st_dtype_size(t[i].dtype) == 0)
            return ptdp_st_fail(msg, msglen, PTDP_EINVAL,
                                "%s: tensor '%s': unsupported dtype %d", path, t[i].name,
                                (int)t[i].dtype);
        if (t[i].ndim < 0 || t[i].ndim > PTDP_ST_MAX_NDIM ||
            !ptdp_st_numel_of(t[i].ndim, t[i].shape, &numel))
            return ptdp_st_fail(msg, msglen, PTDP_EINVAL,
                                "%s: tensor '%s': rank must be 0..%d with non-negative dimensions",
                                path, t[i].name, PTDP_ST_MAX_NDIM);
        if (numel > 0 && !t[i].data)
            return ptdp_st_fail(msg, msglen, PTDP_EINVAL, "%s: tensor '%s': no data", path,
                                t[i].name);
    }
    for (int i = 0; i < n_meta; i++)
        if (!keys[i] || !values[i] ||
            !ptdp_utf8_valid((const unsigned char *)keys[i], strlen(keys[i])) ||
            !ptdp_utf8_valid((const unsigned char *)values[i], strlen(values[i])))
            return ptdp_st_fail(msg, msglen, PTDP_EINVAL,
                                "%s: metadata entry %d must be two UTF-8 strings", path, i);

    const char **names = malloc(((size_t)n + (size_t)n_meta + 1) * sizeof *names);
    if (!names) return ptdp_st_fail(msg, msglen, PTDP_ENOMEM, "%s: out of host memory", path);
    for (int i = 0; i < n; i++) names[i] = t[i].name;
    const char *dup = ptdp_st_first_duplicate(names, (size_t)n);
    int rc = dup ? ptdp_st_fail(msg, msglen, PTDP_EINVAL, "%s: tensor name '%s' used twice",
                                path, dup) : 0;
    if (rc == 0) {
        for (int i = 0; i < n_meta; i++) names[i] = keys[i];
        dup = ptdp_st_first_duplicate(names, (size_t)n_meta);
        if (dup)
            rc = ptdp_st_fail(msg, msglen, PTDP_EINVAL, "%s: metadata key '%s' used twice",
                              path, dup);
    }
    free(names);
    return rc;
}

/* Step 2: the order of the data: 8-byte elements first, then 4-, 2-, 1-byte,
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
            if (ptdp_st_dtype_size(t[i].dtype) == sizes[s]) layout[k++] = i;
}

/* Step 3: the header JSON, built in a growing string. */
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
        ptdp_st_numel_of(t->ndim, t->shape, &numel);   /* checked by check_write_args */
        if (!ptdp_st_mul_ok(numel, ptdp_st_dtype_size(t->dtype), &bytes) ||
            !ptdp_st_add_ok(offset, bytes, &end))
            return ptdp_st_fail(msg, msglen, PTDP_EINVAL, "%s: tensor '%s' is too large",
                                path, t->name);
        if (n_meta > 0 || k > 0) sb_puts(hdr, ",");
        sb_json_string(hdr, t->name);
        sb_puts(hdr, ":{\"dtype\":\"");
        sb_puts(hdr, ptdp_st_dtype_name(t->dtype));
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
    if (hdr->oom)
        return ptdp_st_fail(msg, msglen, PTDP_ENOMEM, "%s: out of host memory", path);
    return 0;
}

/* Step 4: the bytes, into a temporary file that takes the name when whole. */
static bool host_is_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

/* A tensor's bytes in little-endian order: as they are on a little-endian
 * host, byte-swapped through a small buffer on a big-endian one. */
static int write_tensor_data(ptdp_atomic_file *f, const ptdp_st_tensor *t)
{
    uint64_t numel = 0;
    ptdp_st_numel_of(t->ndim, t->shape, &numel);
    size_t size = ptdp_st_dtype_size(t->dtype);
    if (numel == 0) return 0;
    if (size == 1 || host_is_little_endian()) return ptdp_atomic_write(f, t->data, (size_t)(numel * size));

    unsigned char staged[1 << 16];
    const unsigned char *src = t->data;
    for (uint64_t i = 0; i < numel;) {
        size_t k = 0;
        for (; k + size <= sizeof staged && i < numel; k += size, i++) {
            uint64_t v = 0;   /* the element's value, read in host order */
            if (size == 2) { uint16_t u; memcpy(&u, src + i * size, 2); v = u; }
            else if (size == 4) { uint32_t u; memcpy(&u, src + i * size, 4); v = u; }
            else memcpy(&v, src + i * size, 8);
            ptdp_st_store_le(staged + k, v, size);
        }
        if (ptdp_atomic_write(f, staged, k) != 0) return PTDP_EIO;
    }
    return 0;
}

/* Temporary file, fsync, rename (file.h): the new file appears whole or not
 * at all. */
static int write_atomically(const char *path, const strbuf *hdr, const ptdp_st_tensor *tensors,
                            const int *layout, int n, char *msg, size_t msglen)
{
    ptdp_atomic_file f;
    int rc = ptdp_atomic_open(&f, path, msg, msglen);
    if (rc != 0) return rc;
    /* prefix, header, data; a failure stops the writing, and commit reports it */
    unsigned char prefix[8];
    ptdp_st_store_le(prefix, (uint64_t)hdr->len, 8);
    bool ok = ptdp_atomic_write(&f, prefix, 8) == 0 && ptdp_atomic_write(&f, hdr->buf, hdr->len) == 0;
    for (int k = 0; ok && k < n; k++) ok = write_tensor_data(&f, &tensors[layout[k]]) == 0;
    return ptdp_atomic_commit(&f, msg, msglen);
}

/* The four steps, in order. */
int ptdp_st_write(const char *path, const ptdp_st_tensor *tensors, int n,
                  const char *const *meta_keys, const char *const *meta_values, int n_meta,
                  char *msg, size_t msglen)
{
    int rc = check_write_args(path, tensors, n, meta_keys, meta_values, n_meta, msg, msglen);
    if (rc != 0) return rc;
    int *layout = malloc(((size_t)n + 1) * sizeof *layout);
    if (!layout) return ptdp_st_fail(msg, msglen, PTDP_ENOMEM, "%s: out of host memory", path);
    plan_layout(tensors, n, layout);

    strbuf hdr = {0};
    rc = build_header(path, tensors, layout, n, meta_keys, meta_values, n_meta, &hdr, msg,
                      msglen);
    if (rc == 0) rc = write_atomically(path, &hdr, tensors, layout, n, msg, msglen);
    free(hdr.buf);
    free(layout);
    return rc;
}
