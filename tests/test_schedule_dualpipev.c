/*
 * test_schedule_dualpipev.c — DualPipeV as data: the V, its eight phases,
 * its all-to-alls and its pairs (its bubble and refusals are tested beside
 * DualPipe's, one table for both, in test_schedule_dualpipe.c).
 *
 *   the V         with p devices the model is 2p chunks, device r holding
 *                 r (chunk 0) and 2p - 1 - r (chunk 1): routes go down and
 *                 back up, the last device hands chunk p - 1 to chunk p
 *                 itself (no message), device 0 reads the data and computes
 *                 the loss.
 *   lists         for p 2..6, m = 2p..2p + 7: valid (no deadlock under
 *                 rendezvous), every (chunk, micro-batch) forwarded once and
 *                 backwarded once (whole, or B and W), each device 2m
 *                 forwards, the last device no message across its tip.
 *   phases        device 0 of p = 2, m = 4 in the reference's order.
 *   all-to-alls   alone an F or B waits for its own; in a pair they hide
 *                 under the partner's compute, the pair max(F + B, 2 x).
 *   pairs         an F&B pair waits for both inputs and sends both at its
 *                 end; a pair flag on anything but a forward before a whole
 *                 backward is refused.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "schedule_check.h"

/* ---- the V ------------------------------------------------------------------ */

static const harness_tcase v_tests = { .name = "v" };

TEST(v_tests, device_r_holds_stages_r_and_2p_minus_1_minus_r)
{
    ptdp_schedule *s = sched_make("dualpipev", 4, 8, 1);
    ck_assert_int_eq(s->virtual_stages, 2);
    ck_assert_int_eq(s->layout, PTDP_CHUNKS_V);
    for (int r = 0; r < 4; r++) {
        ck_assert_int_eq(ptdp_chunk_global(s, r, 0), r);
        ck_assert_int_eq(ptdp_chunk_global(s, r, 1), 7 - r);
        for (int c = 0; c < 2; c++) {
            int st, ch;
            ptdp_chunk_place(s, ptdp_chunk_global(s, r, c), &st, &ch);
            ck_assert_int_eq(st, r);
            ck_assert_int_eq(ch, c);
        }
    }
    ck_assert(ptdp_chunk_is_first(s, 0, 0) && ptdp_chunk_is_last(s, 0, 1));
    ck_assert(!ptdp_chunk_is_last(s, 3, 0) && !ptdp_chunk_is_first(s, 3, 1));
    ck_assert(ptdp_chunk_hands_on(s, 3, 0));
    for (int r = 0; r < 3; r++)
        ck_assert(!ptdp_chunk_hands_on(s, r, 0) && !ptdp_chunk_hands_on(s, r, 1));
    int peer, chunk;
    ptdp_action_route(s, PTDP_ACT_SEND_FORWARD, 1, 1, &peer, &chunk);     /* stage 6 -> 7 */
    ck_assert(peer == 0 && chunk == 1);
    ptdp_action_route(s, PTDP_ACT_SEND_BACKWARD, 1, 1, &peer, &chunk);    /* stage 6 -> 5 */
    ck_assert(peer == 2 && chunk == 1);
    ptdp_action_route(s, PTDP_ACT_SEND_FORWARD, 3, 0, &peer, &chunk);     /* the tip */
    ck_assert(peer == 3 && chunk == 1);
    ptdp_schedule_destroy(s);
}
END_TEST

/* ---- the lists -------------------------------------------------------------- */

static const harness_tcase list_tests = { .name = "lists" };

