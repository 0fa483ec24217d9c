/*
 * models.c — the registry (models.h): the built-in models, then whatever
 * ptdp_model_register adds, in one table.
 *
 *   table [ mlp | gpt | llama | (registered) | … ]      PTDP_MAX_MODELS slots
 *           ▲ default: a config with ops NULL
 *
 * Registration is meant for set-up (a test or a program adds its model
 * before it starts devices); a lock keeps two threads that register at
 * once from taking the same slot.
 */
#include "ptdp/models.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ptdp/error.h"
#include "ptdp/gpt.h"
#include "ptdp/llama.h"
#include "ptdp/mlp.h"
#include "parallel/model_impl.h"

static const ptdp_model_ops *table[PTDP_MAX_MODELS] = { &ptdp_mlp_ops, &ptdp_gpt_ops, &ptdp_llama_ops };
static int count = 3;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

int ptdp_model_register(const ptdp_model_ops *ops)
{
    if (ops == NULL || ops->name == NULL || ops->name[0] == '\0' || ops->check == NULL ||
        ops->list_params == NULL || ops->init == NULL || ops->fill_batch == NULL || ops->forward == NULL ||
        ops->backward == NULL)
        return PTDP_EINVAL;
    int rc = PTDP_OK;
    pthread_mutex_lock(&lock);
    const ptdp_model_ops *same = ptdp_model_lookup(ops->name);
    if (same != NULL && same != ops)
        rc = PTDP_EINVAL;
    else if (same == NULL && count == PTDP_MAX_MODELS)
        rc = PTDP_ENOMEM;
    else if (same == NULL)
        table[count++] = ops;
    pthread_mutex_unlock(&lock);
    return rc;
}

int ptdp_model_count(void)
{
    return count;
}

const ptdp_model_ops *ptdp_model_at(int i)
{
    return i >= 0 && i < count ? table[i] : NULL;
}

const ptdp_model_ops *ptdp_model_lookup(const char *name)
{
    for (int k = 0; name != NULL && k < count; k++)
        if (strcmp(name, table[k]->name) == 0)
            return table[k];
    return NULL;
}

const ptdp_model_ops *ptdp_model_of(const ptdp_model_config *cfg)
{
    return cfg->ops != NULL ? cfg->ops : table[0];
}

ptdp_model_config ptdp_model_default_config(void)
{
    return ptdp_mlp_default_config();
}

const char *ptdp_model_name(const ptdp_model_config *cfg)
{
    return ptdp_model_of(cfg)->name;
}

const char *ptdp_model_names(char *buf, size_t len, const char *sep)
{
    size_t n = 0;
    if (len > 0)
        buf[0] = '\0';
    for (int k = 0; k < count && n < len; k++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", k ? sep : "", table[k]->name);
    return buf;
}

const ptdp_model_ops *ptdp_model_first_with(bool (*has)(const ptdp_model_caps *caps))
{
    for (int k = 0; k < count; k++)
        if (has(&table[k]->caps))
            return table[k];
    return NULL;
}

int ptdp_model_positions(const ptdp_model_config *cfg)
{
    const ptdp_model_ops *ops = ptdp_model_of(cfg);
    return ops->caps.sequences && ops->positions != NULL ? ops->positions(cfg) : 0;
}

int ptdp_model_check(const ptdp_model_config *cfg, int tp, int pp, char *msg, size_t msglen)
{
    return ptdp_model_of(cfg)->check(cfg, tp, pp, msg, msglen);
}

int ptdp_model_init_v(ptdp_device *dev, ptdp_model *m, const ptdp_model_config *cfg,
                      const ptdp_mesh *mesh, const int *stage_layers, int virtual_stages,
                      uint64_t seed, double dropout)
{
    return ptdp_model_setup_v(dev, m, ptdp_model_of(cfg), cfg, mesh, stage_layers, virtual_stages, seed,
                              dropout);
}

int ptdp_model_init(ptdp_device *dev, ptdp_model *m, const ptdp_model_config *cfg,
                    const ptdp_mesh *mesh, const int *stage_layers, uint64_t seed, double dropout)
{
    return ptdp_model_init_v(dev, m, cfg, mesh, stage_layers, 1, seed, dropout);
}
