/*
 * figure_dp.c — dp_allreduce.svg: data parallelism's gradient, 1/B and one sum.
 *
 * Lesson 02's step, run for real: B = 10 samples on dp = 3 replicas of
 * lesson 02's model, M = 2 micro-batches per replica, cut by ptdp_share
 * exactly as ptdp_train cuts them (unequal on purpose):
 *
 *   rank 0  samples 0-3   [0 1] [2 3]  ─► g_0 = Σ_{i in shard} (1/B) ∇loss_i ─┐
 *   rank 1  samples 4-6   [4 5] [6]    ─► g_1                                 ├─ all-reduce (sum)
 *   rank 2  samples 7-9   [7 8] [9]    ─► g_2                                 ┘   g = g_0 + g_1 + g_2
 *
 * Every micro-batch's loss gradient is scaled by 1/B, whatever its size, so
 * the parts simply add up to the gradient of the mean loss over the whole
 * batch (dp.h).  The figure shows, measured:
 *
 *   ||g_r|| of each rank's part before the all-reduce, ||g|| after it (the
 *   same bits on every rank), and ||g|| of ONE device running all B samples
 *   in one micro-batch — equal up to rounding, element by element;
 *   the bytes each rank sent: 2(N-1)/N · S in all for S bytes of gradient;
 *   what the tempting "average of averages" (1/|mb|, then /M, then
 *   PTDP_AVG) gives instead, with micro-batches of unequal size;
 *   and ptdp_train's own log of step 1 for the same configuration.
 *
 * The figure fails (PTDP_ECHECK) if the sum is not the one-device gradient,
 * if the replicas differ, or if the bytes are not 2(N-1)/N · S.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model_flags.h"
#include "figures.h"
#include "ptdp/comm.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/launch.h"
#include "ptdp/mesh.h"
#include "ptdp/models.h"

enum { DP = 3, M = 2, B = 10, TRAIN_DP = 2, TRAIN_M = 5 };
static const uint64_t SEED = 7;

/* Lesson 02's model and seed: the numbers its check prints. */
static ptdp_model_config lesson_model(void)
{
    ptdp_model_config c = ptdp_model_default_config();   /* the registry's default model */
    c.ops = ptdp_model_of(&c);
    c.hidden = 8;
    c.ffn = 16;
    c.layers = 2;
    ptdp_model_cli_set(&c, "--d-in", 6);
    ptdp_model_cli_set(&c, "--classes", 5);
    return c;
}

/* ---- one step's gradient on `dp` devices --------------------------------------- */

typedef struct {
    int dp, micro_batches;        /* in                                          */
    size_t numel;                 /* out: elements of the gradient               */
    int mb_first[DP][M], mb_rows[DP][M];   /* the micro-batches each rank ran    */
    double part_norm[DP];         /* ||g_r||, before the all-reduce              */
    double sent[DP];              /* bytes each rank sent in the all-reduce      */
    ptdp_real *grad[DP];          /* host [numel]: each rank's g after the sum   */
    ptdp_real *averaged;          /* host [numel]: rank 0's average of averages  */
} dp_step;

static double norm_of(const ptdp_real *g, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)g[i] * (double)g[i];
    return sqrt(s);
}

/* Forward and backward `rows` samples from sample `first`: the backward
 * multiplies each sample's loss gradient by `scale` and ADDS to flat_g. */
static int forward_backward(ptdp_device *dev, ptdp_model *m, int first, int rows, double scale)
{
    ptdp_batch b = { .first = first, .rows = rows };
    ptdp_acts acts;
    int rc = ptdp_batch_load(dev, m, &b);
    if (rc == 0)
        rc = ptdp_model_forward(dev, m, &acts, &b, (ptdp_tensor){ 0 }, 0, false, NULL);
    if (rc == 0)
        rc = ptdp_model_backward(dev, m, &acts, NULL, scale, NULL);
    ptdp_batch_free(dev, &b);
    return rc;
}

/* My micro-batches, each scaled by 1/B (or, for the wrong answer, by 1/its
 * own size): the sum over them lands in flat_g. */
