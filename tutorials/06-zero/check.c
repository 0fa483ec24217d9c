/*
 * check.c — lesson 06: is your ZeRO-1 step right, and does it pay off?
 *
 * Two references, both ptdp_train with AdamW (lr 0.01, weight decay 0.1):
 *   the baseline   one device, the whole batch of B = 12
 *   plain DP       N replicas, each all-reducing the whole gradient and
 *                  keeping the whole optimizer state (ptdp train --dp N)
 * and your lesson_zero_init / lesson_zero_step on N = 2, 3, 4 ranks (the
 * model's 661 parameters never divide evenly), 3 steps each:
 *
 *   1. your shards are the ones the collectives use (ptdp_share);
 *   2. each rank keeps AdamW's moments of its shard only: 2P/N, not 2P;
 *   3. after the first step every rank holds the right new parameters —
 *      if not, the check says whose shard went wrong, and how;
 *   4. the run equals the baseline and plain DP: every loss and every
 *      parameter to 1e-10, in double; the replicas bit-identical;
 *   5. the bytes: each rank sends 2(N-1)/N S per step for S bytes of
 *      gradients — exactly plain DP's all-reduce.
 *
 * The forward and backward are ptdp's (the pipeline executor with one
 * stage); your step is the schedule's OPTIMIZER_STEP.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lesson.h"
#include "tutorial.h"

#include "ptdp/mlp_data.h"
#include "ptdp/error.h"
#include "ptdp/mesh.h"
#include "ptdp/model.h"
#include "ptdp/models.h"
#include "ptdp/pp.h"
#include "ptdp/schedule.h"
#include "ptdp/state.h"
#include "ptdp/train.h"
#include "ptdp/comm.h"
#include "ptdp/mlp.h"

enum { B = 12, STEPS = 3, MAX_DP = 4, NUMEL_MAX = 4096 };
static const double LR = 0.01, WEIGHT_DECAY = 0.1;
static const uint64_t SEED = 3;

static ptdp_train_config config(int dp, int m)
{
    ptdp_train_config c = {
        .model = PTDP_MLP_CONFIG( .d_in = 6, .hidden = 8, .ffn = 16, .layers = 2, .classes = 5 ),
        .dp = dp, .tp = 1, .pp = 1, .micro_batches = m, .batch = B, .steps = STEPS,
        .optimizer = PTDP_OPT_ADAMW, .lr = LR, .weight_decay = WEIGHT_DECAY, .bucket_mb = 1, .seed = SEED,
    };
    return c;
}

static ptdp_adamw_config adamw_config(void)
{
    ptdp_adamw_config a = ptdp_adamw_default_config();
    a.lr = LR;
    a.weight_decay = WEIGHT_DECAY;
    return a;
}

/* ------------------------------------------------------- the references */

typedef struct {
    double loss[STEPS];
    ptdp_state final;
    size_t optim_bytes;      /* per device (plain DP)                */
    double bytes_per_step;   /* per device, mean (plain DP)          */
} reference;

static int run_reference(int dp, reference *r, char *msg, size_t len)
{
    ptdp_train_config c = config(dp, 1);
    ptdp_train_result res;
    ptdp_launch_result lr;
    ptdp_launch_opts o = { 0 };
    o.result = &lr;
    if (ptdp_state_init(&r->final, &c.model, c.optimizer, false) != 0) {
        snprintf(msg, len, "host out of memory");
        return PTDP_ENOMEM;
    }
    c.final_state = &r->final;
    int rc = ptdp_train(&c, &o, NULL, NULL, &res, msg, len);
    if (rc == 0) {
        for (int s = 0; s < STEPS; s++)
            r->loss[s] = res.log[s].loss;
        double sent = 0;
        for (int d = 0; d < dp; d++)
            sent += lr.devices[d].comm.total_sent;
        r->bytes_per_step = sent / dp / STEPS;
        r->optim_bytes = lr.devices[0].mem.peak[PTDP_MEM_OPTIM];
        ptdp_train_result_free(&res);
    }
    ptdp_launch_result_free(&lr);
    return rc;
}

/* -------------------------------------------------------- your ZeRO run */

/* What rank r saw after the first step, element by element, against the
 * update computed the plain way (all-reduce, AdamW on everything). */
