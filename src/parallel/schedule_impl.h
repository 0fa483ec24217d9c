/*
 * schedule_impl.h — the schedules' helpers inside parallel/ (private to
 * src/): an action kind's name for messages, the registry's names in one
 * line, and the generator call with v model chunks per stage.
 *
 *   registry entry ──ptdp_schedule_generate_v(gen, placement, name, pp, m, v)──▶ schedule
 */

#ifndef PTDP_PARALLEL_SCHEDULE_IMPL_H
#define PTDP_PARALLEL_SCHEDULE_IMPL_H

#include <stddef.h>
#include "ptdp/schedule.h"

/* "gpipe, 1f1b, interleaved, zb-h1": for messages naming the valid values. */
void ptdp_schedule_names(char *buf, size_t len);
int  ptdp_schedule_generate_v(ptdp_schedule_generator gen, ptdp_placement placement, const char *name,
                              int pp, int micro_batches, int virtual_stages, ptdp_schedule **out);

/* "FORWARD", "SEND_BACKWARD", …: for messages. */
const char *ptdp_action_kind_name(ptdp_action_kind k);

#endif
