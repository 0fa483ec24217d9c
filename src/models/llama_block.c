/*
 * llama_block.c — one Llama block, its forward beside its backward, each a
 * list of op calls in the order of Meta's TransformerBlock:
 *
 *     h   = x + wo attn(rope(wq n1), rope(wk n1), wv n1)     n1 = RMSNorm(x) ⊙ attention_norm
 *     out = h + w2 (silu(w1 n2) ⊙ w3 n2)                     n2 = RMSNorm(h) ⊙ ffn_norm
 *
 *            ┌─ norm ─ wq,wk,wv ─ rope ─ attn ─ wo ─┐
 *     x ─────┴───────────────────────────────────── + ─► h
 *            ┌─ norm ─ w1,w3 ─ swiglu ─────── w2 ───┐
 *     h ─────┴───────────────────────────────────── + ─► out
 *
 * Under TP (Megatron's split, tp.h): wq, wk and wv are column-parallel by
 * heads and kv heads — rank r holds query heads [r H/tp, (r+1) H/tp) and
 * kv heads [r K/tp, (r+1) K/tp), so its query heads' kv heads are its own
 * (h / (H/K) stays inside the rank when tp divides K; when K divides tp
 * instead, the rank holds a copy of the one kv head its query heads read,
 * llama_model.c, and the attention sees one kv head) — w1 and w3 by the
 * same rows of F (silu(a) ⊙ b pairs element j of a with element j of b),
 * wo and w2 row-parallel: one all-reduce (g) each in the forward.
 *
 * Three column-parallel layers that read one input share one f: its
 * backward all-reduce of dx sums all of their partial products at once.
 * So the first layers' backwards run as NONE (products only, dx = or +=)
 * and the last as COLUMN (+=, then f) — one all-reduce where three would
 * each sum part of the same gradient, and three all-reduces of partial
 * sums already summed would count them twice.  Under SP (sp.h) the stream
 * and the norms hold this rank's positions only: each column-parallel
 * layer gathers its input along the sequence (in the forward, and again
 * in the backward for dW) and reduce-scatters its dx, and the three
 * scattered gradients add up; each row-parallel layer reduce-scatters its
 * partial sums, its backward reading dh gathered.
 *
 * The rotation works in place on q and k inside qkv (ptdp_rope_forward's
 * columns), each row at its global position; the attention reads the
 * rotated q, k (kept for its backward) and v.  Selective recomputation
 * keeps no probabilities: the backward computes them again.
 *
 * Under CP (cp.h) a rank holds T/cp positions of each sequence — zigzag:
 * chunks r and 2N-1-r — and its rows are rotated at those GLOBAL positions
 * (llama_model.c's positions) before the ring, whose visiting keys were
 * rotated at theirs by their owner: q_t . k_s then depends on t - s alone,
 * as on one device.  Only the K kv heads travel round the ring, and it
 * keeps each query's log-sum-exp where the probabilities were.
 *
 * Under Ulysses (--cp-algo a2a, ulysses.h) the rotated q, k, v trade the
 * split of the positions for one of the heads: rank r gets every position
 * of query heads r Hl/cp .. and of kv heads r Kl/cp .. (the ones its query
 * heads read), runs one device's causal attention on whole sequences, and
 * sends y back.  Both head counts must divide by cp (llama_model.c refuses
 * the rest): Ulysses' degree is capped by the kv heads.
 */
#include <stdio.h>

#include "models/llama_pass.h"
#include "ptdp/error.h"
#include "ptdp/act_bf16.h"
#include "ptdp/cp.h"
#include "ptdp/mesh.h"
#include "ptdp/ops.h"
#include "ptdp/sp.h"
#include "ptdp/ulysses.h"
#include "runtime/device_impl.h"

/* ------------------------------------------------------------ the ops */

void ptdp_llama_pass_begin(ptdp_llama_pass *k, ptdp_device *dev, ptdp_model *m, const ptdp_acts *acts,
                           ptdp_wgrad *wg)
{
    const int Tg = ptdp_llama(&m->cfg)->seq_len, T = Tg / m->mesh->cp;   /* CP: this rank's chunks */
    *k = (ptdp_llama_pass){ .dev = dev, .m = m, .acts = acts, .R = acts->rows * T, .T = T, .Tg = Tg, .wg = wg,
                            .w0 = ptdp_wall_now() };
    k->Rl = m->mesh->sp ? k->R / m->mesh->tp : k->R;
}