typedef struct {
    long bad_own, bad_other;          /* first wrong element in / outside my shard, or -1 */
    double got_own, want_own, got_other, want_other, old_other;
    bool other_unchanged;             /* every wrong element outside my shard kept its old value */
} first_step_view;

typedef struct {
    int dp, micro_batches;
    size_t numel;
    size_t off[MAX_DP], len[MAX_DP];
    size_t optim_bytes[MAX_DP];       /* "optim" in use after lesson_zero_init */
    double bytes[MAX_DP];             /* sent inside lesson_zero_step, all steps */
    double loss_sum[STEPS][MAX_DP];
    first_step_view first[MAX_DP];
    ptdp_real *params_of[MAX_DP];     /* every rank's flat parameters at the end */
    ptdp_state final;                 /* rank 0's, as tensors */
} zero_run;

typedef struct {
    zero_run *x;
    lesson_zero *z;
    long step;
} step_ctx;

/* The plain update of step 1, for comparison: all-reduce a copy of the
 * gradient, AdamW on a copy of all the parameters with fresh moments. */
static int plain_first_step(ptdp_device *dev, const lesson_zero *z, ptdp_real *w_new)
{
    size_t n = z->numel, bytes = n * sizeof(ptdp_real);
    ptdp_real *g = ptdp_alloc(dev, bytes, PTDP_MEM_OTHER, "check.g");
    ptdp_real *m = ptdp_alloc(dev, bytes, PTDP_MEM_OTHER, "check.m");
    ptdp_real *v = ptdp_alloc(dev, bytes, PTDP_MEM_OTHER, "check.v");
    int rc = g && m && v ? PTDP_OK : PTDP_ENOMEM;
    if (rc == 0)
        rc = ptdp_all_reduce(z->dp, z->g, g, n, PTDP_REAL, PTDP_SUM);
    if (rc == 0) {
        memcpy(w_new, z->w, bytes);
        ptdp_adamw_step(w_new, g, m, v, n, &z->adamw, 1);
    }
    ptdp_free(dev, v);
    ptdp_free(dev, m);
    ptdp_free(dev, g);
    return rc;
}

static void compare_first_step(const lesson_zero *z, const ptdp_real *w_old, const ptdp_real *w_want,
                               first_step_view *f)
{
    *f = (first_step_view){ .bad_own = -1, .bad_other = -1, .other_unchanged = true };
    for (size_t i = 0; i < z->numel; i++) {
        if (fabs((double)z->w[i] - (double)w_want[i]) <= 1e-12 * fmax(1.0, fabs((double)w_want[i])))
            continue;   /* the same, up to the order of the sum over ranks */
        bool own = i >= z->off && i < z->off + z->len;
        if (own && f->bad_own < 0) {
            f->bad_own = (long)i;
            f->got_own = z->w[i];
            f->want_own = w_want[i];
        } else if (!own) {
            if (f->bad_other < 0) {
                f->bad_other = (long)i;
                f->got_other = z->w[i];
                f->want_other = w_want[i];
                f->old_other = w_old[i];
            }
            if (z->w[i] != w_old[i])
                f->other_unchanged = false;
        }
    }
}

/* ---------------------------------------------- guarded moments */

/* The classic mistake of blank 4 is to index the moments like the
 * parameters, exp_avg + off: they hold len elements, for the shard alone,
 * so every rank but rank 0 writes past their end, over the arena's next
 * block, and the run dies far away ("not a live block").  So during your
 * step the moments are host copies with GUARD bytes of a known pattern on
 * each side, as wide as the whole buffer (an offset of up to numel stays
 * inside them): an overrun is found, and told, before anything breaks. */
enum { GUARD_BYTE = 0xA5 };

typedef struct {
    ptdp_real *arena;          /* the student's block, put back afterwards */
    unsigned char *host;       /* guard | len elements | guard             */
    size_t guard;              /* bytes on each side                       */
} guarded;

