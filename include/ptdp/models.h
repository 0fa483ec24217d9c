/*
 * models.h — the registry: the one table of the models ptdp has, by name,
 * and how to build one on a device.
 *
 *   name   implementation            registered
 *   "mlp"  models/mlp.c (mlp.h)      built in, first: the default
 *   "gpt"  models/gpt.c (gpt.h)      built in
 *   …      anyone's ptdp_model_ops   ptdp_model_register, at run time
 *
 * A model is a table of functions and a description of what it supports
 * (ptdp_model_ops and ptdp_model_caps, model.h).  A configuration names
 * its model by that table (cfg->ops; NULL: the default), the CLI's --model
 * and a checkpoint's "model" by its name.  Adding a model is its own
 * files, its line in models.c (or one call to ptdp_model_register) and
 * its flags: DP, PP, ZeRO, the training loop, the planner and the
 * checkpoints ask the table, never the name.
 */
#ifndef PTDP_MODELS_H
#define PTDP_MODELS_H

#include <stddef.h>

#include "model.h"

/* The most models the registry holds, built-in ones included. */
#define PTDP_MAX_MODELS 16

/* Add a model (its table must outlive every use).  0; or PTDP_EINVAL for
 * a table without a name, check, list_params, init, fill_batch, forward
 * or backward, or a name taken;
 * PTDP_ENOMEM when the registry is full.  Registering the same table
 * twice is a no-op. */
int ptdp_model_register(const ptdp_model_ops *ops);

/* The registered models in order, built-in first: i in [0, count). */
int ptdp_model_count(void);
const ptdp_model_ops *ptdp_model_at(int i);

/* The model called `name`, or NULL. */
const ptdp_model_ops *ptdp_model_lookup(const char *name);

/* The model of cfg: cfg->ops, or the default (the first registered). */
const ptdp_model_ops *ptdp_model_of(const ptdp_model_config *cfg);

/* The default model at its default sizes (ops NULL: the registry's first
 * model), what ptdp_train_defaults trains. */
ptdp_model_config ptdp_model_default_config(void);

/* Its name ("mlp", …): --model, checkpoints, --report. */
const char *ptdp_model_name(const ptdp_model_config *cfg);

/* The registered names, "mlp|gpt|…", joined by sep into buf. */
const char *ptdp_model_names(char *buf, size_t len, const char *sep);

/* The first registered model with a capability (a field of ptdp_model_caps,
 * read by `has`), or NULL: for messages like "… is for --model gpt". */
const ptdp_model_ops *ptdp_model_first_with(bool (*has)(const ptdp_model_caps *caps));

/* Positions per sample of a model of sequences (ops->positions), 0 for
 * one without. */
int ptdp_model_positions(const ptdp_model_config *cfg);

/* Build this device's stage and shard of cfg's model in its arena and
 * initialise it: every shard equals that slice of the single-device model
 * (model.h).  Fails the device with a message naming the flags if the
 * shapes do not divide by the mesh. */
int ptdp_model_init(ptdp_device *dev, ptdp_model *m, const ptdp_model_config *cfg,
                    const ptdp_mesh *mesh, const int *stage_layers, uint64_t seed, double dropout);
/* The same with v model chunks per stage, for an interleaved pipeline
 * (model.h, ptdp_model_setup_v; stage_layers then has p v entries). */
int ptdp_model_init_v(ptdp_device *dev, ptdp_model *m, const ptdp_model_config *cfg,
                      const ptdp_mesh *mesh, const int *stage_layers, int virtual_stages,
                      uint64_t seed, double dropout);

/* --check and the CLI's validation: the model's own rules for cfg on a
 * tp x pp mesh (model.h, ops->check). */
int ptdp_model_check(const ptdp_model_config *cfg, int tp, int pp, char *msg, size_t msglen);

#endif
