/*
 * arena_impl.h — the arena's call for the library only (private to src/).
 *
 * The public arena hands out zeroed memory.  The library's own buffers that
 * are written in full before anyone reads them (a tensor about to be
 * overwritten by a GEMM) skip the clearing: same bytes, less work.
 *
 *   ptdp_arena_alloc        zeroed        (arena.h, for everyone)
 *   ptdp_arena_alloc_uninit not cleared   (here, for device.c)
 */

#ifndef PTDP_CORE_ARENA_IMPL_H
#define PTDP_CORE_ARENA_IMPL_H

#include <stddef.h>
#include "ptdp/arena.h"

/* The same, without the zero-fill: for a tensor its owner writes whole
 * before it reads it (an op's output).  Filling a step's activations with
 * zeros only to overwrite them costs a GPT step a tenth of its time.  Under
 * AddressSanitizer the bytes are all ones (NaN), so a read before the first
 * write shows. */
int  ptdp_arena_alloc_uninit(ptdp_arena *a, size_t bytes, ptdp_mem_category cat,
                             const char *name, void **out, char *msg, size_t msglen);

#endif
