/*
 * schedule_list.c — a schedule as data: every stage's list of actions, how
 * one is appended, where a message goes, and how a list reads.
 *
 * A schedule is p lists, one per stage, each run top to bottom:
 *
 *   stage 0   F0 F0->1 F1 F1->1 B0<-1 B0 ... step
 *   stage 1   F0<-0 F0 B0 B0->0 ... step            (p = 2, 1F1B)
 *
 * Everything else works on these lists and nothing more: the generators
 * (schedule.c) append the compute, the placing pass (schedule_comms.c) the
 * messages and the optimizer step, the executor (pp.c) runs them, the
 * validator and the timing (schedule_sim.c) play them, and the drawings
 * (schedule_draw.c) show them.  This file calls none of those.
 *
 * With v model chunks per stage the model is cut into p v chunks, stage s
 * holding chunks s, s + p, … (or, in a V, s and 2p - 1 - s): a message goes
 * from chunk g to g + 1 (activations) or g - 1 (gradients), round the ring
 * of stages, or down the V and back up.  DualPipe's two copies (DUAL) are
 * two chains of p chunks, 0 .. p - 1 down the stages and p .. 2p - 1 up
 * them: no message crosses from one copy to the other.
 */
#include "ptdp/schedule.h"

#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"
#include "parallel/schedule_impl.h"

/* ---- the data: allocate, push ----------------------------------------------- */

int ptdp_schedule_alloc(const char *name, int pp, int micro_batches, ptdp_schedule **out)
{
    return ptdp_schedule_alloc_v(name, pp, micro_batches, 1, out);
}

int ptdp_schedule_alloc_v(const char *name, int pp, int micro_batches, int virtual_stages,
                          ptdp_schedule **out)
{
    *out = NULL;
    if (pp < 1 || micro_batches < 1 || virtual_stages < 1 || name == NULL)
        return PTDP_EINVAL;
    ptdp_schedule *s = calloc(1, sizeof *s);
    if (s == NULL)
        return PTDP_ENOMEM;
    snprintf(s->name, sizeof s->name, "%s", name);
    s->pp = pp;
    s->micro_batches = micro_batches;
    s->virtual_stages = virtual_stages;
    s->stage = calloc((size_t)pp, sizeof *s->stage);
    if (s->stage == NULL) {
        ptdp_schedule_destroy(s);
        return PTDP_ENOMEM;
    }
    /* Per micro-batch and chunk a stage does at most F, B (or B and W) and
     * four sends/recvs, plus one optimizer step: 7mv + 1 fits every valid
     * schedule. */
    for (int st = 0; st < pp; st++) {
        s->stage[st].capacity = 7 * micro_batches * virtual_stages + 1;
        s->stage[st].actions = calloc((size_t)s->stage[st].capacity, sizeof(ptdp_action));
        if (s->stage[st].actions == NULL) {
            ptdp_schedule_destroy(s);
            return PTDP_ENOMEM;
        }
    }
    *out = s;
    return PTDP_OK;
}

void ptdp_schedule_destroy(ptdp_schedule *s)
{
    if (s == NULL)
        return;
    if (s->stage != NULL)
        for (int st = 0; st < s->pp; st++)
            free(s->stage[st].actions);
    free(s->stage);
    free(s);
}

/* ---- model chunks: the layout's (pp_layout.h) ---------------------------------- */

ptdp_pp_layout ptdp_schedule_layout(const ptdp_schedule *s)
{
    return ptdp_pp_layout_make(s->layout, s->pp, s->virtual_stages);
}

int ptdp_chunk_global(const ptdp_schedule *s, int stage, int chunk)
{
    const ptdp_pp_layout l = ptdp_schedule_layout(s);
    return ptdp_pp_layout_global(&l, stage, chunk);
}

void ptdp_chunk_place(const ptdp_schedule *s, int g, int *stage, int *chunk)
{
    const ptdp_pp_layout l = ptdp_schedule_layout(s);
    ptdp_pp_layout_place(&l, g, stage, chunk);
}

int ptdp_chunk_is_first(const ptdp_schedule *s, int stage, int chunk)
{
    const ptdp_pp_layout l = ptdp_schedule_layout(s);
    return ptdp_pp_layout_is_first(&l, stage, chunk);
}

int ptdp_chunk_is_last(const ptdp_schedule *s, int stage, int chunk)
{
    const ptdp_pp_layout l = ptdp_schedule_layout(s);
    return ptdp_pp_layout_is_last(&l, stage, chunk);
}

int ptdp_chunk_runs(const ptdp_schedule *s, int chunk, int mb)
{
    const ptdp_pp_layout l = ptdp_schedule_layout(s);
    return ptdp_pp_layout_runs(&l, chunk, mb, s->micro_batches);
}

