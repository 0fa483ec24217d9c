/*
 * schedule_impl.h — the schedules' helpers inside parallel/ (private to
 * src/): an action kind's name for messages, the registry's names in one
 * line, and the generator call with v model chunks per stage.
 *
 *   registry entry ──ptdp_schedule_generate_v(gen, placement, name, pp, m, v, layout)──▶ schedule
 */

#ifndef PTDP_PARALLEL_SCHEDULE_IMPL_H
#define PTDP_PARALLEL_SCHEDULE_IMPL_H

#include <stddef.h>
#include "ptdp/schedule.h"

/* "gpipe, 1f1b, interleaved, zb-h1": for messages naming the valid values. */
void ptdp_schedule_names(char *buf, size_t len);
int  ptdp_schedule_generate_v(ptdp_schedule_generator gen, ptdp_placement placement, const char *name,
                              int pp, int micro_batches, int virtual_stages, ptdp_chunk_layout layout,
                              ptdp_schedule **out);

/* Does the model chunk at (stage, chunk) take its input from / give its
 * output to another stage (a message), rather than from / to the data, the
 * loss or — at the V's tip — a chunk of the same stage (a hand-over)? */
int ptdp_chunk_remote_before(const ptdp_schedule *s, int stage, int chunk);
int ptdp_chunk_remote_after(const ptdp_schedule *s, int stage, int chunk);

/* "A or B": the rows that refuse nothing (for messages that say which
 * --schedule to use instead). */
const char *ptdp_schedule_plain_names(void);

/* "FORWARD", "SEND_BACKWARD", …: for messages. */
const char *ptdp_action_kind_name(ptdp_action_kind k);

#endif
