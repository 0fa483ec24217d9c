/*
 * test_schedule_dualpipe.c — DualPipe as data: two copies, the eight
 * phases folded from DualPipeV, its bubble and its refusals — and the
 * bubble and refusals of DualPipeV too, one table over both schedules.
 *
 *   the copies    p devices, device r holding stage r of the down copy
 *                 (chunk 0) and stage p - 1 - r of the up copy (chunk 1):
 *                 routes stay inside a copy, both ends read data and
 *                 compute a loss, chunk 0 runs micro-batches 0 .. m/2 - 1
 *                 and chunk 1 the rest.
 *   lists         for p 2, 4, 6, 8 and m even from 2p: valid (no deadlock
 *                 under rendezvous), each micro-batch forwarded once and
 *                 backwarded once (whole, or B and W) on every device,
 *                 through its own copy only; no message from one copy to
 *                 the other.
 *   the fold      device r runs DualPipeV's device min(r, p - 1 - r) of p/2
 *                 (p >= 4) on m/2 micro-batches, action for action (pairs included),
 *                 its own direction's copy as DualPipeV's chunk 0 — the
 *                 reference's phase ^= is_in_second_half.
 *   bubble        with F = B = W (an overlapped pair F + B) the measured
 *                 bubble is (p - 2)/(3m + p - 2) to 1e-12: p - 2 idle per
 *                 device, the published (PP/2 - 1)(F&B + B - 3W), beside
 *                 3m of work; the peak of micro-batches alive is at most
 *                 PP + 1, and exactly that once m > 2p.  DualPipeV's, two
 *                 stages a device: (p - 1)/(3m + p - 1), 2(p - 1) idle
 *                 (DualPipe's with PP = 2p), peak 2p + 1; and DualPipe's
 *                 equals DualPipeV's on half the devices.
 *   check         odd p, odd m, m < 2p, v > 2: refused, naming the flags
 *                 (the V: m < 2p, p < 2, v > 2);
 *                 a hand-written action on the other copy's micro-batch is
 *                 refused by the placing pass and by the validator.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "schedule_check.h"

/* ---- the copies ------------------------------------------------------------- */

static const harness_tcase copy_tests = { .name = "copies" };

TEST(copy_tests, device_r_holds_down_stage_r_and_up_stage_p_minus_1_minus_r)
{
    ptdp_schedule *s = sched_make("dualpipe", 4, 8, 1);
    ck_assert_int_eq(s->virtual_stages, 2);
    ck_assert_int_eq(s->layout, PTDP_CHUNKS_DUAL);
    for (int r = 0; r < 4; r++) {
        ck_assert_int_eq(ptdp_chunk_global(s, r, 0), r);            /* down copy: stage r */
        ck_assert_int_eq(ptdp_chunk_global(s, r, 1), 4 + 3 - r);    /* up copy: stage 3 - r */
        for (int c = 0; c < 2; c++) {
            int st, ch;
            ptdp_chunk_place(s, ptdp_chunk_global(s, r, c), &st, &ch);
            ck_assert(st == r && ch == c);
            ck_assert(!ptdp_chunk_hands_on(s, r, c));
        }
    }
    /* both ends read data and compute a loss */
    ck_assert(ptdp_chunk_is_first(s, 0, 0) && ptdp_chunk_is_last(s, 3, 0));
    ck_assert(ptdp_chunk_is_first(s, 3, 1) && ptdp_chunk_is_last(s, 0, 1));
    ck_assert(!ptdp_chunk_is_last(s, 0, 0) && !ptdp_chunk_is_first(s, 0, 1));
    /* no route from one copy to the other */
    int peer, chunk;
    ptdp_action_route(s, PTDP_ACT_SEND_FORWARD, 3, 0, &peer, &chunk);
    ck_assert_int_eq(peer, -1);
    ptdp_action_route(s, PTDP_ACT_SEND_FORWARD, 0, 1, &peer, &chunk);
    ck_assert_int_eq(peer, -1);
    ptdp_action_route(s, PTDP_ACT_SEND_FORWARD, 2, 1, &peer, &chunk);   /* up: 2 -> 1 */
    ck_assert(peer == 1 && chunk == 1);
    ptdp_action_route(s, PTDP_ACT_SEND_BACKWARD, 1, 1, &peer, &chunk);  /* its gradient back */
    ck_assert(peer == 2 && chunk == 1);
    ptdp_action_route(s, PTDP_ACT_SEND_FORWARD, 1, 0, &peer, &chunk);   /* down: 1 -> 2 */
    ck_assert(peer == 2 && chunk == 0);
    for (int mb = 0; mb < 8; mb++) {
        ck_assert_int_eq(ptdp_chunk_runs(s, 0, mb), mb < 4);
        ck_assert_int_eq(ptdp_chunk_runs(s, 1, mb), mb >= 4);
    }
    ptdp_schedule_destroy(s);
}
END_TEST