int ptdp_chunk_hands_on(const ptdp_schedule *s, int stage, int chunk)
{
    const ptdp_pp_layout l = ptdp_schedule_layout(s);
    return ptdp_pp_layout_hands_on(&l, stage, chunk);
}

int ptdp_chunk_remote_before(const ptdp_schedule *s, int stage, int chunk)
{
    const ptdp_pp_layout l = ptdp_schedule_layout(s);
    return ptdp_pp_layout_remote_before(&l, stage, chunk);
}

int ptdp_chunk_remote_after(const ptdp_schedule *s, int stage, int chunk)
{
    const ptdp_pp_layout l = ptdp_schedule_layout(s);
    return ptdp_pp_layout_remote_after(&l, stage, chunk);
}

/* Activations go from chunk g to chunk g + 1, gradients from g to g - 1.
 * Without interleaving (v = 1) that is stage s +- 1, even past the ends
 * (the validator names such an action); with it, chunks wrap round the
 * ring of stages (or turn at the V's tip, where the peer is the stage
 * itself), and off the model's ends there is nobody (-1). */
void ptdp_action_route(const ptdp_schedule *s, ptdp_action_kind kind, int stage, int chunk,
                       int *peer_stage, int *peer_chunk)
{
    int step = 0;
    switch (kind) {
    case PTDP_ACT_SEND_FORWARD:
    case PTDP_ACT_RECV_BACKWARD: step = +1; break;
    case PTDP_ACT_RECV_FORWARD:
    case PTDP_ACT_SEND_BACKWARD: step = -1; break;
    default:                     break;
    }
    *peer_stage = *peer_chunk = -1;
    if (step == 0)
        return;
    if (s->virtual_stages == 1) {
        *peer_stage = stage + step;
        *peer_chunk = 0;
        return;
    }
    if ((step < 0 && ptdp_chunk_is_first(s, stage, chunk)) || (step > 0 && ptdp_chunk_is_last(s, stage, chunk)))
        return;   /* off the model's ends (with two copies, its copy's) */
    ptdp_chunk_place(s, ptdp_chunk_global(s, stage, chunk) + step, peer_stage, peer_chunk);
}

/* Generators stay readable as plain lists of pushes: a push past capacity
 * only marks the schedule (like ferror on a FILE), and
 * ptdp_schedule_generate reports it once the generator returns. */
void ptdp_schedule_push_chunk(ptdp_schedule *s, int stage, ptdp_action_kind kind, int mb, int chunk)
{
    if (stage < 0 || stage >= s->pp || s->stage[stage].count == s->stage[stage].capacity) {
        s->overflow = 1;
        return;
    }
    int peer, peer_chunk;
    ptdp_action_route(s, kind, stage, chunk, &peer, &peer_chunk);
    ptdp_stage_actions *list = &s->stage[stage];
    list->actions[list->count++] = (ptdp_action){
        .kind  = kind,
        .mb    = kind == PTDP_ACT_OPTIMIZER_STEP ? -1 : mb,
        .peer  = peer,
        .chunk = kind == PTDP_ACT_OPTIMIZER_STEP ? 0 : chunk,
        .pair  = 0,
    };
}

void ptdp_schedule_push(ptdp_schedule *s, int stage, ptdp_action_kind kind, int mb)
{
    ptdp_schedule_push_chunk(s, stage, kind, mb, 0);
}

/* ---- reading a schedule ------------------------------------------------------ */

int ptdp_schedule_peak_in_flight(const ptdp_schedule *s, int stage)
{
    int alive = 0, peak = 0;
    const ptdp_stage_actions *list = &s->stage[stage];
    for (int i = 0; i < list->count; i++) {
        ptdp_action_kind k = list->actions[i].kind;
        if (k == PTDP_ACT_FORWARD && ++alive > peak)
            peak = alive;
        if (k == PTDP_ACT_BACKWARD || k == PTDP_ACT_BACKWARD_INPUT)
            alive--;
    }
    return peak;
}

int ptdp_schedule_peak_deferred(const ptdp_schedule *s, int stage)
{
    int owed = 0, peak = 0;
    const ptdp_stage_actions *list = &s->stage[stage];
    for (int i = 0; i < list->count; i++) {
        if (list->actions[i].kind == PTDP_ACT_BACKWARD_INPUT && ++owed > peak)
            peak = owed;
        if (list->actions[i].kind == PTDP_ACT_BACKWARD_WEIGHT)
            owed--;
    }
    return peak;
}

const char *ptdp_action_kind_name(ptdp_action_kind k)
{
    static const char *const names[PTDP_ACT_KIND_COUNT] = {
        "FORWARD", "BACKWARD", "SEND_FORWARD", "RECV_FORWARD",
        "SEND_BACKWARD", "RECV_BACKWARD", "OPTIMIZER_STEP",
        "BACKWARD_INPUT", "BACKWARD_WEIGHT",
    };
    return (unsigned)k < PTDP_ACT_KIND_COUNT ? names[k] : "?";
}

