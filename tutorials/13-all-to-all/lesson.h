/*
 * lesson.h — lesson 13: the functions you write in exercise.c, which the
 * check calls.
 */
#ifndef LESSON_13_H
#define LESSON_13_H

#include <stddef.h>

#include "ptdp/comm.h"
#include "ptdp/device.h"

/* The all-to-all from send and recv.  send holds N blocks of `block`
 * reals, block j for rank j; afterwards block i of recv holds rank i's
 * block for me.  My own block is a copy; the N-1 others travel in N-1
 * steps, at step s to rank (r + s) mod N and from rank (r - s) mod N, with
 * the blocking ptdp_send / ptdp_recv in an order that cannot deadlock.
 * Returns 0 or a PTDP_E… code. */
int lesson_all_to_all(ptdp_comm *comm, const ptdp_real *send, ptdp_real *recv, size_t block);

/* Ulysses' two re-layouts of a [rows, nh heads x hd] activation over the N
 * ranks of comm (nh divisible by N, T by N; row-major, head h in columns
 * h hd .. (h+1) hd):
 *
 *   heads_from_sequence  x: my T/N positions (rank r holds positions
 *                        r T/N ..), every head  ->  out: all T positions,
 *                        my nh/N heads (rank r: heads r nh/N ..)
 *   sequence_from_heads  the way back
 *
 * Each packs N blocks, calls the library's ptdp_all_to_all once and
 * unpacks.  `scratch` holds 2 T/N nh hd reals.  Returns 0 or a PTDP_E…
 * code. */
int lesson_heads_from_sequence(ptdp_comm *comm, const ptdp_real *x, ptdp_real *out, int T, int nh, int hd,
                               ptdp_real *scratch);
int lesson_sequence_from_heads(ptdp_comm *comm, const ptdp_real *x, ptdp_real *out, int T, int nh, int hd,
                               ptdp_real *scratch);

#endif