/* bf16 (act_bf16.h): an activation rounded where it is made. */
void ptdp_llama_round(ptdp_llama_pass *k, ptdp_tensor t)
{
    if (k->rc == 0 && k->m->bf16)
        ptdp_act_round(t);
}

/* Activations and scratch (category acts), each written whole before it
 * is read; a failure sticks in the pass. */
int ptdp_llama_act(ptdp_llama_pass *k, ptdp_tensor *t, const char *name, int rows, int cols)
{
    if (k->rc == 0)
        k->rc = ptdp_tensor_alloc_uninit(k->dev, t, name, PTDP_MEM_ACTS, rows, cols);
    return k->rc;
}

ptdp_real *ptdp_llama_reals(ptdp_llama_pass *k, size_t n, const char *name)
{
    ptdp_real *r = k->rc == 0 ? ptdp_alloc_uninit(k->dev, (n > 0 ? n : 1) * sizeof *r, PTDP_MEM_ACTS, name) : NULL;
    if (k->rc == 0 && r == NULL)
        k->rc = PTDP_ENOMEM;
    return r;
}

void ptdp_llama_pass_name(ptdp_llama_pass *k, const char *what, const char *wwhat)
{
    snprintf(k->what, sizeof k->what, "%s", what);
    snprintf(k->wwhat, sizeof k->wwhat, "%s", wwhat);
}

void ptdp_llama_charge(ptdp_llama_pass *k)
{
    if (k->rc != 0)
        return;
    ptdp_compute(k->dev, k->what, k->pending, k->w0);
    k->pending = 0;
    k->w0 = ptdp_wall_now();
}

void ptdp_llama_norm(ptdp_llama_pass *k, ptdp_tensor y, ptdp_real *rstd, ptdp_tensor x, const ptdp_param *w)
{
    if (k->rc != 0)
        return;
    ptdp_rmsnorm_forward(y, rstd, x, w->w, ptdp_llama(&k->m->cfg)->norm_eps);
    k->pending += ptdp_rmsnorm_flops_forward(ptdp_tensor_numel(x));
    ptdp_llama_round(k, y);
}

void ptdp_llama_norm_backward(ptdp_llama_pass *k, ptdp_tensor dx, ptdp_tensor dy, ptdp_tensor x,
                              const ptdp_param *w, const ptdp_real *rstd, bool accumulate_dx)
{
    if (k->rc != 0)
        return;
    ptdp_rmsnorm_backward(dx, w->g, dy, x, w->w, rstd, accumulate_dx);
    k->pending += ptdp_rmsnorm_flops_backward(ptdp_tensor_numel(x));
}

static ptdp_linear_pass linear_pass(ptdp_llama_pass *k)
{
    return (ptdp_linear_pass){
        .dev = k->dev, .tp = k->m->mesh->tp_comm, .overlap = k->m->overlap, .sp_full = k->part,
        .sp_samples = k->m->mesh->sp ? k->acts->rows : 0,
        .recipe = k->m->bf16 ? PTDP_RECIPE_BF16 : PTDP_RECIPE_STORAGE, .fp8 = k->m->fp8, .wg = k->wg, .what = k->what,
        .wwhat = k->wwhat, .w0 = &k->w0,
    };
}

/* A product of m x k by k x n, as the clock charges it: 2 m n k at the
 * profile's GEMM efficiency for that shape (clock.h; exactly 2 m n k on a
 * profile without a curve), as every model's products are priced. */
static double gemm(const ptdp_llama_pass *k, double m, double n, double kk)
{
    return ptdp_gemm_cost_flops(k->dev->profile, m, n, kk);
}

/* A product of layer w's, `quantized` the elements of the operands it
 * quantizes under --fp8 (device.h: at the FP8 peak, with the quantization
 * passes; the head keeps float, as the linear op does):
 *     y = x W^T   Q(X), Q(W)      dx = dy W   Q(dY), Q(W)      dW   Q(X) */
static double linear_gemm(const ptdp_llama_pass *k, const ptdp_param *w, double m, double n, double kk,
                          double quantized)
{
    if (w->keeps_precision)
        return gemm(k, m, n, kk);
    return ptdp_linear_cost_flops(k->dev, m, n, kk, quantized);
}

/* The rows a layer's product runs on: a column-parallel layer under SP
 * multiplies the input gathered along the sequence (R rows), not the
 * rank's Rl positions it was given. */
