/*
 * optim.h — optimizers on flat arrays: AdamW, SGD, and gradient clipping.
 *
 * An optimizer step is element-wise: parameter i moves using only gradient i
 * and its own state (m_i, v_i or a momentum buffer).  So the optimizer works
 * on any contiguous range of the flat parameter buffer — the whole model, a
 * pipeline stage, a tensor-parallel shard, or the 1/DP slice that ZeRO-1
 * gives each rank — and gives the same numbers whichever way it is cut.
 *
 * The one global quantity is the gradient norm used for clipping: each device
 * sums the squares of its own gradients (ptdp_sum_squares), the sums are
 * all-reduced (counting every parameter once, never a replica twice), and
 * ptdp_clip_coefficient turns the norm into a factor for ptdp_scale.
 *
 * Every function is pure: no allocation, no communication, no clock.  The
 * step count is the caller's (1 for the first step), as PyTorch keeps it in
 * the optimizer state and saves it in checkpoints.
 */
#ifndef PTDP_OPTIM_H
#define PTDP_OPTIM_H

#include <stddef.h>

#include "bf16.h"
#include "types.h"

typedef struct { double lr, beta1, beta2, eps, weight_decay; } ptdp_adamw_config;   /* defaults 1e-3, 0.9, 0.999, 1e-8, 0 */
typedef struct { double lr, momentum, weight_decay; } ptdp_sgd_config;

/* The defaults above (torch.optim.AdamW's, except weight_decay 0 as the model spec says). */
ptdp_adamw_config ptdp_adamw_default_config(void);

/* One AdamW step on n elements, exactly as torch.optim.AdamW (foreach=False, maximize=False, amsgrad=False), step = 1 for the first:
 *   p *= 1 - lr*wd;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *   bc1 = 1 - b1^step; bc2 = 1 - b2^step; step_size = lr / bc1;
 *   denom = sqrt(v) / sqrt(bc2) + eps;  p -= step_size * m / denom
 * Keep the same operation order as PyTorch's single-tensor implementation so float results match it closely. */
void ptdp_adamw_step(ptdp_real *p, const ptdp_real *g, ptdp_real *m, ptdp_real *v, size_t n, const ptdp_adamw_config *c, long step);
/* One SGD step as torch.optim.SGD (dampening 0, nesterov off): g' = g + wd p; with momentum: buf = g' on the first step (step==1), else buf = mu buf + g'; p -= lr * (momentum ? buf : g'). buf may be NULL when momentum == 0. */
void ptdp_sgd_step(ptdp_real *p, const ptdp_real *g, ptdp_real *buf, size_t n, const ptdp_sgd_config *c, long step);
/* Mixed precision (bf16 parameters, float optimizer): the same steps on
 * float "master" weights, which then are rounded to bf16 for the model.
 *
 *     g (float, widened from the bf16 gradient by the caller)
 *        │
 *     master, m, v (float) ──step──► master', m', v' ──round (bf16.h)──► p (bf16)
 *
 * The master copy is what makes small updates count: lr·m̂/denom is often
 * below half a bf16 step of p, and added to a bf16 p it would round away
 * every time; in float it accumulates until p moves.  Memory per parameter:
 * 2 (p) + 2 (bf16 gradient) + 4 (master) + 4 + 4 (m, v) = 16 bytes for
 * AdamW.  The arithmetic on master, m and v is ptdp_adamw_step's (resp.
 * ptdp_sgd_step's) in float, operation for operation: in the float build
 * the master weights equal what ptdp_adamw_step gives on the same arrays,
 * bit for bit, whatever the build.  p[i] = bf16(master'[i]), round to
 * nearest even. */
void ptdp_adamw_step_bf16(float *master, const float *g, float *m, float *v, ptdp_bf16 *p,
                          size_t n, const ptdp_adamw_config *c, long step);
void ptdp_sgd_step_bf16(float *master, const float *g, float *buf, ptdp_bf16 *p, size_t n,
                        const ptdp_sgd_config *c, long step);
/* ---- the optimizer a run configures, on any stretch of elements ---- */
typedef enum { PTDP_OPT_ADAMW = 0, PTDP_OPT_SGD } ptdp_optimizer_kind;

/* AdamW (its betas and eps the defaults above) or SGD, as `ptdp train`
 * configures it; weight decay is per stretch (a tensor without decay). */
typedef struct {
    ptdp_optimizer_kind kind;
    double lr, momentum;        /* momentum: SGD's (0: no buffer)            */
    double weight_decay;        /* for the tensors that decay                */
} ptdp_optimizer;

/* One step of o on n elements with weight decay wd, as ptdp_adamw_step
 * (state a = m, b = v) or ptdp_sgd_step (a = the momentum buffer, or NULL).
 * Returns the flops it costs. */
double ptdp_optimizer_step(const ptdp_optimizer *o, ptdp_real *p, const ptdp_real *g, ptdp_real *a,
                           ptdp_real *b, size_t n, double wd, long step);
/* Mixed precision: the same step on float master weights from a bf16
 * gradient, widened to float a block at a time and multiplied there by
 * clip (when clip < 1: clipping in float, not in bf16), writing the bf16
 * parameters p = bf16(master').  Returns the flops; in the double build,
 * which has no float master weights, -1 and nothing done. */
double ptdp_optimizer_step_bf16(const ptdp_optimizer *o, ptdp_real *master, const ptdp_bf16 *g, double clip,
                                ptdp_real *a, ptdp_real *b, ptdp_bf16 *p, size_t n, double wd, long step);

/* Sum of squares in double (for the global gradient norm, which sums these across devices).
 * A fixed summation order: the same array always gives the same bits. */
double ptdp_sum_squares(const ptdp_real *x, size_t n);
/* x *= s */
void ptdp_scale(ptdp_real *x, size_t n, double s);
/* torch.nn.utils.clip_grad_norm_: clip_coef = max_norm / (total_norm + 1e-6); if clip_coef < 1, gradients are scaled by clip_coef. Returns the factor to apply (<= 1). */
double ptdp_clip_coefficient(double total_norm, double max_norm);

/* Flops per element, for the virtual clock (same convention as ops.h):
 * AdamW 15 (sqrt counted as one), SGD 2 to 6 (weight decay and momentum add 2 each). */
double ptdp_adamw_flops(size_t n);
double ptdp_sgd_flops(size_t n, const ptdp_sgd_config *c);
/* The bf16 steps: the same, plus 1 per element for rounding the new parameter to bf16. */
double ptdp_adamw_bf16_flops(size_t n);
double ptdp_sgd_bf16_flops(size_t n, const ptdp_sgd_config *c);

#endif
