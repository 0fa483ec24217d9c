/*
 * schedule_comms.c — from the order of the compute to the order of the
 * messages: the one pass that adds a schedule's sends and receives, placed
 * so that blocking rendezvous send/recv cannot deadlock, then its
 * optimizer step.
 *
 * A generator (schedule.c) lists each stage's compute.  Every forward of
 * the model's chunk g > 0 needs an activation from chunk g - 1, every
 * backward of a chunk g < G - 1 a gradient from g + 1; the compute that
 * makes one is followed by its send.  Where each receive and send goes is
 * the schedule's placement (schedule.h), one of two rules.
 *
 * 1. Beside the compute, even/odd (GPipe, 1F1B).  A compute's receive right
 *    before it, its send right after it.  Between two computes a send and a
 *    receive may meet with the same neighbour, each waiting for the other:
 *
 *      stage i  :  F5 | send F5 -> i+1 | recv B2 <- i+1 | B2
 *      stage i+1:  B2 | send B2 -> i   | recv F5 <- i   | F5
 *
 *    If both send first, each waits for the other to receive: a cycle, a
 *    hang (PTDP_PLACE_SEND_FIRST builds exactly that).  Such a pair is an
 *    exchange: the neighbour makes what we receive (B2) before it needs what
 *    we send (F5).  In an exchange an even stage sends first and an odd stage
 *    receives first.  Neighbours differ in parity, so the two first calls
 *    always pair up, then the two second calls:
 *
 *      stage 2 (even):  send F5 -> 3  ---.    .--> recv B2 <- 3
 *                                        |    |
 *      stage 3 (odd) :  recv F5 <- 2  <--'    '--- send B2 -> 2
 *
 *    When the neighbour needs what we send first (GPipe's last forward, then
 *    its gradient coming back) there is no cycle: the send goes first.
 *
 * 2. By send time (interleaved, ZB-H1 and any compute order that can run).
 *    Sending round a ring and splitting backwards in two is where
 *    hand-placed messages hang.  Megatron-LM avoids the question by posting
 *    each step's sends and receives together (batch_isend_irecv).  ptdp
 *    keeps blocking calls and one rule:
 *
 *    a. Play the compute in time (F = 1, B = 2, B-input = W = 1; any
 *       positive costs do): every forward starts once its input exists,
 *       every backward once its output's gradient does.
 *    b. Give each message a key: the moment it is sent (its producer ends),
 *       ties broken by a fixed number per message.
 *    c. On every stage put each send right after its producer, each receive
 *       at its key (or, if the stage is busy then, right after that compute)
 *       — so before its consumer — and the messages of a stage in key order.
 *
 *    Why that cannot deadlock.  Suppose every unfinished stage is blocked.
 *    Blocked stages stand at sends or receives (compute never blocks); take
 *    the message M with the smallest key among them, say stage a stands at
 *    its half.  Its partner stage b lists its half of M among messages
 *    sorted by key; everything b lists before M has a smaller key, so b has
 *    done it (it would otherwise be blocked at a key below M's), and b has
 *    not done M (a needs it).  So b stands at M too: they meet, and a and b
 *    move — a contradiction.
 *
 *      stage 0   F0 F0->1 F1 F1->1 .......... B0<-1 B0 ...
 *      stage 1   F0<-0 F0 F1<-0 F0->2 F1 ...                 (keys: 1, 2, 3, …)
 *
 * DualPipe's two copies (PTDP_CHUNKS_DUAL) are two such chains, each
 * micro-batch going through one of them: the rule is the same.
 *
 * Two things change what a message is.  At a V's tip (DualPipeV: the last
 * stage holds the model's chunks p - 1 and p) the boundary stays on the
 * stage: a hand-over, no message.  An overlapped pair (a FORWARD marked
 * `pair` and the whole BACKWARD after it) is played as one compute: it
 * starts once both its inputs exist, so both receives go before it, and
 * both its outputs leave at its end, so both sends go after it:
 *
 *      F4.1<-2 B0.0<-2 [F4.1 B0.0] F4.1->0 B0.0->0
 *
 * Then every list ends with the optimizer step (a data-parallel gradient
 * all-reduce goes right before it: once per step, not per micro-batch).
 * The pass builds every new list before it changes any, so a failure leaves
 * the compute as the generator made it, and its message says why.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"
#include "ptdp/schedule.h"
#include "parallel/schedule_impl.h"

static int refuse(char *msg, size_t len, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int refuse(char *msg, size_t len, const char *fmt, ...)
{
    if (msg != NULL && len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, len, fmt, ap);
        va_end(ap);
    }
    return PTDP_EINVAL;
}

static int is_backward(ptdp_action_kind k)
{
    return k == PTDP_ACT_BACKWARD || k == PTDP_ACT_BACKWARD_INPUT;
}

static int is_compute(ptdp_action_kind k)
{
    return k == PTDP_ACT_FORWARD || is_backward(k) || k == PTDP_ACT_BACKWARD_WEIGHT;
}

/* An action as the messages below name it: F3, F3->1, and with chunks
 * F3.0 for a compute of chunk 0 too. */
