/*
 * test_arena.c — the device memory arena: allocation, alignment, reuse,
 * coalescing, accounting, out-of-memory messages, red zones, sizes.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "ptdp/arena.h"
#include "ptdp/error.h"

static const harness_tcase arena_tests = { .name = "arena", .timeout_s = 60 };

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

/* ThreadSanitizer's allocator aborts on an impossible size instead of
 * returning NULL, so the host-refusal test runs only without it. */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static void *must_alloc(ptdp_arena *a, size_t bytes, ptdp_mem_category cat, const char *name)
{
    void *p = (void *)1;
    char msg[256] = "";
    int rc = ptdp_arena_alloc(a, bytes, cat, name, &p, msg, sizeof msg);
    ck_assert_msg(rc == 0, "alloc of %zu bytes failed: %s", bytes, msg);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* Every byte of p[0..n) equals v.  (A loop of ck_assert per byte would be
 * slow: each one records a checkpoint.) */
static int all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return 0;
    return 1;
}

static int all_zero(const unsigned char *p, size_t n) { return all_bytes(p, n, 0); }

/* ---- Allocation ---------------------------------------------------------------- */

TEST(arena_tests, test_alloc_aligned_zeroed_distinct)
{
    ptdp_arena *a = ptdp_arena_create(64 * MiB, 0);
    ck_assert_ptr_nonnull(a);
    static const size_t sizes[] = { 1, 3, 63, 64, 65, 100, 1000, 4097, 123457, 3 * MiB };
    enum { N = sizeof sizes / sizeof sizes[0] };
    unsigned char *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = must_alloc(a, sizes[i], PTDP_MEM_OTHER, "t");
        ck_assert_msg((uintptr_t)p[i] % 64 == 0, "block %d not 64-byte aligned", i);
        ck_assert_msg(all_zero(p[i], sizes[i]), "block %d not zero-filled", i);
        memset(p[i], 0x11 * (i + 1), sizes[i]);   /* write all of it */
    }
    /* No two blocks overlap: every block still holds its own byte. */
    for (int i = 0; i < N; i++)
        ck_assert_msg(all_bytes(p[i], sizes[i], (unsigned char)(0x11 * (i + 1))),
                      "block %d was overwritten", i);
    for (int i = 0; i < N; i++)
        ptdp_arena_free(a, p[i]);
    ptdp_mem_stats s;
    ptdp_arena_stats(a, &s);
    ck_assert_uint_eq(s.current_total, 0);
    ck_assert_uint_eq(s.allocations, 0);
    ptdp_arena_destroy(a);
}
END_TEST

TEST(arena_tests, test_zero_bytes_unique)
{
    ptdp_arena *a = ptdp_arena_create(0, 0);    /* capacity 0 still allows 0 bytes */
    void *p = must_alloc(a, 0, PTDP_MEM_OTHER, "empty1");
    void *q = must_alloc(a, 0, PTDP_MEM_OTHER, "empty2");
    ck_assert_ptr_ne(p, q);
    void *r = (void *)1;
    ck_assert_int_eq(ptdp_arena_alloc(a, 1, PTDP_MEM_OTHER, "one", &r, NULL, 0), PTDP_ENOMEM);
    ck_assert_ptr_null(r);
    ptdp_arena_free(a, p);
    ptdp_arena_free(a, q);
    ptdp_arena_free(a, NULL);                   /* ignored */
    ptdp_arena_destroy(a);
}
END_TEST

TEST(arena_tests, test_huge_capacity_costs_nothing)
{
    /* A terabyte of capacity: only what is used is taken from the host. */
    ptdp_arena *a = ptdp_arena_create((size_t)1 << 40, 0);
    ck_assert_ptr_nonnull(a);
    void *p = must_alloc(a, 1000, PTDP_MEM_PARAMS, "w");
    ptdp_mem_stats s;
    ptdp_arena_stats(a, &s);
    ck_assert_uint_eq(s.capacity, (size_t)1 << 40);
    ck_assert_uint_eq(s.current_total, 1000);
    ptdp_arena_free(a, p);
    ptdp_arena_destroy(a);
}
END_TEST

