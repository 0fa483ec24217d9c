/*
 * plan.h — choosing the layout of a model on a GPU cluster: memory per GPU
 * and step time of every layout, by the implementation's own formulas and
 * the cost model the virtual clock runs (clock.h).
 *
 * The arithmetic everyone who trains at scale does first:
 *
 *     N  = dp x tp x pp x cp                 (GPUs)
 *     M  = B / (b x dp)                      (micro-batches per replica a step)
 *
 * and then, for each way of choosing (tp, pp, cp, b, schedule, v, recompute,
 * ZeRO stage, sp):
 *
 *     memory per GPU = parameters + gradients + optimizer state   (zero.h)
 *                    + activations of the micro-batches in flight (the
 *                      schedule's own count) + what one op holds at once
 *                    + communication buffers
 *     step time      = the pipeline's makespan from the schedule simulator
 *                      (schedule.h), each F and B priced as the model charges
 *                      the clock (GEMMs at the profile's efficiency for
 *                      their shape, TP/SP/CP collectives on their link
 *                      level) + the DP/ZeRO traffic not hidden + optimizer
 *
 * Agreement: for a layout `ptdp train` can run, ptdp_plan_train_config
 * gives the run; its virtual step time and the measured peaks are the
 * plan's within 5% (tests/test_plan_time.c, tests/test_plan_memory.c).
 *
 * A mixture of experts (model_plan.h) is priced under uniform routing —
 * each expert gets k R / E of a device's R token rows — with its experts
 * over ep ranks and their copies over dp cp / ep (tests/test_plan_moe.c
 * checks it where that assumption is exact).
 *
 * Bytes are those of this build's ptdp_real (4 in libptdp, 8 in
 * libptdp_f64); under bf16 parameters, gradients and the activations a
 * micro-batch keeps are 2 bytes (mixed.h, act_bf16.h), as in the
 * implementation.
 */
#ifndef PTDP_PLAN_H
#define PTDP_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "clock.h"
#include "model.h"
#include "train.h"

typedef enum {
    PTDP_RECOMPUTE_NONE = 0,
    PTDP_RECOMPUTE_SELECTIVE,   /* the attention core (train.h recompute_core) */
    PTDP_RECOMPUTE_FULL,        /* keep each block's input, redo one block at a time */
    PTDP_RECOMPUTE_COUNT
} ptdp_recompute;

/* "none", "selective", "full"; and back (-1 if unknown). */
const char *ptdp_recompute_name(ptdp_recompute r);
int         ptdp_recompute_parse(const char *name);

/* What `ptdp plan` is asked: the model, the batch, the cluster, and which
 * parts of the layout the flags fix (-1 or NULL: free). */
