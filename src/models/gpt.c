/*
 * gpt.c — forward and backward of one pipeline stage of the GPT, one
 * micro-batch of B sequences (R = B T token rows) at a time.
 *
 *  stage 0                 every local block l (pre-LayerNorm)                         last stage
 *  ┌───────────────┐  ┌──────────────────────────────────────────────────────────┐  ┌────────────────┐
 *  │ x = wte[tok]  │  │ ln1 = LN1(x)                                              │  │ h = LN_f(x)    │
 *  │   (vocab-par.,│─►│ qkv = ln1 c_attn^T + b          column-parallel, by head  │─►│ z = h wte^T    │
 *  │    g)         │  │ y   = attention(qkv)            local: the rank's heads   │  │ (vocab-par.,   │
 *  │   + wpe[t]    │  │ x2  = x + drop(y c_proj^T (g) + b)   row-parallel         │  │  f)            │
 *  └───────────────┘  │ ln2 = LN2(x2)                                             │  │ loss = xent(z) │
 *                     │ x   = x2 + drop(GELU(ln2 c_fc^T + b) c_proj^T (g) + b)    │  │ (vocab-par.)   │
 *                     └──────────────────────────────────────────────────────────┘  └────────────────┘
 *
 * g marks the one all-reduce of a row-parallel layer's partial sums in the
 * forward, f the one of a column-parallel layer's input gradient in the
 * backward (tp.h): two of each per block.  Everything else is local.
 *
 * With sequence parallelism (mesh->sp, sp.h) the LayerNorms, dropouts and
 * residuals hold only this rank's T/tp positions of each sequence ("region
 * rows"); the g after each row-parallel layer becomes a reduce-scatter
 * along the sequence, and an all-gather along the sequence brings LN's
 * output into each column-parallel layer (its backward: a reduce-scatter,
 * where TP's f had an all-reduce).  The same numbers, the same bytes.
 *
 * With context parallelism (mesh->cp > 1, cp.h) a device holds T/cp
 * positions of each sequence — the zigzag chunks, or one contiguous chunk —
 * and everything is local to them but attention, which runs as a ring
 * over the CP group and keeps each query's log-sum-exp instead of the
 * probabilities.  The embedding adds wpe at the global positions, the loss
 * is the device's tokens' share, and the DP all-reduce over dp x cp sums
 * the gradients' parts (mesh.h).
 *
 * The backward walks the boxes right to left; gradients ACCUMULATE (+=)
 * into the model's gradient buffer, so micro-batches add up.  With pp = 1
 * the head is wte itself, and its gradient gets both the head's and the
 * lookups' parts.  With selective recomputation (m->recompute_attention) a
 * block keeps no attention probabilities and redoes the attention core in
 * its backward.  With recompute a micro-batch keeps only its stage input
 * and runs the forward again inside its backward (the dropout masks are
 * counter-based, so the second forward is the first).
 *
 * Under --precision bf16 (act_bf16.h) every activation a block keeps is
 * rounded to bf16 where it is made — the next op reads the bf16 value —
 * and a block's are packed into one bf16 buffer when its forward ends,
 * unpacked into float when its backward begins: one block in float at a
 * time, the rest at 2 bytes an element.
 *
 * Split backward (zero-bubble schedules, wgrad.h): ptdp_gpt_backward_input
 * with a sink records the four dW products of every block, the head's and
 * the embedding's scatter-add for a later W; the LayerNorms', the biases'
 * and wpe's gradients (sums over rows) stay in B, and so does attention's
 * T^2 work: the GPT's B costs more than its W, unlike the MLP's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/act_bf16.h"
#include "ptdp/error.h"
#include "ptdp/gpt.h"
#include "ptdp/gpt_cost.h"
#include "ptdp/ops.h"
#include "ptdp/cp.h"
#include "ptdp/rng.h"
#include "ptdp/sp.h"
#include "ptdp/tp.h"
#include "ptdp/wgrad.h"

#define LN_EPS 1e-5

static uint64_t dropout_key(const ptdp_model *m, int layer, const char *where)
{
    char name[PTDP_NAME_MAX];
    snprintf(name, sizeof name, "dropout.h.%d.%s", layer, where);
    return ptdp_rng_key(m->seed, name);
}

/* Compute in the virtual clock, priced by gpt_cost.c (the planner prices
 * the same work with the same functions); under the "ideal" profile the
 * embedding and the head cost nothing, so the stages are uniform (as the
 * MLP's). */
static void account(ptdp_device *dev, const char *what, double flops, double w0, bool edge)
{
    if (edge && dev->profile != NULL && dev->profile->ideal)
        flops = 0;
    ptdp_compute(dev, what, flops, w0);
}

/* Every activation and scratch tensor here is an op's output, written whole
 * before it is read: no zero-fill (arena.h), a tenth of a step saved. */
static int act(ptdp_device *dev, ptdp_tensor *t, const char *name, int rows, int cols)
{
    return ptdp_tensor_alloc_uninit(dev, t, name, PTDP_MEM_ACTS, rows, cols);
}

static ptdp_real *act_reals(ptdp_device *dev, size_t n, const char *name)
{
    return ptdp_alloc_uninit(dev, (n > 0 ? n : 1) * sizeof(ptdp_real), PTDP_MEM_ACTS, name);
}

/* ------------------------------------------- TP and SP regions (sp.h) */

/* Context parallelism: the CP group's size and this device's positions. */
static int cp_size(const ptdp_model *m)
{
    return m->mesh->cp > 1 ? m->mesh->cp : 1;
}

static ptdp_cp_layout cp_layout(const ptdp_model *m)
{
    return ptdp_cp_layout_of(m->cfg.seq_len, cp_size(m), m->mesh->cp_rank, m->mesh->cp_zigzag);
}

/* TeraPipe (pp.h): a micro-batch's step may cover only the token slice
 * [t0, t0 + tlen) of each sequence; tlen 0 means all of it. */
static bool sliced(const ptdp_acts *a)
{
    return a->tlen > 0;
}

/* Positions of each sequence this device computes now: T, T / cp, or the
 * slice's tlen. */
static int local_T(const ptdp_model *m, const ptdp_acts *a)
{
    return sliced(a) ? a->tlen : m->cfg.seq_len / cp_size(m);
}

/* The position in its sequence of local row t: t, the CP layout's, or t0 + t. */
static int local_position(const ptdp_model *m, const ptdp_acts *a, int t)
{
    if (sliced(a))
        return a->t0 + t;
    if (cp_size(m) > 1) {
        const ptdp_cp_layout l = cp_layout(m);
        return ptdp_cp_position(&l, t);
    }
    return t;
}

/* Copy this device's positions of rows x T values (tokens, labels) into
 * rows x local_T (the same, without CP or slices). */
