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

/* The same windows of any text of tokens (gpt_data.c), for every model
 * that reads its data as the GPT does: T positions, a start on a multiple
 * of `line` (0: anywhere). */
void ptdp_gpt_text_windows(const unsigned char *text, size_t len, int T, int line, uint64_t seed, ptdp_batch *b);

/* A device's copy of the data (gpt_data.c): the run's text, read-only and
 * charged to the arena uninitialised, or (corpus NULL) the plain built-in
 * sums made from the seed into the arena; every token checked below
 * `vocab`, T + 1 of them at least.  0, or the device failed. */
typedef struct {
    const unsigned char *text;
    size_t len;
    void *block;               /* the arena's block (ptdp_free it)          */
} ptdp_gpt_text;
int ptdp_gpt_text_load(ptdp_device *dev, uint64_t seed, const unsigned char *corpus, size_t corpus_len, int T,
                       int vocab, ptdp_gpt_text *out);

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
/* After each optimizer step: --moe-bias-update's step of the stage's
 * expert biases (gpt_moe_stats.c, moe_bias.c). */
int  ptdp_gpt_moe_after_step(ptdp_device *dev, ptdp_model *m);

/* The backward with its weight-gradient products recorded in w (wgrad.h),
 * or run at once if w is NULL (= ptdp_gpt_backward): the table's
 * backward_input. */
int  ptdp_gpt_backward_input(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                             double loss_scale, ptdp_tensor *dx, ptdp_wgrad *w);

#endif
