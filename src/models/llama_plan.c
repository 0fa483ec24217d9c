/*
 * llama_plan.c — the llama as the planner sees it (model_plan.h): the table
 * `ptdp plan --model llama` prices it with, each entry the llama's own
 * charges (llama_block.c, llama.c) and allocations at a layout's shapes.
 *
 * Symbols on one device of a tp x cp group: b samples, T positions, Tq =
 * T/cp, R = b Tq rows, Rl = R/tp under SP (the stream's and the norms'
 * rows), C hidden, d = C/H the head size, Hl = H/tp query heads, Cl = Hl d,
 * KVl the width of this rank's K (and of V), Fl = F/tp, Vl = V/tp:
 *
 *   K >= tp (tp | K)   KVl = (K/tp) d         the rank's own kv heads
 *   tp > K  (K | tp)   KVl = d                a copy of the one kv head its
 *                                             query heads read, its gradient
 *                                             summed over the tp/K ranks
 *                                             sharing it (a TP sub-group)
 *
 *   planner asks           the llama answers
 *   ─────────────────────  ──────────────────────────────────────────────
 *   tp_ok(tp)              tp | K, or K | tp and tp | H; tp | F; tp | V
 *                          (the vocabulary is not padded)
 *   params                 tok_embeddings Vl C | a block: w2, w3, w1 (C Fl
 *                          each), ffn_norm C, wo C Cl, wv, wk (KVl C each),
 *                          wq Cl C, attention_norm C | output Vl C, norm C
 *                          (untied: no embedding group across the pipeline)
 *   flops of a block       RMSNorm 4 / 11 an element; wq R x C by C x Cl,
 *                          wk and wv R x C by C x KVl; rotary 3 an element
 *                          of q and k; attention 2 b Hl GEMMs T x T x d
 *                          (the ring's blocks under CP); wo; SwiGLU 5 / 11
 *                          an element; w1, w3 R x C by C x Fl, w2 back —
 *                          every GEMM at the profile's efficiency for its
 *                          shape, dx and dW each at its own
 *   TP collectives         f, g: 2 all-reduces each way (the three
 *                          projections share one f, w1 and w3 another);
 *                          SP: each of wq wk wv w1 w3 gathers its input
 *                          (5) and wo, w2 reduce-scatter (2) forward; the
 *                          backward gathers dh for wo and w2 (2), and each
 *                          column layer gathers its input again for dW and
 *                          reduce-scatters its dx (5 and 5)
 *   kept a block           x, n1, h, n2 (Rl C each), q k v R (Cl + 2 KVl),
 *                          y R Cl, w1 n2, w3 n2, swiglu R Fl each, 1/rms
 *                          2 Rl, the probabilities b Hl T² (none: selective;
 *                          CP: the log-sum-exps b Hl Tq) — in float, also
 *                          under bf16 (rounded where made, not packed)
 *   step FLOPs             3 B T (L (4 C Cl' + 4 C K d + 6 C F + 4 T C) +
 *                          2 C V), Cl' = H d: every product's forward
 *                          twice back (the attention's whole square, as the
 *                          GPT's count); full recomputation the forward
 *                          again, selective the attention core again;
 *                          a mixture's block 6 C F_e (k + S) + 2 C E in
 *                          place of 6 C F
 *   moe(layer)             a mixture of SwiGLU experts (llama_moe.c):
 *                          the block beside its experts, a routed row's
 *                          three products, what it keeps (below)
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/cp.h"
#include "ptdp/gpt.h"
#include "ptdp/llama.h"
#include "ptdp/model_plan.h"
#include "ptdp/moe.h"
#include "ptdp/ops.h"
#include "parallel/price_impl.h"

/* Every flag of the shape unset: --heads, --seq-len, --vocab are required,
 * --kv-heads defaults to --heads, --ffn to Meta's rule (the CLI's); eps,
 * theta and the multiple Meta's. */
static ptdp_model_config plan_defaults(void)
{
    ptdp_model_config c = { 0 };
    *ptdp_llama(&c) = (ptdp_llama_settings){ .ffn_multiple = PTDP_LLAMA_FFN_MULTIPLE,
                                             .norm_eps = PTDP_LLAMA_NORM_EPS, .rope_theta = PTDP_LLAMA_ROPE_THETA,
                                             .moe = PTDP_MOE_DEFAULTS };   /* ptdp train's mixture */
    return c;
}

/* K: --kv-heads, or --heads (llama_model.c's rule, here again: the
 * table is read by the planner, not by the model's files). */
static int kv_heads(const ptdp_model_config *c)
{
    return ptdp_llama(c)->kv_heads > 0 ? ptdp_llama(c)->kv_heads : ptdp_llama(c)->heads;
}

static const char *const required[] = { "--heads", "--seq-len", "--vocab", NULL };

