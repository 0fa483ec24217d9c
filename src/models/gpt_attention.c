/*
 * gpt_attention.c — the attention core of a GPT block, one call for every
 * way a device may hold its sequences.
 *
 * For each sequence and each of this rank's heads (TP splits the heads):
 *
 *     y = softmax(q k^T / sqrt(hd) + causal mask) v        (dropout on the
 *                                                           probabilities)
 *
 * Which queries and keys a device has decides how it is computed:
 *
 *   whole sequences   T queries x T keys             attention.c; keeps the
 *                     ████                           probabilities P (B nh T T)
 *                     ████
 *   CP (cp.h)         T/cp queries, the keys come    cp.c's ring; keeps one
 *                     round the ring block by block  log-sum-exp a query
 *                     █·██·
 *   CP as Ulysses     an all-to-all trades T/cp      attention.c on whole
 *   (ulysses.h)       positions of every head for    sequences; keeps P
 *                     all T of heads/cp heads, one   (B nh/(tp cp) T T)
 *                     more brings y back
 *                     ████ ─► █ █ █ █ ─► ████
 *   a token slice     tlen queries x (t0 + tlen)     attention.c's slice over
 *   (TeraPipe, pp.h)  keys: the earlier slices'      the stage's cache of q k v
 *                     from the cache (gpt_kv.c)      (gpt_kv.c); keeps P
 *                           ░░░░██
 *
 * Selective recomputation (Korthikanti et al.) keeps no probabilities: the
 * backward computes them again, cheap beside the GEMMs around the core and
 * bit for bit the same, the dropout masks being counter-based.  Under
 * --precision bf16 the probabilities are rounded as the backward reads
 * them, recomputed or kept; the forward's P V used them in float, as a
 * fused kernel does in its registers.  CP's log-sum-exps stay float.
 *
 * --attention tiled (attention_tiled.c) runs the same three ways in tiles:
 * whole sequences, Ulysses' heads and a token slice keep a log-sum-exp a
 * query in a->probs (B nh T numbers, a slice's tlen a head), as the ring
 * does, and the backward makes each tile's probabilities again from it
 * and y, so selective recomputation has nothing left to drop.  The ring's
 * chunks are its tiles already: under CP's ring the flag changes nothing.
 * Under Ulysses the backward makes delta_t = dY_t . y_t where y lies, in
 * the sequence layout, and sends it beside dy: one more all-to-all, of a
 * number a head and position (1/hd of dy's).
 *
 * Under Ulysses a->qkv's storage holds, once the forward's all-to-all is
 * done, this rank's heads of whole sequences ((B T) x (3 hl/cp hd), the
 * same numbers of elements): only the attention reads it, forward and
 * backward, so the backward needs no all-to-all of q, k and v again.  The
 * backward sends dy there and dq, dk, dv back, each in the storage it
 * arrived in.
 */
#include "models/gpt_pass.h"
#include "ptdp/error.h"
#include "ptdp/cp.h"
#include "ptdp/ops.h"
#include "ptdp/ulysses.h"
#include "models/gpt_kv.h"

/* The mask of block i, keyed by global sample and head (ops.h). */
static ptdp_attn_dropout dropout_of(const ptdp_gpt_pass *k, int i)
{
    const ptdp_model *m = k->m;
    const int heads = ptdp_gpt(&m->cfg)->heads;
    /* Ulysses: this CP rank's share of the TP rank's heads */
    const int mine = ptdp_gpt_cp_ulysses(m) ? m->mesh->cp_rank * (k->shape.heads / ptdp_gpt_cp_size(m)) : 0;
    return (ptdp_attn_dropout){
        .p = m->dropout, .key = ptdp_gpt_dropout_key(m, m->layer_begin + i, "attn"),
        .sample0 = k->acts->first_sample, .head0 = m->mesh->tp_rank * k->shape.heads + mine, .heads_total = heads,
    };
}

/* Tiles (attention_tiled.c) in place of the whole probabilities: the flag,
 * but for the ring, whose chunks are its tiles already. */
static bool tiled(const ptdp_model *m)
{
    return m->attention_tiled && !ptdp_gpt_cp_ring(m);
}

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

/* Ulysses: a contiguous (B Tl) x (parts hl hd) tensor's storage seen as
 * the head layout, (B T) x (parts hl/cp hd). */
