/*
 * plan_memory.c — the memory of one GPU under a layout, by the
 * implementation's own allocations: what `ptdp train --report` would
 * measure as that device's peak, computed instead of run.
 *
 * A device's arena at its busiest moment holds three layers:
 *
 *   bytes ▲                         ┌──┐ one op's transient (sp gather,
 *         │              ┌──────────┤  │ grad.probs, ring buffers, units)
 *         │              │ scratch of one backward (grad.*), pp buffers
 *         │   ┌──────────┴──────────────┐
 *         │   │ n in-flight micro-batches x what each keeps (K)
 *         ├───┴─────────────────────────┴─────────────────────────
 *         │ model states (params, grads, optimizer: ZeRO stage, bf16)
 *         │ + the data corpus on the first and last stage
 *         └──────────────────────────────────────────────────────► time
 *
 * and the peak is the larger of two moments: the backward of the
 * micro-batch that finds n = the schedule's in-flight peak alive (its
 * scratch and the largest op transient on top), or the forward that makes
 * the n-th (on the last stage, the logits and the cross-entropy's rows).
 * The stage whose peak is largest is the answer; with one chunk a stage
 * the middle stages hold no more than stage 1, so stages 0, 1 and p-1
 * decide (O(1) a layout); interleaved and ZB-H1 weigh every stage (O(p v)).
 *
 * Symbols: b sequences a micro-batch, T positions, Tq = T/cp this device's
 * positions, R = b Tq rows, Rl = R/tp under SP (else R) the rows of the
 * LayerNorm/residual regions, C hidden, Cl = C/tp, Fl = F/tp, hl = nh/tp,
 * Vl = V_pad/tp; r = sizeof(ptdp_real).
 *
 * What one micro-batch keeps per block (the model's block forward), in reals:
 *
 *   K_block = R (C + 3Cl + Cl + C + 2Fl)      ln1, qkv, attn_y, ln2, fc, gelu
 *           + Rl (2C + 4)                     x2, the block's output x, LN stats
 *           + b hl T^2                        probs (none under selective
 *                                             recomputation; b hl Tq log-sum-exps
 *                                             under CP)
 *
 * — the model's block_kept (model_plan.h), the formula `ptdp train` prints (it
 * counts the block's input x where this counts its output: the same
 * bytes).  A stage adds its first x, the input it keeps (tokens on stage
 * 0, int64; else the received Rl x C), and on the last stage LN_f
 * (R C + 2 Rl), the logits (R Vl) and two doubles a row (max, sum of
 * exponentials); the data loader's tokens and labels (b T int64 each,
 * "other") live as long as the micro-batch.  Full recomputation keeps
 * each block's input (and the tail's) and the data, and rebuilds one
 * block at a time inside the backward — first, on the last stage, the
 * tail (LN_f, logits, statistics).  Under bf16 those tensors are kept as bf16 (2 bytes; the
 * LN statistics and CP's log-sum-exps stay float) and one block's float
 * copy rides on top at each moment: the bf16 section below.
 *
 * In flight (the schedule's own counts, by formula; the test checks them
 * against ptdp_schedule_peak_in_flight): GPipe m; 1F1B and ZB-H1
 * min(p - s, m); interleaved min(2 (p - s - 1) + (v - 1) p + 1, v m)
 * chunk-micro-batches, chunk c of them as Megatron's order runs p
 * micro-batches of one chunk before the next.  DualPipe's two chunks a
 * device (dualpipev's V, dualpipe's two copies) are walked down the
 * device's own list instead (walk_pairs): what each F keeps, each B
 * frees, each zero-bubble B leaves for its W.  ZB-H1 also keeps, for each
 * deferred W (ptdp_schedule_peak_deferred, by formula), a copy of both
 * operands of every dW product (wgrad.c).
 *
 * One backward adds its scratch (the model's): grad.h, grad.tmp (Rl C each),
 * grad.ln (R C), grad.ff (R Fl), grad.attn_y (R Cl), grad.qkv (3 R Cl),
 * under SP grad.ln_local and grad.gathered, and grad.attn (2 T^2); plus the
 * pipeline's received and sent gradients (Rl C each).
 *
 * Model states, per device with N its stage's parameter elements and
 * len its share (N; ceil(N/(dp cp)) for ZeRO 1-2, whose group is every copy of
 * the parameters, the context-parallel ranks included; per unit for ZeRO-3):
 *
 *                     float              bf16 (mixed.h)
 *   params            4N  (3: 4 len)     2N  (3: 2 len)  + float working
 *                                                           copies of subunits
 *   grads             4N  (2,3: 4 len)   2N  (2,3: 2 len) + a subunit's float
 *                                                            gradient
 *   optimizer         8 len (AdamW)      8 len + 4 len master
 *
 * and ZeRO-2's reduce bucket (N elements, "comm") during each backward;
 * ZeRO-3 gathers a unit (a block; the embeddings; the head) only while it
 * computes — the embeddings for the whole pass when one stage holds the
 * tied head too.  Under bf16 a block is widened a subunit (one linear layer)
 * at a time, the embeddings and the head whole (zero3.c).  These are the ZeRO paper's 16 psi, 4 psi + 12 psi/N, …
 * (ptdp_zero_state_bytes) with this implementation's rounding: the row's
 * own price (ptdp_zero_device_states, zero_stages.c), as SP's and CP's
 * buffers are theirs (tp_price.c, cp_price.c; src/parallel/price_impl.h).
 *
 * A mixture of experts (model_plan.h's ptdp_plan_moe, uniform routing) in
 * place of a block's MLP: its router beside the dense parameters, its E/ep
 * experts apart — their ZeRO 1/2 share over the expert-DP group (dp cp / ep
 * copies) where the dense share is over dp cp:
 *
 *   len = ceil(N_dense / (dp cp)) + ceil(N_experts / (dp cp / ep))
 *
 * and what a micro-batch keeps of it beyond a dense block's, with its
 * largest forward and backward transients (the stacked rows, the
 * exchanges' buffers) on top of the moments above.
 */
#include "ptdp/plan.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"
#include "ptdp/model_plan.h"
#include "ptdp/models.h"
#include "ptdp/schedule.h"
#include "parallel/price_impl.h"
#include "parallel/schedule_impl.h"
#include "plan/plan_impl.h"

/* ------------------------------------------------- the data, the seed */

/* ptdp train's seed (built-in data is made from it) and SGD's momentum
 * (whether SGD keeps a buffer), read once. */
static uint64_t train_seed;
static double sgd_momentum;
static pthread_once_t train_once = PTHREAD_ONCE_INIT;

