/*
 * model.h — the reference MLP, one pipeline stage of it, one micro-batch at a time.
 *
 *   h      = X W_in^T + b_in                                   (input layer, stage 0)
 *   for l:  h = h + GELU(h A_l^T + a_l) B_l^T + b_l            (block l, on its stage)
 *   logits = h W_out^T + b_out                                 (output layer, last stage)
 *   loss   = mean over the global batch of softmax cross-entropy(logits, y)
 *
 * Shapes follow PyTorch's nn.Linear [out, in]: W_in [h, d_in], A_l = fc1
 * [d_ff, h], B_l = fc2 [h, d_ff], W_out [C, h].
 *
 * The same code is the single-device baseline (every group of size 1) and
 * every parallel configuration:
 *   - pipeline parallelism gives each device a contiguous range of blocks;
 *   - tensor parallelism splits fc1 by rows (column-parallel: each rank owns
 *     d_ff/tp outputs), fc2 by columns (row-parallel: each rank owns d_ff/tp
 *     inputs) and the output layer by rows (C/tp classes each) — see tp.h;
 *   - data parallelism gives each device its shard of the batch — see dp.h.
 *
 * All parameters of a device live in one flat buffer, all gradients in
 * another, laid out in the order the backward produces them (output layer
 * first, input layer last).  Data parallelism all-reduces contiguous
 * buckets of that buffer; ZeRO shards it; the optimizer walks it once.
 */
#ifndef PTDP_MODEL_H
#define PTDP_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "mesh.h"
#include "tensor.h"

struct ptdp_device;

typedef struct {
    int d_in;        /* input features                       */
    int d_model;     /* h, the residual stream's width       */
    int d_ff;        /* the blocks' hidden width (4h)        */
    int n_layers;    /* L blocks                             */
    int n_classes;   /* C                                    */
} ptdp_model_config;

/* How tensor parallelism cuts a parameter. */
typedef enum {
    PTDP_SHARD_NONE = 0,   /* replicated on every TP rank                 */
    PTDP_SHARD_ROWS,       /* output dimension split (column-parallel)    */
    PTDP_SHARD_COLS        /* input dimension split (row-parallel)        */
} ptdp_shard;

typedef struct {
    char name[PTDP_NAME_MAX];  /* state_dict name, e.g. "blocks.3.fc1.weight" */
    int full_rows, full_cols;  /* the whole tensor; a bias is 1 x n          */
    bool is_bias;              /* saved with shape [n]                      */
    ptdp_shard shard;
    int row0, col0;            /* this shard's offset in the whole tensor   */
    size_t offset;             /* elements from the start of the flat buffers */
    ptdp_tensor w, g;          /* views into the flat parameter / gradient buffers */
} ptdp_param;

/* One block's parameters on this device (shards under TP). */
typedef struct {
    ptdp_param *fc1_w, *fc1_b, *fc2_w, *fc2_b;
} ptdp_block_params;

typedef struct {
    ptdp_model_config cfg;
    const ptdp_mesh *mesh;
    int layer_begin, layer_end;     /* this stage's blocks [begin, end)     */
    bool has_input, has_output;     /* first / last stage                   */
    int ff_local, classes_local;    /* d_ff / tp and C / tp                 */
    double dropout;                 /* probability, 0 = off                 */
    uint64_t seed;

    int nparams;
    ptdp_param *params;             /* backward order                       */
    ptdp_param *in_w, *in_b, *out_w, *out_b;   /* NULL where not on this stage */
    ptdp_block_params *blocks;      /* [layer_end - layer_begin]            */
    ptdp_real *flat_w, *flat_g;     /* the flat buffers (arena)             */
    size_t numel;                   /* elements in each                     */
} ptdp_model;

/* Cut L blocks into pp stages: stage_layers (pp entries, may be NULL for
 * balanced: the first L mod pp stages take one block more).  Returns the
 * first block of `stage` and its count. */
