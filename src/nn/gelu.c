/*
 * gelu.c — the GELU activation (tanh approximation) and its derivative.
 *
 * GELU(x) = x Φ(x) weighs its input by the probability that a standard normal
 * falls below it.  GPT-2, BERT and Megatron-LM use the tanh approximation,
 * PyTorch's gelu(approximate="tanh"):
 *
 *     u(x)    = k (x + c x^3),          k = sqrt(2/pi),  c = 0.044715
 *     GELU(x) = 0.5 x (1 + tanh u)
 *
 *              y │        ╱
 *                │      ╱        GELU(x) ≈ x   for x ≫ 0
 *                │    ╱
 *   ═════════╲___│__╱═══════ x   GELU(x) ≈ 0   for x ≪ 0,
 *                │               with a dip to ≈ -0.17 near x = -0.75
 *
 * The identity 0.5 (1 + tanh u) = 1 / (1 + e^{-2u}) = σ(2u) (the logistic
 * sigmoid) gives the same function in a cheaper and better-conditioned form,
 * which is how it is computed here (tanhf costs ~2x expf in glibc, and
 * 1 + tanh u loses digits for u ≪ 0 where σ does not):
 *
 *     s       = σ(2u) = 1 / (1 + e^{-2u})
 *     GELU(x) = x s
 *
 * Derivative, by the product rule and σ' = σ (1 - σ):
 *
 *     GELU'(x) = s + x · s (1 - s) · 2 du/dx,       du/dx = k (1 + 3 c x^2)
 *
 * (the same as d/dx of the tanh form: 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) du/dx).
 * The backward needs only the forward's input x: it recomputes s rather than
 * storing it — memory traded for a few flops, as activation recomputation
 * does on a larger scale.
 */
#include "ptdp/ops.h"

#include "ptdp/error.h"

#include <math.h>

/* sqrt(2/pi) and the cubic coefficient, in the build's precision. */
#define GELU_K ((ptdp_real)0.7978845608028654)
#define GELU_C ((ptdp_real)0.044715)

#ifdef PTDP_DOUBLE
#define EXP exp
#else
#define EXP expf
#endif

void ptdp_gelu_forward(ptdp_tensor y, ptdp_tensor x)
{
    if (!PTDP_REQUIRE(y.rows == x.rows && y.cols == x.cols, "y %d x %d, x %d x %d", y.rows, y.cols,
                      x.rows, x.cols))
        return;
    for (int i = 0; i < x.rows; i++) {
        const ptdp_real *xr = ptdp_at(x, i, 0);
        ptdp_real *yr = ptdp_at(y, i, 0);
        for (int j = 0; j < x.cols; j++) {
            ptdp_real v = xr[j];                       /* read before write: y may be x */
            ptdp_real u = GELU_K * (v + GELU_C * v * v * v);
            yr[j] = v / (1 + EXP(-2 * u));             /* x σ(2u) */
        }
    }
}

void ptdp_gelu_backward(ptdp_tensor dx, ptdp_tensor dy, ptdp_tensor x)
{
    if (!PTDP_REQUIRE(dx.rows == x.rows && dx.cols == x.cols && dy.rows == x.rows && dy.cols == x.cols,
                      "dx %d x %d, dy %d x %d, x %d x %d", dx.rows, dx.cols, dy.rows, dy.cols, x.rows, x.cols))
        return;
    for (int i = 0; i < x.rows; i++) {
        const ptdp_real *xr = ptdp_at(x, i, 0);
        const ptdp_real *dyr = ptdp_at(dy, i, 0);
        ptdp_real *dxr = ptdp_at(dx, i, 0);
        for (int j = 0; j < x.cols; j++) {
            ptdp_real v = xr[j], sq = v * v;
            ptdp_real u = GELU_K * (v + GELU_C * sq * v);
            ptdp_real s = 1 / (1 + EXP(-2 * u));
            ptdp_real du = GELU_K * (1 + 3 * GELU_C * sq);
            ptdp_real grad = s + v * s * (1 - s) * 2 * du;
            dxr[j] = dyr[j] * grad;                    /* dx may be dy: read, then write */
        }
    }
}

/* Forward: u (5: v·v·v, c·, v +, k·), -2·, exp, 1 +, v / = 9. */
double ptdp_gelu_flops_forward(size_t n)
{
    return 9.0 * (double)n;
}

/* Backward: sq and u (5), s (4: -2·, exp, 1 +, 1 /), du (3: 3c·sq, 1 +, k·),
 * grad (6: v·s, 1 − s, ·, ·2, ·du, s +), dy· (1) = 19. */
double ptdp_gelu_flops_backward(size_t n)
{
    return 19.0 * (double)n;
}
