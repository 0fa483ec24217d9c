/*
 * test_schedule.c — pipeline schedules tested as data, without any model.
 *
 * For every pp in 1..8, m in 1..16 and both schedules: the lists are valid
 * (counted here independently of the validator too), deadlock-free under
 * rendezvous send/recv, the bubble is (p-1)/(m+p-1) to 1e-9 with uniform
 * stages and free links, and the activations in flight peak at m (GPipe) and
 * min(p - rank, m) (1F1B).  1F1B with sends before receives must deadlock,
 * and hand-broken lists must be rejected with the rule they break.  Every
 * registry schedule's lists, for every shape up to p = 8, m = 12, v = 3,
 * are pinned by a hash: the executor runs them, so they must not move.
 * The drawings are tested in test_schedule_draw.c.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ptdp/error.h"
#include "ptdp/schedule.h"

static const char *const names[] = { "gpipe", "1f1b" };

static ptdp_schedule *make(const char *name, int pp, int m)
{
    ptdp_schedule *s = NULL;
    ck_assert_int_eq(ptdp_schedule_create(name, pp, m, &s), PTDP_OK);
    return s;
}

/* ---- schedules as data -------------------------------------------------- */

static const harness_tcase data_tests = { .name = "data" };

static int count_kind(const ptdp_schedule *s, int st, ptdp_action_kind k, int mb)
{
    int n = 0;
    for (int i = 0; i < s->stage[st].count; i++)
        n += s->stage[st].actions[i].kind == k && s->stage[st].actions[i].mb == mb;
    return n;
}

TEST(data_tests, every_schedule_is_valid_for_pp_1_to_8_and_m_1_to_16)
{
    for (int pp = 1; pp <= 8; pp++)
        for (int m = 1; m <= 16; m++)
            for (int n = 0; n < 2; n++) {
                ptdp_schedule *s = make(names[n], pp, m);
                ptdp_schedule_verdict v;
                int rc = ptdp_schedule_validate(s, &v);
                ck_assert_msg(rc == PTDP_OK, "%s pp=%d m=%d: %s", names[n], pp, m, v.message);
                ck_assert_int_eq(v.deadlock, 0);
                /* The same facts, counted without the validator. */
                for (int st = 0; st < pp; st++) {
                    const int first = st == 0, last = st == pp - 1;
                    for (int mb = 0; mb < m; mb++) {
                        ck_assert_int_eq(count_kind(s, st, PTDP_ACT_FORWARD, mb), 1);
                        ck_assert_int_eq(count_kind(s, st, PTDP_ACT_BACKWARD, mb), 1);
                        ck_assert_int_eq(count_kind(s, st, PTDP_ACT_RECV_FORWARD, mb), !first);
                        ck_assert_int_eq(count_kind(s, st, PTDP_ACT_SEND_BACKWARD, mb), !first);
                        ck_assert_int_eq(count_kind(s, st, PTDP_ACT_SEND_FORWARD, mb), !last);
                        ck_assert_int_eq(count_kind(s, st, PTDP_ACT_RECV_BACKWARD, mb), !last);
                    }
                    const ptdp_stage_actions *l = &s->stage[st];
                    ck_assert_int_eq(l->actions[l->count - 1].kind, PTDP_ACT_OPTIMIZER_STEP);
                    ck_assert_int_eq(l->count, 2 * m + 2 * m * (!first + !last) + 1);
                }
                ptdp_schedule_destroy(s);
            }
}
END_TEST

TEST(data_tests, peak_in_flight_is_m_for_gpipe_and_p_minus_rank_for_1f1b)
{
    for (int pp = 1; pp <= 8; pp++)
        for (int m = 1; m <= 16; m++) {
            ptdp_schedule *g = make("gpipe", pp, m), *f = make("1f1b", pp, m);
            for (int st = 0; st < pp; st++) {
                ck_assert_int_eq(ptdp_schedule_peak_in_flight(g, st), m);
                ck_assert_int_eq(ptdp_schedule_peak_in_flight(f, st),
                                 pp - st < m ? pp - st : m);
            }
            ptdp_schedule_destroy(g);
            ptdp_schedule_destroy(f);
        }
}
END_TEST

