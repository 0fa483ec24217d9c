/*
 * mpi_comm.c — the MPI backend's groups, meeting, split and rooted
 * collectives.
 *
 * A group is two MPI communicators over the same processes: one for the
 * collectives (and the ring's messages), one for ptdp_send/ptdp_recv, so a
 * pipeline's message with tag 0 can never be taken for a ring step's.
 *
 * Meeting is an all-gather of every member's call in its wire form (no
 * pointers: another process's addresses mean nothing here).  comm.c then
 * checks agreement and takes the latest virtual clock exactly as with
 * threads:
 *
 *      rank 0: all_reduce n=4096 at dp.c:88 t=1.2 ms ┐
 *      rank 1: all_reduce n=4096 at dp.c:88 t=1.5 ms ├─ MPI_Iallgather ─► every rank
 *      rank 2: all_reduce n=4096 at dp.c:88 t=1.1 ms ┘   holds all three
 *
 * The rooted collectives move whole buffers; only `reduce` computes, and it
 * does so at the root in rank order with the same ptdp_reduce_many the
 * threads use, so its bits are theirs.  Traffic is counted by the threads
 * backend's rules (shm/rooted.c), so the byte reports agree too:
 *
 *     broadcast    root sends (N-1) S            others receive S
 *     reduce       root receives (N-1) S         others send S
 *     gather       root receives S - len_root    others send len_r
 *     scatter      root sends S - len_root       others receive len_r
 *     all_to_all   each sends and receives (N-1) blocks of count elements
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/mpi/mpi_backend.h"
#include "ptdp/error.h"
#include "ptdp/tensor.h"

/* ---------------------------------------------------- calls on the wire */

void ptdp_mpi_call_to_wire(const ptdp_call *k, mpi_wire_call *w)
{
    memset(w, 0, sizeof *w);
    w->op = (int)k->op;
    w->dtype = (int)k->dtype;
    w->rop = (int)k->rop;
    w->root = k->root;
    w->tag = k->tag;
    w->algo = (int)k->algo;
    w->color = k->color;
    w->key = k->key;
    w->line = k->line;
    w->in_place = k->in_place;
    w->seq = k->seq;
    w->count = k->count;
    w->clock = k->clock;
    /* The end of the path is what a report shows (check.c strips the rest). */
    const char *f = k->file ? k->file : "?";
    size_t n = strlen(f);
    snprintf(w->file, sizeof w->file, "%s", n < sizeof w->file ? f : f + n - (sizeof w->file - 1));
}

void ptdp_mpi_call_from_wire(const mpi_wire_call *w, ptdp_call *k)
{
    memset(k, 0, sizeof *k);
    k->op = (ptdp_coll)w->op;
    k->dtype = (ptdp_dtype)w->dtype;
    k->rop = (ptdp_op)w->rop;
    k->root = w->root;
    k->tag = w->tag;
    k->algo = (ptdp_algo)w->algo;
    k->color = w->color;
    k->key = w->key;
    k->line = w->line;
    k->in_place = w->in_place;
    k->seq = w->seq;
    k->count = (size_t)w->count;
    k->clock = w->clock;
    k->file = w->file;
}

/* ------------------------------------------------------------ the group */

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

void *ptdp_mpi_scratch(ptdp_comm *c, size_t bytes)
{
    mpi_group *g = mpi_group_of(c);
    if (g->scratch_bytes < bytes) {
        void *p = realloc(g->scratch, bytes);
        if (!p) {
            ptdp_fail(c->dev, PTDP_ENOMEM, "MPI backend: no host memory for a %zu-byte message buffer", bytes);
            return NULL;
        }
        g->scratch = p;
        g->scratch_bytes = bytes;
    }
    return g->scratch;
}

