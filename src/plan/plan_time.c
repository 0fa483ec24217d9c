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
 *                           unit's compute, on the communication stream)
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
 * TP groups are the mesh's (tp fastest in the world rank), so a group of
 * tp <= GPUs per node stays inside one node and a larger one crosses the
 * network (ptdp_cost_collective_nodes); DP and CP groups are strided, and
 * a message between stages crosses nodes when the stages' ranks do.
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

#include "ptdp/error.h"
#include "ptdp/schedule.h"
#include "ptdp/types.h"
#include "ptdp/model_plan.h"
#include "ptdp/models.h"
#include "parallel/schedule_impl.h"
#include "plan/plan_impl.h"

#define REAL ((double)sizeof(ptdp_real))

/* ------------------------------------------------------------ the groups */

/* The layout's mesh: world rank = tp_rank + tp (cp_rank + cp (dp_rank +
 * dp pp_rank)) (mesh.h). */
typedef struct {
    const ptdp_profile *p;
    int dp, tp, pp, cp, ndp;     /* ndp: the DP group, dp x cp             */
    int ep, nedp;                /* expert parallelism; the expert-DP group */
    int tp_nodes, dp_nodes, cp_nodes, ep_nodes, edp_nodes;
} mesh_info;

static int world_rank(const mesh_info *m, int t, int c, int d, int s)
{
    return t + m->tp * (c + m->cp * (d + m->dp * s));
}

/* Nodes a group spans: its members' ranks from the group of rank 0. */
static int span(const ptdp_profile *p, int n, int stride)
{
    if (p->gpus_per_node <= 0 || n <= 1)
        return 1;
    int first = ptdp_profile_node(p, 0), last = ptdp_profile_node(p, (n - 1) * stride);
    return last - first + 1 < n ? last - first + 1 : n;
}

static void mesh_of(mesh_info *m, const ptdp_profile *p, const ptdp_plan_layout *l)
{
    m->p = p;
    m->dp = l->dp;
    m->tp = l->tp;
    m->pp = l->pp;
    m->cp = l->cp > 1 ? l->cp : 1;
    m->ndp = m->dp * m->cp;
    m->tp_nodes = span(p, m->tp, 1);
    m->cp_nodes = span(p, m->cp, m->tp);
    /* the DP group: (dp, cp) with tp fixed, every tp-th rank of one stage */
    m->dp_nodes = span(p, m->ndp, m->tp);
    /* EP: ep consecutive members of the DP group; expert DP: every ep-th */
    m->ep = l->ep > 1 ? l->ep : 1;
    m->nedp = m->ndp / m->ep > 0 ? m->ndp / m->ep : 1;
    m->ep_nodes = span(p, m->ep, m->tp);
    m->edp_nodes = span(p, m->nedp, m->tp * m->ep);
}

static double coll(const mesh_info *m, ptdp_coll op, double bytes, int n, int nodes)
{
    return n > 1 ? ptdp_cost_collective_nodes(m->p, op, (size_t)bytes, n, nodes) : 0.0;
}

static double tp_coll(const mesh_info *m, ptdp_coll op, double bytes)
{
    return coll(m, op, bytes, m->tp, m->tp_nodes);
}

static double dp_coll(const mesh_info *m, ptdp_coll op, double bytes)
{
    return coll(m, op, bytes, m->ndp, m->dp_nodes);
}

/* Over the group a gradient is summed in: DP's, or the experts' copies. */
static double group_coll(const mesh_info *m, ptdp_coll op, double bytes, bool experts)
{
    return experts && m->ep > 1 ? coll(m, op, bytes, m->nedp, m->edp_nodes) : dp_coll(m, op, bytes);
}

/* The slowest hop of a ring of n ranks `stride` apart (the CP ring). */
static double ring_hop(const mesh_info *m, double bytes, int n, int stride)
{
    double worst = 0;
    for (int k = 0; k < n; k++) {
        double t = ptdp_cost_message_between(m->p, (size_t)bytes, k * stride, ((k + 1) % n) * stride);
        worst = t > worst ? t : worst;
    }
    return worst;
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
    double experts;                /* of them, a mixture's experts        */
    double local, Fe, E;           /* a mixture: experts here, their width, the router's rows */
    double gather, rs;             /* ZeRO-3: all-gather, reduce-scatter  */
} unit_cost;

