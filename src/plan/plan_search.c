/*
 * plan_search.c — every layout of a model on N GPUs, the ones that fit, the
 * fastest first.
 *
 * The layouts are the ways to write N as a product and to choose the rest:
 *
 *     N = dp x tp x pp x cp          tp | heads, ffn, padded vocab
 *     M = B / (b x dp)               b  | B / dp
 *     schedule ∈ the registry's rows it tries unasked (PTDP_SCHED_PLANNED:
 *                1f1b, gpipe, interleaved with v ≥ 2 and pp v ≤ L, zb-h1);
 *                any other row (dualpipev, dualpipe) when --schedule names it
 *     recompute ∈ {none, selective, full}, ZeRO 0..3, sp (tp > 1)
 *     ep | dp cp and ep | E for a mixture of E experts (--ep fixes it)
 *     overlap on wherever ptdp train allows it (it never costs time) —
 *     but off under ZeRO-3 when the unit it prefetches is what does not fit
 *
 *         enumerate ──cheap rules──► ptdp_plan_layout_check ──► memory
 *           (loops)   (no strings)    (the training loop's own   (drop what
 *                                      rules, the last word)      does not fit)
 *                                                                    │
 *           ranked by ptdp_plan_time_of, best first  ◄── in order of a bound
 *
 * Memory first, because it is cheap; time last, because it runs the
 * pipeline's schedule.  Asked for the best K, the search does not time
 * every fitting layout.  It works out a lower bound of each one's step:
 *
 *     T ≥ max( M (blocks_0 (F + B + R) + embedding),      the busiest device's
 *              fill + M (blocks_last (F + B + R) + head) )   own work, after the
 *                                                           pipeline's fill
 *
 * F and B are a block's forward and backward for one micro-batch, priced
 * by the very functions the model charges the clock with (model_plan.h: every
 * GEMM at the profile's efficiency for its shape), R = F under full
 * recomputation, fill = micro-batch 0's forward through the first chunk of
 * every stage before the last — no communication, no optimizer.  It times
 * layouts in the order of that bound and stops when the bound passes the
 * K-th best step found: no layout left can beat it, so the K best are
 * exact.  Should the cost model ever price a layout below its bound, the
 * search notices and times every fitting layout instead.
 *
 * When nothing can divide, the message says what would (the first rule
 * broken, and the nearest --gpus and --batch with a layout); when nothing
 * fits, the smallest peak found, its layout, and how many GPUs would do.
 */
#include "ptdp/plan_search.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/arena.h"
#include "ptdp/error.h"
#include "ptdp/model_plan.h"
#include "ptdp/models.h"
#include "ptdp/schedule.h"
#include "ptdp/zero.h"
#include "plan/plan_impl.h"

/* ------------------------------------------------------------ the bound */

/* The planning table of the request's model (model_plan.h). */
static const ptdp_model_plan *plan_of(const ptdp_plan_request *rq)
{
    return ptdp_model_of(&rq->model)->plan;
}

/* The experts of the model's mixtures (model_plan.h; 0: dense). */
static int experts_of(const ptdp_plan_request *rq)
{
    const ptdp_model_plan *mp = plan_of(rq);
    return mp->experts != NULL ? mp->experts(&rq->model) : 0;
}

/* What one micro-batch costs a device of a tp x cp group, from the pricing
 * functions the model charges the clock with (model_plan.h), in seconds. */
typedef struct {
    int tp, cp, b, ep, etp;
    bool sp;
    ptdp_plan_core core;
    double block_f, block_b;      /* one block's forward, its whole backward (dW included) */
    double embed_f, embed;        /* the embedding's forward; forward + backward           */
    double head;                  /* LN_f, the head and the loss, forward + backward       */
} chunk_cost;

static chunk_cost chunk_cost_of(const ptdp_plan_request *rq, const ptdp_plan_layout *l)
{
    const ptdp_profile *p = rq->profile;
    const double peak = ptdp_profile_peak(p, rq->bf16);
    const int cp = l->cp > 1 ? l->cp : 1;
    const ptdp_plan_core core = ptdp_plan_core_of(rq, l->recompute);
    ptdp_plan_flops f;
    plan_of(rq)->flops(p, &rq->model, l->micro_batch_size, l->tp, l->sp, cp, core, false, rq->bf16,
                       rq->fp8 != NULL, &f);
    chunk_cost c = {
        .tp = l->tp, .cp = cp, .b = l->micro_batch_size, .sp = l->sp, .core = core,
        .block_f = f.block_fwd / peak,
        .block_b = f.block_bwd / peak,
        .embed_f = f.embed_fwd / peak,
    };
    c.embed = c.embed_f + f.embed_bwd / peak;
    c.head = (f.head_fwd + f.head_bwd + f.lnf_bwd) / peak;
    /* a mixture's block may cost less than a dense one: the bound takes
     * the cheaper (model_plan.h, uniform routing) */
    c.ep = l->ep > 1 ? l->ep : 1;
    c.etp = l->etp;
    ptdp_plan_moe mo;
    if (ptdp_plan_moe_of(rq, l, false, &mo)) {
        const double f_moe = (mo.fwd + mo.here * mo.row_fwd) / peak, b_moe = (mo.bwd + mo.here * mo.row_bwd) / peak;
        c.block_f = c.block_f < f_moe ? c.block_f : f_moe;
        c.block_b = c.block_b < b_moe ? c.block_b : b_moe;
    }
    return c;
}

