/*
 * test_moe_route.c — the router's top-k (moe_route.h: ptdp_moe_top_k)
 * against the simple selection it replaced, and its cost.
 *
 *   simple selection   for j < k: the first untaken index, replaced by any
 *                      untaken e with a larger z         k E scans, k^2 E checks
 *   ptdp_moe_top_k     a heap of the k best, then sorted  O(E log k)
 *
 * Same choices, in the same order, on random logits, on tie-heavy ones
 * (a few values, both zeros, infinities: ties go to the lower index) and
 * on rows with NaNs (which the simple selection takes exactly when one is
 * the lowest untaken index).  The cost is counted, never timed: at
 * E = k = 4096 the simple selection makes k E = 16.8M comparisons of
 * logits and some k^2 E / 2 = 3.4e10 checks of what is taken (seconds a
 * token, minutes a sequence); ptdp_moe_top_k's comparisons are counted
 * and bounded by 3 E log2 k.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ptdp/moe_route.h"

static const harness_tcase route_tests = { .name = "route", .timeout_s = 60 };

/* The simple selection, as the router chose before (the reference). */
static void simple_top_k(const ptdp_real *z, int E, int k, int *choice)
{
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            bool taken = false;
            for (int q = 0; q < j; q++)
                taken = taken || choice[q] == e;
            if (!taken && (best < 0 || z[e] > z[best]))
                best = e;
        }
        choice[j] = best;
    }
}

