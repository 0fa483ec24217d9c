/*
 * safetensors_open.c — opening a checkpoint we do not trust.
 *
 * A file handed to ptdp_st_open may be truncated, bit-flipped or not a
 * checkpoint at all.  So nothing is believed until it is checked, and each
 * check uses only what earlier checks established:
 *
 *     1. the bytes      the whole file in memory (or PTDP_EIO)
 *     2. the prefix     N = u64 at byte 0; 8 + N ≤ file size, N ≤ 100 MiB
 *     3. the header     bytes 8 .. 8+N are UTF-8 JSON of exactly the format's
 *                       grammar: tensors {dtype, shape, data_offsets} and an
 *                       optional __metadata__ map of strings
 *     4. the sizes      each tensor's range holds numel·size bytes, computed
 *                       without overflow
 *     5. the tiling     the ranges, sorted, cover the data section exactly:
 *
 *                           0        e0=b1         e1=b2           e2 = data length
 *                           |  t0    |     t1      |       t2      |
 *
 *     6. the names      unique tensor names, unique metadata keys
 *
 * Only then does any tensor's `data` point into the file, and every
 * violation is PTDP_ECORRUPT with a message naming the file and what is
 * wrong — never a crash, never an index past the bytes really read.
 */
#include "io/json_read.h"
#include "io/safetensors_impl.h"

#include "ptdp/error.h"
#include "ptdp/file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The reference implementation refuses headers above 100 MB; so do we, so a
 * garbage length prefix never makes us parse (or allocate for) a monster. */
#define MAX_HEADER_BYTES ((uint64_t)100 << 20)

/* ------------------------------------------------------------------------ */
/* Step 1: the bytes.  The whole file, or PTDP_EIO.                          */
/* ------------------------------------------------------------------------ */

