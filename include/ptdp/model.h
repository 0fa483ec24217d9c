/*
 * model.h — the model interface: what one pipeline stage of any model gives
 * the parallel machinery, for one micro-batch at a time.
 *
 * Data parallelism, ZeRO, the pipeline executor, the training loop and the
 * checkpoints never ask which model runs.  They see this:
 *
 *                 ┌──────────────────────── ptdp_model (this device) ───────────────────────┐
 *   data ────────►│ forward(batch, input) ──► output ─────────────────────────► next stage │
 *   (stage 0      │     keeps ptdp_acts                                                      │
 *    input, last  │ backward(acts, doutput) ──► dinput ───────────────────────► prev stage │
 *    stage labels)│     ADDS into the gradient buffer                                       │
 *                 │                                                                          │
 *                 │ flat_w  [ p0 | p1 | p2 | … ]   every parameter of this stage and shard, │
 *                 │ flat_g  [ g0 | g1 | g2 | … ]   one buffer each, in backward order      │
 *                 │ params[i]: name, whole shape, TP split, offset, init                    │
 *                 └──────────────────────────────────────────────────────────────────────────┘
 *
 *   DP      all-reduces contiguous buckets of flat_g          (dp.h)
 *   ZeRO    cuts flat_w, flat_g and the optimizer state into 1/dp chunks (zero.h)
 *   PP      runs forward / backward in the order of a schedule and moves the
 *           stage boundary (rows x boundary_cols elements) between stages (pp.h)
 *   state   copies each params[i] into and out of its whole tensor (state.h)
 *
 * An interleaved pipeline gives a device v of these, its model chunks
 * (chunks s, s + p, … of p v), under one ptdp_model that owns the buffers:
 *
 *   device  flat_w [ chunk v-1 | … | chunk 0 ]   params[] the same, in order
 *   chunk c its own blocks, forward, backward; params = its window
 *
 * so everything above, except the executor, sees one model per device.
 *
 * A model implements the table ptdp_model_ops (models.h lists the models);
 * its init describes its parameters with ptdp_model_add_param, in the order
 * the backward produces their gradients, and this file does the rest:
 * the flat buffers in the device's arena, the views, the counter-based
 * initialisation (element (i, j) of the WHOLE tensor drawn from the stream
 * named after the parameter, so every TP shard draws exactly its slice of
 * what one device draws), and the rule that counts every parameter of the
 * whole model once in a gradient norm.
 *
 * Model sizes have one vocabulary everywhere, the flags':
 *   hidden   the width of the residual stream (d_model, "h")    --hidden
 *   ffn      the inner width of each MLP block (d_ff, 4 hidden)  --ffn
 *   layers   the blocks                                          --layers
 */
#ifndef PTDP_MODEL_H
#define PTDP_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bf16.h"
#include "counters.h"
#include "device.h"
#include "mesh.h"
#include "tensor.h"
#include "wgrad.h"

typedef struct ptdp_model_ops ptdp_model_ops;

/* A model's configuration.  Which model: its table of functions, found by
 * name in the registry (models.h); NULL means the registry's first model,
 * the default.  The sizes every model has are fields; what one model
 * alone has (the MLP's input features, the GPT's heads and vocabulary, …)
 * lives in `own`, a block this layer copies with the config but never
 * reads.  The model's header gives its layout and the one way to read it:
 *
 *   ptdp_model_config                     mlp.h                 gpt.h
 *   ┌ ops, hidden, ffn, layers ┐
 *   └ own[PTDP_MODEL_OWN_MAX] ─┴─► ptdp_mlp(c)->d_in   or  ptdp_gpt(c)->heads
 *
 * Why bytes rather than a pointer: a config is a value (copied into every
 * model, every run, every checkpoint probe) and stays one, with no owner
 * to free.  Why not a union of the models' settings: this layer would name
 * the models.  Each model's header static-asserts that its settings fit,
 * and gives a builder for readable initialisers (PTDP_MLP_CONFIG(.d_in =
 * 6, .hidden = 8, …)). */
#define PTDP_MODEL_OWN_MAX 192

typedef struct {
    const ptdp_model_ops *ops; /* the model (models.h); NULL: the default   */
    int hidden;             /* residual stream width (d_model)     --hidden  */
    int ffn;                /* MLP blocks' inner width (d_ff)      --ffn     */
    int layers;             /* blocks                              --layers  */
    _Alignas(max_align_t) unsigned char own[PTDP_MODEL_OWN_MAX];
                            /* the model's own settings (its header)        */
} ptdp_model_config;

