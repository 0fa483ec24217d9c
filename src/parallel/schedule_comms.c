/*
 * schedule_comms.c — from the order of the compute to the order of the
 * messages: the sends and receives of a schedule, placed so that blocking
 * rendezvous send/recv cannot deadlock.
 *
 * GPipe and 1F1B place their messages by hand with the even/odd rule
 * (schedule.c).  Interleaved and zero-bubble schedules send round a ring
 * and split backwards in two; placing their messages by hand is where
 * hangs come from.  Megatron-LM avoids the question by posting each step's
 * sends and receives together (torch.distributed.batch_isend_irecv).  ptdp
 * keeps blocking calls and one rule instead:
 *
 *   1. Play the compute in time (F = 1, B = 2, B-input = W = 1; any positive
 *      costs do): every forward starts once its input exists, every
 *      backward once its output's gradient does.
 *   2. Give each message a key: the moment it is sent (its producer ends),
 *      ties broken by a fixed number per message.
 *   3. On every stage put each send right after its producer, each receive
 *      at its key (or, if the stage is busy then, right after that compute)
 *      — so before its consumer — and the messages of a stage in key order.
 *
 * Why that cannot deadlock.  Suppose every unfinished stage is blocked.
 * Blocked stages stand at sends or receives (compute never blocks); take
 * the message M with the smallest key among them, say stage a stands at
 * its half.  Its partner stage b lists its half of M among messages sorted
 * by key; everything b lists before M has a smaller key, so b has done it
 * (it would otherwise be blocked at a key below M's), and b has not done M
 * (a needs it).  So b stands at M too: they meet, and a and b move — a
 * contradiction.  Sorted keys turn "everyone waits for someone" into "the
 * earliest message always has both ends ready".
 *
 *   stage 0   F0 F0->1 F1 F1->1 .......... B0<-1 B0 ...
 *   stage 1   F0<-0 F0 F1<-0 F0->2 F1 ...                 (keys: 1, 2, 3, …)
 */
#include <stdlib.h>

#include "ptdp/error.h"
#include "ptdp/schedule.h"

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

static int is_backward(ptdp_action_kind k)
{
    return k == PTDP_ACT_BACKWARD || k == PTDP_ACT_BACKWARD_INPUT;
}

static double cost(ptdp_action_kind k)
{
    return k == PTDP_ACT_BACKWARD ? 2.0 : 1.0;
}

/* The compute lists in time.  start/end[st][i] for action i of stage st;
 * fwd_end / bwd_end[g * m + mb] when piece g finished mb's forward and
 * (input) backward.  0, or PTDP_EINVAL if no stage can move. */
static int play(const ptdp_schedule *s, double **start, double **end, double *fwd_end, double *bwd_end)
{
    const int p = s->pp, m = s->micro_batches, G = p * s->virtual_stages;
    int *pos = calloc((size_t)p, sizeof *pos);
    double *now = calloc((size_t)p, sizeof *now);
    if (pos == NULL || now == NULL) {
        free(pos);
        free(now);
        return PTDP_ENOMEM;
    }
    for (int i = 0; i < G * m; i++)
        fwd_end[i] = bwd_end[i] = -1;
    int rc = PTDP_OK;
    for (int moved = 1; moved;) {
        moved = 0;
        for (int st = 0; st < p; st++)
            for (; pos[st] < s->stage[st].count; pos[st]++, moved = 1) {
                const ptdp_action *a = &s->stage[st].actions[pos[st]];
                int g = ptdp_chunk_global(s, st, a->chunk);
                double ready = now[st];
                if (a->mb < 0 || a->mb >= m || a->chunk < 0 || a->chunk >= s->virtual_stages) {
                    rc = PTDP_EINVAL;
                    goto out;
                }
                if (a->kind == PTDP_ACT_FORWARD && g > 0) {
                    double t = fwd_end[(g - 1) * m + a->mb];
                    if (t < 0) break;                 /* its input is not made yet */
                    ready = t > ready ? t : ready;
                } else if (is_backward(a->kind) && g < G - 1) {
                    double t = bwd_end[(g + 1) * m + a->mb];
                    if (t < 0) break;                 /* nor its output's gradient */
                    ready = t > ready ? t : ready;
                }
                start[st][pos[st]] = ready;
                now[st] = end[st][pos[st]] = ready + cost(a->kind);
                if (a->kind == PTDP_ACT_FORWARD)
                    fwd_end[g * m + a->mb] = now[st];
                else if (is_backward(a->kind))
                    bwd_end[g * m + a->mb] = now[st];
            }
    }
    for (int st = 0; st < p; st++)
        if (pos[st] != s->stage[st].count)
            rc = PTDP_EINVAL;
out:
    free(pos);
    free(now);
    return rc;
}

