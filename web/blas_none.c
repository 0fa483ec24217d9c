/*
 * blas_none.c — GEMM in the explorer's build: none (include/cblas.h says why).
 *
 * Nothing the explorer runs (`ptdp schedule`, `ptdp plan`) multiplies
 * matrices; training does, and the explorer cannot train (it has no
 * threads).  Should a call ever arrive, it stops the module with a message
 * instead of returning an unfilled C.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cblas.h"

static void no_blas(const char *name)
{
    fprintf(stderr, "ptdp explorer: %s called, but this WebAssembly build has no BLAS "
            "(it runs schedule and plan only)\n", name);
    abort();
}

void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    (void)order, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda;
    (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;
    no_blas("cblas_sgemm");
}

void cblas_dgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                 double alpha, const double *a, int lda, const double *b, int ldb, double beta, double *c, int ldc)
{
    (void)order, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda;
    (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;
    no_blas("cblas_dgemm");
}