static void take_positions(const ptdp_model *m, const ptdp_acts *a, int64_t *dst, const int64_t *src, int rows)
{
    const int T = m->cfg.seq_len, Tq = local_T(m, a);
    for (int b = 0; b < rows; b++)
        for (int t = 0; t < Tq; t++)
            dst[(size_t)b * Tq + t] = src[(size_t)b * T + local_position(m, a, t)];
}

/* x += wpe at each row's position (rows sequences of local_T rows), or
 * its backward dwpe += dx: under CP chunk by chunk, at the global positions;
 * a token slice at its positions t0 .. t0 + tlen - 1. */
static void positions(const ptdp_model *m, const ptdp_acts *a, ptdp_tensor wpe, ptdp_tensor x, int rows,
                      bool backward)
{
    if (sliced(a)) {
        ptdp_tensor w = ptdp_tensor_rows(wpe, a->t0, a->tlen);
        if (backward)
            ptdp_positions_backward(w, x, a->tlen);
        else
            ptdp_positions_forward(x, w, a->tlen);
        return;
    }
    if (cp_size(m) == 1) {
        if (backward)
            ptdp_positions_backward(wpe, x, m->cfg.seq_len);
        else
            ptdp_positions_forward(x, wpe, m->cfg.seq_len);
        return;
    }
    const ptdp_cp_layout l = cp_layout(m);
    for (int b = 0; b < rows; b++)
        for (int i = 0; i < l.nchunks; i++) {
            ptdp_tensor w = ptdp_tensor_rows(wpe, l.first[i], l.len);
            ptdp_tensor chunk = ptdp_tensor_rows(x, b * local_T(m, a) + i * l.len, l.len);
            if (backward)
                ptdp_positions_backward(w, chunk, l.len);
            else
                ptdp_positions_forward(chunk, w, l.len);
        }
}

/* Rows this rank holds in the LayerNorm / dropout / residual regions of a
 * micro-batch of R token rows: all of them, or its T/tp positions (SP). */
static int region_rows(const ptdp_model *m, int R)
{
    return m->mesh->sp ? R / m->mesh->tp : R;
}

/* The shapes the clock's charges are priced at (gpt_cost.h): this
 * device's share of the micro-batch; split when W runs the dW products. */
static ptdp_gpt_shape shape_of(const ptdp_model *m, const ptdp_acts *a, bool split)
{
    const ptdp_gpt *g = m->impl;
    const int C = m->cfg.hidden, hd = C / m->cfg.heads, R = a->rows * local_T(m, a);
    return (ptdp_gpt_shape){
        .rows = a->rows, .R = R, .Rl = region_rows(m, R), .C = C, .Cl = g->heads_local * hd,
        .Fl = g->ffn_local, .Vl = g->vocab_local, .heads = g->heads_local, .hd = hd, .T = m->cfg.seq_len,
        .cp = cp_size(m), .cp_rank = cp_size(m) > 1 ? m->mesh->cp_rank : 0, .cp_zigzag = m->mesh->cp_zigzag,
        .t0 = sliced(a) ? a->t0 : 0, .tlen = sliced(a) ? a->tlen : 0,
        .selective = m->recompute_attention, .split = split,
    };
}

/* LayerNorm, then into the TP region: under SP its output is gathered
 * along the sequence into `out` (R rows); mean and rstd stay local. */
static int layernorm_into_tp(ptdp_device *dev, const ptdp_model *m, const ptdp_acts *acts, ptdp_tensor out,
                             ptdp_real *mean, ptdp_real *rstd, ptdp_tensor x, const ptdp_param *w,
                             const ptdp_param *b)
{
    if (!m->mesh->sp) {
        ptdp_layernorm_forward(out, mean, rstd, x, w->w, b->w, LN_EPS);
        return PTDP_OK;
    }
    ptdp_tensor local;
    int rc = act(dev, &local, "acts.ln_local", x.rows, x.cols);
    if (rc != 0)
        return rc;
    ptdp_layernorm_forward(local, mean, rstd, x, w->w, b->w, LN_EPS);
    rc = ptdp_sp_all_gather(dev, m->mesh->tp_comm, out, local, acts->rows);   /* sequence gather */
    ptdp_tensor_free(dev, &local);
    return rc;
}

/* Out of the TP region: `part` (R rows) holds this rank's partial sums;
 * `out` (region rows) gets their sum — g's all-reduce in place (out is
 * part), or under SP a reduce-scatter along the sequence. */
static int sum_out_of_tp(ptdp_device *dev, const ptdp_model *m, const ptdp_acts *acts, ptdp_tensor out,
                         ptdp_tensor part)
{
    if (!m->mesh->sp)
        return ptdp_tp_reduce_from_region_forward(m->mesh->tp_comm, out);      /* g */
    return ptdp_sp_reduce_scatter(dev, m->mesh->tp_comm, out, part, acts->rows);
}

/* The backward of layernorm_into_tp's join: `dfull` (R rows) holds this
 * rank's part of the gradient of LN's output; `dlocal` (region rows) gets
 * the sum — f's all-reduce in place, or a reduce-scatter under SP. */
static int grad_out_of_tp(ptdp_device *dev, const ptdp_model *m, const ptdp_acts *acts, ptdp_tensor dlocal,
                          ptdp_tensor dfull)
{
    if (!m->mesh->sp)
        return ptdp_tp_copy_to_region_backward(m->mesh->tp_comm, dlocal);      /* f */
    return ptdp_sp_reduce_scatter(dev, m->mesh->tp_comm, dlocal, dfull, acts->rows);
}

/* Positions of a sequence in the LayerNorm / dropout / residual regions:
 * local_T, or local_T / tp under SP. */
static int region_T(const ptdp_model *m, const ptdp_acts *a)
{
    return local_T(m, a) / (m->mesh->sp ? m->mesh->tp : 1);
}

/* The position in its sequence (0 .. T-1) of row i of a region tensor: its
 * place among this device's positions — under SP this TP rank's stretch of
 * them — and under CP that place's chunk, in a token slice t0 on. */
static int region_position(const ptdp_model *m, const ptdp_acts *a, int i)
{
    int t = i % region_T(m, a);
    if (m->mesh->sp)
        t += m->mesh->tp_rank * region_T(m, a);
    return local_position(m, a, t);
}

/* Dropout on region rows, its mask keyed by global token index (tp.h), so
 * a sequence shard draws exactly the single device's mask. */
static void region_dropout(const ptdp_model *m, const ptdp_acts *acts, ptdp_tensor t, uint64_t key)
{
    const int T = m->cfg.seq_len, C = m->cfg.hidden;
    if (m->dropout <= 0)
        return;
    if (!m->mesh->sp && cp_size(m) == 1 && !sliced(acts)) {   /* whole sequences: consecutive tokens */
        ptdp_tp_dropout(t, m->dropout, key, acts->first_sample * T, C, 0);
        return;
    }
    for (int i = 0; i < t.rows; i++)         /* SP, CP, slices: row by row, each at its global position */
        ptdp_tp_dropout(ptdp_tensor_rows(t, i, 1), m->dropout, key,
                        (acts->first_sample + i / region_T(m, acts)) * T + region_position(m, acts, i), C, 0);
}

