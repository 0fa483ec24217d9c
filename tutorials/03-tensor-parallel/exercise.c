/*
 * exercise.c — lesson 03: column- and row-parallel linear layers, joined
 * by the conjugate operators f and g.
 *
 * Replace each PTDP_BLANK(...) line with your code, then run the check:
 *     meson setup build-student -Dexercises=student      (once)
 *     meson test -C build-student --suite tutorial-03 -v
 * README.md explains the idea; solution.c is the answer (try first).
 * lesson_column_forward is done for you: read it first.
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
#include "blank.h"
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
    PTDP_BLANK(1, "set *w_local and *b_local: my rows of w, my columns of b");
}

int lesson_row_shard(ptdp_comm *tp, ptdp_tensor w, ptdp_tensor *w_local)
{
    int r = ptdp_comm_rank(tp), k = w.cols / ptdp_comm_size(tp);   /* my inputs: [r k, (r+1) k) */
    /* Blank 2: my columns of w, as a view. */
    PTDP_BLANK(2, "set *w_local: my columns of w");
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
    PTDP_BLANK(3, "the column-parallel backward: the local gradients, then f's backward");
}

/* ---------------------------------------------------- row-parallel linear */

int lesson_row_forward(ptdp_comm *tp, ptdp_tensor y, ptdp_tensor x_local,
                       ptdp_tensor w_local, ptdp_tensor b)
{
    /* Blank 4: x W^T = sum over ranks of x_r W_r^T — each rank holds one
     * term.  And the bias: how many times must it be added? */
    PTDP_BLANK(4, "the row-parallel forward: my term, g's forward, the bias");
}

int lesson_row_backward(ptdp_comm *tp, ptdp_tensor dx_local, ptdp_tensor dw_local, ptdp_tensor db,
                        ptdp_tensor dy, ptdp_tensor x_local, ptdp_tensor w_local)
{
    /* Blank 5: dy is whole on every rank (g backward is the identity).
     * What does each rank need for its input columns, its weight columns
     * and the bias — and does any of it need another rank? */
    PTDP_BLANK(5, "the row-parallel backward");
}