/* How tensor parallelism cuts a parameter. */
typedef enum {
    PTDP_SHARD_NONE = 0,   /* replicated on every TP rank                 */
    PTDP_SHARD_ROWS,       /* output dimension split (column-parallel)    */
    PTDP_SHARD_COLS        /* input dimension split (row-parallel)        */
} ptdp_shard;

/* How a parameter starts. */
typedef enum {
    PTDP_INIT_NORMAL = 0,  /* N(0, init_std^2), counter-based             */
    PTDP_INIT_ZEROS,
    PTDP_INIT_ONES
} ptdp_init;

/* One parameter tensor as the whole model has it: for checkpoints and for
 * the list of a model's tensors (no device needed). */
typedef struct {
    char name[PTDP_NAME_MAX];  /* state_dict name, e.g. "blocks.3.fc1.weight" */
    int rows, cols;            /* the whole tensor; a bias is 1 x n          */
    bool is_bias;              /* saved with shape [n]                      */
} ptdp_param_info;

/* Where a parameter's gradient is summed: the one declaration that DP's
 * buckets, ZeRO's shards, the gradient norm and the checkpoints read.
 *
 *   parameter                     replicas   also      counted / saved by
 *   any (the default)             DP         -         tp rank 0 if replicated over TP
 *   a LayerNorm under SP (sp.h)   DP         TP        tp rank 0
 *   a tied embedding's copies     DP         EMB       emb rank 0: stage 0's copy
 *   an expert under --ep (mesh.h) EDP        -         edp rank 0 of each EP rank
 *   a copy held by tp_share TP    DP         TP_SHARE  its rank 0
 *   ranks (mesh.h, ops->tp_share)
 *
 * The sum over `replicas` is the data-parallel one (dp.h's buckets or
 * zero.h's shards: every micro-batch of every replica adds up).  Then,
 * once per step, the gradient is all-reduced over each group of `also`,
 * in group order (ptdp_model_sum_groups): the TP ranks of an SP LayerNorm
 * each saw only their positions; the two copies of a tied embedding each
 * saw one of its two uses.  Each such group holds equal copies of the
 * parameter afterwards, and the copy of the group's rank 0 is the one the
 * norm counts and the checkpoint saves. */
typedef struct {
    ptdp_group replicas;       /* PTDP_GROUP_DP, or PTDP_GROUP_EDP: DP's
                                  buckets and ZeRO's shards of it run over
                                  that group (dp.h, zero.h)                */
    unsigned also;             /* PTDP_GROUP_BIT of each further group      */
} ptdp_grad_sum;

/* One parameter on this device: its shard of the whole tensor. */
typedef struct {
    char name[PTDP_NAME_MAX];  /* state_dict name, e.g. "blocks.3.fc1.weight" */
    int full_rows, full_cols;  /* the whole tensor; a bias is 1 x n          */
    bool is_bias;              /* saved with shape [n]                      */
    ptdp_shard shard;
    int row0, col0;            /* this shard's offset in the whole tensor   */
    int parts;                 /* 1; or the whole tensor is `parts` equal
                                  blocks along the split dimension, each cut
                                  the same way, and the shard is its slice of
                                  every block: c_attn's q, k and v (3)        */
    ptdp_init init;
    double init_std;           /* PTDP_INIT_NORMAL                          */
    bool no_decay;             /* the optimizer applies no weight decay (as
                                  GPT-2 training does for biases and norms) */
    bool keeps_precision;      /* --fp8 leaves the products with it in the
                                  run's precision: the output head, as
                                  DeepSeek-V3 and torchtitan keep it       */
    bool linear_weight;        /* the W of a linear layer (parallel_linear.h):
                                  what --fp8 quantizes, unless it keeps its
                                  precision, and what ZeRO-3's --fp8-comm
                                  therefore gathers as FP8 codes            */
    ptdp_grad_sum sum;         /* the groups its gradient is summed over:
                                  over DP unless the model declares more   */
    size_t offset;             /* elements from the start of the flat buffers */
    int unit;                  /* the unit it belongs to (ptdp_model_begin_unit):
                                  ZeRO-3 gathers a unit's parameters together */
    int subunit;                 /* the subunit of its unit it belongs to
                                  (ptdp_model_begin_subunit), or -1: the unit
                                  is used whole */
    ptdp_tensor w, g;          /* views into the flat parameter / gradient buffers */
} ptdp_param;