int ptdp_mpi_count(ptdp_comm *c, size_t bytes, int *out)
{
    if (bytes > (size_t)INT_MAX)
        return ptdp_fail(c->dev, PTDP_EINVAL, "MPI backend: a message of %zu bytes in group '%s' is more than "
                         "MPI's int count carries (%d bytes)", bytes, c->name, INT_MAX);
    *out = (int)bytes;
    return 0;
}

ptdp_wait_why ptdp_mpi_why(const ptdp_comm *c, const ptdp_call *mine)
{
    ptdp_wait_why why = {
        .op = mine->op, .group = c->name, .file = mine->file, .line = mine->line,
        .peer = -1, .tag = 0, .members = c->world_rank, .nmembers = c->size,
    };
    return why;
}

/* ---------------------------------------------------------- meeting */

static int mpi_meet(ptdp_comm *c, const ptdp_call *mine, const ptdp_call **calls)
{
    mpi_group *g = mpi_group_of(c);
    mpi_wire_call me;
    ptdp_mpi_call_to_wire(mine, &me);
    MPI_Request req;
    MPI_Iallgather(&me, (int)sizeof me, MPI_BYTE, g->wire, (int)sizeof me, MPI_BYTE, g->coll, &req);
    ptdp_wait_why why = ptdp_mpi_why(c, mine);
    int rc = ptdp_mpi_wait(c->dev, 1, &req, &why);
    if (rc)
        return rc;
    for (int r = 0; r < c->size; r++) {
        ptdp_mpi_call_from_wire(&g->wire[r], &g->calls[r]);
        calls[r] = r == c->rank ? mine : &g->calls[r];   /* my buffers are mine */
    }
    return 0;
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

/* ------------------------------------------------- rooted collectives */

static size_t bytes_of(const ptdp_call *k, size_t n)
{
    return n * ptdp_dtype_size(k->dtype);
}

/* The byte counts and offsets of the N chunks of a call (ptdp_chunk). */
static int chunk_counts(ptdp_comm *c, const ptdp_call *k, int *counts, int *displs)
{
    int all = 0, rc = ptdp_mpi_count(c, bytes_of(k, k->count), &all);   /* the largest offset fits */
    for (int r = 0; rc == 0 && r < c->size; r++) {
        size_t off, len;
        ptdp_chunk(k->count, c->size, r, &off, &len);
        counts[r] = (int)bytes_of(k, len);
        displs[r] = (int)bytes_of(k, off);
    }
    return rc;
}

int ptdp_mpi_broadcast(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    size_t S = bytes_of(mine, mine->count);
    int n = 0, rc = ptdp_mpi_count(c, S, &n);
    if (rc)
        return rc;
    MPI_Request req;
    MPI_Ibcast(mine->recv, n, MPI_BYTE, mine->root, mpi_group_of(c)->coll, &req);
    ptdp_wait_why why = ptdp_mpi_why(c, mine);
    if ((rc = ptdp_mpi_wait(c->dev, 1, &req, &why)) != 0)
        return rc;
    if (c->rank != mine->root)
        t->recv += (double)S;
    else
        t->sent += (double)S * (c->size - 1);
    return 0;
}

/* The root gathers every member's whole input and reduces them in rank
 * order: in0 op in1 op … — the threads' root reads the same buffers in the
 * same order. */
int ptdp_mpi_reduce(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    size_t S = bytes_of(mine, mine->count);
    int n = 0, rc = ptdp_mpi_count(c, S, &n);
    if (rc == 0)
        rc = ptdp_mpi_count(c, S * (size_t)c->size, &(int){ 0 });
    if (rc)
        return rc;
    const bool root = c->rank == mine->root;
    char *all = root ? ptdp_mpi_scratch(c, S * (size_t)c->size + 1) : NULL;
    if (root && !all)
        return PTDP_ENOMEM;
    MPI_Request req;
    MPI_Igather(mine->send, n, MPI_BYTE, all, n, MPI_BYTE, mine->root, mpi_group_of(c)->coll, &req);
    ptdp_wait_why why = ptdp_mpi_why(c, mine);
    if ((rc = ptdp_mpi_wait(c->dev, 1, &req, &why)) != 0)
        return rc;
    if (root) {
        const void *in[PTDP_MAX_DEVICES];
        for (int r = 0; r < c->size; r++)
            in[r] = all + (size_t)r * S;
        ptdp_reduce_many(&mine->recv, 1, in, c->size, mine->count, mine->dtype, mine->rop);
        t->recv += (double)S * (c->size - 1);
    } else {
        t->sent += (double)S;
    }
    return 0;
}

static int mpi_gather(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    int counts[PTDP_MAX_DEVICES], displs[PTDP_MAX_DEVICES];
    int rc = chunk_counts(c, mine, counts, displs);
    if (rc)
        return rc;
    const bool root = c->rank == mine->root;
    /* The root's own chunk may already sit where it goes. */
    const void *send = root && (const char *)mine->send == (const char *)mine->recv + displs[c->rank]
                     ? MPI_IN_PLACE : mine->send;
    MPI_Request req;
    MPI_Igatherv(send, counts[c->rank], MPI_BYTE, mine->recv, counts, displs, MPI_BYTE, mine->root,
                 mpi_group_of(c)->coll, &req);
    ptdp_wait_why why = ptdp_mpi_why(c, mine);
    if ((rc = ptdp_mpi_wait(c->dev, 1, &req, &why)) != 0)
        return rc;
    if (root)
        t->recv += (double)(bytes_of(mine, mine->count) - (size_t)counts[c->rank]);
    else
        t->sent += (double)counts[c->rank];
    return 0;
}

static int mpi_scatter(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    int counts[PTDP_MAX_DEVICES], displs[PTDP_MAX_DEVICES];
    int rc = chunk_counts(c, mine, counts, displs);
    if (rc)
        return rc;
    const bool root = c->rank == mine->root;
    void *recv = root && (char *)mine->recv == (const char *)mine->send + displs[c->rank]
               ? MPI_IN_PLACE : mine->recv;
    MPI_Request req;
    MPI_Iscatterv(mine->send, counts, displs, MPI_BYTE, recv, counts[c->rank], MPI_BYTE, mine->root,
                  mpi_group_of(c)->coll, &req);
    ptdp_wait_why why = ptdp_mpi_why(c, mine);
    if ((rc = ptdp_mpi_wait(c->dev, 1, &req, &why)) != 0)
        return rc;
    if (root)
        t->sent += (double)(bytes_of(mine, mine->count) - (size_t)counts[c->rank]);
    else
        t->recv += (double)counts[c->rank];
    return 0;
}

static int mpi_all_to_all(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    size_t block = bytes_of(mine, mine->count);
    int n = 0, rc = ptdp_mpi_count(c, block * (size_t)c->size, &n);
    if (rc)
        return rc;
    MPI_Request req;
    MPI_Ialltoall(mine->send, (int)block, MPI_BYTE, mine->recv, (int)block, MPI_BYTE,
                  mpi_group_of(c)->coll, &req);
    ptdp_wait_why why = ptdp_mpi_why(c, mine);
    if ((rc = ptdp_mpi_wait(c->dev, 1, &req, &why)) != 0)
        return rc;
    t->sent += (double)block * (c->size - 1);
    t->recv += (double)block * (c->size - 1);
    return 0;
}

/* Reduce to rank 0, then broadcast (allreduce_naive.c, in messages). */
int ptdp_mpi_naive_all_reduce(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    int rc = ptdp_mpi_reduce(c, calls, t);
    return rc ? rc : ptdp_mpi_broadcast(c, calls, t);
}

const struct ptdp_comm_ops ptdp_mpi_ops = {
    .backend = "mpi",
    .meet = mpi_meet,
    .broadcast = ptdp_mpi_broadcast,
    .reduce = ptdp_mpi_reduce,
    .gather = mpi_gather,
    .scatter = mpi_scatter,
    .all_to_all = mpi_all_to_all,
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