TEST(data_tests, registry_finds_all_and_rejects_bad_requests)
{
    ck_assert_int_eq(ptdp_schedule_count(), 6);
    ck_assert_ptr_eq(ptdp_schedule_find("1f1b"), ptdp_schedule_at(0));   /* the default first */
    ck_assert_ptr_eq(ptdp_schedule_default(), &ptdp_schedule_row_1f1b);
    ck_assert_ptr_eq(ptdp_schedule_find("gpipe"), &ptdp_schedule_row_gpipe);
    ck_assert_ptr_null(ptdp_schedule_at(6));
    ck_assert(ptdp_schedule_find("1f1b")->generate == ptdp_schedule_1f1b);
    ck_assert(ptdp_schedule_find("interleaved")->generate == ptdp_schedule_interleaved);
    ck_assert(ptdp_schedule_find("zb-h1")->generate == ptdp_schedule_zb_h1);
    ck_assert(ptdp_schedule_find("dualpipev")->generate == ptdp_schedule_dualpipev);
    ck_assert(ptdp_schedule_find("dualpipe")->generate == ptdp_schedule_dualpipe);
    ck_assert_ptr_null(ptdp_schedule_find("zb-v"));
    ptdp_schedule *s = (ptdp_schedule *)1;
    ck_assert_int_eq(ptdp_schedule_create("zb-v", 4, 8, &s), PTDP_EINVAL);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(ptdp_schedule_create("1f1b", 0, 8, &s), PTDP_EINVAL);
    ck_assert_int_eq(ptdp_schedule_create("1f1b", 4, 0, &s), PTDP_EINVAL);
}
END_TEST

static void too_long(ptdp_schedule *s)
{
    for (int i = 0; i <= s->stage[0].capacity; i++)
        ptdp_schedule_push(s, 0, PTDP_ACT_FORWARD, 0);
}

TEST(data_tests, a_generator_that_overflows_is_reported)
{
    ptdp_schedule *s = NULL;
    ck_assert_int_eq(ptdp_schedule_generate(too_long, PTDP_PLACE_EVEN_ODD, "too-long", 2, 3, &s), PTDP_EINVAL);
    ck_assert_ptr_null(s);
}
END_TEST

/* Every list the registry makes (and 1F1B placed send-first), for the
 * shapes p 1..8, m 1..12, v 1..3 that ptdp_schedule_check accepts, hashed
 * action by action (FNV-1a over kind, micro-batch, peer, chunk).  The
 * executor runs exactly these lists, so they fix the virtual times, bytes
 * and bits of every pipelined run: a generator or the placing pass that
 * changed one would show here first.  The numbers are those of the lists
 * as GPipe and 1F1B first wrote them by hand. */
static uint64_t fnv(uint64_t h, int x)
{
    for (int i = 0; i < 4; i++) {
        h ^= (uint64_t)(((unsigned)x >> (8 * i)) & 0xFF);
        h *= 1099511628211ull;
    }
    return h;
}

static uint64_t hash_lists(const ptdp_schedule *s, uint64_t h)
{
    for (int st = 0; st < s->pp; st++) {
        h = fnv(h, -100 - st);
        for (int i = 0; i < s->stage[st].count; i++) {
            const ptdp_action *a = &s->stage[st].actions[i];
            h = fnv(fnv(fnv(fnv(h, (int)a->kind), a->mb), a->peer), a->chunk);
        }
    }
    return h;
}

static uint64_t hash_schedule(const char *name)
{
    uint64_t h = 14695981039346656037ull;
    char msg[256];
    for (int p = 1; p <= 8; p++)
        for (int m = 1; m <= 12; m++)
            for (int v = 1; v <= 3; v++) {
                ptdp_schedule *s = NULL;
                if (name == NULL && v == 1)
                    ck_assert_int_eq(ptdp_schedule_generate(ptdp_schedule_1f1b, PTDP_PLACE_SEND_FIRST,
                                                            "1f1b-naive", p, m, &s), PTDP_OK);
                else if (name == NULL || ptdp_schedule_check(name, p, m, v, msg, sizeof msg) != PTDP_OK)
                    continue;
                else
                    ck_assert_int_eq(ptdp_schedule_create_v(name, p, m, v, &s), PTDP_OK);
                h = hash_lists(s, fnv(fnv(fnv(h, p), m), v));
                ptdp_schedule_destroy(s);
            }
    return h;
}