/* Blocks of stage s over its v chunks (the balanced cut, model.h: model chunk g
 * of n = pp v has L / n blocks, one more when g < L % n), counted without
 * walking the chunks: chunk c of stage s is model chunk c pp + s, and those below
 * L % n get the extra block. */
static int stage_blocks(int layers, int pp, int v, int s)
{
    const int n = pp * v, r = layers % n;
    const int extra = r > s ? (r - s + pp - 1) / pp : 0;
    return v * (layers / n) + (extra < v ? extra : v);
}

/* Every device computes its own work one model chunk after another, so a step
 * lasts at least the work of its busiest device; and the last stage can
 * start nothing before micro-batch 0 has gone forward through the first
 * chunk of every stage before it (the fill):
 *
 *     T ≥ max( M (blocks_0 (F + B + R) + embedding),
 *              fill + M (blocks_last (F + B + R) + head) )
 *
 * F, B a block's forward and backward as the model charges them, R = F under
 * full recomputation.  No communication, no optimizer: a lower bound. */
static double bound_of(const ptdp_plan_request *rq, const ptdp_plan_layout *l, const chunk_cost *c)
{
    const int L = rq->model.layers, p = l->pp, v = l->virtual_stages > 1 ? l->virtual_stages : 1;
    const double M = l->micro_batches;
    const double block = c->block_f + c->block_b + (l->recompute == PTDP_RECOMPUTE_FULL ? c->block_f : 0);
    const ptdp_pp_layout lay = ptdp_plan_pp_layout(l);
    if (lay.shape != PTDP_CHUNKS_RING) {
        /* DualPipe: device 0 holds the model's first chunk and its last
         * (a V of 2p), or the first stage of one copy and the last of the
         * other, each running M / 2 micro-batches: its own work, no fill */
        const bool dual = ptdp_pp_layout_copies(&lay) == 2;
        const int n = dual ? p : 2 * p, r = L % n;
        const int blocks = 2 * (L / n) + (r > 0) + (r > n - 1);
        return (dual ? M / 2 : M) * (blocks * block + c->embed + c->head);
    }
    if (p == 1)
        return M * (L * block + c->embed + c->head);
    const double first = M * (stage_blocks(L, p, v, 0) * block + c->embed);
    double fill = c->embed_f;   /* model chunk s of the p v: L / (p v) blocks, one more below L % (p v) */
    for (int s = 0; s + 1 < p; s++)
        fill += (L / (p * v) + (s < L % (p * v) ? 1 : 0)) * c->block_f;
    const double last = fill + M * (stage_blocks(L, p, v, p - 1) * block + c->head);
    return first > last ? first : last;
}

double ptdp_plan_step_lower_bound(const ptdp_plan_request *rq, const ptdp_plan_layout *l)
{
    chunk_cost c = chunk_cost_of(rq, l);
    return bound_of(rq, l, &c);
}

/* The model chunks' costs of the layouts met lately: many layouts share a
 * (tp, cp, b, sp, selective). */
enum { COST_CACHE = 32 };
typedef struct {
    chunk_cost c[COST_CACHE];
    int n, next;
} cost_cache;

static double cached_bound(cost_cache *k, const ptdp_plan_request *rq, const ptdp_plan_layout *l)
{
    const int cp = l->cp > 1 ? l->cp : 1;
    const ptdp_plan_core core = ptdp_plan_core_of(rq, l->recompute);
    for (int i = 0; i < k->n; i++) {
        const chunk_cost *c = &k->c[i];
        if (c->tp == l->tp && c->cp == cp && c->b == l->micro_batch_size && c->sp == l->sp && c->core == core &&
            c->ep == (l->ep > 1 ? l->ep : 1) && c->etp == l->etp)
            return bound_of(rq, l, c);
    }
    chunk_cost *c = &k->c[k->next];
    *c = chunk_cost_of(rq, l);
    k->next = (k->next + 1) % COST_CACHE;
    if (k->n < COST_CACHE)
        k->n++;
    return bound_of(rq, l, c);
}

/* ---------------------------------------------------------- enumeration */

typedef struct {
    ptdp_plan_layout l;
    double mem, bound;
    long long order;
} entry;

enum { PROBE_NONE, PROBE_VALID, PROBE_FITS };   /* stop at the first such layout */

