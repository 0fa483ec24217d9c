/*
 * pp.h — pipeline parallelism: run one step of a schedule on one stage.
 *
 * The L blocks are cut into pp contiguous stages (model.h).  A step's
 * micro-batches flow forward through the stages and their gradients flow
 * back; schedule.h decides the order, this executor just follows it:
 *
 *   for (a in schedule->stage[my stage])
 *       switch (a.kind) {
 *       case RECV_FORWARD:  receive mb's input activation from stage - 1
 *       case FORWARD:       run my blocks forward on mb
 *       case SEND_FORWARD:  send mb's output activation to stage + 1
 *       case RECV_BACKWARD: receive the gradient of mb's output from stage + 1
 *       case BACKWARD:      run my blocks backward on mb, free its activations
 *       case SEND_BACKWARD: send the gradient of mb's input to stage - 1
 *       case BACKWARD_INPUT:  "B": the backward but the weight gradients
 *       case BACKWARD_WEIGHT: "W": those, from what B kept (wgrad.h)
 *       case OPTIMIZER_STEP: back to the caller, who steps the optimizer
 *       }                    (DP's sum, the update) and runs the rest
 *
 * The trainer drives: ptdp_pp_begin, then ptdp_pp_run until it returns 0,
 * doing the optimizer step each time it returns PTDP_PP_AT_OPTIMIZER, then
 * ptdp_pp_end.  The executor calls nobody back but the hooks around a
 * backward, which are given what they need (their context, and whether
 * this is the stage's last backward of the step).
 *
 * Messages are tagged (micro-batch, direction) and blocking with rendezvous
 * semantics; the schedule's order of sends and receives (even stages send
 * first, odd stages receive first) is what keeps them from deadlocking.
 *
 * Interleaved schedules: each action names one of the stage's v model
 * chunks (a->chunk, model.h's m->chunks); the executor keeps one state per
 * (chunk, micro-batch), runs that chunk's blocks, and tags each message by
 * (chunk boundary, micro-batch, direction) — pp.c has the picture.
 */
#ifndef PTDP_PP_H
#define PTDP_PP_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"
#include "schedule.h"

struct ptdp_device;

typedef int (*ptdp_optimizer_fn)(struct ptdp_device *dev, void *ctx);
/* Around a backward: `last` is true for the stage's last BACKWARD of the
 * step (its gradients become final as it goes: --overlap). */
typedef int (*ptdp_backward_hook)(struct ptdp_device *dev, void *ctx, bool last);

/* ptdp_pp_run: the list reached an OPTIMIZER_STEP (a status > 0). */
#define PTDP_PP_AT_OPTIMIZER 1

struct ptdp_pp_run;   /* the executor's own state of a step (pp.c) */

typedef struct {
    ptdp_model *model;         /* any model: its batches come from it too       */
    const ptdp_schedule *schedule;
    long step;                 /* 0-based global step                           */
    int64_t shard_first;       /* global index of this DP shard's first sample   */
    int shard_rows;            /* samples in this DP shard this step             */
    int micro_batches;
    int token_slices;          /* k >= 1: TeraPipe — the schedule runs m k units,
                                  unit u = slice u % k of micro-batch u / k
                                  (positions ptdp_share(T, k, u % k) of each
                                  sequence); 0 or 1: whole sequences          */
    bool recompute;
    double loss_scale;         /* 1 / global batch                               */
    /* ptdp_pp_run_step only: called at OPTIMIZER_STEP (NULL: nothing). */
    ptdp_optimizer_fn optimizer_step;
    void *optimizer_ctx;
    /* Optional hooks around every BACKWARD, B and W (NULL: none), given
     * hook_ctx: ZeRO-2 hands the model a gradient buffer before and
     * reduce-scatters it after each micro-batch's backward (zero.h). */
    ptdp_backward_hook backward_begin, backward_end;
    void *hook_ctx;
    struct ptdp_pp_run *run;   /* between ptdp_pp_begin and ptdp_pp_end      */
    double loss_sum;           /* out: sum of per-sample losses (last stage)     */
    int peak_in_flight;        /* out: most micro-batches alive at once (with
                                  chunks: (chunk, micro-batch) pairs)            */
    size_t wgrad_bytes;        /* split backward (BACKWARD_INPUT / _WEIGHT):
                                  bytes B keeps for W now (wgrad.h)            */
    size_t wgrad_peak_bytes;   /* out: their most at once this step              */
} ptdp_pp_step;

/* Run this stage's list of st->schedule.  Returns 0; PTDP_EINVAL if the
 * schedule was made for another pp, m or v, or an action comes out of order
 * (a FORWARD before its input arrived, a BACKWARD of a micro-batch not
 * forwarded, …: the message names the stage, the action and why); or the
 * first communication or memory error.  A schedule whose order deadlocks
 * (1F1B placed PTDP_PLACE_SEND_FIRST) is not refused: the watchdog names it. */
int ptdp_pp_run_step(struct ptdp_device *dev, ptdp_pp_step *st);

#endif
