/*
 * check.c — lesson 04b: does your recomputation keep only the input, and
 * pay exactly one more forward?
 *
 * Your lesson_forward and lesson_backward replace the model's own forward
 * and backward (a copy of its ptdp_model_ops table, include/ptdp/model.h)
 * under ptdp's pipeline executor: p = 4 stages of one block, 1F1B, 8
 * micro-batches, 3 SGD steps, dropout 0.1.  The plain stage they call
 * (lesson_plain_forward, …) is the model's own, watched by the check.
 *
 *   1. after your forward the arena holds exactly the stage input's bytes
 *      more (category "acts"): your copy, and nothing else — not the
 *      executor's tensor (freed when the forward returns), not the stage's
 *      output (the next block's checkpoint, not this one's), not the rest;
 *   2. your backward runs the plain forward once, from your copy, before
 *      the plain backward, and frees the copy;
 *   3. the run trains exactly like ptdp_train on one device: every loss
 *      and every parameter to 1e-10, in double (the recomputed dropout
 *      masks must be the first forward's);
 *   4. the price, measured: the peak of "acts" per stage without and with
 *      recomputation, and the compute on the devices' virtual clocks
 *      ("ideal" profile): with recomputation it grows by exactly the cost
 *      of the first forwards — one more forward per micro-batch.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lesson.h"
#include "tutorial.h"

#include "ptdp/clock.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/mesh.h"
#include "ptdp/model.h"
#include "ptdp/models.h"
#include "ptdp/optim.h"
#include "ptdp/pp.h"
#include "ptdp/schedule.h"
#include "ptdp/state.h"
#include "ptdp/train.h"
#include "ptdp/mlp.h"

enum { P_RUN = 4, M_RUN = 8, B = 16, STEPS = 3 };
static const double LR = 0.5, DROPOUT = 0.1;
static const uint64_t SEED = 17;

static ptdp_train_config run_config(int pp, int m)
{
    ptdp_train_config c = {
        .model = PTDP_MLP_CONFIG( .d_in = 6, .hidden = 8, .ffn = 16, .layers = P_RUN, .classes = 5 ),
        .dp = 1, .tp = 1, .pp = pp, .micro_batches = m, .batch = B, .steps = STEPS,
        .optimizer = PTDP_OPT_SGD, .lr = LR, .bucket_mb = 1, .seed = SEED, .dropout = DROPOUT,
        .schedule = ptdp_schedule_find("1f1b"),
    };
    return c;
}

/* ------------------------------------------------ the plain stage, watched */

/* Per device thread: where its micro-batch is, and what happened. */
typedef enum { OUTSIDE, IN_FORWARD, IN_BACKWARD } phase;

typedef struct {
    const ptdp_model_ops *plain;   /* the model's own table                  */
    phase now;
    lesson_kept *kept;             /* the micro-batch in your function        */
    int forwards;                  /* plain forwards in this call of yours     */
    bool from_copy;                /* the backward's forward read kept->input */
    double loss_sum;               /* the first forward's loss (last stage)   */
    double forward_cost;           /* virtual compute of that forward         */
} watch;

static _Thread_local watch w;

static ptdp_tensor stage_input(const ptdp_model *m, const ptdp_batch *b, ptdp_tensor input)
{
    return m->first_stage ? b->x : input;
}

int lesson_plain_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *full, const ptdp_batch *b,
                         ptdp_tensor input, long step, ptdp_tensor *out)
{
    if (w.now == IN_BACKWARD) {
        if (w.forwards > 0)
            return tutorial_device_wrong(dev, "stage %d: your backward ran the forward a second time.  Once "
                                         "brings back everything the\nbackward needs; twice only costs another "
                                         "forward (and loses the first one's\nactivations).  Blank 3: one call.",
                                         m->mesh->pp_rank);
        w.from_copy = w.kept != NULL && w.kept->input.data != NULL &&
                      stage_input(m, b, input).data == w.kept->input.data;
    }
    if (full->alive)
        return tutorial_device_wrong(dev, "stage %d: the plain forward was asked to fill activations that are "
                                     "still alive: the\nforward ran twice on one micro-batch without a backward "
                                     "between.", m->mesh->pp_rank);
    w.forwards++;
    double c0 = dev->clock.compute_s;
    int rc = w.plain->forward(dev, m, full, b, input, step, false, out);
    if (w.now == IN_FORWARD) {
        w.loss_sum = full->loss_sum;
        w.forward_cost = dev->clock.compute_s - c0;
    }
    return rc;
}

