/*
 * pp.c — the executor: any schedule (GPipe, 1F1B, …) runs through one switch.
 *
 * Per micro-batch mb this stage keeps (all in its arena):
 *   data[mb]  its samples: the input on stage 0, the labels on the last
 *   in[mb]    the received input activation (other stages)
 *   acts[mb]  what the forward leaves for the backward (the model's)
 *   out[mb]   the output activation, until it is sent
 *   dout[mb]  the received gradient of the output
 *   dx[mb]    the gradient of the input, until it is sent
 *   wgrad[mb] a split backward's weight-gradient products, recorded by
 *             BACKWARD_INPUT ("B") with copies of their operands, run by
 *             BACKWARD_WEIGHT ("W") (wgrad.h)
 * Each is freed as soon as it is no longer needed, so the arena's peak of
 * "acts" shows how many micro-batches a schedule keeps alive: m for GPipe,
 * at most p - stage for 1F1B; a split backward releases its micro-batch at W.
 *
 * Tags: 2 mb for activations, 2 mb + 1 for their gradients.
 */
#include "ptdp/pp.h"

#include <stdlib.h>

#include "ptdp/comm.h"
#include "ptdp/device.h"
#include "ptdp/error.h"

typedef struct {
    ptdp_batch data;   /* first sample, rows; input and labels once loaded */
    ptdp_tensor in, out, dout, dx;
    ptdp_acts acts;
    ptdp_wgrad wgrad;  /* B's records for W                                */
} micro_batch;

static int tag_of(int mb, int backward) { return 2 * mb + backward; }

static void release(ptdp_device *dev, ptdp_model *m, micro_batch *b)
{
    ptdp_tensor_free(dev, &b->in);
    ptdp_tensor_free(dev, &b->out);
    ptdp_tensor_free(dev, &b->dout);
    ptdp_tensor_free(dev, &b->dx);
    ptdp_batch_free(dev, &b->data);
    ptdp_acts_free(dev, m, &b->acts);
    ptdp_wgrad_free(dev, &b->wgrad);
}

/* The executor trusts a schedule's order (the validator proves it), but a
 * hand-written list can still name a micro-batch that does not exist or do
 * things out of order; say which action, rather than compute on a tensor
 * that was never received.  Deadlocks are left to the watchdog: they are
 * what a student should see happen. */
static int check_action(ptdp_device *dev, const ptdp_pp_step *st, const micro_batch *mbs,
                        const ptdp_action *a, int index)
{
    const ptdp_model *m = st->model;
    int stage = m->mesh->pp_rank;
    const char *why = NULL;
    if (a->kind == PTDP_ACT_OPTIMIZER_STEP)
        return PTDP_OK;
    if (a->mb < 0 || a->mb >= st->micro_batches)
        return ptdp_fail(dev, PTDP_EINVAL, "pipeline stage %d, action %d (%s): micro-batch %d of %d micro-batches",
                         stage, index, ptdp_action_kind_name(a->kind), a->mb, st->micro_batches);
    const micro_batch *b = &mbs[a->mb];
    bool received_input = m->first_stage || b->in.data != NULL;
    bool received_grad = m->last_stage || b->dout.data != NULL;
    switch (a->kind) {
    case PTDP_ACT_RECV_FORWARD:
        why = m->first_stage ? "stage 0 reads its input from the data" :
              b->in.data || b->acts.alive ? "received twice" : NULL;
        break;
    case PTDP_ACT_FORWARD:
        why = b->acts.alive ? "forwarded twice" : !received_input ? "its input was not received" : NULL;
        break;
    case PTDP_ACT_SEND_FORWARD:
        why = b->out.data == NULL ? "no output to send" : NULL;
        break;
    case PTDP_ACT_RECV_BACKWARD:
        why = m->last_stage ? "the last stage computes its gradient from the loss" :
              !b->acts.alive || b->dout.data ? "no gradient expected" : NULL;
        break;
    case PTDP_ACT_BACKWARD:
        why = !b->acts.alive ? "not forwarded (or backwarded twice)" :
              !received_grad ? "its output gradient was not received" : NULL;
        break;
    case PTDP_ACT_SEND_BACKWARD:
        why = b->dx.data == NULL ? "no input gradient to send" : NULL;
        break;
    case PTDP_ACT_BACKWARD_INPUT:
        why = !b->acts.alive ? "not forwarded (or its backward already ran)" :
              !received_grad ? "its output gradient was not received" : NULL;
        break;
    case PTDP_ACT_BACKWARD_WEIGHT:
        why = b->acts.alive ? "its BACKWARD_INPUT has not run (W before B)" :
              !b->wgrad.pending ? "no BACKWARD_INPUT left weight gradients to compute (W twice, or without B)" : NULL;
        break;
    default:
        break;
    }
    if (why != NULL)
        return ptdp_fail(dev, PTDP_EINVAL, "pipeline stage %d, action %d (%s of micro-batch %d): %s",
                         stage, index, ptdp_action_kind_name(a->kind), a->mb, why);
    return PTDP_OK;
}