static int product_rows(const ptdp_llama_pass *k, ptdp_linear_split split, ptdp_tensor x)
{
    return split == PTDP_SPLIT_COLUMN && k->m->mesh->sp ? k->R : x.rows;
}

/* y = x W^T: the GEMM (R x in by in x out) and the work pending before it,
 * charged before the layer's join (g for a row-parallel one). */
void ptdp_llama_linear(ptdp_llama_pass *k, ptdp_linear_split split, ptdp_tensor y, ptdp_tensor x,
                       const ptdp_param *w)
{
    if (k->rc != 0)
        return;
    ptdp_linear_pass c = linear_pass(k);
    const double R = product_rows(k, split, x), out = w->w.rows, in = w->w.cols;
    const ptdp_linear_charge price = { .flops = k->pending + linear_gemm(k, w, R, out, in, R * in + out * in) };
    k->pending = 0;
    k->rc = ptdp_parallel_linear_forward(&c, &(ptdp_linear_layer){ .split = split, .w = w }, y, x, &price);
}

/* dx = dy W (or +=): R x out by out x in; dW += dy^T x: out x R by R x in
 * (now, or W's). */
void ptdp_llama_linear_backward(ptdp_llama_pass *k, ptdp_linear_split split, ptdp_tensor *dx, ptdp_tensor dy,
                                ptdp_tensor x, const ptdp_param *w, bool accumulate_dx)
{
    if (k->rc != 0)
        return;
    ptdp_linear_pass c = linear_pass(k);
    const double R = x.rows, out = w->w.rows, in = w->w.cols;
    const double dxf = linear_gemm(k, w, R, in, out, R * out + out * in), dwf = linear_gemm(k, w, out, in, R, R * in);
    const ptdp_linear_layer l = { .split = split, .w = w, .accumulate_dx = accumulate_dx, .w_flops = dwf };
    const ptdp_linear_charge price = { .flops = k->pending + (dx != NULL ? dxf : 0) + (k->wg == NULL ? dwf : 0) };
    k->pending = 0;
    k->rc = ptdp_parallel_linear_backward(&c, &l, dx, dy, x, &price);
}

void ptdp_llama_columns_backward(ptdp_llama_pass *k, ptdp_llama_scratch *s, const ptdp_param *const *w,
                                 const ptdp_tensor *dy, int n, ptdp_tensor x)
{
    if (!k->m->mesh->sp) {   /* products only (NONE), the last one's f summing them all */
        for (int i = 0; i < n; i++)
            ptdp_llama_linear_backward(k, i + 1 < n ? PTDP_SPLIT_NONE : PTDP_SPLIT_COLUMN, &s->dn, dy[i], x, w[i],
                                       i > 0);
        return;
    }
    for (int i = 0; i < n && k->rc == 0; i++) {   /* SP: x gathered again, dx reduce-scattered, each layer */
        ptdp_linear_pass c = linear_pass(k);
        c.sp_full = s->xfull;
        c.sp_local = s->dlocal;
        const double R = s->xfull.rows, out = w[i]->w.rows, in = w[i]->w.cols;
        const double dxf = linear_gemm(k, w[i], R, in, out, R * out + out * in);
        const double dwf = linear_gemm(k, w[i], out, in, R, R * in);
        const ptdp_linear_layer l = { .split = PTDP_SPLIT_COLUMN, .w = w[i], .w_flops = dwf };
        const ptdp_linear_charge price = { .before = k->pending, .dx = dxf, .dw = k->wg == NULL ? dwf : 0 };
        k->pending = 0;
        k->rc = ptdp_parallel_linear_backward(&c, &l, &s->dxfull, dy[i], x, &price);
        if (k->rc == 0 && i == 0)
            ptdp_tensor_copy(s->dn, s->dlocal);
        else if (k->rc == 0)
            ptdp_tensor_add(s->dn, s->dlocal);
    }
}

ptdp_tensor ptdp_llama_grad_into_tp(ptdp_llama_pass *k, ptdp_llama_scratch *s, ptdp_tensor dh)
{
    if (k->rc != 0 || !k->m->mesh->sp)
        return dh;
    k->rc = ptdp_sp_all_gather(k->dev, k->m->mesh->tp_comm, s->dfull, dh, k->acts->rows);
    k->w0 = ptdp_wall_now();
    return s->dfull;
}

