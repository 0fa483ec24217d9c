/*
 * state_impl.h — one device's part of a checkpoint, for the trainer
 * (private to src/).
 *
 * ptdp_state_save / ptdp_state_load (state.h) write and read a run's
 * checkpoint; inside, each device writes and reads its own tensors and
 * optimizer slots by these names:
 *
 *   device d ──ptdp_state_save_device──▶ shard file ◀──ptdp_state_load_device── device d
 */

#ifndef PTDP_TRAIN_STATE_IMPL_H
#define PTDP_TRAIN_STATE_IMPL_H

#include "ptdp/state.h"

/* Copy the whole tensor's elements of a device's shard into it (state.h's
 * ptdp_param_to_state, the other way). */
void ptdp_param_from_state(const ptdp_param *p, ptdp_tensor local, const ptdp_state_tensor *whole);

/* Number of optimizer tensors per parameter: 2 (AdamW), 1 (SGD+momentum) or 0. */
int  ptdp_state_optim_slots(const ptdp_state *s);

/* Name of optimizer slot k of parameter `param`: "exp_avg", "exp_avg_sq", "momentum_buffer". */
const char *ptdp_state_slot_name(const ptdp_state *s, int k);

/* A device's part of a whole state (state_shards.c): save writes the
 * elements this device is the writer of — its shards of the parameters
 * (the copies the norm counts, model.h) and, with_optim, the optimizer
 * state of what it owns (zero.h); load reads everything it holds (the
 * model's views, or ZeRO's exact parameters, and its optimizer state).
 * Load: 0, or PTDP_ECORRUPT naming a tensor the state lacks, PTDP_ENOMEM. */
void ptdp_state_save_device(ptdp_state *s, ptdp_model *m, const ptdp_zero *z, bool with_optim);
int  ptdp_state_load_device(ptdp_device *dev, const ptdp_state *s, ptdp_model *m, ptdp_zero *z);

/* FP8's amax histories (state.h's PTDP_FP8_HISTORY_TENSOR), when s has
 * the tensor and f keeps histories: save writes the rows of the weights
 * this device holds as their first replica (TP ranks write identical
 * rows), load reads every weight's it holds. */
struct ptdp_fp8_linear;
void ptdp_state_save_fp8(ptdp_state *s, ptdp_model *m, struct ptdp_fp8_linear *f);
void ptdp_state_load_fp8(const ptdp_state *s, ptdp_model *m, struct ptdp_fp8_linear *f);

#endif
