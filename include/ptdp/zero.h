/*
 * zero.h — ZeRO: shard the optimizer state (stage 1), the gradients
 * (stage 2) and the parameters (stage 3) across the data-parallel group.
 *
 * Plain data parallelism keeps, on every one of the N replicas, the whole
 * parameter buffer P, the whole gradient G and the whole optimizer state
 * (AdamW: two moments, 2P) — and all N replicas compute the same update.
 * ZeRO (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training
 * Trillion Parameter Models", 2020) cuts the flat buffers into N shards with
 * ptdp_share; DP rank k owns shard k and is the only one to update it:
 *
 *   flat buffer (backward order)  | shard 0 | shard 1 | shard 2 | shard 3 |
 *   owner                           dp 0      dp 1      dp 2      dp 3
 *
 * Shards cut through parameters; that is fine because AdamW is element-wise
 * (optim.h), so updating the ranges gives the bits of updating the whole.
 *
 * A stage is one row of a table (zero_stages.c, ptdp_zero_stage_of): what
 * it shards, what it does after each backward, after the last one and
 * after the optimizer, which hooks it needs around a backward — and its
 * price, the model-state bytes per device and the DP bytes per step.  The
 * code below reads the row; nothing asks which stage runs.
 *
 * Stage 1 — the optimizer state is sharded (2P/N per rank):
 *   backward of all M micro-batches   full G on every rank, as in plain DP
 *   reduce-scatter G, bucket by bucket  rank k: shard k of each bucket,
 *                                     summed over ranks                   (N-1)/N S
 *   norm, clip, AdamW on my shards    with the moments of my shards only
 *   all-gather P, bucket by bucket    every rank has the whole new P      (N-1)/N S
 * Bytes per step 2(N-1)/N S: exactly plain DP's all-reduce, which IS a
 * reduce-scatter followed by an all-gather — ZeRO-1 only moves the update
 * in between, where each rank holds 1/N of the summed gradient.
 *
 * Stage 1's shards follow DP's buckets (dp.h), as Megatron-LM's distributed
 * optimizer does: rank k owns shard k of EVERY bucket, one range each,
 * so a bucket's reduce-scatter can start the moment the backward has
 * completed it, like DP's all-reduce (--overlap):
 *
 *   flat buffer (backward order)  | bucket 0      | bucket 1      | bucket 2      |
 *   owner (N = 2)                 | dp 0  | dp 1  | dp 0  | dp 1  | dp 0  | dp 1  |
 *   my compact state (dp 1)               [ at 0 ]        [ at 1 ]        [ at 2 ]
 *
 * The layout is the same with and without --overlap (ptdp_train always
 * cuts by its --bucket-mb buckets; ptdp_zero_init alone takes one bucket,
 * the whole buffer, which is the shard of the picture above it): the same
 * reduce-scatters on the same data in the same order either way — blocking
 * after the last backward, or started from the model's grads_ready hook —
 * so the two are bit-identical, as DP's buckets are.  One layout for both
 * is what makes that a fact of construction rather than a coincidence.
 * ptdp_share gives a bucket's remainder to the first ranks, so a rank owns
 * Ψ/N within one element per bucket; the memory checks compare a rank with
 * what it really owns (z->len), and the sum over ranks with Ψ exactly.
 * The gradient and the parameters stay in the full buffers (stage 1 keeps
 * them whole), so a range's gradient and parameters sit at its own flat
 * offset, and only its optimizer state at `at` of the compact shard
 * (ptdp_zero_range_params, ptdp_zero_range_grad).
 *
 * Stage 2 — the gradients are sharded too (G/N per rank):
 *   after EVERY micro-batch's backward, reduce-scatter its gradient and add
 *   my shard to a persistent gradient shard; the full-size buffer that the
 *   backward wrote is freed.  Bytes per step: M reduce-scatters + one
 *   all-gather = (M+1)(N-1)/N S — the same as stage 1 for M = 1, more for
 *   M > 1: the gradient memory is bought with communication.
 *
 * Stage 3 — the parameters are sharded too (zero3.c: FSDP's way).  The
 * model's parameters are cut into units (model.h: a block, the
 * embeddings, the head) and EACH UNIT is cut into N shards, so that every
 * unit's gather moves the same bytes on every rank.  Rank k keeps shard k
 * of every unit — parameters, gradients, optimizer state — and nothing
 * else between uses:
 *
 *   forward of unit u      all-gather u's parameters   (N-1)/N |u|, freed after
 *   backward of unit u     all-gather them again       (N-1)/N |u|
 *                          reduce-scatter u's gradient (N-1)/N |u|, += my shard
 *   once per step          norm, AdamW on my shards; nothing to gather
 *
 * Bytes per step 3M(N-1)/N S (with full recomputation too: a unit's
 * forward is redone inside its backward's gather): the ZeRO paper's 3Ψ
 * against plain DP's 2Ψ for M = 1, bought with the parameters' memory.
 * With --overlap the next unit's gather starts while this one computes
 * (prefetch), and a unit's reduce-scatter runs while the backward goes on.
 * The four rows side by side, what each keeps and sends: zero_stages.c.
 *
 * In elements; under --precision bf16 (mixed.h) the parameter and gradient
 * stores hold 2-byte bf16 — sent, summed and gathered as bf16 — and the
 * optimizer state adds float master weights of what the device owns:
 * the ZeRO paper's 2 + 2 + 12 bytes a parameter (ptdp_zero_state_bytes).
 *
 * Expert parallelism (mesh.h): an expert's parameters are replicated only
 * over its expert-DP group (model.h, ptdp_grad_sum.replicas), so stages
 * 0-2 cut their buckets and shards per replica group — DP's buckets over
 * the DP group, the experts' over the expert-DP group (dp.h); stage 2 has
 * one range per run of one group, and the gradient norm counts each
 * expert once across the EP group.  Stage 3 refuses them.
 *
 * What this device owns is a list of ranges of the flat buffer, each with
 * its place in the device's shard buffers (gradient shard, optimizer
 * state, stage 3's parameter shard): one range [off, off + len) for stages
 * 0 and 2, one per DP bucket for stage 1, one per unit for stage 3.
 *
 * What the arena shows for stage 2: this model's backward writes the
 * gradient of every parameter of the stage before it returns, so one
 * full-size buffer must exist while one micro-batch's backward runs.  It is
 * the reduce-scatter's send buffer (DeepSpeed's "reduce bucket"), tagged
 * category "comm" and freed right after the reduce-scatter; category
 * "grads" holds only the persistent shard.  A layer-by-layer backward that
 * reduce-scattered each layer as soon as it is done would shrink the bucket
 * to one layer; here the peak of "comm" stays P.
 *
 * The gradient norm must count every element of the whole model once: one
 * rule for every stage (model.c, ptdp_param_norm_group).  Each device sums
 * the squares of what it owns of the parameters it counts
 * (ptdp_param_counted_here: a TP-replicated parameter on tp rank 0 only, a
 * tied copy on stage 0 only), and the partial sums are all-reduced over
 * the group whose devices hold different parts of it — over DP when
 * each rank holds its own shard of the summed gradient (ZeRO), over the
 * DP ranks beside a parameter's replicas when each holds it whole (none
 * for DP's replicas, the EP group for an expert's) — then over TP and PP.
 * Shard boundaries cut through parameters, so the terms are precomputed
 * once as ranges of the flat buffer (ptdp_zero_norm_term).
 */
