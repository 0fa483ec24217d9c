/*
 * llama.c — forward and backward of one pipeline stage of the llama, one
 * micro-batch of B sequences (R = B T token rows) at a time.
 *
 *  stage 0                 every local block (llama_block.c)          last stage
 *  ┌────────────────────┐  ┌────────────────────────────────────┐  ┌──────────────────────┐
 *  │ h = tok_embeddings │  │ h = x + wo attn(rope(q), rope(k), v) │  │ nf = RMSNorm(h) ⊙ norm │
 *  │     [token]        │─►│ x = h + w2 (silu(w1 n2) ⊙ w3 n2)     │─►│ z  = nf output^T       │
 *  │ (vocab-parallel, g)│  └────────────────────────────────────┘  │ loss = xent(z)         │
 *  └────────────────────┘                                            │ (vocab-parallel)       │
 *                                                                    └──────────────────────┘
 *
 * The embedding and the head are the GPT's vocab-parallel pair (tp.h):
 * each rank looks up the V/tp rows it holds (zeros for the others) and g
 * sums the ranks' lookups; the head's logits are this rank's V/tp columns,
 * and the cross-entropy's max and sum run over the TP group.  Unlike
 * GPT-2's, the head is its own matrix (`output.weight`, untied), so no
 * embedding group sums two copies' gradients across the pipeline.
 *
 * The backward walks the boxes right to left; gradients ACCUMULATE (+=),
 * so micro-batches add up.  With full recomputation (acts->recompute) a
 * micro-batch keeps only each block's input, and the backward redoes one
 * block at a time inside its unit's BACKWARD_BEGIN/END (model.h: the
 * gather ZeRO-3 makes for the backward serves the forward again too).
 *
 * Split backward (zero-bubble schedules, wgrad.h): the dW products of
 * every linear layer and the embedding's scatter-add go to W's sink; the
 * norms' gradients (sums over rows, cheap) stay in B.
 */
#include <stdlib.h>
#include <string.h>

#include "models/llama_pass.h"
#include "ptdp/act_bf16.h"
#include "ptdp/error.h"
#include "ptdp/ops.h"
#include "ptdp/sp.h"
#include "ptdp/tp.h"
#include "parallel/model_impl.h"
#include "runtime/device_impl.h"

/* ------------------------------------------------------- saved state */

static void free_block(ptdp_device *dev, ptdp_llama_block_acts *a)
{
    ptdp_tensor_free(dev, &a->x);
    ptdp_llama_block_free_work(dev, a);
}

static void free_tail_work(ptdp_device *dev, ptdp_llama_saved *sv)
{
    ptdp_tensor_free(dev, &sv->nf);
    ptdp_tensor_free(dev, &sv->logits);
    ptdp_free(dev, sv->rstdf);
    ptdp_free(dev, sv->rowmax);
    ptdp_free(dev, sv->sumexp);
    sv->rstdf = NULL;
    sv->rowmax = sv->sumexp = NULL;
}

void ptdp_llama_acts_free(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts)
{
    (void)m;
    ptdp_llama_saved *sv = acts->saved;
    if (sv != NULL) {
        for (int i = 0; sv->blocks != NULL && i < sv->nblocks; i++)
            free_block(dev, &sv->blocks[i]);
        free(sv->blocks);
        ptdp_tensor_free(dev, &sv->x_out);
        free_tail_work(dev, sv);
        ptdp_tensor_free(dev, &sv->input);
        ptdp_free(dev, sv->tokens);
        ptdp_free(dev, sv->labels);
        ptdp_moe_tally_free(&sv->moe_tally);
        free(sv);
    }
    acts->saved = NULL;
    acts->alive = false;
}

/* -------------------------------------------------- the two ends */

/* x = tok_embeddings[tokens]: this rank's rows, summed over TP (g); under
 * SP a reduce-scatter along the sequence both sums them and keeps this
 * rank's positions. */
