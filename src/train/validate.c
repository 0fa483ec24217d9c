/*
 * validate.c — every rule a training run must pass before its first step,
 * in the words of the flags (train.h: ptdp_train_validate).
 *
 * The rules ask the model what it supports (its ptdp_model_caps, model.h),
 * never which model it is:
 *
 *   --cp, --sp, --token-slices   need caps.sequences (and the split's own
 *                                capability), and divide ops->positions
 *   --recompute selective        needs caps.attention
 *   --cp-algo a2a                needs --cp 2+ and ops->heads, its heads per
 *                                TP rank divisible by --cp (ulysses.h)
 *   --schedule S                 its registry row's counts (schedule.h); a
 *                                W phase needs a split backward
 *                                (ops->backward_input); bf16, ZeRO-3 and
 *                                --overlap as the row allows
 *                                (ptdp_schedule_refuses)
 *   shapes under tp x pp         the model's own ops->check
 *   the rest of the layout       the model's own ops->check_run, if any
 *
 *   validate ─┬─ mesh_rules        devices, their product, the host's limit
 *             ├─ batch_rules       micro-batches, batch, the model's shapes
 *             ├─ sequence_rules    recomputation, CP, SP
 *             ├─ pipeline_rules    schedule, token slices, stages, pieces
 *             ├─ optimizer_rules   lr, momentum, decay, clip, dropout, ZeRO
 *             ├─ combination_rules bf16, ZeRO-3, overlap against the rest
 *             └─ resume_rules      the checkpoint against the flags
 *
 * Each returns 0 or PTDP_EINVAL with the message written; the first
 * failing rule speaks.
 */
#include "ptdp/train.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ptdp/error.h"
#include "ptdp/models.h"
#include "ptdp/schedule.h"
#include "ptdp/state.h"
#include "ptdp/zero.h"
#include "parallel/schedule_impl.h"

ptdp_train_config ptdp_train_defaults(void)
{
    ptdp_train_config c = {
        .model = ptdp_model_default_config(),
        .dp = 1, .tp = 1, .pp = 1, .micro_batches = 1, .batch = 64, .steps = 10,
        .optimizer = PTDP_OPT_ADAMW, .lr = 1e-3, .bucket_mb = 0.25, .seed = 1,
        .schedule = ptdp_schedule_default(),
    };
    return c;
}


#define BAD(...) do { snprintf(msg, n, __VA_ARGS__); return PTDP_EINVAL; } while (0)

/* The devices: each size at least 1, and (with `threads`) no more than
 * this host runs, PTDP_MAX_DEVICES device threads. */
static int mesh_rules(const ptdp_train_config *c, bool threads, char *msg, size_t n)
{
    if (c->dp < 1) BAD("--dp %d: must be at least 1", c->dp);
    if (c->tp < 1) BAD("--tp %d: must be at least 1", c->tp);
    if (c->pp < 1) BAD("--pp %d: must be at least 1", c->pp);
    if (threads && (long)c->dp * c->tp * c->pp > PTDP_MAX_DEVICES) {
        long mp = (long)c->tp * c->pp;
        if (mp <= PTDP_MAX_DEVICES)
            BAD("--dp %d x --tp %d x --pp %d = %ld devices: at most %d are supported (with --tp %d and --pp %d, "
                "--dp at most %ld)", c->dp, c->tp, c->pp, (long)c->dp * mp, PTDP_MAX_DEVICES, c->tp, c->pp,
                PTDP_MAX_DEVICES / mp);
        BAD("--dp %d x --tp %d x --pp %d = %ld devices: at most %d are supported (--tp x --pp alone is %ld)",
            c->dp, c->tp, c->pp, (long)c->dp * mp, PTDP_MAX_DEVICES, mp);
    }
    if (c->cp < 0) BAD("--cp %d: must be at least 1", c->cp);
    if (c->ep < 0) BAD("--ep %d: must be at least 1", c->ep);
    if (c->ep > 1 && (c->etp <= 0 || c->etp == c->tp) && (c->dp * ptdp_train_cp(c)) % c->ep != 0) {
        int d = c->dp;
        while ((d * ptdp_train_cp(c)) % c->ep != 0)
            d++;
        BAD("--ep %d must divide --dp x --cp = %d: expert parallelism spreads the experts over data-parallel "
            "ranks (try --dp %d)", c->ep, c->dp * ptdp_train_cp(c), d);
    }
    if (c->etp < 0) BAD("--etp %d: must be at least 1", c->etp);
    if (c->etp > 0 && c->tp % c->etp != 0)
        BAD("--etp %d must divide --tp %d: the experts' TP groups are cut from attention's, each TP group's "
            "tokens shared out over its tp / etp slices (try --etp 1)", c->etp, c->tp);
    const int etp = c->etp > 0 ? c->etp : c->tp, stage = c->tp * ptdp_train_cp(c) * c->dp;
    if (c->ep > 1 && c->etp > 0 && stage % (etp * c->ep) != 0)
        BAD("--etp %d x --ep %d = %d must divide a stage's --tp x --cp x --dp = %d ranks: MoE parallel folding "
            "carves the experts' TP and EP groups from them (Megatron's rule)", c->etp, c->ep, etp * c->ep, stage);
    if (threads && c->cp > 1 && (long)c->dp * c->cp * c->tp * c->pp > PTDP_MAX_DEVICES)
        BAD("--dp %d x --cp %d x --tp %d x --pp %d = %ld devices: at most %d are supported", c->dp, c->cp, c->tp,
            c->pp, (long)c->dp * c->cp * c->tp * c->pp, PTDP_MAX_DEVICES);
    return PTDP_OK;
}

