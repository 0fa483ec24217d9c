/*
 * shm.h — the shared-memory backend: devices are threads of one process
 * (private to comm/).
 *
 * A collective can read the other members' buffers directly, as NCCL reads
 * a peer GPU's memory over NVLink:
 *
 *   group.c            a group's shared memory; meeting: post, barrier
 *   rooted.c           broadcast, reduce, gather, scatter, all_to_all(v)
 *   allreduce_shm.c    the default all-reduce: each member reduces its 1/N
 *                      slice and pushes it into every member's buffer
 *   allreduce_ring.c   the textbook ring: reduce-scatter, then all-gather
 *   allreduce_naive.c  reduce to rank 0, then broadcast
 *   p2p.c              rendezvous send and recv through per-pair mailboxes
 *   shm.c              a member's communicator, split; the operations table
 *   launch.c (comm/)   starts N threads sharing one world group
 */
#ifndef PTDP_SHM_H
#define PTDP_SHM_H

#include <stdalign.h>
#include <stdatomic.h>

#include "comm/comm_impl.h"
#include "runtime/wait.h"

/* What one member shares with its group.  Written by its owner (call,
 * ring mailbox data) and read by the others after a barrier or a flag. */
typedef struct {
    alignas(64) ptdp_call call[2];  /* its posted call, double-buffered by
                                       call parity: a fast member may post
                                       call k+1 while a slow one still
                                       reads call k, never call k+2        */
    /* Ring mailbox: the owner posts "here is my chunk" (data, then the
     * step number in `posted`); its right neighbour answers "taken". */
    alignas(64) atomic_ullong posted;
    const void *data;
    alignas(64) atomic_ullong taken;
    struct shm_group *new_group;    /* split: the group this member builds,
                                       read by the others after a barrier */
    /* Owner-only state. */
    alignas(64) unsigned long long ring_step;
    void *scratch;                  /* ring reduce-scatter partial sums    */
    size_t scratch_bytes;
} shm_member;

/* A pending send from src to dst: EMPTY → POSTED (sender) → CLAIMED →
 * DONE (receiver) → EMPTY (sender). */
enum { SHM_POST_EMPTY = 0, SHM_POST_POSTED, SHM_POST_CLAIMED, SHM_POST_DONE };
typedef struct {
    alignas(64) atomic_int state;
    ptdp_call call;                 /* the send, valid while POSTED        */
} shm_post;

struct shm_group {
    int size;
    atomic_int refs;                /* members still holding a comm        */
    int world_rank[PTDP_MAX_DEVICES];
    ptdp_barrier barrier;
    shm_member *member;             /* size entries                        */
    shm_post *post;                 /* size * size: post[dst * size + src] */
};

extern const struct ptdp_comm_ops ptdp_shm_ops;

/* A group of the given world ranks (group.c). */
struct shm_group *ptdp_shm_group_create(int size, const int *world_rank);
/* Drop one member's reference; the last one frees the group. */
void ptdp_shm_group_release(struct shm_group *g);
/* The wait description for a collective on c (the watchdog's report). */
ptdp_wait_why ptdp_shm_why(const ptdp_comm *c, const ptdp_call *mine);
/* Cross the group's barrier during a collective. */
int ptdp_shm_barrier(ptdp_comm *c, const ptdp_call *mine);
/* Post my call and read everyone's (the table's meet). */
int ptdp_shm_meet(ptdp_comm *c, const ptdp_call *mine, const ptdp_call **calls);

/* Each member's handle on a group (shm.c). */
ptdp_comm *ptdp_shm_comm_create(struct shm_group *g, ptdp_device *dev, int rank, const char *name);

/* The algorithms (allreduce_naive.c, allreduce_ring.c, allreduce_shm.c). */
int ptdp_naive_all_reduce(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_ring_all_reduce(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_ring_reduce_scatter(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_ring_all_gather(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_shm_all_reduce(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_shm_reduce_scatter(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_shm_all_gather(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
/* The simple collectives (rooted.c); reduce and broadcast are also the two
 * halves of the naive all_reduce. */
int ptdp_shm_reduce(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_shm_broadcast(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_shm_gather(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_shm_scatter(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_shm_all_to_all(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);
int ptdp_shm_all_to_allv(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t);

/* Rendezvous send and recv (p2p.c). */
int ptdp_shm_send(ptdp_comm *c, const ptdp_call *mine, ptdp_traffic *t);
int ptdp_shm_recv(ptdp_comm *c, const ptdp_call *mine, ptdp_call *sender, ptdp_traffic *t);

/* The group behind communicator c. */
static inline struct shm_group *shm_group_of(const ptdp_comm *c)
{
    return (struct shm_group *)c->backend;
}

#endif
