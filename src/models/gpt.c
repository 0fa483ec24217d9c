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
 * where TP's f had an all-reduce).  The same numbers; the block keeps only
 * its shard of LN's output, which the backward gathers again (gpt_ops.c).
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
 * lookups' parts.  With selective recomputation (m->recompute_core) a
 * block keeps no attention probabilities and redoes the attention core in
 * its backward.  With full recomputation (acts->recompute) a micro-batch
 * keeps only each block's input and the tail's, and the backward redoes
 * one block at a time (below).
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
 *
 * Full recomputation, one block at a time (Megatron-LM's and DeepSpeed's
 * activation checkpointing; Chen et al. 2016):
 *
 *   forward    x0 ─[block 0]─► x1 ─[block 1]─► x2 … x_L ─[LN_f, head, loss]
 *              keeps x0 x1 … x_L (bf16 under --precision bf16); each
 *              block's other tensors are freed as its forward ends, the
 *              tail's as the loss is known
 *   backward   the tail again from x_L, its backward; then for block
 *              i = L-1 … 0: block i's forward again from x_i, its
 *              backward, free all of it — one block's activations alive
 *
 *   kept per micro-batch   L B T C      x0 … x_{L-1}, and x_L on the last
 *                                       stage; stage 0's x0 is the
 *                                       embedding's output (not redone)
 *   peak in its backward   (L-1) B T C  the other blocks' inputs
 *                          + A          the block redone (its input included)
 *                          + B T C      its output, dropped at once
 *                          + scratch    (gpt.h: ptdp_gpt_full_recompute_peak_bytes)
 *
 * The dropout masks are counter-based, so the second forward is the
 * first, bit for bit; the loss stays the first forward's.  Parameters:
 * the recomputed forward of a unit (model.h) runs inside its backward's
 * BACKWARD_BEGIN/END — the gather ZeRO-3 makes for the backward serves it,
 * as FSDP's checkpointing does — so recomputation adds no unit event and
 * no byte of ZeRO-3 traffic.  A token slice's recomputed attention writes
 * its own rows of the stage's K/V cache again (the same values, gpt_kv.c).
 *
 * Where things are: this file runs a stage — the embedding, the blocks in
 * turn, LN_f, the head and the loss — and keeps what a micro-batch needs
 * between its forward and its backward.  The two ends are
 * gpt_embed_head.c, a block gpt_block.c, its ops gpt_ops.c, the attention
 * core gpt_attention.c, the rows a device holds gpt_regions.c
 * (models/gpt_pass.h ties them together).
 */
#include <stdlib.h>
#include <string.h>

#include "models/gpt_pass.h"
#include "ptdp/act_bf16.h"
#include "ptdp/error.h"
#include "ptdp/ops.h"
#include "models/gpt_kv.h"
#include "models/gpt_table.h"
#include "parallel/model_impl.h"
#include "parallel/moe_impl.h"
#include "runtime/device_impl.h"

/* ------------------------------------------------------- saved state */

/* Under --precision bf16 (act_bf16.h) every activation a block keeps is
 * rounded to bf16 where it is made (gpt_ops.c) and stored as bf16 between
 * the forward and the backward: packed into one bf16 buffer after the
 * block's forward, unpacked before its backward — the block's input, its
 * eight tensors and the probabilities.  The LayerNorm statistics stay
 * float (apex keeps them in float), and so do the log-sum-exps of CP and
 * of --attention tiled. */
static int block_slots(const ptdp_model *m, const ptdp_acts *acts, ptdp_gpt_block_acts *a, ptdp_act_slot *s)
{
    int n = 0;
    ptdp_tensor *t[] = { &a->x, &a->ln1, &a->qkv, &a->y, &a->x2, &a->ln2, &a->fc, &a->gelu };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        s[n++] = (ptdp_act_slot){ .t = t[i] };
    if (!ptdp_gpt_cp_ring(m) && !m->attention_tiled)   /* the ring and tiles keep log-sum-exps instead */
        s[n++] = (ptdp_act_slot){ .reals = &a->probs, .n = ptdp_gpt_probs_len(m, acts), .name = "acts.probs" };
    return n;
}