/* ------------------------------------------------------- saved state */

/* Under --precision bf16 (act_bf16.h) every activation a block keeps is
 * rounded to bf16 where it is made and stored as bf16 between the forward
 * and the backward: rounded in place here ... */
static void round_bf16(const ptdp_model *m, ptdp_tensor t)
{
    if (m->bf16)
        ptdp_act_round(t);
}

/* The probabilities a block keeps (a token slice's tlen x (t0 + tlen) of
 * them a head), or under CP each query's log-sum-exp. */
static size_t probs_len(const ptdp_model *m, const ptdp_acts *acts)
{
    const ptdp_gpt *g = m->impl;
    const int T = m->cfg.seq_len;
    const size_t per_head = sliced(acts) ? (size_t)acts->tlen * (size_t)(acts->t0 + acts->tlen) :
                            cp_size(m) > 1 ? (size_t)local_T(m, acts) : (size_t)T * T;
    return (size_t)acts->rows * g->heads_local * per_head;
}

/* ... and packed into one bf16 buffer after the block's forward, unpacked
 * before its backward: the block's input, its eight tensors and the
 * probabilities.  The LayerNorm statistics stay float (apex keeps them in
 * float), and so does CP's log-sum-exp. */
static int block_slots(const ptdp_model *m, const ptdp_acts *acts, ptdp_gpt_block_acts *a, ptdp_act_slot *s)
{
    int n = 0;
    ptdp_tensor *t[] = { &a->x, &a->ln1, &a->qkv, &a->y, &a->x2, &a->ln2, &a->fc, &a->gelu };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        s[n++] = (ptdp_act_slot){ .t = t[i] };
    if (cp_size(m) == 1)
        s[n++] = (ptdp_act_slot){ .reals = &a->probs, .n = probs_len(m, acts), .name = "acts.probs" };
    return n;
}

/* The last stage's tail: the last block's output (LN_f's input) and LN_f's
 * output (the head's input); elsewhere x_out alone.  The logits stay
 * float: the cross-entropy works in float, as Megatron's upcasts them. */
static int tail_slots(ptdp_gpt_saved *sv, ptdp_act_slot *s)
{
    s[0] = (ptdp_act_slot){ .t = &sv->x_out };
    s[1] = (ptdp_act_slot){ .t = &sv->lnf };
    return 2;
}

static void free_block(ptdp_device *dev, ptdp_gpt_block_acts *a)
{
    ptdp_act_packed_free(dev, &a->packed);
    ptdp_tensor *t[] = { &a->x, &a->ln1, &a->qkv, &a->y, &a->x2, &a->ln2, &a->fc, &a->gelu };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        ptdp_tensor_free(dev, t[i]);
    ptdp_real **r[] = { &a->ln1_mean, &a->ln1_rstd, &a->probs, &a->ln2_mean, &a->ln2_rstd };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        ptdp_free(dev, *r[i]);
        *r[i] = NULL;
    }
}

/* Everything the forward made except the stage input (recompute keeps it). */
static void free_computed(ptdp_device *dev, ptdp_gpt_saved *sv)
{
    if (sv->blocks != NULL)
        for (int i = 0; i < sv->nblocks; i++)
            free_block(dev, &sv->blocks[i]);
    free(sv->blocks);
    sv->blocks = NULL;
    ptdp_act_packed_free(dev, &sv->tail_packed);
    ptdp_tensor_free(dev, &sv->x_out);
    ptdp_tensor_free(dev, &sv->lnf);
    ptdp_tensor_free(dev, &sv->logits);
    ptdp_free(dev, sv->lnf_mean);
    ptdp_free(dev, sv->lnf_rstd);
    ptdp_free(dev, sv->rowmax);
    ptdp_free(dev, sv->sumexp);
    sv->lnf_mean = sv->lnf_rstd = NULL;
    sv->rowmax = sv->sumexp = NULL;
}

void ptdp_gpt_acts_free(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts)
{
    (void)m;
    ptdp_gpt_saved *sv = acts->saved;
    if (sv != NULL) {
        free_computed(dev, sv);
        ptdp_tensor_free(dev, &sv->input);
        ptdp_free(dev, (void *)sv->tokens);
        ptdp_free(dev, sv->labels);
        free(sv);
    }
    acts->saved = NULL;
    acts->alive = false;
}

ptdp_gpt_saved *ptdp_gpt_saved_of(ptdp_acts *acts)
{
    return acts->saved;
}

/* ------------------------------------------------------------ forward */

/* A token slice's rows (rows x tlen, one sequence after another) to or
 * from their places in a whole-sequence cache tensor ((rows T) x width). */
static void slice_rows(ptdp_tensor whole, ptdp_tensor slice, const ptdp_acts *acts, bool into_whole)
{
    const int T = whole.rows / acts->rows;
    for (int b = 0; b < acts->rows; b++) {
        ptdp_tensor w = ptdp_tensor_rows(whole, b * T + acts->t0, acts->tlen);
        ptdp_tensor p = ptdp_tensor_rows(slice, b * acts->tlen, acts->tlen);
        if (into_whole)
            ptdp_tensor_copy(w, p);
        else
            ptdp_tensor_copy(p, w);
    }
}

/* One block: x (region rows x C, owned by a) in, *out (the same,
 * allocated here) out. */
