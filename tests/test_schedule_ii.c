/*
 * test_schedule_ii.c — the schedules that shrink the bubble, tested as data.
 *
 *   interleaved   for p 2..6, m = p..4p in steps of p, v 1..4: valid, every
 *                 (chunk, micro-batch) forwarded and backwarded once, the
 *                 bubble (p - 1)/(v m + p - 1) to 1e-9 with a chunk costing
 *                 1/v of a stage, stage s holding (p-s-1)*2 + (v-1)p + 1
 *                 chunk-micro-batches (at most m v), and v times 1F1B's
 *                 messages on every stage but the two ends.
 *   zb-h1         for p 1..8, m 1..16: valid, B and W once each, the bubble
 *                 (p - 1)/(3m + p - 1) to 1e-9 with F = B = W (m >= p), 1F1B's
 *                 activation peak min(p - s, m), W owed at most min(s + 1, m).
 *   place_comms   on random compute orders that can run: the lists it makes
 *                 by send time always pass the validator (no deadlock under
 *                 rendezvous); what it refuses, with its reason, leaving the
 *                 lists as they were.
 *   rules         a split backward mixed with a whole one, a missing W, W
 *                 before B, a chunk out of range, a receive from the wrong
 *                 chunk: each refused with its reason.
 *   check         the flags that cannot make a schedule, named.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule_check.h"

static void expect_valid(const ptdp_schedule *s)
{
    ptdp_schedule_verdict v;
    int rc = ptdp_schedule_validate(s, &v);
    ck_assert_msg(rc == PTDP_OK, "%s p=%d m=%d v=%d: %s", s->name, s->pp, s->micro_batches,
                  s->virtual_stages, v.message);
}

/* ---- interleaved --------------------------------------------------------------- */

static const harness_tcase interleaved_tests = { .name = "interleaved" };

TEST(interleaved_tests, valid_with_the_bubble_and_the_peak_of_its_formulas)
{
    for (int p = 2; p <= 6; p++)
        for (int m = p; m <= 4 * p; m += p)
            for (int v = 1; v <= 4; v++) {
                ptdp_schedule *s = sched_make("interleaved", p, m, v);
                expect_valid(s);
                for (int st = 0; st < p; st++)
                    for (int c = 0; c < v; c++)
                        for (int mb = 0; mb < m; mb++) {
                            ck_assert_int_eq(sched_count(s, st, PTDP_ACT_FORWARD, mb, c), 1);
                            ck_assert_int_eq(sched_count(s, st, PTDP_ACT_BACKWARD, mb, c), 1);
                        }
                ptdp_schedule_costs costs = { .forward = 1.0 / v, .backward = 2.0 / v };
                ptdp_schedule_timeline *t = NULL;
                ck_assert_int_eq(ptdp_schedule_simulate(s, &costs, &t), PTDP_OK);
                double want = (double)(p - 1) / (v * m + p - 1);
                ck_assert_msg(fabs(t->bubble - want) < 1e-9, "p=%d m=%d v=%d: bubble %.12f, formula %.12f",
                              p, m, v, t->bubble, want);
                ck_assert(fabs(ptdp_schedule_bubble_formula(s, NULL) - want) < 1e-15);
                for (int st = 0; st < p; st++) {
                    int peak = (p - st - 1) * 2 + (v - 1) * p + 1;
                    if (peak > m * v)
                        peak = m * v;
                    ck_assert_msg(ptdp_schedule_peak_in_flight(s, st) == peak, "p=%d m=%d v=%d stage %d: peak %d, want %d",
                                  p, m, v, st, ptdp_schedule_peak_in_flight(s, st), peak);
                }
                ptdp_schedule_timeline_destroy(t);
                ptdp_schedule_destroy(s);
            }
}
END_TEST

/* Stage s sends each micro-batch's activation from every chunk but the
 * model's last chunk, and its gradient from every chunk but the first:
 * v times 1F1B's two per micro-batch on a middle stage. */
