/*
 * figure_zero_memory.c — zero_memory.svg: the bytes one device keeps under
 * plain DP, ZeRO-1, -2 and -3, by the ZeRO paper's formula and by the arena.
 *
 * Rajbhandari et al. (2020), figure 1: with Ψ parameters on N DP ranks and
 * bw + bg + bo bytes per parameter (weights, gradients, optimizer state),
 *
 *                     float (this build, AdamW 4 + 4 + 8)   bf16 mixed (2 + 2 + 12)
 *   plain DP          16Ψ                                    16Ψ
 *   ZeRO-1 (optim)    8Ψ + 8Ψ/N                              4Ψ + 12Ψ/N
 *   ZeRO-2 (+ grads)  4Ψ + 12Ψ/N                             2Ψ + 14Ψ/N
 *   ZeRO-3 (+ params) 16Ψ/N                                  16Ψ/N
 *
 * Four stages of the default GPT, dp = N = 4, M = 2, each measured as
 * `ptdp bench zero` measures it (ptdp_zero_measure_stage, zero_measure.c):
 * the states at rest (after set-up, no step taken) and the peaks while
 * training.  Each stage is three bars, one segment per state:
 *
 *   formula (f32)     ████████▓▓▓▓▓▓▓▓░░░░░░░░░░░░░░░░        params grads optim
 *   arena (f32)       ████████▓▓▓▓▓▓▓▓░░░░░░░░░░░░░░░░┆┆┆┆┆   + what lives a moment
 *   arena (bf16)      ████▓▓▓▓░░░░░░░░░░░░░░░░░░░░░░░░┆┆┆┆     (dashed: transient)
 *
 * The transient part is drawn after the persistent one, dashed: ZeRO-2's
 * full-size bucket ("comm") and ZeRO-3's gathered units and their
 * gradients.  The bf16 bars are measured the same way, by the same runs
 * under --precision bf16 (mixed.h); in ptdp-f64, which has no bf16, they
 * are the formula only, and the figure says so.
 *
 * The figure is refused (PTDP_ECHECK) if any device's persistent states
 * differ from the formula, or its DP bytes per step from 2(N-1)/N S,
 * (M+1)(N-1)/N S, 3M(N-1)/N S (half of them under bf16), in either
 * precision.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench/bench.h"
#include "figures.h"
#include "ptdp/error.h"
#include "ptdp/zero.h"

enum { N = 4, M = 2, STEPS = 2, STAGES = 4 };

/* ---- measuring --------------------------------------------------------------- */

/* Four stages in precision f, each checked against the formula. */
static int measure(ptdp_zero_measure *m, const ptdp_model_config *model, const ptdp_zero_precision *f, char *msg,
                   size_t msglen)
{
    ptdp_train_config c = ptdp_train_defaults();
    c.model = *model;
    c.dp = N;
    c.micro_batches = M;
    c.steps = STEPS;
    ptdp_launch_opts o = { .watchdog_s = 60 };
    for (int z = 0; z < STAGES; z++) {
        char why[PTDP_MSG_MAX];
        int err = ptdp_zero_measure_stage(&c, &o, f, z, &m[z], why, sizeof why);
        if (err != 0) {
            snprintf(msg, msglen, "training dp %d with --zero %d in %s failed: %s", N, z, f->name, why);
            return err;
        }
        if (!ptdp_zero_states_match(&m[z], model->layers, why, sizeof why)) {
            snprintf(msg, msglen, "%s: %s", f->name, why);
            return PTDP_ECHECK;
        }
        if (!ptdp_zero_bytes_match(&m[z])) {
            snprintf(msg, msglen, "%s, --zero %d: %.0f DP bytes per step, the formula says %.0f", f->name, z,
                     m[z].dp_sent, m[z].dp_formula);
            return PTDP_ECHECK;
        }
    }
    return PTDP_OK;
}

/* ---- drawing ------------------------------------------------------------------- */

enum { LABEL_X = 20, BAR_X = 190, BAR_W = 430, BAR_H = 15, BAR_GAP = 5, NOTE_X = 632,
       TOP = 112, GROUP_H = 96 };

static const char *const state_color[3] = { "#4e79a7", "#f28e2b", "#59a14f" };   /* params grads optim */
static const char *const transient_color[3] = { "#b7cbe2", "#f9d3ae", "#b9dcb5" };
static const char *const bucket_color = "#76b7b2";

typedef struct { double scale; } axis;

/* A segment of `bytes` from x; returns its end. */
static double segment(ptdp_svg *s, const axis *a, double x, double y, double bytes, const char *fill, bool dashed)
{
    double w = bytes * a->scale;
    if (w <= 0)
        return x;
    ptdp_svg_rect(s, x, y, w, BAR_H, fill, dashed ? NULL : "white");
    if (dashed) {
        double xs[5] = { x + 0.5, x + w - 0.5, x + w - 0.5, x + 0.5, x + 0.5 };
        double ys[5] = { y + 0.5, y + 0.5, y + BAR_H - 0.5, y + BAR_H - 0.5, y + 0.5 };
        ptdp_svg_polyline(s, xs, ys, 5, "#555555", 1, "3 2");
    }
    return x + w;
}

