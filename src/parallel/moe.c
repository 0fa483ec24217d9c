/*
 * moe.c — a mixture of experts in place of a block's feed-forward, for any
 * model: a router sends each token to k of E experts, and the token's
 * output is the gated sum of what its experts made of it.  The expert is
 * the model's own FFN (moe_impl.h's kind: a GELU MLP with biases, a
 * SwiGLU, …); everything around it is here, named after no model.
 *
 *   z      = n W_r^T                              logits, rows x E
 *   top-k  = the k largest z of a token           ties to the lower index
 *   g_j    = softmax over those k logits          (Mixtral's gates)
 *   out    = sum_j g_j expert_{e_j}(n)            the model's FFN
 *   aux    = alpha sum_i f_i P_i per sequence     f_i = E/(k T) count_i (no
 *                                                   gradient), P_i = mean softmax(z)_i
 *
 *          ┌─ router ─ top-k ─ gates ──────────────────────┐
 *   n ─────┤                                               ▼
 *          └─ dispatch ─► expert 0 ┐                      combine ─► out
 *               (rows by           ├─ stacked, expert     Σ g_j y
 *                expert, in        │   by expert
 *                position order) ─► expert E-1 ┘
 *
 * The router's arithmetic is nn/moe_route.c; this file runs it in a
 * block, with the experts, the dispatch and the combine.
 *
 * Shared experts (DeepSeek's, --moe-shared-experts S): S experts every
 * token takes, one FFN of the kind S F_e wide — never routed, gated or
 * dispatched, split over TP like the dense FFN:
 *
 *   out = sum_j g_j expert_{e_j}(n)  +  shared(n)
 *
 * It runs after the combine on all R rows, through the kind's own forward
 * and backward as one expert of R rows; its input gradient is added to
 * the routed one's.
 *
 * Capacity (GShard's groups, one sequence a group): with a factor c each
 * expert takes at most ceil(c k T / E) choices of a sequence, in position
 * order; a choice beyond contributes nothing, and the kept gates are not
 * renormalised.  The balance loss is added to the objective per sequence
 * as a mean over the global batch's sequences, so its gradient is scaled
 * by 1 / global batch (the model's loss scale, 1 / (B T) a position,
 * times T) and enters here, in the block's backward: every stage adds its
 * own blocks'.
 *
 * Expert parallelism (--ep N, mesh.h): EP rank r holds experts r E/N ..
 * (r+1) E/N - 1.  Each rank routes its own tokens; the stacked rows are
 * already in destination order, so one exchange of counts and one
 * all-to-all take them to their experts and one brings the outputs home
 * (ep.h); the backward mirrors it — dy goes out as the combine came back,
 * dx comes home as the dispatch went.  The dispatched rows stay where the
 * experts ran, for their backward:
 *
 *   rank 0 (experts 0, 1)              rank 1 (experts 2, 3)
 *   stacked  [e0 e0 e1 | e2 e3 e3]     stacked  [e0 e1 e1 | e2 e3]
 *             to 0       to 1                    to 0       to 1
 *                  \____ all-to-all (counts first) ____/
 *   runs e0 on [0's e0 e0, 1's e0]     runs e2 on [0's e2, 1's e2]
 *        e1 on [0's e1, 1's e1 e1]          e3 on [0's e3 e3, 1's e3]
 *                  ____ all-to-all back ____
 *   combine at home: out[t] = sum_j g_j y[slot]
 *
 * Tensor parallelism: each TP rank holds F/tp of every expert's hidden
 * units, routes the same tokens, and the expert's kind sums the partial
 * outputs (and input gradients) over the TP group where they ran.
 *
 * The router is a linear layer like the model's others, and runs through
 * the same op (parallel_linear.h), in storage precision (float under
 * bf16: Megatron's fp32 router), whole on every TP rank; under a split
 * backward (ZB-H1, DualPipe) its dW waits for W like every other linear's.
 *
 * What the block keeps is data-dependent: what the experts keep, one row
 * per kept choice, and their outputs, from the arena (so its peak is the
 * measured load's).  Under --precision bf16 the experts round their rows
 * where they make them, as the dense FFN's; the rows are kept as float and
 * sent as bf16, as Megatron's dispatcher sends its bf16 tensors (ep.h:
 * every value rounded on the wire, 2 B an element).
 */
#include <math.h>
#include <string.h>