static int run_action(ptdp_device *dev, ptdp_pp_step *st, micro_batch *mbs, const ptdp_action *a, int *alive)
{
    ptdp_model *m = st->model;
    ptdp_comm *pp = m->mesh->pp_comm;
    int h = m->boundary_cols, rc = PTDP_OK;
    micro_batch *b = a->mb >= 0 ? &mbs[a->mb] : NULL;

    switch (a->kind) {
    case PTDP_ACT_RECV_FORWARD:
        if ((rc = ptdp_tensor_alloc(dev, &b->in, "pp.recv_act", PTDP_MEM_ACTS, b->data.rows, h)) != 0)
            return rc;
        return ptdp_recv(pp, b->in.data, ptdp_tensor_numel(b->in), PTDP_REAL, a->peer, tag_of(a->mb, 0));
    case PTDP_ACT_FORWARD:
        if ((rc = ptdp_batch_load(dev, m, &b->data)) != 0)
            return rc;
        if (!m->last_stage &&
            (rc = ptdp_tensor_alloc(dev, &b->out, "pp.send_act", PTDP_MEM_ACTS, b->data.rows, h)) != 0)
            return rc;
        rc = ptdp_model_forward(dev, m, &b->acts, &b->data, b->in, st->step,
                                st->recompute, m->last_stage ? NULL : &b->out);
        ptdp_tensor_free(dev, &b->in);   /* the model keeps its own copy of its input */
        ptdp_tensor_free(dev, &b->data.x);
        if (m->last_stage)
            st->loss_sum += b->acts.loss_sum;
        if (++*alive > st->peak_in_flight)
            st->peak_in_flight = *alive;
        return rc;
    case PTDP_ACT_SEND_FORWARD:
        rc = ptdp_send(pp, b->out.data, ptdp_tensor_numel(b->out), PTDP_REAL, a->peer, tag_of(a->mb, 0));
        ptdp_tensor_free(dev, &b->out);
        return rc;
    case PTDP_ACT_RECV_BACKWARD:
        if ((rc = ptdp_tensor_alloc(dev, &b->dout, "pp.recv_grad", PTDP_MEM_ACTS, b->data.rows, h)) != 0)
            return rc;
        return ptdp_recv(pp, b->dout.data, ptdp_tensor_numel(b->dout), PTDP_REAL, a->peer, tag_of(a->mb, 1));
    case PTDP_ACT_BACKWARD:
        if (!m->first_stage &&
            (rc = ptdp_tensor_alloc(dev, &b->dx, "pp.send_grad", PTDP_MEM_ACTS, b->data.rows, h)) != 0)
            return rc;
        if (st->backward_begin != NULL && (rc = st->backward_begin(dev, st->optimizer_ctx)) != 0)
            return rc;
        rc = ptdp_model_backward(dev, m, &b->acts, m->last_stage ? NULL : &b->dout, st->loss_scale,
                                 m->first_stage ? NULL : &b->dx);
        if (rc == 0 && st->backward_end != NULL)
            rc = st->backward_end(dev, st->optimizer_ctx);
        ptdp_tensor_free(dev, &b->dout);
        ptdp_batch_free(dev, &b->data);
        --*alive;
        return rc;
    case PTDP_ACT_BACKWARD_INPUT:
        /* B: as BACKWARD, the dW products recorded for W.  ZeRO-2's bucket
         * is given and reduce-scattered around B and again around W: B's
         * bias and LayerNorm gradients and W's weight gradients touch
         * different parameters, so each element's sum is the unsplit one
         * (the other action adds exact zeros), at twice the reduce-scatters. */
        if (!m->first_stage &&
            (rc = ptdp_tensor_alloc(dev, &b->dx, "pp.send_grad", PTDP_MEM_ACTS, b->data.rows, h)) != 0)
            return rc;
        if (st->backward_begin != NULL && (rc = st->backward_begin(dev, st->optimizer_ctx)) != 0)
            return rc;
        b->wgrad.held = &st->wgrad_bytes;
        b->wgrad.peak = &st->wgrad_peak_bytes;
        rc = ptdp_model_backward_input(dev, m, &b->acts, m->last_stage ? NULL : &b->dout, st->loss_scale,
                                       m->first_stage ? NULL : &b->dx, &b->wgrad);
        b->wgrad.pending = true;   /* even with nothing recorded: W must follow */
        if (rc == 0 && st->backward_end != NULL)
            rc = st->backward_end(dev, st->optimizer_ctx);
        ptdp_tensor_free(dev, &b->dout);
        ptdp_batch_free(dev, &b->data);
        --*alive;   /* its activations are gone; W's operands are counted apart */
        return rc;
    case PTDP_ACT_BACKWARD_WEIGHT:
        if (st->backward_begin != NULL && (rc = st->backward_begin(dev, st->optimizer_ctx)) != 0)
            return rc;
        rc = ptdp_model_backward_weight(dev, m, &b->wgrad);
        if (rc == 0 && st->backward_end != NULL)
            rc = st->backward_end(dev, st->optimizer_ctx);
        return rc;
    case PTDP_ACT_SEND_BACKWARD:
        rc = ptdp_send(pp, b->dx.data, ptdp_tensor_numel(b->dx), PTDP_REAL, a->peer, tag_of(a->mb, 1));
        ptdp_tensor_free(dev, &b->dx);
        return rc;
    case PTDP_ACT_OPTIMIZER_STEP:
        return st->optimizer_step ? st->optimizer_step(dev, st->optimizer_ctx) : PTDP_OK;
    default:
        return ptdp_fail(dev, PTDP_EINVAL, "pipeline: unknown action kind %d", (int)a->kind);
    }
}