#ifndef PTDP_ZERO_H
#define PTDP_ZERO_H

#include <stddef.h>

#include "comm.h"
#include "dp.h"
#include "model.h"
#include "optim.h"

struct ptdp_device;
struct ptdp_zero;

/* [begin, end) of the flat buffer, held from element `at` of the shard */
typedef struct { size_t begin, end, at; } ptdp_zero_range;

/* A stretch of the gradient the norm counts on this device ([begin, end)
 * of the flat buffer, from `at` of the shard) and the group its squares
 * are summed over (ptdp_group; PTDP_GROUP_COUNT: none, they are this
 * device's alone to count — model.c, ptdp_param_norm_group). */
typedef struct { size_t begin, end, at; int over; } ptdp_zero_norm_term;

/* How a stage sums the gradient over DP — the row's path, as the price
 * reads it (the row's operations do it). */
typedef enum {
    PTDP_ZERO_PATH_ALL_REDUCE = 0,   /* after the last backward, DP's buckets all-reduced        */
    PTDP_ZERO_PATH_REDUCE_SCATTER,   /* after the last backward, DP's buckets reduce-scattered   */
    PTDP_ZERO_PATH_EACH_BACKWARD,    /* after every backward (B and W each), the whole gradient
                                        reduce-scattered into the shard                         */
    PTDP_ZERO_PATH_EACH_UNIT         /* at the end of every unit's backward, its gradient
                                        reduce-scattered into the shard                         */
} ptdp_zero_path;

