/*
 * plan_time.c — the step time of a layout, as `ptdp train`'s virtual clock
 * would measure it, without running it.
 *
 * The clock (clock.h) charges compute as flops / peak, a message
 * alpha + bytes / beta, and a collective its ring's steps once the last
 * member arrives.  One step of a layout is then, on every device:
 *
 *   pipeline phase   the schedule's actions, each F / B / W the model's
 *                    charges (model_plan.h) at the layout's shapes, plus the
 *                    collectives that block the compute stream inside it:
 *                      TP   2 all-reduces a block forward, 2 backward (g, f)
 *                           R C values each; under SP an all-gather and a
 *                           reduce-scatter in place of each (same bytes),
 *                           and in the backward ln_1's and ln_2's kept
 *                           shards gathered again for dW (--overlap: under
 *                           dX's product, only the excess exposed);
 *                           the embedding's g, the loss's 3 all-reduces of R
 *                           doubles, the head's f
 *                      CP   the ring: cp - 1 passes of K, V forward
 *                           (R 2 Cl values), cp - 1 of K, V and their
 *                           gradient backward and one home (2 messages
 *                           of time a pass: even ranks send first)
 *                      ZeRO-3  every unit gathered before its forward and
 *                           backward, its gradient reduce-scattered after
 *                           (--overlap: the next unit's gather under this
 *                           unit's compute, on the communication stream);
 *                           its options priced by shard_price.c: HSDP over
 *                           the shard group (and the shard all-reduced
 *                           across the replicas once a step), hpZ's
 *                           backward gathers inside the node, qwZ's
 *                           forward ones as INT8, qgZ's two all-to-alls
 *                      ZeRO-2  the gradient reduce-scattered after every
 *                           backward (--overlap: on the stream)
 *                      EP   a mixture of experts' block (model_plan.h,
 *                           uniform routing): forward the counts and two
 *                           all-to-alls (dispatch, combine), backward two,
 *                           each moving (ep-1)/ep of the routed rows on the
 *                           link level the EP group spans; TP's all-reduce
 *                           of the experts' outputs on the rows they ran
 *                      full recompute: each block's forward again inside
 *                           its backward (and the tail's, from LN_f to the
 *                           loss; not the embedding's), under the gather
 *                           ZeRO-3 makes for that backward: no bytes more
 *                    and the activation messages between stages
 *                    (alpha + bytes / beta, charged to the sender: comm.c);
 *                    the makespan is the schedule played with these costs —
 *                    DualPipe's overlapped F&B pair (pair.h) as the pair
 *                    rule: its F's compute, then max(its B's compute, both
 *                    halves' EP all-to-alls less F's compute)
 *                    (ptdp_pair_backward_time), the all-to-alls on the
 *                    communication stream, under the partner's compute
 *   once a step      DP: the gradient buckets' all-reduces (--overlap:
 *                    started in the last backward, what is left exposed)
 *                    or ZeRO's reduce-scatter — the experts' buckets over
 *                    the expert-DP group (dp cp / ep); SP's LayerNorm gradients
 *                    over TP; the tied embedding between the first and
 *                    last stages; the gradient norm's all-reduces over DP,
 *                    TP and PP (every device waits for the slowest stage);
 *                    AdamW on this device's share; ZeRO-1's all-gathers
 *                    (one a bucket, as its reduce-scatters), ZeRO-2's one;
 *                    DualPipe's mirror: every tensor all-reduced over the
 *                    two devices holding the same stages (mirror_sum)
 *
 *   stage 0  ▇F▇F▇F▇B▇F▇B▇F▇B▇ B ▇ B ▇ ░DP░ │norm│ ▇opt▇ ░gather░
 *   stage 1     ▇F▇F▇B▇F▇B▇F▇B▇F▇B▇ B ▇ ░DP░ │norm│ ▇opt▇ ░gather░
 *            └──────── makespan of the schedule ───────┘
 *
 * Each parallelism prices its own part (src/parallel/price_impl.h: TP and
 * SP tp_price.c, CP cp_price.c, EP ep_price.c, DP's buckets and DualPipe's
 * mirror dp_price.c, ZeRO its row in zero_stages.c, the schedules their
 * registry rows); this file lays out the units and the groups, plays the
 * schedule and adds the terms up, in an order that never changes.
 *
 * The groups are the mesh's (mesh_price.c: tp fastest in the world rank,
 * so a TP group of tp <= GPUs per node stays inside one node); a message
 * between stages crosses nodes when the stages' ranks do.
 *
 * Model FLOPs a step (Narayanan et al. 2021, the MFU count):
 *     72 B s l h^2 (1 + s / 6h + V / 12 l h)
 * hardware FLOPs, what the run computes: with full recomputation the
 * forward again (the paper's 96 B s l h^2 (1 + s/6h + V/16lh), and ptdp
 * runs the head's forward again too: + 2 B s h V); with selective
 * recomputation the attention core's forward again, + 4 B s^2 h l.
 */
#include "ptdp/plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/ep.h"
#include "ptdp/error.h"
#include "ptdp/fp8_quant.h"
#include "ptdp/schedule.h"
#include "ptdp/types.h"
#include "ptdp/model_plan.h"
#include "ptdp/models.h"
#include "parallel/price_impl.h"
#include "parallel/schedule_impl.h"
#include "plan/plan_impl.h"

#define REAL ((double)sizeof(ptdp_real))

/* ------------------------------------------------------------ the groups */

/* The layout's groups are the mesh's price (mesh_price.c): the devices
 * in each and the nodes they span. */

static double dp_coll(const ptdp_price_mesh *m, ptdp_coll op, double bytes)
{
    return ptdp_price_collective(&m->dp_group, op, bytes);
}

/* Whether the experts' gradients have a group of their own: under EP, or
 * under MoE parallel folding (whose expert-DP group spans the TP slices). */
static bool experts_apart(const ptdp_price_mesh *m)
{
    return m->ep > 1 || m->slices > 1;
}

/* The group a gradient is summed in: DP's, or the experts' copies. */
static const ptdp_price_group *grad_group(const ptdp_price_mesh *m, bool experts)
{
    return experts && experts_apart(m) ? &m->edp_group : &m->dp_group;
}

/* ------------------------------------------------ one model chunk's work */

/* A model chunk (a stage, or one interleaved chunk of it): its units in
 * forward order (the embeddings, each block, the head), each with its
 * compute-stream time forward and backward (charges and blocking
 * collectives), its parameters, and what ZeRO-3 moves for it. */
typedef enum { UNIT_EMBED, UNIT_BLOCK, UNIT_HEAD } unit_kind;

typedef struct {
    unit_kind kind;
    double fwd, bwd, bwd_in, w;   /* seconds on the compute stream       */
    double numel;                  /* parameters (this TP rank's)         */
    double tensors;                /* its parameter tensors               */
    double experts;                /* of them, a mixture's experts        */
    double local, Fe, E;           /* a mixture: experts here, their width, the router's rows */
    bool tied_copy;                /* the head: the embeddings' matrix here too (tied) */
    double gather, rs;             /* ZeRO-3: all-gather, reduce-scatter  */
    double gather_b;               /* ... the backward's gather (hpZ's in the node) */
    ptdp_shard_unit sh;            /* ... their bytes by link level (shard_price.c) */
    double gather_amax;            /* ... and under --fp8-comm the amaxes'
                                      all-reduces before each gather, which
                                      hold the compute stream (zero3_gather) */
} unit_cost;

typedef struct {
    int nunits;
    unit_cost *u;
    double numel;                  /* the chunk's parameters              */
    double tensors;                /* its parameter tensors               */
    double f, b, bi, w;            /* one micro-batch                     */
    double tp_f, tp_b, cp_f, cp_b; /* of which TP and CP collectives      */
    double ep_f, ep_b;             /* and the experts' all-to-alls        */
    double a2a_f, a2a_b;           /* of f and b, what an overlapped pair runs on
                                      the communication stream (the all-to-alls,
                                      a recomputed forward's in b)           */
} chunk_cost;

typedef struct {
    const ptdp_plan_request *rq;
    const ptdp_plan_layout *l;
    const ptdp_zero_stage *zero;   /* the layout's ZeRO row (zero.h)       */
    ptdp_price_mesh mesh;
    ptdp_plan_dims shape;          /* a micro-batch on one device          */
    ptdp_plan_params par;          /* the model's parameters on a TP rank  */
    ptdp_plan_flops fl, fl_split;  /* its work; B without dW (split)        */
    double peak, store;            /* flop/s; bytes of a stored parameter */
    double S;                      /* a block's activation, R C reals: bytes */
    bool full, z3, split_bw, sp;
    ptdp_pp_layout lay;            /* the chunks round a ring, in a V, or two copies */
    int v;                         /* chunks a stage: ptdp_plan_chunks        */
    ptdp_plan_moe mo, ms;          /* a mixture's block (every one's alike), and
                                      split (B without the deferred dW)        */
    ptdp_price_fb tp_block, cp_ring;   /* a block's TP (or SP) collectives and
                                      CP's ring: every block's, priced once    */
    double fp8_codes, fp8_amaxes;  /* --fp8-comm under ZeRO-3: a dense block's
                                      quantized weights' elements, sent as
                                      codes, and their amaxes (zero3_gather) */
    ptdp_shard_options zo;         /* ZeRO-3's groups and options (HSDP, ZeRO++) */
} ctx;