static int my_part(ptdp_device *dev, ptdp_model *m, dp_step *x, int r, bool per_micro_batch_mean)
{
    size_t shard_off, shard_len;
    ptdp_share(B, x->dp, r, &shard_off, &shard_len);
    memset(m->flat_g, 0, m->numel * sizeof(ptdp_real));
    for (int k = 0; k < x->micro_batches; k++) {
        size_t off, len;
        ptdp_share(shard_len, x->micro_batches, k, &off, &len);
        x->mb_first[r][k] = (int)(shard_off + off);
        x->mb_rows[r][k] = (int)len;
        int rc = forward_backward(dev, m, (int)(shard_off + off), (int)len,
                                  per_micro_batch_mean ? 1.0 / (double)len : 1.0 / B);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int dp_step_device(ptdp_device *dev, void *arg)
{
    dp_step *x = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    ptdp_model_config cfg = lesson_model();
    int rc = ptdp_mesh_init(dev, x->dp, 1, 1, &mesh);
    if (rc != 0)
        return rc;
    if ((rc = ptdp_model_init(dev, &m, &cfg, &mesh, NULL, SEED, 0.0)) != 0) {
        ptdp_mesh_free(&mesh);
        return rc;
    }
    const int r = mesh.dp_rank;
    if (r == 0)
        x->numel = m.numel;
    const size_t bytes = m.numel * sizeof(ptdp_real);

    /* the right answer: 1/B everywhere, then one all-reduce (sum) */
    rc = my_part(dev, &m, x, r, false);
    if (rc == 0) {
        x->part_norm[r] = norm_of(m.flat_g, m.numel);
        double before = dev->stats.bytes_sent[PTDP_COLL_ALL_REDUCE];
        rc = ptdp_all_reduce(mesh.dp_comm, m.flat_g, m.flat_g, m.numel, PTDP_REAL, PTDP_SUM);
        x->sent[r] = dev->stats.bytes_sent[PTDP_COLL_ALL_REDUCE] - before;
        memcpy(x->grad[r], m.flat_g, bytes);
    }
    /* the tempting one: each micro-batch a mean of its own, the mean over
     * the M micro-batches, then the mean over the ranks */
    if (rc == 0 && x->averaged != NULL && (rc = my_part(dev, &m, x, r, true)) == 0) {
        for (size_t i = 0; i < m.numel; i++)
            m.flat_g[i] /= (ptdp_real)x->micro_batches;
        rc = ptdp_all_reduce(mesh.dp_comm, m.flat_g, m.flat_g, m.numel, PTDP_REAL, PTDP_AVG);
        if (rc == 0 && r == 0)
            memcpy(x->averaged, m.flat_g, bytes);
    }
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return rc;
}

static void dp_step_free(dp_step *x)
{
    for (int r = 0; r < DP; r++)
        free(x->grad[r]);
    free(x->averaged);
}

static int run_dp_step(dp_step *x, int dp, int micro_batches, size_t numel, char *msg, size_t msglen)
{
    memset(x, 0, sizeof *x);
    x->dp = dp;
    x->micro_batches = micro_batches;
    for (int r = 0; r < dp; r++)
        if ((x->grad[r] = malloc(numel * sizeof(ptdp_real))) == NULL)
            goto oom;
    if (dp > 1 && (x->averaged = malloc(numel * sizeof(ptdp_real))) == NULL)
        goto oom;
    ptdp_launch_result lr;
    memset(&lr, 0, sizeof lr);
    ptdp_launch_opts o = { .watchdog_s = 30, .result = &lr };
    int err = ptdp_launch(dp, dp_step_device, x, &o);
    if (err != 0)
        snprintf(msg, msglen, "the dp = %d step failed: %s", dp, lr.message);
    else if (x->numel != numel) {
        snprintf(msg, msglen, "the model has %zu parameters, expected %zu", x->numel, numel);
        err = PTDP_ECHECK;
    }
    ptdp_launch_result_free(&lr);
    if (err != 0)
        dp_step_free(x);
    return err;
oom:
    dp_step_free(x);
    snprintf(msg, msglen, "out of host memory");
    return PTDP_ENOMEM;
}

/* The elements of the whole model (tp = pp = 1): what every replica holds. */
static size_t model_numel(void)
{
    ptdp_model_config cfg = lesson_model();
    const ptdp_model_ops *ops = ptdp_model_of(&cfg);
    int n = ops->list_params(&cfg, NULL);
    ptdp_param_info info[64];
    if (n <= 0 || n > 64)
        return 0;
    ops->list_params(&cfg, info);
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += (size_t)info[i].rows * (size_t)info[i].cols;
    return total;
}

static double max_diff(const ptdp_real *a, const ptdp_real *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++)
        d = fmax(d, fabs((double)a[i] - (double)b[i]));
    return d;
}

static double max_abs(const ptdp_real *a, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i]));
    return m;
}

