/*
 * cp_price.c — what context parallelism's ring attention costs a block:
 * the passes of K and V round the ring (cp.c) and the buffers they use,
 * as the planner prices them (price_impl.h).
 *
 * Each of the N = cp devices holds T / N positions (two zigzag chunks of
 * c = Tq / 2) and kv = 2 R Cl reals of keys and values.  Every pass each
 * device sends its block to the right and receives the next from the
 * left; sends rendezvous, so even ranks send first and odd ranks receive
 * first — two messages' time a pass, on the slowest hop of the ring:
 *
 *   forward    N - 1 passes of K, V              (N-1) 2 hop(kv)
 *   backward   N - 1 passes of K, V and dK, dV   (N-1) 2 hop(2 kv)
 *              and dK, dV home                   + 2 hop(kv)
 *
 *        r0 ──► r1 ──► r2 ──► r3
 *         ▲                    │        (a hop crosses nodes when the
 *         └────────────────────┘         ranks' nodes differ)
 *
 * (The ring's elements a block, ptdp_ring_elements_per_block in cp.h, are
 * the same passes counted in reals.)
 */
#include "parallel/price_impl.h"

/* The slowest hop of a ring of n devices `stride` world ranks apart. */
static double ring_hop(const ptdp_profile *p, double bytes, int n, int stride)
{
    double worst = 0;
    for (int k = 0; k < n; k++) {
        double t = ptdp_cost_message_between(p, (uint64_t)bytes, k * stride, ((k + 1) % n) * stride);
        worst = t > worst ? t : worst;
    }
    return worst;
}

ptdp_price_fb ptdp_cp_price_ring(const ptdp_profile *p, int cp, int stride, double kv)
{
    ptdp_price_fb t = { 0, 0 };
    if (cp <= 1)
        return t;
    t.f = (cp - 1) * 2 * ring_hop(p, kv, cp, stride);
    t.b = (cp - 1) * 2 * ring_hop(p, 2 * kv, cp, stride) + 2 * ring_hop(p, kv, cp, stride);
    return t;
}

/* cp.c's allocations, elements:
 *
 *   forward    ring.kv, ring.kv_in          2 x 2 R Cl   the block, the next
 *              ring.scores                  c^2          one chunk pair's
 *              ring.max                     b hl Tq      a row's running max
 *   backward   ring.kv_dkv, ring.kv_dkv_in  2 x 4 R Cl   K, V with dK, dV
 *              ring.probs                   2 c^2
 *              ring.delta                   b hl Tq
 */
double ptdp_cp_price_buffers(double R, double Cl, double b, double hl, double Tq, bool backward)
{
    const double c = Tq / 2;   /* a zigzag chunk */
    return backward ? 8 * R * Cl + 2 * c * c + b * hl * Tq : 4 * R * Cl + c * c + b * hl * Tq;
}
