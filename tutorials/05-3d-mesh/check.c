/*
 * check.c — lesson 05: are your DP, TP and PP groups right?
 *
 *   1. Your lesson_mesh_create on every device of seven grids, from 1 x 1 x 1
 *      to dp 2 x tp 2 x pp 4 (16 devices): does each device's TP, DP and PP
 *      group hold exactly the right devices, in the right order — the
 *      devices that share its other two coordinates, ranked by the third?
 *      Each grid runs twice: with the world as it is, then with dev->world
 *      a copy whose ranks are numbered backwards.  ptdp_comm_split breaks
 *      ties of equal keys by rank, so only keys that encode the coordinate
 *      along the group keep the order in both runs; a constant key passes
 *      the first by luck and fails the second.
 *   2. Your groups at work: dp 2 x tp 2 x pp 2 trains the model with them
 *      (DP all-reduce in your DP group, TP all-reduces in your TP group,
 *      1F1B sends and receives in your PP group, the gradient norm over TP
 *      and PP) and must match ptdp_train on one device: every loss, every
 *      gradient norm and every parameter to 1e-10, in double.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lesson.h"
#include "tutorial.h"

#include "ptdp/mlp_data.h"
#include "ptdp/dp.h"
#include "ptdp/error.h"
#include "ptdp/model.h"
#include "ptdp/models.h"
#include "ptdp/optim.h"
#include "ptdp/pp.h"
#include "ptdp/schedule.h"
#include "ptdp/state.h"
#include "ptdp/train.h"
#include "ptdp/comm.h"
#include "ptdp/mlp.h"

enum { MAX_WORLD = 16 };
enum { TP, DP, PP, KINDS };                       /* the order lesson_mesh_create builds them */
static const char *const kind_name[KINDS] = { "TP", "DP", "PP" };
/* For each kind: the coordinate that runs along the group, and the two
 * that stay fixed (indices into {dp, tp, pp}). */
static const int along[KINDS] = { 1, 0, 2 };
static const int fixed[KINDS][2] = { { 0, 2 }, { 1, 2 }, { 1, 0 } };
static const char *const coord_name[3] = { "dp", "tp", "pp" };

/* -------------------------------------------------------- 1. the groups */

typedef struct {
    int shape[3];                              /* dp, tp, pp                       */
    bool reversed;                             /* the world's ranks numbered backwards */
    int exists[MAX_WORLD][KINDS];              /* the communicator is not NULL     */
    int size[MAX_WORLD][KINDS], rank[MAX_WORLD][KINDS];
    int members[MAX_WORLD][KINDS][MAX_WORLD];  /* world rank of each group rank    */
    int fields_ok[MAX_WORLD];                  /* sizes and coordinates in *m      */
} mesh_run;

/* With x->reversed, the student's function sees as dev->world a copy of
 * the world whose ranks run backwards (device w is rank world - 1 - w of
 * it).  Coordinates still come from dev->rank, so the right groups are the
 * same devices in the same order; but ptdp_comm_split breaks ties of equal
 * keys by rank in the communicator split, now backwards.  A key that
 * encodes the coordinate along the group keeps the order; a constant one,
 * which the plain world's ranks happened to order right, now reverses it. */
static int mesh_device(ptdp_device *dev, void *arg)
{
    mesh_run *x = arg;
    ptdp_mesh m = { 0 };
    ptdp_comm *world = dev->world, *backwards = NULL;
    if (x->reversed) {
        int rc = ptdp_comm_split(world, 0, dev->world_size - 1 - dev->rank, "world-backwards", &backwards);
        if (rc != 0)
            return rc;
        dev->world = backwards;
    }
    int rc = lesson_mesh_create(dev, x->shape[0], x->shape[1], x->shape[2], &m);
    dev->world = world;
    if (rc == 0) {
        int d, t, p, w = dev->rank;
        ptdp_mesh_coords(x->shape[0], x->shape[1], x->shape[2], w, &d, &t, &p);
        x->fields_ok[w] = m.dp == x->shape[0] && m.tp == x->shape[1] && m.pp == x->shape[2] &&
                          m.dp_rank == d && m.tp_rank == t && m.pp_rank == p;
        ptdp_comm *groups[KINDS] = { m.tp_comm, m.dp_comm, m.pp_comm };
        for (int k = 0; k < KINDS; k++) {
            if ((x->exists[w][k] = groups[k] != NULL) == 0)
                continue;
            x->size[w][k] = ptdp_comm_size(groups[k]);
            x->rank[w][k] = ptdp_comm_rank(groups[k]);
            for (int r = 0; r < x->size[w][k] && r < MAX_WORLD; r++)
                x->members[w][k][r] = ptdp_comm_world_rank(groups[k], r);
        }
    }
    ptdp_mesh_free(&m);
    if (backwards != NULL)
        ptdp_comm_free(backwards);
    return rc;
}

