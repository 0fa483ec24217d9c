/*
 * shm.c — the shared-memory backend's face: a member's communicator,
 * split, and the operations table that names every algorithm.
 *
 * Devices are threads of one process, so a collective can read the other
 * members' buffers directly, as NCCL reads a peer GPU's memory over
 * NVLink.  This file sits on top of the backend's other files:
 *
 *     ptdp_shm_ops ──► meet           group.c       (post, barrier, read)
 *                  ├─► broadcast, reduce, gather,
 *                  │   scatter, all_to_all(v)  rooted.c
 *                  ├─► all_reduce     allreduce_naive.c / _ring.c / _shm.c
 *                  ├─► send, recv     p2p.c
 *                  └─► split, free    here
 *
 * Split is MPI_Comm_split: members of one color, ordered by (key, old
 * rank); the new rank 0 builds the group and the others pick it up after
 * a barrier.  Barrier and split move no bytes.
 */
#include <stdio.h>
#include <stdlib.h>

#include "comm/shm/shm.h"
#include "ptdp/error.h"

/* -------------------------------------------------- the communicator */

ptdp_comm *ptdp_shm_comm_create(struct shm_group *g, ptdp_device *dev, int rank, const char *name)
{
    ptdp_comm *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->ops = &ptdp_shm_ops;
    c->dev = dev;
    c->rank = rank;
    c->size = g->size;
    snprintf(c->name, sizeof c->name, "%s", name);
    c->world_rank = g->world_rank;
    c->backend = g;
    return c;
}

static void shm_free(ptdp_comm *c)
{
    ptdp_shm_group_release(shm_group_of(c));
    free(c);
}

/* ------------------------------------------------------------- split */

/* MPI_Comm_split: members of one color, ordered by (key, old rank).  The
 * new rank 0 builds the group; the others pick it up after a barrier. */
static int shm_split(ptdp_comm *c, const ptdp_call *const *calls, const char *name, ptdp_comm **out)
{
    const ptdp_call *mine = calls[c->rank];
    int members[PTDP_MAX_DEVICES], n = 0;
    if (mine->color >= 0) {
        for (int r = 0; r < c->size; r++) {
            if (calls[r]->color != mine->color)
                continue;
            int i = n++;                              /* insertion sort */
            while (i > 0 && calls[members[i - 1]]->key > calls[r]->key) {
                members[i] = members[i - 1];
                i--;
            }
            members[i] = r;
        }
    }
    int new_rank = -1;
    for (int i = 0; i < n; i++)
        if (members[i] == c->rank)
            new_rank = i;

    shm_member *me = &shm_group_of(c)->member[c->rank];
    me->new_group = NULL;
    int rc = 0;
    if (new_rank == 0) {
        int world[PTDP_MAX_DEVICES];
        for (int i = 0; i < n; i++)
            world[i] = c->world_rank[members[i]];
        me->new_group = ptdp_shm_group_create(n, world);
        if (!me->new_group)     /* fail, but still cross: the others wait */
            rc = ptdp_fail(c->dev, PTDP_ENOMEM, "comm_split '%s': out of host memory", name);
    }
    int crossed = ptdp_shm_barrier(c, mine);
    if (rc || crossed || new_rank < 0)
        return rc ? rc : crossed;
    struct shm_group *g = shm_group_of(c)->member[members[0]].new_group;
    if (!g)
        return PTDP_EABORTED;
    *out = ptdp_shm_comm_create(g, c->dev, new_rank, name);
    if (!*out) {
        ptdp_shm_group_release(g);
        return ptdp_fail(c->dev, PTDP_ENOMEM, "comm_split '%s': out of host memory", name);
    }
    return 0;
}

/* ---------------------------------------------- the table of operations */

const struct ptdp_comm_ops ptdp_shm_ops = {
    .backend = "threads",
    .meet = ptdp_shm_meet,
    .broadcast = ptdp_shm_broadcast,
    .reduce = ptdp_shm_reduce,
    .gather = ptdp_shm_gather,
    .scatter = ptdp_shm_scatter,
    .all_to_all = ptdp_shm_all_to_all,
    .all_to_allv = ptdp_shm_all_to_allv,
    .all_reduce = {
        [PTDP_ALGO_NAIVE] = ptdp_naive_all_reduce,
        [PTDP_ALGO_RING] = ptdp_ring_all_reduce,
        [PTDP_ALGO_SHM] = ptdp_shm_all_reduce,
    },
    .reduce_scatter = {
        [PTDP_ALGO_RING] = ptdp_ring_reduce_scatter,
        [PTDP_ALGO_SHM] = ptdp_shm_reduce_scatter,
    },
    .all_gather = {
        [PTDP_ALGO_RING] = ptdp_ring_all_gather,
        [PTDP_ALGO_SHM] = ptdp_shm_all_gather,
    },
    .split = shm_split,
    .send = ptdp_shm_send,
    .recv = ptdp_shm_recv,
    .free = shm_free,
};
