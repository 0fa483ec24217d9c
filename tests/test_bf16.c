/*
 * test_bf16.c — bfloat16: rounding against a reference written differently,
 * collectives on bf16 buffers, BF16 in safetensors, the mixed-precision
 * optimizer steps.
 *
 * The reference rounding uses no bit tricks: it finds the bf16 step at x's
 * magnitude with frexp/ldexp (2^(e-8) in the binade [2^(e-1), 2^e), the
 * denormal step 2^-133 below 2^-126), rounds x/step to an integer with
 * rint (ties to even in the default rounding mode) and encodes the result
 * arithmetically (exponent field, 7-bit fraction).  The library adds
 * 0x7FFF plus the kept part's last bit; they share no code and no idea.
 *
 * Which floats are checked.  All 2^32 patterns against the reference took
 * 426 s on a 2-core machine, and all agreed;
 *     PTDP_BF16_EXHAUSTIVE=1 CK_RUN_CASE=rounding CK_TIMEOUT_MULTIPLIER=20 build/tests/test_bf16_f32
 * runs it again and prints the time.  Far too slow for the unit suite, which
 * checks instead (in about 0.2 s): every one of the 65536 bf16
 * values with each low half 0x0000, 0x0001, 0x3FFF, 0x7FFF, 0x8000 (the tie),
 * 0x8001, 0xBFFF, 0xFFFF — every value, both its neighbours from inside and
 * every halfway case, NaN payloads, ±inf, ±0, denormals, the largest finite
 * values — plus 4 million random patterns.
 *
 * Collectives: every all_reduce algorithm and reduce_scatter on 2, 3 and 4
 * devices with inexact bf16 inputs, against a reference that rounds after
 * every pair in the order the algorithm combines (ranks 0, 1, … for naive
 * and shm; around the ring from chunk + 1 for the ring), so the comparison
 * is bit for bit.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "ptdp/bf16.h"
#include "ptdp/optim.h"
#include "ptdp/ptdp.h"
#include "ptdp/safetensors.h"

/* ------------------------------------------------- the reference rounding */

