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

#include "runtime/pool.h"

/* sqrt(2/pi) and the cubic coefficient, in the build's precision. */
#define GELU_K ((ptdp_real)0.7978845608028654)
#define GELU_C ((ptdp_real)0.044715)

/* Each row goes in spans of SPAN columns and three passes over a
 * span: the exponent's argument, the exps (exp.c: libm's bits, eight at a
 * time where the machine allows), and the rest — element by element the
 * very same operations in the same order as one pass would do, so the
 * same bits; but the first and the last vectorise, which a loop with a
 * call of libm in it never does. */
#define SPAN 256

/* y = x σ(2u) = x / (1 + e^{-2u}) over n elements; y may be x. */
static void gelu_span(ptdp_real *y, const ptdp_real *x, int n)
{
    ptdp_real e[SPAN];
    for (int j = 0; j < n; j++) {                       /* e = -2u */
        const ptdp_real v = x[j];
        e[j] = -2 * (GELU_K * (v + GELU_C * v * v * v));
    }
    ptdp_exp_inplace(e, (size_t)n);                     /* e = e^{-2u} */
    for (int j = 0; j < n; j++)                         /* read before write: y may be x */
        y[j] = x[j] / (1 + e[j]);
}

/* The rows of a large tensor are shared with the device's helper threads
 * (runtime/pool.h), a block of rows each: a row's spans are the same
 * whichever thread runs them, so the bits are too. */
#define MIN_SHARED_ELEMENTS 65536.0

typedef struct {
    ptdp_tensor out, a, x;             /* forward: y, x; backward: dx, dy, x */
} gelu_job;

static void forward_rows(void *arg, int part, int parts)
{
    const gelu_job *g = arg;
    size_t i0, i1;
    ptdp_pool_block((size_t)g->x.rows, part, parts, &i0, &i1);
    for (int i = (int)i0; i < (int)i1; i++)
        for (int j0 = 0; j0 < g->x.cols; j0 += SPAN)
            gelu_span(ptdp_at(g->out, i, j0), ptdp_at(g->x, i, j0), g->x.cols - j0 < SPAN ? g->x.cols - j0 : SPAN);
}

/* fn over x's rows: on the helpers too when x is large enough. */
static void over_rows(ptdp_pool_fn fn, gelu_job *g)
{
    ptdp_pool_share(g->x.rows > 1 ? (double)g->x.rows * g->x.cols : 0, MIN_SHARED_ELEMENTS, fn, g);
}

void ptdp_gelu_forward(ptdp_tensor y, ptdp_tensor x)
{
    if (!PTDP_REQUIRE(y.rows == x.rows && y.cols == x.cols, "y %d x %d, x %d x %d", y.rows, y.cols,
                      x.rows, x.cols))
        return;
    gelu_job g = { .out = y, .x = x };
    over_rows(forward_rows, &g);
}

/* dx = dy GELU'(x) over n elements, GELU'(x) = s + x s (1 - s) 2 du/dx
 * with s = 1 / (1 + e^{-2u}) recomputed from x; dx may be dy. */
static void gelu_backward_span(ptdp_real *dx, const ptdp_real *dy, const ptdp_real *x, int n)
{
    ptdp_real e[SPAN];
    for (int j = 0; j < n; j++) {                       /* e = -2u */
        const ptdp_real v = x[j], sq = v * v;
        e[j] = -2 * (GELU_K * (v + GELU_C * sq * v));
    }
    ptdp_exp_inplace(e, (size_t)n);                     /* e = e^{-2u} */
    for (int j = 0; j < n; j++) {
        const ptdp_real v = x[j], sq = v * v;
        const ptdp_real s = 1 / (1 + e[j]);
        const ptdp_real du = GELU_K * (1 + 3 * GELU_C * sq);
        const ptdp_real grad = s + v * s * (1 - s) * 2 * du;
        dx[j] = dy[j] * grad;                           /* dx may be dy: read, then write */
    }
}

static void backward_rows(void *arg, int part, int parts)
{
    const gelu_job *g = arg;
    size_t i0, i1;
    ptdp_pool_block((size_t)g->x.rows, part, parts, &i0, &i1);
    for (int i = (int)i0; i < (int)i1; i++)
        for (int j0 = 0; j0 < g->x.cols; j0 += SPAN)
            gelu_backward_span(ptdp_at(g->out, i, j0), ptdp_at(g->a, i, j0), ptdp_at(g->x, i, j0),
                               g->x.cols - j0 < SPAN ? g->x.cols - j0 : SPAN);
}

void ptdp_gelu_backward(ptdp_tensor dx, ptdp_tensor dy, ptdp_tensor x)
{
    if (!PTDP_REQUIRE(dx.rows == x.rows && dx.cols == x.cols && dy.rows == x.rows && dy.cols == x.cols,
                      "dx %d x %d, dy %d x %d, x %d x %d", dx.rows, dx.cols, dy.rows, dy.cols, x.rows, x.cols))
        return;
    gelu_job g = { .out = dx, .a = dy, .x = x };
    over_rows(backward_rows, &g);
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