#include "parallel/ep_impl.h"
#include "parallel/moe_impl.h"
#include "parallel/moe_tokens.h"
#include "ptdp/ep.h"
#include "ptdp/error.h"
#include "parallel/fp8_linear_impl.h"

/* ------------------------------------------------ what a block keeps */

/* The router's shape as a block keeps it: route_shape makes the whole
 * ptdp_moe_route_shape from it and the pass (the route scale and the bias
 * are the settings' and the model's, not each micro-batch's). */
typedef struct {
    int T, E, k;
    int score;                           /* ptdp_moe_score */
    double capacity, alpha;
} kept_shape;

struct ptdp_moe_acts {
    kept_shape shape;
    int rows, kept, dropped;
    /* The experts' side: the rows this device's experts ran, `here` of
     * them, local expert by local expert (per_expert[l] each, local_of(m)
     * experts).  Without expert parallelism these are the kept rows
     * themselves (here = kept, rows = load); with it, what the dispatch
     * brought (ep.h's plan). */
    int here;
    int *choice, *slot, *load, *token;   /* token: the row of each slot */
    ptdp_real *gate, *probs;             /* --moe-z-loss: the logits after probs (rows x E
                                            each), for its backward            */
    double *seq_counts;                  /* CP: the whole sequences' counts (and psum) */
    ptdp_real *y;                        /* kept x C: the experts' outputs, back home */
    ptdp_comm *ep;                       /* NULL: no expert parallelism  */
    ptdp_ep_plan plan;
    int *per_expert;
    ptdp_real *x;                        /* EP: here x C, the dispatched inputs */
    ptdp_real *keep[PTDP_MOE_KEEP_MAX];  /* here x F each: what the experts keep, and
                                            after them (shared experts) rows x
                                            F_shared: the shared FFN's         */
    double aux;
};

static ptdp_moe_route_shape route_shape(const ptdp_moe_pass *p, const ptdp_moe_acts *m)
{
    return (ptdp_moe_route_shape){ .T = m->shape.T, .E = m->shape.E, .k = m->shape.k,
                                   .capacity = m->shape.capacity, .alpha = m->shape.alpha,
                                   .score = (ptdp_moe_score)m->shape.score,
                                   .route_scale = p->settings->route_scale,
                                   .bias = p->bias != NULL ? p->bias->w.data : NULL,
                                   .groups = p->settings->groups, .group_top_k = p->settings->group_top_k };
}

/* The experts this device holds: E / ep of them under expert parallelism
 * (the plan's), all E without. */
static int local_of(const ptdp_moe_acts *m)
{
    return m->ep != NULL ? m->plan.local : m->shape.E;
}

static void *grab(ptdp_moe_pass *p, size_t bytes, const char *what)
{
    void *q = p->rc == 0 ? ptdp_alloc_uninit(p->dev, bytes > 0 ? bytes : 1, PTDP_MEM_ACTS, what) : NULL;
    if (q == NULL && p->rc == 0)
        p->rc = PTDP_ENOMEM;
    return q;
}

void ptdp_moe_free(ptdp_device *dev, ptdp_moe_acts **a)
{
    ptdp_moe_acts *m = *a;
    if (m == NULL)
        return;
    void *q[] = { m->choice, m->slot, m->load, m->token, m->gate, m->probs, m->seq_counts,
                  m->keep[0], m->keep[1], m->keep[2], m->y, m->x, m->ep != NULL ? m->per_expert : NULL };
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
        ptdp_free(dev, q[i]);
    ptdp_ep_plan_free(&m->plan);
    ptdp_free(dev, m);
    *a = NULL;
}

double ptdp_moe_aux(const ptdp_moe_acts *a)
{
    return a != NULL ? a->aux : 0.0;
}

/* CP: the balance loss of whole sequences, from the statistics of the
 * CP group's parts summed (ptdp_moe_sequence_stats); the counts stay for
 * the backward.  Every CP rank has the loss then: CP rank 0 reports it. */
