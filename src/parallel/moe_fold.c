/*
 * moe_fold.c — MoE parallel folding (Megatron-Core, arXiv 2504.14960):
 * the experts get a layout of their own over the same ranks as attention.
 *
 * Attention cuts a stage's ranks tp x cp x dp; the experts, with
 * --etp e below tp, cut the same ranks etp x ep x edp.  Attention needs
 * TP for its heads; an expert is small, and splitting it over tp ranks
 * makes each GEMM thin and adds an all-reduce per expert layer, while EP
 * only moves the rows that are routed.  Folding lets the experts trade
 * attention's TP for EP: with --tp 2 --etp 1 no expert is split, and EP
 * may span the TP pair.
 *
 * The tokens.  A TP group holds one set of rows, the same R on each of its
 * tp ranks (no SP under a mixture).  The experts' TP group is e ranks of
 * it, so the TP group's rows are shared out over its S = tp / e slices,
 * and slice s = tp_rank / e routes rows [s R/S, (s+1) R/S) — whole
 * sequences (the batch's sequences must divide by S), so that a sequence's
 * capacity and its balance loss stay on one device, as they were.  Every
 * slice is a "token holder"; EP and EDP then cut the holders (mesh.h):
 *
 *   tp=2 dp=2, --ep 4 --etp 1     attention:  TP {0 1} {2 3}, DP {0 2} {1 3}
 *                                 experts:    ETP {0} {1} {2} {3},
 *   rank     0      1      2      3           EP {0 1 2 3}, EDP {0} ...
 *   rows   [a b]  [a b]  [c d]  [c d]        (a TP group's rows: 2 sequences)
 *   routes   a      b      c      d           one slice each
 *   experts  e0     e1     e2     e3          whole (etp 1), one a rank
 *
 * The re-layout, named as it runs:
 *
 *   forward   n (R rows) ── slice ──► route, dispatch, experts, combine on
 *             R/S rows, into out's slice ── all-gather over the fold group,
 *             in place ──► out (R rows)
 *   backward  d (R rows) ── slice ──► the mixture's backward on R/S rows,
 *             into dn's slice ── all-gather, in place ──► dn (R rows)
 *
 * The fold group is the S ranks of a TP group with the same tp_rank mod e:
 * one rank of each slice, so its all-gather rebuilds the TP group's R
 * rows.  Bytes a device, R x C elements of the block's width:
 *
 *   all-gather         (S - 1) / S x R C x element, a call
 *   router's gradient  2 (S - 1) / S x E C x element, a step (model.c)
 *   bias update        2 (S - 1) / S x 8 E, a step (moe_bias.c)
 *
 * all three counted in "moe_fold_bytes", the report's formula beside the
 * fold group's measured bytes.
 *
 * Gradients.  An expert shard is held by its expert-DP group (every token
 * holder with the same EP and experts' TP rank): its gradient is summed
 * there, as before.  The router is whole on every rank, but each slice
 * used it on other tokens: its gradient is summed over the fold group too
 * (model.h's `also`), and so are the expert bias's loads (moe_bias.c).
 * The shared experts run in attention's layout, on all R rows: unchanged.
 *
 * With e = tp there is one slice, no fold group, and nothing here runs:
 * the experts split as attention does, today's layout and bits.
 */
#include <string.h>

#include "parallel/moe_impl.h"
#include "ptdp/comm.h"
#include "ptdp/counters.h"
#include "ptdp/device.h"
#include "ptdp/error.h"

int ptdp_moe_fold_slices(const ptdp_mesh *m)
{
    return m->etp > 0 && m->etp < m->tp ? m->tp / m->etp : 1;
}

int ptdp_moe_expert_tp_size(const ptdp_mesh *m)
{
    return ptdp_moe_fold_slices(m) > 1 ? m->etp : m->tp;
}

int ptdp_moe_expert_tp_rank(const ptdp_mesh *m)
{
    return m->tp_rank % ptdp_moe_expert_tp_size(m);
}

ptdp_comm *ptdp_moe_expert_tp(const ptdp_mesh *m)
{
    return ptdp_moe_fold_slices(m) > 1 ? ptdp_mesh_group(m, PTDP_GROUP_ETP) : m->tp_comm;
}

ptdp_tensor ptdp_moe_fold_slice(const ptdp_mesh *m, ptdp_tensor x)
{
    const int S = ptdp_moe_fold_slices(m), rows = x.rows / S, s = m->tp_rank / ptdp_moe_expert_tp_size(m);
    return ptdp_tensor_wrap(ptdp_at(x, s * rows, 0), rows, x.cols);
}

int ptdp_moe_fold_gather(ptdp_device *dev, const ptdp_mesh *m, ptdp_tensor whole)
{
    ptdp_comm *fold = ptdp_mesh_group(m, PTDP_GROUP_FOLD);
    const int S = ptdp_moe_fold_slices(m);
    if (!PTDP_REQUIRE(fold != NULL && whole.rows % S == 0 && whole.stride == whole.cols,
                      "moe fold: %d rows gathered from %d slices", whole.rows, S))
        return PTDP_EINVAL;
    const size_t n = (size_t)whole.rows * whole.cols;   /* my slice in place, at its rows */
    ptdp_count(dev->counts, "moe_fold_bytes", 0, (double)(S - 1) / S * n * sizeof(ptdp_real));
    return ptdp_all_gather(fold, PTDP_IN_PLACE, whole.data, n, PTDP_REAL);
}

int ptdp_moe_fold_publish(ptdp_counters *reg)
{
    return ptdp_counters_publish(reg, "moe_fold_bytes", PTDP_COUNT_DEVICE, PTDP_COUNT_NUMBER, 0);
}

ptdp_group ptdp_moe_expert_replicas(const ptdp_mesh *m)
{
    return m->ep > 1 || ptdp_moe_fold_slices(m) > 1 ? PTDP_GROUP_EDP : PTDP_GROUP_DP;
}

void ptdp_moe_fold_router(const ptdp_mesh *m, ptdp_param *router)
{
    if (router != NULL && ptdp_moe_fold_slices(m) > 1)   /* each slice used it on its own rows */
        router->sum.also |= PTDP_GROUP_BIT(PTDP_GROUP_FOLD);
}