/* MoE parallel folding (--etp below --tp, moe_fold.c): each TP group's
 * micro-batch is shared out by whole sequences over its tp / etp slices,
 * so they must divide it; and the experts' gradients are summed over an
 * expert-DP group that HSDP's shard groups do not cut. */
static int fold_rules(const ptdp_train_config *c, char *msg, size_t n)
{
    if (c->etp <= 0 || c->etp == c->tp)
        return PTDP_OK;
    const int slices = c->tp / c->etp, B = c->batch / (c->dp * c->micro_batches);
    if (B % slices != 0)
        BAD("--etp %d with --tp %d: each TP rank routes 1/%d of a micro-batch's %d sequences (whole sequences, "
            "so that a sequence's capacity and balance loss stay on one device); give --batch a multiple of "
            "--dp x --micro-batches x %d = %d", c->etp, c->tp, slices, B, slices, c->dp * c->micro_batches * slices);
    if (c->shard_group > 0 && c->shard_group < c->dp)
        BAD("--shard-group %d with --etp %d: the experts' gradients are summed over the expert-DP group, which "
            "shard groups do not cut here; leave --etp or --shard-group out", c->shard_group, c->etp);
    return PTDP_OK;
}

/* The model's own shapes, the batch and its cut into micro-batches, and
 * the shapes under tp x pp. */
static int batch_rules(const ptdp_train_config *c, char *msg, size_t n)
{
    if (ptdp_model_check(&c->model, 1, 1, msg, n) != 0)   /* the model's own shapes */
        return PTDP_EINVAL;
    if (c->micro_batches < 1) BAD("--micro-batches %d: must be at least 1", c->micro_batches);
    if (c->batch < 1) BAD("--batch %d: must be at least 1", c->batch);
    if (c->steps < 0) BAD("--steps %d: must not be negative", c->steps);
    int per = c->dp * c->micro_batches;
    if (c->batch % per != 0) {
        int lo = c->batch / per * per, hi = lo + per;
        if (lo == 0)
            BAD("--batch %d must be divisible by --dp x --micro-batches = %d x %d = %d (try --batch %d)",
                c->batch, c->dp, c->micro_batches, per, hi);
        BAD("--batch %d must be divisible by --dp x --micro-batches = %d x %d = %d (nearest valid: %d or %d)",
            c->batch, c->dp, c->micro_batches, per, lo, hi);
    }
    if (ptdp_model_check(&c->model, c->tp, c->pp, msg, n) != 0)   /* and how they split */
        return PTDP_EINVAL;
    return fold_rules(c, msg, n);
}

/* Which capability a rule needs, for ptdp_model_first_with. */
static bool has_cp(const ptdp_model_caps *k) { return k->sequences && k->context_parallel; }
static bool has_sp(const ptdp_model_caps *k) { return k->sequences && k->sequence_parallel; }
static bool has_slices(const ptdp_model_caps *k) { return k->sequences && k->token_slices; }

/* "--model gpt": a registered model that has what the rule needs (the
 * first), or a description when none has. */
static const char *model_with(bool (*has)(const ptdp_model_caps *), const char *none, char *buf, size_t len)
{
    const ptdp_model_ops *ops = ptdp_model_first_with(has);
    if (ops == NULL)
        return none;
    snprintf(buf, len, "--model %s", ops->name);
    return buf;
}

/* The model's name in a sentence: "the MLP". */
static const char *title_of(const ptdp_model_ops *ops)
{
    return ops->caps.title ? ops->caps.title : ops->name;
}

/* A model must have what a flag needs: a message naming both, or 0.
 * Selective recomputation and CP here; SP (supports_sp) after CP's own
 * rules, the order the messages have always come in. */