static ptdp_tensor as_heads(const ptdp_gpt_pass *k, ptdp_tensor t, int parts)
{
    const int hn = k->shape.heads / k->shape.cp;
    return ptdp_tensor_wrap(t.data, k->acts->rows * k->shape.T, parts * hn * k->shape.hd);
}

/* Ulysses' forward: q, k, v there (in a->qkv's storage), attention on
 * whole sequences of this rank's heads, y back into a->y. */
static int ulysses_forward(ptdp_gpt_pass *k, ptdp_gpt_block_acts *a, const ptdp_attn_dropout *drop,
                           ptdp_real *scratch)
{
    const ptdp_mesh *mesh = k->m->mesh;
    const int T = k->shape.T, hl = k->shape.heads, hd = k->shape.hd, hn = hl / k->shape.cp;
    const ptdp_tensor qkv = as_heads(k, a->qkv, 3);
    ptdp_tensor y = { 0 };
    int rc = ptdp_ulysses_heads_from_sequence(k->dev, mesh->cp_comm, a->qkv, qkv, T, 3, hl, hd, mesh->cp_zigzag);
    if (rc != 0 || (rc = ptdp_gpt_act(k, &y, "acts.attn_y_heads", qkv.rows, hn * hd)) != 0)
        return rc;
    if (tiled(k->m))
        ptdp_attention_tiled_forward(y, a->probs, qkv, T, 0, T, hn, hn, hd, drop, scratch);
    else
        ptdp_attention_forward(y, a->probs, qkv, T, hn, hd, drop, scratch);
    rc = ptdp_ulysses_sequence_from_heads(k->dev, mesh->cp_comm, y, a->y, T, 1, hl, hd, mesh->cp_zigzag);
    ptdp_tensor_free(k->dev, &y);
    return rc;
}

/* The core itself, into a->y and a->probs (or CP's log-sum-exps). */
static int core_forward(ptdp_gpt_pass *k, int i, ptdp_gpt_block_acts *a, ptdp_real *scratch)
{
    const ptdp_model *m = k->m;
    const ptdp_acts *acts = k->acts;
    const int T = k->shape.T, hl = k->shape.heads, hd = k->shape.hd;
    const ptdp_attn_dropout drop = dropout_of(k, i);
    if (ptdp_gpt_sliced(acts)) {         /* into the cache, then against every earlier key */
        ptdp_gpt_kv *kv = ptdp_gpt_kv_get(k->dev, k->m, acts);
        if (kv == NULL)
            return PTDP_EINVAL;
        slice_rows(kv->qkv[i], a->qkv, acts, true);
        if (tiled(m)) {
            ptdp_attention_tiled_forward(a->y, a->probs, kv->qkv[i], T, acts->t0, acts->t0 + acts->tlen, hl, hl,
                                         hd, &drop, scratch);
            return PTDP_OK;
        }
        ptdp_attention_forward_slice(a->y, a->probs, kv->qkv[i], T, acts->t0, acts->t0 + acts->tlen, hl, hd,
                                     &drop, scratch);
        return PTDP_OK;
    }
    if (ptdp_gpt_cp_ulysses(m))          /* Ulysses' head split over the CP group */
        return ulysses_forward(k, a, &drop, scratch);
    if (ptdp_gpt_cp_size(m) > 1)         /* the ring over the CP group */
        return ptdp_ring_attention_forward(k->dev, m->mesh->cp_comm, a->y, a->probs, a->qkv, T, hl, hd,
                                           m->mesh->cp_zigzag, &drop);
    if (tiled(m))
        ptdp_attention_tiled_forward(a->y, a->probs, a->qkv, T, 0, T, hl, hl, hd, &drop, scratch);
    else
        ptdp_attention_forward(a->y, a->probs, a->qkv, T, hl, hd, &drop, scratch);
    return PTDP_OK;
}

