/*
 * schedule.c — pipeline schedules as lists of actions: GPipe and 1F1B.
 *
 * p stages, m micro-batches.  Time flows right; each row is one stage
 * (the picture `ptdp schedule --pp 4 --micro-batches 4` draws, t_f = t_b):
 *
 *   GPipe (Huang et al. 2019): all forwards, then all backwards
 *     stage 0  F0 F1 F2 F3 .  .  .  .  .  .  B3 B2 B1 B0
 *     stage 3  .  .  .  F0 F1 F2 F3 B3 B2 B1 B0 .  .  .
 *     a stage holds the activations of all m micro-batches at once.
 *
 *   1F1B, PipeDream-Flush (Narayanan et al. 2021; Megatron-LM's schedule):
 *     stage s runs  warm-up:   min(p - s - 1, m) forwards
 *                   steady:    one forward, one backward, … (m - warm-up times)
 *                   cool-down: the backwards still owed
 *     stage 0  F0 F1 F2 F3 .  .  .  B0 .  B1 .  B2 .  B3
 *     stage 3  .  .  .  F0 B0 F1 B1 F2 B2 F3 B3 .  .  .
 *     a stage holds at most min(p - s, m) micro-batches of activations.
 *
 * Both idle (p - 1)(t_f + t_b) per stage out of (m + p - 1)(t_f + t_b):
 * bubble = (p - 1) / (m + p - 1).  1F1B wins on memory, not on time.
 *
 * GPipe's backwards run in reverse micro-batch order, as in the paper's
 * figure: the last stage starts with the micro-batch it has just finished
 * forwarding, so the backward pass is a stack (last in, first out) and the
 * freshest activations are consumed first.  Same order would time the same.
 *
 * Deadlock freedom.  send and recv are blocking with rendezvous semantics: a
 * send returns only once the receiver is at the matching recv.  In 1F1B's
 * steady state two neighbours want to exchange at the same moment:
 *
 *     stage i  :  F5 | send F5 -> i+1 | recv B2 <- i+1 | B2
 *     stage i+1:  B2 | send B2 -> i   | recv F5 <- i   | F5
 *
 * If both send first, each waits for the other to receive: a cycle, a hang
 * (`ptdp_schedule_1f1b_naive` builds exactly that).  The even/odd rule: in an
 * exchange with a neighbour, an even stage sends first and an odd stage
 * receives first.  Neighbours differ in parity, so the two first calls always
 * pair up, then the two second calls:
 *
 *     stage 2 (even):  send F5 -> 3  ---.    .--> recv B2 <- 3
 *                                        |    |
 *     stage 3 (odd) :  recv F5 <- 2  <--'    '--- send B2 -> 2
 *
 * No two neighbours ever both send first, so no cycle of blocking calls can
 * form; ptdp_schedule_validate proves it for a given list by simulation.
 */
#include "ptdp/schedule.h"

#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"

/* ---- the data: allocate, push ----------------------------------------------- */

