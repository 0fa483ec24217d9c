/*
 * arena.c — a device's memory: slabs, blocks, red zones, accounting.
 *
 * A GPU has a fixed amount of memory and a framework's allocator carves every
 * tensor out of it.  The arena plays that role for one simulated device:
 *
 *   - Memory comes from the host in large *slabs*, obtained lazily (the
 *     first one small, each next one twice as large up to 64 MiB, a big tensor
 *     gets a slab of its own), so a generous capacity costs nothing until it
 *     is used.  Chunks are kept until the arena is destroyed, as a GPU caching
 *     allocator keeps what it got from the driver.
 *   - Each slab is cut into *blocks*, one per tensor, laid end to end:
 *
 *       ┌─────┬──────┬───┬────────────┬───┬──────┬───┬──────┬───┬──────┬────────────┐
 *       │slab│block │red│ user bytes │red│block │red│ user │red│block │ free space │
 *       │head │header│   │ (zeroed)   │   │header│   │      │   │header│            │
 *       └─────┴──────┴───┴────────────┴───┴──────┴───┴──────┴───┴──────┴────────────┘
 *             ◄────────── block ─────────►◄──────── block ─────►◄──── free block ───►
 *
 *     A block's header records its size, category and the tensor's name;
 *     the *red zones* in front of and behind the user bytes belong to no one.
 *   - Allocation is *first fit*: take the first free block on the free list
 *     that is large enough, split off what is left as a new free block.  The
 *     list is last-freed-first, so a training step's activations land where
 *     the previous step's were.
 *   - Free *coalesces*: a freed block merges with a free neighbour on either
 *     side, so freeing a step's activations gives back one large block that
 *     the next step reuses.
 *
 * The capacity (--device-mem) limits the *user* bytes in use, the number a
 * student compares with a GPU's memory; headers and red zones are the
 * simulator's overhead and are not charged.  Asking for more than is left is
 * PTDP_ENOMEM with a sentence that names the tensor — never a crash.
 *
 * Catching overflows.  Under AddressSanitizer every byte of a slab is
 * poisoned except the headers and the exact user bytes of live blocks, so a
 * write one element past a tensor, or a read of a freed one, stops the
 * program with ASan's report at the faulty line.  Without ASan the red zones
 * are filled with a known byte and checked when the block is freed, so an
 * overflow is still found, only later.  A corrupted red zone, a double free
 * or freeing a pointer that is not an arena block is a bug in the program,
 * not a condition to recover from: ptdp_arena_free then prints what it found
 * and calls abort(), exactly as the C library's free() does.
 *
 * One arena belongs to one device thread, so it takes no locks.
 */
#include "ptdp/arena.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"

/* ---- AddressSanitizer hooks (no-ops without ASan) ----------------------- */

#if defined(__SANITIZE_ADDRESS__)
#define PTDP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PTDP_ASAN 1
#endif
#endif

#ifdef PTDP_ASAN
#include <sanitizer/asan_interface.h>
#include "core/arena_impl.h"
#define POISON(p, n)   __asan_poison_memory_region((p), (n))
#define UNPOISON(p, n) __asan_unpoison_memory_region((p), (n))
#else
#define POISON(p, n)   ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* ---- Layout --------------------------------------------------------------- */

#define ALIGN          ((size_t)64)          /* every user pointer is 64-aligned */
#define NAME_LEN       64
#define BLOCK_MAGIC    0x70746470u           /* "ptdp" */
#define CANARY         0xA5                  /* red-zone fill without ASan */
#define FIRST_SLAB    ((size_t)1 << 20)     /* 1 MiB, doubling …          */
#define MAX_SLAB      ((size_t)64 << 20)    /* … up to 64 MiB             */

typedef struct block {
    uint32_t magic;                 /* BLOCK_MAGIC while the header is valid */
    uint32_t is_free;
    ptdp_mem_category cat;
    size_t bytes;                   /* user bytes asked for                  */
    size_t span;                    /* header to the next header, in bytes   */
    struct block *prev, *next;      /* neighbours in address order (a slab) */
    struct block *prev_free, *next_free;   /* the free list (free blocks)   */
    char name[NAME_LEN];
} block;

typedef struct slab {
    struct slab *next;
    size_t bytes;
} slab;

#define ROUND_UP(n, a)  (((n) + (a) - 1) / (a) * (a))
#define SLAB_HEAD      ROUND_UP(sizeof(slab), ALIGN)
#define BLOCK_HEAD      ROUND_UP(sizeof(block), ALIGN)
#define RED_ZONE        ALIGN
/* From a header to its user bytes, and the smallest block worth splitting off. */
#define USER_OFFSET     (BLOCK_HEAD + RED_ZONE)
#define MIN_SPAN        (USER_OFFSET + ALIGN + RED_ZONE)

