/*
 * top_k.c — the k largest of E numbers, best first: every router's choice
 * of experts (moe_route.c) and group-limited routing's choice of groups and
 * a group's score (moe_groups.c) — one selection, so they all order and
 * break ties alike.
 *
 *   z = [ 2.1  0.3  1.7  1.7 ],  k = 3   ->   choice = [ 0  2  3 ]
 *                                             (1.7 = 1.7: the lower index first)
 *
 * A heap of the k best so far keeps the cost near one pass over E:
 *
 *        worst of the k on top          a new z_e better than the top
 *              [1.7]                    replaces it and sinks: log k
 *             /     \
 *          [2.1]   [1.7]                then the k are sorted: k log k
 */
#include "ptdp/moe_route.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

/* Top-k as a selection over one pass (a heap of the k best so far, the
 * worst on top) and a sort of those k: O(E log k + k log k) comparisons a
 * token, where choosing one at a time scans E for each of the k (k E, and
 * k^2 E checking what is taken).  The order is the simple selection's:
 *
 *   a before b  <=>  z_a > z_b, or z_a = z_b and a < b   (ties: lower index)
 *
 * A NaN logit compares false both ways, so it has no place in that order;
 * the simple selection ("the first untaken index, replaced by any larger
 * z") takes a NaN exactly when it is the lowest untaken index, and the
 * largest remaining number otherwise.  A row with a NaN merges the two by
 * that rule (nan_order), so every row chooses what it always chose. */

/* One comparison of the order above, counted. */
static bool before(const ptdp_real *z, int a, int b, long long *count)
{
    ++*count;
    return z[a] > z[b] || (z[a] == z[b] && a < b);
}

/* Restore the heap h[0..n) (parent after both children: the worst on top)
 * below position i. */
static void sift_down(const ptdp_real *z, int *h, int n, int i, long long *count)
{
    for (;;) {
        int worst = i;
        const int l = 2 * i + 1, r = l + 1;
        if (l < n && before(z, h[worst], h[l], count))
            worst = l;
        if (r < n && before(z, h[worst], h[r], count))
            worst = r;
        if (worst == i)
            return;
        const int t = h[i];
        h[i] = h[worst];
        h[worst] = t;
        i = worst;
    }
}

static void sift_up(const ptdp_real *z, int *h, int i, long long *count)
{
    while (i > 0 && before(z, h[(i - 1) / 2], h[i], count)) {
        const int t = h[i];
        h[i] = h[(i - 1) / 2];
        h[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

/* The k best numbers of z (NaNs skipped) into h, best first; how many
 * (fewer than k when there are NaNs), and the NaNs in *nans. */
static int best_numbers(const ptdp_real *z, int E, int k, int *h, int *nans, long long *count)
{
    int n = 0;
    *nans = 0;
    for (int e = 0; e < E; e++) {
        if (isnan(z[e]))
            ++*nans;
        else if (n < k) {
            h[n] = e;
            sift_up(z, h, n++, count);
        } else if (before(z, e, h[0], count)) {
            h[0] = e;
            sift_down(z, h, n, 0, count);
        }
    }
    for (int m = n - 1; m > 0; m--) {   /* heapsort: the worst to the back */
        const int t = h[0];
        h[0] = h[m];
        h[m] = t;
        sift_down(z, h, m, 0, count);
    }
    return n;
}

/* A row with NaNs, as the simple selection chooses: step by step the
 * lowest untaken index if it is a NaN, else the next of the numbers in
 * order (best, n of them). */
static void nan_order(const ptdp_real *z, int E, int k, const int *best, int n, int *choice)
{
    bool taken[E];
    memset(taken, 0, sizeof taken);
    for (int j = 0, next = 0, low = 0; j < k; j++) {
        while (taken[low])
            low++;
        const int e = isnan(z[low]) || next == n ? low : best[next++];
        taken[e] = true;
        choice[j] = e;
    }
}

long long ptdp_moe_top_k(const ptdp_real *z, int E, int k, int *choice)
{
    long long count = 0;
    int nans;
    const int n = best_numbers(z, E, k, choice, &nans, &count);
    if (nans > 0) {
        int best[n > 0 ? n : 1];
        memcpy(best, choice, (size_t)n * sizeof *best);
        nan_order(z, E, k, best, n, choice);
    }
    return count;
}
