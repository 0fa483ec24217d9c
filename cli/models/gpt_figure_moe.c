/*
 * gpt_figure_moe.c — moe_dispatch.svg: which tokens go to which expert, and
 * which of them travel to another EP rank, in one micro-batch of a GPT
 * with experts (gpt_moe.c).
 *
 * One device builds the default GPT with --moe-experts 4 (top-2, dropless)
 * and --seq-len 16, and runs one forward of a micro-batch of two sequences
 * of the built-in sums.  From block 0's kept LN2 output and its router
 * W_r the figure computes the logits z = LN2(x) W_r^T and routes them with
 * ptdp_moe_route — the model's own function — and checks that the loads it
 * finds equal what the model's router counted in that forward (the
 * counters it publishes, gpt_moe_stats.h).  Then it lays the routing
 * out as dp 2, ep 2 would run it:
 *
 *   sequence 0 (DP rank 0)   t0 t1 t2 …          each token: two lines, to
 *                             │╲ ╲                its top-2 experts, as wide
 *   EP rank 0: [expert 0] [expert 1] │ EP rank 1: [expert 2] [expert 3]
 *                             ╱ ╱│                as its gate; dashed when
 *   sequence 1 (DP rank 1)   t0 t1 t2 …          the expert lives on the other
 *                                                EP rank (the all-to-all)
 *
 * and counts what the dispatch all-to-all sends: the choices of a rank's
 * tokens whose expert another rank holds, a row of C reals each (the
 * combine sends as many back), beside the uniform estimate k T (N-1)/N.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../figures/figures.h"
#include "gpt_figures.h"
#include "ptdp/arena.h"
#include "ptdp/counters.h"
#include "ptdp/error.h"
#include "ptdp/gpt.h"
#include "ptdp/launch.h"
#include "ptdp/mesh.h"
#include "ptdp/models.h"
#include "ptdp/ops.h"

enum { T = 16, SEQS = 2, E = 4, K = 2, EP = 2, R = SEQS * T };

typedef struct {
    ptdp_model_config cfg;
    int token[R];
    int choice[R * K], slot[R * K], load[E], dropped;
    double gate[R * K], aux;
    double counted[E + 2];         /* what the model's router counted        */
} moe_routing;

/* ---- route a real micro-batch ------------------------------------------------- */