static ptdp_real *guard_begin(guarded *gd, ptdp_real *moments, size_t len, size_t numel)
{
    gd->arena = moments;
    gd->guard = (numel + 1) * sizeof(ptdp_real);
    gd->host = malloc(2 * gd->guard + len * sizeof(ptdp_real));
    if (gd->host == NULL)
        return NULL;
    memset(gd->host, GUARD_BYTE, 2 * gd->guard + len * sizeof(ptdp_real));
    ptdp_real *inside = (ptdp_real *)(void *)(gd->host + gd->guard);
    memcpy(inside, moments, len * sizeof(ptdp_real));
    return inside;
}

/* Copy the moments back into the arena; where (in elements from the
 * moments' first) the first guard byte was overwritten, or 0 if none:
 * negative before the start, >= len past the end. */
static long guard_end(guarded *gd, size_t len, bool *overrun)
{
    const unsigned char *h = gd->host;
    const size_t body = len * sizeof(ptdp_real);
    long where = 0;
    *overrun = false;
    for (size_t i = 0; i < gd->guard && !*overrun; i++)
        if (h[i] != GUARD_BYTE) {
            *overrun = true;
            where = -(long)((gd->guard - i + sizeof(ptdp_real) - 1) / sizeof(ptdp_real));
        }
    for (size_t i = 0; i < gd->guard && !*overrun; i++)
        if (h[gd->guard + body + i] != GUARD_BYTE) {
            *overrun = true;
            where = (long)(len + i / sizeof(ptdp_real));
        }
    memcpy(gd->arena, h + gd->guard, body);
    free(gd->host);
    gd->host = NULL;
    return where;
}

/* The schedule's OPTIMIZER_STEP: your step, its bytes, then fresh gradients. */
static int optimizer_step(ptdp_device *dev, void *arg)
{
    step_ctx *c = arg;
    lesson_zero *z = c->z;
    int r = ptdp_comm_rank(z->dp), rc;
    ptdp_real *w_old = NULL, *w_want = NULL;
    if (c->step == 1) {
        w_old = ptdp_alloc(dev, z->numel * sizeof(ptdp_real), PTDP_MEM_OTHER, "check.w_old");
        w_want = ptdp_alloc(dev, z->numel * sizeof(ptdp_real), PTDP_MEM_OTHER, "check.w_want");
        if (w_old == NULL || w_want == NULL)
            return PTDP_ENOMEM;
        memcpy(w_old, z->w, z->numel * sizeof(ptdp_real));
        if ((rc = plain_first_step(dev, z, w_want)) != 0)
            return rc;
    }
    double sent0 = dev->stats.total_sent;
    guarded gm, gv;
    ptdp_real *exp_avg = z->exp_avg, *exp_avg_sq = z->exp_avg_sq;
    z->exp_avg = guard_begin(&gm, exp_avg, z->len, z->numel);
    z->exp_avg_sq = guard_begin(&gv, exp_avg_sq, z->len, z->numel);
    if (z->exp_avg == NULL || z->exp_avg_sq == NULL) {
        free(gm.host);
        free(gv.host);
        z->exp_avg = exp_avg;
        z->exp_avg_sq = exp_avg_sq;
        ptdp_free(dev, w_want);
        ptdp_free(dev, w_old);
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    }
    rc = lesson_zero_step(z, c->step);
    bool over_m, over_v;
    long at_m = guard_end(&gm, z->len, &over_m), at_v = guard_end(&gv, z->len, &over_v);
    z->exp_avg = exp_avg;
    z->exp_avg_sq = exp_avg_sq;
    if (over_m || over_v) {
        ptdp_free(dev, w_want);
        ptdp_free(dev, w_old);
        return tutorial_device_wrong(dev, "rank %d, step %ld: your step wrote outside its moments: %s[%ld] "
                                     "(they hold elements 0 .. %zu, for the %zu elements of shard [%zu, %zu)).\n"
                                     "The moments belong to your shard alone, so they are indexed from 0: pass "
                                     "z->exp_avg and z->exp_avg_sq\nto AdamW as they are, not exp_avg + off — "
                                     "only w and g are whole buffers, read at w + off and\ng + off (blank 4).",
                                     r, c->step, over_m ? "exp_avg" : "exp_avg_sq", over_m ? at_m : at_v,
                                     z->len - 1, z->len, z->off, z->off + z->len);
    }
    c->x->bytes[r] += dev->stats.total_sent - sent0;
    if (rc == 0 && c->step == 1)
        compare_first_step(z, w_old, w_want, &c->x->first[r]);
    ptdp_free(dev, w_want);
    ptdp_free(dev, w_old);
    memset(z->g, 0, z->numel * sizeof(ptdp_real));
    return rc;
}

