/*
 * schedule_check.h — what the tests of the pipeline schedules share: make a
 * schedule from the registry (failing the test, by name, if it will not),
 * count a stage's actions of one kind, and ask ptdp_schedule_check whether
 * a shape is allowed, with the words its refusal must hold.
 *
 * A schedule is a list of actions a stage (schedule.h): F, B (or B and W),
 * sends, receives, an optimizer step.  Counting them is how these tests
 * say what a schedule is: "each micro-batch forward once a chunk", "no W
 * before its B", "the V's tip holds both chunks".
 */
#ifndef PTDP_TESTS_SCHEDULE_CHECK_H
#define PTDP_TESTS_SCHEDULE_CHECK_H

#include <string.h>

#include "harness.h"
#include "ptdp/error.h"
#include "ptdp/schedule.h"

/* The registry's schedule `name` for pp stages, m micro-batches and v
 * chunks a device (1 unless the schedule interleaves). */
static inline ptdp_schedule *sched_make(const char *name, int pp, int m, int v)
{
    ptdp_schedule *s = NULL;
    ck_assert_msg(ptdp_schedule_create_v(name, pp, m, v, &s) == PTDP_OK, "%s p=%d m=%d v=%d", name, pp, m, v);
    return s;
}

/* How many of stage st's actions are of kind k (on micro-batch mb and
 * chunk `chunk`; -1: any). */
static inline int sched_count(const ptdp_schedule *s, int st, ptdp_action_kind k, int mb, int chunk)
{
    int n = 0;
    for (int i = 0; i < s->stage[st].count; i++) {
        const ptdp_action *a = &s->stage[st].actions[i];
        n += a->kind == k && (mb < 0 || a->mb == mb) && (chunk < 0 || a->chunk == chunk);
    }
    return n;
}

static inline int sched_is_compute(ptdp_action_kind k)
{
    return k == PTDP_ACT_FORWARD || k == PTDP_ACT_BACKWARD || k == PTDP_ACT_BACKWARD_INPUT ||
           k == PTDP_ACT_BACKWARD_WEIGHT;
}

/* One question to ptdp_schedule_check: allowed (words[0] NULL), or refused
 * with a message holding every one of words — and then
 * ptdp_schedule_create_v refuses it too, leaving no schedule. */
typedef struct {
    const char *name;
    int pp, m, v;
    const char *words[2];
} sched_shape;

static inline void sched_expect_check(const sched_shape *q)
{
    char msg[512] = "";
    const int rc = ptdp_schedule_check(q->name, q->pp, q->m, q->v, msg, sizeof msg);
    if (q->words[0] == NULL) {
        ck_assert_msg(rc == PTDP_OK, "%s p=%d m=%d v=%d refused: %s", q->name, q->pp, q->m, q->v, msg);
        return;
    }
    ck_assert_msg(rc == PTDP_EINVAL, "%s p=%d m=%d v=%d allowed; wanted '%s'", q->name, q->pp, q->m, q->v,
                  q->words[0]);
    for (int i = 0; i < 2 && q->words[i] != NULL; i++)
        ck_assert_msg(strstr(msg, q->words[i]) != NULL, "%s p=%d m=%d v=%d: wanted '%s' in: %s", q->name, q->pp,
                      q->m, q->v, q->words[i], msg);
    ptdp_schedule *s = (ptdp_schedule *)1;
    ck_assert_int_eq(ptdp_schedule_create_v(q->name, q->pp, q->m, q->v, &s), PTDP_EINVAL);
    ck_assert_ptr_null(s);
}

#endif
