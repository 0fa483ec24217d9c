/*
 * test_tensor.c — views keep their stride; copy, add, slice and concat work on
 * strided views on both sides; ptdp_share partitions; tensors in the arena.
 * Built and run in both precisions.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/tensor.h"
#include "ptdp/launch.h"

/* A value that tells where it came from: (tag, i, j) -> tag*10000 + i*100 + j,
 * exact in float for the sizes used here. */
static ptdp_real val(int tag, int i, int j) { return (ptdp_real)(tag * 10000 + i * 100 + j); }

static void fill_pattern(ptdp_tensor t, int tag)
{
    for (int i = 0; i < t.rows; i++)
        for (int j = 0; j < t.cols; j++)
            *ptdp_at(t, i, j) = val(tag, i, j);
}

/* An 8 x 10 parent filled with -1, so that writes outside a view show. */
#define PR 8
#define PC 10
static ptdp_real parent_buf[PR * PC];
static ptdp_tensor parent(void)
{
    ptdp_tensor p = ptdp_tensor_wrap(parent_buf, PR, PC);
    ptdp_tensor_fill(p, -1);
    return p;
}

/* Everything in p outside rows [r0,r0+nr) x cols [c0,c0+nc) is still -1. */
static int untouched_outside(ptdp_tensor p, int r0, int nr, int c0, int nc)
{
    for (int i = 0; i < p.rows; i++)
        for (int j = 0; j < p.cols; j++) {
            int inside = i >= r0 && i < r0 + nr && j >= c0 && j < c0 + nc;
            if (!inside && *ptdp_at(p, i, j) != -1)
                return 0;
        }
    return 1;
}

static const harness_tcase views_tests = { .name = "views" };

/* ---- Views ----------------------------------------------------------------- */

TEST(views_tests, test_views_keep_stride)
{
    ptdp_tensor p = parent();
    fill_pattern(p, 1);
    ptdp_tensor c = ptdp_tensor_cols(p, 3, 4);
    ck_assert_int_eq(c.rows, PR);
    ck_assert_int_eq(c.cols, 4);
    ck_assert_int_eq(c.stride, PC);
    ck_assert(!c.owned);
    ck_assert(!ptdp_tensor_contiguous(c));
    ck_assert(*ptdp_at(c, 5, 2) == val(1, 5, 5));

    ptdp_tensor r = ptdp_tensor_rows(c, 2, 3);     /* a view of a view */
    ck_assert_int_eq(r.rows, 3);
    ck_assert_int_eq(r.cols, 4);
    ck_assert_int_eq(r.stride, PC);
    ck_assert(*ptdp_at(r, 1, 3) == val(1, 3, 6));

    ptdp_tensor rows = ptdp_tensor_rows(p, 6, 2);
    ck_assert(ptdp_tensor_contiguous(rows));
    ck_assert_ptr_eq(rows.data, p.data + 6 * PC);
    ck_assert_uint_eq(ptdp_tensor_numel(rows), 2 * PC);

    ptdp_tensor one_row = ptdp_tensor_rows(c, 0, 1);
    ck_assert(ptdp_tensor_contiguous(one_row));      /* a single row always is */

    ptdp_tensor empty = ptdp_tensor_cols(p, PC, 0);
    ck_assert_int_eq(empty.cols, 0);
    ck_assert_uint_eq(ptdp_tensor_numel(empty), 0);
}
END_TEST

TEST(views_tests, test_fill_zero_on_view)
{
    ptdp_tensor p = parent();
    ptdp_tensor v = ptdp_tensor_rows(ptdp_tensor_cols(p, 2, 5), 1, 4);
    ptdp_tensor_fill(v, 3);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++)
            ck_assert(*ptdp_at(v, i, j) == 3);
    ck_assert(untouched_outside(p, 1, 4, 2, 5));
    ptdp_tensor_zero(v);
    ck_assert(*ptdp_at(p, 4, 6) == 0);
    ck_assert(untouched_outside(p, 1, 4, 2, 5));
}
END_TEST