typedef struct {
    const ptdp_plan_request *rq;
    double device_bytes;
    int probe;
    bool found;                    /* a probe's answer                             */
    ptdp_plan_search_stats st;
    entry *e;
    long long n, cap;
    long long work, budget;        /* the work done so far, and its limit
                                      (WORK_MAX: the probes get what is left)     */
    int rc;                        /* an error of the memory model, ENOMEM, or
                                      PTDP_EINVAL past WORK_MAX                     */
    char why[PTDP_MSG_MAX];        /* the first reason a whole layout was refused  */
} search;

/* The most work one question costs, the search and the explanation of a
 * refusal together (plan_search.h: PTDP_PLAN_WORK_MAX units of some
 * PTDP_PLAN_UNIT_NS each, about 4.5 s of one core).  Each step is charged
 * what it costs, measured (`ptdp bench plan` prints the nanoseconds a
 * unit took, the whole search's CPU time over its units):
 *
 *   a layout considered    CONSIDER_UNITS        the cheap rules
 *   a valid one            VALID_UNITS + one a stage the memory model
 *                          weighs (+ MOE_UNITS: one mixture priced, its
 *                          attention's GEMMs at their efficiency)
 *   a fitting one          BOUND_UNITS           its lower bound, sorted
 *   a timing               TIME_UNITS + TIME_PLAY_UNITS a model chunk and
 *                          micro-batch it plays (p v (m1 + m2) for a long
 *                          schedule drawn through its straight line) +
 *                          TIME_STAGE_UNITS a stage + TIME_EXPERT_UNITS an
 *                          expert held and mixture (DP's buckets walk each
 *                          expert's tensors)
 *
 * The flags bound the layouts (--gpus, --batch, --layers make them many);
 * past the limit the search stops and says which flags to fix, so every
 * question is answered in seconds (tests/cli/plan_limits.sh).  The PTD-P
 * paper's 1T GPT on 3072 GPUs, every layout free, costs 112M to weigh.
 * A timing runs from some 4 µs (one stage) to milliseconds (a pipeline of
 * 64 stages plays 20,000 micro-batch chunks): a profile with no memory
 * size, where every layout fits and the bound rarely stops the timing,
 * still answers or refuses within the limit. */
#define WORK_MAX PTDP_PLAN_WORK_MAX
enum { CONSIDER_UNITS = 2, VALID_UNITS = 30, MOE_UNITS = 45, BOUND_UNITS = 20 };
enum { TIME_UNITS = 270, TIME_PLAY_UNITS = 2, TIME_STAGE_UNITS = 8, TIME_EXPERT_UNITS = 1 };

/* What timing layout l costs (above). */
static long long timing_units(const ptdp_plan_request *rq, const ptdp_plan_layout *l)
{
    const ptdp_schedule_entry *e = ptdp_plan_schedule(l);
    const int v = ptdp_plan_chunks(l), m = l->micro_batches;
    int m1 = m, m2 = m;
    if (e->line != NULL)
        e->line(l->pp, v, &m1, &m2);
    const long long played = m <= m2 ? m : (long long)m1 + m2;
    const long long experts = (long long)experts_of(rq) / (l->ep > 1 ? l->ep : 1) *
                              ptdp_plan_moe_blocks(rq, 0, rq->model.layers);
    return TIME_UNITS + TIME_PLAY_UNITS * (long long)l->pp * v * played + TIME_STAGE_UNITS * (long long)l->pp +
           TIME_EXPERT_UNITS * experts;
}

static bool stop(const search *s)
{
    return s->rc != 0 || s->found;
}

/* The rules ptdp train checks, without building a message: most layouts
 * the loops make fail one of these, and need no more. */
static bool cheap_ok(const ptdp_plan_request *rq, const ptdp_plan_layout *l)
{
    const ptdp_schedule_entry *e = ptdp_plan_schedule(l);
    const int v = l->virtual_stages, spread = l->dp * l->cp;
    const ptdp_zero_stage *row = ptdp_zero_stage_of(l->zero);
    if (rq->bf16 && ptdp_schedule_refuses(e, PTDP_FEATURE_BF16, v, NULL, 0))
        return false;
    if (row->shards_params && (spread == 1 || ptdp_schedule_refuses(e, PTDP_FEATURE_ZERO3, v, NULL, 0)))
        return false;
    if (l->sp && l->cp > 1 && (ptdp_model_positions(&rq->model) / l->cp) % l->tp != 0)
        return false;
    if ((row->shards_params || l->sp) && experts_of(rq) > 0)
        return false;   /* what a mixture of experts does not run with (the model's own rules say why) */
    return true;
}

/* The stages the memory model weighs for a layout (plan_memory.c): the
 * first, the second and the last with one chunk a stage and no deferred
 * W; every stage's every chunk otherwise. */
static long long weighed_stages(const ptdp_plan_layout *l)
{
    if (ptdp_plan_monotone(l))
        return l->pp < 3 ? l->pp : 3;
    return (long long)l->pp * ptdp_plan_chunks(l);
}

