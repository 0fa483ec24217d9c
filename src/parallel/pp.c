/*
 * pp.c — the executor: any schedule (GPipe, 1F1B, interleaved, …) runs
 * through one switch.
 *
 * Per (chunk, micro-batch) — a "task"; without interleaving chunk is 0 —
 * this stage keeps (all in its arena):
 *   data   its samples: the input on chunk 0, the labels on the last chunk
 *   in     the received input activation (other chunks)
 *   acts   what the forward leaves for the backward (the model's)
 *   out    the output activation, until it is sent
 *   dout   the received gradient of the output
 *   dx     the gradient of the input, until it is sent
 *   wgrad  a split backward's weight-gradient products, recorded by
 *          BACKWARD_INPUT ("B") with copies of their operands, run by
 *          BACKWARD_WEIGHT ("W") (wgrad.h)
 * Each is freed as soon as it is no longer needed, so the arena's peak of
 * "acts" shows how many tasks a schedule keeps alive: m for GPipe, at most
 * p - stage for 1F1B; a split backward frees them at B, W's operands are
 * counted apart (wgrad_bytes).
 *
 * Interleaved (v chunks per stage): a FORWARD of chunk c runs chunk c's
 * blocks (ptdp_model_chunk), its chunk c p + s of p v, and activations go
 * round the ring of stages v times:
 *
 *   stage 0   [chunk 0]   [chunk 4]           p = 4, v = 2
 *   stage 1   [chunk 1]   [chunk 5]           chunk 3 -> chunk 4 is the
 *   stage 2   [chunk 2]   [chunk 6]           message from stage 3 back
 *   stage 3   [chunk 3]   [chunk 7] -> loss   to stage 0
 *
 * so a micro-batch crosses p v - 1 boundaries each way where 1F1B crosses
 * p - 1: the bytes on the pipeline's links grow by (p v - 1) / (p - 1),
 * about v.  A task is 1/v of a stage's work, but the warm-up holds about
 * (v - 1) p more of them (schedule.c): that is where the smaller bubble's
 * memory goes.
 *
 * DualPipeV lays the 2p chunks out as a V (schedule.h): stage s holds
 * the model's chunks s and 2p - 1 - s, and the last stage hands chunk
 * p - 1's output to its own chunk p without a message (hand_over).
 * DualPipe holds two copies of the model's p stages (schedule.h): stage s
 * runs micro-batches 0 .. m/2 - 1 through stage s of the down copy (chunk
 * 0) and the rest through stage p - 1 - s of the up copy (chunk 1), each
 * copy taking half the shard's samples (micro_batch_rows).
 *
 * Tags: 2 (k m + mb) + d, where k is the local index of the model chunk BEFORE the
 * boundary (the sender of the activation, the receiver of its gradient)
 * and d is 0 for activations, 1 for gradients.  Between two stages a
 * boundary has one such chunk, so each (boundary, micro-batch, direction)
 * has its own tag; with v = 1 it is 2 mb + d.
 */
#include "ptdp/pp.h"

#include <stdio.h>
#include <stdlib.h>

#include "ptdp/comm.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/pair.h"
#include "parallel/model_impl.h"
#include "parallel/pp_impl.h"
#include "parallel/schedule_impl.h"

typedef struct {
    ptdp_batch data;   /* first sample, rows; input and labels once loaded */
    ptdp_tensor in, out, dout, dx;
    ptdp_acts acts;
    ptdp_wgrad wgrad;  /* B's records for W                                */
} task;

/* The local index of the model chunk before the boundary a send or recv crosses. */
static int tag_of(const ptdp_schedule *s, int stage, const ptdp_action *a, int micro_batches)
{
    int lower = a->chunk, peer_stage, peer_chunk;
    bool backward = a->kind == PTDP_ACT_SEND_BACKWARD || a->kind == PTDP_ACT_RECV_BACKWARD;
    if (a->kind == PTDP_ACT_RECV_FORWARD || a->kind == PTDP_ACT_SEND_BACKWARD) {
        ptdp_action_route(s, a->kind, stage, a->chunk, &peer_stage, &peer_chunk);
        lower = peer_chunk;
    }
    return 2 * (lower * micro_batches + a->mb) + (backward ? 1 : 0);
}