static int embed_forward(ptdp_llama_pass *k, ptdp_llama_saved *sv, ptdp_tensor x)
{
    ptdp_model *m = k->m;
    const ptdp_llama *l = m->impl;
    const int64_t row0 = (int64_t)m->mesh->tp_rank * l->vocab_local;
    ptdp_tensor full = { 0 };
    int rc = ptdp_model_unit(k->dev, m, l->tok_embeddings, PTDP_UNIT_FORWARD_BEGIN);
    if (rc == 0 && !m->mesh->sp)
        rc = ptdp_tp_embedding_forward(m->mesh->tp_comm, x, l->tok_embeddings->w, row0, sv->tokens);
    else if (rc == 0 && (rc = ptdp_llama_act(k, &full, "acts.embed_partial", k->R, x.cols)) == 0) {
        ptdp_embedding_forward(full, l->tok_embeddings->w, row0, sv->tokens);
        rc = ptdp_sp_reduce_scatter(k->dev, m->mesh->tp_comm, x, full, k->acts->rows);
        ptdp_tensor_free(k->dev, &full);
    }
    k->w0 = ptdp_wall_now();
    if (rc == 0)
        rc = ptdp_model_unit(k->dev, m, l->tok_embeddings, PTDP_UNIT_FORWARD_END);
    return rc;
}

/* Stage 0: g's backward is the identity (under SP: the gather of dh along
 * the sequence); each rank adds dh into the rows it holds (a weight
 * gradient: W's under a split backward), R C adds on the clock. */
static int embed_backward(ptdp_llama_pass *k, ptdp_llama_saved *sv, ptdp_llama_scratch *s, ptdp_tensor dh)
{
    ptdp_model *m = k->m;
    const ptdp_llama *l = m->impl;
    int rc = ptdp_model_unit(k->dev, m, l->tok_embeddings, PTDP_UNIT_BACKWARD_BEGIN);
    ptdp_llama_pass_name(k, "embed bwd", "embed wgrad");
    k->w0 = ptdp_wall_now();
    if (rc == 0)
        dh = ptdp_llama_grad_into_tp(k, s, dh);
    if (rc == 0 && (rc = k->rc) == 0)
        rc = ptdp_wgrad_embedding(k->dev, k->wg, l->tok_embeddings->g, (int64_t)m->mesh->tp_rank * l->vocab_local,
                                  sv->tokens, dh, (double)ptdp_tensor_numel(dh), k->wwhat);
    if (rc == 0 && k->wg == NULL) {   /* the scatter-add's R C adds, now (W charges them when deferred) */
        k->pending += (double)ptdp_tensor_numel(dh);
        ptdp_llama_charge(k);
        rc = k->rc;
    }
    if (rc == 0)
        rc = ptdp_model_unit(k->dev, m, l->tok_embeddings, PTDP_UNIT_BACKWARD_END);
    return rc;
}

/* The last stage: nf = RMSNorm(x) ⊙ norm, z = nf output^T on this rank's
 * vocabulary columns, and the vocab-parallel loss.  held: full
 * recomputation's second forward, inside the backward's unit events. */
static int head_forward(ptdp_llama_pass *k, ptdp_acts *acts, ptdp_llama_saved *sv, bool held)
{
    ptdp_model *m = k->m;
    const ptdp_llama *l = m->impl;
    const int R = k->R;
    ptdp_llama_act(k, &sv->nf, "acts.nf", k->Rl, m->cfg.hidden);   /* SP: this rank's positions */
    ptdp_llama_act(k, &sv->logits, "acts.logits", R, l->vocab_local);
    sv->rstdf = ptdp_llama_reals(k, (size_t)k->Rl, "acts.rstdf");
    sv->rowmax = ptdp_alloc(k->dev, (size_t)R * sizeof(double), PTDP_MEM_ACTS, "acts.rowmax");
    sv->sumexp = ptdp_alloc(k->dev, (size_t)R * sizeof(double), PTDP_MEM_ACTS, "acts.sumexp");
    double *picked = ptdp_alloc(k->dev, (size_t)R * sizeof(double), PTDP_MEM_ACTS, "acts.picked");
    int rc = k->rc;
    if (rc == 0 && (!sv->rowmax || !sv->sumexp || !picked))
        rc = PTDP_ENOMEM;
    if (rc == 0 && !held)
        rc = ptdp_model_unit(k->dev, m, l->norm, PTDP_UNIT_FORWARD_BEGIN);
    if (rc == 0) {
        ptdp_llama_pass_name(k, "head fwd", "");
        k->w0 = ptdp_wall_now();
        ptdp_llama_norm(k, sv->nf, sv->rstdf, sv->x_out, l->norm);
        ptdp_llama_linear(k, PTDP_SPLIT_COLUMN, sv->logits, sv->nf, l->output);
        rc = k->rc;
    }
    if (rc == 0 && acts->labels != NULL)
        rc = ptdp_tp_xent_forward(m->mesh->tp_comm, sv->logits, m->mesh->tp_rank * l->vocab_local, acts->labels,
                                  sv->rowmax, sv->sumexp, picked, &acts->loss_sum);
    ptdp_free(k->dev, picked);
    if (rc == 0 && !held)
        rc = ptdp_model_unit(k->dev, m, l->norm, PTDP_UNIT_FORWARD_END);
    return rc;
}

