/*
 * comm_impl.h — what a communicator is inside (private to the library).
 *
 * Two layers:
 *
 *   comm.c        the public calls: check the arguments, meet the group,
 *                 check that every member called the same thing, run the
 *                 backend's operation, then account bytes, advance the
 *                 virtual clock and record a trace event.
 *        │ struct ptdp_comm_ops (a table of functions)
 *        ▼
 *   backend       moves the bytes.  The first backend runs devices as
 *                 threads over shared memory (comm/shm/: group.c, rooted.c, p2p.c,
 *                 allreduce_*.c, shm.c); a backend of one process per device (MPI)
 *                 fills the same table.  Nothing outside comm/ includes a
 *                 backend's header; nothing outside the library includes
 *                 this one.
 *
 * Every collective starts the same way: each member posts a description of
 * its call (a ptdp_call: operation, count, type, root, file:line, virtual
 * time, buffers), and ops->meet() returns once all members have posted,
 * with a pointer to each member's call.  That one step gives mismatch
 * detection, the virtual start time (the latest member's clock) and, in
 * shared memory, each member's buffer addresses.
 *
 * What a backend of one process per device (MPI, comm/mpi/) does
 * differently — the table stays, what is behind it changes:
 *
 *   meet       the calls are not in shared memory: all-gather the members'
 *              ptdp_call descriptors (fixed size; file names as short
 *              strings) so comm.c can still check agreement and take the
 *              latest clock.  The buffer pointers in them are meaningless
 *              in another address space and must never be dereferenced.
 *   algorithms each ptdp_coll_fn moves data with messages (the ring over
 *              point-to-point, or the library's MPI_Allreduce for speed);
 *              a fixed order of reduction keeps the bits of the threads
 *              backend (comm.h's rule: the same call gives the same bits).
 *   send/recv  the sender's ptdp_call travels with the payload, so the
 *              receiver learns the sender's virtual clock (comm.c's arrival
 *              time) and can report a count or type mismatch.
 *   split      colors and keys come from the gathered calls, as here.
 *   waiting    non-blocking calls polled against a deadline, so the
 *              watchdog can still report who waits for whom (runtime/).
 *   failure    a failing device cannot raise a flag in its peers' memory:
 *              it ends the job (MPI_Abort with its rank and message).
 *   launch     mpirun starts the processes; ptdp_launch's shared set-up
 *              (comm/launch.c) makes the one device this process owns, with
 *              the world communicator over MPI_COMM_WORLD (the launcher's
 *              two backends: comm/launch_impl.h).
 *   state      checkpoints: the threads copy their shards into one host
 *              state (train/state.c, state.h); processes have no shared
 *              host, so each process's host holds its own device's shards
 *              and ptdp_host_merge (launch.h) combines the hosts' copies;
 *              loading reads the file on every rank.
 */
#ifndef PTDP_COMM_IMPL_H
#define PTDP_COMM_IMPL_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "ptdp/comm.h"
#include "ptdp/device.h"

/* One member's call, as posted to the group. */
typedef struct {
    ptdp_coll op;
    unsigned long long seq;   /* collectives made on this communicator     */
    size_t count;
    ptdp_dtype dtype;
    ptdp_op rop;              /* reduction, where the operation reduces    */
    int root;                 /* rooted operations; p2p: the peer          */
    int tag;                  /* p2p                                       */
    ptdp_algo algo;           /* all_reduce, reduce_scatter, all_gather    */
    int color, key;           /* split                                     */
    const char *file;
    int line;
    double clock;             /* the caller's virtual time at the call     */
    const void *send;         /* PTDP_IN_PLACE resolved: always the input */
    void *recv;
    int in_place;             /* all_gather/reduce_scatter: send was
                                 PTDP_IN_PLACE (input and output in recv)  */
    /* all_to_allv: the count and displacement tables (size entries, in
     * elements; displacements resolved, never NULL after the check), and
     * the bytes this member sends to and receives from the others — the
     * only part that travels to another process (the cost model's S). */
    const size_t *scounts, *sdispls, *rcounts, *rdispls;
    unsigned long long vsent, vrecv;
} ptdp_call;

/* Bytes this device moved in one operation, counted by the algorithm as
 * it moves them: a byte is sent by the device whose buffer it leaves and
 * received by the device whose buffer it enters. */
typedef struct {
    double sent, recv;
} ptdp_traffic;

/* A collective's data movement, given every member's call. */
typedef int (*ptdp_coll_fn)(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);

struct ptdp_comm_ops {
    const char *backend;
    /* Post `mine`, wait for every member, point calls[i] at member i's call. */
    int (*meet)(ptdp_comm *c, const ptdp_call *mine, const ptdp_call **calls);
    ptdp_coll_fn broadcast, reduce, gather, scatter, all_to_all, all_to_allv;
    ptdp_coll_fn all_reduce[PTDP_ALGO_COUNT];     /* by algorithm         */
    ptdp_coll_fn reduce_scatter[PTDP_ALGO_COUNT];
    ptdp_coll_fn all_gather[PTDP_ALGO_COUNT];
    /* After meet: make this member's new communicator (NULL if color < 0). */
    int (*split)(ptdp_comm *c, const ptdp_call *const *calls, const char *name, ptdp_comm **out);
    /* Blocking rendezvous.  recv copies the matching send's call into
     * *sender; on a count or type mismatch it returns PTDP_EMISMATCH
     * without taking the data. */
    int (*send)(ptdp_comm *c, const ptdp_call *mine, ptdp_traffic *t);
    int (*recv)(ptdp_comm *c, const ptdp_call *mine, ptdp_call *sender, ptdp_traffic *t);
    void (*free)(ptdp_comm *c);
};

