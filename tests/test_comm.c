/*
 * test_comm.c — every collective against a sequential reference; every
 * all_reduce algorithm; in place and out of place; split groups; reduce
 * operations and element types; bit-identical results; the byte counts.
 *
 * Inputs are small integers (|x| <= 11), so sums are exact in every type
 * and any reduction order must give exactly the reference.  The test of
 * bit-identical results uses inexact floats instead.
 *
 * A device that finds a wrong value fails itself (DEVICE_CHECK, with the
 * first bad element), so a failure reads like "all_reduce ring in place sum
 * f32 count=7 root=0 n=3: rank 1 element 4 = 3, expected 5".
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ptdp/ptdp.h"

static const size_t sizes[] = { 0, 1, 7, 1000, (size_t)1 << 20 };
static const int groups[] = { 1, 2, 3, 4, 5, 8 };
enum { NSIZES = sizeof sizes / sizeof sizes[0], NGROUPS = sizeof groups / sizeof groups[0] };

/* ---------------------------------------------------------- elements */

static double get(const void *b, ptdp_dtype t, size_t i)
{
    switch (t) {
    case PTDP_F32: return ((const float *)b)[i];
    case PTDP_F64: return ((const double *)b)[i];
    case PTDP_I32: return ((const int32_t *)b)[i];
    case PTDP_I64: return (double)((const int64_t *)b)[i];
    default:       return ((const uint8_t *)b)[i];
    }
}

static void set(void *b, ptdp_dtype t, size_t i, double v)
{
    switch (t) {
    case PTDP_F32: ((float *)b)[i] = (float)v; break;
    case PTDP_F64: ((double *)b)[i] = v; break;
    case PTDP_I32: ((int32_t *)b)[i] = (int32_t)v; break;
    case PTDP_I64: ((int64_t *)b)[i] = (int64_t)v; break;
    default:       ((uint8_t *)b)[i] = (uint8_t)v; break;
    }
}

/* The input element i of rank r: a small integer, periodic in i with
 * period 23 (so a reference needs only 23 values). */
#define PERIOD 23
static double val(int r, size_t i, ptdp_dtype t)
{
    double v = (double)(((size_t)r * 31 + i * 7) % PERIOD);
    return t == PTDP_U8 ? v : v - 11.0;
}

/* The reference: element i reduced over ranks 0..n-1, left to right. */
static double reduced(int n, size_t i, ptdp_dtype t, ptdp_op op)
{
    double acc = val(0, i, t);
    for (int r = 1; r < n; r++) {
        double v = val(r, i, t);
        acc = op == PTDP_MAX ? fmax(acc, v) : op == PTDP_MIN ? fmin(acc, v) : acc + v;
    }
    if (op != PTDP_AVG)
        return acc;
    switch (t) {                       /* divide as the type divides */
    case PTDP_F32: return (double)((float)acc / (float)n);
    case PTDP_F64: return acc / n;
    default:       return (double)((int64_t)acc / n);
    }
}

static void fill(void *b, ptdp_dtype t, size_t n, int r, size_t first)
{
    for (size_t i = 0; i < n; i++)
        set(b, t, i, val(r, first + i, t));
}

/* ------------------------------------------------------------ a case */

typedef struct {
    ptdp_coll op;
    ptdp_algo algo;      /* all_reduce; reduce_scatter/all_gather: ring or shm */
    ptdp_dtype dtype;
    ptdp_op rop;
    size_t count;
    int root;
    int in_place;
} coll_case;

static const char *const rop_names[] = { "sum", "avg", "max", "min" };

/* The case in words, for a failure message (one buffer per device thread). */
static const char *case_name(const coll_case *k, int n)
{
    static _Thread_local char buf[160];
    snprintf(buf, sizeof buf, "%s %s%s %s %s count=%zu root=%d n=%d", ptdp_coll_name(k->op),
             ptdp_algo_name(k->algo), k->in_place ? " in place" : "", rop_names[k->rop],
             ptdp_dtype_name(k->dtype), k->count, k->root, n);
    return buf;
}

/* Compare n elements of got[] with want_expr (a function of i); fail the
 * device at the first difference. */
#define CHECK_ELEMENTS(dev, k, c, got, n, want_expr)                                       \
    for (size_t i = 0; i < (n); i++)                                                       \
        DEVICE_CHECK((dev), get((got), (k)->dtype, i) == (want_expr),                      \
                     "%s: rank %d element %zu = %g, expected %g", case_name((k), ptdp_comm_size(c)), \
                     ptdp_comm_rank(c), i, get((got), (k)->dtype, i), (double)(want_expr))

/* An all-gather's or a gather's result: chunk m holds rank m's slice of
 * the whole vector, element mo + i of it. */
static int check_owners_segments(ptdp_device *dev, const coll_case *k, ptdp_comm *c, const char *recv)
{
    const int n = ptdp_comm_size(c);
    const size_t es = ptdp_dtype_size(k->dtype);
    for (int m = 0; m < n; m++) {
        size_t mo, ml;
        ptdp_share(k->count, n, m, &mo, &ml);
        CHECK_ELEMENTS(dev, k, c, recv + mo * es, ml, val(m, mo + i, k->dtype));
    }
    return PTDP_OK;
}

