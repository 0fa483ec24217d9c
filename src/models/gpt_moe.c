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
 * Capacity (GShard's groups, one sequence a group): with a factor c each
 * expert takes at most ceil(c k T / E) choices of a sequence, in position
 * order; a choice beyond contributes nothing, and the kept gates are not
 * renormalised.  The balance loss is added to the objective per sequence
 * as a mean over the global batch's sequences, so its gradient is scaled
 * by 1 / global batch (the pass's loss_scale, 1 / (B T) a position, times
 * T) and enters here, in the block's backward: every stage adds its own
 * blocks'.
 *
 * What the block keeps is data-dependent: the experts' pre-GELU and GELU
 * rows and their outputs, one row per kept choice, from the arena (so its
 * peak is the measured load's).  Tensor and expert parallelism are not
 * here: the model refuses tp with experts (gpt_model.c).
 */
#include <math.h>
#include <string.h>

#include "models/gpt_pass.h"
#include "ptdp/error.h"
#include "ptdp/ops.h"

/* ------------------------------------------------------------ routing */

/* Row r's k largest logits, largest first, ties to the lower index. */
static void top_k(const ptdp_real *z, int E, int k, int *choice)
{
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            bool taken = false;
            for (int q = 0; q < j; q++)
                taken = taken || choice[q] == e;
            if (!taken && (best < 0 || z[e] > z[best]))
                best = e;
        }
        choice[j] = best;
    }
}

/* softmax of n values read at x[idx[j]] (idx NULL: x[j]) into p. */
static void softmax(const ptdp_real *x, const int *idx, int n, ptdp_real *p)
{
    double top = -INFINITY, sum = 0.0;
    for (int j = 0; j < n; j++)
        top = fmax(top, (double)x[idx ? idx[j] : j]);
    for (int j = 0; j < n; j++)
        sum += exp((double)x[idx ? idx[j] : j] - top);
    for (int j = 0; j < n; j++)
        p[j] = (ptdp_real)(exp((double)x[idx ? idx[j] : j] - top) / sum);
}

/* The slots per expert and sequence: ceil(c k T / E), or every choice. */
static int capacity(const ptdp_moe_route_shape *s)
{
    if (s->capacity <= 0)
        return s->T * s->k;
    double c = ceil(s->capacity * s->k * s->T / s->E);
    return c > s->T * s->k ? s->T * s->k : (int)c;
}

/* Sequence b's balance loss, alpha sum_i f_i P_i. */
static double balance(const ptdp_moe_route_shape *s, const int *choice, const ptdp_real *probs, int b)
{
    double aux = 0.0;
    for (int e = 0; e < s->E; e++) {
        int count = 0;
        double P = 0.0;
        for (int t = 0; t < s->T; t++) {
            const size_t r = (size_t)b * s->T + t;
            for (int j = 0; j < s->k; j++)
                count += choice[r * s->k + j] == e;
            P += probs[r * s->E + e];
        }
        aux += (double)s->E / ((double)s->k * s->T) * count * (P / s->T);
    }
    return s->alpha * aux;
}

double ptdp_moe_route(const ptdp_moe_route_shape *s, int rows, const ptdp_real *z, int *choice, ptdp_real *gate,
                      int *slot, ptdp_real *probs, int *load, int *dropped)
{
    const int E = s->E, k = s->k, cap = capacity(s);
    int used[E > 0 ? E : 1], fill[E > 0 ? E : 1];
    double aux = 0.0;
    memset(load, 0, (size_t)E * sizeof *load);
    *dropped = 0;
    for (int r = 0; r < rows; r++) {
        top_k(z + (size_t)r * E, E, k, choice + (size_t)r * k);
        softmax(z + (size_t)r * E, choice + (size_t)r * k, k, gate + (size_t)r * k);
        softmax(z + (size_t)r * E, NULL, E, probs + (size_t)r * E);
    }
    /* keep in position order, sequence by sequence: slot = 0 kept, -1 not */
    for (int b = 0; b < rows / s->T; b++) {
        memset(used, 0, sizeof used);
        for (int t = 0; t < s->T; t++)
            for (int j = 0; j < k; j++) {
                const size_t c = ((size_t)b * s->T + t) * k + j;
                const bool keep = used[choice[c]] < cap;
                used[choice[c]] += keep;
                load[choice[c]] += keep;
                *dropped += !keep;
                slot[c] = keep ? 0 : -1;
            }
        aux += balance(s, choice, probs, b);
    }
    /* the stacked rows: expert by expert, each in position order */
    for (int e = 0, off = 0; e < E; off += load[e], e++)
        fill[e] = off;
    for (size_t c = 0; c < (size_t)rows * k; c++)
        if (slot[c] == 0)
            slot[c] = fill[choice[c]]++;
    return aux;
}