TEST(interleaved_tests, a_middle_stage_sends_v_times_the_messages_of_1f1b)
{
    const int p = 4, m = 8;
    ptdp_schedule *one = sched_make("1f1b", p, m, 1);
    for (int v = 2; v <= 4; v++) {
        ptdp_schedule *s = sched_make("interleaved", p, m, v);
        for (int st = 0; st < p; st++) {
            int sends = sched_count(s, st, PTDP_ACT_SEND_FORWARD, -1, -1) + sched_count(s, st, PTDP_ACT_SEND_BACKWARD, -1, -1);
            int base = sched_count(one, st, PTDP_ACT_SEND_FORWARD, -1, -1) + sched_count(one, st, PTDP_ACT_SEND_BACKWARD, -1, -1);
            int want = st == 0 || st == p - 1 ? (2 * v - 1) * m : v * base;
            ck_assert_msg(sends == want, "v=%d stage %d: %d sends, want %d (1f1b %d)", v, st, sends, want, base);
        }
        ptdp_schedule_destroy(s);
    }
    ptdp_schedule_destroy(one);
}
END_TEST

/* Activations go round the ring: stage p-1's chunk c feeds stage 0's c+1. */
TEST(interleaved_tests, messages_wrap_round_the_ring)
{
    ptdp_schedule *s = sched_make("interleaved", 3, 3, 2);
    int peer, chunk;
    ptdp_action_route(s, PTDP_ACT_SEND_FORWARD, 2, 0, &peer, &chunk);
    ck_assert_int_eq(peer, 0);
    ck_assert_int_eq(chunk, 1);
    ptdp_action_route(s, PTDP_ACT_SEND_BACKWARD, 0, 1, &peer, &chunk);
    ck_assert_int_eq(peer, 2);
    ck_assert_int_eq(chunk, 0);
    ptdp_action_route(s, PTDP_ACT_SEND_FORWARD, 2, 1, &peer, &chunk);   /* the model's last chunk */
    ck_assert_int_eq(peer, -1);
    ck_assert(ptdp_chunk_is_last(s, 2, 1) && ptdp_chunk_is_first(s, 0, 0) && !ptdp_chunk_is_first(s, 0, 1));
    ck_assert_int_eq(ptdp_chunk_global(s, 1, 1), 4);
    ck_assert_int_eq(sched_count(s, 2, PTDP_ACT_SEND_FORWARD, -1, 0), 3);
    ck_assert_int_eq(sched_count(s, 0, PTDP_ACT_RECV_FORWARD, -1, 1), 3);
    ptdp_schedule_destroy(s);
}
END_TEST

/* ---- ZB-H1 ---------------------------------------------------------------------- */

static const harness_tcase zb_tests = { .name = "zb-h1" };

TEST(zb_tests, valid_with_a_third_of_the_bubble_at_1f1b_activation_peak)
{
    for (int p = 1; p <= 8; p++)
        for (int m = 1; m <= 16; m++) {
            ptdp_schedule *s = sched_make("zb-h1", p, m, 1);
            expect_valid(s);
            for (int st = 0; st < p; st++) {
                ck_assert_int_eq(sched_count(s, st, PTDP_ACT_BACKWARD, -1, -1), 0);
                for (int mb = 0; mb < m; mb++) {
                    ck_assert_int_eq(sched_count(s, st, PTDP_ACT_BACKWARD_INPUT, mb, 0), 1);
                    ck_assert_int_eq(sched_count(s, st, PTDP_ACT_BACKWARD_WEIGHT, mb, 0), 1);
                }
                int act = p - st < m ? p - st : m, owed = st + 1 < m ? st + 1 : m;
                ck_assert_int_eq(ptdp_schedule_peak_in_flight(s, st), act);
                ck_assert_msg(ptdp_schedule_peak_deferred(s, st) <= owed, "p=%d m=%d stage %d: %d W owed", p, m,
                              st, ptdp_schedule_peak_deferred(s, st));
            }
            ptdp_schedule_costs costs = { .forward = 1, .backward = 2, .backward_input = 1, .backward_weight = 1 };
            ptdp_schedule_timeline *t = NULL;
            ck_assert_int_eq(ptdp_schedule_simulate(s, &costs, &t), PTDP_OK);
            if (m >= p) {
                /* m (F + B + W) + (p - 1)(F + B - W) */
                ck_assert_msg(fabs(t->makespan - (3.0 * m + p - 1)) < 1e-9, "p=%d m=%d: makespan %g", p, m,
                              t->makespan);
                double want = (double)(p - 1) / (3 * m + p - 1);
                ck_assert_msg(fabs(t->bubble - want) < 1e-9, "p=%d m=%d: bubble %.12f, formula %.12f", p, m,
                              t->bubble, want);
            }
            ptdp_schedule_timeline_destroy(t);
            ptdp_schedule_destroy(s);
        }
}
END_TEST

