/*
 * exp.c — e^x of many numbers at once, bit for bit what libm's exp gives
 * one at a time.
 *
 * GELU and the attention's softmax take an exp per element: 40 million a
 * step of the benchmark GPT, half of all its work that is not a GEMM when
 * each is a call to libm.  A call cannot be vectorised; but libm's expf
 * (glibc's since 2.27, from Arm's optimized-routines) is a short formula,
 * and the same formula eight lanes wide gives the same bits, eight at a
 * time:
 *
 *     x = (k + r) ln2 / N,       N = 32, k an integer, |r| <= 1/2
 *     e^x = 2^(k/N) 2^(r/N)  ≈  s (C0 r^3 + C1 r^2 + C2 r + 1)
 *
 *       k mod N ──► table T ──┐                  (all in double, then
 *       k div N ──► exponent ─┴─► s              one rounding to float)
 *       r ──► polynomial (fused multiply-adds) ──► × s ──► float
 *
 * The same operations in the same order, the same fused multiply-adds
 * where glibc's x86-64 build uses them (its __expf_fma, which glibc picks
 * on every CPU with AVX2 and FMA), the same table and constants: the same
 * bits.  Inputs the formula does not cover (|x| >= 88, infinities, NaN)
 * go to libm's expf itself.
 *
 * The lanes are used only where they are known to agree: a float build on
 * x86-64 whose CPU has AVX2 and FMA (AVX-512 taken when there is one;
 * PTDP_EXP_AVX2 set in the environment keeps AVX2), and whose libm agrees
 * with them on a sweep of a million inputs spread over every float
 * (checked once, at the first call; tests/test_ops.c sweeps more; both
 * ways of the lanes were checked on all 2^32 floats against glibc 2.36).
 * Anywhere else — another libm, another CPU, the double build — every
 * element is libm's call, as before.
 */
#include "ptdp/ops.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef PTDP_DOUBLE
#define EXP exp
#else
#define EXP expf
#endif

/* One element at a time, libm's own. */
static void exp_calls(ptdp_real *x, size_t n)
{
    for (size_t j = 0; j < n; j++)
        x[j] = EXP(x[j]);
}

#if !defined(PTDP_DOUBLE) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PTDP_EXP_LANES 1
#include <immintrin.h>

/* glibc's __exp2f_data (e_exp2f_data.c), as stored: T[i] = bits of 2^(i/N)
 * less i << 47, so that adding k << 47 puts k div N in the exponent. */
static const uint64_t exp_table[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};
#define EXP_INVLN2N 0x40471547652b82feULL   /* N / ln 2          */
#define EXP_C0 0x3ebc6af84b912394ULL        /* the polynomial    */
#define EXP_C1 0x3f2ebfce50fac4f3ULL
#define EXP_C2 0x3f962e42ff0c52d6ULL
#define EXP_SHIFT 0x4338000000000000ULL     /* 0x1.8p52: rounds to an integer */

/* Four floats' e^x in double lanes, before the rounding to float. */
__attribute__((target("avx2,fma"))) static __m256d exp4(__m128 x)
{
    const __m256d invln2n = _mm256_castsi256_pd(_mm256_set1_epi64x((long long)EXP_INVLN2N));
    const __m256d shift = _mm256_castsi256_pd(_mm256_set1_epi64x((long long)EXP_SHIFT));
    const __m256d xd = _mm256_cvtps_pd(x);
    __m256d kd = _mm256_fmadd_pd(invln2n, xd, shift);       /* k, in kd's low bits */
    const __m256i ki = _mm256_castpd_si256(kd);
    kd = _mm256_sub_pd(kd, shift);
    const __m256d r = _mm256_fmsub_pd(invln2n, xd, kd);      /* x N / ln2 - k       */
    const __m256i t = _mm256_add_epi64(
        _mm256_i64gather_epi64((const long long *)exp_table, _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8),
        _mm256_slli_epi64(ki, 47));
    const __m256d s = _mm256_castsi256_pd(t);                /* 2^(k/N)             */
    const __m256d z = _mm256_fmadd_pd(_mm256_castsi256_pd(_mm256_set1_epi64x((long long)EXP_C0)), r,
                                      _mm256_castsi256_pd(_mm256_set1_epi64x((long long)EXP_C1)));
    const __m256d r2 = _mm256_mul_pd(r, r);
    __m256d y = _mm256_fmadd_pd(r, _mm256_castsi256_pd(_mm256_set1_epi64x((long long)EXP_C2)), _mm256_set1_pd(1.0));
    y = _mm256_fmadd_pd(z, r2, y);
    return _mm256_mul_pd(y, s);
}

/* The same eight at once in AVX-512, where the table's 32 entries fit in
 * four registers and two permutes replace the gather (the slow part of
 * exp4): the same operations, the same bits. */