static long long required_value(const ptdp_model_config *c, const char *flag)
{
    const ptdp_llama_settings *s = ptdp_llama(c);
    return strcmp(flag, "--heads") == 0 ? s->heads : strcmp(flag, "--seq-len") == 0 ? s->seq_len
         : strcmp(flag, "--vocab") == 0 ? s->vocab : 0;
}

/* llama_model.c's rules: whole query heads a rank, and whole kv heads or a
 * copy of one; F and V split evenly. */
static bool tp_ok(const ptdp_model_config *c, int tp)
{
    const int H = ptdp_llama(c)->heads, K = kv_heads(c);
    if (H < 1 || K < 1)
        return false;
    const bool kv = K % tp == 0 || (tp % K == 0 && H % tp == 0);
    return kv && c->ffn % tp == 0 && ptdp_llama(c)->vocab % tp == 0;
}

static void dims(const ptdp_model_config *c, int b, int tp, bool sp, int cp, ptdp_plan_dims *d)
{
    const ptdp_llama_settings *s = ptdp_llama(c);
    const int H = s->heads, K = kv_heads(c), hd = c->hidden / H;
    d->b = b;
    d->T = s->seq_len;
    d->Tq = (double)(s->seq_len / cp);
    d->R = d->b * d->Tq;
    d->Rl = sp ? d->R / tp : d->R;
    d->C = c->hidden;
    d->hl = (double)(H / tp);
    d->Cl = d->hl * hd;
    d->Fl = (double)(c->ffn / tp);
    d->Vl = (double)(s->vocab / tp);
    d->KVl = (double)((K >= tp ? K / tp : 1) * hd);
}

/* ------------------------------------------------------------ the work */

/* A micro-batch's shapes as the llama's pass has them, and its profile. */
typedef struct {
    const ptdp_profile *p;
    ptdp_plan_dims s;
    double d, kvh;            /* head size; this rank's kv heads (KVl / d) */
    double attn_f, attn_b;    /* the attention core, forward and backward  */
    bool sp, selective, ring;
    bool bf16, fp8;           /* --fp8: the linear layers' products (not the
                                 head's) at the FP8 peak, with their
                                 operands' quantization (clock.h)          */
    double routed;            /* a mixture's rows this rank routes: R, or
                                 under MoE parallel folding its slice R/S */
} shape;

static double gemm(const shape *x, double m, double n, double k)
{
    return ptdp_gemm_cost_flops(x->p, m, n, k);
}

/* A linear layer's product, `quantized` the elements of the operands it
 * quantizes under --fp8 (as llama_block.c charges it). */
static double linear(const shape *x, double m, double n, double k, double quantized)
{
    return x->fp8 ? ptdp_fp8_gemm_cost_flops(x->p, x->bf16, m, n, k, quantized) : gemm(x, m, n, k);
}

/* llama_block.c's attention_flops: b Hl batched products, n x n by d (the
 * ring's blocks of c x c on CP rank 0: zigzag gives every rank the same). */
static shape shape_of(const ptdp_profile *p, const ptdp_model_config *c, int b, int tp, bool sp, int cp,
                      ptdp_plan_core core)
{
    shape x = { .p = p, .sp = sp && tp > 1, .selective = core == PTDP_PLAN_CORE_REDONE, .ring = cp > 1 };
    dims(c, b, tp, x.sp, cp, &x.s);
    x.d = c->hidden / ptdp_llama(c)->heads;
    x.kvh = x.s.KVl / x.d;
    double n = x.s.Tq, blocks = 1;
    if (x.ring) {
        const int T = ptdp_llama(c)->seq_len;
        n = ptdp_cp_layout_of(T, cp, 0, true).len;
        blocks = ptdp_ring_attention_scores(T, cp, 0, true) / (n * n);
    }
    const double bh = x.s.b * x.s.hl, two = gemm(&x, n, n, x.d) + gemm(&x, n, x.d, n);
    x.attn_f = bh * blocks * two;
    x.attn_b = bh * blocks * (two + gemm(&x, n, x.d, n) + gemm(&x, n, x.d, n));
    if (core == PTDP_PLAN_CORE_TILED && !x.ring) {   /* the tiles not in the future; S again backward */
        const double nk = ptdp_attention_tiled_scores(0, (int)n) / n;
        const double fwd = gemm(&x, n, nk, x.d) + gemm(&x, n, x.d, nk);
        x.attn_f = bh * fwd;
        x.attn_b = bh * (fwd + gemm(&x, n, nk, x.d) + gemm(&x, nk, x.d, n) + gemm(&x, nk, x.d, n));
    }
    return x;
}

/* A linear layer of in -> out on R rows: forward (Q(X), Q(W)), dx (Q(dY),
 * Q(W)), dW (Q(X): dY's codes are dx's). */