void ptdp_moe_route_backward(const ptdp_moe_route_shape *s, int rows, const int *choice, const ptdp_real *gate,
                             const ptdp_real *probs, const ptdp_real *dgate, double scale, ptdp_real *dz)
{
    const int E = s->E, k = s->k, T = s->T;
    double u[E > 0 ? E : 1];
    memset(dz, 0, (size_t)rows * E * sizeof *dz);
    for (int r = 0; r < rows; r++) {   /* the gates: dz_j = g_j (dg_j - sum_l g_l dg_l) */
        const size_t c0 = (size_t)r * k;
        double dot = 0.0;
        for (int j = 0; j < k; j++)
            dot += (double)gate[c0 + j] * dgate[c0 + j];
        for (int j = 0; j < k; j++)
            dz[(size_t)r * E + choice[c0 + j]] += (ptdp_real)(gate[c0 + j] * (dgate[c0 + j] - dot));
    }
    for (int b = 0; b < rows / T; b++) {   /* the balance loss: dP_i = scale alpha f_i, over T */
        for (int e = 0; e < E; e++) {
            int count = 0;
            for (size_t c = (size_t)b * T * k; c < (size_t)(b + 1) * T * k; c++)
                count += choice[c] == e;
            u[e] = scale * s->alpha * ((double)E / ((double)k * T) * count) / T;
        }
        for (int t = 0; t < T; t++) {
            const size_t r = (size_t)b * T + t;
            double dot = 0.0;
            for (int e = 0; e < E; e++)
                dot += (double)probs[r * E + e] * u[e];
            for (int e = 0; e < E; e++)
                dz[r * E + e] += (ptdp_real)(probs[r * E + e] * (u[e] - dot));
        }
    }
}

/* ------------------------------------------------ what a block keeps */

struct ptdp_gpt_moe_acts {
    ptdp_moe_route_shape shape;
    int rows, kept, dropped, F;
    int *choice, *slot, *load, *token;   /* token: the row of each slot */
    ptdp_real *gate, *probs;
    ptdp_real *h, *g, *y;                /* kept x F, kept x F, kept x C */
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
    void *p[] = { m->choice, m->slot, m->load, m->token, m->gate, m->probs, m->h, m->g, m->y };
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        ptdp_free(dev, p[i]);
    ptdp_free(dev, m);
    a->moe = NULL;
}