TEST(data_tests, the_lists_are_the_ones_the_executor_has_always_run)
{
    static const struct {
        const char *name;
        uint64_t hash;
    } pinned[] = {
        { "gpipe",       0x94f96fb9cb681425ull },
        { "1f1b",        0x5fb122c989fd7a95ull },
        { "interleaved", 0x583fd509f7b6c0aeull },
        { "zb-h1",       0xedf65d3c47c19dddull },
        { NULL,          0x1038aa4506e34a15ull },    /* 1f1b-naive */
    };
    for (size_t k = 0; k < sizeof pinned / sizeof pinned[0]; k++) {
        uint64_t h = hash_schedule(pinned[k].name);
        ck_assert_msg(h == pinned[k].hash, "%s: the lists hash to 0x%016llxull",
                      pinned[k].name ? pinned[k].name : "1f1b-naive", (unsigned long long)h);
    }
}
END_TEST

/* ---- deadlocks -------------------------------------------------------------- */

static const harness_tcase validator_tests = { .name = "validator" };

TEST(validator_tests, naive_1f1b_deadlocks_and_names_the_stages)
{
    for (int pp = 2; pp <= 8; pp++)
        for (int m = 2; m <= 16; m++) {
            ptdp_schedule *s = NULL;
            ck_assert_int_eq(ptdp_schedule_generate(ptdp_schedule_1f1b, PTDP_PLACE_SEND_FIRST, "naive",
                                                    pp, m, &s), PTDP_OK);
            ptdp_schedule_verdict v;
            ck_assert_int_eq(ptdp_schedule_validate(s, &v), PTDP_EINVAL);
            ck_assert_msg(v.deadlock == 1, "pp=%d m=%d: %s", pp, m, v.message);
            /* The last two stages each send first: stage p-2 its activation,
             * stage p-1 its gradient. */
            char want[96];
            snprintf(want, sizeof want, "stages %d and %d wait for each other", pp - 2, pp - 1);
            ck_assert_msg(strstr(v.message, want) != NULL, "%s", v.message);
            snprintf(want, sizeof want, "stage %d blocked at action", pp - 1);
            ck_assert_msg(strstr(v.message, want) != NULL, "%s", v.message);
            ck_assert(strstr(v.message, "SEND_BACKWARD") && strstr(v.message, "SEND_FORWARD"));
            ck_assert_int_ge(v.stage, 0);
            ptdp_schedule_destroy(s);
        }
    /* With one micro-batch there is no steady state, nothing to exchange. */
    ptdp_schedule *s = NULL;
    ck_assert_int_eq(ptdp_schedule_generate(ptdp_schedule_1f1b, PTDP_PLACE_SEND_FIRST, "naive", 4, 1, &s), 0);
    ck_assert_int_eq(ptdp_schedule_validate(s, NULL), PTDP_OK);
    ptdp_schedule_destroy(s);
}
END_TEST

TEST(validator_tests, crossed_receive_order_deadlocks)
{
    /* Stage 0 sends F0 then F1; stage 1 waits for F1 first. */
    ptdp_schedule *s = NULL;
    ck_assert_int_eq(ptdp_schedule_alloc("crossed", 2, 2, &s), PTDP_OK);
    for (int mb = 0; mb < 2; mb++) {
        ptdp_schedule_push(s, 0, PTDP_ACT_FORWARD, mb);
        ptdp_schedule_push(s, 0, PTDP_ACT_SEND_FORWARD, mb);
    }
    for (int mb = 1; mb >= 0; mb--) {
        ptdp_schedule_push(s, 1, PTDP_ACT_RECV_FORWARD, mb);
        ptdp_schedule_push(s, 1, PTDP_ACT_FORWARD, mb);
    }
    for (int mb = 0; mb < 2; mb++) {
        ptdp_schedule_push(s, 1, PTDP_ACT_BACKWARD, mb);
        ptdp_schedule_push(s, 1, PTDP_ACT_SEND_BACKWARD, mb);
        ptdp_schedule_push(s, 0, PTDP_ACT_RECV_BACKWARD, mb);
        ptdp_schedule_push(s, 0, PTDP_ACT_BACKWARD, mb);
    }
    ptdp_schedule_push(s, 0, PTDP_ACT_OPTIMIZER_STEP, -1);
    ptdp_schedule_push(s, 1, PTDP_ACT_OPTIMIZER_STEP, -1);
    ptdp_schedule_verdict v;
    ck_assert_int_eq(ptdp_schedule_validate(s, &v), PTDP_EINVAL);
    ck_assert_int_eq(v.deadlock, 1);
    ck_assert_msg(strstr(v.message, "stage 0 blocked at action 1") != NULL, "%s", v.message);
    ck_assert_msg(strstr(v.message, "stage 1 blocked at action 0") != NULL, "%s", v.message);
    ptdp_schedule_destroy(s);
}
END_TEST