static double lin_f(const shape *x, double in, double out)
{
    return linear(x, x->s.R, out, in, x->s.R * in + out * in);
}

static double lin_dx(const shape *x, double in, double out)
{
    return linear(x, x->s.R, in, out, x->s.R * out + out * in);
}

static double lin_dw(const shape *x, double in, double out)
{
    return linear(x, out, in, x->s.R, x->s.R * in);
}

/* One block forward: the norms and residuals on Rl rows, the rest on R. */
static double block_forward(const shape *x)
{
    const ptdp_plan_dims *s = &x->s;
    const double C = s->C;
    return ptdp_rmsnorm_flops_forward((size_t)(s->Rl * C)) + lin_f(x, C, s->Cl) + 2 * lin_f(x, C, s->KVl) +
           ptdp_rope_flops((size_t)s->R, (int)(s->hl + x->kvh), (int)x->d) + x->attn_f + lin_f(x, s->Cl, C) +
           s->Rl * C + ptdp_rmsnorm_flops_forward((size_t)(s->Rl * C)) + 2 * lin_f(x, C, s->Fl) +
           ptdp_swiglu_flops_forward((size_t)(s->R * s->Fl)) + lin_f(x, s->Fl, C) + s->Rl * C;
}

/* Its backward's products and elementwise work without dW (B of a split
 * backward), and the dW products alone (W). */
static double block_backward_input(const shape *x)
{
    const ptdp_plan_dims *s = &x->s;
    const double C = s->C;
    return lin_dx(x, s->Fl, C) + ptdp_swiglu_flops_backward((size_t)(s->R * s->Fl)) + 2 * lin_dx(x, C, s->Fl) +
           ptdp_rmsnorm_flops_backward((size_t)(s->Rl * C)) + lin_dx(x, s->Cl, C) + x->attn_b +
           (x->selective && !x->ring ? x->attn_f : 0) +
           ptdp_rope_flops((size_t)s->R, (int)(s->hl + x->kvh), (int)x->d) + lin_dx(x, C, s->Cl) +
           2 * lin_dx(x, C, s->KVl) + ptdp_rmsnorm_flops_backward((size_t)(s->Rl * C));
}

static double block_weights(const shape *x)
{
    const ptdp_plan_dims *s = &x->s;
    const double C = s->C;
    return lin_dw(x, s->Fl, C) + 2 * lin_dw(x, C, s->Fl) + lin_dw(x, s->Cl, C) + lin_dw(x, C, s->Cl) +
           2 * lin_dw(x, C, s->KVl);
}

/* The embedding: its lookup and g charge nothing; the scatter-add R C adds
 * (now, or W's).  The head: the final norm, the logits R x C by C x Vl
 * (the loss is not charged), back through the head and the norm. */
static void flops(const ptdp_profile *p, const ptdp_model_config *c, int b, int tp, bool sp, int cp,
                  ptdp_plan_core core, bool split, bool bf16, bool fp8, ptdp_plan_flops *o)
{
    shape x = shape_of(p, c, b, tp, sp, cp, core);
    x.bf16 = bf16;
    x.fp8 = fp8;
    shape head = x;       /* the output head keeps float under --fp8 (model.h) */
    head.fp8 = false;
    const ptdp_plan_dims *s = &x.s;
    const double C = s->C, dw = block_weights(&x);
    memset(o, 0, sizeof *o);
    o->embed_w = s->R * C;
    o->embed_bwd = split ? 0 : o->embed_w;
    o->block_fwd = block_forward(&x);
    o->block_w = dw;
    o->block_bwd = block_backward_input(&x) + (split ? 0 : dw);
    o->head_fwd = ptdp_rmsnorm_flops_forward((size_t)(s->Rl * C)) + lin_f(&head, C, s->Vl);
    o->head_w = lin_dw(&head, C, s->Vl);
    o->head_bwd = lin_dx(&head, C, s->Vl) + (split ? 0 : o->head_w);
    o->lnf_bwd = ptdp_rmsnorm_flops_backward((size_t)(s->Rl * C));
    if (x.sp) {   /* the backward's order: w1, w3, then wq, wk, wv */
        const double dx[5] = { lin_dx(&x, C, s->Fl), lin_dx(&x, C, s->Fl), lin_dx(&x, C, s->Cl),
                               lin_dx(&x, C, s->KVl), lin_dx(&x, C, s->KVl) };
        memcpy(o->sp_dx_block, dx, sizeof dx);
        o->sp_dx_head = lin_dx(&head, C, s->Vl);
    }
}

/* ---------------------------------------------------------- the memory */

/* Elements a micro-batch keeps of one block (llama_pass.h's block acts):
 * x, n1, h, n2 on Rl rows, 1/rms twice; q k v, y, w1 n2, w3 n2, swiglu on
 * R; the probabilities (none under selective recomputation), or under CP
 * the ring's log-sum-exps. */
