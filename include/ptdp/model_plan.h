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
 *                         params    its tensors by unit, where they are summed
 *                         tp_block  a block's TP collectives
 *                         acts      what a micro-batch holds beyond its blocks
 *                         tp_ok     the TP degrees its shapes divide by
 *                         …
 *        │
 *        ▼
 *   plan_memory.c, plan_time.c, plan_search.c: the mesh, the pipeline's
 *   schedule, ZeRO and DP — the same for every model they price
 *
 * The planner's formulas are those of a stack of identical blocks between
 * an embedding and a head, with an attention width (and a K, V width), an
 * MLP width and a vocabulary each split over TP, the head tied to the
 * embedding or not: a model of that shape fills this table in
 * (ptdp_model_ops.plan, model.h) and is planned; a model without it is
 * refused by `ptdp plan` with the list of the models that can be planned.
 */
#ifndef PTDP_MODEL_PLAN_H
#define PTDP_MODEL_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "clock.h"
#include "model.h"

/* The most column-parallel layers of a block the planner regathers for. */
#define PTDP_PLAN_REGATHERS_MAX 8

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
    double KVl;        /* this rank's width of K (and of V): what CP's ring
                          passes, R KVl values each (Cl when every head has
                          its own K and V; grouped queries: their kv heads')  */
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
    /* Under SP, the input-gradient products a block's column-parallel
     * layers (ptdp_plan_tp_block.regathers of them, in the backward's
     * order) and the head compute while the input they need for dW is
     * gathered again (under --overlap, on the communication stream); 0
     * without SP. */
    double sp_dx_block[PTDP_PLAN_REGATHERS_MAX], sp_dx_head;
} ptdp_plan_flops;

/* A block's TP collectives, each of one block activation (R C values):
 * without SP the all-reduces of its f and g operators, forward and
 * backward; under SP (sp.h) the all-gathers and reduce-scatters that take
 * their place each way, and of the backward's all-gathers those that
 * gather a column-parallel layer's input again for its dW (`regathers`,
 * each under its dX product, ptdp_plan_flops.sp_dx_block). */
typedef struct {
    int all_reduce_f, all_reduce_b;
    int gather_f, scatter_f;
    int gather_b, scatter_b, regathers;
    /* Its column- and row-parallel linear layers: under --fp8 with one
     * scale a tensor (tensorwise, delayed) each max-reduces the amax of
     * every operand split over TP or CP (fp8_linear.h), one value each. */
    int fp8_column, fp8_row;
} ptdp_plan_tp_block;

/* The tensors of one unit (the embeddings, a block, the head) on one TP
 * rank, in elements, in the model's flat order (its lay_out: DP's buckets
 * and ZeRO's shards meet them in this order). */
enum { PTDP_PLAN_TENSORS_MAX = 16 };
typedef struct {
    int n;
    double size[PTDP_PLAN_TENSORS_MAX];
} ptdp_plan_tensors;

/* A model's parameters on one TP rank, and where some of their gradients
 * are summed beyond DP once a step (model.h's ptdp_grad_sum.also). */
typedef struct {
    ptdp_plan_tensors embed, block, head;   /* head: its own tensors       */
    /* The head multiplies by the embedding's matrix (tied): a stage that
     * holds the head without the embeddings holds a copy of it (Vl C,
     * first in the head's flat order), whose gradient is summed with
     * stage 0's once a step (the embedding group). */
    bool tied;
    /* The most of a block that bf16 widens into float at once (mixed.h):
     * its largest subunit, or the whole block when it has none. */
    double block_subunit;
    /* Under SP, the C-wide tensors (a norm's weight, its bias) whose
     * gradient is also summed over TP: a block's, and the head's. */
    int sp_sums_block, sp_sums_head;
    /* A block's tensors (share_size elements each) held as one copy by a
     * TP sub-group, their gradient summed over it (PTDP_GROUP_TP_SHARE:
     * ptdp_model_ops.tp_share ranks); 0 when the layout has none. */
    int share_block;
    double share_size;
    /* The block's weights --fp8 quantizes (its linear layers', this TP
     * rank's part), rows x cols each: ZeRO-3's gathers under --fp8-comm
     * send them as E4M3 codes.  The embeddings and the head keep their
     * precision (model.h), so they have none. */
    int fp8_weights;
    double fp8_rows[PTDP_PLAN_TENSORS_MAX], fp8_cols[PTDP_PLAN_TENSORS_MAX];
} ptdp_plan_params;

/* What a micro-batch of b samples holds on a tp x cp device beyond what its
 * blocks keep (block_kept_bytes), in bytes as the model allocates them in
 * float — the moments plan_memory.c weighs. */
