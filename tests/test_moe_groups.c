/*
 * test_moe_groups.c — group-limited routing (moe_groups.c) against a
 * reference written the plain way, on hand-made scores and ties:
 *
 *   score_g = the sum of the floor(k/M) largest values of group g
 *   keep    = the M largest score_g (ties: the lower group)
 *   choose  = the top k (ties: the lower expert) among the kept groups
 *
 * The reference sorts each group by value (a stable sort, ties by index)
 * and picks groups and experts by repeated "largest, lowest index" scans
 * — no heap, no -infinity mask.  Cases: the file's own picture, a group
 * with one strong expert beaten by a group of good ones (the sum, not the
 * max), tied group scores (the lower group wins), tied experts across the
 * kept groups, M = G and G = 1 (no limit: the plain top k), and the
 * router itself (ptdp_moe_route, both scores) choosing inside the groups.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "harness.h"
#include "ptdp/moe_route.h"

static const harness_tcase group_tests = { .name = "groups", .timeout_s = 60 };

/* The index of the largest untaken v[0..n) (ties: the lowest index). */
static int largest(const double *v, const bool *taken, int n)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (!taken[i] && (best < 0 || v[i] > v[best]))
            best = i;
    return best;
}

/* The reference: the k experts a token chooses, in order. */
static void reference(const double *v, int E, int G, int M, int k, int *choice)
{
    const int per = E / G, n = k / M;
    double score[G];
    bool taken[E > G ? E : G], group_kept[G];
    for (int g = 0; g < G; g++) {
        memset(taken, 0, sizeof taken);
        score[g] = 0;
        for (int j = 0; j < n; j++) {
            const int i = largest(v + g * per, taken, per);
            taken[i] = true;
            score[g] += v[g * per + i];
        }
    }
    memset(taken, 0, sizeof taken);
    memset(group_kept, 0, sizeof group_kept);
    for (int j = 0; j < M; j++) {
        const int g = largest(score, taken, G);
        taken[g] = group_kept[g] = true;
    }
    memset(taken, 0, sizeof taken);
    for (int e = 0; e < E; e++)
        taken[e] = !group_kept[e / per];   /* outside the kept groups: never */
    for (int j = 0; j < k; j++) {
        choice[j] = largest(v, taken, E);
        taken[choice[j]] = true;
    }
}

/* ptdp_moe_group_limit, then the top k, as the router does. */
static void limited(const double *v, int E, int G, int M, int k, int *choice)
{
    ptdp_real x[E];
    for (int e = 0; e < E; e++)
        x[e] = (ptdp_real)v[e];
    const ptdp_moe_route_shape s = { .E = E, .k = k, .groups = G, .group_top_k = M };
    ptdp_moe_group_limit(&s, x);
    ptdp_moe_top_k(x, E, k, choice);
}

static const struct {
    int E, G, M, k;
    double v[8];
    int want[4];            /* the choices, by hand */
} cases[] = {
    /* the picture of moe_groups.c: groups 2 and 3 kept, expert 0's .9 left out */
    { 8, 4, 2, 4, { .9, .1, .5, .5, .8, .7, .2, .95 }, { 7, 4, 5, 6 } },
    /* one strong expert (group 0: 1.0 + 0) against two good ones (group 1: .6 + .6) */
    { 8, 2, 1, 2, { 1.0, 0, 0, 0, .6, .6, .1, .1 }, { 4, 5 } },
    /* tied group scores: the lower group */
    { 8, 4, 1, 2, { .5, .5, .25, .75, .75, .25, .125, .25 }, { 0, 1 } },
    /* tied experts in the kept groups: the lower index */
    { 8, 4, 2, 2, { .3, .1, .1, .1, .3, .1, .2, .2 }, { 0, 4 } },
    /* M = G: no limit */
    { 8, 4, 4, 4, { .1, .9, .2, .8, .3, .7, .4, .6 }, { 1, 3, 5, 7 } },
    /* G = 1: no limit */
    { 8, 1, 1, 3, { .1, .9, .2, .8, .3, .7, .4, .6 }, { 1, 3, 5 } },
    /* M = 1, floor(k/M) = k: all k from one group */
    { 8, 2, 1, 3, { .5, .5, .5, .0, .9, .1, .1, .1 }, { 0, 1, 2 } },
};

