/*
 * test_pp_layout.c — the pipeline layout (pp_layout.h) as one value: its
 * two maps invert each other, each copy has one first and one last model
 * chunk, the boundaries it says cross devices are the messages a schedule
 * of that layout sends, and the questions the executor, the mesh and the
 * model ask of it give the answers the three shapes need.
 *
 *   maps          place(global(s, c)) = (s, c) for every device and chunk,
 *                 and every g of the copies is somewhere once
 *   ends          per copy one first chunk and one last; a V's device 0
 *                 holds both ends, DualPipe's end devices one of each copy
 *   crossings     = the SEND_FORWARDs of one micro-batch in a schedule
 *                 laid out so (1f1b, interleaved, dualpipev, dualpipe)
 *   runs, mirror  DualPipe's chunk 0 runs the first half of the micro-
 *                 batches, device s mirrors p - 1 - s; nothing else has
 *                 either
 */
#include <stdio.h>

#include "harness.h"
#include "ptdp/error.h"
#include "ptdp/pp_layout.h"
#include "ptdp/schedule.h"

static const harness_tcase layout_tests = { .name = "pp_layout", .timeout_s = 60 };

/* Every shape with p 1..6 (V and DUAL from 2; DUAL even), v 1..3 round a ring. */
typedef struct { ptdp_chunk_layout shape; int p, v; } shape_case;

static int cases_of(shape_case *out, int max)
{
    int n = 0;
    for (int p = 1; p <= 6; p++) {
        for (int v = 1; v <= 3 && n < max; v++)
            out[n++] = (shape_case){ PTDP_CHUNKS_RING, p, v };
        if (p >= 2 && n < max)
            out[n++] = (shape_case){ PTDP_CHUNKS_V, p, 2 };
        if (p >= 2 && p % 2 == 0 && n < max)
            out[n++] = (shape_case){ PTDP_CHUNKS_DUAL, p, 2 };
    }
    return n;
}

TEST(layout_tests, test_the_maps_invert_each_other)
{
    shape_case k[64];
    const int n = cases_of(k, 64);
    for (int i = 0; i < n; i++) {
        const ptdp_pp_layout l = ptdp_pp_layout_make(k[i].shape, k[i].p, k[i].v);
        const int total = ptdp_pp_layout_copies(&l) * ptdp_pp_layout_chunks(&l);
        ck_assert_int_eq(total, l.pp * l.v);   /* every chunk of every device is one model chunk */
        int seen[64] = { 0 };
        for (int s = 0; s < l.pp; s++)
            for (int c = 0; c < l.v; c++) {
                const int g = ptdp_pp_layout_global(&l, s, c);
                ck_assert_msg(g >= 0 && g < total, "shape %d p %d v %d: (%d, %d) -> %d", l.shape, l.pp, l.v, s, c, g);
                seen[g]++;
                int s2, c2;
                ptdp_pp_layout_place(&l, g, &s2, &c2);
                ck_assert_msg(s2 == s && c2 == c, "shape %d p %d v %d: %d placed at (%d, %d), not (%d, %d)",
                              l.shape, l.pp, l.v, g, s2, c2, s, c);
            }
        for (int g = 0; g < total; g++)
            ck_assert_int_eq(seen[g], 1);
    }
}
END_TEST

