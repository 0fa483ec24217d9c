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

/* The MLP's own settings, in its config's `own` block (model.h). */
typedef struct {
    int d_in;               /* input features                      --d-in    */
    int classes;            /* output classes                      --classes */
} ptdp_mlp_settings;

_Static_assert(sizeof(ptdp_mlp_settings) <= PTDP_MODEL_OWN_MAX,
               "the MLP's settings fit in ptdp_model_config.own");

/* Read and write them: ptdp_mlp(&cfg)->d_in; const in, const out. */
static inline ptdp_mlp_settings *ptdp_mlp_settings_of(ptdp_model_config *c)
{
    return (ptdp_mlp_settings *)(void *)c->own;
}
static inline const ptdp_mlp_settings *ptdp_mlp_settings_of_const(const ptdp_model_config *c)
{
    return (const ptdp_mlp_settings *)(const void *)c->own;
}
#define ptdp_mlp(c) _Generic((c), const ptdp_model_config *: ptdp_mlp_settings_of_const, \
                                  default: ptdp_mlp_settings_of)(c)
/* Where a setting sits in a whole config, for tables of flags that write
 * an int at an offset (cli/model_flags.h): PTDP_MLP_OWN(d_in). */
#define PTDP_MLP_OWN(field) (offsetof(ptdp_model_config, own) + offsetof(ptdp_mlp_settings, field))

/* Everything an MLP's config says, in one struct for designated
 * initialisers: PTDP_MLP_CONFIG(.d_in = 6, .hidden = 8, .ffn = 16,
 * .layers = 2, .classes = 5) is that config (ops as given: NULL, the
 * registry's default, unless set). */
typedef struct {
    const ptdp_model_ops *ops;
    int d_in, hidden, ffn, layers, classes;
} ptdp_mlp_fields;

static inline ptdp_model_config ptdp_mlp_config(ptdp_mlp_fields s)
{
    ptdp_model_config c = { .ops = s.ops, .hidden = s.hidden, .ffn = s.ffn, .layers = s.layers };
    ptdp_mlp(&c)->d_in = s.d_in;
    ptdp_mlp(&c)->classes = s.classes;
    return c;
}
#define PTDP_MLP_CONFIG(...) ptdp_mlp_config((ptdp_mlp_fields){ __VA_ARGS__ })

/* The defaults of --model mlp (and of ptdp_train_defaults, ops NULL: the
 * registry's default): d_in 32, hidden 64, ffn 256, 8 layers, 16 classes. */
ptdp_model_config ptdp_mlp_default_config(void);

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

/* The MLP behind m, or NULL if m is another model. */
ptdp_mlp *ptdp_mlp_of(ptdp_model *m);
/* What acts keeps (NULL once freed). */
ptdp_mlp_saved *ptdp_mlp_saved_of(ptdp_acts *acts);

#endif
