/*
 * lesson.h — lesson 01: the functions you write in exercise.c, which the
 * check calls.
 */
#ifndef LESSON_01_H
#define LESSON_01_H

#include <stddef.h>

#include "ptdp/comm.h"
#include "ptdp/device.h"

/* One step of the ring: send `nout` reals from `out` to the right neighbour
 * (rank + 1) and receive `nin` reals from the left neighbour (rank - 1)
 * into `in`, with the blocking ptdp_send / ptdp_recv, in an order that
 * cannot deadlock.  Needs at least 2 devices.  Returns 0 or a PTDP_E… code. */
int lesson_ring_exchange(ptdp_comm *comm, const ptdp_real *out, size_t nout,
                         ptdp_real *in, size_t nin, int tag);

/* Sum `count` reals of buf over every device of comm, in place, around the
 * ring: reduce-scatter, then all-gather, with lesson_ring_exchange only.
 * Returns 0 or a PTDP_E… code. */
int lesson_ring_all_reduce(ptdp_device *dev, ptdp_comm *comm, ptdp_real *buf, size_t count);

/* The check watches the ring's messages.  Your ptdp_send and ptdp_recv
 * (here and in exercise.c) go through lesson_send_at and lesson_recv_at
 * (check.c), which note which segment of the buffer each message carries, or
 * lands in, and what that segment holds, and then call the library's
 * ptdp_send_at / ptdp_recv_at with your arguments unchanged: a wrong sum can
 * then be explained step by step ("at all-gather step 1 rank 2 passed on
 * segment 0, but segment 1 had just arrived").  Nothing else changes. */
int lesson_send_at(ptdp_comm *comm, const void *buf, size_t count, ptdp_dtype t,
                   int dst, int tag, const char *file, int line);
int lesson_recv_at(ptdp_comm *comm, void *buf, size_t count, ptdp_dtype t,
                   int src, int tag, const char *file, int line);
#undef ptdp_send
#undef ptdp_recv
#define ptdp_send(c, b, n, t, dst, tag) lesson_send_at(c, b, n, t, dst, tag, __FILE__, __LINE__)
#define ptdp_recv(c, b, n, t, src, tag) lesson_recv_at(c, b, n, t, src, tag, __FILE__, __LINE__)

#endif
