/*
 * clock.h — two clocks per device: wall time and a virtual time.
 *
 * On a 2-core laptop, 8 device threads take turns on the cores, so wall time
 * says little about what the same schedule costs on 8 GPUs.  Each device
 * therefore also keeps a *virtual* clock advanced by a cost model:
 *
 *   compute      t += flops / peak_flops
 *   a message    arrives at  t_send + alpha + bytes / beta
 *   a collective starts when the last member arrives (max of their clocks)
 *                and lasts as its algorithm's steps would on the links, e.g.
 *                ring all-reduce: 2(N-1) steps of (alpha + S/(N beta))
 *
 * Two streams per device, as a GPU has: the compute stream (`now`) and a
 * communication stream (`comm_free`) on which non-blocking collectives
 * (comm.h: ptdp_all_reduce_start … ptdp_wait) run while the compute stream
 * goes on.  Blocking calls keep running on the compute stream.
 *
 *   compute   ▇▇▇▇ backward ▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇ ░wait░ ▇ optimizer
 *   comm              ┌bucket 0┐┌bucket 1┐┌── bucket 2 ──┐
 *                     ^start   (serialised on the stream)  ^ wait returns
 *
 * The part of a started collective that the compute stream never waits for
 * is "hidden"; the rest it waits for in ptdp_wait is "exposed".
 *
 * An overlapped F&B pair (DualPipe's: one micro-batch's forward beside
 * another's backward, pair.h) puts its blocking collectives marked
 * overlappable (expert parallelism's all-to-alls) on the communication
 * stream too, and the compute stream waits for them at the pair's end:
 *
 *   compute   |▇▇ F ▇▇▇▇▇▇▇ B ▇▇▇▇▇▇▇▇▇▇|░|     pair = max(F + B, a2a)
 *   comm      |a2a a2a a2a a2a a2a a2a a2a|       (members in step)
 *             ^pair begins                ^ends: now = max(now, stream)
 *
 * Virtual time is deterministic: the same run gives the same timeline and the
 * same pipeline bubble whatever the host is doing.
 */
#ifndef PTDP_CLOCK_H
#define PTDP_CLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* How close a matrix product of a given shape comes to the peak (clock.c
 * says where each curve's numbers come from).  NULL in a profile: every
 * product runs at the peak, as the textbook profiles want. */
typedef struct ptdp_gemm_curve ptdp_gemm_curve;

typedef struct {
    const char *name;
    const char *description;
    double peak_flops;   /* sustained flop/s of one device                 */
    double alpha_s;      /* per-message latency, seconds                   */
    double beta_Bps;     /* link bandwidth, bytes per second (0 = infinite) */
    int    ideal;        /* 1: the textbook pipeline (embedding and loss
                            layers cost nothing, links are free)           */
    /* A cluster of nodes (0 below: every device in one node, one link
     * level, alpha_s and beta_Bps).  Device r sits in node r / gpus_per_node;
     * a collective or message that leaves a node uses the network. */
    int    gpus_per_node;   /* devices per node; 0 = one node holds them all */
    double net_alpha_s;     /* latency of a message between nodes          */
    double net_beta_Bps;    /* network bandwidth of ONE device (its NIC),
                               bytes per second each way                   */
    double peak_flops_bf16; /* peak under --precision bf16; 0 = peak_flops */
    const ptdp_gemm_curve *gemm;   /* NULL: products at the peak           */
    double mem_bytes;       /* memory of one device; 0 = not given         */
    double peak_flops_fp8;  /* dense FP8 tensor-core peak (--fp8); 0 = the
                               hardware has none: the bf16 peak instead   */
    double hbm_Bps;         /* memory bandwidth of one device, bytes per
                               second; 0 = not given (memory-bound passes
                               cost nothing, as a link of beta 0)         */
} ptdp_profile;

/* The named profiles; "dgx-a100" (the default) first. */
const ptdp_profile *ptdp_profiles(int *count);
const ptdp_profile *ptdp_profile_find(const char *name);   /* NULL if unknown */
const ptdp_profile *ptdp_profile_default(void);

/* An overlapped pair in progress on one device (src/comm/pair.c). */
typedef struct {
    int open;           /* between ptdp_pair_begin and ptdp_pair_end       */
    int marked;         /* the calls made now are overlappable             */
    int serial;         /* pairs overlap nothing (--no-pair-overlap)       */
    int count;          /* overlappable collectives this pair so far       */
    double t0;          /* the compute stream when the pair began          */
    double cost;        /* their modelled time                              */
    double end;         /* the stream's end of the last of them            */
    double tail;        /* where the stream's last unbroken run of them
                           began (a member to wait for breaks a run)      */
} ptdp_pair_state;

/* Per-device virtual-time bookkeeping. */
typedef struct {
    double now;         /* the device's virtual time, seconds             */
    double compute_s;   /* time spent computing                           */
    double comm_s;      /* time spent moving data (modelled)              */
    double idle_s;      /* time spent waiting for other devices           */
    /* The communication stream (non-blocking collectives). */
    double comm_free;   /* when the stream has finished what it was given  */
    double stream_s;    /* time the stream spent moving data               */
    double hidden_s;    /* of it, what the compute stream never waited for */
    /* Collectives marked overlappable (pair.h: expert parallelism's
     * all-to-alls), blocking on the compute stream or, inside a pair, on
     * the communication stream. */
    double pairable_s;     /* their modelled time, wherever they ran       */
    double pair_hidden_s;  /* of it, hidden under a pair's compute         */
    ptdp_pair_state pair;
} ptdp_clock;

