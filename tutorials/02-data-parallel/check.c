/*
 * check.c — lesson 02: does your data-parallel step train exactly like one device?
 *
 * The baseline is ptdp_train itself with dp = tp = pp = 1: the whole batch
 * of B = 10 samples on one device, one micro-batch, plain SGD.  Your
 * lesson_dp_gradients then trains the same model for the same steps on
 *
 *   dp 1, M 2      5 + 5 samples          gradient accumulation
 *   dp 2, M 1      5 | 5                  the all-reduce
 *   dp 3, M 2      2+2 | 2+1 | 2+1        unequal shards AND micro-batches
 *   dp 4, M 1      3 | 3 | 2 | 2          unequal shards
 *
 * and each must match the baseline in double precision to 1e-10: the loss
 * of every step, and every parameter after the last one.  When one does not,
 * the check compares your first step's gradient with the baseline's (found
 * from the baseline's first SGD step: g = (w0 - w1) / lr) and says how it
 * differs: a whole factor (which scale went wrong), another direction (which
 * samples weigh wrong), or replicas that disagree (no all-reduce).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lesson.h"
#include "tutorial.h"

#include "ptdp/error.h"
#include "ptdp/mesh.h"
#include "ptdp/optim.h"
#include "ptdp/state.h"
#include "ptdp/train.h"
#include "ptdp/models.h"
#include "ptdp/mlp.h"

enum { B = 10, STEPS = 3, MAX_DP = 4, NUMEL_MAX = 4096 };
static const double LR = 0.5;
static const uint64_t SEED = 7;

static ptdp_train_config baseline_config(int steps)
{
    ptdp_train_config c = {
        .model = PTDP_MLP_CONFIG( .d_in = 6, .hidden = 8, .ffn = 16, .layers = 2, .classes = 5 ),
        .dp = 1, .tp = 1, .pp = 1, .micro_batches = 1, .batch = B, .steps = steps,
        .optimizer = PTDP_OPT_SGD, .lr = LR, .bucket_mb = 1, .seed = SEED,
    };
    return c;
}

/* ------------------------------------------------------------ the baseline */

typedef struct {
    double loss[STEPS];      /* mean loss of each step                 */
    ptdp_state final;        /* parameters after STEPS steps           */
    ptdp_state grad;         /* the gradient of step 1                 */
} baseline;

static int run_baseline(baseline *b, char *msg, size_t len)
{
    ptdp_train_config c = baseline_config(STEPS);
    ptdp_state init, one;
    int rc = tutorial_train_baseline(c, b->loss, &b->final, msg, len);
    if (rc != 0)
        return rc;
    rc = ptdp_state_init(&b->grad, &c.model, c.optimizer, false);
    if (rc == 0)
        rc = ptdp_state_init(&init, &c.model, c.optimizer, false);
    if (rc == 0)
        rc = ptdp_state_init(&one, &c.model, c.optimizer, false);
    if (rc != 0) {
        snprintf(msg, len, "host out of memory");
        return rc;
    }

    /* One step alone: g = (w0 - w1) / lr for plain SGD. */
    c = baseline_config(1);
    c.init_state = &init;
    c.final_state = &one;
    if ((rc = ptdp_train(&c, NULL, NULL, NULL, NULL, msg, len)) != 0)
        return rc;
    for (int i = 0; i < b->grad.ntensors; i++) {
        size_t n = (size_t)b->grad.t[i].rows * (size_t)b->grad.t[i].cols;
        for (size_t k = 0; k < n; k++)
            b->grad.t[i].data[k] = (ptdp_real)(((double)init.t[i].data[k] - (double)one.t[i].data[k]) / LR);
    }
    ptdp_state_free(&init);
    ptdp_state_free(&one);
    return 0;
}

/* ---------------------------------------------------------- your DP run */

typedef struct {
    int dp, micro_batches;
    double loss_sum[STEPS][MAX_DP];
    ptdp_state grad;               /* dp rank 0's gradient of step 1          */
    ptdp_state final;              /* dp rank 0's parameters at the end       */
    ptdp_real *grad_of[MAX_DP];    /* every rank's flat gradient of step 1    */
    ptdp_real *params_of[MAX_DP];  /* every rank's flat parameters at the end */
    size_t numel;
} dp_run;

static void to_state(ptdp_model *m, bool grads, ptdp_state *s)
{
    for (int i = 0; i < m->nparams; i++) {
        const ptdp_param *p = &m->params[i];
        ptdp_param_to_state(p, grads ? p->g : p->w, ptdp_state_find(s, p->name));
    }
}

