/*
 * train.c — one loop for every configuration, from one device to dp x tp x pp.
 *
 * Each device thread runs device_main: build the mesh (mesh.c), its stage
 * and shard of the model (models.h), the schedule (schedule.c), and then
 * `steps` times:
 *
 *   pipeline step (pp.c)  ── F/B of every micro-batch of this DP shard,
 *                            sends and receives between stages
 *                            (ZeRO-2: a reduce-scatter after each backward)
 *   at its OPTIMIZER_STEP ── the gradients finished (zero.h): DP's
 *                            all-reduce or ZeRO's sums, then every group a
 *                            parameter declares (model.h: a tied
 *                            embedding's copies, SP's LayerNorms)
 *                            gradient norm of the whole model, clip
 *                            AdamW / SGD on what this device owns: the whole
 *                            flat buffer, or its pieces under ZeRO; zero the
 *                            gradients; ZeRO: all-gather the parameters;
 *                            the model's own buffers (ops->after_step: a
 *                            mixture's expert bias, moe.h)
 *
 * The executor stops at OPTIMIZER_STEP and the loop takes the step: control
 * runs one way, trainer → executor.  Beside the loop: the run's table
 * (run_table.c) and a device's checkpoint shards (state_shards.c).
 *
 * With --schedule interleaved --virtual-stages v the model of a device is
 * v chunks (model.h): pieces s, s + p, … of p v.  Nothing else in the loop
 * changes — DP, ZeRO, the optimizer and checkpoints see the device's one
 * flat buffer — but the schedule, and the bubble formula it reports:
 *
 *   bubble = (p - 1) / (v m + p - 1)       (1F1B: v = 1)
 *
 * The loss is the mean over the GLOBAL batch B: every micro-batch scales
 * its loss gradient by 1/B, and DP sums (dp.h explains why that, and not an
 * average of averages, is what equals the single device).
 *
 * Logging is host bookkeeping, not device communication (run_table.h):
 * each device writes its numbers for the step into the run's table, and
 * the last device to finish a step prints it.
 */
#include "ptdp/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"
#include "ptdp/mesh.h"
#include "ptdp/models.h"
#include "ptdp/mixed.h"
#include "ptdp/optim.h"
#include "ptdp/pair.h"
#include "ptdp/pp.h"
#include "ptdp/schedule.h"
#include "ptdp/zero.h"
#include "train/run_table.h"
#include "parallel/ep_impl.h"
#include "parallel/fp8_linear_impl.h"
#include "parallel/model_impl.h"
#include "parallel/moe_impl.h"
#include "parallel/pp_impl.h"
#include "parallel/zero3_fp8.h"
#include "parallel/zero3_qgz.h"
#include "parallel/zero3_qwz.h"
#include "parallel/zero_impl.h"
#include "train/state_impl.h"


/* ------------------------------------------------------ one device's run */

typedef struct {
    ptdp_run_table *r;
    ptdp_mesh mesh;
    ptdp_model model;
    ptdp_zero zero;                /* the pieces this device updates and their
                                      optimizer state (zero.h)               */
    long global_step;              /* 1-based step being taken                */
    double grad_norm;
    double first_grad_norm;        /* this run's first step's, for the
                                      divergence rule (train.h); -1 before */
    double busy0, phase_end, phase_busy;   /* the pipeline phase, for the bubble */
    ptdp_counts counts;            /* its way into the run's counters (dev->counts) */
    ptdp_fp8_linear *fp8;          /* --fp8: the model's operands quantized, NULL: off */
} device_ctx;

/* The divergence rule (train.h): a finite norm far above the first step's.
 * Checked before the update, on the norm every device shares. */
static int diverged(ptdp_device *dev, device_ctx *d)
{
    if (d->first_grad_norm < 0) {
        d->first_grad_norm = d->grad_norm;
        return PTDP_OK;
    }
    if (d->first_grad_norm > 0 && d->grad_norm > PTDP_DIVERGENCE_FACTOR * d->first_grad_norm)
        return ptdp_fail(dev, PTDP_ENONFINITE, "step %ld: the gradient norm %.4e is more than %.0e times "
                         "the first step's (%.4e): training diverged (a smaller --lr, or --clip-grad, may help)",
                         d->global_step, d->grad_norm, PTDP_DIVERGENCE_FACTOR, d->first_grad_norm);
    return PTDP_OK;
}