/* What a model tells whoever manages its parameters (ZeRO-3, zero.h), unit
 * by unit: it is about to read a unit's parameters, or is done with them,
 * in a forward or in a backward (which also adds into their gradients). */
typedef enum {
    PTDP_UNIT_FORWARD_BEGIN = 0,
    PTDP_UNIT_FORWARD_END,
    PTDP_UNIT_BACKWARD_BEGIN,
    PTDP_UNIT_BACKWARD_END
} ptdp_unit_event;

/* The samples of one micro-batch, as the data gives them.  Stage 0 reads
 * its input here, the last stage its labels; other stages get neither. */
typedef struct {
    int64_t first;            /* global index of the first sample           */
    int rows;                 /* samples                                    */
    ptdp_tensor x;            /* stage 0 of a model of features: rows x
                                 input_cols values (the MLP)                */
    int64_t *tokens;          /* stage 0 of a model of tokens: rows x
                                 input_cols ids                             */
    int64_t *labels;          /* last stage: rows x label_cols targets      */
    int t0, tlen;             /* a model of sequences may run only the token
                                 slice [t0, t0 + tlen) of each (TeraPipe,
                                 pp.h); tlen 0: the whole sequence        */
} ptdp_batch;

/* What one micro-batch leaves behind for its backward (category "acts"). */
typedef struct {
    int rows;                 /* samples in this micro-batch               */
    int64_t first_sample;     /* global index of its first sample (dropout keys) */
    long step;                /* training step (dropout keys)              */
    const int64_t *labels;    /* last stage: the batch's labels            */
    double loss_sum;          /* last stage: sum of per-sample losses       */
    bool recompute;           /* full: only each block's input was kept     */
    bool alive;               /* between forward and backward              */
    int t0, tlen;             /* the batch's token slice (tlen 0: whole)   */
    void *saved;              /* the model's own record of what it keeps:
                                 host bookkeeping, tensors in the arena     */
} ptdp_acts;

typedef struct ptdp_model ptdp_model;

/* What a model supports, so that the layers above it ask the model instead
 * of its name: the training loop's validation, the planner, the CLI.
 * Everything false is refused with a message naming the flag and the
 * model (its `title`). */
typedef struct {
    const char *title;        /* the model in a sentence: "the MLP"        */
    bool sequences;           /* its samples are sequences of positions:
                                 ops->positions says how many             */
    bool attention;           /* it has an attention core to recompute
                                 selectively (--recompute selective)      */
    bool sequence_parallel;   /* --sp: LayerNorm regions split along the
                                 sequence over TP (sp.h)                  */
    bool context_parallel;    /* --cp: each sequence split over devices   */
    bool token_slices;        /* --token-slices: TeraPipe's slices        */
    bool plannable;           /* the planner (plan.h) prices it           */
} ptdp_model_caps;

/* A run's layout as a model's check_run sees it (train.h has the rest). */
typedef struct ptdp_model_run {
    int tp, pp, cp, zero, token_slices;
    int dp, ep;                     /* ep: expert parallelism, 1 = off      */
    int etp;                        /* the experts' TP size (moe_fold.c):
                                       tp unless --etp folds them          */
    bool sp, bf16;
    bool cp_a2a;                    /* --cp-algo a2a: CP by Ulysses' all-to-alls */
    bool shards_params;             /* ZeRO's stage shards the parameters,
                                       each unit gathered while it computes
                                       (its row's shards_params, zero.h)    */
    bool copies;                    /* the schedule holds two copies of the
                                       model (DualPipe's, pp_layout.h)      */
    const struct ptdp_fp8_recipe *fp8;   /* --fp8's recipe, or NULL (the
                                       model checks its splits' tiles with
                                       ptdp_fp8_split_check_all)            */
} ptdp_model_run;

