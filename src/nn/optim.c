/*
 * optim.c — AdamW and SGD, element by element, as PyTorch computes them.
 *
 * AdamW (Loshchilov & Hutter, "Decoupled Weight Decay Regularization"), step t = 1, 2, …:
 *
 *     p   ← p (1 - lr wd)                       decay the weight itself, not via g
 *     m   ← b1 m + (1 - b1) g                   running mean of g      (momentum)
 *     v   ← b2 v + (1 - b2) g²                  running mean of g²     (scale)
 *     m̂   = m / (1 - b1^t),  v̂ = v / (1 - b2^t) undo the pull towards m = v = 0
 *     p   ← p - lr m̂ / (sqrt(v̂) + eps)
 *
 * Bias correction matters most at the start: after step 1, m = (1-b1) g and
 * v = (1-b2) g², so m̂ = g, v̂ = g² and the first update is lr·g/(|g|+eps) —
 * about lr in magnitude for every parameter, however small its gradient.
 *
 * PyTorch (torch/optim/adamw.py, _single_tensor_adamw) folds the two
 * corrections into scalars, and float results match its only if the
 * element-wise operations happen in the same order with the same roundings:
 *
 *     step_size = lr / (1 - b1^t)                  scalars: in double,
 *     bc2_sqrt  = sqrt(1 - b2^t)                   then rounded once to ptdp_real
 *     denom     = sqrt(v) / bc2_sqrt + eps
 *     p         = p + (-step_size · m) / denom     (addcdiv_)
 *
 * SGD (torch.optim.SGD with dampening 0, no Nesterov), classic L2 weight
 * decay folded into the gradient:
 *
 *     g' = g + wd p
 *     b  = g'  (first step)   or   b ← mu b + g'   (later steps)
 *     p  ← p - lr · (mu ? b : g')
 *
 * Mixed precision: the _bf16 steps run the same loops in float on master
 * weights, then round each new value to the bf16 parameter the model uses.
 * Their element updates repeat the lines above rather than share them, so
 * each loop still reads as the formula; tests/test_bf16.c checks that the
 * master weights equal ptdp_adamw_step's / ptdp_sgd_step's bit for bit, so
 * the two copies cannot drift apart.
 */
#include "ptdp/optim.h"

#include <assert.h>
#include <math.h>

#include "runtime/pool.h"

#ifdef PTDP_DOUBLE
#define SQRT sqrt
#else
#define SQRT sqrtf
#endif

ptdp_adamw_config ptdp_adamw_default_config(void)
{
    ptdp_adamw_config c = { .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0 };
    return c;
}

/* ----------------------------------------------------------------- AdamW */

/* The step's scalars, and the vectors a block of elements reads. */
typedef struct {
    ptdp_real decay, b1, one_minus_b1, b2, one_minus_b2, neg_step_size, bc2_sqrt, eps;
    ptdp_real *p, *m, *v;
    const ptdp_real *g;
    size_t n;
} adamw_job;

/* Elements [i0, i1): each on its own, so a block's bits never depend on
 * where the blocks were cut. */
static void adamw_span(const adamw_job *j, size_t i0, size_t i1)
{
    ptdp_real *p = j->p, *m = j->m, *v = j->v;
    const ptdp_real *g = j->g;
    for (size_t i = i0; i < i1; i++) {
        ptdp_real gi = g[i];
        ptdp_real pi = p[i] * j->decay;                              /* param.mul_(1 - lr wd)      */
        ptdp_real mi = m[i] * j->b1 + j->one_minus_b1 * gi;          /* exp_avg.mul_(b1).add_(g, alpha=1-b1) */
        ptdp_real vi = v[i] * j->b2 + j->one_minus_b2 * gi * gi;     /* exp_avg_sq.mul_(b2).addcmul_(g, g, value=1-b2) */
        ptdp_real denom = SQRT(vi) / j->bc2_sqrt + j->eps;           /* (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps) */
        p[i] = pi + j->neg_step_size * mi / denom;                   /* param.addcdiv_(exp_avg, denom, value=-step_size) */
        m[i] = mi;
        v[i] = vi;
    }
}

static void adamw_part(void *arg, int part, int parts)
{
    const adamw_job *j = arg;
    size_t first, end;
    ptdp_pool_block(j->n, part, parts, &first, &end);
    adamw_span(j, first, end);
}

/* Below this many elements the step stays on the device thread (a helper's
 * wake-up costs microseconds); above, the elements are cut into one block
 * a thread of the device's pool (runtime/pool.h), as a GEMM's rows are. */
#define ADAMW_MIN_SHARED ((size_t)1 << 15)

