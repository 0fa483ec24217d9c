/*
 * gpt_moe.c — a mixture of experts in place of a block's MLP: a router
 * sends each token to k of E experts, each expert the GPT's MLP, and the
 * token's output is the gated sum of what its experts made of it.
 *
 *   z      = h W_r^T                              logits, rows x E
 *   top-k  = the k largest z of a token           ties to the lower index
 *   g_j    = softmax over those k logits          (Mixtral's gates)
 *   out    = sum_j g_j expert_{e_j}(h)            expert(h) = GELU(h W_fc^T
 *                                                   + b_fc) W_proj^T + b_proj
 *   aux    = alpha sum_i f_i P_i per sequence     f_i = E/(k T) count_i (no
 *                                                   gradient), P_i = mean softmax(z)_i
 *
 *          ┌─ router ─ top-k ─ gates ──────────────────────┐
 *   h ─────┤                                               ▼
 *          └─ dispatch ─► expert 0 ┐                      combine ─► out
 *               (rows by           ├─ stacked, expert     Σ g_j y
 *                expert, in        │   by expert
 *                position order) ─► expert E-1 ┘
 *
 * The router's arithmetic is gpt_moe_route.c; this file runs it in a
 * block, with the experts, the dispatch and the combine.
 *
 * Capacity (GShard's groups, one sequence a group): with a factor c each
 * expert takes at most ceil(c k T / E) choices of a sequence, in position
 * order; a choice beyond contributes nothing, and the kept gates are not
 * renormalised.  The balance loss is added to the objective per sequence
 * as a mean over the global batch's sequences, so its gradient is scaled
 * by 1 / global batch (the pass's loss_scale, 1 / (B T) a position, times
 * T) and enters here, in the block's backward: every stage adds its own
 * blocks'.
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
 * units, routes the same tokens, and sums the experts' partial outputs
 * (and input gradients) over the TP group where they ran.
 *
 * The router and the experts are linear layers like the dense MLP's, and
 * run through the same op (parallel_linear.h): the local experts as two
 * groups, c_fc column- and c_proj row-parallel, one stacked buffer each,
 * one charge and one TP sum for all of them.  Under a split backward
 * (ZB-H1, DualPipe) their dW waits for W like every other linear's.
 *
 * What the block keeps is data-dependent: the experts' pre-GELU and GELU
 * rows and their outputs, one row per kept choice, from the arena (so its
 * peak is the measured load's).  Under --precision bf16 the experts' rows
 * are rounded where they are made, as the dense MLP's, but kept and sent
 * as float, and the router runs in float (Megatron's fp32 router).
 */
#include <math.h>
#include <string.h>

#include "models/gpt_pass.h"
#include "ptdp/ep.h"
#include "ptdp/error.h"
#include "ptdp/mesh.h"
#include "ptdp/ops.h"
#include "ptdp/parallel_linear.h"

/* ------------------------------------------------ what a block keeps */

struct ptdp_gpt_moe_acts {
    ptdp_moe_route_shape shape;
    int rows, kept, dropped, F;
    int *choice, *slot, *load, *token;   /* token: the row of each slot */
    ptdp_real *gate, *probs;
    double *seq_counts;                  /* CP: the whole sequences' counts (and psum) */
    ptdp_real *y;                        /* kept x C: the experts' outputs, back home */
    /* The experts' side: the rows this device's experts ran, `here` of
     * them, local expert by local expert (per_expert[l] each).  Without expert
     * parallelism these are the kept rows themselves (here = kept, rows =
     * load); with it, what the dispatch brought (ep.h's plan). */
    ptdp_comm *ep;                       /* NULL: no expert parallelism  */
    ptdp_ep_plan plan;
    int local, here, *per_expert;
    ptdp_real *x;                        /* EP: here x C, the dispatched inputs */
    ptdp_real *h, *g;                    /* here x F, here x F           */
    double aux;
};

static void *grab(ptdp_gpt_pass *k, size_t bytes, const char *what)
{
    void *p = k->rc == 0 ? ptdp_alloc_uninit(k->dev, bytes > 0 ? bytes : 1, PTDP_MEM_ACTS, what) : NULL;
    if (p == NULL && k->rc == 0)
        k->rc = PTDP_ENOMEM;
    return p;
}