/* ---- the lists -------------------------------------------------------------- */

static const harness_tcase list_tests = { .name = "lists" };

TEST(list_tests, valid_each_micro_batch_once_through_its_own_copy)
{
    for (int p = 2; p <= 8; p += 2)
        for (int m = 2 * p; m <= 2 * p + 8; m += 2) {
            ptdp_schedule *s = sched_make("dualpipe", p, m, 1);
            ptdp_schedule_verdict v;
            ck_assert_msg(ptdp_schedule_validate(s, &v) == PTDP_OK, "p=%d m=%d: %s", p, m, v.message);
            for (int st = 0; st < p; st++) {
                ck_assert_int_eq(sched_count(s, st, PTDP_ACT_FORWARD, -1, -1), m);
                for (int c = 0; c < 2; c++)
                    for (int mb = 0; mb < m; mb++) {
                        const int own = (mb >= m / 2) == c;
                        ck_assert_int_eq(sched_count(s, st, PTDP_ACT_FORWARD, mb, c), own);
                        int whole = sched_count(s, st, PTDP_ACT_BACKWARD, mb, c);
                        int b = sched_count(s, st, PTDP_ACT_BACKWARD_INPUT, mb, c);
                        ck_assert_int_eq(whole + b, own);
                        ck_assert_int_eq(sched_count(s, st, PTDP_ACT_BACKWARD_WEIGHT, mb, c), b);
                    }
            }
            /* each end: data in for one copy, the loss of the other; nothing crosses copies */
            ck_assert_int_eq(sched_count(s, 0, PTDP_ACT_RECV_FORWARD, -1, 0), 0);
            ck_assert_int_eq(sched_count(s, 0, PTDP_ACT_SEND_FORWARD, -1, 1), 0);
            ck_assert_int_eq(sched_count(s, 0, PTDP_ACT_RECV_BACKWARD, -1, 1), 0);
            ck_assert_int_eq(sched_count(s, p - 1, PTDP_ACT_RECV_FORWARD, -1, 1), 0);
            ck_assert_int_eq(sched_count(s, p - 1, PTDP_ACT_SEND_FORWARD, -1, 0), 0);
            ck_assert_int_eq(sched_count(s, p - 1, PTDP_ACT_RECV_BACKWARD, -1, 0), 0);
            ck_assert_int_eq(sched_count(s, 0, PTDP_ACT_SEND_FORWARD, -1, 0), m / 2);
            ck_assert_int_eq(sched_count(s, p - 1, PTDP_ACT_SEND_FORWARD, -1, 1), m / 2);
            ptdp_schedule_destroy(s);
        }
}
END_TEST

/* Device r's compute is DualPipeV's device h = min(r, p-1-r) of p/2 on m/2
 * micro-batches: DualPipeV's chunk c is DualPipe's chunk c ^ (r >= p/2),
 * and the up copy's micro-batches are numbered from m/2. */
TEST(list_tests, device_r_runs_dualpipev_device_min_r_folded)
{
    for (int p = 4; p <= 8; p += 2)   /* DualPipeV needs 2 devices or more */
        for (int m = 2 * p; m <= 2 * p + 6; m += 2) {
            ptdp_schedule *d = sched_make("dualpipe", p, m, 1), *v = sched_make("dualpipev", p / 2, m / 2, 1);
            for (int r = 0; r < p; r++) {
                const int h = r < p / 2 ? r : p - 1 - r, flip = r >= p / 2;
                const ptdp_stage_actions *dl = &d->stage[r], *vl = &v->stage[h];
                int i = 0, j = 0, n = 0;
                for (;; i++, j++, n++) {
                    while (i < dl->count && !sched_is_compute(dl->actions[i].kind))
                        i++;
                    while (j < vl->count && !sched_is_compute(vl->actions[j].kind))
                        j++;
                    if (i == dl->count || j == vl->count)
                        break;
                    const ptdp_action *a = &dl->actions[i], *b = &vl->actions[j];
                    const int chunk = b->chunk ^ flip;
                    ck_assert_msg(a->kind == b->kind && a->chunk == chunk && a->mb == b->mb + chunk * (m / 2) &&
                                  a->pair == b->pair,
                                  "p=%d m=%d device %d compute %d: kind %d mb %d chunk %d pair %d; DualPipeV's "
                                  "device %d: kind %d mb %d chunk %d pair %d", p, m, r, n, a->kind, a->mb,
                                  a->chunk, a->pair, h, b->kind, b->mb, b->chunk, b->pair);
                }
                ck_assert_msg(i == dl->count && j == vl->count, "p=%d m=%d device %d: lengths differ", p, m, r);
            }
            ptdp_schedule_destroy(d);
            ptdp_schedule_destroy(v);
        }
}
END_TEST