/* Run one collective on c and check this rank's result. */
static int run_case(ptdp_device *dev, ptdp_comm *c, const coll_case *k)
{
    int n = ptdp_comm_size(c), r = ptdp_comm_rank(c);
    size_t es = ptdp_dtype_size(k->dtype), off, len;
    ptdp_share(k->count, n, r, &off, &len);
    size_t total = k->op == PTDP_COLL_ALL_TO_ALL ? k->count * (size_t)n : k->count;

    char *send = ptdp_alloc(dev, total * es, PTDP_MEM_COMM, "send");
    char *recv = ptdp_alloc(dev, total * es, PTDP_MEM_COMM, "recv");
    if (!send || !recv)
        return PTDP_ENOMEM;
    memset(recv, 0x5a, total * es);                 /* not a plausible result */
    double ref[PERIOD];                              /* reduced(n, i) by i % PERIOD */
    for (size_t j = 0; j < PERIOD; j++)
        ref[j] = reduced(n, j, k->dtype, k->rop);
    int rc = 0;

    switch (k->op) {
    case PTDP_COLL_ALL_REDUCE:
        fill(send, k->dtype, k->count, r, 0);
        rc = k->in_place ? ptdp_all_reduce_algo(c, send, send, k->count, k->dtype, k->rop, k->algo)
                         : ptdp_all_reduce_algo(c, send, recv, k->count, k->dtype, k->rop, k->algo);
        if (rc == 0)
            CHECK_ELEMENTS(dev, k, c, k->in_place ? send : recv, k->count,
                           ref[i % PERIOD]);
        break;
    case PTDP_COLL_REDUCE:
        fill(send, k->dtype, k->count, r, 0);
        rc = ptdp_reduce(c, send, k->in_place && r == k->root ? send : recv, k->count,
                         k->dtype, k->rop, k->root);
        if (rc == 0 && r == k->root)
            CHECK_ELEMENTS(dev, k, c, k->in_place ? send : recv, k->count,
                           ref[i % PERIOD]);
        break;
    case PTDP_COLL_BROADCAST:
        if (r == k->root)
            fill(recv, k->dtype, k->count, r, 0);
        rc = ptdp_broadcast(c, recv, k->count, k->dtype, k->root);
        if (rc == 0)
            CHECK_ELEMENTS(dev, k, c, recv, k->count, val(k->root, i, k->dtype));
        break;
    case PTDP_COLL_ALL_GATHER:
        if (k->in_place) {
            fill(recv + off * es, k->dtype, len, r, off);
            rc = ptdp_all_gather(c, PTDP_IN_PLACE, recv, k->count, k->dtype);
        } else {
            fill(send, k->dtype, len, r, off);
            rc = ptdp_all_gather(c, send, recv, k->count, k->dtype);
        }
        if (rc == 0)   /* element i comes from its chunk's owner */
            rc = check_owners_segments(dev, k, c, recv);
        break;
    case PTDP_COLL_REDUCE_SCATTER:
        if (k->in_place) {
            fill(recv, k->dtype, k->count, r, 0);
            rc = ptdp_reduce_scatter(c, PTDP_IN_PLACE, recv, k->count, k->dtype, k->rop);
        } else {
            fill(send, k->dtype, k->count, r, 0);
            rc = ptdp_reduce_scatter(c, send, recv, k->count, k->dtype, k->rop);
        }
        if (rc == 0)
            CHECK_ELEMENTS(dev, k, c, k->in_place ? recv + off * es : recv, len,
                           ref[(off + i) % PERIOD]);
        break;
    case PTDP_COLL_GATHER:
        fill(send, k->dtype, len, r, off);
        rc = ptdp_gather(c, send, r == k->root ? recv : NULL, k->count, k->dtype, k->root);
        if (rc == 0 && r == k->root)
            rc = check_owners_segments(dev, k, c, recv);
        break;
    case PTDP_COLL_SCATTER:
        if (r == k->root)
            fill(send, k->dtype, k->count, r, 0);
        rc = ptdp_scatter(c, r == k->root ? send : NULL, recv, k->count, k->dtype, k->root);
        if (rc == 0)
            CHECK_ELEMENTS(dev, k, c, recv, len, val(k->root, off + i, k->dtype));
        break;
    case PTDP_COLL_ALL_TO_ALL:
        fill(send, k->dtype, total, r, 0);
        rc = ptdp_all_to_all(c, send, recv, k->count, k->dtype);
        /* block m of recv = block r of rank m's send */
        if (rc == 0)
            for (int m = 0; m < n; m++)
                CHECK_ELEMENTS(dev, k, c, recv + (size_t)m * k->count * es, k->count,
                               val(m, (size_t)r * k->count + i, k->dtype));
        break;
    default:
        rc = ptdp_barrier(c);
        break;
    }
    ptdp_free(dev, recv);
    ptdp_free(dev, send);
    return rc;
}

/* ------------------------------------------------------ many cases */

/* Every collective against the reference: CK_RUN_CASE=reference runs these alone. */
static const harness_tcase reference_tests = { .name = "reference", .timeout_s = 150 };

typedef struct {
    coll_case *cases;
    int ncases;
} case_list;

static int run_cases(ptdp_device *dev, void *arg)
{
    const case_list *l = arg;
    for (int i = 0; i < l->ncases; i++) {
        int rc = run_case(dev, dev->world, &l->cases[i]);
        if (rc)
            return rc;
    }
    return 0;
}

static void launch_cases(int n, coll_case *cases, int ncases)
{
    case_list l = { cases, ncases };
    harness_launch_ok(n, run_cases, &l, &(ptdp_launch_opts){ .device_mem = (size_t)64 << 20 }, NULL);
}