/* The last action of every stage's schedule: the once-per-step part.
 * Every device updates one chunk of its flat buffers: the whole buffer
 * without ZeRO, its 1/dp chunk with it (zero.h). */
static int optimizer_step(ptdp_device *dev, device_ctx *d, double loss_sum)
{
    const ptdp_train_config *c = d->r->cfg;
    ptdp_model *m = &d->model;
    ptdp_zero *z = &d->zero;
    int rc;

    /* A loss that is NaN or infinite ends the run here, before any of this
     * step's updates: on the last stage, before the norm's collectives, so
     * every other device stops at them (their reduction needs this one).
     * Every last-stage device says the same words; the first one wins. */
    if (m->last_stage && !isfinite(loss_sum))
        return ptdp_fail(dev, PTDP_ENONFINITE, "step %ld: the loss is not finite: training diverged "
                         "(a smaller --lr, or --clip-grad, may help)", d->global_step);

    /* The pipeline phase of the step ends here: measure its bubble before
     * the once-per-step work, which every stage does alike. */
    d->phase_end = dev->clock.now;
    d->phase_busy = dev->clock.compute_s + dev->clock.comm_s - d->busy0;

    /* The gradients' sums: DP's (or ZeRO's), then each group a parameter
     * declares beyond it (a tied embedding's copies, SP's LayerNorms). */
    void *g;
    if ((rc = ptdp_zero_finish_gradients(dev, z, m, &g)) != 0)
        return rc;
    double sumsq;
    if ((rc = ptdp_zero_grad_sumsq(z, m, g, &sumsq)) != 0)
        return rc;
    d->grad_norm = sqrt(sumsq);
    /* The norm is the same on every device (one sum over the whole model),
     * so every device stops here, with the same words. */
    if (!isfinite(d->grad_norm))
        return ptdp_fail(dev, PTDP_ENONFINITE, "step %ld: the gradient norm is %s: training diverged "
                         "(a smaller --lr, or --clip-grad, may help)", d->global_step,
                         isnan(d->grad_norm) ? "NaN" : "infinite");
    if ((rc = diverged(dev, d)) != 0)
        return rc;
    /* Every device updates what it owns: the whole buffer without ZeRO,
     * its pieces with it; then gathers the rest (zero.h). */
    double coef = c->clip_grad > 0 ? ptdp_clip_coefficient(d->grad_norm, c->clip_grad) : 1;
    if ((rc = ptdp_zero_step(dev, z, m, g, coef, d->global_step)) != 0)
        return rc;
    if ((rc = ptdp_model_after_step(dev, m)) != 0)
        return rc;   /* the model's buffers (a mixture's expert bias, moe.h) */
    if ((rc = ptdp_fp8_linear_step(dev, d->fp8)) != 0)
        return rc;   /* a delayed recipe's amax histories (fp8_linear.h) */
    if (c->verify_replicas && (rc = ptdp_model_check_mirror(dev, &d->model, d->global_step)) != 0)
        return rc;   /* DualPipe's copies (a replica each, model.h) */
    return c->verify_replicas ? ptdp_zero_check_replicas(dev, &d->zero, &d->model, d->global_step) : PTDP_OK;
}

/* The executor (pp.c) stops at the schedule's OPTIMIZER_STEP action, once
 * per step, for the trainer's optimizer_step; ZeRO's row may act around
 * every micro-batch's backward (ZeRO-2's bucket), and --overlap around the
 * last one (zero_impl.h, ptdp_zero_backward_hooks). */
static int around_backward_begin(ptdp_device *dev, void *ctx, bool last)
{
    device_ctx *d = ctx;
    return ptdp_zero_before_backward(dev, &d->zero, &d->model, last);
}

static int around_backward_end(ptdp_device *dev, void *ctx, bool last)
{
    device_ctx *d = ctx;
    return ptdp_zero_after_backward(dev, &d->zero, &d->model, last);
}

/* One step: the executor runs this stage's schedule, and at its
 * OPTIMIZER_STEP the trainer takes the optimizer step. */
