/*
 * comm.h — communicators, collectives and point-to-point messages.
 *
 * Devices share nothing but communicators.  A communicator is a group of
 * devices with ranks 0..size-1; the world communicator holds every device,
 * and ptdp_comm_split cuts it into groups (the DP, TP and PP groups later)
 * exactly as MPI_Comm_split does: same color = same group, ordered by key.
 *
 * A communicator is an interface (a table of operations, struct
 * ptdp_comm_ops in src/comm/comm_impl.h): the first backend runs devices as
 * threads of one process over shared memory (src/comm/shm/); a backend of
 * one process per device (MPI) implements the same table without touching
 * the modules above — comm_impl.h lists what it must do differently.
 *
 * Rules every backend keeps:
 *  - Reductions happen in a fixed order: the same call twice gives the same
 *    bits, and every member ends an all_reduce with bit-identical values.
 *  - Any count works, 0 and counts not divisible by the group size included.
 *    Chunked collectives (reduce_scatter, all_gather, scatter, gather) take
 *    the TOTAL count and give rank r the segment ptdp_share(count, size, r)
 *    (types.h): the first count % size ranks hold one element more.
 *  - In place: all_reduce and reduce accept send == recv; all_gather and
 *    reduce_scatter accept send == PTDP_IN_PLACE, meaning the rank's own
 *    segment already sits (or is wanted) at its offset inside recv.
 *  - Send/recv are blocking with rendezvous semantics: a send returns only
 *    once the matching recv has taken the data.  A wrong order deadlocks as
 *    it would on real links, and the watchdog names who waits for whom.
 *    Messages from one device to another with one tag arrive in order.
 *  - Every member of a group must call the same collective with the same
 *    count, dtype, op and root at the same point; otherwise each device's
 *    call (operation, count, file:line) is reported and the run fails.
 *  - A failed device makes every pending and later call on every device
 *    return PTDP_EABORTED instead of hanging.
 *
 * Byte accounting (per device, comm_stats in device.h), in the textbook
 * terms for S bytes on N devices:
 *    all_reduce (ring or shared memory)   2(N-1)/N * S sent and received
 *    reduce_scatter, all_gather           (N-1)/N * S
 *    broadcast (root) / reduce (leaves)   S per receiver/sender
 */
#ifndef PTDP_COMM_H
#define PTDP_COMM_H

#include <stddef.h>

#include "coll.h"
#include "types.h"

struct ptdp_device;
typedef struct ptdp_comm ptdp_comm;


#define PTDP_IN_PLACE ((const void *)1)

int ptdp_comm_rank(const ptdp_comm *c);
int ptdp_comm_size(const ptdp_comm *c);
const char *ptdp_comm_name(const ptdp_comm *c);   /* "world", "dp", "tp", "pp", … */
/* The world rank of this communicator's rank r. */
int ptdp_comm_world_rank(const ptdp_comm *c, int r);
struct ptdp_device *ptdp_comm_device(const ptdp_comm *c);

/* Collective over c: devices with the same color form one new group, ranked
 * by (key, old rank).  `name` labels the group in statistics ("dp", "tp"…).
 * color < 0 gives *out = NULL (the device joins no group). */
int  ptdp_comm_split_at(ptdp_comm *c, int color, int key, const char *name,
                        ptdp_comm **out, const char *file, int line);
/* Free a communicator made by split (the world is freed by ptdp_launch). */
void ptdp_comm_free(ptdp_comm *c);

/* The collectives.  Each returns 0 or a negative PTDP_E… code. */
int ptdp_barrier_at(ptdp_comm *c, const char *file, int line);
int ptdp_broadcast_at(ptdp_comm *c, void *buf, size_t count, ptdp_dtype t,
                      int root, const char *file, int line);
int ptdp_reduce_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                   ptdp_dtype t, ptdp_op op, int root, const char *file, int line);
int ptdp_all_reduce_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                       ptdp_dtype t, ptdp_op op, const char *file, int line);
/* As all_reduce, with an explicit algorithm for this call. */
int ptdp_all_reduce_algo_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                            ptdp_dtype t, ptdp_op op, ptdp_algo algo,
                            const char *file, int line);
/* recv holds `count` elements; rank r contributes its segment. */
int ptdp_all_gather_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                       ptdp_dtype t, const char *file, int line);
/* send holds `count` elements; rank r receives the reduced segment r. */
int ptdp_reduce_scatter_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                           ptdp_dtype t, ptdp_op op, const char *file, int line);
/* Root's recv gets every rank's segment (count = total). */
int ptdp_gather_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                   ptdp_dtype t, int root, const char *file, int line);
/* Rank r's recv gets segment r of root's send (count = total). */
int ptdp_scatter_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                    ptdp_dtype t, int root, const char *file, int line);
/* send and recv hold size * count elements; block j of send goes to rank j,
 * block i of recv comes from rank i. */
int ptdp_all_to_all_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                       ptdp_dtype t, const char *file, int line);
/* The same with a count per pair (MPI_Alltoallv): send_counts[j] elements
 * from send + send_displs[j] go to rank j; recv_counts[i] elements from
 * rank i land at recv + recv_displs[i] (displacements in elements; NULL
 * displacements mean packed in rank order).  recv_counts[i] must equal
 * rank i's send_counts[me] — every member checks the whole table and a
 * mismatch is reported with both call sites.  When only the senders know
 * the counts, exchange them first with ptdp_all_to_all_counts. */