/* One ZeRO stage: a row of the table in zero_stages.c.  What a DP rank
 * keeps 1/N of, what it does at each moment of a step, and its price. */
typedef struct ptdp_zero_stage {
    int stage;                  /* 0 (plain DP), 1, 2 or 3                    */
    const char *name;           /* "plain DP", "ZeRO-1", …                    */
    /* What each DP rank keeps its own shard of; the rest it keeps whole. */
    bool shards_optim;          /* the optimizer state, and so the update: each
                                   rank sums and updates only its shard      */
    bool shards_grads;          /* the gradient between steps                */
    bool shards_params;         /* the parameters between uses: each unit
                                   gathered while it computes                */
    /* The step's DP traffic, as data: how the gradient is summed, and how
     * many passes of (N-1)/N S bytes each collective makes (a ring's
     * all-reduce is two: a reduce-scatter and an all-gather). */
    ptdp_zero_path path;
    bool buckets;               /* the sum runs over DP's buckets (dp.h), which
                                   --overlap starts during the last backward */
    bool grad_bucket;           /* a full-size gradient bucket ("comm") lives
                                   while each backward runs                  */
    int sums_per_step;          /* after the last backward                   */
    int sums_per_backward;      /* after each of the M backwards             */
    int gathers_per_step;       /* after the optimizer: the updated parameters */
    int gathers_per_backward;   /* before each micro-batch's forward and
                                   backward: the parameters                  */
    const char *dp_rule;        /* the bytes per step as printed: "2(N-1)/N S" */
    const char *recompute_rule; /* what full recomputation adds to it, said  */
    const char *overlap_under;  /* what --overlap hides the DP traffic under */
    const char *grad_shard_tag; /* the arena's name of the gradient shard    */
    /* The operations, in the order of a step (NULL: nothing to do). */
    int  (*own)(struct ptdp_device *dev, struct ptdp_zero *z, ptdp_model *m, double bucket_mb);
                                /* set-up: the ranges this device owns       */
    int  (*backward_begin)(struct ptdp_device *dev, struct ptdp_zero *z, ptdp_model *m);
    int  (*backward_end)(struct ptdp_device *dev, struct ptdp_zero *z, ptdp_model *m);
                                /* around every backward (B and W alike)     */
    int  (*sum)(struct ptdp_device *dev, struct ptdp_zero *z, ptdp_model *m);
                                /* once a step, after the last backward: the
                                   DP sum of what this device owns           */
    int  (*gather)(struct ptdp_zero *z, ptdp_model *m);
                                /* after the optimizer: every rank gets the
                                   shards the others updated                 */
} ptdp_zero_stage;

/* Stage 3: one unit of the model (model.h), as this device manages it. */
typedef struct {
    size_t begin, end;          /* [begin, end) of the flat buffer            */
    size_t off, len;            /* my shard of it: ptdp_share(end - begin, N, k) */
    size_t at;                  /* where that shard sits in my shard buffers  */
    int users;                  /* BEGINs not yet ENDed (model.h)             */
    int grad_users;             /* the same, of backwards                     */
    void *gathered;             /* stage 3: the unit in the store's type, from
                                   its gather on ("params")                  */
    ptdp_real *w;               /* the float parameters the model reads: the
                                   gathered buffer itself, or (bf16) a widened
                                   copy ("params"); NULL when not in use     */
    ptdp_real *g;               /* its float gradient while a backward runs ("grads") */
    bool prefetched;            /* --overlap: gathered's all-gather started, not waited */
    ptdp_request gather;
    bool in_subunits;             /* bf16, a unit the model cut into subunits: the
                                   gathered bf16 stays while it is in use, and
                                   only its subunits in use are widened        */
    void *g16;                  /* stage 3, in subunits: the unit's bf16 gradient
                                   that each subunit's END rounds its float one
                                   into, reduce-scattered at the unit's END  */
    void *secondary;            /* --zero-hpz: my 1/k piece of the unit as the
                                   forward gathered it, in the store's type,
                                   kept for the backward's gather inside the
                                   node ("zero.hpz_secondary"); else NULL    */
    int forwards;               /* --zero-hpz: forwards of the unit whose
                                   backward has not ended (the piece stays) */
    bool from_node;             /* --zero-hpz: the gather in flight reads the
                                   node group's secondary pieces            */
    size_t wire;                /* --fp8-comm: a rank's bytes in gathered, its
                                   FP8 weights' codes and the rest (zero3_fp8.c) */
    ptdp_real *fp8_scales;      /* --fp8-comm: the gather in flight's amaxes and
                                   scales of its weights' tiles; else NULL  */
    bool qwz;                   /* --zero-qwz: gathered holds INT8 wires
                                   (zero3_qwz.c), not yet rebuilt         */
} ptdp_zero_unit;