LOOP_TEST(group_tests, test_hand_made_scores_match_the_reference, (int)(sizeof cases / sizeof cases[0]))
{
    int got[4], ref[4];
    limited(cases[_i].v, cases[_i].E, cases[_i].G, cases[_i].M, cases[_i].k, got);
    reference(cases[_i].v, cases[_i].E, cases[_i].G, cases[_i].M, cases[_i].k, ref);
    for (int j = 0; j < cases[_i].k; j++) {
        ck_assert_msg(ref[j] == cases[_i].want[j], "case %d: the reference's choice %d is %d, not %d", _i, j,
                      ref[j], cases[_i].want[j]);
        ck_assert_msg(got[j] == ref[j], "case %d: choice %d is %d, the reference's %d", _i, j, got[j], ref[j]);
    }
}
END_TEST

/* Random rows with many ties (values of 1/4 steps), every shape the flags
 * accept for E = 8, against the reference. */
TEST(group_tests, test_tie_heavy_rows_match_the_reference)
{
    unsigned x = 12345;
    for (int trial = 0; trial < 2000; trial++) {
        static const int shape[][3] = { { 2, 1, 2 }, { 2, 2, 4 }, { 4, 2, 2 }, { 4, 2, 4 }, { 4, 1, 2 }, { 8, 2, 2 },
                                        { 8, 4, 4 }, { 4, 3, 3 }, { 2, 1, 4 } };   /* G, M, k */
        const int *sh = shape[trial % (int)(sizeof shape / sizeof shape[0])];
        double v[8];
        for (int e = 0; e < 8; e++) {
            x = x * 1103515245u + 12345u;
            v[e] = (double)((x >> 16) % 5) / 4;
        }
        int got[8], ref[8];
        limited(v, 8, sh[0], sh[1], sh[2], got);
        reference(v, 8, sh[0], sh[1], sh[2], ref);
        for (int j = 0; j < sh[2]; j++)
            ck_assert_msg(got[j] == ref[j], "trial %d (G %d, M %d, k %d): choice %d is %d, the reference's %d",
                          trial, sh[0], sh[1], sh[2], j, got[j], ref[j]);
    }
}
END_TEST

/* The router itself: softmax chooses on z, sigmoid on s + b, both inside
 * the kept groups; the gates read the chosen experts as without groups. */
TEST(group_tests, test_the_router_chooses_inside_the_groups)
{
    /* z: group 0 = {0, 1} holds the largest logit, group 1 = {2, 3} the best pair */
    const ptdp_real z[4] = { 3.0, -3.0, 2.0, 2.0 };
    for (int score = 0; score < 2; score++) {
        ptdp_moe_route_shape s = { .T = 1, .E = 4, .k = 2, .alpha = 0.01, .score = (ptdp_moe_score)score,
                                   .groups = 2, .group_top_k = 1 };
        int choice[2], slot[2], load[4], dropped;
        ptdp_real gate[2], probs[4];
        ptdp_moe_route(&s, 1, z, choice, gate, slot, probs, load, &dropped);
        ck_assert_int_eq(choice[0], 2);
        ck_assert_int_eq(choice[1], 3);
        ck_assert_double_eq_tol(gate[0], 0.5, 1e-6);   /* equal logits: equal gates */
        s.groups = 1;                                   /* no limit: the largest logit first */
        ptdp_moe_route(&s, 1, z, choice, gate, slot, probs, load, &dropped);
        ck_assert_int_eq(choice[0], 0);
    }
}
END_TEST

int main(void)
{
    return harness_main("moe-groups");
}