/* ---- Copy and add, all four combinations of contiguous and strided -------------- */

TEST(views_tests, test_copy_strided_both_sides)
{
    ptdp_real src_buf[4 * 12], dst_flat[3 * 4];
    ptdp_tensor src_parent = ptdp_tensor_wrap(src_buf, 4, 12);
    fill_pattern(src_parent, 2);
    ptdp_tensor src = ptdp_tensor_rows(ptdp_tensor_cols(src_parent, 5, 4), 1, 3);   /* strided */

    /* strided -> contiguous */
    ptdp_tensor flat = ptdp_tensor_wrap(dst_flat, 3, 4);
    ptdp_tensor_copy(flat, src);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            ck_assert(*ptdp_at(flat, i, j) == val(2, i + 1, j + 5));

    /* contiguous -> strided, and strided -> strided: nothing outside moves */
    ptdp_tensor p = parent();
    ptdp_tensor dst = ptdp_tensor_rows(ptdp_tensor_cols(p, 4, 4), 2, 3);
    ptdp_tensor_copy(dst, flat);
    ck_assert(*ptdp_at(p, 3, 5) == val(2, 2, 6));
    ck_assert(untouched_outside(p, 2, 3, 4, 4));

    p = parent();
    ptdp_tensor_copy(dst, src);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            ck_assert(*ptdp_at(p, i + 2, j + 4) == val(2, i + 1, j + 5));
    ck_assert(untouched_outside(p, 2, 3, 4, 4));

    /* contiguous -> contiguous */
    ptdp_real again[3 * 4];
    ptdp_tensor_copy(ptdp_tensor_wrap(again, 3, 4), flat);
    ck_assert(memcmp(again, dst_flat, sizeof again) == 0);

    /* empty shapes are fine */
    ptdp_tensor_copy(ptdp_tensor_cols(ptdp_tensor_rows(p, 0, 4), 0, 0), ptdp_tensor_cols(src_parent, 0, 0));
    ptdp_tensor_copy(ptdp_tensor_rows(p, 0, 0), ptdp_tensor_rows(p, 8, 0));
}
END_TEST

TEST(views_tests, test_add_strided)
{
    ptdp_real src_buf[8 * 6];
    ptdp_tensor s = ptdp_tensor_wrap(src_buf, 8, 6);
    fill_pattern(s, 0);
    ptdp_tensor p = parent();
    ptdp_tensor dst = ptdp_tensor_cols(p, 1, 3);
    ptdp_tensor_add(dst, ptdp_tensor_cols(s, 2, 3));      /* -1 + (i*100 + j+2) */
    ptdp_tensor_add(dst, ptdp_tensor_cols(s, 2, 3));
    for (int i = 0; i < PR; i++)
        for (int j = 0; j < 3; j++)
            ck_assert(*ptdp_at(p, i, j + 1) == -1 + 2 * val(0, i, j + 2));
    ck_assert(untouched_outside(p, 0, PR, 1, 3));
}
END_TEST

/* ---- Slices and concatenation ---------------------------------------------------- */

TEST(views_tests, test_slice_cols_and_rows)
{
    ptdp_real big_buf[6 * 9], out_buf[6 * 4];
    ptdp_tensor big = ptdp_tensor_wrap(big_buf, 6, 9);
    fill_pattern(big, 3);
    ptdp_tensor view = ptdp_tensor_cols(big, 1, 7);            /* slice from a view */

    ptdp_tensor out = ptdp_tensor_wrap(out_buf, 6, 4);
    ptdp_tensor_slice_cols(out, view, 2);                      /* cols 3..6 of big */
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 4; j++)
            ck_assert(*ptdp_at(out, i, j) == val(3, i, j + 3));

    ptdp_tensor p = parent();
    ptdp_tensor into = ptdp_tensor_cols(ptdp_tensor_rows(p, 3, 2), 2, 7);   /* strided dst */
    ptdp_tensor_slice_rows(into, view, 4);                     /* rows 4..5 */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 7; j++)
            ck_assert(*ptdp_at(p, i + 3, j + 2) == val(3, i + 4, j + 1));
    ck_assert(untouched_outside(p, 3, 2, 2, 7));
}
END_TEST