static int supports_recompute_cp(const ptdp_train_config *c, char *msg, size_t n)
{
    const ptdp_model_ops *ops = ptdp_model_of(&c->model);
    const ptdp_model_caps *k = &ops->caps;
    const char *t = title_of(ops);
    char w[64];
    if (c->recompute_core && !k->attention)
        BAD("--recompute selective redoes the attention core, and %s has no attention: use --recompute "
            "(full) for %s", t, t);
    if (c->attention_tiled && !k->attention)
        BAD("--attention tiled computes a model's attention in tiles, and %s has no attention: leave it out "
            "for %s", t, t);
    if (c->recompute_core && c->recompute)
        BAD("--recompute is either full or selective, not both");
    if (c->cp > 1 && !k->sequences)
        BAD("--cp %d splits each sequence over devices, and %s's samples have no sequence: context "
            "parallelism is for %s", c->cp, t, model_with(has_cp, "a model of sequences", w, sizeof w));
    if (c->cp > 1 && !k->context_parallel)
        BAD("--cp %d splits each sequence over devices, and %s cannot split its sequences: context "
            "parallelism is for %s", c->cp, t, model_with(has_cp, "another model", w, sizeof w));
    return PTDP_OK;
}

static int supports_sp(const ptdp_train_config *c, char *msg, size_t n)
{
    const ptdp_model_ops *ops = ptdp_model_of(&c->model);
    const ptdp_model_caps *k = &ops->caps;
    const char *t = title_of(ops);
    char w[64];
    if (c->sp && !k->sequences)
        BAD("--sp splits the sequence, and %s has none: sequence parallelism is for %s", t,
            model_with(has_sp, "a model of sequences", w, sizeof w));
    if (c->sp && !k->sequence_parallel)
        BAD("--sp splits the sequence, and %s cannot split its own: sequence parallelism is for %s", t,
            model_with(has_sp, "another model", w, sizeof w));
    return PTDP_OK;
}

/* --cp-algo a2a (ulysses.h): a CP group of N shares each TP rank's heads,
 * N of them a rank; a model without heads cannot. */
static int ulysses_rules(const ptdp_train_config *c, char *msg, size_t n)
{
    if (!c->cp_a2a)
        return PTDP_OK;
    if (c->cp <= 1)
        BAD("--cp-algo a2a needs --cp 2 or more (it trades the CP group's split of the positions for one of "
            "the heads)");
    const ptdp_model_ops *ops = ptdp_model_of(&c->model);
    const int H = ops->caps.attention && ops->heads != NULL ? ops->heads(&c->model) : 0;
    if (H < 1)
        BAD("--cp-algo a2a splits attention's heads over the CP group, and %s has no heads: use --cp-algo ring",
            title_of(ops));
    if ((H / c->tp) % c->cp != 0) {
        char valid[128] = "";
        size_t len = 0;
        for (int k = 2; k <= H / c->tp && len + 8 < sizeof valid; k++)
            if ((H / c->tp) % k == 0)
                len += (size_t)snprintf(valid + len, sizeof valid - len, "%s%d", len ? ", " : "", k);
        BAD("--cp-algo a2a with --cp %d: each TP rank's %d heads (--heads %d / --tp %d) must divide by --cp %d, "
            "a rank taking whole heads (valid --cp: %s; or --cp-algo ring)", c->cp, H / c->tp, H, c->tp, c->cp,
            len ? valid : "none");
    }
    return PTDP_OK;
}

/* What splits or recomputes inside a sample: the model must support it
 * (supports_…) and its T positions (ops->positions) must divide. */
static int sequence_rules(const ptdp_train_config *c, char *msg, size_t n)
{
    if (supports_recompute_cp(c, msg, n) != 0)
        return PTDP_EINVAL;
    const int T = ptdp_model_positions(&c->model);
    if (c->cp > 1) {
        const int parts = c->cp_contiguous ? c->cp : 2 * c->cp;
        if (T % parts != 0) {
            int lo = T / parts * parts;
            BAD("--cp %d: --seq-len %d must divide into %d %s chunks (%s; try --seq-len %d%s%d)", c->cp, T,
                parts, c->cp_contiguous ? "contiguous" : "zigzag",
                c->cp_contiguous ? "one per CP rank" : "two per CP rank, 2 x cp", lo >= 2 * parts ? lo : lo + parts,
                lo >= 2 * parts ? " or " : " or ", lo + (lo >= 2 * parts ? parts : 2 * parts));
        }
        if (c->sp && (T / c->cp) % c->tp != 0)
            BAD("--sp with --cp %d: each device's %d positions must divide by --tp %d", c->cp, T / c->cp, c->tp);
    }
    if (c->cp_contiguous && c->cp <= 1)
        BAD("--cp-layout contiguous needs --cp 2 or more");
    if (ulysses_rules(c, msg, n) != 0)
        return PTDP_EINVAL;
    if (supports_sp(c, msg, n) != 0)
        return PTDP_EINVAL;
    if (c->sp && c->tp < 2)
        BAD("--sp shares the TP group's work along the sequence: it needs --tp 2 or more");
    if (c->sp && T % c->tp != 0) {
        int lo = T / c->tp * c->tp;
        if (lo >= 2)
            BAD("--sp: --seq-len %d must divide by --tp %d, each rank holding seq-len / tp positions "
                "(nearest valid: --seq-len %d or %d)", T, c->tp, lo, lo + c->tp);
        BAD("--sp: --seq-len %d must divide by --tp %d, each rank holding seq-len / tp positions "
            "(try --seq-len %d)", T, c->tp, lo + c->tp);
    }
    return PTDP_OK;
}