static void release(ptdp_device *dev, ptdp_model *m, task *u)
{
    ptdp_tensor_free(dev, &u->in);
    ptdp_tensor_free(dev, &u->out);
    ptdp_tensor_free(dev, &u->dout);
    ptdp_tensor_free(dev, &u->dx);
    ptdp_batch_free(dev, &u->data);
    ptdp_acts_free(dev, m, &u->acts);
    ptdp_wgrad_free(dev, &u->wgrad);
}

/* Token slices: the schedule's micro-batch u is slice u % k of micro-batch u / k. */
static int slices_of(const ptdp_pp_step *st)
{
    return st->token_slices > 1 ? st->token_slices : 1;
}

/* "micro-batch 3", with chunks "micro-batch 3, chunk 1", with token
 * slices "micro-batch 1, slice 0". */
static const char *task_name(const ptdp_pp_step *st, const ptdp_action *a, char *buf, size_t len)
{
    const int k = slices_of(st);
    int n = k > 1 ? snprintf(buf, len, "micro-batch %d, slice %d", a->mb / k, a->mb % k)
                  : snprintf(buf, len, "micro-batch %d", a->mb);
    if (st->model->virtual_stages > 1 && n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, ", chunk %d", a->chunk);
    return buf;
}

/* The executor trusts a schedule's order (the validator proves it), but a
 * hand-written list can still name a micro-batch or chunk that does not
 * exist or do things out of order; say which action, rather than compute on
 * a tensor that was never received.  Deadlocks are left to the watchdog:
 * they are what a student should see happen. */
static int check_action(ptdp_device *dev, const ptdp_pp_step *st, task *tasks,
                        const ptdp_action *a, int index)
{
    ptdp_model *m = st->model;
    int stage = m->mesh->pp_rank, v = m->virtual_stages;
    const char *why = NULL;
    char what[64];
    if (a->kind == PTDP_ACT_OPTIMIZER_STEP)
        return PTDP_OK;
    const int U = st->micro_batches * slices_of(st);
    if (a->mb < 0 || a->mb >= U)
        return ptdp_fail(dev, PTDP_EINVAL, "pipeline stage %d, action %d (%s): micro-batch %d of %d %s",
                         stage, index, ptdp_action_kind_name(a->kind), a->mb, U,
                         U == st->micro_batches ? "micro-batches" : "(micro-batch, token slice) units");
    if (a->chunk < 0 || a->chunk >= v)
        return ptdp_fail(dev, PTDP_EINVAL, "pipeline stage %d, action %d (%s of micro-batch %d): chunk %d of the "
                         "%d this stage holds", stage, index, ptdp_action_kind_name(a->kind), a->mb, a->chunk, v);
    const ptdp_model *c = ptdp_model_chunk(m, a->chunk);
    const task *u = &tasks[a->chunk * U + a->mb];
    bool received_input = c->first_stage || u->in.data != NULL;
    bool received_grad = c->last_stage || u->dout.data != NULL;
    switch (a->kind) {
    case PTDP_ACT_RECV_FORWARD:
        why = c->first_stage ? "stage 0 reads its input from the data" :
              u->in.data || u->acts.alive ? "received twice" : NULL;
        break;
    case PTDP_ACT_FORWARD:
        why = u->acts.alive ? "forwarded twice" : !received_input ? "its input was not received" : NULL;
        break;
    case PTDP_ACT_SEND_FORWARD:
        why = u->out.data == NULL ? "no output to send" : NULL;
        break;
    case PTDP_ACT_RECV_BACKWARD:
        why = c->last_stage ? "the last stage computes its gradient from the loss" :
              !u->acts.alive || u->dout.data ? "no gradient expected" : NULL;
        break;
    case PTDP_ACT_BACKWARD:
        why = !u->acts.alive ? "not forwarded (or backwarded twice)" :
              !received_grad ? "its output gradient was not received" : NULL;
        break;
    case PTDP_ACT_BACKWARD_INPUT:
        why = !u->acts.alive ? "not forwarded (or its backward already ran)" :
              !received_grad ? "its output gradient was not received" : NULL;
        break;
    case PTDP_ACT_BACKWARD_WEIGHT:
        why = u->acts.alive ? "its BACKWARD_INPUT has not run (W before B)" :
              !u->wgrad.pending ? "no BACKWARD_INPUT left weight gradients to compute (W twice, or without B)" : NULL;
        break;
    case PTDP_ACT_SEND_BACKWARD:
        why = u->dx.data == NULL ? "no input gradient to send" : NULL;
        break;
    default:
        break;
    }
    if (why != NULL)
        return ptdp_fail(dev, PTDP_EINVAL, "pipeline stage %d, action %d (%s of %s): %s",
                         stage, index, ptdp_action_kind_name(a->kind), task_name(st, a, what, sizeof what), why);
    return PTDP_OK;
}