void ptdp_stage_range(int n_layers, int pp, const int *stage_layers, int stage,
                      int *begin, int *count);

/* Allocate this device's stage and shard of the model in its arena and
 * initialise it: weights N(0, 0.02^2) from the counter-based generator keyed
 * by (seed, parameter name, element index of the WHOLE tensor), biases 0, so
 * every shard equals that slice of the single-device model. */
int  ptdp_model_init(struct ptdp_device *dev, ptdp_model *m, const ptdp_model_config *cfg,
                     const ptdp_mesh *mesh, const int *stage_layers, uint64_t seed, double dropout);
void ptdp_model_free(struct ptdp_device *dev, ptdp_model *m);
ptdp_param *ptdp_model_find(ptdp_model *m, const char *name);

/* What one micro-batch leaves behind for its backward (category "acts"). */
typedef struct {
    int rows;                 /* samples in this micro-batch               */
    int64_t first_sample;     /* global index of its first sample (dropout keys) */
    long step;                /* training step (dropout keys)              */
    ptdp_tensor x;            /* stage input: X on stage 0, else the received h */
    int nblocks;
    ptdp_tensor *h;           /* residual stream entering each local block, and leaving the last */
    ptdp_tensor *a;           /* fc1 output before GELU, per block          */
    ptdp_tensor *g;           /* GELU output (after dropout), per block     */
    /* h, a, g are host arrays of tensor headers (bookkeeping); the tensors'
     * data live in the arena, category "acts". */
    ptdp_tensor logits;       /* last stage: this rank's logit columns      */
    double *rowmax, *sumexp;  /* last stage: softmax statistics per row      */
    const int64_t *labels;    /* last stage                                */
    double loss_sum;          /* last stage: sum of per-sample losses       */
    bool recompute;           /* only x was kept; redo the forward in backward */
    bool alive;
} ptdp_acts;

/* Forward one micro-batch through this stage.  `x` is the stage input
 * (rows x d_in on stage 0, rows x h elsewhere) and is copied into acts;
 * `out` (rows x h) receives the stage output unless this is the last stage;
 * on the last stage `labels` are used and acts->loss_sum is set.  With
 * recompute, everything but x is freed at the end of the forward. */
int ptdp_model_forward(struct ptdp_device *dev, ptdp_model *m, ptdp_acts *acts,
                       ptdp_tensor x, const int64_t *labels, int64_t first_sample, long step,
                       bool recompute, ptdp_tensor *out);
/* Backward of one micro-batch: accumulates into the gradients.  `dout` is
 * the gradient of the stage output (NULL on the last stage, where the loss
 * gradient is scaled by loss_scale = 1/global batch); `dx` (rows x h), if
 * not NULL and not stage 0, receives the gradient of the stage input.
 * Frees the micro-batch's activations. */
int ptdp_model_backward(struct ptdp_device *dev, ptdp_model *m, ptdp_acts *acts,
                        const ptdp_tensor *dout, double loss_scale, ptdp_tensor *dx);
void ptdp_acts_free(struct ptdp_device *dev, ptdp_acts *acts);

/* Whether this device's copy of p counts in a whole-model sum (the gradient
 * norm): a shard always does; a TP-replicated parameter holds the same
 * gradient on every TP rank, so only TP rank 0 counts it. */
bool ptdp_param_counted_here(const ptdp_model *m, const ptdp_param *p);
/* x := the sum of x over this device's TP group, then its PP group: from
 * what this shard of this stage holds to the whole model.  Collective. */
int ptdp_model_sum_over_shards(ptdp_model *m, double *x);

/* Sum of squared gradients counting every parameter of the whole model
 * once: shards are summed across TP, TP-replicated parameters counted on TP
 * rank 0 only, stages summed across PP.  Collective over tp and pp groups. */
int ptdp_model_grad_sumsq(struct ptdp_device *dev, ptdp_model *m, double *sumsq);

#endif