static int run_step(ptdp_device *dev, device_ctx *d, ptdp_pp_step *st)
{
    int rc = ptdp_pp_begin(dev, st);
    while (rc == 0 && (rc = ptdp_pp_run(dev, st)) == PTDP_PP_AT_OPTIMIZER)
        rc = optimizer_step(dev, d, st->loss_sum);
    ptdp_pp_end(dev, st);
    return rc;
}

/* With token slices the schedule's "micro-batches" are the m k tasks
 * (micro-batch, slice), slice fastest (pp.h). */
static int make_schedule(ptdp_device *dev, const ptdp_train_config *c, ptdp_schedule **out)
{
    const char *name = ptdp_train_schedule(c)->name;
    const int tasks = c->micro_batches * ptdp_train_token_slices(c);
    int rc = ptdp_schedule_build(ptdp_train_schedule(c), c->pp, tasks, ptdp_train_virtual_stages(c), out);
    if (rc == PTDP_ENOMEM)   /* the host's memory, not the flags (validation accepted them) */
        return ptdp_fail(dev, rc, "host out of memory building the %s schedule for pp=%d, m=%d, v=%d",
                         name, c->pp, tasks, ptdp_train_virtual_stages(c));
    if (rc != 0)
        return ptdp_fail(dev, PTDP_EINVAL, "cannot build the %s schedule for pp=%d, m=%d, v=%d",
                         name, c->pp, tasks, ptdp_train_virtual_stages(c));
    return PTDP_OK;
}

/* The device that counts what a router did for its tokens (counters.h's
 * PTDP_COUNT_TP_ONCE): the first of the ranks that route the same rows —
 * a TP group's, or under MoE parallel folding an experts' TP group's
 * (moe_fold.c: each slice of a TP group routes its own rows). */
static bool routes_lead(const ptdp_train_config *c, const ptdp_mesh *m)
{
    return m->tp_rank % (c->etp > 0 ? c->etp : c->tp) == 0;
}