/* The model chunk of stage st's chunk k (schedule.h). */
static int chunk_at(const ctx *x, int st, int k)
{
    return ptdp_pp_layout_global(&x->lay, st, k);
}

/* The same in the order DP's buckets meet a stage's chunks: DualPipe's
 * device walks its flat gradient from the end, its chunk 1 first (the
 * interleaved ring's order, chunk 0 first, is kept as it was priced). */
static int chunk_flat(const ctx *x, int st, int k)
{
    return chunk_at(x, st, x->lay.shape == PTDP_CHUNKS_RING ? k : x->v - 1 - k);
}

/* The stage that holds model chunk g (ptdp_chunk_place). */
static int stage_of(const ctx *x, int g)
{
    int stage, chunk;
    ptdp_pp_layout_place(&x->lay, g, &stage, &chunk);
    return stage;
}

/* Model chunk g within its copy of the model: chunk *k of *n (DualPipe's two
 * copies: a stage of a model cut in pp; else a chunk of pp v). */
static void within_copy(const ctx *x, int g, int *k, int *n)
{
    *n = ptdp_pp_layout_chunks(&x->lay);
    *k = g % *n;
}

/* Does stage st hold a copy's first chunk (the embeddings) / last (the head)? */
static bool holds_end(const ctx *x, int st, bool last)
{
    for (int c = 0; c < x->v; c++) {
        int k, n;
        within_copy(x, chunk_at(x, st, c), &k, &n);
        if (k == (last ? n - 1 : 0))
            return true;
    }
    return false;
}

static double secs(const ctx *x, double flops)
{
    return flops / x->peak;
}

/* Blocks of model chunk g of P: layers / P, the first layers % P one more. */
static int chunk_layers(int layers, int P, int g)
{
    return layers / P + (g < layers % P ? 1 : 0);
}

/* A unit's parameters: its tensors' elements, added up. */
static double unit_params(const ptdp_plan_tensors *t)
{
    double n = 0;
    for (int j = 0; j < t->n; j++)
        n += t->size[j];
    return n;
}

/* The forward's two all-to-alls, the dispatch and the combine: each
 * `a2a`, the rows in reals — or under --fp8-comm with a recipe of tiles
 * along the rows (EP runs no other) the dispatch as ptdp train
 * --fp8-comm sends it, each row C codes and its tiles' scales (ep.h). */
static double forward_exchanges(const ctx *x, double kept, double C, double a2a)
{
    const ptdp_fp8_recipe *r = x->rq->fp8;
    if (!x->rq->fp8_comm || r == NULL || r->whole_tensor || x->mesh.ep < 2)
        return 2 * a2a;
    const double tiles = (ptdp_ep_fp8_row_bytes(r, (int)C) - C) / (double)sizeof(ptdp_real);
    return ptdp_ep_price_dispatch_fp8(&x->mesh.ep_group, kept, C, tiles) + a2a;
}

/* MoE parallel folding (moe_fold.c): the fold group's all-gather that
 * rebuilds the TP group's rows from its slices, the block's output
 * forward, its input gradient backward, S bytes whole; 0 without. */
static double fold_gather(const ctx *x)
{
    return x->mesh.slices > 1 ? ptdp_price_collective(&x->mesh.fold_group, PTDP_COLL_ALL_GATHER, x->S) : 0;
}

/* A mixture of experts' block (model_plan.h, uniform routing): the
 * block beside its experts and the experts on their rows, the attention's
 * TP all-reduce and the experts' on their rows (tp_price.c), CP's ring,
 * and expert parallelism's exchanges (ep_price.c): forward the counts,
 * the dispatch and the combine (and under CP the counts summed over the
 * sequence); backward the two all-to-alls again. */
static void moe_unit(const ctx *x, unit_cost *u, chunk_cost *pc, ptdp_price_fb cp)
{
    const ptdp_plan_dims *s = &x->shape;
    const ptdp_price_mesh *m = &x->mesh;
    const ptdp_plan_moe mo = x->mo, ms = x->ms;
    const double tp = ptdp_tp_price_moe_block(&m->tp_group, &m->etp_group, x->S, mo.here * s->C * REAL, mo.shared_bytes) +
                      fold_gather(x);
    const ptdp_ep_price ep = ptdp_ep_price_block(&m->ep_group, &m->cp_group, mo.kept, mo.local, mo.E, s->b, s->C,
                                                 x->rq->bf16 ? 2.0 : REAL);   /* bf16: the rows as bf16 (ep.h) */
    const double a2a_f = forward_exchanges(x, mo.kept, s->C, ep.a2a);
    u->kind = UNIT_BLOCK;
    u->fwd = secs(x, mo.fwd + mo.here * mo.row_fwd) + tp + cp.f + ep.counts + a2a_f + ep.cp_counts;
    u->bwd = secs(x, mo.bwd + mo.here * mo.row_bwd) + tp + cp.b + 2 * ep.a2a;
    u->bwd_in = secs(x, ms.bwd + ms.here * ms.row_bwd) + tp + cp.b + 2 * ep.a2a;
    u->w = x->split_bw ? secs(x, ms.w) : 0;
    u->experts = mo.local * mo.params_expert;
    u->numel = mo.params_dense + u->experts;
    u->tensors = mo.tensors;
    u->local = mo.local;
    u->Fe = mo.Fe;
    u->E = mo.E;
    pc->tp_f += tp;
    pc->tp_b += tp;
    pc->cp_f += cp.f + ep.cp_counts;
    pc->cp_b += cp.b;
    pc->ep_f += ep.counts + a2a_f;
    pc->ep_b += 2 * ep.a2a;
}

/* The embeddings' unit: its tensors (the model's), the vocab-parallel
 * embedding's TP (or SP) collectives. */
static void embed_unit(const ctx *x, unit_cost *u, chunk_cost *pc)
{
    const ptdp_plan_flops *f = &x->fl, *fb = x->split_bw ? &x->fl_split : &x->fl;
    const ptdp_price_fb tp = ptdp_tp_price_embed(&x->mesh.tp_group, x->S, x->sp);
    u->kind = UNIT_EMBED;
    u->fwd = secs(x, f->embed_fwd) + tp.f;
    u->bwd = secs(x, f->embed_bwd) + tp.b;
    u->bwd_in = secs(x, fb->embed_bwd) + tp.b;
    u->w = x->split_bw ? secs(x, f->embed_w) : 0;
    u->numel = unit_params(&x->par.embed);
    u->tensors = x->par.embed.n;
    pc->tp_f += tp.f;
    pc->tp_b += tp.b;
}

/* A dense block: its work, its TP (or SP) collectives and CP's ring. */
static void block_unit(const ctx *x, unit_cost *u, chunk_cost *pc, ptdp_price_fb tp, ptdp_price_fb cp)
{
    const ptdp_plan_flops *f = &x->fl, *fb = x->split_bw ? &x->fl_split : &x->fl;
    u->kind = UNIT_BLOCK;
    u->fwd = secs(x, f->block_fwd) + tp.f + cp.f;
    u->bwd = secs(x, f->block_bwd) + tp.b + cp.b;
    u->bwd_in = secs(x, fb->block_bwd) + tp.b + cp.b;
    u->w = x->split_bw ? secs(x, f->block_w) : 0;
    u->numel = unit_params(&x->par.block);
    u->tensors = x->par.block.n;
    pc->tp_f += tp.f;
    pc->tp_b += tp.b;
    pc->cp_f += cp.f;
    pc->cp_b += cp.b;
}

/* The final norm, the head (a tied head: the embeddings' matrix again
 * when they are elsewhere) and the loss, with their TP (or SP)
 * collectives. */
static void head_unit(const ctx *x, unit_cost *u, chunk_cost *pc, bool first)
{
    const ptdp_plan_dims *s = &x->shape;
    const ptdp_plan_flops *f = &x->fl, *fb = x->split_bw ? &x->fl_split : &x->fl;
    const ptdp_price_fb tp =
        ptdp_tp_price_head(&x->mesh.tp_group, x->S, s->R, x->sp, x->l->overlap, secs(x, f->sp_dx_head));
    u->kind = UNIT_HEAD;
    u->fwd = secs(x, f->head_fwd) + tp.f;
    u->bwd = secs(x, f->head_bwd + f->lnf_bwd) + tp.b;
    u->bwd_in = secs(x, fb->head_bwd + fb->lnf_bwd) + tp.b;
    u->w = x->split_bw ? secs(x, f->head_w) : 0;
    u->tied_copy = x->par.tied && !first;
    u->numel = unit_params(&x->par.head) + (u->tied_copy ? (double)s->Vl * s->C : 0);
    u->tensors = x->par.head.n + (u->tied_copy ? 1 : 0);
    pc->tp_f += tp.f;
    pc->tp_b += tp.b;
}