/* "{4, 5}" */
static const char *format_set(const int *v, int n, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, "{");
    for (int i = 0; i < n && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%d", i ? ", " : "", v[i]);
    if (k < len)
        snprintf(buf + k, len - k, "}");
    return buf;
}

static bool same_set(const int *a, const int *b, int n)
{
    for (int i = 0; i < n; i++) {
        bool found = false;
        for (int j = 0; j < n && !found; j++)
            found = a[i] == b[j];
        if (!found)
            return false;
    }
    return true;
}

/* Device w's expected group of kind k: the world ranks along the group. */
static int expected_members(const int shape[3], int w, int k, int *out)
{
    int c[3];
    ptdp_mesh_coords(shape[0], shape[1], shape[2], w, &c[0], &c[1], &c[2]);
    int n = shape[along[k]];
    for (int i = 0; i < n; i++) {
        int q[3] = { c[0], c[1], c[2] };
        q[along[k]] = i;
        out[i] = ptdp_mesh_world_rank(shape[0], shape[1], shape[2], q[0], q[1], q[2]);
    }
    return n;
}

/* 0 if device w's group of kind k is right; else print why, return 1. */
static int check_group(const mesh_run *x, const char *what, int w, int k)
{
    const int *shape = x->shape;
    int c[3], want[MAX_WORLD];
    ptdp_mesh_coords(shape[0], shape[1], shape[2], w, &c[0], &c[1], &c[2]);
    int n = expected_members(shape, w, k, want);
    const char *K = kind_name[k], *a = coord_name[along[k]];
    const char *f0 = coord_name[fixed[k][0]], *f1 = coord_name[fixed[k][1]];
    const int blank = k + 1;                   /* blank 1 TP, 2 DP, 3 PP */
    char dev_name[64], got_s[256], want_s[256];
    snprintf(dev_name, sizeof dev_name, "device %d (dp %d, tp %d, pp %d)", w, c[0], c[1], c[2]);
    format_set(want, n, want_s, sizeof want_s);

    if (!x->exists[w][k]) {
        tutorial_wrong("%s: %s has no %s group (a negative color joins none); it should be %s "
                       "(blank %d).", what, dev_name, K, want_s, blank);
        return 1;
    }
    int size = x->size[w][k];
    format_set(x->members[w][k], size < MAX_WORLD ? size : MAX_WORLD, got_s, sizeof got_s);
    if (size != n || !same_set(x->members[w][k], want, n)) {
        tutorial_wrong("%s: %s is in the %s group %s; it should be %s: the devices with its %s and %s "
                       "coordinates (%s %d, %s %d).  Look at the color of blank %d.", what, dev_name, K, got_s,
                       want_s, f0, f1, f0, c[fixed[k][0]], f1, c[fixed[k][1]], blank);
        if (size > n)
            tutorial_note("Devices of different %s groups passed the same color.  The color must tell every\n"
                          "(%s, %s) pair apart — for instance %s_rank + %s_rank does not: (1, 0) and (0, 1)\n"
                          "give the same number.  Think of a two-digit number in mixed radix.",
                          K, f0, f1, f0, f1);
        else if (size < n)
            tutorial_note("Devices of one %s group passed different colors: the color must depend on %s\n"
                          "and %s only, not on %s (which runs along the group).", K, f0, f1, a);
        else
            tutorial_note("The color groups the wrong devices: it must be made of %s and %s, the\n"
                          "coordinates that stay the same along a %s group.", f0, f1, K);
        return 1;
    }
    for (int r = 0; r < n; r++)
        if (x->members[w][k][r] != want[r]) {
            tutorial_wrong("%s: %s's %s group holds the right devices in the wrong order: %s; by rank it "
                           "should be %s (rank i = %s coordinate i).", what, dev_name, K, got_s, want_s, a);
            if (x->reversed)
                tutorial_note("In the plain world this order was right.  This run numbered the world's ranks\n"
                              "backwards: ptdp_comm_split ranks a group by key, and breaks ties by the rank in\n"
                              "the communicator it splits, so equal keys now come out backwards.  Your key\n"
                              "does not say where a device sits along its %s group (a constant key?): the\n"
                              "order came from the world's numbering, not from you.  Give each device its %s\n"
                              "coordinate as the key of blank %d.", K, a, blank);
            else
                tutorial_note("The key orders a group: give each device its %s coordinate (blank %d).", a, blank);
            return 1;
        }
    if (x->rank[w][k] != c[along[k]]) {
        tutorial_wrong("%s: %s is rank %d of its %s group; it should be rank %d, its %s coordinate.", what,
                       dev_name, x->rank[w][k], K, c[along[k]], a);
        return 1;
    }
    return 0;
}