/* ---- drawing ------------------------------------------------------------------ */

enum { CELL = 26, CELL_GAP = 2, MB_GAP = 10, SAMPLES_X = 130, ROW_H = 64, ROWS_Y = 112 };

/* Sample i sits at its place in the batch, with a gap before every
 * micro-batch of the dp run (gap[i] = how many came before its own), so
 * the one-device row lines up with the ranks' rows. */
static double sample_x(int i, const int *gap) { return SAMPLES_X + i * (CELL + CELL_GAP) + gap[i] * MB_GAP; }

/* One micro-batch of `rows` samples from `first`, with its scale under it. */
static void draw_micro_batch(ptdp_svg *s, double y, int first, int rows, const int *gap, const char *color)
{
    if (rows == 0)
        return;
    double x0 = sample_x(first, gap), x1 = sample_x(first + rows - 1, gap) + CELL;
    for (int i = first; i < first + rows; i++) {
        ptdp_svg_rect(s, sample_x(i, gap), y, CELL, CELL, color, "white");
        ptdp_svg_text(s, sample_x(i, gap) + CELL / 2.0, y + 17, 12, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, "white",
                      "%d", i);
    }
    ptdp_svg_line(s, x0, y + CELL + 4, x1, y + CELL + 4, "#555555", 1, NULL);
    ptdp_svg_text(s, (x0 + x1) / 2, y + CELL + 17, 10, PTDP_SVG_MIDDLE, "#333333", "\u00d7 1/%d", B);
}

static void arrow(ptdp_svg *s, double x0, double y0, double x1, double y1)
{
    double xs[2] = { x0, x1 }, ys[2] = { y0, y1 };
    ptdp_svg_arrow(s, xs, ys, 2, "#333333", 1.5, 7);
}

static void box(ptdp_svg *s, double x, double y, double w, double h, const char *line1, const char *line2)
{
    ptdp_svg_rect(s, x, y, w, h, "#f4f4f4", "#888888");
    ptdp_svg_text(s, x + w / 2, y + 17, 12, PTDP_SVG_MIDDLE, NULL, "%s", line1);
    ptdp_svg_text(s, x + w / 2, y + 34, 12, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, NULL, "%s", line2);
}

/* What the picture claims, measured and checked. */
typedef struct {
    double S, want;          /* gradient bytes; 2(N-1)/N S sent per rank      */
    double scale, diff;      /* largest |g| on one device; dp = 3 against it  */
    double wrong;            /* the average of averages against it            */
    double sent_sum;         /* bytes the ranks sent, summed                  */
    double norm_one, norm_wrong, train_norm;
} dp_claims;

/* ptdp_train, the library's loop (bucketed all-reduce), on the same batch:
 * it wants B divisible by dp x M, so it cuts the batch another way — the
 * gradient must not care.  Its step-1 ||g||, or an error. */
static int train_norm_of(double *norm, char *msg, size_t msglen)
{
    ptdp_train_config c = ptdp_train_defaults();
    c.model = lesson_model();
    c.dp = TRAIN_DP;
    c.micro_batches = TRAIN_M;
    c.batch = B;
    c.steps = 1;
    c.seed = SEED;
    c.optimizer = PTDP_OPT_SGD;
    c.lr = 0.5;
    ptdp_train_result tr;
    char why[PTDP_MSG_MAX];
    memset(&tr, 0, sizeof tr);
    int err = ptdp_train(&c, NULL, NULL, NULL, &tr, why, sizeof why);
    if (err != 0)
        snprintf(msg, msglen, "ptdp_train with dp %d, M %d: %s", TRAIN_DP, TRAIN_M, why);
    *norm = err == 0 ? tr.log[0].grad_norm : 0;
    ptdp_train_result_free(&tr);
    return err;
}