TEST(list_tests, valid_each_chunk_once_and_no_message_across_the_tip)
{
    for (int p = 2; p <= 6; p++)
        for (int m = 2 * p; m <= 2 * p + 7; m++) {
            ptdp_schedule *s = sched_make("dualpipev", p, m, 1);
            ptdp_schedule_verdict v;
            ck_assert_msg(ptdp_schedule_validate(s, &v) == PTDP_OK, "p=%d m=%d: %s", p, m, v.message);
            for (int st = 0; st < p; st++) {
                ck_assert_int_eq(sched_count(s, st, PTDP_ACT_FORWARD, -1, -1), 2 * m);
                for (int c = 0; c < 2; c++)
                    for (int mb = 0; mb < m; mb++) {
                        ck_assert_int_eq(sched_count(s, st, PTDP_ACT_FORWARD, mb, c), 1);
                        int whole = sched_count(s, st, PTDP_ACT_BACKWARD, mb, c);
                        int b = sched_count(s, st, PTDP_ACT_BACKWARD_INPUT, mb, c);
                        ck_assert_int_eq(whole + b, 1);
                        ck_assert_int_eq(sched_count(s, st, PTDP_ACT_BACKWARD_WEIGHT, mb, c), b);
                    }
            }
            /* the tip: chunk 0 of the last device sends nothing forward,
             * its chunk 1 nothing backward; device 0 neither receives an
             * input for chunk 0 nor a gradient for chunk 1 */
            ck_assert_int_eq(sched_count(s, p - 1, PTDP_ACT_SEND_FORWARD, -1, 0), 0);
            ck_assert_int_eq(sched_count(s, p - 1, PTDP_ACT_RECV_FORWARD, -1, 1), 0);
            ck_assert_int_eq(sched_count(s, p - 1, PTDP_ACT_SEND_BACKWARD, -1, 1), 0);
            ck_assert_int_eq(sched_count(s, p - 1, PTDP_ACT_RECV_BACKWARD, -1, 0), 0);
            ck_assert_int_eq(sched_count(s, 0, PTDP_ACT_RECV_FORWARD, -1, 0), 0);
            ck_assert_int_eq(sched_count(s, 0, PTDP_ACT_RECV_BACKWARD, -1, 1), 0);
            ck_assert_int_eq(sched_count(s, 0, PTDP_ACT_SEND_FORWARD, -1, 1), 0);
            ck_assert_int_eq(sched_count(s, 0, PTDP_ACT_SEND_FORWARD, -1, 0), m);
            ptdp_schedule_destroy(s);
        }
}
END_TEST

/* Device 0 of p = 2, m = 4, compute only, in the reference's phases:
 * 1: F0 F1 (chunk 0)  2: F2.0 F0.1  3: B0.1' W0.1 F1.1  4: (F3.0 B1.1)(F2.1 B0.0)
 * 5: B2.1 (F3.1 B1.0)  6: B3.1 B2.0'  7: W2.0 B3.0'  8: W3.0 */
TEST(list_tests, device_0_runs_the_reference_phases)
{
    static const char *const want[] = {
        "F0", "F1", "F2", "F0.1", "B0.1", "W0.1", "F1.1", "F3", "B1.1", "F2.1", "B0",
        "B2.1", "F3.1", "B1", "B3.1", "B2", "W2", "B3", "W3",
    };
    ptdp_schedule *s = sched_make("dualpipev", 2, 4, 1);
    int k = 0;
    for (int i = 0; i < s->stage[0].count; i++) {
        const ptdp_action *a = &s->stage[0].actions[i];
        if (a->kind != PTDP_ACT_FORWARD && a->kind != PTDP_ACT_BACKWARD &&
            a->kind != PTDP_ACT_BACKWARD_INPUT && a->kind != PTDP_ACT_BACKWARD_WEIGHT)
            continue;
        char tok[32];
        ptdp_action_format(a, tok, sizeof tok);
        ck_assert_msg(k < (int)(sizeof want / sizeof want[0]) && strcmp(tok, want[k]) == 0,
                      "compute %d is %s, want %s", k, tok, k < 19 ? want[k] : "nothing");
        k++;
    }
    ck_assert_int_eq(k, 19);
    /* the pairs: F3.0 with B1.1, F2.1 with B0.0, F3.1 with B1.0 */
    int pairs = 0;
    for (int i = 0; i < s->stage[0].count; i++)
        pairs += s->stage[0].actions[i].pair;
    ck_assert_int_eq(pairs, 3);
    ptdp_schedule_destroy(s);
}
END_TEST