/* Does ZeRO-3 gather this unit in FP8 (--fp8-comm: a dense block, whose
 * weights the model's fp8 list gives; the embeddings, the head and a
 * mixture's block gather as before)? */
static bool fp8_gathered(const ctx *x, const unit_cost *u)
{
    return x->z3 && x->rq->fp8_comm && x->rq->fp8 != NULL && u->kind == UNIT_BLOCK && u->E == 0;
}

/* ZeRO-3's gather of a unit before its forward and its backward: its
 * parameters in the store's type (2 B bf16, 4 B float) — or under
 * --fp8-comm (zero3_fp8.c) each element of a weight FP8 quantizes as its
 * E4M3 code (1 B) and the rest in the store's type,
 *
 *     ψ_q codes + (ψ − ψ_q) store      in place of   ψ store
 *
 * after an all-reduce (MAX) over the ZeRO group of those weights' amaxes,
 * one a weight (tensorwise, delayed) or a tile (blockwise 128 x 128,
 * mxfp8 1 x 32), and with one scale a weight split over TP one over TP,
 * so that every shard quantizes by the whole weight's scales.  Those
 * all-reduces block the compute stream (*amax); the gather may run on
 * the communication stream (--overlap).  (Each rank's part is padded to
 * the largest one's: not priced.) */
static double zero3_gather(const ctx *x, unit_cost *u, double *amax)
{
    *amax = 0;
    if (!fp8_gathered(x, u))
        return u->sh.gather_f.s;   /* shard_price.c: exact, or qwZ's INT8 */
    *amax = dp_coll(&x->mesh, PTDP_COLL_ALL_REDUCE, x->fp8_amaxes * REAL);
    if (x->rq->fp8->whole_tensor)
        *amax += ptdp_price_collective(&x->mesh.tp_group, PTDP_COLL_ALL_REDUCE, x->fp8_amaxes * REAL);
    const double wire = x->fp8_codes + (u->numel - x->fp8_codes) * x->store;
    u->sh.gather_f = u->sh.gather_b = ptdp_shard_price_link(&x->zo.zero, PTDP_COLL_ALL_GATHER, wire, x->zo.kd);
    return dp_coll(&x->mesh, PTDP_COLL_ALL_GATHER, wire);
}

/* The block's FP8 weights (ptdp_plan_params) for zero3_gather: their
 * elements, and their amaxes by the recipe's weight tile (0: whole along
 * that side; one scale a tensor: one tile). */
static void fp8_block_weights(ctx *x)
{
    const ptdp_fp8_recipe *r = x->rq->fp8;
    x->fp8_codes = x->fp8_amaxes = 0;
    for (int j = 0; r != NULL && j < x->par.fp8_weights; j++) {
        const double rows = x->par.fp8_rows[j], cols = x->par.fp8_cols[j];
        const double tr = r->weight_tile[0] > 0 ? r->weight_tile[0] : rows;
        const double tc = r->weight_tile[1] > 0 ? r->weight_tile[1] : cols;
        x->fp8_codes += rows * cols;
        x->fp8_amaxes += r->whole_tensor ? 1 : ceil(rows / tr) * ceil(cols / tc);
    }
}

/* The units of model chunk g of P and its F, B (and B, W split) times:
 * the embeddings on the first chunk, its blocks (a mixture's priced as
 * one, moe_unit), the head on the last; full recomputation redoes each
 * unit's forward inside its backward (not the embeddings'), ZeRO-3
 * gathers each unit and reduce-scatters its gradient. */
static int chunk_of(const ctx *x, int g, int P, chunk_cost *pc)
{
    const bool first = g == 0, last = g == P - 1;
    const int L = x->rq->model.layers, n = chunk_layers(L, P, g);
    memset(pc, 0, sizeof *pc);
    pc->nunits = n + first + last;
    pc->u = calloc((size_t)pc->nunits, sizeof *pc->u);
    if (pc->u == NULL)
        return PTDP_ENOMEM;
    int k = 0;
    if (first)   /* with one chunk also the head */
        embed_unit(x, &pc->u[k++], pc);
    const ptdp_price_fb tp = x->tp_block, cp = x->cp_ring;
    const int layer0 = g * (L / P) + (g < L % P ? g : L % P);
    for (int i = 0; i < n; i++) {
        if (ptdp_plan_moe_blocks(x->rq, layer0 + i, 1) > 0)
            moe_unit(x, &pc->u[k++], pc, cp);
        else
            block_unit(x, &pc->u[k++], pc, tp, cp);
    }
    if (last)
        head_unit(x, &pc->u[k++], pc, first);
    for (int i = 0; i < pc->nunits; i++) {
        unit_cost *u = &pc->u[i];
        if (x->full && u->kind != UNIT_EMBED) {   /* its forward again, inside its backward */
            u->bwd += u->fwd;
            u->bwd_in += u->fwd;
        }
        pc->numel += u->numel;
        pc->tensors += u->tensors;
        if (x->z3) {   /* ZeRO-3's three collectives (shard_price.c), the gathers by their time */
            u->sh = ptdp_shard_price_unit(&x->zo, u->numel);
            u->gather = zero3_gather(x, u, &u->gather_amax);
            u->gather_b = fp8_gathered(x, u) ? u->gather : u->sh.gather_b.s;
            u->rs = u->sh.reduce.s;
        }
    }
    return PTDP_OK;
}

/* A model chunk's pass, forward (which 0), backward (1) or its input half
 * (2): its units one after another, under ZeRO-3 each gathered first
 * and, in a backward, its gradient reduce-scattered after (zero_stages.c's
 * walk: with --overlap prefetched on the communication stream). */
static double unit_time(const unit_cost *u, int which)
{
    return which == 0 ? u->fwd : which == 1 ? u->bwd : u->bwd_in;
}

static double walk_units(const ctx *x, const chunk_cost *pc, int which)
{
    const bool backward = which != 0;
    const int n = pc->nunits;
    double t = 0;
    if (!x->z3) {
        for (int i = 0; i < n; i++)
            t += unit_time(&pc->u[i], which);
        return t;
    }
    ptdp_zero3_walk w;
    ptdp_zero3_price_walk_begin(&w, x->l->overlap, backward);
    for (int j = 0; j < n; j++) {
        /* forward: units from the embeddings to the head; backward: back */
        const int i = backward ? n - 1 - j : j, next = backward ? n - 2 - j : j + 1;
        const unit_cost *u = &pc->u[i];
        const bool has_next = j + 1 < n;
        const double gather = backward ? u->gather_b : u->gather;
        const double next_gather = !has_next ? 0 : backward ? pc->u[next].gather_b : pc->u[next].gather;
        ptdp_zero3_price_walk_unit(&w, gather, unit_time(u, which) + u->gather_amax, u->rs, has_next, next_gather);
    }
    return w.t;
}

/* ------------------------------------------------------- the pipeline */

/* The schedule of (row, p, m, v), made once: the search asks for the same
 * few many times. */
#define CACHE 256
static _Thread_local struct {   /* one per thread: nobody frees what another plays */
    ptdp_schedule *s[CACHE];
    int next;
} cache;

static const ptdp_schedule *schedule_of(const ptdp_schedule_entry *e, int p, int m, int v)
{
    const ptdp_schedule *found = NULL;
    for (int i = 0; i < CACHE && found == NULL; i++) {
        ptdp_schedule *s = cache.s[i];
        if (s != NULL && s->entry == e && s->pp == p && s->micro_batches == m && s->virtual_stages == v)
            found = s;
    }
    if (found == NULL) {
        ptdp_schedule *s = NULL;
        if (ptdp_schedule_build(e, p, m, v, &s) == PTDP_OK) {
            ptdp_schedule_destroy(cache.s[cache.next]);
            cache.s[cache.next] = s;
            cache.next = (cache.next + 1) % CACHE;
            found = s;
        }
    }
    return found;
}

/* The schedule played in virtual time as the executor (pp.c) plays it:
 * compute takes its model chunk's cost; a send costs the sender alpha + bytes /
 * beta and arrives then (comm.c), a recv ends at max(now, arrival).
 * Per stage: its end, and when its last backward started. */
typedef struct {
    double *end, *last_b, *busy;
    double makespan, bubble;
} pipe_times;

/* A schedule being played: where each stage is in its list, the stages
 * that may move (those a message was sent to), each stage's clock and
 * busy time, and when each message arrives (-1: not sent yet; message
 * 2 g m + mb goes forward from model chunk g, 2 g m + m + mb back).  The
 * chunk layout's maps (pp_layout.h) are read once into tables, not once
 * an action: stage st's chunk c is model chunk global[st v + c], which
 * begins (ends & 1) or ends (ends & 2) its copy; model chunk g lies on
 * stage stage_of[g]. */