/* out += skip: a residual branch joins the stream. */
static void residual(ptdp_llama_pass *k, ptdp_tensor out, ptdp_tensor skip)
{
    if (k->rc != 0)
        return;
    ptdp_tensor_add(out, skip);
    k->pending += (double)ptdp_tensor_numel(out);
    ptdp_llama_round(k, out);
}

/* ---------------------------------------------------- the attention */

/* q and k of qkv rotated in place (forward) or back (backward). */
static void rope(ptdp_llama_pass *k, ptdp_tensor qkv, bool backward)
{
    const ptdp_llama *l = ptdp_llama_of(k->m);
    const double theta = ptdp_llama(&k->m->cfg)->rope_theta;
    if (k->rc != 0)
        return;
    void (*op)(ptdp_tensor, int, int, int, const int64_t *, int, double) =
        backward ? ptdp_rope_backward : ptdp_rope_forward;
    op(qkv, 0, l->heads_local, l->hd, l->positions, k->T, theta);
    op(qkv, l->heads_local * l->hd, l->kv_local, l->hd, l->positions, k->T, theta);
    k->pending += ptdp_rope_flops((size_t)qkv.rows, l->heads_local + l->kv_local, l->hd);
}

static bool ring(const ptdp_llama_pass *k);
static bool ulysses(const ptdp_llama_pass *k);
static bool tiled(const ptdp_llama_pass *k);

/* Causal attention of this rank's heads, as batched GEMMs on the profile's
 * curve (each sequence and head: S = Q K^T, T x T by d; Y = P V, T x d by
 * T — 4 T T d flops, the whole square as an unfused kernel computes it);
 * under the ring its (chunk x chunk) blocks not skipped (cp.h's score
 * count, each block c x c); under Ulysses Hl/cp heads on whole sequences
 * of Tg positions.  The backward's four products (dP, dV, dQ, dK) cost
 * twice the forward's two.  In tiles (--attention tiled) the products
 * cover only the tiles not in the future, n queries by the average of
 * their keys (ptdp_attention_tiled_scores), and the backward makes
 * S = Q K^T again: five products. */
static double attention_flops(const ptdp_llama_pass *k, bool backward)
{
    const ptdp_llama *l = ptdp_llama_of(k->m);
    const ptdp_mesh *mesh = k->m->mesh;
    const int heads = ulysses(k) ? l->heads_local / mesh->cp : l->heads_local;
    const double bh = (double)k->acts->rows * heads, d = l->hd;
    double n = ulysses(k) ? k->Tg : k->T, blocks = 1;
    if (ring(k)) {
        n = ptdp_cp_layout_of(k->Tg, mesh->cp, mesh->cp_rank, mesh->cp_zigzag).len;
        blocks = ptdp_ring_attention_scores(k->Tg, mesh->cp, mesh->cp_rank, mesh->cp_zigzag) / (n * n);
    }
    if (tiled(k)) {
        const double nk = ptdp_attention_tiled_scores(0, (int)n) / n;
        const double fwd = gemm(k, n, nk, d) + gemm(k, n, d, nk);
        return bh * (backward ? fwd + gemm(k, n, nk, d) + gemm(k, nk, d, n) + gemm(k, nk, d, n) : fwd);
    }
    const double fwd = gemm(k, n, n, d) + gemm(k, n, d, n);
    return bh * blocks * (backward ? fwd + gemm(k, n, d, n) + gemm(k, n, d, n) : fwd);
}

/* Under CP the ring over the CP group (cp.h), its K kv heads travelling,
 * q and k already rotated at their GLOBAL positions (a zigzag chunk's rows
 * are not 0..T/cp-1): it keeps each query's log-sum-exp in a->probs, which
 * selective recomputation keeps too (the ring's backward recomputes P). */
static bool ring(const ptdp_llama_pass *k)
{
    return k->m->mesh->cp > 1 && !k->m->mesh->cp_a2a;
}

/* --attention tiled (attention_tiled.c): a log-sum-exp a query kept in
 * a->probs, on whole sequences or Ulysses' heads, never the probabilities;
 * the ring's chunks are its tiles already, so under the ring it changes
 * nothing.  The backward reads y (Ulysses: brought to the head layout
 * again) for delta_t = dY_t . y_t. */
static bool tiled(const ptdp_llama_pass *k)
{
    return k->m->attention_tiled && !ring(k);
}