/* Everything block a made in its forward but its input x. */
static void free_block_work(ptdp_device *dev, ptdp_gpt_block_acts *a)
{
    ptdp_tensor *t[] = { &a->ln1, &a->qkv, &a->y, &a->x2, &a->ln2, &a->fc, &a->gelu };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        ptdp_tensor_free(dev, t[i]);
    ptdp_gpt_moe_free(dev, a);
    ptdp_real **r[] = { &a->ln1_mean, &a->ln1_rstd, &a->probs, &a->ln2_mean, &a->ln2_rstd };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        ptdp_free(dev, *r[i]);
        *r[i] = NULL;
    }
}

static void free_block(ptdp_device *dev, ptdp_gpt_block_acts *a)
{
    ptdp_act_packed_free(dev, &a->packed);
    ptdp_tensor_free(dev, &a->x);
    free_block_work(dev, a);
}

/* The last stage's tail but its input x_out: LN_f's output, the logits
 * and the statistics of both. */
static void free_tail_work(ptdp_device *dev, ptdp_gpt_saved *sv)
{
    ptdp_tensor_free(dev, &sv->lnf);
    ptdp_tensor_free(dev, &sv->logits);
    ptdp_free(dev, sv->lnf_mean);
    ptdp_free(dev, sv->lnf_rstd);
    ptdp_free(dev, sv->rowmax);
    ptdp_free(dev, sv->sumexp);
    sv->lnf_mean = sv->lnf_rstd = NULL;
    sv->rowmax = sv->sumexp = NULL;
}

