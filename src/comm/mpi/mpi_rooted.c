/*
 * mpi_rooted.c — the MPI backend's simple collectives: broadcast, reduce,
 * gather, scatter, all_to_all(v), and the naive all-reduce made of two of them.
 *
 * They move whole buffers; only `reduce` computes, and it does so at the
 * root in rank order with the same ptdp_reduce_many the threads use, so
 * its bits are theirs.  Traffic is counted by the threads backend's rules
 * (shm/rooted.c), so the byte reports agree too:
 *
 *     broadcast    root sends (N-1) S            others receive S
 *     reduce       root receives (N-1) S         others send S
 *     gather       root receives S - len_root    others send len_r
 *     scatter      root sends S - len_root       others receive len_r
 *     all_to_all   each sends and receives (N-1) blocks of count elements
 *     all_to_allv  each sends and receives what its tables say, but its
 *                  own block
 */
#include "comm/mpi/mpi_backend.h"
#include "ptdp/error.h"
#include "ptdp/tensor.h"

static size_t bytes_of(const ptdp_call *k, size_t n)
{
    return n * ptdp_dtype_size(k->dtype);
}

/* The byte counts and offsets of the N segments of a call (ptdp_share). */
static int segment_counts(ptdp_comm *c, const ptdp_call *k, int *counts, int *displs)
{
    int all = 0, rc = ptdp_mpi_count(c, bytes_of(k, k->count), &all);   /* the largest offset fits */
    for (int r = 0; rc == 0 && r < c->size; r++) {
        size_t off, len;
        ptdp_share(k->count, c->size, r, &off, &len);
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

int ptdp_mpi_gather(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    int counts[PTDP_MAX_DEVICES], displs[PTDP_MAX_DEVICES];
    int rc = segment_counts(c, mine, counts, displs);
    if (rc)
        return rc;
    const bool root = c->rank == mine->root;
    /* The root's own segment may already sit where it goes. */
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

int ptdp_mpi_scatter(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    int counts[PTDP_MAX_DEVICES], displs[PTDP_MAX_DEVICES];
    int rc = segment_counts(c, mine, counts, displs);
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

int ptdp_mpi_all_to_all(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
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

/* The tables in bytes, as MPI's int counts (each within INT_MAX). */
static int byte_table(ptdp_comm *c, const ptdp_call *k, const size_t *counts, const size_t *displs,
                      int *bcounts, int *bdispls)
{
    int rc = 0;
    for (int j = 0; rc == 0 && j < c->size; j++)
        if ((rc = ptdp_mpi_count(c, bytes_of(k, counts[j]), &bcounts[j])) == 0)
            rc = ptdp_mpi_count(c, bytes_of(k, displs[j] + counts[j]), &bdispls[j]);
    for (int j = 0; rc == 0 && j < c->size; j++)
        bdispls[j] -= bcounts[j];
    return rc;
}

/* Another process's tables are not in my memory: exchange the send
 * counts first and check my row (my expected counts) against them; a
 * mismatch ends the job with both call sites. */
static int check_my_row(ptdp_comm *c, const ptdp_call *const *calls)
{
    const ptdp_call *mine = calls[c->rank];
    unsigned long long out[PTDP_MAX_DEVICES], in[PTDP_MAX_DEVICES];
    for (int j = 0; j < c->size; j++)
        out[j] = mine->scounts[j];
    MPI_Request req;
    MPI_Ialltoall(out, 1, MPI_UNSIGNED_LONG_LONG, in, 1, MPI_UNSIGNED_LONG_LONG, mpi_group_of(c)->coll, &req);
    ptdp_wait_why why = ptdp_mpi_why(c, mine);
    int rc = ptdp_mpi_wait(c->dev, 1, &req, &why);
    for (int i = 0; rc == 0 && i < c->size; i++)
        if (in[i] != mine->rcounts[i])
            rc = ptdp_fail_v_mismatch(c, mine->seq, i, calls[i], in[i], c->rank, mine, mine->rcounts[i]);
    return rc;
}

int ptdp_mpi_all_to_allv(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    int sc[PTDP_MAX_DEVICES], sd[PTDP_MAX_DEVICES], rcnt[PTDP_MAX_DEVICES], rd[PTDP_MAX_DEVICES];
    int rc = check_my_row(c, calls);
    if (rc == 0)
        rc = byte_table(c, mine, mine->scounts, mine->sdispls, sc, sd);
    if (rc == 0)
        rc = byte_table(c, mine, mine->rcounts, mine->rdispls, rcnt, rd);
    if (rc)
        return rc;
    MPI_Request req;
    MPI_Ialltoallv(mine->send, sc, sd, MPI_BYTE, mine->recv, rcnt, rd, MPI_BYTE, mpi_group_of(c)->coll, &req);
    ptdp_wait_why why = ptdp_mpi_why(c, mine);
    if ((rc = ptdp_mpi_wait(c->dev, 1, &req, &why)) != 0)
        return rc;
    t->sent += (double)mine->vsent;
    t->recv += (double)mine->vrecv;
    return 0;
}

/* Reduce to rank 0, then broadcast (allreduce_naive.c, in messages). */
int ptdp_mpi_naive_all_reduce(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    int rc = ptdp_mpi_reduce(c, calls, t);
    return rc ? rc : ptdp_mpi_broadcast(c, calls, t);
}