typedef struct {
    int nunits;
    unit_cost *u;
    double numel;                  /* the chunk's parameters              */
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
    mesh_info mesh;
    ptdp_plan_dims shape;          /* a micro-batch on one device          */
    ptdp_plan_flops fl, fl_split;  /* its work; B without dW (split)        */
    double peak, store;            /* flop/s; bytes of a stored parameter */
    bool full, z3, split_bw;
    ptdp_pp_layout lay;            /* the chunks round a ring, in a V, or two copies */
    int v;                         /* chunks a stage: ptdp_plan_chunks        */
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

/* SP's backward gather of a LayerNorm shard for a column-parallel
 * layer's dW: blocking, or under --overlap on the communication stream
 * while dX = dY W computes (dx flops), only its excess exposed. */
static double sp_regather(const ctx *x, double dx)
{
    const double g = tp_coll(&x->mesh, PTDP_COLL_ALL_GATHER, (double)x->shape.R * x->shape.C * REAL);
    if (!x->l->overlap)
        return g;
    const double hidden = secs(x, dx);
    return g > hidden ? g - hidden : 0;
}

/* The TP collectives of a block, forward and backward (tp.c, sp.c); under
 * SP the backward gathers ln_1's and ln_2's shards again. */
static void block_tp(const ctx *x, double *f, double *b)
{
    const double S = (double)x->shape.R * x->shape.C * REAL;
    if (x->l->sp && x->l->tp > 1) {
        double one = tp_coll(&x->mesh, PTDP_COLL_ALL_GATHER, S) + tp_coll(&x->mesh, PTDP_COLL_REDUCE_SCATTER, S);
        *f = *b = 2 * one;
        *b += sp_regather(x, x->fl.sp_dx_block[0]) + sp_regather(x, x->fl.sp_dx_block[1]);
    } else {
        *f = *b = 2 * tp_coll(&x->mesh, PTDP_COLL_ALL_REDUCE, S);
    }
}

/* The CP ring of one block's attention (cp.c): every pass two messages'
 * time (even ranks send then receive, odd ranks receive then send). */
static void block_cp(const ctx *x, double *f, double *b)
{
    const int n = x->mesh.cp;
    *f = *b = 0;
    if (n <= 1)
        return;
    const double kv = (double)x->shape.R * 2 * x->shape.Cl * REAL;
    *f = (n - 1) * 2 * ring_hop(&x->mesh, kv, n, x->l->tp);
    *b = (n - 1) * 2 * ring_hop(&x->mesh, 2 * kv, n, x->l->tp) + 2 * ring_hop(&x->mesh, kv, n, x->l->tp);
}

static double block_params(const ptdp_plan_dims *s)
{
    const double C = s->C, Cl = s->Cl, Fl = s->Fl;
    return 4 * C + 3 * Cl * C + 3 * Cl + C * Cl + C + Fl * C + Fl + C * Fl + C;
}

/* A mixture of experts' block (model_plan.h, uniform routing): the
 * block beside its experts and the experts on their rows, the attention's
 * TP all-reduce and the experts' (on their rows), CP's ring, and expert
 * parallelism's exchanges (ep.c): forward the counts, the dispatch and the
 * combine; backward the two again (the combine's backward is a dispatch).
 * Each all-to-all moves kept (ep-1)/ep rows of C to the other EP ranks,
 * priced on the link level the EP group spans. */
static void moe_unit(const ctx *x, int layer, unit_cost *u, chunk_cost *pc, double cpf, double cpb)
{
    const ptdp_plan_dims *s = &x->shape;
    const ptdp_model_plan *mp = ptdp_model_of(&x->rq->model)->plan;
    const mesh_info *m = &x->mesh;
    const bool sel = x->l->recompute == PTDP_RECOMPUTE_SELECTIVE;
    ptdp_plan_moe mo, ms;
    mp->moe(x->rq->profile, &x->rq->model, layer, x->l->micro_batch_size, x->l->tp, m->cp, m->ep, sel, false,
            x->rq->bf16, &mo);
    ms = mo;
    if (x->split_bw)
        mp->moe(x->rq->profile, &x->rq->model, layer, x->l->micro_batch_size, x->l->tp, m->cp, m->ep, sel, true,
                x->rq->bf16, &ms);
    const double rows = mo.here * s->C * REAL;
    const double tp = tp_coll(m, PTDP_COLL_ALL_REDUCE, (double)s->R * s->C * REAL) +
                      tp_coll(m, PTDP_COLL_ALL_REDUCE, rows);
    const double a2a = coll(m, PTDP_COLL_ALL_TO_ALLV, mo.kept * (m->ep - 1) / m->ep * s->C * REAL, m->ep,
                            m->ep_nodes);
    const double counts = coll(m, PTDP_COLL_ALL_TO_ALL, mo.local * 4 * m->ep, m->ep, m->ep_nodes);
    const double whole = coll(m, PTDP_COLL_ALL_REDUCE, 16 * s->b * mo.E, m->cp, m->cp_nodes);   /* CP's counts */
    u->kind = UNIT_BLOCK;
    u->fwd = secs(x, mo.fwd + mo.here * mo.row_fwd) + tp + cpf + counts + 2 * a2a + whole;
    u->bwd = secs(x, mo.bwd + mo.here * mo.row_bwd) + tp + cpb + 2 * a2a;
    u->bwd_in = secs(x, ms.bwd + ms.here * ms.row_bwd) + tp + cpb + 2 * a2a;
    u->w = x->split_bw ? secs(x, ms.w) : 0;
    u->experts = mo.local * mo.params_expert;
    u->numel = mo.params_dense + u->experts;
    u->local = mo.local;
    u->Fe = mo.Fe;
    u->E = mo.E;
    pc->tp_f += tp;
    pc->tp_b += tp;
    pc->cp_f += cpf + whole;
    pc->cp_b += cpb;
    pc->ep_f += counts + 2 * a2a;
    pc->ep_b += 2 * a2a;
}

/* The units of model chunk g and its F, B (and B, W split) times. */
static int chunk_of(const ctx *x, int g, int P, chunk_cost *pc)
{
    const ptdp_plan_dims *s = &x->shape;
    const ptdp_plan_flops *f = &x->fl, *fb = x->split_bw ? &x->fl_split : &x->fl;
    const bool first = g == 0, last = g == P - 1;
    const int n = chunk_layers(x->rq->model.layers, P, g);
    const double S = (double)s->R * s->C * REAL;
    const bool sp = x->l->sp && x->l->tp > 1;
    const mesh_info *m = &x->mesh;
    memset(pc, 0, sizeof *pc);
    pc->nunits = n + first + last;
    pc->u = calloc((size_t)pc->nunits, sizeof *pc->u);
    if (pc->u == NULL)
        return PTDP_ENOMEM;
    int k = 0;
    if (first) {   /* wte's rows and wpe; with one chunk also the head */
        unit_cost *u = &pc->u[k++];
        u->kind = UNIT_EMBED;
        double tf = sp ? tp_coll(m, PTDP_COLL_REDUCE_SCATTER, S) : tp_coll(m, PTDP_COLL_ALL_REDUCE, S);
        double tb = sp ? tp_coll(m, PTDP_COLL_ALL_GATHER, S) : 0;
        u->fwd = secs(x, f->embed_fwd) + tf;
        u->bwd = secs(x, f->embed_bwd) + tb;
        u->bwd_in = secs(x, fb->embed_bwd) + tb;
        u->w = x->split_bw ? secs(x, f->embed_w) : 0;
        u->numel = (double)s->Vl * s->C + (double)s->T * s->C;
        pc->tp_f += tf;
        pc->tp_b += tb;
    }
    double tpf, tpb, cpf, cpb;
    block_tp(x, &tpf, &tpb);
    block_cp(x, &cpf, &cpb);
    const int layer0 = g * (x->rq->model.layers / P) + (g < x->rq->model.layers % P ? g : x->rq->model.layers % P);
    const ptdp_model_plan *mp = ptdp_model_of(&x->rq->model)->plan;
    const bool mixtures = mp->experts != NULL && mp->experts(&x->rq->model) > 0;
    for (int i = 0; i < n; i++) {
        unit_cost *u = &pc->u[k++];
        ptdp_plan_moe probe;
        if (mixtures && mp->moe(x->rq->profile, &x->rq->model, layer0 + i, 1, 1, 1, 1, false, false, false, &probe)) {
            moe_unit(x, layer0 + i, u, pc, cpf, cpb);
            continue;
        }
        u->kind = UNIT_BLOCK;
        u->fwd = secs(x, f->block_fwd) + tpf + cpf;
        u->bwd = secs(x, f->block_bwd) + tpb + cpb;
        u->bwd_in = secs(x, fb->block_bwd) + tpb + cpb;
        u->w = x->split_bw ? secs(x, f->block_w) : 0;
        u->numel = block_params(s);
        pc->tp_f += tpf;
        pc->tp_b += tpb;
        pc->cp_f += cpf;
        pc->cp_b += cpb;
    }
    if (last) {    /* LN_f, the head (wte's rows again when pp > 1), the loss */
        unit_cost *u = &pc->u[k++];
        u->kind = UNIT_HEAD;
        double tf = (sp ? tp_coll(m, PTDP_COLL_ALL_GATHER, S) : 0) +
                    3 * tp_coll(m, PTDP_COLL_ALL_REDUCE, (double)s->R * sizeof(double));
        double tb = sp ? tp_coll(m, PTDP_COLL_REDUCE_SCATTER, S) + sp_regather(x, f->sp_dx_head)
                       : tp_coll(m, PTDP_COLL_ALL_REDUCE, S);
        u->fwd = secs(x, f->head_fwd) + tf;
        u->bwd = secs(x, f->head_bwd + f->lnf_bwd) + tb;
        u->bwd_in = secs(x, fb->head_bwd + fb->lnf_bwd) + tb;
        u->w = x->split_bw ? secs(x, f->head_w) : 0;
        u->numel = 2.0 * s->C + (first ? 0 : (double)s->Vl * s->C);
        pc->tp_f += tf;
        pc->tp_b += tb;
    }
    for (int i = 0; i < pc->nunits; i++) {
        unit_cost *u = &pc->u[i];
        if (x->full && u->kind != UNIT_EMBED) {   /* its forward again, inside its backward */
            u->bwd += u->fwd;
            u->bwd_in += u->fwd;
        }
        pc->numel += u->numel;
        if (x->z3) {
            u->gather = dp_coll(m, PTDP_COLL_ALL_GATHER, u->numel * x->store);
            u->rs = dp_coll(m, PTDP_COLL_REDUCE_SCATTER, u->numel * x->store);
        }
    }
    return PTDP_OK;
}

/* ZeRO-3's walk over a model chunk's units (zero3.c): blocking, a gather before
 * each unit (and a reduce-scatter after it in a backward); with --overlap
 * the next unit's gather starts on the communication stream as soon as
 * this one is present, and a backward's reduce-scatter runs there too,
 * one at a time, waited for at the next unit's end. */
static double walk_units(const ctx *x, const chunk_cost *pc, int which)
{
    const bool backward = which != 0;
    const int n = pc->nunits;
    double t = 0, stream = 0, rs_end = 0;
    double *ready = NULL;
    if (!x->z3) {
        for (int i = 0; i < n; i++)
            t += which == 0 ? pc->u[i].fwd : which == 1 ? pc->u[i].bwd : pc->u[i].bwd_in;
        return t;
    }
    const bool overlap = x->l->overlap;
    ready = calloc((size_t)n + 1, sizeof *ready);
    for (int j = 0; j < n; j++) {
        /* forward: units from the embeddings to the head; backward: back */
        const int i = backward ? n - 1 - j : j;
        const unit_cost *u = &pc->u[i];
        if (overlap && j > 0 && ready != NULL)
            t = t > ready[j] ? t : ready[j];
        else
            t += u->gather;
        if (overlap && j + 1 < n && ready != NULL) {   /* prefetch the next */
            const int nx = backward ? n - 2 - j : j + 1;
            double start = t > stream ? t : stream;
            stream = start + pc->u[nx].gather;
            ready[j + 1] = stream;
        }
        t += which == 0 ? u->fwd : which == 1 ? u->bwd : u->bwd_in;
        if (backward) {
            if (overlap) {
                t = t > rs_end ? t : rs_end;        /* one reduce-scatter at a time */
                double start = t > stream ? t : stream;
                stream = rs_end = start + u->rs;
            } else {
                t += u->rs;
            }
        }
    }
    free(ready);
    return t;
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

/* How long compute action i of stage st keeps the compute stream: its
 * model chunk's F, B, B-input or W — but an overlapped pair's F (DualPipe)
 * its compute alone, and the pair's B what is left of max(F + B, the two
 * halves' all-to-alls), the timer's pair rule (ptdp_pair_backward_time). */
static double compute_time(const ptdp_schedule *s, const chunk_cost *pc, int st, int i)
{
    const ptdp_action *a = &s->stage[st].actions[i];
    const chunk_cost *c = &pc[ptdp_chunk_global(s, st, a->chunk)];
    const bool paired = i > 0 && a[-1].pair;
    const chunk_cost *f = paired ? &pc[ptdp_chunk_global(s, st, a[-1].chunk)] : NULL;
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

static int play(const ptdp_schedule *s, const chunk_cost *pc, const double *send, pipe_times *out)
{
    const int P = s->pp, m = s->micro_batches, V = s->virtual_stages, last = P * V - 1;
    const size_t nmsg = 2 * (size_t)P * V * m;
    int *pos = calloc((size_t)P, sizeof *pos), *ready = malloc((size_t)P * sizeof *ready);
    char *queued = malloc((size_t)P);
    double *now = calloc((size_t)P, sizeof *now), *busy = out->busy;
    double *arrival = malloc(nmsg * sizeof *arrival);
    int rc = PTDP_OK, nready = 0;
    if (pos == NULL || ready == NULL || queued == NULL || now == NULL || busy == NULL || arrival == NULL) {
        rc = PTDP_ENOMEM;
        goto out;
    }
    memset(busy, 0, (size_t)P * sizeof *busy);
    for (size_t i = 0; i < nmsg; i++)
        arrival[i] = -1;
    /* Stages that may move: all at first, then those a message was sent
     * to (the order changes no time: each recv waits for its own send). */
    for (int st = P - 1; st >= 0; st--) {
        ready[nready++] = st;
        queued[st] = 1;
    }
    while (nready > 0) {
        const int st = ready[--nready];
        const ptdp_stage_actions *list = &s->stage[st];
        queued[st] = 0;
        for (; pos[st] < list->count; pos[st]++) {
            const ptdp_action *a = &list->actions[pos[st]];
            const int g = ptdp_chunk_global(s, st, a->chunk);
            const bool first = g <= 0 || ptdp_chunk_is_first(s, st, a->chunk);
            const bool end = g >= last || ptdp_chunk_is_last(s, st, a->chunk);
            const double t0 = now[st];
            double *msg = NULL;
            int to = -1, chunk;
            switch (a->kind) {
            case PTDP_ACT_FORWARD:         now[st] += compute_time(s, pc, st, pos[st]); break;
            case PTDP_ACT_BACKWARD:
            case PTDP_ACT_BACKWARD_INPUT:  out->last_b[st] = now[st]; now[st] += compute_time(s, pc, st, pos[st]); break;
            case PTDP_ACT_BACKWARD_WEIGHT: now[st] += compute_time(s, pc, st, pos[st]); break;
            case PTDP_ACT_SEND_FORWARD:    /* to model chunk g + 1 */
                if (end)
                    break;
                now[st] += send[g];
                arrival[(2 * (size_t)g) * m + a->mb] = now[st];
                ptdp_chunk_place(s, g + 1, &to, &chunk);
                break;
            case PTDP_ACT_SEND_BACKWARD:   /* to model chunk g - 1 */
                if (first)
                    break;
                now[st] += send[g - 1];
                arrival[(2 * (size_t)g + 1) * m + a->mb] = now[st];
                ptdp_chunk_place(s, g - 1, &to, &chunk);
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
            if (to >= 0 && !queued[to]) {
                queued[to] = 1;
                ready[nready++] = to;
            }
            if (msg != NULL) {
                if (*msg < 0)
                    break;          /* not sent yet: woken by a send */
                if (*msg > now[st])
                    now[st] = *msg;
            } else if (a->kind <= PTDP_ACT_BACKWARD || a->kind >= PTDP_ACT_BACKWARD_INPUT) {
                busy[st] += now[st] - t0;
            }
        }
    }
    double idle = 0;
    out->makespan = 0;
    for (int st = 0; st < P; st++) {
        if (pos[st] != s->stage[st].count)
            rc = PTDP_EINVAL;
        out->end[st] = now[st];
        out->makespan = now[st] > out->makespan ? now[st] : out->makespan;
    }
    for (int st = 0; st < P; st++)
        idle += out->makespan - busy[st];
    out->bubble = out->makespan > 0 ? idle / (P * out->makespan) : 0;
out:
    free(pos);
    free(ready);
    free(queued);
    free(now);
    free(arrival);
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
 * in *experts; false past the last.  A mixture's block: each expert's
 * c_proj bias and weight, c_fc weight and bias (the last expert first),
 * then the router and the block's other tensors. */
static bool unit_tensor(const ctx *x, const unit_cost *u, int j, double *size, bool *experts)
{
    const ptdp_plan_dims *s = &x->shape;
    const double C = s->C, Cl = s->Cl, Fl = s->Fl, wte = (double)s->Vl * s->C;
    *experts = false;
    if (u->kind == UNIT_HEAD) {
        const bool tied = u->numel > 2 * C;   /* wte's rows here too */
        const double t[3] = { wte, C, C };
        if (j >= 2 + tied)
            return false;
        *size = t[j + !tied];
        return true;
    }
    if (u->kind == UNIT_EMBED) {
        const double t[2] = { (double)s->T * C, wte };
        if (j >= 2)
            return false;
        *size = t[j];
        return true;
    }
    if (u->local > 0) {
        const double e[4] = { C, C * u->Fe, u->Fe * C, u->Fe };
        const double d[9] = { u->E * C, C, C, C, C * Cl, 3 * Cl * C, 3 * Cl, C, C };
        const int ne = 4 * (int)u->local;
        if (j < ne) {
            *size = e[j % 4];
            *experts = true;
            return true;
        }
        if (j - ne >= 9)
            return false;
        *size = d[j - ne];
        return true;
    }
    const double b[12] = { C, C * Fl, Fl * C, Fl, C, C, C, C * Cl, 3 * Cl * C, 3 * Cl, C, C };
    if (j >= 12)
        return false;
    *size = b[j];
    return true;
}

/* The DP buckets' collectives (dp.c): greedy buckets of `cap` elements
 * over the stage's gradients in their flat (backward) order, a new one
 * where the group changes (the experts' over the expert-DP group);
 * blocking one after another, or with --overlap each started when the
 * last backward has made it.  `op` is the all-reduce of plain DP, or
 * ZeRO's reduce-scatter (zero.h: ZeRO-1 owns chunk k of every bucket,
 * and gathers the updated parameters back bucket by bucket: their time
 * in *gather, if not NULL; ZeRO-2's buckets are the runs of one group).
 * Returns the time the compute stream spends (or waits) on them after the
 * pipeline's end, and the traffic's whole time in *total. */
static double dp_buckets(const ctx *x, ptdp_coll op, const chunk_cost *const *pcs, int npcs, double cap,
                         double last_b, double end, double *total, double *gather)
{
    double fill = 0, t_ready = last_b, stream = 0, sum = 0;
    bool open = false, group = false;
    /* parameters in flat order: the model chunks' units from the head back */
    for (int k = 0; k < npcs; k++) {
        const chunk_cost *pc = pcs[k];
        for (int i = pc->nunits - 1; i >= 0; i--) {
            const unit_cost *u = &pc->u[i];
            double size;
            bool experts;
            const double t_before = t_ready;   /* the units before this one have made their gradients */
            t_ready += x->l->overlap ? u->bwd : 0;
            for (int j = 0; unit_tensor(x, u, j, &size, &experts); j++) {
                experts = experts && x->mesh.ep > 1;
                if (!open || fill + size > cap || experts != group) {
                    if (open) {   /* the previous bucket goes (a group's run ended with the unit before: then) */
                        double c = group_coll(&x->mesh, op, fill * x->store, group);
                        if (gather != NULL)
                            *gather += group_coll(&x->mesh, PTDP_COLL_ALL_GATHER, fill * x->store, group);
                        const double ready = experts != group && j == 0 ? t_before : t_ready;
                        double start = ready > stream ? ready : stream;
                        stream = start + c;
                        sum += c;
                    }
                    fill = 0;
                    open = true;
                    group = experts;
                }
                fill += size;
            }
        }
    }
    if (open) {
        double c = group_coll(&x->mesh, op, fill * x->store, group);
        if (gather != NULL)
            *gather += group_coll(&x->mesh, PTDP_COLL_ALL_GATHER, fill * x->store, group);
        double start = (x->l->overlap ? end : t_ready) > stream ? (x->l->overlap ? end : t_ready) : stream;
        stream = start + c;
        sum += c;
    }
    *total = sum;
    if (!x->l->overlap)
        return sum;
    return stream > end ? stream - end : 0;
}

/* DualPipe's two copies (model.c sum_dual_copies): every tensor of the
 * stage's two chunks all-reduced over the mirror pair, stages st and
 * p - 1 - st, on the link level between them; under ZeRO 1 and 2 each is
 * first made whole over its replicas, DP's or the experts' (zero.c
 * sum_groups_whole).  The tied embedding's copies then add on the device. */
static double mirror_sum(const ctx *x, const chunk_cost *pc, int st)
{
    if (ptdp_pp_layout_copies(&x->lay) != 2)
        return 0;
    const int ranks[2] = { world_rank(&x->mesh, 0, 0, 0, st), world_rank(&x->mesh, 0, 0, 0, x->l->pp - 1 - st) };
    const int nodes = ptdp_profile_nodes_spanned(x->rq->profile, ranks, 2);
    double t = 0, size;
    bool experts;
    for (int k = 0; k < 2; k++) {
        const chunk_cost *c = &pc[chunk_at(x, st, k)];
        for (int i = 0; i < c->nunits; i++)
            for (int j = 0; unit_tensor(x, &c->u[i], j, &size, &experts); j++) {
                t += ptdp_cost_collective_nodes(x->rq->profile, PTDP_COLL_ALL_REDUCE, (size_t)(size * REAL), 2, nodes);
                if (x->l->zero >= 1)
                    t += group_coll(&x->mesh, PTDP_COLL_ALL_REDUCE, size * REAL, experts);
            }
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
 * group at a time, each over its group. */
static double zero2_scatter(const ctx *x, const chunk_cost *pc)
{
    const int v = x->v;
    double numel = 0, rs = 0;
    for (int k = 0; k < v; k++)
        numel += pc[chunk_at(x, 0, k)].numel;
    if (x->mesh.ep <= 1)
        return dp_coll(&x->mesh, PTDP_COLL_REDUCE_SCATTER, numel * x->store);
    const chunk_cost *stage0[v];
    for (int k = 0; k < v; k++)
        stage0[k] = &pc[chunk_flat(x, 0, k)];
    dp_buckets(x, PTDP_COLL_REDUCE_SCATTER, stage0, v, HUGE_VAL, 0, 0, &rs, NULL);
    return rs;
}

/* After the norm, stage st's optimizer on its share (ZeRO 1 and 2: the
 * dense parameters' over dp cp, the experts' over their expert-DP group)
 * and ZeRO's all-gather of the updated parameters (ZeRO-1's bucket by
 * bucket, z1; ZeRO-2's a run of one group at a time). */
static void optimizer_and_gather(const ctx *x, const chunk_cost *pc, int st, double z1, double *opt, double *gather)
{
    const ptdp_plan_layout *l = x->l;
    const int v = x->v;
    const chunk_cost *here[v];
    double numel = 0, experts = 0;
    for (int k = 0; k < v; k++) {
        here[k] = &pc[chunk_flat(x, st, k)];
        numel += here[k]->numel;
        for (int i = 0; i < here[k]->nunits; i++)
            experts += x->mesh.ep > 1 ? here[k]->u[i].experts : 0;
    }
    double share = l->zero >= 1 && x->mesh.ndp > 1 ? numel / x->mesh.ndp : numel;
    if (l->zero >= 1 && experts > 0)
        share = (numel - experts) / x->mesh.ndp + experts / x->mesh.nedp;
    *opt = secs(x, optimizer_flops(x, share));
    *gather = l->zero == 1 ? z1 : l->zero == 2 ? dp_coll(&x->mesh, PTDP_COLL_ALL_GATHER, numel * x->store) : 0;
    if (l->zero == 2 && experts > 0) {
        double rs;
        *gather = 0;
        dp_buckets(x, PTDP_COLL_REDUCE_SCATTER, here, v, HUGE_VAL, 0, 0, &rs, gather);
    }
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
            send[g] = ptdp_cost_message_between(x->rq->profile, (size_t)((double)x->shape.Rl * x->shape.C * REAL),
                                                world_rank(&x->mesh, 0, 0, 0, stage_of(x, g)),
                                                world_rank(&x->mesh, 0, 0, 0, stage_of(x, g + 1)));
    }
    return rc;
}

/* ------------------------------------------------------------ the step */

/* The pricing context of a layout: its mesh, a micro-batch's shapes and
 * work, the schedule's entry (*e) and the model's planning table (*mp). */
static int ctx_of(const ptdp_plan_request *rq, const ptdp_plan_layout *l, ctx *x, const ptdp_schedule_entry **e,
                  const ptdp_model_plan **mp)
{
    const ptdp_model_config *c = &rq->model;
    *x = (ctx){ .rq = rq, .l = l, .peak = ptdp_profile_peak(rq->profile, rq->bf16),
                .store = rq->bf16 ? 2.0 : REAL, .full = l->recompute == PTDP_RECOMPUTE_FULL, .z3 = l->zero == 3 };
    mesh_of(&x->mesh, rq->profile, l);
    if (x->mesh.ndp < 2)
        x->z3 = false;
    *e = ptdp_plan_schedule(l);
    if (x->peak <= 0)
        return PTDP_EINVAL;
    x->split_bw = ((*e)->caps & PTDP_SCHED_SPLIT_BACKWARD) != 0;
    x->lay = ptdp_plan_pp_layout(l);
    x->v = x->lay.v;
    *mp = ptdp_model_of(c)->plan;
    if (*mp == NULL)
        return PTDP_EINVAL;
    const bool selective = l->recompute == PTDP_RECOMPUTE_SELECTIVE;
    (*mp)->dims(c, l->micro_batch_size, l->tp, l->sp && l->tp > 1, x->mesh.cp, &x->shape);
    (*mp)->flops(rq->profile, c, l->micro_batch_size, l->tp, l->sp, x->mesh.cp, selective, false, &x->fl);
    (*mp)->flops(rq->profile, c, l->micro_batch_size, l->tp, l->sp, x->mesh.cp, selective, true, &x->fl_split);
    return PTDP_OK;
}

/* What stage st does after its last backward, once a step: DP's or
 * ZeRO's gradient traffic (*traffic in all, *exposed of it waited for;
 * ZeRO-1's gathers in *z1_gather), SP's LayerNorm sums, the tied
 * embedding's copies over DP under ZeRO, DualPipe's mirror sum.  Returns
 * when the stage is done with them. */
static double after_backward(const ctx *x, const chunk_cost *pc, const pipe_times *pt, int st, double z2_rs,
                             const chunk_cost **mine, double *z1_gather, double *traffic, double *exposed)
{
    const ptdp_plan_request *rq = x->rq;
    const ptdp_plan_layout *l = x->l;
    const int v = x->v;
    double t = pt->end[st];
    *traffic = 0;
    *exposed = 0;
    for (int k = 0; k < v; k++)
        mine[k] = &pc[chunk_flat(x, st, k)];
    const double wte = (double)x->shape.Vl * x->shape.C;
    const bool has_first = holds_end(x, st, false), has_last = holds_end(x, st, true);
    if (l->zero <= 1) {
        *z1_gather = 0;
        const double cap = rq->bucket_mb > 0 ? (double)(size_t)(rq->bucket_mb * 1024 * 1024 / REAL) : 1;
        double e0 = dp_buckets(x, l->zero == 0 ? PTDP_COLL_ALL_REDUCE : PTDP_COLL_REDUCE_SCATTER, mine, v, cap,
                               pt->last_b[st], t, traffic, l->zero == 1 ? z1_gather : NULL);
        t += e0;
        *exposed = e0;
    } else if (l->zero == 2) {
        const double per = x->split_bw ? 2 : 1;
        *traffic = z2_rs * per * l->micro_batches * v;
        *exposed = l->overlap ? z2_rs : *traffic;   /* the last, waited for before the optimizer */
        if (l->overlap)
            t += z2_rs;
    } else if (x->z3) {
        double g3 = 0, r3 = 0;
        for (int k = 0; k < v; k++)
            for (int i = 0; i < mine[k]->nunits; i++) {
                g3 += mine[k]->u[i].gather;
                r3 += mine[k]->u[i].rs;
            }
        *traffic = (2 * g3 + r3) * l->micro_batches;
        *exposed = l->overlap ? 0 : *traffic;
    }
    /* SP's LayerNorm weights and biases (4 a block, 2 for LN_f): each
     * all-reduced over TP (ptdp_model_sum_groups); under ZeRO they and the
     * tied embedding are first made whole over DP (zero.c, sum_groups_whole) */
    const bool sp = l->sp && l->tp > 1;
    double nsp = 0;
    for (int k = 0; sp && k < v; k++) {
        int g, n;
        within_copy(x, chunk_at(x, st, k), &g, &n);
        nsp += 4.0 * chunk_layers(rq->model.layers, n, g) + (g == n - 1 ? 2 : 0);
    }
    t += nsp * tp_coll(&x->mesh, PTDP_COLL_ALL_REDUCE, x->shape.C * REAL);
    if (l->zero >= 1) {
        t += nsp * dp_coll(&x->mesh, PTDP_COLL_ALL_REDUCE, x->shape.C * REAL);
        /* each tied copy here (DualPipe's stage may hold both) */
        const int tied = l->pp < 2 || ptdp_pp_layout_copies(&x->lay) == 2 ? 0   /* DualPipe's: in mirror_sum */
                       : x->lay.shape == PTDP_CHUNKS_RING ? has_first || has_last : has_first + has_last;
        t += tied * dp_coll(&x->mesh, PTDP_COLL_ALL_REDUCE, wte * REAL);
    }
    return t + mirror_sum(x, pc, st);
}

/* The tied embedding (stage 0 and the last stage sum their copies), then
 * everybody at the gradient norm: DP (ZeRO) or EP, TP and PP all-reduces of
 * one double.  Returns when the norm is known. */
static double tie_and_norm(const ctx *x, pipe_times *pt)
{
    const ptdp_plan_request *rq = x->rq;
    const ptdp_plan_layout *l = x->l;
    if (l->pp > 1) {
        const int a = 0, b = stage_of(x, l->pp * x->v - 1);
        int ranks[2] = { world_rank(&x->mesh, 0, 0, 0, a), world_rank(&x->mesh, 0, 0, 0, b) };
        double tie = a == b ? 0
                            : ptdp_cost_collective_nodes(rq->profile, PTDP_COLL_ALL_REDUCE,
                                                         (size_t)((double)x->shape.Vl * x->shape.C * REAL), 2,
                                                         ptdp_profile_nodes_spanned(rq->profile, ranks, 2));
        double meet = pt->end[a] > pt->end[b] ? pt->end[a] : pt->end[b];
        pt->end[a] = pt->end[b] = meet + tie;
    }
    double sync = 0;
    for (int st = 0; st < l->pp; st++)
        sync = pt->end[st] > sync ? pt->end[st] : sync;
    if (l->zero > 0)
        sync += dp_coll(&x->mesh, PTDP_COLL_ALL_REDUCE, sizeof(double));
    else if (x->mesh.ep > 1)   /* each EP rank its experts' squares (zero.c) */
        sync += coll(&x->mesh, PTDP_COLL_ALL_REDUCE, sizeof(double), x->mesh.ep, x->mesh.ep_nodes);
    sync += tp_coll(&x->mesh, PTDP_COLL_ALL_REDUCE, sizeof(double));
    sync += coll(&x->mesh, PTDP_COLL_ALL_REDUCE, sizeof(double), l->pp,
                 span(rq->profile, l->pp, world_rank(&x->mesh, 0, 0, 0, 1)));
    return sync;
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
    mp->step_flops(c, B, x->full, l->recompute == PTDP_RECOMPUTE_SELECTIVE, &out->model_flops,
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
    if (rc == 0 && l->zero == 2 && x.mesh.ndp > 1) {
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

    double post = 0, dp_total = 0, dp_exposed = 0, opt_max = 0;
    for (int st = 0; rc == 0 && st < l->pp; st++) {
        double traffic, exposed;
        pt.end[st] = after_backward(&x, pc, &pt, st, z2_rs, mine, &z1_gather[st], &traffic, &exposed);
        if (l->zero == 3 && x.z3)   /* ZeRO-3: the last stage's, as it always was */
            dp_exposed = exposed;
        else
            dp_exposed = exposed > dp_exposed ? exposed : dp_exposed;
        dp_total = traffic > dp_total ? traffic : dp_total;
    }
    const double sync = rc == 0 ? tie_and_norm(&x, &pt) : 0;
    for (int st = 0; rc == 0 && st < l->pp; st++) {
        double opt, gather;
        optimizer_and_gather(&x, pc, st, z1_gather[st], &opt, &gather);
        opt_max = opt > opt_max ? opt : opt_max;
        post = opt + gather > post ? opt + gather : post;
    }
    if (rc == 0) {
        report(&x, mp, pc, send, &pt, sync + post, out);
        out->dp_comm_s = dp_total;
        out->dp_exposed_s = dp_exposed;
        out->optimizer_s = opt_max;
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