/* Or Ulysses' all-to-alls: whole sequences of this rank's heads. */
static bool ulysses(const ptdp_llama_pass *k)
{
    return k->m->mesh->cp > 1 && k->m->mesh->cp_a2a;
}

/* Ulysses: a contiguous (B T/cp) x (heads d) tensor's storage seen as the
 * head layout, (B Tg) x (heads/cp d). */
static ptdp_tensor as_heads(const ptdp_llama_pass *k, ptdp_tensor t)
{
    return ptdp_tensor_wrap(t.data, k->acts->rows * k->Tg, t.cols / k->m->mesh->cp);
}

/* The attention's tensors as it runs: (B T) x (Hl d) on this rank's
 * positions, or Ulysses' (B Tg) x (Hl/cp d) on whole sequences. */
typedef struct {
    int T, hq, hkv;
} core_shape;

static core_shape core_of(const ptdp_llama_pass *k)
{
    const ptdp_llama *l = ptdp_llama_of(k->m);
    const int n = ulysses(k) ? k->m->mesh->cp : 1;
    return (core_shape){ .T = ulysses(k) ? k->Tg : k->T, .hq = l->heads_local / n, .hkv = l->kv_local / n };
}

/* The core's forward on its layout: in tiles, or the whole probabilities. */
static void core_forward(ptdp_llama_pass *k, ptdp_tensor y, ptdp_real *probs, ptdp_tensor qkv)
{
    const ptdp_llama *l = ptdp_llama_of(k->m);
    const core_shape c = core_of(k);
    if (!tiled(k)) {
        ptdp_attention_gqa_forward(y, probs, qkv, c.T, c.hq, c.hkv, l->hd, NULL, NULL);
        return;
    }
    ptdp_real *scratch = ptdp_llama_reals(k, ptdp_attention_tiled_scratch(), "attn.scratch");
    if (scratch != NULL)
        ptdp_attention_tiled_forward(y, probs, qkv, c.T, 0, c.T, c.hq, c.hkv, l->hd, NULL, scratch);
    ptdp_free(k->dev, scratch);
}

/* Ulysses' forward: q, k, v there (in a->qkv's storage, kept so for the
 * backward), one device's attention of this rank's heads, y back. */
static void ulysses_forward(ptdp_llama_pass *k, ptdp_llama_block_acts *a)
{
    const ptdp_llama *l = ptdp_llama_of(k->m);
    const ptdp_mesh *mesh = k->m->mesh;
    const core_shape c = core_of(k);
    const ptdp_tensor qkv = as_heads(k, a->qkv);
    ptdp_tensor y = { 0 };
    k->rc = ptdp_ulysses_gqa_heads_from_sequence(k->dev, mesh->cp_comm, a->qkv, qkv, k->Tg, l->heads_local,
                                                 l->kv_local, l->hd, mesh->cp_zigzag);
    if (k->rc != 0 || ptdp_llama_act(k, &y, "acts.attn_y_heads", qkv.rows, c.hq * l->hd) != 0)
        return;
    core_forward(k, y, a->probs, qkv);
    k->rc = ptdp_ulysses_sequence_from_heads(k->dev, mesh->cp_comm, y, a->y, k->Tg, 1, l->heads_local, l->hd,
                                             mesh->cp_zigzag);
    ptdp_tensor_free(k->dev, &y);
}

static void attention(ptdp_llama_pass *k, ptdp_llama_block_acts *a)
{
    const ptdp_llama *l = ptdp_llama_of(k->m);
    const ptdp_mesh *mesh = k->m->mesh;
    if (k->rc != 0)
        return;
    if (ring(k)) {
        k->rc = ptdp_ring_attention_gqa_forward(k->dev, mesh->cp_comm, a->y, a->probs, a->qkv, k->Tg,
                                                l->heads_local, l->kv_local, l->hd, mesh->cp_zigzag, NULL);
        k->pending += attention_flops(k, false);
        ptdp_llama_round(k, a->y);
        return;
    }
    const core_shape c = core_of(k);
    if (ulysses(k))
        ulysses_forward(k, a);
    else
        core_forward(k, a->y, a->probs, a->qkv);
    if (k->rc != 0)
        return;
    k->pending += attention_flops(k, false);
    if (k->m->recompute_core && !tiled(k)) {   /* selective: the probabilities are not kept (tiles: lse) */
        ptdp_free(k->dev, a->probs);
        a->probs = NULL;
    } else if (k->m->bf16 && !tiled(k)) {      /* log-sum-exps stay float */
        ptdp_act_round_reals(a->probs, (size_t)k->acts->rows * c.hq * c.T * c.T);
    }
    ptdp_llama_round(k, a->y);
}

