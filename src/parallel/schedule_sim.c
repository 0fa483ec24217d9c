/*
 * schedule_sim.c — proving a schedule correct, then playing it in virtual time.
 *
 * 1. Rules, stage by stage and chunk by chunk (no communication needed):
 *      every micro-batch is forwarded once and backwarded once — by one
 *      BACKWARD, or by one BACKWARD_INPUT and one BACKWARD_WEIGHT — through
 *      every chunk that runs it (all of them, but with DualPipe's two
 *      copies: each micro-batch through its copy's chunk only);
 *      RECV_FORWARD(k) < FORWARD(k) < SEND_FORWARD(k)      (activations)
 *      RECV_BACKWARD(k) < BACKWARD(k) < SEND_BACKWARD(k)   (gradients;
 *                          BACKWARD_INPUT plays BACKWARD's part here)
 *      FORWARD(k) < BACKWARD(k);  BACKWARD_INPUT(k) < BACKWARD_WEIGHT(k);
 *      OPTIMIZER_STEP once, last
 *    and every send has its recv: stage s sends F(k) once iff s+1 receives it.
 *    At a V's tip, where a chunk hands its output to the stage's other chunk
 *    without a message, the list itself must order them: F(k) of the first
 *    before F(k) of the second, whose backward comes before the first's.
 *
 * 2. Rendezvous simulation: each stage stands at its next action.  Compute
 *    completes alone; a send and its matching recv complete together, only
 *    when both stages stand at them.  If nobody can move and somebody is not
 *    done, blocking send/recv would hang exactly there:
 *
 *        stage 1 at F5->2   waits for stage 2 to receive F5
 *        stage 2 at B2->1   waits for stage 1 to receive B2      -> deadlock
 *
 *    The local rules plus a completed rendezvous run give the cross-stage
 *    dependencies too: stage s can only forward k after receiving it, and the
 *    receive only completes once s-1 has forwarded k and sends it.
 *
 * 3. Timing: the same walk in virtual time.  Compute costs t_f / t_b; a send
 *    is asynchronous (arrives at t_send + cost, the sender goes on); a recv
 *    completes at max(now, arrival).  Idle = makespan - busy per stage.
 *    With expert parallelism's all-to-alls (costs.alltoall) a device has two
 *    streams: alone, an F or B waits for its own all-to-alls; in an
 *    overlapped pair (DualPipeV's F&B) each one's run under the other's
 *    compute, and the pair ends when both streams have:
 *
 *        alone   compute |F.....|a2a|B.........|a2a|
 *        pair    compute |F.....B.........|            max(F + B, 2 a2a)
 *                comm    |a2a(B)|a2a(F)|
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"
#include "ptdp/schedule.h"
#include "parallel/schedule_impl.h"

static int fail(ptdp_schedule_verdict *v, int stage, int index, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static int fail(ptdp_schedule_verdict *v, int stage, int index, const char *fmt, ...)
{
    if (v != NULL) {
        v->stage = stage;
        v->index = index;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(v->message, sizeof v->message, fmt, ap);
        va_end(ap);
    }
    return PTDP_EINVAL;
}

/* ---- 1. the rules of one stage -------------------------------------------- */

/* A must come before B (both present) on every stage that has them. */
static const struct {
    ptdp_action_kind before, after;
    const char *why;
} order_rules[] = {
    { PTDP_ACT_RECV_FORWARD,   PTDP_ACT_FORWARD,         "a forward needs its input activation" },
    { PTDP_ACT_FORWARD,        PTDP_ACT_SEND_FORWARD,    "an activation is sent once computed" },
    { PTDP_ACT_FORWARD,        PTDP_ACT_BACKWARD,        "a backward needs its forward's activations" },
    { PTDP_ACT_RECV_BACKWARD,  PTDP_ACT_BACKWARD,        "a backward needs its output gradient" },
    { PTDP_ACT_BACKWARD,       PTDP_ACT_SEND_BACKWARD,   "a gradient is sent once computed" },
    { PTDP_ACT_FORWARD,        PTDP_ACT_BACKWARD_INPUT,  "a backward needs its forward's activations" },
    { PTDP_ACT_RECV_BACKWARD,  PTDP_ACT_BACKWARD_INPUT,  "a backward needs its output gradient" },
    { PTDP_ACT_BACKWARD_INPUT, PTDP_ACT_SEND_BACKWARD,   "a gradient is sent once computed" },
    { PTDP_ACT_BACKWARD_INPUT, PTDP_ACT_BACKWARD_WEIGHT, "W multiplies the output gradient that B "
                                                         "received by the inputs B kept" },
};

