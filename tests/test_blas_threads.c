/*
 * test_blas_threads.c — a device's matrix products shared by its helper
 * threads (src/nn/blas.c, src/runtime/pool.c): the same bits for any
 * number of threads, a failing device still stops every device, and the
 * default count (ptdp_blas_threads).
 *
 * The products are large enough to be split (at least 3 blocks of 48 rows,
 * each over 2^20 multiply-adds) and their row counts are not multiples of
 * 48, so the last block also takes the leftover rows; C is a column view of
 * a wider matrix, so its leading dimension is not its width.  The training
 * runs (losses, checkpoints) are compared in tests/cli/blas_threads.sh.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ptdp/ptdp.h"

static const harness_tcase blas_tests = { .name = "blas_threads", .timeout_s = 120 };

enum { M = 245, N = 160, K = 150, WIDE = N + 7, CASES = 8 };

typedef struct {
    ptdp_real *c[CASES];           /* M x WIDE each: the products' outputs */
    int group;                     /* 0: products alone; 1: all CASES in one
                                      group (ops.h: queued, each whole on one
                                      thread); 2: each a group of its own (a
                                      member larger than a thread's share:
                                      split, as alone) */
} products;

static ptdp_real value(unsigned i, unsigned salt)
{
    unsigned h = (i + 1) * 2654435761u ^ salt * 40503u;
    h ^= h >> 15;
    return (ptdp_real)((double)(h % 2001) / 1000.0 - 1.0);
}

/* Every transpose, with beta 0 and beta 0.5, into a view of a wider C. */
static int multiply(ptdp_device *dev, void *arg)
{
    (void)dev;
    products *p = arg;
    ptdp_real *a = malloc(sizeof *a * M * K), *b = malloc(sizeof *b * K * N);
    if (!a || !b) {
        free(a);
        free(b);
        return PTDP_ENOMEM;
    }
    for (unsigned i = 0; i < M * K; i++)
        a[i] = value(i, 1);
    for (unsigned i = 0; i < K * N; i++)
        b[i] = value(i, 2);
    if (p->group == 1)
        ptdp_matmul_group_begin();
    for (int cs = 0; cs < CASES; cs++) {
        bool ta = cs & 1, tb = cs & 2;
        double beta = cs & 4 ? 0.5 : 0.0;
        for (unsigned i = 0; i < M * WIDE; i++)
            p->c[cs][i] = value(i, 3);
        ptdp_tensor c = ptdp_tensor_cols(ptdp_tensor_wrap(p->c[cs], M, WIDE), 3, N);
        ptdp_tensor at = ta ? ptdp_tensor_wrap(a, K, M) : ptdp_tensor_wrap(a, M, K);
        ptdp_tensor bt = tb ? ptdp_tensor_wrap(b, N, K) : ptdp_tensor_wrap(b, K, N);
        if (p->group == 2)
            ptdp_matmul_group_begin();
        ptdp_matmul(c, at, ta, bt, tb, 0.75, beta);
        if (p->group == 2)
            ptdp_matmul_group_end();
    }
    if (p->group == 1)
        ptdp_matmul_group_end();
    free(a);
    free(b);
    return 0;
}

/* Each device of a launch its own outputs: arg is products[world size]. */
static int multiply_mine(ptdp_device *dev, void *arg)
{
    return multiply(dev, (products *)arg + dev->rank);
}

static void products_alloc(products *p)
{
    p->group = 0;
    for (int cs = 0; cs < CASES; cs++)
        ck_assert_ptr_nonnull(p->c[cs] = malloc(sizeof(ptdp_real) * M * WIDE));
}

static void products_free(products *p)
{
    for (int cs = 0; cs < CASES; cs++)
        free(p->c[cs]);
}

TEST(blas_tests, test_same_bits_for_any_thread_count)
{
    products one, many;
    products_alloc(&one);
    products_alloc(&many);
    ptdp_launch_opts o = { .blas_threads = 1 };
    harness_launch_ok(1, multiply, &one, &o, NULL);
    for (int t = 2; t <= 5; t++) {
        o.blas_threads = t;
        harness_launch_ok(1, multiply, &many, &o, NULL);
        for (int cs = 0; cs < CASES; cs++)
            ck_assert_msg(memcmp(one.c[cs], many.c[cs], sizeof(ptdp_real) * M * WIDE) == 0,
                          "%d threads: product %d (trans_a %d, trans_b %d, beta %s) differs from one thread's",
                          t, cs, cs & 1, (cs >> 1) & 1, cs & 4 ? "0.5" : "0");
    }
    /* Two devices with 3 threads each at once: their own pools, the same bits. */
    products two[2];
    products_alloc(&two[0]);
    products_alloc(&two[1]);
    o.blas_threads = 3;
    harness_launch_ok(2, multiply_mine, two, &o, NULL);
    for (int cs = 0; cs < CASES; cs++)
        for (int r = 0; r < 2; r++)
            ck_assert(memcmp(one.c[cs], two[r].c[cs], sizeof(ptdp_real) * M * WIDE) == 0);
    products_free(&two[0]);
    products_free(&two[1]);
    products_free(&one);
    products_free(&many);
}
END_TEST

