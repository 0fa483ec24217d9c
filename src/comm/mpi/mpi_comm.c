/*
 * mpi_comm.c — the MPI backend's face: a group's communicator, split, and
 * the operations table that names every algorithm.
 *
 *     ptdp_mpi_ops ──► meet              mpi_group.c  (all-gather the calls)
 *                  ├─► broadcast, reduce, gather,
 *                  │   scatter, all_to_all(v),
 *                  │   naive all_reduce  mpi_rooted.c
 *                  ├─► the all-reduces   mpi_coll.c   (ring, direct, MPI's own)
 *                  ├─► send, recv        mpi_p2p.c
 *                  └─► split, free       here
 *
 * A communicator owns its group: two MPI communicators over the same
 * processes (collectives, and point to point), the world ranks of its
 * members, and a message buffer kept between calls.
 */
#include <stdio.h>
#include <stdlib.h>

#include "comm/mpi/mpi_backend.h"
#include "ptdp/error.h"
#include "ptdp/tensor.h"

/* -------------------------------------------------- the communicator */

ptdp_comm *ptdp_mpi_comm_create(MPI_Comm comm, ptdp_device *dev, const int *world_rank,
                                const char *name)
{
    ptdp_comm *c = calloc(1, sizeof *c);
    mpi_group *g = calloc(1, sizeof *g);
    if (!c || !g) {
        free(c);
        free(g);
        return NULL;
    }
    g->coll = comm;
    MPI_Comm_dup(comm, &g->p2p);
    MPI_Comm_rank(comm, &c->rank);
    MPI_Comm_size(comm, &c->size);
    ptdp_copy(g->world_rank, world_rank, (size_t)c->size * sizeof *world_rank);
    c->ops = &ptdp_mpi_ops;
    c->dev = dev;
    snprintf(c->name, sizeof c->name, "%s", name);
    c->world_rank = g->world_rank;
    c->backend = g;
    return c;
}

static void mpi_free(ptdp_comm *c)
{
    mpi_group *g = mpi_group_of(c);
    MPI_Comm_free(&g->p2p);
    MPI_Comm_free(&g->coll);
    free(g->scratch);
    free(g);
    free(c);
}

/* ------------------------------------------------------------- split */

/* MPI_Comm_split orders by (key, old rank), exactly ptdp's rule; the world
 * ranks of the new group come from the gathered calls in that order. */
static int mpi_split(ptdp_comm *c, const ptdp_call *const *calls, const char *name, ptdp_comm **out)
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
    MPI_Comm nc;
    MPI_Comm_split(mpi_group_of(c)->coll, mine->color >= 0 ? mine->color : MPI_UNDEFINED, mine->key, &nc);
    if (mine->color < 0)
        return 0;
    int world[PTDP_MAX_DEVICES];
    for (int i = 0; i < n; i++)
        world[i] = c->world_rank[members[i]];
    *out = ptdp_mpi_comm_create(nc, c->dev, world, name);
    if (!*out) {
        MPI_Comm_free(&nc);
        return ptdp_fail(c->dev, PTDP_ENOMEM, "comm_split '%s': out of host memory", name);
    }
    return 0;
}

/* ---------------------------------------------- the table of operations */

const struct ptdp_comm_ops ptdp_mpi_ops = {
    .backend = "mpi",
    .meet = ptdp_mpi_meet,
    .broadcast = ptdp_mpi_broadcast,
    .reduce = ptdp_mpi_reduce,
    .gather = ptdp_mpi_gather,
    .scatter = ptdp_mpi_scatter,
    .all_to_all = ptdp_mpi_all_to_all,
    .all_to_allv = ptdp_mpi_all_to_allv,
    .all_reduce = {
        [PTDP_ALGO_NAIVE] = ptdp_mpi_naive_all_reduce,
        [PTDP_ALGO_RING] = ptdp_mpi_ring_all_reduce,
        [PTDP_ALGO_SHM] = ptdp_mpi_direct_all_reduce,
        [PTDP_ALGO_MPI] = ptdp_mpi_library_all_reduce,
    },
    .reduce_scatter = {
        [PTDP_ALGO_RING] = ptdp_mpi_ring_reduce_scatter,
        [PTDP_ALGO_SHM] = ptdp_mpi_direct_reduce_scatter,
    },
    .all_gather = {
        [PTDP_ALGO_RING] = ptdp_mpi_ring_all_gather,
        [PTDP_ALGO_SHM] = ptdp_mpi_direct_all_gather,
    },
    .split = mpi_split,
    .send = ptdp_mpi_send,
    .recv = ptdp_mpi_recv,
    .free = mpi_free,
};