static void whole_sequences(ptdp_moe_pass *p, ptdp_moe_acts *m)
{
    const int B = m->rows / m->shape.T, E = m->shape.E;
    m->seq_counts = grab(p, (size_t)2 * B * E * sizeof(double), "acts.moe_sequences");
    if (p->rc != 0)
        return;
    double *psum = m->seq_counts + (size_t)B * E;   /* counts, then psum: one all-reduce */
    const ptdp_moe_route_shape shape = route_shape(p, m);
    ptdp_moe_sequence_stats(&shape, m->rows, m->choice, m->probs, m->seq_counts, psum);
    p->rc = ptdp_all_reduce(p->mesh->cp_comm, m->seq_counts, m->seq_counts, (size_t)2 * B * E, PTDP_F64, PTDP_SUM);
    *p->linear.w0 = ptdp_wall_now();
    const double aux = ptdp_moe_balance(&shape, B, p->T_seq, m->seq_counts, psum);
    m->aux = p->mesh->cp_rank == 0 ? aux : 0.0;
}

/* The router's linear layer: in storage precision (float under bf16:
 * Megatron's fp32 router; never FP8), whole on every TP rank. */
static ptdp_linear_pass router_pass(const ptdp_moe_pass *p)
{
    ptdp_linear_pass c = p->linear;
    c.recipe = PTDP_RECIPE_STORAGE;
    c.fp8 = NULL;
    return c;
}

/* The router: logits, choices, gates, slots, the balance loss and (with
 * --moe-z-loss) the z-loss of this device's tokens, which keeps the logits
 * for its backward. */
static ptdp_moe_acts *route(ptdp_moe_pass *p, ptdp_tensor n)
{
    const ptdp_moe_settings *s = p->settings;
    const int R = n.rows, E = s->experts, K = s->top_k;
    ptdp_moe_acts *m = grab(p, sizeof *m, "acts.moe");
    if (m == NULL)
        return NULL;
    memset(m, 0, sizeof *m);
    m->shape = (kept_shape){ .T = p->T, .E = E, .k = K, .capacity = s->capacity, .alpha = s->aux_loss,
                             .score = s->score };
    const ptdp_moe_route_shape shape = route_shape(p, m);
    m->rows = R;
    m->choice = grab(p, (size_t)R * K * sizeof(int), "acts.moe_choice");
    m->slot = grab(p, (size_t)R * K * sizeof(int), "acts.moe_slot");
    m->load = grab(p, (size_t)E * sizeof(int), "acts.moe_load");
    m->gate = grab(p, (size_t)R * K * sizeof(ptdp_real), "acts.moe_gate");
    const bool keep_z = s->z_loss > 0;   /* its backward reads the logits: kept after probs */
    m->probs = grab(p, (size_t)(keep_z ? 2 : 1) * R * E * sizeof(ptdp_real),
                    keep_z ? "acts.moe_probs_logits" : "acts.moe_probs");
    ptdp_real *z = keep_z ? (m->probs != NULL ? m->probs + (size_t)R * E : NULL)
                          : grab(p, (size_t)R * E * sizeof(ptdp_real), "acts.moe_logits");
    if (p->rc == 0) {   /* z = n W_r^T, the piece since the norm charged */
        ptdp_linear_pass c = router_pass(p);
        const ptdp_linear_charge price = { .flops = p->router_flops };
        p->rc = ptdp_parallel_linear_forward(&c, &(ptdp_linear_layer){ .w = p->router }, ptdp_tensor_wrap(z, R, E), n,
                                             &price);
    }
    if (p->rc == 0) {
        m->aux = ptdp_moe_route(&shape, R, z, m->choice, m->gate, m->slot, m->probs, m->load, &m->dropped);
        const double zloss = keep_z ? ptdp_moe_z_loss(R, E, p->T_seq, s->z_loss, z) : 0.0;
        if (p->T_seq != p->T)
            whole_sequences(p, m);
        if (p->rc == 0 && p->tally != NULL && p->choices != NULL && !ptdp_moe_tally_counted(*p->tally, p->block))
            for (size_t c = 0; c < (size_t)R * K; c++)   /* before the capacity: every choice */
                p->choices[m->choice[c]] += 1;
        if (p->rc == 0 && p->tally != NULL && p->mesh->ep > 1 && !ptdp_moe_tally_counted(*p->tally, p->block))
            ptdp_ep_count_nodes(p->dev, ptdp_mesh_group(p->mesh, PTDP_GROUP_EP), E, R, K, m->choice, m->slot);
        if (p->rc == 0 && p->tally != NULL)
            p->rc = ptdp_moe_tally_add(p->dev, p->tally, p->nblocks, E, p->block, m->load, m->dropped, m->aux,
                                       zloss);
        m->kept = R * K - m->dropped;
        m->token = grab(p, (size_t)m->kept * sizeof(int), "acts.moe_token");
    }
    if (!keep_z)
        ptdp_free(p->dev, z);
    if (p->rc == 0)
        for (size_t c = 0; c < (size_t)R * K; c++)
            if (m->slot[c] >= 0)
                m->token[m->slot[c]] = (int)(c / (size_t)K);
    return m;
}