void ptdp_gpt_moe_free(ptdp_device *dev, ptdp_gpt_block_acts *a)
{
    struct ptdp_gpt_moe_acts *m = a->moe;
    if (m == NULL)
        return;
    void *p[] = { m->choice, m->slot, m->load, m->token, m->gate, m->probs, m->seq_counts, m->h, m->g, m->y, m->x,
                  m->ep != NULL ? m->per_expert : NULL };
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        ptdp_free(dev, p[i]);
    ptdp_ep_plan_free(&m->plan);
    ptdp_free(dev, m);
    a->moe = NULL;
}

double ptdp_gpt_moe_aux(const ptdp_gpt_block_acts *a)
{
    return a->moe != NULL ? a->moe->aux : 0.0;
}

/* CP: the balance loss of whole sequences, from the statistics of the
 * CP group's parts summed (ptdp_moe_sequence_stats); the counts stay for
 * the backward.  Every CP rank has the loss then: CP rank 0 reports it. */
static void whole_sequences(ptdp_gpt_pass *k, struct ptdp_gpt_moe_acts *m)
{
    const int B = m->rows / m->shape.T, E = m->shape.E;
    m->seq_counts = grab(k, (size_t)2 * B * E * sizeof(double), "acts.moe_sequences");
    if (k->rc != 0)
        return;
    double *psum = m->seq_counts + (size_t)B * E;   /* counts, then psum: one all-reduce */
    ptdp_moe_sequence_stats(&m->shape, m->rows, m->choice, m->probs, m->seq_counts, psum);
    k->rc = ptdp_all_reduce(k->m->mesh->cp_comm, m->seq_counts, m->seq_counts, (size_t)2 * B * E, PTDP_F64,
                            PTDP_SUM);
    k->w0 = ptdp_wall_now();
    const double aux = ptdp_moe_balance(&m->shape, B, k->shape.T, m->seq_counts, psum);
    m->aux = k->m->mesh->cp_rank == 0 ? aux : 0.0;
}

/* The router's linear layer runs in storage precision (float under bf16:
 * Megatron's fp32 router), whole on every TP rank. */
static ptdp_linear_pass router_pass(ptdp_gpt_pass *k)
{
    ptdp_linear_pass c = ptdp_gpt_linear_pass(k);
    c.recipe = PTDP_RECIPE_STORAGE;
    return c;
}

/* The router: logits, choices, gates, slots and the balance loss. */
static struct ptdp_gpt_moe_acts *route(ptdp_gpt_pass *k, const ptdp_gpt_block *w, ptdp_tensor h)
{
    const ptdp_gpt_settings *gs = ptdp_gpt(&k->m->cfg);
    const int R = h.rows, E = gs->moe_experts, K = gs->moe_top_k;
    struct ptdp_gpt_moe_acts *m = grab(k, sizeof *m, "acts.moe");
    if (m == NULL)
        return NULL;
    memset(m, 0, sizeof *m);
    m->shape = (ptdp_moe_route_shape){ .T = k->shape.T / k->shape.cp, .E = E, .k = K,   /* CP: a rank's positions */
                                       .capacity = gs->moe_capacity, .alpha = gs->moe_aux_loss };
    m->rows = R;
    m->F = ptdp_gpt_moe_ffn(&k->m->cfg) / k->m->mesh->tp;   /* this TP rank's share of each expert */
    m->choice = grab(k, (size_t)R * K * sizeof(int), "acts.moe_choice");
    m->slot = grab(k, (size_t)R * K * sizeof(int), "acts.moe_slot");
    m->load = grab(k, (size_t)E * sizeof(int), "acts.moe_load");
    m->gate = grab(k, (size_t)R * K * sizeof(ptdp_real), "acts.moe_gate");
    m->probs = grab(k, (size_t)R * E * sizeof(ptdp_real), "acts.moe_probs");
    ptdp_real *z = grab(k, (size_t)R * E * sizeof(ptdp_real), "acts.moe_logits");
    if (k->rc == 0) {   /* z = h W_r^T, the piece since LN2 charged */
        ptdp_linear_pass c = router_pass(k);
        const ptdp_linear_charge price = { .flops = ptdp_gpt_cost_moe_forward(k->dev->profile, &k->shape, E) };
        k->rc = ptdp_parallel_linear_forward(&c, &(ptdp_linear_layer){ .w = w->router }, ptdp_tensor_wrap(z, R, E), h,
                                             &price);
    }
    if (k->rc == 0) {
        m->aux = ptdp_moe_route(&m->shape, R, z, m->choice, m->gate, m->slot, m->probs, m->load, &m->dropped);
        if (k->shape.cp > 1)
            whole_sequences(k, m);
        ptdp_gpt_moe_tally(k, (int)(w - ptdp_gpt_of(k->m)->blocks), m->load, m->dropped, m->aux);
        m->kept = R * K - m->dropped;
        m->token = grab(k, (size_t)m->kept * sizeof(int), "acts.moe_token");
    }
    ptdp_free(k->dev, z);
    if (k->rc == 0)
        for (size_t c = 0; c < (size_t)R * K; c++)
            if (m->slot[c] >= 0)
                m->token[m->slot[c]] = (int)(c / (size_t)K);
    return m;
}