/* bf16: one subunit of a unit (model.h), widened while in use. */
typedef struct {
    int unit;
    size_t begin, end;          /* [begin, end) of the flat buffer            */
    int users, grad_users;      /* BEGINs not yet ENDed, and of backwards     */
    ptdp_real *w, *g;           /* its float copy and float gradient          */
} ptdp_zero_subunit;

typedef struct ptdp_zero {
    const ptdp_zero_stage *row; /* the stage: ptdp_zero_stage_of (plain DP: one
                                   range, the whole buffer)                  */
    ptdp_comm *dp;              /* the DP group; under HSDP (--shard-group) the
                                   shard group, which ZeRO's rows cut over     */
    ptdp_comm *replicas;        /* HSDP: the replica group, over which my shard's
                                   gradient is all-reduced (zero_hsdp.c); NULL
                                   without shard groups                      */
    size_t numel;               /* elements of the flat buffers                     */
    size_t off, len;            /* my shard: ptdp_share(numel, dp, dp rank); stages 1
                                   and 3: len = what all my ranges hold, off = where
                                   the first one begins                      */
    int nranges;
    ptdp_zero_range *ranges;    /* host: what I own, and where in the shards */
    int nnorm;
    ptdp_zero_norm_term *norm;  /* host: the stretches of what I own the norm counts */
    unsigned norm_groups;       /* PTDP_GROUP_BIT of each group the norm's partial
                                   sums are all-reduced over (every device of one
                                   such group sets the same bits)            */
    /* The stores hold ptdp_real, or bf16 under mixed precision (mixed.h):
     * elements of ptdp_store_size(store) bytes. */
    ptdp_dtype store;
    ptdp_real *master;          /* bf16: [len] float master weights of what I own ("optim";
                                   bf16 needs the float build: ptdp_real is float) */
    void *grad_shard;           /* stages 2, 3: [len], my shard of the step's gradient ("grads") */
    void *bucket;               /* stage 2: [numel] while a backward runs ("comm"), else NULL */
    /* Stage 2 with overlap (--overlap): the reduce-scatter after a backward
     * starts non-blocking (comm.h) and is waited for — its shard added to
     * the shard, its bucket freed — only before the next backward's bucket
     * is allocated or before the optimizer, so it runs on the communication
     * stream under whatever the stage computes in between (the next
     * micro-batch's forward).  One bucket at a time, as without overlap. */
    bool overlap;
    void *pending;              /* the bucket being reduce-scattered, or NULL */
    ptdp_request request;
    /* DP's buckets (dp.h): stage 0 all-reduces them; stage 1 sets `scatter`
     * and its shards are my ranges; with --overlap (`overlap`) they start
     * from the grads_ready hook during the last backward of a step
     * (ptdp_zero_before_backward). */
    ptdp_ddp buckets;
    /* The optimizer and its state for what I own ("optim"): AdamW's m in
     * opt_a and v in opt_b, or SGD's momentum in opt_a; [len] each, range
     * i's from its `at` (ptdp_zero_optim_init). */
    ptdp_optimizer optim;
    ptdp_real *opt_a, *opt_b;
    /* Stage 3 (zero3.c) */
    int nunits;
    ptdp_zero_unit *units;      /* host                                      */
    int nsubunits;
    ptdp_zero_subunit *subunits;    /* host                                      */
    void *param_shard;          /* [len]: my shards of the parameters ("params") */
    ptdp_comm *node;            /* --zero-hpz: the DP ranks of my node inside
                                   z->dp, over which the backward gathers
                                   (zero_hpz.c); NULL without               */
    size_t hpz_bytes;           /* --zero-hpz: the secondary pieces' bytes now */
    size_t pending_at, pending_off, pending_len;   /* the pending unit's shard */
    int qwz_block;              /* --zero-qwz: the forward gathers' INT8 blocks
                                   of B elements (zero3_qwz.c); 0: off      */
    int qwz_ranks;              /* bf16's --check device of a qwZ run: the
                                   ZeRO group's N its units are quantized as
                                   (zero3_qwz.c); 0: a real run, or none    */
    int qgz_bits;               /* --zero-qgz: the gradient codes' bits, 4 or 8
                                   (zero3_qgz.c); 0: off, a reduce-scatter  */
    int qgz_block;              /* --zero-qgz: their blocks of B elements    */
    ptdp_comm *qgz_node;        /* --zero-qgz: my node's ranks of z->dp, and */
    ptdp_comm *qgz_cross;       /* the ranks of my place in every node; NULL
                                   without                                   */
    struct ptdp_fp8_linear *fp8;   /* --fp8-comm: the linear op's FP8, whose
                                   weights stage 3 gathers as codes
                                   (zero3_fp8.c); else NULL                  */
} ptdp_zero;

