/*
 * group.c — a shared-memory group and how its members meet: the floor
 * every collective of the threads backend stands on.
 *
 * A group is the memory its members share: one slot per member (its
 * posted call, its ring mailbox), one post slot per (sender, receiver)
 * pair, and a barrier.  Every collective starts with a meeting:
 *
 *     member r: post my call in slot r ──► barrier ──► read every slot
 *               (double-buffered by        (now every member is inside
 *                the call's parity)         this call and every buffer
 *                                           address is known)
 *
 * and ends with the same barrier, so nobody returns while its buffers are
 * still read.  The barrier's wait carries the watchdog's description (the
 * op, the group, the caller's file:line and the members), so a member
 * that never comes is reported by name.
 *
 * A failure elsewhere (the world's abort) ends the meeting's wait — every
 * member leaves or none does (wait.h) — but not a later barrier of the
 * same call: past the meeting every member only copies and adds, so it
 * arrives in bounded time, and until it does it may read my buffers.
 *
 * The last member to drop its reference frees the group.
 */
#include <stdlib.h>
#include <string.h>

#include "comm/shm/shm.h"
#include "ptdp/tensor.h"

/* --------------------------------------------------------- the group */

struct shm_group *ptdp_shm_group_create(int size, const int *world_rank)
{
    void *mem = NULL;                    /* 64-byte aligned: see wait.h */
    if (posix_memalign(&mem, 64, sizeof(struct shm_group)) != 0)
        return NULL;
    struct shm_group *g = memset(mem, 0, sizeof *g);
    g->size = size;
    atomic_init(&g->refs, size);
    ptdp_copy(g->world_rank, world_rank, (size_t)size * sizeof *world_rank);
    ptdp_barrier_init(&g->barrier, size, g->world_rank);

    void *members = NULL, *posts = NULL;
    size_t nposts = (size_t)size * (size_t)size;
    if (posix_memalign(&members, 64, (size_t)size * sizeof(shm_member)) != 0 ||
        posix_memalign(&posts, 64, nposts * sizeof(shm_post)) != 0) {
        free(members);
        free(g);
        return NULL;
    }
    memset(members, 0, (size_t)size * sizeof(shm_member));
    memset(posts, 0, nposts * sizeof(shm_post));
    g->member = members;
    g->post = posts;
    for (int r = 0; r < size; r++) {
        atomic_init(&g->member[r].posted, 0);
        atomic_init(&g->member[r].taken, 0);
    }
    for (size_t i = 0; i < nposts; i++)
        atomic_init(&g->post[i].state, SHM_POST_EMPTY);
    return g;
}

void ptdp_shm_group_release(struct shm_group *g)
{
    if (atomic_fetch_sub(&g->refs, 1) != 1)
        return;
    for (int r = 0; r < g->size; r++)
        free(g->member[r].scratch);
    free(g->member);
    free(g->post);
    free(g);
}

/* ---------------------------------------------------------- meeting */

ptdp_wait_why ptdp_shm_why(const ptdp_comm *c, const ptdp_call *mine)
{
    ptdp_wait_why why = {
        .op = mine->op, .group = c->name, .file = mine->file, .line = mine->line,
        .peer = -1, .tag = 0, .members = c->world_rank, .nmembers = c->size,
    };
    return why;
}

int ptdp_shm_barrier(ptdp_comm *c, const ptdp_call *mine)
{
    ptdp_wait_why why = ptdp_shm_why(c, mine);
    why.past_abort = true;                  /* after the meeting: see above */
    return ptdp_barrier_cross(&shm_group_of(c)->barrier, c->dev, &why);
}

int ptdp_shm_meet(ptdp_comm *c, const ptdp_call *mine, const ptdp_call **calls)
{
    struct shm_group *g = shm_group_of(c);
    int parity = (int)(mine->seq & 1);
    g->member[c->rank].call[parity] = *mine;
    ptdp_wait_why why = ptdp_shm_why(c, mine);
    int rc = ptdp_barrier_cross(&g->barrier, c->dev, &why);
    for (int r = 0; r < c->size; r++)
        calls[r] = &g->member[r].call[parity];
    return rc;
}
