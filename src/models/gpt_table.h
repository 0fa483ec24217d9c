/*
 * gpt_table.h — the GPT's entries of the model table (private to src/).
 *
 * gpt_model.c fills struct ptdp_model_ops with these; the parallel layer
 * and the trainer call them through the table (model.h), never by name.
 *
 *   ptdp_model_ops { forward = ptdp_gpt_forward, backward = ptdp_gpt_backward, … }
 */

#ifndef PTDP_MODELS_GPT_TABLE_H
#define PTDP_MODELS_GPT_TABLE_H

#include "ptdp/gpt.h"
#include "ptdp/gpt_moe_stats.h"

/* The table's fill_batch (gpt_data.c): sample i is the window of T + 1
 * tokens at bits(seed, "data.start", i) mod (N - T) of the text, rounded
 * down to a multiple of `line` (the built-in sums: PTDP_GPT_SUM_LINE). */
void ptdp_gpt_fill_batch(ptdp_model *m, ptdp_batch *b);

/* The table's forward, backward and acts_free (gpt.c). */
int  ptdp_gpt_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_batch *b,
                      ptdp_tensor input, long step, bool recompute, ptdp_tensor *out);
int  ptdp_gpt_backward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                       double loss_scale, ptdp_tensor *dx);
void ptdp_gpt_acts_free(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts);
/* aux_loss (gpt.c): the balance loss of the stage's MoE blocks, if it has any. */
bool ptdp_gpt_aux_loss(const ptdp_model *m, const ptdp_acts *acts, double *sum);
/* stats_add (gpt_moe_stats.c): the micro-batch's loads, drops and balance
 * losses of the stage's MoE blocks into their rows of sum
 * (gpt_moe_stats.h; stats_len is ptdp_gpt_moe_stats_len). */
void ptdp_gpt_moe_stats_add(const ptdp_model *m, const ptdp_acts *acts, double *sum);

/* The backward with its weight-gradient products recorded in w (wgrad.h),
 * or run at once if w is NULL (= ptdp_gpt_backward): the table's
 * backward_input. */
int  ptdp_gpt_backward_input(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                             double loss_scale, ptdp_tensor *dx, ptdp_wgrad *w);

#endif
