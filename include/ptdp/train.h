/*
 * train.h — the training loop of every configuration, and --check.
 *
 * ptdp_train runs `steps` optimizer steps of the reference MLP on
 * dp * tp * pp device threads.  One step, on every device:
 *
 *   for each action of this stage's pipeline schedule:       (schedule.h)
 *       forward / backward one micro-batch of this DP shard,  (mlp.c)
 *       send / receive activations and their gradients        (pp.c)
 *   all-reduce the gradients in the DP group, in buckets      (dp.c)
 *   gradient norm over the whole model, clip                  (model.c)
 *   optimizer step (AdamW or SGD), zero the gradients         (optim.c)
 *
 * With an interleaved schedule (virtual_stages v > 1) each stage holds v
 * model chunks, the model's chunks s, s + p, … of p v; the step is the same list
 * of actions, each naming its chunk.
 *
 * The single-device baseline is the same call with dp = tp = pp = 1.
 */
#ifndef PTDP_TRAIN_H
#define PTDP_TRAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "counters.h"
#include "fp8_linear.h"
#include "launch.h"
#include "schedule.h"
#include "state.h"

/* When a run has diverged: at a step, the loss or the gradient norm is
 * not finite, or the gradient norm is more than PTDP_DIVERGENCE_FACTOR
 * times the first step's of this run (a healthy run's norm stays within a
 * few powers of ten of where it starts; a blown-up one leaves it by tens).
 * Every device sees the same norm, so every device stops at the same step,
 * before its update: the log keeps the steps before, nothing is saved. */
#define PTDP_DIVERGENCE_FACTOR 1e6

typedef struct {
    ptdp_model_config model;
    int dp, tp, pp;
    int micro_batches;        /* M: micro-batches per DP shard per step   */
    int batch;                /* B: the global batch                      */
    int steps;                /* steps of this run                        */
    ptdp_optimizer_kind optimizer;
    double lr, momentum, weight_decay, clip_grad;   /* clip_grad 0 = off */
    double bucket_mb;         /* DDP bucket size, MiB                     */
    double dropout;
    uint64_t seed;
    const ptdp_schedule_entry *schedule;   /* the schedule's registry row
                                 (ptdp_schedule_find("gpipe"), schedule.h);
                                 NULL: the default, 1f1b                  */
    int virtual_stages;       /* v model chunks per stage (interleaved;
                                 pp.c): 0 or 1 = one                      */
    int token_slices;         /* TeraPipe (gpt, --schedule gpipe): each
                                 micro-batch's sequences run as k slices
                                 of positions through the pipeline (pp.h);
                                 0 or 1 = whole sequences                  */
    bool recompute;           /* full: keep only each block's input         */
    bool recompute_core;      /* selective: keep the block's activations but
                                 those of the model's core (a GPT's
                                 attention: scores, softmax, dropout,
                                 weighted sum), redone in the backward
                                 (Korthikanti et al. 2022)                  */
    bool attention_tiled;     /* --attention tiled: causal attention in
                                 tiles (attention_tiled.c), a log-sum-exp
                                 a query kept instead of the T x T
                                 probabilities; false: --attention full   */
    bool sp;                  /* sequence parallelism in the TP group (sp.h) */
    int cp;                   /* context parallelism (cp.h): devices per
                                 sequence; 0 or 1 = off                     */
    bool cp_contiguous;       /* one chunk per CP rank, not zigzag          */
    int ep;                   /* expert parallelism (mesh.h): a mixture of
                                 experts' experts spread over ep of the
                                 dp x cp ranks; 0 or 1 = off              */
    int etp;                  /* MoE parallel folding (moe_fold.c): the
                                 experts' TP size, dividing tp; 0 = tp
                                 (the experts split as attention is)      */
    bool cp_a2a;              /* --cp-algo a2a: attention as Ulysses' head
                                 split (ulysses.h), not the ring (cp.h)    */
    const int *stage_layers;  /* pp x v entries (blocks per chunk), or NULL
                                 for balanced                             */
    int zero;                 /* 0, 1, 2 or 3 (zero.h)                    */
    int shard_group;          /* HSDP (--shard-group N, zero_hsdp.c): ZeRO's
                                 states cut over N consecutive DP ranks and
                                 replicated over dp / N; 0 = not given, the
                                 whole DP group (as N = dp)                */
    int zero_hpz;             /* ZeRO++'s hpZ (--zero-hpz, zero_hpz.c): the
                                 DP ranks inside one node, k, over which
                                 ZeRO-3's backward gathers from secondary
                                 pieces (the command derives k from the
                                 profile's GPUs a node); 0 = off          */
    int zero_qwz;             /* ZeRO++'s qwZ (--zero-qwz, zero3_qwz.c): the
                                 forward gathers in INT8 blocks of this many
                                 elements (--zero-quant-block, 2048); 0 = off */
    int zero_qwz_emulate;     /* --check's one device: the ZeRO group's N whose
                                 shards qwZ's blocks follow; 0 = none     */
    int zero_qwz_emulate_block;   /* ... and their block B                */
    int zero_qgz;             /* ZeRO++'s qgZ (--zero-qgz, zero3_qgz.c): the
                                 gradient codes' bits, 4 or 8 (--zero-qgz-bits,
                                 4); 0 = off                               */
    int zero_qgz_block;       /* its blocks' elements (--zero-quant-block,
                                 2048)                                     */
    int zero_qgz_node;        /* its node: the DP ranks of one node of the
                                 profile, k (the command derives it)       */
    int zero_qgz_emulate;     /* --check's one device: the ZeRO group's N whose
                                 all-to-alls it sums as (zero_qgz_block,
                                 zero_qgz_node and zero_qgz_emulate_bits
                                 theirs, over zero_qgz_emulate_dp ranks);
                                 0 = none                                  */
    int zero_qgz_emulate_dp, zero_qgz_emulate_bits;
    bool bf16;                /* --precision bf16: bf16 parameters and
                                 gradients, float master weights (mixed.h);
                                 the float build only                      */
    ptdp_fp8_settings fp8;    /* --fp8 R: every linear layer's products from
                                 FP8-quantized operands (fp8_linear.h);
                                 recipe NULL: off                          */
    bool overlap;             /* all-reduce each DP bucket during the last
                                 micro-batch's backward, as soon as it is
                                 complete (dp.h): the same bits, earlier     */
    bool serial_pairs;        /* --no-pair-overlap: an overlapped F&B pair's
                                 all-to-alls stay on the compute stream, as
                                 if F and B ran one after the other (pair.h):
                                 the same bits, the virtual time without the
                                 overlap                                   */
    bool verify_replicas;     /* after every step, check that DP replicas are
                                 bit-identical (one small all-gather of hashes) */

    const ptdp_state *resume;   /* start from this state (--load), or NULL */
    ptdp_state *final_state;    /* filled at the end if not NULL (--save, --check) */
    ptdp_state *init_state;     /* filled before the first step (--save-init)      */
    /* --dump-data: filled with the global batches used, if not NULL (host
     * arrays of that size): the inputs [steps, B, input_cols] in dump_x (a
     * model of features) or dump_tokens (a model of tokens), the targets
     * [steps, B, label_cols] in dump_y. */
    ptdp_real *dump_x;
    int64_t *dump_tokens;
    int64_t *dump_y;
} ptdp_train_config;