/* z = LN2(x) W_r^T of block 0, routed by ptdp_moe_route. */
static int route_block0(ptdp_device *dev, moe_routing *a, ptdp_model *m, ptdp_acts *acts)
{
    const ptdp_gpt_saved *sv = ptdp_gpt_saved_of(acts);
    const ptdp_gpt_block *w = &ptdp_gpt_of(m)->blocks[0];
    const ptdp_gpt_block_acts *b = &sv->blocks[0];
    ptdp_real z[R * E], gate[R * K], probs[R * E];
    if (w->router == NULL || b->ln2.rows != R)
        return ptdp_fail(dev, PTDP_ECHECK, "moe figure: block 0 is no MoE block of %d tokens", R);
    ptdp_linear_forward(ptdp_tensor_wrap(z, R, E), b->ln2, w->router->w, NULL);
    const ptdp_moe_route_shape s = { .T = T, .E = E, .k = K, .capacity = 0,
                                     .alpha = ptdp_gpt(&a->cfg)->moe_aux_loss };
    a->aux = ptdp_moe_route(&s, R, z, a->choice, gate, a->slot, probs, a->load, &a->dropped);
    for (int c = 0; c < R * K; c++)
        a->gate[c] = gate[c];
    for (int r = 0; r < R; r++)
        a->token[r] = (int)sv->tokens[r];
    /* the model's counters of this forward (counters.h), in a channel of
     * our own: published, one device's row of a step, block 0's row read */
    ptdp_counters reg;
    ptdp_counters_init(&reg);
    if (m->ops->publish(&a->cfg, &reg) != 0)
        return ptdp_fail(dev, PTDP_EINVAL, "moe figure: the GPT's counters: %s refused", reg.refused);
    double *row = calloc((size_t)reg.len[PTDP_COUNT_STEP] + 1, sizeof *row);
    if (row == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    ptdp_counts counts = { .reg = &reg, .row = { [PTDP_COUNT_STEP] = row }, .tp_lead = true };
    m->ops->count(m, acts, &counts);
    const double *load = ptdp_counters_in(&reg, "moe_load", PTDP_COUNT_STEP, row);
    for (int e = 0; e < E; e++)
        a->counted[e] = load[e];
    a->counted[E] = ptdp_counters_in(&reg, "moe_dropped", PTDP_COUNT_STEP, row)[0];
    a->counted[E + 1] = ptdp_counters_in(&reg, "moe_aux_loss", PTDP_COUNT_STEP, row)[0];   /* a sum, not ÷ B */
    free(row);
    return PTDP_OK;
}

static int route_device(ptdp_device *dev, void *arg)
{
    moe_routing *a = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    int rc = ptdp_mesh_init(dev, 1, 1, 1, &mesh);
    if (rc != 0)
        return rc;
    if ((rc = ptdp_model_init(dev, &m, &a->cfg, &mesh, NULL, ptdp_train_defaults().seed, 0.0)) == 0) {
        ptdp_batch b = { .first = 0, .rows = SEQS };
        ptdp_acts acts;
        if ((rc = ptdp_batch_load(dev, &m, &b)) == 0 &&
            (rc = ptdp_model_forward(dev, &m, &acts, &b, (ptdp_tensor){ 0 }, 0, false, NULL)) == 0) {
            rc = route_block0(dev, a, &m, &acts);
            ptdp_acts_free(dev, &m, &acts);
        }
        ptdp_batch_free(dev, &b);
        ptdp_model_free(dev, &m);
    }
    ptdp_mesh_free(&mesh);
    return rc;
}

/* The route equals the model's own count, and every choice is kept. */
static int check_routing(const moe_routing *a, char *msg, size_t msglen)
{
    int sum = 0;
    for (int e = 0; e < E; e++) {
        sum += a->load[e];
        if (a->load[e] != a->counted[e]) {
            snprintf(msg, msglen, "expert %d: ptdp_moe_route finds %d tokens, the model's router counted %g", e,
                     a->load[e], a->counted[e]);
            return PTDP_ECHECK;
        }
    }
    if (sum != K * R || a->dropped != 0 || a->counted[E] != 0 || fabs(a->counted[E + 1] - a->aux) > 1e-9) {
        snprintf(msg, msglen, "the loads sum to %d of k B T = %d, %d dropped, balance loss %g against the model's %g",
                 sum, K * R, a->dropped, a->aux, a->counted[E + 1]);
        return PTDP_ECHECK;
    }
    return 0;
}

/* ---- drawing ------------------------------------------------------------------ */

enum { TOK_X = 180, TOK_W = 40, TOK_STEP = 48, TOK_H = 30, SEQ0_Y = 120, EXP_Y = 286, EXP_W = 150, EXP_H = 48,
       SEQ1_Y = 466 };

static double token_x(int t) { return TOK_X + t * TOK_STEP; }
static double expert_x(int e) { return TOK_X + (TOK_STEP * (T - 1) + TOK_W) * (e + 0.5) / E - EXP_W / 2.0; }

/* A token as text: the byte, or a sign for the line's end and a space. */
static const char *token_text(int tok, char *buf)
{
    if (tok == '\n')
        return "\u23ce";
    if (tok == ' ')
        return "\u2423";
    snprintf(buf, 4, "%c", tok >= 33 && tok < 127 ? tok : '?');
    return buf;
}

/* Sequence q's tokens and their lines to their experts. */
static void draw_sequence(ptdp_svg *s, const moe_routing *a, int q)
{
    const double y = q == 0 ? SEQ0_Y : SEQ1_Y, y_from = q == 0 ? y + TOK_H : y;
    const double y_to = q == 0 ? EXP_Y : EXP_Y + EXP_H;
    for (int t = 0; t < T; t++)
        for (int j = 0; j < K; j++) {
            const int c = (q * T + t) * K + j, e = a->choice[c];
            const double x_to = expert_x(e) + 14 + (EXP_W - 28) * (t + 0.5) / T;
            ptdp_svg_line(s, token_x(t) + TOK_W / 2.0, y_from, x_to, y_to, fig_rank_color(q), 0.6 + 3.0 * a->gate[c],
                          e / (E / EP) == q ? NULL : "5 3");
        }
    char buf[4];
    for (int t = 0; t < T; t++) {
        ptdp_svg_rect(s, token_x(t), y, TOK_W, TOK_H, "#f7f7f7", fig_rank_color(q));
        ptdp_svg_text(s, token_x(t) + TOK_W / 2.0, y + 20, 14, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, NULL, "%s",
                      token_text(a->token[q * T + t], buf));
    }
    ptdp_svg_text(s, TOK_X - 12, y + 13, 12, PTDP_SVG_END | PTDP_SVG_BOLD, fig_rank_color(q), "sequence %d", q);
    ptdp_svg_text(s, TOK_X - 12, y + 27, 10.5, PTDP_SVG_END, "#555555", "DP / EP rank %d", q);
}

/* The experts, framed by the EP rank that holds them, with their loads. */
static void draw_experts(ptdp_svg *s, const moe_routing *a)
{
    for (int r = 0; r < EP; r++) {
        const double x0 = expert_x(r * E / EP) - 10, x1 = expert_x((r + 1) * E / EP - 1) + EXP_W + 10;
        ptdp_svg_rect(s, x0, EXP_Y - 10, x1 - x0, EXP_H + 20, "none", "#777777");
        /* rank 0's name on the left of its frame, rank 1's on the right */
        ptdp_svg_text(s, r == 0 ? x0 - 6 : x1 + 6, EXP_Y + EXP_H / 2.0 + 4, 11,
                      (r == 0 ? PTDP_SVG_END : PTDP_SVG_START) | PTDP_SVG_BOLD, "#555555", "EP rank %d", r);
    }
    for (int e = 0; e < E; e++) {
        int from[SEQS] = { 0 };
        for (int c = 0; c < R * K; c++)
            from[c / (T * K)] += a->choice[c] == e;
        ptdp_svg_rect(s, expert_x(e), EXP_Y, EXP_W, EXP_H, "#fff7e6", "#555555");
        ptdp_svg_text(s, expert_x(e) + EXP_W / 2.0, EXP_Y + 20, 13, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, NULL,
                      "expert %d", e);
        ptdp_svg_text(s, expert_x(e) + EXP_W / 2.0, EXP_Y + 38, 10.5, PTDP_SVG_MIDDLE, "#333333",
                      "load %d = %d + %d", a->load[e], from[0], from[1]);
    }
}

/* Choices of sequence q's tokens whose expert EP rank `to` holds. */
static int sent(const moe_routing *a, int q, int to)
{
    int n = 0;
    for (int c = q * T * K; c < (q + 1) * T * K; c++)
        n += a->choice[c] / (E / EP) == to;
    return n;
}

static int draw_dispatch(const moe_routing *a, const char *path, char *msg, size_t msglen)
{
    const int C = a->cfg.hidden;
    ptdp_svg s;
    ptdp_svg_begin(&s, 1060, 640);
    ptdp_svg_text(&s, 20, 26, 17, PTDP_SVG_BOLD, NULL,
                  "Mixture of experts: one micro-batch's dispatch, E = %d experts, top-%d, over ep = %d", E, K, EP);
    ptdp_svg_text(&s, 20, 46, 12, PTDP_SVG_START, "#333333",
                  "Block 0 of the default GPT with --moe-experts %d --seq-len %d on two sequences of the built-in "
                  "sums: z = LN2(x) W_r\u1d40 routed by ptdp_moe_route,", E, T);
    ptdp_svg_text(&s, 20, 62, 12, PTDP_SVG_START, "#333333",
                  "its loads checked equal to what the model's router counted in that forward.  A line per choice, "
                  "as wide as its gate (softmax of the two).");
    ptdp_svg_text(&s, 20, 82, 12.5, PTDP_SVG_BOLD, "#08519c",
                  "dp %d, ep %d: DP rank r routes sequence r over all %d experts; EP rank r holds experts %d r, "
                  "%d r + 1; dashed = sent to the other EP rank", SEQS, EP, E, E / EP, E / EP);
    draw_experts(&s, a);
    for (int q = 0; q < SEQS; q++)
        draw_sequence(&s, a, q);
    const int out0 = sent(a, 0, 1), out1 = sent(a, 1, 0);
    char b[2][32];
    const double row = (double)C * sizeof(ptdp_real);
    ptdp_svg_text(&s, 20, 540, 12.5, PTDP_SVG_BOLD, NULL,
                  "Loads %d + %d + %d + %d = k B T = %d \u00d7 %d \u00d7 %d = %d choices, none dropped (dropless); "
                  "balance loss %.6g summed over the two sequences", a->load[0], a->load[1], a->load[2], a->load[3],
                  K, SEQS, T, K * R, a->aux);
    ptdp_svg_text(&s, 20, 560, 12.5, PTDP_SVG_BOLD, NULL,
                  "Dispatch all-to-all: rank 0 sends %d token rows to rank 1 (%s), rank 1 sends %d to rank 0 (%s), "
                  "a row of C = %d reals each;", out0, ptdp_format_bytes(out0 * row, b[0], sizeof b[0]), out1,
                  ptdp_format_bytes(out1 * row, b[1], sizeof b[1]), C);
    ptdp_svg_text(&s, 20, 580, 12, PTDP_SVG_START, "#333333",
                  "the combine sends as many back, to be weighted by their gates; uniform routing would send "
                  "k T (N\u22121)/N = %d rows each way.", K * T * (EP - 1) / EP);
    ptdp_svg_text(&s, 20, 600, 12, PTDP_SVG_START, "#333333",
                  "Local choices (solid) stay on the rank; the backward mirrors both all-to-alls (dispatch's "
                  "backward is a combine).");
    return fig_finish(&s, path, msg, msglen);
}

int fig_moe_dispatch(const char *path, char *msg, size_t msglen)
{
    static moe_routing a;
    memset(&a, 0, sizeof a);
    a.cfg = ptdp_gpt_default_config();
    unsigned char *corpus = NULL;
    size_t len = ptdp_gpt_builtin_corpus(ptdp_train_defaults().seed, PTDP_GPT_CORPUS_LINES, &corpus);
    if (len == 0) {
        free(corpus);
        snprintf(msg, msglen, "out of host memory making the built-in corpus");
        return PTDP_ENOMEM;
    }
    for (size_t i = 0; i < len; i++)
        if (corpus[i] + 1 > ptdp_gpt(&a.cfg)->vocab)
            ptdp_gpt(&a.cfg)->vocab = corpus[i] + 1;
    ptdp_gpt_settings *g = ptdp_gpt(&a.cfg);
    g->corpus = corpus;
    g->corpus_len = len;
    g->vocab_padded = ptdp_gpt_pad_vocab(g->vocab, g->vocab_multiple, 1);
    g->seq_len = T;
    g->moe_experts = E;
    g->moe_top_k = K;
    ptdp_launch_result lr;
    memset(&lr, 0, sizeof lr);
    ptdp_launch_opts o = { .watchdog_s = 30, .result = &lr };
    int err = ptdp_launch(1, route_device, &a, &o);
    if (err != 0)
        snprintf(msg, msglen, "the MoE GPT's forward failed: %s", lr.message);
    ptdp_launch_result_free(&lr);
    free(corpus);
    if (err == 0)
        err = check_routing(&a, msg, msglen);
    if (err != 0)
        return err;
    return draw_dispatch(&a, path, msg, msglen);
}