/* The schedule's row against the flags that ask something of it: the
 * --virtual-stages flag as typed (one rule with ptdp schedule and ptdp
 * plan: a V or two copies hold two chunks a device, and take no
 * --virtual-stages), the counts of the layout's v chunks, and
 * --no-pair-overlap, which needs F&B pairs as --virtual-stages needs
 * chunks. */
static int schedule_flags(const ptdp_train_config *c, const ptdp_schedule_entry *e, int v, char *msg, size_t n)
{
    if (ptdp_schedule_check_flag_v(e, c->virtual_stages, msg, n) != 0 ||
        ptdp_schedule_check_row(e, c->pp, c->micro_batches, v, msg, n) != 0)
        return PTDP_EINVAL;
    if (c->serial_pairs && !(e->caps & PTDP_SCHED_PAIRS)) {
        char pairs[64];
        ptdp_schedule_names_with(PTDP_SCHED_PAIRS, 0, " or ", pairs, sizeof pairs);
        BAD("--no-pair-overlap times the all-to-alls of a schedule's overlapped F&B pairs apart, and --schedule %s "
            "runs no pairs: use --schedule %s, or leave --no-pair-overlap out", e->name, pairs);
    }
    return PTDP_OK;
}

/* The schedule, its token slices, and the cut of the blocks into stages
 * and pieces. */
static int pipeline_rules(const ptdp_train_config *c, char *msg, size_t n)
{
    const ptdp_model_config *m = &c->model;
    if (c->virtual_stages < 0)
        BAD("--virtual-stages %d: must be at least 1 (model chunks per pipeline stage)", c->virtual_stages);
    /* The schedule's own counts for this pp, m and v (its registry row):
     * --virtual-stages needs a schedule with chunks, … */
    const ptdp_schedule_entry *e = ptdp_train_schedule(c);
    const ptdp_pp_layout l = ptdp_train_layout(c);
    const int v = l.v;
    if (schedule_flags(c, e, v, msg, n) != 0)
        return PTDP_EINVAL;
    const ptdp_model_ops *ops = ptdp_model_of(m);
    if ((e->caps & PTDP_SCHED_SPLIT_BACKWARD) && ops->backward_input == NULL)
        BAD("--schedule %s splits each backward into B and W, and %s cannot split its backward: use "
            "--schedule %s", e->name, title_of(ops), ptdp_schedule_plain_names());
    if (c->token_slices < 0)
        BAD("--token-slices %d: must be at least 1 (slices of each sequence)", c->token_slices);
    if (c->token_slices > 1) {
        const int k = c->token_slices;
        char w[64];
        if (!ops->caps.sequences)
            BAD("--token-slices %d cuts each sequence into slices of positions, and %s's samples have no "
                "sequence: TeraPipe is for %s", k, title_of(ops),
                model_with(has_slices, "a model of sequences", w, sizeof w));
        if (!ops->caps.token_slices)
            BAD("--token-slices %d cuts each sequence into slices of positions, and %s cannot run a slice "
                "alone: TeraPipe is for %s", k, title_of(ops),
                model_with(has_slices, "another model", w, sizeof w));
        const int T = ptdp_model_positions(m);
        if (k > T)
            BAD("--token-slices %d: more slices than --seq-len %d positions (a slice needs at least one: "
                "--token-slices 1 to %d)", k, T, T);
        if (c->cp > 1)
            BAD("--token-slices %d and --cp %d both cut the sequence (one in time, one over devices): use one "
                "of them", k, c->cp);
        if (!(e->caps & PTDP_SCHED_TOKEN_SLICES)) {
            const ptdp_schedule_entry *with = ptdp_schedule_first_with(PTDP_SCHED_TOKEN_SLICES);
            BAD("--token-slices %d runs each sequence's slices forward in order and backward last first, as "
                "GPipe does its micro-batches: use --schedule %s (not %s)", k, with ? with->name : "with token slices",
                e->name);
        }
        for (int j = 0; c->sp && j < k; j++) {
            size_t off, len;
            ptdp_share((size_t)T, k, j, &off, &len);
            if (len % (size_t)c->tp != 0)
                BAD("--token-slices %d with --sp: slice %d holds %zu positions, which do not divide by --tp %d "
                    "(every slice's positions are shared out over the TP group)", k, j, len, c->tp);
        }
    }
    if (c->pp > m->layers)
        BAD("--pp %d: more stages than --layers %d (each stage needs at least one block: --pp 1 to %d)",
            c->pp, m->layers, m->layers);
    /* each copy's model chunks (DualPipe: two copies of pp; --pp > --layers is refused above) */
    const int nchunks = ptdp_pp_layout_chunks(&l);
    if ((long)c->pp * v > m->layers && l.shape == PTDP_CHUNKS_V)
        BAD("--layers %d cannot be cut into the %d stages of --schedule %s on --pp %d (2 x --pp, a V): need "
            "--layers >= %d", m->layers, 2 * c->pp, e->name, c->pp, 2 * c->pp);
    if ((long)nchunks > m->layers)
        BAD("--layers %d cannot be cut into %d pieces for --pp %d --virtual-stages %d: need --layers >= %d "
            "(or a smaller --virtual-stages)", m->layers, c->pp * v, c->pp, v, c->pp * v);
    if (c->stage_layers != NULL) {
        int sum = 0;
        for (int s = 0; s < nchunks; s++) {
            if (c->stage_layers[s] < 1 && nchunks > c->pp)
                BAD("--stage-layers: piece %d (stage %d, chunk %d) has %d blocks; every piece needs at least 1",
                    s, s % c->pp, s / c->pp, c->stage_layers[s]);
            if (c->stage_layers[s] < 1)
                BAD("--stage-layers: stage %d has %d blocks; every stage needs at least 1", s, c->stage_layers[s]);
            sum += c->stage_layers[s];
        }
        if (sum != m->layers)
            BAD("--stage-layers adds up to %d blocks, but --layers is %d", sum, m->layers);
    }
    return PTDP_OK;
}