/* ---- the bubble ---------------------------------------------------------------- */

static const harness_tcase bubble_tests = { .name = "bubble" };

/* Both schedules' bubble, makespan, idle and peak with F = B = W = 1, as
 * their papers count them: DualPipe's copies on w = 1 model stage a device,
 * the V's two stages a device (w = 2), so
 *     makespan = w (3m + p - k),  bubble = (p - k) / (3m + p - k),
 *     busy = 3 w m,  idle = w (p - k) = (PP/2 - 1)(F&B + B - 3W) for DualPipe,
 *     peak in flight = w p + 1 (DualPipe's PP + 1) once m > 2p. */
static const struct dual_row {
    const char *name;
    int w, k;                   /* model stages a device; the bubble's p - k */
    int p_first, p_last, p_step, m_extra, m_step;   /* p and m = 2p .. 2p + m_extra */
} DUAL_ROWS[] = {
    { "dualpipe", 1, 2, 2, 8, 2, 10, 2 },
    { "dualpipev", 2, 1, 2, 6, 1, 7, 1 },
};

static void expect_published_bubble(const struct dual_row *q, int p, int m)
{
    const ptdp_schedule_costs c = { .forward = 1, .backward = 2, .backward_input = 1,
                                    .backward_weight = 1, .send = 0 };
    ptdp_schedule *s = sched_make(q->name, p, m, 1);
    ptdp_schedule_timeline *t = NULL;
    ck_assert_int_eq(ptdp_schedule_simulate(s, &c, &t), PTDP_OK);
    const double want = (double)(p - q->k) / (3.0 * m + p - q->k);
    ck_assert_msg(fabs(t->bubble - want) < 1e-12, "%s p=%d m=%d: bubble %.9f, formula %.9f", q->name, p, m,
                  t->bubble, want);
    ck_assert(fabs(ptdp_schedule_bubble_formula(s, NULL) - want) < 1e-15);
    ck_assert_msg(fabs(t->makespan - q->w * (3.0 * m + p - q->k)) < 1e-12, "%s p=%d m=%d: makespan %g", q->name,
                  p, m, t->makespan);
    for (int st = 0; st < p; st++) {
        ck_assert_msg(fabs(t->idle[st] - q->w * (p - q->k)) < 1e-12, "%s p=%d m=%d device %d: idle %g", q->name,
                      p, m, st, t->idle[st]);
        ck_assert(fabs(t->busy[st] - 3.0 * q->w * m) < 1e-12);
        const int peak = ptdp_schedule_peak_in_flight(s, st), most = q->w * p + 1;
        ck_assert_msg(peak <= most && (m <= 2 * p || peak == most), "%s p=%d m=%d device %d: peak %d, w p + 1 = %d",
                      q->name, p, m, st, peak, most);
    }
    ptdp_schedule_timeline_destroy(t);
    ptdp_schedule_destroy(s);
}

LOOP_TEST(bubble_tests, f_equals_b_equals_w_gives_the_published_bubble, 2)
{
    const struct dual_row *q = &DUAL_ROWS[_i];
    for (int p = q->p_first; p <= q->p_last; p += q->p_step)
        for (int m = 2 * p; m <= 2 * p + q->m_extra; m += q->m_step)
            expect_published_bubble(q, p, m);
}
END_TEST

/* The same bubble as DualPipeV on half the devices with half the
 * micro-batches, and with all-to-alls the pairs hide them alike. */