/* Set up `stage` (0 to 3: its row, ptdp_zero_stage_of) for model m in
 * m->mesh's DP group.  Stage 2
 * frees the model's full-size gradient buffer (m->flat_g becomes NULL
 * between backwards) and allocates the shard; stage 3 frees the parameter
 * buffer too, keeps its shards, and hooks into the model's units
 * (m->unit_hook).  With m->bf16 set (mixed.h) the stores become bf16, the
 * master weights of what this device owns are kept in float, and the
 * unit hook widens a unit's parameters for the model whatever the stage.
 * PTDP_EINVAL for another stage. */
int  ptdp_zero_init(struct ptdp_device *dev, ptdp_zero *z, ptdp_model *m, int stage);
/* The same, with DP's buckets of bucket_mb MiB (ptdp_ddp_init): what
 * ptdp_train does — plain DP all-reduces them, stage 1 owns its shard of
 * each.  bucket_mb <= 0: one bucket, the whole buffer (ptdp_zero_init).
 * Stages 2 and 3 ignore it (the row's `own`). */
int  ptdp_zero_init_buckets(struct ptdp_device *dev, ptdp_zero *z, ptdp_model *m, int stage, double bucket_mb);
void ptdp_zero_free(struct ptdp_device *dev, ptdp_zero *z, ptdp_model *m);

/* Around every micro-batch's backward, the row's hooks (no-ops for a row
 * without: stage 2 alone has them): begin gives the model a zeroed
 * full-size gradient buffer; end reduce-scatters it over DP, adds my shard
 * to the shard and frees it. */
int  ptdp_zero_backward_begin(struct ptdp_device *dev, ptdp_zero *z, ptdp_model *m);
int  ptdp_zero_backward_end(struct ptdp_device *dev, ptdp_zero *z, ptdp_model *m);

/* Once per step, after the last backward: the row's sum over DP — DP's
 * buckets all-reduced (plain DP) or reduce-scattered (stage 1), bucket by
 * bucket in place (or, with `overlap`, the sums the backward started
 * waited for); stages 2 and 3 summed after each backward and wait for the
 * last — then each group a parameter declares beyond its replicas (model.h,
 * ptdp_model_sum_groups).  *grad points to the store that holds my ranges
 * of the summed gradient, in the store's type: the full buffer (a row that
 * keeps the gradient whole: a range's gradient at its flat offset) or the
 * shard (at the range's `at`; ptdp_zero_range_grad says where). */
int  ptdp_zero_reduce_gradients(ptdp_zero *z, ptdp_model *m, void **grad);
/* The same: the trainer's name for it. */
int  ptdp_zero_finish_gradients(struct ptdp_device *dev, ptdp_zero *z, ptdp_model *m, void **grad);
/* My shard of the parameters, the shard that the optimizer updates: element
 * i is the flat buffer's element of the range that holds shard index i
 * (stages 1 and 2: true with one range only — one bucket, no experts under
 * expert parallelism; see ptdp_zero_range_params). */