static void read_train_defaults(void)
{
    const ptdp_train_config t = ptdp_train_defaults();
    train_seed = t.seed;
    sgd_momentum = t.momentum;
}

/* The model's data (kept in the arena of the first and the last stage). */
static double data_bytes(const ptdp_model_config *c)
{
    pthread_once(&train_once, read_train_defaults);
    return ptdp_model_of(c)->plan->data_bytes(c, train_seed);
}

static double fmax2(double a, double b) { return a > b ? a : b; }

/* ------------------------------------------------- shapes */

typedef struct {
    double b, T, Tq, R, Rl, C, Cl, Fl, hl, Vl, KVl;
    ptdp_plan_params par;     /* the model's parameters on a TP rank      */
    double block_p, embed_p, head_p;   /* a unit's elements (the head's own) */
    ptdp_plan_acts act;       /* what a micro-batch holds beyond its blocks */
    bool packed;              /* bf16 activations packed a block at a time
                                 (the model's packs_bf16, under bf16)      */
    int layers, tp, pp, v, cp;
    ptdp_pp_layout lay;       /* chunks round a ring, in a V, or two copies (DualPipe) */
    const ptdp_schedule_entry *row;   /* the schedule's registry row            */
    bool walk;                /* its activation profile is walked down its list
                                 (no closed form in its row)                 */
    const ptdp_zero_stage *zero;   /* the layout's ZeRO row (zero.h)             */
    int ndp;                  /* ZeRO's group: every copy of the parameters, dp x cp;
                                 HSDP's shard group                          */
    int hpz;                  /* hpZ's node group: k DP ranks (0: none)       */
    int qgz_bits, qgz_node;   /* qgZ (zero3_qgz.c): its codes' bits (0: off),
                                 the DP ranks of its node                     */
    int ep, nedp;             /* expert parallelism; the experts' copies, dp cp / ep
                                 (folded: tp/etp dp cp / ep)            */
    int E;                    /* experts of the model's mixtures (0: dense)        */
    ptdp_plan_moe moe;        /* one mixture's numbers (every one's alike); zero: none */
    bool sp;
} shape;

static double unit_params(const ptdp_plan_tensors *t)
{
    double n = 0;
    for (int j = 0; j < t->n; j++)
        n += t->size[j];
    return n;
}

static shape shape_of(const ptdp_plan_request *rq, const ptdp_plan_layout *l)
{
    const ptdp_model_config *c = &rq->model;
    shape s;
    s.tp = l->tp;
    s.pp = l->pp;
    s.v = ptdp_plan_chunks(l);
    s.row = ptdp_plan_schedule(l);
    s.lay = ptdp_plan_pp_layout(l);
    s.walk = s.row->in_flight == NULL || ((s.row->caps & PTDP_SCHED_SPLIT_BACKWARD) && s.row->deferred == NULL);
    s.cp = l->cp > 1 ? l->cp : 1;
    s.zero = ptdp_zero_stage_of(l->zero);
    s.ndp = l->dp * s.cp;
    s.sp = l->sp && l->tp > 1;
    /* HSDP (zero_hsdp.c): ZeRO's shards over the shard group; hpZ
     * (zero_hpz.c): a node's k DP ranks keep a piece of each unit each */
    ptdp_train_config t;
    ptdp_plan_train_config(rq, l, &t);
    const bool hsdp = s.zero != NULL && s.zero->shards_optim && t.shard_group > 0 && t.shard_group < s.ndp;
    s.hpz = s.zero != NULL && s.zero->shards_params ? t.zero_hpz : 0;
    s.qgz_bits = s.zero != NULL && s.zero->shards_params ? t.zero_qgz : 0;
    s.qgz_node = t.zero_qgz_node;
    s.layers = c->layers;
    s.ep = l->ep > 1 ? l->ep : 1;
    const int slices = ptdp_plan_fold_slices(l);   /* MoE parallel folding (moe_fold.c) */
    s.nedp = slices * s.ndp / s.ep > 0 ? slices * s.ndp / s.ep : 1;
    s.ndp = hsdp ? t.shard_group : s.ndp;
    s.E = ptdp_model_of(c)->plan->experts != NULL ? ptdp_model_of(c)->plan->experts(c) : 0;
    ptdp_plan_dims d;
    ptdp_model_of(c)->plan->dims(c, l->micro_batch_size, s.tp, s.sp, s.cp, &d);
    s.b = d.b;
    s.T = d.T;
    s.Tq = d.Tq;
    s.R = d.R;
    s.Rl = d.Rl;
    s.C = d.C;
    s.Cl = d.Cl;
    s.Fl = d.Fl;
    s.hl = d.hl;
    s.Vl = d.Vl;
    s.KVl = d.KVl;
    const ptdp_model_plan *mp = ptdp_model_of(c)->plan;
    mp->params(c, s.tp, s.sp, &s.par);
    s.block_p = unit_params(&s.par.block);
    s.embed_p = unit_params(&s.par.embed);
    s.head_p = unit_params(&s.par.head);
    mp->acts(c, l->micro_batch_size, s.tp, s.cp, s.sp, ptdp_plan_core_of(rq, l->recompute),
             l->recompute == PTDP_RECOMPUTE_FULL, &s.act);
    s.packed = rq->bf16 && mp->packs_bf16;
    memset(&s.moe, 0, sizeof s.moe);
    if (s.E > 0)
        ptdp_plan_moe_of(rq, l, false, &s.moe);
    return s;
}

/* Model chunk g within its copy of the model: chunk *k of *n (DualPipe's two
 * copies: a stage of a model cut in pp; else a chunk of pp v). */
static void within_copy(const shape *s, int g, int *k, int *n)
{
    *n = ptdp_pp_layout_chunks(&s->lay);
    *k = g % *n;
}

/* Blocks of model chunk g of the pp v (model.c ptdp_stage_range). */
static int chunk_blocks(const shape *s, int g)
{
    int n;
    within_copy(s, g, &g, &n);
    return s->layers / n + (g < s->layers % n ? 1 : 0);
}

/* The mixture-of-experts blocks of model chunk g (model_plan.h): how many,
 * and one's numbers (they are alike: priced once a layout, shape_of).
 * None when the model is dense. */
typedef struct {
    int n;
    ptdp_plan_moe m;
} chunk_moe;

static chunk_moe moe_of_chunk(const ptdp_plan_request *rq, const shape *s, int g)
{
    chunk_moe cm = { 0 };
    if (s->E == 0)
        return cm;
    const int nb = chunk_blocks(s, g);
    int n;
    within_copy(s, g, &g, &n);
    const int first = g * (s->layers / n) + (g < s->layers % n ? g : s->layers % n);
    cm.n = ptdp_plan_moe_blocks(rq, first, nb);
    if (cm.n > 0)
        cm.m = s->moe;
    return cm;
}