/* The optimizer's numbers, dropout and the ZeRO stage. */
static int optimizer_rules(const ptdp_train_config *c, char *msg, size_t n)
{
    if (!(c->lr > 0) || !isfinite(c->lr)) BAD("--lr %g: must be a positive number", c->lr);
    if (c->momentum < 0 || c->momentum >= 1) BAD("--momentum %g: must be in [0, 1)", c->momentum);
    if (c->weight_decay < 0) BAD("--weight-decay %g: must not be negative", c->weight_decay);
    if (c->clip_grad < 0) BAD("--clip-grad %g: must not be negative (0 = off)", c->clip_grad);
    if (!(c->bucket_mb > 0)) BAD("--bucket-mb %g: must be positive", c->bucket_mb);
    if (c->dropout < 0 || c->dropout >= 1) BAD("--dropout %g: must be in [0, 1)", c->dropout);
    if (ptdp_zero_stage_of(c->zero) == NULL)
        BAD("--zero %d: the ZeRO stage must be 0 (off), 1 (optimizer state), 2 (+ gradients) or 3 (+ parameters)",
            c->zero);
    return PTDP_OK;
}

/* --shard-group N (HSDP, zero_hsdp.c): ZeRO's shards inside N consecutive
 * DP ranks, so it needs ZeRO and an N that cuts dp into equal groups. */
static int shard_group_rules(const ptdp_train_config *c, char *msg, size_t n)
{
    const int N = c->shard_group;
    if (N == 0)
        return PTDP_OK;   /* not given: the whole DP group */
    if (N < 0) BAD("--shard-group %d: must be at least 1", N);
    if (c->zero < 1)
        BAD("--shard-group %d shards ZeRO's states inside groups of DP ranks: it needs --zero 1, 2 or 3 "
            "(--zero is %d)", N, c->zero);
    if (N > c->dp)
        BAD("--shard-group %d is more than --dp %d: a shard group is N of the data-parallel ranks; use a "
            "divisor of %d", N, c->dp, c->dp);
    if (c->dp % N != 0)
        BAD("--shard-group %d must divide --dp %d: the DP ranks are cut into dp / N shard groups of N; use a "
            "divisor of %d", N, c->dp, c->dp);
    if (ptdp_train_cp(c) > 1 && N < c->dp)
        BAD("--shard-group %d with --cp %d: shard groups cut the DP ranks alone here, and with context "
            "parallelism the gradient's group is dp x cp; leave --cp or --shard-group out", N, c->cp);
    if (c->ep > 1 && N < c->dp)
        BAD("--shard-group %d with --ep %d: the experts' gradients are summed over the expert-DP group, which "
            "shard groups do not cut here; leave --ep or --shard-group out", N, c->ep);
    return PTDP_OK;
}

/* ZeRO++'s hpZ (zero_hpz.c): node groups of k DP ranks cutting ZeRO-3's
 * group (the DP group, or the shard group) into two or more, each of 2 or
 * more (the command derives k from the profile's GPUs a node). */
static int hpz_rules(const ptdp_train_config *c, char *msg, size_t n)
{
    const int k = c->zero_hpz, G = c->shard_group > 0 ? c->shard_group : c->dp;
    if (k == 0)
        return PTDP_OK;
    if (c->zero != 3)
        BAD("--zero-hpz needs --zero 3 (ZeRO++'s secondary partition of ZeRO-3's parameters); --zero is %d", c->zero);
    if (k < 2 || k >= G || G % k != 0)
        BAD("--zero-hpz: node groups of %d DP ranks must cut ZeRO-3's group of %d into two or more groups of 2 "
            "or more", k, G);
    if (ptdp_train_cp(c) > 1)
        BAD("--zero-hpz with --cp %d: its node groups cut the DP ranks alone here; leave --cp or --zero-hpz out",
            c->cp);
    return PTDP_OK;
}