/* dz = (softmax - onehot) scaled, on this rank's columns; through the
 * head (its f sums dnf over TP) and the final norm into dh. */
static int head_backward(ptdp_llama_pass *k, ptdp_llama_saved *sv, ptdp_llama_scratch *s, ptdp_tensor dh,
                         double loss_scale)
{
    ptdp_model *m = k->m;
    const ptdp_llama *l = m->impl;
    ptdp_llama_pass_name(k, "head bwd", "head wgrad");
    k->w0 = ptdp_wall_now();
    ptdp_tp_xent_backward(sv->logits, sv->logits, m->mesh->tp_rank * l->vocab_local, k->acts->labels, sv->rowmax,
                          sv->sumexp, loss_scale);
    const ptdp_param *head[1] = { l->output };
    ptdp_llama_columns_backward(k, s, head, &sv->logits, 1, sv->nf);
    ptdp_llama_norm_backward(k, dh, s->dn, sv->x_out, l->norm, sv->rstdf, false);
    ptdp_llama_charge(k);
    return k->rc;
}

/* ------------------------------------------------------------ forward */

/* Block i's forward, then what it keeps: everything, or with full
 * recomputation its input alone.  An MoE block's balance loss counts
 * here, once (not again in a recomputation). */
static int block_forward(ptdp_llama_pass *k, int i, ptdp_llama_saved *sv, ptdp_tensor *out)
{
    const ptdp_llama *l = k->m->impl;
    const ptdp_param *unit = l->blocks[i].attention_norm;
    int rc;
    if ((rc = ptdp_model_unit(k->dev, k->m, unit, PTDP_UNIT_FORWARD_BEGIN)) != 0 ||
        (rc = ptdp_llama_block_forward(k, i, &sv->blocks[i], out)) != 0 ||
        (rc = ptdp_model_unit(k->dev, k->m, unit, PTDP_UNIT_FORWARD_END)) != 0)
        return rc;
    sv->aux_sum += ptdp_moe_aux(sv->blocks[i].moe);
    if (k->acts->recompute)
        ptdp_llama_block_free_work(k->dev, &sv->blocks[i]);
    return PTDP_OK;
}

