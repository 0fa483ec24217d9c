/*
 * op_check.h — what the tests of one op share: views over a test's own
 * memory, deterministic random numbers, and the tolerances of a result
 * against a reference computed in double.
 *
 * Gradients are judged by central finite differences in the double build
 * only (in float the difference quotient itself is too noisy):
 *
 *     dL/dθ ≈ (L(θ + h) − L(θ − h)) / 2h,   L = sum(output ⊙ R), R fixed,
 *
 * so dL/d(output) = R is what the backward is given.
 */
#ifndef PTDP_TESTS_OP_CHECK_H
#define PTDP_TESTS_OP_CHECK_H

#include <stdint.h>
#include <string.h>

#include "ptdp/tensor.h"

#ifdef PTDP_DOUBLE
#define OP_REL 1e-12   /* agreement with a double reference, relative to the scale of the terms */
#else
#define OP_REL 2e-6
#endif
#define OP_FD_H 1e-5   /* the finite-difference step */
#define OP_FD_REL 1e-7 /* what central differences with that step reach in double */

/* A view over caller memory with an explicit stride. */
static inline ptdp_tensor op_view(ptdp_real *data, int rows, int cols, int stride)
{
    ptdp_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.rows = rows;
    t.cols = cols;
    t.stride = stride;
    return t;
}

static inline double op_at(ptdp_tensor t, int i, int j) { return (double)*ptdp_at(t, i, j); }

/* Deterministic uniform numbers in [-1, 1) (splitmix64). */
static uint64_t op_rng_state = 0x1234567;
static inline double op_uniform(void)
{
    uint64_t z = (op_rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static inline void op_fill_random(ptdp_tensor t, double scale)
{
    for (int i = 0; i < t.rows; i++)
        for (int j = 0; j < t.cols; j++)
            *ptdp_at(t, i, j) = (ptdp_real)(scale * op_uniform());
}

static inline void op_fill_all(ptdp_real *p, size_t n, ptdp_real v)
{
    for (size_t i = 0; i < n; i++)
        p[i] = v;
}

/* sum_ij t[i][j] r[i][j], in double: the scalar L whose gradient is r. */
static inline double op_dot(ptdp_tensor t, ptdp_tensor r)
{
    double s = 0;
    for (int i = 0; i < t.rows; i++)
        for (int j = 0; j < t.cols; j++)
            s += op_at(t, i, j) * op_at(r, i, j);
    return s;
}

#endif
