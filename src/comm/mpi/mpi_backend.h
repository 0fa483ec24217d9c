/*
 * mpi_backend.h — the MPI backend: one process per device (private to comm/).
 *
 * The idea: the communicator's table of operations (comm_impl.h) stays; what
 * is behind it changes.  Threads read each other's buffers; processes have
 * separate address spaces, so every byte that crosses between devices is a
 * message, and every algorithm is rewritten as messages in the SAME order of
 * arithmetic as the threads backend, so a run is bit-identical to it:
 *
 *   threads (comm/shm)                     processes (comm/mpi)
 *   ───────────────────────────────        ─────────────────────────────────
 *   meet: post my call, barrier           meet: all-gather the calls (a fixed
 *                                          -size "wire" form: no pointers)
 *   shm all_reduce: rank r reads slice r   all-to-all: slice m of my input to
 *     of every buffer, reduces in rank       rank m; reduce the N slices in rank
 *     order, writes it into every buffer     order (the same ptdp_reduce_many);
 *                                            all-gather the slices
 *   ring: neighbours' mailboxes            ring: Isend right, Irecv left
 *   p2p: per-pair post slot                Issend of [call | payload]: the
 *                                            sender's call, its virtual clock
 *                                            included, travels with the data
 *   wait: spin, sleep, watchdog            poll the requests against the same
 *                                            deadline; answer "what are you
 *                                            waiting in?" from other ranks
 *   failure: flag in shared memory         MPI_Abort(rank, message)
 *
 *        process 0                process 1               process 2
 *   ┌───────────────┐       ┌───────────────┐       ┌───────────────┐
 *   │ device 0      │       │ device 1      │       │ device 2      │
 *   │ arena, clock  │◄─MPI─►│ arena, clock  │◄─MPI─►│ arena, clock  │
 *   │ comm: world,  │       │ comm: world,  │       │ …             │
 *   │  dp, tp, pp   │       │  dp, tp, pp   │       │               │
 *   └───────────────┘       └───────────────┘       └───────────────┘
 *
 * Files, bottom up: mpi_wait.c (polling with a deadline, the watchdog's
 * report), mpi_group.c (calls on the wire, a group's buffer, meet),
 * mpi_rooted.c (the rooted collectives, all_to_all, the naive all-reduce),
 * mpi_coll.c (the all-reduce algorithms and their halves), mpi_p2p.c
 * (send, recv), mpi_comm.c (a group's communicator, split, the table),
 * mpi.c (MPI_Init; the launcher's processes backend: the one device of this
 * process, host merges, failure).
 */
#ifndef PTDP_MPI_BACKEND_H
#define PTDP_MPI_BACKEND_H

#include <mpi.h>

#include "comm/comm_impl.h"
#include "runtime/wait.h"

/* A call as it travels: ptdp_call without its pointers (meaningless in
 * another address space), the caller's file as a short string. */
typedef struct {
    int op, dtype, rop, root, tag, algo, color, key, line, in_place;
    unsigned long long seq, count, vsent, vrecv;
    double clock;
    char file[48];
} mpi_wire_call;

void ptdp_mpi_call_to_wire(const ptdp_call *k, mpi_wire_call *w);
/* file points into w (keep w alive); send and recv are NULL. */
void ptdp_mpi_call_from_wire(const mpi_wire_call *w, ptdp_call *k);

/* The backend's state of one group, behind ptdp_comm.backend. */
typedef struct {
    MPI_Comm coll;                  /* collectives and the ring's messages   */
    MPI_Comm p2p;                   /* ptdp_send / ptdp_recv                 */
    int world_rank[PTDP_MAX_DEVICES];
    mpi_wire_call wire[PTDP_MAX_DEVICES];   /* the last meeting's calls     */
    ptdp_call calls[PTDP_MAX_DEVICES];
    void *scratch;                  /* messages in and out, kept between calls */
    size_t scratch_bytes;
} mpi_group;

extern const struct ptdp_comm_ops ptdp_mpi_ops;

static inline mpi_group *mpi_group_of(const ptdp_comm *c)
{
    return (mpi_group *)c->backend;
}

/* A communicator over `comm` (taken over: freed with the communicator;
 * mpi_comm.c). */
ptdp_comm *ptdp_mpi_comm_create(MPI_Comm comm, ptdp_device *dev, const int *world_rank,
                                const char *name);
/* The group's scratch of at least `bytes`, or NULL (the device failed;
 * mpi_group.c). */
void *ptdp_mpi_scratch(ptdp_comm *c, size_t bytes);
/* All-gather every member's call (the table's meet; mpi_group.c). */
int ptdp_mpi_meet(ptdp_comm *c, const ptdp_call *mine, const ptdp_call **calls);

/* Wait for n requests: poll, answer other ranks' questions, and fail the
 * device with the watchdog's report if the deadline passes (mpi_wait.c). */
int  ptdp_mpi_wait(ptdp_device *dev, int n, MPI_Request *reqs, const ptdp_wait_why *why);
/* The same for any condition (a probe for a message). */
int  ptdp_mpi_wait_until(ptdp_device *dev, bool (*ready)(void *), void *arg, const ptdp_wait_why *why);
/* The description of a collective's wait (the watchdog's report). */
ptdp_wait_why ptdp_mpi_why(const ptdp_comm *c, const ptdp_call *mine);

/* The process-wide state of the waiting (mpi_wait.c): the watchdog, whether
 * to spin, the communicator other ranks ask "what are you doing?" on. */
void ptdp_mpi_wait_setup(MPI_Comm status, double watchdog_s, int spin);
/* This device returned: wait until every rank has, answering questions. */
int  ptdp_mpi_wait_finish(ptdp_device *dev);
/* A message count in bytes that MPI's int counts can carry, or fail. */
int  ptdp_mpi_count(ptdp_comm *c, size_t bytes, int *out);

/* The algorithms (mpi_coll.c) and the simple collectives (mpi_rooted.c). */
int ptdp_mpi_direct_all_reduce(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_mpi_direct_reduce_scatter(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_mpi_direct_all_gather(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_mpi_ring_all_reduce(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_mpi_ring_reduce_scatter(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_mpi_ring_all_gather(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_mpi_naive_all_reduce(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_mpi_library_all_reduce(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_mpi_reduce(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_mpi_broadcast(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_mpi_gather(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_mpi_scatter(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_mpi_all_to_all(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_mpi_all_to_allv(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);

/* Point to point (mpi_p2p.c). */
int ptdp_mpi_send(ptdp_comm *c, const ptdp_call *mine, ptdp_traffic *t);
int ptdp_mpi_recv(ptdp_comm *c, const ptdp_call *mine, ptdp_call *sender, ptdp_traffic *t);

#endif