/* Every size, with `make` filling in the variants of one size. */
typedef int (*case_maker)(coll_case *out, size_t count, int n);

static void run_all_groups(case_maker make)
{
    coll_case *cases = calloc(4096, sizeof *cases);
    ck_assert_ptr_nonnull(cases);
    for (int g = 0; g < NGROUPS; g++) {
        int n = groups[g], k = 0;
        for (int s = 0; s < NSIZES; s++)
            k += make(cases + k, sizes[s], n);
        launch_cases(n, cases, k);
    }
    free(cases);
}

static coll_case mk(ptdp_coll op, ptdp_algo algo, ptdp_dtype t, ptdp_op rop, size_t count,
                    int root, int in_place)
{
    coll_case k = { op, algo, t, rop, count, root, in_place };
    return k;
}

/* all_reduce: three algorithms, in and out of place, every reduction and
 * three element types.  The 1M-element size checks chunking and tiling,
 * not the arithmetic again: sum/f32 out of place for each algorithm, and
 * in place for shm (keeps the suite quick under ThreadSanitizer). */
static int make_all_reduce(coll_case *out, size_t count, int n)
{
    (void)n;
    static const ptdp_dtype types[] = { PTDP_F32, PTDP_F64, PTDP_I64 };
    int k = 0;
    for (int a = PTDP_ALGO_NAIVE; a <= PTDP_ALGO_SHM; a++)
        for (int ip = 0; ip < 2; ip++)
            for (int t = 0; t < 3; t++)
                for (int op = 0; op < PTDP_OP_COUNT; op++) {
                    bool big = count > 100000;
                    if (big && (types[t] != PTDP_F32 || op != PTDP_SUM ||
                                (ip && a != PTDP_ALGO_SHM)))
                        continue;
                    out[k++] = mk(PTDP_COLL_ALL_REDUCE, (ptdp_algo)a, types[t], (ptdp_op)op,
                                  count, 0, ip);
                }
    return k;
}

static int make_halves(coll_case *out, size_t count, int n, ptdp_coll op)
{
    (void)n;
    static const ptdp_algo algos[] = { PTDP_ALGO_RING, PTDP_ALGO_SHM };
    int k = 0;
    for (int a = 0; a < 2; a++)
        for (int ip = 0; ip < 2; ip++)
            for (int rop = 0; rop < PTDP_OP_COUNT; rop++) {
                if (op == PTDP_COLL_ALL_GATHER && rop > 0)
                    break;
                if (count > 100000 && (ip || (rop != PTDP_AVG && op == PTDP_COLL_REDUCE_SCATTER)))
                    continue;
                out[k++] = mk(op, algos[a], count > 100000 ? PTDP_F32 : PTDP_F64,
                              (ptdp_op)rop, count, 0, ip);
            }
    return k;
}

static int make_reduce_scatter(coll_case *out, size_t count, int n)
{
    return make_halves(out, count, n, PTDP_COLL_REDUCE_SCATTER);
}

static int make_all_gather(coll_case *out, size_t count, int n)
{
    return make_halves(out, count, n, PTDP_COLL_ALL_GATHER);
}

/* Rooted collectives at the first and the last rank. */
static int make_rooted(coll_case *out, size_t count, int n)
{
    int k = 0;
    int roots[2] = { n - 1, 0 };
    for (int ri = 0; ri < (n > 1 && count < 100000 ? 2 : 1); ri++) {
        int root = roots[ri];
        out[k++] = mk(PTDP_COLL_BROADCAST, PTDP_ALGO_DEFAULT, PTDP_F32, PTDP_SUM, count, root, 0);
        out[k++] = mk(PTDP_COLL_GATHER, PTDP_ALGO_DEFAULT, PTDP_I32, PTDP_SUM, count, root, 0);
        out[k++] = mk(PTDP_COLL_SCATTER, PTDP_ALGO_DEFAULT, PTDP_U8, PTDP_SUM, count, root, 0);
        for (int op = 0; op < PTDP_OP_COUNT; op++)
            for (int ip = 0; ip < 2; ip++)
                if (count < 100000 || op == PTDP_SUM)
                    out[k++] = mk(PTDP_COLL_REDUCE, PTDP_ALGO_DEFAULT, PTDP_F64, (ptdp_op)op,
                                  count, root, ip);
    }
    return k;
}

static int make_all_to_all(coll_case *out, size_t count, int n)
{
    /* count is per block: keep the 1M case at 1M elements in all. */
    size_t per_block = count > 100000 ? count / (size_t)n : count;
    out[0] = mk(PTDP_COLL_ALL_TO_ALL, PTDP_ALGO_DEFAULT, PTDP_F32, PTDP_SUM, per_block, 0, 0);
    out[1] = mk(PTDP_COLL_BARRIER, PTDP_ALGO_DEFAULT, PTDP_F32, PTDP_SUM, 0, 0, 0);
    return 2;
}

TEST(reference_tests, test_all_reduce) { run_all_groups(make_all_reduce); }
END_TEST
TEST(reference_tests, test_reduce_scatter) { run_all_groups(make_reduce_scatter); }
END_TEST
TEST(reference_tests, test_all_gather) { run_all_groups(make_all_gather); }
END_TEST
TEST(reference_tests, test_rooted) { run_all_groups(make_rooted); }
END_TEST
TEST(reference_tests, test_all_to_all_and_barrier) { run_all_groups(make_all_to_all); }
END_TEST

