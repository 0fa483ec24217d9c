/*
 * arena.h — a device's memory.
 *
 * Every byte a device owns (parameters, gradients, optimizer state,
 * activations, communication buffers) comes from its arena, tagged with a
 * category.  The arena has a capacity (--device-mem): asking for more is an
 * error that names the tensor, never a crash.  Current and peak bytes are
 * tracked per category, so "how much memory does ZeRO-1 save" or "how many
 * micro-batches of activations does GPipe keep" are numbers, not guesses.
 *
 * Under AddressSanitizer the arena poisons the red zones between blocks and
 * every freed block, so an overflow from one tensor into the next is caught
 * exactly as it would be with malloc.
 */
#ifndef PTDP_ARENA_H
#define PTDP_ARENA_H

#include <stddef.h>

typedef enum {
    PTDP_MEM_PARAMS = 0,  /* model parameters                      */
    PTDP_MEM_GRADS,       /* their gradients                       */
    PTDP_MEM_OPTIM,       /* optimizer state (AdamW moments, …)     */
    PTDP_MEM_ACTS,        /* activations kept for the backward     */
    PTDP_MEM_COMM,        /* communication buffers (buckets, …)     */
    PTDP_MEM_OTHER,       /* scratch, data batches                 */
    PTDP_MEM_NCAT
} ptdp_mem_category;

const char *ptdp_mem_category_name(ptdp_mem_category c); /* "params", "grads", "optim", "acts", "comm", "other" */

typedef struct {
    size_t capacity;
    size_t current[PTDP_MEM_NCAT];
    size_t peak[PTDP_MEM_NCAT];      /* high-water mark of each category alone */
    size_t current_total;
    size_t peak_total;               /* high-water mark of the sum             */
    size_t allocations;              /* live blocks                            */
} ptdp_mem_stats;

typedef struct ptdp_arena ptdp_arena;

/* A new empty arena that may hold up to `capacity` bytes of user data.
 * `rank` only labels messages.  Returns NULL if the host itself is out of
 * memory. */
ptdp_arena *ptdp_arena_create(size_t capacity, int rank);
void        ptdp_arena_destroy(ptdp_arena *a);

/* Allocate `bytes` (64-byte aligned, zero-filled) for the tensor `name`.
 * On failure returns PTDP_ENOMEM, sets *out = NULL and writes into msg (if
 * not NULL) a sentence naming the device, the tensor, the bytes asked for,
 * the bytes in use and the capacity.  bytes == 0 yields a valid unique
 * pointer. */
int  ptdp_arena_alloc(ptdp_arena *a, size_t bytes, ptdp_mem_category cat,
                      const char *name, void **out, char *msg, size_t msglen);
/* Return a block to the arena; NULL is ignored. */
void ptdp_arena_free(ptdp_arena *a, void *p);

void ptdp_arena_stats(const ptdp_arena *a, ptdp_mem_stats *out);
/* Forget the peaks (peak := current), e.g. to measure one step alone. */
void ptdp_arena_reset_peaks(ptdp_arena *a);

/* Parse "512M", "4K", "1G", "1048576" (K/M/G = 1024-based).  Returns 0 and
 * sets *bytes, or PTDP_EINVAL for anything else (empty, negative, unknown
 * suffix, overflow). */
int ptdp_parse_size(const char *text, size_t *bytes);
/* Format bytes as "1.50 MiB" into buf. Returns buf. */
char *ptdp_format_bytes(double bytes, char *buf, size_t len);

#endif
