/*
 * tp.c — tensor parallelism: the conjugate operators, the vocab-parallel
 * embedding and cross-entropy, and the counter-based dropout that keeps TP
 * ranks consistent.  The column- and row-parallel linear layers built on
 * f and g are parallel_linear.c's.
 *
 * Read tp.h first for the picture.  The one rule behind every function
 * here: an activation is either REPLICATED (every TP rank holds the same
 * B x h tensor) or SPLIT (rank r holds columns [r n/tp, (r+1) n/tp)).
 * Operators move between the two; the forward of one is the backward of
 * its conjugate:
 *
 *   replicated ──f (identity / all-reduce)──► replicated input of a split layer
 *   split partial sums ──g (all-reduce / identity)──► replicated
 *   split ──gather (all-gather / split)──► replicated
 *   replicated ──scatter (split / all-gather)──► split
 */
#include "ptdp/tp.h"

#include <math.h>
#include <string.h>

#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/ops.h"
#include "ptdp/rng.h"

/* ------------------------------------------------------------ operators */

/* All-reduce a (possibly strided) tensor in place.  Contiguous tensors go
 * straight to the collective; a view is reduced row by row so no hidden
 * copy changes the byte count. */
static int all_reduce_tensor(ptdp_comm *tp, ptdp_tensor t)
{
    if (ptdp_comm_size(tp) == 1)
        return PTDP_OK;   /* a group of one: nothing to add, nothing sent */
    if (ptdp_tensor_contiguous(t))
        return ptdp_all_reduce(tp, t.data, t.data, ptdp_tensor_numel(t), PTDP_REAL, PTDP_SUM);
    for (int i = 0; i < t.rows; i++) {
        int rc = ptdp_all_reduce(tp, ptdp_at(t, i, 0), ptdp_at(t, i, 0), (size_t)t.cols, PTDP_REAL, PTDP_SUM);
        if (rc != 0)
            return rc;
    }
    return PTDP_OK;
}

int ptdp_tp_copy_to_region_backward(ptdp_comm *tp, ptdp_tensor dx)
{
    /* x fed every rank's slice of the layer, so dL/dx is the sum of the
     * contributions of all slices. */
    return all_reduce_tensor(tp, dx);
}

int ptdp_tp_reduce_from_region_forward(ptdp_comm *tp, ptdp_tensor y)
{
    /* y = sum_r x_r W_r^T: each rank holds one term of the sum. */
    return all_reduce_tensor(tp, y);
}

/* full = [local_0 | … | local_{tp-1}].  The collective gathers whole
 * contiguous blocks (rank r's rows x c block), so the blocks are then
 * interleaved column-wise into full: a transpose of the block layout. */
int ptdp_tp_gather_from_region_forward(ptdp_device *dev, ptdp_comm *tp,
                                       ptdp_tensor local, ptdp_tensor full)
{
    int n = ptdp_comm_size(tp);
    if (n == 1) {
        ptdp_tensor_copy(full, local);
        return PTDP_OK;
    }
    size_t block = ptdp_tensor_numel(local);
    ptdp_real *buf = ptdp_alloc(dev, block * (size_t)n * sizeof(ptdp_real), PTDP_MEM_COMM, "tp.gather");
    if (buf == NULL)
        return PTDP_ENOMEM;
    int r = ptdp_comm_rank(tp);
    ptdp_tensor_copy(ptdp_tensor_wrap(buf + block * (size_t)r, local.rows, local.cols), local);
    int rc = ptdp_all_gather(tp, PTDP_IN_PLACE, buf, block * (size_t)n, PTDP_REAL);
    if (rc == 0)
        for (int k = 0; k < n; k++)
            ptdp_tensor_copy(ptdp_tensor_cols(full, k * local.cols, local.cols),
                             ptdp_tensor_wrap(buf + block * (size_t)k, local.rows, local.cols));
    ptdp_free(dev, buf);
    return rc;
}