static double block_kept(const ptdp_model_config *c, int b, int tp, int cp, bool sp, ptdp_plan_core core)
{
    ptdp_plan_dims s;
    dims(c, b, tp, sp && tp > 1, cp, &s);
    const double probs = cp > 1 || core == PTDP_PLAN_CORE_TILED ? s.b * s.hl * s.Tq   /* log-sum-exps */
                         : core == PTDP_PLAN_CORE_REDONE        ? 0
                                                                : s.b * s.hl * s.Tq * s.Tq;
    return 4 * s.Rl * s.C + s.R * (2 * s.Cl + 2 * s.KVl) + 3 * s.R * s.Fl + 2 * s.Rl + probs;
}

/* The llama keeps its activations in float also under bf16 (rounded where
 * made). */
static double block_kept_bytes(const ptdp_model_config *c, int b, int tp, int cp, bool sp, ptdp_plan_core core,
                               bool bf16)
{
    (void)bf16;
    return sizeof(ptdp_real) * block_kept(c, b, tp, cp, sp, core);
}

/* Its tensors on one TP rank, in lay_out's order (llama_model.c). */
static void params(const ptdp_model_config *c, int tp, bool sp, ptdp_plan_params *o)
{
    ptdp_plan_dims d;
    dims(c, 1, tp, sp, 1, &d);
    const double C = d.C, Cl = d.Cl, Fl = d.Fl, KV = d.KVl * d.C, V = d.Vl * d.C;
    memset(o, 0, sizeof *o);
    o->embed = (ptdp_plan_tensors){ 1, { V } };
    o->block = (ptdp_plan_tensors){ 9, { C * Fl, Fl * C, Fl * C, C, C * Cl, KV, KV, Cl * C, C } };
    o->head = (ptdp_plan_tensors){ 2, { V, C } };
    for (int j = 0; j < o->block.n; j++)   /* no subunits: a block is widened whole */
        o->block_subunit += o->block.size[j];
    o->sp_sums_block = 2;   /* attention_norm, ffn_norm */
    o->sp_sums_head = 1;    /* norm */
    o->fp8_weights = 7;     /* w1, w2, w3, wq, wk, wv, wo */
    const double rows[] = { Fl, C, Fl, Cl, d.KVl, d.KVl, C }, cols[] = { C, Fl, C, C, C, C, Cl };
    for (int j = 0; j < 7; j++) {
        o->fp8_rows[j] = rows[j];
        o->fp8_cols[j] = cols[j];
    }
    if (kv_heads(c) < tp) {   /* wk, wv: a copy a tp/K ranks */
        o->share_block = 2;
        o->share_size = KV;
    }
}

/* What a micro-batch holds beyond its blocks (llama.c, llama_block.c,
 * parallel_linear.c, sp.c, cp.c), bytes:
 *
 *   input        the received x is copied into block 0's input: not kept
 *   tail         nf Rl C, the logits R Vl, 1/rms Rl; the softmax's max and
 *                sum, a double a row
 *   redone       full recomputation: the block's activations and its
 *                output (dropped), its input kept already; the tail again
 *   scratch      grad.h, grad.norm Rl C each; grad.attn_y R Cl; grad.qkv
 *                R (Cl + 2 KVl); grad.swiglu, grad.w1, grad.w3 R Fl each;
 *                grad.attn 2 Tq²; SP: grad.gathered, grad.x_gathered,
 *                grad.dx_partial R C each, grad.dx_local Rl C
 *   backward     selective: the probabilities again b Hl T²; SP: a gather's
 *                or scatter's buffer R C; CP: the ring's (cp_price.c)
 *   forward      a block: the probabilities under selective (freed after
 *                the attention) with SP's partial sums and a column layer's
 *                gathered input and buffer, 3 R C; or SP's partial sums
 *                beside the ring; the embedding under SP its partial rows
 *                and the scatter's buffer 2 R C; the head the loss's picked
 *                logits (a double a row) and SP's gather 2 R C
 *   deferred W   a block's seven products' dy and x: R (7 C + 3 Fl + 2 Cl +
 *                2 KVl); the embedding's dh and ids; the head's dz and nf */