/* Where a block's choices went, as moe_tokens.h's passes read it. */
static ptdp_moe_routing routing(const ptdp_moe_acts *m, int C)
{
    return (ptdp_moe_routing){ .rows = m->rows, .K = m->shape.k, .C = C, .kept = m->kept, .slot = m->slot,
                               .token = m->token, .gate = m->gate };
}

/* The kept choices' inputs, stacked: x[slot] = n[token[slot]]. */
static void dispatch(const ptdp_moe_acts *m, ptdp_tensor n, ptdp_real *x)
{
    const ptdp_moe_routing r = routing(m, n.cols);
    ptdp_moe_dispatch(&r, n, x);
}

/* Where the experts run: here, on every kept row (no expert parallelism),
 * or on what the dispatch brings — counts exchanged (ep.h's plan), then
 * rows[l] = the rows every source sends for local expert l. */
static void experts_side(ptdp_moe_pass *p, ptdp_moe_acts *m)
{
    const int E = m->shape.E;
    ptdp_comm *ep = p->mesh->ep > 1 ? ptdp_mesh_group(p->mesh, PTDP_GROUP_EP) : NULL;
    const int local = ep != NULL ? E / ptdp_comm_size(ep) : E;
    m->ep = ep;
    if (ep == NULL) {   /* the kept rows, as the router stacked them */
        m->per_expert = m->load;
        m->here = m->kept;
        return;
    }
    m->per_expert = grab(p, (size_t)local * sizeof(int), "acts.moe_rows");
    if (p->rc != 0)
        return;
    if ((p->rc = ptdp_ep_plan_init(p->dev, ep, E, m->load, &m->plan)) != 0)
        return;
    memset(m->per_expert, 0, (size_t)local * sizeof(int));
    for (int s = 0; s < m->plan.N; s++)
        for (int l = 0; l < local; l++)
            m->per_expert[l] += m->plan.recv_rows[s * local + l];
    m->here = (int)m->plan.received;
}

/* The local experts as the kind sees them, with its tensors: kept (from
 * m) or the backward's scratch. */
static ptdp_moe_local ffn_of(const ptdp_moe_pass *p, const ptdp_moe_acts *m, ptdp_real *const *scratch, int C)
{
    ptdp_moe_local f = { .linear = &p->expert_linear, .model = p->model, .experts = p->experts, .local = local_of(m), .here = m->here,
                         .rows = m->per_expert, .F = p->F, .C = C };
    for (int i = 0; i < p->kind->nkeep; i++)
        f.keep[i] = ptdp_tensor_wrap(m->keep[i], m->here, p->F);
    for (int i = 0; scratch != NULL && i < p->kind->nscratch; i++)
        f.scratch[i] = ptdp_tensor_wrap(scratch[i], m->here, p->F);
    return f;
}

/* out[t] = sum_j g_j y[slot], in choice order (moe_tokens.c). */
static void combine(const ptdp_moe_acts *m, ptdp_tensor out)
{
    const ptdp_moe_routing r = routing(m, out.cols);
    ptdp_moe_combine(&r, m->y, out);
}

/* The shared FFN as the kind sees it: one expert on all R rows, what it
 * keeps after the routed experts' rows in each kept buffer. */
static ptdp_moe_local shared_of(const ptdp_moe_pass *p, const ptdp_moe_acts *m, ptdp_real *const *scratch,
                                const int *rows, int R, int C)
{
    ptdp_moe_local f = { .linear = &p->linear, .model = p->model, .experts = p->shared, .local = 1, .here = R,
                         .rows = rows, .F = p->F_shared, .C = C };
    for (int i = 0; i < p->kind->nkeep; i++)
        f.keep[i] = ptdp_tensor_wrap(m->keep[i] + (size_t)m->here * p->F, R, p->F_shared);
    for (int i = 0; scratch != NULL && i < p->kind->nscratch; i++)
        f.scratch[i] = ptdp_tensor_wrap(scratch[i], R, p->F_shared);
    return f;
}