/* ---- place_comms ---------------------------------------------------------------- */

static const harness_tcase comms_tests = { .name = "place_comms" };

/* A random compute order that can run: play the pipeline, each time
 * letting a random stage run a random one of its ready actions. */
static ptdp_schedule *random_order(unsigned *seed, int p, int m, int v, int split)
{
    ptdp_schedule *s = NULL;
    ck_assert_int_eq(ptdp_schedule_alloc_v("random", p, m, v, &s), PTDP_OK);
    const int G = p * v;
    int *state = calloc((size_t)G * m, sizeof *state);   /* 0 none, 1 F, 2 B, 3 W */
    int left = G * m * (split ? 3 : 2);
    while (left > 0) {
        int g = rand_r(seed) % G, mb = rand_r(seed) % m;
        int *x = &state[g * m + mb], kind = -1;
        if (*x == 0 && (g == 0 || state[(g - 1) * m + mb] >= 1))
            kind = PTDP_ACT_FORWARD;
        else if (*x == 1 && (g == G - 1 || state[(g + 1) * m + mb] >= 2))
            kind = split ? PTDP_ACT_BACKWARD_INPUT : PTDP_ACT_BACKWARD;
        else if (*x == 2 && split)
            kind = PTDP_ACT_BACKWARD_WEIGHT;
        if (kind < 0)
            continue;
        ptdp_schedule_push_chunk(s, g % p, (ptdp_action_kind)kind, mb, g / p);
        ++*x;
        left--;
    }
    free(state);
    char msg[256];
    ck_assert_int_eq(ptdp_schedule_place_comms(s, PTDP_PLACE_BY_SEND_TIME, msg, sizeof msg), PTDP_OK);
    ck_assert_str_eq(msg, "");
    return s;
}

TEST(comms_tests, any_order_that_can_run_gets_messages_that_cannot_deadlock)
{
    unsigned seed = 12345;
    for (int trial = 0; trial < 300; trial++) {
        int p = 1 + rand_r(&seed) % 5, m = 1 + rand_r(&seed) % 5, v = 1 + rand_r(&seed) % 3;
        if (p == 1)
            v = 1;   /* chunks need a ring of at least two stages */
        ptdp_schedule *s = random_order(&seed, p, m, v, trial % 2);
        ck_assert_int_eq(s->overflow, 0);
        expect_valid(s);
        ptdp_schedule_destroy(s);
    }
}
END_TEST

/* A compute order that no messages can save: stage 1 wants micro-batch 1
 * before micro-batch 0's gradient comes back... from itself. */
TEST(comms_tests, an_order_that_cannot_run_is_refused)
{
    ptdp_schedule *s = NULL;
    ck_assert_int_eq(ptdp_schedule_alloc_v("stuck", 2, 1, 1, &s), PTDP_OK);
    ptdp_schedule_push(s, 0, PTDP_ACT_BACKWARD, 0);   /* before the forward that feeds stage 1 */
    ptdp_schedule_push(s, 0, PTDP_ACT_FORWARD, 0);
    ptdp_schedule_push(s, 1, PTDP_ACT_FORWARD, 0);
    ptdp_schedule_push(s, 1, PTDP_ACT_BACKWARD, 0);
    char msg[256];
    ck_assert_int_eq(ptdp_schedule_place_comms(s, PTDP_PLACE_BY_SEND_TIME, msg, sizeof msg), PTDP_EINVAL);
    ck_assert_msg(strstr(msg, "stage 0 stalls at compute 0 (B0): its input is made only after it") != NULL, "%s", msg);
    ck_assert_int_eq(s->stage[0].count, 2);      /* the compute, untouched */
    ck_assert_int_eq(s->stage[0].actions[0].kind, PTDP_ACT_BACKWARD);
    ptdp_schedule_destroy(s);
}
END_TEST

/* The pass places messages once: a list that already has one, or an
 * optimizer step, or a micro-batch or chunk that does not exist, or chunks
 * on one stage, is refused with the action named; the lists stay as they
 * were. */
