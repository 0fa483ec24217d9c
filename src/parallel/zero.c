/*
 * zero.c — ZeRO's set-up and the calls that read its row: what a device
 * owns, the stores it keeps, and the trainer's calls around a step.
 *
 * zero.h has the idea; zero_stages.c the table, one row per stage.  Here
 * a stage is only its row: set-up asks it which ranges this device owns
 * (`own`, zero_own.c) and which states it shards, and makes the stores to
 * match; the trainer's calls run its hooks and operations (zero_sum.c,
 * zero3.c):
 *
 *   row->own          what I own: the whole buffer (plain DP), my shard of
 *                     every DP bucket (1), of every run of one replica
 *                     group (2), of every unit (3)
 *   the shard bits    the stores: the full buffers, or my shards of them
 *                     (gradients: 2, 3; parameters: 3), and bf16's master
 *   row->backward_*   around each backward (2: the full-size bucket)
 *   row->sum          once a step: the DP sum of what I own
 *   row->gather       after the optimizer: everybody's shards to everybody
 *
 * What I own is a list of ranges of the flat buffer, each with its place
 * `at` in the shard buffers (gradient shard, optimizer state, stage 3's
 * parameter shard): zero_own.c.
 */
#include "ptdp/zero.h"

#include <stdlib.h>
#include <string.h>

#include "ptdp/comm.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/mixed.h"
#include "ptdp/optim.h"
#include "parallel/dp_impl.h"
#include "parallel/model_impl.h"
#include "parallel/zero_impl.h"
#include "runtime/pool.h"

/* ------------------------------------------------------------ the stores */

/* Whether the model's unit events are served (zero3.c): the row gathers
 * units (ZeRO-3), or bf16 widens them. */
static bool uses_units(const ptdp_zero *z)
{
    return (z->row != NULL && z->row->shards_params) || z->store == PTDP_BF16;
}

/* bf16: the float master weights of what I own, bf16(initial value)
 * widened, so that the parameter the model sees is bf16(master) from the
 * first step on. */
static int make_master(ptdp_device *dev, ptdp_zero *z, const ptdp_model *m, size_t len)
{
    if ((z->master = ptdp_alloc(dev, len * sizeof(ptdp_real), PTDP_MEM_OPTIM, "optim.master")) == NULL)
        return PTDP_ENOMEM;
    for (int i = 0; i < z->nranges; i++)
        for (size_t k = z->ranges[i].begin; k < z->ranges[i].end; k++)
            z->master[z->ranges[i].at + (k - z->ranges[i].begin)] =
                ptdp_bf16_to_float(ptdp_bf16_from_float((float)m->flat_w[k]));
    return PTDP_OK;
}

/* What the model's initial (float) buffers become: the stores the row
 * keeps (zero_stages.c's table), in the store's type; under bf16 also the
 * master weights.  Then the model's float buffers go where something else
 * now holds them. */
static int make_stores(ptdp_device *dev, ptdp_zero *z, ptdp_model *m)
{
    const size_t es = ptdp_store_size(z->store), len = z->len > 0 ? z->len : 1;
    const bool bf16 = z->store == PTDP_BF16;
    const ptdp_zero_stage *row = z->row;
    if (bf16 && make_master(dev, z, m, len) != 0)
        return PTDP_ENOMEM;
    if (row->shards_params) {   /* my shards of every unit */
        if ((z->param_shard = ptdp_alloc(dev, len * es, PTDP_MEM_PARAMS, "zero3.param_shard")) == NULL)
            return PTDP_ENOMEM;
        for (int i = 0; i < z->nranges; i++)
            ptdp_store_from_real(z->store, ptdp_store_at(z->store, z->param_shard, z->ranges[i].at),
                                 m->flat_w + z->ranges[i].begin, z->ranges[i].end - z->ranges[i].begin);
    } else if (bf16) {
        if ((m->flat_w16 = ptdp_alloc(dev, (m->numel > 0 ? m->numel : 1) * es, PTDP_MEM_PARAMS, "params.bf16")) == NULL)
            return PTDP_ENOMEM;
        ptdp_store_from_real(PTDP_BF16, m->flat_w16, m->flat_w, m->numel);
    }
    if (row->shards_grads) {   /* the persistent gradient is my shard only */
        if ((z->grad_shard = ptdp_alloc(dev, len * es, PTDP_MEM_GRADS, row->grad_shard_tag)) == NULL)
            return PTDP_ENOMEM;
    } else if (bf16) {
        if ((m->flat_g16 = ptdp_alloc(dev, (m->numel > 0 ? m->numel : 1) * es, PTDP_MEM_GRADS, "grads.bf16")) == NULL)
            return PTDP_ENOMEM;
    }
    /* Stage 2 replaces the full-size gradient by a bucket that lives during
     * each backward; stage 3 and bf16 give the model its float views only
     * while it uses a unit (zero3.c). */
    if (row->shards_grads || bf16) {
        ptdp_free(dev, m->flat_g);
        ptdp_zero_point_gradients(m, NULL);
    }
    if (uses_units(z)) {
        ptdp_free(dev, m->flat_w);
        m->flat_w = NULL;
        for (int i = 0; i < m->nparams; i++)
            m->params[i].w.data = NULL;
        ptdp_zero3_hook(m, z);
    }
    return PTDP_OK;
}