/* Where a receive at time t sits on a stage: at t, or at the end of the
 * compute running then. */
static double settle(const double *start, const double *end, int n, double t)
{
    for (int i = 0; i < n; i++)
        if (start[i] < t && t < end[i])
            return end[i];
    return t;
}

int ptdp_schedule_add_comms(ptdp_schedule *s)
{
    const int p = s->pp, m = s->micro_batches, G = p * s->virtual_stages;
    if (p == 1 && s->virtual_stages > 1)
        return PTDP_EINVAL;   /* chunks on one stage would send to themselves */
    int rc = PTDP_ENOMEM;
    double **start = calloc((size_t)p, sizeof *start), **end = calloc((size_t)p, sizeof *end);
    double *fwd_end = malloc(sizeof(double) * (size_t)G * (size_t)m);
    double *bwd_end = malloc(sizeof(double) * (size_t)G * (size_t)m);
    item *items = NULL;
    if (start == NULL || end == NULL || fwd_end == NULL || bwd_end == NULL)
        goto out;
    int most = 0;
    for (int st = 0; st < p; st++) {
        int n = s->stage[st].count;
        most = n > most ? n : most;
        if ((start[st] = calloc((size_t)n + 1, sizeof(double))) == NULL ||
            (end[st] = calloc((size_t)n + 1, sizeof(double))) == NULL)
            goto out;
    }
    /* A stage's compute, plus at most one receive and one send per compute. */
    if ((items = malloc(sizeof(item) * (3 * (size_t)most + 1))) == NULL)
        goto out;
    if ((rc = play(s, start, end, fwd_end, bwd_end)) != PTDP_OK)
        goto out;

    for (int st = 0; st < p && rc == PTDP_OK; st++) {
        ptdp_stage_actions *list = &s->stage[st];
        int n = 0;
        for (int i = 0; i < list->count; i++) {
            const ptdp_action a = list->actions[i];
            int g = ptdp_chunk_global(s, st, a.chunk);
            items[n++] = (item){ start[st][i], 1, start[st][i], 0, a };
            /* Its input: an activation from piece g - 1, a gradient from g + 1. */
            ptdp_action_kind recv = PTDP_ACT_KIND_COUNT, send = PTDP_ACT_KIND_COUNT;
            double in_key = 0, out_key = end[st][i];
            long in_id = 0, out_id = 0;
            if (a.kind == PTDP_ACT_FORWARD) {
                if (g > 0) {
                    recv = PTDP_ACT_RECV_FORWARD;
                    in_key = fwd_end[(g - 1) * m + a.mb];
                    in_id = (long)(g - 1) * m + a.mb;
                }
                if (g < G - 1) {
                    send = PTDP_ACT_SEND_FORWARD;
                    out_id = (long)g * m + a.mb;
                }
            } else if (is_backward(a.kind)) {
                if (g < G - 1) {
                    recv = PTDP_ACT_RECV_BACKWARD;
                    in_key = bwd_end[(g + 1) * m + a.mb];
                    in_id = (long)G * m + (long)(g + 1) * m + a.mb;
                }
                if (g > 0) {
                    send = PTDP_ACT_SEND_BACKWARD;
                    out_id = (long)G * m + (long)g * m + a.mb;
                }
            }
            if (recv != PTDP_ACT_KIND_COUNT)
                items[n++] = (item){ settle(start[st], end[st], list->count, in_key), 0, in_key, in_id,
                                     { recv, a.mb, -1, a.chunk } };
            if (send != PTDP_ACT_KIND_COUNT)
                items[n++] = (item){ out_key, 0, out_key, out_id, { send, a.mb, -1, a.chunk } };
        }
        qsort(items, (size_t)n, sizeof *items, item_cmp);
        list->count = 0;
        for (int i = 0; i < n; i++)
            ptdp_schedule_push_chunk(s, st, items[i].a.kind, items[i].a.mb, items[i].a.chunk);
        ptdp_schedule_push(s, st, PTDP_ACT_OPTIMIZER_STEP, -1);
        if (s->overflow)
            rc = PTDP_EINVAL;
    }
out:
    for (int st = 0; st < p; st++) {
        if (start != NULL) free(start[st]);
        if (end != NULL) free(end[st]);
    }
    free(start);
    free(end);
    free(fwd_end);
    free(bwd_end);
    free(items);
    return rc;
}