/* true if every device's three groups are right in this grid; with
 * `show`, also note the groups found. */
static bool check_shape(int dp, int tp, int pp, bool reversed, bool show)
{
    char what[96];
    snprintf(what, sizeof what, "dp %d x tp %d x pp %d%s", dp, tp, pp,
             reversed ? ", world ranks numbered backwards" : "");
    int world = dp * tp * pp;
    mesh_run *x = calloc(1, sizeof *x);
    bool ok = false;
    if (x == NULL) {
        tutorial_wrong("%s: host out of memory", what);
        return false;
    }
    x->shape[0] = dp;
    x->shape[1] = tp;
    x->shape[2] = pp;
    x->reversed = reversed;
    if (tutorial_launch(what, world, mesh_device, x) != 0)
        goto done;
    for (int w = 0; w < world; w++)
        if (!x->fields_ok[w]) {
            tutorial_wrong("%s: device %d's mesh has the wrong sizes or coordinates (the part of "
                           "lesson_mesh_create before the blanks was changed?).", what, w);
            goto done;
        }
    for (int k = 0; k < KINDS; k++)
        for (int w = 0; w < world; w++)
            if (check_group(x, what, w, k) != 0)
                goto done;
    if (show)
        for (int k = 0; k < KINDS; k++) {
            char line[512], set[128];
            size_t n = (size_t)snprintf(line, sizeof line, "%s: %s groups", what, kind_name[k]);
            for (int w = 0; w < world; w++)
                if (x->rank[w][k] == 0)   /* each group once, by its rank 0 */
                    n += (size_t)snprintf(line + n, sizeof line - n, " %s",
                                          format_set(x->members[w][k], x->size[w][k], set, sizeof set));
            tutorial_note("%s", line);
        }
    ok = true;
done:
    free(x);
    return ok;
}

static bool check_groups(void)
{
    static const int shapes[][3] = {
        { 1, 1, 1 }, { 2, 2, 2 }, { 4, 2, 1 }, { 1, 2, 4 }, { 3, 1, 2 }, { 2, 3, 2 }, { 2, 2, 4 },
    };
    const int n = (int)(sizeof shapes / sizeof shapes[0]);
    char list[256];
    size_t len = 0;
    for (int k = 0; k < n; k++) {
        const int *s = shapes[k];
        if (!check_shape(s[0], s[1], s[2], false, false) || !check_shape(s[0], s[1], s[2], true, false))
            return false;
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%dx%dx%d", k ? ", " : "", s[0], s[1], s[2]);
    }
    tutorial_ok("your groups: every device of %d grids dp x tp x pp (%s) is in the right TP, DP and PP "
                "group, with the right rank — also with the world's ranks numbered backwards, so the "
                "order comes from your keys", n, list);
    return check_shape(2, 2, 2, false, true);
}

/* ----------------------------------------------- 2. training with them */

