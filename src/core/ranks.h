/*
 * ranks.h — what N devices are doing, in a few words (private to the library).
 *
 * A mismatch or a watchdog report says what every rank of a group was
 * doing.  At 64 devices, one clause per rank is 64 clauses, and the one
 * that matters — the rank that called something else — is cut off at the
 * end of the message.  So ranks that say the same thing share a clause, the
 * ranks as ranges, and the smallest groups come first:
 *
 *     rank 63: all_reduce count=17 f32 op=sum at a.c:19;
 *     ranks 0-62: all_reduce count=16 f32 op=sum at a.c:19
 */
#ifndef PTDP_CORE_RANKS_H
#define PTDP_CORE_RANKS_H

#include <stddef.h>

/* text[r] says what rank r does (n ranks).  Writes "rank 3: …; ranks 0-2,
 * 4-7: …" into buf: one clause per distinct text, the fewest ranks first
 * (ties: the lowest rank first), clauses separated by "; ".  A message too
 * long for buf ends with "…". */
void ptdp_describe_ranks(const char *const *text, int n, char *buf, size_t len);

#endif