/* Must the model chunk at (stage, chunk) have an action of kind k for every micro-batch?
 * The backward is checked apart: BACKWARD, or BACKWARD_INPUT and _WEIGHT. */
static int required(ptdp_action_kind k, int first, int last)
{
    switch (k) {
    case PTDP_ACT_FORWARD:                                   return 1;
    case PTDP_ACT_RECV_FORWARD: case PTDP_ACT_SEND_BACKWARD: return !first;
    case PTDP_ACT_SEND_FORWARD: case PTDP_ACT_RECV_BACKWARD: return !last;
    default:                                                 return 0;
    }
}

static int allowed(ptdp_action_kind k, int first, int last)
{
    return required(k, first, last) || k == PTDP_ACT_BACKWARD || k == PTDP_ACT_BACKWARD_INPUT ||
           k == PTDP_ACT_BACKWARD_WEIGHT;
}

/* Action i (tok) of stage st sends or receives where its chunk has no
 * neighbour on another stage: the model's ends, or the V's tip. */
static int refuse_message(const ptdp_schedule *s, int st, int i, const char *tok, int first,
                          ptdp_schedule_verdict *v)
{
    const ptdp_action *a = &s->stage[st].actions[i];
    if (!ptdp_chunk_is_first(s, st, a->chunk) && !ptdp_chunk_is_last(s, st, a->chunk))
        return fail(v, st, i, "stage %d action %d: %s, but chunk %d of stage %d hands its %s "
                    "over to its other chunk on the same stage: no message", st, i, tok,
                    a->chunk, st, first ? "input gradient" : "output");
    if (s->virtual_stages > 1)
        return fail(v, st, i, "stage %d action %d: %s, but chunk %d of stage %d is the model's "
                    "%s piece: there is no %s stage", st, i, tok, a->chunk, st,
                    first ? "first" : "last", first ? "previous" : "next");
    return fail(v, st, i, "stage %d action %d: %s, but stage %d has no %s stage",
                st, i, tok, st, first ? "previous" : "next");
}

/* at[(kind * v + chunk) * m + mb] = index of that action in the list, -1 if absent. */
#define AT(kind, chunk, mb) at[((int)(kind) * nv + (chunk)) * m + (mb)]

/* Chunk c of stage st on micro-batch mb: every action it needs is there,
 * its backward whole or split in two, and in order. */