struct ptdp_arena {
    int rank;
    slab *slabs;                  /* everything obtained from the host     */
    size_t next_slab;              /* size of the next slab to ask for     */
    block *free_list;
    ptdp_mem_stats stats;
};

static unsigned char *user_bytes(block *b) { return (unsigned char *)b + USER_OFFSET; }

/* ---- Names and sizes ------------------------------------------------------ */

const char *ptdp_mem_category_name(ptdp_mem_category c)
{
    static const char *const names[PTDP_MEM_NCAT] = {
        "params", "grads", "optim", "acts", "comm", "other"
    };
    return (unsigned)c < PTDP_MEM_NCAT ? names[c] : "?";
}

char *ptdp_format_bytes(double bytes, char *buf, size_t len)
{
    static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
    if (!(bytes >= 1024.0 || bytes <= -1024.0)) {     /* also NaN */
        snprintf(buf, len, "%.0f B", bytes);
        return buf;
    }
    int u = -1;
    while (u < 5 && (bytes >= 1024.0 || bytes <= -1024.0)) {
        bytes /= 1024.0;
        u++;
    }
    snprintf(buf, len, "%.2f %s", bytes, units[u]);
    return buf;
}

/* "512M", "4K", "1G", "64": a decimal integer, an optional unit K, M or G
 * (either case, powers of 1024), then optionally "B" or, after a unit, "iB"
 * ("512MiB", "512MB").  No sign, no spaces, no fractions. */
int ptdp_parse_size(const char *text, size_t *bytes)
{
    if (text == NULL || bytes == NULL || !isdigit((unsigned char)*text))
        return PTDP_EINVAL;

    size_t value = 0;
    const char *p = text;
    for (; isdigit((unsigned char)*p); p++) {
        size_t digit = (size_t)(*p - '0');
        if (value > (SIZE_MAX - digit) / 10)
            return PTDP_EINVAL;                     /* overflow */
        value = value * 10 + digit;
    }

    unsigned shift = 0;
    switch (*p) {
    case 'K': case 'k': shift = 10; p++; break;
    case 'M': case 'm': shift = 20; p++; break;
    case 'G': case 'g': shift = 30; p++; break;
    default: break;
    }
    if (shift > 0 && strcmp(p, "iB") == 0)
        p += 2;
    else if (strcmp(p, "B") == 0)
        p += 1;
    if (*p != '\0')
        return PTDP_EINVAL;                         /* unknown suffix, garbage */
    if (shift >= sizeof(size_t) * 8 || value > (SIZE_MAX >> shift))
        return PTDP_EINVAL;
    *bytes = value << shift;
    return 0;
}

/* ---- Creating and destroying --------------------------------------------- */

ptdp_arena *ptdp_arena_create(size_t capacity, int rank)
{
    ptdp_arena *a = calloc(1, sizeof *a);
    if (a == NULL)
        return NULL;
    a->rank = rank;
    a->next_slab = FIRST_SLAB;
    a->stats.capacity = capacity;
    return a;
}

void ptdp_arena_destroy(ptdp_arena *a)
{
    if (a == NULL)
        return;
    slab *c = a->slabs;
    while (c != NULL) {
        slab *next = c->next;
        UNPOISON(c, c->bytes);          /* give the host back clean memory */
        free(c);
        c = next;
    }
    free(a);
}

/* ---- The free list -------------------------------------------------------- */

static void free_list_push(ptdp_arena *a, block *b)
{
    b->is_free = 1;
    b->prev_free = NULL;
    b->next_free = a->free_list;
    if (a->free_list != NULL)
        a->free_list->prev_free = b;
    a->free_list = b;
}

static void free_list_remove(ptdp_arena *a, block *b)
{
    if (b->prev_free != NULL)
        b->prev_free->next_free = b->next_free;
    else
        a->free_list = b->next_free;
    if (b->next_free != NULL)
        b->next_free->prev_free = b->prev_free;
    b->prev_free = b->next_free = NULL;
    b->is_free = 0;
}

/* A fresh header at `at`, covering `span` bytes; only the header itself is
 * addressable, the rest of the span stays poisoned. */
static block *new_header(void *at, size_t span, block *prev, block *next)
{
    UNPOISON(at, sizeof(block));
    block *b = at;
    memset(b, 0, sizeof *b);
    b->magic = BLOCK_MAGIC;
    b->span = span;
    b->prev = prev;
    b->next = next;
    return b;
}

/* Ask the host for a slab that holds at least one block of `need` bytes of
 * span.  The whole slab starts poisoned; its single free block is pushed on
 * the free list.  Returns NULL if the host refuses. */
