/*
 * plan_layout.c — what a layout is, and whether it can run.
 *
 * A layout is one answer to "how do I cut this model over N GPUs":
 *
 *     N = dp x cp x tp x pp        M = B / (b x dp)
 *
 *   tp  tensor parallelism: each block's matrices split over tp GPUs
 *   pp  pipeline stages, run by a schedule (1f1b, gpipe, interleaved with
 *       v chunks per stage, zb-h1) over the M micro-batches of b sequences;
 *       asked for, dualpipev (pp devices, the model cut into 2 pp chunks as
 *       a V) or dualpipe (a stage of each of two copies a device)
 *   cp  context parallelism: each sequence's positions over cp GPUs
 *   dp  data parallelism over what is left, with a ZeRO stage
 *   ep  a mixture of experts' experts over ep of the dp x cp ranks
 *       (ep | dp cp, ep | E), their copies summed over the other
 *       dp cp / ep (the expert-data-parallel group)
 *   etp the experts' own TP size (MoE parallel folding, etp | tp): below
 *       tp each TP group's rows are routed in tp/etp slices, and ep cuts
 *       the tp/etp x dp x cp slices instead
 *   and how activations are kept: recompute none, selective or full, sp.
 *
 * A layout is valid exactly when `ptdp train` would run it: the planner
 * asks the training loop's own validation (ptdp_train_validate_layout,
 * every rule but this host's thread limit), so the two cannot disagree
 * about what divides.
 */
#include "ptdp/plan.h"

#include <stdio.h>
#include <string.h>

#include "ptdp/error.h"
#include "ptdp/model_plan.h"
#include "ptdp/models.h"
#include "ptdp/schedule.h"
#include "parallel/price_impl.h"
#include "plan/plan_impl.h"

static const char *const recompute_names[PTDP_RECOMPUTE_COUNT] = { "none", "selective", "full" };

const char *ptdp_recompute_name(ptdp_recompute r)
{
    return r >= 0 && r < PTDP_RECOMPUTE_COUNT ? recompute_names[r] : "?";
}

int ptdp_recompute_parse(const char *name)
{
    for (int r = 0; name != NULL && r < PTDP_RECOMPUTE_COUNT; r++)
        if (strcmp(name, recompute_names[r]) == 0)
            return r;
    return -1;
}

/* The models the planner prices (their caps say so). */
static bool plannable(const ptdp_model_caps *caps)
{
    return caps->plannable;
}

ptdp_plan_request ptdp_plan_request_defaults(void)
{
    ptdp_train_config t = ptdp_train_defaults();
    const ptdp_model_ops *ops = ptdp_model_first_with(plannable);
    ptdp_plan_request rq = {
        /* the registry's first plannable model, at its planning defaults */
        .model = ops != NULL && ops->plan != NULL ? ops->plan->defaults() : (ptdp_model_config){ 0 },
        .gpus = 1,
        .batch = 1,
        .profile = ptdp_profile_default(),
        .optimizer = t.optimizer,
        .bucket_mb = t.bucket_mb,
        .tp = -1, .pp = -1, .cp = -1, .zero = -1, .micro_batch_size = -1, .virtual_stages = -1,
        .recompute = -1, .sp = -1, .schedule = NULL, .ep = -1,
    };
    rq.model.ops = ops;
    return rq;
}

ptdp_pp_layout ptdp_plan_pp_layout(const ptdp_plan_layout *l)
{
    const ptdp_schedule_entry *e = l->schedule != NULL ? l->schedule : ptdp_schedule_default();
    return ptdp_pp_layout_make(e->layout, l->pp, l->virtual_stages);
}

bool ptdp_plan_monotone(const ptdp_plan_layout *l)
{
    const ptdp_schedule_entry *e = ptdp_plan_schedule(l);
    return ptdp_plan_chunks(l) == 1 && e->in_flight != NULL && !(e->caps & PTDP_SCHED_SPLIT_BACKWARD);
}

int ptdp_plan_chunks(const ptdp_plan_layout *l)
{
    return ptdp_plan_pp_layout(l).v;
}

