/* plan_memory.c — being written (the planner's memory part). */
#include "ptdp/plan.h"
#include <stdio.h>
#include "ptdp/error.h"
int ptdp_plan_memory_of(const ptdp_plan_request *rq, const ptdp_plan_layout *l, ptdp_plan_memory *out)
{
    (void)rq; (void)l; (void)out;
    return PTDP_EINVAL;
}
