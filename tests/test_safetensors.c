/*
 * test_safetensors.c — the checkpoint format, byte for byte and under abuse.
 *
 * What must hold:
 *   - round trip: what ptdp_st_write writes, ptdp_st_open reads back exactly
 *     (F32, F64, I32, I64, U8; a scalar []; a zero-size tensor; metadata
 *     with quotes, backslashes, control characters and non-ASCII text);
 *   - the bytes on disk are the format's, checked against a hand-written file,
 *     and every tensor is aligned to its element size;
 *   - F32 and F64 load into either precision;
 *   - every corrupt file is PTDP_ECORRUPT with a message naming the file and
 *     the problem, an unreadable one PTDP_EIO — never a crash (500 mutated
 *     files included);
 *   - writes are atomic: a failed write leaves the old file and no temporary.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "harness.h"
#include "ptdp/error.h"
#include "ptdp/safetensors.h"

/* ------------------------------------------------------------------------ */
/* A fresh directory per test, and small file helpers                        */
/* ------------------------------------------------------------------------ */

/* root: one directory per test run, made and removed by the parent process
 * (so it goes even when a test fails); dir: a fresh one inside it per test. */
static char root[64], dir[128];
static char msg[1024];

static void make_root(void)
{
    snprintf(root, sizeof root, "/tmp/ptdp_st_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    chmod(root, 0755);   /* the read-only-directory test may look in as "nobody" */
}

static void remove_root(void) { harness_remove_tree(root); }

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "%s/tXXXXXX", root);
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_dir(void) { harness_remove_tree(dir); }

/* Every test runs in a fresh directory of its own. */
static const harness_tcase core_tests = {
    .name = "core", .timeout_s = 30,
    .setup_once = make_root, .teardown_once = remove_root, .setup = make_dir, .teardown = remove_dir,
};

static const char *in_dir(const char *name)
{
    static char p[320];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static void write_bytes(const char *path, const void *buf, size_t len)
{
    FILE *fp = fopen(path, "wb");
    ck_assert_ptr_nonnull(fp);
    ck_assert_uint_eq(fwrite(buf, 1, len, fp), len);
    ck_assert_int_eq(fclose(fp), 0);
}

static ptdp_st_tensor tensor(const char *name, ptdp_dtype dt, int ndim, const int64_t *shape,
                             const void *data)
{
    ptdp_st_tensor t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "%s", name);
    t.dtype = dt;
    t.ndim = ndim;
    for (int d = 0; d < ndim; d++) t.shape[d] = shape[d];
    t.data = data;
    return t;
}

/* A safetensors file from a header string and data bytes, no padding added:
 * the hand-made inputs of the corruption tests. */
static size_t make_file(unsigned char *buf, const char *header, const void *data, size_t data_len)
{
    size_t h = strlen(header);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(buf + 8, header, h);
    if (data_len) memcpy(buf + 8 + h, data, data_len);
    return 8 + h + data_len;
}

/* Open bytes that must be rejected; the message names the file and `why`. */
static void expect_corrupt(const void *bytes, size_t len, const char *why)
{
    const char *path = in_dir("bad.st");
    write_bytes(path, bytes, len);
    static int sentinel;
    ptdp_st_file *f = (ptdp_st_file *)(void *)&sentinel;   /* open must reset it to NULL */
    msg[0] = '\0';
    int rc = ptdp_st_open(path, &f, msg, sizeof msg);
    ck_assert_msg(rc == PTDP_ECORRUPT, "expected ECORRUPT (%s), got %d: %s", why, rc, msg);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(msg, path) != NULL, "message does not name the file: %s", msg);
    ck_assert_msg(strstr(msg, why) != NULL, "message lacks '%s': %s", why, msg);
}

static void expect_corrupt_header(const char *header, const void *data, size_t data_len,
                                  const char *why)
{
    unsigned char buf[4096];
    ck_assert_uint_lt(strlen(header) + data_len + 8, sizeof buf);
    expect_corrupt(buf, make_file(buf, header, data, data_len), why);
}

/* ------------------------------------------------------------------------ */
/* Round trips                                                               */
/* ------------------------------------------------------------------------ */