/* The kept choices' inputs, stacked: x[slot] = h[token[slot]]. */
static void dispatch(const struct ptdp_gpt_moe_acts *m, ptdp_tensor h, ptdp_real *x)
{
    for (int s = 0; s < m->kept; s++)
        memcpy(x + (size_t)s * h.cols, ptdp_at(h, m->token[s], 0), (size_t)h.cols * sizeof *x);
}

/* Where the experts run: here, on every kept row (no expert parallelism),
 * or on what the dispatch brings — counts exchanged (ep.h's plan), then
 * rows[l] = the rows every source sends for local expert l. */
static void experts_side(ptdp_gpt_pass *k, struct ptdp_gpt_moe_acts *m)
{
    const int E = m->shape.E;
    ptdp_comm *ep = k->m->mesh->ep > 1 ? ptdp_mesh_group(k->m->mesh, PTDP_GROUP_EP) : NULL;
    m->ep = ep;
    m->local = ep != NULL ? E / ptdp_comm_size(ep) : E;
    if (ep == NULL) {   /* the kept rows, as the router stacked them */
        m->per_expert = m->load;
        m->here = m->kept;
        return;
    }
    m->per_expert = grab(k, (size_t)m->local * sizeof(int), "acts.moe_rows");
    if (k->rc != 0)
        return;
    if ((k->rc = ptdp_ep_plan_init(k->dev, ep, E, m->load, &m->plan)) != 0)
        return;
    memset(m->per_expert, 0, (size_t)m->local * sizeof(int));
    for (int s = 0; s < m->plan.N; s++)
        for (int l = 0; l < m->local; l++)
            m->per_expert[l] += m->plan.recv_rows[s * m->local + l];
    m->here = (int)m->plan.received;
}

/* The local experts as two groups of linear layers (parallel_linear.h):
 * member e is local expert e on its rows of the stacked buffers — c_fc
 * column-parallel, c_proj row-parallel, each split over TP like the dense
 * MLP's (gpt_model.c).  A dW W runs later is priced at the peak, as the
 * experts' forward and backward are. */
typedef struct {
    const ptdp_gpt_expert *experts;
    const struct ptdp_gpt_moe_acts *m;
    int C;
} expert_group;

static ptdp_linear_layer expert_fc(const void *of, int e)
{
    const expert_group *x = of;
    return (ptdp_linear_layer){
        .split = PTDP_SPLIT_COLUMN, .w = x->experts[e].fc_w, .b = x->experts[e].fc_b,
        .w_flops = ptdp_linear_flops_backward_weight(x->m->per_expert[e], x->C, x->m->F),
    };
}

static ptdp_linear_layer expert_proj(const void *of, int e)
{
    const expert_group *x = of;
    return (ptdp_linear_layer){
        .split = PTDP_SPLIT_ROW, .w = x->experts[e].proj_w, .b = x->experts[e].proj_b,
        .w_flops = ptdp_linear_flops_backward_weight(x->m->per_expert[e], x->m->F, x->C),
    };
}