/* Seconds since an arbitrary fixed point (monotonic). */
double ptdp_wall_now(void);

/* Modelled time of one message of `bytes` on a link.  Bytes are 64-bit
 * wherever size_t is not (the explorer's WebAssembly): a planned bucket
 * or message may pass 4 GiB. */
double ptdp_cost_message(const ptdp_profile *p, uint64_t bytes);

/* Modelled time of one collective over n devices, step by step as its ring
 * (or tree) algorithm runs on real links, whatever algorithm the host ran.
 * `bytes` is S, the full buffer: the whole vector for all_reduce,
 * reduce_scatter, all_gather, broadcast, reduce, gather and scatter; one
 * device's whole send buffer for all_to_all; for all_to_allv the most any
 * member sends to, or receives from, the others.  n == 1 costs 0.
 *   barrier                      ceil(log2 n) * alpha
 *   broadcast, reduce            ceil(log2 n) * (alpha + S/beta)      (binomial tree)
 *   all_reduce                   2(n-1) * (alpha + S/(n beta))        (ring)
 *   reduce_scatter, all_gather,
 *   gather, scatter, all_to_all  (n-1) * (alpha + S/(n beta))
 *   all_to_allv                  (n-1) * alpha + S/beta               (pairwise exchange)
 * (all_to_all is all_to_allv with equal blocks: its busiest member moves
 * (n-1)/n S, the same time.)
 */
double ptdp_cost_collective(const ptdp_profile *p, ptdp_coll op, uint64_t bytes, int n);

/* The same over n devices spread across `nodes` nodes (1, or a profile of
 * one node: exactly ptdp_cost_collective).  Across nodes every ring step
 * waits for the network: alpha = net_alpha_s and the bandwidth is what the
 * group's devices in one node bring together, n/nodes NICs, capped by the
 * link inside the node:  beta = min(beta_Bps, (n / nodes) net_beta_Bps).
 * (clock.c draws it and says what the model leaves out.) */
double ptdp_cost_collective_nodes(const ptdp_profile *p, ptdp_coll op, uint64_t bytes, int n, int nodes);
/* One message between world ranks a and b (the network if their nodes
 * differ). */
double ptdp_cost_message_between(const ptdp_profile *p, uint64_t bytes, int a, int b);
/* The node of world rank r (0 when the profile has one node). */
int    ptdp_profile_node(const ptdp_profile *p, int r);
/* How many nodes the n world ranks touch. */
int    ptdp_profile_nodes_spanned(const ptdp_profile *p, const int *ranks, int n);

/* The peak a device computes at: peak_flops, or under bf16 the profile's
 * bf16 peak when it gives one. */
double ptdp_profile_peak(const ptdp_profile *p, int bf16);

/* FP8 (--fp8, fp8_linear.h).  An FP8 tensor core multiplies codes at
 * the FP8 peak: peak_flops_fp8, or where the hardware has none (A100) the
 * bf16 peak (the products run in bf16), or peak_flops.  Before its
 * product each operand is quantized: a pass that reads the float tensor
 * and writes its one-byte codes, memory-bound,
 *
 *     quantize(E elements) = (4 + 1) E / hbm_Bps      seconds
 *
 * (0 when the profile gives no memory bandwidth).  A linear layer's
 * product from FP8 operands, in flops at the device's peak (peak =
 * ptdp_profile_peak(p, bf16), what ptdp_compute divides by):
 *
 *     2mnk / eff(m, n, k) · peak / fp8_peak  +  quantize(E) · peak
 *
 * where E counts the elements the product's operands quantize (the
 * caller's: a forward quantizes X and W, a backward's dX dY and W, its
 * dW X).  The GEMM curve is bf16's: FP8 halves the bytes and doubles the
 * peak, the same ridge; its e_max is assumed the same. */
double ptdp_profile_peak_fp8(const ptdp_profile *p);
/* Seconds of the passes that quantize `elements` float values to codes. */
double ptdp_fp8_quantize_seconds(const ptdp_profile *p, double elements);
/* The product's charge above. */
double ptdp_fp8_gemm_cost_flops(const ptdp_profile *p, int bf16, double m, double n, double k, double quantized);
/* The fraction of the peak an m x k by k x n product reaches, in (0, 1];
 * exactly 1 when the profile has no curve (and for an empty product, a
 * dimension <= 0).  With a curve (clock.c): e_max · tile-and-wave fill,
 * or the memory roofline for thin products, whichever is lower. */
double ptdp_gemm_efficiency(const ptdp_profile *p, double m, double n, double k);
/* What such a product charges the clock, in flops at the peak:
 * 2 m n k / ptdp_gemm_efficiency — exactly 2 m n k without a curve, so
 * the textbook profiles' times do not move. */
double ptdp_gemm_cost_flops(const ptdp_profile *p, double m, double n, double k);

#endif