int ptdp_pp_run_step(ptdp_device *dev, ptdp_pp_step *st)
{
    int stage = st->model->mesh->pp_rank, M = st->micro_batches;
    const ptdp_schedule *s = st->schedule;
    if (s == NULL || s->pp != st->model->mesh->pp || s->micro_batches != M)
        return ptdp_fail(dev, PTDP_EINVAL, "pipeline: the %s schedule is for %d stages and %d micro-batches, "
                         "the step has %d stages and %d micro-batches", s ? s->name : "(null)",
                         s ? s->pp : 0, s ? s->micro_batches : 0, st->model->mesh->pp, M);
    if (M < 1 || st->shard_rows < M)
        return ptdp_fail(dev, PTDP_EINVAL, "pipeline: %d samples cannot make %d micro-batches of at least one",
                         st->shard_rows, M);
    const ptdp_stage_actions *list = &s->stage[stage];
    micro_batch *mbs = calloc((size_t)M, sizeof *mbs);
    if (mbs == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    /* Micro-batch k is chunk k of this DP shard (ptdp_chunk), so unequal
     * shards and micro-batches are handled the same way everywhere. */
    for (int k = 0; k < M; k++) {
        size_t off, len;
        ptdp_chunk((size_t)st->shard_rows, M, k, &off, &len);
        mbs[k].data.first = st->shard_first + (int64_t)off;
        mbs[k].data.rows = (int)len;
    }
    st->loss_sum = 0;
    st->peak_in_flight = 0;
    st->wgrad_bytes = st->wgrad_peak_bytes = 0;
    int alive = 0, rc = PTDP_OK;
    for (int i = 0; i < list->count && rc == 0; i++)
        if ((rc = check_action(dev, st, mbs, &list->actions[i], i)) == 0)
            rc = run_action(dev, st, mbs, &list->actions[i], &alive);
    for (int k = 0; k < M && rc == 0; k++)
        if (mbs[k].wgrad.pending)   /* its weight gradients would be lost */
            rc = ptdp_fail(dev, PTDP_EINVAL, "pipeline stage %d: micro-batch %d has a BACKWARD_INPUT "
                           "but no BACKWARD_WEIGHT", stage, k);
    for (int k = 0; k < M; k++)
        release(dev, st->model, &mbs[k]);
    free(mbs);
    return rc;
}