/* What generating text needs of a model of tokens (sample.h): the model
 * whole on one device, a forward of one sequence at a time, the logits of
 * its last stage.  Optional (ops->sampling NULL: `ptdp sample` refuses the
 * model, naming those that can be sampled).  The sequence's positions are
 * ops->positions', so a model that fills this has caps.sequences.
 *
 *   checkpoint ──metadata──► config ──without_data──► one device, tp = pp = 1
 *   prompt ──► forward(context) ──logits──► row of the last real token
 *          ──► its first vocab() columns ──► the next token
 */
typedef struct ptdp_model_sampling {
    /* V: the tokens a prompt may hold and a draw may give, 0 .. V-1. */
    int  (*vocab)(const ptdp_model_config *c);
    /* c (read from a checkpoint's metadata, or a run's) made buildable
     * without its data: its data source the `len` zero tokens at `zeros`
     * (never read: a sampler fills its batches itself), and what the
     * metadata do not record (0 there) at the model's defaults.  A config
     * that already has them keeps them. */
    void (*without_data)(ptdp_model_config *c, const unsigned char *zeros, size_t len);
    /* After a forward of the last stage on one device: its logits, one row
     * per position of the micro-batch's sequences (rows x positions), the
     * V real tokens' columns first (a padded vocabulary's after them,
     * never drawn). */
    ptdp_tensor (*logits)(const ptdp_acts *acts);
} ptdp_model_sampling;

/* How a real-valued metadata value is written: 17 significant digits (a
 * double read back is the same double) in exponent form, so that a reader
 * tells it from a whole number. */
#define PTDP_META_REAL_FMT "%.16e"

/* A setting that changes the math but no tensor's shape (a mixture's
 * capacity factor and balance weight, moe.h), as a checkpoint records it
 * beside the shapes.  A shape must match the run that loads the file; a
 * setting is the run's to choose: `ptdp train --load` takes the file's
 * value for a flag not typed and says so when a typed one overrides it
 * (as --seed).  A file saved before the key was recorded means `absent`:
 * the flag's default at that time, never to change with today's. */
typedef struct {
    const char *key;          /* "moe_capacity_factor"                     */
    const char *flag;         /* "--moe-capacity-factor"                   */
    char value[32];           /* as metadata writes it: a whole number, or
                                 a real in PTDP_META_REAL_FMT             */
    char absent[32];          /* what a file without the key means (the
                                 same format)                             */
    bool unless_absent;       /* written only when value is not `absent`
                                 (a setting newer than the files, which
                                 still read it: a file without the key
                                 means absent), so files that do not use
                                 it stay what they were                   */
} ptdp_meta_setting;

#define PTDP_META_SETTINGS_MAX 8

struct ptdp_model_ops {
    const char *name;                         /* "mlp": --model and checkpoints */
    ptdp_model_caps caps;                     /* what it supports             */
    /* Optional: positions per sample of a model with caps.sequences (the
     * --seq-len a split along the sequence must divide). */
    int  (*positions)(const ptdp_model_config *c);
    /* Optional: attention heads of a model with caps.attention (what
     * --cp-algo a2a splits over the CP group, ulysses.h); without it a
     * model refuses --cp-algo a2a. */
    int  (*heads)(const ptdp_model_config *c);

    /* ---- the whole model, from its configuration alone (no device) ---- */
    /* 0, or PTDP_EINVAL with a message naming the flags and what would work
     * (e.g. "--tp 3 must divide --ffn 256 (valid --tp: …)"). */
    int  (*check)(const ptdp_model_config *c, int tp, int pp, char *msg, size_t msglen);
    /* The whole model's parameters in state_dict (forward) order: fills
     * out[] if not NULL, returns their number. */
    int  (*list_params)(const ptdp_model_config *c, ptdp_param_info *out);
    /* Checkpoint metadata naming the shapes: up to `max` keys with their
     * values and the flag each one comes from.  Returns the number. */
    int  (*metadata)(const ptdp_model_config *c, const char **keys, char (*values)[32],
                     const char **flags, int max);
    /* The reverse: set the field of c that metadata calls `key`.  0, or
     * PTDP_EINVAL for a key the model does not have. */
    int  (*from_metadata)(ptdp_model_config *c, const char *key, long long value);
    /* Optional: the same for a real-valued setting that changes the math
     * (the llama's rope_theta, norm_eps).  metadata writes such a value
     * with PTDP_META_REAL_FMT, so that it always reads as a real
     * (5.0000000000000000e+05, never 500000); a checkpoint must then hold the same double. */
    int  (*from_metadata_real)(ptdp_model_config *c, const char *key, double value);
    /* Optional (NULL: none): c's settings that change the math but no
     * shape (ptdp_meta_setting), up to `max`: the number.  A checkpoint
     * writes them after metadata's keys; from_metadata (a whole number)
     * or from_metadata_real (a real) reads each back. */
    int  (*settings)(const ptdp_model_config *c, ptdp_meta_setting *out, int max);

