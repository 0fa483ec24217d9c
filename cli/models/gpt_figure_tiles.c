/*
 * gpt_figure_tiles.c — attention_tiles.svg: causal attention as the whole
 * T x T matrix and in tiles (--attention tiled, attention_tiled.c), the
 * scores each computes and what each keeps for the backward.
 *
 * Left, T = 256 in tiles of 64: the whole matrix computes all T^2 scores
 * and masks the future; the tiles meet, for query tile i, key tiles 0..i —
 * the counts from ptdp_attention_tiled_scores, tile row by tile row:
 *
 *     whole                     tiles
 *     ████ ░░░░ ░░░░ ░░░░       ▙
 *     ████ ████ ░░░░ ░░░░       █ ▙
 *     ████ ████ ████ ░░░░       █ █ ▙
 *     ████ ████ ████ ████       █ █ █ ▙         (░ computed, then masked)
 *
 * Right, two real runs of the same GPT (2 layers, C 64, 4 heads, T 256,
 * batch 4, one device, ptdp_train): their activations' peak in the arena
 * beside each formula — the probabilities B nh T^2 a block against a
 * log-sum-exp a query, B nh T — and their losses, equal to rounding.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../figures/figures.h"
#include "../model_flags.h"
#include "gpt_figures.h"
#include "ptdp/arena.h"
#include "ptdp/error.h"
#include "ptdp/gpt.h"
#include "ptdp/launch.h"
#include "ptdp/ops.h"
#include "ptdp/train.h"

enum { T = 256, LAYERS = 2, HIDDEN = 64, HEADS = 4, BATCH = 4, STEPS = 2, MAX_TILES = 16 };

typedef struct {
    int tile;                        /* the kernel's tile, from its scratch (two tiles) */
    int ntiles;                      /* T / tile, rounded up                            */
    int row_tiles[MAX_TILES];        /* key tiles query tile i meets                   */
    double scores_tiled, scores_whole, scores_needed;
    double acts[2];                  /* the arena's activations peak: whole, tiles      */
    double kept[2];                  /* a block's kept bytes by each formula            */
    double loss[2];                  /* step STEPS's loss                               */
} tiles_view;

/* ---- the kernel's counts ------------------------------------------------------ */

static int count_tiles(tiles_view *v, char *msg, size_t msglen)
{
    v->tile = (int)lround(sqrt((double)ptdp_attention_tiled_scratch() / 2));
    v->ntiles = (T + v->tile - 1) / v->tile;
    if (v->tile < 1 || v->ntiles > MAX_TILES) {
        snprintf(msg, msglen, "tiles of %d: %d a row, more than the figure draws", v->tile, v->ntiles);
        return PTDP_ECHECK;
    }
    for (int i = 0; i < v->ntiles; i++) {
        const int q0 = i * v->tile, q1 = q0 + v->tile < T ? q0 + v->tile : T;
        v->row_tiles[i] = (int)lround(ptdp_attention_tiled_scores(q0, q1) / ((double)(q1 - q0) * v->tile));
        if (v->row_tiles[i] != i + 1) {
            snprintf(msg, msglen, "query tile %d meets %d key tiles; causal tiles meet %d", i, v->row_tiles[i], i + 1);
            return PTDP_ECHECK;
        }
    }
    v->scores_tiled = ptdp_attention_tiled_scores(0, T);
    v->scores_whole = (double)T * T;
    v->scores_needed = (double)T * (T + 1) / 2;
    return PTDP_OK;
}

/* ---- two real runs -------------------------------------------------------------- */

static int run(ptdp_model_config *cfg, bool tiled, tiles_view *v, char *msg, size_t msglen)
{
    ptdp_train_config c = ptdp_train_defaults();
    c.model = *cfg;
    c.batch = BATCH;
    c.steps = STEPS;
    c.attention_tiled = tiled;
    ptdp_launch_result lr = { 0 };
    ptdp_launch_opts o = { .watchdog_s = 60, .result = &lr };
    ptdp_train_result tr;
    char why[PTDP_MSG_MAX];
    int rc = ptdp_train(&c, &o, NULL, NULL, &tr, why, sizeof why);
    if (rc != 0) {
        snprintf(msg, msglen, "training the GPT %s failed: %s %s", tiled ? "in tiles" : "whole", why, lr.message);
        ptdp_launch_result_free(&lr);
        return rc;
    }
    v->acts[tiled] = (double)lr.devices[0].mem.peak[PTDP_MEM_ACTS];
    v->loss[tiled] = tr.log[STEPS - 1].loss;
    v->kept[tiled] = tiled ? ptdp_gpt_block_act_bytes_tiled(cfg, BATCH, 1, 1, false, false)
                           : ptdp_gpt_block_act_bytes(cfg, BATCH, 1, 1, false, false, false);
    ptdp_train_result_free(&tr);
    ptdp_launch_result_free(&lr);
    return PTDP_OK;
}

/* The runs keep fewer bytes in tiles by at least the probabilities less
 * the log-sum-exps of every block, and lose the same to rounding. */
static int check_runs(const tiles_view *v, char *msg, size_t msglen)
{
    const double saved = LAYERS * (v->kept[0] - v->kept[1]);
    if (v->acts[0] - v->acts[1] < saved || fabs(v->loss[0] - v->loss[1]) > 1e-3 * fabs(v->loss[0])) {
        snprintf(msg, msglen, "in tiles the activations peak at %.0f B against %.0f B (the formulas save %.0f), "
                 "the loss %.6f against %.6f", v->acts[1], v->acts[0], saved, v->loss[1], v->loss[0]);
        return PTDP_ECHECK;
    }
    return PTDP_OK;
}