/* ---- Reuse and coalescing --------------------------------------------------------- */

TEST(arena_tests, test_free_block_is_reused)
{
    ptdp_arena *a = ptdp_arena_create(64 * MiB, 0);
    void *p = must_alloc(a, 5000, PTDP_MEM_ACTS, "x");
    ptdp_arena_free(a, p);
    void *q = must_alloc(a, 5000, PTDP_MEM_ACTS, "x again");
    ck_assert_ptr_eq(p, q);
    ck_assert(all_zero(q, 5000));
    ptdp_arena_free(a, q);
    ptdp_arena_destroy(a);
}
END_TEST

/* Two neighbours of 400 KiB, freed, must merge: a 700 KiB block then fits
 * exactly where the first one was, which only a merged block can offer.
 * _i selects the order of the frees (next-side and prev-side merges). */
LOOP_TEST(arena_tests, test_coalesce_neighbours, 2)
{
    ptdp_arena *a = ptdp_arena_create(64 * MiB, 0);
    void *x = must_alloc(a, 400 * KiB, PTDP_MEM_ACTS, "x");
    void *y = must_alloc(a, 400 * KiB, PTDP_MEM_ACTS, "y");
    void *z = must_alloc(a, 16 * KiB, PTDP_MEM_ACTS, "z");   /* keeps y from the tail */
    if (_i == 0) {
        ptdp_arena_free(a, x);
        ptdp_arena_free(a, y);
    } else {
        ptdp_arena_free(a, y);
        ptdp_arena_free(a, x);
    }
    void *big = must_alloc(a, 700 * KiB, PTDP_MEM_ACTS, "big");
    ck_assert_ptr_eq(big, x);
    ck_assert(all_zero(big, 700 * KiB));   /* old contents never leak through */
    ptdp_arena_free(a, big);
    ptdp_arena_free(a, z);
    ptdp_arena_destroy(a);
}
END_TEST

TEST(arena_tests, test_coalesce_both_sides)
{
    ptdp_arena *a = ptdp_arena_create(64 * MiB, 0);
    void *x = must_alloc(a, 300 * KiB, PTDP_MEM_ACTS, "x");
    void *y = must_alloc(a, 300 * KiB, PTDP_MEM_ACTS, "y");
    void *z = must_alloc(a, 300 * KiB, PTDP_MEM_ACTS, "z");
    void *w = must_alloc(a, 16 * KiB, PTDP_MEM_ACTS, "w");
    ptdp_arena_free(a, x);
    ptdp_arena_free(a, z);
    ptdp_arena_free(a, y);      /* merges with x before it and z after it */
    void *big = must_alloc(a, 850 * KiB, PTDP_MEM_ACTS, "big");
    ck_assert_ptr_eq(big, x);
    ptdp_arena_free(a, big);
    ptdp_arena_free(a, w);
    ptdp_arena_destroy(a);
}
END_TEST

/* Random allocations and frees across several chunks: every live block keeps
 * its contents (no overlap), new blocks are zeroed, the books balance. */