/* out += shared(n), what it keeps in m. */
static void shared_forward(ptdp_moe_pass *p, ptdp_moe_acts *m, ptdp_tensor n, ptdp_tensor out)
{
    const int R = n.rows, C = n.cols;
    ptdp_real *y = grab(p, (size_t)R * C * sizeof(ptdp_real), "acts.moe_shared_out");
    if (p->rc == 0) {
        const ptdp_moe_local f = shared_of(p, m, NULL, &R, R, C);
        p->rc = p->kind->forward(&f, n, ptdp_tensor_wrap(y, R, C));
    }
    for (int r = 0; p->rc == 0 && r < R; r++)
        for (int c = 0; c < C; c++)
            *ptdp_at(out, r, c) += y[(size_t)r * C + c];
    ptdp_free(p->dev, y);
}

/* Its backward, from d (the gradient of out): its gradients, and dn +=
 * its input gradient. */
static void shared_backward(ptdp_moe_pass *p, const ptdp_moe_acts *m, ptdp_tensor n, ptdp_tensor d, ptdp_tensor dn)
{
    const int R = n.rows, C = n.cols;
    ptdp_real *scratch[PTDP_MOE_KEEP_MAX] = { NULL };
    for (int i = 0; i < p->kind->nscratch; i++)
        scratch[i] = grab(p, (size_t)R * p->F_shared * sizeof(ptdp_real), p->kind->scratch[i]);
    ptdp_real *dx = grab(p, (size_t)R * C * sizeof(ptdp_real), "grad.moe_shared_in");
    if (p->rc == 0) {
        const ptdp_moe_local f = shared_of(p, m, scratch, &R, R, C);
        p->rc = p->kind->backward(&f, n, d, ptdp_tensor_wrap(dx, R, C));
    }
    for (int r = 0; p->rc == 0 && r < R; r++)
        for (int c = 0; c < C; c++)
            *ptdp_at(dn, r, c) += dx[(size_t)r * C + c];
    ptdp_free(p->dev, dx);
    for (int i = p->kind->nscratch - 1; i >= 0; i--)
        ptdp_free(p->dev, scratch[i]);
}

/* Route, dispatch, run the experts, bring their outputs home, combine.
 * With expert parallelism the stacked rows travel to the EP rank of their
 * expert and back (ep.h): the dispatched inputs are kept for the
 * backward, which would otherwise have to send them again.  R_shared:
 * the rows the shared experts will keep after the routed ones. */
static void routed_forward(ptdp_moe_pass *p, ptdp_moe_acts **acts, ptdp_tensor n, ptdp_tensor out, int R_shared)
{
    const int C = out.cols;
    ptdp_moe_acts *m = *acts = route(p, n);
    if (p->rc != 0)
        return;
    experts_side(p, m);
    const size_t shared = p->shared != NULL ? (size_t)R_shared * p->F_shared : 0;   /* after the routed rows */
    for (int i = 0; i < p->kind->nkeep; i++)
        m->keep[i] = grab(p, ((size_t)m->here * p->F + shared) * sizeof(ptdp_real), p->kind->keep[i]);
    m->y = grab(p, (size_t)m->kept * C * sizeof(ptdp_real), "acts.moe_out");
    ptdp_real *x = grab(p, (size_t)m->kept * C * sizeof(ptdp_real), "acts.moe_dispatch");
    ptdp_real *yr = m->ep != NULL ? grab(p, (size_t)m->here * C * sizeof(ptdp_real), "acts.moe_expert_out") : m->y;
    if (m->ep != NULL)
        m->x = grab(p, (size_t)m->here * C * sizeof(ptdp_real), "acts.moe_expert_in");
    if (p->rc == 0) {
        dispatch(m, n, x);
        const ptdp_fp8_settings *f8 = p->linear.fp8 != NULL ? ptdp_fp8_linear_settings(p->linear.fp8) : NULL;
        if (m->ep != NULL && f8 != NULL && f8->comm)   /* --fp8-comm: DeepSeek-V3's FP8 dispatch */
            p->rc = ptdp_ep_dispatch_fp8(p->dev, m->ep, &m->plan, x, C, f8->recipe, m->x);
        else if (m->ep != NULL)
            p->rc = ptdp_ep_dispatch(p->dev, m->ep, &m->plan, x, C, m->x);
    }
    if (p->rc == 0) {
        const ptdp_moe_local f = ffn_of(p, m, NULL, C);
        p->rc = p->kind->forward(&f, ptdp_tensor_wrap(m->ep != NULL ? m->x : x, m->here, C),
                                 ptdp_tensor_wrap(yr, m->here, C));
        if (p->rc == 0 && m->ep != NULL)
            p->rc = ptdp_ep_combine(p->dev, m->ep, &m->plan, yr, C, m->y);
    }
    if (p->rc == 0)
        combine(m, out);
    if (m->ep != NULL)
        ptdp_free(p->dev, yr);
    ptdp_free(p->dev, x);
}

