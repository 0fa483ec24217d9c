/*
 * lesson.h — lesson 03: the functions you write in exercise.c, which the
 * check calls.
 *
 * Shapes follow nn.Linear: a weight is [out, in], y = x W^T + b.  "Local"
 * tensors are this TP rank's part; the others are whole, the same on every
 * rank.  Every tensor the check passes is contiguous.
 */
#ifndef LESSON_03_H
#define LESSON_03_H

#include "ptdp/comm.h"
#include "ptdp/tensor.h"

/* Column-parallel split of w [out, in] and b [1, out]: rank r of tp owns
 * the outputs [r out/tp, (r+1) out/tp): those rows of w, those columns of b.
 * *w_local and *b_local are views into w and b. */
int lesson_column_shard(ptdp_comm *tp, ptdp_tensor w, ptdp_tensor b,
                        ptdp_tensor *w_local, ptdp_tensor *b_local);
/* Row-parallel split of w [out, in]: rank r owns the inputs
 * [r in/tp, (r+1) in/tp), those columns of w.  The bias is not split. */
int lesson_row_shard(ptdp_comm *tp, ptdp_tensor w, ptdp_tensor *w_local);

/* Column-parallel forward: y_local = x w_local^T + b_local (x whole). */
int lesson_column_forward(ptdp_comm *tp, ptdp_tensor y_local, ptdp_tensor x,
                          ptdp_tensor w_local, ptdp_tensor b_local);
/* …backward: dw_local += dy_local^T x, db_local += column sums of dy_local,
 * dx = the WHOLE gradient of x (overwritten), the same on every rank. */
int lesson_column_backward(ptdp_comm *tp, ptdp_tensor dx, ptdp_tensor dw_local, ptdp_tensor db_local,
                           ptdp_tensor dy_local, ptdp_tensor x, ptdp_tensor w_local);

/* Row-parallel forward: y = x w^T + b, whole, on every rank (overwritten),
 * from this rank's input columns x_local and weight columns w_local. */
int lesson_row_forward(ptdp_comm *tp, ptdp_tensor y, ptdp_tensor x_local,
                       ptdp_tensor w_local, ptdp_tensor b);
/* …backward, dy whole: dx_local = this rank's columns of dx (overwritten),
 * dw_local += dy^T x_local, db += column sums of dy. */
int lesson_row_backward(ptdp_comm *tp, ptdp_tensor dx_local, ptdp_tensor dw_local, ptdp_tensor db,
                        ptdp_tensor dy, ptdp_tensor x_local, ptdp_tensor w_local);

#endif