static block *add_slab(ptdp_arena *a, size_t need)
{
    size_t bytes = a->next_slab;
    if (bytes < SLAB_HEAD + need)
        bytes = SLAB_HEAD + need;
    void *mem = NULL;
    if (posix_memalign(&mem, ALIGN, bytes) != 0)
        return NULL;
    if (a->next_slab < MAX_SLAB)
        a->next_slab *= 2;

    POISON(mem, bytes);
    UNPOISON(mem, sizeof(slab));
    slab *c = mem;
    c->bytes = bytes;
    c->next = a->slabs;
    a->slabs = c;

    block *b = new_header((unsigned char *)mem + SLAB_HEAD, bytes - SLAB_HEAD, NULL, NULL);
    free_list_push(a, b);
    return b;
}

/* ---- Red zones without ASan ---------------------------------------------- */

#ifndef PTDP_ASAN
static void fill_red_zones(block *b)
{
    unsigned char *user = user_bytes(b);
    memset(user - RED_ZONE, CANARY, RED_ZONE);
    memset(user + b->bytes, CANARY, b->span - USER_OFFSET - b->bytes);
}

static int red_zones_intact(block *b)
{
    const unsigned char *user = user_bytes(b);
    const unsigned char *end = (const unsigned char *)b + b->span;
    for (const unsigned char *q = user - RED_ZONE; q < user; q++)
        if (*q != CANARY)
            return 0;
    for (const unsigned char *q = user + b->bytes; q < end; q++)
        if (*q != CANARY)
            return 0;
    return 1;
}
#endif

/* ---- Allocation ---------------------------------------------------------- */

static int out_of_memory(const ptdp_arena *a, size_t bytes, ptdp_mem_category cat,
                         const char *name, const char *why, void **out,
                         char *msg, size_t msglen)
{
    char asked[32], used[32], cap[32];
    *out = NULL;
    if (msg != NULL && msglen > 0)
        snprintf(msg, msglen,
                 "device %d: out of memory allocating '%s' (%s, %s): %s in use of %s%s",
                 a->rank, name, ptdp_format_bytes((double)bytes, asked, sizeof asked),
                 ptdp_mem_category_name(cat),
                 ptdp_format_bytes((double)a->stats.current_total, used, sizeof used),
                 ptdp_format_bytes((double)a->stats.capacity, cap, sizeof cap), why);
    return PTDP_ENOMEM;
}

static int arena_alloc(ptdp_arena *a, size_t bytes, ptdp_mem_category cat, const char *name, void **out,
                       char *msg, size_t msglen, bool zero);

int ptdp_arena_alloc(ptdp_arena *a, size_t bytes, ptdp_mem_category cat,
                     const char *name, void **out, char *msg, size_t msglen)
{
    return arena_alloc(a, bytes, cat, name, out, msg, msglen, true);
}

int ptdp_arena_alloc_uninit(ptdp_arena *a, size_t bytes, ptdp_mem_category cat,
                            const char *name, void **out, char *msg, size_t msglen)
{
    return arena_alloc(a, bytes, cat, name, out, msg, msglen, false);
}

static int arena_alloc(ptdp_arena *a, size_t bytes, ptdp_mem_category cat, const char *name, void **out,
                       char *msg, size_t msglen, bool zero)
{
    if (name == NULL)
        name = "(unnamed)";
    if ((unsigned)cat >= PTDP_MEM_NCAT) {
        *out = NULL;
        if (msg != NULL && msglen > 0)
            snprintf(msg, msglen, "device %d: allocating '%s': bad memory category %d",
                     a->rank, name, (int)cat);
        return PTDP_EINVAL;
    }

    /* 1. The capacity: user bytes in use + bytes <= capacity. */
    ptdp_mem_stats *s = &a->stats;
    if (bytes > s->capacity - s->current_total)
        return out_of_memory(a, bytes, cat, name, " (--device-mem)", out, msg, msglen);

    /* 2. The span this block needs: header, red zone, user bytes rounded up
     *    to the alignment, red zone. */
    if (bytes > SIZE_MAX / 2)
        return out_of_memory(a, bytes, cat, name, "; the host has no such memory",
                             out, msg, msglen);
    size_t need = USER_OFFSET + ROUND_UP(bytes, ALIGN) + RED_ZONE;

    /* 3. First fit on the free list, else a new slab from the host. */
    block *b = a->free_list;
    while (b != NULL && b->span < need)
        b = b->next_free;
    if (b == NULL && (b = add_slab(a, need)) == NULL)
        return out_of_memory(a, bytes, cat, name, "; the host refused more memory",
                             out, msg, msglen);

    /* 4. Split: what is left behind the block becomes a free block of its own
     *    if it is worth one, else it stays in this block's trailing red zone. */
    if (b->span - need >= MIN_SPAN) {
        block *rest = new_header((unsigned char *)b + need, b->span - need, b, b->next);
        if (b->next != NULL)
            b->next->prev = rest;
        b->next = rest;
        b->span = need;
        free_list_push(a, rest);
    }
    free_list_remove(a, b);

    /* 5. Label the block, make exactly its user bytes addressable, zero them. */
    b->bytes = bytes;
    b->cat = cat;
    snprintf(b->name, sizeof b->name, "%s", name);
    unsigned char *user = user_bytes(b);
#ifndef PTDP_ASAN
    fill_red_zones(b);
#endif
    UNPOISON(user, bytes);
#ifdef PTDP_ASAN
    /* Under the sanitizers an uninitialised block holds all-ones bytes, a
     * NaN as a float or a double: a read before the first write shows up
     * as NaN in the results the equivalence tests compare. */
    memset(user, zero ? 0 : 0xFF, bytes);
#else
    if (zero)
        memset(user, 0, bytes);
#endif

    /* 6. Account: current and peak, per category and in total. */
    s->current[cat] += bytes;
    if (s->current[cat] > s->peak[cat])
        s->peak[cat] = s->current[cat];
    s->current_total += bytes;
    if (s->current_total > s->peak_total)
        s->peak_total = s->current_total;
    s->allocations++;

    *out = user;
    return 0;
}

