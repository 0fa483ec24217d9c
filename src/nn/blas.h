/*
 * blas.h — the one door to BLAS (internal to the library).
 *
 * Every matrix product in ptdp is one call of the BLAS routine GEMM:
 *
 *     C = alpha * op(A) op(B) + beta * C        op(X) = X or X^T
 *
 * in row-major storage.  ptdp_real is float or double depending on the build,
 * so this header picks cblas_sgemm or cblas_dgemm once, here, and the rest of
 * the code never names a precision.
 *
 * The leading dimension ("lda") is the number of elements from one row to
 * the next — exactly a ptdp_tensor's stride.  That is why a column slice of a
 * larger matrix (a tensor-parallel shard viewed in place) can be handed to
 * GEMM without copying it:
 *
 *        lda = stride ──────────────►
 *        ┌────────────┬──────┬──────┐
 *        │            │ view │      │   view: rows x cols, data = &parent[0][c0]
 *        │            │      │      │   row i starts at data + i * lda
 *        └────────────┴──────┴──────┘
 */
#ifndef PTDP_BLAS_H
#define PTDP_BLAS_H

#include <stdbool.h>

#if defined(PTDP_HAVE_OPENBLAS_CBLAS_H)
#include <openblas/cblas.h>
#else
#include <cblas.h>
#endif

#include "ptdp/tensor.h"
#include "ptdp/types.h"

/* The leading dimension BLAS expects for t.  For one row (or none) the stride
 * is never used to step, but BLAS still insists on ld >= max(1, cols). */
static inline int ptdp_blas_ld(ptdp_tensor t)
{
    int ld = t.stride;
    if (ld < t.cols)
        ld = t.cols;
    return ld > 0 ? ld : 1;
}

/* One GEMM call on the calling thread: the product itself. */
static inline void ptdp_gemm_one(bool trans_a, bool trans_b, int m, int n, int k,
                                 double alpha, const ptdp_real *a, int lda,
                                 const ptdp_real *b, int ldb,
                                 double beta, ptdp_real *c, int ldc)
{
    enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
#ifdef PTDP_DOUBLE
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#else
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, (float)alpha, a, lda, b, ldb, (float)beta, c, ldc);
#endif
}

/* A large product shared with the device's helper threads, by blocks of
 * rows of C (blas.c); false when it is too small to share, or the device
 * has no helpers: then the caller computes it alone. */
bool ptdp_gemm_shared(bool trans_a, bool trans_b, int m, int n, int k,
                      double alpha, const ptdp_real *a, int lda,
                      const ptdp_real *b, int ldb,
                      double beta, ptdp_real *c, int ldc);

/* Where a shared product's rows may be cut: 16 when this BLAS gives a
 * product cut every 16 rows the whole product's bits (checked once, at
 * the first call), else 48 (blas.c). */
int ptdp_gemm_row_granule(void);

/* C (m x n) = op(A) op(B) + the bias (1 x n) on every row: each row of C
 * set to the bias, then the product added (beta 1) — by the thread that
 * computes the row, when the product is shared (blas.c). */
void ptdp_gemm_bias(bool trans_a, bool trans_b, int m, int n, int k, const ptdp_real *a, int lda,
                    const ptdp_real *b, int ldb, const ptdp_real *bias, ptdp_real *c, int ldc);

/* C (m x n) = alpha * op(A) op(B) + beta * C, row-major, where op(A) is m x k
 * and op(B) is k x n.  Degenerate sizes are handled here rather than passed
 * to BLAS (some implementations report k == 0 with ld == 0 as an error):
 * with k == 0 the product is empty and C = beta * C.  The bits of C do not
 * depend on how many threads share the product (blas.c). */
static inline void ptdp_gemm(bool trans_a, bool trans_b, int m, int n, int k,
                             double alpha, const ptdp_real *a, int lda,
                             const ptdp_real *b, int ldb,
                             double beta, ptdp_real *c, int ldc)
{
    if (m <= 0 || n <= 0)
        return;
    if (k <= 0) {
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                c[(size_t)i * ldc + j] = beta == 0.0 ? 0 : (ptdp_real)(beta * c[(size_t)i * ldc + j]);
        return;
    }
    if (!ptdp_gemm_shared(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
        ptdp_gemm_one(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

#endif
