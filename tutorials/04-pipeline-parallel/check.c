/*
 * check.c — lesson 04: are your GPipe and 1F1B schedules right?
 *
 * For each of your two generators:
 *
 *   1. The lists, for p = 1..8 stages and m = 1..16 micro-batches, with no
 *      model at all.  ptdp_schedule_validate proves each list correct —
 *      every micro-batch forwarded and backwarded once per stage, every
 *      dependency kept, every send matched by a receive — and free of
 *      deadlock under blocking rendezvous send/recv (it plays the lists
 *      against each other and names the stages that would wait forever).
 *      Then: does every stage hold as many micro-batches as the schedule
 *      should (GPipe m, 1F1B min(p - s, m))?  And, timed in virtual time
 *      with t_f = 1, t_b = 2, is the bubble (p - 1) / (m + p - 1)?
 *
 *   2. The real thing: the list runs through ptdp's executor (pp.c) on
 *      p = 4 device threads, one block of the model each, for 3 SGD steps
 *      of 8 micro-batches, and must train exactly like ptdp_train on one
 *      device (every loss and every parameter to 1e-10, in double).  The
 *      devices' virtual clocks use the "ideal" profile (only the blocks
 *      cost time, links are free: the formula's assumptions), so the
 *      bubble they measure must be the formula's.
 *
 * Your functions write every action by hand, messages and optimizer step
 * included, into an empty schedule from ptdp_schedule_alloc.  (The
 * library's generators write only the compute and let
 * ptdp_schedule_place_comms add the rest by this same even/odd rule:
 * PTDP_PLACE_EVEN_ODD, schedule.h.)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lesson.h"
#include "tutorial.h"

#include "ptdp/clock.h"
#include "ptdp/mlp_data.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/mesh.h"
#include "ptdp/model.h"
#include "ptdp/models.h"
#include "ptdp/optim.h"
#include "ptdp/pp.h"
#include "ptdp/state.h"
#include "ptdp/train.h"
#include "ptdp/mlp.h"

typedef int (*lesson_generator)(ptdp_schedule *s);

typedef enum { GPIPE, ONE_F_ONE_B } schedule_kind;

typedef struct {
    const char *name;        /* "your GPipe"           */
    const char *function;    /* "lesson_gpipe"         */
    lesson_generator fn;
    schedule_kind kind;
} student_schedule;

/* The run of part 2: p = 4 stages of one block each, m = 8. */
enum { P_RUN = 4, M_RUN = 8, B = 16, STEPS = 3 };
static const double LR = 0.5;
static const uint64_t SEED = 11;

/* ------------------------------------------------------- your lists */

/* An empty schedule filled by the student's function.  0, or 1 after
 * printing why not (a blank reached: its message only). */
static int generate(const student_schedule *y, int p, int m, ptdp_schedule **out)
{
    char name[32];
    snprintf(name, sizeof name, "your-%s", y->kind == GPIPE ? "gpipe" : "1f1b");
    int rc = ptdp_schedule_alloc(name, p, m, out);
    int yours = rc == PTDP_OK ? y->fn(*out) : PTDP_OK;
    if (yours == PTDP_OK && rc == PTDP_OK && (*out)->overflow)
        rc = PTDP_EINVAL;
    if (yours != PTDP_OK || rc != PTDP_OK) {
        ptdp_schedule_destroy(*out);
        *out = NULL;
    }
    if (yours != PTDP_OK) {
        if (!tutorial_report_blank())
            tutorial_wrong("%s, p = %d, m = %d: %s returned %d (%s).", y->name, p, m, y->function,
                           yours, ptdp_strerror(yours));
        return 1;
    }
    if (rc == PTDP_EINVAL) {
        tutorial_wrong("%s, p = %d, m = %d: pushed an action onto a stage that does not exist, or more "
                       "than the %d actions a stage needs at most (F, B and four messages per "
                       "micro-batch, one optimizer step).", y->name, p, m, 6 * m + 1);
        tutorial_note("Does a loop run past the m micro-batches (a warm-up longer than m?), or a stage");
        tutorial_note("number past p - 1?");
        return 1;
    }
    if (rc != 0) {
        tutorial_wrong("%s, p = %d, m = %d: could not allocate the schedule (%s).", y->name, p, m,
                       ptdp_strerror(rc));
        return 1;
    }
    return 0;
}