TEST(bubble_tests, equals_dualpipev_on_half_the_devices)
{
    for (int k = 0; k < 2; k++) {
        const ptdp_schedule_costs c = { .forward = 1, .backward = 2, .backward_input = 1,
                                        .backward_weight = 1, .alltoall = k == 0 ? 0.0 : 1.0 };
        for (int p = 4; p <= 8; p += 2) {
            const int m = 2 * p + 4;
            ptdp_schedule *d = sched_make("dualpipe", p, m, 1), *v = sched_make("dualpipev", p / 2, m / 2, 1);
            ptdp_schedule_timeline *td = NULL, *tv = NULL;
            ck_assert_int_eq(ptdp_schedule_simulate(d, &c, &td), PTDP_OK);
            ck_assert_int_eq(ptdp_schedule_simulate(v, &c, &tv), PTDP_OK);
            ck_assert_msg(fabs(td->makespan - tv->makespan) < 1e-12 && fabs(td->bubble - tv->bubble) < 1e-12,
                          "p=%d m=%d x=%g: dualpipe makespan %g bubble %g, dualpipev %g %g", p, m, c.alltoall,
                          td->makespan, td->bubble, tv->makespan, tv->bubble);
            for (int r = 0; r < p; r++)
                ck_assert(fabs(td->busy[r] - tv->busy[r < p / 2 ? r : p - 1 - r]) < 1e-12);
            ptdp_schedule_timeline_destroy(td);
            ptdp_schedule_timeline_destroy(tv);
            ptdp_schedule_destroy(d);
            ptdp_schedule_destroy(v);
        }
    }
}
END_TEST

/* ---- check ----------------------------------------------------------------------- */

static const harness_tcase check_tests = { .name = "check" };

/* DualPipe: an odd --pp, an odd or too small m, more chunks; the V: too
 * few micro-batches, one device, more chunks. */
TEST(check_tests, each_shape_the_schedules_cannot_make_is_refused)
{
    static const sched_shape Q[] = {
        { "dualpipe", 3, 12, 1, { "even --pp", "try --pp 4" } },
        { "dualpipe", 1, 12, 1, { "--pp", NULL } },
        { "dualpipe", 4, 9, 1, { "--micro-batches 9 must be even", "try --micro-batches 10" } },
        { "dualpipe", 4, 6, 1, { "at least 2 x --pp = 8", "try --micro-batches 8" } },
        { "dualpipe", 4, 8, 3, { "--virtual-stages 3", NULL } },
        { "dualpipe", 4, 8, 1, { NULL, NULL } },
        { "dualpipe", 2, 4, 2, { NULL, NULL } },
        { "dualpipev", 4, 7, 1, { "--micro-batches 7", "try --micro-batches 8" } },
        { "dualpipev", 1, 8, 1, { "--pp 2 or more", NULL } },
        { "dualpipev", 2, 8, 3, { "--virtual-stages 3", NULL } },
        { "dualpipev", 4, 8, 1, { NULL, NULL } },
        { "dualpipev", 4, 8, 2, { NULL, NULL } },
    };
    for (size_t i = 0; i < sizeof Q / sizeof Q[0]; i++)
        sched_expect_check(&Q[i]);
    /* the formula's words */
    ptdp_schedule *s = sched_make("dualpipe", 4, 8, 1);
    const char *words = NULL;
    ptdp_schedule_bubble_formula(s, &words);
    ck_assert_str_eq(words, "(p-2)/(3m+p-2)");
    ptdp_schedule_destroy(s);
}
END_TEST

/* A hand-written DualPipe list that runs micro-batch 3 (the up copy's, of
 * m = 4) through chunk 0 (the down copy). */
TEST(check_tests, a_micro_batch_through_the_other_copy_is_refused)
{
    ptdp_schedule *s = NULL;
    ck_assert_int_eq(ptdp_schedule_alloc_v("dual-by-hand", 2, 4, 2, &s), PTDP_OK);
    s->layout = PTDP_CHUNKS_DUAL;
    ptdp_schedule_push_chunk(s, 0, PTDP_ACT_FORWARD, 3, 0);
    char msg[256];
    ck_assert_int_eq(ptdp_schedule_place_comms(s, PTDP_PLACE_BY_SEND_TIME, msg, sizeof msg), PTDP_EINVAL);
    ck_assert_msg(strstr(msg, "chunk 0 runs micro-batches 0..1") != NULL, "%s", msg);
    ptdp_schedule_push(s, 0, PTDP_ACT_OPTIMIZER_STEP, -1);
    ptdp_schedule_verdict v;
    ck_assert_int_eq(ptdp_schedule_validate(s, &v), PTDP_EINVAL);
    ck_assert_msg(strstr(v.message, "chunk 0 runs micro-batches 0..1 only") != NULL, "%s", v.message);
    ptdp_schedule_destroy(s);
}
END_TEST

int main(void)
{
    return harness_main("schedule_dualpipe");
}
