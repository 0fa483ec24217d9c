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

#endif