static void acts(const ptdp_model_config *c, int b, int tp, int cp, bool sp, ptdp_plan_core core, bool full,
                 ptdp_plan_acts *o)
{
    (void)full;
    ptdp_plan_dims s;
    sp = sp && tp > 1;
    dims(c, b, tp, sp, cp, &s);
    const double r = sizeof(ptdp_real), R = s.R, Rl = s.Rl, C = s.C, RC = R * C;
    const double probs = core == PTDP_PLAN_CORE_REDONE && cp == 1 ? s.b * s.hl * s.T * s.T : 0;
    const bool tiled = core == PTDP_PLAN_CORE_TILED && cp == 1;
    const double tiles = tiled ? (double)ptdp_attention_tiled_scratch() : 0;   /* two tiles (attention_tiled.c) */
    const double ring_f = cp > 1 ? ptdp_cp_price_buffers(R, s.KVl, s.b, s.hl, s.Tq, false) : 0;
    const double ring_b = cp > 1 ? ptdp_cp_price_buffers(R, s.KVl, s.b, s.hl, s.Tq, true) : 0;
    memset(o, 0, sizeof *o);
    o->input = 0;
    o->tail = r * (Rl * C + R * s.Vl + Rl) + 2 * 8 * R;
    o->tail_bf16 = o->tail;
    o->block_redone = r * block_kept(c, b, tp, cp, sp, tiled ? core : PTDP_PLAN_CORE_KEPT);
    o->tail_redone = o->tail;
    o->scratch = r * (2 * Rl * C + R * s.Cl + R * (s.Cl + 2 * s.KVl) + 3 * R * s.Fl + (tiled ? tiles : 2 * s.Tq * s.Tq) +
                      (sp ? 3 * RC + Rl * C : 0));
    o->bwd_transient = r * fmax(fmax(probs, sp ? RC : 0), ring_b);
    o->fwd_block = r * fmax(fmax(probs + (sp ? 3 * RC : 0), (sp ? RC : 0) + ring_f), tiles);
    o->fwd_embed = sp ? r * 2 * RC : 0;
    o->fwd_head = 8 * R + (sp ? r * 2 * RC : 0);
    o->wgrad_block = R * (7 * C + 3 * s.Fl + 2 * s.Cl + 2 * s.KVl);
    o->wgrad_embed = RC + 8 * R / r;
    o->wgrad_head = R * (s.Vl + C);
}

/* The built-in sums' bytes for a seed (gpt_data.c's plain corpus), made
 * once a seed; or the given data's. */
static pthread_mutex_t corpus_lock = PTHREAD_MUTEX_INITIALIZER;
static bool corpus_known;
static uint64_t corpus_seed;
static size_t corpus_bytes;

static double data_bytes(const ptdp_model_config *c, uint64_t seed)
{
    if (ptdp_llama(c)->corpus != NULL)
        return (double)ptdp_llama(c)->corpus_len;
    pthread_mutex_lock(&corpus_lock);
    if (!corpus_known || corpus_seed != seed) {
        unsigned char *text = NULL;
        corpus_bytes = ptdp_gpt_plain_corpus(seed, PTDP_GPT_CORPUS_LINES, &text);
        free(text);
        corpus_seed = seed;
        corpus_known = true;
    }
    const size_t n = corpus_bytes;
    pthread_mutex_unlock(&corpus_lock);
    return (double)n;
}

/* ------------------------------------------------ a mixture of experts */

/* Block `layer`'s mixture of SwiGLU experts (llama_moe.c over
 * parallel/moe.c) as the planner sees it (model_plan.h's ptdp_plan_moe),
 * under uniform routing: each expert gets k R / E of the rows, at most
 * its slots ceil(c k T / E) a sequence.  No SP with experts (the model
 * refuses it), so every row count is R.
 *
 *   beside the experts    the block's forward without its SwiGLU, the
 *                         gate's 2 R E C and the combine's 2 R k C; back:
 *                         the gate's dX (and dW unless W runs it) and the
 *                         combine's and dispatch's 5 R k C
 *   a routed row          w1, w3, w2 (2 C F_e/tp each: the experts are
 *                         charged by their rows, a row its share of an
 *                         expert of here/local rows through the GEMM
 *                         curve, model_plan.h), SwiGLU's 5 (11 back)
 *                         an element; under --fp8 each product at the FP8
 *                         peak with its operands' quantization, and each
 *                         local expert's three weights once a pass
 *   kept a micro-batch    choice, slot (ints), gate: R k; probs R E; load E;
 *                         token a kept row (int); the outputs y kept x C;
 *                         w1's, w3's and SwiGLU's rows here x F_e/tp each;
 *                         EP's dispatched inputs here x C and E/ep counts;
 *                         CP's 2 b E doubles; the z-loss's logits R E — in
 *                         place of the dense SwiGLU's 3 R F/tp (float)
 *   transients            forward the logits R E, or the stacked inputs
 *                         kept x C (+ EP's outputs and wire, here x C
 *                         each); backward dy, dx kept x C, dgate R k, dz R
 *                         E, the three scratch rows here x F_e/tp, and the
 *                         stacked inputs again kept x C, or under EP dy
 *                         and dx where the experts ran and the wire
 */
#define MOE_ACTS_STRUCT 224.0   /* the block's bookkeeping (parallel/moe.c's struct), about */