static int zero_device(ptdp_device *dev, void *arg)
{
    zero_run *x = arg;
    ptdp_train_config c = config(x->dp, x->micro_batches);
    ptdp_mesh mesh;
    ptdp_model model;
    ptdp_schedule *sched = NULL;
    int rc = ptdp_mesh_init(dev, x->dp, 1, 1, &mesh);
    if (rc != 0)
        return rc;
    if ((rc = ptdp_model_init(dev, &model, &c.model, &mesh, NULL, SEED, 0.0)) != 0)
        return rc;
    if (model.numel > NUMEL_MAX)
        return ptdp_fail(dev, PTDP_EINVAL, "the check's model has %zu parameters, more than its %d",
                         model.numel, NUMEL_MAX);
    if ((rc = ptdp_schedule_create("gpipe", 1, x->micro_batches, &sched)) != 0)
        return ptdp_fail(dev, rc, "cannot build the schedule");
    int r = mesh.dp_rank;
    x->numel = model.numel;

    lesson_zero z = { .dp = mesh.dp_comm, .w = model.flat_w, .g = model.flat_g, .numel = model.numel,
                      .adamw = adamw_config() };
    ptdp_mem_stats ms;
    rc = lesson_zero_init(dev, &z);
    x->off[r] = z.off;
    x->len[r] = z.len;
    ptdp_arena_stats(dev->arena, &ms);
    x->optim_bytes[r] = ms.current[PTDP_MEM_OPTIM];

    size_t shard_off, shard_len;
    ptdp_share(B, x->dp, r, &shard_off, &shard_len);
    for (long s = 0; rc == 0 && s < STEPS; s++) {
        step_ctx ctx = { .x = x, .z = &z, .step = s + 1 };
        ptdp_pp_step st = {
            .model = &model, .schedule = sched, .step = s,
            .shard_first = s * (int64_t)B + (int64_t)shard_off, .shard_rows = (int)shard_len,
            .micro_batches = x->micro_batches, .loss_scale = 1.0 / B,
            .optimizer_step = optimizer_step, .optimizer_ctx = &ctx,
        };
        rc = ptdp_pp_run_step(dev, &st);
        x->loss_sum[s][r] = st.loss_sum;
    }
    if (rc == 0) {
        memcpy(x->params_of[r], model.flat_w, model.numel * sizeof(ptdp_real));
        if (r == 0)
            for (int i = 0; i < model.nparams; i++)
                ptdp_param_to_state(&model.params[i], model.params[i].w,
                                    ptdp_state_find(&x->final, model.params[i].name));
    }
    lesson_zero_free(dev, &z);
    ptdp_schedule_destroy(sched);
    ptdp_model_free(dev, &model);
    ptdp_mesh_free(&mesh);
    return rc;
}

/* ------------------------------------------------------------- verdicts */

/* Step 1 was checked element by element; a later step went wrong. */
static void note_later_steps(void)
{
    tutorial_note("Step 1 was right.  Do the later steps pass their own step number to AdamW (its\n"
                  "bias correction depends on it), and keep the moments from one step to the next?");
}

/* Say what went wrong in the first step, from each rank's view of it. */
static bool explain_first_step(const zero_run *x, const char *what)
{
    for (int r = 0; r < x->dp; r++) {
        const first_step_view *f = &x->first[r];
        if (f->bad_own >= 0) {
            tutorial_wrong("%s: after step 1, rank %d's own shard [%zu, %zu) is wrong: element %ld is %.10g, "
                           "the plain update gives %.10g.", what, r, x->off[r], x->off[r] + x->len[r],
                           f->bad_own, f->got_own, f->want_own);
            tutorial_note("Your shard must be updated with the gradient SUMMED over all ranks (blank 3:\n"
                          "reduce-scatter, PTDP_SUM), by AdamW on exactly its elements: parameters\n"
                          "w + off, gradient g + off, your moments, len of them, and the step number (blank 4).");
            return true;
        }
    }
    for (int r = 0; r < x->dp; r++) {
        const first_step_view *f = &x->first[r];
        if (f->bad_other >= 0) {
            tutorial_wrong("%s: after step 1, rank %d's element %ld (outside its own shard) is %.10g; the new "
                           "value is %.10g.", what, r, f->bad_other, f->got_other, f->want_other);
            if (f->other_unchanged)
                tutorial_note("Rank %d still holds the old values there: every rank updated only its own\n"
                              "shard, and the ranks never shared the results (blank 5: all-gather).", r);
            else
                tutorial_note("Every rank must end the step with every shard as its owner updated it\n"
                              "(blank 5: all-gather the parameters, in place).");
            return true;
        }
    }
    return false;
}