typedef struct {
    const ptdp_schedule *s;
    const chunk_cost *pc;
    const double *send;
    int *pos, *ready, nready;
    char *queued;
    double *now, *busy, *arrival;
    int v, *global, *stage_of;
    char *ends;
} player;

/* The tables above, from the schedule's chunk layout: 0 or PTDP_ENOMEM. */
static int player_maps(player *pl)
{
    const ptdp_pp_layout lay = ptdp_schedule_layout(pl->s);
    const int n = pl->s->pp * lay.v;
    pl->v = lay.v;
    pl->global = malloc((size_t)n * sizeof(int));
    pl->stage_of = malloc((size_t)n * sizeof(int));
    pl->ends = malloc((size_t)n);
    if (pl->global == NULL || pl->stage_of == NULL || pl->ends == NULL)
        return PTDP_ENOMEM;
    for (int st = 0; st < pl->s->pp; st++)
        for (int c = 0; c < lay.v; c++) {
            const int g = ptdp_pp_layout_global(&lay, st, c);
            int chunk;
            pl->global[st * lay.v + c] = g;
            pl->ends[st * lay.v + c] =
                (char)(ptdp_pp_layout_is_first(&lay, st, c) | ptdp_pp_layout_is_last(&lay, st, c) << 1);
            ptdp_pp_layout_place(&lay, g, &pl->stage_of[g], &chunk);
        }
    return PTDP_OK;
}

/* How long compute action i of stage st keeps the compute stream: its
 * model chunk's F, B, B-input or W — but an overlapped pair's F (DualPipe)
 * its compute alone, and the pair's B what is left of max(F + B, the two
 * halves' all-to-alls), the timer's pair rule (ptdp_pair_backward_time). */
static double compute_time(const player *pl, int st, int i)
{
    const ptdp_action *a = &pl->s->stage[st].actions[i];
    const chunk_cost *pc = pl->pc, *c = &pc[pl->global[st * pl->v + a->chunk]];
    const bool paired = i > 0 && a[-1].pair;
    const chunk_cost *f = paired ? &pc[pl->global[st * pl->v + a[-1].chunk]] : NULL;
    switch (a->kind) {
    case PTDP_ACT_FORWARD:
        return a->pair ? c->f - c->a2a_f : c->f;
    case PTDP_ACT_BACKWARD:
        return paired ? ptdp_pair_backward_time(f->f - f->a2a_f, c->b - c->a2a_b, f->a2a_f + c->a2a_b) : c->b;
    case PTDP_ACT_BACKWARD_INPUT:
        return paired ? ptdp_pair_backward_time(f->f - f->a2a_f, c->bi - c->a2a_b, f->a2a_f + c->a2a_b) : c->bi;
    default:
        return c->w;
    }
}

/* Stage st's actions from where it stopped, until a receive whose message
 * is not sent yet or the end of its list: compute on its clock, a send
 * charged to the sender and arriving then (waking the receiver), a
 * receive waiting for its message. */
static void run_stage(player *pl, int st, pipe_times *out)
{
    const ptdp_schedule *s = pl->s;
    const int m = s->micro_batches, last = s->pp * s->virtual_stages - 1;
    const ptdp_stage_actions *list = &s->stage[st];
    double *now = pl->now, *arrival = pl->arrival;
    for (int *pos = &pl->pos[st]; *pos < list->count; (*pos)++) {
        const ptdp_action *a = &list->actions[*pos];
        const int at = st * pl->v + a->chunk, g = pl->global[at];
        const bool first = g <= 0 || (pl->ends[at] & 1);
        const bool end = g >= last || (pl->ends[at] & 2);
        const double t0 = now[st];
        double *msg = NULL;
        int to = -1;
        switch (a->kind) {
        case PTDP_ACT_FORWARD:         now[st] += compute_time(pl, st, *pos); break;
        case PTDP_ACT_BACKWARD:
        case PTDP_ACT_BACKWARD_INPUT:
            out->last_b[st] = now[st];
            now[st] += compute_time(pl, st, *pos);
            break;
        case PTDP_ACT_BACKWARD_WEIGHT: now[st] += compute_time(pl, st, *pos); break;
        case PTDP_ACT_SEND_FORWARD:    /* to model chunk g + 1 */
            if (end)
                break;
            now[st] += pl->send[g];
            arrival[(2 * (size_t)g) * m + a->mb] = now[st];
            to = pl->stage_of[g + 1];
            break;
        case PTDP_ACT_SEND_BACKWARD:   /* to model chunk g - 1 */
            if (first)
                break;
            now[st] += pl->send[g - 1];
            arrival[(2 * (size_t)g + 1) * m + a->mb] = now[st];
            to = pl->stage_of[g - 1];
            break;
        case PTDP_ACT_RECV_FORWARD:    /* from model chunk g - 1 */
            if (!first)
                msg = &arrival[(2 * (size_t)(g - 1)) * m + a->mb];
            break;
        case PTDP_ACT_RECV_BACKWARD:   /* from model chunk g + 1 */
            if (!end)
                msg = &arrival[(2 * (size_t)(g + 1) + 1) * m + a->mb];
            break;
        default:
            break;
        }
        if (to >= 0 && !pl->queued[to]) {
            pl->queued[to] = 1;
            pl->ready[pl->nready++] = to;
        }
        if (msg != NULL) {
            if (*msg < 0)
                break;          /* not sent yet: woken by a send */
            if (*msg > now[st])
                now[st] = *msg;
        } else if (a->kind <= PTDP_ACT_BACKWARD || a->kind >= PTDP_ACT_BACKWARD_INPUT) {
            pl->busy[st] += now[st] - t0;
        }
    }
}

/* Each stage's end, the makespan and the idle fraction; PTDP_EINVAL if a
 * stage never reached its list's end (a receive nobody sent). */
static int finish(const player *pl, pipe_times *out)
{
    const int P = pl->s->pp;
    int rc = PTDP_OK;
    double idle = 0;
    out->makespan = 0;
    for (int st = 0; st < P; st++) {
        if (pl->pos[st] != pl->s->stage[st].count)
            rc = PTDP_EINVAL;
        out->end[st] = pl->now[st];
        out->makespan = pl->now[st] > out->makespan ? pl->now[st] : out->makespan;
    }
    for (int st = 0; st < P; st++)
        idle += out->makespan - pl->busy[st];
    out->bubble = out->makespan > 0 ? idle / (P * out->makespan) : 0;
    return rc;
}

static int play(const ptdp_schedule *s, const chunk_cost *pc, const double *send, pipe_times *out)
{
    const int P = s->pp;
    const size_t nmsg = 2 * (size_t)P * s->virtual_stages * s->micro_batches;
    player pl = { .s = s, .pc = pc, .send = send, .pos = calloc((size_t)P, sizeof(int)),
                  .ready = malloc((size_t)P * sizeof(int)), .queued = malloc((size_t)P),
                  .now = calloc((size_t)P, sizeof(double)), .busy = out->busy,
                  .arrival = malloc(nmsg * sizeof(double)) };
    int rc = player_maps(&pl);
    if (rc == 0 && (pl.pos == NULL || pl.ready == NULL || pl.queued == NULL || pl.now == NULL || pl.busy == NULL ||
                    pl.arrival == NULL))
        rc = PTDP_ENOMEM;
    if (rc == 0) {
        memset(pl.busy, 0, (size_t)P * sizeof *pl.busy);
        for (size_t i = 0; i < nmsg; i++)
            pl.arrival[i] = -1;
        /* Stages that may move: all at first, then those a message was
         * sent to (the order changes no time: each recv waits for its own
         * send). */
        for (int st = P - 1; st >= 0; st--) {
            pl.ready[pl.nready++] = st;
            pl.queued[st] = 1;
        }
        while (pl.nready > 0) {
            const int st = pl.ready[--pl.nready];
            pl.queued[st] = 0;
            run_stage(&pl, st, out);
        }
        rc = finish(&pl, out);
    }
    free(pl.pos);
    free(pl.ready);
    free(pl.queued);
    free(pl.now);
    free(pl.arrival);
    free(pl.global);
    free(pl.stage_of);
    free(pl.ends);
    return rc;
}

/* The makespan of (row, p, m, v).  A schedule's timing is a max-plus
 * linear recursion over the micro-batches: past the warm-up every further
 * group of micro-batches adds the same time to every stage's clock (the
 * slowest stage's F + B and its messages, per micro-batch).  So a long
 * schedule — whose generation alone grows faster than m (ZB-H1 and the
 * interleaved one take seconds at p 64, m 1536) — is played at two
 * lengths past the warm-up, its row's m1 and m2 (m1 = 2p and m2 = 2p + 1;
 * interleaved: 3p, as its micro-batches go round in groups of p;
 * DualPipe's 4p and 4p + 2), and carried on in a straight line; a row
 * without a line is played out.  tests/test_plan_time.c checks the line against the
 * whole schedule played out (PTDP_PLAN_PLAY_ALL=1 in the environment
 * plays every schedule out, as that check does). */
