/*
 * p2p.c — blocking, rendezvous send and recv over shared memory.
 *
 * Every ordered pair of members (src → dst) has one post slot.  A blocking
 * send can have only one message in flight per destination, so one slot
 * is enough, and messages from src to dst arrive in the order sent.
 *
 *   sender                         slot[dst][src]              receiver
 *   write the call, state=POSTED ──►  POSTED  ◄── wait: POSTED with my tag
 *                                     CLAIMED ◄── claim, copy the data
 *   wait: DONE                   ◄──  DONE    ◄── done: the data is mine
 *   state=EMPTY, return
 *
 * The send returns only once the receiver has copied the data: that is
 * the rendezvous, and why two devices that both send first deadlock (the
 * watchdog then names both sends).  A receive takes only the message with
 * its tag; a message with another tag stays posted, and its sender waits.
 *
 * If the world aborts while a message is posted, the sender withdraws it
 * (POSTED → EMPTY) unless a receiver has already claimed it, in which case
 * the copy is finishing and the sender waits for DONE before it returns
 * (its buffer must outlive the copy).
 *
 * Traffic: the sender counts the message's bytes as sent, the receiver as
 * received.
 */
#include <sched.h>

#include "comm/shm/shm.h"
#include "ptdp/error.h"

static shm_post *slot(const ptdp_comm *c, int dst, int src)
{
    return &shm_group_of(c)->post[(size_t)dst * (size_t)c->size + (size_t)src];
}

static ptdp_wait_why p2p_why(const ptdp_comm *c, const ptdp_call *mine)
{
    ptdp_wait_why why = {
        .op = mine->op, .group = c->name, .file = mine->file, .line = mine->line,
        .peer = mine->root, .tag = mine->tag,
        .members = &c->world_rank[mine->root], .nmembers = 1,
    };
    return why;
}

static bool delivered(const void *arg)
{
    return atomic_load(&((const shm_post *)arg)->state) == SHM_POST_DONE;
}

int ptdp_shm_send(ptdp_comm *c, const ptdp_call *mine, ptdp_traffic *t)
{
    int dst = mine->root;
    shm_post *p = slot(c, dst, c->rank);

    p->call = *mine;
    atomic_store(&p->state, SHM_POST_POSTED);
    ptdp_wake(c->dev->w, c->world_rank[dst]);

    ptdp_wait_why why = p2p_why(c, mine);
    int rc = ptdp_wait_until(c->dev, delivered, p, &why);
    if (rc) {
        int posted = SHM_POST_POSTED;
        if (atomic_compare_exchange_strong(&p->state, &posted, SHM_POST_EMPTY))
            return rc;                              /* withdrawn */
        while (atomic_load(&p->state) != SHM_POST_DONE)
            sched_yield();                          /* a copy is finishing */
    } else {
        t->sent += (double)(mine->count * ptdp_dtype_size(mine->dtype));
    }
    atomic_store(&p->state, SHM_POST_EMPTY);
    return rc;
}

typedef struct {
    const shm_post *p;
    int tag;
} post_wait;

static bool posted_with_tag(const void *arg)
{
    const post_wait *pw = arg;
    return atomic_load(&pw->p->state) == SHM_POST_POSTED && pw->p->call.tag == pw->tag;
}

int ptdp_shm_recv(ptdp_comm *c, const ptdp_call *mine, ptdp_call *sender, ptdp_traffic *t)
{
    int src = mine->root;
    shm_post *p = slot(c, c->rank, src);

    ptdp_wait_why why = p2p_why(c, mine);
    post_wait pw = { p, mine->tag };
    int rc = ptdp_wait_until(c->dev, posted_with_tag, &pw, &why);
    if (rc)
        return rc;

    *sender = p->call;
    if (sender->count != mine->count || sender->dtype != mine->dtype)
        return PTDP_EMISMATCH;                      /* comm.c reports both */

    int posted = SHM_POST_POSTED;
    if (!atomic_compare_exchange_strong(&p->state, &posted, SHM_POST_CLAIMED))
        return PTDP_EABORTED;                       /* the sender withdrew */
    size_t bytes = mine->count * ptdp_dtype_size(mine->dtype);
    ptdp_copy(mine->recv, sender->send, bytes);
    t->recv += (double)bytes;

    atomic_store(&p->state, SHM_POST_DONE);         /* p is the sender's now */
    ptdp_wake(c->dev->w, c->world_rank[src]);
    return 0;
}