TEST(core_tests, test_round_trip_all_dtypes)
{
    const float w[6] = {1.5f, -2.25f, 3.0f, 0.0f, -0.0f, 1e-30f};
    const double b[4] = {0.1, -1e300, 3.141592653589793, 5e-324};
    const int64_t step = -7;                   /* a scalar */
    const int64_t labels[6] = {0, INT64_MAX, INT64_MIN, 3, -1, 42};
    const int32_t i32[3] = {-1, 2147483647, 5};
    const unsigned char u8[5] = {0, 1, 127, 128, 255};
    const int64_t s_w[2] = {2, 3}, s_b[1] = {4}, s_lab[2] = {3, 2}, s_i32[1] = {3},
                  s_u8[1] = {5}, s_empty[2] = {0, 7};
    ptdp_st_tensor t[7] = {
        tensor("in.weight", PTDP_F32, 2, s_w, w),
        tensor("in.bias", PTDP_F64, 1, s_b, b),
        tensor("optim.step", PTDP_I64, 0, NULL, &step),
        tensor("y", PTDP_I64, 2, s_lab, labels),
        tensor("empty", PTDP_F32, 2, s_empty, NULL),   /* zero-size: no data needed */
        tensor("i32", PTDP_I32, 1, s_i32, i32),
        tensor("u8", PTDP_U8, 1, s_u8, u8),
    };
    const char *keys[3] = {"seed", "quote\"back\\slash", "ctl\x01\x1f"};
    const char *vals[3] = {"1234", "line1\nline2\ttab\r/\b\f", "caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x98\x80"};
    const char *path = in_dir("ckpt.st");
    ck_assert_int_eq(ptdp_st_write(path, t, 7, keys, vals, 3, msg, sizeof msg), 0);
    ck_assert_int_eq(harness_count_entries(dir, 0), 1);

    ptdp_st_file *f = NULL;
    ck_assert_msg(ptdp_st_open(path, &f, msg, sizeof msg) == 0, "%s", msg);
    ck_assert_int_eq(ptdp_st_count(f), 7);
    /* file order: 8-byte types first, then 4, then 1, each in the order given */
    static const char *file_order[7] = {"in.bias", "optim.step", "y", "in.weight", "empty", "i32", "u8"};
    for (int i = 0; i < 7; i++) ck_assert_str_eq(ptdp_st_get(f, i)->name, file_order[i]);
    for (int i = 0; i < 7; i++) {   /* the same dtype, shape and bytes; aligned in memory */
        const ptdp_st_tensor *g = ptdp_st_find(f, t[i].name);
        ck_assert_ptr_nonnull(g);
        ck_assert_str_eq(g->name, t[i].name);
        ck_assert_int_eq(g->dtype, t[i].dtype);
        ck_assert_int_eq(g->ndim, t[i].ndim);
        for (int d = 0; d < g->ndim; d++) ck_assert_int_eq(g->shape[d], t[i].shape[d]);
        int64_t n = ptdp_st_numel(g);
        ck_assert_int_eq(n, ptdp_st_numel(&t[i]));
        size_t size = t[i].dtype == PTDP_U8 ? 1 : (t[i].dtype == PTDP_F32 || t[i].dtype == PTDP_I32) ? 4 : 8;
        if (n > 0) ck_assert_int_eq(memcmp(g->data, t[i].data, (size_t)n * size), 0);  /* LE host */
        ck_assert_uint_eq((uintptr_t)g->data % size, 0);
    }
    ck_assert_ptr_null(ptdp_st_get(f, 7));
    ck_assert_ptr_null(ptdp_st_get(f, -1));
    ck_assert_ptr_null(ptdp_st_find(f, "nope"));
    ck_assert_int_eq(ptdp_st_numel(ptdp_st_find(f, "optim.step")), 1);
    ck_assert_int_eq(ptdp_st_numel(ptdp_st_find(f, "empty")), 0);
    for (int i = 0; i < 3; i++) ck_assert_str_eq(ptdp_st_meta(f, keys[i]), vals[i]);
    ck_assert_ptr_null(ptdp_st_meta(f, "absent"));
    ck_assert_int_eq(ptdp_st_meta_count(f), 3);   /* every key, in the file's order */
    for (int i = 0; i < 3; i++) ck_assert_str_eq(ptdp_st_meta_key(f, i), keys[i]);
    ck_assert_ptr_null(ptdp_st_meta_key(f, 3));
    ck_assert_ptr_null(ptdp_st_meta_key(f, -1));

    ptdp_real rw[6], rb[4];
    ck_assert_int_eq(ptdp_st_read_real(f, "in.weight", 2, s_w, rw, msg, sizeof msg), 0);
    for (int i = 0; i < 6; i++) ck_assert(rw[i] == (ptdp_real)w[i]);
    ck_assert_int_eq(ptdp_st_read_real(f, "in.bias", 1, s_b, rb, msg, sizeof msg), 0);
#ifdef PTDP_DOUBLE
    for (int i = 0; i < 4; i++) ck_assert(rb[i] == b[i]);
#else   /* F64 into float: rounded; -1e300 is beyond float's range */
    ck_assert(rb[0] == 0.1f && rb[2] == (float)3.141592653589793 && rb[3] == 0.0f);
    ck_assert(isinf(rb[1]) && rb[1] < 0);
#endif
    int64_t st = 0, lab[6];
    ck_assert_int_eq(ptdp_st_read_i64(f, "optim.step", 0, NULL, &st, msg, sizeof msg), 0);
    ck_assert_int_eq(st, -7);
    ck_assert_int_eq(ptdp_st_read_i64(f, "y", 2, s_lab, lab, msg, sizeof msg), 0);
    for (int i = 0; i < 6; i++) ck_assert_int_eq(lab[i], labels[i]);
    ck_assert_int_eq(ptdp_st_read_real(f, "empty", 2, s_empty, rw, msg, sizeof msg), 0);
    ptdp_st_close(f);
}
END_TEST

/* The file on disk, byte for byte, written out by hand from the format's
 * description: length prefix, compact JSON, spaces to a multiple of 8, data. */