/* F: the micro-batch's data, the forward, and what the step adds up from
 * it — the loss on the last stage, the model's counters of a training
 * step (a mixture of experts' balance loss and loads: counters.h, into the
 * device's channel), the micro-batches alive. */
static int run_forward(ptdp_device *dev, ptdp_pp_step *st, ptdp_model *m, task *u, int h, int *alive)
{
    int rc;
    if ((rc = ptdp_batch_load(dev, m, &u->data)) != 0)
        return rc;
    if (!m->last_stage &&
        (rc = ptdp_tensor_alloc(dev, &u->out, "pp.send_act", PTDP_MEM_ACTS, u->data.rows, h)) != 0)
        return rc;
    rc = ptdp_model_forward(dev, m, &u->acts, &u->data, u->in, st->step, st->recompute,
                            m->last_stage ? NULL : &u->out);
    ptdp_tensor_free(dev, &u->in);   /* the model keeps its own copy of its input */
    ptdp_tensor_free(dev, &u->data.x);
    if (m->last_stage)
        st->loss_sum += u->acts.loss_sum;
    if (rc == 0 && dev->counts != NULL && m->ops->count != NULL)   /* its named counters (counters.h) */
        m->ops->count(m, &u->acts, dev->counts);
    if (++*alive > st->peak_in_flight)
        st->peak_in_flight = *alive;
    return rc;
}

/* One action.  `m` is the chunk it names (the device's model without
 * chunks); `u` its task. */
