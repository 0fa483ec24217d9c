/* plan_time.c — being written (the planner's time part). */
#include "ptdp/plan.h"
#include "ptdp/error.h"
int ptdp_plan_time_of(const ptdp_plan_request *rq, const ptdp_plan_layout *l, ptdp_plan_time *out)
{
    (void)rq; (void)l; (void)out;
    return PTDP_EINVAL;
}