void ptdp_tp_gather_from_region_backward(ptdp_comm *tp, ptdp_tensor dfull, ptdp_tensor dlocal)
{
    ptdp_tensor_copy(dlocal, ptdp_tensor_cols(dfull, ptdp_comm_rank(tp) * dlocal.cols, dlocal.cols));
}

void ptdp_tp_scatter_to_region_forward(ptdp_comm *tp, ptdp_tensor full, ptdp_tensor local)
{
    ptdp_tensor_copy(local, ptdp_tensor_cols(full, ptdp_comm_rank(tp) * local.cols, local.cols));
}

int ptdp_tp_scatter_to_region_backward(ptdp_device *dev, ptdp_comm *tp,
                                       ptdp_tensor dlocal, ptdp_tensor dfull)
{
    return ptdp_tp_gather_from_region_forward(dev, tp, dlocal, dfull);
}

/* ------------------------------------------- vocab-parallel cross-entropy */

int ptdp_tp_xent_forward(ptdp_comm *tp, ptdp_tensor logits_local, int col0,
                         const int64_t *labels, double *rowmax, double *sumexp, double *picked,
                         double *loss_sum)
{
    int rows = logits_local.rows, rc;
    bool many = ptdp_comm_size(tp) > 1;
    ptdp_row_max(rowmax, logits_local);
    if (many && (rc = ptdp_all_reduce(tp, rowmax, rowmax, (size_t)rows, PTDP_F64, PTDP_MAX)) != 0)
        return rc;
    ptdp_row_sum_exp(sumexp, logits_local, rowmax);
    if (many && (rc = ptdp_all_reduce(tp, sumexp, sumexp, (size_t)rows, PTDP_F64, PTDP_SUM)) != 0)
        return rc;
    ptdp_pick_label(picked, logits_local, labels, col0);
    if (many && (rc = ptdp_all_reduce(tp, picked, picked, (size_t)rows, PTDP_F64, PTDP_SUM)) != 0)
        return rc;
    double total = ptdp_xent_from_partials(rows, rowmax, sumexp, picked);
    *loss_sum = total;
    return PTDP_OK;
}

void ptdp_tp_xent_backward(ptdp_tensor dlogits_local, ptdp_tensor logits_local, int col0,
                           const int64_t *labels, const double *rowmax, const double *sumexp,
                           double scale)
{
    ptdp_xent_backward_shard(dlogits_local, logits_local, labels, col0, rowmax, sumexp, scale);
}

/* ---------------------------------------------- vocab-parallel embedding */

int ptdp_tp_embedding_forward(ptdp_comm *tp, ptdp_tensor x, ptdp_tensor table_local, int64_t row0,
                              const int64_t *ids)
{
    ptdp_embedding_forward(x, table_local, row0, ids);   /* zeros for other ranks' rows */
    return ptdp_tp_reduce_from_region_forward(tp, x);     /* g: exactly one rank adds each row */
}

void ptdp_tp_embedding_backward(ptdp_tensor dtable_local, int64_t row0, const int64_t *ids, ptdp_tensor dx)
{
    /* g backward: identity; each rank's rows take their tokens' gradients. */
    ptdp_embedding_backward(dtable_local, row0, ids, dx);
}

/* -------------------------------------------------------------- dropout */

void ptdp_tp_dropout(ptdp_tensor t, double p, uint64_t key, int64_t sample0,
                        int full_cols, int col0)
{
    if (p <= 0)
        return;
    ptdp_real keep_scale = (ptdp_real)(1.0 / (1.0 - p));
    for (int i = 0; i < t.rows; i++) {
        uint64_t base = (uint64_t)(sample0 + i) * (uint64_t)full_cols + (uint64_t)col0;
        ptdp_real *row = ptdp_at(t, i, 0);
        for (int j = 0; j < t.cols; j++)
            row[j] = ptdp_rng_uniform(key, base + (uint64_t)j) < p ? 0 : row[j] * keep_scale;
    }
}