/* The experts' TP group: attention's, or under folding their own. */
static void expert_layout(ptdp_moe_pass *p)
{
    p->expert_linear = p->linear;
    p->expert_linear.tp = ptdp_moe_expert_tp(p->mesh);
}

/* The routed experts on this rank's rows — under folding (moe_fold.c) its
 * slice of n into its slice of out, the slices then gathered — and the
 * shared experts on all of n, in attention's layout. */
int ptdp_moe_forward(ptdp_moe_pass *p, ptdp_moe_acts **acts, ptdp_tensor n, ptdp_tensor out)
{
    if (p->rc != 0)
        return p->rc;
    expert_layout(p);
    const bool fold = ptdp_moe_fold_slices(p->mesh) > 1;
    routed_forward(p, acts, fold ? ptdp_moe_fold_slice(p->mesh, n) : n, fold ? ptdp_moe_fold_slice(p->mesh, out) : out,
                   n.rows);
    if (p->rc == 0 && fold)   /* the TP group's rows again, from its slices */
        p->rc = ptdp_moe_fold_gather(p->dev, p->mesh, out);
    if (p->rc == 0 && p->shared != NULL)   /* + shared(n), after the routed sum */
        shared_forward(p, *acts, n, out);
    return p->rc;
}

/* ----------------------------------------------------------- backward */

/* dgate and the experts' output gradients dy[slot] = g_j d[token]
 * (moe_tokens.c). */
static void combine_backward(const ptdp_moe_acts *m, ptdp_tensor d, ptdp_real *dgate, ptdp_real *dy)
{
    const ptdp_moe_routing r = routing(m, d.cols);
    ptdp_moe_combine_backward(&r, m->y, d, dgate, dy);
}

/* The experts' backward where they ran: dy goes out as the forward's
 * combine came back (the combine's backward is a dispatch), the input
 * gradients come home as the inputs went (the dispatch's backward is a
 * combine).  Without expert parallelism both are the identity and the
 * inputs are stacked again from n (not kept). */
static void experts_backward_where(ptdp_moe_pass *p, const ptdp_moe_acts *m, ptdp_tensor n, ptdp_real *dy,
                                   ptdp_real *dx, int C)
{
    const bool ep = m->ep != NULL;
    const ptdp_moe_expert_kind *kind = p->kind;
    ptdp_real *x = ep ? m->x : grab(p, (size_t)m->kept * C * sizeof(ptdp_real), "grad.moe_dispatch");
    ptdp_real *dyr = ep ? grab(p, (size_t)m->here * C * sizeof(ptdp_real), "grad.moe_expert_out") : dy;
    ptdp_real *dxr = ep ? grab(p, (size_t)m->here * C * sizeof(ptdp_real), "grad.moe_expert_in") : dx;
    ptdp_real *scratch[PTDP_MOE_KEEP_MAX] = { NULL };
    for (int i = 0; i < kind->nscratch; i++)
        scratch[i] = grab(p, (size_t)m->here * p->F * sizeof(ptdp_real), kind->scratch[i]);
    if (p->rc == 0 && !ep)
        dispatch(m, n, x);
    if (p->rc == 0 && ep)
        p->rc = ptdp_ep_dispatch(p->dev, m->ep, &m->plan, dy, C, dyr);
    if (p->rc == 0) {
        const ptdp_moe_local f = ffn_of(p, m, scratch, C);
        p->rc = kind->backward(&f, ptdp_tensor_wrap(x, m->here, C), ptdp_tensor_wrap(dyr, m->here, C),
                               ptdp_tensor_wrap(dxr, m->here, C));
    }
    if (p->rc == 0 && ep)
        p->rc = ptdp_ep_combine(p->dev, m->ep, &m->plan, dxr, C, dx);
    for (int i = kind->nscratch - 1; i >= 0; i--)
        ptdp_free(p->dev, scratch[i]);
    if (ep) {
        ptdp_free(p->dev, dxr);
        ptdp_free(p->dev, dyr);
    } else {
        ptdp_free(p->dev, x);
    }
}