/* The ASCII timeline (schedule.h), indented under the verdict. */
static void note_timeline(const ptdp_schedule *s, const ptdp_schedule_timeline *t)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return;
    ptdp_schedule_ascii(s, t, f);
    fclose(f);
    for (char *line = text, *end; line != NULL && *line; line = end ? end + 1 : NULL) {
        if ((end = strchr(line, '\n')) != NULL)
            *end = '\0';
        tutorial_note("%s", line);
    }
    free(text);
}

/* One stage's list as text: "F0<-0 F0 F0->2 …". */
static void note_stage_list(const ptdp_schedule *s, int st)
{
    char line[PTDP_MSG_MAX];
    size_t n = (size_t)snprintf(line, sizeof line, "stage %d's list:", st);
    const ptdp_stage_actions *list = &s->stage[st];
    for (int i = 0; i < list->count && n + 40 < sizeof line; i++) {
        char tok[32];
        ptdp_action_format(&list->actions[i], tok, sizeof tok);
        n += (size_t)snprintf(line + n, sizeof line - n, "%s%s", i > 0 && i % 12 == 0 ? "\n  " : " ", tok);
    }
    tutorial_note("%s", line);
}

/* --------------------------------------------------------- 1. the lists */

enum { MAX_STAGES = 16 };   /* the shapes above go to p = 8 */

/* Is this action a send (to either neighbour)? */
static bool is_send(ptdp_action_kind k)
{
    return k == PTDP_ACT_SEND_FORWARD || k == PTDP_ACT_SEND_BACKWARD;
}

/* "stage 0", "stages 0 and 3", "stages 0, 3 and 5" into buf. */
static const char *format_stages(const int *st, int n, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, "%s", n == 1 ? "Stage" : "Stages");
    for (int i = 0; i < n && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%d", i == 0 ? " " : i == n - 1 ? " and " : ", ", st[i]);
    return buf;
}

/* The validator's deadlock report names every stuck stage ("stage s
 * blocked at action i, …") and every pair of neighbours that wait for each
 * other ("stages s and s+1 wait for each other").  Only such a pair is the
 * cause; the other stuck stages only wait behind it.  Say which kind of
 * wait the pair is in, from the two actions they stand at, and which blank
 * makes it. */
static void explain_deadlock(const student_schedule *y, const ptdp_schedule *s, const char *report)
{
    int at[MAX_STAGES], in_pair[MAX_STAGES];
    const int p = s->pp < (int)(sizeof at / sizeof at[0]) ? s->pp : (int)(sizeof at / sizeof at[0]);
    for (int st = 0; st < p; st++)
        at[st] = in_pair[st] = -1;
    for (const char *c = strstr(report, "stage "); c != NULL; c = strstr(c + 1, "stage ")) {
        int st, i;
        if (sscanf(c, "stage %d blocked at action %d", &st, &i) == 2 && st >= 0 && st < p &&
            i >= 0 && i < s->stage[st].count)
            at[st] = i;
    }
    tutorial_note("Send and receive block: a send returns only once the receiver stands at the");
    tutorial_note("matching receive.  The stages above would wait for each other forever; on real");
    tutorial_note("devices the step would hang (ptdp's watchdog ends such a run after a few seconds).");
    const char *order_blank = y->kind == ONE_F_ONE_B ? "blank 4 (f = warmup + k, b = k) and the\nloops around it: in which order each one takes its micro-batches"
                                                     : "blanks 1 and 2";
    for (const char *c = strstr(report, "stages "); c != NULL; c = strstr(c + 1, "stages ")) {
        int a, b;
        if (sscanf(c, "stages %d and %d wait for each other", &a, &b) != 2 || a < 0 || b >= p ||
            at[a] < 0 || at[b] < 0)
            continue;
        in_pair[a] = in_pair[b] = 1;
        const ptdp_action *x = &s->stage[a].actions[at[a]], *z = &s->stage[b].actions[at[b]];
        char tx[32], tz[32];
        ptdp_action_format(x, tx, sizeof tx);
        ptdp_action_format(z, tz, sizeof tz);
        if (is_send(x->kind) && is_send(z->kind))
            tutorial_note("Stages %d and %d both send first (%s, %s): each waits for the other to receive.\n%s",
                          a, b, tx, tz, y->kind == ONE_F_ONE_B ? "Of two neighbours, one must receive "
                          "first.  Look at blank 5." : "Look at blanks 1 and 2.");
        else if (!is_send(x->kind) && !is_send(z->kind))
            tutorial_note("Stages %d and %d both receive first (%s, %s): each waits for the other to send.\n%s",
                          a, b, tx, tz, y->kind == ONE_F_ONE_B ? "Of two neighbours, one must send "
                          "first.  Look at blank 5." : "Look at blanks 1 and 2.");
        else
            tutorial_note("Stage %d stands at %s while stage %d stands at %s: the two pass the micro-batches\n"
                          "in different orders.  Between two neighbours, the sends of one and the receives of\n"
                          "the other must come in the same order.  Look at %s.", a, tx, b, tz, order_blank);
    }
    int behind[MAX_STAGES], nb = 0;
    for (int st = 0; st < p; st++)
        if (at[st] >= 0 && in_pair[st] < 0)
            behind[nb++] = st;
    if (nb > 0) {
        char who[128];
        tutorial_note("%s %s only stuck behind them: %s for a neighbour that never gets there.",
                      format_stages(behind, nb, who, sizeof who), nb == 1 ? "is" : "are",
                      nb == 1 ? "it waits" : "each waits");
    }
}

