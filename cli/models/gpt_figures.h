/*
 * gpt_figures.h — the GPT's own figures, drawn by `ptdp figures` through the
 * GPT's CLI table (gpt_cli.c: ptdp_model_cli.figures and figure_model).
 *
 *     attention_tp.svg   tp = 2 cuts the heads and the vocabulary  (gpt_figure_attention.c)
 *     sp_block.svg       SP's split of one block along T           (gpt_figure_sp.c)
 *     moe_dispatch.svg   one micro-batch's tokens to their experts  (gpt_figure_moe.c)
 *     attention_tiles.svg  the whole matrix against its tiles       (gpt_figure_tiles.c)
 */
#ifndef PTDP_CLI_GPT_FIGURES_H
#define PTDP_CLI_GPT_FIGURES_H

#include <stddef.h>

/* Draw the figure into `path`: 0, or a PTDP_E… code with the reason in msg. */
int fig_attention_tp(const char *path, char *msg, size_t msglen);
int fig_sp_block(const char *path, char *msg, size_t msglen);
int fig_moe_dispatch(const char *path, char *msg, size_t msglen);
int fig_attention_tiles(const char *path, char *msg, size_t msglen);

#endif