TEST(arena_tests, test_random_stress)
{
    enum { SLOTS = 64, STEPS = 3000 };
    ptdp_arena *a = ptdp_arena_create(256 * MiB, 7);
    unsigned char *ptr[SLOTS] = { 0 };
    size_t size[SLOTS] = { 0 };
    uint64_t state = 12345;
    for (int step = 0; step < STEPS; step++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        int k = (int)((state >> 33) % SLOTS);
        if (ptr[k] != NULL) {
            ck_assert_msg(all_bytes(ptr[k], size[k], (unsigned char)k), "slot %d clobbered", k);
            ptdp_arena_free(a, ptr[k]);
            ptr[k] = NULL;
        } else {
            size[k] = (size_t)((state >> 20) % (3 * 64 * KiB));   /* 0 .. 192 KiB */
            ptr[k] = must_alloc(a, size[k], (ptdp_mem_category)(k % PTDP_MEM_NCAT), "s");
            ck_assert(all_zero(ptr[k], size[k]));
            memset(ptr[k], k, size[k]);
        }
        size_t live = 0, blocks = 0;
        for (int j = 0; j < SLOTS; j++)
            if (ptr[j] != NULL) {
                live += size[j];
                blocks++;
            }
        ptdp_mem_stats s;
        ptdp_arena_stats(a, &s);
        ck_assert_uint_eq(s.current_total, live);
        ck_assert_uint_eq(s.allocations, blocks);
    }
    for (int j = 0; j < SLOTS; j++)
        ptdp_arena_free(a, ptr[j]);
    ptdp_arena_destroy(a);
}
END_TEST

/* ---- Accounting ------------------------------------------------------------------- */

TEST(arena_tests, test_category_peaks)
{
    ptdp_arena *a = ptdp_arena_create(64 * MiB, 0);
    void *w = must_alloc(a, 1000, PTDP_MEM_PARAMS, "w");
    void *g = must_alloc(a, 1000, PTDP_MEM_GRADS, "g");
    void *a1 = must_alloc(a, 3000, PTDP_MEM_ACTS, "a1");
    void *a2 = must_alloc(a, 5000, PTDP_MEM_ACTS, "a2");
    ptdp_arena_free(a, a1);
    ptdp_arena_free(a, a2);
    void *m = must_alloc(a, 7000, PTDP_MEM_OPTIM, "m");

    ptdp_mem_stats s;
    ptdp_arena_stats(a, &s);
    ck_assert_uint_eq(s.current[PTDP_MEM_PARAMS], 1000);
    ck_assert_uint_eq(s.current[PTDP_MEM_GRADS], 1000);
    ck_assert_uint_eq(s.current[PTDP_MEM_ACTS], 0);
    ck_assert_uint_eq(s.peak[PTDP_MEM_ACTS], 8000);
    ck_assert_uint_eq(s.current[PTDP_MEM_OPTIM], 7000);
    ck_assert_uint_eq(s.peak[PTDP_MEM_OPTIM], 7000);
    ck_assert_uint_eq(s.peak[PTDP_MEM_COMM], 0);
    ck_assert_uint_eq(s.current_total, 9000);
    ck_assert_uint_eq(s.peak_total, 10000);    /* w + g + a1 + a2, before m */
    ck_assert_uint_eq(s.allocations, 3);

    ptdp_arena_reset_peaks(a);
    ptdp_arena_stats(a, &s);
    ck_assert_uint_eq(s.peak[PTDP_MEM_ACTS], 0);
    ck_assert_uint_eq(s.peak[PTDP_MEM_OPTIM], 7000);
    ck_assert_uint_eq(s.peak_total, 9000);

    ptdp_arena_free(a, w);
    ptdp_arena_free(a, g);
    ptdp_arena_free(a, m);
    ptdp_arena_destroy(a);
}
END_TEST

TEST(arena_tests, test_category_names)
{
    ck_assert_str_eq(ptdp_mem_category_name(PTDP_MEM_PARAMS), "params");
    ck_assert_str_eq(ptdp_mem_category_name(PTDP_MEM_GRADS), "grads");
    ck_assert_str_eq(ptdp_mem_category_name(PTDP_MEM_OPTIM), "optim");
    ck_assert_str_eq(ptdp_mem_category_name(PTDP_MEM_ACTS), "acts");
    ck_assert_str_eq(ptdp_mem_category_name(PTDP_MEM_COMM), "comm");
    ck_assert_str_eq(ptdp_mem_category_name(PTDP_MEM_OTHER), "other");
}
END_TEST

/* ---- Out of memory ------------------------------------------------------------------ */