static float float_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t bits_of_float(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* x rounded to bf16, to nearest even, as bf16 bits; from the definition. */
static uint16_t reference_bf16(double x)
{
    if (isnan(x))
        return 0x7FC0;
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs(x);
    const double largest = ldexp(255.0, 120);          /* (2 - 2^-7) · 2^127 */
    if (isinf(a))
        return sign | 0x7F80;
    if (a == 0)
        return sign;
    int e;
    frexp(a, &e);                                      /* a in [2^(e-1), 2^e) */
    int step_exp = (e - 1 < -126 ? -126 : e - 1) - 7;  /* 8 significant bits */
    double r = ldexp(rint(ldexp(a, -step_exp)), step_exp);
    if (r > largest)
        return sign | 0x7F80;
    if (r == 0)
        return sign;
    if (r < ldexp(1.0, -126))                          /* denormal: fraction · 2^-133 */
        return sign | (uint16_t)ldexp(r, 133);
    frexp(r, &e);
    unsigned biased = (unsigned)(e - 1 + 127);
    unsigned fraction = (unsigned)((ldexp(r, -(e - 1)) - 1.0) * 128.0);
    return sign | (uint16_t)(biased << 7 | fraction);
}

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Whether float bit pattern u rounds as the reference says; the first
 * miss is kept for the message.  (A plain test, not ck_assert per value:
 * Check records every assertion, which would cost more than the rounding.) */
typedef struct { uint64_t checked, wrong; uint32_t first; } tally;

static void check_rounds(tally *t, uint32_t u)
{
    t->checked++;
    if (ptdp_bf16_from_float(float_of_bits(u)) != reference_bf16((double)float_of_bits(u)) &&
        t->wrong++ == 0)
        t->first = u;
}

#define ASSERT_ALL_ROUND(t)                                                            \
    ck_assert_msg((t).wrong == 0, "%llu of %llu floats round wrongly, first 0x%08x (%.9g): " \
                  "bf16 0x%04x, want 0x%04x", (unsigned long long)(t).wrong,            \
                  (unsigned long long)(t).checked, (unsigned)(t).first,                 \
                  (double)float_of_bits((t).first),                                     \
                  ptdp_bf16_from_float(float_of_bits((t).first)),                       \
                  reference_bf16((double)float_of_bits((t).first)))

/* ----------------------------------------------------------- rounding */

static const harness_tcase rounding_tests = { .name = "rounding", .timeout_s = 60 };

TEST(rounding_tests, test_special_values)
{
    static const struct { uint32_t in; uint16_t out; } cases[] = {
        { 0x00000000, 0x0000 }, { 0x80000000, 0x8000 },     /* ±0 keep their sign        */
        { 0x7F800000, 0x7F80 }, { 0xFF800000, 0xFF80 },     /* ±inf stay                 */
        { 0x7FC00000, 0x7FC0 }, { 0xFFC00000, 0x7FC0 },     /* NaN → the quiet NaN       */
        { 0x7F800001, 0x7FC0 }, { 0xFFFFFFFF, 0x7FC0 },     /* not inf, whatever the bits */
        { 0x3F800000, 0x3F80 },                             /* 1                         */
        { 0x3F808000, 0x3F80 },                             /* 1 + 2^-8: tie, even stays */
        { 0x3F818000, 0x3F82 },                             /* 1 + 3·2^-8: tie, odd up   */
        { 0x3F808001, 0x3F81 },                             /* just above the tie        */
        { 0x7F7F0000, 0x7F7F }, { 0x7F7F7FFF, 0x7F7F },     /* largest finite bf16       */
        { 0x7F7F8000, 0x7F80 }, { 0x7F7FFFFF, 0x7F80 },     /* FLT_MAX overflows to inf  */
        { 0xFF7FFFFF, 0xFF80 },
        { 0x00000001, 0x0000 }, { 0x00008000, 0x0000 },     /* denormals: tie to even 0  */
        { 0x00008001, 0x0001 }, { 0x00018000, 0x0002 },     /* … and odd 1 up to 2       */
        { 0x00800000, 0x0080 }, { 0x007FFFFF, 0x0080 },     /* smallest normal           */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = ptdp_bf16_from_float(float_of_bits(cases[i].in));
        ck_assert_msg(got == cases[i].out, "0x%08x → 0x%04x, want 0x%04x",
                      (unsigned)cases[i].in, got, cases[i].out);
        ck_assert_uint_eq(reference_bf16((double)float_of_bits(cases[i].in)), cases[i].out);
    }
    ck_assert(ptdp_bf16_to_float(0x3F80) == 1.0f);
    ck_assert(ptdp_bf16_to_float(0xC040) == -3.0f);
    ck_assert(ptdp_bf16_to_float(0x7F7F) == ldexpf(255.0f, 120));
    ck_assert(ptdp_bf16_to_float(0x0001) == ldexpf(1.0f, -133));
    ck_assert(isnan(ptdp_bf16_to_float(PTDP_BF16_NAN)));
    ck_assert(signbit(ptdp_bf16_to_float(0x8000)));
}
END_TEST

/* Every bf16 value, each with eight low halves: the value itself, just
 * above it, a quarter, just below the tie, the tie, just above the tie,
 * three quarters, just below the next value.  Widening then rounding gives
 * every non-NaN value back unchanged. */
TEST(rounding_tests, test_every_bf16_and_its_neighbours)
{
    static const uint32_t lows[] = { 0x0000, 0x0001, 0x3FFF, 0x7FFF, 0x8000, 0x8001, 0xBFFF, 0xFFFF };
    tally t = { 0 };
    uint32_t round_trip_wrong = 0;
    for (uint32_t b = 0; b < 0x10000; b++) {
        for (size_t k = 0; k < sizeof lows / sizeof lows[0]; k++)
            check_rounds(&t, b << 16 | lows[k]);
        float f = ptdp_bf16_to_float((ptdp_bf16)b);
        round_trip_wrong += bits_of_float(f) != b << 16 ||
                            ptdp_bf16_from_float(f) != (isnan(f) ? PTDP_BF16_NAN : b);
    }
    ASSERT_ALL_ROUND(t);
    ck_assert_uint_eq(t.checked, 8 * 65536);
    ck_assert_uint_eq(round_trip_wrong, 0);
}
END_TEST

TEST(rounding_tests, test_random_float_patterns)
{
    const bool exhaustive = getenv("PTDP_BF16_EXHAUSTIVE") != NULL;
    const uint64_t n = exhaustive ? UINT64_C(1) << 32 : UINT64_C(4) << 20;
    uint64_t state = 20240229;
    tally t = { 0 };
    double t0 = seconds();
    for (uint64_t i = 0; i < n; i++)
        check_rounds(&t, exhaustive ? (uint32_t)i : (uint32_t)splitmix64(&state));
    ASSERT_ALL_ROUND(t);
    printf("%s: %llu float patterns against the reference in %.2f s\n",
           exhaustive ? "exhaustive" : "random", (unsigned long long)n, seconds() - t0);
}
END_TEST

/* Arrays convert as the scalars do. */
TEST(rounding_tests, test_arrays)
{
    enum { N = 1001 };
    static float f[N], back[N];
    static double d[N], dback[N];
    static ptdp_bf16 b[N], bd[N];
    uint64_t state = 7;
    for (int i = 0; i < N; i++) {
        f[i] = float_of_bits((uint32_t)splitmix64(&state));
        d[i] = (double)f[i] * (1.0 + 0x1p-30);
    }
    ptdp_bf16_from_float_array(b, f, N);
    ptdp_bf16_to_float_array(back, b, N);
    ptdp_bf16_from_double_array(bd, d, N);
    ptdp_bf16_to_double_array(dback, bd, N);
    for (int i = 0; i < N; i++) {
        ck_assert_uint_eq(b[i], ptdp_bf16_from_float(f[i]));
        ck_assert_uint_eq(bits_of_float(back[i]), (uint32_t)b[i] << 16);
        ck_assert_uint_eq(bd[i], ptdp_bf16_from_double(d[i]));
        ck_assert(memcmp(&(double){ (double)ptdp_bf16_to_float(bd[i]) }, &dback[i], sizeof(double)) == 0);
    }
}
END_TEST

/* ------------------------------------------------ rounding from double */

static const harness_tcase double_tests = { .name = "double", .timeout_s = 60 };

/* The corner of double → float → bf16 (bf16.c): 1 + 2^-8 + 2^-40 is above
 * the tie between 1 and 1 + 2^-7, but its float is the tie itself, which
 * rounds to even, down.  Rounded once it goes up. */
TEST(double_tests, test_double_rounding_corner)
{
    double x = 1.0 + 0x1p-8 + 0x1p-40;
    ck_assert_uint_eq(ptdp_bf16_from_float((float)x), 0x3F80);   /* twice: wrong */
    ck_assert_uint_eq(ptdp_bf16_from_double(x), 0x3F81);        /* once: right  */
    ck_assert_uint_eq(reference_bf16(x), 0x3F81);
    ck_assert_uint_eq(ptdp_bf16_from_double(-x), 0xBF81);
    ck_assert_uint_eq(ptdp_bf16_from_double(1.0 + 0x1p-8 - 0x1p-40), 0x3F80);
    ck_assert_uint_eq(ptdp_bf16_from_double(1.0 + 3 * 0x1p-8 - 0x1p-40), 0x3F81);
    ck_assert_uint_eq(ptdp_bf16_from_double(DBL_MAX), 0x7F80);
    ck_assert_uint_eq(ptdp_bf16_from_double(-1e300), 0xFF80);
    ck_assert_uint_eq(ptdp_bf16_from_double(0x1p-1074), 0x0000);
    ck_assert_uint_eq(ptdp_bf16_from_double(-0x1p-1074), 0x8000);
    ck_assert_uint_eq(ptdp_bf16_from_double(0x1p-134 + 0x1p-180), 0x0001);    /* above the tie */
    ck_assert_uint_eq(ptdp_bf16_from_double(0x1p-134), 0x0000);                /* the tie: even */
    ck_assert_uint_eq(ptdp_bf16_from_double(NAN), PTDP_BF16_NAN);
    ck_assert_uint_eq(ptdp_bf16_from_double(-INFINITY), 0xFF80);
}
END_TEST

/* Around every tie of every finite bf16 (its value plus half a step): the
 * tie, one double step to either side, and a step at 2^-30 relative, where
 * the float in between rounds onto the tie; plus random doubles over the
 * whole float range and beyond it. */
TEST(double_tests, test_doubles_near_every_tie)
{
    size_t checked = 0, wrong = 0;
    double first = 0;
    for (uint32_t b = 0; b < 0x10000; b++) {
        if ((b & 0x7F80) == 0x7F80)                    /* inf and NaN have no tie */
            continue;
        double v = (double)ptdp_bf16_to_float((ptdp_bf16)b);
        double tie = (double)float_of_bits(b << 16 | 0x8000);   /* a float: half a step out */
        double half = tie - v;
        double xs[] = { tie, nextafter(tie, 0), nextafter(tie, 2 * tie),
                        tie + half * 0x1p-29, tie - half * 0x1p-29 };
        for (size_t k = 0; k < sizeof xs / sizeof xs[0]; k++, checked++)
            if (ptdp_bf16_from_double(xs[k]) != reference_bf16(xs[k]) && wrong++ == 0)
                first = xs[k];
    }
    uint64_t state = 99;
    for (int i = 0; i < (1 << 20); i++, checked++) {
        /* exponents from 2^-160 to 2^140: denormal bf16 to overflow */
        uint64_t u = splitmix64(&state);
        double x = ldexp(1.0 + (double)(u >> 12) * 0x1p-52, (int)(u % 301) - 160);
        if (u & 0x800)
            x = -x;
        if (ptdp_bf16_from_double(x) != reference_bf16(x) && wrong++ == 0)
            first = x;
    }
    ck_assert_msg(wrong == 0, "%zu of %zu doubles round wrongly, first %a: bf16 0x%04x, want 0x%04x",
                  wrong, checked, first, ptdp_bf16_from_double(first), reference_bf16(first));
    printf("%zu doubles near ties and at random against the reference\n", checked);
}
END_TEST

/* ptdp_bf16_round: the value a bf16 parameter holds, in this build's type. */
TEST(double_tests, test_round_in_ptdp_real)
{
    ck_assert(ptdp_bf16_round((ptdp_real)1.0) == 1);
    ck_assert(ptdp_bf16_round((ptdp_real)3.14159265) == (ptdp_real)3.140625);
    ck_assert(ptdp_bf16_round((ptdp_real)-1e-3) == (ptdp_real)ptdp_bf16_to_float(0xBA83));
    ck_assert(isinf(ptdp_bf16_round((ptdp_real)FLT_MAX)));
    ck_assert(isnan(ptdp_bf16_round((ptdp_real)NAN)));
#ifdef PTDP_DOUBLE
    ck_assert(ptdp_bf16_round(1.0 + 0x1p-8 + 0x1p-40) == 1.0 + 0x1p-7);   /* rounded once */
#endif
}
END_TEST

/* -------------------------------------------------------- collectives */

static const harness_tcase collective_tests = { .name = "collectives", .timeout_s = 120 };

enum { COUNT = 1031 };   /* a prime: chunks of unequal length */

static ptdp_bf16 input(int rank, size_t i)
{
    /* inexact in any order, never zero (max of +0 and -0 would depend on
     * the order of the arguments, not on the rounding) */
    double x = ptdp_rng_normal(ptdp_rng_key(5, "bf16"), (uint64_t)rank * COUNT + i) * 10.0;
    ptdp_bf16 b = ptdp_bf16_from_double(x);
    return ptdp_bf16_to_float(b) == 0 ? 0x3F80 : b;
}

static float combine(float acc, float x, ptdp_op op)
{
    switch (op) {
    case PTDP_MAX: return x > acc ? x : acc;
    case PTDP_MIN: return x < acc ? x : acc;
    default:       return acc + x;
    }
}

/* Element i reduced over n ranks, rounded to bf16 after every pair:
 * ranks first, first + 1, … (mod n); AVG divides the result by n. */
static ptdp_bf16 reference_reduce(int n, int first, size_t i, ptdp_op op)
{
    ptdp_bf16 acc = input(first % n, i);
    for (int j = 1; j < n; j++)
        acc = ptdp_bf16_from_float(combine(ptdp_bf16_to_float(acc),
                                           ptdp_bf16_to_float(input((first + j) % n, i)), op));
    if (op == PTDP_AVG)
        acc = ptdp_bf16_from_float(ptdp_bf16_to_float(acc) / (float)n);
    return acc;
}

/* The order each algorithm combines element i in: ranks 0, 1, … for naive
 * and shm; the ring starts chunk c at rank c + 1 and goes around. */
static int first_rank(ptdp_algo algo, int n, size_t i)
{
    if (algo != PTDP_ALGO_RING)
        return 0;
    for (int c = 0; c < n; c++) {
        size_t off, len;
        ptdp_share(COUNT, n, c, &off, &len);
        if (i >= off && i < off + len)
            return (c + 1) % n;
    }
    return 0;
}

static int bf16_collectives(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_comm *c = dev->world;
    int n = ptdp_comm_size(c), r = ptdp_comm_rank(c);
    ptdp_bf16 *send = ptdp_alloc(dev, COUNT * sizeof *send, PTDP_MEM_COMM, "send");
    ptdp_bf16 *recv = ptdp_alloc(dev, COUNT * sizeof *recv, PTDP_MEM_COMM, "recv");
    if (!send || !recv)
        return PTDP_ENOMEM;
    static const char *const op_names[] = { "sum", "avg", "max", "min" };

    /* all_reduce: every algorithm, every reduction, in and out of place */
    for (int a = PTDP_ALGO_NAIVE; a <= PTDP_ALGO_SHM; a++)
        for (int op = 0; op < PTDP_OP_COUNT; op++)
            for (int in_place = 0; in_place < 2; in_place++) {
                for (size_t i = 0; i < COUNT; i++)
                    send[i] = input(r, i);
                ptdp_bf16 *out = in_place ? send : recv;
                DEVICE_TRY(ptdp_all_reduce_algo(c, send, out, COUNT, PTDP_BF16, (ptdp_op)op,
                                                (ptdp_algo)a));
                for (size_t i = 0; i < COUNT; i++) {
                    ptdp_bf16 want = reference_reduce(n, first_rank((ptdp_algo)a, n, i), i, (ptdp_op)op);
                    DEVICE_CHECK(dev, out[i] == want, "all_reduce %s %s%s n=%d: element %zu = 0x%04x, want 0x%04x",
                                 ptdp_algo_name((ptdp_algo)a), op_names[op], in_place ? " in place" : "",
                                 n, i, out[i], want);
                }
            }

    /* reduce_scatter: the device's algorithm (the launch's), my chunk */
    size_t off, len;
    ptdp_share(COUNT, n, r, &off, &len);
    for (int op = 0; op < PTDP_OP_COUNT; op++) {
        for (size_t i = 0; i < COUNT; i++)
            send[i] = input(r, i);
        DEVICE_TRY(ptdp_reduce_scatter(c, send, recv, COUNT, PTDP_BF16, (ptdp_op)op));
        for (size_t i = 0; i < len; i++) {
            ptdp_bf16 want = reference_reduce(n, first_rank(dev->algo, n, off + i), off + i, (ptdp_op)op);
            DEVICE_CHECK(dev, recv[i] == want, "reduce_scatter %s %s n=%d: element %zu = 0x%04x, want 0x%04x",
                         ptdp_algo_name(dev->algo), op_names[op], n, off + i, recv[i], want);
        }
    }

    /* all_gather, broadcast and send/recv move bf16 bits unchanged */
    for (size_t i = 0; i < len; i++)
        send[i] = input(r, off + i);
    DEVICE_TRY(ptdp_all_gather(c, send, recv, COUNT, PTDP_BF16));
    for (int m = 0; m < n; m++) {
        size_t mo, ml;
        ptdp_share(COUNT, n, m, &mo, &ml);
        for (size_t i = mo; i < mo + ml; i++)
            DEVICE_CHECK(dev, recv[i] == input(m, i), "all_gather element %zu from rank %d", i, m);
    }
    for (size_t i = 0; i < COUNT; i++)
        recv[i] = r == n - 1 ? input(r, i) : 0;
    DEVICE_TRY(ptdp_broadcast(c, recv, COUNT, PTDP_BF16, n - 1));
    for (size_t i = 0; i < COUNT; i++)
        DEVICE_CHECK(dev, recv[i] == input(n - 1, i), "broadcast element %zu", i);
    if (n >= 2 && r < 2) {
        if (r == 0) {
            for (size_t i = 0; i < COUNT; i++)
                send[i] = input(0, i);
            DEVICE_TRY(ptdp_send(c, send, COUNT, PTDP_BF16, 1, 7));
        } else {
            DEVICE_TRY(ptdp_recv(c, recv, COUNT, PTDP_BF16, 0, 7));
            for (size_t i = 0; i < COUNT; i++)
                DEVICE_CHECK(dev, recv[i] == input(0, i), "recv element %zu", i);
        }
    }
    ptdp_free(dev, recv);
    ptdp_free(dev, send);
    return 0;
}

LOOP_TEST(collective_tests, test_bf16_collectives_on_2_3_4_devices, 6)
{
    int n = 2 + _i % 3;
    ptdp_algo algo = _i < 3 ? PTDP_ALGO_SHM : PTDP_ALGO_RING;   /* reduce_scatter's */
    harness_launch_ok(n, bf16_collectives, NULL, &(ptdp_launch_opts){ .algo = algo }, NULL);
}
END_TEST

/* The reference is not vacuous: on these inputs, summing in another order
 * rounds differently somewhere (so the order in the reference matters). */
TEST(collective_tests, test_order_matters_for_bf16_sums)
{
    size_t differ = 0;
    for (size_t i = 0; i < COUNT; i++)
        differ += reference_reduce(4, 0, i, PTDP_SUM) != reference_reduce(4, 1, i, PTDP_SUM);
    ck_assert_msg(differ > 10, "only %zu of %d sums depend on the order", differ, COUNT);
}
END_TEST

/* ---------------------------------------------------------- safetensors */

static const harness_tcase safetensors_tests = { .name = "safetensors", .timeout_s = 30 };

/* A BF16 tensor between an F32 and a U8 one: written with its "BF16"
 * dtype, 2-byte aligned, its bytes little-endian; read back raw and as
 * ptdp_real (exact); a wrong dtype name is refused. */
TEST(safetensors_tests, test_bf16_tensor_round_trip)
{
    char path[] = "/tmp/ptdp-bf16-XXXXXX";
    harness_temp_file(path);
    static const ptdp_bf16 w[6] = { 0x3F80, 0xC040, 0x7F7F, 0x0001, 0x8000, 0x7F80 };
    static const float f[3] = { 1.5f, -2.0f, 0.25f };
    static const uint8_t u[3] = { 1, 2, 3 };
    ptdp_st_tensor t[3] = {
        { .name = "u", .dtype = PTDP_U8, .ndim = 1, .shape = { 3 }, .data = u },
        { .name = "w", .dtype = PTDP_BF16, .ndim = 2, .shape = { 2, 3 }, .data = w },
        { .name = "f", .dtype = PTDP_F32, .ndim = 1, .shape = { 3 }, .data = f },
    };
    char msg[256];
    ck_assert_int_eq(ptdp_st_write(path, t, 3, NULL, NULL, 0, msg, sizeof msg), 0);

    size_t len;
    char *file = harness_read_file(path, &len);
    ASSERT_HAS(file + 8, "\"w\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[12,24]}");
    free(file);

    ptdp_st_file *st;
    ck_assert_int_eq(ptdp_st_open(path, &st, msg, sizeof msg), 0);
    const ptdp_st_tensor *got = ptdp_st_find(st, "w");
    ck_assert_ptr_nonnull(got);
    ck_assert_int_eq(got->dtype, PTDP_BF16);
    const unsigned char *bytes = got->data;
    for (int i = 0; i < 6; i++)
        ck_assert_uint_eq((unsigned)(bytes[2 * i] | bytes[2 * i + 1] << 8), w[i]);
    ptdp_real real[6];
    ck_assert_int_eq(ptdp_st_read_real(st, "w", 2, (int64_t[]){ 2, 3 }, real, msg, sizeof msg), 0);
    for (int i = 0; i < 6; i++)
        ck_assert(real[i] == (ptdp_real)ptdp_bf16_to_float(w[i]));
    ptdp_st_close(st);
    ck_assert_str_eq(ptdp_dtype_name(PTDP_BF16), "BF16");
    ck_assert_uint_eq(ptdp_dtype_size(PTDP_BF16), 2);
    unlink(path);
}
END_TEST

/* ---------------------------------------------------------- optimizer */

static const harness_tcase optim_tests = { .name = "optim", .timeout_s = 30 };

enum { NP = 257, STEPS = 5 };

static void optim_inputs(float *master, ptdp_real *p, float g[STEPS][NP], ptdp_real gr[STEPS][NP])
{
    uint64_t key = ptdp_rng_key(11, "optim");
    for (int i = 0; i < NP; i++) {
        /* odd elements near 1, where a bf16 step (2^-7) is larger than
         * five AdamW updates; even ones near 1e-4, where the update is as
         * large as the weight and any change of its rounding shows */
        master[i] = (float)(ptdp_rng_normal(key, (uint64_t)i) * (i % 2 ? 1.0 : 1e-4));
        p[i] = master[i];
    }
    for (int s = 0; s < STEPS; s++)
        for (int i = 0; i < NP; i++) {
            g[s][i] = ptdp_bf16_to_float(ptdp_bf16_from_double(
                ptdp_rng_normal(key, (uint64_t)(s + 1) * NP + (uint64_t)i) * 1e-2));
            gr[s][i] = g[s][i];
        }
}

/* The float build: master weights and moments equal ptdp_adamw_step's bit
 * for bit; the double build: equal to float rounding.  Either way the bf16
 * parameters are the masters rounded, and after five steps of lr 1e-3 some
 * masters have moved while their bf16 has not — why master weights exist. */
TEST(optim_tests, test_adamw_bf16_is_adamw_on_the_master)
{
    static float master[NP], m[NP], v[NP], g[STEPS][NP];
    static ptdp_real p[NP], pm[NP], pv[NP], gr[STEPS][NP];
    static ptdp_bf16 b[NP];
    optim_inputs(master, p, g, gr);
    ptdp_bf16 b0[NP];
    ptdp_bf16_from_float_array(b0, master, NP);
    ptdp_adamw_config c = ptdp_adamw_default_config();
    c.weight_decay = 0.1;
    for (long step = 1; step <= STEPS; step++) {
        ptdp_adamw_step_bf16(master, g[step - 1], m, v, b, NP, &c, step);
        ptdp_adamw_step(p, gr[step - 1], pm, pv, NP, &c, step);
    }
    int unchanged = 0;
    for (int i = 0; i < NP; i++) {
#ifdef PTDP_DOUBLE
        ck_assert_msg(fabs(master[i] - p[i]) <= 1e-6 * fabs(p[i]) + 1e-9, "master %d", i);
#else
        ck_assert_msg(bits_of_float(master[i]) == bits_of_float(p[i]) &&
                      bits_of_float(m[i]) == bits_of_float(pm[i]) &&
                      bits_of_float(v[i]) == bits_of_float(pv[i]),
                      "element %d: master %.9g m %.9g v %.9g, ptdp_adamw_step %.9g %.9g %.9g",
                      i, (double)master[i], (double)m[i], (double)v[i], (double)p[i],
                      (double)pm[i], (double)pv[i]);
#endif
        ck_assert_uint_eq(b[i], ptdp_bf16_from_float(master[i]));
        unchanged += b[i] == b0[i];
    }
    ck_assert_msg(unchanged > 0, "every bf16 parameter moved: the test shows nothing");
    ck_assert(ptdp_adamw_bf16_flops(10) == ptdp_adamw_flops(10) + 10);
}
END_TEST

TEST(optim_tests, test_sgd_bf16_is_sgd_on_the_master)
{
    static float master[NP], buf[NP], g[STEPS][NP];
    static ptdp_real p[NP], pbuf[NP], gr[STEPS][NP];
    static ptdp_bf16 b[NP];
    optim_inputs(master, p, g, gr);
    ptdp_sgd_config c = { .lr = 0.05, .momentum = 0.9, .weight_decay = 0.1 };
    for (long step = 1; step <= STEPS; step++) {
        ptdp_sgd_step_bf16(master, g[step - 1], buf, b, NP, &c, step);
        ptdp_sgd_step(p, gr[step - 1], pbuf, NP, &c, step);
    }
    for (int i = 0; i < NP; i++) {
#ifdef PTDP_DOUBLE
        ck_assert_msg(fabs(master[i] - p[i]) <= 1e-6 * fabs(p[i]) + 1e-9, "master %d", i);
#else
        ck_assert_msg(bits_of_float(master[i]) == bits_of_float(p[i]) &&
                      bits_of_float(buf[i]) == bits_of_float(pbuf[i]), "element %d", i);
#endif
        ck_assert_uint_eq(b[i], ptdp_bf16_from_float(master[i]));
    }
    ck_assert(ptdp_sgd_bf16_flops(10, &c) == ptdp_sgd_flops(10, &c) + 10);
}
END_TEST

int main(void) { return harness_main("bf16"); }