/* Count `units` of work; past WORK_MAX stop the search with a message
 * naming the flags that make the layouts many. */
static bool spend(search *s, long long units)
{
    s->work += units;
    if (s->work <= s->budget)
        return true;
    if (s->rc == 0) {
        s->rc = PTDP_EINVAL;
        s->st.over_limit = true;
        snprintf(s->why, sizeof s->why,
                 "these flags leave too many layouts to weigh (over the planner's limit of %lld units of work, "
                 "some %d ns each: %.1f s): fix part of the layout (--tp, --pp, "
                 "--cp, --micro-batch-size, --schedule, --virtual-stages, --zero, --recompute, --sp) or plan "
                 "fewer --gpus, a smaller --batch or fewer --layers", WORK_MAX, PTDP_PLAN_UNIT_NS,
                 1e-9 * PTDP_PLAN_UNIT_NS * (double)WORK_MAX);
    }
    return false;
}

static int add_entry(search *s, const ptdp_plan_layout *l, double mem)
{
    if (s->n == s->cap) {
        long long cap = s->cap ? 2 * s->cap : 1024;
        entry *e = realloc(s->e, (size_t)cap * sizeof *e);
        if (e == NULL)
            return PTDP_ENOMEM;
        s->e = e;
        s->cap = cap;
    }
    s->e[s->n] = (entry){ .l = *l, .mem = mem, .order = s->n };
    s->n++;
    return 0;
}

static void consider(search *s, ptdp_plan_layout *l)
{
    const ptdp_plan_request *rq = s->rq;
    s->st.considered++;
    if (!spend(s, CONSIDER_UNITS))
        return;
    if (!cheap_ok(rq, l))
        return;
    /* a sharded gradient's one reduce-scatter cannot start early with experts */
    l->overlap = (l->dp * l->cp > 1 || (l->sp && l->tp > 1)) &&
                 !ptdp_schedule_refuses(ptdp_plan_schedule(l), PTDP_FEATURE_OVERLAP, l->virtual_stages, NULL, 0) &&
                 !((l->ep > 1 || ptdp_plan_fold_slices(l) > 1) && ptdp_zero_stage_of(l->zero)->shards_grads) &&
                 !(rq->zero_qgz > 0 && ptdp_zero_stage_of(l->zero)->shards_params);   /* qgZ's all-to-alls block */
    char msg[PTDP_MSG_MAX];
    if (ptdp_plan_layout_check(rq, l, msg, sizeof msg) != 0) {
        if (s->why[0] == '\0')
            snprintf(s->why, sizeof s->why, "%s", msg);
        return;
    }
    s->st.valid++;
    if (!spend(s, VALID_UNITS + weighed_stages(l) + (experts_of(rq) > 0 ? MOE_UNITS : 0)))
        return;
    if (s->probe == PROBE_VALID) {
        s->found = true;
        return;
    }
    ptdp_plan_memory mem;
    int rc = ptdp_plan_memory_of(rq, l, &mem);
    if (rc == 0 && l->overlap && ptdp_zero_stage_of(l->zero)->shards_params && s->device_bytes > 0 && mem.total > s->device_bytes) {
        /* ZeRO-3's --overlap holds the next unit beside this one: where
         * that is what does not fit, the layout runs without it */
        ptdp_plan_layout off = *l;
        ptdp_plan_memory m2;
        off.overlap = false;
        if (ptdp_plan_memory_of(rq, &off, &m2) == 0 && m2.total <= s->device_bytes) {
            *l = off;
            mem = m2;
        }
    }
    if (rc != 0) {
        s->rc = rc;
        snprintf(s->why, sizeof s->why, "the memory model refused dp %d tp %d pp %d cp %d (status %d)", l->dp,
                 l->tp, l->pp, l->cp, rc);
        return;
    }
    if (!s->st.have_smallest || mem.total < s->st.smallest_memory.total) {
        s->st.have_smallest = true;
        s->st.smallest = *l;
        s->st.smallest_memory = mem;
    }
    if (s->device_bytes > 0 && mem.total > s->device_bytes)
        return;
    s->st.fitting++;
    if (s->probe == PROBE_FITS) {
        s->found = true;
        return;
    }
    s->rc = add_entry(s, l, mem.total);
}