/* ---- the bubble ---------------------------------------------------------------- */

static const harness_tcase bubble_tests = { .name = "bubble" };

/* With all-to-alls of x per F or B: alone each waits for its own; in a
 * pair they run under the partner's compute, the pair taking
 * max(F + B, 2x).  So with 2x <= F + B = 3 a device is busy 6m + x for
 * every F or B outside a pair, and with 2x = 8 each pair takes 8. */
TEST(bubble_tests, a_pair_hides_its_all_to_alls_under_the_partners_compute)
{
    for (int k = 0; k < 2; k++) {
        const double x = k == 0 ? 1.0 : 4.0;
        const ptdp_schedule_costs c = { .forward = 1, .backward = 2, .backward_input = 1,
                                        .backward_weight = 1, .alltoall = x };
        ptdp_schedule *s = sched_make("dualpipev", 3, 8, 1);
        ptdp_schedule_timeline *t = NULL;
        ck_assert_int_eq(ptdp_schedule_simulate(s, &c, &t), PTDP_OK);
        for (int st = 0; st < 3; st++) {
            int alone = 0, pairs = 0;
            const ptdp_stage_actions *l = &s->stage[st];
            for (int i = 0; i < l->count; i++) {
                const ptdp_action_kind kind = l->actions[i].kind;
                const int in_pair = l->actions[i].pair || (i > 0 && l->actions[i - 1].pair);
                pairs += l->actions[i].pair;
                alone += !in_pair && (kind == PTDP_ACT_FORWARD || kind == PTDP_ACT_BACKWARD ||
                                      kind == PTDP_ACT_BACKWARD_INPUT);
            }
            const double want = 6.0 * 8 + x * alone + (2 * x > 3 ? (2 * x - 3) * pairs : 0);
            ck_assert_msg(fabs(t->busy[st] - want) < 1e-12, "x %g stage %d: busy %g, want %g (%d alone, %d pairs)",
                          x, st, t->busy[st], want, alone, pairs);
            ck_assert_int_gt(pairs, 0);
        }
        ptdp_schedule_timeline_destroy(t);
        ptdp_schedule_destroy(s);
    }
    /* ZB-H1 has no pairs: every F and B waits for its all-to-alls */
    ptdp_schedule *z = NULL;
    ck_assert_int_eq(ptdp_schedule_create("zb-h1", 4, 8, &z), PTDP_OK);
    const ptdp_schedule_costs c = { .forward = 1, .backward = 2, .backward_input = 1, .backward_weight = 1,
                                    .alltoall = 1 };
    ptdp_schedule_timeline *t = NULL;
    ck_assert_int_eq(ptdp_schedule_simulate(z, &c, &t), PTDP_OK);
    for (int st = 0; st < 4; st++)
        ck_assert(fabs(t->busy[st] - (3.0 * 8 + 2.0 * 8)) < 1e-12);
    ptdp_schedule_timeline_destroy(t);
    ptdp_schedule_destroy(z);
}
END_TEST

/* ---- the pairs ----------------------------------------------------------------- */

static const harness_tcase pair_tests = { .name = "pairs" };

/* In a pair the forward's send comes after the backward, and the
 * backward's receive before the forward. */
TEST(pair_tests, a_pair_receives_both_first_and_sends_both_after)
{
    ptdp_schedule *s = sched_make("dualpipev", 3, 8, 1);
    int seen = 0;
    for (int st = 0; st < 3; st++) {
        const ptdp_stage_actions *l = &s->stage[st];
        for (int i = 0; i < l->count; i++) {
            if (!l->actions[i].pair)
                continue;
            const ptdp_action *f = &l->actions[i], *b = &l->actions[i + 1];
            ck_assert_int_eq(f->kind, PTDP_ACT_FORWARD);
            ck_assert_int_eq(b->kind, PTDP_ACT_BACKWARD);
            for (int j = i + 2; j < l->count; j++)
                if (l->actions[j].kind == PTDP_ACT_RECV_BACKWARD && l->actions[j].mb == b->mb &&
                    l->actions[j].chunk == b->chunk)
                    ck_abort_msg("stage %d: the gradient of a pair's backward received after it", st);
            seen++;
        }
    }
    ck_assert_int_gt(seen, 0);
    ptdp_schedule_destroy(s);
}
END_TEST

