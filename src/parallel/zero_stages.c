/*
 * zero_stages.c — ZeRO's four stages as a table: one row each, what it
 * keeps, what it does at each moment of a step, and what that costs.
 *
 * Data parallelism over N ranks keeps N copies of everything.  ZeRO
 * (Rajbhandari et al., 2020) lets DP rank k keep only shard k of a state —
 * first the optimizer state, then the gradients too, then the parameters —
 * and pays for it in communication.  A row says which states are sharded
 * (▓ whole on every rank, ░ 1/N of it) and when the DP group talks; S is
 * the gradient's bytes, M the backwards of a step, and each collective
 * moves (N-1)/N S a device (an all-reduce twice that: a reduce-scatter and
 * an all-gather):
 *
 *   stage     params grads optim  after each    after the last   after the     DP bytes
 *                                 backward      backward         optimizer     a step
 *   0 (DP)    ▓▓▓▓   ▓▓▓▓  ▓▓▓▓   -             all-reduce the   -             2(N-1)/N S
 *                                               buckets
 *   1         ▓▓▓▓   ▓▓▓▓  ░      -             reduce-scatter   all-gather    2(N-1)/N S
 *                                               the buckets      the buckets
 *   2         ▓▓▓▓   ░     ░      reduce-scatter  -              all-gather    (M+1)(N-1)/N S
 *                                 all of G                       P
 *   3         ░      ░     ░      per unit: gather P before the forward and    3M(N-1)/N S
 *                                 the backward, reduce-scatter its G after
 *
 * Model states per device, Ψ parameters, mixed precision (bf16 parameter
 * and gradient, 2 + 2 bytes; fp32 master weight and Adam's two moments,
 * 12 bytes), the ZeRO paper's figure 1:
 *
 *   2Ψ + 2Ψ + 12Ψ   →   4Ψ + 12Ψ/N   →   2Ψ + 14Ψ/N   →   16Ψ/N
 *   (plain DP)          (stage 1)        (stage 2)        (stage 3)
 *
 * Stage 1 sends what plain DP sends: an all-reduce IS a reduce-scatter and
 * an all-gather, and stage 1 only moves the update in between.  Stage 2
 * reduce-scatters after every backward to drop the full gradient between
 * them — M reduce-scatters where plain DP needs one sum.  Stage 3 gathers
 * every unit twice a micro-batch: the paper's 3Ψ against 2Ψ.
 *
 * The code reads the rows: set-up asks a row what this device owns
 * (`own`: the whole buffer, or its shards — what the optimizer then
 * updates, zero_step.c), the executor's hooks around a backward are the
 * row's (`backward_begin`, `backward_end`), the step's sum is the row's
 * (`sum`), then the gather (`gather`); the shard bits say which buffers
 * exist, and which DP group the gradient norm sums over (model.c).  The
 * price is read the same way, by ptdp train's report and the planner: the
 * bytes per state (ptdp_zero_state_bytes, ptdp_zero_device_states) and the
 * passes of the DP traffic (ptdp_zero_dp_passes); and for the planner
 * alone (price_impl.h) a shard's rounding, the optimizer's share, ZeRO-3's
 * working units and its walk over them.  Adding a stage (ZeRO++'s
 * hierarchical shards, HSDP) is adding a row and its operations.
 */
#include "ptdp/zero.h"

#include "parallel/price_impl.h"
#include "parallel/zero_impl.h"

/* ------------------------------------------------------------ the table */

static const ptdp_zero_stage stages[] = {
    {
        .stage = 0, .name = "plain DP",
        .path = PTDP_ZERO_PATH_ALL_REDUCE, .buckets = true,
        .sums_per_step = 2,
        .dp_rule = "2(N-1)/N S", .recompute_rule = "", .overlap_under = "the backward",
        .own = ptdp_zero_own_whole, .sum = ptdp_zero_sum_buckets,
    },
    {
        .stage = 1, .name = "ZeRO-1", .shards_optim = true,
        .path = PTDP_ZERO_PATH_REDUCE_SCATTER, .buckets = true,
        .sums_per_step = 1, .gathers_per_step = 1,
        .dp_rule = "2(N-1)/N S", .recompute_rule = "", .overlap_under = "the backward",
        .own = ptdp_zero_own_bucket_shards, .sum = ptdp_zero_sum_buckets, .gather = ptdp_zero_gather_buckets,
    },
    {
        .stage = 2, .name = "ZeRO-2", .shards_optim = true, .shards_grads = true,
        .path = PTDP_ZERO_PATH_EACH_BACKWARD, .grad_bucket = true,
        .sums_per_backward = 1, .gathers_per_step = 1,
        .dp_rule = "(M+1)(N-1)/N S", .recompute_rule = "", .overlap_under = "the next micro-batch's compute",
        .grad_shard_tag = "zero2.grad_shard",
        .own = ptdp_zero_own_run_shards, .backward_begin = ptdp_zero2_bucket_begin,
        .backward_end = ptdp_zero2_bucket_end, .sum = ptdp_zero2_sum, .gather = ptdp_zero_gather_runs,
    },
    {
        .stage = 3, .name = "ZeRO-3", .shards_optim = true, .shards_grads = true, .shards_params = true,
        .path = PTDP_ZERO_PATH_EACH_UNIT,
        .sums_per_backward = 1, .gathers_per_backward = 2,
        .dp_rule = "3M(N-1)/N S", .recompute_rule = ", each block redone inside its backward's gather",
        .overlap_under = "compute (prefetched gathers, the backward's reduce-scatters)",
        .grad_shard_tag = "zero3.grad_shard",
        .own = ptdp_zero3_own_unit_shards, .sum = ptdp_zero3_sum,
    },
};