    /* ---- one device: its stage and shard ---- */
    /* Describe this stage's parameters (ptdp_model_add_param, backward
     * order), set the per-sample sizes below, and prepare the data. */
    int  (*init)(ptdp_device *dev, ptdp_model *m);
    void (*free)(ptdp_device *dev, ptdp_model *m);
    /* Fill b's samples: b->x if it has data, b->labels if not NULL. */
    void (*fill_batch)(ptdp_model *m, ptdp_batch *b);
    /* Forward one micro-batch through this stage: stage 0 reads b->x, the
     * others `input` (rows x boundary_cols); the last stage reads b->labels
     * and sets acts->loss_sum; `out` (rows x boundary_cols) receives the
     * stage output unless this is the last stage.  With recompute only each
     * block's input is kept, and the backward redoes one block at a time. */
    int  (*forward)(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_batch *b,
                    ptdp_tensor input, long step, bool recompute, ptdp_tensor *out);
    /* Backward of one micro-batch: ADDS into the gradients.  `dout` is the
     * gradient of the stage output (NULL on the last stage, where the loss
     * gradient is scaled by loss_scale = 1 / global batch); `dx`, if not
     * NULL and not stage 0, receives the gradient of the stage input.
     * Frees the micro-batch's activations. */
    int  (*backward)(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                     double loss_scale, ptdp_tensor *dx);
    /* Free what acts still holds (a failed or abandoned micro-batch). */
    void (*acts_free)(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts);
    /* The mesh groups beyond dp, cp, tp and pp that the model's parameters
     * may declare (ptdp_grad_sum.also; PTDP_GROUP_BIT of each, 0: none).
     * ptdp_model_setup builds them (mesh.h, a collective of the whole
     * world) before the model's init. */
    unsigned groups;
    /* Optional (NULL: 1): the size of the TP sub-groups (PTDP_GROUP_TP_SHARE,
     * mesh.h) a configuration's parameters declare on a TP group of tp —
     * the ranks that hold one copy of a tensor TP cannot cut finer (a kv
     * head shared by the query heads of tp / K ranks).  Divides tp. */
    int  (*tp_share)(const ptdp_model_config *c, int tp);
    /* Optional (NULL: the model's backward cannot be split).  backward
     * without the weight-gradient products of its linear layers, which it
     * records in w instead (wgrad.h) for ptdp_model_backward_weight; with
     * w NULL, exactly backward. */
    int  (*backward_input)(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                           double loss_scale, ptdp_tensor *dx, ptdp_wgrad *w);
    /* Optional (NULL: it counts nothing): the model's statistics of a
     * training step (counters.h) — an auxiliary loss already in its
     * backward's gradient and not in loss_sum (a mixture of experts'
     * balance loss, "aux_loss"), its experts' loads, … .  publish, on the
     * host before any device, names them for the configuration c (0, or
     * the registry's refusal); count, asked after each forward of a
     * training step (pp.c), adds what this stage counted of the
     * micro-batch (ptdp_count).  (Not fields of ptdp_acts: a pipeline holds
     * one per micro-batch in flight; and only a training step's forward
     * counts, never a recomputation's.) */
    int  (*publish)(const ptdp_model_config *c, ptdp_counters *reg);
    void (*count)(const ptdp_model *m, const ptdp_acts *acts, ptdp_counts *counts);
    /* Optional (NULL: whatever caps allow): what this configuration of the
     * model supports of a run's layout, beyond caps — 0, or PTDP_EINVAL with
     * a message naming the flags (e.g. a GPT with experts refuses --cp). */
    int  (*check_run)(const ptdp_model_config *c, const struct ptdp_model_run *r, char *msg, size_t msglen);
    /* Optional (NULL: nothing): once a training step, after the
     * optimizer's update and ZeRO's gather, on every device, each model
     * chunk: the model's own update of its buffers (a mixture's expert
     * bias under --moe-bias-update, moe.h) — collectives of the stage's
     * groups allowed, the same on every device of a group.  0, or the
     * failure. */
    int  (*after_step)(ptdp_device *dev, ptdp_model *m);
    /* Optional (NULL: `ptdp plan` refuses the model): how the planner
     * prices it (model_plan.h); caps.plannable says the same. */
    const struct ptdp_model_plan *plan;
    /* Optional (NULL: `ptdp sample` refuses the model): what generating
     * text needs of it (above, sample.h). */
    const ptdp_model_sampling *sampling;
};

