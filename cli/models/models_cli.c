/*
 * models_cli.c — each registered model's side of the command line
 * (model_flags.h), found through the model's table of functions:
 *
 *   registry (models.h)      here
 *   ptdp_mlp_ops        ──►  ptdp_mlp_cli   (mlp_cli.c)
 *   ptdp_gpt_ops        ──►  ptdp_gpt_cli   (gpt_cli.c)
 *   ptdp_llama_ops      ──►  ptdp_llama_cli (llama_cli.c)
 *   a model registered  ──►  none: --hidden, --ffn and --layers only,
 *   at run time               and the report's generic keys
 *
 * A model with flags of its own adds its file in cli/models/ and its line
 * here.
 */
#include "../model_flags.h"

#include <string.h>

#include "ptdp/error.h"

extern const ptdp_model_cli ptdp_mlp_cli, ptdp_gpt_cli, ptdp_llama_cli;

static const ptdp_model_cli *const clis[] = { &ptdp_mlp_cli, &ptdp_gpt_cli, &ptdp_llama_cli };

/* What `ptdp train` reports of a model without a CLI side of its own. */
static void generic_report_keys(FILE *f, const ptdp_train_config *c)
{
    fprintf(f, ", \"hidden\": %d, \"ffn\": %d, \"layers\": %d", c->model.hidden, c->model.ffn, c->model.layers);
}

static void generic_describe(const ptdp_train_config *c, int mb, const char *data_name)
{
    const ptdp_model_config *m = &c->model;
    (void)data_name;
    printf("\n  model %s: hidden %d, ffn %d, %d blocks; batch %d, %d micro-batch%s of %d\n", ptdp_model_name(m),
           m->hidden, m->ffn, m->layers, c->batch, c->micro_batches, c->micro_batches == 1 ? "" : "es", mb);
}

static const ptdp_model_cli generic = {
    .describe = generic_describe,
    .report_keys = generic_report_keys,
};

const ptdp_model_cli *ptdp_model_cli_of(const ptdp_model_config *cfg)
{
    return ptdp_model_cli_for(ptdp_model_of(cfg));
}

const ptdp_model_cli *ptdp_model_cli_for(const ptdp_model_ops *ops)
{
    for (size_t i = 0; i < sizeof clis / sizeof clis[0]; i++)
        if (clis[i]->ops == ops)
            return clis[i];
    return &generic;
}

int ptdp_model_cli_set(ptdp_model_config *cfg, const char *name, int value)
{
    const ptdp_model_cli *cli = ptdp_model_cli_of(cfg);
    for (int k = 0; k < cli->nflags; k++)
        if (cli->flags[k].field != PTDP_FLAG_PATH && !cli->flags[k].real && strcmp(cli->flags[k].name, name) == 0) {
            *(int *)(void *)((char *)cfg + cli->flags[k].field) = value;
            return 0;
        }
    return PTDP_EINVAL;
}

int ptdp_model_cli_get(const ptdp_model_config *cfg, const char *name)
{
    const ptdp_model_cli *cli = ptdp_model_cli_of(cfg);
    for (int k = 0; k < cli->nflags; k++)
        if (cli->flags[k].field != PTDP_FLAG_PATH && !cli->flags[k].real && strcmp(cli->flags[k].name, name) == 0)
            return *(const int *)(const void *)((const char *)cfg + cli->flags[k].field);
    return 0;
}
