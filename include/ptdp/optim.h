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

#endif
