/*
 * moe_bias.c — DeepSeek-V3's auxiliary-loss-free balance: after each
 * optimizer step every MoE block's expert bias b (moe_route.h: it only
 * selects the top k of s + b) moves one step u toward an even load
 *
 *   b_e += u sign(mean L - L_e)      L_e = the choices of expert e (before
 *                                    any capacity) over the step's whole
 *                                    global batch;  sign(0) = 0
 *
 * An expert chosen more than the mean is pushed down, one chosen less is
 * pulled up; the bias has no gradient and no optimizer state.
 *
 * Why one collective: every replica of the block must apply the same
 * update, or the replicas' biases drift apart (and so their routing).  A
 * device counted only its own tokens, so the counts are summed first over
 * the devices that route different tokens of the same block — the
 * stage's DP group (mesh.h: dp x cp, which also holds the EP group) — by
 * one all-reduce of the stage's n MoE blocks' counts, n x E doubles.  TP
 * ranks route the same tokens: each TP rank's own DP group sums the same
 * counts, and every copy of b moves alike.  Under MoE parallel folding
 * (moe_fold.c) a TP group's slices route different rows, and a second
 * all-reduce over the fold group adds them (whole numbers: exact in any
 * order).
 *
 *   dp rank 0: L = [5 1 3 3]  ┐ all-reduce   L = [9 3 6 6]  mean 6
 *   dp rank 1: L = [4 2 3 3]  ┘ (sum)        b += u [-1 +1 0 0] on both
 *
 * A ring all-reduce over N devices sends 2 (N - 1) / N x 8 n E bytes a
 * device and step; the clock charges it, --report counts it in the "dp"
 * group's bytes, and the device's counter "moe_bias_bytes" (moe.h) adds
 * the formula's, which the DP line of the report adds to its own.  The comparison mean L - L_e is done exactly as
 * sum L - E L_e (whole numbers in doubles), so sign(0) is a true tie.
 */
#include <stdlib.h>
#include <string.h>

#include "parallel/moe_impl.h"
#include "ptdp/comm.h"
#include "ptdp/counters.h"
#include "ptdp/error.h"

/* b_e += u sign(mean L - L_e) for one block, from its summed counts. */
static void step_one(double u, int E, const double *L, ptdp_real *b)
{
    double total = 0.0;
    for (int e = 0; e < E; e++)
        total += L[e];
    for (int e = 0; e < E; e++) {
        const double d = total - (double)E * L[e];   /* E (mean L - L_e) */
        b[e] += (ptdp_real)(d > 0 ? u : d < 0 ? -u : 0.0);
    }
}

int ptdp_moe_bias_step(ptdp_device *dev, const ptdp_mesh *mesh, double u, int E, int n, ptdp_real *const *bias,
                       double *const *choices)
{
    if (n <= 0 || E <= 0)
        return PTDP_OK;
    double *L = malloc((size_t)n * E * sizeof *L);   /* the blocks' counts side by side: one all-reduce */
    if (L == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory summing the experts' loads", dev->rank);
    for (int j = 0; j < n; j++)
        memcpy(L + (size_t)j * E, choices[j], (size_t)E * sizeof *L);
    int rc = ptdp_all_reduce(mesh->dp_comm, L, L, (size_t)n * E, PTDP_F64, PTDP_SUM);
    ptdp_count(dev->counts, "moe_bias_bytes", 0, ptdp_moe_bias_bytes(E, n, ptdp_comm_size(mesh->dp_comm)));
    if (rc == 0 && ptdp_moe_fold_slices(mesh) > 1)   /* folding: the TP group's slices route other rows */
    {
        ptdp_comm *fold = ptdp_mesh_group(mesh, PTDP_GROUP_FOLD);
        rc = ptdp_all_reduce(fold, L, L, (size_t)n * E, PTDP_F64, PTDP_SUM);
        ptdp_count(dev->counts, "moe_fold_bytes", 0, ptdp_moe_bias_bytes(E, n, ptdp_comm_size(fold)));
    }
    for (int j = 0; rc == 0 && j < n; j++) {
        step_one(u, E, L + (size_t)j * E, bias[j]);
        memset(choices[j], 0, (size_t)E * sizeof *choices[j]);
    }
    free(L);
    return rc;
}

double ptdp_moe_bias_bytes(int E, int n, int N)
{
    return N > 1 ? 2.0 * (N - 1) / N * 8.0 * n * E : 0.0;
}
