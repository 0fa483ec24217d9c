/*
 * fp8_linear_impl.h — FP8 training's operands on one device, for the
 * parallel-linear op, the trainer and the models' checks (private to src/;
 * the idea, the table of splits and the picture open include/ptdp/fp8_linear.h).
 */
#ifndef PTDP_PARALLEL_FP8_LINEAR_IMPL_H
#define PTDP_PARALLEL_FP8_LINEAR_IMPL_H

#include <stddef.h>

#include "ptdp/counters.h"
#include "ptdp/fp8_linear.h"

struct ptdp_device;

/* One device's FP8: the settings, the groups an activation's amax is
 * reduced over, and the delayed recipe's histories (one per weight of the
 * device's model and operand, in the arena as optimizer-like state). */
typedef struct ptdp_fp8_linear ptdp_fp8_linear;

/* tp: the TP group (a weight's shards, for ZeRO-3's FP8 gather); rows: the CP group (the ranks holding other positions of a sequence), or
 * NULL; replicas: the DP group a delayed recipe's step amaxes are reduced
 * over.  m: the device's model (a weight's history is found by its place
 * in m->params).  0 or an error (out of memory, named). */
int  ptdp_fp8_linear_create(struct ptdp_device *dev, const ptdp_fp8_settings *s, const ptdp_model *m,
                            ptdp_comm *tp, ptdp_comm *rows, ptdp_comm *replicas, ptdp_fp8_linear **out);
void ptdp_fp8_linear_destroy(struct ptdp_device *dev, ptdp_fp8_linear *f);
/* Its settings (f not NULL). */
const ptdp_fp8_settings *ptdp_fp8_linear_settings(const ptdp_fp8_linear *f);

/* Quantize n tensors of one role (a layer's operand: n = 1; a group of
 * experts: one each), member i belonging to weight w[i]: dst[i] is a new
 * transient ("acts.fp8") holding src[i]'s dequantized values.  A tensor
 * split over tp (the table above) has its amax max-reduced there, all n
 * in one all-reduce, so every rank calls this with the same n whatever
 * rows its members hold.  Free with ptdp_fp8_linear_release. */
int  ptdp_fp8_linear_quantize(struct ptdp_device *dev, ptdp_fp8_linear *f, ptdp_fp8_role role, ptdp_comm *tp,
                              int n, const ptdp_param *const *w, const ptdp_tensor *src, ptdp_tensor *dst);
void ptdp_fp8_linear_release(struct ptdp_device *dev, int n, ptdp_tensor *dst);

/* ZeRO-3's FP8 gather (zero3_fp8.c) quantizes weights before they are
 * whole anywhere, so it asks here for what quantize would use:
 *   weight_tiling   w's tiles (the recipe's weight tile over its shard's shape)
 *   weight_scales   from the amaxes of w[0..n)'s tiles (one a weight for a
 *                   one-scale recipe; else every tile, packed in order),
 *                   max-reduced over the ZeRO group by the caller: reduced
 *                   over TP where needed, the delayed history read and the
 *                   step's amax kept — the scale of each, as quantize's
 *   hold            w's values are now (true), or no longer, its dequantized
 *                   FP8 values: quantize copies a held weight as it is
 * Every linear weight quantize meets must carry model.h's linear_weight (the
 * set the gather quantizes): a weight without it is refused, named. */
int  ptdp_fp8_linear_weight_tiling(struct ptdp_device *dev, const ptdp_fp8_linear *f, const ptdp_param *w,
                                   ptdp_fp8_tiling *t);
int  ptdp_fp8_linear_weight_scales(struct ptdp_device *dev, ptdp_fp8_linear *f, int n, const ptdp_param *const *w,
                                   ptdp_real *amax, ptdp_real *scale);
void ptdp_fp8_linear_hold(ptdp_fp8_linear *f, const ptdp_param *w, bool held);

/* The optimizer step: a delayed recipe's step amaxes max-reduced over the
 * replicas and recorded in each history, the all-reduce's bytes (a ring's
 * 2(N-1)/N 3P reals, P the device's parameter tensors) added to the
 * device's counter "fp8_amax_bytes".  Nothing for the others. */
int  ptdp_fp8_linear_publish(ptdp_counters *reg);
int  ptdp_fp8_linear_step(struct ptdp_device *dev, ptdp_fp8_linear *f);

/* The histories for a checkpoint: per weight of the device's model and
 * operand, `length` slots and the count recorded (ptdp_fp8_history).
 * NULL unless the recipe keeps one. */
ptdp_fp8_history *ptdp_fp8_linear_history(ptdp_fp8_linear *f, const ptdp_param *w, ptdp_fp8_role role);

/* Before a run: may a weight `name` of rows x cols, sharded `shard` over
 * tp ranks in `parts` equal blocks (model.h's ptdp_param), be quantized by
 * r like one device?  A tiled recipe needs every rank's share of the split
 * dimension to be whole tiles — of the weight, and of the activation or
 * gradient split the same way.  0, or PTDP_EINVAL with the sizes and what
 * would work in msg. */
int  ptdp_fp8_split_check(const ptdp_fp8_recipe *r, const char *name, int rows, int cols, ptdp_shard shard,
                          int parts, int tp, char *msg, size_t msglen);

/* The same for a model's list of split weights (its check_run's). */
typedef struct {
    const char *name;
    int rows, cols;
    ptdp_shard shard;
    int parts;
} ptdp_fp8_weight;

int  ptdp_fp8_split_check_all(const ptdp_fp8_recipe *r, const ptdp_fp8_weight *w, int n, int tp, char *msg,
                              size_t msglen);

#endif