static int block_forward(ptdp_device *dev, ptdp_model *m, const ptdp_acts *acts, int i,
                         ptdp_gpt_block_acts *a, ptdp_tensor *out)
{
    const ptdp_model_config *c = &m->cfg;
    const ptdp_gpt *g = m->impl;
    const ptdp_gpt_block *w = &g->blocks[i];
    ptdp_comm *tp = m->mesh->tp_comm;
    const bool sp = m->mesh->sp;
    const int T = c->seq_len, C = c->hidden, hd = C / c->heads, hl = g->heads_local;
    const int Cl = hl * hd, Fl = g->ffn_local, R = acts->rows * local_T(m, acts), Rl = region_rows(m, R);
    const ptdp_gpt_shape shape = shape_of(m, acts, false);
    const int layer = m->layer_begin + i;
    char what[32];
    snprintf(what, sizeof what, "block %d fwd", layer);
    int rc;
    if ((rc = act(dev, &a->ln1, "acts.ln1", R, C)) != 0 || (rc = act(dev, &a->qkv, "acts.qkv", R, 3 * Cl)) != 0 ||
        (rc = act(dev, &a->y, "acts.attn_y", R, Cl)) != 0 || (rc = act(dev, &a->x2, "acts.x2", Rl, C)) != 0 ||
        (rc = act(dev, &a->ln2, "acts.ln2", R, C)) != 0 || (rc = act(dev, &a->fc, "acts.fc", R, Fl)) != 0 ||
        (rc = act(dev, &a->gelu, "acts.gelu", R, Fl)) != 0 || (rc = act(dev, out, "acts.x", Rl, C)) != 0)
        return rc;
    a->ln1_mean = act_reals(dev, (size_t)Rl, "acts.ln1_mean");
    a->ln1_rstd = act_reals(dev, (size_t)Rl, "acts.ln1_rstd");
    a->ln2_mean = act_reals(dev, (size_t)Rl, "acts.ln2_mean");
    a->ln2_rstd = act_reals(dev, (size_t)Rl, "acts.ln2_rstd");
    a->probs = act_reals(dev, probs_len(m, acts), "acts.probs");   /* or CP's log-sum-exps */
    if (!a->ln1_mean || !a->ln1_rstd || !a->ln2_mean || !a->ln2_rstd || !a->probs)
        return PTDP_ENOMEM;
    ptdp_attn_dropout drop = {
        .p = m->dropout, .key = dropout_key(m, layer, "attn"), .sample0 = acts->first_sample,
        .head0 = m->mesh->tp_rank * hl, .heads_total = c->heads,
    };
    ptdp_real *scratch = NULL;
    if (m->dropout > 0 && (scratch = ptdp_alloc(dev, (size_t)T * T * sizeof(ptdp_real), PTDP_MEM_ACTS,
                                                "attn.scratch")) == NULL)
        return PTDP_ENOMEM;
    /* a row-parallel layer's partial sums: in place under TP, R rows under SP */
    ptdp_tensor part = { 0 };
    if (sp && (rc = act(dev, &part, "acts.partial", R, C)) != 0) {
        ptdp_free(dev, scratch);
        return rc;
    }

    /* attention: x2 = x + drop(attention(LN1(x) c_attn^T) c_proj^T + b) */
    double w0 = ptdp_wall_now();
    if ((rc = layernorm_into_tp(dev, m, acts, a->ln1, a->ln1_mean, a->ln1_rstd, a->x, w->ln1_w, w->ln1_b)) != 0)
        goto out;
    round_bf16(m, a->ln1);
    w0 = sp ? ptdp_wall_now() : w0;
    ptdp_tp_column_linear_forward(dev, tp, a->qkv, a->ln1, w->attn_w->w, &w->attn_b->w, NULL);
    round_bf16(m, a->qkv);
    if (sliced(acts)) {              /* TeraPipe: into the cache, then against every earlier key */
        ptdp_gpt_kv *kv = ptdp_gpt_kv_get(dev, m, acts);
        if (kv == NULL) {
            rc = PTDP_EINVAL;
            goto out;
        }
        slice_rows(kv->qkv[i], a->qkv, acts, true);
        ptdp_attention_forward_slice(a->y, a->probs, kv->qkv[i], T, acts->t0, acts->t0 + acts->tlen, hl, hd,
                                     &drop, scratch);
    } else if (cp_size(m) > 1) {     /* the ring over the CP group */
        rc = ptdp_ring_attention_forward(dev, m->mesh->cp_comm, a->y, a->probs, a->qkv, T, hl, hd,
                                         m->mesh->cp_zigzag, &drop);
    } else {
        ptdp_attention_forward(a->y, a->probs, a->qkv, T, hl, hd, &drop, scratch);
    }
    ptdp_free(dev, scratch);
    scratch = NULL;
    if (rc != 0)
        goto out;
    if (m->recompute_attention && cp_size(m) == 1) {   /* selective: the probabilities are not kept */
        ptdp_free(dev, a->probs);
        a->probs = NULL;
    }
    /* bf16: the heads' outputs as c_proj reads them; the probabilities as
     * the backward reads them (the forward's P V used them in float, as a
     * fused kernel does in its registers) */
    round_bf16(m, a->y);
    if (m->bf16 && a->probs != NULL && cp_size(m) == 1)
        ptdp_act_round_reals(a->probs, probs_len(m, acts));
    ptdp_linear_forward(sp ? part : a->x2, a->y, w->proj_w->w, NULL);  /* partial sum */
    account(dev, what, ptdp_gpt_cost_attn_forward(dev->profile, &shape), w0, false);
    if ((rc = sum_out_of_tp(dev, m, acts, a->x2, part)) != 0)         /* g, or the sequence scatter */
        goto out;
    w0 = ptdp_wall_now();
    ptdp_add_bias(a->x2, w->proj_b->w);
    region_dropout(m, acts, a->x2, dropout_key(m, layer, "attn_out"));
    ptdp_tensor_add(a->x2, a->x);                                    /* the residual */
    round_bf16(m, a->x2);

    /* MLP: out = x2 + drop(GELU(LN2(x2) c_fc^T + b) c_proj^T + b) */
    if ((rc = layernorm_into_tp(dev, m, acts, a->ln2, a->ln2_mean, a->ln2_rstd, a->x2, w->ln2_w, w->ln2_b)) != 0)
        goto out;
    round_bf16(m, a->ln2);
    ptdp_tp_column_linear_forward(dev, tp, a->fc, a->ln2, w->fc_w->w, &w->fc_b->w, NULL);
    round_bf16(m, a->fc);
    ptdp_gelu_forward(a->gelu, a->fc);
    round_bf16(m, a->gelu);
    ptdp_linear_forward(sp ? part : *out, a->gelu, w->fc_proj_w->w, NULL);  /* partial sum */
    account(dev, what, ptdp_gpt_cost_mlp_forward(dev->profile, &shape), w0, false);
    if ((rc = sum_out_of_tp(dev, m, acts, *out, part)) != 0)          /* g, or the sequence scatter */
        goto out;
    w0 = ptdp_wall_now();
    ptdp_add_bias(*out, w->fc_proj_b->w);
    region_dropout(m, acts, *out, dropout_key(m, layer, "mlp_out"));
    ptdp_tensor_add(*out, a->x2);                                    /* the residual */
    round_bf16(m, *out);
    account(dev, what, ptdp_gpt_cost_block_out_forward(dev->profile, &shape), w0, false);
out:
    ptdp_tensor_free(dev, &part);
    ptdp_free(dev, scratch);
    return rc;
}

/* Everything after the stage input, kept for the backward.  Used by the
 * forward, and again by a recomputing backward. */