static int check_claims(const dp_step *par, const dp_step *one, size_t numel, dp_claims *k, char *msg,
                        size_t msglen)
{
    k->S = (double)numel * sizeof(ptdp_real);
    k->want = 2.0 * (DP - 1) / DP * k->S;
    k->scale = max_abs(one->grad[0], numel);
    k->diff = max_diff(par->grad[0], one->grad[0], numel);
    k->wrong = max_diff(par->averaged, one->grad[0], numel);
    k->norm_one = norm_of(one->grad[0], numel);
    k->norm_wrong = norm_of(par->averaged, numel);
    k->sent_sum = 0;
    for (int r = 0; r < DP; r++)
        k->sent_sum += par->sent[r];
    for (int r = 1; r < DP; r++)
        if (memcmp(par->grad[r], par->grad[0], numel * sizeof(ptdp_real)) != 0) {
            snprintf(msg, msglen, "after the all-reduce rank %d's gradient differs from rank 0's", r);
            return PTDP_ECHECK;
        }
    if (k->diff > PTDP_TOLERANCE * fmax(1, k->scale)) {
        snprintf(msg, msglen, "the dp = %d gradient differs from one device's by %.3g", DP, k->diff);
        return PTDP_ECHECK;
    }
    if (k->wrong <= PTDP_TOLERANCE * fmax(1, k->scale)) {
        snprintf(msg, msglen, "the average of averages gives the right gradient: the figure needs micro-batches "
                 "of unequal sizes to show why 1/B");
        return PTDP_ECHECK;
    }
    if (fabs(k->sent_sum / DP - k->want) > 1e-9 * k->want) {
        snprintf(msg, msglen, "the ranks sent %.1f bytes on average, 2(N-1)/N S = %.1f", k->sent_sum / DP, k->want);
        return PTDP_ECHECK;
    }
    int err = train_norm_of(&k->train_norm, msg, msglen);
    if (err == 0 && !ptdp_check_value(k->train_norm, k->norm_one, PTDP_TOLERANCE)) {
        snprintf(msg, msglen, "ptdp_train logs ||g|| = %.9g at step 1, one device %.9g", k->train_norm, k->norm_one);
        err = PTDP_ECHECK;
    }
    return err;
}

enum { PART_X = 500, PART_W = 150, SUM_X = 682, SUM_W = 84, OUT_X = 800, OUT_W = 160 };

/* Each rank's micro-batches, its part g_r, the all-reduce, the sum it
 * ends with. */
static void draw_ranks(ptdp_svg *s, const dp_step *par, size_t numel, const int *gap, double samples_end)
{
    const double sum_y = ROWS_Y + 4, sum_h = DP * ROW_H - 30, sum_mid = sum_y + sum_h / 2;
    char l1[96], l2[96];
    for (int r = 0; r < DP; r++) {
        double y = ROWS_Y + r * ROW_H;
        ptdp_svg_rect(s, 20, y + 2, 12, 12, fig_rank_color(r), NULL);
        ptdp_svg_text(s, 38, y + 12, 12, PTDP_SVG_BOLD, NULL, "rank %d", r);
        ptdp_svg_text(s, 38, y + 27, 11, PTDP_SVG_START, "#555555", "samples %d\u2013%d", par->mb_first[r][0],
                      par->mb_first[r][M - 1] + par->mb_rows[r][M - 1] - 1);
        for (int k = 0; k < M; k++)
            draw_micro_batch(s, y, par->mb_first[r][k], par->mb_rows[r][k], gap, fig_rank_color(r));
        arrow(s, samples_end + 8, y + 13, PART_X - 2, y + 13);
        snprintf(l1, sizeof l1, "g%d = \u03a3 (1/%d) \u2207loss_i", r, B);
        snprintf(l2, sizeof l2, "\u2016g%d\u2016 = %.6f", r, par->part_norm[r]);
        box(s, PART_X, y - 8, PART_W, 42, l1, l2);
        double at = sum_mid + (r - (DP - 1) / 2.0) * 16;   /* where rank r meets the all-reduce */
        arrow(s, PART_X + PART_W, y + 13, SUM_X - 2, at);
        arrow(s, SUM_X + SUM_W, at, OUT_X - 2, y + 13);
        snprintf(l1, sizeof l1, "g = g0 + g1 + g2");   /* DP = 3 */
        snprintf(l2, sizeof l2, "\u2016g\u2016 = %.6f", norm_of(par->grad[r], numel));
        box(s, OUT_X, y - 8, OUT_W, 42, l1, l2);
        ptdp_svg_rect(s, OUT_X + OUT_W - 10, y - 8, 10, 42, fig_rank_color(r), NULL);
    }
    ptdp_svg_rect(s, SUM_X, sum_y, SUM_W, sum_h, "#fff3c4", "#b8860b");
    ptdp_svg_text(s, SUM_X + SUM_W / 2.0, sum_mid - 6, 13, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, "#7a5a00",
                  "all-reduce");
    ptdp_svg_text(s, SUM_X + SUM_W / 2.0, sum_mid + 11, 12, PTDP_SVG_MIDDLE, "#7a5a00", "(sum)");
}