TEST(arena_tests, test_oom_message_and_no_change)
{
    ptdp_arena *a = ptdp_arena_create(1 * MiB, 3);
    void *p = must_alloc(a, 700 * KiB, PTDP_MEM_ACTS, "blocks.1.act");
    ptdp_mem_stats before, after;
    ptdp_arena_stats(a, &before);

    char msg[256] = "";
    void *q = (void *)1;
    int rc = ptdp_arena_alloc(a, 400 * KiB, PTDP_MEM_PARAMS, "blocks.2.fc1.weight", &q, msg, sizeof msg);
    ck_assert_int_eq(rc, PTDP_ENOMEM);
    ck_assert_ptr_null(q);
    ck_assert_str_eq(msg, "device 3: out of memory allocating 'blocks.2.fc1.weight' "
                          "(400.00 KiB, params): 700.00 KiB in use of 1.00 MiB (--device-mem)");
    ptdp_arena_stats(a, &after);
    ck_assert(memcmp(&before, &after, sizeof before) == 0);

    /* The capacity counts user bytes: exactly what is left still fits. */
    void *rest = must_alloc(a, 324 * KiB, PTDP_MEM_PARAMS, "rest");
    ck_assert_int_eq(ptdp_arena_alloc(a, 1, PTDP_MEM_PARAMS, "one more", &q, NULL, 0), PTDP_ENOMEM);
    ptdp_arena_free(a, rest);
    ptdp_arena_free(a, p);
    ptdp_arena_destroy(a);
}
END_TEST

#ifndef UNDER_TSAN
TEST(arena_tests, test_oom_from_host)
{
    /* An unbounded arena: the host is what says no. */
    ptdp_arena *a = ptdp_arena_create(SIZE_MAX, 5);
    char msg[256] = "";
    void *q = (void *)1;
    int rc = ptdp_arena_alloc(a, SIZE_MAX - 10, PTDP_MEM_ACTS, "huge", &q, msg, sizeof msg);
    ck_assert_int_eq(rc, PTDP_ENOMEM);
    ck_assert_ptr_null(q);
    ck_assert_msg(strstr(msg, "device 5") && strstr(msg, "'huge'") && strstr(msg, "host"), "%s", msg);
#ifndef UNDER_ASAN
    /* Small enough to compute a span, far too large for any host.  (ASan's
     * allocator would abort instead of failing, so only without ASan.) */
    rc = ptdp_arena_alloc(a, SIZE_MAX / 4, PTDP_MEM_ACTS, "too big", &q, msg, sizeof msg);
    ck_assert_int_eq(rc, PTDP_ENOMEM);
    ck_assert_msg(strstr(msg, "'too big'") && strstr(msg, "host"), "%s", msg);
#endif
    ptdp_mem_stats s;
    ptdp_arena_stats(a, &s);
    ck_assert_uint_eq(s.current_total, 0);
    ck_assert_uint_eq(s.allocations, 0);
    void *p = must_alloc(a, 100, PTDP_MEM_ACTS, "small");   /* still usable */
    ptdp_arena_free(a, p);
    ptdp_arena_destroy(a);
}
END_TEST
#endif

/* ---- Bugs are caught: overflow, use after free, bad frees ------------------------- */

static void overflow_into_red_zone(void)
{
    ptdp_arena *a = ptdp_arena_create(64 * MiB, 2);
    void *p = NULL, *q = NULL;
    ptdp_arena_alloc(a, 40 * sizeof(float), PTDP_MEM_ACTS, "fc1.out", &p, NULL, 0);
    ptdp_arena_alloc(a, 40 * sizeof(float), PTDP_MEM_ACTS, "fc2.out", &q, NULL, 0);
    float *volatile f = p;
    f[40] = 1.0f;                       /* one element past the end */
    ptdp_arena_free(a, p);              /* without ASan, the red zone check */
    ptdp_arena_free(a, q);
    ptdp_arena_destroy(a);
}