/* One bar of params, grads, optim (bytes[3]); a transient part after it
 * (extra[3] for the states, bucket for ZeRO-2's comm) if extra != NULL. */
static double bar(ptdp_svg *s, const axis *a, double y, const double bytes[3], const double *extra, double bucket)
{
    double x = BAR_X;
    for (int c = 0; c < 3; c++)
        x = segment(s, a, x, y, bytes[c], state_color[c], false);
    for (int c = 0; extra != NULL && c < 3; c++)
        x = segment(s, a, x, y, extra[c], transient_color[c], true);
    return segment(s, a, x, y, bucket, bucket_color, true);
}

/* "4Ψ + 12Ψ/N": the bytes per parameter of the states the stage's row keeps
 * whole, and of those it shards. */
static const char *rule(int stage, double bw, double bg, double bo, char *buf, size_t n)
{
    const ptdp_zero_stage *row = ptdp_zero_stage_of(stage);
    const bool sharded[3] = { row->shards_params, row->shards_grads, row->shards_optim };
    const double b[3] = { bw, bg, bo };
    double whole = 0, part = 0;
    for (int c = 0; c < 3; c++)
        *(sharded[c] ? &part : &whole) += b[c];
    if (whole > 0 && part > 0)
        snprintf(buf, n, "%gΨ + %gΨ/N", whole, part);
    else if (part > 0)
        snprintf(buf, n, "%gΨ/N", part);
    else
        snprintf(buf, n, "%gΨ", whole);
    return buf;
}

/* Device 0's arena of run m as a bar at y: at rest, then what lives a
 * moment; the note says whether the rest equals formula bytes ft. */
static void arena_bar(ptdp_svg *s, const axis *a, const ptdp_zero_measure *m, double ft, const char *rule_text,
                      double y)
{
    static const ptdp_mem_category cats[3] = { PTDP_MEM_PARAMS, PTDP_MEM_GRADS, PTDP_MEM_OPTIM };
    char b1[32], b2[32], b3[32], same[96];
    double rest[3], extra[3], rest_sum = 0, extra_sum = 0;
    for (int c = 0; c < 3; c++) {
        rest[c] = (double)m->rest[0].peak[cats[c]];
        extra[c] = (double)m->peak[0].peak[cats[c]] - rest[c];
        rest_sum += rest[c];
        extra_sum += extra[c];
    }
    const double bucket = (double)m->peak[0].peak[PTDP_MEM_COMM];
    ptdp_svg_text(s, LABEL_X + 10, y + BAR_H - 3, 11, PTDP_SVG_BOLD, NULL, "arena, %s, measured", m->prec.name);
    bar(s, a, y, rest, extra, bucket);
    snprintf(same, sizeof same, "%s formula%s%s%s", rest_sum == ft ? "=" : "≠", rule_text ? " (" : "",
             rule_text ? rule_text : "", rule_text ? ")" : "");
    if (bucket > 0 && extra_sum > 0)   /* bf16's float working copies beside ZeRO-2's bucket */
        ptdp_svg_text(s, NOTE_X, y + BAR_H - 3, 11, PTDP_SVG_BOLD, NULL, "%s at rest %s; + %s units + %s bucket",
                      ptdp_format_bytes(rest_sum, b1, sizeof b1), same, ptdp_format_bytes(extra_sum, b2, sizeof b2),
                      ptdp_format_bytes(bucket, b3, sizeof b3));
    else if (bucket > 0)
        ptdp_svg_text(s, NOTE_X, y + BAR_H - 3, 11, PTDP_SVG_BOLD, NULL, "%s at rest %s; + %s bucket",
                      ptdp_format_bytes(rest_sum, b1, sizeof b1), same, ptdp_format_bytes(bucket, b2, sizeof b2));
    else if (extra_sum > 0)
        ptdp_svg_text(s, NOTE_X, y + BAR_H - 3, 11, PTDP_SVG_BOLD, NULL, "%s at rest %s; + %s units",
                      ptdp_format_bytes(rest_sum, b1, sizeof b1), same, ptdp_format_bytes(extra_sum, b2, sizeof b2));
    else
        ptdp_svg_text(s, NOTE_X, y + BAR_H - 3, 11, PTDP_SVG_BOLD, NULL, "%s at rest %s; nothing more",
                      ptdp_format_bytes(rest_sum, b1, sizeof b1), same);
}