/* A validation error on one action (not a deadlock): a word on the likely
 * blank when the action names a micro-batch past the last. */
static void explain_action(const student_schedule *y, const ptdp_schedule *s, const ptdp_schedule_verdict *v)
{
    if (v->stage < 0 || v->stage >= s->pp || v->index < 0 || v->index >= s->stage[v->stage].count)
        return;
    const ptdp_action *a = &s->stage[v->stage].actions[v->index];
    if (a->kind == PTDP_ACT_OPTIMIZER_STEP || (a->mb >= 0 && a->mb < s->micro_batches))
        return;
    if (y->kind == ONE_F_ONE_B && a->kind == PTDP_ACT_RECV_FORWARD && a->mb == s->micro_batches)
        tutorial_note("The last steady iteration only sends: its forward f = m - 1 is the last one,\n"
                      "there is no micro-batch f + 1 = %d to receive.  In blank 4, on the last\n"
                      "iteration (k == steady - 1) push the SEND_BACKWARD alone, without an exchange.",
                      s->micro_batches);
    else
        tutorial_note("Micro-batches are numbered 0 .. m - 1 = %d: does a loop run one too far (%s)?",
                      s->micro_batches - 1, y->kind == GPIPE ? "blanks 1 and 2" : "blanks 3 and 4");
}

static int expected_peak(schedule_kind kind, int p, int m, int st)
{
    if (kind == GPIPE)
        return m;
    return p - st < m ? p - st : m;
}

/* 0 ok, 1 wrong (printed). */
static int check_one_shape(const student_schedule *y, int p, int m)
{
    ptdp_schedule *s;
    if (generate(y, p, m, &s) != 0)
        return 1;
    int bad = 1;
    ptdp_schedule_verdict v;
    ptdp_schedule_timeline *t = NULL;
    if (ptdp_schedule_validate(s, &v) != 0) {
        tutorial_wrong("%s, p = %d, m = %d: %s", y->name, p, m, v.message);
        if (v.deadlock) {
            explain_deadlock(y, s, v.message);
        } else if (v.stage >= 0) {
            note_stage_list(s, v.stage);
            explain_action(y, s, &v);
        }
        goto done;
    }
    for (int st = 0; st < p; st++) {
        int got = ptdp_schedule_peak_in_flight(s, st), want = expected_peak(y->kind, p, m, st);
        if (got == want)
            continue;
        if (y->kind == GPIPE)
            tutorial_wrong("%s, p = %d, m = %d: stage %d holds at most %d micro-batch%s at once.  GPipe "
                           "runs all m forwards before any backward, so every stage holds all m = %d.",
                           y->name, p, m, st, got, got == 1 ? "" : "es", m);
        else
            tutorial_wrong("%s, p = %d, m = %d: stage %d holds up to %d micro-batch%s at once (forwarded, "
                           "not yet backwarded); 1F1B holds min(p - s, m) = %d there.  A stage holds its "
                           "warm-up's forwards plus the one forward of a steady iteration: is the warm-up "
                           "%d forward%s too %s (blank 3)?", y->name, p, m, st, got, got == 1 ? "" : "es",
                           want, abs(got - want), abs(got - want) == 1 ? "" : "s", got > want ? "long" : "short");
        note_stage_list(s, st);
        goto done;
    }
    const ptdp_schedule_costs costs = { .forward = 1, .backward = 2, .send = 0 };
    if (ptdp_schedule_simulate(s, &costs, &t) != 0) {
        tutorial_wrong("%s, p = %d, m = %d: the timing simulation failed (host out of memory?)", y->name, p, m);
        goto done;
    }
    double formula = ptdp_bubble_formula(p, m);
    if (fabs(t->bubble - formula) > 1e-9) {
        tutorial_wrong("%s, p = %d, m = %d: the bubble is %.4f (the stages idle that fraction of the "
                       "step); (p - 1) / (m + p - 1) = %.4f.", y->name, p, m, t->bubble, formula);
        tutorial_note("The list is valid, but some stage waits where it could work: its timeline,");
        tutorial_note("with t_f = 1 and t_b = 2 (compare it with `ptdp schedule --pp %d --micro-batches %d%s`):",
                      p, m, y->kind == GPIPE ? " --schedule gpipe" : "");
        note_timeline(s, t);
        goto done;
    }
    bad = 0;
done:
    ptdp_schedule_timeline_destroy(t);
    ptdp_schedule_destroy(s);
    return bad;
}