/* One step as the log line and --log print it. */
typedef struct {
    long step;            /* global step, 1 for a fresh run's first       */
    double loss;          /* mean over the global batch                   */
    double grad_norm;     /* over the whole model, each parameter once    */
    double virtual_s;     /* the step's makespan: largest over devices    */
    double wall_s;        /* largest over devices                         */
    double bytes;         /* bytes sent during the step, summed over devices */
} ptdp_step_log;

/* Called (from a device thread, one call at a time, in step order) as soon
 * as every device has finished a step. */
typedef void (*ptdp_step_observer)(const ptdp_step_log *log, void *ctx);

typedef struct {
    int steps;
    int completed;                /* steps every device finished: all of them,
                                     or fewer when the run failed            */
    ptdp_step_log *log;           /* [steps], the first `completed` filled  */
    double bubble_measured;       /* pipeline idle fraction, virtual time (pp > 1) */
    double bubble_formula;        /* the schedule's: (p - 1) / (m + p - 1); with
                                     v chunks (p - 1) / (v m + p - 1) (schedule.h) */
    const char *bubble_words;     /* that formula in words, "(p-1)/(v*m+p-1)"      */
    size_t *peak_acts;            /* [pp]: each stage's peak activation bytes       */
    size_t *peak_wgrad;           /* [pp]: with a split backward (zb-h1), the most
                                     bytes B kept for W at once (included in
                                     peak_acts); 0 otherwise                      */
    size_t *param_elements;       /* [world]: each device's parameter elements (its
                                     stage, its TP shard): S / R of its buffers     */
    /* The run's counters (counters.h): what its model and parallelisms
     * published — an auxiliary loss, experts' loads, EP's bytes, … — read
     * by name (ptdp_train_step_counts, ptdp_train_device_counts). */
    ptdp_counters counters;
    double *step_counts;          /* [steps][counters.len[PTDP_COUNT_STEP]]: each
                                     step's, summed over the devices               */
    double *device_counts;        /* [world][counters.len[PTDP_COUNT_DEVICE]]: each
                                     device's of the whole run                     */
} ptdp_train_result;

