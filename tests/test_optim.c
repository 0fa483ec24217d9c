/*
 * test_optim.c — AdamW, SGD and gradient clipping against formulas written out by hand.
 *
 * The references below are deliberately NOT the library's code with its loop
 * removed: they are the textbook formulas, step by step, in double, with the
 * bias corrections applied to m and v (m̂ = m / (1 - b1^t)) instead of folded
 * into a step size as PyTorch and ptdp do.  Both are the same mathematics, so
 * they agree to rounding; a wrong exponent, a missing correction or a swapped
 * beta would not.
 */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "ptdp/optim.h"

/* Agreement with the double reference, relative to max(|value|, 1e-3) */
#ifdef PTDP_DOUBLE
#define REL 1e-12
#else
#define REL 1e-6
#endif

#define ASSERT_REL(got, want) ASSERT_CLOSE(got, want, REL * fmax(fabs(want), 1e-3))

/* Five parameters, three steps of gradients: signs, a zero gradient, a tiny
 * one (where eps matters) and one that changes sign between steps. */
enum { N = 5, STEPS = 3 };
static const double P0[N] = { 0.5, -0.25, 0.125, 1.0, -0.75 };
static const double G[STEPS][N] = {
    { 0.1, -0.2, 0.0, 1e-7, 3.0 },
    { 0.3, 0.05, 0.0, -2e-7, -1.0 },
    { -0.2, 0.1, 0.5, 1e-7, 0.5 },
};

/* The gradients as the library sees them (rounded to ptdp_real), and back in
 * double for the references, so both start from the same numbers. */
static ptdp_real g_real[STEPS][N];
static double g_used[STEPS][N];
static void setup_gradients(void)
{
    for (int s = 0; s < STEPS; s++)
        for (int i = 0; i < N; i++) {
            g_real[s][i] = (ptdp_real)G[s][i];
            g_used[s][i] = (double)g_real[s][i];
        }
}

/* ------------------------------------------------------------- AdamW */

static const harness_tcase adamw_tests = { .name = "adamw" };

/* Three AdamW steps on one scalar parameter, straight-line:
 *   p ← p (1 - lr wd);  m ← b1 m + (1-b1) g;  v ← b2 v + (1-b2) g²;
 *   p ← p - lr · [m / (1 - b1^t)] / (sqrt(v / (1 - b2^t)) + eps)             */
static void adamw_reference(double p, const double g[STEPS], const ptdp_adamw_config *c,
                            double p_out[STEPS], double m_out[STEPS], double v_out[STEPS])
{
    const double lr = c->lr, b1 = c->beta1, b2 = c->beta2, eps = c->eps, wd = c->weight_decay;
    double m = 0, v = 0;

    /* t = 1 */
    p = p * (1 - lr * wd);
    m = b1 * m + (1 - b1) * g[0];
    v = b2 * v + (1 - b2) * g[0] * g[0];
    p = p - lr * (m / (1 - b1)) / (sqrt(v / (1 - b2)) + eps);
    p_out[0] = p; m_out[0] = m; v_out[0] = v;

    /* t = 2 */
    p = p * (1 - lr * wd);
    m = b1 * m + (1 - b1) * g[1];
    v = b2 * v + (1 - b2) * g[1] * g[1];
    p = p - lr * (m / (1 - b1 * b1)) / (sqrt(v / (1 - b2 * b2)) + eps);
    p_out[1] = p; m_out[1] = m; v_out[1] = v;

    /* t = 3 */
    p = p * (1 - lr * wd);
    m = b1 * m + (1 - b1) * g[2];
    v = b2 * v + (1 - b2) * g[2] * g[2];
    p = p - lr * (m / (1 - b1 * b1 * b1)) / (sqrt(v / (1 - b2 * b2 * b2)) + eps);
    p_out[2] = p; m_out[2] = m; v_out[2] = v;
}

