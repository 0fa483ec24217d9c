/*
 * figures.h — the figures `ptdp figures` draws, and what they share.
 *
 * Each figure is one function that computes what it shows with ptdp itself
 * (a real collective, a real model's parameters, the schedule simulator,
 * real training runs) and writes one SVG file with the writer of svg.h.
 * Adding a figure = one function + one line in the table of figures.c; a
 * figure of one model's insides is the model's own (cli/models/), listed
 * through its CLI table (ptdp_model_cli.figures, model_flags.h).
 */
#ifndef PTDP_CLI_FIGURES_H
#define PTDP_CLI_FIGURES_H

#include <stddef.h>

#include "ptdp/model.h"
#include "ptdp/svg.h"
#include "ptdp/train.h"

/* Draw the figure into `path`: 0, or a PTDP_E… code with the reason in msg. */
typedef int (*fig_draw_fn)(const char *path, char *msg, size_t msglen);

int fig_ring_allreduce(const char *path, char *msg, size_t msglen);      /* figure_ring.c     */
int fig_tp_splits(const char *path, char *msg, size_t msglen);           /* figure_tp.c       */
int fig_pipeline_schedules(const char *path, char *msg, size_t msglen);  /* figure_pipeline.c */
int fig_filling_the_bubble(const char *path, char *msg, size_t msglen);  /* figure_pipeline.c */
int fig_dualpipev(const char *path, char *msg, size_t msglen);           /* figure_pipeline.c */
int fig_dualpipe(const char *path, char *msg, size_t msglen);            /* figure_pipeline.c */
int fig_memory_per_device(const char *path, char *msg, size_t msglen);   /* figure_training.c */
int fig_loss_curves(const char *path, char *msg, size_t msglen);         /* figure_training.c */
int fig_dp_allreduce(const char *path, char *msg, size_t msglen);        /* figure_dp.c       */
int fig_mesh_groups(const char *path, char *msg, size_t msglen);         /* figure_mesh.c     */
int fig_expert_groups(const char *path, char *msg, size_t msglen);       /* figure_expert_groups.c */
int fig_moe_fold(const char *path, char *msg, size_t msglen);            /* figure_moe_fold.c */
int fig_hsdp(const char *path, char *msg, size_t msglen);                /* figure_hsdp.c */
int fig_zero_ownership(const char *path, char *msg, size_t msglen);      /* figure_zero.c     */
int fig_zero_memory(const char *path, char *msg, size_t msglen);         /* figure_zero_memory.c */
int fig_zero_overlap(const char *path, char *msg, size_t msglen);        /* figure_zero_overlap.c */
int fig_ring_attention(const char *path, char *msg, size_t msglen);      /* figure_ring_attention.c */
int fig_ulysses(const char *path, char *msg, size_t msglen);             /* figure_ulysses.c  */
int fig_plan_layouts(const char *path, char *msg, size_t msglen);        /* figure_plan.c     */
int fig_fp8_loss_curves(const char *path, char *msg, size_t msglen);     /* figure_fp8.c      */

/* The first registered model that offers a figure model (its CLI table's
 * figure_model: the default transformer of `ptdp train`, on its built-in
 * data); *data is malloc'd, free it after the runs; *noun names it in the
 * figure's text ("GPT").  0, PTDP_ENOMEM, or PTDP_EINVAL if no model offers
 * one (figures.c). */
int fig_default_model(ptdp_model_config *cfg, unsigned char **data, const char **noun, char *msg, size_t msglen);

/* One colour per rank (0..7, then repeating): the same device has the same
 * colour in every figure. */
const char *fig_rank_color(int rank);


/* Run fn on `world` real devices (a 30 s watchdog) for a figure that asks
 * them something; on failure msg says "building WHAT failed: why".  0 or
 * the launch's error. */
int fig_ask_devices(int world, ptdp_device_fn fn, void *arg, const char *what, char *msg, size_t msglen);

/* Close the picture and save it; frees s either way.  0 or PTDP_E…. */
int fig_finish(ptdp_svg *s, const char *path, char *msg, size_t msglen);

#endif
