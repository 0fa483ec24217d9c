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

#endif
