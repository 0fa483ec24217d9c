/*
 * plan_vs_train.h — the planner against the simulator on one layout: what
 * `ptdp plan` predicts for it, and what `ptdp train` measures when it runs
 * it (two steps, the second timed):
 *
 *   memory   the plan's total per device  vs  the arena's peak on the
 *            device that peaked highest
 *   time     the plan's step              vs  the virtual clock's step 2
 *
 * both within tol (a fraction), printed term by term beside each other so
 * a failure shows which term the planner got wrong.
 */
#ifndef PTDP_TESTS_PLAN_VS_TRAIN_H
#define PTDP_TESTS_PLAN_VS_TRAIN_H

#include <math.h>
#include <stdio.h>

#include "gpt_shape.h"
#include "harness.h"
#include "ptdp/arena.h"
#include "ptdp/error.h"
#include "ptdp/gpt.h"
#include "ptdp/plan.h"
#include "ptdp/plan_search.h"
#include "ptdp/clock.h"
#include "ptdp/schedule.h"
#include "ptdp/train.h"

/* A test case's layout, as its table writes it: B sequences in
 * micro-batches of b over dp replicas (M = B / (b dp)); cp and v of
 * 0 mean 1 (ep as given), a NULL schedule 1f1b. */
typedef struct {
    int dp, tp, pp, cp, ep, b, v, zero;
    ptdp_recompute recompute;
    const char *schedule;
    bool sp, overlap;
} plan_layout_fields;

static inline ptdp_plan_layout plan_layout(plan_layout_fields f, long long batch)
{
    ptdp_plan_layout l = {
        .dp = f.dp, .tp = f.tp, .pp = f.pp, .cp = f.cp > 1 ? f.cp : 1, .ep = f.ep,
        .micro_batch_size = f.b, .micro_batches = (int)(batch / ((long long)f.b * f.dp)),
        .virtual_stages = f.v > 1 ? f.v : 1, .recompute = f.recompute, .zero = f.zero, .sp = f.sp,
        .overlap = f.overlap,
    };
    l.schedule = ptdp_schedule_find(f.schedule != NULL ? f.schedule : "1f1b");
    return l;
}

/* The second step's virtual time of `ptdp train` on the plan's layout. */
static inline double plan_measured_step(const ptdp_plan_request *rq, const ptdp_plan_layout *l)
{
    ptdp_train_config cfg;
    ptdp_plan_train_config(rq, l, &cfg);
    cfg.steps = 2;
    ptdp_launch_opts opts = { .profile = rq->profile, .device_mem = (size_t)256 << 20 };
    ptdp_train_result res;
    char msg[PTDP_MSG_MAX];
    ck_assert_msg(ptdp_train(&cfg, &opts, NULL, NULL, &res, msg, sizeof msg) == 0, "ptdp_train: %s", msg);
    ck_assert_int_eq(res.completed, 2);
    const double t = res.log[1].virtual_s;
    ptdp_train_result_free(&res);
    return t;
}

/* A test's question to the planner: model m, B sequences, on `gpus` GPUs
 * of `profile` (NULL: dgx-a100), in bf16 or not. */
static inline ptdp_plan_request plan_question(ptdp_model_config m, long long batch, int gpus, const char *profile,
                                              bool bf16)
{
    ptdp_plan_request rq = ptdp_plan_request_defaults();
    rq.model = m;
    rq.batch = batch;
    rq.gpus = gpus;
    rq.profile = ptdp_profile_find(profile != NULL ? profile : "dgx-a100");
    rq.bf16 = bf16;
    return rq;
}