int lesson_plain_backward(ptdp_device *dev, ptdp_model *m, ptdp_acts *full, const ptdp_tensor *dout,
                          double loss_scale, ptdp_tensor *dx)
{
    if (!full->alive || full->saved == NULL)
        return tutorial_device_wrong(dev, "stage %d: your backward ran the plain backward on activations that "
                                     "are not there: the\nforward dropped them (as it should), so the backward "
                                     "must run the forward\nagain first, from the copy of the input (blank 3).",
                                     m->mesh->pp_rank);
    return w.plain->backward(dev, m, full, dout, loss_scale, dx);
}

void lesson_plain_free(ptdp_device *dev, ptdp_model *m, ptdp_acts *full)
{
    if (full->alive || full->saved != NULL)
        w.plain->acts_free(dev, m, full);
    full->alive = false;
}

/* ------------------------------------------- your functions, as the model's */

typedef struct {
    double first_cost[P_RUN], again_cost[P_RUN];   /* virtual compute of forwards */
    int micro_batches[P_RUN];                       /* forwarded, over the run    */
    size_t input_bytes[P_RUN];                      /* of the last micro-batch     */
} recompute_log;

static recompute_log *the_log;   /* one run at a time */

static size_t acts_now(ptdp_device *dev)
{
    ptdp_mem_stats ms;
    ptdp_arena_stats(dev->arena, &ms);
    return ms.current[PTDP_MEM_ACTS];
}

/* Whether two tensors hold the same shape and values, row by row. */
static bool same_values(ptdp_tensor a, ptdp_tensor b)
{
    if (a.data == NULL || b.data == NULL || a.rows != b.rows || a.cols != b.cols)
        return false;
    for (int r = 0; r < a.rows; r++)
        if (memcmp(a.data + (size_t)r * a.stride, b.data + (size_t)r * b.stride, (size_t)a.cols * sizeof(ptdp_real)))
            return false;
    return true;
}

