/*
 * mpi_p2p.c — blocking, rendezvous send and recv between processes.
 *
 * With threads the receiver copies straight out of the sender's buffer.
 * Between processes the bytes must travel, and so must what the threads
 * read from the sender's posted call: its count and type (to report a
 * mismatch) and its virtual clock (the message arrives at the sender's
 * time + alpha + bytes / beta, comm.c).  So a message is one MPI message
 * of the sender's call followed by the payload:
 *
 *   sender                                     receiver
 *   [ call: count, dtype, tag, file:line,  ──► MPI_Improbe(src, tag): a
 *     virtual clock | payload … ]                message?  how big?
 *   MPI_Issend: completes only once the        MPI_Mrecv into a buffer,
 *   receiver has matched it — ptdp's           check count and type against
 *   rendezvous (comm.h)                        mine, copy the payload out
 *
 * Packing costs the sender one copy of the payload (the buffer MPI sends
 * from is the message, header included); the receiver makes another.  A
 * thread device makes one copy in all.  Messages from one rank to another
 * with one tag arrive in order (MPI's non-overtaking rule), and a receive
 * takes only its tag, as the threads' post slots do.
 *
 * Both sides wait by polling against the watchdog's deadline (mpi_wait.c),
 * so two devices that both send first are reported, not hung.
 */
#include <stdbool.h>
#include <string.h>

#include "comm/mpi/mpi_backend.h"
#include "ptdp/error.h"
#include "ptdp/tensor.h"

static ptdp_wait_why p2p_why(const ptdp_comm *c, const ptdp_call *mine)
{
    ptdp_wait_why why = {
        .op = mine->op, .group = c->name, .file = mine->file, .line = mine->line,
        .peer = mine->root, .tag = mine->tag,
        .members = &c->world_rank[mine->root], .nmembers = 1,
    };
    return why;
}

static int mpi_tag(ptdp_comm *c, const ptdp_call *mine, int *out)
{
    int *ub, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    if (mine->tag < 0 || (flag && mine->tag > *ub))
        return ptdp_fail(c->dev, PTDP_EINVAL, "ptdp_%s in group '%s': tag %d is outside MPI's tags 0..%d",
                         ptdp_coll_name(mine->op), c->name, mine->tag, flag ? *ub : 32767);
    *out = mine->tag;
    return 0;
}

int ptdp_mpi_send(ptdp_comm *c, const ptdp_call *mine, ptdp_traffic *t)
{
    size_t S = mine->count * ptdp_dtype_size(mine->dtype), H = sizeof(mpi_wire_call);
    int n = 0, tag = 0, rc = ptdp_mpi_count(c, H + S, &n);
    if (rc || (rc = mpi_tag(c, mine, &tag)) != 0)
        return rc;
    char *msg = ptdp_mpi_scratch(c, H + S);
    if (!msg)
        return PTDP_ENOMEM;
    ptdp_mpi_call_to_wire(mine, (mpi_wire_call *)msg);
    ptdp_copy(msg + H, mine->send, S);

    MPI_Request req;
    MPI_Issend(msg, n, MPI_BYTE, mine->root, tag, mpi_group_of(c)->p2p, &req);
    ptdp_wait_why why = p2p_why(c, mine);
    if ((rc = ptdp_mpi_wait(c->dev, 1, &req, &why)) != 0)
        return rc;
    t->sent += (double)S;
    return 0;
}

/* The probe as a request-like condition for the waiting loop. */
typedef struct {
    MPI_Comm comm;
    int src, tag;
    MPI_Message msg;
    MPI_Status status;
} probe;

static bool arrived(void *arg)
{
    probe *p = arg;
    int flag = 0;
    MPI_Improbe(p->src, p->tag, p->comm, &flag, &p->msg, &p->status);
    return flag != 0;
}

int ptdp_mpi_recv(ptdp_comm *c, const ptdp_call *mine, ptdp_call *sender, ptdp_traffic *t)
{
    mpi_group *g = mpi_group_of(c);
    size_t S = mine->count * ptdp_dtype_size(mine->dtype), H = sizeof(mpi_wire_call);
    int tag = 0, rc = mpi_tag(c, mine, &tag);
    if (rc)
        return rc;
    probe p = { .comm = g->p2p, .src = mine->root, .tag = tag };
    ptdp_wait_why why = p2p_why(c, mine);
    if ((rc = ptdp_mpi_wait_until(c->dev, arrived, &p, &why)) != 0)
        return rc;

    int n = 0;
    MPI_Get_count(&p.status, MPI_BYTE, &n);
    char *msg = ptdp_mpi_scratch(c, (size_t)n > H ? (size_t)n : H);
    if (!msg)
        return PTDP_ENOMEM;
    MPI_Mrecv(msg, n, MPI_BYTE, &p.msg, MPI_STATUS_IGNORE);
    /* The sender's call outlives this buffer in the group's wire slot. */
    memcpy(&g->wire[mine->root], msg, H);
    ptdp_mpi_call_from_wire(&g->wire[mine->root], sender);
    if (sender->count != mine->count || sender->dtype != mine->dtype || (size_t)n != H + S)
        return PTDP_EMISMATCH;                      /* comm.c reports both */
    ptdp_copy(mine->recv, msg + H, S);
    t->recv += (double)S;
    return 0;
}