const ptdp_zero_stage *ptdp_zero_stage_of(int stage)
{
    const int n = (int)(sizeof stages / sizeof stages[0]);
    return stage >= 0 && stage < n ? &stages[stage] : NULL;
}

/* ------------------------------------------------- the model states */

ptdp_zero_sizes ptdp_zero_sizes_of(bool bf16, int slots)
{
    const double real = (double)sizeof(ptdp_real);
    return (ptdp_zero_sizes){ .bw = bf16 ? 2.0 : real, .bg = bf16 ? 2.0 : real,
                              .bo = real * (slots + (bf16 ? 1 : 0)) };
}

ptdp_zero_bytes ptdp_zero_state_bytes(int stage, double psi, int dp, double bw, double bg, double bo)
{
    const ptdp_zero_stage *row = ptdp_zero_stage_of(stage);
    double N = dp > 0 ? dp : 1;
    ptdp_zero_bytes b = { bw * psi, bg * psi, bo * psi };
    if (row != NULL && row->shards_optim)
        b.optim /= N;
    if (row != NULL && row->shards_grads)
        b.grads /= N;
    if (row != NULL && row->shards_params)
        b.params /= N;
    return b;
}

ptdp_zero_bytes ptdp_zero_device_states(const ptdp_zero_stage *row, double numel, double share, ptdp_zero_sizes b)
{
    return (ptdp_zero_bytes){ .params = (row->shards_params ? share : numel) * b.bw,
                              .grads = (row->shards_grads ? share : numel) * b.bg,
                              .optim = (row->shards_optim ? share : numel) * b.bo };
}

/* ------------------------------------------------------ the DP traffic */

int ptdp_zero_backwards(const ptdp_zero_stage *row, int backwards, bool split_backward)
{
    return row->path == PTDP_ZERO_PATH_EACH_BACKWARD && split_backward ? 2 * backwards : backwards;
}

int ptdp_zero_dp_passes(const ptdp_zero_stage *row, int backwards)
{
    return row->sums_per_step + row->gathers_per_step +
           backwards * (row->sums_per_backward + row->gathers_per_backward);
}

double ptdp_zero_dp_bytes_per_step(int stage, size_t numel, int dp, int micro_batches)
{
    const ptdp_zero_stage *row = ptdp_zero_stage_of(stage);
    double S = (double)numel * sizeof(ptdp_real), share = (double)(dp - 1) / dp;
    int passes = row != NULL ? ptdp_zero_dp_passes(row, micro_batches) : 0;
    return passes * share * S;
}

double ptdp_zero3_dp_bytes_per_step(size_t numel, int dp, int micro_batches, bool recompute)
{
    (void)recompute;   /* a unit's forward again runs inside its backward's gather: no gather more */
    return ptdp_zero_dp_bytes_per_step(3, numel, dp, micro_batches);
}

/* ------------------------------------------ the planner's price (price_impl.h) */

/* (double)(long long) rounding as the planner has always counted it. */
double ptdp_zero_price_shard(double n, int N)
{
    return (double)(((long long)n + N - 1) / N);
}

double ptdp_zero_price_optimizer_share(const ptdp_zero_stage *row, double numel, double experts, int ndp, int nedp)
{
    double share = row->shards_optim && ndp > 1 ? numel / ndp : numel;
    if (row->shards_optim && experts > 0)
        share = (numel - experts) / ndp + experts / nedp;
    return share;
}

/* params: (1 or, prefetching, 2) units and the tied embeddings, float;
 * grads: a unit's and the embeddings' float gradient, and the unit before
 * in its store's type (bf16 under mixed precision) while it is
 * reduce-scattered. */
void ptdp_zero3_price_units(double unit, double tied, bool overlap, double real, double store, double *params,
                            double *grads)
{
    *params = ((overlap ? 2 : 1) * unit + tied) * real;
    *grads = (unit + tied) * real + (overlap ? unit * store : 0);
}

void ptdp_zero3_price_walk_begin(ptdp_zero3_walk *w, bool overlap, bool backward)
{
    *w = (ptdp_zero3_walk){ .overlap = overlap, .backward = backward };
}

/* Blocking: t += gather + compute (+ rs).  With --overlap: this unit was
 * prefetched (ready by w->ready), the next one's gather starts on the
 * stream once this one is present, and a backward's reduce-scatter waits
 * for the one before it and for the stream. */
void ptdp_zero3_price_walk_unit(ptdp_zero3_walk *w, double gather, double compute, double rs, bool has_next,
                                double next_gather)
{
    if (w->overlap && w->units > 0)
        w->t = w->t > w->ready ? w->t : w->ready;
    else
        w->t += gather;
    if (w->overlap && has_next) {   /* prefetch the next */
        double start = w->t > w->stream ? w->t : w->stream;
        w->stream = start + next_gather;
        w->ready = w->stream;
    }
    w->t += compute;
    if (w->backward) {
        if (w->overlap) {
            w->t = w->t > w->rs_end ? w->t : w->rs_end;   /* one reduce-scatter at a time */
            double start = w->t > w->stream ? w->t : w->stream;
            w->stream = w->rs_end = start + rs;
        } else {
            w->t += rs;
        }
    }
    w->units++;
}