/* Cut a matrix into uneven column shards (as TP does), glue them back. */
TEST(views_tests, test_concat_cols_round_trip)
{
    ptdp_real full_buf[5 * 11], shard_buf[11 * 5];
    ptdp_tensor full = ptdp_tensor_wrap(full_buf, 5, 11);
    fill_pattern(full, 4);

    ptdp_tensor parts[3];
    int c0 = 0;
    ptdp_real *next = shard_buf;
    for (int k = 0; k < 3; k++) {
        size_t off, len;
        ptdp_share(11, 3, k, &off, &len);                      /* 4 4 3 */
        ck_assert_int_eq((int)off, c0);
        parts[k] = ptdp_tensor_wrap(next, 5, (int)len);
        ptdp_tensor_slice_cols(parts[k], full, c0);
        next += 5 * len;
        c0 += (int)len;
    }
    /* Glue into a strided destination inside the parent. */
    static ptdp_real wide_buf[5 * 14];
    ptdp_tensor wide = ptdp_tensor_wrap(wide_buf, 5, 14);
    ptdp_tensor_fill(wide, -1);
    ptdp_tensor dst = ptdp_tensor_cols(wide, 2, 11);
    ptdp_tensor_concat_cols(dst, parts, 3);
    double diff = -1, maxb = -1;
    ptdp_tensor_max_diff(dst, full, &diff, &maxb);
    ck_assert(diff == 0);
    ck_assert(maxb == (double)val(4, 4, 10));
    ck_assert(*ptdp_at(wide, 0, 0) == -1 && *ptdp_at(wide, 4, 13) == -1);
}
END_TEST

TEST(views_tests, test_concat_rows_from_views)
{
    ptdp_real a_buf[2 * 8], b_buf[3 * 8];
    ptdp_tensor a = ptdp_tensor_wrap(a_buf, 2, 8), b = ptdp_tensor_wrap(b_buf, 3, 8);
    fill_pattern(a, 5);
    fill_pattern(b, 6);
    /* parts are column views (strided), dst is a strided view too */
    ptdp_tensor parts[2] = { ptdp_tensor_cols(a, 1, 6), ptdp_tensor_cols(b, 2, 6) };
    ptdp_tensor p = parent();
    ptdp_tensor dst = ptdp_tensor_cols(ptdp_tensor_rows(p, 1, 5), 3, 6);
    ptdp_tensor_concat_rows(dst, parts, 2);
    for (int j = 0; j < 6; j++) {
        ck_assert(*ptdp_at(dst, 0, j) == val(5, 0, j + 1));
        ck_assert(*ptdp_at(dst, 1, j) == val(5, 1, j + 1));
        for (int i = 0; i < 3; i++)
            ck_assert(*ptdp_at(dst, i + 2, j) == val(6, i, j + 2));
    }
    ck_assert(untouched_outside(p, 1, 5, 3, 6));
}
END_TEST

/* ---- Comparison ------------------------------------------------------------------ */