struct ptdp_model {
    const ptdp_model_ops *ops;
    ptdp_model_config cfg;
    const ptdp_mesh *mesh;
    int layer_begin, layer_end;     /* this stage's blocks [begin, end)     */
    bool first_stage, last_stage;
    double dropout;                 /* probability, 0 = off                 */
    uint64_t seed;
    bool recompute_core;            /* selective recomputation: keep no
                                       activations of the model's costly
                                       core and redo it in the backward (a
                                       GPT: the attention core's T x T
                                       probabilities; set by the caller
                                       after init; a model without such a
                                       core, caps.attention false, ignores
                                       it)                                  */
    bool attention_tiled;           /* --attention tiled: the core in tiles
                                       (attention_tiled.c), keeping a
                                       log-sum-exp a query, not the T x T
                                       probabilities; set after init as
                                       recompute_core                       */
    bool overlap;                   /* --overlap: the model's own collectives
                                       that nothing waits for at once (SP's
                                       backward all-gathers, gpt_ops.c) run
                                       on the communication stream (clock.h);
                                       set by the caller after init         */

    /* Per sample, set by the model's init. */
    int input_cols;                 /* stage 0's input: features or tokens  */
    bool input_tokens;              /* the input is token ids (batch.tokens) */
    int label_cols;                 /* the last stage's targets; the loss is
                                       the mean over batch x label_cols     */
    int boundary_cols;              /* elements crossing a stage boundary   */

    int nparams, params_capacity;
    ptdp_param *params;             /* backward order (host)                */
    ptdp_real *flat_w, *flat_g;     /* the flat buffers (arena)             */
    size_t numel;                   /* elements in each                     */
    /* Mixed precision (mixed.h): with bf16 set the parameters and
     * gradients live in flat_w16 / flat_g16 (flat_w, flat_g NULL; under
     * ZeRO in shards, zero.h) and the float views exist only while a unit
     * is in use. */
    bool bf16;
    ptdp_bf16 *flat_w16, *flat_g16;
    /* --fp8 (fp8_linear.h): the products' operands quantized, set by the
     * caller after init on the device and on each chunk; NULL: off. */
    struct ptdp_fp8_linear *fp8;
    void *impl;                     /* the model's own bookkeeping (host)   */

    /* Model chunks (interleaved pipelines, schedule.h).  With v > 1 chunks
     * per stage this struct is the DEVICE: all its parameters (params,
     * flat_w, flat_g, numel: what DP, ZeRO, the optimizer and checkpoints
     * see), no layers of its own (impl NULL), first_stage / last_stage
     * meaning "holds chunk 0 / the last chunk".  Its chunks[c] are set up
     * by the model's own init, each as if it were a stage of p v, with
     * params a window of the device's params[] (so re-pointing a view on
     * the device re-points it for the chunk: they are the same struct). */
    int virtual_stages;             /* v: 1 without interleaving            */
    int chunk;                      /* a chunk: which one, 0 .. v-1          */
    ptdp_model *chunks;             /* the device, v > 1: [v]; else NULL     */
    ptdp_model *device;             /* a chunk: its device; else NULL        */

    /* Gradients final early (set on the device's model by whoever sums
     * them during the backward: dp.c's overlap; NULL: nobody).  Called by
     * ptdp_model_grads_ready with `ready`: the elements [0, ready) of the
     * device's flat_g hold their final gradient for this backward. */
    int (*grads_ready)(ptdp_device *dev, ptdp_model *m, size_t ready, void *ctx);
    void *grads_ready_ctx;

