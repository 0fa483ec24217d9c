/*
 * model_plan.h — what a model tells the planner (plan.h) so that `ptdp plan`
 * can price it without knowing its name: its dimensions on one device of a
 * layout, its work a micro-batch in flops, what a micro-batch keeps, the
 * splits it allows, and what a step computes.
 *
 *   ptdp plan --model NAME
 *        │  ptdp_model_lookup(NAME)->plan        (models.h, the registry)
 *        ▼
 *   ptdp_model_plan  ──►  dims      b, T, R, C, … of a micro-batch on a device
 *   (the model's,         flops     embeddings, a block, the head: F, B, W
 *    e.g. gpt_plan.c)     kept      a block's activations (recompute, bf16)
 *                         tp_ok     the TP degrees its shapes divide by
 *                         …
 *        │
 *        ▼
 *   plan_memory.c, plan_time.c, plan_search.c: the mesh, the pipeline's
 *   schedule, ZeRO and DP — the same for every model they price
 *
 * The planner's formulas are those of a stack of identical blocks between
 * an embedding and a head, with an attention width, an MLP width and a
 * vocabulary each split over TP: a model of that shape fills this table in
 * (ptdp_model_ops.plan, model.h) and is planned; a model without it is
 * refused by `ptdp plan` with the list of the models that can be planned.
 */
#ifndef PTDP_MODEL_PLAN_H
#define PTDP_MODEL_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "clock.h"
#include "model.h"

/* One micro-batch of b samples on a device of a tp x cp group (sp:
 * sequence parallelism), in elements: the planner's symbols. */
typedef struct {
    double b;          /* samples in the micro-batch                        */
    double T, Tq;      /* positions of a sample; this device's (T / cp)      */
    double R, Rl;      /* token rows b Tq; of the LayerNorm regions (R/tp
                          under sp)                                          */
    double C;          /* the width between blocks (hidden)                  */
    double Cl, Fl;     /* this rank's attention and MLP widths               */
    double hl;         /* this rank's attention heads                        */
    double Vl;         /* this rank's vocabulary rows (padded)               */
} ptdp_plan_dims;

/* One micro-batch's work on one device, in flops as the model charges the
 * virtual clock (the profile's GEMM curve included).  Backward without its
 * weight-gradient products when asked for split (zero-bubble schedules);
 * those are then the *_w charges. */
typedef struct {
    double embed_fwd, embed_bwd, embed_w;
    double block_fwd, block_bwd, block_w;
    double head_fwd, head_bwd, head_w;
    double lnf_bwd;    /* the final normalisation's backward, after the head's */
    /* Under SP, the input-gradient products a block's two column-parallel
     * layers (and the head) compute while the LayerNorm shard they need
     * for dW is gathered again (under --overlap, on the communication
     * stream); 0 without SP. */
    double sp_dx_block[2], sp_dx_head;
} ptdp_plan_flops;

/* A block whose MLP is a mixture of experts (a model that has them says
 * which, model_plan.moe): one micro-batch of b samples on a device of a
 * tp x cp group, under expert parallelism over ep ranks.
 *
 * Its routed rows depend on the data; the planner assumes UNIFORM routing
 * (the stated assumption of `ptdp plan --explain`): each of the E experts
 * receives k R / E of a device's R token rows, at most its capacity
 * (slots a sample x b) when the model caps it, so that
 *
 *     kept = min(k R, E b slots)    choices kept at home a micro-batch
 *     here = kept                   rows this EP rank's E/ep experts run
 *                                   (each of the ep sources sends kept/ep)
 *
 * Flops: the block beside its experts (attention, LN2, the router), and
 * an expert's work per routed row (the experts are charged by their rows).
 * Bytes (float, or bf16 when asked): what a micro-batch keeps of the
 * block beyond a dense block's kept (which may be negative: no MLP rows),
 * and the largest transient on top of it in a forward and in a backward
 * (beyond the dense backward's scratch). */
typedef struct {
    double E, k, local;      /* experts; chosen a token; held a rank (E/ep) */
    double Fe;               /* this TP rank's share of an expert's width    */
    double kept, here;       /* the rows above                               */
    double fwd, bwd;         /* flops of the block beside its experts        */
    double w;                /* of bwd, split: the dW products deferred (the
                                attention's; the experts' run in B)          */
    double row_fwd, row_bwd; /* flops of one routed row through its expert   */
    double params_dense;     /* parameters summed over DP: the block's, with
                                the router, without the experts             */
    double params_expert;    /* of one expert on this TP rank                */
    double kept_bytes;       /* a micro-batch keeps, minus a dense block's   */
    double fwd_bytes, bwd_bytes;   /* the largest transients, forward and
                                      backward                             */
} ptdp_plan_moe;

typedef struct ptdp_model_plan {
    /* The model at the planner's starting sizes (every flag of it unset;
     * ops NULL: the caller sets it to the model's table). */
    ptdp_model_config (*defaults)(void);
    /* Its flags a plan must give (NULL-terminated "--heads", …), read
     * back by `required_value` (0: not given). */
    const char *const *required;
    long long (*required_value)(const ptdp_model_config *c, const char *flag);
    /* Whether its shapes split over tp devices (heads, widths, padded
     * vocabulary all divide). */
    bool (*tp_ok)(const ptdp_model_config *c, int tp);
    /* The dimensions of a micro-batch of b samples on a tp x cp device. */
    void (*dims)(const ptdp_model_config *c, int b, int tp, bool sp, int cp, ptdp_plan_dims *out);
    /* Its work a micro-batch (selective: the attention core again in the
     * backward; split: B without the dW products). */
    void (*flops)(const ptdp_profile *p, const ptdp_model_config *c, int b, int tp, bool sp, int cp,
                  bool selective, bool split, ptdp_plan_flops *out);
    /* Elements one micro-batch keeps per block, the formula `ptdp train`
     * prints (selective: without the attention core's). */
    double (*block_kept)(const ptdp_model_config *c, int b, int tp, int cp, bool sp, bool selective);
    /* The same in bytes as a block packs them (bf16: 2 bytes each, its
     * statistics 4). */
    double (*block_kept_bytes)(const ptdp_model_config *c, int b, int tp, int cp, bool sp, bool selective,
                               bool bf16);
    /* Bytes of its data held on the first and the last stage (built-in
     * data made from `seed`). */
    double (*data_bytes)(const ptdp_model_config *c, uint64_t seed);
    /* FLOPs a step of `batch` samples computes: the model's count (as MFU
     * counts it), and with full or selective recomputation what is redone
     * on top. */
    void (*step_flops)(const ptdp_model_config *c, double batch, bool full, bool selective, double *model,
                       double *hardware);
    /* Its experts a mixture of experts (0: none, every block dense), and
     * whether block `layer` is such a mixture and, if so, *out for a
     * micro-batch of b samples on a tp x cp device with ep expert ranks
     * (selective: the attention core again in the backward; split: B
     * without the deferred dW).  Both NULL: the model has no experts. */
    int (*experts)(const ptdp_model_config *c);
    bool (*moe)(const ptdp_profile *p, const ptdp_model_config *c, int layer, int b, int tp, int cp, int ep,
                bool selective, bool split, bool bf16, ptdp_plan_moe *out);
} ptdp_model_plan;

#endif
