/*
 * mlp_table.h — the MLP's entries of the model table (private to src/).
 *
 * mlp_model.c fills struct ptdp_model_ops with these; the parallel layer
 * and the trainer call them through the table (model.h), never by name.
 *
 *   ptdp_model_ops { forward = ptdp_mlp_forward, backward = ptdp_mlp_backward, … }
 */

#ifndef PTDP_MODELS_MLP_TABLE_H
#define PTDP_MODELS_MLP_TABLE_H

#include "ptdp/mlp.h"

/* The table's forward, backward and acts_free (mlp.c); model.h says what
 * each does.  Code outside the MLP calls them through the interface. */
int  ptdp_mlp_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_batch *b,
                      ptdp_tensor input, long step, bool recompute, ptdp_tensor *out);
int  ptdp_mlp_backward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                       double loss_scale, ptdp_tensor *dx);
void ptdp_mlp_acts_free(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts);

/* The backward with its weight-gradient products recorded in w (wgrad.h),
 * or run at once if w is NULL (= ptdp_mlp_backward): the table's
 * backward_input. */
int  ptdp_mlp_backward_input(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                             double loss_scale, ptdp_tensor *dx, ptdp_wgrad *w);

#endif