static int device_setup(ptdp_device *dev, device_ctx *d)
{
    const ptdp_train_config *c = d->r->cfg;
    int rc;
    dev->bf16 = c->bf16;   /* products at the profile's bf16 peak, if it has one */
    dev->fp8 = c->fp8.recipe != NULL;   /* linear products at the FP8 peak, with quantization (clock.h) */
    ptdp_pair_set_serial(dev, c->serial_pairs);   /* --no-pair-overlap (pair.h) */
    if ((rc = ptdp_mesh_init_cp(dev, c->dp, ptdp_train_cp(c), c->tp, c->pp, &d->mesh)) != 0)
        return rc;
    ptdp_run_table_counts(d->r, -1, dev->rank, routes_lead(c, &d->mesh), &d->counts);
    dev->counts = &d->counts;   /* whatever the model and the parallelisms count (counters.h) */
    d->mesh.cp_zigzag = !c->cp_contiguous;
    d->mesh.cp_a2a = c->cp_a2a;
    d->mesh.ep = c->ep > 1 ? c->ep : 1;   /* before the model: it builds the expert groups */
    d->mesh.etp = ptdp_train_fold_slices(c) > 1 ? c->etp : 0;   /* MoE parallel folding (moe_fold.c) */
    d->mesh.shard = c->shard_group;       /* HSDP: ZeRO builds the shard groups (zero_hsdp.c) */
    d->mesh.hpz = c->zero_hpz;            /* hpZ: ZeRO builds the node groups (zero_hpz.c) */
    d->mesh.qwz = c->zero_qwz;            /* qwZ: ZeRO-3's forward gathers in INT8 (zero3_qwz.c) */
    d->mesh.qgz_bits = c->zero_qgz;       /* qgZ: ZeRO-3's gradient all-to-alls (zero3_qgz.c) */
    d->mesh.qgz_block = c->zero_qgz_block;
    d->mesh.qgz_node = c->zero_qgz_node;
    if (c->zero_qwz_emulate > 0 && c->bf16) {   /* bf16's --check device: ZeRO's widening quantizes */
        d->mesh.qwz = c->zero_qwz_emulate_block;
        d->mesh.qwz_ranks = c->zero_qwz_emulate;
    }
    d->mesh.sp = c->sp;     /* before the model: it decides the model's layout */
    d->mesh.pp_layout = ptdp_train_layout(c);   /* before the model and its groups: where its chunks lie */
    if ((rc = ptdp_model_init_v(dev, &d->model, &c->model, &d->mesh, c->stage_layers,
                                ptdp_train_virtual_stages(c), c->seed, c->dropout)) != 0)
        return rc;
    d->model.recompute_core = c->recompute_core;
    d->model.attention_tiled = c->attention_tiled;
    d->model.overlap = c->overlap;   /* SP's backward gathers on the communication stream */
    d->model.bf16 = c->bf16;   /* before ZeRO, which makes the stores (mixed.h) */
    if (c->fp8.recipe != NULL &&
        (rc = ptdp_fp8_linear_create(dev, &c->fp8, &d->model, d->mesh.tp_comm, d->mesh.cp_comm, d->mesh.dp_comm,
                                     &d->fp8)) != 0)
        return rc;
    d->model.fp8 = d->fp8;
    for (int k = 0; d->model.chunks != NULL && k < d->model.virtual_stages; k++) {
        d->model.chunks[k].recompute_core = c->recompute_core;
        d->model.chunks[k].attention_tiled = c->attention_tiled;
        d->model.chunks[k].overlap = c->overlap;
        d->model.chunks[k].fp8 = d->fp8;
    }
    if ((rc = ptdp_zero_init_buckets(dev, &d->zero, &d->model, c->zero, c->bucket_mb)) != 0)   /* ZeRO-1: DP's */
        return rc;
    if (c->zero_qwz_emulate > 0 && !c->bf16 &&   /* --check's one device of a qwZ run (bf16: ZeRO's hook) */
        (rc = ptdp_zero_qwz_emulate(dev, &d->model, c->zero_qwz_emulate, c->zero_qwz_emulate_block)) != 0)
        return rc;
    if (c->zero_qgz_emulate > 0 &&   /* --check's one device of a qgZ run: after qwZ's hook, calling it */
        (rc = ptdp_zero_qgz_emulate(dev, &d->model, c->zero_qgz_emulate_dp, c->zero_qgz_emulate, c->zero_qgz_node,
                                    c->micro_batches / c->zero_qgz_emulate_dp, c->zero_qgz_emulate_bits,
                                    c->zero_qgz_block)) != 0)
        return rc;
    ptdp_zero_set_overlap(&d->zero, c->overlap);   /* DP's buckets, ZeRO's reduce-scatters and gathers */
    /* The optimizer state covers the chunk this device updates. */
    const ptdp_optimizer o = { .kind = c->optimizer, .lr = c->lr, .momentum = c->momentum,
                               .weight_decay = c->weight_decay };
    if ((rc = ptdp_zero_optim_init(dev, &d->zero, &o)) != 0)
        return rc;
    if (c->resume != NULL && (rc = ptdp_state_load_device(dev, c->resume, &d->model, &d->zero)) != 0)
        return rc;
    if (c->resume != NULL)
        ptdp_state_load_fp8(c->resume, &d->model, d->fp8);   /* delayed scaling's histories */
    if (c->init_state != NULL)
        ptdp_state_save_device(c->init_state, &d->model, &d->zero, false);
    /* read by the host after step 0 (mutex); a process of its own (MPI)
     * has a table of its own, which a failing process writes (--log) */
    if (dev->rank == 0 || !ptdp_host_shared(dev))
        d->r->targets_per_sample = d->model.label_cols;
    if (d->r->result != NULL && d->r->result->param_elements != NULL)
        d->r->result->param_elements[dev->rank] = d->model.numel;   /* its own slot */
    ptdp_ep_count_experts(dev, &d->model);
    /* ZeRO-2 freed the model's full-size gradient buffer a moment ago (ZeRO-3
     * its parameters too, bf16 both): start the peaks from the set-up
     * device, so they show training, not set-up. */
    if (ptdp_zero_freed_model_buffers(&d->zero))
        ptdp_arena_reset_peaks(dev->arena);
    return PTDP_OK;
}

static void device_teardown(ptdp_device *dev, device_ctx *d)
{
    dev->counts = NULL;
    ptdp_zero_qgz_emulate_free(&d->model);   /* --check's one device of a qgZ run, then qwZ's */
    ptdp_zero_qwz_emulate_free(&d->model);   /* --check's one device of a qwZ run */
    ptdp_zero_free(dev, &d->zero, &d->model);
    ptdp_fp8_linear_destroy(dev, d->fp8);
    ptdp_model_free(dev, &d->model);
    ptdp_mesh_free(&d->mesh);
}