static int routed_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_batch *b,
                          ptdp_tensor input, long step, bool recompute, ptdp_tensor *out)
{
    (void)recompute;
    const int st = m->mesh->pp_rank;
    memset(acts, 0, sizeof *acts);
    lesson_kept *k = calloc(1, sizeof *k);
    if (k == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    acts->rows = b->rows;
    acts->first_sample = b->first;
    acts->step = step;
    acts->labels = b->labels;
    acts->recompute = true;
    acts->alive = true;
    acts->saved = k;

    const ptdp_tensor x = stage_input(m, b, input);
    const size_t bytes = ptdp_tensor_numel(x) * sizeof(ptdp_real), before = acts_now(dev);
    w = (watch){ .plain = w.plain, .now = IN_FORWARD, .kept = k };
    int rc = lesson_forward(dev, m, k, b, input, step, out);
    w.now = OUTSIDE;
    if (rc != 0)
        return rc;
    acts->loss_sum = w.loss_sum;
    const size_t after = acts_now(dev);
    char b1[32], b2[32];
    ptdp_format_bytes((double)bytes, b1, sizeof b1);

    if (w.forwards != 1)
        return tutorial_device_wrong(dev, "stage %d: your forward ran the plain forward %d times; once gives "
                                     "the output and the\nactivations to copy from.", st, w.forwards);
    if (k->input.data != NULL && k->input.data == x.data) {
        k->input = (ptdp_tensor){ 0 };   /* not yours to free */
        return tutorial_device_wrong(dev, "stage %d: kept->input is the executor's tensor itself, not a copy: "
                                     "the executor frees\nit as soon as your forward returns, and the backward "
                                     "would recompute from freed\nmemory.  Blank 1: allocate a tensor of your "
                                     "own (ptdp_tensor_alloc, PTDP_MEM_ACTS)\nand copy x into it.", st);
    }
    if (out != NULL && same_values(k->input, *out) && !same_values(k->input, x))
        return tutorial_device_wrong(dev, "stage %d: kept->input holds the stage's output (%d x %d), what its "
                                     "block made, not its\ninput x (%d x %d).  A block's checkpoint is its "
                                     "input: the backward redoes the block\nfrom there.  Its output is the next "
                                     "block's input, which that block keeps\n(per-layer checkpoints: L inputs "
                                     "for L blocks).  Blank 1: copy x.", st, out->rows, out->cols, x.rows,
                                     x.cols);
    if (k->input.data == NULL)
        return tutorial_device_wrong(dev, "stage %d: after your forward kept->input holds nothing: the arena "
                                     "holds %s more,\nthe stage input is %s.  Nothing is left to recompute from.  "
                                     "Blank 1 keeps a copy;\nblank 2 drops everything else, not the copy.", st,
                                     ptdp_format_bytes((double)after - (double)before, b2, sizeof b2), b1);
    if (k->full.alive || after != before + bytes) {
        bool more = after > before + bytes;
        return tutorial_device_wrong(dev, "stage %d: after your forward the arena holds %s%s more activations; "
                                     "the stage\ninput is %s (%d x %d values).  Recomputation keeps the input "
                                     "and nothing else:\n%s", st, after < before ? "-" : "",
                                     ptdp_format_bytes(after >= before ? (double)(after - before)
                                                                       : (double)(before - after), b2, sizeof b2),
                                     b1, x.rows, x.cols,
                                     more ? "blank 2 must drop what the plain forward kept (lesson_plain_free)."
                                          : "blank 1 must allocate the copy in the arena, category acts.");
    }
    if (k->input.rows != x.rows || k->input.cols != x.cols ||
        memcmp(k->input.data, x.data, bytes) != 0)
        return tutorial_device_wrong(dev, "stage %d: kept->input (%d x %d) is not a copy of the stage input "
                                     "(%d x %d): blank 1\nmust copy x's values (ptdp_tensor_copy).", st,
                                     k->input.rows, k->input.cols, x.rows, x.cols);
    if (the_log != NULL) {
        the_log->first_cost[st] += w.forward_cost;
        the_log->micro_batches[st]++;
        the_log->input_bytes[st] = bytes;
    }
    return PTDP_OK;
}

static int routed_backward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                           double loss_scale, ptdp_tensor *dx)
{
    const int st = m->mesh->pp_rank;
    lesson_kept *k = acts->saved;
    double c0 = dev->clock.compute_s;
    w = (watch){ .plain = w.plain, .now = IN_BACKWARD, .kept = k };
    int rc = lesson_backward(dev, m, k, dout, loss_scale, dx);
    w.now = OUTSIDE;
    if (rc != 0)
        return rc;
    if (w.forwards == 0)
        return tutorial_device_wrong(dev, "stage %d: your backward never ran the forward again.  Blank 3.", st);
    if (!w.from_copy)
        return tutorial_device_wrong(dev, "stage %d: your backward's forward did not read your copy of the "
                                     "input (kept->input):\nrecompute from what the forward kept (blank 3).", st);
    if (k->full.alive)
        return tutorial_device_wrong(dev, "stage %d: after your backward the recomputed activations are still "
                                     "alive: the plain\nbackward frees them (blank 4).", st);
    if (k->input.data != NULL)
        return tutorial_device_wrong(dev, "stage %d: after your backward your copy of the input is still in "
                                     "the arena: the\nmicro-batch is done, free it (blank 4).", st);
    if (the_log != NULL)
        the_log->again_cost[st] += dev->clock.compute_s - c0;   /* forward again + backward */
    acts->alive = false;
    acts->saved = NULL;
    free(k);
    return PTDP_OK;
}

/* A micro-batch abandoned (a failed step): free what it still holds. */
static void routed_acts_free(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts)
{
    lesson_kept *k = acts->saved;
    if (k != NULL) {
        lesson_plain_free(dev, m, &k->full);
        ptdp_tensor_free(dev, &k->input);
        free(k);
    }
    acts->saved = NULL;
    acts->alive = false;
}

/* ------------------------------------------------------------- the runs */

typedef struct {
    double loss[STEPS];
    ptdp_state final;
} baseline;

static int run_baseline(baseline *b, char *msg, size_t len)
{
    return tutorial_train_baseline(run_config(1, 1), b->loss, &b->final, msg, len);
}

typedef struct {
    bool yours;                      /* your functions in the model's table */
    const ptdp_schedule *schedule;
    double loss[STEPS];
    double compute[P_RUN];           /* virtual compute of the whole run    */
    size_t peak_acts[P_RUN];
    recompute_log log;
    ptdp_state final;
} pipe_run;