static uint64_t next_random(uint64_t *s)   /* splitmix64 */
{
    uint64_t x = (*s += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A logit of kind 0 (random), 1 (a few values, both zeros, infinities) or
 * 2 (as 1, with NaNs). */
static ptdp_real logit(uint64_t *s, int kind)
{
    const uint64_t r = next_random(s);
    if (kind == 0)
        return (ptdp_real)((double)(r >> 11) / 9007199254740992.0 * 8.0 - 4.0);
    static const double few[] = { 1.0, 0.0, -0.0, -1.0, 1.0, 2.0, INFINITY, -INFINITY, 0.5 };
    const int n = kind == 2 ? 10 : 9, i = (int)(r % (uint64_t)n);
    return i == 9 ? (ptdp_real)NAN : (ptdp_real)few[i];
}

TEST(route_tests, test_top_k_chooses_as_the_simple_selection)
{
    enum { EMAX = 40 };
    uint64_t seed = 12345;
    ptdp_real z[EMAX];
    int mine[EMAX], want[EMAX];
    for (int trial = 0; trial < 6000; trial++) {
        const int kind = trial % 3, E = 1 + (int)(next_random(&seed) % EMAX), k = 1 + (int)(next_random(&seed) % E);
        for (int e = 0; e < E; e++)
            z[e] = logit(&seed, kind);
        simple_top_k(z, E, k, want);
        ptdp_moe_top_k(z, E, k, mine);
        for (int j = 0; j < k; j++)
            ck_assert_msg(mine[j] == want[j], "trial %d (kind %d, E %d, k %d): choice %d is expert %d, the simple "
                          "selection's %d", trial, kind, E, k, j, mine[j], want[j]);
    }
}
END_TEST

TEST(route_tests, test_every_tie_and_every_nan_place)
{
    /* every row of E = 4 over {NaN, 0, 1} (81 rows), for every k */
    ptdp_real z[4];
    int mine[4], want[4];
    const ptdp_real v[3] = { (ptdp_real)NAN, 0, 1 };
    for (int code = 0; code < 81; code++) {
        for (int e = 0, c = code; e < 4; e++, c /= 3)
            z[e] = v[c % 3];
        for (int k = 1; k <= 4; k++) {
            simple_top_k(z, 4, k, want);
            ptdp_moe_top_k(z, 4, k, mine);
            for (int j = 0; j < k; j++)
                ck_assert_msg(mine[j] == want[j], "row %d, k %d: choice %d is %d, the simple selection's %d", code, k,
                              j, mine[j], want[j]);
        }
    }
}
END_TEST

/* Ascending "before" order for qsort: larger z first, ties to the lower
 * index (no NaN here) — an independent reference at a size where the
 * simple selection would take minutes. */
static const ptdp_real *sort_z;

static int by_rank(const void *a, const void *b)
{
    const int x = *(const int *)a, y = *(const int *)b;
    if (sort_z[x] != sort_z[y])
        return sort_z[x] > sort_z[y] ? -1 : 1;
    return x < y ? -1 : 1;
}

enum { BIG = 4096 };

TEST(route_tests, test_a_large_k_is_cheap)
{
    static ptdp_real z[BIG];
    static int mine[BIG], want[BIG];
    uint64_t seed = 7;
    for (int kind = 0; kind < 2; kind++) {
        for (int e = 0; e < BIG; e++)   /* kind 1: 64 values, each 64 times */
            z[e] = kind == 0 ? logit(&seed, 0) : (ptdp_real)((e * 37) % 64);
        for (int e = 0; e < BIG; e++)
            want[e] = e;
        sort_z = z;
        qsort(want, BIG, sizeof *want, by_rank);
        const long long count = ptdp_moe_top_k(z, BIG, BIG, mine);
        for (int j = 0; j < BIG; j++)
            ck_assert_msg(mine[j] == want[j], "kind %d: choice %d is %d, the sorted order's %d", kind, j, mine[j],
                          want[j]);
        /* 3 E log2 k = 147,456 at E = k = 4096; the simple selection: 16.8M and 3.4e10 */
        ck_assert_msg(count <= 3LL * BIG * 12, "kind %d: %lld comparisons for E = k = %d", kind, count, BIG);
        const long long few = ptdp_moe_top_k(z, BIG, 2, mine);   /* k = 2: about E */
        ck_assert_msg(few <= 3LL * BIG, "k = 2: %lld comparisons for E = %d", few, BIG);
    }
}
END_TEST

/* The router whole at E = k = 4096 (--moe-experts 4096 --moe-top-k 4096):
 * a sequence of 16 tokens routes with every expert chosen once a token,
 * the balance loss and its backward counted in passes over the choices
 * (not a pass an expert: T k E), so this runs in milliseconds where the
 * simple selection took minutes. */
TEST(route_tests, test_the_router_at_e_equals_k_4096)
{
    enum { T = 16 };
    const ptdp_moe_route_shape s = { .T = T, .E = BIG, .k = BIG, .capacity = 0, .alpha = 0.01 };
    ptdp_real *z = malloc(sizeof(ptdp_real) * T * BIG), *gate = malloc(sizeof(ptdp_real) * T * BIG),
              *probs = malloc(sizeof(ptdp_real) * T * BIG), *dgate = calloc((size_t)T * BIG, sizeof(ptdp_real)),
              *dz = malloc(sizeof(ptdp_real) * T * BIG);
    int *choice = malloc(sizeof(int) * T * BIG), *slot = malloc(sizeof(int) * T * BIG),
        *load = malloc(sizeof(int) * BIG), dropped;
    ck_assert(z && gate && probs && dgate && dz && choice && slot && load);
    uint64_t seed = 99;
    for (int i = 0; i < T * BIG; i++)
        z[i] = i < BIG ? logit(&seed, 0) : (ptdp_real)((i * 37) % 64);   /* random, then many ties */
    const double aux = ptdp_moe_route(&s, T, z, choice, gate, slot, probs, load, &dropped);
    ck_assert_int_eq(dropped, 0);
    for (int e = 0; e < BIG; e++)
        ck_assert_int_eq(load[e], T);   /* every token chose every expert */
    /* f_i = E/(k T) T = 1 for all i, so aux = alpha sum_i P_i = alpha */
    ck_assert_double_eq_tol(aux, 0.01, 1e-5);
    ptdp_moe_route_backward(&s, T, choice, gate, probs, dgate, 1.0, dz);
    for (int i = 0; i < T * BIG; i++)   /* with dgate 0, P's gradient: p (u - p.u), u the same for all: 0 */
        ck_assert_msg(fabs((double)dz[i]) < 1e-9, "dz[%d] = %g", i, (double)dz[i]);
    free(z), free(gate), free(probs), free(dgate), free(dz), free(choice), free(slot), free(load);
}
END_TEST

int main(void)
{
    return harness_main("moe-route");
}