/* What a stage's mixtures add (model_plan.h): their experts' parameters
 * (summed over the expert-DP group), the largest block unit, and the
 * largest of their transients and of what a block keeps beyond a dense
 * one's. */
typedef struct {
    double experts, unit, fwd, bwd, block;
} mixtures;

/* Chunk cm's mixtures into mx; the parameters they add beyond as many
 * dense blocks of `dense` elements each. */
static double add_mixtures(mixtures *mx, const chunk_moe *cm, double dense)
{
    if (cm->n == 0)
        return 0;
    const double experts = cm->m.local * cm->m.params_expert;
    mx->experts += cm->n * experts;
    mx->unit = mx->unit > cm->m.params_dense + experts ? mx->unit : cm->m.params_dense + experts;
    mx->fwd = mx->fwd > cm->m.fwd_bytes ? mx->fwd : cm->m.fwd_bytes;
    mx->bwd = mx->bwd > cm->m.bwd_bytes ? mx->bwd : cm->m.bwd_bytes;
    mx->block = mx->block > cm->m.kept_bytes ? mx->block : cm->m.kept_bytes;
    return cm->n * (cm->m.params_dense + experts - dense);
}

/* ------------------------------------------------- parameters */

/* One block's parameter elements on one TP rank (the model's lay_out). */
static double block_params(const shape *s)
{
    return s->block_p;
}

/* Its largest subunit, what bf16 widens at once (the model's: a GPT's
 * linear layer with its bias or the LayerNorm before it; the block when
 * it has none). */
static double block_subunit(const shape *s)
{
    return s->par.block_subunit;
}

static double embed_params(const shape *s)  { return s->embed_p; }
/* The head's, and a tied head's copy of the embeddings' matrix on a stage
 * without them. */
static double head_params(const shape *s, bool first)
{
    return s->head_p + (s->par.tied && !first ? s->Vl * s->C : 0);
}

/* The embeddings held through the whole pass where a tied head reads them
 * on the same stage (ZeRO-3 gathers them once, bf16 widens them once). */
static double tied_embed(const shape *s, bool first, bool last)
{
    return s->par.tied && first && last ? embed_params(s) : 0;
}

/* ------------------------------------------------- activations */

/* Reals one micro-batch keeps per block (the header's K_block): the
 * model's own formula, the one `ptdp train` prints. */
static double block_kept(const ptdp_plan_request *rq, const shape *s, ptdp_recompute rc)
{
    return ptdp_model_of(&rq->model)->plan->block_kept(&rq->model, (int)s->b, s->tp, s->cp, s->sp,
                                                       ptdp_plan_core_of(rq, rc));
}

/* The same in bytes as the block packs them. */
static double block_kept_bytes(const ptdp_plan_request *rq, const shape *s, ptdp_plan_core core, bool bf16)
{
    return ptdp_model_of(&rq->model)->plan->block_kept_bytes(&rq->model, (int)s->b, s->tp, s->cp, s->sp,
                                                             core, bf16);
}

/* Bytes one micro-batch of one chunk keeps from its forward to its
 * backward ("acts" and "other" apart), and what a full recompute keeps. */
typedef struct { double acts, other, acts_recompute; } kept;

static kept chunk_kept(const ptdp_plan_request *rq, const shape *s, int blocks, bool first, bool last,
                       ptdp_recompute rc, double moe_bytes)
{
    const double r = sizeof(ptdp_real), h = sizeof(ptdp_bf16);
    kept k = { .acts = moe_bytes };   /* the mixtures' rows beyond dense blocks' (model_plan.h) */
    double input = first ? 8 * s->R : s->act.input;                      /* acts.tokens, acts.input */
    double labels = last && s->cp > 1 ? 8 * s->R : 0;                    /* acts.labels (CP)       */
    /* full recomputation: the tokens (stage 0), each block's input and
     * the tail's (the last stage), bf16 under bf16; the received
     * activation is block 0's input, not kept twice */
    k.acts_recompute = (first ? input : 0) + labels +
                       (s->packed ? h : r) * s->Rl * s->C * (blocks + (last || blocks == 0 ? 1 : 0));
    if (s->packed) {   /* bf16 activations (act_bf16.h): packed blocks, the packed tail */
        k.acts += input + labels + blocks * block_kept_bytes(rq, s, ptdp_plan_core_of(rq, rc), true) +
                 h * s->Rl * s->C;                                                      /* x_out */
        if (last)
            k.acts += s->act.tail_bf16;   /* the head's input packed; logits, statistics float */
    } else {
        k.acts += input + labels + r * (blocks * block_kept(rq, s, rc) + s->Rl * s->C);   /* + the first x */
        if (last)
            k.acts += s->act.tail;   /* the head's input, the logits, the statistics */
    }
    k.other = (first ? 8 * s->b * s->T : 0) + (last ? 8 * s->b * s->T : 0);     /* data.tokens, data.y */
    return k;
}

/* Full recomputation (float): what the backward rebuilds on top of what
 * is kept, one piece at a time — a block's activations (the model's
 * block_redone), or on the last stage, first, the tail's. */
static double redone(const shape *s, bool last)
{
    return fmax2(s->act.block_redone, last ? s->act.tail_redone : 0);
}

/* One backward's scratch (the model's backward_input), bytes. */
static double backward_scratch(const shape *s)
{
    return s->act.scratch;
}

/* SP's buffers (tp_price.c) and CP's ring's (cp_price.c), elements. */
static ptdp_sp_buffers sp_buffers(const shape *s)
{
    return ptdp_sp_price_buffers(s->sp, s->R, s->Rl, s->C);
}

static double ring_buffers(const shape *s, bool backward)
{
    return ptdp_cp_price_buffers(s->R, s->KVl, s->b, s->hl, s->Tq, backward);
}

/* The largest single transient inside a backward (bytes; the model's):
 * selective recomputation's probabilities, SP's gather/scatter buffer,
 * CP's ring.  (rc is the layout's, the one the model was asked with.) */
static double backward_transient(const shape *s, ptdp_recompute rc)
{
    (void)rc;
    return s->act.bwd_transient;
}

/* The largest transient of a forward (bytes) on top of its own kept: a
 * block's, the embeddings' on the first stage, the head's on the last
 * (the model's). */