static int check_task(const ptdp_schedule *s, int st, const int *at, int c, int mb, ptdp_schedule_verdict *v)
{
    const int m = s->micro_batches, nv = s->virtual_stages;
    int first = !ptdp_chunk_remote_before(s, st, c), last = !ptdp_chunk_remote_after(s, st, c);
    char where[32] = "";
    if (nv > 1)
        snprintf(where, sizeof where, " (chunk %d)", c);
    for (int k = 0; k < PTDP_ACT_KIND_COUNT; k++)
        if (required((ptdp_action_kind)k, first, last) && AT(k, c, mb) < 0)
            return fail(v, st, -1, "stage %d: %s of micro-batch %d%s is missing",
                        st, ptdp_action_kind_name((ptdp_action_kind)k), mb, where);
    int full = AT(PTDP_ACT_BACKWARD, c, mb) >= 0, input = AT(PTDP_ACT_BACKWARD_INPUT, c, mb) >= 0,
        weight = AT(PTDP_ACT_BACKWARD_WEIGHT, c, mb) >= 0;
    if (full && (input || weight))
        return fail(v, st, AT(PTDP_ACT_BACKWARD, c, mb), "stage %d: micro-batch %d%s has a BACKWARD "
                    "and a split one (BACKWARD_INPUT/_WEIGHT): its gradients would count twice",
                    st, mb, where);
    if (!full && !input)
        return fail(v, st, -1, "stage %d: BACKWARD of micro-batch %d%s is missing", st, mb, where);
    if (input != weight)
        return fail(v, st, -1, "stage %d: micro-batch %d%s has %s but no %s: a split backward "
                    "needs both halves", st, mb, where,
                    input ? "BACKWARD_INPUT" : "BACKWARD_WEIGHT",
                    input ? "BACKWARD_WEIGHT (its weight gradients)" : "BACKWARD_INPUT");
    for (size_t r = 0; r < sizeof order_rules / sizeof order_rules[0]; r++) {
        int before = AT(order_rules[r].before, c, mb);
        int after  = AT(order_rules[r].after, c, mb);
        if (before >= 0 && after >= 0 && before > after)
            return fail(v, st, after, "stage %d: %s of micro-batch %d%s (action %d) comes "
                        "before %s (action %d): %s", st,
                        ptdp_action_kind_name(order_rules[r].after), mb, where, after,
                        ptdp_action_kind_name(order_rules[r].before), before,
                        order_rules[r].why);
    }
    return PTDP_OK;
}

static int check_stage(const ptdp_schedule *s, int st, int *at, ptdp_schedule_verdict *v)
{
    const int m = s->micro_batches, nv = s->virtual_stages;
    const ptdp_stage_actions *list = &s->stage[st];
    char tok[32];

    for (int j = 0; j < PTDP_ACT_KIND_COUNT * nv * m; j++)
        at[j] = -1;
    for (int i = 0; i < list->count; i++) {
        const ptdp_action *a = &list->actions[i];
        ptdp_action_format(a, tok, sizeof tok);
        if (a->kind == PTDP_ACT_OPTIMIZER_STEP) {
            if (i != list->count - 1)
                return fail(v, st, i, "stage %d: the optimizer step is action %d of %d, "
                            "not the last", st, i, list->count);
            continue;
        }
        if ((unsigned)a->kind >= PTDP_ACT_KIND_COUNT || a->mb < 0 || a->mb >= m)
            return fail(v, st, i, "stage %d action %d: %s is not an action on one of "
                        "micro-batches 0..%d", st, i, tok, m - 1);
        if (a->chunk < 0 || a->chunk >= nv)
            return fail(v, st, i, "stage %d action %d: %s names chunk %d; a stage holds chunks "
                        "0..%d (--virtual-stages %d)", st, i, tok, a->chunk, nv - 1, nv);
        if (!ptdp_chunk_runs(s, a->chunk, a->mb))
            return fail(v, st, i, "stage %d action %d: %s, but with two copies chunk %d runs micro-batches "
                        "%d..%d only", st, i, tok, a->chunk, a->chunk == 0 ? 0 : m / 2,
                        a->chunk == 0 ? m / 2 - 1 : m - 1);
        /* first / last: no message in / out (the model's ends, or the V's tip) */
        int first = !ptdp_chunk_remote_before(s, st, a->chunk), last = !ptdp_chunk_remote_after(s, st, a->chunk);
        if (!allowed(a->kind, first, last))
            return refuse_message(s, st, i, tok, first, v);
        int peer, peer_chunk;
        ptdp_action_route(s, a->kind, st, a->chunk, &peer, &peer_chunk);
        if (a->peer != peer)
            return fail(v, st, i, "stage %d action %d: %s names stage %d; a %s of chunk %d talks "
                        "to stage %d", st, i, tok, a->peer, ptdp_action_kind_name(a->kind),
                        a->chunk, peer);
        int *slot = &AT(a->kind, a->chunk, a->mb);
        if (*slot >= 0)
            return fail(v, st, i, "stage %d: %s appears twice (actions %d and %d)",
                        st, tok, *slot, i);
        *slot = i;
    }
    if (list->count == 0 || list->actions[list->count - 1].kind != PTDP_ACT_OPTIMIZER_STEP)
        return fail(v, st, list->count, "stage %d: no optimizer step at the end", st);
    for (int c = 0; c < nv; c++)
        for (int mb = 0; mb < m; mb++) {
            int rc = ptdp_chunk_runs(s, c, mb) ? check_task(s, st, at, c, mb, v) : PTDP_OK;
            if (rc != PTDP_OK)      /* (the other copy's micro-batches are not this chunk's) */
                return rc;
        }
    return PTDP_OK;
}
#undef AT

