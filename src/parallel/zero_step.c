/*
 * zero_step.c — the optimizer step on what this device owns: its ranges of
 * the flat buffers (zero.h), float or mixed precision.
 *
 * AdamW and SGD are element-wise (optim.h), so a device updates any cut of
 * the buffers and gets the bits of one update of the whole.  What it owns
 * is a list of ranges: the whole buffer without ZeRO, one shard per DP
 * bucket (ZeRO-1), one shard (ZeRO-2), one shard per unit (ZeRO-3).  Each
 * range is walked in stretches of one weight-decay rule (model.h,
 * ptdp_model_decay_ranges):
 *
 *   flat buffer   | out.w  out.b | blocks.7 …         | … in.w  in.b |
 *   my range               [ at ─────────────────── ]
 *   stretches              [b][ w, decay ][b][ w … ]        b: no decay
 *
 *   range i, flat element e   parameters  ptdp_zero_range_params + (e - begin)
 *                             gradient    ptdp_zero_range_grad   + (e - begin)
 *                             state       opt_a, opt_b, master   + at + (e - begin)
 *
 * Float: the gradient is multiplied by the clipping coefficient, then
 * ptdp_optimizer_step.  Mixed precision (mixed.h): the bf16 gradient is
 * widened a block at a time (and clipped there, in float), the float
 * master weights and moments step, and the bf16 parameters become
 * bf16(master) — ptdp_optimizer_step_bf16.  Then the gradients are zeroed
 * for the next step, the clock charged, and what each DP rank updated
 * gathered to all (stages 1 and 2).
 */
#include "ptdp/zero.h"

#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/optim.h"
#include "parallel/model_impl.h"
#include "parallel/zero_impl.h"

typedef struct {
    const ptdp_zero *z;
    void *w, *g;               /* the range's parameters and gradient, from its begin */
    size_t begin, at;          /* the range: flat element begin; its state from `at`  */
    double clip;               /* bf16: the clipping coefficient (1: none)            */
    long step;
    bool bf16;
    double flops;
} update;

/* One stretch [begin, end) of one range, with or without weight decay. */
static int update_range(size_t begin, size_t end, bool decay, void *ctx)
{
    update *u = ctx;
    const ptdp_zero *z = u->z;
    const size_t i = begin - u->begin, k = u->at + i, n = end - begin;   /* in the range; in the state */
    const double wd = decay ? z->optim.weight_decay : 0.0;
    ptdp_real *a = z->opt_a ? z->opt_a + k : NULL, *b = z->opt_b ? z->opt_b + k : NULL;
    if (u->bf16) {
        double f = ptdp_optimizer_step_bf16(&z->optim, z->master + k, (const ptdp_bf16 *)u->g + i, u->clip, a, b,
                                            (ptdp_bf16 *)u->w + i, n, wd, u->step);
        if (f < 0)
            return PTDP_EINVAL;   /* validation refuses bf16 in the double build */
        u->flops += f;
        return PTDP_OK;
    }
    u->flops += ptdp_optimizer_step(&z->optim, (ptdp_real *)u->w + i, (ptdp_real *)u->g + i, a, b, n, wd, u->step);
    return PTDP_OK;
}

int ptdp_zero_step(ptdp_device *dev, ptdp_zero *z, ptdp_model *m, void *grad, double clip, long step)
{
    const double w0 = ptdp_wall_now();
    update u = { .z = z, .clip = clip, .step = step, .bf16 = m->bf16 };
    for (int i = 0; i < z->nranges; i++) {
        const ptdp_zero_range *r = &z->ranges[i];
        u.begin = r->begin;
        u.at = r->at;
        u.w = ptdp_zero_range_params(z, m, i);
        u.g = ptdp_zero_range_grad(z, grad, i);
        if (clip < 1 && !m->bf16)
            ptdp_scale(u.g, r->end - r->begin, clip);   /* bf16: while widening */
        int rc = ptdp_model_decay_ranges(m, r->begin, r->end, update_range, &u);
        if (rc != 0)
            return rc;
    }
    ptdp_zero_clear_gradients(z, m);
    /* The ideal profile is the textbook pipeline: only the blocks' products cost time. */
    ptdp_compute(dev, "optimizer", dev->profile->ideal ? 0 : u.flops, w0);
    /* ZeRO: every rank updated one shard; now everyone gets all of them. */
    return ptdp_zero_gather_params(z, m);
}