TEST(core_tests, test_exact_bytes)
{
    const float a[2] = {1.0f, -2.0f};
    const int64_t s = 7, shape_a[1] = {2};
    ptdp_st_tensor t[2] = {tensor("a", PTDP_F32, 1, shape_a, a), tensor("s", PTDP_I64, 0, NULL, &s)};
    const char *k[1] = {"k"}, *v[1] = {"v\""};
    const char *path = in_dir("tiny.st");
    ck_assert_int_eq(ptdp_st_write(path, t, 2, k, v, 1, msg, sizeof msg), 0);

    static const char header[] =   /* 134 bytes + 2 spaces = 136 = 0x88; I64 before F32 */
        "{\"__metadata__\":{\"k\":\"v\\\"\"},"
        "\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}  ";
    unsigned char expected[8 + 136 + 16] = {0x88, 0, 0, 0, 0, 0, 0, 0};
    ck_assert_uint_eq(strlen(header), 136);
    memcpy(expected + 8, header, 136);
    static const unsigned char data[16] = {7, 0, 0, 0, 0, 0, 0, 0,   /*  7    */
                                           0x00, 0x00, 0x80, 0x3f,   /*  1.0f */
                                           0x00, 0x00, 0x00, 0xc0};  /* -2.0f */
    memcpy(expected + 144, data, 16);

    size_t len;
    unsigned char *got = (unsigned char *)harness_read_file(path, &len);
    ck_assert_uint_eq(len, sizeof expected);
    ck_assert_int_eq(memcmp(got, expected, sizeof expected), 0);
    free(got);

    /* and no tensors at all: "{}" and six spaces */
    ck_assert_int_eq(ptdp_st_write(path, NULL, 0, NULL, NULL, 0, msg, sizeof msg), 0);
    got = (unsigned char *)harness_read_file(path, &len);
    ck_assert_uint_eq(len, 16);
    ck_assert_int_eq(memcmp(got, "\x08\0\0\0\0\0\0\0{}      ", 16), 0);
    free(got);
    ptdp_st_file *f;
    ck_assert_int_eq(ptdp_st_open(path, &f, msg, sizeof msg), 0);
    ck_assert_int_eq(ptdp_st_count(f), 0);
    ptdp_st_close(f);
}
END_TEST

/* Files written by others: any key order, whitespace, escapes, \u with
 * surrogate pairs, tensors listed out of data order. */