TEST(arena_tests, test_overflow_is_caught)
{
    char err[1 << 14];
    int status = harness_run_child(overflow_into_red_zone, err, sizeof err);
    ck_assert_msg(!(WIFEXITED(status) && WEXITSTATUS(status) == 0), "overflow went unnoticed");
#ifdef UNDER_ASAN
    ck_assert_msg(strstr(err, "AddressSanitizer") && strstr(err, "use-after-poison"), "%s", err);
#else
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    ck_assert_msg(strstr(err, "device 2") && strstr(err, "outside the bounds of 'fc1.out'"), "%s", err);
#endif
}
END_TEST

static void underflow_into_red_zone(void)
{
    ptdp_arena *a = ptdp_arena_create(64 * MiB, 2);
    void *p = NULL;
    ptdp_arena_alloc(a, 64, PTDP_MEM_ACTS, "x", &p, NULL, 0);
    unsigned char *volatile c = p;
    c[-1] = 7;                          /* one byte before the start */
    ptdp_arena_free(a, p);
    ptdp_arena_destroy(a);
}

TEST(arena_tests, test_underflow_is_caught)
{
    char err[1 << 14];
    int status = harness_run_child(underflow_into_red_zone, err, sizeof err);
    ck_assert_msg(!(WIFEXITED(status) && WEXITSTATUS(status) == 0), "underflow went unnoticed");
#ifdef UNDER_ASAN
    ck_assert_msg(strstr(err, "AddressSanitizer"), "%s", err);
#else
    ck_assert_msg(strstr(err, "outside the bounds of 'x'"), "%s", err);
#endif
}
END_TEST

#ifdef UNDER_ASAN
static void read_after_free(void)
{
    ptdp_arena *a = ptdp_arena_create(64 * MiB, 0);
    void *p = NULL, *keep = NULL;
    ptdp_arena_alloc(a, 256, PTDP_MEM_ACTS, "x", &p, NULL, 0);
    ptdp_arena_alloc(a, 256, PTDP_MEM_ACTS, "keep", &keep, NULL, 0);
    ptdp_arena_free(a, p);
    volatile float *f = p;
    fprintf(stdout, "%f\n", (double)f[3]);
    ptdp_arena_destroy(a);
}

TEST(arena_tests, test_use_after_free_is_caught)
{
    char err[1 << 14];
    int status = harness_run_child(read_after_free, err, sizeof err);
    ck_assert(!(WIFEXITED(status) && WEXITSTATUS(status) == 0));
    ck_assert_msg(strstr(err, "AddressSanitizer") && strstr(err, "use-after-poison"), "%s", err);
}
END_TEST
#endif

static void double_free(void)
{
    ptdp_arena *a = ptdp_arena_create(64 * MiB, 1);
    void *p = NULL, *q = NULL;
    ptdp_arena_alloc(a, 100, PTDP_MEM_ACTS, "twice", &p, NULL, 0);
    ptdp_arena_alloc(a, 100, PTDP_MEM_ACTS, "other", &q, NULL, 0);
    ptdp_arena_free(a, p);
    ptdp_arena_free(a, p);
}

static void foreign_free(void)
{
    ptdp_arena *a = ptdp_arena_create(64 * MiB, 1);
    void *p = NULL;
    ptdp_arena_alloc(a, 100, PTDP_MEM_ACTS, "mine", &p, NULL, 0);
    static char not_mine[256];
    ptdp_arena_free(a, not_mine);
}

static void interior_free(void)
{
    ptdp_arena *a = ptdp_arena_create(64 * MiB, 1);
    void *p = NULL;
    ptdp_arena_alloc(a, 1000, PTDP_MEM_ACTS, "mine", &p, NULL, 0);
    ptdp_arena_free(a, (char *)p + 64);
}

TEST(arena_tests, test_bad_frees_abort)
{
    char err[4096];
    int status = harness_run_child(double_free, err, sizeof err);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    ck_assert_msg(strstr(err, "double free of 'twice'"), "%s", err);

    status = harness_run_child(foreign_free, err, sizeof err);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    ck_assert_msg(strstr(err, "not a pointer from this device's arena"), "%s", err);

    status = harness_run_child(interior_free, err, sizeof err);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    ck_assert_msg(strstr(err, "ptdp_arena_free"), "%s", err);
}
END_TEST