static int dp_device(ptdp_device *dev, void *arg)
{
    dp_run *x = arg;
    ptdp_train_config c = baseline_config(STEPS);
    ptdp_mesh mesh;
    ptdp_model model;
    ptdp_mlp_data data;
    int rc = ptdp_mesh_init(dev, x->dp, 1, 1, &mesh);
    if (rc != 0)
        return rc;
    if ((rc = ptdp_model_init(dev, &model, &c.model, &mesh, NULL, SEED, 0.0)) != 0)
        return rc;
    if ((rc = ptdp_mlp_data_init(dev, &data, SEED, ptdp_mlp(&c.model)->d_in, ptdp_mlp(&c.model)->classes)) != 0)
        return rc;
    int r = mesh.dp_rank;
    if (model.numel > NUMEL_MAX)
        return ptdp_fail(dev, PTDP_EINVAL, "the check's model has %zu parameters, more than its %d",
                         model.numel, NUMEL_MAX);
    if (r == 0)
        x->numel = model.numel;     /* the same on every replica */
    lesson_dp d = { .model = &model, .data = &data, .dp = mesh.dp_comm, .global_batch = B,
                    .micro_batches = x->micro_batches };
    ptdp_sgd_config sgd = { .lr = LR, .momentum = 0, .weight_decay = 0 };

    for (long s = 0; rc == 0 && s < STEPS; s++) {
        rc = lesson_dp_gradients(dev, &d, s, &x->loss_sum[s][r]);
        if (rc != 0)
            break;
        if (s == 0) {
            memcpy(x->grad_of[r], model.flat_g, model.numel * sizeof(ptdp_real));
            if (r == 0)
                to_state(&model, true, &x->grad);
        }
        /* The optimizer step, as ptdp_train takes it; then a fresh gradient. */
        ptdp_sgd_step(model.flat_w, model.flat_g, NULL, model.numel, &sgd, s + 1);
        memset(model.flat_g, 0, model.numel * sizeof(ptdp_real));
    }
    if (rc == 0) {
        memcpy(x->params_of[r], model.flat_w, model.numel * sizeof(ptdp_real));
        if (r == 0)
            to_state(&model, false, &x->final);
    }
    ptdp_mlp_data_free(dev, &data);
    ptdp_model_free(dev, &model);
    ptdp_mesh_free(&mesh);
    return rc;
}

/* ---------------------------------------------------------------- verdicts */

/* g_yours = rho * g_base + residual: how far, and in what way, they differ. */
static void explain_gradient(const dp_run *x, const baseline *b)
{
    double dot = 0, bb = 0, yy = 0;
    for (int i = 0; i < b->grad.ntensors; i++) {
        size_t n = (size_t)b->grad.t[i].rows * (size_t)b->grad.t[i].cols;
        for (size_t k = 0; k < n; k++) {
            double gy = x->grad.t[i].data[k], gb = b->grad.t[i].data[k];
            dot += gy * gb;
            bb += gb * gb;
            yy += gy * gy;
        }
    }
    double rho = dot / bb, resid = sqrt(fmax(0.0, yy - rho * rho * bb) / bb);
    int dp = x->dp, m = x->micro_batches;
    if (yy == 0) {
        tutorial_note("Your gradient of step 1 is zero: did the backward run on any sample?");
        return;
    }
    if (resid > 1e-6) {
        tutorial_note("Your gradient of step 1 points in another direction than the baseline's (the part");
        tutorial_note("not along it is %.2g of its length): some samples weigh more than others.", resid);
        tutorial_note("Every sample's loss gradient must be scaled by the same 1/B, whatever the size");
        tutorial_note("of its micro-batch or shard (here they differ), and the ranks' parts added.");
        return;
    }
    tutorial_note("Your gradient of step 1 is %.4g times the baseline's.", rho);
    if (fabs(rho - m) < 1e-6 && m > 1)
        tutorial_note("M = %d micro-batches each scaled by 1/(its own size) add up to M means: scale by 1/B.", m);
    else if (fabs(rho - 1.0 / dp) < 1e-6)
        tutorial_note("That is 1/dp: the ranks' parts were averaged, but the 1/B scale already made their "
                      "SUM the mean.");
    else if (fabs(rho - dp) < 1e-6 || fabs(rho - (double)dp * m) < 1e-6)
        tutorial_note("Each rank scaled by its own shard or micro-batch size, then the ranks summed: scale by "
                      "1/B, the global batch.");
    else
        tutorial_note("The 1/B scale of every sample, summed over micro-batches and ranks, gives a factor of 1.");
}

