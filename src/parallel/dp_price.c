/*
 * dp_price.c — what summing the gradient over replicas costs a step: DP's
 * buckets (dp.c) and DualPipe's mirror (model.c), as the planner prices
 * them (price_impl.h).
 *
 * A ring all-reduce over N devices moves each 2(N-1)/N S bytes, a
 * reduce-scatter (ZeRO) half of it (N-1)/N S, and each costs alpha a step
 * (clock.h).  DDP cuts the flat gradient, in backward order, into buckets
 * of `cap` elements — one collective each, a new one where the gradient's
 * group changes (an expert's is summed over the expert-DP group, the
 * others over dp cp):
 *
 *   flat:     | head | block L-1 | … | block 0 | embeddings |
 *   buckets:  |<-- b0 -->|<-- b1 -->|   …   |<-- last -->|
 *   blocking:                          end ▶ b0 b1 … last
 *   --overlap:  b0 starts once the backward has made it, on the
 *               communication stream; what runs past the end is exposed
 *
 * DualPipe holds two copies of the model; a device's two stages are the
 * mirror of another device's, and each tensor is all-reduced over that
 * pair after the step's sums (2 devices: 2 (1/2) S = S a device).
 */
#include "parallel/price_impl.h"

/* ------------------------------------------------------------ buckets */

double ptdp_dp_price_cap(double bucket_mb)
{
    return bucket_mb > 0 ? (double)(size_t)(bucket_mb * 1024 * 1024 / (double)sizeof(ptdp_real)) : 1;
}

void ptdp_dp_price_begin(ptdp_dp_buckets *w, const ptdp_price_group *dp, const ptdp_price_group *edp, ptdp_coll op,
                         double cap, double store, bool overlap, bool gather, double last_b)
{
    *w = (ptdp_dp_buckets){ .dp = dp, .edp = edp, .op = op, .cap = cap, .store = store, .overlap = overlap,
                            .gather = gather, .t_ready = last_b };
}

void ptdp_dp_price_unit(ptdp_dp_buckets *w, double bwd)
{
    w->t_before = w->t_ready;   /* the units before this one have made their gradients */
    w->t_ready += w->overlap ? bwd : 0;
}

/* The open bucket goes, once the gradients it holds are made: by `ready`. */
static void send_bucket(ptdp_dp_buckets *w, double ready)
{
    const ptdp_price_group *g = w->experts ? w->edp : w->dp;
    double c = ptdp_price_collective(g, w->op, w->fill * w->store);
    if (w->gather)
        w->gathered += ptdp_price_collective(g, PTDP_COLL_ALL_GATHER, w->fill * w->store);
    double start = ready > w->stream ? ready : w->stream;
    w->stream = start + c;
    w->sum += c;
}

void ptdp_dp_price_tensor(ptdp_dp_buckets *w, double size, bool experts, bool first)
{
    if (!w->open || w->fill + size > w->cap || experts != w->experts) {
        /* a group's run that ended with the unit before went then */
        if (w->open)
            send_bucket(w, experts != w->experts && first ? w->t_before : w->t_ready);
        w->fill = 0;
        w->open = true;
        w->experts = experts;
    }
    w->fill += size;
}

double ptdp_dp_price_end(ptdp_dp_buckets *w, double end, double *total, double *gather)
{
    if (w->open)
        send_bucket(w, w->overlap ? end : w->t_ready);
    *total = w->sum;
    if (gather != NULL)
        *gather = w->gathered;
    if (!w->overlap)
        return w->sum;
    return w->stream > end ? w->stream - end : 0;
}

/* ------------------------------------------------------------ mirror */

void ptdp_dp_price_mirror(double *t, const ptdp_price_group *pair, const ptdp_price_group *whole, double bytes)
{
    *t += ptdp_price_collective(pair, PTDP_COLL_ALL_REDUCE, bytes);
    if (whole != NULL)
        *t += ptdp_price_collective(whole, PTDP_COLL_ALL_REDUCE, bytes);
}