static bool check_config(int dp, int m, const reference *base, const reference *plain)
{
    char what[64], b1[32], b2[32], b3[32];
    snprintf(what, sizeof what, "dp %d, %d micro-batch%s per rank", dp, m, m == 1 ? "" : "es");
    ptdp_train_config c = config(dp, m);
    zero_run *x = calloc(1, sizeof *x);
    bool ok = false;
    if (x == NULL || ptdp_state_init(&x->final, &c.model, c.optimizer, false) != 0) {
        tutorial_wrong("%s: host out of memory", what);
        free(x);
        return false;
    }
    x->dp = dp;
    x->micro_batches = m;
    for (int r = 0; r < dp; r++)
        if ((x->params_of[r] = calloc(NUMEL_MAX, sizeof(ptdp_real))) == NULL) {
            tutorial_wrong("%s: host out of memory", what);
            goto done;
        }
    int rc = tutorial_launch(what, dp, zero_device, x);
    if (rc != 0 && x->numel == 0)
        goto done;

    /* 1. The shards. */
    for (int r = 0; r < dp; r++) {
        size_t off, len;
        ptdp_share(x->numel, dp, r, &off, &len);
        if (x->off[r] != off || x->len[r] != len) {
            if (rc == 0)
                tutorial_wrong("%s: rank %d's shard is [%zu, %zu); the chunked collectives give rank %d "
                               "[%zu, %zu) (ptdp_share: %zu elements on %d ranks, the first %zu mod %d = %zu get one "
                               "element more).", what, r, x->off[r], x->off[r] + x->len[r], r, off, off + len,
                               x->numel, dp, x->numel, dp, x->numel % (size_t)dp);
            goto done;
        }
    }
    if (rc != 0)
        goto done;
    /* 2. The memory. */
    for (int r = 0; r < dp; r++) {
        size_t want = 2 * x->len[r] * sizeof(ptdp_real);
        if (x->optim_bytes[r] != want) {
            tutorial_wrong("%s: rank %d keeps %s of optimizer state; AdamW's two moments of its shard "
                           "of %zu elements are 2 x %zu x %zu bytes = %s.", what, r,
                           ptdp_format_bytes((double)x->optim_bytes[r], b1, sizeof b1), x->len[r], x->len[r],
                           sizeof(ptdp_real), ptdp_format_bytes((double)want, b2, sizeof b2));
            if (x->optim_bytes[r] >= 2 * x->numel * sizeof(ptdp_real))
                tutorial_note("That is the whole model's: the point of ZeRO-1 is that a rank keeps the\n"
                              "moments of the elements it updates only (blank 2).");
            goto done;
        }
    }
    /* 3. The first step. */
    if (explain_first_step(x, what))
        goto done;
    /* 4. The run. */
    for (int r = 1; r < dp; r++)
        if (memcmp(x->params_of[0], x->params_of[r], x->numel * sizeof(ptdp_real)) != 0) {
            tutorial_wrong("%s: after %d steps, rank %d's parameters differ from rank 0's: the replicas "
                           "drifted apart.", what, STEPS, r);
            goto done;
        }
    for (int s = 0; s < STEPS; s++) {
        double sum = 0;
        for (int r = 0; r < dp; r++)
            sum += x->loss_sum[s][r];
        if (!ptdp_check_value(sum / B, base->loss[s], PTDP_TOLERANCE)) {
            tutorial_wrong("%s: the loss of step %d is %.12g; one device's is %.12g.", what, s + 1, sum / B,
                           base->loss[s]);
            if (s > 0)
                note_later_steps();
            goto done;
        }
    }
    ptdp_check_report rep, rep_dp;
    if (!ptdp_check_states(&x->final, &base->final, PTDP_TOLERANCE, &rep)) {
        tutorial_wrong("%s: after %d steps, %s differs from one device's by %.3g.", what, STEPS, rep.worst,
                       rep.max_abs);
        note_later_steps();
        goto done;
    }
    if (!ptdp_check_states(&x->final, &plain->final, PTDP_TOLERANCE, &rep_dp)) {
        tutorial_wrong("%s: after %d steps, %s differs from plain DP's by %.3g.", what, STEPS, rep_dp.worst,
                       rep_dp.max_abs);
        goto done;
    }
    /* 5. The bytes. */
    double S = (double)x->numel * sizeof(ptdp_real), formula = 2.0 * (dp - 1) / dp * S, sent = 0;
    for (int r = 0; r < dp; r++)
        sent += x->bytes[r];
    sent /= (double)dp * STEPS;
    if (fabs(sent - formula) > 1e-9 * formula) {
        tutorial_wrong("%s: each rank sent %s per step in your step; 2(N-1)/N S = %s (S = %s of gradients).",
                       what, ptdp_format_bytes(sent, b1, sizeof b1), ptdp_format_bytes(formula, b2, sizeof b2),
                       ptdp_format_bytes(S, b3, sizeof b3));
        if (fabs(sent - 1.5 * formula) < 1e-9 * formula)
            tutorial_note("That is an all-reduce (2(N-1)/N S) plus an all-gather: the all-reduce gives every\n"
                          "rank the whole summed gradient, but you use only your shard of it.  A\n"
                          "reduce-scatter gives exactly that shard, for half the bytes (blank 3).");
        goto done;
    }
    tutorial_ok("%s: %d AdamW steps equal to one device (largest difference %.1e) and to plain DP (%.1e)",
                what, STEPS, rep.max_abs, rep_dp.max_abs);
    char line[256];
    size_t n = (size_t)snprintf(line, sizeof line, "optimizer state per rank: plain DP %s (2P), yours",
                                ptdp_format_bytes((double)plain->optim_bytes, b1, sizeof b1));
    for (int r = 0; r < dp; r++)
        n += (size_t)snprintf(line + n, sizeof line - n, "%s %s", r ? "," : "",
                              ptdp_format_bytes((double)x->optim_bytes[r], b1, sizeof b1));
    snprintf(line + n, sizeof line - n, " (2P/%d)", dp);
    tutorial_note("%s", line);
    tutorial_note("bytes sent per rank and step: plain DP %s, yours %s; 2(N-1)/N S = %s",
                  ptdp_format_bytes(plain->bytes_per_step, b1, sizeof b1), ptdp_format_bytes(sent, b2, sizeof b2),
                  ptdp_format_bytes(formula, b3, sizeof b3));
    ok = true;
done:
    for (int r = 0; r < dp; r++)
        free(x->params_of[r]);
    ptdp_state_free(&x->final);
    free(x);
    return ok;
}

int main(void)
{
    tutorial_begin("06", "ZeRO-1: the optimizer state sharded across data parallelism");
    static reference base, plain[MAX_DP + 1];
    char msg[PTDP_MSG_MAX];
    if (run_reference(1, &base, msg, sizeof msg) != 0) {
        tutorial_wrong("the single-device baseline (ptdp_train, dp 1) failed: %s", msg);
        return tutorial_end();
    }
    static const int configs[][2] = { { 2, 1 }, { 3, 2 }, { 4, 1 } };
    bool ok = true;
    for (size_t k = 0; ok && k < sizeof configs / sizeof configs[0]; k++) {
        int dp = configs[k][0];
        if (run_reference(dp, &plain[dp], msg, sizeof msg) != 0) {
            tutorial_wrong("plain DP (ptdp_train, dp %d) failed: %s", dp, msg);
            break;
        }
        ok = check_config(dp, configs[k][1], &base, &plain[dp]);
        ptdp_state_free(&plain[dp].final);
    }
    ptdp_state_free(&base.final);
    return tutorial_end();
}