static bool check_config(int dp, int m, const baseline *b)
{
    char what[64];
    snprintf(what, sizeof what, "dp %d, %d micro-batch%s per rank", dp, m, m == 1 ? "" : "es");
    ptdp_train_config c = baseline_config(STEPS);
    dp_run *x = calloc(1, sizeof *x);
    bool ok = false;
    if (x == NULL || ptdp_state_init(&x->grad, &c.model, c.optimizer, false) != 0 ||
        ptdp_state_init(&x->final, &c.model, c.optimizer, false) != 0) {
        tutorial_wrong("%s: host out of memory", what);
        free(x);
        return false;
    }
    x->dp = dp;
    x->micro_batches = m;
    for (int r = 0; r < dp; r++) {
        x->grad_of[r] = calloc(NUMEL_MAX, sizeof(ptdp_real));
        x->params_of[r] = calloc(NUMEL_MAX, sizeof(ptdp_real));
        if (x->grad_of[r] == NULL || x->params_of[r] == NULL) {
            tutorial_wrong("%s: host out of memory", what);
            goto done;
        }
    }
    if (tutorial_launch(what, dp, dp_device, x) != 0)
        goto done;

    /* The samples: at step 1 the parameters are still the same everywhere,
     * so the loss summed over the ranks is the baseline's iff the shards
     * tile the step's B samples exactly once. */
    double sum = 0;
    for (int r = 0; r < dp; r++)
        sum += x->loss_sum[0][r];
    if (!ptdp_check_value(sum / B, b->loss[0], PTDP_TOLERANCE)) {
        tutorial_wrong("%s: the loss of step 1, summed over the ranks and divided by B, is %.12g; the "
                       "baseline's is %.12g.", what, sum / B, b->loss[0]);
        tutorial_note("The parameters are still equal at step 1, so the ranks did not see the step's B");
        tutorial_note("samples exactly once: the shards must tile [step B, (step+1) B) (blank 1).");
        for (int r = 0; r < dp; r++)
            tutorial_note("rank %d: loss sum %.6g", r, x->loss_sum[0][r]);
        goto done;
    }
    /* The replicas: every rank must hold the same gradient, bit for bit. */
    for (int r = 1; r < dp; r++)
        if (memcmp(x->grad_of[0], x->grad_of[r], x->numel * sizeof(ptdp_real)) != 0) {
            tutorial_wrong("%s: after step 1, rank %d's gradient differs from rank 0's.", what, r);
            tutorial_note("Each rank holds the gradient of its own samples only, until the ranks combine");
            tutorial_note("them (blank 3); then every replica takes the same step and they stay equal.");
            goto done;
        }
    for (int r = 1; r < dp; r++)
        if (memcmp(x->params_of[0], x->params_of[r], x->numel * sizeof(ptdp_real)) != 0) {
            tutorial_wrong("%s: after %d steps, rank %d's parameters differ from rank 0's: the replicas "
                           "drifted apart.", what, STEPS, r);
            goto done;
        }
    /* The losses of the later steps follow from the gradients. */
    for (int s = 1; s < STEPS; s++) {
        sum = 0;
        for (int r = 0; r < dp; r++)
            sum += x->loss_sum[s][r];
        if (!ptdp_check_value(sum / B, b->loss[s], PTDP_TOLERANCE)) {
            tutorial_wrong("%s: the loss of step %d is %.12g; the baseline's is %.12g.", what, s + 1,
                           sum / B, b->loss[s]);
            explain_gradient(x, b);
            goto done;
        }
    }
    /* The parameters: equal to the baseline's to 1e-10. */
    ptdp_check_report rep;
    if (!ptdp_check_states(&x->final, &b->final, PTDP_TOLERANCE, &rep)) {
        tutorial_wrong("%s: after %d steps, %s differs from the baseline by %.3g (relative %.3g; allowed %g).",
                       what, STEPS, rep.worst, rep.max_abs, rep.max_rel, PTDP_TOLERANCE);
        explain_gradient(x, b);
        goto done;
    }
    tutorial_ok("%s: %d steps equal to one device (largest difference %.1e), replicas identical",
                what, STEPS, rep.max_abs);
    ok = true;
done:
    for (int r = 0; r < dp; r++) {
        free(x->grad_of[r]);
        free(x->params_of[r]);
    }
    ptdp_state_free(&x->grad);
    ptdp_state_free(&x->final);
    free(x);
    return ok;
}

int main(void)
{
    tutorial_begin("02", "data parallelism: the gradient all-reduce and its 1/B");

    static baseline base;
    char msg[PTDP_MSG_MAX];
    if (run_baseline(&base, msg, sizeof msg) != 0) {
        tutorial_wrong("the single-device baseline (ptdp_train, dp 1) failed: %s", msg);
        return tutorial_end();
    }
    tutorial_ok("the baseline: ptdp_train on one device, B = %d, SGD lr %g: loss %.6f -> %.6f in %d steps",
                B, LR, base.loss[0], base.loss[STEPS - 1], STEPS);

    static const int configs[][2] = { { 1, 2 }, { 2, 1 }, { 3, 2 }, { 4, 1 } };
    bool ok = true;
    for (size_t k = 0; ok && k < sizeof configs / sizeof configs[0]; k++)
        ok = check_config(configs[k][0], configs[k][1], &base);

    ptdp_state_free(&base.final);
    ptdp_state_free(&base.grad);
    return tutorial_end();
}