static int optimizer_step(ptdp_device *dev, void *arg)
{
    ptdp_model *m = arg;
    double sumsq;
    int rc = ptdp_model_grad_sumsq(dev, m, &sumsq);
    if (rc != 0)
        return rc;
    ptdp_sgd_config sgd = { .lr = LR, .momentum = 0, .weight_decay = 0 };
    ptdp_sgd_step(m->flat_w, m->flat_g, NULL, m->numel, &sgd, 1);
    memset(m->flat_g, 0, m->numel * sizeof(ptdp_real));
    return PTDP_OK;
}

static int pipe_device(ptdp_device *dev, void *arg)
{
    pipe_run *x = arg;
    ptdp_train_config c = run_config(P_RUN, M_RUN);
    ptdp_mesh mesh;
    ptdp_model model;
    int rc = ptdp_mesh_init(dev, 1, 1, P_RUN, &mesh);
    if (rc != 0)
        return rc;
    if ((rc = ptdp_model_init(dev, &model, &c.model, &mesh, NULL, SEED, DROPOUT)) != 0)
        goto out_mesh;
    const ptdp_model_ops *own = model.ops;
    ptdp_model_ops routed = *own;
    w = (watch){ .plain = own };
    if (x->yours) {
        routed.forward = routed_forward;
        routed.backward = routed_backward;
        routed.acts_free = routed_acts_free;
        model.ops = &routed;
    }
    for (long s = 0; rc == 0 && s < STEPS; s++) {
        ptdp_pp_step st = {
            .model = &model, .schedule = x->schedule, .step = s,
            .shard_first = s * (int64_t)B, .shard_rows = B, .micro_batches = M_RUN,
            .loss_scale = 1.0 / B, .optimizer_step = optimizer_step, .optimizer_ctx = &model,
        };
        rc = ptdp_pp_run_step(dev, &st);
        if (model.last_stage)
            x->loss[s] = st.loss_sum / B;
    }
    x->compute[mesh.pp_rank] = dev->clock.compute_s;
    model.ops = own;
    if (rc == 0)
        for (int i = 0; i < model.nparams; i++)
            ptdp_param_to_state(&model.params[i], model.params[i].w,
                                ptdp_state_find(&x->final, model.params[i].name));
    ptdp_model_free(dev, &model);
out_mesh:
    ptdp_mesh_free(&mesh);
    return rc;
}

/* 0 ok, else the run's error (printed). */
static int run_pipe(pipe_run *x, const char *what)
{
    ptdp_train_config c = run_config(P_RUN, M_RUN);
    if (ptdp_state_init(&x->final, &c.model, c.optimizer, false) != 0) {
        tutorial_wrong("%s: host out of memory", what);
        return PTDP_ENOMEM;
    }
    ptdp_launch_result res;
    ptdp_launch_opts opts = { 0 };
    opts.profile = ptdp_profile_find("ideal");
    opts.result = &res;
    the_log = x->yours ? &x->log : NULL;
    int rc = tutorial_launch_opts(what, P_RUN, pipe_device, x, &opts);
    the_log = NULL;
    for (int d = 0; d < P_RUN && rc == 0; d++)
        x->peak_acts[d] = res.devices[d].mem.peak[PTDP_MEM_ACTS];
    ptdp_launch_result_free(&res);
    return rc;
}

static void note_per_stage(const char *label, const double *v, bool bytes)
{
    char line[256], buf[32];
    size_t n = (size_t)snprintf(line, sizeof line, "%s", label);
    for (int st = 0; st < P_RUN; st++)
        n += (size_t)snprintf(line + n, sizeof line - n, " %s",
                              bytes ? ptdp_format_bytes(v[st], buf, sizeof buf)
                                    : (snprintf(buf, sizeof buf, "%.2f ns", v[st] * 1e9), buf));
    tutorial_note("%s", line);
}