    /* Units: consecutive runs of params[] (a block, the embeddings, the
     * head) that the model uses together; at least one.  unit_hook (set on
     * the device's model by ZeRO-3; NULL: every parameter is always there)
     * hears ptdp_model_unit's events. */
    int nunits;
    int (*unit_hook)(ptdp_device *dev, ptdp_model *m, int unit, ptdp_unit_event ev, void *ctx);
    void *unit_hook_ctx;
    /* Subunits: consecutive runs of a unit's params[] that one op computes
     * with (a linear layer with its bias or LayerNorm), announced by
     * ptdp_model_subunit inside the unit's BEGIN/END; subunit_hook hears them
     * (the same ctx).  A unit the model cut into subunits is widened subunit
     * by subunit under bf16 (zero3.c); nsubunits 0: none is. */
    int nsubunits;
    bool subunit_open;           /* the params described next join a subunit  */
    int (*subunit_hook)(ptdp_device *dev, ptdp_model *m, int subunit, ptdp_unit_event ev, void *ctx);
};

/* Cut `layers` blocks into pp stages: stage_layers (pp entries, may be NULL
 * for balanced: the first layers mod pp stages take one block more).
 * Returns the first block of `stage` and its count.  With v chunks per
 * stage the same cut makes p v chunks: ptdp_stage_range(layers, p * v,
 * stage_layers, c * p + s, …) is stage s's chunk c. */
void ptdp_stage_range(int layers, int pp, const int *stage_layers, int stage,
                      int *begin, int *count);

/* ---- for a model's init ---- */
/* Describe the next parameter (backward order): its whole shape, its TP
 * split and this shard's place and shape, how it starts.  Returns it (its
 * views get their data once every parameter is described), or NULL after
 * failing the device if more were added than init reserved. */
ptdp_param *ptdp_model_add_param(ptdp_device *dev, ptdp_model *m, const char *name,
                                 int full_rows, int full_cols, bool is_bias, ptdp_shard shard,
                                 int row0, int col0, int rows, int cols,
                                 ptdp_init init, double init_std);
/* p, just described, is the W of a linear layer (its linear_weight):
 * returns p (NULL stays NULL), so that a model writes
 * b->fc_w = ptdp_model_linear_weight(ptdp_model_add_param(…)). */
ptdp_param *ptdp_model_linear_weight(ptdp_param *p);
/* Where element (r, c) of p's shard sits in the whole tensor: its index
 * in row-major order (full_cols per row).  With parts > 1 the shard's rows
 * (or, for a bias or a column split, its columns) come from every block:
 *
 *   whole c_attn.weight [3C, C]       rank r of tp holds
 *   ┌ q ┐ rows 0 .. C-1               q rows r C/tp .. (r+1) C/tp - 1
 *   ├ k ┤ rows C .. 2C-1              k rows C + r C/tp ..
 *   └ v ┘ rows 2C .. 3C-1             v rows 2C + r C/tp ..   (row0 = r C/tp) */
size_t ptdp_param_whole_index(const ptdp_param *p, int r, int c);

/* The parameters described next form a new unit (model.h's nunits): a
 * model calls it before each block's parameters, and before those of its
 * embeddings and its head.  A model that never calls it has one unit. */
void ptdp_model_begin_unit(ptdp_model *m);
/* The parameters described next, up to the next begin_subunit or
 * begin_unit, form a subunit of the current unit (model.h's nsubunits): a
 * model that cuts a unit calls it before each subunit, from the unit's
 * first parameter on, so that every parameter of the unit is in one. */
void ptdp_model_begin_subunit(ptdp_model *m);

/* Reserve room for n parameter descriptions (host bookkeeping). */
int  ptdp_model_reserve_params(ptdp_device *dev, ptdp_model *m, int n);

/* ---- for everyone: set-up (models.h's ptdp_model_init calls this) ---- */
void ptdp_model_free(ptdp_device *dev, ptdp_model *m);
ptdp_param *ptdp_model_find(ptdp_model *m, const char *name);

/* What runs chunk c's forward and backward: m->chunks[c], or m itself
 * when the device holds one chunk. */
ptdp_model *ptdp_model_chunk(ptdp_model *m, int c);

/* ---- one micro-batch ---- */
/* b->first and b->rows set: allocate (category "other") the input on stage
 * 0 (features or tokens) and the labels on the last stage, and fill them.
 * ptdp_batch_free returns them. */
int  ptdp_batch_load(ptdp_device *dev, ptdp_model *m, ptdp_batch *b);
void ptdp_batch_free(ptdp_device *dev, ptdp_batch *b);
int  ptdp_model_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_batch *b,
                        ptdp_tensor input, long step, bool recompute, ptdp_tensor *out);