static inline void plan_vs_train(const char *name, const ptdp_plan_request *rq, const ptdp_plan_layout *l,
                                 double tol)
{
    char msg[PTDP_MSG_MAX];
    ck_assert_msg(rq->profile != NULL, "%s: no such profile", name);
    ck_assert_msg(ptdp_plan_layout_check(rq, l, msg, sizeof msg) == 0, "%s: %s", name, msg);
    ptdp_plan_memory pm;
    ptdp_plan_time pt;
    ck_assert_int_eq(ptdp_plan_memory_of(rq, l, &pm), 0);
    ck_assert_int_eq(ptdp_plan_time_of(rq, l, &pt), 0);

    ptdp_train_config cfg;
    ptdp_plan_train_config(rq, l, &cfg);
    cfg.steps = 2;
    ptdp_launch_result lr = { 0 };
    ptdp_launch_opts opts = { .profile = rq->profile, .device_mem = (size_t)256 << 20, .result = &lr };
    ptdp_train_result tr;
    ck_assert_msg(ptdp_train(&cfg, &opts, NULL, NULL, &tr, msg, sizeof msg) == 0, "%s: %s %s", name, msg,
                  lr.message);
    ck_assert_int_eq(tr.completed, 2);
    int worst = 0;
    for (int d = 1; d < lr.world_size; d++)
        if (lr.devices[d].mem.peak_total > lr.devices[worst].mem.peak_total)
            worst = d;
    const ptdp_mem_stats *ms = &lr.devices[worst].mem;
    const double mem = (double)ms->peak_total, step = tr.log[1].virtual_s;
    const double em = pm.total / mem - 1, et = pt.step_s / step - 1;
    printf("%-26s memory plan %9.0f measured %9.0f %+6.2f%% | step plan %9.3f us measured %9.3f us %+6.2f%% "
           "(ep %.3f us a micro-batch, bubble %.3f)\n", name, pm.total, mem, 100 * em, pt.step_s * 1e6,
           step * 1e6, 100 * et, pt.ep_comm_s * 1e6, pt.bubble);
    printf("    plan     stage %d params %.0f grads %.0f optim %.0f acts %.0f comm %.0f other %.0f (%d in flight)\n",
           pm.stage, pm.params, pm.grads, pm.optim, pm.acts, pm.comm, pm.other, pm.in_flight);
    printf("    measured dev %d params %zu grads %zu optim %zu acts %zu comm %zu other %zu (each its own peak)\n",
           worst, ms->peak[PTDP_MEM_PARAMS], ms->peak[PTDP_MEM_GRADS], ms->peak[PTDP_MEM_OPTIM],
           ms->peak[PTDP_MEM_ACTS], ms->peak[PTDP_MEM_COMM], ms->peak[PTDP_MEM_OTHER]);
    fflush(stdout);
    ck_assert_msg(fabs(em) <= tol, "%s: memory plan %.0f bytes, measured %.0f (%+.2f%%)", name, pm.total, mem,
                  100 * em);
    ck_assert_msg(fabs(et) <= tol, "%s: step plan %.6g s, measured %.6g s (%+.2f%%)", name, pt.step_s, step,
                  100 * et);
    ptdp_train_result_free(&tr);
    ptdp_launch_result_free(&lr);
}

/* A table's row against the simulator, within 5%. */
static inline void plan_row_vs_train(const char *name, ptdp_plan_request rq, ptdp_plan_layout l)
{
    plan_vs_train(name, &rq, &l, 0.05);
}

/* Every layout the search offers for rq, best first (no memory limit, no
 * cut; the test fails if the search does, or offers none); *n of them,
 * each checked: the lower bound of its step is positive and not above the
 * step.  Free the array. */
static inline ptdp_plan_candidate *plan_search_all(const ptdp_plan_request *rq, int *n)
{
    ptdp_plan_candidate *all = NULL;
    ptdp_plan_search_stats st;
    char msg[PTDP_MSG_MAX];
    ck_assert_msg(ptdp_plan_search_top(rq, 0, 0, &all, n, &st, msg, sizeof msg) == 0, "%s", msg);
    ck_assert_int_gt(*n, 0);
    for (int i = 0; i < *n; i++) {
        const double bound = ptdp_plan_step_lower_bound(rq, &all[i].layout);
        ck_assert_msg(bound > 0 && bound <= all[i].time.step_s * (1 + 1e-12), "layout %d: bound %.9g above its "
                      "step %.9g", i, bound, all[i].time.step_s);
    }
    return all;
}

#endif