int ptdp_all_to_allv_at(ptdp_comm *c, const void *send, const size_t *send_counts,
                        const size_t *send_displs, void *recv, const size_t *recv_counts,
                        const size_t *recv_displs, ptdp_dtype t, const char *file, int line);
/* recv_counts[i] = rank i's send_counts[me]: a fixed all_to_all of one
 * count per pair (8 bytes each), the first half of every dispatch. */
int ptdp_all_to_all_counts_at(ptdp_comm *c, const size_t *send_counts, size_t *recv_counts,
                              const char *file, int line);

/* Non-blocking collectives: start, then wait (stream.c).  The collective's
 * virtual time runs on the device's communication stream (clock.h) from
 * its start: it begins when every member's stream is free and its caller
 * has reached the start (the latest of them), lasts what the blocking call
 * costs, and the compute stream waits for its end only in ptdp_wait.  The
 * data moves at the start, exactly as the blocking call moves it (same
 * algorithm, same bits), but a caller must not use recv before
 * ptdp_wait, as on a GPU — and cannot: the start keeps the result aside
 * and fills recv with NaN (all bits set: NaN in every float type, -1 in
 * the integers) until ptdp_wait puts it back (stream.c), so a result read
 * too early spoils the run instead of silently passing.  Every member
 * starts the same collectives in the same order, as for the blocking ones. */
typedef struct {
    struct ptdp_device *dev;
    int active;              /* started and not yet waited for            */
    double start, end;       /* virtual time on the communication stream  */
    char name[48];           /* "all_reduce dp", for the trace            */
    struct ptdp_comm *comm;  /* the group that holds the result aside     */
    struct ptdp_held *held;  /* the result until ptdp_wait (stream.c)     */
} ptdp_request;

int ptdp_all_reduce_start_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                             ptdp_dtype t, ptdp_op op, ptdp_request *req,
                             const char *file, int line);
int ptdp_reduce_scatter_start_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                                 ptdp_dtype t, ptdp_op op, ptdp_request *req,
                                 const char *file, int line);
int ptdp_all_gather_start_at(ptdp_comm *c, const void *send, void *recv, size_t count,
                             ptdp_dtype t, ptdp_request *req, const char *file, int line);
/* The compute stream waits for req's end (nothing if it has passed it);
 * req becomes inactive.  An inactive req returns at once. */
int ptdp_wait(ptdp_request *req);

/* Blocking, rendezvous point-to-point.  dst/src are ranks in c. */
int ptdp_send_at(ptdp_comm *c, const void *buf, size_t count, ptdp_dtype t,
                 int dst, int tag, const char *file, int line);
int ptdp_recv_at(ptdp_comm *c, void *buf, size_t count, ptdp_dtype t,
                 int src, int tag, const char *file, int line);

/* The calls most code uses record the caller's file:line for reports. */
#define ptdp_comm_split(c, color, key, name, out) ptdp_comm_split_at(c, color, key, name, out, __FILE__, __LINE__)
#define ptdp_barrier(c)                         ptdp_barrier_at(c, __FILE__, __LINE__)
#define ptdp_broadcast(c, b, n, t, root)        ptdp_broadcast_at(c, b, n, t, root, __FILE__, __LINE__)
#define ptdp_reduce(c, s, r, n, t, op, root)    ptdp_reduce_at(c, s, r, n, t, op, root, __FILE__, __LINE__)
#define ptdp_all_reduce(c, s, r, n, t, op)      ptdp_all_reduce_at(c, s, r, n, t, op, __FILE__, __LINE__)
#define ptdp_all_reduce_algo(c, s, r, n, t, op, a) ptdp_all_reduce_algo_at(c, s, r, n, t, op, a, __FILE__, __LINE__)
#define ptdp_all_gather(c, s, r, n, t)          ptdp_all_gather_at(c, s, r, n, t, __FILE__, __LINE__)
#define ptdp_reduce_scatter(c, s, r, n, t, op)  ptdp_reduce_scatter_at(c, s, r, n, t, op, __FILE__, __LINE__)
#define ptdp_gather(c, s, r, n, t, root)        ptdp_gather_at(c, s, r, n, t, root, __FILE__, __LINE__)
#define ptdp_scatter(c, s, r, n, t, root)       ptdp_scatter_at(c, s, r, n, t, root, __FILE__, __LINE__)
#define ptdp_all_to_all(c, s, r, n, t)          ptdp_all_to_all_at(c, s, r, n, t, __FILE__, __LINE__)
#define ptdp_all_to_allv(c, s, sc, sd, r, rc, rd, t) \
    ptdp_all_to_allv_at(c, s, sc, sd, r, rc, rd, t, __FILE__, __LINE__)
#define ptdp_all_to_all_counts(c, sc, rc)       ptdp_all_to_all_counts_at(c, sc, rc, __FILE__, __LINE__)
#define ptdp_all_reduce_start(c, s, r, n, t, op, req)     ptdp_all_reduce_start_at(c, s, r, n, t, op, req, __FILE__, __LINE__)
#define ptdp_reduce_scatter_start(c, s, r, n, t, op, req) ptdp_reduce_scatter_start_at(c, s, r, n, t, op, req, __FILE__, __LINE__)
#define ptdp_all_gather_start(c, s, r, n, t, req) ptdp_all_gather_start_at(c, s, r, n, t, req, __FILE__, __LINE__)
#define ptdp_send(c, b, n, t, dst, tag)         ptdp_send_at(c, b, n, t, dst, tag, __FILE__, __LINE__)
#define ptdp_recv(c, b, n, t, src, tag)         ptdp_recv_at(c, b, n, t, src, tag, __FILE__, __LINE__)


#endif
