/*
 * plan_search.h — the planner's search with its counts: what `ptdp plan`
 * and `ptdp bench plan` need beyond plan.h's ptdp_plan_search.
 *
 *     considered ──cheap rules──► valid ──memory ≤ device──► fitting
 *                                                  │
 *                   ranked by step time, best first; with top K, pruned
 *                   exactly by a lower bound of the step (plan_search.c)
 *
 * ptdp_plan_search (plan.h) is ptdp_plan_search_top with every fitting
 * layout kept (top 0) and no counts.
 */
#ifndef PTDP_PLAN_SEARCH_H
#define PTDP_PLAN_SEARCH_H

#include "plan.h"

/* The planner's limit of work a question (plan_search.c): units of some
 * PTDP_PLAN_UNIT_NS of one core each, the search and the explanation of a
 * refusal (what would divide, what would fit) together, so that every
 * question is answered or refused within PTDP_PLAN_WORK_MAX units — some
 * 4.5 s (`ptdp bench plan` measures the nanoseconds a unit costs). */
#define PTDP_PLAN_WORK_MAX 150000000LL
#define PTDP_PLAN_UNIT_NS 30

/* What the search saw. */
typedef struct {
    long long considered;          /* layouts the flags allow, before any rule     */
    long long valid;               /* of them, runnable by ptdp train's rules      */
    long long fitting;             /* of them, within the device's memory          */
    long long timed;               /* of them, whose step time was worked out      */
    double device_bytes;           /* the memory each had to fit in (0: no limit)  */
    bool over_limit;               /* the flags left more layouts than the search
                                      weighs (PTDP_EINVAL; the message says which
                                      flags to fix)                                */
    long long work;                /* units of work spent (PTDP_PLAN_WORK_MAX at
                                      most, past it by one layout's), the
                                      explanation's probes included            */
    /* the valid layout with the smallest peak (when nothing fits: how far) */
    bool have_smallest;
    ptdp_plan_layout smallest;
    ptdp_plan_memory smallest_memory;
} ptdp_plan_search_stats;

/* The best `top` fitting layouts (top 0: every fitting layout), best first
 * (the fastest step; ties: less memory, then the order of enumeration),
 * each with its memory and time.  stats may be NULL.  0; PTDP_EINVAL with
 * msg saying what would divide or what would fit; PTDP_ENOMEM. */
int ptdp_plan_search_top(const ptdp_plan_request *rq, double device_bytes, int top, ptdp_plan_candidate **out,
                         int *count, ptdp_plan_search_stats *stats, char *msg, size_t len);

/* The step-time lower bound the pruning uses (seconds): every GEMM at the
 * peak, no communication, the pipeline's fill.  Exposed for the tests:
 * it must never exceed ptdp_plan_time_of's step. */
double ptdp_plan_step_lower_bound(const ptdp_plan_request *rq, const ptdp_plan_layout *l);

#endif