static int run_action(ptdp_device *dev, ptdp_pp_step *st, ptdp_model *m, task *u, const ptdp_action *a,
                      int tag, int *alive, bool last)
{
    ptdp_comm *pp = m->mesh->pp_comm;
    int h = u != NULL ? ptdp_batch_boundary_cols(m, &u->data) : 0, rc = PTDP_OK;

    switch (a->kind) {
    case PTDP_ACT_RECV_FORWARD:
        if ((rc = ptdp_tensor_alloc(dev, &u->in, "pp.recv_act", PTDP_MEM_ACTS, u->data.rows, h)) != 0)
            return rc;
        return ptdp_recv(pp, u->in.data, ptdp_tensor_numel(u->in), PTDP_REAL, a->peer, tag);
    case PTDP_ACT_FORWARD:
        return run_forward(dev, st, m, u, h, alive);
    case PTDP_ACT_SEND_FORWARD:
        rc = ptdp_send(pp, u->out.data, ptdp_tensor_numel(u->out), PTDP_REAL, a->peer, tag);
        ptdp_tensor_free(dev, &u->out);
        return rc;
    case PTDP_ACT_RECV_BACKWARD:
        if ((rc = ptdp_tensor_alloc(dev, &u->dout, "pp.recv_grad", PTDP_MEM_ACTS, u->data.rows, h)) != 0)
            return rc;
        return ptdp_recv(pp, u->dout.data, ptdp_tensor_numel(u->dout), PTDP_REAL, a->peer, tag);
    case PTDP_ACT_BACKWARD:
        if (!m->first_stage &&
            (rc = ptdp_tensor_alloc(dev, &u->dx, "pp.send_grad", PTDP_MEM_ACTS, u->data.rows, h)) != 0)
            return rc;
        if (st->backward_begin != NULL && (rc = st->backward_begin(dev, st->hook_ctx, last)) != 0)
            return rc;
        rc = ptdp_model_backward(dev, m, &u->acts, m->last_stage ? NULL : &u->dout, st->loss_scale,
                                 m->first_stage ? NULL : &u->dx);
        if (rc == 0 && st->backward_end != NULL)
            rc = st->backward_end(dev, st->hook_ctx, last);
        ptdp_tensor_free(dev, &u->dout);
        ptdp_batch_free(dev, &u->data);
        --*alive;
        return rc;
    case PTDP_ACT_BACKWARD_INPUT:
        /* B: as BACKWARD, the dW products recorded for W.  ZeRO-2's bucket
         * is given and reduce-scattered around B and again around W: B's
         * bias and LayerNorm gradients and W's weight gradients touch
         * different parameters, so each element's sum is the unsplit one
         * (the other action adds exact zeros), at twice the reduce-scatters. */
        if (!m->first_stage &&
            (rc = ptdp_tensor_alloc(dev, &u->dx, "pp.send_grad", PTDP_MEM_ACTS, u->data.rows, h)) != 0)
            return rc;
        if (st->backward_begin != NULL && (rc = st->backward_begin(dev, st->hook_ctx, last)) != 0)
            return rc;
        u->wgrad.held = &st->wgrad_bytes;
        u->wgrad.peak = &st->wgrad_peak_bytes;
        rc = ptdp_model_backward_input(dev, m, &u->acts, m->last_stage ? NULL : &u->dout, st->loss_scale,
                                       m->first_stage ? NULL : &u->dx, &u->wgrad);
        u->wgrad.pending = true;   /* even with nothing recorded: W must follow */
        if (rc == 0 && st->backward_end != NULL)
            rc = st->backward_end(dev, st->hook_ctx, last);
        ptdp_tensor_free(dev, &u->dout);
        ptdp_batch_free(dev, &u->data);
        --*alive;   /* its activations are gone; W's operands are counted apart */
        return rc;
    case PTDP_ACT_BACKWARD_WEIGHT:
        if (st->backward_begin != NULL && (rc = st->backward_begin(dev, st->hook_ctx, last)) != 0)
            return rc;
        rc = ptdp_model_backward_weight(dev, m, &u->wgrad);
        if (rc == 0 && st->backward_end != NULL)
            rc = st->backward_end(dev, st->hook_ctx, last);
        return rc;
    case PTDP_ACT_SEND_BACKWARD:
        rc = ptdp_send(pp, u->dx.data, ptdp_tensor_numel(u->dx), PTDP_REAL, a->peer, tag);
        ptdp_tensor_free(dev, &u->dx);
        return rc;
    default:
        return ptdp_fail(dev, PTDP_EINVAL, "pipeline: unknown action kind %d", (int)a->kind);
    }
}

/* At a V's tip (DualPipeV: the last stage holds the model's chunks p - 1
 * and p) no message crosses the boundary: a forward's output becomes the
 * next chunk's input, a backward's input gradient the previous chunk's
 * output gradient, moved from task to task on this device. */
static void hand_over(const ptdp_schedule *s, int stage, const ptdp_action *a, task *tasks, int U)
{
    const int g = ptdp_chunk_global(s, stage, a->chunk);
    int to_stage, to_chunk;
    task *u = &tasks[a->chunk * U + a->mb];
    if (a->kind == PTDP_ACT_FORWARD && ptdp_chunk_hands_on(s, stage, a->chunk)) {
        ptdp_chunk_place(s, g + 1, &to_stage, &to_chunk);
        tasks[to_chunk * U + a->mb].in = u->out;
        u->out = (ptdp_tensor){ 0 };
    } else if ((a->kind == PTDP_ACT_BACKWARD || a->kind == PTDP_ACT_BACKWARD_INPUT) &&
               !ptdp_chunk_is_first(s, stage, a->chunk) && !ptdp_chunk_remote_before(s, stage, a->chunk)) {
        ptdp_chunk_place(s, g - 1, &to_stage, &to_chunk);
        tasks[to_chunk * U + a->mb].dout = u->dx;
        u->dx = (ptdp_tensor){ 0 };
    }
}