void ptdp_plan_train_config(const ptdp_plan_request *rq, const ptdp_plan_layout *l, ptdp_train_config *cfg)
{
    *cfg = ptdp_train_defaults();
    cfg->model = rq->model;
    cfg->optimizer = rq->optimizer;
    cfg->bucket_mb = rq->bucket_mb;
    cfg->bf16 = rq->bf16;
    cfg->attention_tiled = rq->attention_tiled;
    cfg->fp8.recipe = rq->fp8;   /* train's FP8 rules (its tiles' splits) judge the layout too */
    /* --fp8-comm where this ptdp train sends FP8: EP's dispatch by a
     * row's tiles, ZeRO-3's gathers (priced in plan_time.c) */
    cfg->fp8.comm = rq->fp8_comm && rq->fp8 != NULL && ((!rq->fp8->whole_tensor && l->ep > 1) || l->zero == 3);
    cfg->batch = (int)rq->batch;
    cfg->dp = l->dp;
    cfg->tp = l->tp;
    cfg->pp = l->pp;
    cfg->cp = l->cp > 1 ? l->cp : 0;
    cfg->micro_batches = l->micro_batches;
    cfg->schedule = l->schedule;
    cfg->virtual_stages = l->virtual_stages > 1 ? l->virtual_stages : 0;
    cfg->recompute = l->recompute == PTDP_RECOMPUTE_FULL;
    cfg->recompute_core = l->recompute == PTDP_RECOMPUTE_SELECTIVE;
    cfg->sp = l->sp;
    cfg->zero = l->zero;
    cfg->overlap = l->overlap;
    cfg->ep = l->ep > 1 ? l->ep : 0;
    cfg->etp = ptdp_plan_fold_slices(l) > 1 ? l->etp : 0;   /* MoE parallel folding */
    /* ZeRO-3's options as ptdp train resolves them: hpZ's node group is
     * the profile's GPUs a node / tp DP ranks (1, which train's rules
     * refuse, when a node does not hold whole TP groups) */
    cfg->shard_group = rq->shard_group;
    cfg->zero_qwz = rq->zero_qwz;
    const int gpn = rq->profile != NULL ? rq->profile->gpus_per_node : 0;
    cfg->zero_hpz = !rq->zero_hpz ? 0 : gpn > 0 && gpn % l->tp == 0 ? gpn / l->tp : 1;
    /* qgZ (zero3_qgz.c): its codes' bits, its blocks, and the same node */
    cfg->zero_qgz = rq->zero_qgz;
    cfg->zero_qgz_block = rq->zero_qgz > 0 ? PTDP_QGZ_BLOCK : 0;
    cfg->zero_qgz_node = rq->zero_qgz <= 0 ? 0 : gpn > 0 && gpn % l->tp == 0 ? gpn / l->tp : 1;
}

int ptdp_plan_layout_check(const ptdp_plan_request *rq, const ptdp_plan_layout *l, char *msg, size_t len)
{
#define BAD(...) do { snprintf(msg, len, __VA_ARGS__); return PTDP_EINVAL; } while (0)
    const int cp = l->cp > 1 ? l->cp : 1;
    if (l->dp < 1 || l->tp < 1 || l->pp < 1 || l->cp < 1)
        BAD("dp %d, tp %d, pp %d, cp %d: each must be at least 1", l->dp, l->tp, l->pp, l->cp);
    if ((long long)l->dp * cp * l->tp * l->pp != rq->gpus)
        BAD("dp %d x cp %d x tp %d x pp %d = %lld GPUs, but --gpus is %d", l->dp, cp, l->tp, l->pp,
            (long long)l->dp * cp * l->tp * l->pp, rq->gpus);
    if (l->micro_batch_size < 1)
        BAD("--micro-batch-size %d: must be at least 1", l->micro_batch_size);
    if (rq->batch % ((long long)l->micro_batch_size * l->dp) != 0)
        BAD("--batch %lld must divide by --micro-batch-size %d x dp %d = %lld", rq->batch, l->micro_batch_size,
            l->dp, (long long)l->micro_batch_size * l->dp);
    if ((long long)l->micro_batches * l->micro_batch_size * l->dp != rq->batch)
        BAD("micro-batches %d x --micro-batch-size %d x dp %d is not --batch %lld", l->micro_batches,
            l->micro_batch_size, l->dp, rq->batch);
    if (rq->batch > 0x7fffffffLL)
        BAD("--batch %lld: at most %d sequences a step", rq->batch, 0x7fffffff);
#undef BAD
    ptdp_train_config cfg;
    ptdp_plan_train_config(rq, l, &cfg);
    return ptdp_train_validate_layout(&cfg, msg, len);
}

/* ------------------------------------------------ a mixture of experts */

int ptdp_plan_moe_blocks(const ptdp_plan_request *rq, int first, int n)
{
    const ptdp_model_plan *mp = ptdp_model_of(&rq->model)->plan;
    if (mp->experts == NULL || mp->experts(&rq->model) == 0 || n <= 0)
        return 0;
    return mp->moe_blocks(&rq->model, first, n);
}

bool ptdp_plan_moe_of(const ptdp_plan_request *rq, const ptdp_plan_layout *l, bool split, ptdp_plan_moe *out)
{
    const ptdp_model_plan *mp = ptdp_model_of(&rq->model)->plan;
    const int L = rq->model.layers;
    int layer = 0;   /* the first mixture: every one's numbers are alike */
    while (layer < L && ptdp_plan_moe_blocks(rq, layer, 1) == 0)
        layer++;
    if (layer == L)
        return false;
    return mp->moe(rq->profile, &rq->model, layer, l->micro_batch_size, l->tp, l->cp > 1 ? l->cp : 1,
                   l->ep > 1 ? l->ep : 1, l->etp, ptdp_plan_core_of(rq, l->recompute), split, rq->bf16,
                   rq->fp8 != NULL, out);
}
