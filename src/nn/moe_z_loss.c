/*
 * moe_z_loss.c — ST-MoE's router z-loss (Zoph et al., 2022): a penalty on
 * the size of the router's logits, so that they stay small enough for the
 * softmax (and bf16) to stay well-conditioned.  For each token
 *
 *   lse_t  = log sum_e exp z_te                the log-partition of its row
 *   loss   = beta x mean over tokens of lse_t^2
 *
 * and its gradient, through d lse / d z_e = softmax(z)_e:
 *
 *   dz_te  = beta x 2 lse_t x softmax(z_t)_e / (the tokens it averages)
 *
 *   token:  z = [ 2  0  0 ]:  lse = log(e^2 + 2) = 2.23,  lse^2 = 4.97
 *           softmax = [ .79 .11 .11 ]:  dz = beta 2 (2.23) [ .79 .11 .11 ] / n
 *
 * Every logit's gradient has the sign of lse: when the row is large the
 * whole row is pushed down, the largest logits most.  It reads z alone
 * (neither the choices nor the gates), so it is the same for a softmax
 * and a sigmoid router.
 *
 * The mean is over the global batch's tokens, as the balance loss's mean
 * is over its sequences (moe_route.c): a sequence of T_seq positions adds
 * beta sum_t lse_t^2 / T_seq, and the model averages sequences.  A device
 * holding T of a sequence's positions (CP) adds its own tokens' share;
 * the shares add up over the CP group, with no exchange at all.
 */
#include "ptdp/moe_route.h"

#include <math.h>

/* lse of one row, from its largest entry so that exp cannot overflow. */
static double log_sum_exp(const ptdp_real *z, int E)
{
    double top = -INFINITY, sum = 0.0;
    for (int e = 0; e < E; e++)
        top = z[e] > top ? z[e] : top;
    if (!isfinite(top))
        return top;   /* an infinite or NaN row: lse is its top */
    for (int e = 0; e < E; e++)
        sum += exp(z[e] - top);
    return top + log(sum);
}

double ptdp_moe_z_loss(int rows, int E, int T_seq, double beta, const ptdp_real *z)
{
    double sum = 0.0;
    for (int r = 0; r < rows; r++) {
        const double lse = log_sum_exp(z + (size_t)r * E, E);
        sum += lse * lse;
    }
    return beta * sum / T_seq;
}

void ptdp_moe_z_loss_backward(int rows, int E, int T_seq, double beta, const ptdp_real *z, double scale,
                              ptdp_real *dz)
{
    for (int r = 0; r < rows; r++) {
        const ptdp_real *row = z + (size_t)r * E;
        const double lse = log_sum_exp(row, E), w = scale * beta * 2.0 * lse / T_seq;
        for (int e = 0; e < E; e++)
            dz[(size_t)r * E + e] += (ptdp_real)(w * exp(row[e] - lse));
    }
}