/* The device's own algorithm (opts.algo) drives plain ptdp_all_reduce,
 * reduce_scatter and all_gather. */
static int plain_calls(ptdp_device *dev, void *arg)
{
    (void)arg;
    coll_case k = mk(PTDP_COLL_ALL_REDUCE, PTDP_ALGO_DEFAULT, PTDP_F32, PTDP_SUM, 1001, 0, 0);
    int rc = run_case(dev, dev->world, &k);
    k.op = PTDP_COLL_REDUCE_SCATTER;
    if (rc == 0)
        rc = run_case(dev, dev->world, &k);
    k.op = PTDP_COLL_ALL_GATHER;
    if (rc == 0)
        rc = run_case(dev, dev->world, &k);
    return rc;
}

TEST(reference_tests, test_default_algorithm_from_options)
{
    for (int a = 0; a < PTDP_ALGO_COUNT; a++)
        if (a != PTDP_ALGO_MPI)     /* MPI_Allreduce: the MPI backend's alone */
            harness_launch_ok(3, plain_calls, NULL, &(ptdp_launch_opts){ .algo = (ptdp_algo)a }, NULL);
    ck_assert_int_eq(ptdp_launch(3, plain_calls, NULL, &(ptdp_launch_opts){ .algo = PTDP_ALGO_MPI }),
                     PTDP_EINVAL);
    ck_assert_str_eq(ptdp_algo_name(PTDP_ALGO_RING), "ring");
    ptdp_algo a;
    ck_assert_int_eq(ptdp_algo_parse("shm", &a), 0);
    ck_assert_int_eq(a, PTDP_ALGO_SHM);
    ck_assert_int_eq(ptdp_algo_parse("tree", &a), PTDP_EINVAL);
}
END_TEST

/* ------------------------------------------------------------ split */

static const harness_tcase split_tests = { .name = "split", .timeout_s = 60 };

typedef struct {
    int rank_in_half[8], rank_in_pair[8], reversed[8];
    int none_is_null[8];
} split_seen;

static int split_groups(ptdp_device *dev, void *arg)
{
    split_seen *seen = arg;
    int r = dev->rank;
    ptdp_comm *half = NULL, *pair = NULL, *rev = NULL, *none = (ptdp_comm *)1;
    int rc = ptdp_comm_split(dev->world, r / 4, r, "half", &half);          /* {0-3} {4-7} */
    if (rc == 0)
        rc = ptdp_comm_split(dev->world, r % 4, r, "pair", &pair);          /* {0,4} {1,5}… */
    if (rc == 0)
        rc = ptdp_comm_split(dev->world, 0, -r, "rev", &rev);               /* reversed */
    if (rc == 0)
        rc = ptdp_comm_split(dev->world, r == 3 ? -1 : 1, 0, "most", &none); /* 3 joins none */
    if (rc)
        return rc;
    seen->rank_in_half[r] = ptdp_comm_rank(half);
    seen->rank_in_pair[r] = ptdp_comm_rank(pair);
    seen->reversed[r] = ptdp_comm_rank(rev);
    seen->none_is_null[r] = none == NULL;
    DEVICE_CHECK(dev, ptdp_comm_size(half) == 4 && ptdp_comm_size(pair) == 2 &&
                 ptdp_comm_world_rank(pair, 1) == r % 4 + 4 && strcmp(ptdp_comm_name(half), "half") == 0,
                 "rank %d: wrong split groups", r);

    /* Collectives on both splits at once: each group is independent. */
    static const ptdp_algo algos[] = { PTDP_ALGO_NAIVE, PTDP_ALGO_RING, PTDP_ALGO_SHM };
    for (int a = 0; a < 3 && rc == 0; a++) {
        for (size_t ci = 0; ci < 3 && rc == 0; ci++) {
            size_t count = (size_t[]){ 1, 7, 4099 }[ci];
            coll_case k = mk(PTDP_COLL_ALL_REDUCE, algos[a], PTDP_F32, PTDP_SUM, count, 0, 0);
            ptdp_comm *c = (r + a) % 2 ? half : pair;
            rc = run_case(dev, c, &k);
            if (rc == 0)
                rc = run_case(dev, c == half ? pair : half, &k);
            if (rc == 0 && none) {
                k.op = PTDP_COLL_REDUCE_SCATTER;
                rc = run_case(dev, none, &k);
            }
        }
    }
    ptdp_comm_free(half);
    ptdp_comm_free(pair);
    ptdp_comm_free(rev);
    ptdp_comm_free(none);
    return rc;
}

TEST(split_tests, test_split)
{
    split_seen seen;
    memset(&seen, 0, sizeof seen);
    ptdp_launch_result res;
    harness_launch_ok(8, split_groups, &seen, NULL, &res);
    for (int r = 0; r < 8; r++) {
        ck_assert_int_eq(seen.rank_in_half[r], r % 4);
        ck_assert_int_eq(seen.rank_in_pair[r], r / 4);
        ck_assert_int_eq(seen.reversed[r], 7 - r);
        ck_assert_int_eq(seen.none_is_null[r], r == 3);
    }
    /* Statistics per group name. */
    const ptdp_comm_stats *s = &res.devices[0].comm;
    int found = 0;
    for (int g = 0; g < s->ngroups; g++)
        if (strcmp(s->group[g].name, "half") == 0 || strcmp(s->group[g].name, "pair") == 0) {
            found++;
            ck_assert(s->group[g].sent > 0 && s->group[g].calls > 0);
        }
    ck_assert_int_eq(found, 2);
    ptdp_launch_result_free(&res);
}
END_TEST