/* The samples the average of averages favours, "4, 5 and 9": those of the
 * smallest micro-batches; *small and *big the sizes. */
static void favoured_samples(const dp_step *par, char *who, size_t len, int *small, int *big)
{
    *small = B;
    *big = 0;
    for (int r = 0; r < DP; r++)
        for (int k = 0; k < M; k++) {
            *small = par->mb_rows[r][k] < *small ? par->mb_rows[r][k] : *small;
            *big = par->mb_rows[r][k] > *big ? par->mb_rows[r][k] : *big;
        }
    int favoured[B], nf = 0;
    for (int r = 0; r < DP; r++)
        for (int k = 0; k < M; k++)
            for (int i = 0; par->mb_rows[r][k] == *small && i < *small; i++)
                favoured[nf++] = par->mb_first[r][k] + i;
    who[0] = '\0';
    for (int i = 0, at = 0; i < nf; i++)
        at += snprintf(who + at, len - (size_t)at, "%s%d", i == 0 ? "" : i == nf - 1 ? " and " : ", ", favoured[i]);
}

static void draw_notes(ptdp_svg *s, const dp_step *par, const dp_claims *k, size_t numel, double ny)
{
    const double line = 18;
    char b[3][32];
    ptdp_svg_text(s, 20, ny, 12.5, PTDP_SVG_BOLD, NULL,
                  "The same gradient: the largest difference between the dp = %d sum and one device over the "
                  "%zu elements is %.2g (%s rounding).", DP, numel, k->diff, PTDP_REAL_NAME);
    ptdp_svg_text(s, 20, ny + line, 12, PTDP_SVG_START, "#333333",
                  "The ranks' parts add up (\u2016g0\u2016 + \u2016g1\u2016 + \u2016g2\u2016 is not \u2016g\u2016: "
                  "norms do not add, vectors do); all %d ranks end with the same bits, so the replicas stay equal.",
                  DP);
    ptdp_svg_text(s, 20, ny + 2.4 * line, 12.5, PTDP_SVG_BOLD, NULL,
                  "Bytes: S = %zu \u00d7 %zu B = %s of gradient; an all-reduce sends 2(N\u22121)/N \u00b7 S = "
                  "%.1f B per rank.", numel, sizeof(ptdp_real), ptdp_format_bytes(k->S, b[0], sizeof b[0]), k->want);
    ptdp_svg_text(s, 20, ny + 3.4 * line, 12, PTDP_SVG_START, "#333333",
                  "measured: rank 0 sent %.0f B, rank 1 %.0f B, rank 2 %.0f B \u2014 %.1f B on average (the %zu "
                  "elements do not split evenly in %d chunks).", par->sent[0], par->sent[1], par->sent[2],
                  k->sent_sum / DP, numel, DP);
    ptdp_svg_text(s, 20, ny + 4.8 * line, 12.5, PTDP_SVG_BOLD, "#c00000",
                  "The tempting average instead (1/|mb| per micro-batch, the mean over M, then PTDP_AVG): "
                  "\u2016g\u2016 = %.6f,", k->norm_wrong);
    char who[96];
    int small, big;
    favoured_samples(par, who, sizeof who, &small, &big);
    ptdp_svg_text(s, 20, ny + 5.8 * line, 12, PTDP_SVG_START, "#333333",
                  "off by up to %.2g in an element (the largest is %.2g): samples %s, in micro-batches of %d, "
                  "weigh %g times as much as those in micro-batches of %d.", k->wrong, k->scale, who, small,
                  (double)big / small, big);
    ptdp_svg_text(s, 20, ny + 7.2 * line, 12, PTDP_SVG_START, "#333333",
                  "ptdp_train on the same batch, cut as it allows (B divisible by dp \u00d7 M: dp %d, M %d), "
                  "logs \u2016g\u2016 = %.6f at step 1: the cut does not matter.", TRAIN_DP, TRAIN_M, k->train_norm);
}