/* At the V's tip a chunk hands its output to the stage's other chunk
 * without a message, so no rendezvous orders the two: the list must.  The
 * forward of chunk c before that of the chunk it feeds, whose backward
 * (or B) before chunk c's.  `at` as check_stage left it. */
static int check_hand_over(const ptdp_schedule *s, int st, const int *at, ptdp_schedule_verdict *v)
{
    const int m = s->micro_batches, nv = s->virtual_stages;
#define AT(kind, chunk, mb) at[((int)(kind) * nv + (chunk)) * m + (mb)]
    for (int c = 0; c < nv; c++) {
        int to_stage, to;
        if (!ptdp_chunk_hands_on(s, st, c))
            continue;
        ptdp_chunk_place(s, ptdp_chunk_global(s, st, c) + 1, &to_stage, &to);
        for (int mb = 0; mb < m; mb++) {
            int f = AT(PTDP_ACT_FORWARD, c, mb), f_next = AT(PTDP_ACT_FORWARD, to, mb);
            int b = AT(PTDP_ACT_BACKWARD, c, mb) >= 0 ? AT(PTDP_ACT_BACKWARD, c, mb)
                                                     : AT(PTDP_ACT_BACKWARD_INPUT, c, mb);
            int b_next = AT(PTDP_ACT_BACKWARD, to, mb) >= 0 ? AT(PTDP_ACT_BACKWARD, to, mb)
                                                           : AT(PTDP_ACT_BACKWARD_INPUT, to, mb);
            if (f > f_next)
                return fail(v, st, f_next, "stage %d: the forward of micro-batch %d through chunk %d "
                            "(action %d) comes before chunk %d's (action %d), whose output is its input",
                            st, mb, to, f_next, c, f);
            if (b_next > b)
                return fail(v, st, b, "stage %d: the backward of micro-batch %d through chunk %d "
                            "(action %d) comes before chunk %d's (action %d), whose input gradient is "
                            "its output gradient", st, mb, c, b, to, b_next);
        }
    }
#undef AT
    return PTDP_OK;
}

/* ---- 2. the rendezvous simulation ------------------------------------------- */

static int is_compute(ptdp_action_kind k)
{
    return k == PTDP_ACT_FORWARD || k == PTDP_ACT_BACKWARD || k == PTDP_ACT_OPTIMIZER_STEP ||
           k == PTDP_ACT_BACKWARD_INPUT || k == PTDP_ACT_BACKWARD_WEIGHT;
}

/* Does a (stage st) meet b (stage t): a send and its recv, same micro-batch,
 * and the chunks at both ends that the route names? */
static int rendezvous(const ptdp_schedule *s, const ptdp_action *a, int st, const ptdp_action *b, int t)
{
    int fwd = (a->kind == PTDP_ACT_SEND_FORWARD && b->kind == PTDP_ACT_RECV_FORWARD) ||
              (a->kind == PTDP_ACT_RECV_FORWARD && b->kind == PTDP_ACT_SEND_FORWARD);
    int bwd = (a->kind == PTDP_ACT_SEND_BACKWARD && b->kind == PTDP_ACT_RECV_BACKWARD) ||
              (a->kind == PTDP_ACT_RECV_BACKWARD && b->kind == PTDP_ACT_SEND_BACKWARD);
    int peer, peer_chunk;
    ptdp_action_route(s, a->kind, st, a->chunk, &peer, &peer_chunk);
    return (fwd || bwd) && a->mb == b->mb && a->peer == t && b->peer == st && b->chunk == peer_chunk;
}