void ptdp_adamw_step(ptdp_real *p, const ptdp_real *g, ptdp_real *m, ptdp_real *v, size_t n,
                     const ptdp_adamw_config *c, long step)
{
    assert(step >= 1);
    /* The per-step scalars, computed in double as Python does, then rounded
     * once to the element type as PyTorch does when it applies them. */
    double bc1 = 1.0 - pow(c->beta1, (double)step);
    double bc2 = 1.0 - pow(c->beta2, (double)step);
    const adamw_job j = {
        .decay = (ptdp_real)(1.0 - c->lr * c->weight_decay),
        .b1 = (ptdp_real)c->beta1, .one_minus_b1 = (ptdp_real)(1.0 - c->beta1),
        .b2 = (ptdp_real)c->beta2, .one_minus_b2 = (ptdp_real)(1.0 - c->beta2),
        .neg_step_size = (ptdp_real)(-(c->lr / bc1)), .bc2_sqrt = (ptdp_real)sqrt(bc2), .eps = (ptdp_real)c->eps,
        .p = p, .m = m, .v = v, .g = g, .n = n,
    };
    ptdp_pool *pool = ptdp_pool_current();
    if (n >= ADAMW_MIN_SHARED && ptdp_pool_threads(pool) > 1)
        ptdp_pool_run(pool, ptdp_pool_threads(pool), adamw_part, (void *)&j);
    else
        adamw_span(&j, 0, n);
}

/* Decay, m (3), v (4), sqrt, divide, add eps, then -step·m / denom + p (3). */
double ptdp_adamw_flops(size_t n)
{
    return 15.0 * (double)n;
}

/* ------------------------------------------------------------------- SGD */

void ptdp_sgd_step(ptdp_real *p, const ptdp_real *g, ptdp_real *buf, size_t n,
                   const ptdp_sgd_config *c, long step)
{
    assert(step >= 1);
    assert(c->momentum == 0.0 || buf != NULL);
    const ptdp_real wd = (ptdp_real)c->weight_decay;
    const ptdp_real mu = (ptdp_real)c->momentum;
    const ptdp_real neg_lr = (ptdp_real)(-c->lr);

    for (size_t i = 0; i < n; i++) {
        ptdp_real d = g[i];
        if (c->weight_decay != 0.0)
            d = d + wd * p[i];                  /* d_p.add(param, alpha=wd)          */
        if (c->momentum != 0.0) {
            /* PyTorch creates the buffer as a copy of the first gradient,
             * so step 1 is not mu * 0 + g' (the same here, but not in
             * general with dampening). */
            buf[i] = step == 1 ? d : buf[i] * mu + d;   /* buf.mul_(mu).add_(d_p) */
            d = buf[i];
        }
        p[i] = p[i] + neg_lr * d;               /* param.add_(d_p, alpha=-lr)        */
    }
}

/* The update (2), weight decay (2), momentum (2). */
double ptdp_sgd_flops(size_t n, const ptdp_sgd_config *c)
{
    double per = 2.0 + (c->weight_decay != 0.0 ? 2.0 : 0.0) + (c->momentum != 0.0 ? 2.0 : 0.0);
    return per * (double)n;
}

/* --------------------------------------------- mixed precision (bf16) */

void ptdp_adamw_step_bf16(float *master, const float *g, float *m, float *v, ptdp_bf16 *p,
                          size_t n, const ptdp_adamw_config *c, long step)
{
    assert(step >= 1);
    /* ptdp_adamw_step's scalars, rounded once to float (its ptdp_real in
     * the float build). */
    double bc1 = 1.0 - pow(c->beta1, (double)step);
    double bc2 = 1.0 - pow(c->beta2, (double)step);
    const float decay = (float)(1.0 - c->lr * c->weight_decay);
    const float b1 = (float)c->beta1, one_minus_b1 = (float)(1.0 - c->beta1);
    const float b2 = (float)c->beta2, one_minus_b2 = (float)(1.0 - c->beta2);
    const float neg_step_size = (float)(-(c->lr / bc1));
    const float bc2_sqrt = (float)sqrt(bc2);
    const float eps = (float)c->eps;

    for (size_t i = 0; i < n; i++) {
        float gi = g[i];
        float pi = master[i] * decay;
        float mi = m[i] * b1 + one_minus_b1 * gi;
        float vi = v[i] * b2 + one_minus_b2 * gi * gi;
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        master[i] = pi + neg_step_size * mi / denom;
        m[i] = mi;
        v[i] = vi;
        p[i] = ptdp_bf16_from_float(master[i]);    /* what the model computes with */
    }
}

double ptdp_adamw_bf16_flops(size_t n)
{
    return ptdp_adamw_flops(n) + (double)n;
}