TEST(core_tests, test_reads_foreign_layouts)
{
    static const char header[] =
        "{ \"b\" : { \"shape\" : [ 2 ] , \"data_offsets\" : [ 8 , 16 ], \"dtype\" : \"F32\" } ,\n"
        "  \"__metadata__\": {\"format\": \"pt\", \"\\u00e9\\ud83d\\ude00\\/\": \"\\u0041\\u20AC\"},\r\n"
        "  \"a\\tb\": {\"dtype\": \"F32\", \"shape\": [1, 2], \"data_offsets\": [0, 8]}\t}   ";
    const float data[4] = {1, 2, 3, 4};
    unsigned char buf[1024];
    size_t len = make_file(buf, header, data, sizeof data);
    write_bytes(in_dir("foreign.st"), buf, len);
    ptdp_st_file *f;
    ck_assert_msg(ptdp_st_open(in_dir("foreign.st"), &f, msg, sizeof msg) == 0, "%s", msg);
    ck_assert_int_eq(ptdp_st_count(f), 2);
    ck_assert_str_eq(ptdp_st_get(f, 0)->name, "a\tb");   /* data order */
    ck_assert_str_eq(ptdp_st_get(f, 1)->name, "b");
    ck_assert_str_eq(ptdp_st_meta(f, "format"), "pt");
    ck_assert_str_eq(ptdp_st_meta(f, "\xc3\xa9\xf0\x9f\x98\x80/"), "A\xe2\x82\xac");
    ck_assert_int_eq(ptdp_st_meta_count(f), 2);
    ck_assert_str_eq(ptdp_st_meta_key(f, 0), "format");
    ptdp_real x[2];
    const int64_t s1[1] = {2}, s2[2] = {1, 2};
    ck_assert_int_eq(ptdp_st_read_real(f, "b", 1, s1, x, msg, sizeof msg), 0);
    ck_assert(x[0] == 3 && x[1] == 4);
    ck_assert_int_eq(ptdp_st_read_real(f, "a\tb", 2, s2, x, msg, sizeof msg), 0);
    ck_assert(x[0] == 1 && x[1] == 2);
    ptdp_st_close(f);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Corrupt files                                                             */
/* ------------------------------------------------------------------------ */

/* A valid two-tensor file to cut up: "w" F32 [2,3] (24 bytes), "v" F32 [2]. */
static size_t valid_file(unsigned char *buf)
{
    static const float d[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    return make_file(buf,
                     "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                     "\"v\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]}}",
                     d, sizeof d);
}

TEST(core_tests, test_corrupt_lengths)
{
    unsigned char buf[1024];
    size_t len = valid_file(buf);
    ptdp_st_file *f;
    write_bytes(in_dir("ok.st"), buf, len);
    ck_assert_msg(ptdp_st_open(in_dir("ok.st"), &f, msg, sizeof msg) == 0, "%s", msg);
    ptdp_st_close(f);

    expect_corrupt(buf, 0, "empty file");
    expect_corrupt(buf, 5, "too short");
    expect_corrupt(buf, 8, "truncated header");
    expect_corrupt(buf, 40, "truncated header");                   /* cut inside the JSON */
    expect_corrupt(buf, len - 3, "truncated: header says 32 bytes of data, file has 29");
    expect_corrupt(buf, len - 32, "truncated: header says 32 bytes of data, file has 0");

    unsigned char big[2048];
    memcpy(big, buf, len);
    memset(big + len, 0, 5);
    expect_corrupt(big, len + 5, "5 bytes after the last tensor");

    memcpy(big, buf, len);   /* header length larger than the file */
    big[0] = 0x00, big[1] = 0x10;
    expect_corrupt(big, len, "truncated header: the length prefix says 4096 bytes");
    big[0] = 0xff, big[7] = 0x7f;   /* absurd */
    expect_corrupt(big, len, "exceeds the format's limit");
    memset(big, 0, 8);              /* zero-length header */
    expect_corrupt(big, len, "the header must be a JSON object");
}
END_TEST

TEST(core_tests, test_corrupt_json)
{
    static const unsigned char d[32];
    static const struct { const char *header; const char *why; } cases[] = {
        {"{", "expected a string"},
        {"[]", "the header must be a JSON object"},
        {"{}x", "unexpected bytes after the header object"},
        {"{}\0", "unexpected bytes after the header object"},
        {"{\"a\":}", "expected '{' for a tensor"},
        {"{\"a\" {}}", "expected ':'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}", "expected ',' or '}'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]},}", "expected a string"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}}", "unexpected bytes"},
        {"{\"a", "unterminated string"},
        {"{\"a\\", "unterminated string"},
        {"{\"a\x01\":1}", "control character in string"},
        {"{\"a\\q\":1}", "unknown escape"},
        {"{\"a\\u12G4\":1}", "bad hex digit"},
        {"{\"a\\u12", "unterminated string"},
        {"{\"a\\udc00\":1}", "lone low surrogate"},
        {"{\"a\\ud800x\":1}", "high surrogate without its low half"},
        {"{\"a\\ud800\\u0041\":1}", "bad surrogate pair"},
        {"{\"a\\u0000\":1}", "NUL character"},
        {"{\"\xff\":1}", "not valid UTF-8"},
        {"{\"\xc0\xaf\":1}", "not valid UTF-8"},                 /* overlong '/' */
        {"{\"\xed\xa0\x80\":1}", "not valid UTF-8"},             /* encoded surrogate */
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[08],\"data_offsets\":[0,32]}}", "leading zero"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-8],\"data_offsets\":[0,32]}}", "non-negative integer"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[8.0],\"data_offsets\":[0,32]}}", "fraction or exponent"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[8e0],\"data_offsets\":[0,32]}}", "fraction or exponent"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[8,],\"data_offsets\":[0,32]}}", "non-negative integer"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[8 8],\"data_offsets\":[0,32]}}", "expected ',' or ']'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":8,\"data_offsets\":[0,32]}}", "expected '['"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,32]}}",
         "number too large"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[9223372036854775808],\"data_offsets\":[0,32]}}",
         "dimension too large"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,8],\"data_offsets\":[0,32]}}",
         "more than 4 dimensions"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0]}}", "data_offsets must be"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32,32]}}", "data_offsets must be"},
        {"{\"a\":{\"dtype\":\"F16\",\"shape\":[16],\"data_offsets\":[0,32]}}",
         "dtype 'F16' is not one ptdp reads"},
        {"{\"a\":{\"dtype\":\"float32\",\"shape\":[8],\"data_offsets\":[0,32]}}", "dtype 'float32'"},
        {"{\"a\":{\"dtype\":32,\"shape\":[8],\"data_offsets\":[0,32]}}", "expected a string"},
        {"{\"a\":{\"shape\":[8],\"data_offsets\":[0,32]}}", "tensor 'a' lacks \"dtype\""},
        {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,32]}}", "lacks \"shape\""},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[8]}}", "lacks \"data_offsets\""},
        {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}",
         "repeated field 'dtype'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32],\"extra\":1}}",
         "unexpected or repeated field 'extra'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[32,32]}}", "tensor 'a' appears twice"},
        {"{\"__metadata__\":{\"k\":1}}", "values must be strings"},
        {"{\"__metadata__\":{\"k\":{}}}", "values must be strings"},
        {"{\"__metadata__\":[]}", "__metadata__ must be an object"},
        {"{\"__metadata__\":{},\"__metadata__\":{}}", "__metadata__ appears twice"},
        {"{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}", "key 'k' appears twice"},
        {"{\"__metadata__\":{\"k\":\"1\"", "expected ',' or '}' in __metadata__"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* cases[3] has an embedded NUL: its header is 3 bytes long */
        unsigned char buf[1024];
        size_t h = i == 3 ? 3 : strlen(cases[i].header);
        for (int b = 0; b < 8; b++) buf[b] = (unsigned char)((uint64_t)h >> (8 * b));
        memcpy(buf + 8, cases[i].header, h);
        memcpy(buf + 8 + h, d, 32);
        expect_corrupt(buf, 8 + h + 32, cases[i].why);
    }
    char header[512];   /* a name of 128 bytes, one more than fits */
    snprintf(header, sizeof header, "{\"%0128d\":{\"dtype\":\"F32\",\"shape\":[8],"
             "\"data_offsets\":[0,32]}}", 0);
    expect_corrupt_header(header, d, 32, "tensor name longer than 127 bytes");
    snprintf(header, sizeof header, "{\"%0127d\":{\"dtype\":\"F32\",\"shape\":[8],"
             "\"data_offsets\":[0,32]}}", 0);
    unsigned char buf[1024];
    size_t len = make_file(buf, header, d, 32);
    write_bytes(in_dir("long.st"), buf, len);
    ptdp_st_file *f;
    ck_assert_msg(ptdp_st_open(in_dir("long.st"), &f, msg, sizeof msg) == 0, "%s", msg);
    ck_assert_uint_eq(strlen(ptdp_st_get(f, 0)->name), 127);
    ptdp_st_close(f);
}
END_TEST