/* ------------------------------------------------- bit-identical */

static const harness_tcase bits_tests = { .name = "bits", .timeout_s = 60 };

typedef struct {
    ptdp_algo algo;
    size_t count;
    float *out[8];        /* each device's result, copied out by it */
} bits_run;

static int inexact_all_reduce(ptdp_device *dev, void *arg)
{
    bits_run *b = arg;
    float *x = ptdp_alloc(dev, b->count * sizeof *x, PTDP_MEM_COMM, "x");
    if (!x)
        return PTDP_ENOMEM;
    uint64_t key = ptdp_rng_key(42, "bits");
    for (size_t i = 0; i < b->count; i++)
        x[i] = (float)ptdp_rng_normal(key, (uint64_t)dev->rank * b->count + i) * 1e3f;
    int rc = ptdp_all_reduce_algo(dev->world, x, x, b->count, PTDP_F32, PTDP_AVG, b->algo);
    if (rc == 0)
        memcpy(b->out[dev->rank], x, b->count * sizeof *x);
    ptdp_free(dev, x);
    return rc;
}

TEST(bits_tests, test_bit_identical)
{
    static const ptdp_algo algos[] = { PTDP_ALGO_NAIVE, PTDP_ALGO_RING, PTDP_ALGO_SHM };
    static const int ns[] = { 3, 5, 8 };
    for (int a = 0; a < 3; a++)
        for (int ni = 0; ni < 3; ni++) {
            int n = ns[ni];
            bits_run run[2];
            for (int t = 0; t < 2; t++) {
                run[t].algo = algos[a];
                run[t].count = 100003;
                for (int r = 0; r < n; r++)
                    run[t].out[r] = malloc(run[t].count * sizeof(float));
                harness_launch_ok(n, inexact_all_reduce, &run[t], NULL, NULL);
            }
            for (int t = 0; t < 2; t++)
                for (int r = 0; r < n; r++)
                    ck_assert_msg(memcmp(run[t].out[r], run[0].out[0], 100003 * sizeof(float)) == 0,
                                  "%s n=%d: run %d rank %d differs from run 0 rank 0",
                                  ptdp_algo_name(algos[a]), n, t, r);
            for (int t = 0; t < 2; t++)
                for (int r = 0; r < n; r++)
                    free(run[t].out[r]);
        }
}
END_TEST

/* ------------------------------------------------------ byte counts */

static const harness_tcase bytes_tests = { .name = "bytes", .timeout_s = 60 };

typedef struct {
    coll_case k;
} one_case;

static int run_one(ptdp_device *dev, void *arg)
{
    return run_case(dev, dev->world, &((one_case *)arg)->k);
}

/* Run one collective on n devices; return every device's comm stats. */
static void stats_of(int n, coll_case k, ptdp_comm_stats *out)
{
    one_case oc = { k };
    ptdp_launch_result res;
    harness_launch_ok(n, run_one, &oc, &(ptdp_launch_opts){ .algo = k.algo }, &res);
    for (int r = 0; r < n; r++)
        out[r] = res.devices[r].comm;
    ptdp_launch_result_free(&res);
}

static size_t segment_len(size_t count, int n, int r)
{
    size_t off, len;
    ptdp_share(count, n, (r % n + n) % n, &off, &len);
    return len;
}

#define ASSERT_BYTES(st, op, r, want_sent, want_recv, what)                              \
    do {                                                                                 \
        ck_assert_msg((st).bytes_sent[op] == (double)(want_sent),                        \
                      "%s n=%d rank %d: sent %.0f, expected %.0f", what, n, r,           \
                      (st).bytes_sent[op], (double)(want_sent));                         \
        ck_assert_msg((st).bytes_recv[op] == (double)(want_recv),                        \
                      "%s n=%d rank %d: received %.0f, expected %.0f", what, n, r,       \
                      (st).bytes_recv[op], (double)(want_recv));                         \
        ck_assert_msg((st).calls[op] == 1, "%s: %llu calls", what, (st).calls[op]);      \
        ck_assert((st).total_sent == (double)(want_sent));                               \
    } while (0)

TEST(bytes_tests, test_bytes_textbook)
{
    /* count divisible by every n: the textbook numbers exactly. */
    const size_t count = 840;                 /* 2^3 * 3 * 5 * 7 */
    ptdp_comm_stats st[8];
    for (int g = 0; g < NGROUPS; g++) {
        int n = groups[g];
        double S = (double)count * 4;
        for (int a = PTDP_ALGO_RING; a <= PTDP_ALGO_SHM; a++) {
            stats_of(n, mk(PTDP_COLL_ALL_REDUCE, (ptdp_algo)a, PTDP_F32, PTDP_SUM, count, 0, 0), st);
            for (int r = 0; r < n; r++)
                ASSERT_BYTES(st[r], PTDP_COLL_ALL_REDUCE, r, 2.0 * (n - 1) / n * S,
                             2.0 * (n - 1) / n * S, "all_reduce ring/shm");
            stats_of(n, mk(PTDP_COLL_REDUCE_SCATTER, (ptdp_algo)a, PTDP_F32, PTDP_SUM, count, 0, 0), st);
            for (int r = 0; r < n; r++)
                ASSERT_BYTES(st[r], PTDP_COLL_REDUCE_SCATTER, r, (double)(n - 1) / n * S,
                             (double)(n - 1) / n * S, "reduce_scatter");
            stats_of(n, mk(PTDP_COLL_ALL_GATHER, (ptdp_algo)a, PTDP_F32, PTDP_SUM, count, 0, 0), st);
            for (int r = 0; r < n; r++)
                ASSERT_BYTES(st[r], PTDP_COLL_ALL_GATHER, r, (double)(n - 1) / n * S,
                             (double)(n - 1) / n * S, "all_gather");
        }
    }
}
END_TEST