static int play_m(const ptdp_schedule_entry *e, int p, int m, int v, const chunk_cost *pc, const double *send,
                  pipe_times *out)
{
    int m1 = m, m2 = m;
    if (e->line != NULL)
        e->line(p, v, &m1, &m2);
    if (m <= m2 || getenv("PTDP_PLAN_PLAY_ALL") != NULL) {
        const ptdp_schedule *s = schedule_of(e, p, m, v);
        return s == NULL ? PTDP_EINVAL : play(s, pc, send, out);
    }
    double *buf = calloc(3 * (size_t)p, sizeof *buf);
    if (buf == NULL)
        return PTDP_ENOMEM;
    pipe_times a = { .end = buf, .last_b = buf + p, .busy = buf + 2 * p };
    /* Each schedule played as soon as it is found: finding the second may
     * evict the first from the cache. */
    const ptdp_schedule *s1 = schedule_of(e, p, m1, v);
    int rc = s1 == NULL ? PTDP_EINVAL : play(s1, pc, send, &a);
    if (rc == 0) {
        const ptdp_schedule *s2 = schedule_of(e, p, m2, v);
        rc = s2 == NULL ? PTDP_EINVAL : play(s2, pc, send, out);
    }
    const double k = (double)(m - m2) / (m2 - m1);
    double idle = 0;
    out->makespan = 0;
    for (int st = 0; rc == 0 && st < p; st++) {
        out->end[st] += k * (out->end[st] - a.end[st]);
        out->last_b[st] += k * (out->last_b[st] - a.last_b[st]);
        out->busy[st] += k * (out->busy[st] - a.busy[st]);
        out->makespan = out->end[st] > out->makespan ? out->end[st] : out->makespan;
    }
    for (int st = 0; rc == 0 && st < p; st++)
        idle += out->makespan - out->busy[st];
    if (rc == 0)
        out->bubble = out->makespan > 0 ? idle / (p * out->makespan) : 0;
    free(buf);
    return rc;
}

/* ------------------------------------------------------- once a step */

/* Tensor j of a unit in the model's flat (lay_out) order: its elements
 * in *size, whether it is an expert's (summed over the expert-DP group)
 * in *experts; false past the last.  The model's tensors (its params); a
 * tied head's copy of the embeddings' matrix first; a mixture's block:
 * each expert's c_proj bias and weight, c_fc weight and bias (the last
 * expert first), then the router and the block's other tensors. */
static bool unit_tensor(const ctx *x, const unit_cost *u, int j, double *size, bool *experts)
{
    const ptdp_plan_dims *s = &x->shape;
    *experts = false;
    if (u->kind == UNIT_HEAD) {
        if (u->tied_copy && j == 0) {
            *size = (double)s->Vl * s->C;
            return true;
        }
        j -= u->tied_copy;
        if (j >= x->par.head.n)
            return false;
        *size = x->par.head.size[j];
        return true;
    }
    if (u->kind == UNIT_EMBED) {
        if (j >= x->par.embed.n)
            return false;
        *size = x->par.embed.size[j];
        return true;
    }
    if (u->local > 0) {   /* the model's lists (every mixture's alike) */
        const ptdp_plan_tensors *e = &x->mo.expert, *d = &x->mo.beside;
        const int ne = e->n * (int)u->local;
        if (j < ne) {
            *size = e->size[j % e->n];
            *experts = true;
            return true;
        }
        if (j - ne >= d->n)
            return false;
        *size = d->size[j - ne];
        return true;
    }
    if (j >= x->par.block.n)
        return false;
    *size = x->par.block.size[j];
    return true;
}

/* The DP buckets' collectives (dp_price.c) over the stage's gradients in
 * their flat (backward) order: the model chunks' units from the head
 * back, each unit's tensors (unit_tensor), ready when the unit's backward
 * is done under --overlap.  `op` is the all-reduce of plain DP, or ZeRO's
 * reduce-scatter (and its gathers in *gather, if not NULL).  Returns the
 * time the compute stream spends (or waits) on them after the pipeline's
 * end, and the traffic's whole time in *total. */
static double dp_buckets(const ctx *x, ptdp_coll op, const chunk_cost *const *pcs, int npcs, double cap,
                         double last_b, double end, double *total, double *gather)
{
    ptdp_dp_buckets w;
    ptdp_dp_price_begin(&w, &x->mesh.dp_group, &x->mesh.edp_group, op, cap, x->store, x->l->overlap,
                        gather != NULL, last_b);
    for (int k = 0; k < npcs; k++) {
        const chunk_cost *pc = pcs[k];
        for (int i = pc->nunits - 1; i >= 0; i--) {
            const unit_cost *u = &pc->u[i];
            double size;
            bool experts;
            ptdp_dp_price_unit(&w, u->bwd);
            for (int j = 0; unit_tensor(x, u, j, &size, &experts); j++)
                ptdp_dp_price_tensor(&w, size, experts && experts_apart(&x->mesh), j == 0);
        }
    }
    return ptdp_dp_price_end(&w, end, total, gather);
}

/* DualPipe's two copies (dp_price.c's mirror): every tensor of the
 * stage's two chunks all-reduced over the mirror pair, stages st and
 * p - 1 - st, on the link level between them; under a ZeRO row that
 * shards, each first made whole over its replicas, DP's or the experts'.
 * The tied embedding's copies then add on the device. */
static double mirror_sum(const ctx *x, const chunk_cost *pc, int st)
{
    if (ptdp_pp_layout_copies(&x->lay) != 2)
        return 0;
    const int ranks[2] = { ptdp_price_mesh_stage_rank(&x->mesh, st),
                           ptdp_price_mesh_stage_rank(&x->mesh, x->l->pp - 1 - st) };
    const ptdp_price_group pair = { .profile = x->rq->profile, .n = 2,
                                    .nodes = ptdp_profile_nodes_spanned(x->rq->profile, ranks, 2) };
    double t = 0, size;
    bool experts;
    for (int k = 0; k < 2; k++) {
        const chunk_cost *c = &pc[chunk_at(x, st, k)];
        for (int i = 0; i < c->nunits; i++)
            for (int j = 0; unit_tensor(x, &c->u[i], j, &size, &experts); j++)
                ptdp_dp_price_mirror(&t, &pair, x->zero->shards_optim ? grad_group(&x->mesh, experts) : NULL,
                                     size * REAL);
    }
    return t;
}

/* AdamW (or SGD) on n elements, as train.c charges it. */
static double optimizer_flops(const ctx *x, double n)
{
    if (x->rq->profile->ideal)
        return 0;
    double per = x->rq->optimizer == PTDP_OPT_ADAMW ? 15 : 2;
    return (per + (x->rq->bf16 ? 1 : 0)) * n;
}

/* ZeRO-2's reduce-scatter after each backward, on stage 0's device (every
 * chunk): the whole gradient over dp cp, or with experts one run of each
 * group at a time, each over its group (DP's buckets of no cap). */
static double zero2_scatter(const ctx *x, const chunk_cost *pc)
{
    const int v = x->v;
    double numel = 0, rs = 0;
    for (int k = 0; k < v; k++)
        numel += pc[chunk_at(x, 0, k)].numel;
    if (!experts_apart(&x->mesh))
        return dp_coll(&x->mesh, PTDP_COLL_REDUCE_SCATTER, numel * x->store);
    const chunk_cost *stage0[v];
    for (int k = 0; k < v; k++)
        stage0[k] = &pc[chunk_flat(x, 0, k)];
    dp_buckets(x, PTDP_COLL_REDUCE_SCATTER, stage0, v, HUGE_VAL, 0, 0, &rs, NULL);
    return rs;
}

/* After the norm, stage st's optimizer on its share (the ZeRO row's:
 * the dense parameters' over dp cp, the experts' over their expert-DP
 * group) and the row's all-gather of the updated parameters: by DP's
 * buckets (ZeRO-1, z1), or whole (ZeRO-2; with experts a run of one
 * group at a time). */
static void optimizer_and_gather(const ctx *x, const chunk_cost *pc, int st, double z1, double *opt, double *gather)
{
    const ptdp_zero_stage *row = x->zero;
    const int v = x->v;
    const chunk_cost *here[v];
    double numel = 0, experts = 0;
    for (int k = 0; k < v; k++) {
        here[k] = &pc[chunk_flat(x, st, k)];
        numel += here[k]->numel;
        for (int i = 0; i < here[k]->nunits; i++)
            experts += experts_apart(&x->mesh) ? here[k]->u[i].experts : 0;
    }
    const double share = ptdp_zero_price_optimizer_share(row, numel, experts, x->mesh.ndp, x->mesh.nedp);
    *opt = secs(x, optimizer_flops(x, share));
    *gather = row->gathers_per_step == 0 ? 0
            : row->buckets               ? z1
                                         : dp_coll(&x->mesh, PTDP_COLL_ALL_GATHER, numel * x->store);
    if (row->gathers_per_step > 0 && !row->buckets && experts > 0) {
        double rs;
        *gather = 0;
        dp_buckets(x, PTDP_COLL_REDUCE_SCATTER, here, v, HUGE_VAL, 0, 0, &rs, gather);
    }
}