/* Chunk c > 0 of a stage is written after a dot: F3.1 is micro-batch 3's
 * forward through the stage's second chunk (ptdp_schedule_print writes the
 * .0 too when a schedule has chunks). */
static int format_action(const ptdp_action *a, char *buf, size_t len, int with_chunk)
{
    char c[16] = "";
    if (with_chunk || a->chunk > 0)
        snprintf(c, sizeof c, ".%d", a->chunk);
    switch (a->kind) {
    case PTDP_ACT_FORWARD:         return snprintf(buf, len, "F%d%s", a->mb, c);
    case PTDP_ACT_BACKWARD:        return snprintf(buf, len, "B%d%s", a->mb, c);
    case PTDP_ACT_BACKWARD_INPUT:  return snprintf(buf, len, "B%d%s", a->mb, c);
    case PTDP_ACT_BACKWARD_WEIGHT: return snprintf(buf, len, "W%d%s", a->mb, c);
    case PTDP_ACT_SEND_FORWARD:    return snprintf(buf, len, "F%d%s->%d", a->mb, c, a->peer);
    case PTDP_ACT_RECV_FORWARD:    return snprintf(buf, len, "F%d%s<-%d", a->mb, c, a->peer);
    case PTDP_ACT_SEND_BACKWARD:   return snprintf(buf, len, "B%d%s->%d", a->mb, c, a->peer);
    case PTDP_ACT_RECV_BACKWARD:   return snprintf(buf, len, "B%d%s<-%d", a->mb, c, a->peer);
    case PTDP_ACT_OPTIMIZER_STEP:  return snprintf(buf, len, "step");
    default:                       return snprintf(buf, len, "?%d", (int)a->kind);
    }
}

int ptdp_action_format(const ptdp_action *a, char *buf, size_t len)
{
    return format_action(a, buf, len, 0);
}

/* Read from the lists, not the name: any list with a B-input action. */
static int has_split_backward(const ptdp_schedule *s)
{
    for (int st = 0; st < s->pp; st++)
        for (int i = 0; i < s->stage[st].count; i++)
            if (s->stage[st].actions[i].kind == PTDP_ACT_BACKWARD_INPUT)
                return 1;
    return 0;
}

void ptdp_schedule_print(const ptdp_schedule *s, FILE *out)
{
    enum { PER_LINE = 10 };
    fprintf(out, "schedule %s: %d stage%s, %d micro-batch%s\n"
                 "  Fk forward, Bk backward of micro-batch k;  Fk->s send activation to stage s,\n"
                 "  Fk<-s receive it from s;  Bk->s / Bk<-s the same for its gradient;"
                 "  step = optimizer\n",
            s->name, s->pp, s->pp == 1 ? "" : "s",
            s->micro_batches, s->micro_batches == 1 ? "" : "es");
    if (s->layout == PTDP_CHUNKS_DUAL)
        fprintf(out, "  Fk.c: through chunk c of the stage (two copies: stage s holds stage s of the down "
                     "copy, chunk 0, micro-batches 0..%d, and stage %d - s of the up copy, chunk 1, "
                     "micro-batches %d..%d)\n", s->micro_batches / 2 - 1, s->pp - 1, s->micro_batches / 2,
                s->micro_batches - 1);
    else if (s->virtual_stages > 1 && s->layout == PTDP_CHUNKS_V)
        fprintf(out, "  Fk.c: through chunk c of the stage (a V: stage s holds the model's pieces "
                     "s and %d - s of %d; stage %d hands piece %d to %d itself)\n",
                2 * s->pp - 1, 2 * s->pp, s->pp - 1, s->pp - 1, s->pp);
    else if (s->virtual_stages > 1)
        fprintf(out, "  Fk.c: through chunk c of the stage (stage s, chunk c holds the model's piece "
                     "c*%d + s of %d)\n", s->pp, s->pp * s->virtual_stages);
    if (has_split_backward(s))
        fprintf(out, "  backward split: Bk the gradient of the stage input only, Wk the weight "
                     "gradients (deferred)\n");
    for (int st = 0; st < s->pp; st++) {
        const ptdp_stage_actions *list = &s->stage[st];
        fprintf(out, "stage %d (%d actions):", st, list->count);
        for (int i = 0; i < list->count; i++) {
            char tok[32];
            format_action(&list->actions[i], tok, sizeof tok, s->virtual_stages > 1);
            fprintf(out, "%s%-7s", i % PER_LINE == 0 ? "\n   " : " ", tok);
        }
        fputc('\n', out);
    }
}
