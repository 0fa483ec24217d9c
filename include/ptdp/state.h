/*
 * state.h — a training state in host memory, as whole (unsharded) tensors.
 *
 * This is what a checkpoint holds and what --check compares: the parameters
 * named like a PyTorch state_dict (in.weight, blocks.{l}.fc1.weight, …,
 * out.bias), the optimizer state (optim.{name}.exp_avg / exp_avg_sq, or
 * optim.{name}.momentum_buffer for SGD), the number of steps taken, and the
 * configuration.  Devices copy their shards into it and out of it — like
 * torch.distributed.checkpoint, each rank writes and reads only its own
 * slice, so no device ever needs memory for the whole model.
 *
 * This works because device threads share the host's memory.  The MPI
 * backend (one process per device) has no shared host state: each process
 * copies its device's shards into its own host state, the hosts' copies are
 * merged (ptdp_host_merge, launch.h: every element is written by one device
 * and zero elsewhere) so rank 0 writes one file, the threads' byte for
 * byte; loading reads the file on every rank.
 */
#ifndef PTDP_STATE_H
#define PTDP_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "device.h"
#include "model.h"
#include "optim.h"   /* ptdp_optimizer_kind */
#include "zero.h"

/* The most optimizer steps a state may count: 2^53 - 1, the largest integer
 * a double holds exactly (AdamW's bias corrections raise beta to the step). */
#define PTDP_MAX_STEP ((int64_t)9007199254740991)

typedef struct {
    char name[2 * PTDP_NAME_MAX];     /* "blocks.3.fc1.weight", "optim.out.bias.exp_avg" */
    int rows, cols;                  /* a bias or 1-D state is 1 x n   */
    bool is_bias;                    /* saved with shape [n]           */
    ptdp_real *data;                 /* rows * cols, host memory       */
} ptdp_state_tensor;

typedef struct {
    ptdp_model_config cfg;
    ptdp_optimizer_kind optimizer;
    bool has_momentum;               /* SGD with momentum: momentum buffers */
    uint64_t seed;
    int batch;
    long step;                       /* optimizer steps taken          */
    int ntensors;
    ptdp_state_tensor *t;            /* parameters first, then optimizer state */
} ptdp_state;

/* An empty state for cfg: every parameter tensor (zeros), and the optimizer
 * tensors of `optimizer` (with_momentum: SGD momentum buffers). */
int  ptdp_state_init(ptdp_state *s, const ptdp_model_config *cfg, ptdp_optimizer_kind optimizer,
                       bool with_momentum);
void ptdp_state_free(ptdp_state *s);
ptdp_state_tensor *ptdp_state_find(ptdp_state *s, const char *name);

/* Save as safetensors (atomic) and load.  Loading trusts nothing: the model
 * and its shapes must be cfg's, every metadata field present and a whole
 * number (seed >= 0, batch >= 1), every tensor one this model has, of its
 * shape and dtype (F32 or F64), every value finite, every exp_avg_sq >= 0,
 * optim.step in [0, PTDP_MAX_STEP]; it fills optimizer (and whether SGD
 * has momentum buffers), step, seed and batch from the file.  Errors:
 * PTDP_EIO / PTDP_ECORRUPT with a message naming the file and the tensor
 * or field; PTDP_EINVAL for another model's checkpoint
 * (ptdp_state_check_model). */
int ptdp_state_save(const ptdp_state *s, const char *path, char *msg, size_t msglen);
int ptdp_state_load(ptdp_state *s, const char *path, const ptdp_model_config *cfg,
                    char *msg, size_t msglen);

/* Whether the checkpoint at `path` holds cfg's kind of model — the first
 * check of ptdp_state_load, alone, for a command to make before any other
 * (before it reads the file's shapes, say).  0; PTDP_EINVAL when it holds
 * another model ptdp has (the run's --model or the file is the wrong
 * choice, not the file damaged), the message naming the model and the
 * tensors: the first of the file's this model has no place for and the
 * first of this model's the file lacks, each with how many more;
 * PTDP_ECORRUPT for a kind ptdp does not have, PTDP_EIO / PTDP_ECORRUPT
 * when the file cannot be read.  ptdp_state_load returns the same. */
int ptdp_state_check_model(const char *path, const ptdp_model_config *cfg, char *msg, size_t msglen);

/* The model a checkpoint holds, from its metadata alone: its kind, its
 * shapes — every key of the file the model takes, then the model's list
 * for what that makes, each present — and its settings (ptdp_state_settings):
 * what a command needs before it can build the model to load the file
 * into, e.g. ptdp sample.  0, or PTDP_EIO / PTDP_ECORRUPT naming the
 * field (a file without __metadata__ says so). */
int ptdp_state_peek_config(const char *path, ptdp_model_config *cfg, char *msg, size_t msglen);

/* The settings a checkpoint records beyond its shapes (model.h's
 * ptdp_meta_setting: a mixture's capacity factor and balance weight),
 * for what a --load does with them: cfg's list of them (its model's
 * settings hook), each `value` the file's, or `absent`'s in a file saved
 * before the key was recorded.  ptdp_state_load never compares them: they
 * are the run's to choose.  The number (at most max), or PTDP_EIO /
 * PTDP_ECORRUPT (a value the flag does not take) with msg. */
int ptdp_state_settings(const char *path, const ptdp_model_config *cfg, ptdp_meta_setting *out, int max,
                        char *msg, size_t msglen);
/* One setting into cfg (its model's from_metadata or, a real,
 * from_metadata_real).  0, or PTDP_EINVAL. */
int ptdp_state_take_setting(ptdp_model_config *cfg, const ptdp_meta_setting *set);
/* A metadata value as a user types it: a real in the fewest digits that
 * read back the same (1.0000000000000000e-02 -> 0.01), a whole number as
 * it is; buf holds the former. */
const char *ptdp_state_meta_text(const char *value, char buf[32]);

/* FP8's delayed scaling keeps an amax history per weight and operand
 * (fp8_linear.h); a checkpoint holds them all in one tensor of 3P rows
 * (the P parameters in state_dict order, each as x, w, dy) and H + 1
 * columns: the amaxes recorded, then zeros, after their count:
 *
 *     row 3 i + r   [ count | amax_oldest … amax_newest | 0 … 0 ]
 *
 * A parameter FP8 never quantized (a norm, the head) has count 0. */
#define PTDP_FP8_HISTORY_TENSOR "fp8.amax_history"
/* Add that tensor, zeros, for histories of H steps.  0 or PTDP_ENOMEM. */
int ptdp_state_add_fp8_history(ptdp_state *s, int H);

/* A model whole on one device, from a state: a mesh of that device alone,
 * cfg's model built on it, every parameter read from s (what ptdp sample
 * and the held-out score run).  0, or the failure (nothing to free then);
 * else free with ptdp_model_free, then ptdp_mesh_free. */
int ptdp_state_model_whole(ptdp_device *dev, const ptdp_state *s, const ptdp_model_config *cfg, ptdp_mesh *mesh,
                           ptdp_model *m);

/* Copy a device's shard into the whole tensor (ptdp_param_whole_index);
 * the way back is the library's (state_impl.h, ptdp_state_model_whole). */
void ptdp_param_to_state(const ptdp_param *p, ptdp_tensor local, ptdp_state_tensor *whole);

#endif
