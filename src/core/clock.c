/*
 * clock.c — device profiles, wall time and the cost model of the virtual clock.
 *
 * The virtual clock prices work as the hardware named by a profile would:
 *
 *   compute      flops / peak_flops
 *   a message    alpha + bytes / beta                 (the "alpha-beta" model)
 *   a collective its algorithm's steps, each a message, e.g. a ring all-reduce
 *                of S bytes on n devices: 2(n-1) steps of S/n bytes each,
 *
 *       all_reduce = 2(n-1) · (alpha + S/(n·beta))
 *
 *                    ──► reduce-scatter (n-1 steps) ──► all-gather (n-1 steps)
 *       dev 0  ┌──┐ ┌──┐ ┌──┐                        every step every device
 *       dev 1  │  │ │  │ │  │ ...                    sends S/n bytes to its
 *       dev 2  └──┘ └──┘ └──┘                        right neighbour at once
 *
 * Where the profile numbers come from (public datasheets, rounded):
 *   - dgx-a100: NVIDIA A100 SXM datasheet, TF32 tensor-core peak 156 TFLOP/s
 *     (dense; ptdp computes in fp32, whose tensor-core path is TF32); third-
 *     generation NVLink 600 GB/s per GPU counting both directions, so 300e9 B/s
 *     each way.  alpha = 3 µs: NCCL's own tuning model (src/graph/tuning.cc)
 *     charges about 3.4 µs per ring hop over NVLink with its Simple protocol.
 *   - h100-nvlink: NVIDIA H100 SXM datasheet, TF32 494 TFLOP/s dense (989
 *     "with sparsity"); fourth-generation NVLink 900 GB/s, 450e9 B/s each
 *     way; the same per-hop latency.
 *   - laptop-cpu: one core of a current laptop, since ptdp runs one device per
 *     core: 2 FMA units x 8 fp32 lanes x 2 flops x ~3 GHz ≈ 100 GFLOP/s
 *     (AVX2; an Apple M1 core's 4 x 4-lane FMA units give the same); "links"
 *     are copies through shared memory at ~20 GB/s for one core, and handing
 *     a message to another core costs ~1 µs (a condition-variable wake-up).
 *   - ideal: the textbook picture — free links, only compute costs time, and
 *     (ideal = 1) embedding and loss layers cost nothing, so pipeline figures
 *     show the bubble (p-1)/(m+p-1) exactly; the MLP's blocks charge only
 *     their matrix products, so a backward is exactly two forwards and a
 *     split one's B and W one forward each (the interleaved and ZB-H1
 *     formulas hold to the last digit too).
 * Real collectives reach ~70–85% of the link bandwidth (nccl-tests busbw);
 * the model uses nominal figures, so its times are lower bounds.
 */
#include "ptdp/clock.h"

#include <string.h>
#include <time.h>

static const ptdp_profile profiles[] = {
    { "dgx-a100",    "NVIDIA A100 SXM (TF32 156 TFLOP/s), NVLink 3 (300 GB/s each way)",
      156e12, 3e-6, 300e9, 0 },
    { "h100-nvlink", "NVIDIA H100 SXM (TF32 494 TFLOP/s), NVLink 4 (450 GB/s each way)",
      494e12, 3e-6, 450e9, 0 },
    { "laptop-cpu",  "one laptop CPU core (~100 GFLOP/s fp32), shared memory (20 GB/s)",
      100e9, 1e-6, 20e9, 0 },
    { "ideal",       "textbook: 1 TFLOP/s, free links, free embedding and loss",
      1e12, 0.0, 0.0, 1 },
};

#define NPROFILES ((int)(sizeof profiles / sizeof profiles[0]))

const ptdp_profile *ptdp_profiles(int *count)
{
    if (count != NULL)
        *count = NPROFILES;
    return profiles;
}

