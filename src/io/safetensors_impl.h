/*
 * safetensors_impl.h — what the safetensors writer and reader share (private
 * to the library).
 *
 * The format lives in three files, read in this order:
 *
 *     safetensors.c        the vocabulary (dtypes, sizes, messages) and typed
 *                          reads from a file that has been opened
 *     safetensors_write.c  header JSON, data layout, the atomic write
 *     safetensors_open.c   reading a file we do not trust: length prefix,
 *                          header JSON (through json.h), the data layout
 *
 * This header holds the words all three use: element sizes and names,
 * little-endian bytes, arithmetic that refuses to wrap, and the open file.
 */
#ifndef PTDP_SAFETENSORS_IMPL_H
#define PTDP_SAFETENSORS_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptdp/safetensors.h"

/* ------------------------------------------------------------------------ */
/* Dtypes, as the format spells them: "F32", "F64", "I32", "I64", "U8"       */
/* ------------------------------------------------------------------------ */

size_t      ptdp_st_dtype_size(ptdp_dtype t);   /* bytes per element; 0 if unknown */
const char *ptdp_st_dtype_name(ptdp_dtype t);   /* "F32", or "?" if unknown        */
bool        ptdp_st_dtype_parse(const char *name, ptdp_dtype *out);

/* ------------------------------------------------------------------------ */
/* Little-endian bytes, whatever the host                                    */
/* ------------------------------------------------------------------------ */

/* Assembling a value from its bytes, least significant first, is correct on
 * any host; on a little-endian one the compiler turns it into a plain load. */
static inline uint64_t ptdp_st_load_le(const unsigned char *p, size_t size)
{
    uint64_t v = 0;
    for (size_t i = 0; i < size; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static inline void ptdp_st_store_le(unsigned char *p, uint64_t v, size_t size)
{
    for (size_t i = 0; i < size; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* ------------------------------------------------------------------------ */
/* Checked arithmetic: every size in a file is attacker-controlled           */
/* ------------------------------------------------------------------------ */

/* a·b and a+b, refusing to wrap. */
static inline bool ptdp_st_mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a) return false;
    *out = a * b;
    return true;
}

static inline bool ptdp_st_add_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    if (b > UINT64_MAX - a) return false;
    *out = a + b;
    return true;
}

/* numel = d0·d1·…·d(ndim-1), 1 for a scalar; false if a dimension is
 * negative or the product exceeds INT64_MAX. */
bool ptdp_st_numel_of(int ndim, const int64_t *shape, uint64_t *numel);

/* ------------------------------------------------------------------------ */
/* Messages                                                                  */
/* ------------------------------------------------------------------------ */

/* Format the message into msg (if there is one) and return `code`. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
int ptdp_st_fail(char *msg, size_t msglen, int code, const char *fmt, ...);

/* The text of an errno value, thread-safely. */
const char *ptdp_st_errno_text(int err, char *buf, size_t len);

/* "[64, 16]" — shapes in messages look like PyTorch's. */
const char *ptdp_st_shape_text(int ndim, const int64_t *shape, char *buf, size_t len);

/* Sort the n names and return the first that occurs twice, or NULL. */
const char *ptdp_st_first_duplicate(const char **names, size_t n);

/* ------------------------------------------------------------------------ */
/* An open file                                                              */
/* ------------------------------------------------------------------------ */

typedef struct {
    ptdp_st_tensor t;
    uint64_t begin, end;     /* data_offsets                          */
    int order;               /* position in the header, to break ties */
} ptdp_st_entry;

struct ptdp_st_file {
    char *path;
    unsigned char *bytes;    /* the whole file                        */
    size_t size;
    size_t data_start, data_len;
    ptdp_st_entry *entries;  /* sorted by data offset                 */
    int n, cap;
    const ptdp_st_entry **by_name;   /* sorted by name, for ptdp_st_find */
    char **meta_keys, **meta_values;
    int n_meta, cap_meta;
};

#endif