int ptdp_schedule_alloc(const char *name, int pp, int micro_batches, ptdp_schedule **out)
{
    *out = NULL;
    if (pp < 1 || micro_batches < 1 || name == NULL)
        return PTDP_EINVAL;
    ptdp_schedule *s = calloc(1, sizeof *s);
    if (s == NULL)
        return PTDP_ENOMEM;
    snprintf(s->name, sizeof s->name, "%s", name);
    s->pp = pp;
    s->micro_batches = micro_batches;
    s->stage = calloc((size_t)pp, sizeof *s->stage);
    if (s->stage == NULL) {
        ptdp_schedule_destroy(s);
        return PTDP_ENOMEM;
    }
    /* Per micro-batch a stage does at most F, B and four sends/recvs, plus
     * one optimizer step: 6m + 1 fits every valid schedule. */
    for (int st = 0; st < pp; st++) {
        s->stage[st].capacity = 6 * micro_batches + 1;
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

/* Activations flow to stage+1, gradients to stage-1. */
int ptdp_action_peer(ptdp_action_kind kind, int stage)
{
    switch (kind) {
    case PTDP_ACT_SEND_FORWARD:
    case PTDP_ACT_RECV_BACKWARD: return stage + 1;
    case PTDP_ACT_RECV_FORWARD:
    case PTDP_ACT_SEND_BACKWARD: return stage - 1;
    default:                     return -1;
    }
}

/* Generators stay readable as plain lists of pushes: a push past capacity
 * only marks the schedule (like ferror on a FILE), and
 * ptdp_schedule_generate reports it once the generator returns. */
void ptdp_schedule_push(ptdp_schedule *s, int stage, ptdp_action_kind kind, int mb)
{
    if (stage < 0 || stage >= s->pp || s->stage[stage].count == s->stage[stage].capacity) {
        s->overflow = 1;
        return;
    }
    ptdp_stage_actions *list = &s->stage[stage];
    list->actions[list->count++] = (ptdp_action){
        .kind = kind,
        .mb   = kind == PTDP_ACT_OPTIMIZER_STEP ? -1 : mb,
        .peer = ptdp_action_peer(kind, stage),
    };
}

/* ---- GPipe --------------------------------------------------------------------- */

void ptdp_schedule_gpipe(ptdp_schedule *s)
{
    const int p = s->pp, m = s->micro_batches;
    for (int st = 0; st < p; st++) {
        const int first = st == 0, last = st == p - 1;
        for (int mb = 0; mb < m; mb++) {
            if (!first) ptdp_schedule_push(s, st, PTDP_ACT_RECV_FORWARD, mb);
            ptdp_schedule_push(s, st, PTDP_ACT_FORWARD, mb);
            if (!last)  ptdp_schedule_push(s, st, PTDP_ACT_SEND_FORWARD, mb);
        }
        for (int mb = m - 1; mb >= 0; mb--) {
            if (!last)  ptdp_schedule_push(s, st, PTDP_ACT_RECV_BACKWARD, mb);
            ptdp_schedule_push(s, st, PTDP_ACT_BACKWARD, mb);
            if (!first) ptdp_schedule_push(s, st, PTDP_ACT_SEND_BACKWARD, mb);
        }
        ptdp_schedule_push(s, st, PTDP_ACT_OPTIMIZER_STEP, -1);
    }
}

/* ---- 1F1B ---------------------------------------------------------------------- */

typedef enum { EVEN_SENDS_FIRST, ALWAYS_SEND_FIRST } exchange_order;

/* A send and a recv with the same neighbour, issued back to back. */
static void exchange(ptdp_schedule *s, int st, exchange_order order,
                     ptdp_action_kind send, int send_mb,
                     ptdp_action_kind recv, int recv_mb)
{
    if (order == ALWAYS_SEND_FIRST || st % 2 == 0) {
        ptdp_schedule_push(s, st, send, send_mb);
        ptdp_schedule_push(s, st, recv, recv_mb);
    } else {
        ptdp_schedule_push(s, st, recv, recv_mb);
        ptdp_schedule_push(s, st, send, send_mb);
    }
}

static void one_f_one_b(ptdp_schedule *s, exchange_order order)
{
    const int p = s->pp, m = s->micro_batches;
    for (int st = 0; st < p; st++) {
        const int first = st == 0, last = st == p - 1;
        const int warmup = p - st - 1 < m ? p - st - 1 : m;
        const int steady = m - warmup;

        /* Warm-up: fill the pipe below this stage. */
        for (int mb = 0; mb < warmup; mb++) {
            if (!first) ptdp_schedule_push(s, st, PTDP_ACT_RECV_FORWARD, mb);
            ptdp_schedule_push(s, st, PTDP_ACT_FORWARD, mb);
            if (!last)  ptdp_schedule_push(s, st, PTDP_ACT_SEND_FORWARD, mb);
        }
        if (steady > 0 && !first)
            ptdp_schedule_push(s, st, PTDP_ACT_RECV_FORWARD, warmup);

        /* Steady state: forward mb f = warm-up + k, then backward mb k. */
        for (int k = 0; k < steady; k++) {
            const int f = warmup + k, b = k;
            ptdp_schedule_push(s, st, PTDP_ACT_FORWARD, f);
            if (!last)
                exchange(s, st, order, PTDP_ACT_SEND_FORWARD, f, PTDP_ACT_RECV_BACKWARD, b);
            ptdp_schedule_push(s, st, PTDP_ACT_BACKWARD, b);
            if (first)
                continue;
            if (k == steady - 1)
                ptdp_schedule_push(s, st, PTDP_ACT_SEND_BACKWARD, b);
            else
                exchange(s, st, order, PTDP_ACT_SEND_BACKWARD, b, PTDP_ACT_RECV_FORWARD, f + 1);
        }

        /* Cool-down: the backwards of the warm-up micro-batches. */
        for (int b = steady; b < m; b++) {
            if (!last)  ptdp_schedule_push(s, st, PTDP_ACT_RECV_BACKWARD, b);
            ptdp_schedule_push(s, st, PTDP_ACT_BACKWARD, b);
            if (!first) ptdp_schedule_push(s, st, PTDP_ACT_SEND_BACKWARD, b);
        }
        ptdp_schedule_push(s, st, PTDP_ACT_OPTIMIZER_STEP, -1);
    }
}

void ptdp_schedule_1f1b(ptdp_schedule *s)       { one_f_one_b(s, EVEN_SENDS_FIRST); }
void ptdp_schedule_1f1b_naive(ptdp_schedule *s) { one_f_one_b(s, ALWAYS_SEND_FIRST); }

/* ---- the registry ----------------------------------------------------------- */

static const ptdp_schedule_entry registry[] = {
    { "gpipe", "all forwards, then all backwards (GPipe)",              ptdp_schedule_gpipe },
    { "1f1b",  "warm-up, one forward one backward, cool-down (PipeDream-Flush)",
      ptdp_schedule_1f1b },
};

const ptdp_schedule_entry *ptdp_schedule_registry(int *count)
{
    *count = (int)(sizeof registry / sizeof registry[0]);
    return registry;
}

const ptdp_schedule_entry *ptdp_schedule_find(const char *name)
{
    for (size_t i = 0; name != NULL && i < sizeof registry / sizeof registry[0]; i++)
        if (strcmp(registry[i].name, name) == 0)
            return &registry[i];
    return NULL;
}

int ptdp_schedule_generate(ptdp_schedule_generator gen, const char *name,
                           int pp, int micro_batches, ptdp_schedule **out)
{
    int rc = ptdp_schedule_alloc(name, pp, micro_batches, out);
    if (rc != PTDP_OK)
        return rc;
    gen(*out);
    if ((*out)->overflow) {
        ptdp_schedule_destroy(*out);
        *out = NULL;
        return PTDP_EINVAL;
    }
    return PTDP_OK;
}

int ptdp_schedule_create(const char *name, int pp, int micro_batches, ptdp_schedule **out)
{
    const ptdp_schedule_entry *e = ptdp_schedule_find(name);
    if (e == NULL) {
        *out = NULL;
        return PTDP_EINVAL;
    }
    return ptdp_schedule_generate(e->generate, e->name, pp, micro_batches, out);
}

/* ---- reading a schedule ------------------------------------------------------ */

int ptdp_schedule_peak_in_flight(const ptdp_schedule *s, int stage)
{
    int alive = 0, peak = 0;
    const ptdp_stage_actions *list = &s->stage[stage];
    for (int i = 0; i < list->count; i++) {
        if (list->actions[i].kind == PTDP_ACT_FORWARD && ++alive > peak)
            peak = alive;
        if (list->actions[i].kind == PTDP_ACT_BACKWARD)
            alive--;
    }
    return peak;
}

double ptdp_bubble_formula(int pp, int micro_batches)
{
    return (double)(pp - 1) / (double)(micro_batches + pp - 1);
}

const char *ptdp_action_kind_name(ptdp_action_kind k)
{
    static const char *const names[PTDP_ACT_KIND_COUNT] = {
        "FORWARD", "BACKWARD", "SEND_FORWARD", "RECV_FORWARD",
        "SEND_BACKWARD", "RECV_BACKWARD", "OPTIMIZER_STEP",
    };
    return (unsigned)k < PTDP_ACT_KIND_COUNT ? names[k] : "?";
}

int ptdp_action_format(const ptdp_action *a, char *buf, size_t len)
{
    switch (a->kind) {
    case PTDP_ACT_FORWARD:        return snprintf(buf, len, "F%d", a->mb);
    case PTDP_ACT_BACKWARD:       return snprintf(buf, len, "B%d", a->mb);
    case PTDP_ACT_SEND_FORWARD:   return snprintf(buf, len, "F%d->%d", a->mb, a->peer);
    case PTDP_ACT_RECV_FORWARD:   return snprintf(buf, len, "F%d<-%d", a->mb, a->peer);
    case PTDP_ACT_SEND_BACKWARD:  return snprintf(buf, len, "B%d->%d", a->mb, a->peer);
    case PTDP_ACT_RECV_BACKWARD:  return snprintf(buf, len, "B%d<-%d", a->mb, a->peer);
    case PTDP_ACT_OPTIMIZER_STEP: return snprintf(buf, len, "step");
    default:                      return snprintf(buf, len, "?%d", (int)a->kind);
    }
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
    for (int st = 0; st < s->pp; st++) {
        const ptdp_stage_actions *list = &s->stage[st];
        fprintf(out, "stage %d (%d actions):", st, list->count);
        for (int i = 0; i < list->count; i++) {
            char tok[32];
            ptdp_action_format(&list->actions[i], tok, sizeof tok);
            fprintf(out, "%s%-7s", i % PER_LINE == 0 ? "\n   " : " ", tok);
        }
        fputc('\n', out);
    }
}
