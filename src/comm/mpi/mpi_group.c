/*
 * mpi_group.c — the MPI backend's floor: calls on the wire, a group's
 * message buffer, and how its members meet.
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
 * Every algorithm above (mpi_rooted.c, mpi_coll.c, mpi_p2p.c) stands on
 * this file: its messages go through the group's scratch, their sizes
 * through MPI's int counts, its waits carry the watchdog's description.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/mpi/mpi_backend.h"
#include "ptdp/error.h"

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
    w->vsent = k->vsent;
    w->vrecv = k->vrecv;
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
    k->vsent = w->vsent;
    k->vrecv = w->vrecv;
    k->clock = w->clock;
    k->file = w->file;
}

/* ------------------------------------------------------------ the group */

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

int ptdp_mpi_meet(ptdp_comm *c, const ptdp_call *mine, const ptdp_call **calls)
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