static void adamw_case(const ptdp_adamw_config *c)
{
    ptdp_real p[N], m[N] = { 0 }, v[N] = { 0 };
    double rp[N][STEPS], rm[N][STEPS], rv[N][STEPS];
    for (int i = 0; i < N; i++) {
        p[i] = (ptdp_real)P0[i];
        double g[STEPS] = { g_used[0][i], g_used[1][i], g_used[2][i] };
        adamw_reference((double)p[i], g, c, rp[i], rm[i], rv[i]);
    }
    for (int s = 0; s < STEPS; s++) {
        ptdp_adamw_step(p, g_real[s], m, v, N, c, s + 1);
        for (int i = 0; i < N; i++) {
            ASSERT_CLOSE(m[i], rm[i][s], REL * fabs(rm[i][s]) + 1e-30);
            ASSERT_CLOSE(v[i], rv[i][s], 2 * REL * fabs(rv[i][s]) + 1e-30);
            /* p moves by about lr per step: judge it against the move */
            ASSERT_CLOSE(p[i], rp[i][s], REL * fabs(rp[i][s]) + 10 * REL * c->lr);
        }
    }
}

TEST(adamw_tests, adamw_default_config_is_pytorchs)
{
    ptdp_adamw_config c = ptdp_adamw_default_config();
    ck_assert(c.lr == 1e-3 && c.beta1 == 0.9 && c.beta2 == 0.999 && c.eps == 1e-8 && c.weight_decay == 0.0);
}
END_TEST

TEST(adamw_tests, adamw_three_steps_match_the_formulas)
{
    setup_gradients();
    ptdp_adamw_config c = ptdp_adamw_default_config();
    adamw_case(&c);
    ptdp_adamw_config tuned = { .lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1 };
    adamw_case(&tuned);
    ptdp_adamw_config big_decay = { .lr = 0.05, .beta1 = 0.5, .beta2 = 0.9, .eps = 1e-8, .weight_decay = 2.0 };
    adamw_case(&big_decay);
}
END_TEST

/* Step 1 in closed form: m = (1-b1) g and v = (1-b2) g², the corrections
 * undo both factors, and every parameter moves by lr · g / (|g| + eps) —
 * the full lr whatever the gradient's size.  Without bias correction the
 * move would be lr (1-b1)/sqrt(1-b2) ≈ 3.16 lr. */
TEST(adamw_tests, adamw_bias_correction_at_step_one)
{
    setup_gradients();
    ptdp_adamw_config c = ptdp_adamw_default_config();
    ptdp_real p[N], m[N] = { 0 }, v[N] = { 0 };
    for (int i = 0; i < N; i++)
        p[i] = (ptdp_real)P0[i];
    ptdp_adamw_step(p, g_real[0], m, v, N, &c, 1);
    for (int i = 0; i < N; i++) {
        double g = g_used[0][i];
        double move = (double)p[i] - (double)(ptdp_real)P0[i];
        ASSERT_CLOSE(m[i], 0.1 * g, REL * fabs(g) + 1e-30);
        ASSERT_CLOSE(v[i], 0.001 * g * g, 2 * REL * g * g + 1e-30);
        ASSERT_CLOSE(move, -c.lr * g / (fabs(g) + c.eps), sizeof(ptdp_real) == 4 ? 1e-7 : 1e-15);
    }
    /* |g| ≫ eps: the move is lr to within eps/|g| */
    ASSERT_CLOSE((double)p[4] - P0[4], -c.lr, sizeof(ptdp_real) == 4 ? 1e-7 : 1e-11);
    /* a zero gradient leaves the parameter where it was */
    ck_assert(p[2] == (ptdp_real)P0[2]);
}
END_TEST

/* Element-wise: one call on the whole array equals calls on pieces of it,
 * bit for bit.  This is what lets ZeRO-1 run the optimizer on 1/DP of it. */