/* ----------------------------------------------------------------- set-up */

/* DP's buckets and shards run over each parameter's replicas: DP's, or
 * (when the row keeps parameters whole) an expert's expert-DP group. */
static int check_replicas_groups(ptdp_device *dev, const ptdp_zero *z, const ptdp_model *m)
{
    for (int i = 0; i < m->nparams; i++) {
        const ptdp_group g = m->params[i].sum.replicas;
        if (g != PTDP_GROUP_DP && (g != PTDP_GROUP_EDP || z->row->shards_params))
            return ptdp_fail(dev, PTDP_EINVAL, "%s is replicated over mesh group %d: the gradient sums here are "
                             "over DP's replicas, or the expert-DP group's without ZeRO-3 (model.h, "
                             "ptdp_grad_sum)", m->params[i].name, (int)g);
        if (ptdp_mesh_group(m->mesh, g) == NULL)
            return ptdp_fail(dev, PTDP_EINVAL, "%s is replicated over mesh group %d, which was not built (mesh.h)",
                             m->params[i].name, (int)g);
    }
    return PTDP_OK;
}

int ptdp_zero_init(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, int stage)
{
    return ptdp_zero_init_buckets(dev, z, m, stage, 0);
}

int ptdp_zero_init_buckets(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, int stage, double bucket_mb)
{
    memset(z, 0, sizeof *z);
    if ((z->row = ptdp_zero_stage_of(stage)) == NULL)
        return ptdp_fail(dev, PTDP_EINVAL, "ZeRO stage %d: only 0, 1, 2 and 3 exist here", stage);
    if (ptdp_model_check_groups(dev, m) != 0)
        return PTDP_EINVAL;
    if (ptdp_zero_hsdp_init(dev, z, m) != 0)   /* the DP group, or HSDP's shard group */
        return PTDP_EINVAL;
    if (ptdp_zero_hpz_init(dev, z, m) != 0)    /* --zero-hpz: the node group inside it */
        return PTDP_EINVAL;
    if (check_replicas_groups(dev, z, m) != 0)
        return PTDP_EINVAL;
    z->numel = m->numel;
    z->store = ptdp_model_store(m);
#ifdef PTDP_DOUBLE
    if (z->store == PTDP_BF16)
        return ptdp_fail(dev, PTDP_EINVAL, "bf16 mixed precision keeps float master weights: it needs the float "
                         "build (ptdp), not the double one");
#endif
    int rc = uses_units(z) ? ptdp_zero3_init(dev, z, m) : PTDP_OK;   /* the units */
    if (rc == 0)
        rc = z->row->own(dev, z, m, bucket_mb);
    if (rc != 0)
        return rc;
    if (ptdp_zero_norm_terms(z, m) != 0)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    return make_stores(dev, z, m);
}

void ptdp_zero_free(ptdp_device *dev, ptdp_zero *z, ptdp_model *m)
{
    ptdp_free(dev, z->opt_b);
    ptdp_free(dev, z->opt_a);
    z->opt_a = z->opt_b = NULL;
    if (z->bucket != NULL) {          /* a backward that failed half-way */
        ptdp_free(dev, z->bucket);
        ptdp_zero_point_gradients(m, NULL);
        if (z->store == PTDP_BF16)
            m->flat_g16 = NULL;
        z->bucket = NULL;
    }
    if (z->pending != NULL) {         /* a step that failed before its wait */
        ptdp_free(dev, z->pending);
        z->pending = NULL;
    }
    if (uses_units(z))
        ptdp_zero3_free(dev, z, m);
    ptdp_free(dev, z->grad_shard);
    z->grad_shard = NULL;
    ptdp_free(dev, z->param_shard);
    z->param_shard = NULL;
    ptdp_free(dev, z->master);
    z->master = NULL;
    free(z->norm);
    z->norm = NULL;
    z->nnorm = 0;
    free(z->ranges);
    z->ranges = NULL;
    z->nranges = 0;
    ptdp_ddp_free(&z->buckets);   /* the data of a started collective has moved at once (stream.c) */
}

/* ------------------------------------------------ the trainer's calls */

void ptdp_zero_set_overlap(ptdp_zero *z, bool overlap)
{
    z->overlap = overlap;
}

int ptdp_zero_optim_init(ptdp_device *dev, ptdp_zero *z, const ptdp_optimizer *o)
{
    z->optim = *o;
    size_t bytes = z->len * sizeof(ptdp_real);
    if (o->kind == PTDP_OPT_ADAMW) {
        z->opt_a = ptdp_alloc(dev, bytes, PTDP_MEM_OPTIM, "optim.exp_avg");
        z->opt_b = z->opt_a ? ptdp_alloc(dev, bytes, PTDP_MEM_OPTIM, "optim.exp_avg_sq") : NULL;
        if (z->opt_b == NULL)
            return PTDP_ENOMEM;
    } else if (o->momentum > 0) {
        if ((z->opt_a = ptdp_alloc(dev, bytes, PTDP_MEM_OPTIM, "optim.momentum_buffer")) == NULL)
            return PTDP_ENOMEM;
    }
    return PTDP_OK;
}