/* The router's backward: dz through the gates, the balance loss and the
 * z-loss, then dn += dZ W_r and dW_r += dZ^T n (now, or W's). */
static void router_backward(ptdp_moe_pass *p, const ptdp_moe_acts *m, ptdp_tensor n, const ptdp_real *dgate,
                            ptdp_real *dz, ptdp_tensor dn)
{
    const int R = m->rows, E = m->shape.E;
    const ptdp_moe_route_shape shape = route_shape(p, m);
    if (m->seq_counts != NULL)   /* CP: the whole sequences' counts */
        ptdp_moe_route_backward_whole(&shape, R, m->choice, m->gate, m->probs, dgate, p->per_sequence, p->T_seq,
                                      m->seq_counts, dz);
    else
        ptdp_moe_route_backward(&shape, R, m->choice, m->gate, m->probs, dgate, p->per_sequence, dz);
    if (p->settings->z_loss > 0)   /* the logits, kept after probs */
        ptdp_moe_z_loss_backward(R, E, p->T_seq, p->settings->z_loss, m->probs + (size_t)R * E,
                                 p->per_sequence, dz);
    ptdp_linear_pass c = router_pass(p);
    const ptdp_linear_layer router = { .w = p->router, .accumulate_dx = true, .w_flops = p->router_w_flops };
    const ptdp_linear_charge price = { .flops = p->router_flops };
    p->rc = ptdp_parallel_linear_backward(&c, &router, &dn, ptdp_tensor_wrap(dz, R, E), n, &price);
}

static void routed_backward(ptdp_moe_pass *p, const ptdp_moe_acts *m, ptdp_tensor n, ptdp_tensor d, ptdp_tensor dn)
{
    const int C = d.cols, R = d.rows, E = m->shape.E, K = m->shape.k;
    ptdp_real *dy = grab(p, (size_t)m->kept * C * sizeof(ptdp_real), "grad.moe_out");
    ptdp_real *dx = grab(p, (size_t)m->kept * C * sizeof(ptdp_real), "grad.moe_in");
    ptdp_real *dgate = grab(p, (size_t)R * K * sizeof(ptdp_real), "grad.moe_gate");
    ptdp_real *dz = grab(p, (size_t)R * E * sizeof(ptdp_real), "grad.moe_logits");
    if (p->rc == 0)
        combine_backward(m, d, dgate, dy);
    if (p->rc == 0)
        experts_backward_where(p, m, n, dy, dx, C);
    if (p->rc == 0) {
        const ptdp_moe_routing r = routing(m, C);   /* the dispatch's backward: a sum, slot order */
        ptdp_moe_dispatch_backward(&r, dx, dn);
        router_backward(p, m, n, dgate, dz, dn);
    }
    void *q[] = { dy, dx, dgate, dz };
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
        ptdp_free(p->dev, q[i]);
}

/* The forward's mirror: the routed experts' backward on this rank's rows
 * (under folding its slices of d and dn, dn's slices then gathered), the
 * shared experts' on all of them. */
int ptdp_moe_backward(ptdp_moe_pass *p, const ptdp_moe_acts *m, ptdp_tensor n, ptdp_tensor d, ptdp_tensor dn)
{
    if (p->rc != 0 || m == NULL)
        return p->rc;
    expert_layout(p);
    const bool fold = ptdp_moe_fold_slices(p->mesh) > 1;
    if (fold)
        routed_backward(p, m, ptdp_moe_fold_slice(p->mesh, n), ptdp_moe_fold_slice(p->mesh, d),
                        ptdp_moe_fold_slice(p->mesh, dn));
    else
        routed_backward(p, m, n, d, dn);
    if (p->rc == 0 && fold)
        p->rc = ptdp_moe_fold_gather(p->dev, p->mesh, dn);
    if (p->rc == 0 && p->shared != NULL)
        shared_backward(p, m, n, d, dn);
    return p->rc;
}