static int read_whole_file(ptdp_st_file *f, char *msg, size_t msglen)
{
    /* never blocks: a FIFO or a device is refused before any read (file.h) */
    unsigned char *bytes;
    size_t len;
    int rc = ptdp_read_file(f->path, &bytes, &len, msg, msglen);
    if (rc != 0)
        return rc;
    f->bytes = bytes;
    f->size = len;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Step 2: the length prefix, which splits the file into header and data     */
/* ------------------------------------------------------------------------ */

static int read_prefix(ptdp_st_file *f, size_t *header_len, char *msg, size_t msglen)
{
    if (f->size < 8)
        return ptdp_st_fail(msg, msglen, PTDP_ECORRUPT, "%s: %s (%zu bytes; a safetensors file "
                            "starts with an 8-byte header length)", f->path,
                            f->size ? "too short" : "empty file", f->size);
    uint64_t hlen = ptdp_st_load_le(f->bytes, 8);
    if (hlen > MAX_HEADER_BYTES)
        return ptdp_st_fail(msg, msglen, PTDP_ECORRUPT, "%s: header length %" PRIu64 " exceeds "
                            "the format's limit of %" PRIu64 " bytes: not a safetensors file?",
                            f->path, hlen, MAX_HEADER_BYTES);
    if (hlen > f->size - 8)
        return ptdp_st_fail(msg, msglen, PTDP_ECORRUPT, "%s: truncated header: the length "
                            "prefix says %" PRIu64 " bytes of header, but only %zu bytes follow "
                            "it", f->path, hlen, f->size - 8);
    *header_len = (size_t)hlen;
    f->data_start = 8 + (size_t)hlen;
    f->data_len = f->size - f->data_start;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Step 3: the header JSON                                                   */
/* ------------------------------------------------------------------------ */

/* json.h reads the pieces; these functions know the grammar of the format:
 *
 *   header   = "{" [ entry { "," entry } ] "}"
 *   entry    = string ":" ( tensor | metadata )    metadata under "__metadata__"
 *   tensor   = "{" "dtype": string, "shape": [ uint… ], "data_offsets": [ uint, uint ] "}"
 *   metadata = "{" [ string ":" string { "," string ":" string } ] "}"
 *
 * Each tensor becomes an entry of the file, in header order. */

static int add_entry(ptdp_json *j, ptdp_st_file *f, ptdp_st_entry **e)
{
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 16;
        ptdp_st_entry *p = realloc(f->entries, (size_t)cap * sizeof *p);
        if (!p)
            return ptdp_st_fail(j->msg, j->msglen, PTDP_ENOMEM, "%s: out of host memory",
                                f->path);
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

static int parse_tensor_field(ptdp_json *j, ptdp_st_entry *e, const char *key, unsigned *seen)
{
    char what[PTDP_ST_NAME_MAX + 160];
    const char *name = e->t.name;
    uint64_t vals[PTDP_ST_MAX_NDIM];
    int count, rc;

    if (strcmp(key, "dtype") == 0 && !(*seen & SEEN_DTYPE)) {
        char *dt;
        size_t len;
        *seen |= SEEN_DTYPE;
        if ((rc = ptdp_json_string(j, &dt, &len)) != 0) return rc;
        bool known = ptdp_st_dtype_parse(dt, &e->t.dtype);
        if (!known)
            snprintf(what, sizeof what, "tensor '%s': dtype '%.16s' is not one ptdp reads "
                     "(F32, F64, I32, I64, U8, BF16, F8_E4M3, F8_E5M2)", name, dt);
        free(dt);
        return known ? 0 : ptdp_json_error(j, what);
    }
    if (strcmp(key, "shape") == 0 && !(*seen & SEEN_SHAPE)) {
        *seen |= SEEN_SHAPE;
        snprintf(what, sizeof what, "tensor '%s': more than %d dimensions", name,
                 PTDP_ST_MAX_NDIM);
        if ((rc = ptdp_json_uint_array(j, vals, PTDP_ST_MAX_NDIM, &count, what)) != 0) return rc;
        e->t.ndim = count;
        for (int d = 0; d < count; d++) {
            if (vals[d] > (uint64_t)INT64_MAX) return ptdp_json_error(j, "dimension too large");
            e->t.shape[d] = (int64_t)vals[d];
        }
        return 0;
    }
    if (strcmp(key, "data_offsets") == 0 && !(*seen & SEEN_OFFSETS)) {
        *seen |= SEEN_OFFSETS;
        snprintf(what, sizeof what, "tensor '%s': data_offsets must be [begin, end]", name);
        if ((rc = ptdp_json_uint_array(j, vals, 2, &count, what)) != 0) return rc;
        if (count != 2) return ptdp_json_error(j, what);
        e->begin = vals[0];
        e->end = vals[1];
        return 0;
    }
    snprintf(what, sizeof what, "tensor '%s': unexpected or repeated field '%.32s'", name, key);
    return ptdp_json_error(j, what);
}

/* {"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}: fields in any order,
 * each exactly once (so not even an empty object). */
static int parse_tensor(ptdp_json *j, ptdp_st_file *f, const char *name, size_t name_len)
{
    if (name_len >= PTDP_ST_NAME_MAX)
        return ptdp_json_error(j, "tensor name longer than 127 bytes");
    ptdp_st_entry *e = NULL;
    int rc = add_entry(j, f, &e);
    if (rc != 0) return rc;
    memcpy(e->t.name, name, name_len + 1);

    unsigned seen = 0;
    bool more = true;
    rc = ptdp_json_expect(j, '{', "expected '{' for a tensor");
    while (rc == 0 && more) {
        char *key;
        size_t key_len;
        if ((rc = ptdp_json_key(j, &key, &key_len)) != 0) break;
        rc = parse_tensor_field(j, e, key, &seen);
        free(key);
        if (rc == 0) rc = ptdp_json_next(j, '}', &more, "expected ',' or '}' in a tensor");
    }
    if (rc == 0 && seen != (SEEN_DTYPE | SEEN_SHAPE | SEEN_OFFSETS)) {
        char what[PTDP_ST_NAME_MAX + 48];
        snprintf(what, sizeof what, "tensor '%s' lacks %s", name,
                 !(seen & SEEN_DTYPE) ? "\"dtype\"" : !(seen & SEEN_SHAPE) ? "\"shape\""
                                                                         : "\"data_offsets\"");
        rc = ptdp_json_error(j, what);
    }
    return rc;
}

/* {"key":"value", …}: strings only, as the reference reader demands. */
static int parse_metadata(ptdp_json *j, ptdp_st_file *f)
{
    int rc = ptdp_json_expect(j, '{', "__metadata__ must be an object");
    bool more = rc == 0 && !ptdp_json_accept(j, '}');
    while (rc == 0 && more) {
        char *key = NULL, *value = NULL;
        size_t len;
        if (f->n_meta == f->cap_meta) {
            int cap = f->cap_meta ? 2 * f->cap_meta : 8;
            char **k = realloc(f->meta_keys, (size_t)cap * sizeof *k);
            if (k) f->meta_keys = k;
            char **v = k ? realloc(f->meta_values, (size_t)cap * sizeof *v) : NULL;
            if (v) f->meta_values = v;
            if (!k || !v)
                return ptdp_st_fail(j->msg, j->msglen, PTDP_ENOMEM, "%s: out of host memory",
                                    f->path);
            f->cap_meta = cap;
        }
        if ((rc = ptdp_json_key(j, &key, &len)) != 0) break;
        int c = ptdp_json_peek(j);
        if (c >= 0 && c != '"')
            rc = ptdp_json_error(j, "__metadata__ values must be strings");
        else
            rc = ptdp_json_string(j, &value, &len);
        if (rc != 0) { free(key); break; }
        f->meta_keys[f->n_meta] = key;
        f->meta_values[f->n_meta++] = value;
        rc = ptdp_json_next(j, '}', &more, "expected ',' or '}' in __metadata__");
    }
    return rc;
}

static int parse_header(ptdp_st_file *f, size_t len, char *msg, size_t msglen)
{
    ptdp_json j;
    ptdp_json_init(&j, f->bytes + 8, len, f->path, "header JSON", msg, msglen);
    bool seen_meta = false;
    int rc = ptdp_json_expect(&j, '{', "the header must be a JSON object");
    bool more = rc == 0 && !ptdp_json_accept(&j, '}');
    while (rc == 0 && more) {
        char *key;
        size_t key_len;
        if ((rc = ptdp_json_key(&j, &key, &key_len)) != 0) break;
        if (strcmp(key, "__metadata__") != 0) rc = parse_tensor(&j, f, key, key_len);
        else if (seen_meta) rc = ptdp_json_error(&j, "__metadata__ appears twice");
        else { seen_meta = true; rc = parse_metadata(&j, f); }
        free(key);
        if (rc == 0) rc = ptdp_json_next(&j, '}', &more, "expected ',' or '}' after an entry");
    }
    if (rc == 0) rc = ptdp_json_end(&j, "unexpected bytes after the header object");
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Step 4: the sizes.  end − begin must be exactly numel·size.              */
/* ------------------------------------------------------------------------ */

static int check_sizes(const ptdp_st_file *f, char *msg, size_t msglen)
{
    char sh[96];
    for (int i = 0; i < f->n; i++) {
        const ptdp_st_entry *e = &f->entries[i];
        uint64_t numel, bytes;
        bool fits = ptdp_st_numel_of(e->t.ndim, e->t.shape, &numel) &&
                    ptdp_st_mul_ok(numel, ptdp_st_dtype_size(e->t.dtype), &bytes);
        if (e->end < e->begin)
            return ptdp_st_fail(msg, msglen, PTDP_ECORRUPT, "%s: tensor '%s': data_offsets [%"
                                PRIu64 ", %" PRIu64 "] run backwards", f->path, e->t.name,
                                e->begin, e->end);
        if (!fits || e->end - e->begin != bytes)
            return ptdp_st_fail(msg, msglen, PTDP_ECORRUPT, "%s: tensor '%s' of dtype %s and "
                                "shape %s needs %s%" PRIu64 " bytes, but data_offsets [%" PRIu64
                                ", %" PRIu64 "] hold %" PRIu64, f->path, e->t.name,
                                ptdp_st_dtype_name(e->t.dtype),
                                ptdp_st_shape_text(e->t.ndim, e->t.shape, sh, sizeof sh),
                                fits ? "" : "more than ", fits ? bytes : UINT64_MAX,
                                e->begin, e->end, e->end - e->begin);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Step 5: the tiling.  Sorted by offset, each range begins where the last  */
/* ended, and the last ends at the end of the file.                         */
/* ------------------------------------------------------------------------ */

static int cmp_offset(const void *a, const void *b)
{
    const ptdp_st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

static int check_tiling(ptdp_st_file *f, char *msg, size_t msglen)
{
    if (f->n > 1) qsort(f->entries, (size_t)f->n, sizeof *f->entries, cmp_offset);

    uint64_t expected = 0;   /* where the next tensor must begin */
    for (int i = 0; i < f->n; i++) {
        const ptdp_st_entry *e = &f->entries[i];
        const char *prev = i ? f->entries[i - 1].t.name : NULL;
        if (e->begin > expected)
            return ptdp_st_fail(msg, msglen, PTDP_ECORRUPT, "%s: gap: bytes %" PRIu64 "..%"
                                PRIu64 " of the data section (before tensor '%s'%s%s%s) belong "
                                "to no tensor", f->path, expected, e->begin, e->t.name,
                                prev ? ", after '" : "", prev ? prev : "", prev ? "'" : "");
        if (e->begin < expected)
            return ptdp_st_fail(msg, msglen, PTDP_ECORRUPT, "%s: tensors '%s' and '%s' overlap "
                                "at bytes %" PRIu64 "..%" PRIu64 " of the data section",
                                f->path, prev, e->t.name, e->begin, expected);
        expected = e->end;
    }
    if (expected > f->data_len)
        return ptdp_st_fail(msg, msglen, PTDP_ECORRUPT, "%s: truncated: header says %" PRIu64
                            " bytes of data, file has %zu", f->path, expected, f->data_len);
    if (expected < f->data_len)
        return ptdp_st_fail(msg, msglen, PTDP_ECORRUPT, "%s: %zu bytes after the last tensor "
                            "belong to no tensor (header says %" PRIu64 " bytes of data, file "
                            "has %zu)", f->path, (size_t)(f->data_len - expected), expected,
                            f->data_len);

    for (int i = 0; i < f->n; i++)   /* now, and only now, the ranges are known good */
        f->entries[i].t.data = f->bytes + f->data_start + f->entries[i].begin;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Step 6: the names.  A name index sorted for ptdp_st_find shows duplicates */
/* side by side.                                                             */
/* ------------------------------------------------------------------------ */

static int cmp_entry_name(const void *a, const void *b)
{
    return strcmp((*(const ptdp_st_entry *const *)a)->t.name,
                  (*(const ptdp_st_entry *const *)b)->t.name);
}

static int check_names(ptdp_st_file *f, char *msg, size_t msglen)
{
    f->by_name = malloc(((size_t)f->n + 1) * sizeof *f->by_name);
    if (!f->by_name)
        return ptdp_st_fail(msg, msglen, PTDP_ENOMEM, "%s: out of host memory", f->path);
    for (int i = 0; i < f->n; i++) f->by_name[i] = &f->entries[i];
    qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_entry_name);
    for (int i = 1; i < f->n; i++)
        if (strcmp(f->by_name[i - 1]->t.name, f->by_name[i]->t.name) == 0)
            return ptdp_st_fail(msg, msglen, PTDP_ECORRUPT, "%s: tensor '%s' appears twice",
                                f->path, f->by_name[i]->t.name);

    const char **keys = malloc(((size_t)f->n_meta + 1) * sizeof *keys);
    if (!keys) return ptdp_st_fail(msg, msglen, PTDP_ENOMEM, "%s: out of host memory", f->path);
    for (int i = 0; i < f->n_meta; i++) keys[i] = f->meta_keys[i];
    const char *dup = ptdp_st_first_duplicate(keys, (size_t)f->n_meta);
    int rc = dup ? ptdp_st_fail(msg, msglen, PTDP_ECORRUPT,
                                "%s: __metadata__ key '%s' appears twice", f->path, dup) : 0;
    free(keys);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The six steps, in order                                                   */
/* ------------------------------------------------------------------------ */

int ptdp_st_open(const char *path, ptdp_st_file **out, char *msg, size_t msglen)
{
    if (!path || !out)
        return ptdp_st_fail(msg, msglen, PTDP_EINVAL, "safetensors open: bad arguments");
    *out = NULL;
    ptdp_st_file *f = calloc(1, sizeof *f);
    if (f) f->path = strdup(path);
    if (!f || !f->path) {
        free(f);
        return ptdp_st_fail(msg, msglen, PTDP_ENOMEM, "%s: out of host memory", path);
    }

    size_t header_len = 0;
    int rc = read_whole_file(f, msg, msglen);
    if (rc == 0) rc = read_prefix(f, &header_len, msg, msglen);
    if (rc == 0) rc = parse_header(f, header_len, msg, msglen);
    if (rc == 0) rc = check_sizes(f, msg, msglen);
    if (rc == 0) rc = check_tiling(f, msg, msglen);
    if (rc == 0) rc = check_names(f, msg, msglen);
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