/* ---- the validator's rules, each broken once ------------------------------- */

/* A valid GPipe for 3 stages and 2 micro-batches with action `drop` of stage
 * `st` removed, or moved to position `to` (if to >= 0). */
static ptdp_schedule *gpipe_edited(int st, int drop, int to)
{
    ptdp_schedule *s = make("gpipe", 3, 2);
    ptdp_stage_actions *l = &s->stage[st];
    ptdp_action a = l->actions[drop];
    memmove(&l->actions[drop], &l->actions[drop + 1],
            sizeof(ptdp_action) * (size_t)(l->count - drop - 1));
    l->count--;
    if (to >= 0) {
        memmove(&l->actions[to + 1], &l->actions[to], sizeof(ptdp_action) * (size_t)(l->count - to));
        l->actions[to] = a;
        l->count++;
    }
    return s;
}

static void expect_rejected(ptdp_schedule *s, const char *fragment)
{
    ptdp_schedule_verdict v;
    ck_assert_int_eq(ptdp_schedule_validate(s, &v), PTDP_EINVAL);
    ck_assert_int_eq(v.deadlock, 0);
    ck_assert_msg(strstr(v.message, fragment) != NULL, "wanted '%s' in: %s", fragment, v.message);
    ptdp_schedule_timeline *t = (ptdp_schedule_timeline *)1;
    ptdp_schedule_costs c = { .forward = 1, .backward = 1 };
    ck_assert_int_eq(ptdp_schedule_simulate(s, &c, &t), PTDP_EINVAL);
    ck_assert_ptr_null(t);
    ptdp_schedule_destroy(s);
}

TEST(validator_tests, broken_lists_are_rejected_with_the_rule_they_break)
{
    /* gpipe 3x2, stage 1: F0<-0 F0 F0->2 F1<-0 F1 F1->2 B1<-2 B1 B1->0 B0<-2 B0 B0->0 step */
    ptdp_schedule *s = gpipe_edited(1, 0, 0);     /* removed and put back: valid */
    ck_assert_int_eq(ptdp_schedule_validate(s, NULL), PTDP_OK);
    ptdp_schedule_destroy(s);
    expect_rejected(gpipe_edited(1, 10, -1), "BACKWARD of micro-batch 0 is missing");
    expect_rejected(gpipe_edited(1, 1, 0), "a forward needs its input activation");
    expect_rejected(gpipe_edited(1, 7, 3), "a backward needs its forward's activations");
    expect_rejected(gpipe_edited(1, 6, 8), "a backward needs its output gradient");
    expect_rejected(gpipe_edited(1, 2, 0), "an activation is sent once computed");
    expect_rejected(gpipe_edited(1, 12, 5), "optimizer step is action 5");
    expect_rejected(gpipe_edited(1, 12, -1), "no optimizer step");
    expect_rejected(gpipe_edited(1, 3, -1), "RECV_FORWARD of micro-batch 1 is missing");

    s = make("gpipe", 3, 2);
    s->stage[1].actions[4].mb = 0;                  /* F1 becomes a second F0 */
    expect_rejected(s, "appears twice");
    s = make("gpipe", 3, 2);
    s->stage[0].actions[0] = (ptdp_action){ PTDP_ACT_RECV_FORWARD, 0, -1, 0, 0 };
    expect_rejected(s, "stage 0 has no previous stage");
    s = make("gpipe", 3, 2);
    s->stage[1].actions[2].peer = 0;                /* "send F0 to stage 0" */
    expect_rejected(s, "names stage 0");
    s = make("gpipe", 3, 2);
    s->stage[2].actions[1].mb = 7;
    expect_rejected(s, "micro-batches 0..1");
}
END_TEST

/* ---- timing and the bubble ---------------------------------------------------- */

static const harness_tcase timing_tests = { .name = "timing" };