/* What a step keeps between ptdp_pp_begin and ptdp_pp_end (host). */
struct ptdp_pp_run {
    task *tasks;          /* [v][U]: one per (chunk, micro-batch)          */
    int U, v;
    int next;             /* the next action of this stage's list           */
    int last_backward;    /* the index of the list's last BACKWARD          */
    int alive;            /* micro-batches between forward and backward     */
};

/* Where micro-batch k of M lies in this DP shard: share k (ptdp_share).
 * Under DualPipe each copy takes half the shard, as a replica of DP 2
 * would, and micro-batch k is share k mod M/2 of its copy's half. */
static void micro_batch_rows(const ptdp_pp_step *st, int k, size_t *off, size_t *len)
{
    const int M = st->micro_batches;
    const ptdp_pp_layout l = ptdp_schedule_layout(st->schedule);
    if (ptdp_pp_layout_copies(&l) == 1) {
        ptdp_share((size_t)st->shard_rows, M, k, off, len);
        return;
    }
    size_t half_off, half_len;
    ptdp_share((size_t)st->shard_rows, 2, k / (M / 2), &half_off, &half_len);
    ptdp_share(half_len, M / 2, k % (M / 2), off, len);
    *off += half_off;
}

/* The step's tasks: micro-batch k is share k of this DP shard (ptdp_share),
 * so unequal shards and micro-batches are handled the same way everywhere;
 * every model chunk sees the same samples of it, and each token slice j
 * its positions ptdp_share(T, K, j) of every sequence. */
static void lay_out_tasks(const ptdp_pp_step *st, struct ptdp_pp_run *r, int K)
{
    const ptdp_model *model = st->model;
    const int M = st->micro_batches;
    for (int k = 0; k < M; k++) {
        size_t off, len;
        micro_batch_rows(st, k, &off, &len);
        for (int j = 0; j < K; j++) {
            size_t t0 = 0, tlen = 0;
            if (K > 1)
                ptdp_share((size_t)model->input_cols, K, j, &t0, &tlen);
            for (int c = 0; c < r->v; c++) {
                task *u = &r->tasks[c * r->U + k * K + j];
                u->data.first = st->shard_first + (int64_t)off;
                u->data.rows = (int)len;
                u->data.t0 = (int)t0;
                u->data.tlen = (int)tlen;
            }
        }
    }
}

static const char *shape_words(ptdp_chunk_layout shape)
{
    return shape == PTDP_CHUNKS_V ? "as a V" : shape == PTDP_CHUNKS_DUAL ? "as two copies" : "round a ring";
}

int ptdp_pp_begin(ptdp_device *dev, ptdp_pp_step *st)
{
    ptdp_model *model = st->model;
    int stage = model->mesh->pp_rank, M = st->micro_batches, v = model->virtual_stages;
    const int K = slices_of(st), U = M * K;   /* U: the schedule's tasks */
    const ptdp_schedule *s = st->schedule;
    st->run = NULL;
    if (s == NULL || s->pp != model->mesh->pp || s->micro_batches != U)
        return ptdp_fail(dev, PTDP_EINVAL, "pipeline: the %s schedule is for %d stages and %d micro-batches, "
                         "the step has %d stages and %d micro-batches%s", s ? s->name : "(null)",
                         s ? s->pp : 0, s ? s->micro_batches : 0, model->mesh->pp, U,
                         K > 1 ? " (micro-batches x token slices)" : "");
    if (K > 1 && (model->input_cols < K || !model->input_tokens))
        return ptdp_fail(dev, PTDP_EINVAL, "pipeline: %d token slices need a model of sequences of at least %d "
                         "tokens", K, K);
    if (s->virtual_stages != v)
        return ptdp_fail(dev, PTDP_EINVAL, "pipeline: the %s schedule runs %d chunks per stage, the model has %d "
                         "(set both from --virtual-stages)", s->name, s->virtual_stages, v);
    if (s->layout != model->mesh->pp_layout.shape)
        return ptdp_fail(dev, PTDP_EINVAL, "pipeline: the %s schedule lays its chunks out %s, the model %s "
                         "(set the mesh's pp_layout from the schedule before building the model)", s->name,
                         shape_words(s->layout), shape_words(model->mesh->pp_layout.shape));
    if (M < 1 || st->shard_rows < M)
        return ptdp_fail(dev, PTDP_EINVAL, "pipeline: %d samples cannot make %d micro-batches of at least one",
                         st->shard_rows, M);
    struct ptdp_pp_run *r = calloc(1, sizeof *r);
    task *tasks = r ? calloc((size_t)U * (size_t)v, sizeof *tasks) : NULL;
    if (tasks == NULL) {
        free(r);
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    }
    *r = (struct ptdp_pp_run){ .tasks = tasks, .U = U, .v = v, .last_backward = -1 };
    lay_out_tasks(st, r, K);
    const ptdp_stage_actions *list = &s->stage[stage];
    for (int i = 0; i < list->count; i++)
        if (list->actions[i].kind == PTDP_ACT_BACKWARD)
            r->last_backward = i;
    st->loss_sum = 0;
    st->peak_in_flight = 0;
    st->wgrad_bytes = st->wgrad_peak_bytes = 0;
    st->run = r;
    return PTDP_OK;
}

