/*
 * exercise.c — lesson 13: write the all-to-all from send and recv, and
 * Ulysses' re-layout of q, k and v.
 *
 * Replace each PTDP_BLANK(...) line with your code, then run the check:
 *     meson setup build-student -Dexercises=student      (once)
 *     meson test -C build-student --suite tutorial-13 -v
 * README.md explains the idea; solution.c is the answer (try first).
 *
 * The all-to-all: every rank has a block for every rank.  N = 3:
 *
 *            send (block for rank 0 1 2)        recv (block from rank 0 1 2)
 *   rank 0:  a0 a1 a2                   ──►     a0 b0 c0
 *   rank 1:  b0 b1 b2                           a1 b1 c1
 *   rank 2:  c0 c1 c2                           a2 b2 c2      (a transpose)
 *
 * Pairwise exchange: my own block is a copy; at step s = 1 .. N-1 every
 * rank sends to (r + s) mod N and receives from (r - s) mod N — a shift of
 * the ring by s, each link used once per step: (N-1) blocks sent per rank.
 *
 * Ulysses (DeepSpeed-Ulysses, Megatron's --cp-comm-type a2a): attention
 * needs every position of a head, and heads are independent.  So trade
 * the sequence split for a head split: an all-to-all turns [T/N positions,
 * all nh heads] into [all T positions, nh/N heads], attention runs on
 * whole sequences, and a second all-to-all turns its output back.
 */
#include "blank.h"
#include "lesson.h"

#include <string.h>

#include "ptdp/comm.h"
#include "ptdp/error.h"

static int mod(int a, int n)
{
    return ((a % n) + n) % n;
}

int lesson_all_to_all(ptdp_comm *comm, const ptdp_real *send, ptdp_real *recv, size_t block)
{
    int r = ptdp_comm_rank(comm), n = ptdp_comm_size(comm);
    int rc = PTDP_OK;

    /* Blank 1: my own block never travels. */
    PTDP_BLANK(1, "copy your own block (block r of send) into block r of recv");

    for (int s = 1; s < n && rc == 0; s++) {
        int to, from;
        /* Blank 2: the two peers of step s: the ring shifted by s. */
        PTDP_BLANK(2, "set `to` (the rank you send to at step s) and `from` (the rank you receive from)");
        /* Blank 3: a send returns only once its receiver has the data, so
         * if every rank sent first every rank would wait.  Which ranks
         * must receive first so that no cycle of waiting sends closes?
         * (Follow one cycle of the shift by s: where does it cross the
         * ring's end?)  Use tag s. */
        PTDP_BLANK(3, "send block `to` to rank `to` and receive rank `from`'s block into block `from`, "
                      "in an order that cannot deadlock");
    }
    return rc;
}

/* Copy `rows` rows of `width` reals from src (row stride src_w) to dst
 * (row stride dst_w). */
static void copy_rows(ptdp_real *dst, int dst_w, const ptdp_real *src, int src_w, int rows, int width)
{
    for (int t = 0; t < rows; t++)
        memcpy(dst + (size_t)t * dst_w, src + (size_t)t * src_w, (size_t)width * sizeof *dst);
}

int lesson_heads_from_sequence(ptdp_comm *comm, const ptdp_real *x, ptdp_real *out, int T, int nh, int hd,
                               ptdp_real *scratch)
{
    int n = ptdp_comm_size(comm);
    const int Tl = T / n, W = nh * hd, Wl = W / n;     /* my rows; my heads' columns */
    const size_t block = (size_t)Tl * Wl;
    ptdp_real *packed = scratch, *arrived = scratch + (size_t)n * block;

    /* Blank 4: block j = my Tl rows, the columns of rank j's heads
     * (copy_rows does one block). */
    PTDP_BLANK(4, "pack block j of `packed`: your Tl rows of x, the Wl columns of rank j's heads");
    int rc = ptdp_all_to_all(comm, packed, arrived, block, PTDP_REAL);
    if (rc != 0)
        return rc;
    /* Blank 5: block i = rank i's Tl rows (positions i Tl ..) of my heads. */
    PTDP_BLANK(5, "unpack block i of `arrived` into out: rank i's positions, your heads");
    return PTDP_OK;
}

int lesson_sequence_from_heads(ptdp_comm *comm, const ptdp_real *x, ptdp_real *out, int T, int nh, int hd,
                               ptdp_real *scratch)
{
    int n = ptdp_comm_size(comm);
    const int Tl = T / n, W = nh * hd, Wl = W / n;
    const size_t block = (size_t)Tl * Wl;
    ptdp_real *packed = scratch, *arrived = scratch + (size_t)n * block;

    /* Blank 6: block j = rank j's positions (rows j Tl ..) of my heads. */
    PTDP_BLANK(6, "pack block j of `packed`: rank j's Tl positions of your heads");
    int rc = ptdp_all_to_all(comm, packed, arrived, block, PTDP_REAL);
    if (rc != 0)
        return rc;
    /* Blank 7: block i = my positions of rank i's heads: columns i Wl .. */
    PTDP_BLANK(7, "unpack block i of `arrived` into out: your positions, the columns of rank i's heads");
    return PTDP_OK;
}