enum { STEPS = 3, B = 8, M = 2, DP_RUN = 2, TP_RUN = 2, PP_RUN = 2, WORLD_RUN = DP_RUN * TP_RUN * PP_RUN };
static const double LR = 0.5;
static const uint64_t SEED = 5;

static ptdp_train_config run_config(int dp, int tp, int pp, int m)
{
    ptdp_train_config c = {
        .model = PTDP_MLP_CONFIG( .d_in = 6, .hidden = 8, .ffn = 16, .layers = 4, .classes = 6 ),
        .dp = dp, .tp = tp, .pp = pp, .micro_batches = m, .batch = B, .steps = STEPS,
        .optimizer = PTDP_OPT_SGD, .lr = LR, .bucket_mb = 1, .seed = SEED, .schedule = ptdp_schedule_find("1f1b"),
    };
    return c;
}

typedef struct {
    double loss[STEPS], grad_norm[STEPS];
    ptdp_state final;
} baseline;

static int run_baseline(baseline *b, char *msg, size_t len)
{
    ptdp_train_config c = run_config(1, 1, 1, 1);
    ptdp_train_result res;
    if (ptdp_state_init(&b->final, &c.model, c.optimizer, false) != 0) {
        snprintf(msg, len, "host out of memory");
        return PTDP_ENOMEM;
    }
    c.final_state = &b->final;
    int rc = ptdp_train(&c, NULL, NULL, NULL, &res, msg, len);
    if (rc != 0)
        return rc;
    for (int s = 0; s < STEPS; s++) {
        b->loss[s] = res.log[s].loss;
        b->grad_norm[s] = res.log[s].grad_norm;
    }
    ptdp_train_result_free(&res);
    return 0;
}

typedef struct {
    double loss[STEPS][WORLD_RUN], grad_norm[STEPS][WORLD_RUN];
    ptdp_state final;
} train_run;

typedef struct {
    ptdp_model *model;
    const ptdp_ddp *ddp;
    long step;
    double grad_norm;
} step_ctx;

/* The once-per-step part of ptdp_train, on the groups of your mesh:
 * all-reduce the gradients in the DP group, the norm of the whole model
 * (over the TP and PP groups), an SGD step. */
static int optimizer_step(ptdp_device *dev, void *arg)
{
    step_ctx *c = arg;
    ptdp_model *m = c->model;
    int rc = ptdp_ddp_all_reduce(m->mesh->dp_comm, c->ddp, m);
    double sumsq = 0;
    if (rc == 0)
        rc = ptdp_model_grad_sumsq(dev, m, &sumsq);
    if (rc != 0)
        return rc;
    c->grad_norm = sqrt(sumsq);
    ptdp_sgd_config sgd = { .lr = LR, .momentum = 0, .weight_decay = 0 };
    ptdp_sgd_step(m->flat_w, m->flat_g, NULL, m->numel, &sgd, c->step);
    memset(m->flat_g, 0, m->numel * sizeof(ptdp_real));
    return PTDP_OK;
}