typedef struct {
    ptdp_model_config model;     /* a plannable model (model_plan.h) and its
                                    sizes                                   */
    long long batch;             /* B: sequences per step (global)          */
    int gpus;                    /* N                                       */
    const ptdp_profile *profile;
    bool bf16;                   /* --precision bf16                        */
    bool attention_tiled;        /* --attention tiled: the attention core in
                                    tiles (attention_tiled.c), a log-sum-exp
                                    a query kept (model_plan.h's core)      */
    ptdp_optimizer_kind optimizer;   /* AdamW (as ptdp train's default)     */
    double bucket_mb;            /* DDP bucket, MiB (ptdp train's default)  */
    /* fixed by flags, or -1 / NULL = the planner chooses */
    int tp, pp, cp, zero, micro_batch_size, virtual_stages;
    int recompute;               /* a ptdp_recompute, or -1                 */
    int sp;                      /* 0, 1, or -1                             */
    const ptdp_schedule_entry *schedule;   /* a registry row (schedule.h), or
                                    NULL: every row the planner tries
                                    unasked (PTDP_SCHED_PLANNED)            */
    int ep;                      /* expert parallelism (a model with experts),
                                    or -1 / 0: the planner chooses          */
    int etp;                     /* the experts' TP size (--etp, MoE parallel
                                    folding), or 0: the planner chooses
                                    among the divisors of tp               */
    const struct ptdp_fp8_recipe *fp8;   /* --fp8 R: the linear layers'
                                    products priced at the FP8 peak with
                                    their quantization (clock.h), or NULL  */
    bool fp8_comm;               /* --fp8-comm (with fp8): EP's forward
                                    dispatch as FP8 rows (ep.h), ZeRO-3's
                                    gathers of the quantized weights as
                                    their codes (plan_time.c)              */
    /* ZeRO-3's options (with --zero 3), ptdp train's flags (0: off) */
    int shard_group;             /* HSDP: ZeRO over shard groups of N DP
                                    ranks, each shard all-reduced over the
                                    dp / N replicas (zero_hsdp.c)           */
    bool zero_hpz;               /* ZeRO++'s hpZ: the backward's gathers
                                    inside a node (zero_hpz.c)              */
    int zero_qwz;                /* ZeRO++'s qwZ: the forward's gathers as
                                    INT8 in blocks of this many (zero3_qwz.c) */
    int zero_qgz;                /* ZeRO++'s qgZ: the gradient's sum as two
                                    all-to-alls of codes of this many bits
                                    (4 or 8), as ptdp train runs it
                                    (zero3_qgz.c)                           */
} ptdp_plan_request;

/* The request with nothing fixed: AdamW, ptdp train's bucket, float. */
ptdp_plan_request ptdp_plan_request_defaults(void);

/* One layout. */
typedef struct {
    int dp, tp, pp, cp;
    int micro_batch_size;        /* b: sequences per micro-batch            */
    int micro_batches;           /* M = B / (b dp)                          */
    int virtual_stages;          /* v: 1, or the interleaved chunks          */
    const ptdp_schedule_entry *schedule;   /* its registry row (NULL: the
                                    default, 1f1b)                          */
    ptdp_recompute recompute;
    int zero;                    /* 0 .. 3                                  */
    bool sp;                     /* sequence parallelism (tp > 1 only)      */
    bool overlap;                /* DP/ZeRO traffic started in the backward */
    int ep;                      /* expert parallelism: experts over ep of the
                                    dp x cp ranks (0 or 1: none), or under
                                    folding of the tp/etp x dp x cp slices */
    int etp;                     /* the experts' TP size: 0 or tp, as
                                    attention's; below tp MoE parallel
                                    folding (moe_fold.c)                    */
} ptdp_plan_layout;

/* MoE parallel folding (moe_fold.c) in a layout: the slices each TP
 * group's rows are routed in, tp / etp; 1 when etp is 0 or tp (as
 * ptdp_train_fold_slices for a run). */
static inline int ptdp_plan_fold_slices(const ptdp_plan_layout *l)
{
    return l->etp > 0 && l->etp < l->tp ? l->tp / l->etp : 1;
}

/* Memory per GPU, bytes, on the device with the largest peak. */
typedef struct {
    double params, grads, optim;   /* model states (with ZeRO-3's gathered unit) */
    double acts;                   /* activations at the peak                    */
    double comm;                   /* communication buffers                      */
    double other;                  /* everything else (data, scratch)            */
    double total;                  /* the peak: what must fit                    */
    int stage;                     /* the pipeline stage of that device          */
    int in_flight;                 /* micro-batches whose activations it holds   */
    double psi;                    /* parameter elements of that stage (tp shard) */
    double params_units;           /* of params, the units in use: bf16's float
                                      copies, ZeRO-3's gathered ones            */
    double psi_experts;            /* of psi, the experts' (summed over expert DP) */
} ptdp_plan_memory;

/* Bytes a device sends in a step inside a node and across nodes, their
 * seconds (a group that spans nodes counts across: clock.h), and the
 * bytes that leave a node (all its devices': the ZeRO++ paper's count). */
typedef struct {
    double intra, cross, s, node;
} ptdp_plan_link;

