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
 *   - dgx-a100-80g: the "NVIDIA DGX A100" datasheet (80GB system): 8 A100
 *     80GB SXM on six NVSwitches, NVLink 3 600 GB/s per GPU both ways
 *     (300e9 B/s each way, as dgx-a100); eight single-port ConnectX-6 200 Gb/s
 *     HDR InfiniBand adapters, one per GPU: 25e9 B/s each way.  The "NVIDIA
 *     A100 Tensor Core GPU" datasheet: TF32 156, BF16 312 TFLOP/s dense (312
 *     and 624 "with sparsity"); 2,039 GB/s HBM2e; 108 SMs.  Memory "80GB" is 80 GiB:
 *     five HBM2e stacks of 16 GiB (nvidia-smi reports 81920 MiB).
 *   - dgx-h100: the "NVIDIA DGX H100" datasheet: 8 H100 SXM5 80GB on four
 *     NVSwitches, NVLink 4 900 GB/s per GPU (450e9 B/s each way); eight
 *     single-port ConnectX-7 400 Gb/s NDR InfiniBand: 50e9 B/s per GPU each
 *     way.  The "NVIDIA H100 Tensor Core GPU" datasheet (SXM): TF32 494 (as
 *     h100-nvlink), BF16 989 TFLOP/s dense (989 and 1,979 "with sparsity");
 *     3.35 TB/s HBM3;
 *     80 GiB as above; 132 SMs.  FP8 1,979 TFLOP/s dense (3,958 "with
 *     sparsity"): twice the bf16 dense peak (989.5, rounded 989 above), so
 *     2 x 989 here.  The A100 has no FP8 tensor cores: its profiles give no
 *     FP8 peak, and --fp8 is priced at their bf16 peak.
 *   - h800: DeepSeek-V3's technical report (section 3.1, "Compute
 *     Clusters" and 3.2.2): 2048 H800 GPUs, 8 a node on NVLink and
 *     NVSwitch, InfiniBand between; "NVLink offers a bandwidth of 160 GB/s,
 *     roughly 3.2 times that of IB (50 GB/s)".  The H800 is the H100 SXM
 *     with its NVLink cut (400 GB/s against 900, both ways): the H100's
 *     peaks (BF16 989, FP8 2 x 989 dense), GEMM curve, HBM3 and 80 GiB;
 *     its links at the report's 160e9 and 50e9 B/s a GPU each way.
 *   - hgx-a100-4: A100 SXM 40GB, 1,555 GB/s HBM2 (the same datasheet).
 *   - net_alpha = 10 µs for both: NCCL's tuning model (src/graph/tuning.cc,
 *     hwLat[NET][Ring][Simple]) charges 9.6 µs per ring hop over the
 *     network with its Simple protocol, against 3.4 over NVLink — which the
 *     3 µs inside a node rounds the same way.
 *
 * Clusters: two link levels.  The cluster profiles (dgx-a100-80g, dgx-h100,
 * h800, hgx-a100-4)
 * put gpus_per_node devices in a node (world rank r in node r / gpus_per_node):
 * NVLink/NVSwitch inside, InfiniBand between nodes, one NIC per GPU.
 *
 *        node 0                          node 1
 *   ┌──────────────────────┐        ┌──────────────────────┐
 *   │ g0  g1  …  g7        │  IB    │ g8  g9  …  g15       │
 *   │  └──NVSwitch──┘      │◄──────►│  └──NVSwitch──┘      │
 *   │ nic0 nic1 … nic7     │ 8 NICs │ nic8 nic9 … nic15    │
 *   └──────────────────────┘ a side └──────────────────────┘
 *
 * A collective over n devices that span `nodes` nodes runs its ring (or tree)
 * steps all at once on every link, so each step lasts as long as its slowest
 * hop, the one that leaves a node.  NCCL builds one ring channel per NIC, so
 * the n/nodes members of the group inside one node bring their NICs together:
 *
 *     every step:   alpha = net_alpha_s
 *                   beta  = min(beta_Bps, (n / nodes) · net_beta_Bps)
 *     e.g. all_reduce = 2(n-1) · (net_alpha + S/(n·beta))
 *
 *   16 GPUs on 2 nodes (8 a node): beta = min(300, 8 · 25) = 200 GB/s (A100)
 *    2 GPUs on 2 nodes (1 a node): beta = min(300, 1 · 25) =  25 GB/s — a DP
 *      group of one GPU per node (TP inside the node) has one NIC per node.
 * nodes == 1 is exactly the one-level model above.  A message between world
 * ranks in different nodes costs net_alpha + bytes / net_beta (one NIC).
 * Limits: a group spread unevenly over its nodes is charged for the average
 * n/nodes NICs; NCCL's tree for large node counts, PXN (sending through a
 * neighbour's NIC), SHARP in-network reductions and congestion on the
 * network's spine are not modelled; broadcast and reduce trees get the same
 * bandwidth as a ring although one sender feeds them.  NCCL's own model
 * (src/graph/tuning.cc) charges the network latency only on the steps that
 * cross nodes, pipelining the rest; the model here charges every step, so a
 * small multi-node collective is priced a little high.
 *
 * GEMM efficiency (cluster profiles only; textbook profiles run every matrix
 * product at the peak).  A product of an m x k by a k x n matrix does 2mnk
 * flops but reaches only a fraction of the peak.  NVIDIA's "Matrix
 * Multiplication Background User's Guide" (Deep Learning Performance docs,
 * DU-09799-001) explains what the fraction depends on, and the model takes
 * its three terms:
 *
 *   eff(m, n, k) = min( e_max · fill(m, n),  AI(m, n, k) / ridge )
 *
 *   e_max    the best any shape reaches: the measured "Maximum Achievable
 *            Matmul FLOPS" over the datasheet peak, from the MAMF table of
 *            Stas Bekman's ml-engineering book (compute/accelerator, bf16,
 *            found by brute-force search over shapes with mamf-finder.py):
 *              A100 SXM 271.2 of 312 TFLOP/s = 0.869  (best 1024x10240x5120)
 *              H100 SXM 794.5 of 989 TFLOP/s = 0.803  (best 2048x2048x13312)
 *   fill     tile and wave quantisation (the guide's chapter 3): the output
 *            is cut into tiles of tile_m x tile_n (256 x 128, the guide's
 *            largest cuBLAS tile), one thread block per SM at a time, so the
 *            GPU runs waves of SMs tiles and only m·n of the outputs it pays
 *            for are wanted:
 *              tiles = ceil(m/tile_m) · ceil(n/tile_n)
 *              waves = ceil(tiles / SMs)
 *              fill  = m·n / (waves · SMs · tile_m · tile_n)
 *   AI/ridge the memory roofline (the guide's chapter 2): a product reads
 *            and writes at least mk + kn + mn elements, so its arithmetic
 *            intensity is AI = 2mnk / (2(mk + kn + mn)) flops per byte in
 *            bf16; below the GPU's ridge = peak / HBM bandwidth it waits for
 *            memory.  (TF32 moves 4-byte elements at half the flops: the same
 *            ratio, so one curve serves both precisions.)
 *
 *   eff(8192³) on A100: fill 0.998, AI 2731 ≫ ridge 153  → 0.867
 *   eff(1024x10240x5120): fill 0.988  → 0.858 (measured 0.869)
 *   eff(512³): one wave of 8 tiles on 108 SMs → 0.064 (a small product
 *            leaves most SMs idle)
 * Limits: cuBLAS picks smaller tiles for products smaller than a wave, so the
 * curve is pessimistic there; k is not quantised; the e_max of bf16 is used
 * for TF32 too (the MAMF table measures bf16); kernel launch overhead (a few
 * µs) is not charged.  The numbers come only from the GEMM benchmarks and
 * datasheets named here, never from end-to-end training throughput.
 *
 * Real collectives reach ~70–85% of the link bandwidth (nccl-tests busbw);
 * the model uses nominal figures, so its times are lower bounds.
 */
#include "ptdp/clock.h"

#include <math.h>
#include <string.h>
#include <time.h>

/* ---- GEMM curves (the terms are explained at the top) ---------------------- */

struct ptdp_gemm_curve {
    double e_max;          /* MAMF / datasheet peak (bf16)                  */
    int    sms;            /* streaming multiprocessors: one tile each      */
    int    tile_m, tile_n; /* the output tile of one thread block           */
    double ridge;          /* peak / HBM bandwidth, flops per byte (bf16)   */
};

/* A100 SXM: MAMF 271.2 / 312 TFLOP/s; 108 SMs; 312e12 / 2.039e12 B/s. */
static const ptdp_gemm_curve a100_sxm = { 271.2 / 312.0, 108, 256, 128, 312e12 / 2.039e12 };
/* H100 SXM: MAMF 794.5 / 989 TFLOP/s; 132 SMs; 989e12 / 3.35e12 B/s. */
static const ptdp_gemm_curve h100_sxm = { 794.5 / 989.0, 132, 256, 128, 989e12 / 3.35e12 };

#define GIB (1024.0 * 1024.0 * 1024.0)
/* The textbook profiles: one node, no bf16 or FP8 peak, products at the
 * peak, no memory or memory bandwidth given. */
#define ONE_NODE 0, 0.0, 0.0, 0.0, NULL, 0.0, 0.0, 0.0

static const ptdp_profile profiles[] = {
    { "dgx-a100",    "NVIDIA A100 SXM (TF32 156 TFLOP/s), NVLink 3 (300 GB/s each way)",
      156e12, 3e-6, 300e9, 0, ONE_NODE },
    { "h100-nvlink", "NVIDIA H100 SXM (TF32 494 TFLOP/s), NVLink 4 (450 GB/s each way)",
      494e12, 3e-6, 450e9, 0, ONE_NODE },
    { "laptop-cpu",  "one laptop CPU core (~100 GFLOP/s fp32), shared memory (20 GB/s)",
      100e9, 1e-6, 20e9, 0, ONE_NODE },
    { "ideal",       "textbook: 1 TFLOP/s, free links, free embedding and loss",
      1e12, 0.0, 0.0, 1, ONE_NODE },
    /* The clusters: name, description, TF32 peak, NVLink alpha and beta,
     * ideal, GPUs a node, network alpha and beta (one NIC), bf16 peak,
     * GEMM curve, memory, FP8 peak (A100: none), HBM bandwidth. */
    { "dgx-a100-80g", "DGX A100 80GB: 8 A100 SXM a node on NVLink 3, HDR InfiniBand (200 Gb/s a GPU) between",
      156e12, 3e-6, 300e9, 0, 8, 10e-6, 25e9, 312e12, &a100_sxm, 80.0 * GIB, 0.0, 2.039e12 },
    { "dgx-h100",     "DGX H100: 8 H100 SXM a node on NVLink 4, NDR InfiniBand (400 Gb/s a GPU) between",
      494e12, 3e-6, 450e9, 0, 8, 10e-6, 50e9, 989e12, &h100_sxm, 80.0 * GIB, 2.0 * 989e12, 3.35e12 },
    /* DeepSeek-V3's cluster (its technical report, section 3.1): H800s,
     * the H100's compute and memory with NVLink cut to what the report
     * measures, 160 GB/s a GPU, and 8 IB NICs of 50 GB/s a node's GPU. */
    { "h800",         "H800 cluster (DeepSeek-V3's): 8 H800 a node on NVLink (160 GB/s a GPU), 400 Gb/s IB a GPU between",
      494e12, 3e-6, 160e9, 0, 8, 10e-6, 50e9, 989e12, &h100_sxm, 80.0 * GIB, 2.0 * 989e12, 3.35e12 },
    /* Four GPUs a node (HGX A100 4-GPU boards, as in Perlmutter's GPU
     * nodes: four 200 Gb/s NICs, one a GPU): a node smaller than an
     * 8-way data-parallel group, where a group of 8 spans two nodes. */
    { "hgx-a100-4",   "HGX A100 4-GPU 40GB: 4 A100 SXM a node on NVLink 3, 200 Gb/s a GPU between (Perlmutter's nodes)",
      156e12, 3e-6, 300e9, 0, 4, 10e-6, 25e9, 312e12, &a100_sxm, 40.0 * GIB, 0.0, 1.555e12 },
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
static double link_transfer(double beta_Bps, double bytes)
{
    return beta_Bps > 0.0 ? bytes / beta_Bps : 0.0;
}

double ptdp_cost_message(const ptdp_profile *p, uint64_t bytes)
{
    return p->alpha_s + link_transfer(p->beta_Bps, (double)bytes);
}

/* ceil(log2 n): the rounds of a binomial tree over n devices. */
static int tree_rounds(int n)
{
    int rounds = 0;
    for (int reach = 1; reach < n; reach *= 2)
        rounds++;
    return rounds;
}

/* The steps of clock.h's table on links of latency alpha and bandwidth beta. */
static double collective_steps(ptdp_coll op, double S, int n, double alpha, double beta)
{
    if (n <= 1)
        return 0.0;
    double ring_step = alpha + link_transfer(beta, S / n);   /* alpha + S/(n beta) */
    switch (op) {
    case PTDP_COLL_BARRIER:
    case PTDP_COLL_SPLIT:           /* an exchange of (color, key): latency only */
        return tree_rounds(n) * alpha;
    case PTDP_COLL_BROADCAST:
    case PTDP_COLL_REDUCE:
        return tree_rounds(n) * (alpha + link_transfer(beta, S));
    case PTDP_COLL_ALL_REDUCE:
        return 2.0 * (n - 1) * ring_step;
    case PTDP_COLL_REDUCE_SCATTER:
    case PTDP_COLL_ALL_GATHER:
    case PTDP_COLL_GATHER:
    case PTDP_COLL_SCATTER:
    case PTDP_COLL_ALL_TO_ALL:
        return (n - 1) * ring_step;
    case PTDP_COLL_ALL_TO_ALLV:     /* n-1 pairwise steps; the busiest link carries S */
        return (n - 1) * alpha + link_transfer(beta, S);
    case PTDP_COLL_SEND:
    case PTDP_COLL_RECV:
        return alpha + link_transfer(beta, S);
    default:
        return 0.0;
    }
}

double ptdp_cost_collective(const ptdp_profile *p, ptdp_coll op, uint64_t bytes, int n)
{
    return collective_steps(op, (double)bytes, n, p->alpha_s, p->beta_Bps);
}

/* ---- Two link levels --------------------------------------------------------- */

int ptdp_profile_node(const ptdp_profile *p, int r)
{
    return p->gpus_per_node > 0 && r > 0 ? r / p->gpus_per_node : 0;
}

int ptdp_profile_nodes_spanned(const ptdp_profile *p, const int *ranks, int n)
{
    int nodes = 0;
    for (int i = 0; ranks != NULL && i < n; i++) {
        int seen = 0, node = ptdp_profile_node(p, ranks[i]);
        for (int j = 0; j < i && !seen; j++)
            seen = ptdp_profile_node(p, ranks[j]) == node;
        nodes += !seen;
    }
    return nodes > 0 ? nodes : 1;
}

/* The bandwidth of one step of a group of n spread over `nodes` nodes: its
 * n/nodes NICs in a node together, no more than the link inside the node
 * (0 = infinite, as everywhere). */
static double network_beta(const ptdp_profile *p, int n, int nodes)
{
    double nics = p->net_beta_Bps > 0.0 ? (double)n / nodes * p->net_beta_Bps : 0.0;
    if (nics == 0.0)
        return p->beta_Bps;
    return p->beta_Bps > 0.0 && p->beta_Bps < nics ? p->beta_Bps : nics;
}

double ptdp_cost_collective_nodes(const ptdp_profile *p, ptdp_coll op, uint64_t bytes, int n, int nodes)
{
    if (nodes <= 1 || p->gpus_per_node <= 0)   /* one node: the links inside it */
        return ptdp_cost_collective(p, op, bytes, n);
    return collective_steps(op, (double)bytes, n, p->net_alpha_s, network_beta(p, n, nodes));
}

double ptdp_cost_message_between(const ptdp_profile *p, uint64_t bytes, int a, int b)
{
    if (ptdp_profile_node(p, a) == ptdp_profile_node(p, b))
        return ptdp_cost_message(p, bytes);
    return p->net_alpha_s + link_transfer(p->net_beta_Bps, (double)bytes);
}

/* ---- Peaks and GEMM efficiency ----------------------------------------------- */

double ptdp_profile_peak(const ptdp_profile *p, int bf16)
{
    return bf16 && p->peak_flops_bf16 > 0 ? p->peak_flops_bf16 : p->peak_flops;
}

/* FP8 (clock.h): the FP8 peak, or the bf16 peak where the hardware has
 * none — an A100 runs such a product's emulation in bf16. */
double ptdp_profile_peak_fp8(const ptdp_profile *p)
{
    return p->peak_flops_fp8 > 0 ? p->peak_flops_fp8 : ptdp_profile_peak(p, 1);
}

/* A quantization pass reads each float (4 bytes) and writes its code (1
 * byte), memory-bound:  (4 + 1) E / hbm.  (The amax is a reduction over
 * the same read, fused with it on a GPU; the scale is one number.) */
double ptdp_fp8_quantize_seconds(const ptdp_profile *p, double elements)
{
    return p->hbm_Bps > 0 ? (4.0 + 1.0) * elements / p->hbm_Bps : 0.0;
}

/* 2mnk / eff · peak / fp8_peak  +  quantize(E) · peak: the product's time
 * at the FP8 peak and its operands' quantization, as flops at the peak the
 * device divides by (ptdp_compute). */
double ptdp_fp8_gemm_cost_flops(const ptdp_profile *p, int bf16, double m, double n, double k, double quantized)
{
    const double peak = ptdp_profile_peak(p, bf16);
    return ptdp_gemm_cost_flops(p, m, n, k) * (peak / ptdp_profile_peak_fp8(p)) +
           ptdp_fp8_quantize_seconds(p, quantized) * peak;
}

double ptdp_gemm_efficiency(const ptdp_profile *p, double m, double n, double k)
{
    const ptdp_gemm_curve *g = p != NULL ? p->gemm : NULL;
    if (g == NULL || !(m > 0 && n > 0 && k > 0))   /* an empty product costs 0 anyway */
        return 1.0;
    /* Tile and wave quantisation. */
    double tiles = ceil(m / g->tile_m) * ceil(n / g->tile_n);
    double waves = ceil(tiles / g->sms);
    double fill = m * n / (waves * g->sms * g->tile_m * g->tile_n);
    double compute = g->e_max * fill;
    /* The memory roofline: flops per byte of bf16 moved, against the ridge. */
    double intensity = m * n * k / (m * k + k * n + m * n);
    double memory = intensity / g->ridge;
    double eff = compute < memory ? compute : memory;
    return eff < 1.0 ? eff : 1.0;
}

double ptdp_gemm_cost_flops(const ptdp_profile *p, double m, double n, double k)
{
    double flops = 2.0 * m * n * k;
    if (p == NULL || p->gemm == NULL)
        return flops;            /* exactly 2mnk: the textbook profiles' times */
    return flops / ptdp_gemm_efficiency(p, m, n, k);
}