/* Each local expert over its rows: h = x W_fc^T + b, g = GELU(h), y = g W_proj^T + b,
 * charged at the peak by the rows.  Under TP each rank holds F/tp of every
 * expert's hidden units: the group's partial sums g W_proj^T are
 * all-reduced over the TP group where the experts ran, once for all (g of
 * Megatron's f/g), then each bias — so the outputs go home whole, and the
 * router's gates see the same y on every TP rank. */
static void experts_forward(ptdp_gpt_pass *k, const ptdp_gpt_block *w, struct ptdp_gpt_moe_acts *m,
                            const ptdp_real *x, ptdp_real *y, int C)
{
    const expert_group of = { w->experts, m, C };
    const ptdp_linear_group fc = { PTDP_SPLIT_COLUMN, m->local, m->per_expert, expert_fc, &of };
    const ptdp_linear_group proj = { PTDP_SPLIT_ROW, m->local, m->per_expert, expert_proj, &of };
    const ptdp_tensor h = ptdp_tensor_wrap(m->h, m->here, m->F), g = ptdp_tensor_wrap(m->g, m->here, m->F);
    ptdp_linear_charge price = { 0 };
    for (int e = 0; e < m->local; e++) {
        const int n = m->per_expert[e];
        if (n > 0)
            price.flops += ptdp_linear_flops_forward(n, C, m->F) + ptdp_gelu_flops_forward((size_t)n * m->F) +
                           ptdp_linear_flops_forward(n, m->F, C);
    }
    ptdp_linear_pass c = ptdp_gpt_linear_pass(k);   /* bf16: h rounded, as the dense MLP's c_fc output */
    k->rc = ptdp_parallel_linear_group_forward(&c, &fc, h, ptdp_tensor_wrap((ptdp_real *)x, m->here, C), NULL);
    if (k->rc != 0)
        return;
    ptdp_gelu_forward(g, h);
    ptdp_gpt_round(k, g);
    k->rc = ptdp_parallel_linear_group_forward(&c, &proj, ptdp_tensor_wrap(y, m->here, C), g, &price);
}

/* out[t] = sum_j g_j y[slot], in choice order. */
static void combine(const struct ptdp_gpt_moe_acts *m, ptdp_tensor out)
{
    const int K = m->shape.k, C = out.cols;
    ptdp_tensor_zero(out);
    for (int r = 0; r < m->rows; r++)
        for (int j = 0; j < K; j++) {
            const int s = m->slot[(size_t)r * K + j];
            const double gj = m->gate[(size_t)r * K + j];
            for (int c = 0; s >= 0 && c < C; c++)
                *ptdp_at(out, r, c) += (ptdp_real)(gj * m->y[(size_t)s * C + c]);
        }
}

/* Route, dispatch, run the experts, bring their outputs home, combine.
 * With expert parallelism the stacked rows travel to the EP rank of their
 * expert and back (ep.h): the dispatched inputs are kept for the
 * backward, which would otherwise have to send them again. */
void ptdp_gpt_moe_forward(ptdp_gpt_pass *k, int i, ptdp_gpt_block_acts *a, ptdp_tensor out)
{
    const ptdp_gpt_block *w = &ptdp_gpt_of(k->m)->blocks[i];
    const int C = out.cols;
    if (k->rc != 0)
        return;
    struct ptdp_gpt_moe_acts *m = a->moe = route(k, w, a->ln2);
    if (k->rc != 0)
        return;
    experts_side(k, m);
    m->h = grab(k, (size_t)m->here * m->F * sizeof(ptdp_real), "acts.moe_fc");
    m->g = grab(k, (size_t)m->here * m->F * sizeof(ptdp_real), "acts.moe_gelu");
    m->y = grab(k, (size_t)m->kept * C * sizeof(ptdp_real), "acts.moe_out");
    ptdp_real *x = grab(k, (size_t)m->kept * C * sizeof(ptdp_real), "acts.moe_dispatch");
    ptdp_real *yr = m->ep != NULL ? grab(k, (size_t)m->here * C * sizeof(ptdp_real), "acts.moe_expert_out") : m->y;
    if (m->ep != NULL)
        m->x = grab(k, (size_t)m->here * C * sizeof(ptdp_real), "acts.moe_expert_in");
    if (k->rc == 0) {
        dispatch(m, a->ln2, x);
        if (m->ep != NULL)
            k->rc = ptdp_ep_dispatch(k->dev, m->ep, &m->plan, x, C, m->x);
    }
    if (k->rc == 0) {
        experts_forward(k, w, m, m->ep != NULL ? m->x : x, yr, C);
        if (m->ep != NULL)
            k->rc = ptdp_ep_combine(k->dev, m->ep, &m->plan, yr, C, m->y);
    }
    if (k->rc == 0)
        combine(m, out);
    if (m->ep != NULL)
        ptdp_free(k->dev, yr);
    ptdp_free(k->dev, x);
}