/* --fp8 delayed (fp8_linear.c): after the optimizer each device's step
 * amaxes — 3 reals (X, W, dY) a parameter tensor of its model, every
 * chunk of stage st — are max-reduced over its DP group, once a step,
 * so that every replica keeps the same histories. */
static double fp8_amax_table(const ctx *x, const chunk_cost *pc, int st)
{
    if (x->rq->fp8 == NULL || !x->rq->fp8->uses_history || x->mesh.ndp < 2)
        return 0;
    double tensors = 0;
    for (int k = 0; k < x->v; k++)
        tensors += pc[chunk_at(x, st, k)].tensors;
    return dp_coll(&x->mesh, PTDP_COLL_ALL_REDUCE, 3 * tensors * REAL);
}

/* Every model chunk's units and its F, B (B, W) on the compute stream,
 * what an overlapped pair could hide of them, and the message after it:
 * the boundary's activation, rows x (T / cp / (sp ? tp : 1)) x C. */
static int price_chunks(const ctx *x, int P, chunk_cost *pc, double *send)
{
    int rc = PTDP_OK;
    for (int g = 0; rc == 0 && g < P; g++) {
        int k, n;
        within_copy(x, g, &k, &n);
        rc = chunk_of(x, k, n, &pc[g]);
    }
    for (int g = 0; rc == 0 && g < P; g++) {
        chunk_cost *q = &pc[g];
        double f = walk_units(x, q, 0);
        double b = walk_units(x, q, 1), bi = walk_units(x, q, 2), w = 0;
        for (int i = 0; i < q->nunits; i++)
            w += q->u[i].w;
        q->f = f;
        q->b = b;
        q->bi = bi;
        q->w = w;
        q->a2a_f = q->ep_f;
        q->a2a_b = q->ep_b + (x->full ? q->ep_f : 0);
        if (g + 1 < P)
            send[g] = ptdp_cost_message_between(x->rq->profile, (uint64_t)((double)x->shape.Rl * x->shape.C * REAL),
                                                ptdp_price_mesh_stage_rank(&x->mesh, stage_of(x, g)),
                                                ptdp_price_mesh_stage_rank(&x->mesh, stage_of(x, g + 1)));
    }
    return rc;
}

/* --fp8 with one scale a tensor (fp8_linear.c): each operand split over
 * TP or CP has its amax, one real, max-reduced there before its scale —
 *
 *                     over TP                    over CP (activations)
 *   column-parallel   W (f, b), dY (b)           X (f, b), dY (b)
 *   row-parallel      W (f, b), X (f, b)         X (f, b), dY (b)
 *
 * all-reduces of latency only, on the block's TP and CP terms.  (A tiled
 * recipe's tiles lie on one rank: nothing to reduce.) */
static void fp8_amax_reduces(ctx *x, const ptdp_plan_tp_block *n)
{
    const double tp = ptdp_price_collective(&x->mesh.tp_group, PTDP_COLL_ALL_REDUCE, REAL);
    const double cp = ptdp_price_collective(&x->mesh.cp_group, PTDP_COLL_ALL_REDUCE, REAL);
    const int layers = n->fp8_column + n->fp8_row;
    /* a block gathered in FP8 holds its weights' scales already (its
     * gather reduced them, zero3_gather): no W reduced forward or back */
    const int w = x->z3 && x->rq->fp8_comm ? layers : 0;
    x->tp_block.f += (n->fp8_column + 2 * n->fp8_row - w) * tp;
    x->tp_block.b += (2 * layers - w) * tp;
    x->cp_ring.f += layers * cp;
    x->cp_ring.b += 2 * layers * cp;
}

/* ------------------------------------------------------------ the step */

/* The pricing context of a layout: its mesh, its ZeRO row, a
 * micro-batch's shapes and work, the schedule's entry (*e) and the
 * model's planning table (*mp). */
static int ctx_of(const ptdp_plan_request *rq, const ptdp_plan_layout *l, ctx *x, const ptdp_schedule_entry **e,
                  const ptdp_model_plan **mp)
{
    const ptdp_model_config *c = &rq->model;
    const ptdp_zero_stage *row = ptdp_zero_stage_of(l->zero);
    if (row == NULL)
        return PTDP_EINVAL;
    *x = (ctx){ .rq = rq, .l = l, .zero = row, .peak = ptdp_profile_peak(rq->profile, rq->bf16),
                .store = rq->bf16 ? 2.0 : REAL, .full = l->recompute == PTDP_RECOMPUTE_FULL,
                .z3 = row->path == PTDP_ZERO_PATH_EACH_UNIT };
    ptdp_price_mesh_of(&x->mesh, rq->profile, l->dp, l->tp, l->pp, l->cp, l->ep, l->etp);
    if (x->mesh.ndp < 2)
        x->z3 = false;
    /* ZeRO-3's groups and options (shard_price.c); under HSDP ZeRO's every
     * collective runs over the shard group, as zero_hsdp.c makes it ZeRO's */
    ptdp_shard_price_groups(&x->zo, rq->profile, x->mesh.ndp, l->tp, row->shards_params ? rq->shard_group : 0,
                            rq->zero_hpz || rq->zero_qgz > 0);
    x->zo.store = x->store;
    x->zo.hpz = rq->zero_hpz;
    x->zo.qwz_block = rq->zero_qwz;
    x->zo.qgz_bits = rq->zero_qgz;
    x->zo.qgz_block = PTDP_QGZ_BLOCK;
    x->mesh.dp_group = x->zo.zero;
    *e = ptdp_plan_schedule(l);
    if (x->peak <= 0)
        return PTDP_EINVAL;
    x->split_bw = ((*e)->caps & PTDP_SCHED_SPLIT_BACKWARD) != 0;
    x->lay = ptdp_plan_pp_layout(l);
    x->v = x->lay.v;
    *mp = ptdp_model_of(c)->plan;
    if (*mp == NULL)
        return PTDP_EINVAL;
    const ptdp_plan_core core = ptdp_plan_core_of(rq, l->recompute);
    x->sp = l->sp && l->tp > 1;
    (*mp)->dims(c, l->micro_batch_size, l->tp, x->sp, x->mesh.cp, &x->shape);
    (*mp)->params(c, l->tp, x->sp, &x->par);
    fp8_block_weights(x);
    x->S = (double)x->shape.R * x->shape.C * REAL;
    const bool fp8 = rq->fp8 != NULL;
    (*mp)->flops(rq->profile, c, l->micro_batch_size, l->tp, l->sp, x->mesh.cp, core, false, rq->bf16, fp8,
                 &x->fl);
    (*mp)->flops(rq->profile, c, l->micro_batch_size, l->tp, l->sp, x->mesh.cp, core, true, rq->bf16, fp8,
                 &x->fl_split);
    /* a block's TP (or SP) collectives, SP's regathers under its two dX
     * products; CP's ring of K and V, cp devices tp world ranks apart */
    const ptdp_plan_tp_block *n_tp = &(*mp)->tp_block;
    const ptdp_tp_block_colls colls = { n_tp->all_reduce_f, n_tp->all_reduce_b, n_tp->gather_f, n_tp->scatter_f,
                                        n_tp->gather_b, n_tp->scatter_b, n_tp->regathers };
    double dx[PTDP_PLAN_REGATHERS_MAX];
    for (int i = 0; i < PTDP_PLAN_REGATHERS_MAX; i++)
        dx[i] = secs(x, x->fl.sp_dx_block[i]);
    x->tp_block = ptdp_tp_price_block(&x->mesh.tp_group, x->S, x->sp, l->overlap, &colls, dx);
    x->cp_ring = ptdp_cp_price_ring(rq->profile, x->mesh.cp, l->tp, (double)x->shape.R * 2 * x->shape.KVl * REAL);
    if (rq->fp8 != NULL && rq->fp8->whole_tensor)
        fp8_amax_reduces(x, n_tp);
    if (ptdp_plan_moe_of(rq, l, false, &x->mo)) {   /* priced once: every mixture's block is alike */
        x->ms = x->mo;
        if (x->split_bw)
            ptdp_plan_moe_of(rq, l, true, &x->ms);
    }
    return PTDP_OK;
}

/* The ZeRO row's gradient traffic of stage st after its last backward
 * (*traffic in all, *exposed of it waited for): DP's buckets all-reduced
 * or reduce-scattered (their gathers after the optimizer in *z1_gather);
 * ZeRO-2's reduce-scatter after every backward action, the last waited
 * for; ZeRO-3's gathers and reduce-scatters of every unit, 3 passes a
 * micro-batch.  Returns when the stage is done with it. */