/* The JSON is fine; what it says about the bytes is not. */
TEST(core_tests, test_corrupt_layout)
{
    static const unsigned char d[64];
    expect_corrupt_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}", d, 16,
                          "tensor 'a' of dtype F32 and shape [3] needs 12 bytes, but data_offsets "
                          "[0, 16] hold 16");
    expect_corrupt_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", d, 8,
                          "data_offsets [8, 0] run backwards");
    expect_corrupt_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", d, 12,
                          "gap: bytes 0..4 of the data section (before tensor 'a')");
    expect_corrupt_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                          "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}", d, 20,
                          "gap: bytes 8..12 of the data section (before tensor 'b', after 'a')");
    expect_corrupt_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                          "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", d, 12,
                          "tensors 'a' and 'b' overlap at bytes 4..8");
    expect_corrupt_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                          "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 8,
                          "tensors 'a' and 'b' overlap");
    expect_corrupt_header("{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}", d, 8,
                          "truncated: header says 16 bytes of data, file has 8");
    expect_corrupt_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],"
                          "\"data_offsets\":[0,0]}}", d, 0, "needs more than");
    expect_corrupt_header("{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,4294967296],"
                          "\"data_offsets\":[0,0]}}", d, 0, "needs more than");
    expect_corrupt_header("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],"
                          "\"data_offsets\":[18446744073709551615,0]}}", d, 1, "run backwards");
    expect_corrupt_header("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],"
                          "\"data_offsets\":[18446744073709551614,18446744073709551615]}}", d, 1,
                          "gap: bytes 0..18446744073709551614");
}
END_TEST

static unsigned next_rand(uint64_t *s)   /* a 64-bit LCG: deterministic runs */
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return (unsigned)(*s >> 33);
}

TEST(core_tests, test_garbage_and_unreadable)
{
    unsigned char junk[1000];
    uint64_t s = 0x9e3779b97f4a7c15u;
    for (int trial = 0; trial < 20; trial++) {
        for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)next_rand(&s);
        if (trial % 2) memset(junk + 1, 0, 7);   /* a small plausible length */
        expect_corrupt(junk, sizeof junk, "");
    }
    static const char text[] = "this is a README, not a checkpoint\n";
    expect_corrupt(text, sizeof text - 1, "exceeds the format's limit");

    ptdp_st_file *f = NULL;
    int rc = ptdp_st_open(in_dir("missing.st"), &f, msg, sizeof msg);
    ck_assert_int_eq(rc, PTDP_EIO);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(msg, "missing.st") && strstr(msg, strerror(ENOENT)), "%s", msg);
    rc = ptdp_st_open(dir, &f, msg, sizeof msg);   /* a directory */
    ck_assert_int_eq(rc, PTDP_EIO);
    ck_assert_msg(strstr(msg, dir) && strstr(msg, "not a regular file"), "%s", msg);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Typed reads                                                               */
/* ------------------------------------------------------------------------ */