/* After the list's last action: a split backward whose W never ran would
 * lose its weight gradients. */
static int check_wgrad_done(ptdp_device *dev, const ptdp_pp_step *st)
{
    const struct ptdp_pp_run *r = st->run;
    for (int c = 0; c < r->v; c++)
        for (int k = 0; k < r->U; k++)
            if (r->tasks[c * r->U + k].wgrad.pending)
                return ptdp_fail(dev, PTDP_EINVAL, "pipeline stage %d: micro-batch %d%s has a BACKWARD_INPUT "
                                 "but no BACKWARD_WEIGHT", st->model->mesh->pp_rank, k,
                                 r->v > 1 ? " (a chunk of it)" : "");
    return PTDP_OK;
}

int ptdp_pp_run(ptdp_device *dev, ptdp_pp_step *st)
{
    struct ptdp_pp_run *r = st->run;
    if (r == NULL)
        return ptdp_fail(dev, PTDP_EINVAL, "pipeline: ptdp_pp_run without ptdp_pp_begin");
    ptdp_model *model = st->model;
    const int stage = model->mesh->pp_rank;
    const ptdp_stage_actions *list = &st->schedule->stage[stage];
    while (r->next < list->count) {
        const int i = r->next++;
        const ptdp_action *a = &list->actions[i];
        int rc = check_action(dev, st, r->tasks, a, i);
        if (rc != 0)
            return rc;
        if (a->kind == PTDP_ACT_OPTIMIZER_STEP)
            return PTDP_PP_AT_OPTIMIZER;   /* the trainer's turn */
        if (a->pair)   /* an overlapped F&B pair: its all-to-alls under its compute (pair.h) */
            ptdp_pair_begin(dev);
        rc = run_action(dev, st, ptdp_model_chunk(model, a->chunk), &r->tasks[a->chunk * r->U + a->mb], a,
                        tag_of(st->schedule, stage, a, r->U), &r->alive, i == r->last_backward);
        if (i > 0 && a[-1].pair)
            ptdp_pair_end(dev);
        if (rc != 0)
            return rc;
        hand_over(st->schedule, stage, a, r->tasks, r->U);   /* a V's tip; nothing elsewhere */
    }
    return check_wgrad_done(dev, st);
}

void ptdp_pp_end(ptdp_device *dev, ptdp_pp_step *st)
{
    struct ptdp_pp_run *r = st->run;
    if (r == NULL)
        return;
    for (int c = 0; c < r->v; c++)
        for (int k = 0; k < r->U; k++)
            release(dev, ptdp_model_chunk(st->model, c), &r->tasks[c * r->U + k]);
    free(r->tasks);
    free(r);
    st->run = NULL;
}

int ptdp_pp_run_step(ptdp_device *dev, ptdp_pp_step *st)
{
    int rc = ptdp_pp_begin(dev, st);
    while (rc == 0 && (rc = ptdp_pp_run(dev, st)) == PTDP_PP_AT_OPTIMIZER)
        rc = st->optimizer_step ? st->optimizer_step(dev, st->optimizer_ctx) : PTDP_OK;
    ptdp_pp_end(dev, st);
    return rc;
}
