/*
 * gpt_regions.c — which rows of a micro-batch this device holds, and where
 * each of them sits in its sequence.
 *
 * A micro-batch is B sequences of T positions.  A device computes R = B Tl
 * token rows, Tl positions of each sequence:
 *
 *   whole sequences    Tl = T        row b Tl + t is position t
 *   CP (cp.h)          Tl = T / cp   position first[t / len] + t % len
 *                                    (zigzag: shares r and 2 cp - 1 - r)
 *   a token slice      Tl = tlen     position t0 + t           (TeraPipe)
 *
 * and under SP (sp.h) the LayerNorm / dropout / residual "regions" hold
 * only this TP rank's Tl / tp of them:
 *
 *   sequence b:  │ tp rank 0 │ tp rank 1 │ … │     region row i is local
 *                └─ Tl / tp ─┘                    position tp_rank Tl/tp + i % (Tl/tp)
 *
 * Everything position-wise (embedding's wpe, dropout masks, labels) asks
 * here for a row's global position, so every layout draws the one
 * device's numbers.
 */
#include <stdio.h>

#include "models/gpt_pass.h"
#include "ptdp/cp.h"
#include "ptdp/ops.h"
#include "ptdp/rng.h"
#include "ptdp/tp.h"

int ptdp_gpt_cp_size(const ptdp_model *m)
{
    return m->mesh->cp > 1 ? m->mesh->cp : 1;
}

/* CP's attention: the ring (cp.h), or Ulysses' all-to-alls (ulysses.h),
 * after which a rank holds whole sequences of heads_local / cp heads. */
bool ptdp_gpt_cp_ring(const ptdp_model *m)
{
    return ptdp_gpt_cp_size(m) > 1 && !m->mesh->cp_a2a;
}

bool ptdp_gpt_cp_ulysses(const ptdp_model *m)
{
    return ptdp_gpt_cp_size(m) > 1 && m->mesh->cp_a2a;
}

static ptdp_cp_layout cp_layout(const ptdp_model *m)
{
    return ptdp_cp_layout_of(ptdp_gpt(&m->cfg)->seq_len, ptdp_gpt_cp_size(m), m->mesh->cp_rank, m->mesh->cp_zigzag);
}

/* TeraPipe (pp.h): a micro-batch's step may cover only the token slice
 * [t0, t0 + tlen) of each sequence; tlen 0 means all of it. */
bool ptdp_gpt_sliced(const ptdp_acts *a)
{
    return a->tlen > 0;
}

int ptdp_gpt_local_T(const ptdp_model *m, const ptdp_acts *a)
{
    return ptdp_gpt_sliced(a) ? a->tlen : ptdp_gpt(&m->cfg)->seq_len / ptdp_gpt_cp_size(m);
}

/* The position in its sequence of local row t: t, the CP layout's, or t0 + t. */
static int local_position(const ptdp_model *m, const ptdp_acts *a, int t)
{
    if (ptdp_gpt_sliced(a))
        return a->t0 + t;
    if (ptdp_gpt_cp_size(m) > 1) {
        const ptdp_cp_layout l = cp_layout(m);
        return ptdp_cp_position(&l, t);
    }
    return t;
}

/* Copy this device's positions of rows x T values (tokens, labels) into
 * rows x local_T (the same, without CP or slices). */
void ptdp_gpt_take_positions(const ptdp_model *m, const ptdp_acts *a, int64_t *dst, const int64_t *src, int rows)
{
    const int T = ptdp_gpt(&m->cfg)->seq_len, Tq = ptdp_gpt_local_T(m, a);
    for (int b = 0; b < rows; b++)
        for (int t = 0; t < Tq; t++)
            dst[(size_t)b * Tq + t] = src[(size_t)b * T + local_position(m, a, t)];
}

/* x += wpe at each row's position (rows sequences of local_T rows), or
 * its backward dwpe += dx: under CP share by share, at the global positions;
 * a token slice at its positions t0 .. t0 + tlen - 1. */
void ptdp_gpt_positions(const ptdp_model *m, const ptdp_acts *a, ptdp_tensor wpe, ptdp_tensor x, int rows,
                        bool backward)
{
    if (ptdp_gpt_sliced(a)) {
        ptdp_tensor w = ptdp_tensor_rows(wpe, a->t0, a->tlen);
        if (backward)
            ptdp_positions_backward(w, x, a->tlen);
        else
            ptdp_positions_forward(x, w, a->tlen);
        return;
    }
    if (ptdp_gpt_cp_size(m) == 1) {
        if (backward)
            ptdp_positions_backward(wpe, x, ptdp_gpt(&m->cfg)->seq_len);
        else
            ptdp_positions_forward(x, wpe, ptdp_gpt(&m->cfg)->seq_len);
        return;
    }
    const ptdp_cp_layout l = cp_layout(m);
    for (int b = 0; b < rows; b++)
        for (int i = 0; i < l.nshares; i++) {
            ptdp_tensor w = ptdp_tensor_rows(wpe, l.first[i], l.len);
            ptdp_tensor share = ptdp_tensor_rows(x, b * ptdp_gpt_local_T(m, a) + i * l.len, l.len);
            if (backward)
                ptdp_positions_backward(w, share, l.len);
            else
                ptdp_positions_forward(share, w, l.len);
        }
}

