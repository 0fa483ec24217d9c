/*
 * safetensors.h — checkpoints that numpy, PyTorch and the safetensors library can read.
 *
 * A safetensors file is three regions, nothing else:
 *
 *     +----------+---------------------------------+--------------------------------+
 *     | N (u64,  | N bytes of JSON, padded with     | data section: every tensor's   |
 *     | little-  | spaces to a multiple of 8        | raw little-endian bytes, back  |
 *     | endian)  |                                  | to back, no gaps, no overlaps  |
 *     +----------+---------------------------------+--------------------------------+
 *      0        8                               8+N                          file end
 *
 *     {"__metadata__":{"seed":"1"},
 *      "in.weight":{"dtype":"F32","shape":[64,16],"data_offsets":[0,4096]},
 *      "in.bias":  {"dtype":"F32","shape":[64],   "data_offsets":[4096,4352]}}
 *
 * data_offsets are [begin, end) byte offsets relative to the start of the data
 * section, and end - begin = numel(shape) * sizeof(dtype).  A shape of [] is a
 * scalar: one element.  __metadata__ is an optional map of string to string.
 *
 * The writer is atomic (temporary file in the same directory, fsync, rename):
 * a crash mid-write leaves the previous checkpoint whole.  The reader trusts
 * nothing: it validates the whole file before it hands out a single tensor,
 * and every violation is PTDP_ECORRUPT with a message naming the file and
 * what is wrong — never a crash.
 */
#ifndef PTDP_SAFETENSORS_H
#define PTDP_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "types.h"

#define PTDP_ST_MAX_NDIM 4      /* ranks 0..4 (x of --dump-data is [steps, B, d_in]) */
#define PTDP_ST_NAME_MAX 128    /* a tensor name is at most 127 bytes               */

typedef struct {
    char name[PTDP_ST_NAME_MAX];
    ptdp_dtype dtype;           /* PTDP_F32, PTDP_F64, PTDP_I32, PTDP_I64, PTDP_U8, PTDP_BF16,
                                   or FP8 codes: PTDP_F8_E4M3, PTDP_F8_E5M2 (fp8.h) */
    int ndim;                   /* 0 (a scalar) .. PTDP_ST_MAX_NDIM                  */
    int64_t shape[PTDP_ST_MAX_NDIM];
    /* Writer: the caller's data in host memory, native layout, row-major.
     * Reader: the tensor's raw bytes inside the file image — little-endian
     * and possibly unaligned, so read it with ptdp_st_read_real / _i64
     * rather than through a cast pointer. */
    const void *data;
} ptdp_st_tensor;

/* Elements in a tensor: the product of its shape (1 for a scalar). */
int64_t ptdp_st_numel(const ptdp_st_tensor *t);

/* Write n tensors and n_meta key/value string pairs as __metadata__ (keys
 * may be NULL when n_meta is 0) to `path` atomically: a temporary file in the
 * same directory, fsync, rename, then fsync of the directory.  The data is
 * laid out 8-byte types first, then 4-, 2- (BF16) and 1-byte (U8, FP8), each
 * group in the order given, so every tensor starts at a multiple of its element size (as
 * the reference writer does; readers that map the file need it).
 * A bad argument (unknown dtype, ndim out of range, a negative dimension, an
 * empty, too long, duplicate or reserved name, NULL data for a non-empty
 * tensor) is PTDP_EINVAL; a failed write is PTDP_EIO with a message naming
 * the path and the errno text.  On any failure no
 * temporary file is left behind and an existing file at `path` is unchanged. */
int ptdp_st_write(const char *path, const ptdp_st_tensor *tensors, int n,
                  const char *const *meta_keys, const char *const *meta_values, int n_meta,
                  char *msg, size_t msglen);

typedef struct ptdp_st_file ptdp_st_file;

/* Read the whole file into host memory and validate it completely: length
 * prefix, header length within the file (and at most 100 MiB, as the
 * reference library), well-formed UTF-8 JSON, every entry with a known dtype,
 * a rank of at most PTDP_ST_MAX_NDIM, non-negative dimensions, data_offsets
 * of exactly numel * dtype size bytes, which together tile the data section
 * from 0 to its end with no gap and no overlap.  Violations: PTDP_ECORRUPT
 * ("ckpt.st: truncated: header says 1048576 bytes of data, file has 1000");
 * an unreadable file: PTDP_EIO; out of host memory: PTDP_ENOMEM. */
int  ptdp_st_open(const char *path, ptdp_st_file **out, char *msg, size_t msglen);
void ptdp_st_close(ptdp_st_file *f);                  /* NULL is fine */

/* The tensors, in the order of their data in the file. */
int ptdp_st_count(const ptdp_st_file *f);
const ptdp_st_tensor *ptdp_st_get(const ptdp_st_file *f, int i);
const ptdp_st_tensor *ptdp_st_find(const ptdp_st_file *f, const char *name);  /* NULL if absent */
/* A __metadata__ value, or NULL if absent. */
const char *ptdp_st_meta(const ptdp_st_file *f, const char *key);
/* The __metadata__ keys, in the file's order (0 without __metadata__);
 * _key: NULL past the last. */
int ptdp_st_meta_count(const ptdp_st_file *f);
const char *ptdp_st_meta_key(const ptdp_st_file *f, int i);

/* Copy tensor `name` into dst (numel elements of ptdp_real), converting F32,
 * F64 or BF16 (exactly: a bf16 is a float's top half) to ptdp_real.  The
 * tensor must exist, have a float dtype and exactly the expected shape (ndim
 * dims of `shape`); otherwise PTDP_ECORRUPT with a message naming the tensor
 * and what was expected and found.  A finite F64
 * beyond float's range becomes ±infinity in the float build. */
int ptdp_st_read_real(const ptdp_st_file *f, const char *name, int ndim, const int64_t *shape,
                      ptdp_real *dst, char *msg, size_t msglen);
/* The same for I64 tensors (optim.step of shape [], labels [steps, B]). */
int ptdp_st_read_i64(const ptdp_st_file *f, const char *name, int ndim, const int64_t *shape,
                     int64_t *dst, char *msg, size_t msglen);

#endif