TEST(core_tests, test_read_checks_name_shape_dtype)
{
    const float w[6] = {1, 2, 3, 4, 5, 6};
    const double d[6] = {0.5, -1, 2, 4, 8, 1e-3};
    const int64_t step = 3, s23[2] = {2, 3}, s32[2] = {3, 2}, s6[1] = {6}, s231[3] = {2, 3, 1};
    ptdp_st_tensor t[3] = {tensor("f32", PTDP_F32, 2, s23, w), tensor("f64", PTDP_F64, 2, s23, d),
                           tensor("step", PTDP_I64, 0, NULL, &step)};
    const char *path = in_dir("r.st");
    ck_assert_int_eq(ptdp_st_write(path, t, 3, NULL, NULL, 0, msg, sizeof msg), 0);
    ptdp_st_file *f;
    ck_assert_int_eq(ptdp_st_open(path, &f, msg, sizeof msg), 0);

    ptdp_real x[6];
    int64_t i64[6];
    /* F32 and F64 both load into this build's ptdp_real */
    ck_assert_int_eq(ptdp_st_read_real(f, "f32", 2, s23, x, msg, sizeof msg), 0);
    for (int i = 0; i < 6; i++) ck_assert(x[i] == (ptdp_real)w[i]);
    ck_assert_int_eq(ptdp_st_read_real(f, "f64", 2, s23, x, msg, sizeof msg), 0);
    for (int i = 0; i < 6; i++) ck_assert(x[i] == (ptdp_real)d[i]);

    /* each wrong name, shape or dtype refused, saying what it found and wanted */
    const struct { bool i64; const char *name; int ndim; const int64_t *shape; const char *says; } bad[] = {
        { false, "nope", 2, s23, "no tensor 'nope' (expected shape [2, 3])" },
        { false, "f32", 2, s32, "tensor 'f32' has shape [2, 3], expected [3, 2]" },
        { false, "f32", 1, s6, "has shape [2, 3], expected [6]" },
        { false, "f64", 3, s231, "expected [2, 3, 1]" },
        { false, "step", 0, NULL, "tensor 'step' has dtype I64, expected F32, F64 or BF16" },
        { true, "step", 1, s6, "tensor 'step' has shape [], expected [6]" },
        { true, "f32", 2, s23, "tensor 'f32' has dtype F32, expected I64" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = bad[i].i64 ? ptdp_st_read_i64(f, bad[i].name, bad[i].ndim, bad[i].shape, i64, msg, sizeof msg)
                            : ptdp_st_read_real(f, bad[i].name, bad[i].ndim, bad[i].shape, x, msg, sizeof msg);
        ck_assert_int_eq(rc, PTDP_ECORRUPT);
        ck_assert_msg(strstr(msg, path) && strstr(msg, bad[i].says), "%s", msg);
    }
    ck_assert_int_eq(ptdp_st_read_i64(f, "step", 0, NULL, i64, msg, sizeof msg), 0);
    ck_assert_int_eq(i64[0], 3);
    ck_assert_int_eq(ptdp_st_read_real(f, "f32", 5, s23, x, msg, sizeof msg), PTDP_EINVAL);
    ptdp_st_close(f);
    ptdp_st_close(NULL);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Writing: bad arguments, atomicity                                          */
/* ------------------------------------------------------------------------ */

TEST(core_tests, test_write_rejects_bad_arguments)
{
    const float w[2] = {1, 2};
    const int64_t s2[1] = {2}, neg[1] = {-2}, s5[5] = {1, 1, 1, 1, 2};
    const char *path = in_dir("x.st");
    ptdp_st_tensor t[2] = {tensor("a", PTDP_F32, 1, s2, w), tensor("a", PTDP_F32, 1, s2, w)};
    ck_assert_int_eq(ptdp_st_write(path, t, 2, NULL, NULL, 0, msg, sizeof msg), PTDP_EINVAL);
    ck_assert_msg(strstr(msg, "tensor name 'a' used twice"), "%s", msg);

    ptdp_st_tensor bad[] = {
        tensor("", PTDP_F32, 1, s2, w),
        tensor("__metadata__", PTDP_F32, 1, s2, w),
        tensor("\xff", PTDP_F32, 1, s2, w),
        tensor("neg", PTDP_F32, 1, neg, w),
        tensor("nodata", PTDP_F32, 1, s2, NULL),
        tensor("dtype", PTDP_DTYPE_COUNT, 1, s2, w),
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_int_eq(ptdp_st_write(path, &bad[i], 1, NULL, NULL, 0, msg, sizeof msg), PTDP_EINVAL);
    ptdp_st_tensor rank5 = tensor("r5", PTDP_F32, 4, s5, w);
    rank5.ndim = 5;
    ck_assert_int_eq(ptdp_st_write(path, &rank5, 1, NULL, NULL, 0, msg, sizeof msg), PTDP_EINVAL);
    ptdp_st_tensor long_name = tensor("", PTDP_F32, 1, s2, w);
    memset(long_name.name, 'n', sizeof long_name.name);   /* no terminator at all */
    ck_assert_int_eq(ptdp_st_write(path, &long_name, 1, NULL, NULL, 0, msg, sizeof msg), PTDP_EINVAL);

    const char *k2[2] = {"k", "k"}, *v2[2] = {"1", "2"}, *kbad[1] = {"\xc3"}, *vnull[1] = {NULL};
    ck_assert_int_eq(ptdp_st_write(path, t, 1, k2, v2, 2, msg, sizeof msg), PTDP_EINVAL);
    ck_assert_msg(strstr(msg, "metadata key 'k' used twice"), "%s", msg);
    ck_assert_int_eq(ptdp_st_write(path, t, 1, kbad, v2, 1, msg, sizeof msg), PTDP_EINVAL);
    ck_assert_int_eq(ptdp_st_write(path, t, 1, k2, vnull, 1, msg, sizeof msg), PTDP_EINVAL);
    ck_assert_int_eq(ptdp_st_write(NULL, t, 1, NULL, NULL, 0, msg, sizeof msg), PTDP_EINVAL);
    ck_assert_int_eq(ptdp_st_write(path, t, -1, NULL, NULL, 0, msg, sizeof msg), PTDP_EINVAL);
    ck_assert_int_eq(harness_count_entries(dir, 0), 0);   /* nothing was created */
}
END_TEST

/* Writes an "old" checkpoint; returns its bytes for comparison. */
static unsigned char *write_old(const char *path, size_t *len)
{
    const float old[3] = {9, 8, 7};
    const int64_t s3[1] = {3};
    ptdp_st_tensor t = tensor("old", PTDP_F32, 1, s3, old);
    ck_assert_int_eq(ptdp_st_write(path, &t, 1, NULL, NULL, 0, msg, sizeof msg), 0);
    return (unsigned char *)harness_read_file(path, len);
}

static void assert_unchanged(const char *path, const unsigned char *before, size_t len)
{
    size_t now_len;
    unsigned char *now = (unsigned char *)harness_read_file(path, &now_len);
    ck_assert_uint_eq(now_len, len);
    ck_assert_int_eq(memcmp(now, before, len), 0);
    free(now);
}

TEST(core_tests, test_write_failures_are_clean)
{
    const float w[2] = {1, 2};
    const int64_t s2[1] = {2};
    ptdp_st_tensor t = tensor("w", PTDP_F32, 1, s2, w);

    /* a directory that does not exist */
    char path[512];
    snprintf(path, sizeof path, "%s/no/such/dir/ckpt.st", dir);
    ck_assert_int_eq(ptdp_st_write(path, &t, 1, NULL, NULL, 0, msg, sizeof msg), PTDP_EIO);
    ck_assert_msg(strstr(msg, path) && strstr(msg, strerror(ENOENT)), "%s", msg);

    /* a "directory" that is a regular file (fails even for root) */
    write_bytes(in_dir("plain"), "x", 1);
    snprintf(path, sizeof path, "%s/plain/ckpt.st", dir);
    ck_assert_int_eq(ptdp_st_write(path, &t, 1, NULL, NULL, 0, msg, sizeof msg), PTDP_EIO);
    ck_assert_msg(strstr(msg, path) && strstr(msg, strerror(ENOTDIR)), "%s", msg);

    /* the target is a directory: the rename fails after all was written */
    snprintf(path, sizeof path, "%s/adir", dir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    write_bytes(in_dir("adir/inside"), "x", 1);   /* non-empty: rename cannot replace it */
    ck_assert_int_eq(ptdp_st_write(path, &t, 1, NULL, NULL, 0, msg, sizeof msg), PTDP_EIO);
    ck_assert_msg(strstr(msg, path) && strstr(msg, "rename"), "%s", msg);
    ck_assert_int_eq(harness_count_entries(dir, 1), 0);
    ck_assert_int_eq(harness_count_entries(dir, 0), 2);   /* plain, adir */
}
END_TEST

/* A directory we may not write to: root ignores permission bits, so the
 * write runs in a child process that, as root, gives up root for "nobody". */
typedef struct {
    const char *path;
    const ptdp_st_tensor *t;
} write_args;

static int write_one(void *arg)
{
    const write_args *w = arg;
    return ptdp_st_write(w->path, w->t, 1, NULL, NULL, 0, msg, sizeof msg);
}

static int write_as_unprivileged(const char *path, const ptdp_st_tensor *t)
{
    ck_assert_int_eq(chmod(dir, 0555), 0);   /* nobody may look, not write */
    int rc = harness_in_child(write_one, &(write_args){ path, t }, true, msg, sizeof msg);
    ck_assert_int_eq(chmod(dir, 0755), 0);
    return rc;
}

TEST(core_tests, test_write_read_only_directory)
{
    size_t len;
    const char *path = in_dir("ckpt.st");
    unsigned char *before = write_old(path, &len);
    const float w[2] = {1, 2};
    const int64_t s2[1] = {2};
    ptdp_st_tensor t = tensor("w", PTDP_F32, 1, s2, w);
    int rc = write_as_unprivileged(path, &t);
    ck_assert_msg(rc == PTDP_EIO, "rc %d: %s", rc, msg);
    ck_assert_msg(strstr(msg, path) && strstr(msg, strerror(EACCES)), "%s", msg);
    assert_unchanged(path, before, len);
    ck_assert_int_eq(harness_count_entries(dir, 0), 1);
    free(before);
}
END_TEST

/* A failure in the middle of writing the data (the file-size limit hits,
 * as a full disk would): the temporary goes, the old file stays. */
TEST(core_tests, test_write_fails_midway)
{
    size_t len;
    const char *path = in_dir("ckpt.st");
    unsigned char *before = write_old(path, &len);

    enum { N = 1 << 16 };
    float *big = calloc(N, sizeof *big);
    const int64_t sn[1] = {N};
    ptdp_st_tensor t = tensor("big", PTDP_F32, 1, sn, big);
    struct rlimit old_lim, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old_lim), 0);
    lim = old_lim;
    lim.rlim_cur = 4096;
    signal(SIGXFSZ, SIG_IGN);   /* get EFBIG instead of being killed */
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    int rc = ptdp_st_write(path, &t, 1, NULL, NULL, 0, msg, sizeof msg);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old_lim), 0);
    ck_assert_int_eq(rc, PTDP_EIO);
    ck_assert_msg(strstr(msg, path) && strstr(msg, "write") && strstr(msg, strerror(EFBIG)),
                  "%s", msg);
    assert_unchanged(path, before, len);
    ck_assert_int_eq(harness_count_entries(dir, 0), 1);

    /* and without the limit the same write replaces the file, leaving no temporary */
    ck_assert_int_eq(ptdp_st_write(path, &t, 1, NULL, NULL, 0, msg, sizeof msg), 0);
    ck_assert_int_eq(harness_count_entries(dir, 0), 1);
    ptdp_st_file *f;
    ck_assert_int_eq(ptdp_st_open(path, &f, msg, sizeof msg), 0);
    ck_assert_ptr_nonnull(ptdp_st_find(f, "big"));
    ck_assert_ptr_null(ptdp_st_find(f, "old"));
    ptdp_st_close(f);
    free(big);
    free(before);
}
END_TEST