TEST(bytes_tests, test_bytes_exact)
{
    /* count not divisible: the exact chunk sums of each algorithm. */
    const size_t count = 1003;
    const double es = 8;
    ptdp_comm_stats st[8];
    for (int g = 0; g < NGROUPS; g++) {
        int n = groups[g];
        double S = (double)count * es;
#define LEN(r) ((double)segment_len(count, n, (r)) * es)
        stats_of(n, mk(PTDP_COLL_ALL_REDUCE, PTDP_ALGO_RING, PTDP_F64, PTDP_SUM, count, 0, 0), st);
        for (int r = 0; r < n; r++)       /* RS: all chunks but r; AG: all but r+1 / r */
            ASSERT_BYTES(st[r], PTDP_COLL_ALL_REDUCE, r,
                         n == 1 ? 0 : 2 * S - LEN(r) - LEN(r + 1),
                         n == 1 ? 0 : 2 * S - LEN(r - 1) - LEN(r), "ring all_reduce");
        stats_of(n, mk(PTDP_COLL_ALL_REDUCE, PTDP_ALGO_SHM, PTDP_F64, PTDP_SUM, count, 0, 0), st);
        for (int r = 0; r < n; r++)
            ASSERT_BYTES(st[r], PTDP_COLL_ALL_REDUCE, r, S - LEN(r) + (n - 1) * LEN(r),
                         (n - 1) * LEN(r) + S - LEN(r), "shm all_reduce");
        stats_of(n, mk(PTDP_COLL_ALL_REDUCE, PTDP_ALGO_NAIVE, PTDP_F64, PTDP_SUM, count, 0, 0), st);
        for (int r = 0; r < n; r++)
            ASSERT_BYTES(st[r], PTDP_COLL_ALL_REDUCE, r, r == 0 ? (n - 1) * S : S,
                         r == 0 ? (n - 1) * S : S, "naive all_reduce");
        stats_of(n, mk(PTDP_COLL_REDUCE_SCATTER, PTDP_ALGO_RING, PTDP_F64, PTDP_SUM, count, 0, 0), st);
        for (int r = 0; r < n; r++)
            ASSERT_BYTES(st[r], PTDP_COLL_REDUCE_SCATTER, r, n == 1 ? 0 : S - LEN(r),
                         n == 1 ? 0 : S - LEN(r - 1), "ring reduce_scatter");
        stats_of(n, mk(PTDP_COLL_REDUCE_SCATTER, PTDP_ALGO_SHM, PTDP_F64, PTDP_SUM, count, 0, 0), st);
        for (int r = 0; r < n; r++)
            ASSERT_BYTES(st[r], PTDP_COLL_REDUCE_SCATTER, r, S - LEN(r), (n - 1) * LEN(r),
                         "shm reduce_scatter");
        stats_of(n, mk(PTDP_COLL_ALL_GATHER, PTDP_ALGO_RING, PTDP_F64, PTDP_SUM, count, 0, 0), st);
        for (int r = 0; r < n; r++)
            ASSERT_BYTES(st[r], PTDP_COLL_ALL_GATHER, r, n == 1 ? 0 : S - LEN(r + 1),
                         n == 1 ? 0 : S - LEN(r), "ring all_gather");
        stats_of(n, mk(PTDP_COLL_ALL_GATHER, PTDP_ALGO_SHM, PTDP_F64, PTDP_SUM, count, 0, 0), st);
        for (int r = 0; r < n; r++)
            ASSERT_BYTES(st[r], PTDP_COLL_ALL_GATHER, r, (n - 1) * LEN(r), S - LEN(r),
                         "shm all_gather");

        int root = n - 1;
        stats_of(n, mk(PTDP_COLL_BROADCAST, PTDP_ALGO_DEFAULT, PTDP_F64, PTDP_SUM, count, root, 0), st);
        for (int r = 0; r < n; r++)
            ASSERT_BYTES(st[r], PTDP_COLL_BROADCAST, r, r == root ? (n - 1) * S : 0,
                         r == root ? 0 : S, "broadcast");
        stats_of(n, mk(PTDP_COLL_REDUCE, PTDP_ALGO_DEFAULT, PTDP_F64, PTDP_SUM, count, root, 0), st);
        for (int r = 0; r < n; r++)
            ASSERT_BYTES(st[r], PTDP_COLL_REDUCE, r, r == root ? 0 : S,
                         r == root ? (n - 1) * S : 0, "reduce");
        stats_of(n, mk(PTDP_COLL_GATHER, PTDP_ALGO_DEFAULT, PTDP_F64, PTDP_SUM, count, root, 0), st);
        for (int r = 0; r < n; r++)
            ASSERT_BYTES(st[r], PTDP_COLL_GATHER, r, r == root ? 0 : LEN(r),
                         r == root ? S - LEN(root) : 0, "gather");
        stats_of(n, mk(PTDP_COLL_SCATTER, PTDP_ALGO_DEFAULT, PTDP_F64, PTDP_SUM, count, root, 0), st);
        for (int r = 0; r < n; r++)
            ASSERT_BYTES(st[r], PTDP_COLL_SCATTER, r, r == root ? S - LEN(root) : 0,
                         r == root ? 0 : LEN(r), "scatter");
        stats_of(n, mk(PTDP_COLL_ALL_TO_ALL, PTDP_ALGO_DEFAULT, PTDP_F64, PTDP_SUM, count, 0, 0), st);
        for (int r = 0; r < n; r++)
            ASSERT_BYTES(st[r], PTDP_COLL_ALL_TO_ALL, r, (n - 1) * S, (n - 1) * S, "all_to_all");
        stats_of(n, mk(PTDP_COLL_BARRIER, PTDP_ALGO_DEFAULT, PTDP_F64, PTDP_SUM, 0, 0, 0), st);
        for (int r = 0; r < n; r++)
            ASSERT_BYTES(st[r], PTDP_COLL_BARRIER, r, 0, 0, "barrier");
#undef LEN
    }
}
END_TEST