TEST(comms_tests, what_is_not_compute_is_refused_and_named)
{
    static const struct {
        int pp, v;
        ptdp_action_kind kind;
        int mb, chunk;
        const char *why;
    } cases[] = {
        { 2, 1, PTDP_ACT_SEND_FORWARD,   0, 0, "stage 0, action 1 (F0->1): a generator lists compute only" },
        { 2, 1, PTDP_ACT_OPTIMIZER_STEP, 0, 0, "stage 0, action 1 (step): a generator lists compute only" },
        { 2, 1, PTDP_ACT_BACKWARD,       3, 0, "stage 0, action 1 (B3): micro-batches are 0..1, chunks 0..0" },
        { 2, 2, PTDP_ACT_FORWARD,        0, 2, "stage 0, action 1 (F0.2): micro-batches are 0..1, chunks 0..1" },
        { 1, 2, PTDP_ACT_FORWARD,        0, 1, "2 chunks on a single stage would send to themselves" },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int how = PTDP_PLACE_EVEN_ODD; how <= PTDP_PLACE_BY_SEND_TIME; how++) {
            ptdp_schedule *s = NULL;
            ck_assert_int_eq(ptdp_schedule_alloc_v("odd", cases[k].pp, 2, cases[k].v, &s), PTDP_OK);
            ptdp_schedule_push(s, 0, PTDP_ACT_FORWARD, 0);
            ptdp_schedule_push_chunk(s, 0, cases[k].kind, cases[k].mb, cases[k].chunk);
            char msg[256];
            ck_assert_int_eq(ptdp_schedule_place_comms(s, (ptdp_placement)how, msg, sizeof msg), PTDP_EINVAL);
            ck_assert_msg(strstr(msg, cases[k].why) != NULL, "case %zu: %s", k, msg);
            ck_assert_int_eq(s->stage[0].count, 2);
            ptdp_schedule_destroy(s);
        }
}
END_TEST

/* GPipe and 1F1B place beside the compute, even/odd; the same compute
 * placed by send time gets another order (so the rule is theirs, named in
 * the registry), which is just as valid.  Placed send-first, 1F1B
 * deadlocks as soon as there is a steady state to exchange in. */
TEST(comms_tests, each_placement_of_1f1b_is_what_it_says)
{
    int differ = 0;
    for (int pp = 2; pp <= 6; pp++)
        for (int m = 1; m <= 9; m++) {
            ptdp_schedule *even_odd = NULL, *by_time = NULL, *naive = NULL;
            ck_assert_int_eq(ptdp_schedule_create("1f1b", pp, m, &even_odd), PTDP_OK);
            ck_assert_int_eq(ptdp_schedule_generate(ptdp_schedule_1f1b, PTDP_PLACE_BY_SEND_TIME, "1f1b",
                                                    pp, m, &by_time), PTDP_OK);
            ck_assert_int_eq(ptdp_schedule_generate(ptdp_schedule_1f1b, PTDP_PLACE_SEND_FIRST, "1f1b",
                                                    pp, m, &naive), PTDP_OK);
            expect_valid(even_odd);
            expect_valid(by_time);
            ck_assert_int_eq(ptdp_schedule_validate(naive, NULL), m >= 2 ? PTDP_EINVAL : PTDP_OK);
            for (int st = 0; st < pp; st++) {
                ck_assert_int_eq(even_odd->stage[st].count, by_time->stage[st].count);
                ck_assert_int_eq(even_odd->stage[st].count, naive->stage[st].count);
                ck_assert_int_eq(even_odd->stage[st].actions[even_odd->stage[st].count - 1].kind,
                                 PTDP_ACT_OPTIMIZER_STEP);
                differ += memcmp(even_odd->stage[st].actions, by_time->stage[st].actions,
                                 sizeof(ptdp_action) * (size_t)even_odd->stage[st].count) != 0;
            }
            ptdp_schedule_destroy(even_odd);
            ptdp_schedule_destroy(by_time);
            ptdp_schedule_destroy(naive);
        }
    ck_assert_int_gt(differ, 0);
}
END_TEST

/* ---- rules ------------------------------------------------------------------------ */

static const harness_tcase rule_tests = { .name = "rules" };

static void expect_refused(ptdp_schedule *s, const char *fragment, int deadlock)
{
    ptdp_schedule_verdict v;
    ck_assert_int_eq(ptdp_schedule_validate(s, &v), PTDP_EINVAL);
    ck_assert_int_eq(v.deadlock, deadlock);
    ck_assert_msg(strstr(v.message, fragment) != NULL, "wanted '%s' in: %s", fragment, v.message);
    ptdp_schedule_destroy(s);
}

