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
/* publish and count (gpt_moe_stats.c): the MoE blocks' counters
 * (gpt_moe_stats.h) — named for a configuration with MoE blocks; the
 * micro-batch's balance loss, loads and drops of the stage's blocks added
 * into the device's counters of the step. */
int  ptdp_gpt_moe_publish(const ptdp_model_config *c, ptdp_counters *reg);
void ptdp_gpt_moe_count(const ptdp_model *m, const ptdp_acts *acts, ptdp_counts *counts);

/* The backward with its weight-gradient products recorded in w (wgrad.h),
 * or run at once if w is NULL (= ptdp_gpt_backward): the table's
 * backward_input. */
int  ptdp_gpt_backward_input(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                             double loss_scale, ptdp_tensor *dx, ptdp_wgrad *w);

#endif
