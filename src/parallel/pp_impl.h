/*
 * pp_impl.h — the pipeline executor in three steps, for the trainer
 * (private to src/).
 *
 * ptdp_pp_run_step (pp.h) runs a whole step.  The trainer runs it in parts
 * so that it can do the optimizer step itself where the schedule places it:
 *
 *   ptdp_pp_begin ──▶ ptdp_pp_run ─(PTDP_PP_AT_OPTIMIZER: trainer steps)─▶ ptdp_pp_run ──▶ ptdp_pp_end
 */

#ifndef PTDP_PARALLEL_PP_IMPL_H
#define PTDP_PARALLEL_PP_IMPL_H

#include "ptdp/pp.h"

/* The same step, driven by the caller: begin checks the schedule against
 * the step and lays out the micro-batches; run goes on through this
 * stage's list and returns PTDP_PP_AT_OPTIMIZER at an OPTIMIZER_STEP (call
 * it again to go on), 0 at the end of the list, or the first error; end
 * frees what the step kept (also after an error).  ptdp_pp_run_step is
 * begin, run (calling optimizer_step at each stop) and end. */
int  ptdp_pp_begin(struct ptdp_device *dev, ptdp_pp_step *st);
int  ptdp_pp_run(struct ptdp_device *dev, ptdp_pp_step *st);
void ptdp_pp_end(struct ptdp_device *dev, ptdp_pp_step *st);

#endif