TEST(adamw_tests, adamw_on_ranges_equals_whole)
{
    setup_gradients();
    ptdp_adamw_config c = { .lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01 };
    ptdp_real pa[N], ma[N] = { 0 }, va[N] = { 0 }, pb[N], mb[N] = { 0 }, vb[N] = { 0 };
    for (int i = 0; i < N; i++)
        pa[i] = pb[i] = (ptdp_real)P0[i];
    for (int s = 0; s < STEPS; s++) {
        ptdp_adamw_step(pa, g_real[s], ma, va, N, &c, s + 1);
        ptdp_adamw_step(pb, g_real[s], mb, vb, 2, &c, s + 1);
        ptdp_adamw_step(pb + 2, g_real[s] + 2, mb + 2, vb + 2, N - 2, &c, s + 1);
    }
    ck_assert(memcmp(pa, pb, sizeof pa) == 0);
    ck_assert(memcmp(ma, mb, sizeof ma) == 0);
    ck_assert(memcmp(va, vb, sizeof va) == 0);
    ck_assert(ptdp_adamw_flops(10) == 150.0);
}
END_TEST

/* --------------------------------------------------------------- SGD */

static const harness_tcase sgd_tests = { .name = "sgd" };

/* Three SGD steps on one scalar, straight-line:
 *   d = g + wd p;  b = d (t = 1), b = mu b + d (t > 1);  p ← p - lr (mu ? b : d) */
static void sgd_reference(double p, const double g[STEPS], const ptdp_sgd_config *c,
                          double p_out[STEPS], double b_out[STEPS])
{
    const double lr = c->lr, mu = c->momentum, wd = c->weight_decay;
    double d, b;

    d = g[0] + wd * p;
    b = d;
    p = p - lr * (mu != 0 ? b : d);
    p_out[0] = p; b_out[0] = b;

    d = g[1] + wd * p;
    b = mu * b + d;
    p = p - lr * (mu != 0 ? b : d);
    p_out[1] = p; b_out[1] = b;

    d = g[2] + wd * p;
    b = mu * b + d;
    p = p - lr * (mu != 0 ? b : d);
    p_out[2] = p; b_out[2] = b;
}

static void sgd_case(const ptdp_sgd_config *c)
{
    ptdp_real p[N], buf[N];
    double rp[N][STEPS], rb[N][STEPS];
    for (int i = 0; i < N; i++) {
        p[i] = (ptdp_real)P0[i];
        buf[i] = (ptdp_real)12345;     /* garbage: step 1 must not read it */
        double g[STEPS] = { g_used[0][i], g_used[1][i], g_used[2][i] };
        sgd_reference((double)p[i], g, c, rp[i], rb[i]);
    }
    for (int s = 0; s < STEPS; s++) {
        ptdp_sgd_step(p, g_real[s], c->momentum != 0 ? buf : NULL, N, c, s + 1);
        for (int i = 0; i < N; i++) {
            ASSERT_REL(p[i], rp[i][s]);
            if (c->momentum != 0)
                ASSERT_REL(buf[i], rb[i][s]);
        }
    }
}

TEST(sgd_tests, sgd_three_steps_match_the_formulas)
{
    setup_gradients();
    ptdp_sgd_config plain = { .lr = 0.1, .momentum = 0, .weight_decay = 0 };
    ptdp_sgd_config decay = { .lr = 0.1, .momentum = 0, .weight_decay = 0.01 };
    ptdp_sgd_config momentum = { .lr = 0.1, .momentum = 0.9, .weight_decay = 0 };
    ptdp_sgd_config both = { .lr = 0.05, .momentum = 0.9, .weight_decay = 0.5 };
    sgd_case(&plain);
    sgd_case(&decay);
    sgd_case(&momentum);
    sgd_case(&both);
}
END_TEST

/* Plain SGD in closed form: p ← p - lr g, and with momentum the first step
 * is the same move (the buffer starts as a copy of g, not as mu·0 + ...). */