/* Counter `name` of a run (counters.h): its numbers at step s (0-based;
 * summed over the devices that count, a mean per sample where published
 * so), or device `rank`'s over the run.  NULL when nothing published such
 * a counter. */
const double *ptdp_train_step_counts(const ptdp_train_result *r, int s, const char *name);
const double *ptdp_train_device_counts(const ptdp_train_result *r, int rank, const char *name);

/* The defaults of `ptdp train` (and of the demo and the figures): a model
 * small enough to train in seconds that every dp, tp, pp up to 8 divides —
 * d_in 32, hidden 64, ffn 256, 8 blocks, 16 classes, batch 64 — with AdamW
 * lr 1e-3, 10 steps, one device. */
ptdp_train_config ptdp_train_defaults(void);

/* The CP group's size: cfg->cp, or 1 when it is 0 (off). */
static inline int ptdp_train_cp(const ptdp_train_config *cfg)
{
    return cfg->cp > 1 ? cfg->cp : 1;
}

/* MoE parallel folding (moe_fold.c): the slices each TP group's rows are
 * routed in, tp / etp; 1 when --etp is off or equals --tp. */
static inline int ptdp_train_fold_slices(const ptdp_train_config *cfg)
{
    return cfg->etp > 0 && cfg->etp < cfg->tp ? cfg->tp / cfg->etp : 1;
}

/* k: cfg->token_slices, or 1 when it is 0 (whole sequences). */
static inline int ptdp_train_token_slices(const ptdp_train_config *cfg)
{
    return cfg->token_slices > 1 ? cfg->token_slices : 1;
}

/* The schedule's row: cfg->schedule, or the registry's default (1f1b). */
static inline const ptdp_schedule_entry *ptdp_train_schedule(const ptdp_train_config *cfg)
{
    return cfg->schedule != NULL ? cfg->schedule : ptdp_schedule_default();
}

/* Where each device's model chunks lie (pp_layout.h): the schedule's shape
 * on pp devices, cfg->virtual_stages chunks each round a ring (0 or 1 =
 * one), two in a V or DualPipe's copies (which take no --virtual-stages:
 * validation refuses one above 1, ptdp_schedule_check_flag_v). */
static inline ptdp_pp_layout ptdp_train_layout(const ptdp_train_config *cfg)
{
    return ptdp_pp_layout_make(ptdp_train_schedule(cfg)->layout, cfg->pp, cfg->virtual_stages);
}

/* v: the model chunks a device holds. */
static inline int ptdp_train_virtual_stages(const ptdp_train_config *cfg)
{
    return ptdp_train_layout(cfg).v;
}

/* Validate cfg: 0, or PTDP_EINVAL with a message naming the flag in msg. */
int  ptdp_train_validate(const ptdp_train_config *cfg, char *msg, size_t msglen);
/* The same rules but the host's limit of PTDP_MAX_DEVICES threads: whether
 * the layout could run on as many devices as it names (ptdp plan). */
int  ptdp_train_validate_layout(const ptdp_train_config *cfg, char *msg, size_t msglen);
/* Run.  opts may carry device memory, watchdog, profile, algo, trace and a
 * launch result (per-device memory, bytes and times).  Returns 0 or the
 * first failure (message in opts->result if given, else in msg). */
int  ptdp_train(const ptdp_train_config *cfg, const ptdp_launch_opts *opts,
                ptdp_step_observer observer, void *observer_ctx,
                ptdp_train_result *result, char *msg, size_t msglen);
void ptdp_train_result_free(ptdp_train_result *r);

/* The one device --check holds cfg to: the same model, data, optimizer,
 * precision and steps, and every parallelism off (dp = tp = pp = 1, no
 * CP, SP, EP, ZeRO, recomputation; a schedule one stage runs).  Its
 * micro-batches: one, the global batch — or, when a scale covers one
 * micro-batch's tensor (--fp8 tensorwise or delayed, fp8_linear.h) or
 * qgZ sums each rank's micro-batch gradient (--zero-qgz, zero3_qgz.c), the
 * same micro-batches as cfg's, every replica's in turn. */
ptdp_train_config ptdp_train_baseline(const ptdp_train_config *cfg);

/* --check's rule, per tensor: max|a - b| <= tol * max(1, max|b|).  Compares
 * every parameter of a against b (the baseline); reports the largest
 * absolute and relative difference and the worst tensor.  Returns true if
 * every tensor is within tol. */
typedef struct {
    double max_abs, max_rel;      /* over all parameters                      */
    char worst[2 * PTDP_NAME_MAX];
    bool ok;
} ptdp_check_report;
bool ptdp_check_states(const ptdp_state *a, const ptdp_state *b, double tol, ptdp_check_report *rep);
/* The same rule for one number (a step's loss). */
bool ptdp_check_value(double a, double b, double tol);

#endif