/* The choices below the splits: schedule (and v), ZeRO, recompute, sp. */
static void enumerate_choices(search *s, ptdp_plan_layout *l)
{
    const ptdp_plan_request *rq = s->rq;
    /* the rows it tries unasked (DualPipe's two only when --schedule names them) */
    for (int k = 0; k < ptdp_schedule_count() && !stop(s); k++) {
        const ptdp_schedule_entry *e = ptdp_schedule_at(k);
        const bool chunked = (e->caps & PTDP_SCHED_CHUNKS) != 0;
        if (rq->schedule != NULL ? e != rq->schedule : !(e->caps & PTDP_SCHED_PLANNED))
            continue;
        int v_lo = 1, v_hi = 1;
        if (chunked) {
            /* chunks round the ring: the row's counts (interleaved: pp ≥ 2,
             * M a multiple of pp); v ≥ 2 chunks, pp v ≤ L model chunks */
            char why[256];
            if (ptdp_schedule_check_row(e, l->pp, l->micro_batches, 2, why, sizeof why) != 0)
                continue;
            v_lo = 2;
            v_hi = rq->model.layers / l->pp;
        }
        if (rq->virtual_stages > 0) {
            if (rq->virtual_stages < v_lo || rq->virtual_stages > v_hi)
                continue;
            v_lo = v_hi = rq->virtual_stages;
        }
        l->schedule = e;
        for (int v = v_lo; v <= v_hi && !stop(s); v++) {
            l->virtual_stages = v;
            for (int z = 0; z <= 3 && !stop(s); z++) {
                if (rq->zero >= 0 && z != rq->zero)
                    continue;
                l->zero = z;
                for (int r = 0; r < PTDP_RECOMPUTE_COUNT && !stop(s); r++) {
                    if (rq->recompute >= 0 && r != rq->recompute)
                        continue;
                    if (rq->recompute < 0 && r == PTDP_RECOMPUTE_SELECTIVE && rq->attention_tiled)
                        continue;   /* tiles keep no probabilities: selective's plan is none's */
                    l->recompute = (ptdp_recompute)r;
                    for (int sp = 0; sp <= 1 && !stop(s); sp++) {
                        if ((rq->sp >= 0 && sp != rq->sp) || (sp && l->tp < 2) ||
                            (sp && ptdp_model_positions(&rq->model) % l->tp != 0))
                            continue;
                        l->sp = sp;
                        consider(s, l);
                    }
                }
            }
        }
    }
}

static bool fixed_or(int fixed, int x)
{
    return fixed < 0 || fixed == x;
}

static int divisors(long long n, long long *d);
enum { DIVISORS_MAX = 2048 };   /* every n < 2^31 has at most 1600 */