static int report_deadlock(const ptdp_schedule *s, const int *pos, ptdp_schedule_verdict *v)
{
    if (v == NULL)
        return PTDP_EINVAL;
    v->deadlock = 1;
    size_t n = (size_t)snprintf(v->message, sizeof v->message,
                                "deadlock under rendezvous send/recv: no stage can move");
    for (int st = 0; st < s->pp && n < sizeof v->message; st++) {
        char mine[32], theirs[32];
        if (pos[st] == s->stage[st].count) {
            n += (size_t)snprintf(v->message + n, sizeof v->message - n,
                                  "\n  stage %d: done", st);
            continue;
        }
        const ptdp_action *a = &s->stage[st].actions[pos[st]];
        ptdp_action_format(a, mine, sizeof mine);
        int t = a->peer;
        if (pos[t] == s->stage[t].count)
            snprintf(theirs, sizeof theirs, "done");
        else
            ptdp_action_format(&s->stage[t].actions[pos[t]], theirs, sizeof theirs);
        n += (size_t)snprintf(v->message + n, sizeof v->message - n,
                              "\n  stage %d blocked at action %d, %s %s (stage %d is at %s)",
                              st, pos[st], ptdp_action_kind_name(a->kind), mine, t, theirs);
    }
    for (int st = 0; st + 1 < s->pp && n < sizeof v->message; st++) {
        int t = st + 1;
        if (pos[st] < s->stage[st].count && pos[t] < s->stage[t].count &&
            s->stage[st].actions[pos[st]].peer == t && s->stage[t].actions[pos[t]].peer == st)
            n += (size_t)snprintf(v->message + n, sizeof v->message - n,
                                  "\n  stages %d and %d wait for each other: a cycle of "
                                  "blocking calls", st, t);
    }
    if (v->stage < 0)
        for (int st = 0; st < s->pp && v->stage < 0; st++)
            if (pos[st] < s->stage[st].count) {
                v->stage = st;
                v->index = pos[st];
            }
    return PTDP_EINVAL;
}

static int run_rendezvous(const ptdp_schedule *s, int *pos, ptdp_schedule_verdict *v)
{
    for (;;) {
        int moved = 0, done = 1;
        for (int st = 0; st < s->pp; st++) {
            const ptdp_stage_actions *list = &s->stage[st];
            while (pos[st] < list->count) {
                const ptdp_action *a = &list->actions[pos[st]];
                if (is_compute(a->kind)) {
                    pos[st]++;
                } else {
                    int t = a->peer;
                    if (pos[t] == s->stage[t].count ||
                        !rendezvous(s, a, st, &s->stage[t].actions[pos[t]], t))
                        break;
                    pos[st]++;
                    pos[t]++;
                }
                moved = 1;
            }
            done &= pos[st] == list->count;
        }
        if (done)
            return PTDP_OK;
        if (!moved)
            return report_deadlock(s, pos, v);
    }
}