static int device_main(ptdp_device *dev, void *arg)
{
    ptdp_run_table *r = arg;
    const ptdp_train_config *c = r->cfg;
    device_ctx d = { .r = r, .first_grad_norm = -1 };
    ptdp_schedule *sched = NULL;
    int rc = device_setup(dev, &d);
    if (rc == 0)
        rc = make_schedule(dev, c, &sched);

    size_t shard_off, shard_len;
    ptdp_share((size_t)c->batch, c->dp, d.mesh.dp_rank, &shard_off, &shard_len);
    for (int s = 0; rc == 0 && s < c->steps; s++) {
        long step = r->first_step + s;    /* 0-based global step */
        d.global_step = step + 1;
        ptdp_run_row x = { .v0 = dev->clock.now, .w0 = ptdp_wall_now(), .bytes = dev->stats.total_sent };
        double busy0 = dev->clock.compute_s + dev->clock.comm_s;
        ptdp_run_table_counts(r, s, dev->rank, routes_lead(c, &d.mesh), &d.counts);   /* its counters of step s */

        if ((c->dump_x != NULL || c->dump_tokens != NULL) && dev->rank == 0) {
            /* Device 0 is on the first stage and, when pp = 1, the last:
             * the model fills whatever its stages hold a data source for
             * (its chunk 0, the model's first piece, when interleaved). */
            ptdp_model *m = ptdp_model_chunk(&d.model, 0);
            ptdp_batch gb = {
                .first = step * (int64_t)c->batch, .rows = c->batch,
                .labels = c->dump_y + (size_t)s * c->batch * m->label_cols,
            };
            if (m->input_tokens && c->dump_tokens != NULL)
                gb.tokens = c->dump_tokens + (size_t)s * c->batch * m->input_cols;
            else if (!m->input_tokens && c->dump_x != NULL)
                gb.x = ptdp_tensor_wrap(c->dump_x + (size_t)s * c->batch * m->input_cols, c->batch, m->input_cols);
            m->ops->fill_batch(m, &gb);
        }
        ptdp_pp_step st = {
            .model = &d.model, .schedule = sched, .step = step,
            .shard_first = step * (int64_t)c->batch + (int64_t)shard_off, .shard_rows = (int)shard_len,
            .micro_batches = c->micro_batches, .token_slices = ptdp_train_token_slices(c),
            .recompute = c->recompute,
            .loss_scale = 1.0 / ((double)c->batch * d.model.label_cols),
            .backward_begin = ptdp_zero_backward_hooks(&d.zero) ? around_backward_begin : NULL,
            .backward_end = ptdp_zero_backward_hooks(&d.zero) ? around_backward_end : NULL,
            .hook_ctx = &d,
        };
        d.busy0 = busy0;
        rc = run_step(dev, &d, &st);   /* ends with the schedule's OPTIMIZER_STEP */
        if (rc != 0)
            break;
        x.phase_end = d.phase_end;
        x.busy = d.phase_busy;
        if (st.peak_in_flight > r->peak_in_flight[dev->rank])
            r->peak_in_flight[dev->rank] = st.peak_in_flight;
        if (st.wgrad_peak_bytes > r->peak_wgrad[dev->rank])
            r->peak_wgrad[dev->rank] = st.wgrad_peak_bytes;
        x.v1 = dev->clock.now;
        x.w1 = ptdp_wall_now();
        x.bytes = dev->stats.total_sent - x.bytes;
        x.loss = d.model.last_stage && d.mesh.tp_rank == 0 ? st.loss_sum : 0;
        x.grad_norm = d.grad_norm;
        if ((rc = ptdp_run_table_step_done(dev, r, s, &x)) != 0)
            break;
    }
    if (rc == 0 && c->final_state != NULL) {
        ptdp_state_save_device(c->final_state, &d.model, &d.zero, true);
        ptdp_state_save_fp8(c->final_state, &d.model, d.fp8);
    }
    ptdp_mem_stats ms;
    ptdp_arena_stats(dev->arena, &ms);
    r->peak_acts[dev->rank] = ms.peak[PTDP_MEM_ACTS];
    if (rc == 0 && !ptdp_host_shared(dev))
        rc = ptdp_run_table_merge_hosts(dev, r);
    ptdp_schedule_destroy(sched);
    device_teardown(dev, &d);
    return rc;
}