static const char *name_action(const ptdp_schedule *s, const ptdp_action *a, char buf[32])
{
    ptdp_action_format(a, buf, 32);
    if (s->virtual_stages > 1 && a->chunk == 0 && is_compute(a->kind))
        strcat(buf, ".0");     /* a compute's name is at most "W-2147483648.0" */
    return buf;
}

/* Only compute, each naming a micro-batch and a chunk that exist. */
static int check_compute(const ptdp_schedule *s, char *msg, size_t len)
{
    if (s->pp == 1 && s->virtual_stages > 1 && s->layout == PTDP_CHUNKS_RING)
        return refuse(msg, len, "%d chunks on a single stage would send to themselves",
                      s->virtual_stages);
    for (int st = 0; st < s->pp; st++)
        for (int i = 0; i < s->stage[st].count; i++) {
            const ptdp_action *a = &s->stage[st].actions[i];
            const bool pair_ok = !a->pair || (a->kind == PTDP_ACT_FORWARD && i + 1 < s->stage[st].count &&
                                              a[1].kind == PTDP_ACT_BACKWARD);
            if (is_compute(a->kind) && a->mb >= 0 && a->mb < s->micro_batches && a->chunk >= 0 &&
                a->chunk < s->virtual_stages && ptdp_chunk_runs(s, a->chunk, a->mb) && pair_ok)
                continue;   /* named only when refused: a name is a snprintf, and lists are long */
            char tok[32];
            name_action(s, a, tok);
            if (!is_compute(a->kind))
                return refuse(msg, len, "stage %d, action %d (%s): a generator lists compute only; the "
                              "sends, receives and optimizer step are placed for it", st, i, tok);
            if (a->mb < 0 || a->mb >= s->micro_batches || a->chunk < 0 || a->chunk >= s->virtual_stages)
                return refuse(msg, len, "stage %d, action %d (%s): micro-batches are 0..%d, chunks 0..%d",
                              st, i, tok, s->micro_batches - 1, s->virtual_stages - 1);
            if (!ptdp_chunk_runs(s, a->chunk, a->mb))
                return refuse(msg, len, "stage %d, action %d (%s): with two copies chunk 0 runs micro-batches "
                              "0..%d and chunk 1 the rest", st, i, tok, s->micro_batches / 2 - 1);
            if (a->pair && (a->kind != PTDP_ACT_FORWARD || i + 1 == s->stage[st].count ||
                            a[1].kind != PTDP_ACT_BACKWARD))
                return refuse(msg, len, "stage %d, action %d (%s): an overlapped pair is a FORWARD and "
                              "the whole BACKWARD right after it", st, i, tok);
        }
    return PTDP_OK;
}

/* The receive a compute needs first and the send that follows it
 * (PTDP_ACT_KIND_COUNT: none): an activation from chunk g - 1 and to g + 1
 * for a forward, a gradient from g + 1 and to g - 1 for a backward. */
static void messages_of(const ptdp_schedule *s, int st, const ptdp_action *a,
                        ptdp_action_kind *recv, ptdp_action_kind *send)
{
    /* The V's tip: a boundary inside one stage is a hand-over, not a message. */
    const int off_before = ptdp_chunk_remote_before(s, st, a->chunk);
    const int off_after = ptdp_chunk_remote_after(s, st, a->chunk);
    *recv = *send = PTDP_ACT_KIND_COUNT;
    if (a->kind == PTDP_ACT_FORWARD) {
        if (off_before) *recv = PTDP_ACT_RECV_FORWARD;
        if (off_after)  *send = PTDP_ACT_SEND_FORWARD;
    } else if (is_backward(a->kind)) {
        if (off_after)  *recv = PTDP_ACT_RECV_BACKWARD;
        if (off_before) *send = PTDP_ACT_SEND_BACKWARD;
    }
}

