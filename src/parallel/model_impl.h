/*
 * model_impl.h — the model interface's parts for the library only
 * (private to src/).
 *
 * A model (models/) fills struct ptdp_model_ops; the parallel layer and the
 * trainer build and reduce it.  What they share here: the setup with v
 * model chunks per stage, the store of the flat buffers, which parameters
 * decay, which groups a parameter's gradient is summed over beyond DP, and
 * the sum of a quantity over the shards that hold it.
 *
 *   models.c ──ptdp_model_setup_v──▶ ptdp_model ◀── dp.c, zero*.c, train/ (groups, decay, sums)
 */

#ifndef PTDP_PARALLEL_MODEL_IMPL_H
#define PTDP_PARALLEL_MODEL_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include "ptdp/model.h"

/* The common part of every model's set-up: fields, the stage of this
 * device, ops->init, then the flat buffers and the initial values; with v
 * model chunks per stage (interleaving; v = 1 without) stage s holds the
 * chunks s, s + p, …, s + (v-1) p of p v (stage_layers: p v entries, or
 * NULL).  params[] holds chunk v-1's parameters first, chunk 0's last:
 * backward order, as the last chunk's backward runs first. */
int  ptdp_model_setup_v(ptdp_device *dev, ptdp_model *m, const ptdp_model_ops *ops,
                        const ptdp_model_config *cfg, const ptdp_mesh *mesh,
                        const int *stage_layers, int virtual_stages, uint64_t seed, double dropout);

/* Elements per sample crossing the stage boundary for b: boundary_cols,
 * or a token slice's share of them (tlen of the input_cols positions). */
int  ptdp_batch_boundary_cols(const ptdp_model *m, const ptdp_batch *b);

/* A model's forward starts its record of micro-batch b: acts zeroed, then
 * b's rows, first sample, labels and token slice, the step, whether only
 * each block's input is kept (recompute), alive. */
void ptdp_acts_begin(ptdp_acts *acts, const ptdp_batch *b, long step, bool recompute);

/* x := the sum of x over this device's TP group, then its PP group: from
 * what this shard of this stage holds to the whole model.  Collective. */
int  ptdp_model_sum_over_shards(ptdp_model *m, double *x);

/* The gradient norm's one rule (model.c): the group over which the squares
 * this device counts of p add up with other devices' — beside TP's and
 * PP's, which always do — when every replica holds p whole after the DP
 * sum (sharded false: the DP ranks beside p's replicas, the EP group for
 * an expert) or each holds its own shard of it (true: the DP group);
 * PTDP_GROUP_COUNT when there is none (or it is this device alone). */
ptdp_group ptdp_param_norm_group(const ptdp_model *m, const ptdp_param *p, bool sharded);
/* Each unit's stretch of the flat buffer, [begin[u], end[u]): a unit is a
 * run of params[] (model.h), from its first parameter's offset to the end
 * of its last.  begin and end hold one entry a unit. */
void ptdp_model_unit_bounds(const ptdp_model *m, size_t *begin, size_t *end);
/* Whether this device adds p's squares to the norm: the copy
 * ptdp_param_counted_here counts, and under MoE parallel folding, for an
 * expert held whole by each replica (sharded false), only its expert-DP
 * group's rank 0. */
bool ptdp_param_norm_counts(const ptdp_model *m, const ptdp_param *p, bool sharded);

/* ||g||^2 of the whole model from this device's partial sums by group
 * (partial[g], and [PTDP_GROUP_COUNT]: its own): each group of `groups`
 * (PTDP_GROUP_BIT) all-reduced, in group order, added to its own, then
 * summed over TP and PP.  Collective over those groups. */
int  ptdp_model_norm_sum(ptdp_model *m, double partial[PTDP_GROUP_COUNT + 1], unsigned groups, double *sumsq);

/* Whether any parameter of m declares a group beyond its replicas. */
bool ptdp_model_has_groups(const ptdp_model *m);

/* Before the first step (ZeRO's set-up calls it): every group a parameter
 * declares exists on this device's mesh.  0, or PTDP_EINVAL failing the
 * device with the parameter's name — on every device at set-up, so no
 * device is left in a collective that another has abandoned. */
int  ptdp_model_check_groups(ptdp_device *dev, const ptdp_model *m);

/* The stretches of the flat buffers [begin, end) with one weight-decay rule,
 * in order, for the optimizer (which may update only its ZeRO chunk
 * [lo, hi)): each chunk of [lo, hi) with decay true or false.  Calls
 * fn(begin, end, decay, ctx) for each; returns the first nonzero result. */
typedef int (*ptdp_decay_fn)(size_t begin, size_t end, bool decay, void *ctx);
int  ptdp_model_decay_ranges(const ptdp_model *m, size_t lo, size_t hi, ptdp_decay_fn fn, void *ctx);

/* The type of the parameter and gradient stores: PTDP_BF16 under mixed
 * precision, else PTDP_REAL. */
static inline ptdp_dtype ptdp_model_store(const ptdp_model *m)
{
    return m->bf16 ? PTDP_BF16 : PTDP_REAL;
}

/* DualPipe (two copies, pp_layout.h): are the two copies of each of this device's
 * stages (the other on stage p - 1 - s) still bit for bit equal?  A hash
 * of the parameters in the model's order, compared over the mirror group:
 * 0, or PTDP_ECHECK naming the step (the trainer's verify_replicas). */
int  ptdp_model_check_mirror(ptdp_device *dev, const ptdp_model *m, long step);

/* After the optimizer's update (and ZeRO's gather): each model chunk's
 * own once-a-step update of its buffers, ops->after_step (model.h).  0,
 * or the first failure. */
int  ptdp_model_after_step(ptdp_device *dev, ptdp_model *m);

#endif