void ptdp_gpt_attention(ptdp_gpt_pass *k, int i, ptdp_gpt_block_acts *a)
{
    const ptdp_model *m = k->m;
    const int T = k->shape.T;
    const bool ring = ptdp_gpt_cp_ring(m);
    if (k->rc != 0)
        return;
    ptdp_real *scratch = NULL;           /* dropout's T x T (held under the ring too, which uses none), or tiles' */
    const size_t n = tiled(m) ? ptdp_attention_tiled_scratch() : m->dropout > 0 ? (size_t)T * T : 0;
    if (n > 0 && (scratch = ptdp_alloc(k->dev, n * sizeof(ptdp_real), PTDP_MEM_ACTS, "attn.scratch")) == NULL) {
        k->rc = PTDP_ENOMEM;
        return;
    }
    k->rc = core_forward(k, i, a, scratch);
    ptdp_free(k->dev, scratch);
    if (k->rc != 0)
        return;
    if (m->recompute_core && !ring && !tiled(m)) {   /* selective: the probabilities are not kept */
        ptdp_free(k->dev, a->probs);
        a->probs = NULL;
    }
    ptdp_gpt_round(k, a->y);             /* bf16: the heads' outputs as c_proj reads them */
    if (a->probs != NULL && !ring && !tiled(m))   /* log-sum-exps stay float */
        ptdp_gpt_round_reals(k, a->probs, ptdp_gpt_probs_len(m, k->acts));
}

/* Selective recomputation: the probabilities of queries [q0, q1) against
 * keys [0, q1) of `hl` heads again, as the forward would have kept them;
 * its y ((B (q1 - q0)) x (hl hd), at most R x Cl) goes to s->dqkv's
 * storage, which the backward overwrites next. */
static ptdp_real *probs_again(ptdp_gpt_pass *k, ptdp_tensor qkv, int q0, int q1, int hl,
                              const ptdp_attn_dropout *drop, ptdp_gpt_scratch *s)
{
    const int T = k->shape.T, hd = k->shape.hd;
    const size_t n = (size_t)k->acts->rows * hl * (q1 - q0) * q1;
    ptdp_real *probs = ptdp_gpt_act_reals(k, n, "grad.probs");
    if (probs == NULL)
        return NULL;
    const ptdp_tensor y = ptdp_tensor_wrap(s->dqkv.data, k->acts->rows * (q1 - q0), hl * hd);
    if (ptdp_gpt_sliced(k->acts))
        ptdp_attention_forward_slice(y, probs, qkv, T, q0, q1, hl, hd, drop, s->att);
    else
        ptdp_attention_forward(y, probs, qkv, T, hl, hd, drop, s->att);
    ptdp_gpt_round_reals(k, probs, n);
    return probs;
}

/* Ulysses' backward in tiles: delta_t = dY_t . y_t made here, where y lies
 * (a head's per position: 1/hd of y), and sent there beside dy; the tiles'
 * backward; dq, dk, dv back. */
static int ulysses_tiled_backward(ptdp_gpt_pass *k, ptdp_gpt_block_acts *a, ptdp_gpt_scratch *s,
                                  const ptdp_attn_dropout *drop)
{
    const ptdp_mesh *mesh = k->m->mesh;
    const int T = k->shape.T, hl = k->shape.heads, hd = k->shape.hd, hn = hl / k->shape.cp;
    const ptdp_tensor qkv = as_heads(k, a->qkv, 3), dy = as_heads(k, s->dy, 1), dqkv = as_heads(k, s->dqkv, 3);
    ptdp_tensor delta = { 0 }, there = { 0 };
    int rc = ptdp_gpt_act(k, &delta, "grad.attn_delta", s->dy.rows, hl);
    if (rc == 0 && (rc = ptdp_gpt_act(k, &there, "grad.attn_delta_heads", dy.rows, hn)) == 0) {
        ptdp_attention_tiled_delta(delta, s->dy, a->y, hd);
        rc = ptdp_ulysses_heads_from_sequence(k->dev, mesh->cp_comm, delta, there, T, 1, hl, 1, mesh->cp_zigzag);
    }
    if (rc == 0)
        rc = ptdp_ulysses_heads_from_sequence(k->dev, mesh->cp_comm, s->dy, dy, T, 1, hl, hd, mesh->cp_zigzag);
    if (rc == 0)
        ptdp_attention_tiled_backward_delta(dqkv, dy, qkv, there, a->probs, T, 0, T, hn, hn, hd, drop, false, s->att);
    ptdp_tensor_free(k->dev, &there);
    ptdp_tensor_free(k->dev, &delta);
    return rc != 0 ? rc : ptdp_ulysses_sequence_from_heads(k->dev, mesh->cp_comm, dqkv, s->dqkv, T, 3, hl, hd,
                                                           mesh->cp_zigzag);
}