static int experts(const ptdp_model_config *c)
{
    const ptdp_moe_settings *m = &ptdp_llama(c)->moe;
    return m->experts > 0 && m->every > 0 ? m->experts : 0;
}

/* The choices a sequence of T positions keeps under uniform routing: all
 * k T, or with a capacity factor c at most each expert's slots,
 * E min(ceil(c k T / E), k T). */
static double kept_choices(const ptdp_moe_settings *m, double T)
{
    const double E = m->experts, k = m->top_k;
    if (m->capacity <= 0)
        return k * T;
    const double slots = fmin(ceil(m->capacity * k * T / E), k * T);
    return fmin(k * T, E * slots);
}

/* A product of an expert (m x k by k x n) on its rows, through the GEMM
 * curve (llama_moe.c's expert_product). */
static double expert_product(const shape *x, double m, double n, double k, double quantized)
{
    return x->fp8 ? ptdp_fp8_gemm_cost_flops(x->p, x->bf16, m, n, k, quantized) : ptdp_gemm_cost_flops(x->p, m, n, k);
}

/* An expert of width F on n rows (weights: its three W quantized too),
 * forward: w1 and w3 quantize X (n C) and W, w2 its input (n F) and W. */
static double expert_forward(const shape *x, double n, double F, bool weights)
{
    const double C = x->s.C, W = weights ? F * C : 0;
    return 2 * expert_product(x, n, F, C, n * C + W) + expert_product(x, n, C, F, n * F + W) + 5 * n * F;
}

/* Its dW alone: w2's (C x F over n) quantizes its X (n F), w1's and
 * w3's (F x C) theirs (n C). */
static double expert_dw(const shape *x, double n, double F)
{
    const double C = x->s.C;
    return expert_product(x, C, F, n, n * F) + 2 * expert_product(x, F, C, n, n * C);
}

/* Backward: w2's dX (dY n C and W), w1's and w3's (dY n F and W each),
 * SwiGLU's 11 an element, and unless `later` (W's) the three dW. */
static double expert_backward(const shape *x, double n, double F, bool later, bool weights)
{
    const double C = x->s.C, W = weights ? F * C : 0;
    return expert_product(x, n, F, C, n * C + W) + 2 * expert_product(x, n, C, F, n * F + W) + 11 * n * F +
           (later ? 0 : expert_dw(x, n, F));
}

/* The dense SwiGLU's share of a block: forward, backward without dW, dW. */
static void dense_ffn(const shape *x, double *fwd, double *bwd, double *w)
{
    const ptdp_plan_dims *s = &x->s;
    *fwd = 2 * lin_f(x, s->C, s->Fl) + ptdp_swiglu_flops_forward((size_t)(s->R * s->Fl)) + lin_f(x, s->Fl, s->C);
    *bwd = lin_dx(x, s->Fl, s->C) + ptdp_swiglu_flops_backward((size_t)(s->R * s->Fl)) + 2 * lin_dx(x, s->C, s->Fl);
    *w = lin_dw(x, s->Fl, s->C) + 2 * lin_dw(x, s->C, s->Fl);
}

/* The block beside its experts: a dense block's work without the SwiGLU,
 * the gate and the combine (llama_moe.c's charges, flat). */
static void beside_experts(const shape *x, bool split, ptdp_plan_moe *o)
{
    const double R = x->routed, C = x->s.C, E = o->E, k = o->k, gate = 2 * R * E * C;
    double ffn_f, ffn_b, ffn_w;
    dense_ffn(x, &ffn_f, &ffn_b, &ffn_w);
    const double w = block_weights(x) - ffn_w + gate;   /* the attention's dW and the gate's */
    o->fwd = block_forward(x) - ffn_f + gate + 2 * R * k * C;
    o->bwd = block_backward_input(x) - ffn_b + 5 * R * k * C + gate + (split ? 0 : w);
    o->w = split ? w : 0;
}

/* The shared experts (--moe-shared-experts S): one SwiGLU of Fs = S
 * F_e/tp on all R rows after the combine, charged as an expert of R rows;
 * summed over DP like the block; it keeps 3 R Fs, its forward makes its
 * output (R C), its backward its three scratch rows (R Fs each) and its
 * input gradient (R C) beside the routed backward's transients. */
