/*
 * tp_price.c — what tensor and sequence parallelism cost a micro-batch:
 * the collectives tp.c, sp.c and parallel_linear.c make, and the buffers
 * SP holds, as the planner prices them (price_impl.h).
 *
 * With S = R C reals (a block's activation on one device, in bytes) and
 * N = tp, a ring moves a device
 *
 *   all-reduce                      2(N-1)/N S
 *   all-gather, reduce-scatter      (N-1)/N S each: together an all-reduce
 *
 * and a block (Megatron's, tp.h) makes, forward and backward alike (a
 * GPT's; a model counts its own, ptdp_tp_block_colls):
 *
 *            attention            MLP
 *   TP   ──f── … ──g──        ──f── … ──g──     2 all-reduces of S each way
 *   SP   ──gather── … ──scatter──  (twice)      2 (all-gather + reduce-scatter)
 *        + backward: ln_1's and ln_2's shards gathered again for the
 *          column-parallel layers' dW (under --overlap beside dX = dY W)
 *
 * clock.h prices each collective step by step on the links the group
 * spans (ptdp_price_collective).
 */
#include "parallel/price_impl.h"

/* ------------------------------------------------------- collectives */

double ptdp_sp_price_regather(const ptdp_price_group *tp, double S, bool overlap, double dx_s)
{
    const double g = ptdp_price_collective(tp, PTDP_COLL_ALL_GATHER, S);
    if (!overlap)
        return g;
    return g > dx_s ? g - dx_s : 0;
}

/* A block's collectives, counted by its model (GPT: f = b = 2
 * all-reduces; under SP 2 all-gathers and 2 reduce-scatters each way, b
 * with the two regathers): each of S, the regathers under their dX. */
ptdp_price_fb ptdp_tp_price_block(const ptdp_price_group *tp, double S, bool sp, bool overlap,
                                  const ptdp_tp_block_colls *n, const double *dx_s)
{
    ptdp_price_fb t;
    if (sp) {
        const double g = ptdp_price_collective(tp, PTDP_COLL_ALL_GATHER, S);
        const double r = ptdp_price_collective(tp, PTDP_COLL_REDUCE_SCATTER, S);
        double again = 0;
        for (int i = 0; i < n->regathers; i++)
            again += ptdp_sp_price_regather(tp, S, overlap, dx_s[i]);
        t.f = n->gather_f * g + n->scatter_f * r;
        t.b = n->gather_b * g + n->scatter_b * r;
        t.b += again;
    } else {
        const double ar = ptdp_price_collective(tp, PTDP_COLL_ALL_REDUCE, S);
        t.f = n->all_reduce_f * ar;
        t.b = n->all_reduce_b * ar;
    }
    return t;
}

/* TP: f = an all-reduce of S (the rows this rank's vocabulary holds), b =
 * nothing (the gradient is replicated); SP: f = a reduce-scatter of S,
 * b = an all-gather of S. */
ptdp_price_fb ptdp_tp_price_embed(const ptdp_price_group *tp, double S, bool sp)
{
    return (ptdp_price_fb){
        .f = sp ? ptdp_price_collective(tp, PTDP_COLL_REDUCE_SCATTER, S)
                : ptdp_price_collective(tp, PTDP_COLL_ALL_REDUCE, S),
        .b = sp ? ptdp_price_collective(tp, PTDP_COLL_ALL_GATHER, S) : 0,
    };
}

/* f = (SP: an all-gather of S) + 3 all-reduces of R doubles (the
 * vocab-parallel loss: the rows' max, sum of exponentials, picked logit);
 * b = an all-reduce of S (the head's f), or under SP a reduce-scatter of
 * S and LN_f's shard gathered again. */
ptdp_price_fb ptdp_tp_price_head(const ptdp_price_group *tp, double S, double R, bool sp, bool overlap, double dx_s)
{
    return (ptdp_price_fb){
        .f = (sp ? ptdp_price_collective(tp, PTDP_COLL_ALL_GATHER, S) : 0) +
             3 * ptdp_price_collective(tp, PTDP_COLL_ALL_REDUCE, R * sizeof(double)),
        .b = sp ? ptdp_price_collective(tp, PTDP_COLL_REDUCE_SCATTER, S) + ptdp_sp_price_regather(tp, S, overlap, dx_s)
                : ptdp_price_collective(tp, PTDP_COLL_ALL_REDUCE, S),
    };
}

double ptdp_tp_price_moe_block(const ptdp_price_group *tp, const ptdp_price_group *etp, double S, double rows_bytes,
                               double shared_bytes)
{
    return ptdp_price_collective(tp, PTDP_COLL_ALL_REDUCE, S) +
           ptdp_price_collective(etp, PTDP_COLL_ALL_REDUCE, rows_bytes) +
           (shared_bytes > 0 ? ptdp_price_collective(tp, PTDP_COLL_ALL_REDUCE, shared_bytes) : 0);
}

/* ------------------------------------------------------- SP's buffers */

/* With Rl = R / tp the rows of a LayerNorm region:
 *
 *   block_fwd   R C + Rl C + R C   the row-parallel layer's partial sums
 *                                  (acts.partial, through the block), and
 *                                  at a LayerNorm its shard (ln_local) and
 *                                  the gathered rows (sp.gather)
 *   embed_fwd   2 R C              the embedding's partial rows and the
 *                                  scatter's buffer (sp.scatter)
 *   linear_fwd  2 R C              a linear layer's: the row-parallel one's
 *                                  partial sums, the column-parallel one's
 *                                  gathered input
 *   bwd         R C                a backward's gather or scatter buffer
 *   head        Rl C + R C         LN_f's output shard and its gather
 */
ptdp_sp_buffers ptdp_sp_price_buffers(bool sp, double R, double Rl, double C)
{
    if (!sp)
        return (ptdp_sp_buffers){ 0 };
    return (ptdp_sp_buffers){
        .block_fwd = R * C + Rl * C + R * C,
        .embed_fwd = 2 * R * C,
        .linear_fwd = 2 * R * C,
        .bwd = R * C,
        .head = Rl * C + R * C,
    };
}
