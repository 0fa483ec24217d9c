/*
 * pp_step.h — one pipeline step run by hand, for the tests of the executor.
 *
 * The CLI's trainer hides the executor behind a loop over steps; these
 * tests want it bare, so that what a schedule promises can be read off one
 * step: assemble a device's stage from the library's pieces (mesh, model),
 * give ptdp_pp_run_step the schedule, and note what each stage saw.
 *
 *     pp devices:  mesh (1 x 1 x pp) -> model chunks (v of them) ->
 *                  ptdp_pp_run_step(schedule) -> what the stage saw
 *
 * What a stage saw: the most micro-batches it held at once (the schedule's
 * in-flight count), the most bytes of deferred weight gradients (a zero
 * bubble schedule's W), the activations left after the step (none: a step
 * gives back all it allocates), how often its optimizer hook ran, and, on
 * the last stage, the loss.
 */
#ifndef PTDP_TESTS_PP_STEP_H
#define PTDP_TESTS_PP_STEP_H

#include <stddef.h>

#include "harness.h"
#include "ptdp/arena.h"
#include "ptdp/mesh.h"
#include "ptdp/models.h"
#include "ptdp/pp.h"

typedef struct {
    /* the step */
    const ptdp_schedule *schedule;
    ptdp_model_config model;
    int batch;                  /* rows of the step, all micro-batches */
    int micro_batches;          /* what the step is told; 0: the schedule's */
    int model_v;                /* model chunks a stage; 0: the schedule's v */
    /* what each stage saw */
    int peak_in_flight[PTDP_MAX_DEVICES];
    int optimizer_calls[PTDP_MAX_DEVICES];
    size_t wgrad_peak[PTDP_MAX_DEVICES];
    size_t acts_after[PTDP_MAX_DEVICES];
    double loss_sum;
} pp_step_arg;

/* The optimizer hook: only counted, so the step changes no weight. */
static inline int pp_step_count_optimizer(ptdp_device *dev, void *ctx)
{
    pp_step_arg *a = ctx;
    a->optimizer_calls[dev->rank]++;
    return PTDP_OK;
}

/* The device function: one step of a->schedule on this device's stage. */
static inline int pp_step_device(ptdp_device *dev, void *arg)
{
    pp_step_arg *a = arg;
    const ptdp_schedule *s = a->schedule;
    ptdp_mesh mesh;
    ptdp_model m;
    int rc = ptdp_mesh_init(dev, 1, 1, s->pp, &mesh);
    if (rc != 0)
        return rc;
    int v = a->model_v ? a->model_v : s->virtual_stages;
    if ((rc = ptdp_model_init_v(dev, &m, &a->model, &mesh, NULL, v, 3, 0.0)) != 0) {
        ptdp_mesh_free(&mesh);   /* the runs that must fail free what they made, for LeakSanitizer */
        return rc;
    }
    ptdp_pp_step st = {
        .model = &m, .schedule = s, .step = 0, .shard_first = 0, .shard_rows = a->batch,
        .micro_batches = a->micro_batches ? a->micro_batches : s->micro_batches,
        .loss_scale = 1.0 / a->batch, .optimizer_step = pp_step_count_optimizer, .optimizer_ctx = a,
    };
    rc = ptdp_pp_run_step(dev, &st);
    a->peak_in_flight[mesh.pp_rank] = st.peak_in_flight;
    a->wgrad_peak[mesh.pp_rank] = st.wgrad_peak_bytes;
    ptdp_mem_stats ms;
    ptdp_arena_stats(dev->arena, &ms);
    a->acts_after[mesh.pp_rank] = ms.current[PTDP_MEM_ACTS];
    if (m.last_stage)
        a->loss_sum = st.loss_sum;
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return rc;
}

#endif