const ptdp_profile *ptdp_profile_find(const char *name)
{
    for (int i = 0; name != NULL && i < NPROFILES; i++)
        if (strcmp(profiles[i].name, name) == 0)
            return &profiles[i];
    return NULL;
}

const ptdp_profile *ptdp_profile_default(void)
{
    return &profiles[0];
}

double ptdp_wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- The alpha-beta model --------------------------------------------------- */

/* bytes / beta, with beta == 0 meaning an infinitely fast link. */
static double transfer(const ptdp_profile *p, double bytes)
{
    return p->beta_Bps > 0.0 ? bytes / p->beta_Bps : 0.0;
}

double ptdp_cost_message(const ptdp_profile *p, size_t bytes)
{
    return p->alpha_s + transfer(p, (double)bytes);
}

/* ceil(log2 n): the rounds of a binomial tree over n devices. */
static int tree_rounds(int n)
{
    int rounds = 0;
    for (int reach = 1; reach < n; reach *= 2)
        rounds++;
    return rounds;
}

double ptdp_cost_collective(const ptdp_profile *p, ptdp_coll op, size_t bytes, int n)
{
    if (n <= 1)
        return 0.0;
    double S = (double)bytes;
    double ring_step = p->alpha_s + transfer(p, S / n);   /* alpha + S/(n beta) */
    switch (op) {
    case PTDP_COLL_BARRIER:
    case PTDP_COLL_SPLIT:           /* an exchange of (color, key): latency only */
        return tree_rounds(n) * p->alpha_s;
    case PTDP_COLL_BROADCAST:
    case PTDP_COLL_REDUCE:
        return tree_rounds(n) * (p->alpha_s + transfer(p, S));
    case PTDP_COLL_ALL_REDUCE:
        return 2.0 * (n - 1) * ring_step;
    case PTDP_COLL_REDUCE_SCATTER:
    case PTDP_COLL_ALL_GATHER:
    case PTDP_COLL_GATHER:
    case PTDP_COLL_SCATTER:
    case PTDP_COLL_ALL_TO_ALL:
        return (n - 1) * ring_step;
    case PTDP_COLL_SEND:
    case PTDP_COLL_RECV:
        return ptdp_cost_message(p, bytes);
    default:
        return 0.0;
    }
}

/* ---- Two link levels and GEMM efficiency --------------------------------- */
/* (provisional: one node and every product at the peak, until the cluster
 * profiles land) */

int ptdp_profile_node(const ptdp_profile *p, int r)
{
    return p->gpus_per_node > 0 ? r / p->gpus_per_node : 0;
}

int ptdp_profile_nodes_spanned(const ptdp_profile *p, const int *ranks, int n)
{
    int nodes = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0, node = ptdp_profile_node(p, ranks[i]);
        for (int j = 0; j < i && !seen; j++)
            seen = ptdp_profile_node(p, ranks[j]) == node;
        nodes += !seen;
    }
    return nodes > 0 ? nodes : 1;
}

double ptdp_cost_collective_nodes(const ptdp_profile *p, ptdp_coll op, size_t bytes, int n, int nodes)
{
    (void)nodes;
    return ptdp_cost_collective(p, op, bytes, n);
}

double ptdp_cost_message_between(const ptdp_profile *p, size_t bytes, int a, int b)
{
    (void)a;
    (void)b;
    return ptdp_cost_message(p, bytes);
}

double ptdp_profile_peak(const ptdp_profile *p, int bf16)
{
    return bf16 && p->peak_flops_bf16 > 0 ? p->peak_flops_bf16 : p->peak_flops;
}

double ptdp_gemm_efficiency(const ptdp_profile *p, double m, double n, double k)
{
    (void)p;
    (void)m;
    (void)n;
    (void)k;
    return 1.0;
}

double ptdp_gemm_cost_flops(const ptdp_profile *p, double m, double n, double k)
{
    return 2.0 * m * n * k / ptdp_gemm_efficiency(p, m, n, k);
}