/* GPipe's text asks for the backwards last micro-batch first; the other
 * order is valid too (the lists passed).  Say so, and why. */
static void note_backward_order(const student_schedule *y)
{
    ptdp_schedule *s;
    if (generate(y, 4, 4, &s) != 0)
        return;
    bool forward_order = true;
    for (int st = 0; st < s->pp && forward_order; st++) {
        int last = -1;
        for (int i = 0; i < s->stage[st].count; i++) {
            const ptdp_action *a = &s->stage[st].actions[i];
            if (a->kind != PTDP_ACT_BACKWARD)
                continue;
            forward_order = forward_order && a->mb > last;
            last = a->mb;
        }
    }
    ptdp_schedule_destroy(s);
    if (!forward_order)
        return;
    tutorial_note("Your backwards run micro-batch 0 first; the text asks for m - 1 first (blank 2).\n"
                  "Both orders are right.  GPipe runs all m forwards before any backward, so every\n"
                  "micro-batch's activations are there in either order: the bubble is the same (each\n"
                  "stage still waits for p - 1 backwards), so is the memory (all m held when the\n"
                  "backwards begin), and the gradient is the same sum (its additions in another order:\n"
                  "far below 1e-10).  What matters is that neighbours agree on the order, and every\n"
                  "stage of yours uses the same one.  Last first is the convention of a stack: the last\n"
                  "stage starts with the micro-batch it has just forwarded.");
}

static bool check_lists(const student_schedule *y)
{
    static const int shapes[][2] = {
        { 1, 1 }, { 2, 1 }, { 2, 2 }, { 2, 3 }, { 3, 1 }, { 3, 4 }, { 4, 4 },
        { 4, 8 }, { 5, 3 }, { 6, 2 }, { 7, 9 }, { 8, 16 },
    };
    const int n = (int)(sizeof shapes / sizeof shapes[0]);
    for (int k = 0; k < n; k++)
        if (check_one_shape(y, shapes[k][0], shapes[k][1]) != 0)
            return false;
    tutorial_ok("%s: the lists for %d shapes (p = 1..8, m = 1..16) are valid and deadlock-free; every "
                "stage holds %s; bubble = (p - 1) / (m + p - 1) on each", y->name, n,
                y->kind == GPIPE ? "all m micro-batches" : "at most min(p - s, m) micro-batches");
    if (y->kind == GPIPE)
        note_backward_order(y);

    /* Show it: the timeline of p = 4, m = 4. */
    ptdp_schedule *s;
    ptdp_schedule_timeline *t;
    const ptdp_schedule_costs costs = { .forward = 1, .backward = 2, .send = 0 };
    if (generate(y, 4, 4, &s) == 0) {
        if (ptdp_schedule_simulate(s, &costs, &t) == 0) {
            note_timeline(s, t);
            ptdp_schedule_timeline_destroy(t);
        }
        ptdp_schedule_destroy(s);
    }
    return true;
}

/* ------------------------------------------------------- 2. a real run */

static ptdp_train_config run_config(int pp, int m)
{
    ptdp_train_config c = {
        .model = PTDP_MLP_CONFIG( .d_in = 6, .hidden = 8, .ffn = 16, .layers = P_RUN, .classes = 5 ),
        .dp = 1, .tp = 1, .pp = pp, .micro_batches = m, .batch = B, .steps = STEPS,
        .optimizer = PTDP_OPT_SGD, .lr = LR, .bucket_mb = 1, .seed = SEED,
    };
    return c;
}

typedef struct {
    double loss[STEPS];
    ptdp_state final;
} baseline;

