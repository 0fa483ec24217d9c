/*
 * mlp.h — the reference MLP, the first model behind the model interface.
 *
 *   h      = X W_in^T + b_in                                   (input layer, stage 0)
 *   for l:  h = h + dropout(fc2(dropout(GELU(fc1(h)))))        (block l, on its stage)
 *   logits = h W_out^T + b_out                                 (output layer, last stage)
 *   loss   = mean over the global batch of softmax cross-entropy(logits, y)
 *
 * Shapes follow PyTorch's nn.Linear [out, in], in the flags' vocabulary
 * (model.h): in.weight [hidden, d_in], blocks.l.fc1.weight [ffn, hidden],
 * blocks.l.fc2.weight [hidden, ffn], out.weight [classes, hidden].
 *
 * Under tensor parallelism fc1 is split by rows (column-parallel: each rank
 * owns ffn/tp outputs), fc2 by columns (row-parallel: ffn/tp inputs) and the
 * output layer by rows (classes/tp each): see tp.h.  The rest of ptdp sees
 * only the model interface; what is here is for code that looks inside the
 * MLP on purpose (the figures, the benchmark, tests of its parts).
 */
#ifndef PTDP_MLP_H
#define PTDP_MLP_H

#include "act_bf16.h"
#include "model.h"
#include "mlp_data.h"

extern const ptdp_model_ops ptdp_mlp_ops;

/* One block's parameters on this device (shards under TP). */
typedef struct {
    ptdp_param *fc1_w, *fc1_b, *fc2_w, *fc2_b;
} ptdp_mlp_block;

/* What the MLP keeps beside the interface's fields (model->impl). */
typedef struct {
    ptdp_param *in_w, *in_b, *out_w, *out_b;   /* NULL where not on this stage */
    ptdp_mlp_block *blocks;                    /* [layer_end - layer_begin]    */
    int ffn_local, classes_local;              /* ffn / tp and classes / tp    */
    ptdp_mlp_data data;                        /* on the first and last stage */
} ptdp_mlp;

/* What one micro-batch keeps for its backward (acts->saved). */
typedef struct {
    ptdp_tensor x;            /* stage input: X on stage 0, else the received h */
    int nblocks;
    ptdp_tensor *h;           /* residual stream entering each local block, and leaving the last */
    ptdp_tensor *a;           /* fc1 output before GELU, per block          */
    ptdp_tensor *g;           /* GELU output (after dropout), per block     */
    ptdp_tensor logits;       /* last stage: this rank's logit columns      */
    double *rowmax, *sumexp;  /* last stage: softmax statistics per row      */
    ptdp_act_packed *packed;  /* --precision bf16: block i's h, a, g as bf16
                                 between forward and backward (act_bf16.h) */
    ptdp_act_packed tail_packed;   /* bf16: the last block's output h       */
} ptdp_mlp_saved;

/* The table's forward, backward and acts_free (mlp.c); model.h says what
 * each does.  Code outside the MLP calls them through the interface. */
int  ptdp_mlp_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_batch *b,
                      ptdp_tensor input, long step, bool recompute, ptdp_tensor *out);
int  ptdp_mlp_backward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                       double loss_scale, ptdp_tensor *dx);
void ptdp_mlp_acts_free(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts);
/* The backward with its weight-gradient products recorded in w (wgrad.h),
 * or run at once if w is NULL (= ptdp_mlp_backward): the table's
 * backward_input. */
int  ptdp_mlp_backward_input(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                             double loss_scale, ptdp_tensor *dx, ptdp_wgrad *w);

/* The MLP behind m, or NULL if m is another model. */
ptdp_mlp *ptdp_mlp_of(ptdp_model *m);
/* What acts keeps (NULL once freed). */
ptdp_mlp_saved *ptdp_mlp_saved_of(ptdp_acts *acts);

#endif