/* ---- Free ------------------------------------------------------------------ */

/* A programming error: say what happened and stop (see the file comment). */
static void corrupted(const ptdp_arena *a, const void *p, const char *what, const char *name)
{
    fprintf(stderr, "ptdp: device %d: ptdp_arena_free(%p): %s%s%s%s\n",
            a->rank, p, what, name ? " '" : "", name ? name : "", name ? "'" : "");
    abort();
}

/* The header of user pointer p, or NULL if p points into none of a's
 * slabs at a place where a block's user bytes could start. */
static block *find_block(const ptdp_arena *a, void *p)
{
    uintptr_t u = (uintptr_t)p;
    for (const slab *c = a->slabs; c != NULL; c = c->next) {
        uintptr_t first = (uintptr_t)c + SLAB_HEAD + USER_OFFSET;
        if (u >= first && u < (uintptr_t)c + c->bytes && (u - first) % ALIGN == 0)
            return (block *)(u - USER_OFFSET);
    }
    return NULL;
}

void ptdp_arena_free(ptdp_arena *a, void *p)
{
    if (p == NULL)
        return;

    /* 1. Is p a live block of this arena? */
    block *b = find_block(a, p);
    if (b == NULL)
        corrupted(a, p, "not a pointer from this device's arena", NULL);
#ifdef PTDP_ASAN
    if (__asan_region_is_poisoned(b, sizeof *b) != NULL)   /* merged away */
        corrupted(a, p, "not a live block (double free?)", NULL);
#endif
    if (b->magic != BLOCK_MAGIC)
        corrupted(a, p, "not a live block (double free, or a header overwritten)", NULL);
    if (b->is_free)
        corrupted(a, p, "double free of", b->name);
#ifndef PTDP_ASAN
    if (!red_zones_intact(b))
        corrupted(a, p, "a write outside the bounds of", b->name);
#endif

    /* 2. Account. */
    ptdp_mem_stats *s = &a->stats;
    s->current[b->cat] -= b->bytes;
    s->current_total -= b->bytes;
    s->allocations--;

    /* 3. Poison the user bytes again: a later read is a use-after-free. */
    POISON(p, ROUND_UP(b->bytes, ALIGN));
    b->bytes = 0;

    /* 4. Coalesce with the next block, then with the previous one. */
    block *next = b->next;
    if (next != NULL && next->is_free) {
        free_list_remove(a, next);
        b->span += next->span;
        b->next = next->next;
        if (b->next != NULL)
            b->next->prev = b;
        next->magic = 0;
        POISON(next, sizeof *next);
    }
    block *prev = b->prev;
    if (prev != NULL && prev->is_free) {
        prev->span += b->span;
        prev->next = b->next;
        if (prev->next != NULL)
            prev->next->prev = prev;
        b->magic = 0;
        POISON(b, sizeof *b);
        return;                         /* prev is already on the free list */
    }
    free_list_push(a, b);
}

/* ---- Statistics ------------------------------------------------------------ */

void ptdp_arena_stats(const ptdp_arena *a, ptdp_mem_stats *out)
{
    *out = a->stats;
}

void ptdp_arena_reset_peaks(ptdp_arena *a)
{
    for (int c = 0; c < PTDP_MEM_NCAT; c++)
        a->stats.peak[c] = a->stats.current[c];
    a->stats.peak_total = a->stats.current_total;
}