/* ZeRO-3's collectives a step on the stage with the most parameters
 * (shard_price.c): the forward's gathers, the backward's, the gradient's
 * sum (reduce-scatters, or qgZ's all-to-alls) and HSDP's all-reduce over
 * the replicas; psi that stage's parameters (a TP rank's). */
typedef struct {
    ptdp_plan_link gather_f, gather_b, reduce, replicas;
    double psi;
} ptdp_plan_zero3;

/* Time of one step, seconds, and what it is made of. */
typedef struct {
    double step_s;                 /* the step's makespan                        */
    double forward_s, backward_s;  /* one micro-batch on the slowest stage       */
    double bubble;                 /* the pipeline's idle fraction               */
    double tp_comm_s, cp_comm_s;   /* per micro-batch, on the compute stream     */
    double ep_comm_s;              /* per micro-batch: the experts' all-to-alls  */
    double pp_comm_s;              /* one activation message                     */
    double dp_comm_s;              /* DP / ZeRO traffic a step                    */
    double dp_exposed_s;           /* of it, what the compute stream waits for   */
    double optimizer_s;
    double fp8_amax_s;             /* --fp8 delayed: its step amaxes (3 reals a
                                      parameter tensor) max-reduced over DP
                                      after the optimizer, once a step       */
    /* --fp8-comm under ZeRO-3: one round of the fullest stage's gathers
     * (each micro-batch's forward, and again its backward) — psi its
     * parameters on a device, psi_fp8 of them in weights FP8 quantizes,
     * their amaxes — and the bytes gathered: psi_fp8 codes of 1 B + the
     * rest in the store's type + the amaxes' reals, beside psi in the
     * store's type (2 psi under bf16).  Zeros otherwise. */
    double zero3_psi, zero3_psi_fp8, zero3_amaxes, zero3_gather_bytes, zero3_gather_bytes_store;
    ptdp_plan_zero3 zero3;         /* ZeRO-3 (dp cp > 1): its bytes and time a step */
    double tokens_per_s;
    double model_flops;            /* a step: 72 B s l h^2 (1 + s/6h + V/12lh)    */
    double hardware_flops;         /* a step, counting recomputation              */
    double model_tflops_per_gpu;   /* model_flops / (step_s N) / 1e12             */
    double hardware_tflops_per_gpu;
} ptdp_plan_time;

/* A layout with its numbers. */
typedef struct {
    ptdp_plan_layout layout;
    ptdp_plan_memory memory;
    ptdp_plan_time time;
    bool fits;                     /* memory.total <= the device's memory        */
} ptdp_plan_candidate;

/* Whether this layout can run as ptdp train would run it (the same rules:
 * every split divides, the schedule takes p, m and v).  0, or PTDP_EINVAL
 * with the reason naming the flag, and what would divide, in msg. */
int ptdp_plan_layout_check(const ptdp_plan_request *rq, const ptdp_plan_layout *l, char *msg, size_t len);

/* The ptdp train configuration of a layout (for the agreement test and for
 * --explain's "run it" line). */
void ptdp_plan_train_config(const ptdp_plan_request *rq, const ptdp_plan_layout *l, ptdp_train_config *cfg);

/* The formulas (plan_memory.c, plan_time.c). */
int ptdp_plan_memory_of(const ptdp_plan_request *rq, const ptdp_plan_layout *l, ptdp_plan_memory *out);
int ptdp_plan_time_of(const ptdp_plan_request *rq, const ptdp_plan_layout *l, ptdp_plan_time *out);

/* Every valid layout (fixing what rq fixes), best (fastest fitting) first;
 * device_bytes is the memory of one GPU (0: the profile's mem_bytes):
 * *out gets *count candidates (free with free()).  0; PTDP_EINVAL with a
 * message when nothing can divide or nothing fits (what would, in msg). */
int ptdp_plan_search(const ptdp_plan_request *rq, double device_bytes, ptdp_plan_candidate **out,
                     int *count, char *msg, size_t len);

#endif