/* dqkv from dy (the probabilities kept, or again: selective) on the
 * attention's own layout: this rank's positions, or Ulysses' heads. */
static void core_backward(ptdp_llama_pass *k, ptdp_llama_block_acts *a, ptdp_llama_scratch *s, ptdp_tensor dqkv,
                          ptdp_tensor dy, ptdp_tensor qkv, ptdp_tensor y, ptdp_tensor delta)
{
    const ptdp_llama *l = ptdp_llama_of(k->m);
    const core_shape c = core_of(k);
    const size_t n = (size_t)k->acts->rows * c.hq * c.T * c.T;
    ptdp_real *probs = a->probs;
    if (tiled(k) && delta.data != NULL) {   /* the tiles again, from the log-sum-exps and delta (Ulysses) */
        ptdp_attention_tiled_backward_delta(dqkv, dy, qkv, delta, probs, c.T, 0, c.T, c.hq, c.hkv, l->hd, NULL,
                                            false, s->att);
        k->pending += attention_flops(k, true);
        return;
    }
    if (tiled(k)) {   /* or y */
        ptdp_attention_tiled_backward(dqkv, dy, qkv, y, probs, c.T, 0, c.T, c.hq, c.hkv, l->hd, NULL, false, s->att);
        k->pending += attention_flops(k, true);
        return;
    }
    if (probs == NULL) {   /* its y into dqkv's storage, overwritten next */
        if ((probs = ptdp_llama_reals(k, n, "grad.probs")) == NULL)
            return;
        ptdp_tensor y = ptdp_tensor_wrap(dqkv.data, dy.rows, dy.cols);
        ptdp_attention_gqa_forward(y, probs, qkv, c.T, c.hq, c.hkv, l->hd, NULL, NULL);
        if (k->m->bf16)
            ptdp_act_round_reals(probs, n);
        k->pending += attention_flops(k, false);
    }
    ptdp_attention_gqa_backward(dqkv, dy, qkv, probs, c.T, c.hq, c.hkv, l->hd, NULL, s->att);
    k->pending += attention_flops(k, true);
    if (probs != a->probs)
        ptdp_free(k->dev, probs);
}

static void attention_backward(ptdp_llama_pass *k, ptdp_llama_block_acts *a, ptdp_llama_scratch *s)
{
    const ptdp_llama *l = ptdp_llama_of(k->m);
    const ptdp_mesh *mesh = k->m->mesh;
    if (k->rc != 0)
        return;
    if (ring(k)) {
        k->rc = ptdp_ring_attention_gqa_backward(k->dev, mesh->cp_comm, s->dqkv, s->dy, a->qkv, a->y, a->probs,
                                                 k->Tg, l->heads_local, l->kv_local, l->hd, mesh->cp_zigzag, NULL);
        k->pending += attention_flops(k, true);
        return;
    }
    if (!ulysses(k)) {
        core_backward(k, a, s, s->dqkv, s->dy, a->qkv, a->y, (ptdp_tensor){ 0 });
        return;
    }
    /* Ulysses: dy there (in its own storage), dq dk dv back; in tiles,
     * delta = dY . y made here, where y lies, and sent too (1/hd of dy) */
    const ptdp_tensor dy = as_heads(k, s->dy), dqkv = as_heads(k, s->dqkv);
    ptdp_tensor delta = { 0 }, there = { 0 };
    if (tiled(k) && ptdp_llama_act(k, &delta, "grad.attn_delta", s->dy.rows, l->heads_local) == 0 &&
        ptdp_llama_act(k, &there, "grad.attn_delta_heads", dy.rows, l->heads_local / mesh->cp) == 0) {
        ptdp_attention_tiled_delta(delta, s->dy, a->y, l->hd);
        k->rc = ptdp_ulysses_heads_from_sequence(k->dev, mesh->cp_comm, delta, there, k->Tg, 1, l->heads_local, 1,
                                                 mesh->cp_zigzag);
    }
    if (k->rc == 0)
        k->rc = ptdp_ulysses_heads_from_sequence(k->dev, mesh->cp_comm, s->dy, dy, k->Tg, 1, l->heads_local, l->hd,
                                             mesh->cp_zigzag);
    if (k->rc == 0)
        core_backward(k, a, s, dqkv, dy, as_heads(k, a->qkv), (ptdp_tensor){ 0 }, there);
    ptdp_tensor_free(k->dev, &there);
    ptdp_tensor_free(k->dev, &delta);
    if (k->rc == 0)
        k->rc = ptdp_ulysses_gqa_sequence_from_heads(k->dev, mesh->cp_comm, dqkv, s->dqkv, k->Tg, l->heads_local,
                                                     l->kv_local, l->hd, mesh->cp_zigzag);
}