static double forward_transient(const shape *s, bool first, bool last)
{
    double t = s->act.fwd_block;
    if (first && s->act.fwd_embed > t)
        t = s->act.fwd_embed;
    if (last && s->act.fwd_head > t)
        t = s->act.fwd_head;
    return t;
}

/* ------------------------------------------------- the schedule */

/* Micro-batches (chunk-micro-batches when interleaved) whose activations
 * stage `stage` holds at its peak, of its chunk `chunk` (-1: all): the
 * schedule's own counts, by the closed form in its registry row
 * (tests/test_plan_memory.c checks them against
 * ptdp_schedule_peak_in_flight); a row without one is walked down its
 * list (walk_list) and this is only a first guess.  Building the schedule
 * instead would cost O(p v m) a layout. */
static int in_flight(const shape *s, int m, int stage, int chunk)
{
    if (s->row->in_flight != NULL)
        return s->row->in_flight(s->pp, m, s->v, stage, chunk);
    return s->pp - stage < m ? s->pp - stage : m;
}

/* Backward passes whose weight-gradient half W waits, at most, on stage s
 * (ptdp_schedule_peak_deferred, by the row's closed form; 0 without a W
 * phase). */
static int deferred(const shape *s, int m, int stage)
{
    return s->row->deferred != NULL ? s->row->deferred(s->pp, m, stage) : 0;
}

/* What one deferred W keeps (wgrad.c: a copy of each dW product's two
 * operands), bytes: the model's count a block, for the embeddings and for
 * the head. */
static double wgrad_kept(const shape *s, int blocks, bool first, bool last)
{
    const double r = sizeof(ptdp_real);
    double e = blocks * s->act.wgrad_block;
    if (first)
        e += s->act.wgrad_embed;
    if (last)
        e += s->act.wgrad_head;
    return r * e;
}

/* ------------------------------------------------- bf16 activations */

/* Under --precision bf16 (act_bf16.h) a block's forward works in float
 * tensors and packs them into one bf16 buffer when it ends; its backward
 * unpacks them into float again.  So the float copy of one block rides
 * on top of what is kept, and the moments differ from float's: with
 * Pe the elements a block packs (x, ln1, qkv, y, x2, ln2, fc, gelu, the
 * probabilities), Kb the bytes it keeps (2 Pe + 4 (LN statistics + CP's
 * log-sum-exps)), base what the other micro-batches and this one's
 * input hold:
 *
 *   forward, last block   base + nb Kb - 2 Pe + 4 (Pe + Rl C) + max(T_f, 2 Pe)
 *                         (its floats, its output x, then the pack)
 *   forward, the tail     base + nb Kb + x_out (4 Rl C) [+ the head's
 *                         lnf, logits, statistics] + the tail's pack
 *   backward, a block     all kept + scratch + 4 Pe + max(0, T_b - 2 Pe)
 *                         (unpacked, then the bf16 freed; one block at a
 *                         time, the head's tail already freed)
 *
 * where T_f, T_b are the block's transients (SP's gathers, CP's ring,
 * selective recomputation's probabilities).  With full recomputation the
 * backward's forward packs the blocks but not the tail.  bf16 runs one
 * chunk a stage and no deferred W (the loop's rules), so v = 1 here.
 *
 * The units' copies (zero3.c) are on top, and which of them are present
 * depends on the moment, so the moments are kept apart: the stage's ends
 * (the embedding, the head: units widened whole, gathered bf16 beside the
 * float copy at BEGIN, the float gradient beside the bf16 one at END),
 * the largest moments inside a block (its attention's transients, the
 * pack: no subunit widened), the top block's BEGIN and END, and a linear
 * layer's (its subunit widened, with its float gradient in a backward). */
typedef struct {
    double fwd, bwd;               /* the largest forward / backward moment
                                      inside the blocks                    */
    double fwd_edge, bwd_edge;     /* ... at the stage's ends: the input, the
                                      head's forward and backward          */
    double fwd_begin, bwd_begin;   /* at the last (top) block's BEGIN      */
    double bwd_end;                /* at the top block's backward END       */
    double fwd_subunit, bwd_subunit;   /* while a linear layer runs (its subunit
                                      widened): no attention transient, no
                                      pack; SP's gathered input            */
} bf16_moments;