bool ptdp_zero_backward_hooks(const ptdp_zero *z)
{
    return z->row->backward_begin != NULL || z->row->backward_end != NULL || (z->overlap && z->row->buckets);
}

bool ptdp_zero_freed_model_buffers(const ptdp_zero *z)
{
    return z->row->shards_grads || z->store == PTDP_BF16;
}

int ptdp_zero_backward_begin(ptdp_device *dev, ptdp_zero *z, ptdp_model *m)
{
    return z->row->backward_begin != NULL ? z->row->backward_begin(dev, z, m) : PTDP_OK;
}

int ptdp_zero_backward_end(ptdp_device *dev, ptdp_zero *z, ptdp_model *m)
{
    return z->row->backward_end != NULL ? z->row->backward_end(dev, z, m) : PTDP_OK;
}

/* With --overlap the stage's last backward of the step starts each DP
 * bucket's sum (all-reduce, or ZeRO-1's reduce-scatter) as soon as the
 * backward has completed it (dp.h); the rest start after.  (Rows without
 * buckets start theirs non-blocking from their own operations.) */
static bool arms_buckets(const ptdp_zero *z, bool last)
{
    return z->overlap && last && z->row->buckets;
}

int ptdp_zero_before_backward(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, bool last)
{
    int rc = ptdp_zero_backward_begin(dev, z, m);
    if (rc == 0 && arms_buckets(z, last))
        rc = ptdp_ddp_overlap_begin(z->dp, &z->buckets, m);
    return rc;
}

int ptdp_zero_after_backward(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, bool last)
{
    int rc = ptdp_zero_backward_end(dev, z, m);
    if (rc == 0 && arms_buckets(z, last))
        rc = ptdp_ddp_overlap_end(dev, &z->buckets, m);
    return rc;
}

int ptdp_zero_gather_params(ptdp_zero *z, ptdp_model *m)
{
    return z->row->gather != NULL ? z->row->gather(z, m) : PTDP_OK;
}

/* ------------------------------------------- what the optimizer reads */

void *ptdp_zero_param_shard(ptdp_zero *z, ptdp_model *m)
{
    if (z->row->shards_params)
        return z->param_shard;
    return ptdp_store_at(z->store, z->store == PTDP_BF16 ? (void *)m->flat_w16 : (void *)m->flat_w, z->off);
}

void *ptdp_zero_range_params(ptdp_zero *z, ptdp_model *m, int i)
{
    if (z->row->shards_params)
        return ptdp_store_at(z->store, z->param_shard, z->ranges[i].at);
    return ptdp_store_at(z->store, z->store == PTDP_BF16 ? (void *)m->flat_w16 : (void *)m->flat_w,
                         z->ranges[i].begin);
}

void *ptdp_zero_range_grad(const ptdp_zero *z, void *grad, int i)
{
    return ptdp_store_at(z->store, grad, ptdp_zero_grad_index(z, z->ranges[i].begin, z->ranges[i].at));
}

void ptdp_zero_clear_gradients(ptdp_zero *z, ptdp_model *m)
{
    if (z->row->shards_grads)
        ptdp_pool_clear(z->grad_shard, z->len * ptdp_store_size(z->store));
    else
        ptdp_pool_clear(ptdp_zero_grad_store(z, m), z->numel * ptdp_store_size(z->store));
}

/* ------------------------------------- for checkpoints and checks */

int ptdp_zero_check_replicas(ptdp_device *dev, ptdp_zero *z, const ptdp_model *m, long step)
{
    if (z->row->shards_params)   /* no whole replicas: the shard's, across HSDP's replica groups */
        return ptdp_zero_hsdp_check_replicas(dev, z, step);
    return ptdp_ddp_check_replicas(dev, m->mesh->dp_comm, m, step);   /* every DP rank, HSDP's too */
}

ptdp_real *ptdp_zero_optim_state(const ptdp_zero *z, int slot)
{
    return slot == 0 ? z->opt_a : slot == 1 ? z->opt_b : NULL;
}

bool ptdp_zero_shards_optim(const ptdp_zero *z)
{
    return z->row->shards_optim;
}

bool ptdp_zero_params_replicated(const ptdp_zero *z)
{
    return !z->row->shards_params;
}

ptdp_real *ptdp_zero_exact_params(const ptdp_zero *z)
{
    if (z->store == PTDP_BF16)
        return z->master;
    return z->row->shards_params ? (ptdp_real *)z->param_shard : NULL;
}

void ptdp_zero_params_written(ptdp_zero *z)
{
    if (z->store == PTDP_BF16 && z->row->shards_params)   /* my bf16 shards: bf16 of the master */
        ptdp_store_from_real(PTDP_BF16, z->param_shard, z->master, z->len);
}