static long long gcd(long long a, long long b)
{
    while (b != 0) {
        const long long r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* Expert parallelism: ep over the divisors of dp x cp (folded: of the
 * tp/etp x dp x cp slices) that divide E (the experts split evenly over
 * the EP ranks), or --ep's; 1 for a dense model.  Those are the divisors
 * of gcd(dp cp, E), ascending: never every integer up to dp cp (a million
 * GPUs would walk a million a layout). */
static void enumerate_ep(search *s, ptdp_plan_layout *l, int E)
{
    const int slices = ptdp_plan_fold_slices(l), fixed = s->rq->ep > 0 ? s->rq->ep : -1;
    long long d[DIVISORS_MAX];
    const int n = divisors(gcd((long long)slices * l->dp * l->cp, E), d);
    for (int i = 0; i < n && !stop(s); i++) {
        if (!fixed_or(fixed, (int)d[i]))
            continue;
        l->ep = (int)d[i];
        enumerate_choices(s, l);
    }
}

/* MoE parallel folding (moe_fold.c): the experts' own TP size etp over the
 * divisors of tp, descending — etp = tp (0 here: attention's layout, no
 * folding) first — or --etp's; and for each, ep over the divisors of the
 * slices' tp/etp x dp x cp that divide E. */
static void enumerate_experts(search *s, ptdp_plan_layout *l)
{
    const int E = experts_of(s->rq), fixed = s->rq->ep > 0 ? s->rq->ep : -1;
    l->etp = 0;
    if (E == 0) {   /* dense: no expert parallelism to choose (--ep > 1: nothing runs) */
        l->ep = 1;
        if (fixed <= 1 && s->rq->etp <= 0)
            enumerate_choices(s, l);
        return;
    }
    long long d[DIVISORS_MAX];
    const int n = divisors(l->tp, d);
    for (int i = n - 1; i >= 0 && !stop(s); i--) {
        const int etp = (int)d[i];
        if (s->rq->etp > 0 && s->rq->etp != etp)
            continue;
        l->etp = etp < l->tp ? etp : 0;
        enumerate_ep(s, l, E);
    }
    l->etp = 0;
}

/* The divisors of n ascending, into d (room for DIVISORS_MAX):
 * trial division up to sqrt(n), so a search never walks every integer
 * up to --gpus or --batch.  Their count. */
static int divisors(long long n, long long *d)
{
    int lo = 0, hi = 0;
    long long big[DIVISORS_MAX / 2];
    for (long long k = 1; k * k <= n; k++)
        if (n % k == 0) {
            d[lo++] = k;
            if (k * k != n)
                big[hi++] = n / k;
        }
    while (hi > 0)
        d[lo++] = big[--hi];
    return lo;
}

/* The splits: tp, pp, cp, dp (each a divisor of N, in ascending order),
 * then b (a divisor of B / dp) and M. */
static void enumerate(search *s)
{
    const ptdp_plan_request *rq = s->rq;
    const ptdp_model_config *m = &rq->model;
    const int n = rq->gpus;
    long long dn[DIVISORS_MAX], db[DIVISORS_MAX];
    const int nd = n > 0 ? divisors(n, dn) : 0;
    for (int i = 0; i < nd && !stop(s); i++) {
        const int tp = (int)dn[i];
        if (!fixed_or(rq->tp, tp) || !plan_of(rq)->tp_ok(m, tp))
            continue;
        for (int j = 0; j < nd && dn[j] <= n / tp && dn[j] <= m->layers && !stop(s); j++) {
            const int pp = (int)dn[j];
            if ((n / tp) % pp != 0 || !fixed_or(rq->pp, pp))
                continue;
            for (int k = 0; k < nd && dn[k] <= n / (tp * pp) && !stop(s); k++) {
                const int cp = (int)dn[k];
                if ((n / (tp * pp)) % cp != 0 || !fixed_or(rq->cp,
                                                           cp) || (cp > 1 && ptdp_model_positions(m) % (2 * cp) != 0))
                    continue;
                const int dp = n / (tp * pp * cp);
                if (rq->batch % dp != 0)
                    continue;
                const long long per_replica = rq->batch / dp;
                const int nb = divisors(per_replica, db);
                for (int q = 0; q < nb && db[q] <= 0x7fffffff && !stop(s); q++) {
                    const long long b = db[q];
                    if (!fixed_or(rq->micro_batch_size, (int)b) || per_replica / b > 0x7fffffff)
                        continue;
                    ptdp_plan_layout l = {
                        .dp = dp, .tp = tp, .pp = pp, .cp = cp,
                        .micro_batch_size = (int)b, .micro_batches = (int)(per_replica / b),
                    };
                    enumerate_experts(s, &l);
                }
            }
        }
    }
}

static void search_run(search *s, const ptdp_plan_request *rq, double device_bytes, int probe, long long budget)
{
    memset(s, 0, sizeof *s);
    s->rq = rq;
    s->device_bytes = device_bytes;
    s->probe = probe;
    s->st.device_bytes = device_bytes;
    s->budget = budget;
    enumerate(s);
}

/* Is there a layout (PROBE_VALID) or a fitting one (PROBE_FITS) of rq with
 * this many GPUs and this batch? */
static bool probe(const ptdp_plan_request *rq, double device_bytes, int gpus, long long batch, int what,
                  long long *left)
{
    ptdp_plan_request q = *rq;
    q.gpus = gpus;
    q.batch = batch;
    search s;
    search_run(&s, &q, device_bytes, what, *left);
    *left -= s.work;
    free(s.e);
    return s.found;
}

/* ------------------------------------------------------ what would do */

/* Nothing divides: the first rule a layout broke, and the nearest --gpus
 * and --batch (the other one as given) with a layout. */
static void explain_nothing_divides(search *s, char *msg, size_t len)
{
    const ptdp_plan_request *rq = s->rq;
    const ptdp_model_config *m = &rq->model;
    const int positions = ptdp_model_positions(m);
    long long left = s->budget - s->work;   /* the probes' work, all together: what the search left */
    char why[PTDP_MSG_MAX];
    int fixed = (rq->tp > 0 ? rq->tp : 1) * (rq->pp > 0 ? rq->pp : 1) * (rq->cp > 0 ? rq->cp : 1);
    if (s->why[0] != '\0')
        snprintf(why, sizeof why, "%s", s->why);
    else if (rq->tp > 0 && !plan_of(rq)->tp_ok(m, rq->tp)) {
        snprintf(why, sizeof why, "--tp %d does not split the model", rq->tp);
        ptdp_model_check(m, rq->tp, 1, why, sizeof why);   /* its own message names its flags */
    }
    else if (rq->pp > 0 && rq->pp > m->layers)
        snprintf(why, sizeof why, "--pp %d: more stages than --layers %d", rq->pp, m->layers);
    else if (rq->pp > 0 && rq->virtual_stages > 1 && (long)rq->pp * rq->virtual_stages > m->layers)
        snprintf(why, sizeof why, "--layers %d cannot be cut into --pp %d x --virtual-stages %d = %d pieces",
                 m->layers, rq->pp, rq->virtual_stages, rq->pp * rq->virtual_stages);
    else if (rq->cp > 1 && positions % (2 * rq->cp) != 0)
        snprintf(why, sizeof why, "--cp %d: --seq-len %d must divide into 2 x cp = %d zigzag chunks", rq->cp,
                 positions, 2 * rq->cp);
    else if (rq->ep > 1)
        snprintf(why, sizeof why, "--ep %d must divide dp x cp (the experts are spread over data-parallel ranks)",
                 rq->ep);
    else if (rq->gpus % fixed != 0)
        snprintf(why, sizeof why, "--gpus %d is not a multiple of the fixed tp x pp x cp = %d", rq->gpus, fixed);
    else
        snprintf(why, sizeof why, "no dp = --gpus / (tp pp cp) and micro-batch size divide --batch %lld",
                 rq->batch);

    char gpus[96] = "", batch[96] = "";
    for (int d = 1; d <= 64 && gpus[0] == '\0'; d++) {
        int lo = rq->gpus - d, hi = rq->gpus + d;
        bool l_ok = lo >= 1 && probe(rq, 0, lo, rq->batch, PROBE_VALID, &left);
        bool h_ok = probe(rq, 0, hi, rq->batch, PROBE_VALID, &left);
        if (l_ok && h_ok)
            snprintf(gpus, sizeof gpus, "--gpus %d or %d", lo, hi);
        else if (l_ok || h_ok)
            snprintf(gpus, sizeof gpus, "--gpus %d", l_ok ? lo : hi);
    }
    for (long long d = 1; d <= 256 && batch[0] == '\0'; d++) {
        long long lo = rq->batch - d, hi = rq->batch + d;
        bool l_ok = lo >= 1 && probe(rq, 0, rq->gpus, lo, PROBE_VALID, &left);
        bool h_ok = probe(rq, 0, rq->gpus, hi, PROBE_VALID, &left);
        if (l_ok && h_ok)
            snprintf(batch, sizeof batch, "--batch %lld or %lld", lo, hi);
        else if (l_ok || h_ok)
            snprintf(batch, sizeof batch, "--batch %lld", l_ok ? lo : hi);
    }
    s->work = s->budget - left;
    if (gpus[0] != '\0' || batch[0] != '\0')
        snprintf(msg, len, "no layout of %d GPUs can run this: %s (nearest that would: %s%s%s)", rq->gpus, why,
                 gpus, gpus[0] && batch[0] ? "; " : "", batch);
    else
        snprintf(msg, len, "no layout of %d GPUs can run this: %s", rq->gpus, why);
}

static void layout_text(const ptdp_plan_layout *l, char *buf, size_t len)
{
    snprintf(buf, len, "dp %d tp %d pp %d cp %d b %d %s%s%.0d recompute %s zero %d%s", l->dp, l->tp, l->pp, l->cp,
             l->micro_batch_size, ptdp_plan_schedule(l)->name, l->virtual_stages > 1 ? " v " : "",
             l->virtual_stages > 1 ? l->virtual_stages : 0, ptdp_recompute_name(l->recompute), l->zero,
             l->sp ? " sp" : "");
}

/* Nothing fits: how far the best came, and how many GPUs would do. */
static void explain_nothing_fits(search *s, char *msg, size_t len)
{
    const ptdp_plan_request *rq = s->rq;
    long long left = s->budget - s->work;   /* the probes' work, all together: what the search left */
    char need[32], have[32], lay[160], more[96] = "";
    ptdp_format_bytes(s->st.smallest_memory.total, need, sizeof need);
    ptdp_format_bytes(s->device_bytes, have, sizeof have);
    layout_text(&s->st.smallest, lay, sizeof lay);
    for (int k = 1; k <= 6 && more[0] == '\0'; k++) {
        long long g = (long long)rq->gpus << k;
        if (g > 0x7fffffff)
            break;
        if (probe(rq, s->device_bytes, (int)g, rq->batch, PROBE_FITS, &left))
            snprintf(more, sizeof more, "; %lld GPUs of %s would (--gpus %lld)", g, have, g);
    }
    s->work = s->budget - left;
    snprintf(msg, len,
             "no layout fits in %s per GPU: the smallest peak of the %lld valid layouts is %s (%s); it would fit "
             "on GPUs with %s (--device-mem)%s", have, s->st.valid, need, lay, need, more);
}

/* ---------------------------------------------------------- the ranking */

static int by_bound(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->bound != y->bound)
        return x->bound < y->bound ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Better: a faster step; then less memory; then enumerated first.  Steps
 * equal to float precision (7 digits) tie: GPipe and 1F1B often take the
 * same time to the last bits of rounding, and then the one that keeps
 * fewer micro-batches should win. */
static bool better(const ptdp_plan_candidate *x, long long xo, const ptdp_plan_candidate *y, long long yo)
{
    const float xs = (float)x->time.step_s, ys = (float)y->time.step_s;
    if (xs != ys)
        return xs < ys;
    if (x->memory.total != y->memory.total)
        return x->memory.total < y->memory.total;
    return xo < yo;
}

/* The search's answer when it has none: why (the limit, host memory,
 * nothing divides, nothing fits: what would), in msg.  0 if it has one. */
static int search_failed(search *s, char *msg, size_t len)
{
    int rc = s->rc;
    if (rc != 0)
        snprintf(msg, len, "%s", rc == PTDP_ENOMEM ? "out of host memory holding the layouts" : s->why);
    else if (s->st.valid == 0) {
        explain_nothing_divides(s, msg, len);
        rc = PTDP_EINVAL;
    } else if (s->st.fitting == 0) {
        explain_nothing_fits(s, msg, len);
        rc = PTDP_EINVAL;
    }
    return rc;
}

/* Time the fitting layouts in the order of their bound, keeping the best
 * k in order (best[], their enumeration order in order[], *have of them);
 * stop when the bound passes the k-th best step (unless a layout ever
 * came under its bound).  0, or the status that stopped it with msg. */
static int time_in_order(search *s, double device_bytes, int k, ptdp_plan_candidate *best, long long *order, int *have,
                         char *msg, size_t len)
{
    const ptdp_plan_request *rq = s->rq;
    bool exact_bound = true;
    int rc = 0;
    for (long long i = 0; i < s->n; i++) {
        if (exact_bound && *have == k && s->e[i].bound > best[k - 1].time.step_s * (1 + 1e-6))
            break;   /* no layout left can beat the K-th */
        ptdp_plan_candidate c = { .layout = s->e[i].l, .fits = true };
        if (!spend(s, timing_units(rq, &s->e[i].l))) {
            rc = s->rc;
            snprintf(msg, len, "%s%s", s->why, device_bytes > 0 ? "" : " (the profile has no memory size, so no "
                     "layout is ruled out: --device-mem SIZE prunes them)");
            break;
        }
        if ((rc = ptdp_plan_memory_of(rq, &c.layout, &c.memory)) != 0 ||
            (rc = ptdp_plan_time_of(rq, &c.layout, &c.time)) != 0) {
            char lay[160];
            layout_text(&c.layout, lay, sizeof lay);
            snprintf(msg, len, "the cost model refused %s (status %d)", lay, rc);
            break;
        }
        s->st.timed++;
        if (c.time.step_s < s->e[i].bound * (1 - 1e-9))
            exact_bound = false;   /* the bound is not one: time them all */
        if (*have == k && !better(&c, s->e[i].order, &best[k - 1], order[k - 1]))
            continue;
        int at = *have < k ? (*have)++ : k - 1;
        while (at > 0 && better(&c, s->e[i].order, &best[at - 1], order[at - 1])) {
            best[at] = best[at - 1];
            order[at] = order[at - 1];
            at--;
        }
        best[at] = c;
        order[at] = s->e[i].order;
    }
    return rc;
}

int ptdp_plan_search_top(const ptdp_plan_request *rq, double device_bytes, int top, ptdp_plan_candidate **out,
                         int *count, ptdp_plan_search_stats *stats, char *msg, size_t len)
{
    *out = NULL;
    *count = 0;
    if (device_bytes <= 0 && rq->profile != NULL)
        device_bytes = rq->profile->mem_bytes;
    search *s = malloc(sizeof *s);
    if (s == NULL)
        return PTDP_ENOMEM;
    search_run(s, rq, device_bytes, PROBE_NONE, WORK_MAX);
    int rc = search_failed(s, msg, len);
    if (rc == 0 && !spend(s, BOUND_UNITS * s->n)) {   /* the bounds, sorted */
        rc = s->rc;
        snprintf(msg, len, "%s", s->why);
    }
    if (rc != 0) {
        s->st.work = s->work;
        if (stats)
            *stats = s->st;
        free(s->e);
        free(s);
        return rc;
    }

    /* Time in the order of the bound; keep the best K in order. */
    const long long n = s->n;
    const int k = top > 0 && top < n ? top : (int)n;
    cost_cache cache = { .n = 0 };
    for (long long i = 0; i < n; i++)
        s->e[i].bound = cached_bound(&cache, rq, &s->e[i].l);
    qsort(s->e, (size_t)n, sizeof *s->e, by_bound);
    ptdp_plan_candidate *best = malloc((size_t)k * sizeof *best);
    long long *order = malloc((size_t)k * sizeof *order);
    const bool held = best != NULL && order != NULL;
    int have = 0;
    if (held)
        rc = time_in_order(s, device_bytes, k, best, order, &have, msg, len);
    else {
        snprintf(msg, len, "out of host memory holding the candidates");
        rc = PTDP_ENOMEM;
    }
    free(order);
    s->st.work = s->work;
    if (stats && held)   /* (no stats when the candidates found no room) */
        *stats = s->st;
    free(s->e);
    free(s);
    if (rc != 0) {
        free(best);
        return rc;
    }
    *out = best;
    *count = have;
    return 0;
}

int ptdp_plan_search(const ptdp_plan_request *rq, double device_bytes, ptdp_plan_candidate **out, int *count,
                     char *msg, size_t len)
{
    return ptdp_plan_search_top(rq, device_bytes, 0, out, count, NULL, msg, len);
}