static void bad_pair(ptdp_schedule *s)
{
    ptdp_schedule_push(s, 0, PTDP_ACT_FORWARD, 0);
    ptdp_schedule_push(s, 0, PTDP_ACT_BACKWARD_INPUT, 0);
    ptdp_schedule_push(s, 0, PTDP_ACT_BACKWARD_WEIGHT, 0);
    s->stage[0].actions[0].pair = 1;     /* a pair needs a whole backward */
    ptdp_schedule_push(s, 1, PTDP_ACT_FORWARD, 0);
    ptdp_schedule_push(s, 1, PTDP_ACT_BACKWARD, 0);
}

TEST(pair_tests, a_pair_that_is_not_a_forward_and_a_whole_backward_is_refused)
{
    ptdp_schedule *s = NULL;
    ck_assert_int_eq(ptdp_schedule_alloc("bad", 2, 1, &s), PTDP_OK);
    bad_pair(s);
    char msg[256];
    ck_assert_int_eq(ptdp_schedule_place_comms(s, PTDP_PLACE_BY_SEND_TIME, msg, sizeof msg), PTDP_EINVAL);
    ck_assert_msg(strstr(msg, "overlapped pair") != NULL, "%s", msg);
    ptdp_schedule_destroy(s);
}
END_TEST

/* A hand-written V whose tip runs chunk 1's forward before chunk 0's. */
TEST(pair_tests, the_tip_out_of_order_is_refused)
{
    ptdp_schedule *s = NULL;
    ck_assert_int_eq(ptdp_schedule_alloc_v("tip", 2, 1, 2, &s), PTDP_OK);
    s->layout = PTDP_CHUNKS_V;
    ptdp_schedule_push_chunk(s, 1, PTDP_ACT_FORWARD, 0, 0);     /* stage 1, chunk 0: model stage 1 */
    ptdp_schedule_push_chunk(s, 1, PTDP_ACT_FORWARD, 0, 1);     /* chunk 1: model stage 2 */
    ptdp_schedule_push_chunk(s, 1, PTDP_ACT_BACKWARD, 0, 1);
    ptdp_schedule_push_chunk(s, 1, PTDP_ACT_BACKWARD, 0, 0);
    ptdp_schedule_push_chunk(s, 0, PTDP_ACT_FORWARD, 0, 0);
    ptdp_schedule_push_chunk(s, 0, PTDP_ACT_FORWARD, 0, 1);
    ptdp_schedule_push_chunk(s, 0, PTDP_ACT_BACKWARD, 0, 1);
    ptdp_schedule_push_chunk(s, 0, PTDP_ACT_BACKWARD, 0, 0);
    char msg[256];
    ck_assert_int_eq(ptdp_schedule_place_comms(s, PTDP_PLACE_BY_SEND_TIME, msg, sizeof msg), PTDP_OK);
    ptdp_schedule_verdict v;
    ck_assert_int_eq(ptdp_schedule_validate(s, &v), PTDP_OK);
    /* now swap the tip's two forwards */
    ptdp_stage_actions *l = &s->stage[1];
    int f0 = -1, f1 = -1;
    for (int i = 0; i < l->count; i++)
        if (l->actions[i].kind == PTDP_ACT_FORWARD)
            *(l->actions[i].chunk == 0 ? &f0 : &f1) = i;
    ptdp_action tmp = l->actions[f0];
    l->actions[f0] = l->actions[f1];
    l->actions[f1] = tmp;
    ck_assert_int_eq(ptdp_schedule_validate(s, &v), PTDP_EINVAL);
    ck_assert_msg(strstr(v.message, "whose output is its input") != NULL, "%s", v.message);
    ptdp_schedule_destroy(s);
}
END_TEST

int main(void)
{
    return harness_main("schedule_dualpipev");
}