TEST(views_tests, test_max_diff)
{
    ptdp_real x[6] = { 1, -2, 3, 4, 5, 6 };
    ptdp_real y[6] = { 1, -2.5, 3, 4, 5, -7 };
    double d, m;
    ptdp_tensor_max_diff(ptdp_tensor_wrap(x, 2, 3), ptdp_tensor_wrap(y, 2, 3), &d, &m);
    ck_assert(d == 13.0);
    ck_assert(m == 7.0);

    /* Computed in double: in float, 1e8 - 1.5 would round to 1e8 (the float
     * spacing there is 8); in double it is exact in either build. */
    ptdp_real big = (ptdp_real)1e8, small = (ptdp_real)1.5;
    ptdp_tensor_max_diff(ptdp_tensor_wrap(&big, 1, 1), ptdp_tensor_wrap(&small, 1, 1), &d, NULL);
    ck_assert(d == 99999998.5);

    /* A NaN is never hidden by a later, smaller difference. */
    ptdp_real n1[3] = { 0, 0, 0 }, n2[3] = { 1, (ptdp_real)NAN, 0.5 };
    ptdp_tensor_max_diff(ptdp_tensor_wrap(n1, 1, 3), ptdp_tensor_wrap(n2, 1, 3), &d, &m);
    ck_assert(isnan(d));
    ck_assert(isnan(m));
    ck_assert(!(d <= 1e-3));

    /* Strided views compare only their own elements. */
    ptdp_tensor p = parent();
    ptdp_tensor q = ptdp_tensor_cols(p, 0, 2);
    ptdp_tensor_fill(q, 5);
    ptdp_real fives[PR * 2];
    ptdp_tensor f = ptdp_tensor_wrap(fives, PR, 2);
    ptdp_tensor_fill(f, 5);
    ptdp_tensor_max_diff(q, f, &d, &m);
    ck_assert(d == 0 && m == 5);

    ptdp_tensor_max_diff(ptdp_tensor_cols(p, 0, 0), ptdp_tensor_cols(p, 0, 0), &d, &m);
    ck_assert(d == 0 && m == 0);
}
END_TEST

/* ---- Chunking -------------------------------------------------------------------- */

TEST(views_tests, test_chunk_partition)
{
    size_t off, len;
    static const size_t want[4][2] = { { 0, 3 }, { 3, 3 }, { 6, 2 }, { 8, 2 } };
    for (int k = 0; k < 4; k++) {
        ptdp_share(10, 4, k, &off, &len);
        ck_assert_uint_eq(off, want[k][0]);
        ck_assert_uint_eq(len, want[k][1]);
    }
    for (size_t count = 0; count <= 130; count++)
        for (int parts = 1; parts <= 17; parts++) {
            size_t expect_off = 0;
            for (int k = 0; k < parts; k++) {
                ptdp_share(count, parts, k, &off, &len);
                ck_assert_uint_eq(off, expect_off);                  /* contiguous */
                size_t base = count / (size_t)parts;
                ck_assert_uint_eq(len, base + ((size_t)k < count % (size_t)parts));
                expect_off += len;
            }
            ck_assert_uint_eq(expect_off, count);                    /* covers all */
        }
    /* Large counts do not overflow. */
    size_t huge = (size_t)SIZE_MAX - 5;
    ptdp_share(huge, 64, 63, &off, &len);
    ck_assert(off + len == huge);
}
END_TEST

/* ---- Tensors in a device's arena (ptdp_launch) ----------------------------------- */

static const harness_tcase arena_tests = { .name = "arena", .timeout_s = 30 };