/* A group of products (the experts' GEMMs: ptdp_matmul_group_begin/_end)
 * gives every product the bits it has alone on one thread, whether its
 * members run whole side by side or one is split, for 1 to 5 threads. */
TEST(blas_tests, test_group_same_bits)
{
    products one, many;
    products_alloc(&one);
    products_alloc(&many);
    ptdp_launch_opts o = { .blas_threads = 1 };
    harness_launch_ok(1, multiply, &one, &o, NULL);
    for (int group = 1; group <= 2; group++)
        for (int t = 1; t <= 5; t++) {
            o.blas_threads = t;
            many.group = group;
            harness_launch_ok(1, multiply, &many, &o, NULL);
            for (int cs = 0; cs < CASES; cs++)
                ck_assert_msg(memcmp(one.c[cs], many.c[cs], sizeof(ptdp_real) * M * WIDE) == 0,
                              "%s, %d threads: product %d differs from one thread's alone",
                              group == 1 ? "one group" : "a group each", t, cs);
        }
    products_free(&one);
    products_free(&many);
}
END_TEST

/* Devices multiply, then meet; rank 1 fails after its first product. */
static int multiply_then_fail(ptdp_device *dev, void *arg)
{
    (void)arg;
    products p;
    for (int cs = 0; cs < CASES; cs++)
        if (!(p.c[cs] = malloc(sizeof(ptdp_real) * M * WIDE)))
            return PTDP_ENOMEM;
    int rc = multiply(dev, &p);
    for (int cs = 0; cs < CASES; cs++)
        free(p.c[cs]);
    if (rc == 0 && dev->rank == 1)
        return ptdp_fail(dev, PTDP_EUSER, "device 1 stops after its products");
    return rc ? rc : ptdp_barrier(dev->world);
}

TEST(blas_tests, test_a_failing_device_stops_every_device)
{
    ptdp_launch_opts o = { .blas_threads = 3, .watchdog_s = 10 };
    ptdp_launch_result res;
    int rc = harness_launch(3, multiply_then_fail, NULL, &o, &res);
    ck_assert_int_eq(rc, PTDP_EUSER);
    ck_assert_int_eq(res.failed_rank, 1);
    ck_assert_ptr_nonnull(strstr(res.message, "device 1 stops"));
    ptdp_launch_result_free(&res);
}
END_TEST

TEST(blas_tests, test_default_thread_count)
{
    char *saved = getenv("OPENBLAS_NUM_THREADS");
    saved = saved ? strdup(saved) : NULL;
    unsetenv("OPENBLAS_NUM_THREADS");
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    ck_assert_int_eq(ptdp_blas_threads(3, 1), 3);                 /* asked   */
    ck_assert_int_eq(ptdp_blas_threads(0, 1), cores);             /* cores   */
    ck_assert_int_eq(ptdp_blas_threads(0, (int)cores * 2), 1);    /* at least 1 */
    setenv("OPENBLAS_NUM_THREADS", "5", 1);
    ck_assert_int_eq(ptdp_blas_threads(0, 4), 5);                 /* per device */
    ck_assert_int_eq(ptdp_blas_threads(2, 4), 2);                 /* asked wins */
    setenv("OPENBLAS_NUM_THREADS", "five", 1);
    ck_assert_int_eq(ptdp_blas_threads(0, 1), cores);             /* not a number: ignored */
    setenv("OPENBLAS_NUM_THREADS", "0", 1);
    ck_assert_int_eq(ptdp_blas_threads(0, 1), cores);
    if (saved) {
        setenv("OPENBLAS_NUM_THREADS", saved, 1);
        free(saved);
    } else {
        unsetenv("OPENBLAS_NUM_THREADS");
    }
}
END_TEST

int main(void)
{
    return harness_main("blas_threads");
}
