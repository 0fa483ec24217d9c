/*
 * swiglu.c — SwiGLU's gate, h = silu(a) ⊙ b, and its backward.
 *
 * A Llama block's feed-forward (Shazeer 2020, "GLU variants improve
 * transformer") has two input projections instead of one: a goes through
 * the SiLU (swish) and gates b elementwise, and a third linear maps the
 * product back:
 *
 *     ffn(x) = W2 (silu(x W1^T) ⊙ x W3^T)^T
 *
 *     x ─┬─► W1 ─► a ─► silu ─┐
 *        │                    ⊙ ─► h ─► W2 ─►
 *        └─► W3 ─► b ─────────┘
 *
 * This file is the ⊙ in the middle, with σ the logistic sigmoid:
 *
 *     σ(a)    = 1 / (1 + e^{−a})
 *     silu(a) = a σ(a)
 *     h       = silu(a) b
 *
 * Backward, by the product rule and σ' = σ (1 − σ):
 *
 *     db = dh silu(a)
 *     da = dh b σ(a) (1 + a (1 − σ(a)))
 *
 * σ is computed from e = e^{−|a|}, which never overflows:
 *
 *     σ(a) = 1 / (1 + e)     for a >= 0
 *     σ(a) = e / (1 + e)     for a <  0
 *
 * so a = ±1000 gives σ = 1 or 0 exactly, and h, da and db stay finite.
 * The backward recomputes σ from a rather than keeping it.
 */
#include "ptdp/ops.h"

#include "ptdp/error.h"

#include <math.h>

/* Each row goes in spans of SPAN columns: the exps in one call (exp.c:
 * libm's bits, eight at a time where the machine allows), the rest in
 * loops the compiler vectorises — as gelu.c. */
#define SPAN 256

/* s[j] = σ(a[j]) for j < n, from e^{−|a|}. */
static void sigmoid_span(ptdp_real *s, const ptdp_real *a, int n)
{
    for (int j = 0; j < n; j++)
        s[j] = -fabs(a[j]);
    ptdp_exp_inplace(s, (size_t)n);                     /* s = e^{−|a|} */
    for (int j = 0; j < n; j++)
        s[j] = a[j] >= 0 ? 1 / (1 + s[j]) : s[j] / (1 + s[j]);
}

/* --------------------------------------------------------------- forward */

void ptdp_swiglu_forward(ptdp_tensor h, ptdp_tensor a, ptdp_tensor b)
{
    if (!PTDP_REQUIRE(h.rows == a.rows && h.cols == a.cols && b.rows == a.rows && b.cols == a.cols,
                      "h %d x %d, a %d x %d, b %d x %d", h.rows, h.cols, a.rows, a.cols, b.rows, b.cols))
        return;
    ptdp_real s[SPAN];
    for (int i = 0; i < a.rows; i++)
        for (int j0 = 0; j0 < a.cols; j0 += SPAN) {
            const int n = a.cols - j0 < SPAN ? a.cols - j0 : SPAN;
            const ptdp_real *ar = ptdp_at(a, i, j0), *br = ptdp_at(b, i, j0);
            ptdp_real *hr = ptdp_at(h, i, j0);
            sigmoid_span(s, ar, n);
            for (int j = 0; j < n; j++)                 /* h may be a or b: read, then write */
                hr[j] = ar[j] * s[j] * br[j];
        }
}

/* -------------------------------------------------------------- backward */

void ptdp_swiglu_backward(ptdp_tensor da, ptdp_tensor db, ptdp_tensor dh, ptdp_tensor a, ptdp_tensor b)
{
    if (!PTDP_REQUIRE(da.rows == a.rows && da.cols == a.cols && db.rows == a.rows && db.cols == a.cols &&
                      dh.rows == a.rows && dh.cols == a.cols && b.rows == a.rows && b.cols == a.cols,
                      "da %d x %d, db %d x %d, dh %d x %d, a %d x %d, b %d x %d", da.rows, da.cols, db.rows,
                      db.cols, dh.rows, dh.cols, a.rows, a.cols, b.rows, b.cols))
        return;
    ptdp_real s[SPAN];
    for (int i = 0; i < a.rows; i++)
        for (int j0 = 0; j0 < a.cols; j0 += SPAN) {
            const int n = a.cols - j0 < SPAN ? a.cols - j0 : SPAN;
            const ptdp_real *ar = ptdp_at(a, i, j0), *br = ptdp_at(b, i, j0), *dhr = ptdp_at(dh, i, j0);
            ptdp_real *dar = ptdp_at(da, i, j0), *dbr = ptdp_at(db, i, j0);
            sigmoid_span(s, ar, n);
            for (int j = 0; j < n; j++) {               /* read every input, then write */
                const ptdp_real x = ar[j], y = br[j], g = dhr[j], sg = s[j];
                const ptdp_real grad_a = g * y * sg * (1 + x * (1 - sg));   /* dh b σ (1 + a (1 − σ)) */
                const ptdp_real grad_b = g * (x * sg);                      /* dh silu(a) */
                dar[j] = grad_a;
                dbr[j] = grad_b;
            }
        }
}

/* Forward per element: σ (3: exp, 1 +, a divide), a σ, · b (2) = 5. */
double ptdp_swiglu_flops_forward(size_t n)
{
    return 5.0 * (double)n;
}

/* Backward per element: σ (3), da (6: 1 − σ, a ·, 1 +, σ ·, b ·, dh ·),
 * db (2: a σ, dh ·) = 11. */
double ptdp_swiglu_flops_backward(size_t n)
{
    return 11.0 * (double)n;
}