/* Several threads saving to one path at once: each rename is atomic, so the
 * file that remains is one writer's, whole — never a mixture. */
enum { WRITERS = 4, WRITES = 10, VALUES = 4096 };

typedef struct {
    const char *path;
    int id, failures;
} writer_arg;

static void *save_repeatedly(void *arg)
{
    writer_arg *w = arg;
    float *v = malloc(VALUES * sizeof *v);
    for (int i = 0; i < VALUES; i++) v[i] = (float)w->id;
    const int64_t s[1] = {VALUES};
    ptdp_st_tensor t = tensor("v", PTDP_F32, 1, s, v);
    char m[512];
    for (int k = 0; k < WRITES; k++)
        w->failures += ptdp_st_write(w->path, &t, 1, NULL, NULL, 0, m, sizeof m) != 0;
    free(v);
    return NULL;
}

TEST(core_tests, test_concurrent_writers)
{
    char path[320];
    snprintf(path, sizeof path, "%s", in_dir("shared.st"));
    pthread_t th[WRITERS];
    writer_arg args[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        args[i] = (writer_arg){path, i + 1, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, save_repeatedly, &args[i]), 0);
    }
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(args[i].failures, 0);
    }
    ck_assert_int_eq(harness_count_entries(dir, 0), 1);
    ptdp_st_file *f;
    ck_assert_int_eq(ptdp_st_open(path, &f, msg, sizeof msg), 0);
    const int64_t s[1] = {VALUES};
    ptdp_real *x = malloc(VALUES * sizeof *x);
    ck_assert_int_eq(ptdp_st_read_real(f, "v", 1, s, x, msg, sizeof msg), 0);
    ck_assert(x[0] >= 1 && x[0] <= WRITERS);
    for (int i = 1; i < VALUES; i++) ck_assert(x[i] == x[0]);
    free(x);
    ptdp_st_close(f);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Fuzz: mutate a valid checkpoint 500 times; open must never crash          */
