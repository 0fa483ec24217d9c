/*
 * ep_impl.h — what the trainer asks of expert parallelism at set-up
 * (private to src/; ep.h has the exchanges and the counters).
 */
#ifndef PTDP_PARALLEL_EP_IMPL_H
#define PTDP_PARALLEL_EP_IMPL_H

#include "ptdp/ep.h"
#include "ptdp/model.h"

/* Add the elements of m's parameters whose gradients are summed over the
 * expert-DP group (PTDP_GROUP_EDP: the experts under --ep) to this
 * device's "expert_elements" (ptdp_ep_publish). */
void ptdp_ep_count_experts(ptdp_device *dev, const ptdp_model *m);

struct ptdp_fp8_recipe;

/* The same rows sent in FP8 (--fp8-comm, DeepSeek-V3's dispatch): each row
 * quantized at its source by r's activation tiles (1 x 128, 1 x 32: a
 * row's tiles are the same wherever the row goes), its E4M3 codes and its
 * tiles' scales in two all_to_allvs, dequantized on arrival.  The expert's
 * FP8 product quantizes those values again by the same tiles and gets the
 * same codes.  Per row sent away: cols bytes + ⌈cols / c⌉ scales, in place
 * of cols reals (fp8_linear.h; ptdp_ep_fp8_row_bytes, ep.h). */
int  ptdp_ep_dispatch_fp8(struct ptdp_device *dev, ptdp_comm *ep, const ptdp_ep_plan *p, const ptdp_real *x,
                          int cols, const struct ptdp_fp8_recipe *r, ptdp_real *out);

/* ep_nodes.c: what crosses the network (a profile of nodes).  From one
 * block's routing of `rows` tokens (choice and slot: rows x k, slot -1 a
 * dropped choice), the device's counters "ep_net_rows" (kept choices whose
 * expert sits in another node) and "ep_net_rows_per_node" (each token's
 * distinct remote nodes: DeepEP's one copy a node); nothing on one node.
 * _publish names them (counters.h). */
int  ptdp_ep_nodes_publish(ptdp_counters *reg);
void ptdp_ep_count_nodes(struct ptdp_device *dev, ptdp_comm *ep, int E, int rows, int k, const int *choice,
                         const int *slot);

#endif
