/*
 * sp.c — the two joins of sequence parallelism (sp.h): all-gather and
 * reduce-scatter along the sequence.
 *
 * The collectives of comm.h move one contiguous chunk per rank; a rank's
 * SP shard is not contiguous in the full tensor (T/tp rows of every
 * sample).  So each join permutes between the sample-major full tensor and
 * a rank-major buffer:
 *
 *   full [b][t]:   b0: t0 t1 | t2 t3      rank-major [r][b][t_local]:
 *                  b1: t0 t1 | t2 t3        r0: b0t0 b0t1 b1t0 b1t1
 *                      rank 0  rank 1       r1: b0t2 b0t3 b1t2 b1t3
 *
 * (Megatron keeps its activations sequence-first, [t][b], where the shard
 * is contiguous; ptdp's rows are sample-major everywhere else, and one copy
 * costs far less than the collective beside it.)
 */
#include "ptdp/sp.h"

#include <string.h>

#include "ptdp/device.h"
#include "ptdp/error.h"

/* Copy between full ([b][t], T rows per sample) and the rank-major buffer;
 * to_full chooses the direction.  Rows are C contiguous reals. */
static void permute(ptdp_real *full, ptdp_real *ranked, int samples, int T, int tp, int C, bool to_full)
{
    const int Tl = T / tp;
    const size_t row = (size_t)C * sizeof(ptdp_real), block = (size_t)Tl * row;
    for (int r = 0; r < tp; r++)
        for (int b = 0; b < samples; b++) {
            ptdp_real *f = full + ((size_t)b * T + (size_t)r * Tl) * C;
            ptdp_real *k = ranked + (((size_t)r * samples + b) * Tl) * C;
            if (to_full)
                memcpy(f, k, block);
            else
                memcpy(k, f, block);
        }
}

static bool shapes_ok(ptdp_tensor full, ptdp_tensor local, int samples, int tp)
{
    return PTDP_REQUIRE(tp > 0 && samples > 0 && full.rows % samples == 0 &&
                            (full.rows / samples) % tp == 0 && local.rows * tp == full.rows &&
                            full.cols == local.cols && full.stride == full.cols && local.stride == local.cols,
                        "full %d x %d (stride %d), local %d x %d (stride %d), %d samples, tp %d", full.rows,
                        full.cols, full.stride, local.rows, local.cols, local.stride, samples, tp);
}

int ptdp_sp_all_gather(ptdp_device *dev, ptdp_comm *tp, ptdp_tensor full, ptdp_tensor local, int samples)
{
    const int n = ptdp_comm_size(tp);
    if (!shapes_ok(full, local, samples, n))
        return PTDP_EINVAL;
    const size_t total = ptdp_tensor_numel(full);   /* the collectives take the total (comm.h) */
    ptdp_real *ranked = ptdp_alloc_uninit(dev, (total > 0 ? total : 1) * sizeof(ptdp_real), PTDP_MEM_COMM,
                                          "sp.gather");
    if (ranked == NULL)
        return PTDP_ENOMEM;
    int rc = ptdp_all_gather(tp, local.data, ranked, total, PTDP_REAL);
    if (rc == 0)
        permute(full.data, ranked, samples, full.rows / samples, n, full.cols, true);
    ptdp_free(dev, ranked);
    return rc;
}

/* The same on the communication stream: the data moves at the start
 * (stream.c), the permutation waits for the wait. */
int ptdp_sp_all_gather_start(ptdp_device *dev, ptdp_comm *tp, ptdp_tensor full, ptdp_tensor local, int samples,
                             ptdp_sp_gather *g)
{
    *g = (ptdp_sp_gather){ .dev = dev, .full = full, .samples = samples, .n = ptdp_comm_size(tp) };
    if (!shapes_ok(full, local, samples, g->n))
        return PTDP_EINVAL;
    const size_t total = ptdp_tensor_numel(full);
    g->ranked = ptdp_alloc_uninit(dev, (total > 0 ? total : 1) * sizeof(ptdp_real), PTDP_MEM_COMM, "sp.gather");
    if (g->ranked == NULL)
        return PTDP_ENOMEM;
    return ptdp_all_gather_start(tp, local.data, g->ranked, total, PTDP_REAL, &g->req);
}

int ptdp_sp_all_gather_wait(ptdp_sp_gather *g)
{
    if (g->ranked == NULL)
        return PTDP_OK;
    int rc = ptdp_wait(&g->req);
    if (rc == 0)
        permute(g->full.data, g->ranked, g->samples, g->full.rows / g->samples, g->n, g->full.cols, true);
    ptdp_free(g->dev, g->ranked);
    g->ranked = NULL;
    return rc;
}

int ptdp_sp_reduce_scatter(ptdp_device *dev, ptdp_comm *tp, ptdp_tensor local, ptdp_tensor full, int samples)
{
    const int n = ptdp_comm_size(tp);
    if (!shapes_ok(full, local, samples, n))
        return PTDP_EINVAL;
    const size_t total = ptdp_tensor_numel(full);
    ptdp_real *ranked = ptdp_alloc_uninit(dev, (total > 0 ? total : 1) * sizeof(ptdp_real), PTDP_MEM_COMM,
                                          "sp.scatter");
    if (ranked == NULL)
        return PTDP_ENOMEM;
    permute(full.data, ranked, samples, full.rows / samples, n, full.cols, false);
    int rc = ptdp_reduce_scatter(tp, ranked, local.data, total, PTDP_REAL, PTDP_SUM);
    ptdp_free(dev, ranked);
    return rc;
}