/* m: float; mb: bf16, or NULL for its formula only (ptdp-f64). */
static void draw_stage(ptdp_svg *s, const axis *a, const ptdp_zero_measure *m, const ptdp_zero_measure *mb,
                       const ptdp_zero_precision *bf, double y)
{
    static const char *const titles[STAGES] = {
        "plain DP (--zero 0)", "ZeRO-1 (--zero 1): optimizer state sharded",
        "ZeRO-2 (--zero 2): + gradients sharded", "ZeRO-3 (--zero 3): + parameters sharded",
    };
    char r[64], b1[32];
    ptdp_svg_text(s, LABEL_X, y, 13, PTDP_SVG_BOLD, NULL, "%s", titles[m->stage]);

    /* 1. the formula in this build's float */
    const ptdp_zero_bytes f = m->formula;
    const double fb[3] = { f.params, f.grads, f.optim };
    double ft = f.params + f.grads + f.optim;
    double y1 = y + 8;
    ptdp_svg_text(s, LABEL_X + 10, y1 + BAR_H - 3, 11, PTDP_SVG_START, "#333333", "formula, %s", m->prec.name);
    bar(s, a, y1, fb, NULL, 0);
    ptdp_svg_text(s, NOTE_X, y1 + BAR_H - 3, 11, PTDP_SVG_START, "#333333", "%s = %s",
                  rule(m->stage, m->prec.bw, m->prec.bg, m->prec.bo, r, sizeof r),
                  ptdp_format_bytes(ft, b1, sizeof b1));

    /* 2. the arena of device 0: at rest, then what lives a moment */
    double y2 = y1 + BAR_H + BAR_GAP;
    arena_bar(s, a, m, ft, NULL, y2);

    /* 3. bf16 mixed: its arena beside its formula (the formula only in ptdp-f64) */
    const ptdp_zero_bytes g = ptdp_zero_state_bytes(m->stage, m->psi, m->dp, bf->bw, bf->bg, bf->bo);
    const double gb[3] = { g.params, g.grads, g.optim }, gt = g.params + g.grads + g.optim;
    double y3 = y2 + BAR_H + BAR_GAP;
    if (mb != NULL) {
        arena_bar(s, a, mb, gt, rule(m->stage, bf->bw, bf->bg, bf->bo, r, sizeof r), y3);
    } else {
        ptdp_svg_text(s, LABEL_X + 10, y3 + BAR_H - 3, 11, PTDP_SVG_START, "#333333", "formula, bf16 mixed");
        bar(s, a, y3, gb, NULL, 0);
        ptdp_svg_text(s, NOTE_X, y3 + BAR_H - 3, 11, PTDP_SVG_START, "#333333", "%s = %s",
                      rule(m->stage, bf->bw, bf->bg, bf->bo, r, sizeof r), ptdp_format_bytes(gt, b1, sizeof b1));
    }
}

static void legend(ptdp_svg *s, double y)
{
    static const char *const names[3] = { "params", "grads", "optim (AdamW m, v)" };
    double x = LABEL_X;
    for (int c = 0; c < 3; c++) {
        ptdp_svg_rect(s, x, y - 10, 12, 12, state_color[c], NULL);
        ptdp_svg_text(s, x + 17, y, 11, PTDP_SVG_START, NULL, "%s", names[c]);
        x += c == 2 ? 150 : 80;
    }
    for (int c = 0; c < 2; c++) {
        ptdp_svg_rect(s, x + 13 * c, y - 10, 12, 12, transient_color[c], NULL);
    }
    {
        double xs[5] = { x + 0.5, x + 25.5, x + 25.5, x + 0.5, x + 0.5 }, ys[5] = { y - 9.5, y - 9.5, y + 1.5, y + 1.5, y - 9.5 };
        ptdp_svg_polyline(s, xs, ys, 5, "#555555", 1, "3 2");
    }
    ptdp_svg_text(s, x + 32, y, 11, PTDP_SVG_START, NULL,
                  "transient: units in use (ZeRO-3's gathered, bf16's float copies), their gradients");
    x += 470;
    ptdp_svg_rect(s, x, y - 10, 12, 12, bucket_color, NULL);
    ptdp_svg_text(s, x + 17, y, 11, PTDP_SVG_START, NULL, "ZeRO-2's bucket (comm)");
}