/* ---------------------------------------------------------- the block */

/* What the block keeps: the stream, the norms and their statistics on
 * Rl rows (R, or this rank's positions under SP), the rest on R; under SP
 * the row-parallel layers' R rows of partial sums (k->part, freed at the
 * block's end). */
static void block_alloc(ptdp_llama_pass *k, int i, ptdp_llama_block_acts *a, ptdp_tensor *out)
{
    const ptdp_llama *l = ptdp_llama_of(k->m);
    const int R = k->R, Rl = k->Rl, C = k->m->cfg.hidden, Fl = l->ffn_local, d = l->hd;
    ptdp_llama_act(k, &a->n1, "acts.n1", Rl, C);
    ptdp_llama_act(k, &a->qkv, "acts.qkv", R, (l->heads_local + 2 * l->kv_local) * d);
    ptdp_llama_act(k, &a->y, "acts.attn_y", R, l->heads_local * d);
    ptdp_llama_act(k, &a->h, "acts.h", Rl, C);
    ptdp_llama_act(k, &a->n2, "acts.n2", Rl, C);
    if (l->blocks[i].experts == NULL) {   /* an MoE block keeps its experts' rows instead (llama_moe.c) */
        ptdp_llama_act(k, &a->a, "acts.w1", R, Fl);
        ptdp_llama_act(k, &a->b, "acts.w3", R, Fl);
        ptdp_llama_act(k, &a->g, "acts.swiglu", R, Fl);
    }
    ptdp_llama_act(k, out, "acts.x", Rl, C);
    if (k->m->mesh->sp)
        ptdp_llama_act(k, &k->part, "acts.partial", R, C);
    a->rstd1 = ptdp_llama_reals(k, (size_t)Rl, "acts.rstd1");
    a->rstd2 = ptdp_llama_reals(k, (size_t)Rl, "acts.rstd2");
    const core_shape c = core_of(k);   /* the ring keeps a log-sum-exp a query */
    const bool lse = ring(k) || tiled(k);   /* tiles too */
    a->probs = ptdp_llama_reals(k, (size_t)k->acts->rows * c.hq * c.T * (lse ? 1 : c.T), lse ? "acts.lse" : "acts.probs");
    k->w0 = ptdp_wall_now();
}

/* q, k and v: this rank's heads' columns of qkv. */
static ptdp_tensor part(const ptdp_llama *l, ptdp_tensor qkv, int which)
{
    const int q = l->heads_local * l->hd, kv = l->kv_local * l->hd;
    return which == 0 ? ptdp_tensor_cols(qkv, 0, q) : ptdp_tensor_cols(qkv, q + (which - 1) * kv, kv);
}

