/*
 * plan_impl.h — what the planner's files share and nobody else calls.
 *
 * A layout names its schedule; how many model chunks that puts on each
 * stage decides what a stage holds (plan_memory.c), what it runs
 * (plan_time.c) and how much a layout weighs (plan_search.c):
 *
 *   1f1b, gpipe, zb-h1     1 chunk a stage
 *   interleaved            v = --virtual-stages, round a ring
 *   dualpipev              2: a V of 2 pp chunks, stage s holds s and 2pp-1-s
 *   dualpipe               2: a stage of each of two copies
 */
#ifndef PTDP_PLAN_IMPL_H
#define PTDP_PLAN_IMPL_H

#include "ptdp/plan.h"

/* Model chunks each stage holds under the layout's schedule (above). */
int ptdp_plan_chunks(const ptdp_plan_layout *l);

#endif