int ptdp_schedule_validate(const ptdp_schedule *s, ptdp_schedule_verdict *v)
{
    if (v != NULL)
        *v = (ptdp_schedule_verdict){ .deadlock = 0, .stage = -1, .index = -1 };
    if (s == NULL || s->pp < 1 || s->micro_batches < 1)
        return fail(v, -1, -1, "not a schedule: need at least 1 stage and 1 micro-batch");
    if (s->virtual_stages < 1)
        return fail(v, -1, -1, "not a schedule: need at least 1 chunk per stage");
    int *at = malloc(sizeof(int) * PTDP_ACT_KIND_COUNT * (size_t)s->virtual_stages * (size_t)s->micro_batches);
    int *pos = calloc((size_t)s->pp, sizeof(int));
    int rc = at == NULL || pos == NULL ? PTDP_ENOMEM : PTDP_OK;
    for (int st = 0; st < s->pp && rc == PTDP_OK; st++)
        if ((rc = check_stage(s, st, at, v)) == PTDP_OK)
            rc = check_hand_over(s, st, at, v);
    if (rc == PTDP_OK)
        rc = run_rendezvous(s, pos, v);
    free(at);
    free(pos);
    if (rc == PTDP_OK && v != NULL)
        snprintf(v->message, sizeof v->message, "valid: every micro-batch (m = %d) forwarded "
                 "and backwarded once on every stage (p = %d)%s, every dependency kept, no "
                 "deadlock under blocking rendezvous send/recv", s->micro_batches, s->pp,
                 s->virtual_stages > 1 ? " and chunk" : "");
    return rc;
}

/* ---- 3. timing in virtual time ------------------------------------------- */

void ptdp_schedule_timeline_destroy(ptdp_schedule_timeline *t)
{
    if (t == NULL)
        return;
    if (t->time != NULL)
        for (int st = 0; st < t->pp; st++)
            free(t->time[st]);
    free(t->time);
    free(t->busy);
    free(t->idle);
    free(t);
}

static ptdp_schedule_timeline *timeline_alloc(const ptdp_schedule *s)
{
    ptdp_schedule_timeline *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->pp = s->pp;
    t->busy = calloc((size_t)s->pp, sizeof(double));
    t->idle = calloc((size_t)s->pp, sizeof(double));
    t->time = calloc((size_t)s->pp, sizeof(ptdp_action_time *));
    int ok = t->busy != NULL && t->idle != NULL && t->time != NULL;
    for (int st = 0; ok && st < s->pp; st++)
        ok = (t->time[st] = calloc((size_t)s->stage[st].count + 1,
                                   sizeof(ptdp_action_time))) != NULL;
    if (!ok) {
        ptdp_schedule_timeline_destroy(t);
        return NULL;
    }
    return t;
}

/* How long compute action i of stage st occupies the device: its compute,
 * and the all-to-alls the compute stream waits for (none hidden alone; in
 * a pair, the part of both pairs' all-to-alls F + B cannot cover). */
static double duration(const ptdp_schedule *s, const ptdp_schedule_costs *c, int st, int i)
{
    const ptdp_action *a = &s->stage[st].actions[i];
    const double tf = c->forward_per_stage ? c->forward_per_stage[st] : c->forward;
    const double tb = c->backward_per_stage ? c->backward_per_stage[st] : c->backward;
    const double x = c->alltoall;
    double t = a->kind == PTDP_ACT_FORWARD ? tf : a->kind == PTDP_ACT_BACKWARD ? tb
             : a->kind == PTDP_ACT_BACKWARD_INPUT ? c->backward_input : c->backward_weight;
    if (a->kind == PTDP_ACT_BACKWARD_WEIGHT || x == 0)
        return t;
    if (a->pair)
        return t;                                   /* its all-to-alls: under its partner's B */
    if (i > 0 && s->stage[st].actions[i - 1].pair)  /* the pair's B: what F + B leaves of 2 x */
        return ptdp_pair_backward_time(tf, t, 2 * x);
    return t + x;
}

double ptdp_pair_backward_time(double f, double b, double a2a)
{
    return a2a - f > b ? a2a - f : b;
}

/* Play stage st from pos[st] on, as far as messages already sent allow.
 * arrival[(2 * g + dir) * m + mb] is when a message from chunk g lands, -1
 * if unsent (dir 0: activation to chunk g+1, dir 1: gradient to g-1). */