static int train_device(ptdp_device *dev, void *arg)
{
    train_run *x = arg;
    ptdp_train_config c = run_config(DP_RUN, TP_RUN, PP_RUN, M);
    ptdp_mesh mesh = { 0 };
    ptdp_model model = { 0 };
    ptdp_ddp ddp = { 0 };
    ptdp_schedule *sched = NULL;
    int rc = lesson_mesh_create(dev, DP_RUN, TP_RUN, PP_RUN, &mesh);   /* your groups */
    if (rc == 0)
        rc = ptdp_model_init(dev, &model, &c.model, &mesh, NULL, SEED, 0.0);
    if (rc == 0 && ptdp_ddp_init(&ddp, &model, c.bucket_mb) != 0)
        rc = ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    if (rc == 0 && (rc = ptdp_schedule_create("1f1b", PP_RUN, M, &sched)) != 0)
        rc = ptdp_fail(dev, rc, "cannot build the 1f1b schedule");

    size_t shard_off = 0, shard_len = 0;
    if (rc == 0)
        ptdp_share(B, DP_RUN, mesh.dp_rank, &shard_off, &shard_len);
    for (long s = 0; rc == 0 && s < STEPS; s++) {
        step_ctx ctx = { .model = &model, .ddp = &ddp, .step = s + 1 };
        ptdp_pp_step st = {
            .model = &model, .schedule = sched, .step = s,
            .shard_first = s * (int64_t)B + (int64_t)shard_off, .shard_rows = (int)shard_len,
            .micro_batches = M, .loss_scale = 1.0 / B, .optimizer_step = optimizer_step, .optimizer_ctx = &ctx,
        };
        rc = ptdp_pp_run_step(dev, &st);
        /* Each sample's loss once: the last stage, TP rank 0, of every DP replica. */
        x->loss[s][dev->rank] = model.last_stage && mesh.tp_rank == 0 ? st.loss_sum : 0;
        x->grad_norm[s][dev->rank] = ctx.grad_norm;
    }
    if (rc == 0)   /* every parameter once: DP rank 0, each TP shard (a replicated one from TP rank 0) */
        for (int i = 0; i < model.nparams; i++) {
            const ptdp_param *p = &model.params[i];
            if (mesh.dp_rank == 0 && (p->shard != PTDP_SHARD_NONE || mesh.tp_rank == 0))
                ptdp_param_to_state(p, p->w, ptdp_state_find(&x->final, p->name));
        }
    ptdp_schedule_destroy(sched);
    ptdp_ddp_free(&ddp);
    if (model.flat_w != NULL)
        ptdp_model_free(dev, &model);
    ptdp_mesh_free(&mesh);
    return rc;
}

static bool check_training(const baseline *b)
{
    char what[96];
    snprintf(what, sizeof what, "dp %d x tp %d x pp %d trained with your groups", DP_RUN, TP_RUN, PP_RUN);
    ptdp_train_config c = run_config(DP_RUN, TP_RUN, PP_RUN, M);
    train_run *x = calloc(1, sizeof *x);
    bool ok = false;
    if (x == NULL || ptdp_state_init(&x->final, &c.model, c.optimizer, false) != 0) {
        tutorial_wrong("%s: host out of memory", what);
        free(x);
        return false;
    }
    if (tutorial_launch(what, WORLD_RUN, train_device, x) != 0)
        goto done;
    for (int s = 0; s < STEPS; s++) {
        double sum = 0;
        for (int w = 0; w < WORLD_RUN; w++)
            sum += x->loss[s][w];
        if (!ptdp_check_value(sum / B, b->loss[s], PTDP_TOLERANCE)) {
            tutorial_wrong("%s: the loss of step %d is %.12g; one device's is %.12g.", what, s + 1, sum / B,
                           b->loss[s]);
            goto done;
        }
        for (int w = 0; w < WORLD_RUN; w++)
            if (!ptdp_check_value(x->grad_norm[s][w], b->grad_norm[s], PTDP_TOLERANCE)) {
                tutorial_wrong("%s: device %d's gradient norm of step %d is %.12g; one device's is %.12g.",
                               what, w, s + 1, x->grad_norm[s][w], b->grad_norm[s]);
                goto done;
            }
    }
    ptdp_check_report rep;
    if (!ptdp_check_states(&x->final, &b->final, PTDP_TOLERANCE, &rep)) {
        tutorial_wrong("%s: after %d steps, %s differs from one device's by %.3g.", what, STEPS, rep.worst,
                       rep.max_abs);
        goto done;
    }
    tutorial_ok("%s: %d steps equal to one device — every loss, gradient norm and parameter (largest "
                "difference %.1e)", what, STEPS, rep.max_abs);
    tutorial_note("loss %.6f -> %.6f in %d steps, on 8 devices as on one", b->loss[0], b->loss[STEPS - 1],
                  STEPS);
    ok = true;
done:
    ptdp_state_free(&x->final);
    free(x);
    return ok;
}

int main(void)
{
    tutorial_begin("05", "the 3D mesh: the DP, TP and PP groups");
    bool ok = check_groups();
    if (ok) {
        static baseline base;
        char msg[PTDP_MSG_MAX];
        if (run_baseline(&base, msg, sizeof msg) != 0)
            tutorial_wrong("the single-device baseline (ptdp_train) failed: %s", msg);
        else
            check_training(&base);
        ptdp_state_free(&base.final);
    }
    return tutorial_end();
}
