/*
 * solution.c — lesson 10: ZeRO-3 and overlap, the blanks filled.
 * (exercise.c is the same file with holes; read its header comment first.)
 */
#include "lesson.h"

#include <string.h>

#include "ptdp/error.h"

/* ------------------------------------------------- the pieces */

int lesson_gather(ptdp_device *dev, lesson_zero3 *z, int u, bool start)
{
    lesson_unit *x = &z->unit[u];
    x->w = ptdp_alloc(dev, x->numel * sizeof(ptdp_real), PTDP_MEM_PARAMS, "unit.w");
    if (x->w == NULL)
        return PTDP_ENOMEM;
    memcpy(x->w + x->off, x->w_shard, x->len * sizeof(ptdp_real));
    if (start)
        return ptdp_all_gather_start(z->dp, PTDP_IN_PLACE, x->w, x->numel, PTDP_REAL, &x->gather);
    return ptdp_all_gather(z->dp, PTDP_IN_PLACE, x->w, x->numel, PTDP_REAL);
}

int lesson_reduce_scatter(ptdp_device *dev, lesson_zero3 *z, int u, bool start)
{
    lesson_unit *x = &z->unit[u];
    (void)dev;
    if (start)
        return ptdp_reduce_scatter_start(z->dp, PTDP_IN_PLACE, x->g, x->numel, PTDP_REAL, PTDP_SUM, &x->reduce);
    return ptdp_reduce_scatter(z->dp, PTDP_IN_PLACE, x->g, x->numel, PTDP_REAL, PTDP_SUM);
}

int lesson_add_grad(ptdp_device *dev, lesson_zero3 *z, int u)
{
    lesson_unit *x = &z->unit[u];
    for (size_t i = 0; i < x->len; i++)
        x->g_shard[i] += x->g[x->off + i];
    ptdp_free(dev, x->g);
    x->g = NULL;
    return PTDP_OK;
}

/* Given: the gathered parameters go; a zeroed gradient buffer comes. */
void lesson_release(ptdp_device *dev, lesson_zero3 *z, int u)
{
    ptdp_free(dev, z->unit[u].w);
    z->unit[u].w = NULL;
}

int lesson_grad_buffer(ptdp_device *dev, lesson_zero3 *z, int u)
{
    lesson_unit *x = &z->unit[u];
    x->g = ptdp_alloc(dev, x->numel * sizeof(ptdp_real), PTDP_MEM_GRADS, "unit.g");
    return x->g != NULL ? PTDP_OK : PTDP_ENOMEM;
}

/* ------------------------------------------ the blocking micro-batch */

int lesson_micro_batch(ptdp_device *dev, lesson_zero3 *z)
{
    const int L = z->nunits;
    int rc;
    for (int u = 0; u < L; u++) {                   /* forward: first to last */
        if ((rc = lesson_gather(dev, z, u, false)) != 0)
            return rc;
        rc = lesson_unit_forward(dev, z, u);
        lesson_release(dev, z, u);
        if (rc != 0)
            return rc;
    }
    for (int u = L - 1; u >= 0; u--) {              /* backward: last to first */
        if ((rc = lesson_gather(dev, z, u, false)) != 0 || (rc = lesson_grad_buffer(dev, z, u)) != 0)
            return rc;
        rc = lesson_unit_backward(dev, z, u);
        lesson_release(dev, z, u);
        if (rc != 0 || (rc = lesson_reduce_scatter(dev, z, u, false)) != 0)
            return rc;
        if ((rc = lesson_add_grad(dev, z, u)) != 0)
            return rc;
    }
    return PTDP_OK;
}

/* ---------------------------------------- the overlapped micro-batch */

int lesson_micro_batch_overlap(ptdp_device *dev, lesson_zero3 *z)
{
    const int L = z->nunits;
    int rc;
    if ((rc = lesson_gather(dev, z, 0, true)) != 0)
        return rc;
    for (int u = 0; u < L; u++) {                   /* forward */
        if ((rc = ptdp_wait(&z->unit[u].gather)) != 0)
            return rc;
        if (u + 1 < L && (rc = lesson_gather(dev, z, u + 1, true)) != 0)   /* prefetch the next */
            return rc;
        rc = lesson_unit_forward(dev, z, u);
        lesson_release(dev, z, u);
        if (rc != 0)
            return rc;
    }
    if ((rc = lesson_gather(dev, z, L - 1, true)) != 0)
        return rc;
    for (int u = L - 1; u >= 0; u--) {              /* backward */
        if ((rc = ptdp_wait(&z->unit[u].gather)) != 0)
            return rc;
        if (u > 0 && (rc = lesson_gather(dev, z, u - 1, true)) != 0)      /* the next is u - 1 */
            return rc;
        if ((rc = lesson_grad_buffer(dev, z, u)) != 0)
            return rc;
        rc = lesson_unit_backward(dev, z, u);
        lesson_release(dev, z, u);
        if (rc != 0)
            return rc;
        if (u + 1 < L) {                            /* the previous unit's, started a backward ago */
            if ((rc = ptdp_wait(&z->unit[u + 1].reduce)) != 0 || (rc = lesson_add_grad(dev, z, u + 1)) != 0)
                return rc;
        }
        if ((rc = lesson_reduce_scatter(dev, z, u, true)) != 0)
            return rc;
    }
    if ((rc = ptdp_wait(&z->unit[0].reduce)) != 0)   /* the last one: before the optimizer */
        return rc;
    return lesson_add_grad(dev, z, 0);
}

/* ------------------------------------------------------------ HSDP */

int lesson_hsdp_sum(ptdp_device *dev, lesson_zero3 *z, int u)
{
    lesson_unit *x = &z->unit[u];
    /* 1: inside my shard group, my shard of the sum over its N ranks */
    int rc = ptdp_reduce_scatter(z->shard, PTDP_IN_PLACE, x->g, x->numel, PTDP_REAL, PTDP_SUM);
    /* 2: that shard, summed over the R replicas: the sum over all dp ranks */
    if (rc == 0)
        rc = ptdp_all_reduce(z->replica, x->g + x->off, x->g + x->off, x->len, PTDP_REAL, PTDP_SUM);
    if (rc != 0)
        return rc;
    return lesson_add_grad(dev, z, u);
}