/* Ulysses' backward: dy there (in its own storage), the attention's
 * backward on whole sequences of this rank's heads (the probabilities kept,
 * or again), dq, dk, dv back (in s->dqkv's storage). */
static int ulysses_backward(ptdp_gpt_pass *k, ptdp_gpt_block_acts *a, ptdp_gpt_scratch *s,
                            const ptdp_attn_dropout *drop)
{
    const ptdp_mesh *mesh = k->m->mesh;
    const int T = k->shape.T, hl = k->shape.heads, hd = k->shape.hd, hn = hl / k->shape.cp;
    const ptdp_tensor qkv = as_heads(k, a->qkv, 3), dy = as_heads(k, s->dy, 1), dqkv = as_heads(k, s->dqkv, 3);
    if (tiled(k->m))
        return ulysses_tiled_backward(k, a, s, drop);
    int rc = ptdp_ulysses_heads_from_sequence(k->dev, mesh->cp_comm, s->dy, dy, T, 1, hl, hd, mesh->cp_zigzag);
    if (rc != 0)
        return rc;
    ptdp_real *probs = a->probs != NULL ? a->probs : probs_again(k, qkv, 0, T, hn, drop, s);
    if (probs == NULL)
        return k->rc != 0 ? k->rc : PTDP_ENOMEM;
    ptdp_attention_backward(dqkv, dy, qkv, probs, T, hn, hd, drop, s->att);
    if (probs != a->probs)
        ptdp_free(k->dev, probs);
    return ptdp_ulysses_sequence_from_heads(k->dev, mesh->cp_comm, dqkv, s->dqkv, T, 3, hl, hd, mesh->cp_zigzag);
}

void ptdp_gpt_attention_backward(ptdp_gpt_pass *k, int i, ptdp_gpt_block_acts *a, ptdp_gpt_scratch *s)
{
    const ptdp_model *m = k->m;
    const ptdp_acts *acts = k->acts;
    const int T = k->shape.T, hl = k->shape.heads, hd = k->shape.hd;
    if (k->rc != 0)
        return;
    const ptdp_attn_dropout drop = dropout_of(k, i);
    if (ptdp_gpt_cp_ulysses(m)) {        /* dy there, dq dk dv back */
        k->rc = ulysses_backward(k, a, s, &drop);
        return;
    }
    if (ptdp_gpt_cp_size(m) > 1) {       /* the ring again, the key/value gradients travelling home */
        k->rc = ptdp_ring_attention_backward(k->dev, m->mesh->cp_comm, s->dqkv, s->dy, a->qkv, a->y, a->probs, T,
                                             hl, hd, m->mesh->cp_zigzag, &drop);
        return;
    }
    ptdp_tensor qkv = a->qkv;
    ptdp_gpt_kv *kv = NULL;
    int q0 = 0, q1 = T;
    if (ptdp_gpt_sliced(acts)) {         /* the cache's keys, their gradients added into it */
        if ((kv = ptdp_gpt_kv_get(k->dev, k->m, acts)) == NULL) {
            k->rc = PTDP_EINVAL;
            return;
        }
        qkv = kv->qkv[i];
        q0 = acts->t0;
        q1 = acts->t0 + acts->tlen;
    }
    if (tiled(m)) {                      /* the tiles again, from y and the log-sum-exps */
        ptdp_attention_tiled_backward(kv != NULL ? kv->dqkv[i] : s->dqkv, s->dy, qkv, a->y, a->probs, T, q0, q1, hl,
                                      hl, hd, &drop, kv != NULL, s->att);
        if (kv != NULL)
            slice_rows(kv->dqkv[i], s->dqkv, acts, false);
        return;
    }
    ptdp_real *probs = a->probs != NULL ? a->probs : probs_again(k, qkv, q0, q1, hl, &drop, s);
    if (probs == NULL)
        return;
    if (kv != NULL) {
        ptdp_attention_backward_slice(kv->dqkv[i], s->dy, qkv, probs, T, q0, q1, hl, hd, &drop, true, s->att);
        slice_rows(kv->dqkv[i], s->dqkv, acts, false);    /* complete: later slices ran first */
    } else {
        ptdp_attention_backward(s->dqkv, s->dy, qkv, probs, T, hl, hd, &drop, s->att);
    }
    if (probs != a->probs)
        ptdp_free(k->dev, probs);
}