static bf16_moments bf16_acts(const ptdp_plan_request *rq, const ptdp_plan_layout *l, const shape *s, int stage,
                              int n)
{
    const double r = sizeof(ptdp_real), h = sizeof(ptdp_bf16);
    const ptdp_recompute rc = l->recompute;
    const ptdp_plan_core core = ptdp_plan_core_of(rq, rc);
    const bool full = rc == PTDP_RECOMPUTE_FULL, sel = core == PTDP_PLAN_CORE_REDONE && s->cp == 1;
    const bool first = stage == 0, last = stage == s->pp - 1;
    const int nb = chunk_blocks(s, stage);
    const chunk_moe cm = moe_of_chunk(rq, s, stage);
    const kept k = chunk_kept(rq, s, nb, first, last, rc, cm.n * cm.m.kept_bytes);
    const double Kb = block_kept_bytes(rq, s, s->cp > 1 ? PTDP_PLAN_CORE_KEPT : core, true);
    const bool lse_kept = s->cp > 1 || core == PTDP_PLAN_CORE_TILED;   /* the ring's or the tiles' */
    const double stats = 4 * s->Rl, lse = lse_kept ? s->b * s->hl * s->Tq : 0;
    const double Pe = block_kept(rq, s, rc) - stats - lse;
    const double x = s->Rl * s->C, tail = x + (last ? s->R * s->C : 0);   /* x_out, lnf */
    const double head = last ? s->act.tail : 0;
    const double pp_bufs = (first ? 0 : r * x) + (last ? 0 : r * x);

    /* the transients inside a block's forward (allocated over its floats) */
    const ptdp_sp_buffers sp = sp_buffers(s);
    const double Tf = s->cp > 1 ? r * ring_buffers(s, false)
                                : r * ((sel ? s->b * s->hl * s->T * s->T : 0) + sp.block_fwd);
    const double Tb = backward_transient(s, rc);
    const double Th = 8 * s->R + r * sp.head;   /* picked, LN_f's gather */
    const double X = k.acts_recompute;
    bf16_moments mo = { 0 };

    /* One forward from the stage input on top of `base`; pack_tail: the
     * tail is packed at its end (not in a recomputing backward). */
    const double Kk = full ? h * x : Kb, Pk = full ? x : Pe;   /* what a block leaves packed */
#define FORWARD_EDGES(base, pack_tail)                                                             \
    fmax2((base) + r * x + (first ? r * sp.embed_fwd : 0),                                        \
          last ? (base) + nb * Kk + r * x + head + fmax2(Th, (pack_tail) ? h * (full ? x : tail) : 0) \
               : (base) + nb * Kk + r * x + ((pack_tail) ? h * x : 0))
#define FORWARD_BLOCK(base) (nb > 0 ? (base) + nb * Kk - h * Pk + r * (Pe + x) + fmax2(Tf, h * Pk) : 0)
    const double fbase = (n - 1) * (full ? X : k.acts) + (full ? X - nb * Kk - (last ? h * x : 0) : X) +
                         (last ? 0 : r * x);   /* the ones before, this one's input, the send buffer */
    mo.fwd_edge = FORWARD_EDGES(fbase, true);   /* the embedding's or the head's moments */
    mo.fwd = FORWARD_BLOCK(fbase);
    mo.fwd_begin = fbase + (nb > 0 ? (nb - 1) * Kk : 0) + r * x;
    /* a linear layer of the block (its floats allocated at its start):
     * under SP the row-parallel layer's partial sums and the gathered
     * input of the column-parallel one */
    const double sp_fwd = r * sp.linear_fwd, sp_bwd = r * sp.bwd;
    mo.fwd_subunit = nb > 0 ? fbase + nb * Kk - h * Pk + r * (Pe + x) + sp_fwd : 0;

    double bbase;   /* everything at the start of the backward, scratch included */
    double tail_kept;   /* what the tail keeps until the head's backward frees it */
    if (full) {   /* one block (or the tail) redone at a time, in float */
        bbase = n * X + backward_scratch(s) + pp_bufs;
        tail_kept = 0;
        mo.bwd = bbase - h * x + r * (Pe + stats + lse + x) + fmax2(Tf, Tb);   /* a block's floats, its output */
        mo.bwd_subunit = nb > 0 ? bbase - h * x + r * (Pe + stats + lse + x) + sp_bwd : 0;
        if (last)   /* x_out unpacked; LN_f's output (region rows), the logits, the statistics */
            mo.bwd_edge = bbase - h * x + r * x + head - r * s->R * s->C + r * s->Rl * s->C + Th;
    } else {
        bbase = n * k.acts + backward_scratch(s) + pp_bufs;
        tail_kept = h * tail;
        if (last)
            mo.bwd_edge = bbase + r * tail + fmax2(0, r * sp.bwd - h * tail);
    }
#undef FORWARD_EDGES
#undef FORWARD_BLOCK
    mo.bwd_begin = bbase - (last ? tail_kept : 0);
    mo.bwd_end = mo.bwd_begin + (nb > 0 ? r * Pe - h * Pe : 0);
    if (nb > 0)
        mo.bwd = fmax2(mo.bwd, mo.bwd_begin + r * Pe + fmax2(0, Tb - h * Pe));
    if (nb > 0 && !full)   /* unpacked, the bf16 freed */
        mo.bwd_subunit = mo.bwd_begin + r * Pe - h * Pe + sp_bwd;
    return mo;
}

/* Under bf16, the units' copies at each of the moments bf16_acts weighs
 * (its activations), added to o's params and grads; o->acts is the
 * moment's.  u is the stage's largest unit. */
static void bf16_units(const ptdp_plan_request *rq, const ptdp_plan_layout *l, const shape *s, int stage, int n,
                       double u, double moe_unit, bool blocks_here, ptdp_plan_memory *o)
{
    const double r = sizeof(ptdp_real), es = sizeof(ptdp_bf16);
    const bool first_here = stage == 0, last_here = stage == s->pp - 1;
    const double emb = tied_embed(s, first_here, last_here);
    const bf16_moments mo = bf16_acts(rq, l, s, stage, n);
    const bool z3 = s->zero->shards_params, ahead = l->overlap && z3;
    /* A block is widened subunit by subunit (zero3.c): its largest subunit's
     * float copy, and in a backward its float gradient; ZeRO-3 keeps
     * the block gathered in bf16 meanwhile and, in a backward, the
     * block's bf16 gradient the subunits round theirs into.  The
     * embeddings and the head are widened whole: their float copy (and
     * the embeddings' when the tied head is here too, for the whole
     * pass); ZeRO-3 gathers such a unit in bf16 and widens it (BEGIN).
     * Under --overlap the next unit's gathered bf16 rides ahead. */
    /* (a mixture's block has no subunits: it is widened whole; so is
     * every unit under qwZ, zero3.c: its forward rebuilt in float from
     * the INT8 wires, its backward widened from the exact gather, the
     * gathered freed once widened — the block's float copy wf through its
     * passes, beside the gathered at BEGIN, its float gradient in a
     * backward and the bf16 one beside it at END) */
    const bool whole = z3 && rq->zero_qwz > 0;
    const double ub = blocks_here ? fmax2(block_params(s), moe_unit) : 0;
    const double pb = blocks_here ? (whole ? ub : fmax2(block_subunit(s), moe_unit)) : 0;
    const double wf = whole ? ub * r : 0;
    /* (bf16 runs one chunk a stage; the tied embeddings are emb's) */
    const double uw = fmax2(first_here && !last_here ? embed_params(s) : 0,
                            last_here ? head_params(s, first_here) : 0);
    const double held = z3 && !whole ? ub * es : 0;
    const double par_subunit = held + pb * r + emb * r + (ahead ? u * es : 0);
    const double par = held + wf + emb * r + (ahead ? u * es : 0);
    const double par_edge = fmax2(held, uw * (r + (z3 ? es : 0))) + emb * r + (ahead ? u * es : 0);
    const double par_begin = held + (whole ? ub * (r + es) : 0) + emb * r;
    /* in a backward the float gradient of the subunit (block) or unit
     * (the others); under --overlap the previous unit's bf16 one, being
     * reduce-scattered: on the last stage the head's, whose backward
     * came just before; elsewhere the last unit of the micro-batch
     * before's backward (the embeddings on stage 0), if one came
     * before at this level — in 1F1B's steady state, m > n — and then
     * in a forward too.  At END ZeRO-3 rounds a whole unit's gradient
     * into a bf16 copy beside it (a block's is bf16 already). */
    const bool steady = l->micro_batches > n;   /* (GPipe's n is m: no backward before a forward) */
    const double before = steady ? (first_here ? embed_params(s) : u) * es : 0;
    const double pending = ahead ? (last_here ? head_params(s, first_here) * es : before) : 0;
    const double pending_fwd = ahead ? before : 0;
    const double gr_subunit = held + pb * r + emb * r + pending;
    const double gr = held + wf + emb * r + pending;   /* a block's BEGIN and END too */
    const double gr_edge = fmax2(held, uw * (r + (z3 ? es : 0))) + emb * r + pending;
    const double cand[9][3] = {   /* params, grads, acts */
        { par_edge, pending_fwd, mo.fwd_edge }, { par_edge, gr_edge, mo.bwd_edge },
        { par, pending_fwd, mo.fwd },         { par_begin, pending_fwd, mo.fwd_begin },
        { par, gr, mo.bwd },                  { par_begin, gr - wf, mo.bwd_begin },
        { par, gr + (whole ? ub * es : 0), mo.bwd_end },
        { par_subunit, pending_fwd, mo.fwd_subunit }, { par_subunit, gr_subunit, mo.bwd_subunit },
    };
    int best = 0;
    for (int c = 1; c < 9; c++)
        if (cand[c][0] + cand[c][1] + cand[c][2] > cand[best][0] + cand[best][1] + cand[best][2])
            best = c;
    o->params += cand[best][0];
    o->grads += cand[best][1];
    o->acts = cand[best][2];
}