TEST(sgd_tests, sgd_first_step_closed_form)
{
    ptdp_real p[2] = { 1.0f, 2.0f }, q[2] = { 1.0f, 2.0f }, g[2] = { 0.5f, -0.25f }, buf[2] = { 7, 7 };
    ptdp_sgd_config plain = { .lr = 0.5, .momentum = 0, .weight_decay = 0 };
    ptdp_sgd_config mom = { .lr = 0.5, .momentum = 0.9, .weight_decay = 0 };
    ptdp_sgd_step(p, g, NULL, 2, &plain, 1);
    ptdp_sgd_step(q, g, buf, 2, &mom, 1);
    ck_assert(p[0] == 0.75f && p[1] == 2.125f);         /* exact in binary */
    ck_assert(q[0] == p[0] && q[1] == p[1]);
    ck_assert(buf[0] == g[0] && buf[1] == g[1]);
    /* step 2 with g again: b = 0.9 g + g = 1.9 g */
    ptdp_sgd_step(q, g, buf, 2, &mom, 2);
    ASSERT_CLOSE(buf[0], 1.9 * 0.5, 1e-7);
    ASSERT_CLOSE(q[0], 0.75 - 0.5 * 0.95, 1e-7);
    ck_assert(ptdp_sgd_flops(10, &plain) == 20.0);
    ptdp_sgd_config all = { .lr = 0.1, .momentum = 0.9, .weight_decay = 0.1 };
    ck_assert(ptdp_sgd_flops(10, &all) == 60.0);
}
END_TEST

/* ------------------------------------------------ norms and clipping */

static const harness_tcase norm_tests = { .name = "norm" };

TEST(norm_tests, sum_squares_exact)
{
    /* sum_{i<n} i^2 = n(n-1)(2n-1)/6: exact in double, integers exact in float */
    enum { M = 1001 };
    ptdp_real x[M];
    for (int i = 0; i < M; i++)
        x[i] = (ptdp_real)i;
    static const size_t ns[] = { 0, 1, 2, 3, 4, 5, 7, 8, 1001 };
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        double n = (double)ns[k];
        ck_assert(ptdp_sum_squares(x, ns[k]) == n * (n - 1) * (2 * n - 1) / 6);
    }
    /* squares are formed and summed in double: (1 + 2^-20)^2 = 1 + 2^-19 + 2^-40,
     * whose last term a float would drop, five times (through both loops) */
    ptdp_real y[5];
    for (int i = 0; i < 5; i++)
        y[i] = (ptdp_real)(1 + ldexp(1, -20));
    ck_assert(ptdp_sum_squares(y, 5) == 5 * (1 + ldexp(1, -19) + ldexp(1, -40)));
}
END_TEST

TEST(norm_tests, scale_multiplies)
{
    ptdp_real x[5] = { 1, -2, 3, 0, 0.5 };
    ptdp_scale(x, 5, 0.5);
    ck_assert(x[0] == 0.5 && x[1] == -1 && x[2] == 1.5 && x[3] == 0 && x[4] == 0.25);
    ptdp_scale(x, 0, 0.0);      /* n = 0 touches nothing */
    ck_assert(x[0] == 0.5);
}
END_TEST

TEST(norm_tests, clip_coefficient_as_clip_grad_norm)
{
    /* norm above max: scale down to max (up to the 1e-6 guard) */
    ASSERT_CLOSE(ptdp_clip_coefficient(10.0, 1.0), 1.0 / (10.0 + 1e-6), 1e-16);
    ASSERT_CLOSE(10.0 * ptdp_clip_coefficient(10.0, 1.0), 1.0, 1e-6);
    /* norm below max, or zero: leave alone */
    ck_assert(ptdp_clip_coefficient(0.5, 1.0) == 1.0);
    ck_assert(ptdp_clip_coefficient(0.0, 1.0) == 1.0);
    /* exactly at max: 1/(1 + 1e-6) < 1, clipped by a hair, as PyTorch does */
    ck_assert(ptdp_clip_coefficient(1.0, 1.0) < 1.0);
    /* an infinite norm zeroes the step, a NaN norm poisons it */
    ck_assert(ptdp_clip_coefficient(INFINITY, 1.0) == 0.0);
    ck_assert(isnan(ptdp_clip_coefficient(NAN, 1.0)));
}
END_TEST

int main(void)
{
    return harness_main("optim-" PTDP_REAL_NAME);
}