static int stage_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, ptdp_llama_saved *sv)
{
    const int nb = sv->nblocks;
    ptdp_llama_pass k;
    ptdp_llama_pass_begin(&k, dev, m, acts, NULL);
    sv->blocks = calloc((size_t)(nb > 0 ? nb : 1), sizeof *sv->blocks);
    if (sv->blocks == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    ptdp_tensor *x = nb > 0 ? &sv->blocks[0].x : &sv->x_out;
    int rc;
    if ((rc = ptdp_llama_act(&k, x, "acts.x", k.Rl, m->cfg.hidden)) != 0)
        return rc;
    if (!m->first_stage)
        ptdp_tensor_copy(*x, ptdp_tensor_wrap(sv->input.data, x->rows, x->cols));
    else if ((rc = embed_forward(&k, sv, *x)) != 0)
        return rc;
    ptdp_llama_round(&k, *x);
    for (int i = 0; i < nb; i++)
        if ((rc = block_forward(&k, i, sv, i + 1 < nb ? &sv->blocks[i + 1].x : &sv->x_out)) != 0)
            return rc;
    return m->last_stage ? head_forward(&k, acts, sv, false) : PTDP_OK;
}

/* ids of this rank's positions of each sequence (all of them without CP):
 * dst[b Tl + t] = src[b T + positions[t]]. */
static int64_t *take_positions(ptdp_device *dev, const ptdp_model *m, const int64_t *src, int rows, const char *name)
{
    const int T = ptdp_llama(&m->cfg)->seq_len, Tl = T / m->mesh->cp;
    const int64_t *pos = ((const ptdp_llama *)m->impl)->positions;
    const size_t n = (size_t)rows * Tl;
    int64_t *dst = ptdp_alloc(dev, (n > 0 ? n : 1) * sizeof *dst, PTDP_MEM_ACTS, name);
    for (int b = 0; dst != NULL && b < rows; b++)
        for (int t = 0; t < Tl; t++)
            dst[(size_t)b * Tl + t] = src[(size_t)b * T + pos[t]];
    return dst;
}

/* The stage input, kept: the tokens on stage 0, else the activation; under
 * CP the labels of this rank's positions (the last stage's loss). */
static int keep_input(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, ptdp_llama_saved *sv, const ptdp_batch *b,
                      ptdp_tensor input)
{
    if (m->mesh->cp > 1 && b->labels != NULL) {
        if ((sv->labels = take_positions(dev, m, b->labels, b->rows, "acts.labels")) == NULL)
            return PTDP_ENOMEM;
        acts->labels = sv->labels;
    }
    if (m->first_stage)
        return (sv->tokens = take_positions(dev, m, b->tokens, b->rows, "acts.tokens")) == NULL ? PTDP_ENOMEM
                                                                                             : PTDP_OK;
    int rc = ptdp_tensor_alloc_uninit(dev, &sv->input, "acts.input", PTDP_MEM_ACTS, b->rows, m->boundary_cols);
    if (rc == 0)
        ptdp_tensor_copy(sv->input, input);
    return rc;
}

int ptdp_llama_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_batch *b,
                       ptdp_tensor input, long step, bool recompute, ptdp_tensor *out)
{
    ptdp_acts_begin(acts, b, step, recompute);
    ptdp_llama_saved *sv = calloc(1, sizeof *sv);
    if (sv == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    acts->saved = sv;
    sv->nblocks = m->layer_end - m->layer_begin;
    int rc;
    if ((rc = keep_input(dev, m, acts, sv, b, input)) != 0 || (rc = stage_forward(dev, m, acts, sv)) != 0)
        return rc;
    if (!m->last_stage && out != NULL)
        ptdp_tensor_copy(*out, ptdp_tensor_wrap(sv->x_out.data, b->rows, m->boundary_cols));
    ptdp_tensor_free(dev, &sv->input);   /* block 0's input (or x_out) holds it */
    if (recompute) {                     /* the last stage keeps x_out, the tail's input */
        free_tail_work(dev, sv);
        if (!m->last_stage)
            ptdp_tensor_free(dev, &sv->x_out);
    }
    return PTDP_OK;
}

/* ----------------------------------------------------------- backward */

/* dh and dn on the stream's Rl rows; SP's gathered R rows beside them. */
static int scratch_alloc(ptdp_llama_pass *k, ptdp_llama_scratch *s, ptdp_tensor *dh)
{
    const ptdp_llama *l = k->m->impl;
    const int R = k->R, C = k->m->cfg.hidden, Fl = l->ffn_local, d = l->hd;
    ptdp_llama_act(k, dh, "grad.h", k->Rl, C);
    ptdp_llama_act(k, &s->dn, "grad.norm", k->Rl, C);
    if (k->m->mesh->sp) {
        ptdp_llama_act(k, &s->dfull, "grad.gathered", R, C);
        ptdp_llama_act(k, &s->xfull, "grad.x_gathered", R, C);
        ptdp_llama_act(k, &s->dxfull, "grad.dx_partial", R, C);
        ptdp_llama_act(k, &s->dlocal, "grad.dx_local", k->Rl, C);
    }
    ptdp_llama_act(k, &s->dy, "grad.attn_y", R, l->heads_local * d);
    ptdp_llama_act(k, &s->dqkv, "grad.qkv", R, (l->heads_local + 2 * l->kv_local) * d);
    ptdp_llama_act(k, &s->dg, "grad.swiglu", R, Fl);
    ptdp_llama_act(k, &s->da, "grad.w1", R, Fl);
    ptdp_llama_act(k, &s->db, "grad.w3", R, Fl);
    const int Ta = k->m->mesh->cp_a2a ? k->Tg : k->T;   /* Ulysses: whole sequences */
    const bool tiles = k->m->attention_tiled && !(k->m->mesh->cp > 1 && !k->m->mesh->cp_a2a);   /* not the ring */
    s->att = ptdp_llama_reals(k, tiles ? ptdp_attention_tiled_scratch() : 2 * (size_t)Ta * Ta, "grad.attn");
    return k->rc;
}

static void scratch_free(ptdp_device *dev, ptdp_llama_scratch *s, ptdp_tensor *dh)
{
    ptdp_tensor *t[] = { dh, &s->dn, &s->dy, &s->dqkv, &s->dg, &s->da, &s->db, &s->dfull, &s->xfull, &s->dxfull,
                         &s->dlocal };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        ptdp_tensor_free(dev, t[i]);
    ptdp_free(dev, s->att);
}

/* The blocks right to left, each inside its unit's backward events; with
 * full recomputation its forward again first, from its kept input (a pass
 * of its own, charged as a forward; its output, the next block's kept
 * input, dropped).  Each block's activations are freed once its backward
 * is done: one block's at a time. */
static int blocks_backward(ptdp_llama_pass *k, ptdp_llama_saved *sv, ptdp_llama_scratch *s, ptdp_tensor dh)
{
    ptdp_model *m = k->m;
    const ptdp_llama *l = m->impl;
    for (int i = sv->nblocks - 1; i >= 0; i--) {
        const ptdp_param *unit = l->blocks[i].attention_norm;
        ptdp_llama_pass again;
        ptdp_tensor dropped = { 0 };
        ptdp_llama_pass_begin(&again, k->dev, m, k->acts, NULL);
        int rc = ptdp_model_unit(k->dev, m, unit, PTDP_UNIT_BACKWARD_BEGIN);
        if (rc == 0 && k->acts->recompute)
            rc = ptdp_llama_block_forward(&again, i, &sv->blocks[i], &dropped);
        ptdp_tensor_free(k->dev, &dropped);
        if (rc == 0)
            rc = ptdp_llama_block_backward(k, i, &sv->blocks[i], dh, s);
        if (rc == 0)
            rc = ptdp_model_unit(k->dev, m, unit, PTDP_UNIT_BACKWARD_END);
        if (rc == 0 && k->wg == NULL)   /* (a split backward's W still adds) */
            rc = ptdp_model_grads_ready(k->dev, m, unit);
        if (rc != 0)
            return rc;
        free_block(k->dev, &sv->blocks[i]);
    }
    return PTDP_OK;
}

/* The last stage: the tail (again, with full recomputation — its loss
 * stays the first forward's), then its backward into dh. */
static int tail_backward(ptdp_llama_pass *k, ptdp_acts *acts, ptdp_llama_saved *sv, ptdp_llama_scratch *s,
                         ptdp_tensor dh, double loss_scale)
{
    ptdp_model *m = k->m;
    const ptdp_llama *l = m->impl;
    int rc = ptdp_model_unit(k->dev, m, l->norm, PTDP_UNIT_BACKWARD_BEGIN);
    if (rc == 0 && acts->recompute) {
        ptdp_llama_pass again;
        const double loss = acts->loss_sum;
        ptdp_llama_pass_begin(&again, k->dev, m, acts, NULL);
        rc = head_forward(&again, acts, sv, true);
        acts->loss_sum = loss;
    }
    if (rc == 0)
        rc = head_backward(k, sv, s, dh, loss_scale);
    if (rc == 0)
        rc = ptdp_model_unit(k->dev, m, l->norm, PTDP_UNIT_BACKWARD_END);
    if (rc == 0 && k->wg == NULL)
        rc = ptdp_model_grads_ready(k->dev, m, l->norm);
    ptdp_tensor_free(k->dev, &sv->x_out);
    free_tail_work(k->dev, sv);
    return rc;
}

int ptdp_llama_backward_input(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                              double loss_scale, ptdp_tensor *dx, ptdp_wgrad *wg)
{
    ptdp_llama_saved *sv = acts->saved;
    ptdp_tensor dh = { 0 };
    ptdp_llama_scratch s = { 0 };
    ptdp_llama_pass k;
    ptdp_llama_pass_begin(&k, dev, m, acts, wg);
    k.loss_scale = loss_scale;
    int rc = scratch_alloc(&k, &s, &dh);
    if (rc == 0 && m->last_stage)
        rc = tail_backward(&k, acts, sv, &s, dh, loss_scale);
    else if (rc == 0)
        ptdp_tensor_copy(dh, ptdp_tensor_wrap(dout->data, dh.rows, dh.cols));
    if (rc == 0)
        rc = blocks_backward(&k, sv, &s, dh);
    if (rc == 0 && m->first_stage)
        rc = embed_backward(&k, sv, &s, dh);
    else if (rc == 0 && dx != NULL)
        ptdp_tensor_copy(*dx, ptdp_tensor_wrap(dh.data, acts->rows, dx->cols));
    scratch_free(dev, &s, &dh);
    ptdp_llama_acts_free(dev, m, acts);
    return rc;
}

int ptdp_llama_backward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                        double loss_scale, ptdp_tensor *dx)
{
    return ptdp_llama_backward_input(dev, m, acts, dout, loss_scale, dx, NULL);
}
