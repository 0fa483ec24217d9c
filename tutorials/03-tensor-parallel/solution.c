/*
 * solution.c — lesson 03, the answer: column- and row-parallel linear
 * layers, joined by the conjugate operators f and g.
 *
 * (exercise.c is this file with the blanks still empty.  Try it first.)
 *
 * The MLP block y = GELU(x A^T + a) B^T + b on tp devices (Megatron-LM):
 *
 *          ┌─ rank 0: x A_0^T + a_0 ─ GELU ─ · B_0^T ─┐
 *   x ──f──┤                                           ├──g──► + b ──► y
 *          └─ rank 1: x A_1^T + a_1 ─ GELU ─ · B_1^T ─┘
 *            column-parallel          row-parallel
 *            A split by rows          B split by columns
 *            (each rank: ffn/tp      (each rank: ffn/tp
 *             of the outputs)          of the inputs)
 *
 *   operator   forward       backward
 *   f          identity      all-reduce (sum) of dx
 *   g          all-reduce    identity
 *
 * GELU works element by element, so it runs on each rank's slice with no
 * communication: that is why A is split by outputs and B by inputs.  The
 * whole block costs ONE all-reduce of batch x h forward (g) and ONE backward (f)
 * (B is fc2's weight; the batch is the number of samples in x).
 */
#include "lesson.h"

#include "ptdp/error.h"
#include "ptdp/ops.h"
#include "ptdp/comm.h"

/* Sum a contiguous tensor over the TP group, in place. */
static int all_reduce(ptdp_comm *tp, ptdp_tensor t)
{
    return ptdp_all_reduce(tp, t.data, t.data, ptdp_tensor_numel(t), PTDP_REAL, PTDP_SUM);
}

/* --------------------------------------------------------- the shards */

int lesson_column_shard(ptdp_comm *tp, ptdp_tensor w, ptdp_tensor b,
                        ptdp_tensor *w_local, ptdp_tensor *b_local)
{
    int r = ptdp_comm_rank(tp), n = w.rows / ptdp_comm_size(tp);   /* my outputs: [r n, (r+1) n) */
    /* Blank 1: my rows of w and my columns of b, as views
     * (ptdp_tensor_rows, ptdp_tensor_cols in tensor.h). */
    *w_local = ptdp_tensor_rows(w, r * n, n);
    *b_local = ptdp_tensor_cols(b, r * n, n);
    return PTDP_OK;
}

int lesson_row_shard(ptdp_comm *tp, ptdp_tensor w, ptdp_tensor *w_local)
{
    int r = ptdp_comm_rank(tp), k = w.cols / ptdp_comm_size(tp);   /* my inputs: [r k, (r+1) k) */
    /* Blank 2: my columns of w, as a view. */
    *w_local = ptdp_tensor_cols(w, r * k, k);
    return PTDP_OK;
}

/* ------------------------------------------------- column-parallel linear */

int lesson_column_forward(ptdp_comm *tp, ptdp_tensor y_local, ptdp_tensor x,
                          ptdp_tensor w_local, ptdp_tensor b_local)
{
    (void)tp;   /* f forward is the identity: x is already whole on every rank */
    /* My outputs need only my rows of w and my part of b: a dense layer on a slice. */
    ptdp_linear_forward(y_local, x, w_local, &b_local);
    return PTDP_OK;
}

int lesson_column_backward(ptdp_comm *tp, ptdp_tensor dx, ptdp_tensor dw_local, ptdp_tensor db_local,
                           ptdp_tensor dy_local, ptdp_tensor x, ptdp_tensor w_local)
{
    /* Blank 3: x fed every rank's outputs, so dL/dx = sum over ranks of
     * dy_r W_r.  The weight and bias gradients need only my slice. */
    ptdp_linear_backward(&dx, dw_local, &db_local, dy_local, x, w_local, false);
    return all_reduce(tp, dx);          /* f backward */
}

/* ---------------------------------------------------- row-parallel linear */

int lesson_row_forward(ptdp_comm *tp, ptdp_tensor y, ptdp_tensor x_local,
                       ptdp_tensor w_local, ptdp_tensor b)
{
    /* Blank 4: x W^T = sum over ranks of x_r W_r^T — each rank holds one
     * term.  And the bias: how many times must it be added? */
    ptdp_linear_forward(y, x_local, w_local, NULL);   /* my term, no bias */
    int rc = all_reduce(tp, y);                       /* g forward        */
    if (rc == 0)
        ptdp_add_bias(y, b);   /* once, after the sum: on every rank before it would count tp times */
    return rc;
}

int lesson_row_backward(ptdp_comm *tp, ptdp_tensor dx_local, ptdp_tensor dw_local, ptdp_tensor db,
                        ptdp_tensor dy, ptdp_tensor x_local, ptdp_tensor w_local)
{
    /* Blank 5: dy is whole on every rank (g backward is the identity).
     * What does each rank need for its input columns, its weight columns
     * and the bias — and does any of it need another rank? */
    (void)tp;   /* no: dx_r = dy W_r, dW_r = dy^T x_r, db = colsum dy are all local */
    ptdp_linear_backward(&dx_local, dw_local, &db, dy, x_local, w_local, false);
    return PTDP_OK;
}