static int advance(const ptdp_schedule *s, const ptdp_schedule_costs *c, int st,
                   int *pos, double *now, double *arrival, ptdp_schedule_timeline *t)
{
    const int m = s->micro_batches;
    int moved = 0;
    for (; pos[st] < s->stage[st].count; pos[st]++, moved = 1) {
        const ptdp_action *a = &s->stage[st].actions[pos[st]];
        ptdp_action_time *when = &t->time[st][pos[st]];
        when->start = now[st];
        double *msg = NULL;
        int g = ptdp_chunk_global(s, st, a->chunk), peer, peer_chunk;
        ptdp_action_route(s, a->kind, st, a->chunk, &peer, &peer_chunk);
        int from = peer >= 0 ? ptdp_chunk_global(s, peer, peer_chunk) : 0;
        switch (a->kind) {
        case PTDP_ACT_FORWARD:
        case PTDP_ACT_BACKWARD:
        case PTDP_ACT_BACKWARD_INPUT:
        case PTDP_ACT_BACKWARD_WEIGHT: {
            const double d = duration(s, c, st, pos[st]);
            now[st] += d;
            t->busy[st] += d;
            break;
        }
        case PTDP_ACT_SEND_FORWARD:    arrival[(2 * g) * m + a->mb] = now[st] + c->send; break;
        case PTDP_ACT_SEND_BACKWARD:   arrival[(2 * g + 1) * m + a->mb] = now[st] + c->send; break;
        case PTDP_ACT_RECV_FORWARD:    msg = &arrival[(2 * from) * m + a->mb]; break;
        case PTDP_ACT_RECV_BACKWARD:   msg = &arrival[(2 * from + 1) * m + a->mb]; break;
        default:                       break;   /* the optimizer step: not modelled, 0 */
        }
        if (msg != NULL) {
            if (*msg < 0)
                return moved;             /* not sent yet: come back later */
            if (*msg > now[st])
                now[st] = *msg;
        }
        when->end = now[st];
    }
    return moved;
}

int ptdp_schedule_simulate(const ptdp_schedule *s, const ptdp_schedule_costs *c,
                           ptdp_schedule_timeline **out)
{
    *out = NULL;
    if (c == NULL || !(c->forward >= 0 && c->backward >= 0 && c->send >= 0 &&
                       c->backward_input >= 0 && c->backward_weight >= 0 && c->alltoall >= 0))
        return PTDP_EINVAL;
    for (int st = 0; s != NULL && st < s->pp; st++)
        if ((c->forward_per_stage && !(c->forward_per_stage[st] >= 0)) ||
            (c->backward_per_stage && !(c->backward_per_stage[st] >= 0)))
            return PTDP_EINVAL;
    int rc = ptdp_schedule_validate(s, NULL);
    if (rc != PTDP_OK)
        return rc;

    const size_t nmsg = 2 * (size_t)s->pp * (size_t)s->virtual_stages * (size_t)s->micro_batches;
    ptdp_schedule_timeline *t = timeline_alloc(s);
    int *pos = calloc((size_t)s->pp, sizeof(int));
    double *now = calloc((size_t)s->pp, sizeof(double));
    double *arrival = malloc(nmsg * sizeof(double));
    if (t == NULL || pos == NULL || now == NULL || arrival == NULL) {
        rc = PTDP_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < nmsg; i++)
        arrival[i] = -1.0;

    /* A valid schedule finishes under rendezvous, so it finishes here too:
     * asynchronous sends only ever let a stage run further ahead. */
    for (int moved = 1; moved;) {
        moved = 0;
        for (int st = 0; st < s->pp; st++)
            moved |= advance(s, c, st, pos, now, arrival, t);
    }
    for (int st = 0; st < s->pp; st++) {
        if (pos[st] != s->stage[st].count)
            rc = PTDP_EINVAL;
        if (now[st] > t->makespan)
            t->makespan = now[st];
    }
    double idle = 0;
    for (int st = 0; st < s->pp; st++)
        idle += t->idle[st] = t->makespan - t->busy[st];
    t->bubble = t->makespan > 0 ? idle / (s->pp * t->makespan) : 0.0;
out:
    free(pos);
    free(now);
    free(arrival);
    if (rc != PTDP_OK)
        ptdp_schedule_timeline_destroy(t);
    else
        *out = t;
    return rc;
}