int fig_zero_memory(const char *path, char *msg, size_t msglen)
{
    ptdp_model_config model;
    unsigned char *corpus;
    const char *noun;
    int err = fig_default_model(&model, &corpus, &noun, msg, msglen);
    if (err != 0)
        return err;
    static ptdp_zero_measure m[STAGES], mb[STAGES];   /* large: every device's arena */
    const ptdp_zero_precision *bf = ptdp_zero_precision_of("bf16");
    err = measure(m, &model, ptdp_zero_precision_of(PTDP_REAL_NAME), msg, msglen);
    if (err == 0 && bf->measured)
        err = measure(mb, &model, bf, msg, msglen);
    free(corpus);
    if (err != 0)
        return err;

    /* one scale for every bar: the longest one */
    double longest = 0;
    for (int z = 0; z < STAGES; z++) {
        double peak = 0;
        for (int c = 0; c < PTDP_MEM_NCAT; c++)
            if (c == PTDP_MEM_PARAMS || c == PTDP_MEM_GRADS || c == PTDP_MEM_OPTIM || c == PTDP_MEM_COMM)
                peak += (double)m[z].peak[0].peak[c];
        const ptdp_zero_bytes g = ptdp_zero_state_bytes(z, m[z].psi, N, bf->bw, bf->bg, bf->bo);
        double f = m[z].formula.params + m[z].formula.grads + m[z].formula.optim;
        double b = g.params + g.grads + g.optim;
        longest = peak > longest ? peak : longest;
        longest = f > longest ? f : longest;
        longest = b > longest ? b : longest;
        double bpeak = 0;   /* the bf16 arena's bar */
        for (int c = 0; bf->measured && c < PTDP_MEM_NCAT; c++)
            if (c == PTDP_MEM_PARAMS || c == PTDP_MEM_GRADS || c == PTDP_MEM_OPTIM || c == PTDP_MEM_COMM)
                bpeak += (double)mb[z].peak[0].peak[c];
        longest = bpeak > longest ? bpeak : longest;
    }
    axis a = { .scale = BAR_W / longest };

    char b1[32], b2[32], b3[32];
    ptdp_svg s;
    const double height = TOP + STAGES * GROUP_H + 88;
    ptdp_svg_begin(&s, 1180, height);
    ptdp_svg_text(&s, 20, 26, 17, PTDP_SVG_BOLD, NULL,
                  "ZeRO's memory per device, dp = N = %d: the paper's formula beside the arena", N);
    ptdp_svg_text(&s, 20, 46, 12, PTDP_SVG_START, "#333333",
                  "Default %s, Ψ = %.0f parameters, AdamW, M = %d micro-batches; each stage run by ptdp_train as "
                  "ptdp bench zero runs it, device 0 shown.", noun, m[0].psi, M);
    ptdp_svg_text(&s, 20, 62, 12, PTDP_SVG_START, "#333333",
                  "Every device's states at rest checked against the formula.  %s: %g + %g + %g bytes per "
                  "parameter; bf16 mixed: %g + %g + %g, %s.",
                  m[0].prec.name, m[0].prec.bw, m[0].prec.bg, m[0].prec.bo, bf->bw, bf->bg, bf->bo,
                  bf->measured ? "measured (--precision bf16)" : "formula only (no bf16 in this build)");
    legend(&s, 88);
    for (int z = 0; z < STAGES; z++) {
        double y = TOP + 8 + z * GROUP_H;
        if (z > 0)
            ptdp_svg_line(&s, 20, y - 20, 1160, y - 20, "#dddddd", 1, NULL);
        draw_stage(&s, &a, &m[z], bf->measured ? &mb[z] : NULL, bf, y);
    }
    const double ny = TOP + STAGES * GROUP_H + 4;
    ptdp_svg_text(&s, 20, ny, 12, PTDP_SVG_START, "#333333",
                  "DP bytes per step and device, measured = formula: plain DP and ZeRO-1 %s (2(N−1)/N S), "
                  "ZeRO-2 %s ((M+1)(N−1)/N S),", ptdp_format_bytes(m[0].dp_sent, b1, sizeof b1),
                  ptdp_format_bytes(m[2].dp_sent, b2, sizeof b2));
    ptdp_svg_text(&s, 20, ny + 18, 12, PTDP_SVG_START, "#333333",
                  "ZeRO-3 %s (3M(N−1)/N S): it keeps 1/N of every state and pays twice, a unit gathered for its "
                  "forward and again for its backward.", ptdp_format_bytes(m[3].dp_sent, b3, sizeof b3));
    ptdp_svg_text(&s, 20, ny + 36, 12, PTDP_SVG_START, "#333333",
                  "The units in use live whole for a moment: on a model this small they are a large part of the "
                  "peak (zero_overlap.svg shows them in time).");
    if (bf->measured)
        ptdp_svg_text(&s, 20, ny + 54, 12, PTDP_SVG_START, "#333333",
                      "bf16 moves bf16 stores, half the bytes, measured = formula: %s, %s and %s; its float working "
                      "copies (a block's one linear layer at a time) are its transient params.", ptdp_format_bytes(mb[0].dp_sent, b1, sizeof b1),
                      ptdp_format_bytes(mb[2].dp_sent, b2, sizeof b2), ptdp_format_bytes(mb[3].dp_sent, b3, sizeof b3));
    return fig_finish(&s, path, msg, msglen);
}