/* --------------------------------------------------- virtual clock */

static int skewed_all_reduce(ptdp_device *dev, void *arg)
{
    (void)arg;
    float x[1024] = { 0 };
    ptdp_compute_seconds(dev, "work", 1e-3 * dev->rank, ptdp_wall_now());
    return ptdp_all_reduce(dev->world, x, x, 1024, PTDP_F32, PTDP_SUM);
}

TEST(bytes_tests, test_virtual_clock)
{
    ptdp_launch_result res;
    harness_launch_ok(4, skewed_all_reduce, NULL, NULL, &res);
    double cost = ptdp_cost_collective(ptdp_profile_default(), PTDP_COLL_ALL_REDUCE, 4096, 4);
    ck_assert(cost > 0);
    for (int r = 0; r < 4; r++) {
        const ptdp_clock *c = &res.devices[r].clock;
        /* Everyone starts when the slowest (rank 3, 3 ms) arrives. */
        ck_assert_double_eq_tol(c->now, 3e-3 + cost, 1e-12);
        ck_assert_double_eq_tol(c->idle_s, 1e-3 * (3 - r), 1e-12);
        ck_assert_double_eq_tol(c->comm_s, cost, 1e-15);
        ck_assert_double_eq_tol(c->compute_s, 1e-3 * r, 1e-15);
    }
    ptdp_launch_result_free(&res);
}
END_TEST

/* ----------------------------------------------------- all_to_allv */

static const harness_tcase v_tests = { .name = "all_to_allv", .timeout_s = 60 };

/* How many elements rank i sends rank j: uneven, with zeros (every third
 * pair, and all of rank 1's row when `row_of_zeros`). */
static size_t v_count(int i, int j, int n, bool row_of_zeros)
{
    if (row_of_zeros && i == 1)
        return 0;
    return (size_t)((3 * i + 5 * j + n) % 7) * ((i + j) % 3 != 0);
}

/* The element at position e of rank i's block for rank j. */
static double v_val(int i, int j, size_t e)
{
    return (double)(100 * i + 10 * j) + (double)(e % 10);
}

typedef struct {
    bool gaps;             /* displacements with a gap between blocks, reversed order */
    bool row_of_zeros;
    bool exchange;         /* learn recv_counts with ptdp_all_to_all_counts */
    ptdp_dtype t;
} v_case;

static int run_v(ptdp_device *dev, void *arg)
{
    const v_case *vc = arg;
    const int n = dev->world_size, me = dev->rank;
    size_t sc[PTDP_MAX_DEVICES], sd[PTDP_MAX_DEVICES], rcn[PTDP_MAX_DEVICES], rd[PTDP_MAX_DEVICES];
    size_t send_len = 0, recv_len = 0;
    for (int j = n - 1; j >= 0; j--) {          /* reversed: displacements need not follow ranks */
        int k = vc->gaps ? j : n - 1 - j;
        sc[k] = v_count(me, k, n, vc->row_of_zeros);
        sd[k] = send_len + (vc->gaps ? 2 : 0);
        send_len = sd[k] + sc[k];
        rcn[k] = vc->exchange ? 0 : v_count(k, me, n, vc->row_of_zeros);
        rd[k] = recv_len + (vc->gaps ? 3 : 0);
        recv_len = rd[k] + v_count(k, me, n, vc->row_of_zeros);
    }
    size_t es = ptdp_dtype_size(vc->t);
    unsigned char *send = calloc(send_len + 1, es), *recv = calloc(recv_len + 1, es);
    int rc = send && recv ? 0 : PTDP_ENOMEM;
    for (int j = 0; rc == 0 && j < n; j++)
        for (size_t e = 0; e < sc[j]; e++)
            set(send, vc->t, sd[j] + e, v_val(me, j, e));
    if (rc == 0 && vc->exchange)
        rc = ptdp_all_to_all_counts(dev->world, sc, rcn);
    if (rc == 0)
        rc = ptdp_all_to_allv(dev->world, send, sc, vc->gaps ? sd : NULL, recv, rcn, vc->gaps ? rd : NULL, vc->t);
    size_t packed = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        size_t at = vc->gaps ? rd[i] : packed;
        if (rcn[i] != v_count(i, me, n, vc->row_of_zeros))
            rc = ptdp_fail(dev, PTDP_ECHECK, "rank %d: %zu counts from rank %d", me, rcn[i], i);
        for (size_t e = 0; rc == 0 && e < rcn[i]; e++)
            if (get(recv, vc->t, at + e) != v_val(i, me, e))
                rc = ptdp_fail(dev, PTDP_ECHECK, "rank %d: element %zu from rank %d = %g, expected %g", me, e, i,
                               get(recv, vc->t, at + e), v_val(i, me, e));
        packed += rcn[i];
    }
    free(send);
    free(recv);
    return rc;
}