void *ptdp_zero_param_shard(ptdp_zero *z, ptdp_model *m);
/* The part [*b, *e) of [begin, end) that this device owns, and where it
 * starts in the shard buffers (*at).  A parameter lies inside one unit, so
 * it meets at most one range; false if it meets none. */
bool ptdp_zero_owned(const ptdp_zero *z, size_t begin, size_t end, size_t *b, size_t *e, size_t *at);
/* Zero what holds the next step's gradient: the full buffer, or the shard
 * of a row that shards the gradients. */
void ptdp_zero_clear_gradients(ptdp_zero *z, ptdp_model *m);

/* ---- the table and its price (zero_stages.c) ---- */

/* The row of `stage`, or NULL if there is none (0 to 3 exist). */
const ptdp_zero_stage *ptdp_zero_stage_of(int stage);

/* Bytes a parameter costs in each model state: bw its parameter and bg its
 * gradient (this build's ptdp_real, or bf16's 2 under mixed precision,
 * mixed.h), bo its optimizer state (`slots` ptdp_reals — AdamW 2, SGD
 * with momentum 1 — plus bf16's float master weight). */
typedef struct { double bw, bg, bo; } ptdp_zero_sizes;
ptdp_zero_sizes ptdp_zero_sizes_of(bool bf16, int slots);

/* The ZeRO paper's model states per device (Rajbhandari et al., section
 * 3 and figure 1), for psi parameters on N DP ranks, with bw bytes per
 * parameter, bg per gradient and bo of optimizer state per parameter —
 * float AdamW 4 + 4 + 8; bf16 mixed precision 2 + 2 + 12 (fp32 master
 * weights and both moments): each state whole, or 1/N of it where the
 * row shards it,
 *
 *   stage 0  (bw + bg + bo) psi          stage 2  bw psi + (bg + bo) psi / N
 *   stage 1  (bw + bg) psi + bo psi / N  stage 3  (bw + bg + bo) psi / N
 *
 * (bf16: 16 psi, 4 psi + 12 psi / N, 2 psi + 14 psi / N, 16 psi / N.) */
typedef struct { double params, grads, optim; } ptdp_zero_bytes;
ptdp_zero_bytes ptdp_zero_state_bytes(int stage, double psi, int dp, double bw, double bg, double bo);
/* The same with what a device really holds: numel elements whole, `share`
 * of them where the row shards a state (ptdp_share's rounding, per bucket
 * or unit: what the planner counts). */
ptdp_zero_bytes ptdp_zero_device_states(const ptdp_zero_stage *row, double numel, double share, ptdp_zero_sizes b);

/* The backwards a step whose gradients a row sums one by one, of
 * `backwards` (micro-batches, chunks, token slices): twice as many under a
 * split backward (zb-h1: B and W) for a path around each backward action
 * (PTDP_ZERO_PATH_EACH_BACKWARD, pp.c). */
int  ptdp_zero_backwards(const ptdp_zero_stage *row, int backwards, bool split_backward);
/* The passes of (N-1)/N S bytes a row's DP traffic makes a step with M
 * backwards: sums_per_step + gathers_per_step + M (sums_per_backward +
 * gathers_per_backward) — 2, 2, M + 1, 3M. */
int  ptdp_zero_dp_passes(const ptdp_zero_stage *row, int backwards);
/* Bytes a device sends in its DP group per step for the gradients and
 * parameters, by the textbook formula with S = numel elements: plain DP
 * 2(N-1)/N S, zero 1 the same, zero 2 (M+1)(N-1)/N S, zero 3 3M(N-1)/N S
 * — with full recomputation too: the models redo a unit's forward inside
 * the gather of its backward (BACKWARD_BEGIN .. END, model.h), as FSDP
 * does, so `recompute` adds nothing.  For printing the trade. */
double ptdp_zero_dp_bytes_per_step(int stage, size_t numel, int dp, int micro_batches);
double ptdp_zero3_dp_bytes_per_step(size_t numel, int dp, int micro_batches, bool recompute);

#endif
