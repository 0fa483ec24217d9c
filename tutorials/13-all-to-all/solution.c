/*
 * solution.c — lesson 13: the all-to-all from send and recv, and Ulysses'
 * re-layout of q, k and v.
 *
 * README.md explains the idea; exercise.c is this file with blanks.
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
    memcpy(recv + (size_t)r * block, send + (size_t)r * block, block * sizeof *recv);

    for (int s = 1; s < n && rc == 0; s++) {
        /* Blank 2: the two peers of step s. */
        int to = mod(r + s, n), from = mod(r - s, n);
        /* Blank 3: a send returns only once its receiver has the data, so
         * if every rank sent first every rank would wait.  The first s
         * ranks receive first: their `from` is across the ring's end, so
         * every cycle of this shift holds one of them and no cycle of
         * waiting sends can close. */
        if (r < s) {
            rc = ptdp_recv(comm, recv + (size_t)from * block, block, PTDP_REAL, from, s);
            if (rc == 0)
                rc = ptdp_send(comm, send + (size_t)to * block, block, PTDP_REAL, to, s);
        } else {
            rc = ptdp_send(comm, send + (size_t)to * block, block, PTDP_REAL, to, s);
            if (rc == 0)
                rc = ptdp_recv(comm, recv + (size_t)from * block, block, PTDP_REAL, from, s);
        }
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

    /* Blank 4: block j = my Tl rows, the columns of rank j's heads. */
    for (int j = 0; j < n; j++)
        copy_rows(packed + j * block, Wl, x + (size_t)j * Wl, W, Tl, Wl);
    int rc = ptdp_all_to_all(comm, packed, arrived, block, PTDP_REAL);
    if (rc != 0)
        return rc;
    /* Blank 5: block i = rank i's Tl rows (positions i Tl ..) of my heads. */
    for (int i = 0; i < n; i++)
        copy_rows(out + (size_t)i * Tl * Wl, Wl, arrived + i * block, Wl, Tl, Wl);
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
    for (int j = 0; j < n; j++)
        copy_rows(packed + j * block, Wl, x + (size_t)j * Tl * Wl, Wl, Tl, Wl);
    int rc = ptdp_all_to_all(comm, packed, arrived, block, PTDP_REAL);
    if (rc != 0)
        return rc;
    /* Blank 7: block i = my positions of rank i's heads: columns i Wl .. */
    for (int i = 0; i < n; i++)
        copy_rows(out + (size_t)i * Wl, W, arrived + i * block, Wl, Tl, Wl);
    return PTDP_OK;
}
