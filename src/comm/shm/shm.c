/*
 * shm.c — the shared-memory backend: groups, and the simple
 * collectives.
 *
 * Devices are threads of one process, so a collective can read the other
 * members' buffers directly, as NCCL reads a peer GPU's memory over
 * NVLink.  Every collective here has the same shape:
 *
 *     meet ──► every member copies what it needs from the others ──► barrier
 *     (post my call, barrier:          (addresses come from             (nobody
 *      now every buffer address         the posted calls)                returns
 *      is known and every member                                         while its
 *      is inside this call)                                              buffers are
 *                                                                        still read)
 *
 * Byte accounting (S = count elements in bytes, N members, chunk r of
 * ptdp_chunk is len_r; a byte is sent by the device whose buffer it leaves
 * and received by the device whose buffer it enters):
 *
 *     broadcast    root sends (N-1) S            others receive S
 *     reduce       root receives (N-1) S         others send S
 *     gather       root receives S - len_root    others send len_r
 *     scatter      root sends S - len_root       others receive len_r
 *     all_to_all   each sends and receives (N-1) blocks of count elements
 *     barrier, split                             0
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/shm/shm.h"
#include "ptdp/error.h"
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
    return ptdp_barrier_cross(&shm_group_of(c)->barrier, c->dev, &why);
}

static int shm_meet(ptdp_comm *c, const ptdp_call *mine, const ptdp_call **calls)
{
    struct shm_group *g = shm_group_of(c);
    int parity = (int)(mine->seq & 1);
    g->member[c->rank].call[parity] = *mine;
    int rc = ptdp_shm_barrier(c, mine);
    for (int r = 0; r < c->size; r++)
        calls[r] = &g->member[r].call[parity];
    return rc;
}

/* ------------------------------------------------------- collectives */

static size_t bytes_of(const ptdp_call *k, size_t n)
{
    return n * ptdp_dtype_size(k->dtype);
}

/* Root's buffer → everyone else's. */
int ptdp_shm_broadcast(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank], *root = calls[mine->root];
    size_t S = bytes_of(mine, mine->count);
    if (c->rank != mine->root) {
        ptdp_copy(mine->recv, root->recv, S);
        t->recv += (double)S;
    } else {
        t->sent += (double)S * (c->size - 1);
    }
    return ptdp_shm_barrier(c, mine);
}

/* Root reads every member's send in rank order: in0 op in1 op … */
int ptdp_shm_reduce(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    size_t S = bytes_of(mine, mine->count);
    if (c->rank == mine->root) {
        const void *in[PTDP_MAX_DEVICES];
        for (int r = 0; r < c->size; r++)
            in[r] = calls[r]->send;
        ptdp_reduce_many(&mine->recv, 1, in, c->size, mine->count, mine->dtype, mine->rop);
        t->recv += (double)S * (c->size - 1);
    } else {
        t->sent += (double)S;
    }
    return ptdp_shm_barrier(c, mine);
}

/* Root copies chunk r of its recv from rank r's send. */
static int shm_gather(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    size_t off, len;
    if (c->rank == mine->root) {
        for (int r = 0; r < c->size; r++) {
            ptdp_chunk(mine->count, c->size, r, &off, &len);
            ptdp_copy((char *)mine->recv + bytes_of(mine, off), calls[r]->send, bytes_of(mine, len));
            if (r != c->rank)
                t->recv += (double)bytes_of(mine, len);
        }
    } else {
        ptdp_chunk(mine->count, c->size, c->rank, &off, &len);
        t->sent += (double)bytes_of(mine, len);
    }
    return ptdp_shm_barrier(c, mine);
}

/* Rank r copies chunk r of root's send. */
static int shm_scatter(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank], *root = calls[mine->root];
    size_t off, len;
    ptdp_chunk(mine->count, c->size, c->rank, &off, &len);
    ptdp_copy(mine->recv, (const char *)root->send + bytes_of(mine, off), bytes_of(mine, len));
    if (c->rank != mine->root) {
        t->recv += (double)bytes_of(mine, len);
    } else {
        t->sent += (double)bytes_of(mine, mine->count - len);
    }
    return ptdp_shm_barrier(c, mine);
}

/* Block i of my recv = block (my rank) of rank i's send. */
static int shm_all_to_all(ptdp_comm *c, const ptdp_call *const *calls, ptdp_traffic *t)
{
    const ptdp_call *mine = calls[c->rank];
    size_t block = bytes_of(mine, mine->count);
    for (int r = 0; r < c->size; r++)
        ptdp_copy((char *)mine->recv + (size_t)r * block,
               (const char *)calls[r]->send + (size_t)c->rank * block, block);
    t->sent += (double)block * (c->size - 1);
    t->recv += (double)block * (c->size - 1);
    return ptdp_shm_barrier(c, mine);
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
    if (new_rank == 0) {
        int world[PTDP_MAX_DEVICES];
        for (int i = 0; i < n; i++)
            world[i] = c->world_rank[members[i]];
        me->new_group = ptdp_shm_group_create(n, world);
        if (!me->new_group)
            return ptdp_fail(c->dev, PTDP_ENOMEM, "comm_split '%s': out of host memory", name);
    }
    int rc = ptdp_shm_barrier(c, mine);
    if (rc || new_rank < 0)
        return rc;
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

const struct ptdp_comm_ops ptdp_shm_ops = {
    .backend = "threads",
    .meet = shm_meet,
    .broadcast = ptdp_shm_broadcast,
    .reduce = ptdp_shm_reduce,
    .gather = shm_gather,
    .scatter = shm_scatter,
    .all_to_all = shm_all_to_all,
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
