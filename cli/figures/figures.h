/*
 * figures.h — the figures `ptdp figures` draws, and what they share.
 *
 * Each figure is one function that computes what it shows with ptdp itself
 * (a real collective, a real model's parameters, the schedule simulator,
 * real training runs) and writes one SVG file with the writer of svg.h.
 * Adding a figure = one function + one line in the table of figures.c.
 */
#ifndef PTDP_CLI_FIGURES_H
#define PTDP_CLI_FIGURES_H

#include <stddef.h>

#include "ptdp/svg.h"
#include "ptdp/train.h"

/* Draw the figure into `path`: 0, or a PTDP_E… code with the reason in msg. */
typedef int (*fig_draw_fn)(const char *path, char *msg, size_t msglen);

int fig_ring_allreduce(const char *path, char *msg, size_t msglen);      /* figure_ring.c     */
int fig_tp_splits(const char *path, char *msg, size_t msglen);           /* figure_tp.c       */
int fig_pipeline_schedules(const char *path, char *msg, size_t msglen);  /* figure_pipeline.c */
int fig_filling_the_bubble(const char *path, char *msg, size_t msglen);  /* figure_pipeline.c */
int fig_memory_per_device(const char *path, char *msg, size_t msglen);   /* figure_training.c */
int fig_loss_curves(const char *path, char *msg, size_t msglen);         /* figure_training.c */
int fig_dp_allreduce(const char *path, char *msg, size_t msglen);        /* figure_dp.c       */
int fig_mesh_groups(const char *path, char *msg, size_t msglen);         /* figure_mesh.c     */
int fig_zero_ownership(const char *path, char *msg, size_t msglen);      /* figure_zero.c     */
int fig_zero_memory(const char *path, char *msg, size_t msglen);         /* figure_zero_memory.c */
int fig_zero_overlap(const char *path, char *msg, size_t msglen);        /* figure_zero_overlap.c */
int fig_attention_tp(const char *path, char *msg, size_t msglen);        /* figure_attention.c */
int fig_sp_block(const char *path, char *msg, size_t msglen);            /* figure_sp.c       */
int fig_ring_attention(const char *path, char *msg, size_t msglen);      /* figure_ring_attention.c */
int fig_plan_layouts(const char *path, char *msg, size_t msglen);        /* figure_plan.c     */

/* The default GPT of `ptdp train --model gpt`, on the built-in corpus (its
 * vocabulary from the corpus's tokens, padded for tp = 1); *corpus is
 * malloc'd, free it after the runs.  0 or PTDP_ENOMEM (figure_zero_memory.c). */
int fig_default_gpt(ptdp_model_config *cfg, unsigned char **corpus, char *msg, size_t msglen);

/* One colour per rank (0..7, then repeating): the same device has the same
 * colour in every figure. */
const char *fig_rank_color(int rank);


/* Close the picture and save it; frees s either way.  0 or PTDP_E…. */
int fig_finish(ptdp_svg *s, const char *path, char *msg, size_t msglen);

#endif