__attribute__((target("avx512f"))) static __m256 exp8(__m256 x)
{
    const __m512i t0 = _mm512_loadu_si512(exp_table), t1 = _mm512_loadu_si512(exp_table + 8);
    const __m512i t2 = _mm512_loadu_si512(exp_table + 16), t3 = _mm512_loadu_si512(exp_table + 24);
    const __m512d invln2n = _mm512_castsi512_pd(_mm512_set1_epi64((long long)EXP_INVLN2N));
    const __m512d shift = _mm512_castsi512_pd(_mm512_set1_epi64((long long)EXP_SHIFT));
    const __m512d xd = _mm512_cvtps_pd(x);
    __m512d kd = _mm512_fmadd_pd(invln2n, xd, shift);
    const __m512i ki = _mm512_castpd_si512(kd);
    kd = _mm512_sub_pd(kd, shift);
    const __m512d r = _mm512_fmsub_pd(invln2n, xd, kd);
    const __mmask8 upper = _mm512_test_epi64_mask(ki, _mm512_set1_epi64(16));   /* k mod 32 >= 16 */
    const __m512i lo = _mm512_permutex2var_epi64(t0, ki, t1), hi = _mm512_permutex2var_epi64(t2, ki, t3);
    const __m512i t = _mm512_add_epi64(_mm512_mask_blend_epi64(upper, lo, hi), _mm512_slli_epi64(ki, 47));
    const __m512d s = _mm512_castsi512_pd(t);
    const __m512d z = _mm512_fmadd_pd(_mm512_castsi512_pd(_mm512_set1_epi64((long long)EXP_C0)), r,
                                      _mm512_castsi512_pd(_mm512_set1_epi64((long long)EXP_C1)));
    const __m512d r2 = _mm512_mul_pd(r, r);
    __m512d y = _mm512_fmadd_pd(r, _mm512_castsi512_pd(_mm512_set1_epi64((long long)EXP_C2)), _mm512_set1_pd(1.0));
    y = _mm512_fmadd_pd(z, r2, y);
    return _mm512_cvtpd_ps(_mm512_mul_pd(y, s));
}

/* Whether any of eight floats is outside the formula's range (|x| >= 88,
 * infinities, NaN: exponent bits above 0x42a, as glibc tests). */
__attribute__((target("avx2"))) static bool outside(__m256 v)
{
    const __m256i bits = _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7fffffff));
    const __m256i over = _mm256_cmpgt_epi32(bits, _mm256_set1_epi32(0x42a << 20 | 0xfffff));
    return !_mm256_testz_si256(over, over);
}

/* x[j] = e^x[j], eight at a time; a group with an input outside the
 * formula's range goes to libm's calls, as does the tail. */
__attribute__((target("avx2,fma"))) static void exp_lanes(float *x, size_t n)
{
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 v = _mm256_loadu_ps(x + j);
        if (outside(v)) {
            exp_calls(x + j, 8);
            continue;
        }
        const __m128 lo = _mm256_cvtpd_ps(exp4(_mm256_castps256_ps128(v)));
        const __m128 hi = _mm256_cvtpd_ps(exp4(_mm256_extractf128_ps(v, 1)));
        _mm256_storeu_ps(x + j, _mm256_set_m128(hi, lo));
    }
    exp_calls(x + j, n - j);
}

__attribute__((target("avx512f"))) static void exp_lanes512(float *x, size_t n)
{
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 v = _mm256_loadu_ps(x + j);
        if (outside(v))
            exp_calls(x + j, 8);
        else
            _mm256_storeu_ps(x + j, exp8(v));
    }
    exp_calls(x + j, n - j);
}

/* Whether the lanes may stand in for libm here: the CPU has the
 * instructions, and libm agrees on every 4099th float (a million of
 * them, every exponent and sign, NaNs and infinities among them). */
typedef void (*exp_fn)(float *x, size_t n);
static exp_fn lanes;   /* NULL: libm's calls */
static pthread_once_t lanes_once = PTHREAD_ONCE_INIT;

static bool agrees_with_libm(exp_fn f)
{
    float a[1024], b[1024];
    uint64_t u = 0;
    while (u < (1ULL << 32)) {
        for (int i = 0; i < 1024; i++, u += 4099) {
            const uint32_t w = (uint32_t)u;
            memcpy(&a[i], &w, sizeof w);
            b[i] = expf(a[i]);
        }
        f(a, 1024);
        if (memcmp(a, b, sizeof a) != 0)
            return false;
    }
    return true;
}

/* AVX-512 where there is one, else AVX2 with FMA, each if libm agrees. */
static void lanes_check(void)
{
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
        return;
    if (getenv("PTDP_EXP_AVX2") == NULL && __builtin_cpu_supports("avx512f") && agrees_with_libm(exp_lanes512))
        lanes = exp_lanes512;
    else if (agrees_with_libm(exp_lanes))
        lanes = exp_lanes;
}
#endif

bool ptdp_exp_vectorised(void)
{
#ifdef PTDP_EXP_LANES
    pthread_once(&lanes_once, lanes_check);
    return lanes != NULL;
#else
    return false;
#endif
}

void ptdp_exp_inplace(ptdp_real *x, size_t n)
{
#ifdef PTDP_EXP_LANES
    if (ptdp_exp_vectorised()) {
        lanes(x, n);
        return;
    }
#endif
    exp_calls(x, n);
}