static double dp_traffic(const ctx *x, const pipe_times *pt, int st, double z2_rs, const chunk_cost **mine,
                         double *z1_gather, double *traffic, double *exposed)
{
    const ptdp_zero_stage *row = x->zero;
    const ptdp_plan_layout *l = x->l;
    const int v = x->v;
    double t = pt->end[st];
    *traffic = 0;
    *exposed = 0;
    if (row->path == PTDP_ZERO_PATH_ALL_REDUCE || row->path == PTDP_ZERO_PATH_REDUCE_SCATTER) {
        *z1_gather = 0;
        const ptdp_coll op = row->path == PTDP_ZERO_PATH_ALL_REDUCE ? PTDP_COLL_ALL_REDUCE : PTDP_COLL_REDUCE_SCATTER;
        double e0 = dp_buckets(x, op, mine, v, ptdp_dp_price_cap(x->rq->bucket_mb), pt->last_b[st], t, traffic,
                               row->gathers_per_step > 0 ? z1_gather : NULL);
        t += e0;
        *exposed = e0;
    } else if (row->path == PTDP_ZERO_PATH_EACH_BACKWARD) {
        const double per = ptdp_zero_backwards(row, 1, x->split_bw);   /* B and W each, split */
        *traffic = z2_rs * per * l->micro_batches * v;
        *exposed = l->overlap ? z2_rs : *traffic;   /* the last, waited for before the optimizer */
        if (l->overlap)
            t += z2_rs;
    } else if (x->z3) {
        double g3 = 0, g3b = 0, r3 = 0, shard = 0;
        for (int k = 0; k < v; k++)
            for (int i = 0; i < mine[k]->nunits; i++) {
                g3 += mine[k]->u[i].gather;
                g3b += mine[k]->u[i].gather_b;
                r3 += mine[k]->u[i].rs;
                shard += ptdp_zero_price_shard(mine[k]->u[i].numel, x->zo.zero.n);
            }
        /* the row's two gathers a backward: the forward's and the backward's */
        *traffic = (g3 + g3b + row->sums_per_backward * r3) * l->micro_batches;
        *exposed = l->overlap ? 0 : *traffic;
        if (x->zo.replica.n > 1) {   /* HSDP: the shard all-reduced over the replicas, after the sum */
            const double rep = ptdp_shard_price_replicas(&x->zo, shard).s;
            *traffic += rep;
            *exposed += rep;
            t += rep;
        }
    }
    return t;
}

/* The tensors a TP sub-group holds as one copy (a kv head shared by the
 * query heads of tp / K ranks): each block's, all-reduced over the ranks
 * sharing it (ptdp_model_sum_groups), under ZeRO first made whole over DP
 * as SP's norms are. */
static double share_sums(const ctx *x, double blocks)
{
    const ptdp_model_ops *ops = ptdp_model_of(&x->rq->model);
    const int share = ops->tp_share != NULL ? ops->tp_share(&x->rq->model, x->l->tp) : 1;
    if (share < 2 || x->par.share_block == 0)
        return 0;
    const ptdp_price_group g = ptdp_price_group_of(x->rq->profile, share, 1);
    const double n = blocks * x->par.share_block, bytes = x->par.share_size * REAL;
    return n * ptdp_price_collective(&g, PTDP_COLL_ALL_REDUCE, bytes) +
           (x->zero->shards_optim ? n * dp_coll(&x->mesh, PTDP_COLL_ALL_REDUCE, bytes) : 0);
}

/* MoE parallel folding (moe_fold.c): each mixture's router, whole on
 * every rank but used by each slice on other rows, all-reduced over the
 * fold group once a step (under ZeRO first made whole over DP, as
 * share_sums' copies): `moe` mixtures on the stage, E C elements each. */
static double fold_sums(const ctx *x, double moe)
{
    if (x->mesh.slices < 2 || moe == 0)
        return 0;
    const double bytes = x->mo.E * x->shape.C * REAL;
    return moe * ptdp_price_collective(&x->mesh.fold_group, PTDP_COLL_ALL_REDUCE, bytes) +
           (x->zero->shards_optim ? moe * dp_coll(&x->mesh, PTDP_COLL_ALL_REDUCE, bytes) : 0);
}

/* What stage st does after its last backward, once a step: the row's
 * gradient traffic (dp_traffic), SP's LayerNorm sums, the tied
 * embedding's copies over DP under ZeRO, DualPipe's mirror sum.  Returns
 * when the stage is done with them. */
static double after_backward(const ctx *x, const chunk_cost *pc, const pipe_times *pt, int st, double z2_rs,
                             const chunk_cost **mine, double *z1_gather, double *traffic, double *exposed)
{
    const ptdp_plan_request *rq = x->rq;
    const ptdp_plan_layout *l = x->l;
    const int v = x->v;
    for (int k = 0; k < v; k++)
        mine[k] = &pc[chunk_flat(x, st, k)];
    double t = dp_traffic(x, pt, st, z2_rs, mine, z1_gather, traffic, exposed);
    const double wte = (double)x->shape.Vl * x->shape.C;
    const bool has_first = holds_end(x, st, false), has_last = holds_end(x, st, true);
    /* SP's norms' weights (and biases) — the model's count a block and at
     * the head: each all-reduced over TP (ptdp_model_sum_groups); under
     * ZeRO they and a tied embedding are first made whole over DP (zero.c,
     * sum_groups_whole) */
    double nsp = 0, blocks = 0, moe = 0;
    for (int k = 0; k < v; k++) {
        int g, n, first = 0;
        within_copy(x, chunk_at(x, st, k), &g, &n);
        for (int j = 0; j < g; j++)
            first += chunk_layers(rq->model.layers, n, j);
        blocks += chunk_layers(rq->model.layers, n, g);
        moe += ptdp_plan_moe_blocks(rq, first, chunk_layers(rq->model.layers, n, g));
        if (x->sp)
            nsp += (double)x->par.sp_sums_block * chunk_layers(rq->model.layers, n, g) +
                   (g == n - 1 ? x->par.sp_sums_head : 0);
    }
    t += nsp * ptdp_price_collective(&x->mesh.tp_group, PTDP_COLL_ALL_REDUCE, x->shape.C * REAL);
    if (x->zero->shards_optim) {
        t += nsp * dp_coll(&x->mesh, PTDP_COLL_ALL_REDUCE, x->shape.C * REAL);
        /* each tied copy here (DualPipe's stage may hold both) */
        const int tied = !x->par.tied || l->pp < 2 || ptdp_pp_layout_copies(&x->lay) == 2
                             ? 0   /* DualPipe's: in mirror_sum */
                         : x->lay.shape == PTDP_CHUNKS_RING ? has_first || has_last
                                                            : has_first + has_last;
        t += tied * dp_coll(&x->mesh, PTDP_COLL_ALL_REDUCE, wte * REAL);
    }
    return t + share_sums(x, blocks) + fold_sums(x, moe) + mirror_sum(x, pc, st);
}

/* The tied embedding (stage 0 and the last stage sum their copies), then
 * everybody at the gradient norm: DP (ZeRO) or EP, TP and PP all-reduces of
 * one double.  Returns when the norm is known. */
static double tie_and_norm(const ctx *x, pipe_times *pt)
{
    const ptdp_plan_request *rq = x->rq;
    const ptdp_plan_layout *l = x->l;
    if (l->pp > 1 && x->par.tied) {
        const int a = 0, b = stage_of(x, l->pp * x->v - 1);
        int ranks[2] = { ptdp_price_mesh_stage_rank(&x->mesh, a), ptdp_price_mesh_stage_rank(&x->mesh, b) };
        double tie = a == b ? 0
                            : ptdp_cost_collective_nodes(rq->profile, PTDP_COLL_ALL_REDUCE,
                                                         (uint64_t)((double)x->shape.Vl * x->shape.C * REAL), 2,
                                                         ptdp_profile_nodes_spanned(rq->profile, ranks, 2));
        double meet = pt->end[a] > pt->end[b] ? pt->end[a] : pt->end[b];
        pt->end[a] = pt->end[b] = meet + tie;
    }
    double sync = 0;
    for (int st = 0; st < l->pp; st++)
        sync = pt->end[st] > sync ? pt->end[st] : sync;
    if (x->zero->shards_optim || (x->mesh.slices > 1 && x->mo.E > 0))   /* folding: the experts' squares over DP (model.c) */
        sync += dp_coll(&x->mesh, PTDP_COLL_ALL_REDUCE, sizeof(double));
    else if (x->mesh.ep > 1)   /* each EP rank its experts' squares (zero.c) */
        sync += ptdp_price_collective(&x->mesh.ep_group, PTDP_COLL_ALL_REDUCE, sizeof(double));
    sync += ptdp_price_collective(&x->mesh.tp_group, PTDP_COLL_ALL_REDUCE, sizeof(double));
    const ptdp_price_group pp = ptdp_price_group_of(rq->profile, l->pp, ptdp_price_mesh_stage_rank(&x->mesh, 1));
    sync += ptdp_price_collective(&pp, PTDP_COLL_ALL_REDUCE, sizeof(double));
    return sync;
}