/* ----------------------------------------------------------- backward */

/* dgate and the experts' output gradients dy[slot] = g_j d[token]. */
static void combine_backward(const struct ptdp_gpt_moe_acts *m, ptdp_tensor d, ptdp_real *dgate, ptdp_real *dy)
{
    const int K = m->shape.k, C = d.cols;
    for (int r = 0; r < m->rows; r++)
        for (int j = 0; j < K; j++) {
            const size_t c = (size_t)r * K + j;
            const int s = m->slot[c];
            double dot = 0.0;
            for (int q = 0; s >= 0 && q < C; q++) {
                dot += (double)*ptdp_at(d, r, q) * m->y[(size_t)s * C + q];
                dy[(size_t)s * C + q] = (ptdp_real)(m->gate[c] * *ptdp_at(d, r, q));
            }
            dgate[c] = (ptdp_real)dot;
        }
}

/* Each local expert backward: its gradients (dW now, or W's), and dx of
 * its inputs, summed over the TP ranks' shares (f's backward, once). */
static void experts_backward(ptdp_gpt_pass *k, const ptdp_gpt_block *w, const struct ptdp_gpt_moe_acts *m,
                             const ptdp_real *x, ptdp_real *dy, ptdp_real *dh, ptdp_real *dx, int C)
{
    const expert_group of = { w->experts, m, C };
    const ptdp_linear_group fc = { PTDP_SPLIT_COLUMN, m->local, m->per_expert, expert_fc, &of };
    const ptdp_linear_group proj = { PTDP_SPLIT_ROW, m->local, m->per_expert, expert_proj, &of };
    ptdp_tensor dH = ptdp_tensor_wrap(dh, m->here, m->F), dX = ptdp_tensor_wrap(dx, m->here, C);
    ptdp_linear_pass c = ptdp_gpt_linear_pass(k);
    const bool later = ptdp_linear_pass_defers(&c);   /* the dW products are W's */
    ptdp_linear_charge price = { 0 };
    for (int e = 0; e < m->local; e++) {
        const int n = m->per_expert[e];
        if (n > 0 && !later)
            price.flops += ptdp_linear_flops_backward(n, m->F, C) + ptdp_gelu_flops_backward((size_t)n * m->F) +
                           ptdp_linear_flops_backward(n, C, m->F);
        else if (n > 0)
            price.flops += ptdp_linear_flops_backward_input(n, m->F, C) +
                           ptdp_gelu_flops_backward((size_t)n * m->F) + ptdp_linear_flops_backward_input(n, C, m->F);
    }
    k->rc = ptdp_parallel_linear_group_backward(&c, &proj, &dH, ptdp_tensor_wrap(dy, m->here, C),
                                                ptdp_tensor_wrap(m->g, m->here, m->F), NULL);
    if (k->rc != 0)
        return;
    ptdp_gelu_backward(dH, dH, ptdp_tensor_wrap(m->h, m->here, m->F));
    k->rc = ptdp_parallel_linear_group_backward(&c, &fc, &dX, dH, ptdp_tensor_wrap((ptdp_real *)x, m->here, C),
                                                &price);
}

/* The experts' backward where they ran: dy goes out as the forward's
 * combine came back (the combine's backward is a dispatch), the input
 * gradients come home as the inputs went (the dispatch's backward is a
 * combine).  Without expert parallelism both are the identity and the
 * inputs are stacked again from ln_2 (not kept). */
