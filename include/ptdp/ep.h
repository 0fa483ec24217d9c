/*
 * ep.h — expert parallelism's two exchanges: dispatch (each token to the
 * rank that holds its expert) and combine (the expert's output back).
 *
 * A mixture of experts sends each token to k of E experts (moe_route.h's
 * ptdp_moe_route).  Under expert parallelism an EP group of N ranks holds
 * the experts, local = E / N each: rank r holds experts r local ..
 * (r+1) local - 1.  Each rank routes its own tokens and stacks its kept
 * choices expert by expert (load[e] rows for expert e, in position
 * order) — which is already destination-rank order.  So:
 *
 *   plan      one all_to_all of `local` counts per pair: how many rows
 *             each source sends me for each of my experts
 *   dispatch  one all_to_allv of the rows, then a permutation into local
 *             expert order (expert l's rows from every source together,
 *             ready for one GEMM per expert)
 *   combine   the reverse: the permutation undone, the all_to_allv back;
 *             every row returns to its place in the sender's stack
 *
 *   rank 0 (experts 0 1)   x stacked: [e0 | e1 | e2 | e3]     rank 1 (experts 2 3)
 *                                       to r0    to r1
 *   dispatch:  all_to_allv ──►  recv by source: [from r0: e0 e1 | from r1: e0 e1]
 *              permutation ──►  out by expert:  [e0: r0 r1      | e1: r0 r1     ]
 *   combine:   the same arrows reversed (y by expert → by source → home)
 *
 * Dispatch is a permutation of rows across the group, so combine, its
 * inverse, is also its transpose: <dispatch x, y> = <x, combine y>.  The
 * backward of dispatch is a combine and that of combine a dispatch.
 *
 * Bytes: a rank sends in a dispatch its rows for experts held elsewhere,
 * and in a combine the rows it received from others; each row is C
 * numbers.  Under uniform routing a rank's k T_r choices spread evenly,
 * (N-1)/N of them away:
 *
 *   one all-to-all per rank  ≈  k T_r C (N-1)/N  x element size
 *
 * (the measured loads give the exact count: ptdp_ep_rows_*_away).
 */
#ifndef PTDP_EP_H
#define PTDP_EP_H

#include <stddef.h>

#include "comm.h"
#include "counters.h"
#include "types.h"

struct ptdp_device;
struct ptdp_fp8_recipe;

typedef struct {
    int N, rank;        /* the EP group and my rank in it                              */
    int E, local;       /* experts; local = E / N held by each rank (rank r: r*local ..) */
    int *send_rows;     /* host [E]: the rows I send for expert e (= load[e])            */
    int *recv_rows;     /* host [N * local]: rows source s sends me for my local expert l,
                           at [s * local + l]                                           */
    size_t sent, received;   /* rows of my dispatch's send buffer / receive buffer (mine to me included) */
} ptdp_ep_plan;

/* Exchange the counts (one all_to_all of `local` counts per pair):
 * collective over ep.  E must be a multiple of the group's size and every
 * load[e] >= 0.  0, or the device's failure (*p is then empty). */
int  ptdp_ep_plan_init(struct ptdp_device *dev, ptdp_comm *ep, int E, const int *load, ptdp_ep_plan *p);
void ptdp_ep_plan_free(ptdp_ep_plan *p);

/* x [sent x cols], stacked expert by expert in global expert order ->
 * out [received x cols] in LOCAL EXPERT ORDER: for each local expert l,
 * for each source s in rank order, s's rows for expert rank*local+l in
 * s's order.  One ptdp_all_to_allv, then the permutation (a staging
 * buffer from the arena, freed before return).  Collective over ep.  On
 * a bf16 run's device (dev->bf16) the rows travel as bf16, as Megatron's
 * dispatcher sends them: each value rounded on the wire, 2 B an element
 * (so does the combine). */
int  ptdp_ep_dispatch(struct ptdp_device *dev, ptdp_comm *ep, const ptdp_ep_plan *p, const ptdp_real *x, int cols,
                      ptdp_real *out);
/* The bytes a row of cols costs in --fp8-comm's dispatch (ep_impl.h's
 * ptdp_ep_dispatch_fp8): cols codes of 1 B and ⌈cols / c⌉ scales, c the
 * recipe's activation tile. */
double ptdp_ep_fp8_row_bytes(const struct ptdp_fp8_recipe *r, int cols);

/* The reverse: y [received x cols] in local expert order -> out [sent x
 * cols] stacked as x was.  Combine is dispatch's adjoint (so it is
 * dispatch's backward, and dispatch is combine's). */
int  ptdp_ep_combine(struct ptdp_device *dev, ptdp_comm *ep, const ptdp_ep_plan *p, const ptdp_real *y, int cols,
                     ptdp_real *out);

/* Rows this rank sends to OTHER ranks in a dispatch (to experts held
 * elsewhere) and in a combine (back to their sources); bytes = rows x cols
 * x element size. */
size_t ptdp_ep_rows_dispatched_away(const ptdp_ep_plan *p);
size_t ptdp_ep_rows_combined_away(const ptdp_ep_plan *p);
/* The uniform-routing estimate of one all-to-all's bytes per rank:
 * k T_r C (N-1)/N x elem. */
double ptdp_ep_uniform_bytes(int k, long T_r, int C, int N, size_t elem);

/* Publish EP's counters of a training run (counters.h): per device,
 * "ep_bytes" — what the plans, dispatches and combines above send to other
 * ranks by the formula, added by each as it runs (the counts, rows away x
 * cols x element size) — and "expert_elements", its parameters summed over
 * the expert-DP group.  0, or the registry's refusal. */
int  ptdp_ep_publish(ptdp_counters *reg);

#endif