/* ------------------------------------------------- one stage */

/* What a stage's chunks hold: their parameters, ZeRO-3's units, the
 * mixtures' numbers, and what their in-flight micro-batches keep at the
 * backward and the forward of the peak (kept_bwd, kept_fwd: the same
 * moment but for DualPipe's, walked from its list). */
typedef struct {
    double numel, len3, biggest_unit, other_kept;
    double hpz;                    /* hpZ's secondary pieces: 1/k of each unit */
    double kept_bwd, kept_fwd;     /* activations and deferred W's, bytes */
    mixtures mx;
    bool blocks_here, has_first, has_last;
    int in_flight;
    int ends;                      /* chunks that read the data or compute a loss */
} held;

/* The most chunks a stage whose list is walked (walk_list) may hold. */
enum { WALK_CHUNKS_MAX = 16 };

/* The schedule's lists, for a row without a closed form of what a stage
 * keeps (DualPipe's two, a schedule registered from outside): at m' =
 * min(m, m2) micro-batches, m2 the far end of the row's timing line — past
 * its warm-up each round frees what it keeps, so the counts a stage
 * reaches are those of any longer run (DualPipe's timing is a straight
 * line from 4p on, plan_time.c); without a line, m itself.  One a thread,
 * kept for the next stage and layout. */
static const ptdp_schedule *walked_schedule(const shape *s, const ptdp_plan_layout *l)
{
    static _Thread_local ptdp_schedule *kept_s;
    int m = l->micro_batches, m1, m2;
    if (s->row->line != NULL) {
        s->row->line(l->pp, s->v, &m1, &m2);
        m = m < m2 ? m : m2;
    }
    if (kept_s != NULL && kept_s->entry == s->row && kept_s->pp == l->pp && kept_s->micro_batches == m &&
        kept_s->virtual_stages == s->v)
        return kept_s;
    ptdp_schedule_destroy(kept_s);
    kept_s = NULL;
    if (ptdp_schedule_build(s->row, l->pp, m, s->v, &kept_s) != PTDP_OK)
        kept_s = NULL;
    return kept_s;
}

/* A stage's chunks kept, walked down its own list: F of chunk c adds what
 * c keeps (per[c], other[c]), a whole B frees it, a zero-bubble B trades
 * it for what its W keeps (wk[c]: both operands of every dW product,
 * wgrad.c; own[c] of them copied under the B's own transient), W frees
 * that.  The peaks: after an F (the forward that makes the most) and
 * before a B (the backward that finds the most, its own included). */
static void walk_list(const shape *s, const ptdp_plan_layout *l, int stage, const double *per,
                      const double *other, const double *wk, const double *own, held *h)
{
    const ptdp_schedule *sch = walked_schedule(s, l);
    if (sch == NULL) {   /* (the layout's check builds it first: not reached) */
        for (int c = 0; c < s->v; c++) {
            h->kept_bwd += l->micro_batches * (per[c] + wk[c]);
            h->other_kept += l->micro_batches * other[c];
        }
        h->kept_fwd = h->kept_bwd;
        h->in_flight = s->v * l->micro_batches;
        return;
    }
    double cur = 0, cur_other = 0;
    int count = 0;
    h->in_flight = 0;
    for (int i = 0; i < sch->stage[stage].count; i++) {
        const ptdp_action *a = &sch->stage[stage].actions[i];
        const int c = a->chunk;
        if (a->kind == PTDP_ACT_FORWARD) {
            cur += per[c];
            cur_other += other[c];
            count++;
            h->kept_fwd = fmax2(h->kept_fwd, cur);
            h->other_kept = fmax2(h->other_kept, cur_other);
            h->in_flight = count > h->in_flight ? count : h->in_flight;
        } else if (a->kind == PTDP_ACT_BACKWARD || a->kind == PTDP_ACT_BACKWARD_INPUT) {
            h->kept_bwd = fmax2(h->kept_bwd, cur + (a->kind == PTDP_ACT_BACKWARD_INPUT ? own[c] : 0));
            cur += (a->kind == PTDP_ACT_BACKWARD_INPUT ? wk[c] : 0) - per[c];
            cur_other -= other[c];
            count--;
        } else if (a->kind == PTDP_ACT_BACKWARD_WEIGHT) {
            cur -= wk[c];
        }
    }
}

