/* plan_search.c — being written (the planner's search part). */
#include "ptdp/plan.h"
#include <stdio.h>
#include "ptdp/error.h"
int ptdp_plan_search(const ptdp_plan_request *rq, double device_bytes, ptdp_plan_candidate **out, int *count,
                     char *msg, size_t len)
{
    (void)rq; (void)device_bytes; (void)out; (void)count;
    snprintf(msg, len, "not written yet");
    return PTDP_EINVAL;
}