/* ZeRO++'s qwZ (zero3_qwz.c): ZeRO-3's forward gathers in INT8.  Its one
 * device for --check quantizes each unit as its shards would (float: in
 * place; bf16: as ZeRO widens it); a recomputed forward runs inside the
 * backward's exact gather, which the one device (no recomputation) cannot
 * follow. */
static int qwz_rules(const ptdp_train_config *c, char *msg, size_t n)
{
    if (c->zero_qwz == 0)
        return PTDP_OK;
    if (c->zero_qwz < 0 || c->zero_qwz > 1 << 24)
        BAD("--zero-quant-block %d: must be between 1 and 16777216 elements", c->zero_qwz);
    if (c->zero != 3)
        BAD("--zero-qwz quantizes ZeRO-3's parameter gathers: it needs --zero 3; --zero is %d", c->zero);
    if (c->zero_hpz > 0)
        BAD("--zero-qwz with --zero-hpz: hpZ keeps the forward's gathered unit for the backward, which qwZ "
            "gathers exact; the two are not built together: leave one out");
    if (c->recompute)
        BAD("--zero-qwz with --recompute: a recomputed forward runs inside the backward's exact gather, so it "
            "would not see the forward's quantized weights; use --recompute selective or leave it out");
    return PTDP_OK;
}

/* ZeRO++'s qgZ (zero3_qgz.c): ZeRO-3's gradient reduce-scatter as two
 * quantized all-to-alls, inside the node (k DP ranks, from the profile)
 * and across nodes.  Float alone: bf16 would quantize gradients already
 * rounded, which its one device (unsharded stores) cannot follow; no
 * --overlap (the all-to-alls block); no CP or EP (their gradients' groups
 * are not the node's DP ranks alone). */
static int qgz_rules(const ptdp_train_config *c, char *msg, size_t n)
{
    const int k = c->zero_qgz_node, G = c->shard_group > 0 ? c->shard_group : c->dp;
    if (c->zero_qgz == 0)
        return PTDP_OK;
    if (c->zero_qgz != 4 && c->zero_qgz != 8)
        BAD("--zero-qgz-bits %d: qgZ sends INT4 or INT8 codes; use 4 or 8", c->zero_qgz);
    if (c->zero_qgz_block < 1 || c->zero_qgz_block > 1 << 24)
        BAD("--zero-quant-block %d: must be between 1 and 16777216 elements", c->zero_qgz_block);
    if (c->zero != 3)
        BAD("--zero-qgz replaces ZeRO-3's gradient reduce-scatter: it needs --zero 3; --zero is %d", c->zero);
    if (k < 2 || k >= G || G % k != 0)
        BAD("--zero-qgz: nodes of %d DP ranks must cut ZeRO-3's group of %d into two or more nodes of 2 or more",
            k, G);
    if (c->bf16)
        BAD("--zero-qgz with --precision bf16: qgZ quantizes ZeRO-3's float unit gradients, and bf16's are "
            "rounded and summed in bf16 first; leave one out");
    if (c->overlap)
        BAD("--zero-qgz with --overlap: qgZ's all-to-alls block (there is no non-blocking all-to-all), so "
            "nothing would overlap the backward; leave --overlap out");
    if (ptdp_train_cp(c) > 1)
        BAD("--zero-qgz with --cp %d: its nodes cut the DP ranks alone here, and with context parallelism the "
            "gradient's group is dp x cp; leave --cp or --zero-qgz out", c->cp);
    if (c->ep > 1)
        BAD("--zero-qgz with --ep %d: the experts' gradients are summed over the expert-DP group, which qgZ's "
            "nodes do not cut; leave --ep or --zero-qgz out", c->ep);
    return PTDP_OK;
}

/* bf16, ZeRO-3 and --overlap against the schedule and the mesh.  What
 * the schedule refuses is its row's to say (ptdp_schedule_refuses: its own
 * reasons, a W phase's, several chunks a stage's). */