TEST(v_tests, test_all_to_allv_uneven_and_zero_counts)
{
    for (int g = 0; g < NGROUPS; g++)
        for (int mode = 0; mode < 8; mode++) {
            v_case vc = { .gaps = mode & 1, .row_of_zeros = mode & 2, .exchange = mode & 4,
                          .t = mode & 1 ? PTDP_F64 : PTDP_I32 };
            harness_launch_ok(groups[g], run_v, &vc, NULL, NULL);
        }
}
END_TEST

/* Bytes: what leaves for the others and arrives from them (own block
 * stays); the clock: (n-1) alpha + the busiest member's bytes / beta. */
TEST(v_tests, test_all_to_allv_bytes_and_clock)
{
    const int n = 4;
    v_case vc = { .t = PTDP_F32 };
    ptdp_launch_result res;
    harness_launch_ok(n, run_v, &vc, NULL, &res);
    double busiest = 0;
    for (int r = 0; r < n; r++) {
        double sent = 0, recv = 0;
        for (int j = 0; j < n; j++)
            if (j != r) {
                sent += 4.0 * (double)v_count(r, j, n, false);
                recv += 4.0 * (double)v_count(j, r, n, false);
            }
        ASSERT_BYTES(res.devices[r].comm, PTDP_COLL_ALL_TO_ALLV, r, sent, recv, "all_to_allv");
        busiest = fmax(busiest, fmax(sent, recv));
    }
    const ptdp_profile *p = ptdp_profile_default();
    double want = ptdp_cost_collective(p, PTDP_COLL_ALL_TO_ALLV, (size_t)busiest, n);
    ck_assert_double_eq_tol(want, 3 * p->alpha_s + busiest / p->beta_Bps, 1e-15);
    for (int r = 0; r < n; r++)
        ck_assert_double_eq_tol(res.devices[r].clock.comm_s, want, 1e-15);
    ptdp_launch_result_free(&res);
    /* Equal blocks: the same time as all_to_all's (n-1)(alpha + S/(n beta)). */
    ck_assert_double_eq_tol(ptdp_cost_collective(p, PTDP_COLL_ALL_TO_ALLV, 3 * 1024, 4),
                            ptdp_cost_collective(p, PTDP_COLL_ALL_TO_ALL, 4 * 1024, 4), 1e-15);
}
END_TEST

/* Rank 2 expects one element less from rank 1 than rank 1 sends it. */
static int v_mismatch(ptdp_device *dev, void *arg)
{
    (void)arg;
    size_t sc[3] = { 1, 1, 1 }, rcn[3] = { 1, 1, 1 };
    if (dev->rank == 1)
        sc[2] = 2;
    float send[4] = { 0 }, recv[4] = { 0 };
    return ptdp_all_to_allv(dev->world, send, sc, NULL, recv, rcn, NULL, PTDP_F32);
}

static int v_null_counts(ptdp_device *dev, void *arg)
{
    (void)arg;
    size_t sc[2] = { 1, 1 };
    float send[2] = { 0 }, recv[2] = { 0 };
    return ptdp_all_to_allv(dev->world, send, sc, NULL, recv, NULL, NULL, PTDP_F32);
}

/* Counts whose sum overflows, and a displacement past any buffer. */
static int v_huge_counts(ptdp_device *dev, void *arg)
{
    (void)arg;
    size_t sc[2] = { SIZE_MAX / 2, SIZE_MAX / 2 }, rcn[2] = { 1, 1 };
    float send[2] = { 0 }, recv[2] = { 0 };
    return ptdp_all_to_allv(dev->world, send, sc, NULL, recv, rcn, NULL, PTDP_F32);
}

static int v_huge_displ(ptdp_device *dev, void *arg)
{
    (void)arg;
    size_t sc[2] = { 1, 1 }, sd[2] = { 0, SIZE_MAX / 4 * 3 }, rcn[2] = { 1, 1 };
    float send[2] = { 0 }, recv[2] = { 0 };
    return ptdp_all_to_allv(dev->world, send, sc, sd, recv, rcn, NULL, PTDP_F32);
}

TEST(v_tests, test_all_to_allv_mismatch_names_both_calls)
{
    HARNESS_LAUNCH_FAILS(3, v_mismatch, NULL, PTDP_EMISMATCH, "mismatched all_to_allv counts in group 'world'",
                         "rank 1 sends 2 elements to rank 2 (at test_comm.c:",
                         "but rank 2 expects 1 from rank 1 (at test_comm.c:");
    HARNESS_LAUNCH_FAILS(2, v_null_counts, NULL, PTDP_EINVAL, "ptdp_all_to_allv at test_comm.c:",
                         "recv_counts is NULL (one count per member: 2)");
    HARNESS_LAUNCH_FAILS(2, v_huge_counts, NULL, PTDP_EINVAL, "ptdp_all_to_allv at test_comm.c:",
                         "send_counts add up to more than");
    HARNESS_LAUNCH_FAILS(2, v_huge_displ, NULL, PTDP_EINVAL, "send_displs[1] = ", "is too large");
}
END_TEST

int main(void)
{
    return harness_main("comm");
}