struct ptdp_comm {
    const struct ptdp_comm_ops *ops;
    ptdp_device *dev;
    int rank, size;
    char name[16];
    const int *world_rank;          /* world rank of each member           */
    int nodes;                      /* nodes the members span under the
                                       device's profile (comm.c counts them
                                       at the first collective); 0 = not yet */
    unsigned long long ncalls;      /* collectives called so far           */
    void *backend;                  /* the backend's state of this group:
                                       struct shm_group (comm/shm/shm.h)   */
    struct ptdp_held *held;         /* results of started collectives not
                                       yet waited for (stream.c)           */
};

/* The checks of check.c.  Each failing check fails the device. */
/* Arguments: resolves PTDP_IN_PLACE into call->send / call->in_place. */
int  ptdp_check_call(ptdp_comm *c, ptdp_call *call, const void *send);
/* all_to_allv's tables before the call is checked: present, their sums
 * within size_t; fill the packed displacements asked for (non-NULL), the
 * total count and the bytes to and from the others. */
int  ptdp_check_tables(ptdp_comm *c, ptdp_call *call, size_t *packed_send, size_t *packed_recv);
/* After the meeting, on a backend that shares memory: does every member's
 * send count for every other member equal what that member expects?  The
 * same verdict on every member (they all read the same tables). */
int  ptdp_check_v_agreement(ptdp_comm *c, const ptdp_call *const *calls);
/* Fail the device: rank i (call `from`) sends `sends` elements to rank j
 * (call `to`), which expects `expects` — both call sites named.  For the
 * backends that check their own row (MPI) as for the shared table. */
int  ptdp_fail_v_mismatch(ptdp_comm *c, unsigned long long seq, int i, const ptdp_call *from,
                          unsigned long long sends, int j, const ptdp_call *to, unsigned long long expects);
int  ptdp_check_peer(ptdp_comm *c, ptdp_call *call, int peer);
/* After meet: every member made the same call, or PTDP_EMISMATCH. */
int  ptdp_check_agreement(ptdp_comm *c, const ptdp_call *const *calls);
/* "all_reduce count=1024 f32 op=sum algo=shm at mlp.c:88" */
void ptdp_describe_call(const ptdp_call *call, char *buf, size_t len);
/* Fail the device with PTDP_EINVAL: "ptdp_<op> at file:line (group …): …" */
int  ptdp_bad_call(ptdp_comm *c, const ptdp_call *call, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* The communication stream (stream.c).  When a collective started on it
 * may begin on this device: its caller's time or the stream's, the later. */
double ptdp_stream_ready(const ptdp_device *dev);
/* A collective on the stream from start to start + cost: the stream's
 * clock, the request, the trace's second track. */
void ptdp_stream_record(ptdp_device *dev, ptdp_request *req, const char *name, double start,
                        double cost, double bytes, double wall_start, double wall_end);
/* The stream's part of that alone: its clock and the trace (an
 * overlapped pair's collectives, pair.c, have no request). */
void ptdp_stream_charge(ptdp_device *dev, const char *name, double start, double cost, double bytes,
                        double wall_start, double wall_end);
/* Keep the started call's result aside and poison recv until ptdp_wait;
 * ptdp_stream_release frees what no wait took back (a run that failed). */
void ptdp_stream_hold(ptdp_comm *c, const ptdp_call *k, ptdp_request *req);
void ptdp_stream_release(ptdp_comm *c);

/* An overlapped pair (pair.c).  Is this device's call marked
 * overlappable; does it run on the stream (marked, inside a pair)?  Its
 * clock at the meeting then (the stream's, from the pair's beginning),
 * and the charge once the start is known (stream, trace, the pair's
 * record).  A marked call outside a pair adds its cost to pairable_s. */
bool   ptdp_pair_marked(const ptdp_device *dev);
bool   ptdp_pair_overlaps(const ptdp_device *dev);
double ptdp_pair_ready(const ptdp_device *dev);
void   ptdp_pair_charge(ptdp_device *dev, const char *name, double start, double cost, double bytes,
                        double wall_start, double wall_end);

/* ------------------------------------------- element-wise reductions */

/* memcpy that accepts n == 0 with NULL pointers and dst == src. */
static inline void ptdp_copy(void *dst, const void *src, size_t n)
{
    if (n > 0 && dst != src)
        memcpy(dst, src, n);
}

/* out[i] = a[i] op b[i].  out may be a (then it accumulates), never b. */
void ptdp_reduce2(void *out, const void *a, const void *b, size_t n, ptdp_dtype t, ptdp_op op);
/* out[o] = in[0] op in[1] op … op in[k-1] for every o < nout, left to
 * right, AVG divided by k.  An output may be one of the inputs.  Works
 * tile by tile so the running result stays in L1: every input is read
 * once and every output written once. */
void ptdp_reduce_many(void *const *out, int nout, const void *const *in, int k, size_t n,
                      ptdp_dtype t, ptdp_op op);
/* out[i] = in[i] / k for AVG (the last step of an average). */
void ptdp_divide(void *buf, size_t n, ptdp_dtype t, int k);

#endif