static int combination_rules(const ptdp_train_config *c, char *msg, size_t n)
{
    const ptdp_schedule_entry *e = ptdp_train_schedule(c);
    const int v = ptdp_train_virtual_stages(c);
#ifdef PTDP_DOUBLE
    if (c->bf16)
        BAD("--precision bf16 keeps float master weights and moments: it needs the float build (ptdp), not "
            "ptdp-f64, whose precision is f64");
#endif
    if (c->bf16 && ptdp_schedule_refuses(e, PTDP_FEATURE_BF16, v, msg, n) != 0)
        return PTDP_EINVAL;
    const ptdp_zero_stage *z = ptdp_zero_stage_of(c->zero);
    if (z->shards_params && c->dp * ptdp_train_cp(c) == 1)
        BAD("--zero 3 with --dp 1: ZeRO-3 shards the parameters over the data-parallel ranks, and with one rank "
            "there is nothing to shard, so it changes nothing; use --dp 2 or more, or leave --zero out");
    if (z->shards_params && ptdp_schedule_refuses(e, PTDP_FEATURE_ZERO3, v, msg, n) != 0)
        return PTDP_EINVAL;
    if (c->overlap && c->dp * ptdp_train_cp(c) == 1 && !(c->sp && c->tp > 1))
        BAD("--overlap overlaps the data-parallel gradient sum (and SP's gathers) with the backward: it needs "
            "--dp 2 or more, or --sp with --tp 2 or more");
    if (shard_group_rules(c, msg, n) != 0 || hpz_rules(c, msg, n) != 0 || qwz_rules(c, msg, n) != 0 ||
        qgz_rules(c, msg, n) != 0)
        return PTDP_EINVAL;
    if (c->overlap && c->ep > 1 && z->shards_grads)
        BAD("--overlap with --ep %d and --zero %d: ZeRO-2 reduce-scatters each backward's gradient as one "
            "request, and with experts it is two, over two groups; use --zero 1 (whose buckets overlap per "
            "group) or leave --overlap out", c->ep, c->zero);
    if (c->overlap && ptdp_train_fold_slices(c) > 1 && z->shards_grads)
        BAD("--overlap with --etp %d and --zero %d: ZeRO-2 reduce-scatters each backward's gradient as one "
            "request, and with folded experts it is two, over two groups; use --zero 1 (whose buckets overlap "
            "per group) or leave --overlap out", c->etp, c->zero);
    if (c->overlap && ptdp_schedule_refuses(e, PTDP_FEATURE_OVERLAP, v, msg, n) != 0)
        return PTDP_EINVAL;
    return PTDP_OK;
}

/* The optimizer against itself and against the checkpoint resumed. */
static int resume_rules(const ptdp_train_config *c, char *msg, size_t n)
{
    if (c->optimizer == PTDP_OPT_ADAMW && c->momentum > 0)
        BAD("--momentum %g is for --optimizer sgd; AdamW keeps moments of its own (beta1 0.9, beta2 0.999)",
            c->momentum);
    if (c->resume != NULL && c->resume->optimizer != c->optimizer)
        BAD("--optimizer %s does not match the checkpoint's (%s)",
            c->optimizer == PTDP_OPT_SGD ? "sgd" : "adamw", c->resume->optimizer == PTDP_OPT_SGD ? "sgd" : "adamw");
    if (c->resume != NULL && c->optimizer == PTDP_OPT_SGD && c->resume->has_momentum && !(c->momentum > 0))
        BAD("the checkpoint holds SGD momentum buffers, but --momentum is 0: resuming would drop them "
            "(give --momentum, as the run that saved it did)");
    if (c->resume != NULL && c->optimizer == PTDP_OPT_SGD && !c->resume->has_momentum && c->momentum > 0)
        BAD("--momentum %g, but the checkpoint holds no momentum buffers (it was saved without --momentum): "
            "resuming would restart the momentum at zero (leave --momentum out)", c->momentum);
    if (c->resume != NULL && c->resume->step > PTDP_MAX_STEP - c->steps)
        BAD("--steps %d after the checkpoint's step %ld would pass %lld, the most steps the optimizer counts",
            c->steps, c->resume->step, (long long)PTDP_MAX_STEP);
    return PTDP_OK;
}

/* --fp8 and its flags: the two without it, the history without the recipe
 * that keeps one, and what one scale per tensor cannot follow (fp8_linear.h):
 * a micro-batch's tensor cut in time (token slices), an expert's rows
 * gathered from several micro-batches (EP), a step's amaxes on two copies
 * of the model (DualPipe) — the tiled recipes scale each row's tiles
 * alone and need none of it. */