/* ---- Sizes --------------------------------------------------------------------------- */

TEST(arena_tests, test_parse_size_good)
{
    static const struct { const char *text; size_t bytes; } good[] = {
        { "0", 0 }, { "64", 64 }, { "1048576", 1048576 },
        { "4K", 4096 }, { "4k", 4096 }, { "512M", 512 * MiB }, { "512m", 512 * MiB },
        { "1G", (size_t)1 << 30 }, { "4G", (size_t)4 << 30 },
        { "512MiB", 512 * MiB }, { "512MB", 512 * MiB }, { "64B", 64 }, { "2KiB", 2048 },
        { "007", 7 },
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        size_t b = 12345;
        ck_assert_msg(ptdp_parse_size(good[i].text, &b) == 0, "'%s' refused", good[i].text);
        ck_assert_msg(b == good[i].bytes, "'%s' gave %zu", good[i].text, b);
    }
    char max[32];
    snprintf(max, sizeof max, "%zu", (size_t)SIZE_MAX);
    size_t b = 0;
    ck_assert_int_eq(ptdp_parse_size(max, &b), 0);
    ck_assert(b == SIZE_MAX);
}
END_TEST

TEST(arena_tests, test_parse_size_bad)
{
    static const char *const bad[] = {
        "", "-1", "+1", " 1", "1 ", "12Q", "1.5G", "M", "G1", "1KK", "1iB", "1Bi",
        "0x10", "1e3", "1KB2", "1 M", "1MiBB", "1T",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t b = 777;
        ck_assert_msg(ptdp_parse_size(bad[i], &b) == PTDP_EINVAL, "'%s' accepted", bad[i]);
        ck_assert_msg(b == 777, "'%s' changed the output", bad[i]);
    }
    size_t b;
    ck_assert_int_eq(ptdp_parse_size(NULL, &b), PTDP_EINVAL);

    /* Overflow: one more than SIZE_MAX, and a unit that pushes past it. */
    char text[48];
    snprintf(text, sizeof text, "%zu0", (size_t)SIZE_MAX);
    ck_assert_int_eq(ptdp_parse_size(text, &b), PTDP_EINVAL);
    snprintf(text, sizeof text, "%zuG", ((size_t)SIZE_MAX >> 30) + 1);
    ck_assert_int_eq(ptdp_parse_size(text, &b), PTDP_EINVAL);
    snprintf(text, sizeof text, "%zuG", (size_t)SIZE_MAX >> 30);   /* the largest that fits */
    ck_assert_int_eq(ptdp_parse_size(text, &b), 0);
    ck_assert(b == (((size_t)SIZE_MAX >> 30) << 30));
}
END_TEST

TEST(arena_tests, test_format_bytes)
{
    char buf[32];
    ck_assert_str_eq(ptdp_format_bytes(0, buf, sizeof buf), "0 B");
    ck_assert_str_eq(ptdp_format_bytes(1023, buf, sizeof buf), "1023 B");
    ck_assert_str_eq(ptdp_format_bytes(1024, buf, sizeof buf), "1.00 KiB");
    ck_assert_str_eq(ptdp_format_bytes(1.5 * 1024 * 1024, buf, sizeof buf), "1.50 MiB");
    ck_assert_str_eq(ptdp_format_bytes(4.0 * (1 << 30), buf, sizeof buf), "4.00 GiB");
    ck_assert_str_eq(ptdp_format_bytes(511.2 * 1024 * 1024, buf, sizeof buf), "511.20 MiB");
    ck_assert_str_eq(ptdp_format_bytes(3.0 * 1099511627776.0, buf, sizeof buf), "3.00 TiB");
}
END_TEST

int main(void)
{
    return harness_main("arena");
}