/* ------------------------------------------------------------------------ */

TEST(core_tests, test_fuzz_mutations)
{
    float w[12];
    double b[3] = {1, 2, 3};
    int64_t step = 5, y[4] = {0, 1, 2, 3};
    for (int i = 0; i < 12; i++) w[i] = (float)i / 3;
    const int64_t s34[2] = {3, 4}, s3[1] = {3}, s22[2] = {2, 2};
    ptdp_st_tensor t[4] = {tensor("blocks.0.fc1.weight", PTDP_F32, 2, s34, w),
                           tensor("blocks.0.fc1.bias", PTDP_F64, 1, s3, b),
                           tensor("optim.step", PTDP_I64, 0, NULL, &step),
                           tensor("y", PTDP_I64, 2, s22, y)};
    const char *k[2] = {"seed", "note"}, *v[2] = {"42", "caf\xc3\xa9 \"q\""};
    const char *path = in_dir("valid.st");
    ck_assert_int_eq(ptdp_st_write(path, t, 4, k, v, 2, msg, sizeof msg), 0);
    size_t len;
    unsigned char *orig = (unsigned char *)harness_read_file(path, &len);
    unsigned char *buf = malloc(len);
    const char *mpath = in_dir("mutant.st");
    uint64_t s = 12345;
#define RAND() next_rand(&s)

    int opened = 0, rejected = 0;
    for (int iter = 0; iter < 500; iter++) {
        memcpy(buf, orig, len);
        size_t n = len;
        switch (iter % 5) {
        case 0: /* flip one bit, mostly in the header */
            buf[RAND() % (iter % 10 ? 8 + 160 : n)] ^= (unsigned char)(1u << (RAND() % 8));
            break;
        case 1: /* overwrite a few bytes with random ones */
            for (int j = 0; j < 4; j++) buf[RAND() % n] = (unsigned char)RAND();
            break;
        case 2: /* truncate */
            n = RAND() % n;
            break;
        case 3: { /* replace a header byte by a JSON-significant one */
            static const char sig[] = "{}[]\",:\\0123456789-.eu ";
            buf[8 + RAND() % (n - 8 < 300 ? n - 8 : 300)] = (unsigned char)sig[RAND() % (sizeof sig - 1)];
            break;
        }
        default: /* a random header length */
            for (int j = 0; j < 8; j++) buf[j] = (unsigned char)(j < 2 ? RAND() : (RAND() % 4 == 0 ? RAND() : 0));
        }
        write_bytes(mpath, buf, n);
        ptdp_st_file *f = NULL;
        msg[0] = '\0';
        int rc = ptdp_st_open(mpath, &f, msg, sizeof msg);
        ck_assert_msg(rc == 0 || rc == PTDP_ECORRUPT, "iteration %d: rc %d: %s", iter, rc, msg);
        if (rc != 0) {
            ck_assert_msg(strstr(msg, mpath) != NULL, "iteration %d: %s", iter, msg);
            rejected++;
            continue;
        }
        opened++;   /* it passed validation: every tensor must read without harm */
        for (int i = 0; i < ptdp_st_count(f); i++) {
            const ptdp_st_tensor *g = ptdp_st_get(f, i);
            int64_t numel = ptdp_st_numel(g);
            ck_assert(numel >= 0 && numel <= (int64_t)n);
            void *dst = malloc((size_t)numel * 8 + 8);
            int r = g->dtype == PTDP_I64
                        ? ptdp_st_read_i64(f, g->name, g->ndim, g->shape, dst, msg, sizeof msg)
                        : ptdp_st_read_real(f, g->name, g->ndim, g->shape, dst, msg, sizeof msg);
            ck_assert(r == 0 || ((g->dtype != PTDP_F32 && g->dtype != PTDP_F64 && g->dtype != PTDP_I64) &&
                                 r == PTDP_ECORRUPT));
            free(dst);
        }
        ptdp_st_meta(f, "seed");
        ptdp_st_close(f);
    }
#undef RAND
    /* both outcomes occur: data-byte flips stay valid, header damage is caught */
    fprintf(stderr, "fuzz: %d opened, %d rejected\n", opened, rejected);
    ck_assert_int_gt(opened, 10);
    ck_assert_int_gt(rejected, 250);
    free(buf);
    free(orig);
}
END_TEST

int main(void)
{
    return harness_main("safetensors");
}