static int run_baseline(baseline *b, char *msg, size_t len)
{
    return tutorial_train_baseline(run_config(1, 1), b->loss, &b->final, msg, len);
}

/* What every stage records, per step: when the step started, when its
 * pipeline phase ended (the OPTIMIZER_STEP action), and how long it was
 * busy in between (compute and communication). */
typedef struct {
    const ptdp_schedule *schedule;
    double loss[STEPS];
    double t0[STEPS][P_RUN], phase_end[STEPS][P_RUN], busy[STEPS][P_RUN];
    int peak_in_flight[P_RUN];
    ptdp_state final;
} pipe_run;

typedef struct {
    ptdp_model *model;
    long step;               /* 1-based, for the optimizer */
    double busy0, phase_end, busy;
} stage_ctx;

/* The schedule's last action: close the pipeline phase, then what
 * ptdp_train does once per step: the gradient norm of the whole model (an
 * all-reduce over the stages, which also lines their clocks up for the
 * next step) and a plain SGD step on this stage's parameters. */
static int optimizer_step(ptdp_device *dev, void *arg)
{
    stage_ctx *c = arg;
    ptdp_model *m = c->model;
    c->phase_end = dev->clock.now;
    c->busy = dev->clock.compute_s + dev->clock.comm_s - c->busy0;
    double sumsq;
    int rc = ptdp_model_grad_sumsq(dev, m, &sumsq);
    if (rc != 0)
        return rc;
    ptdp_sgd_config sgd = { .lr = LR, .momentum = 0, .weight_decay = 0 };
    ptdp_sgd_step(m->flat_w, m->flat_g, NULL, m->numel, &sgd, c->step);
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
    if ((rc = ptdp_model_init(dev, &model, &c.model, &mesh, NULL, SEED, 0.0)) != 0)
        goto out_mesh;
    int stage = mesh.pp_rank;
    for (long s = 0; rc == 0 && s < STEPS; s++) {
        stage_ctx ctx = { .model = &model, .step = s + 1,
                          .busy0 = dev->clock.compute_s + dev->clock.comm_s };
        x->t0[s][stage] = dev->clock.now;
        ptdp_pp_step st = {
            .model = &model, .schedule = x->schedule, .step = s,
            .shard_first = s * (int64_t)B, .shard_rows = B, .micro_batches = M_RUN,
            .loss_scale = 1.0 / B, .optimizer_step = optimizer_step, .optimizer_ctx = &ctx,
        };
        rc = ptdp_pp_run_step(dev, &st);
        x->phase_end[s][stage] = ctx.phase_end;
        x->busy[s][stage] = ctx.busy;
        if (model.last_stage)
            x->loss[s] = st.loss_sum / B;
        if (st.peak_in_flight > x->peak_in_flight[stage])
            x->peak_in_flight[stage] = st.peak_in_flight;
    }
    if (rc == 0)
        for (int i = 0; i < model.nparams; i++)
            ptdp_param_to_state(&model.params[i], model.params[i].w,
                                ptdp_state_find(&x->final, model.params[i].name));
    ptdp_model_free(dev, &model);
out_mesh:
    ptdp_mesh_free(&mesh);
    return rc;
}

/* train.c's measure: the idle fraction of each device's pipeline phase,
 * from the first device's start to the last device's optimizer step,
 * averaged over devices and steps. */
static double measured_bubble(const pipe_run *x)
{
    double sum = 0;
    for (int s = 0; s < STEPS; s++) {
        double t0 = INFINITY, t1 = -INFINITY;
        for (int d = 0; d < P_RUN; d++) {
            t0 = fmin(t0, x->t0[s][d]);
            t1 = fmax(t1, x->phase_end[s][d]);
        }
        for (int d = 0; d < P_RUN; d++)
            sum += 1.0 - x->busy[s][d] / (t1 - t0);
    }
    return sum / (STEPS * P_RUN);
}