static void shared_experts(const shape *x, double Fs, bool split, ptdp_plan_moe *o)
{
    const double r = sizeof(ptdp_real), R = x->s.R, C = x->s.C;
    o->fwd += expert_forward(x, R, Fs, true);
    o->bwd += expert_backward(x, R, Fs, split, true);
    o->w += split ? expert_dw(x, R, Fs) : 0;
    o->params_dense += 3 * C * Fs;
    o->shared_bytes = r * R * C;
    o->tensors += 3;
    o->kept_bytes += 3 * r * R * Fs;
    o->wgrad += 3 * R * (C + Fs);       /* its three layers' deferred dW */
    o->wgrad_own += 3 * R * (C + Fs);
    o->fwd_bytes = fmax(o->fwd_bytes, r * R * C);
    const double Rr = x->routed;
    const double routed = 2 * r * o->kept * C + r * Rr * o->k + r * Rr * o->E;   /* dy, dx, dgate, dz */
    o->bwd_bytes = fmax(o->bwd_bytes, routed + 3 * r * R * Fs + r * R * C);
}

/* What a micro-batch keeps of the mixture beyond a dense block, and its
 * transients (the picture above). */
static void moe_bytes(const ptdp_moe_settings *m, const shape *x, int b, int ep, int cp, ptdp_plan_moe *o)
{
    const double r = sizeof(ptdp_real), R = x->routed, C = x->s.C, E = o->E, k = o->k, kept = o->kept;
    const double here = o->here, Fe = o->Fe, Rd = x->s.R, slices = Rd / R;   /* the dense block's rows */
    o->kept_bytes = MOE_ACTS_STRUCT + 8 * R * k + r * R * k + r * R * E + 4 * E + 4 * kept + r * kept * C +
                    3 * r * here * Fe + (ep > 1 ? r * here * C + 4 * o->local : 0) +
                    (cp > 1 ? 16.0 * b / slices * E : 0) + (m->z_loss > 0 ? r * R * E : 0) - 3 * r * Rd * x->s.Fl;
    /* a deferred W: the gate's operands (dZ, n2) and each routed row's
     * through its expert's three layers, for the dense SwiGLU's three */
    o->wgrad_own = R * (C + E) + 3 * here * (C + Fe);
    o->wgrad = o->wgrad_own - 3 * Rd * (C + x->s.Fl);
    const double packed = ep > 1 && x->bf16 ? 2.0 * (kept + here) * C : 0;   /* bf16's wire (ep.h) */
    o->fwd_bytes = fmax(r * R * E, r * kept * C + (ep > 1 ? 2 * r * here * C : 0) + packed);
    o->bwd_bytes = 2 * r * kept * C + r * R * k + r * R * E + 3 * r * here * Fe +
                   (ep > 1 ? 3 * r * here * C : r * kept * C) + packed;
}

/* The tensors in lay_out's order (llama_moe.c, llama_model.c): each
 * local expert's w2, w3, w1; the shared experts' w2, w3, w1; the gate and
 * its selection bias; ffn_norm, wo, wv, wk, wq, attention_norm. */
static void moe_tensors(const ptdp_moe_settings *m, const shape *x, ptdp_plan_moe *o)
{
    const double C = x->s.C, Fe = o->Fe, Fs = m->shared * Fe, KV = x->s.KVl * C;
    ptdp_plan_tensors *d = &o->beside;
    o->expert = (ptdp_plan_tensors){ 3, { C * Fe, Fe * C, Fe * C } };
    d->n = 0;
    for (int j = 0; j < 3 && m->shared > 0; j++)
        d->size[d->n++] = C * Fs;
    d->size[d->n++] = o->E * C;
    if (m->score == PTDP_MOE_SIGMOID)
        d->size[d->n++] = o->E;
    const double rest[6] = { C, C * x->s.Cl, KV, KV, x->s.Cl * C, C };
    for (int j = 0; j < 6; j++)
        d->size[d->n++] = rest[j];
}