TEST(layout_tests, test_each_copy_has_one_first_and_one_last)
{
    shape_case k[64];
    const int n = cases_of(k, 64);
    for (int i = 0; i < n; i++) {
        const ptdp_pp_layout l = ptdp_pp_layout_make(k[i].shape, k[i].p, k[i].v);
        int firsts = 0, lasts = 0;
        for (int s = 0; s < l.pp; s++)
            for (int c = 0; c < l.v; c++) {
                firsts += ptdp_pp_layout_is_first(&l, s, c);
                lasts += ptdp_pp_layout_is_last(&l, s, c);
            }
        ck_assert_int_eq(firsts, ptdp_pp_layout_copies(&l));
        ck_assert_int_eq(lasts, ptdp_pp_layout_copies(&l));
        ck_assert(ptdp_pp_layout_holds_first(&l, 0));
    }
    const ptdp_pp_layout v = ptdp_pp_layout_make(PTDP_CHUNKS_V, 4, 1);   /* a V holds two whatever v says */
    ck_assert_int_eq(v.v, 2);
    ck_assert(ptdp_pp_layout_holds_last(&v, 0) && !ptdp_pp_layout_holds_last(&v, 3));
    ck_assert(ptdp_pp_layout_ends_together(&v));
    ck_assert(ptdp_pp_layout_hands_on(&v, 3, 0) && !ptdp_pp_layout_remote_after(&v, 3, 0));
    ck_assert(!ptdp_pp_layout_remote_before(&v, 3, 1) && ptdp_pp_layout_remote_before(&v, 2, 1));
    const ptdp_pp_layout d = ptdp_pp_layout_make(PTDP_CHUNKS_DUAL, 4, 2);
    ck_assert(ptdp_pp_layout_holds_first(&d, 3) && ptdp_pp_layout_holds_last(&d, 0));
    ck_assert(!ptdp_pp_layout_holds_first(&d, 1) && !ptdp_pp_layout_ends_together(&d));
    const ptdp_pp_layout r = ptdp_pp_layout_make(PTDP_CHUNKS_RING, 4, 0);   /* v 0 counts as 1 */
    ck_assert_int_eq(r.v, 1);
    ck_assert(ptdp_pp_layout_holds_last(&r, 3) && !ptdp_pp_layout_holds_last(&r, 0));
}
END_TEST

/* A schedule laid out so sends one micro-batch's activation across each
 * boundary its layout says crosses devices, and no other. */
TEST(layout_tests, test_crossings_are_the_messages_a_schedule_sends)
{
    static const struct { const char *name; int p, m, v; } S[] = {
        { "1f1b", 1, 1, 1 }, { "1f1b", 4, 1, 1 }, { "interleaved", 2, 2, 3 }, { "interleaved", 4, 4, 2 },
        { "dualpipev", 2, 4, 2 }, { "dualpipev", 4, 8, 2 }, { "dualpipe", 2, 4, 2 }, { "dualpipe", 4, 8, 2 },
    };
    for (size_t i = 0; i < sizeof S / sizeof S[0]; i++) {
        ptdp_schedule *s = NULL;
        ck_assert_int_eq(ptdp_schedule_create_v(S[i].name, S[i].p, S[i].m, S[i].v, &s), PTDP_OK);
        const ptdp_pp_layout l = ptdp_schedule_layout(s);
        int sends = 0;
        for (int st = 0; st < s->pp; st++)
            for (int a = 0; a < s->stage[st].count; a++)
                sends += s->stage[st].actions[a].kind == PTDP_ACT_SEND_FORWARD;
        ck_assert_msg(sends == S[i].m * ptdp_pp_layout_crossings(&l), "%s p %d m %d: %d sends, %d crossings a "
                      "micro-batch", S[i].name, S[i].p, S[i].m, sends, ptdp_pp_layout_crossings(&l));
        ptdp_schedule_destroy(s);
    }
}
END_TEST

TEST(layout_tests, test_two_copies_split_the_micro_batches_and_mirror_the_devices)
{
    const ptdp_pp_layout d = ptdp_pp_layout_make(PTDP_CHUNKS_DUAL, 6, 2);
    const ptdp_pp_layout r = ptdp_pp_layout_make(PTDP_CHUNKS_RING, 6, 2);
    for (int mb = 0; mb < 8; mb++) {
        ck_assert(ptdp_pp_layout_runs(&d, 0, mb, 8) == (mb < 4));
        ck_assert(ptdp_pp_layout_runs(&d, 1, mb, 8) == (mb >= 4));
        ck_assert(ptdp_pp_layout_runs(&r, 0, mb, 8) && ptdp_pp_layout_runs(&r, 1, mb, 8));
    }
    for (int s = 0; s < 6; s++) {
        ck_assert_int_eq(ptdp_pp_layout_mirror(&d, s), 5 - s);
        ck_assert_int_eq(ptdp_pp_layout_mirror(&r, s), -1);
        /* the mirror holds the same two model chunks, one of each copy */
        ck_assert_int_eq(ptdp_pp_layout_in_copy(&d, s, 0), ptdp_pp_layout_in_copy(&d, 5 - s, 1));
    }
}
END_TEST

int main(void) { return harness_main("pp_layout"); }