void ptdp_sgd_step_bf16(float *master, const float *g, float *buf, ptdp_bf16 *p, size_t n,
                        const ptdp_sgd_config *c, long step)
{
    assert(step >= 1);
    assert(c->momentum == 0.0 || buf != NULL);
    const float wd = (float)c->weight_decay;
    const float mu = (float)c->momentum;
    const float neg_lr = (float)(-c->lr);

    for (size_t i = 0; i < n; i++) {
        float d = g[i];
        if (c->weight_decay != 0.0)
            d = d + wd * master[i];
        if (c->momentum != 0.0) {
            buf[i] = step == 1 ? d : buf[i] * mu + d;
            d = buf[i];
        }
        master[i] = master[i] + neg_lr * d;
        p[i] = ptdp_bf16_from_float(master[i]);
    }
}

double ptdp_sgd_bf16_flops(size_t n, const ptdp_sgd_config *c)
{
    return ptdp_sgd_flops(n, c) + (double)n;
}

/* ------------------------------------------ the optimizer a run configures */

double ptdp_optimizer_step(const ptdp_optimizer *o, ptdp_real *p, const ptdp_real *g, ptdp_real *a,
                           ptdp_real *b, size_t n, double wd, long step)
{
    if (o->kind == PTDP_OPT_ADAMW) {
        ptdp_adamw_config ac = ptdp_adamw_default_config();
        ac.lr = o->lr;
        ac.weight_decay = wd;
        ptdp_adamw_step(p, g, a, b, n, &ac, step);
        return ptdp_adamw_flops(n);
    }
    ptdp_sgd_config sc = { .lr = o->lr, .momentum = o->momentum, .weight_decay = wd };
    ptdp_sgd_step(p, g, a, n, &sc, step);
    return ptdp_sgd_flops(n, &sc);
}

double ptdp_optimizer_step_bf16(const ptdp_optimizer *o, ptdp_real *master, const ptdp_bf16 *g16, double clip,
                                ptdp_real *a, ptdp_real *b, ptdp_bf16 *p, size_t n, double wd, long step)
{
#ifdef PTDP_DOUBLE
    (void)o, (void)master, (void)g16, (void)clip, (void)a, (void)b, (void)p, (void)n, (void)wd, (void)step;
    return -1;   /* bf16 keeps float master weights: the float build only */
#else
    enum { BLOCK = 1024 };
    float g[BLOCK];
    ptdp_adamw_config ac = ptdp_adamw_default_config();
    ac.lr = o->lr;
    ac.weight_decay = wd;
    ptdp_sgd_config sc = { .lr = o->lr, .momentum = o->momentum, .weight_decay = wd };
    for (size_t i = 0; i < n; i += BLOCK) {
        size_t k = n - i < BLOCK ? n - i : BLOCK;
        ptdp_bf16_to_float_array(g, g16 + i, k);
        if (clip < 1)
            ptdp_scale(g, k, clip);
        if (o->kind == PTDP_OPT_ADAMW)
            ptdp_adamw_step_bf16(master + i, g, a + i, b + i, p + i, k, &ac, step);
        else
            ptdp_sgd_step_bf16(master + i, g, a ? a + i : NULL, p + i, k, &sc, step);
    }
    return o->kind == PTDP_OPT_ADAMW ? ptdp_adamw_bf16_flops(n) : ptdp_sgd_bf16_flops(n, &sc);
#endif
}

/* ------------------------------------------------ norms and clipping */

/* Four running sums, interleaved, so the loop is not one long chain of
 * dependent additions; combined in a fixed order, so the result does not
 * depend on anything but x. */
double ptdp_sum_squares(const ptdp_real *x, size_t n)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        double a = x[i], b = x[i + 1], c = x[i + 2], d = x[i + 3];
        s0 += a * a;
        s1 += b * b;
        s2 += c * c;
        s3 += d * d;
    }
    for (; i < n; i++)
        s0 += (double)x[i] * x[i];
    return (s0 + s1) + (s2 + s3);
}

void ptdp_scale(ptdp_real *x, size_t n, double s)
{
    const ptdp_real f = (ptdp_real)s;
    for (size_t i = 0; i < n; i++)
        x[i] *= f;
}

/* clip_grad_norm_ divides by total_norm + 1e-6 so a zero norm does not
 * divide by zero, and scales only downwards.  A NaN norm gives a NaN factor,
 * as in PyTorch: the poisoned step shows up instead of passing as unclipped. */
double ptdp_clip_coefficient(double total_norm, double max_norm)
{
    double coef = max_norm / (total_norm + 1e-6);
    if (isnan(coef))
        return coef;
    return coef < 1.0 ? coef : 1.0;
}