static held stage_chunks(const ptdp_plan_request *rq, const ptdp_plan_layout *l, const shape *s, int stage, int n)
{
    const double r = sizeof(ptdp_real);
    const bool full = l->recompute == PTDP_RECOMPUTE_FULL;
    const int v = s->v;
    held h = { .in_flight = n };
    double acts_kept = 0, wgrad = 0, per[WALK_CHUNKS_MAX] = { 0 }, other[WALK_CHUNKS_MAX] = { 0 },
           wk[WALK_CHUNKS_MAX] = { 0 }, own[WALK_CHUNKS_MAX] = { 0 };
    /* The chunks of this stage (model chunk c p + stage of the p v; in a V
     * or two copies, pp_layout.h's): their parameters, ZeRO-3's units,
     * what their in-flight micro-batches keep. */
    for (int c = 0; c < v; c++) {
        const int g = ptdp_pp_layout_global(&s->lay, stage, c), nb = chunk_blocks(s, g);
        int at, of;
        within_copy(s, g, &at, &of);
        const bool first = at == 0, last = at == of - 1;
        h.has_first |= first;
        h.has_last |= last;
        h.ends += first || last;
        const double units[3] = { first ? embed_params(s) : 0, last ? head_params(s, first) : 0, block_params(s) };
        const chunk_moe cm = moe_of_chunk(rq, s, g);
        h.numel += units[0] + units[1] + nb * units[2];
        h.numel += add_mixtures(&h.mx, &cm, units[2]);
        for (int u = 0; u < 3; u++) {
            const double chunk = ptdp_zero_price_shard(units[u], s->ndp);   /* rank 0's */
            h.len3 += (u == 2 ? nb : units[u] > 0) * chunk;
            if (s->hpz > 1)   /* rank 0's piece, ptdp_share's rounding */
                h.hpz += (u == 2 ? nb : units[u] > 0) * ptdp_zero_price_shard(units[u], s->hpz);
            if (units[u] > h.biggest_unit && (u < 2 || nb > 0))
                h.biggest_unit = units[u];
        }
        h.blocks_here |= nb > 0;
        const kept k = chunk_kept(rq, s, nb, first, last, l->recompute, cm.n * cm.m.kept_bytes);
        /* a mixture's W keeps, for the dense feed-forward's layers, the
         * router's operands and each routed row's through its expert's
         * layers: rows x (in + out) a linear, as every one's (the model's
         * count, model_plan.h) */
        const double w1 = wgrad_kept(s, nb, first, last) + cm.n * r * cm.m.wgrad;
        if (s->walk) {
            per[c] = full ? k.acts_recompute : k.acts;
            other[c] = k.other;
            wk[c] = w1;
            /* a zero-bubble B copies its mixture's dW operands under the
             * mixture's backward transient: the experts' and the router's */
            own[c] = cm.n > 0 ? r * cm.m.wgrad_own : 0;
            continue;
        }
        const int nc = v == 1 ? n : in_flight(s, l->micro_batches, stage, c);
        acts_kept += nc * (full ? k.acts_recompute : k.acts);
        h.other_kept += nc * k.other;
        if (v == 1)
            wgrad = deferred(s, l->micro_batches, stage) * w1;
    }
    h.kept_bwd = h.kept_fwd = acts_kept + wgrad;
    if (s->walk)
        walk_list(s, l, stage, per, other, wk, own, &h);
    return h;
}

/* Model states (the header's table, ZeRO's row's price): its share of
 * the stage's numel elements — all of them; one shard of each unit
 * (ZeRO-3); or ZeRO 1 and 2's ceil over dp cp copies, the experts' over
 * their own copies, the expert-DP group (dp cp / ep of them). */
static void model_states(const ptdp_plan_request *rq, const shape *s, const held *h, ptdp_plan_memory *o)
{
    const ptdp_zero_stage *row = s->zero;
    const double numel = h->numel, experts = h->mx.experts;
    const double share = !row->shards_optim ? numel
                       : row->shards_params ? h->len3
                                            : ptdp_zero_price_shard(numel - experts, s->ndp) +
                                                  ptdp_zero_price_shard(experts, s->nedp);
    const int slots = rq->optimizer == PTDP_OPT_ADAMW ? 2 : sgd_momentum > 0 ? 1 : 0;   /* moments a parameter */
    const ptdp_zero_bytes b = ptdp_zero_device_states(row, numel, share, ptdp_zero_sizes_of(rq->bf16, slots));
    o->params = b.params;
    o->grads = b.grads;
    o->optim = b.optim;
    o->psi = numel;
    o->psi_experts = experts;
}

/* Activations in float: n micro-batches kept, and on top either the
 * backward of one (its recomputed forward, scratch, the pipeline's
 * gradient buffers, the largest op transient) or the forward that makes
 * the n-th (its send buffer, the largest forward transient).  first_here,
 * last_here: no activation received / sent; tail_here: the head and the
 * loss are here.  Into o->acts, and the backward's transient into o->comm;
 * true when the backward's moment is the peak. */
static bool float_acts(const ptdp_plan_layout *l, const shape *s, const held *h,
                       bool first_here, bool last_here, bool tail_here, ptdp_plan_memory *o)
{
    const double r = sizeof(ptdp_real);
    const mixtures *mx = &h->mx;
    /* a mixture's block redone keeps its rows too; its exchanges and
     * stacked rows are the largest transients of its passes */
    const double recomputed = l->recompute == PTDP_RECOMPUTE_FULL ? redone(s, tail_here) + fmax2(0, mx->block) : 0;
    const double pp_bufs = (first_here ? 0 : r * s->Rl * s->C) + (last_here ? 0 : r * s->Rl * s->C);
    const double backward = h->kept_bwd + recomputed + backward_scratch(s) + pp_bufs;
    const double backward_comm = fmax2(backward_transient(s, l->recompute), mx->bwd);
    const double forward = h->kept_fwd + fmax2(forward_transient(s, first_here, tail_here), mx->fwd) +
                           (last_here ? 0 : r * s->Rl * s->C);
    const bool in_backward = backward + backward_comm >= forward;
    o->acts = in_backward ? backward : forward;
    o->comm = in_backward ? backward_comm : 0;
    return in_backward;
}

/* An untied head is a unit of its own, the first a backward meets on the
 * stage that holds it, and the tail (the head's input, the logits) stays
 * until that backward ends.  So the backward's peak is one of two moments,
 * in elements of the units present (float copies, or ZeRO-3's gathered
 * units) and of their float gradients:
 *
 *   the head's backward     the head, and under ZeRO-3 with --overlap the
 *                           top block prefetched; the head's gradient
 *   the top block's         the block, and the next one prefetched; its
 *                           gradient, and the head's still being
 *                           reduce-scattered; the tail freed
 *
 * whichever holds more (u the stage's largest unit, head the head's, tail
 * its bytes).  Bytes into *params, *grads; *less the activations freed at
 * that moment (the tail, or 0). */
static void untied_head_units(double head, double u, double tail, bool prefetch, double *params, double *grads,
                              double *less)
{
    const double r = sizeof(ptdp_real);
    const double a_p = head + (prefetch ? u : 0), a_g = head;
    const double b_p = u + (prefetch ? u : 0), b_g = u + (prefetch ? head : 0);
    const bool first = r * (a_p + a_g) >= r * (b_p + b_g) - tail;
    *params = r * (first ? a_p : b_p);
    *grads = r * (first ? a_g : b_g);
    *less = first ? 0 : tail;
}

/* The units present beside the activations of the moment float_acts found
 * (backward: their gradients too), added to o.  ZeRO-3 in float: the unit
 * computing, gathered (zero3.c; ptdp_zero3_price_units).  bf16 with float
 * activations (a model that keeps them in float, rounded where made: not
 * packs_bf16): a unit widened whole into a float copy at its BEGIN
 * (mixed.h) and, in a backward, a float gradient beside it; under ZeRO-3
 * gathered in bf16 first (under --overlap the next one too).  A tied
 * embedding read through the pass is held as well; an untied head is met
 * first (untied_head_units). */