typedef struct {
    double input;        /* a stage's received activation, kept to its
                            backward (0: its first block's input holds it) */
    double tail;         /* the last stage, kept from its forward to its
                            backward: the head's input, the logits, the
                            norm's and the loss's statistics               */
    double tail_bf16;    /* the same packed as bf16 (a model that packs)    */
    double block_redone; /* full recomputation: one block rebuilt in its
                            backward, beyond the input it kept             */
    double tail_redone;  /* ... and the tail (the last stage, first)       */
    double scratch;      /* one backward's scratch                         */
    double bwd_transient;/* the largest transient of a backward on top      */
    double fwd_block;    /* the largest transient of a block's forward on
                            top of what it keeps                           */
    double fwd_embed;    /* ... of the embeddings' forward                  */
    double fwd_head;     /* ... of the head's and the loss's                */
    /* What one deferred W keeps (wgrad.h: both operands of every dW
     * product), in elements: a block's, the embeddings', the head's. */
    double wgrad_block, wgrad_embed, wgrad_head;
} ptdp_plan_acts;

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
    double row_fwd, row_bwd; /* flops of one routed row through its expert:
                                its share of an expert of
                                ptdp_plan_expert_rows rows                  */
    double params_dense;     /* parameters summed over DP: the block's, with
                                the router, without the experts             */
    double params_expert;    /* of one expert on this TP rank                */
    double tensors;          /* its parameter tensors on this device: the
                                block's, the router's, the local experts'   */
    ptdp_plan_tensors expert;   /* one local expert's tensors, and the      */
    ptdp_plan_tensors beside;   /* block's beside its experts (the router's
                                   among them), in the order DP's buckets
                                   meet them after the experts'             */
    double shared_bytes;     /* --moe-shared-experts: its output, R C, which
                                TP all-reduces forward and (its input
                                gradient) backward; 0 without            */
    double kept_bytes;       /* a micro-batch keeps, minus a dense block's   */
    double wgrad;            /* a deferred W keeps of the block (wgrad.h:
                                each dW product's two operands), minus a
                                dense block's, elements                     */
    double wgrad_own;        /* of its W's, the elements a zero-bubble B
                                copies under the mixture's backward
                                transient: the experts' and the router's   */
    double fwd_bytes, bwd_bytes;   /* the largest transients, forward and
                                      backward                             */
} ptdp_plan_moe;

/* The rows each of an EP rank's `local` experts runs under uniform routing,
 * here / local: the n of the n x F_e products the planner prices a routed
 * row's share of (row_fwd = an expert's price on n rows / n), so that a
 * thin product pays the GEMM curve (clock.h) as the run's experts do.
 * Without a curve a product's price is linear in its rows, and a row's is
 * a one-row expert's exactly: 1. */
static inline double ptdp_plan_expert_rows(const ptdp_profile *p, double here, double local)
{
    return p != NULL && p->gemm != NULL && here > 0 && local > 0 ? here / local : 1;
}

/* What a block's attention core keeps for its backward, from the layout's
 * recomputation and --attention:
 *   KEPT     the T x T probabilities, b hl T^2 a block
 *   REDONE   selective recomputation: none kept, the core again backward
 *   TILED    --attention tiled (attention_tiled.c): a log-sum-exp a query,
 *            b hl T, the tiles not in the future in both passes and S made
 *            again in the backward.  The ring (cp > 1) keeps its own
 *            log-sum-exps and runs as it does, tiled or not. */
typedef enum { PTDP_PLAN_CORE_KEPT, PTDP_PLAN_CORE_REDONE, PTDP_PLAN_CORE_TILED } ptdp_plan_core;

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
    /* Its work a micro-batch (core: the attention core's, above; split: B
     * without the dW products), in flops at the peak of
     * a device computing in bf16 or not; fp8: its linear layers' products
     * (not the head's) priced as --fp8 runs them (clock.h,
     * ptdp_fp8_gemm_cost_flops). */
    void (*flops)(const ptdp_profile *p, const ptdp_model_config *c, int b, int tp, bool sp, int cp,
                  ptdp_plan_core core, bool split, bool bf16, bool fp8, ptdp_plan_flops *out);
    /* Elements one micro-batch keeps per block, the formula `ptdp train`
     * prints (its attention core's as `core` keeps them). */
    double (*block_kept)(const ptdp_model_config *c, int b, int tp, int cp, bool sp, ptdp_plan_core core);
    /* The same in bytes as a block packs them (bf16: 2 bytes each, its
     * statistics 4). */
    double (*block_kept_bytes)(const ptdp_model_config *c, int b, int tp, int cp, bool sp,
                               ptdp_plan_core core, bool bf16);
    /* Its parameters on one rank of tp (sp: sequence parallelism). */
    void (*params)(const ptdp_model_config *c, int tp, bool sp, ptdp_plan_params *out);
    /* A block's TP collectives. */
    ptdp_plan_tp_block tp_block;
    /* What a micro-batch holds beyond its blocks' kept (core, full: the
     * recomputation, the attention's tiles). */
    void (*acts)(const ptdp_model_config *c, int b, int tp, int cp, bool sp, ptdp_plan_core core, bool full,
                 ptdp_plan_acts *out);
    /* Under bf16 its activations are packed into bf16 a block at a time
     * (act_bf16.h, block_kept_bytes), with one block's float copy on top;
     * false: kept in float, rounded to bf16 where made. */
    bool packs_bf16;
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
     * and the experts' own TP size etp (MoE parallel folding, moe_fold.c:
     * below tp each rank routes its 1/(tp/etp) slice of the rows, each
     * expert split etp ways; 0 or tp: attention's layout) (core: the
     * attention core's, above; split: B without the
     * deferred dW; fp8: the attention's linear layers as
     * flops prices them and the experts' by their rows, at the FP8 peak
     * with their quantization, as the run charges them).  Both NULL: the model has no experts. */
    int (*experts)(const ptdp_model_config *c);
    bool (*moe)(const ptdp_profile *p, const ptdp_model_config *c, int layer, int b, int tp, int cp, int ep,
                int etp, ptdp_plan_core core, bool split, bool bf16, bool fp8, ptdp_plan_moe *out);
    /* How many of blocks first .. first + n - 1 are mixtures, counted
     * without pricing them (NULL with moe).  Every mixture's numbers are
     * alike (moe's depend on the layout, not on the layer), so the planner
     * prices one a layout and counts the rest: a layout's work does not
     * grow with the blocks (plan_impl.h, ptdp_plan_moe_of). */
    int (*moe_blocks)(const ptdp_model_config *c, int first, int n);
} ptdp_model_plan;

#endif