int  ptdp_model_backward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                         double loss_scale, ptdp_tensor *dx);
void ptdp_acts_free(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts);
/* The backward split in two for zero-bubble schedules (wgrad.h).
 * _input ("B"): everything ptdp_model_backward does — dx, the bias and
 * LayerNorm gradients, freeing the activations — except the weight
 * gradients dW += dY^T X, recorded in w (initialised here) with copies of
 * their operands.  _weight ("W"): runs them, in order, into m's gradient
 * views and frees the copies.  B then W adds the bits ptdp_model_backward
 * adds.  PTDP_EINVAL if the model cannot split its backward. */
int  ptdp_model_backward_input(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                               double loss_scale, ptdp_tensor *dx, ptdp_wgrad *w);
int  ptdp_model_backward_weight(ptdp_device *dev, ptdp_model *m, ptdp_wgrad *w);

/* For a model's backward, after each block: the gradient of `last` and of
 * every parameter before it in params[] (backward order) is complete for
 * this micro-batch.  Since params[] is laid out in backward order, the
 * complete gradients are a growing prefix of flat_g, and a data-parallel
 * sum may start on it while the backward goes on (dp.h, --overlap).  A
 * split backward (B without W) must not call it: W still adds.  Returns
 * the hook's status (0 without one). */
int  ptdp_model_grads_ready(ptdp_device *dev, ptdp_model *m, const ptdp_param *last);

/* For a model's forward and backward: before it reads the parameters of
 * p's unit (BEGIN) and once it no longer needs them (END).  Under ZeRO-3
 * (zero.h) a unit's parameters exist on the device only between the two —
 * gathered at the first BEGIN, freed at the last END (the calls nest: a
 * unit used twice, like a tied embedding, is gathered once) — and a
 * backward's END is where the unit's gradient leaves the device.  Without
 * a hook, both are no-ops.  Returns the hook's status. */
int  ptdp_model_unit(ptdp_device *dev, ptdp_model *m, const ptdp_param *p, ptdp_unit_event ev);
/* The same events for p's subunit, inside its unit's BEGIN and END: the op
 * that reads the subunit's parameters (and, in a backward, adds into their
 * gradients) runs between the subunit's BEGIN and END.  Under bf16 only the
 * subunits in use have a float copy and a float gradient, where a unit used
 * whole has them from its BEGIN to its END.  A no-op for a parameter in
 * no subunit, or without a hook. */
int  ptdp_model_subunit(ptdp_device *dev, ptdp_model *m, const ptdp_param *p, ptdp_unit_event ev);

/* ---- the whole model from its shards ---- */
/* Whether p's gradient is summed over group g (its replicas or `also`). */
bool ptdp_param_summed_over(const ptdp_param *p, ptdp_group g);
/* Whether this device's copy of p counts in a whole-model sum (the gradient
 * norm) and is the one a checkpoint saves: a TP shard always does; a
 * TP-replicated parameter holds the same values on every TP rank, so only
 * TP rank 0 counts it; and of the copies a group of `also` makes equal,
 * only its rank 0's (ptdp_grad_sum). */
bool ptdp_param_counted_here(const ptdp_model *m, const ptdp_param *p);
/* Sum of squared gradients counting every parameter of the whole model
 * once, every DP replica holding the whole summed gradient (the float
 * views): the gradient norm's rule (model.c, ptdp_param_norm_group) as
 * plain DP applies it.  Collective over the tp and pp groups (and the EP
 * group, for experts held apart). */
int  ptdp_model_grad_sumsq(ptdp_device *dev, ptdp_model *m, double *sumsq);
/* Once per step, after the sum over the replicas: all-reduce the gradient
 * (the views p->g, float) of every parameter over each group of its
 * `also`, group by group in group order, parameters in params[] order,
 * chunk by chunk (ptdp_grad_sum).  Never per micro-batch: the two stages
 * of a tied embedding reach a micro-batch's backward at different times,
 * and a collective between them in the middle of the pipeline would wait
 * for a stage that waits for it.  Under ZeRO, whose gradients are sharded
 * by then, zero_sum.c gathers each such tensor's gradient whole for it. */
int  ptdp_model_sum_groups(ptdp_device *dev, ptdp_model *m);

#endif