static int stage_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, ptdp_gpt_saved *sv)
{
    const ptdp_model_config *c = &m->cfg;
    const ptdp_gpt *g = m->impl;
    ptdp_comm *tp = m->mesh->tp_comm;
    const int C = c->hidden, R = acts->rows * local_T(m, acts), Rl = region_rows(m, R), nb = sv->nblocks;
    const ptdp_gpt_shape shape = shape_of(m, acts, false);
    int rc;
    sv->blocks = calloc((size_t)(nb > 0 ? nb : 1), sizeof *sv->blocks);
    if (sv->blocks == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);

    /* x: the embeddings on stage 0, else the received activation (under
     * SP this rank's positions only) */
    ptdp_tensor x;
    if ((rc = act(dev, &x, "acts.x", Rl, C)) != 0)
        return rc;
    if (nb > 0)
        sv->blocks[0].x = x;
    else
        sv->x_out = x;
    /* Units (model.h): the embeddings; with one stage they are also the
     * head, held from here to the loss. */
    if (m->first_stage && (rc = ptdp_model_unit(dev, m, g->wte, PTDP_UNIT_FORWARD_BEGIN)) != 0)
        return rc;
    double w0 = ptdp_wall_now();
    if (m->first_stage && !m->mesh->sp) {
        const int64_t row0 = (int64_t)m->mesh->tp_rank * g->vocab_local;
        if ((rc = ptdp_tp_embedding_forward(tp, x, g->wte->w, row0, sv->tokens)) != 0)   /* g */
            return rc;
        w0 = ptdp_wall_now();
        positions(m, acts, g->wpe->w, x, acts->rows, false);
        account(dev, "embed fwd", ptdp_gpt_cost_embed_forward(dev->profile, &shape), w0, true);
    } else if (m->first_stage) {
        /* SP: each rank looks up its vocabulary rows for every token (zeros
         * for the others'), and the reduce-scatter along the sequence both
         * sums the ranks' lookups and keeps this rank's positions */
        const int64_t row0 = (int64_t)m->mesh->tp_rank * g->vocab_local;
        ptdp_tensor full;
        if ((rc = act(dev, &full, "acts.embed_partial", R, C)) != 0)
            return rc;
        ptdp_embedding_forward(full, g->wte->w, row0, sv->tokens);
        rc = ptdp_sp_reduce_scatter(dev, tp, x, full, acts->rows);
        ptdp_tensor_free(dev, &full);
        if (rc != 0)
            return rc;
        w0 = ptdp_wall_now();
        for (int i = 0; i < x.rows; i++)     /* each row at its global position */
            ptdp_positions_forward(ptdp_tensor_rows(x, i, 1), ptdp_tensor_rows(g->wpe->w, region_position(m, acts, i), 1), 1);
        account(dev, "embed fwd", ptdp_gpt_cost_embed_forward(dev->profile, &shape), w0, true);
    } else {
        ptdp_tensor_copy(x, ptdp_tensor_wrap(sv->input.data, Rl, C));
    }
    round_bf16(m, x);   /* (a received x is bf16-valued already) */
    if (m->first_stage && g->head != g->wte && (rc = ptdp_model_unit(dev, m, g->wte, PTDP_UNIT_FORWARD_END)) != 0)
        return rc;

    for (int i = 0; i < nb; i++) {
        ptdp_tensor *out = i + 1 < nb ? &sv->blocks[i + 1].x : &sv->x_out;
        const ptdp_param *unit = g->blocks[i].ln1_w;
        if ((rc = ptdp_model_unit(dev, m, unit, PTDP_UNIT_FORWARD_BEGIN)) != 0 ||
            (rc = block_forward(dev, m, acts, i, &sv->blocks[i], out)) != 0 ||
            (rc = ptdp_model_unit(dev, m, unit, PTDP_UNIT_FORWARD_END)) != 0)
            return rc;
        if (m->bf16) {   /* the block's float working tensors become bf16 */
            ptdp_act_slot slots[PTDP_ACT_SLOTS_MAX];
            const int ns = block_slots(m, acts, &sv->blocks[i], slots);
            if ((rc = ptdp_act_pack(dev, &sv->blocks[i].packed, slots, ns, "acts.block_bf16")) != 0)
                return rc;
        }
    }

    if (m->last_stage) {
        const int Vl = g->vocab_local;
        if ((rc = act(dev, &sv->lnf, "acts.lnf", R, C)) != 0 || (rc = act(dev, &sv->logits, "acts.logits", R, Vl)) != 0)
            return rc;
        sv->lnf_mean = act_reals(dev, (size_t)Rl, "acts.lnf_mean");
        sv->lnf_rstd = act_reals(dev, (size_t)Rl, "acts.lnf_rstd");
        sv->rowmax = ptdp_alloc(dev, (size_t)R * sizeof(double), PTDP_MEM_ACTS, "acts.rowmax");
        sv->sumexp = ptdp_alloc(dev, (size_t)R * sizeof(double), PTDP_MEM_ACTS, "acts.sumexp");
        double *picked = ptdp_alloc(dev, (size_t)R * sizeof(double), PTDP_MEM_ACTS, "acts.picked");
        if (!sv->lnf_mean || !sv->lnf_rstd || !sv->rowmax || !sv->sumexp || !picked) {
            ptdp_free(dev, picked);
            return PTDP_ENOMEM;
        }
        if ((rc = ptdp_model_unit(dev, m, g->lnf_w, PTDP_UNIT_FORWARD_BEGIN)) != 0 ||
            (g->head != g->wte && (rc = ptdp_model_unit(dev, m, g->head, PTDP_UNIT_FORWARD_BEGIN)) != 0)) {
            ptdp_free(dev, picked);
            return rc;
        }
        w0 = ptdp_wall_now();
        if ((rc = layernorm_into_tp(dev, m, acts, sv->lnf, sv->lnf_mean, sv->lnf_rstd, sv->x_out, g->lnf_w,
                                    g->lnf_b)) != 0) {
            ptdp_free(dev, picked);
            return rc;
        }
        round_bf16(m, sv->lnf);
        /* f forward is the identity: lnf is the same on every rank */
        ptdp_tp_column_linear_forward(dev, tp, sv->logits, sv->lnf, g->head->w, NULL, NULL);
        round_bf16(m, sv->logits);   /* a bf16 product's output, then the loss in float */
        account(dev, "head fwd", ptdp_gpt_cost_head_forward(dev->profile, &shape), w0, true);
        /* no labels: a forward for the logits alone (gpt_sample.c) */
        if (acts->labels != NULL)
            rc = ptdp_tp_xent_forward(tp, sv->logits, m->mesh->tp_rank * Vl, acts->labels, sv->rowmax,
                                      sv->sumexp, picked, &acts->loss_sum);
        ptdp_free(dev, picked);
        if (rc != 0 || (rc = ptdp_model_unit(dev, m, g->lnf_w, PTDP_UNIT_FORWARD_END)) != 0 ||
            (rc = ptdp_model_unit(dev, m, g->head, PTDP_UNIT_FORWARD_END)) != 0)
            return rc;
    }
    return PTDP_OK;
}