static void float_units(const ptdp_plan_request *rq, const ptdp_plan_layout *l, const shape *s, const held *h,
                        bool tail_here, bool backward, ptdp_plan_memory *o)
{
    const double r = sizeof(ptdp_real), es = sizeof(ptdp_bf16), u = h->biggest_unit;
    const double emb = tied_embed(s, h->has_first, h->has_last);
    const bool z3 = s->zero->shards_params, bf16 = rq->bf16;
    if (!z3 && !bf16)
        return;
    double p, g, less = 0;
    const bool untied = !s->par.tied && tail_here && backward;
    if (untied)
        untied_head_units(head_params(s, h->has_first), u, s->act.tail, z3 && l->overlap && !bf16, &p, &g, &less);
    else if (!bf16)
        ptdp_zero3_price_units(u, emb, l->overlap, r, r, &p, &g);
    else {
        p = r * (u + emb);
        g = backward ? r * (u + emb) : 0;
    }
    if (bf16 && z3)   /* the units gathered in bf16 (and the next) beside the float copy */
        p += es * u * (l->overlap ? 2 : 1);
    o->params += p;
    o->grads += g;
    o->acts -= less;
}

/* qgZ's sum of a unit of u elements (zero3_qgz.c), in the backward after
 * the unit's: the wires of N slots each way, slot(L) = ⌈L b/8⌉ + ⌈L/B⌉ R
 * for shards of L = ⌈u/N⌉, the nodes' sums and one's own (N/k + 1) L R,
 * and one shard's codes and scales. */
static double qgz_transient(const shape *s, double u)
{
    if (s->qgz_bits <= 0 || s->qgz_node < 1)
        return 0;
    const double r = sizeof(ptdp_real), N = s->ndp, L = ceil(u / N), blocks = ceil(L / PTDP_QGZ_BLOCK);
    const double slot = ceil(L * s->qgz_bits / 8.0) + blocks * r;
    return 2 * N * slot + (N / s->qgz_node + 1) * L * r + L + blocks * r;
}

static void stage_memory(const ptdp_plan_request *rq, const ptdp_plan_layout *l, const shape *s, int stage,
                         ptdp_plan_memory *o)
{
    const double r = sizeof(ptdp_real);
    const ptdp_zero_stage *row = s->zero;
    const bool bf16 = rq->bf16;
    const int p = s->pp, v = s->v;
    const int n = in_flight(s, l->micro_batches, stage, -1);
    memset(o, 0, sizeof *o);
    o->stage = stage;

    const held h = stage_chunks(rq, l, s, stage, n);
    const double numel = h.numel, es = bf16 ? 2 : r;
    o->in_flight = h.in_flight;
    /* the stage's ends: no activation received / sent (pp_bufs) on the
     * first / last stage of one chunk each; the tail (head, loss) where
     * the model's last chunk is */
    const bool ring = s->lay.shape == PTDP_CHUNKS_RING;
    const bool first_here = stage == 0 && v == 1, last_here = ring && stage == p - 1;
    const bool tail_here = ring ? last_here : h.has_last;

    model_states(rq, s, &h, o);
    o->params += h.hpz * es;   /* hpZ's pieces, in the store's type, alive from a forward to the step's end */
    const double params_rest = o->params;
    /* ZeRO-2's reduce bucket lives through each backward (zero2.grad_bucket) */
    const double bucket = row->grad_bucket ? numel * es : 0;
    if (!s->packed) {   /* float activations; ZeRO-3's units (float_units, under bf16 too) */
        const bool backward = float_acts(l, s, &h, first_here, last_here, tail_here, o);
        o->comm += bucket + qgz_transient(s, h.biggest_unit);
        float_units(rq, l, s, &h, tail_here, backward, o);
    } else {   /* its own moments, transients included (in acts), and the units' copies at each */
        bf16_units(rq, l, s, stage, n, h.biggest_unit, h.mx.unit, h.blocks_here, o);
        o->comm = bucket + h.mx.bwd;   /* a mixture's backward transient, its rows float */
    }
    /* the data, in every chunk that reads it or computes a loss (a ring's
     * one chunk a stage: once, even when it is both) */
    const int copies = ring ? h.has_first || h.has_last : h.ends;
    o->other = copies * data_bytes(&rq->model) + h.other_kept;
    o->params_units = o->params - params_rest;
    o->total = o->params + o->grads + o->optim + o->acts + o->comm + o->other;
    /* DualPipe under a sharding ZeRO row, after the pipeline: every tensor
     * made whole at once before the mirror's sums (zero.c sum_groups_whole) */
    const double whole = ptdp_pp_layout_copies(&s->lay) == 2 && row->shards_optim ? numel * r : 0;
    if (whole > 0 && o->params + o->grads + o->optim + o->other + whole > o->total) {
        o->acts = 0;
        o->comm = whole;
        o->total = o->params + o->grads + o->optim + o->other + whole;
    }
}

int ptdp_plan_memory_of(const ptdp_plan_request *rq, const ptdp_plan_layout *l, ptdp_plan_memory *out)
{
    if (rq == NULL || l == NULL || out == NULL || ptdp_model_of(&rq->model)->plan == NULL || l->tp < 1 ||
        l->pp < 1 || l->dp < 1 || l->micro_batch_size < 1 || l->micro_batches < 1)
        return PTDP_EINVAL;
    pthread_once(&train_once, read_train_defaults);
    const shape s = shape_of(rq, l);
    if (s.zero == NULL)
        return PTDP_EINVAL;
    memset(out, 0, sizeof *out);
    out->total = -1;
    /* With one chunk a stage and no deferred W, the stages between the
     * first and the last differ only in what they hold less of further
     * down (in-flight count, and blocks when p does not divide L): stage 1
     * stands for them all.  Otherwise every stage is weighed. */
    const bool monotone = ptdp_plan_monotone(l);
    if (s.walk && s.v > WALK_CHUNKS_MAX)
        return PTDP_EINVAL;   /* more chunks a stage than a walk keeps apart */
    for (int stage = 0; stage < l->pp; stage++) {
        if (monotone && stage > 1 && stage < l->pp - 1)
            stage = l->pp - 1;
        ptdp_plan_memory m;
        stage_memory(rq, l, &s, stage, &m);
        if (m.total > out->total)
            *out = m;
    }
    return PTDP_OK;
}
