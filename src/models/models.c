/*
 * models.c — the list of models (models.h).
 */
#include "ptdp/models.h"

#include <stdio.h>
#include <string.h>

#include "ptdp/error.h"
#include "ptdp/gpt.h"
#include "ptdp/mlp.h"

static const ptdp_model_ops *const table[PTDP_MODEL_COUNT] = {
    [PTDP_MODEL_MLP] = &ptdp_mlp_ops,
    [PTDP_MODEL_GPT] = &ptdp_gpt_ops,
};

const ptdp_model_ops *ptdp_model_ops_of(ptdp_model_kind kind)
{
    return (unsigned)kind < PTDP_MODEL_COUNT ? table[kind] : NULL;
}

const char *ptdp_model_name(ptdp_model_kind kind)
{
    const ptdp_model_ops *ops = ptdp_model_ops_of(kind);
    return ops ? ops->name : NULL;
}

int ptdp_model_parse(const char *name, ptdp_model_kind *out)
{
    for (int k = 0; name != NULL && k < PTDP_MODEL_COUNT; k++)
        if (strcmp(name, table[k]->name) == 0) {
            *out = (ptdp_model_kind)k;
            return PTDP_OK;
        }
    return PTDP_EINVAL;
}

int ptdp_model_check(const ptdp_model_config *cfg, int tp, int pp, char *msg, size_t msglen)
{
    const ptdp_model_ops *ops = ptdp_model_ops_of(cfg->kind);
    if (ops == NULL) {
        snprintf(msg, msglen, "unknown model kind %d", (int)cfg->kind);
        return PTDP_EINVAL;
    }
    return ops->check(cfg, tp, pp, msg, msglen);
}

int ptdp_model_init_v(ptdp_device *dev, ptdp_model *m, const ptdp_model_config *cfg,
                      const ptdp_mesh *mesh, const int *stage_layers, int virtual_stages,
                      uint64_t seed, double dropout)
{
    const ptdp_model_ops *ops = ptdp_model_ops_of(cfg->kind);
    if (ops == NULL) {
        memset(m, 0, sizeof *m);
        return ptdp_fail(dev, PTDP_EINVAL, "unknown model kind %d", (int)cfg->kind);
    }
    return ptdp_model_setup_v(dev, m, ops, cfg, mesh, stage_layers, virtual_stages, seed, dropout);
}

int ptdp_model_init(ptdp_device *dev, ptdp_model *m, const ptdp_model_config *cfg,
                    const ptdp_mesh *mesh, const int *stage_layers, uint64_t seed, double dropout)
{
    return ptdp_model_init_v(dev, m, cfg, mesh, stage_layers, 1, seed, dropout);
}
