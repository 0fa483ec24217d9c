/*
 * moe_tokens.h — a mixture's passes over its tokens (internal to the
 * parallel layer; moe_tokens.c): the dispatch, the combine and their
 * backwards, each one pass shared with the device's helper threads, the
 * same bits as the plain loops.
 */
#ifndef PTDP_PARALLEL_MOE_TOKENS_H
#define PTDP_PARALLEL_MOE_TOKENS_H

#include "ptdp/tensor.h"

/* Where a block's choices went: token t's choice j is stacked row
 * slot[t K + j] (-1: dropped by the capacity), with gate gate[t K + j];
 * stacked row s holds token token[s]; rows are C wide. */
typedef struct {
    int rows, K, C, kept;
    const int *slot, *token;
    const ptdp_real *gate;
} ptdp_moe_routing;

/* x[s] = n[token[s]] for every kept row s. */
void ptdp_moe_dispatch(const ptdp_moe_routing *r, ptdp_tensor n, ptdp_real *x);
/* out[t] = sum_j g_tj y[slot(t, j)], from 0 in choice order. */
void ptdp_moe_combine(const ptdp_moe_routing *r, const ptdp_real *y, ptdp_tensor out);
/* dgate[t K + j] = d[t] . y[slot] (in double; 0 if dropped), dy[slot] = g_tj d[t]. */
void ptdp_moe_combine_backward(const ptdp_moe_routing *r, const ptdp_real *y, ptdp_tensor d, ptdp_real *dgate,
                               ptdp_real *dy);
/* dn[t] = sum of dx[s] over t's slots s, from 0 in slot order (overwritten). */
void ptdp_moe_dispatch_backward(const ptdp_moe_routing *r, const ptdp_real *dx, ptdp_tensor dn);

#endif