static bool moe(const ptdp_profile *p, const ptdp_model_config *c, int layer, int b, int tp, int cp, int ep,
                int etp, ptdp_plan_core core, bool split, bool bf16, bool fp8, ptdp_plan_moe *o)
{
    const ptdp_moe_settings *m = &ptdp_llama(c)->moe;
    if (experts(c) == 0 || !ptdp_moe_block_is_moe(m, layer))
        return false;
    ep = ep > 1 ? ep : 1;
    cp = cp > 1 ? cp : 1;
    etp = etp > 0 && etp < tp ? etp : tp;   /* MoE parallel folding (moe_fold.c): tp / etp slices */
    shape x = shape_of(p, c, b, tp, false, cp, core);
    x.bf16 = bf16;
    x.fp8 = fp8;   /* the attention's linear layers and the experts' */
    x.routed = x.s.R / (tp / etp);
    const double C = x.s.C, Fe = (double)(ptdp_moe_ffn(m, c->ffn) / etp), Fs = (double)(ptdp_moe_ffn(m, c->ffn) / tp);
    memset(o, 0, sizeof *o);
    o->E = m->experts;
    o->k = m->top_k;
    o->local = o->E / ep;
    o->Fe = Fe;
    o->kept = fmin(o->k * x.routed, b / (tp / etp) * kept_choices(m, x.s.Tq));   /* a capacity runs without CP */
    o->here = o->kept;
    beside_experts(&x, split, o);
    const double n = ptdp_plan_expert_rows(p, o->here, o->local);   /* a row: its expert's price over its rows */
    o->row_fwd = expert_forward(&x, n, Fe, false) / n;
    o->row_bwd = expert_backward(&x, n, Fe, split, false) / n;
    if (fp8) {   /* each local expert's three weights quantized, once a pass (every one runs) */
        o->fwd += o->local * expert_forward(&x, 0, Fe, true);
        o->bwd += o->local * expert_backward(&x, 0, Fe, split, true);
    }
    if (split)
        o->w += o->here * expert_dw(&x, n, Fe) / n;
    /* the norms, wq, wk, wv, wo, the gate (and DeepSeek's selection bias) */
    o->params_dense = 2 * C + 2 * C * x.s.Cl + 2 * C * x.s.KVl + o->E * C + (m->score == PTDP_MOE_SIGMOID ? o->E : 0);
    o->params_expert = 3 * C * Fe;
    o->tensors = 6 + 1 + (m->score == PTDP_MOE_SIGMOID ? 1 : 0) + 3 * o->local;
    moe_bytes(m, &x, b, ep, cp, o);
    if (m->shared > 0)
        shared_experts(&x, m->shared * Fs, split, o);   /* in attention's layout */
    moe_tensors(m, &x, o);
    return true;
}

/* Mixtures among blocks first .. first + n - 1: the l >= K with
 * (l - K + 1) mod every = 0 (gpt_plan.c's count). */
static int moe_blocks(const ptdp_model_config *c, int first, int n)
{
    const int every = ptdp_llama(c)->moe.every, K = ptdp_llama(c)->moe.dense_first;
    const int f = first > K ? first : K, e = first + n > K ? first + n : K;
    return experts(c) > 0 ? (e - K) / every - (f - K) / every : 0;
}

/* ------------------------------------------------------- a step's FLOPs */

/* Every product's forward, per token: wq and wo 2 C H d each, wk and wv
 * 2 C K d each, w1 w3 w2 2 C F each, the attention's two 2 T H d each (the
 * whole square), the head 2 C V; a step three times that (the backward
 * twice the forward).  Full recomputation runs the forward again (the
 * tail's too), selective the attention core's.
 *
 * A mixture in place of a block's SwiGLU (6 C F a token) computes its k
 * experts and S shared ones, 6 C F_e (k + S), and the gate, 2 C E: the
 * model's count gives every token its k (the MFU convention), the
 * hardware's only the choices a capacity keeps, 6 C F_e less a dropped
 * one. */
static void step_flops(const ptdp_model_config *c, double B, bool full, bool selective, double *model,
                       double *hardware)
{
    const ptdp_llama_settings *s = ptdp_llama(c);
    const double T = s->seq_len, L = c->layers, C = c->hidden, V = s->vocab, F = c->ffn;
    const double Hd = C, Kd = (double)kv_heads(c) * (C / s->heads);
    const double attention = 4 * T * Hd;
    const double forward = B * T * (L * (4 * C * Hd + 4 * C * Kd + 6 * C * F + attention) + 2 * C * V);
    *model = 3 * forward;
    *hardware = *model + (full ? forward : selective ? B * T * L * attention : 0);
    if (experts(c) == 0)
        return;
    const ptdp_moe_settings *m = &s->moe;
    const double n = ptdp_moe_blocks(m, c->layers), Fe = ptdp_moe_ffn(m, c->ffn);
    const double delta = n * B * T * C * (6 * Fe * (m->top_k + m->shared) + 2.0 * m->experts - 6 * F);
    const double dropped = m->top_k * T - kept_choices(m, T);   /* a sequence's; 0 dropless */
    *model += 3 * delta;
    *hardware += (full ? 4 : 3) * (delta - n * B * 6 * C * Fe * dropped);
}

const ptdp_model_plan ptdp_llama_plan = {
    .defaults = plan_defaults,
    .required = required,
    .required_value = required_value,
    .tp_ok = tp_ok,
    .dims = dims,
    .flops = flops,
    .block_kept = block_kept,
    .block_kept_bytes = block_kept_bytes,
    .params = params,
    .tp_block = { .fp8_column = 5, .fp8_row = 2,   /* wq, wk, wv, w1, w3; wo, w2 */
                  .all_reduce_f = 2, .all_reduce_b = 2, .gather_f = 5, .scatter_f = 2, .gather_b = 2, .scatter_b = 5,
                  .regathers = 5 },
    .acts = acts,
    .packs_bf16 = false,
    .data_bytes = data_bytes,
    .step_flops = step_flops,
    .experts = experts,
    .moe = moe,
    .moe_blocks = moe_blocks,
};