TEST(timing_tests, bubble_equals_the_formula_for_uniform_stages_and_free_links)
{
    const double costs[][2] = { { 1, 2 }, { 1, 1 }, { 0.5, 1.5 }, { 3, 0.25 } };
    for (int pp = 1; pp <= 8; pp++)
        for (int m = 1; m <= 16; m++)
            for (int n = 0; n < 2; n++)
                for (int c = 0; c < 4; c++) {
                    ptdp_schedule *s = make(names[n], pp, m);
                    ptdp_schedule_costs k = { .forward = costs[c][0], .backward = costs[c][1] };
                    ptdp_schedule_timeline *t = NULL;
                    ck_assert_int_eq(ptdp_schedule_simulate(s, &k, &t), PTDP_OK);
                    const double step = k.forward + k.backward;
                    ck_assert_msg(fabs(t->bubble - ptdp_bubble_formula(pp, m)) < 1e-9,
                                  "%s pp=%d m=%d t_f=%g t_b=%g: bubble %.12f, formula %.12f",
                                  names[n], pp, m, k.forward, k.backward, t->bubble,
                                  ptdp_bubble_formula(pp, m));
                    ck_assert(fabs(t->makespan - (m + pp - 1) * step) < 1e-9);
                    for (int st = 0; st < pp; st++) {
                        ck_assert(fabs(t->busy[st] - m * step) < 1e-9);
                        ck_assert(fabs(t->idle[st] - (pp - 1) * step) < 1e-9);
                    }
                    ptdp_schedule_timeline_destroy(t);
                    ptdp_schedule_destroy(s);
                }
    ck_assert(fabs(ptdp_bubble_formula(4, 8) - 3.0 / 11.0) < 1e-15);
    ck_assert(ptdp_bubble_formula(1, 5) == 0.0);
}
END_TEST

/* Recorded times obey the model: a stage never overlaps itself, and a recv
 * ends no earlier than its send plus the link time. */
TEST(timing_tests, timeline_respects_messages_and_link_cost)
{
    const double fwd[3] = { 1, 3, 1 }, bwd[3] = { 2, 6, 2 };
    for (int n = 0; n < 2; n++) {
        ptdp_schedule *s = make(names[n], 3, 6);
        ptdp_schedule_costs k = { .forward = 1, .backward = 2, .send = 0.25,
                                  .forward_per_stage = fwd, .backward_per_stage = bwd };
        ptdp_schedule_timeline *t = NULL;
        ck_assert_int_eq(ptdp_schedule_simulate(s, &k, &t), PTDP_OK);
        for (int st = 0; st < 3; st++) {
            double prev = 0;
            for (int i = 0; i < s->stage[st].count; i++) {
                const ptdp_action *a = &s->stage[st].actions[i];
                ck_assert(t->time[st][i].start >= prev - 1e-12);
                ck_assert(t->time[st][i].end >= t->time[st][i].start);
                prev = t->time[st][i].end;
                if (a->kind != PTDP_ACT_RECV_FORWARD && a->kind != PTDP_ACT_RECV_BACKWARD)
                    continue;
                ptdp_action_kind send = a->kind == PTDP_ACT_RECV_FORWARD
                                        ? PTDP_ACT_SEND_FORWARD : PTDP_ACT_SEND_BACKWARD;
                for (int j = 0; j < s->stage[a->peer].count; j++)
                    if (s->stage[a->peer].actions[j].kind == send &&
                        s->stage[a->peer].actions[j].mb == a->mb)
                        ck_assert(t->time[st][i].end >=
                                  t->time[a->peer][j].start + 0.25 - 1e-12);
            }
        }
        /* The slow middle stage sets the pace: busy m (3 + 6) = 54, after
         * stage 0's first forward has reached it, before stage 0's last
         * backward can start. */
        ck_assert(fabs(t->busy[1] - 54) < 1e-12);
        ck_assert(t->makespan >= (1 + 0.25) + 54 + (0.25 + 2) - 1e-9);
        ck_assert(t->bubble > ptdp_bubble_formula(3, 6));
        ptdp_schedule_timeline_destroy(t);
        ptdp_schedule_destroy(s);
    }
}
END_TEST

TEST(data_tests, print_lists_every_action)
{
    ptdp_schedule *s = make("1f1b", 2, 2);
    FILE *f = tmpfile();
    ptdp_schedule_print(s, f);
    char *text = harness_read_stream(f);
    /* stage 1 (last, odd): receive first in its exchange with stage 0 */
    ck_assert_msg(strstr(text, "F0<-0   F0      B0      F1<-0   B0->0") != NULL, "%s", text);
    ck_assert_ptr_nonnull(strstr(text, "stage 0 (9 actions)"));
    free(text);
    fclose(f);
    ptdp_schedule_destroy(s);
}
END_TEST

int main(void)
{
    return harness_main("schedule");
}