/* Rows this rank holds in the LayerNorm / dropout / residual regions of a
 * micro-batch of R token rows: all of them, or its T/tp positions (SP). */
int ptdp_gpt_region_rows(const ptdp_model *m, int R)
{
    return m->mesh->sp ? R / m->mesh->tp : R;
}

/* Positions of a sequence in the regions: local_T, or local_T / tp under SP. */
static int region_T(const ptdp_model *m, const ptdp_acts *a)
{
    return ptdp_gpt_local_T(m, a) / (m->mesh->sp ? m->mesh->tp : 1);
}

/* The position in its sequence (0 .. T-1) of row i of a region tensor: its
 * place among this device's positions — under SP this TP rank's stretch of
 * them — and under CP that place's share, in a token slice t0 on. */
int ptdp_gpt_region_position(const ptdp_model *m, const ptdp_acts *a, int i)
{
    int t = i % region_T(m, a);
    if (m->mesh->sp)
        t += m->mesh->tp_rank * region_T(m, a);
    return local_position(m, a, t);
}

uint64_t ptdp_gpt_dropout_key(const ptdp_model *m, int layer, const char *where)
{
    char name[PTDP_NAME_MAX];
    snprintf(name, sizeof name, "dropout.h.%d.%s", layer, where);
    return ptdp_rng_key(m->seed, name);
}

/* Dropout on region rows, its mask keyed by global token index (tp.h), so
 * a sequence shard draws exactly the single device's mask. */
void ptdp_gpt_region_dropout(const ptdp_model *m, const ptdp_acts *acts, ptdp_tensor t, uint64_t key)
{
    const int T = ptdp_gpt(&m->cfg)->seq_len, C = m->cfg.hidden;
    if (m->dropout <= 0)
        return;
    if (!m->mesh->sp && ptdp_gpt_cp_size(m) == 1 && !ptdp_gpt_sliced(acts)) {   /* consecutive tokens */
        ptdp_tp_dropout(t, m->dropout, key, acts->first_sample * T, C, 0);
        return;
    }
    for (int i = 0; i < t.rows; i++)         /* SP, CP, slices: row by row, each at its global position */
        ptdp_tp_dropout(ptdp_tensor_rows(t, i, 1), m->dropout, key,
                        (acts->first_sample + i / region_T(m, acts)) * T + ptdp_gpt_region_position(m, acts, i),
                        C, 0);
}

/* The probabilities a block keeps (a token slice's tlen x (t0 + tlen) of
 * them a head), or under CP's ring each query's log-sum-exp; under
 * Ulysses T x T of each of heads_local / cp heads.  Under --attention
 * tiled a log-sum-exp a query in every layout: T (a slice's tlen) a head. */
size_t ptdp_gpt_probs_len(const ptdp_model *m, const ptdp_acts *acts)
{
    const ptdp_gpt *g = m->impl;
    const int T = ptdp_gpt(&m->cfg)->seq_len;
    const bool lse = m->attention_tiled || ptdp_gpt_cp_ring(m);
    const size_t per_head = ptdp_gpt_sliced(acts) ? (size_t)acts->tlen * (lse ? 1 : (size_t)(acts->t0 + acts->tlen))
                            : ptdp_gpt_cp_ring(m) ? (size_t)ptdp_gpt_local_T(m, acts) : (size_t)T * (lse ? 1 : T);
    const int heads = ptdp_gpt_cp_ulysses(m) ? g->heads_local / ptdp_gpt_cp_size(m) : g->heads_local;
    return (size_t)acts->rows * heads * per_head;
}

/* The shapes the clock's charges are priced at (gpt_cost.h): this
 * device's share of the micro-batch; split when W runs the dW products. */
ptdp_gpt_shape ptdp_gpt_shape_of(const ptdp_model *m, const ptdp_acts *a, bool split)
{
    const ptdp_gpt *g = m->impl;
    const int C = m->cfg.hidden, hd = C / ptdp_gpt(&m->cfg)->heads, R = a->rows * ptdp_gpt_local_T(m, a);
    const int cp = ptdp_gpt_cp_size(m);
    const bool sliced = ptdp_gpt_sliced(a);
    return (ptdp_gpt_shape){
        .rows = a->rows, .R = R, .Rl = ptdp_gpt_region_rows(m, R), .C = C, .Cl = g->heads_local * hd,
        .Fl = g->ffn_local, .Vl = g->vocab_local, .heads = g->heads_local, .hd = hd, .T = ptdp_gpt(&m->cfg)->seq_len,
        .cp = cp, .cp_rank = cp > 1 ? m->mesh->cp_rank : 0, .cp_zigzag = m->mesh->cp_zigzag,
        .cp_a2a = ptdp_gpt_cp_ulysses(m),
        .t0 = sliced ? a->t0 : 0, .tlen = sliced ? a->tlen : 0,
        .selective = m->recompute_core, .split = split,
        .tiled = m->attention_tiled && !ptdp_gpt_cp_ring(m),
    };
}
