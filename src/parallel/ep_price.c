/*
 * ep_price.c — what expert parallelism's exchanges cost a mixture of
 * experts' block, a micro-batch (ep.c), as the planner prices them
 * (price_impl.h), under uniform routing (model_plan.h: each of the E
 * experts gets k R / E of a device's R rows, `kept` of them in all).
 *
 * Over N = ep devices of `local` = E / N experts each:
 *
 *   counts    all-to-all of `local` ints to each rank:     S = 4 local N
 *   dispatch  all-to-allv of the rows for experts held     S = kept (N-1)/N C r
 *             elsewhere (each source sends kept / N to each)
 *   combine   the same rows back                           S = kept (N-1)/N C r
 *
 *   r the bytes of an element on the wire: the storage type's, or under
 *   --precision bf16 bf16's 2 (ep.h: the rows travel as bf16)
 *
 *   --fp8-comm the dispatch as codes, then scales (ep.h):
 *              S = kept (N-1)/N C,  then kept (N-1)/N ⌈C/c⌉ r
 *
 *   forward    counts, dispatch, combine
 *   backward   two all-to-allvs (the combine's backward is a dispatch,
 *              the dispatch's a combine)
 *
 * An all-to-all makes N-1 pairwise exchanges (clock.h); the EP group is
 * ep consecutive members of the DP group, so it spans the nodes those
 * span.  Under CP the router's counts are summed over the whole sequence
 * (the balance loss is a sequence's): an all-reduce of 2 b E doubles over
 * cp.
 */
#include "parallel/price_impl.h"

ptdp_ep_price ptdp_ep_price_block(const ptdp_price_group *ep, const ptdp_price_group *cp, double kept, double local,
                                  double E, double b, double C, double r)
{
    return (ptdp_ep_price){
        .a2a = ptdp_price_collective(ep, PTDP_COLL_ALL_TO_ALLV, kept * (ep->n - 1) / ep->n * C * r),
        .counts = ptdp_price_collective(ep, PTDP_COLL_ALL_TO_ALL, local * 4 * ep->n),
        .cp_counts = ptdp_price_collective(cp, PTDP_COLL_ALL_REDUCE, 16 * b * E),
    };
}

double ptdp_ep_price_dispatch_fp8(const ptdp_price_group *ep, double kept, double C, double tiles)
{
    const double rows = kept * (ep->n - 1) / ep->n;
    return ptdp_price_collective(ep, PTDP_COLL_ALL_TO_ALLV, rows * C) +
           ptdp_price_collective(ep, PTDP_COLL_ALL_TO_ALLV, rows * tiles * (double)sizeof(ptdp_real));
}