/* ---- 1. beside the compute, even/odd ---------------------------------------- */

/* Where each chunk runs each micro-batch's forward and backward in its
 * stage's compute list: fwd_at / bwd_at[g * m + mb], -1 if nowhere. */
static void index_compute(const ptdp_schedule *s, int *fwd_at, int *bwd_at)
{
    const int m = s->micro_batches, G = s->pp * s->virtual_stages;
    for (int i = 0; i < G * m; i++)
        fwd_at[i] = bwd_at[i] = -1;
    for (int st = 0; st < s->pp; st++)
        for (int i = 0; i < s->stage[st].count; i++) {
            const ptdp_action *a = &s->stage[st].actions[i];
            int at = ptdp_chunk_global(s, st, a->chunk) * m + a->mb;
            if (a->kind == PTDP_ACT_FORWARD)
                fwd_at[at] = i;
            else if (is_backward(a->kind))
                bwd_at[at] = i;
        }
}

/* Stage st sends a's output, then receives b's input.  An exchange if both
 * go to the same neighbour and it makes what we receive before it needs
 * what we send: then it stands at its send while we stand at ours, and
 * one of the two must receive first. */
static int is_exchange(const ptdp_schedule *s, int st, const ptdp_action *a, const ptdp_action *b,
                       ptdp_action_kind send, ptdp_action_kind recv, const int *fwd_at, const int *bwd_at)
{
    const int m = s->micro_batches;
    int to, to_chunk, from, from_chunk;
    ptdp_action_route(s, send, st, a->chunk, &to, &to_chunk);
    ptdp_action_route(s, recv, st, b->chunk, &from, &from_chunk);
    if (to < 0 || to != from)
        return 0;
    int needs = send == PTDP_ACT_SEND_FORWARD ? fwd_at[ptdp_chunk_global(s, to, to_chunk) * m + a->mb]
                                              : bwd_at[ptdp_chunk_global(s, to, to_chunk) * m + a->mb];
    int makes = recv == PTDP_ACT_RECV_FORWARD ? fwd_at[ptdp_chunk_global(s, from, from_chunk) * m + b->mb]
                                              : bwd_at[ptdp_chunk_global(s, from, from_chunk) * m + b->mb];
    return makes >= 0 && needs >= 0 && makes < needs;
}

/* Stage st's list, messages beside their compute, into out[0 .. *n-1]:
 * the first compute's receive, then for each compute, itself and the gap
 * after it — its send and the next compute's receive, in the order the
 * placement gives an exchange. */
static void place_beside(const ptdp_schedule *s, int st, ptdp_placement how, const int *fwd_at,
                         const int *bwd_at, ptdp_action *out, int *n)
{
    const ptdp_stage_actions *list = &s->stage[st];
    const ptdp_action_kind none = PTDP_ACT_KIND_COUNT;
    ptdp_action_kind recv = none, send, next_recv, unused;
    *n = 0;
    if (list->count > 0)
        messages_of(s, st, &list->actions[0], &recv, &unused);
    if (recv != none)
        out[(*n)++] = (ptdp_action){ recv, list->actions[0].mb, -1, list->actions[0].chunk, 0 };
    for (int i = 0; i < list->count; i++) {
        const ptdp_action *a = &list->actions[i];
        const ptdp_action *b = i + 1 < list->count ? a + 1 : NULL;
        messages_of(s, st, a, &unused, &send);
        next_recv = none;
        if (b != NULL)
            messages_of(s, st, b, &next_recv, &unused);
        out[(*n)++] = *a;
        const int recv_first = how == PTDP_PLACE_EVEN_ODD && st % 2 == 1 && send != none &&
                               next_recv != none &&
                               is_exchange(s, st, a, b, send, next_recv, fwd_at, bwd_at);
        if (recv_first)
            out[(*n)++] = (ptdp_action){ next_recv, b->mb, -1, b->chunk, 0 };
        if (send != none)
            out[(*n)++] = (ptdp_action){ send, a->mb, -1, a->chunk, 0 };
        if (next_recv != none && !recv_first)
            out[(*n)++] = (ptdp_action){ next_recv, b->mb, -1, b->chunk, 0 };
    }
}