int main(void)
{
    tutorial_begin("04b", "activation recomputation: keep the stage input, run the forward again");
    static baseline base;
    static pipe_run plain, yours;
    char msg[PTDP_MSG_MAX], what[128];
    ptdp_schedule *sched = NULL;
    if (run_baseline(&base, msg, sizeof msg) != 0) {
        tutorial_wrong("the single-device baseline (ptdp_train, pp 1) failed: %s", msg);
        return tutorial_end();
    }
    if (ptdp_schedule_create("1f1b", P_RUN, M_RUN, &sched) != 0) {
        tutorial_wrong("cannot build the 1f1b schedule");
        return tutorial_end();
    }
    snprintf(what, sizeof what, "your recomputation, 1F1B on %d stages, %d micro-batches of %d samples",
             P_RUN, M_RUN, B / M_RUN);
    plain.schedule = yours.schedule = sched;
    yours.yours = true;
    if (run_pipe(&plain, "the plain pipeline (the model's own forward and backward)") != 0 ||
        run_pipe(&yours, what) != 0)
        goto done;

    /* 1 and 2 held on every micro-batch (or the run stopped).  3: */
    for (int k = 0; k < STEPS; k++)
        if (!ptdp_check_value(yours.loss[k], base.loss[k], PTDP_TOLERANCE)) {
            tutorial_wrong("%s: the loss of step %d is %.12g; one device's is %.12g.", what, k + 1,
                           yours.loss[k], base.loss[k]);
            tutorial_note("Does the forward again run on the same micro-batch (kept->batch)?  Dropout's masks are "
                          "keyed by its\nsamples' global indices, step x B + row (blank 3).");
            goto done;
        }
    ptdp_check_report rep;
    if (!ptdp_check_states(&yours.final, &base.final, PTDP_TOLERANCE, &rep)) {
        tutorial_wrong("%s: after %d steps, %s differs from one device's by %.3g.", what, STEPS, rep.worst,
                       rep.max_abs);
        tutorial_note("Does the forward again run on the same micro-batch, kept->batch (blank 3)?  Dropout's "
                      "masks are keyed\nby its samples' global indices, step x B + row, not by the step: another "
                      "micro-batch's samples\ndraw other masks.  And does the backward run on the recomputed "
                      "activations, with the output\ngradient it was given (blank 4)?");
        goto done;
    }
    /* 4. The price: exactly one more forward per micro-batch. */
    double extra[P_RUN], first[P_RUN], peak_plain[P_RUN], peak_yours[P_RUN], c_plain[P_RUN], c_yours[P_RUN];
    for (int st = 0; st < P_RUN; st++) {
        extra[st] = yours.compute[st] - plain.compute[st];
        first[st] = yours.log.first_cost[st];
        c_plain[st] = plain.compute[st] / STEPS;
        c_yours[st] = yours.compute[st] / STEPS;
        peak_plain[st] = (double)plain.peak_acts[st];
        peak_yours[st] = (double)yours.peak_acts[st];
        if (fabs(extra[st] - first[st]) > 1e-9 * fmax(first[st], 1e-12) + 1e-15 ||
            yours.log.micro_batches[st] != STEPS * M_RUN) {
            tutorial_wrong("%s: stage %d computed %.4g ns more than without recomputation (virtual clock); "
                           "its %d forwards cost %.4g ns: one more forward per micro-batch would be exactly "
                           "that.", what, st, extra[st] * 1e9, yours.log.micro_batches[st], first[st] * 1e9);
            goto done;
        }
        /* Stage 0 holds the most micro-batches at once (p of them under
         * 1F1B): there recomputation must pay off.  (The last stage holds
         * one at a time: it saves nothing there, and costs the copy.) */
        if (st == 0 && yours.peak_acts[st] >= plain.peak_acts[st]) {
            tutorial_wrong("%s: stage %d's peak of activation memory is %s, no lower than without "
                           "recomputation (%s).", what, st, ptdp_format_bytes(peak_yours[st], msg, 32),
                           ptdp_format_bytes(peak_plain[st], msg + 32, 32));
            goto done;
        }
    }
    tutorial_ok("%s: after each forward the arena held exactly the stage input's bytes more (%zu B on "
                "stage 0, %zu B after); each backward ran the forward once more, from that copy; %d steps "
                "equal to one device (largest difference %.1e)", what, yours.log.input_bytes[0],
                yours.log.input_bytes[1], STEPS, rep.max_abs);
    note_per_stage("peak activation memory per stage, without:", peak_plain, true);
    note_per_stage("                                     with:", peak_yours, true);
    note_per_stage("compute per stage and step, without:", c_plain, false);
    note_per_stage("                               with:", c_yours, false);
    tutorial_note("the difference is exactly one forward per micro-batch: %d x %.3f ns on each stage,\n"
                  "x%.3f the compute (a backward costs about two forwards: about (1 + 2 + 1) / (1 + 2) = 4/3)",
                  M_RUN, first[1] / (STEPS * M_RUN) * 1e9, c_yours[1] / c_plain[1]);
done:
    ptdp_state_free(&plain.final);
    ptdp_state_free(&yours.final);
    ptdp_state_free(&base.final);
    ptdp_schedule_destroy(sched);
    return tutorial_end();
}
