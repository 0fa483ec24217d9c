/*
 * model_size.h — how many parameters one device of a dp x tp x pp mesh
 * holds, from model.h's table alone (the tests' independent formula):
 *
 *   per block     fc1 [d_ff/tp, h] + [d_ff/tp]  +  fc2 [h, d_ff/tp] + [h]
 *   stage 0       + in  [h, d_in] + [h]
 *   last stage    + out [C/tp, h] + [C/tp]
 *
 * Its stage's blocks come from ptdp_stage_range (balanced, or stage_layers).
 */
#ifndef PTDP_TESTS_MODEL_SIZE_H
#define PTDP_TESTS_MODEL_SIZE_H

#include <stddef.h>

#include "ptdp/model.h"
#include "ptdp/train.h"
#include "ptdp/mlp.h"

static inline size_t model_size_stage(const ptdp_train_config *c, int stage)
{
    const ptdp_model_config *m = &c->model;
    size_t h = (size_t)m->hidden, ff = (size_t)(m->ffn / c->tp), cl = (size_t)(ptdp_mlp(m)->classes / c->tp);
    int begin, count;
    ptdp_stage_range(m->layers, c->pp, c->stage_layers, stage, &begin, &count);
    size_t n = (size_t)count * (ff * h + ff + h * ff + h);
    if (stage == 0)
        n += h * (size_t)ptdp_mlp(m)->d_in + h;
    if (stage == c->pp - 1)
        n += cl * h + cl;
    return n;
}

/* The whole model: every parameter once. */
static inline size_t model_size_total(const ptdp_model_config *m)
{
    size_t h = (size_t)m->hidden, ff = (size_t)m->ffn, C = (size_t)ptdp_mlp(m)->classes;
    return h * (size_t)ptdp_mlp(m)->d_in + h + (size_t)m->layers * (2 * ff * h + ff + h) + C * h + C;
}

#endif