int ptdp_llama_block_forward(ptdp_llama_pass *k, int i, ptdp_llama_block_acts *a, ptdp_tensor *out)
{
    const ptdp_llama *l = ptdp_llama_of(k->m);
    const ptdp_llama_block *w = &l->blocks[i];
    snprintf(k->what, sizeof k->what, "block %d fwd", k->m->layer_begin + i);
    block_alloc(k, i, a, out);

    /* h = x + wo attn(rope(wq n1), rope(wk n1), wv n1) */
    ptdp_llama_norm(k, a->n1, a->rstd1, a->x, w->attention_norm);
    ptdp_llama_linear(k, PTDP_SPLIT_COLUMN, part(l, a->qkv, 0), a->n1, w->wq);
    ptdp_llama_linear(k, PTDP_SPLIT_COLUMN, part(l, a->qkv, 1), a->n1, w->wk);
    ptdp_llama_linear(k, PTDP_SPLIT_COLUMN, part(l, a->qkv, 2), a->n1, w->wv);
    rope(k, a->qkv, false);
    ptdp_llama_round(k, a->qkv);
    attention(k, a);
    ptdp_llama_linear(k, PTDP_SPLIT_ROW, a->h, a->y, w->wo);
    residual(k, a->h, a->x);

    /* out = h + w2 (silu(w1 n2) ⊙ w3 n2), or a mixture of such experts:
     * out = h + sum_j g_j expert_j(n2) */
    ptdp_llama_norm(k, a->n2, a->rstd2, a->h, w->ffn_norm);
    if (w->experts != NULL) {
        ptdp_llama_moe_forward(k, linear_pass(k), i, a, *out);
    } else {
        ptdp_llama_linear(k, PTDP_SPLIT_COLUMN, a->a, a->n2, w->w1);
        ptdp_llama_linear(k, PTDP_SPLIT_COLUMN, a->b, a->n2, w->w3);
        if (k->rc == 0) {
            ptdp_swiglu_forward(a->g, a->a, a->b);
            k->pending += ptdp_swiglu_flops_forward(ptdp_tensor_numel(a->g));
            ptdp_llama_round(k, a->g);
        }
        ptdp_llama_linear(k, PTDP_SPLIT_ROW, *out, a->g, w->w2);
    }
    residual(k, *out, a->h);
    ptdp_llama_charge(k);
    ptdp_tensor_free(k->dev, &k->part);
    return k->rc;
}

/* Right to left: dh is the gradient of the block's output on entry and of
 * its input on return (each residual passes it through unchanged, and each
 * branch's norm adds its part back). */
int ptdp_llama_block_backward(ptdp_llama_pass *k, int i, ptdp_llama_block_acts *a, ptdp_tensor dh,
                              ptdp_llama_scratch *s)
{
    const ptdp_llama *l = ptdp_llama_of(k->m);
    const ptdp_llama_block *w = &l->blocks[i];
    const int layer = k->m->layer_begin + i;
    snprintf(k->what, sizeof k->what, "block %d bwd", layer);
    snprintf(k->wwhat, sizeof k->wwhat, "block %d wgrad", layer);
    k->w0 = ptdp_wall_now();

    /* out = h + w2 (silu(w1 n2) ⊙ w3 n2), or the experts' mixture */
    if (w->experts != NULL) {
        ptdp_llama_moe_backward(k, linear_pass(k), i, a, dh, s);
    } else {
        ptdp_llama_linear_backward(k, PTDP_SPLIT_ROW, &s->dg, ptdp_llama_grad_into_tp(k, s, dh), a->g, w->w2,
                                   false);
        if (k->rc == 0) {
            ptdp_swiglu_backward(s->da, s->db, s->dg, a->a, a->b);
            k->pending += ptdp_swiglu_flops_backward(ptdp_tensor_numel(a->g));
        }
        const ptdp_param *ffn[2] = { w->w1, w->w3 };
        ptdp_llama_columns_backward(k, s, ffn, (ptdp_tensor[]){ s->da, s->db }, 2, a->n2);
    }
    ptdp_llama_norm_backward(k, dh, s->dn, a->h, w->ffn_norm, a->rstd2, true);

    /* h = x + wo attn(rope(wq n1), rope(wk n1), wv n1) */
    ptdp_llama_linear_backward(k, PTDP_SPLIT_ROW, &s->dy, ptdp_llama_grad_into_tp(k, s, dh), a->y, w->wo, false);
    attention_backward(k, a, s);
    rope(k, s->dqkv, true);
    const ptdp_param *qkv[3] = { w->wq, w->wk, w->wv };
    ptdp_llama_columns_backward(k, s, qkv,
                                (ptdp_tensor[]){ part(l, s->dqkv, 0), part(l, s->dqkv, 1), part(l, s->dqkv, 2) }, 3,
                                a->n1);
    ptdp_llama_norm_backward(k, dh, s->dn, a->x, w->attention_norm, a->rstd1, true);
    ptdp_llama_charge(k);
    return k->rc;
}

void ptdp_llama_block_free_work(ptdp_device *dev, ptdp_llama_block_acts *a)
{
    ptdp_tensor *t[] = { &a->n1, &a->qkv, &a->y, &a->h, &a->n2, &a->a, &a->b, &a->g };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        ptdp_tensor_free(dev, t[i]);
    ptdp_moe_free(dev, &a->moe);
    ptdp_real **r[] = { &a->rstd1, &a->rstd2, &a->probs };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        ptdp_free(dev, *r[i]);
        *r[i] = NULL;
    }
}
