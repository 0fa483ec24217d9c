/*
 * plan_impl.h — what the planner's files share and nobody else calls.
 *
 * A layout names its schedule's registry row; the row's chunk layout
 * (pp_layout.h) decides how many model chunks each stage holds and where,
 * and so what a stage holds (plan_memory.c), what it runs (plan_time.c) and
 * how much a layout weighs (plan_search.c):
 *
 *   a ring of one chunk   1 chunk a stage (1f1b, gpipe, zb-h1)
 *   a ring of v           v = --virtual-stages (interleaved)
 *   a V                   2: stage s holds s and 2pp-1-s of 2 pp (dualpipev)
 *   two copies            2: a stage of each copy (dualpipe)
 */
#ifndef PTDP_PLAN_IMPL_H
#define PTDP_PLAN_IMPL_H

#include "ptdp/model_plan.h"
#include "ptdp/plan.h"

/* Where the layout's chunks lie: its row's shape on pp stages, v chunks. */
ptdp_pp_layout ptdp_plan_pp_layout(const ptdp_plan_layout *l);
/* Model chunks each stage holds (ptdp_plan_pp_layout's v). */
int ptdp_plan_chunks(const ptdp_plan_layout *l);
/* The layout's schedule row: its own, or the default. */
static inline const ptdp_schedule_entry *ptdp_plan_schedule(const ptdp_plan_layout *l)
{
    return l->schedule != NULL ? l->schedule : ptdp_schedule_default();
}

/* Do the stages between the first and the last differ only in holding
 * less further down (one chunk a stage, a closed form of what a stage
 * keeps, no W phase)?  Then the memory model weighs stages 0, 1 and the
 * last alone (plan_memory.c), and the search counts three (plan_search.c). */
bool ptdp_plan_monotone(const ptdp_plan_layout *l);

/* The mixtures of experts (model_plan.h): how many of blocks first ..
 * first + n - 1 are (0 for a dense model), and the numbers of one for the
 * layout (selective recomputation as the layout's; split: B without the
 * deferred dW) — false when the model has none.  Every mixture's are
 * alike: the planner prices one a layout, not one a block. */
int ptdp_plan_moe_blocks(const ptdp_plan_request *rq, int first, int n);

/* The attention core a layout runs (model_plan.h): in tiles under
 * --attention tiled, whatever the recomputation (the tiles keep a
 * log-sum-exp, selective recomputation has nothing left to redo);
 * otherwise redone under selective recomputation, kept without. */
static inline ptdp_plan_core ptdp_plan_core_of(const ptdp_plan_request *rq, int recompute)
{
    if (rq->attention_tiled)
        return PTDP_PLAN_CORE_TILED;
    return recompute == PTDP_RECOMPUTE_SELECTIVE ? PTDP_PLAN_CORE_REDONE : PTDP_PLAN_CORE_KEPT;
}
bool ptdp_plan_moe_of(const ptdp_plan_request *rq, const ptdp_plan_layout *l, bool split, ptdp_plan_moe *out);

#endif