double ptdp_gpt_moe_aux(const ptdp_gpt_block_acts *a)
{
    return a->moe != NULL ? a->moe->aux : 0.0;
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
    m->shape = (ptdp_moe_route_shape){ .T = k->shape.T, .E = E, .k = K, .capacity = gs->moe_capacity,
                                       .alpha = gs->moe_aux_loss };
    m->rows = R;
    m->F = ptdp_gpt_moe_ffn(&k->m->cfg);
    m->choice = grab(k, (size_t)R * K * sizeof(int), "acts.moe_choice");
    m->slot = grab(k, (size_t)R * K * sizeof(int), "acts.moe_slot");
    m->load = grab(k, (size_t)E * sizeof(int), "acts.moe_load");
    m->gate = grab(k, (size_t)R * K * sizeof(ptdp_real), "acts.moe_gate");
    m->probs = grab(k, (size_t)R * E * sizeof(ptdp_real), "acts.moe_probs");
    ptdp_real *z = grab(k, (size_t)R * E * sizeof(ptdp_real), "acts.moe_logits");
    if (k->rc == 0) {
        ptdp_linear_forward(ptdp_tensor_wrap(z, R, E), h, w->router->w, NULL);
        m->aux = ptdp_moe_route(&m->shape, R, z, m->choice, m->gate, m->slot, m->probs, m->load, &m->dropped);
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

/* Rows [off, off + n) of a stacked buffer of `cols` columns. */
static ptdp_tensor rows_of(ptdp_real *base, int off, int n, int cols)
{
    return ptdp_tensor_wrap(base + (size_t)off * cols, n, cols);
}

/* The kept choices' inputs, stacked: x[slot] = h[token[slot]]. */
static void dispatch(const struct ptdp_gpt_moe_acts *m, ptdp_tensor h, ptdp_real *x)
{
    for (int s = 0; s < m->kept; s++)
        memcpy(x + (size_t)s * h.cols, ptdp_at(h, m->token[s], 0), (size_t)h.cols * sizeof *x);
}

/* Each expert over its rows: h = x W_fc^T + b, g = GELU(h), y = g W_proj^T + b. */
static void experts_forward(ptdp_gpt_pass *k, const ptdp_gpt_block *w, struct ptdp_gpt_moe_acts *m,
                            const ptdp_real *x, int C)
{
    double flops = 0.0;
    for (int e = 0, off = 0; e < m->shape.E; off += m->load[e], e++) {
        const int n = m->load[e];
        const ptdp_gpt_expert *ex = &w->experts[e];
        if (n == 0)
            continue;
        ptdp_tensor h = rows_of(m->h, off, n, m->F), g = rows_of(m->g, off, n, m->F);
        ptdp_linear_forward(h, rows_of((ptdp_real *)x, off, n, C), ex->fc_w->w, &ex->fc_b->w);
        ptdp_gelu_forward(g, h);
        ptdp_linear_forward(rows_of(m->y, off, n, C), g, ex->proj_w->w, &ex->proj_b->w);
        flops += ptdp_linear_flops_forward(n, C, m->F) + ptdp_gelu_flops_forward((size_t)n * m->F) +
                 ptdp_linear_flops_forward(n, m->F, C);
    }
    ptdp_compute(k->dev, k->what, flops, k->w0);
    k->w0 = ptdp_wall_now();
}

void ptdp_gpt_moe_forward(ptdp_gpt_pass *k, int i, ptdp_gpt_block_acts *a, ptdp_tensor out)
{
    const ptdp_gpt_block *w = &ptdp_gpt_of(k->m)->blocks[i];
    const int C = out.cols, K = ptdp_gpt(&k->m->cfg)->moe_top_k;
    if (k->rc != 0)
        return;
    struct ptdp_gpt_moe_acts *m = a->moe = route(k, w, a->ln2);
    if (k->rc != 0)
        return;
    m->h = grab(k, (size_t)m->kept * m->F * sizeof(ptdp_real), "acts.moe_fc");
    m->g = grab(k, (size_t)m->kept * m->F * sizeof(ptdp_real), "acts.moe_gelu");
    m->y = grab(k, (size_t)m->kept * C * sizeof(ptdp_real), "acts.moe_out");
    ptdp_real *x = grab(k, (size_t)m->kept * C * sizeof(ptdp_real), "acts.moe_dispatch");
    if (k->rc == 0) {
        dispatch(m, a->ln2, x);
        experts_forward(k, w, m, x, C);
        ptdp_tensor_zero(out);   /* combine: out[t] += g_j y[slot], in choice order */
        for (int r = 0; r < m->rows; r++)
            for (int j = 0; j < K; j++) {
                const int s = m->slot[(size_t)r * K + j];
                const double gj = m->gate[(size_t)r * K + j];
                for (int c = 0; s >= 0 && c < C; c++)
                    *ptdp_at(out, r, c) += (ptdp_real)(gj * m->y[(size_t)s * C + c]);
            }
    }
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

/* Each expert backward: its gradients, and dx[slot] of its inputs. */
static void experts_backward(ptdp_gpt_pass *k, const ptdp_gpt_block *w, const struct ptdp_gpt_moe_acts *m,
                             const ptdp_real *x, ptdp_real *dy, ptdp_real *dh, ptdp_real *dx, int C)
{
    double flops = 0.0;
    for (int e = 0, off = 0; e < m->shape.E; off += m->load[e], e++) {
        const int n = m->load[e];
        const ptdp_gpt_expert *ex = &w->experts[e];
        if (n == 0)
            continue;
        ptdp_tensor dH = rows_of(dh, off, n, m->F), dX = rows_of(dx, off, n, C);
        ptdp_linear_backward(&dH, ex->proj_w->g, &ex->proj_b->g, rows_of(dy, off, n, C), rows_of(m->g, off, n, m->F),
                             ex->proj_w->w, false);
        ptdp_gelu_backward(dH, dH, rows_of(m->h, off, n, m->F));
        ptdp_linear_backward(&dX, ex->fc_w->g, &ex->fc_b->g, dH, rows_of((ptdp_real *)x, off, n, C), ex->fc_w->w,
                             false);
        flops += ptdp_linear_flops_backward(n, m->F, C) + ptdp_gelu_flops_backward((size_t)n * m->F) +
                 ptdp_linear_flops_backward(n, C, m->F);
    }
    ptdp_compute(k->dev, k->what, flops, k->w0);
    k->w0 = ptdp_wall_now();
}

void ptdp_gpt_moe_backward(ptdp_gpt_pass *k, int i, ptdp_gpt_block_acts *a, ptdp_tensor d, ptdp_gpt_scratch *s)
{
    const ptdp_gpt_block *w = &ptdp_gpt_of(k->m)->blocks[i];
    const struct ptdp_gpt_moe_acts *m = a->moe;
    const int C = d.cols, R = d.rows, E = m != NULL ? m->shape.E : 0, K = m != NULL ? m->shape.k : 0;
    if (k->rc != 0 || m == NULL)
        return;
    ptdp_real *x = grab(k, (size_t)m->kept * C * sizeof(ptdp_real), "grad.moe_dispatch");
    ptdp_real *dy = grab(k, (size_t)m->kept * C * sizeof(ptdp_real), "grad.moe_out");
    ptdp_real *dh = grab(k, (size_t)m->kept * m->F * sizeof(ptdp_real), "grad.moe_fc");
    ptdp_real *dx = grab(k, (size_t)m->kept * C * sizeof(ptdp_real), "grad.moe_in");
    ptdp_real *dgate = grab(k, (size_t)R * K * sizeof(ptdp_real), "grad.moe_gate");
    ptdp_real *dz = grab(k, (size_t)R * E * sizeof(ptdp_real), "grad.moe_logits");
    if (k->rc == 0) {
        dispatch(m, a->ln2, x);
        combine_backward(m, d, dgate, dy);
        experts_backward(k, w, m, x, dy, dh, dx, C);
        ptdp_tensor_zero(s->dln);   /* the dispatch's backward: a scatter-add, slot order */
        for (int q = 0; q < m->kept; q++)
            for (int c = 0; c < C; c++)
                *ptdp_at(s->dln, m->token[q], c) += dx[(size_t)q * C + c];
        /* the loss's scale is 1 / (global batch x label_cols) a position:
         * the balance loss is a mean over sequences, label_cols times that */
        const double per_sequence = k->loss_scale * k->m->label_cols;
        ptdp_moe_route_backward(&m->shape, R, m->choice, m->gate, m->probs, dgate, per_sequence, dz);
        ptdp_tensor dZ = ptdp_tensor_wrap(dz, R, E);
        ptdp_linear_backward(&s->dln, w->router->g, NULL, dZ, a->ln2, w->router->w, true);
    }
    void *p[] = { x, dy, dh, dx, dgate, dz };
    for (size_t q = 0; q < sizeof p / sizeof p[0]; q++)
        ptdp_free(k->dev, p[q]);
}