/* ---- drawing ------------------------------------------------------------------ */

enum { CELL = 44, GRID_Y = 130, WHOLE_X = 40, TILES_X = 290, BAR_X = 560, BAR_W = 380 };

static void draw_grid(ptdp_svg *s, const tiles_view *v, double x0, bool tiled)
{
    for (int i = 0; i < v->ntiles; i++)
        for (int j = 0; j < v->ntiles; j++) {
            const double x = x0 + j * CELL, y = GRID_Y + i * CELL;
            if (tiled && j >= v->row_tiles[i]) {   /* never computed */
                ptdp_svg_rect(s, x, y, CELL - 2, CELL - 2, "#ffffff", "#cccccc");
                continue;
            }
            const bool future = j > i, diagonal = j == i;
            ptdp_svg_rect(s, x, y, CELL - 2, CELL - 2, future ? "#e5e5e5" : "#6baed6", "#555555");
            if (diagonal) {   /* causal inside: the upper half computed, then masked */
                const double xs[] = { x, x + CELL - 2, x + CELL - 2 }, ys[] = { y, y, y + CELL - 2 };
                ptdp_svg_polygon(s, xs, ys, 3, "#e5e5e5");
            }
        }
    ptdp_svg_text(s, x0, GRID_Y - 10, 12, PTDP_SVG_START | PTDP_SVG_BOLD, NULL, "%s",
                  tiled ? "--attention tiled" : "--attention full (the whole matrix)");
    const double n = tiled ? v->scores_tiled : v->scores_whole;
    ptdp_svg_text(s, x0, GRID_Y + v->ntiles * CELL + 20, 12, PTDP_SVG_START, "#333333", "%.0f scores a head (%.2f T\u00b2)",
                  n, n / v->scores_whole);
}

static void draw_bars(ptdp_svg *s, const tiles_view *v)
{
    const double top = v->acts[0] > 0 ? v->acts[0] : 1;
    static const char *const name[2] = { "whole matrix", "tiles" };
    ptdp_svg_text(s, BAR_X, GRID_Y - 10, 12, PTDP_SVG_START | PTDP_SVG_BOLD, NULL,
                  "activations' peak of a real run (the arena), one device");
    for (int k = 0; k < 2; k++) {
        const double y = GRID_Y + 10 + k * 80, w = BAR_W * v->acts[k] / top;
        ptdp_svg_rect(s, BAR_X, y, w, 30, k ? "#31a354" : "#6baed6", "#555555");
        ptdp_svg_text(s, BAR_X + 6, y + 20, 12, PTDP_SVG_START | PTDP_SVG_BOLD, NULL, "%s: %.2f MB", name[k],
                      v->acts[k] / 1e6);
        ptdp_svg_text(s, BAR_X, y + 48, 11, PTDP_SVG_START, "#333333", "a block keeps %.0f B (%s), step-%d loss %.6f",
                      v->kept[k], k ? "B nh T log-sum-exps" : "B nh T\u00b2 probabilities", STEPS, v->loss[k]);
    }
}

int fig_attention_tiles(const char *path, char *msg, size_t msglen)
{
    static tiles_view v;
    memset(&v, 0, sizeof v);
    int err = count_tiles(&v, msg, msglen);
    ptdp_model_config cfg;
    unsigned char *corpus = NULL;   /* the default GPT on the built-in corpus (gpt_cli.c) */
    if (err == 0)
        err = ptdp_model_cli_for(&ptdp_gpt_ops)->figure_model(&cfg, &corpus, msg, msglen);
    if (err != 0) {
        free(corpus);
        return err;
    }
    cfg.layers = LAYERS;
    cfg.hidden = HIDDEN;
    cfg.ffn = 4 * HIDDEN;
    ptdp_gpt(&cfg)->heads = HEADS;
    ptdp_gpt(&cfg)->seq_len = T;
    for (int tiled = 0; err == 0 && tiled < 2; tiled++)
        err = run(&cfg, tiled, &v, msg, msglen);
    free(corpus);
    if (err == 0)
        err = check_runs(&v, msg, msglen);
    if (err != 0)
        return err;

    ptdp_svg s;
    ptdp_svg_begin(&s, 980, 350);
    ptdp_svg_text(&s, 20, 26, 17, PTDP_SVG_BOLD, NULL,
                  "Causal attention in tiles: T = %d, tiles of %d \u2014 the masked future never computed, no T \u00d7 T kept",
                  T, v.tile);
    ptdp_svg_text(&s, 20, 48, 12, PTDP_SVG_START, "#333333",
                  "Blue: scores needed (s \u2264 t); grey: computed, then masked; white: skipped. Query tile i meets key "
                  "tiles 0..i (ptdp_attention_tiled_scores); %.0f of the %.0f scores are needed.",
                  v.scores_needed, v.scores_whole);
    ptdp_svg_text(&s, 20, 66, 12, PTDP_SVG_START, "#333333",
                  "Forward: an online softmax keeps a running max and sum a query, then lse = m + log l; backward: "
                  "P = e^(S \u2212 lse) again, tile by tile.");
    ptdp_svg_text(&s, 20, 84, 12, PTDP_SVG_START, "#333333",
                  "The GPT: %d layers, C %d, %d heads, batch %d, trained %d steps by ptdp_train each way.", LAYERS,
                  HIDDEN, HEADS, BATCH, STEPS);
    draw_grid(&s, &v, WHOLE_X, false);
    draw_grid(&s, &v, TILES_X, true);
    draw_bars(&s, &v);
    return fig_finish(&s, path, msg, msglen);
}
