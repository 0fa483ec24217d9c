/*
 * cblas.h — the explorer's build only (web/build.sh): the declarations
 * src/nn/blas.h needs, with no BLAS behind them.
 *
 * The explorer runs `ptdp schedule` and `ptdp plan`, which multiply no
 * matrix; the library's other files still name GEMM, so the linker needs the
 * symbols.  web/blas_none.c defines them to stop loudly if anything ever
 * called one, rather than answer with garbage.
 */
#ifndef PTDP_WEB_CBLAS_H
#define PTDP_WEB_CBLAS_H

enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112 };

void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
void cblas_dgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                 double alpha, const double *a, int lda, const double *b, int ldb, double beta, double *c, int ldc);

#endif