/* Everything the forward made except the stage input. */
static void free_computed(ptdp_device *dev, ptdp_gpt_saved *sv)
{
    if (sv->blocks != NULL)
        for (int i = 0; i < sv->nblocks; i++)
            free_block(dev, &sv->blocks[i]);
    free(sv->blocks);
    sv->blocks = NULL;
    ptdp_act_packed_free(dev, &sv->tail_packed);
    ptdp_tensor_free(dev, &sv->x_out);
    free_tail_work(dev, sv);
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
        ptdp_moe_tally_free(&sv->moe_tally);
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

/* What block a keeps once its forward has ended: everything, as bf16
 * under --precision bf16 (act_bf16.h); with full recomputation its input
 * alone (bf16 under bf16), the rest freed now. */
static int keep_block(ptdp_device *dev, ptdp_model *m, const ptdp_acts *acts, ptdp_gpt_block_acts *a)
{
    ptdp_act_slot slots[PTDP_ACT_SLOTS_MAX];
    int ns = block_slots(m, acts, a, slots);
    if (acts->recompute) {
        free_block_work(dev, a);
        ns = 1;                 /* slot 0: the block's input x */
    }
    return m->bf16 ? ptdp_act_pack(dev, &a->packed, slots, ns, "acts.block_bf16") : PTDP_OK;
}

/* Everything after the stage input: the embedding or the received
 * activation, the blocks, the tail.  Units (model.h): the embeddings (with
 * one stage also the head, held to the loss), each block, LN_f and the
 * head. */
static int stage_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, ptdp_gpt_saved *sv)
{
    const ptdp_gpt *g = m->impl;
    const int nb = sv->nblocks;
    ptdp_gpt_pass k;
    ptdp_gpt_pass_begin(&k, dev, m, acts, NULL);
    int rc;
    sv->blocks = calloc((size_t)(nb > 0 ? nb : 1), sizeof *sv->blocks);
    if (sv->blocks == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    ptdp_tensor *x = nb > 0 ? &sv->blocks[0].x : &sv->x_out;
    if ((rc = ptdp_gpt_act(&k, x, "acts.x", k.shape.Rl, k.shape.C)) != 0 ||
        (m->first_stage && (rc = ptdp_model_unit(dev, m, g->wte, PTDP_UNIT_FORWARD_BEGIN)) != 0))
        return rc;
    k.w0 = ptdp_wall_now();
    if (!m->first_stage)   /* the received activation (bf16-valued already) */
        ptdp_tensor_copy(*x, ptdp_tensor_wrap(sv->input.data, x->rows, x->cols));
    else if ((rc = ptdp_gpt_embed_forward(&k, sv, *x)) != 0)
        return rc;
    ptdp_gpt_round(&k, *x);
    if (m->first_stage && g->head != g->wte && (rc = ptdp_model_unit(dev, m, g->wte, PTDP_UNIT_FORWARD_END)) != 0)
        return rc;

    for (int i = 0; i < nb; i++) {
        ptdp_tensor *out = i + 1 < nb ? &sv->blocks[i + 1].x : &sv->x_out;
        const ptdp_param *unit = g->blocks[i].ln1_w;
        if ((rc = ptdp_model_unit(dev, m, unit, PTDP_UNIT_FORWARD_BEGIN)) != 0 ||
            (rc = ptdp_gpt_block_forward(&k, i, &sv->blocks[i], out)) != 0)
            return rc;
        sv->aux_sum += ptdp_gpt_moe_aux(&sv->blocks[i]);   /* once: not again in a recomputation */
        if ((rc = ptdp_model_unit(dev, m, unit, PTDP_UNIT_FORWARD_END)) != 0 ||
            (rc = keep_block(dev, m, acts, &sv->blocks[i])) != 0)
            return rc;
    }
    return m->last_stage ? ptdp_gpt_head_forward(&k, acts, sv) : PTDP_OK;
}

/* The stage input, kept: the tokens on stage 0 (this device's positions of
 * them under CP, the slice's with token slices), else the activation; and
 * under CP (or a token slice) the labels of this device's tokens, whose
 * share of the loss it computes. */
static int keep_input(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, ptdp_gpt_saved *sv, const ptdp_batch *b,
                      ptdp_tensor input, int bcols)
{
    const size_t n = (size_t)b->rows * ptdp_gpt_local_T(m, acts);
    int rc;
    if (m->first_stage) {
        int64_t *tokens = ptdp_alloc(dev, (n > 0 ? n : 1) * sizeof *tokens, PTDP_MEM_ACTS, "acts.tokens");
        if (tokens == NULL)
            return PTDP_ENOMEM;
        ptdp_gpt_take_positions(m, acts, tokens, b->tokens, b->rows);
        sv->tokens = tokens;
    } else {
        if ((rc = ptdp_tensor_alloc_uninit(dev, &sv->input, "acts.input", PTDP_MEM_ACTS, b->rows, bcols)) != 0)
            return rc;
        ptdp_tensor_copy(sv->input, input);
    }
    if ((ptdp_gpt_cp_size(m) > 1 || ptdp_gpt_sliced(acts)) && b->labels != NULL) {
        if ((sv->labels = ptdp_alloc(dev, (n > 0 ? n : 1) * sizeof *sv->labels, PTDP_MEM_ACTS, "acts.labels")) == NULL)
            return PTDP_ENOMEM;
        ptdp_gpt_take_positions(m, acts, sv->labels, b->labels, b->rows);
        acts->labels = sv->labels;
    }
    return PTDP_OK;
}

/* Full recomputation, once the forward has ended: the blocks kept their
 * inputs alone (keep_block); of the rest only the tail's input x_out stays,
 * on the last stage.  The received activation is block 0's input (or
 * x_out's) already, and a stage's output is sent. */
static void drop_for_recompute(ptdp_device *dev, ptdp_model *m, ptdp_gpt_saved *sv)
{
    ptdp_tensor_free(dev, &sv->input);
    free_tail_work(dev, sv);
    if (!m->last_stage)
        ptdp_tensor_free(dev, &sv->x_out);
}

int ptdp_gpt_forward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_batch *b,
                     ptdp_tensor input, long step, bool recompute, ptdp_tensor *out)
{
    ptdp_acts_begin(acts, b, step, recompute);
    ptdp_gpt_saved *sv = calloc(1, sizeof *sv);
    if (sv == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    acts->saved = sv;
    sv->nblocks = m->layer_end - m->layer_begin;
    const int bcols = ptdp_batch_boundary_cols(m, b);
    int rc;
    if ((rc = keep_input(dev, m, acts, sv, b, input, bcols)) != 0 || (rc = stage_forward(dev, m, acts, sv)) != 0)
        return rc;
    if (!m->last_stage && out != NULL)
        ptdp_tensor_copy(*out, ptdp_tensor_wrap(sv->x_out.data, b->rows, bcols));
    if (recompute)
        drop_for_recompute(dev, m, sv);
    if (m->bf16 && sv->x_out.data != NULL) {   /* x_out and LN_f's output (x_out alone with recompute) */
        ptdp_act_slot slots[2];
        if ((rc = ptdp_act_pack(dev, &sv->tail_packed, slots, ptdp_gpt_tail_slots(sv, slots), "acts.tail_bf16")) != 0)
            return rc;
    }
    return PTDP_OK;
}

/* ----------------------------------------------------------- backward */

/* The backward's scratch (gpt_pass.h) and dh, the gradient of the
 * residual stream (region rows). */
static int scratch_alloc(ptdp_gpt_pass *k, ptdp_gpt_scratch *s, ptdp_tensor *dh)
{
    const ptdp_gpt *g = k->m->impl;
    const int T = k->shape.T, C = k->shape.C, R = k->shape.R, Rl = k->shape.Rl, Cl = k->shape.Cl;
    ptdp_gpt_act(k, dh, "grad.h", Rl, C);
    ptdp_gpt_act(k, &s->tmp, "grad.tmp", Rl, C);
    ptdp_gpt_act(k, &s->dln, "grad.ln", R, C);
    ptdp_gpt_act(k, &s->dff, "grad.ff", R, g->ffn_local);
    ptdp_gpt_act(k, &s->dy, "grad.attn_y", R, Cl);
    if (ptdp_gpt_act(k, &s->dqkv, "grad.qkv", R, 3 * Cl) != 0)
        return k->rc;
    s->dln_local = s->dln;    /* TP: f's all-reduce works in place */
    /* SP: dfull holds a gathered gradient into a row-parallel layer, then
     * (never at once) a kept LayerNorm shard gathered again for dW */
    if (k->m->mesh->sp && (ptdp_gpt_act(k, &s->dln_local, "grad.ln_local", Rl, C) != 0 ||
                           ptdp_gpt_act(k, &s->dfull, "grad.gathered", R, C) != 0))
        return k->rc;
    const size_t att = k->m->attention_tiled && !ptdp_gpt_cp_ring(k->m) ? ptdp_attention_tiled_scratch()
                                                                        : 2 * (size_t)T * T;   /* tiles, or S and dS */
    if ((s->att = ptdp_alloc(k->dev, att * sizeof(ptdp_real), PTDP_MEM_ACTS, "grad.attn")) == NULL)
        k->rc = PTDP_ENOMEM;
    return k->rc;
}

static void scratch_free(ptdp_gpt_pass *k, ptdp_gpt_scratch *s, ptdp_tensor *dh)
{
    ptdp_tensor_free(k->dev, dh);
    ptdp_tensor_free(k->dev, &s->tmp);
    ptdp_tensor_free(k->dev, &s->dln);
    if (k->m->mesh->sp)
        ptdp_tensor_free(k->dev, &s->dln_local);
    ptdp_tensor_free(k->dev, &s->dfull);
    ptdp_tensor_free(k->dev, &s->dff);
    ptdp_tensor_free(k->dev, &s->dy);
    ptdp_tensor_free(k->dev, &s->dqkv);
    ptdp_free(k->dev, s->att);
}

/* Full recomputation: block i's forward again, from its kept input, into
 * a (a forward pass of its own: the same ops, charged as a forward).  Its
 * output is the next block's kept input already: dropped. */
static int block_again(const ptdp_gpt_pass *kb, int i, ptdp_gpt_block_acts *a)
{
    ptdp_gpt_pass k;
    ptdp_tensor out = { 0 };
    ptdp_gpt_pass_begin(&k, kb->dev, kb->m, kb->acts, NULL);
    int rc = ptdp_gpt_block_forward(&k, i, a, &out);
    ptdp_tensor_free(kb->dev, &out);
    return rc;
}

/* The blocks right to left, each unpacked from bf16 before (or, with full
 * recomputation, its forward run again inside its unit's backward) and its
 * float copy freed after (one block's at a time). */
static int blocks_backward(ptdp_gpt_pass *k, ptdp_gpt_saved *sv, ptdp_gpt_scratch *s, ptdp_tensor dh)
{
    ptdp_model *m = k->m;
    const ptdp_gpt *g = m->impl;
    const bool again = k->acts->recompute;
    int rc;
    for (int i = sv->nblocks - 1; i >= 0; i--) {
        ptdp_gpt_block_acts *a = &sv->blocks[i];
        ptdp_act_slot slots[PTDP_ACT_SLOTS_MAX];
        const int ns = block_slots(m, k->acts, a, slots);
        if ((rc = ptdp_model_unit(k->dev, m, g->blocks[i].ln1_w, PTDP_UNIT_BACKWARD_BEGIN)) != 0 ||
            (rc = ptdp_act_unpack(k->dev, &a->packed, slots, ns)) != 0 ||      /* bf16 */
            (again && (rc = block_again(k, i, a)) != 0) ||
            (rc = ptdp_gpt_block_backward(k, i, a, dh, s)) != 0 ||
            (rc = ptdp_model_unit(k->dev, m, g->blocks[i].ln1_w, PTDP_UNIT_BACKWARD_END)) != 0 ||
            (k->wg == NULL && (rc = ptdp_model_grads_ready(k->dev, m, g->blocks[i].ln1_w)) != 0))
            return rc;
        if (m->bf16 || again)
            free_block(k->dev, a);
    }
    return PTDP_OK;
}

/* Full recomputation, the last stage: LN_f, the head and the loss again
 * from the kept x_out, inside their units' backward (the BEGINs
 * ptdp_gpt_head_backward would make, made here; k->units_held tells the
 * tail so); the loss stays the first forward's. */
static int tail_again(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, ptdp_gpt_saved *sv)
{
    const ptdp_gpt *g = m->impl;
    ptdp_act_slot tail[2];
    ptdp_gpt_pass k;
    int rc;
    if ((rc = ptdp_model_unit(dev, m, g->lnf_w, PTDP_UNIT_BACKWARD_BEGIN)) != 0 ||
        (rc = ptdp_model_unit(dev, m, g->head, PTDP_UNIT_BACKWARD_BEGIN)) != 0 ||
        (rc = ptdp_act_unpack(dev, &sv->tail_packed, tail, ptdp_gpt_tail_slots(sv, tail))) != 0)   /* bf16 */
        return rc;
    ptdp_gpt_pass_begin(&k, dev, m, acts, NULL);
    k.units_held = true;
    const double loss = acts->loss_sum;
    rc = ptdp_gpt_head_forward(&k, acts, sv);
    acts->loss_sum = loss;
    return rc;
}

/* The backward of one micro-batch; with a sink wg the weight-gradient
 * products (and the embedding's scatter-add, which a one-stage model's
 * tied wte shares with the head's product) are recorded there for a later
 * W (wgrad.h) and not charged here.  Biases, LayerNorms and wpe (sums over
 * rows, cheap) stay here. */
int ptdp_gpt_backward_input(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                            double loss_scale, ptdp_tensor *dx, ptdp_wgrad *wg)
{
    ptdp_gpt_saved *sv = acts->saved;
    ptdp_tensor dh = { 0 };
    ptdp_gpt_scratch s = { 0 };
    ptdp_gpt_pass k;
    int rc = PTDP_OK;
    if (acts->recompute && m->last_stage)
        rc = tail_again(dev, m, acts, sv);
    ptdp_gpt_pass_begin(&k, dev, m, acts, wg);
    k.units_held = acts->recompute;
    k.loss_scale = loss_scale;
    if (rc != 0 || (rc = scratch_alloc(&k, &s, &dh)) != 0)
        goto done;
    if (m->last_stage) {
        rc = ptdp_gpt_head_backward(&k, sv, &s, dh, loss_scale);
        if (acts->recompute) {   /* the tail is done with: one block's activations from here */
            ptdp_tensor_free(dev, &sv->x_out);
            free_tail_work(dev, sv);
        }
    } else {
        ptdp_tensor_copy(dh, ptdp_tensor_wrap(dout->data, dh.rows, dh.cols));
    }
    if (rc != 0 || (rc = blocks_backward(&k, sv, &s, dh)) != 0)
        goto done;
    if (m->first_stage)
        rc = ptdp_gpt_embed_backward(&k, sv, &s, dh);
    else if (dx != NULL)
        ptdp_tensor_copy(*dx, ptdp_tensor_wrap(dh.data, acts->rows, dx->cols));
done:
    if (ptdp_gpt_sliced(acts) && acts->t0 == 0)     /* the sequences' last backward here */
        ptdp_gpt_kv_done(dev, m, acts);
    scratch_free(&k, &s, &dh);
    ptdp_gpt_acts_free(dev, m, acts);
    return rc;
}

int ptdp_gpt_backward(ptdp_device *dev, ptdp_model *m, ptdp_acts *acts, const ptdp_tensor *dout,
                      double loss_scale, ptdp_tensor *dx)
{
    return ptdp_gpt_backward_input(dev, m, acts, dout, loss_scale, dx, NULL);
}