int fig_dp_allreduce(const char *path, char *msg, size_t msglen)
{
    const size_t numel = model_numel();
    if (numel == 0) {
        snprintf(msg, msglen, "cannot list lesson 02's model's parameters");
        return PTDP_ECHECK;
    }
    dp_step par, one;
    int err = run_dp_step(&par, DP, M, numel, msg, msglen);
    if (err != 0)
        return err;
    if ((err = run_dp_step(&one, 1, 1, numel, msg, msglen)) != 0) {
        dp_step_free(&par);
        return err;
    }
    dp_claims k;
    if ((err = check_claims(&par, &one, numel, &k, msg, msglen)) != 0) {
        dp_step_free(&par);
        dp_step_free(&one);
        return err;
    }

    ptdp_svg s;
    ptdp_svg_begin(&s, 980, 566);
    ptdp_svg_text(&s, 20, 26, 17, PTDP_SVG_BOLD, NULL,
                  "Data parallelism: a batch of B = %d on dp = %d replicas, M = %d micro-batches each", B, DP, M);
    ptdp_svg_text(&s, 20, 46, 12, PTDP_SVG_START, "#333333",
                  "Lesson 02's model (%zu parameters, seed %d), one real step: every micro-batch's loss "
                  "gradient is scaled by 1/B, whatever its size.", numel, (int)SEED);
    ptdp_svg_text(&s, 20, 84, 12, PTDP_SVG_BOLD, "#08519c", "shard of the batch (ptdp_share)");
    ptdp_svg_text(&s, 520, 84, 12, PTDP_SVG_BOLD, "#08519c", "my part");
    ptdp_svg_text(&s, 800, 84, 12, PTDP_SVG_BOLD, "#08519c", "after the all-reduce");

    int gap[B];
    for (int r = 0; r < DP; r++)
        for (int j = 0; j < M; j++)
            for (int i = par.mb_first[r][j]; i < par.mb_first[r][j] + par.mb_rows[r][j]; i++)
                gap[i] = r * M + j;
    const double samples_end = sample_x(B - 1, gap) + CELL;
    draw_ranks(&s, &par, numel, gap, samples_end);

    /* one device, the whole batch */
    const double oy = ROWS_Y + DP * ROW_H + 22;
    char l1[96], l2[96];
    ptdp_svg_line(&s, 20, oy - 20, 960, oy - 20, "#cccccc", 1, "4 4");
    ptdp_svg_rect(&s, 20, oy + 2, 12, 12, "#777777", NULL);
    ptdp_svg_text(&s, 38, oy + 12, 12, PTDP_SVG_BOLD, NULL, "1 device");
    ptdp_svg_text(&s, 38, oy + 27, 11, PTDP_SVG_START, "#555555", "the whole batch");
    draw_micro_batch(&s, oy, 0, B, gap, "#777777");
    arrow(&s, samples_end + 8, oy + 13, OUT_X - 2, oy + 13);
    ptdp_svg_text(&s, (samples_end + OUT_X) / 2, oy + 6, 11, PTDP_SVG_MIDDLE, "#555555",
                  "one micro-batch, no communication");
    snprintf(l1, sizeof l1, "g = \u03a3 (1/%d) \u2207loss_i", B);
    snprintf(l2, sizeof l2, "\u2016g\u2016 = %.6f", k.norm_one);
    box(&s, OUT_X, oy - 8, OUT_W, 42, l1, l2);

    draw_notes(&s, &par, &k, numel, oy + 84);
    dp_step_free(&par);
    dp_step_free(&one);
    return fig_finish(&s, path, msg, msglen);
}