static void experts_backward_where(ptdp_gpt_pass *k, const ptdp_gpt_block *w, const struct ptdp_gpt_moe_acts *m,
                                   ptdp_tensor ln2, ptdp_real *dy, ptdp_real *dx, int C)
{
    const bool ep = m->ep != NULL;
    ptdp_real *x = ep ? m->x : grab(k, (size_t)m->kept * C * sizeof(ptdp_real), "grad.moe_dispatch");
    ptdp_real *dyr = ep ? grab(k, (size_t)m->here * C * sizeof(ptdp_real), "grad.moe_expert_out") : dy;
    ptdp_real *dxr = ep ? grab(k, (size_t)m->here * C * sizeof(ptdp_real), "grad.moe_expert_in") : dx;
    ptdp_real *dh = grab(k, (size_t)m->here * m->F * sizeof(ptdp_real), "grad.moe_fc");
    if (k->rc == 0 && !ep)
        dispatch(m, ln2, x);
    if (k->rc == 0 && ep)
        k->rc = ptdp_ep_dispatch(k->dev, m->ep, &m->plan, dy, C, dyr);
    if (k->rc == 0)
        experts_backward(k, w, m, x, dyr, dh, dxr, C);
    if (k->rc == 0 && ep)
        k->rc = ptdp_ep_combine(k->dev, m->ep, &m->plan, dxr, C, dx);
    ptdp_free(k->dev, dh);
    if (ep) {
        ptdp_free(k->dev, dxr);
        ptdp_free(k->dev, dyr);
    } else {
        ptdp_free(k->dev, x);
    }
}

void ptdp_gpt_moe_backward(ptdp_gpt_pass *k, int i, ptdp_gpt_block_acts *a, ptdp_tensor d, ptdp_gpt_scratch *s)
{
    const ptdp_gpt_block *w = &ptdp_gpt_of(k->m)->blocks[i];
    const struct ptdp_gpt_moe_acts *m = a->moe;
    const int C = d.cols, R = d.rows, E = m != NULL ? m->shape.E : 0, K = m != NULL ? m->shape.k : 0;
    if (k->rc != 0 || m == NULL)
        return;
    ptdp_real *dy = grab(k, (size_t)m->kept * C * sizeof(ptdp_real), "grad.moe_out");
    ptdp_real *dx = grab(k, (size_t)m->kept * C * sizeof(ptdp_real), "grad.moe_in");
    ptdp_real *dgate = grab(k, (size_t)R * K * sizeof(ptdp_real), "grad.moe_gate");
    ptdp_real *dz = grab(k, (size_t)R * E * sizeof(ptdp_real), "grad.moe_logits");
    if (k->rc == 0)
        combine_backward(m, d, dgate, dy);
    if (k->rc == 0)
        experts_backward_where(k, w, m, a->ln2, dy, dx, C);
    if (k->rc == 0) {
        ptdp_tensor_zero(s->dln);   /* the dispatch's backward: a scatter-add, slot order */
        for (int q = 0; q < m->kept; q++)
            for (int c = 0; c < C; c++)
                *ptdp_at(s->dln, m->token[q], c) += dx[(size_t)q * C + c];
        /* the loss's scale is 1 / (global batch x label_cols) a position:
         * the balance loss is a mean over sequences, label_cols times that */
        const double per_sequence = k->loss_scale * k->m->label_cols;
        if (m->seq_counts != NULL)   /* CP: the whole sequences' counts */
            ptdp_moe_route_backward_whole(&m->shape, R, m->choice, m->gate, m->probs, dgate, per_sequence,
                                          k->shape.T, m->seq_counts, dz);
        else
            ptdp_moe_route_backward(&m->shape, R, m->choice, m->gate, m->probs, dgate, per_sequence, dz);
        /* the router: s->dln += dZ W_r, dW_r += dZ^T ln2 (now, or W's) */
        ptdp_linear_pass c = router_pass(k);
        const ptdp_linear_layer router = { .w = w->router, .accumulate_dx = true,
                                           .w_flops = ptdp_gpt_cost_dw_router(k->dev->profile, &k->shape, E) };
        const ptdp_linear_charge price = { .flops = ptdp_gpt_cost_moe_backward(k->dev->profile, &k->shape, E) };
        k->rc = ptdp_parallel_linear_backward(&c, &router, &s->dln, ptdp_tensor_wrap(dz, R, E), a->ln2, &price);
    }
    void *p[] = { dy, dx, dgate, dz };
    for (size_t q = 0; q < sizeof p / sizeof p[0]; q++)
        ptdp_free(k->dev, p[q]);
}