/* ------------------------------------------------------------ the host */

/* The run's counters (counters.h), named before any device starts: the
 * model's, then those of each parallelism that counts something. */
static int publish_counters(const ptdp_train_config *cfg, const ptdp_profile *profile, ptdp_counters *reg,
                            char *msg, size_t msglen)
{
    const ptdp_model_ops *ops = ptdp_model_of(&cfg->model);
    ptdp_counters_init(reg);
    int rc = ops != NULL && ops->publish != NULL ? ops->publish(&cfg->model, reg) : PTDP_OK;
    const bool folded = ptdp_train_fold_slices(cfg) > 1;   /* MoE parallel folding (moe_fold.c) */
    if (rc == 0 && (cfg->ep > 1 || folded))   /* the experts' own counters: their bytes, their elements */
        rc = ptdp_ep_publish(reg);
    if (rc == 0 && folded)   /* ... and the re-layout's */
        rc = ptdp_moe_fold_publish(reg);
    if (rc == 0 && cfg->ep > 1 && profile != NULL && profile->gpus_per_node > 0)   /* a cluster of nodes */
        rc = ptdp_ep_nodes_publish(reg);
    if (rc == 0 && cfg->zero_hpz > 0)
        rc = ptdp_zero_hpz_publish(reg);
    if (rc == 0 && cfg->zero == 3 && cfg->fp8.comm)
        rc = ptdp_zero3_fp8_publish(reg);
    if (rc == 0 && cfg->zero_qwz > 0)
        rc = ptdp_zero3_qwz_publish(reg);
    if (rc == 0 && cfg->zero_qgz > 0)
        rc = ptdp_zero3_qgz_publish(reg);
    if (rc == 0 && cfg->fp8.recipe != NULL && cfg->fp8.recipe->uses_history)
        rc = ptdp_fp8_linear_publish(reg);
    if (rc != 0)
        snprintf(msg, msglen, "the run's counter \"%s\" was refused: a name published twice, too long, "
                 "or more than %d counters (counters.h)", reg->refused, PTDP_COUNTERS_MAX);
    return rc;
}

int ptdp_train(const ptdp_train_config *cfg, const ptdp_launch_opts *opts,
               ptdp_step_observer observer, void *observer_ctx,
               ptdp_train_result *result, char *msg, size_t msglen)
{
    int rc = ptdp_train_validate(cfg, msg, msglen);
    if (rc != 0)
        return rc;
    int world = cfg->dp * ptdp_train_cp(cfg) * cfg->tp * cfg->pp;
    ptdp_counters counters;
    if ((rc = publish_counters(cfg, opts != NULL ? opts->profile : NULL, &counters, msg, msglen)) != 0)
        return rc;
    ptdp_run_table r;
    if ((rc = ptdp_run_table_open(&r, cfg, &counters, world, observer, observer_ctx, result, msg, msglen)) != 0)
        return rc;
    for (ptdp_state *s = cfg->final_state; s != NULL; s = NULL) {
        s->seed = cfg->seed;
        s->batch = cfg->batch;
        s->step = r.first_step + cfg->steps;
    }
    if (cfg->init_state != NULL) {
        cfg->init_state->seed = cfg->seed;
        cfg->init_state->batch = cfg->batch;
        cfg->init_state->step = r.first_step;
    }

    ptdp_launch_result local;
    ptdp_launch_opts o = opts ? *opts : (ptdp_launch_opts){ 0 };
    if (o.result == NULL)
        o.result = &local;
    rc = ptdp_launch(world, device_main, &r, &o);
    if (rc != 0)
        snprintf(msg, msglen, "%s", o.result->message);
    if (result != NULL)
        result->completed = r.next_report;
    if (o.result == &local)
        ptdp_launch_result_free(&local);
    ptdp_run_table_close(&r, rc == 0);
    return rc;
}