static int fp8_rules(const ptdp_train_config *c, char *msg, size_t n)
{
    const ptdp_fp8_recipe *r = c->fp8.recipe;
    if (r == NULL && c->fp8.grad != NULL)
        BAD("--fp8-grad-format %s chooses the gradients' FP8 format: it needs --fp8 R (tensorwise, delayed, "
            "blockwise or mxfp8)", c->fp8.grad->name);
    if (r == NULL && c->fp8.history > 0)
        BAD("--fp8-amax-history %d is delayed scaling's: it needs --fp8 delayed", c->fp8.history);
    if (r == NULL && c->fp8.comm)
        BAD("--fp8-comm sends FP8 codes where --fp8 R computes with them: it needs --fp8 blockwise or mxfp8 "
            "(with --ep), or any --fp8 R (with --zero 3)");
    if (r == NULL)
        return PTDP_OK;
    if (c->fp8.comm && c->zero != 3 && (c->ep <= 1 || r->whole_tensor))
        BAD("--fp8-comm sends expert parallelism's dispatch in FP8, each row by its own tiles: it needs --ep 2 or "
            "more and --fp8 blockwise or mxfp8; or ZeRO-3's parameter gather in FP8: --zero 3");
    if (c->fp8.comm && c->zero_qwz > 0)
        BAD("--fp8-comm with --zero-qwz: both quantize ZeRO-3's forward gathers (FP8 codes where --fp8 computes "
            "with them, INT8 blocks); leave one out");
    if (c->fp8.comm && c->zero == 3 && c->zero_hpz > 0)
        BAD("--fp8-comm with --zero-hpz: hpZ keeps the forward's gathered unit for the backward in the store's "
            "type, and the FP8 gather rebuilds the unit in float from codes; the two are not built together: "
            "leave one out");
    if (c->fp8.history > 0 && !r->uses_history)
        BAD("--fp8-amax-history %d is delayed scaling's, and --fp8 %s keeps no history: use --fp8 delayed",
            c->fp8.history, r->name);
    if (r->whole_tensor && ptdp_train_token_slices(c) > 1)
        BAD("--fp8 %s with --token-slices %d: one scale covers a micro-batch's whole tensor, and a slice is "
            "computed before the next exists: use --fp8 blockwise or mxfp8 (a scale per row's tiles)", r->name,
            ptdp_train_token_slices(c));
    if (r->whole_tensor && c->ep > 1)
        BAD("--fp8 %s with --ep %d: one scale covers an expert's input of one micro-batch, and under --ep an "
            "expert's rows come from several: use --fp8 blockwise or mxfp8 (a scale per row's tiles)", r->name,
            c->ep);
    if (r->uses_history && ptdp_train_schedule(c)->layout == PTDP_CHUNKS_DUAL)
        BAD("--fp8 delayed with --schedule %s: each block's step amax would come from two copies of the model, "
            "each with half the micro-batches: use --fp8 tensorwise, blockwise or mxfp8", ptdp_train_schedule(c)->name);
    const ptdp_state_tensor *h = c->resume != NULL ? ptdp_state_find((ptdp_state *)c->resume,
                                                                      PTDP_FP8_HISTORY_TENSOR) : NULL;
    const int H = c->fp8.history > 0 ? c->fp8.history : PTDP_FP8_HISTORY_DEFAULT;
    if (r->uses_history && h != NULL && h->cols - 1 != H)
        BAD("--fp8 delayed keeps %d steps of amax history, and the checkpoint's %s keeps %d: give "
            "--fp8-amax-history %d to resume them", H, PTDP_FP8_HISTORY_TENSOR, h->cols - 1, h->cols - 1);
    return PTDP_OK;
}

#undef BAD

/* What this configuration of the model supports of the layout (its own
 * check_run, model.h). */
static int model_run_rules(const ptdp_train_config *c, char *msg, size_t n)
{
    const ptdp_model_ops *ops = ptdp_model_of(&c->model);
    const ptdp_model_run r = { .tp = c->tp, .pp = c->pp, .cp = c->cp > 1 ? c->cp : 1, .zero = c->zero,
                               .shards_params = ptdp_zero_stage_of(c->zero)->shards_params,
                               .token_slices = ptdp_train_token_slices(c), .sp = c->sp, .bf16 = c->bf16,
                               .cp_a2a = c->cp > 1 && c->cp_a2a, .dp = c->dp, .ep = c->ep > 1 ? c->ep : 1,
                               .etp = c->etp > 0 ? c->etp : c->tp,
                               .copies = ptdp_train_schedule(c)->layout == PTDP_CHUNKS_DUAL,
                               .fp8 = c->fp8.recipe };
    if (r.ep > 1 && ops->check_run == NULL) {
        snprintf(msg, n, "--ep %d spreads a mixture of experts' experts over devices, and --model %s has no "
                 "experts: use a model with a mixture of experts (--moe-experts E)", r.ep, ops->name);
        return PTDP_EINVAL;
    }
    if (r.etp != r.tp && ops->check_run == NULL) {
        snprintf(msg, n, "--etp %d sets a mixture of experts' own TP size, and --model %s has no experts: use a "
                 "model with a mixture of experts (--moe-experts E), or leave --etp out", r.etp, ops->name);
        return PTDP_EINVAL;
    }
    return ops->check_run != NULL ? ops->check_run(&c->model, &r, msg, n) : PTDP_OK;
}

/* Every rule, in order. */
static int validate(const ptdp_train_config *c, bool threads, char *msg, size_t n)
{
    int rc;
    if ((rc = mesh_rules(c, threads, msg, n)) != 0 || (rc = batch_rules(c, msg, n)) != 0 ||
        (rc = sequence_rules(c, msg, n)) != 0 || (rc = pipeline_rules(c, msg, n)) != 0 ||
        (rc = optimizer_rules(c, msg, n)) != 0 || (rc = combination_rules(c, msg, n)) != 0 ||
        (rc = fp8_rules(c, msg, n)) != 0 || (rc = model_run_rules(c, msg, n)) != 0)
        return rc;
    return resume_rules(c, msg, n);
}
int ptdp_train_validate(const ptdp_train_config *c, char *msg, size_t n)
{
    return validate(c, true, msg, n);
}

int ptdp_train_validate_layout(const ptdp_train_config *c, char *msg, size_t n)
{
    return validate(c, false, msg, n);
}

