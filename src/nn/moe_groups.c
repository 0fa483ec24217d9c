/*
 * moe_groups.c — DeepSeek-V3's group-limited routing: a token may choose
 * its k experts only among those of its M best groups (on a real machine
 * a group is a node, so a token's rows cross the network to at most M
 * nodes).  The E experts are G groups of E/G consecutive experts:
 *
 *   v        = s + b (sigmoid), or z (softmax)   the values top-k reads
 *   score_g  = the sum of the floor(k/M) largest v of group g
 *   keep     = the M largest score_g (ties: the lower group)
 *   v_e      = -infinity for e outside the kept groups; then the top k
 *
 *   E = 8, G = 4, k = 4, M = 2: floor(k/M) = 2 per group
 *   v       = [ .9 .1 | .5 .5 | .8 .7 | .2 .95 ]
 *   score_g = [  1.0  |  1.0  |  1.5  |  1.15  ]   groups 2 and 3 kept
 *   top 4   = experts 7, 4, 5, 6 (expert 0's .9 is in a group left out)
 *
 * The sum of the top floor(k/M), not the group's maximum, is the issue's
 * rule (DeepSeek-V3 sums its top 2 with k = 8, M = 4): a group with one
 * strong expert does not outrank a group with several good ones.  The
 * mask only selects: the gates and the gradients read the chosen experts'
 * s (or z) as without groups.
 */
#include "ptdp/moe_route.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

/* The sum of the n largest of v[0..m), largest first: the router's own
 * selection (top_k.c's ptdp_moe_top_k: O(m log n), ties to the lower index). */
static double top_sum(const ptdp_real *v, int m, int n)
{
    if (n > m)
        n = m;   /* the settings refuse it (moe_settings.c) */
    int idx[n > 0 ? n : 1];
    ptdp_moe_top_k(v, m, n, idx);
    double sum = 0.0;
    for (int j = 0; j < n; j++)
        sum += v[idx[j]];
    return sum;
}

void ptdp_moe_group_limit(const ptdp_moe_route_shape *s, ptdp_real *v)
{
    const int G = s->groups, M = s->group_top_k > 0 ? s->group_top_k : 1;
    if (G <= 1 || M >= G || s->E % G != 0)
        return;
    const int per = s->E / G, n = s->k / M;
    ptdp_real score[G];
    bool kept[G];
    int best[M];
    memset(kept, 0, sizeof kept);
    for (int g = 0; g < G; g++)
        score[g] = (ptdp_real)top_sum(v + (size_t)g * per, per, n);
    ptdp_moe_top_k(score, G, M, best);   /* the M best groups, ties to the lower */
    for (int j = 0; j < M; j++)
        kept[best[j]] = true;
    for (int g = 0; g < G; g++)
        for (int e = 0; !kept[g] && e < per; e++)
            v[(size_t)g * per + e] = -INFINITY;
}