static int alloc_and_free(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_tensor w, a;
    DEVICE_TRY(ptdp_tensor_alloc(dev, &w, "blocks.0.fc1.weight", PTDP_MEM_PARAMS, 33, 17));
    DEVICE_CHECK(dev, w.owned && w.rows == 33 && w.cols == 17 && w.stride == 17, "a %d x %d tensor, stride %d",
                 w.rows, w.cols, w.stride);
    DEVICE_CHECK(dev, strcmp(w.name, "blocks.0.fc1.weight") == 0, "named '%s'", w.name);
    DEVICE_CHECK(dev, (uintptr_t)w.data % 64 == 0, "at %p", (void *)w.data);
    double d, m;
    ptdp_real zeros[33 * 17];
    memset(zeros, 0, sizeof zeros);
    ptdp_tensor_max_diff(w, ptdp_tensor_wrap(zeros, 33, 17), &d, &m);
    DEVICE_CHECK(dev, d == 0 && m == 0, "not zero-filled: largest value %g", m);
    ptdp_tensor_fill(w, (ptdp_real)dev->rank);

    DEVICE_TRY(ptdp_tensor_alloc(dev, &a, "acts", PTDP_MEM_ACTS, 0, 5));   /* empty ok */
    DEVICE_CHECK(dev, a.data != NULL && a.rows == 0, "an empty tensor of %d rows", a.rows);

    ptdp_mem_stats s;
    ptdp_arena_stats(dev->arena, &s);
    DEVICE_CHECK(dev, s.current[PTDP_MEM_PARAMS] == 33 * 17 * sizeof(ptdp_real), "%zu parameter bytes",
                 s.current[PTDP_MEM_PARAMS]);
    DEVICE_CHECK(dev, s.allocations == 2, "%zu allocations", s.allocations);

    ptdp_tensor view = ptdp_tensor_cols(w, 2, 3);
    ptdp_tensor_free(dev, &view);                         /* a view: nothing happens */
    DEVICE_CHECK(dev, view.data != NULL, "freeing a view cleared it");
    ptdp_arena_stats(dev->arena, &s);
    DEVICE_CHECK(dev, s.allocations == 2, "%zu allocations after freeing a view", s.allocations);

    ptdp_tensor_free(dev, &w);
    DEVICE_CHECK(dev, w.data == NULL && !w.owned && w.rows == 0, "not cleared");
    ptdp_tensor_free(dev, &w);                            /* and harmless twice */
    ptdp_tensor_free(dev, &a);
    ptdp_arena_stats(dev->arena, &s);
    DEVICE_CHECK(dev, s.current_total == 0, "%zu bytes still in use", s.current_total);
    DEVICE_CHECK(dev, s.peak[PTDP_MEM_PARAMS] == 33 * 17 * sizeof(ptdp_real), "parameter peak %zu",
                 s.peak[PTDP_MEM_PARAMS]);
    return 0;
}

TEST(arena_tests, test_tensor_alloc_in_arena)
{
    harness_launch_ok(3, alloc_and_free, NULL, NULL, NULL);
}
END_TEST

static int bad_shape(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_tensor t;
    return ptdp_tensor_alloc(dev, &t, "w", PTDP_MEM_PARAMS, -3, 4);
}

/* Rank 1 asks for more than its arena holds: the launch fails with the arena's
 * message naming the tensor, and rank 1 gets PTDP_ENOMEM back. */
static int too_big(ptdp_device *dev, void *arg)
{
    int *rc_seen = arg;
    ptdp_tensor t;
    int rows = dev->rank == 1 ? 1024 : 1;
    int rc = ptdp_tensor_alloc(dev, &t, "blocks.2.fc1.weight", PTDP_MEM_PARAMS, rows, 1024);
    if (dev->rank == 1) {
        rc_seen[0] = rc;
        rc_seen[1] = t.data == NULL && !t.owned;
        return rc;
    }
    ptdp_tensor_free(dev, &t);
    return rc;
}

TEST(arena_tests, test_tensor_alloc_out_of_memory)
{
    ptdp_launch_result res;
    ptdp_launch_opts opts = { .device_mem = (size_t)1 << 20 };   /* 1 MiB; rank 1 wants 4 or 8 */
    int seen[2] = { 0, 0 };
    int rc = harness_launch(2, too_big, seen, &opts, &res);
    ck_assert_int_eq(rc, PTDP_ENOMEM);
    ck_assert_int_eq(res.status, PTDP_ENOMEM);
    ck_assert_int_eq(res.failed_rank, 1);
    ck_assert_int_eq(seen[0], PTDP_ENOMEM);
    ck_assert_int_eq(seen[1], 1);
    ASSERT_HAS(res.message, "device 1");
    ASSERT_HAS(res.message, "'blocks.2.fc1.weight'");
    ASSERT_HAS(res.message, "1.00 MiB");
    ASSERT_HAS(res.message, "--device-mem");
    ptdp_launch_result_free(&res);
}
END_TEST

TEST(arena_tests, test_tensor_alloc_bad_shape)
{
    HARNESS_LAUNCH_FAILS(1, bad_shape, NULL, PTDP_EINVAL, "'w'", "-3");
}
END_TEST

int main(void)
{
    return harness_main("tensor-" PTDP_REAL_NAME);
}