static int find(const ptdp_schedule *s, int st, ptdp_action_kind k, int mb)
{
    for (int i = 0; i < s->stage[st].count; i++)
        if (s->stage[st].actions[i].kind == k && s->stage[st].actions[i].mb == mb)
            return i;
    ck_abort_msg("no such action");
    return -1;
}

TEST(rule_tests, broken_split_and_chunked_lists_are_refused_with_their_reason)
{
    ptdp_schedule *s = sched_make("zb-h1", 2, 2, 1);
    s->stage[1].actions[find(s, 1, PTDP_ACT_BACKWARD_WEIGHT, 1)].kind = PTDP_ACT_BACKWARD;
    expect_refused(s, "a BACKWARD and a split one", 0);

    s = sched_make("zb-h1", 2, 2, 1);
    s->stage[0].actions[find(s, 0, PTDP_ACT_BACKWARD_WEIGHT, 0)].mb = 1;     /* W1 twice, no W0 */
    expect_refused(s, "appears twice", 0);

    s = sched_make("zb-h1", 3, 3, 1);           /* move W0 just before B0 */
    int b = find(s, 2, PTDP_ACT_BACKWARD_INPUT, 0), w = find(s, 2, PTDP_ACT_BACKWARD_WEIGHT, 0);
    ptdp_action wa = s->stage[2].actions[w];
    memmove(&s->stage[2].actions[b + 1], &s->stage[2].actions[b], sizeof(ptdp_action) * (size_t)(w - b));
    s->stage[2].actions[b] = wa;
    expect_refused(s, "W multiplies the output gradient", 0);

    s = sched_make("zb-h1", 2, 2, 1);
    int i = find(s, 1, PTDP_ACT_BACKWARD_WEIGHT, 0);
    memmove(&s->stage[1].actions[i], &s->stage[1].actions[i + 1],
            sizeof(ptdp_action) * (size_t)(s->stage[1].count - i - 1));
    s->stage[1].count--;
    expect_refused(s, "BACKWARD_INPUT but no BACKWARD_WEIGHT", 0);

    s = sched_make("interleaved", 2, 2, 2);
    s->stage[0].actions[0].chunk = 2;
    expect_refused(s, "holds chunks 0..1 (--virtual-stages 2)", 0);

    /* Stage 0 receives micro-batch 0 for chunk 1 — but files it under
     * the model's chunk 0: no stage ever sends that, so the pipeline stops. */
    s = sched_make("interleaved", 2, 2, 2);
    i = find(s, 0, PTDP_ACT_RECV_FORWARD, 0);
    ck_assert_int_eq(s->stage[0].actions[i].chunk, 1);
    s->stage[0].actions[i].chunk = 0;
    ptdp_schedule_verdict v;
    ck_assert_int_eq(ptdp_schedule_validate(s, &v), PTDP_EINVAL);
    ck_assert_msg(strstr(v.message, "model's first piece") != NULL, "%s", v.message);
    ptdp_schedule_destroy(s);
}
END_TEST

/* ---- check ---------------------------------------------------------------------- */

static const harness_tcase check_tests = { .name = "check" };

TEST(check_tests, impossible_requests_name_their_flags)
{
    static const sched_shape Q[] = {
        { "interleaved", 4, 8, 2, { NULL, NULL } },
        { "interleaved", 4, 6, 2, { "--micro-batches 6 must be a multiple of --pp 4", "try --micro-batches 8" } },
        { "interleaved", 1, 4, 2, { "needs --pp 2 or more", NULL } },
        { "1f1b", 4, 8, 2, { "--virtual-stages 2: the 1f1b schedule runs one chunk per stage", NULL } },
        { "zb-h1", 4, 8, 3, { "--virtual-stages 3", NULL } },
        { "zb-v", 4, 8, 1, { "valid: 1f1b, gpipe, interleaved, zb-h1", NULL } },
        { "gpipe", 4, 8, 0, { "--virtual-stages 0", NULL } },
    };
    for (size_t i = 0; i < sizeof Q / sizeof Q[0]; i++)
        sched_expect_check(&Q[i]);
}
END_TEST

int main(void)
{
    return harness_main("schedule_ii");
}