/* --fp8-comm under ZeRO-3: the fullest stage's gathers, one round, in
 * bytes (zero3_gather's), beside its parameters in the store's type. */
static void zero3_fp8_bytes(const ctx *x, const chunk_cost *pc, ptdp_plan_time *out)
{
    if (!x->z3 || !x->rq->fp8_comm || x->rq->fp8 == NULL)
        return;
    for (int st = 0; st < x->l->pp; st++) {
        double psi = 0, q = 0, amaxes = 0;
        for (int k = 0; k < x->v; k++) {
            const chunk_cost *c = &pc[chunk_at(x, st, k)];
            for (int i = 0; i < c->nunits; i++) {
                const bool dense = c->u[i].kind == UNIT_BLOCK && c->u[i].E == 0;
                psi += c->u[i].numel;
                q += dense ? x->fp8_codes : 0;
                amaxes += dense ? x->fp8_amaxes : 0;
            }
        }
        if (psi > out->zero3_psi) {
            out->zero3_psi = psi;
            out->zero3_psi_fp8 = q;
            out->zero3_amaxes = amaxes;
            out->zero3_gather_bytes = q + (psi - q) * x->store + amaxes * REAL;
            out->zero3_gather_bytes_store = psi * x->store;
        }
    }
}

/* ZeRO-3's bytes and time a step by collective and link level, on the
 * stage with the most parameters: each unit's (shard_price.c) times the
 * micro-batches, and HSDP's all-reduce of the stage's shard once. */
static void add_link(ptdp_plan_link *to, const ptdp_price_link *l, double times)
{
    to->intra += times * l->intra;
    to->cross += times * l->cross;
    to->s += times * l->s;
    to->node += times * l->node;
}

static void zero3_traffic(const ctx *x, const chunk_cost *pc, ptdp_plan_time *out)
{
    if (!x->z3)
        return;
    const double M = x->l->micro_batches;
    for (int st = 0; st < x->l->pp; st++) {
        ptdp_plan_zero3 z = { 0 };
        double shard = 0;
        for (int k = 0; k < x->v; k++) {
            const chunk_cost *c = &pc[chunk_at(x, st, k)];
            for (int i = 0; i < c->nunits; i++) {
                const ptdp_shard_unit *u = &c->u[i].sh;
                add_link(&z.gather_f, &u->gather_f, M);
                add_link(&z.gather_b, &u->gather_b, M);
                add_link(&z.reduce, &u->reduce, M);
                z.psi += c->u[i].numel;
                shard += ptdp_zero_price_shard(c->u[i].numel, x->zo.zero.n);
            }
        }
        const ptdp_price_link rep = ptdp_shard_price_replicas(&x->zo, shard);
        add_link(&z.replicas, &rep, 1);
        if (z.psi > out->zero3.psi)
            out->zero3 = z;
    }
}

/* The answer: the step, the slowest chunk's phases and what they spend
 * communicating, and the FLOP rates of the step. */
static void report(const ctx *x, const ptdp_model_plan *mp, const chunk_cost *pc, const double *send,
                   const pipe_times *pt, double step, ptdp_plan_time *out)
{
    const ptdp_plan_request *rq = x->rq;
    const ptdp_plan_layout *l = x->l;
    const ptdp_model_config *c = &rq->model;
    const int P = l->pp * x->v;
    int slow = 0;
    for (int g = 0; g < P; g++)
        if (pc[g].f + pc[g].b > pc[slow].f + pc[slow].b)
            slow = g;
    const double B = (double)rq->batch, sl = ptdp_model_positions(c);
    const double N = (double)l->dp * x->mesh.cp * l->tp * l->pp;
    out->step_s = step;
    out->forward_s = pc[slow].f;
    out->backward_s = x->split_bw ? pc[slow].bi + pc[slow].w : pc[slow].b;
    out->bubble = pt->bubble;
    out->tp_comm_s = pc[slow].tp_f + pc[slow].tp_b;
    out->cp_comm_s = pc[slow].cp_f + pc[slow].cp_b;
    out->ep_comm_s = pc[slow].ep_f + pc[slow].ep_b;
    out->pp_comm_s = send[0];
    out->tokens_per_s = out->step_s > 0 ? B * sl / out->step_s : 0;
    mp->step_flops(c, B, x->full, ptdp_plan_core_of(rq, l->recompute) == PTDP_PLAN_CORE_REDONE, &out->model_flops,
                   &out->hardware_flops);
    out->model_tflops_per_gpu = out->step_s > 0 ? out->model_flops / (out->step_s * N) / 1e12 : 0;
    out->hardware_tflops_per_gpu = out->step_s > 0 ? out->hardware_flops / (out->step_s * N) / 1e12 : 0;
}

/* One step: every chunk priced, the schedule played, each stage's work
 * after its last backward, the tie and the norm, then the optimizer and
 * ZeRO's gathers — the slowest of each. */
int ptdp_plan_time_of(const ptdp_plan_request *rq, const ptdp_plan_layout *l, ptdp_plan_time *out)
{
    memset(out, 0, sizeof *out);
    if (rq == NULL || l == NULL || rq->profile == NULL || l->pp < 1 || l->tp < 1 || l->dp < 1 ||
        l->micro_batch_size < 1 || l->micro_batches < 1)
        return PTDP_EINVAL;
    ctx x;
    const ptdp_schedule_entry *e;
    const ptdp_model_plan *mp;
    int rc = ctx_of(rq, l, &x, &e, &mp);
    if (rc != 0)
        return rc;
    const int v = x.v, P = l->pp * v;

    chunk_cost *pc = calloc((size_t)P, sizeof *pc);
    double *send = calloc((size_t)P, sizeof *send);
    pipe_times pt = { .end = calloc((size_t)l->pp, sizeof(double)), .last_b = calloc((size_t)l->pp, sizeof(double)),
                      .busy = calloc((size_t)l->pp, sizeof(double)) };
    const chunk_cost **mine = calloc((size_t)v, sizeof *mine);
    double *z1_gather = calloc((size_t)l->pp, sizeof *z1_gather);   /* ZeRO-1's bucket gathers, per stage */
    if (pc == NULL || send == NULL || pt.end == NULL || pt.last_b == NULL || pt.busy == NULL || mine == NULL ||
        z1_gather == NULL)
        rc = PTDP_ENOMEM;

    /* ZeRO-2: the gradient reduce-scattered after every backward action
     * (B and W each, split), blocking unless --overlap. */
    double z2_rs = 0;
    if (rc == 0)
        rc = price_chunks(&x, P, pc, send);
    if (rc == 0 && x.zero->path == PTDP_ZERO_PATH_EACH_BACKWARD && x.mesh.ndp > 1) {
        z2_rs = zero2_scatter(&x, pc);
        if (!l->overlap)
            for (int g = 0; g < P; g++) {
                pc[g].b += z2_rs;
                pc[g].bi += z2_rs;
                pc[g].w += x.split_bw ? z2_rs : 0;
            }
    }
    if (rc == 0)
        rc = play_m(e, l->pp, l->micro_batches, v, pc, send, &pt);

    double post = 0, dp_total = 0, dp_exposed = 0, opt_max = 0, amax_max = 0;
    for (int st = 0; rc == 0 && st < l->pp; st++) {
        double traffic, exposed;
        pt.end[st] = after_backward(&x, pc, &pt, st, z2_rs, mine, &z1_gather[st], &traffic, &exposed);
        if (x.z3)   /* ZeRO-3: the last stage's, as it always was */
            dp_exposed = exposed;
        else
            dp_exposed = exposed > dp_exposed ? exposed : dp_exposed;
        dp_total = traffic > dp_total ? traffic : dp_total;
    }
    const double sync = rc == 0 ? tie_and_norm(&x, &pt) : 0;
    for (int st = 0; rc == 0 && st < l->pp; st++) {
        double opt, gather;
        optimizer_and_gather(&x, pc, st, z1_gather[st], &opt, &gather);
        const double amax = fp8_amax_table(&x, pc, st);
        opt_max = opt > opt_max ? opt : opt_max;
        amax_max = amax > amax_max ? amax : amax_max;
        post = opt + gather + amax > post ? opt + gather + amax : post;
    }
    if (rc == 0) {
        report(&x, mp, pc, send, &pt, sync + post, out);
        out->dp_comm_s = dp_total;
        out->dp_exposed_s = dp_exposed;
        out->optimizer_s = opt_max;
        out->fp8_amax_s = amax_max;
        zero3_fp8_bytes(&x, pc, out);
        zero3_traffic(&x, pc, out);
    }
    for (int g = 0; pc != NULL && g < P; g++)
        free(pc[g].u);
    free(pc);
    free(send);
    free(pt.end);
    free(pt.last_b);
    free(pt.busy);
    free(mine);
    free(z1_gather);
    return rc;
}