/* ---- 2. by send time ------------------------------------------------------------ */

typedef struct {
    double time;    /* where it sits on its stage                        */
    int    cls;     /* 0: a message, 1: compute (messages first at a tie)  */
    double key;     /* a message's send time; compute: its start         */
    long   id;      /* ties between messages: a fixed number per message */
    ptdp_action a;
} item;

static int item_cmp(const void *x, const void *y)
{
    const item *a = x, *b = y;
    if (a->time != b->time) return a->time < b->time ? -1 : 1;
    if (a->cls != b->cls)   return a->cls - b->cls;
    if (a->key != b->key)   return a->key < b->key ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static double cost(ptdp_action_kind k)
{
    return k == PTDP_ACT_BACKWARD ? 2.0 : 1.0;
}

/* Where the play is: start/end[st][i] for action i of stage st;
 * fwd_end / bwd_end[g * m + mb] when chunk g finished mb's forward and
 * (input) backward, -1 until it has. */
typedef struct {
    double **start, **end;
    double  *fwd_end, *bwd_end;
} played;

/* When the input of compute a on stage st exists: *ready raised to it;
 * 0 if it is not made yet. */
static int input_ready(const ptdp_schedule *s, const played *t, int st, const ptdp_action *a, double *ready)
{
    const int m = s->micro_batches;
    const int g = ptdp_chunk_global(s, st, a->chunk);
    double at = *ready;
    if (a->kind == PTDP_ACT_FORWARD && !ptdp_chunk_is_first(s, st, a->chunk))
        at = t->fwd_end[(g - 1) * m + a->mb];
    else if (is_backward(a->kind) && !ptdp_chunk_is_last(s, st, a->chunk))
        at = t->bwd_end[(g + 1) * m + a->mb];
    if (at < 0)
        return 0;
    *ready = at > *ready ? at : *ready;
    return 1;
}

/* Stage st's next action, if its input exists: 1 if it ran, 0 if it waits.
 * An overlapped pair waits for both inputs, and its forward's output
 * leaves with its backward's, at the pair's end. */
static int play_one(const ptdp_schedule *s, played *t, int st, int i, double *now)
{
    const int m = s->micro_batches;
    const ptdp_action *a = &s->stage[st].actions[i];
    const int g = ptdp_chunk_global(s, st, a->chunk);
    double ready = *now;
    if (!input_ready(s, t, st, a, &ready) || (a->pair && !input_ready(s, t, st, a + 1, &ready)))
        return 0;
    t->start[st][i] = ready;
    *now = t->end[st][i] = ready + cost(a->kind);
    if (a->kind == PTDP_ACT_FORWARD && !a->pair)
        t->fwd_end[g * m + a->mb] = *now;
    else if (is_backward(a->kind))
        t->bwd_end[g * m + a->mb] = *now;
    if (i > 0 && a[-1].pair)          /* the pair's end: its forward's output too */
        t->fwd_end[ptdp_chunk_global(s, st, a[-1].chunk) * m + a[-1].mb] = *now;
    return 1;
}

/* The compute lists in time.  0, PTDP_EINVAL if no stage can move (msg
 * names the first stuck one), or PTDP_ENOMEM. */
static int play(const ptdp_schedule *s, played *t, char *msg, size_t len)
{
    const int p = s->pp, G = p * s->virtual_stages;
    int *pos = calloc((size_t)p, sizeof *pos);
    double *now = calloc((size_t)p, sizeof *now);
    int rc = pos == NULL || now == NULL ? PTDP_ENOMEM : PTDP_OK;
    for (int i = 0; i < G * s->micro_batches; i++)
        t->fwd_end[i] = t->bwd_end[i] = -1;
    for (int moved = rc == PTDP_OK; moved;) {
        moved = 0;
        for (int st = 0; st < p; st++)
            while (pos[st] < s->stage[st].count && play_one(s, t, st, pos[st], &now[st])) {
                pos[st]++;
                moved = 1;
            }
    }
    for (int st = 0; st < p && rc == PTDP_OK; st++)
        if (pos[st] != s->stage[st].count) {
            char tok[32];
            name_action(s, &s->stage[st].actions[pos[st]], tok);
            rc = refuse(msg, len, "stage %d stalls at compute %d (%s): its input is made only after it",
                        st, pos[st], tok);
        }
    free(pos);
    free(now);
    return rc;
}

/* Where a receive at time t sits on a stage: at t, or at the end of the
 * compute running then (an overlapped pair counts as one compute).  A
 * stage's computes run one after another (start[i] >= end[i - 1]), so the
 * one running at t is the last to start before t, found by bisection: a
 * list of n computes settles its receives in O(n log n), not O(n^2) (the
 * planner builds schedules of 128 stages and 500 micro-batches).  Inside
 * a pair that is its backward, which ends when the pair does. */
static double settle(const ptdp_action *list, const double *start, const double *end, int n, double t)
{
    int lo = 0, hi = n;   /* the first i with start[i] >= t */
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (start[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    const int i = lo - 1;
    if (i < 0)
        return t;
    const double until = list[i].pair && i + 1 < n ? end[i + 1] : end[i];
    return t < until ? until : t;
}

/* Stage st's list, messages by send time, into out[0 .. *n-1]; items has
 * room for 3 actions per compute. */
static void place_by_send_time(const ptdp_schedule *s, int st, const played *t, item *items,
                               ptdp_action *out, int *n)
{
    const int m = s->micro_batches, G = s->pp * s->virtual_stages;
    const ptdp_stage_actions *list = &s->stage[st];
    int k = 0;
    for (int i = 0; i < list->count; i++) {
        const ptdp_action a = list->actions[i];
        const int g = ptdp_chunk_global(s, st, a.chunk);
        ptdp_action_kind recv, send;
        messages_of(s, st, &a, &recv, &send);
        items[k++] = (item){ t->start[st][i], 1, t->start[st][i], 0, a };
        /* A message's key: when its producer ends; its id: which one it is. */
        if (recv == PTDP_ACT_RECV_FORWARD) {
            double key = t->fwd_end[(g - 1) * m + a.mb];
            items[k++] = (item){ settle(list->actions, t->start[st], t->end[st], list->count, key), 0, key,
                                 (long)(g - 1) * m + a.mb, { recv, a.mb, -1, a.chunk, 0 } };
        } else if (recv == PTDP_ACT_RECV_BACKWARD) {
            double key = t->bwd_end[(g + 1) * m + a.mb];
            items[k++] = (item){ settle(list->actions, t->start[st], t->end[st], list->count, key), 0, key,
                                 (long)G * m + (long)(g + 1) * m + a.mb, { recv, a.mb, -1, a.chunk, 0 } };
        }
        if (send != PTDP_ACT_KIND_COUNT) {
            long id = (send == PTDP_ACT_SEND_BACKWARD ? (long)G * m : 0) + (long)g * m + a.mb;
            double at = t->end[st][a.pair ? i + 1 : i];    /* a pair sends at its end */
            items[k++] = (item){ at, 0, at, id, { send, a.mb, -1, a.chunk, 0 } };
        }
    }
    qsort(items, (size_t)k, sizeof *items, item_cmp);
    for (int i = 0; i < k; i++)
        out[i] = items[i].a;
    *n = k;
}

/* ---- the pass ---------------------------------------------------------------- */

typedef struct {
    int          most;      /* the longest compute list                     */
    ptdp_action **out;      /* out[st]: stage st's new list (3 per compute)  */
    int         *count;     /* its length                                   */
    int         *fwd_at, *bwd_at;
    played       t;
    item        *items;
} pass;

static void pass_free(const ptdp_schedule *s, pass *w)
{
    for (int st = 0; st < s->pp; st++) {
        if (w->out != NULL)     free(w->out[st]);
        if (w->t.start != NULL) free(w->t.start[st]);
        if (w->t.end != NULL)   free(w->t.end[st]);
    }
    free(w->out);
    free(w->count);
    free(w->fwd_at);
    free(w->bwd_at);
    free(w->t.start);
    free(w->t.end);
    free(w->t.fwd_end);
    free(w->t.bwd_end);
    free(w->items);
}

static int pass_alloc(const ptdp_schedule *s, pass *w)
{
    *w = (pass){ 0 };
    if (s->pp < 1 || s->virtual_stages < 1 || s->micro_batches < 1)
        return PTDP_EINVAL;     /* refused by the caller; keeps the sizes below positive */
    const size_t p = (size_t)s->pp, gm = p * (size_t)s->virtual_stages * (size_t)s->micro_batches;
    for (int st = 0; st < s->pp; st++)
        w->most = s->stage[st].count > w->most ? s->stage[st].count : w->most;
    w->out = calloc(p, sizeof *w->out);
    w->count = calloc(p, sizeof *w->count);
    w->fwd_at = malloc(gm * sizeof *w->fwd_at);
    w->bwd_at = malloc(gm * sizeof *w->bwd_at);
    w->t.start = calloc(p, sizeof *w->t.start);
    w->t.end = calloc(p, sizeof *w->t.end);
    w->t.fwd_end = malloc(gm * sizeof *w->t.fwd_end);
    w->t.bwd_end = malloc(gm * sizeof *w->t.bwd_end);
    w->items = malloc((3 * (size_t)w->most + 1) * sizeof *w->items);
    if (w->out == NULL || w->count == NULL || w->fwd_at == NULL || w->bwd_at == NULL ||
        w->t.start == NULL || w->t.end == NULL || w->t.fwd_end == NULL || w->t.bwd_end == NULL ||
        w->items == NULL)
        return PTDP_ENOMEM;
    for (int st = 0; st < s->pp; st++) {
        size_t n = (size_t)s->stage[st].count;
        if ((w->out[st] = malloc((3 * n + 1) * sizeof(ptdp_action))) == NULL ||
            (w->t.start[st] = calloc(n + 1, sizeof(double))) == NULL ||
            (w->t.end[st] = calloc(n + 1, sizeof(double))) == NULL)
            return PTDP_ENOMEM;
    }
    return PTDP_OK;
}

int ptdp_schedule_place_comms(ptdp_schedule *s, ptdp_placement placement, char *msg, size_t msglen)
{
    if (msg != NULL && msglen > 0)
        msg[0] = '\0';
    if (placement != PTDP_PLACE_EVEN_ODD && placement != PTDP_PLACE_SEND_FIRST &&
        placement != PTDP_PLACE_BY_SEND_TIME)
        return refuse(msg, msglen, "placement %d: unknown", (int)placement);
    if (s->pp < 1 || s->micro_batches < 1 || s->virtual_stages < 1)
        return refuse(msg, msglen, "a schedule of %d stages, %d micro-batches, %d chunks: each must be "
                      "at least 1", s->pp, s->micro_batches, s->virtual_stages);
    int rc = check_compute(s, msg, msglen);
    if (rc != PTDP_OK)
        return rc;
    pass w;
    if ((rc = pass_alloc(s, &w)) != PTDP_OK) {
        refuse(msg, msglen, "out of host memory placing the messages");
        goto out;
    }
    if (placement == PTDP_PLACE_BY_SEND_TIME)
        rc = play(s, &w.t, msg, msglen);
    else
        index_compute(s, w.fwd_at, w.bwd_at);
    for (int st = 0; st < s->pp && rc == PTDP_OK; st++) {
        if (placement == PTDP_PLACE_BY_SEND_TIME)
            place_by_send_time(s, st, &w.t, w.items, w.out[st], &w.count[st]);
        else
            place_beside(s, st, placement, w.fwd_at, w.bwd_at, w.out[st], &w.count[st]);
        if (w.count[st] + 1 > s->stage[st].capacity)
            rc = refuse(msg, msglen, "stage %d: %d actions with the messages and the optimizer step, "
                        "more than its room for %d", st, w.count[st] + 1, s->stage[st].capacity);
    }
    /* Every list is ready: only now replace the compute. */
    for (int st = 0; st < s->pp && rc == PTDP_OK; st++) {
        s->stage[st].count = 0;
        for (int i = 0; i < w.count[st]; i++) {
            ptdp_schedule_push_chunk(s, st, w.out[st][i].kind, w.out[st][i].mb, w.out[st][i].chunk);
            s->stage[st].actions[s->stage[st].count - 1].pair = w.out[st][i].pair;
        }
        ptdp_schedule_push(s, st, PTDP_ACT_OPTIMIZER_STEP, -1);
    }
out:
    pass_free(s, &w);
    return rc;
}