static bool check_run(const student_schedule *y, const baseline *b)
{
    char what[128];
    snprintf(what, sizeof what, "%s on %d devices, %d micro-batches of %d samples", y->name, P_RUN, M_RUN,
             B / M_RUN);
    ptdp_train_config c = run_config(P_RUN, M_RUN);
    pipe_run *x = calloc(1, sizeof *x);
    ptdp_schedule *s = NULL;
    bool ok = false;
    if (x == NULL || ptdp_state_init(&x->final, &c.model, c.optimizer, false) != 0) {
        tutorial_wrong("%s: host out of memory", what);
        free(x);
        return false;
    }
    if (generate(y, P_RUN, M_RUN, &s) != 0)
        goto done;
    x->schedule = s;

    /* The check's own launch (not tutorial_launch): the ideal profile makes
     * the measured bubble the textbook's.  No code of yours runs on the
     * devices: your list was validated above. */
    ptdp_launch_result res;
    ptdp_launch_opts opts = { 0 };
    opts.watchdog_s = tutorial_watchdog_s();
    opts.profile = ptdp_profile_find("ideal");
    opts.result = &res;
    int rc = ptdp_launch(P_RUN, pipe_device, x, &opts);
    size_t peak_acts[P_RUN] = { 0 };
    for (int d = 0; d < P_RUN && rc == 0; d++)
        peak_acts[d] = res.devices[d].mem.peak[PTDP_MEM_ACTS];
    if (rc != 0)
        tutorial_wrong("%s: device %d stopped with \"%s\" (%s).", what, res.failed_rank, res.message,
                       ptdp_strerror(rc));
    ptdp_launch_result_free(&res);
    if (rc != 0)
        goto done;

    for (int k = 0; k < STEPS; k++)
        if (!ptdp_check_value(x->loss[k], b->loss[k], PTDP_TOLERANCE)) {
            tutorial_wrong("%s: the loss of step %d is %.12g; one device's is %.12g.", what, k + 1,
                           x->loss[k], b->loss[k]);
            goto done;
        }
    ptdp_check_report rep;
    if (!ptdp_check_states(&x->final, &b->final, PTDP_TOLERANCE, &rep)) {
        tutorial_wrong("%s: after %d steps, %s differs from one device's by %.3g.", what, STEPS, rep.worst,
                       rep.max_abs);
        goto done;
    }
    for (int st = 0; st < P_RUN; st++) {
        int want = expected_peak(y->kind, P_RUN, M_RUN, st);
        if (x->peak_in_flight[st] != want) {
            tutorial_wrong("%s: stage %d held %d micro-batches' activations at once; expected %d.", what, st,
                           x->peak_in_flight[st], want);
            goto done;
        }
    }
    double bubble = measured_bubble(x), formula = ptdp_bubble_formula(P_RUN, M_RUN);
    if (fabs(bubble - formula) > 1e-6) {
        tutorial_wrong("%s: the devices idled %.4f of the step (virtual time); (p - 1) / (m + p - 1) = %.4f.",
                       what, bubble, formula);
        goto done;
    }
    tutorial_ok("%s: %d steps equal to one device (largest difference %.1e)", what, STEPS, rep.max_abs);
    tutorial_note("bubble measured on the devices' virtual clocks %.4f; formula (p-1)/(m+p-1) = %d/%d = %.4f",
                  bubble, P_RUN - 1, M_RUN + P_RUN - 1, formula);
    char line[256];
    size_t n = (size_t)snprintf(line, sizeof line, "micro-batches alive at once per stage:");
    for (int st = 0; st < P_RUN; st++)
        n += (size_t)snprintf(line + n, sizeof line - n, " %d", x->peak_in_flight[st]);
    n += (size_t)snprintf(line + n, sizeof line - n, "; peak activation memory:");
    for (int st = 0; st < P_RUN; st++) {
        char buf[32];
        n += (size_t)snprintf(line + n, sizeof line - n, " %s", ptdp_format_bytes((double)peak_acts[st], buf,
                                                                                   sizeof buf));
    }
    tutorial_note("%s", line);
    ok = true;
done:
    ptdp_schedule_destroy(s);
    ptdp_state_free(&x->final);
    free(x);
    return ok;
}

int main(void)
{
    tutorial_begin("04", "pipeline parallelism: the GPipe schedule, then 1F1B");
    const student_schedule schedules[] = {
        { "your GPipe", "lesson_gpipe", lesson_gpipe, GPIPE },
        { "your 1F1B", "lesson_1f1b", lesson_1f1b, ONE_F_ONE_B },
    };

    static baseline base;
    char msg[PTDP_MSG_MAX];
    if (run_baseline(&base, msg, sizeof msg) != 0) {
        tutorial_wrong("the single-device baseline (ptdp_train, pp 1) failed: %s", msg);
        return tutorial_end();
    }
    for (size_t k = 0; k < sizeof schedules / sizeof schedules[0]; k++)
        if (!check_lists(&schedules[k]) || !check_run(&schedules[k], &base))
            break;
    ptdp_state_free(&base.final);
    return tutorial_end();
}