void ptdp_train_result_free(ptdp_train_result *r)
{
    free(r->log);
    free(r->peak_acts);
    free(r->peak_wgrad);
    free(r->param_elements);
    free(r->step_counts);
    free(r->device_counts);
    r->step_counts = r->device_counts = NULL;
    r->log = NULL;
    r->peak_acts = NULL;
    r->peak_wgrad = NULL;
    r->param_elements = NULL;
}

/* ----------------------------------------------------------------- check */

ptdp_train_config ptdp_train_baseline(const ptdp_train_config *cfg)
{
    ptdp_train_config b = *cfg;
    b.dp = b.tp = b.pp = 1;
    b.micro_batches = 1;
    /* FP8 with one scale a tensor: the scale is a micro-batch's */
    if (cfg->fp8.recipe != NULL && cfg->fp8.recipe->whole_tensor)
        b.micro_batches = cfg->dp * cfg->micro_batches;
    b.stage_layers = NULL;
    b.virtual_stages = 0;   /* one device: one chunk, and a schedule that runs on one stage */
    char why[256];
    if (ptdp_schedule_check_row(ptdp_train_schedule(&b), 1, 1, 1, why, sizeof why) != 0)
        b.schedule = ptdp_schedule_default();
    b.recompute = b.recompute_core = false;
    b.sp = false;
    b.cp = 0;
    b.cp_contiguous = b.cp_a2a = false;
    b.ep = 0;
    b.etp = 0;   /* one device: the experts whole, as attention */
    b.fp8.comm = false;  /* FP8's dispatch is EP's */
    b.zero = 0;
    b.shard_group = 0;   /* HSDP needs ZeRO and dp > 1 */
    b.zero_hpz = 0;      /* hpZ needs ZeRO-3 */
    if (cfg->zero_qwz > 0) {   /* qwZ: one device quantizes each unit as the ZeRO group's shards (zero3_qwz.c) */
        b.zero_qwz_emulate = cfg->shard_group > 0 ? cfg->shard_group : cfg->dp * ptdp_train_cp(cfg);
        b.zero_qwz_emulate_block = cfg->zero_qwz;
    }
    b.zero_qwz = 0;
    if (cfg->zero_qgz > 0) {   /* qgZ: one device sums each rank's micro-batches as its all-to-alls (zero3_qgz.c) */
        b.micro_batches = cfg->dp * cfg->micro_batches;   /* replica r's i-th as the r M + i-th */
        b.zero_qgz_emulate = cfg->shard_group > 0 ? cfg->shard_group : cfg->dp;
        b.zero_qgz_emulate_dp = cfg->dp;
        b.zero_qgz_emulate_bits = cfg->zero_qgz;
    }
    b.zero_qgz = 0;
    b.overlap = false;
    return b;
}

bool ptdp_check_value(double a, double b, double tol)
{
    return fabs(a - b) <= tol * fmax(1.0, fabs(b));
}

bool ptdp_check_states(const ptdp_state *a, const ptdp_state *b, double tol, ptdp_check_report *rep)
{
    memset(rep, 0, sizeof *rep);
    rep->ok = true;
    double worst_ratio = -1;
    for (int i = 0; i < b->ntensors && i < a->ntensors; i++) {
        const ptdp_state_tensor *ta = &a->t[i], *tb = &b->t[i];
        if (strncmp(tb->name, "optim.", 6) == 0)
            continue;    /* parameters are what must match; moments follow them */
        double max_abs = 0, max_b = 0;
        size_t n = (size_t)tb->rows * (size_t)tb->cols;
        for (size_t k = 0; k < n; k++) {
            double d = fabs((double)ta->data[k] - (double)tb->data[k]);
            double mb = fabs((double)tb->data[k]);
            max_abs = fmax(max_abs, d);
            max_b = fmax(max_b, mb);
        }
        /* "relative" as the rule measures it: against max(1, max|b|). */
        double ratio = max_abs / fmax(1.0, max_b);
        rep->max_abs = fmax(rep->max_abs, max_abs);
        rep->max_rel = fmax(rep->max_rel, ratio);
        if (ratio > worst_ratio) {
            worst_ratio = ratio;
            snprintf(rep->worst, sizeof rep->worst, "%s", tb->name);
        }
        if (!(max_abs <= tol * fmax(1.0, max_b)))
            rep->ok = false;
    }
    return rep->ok;
}
