/*
 * models.h — the models ptdp has, by name, and how to build one on a device.
 *
 *   kind              name   implementation
 *   PTDP_MODEL_MLP    "mlp"  models/mlp.c (mlp.h)
 *   PTDP_MODEL_GPT    "gpt"  models/gpt.c (gpt.h)
 *
 * A model is a table of functions (ptdp_model_ops, model.h); this file is
 * the one place that lists them.  Adding a model is its own files, its
 * line here, and its flags: DP, PP, ZeRO, the training loop and the
 * checkpoints do not change.
 */
#ifndef PTDP_MODELS_H
#define PTDP_MODELS_H

#include "model.h"

/* The table of a kind, or NULL for an unknown kind. */
const ptdp_model_ops *ptdp_model_ops_of(ptdp_model_kind kind);
/* "mlp", … ; NULL for an unknown kind. */
const char *ptdp_model_name(ptdp_model_kind kind);
/* 0 and *out, or PTDP_EINVAL for an unknown name. */
int ptdp_model_parse(const char *name, ptdp_model_kind *out);

/* Build this device's stage and shard of the model cfg->kind in its arena
 * and initialise it: every shard equals that slice of the single-device
 * model (model.h).  Fails the device with a message naming the flags if
 * the shapes do not divide by the mesh. */
int ptdp_model_init(ptdp_device *dev, ptdp_model *m, const ptdp_model_config *cfg,
                    const ptdp_mesh *mesh, const int *stage_layers, uint64_t seed, double dropout);
/* The same with v model chunks per stage, for an interleaved pipeline
 * (model.h, ptdp_model_setup_v; stage_layers then has p v entries). */
int ptdp_model_init_v(ptdp_device *dev, ptdp_model *m, const ptdp_model_config *cfg,
                      const ptdp_mesh *mesh, const int *stage_layers, int virtual_stages,
                      uint64_t seed, double dropout);

/* --check and the CLI's validation: the model's own rules for cfg on a
 * tp x pp mesh (model.h, ops->check), with an unknown kind refused too. */
int ptdp_model_check(const ptdp_model_config *cfg, int tp, int pp, char *msg, size_t msglen);

#endif