int ptdp_gpt_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_batch *b,
                     ptdp_tensor input, long step, bool recompute, ptdp_tensor *out)
{
    memset(acts, 0, sizeof *acts);
    acts->rows = b->rows;
    acts->first_sample = b->first;
    acts->step = step;
    acts->labels = b->labels;
    acts->recompute = recompute;
    acts->alive = true;
    acts->t0 = b->t0;
    acts->tlen = b->tlen;
    ptdp_gpt_saved *sv = calloc(1, sizeof *sv);
    if (sv == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    acts->saved = sv;
    sv->nblocks = m->layer_end - m->layer_begin;
    int rc;
    /* The stage input, kept: the tokens on stage 0 (this device's
     * positions of them under CP, the slice's with token slices), else the
     * activation. */
    const size_t n = (size_t)b->rows * local_T(m, acts);
    const int bcols = ptdp_batch_boundary_cols(m, b);
    if (m->first_stage) {
        int64_t *tokens = ptdp_alloc(dev, (n > 0 ? n : 1) * sizeof *tokens, PTDP_MEM_ACTS, "acts.tokens");
        if (tokens == NULL)
            return PTDP_ENOMEM;
        take_positions(m, acts, tokens, b->tokens, b->rows);
        sv->tokens = tokens;
    } else {
        if ((rc = act(dev, &sv->input, "acts.input", b->rows, bcols)) != 0)
            return rc;
        ptdp_tensor_copy(sv->input, input);
    }
    /* Under CP (or a token slice) the loss is this device's tokens' share:
     * their labels. */
    if ((cp_size(m) > 1 || sliced(acts)) && b->labels != NULL) {
        if ((sv->labels = ptdp_alloc(dev, (n > 0 ? n : 1) * sizeof *sv->labels, PTDP_MEM_ACTS, "acts.labels")) == NULL)
            return PTDP_ENOMEM;
        take_positions(m, acts, sv->labels, b->labels, b->rows);
        acts->labels = sv->labels;
    }
    if ((rc = stage_forward(dev, m, acts, sv)) != 0)
        return rc;
    if (!m->last_stage && out != NULL)
        ptdp_tensor_copy(*out, ptdp_tensor_wrap(sv->x_out.data, b->rows, bcols));
    if (recompute) {
        free_computed(dev, sv);
    } else if (m->bf16) {
        ptdp_act_slot slots[2];
        if ((rc = ptdp_act_pack(dev, &sv->tail_packed, slots, tail_slots(sv, slots), "acts.tail_bf16")) != 0)
            return rc;
    }
    return PTDP_OK;
}

/* ----------------------------------------------------------- backward */

/* Scratch of one backward.  R token rows, but tmp and dln_local (and dh)
 * have region rows: all R, or this rank's positions under SP, where dfull
 * holds a gathered gradient. */
typedef struct {
    ptdp_tensor tmp, dln, dln_local, dfull, dff, dy, dqkv;
    ptdp_real *att;             /* 2 T T */
} scratch;

/* Into the TP region's backward: the gradient `d` of a row-parallel
 * layer's output (region rows) as that layer's backward needs it, all R
 * rows — itself under TP (g's backward is the identity), gathered along
 * the sequence into s->dfull under SP. */
static int grad_into_tp(ptdp_device *dev, const ptdp_model *m, const ptdp_acts *acts, ptdp_tensor d, scratch *s,
                        ptdp_tensor *full)
{
    *full = d;
    if (!m->mesh->sp)
        return PTDP_OK;
    *full = s->dfull;
    return ptdp_sp_all_gather(dev, m->mesh->tp_comm, s->dfull, d, acts->rows);
}

/* One block, right to left: dh (region rows x C) is the gradient of the
 * block's output on entry and of its input on return. */
static int block_backward(ptdp_device *dev, ptdp_model *m, const ptdp_acts *acts, int i,
                          ptdp_gpt_block_acts *a, ptdp_tensor dh, scratch *s, ptdp_wgrad *wg)
{
    const ptdp_model_config *c = &m->cfg;
    const ptdp_gpt *g = m->impl;
    const ptdp_gpt_block *w = &g->blocks[i];
    const int T = c->seq_len, C = c->hidden, hd = C / c->heads, hl = g->heads_local;
    const int Cl = hl * hd, R = acts->rows * local_T(m, acts);
    const int layer = m->layer_begin + i;
    char what[32];
    snprintf(what, sizeof what, "block %d bwd", layer);
    char wwhat[32];
    snprintf(wwhat, sizeof wwhat, "block %d wgrad", layer);
    /* The four dW products (c_fc, its c_proj, c_attn, its c_proj): charged
     * here when they run here, by W when recorded for it (gpt_cost.h). */
    const ptdp_gpt_shape shape = shape_of(m, acts, wg != NULL);
    const ptdp_profile *p = dev->profile;
    int rc;

    /* MLP: out = x2 + drop(GELU(LN2(x2) c_fc^T + b) c_proj^T + b) */
    double w0 = ptdp_wall_now();
    ptdp_tensor dm = dh;
    if (m->dropout > 0) {
        ptdp_tensor_copy(s->tmp, dh);
        region_dropout(m, acts, s->tmp, dropout_key(m, layer, "mlp_out"));
        dm = s->tmp;
    }
    if ((rc = grad_into_tp(dev, m, acts, dm, s, &dm)) != 0)           /* SP: sequence gather */
        return rc;
    w0 = m->mesh->sp ? ptdp_wall_now() : w0;
    /* row-parallel c_proj (g's backward is the identity), then c_fc */
    if ((rc = ptdp_wgrad_linear_backward(dev, wg, &s->dff, w->fc_proj_w->g, &w->fc_proj_b->g, dm, a->gelu,
                                         w->fc_proj_w->w, false, ptdp_gpt_cost_dw_fc_proj(p, &shape), wwhat)) != 0)
        return rc;
    ptdp_gelu_backward(s->dff, s->dff, a->fc);
    if ((rc = ptdp_wgrad_linear_backward(dev, wg, &s->dln, w->fc_w->g, &w->fc_b->g, s->dff, a->ln2, w->fc_w->w,
                                         false, ptdp_gpt_cost_dw_fc(p, &shape), wwhat)) != 0)
        return rc;
    account(dev, what, ptdp_gpt_cost_mlp_backward(p, &shape), w0, false);
    if ((rc = grad_out_of_tp(dev, m, acts, s->dln_local, s->dln)) != 0)   /* f, or the sequence scatter */
        return rc;
    w0 = ptdp_wall_now();
    /* dx2 = dh (the residual) + LN2's backward */
    ptdp_layernorm_backward(dh, w->ln2_w->g, w->ln2_b->g, s->dln_local, a->x2, w->ln2_w->w, a->ln2_mean,
                            a->ln2_rstd, true);

    /* attention: x2 = x + drop(attention(LN1(x) c_attn^T) c_proj^T + b) */
    ptdp_tensor dout = dh;
    if (m->dropout > 0) {
        ptdp_tensor_copy(s->tmp, dh);
        region_dropout(m, acts, s->tmp, dropout_key(m, layer, "attn_out"));
        dout = s->tmp;
    }
    if ((rc = grad_into_tp(dev, m, acts, dout, s, &dout)) != 0)       /* SP: sequence gather */
        return rc;
    if ((rc = ptdp_wgrad_linear_backward(dev, wg, &s->dy, w->proj_w->g, &w->proj_b->g, dout, a->y, w->proj_w->w,
                                         false, ptdp_gpt_cost_dw_attn_proj(p, &shape), wwhat)) != 0)   /* row-parallel */
        return rc;
    ptdp_attn_dropout drop = {
        .p = m->dropout, .key = dropout_key(m, layer, "attn"), .sample0 = acts->first_sample,
        .head0 = m->mesh->tp_rank * hl, .heads_total = c->heads,
    };
    /* Selective recomputation (Korthikanti et al.): the forward kept qkv
     * but not the probabilities, B nh/tp T^2 numbers a block, the largest
     * activation at long T; the attention core runs again here, cheap
     * beside the GEMMs around it.  Counter-based dropout masks make the
     * second run the first, bit for bit.  Its y goes to dqkv's storage,
     * which the backward overwrites next. */
    ptdp_real *probs = a->probs;
    if (cp_size(m) > 1) {            /* the ring again, the key/value gradients travelling home */
        if ((rc = ptdp_ring_attention_backward(dev, m->mesh->cp_comm, s->dqkv, s->dy, a->qkv, a->y, a->probs, T,
                                               hl, hd, m->mesh->cp_zigzag, &drop)) != 0)
            return rc;
    } else if (sliced(acts)) {       /* TeraPipe: the cache's keys, their gradients added into it */
        ptdp_gpt_kv *kv = ptdp_gpt_kv_get(dev, m, acts);
        if (kv == NULL)
            return PTDP_EINVAL;
        const int q0 = acts->t0, q1 = acts->t0 + acts->tlen;
        if (probs == NULL) {
            if ((probs = act_reals(dev, (size_t)acts->rows * hl * (q1 - q0) * q1, "grad.probs")) == NULL)
                return PTDP_ENOMEM;
            ptdp_attention_forward_slice(ptdp_tensor_wrap(s->dqkv.data, R, Cl), probs, kv->qkv[i], T, q0, q1, hl,
                                         hd, &drop, s->att);
            if (m->bf16)   /* as the forward would have kept them */
                ptdp_act_round_reals(probs, (size_t)acts->rows * hl * (q1 - q0) * q1);
        }
        ptdp_attention_backward_slice(kv->dqkv[i], s->dy, kv->qkv[i], probs, T, q0, q1, hl, hd, &drop, true,
                                      s->att);
        slice_rows(kv->dqkv[i], s->dqkv, acts, false);    /* complete: later slices ran first */
    } else if (probs == NULL) {
        if ((probs = act_reals(dev, (size_t)acts->rows * hl * T * T, "grad.probs")) == NULL)
            return PTDP_ENOMEM;
        ptdp_attention_forward(ptdp_tensor_wrap(s->dqkv.data, R, Cl), probs, a->qkv, T, hl, hd, &drop, s->att);
        if (m->bf16)   /* as the forward would have kept them */
            ptdp_act_round_reals(probs, (size_t)acts->rows * hl * T * T);
    }
    if (cp_size(m) == 1 && !sliced(acts))
        ptdp_attention_backward(s->dqkv, s->dy, a->qkv, probs, T, hl, hd, &drop, s->att);
    if (probs != a->probs)
        ptdp_free(dev, probs);
    if ((rc = ptdp_wgrad_linear_backward(dev, wg, &s->dln, w->attn_w->g, &w->attn_b->g, s->dqkv, a->ln1,
                                         w->attn_w->w, false, ptdp_gpt_cost_dw_attn(p, &shape), wwhat)) != 0)
        return rc;
    /* (the core again under selective recomputation: gpt_cost.c) */
    account(dev, what, ptdp_gpt_cost_attn_backward(p, &shape), w0, false);
    if ((rc = grad_out_of_tp(dev, m, acts, s->dln_local, s->dln)) != 0)   /* f, or the sequence scatter */
        return rc;
    w0 = ptdp_wall_now();
    ptdp_layernorm_backward(dh, w->ln1_w->g, w->ln1_b->g, s->dln_local, a->x, w->ln1_w->w, a->ln1_mean,
                            a->ln1_rstd, true);
    account(dev, what, ptdp_gpt_cost_ln1_backward(p, &shape), w0, false);
    return PTDP_OK;
}

/* The backward of one micro-batch; with a sink wg the weight-gradient
 * products (and the embedding's scatter-add, which a one-stage model's
 * tied wte shares with the head's product) are recorded there for a later
 * W (wgrad.h) and not charged here.  Biases, LayerNorms and wpe (sums over
 * rows, cheap) stay here. */
int ptdp_gpt_backward_input(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                            double loss_scale, ptdp_tensor *dx, ptdp_wgrad *wg)
{
    const ptdp_model_config *c = &m->cfg;
    const ptdp_gpt *g = m->impl;
    ptdp_gpt_saved *sv = acts->saved;
    const int T = c->seq_len, C = c->hidden, hl = g->heads_local, Cl = hl * (C / c->heads);
    const int Fl = g->ffn_local, R = acts->rows * local_T(m, acts), Rl = region_rows(m, R), nb = sv->nblocks;
    const bool sp = m->mesh->sp;
    const ptdp_gpt_shape shape = shape_of(m, acts, wg != NULL);
    ptdp_tensor dh = { 0 };
    scratch s = { 0 };
    int rc;

    if (acts->recompute) {
        double loss = acts->loss_sum;   /* the first forward's, kept as is */
        if ((rc = stage_forward(dev, m, acts, sv)) != 0)
            goto done;
        acts->loss_sum = loss;
    }
    if ((rc = act(dev, &dh, "grad.h", Rl, C)) != 0 || (rc = act(dev, &s.tmp, "grad.tmp", Rl, C)) != 0 ||
        (rc = act(dev, &s.dln, "grad.ln", R, C)) != 0 || (rc = act(dev, &s.dff, "grad.ff", R, Fl)) != 0 ||
        (rc = act(dev, &s.dy, "grad.attn_y", R, Cl)) != 0 || (rc = act(dev, &s.dqkv, "grad.qkv", R, 3 * Cl)) != 0)
        goto done;
    s.dln_local = s.dln;    /* TP: f's all-reduce works in place */
    if (sp && ((rc = act(dev, &s.dln_local, "grad.ln_local", Rl, C)) != 0 ||
               (rc = act(dev, &s.dfull, "grad.gathered", R, C)) != 0))
        goto done;
    if ((s.att = ptdp_alloc(dev, 2 * (size_t)T * T * sizeof(ptdp_real), PTDP_MEM_ACTS, "grad.attn")) == NULL) {
        rc = PTDP_ENOMEM;
        goto done;
    }

    double w0 = ptdp_wall_now();
    if (m->last_stage) {
        /* dz = (softmax - onehot) / (B T) on this rank's vocabulary rows,
         * then through the head (its f backward sums dh over the ranks'
         * rows) and LN_f. */
        const int Vl = g->vocab_local;
        ptdp_act_slot tail[2];
        if ((rc = ptdp_model_unit(dev, m, g->lnf_w, PTDP_UNIT_BACKWARD_BEGIN)) != 0 ||
            (rc = ptdp_model_unit(dev, m, g->head, PTDP_UNIT_BACKWARD_BEGIN)) != 0 ||
            (rc = ptdp_act_unpack(dev, &sv->tail_packed, tail, tail_slots(sv, tail))) != 0)   /* bf16 */
            goto done;
        w0 = ptdp_wall_now();
        ptdp_tp_xent_backward(sv->logits, sv->logits, m->mesh->tp_rank * Vl, acts->labels, sv->rowmax,
                              sv->sumexp, loss_scale);
        if ((rc = ptdp_wgrad_linear_backward(dev, wg, &s.dln, g->head->g, NULL, sv->logits, sv->lnf, g->head->w,
                                             false, ptdp_gpt_cost_dw_head(dev->profile, &shape), "head wgrad")) != 0)
            goto done;
        account(dev, "head bwd", ptdp_gpt_cost_head_backward(dev->profile, &shape), w0, true);
        if ((rc = grad_out_of_tp(dev, m, acts, s.dln_local, s.dln)) != 0)  /* f, or the sequence scatter */
            goto done;
        w0 = ptdp_wall_now();
        ptdp_layernorm_backward(dh, g->lnf_w->g, g->lnf_b->g, s.dln_local, sv->x_out, g->lnf_w->w,
                                sv->lnf_mean, sv->lnf_rstd, false);
        account(dev, "head bwd", ptdp_gpt_cost_lnf_backward(dev->profile, &shape), w0, true);
        if (m->bf16) {   /* done with the tail's float copies */
            ptdp_tensor_free(dev, &sv->x_out);
            ptdp_tensor_free(dev, &sv->lnf);
        }
        /* the head's and LN_f's gradients are final (a data-parallel sum may start) */
        if ((rc = ptdp_model_unit(dev, m, g->lnf_w, PTDP_UNIT_BACKWARD_END)) != 0 ||
            (g->head != g->wte && (rc = ptdp_model_unit(dev, m, g->head, PTDP_UNIT_BACKWARD_END)) != 0) ||
            (wg == NULL && (rc = ptdp_model_grads_ready(dev, m, g->lnf_w)) != 0))
            goto done;
    } else {
        ptdp_tensor_copy(dh, ptdp_tensor_wrap(dout->data, Rl, C));
    }

    for (int i = nb - 1; i >= 0; i--) {
        ptdp_act_slot slots[PTDP_ACT_SLOTS_MAX];
        const int ns = block_slots(m, acts, &sv->blocks[i], slots);
        if ((rc = ptdp_model_unit(dev, m, g->blocks[i].ln1_w, PTDP_UNIT_BACKWARD_BEGIN)) != 0 ||
            (rc = ptdp_act_unpack(dev, &sv->blocks[i].packed, slots, ns)) != 0 ||      /* bf16 */
            (rc = block_backward(dev, m, acts, i, &sv->blocks[i], dh, &s, wg)) != 0 ||
            (rc = ptdp_model_unit(dev, m, g->blocks[i].ln1_w, PTDP_UNIT_BACKWARD_END)) != 0 ||
            (wg == NULL && (rc = ptdp_model_grads_ready(dev, m, g->blocks[i].ln1_w)) != 0))
            goto done;
        if (m->bf16)   /* one block's float copy at a time */
            free_block(dev, &sv->blocks[i]);
    }

    w0 = ptdp_wall_now();
    if (m->first_stage) {
        /* the embedding's g backward is the identity: every rank adds dh
         * into the wte rows it holds, and into wpe.  Under SP the
         * reduce-scatter's backward first gathers dh along the sequence. */
        ptdp_tensor dfull;
        if ((g->head != g->wte && (rc = ptdp_model_unit(dev, m, g->wte, PTDP_UNIT_BACKWARD_BEGIN)) != 0) ||
            (rc = grad_into_tp(dev, m, acts, dh, &s, &dfull)) != 0)
            goto done;
        w0 = sp ? ptdp_wall_now() : w0;
        positions(m, acts, g->wpe->g, dfull, acts->rows, true);
        /* the vocab-parallel embedding's backward (tp.h): each rank adds
         * into the rows it holds — a weight gradient, so W's if split */
        if ((rc = ptdp_wgrad_embedding(dev, wg, g->wte->g, (int64_t)m->mesh->tp_rank * g->vocab_local,
                                       sv->tokens, dfull, ptdp_gpt_cost_dw_embed(dev->profile, &shape),
                                       "embed wgrad")) != 0)
            goto done;
        account(dev, "embed bwd", ptdp_gpt_cost_embed_backward(dev->profile, &shape), w0, true);
        if ((rc = ptdp_model_unit(dev, m, g->wte, PTDP_UNIT_BACKWARD_END)) != 0)
            goto done;
    } else if (dx != NULL) {
        ptdp_tensor_copy(*dx, ptdp_tensor_wrap(dh.data, acts->rows, dx->cols));
    }
done:
    if (sliced(acts) && acts->t0 == 0)     /* the sequences' last backward here */
        ptdp_gpt_kv_done(dev, m, acts);
    ptdp_tensor_free(dev, &dh);
    ptdp_tensor_free(dev, &s.tmp);
    ptdp_tensor_free(dev, &s.dln);
    if (sp)
        ptdp_tensor_free(dev, &s.dln_local);
    ptdp_tensor_free(dev, &s.dfull);
    ptdp_tensor_free(dev, &s.dff);
    ptdp_tensor_free(dev, &s.dy);
    ptdp_tensor_free(dev, &s.dqkv);
    ptdp_free(dev, s.att);
    ptdp_gpt_acts_free(dev, m, acts);
    return rc;
}

int ptdp_gpt_backward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                      double loss_scale, ptdp_tensor *dx)
{
    return ptdp_gpt_backward_input(dev, m, acts, dout, loss_scale, dx, NULL);
}
