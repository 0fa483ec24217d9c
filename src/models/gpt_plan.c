/*
 * gpt_plan.c — the GPT as the planner sees it (model_plan.h): the table
 * `ptdp plan` prices a GPT with, from the same functions the model charges
 * the clock with (gpt_cost.h) and the same activation formulas `ptdp train`
 * prints (gpt.h).
 *
 *   planner asks                 the GPT answers
 *   ───────────────────────────  ────────────────────────────────────────
 *   dims of b sequences, tp, cp  T = seq_len, Tq = T/cp, R = b Tq,
 *                                Rl = R/tp (sp), C = hidden,
 *                                Cl = (C/nh)(nh/tp), Fl = F/tp, hl = nh/tp,
 *                                Vl = V_pad/tp
 *   flops of a micro-batch       gpt_cost.c's charges at that shape
 *   kept per block               ptdp_gpt_block_act_*
 *   tp_ok(tp)                    tp | nh, tp | F, tp | V_pad
 *   data bytes                   --data's, or the built-in corpus's
 *   step FLOPs                   72 B s L h² (1 + s/6h + V/12Lh) (Narayanan
 *                                et al. 2021); full recomputation adds the
 *                                forward again (+ the head's 2 B s h V),
 *                                selective the attention core, 4 B s² h L
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/gpt.h"
#include "gpt_cost.h"
#include "ptdp/model_plan.h"
#include "ptdp/ops.h"
#include "parallel/price_impl.h"

static ptdp_model_config plan_defaults(void)
{
    /* ops: the caller's (this model's); a mixture's settings as ptdp train's */
    return PTDP_GPT_CONFIG( .vocab_multiple = 64, .moe_every = 1, .moe_top_k = 2 );
}

static const char *const required[] = { "--heads", "--seq-len", "--vocab", NULL };

static long long required_value(const ptdp_model_config *c, const char *flag)
{
    const ptdp_gpt_settings *g = ptdp_gpt(c);
    return strcmp(flag, "--heads") == 0 ? g->heads : strcmp(flag, "--seq-len") == 0 ? g->seq_len
         : strcmp(flag, "--vocab") == 0 ? g->vocab : 0;
}

static int padded_vocab(const ptdp_model_config *c, int tp)
{
    const ptdp_gpt_settings *g = ptdp_gpt(c);
    return g->vocab_padded > 0 ? g->vocab_padded : ptdp_gpt_pad_vocab(g->vocab, g->vocab_multiple, tp);
}

static bool tp_ok(const ptdp_model_config *c, int tp)
{
    return ptdp_gpt(c)->heads % tp == 0 && c->ffn % tp == 0 && padded_vocab(c, tp) % tp == 0;
}

static void dims(const ptdp_model_config *c, int b, int tp, bool sp, int cp, ptdp_plan_dims *d)
{
    const ptdp_gpt_settings *g = ptdp_gpt(c);
    d->b = b;
    d->T = g->seq_len;
    d->Tq = (double)(g->seq_len / cp);
    d->R = d->b * d->Tq;
    d->Rl = sp ? d->R / tp : d->R;
    d->C = c->hidden;
    d->Cl = (double)(c->hidden / g->heads * (g->heads / tp));
    d->Fl = (double)(c->ffn / tp);
    d->hl = (double)(g->heads / tp);
    d->Vl = (double)(padded_vocab(c, tp) / tp);
    d->KVl = d->Cl;   /* every head its own K and V */
}

static void flops(const ptdp_profile *p, const ptdp_model_config *c, int b, int tp, bool sp, int cp,
                  ptdp_plan_core core, bool split, bool bf16, bool fp8, ptdp_plan_flops *o)
{
    ptdp_gpt_shape s = ptdp_gpt_shape_make(c, b, tp, sp, cp, 0, true);
    s.selective = core == PTDP_PLAN_CORE_REDONE;
    s.tiled = core == PTDP_PLAN_CORE_TILED && cp == 1;   /* the ring is its own (gpt_regions.c) */
    s.split = split;
    s.fp8 = fp8;     /* the linear layers' products as --fp8 prices them (gpt_cost.h) */
    s.bf16 = bf16;
    o->embed_fwd = ptdp_gpt_cost_embed_forward(p, &s);
    o->embed_bwd = ptdp_gpt_cost_embed_backward(p, &s);
    o->embed_w = ptdp_gpt_cost_dw_embed(p, &s);
    o->block_fwd = ptdp_gpt_cost_block_forward(p, &s);
    o->block_bwd = ptdp_gpt_cost_block_backward(p, &s);
    o->block_w = ptdp_gpt_cost_block_w(p, &s);
    o->head_fwd = ptdp_gpt_cost_head_forward(p, &s);
    o->head_bwd = ptdp_gpt_cost_head_backward(p, &s);
    o->head_w = ptdp_gpt_cost_dw_head(p, &s);
    o->lnf_bwd = ptdp_gpt_cost_lnf_backward(p, &s);
    memset(o->sp_dx_block, 0, sizeof o->sp_dx_block);
    o->sp_dx_head = 0;
    if (sp && tp > 1) {
        o->sp_dx_block[0] = ptdp_gpt_cost_dx_fc(p, &s);
        o->sp_dx_block[1] = ptdp_gpt_cost_dx_qkv(p, &s);
        o->sp_dx_head = ptdp_gpt_cost_dx_head(p, &s);
    }
}

static double block_kept(const ptdp_model_config *c, int b, int tp, int cp, bool sp, ptdp_plan_core core)
{
    if (cp > 1)
        return ptdp_gpt_block_act_elements_cp(c, b, tp, cp, sp);
    if (core == PTDP_PLAN_CORE_TILED)
        return ptdp_gpt_block_act_elements_tiled(c, b, tp, 1, sp);
    if (core == PTDP_PLAN_CORE_REDONE)
        return ptdp_gpt_block_act_elements_selective(c, b, tp, sp);
    return ptdp_gpt_block_act_elements(c, b, tp, sp);
}

static double block_kept_bytes(const ptdp_model_config *c, int b, int tp, int cp, bool sp, ptdp_plan_core core,
                               bool bf16)
{
    if (core == PTDP_PLAN_CORE_TILED)
        return ptdp_gpt_block_act_bytes_tiled(c, b, tp, cp, sp, bf16);
    return ptdp_gpt_block_act_bytes(c, b, tp, cp, sp, core == PTDP_PLAN_CORE_REDONE, bf16);
}

/* ------------------------------------------- parameters and activations */

/* The tensors on one TP rank in lay_out's order (gpt_model.c): wpe, wte;
 * a block's ln_2, c_fc, c_proj (MLP), their biases, ln_1, the attention's
 * c_proj and c_attn with theirs; LN_f's weight and bias — the head is the
 * embedding's matrix (tied).  bf16 widens a block a linear layer at a
 * time, with its bias or the LayerNorm before it (its subunits). */
static void params(const ptdp_model_config *c, int tp, bool sp, ptdp_plan_params *o)
{
    ptdp_plan_dims d;
    dims(c, 1, tp, sp, 1, &d);
    const double C = d.C, Cl = d.Cl, Fl = d.Fl, T = d.T, wte = d.Vl * d.C;
    memset(o, 0, sizeof *o);
    o->embed = (ptdp_plan_tensors){ 2, { T * C, wte } };
    o->block = (ptdp_plan_tensors){ 12, { C, C * Fl, Fl * C, Fl, C, C, C, C * Cl, 3 * Cl * C, 3 * Cl, C, C } };
    o->head = (ptdp_plan_tensors){ 2, { C, C } };
    o->tied = true;
    o->block_subunit = fmax(fmax(Fl * C + Fl + 2 * C, 3 * Cl * C + 3 * Cl + 2 * C), fmax(C * Fl + C, C * Cl + C));
    o->sp_sums_block = 4;   /* ln_1's and ln_2's weights and biases */
    o->sp_sums_head = 2;    /* LN_f's */
    o->fp8_weights = 4;     /* c_attn, attn.c_proj, c_fc, mlp.c_proj */
    const double rows[] = { 3 * Cl, C, Fl, C }, cols[] = { C, Cl, C, Fl };
    for (int j = 0; j < 4; j++) {
        o->fp8_rows[j] = rows[j];
        o->fp8_cols[j] = cols[j];
    }
}

/* What a micro-batch holds beyond its blocks (gpt.c, gpt_ops.c), bytes:
 *
 *   input        acts.input, the received x                Rl C
 *   tail         LN_f's output R C, the logits R Vl, LN_f's statistics
 *                2 Rl (float); the softmax's max and sum, a double a row
 *   scratch      grad.h, grad.tmp Rl C each; grad.ln R C; grad.ff R Fl;
 *                grad.attn_y R Cl; grad.qkv 3 R Cl; grad.attn 2 T^2;
 *                SP: grad.ln_local Rl C, grad.gathered R C
 *   transients   selective recomputation's probabilities b hl T^2; SP's
 *                buffers (tp_price.c); CP's ring's (cp_price.c); the
 *                loss's picked logits, a double a row
 *   deferred W   per block the output gradient and the input of c_proj
 *                (R (C + Fl)), c_fc (R (Fl + C)), attn c_proj (R (C + Cl)),
 *                c_attn (R (3Cl + C)); the embedding's token ids and
 *                gradient; the head's dz and LN_f output */
static void acts(const ptdp_model_config *c, int b, int tp, int cp, bool sp, ptdp_plan_core core, bool full,
                 ptdp_plan_acts *o)
{
    (void)full;
    ptdp_plan_dims s;
    dims(c, b, tp, sp, cp, &s);
    const double r = sizeof(ptdp_real), h = sizeof(ptdp_bf16);
    const ptdp_sp_buffers spb = ptdp_sp_price_buffers(sp, s.R, s.Rl, s.C);
    const double ring_f = ptdp_cp_price_buffers(s.R, s.KVl, s.b, s.hl, s.Tq, false);
    const double ring_b = ptdp_cp_price_buffers(s.R, s.KVl, s.b, s.hl, s.Tq, true);
    memset(o, 0, sizeof *o);
    o->input = r * s.Rl * s.C;
    o->tail = r * (s.R * s.C + s.R * s.Vl + 2 * s.Rl) + 2 * 8 * s.R;
    o->tail_bf16 = h * s.R * s.C + r * (s.R * s.Vl + 2 * s.Rl) + 2 * 8 * s.R;
    const bool tiled = core == PTDP_PLAN_CORE_TILED && cp == 1;
    const double tiles = (double)ptdp_attention_tiled_scratch();   /* two tiles a pass (attention_tiled.c) */
    o->block_redone = r * (block_kept(c, b, tp, cp, sp, tiled ? core : PTDP_PLAN_CORE_KEPT) + s.Rl * s.C);
    o->tail_redone = r * (s.Rl * s.C + s.R * s.Vl + 2 * s.Rl) + 2 * 8 * s.R;
    double e = 2 * s.Rl * s.C + s.R * s.C + s.R * s.Fl + 4 * s.R * s.Cl + (tiled ? tiles : 2 * s.T * s.T);
    if (sp)
        e += s.Rl * s.C + s.R * s.C;     /* grad.ln_local, grad.gathered */
    o->scratch = r * e;
    double t = core == PTDP_PLAN_CORE_REDONE && cp == 1 ? s.b * s.hl * s.T * s.T : 0;
    if (sp && spb.bwd > t)
        t = spb.bwd;
    if (cp > 1 && ring_b > t)
        t = ring_b;
    o->bwd_transient = r * t;
    o->fwd_block = r * (cp > 1 && ring_f > spb.block_fwd ? ring_f : spb.block_fwd);
    if (tiled && r * tiles > o->fwd_block)   /* the tiles' scratch (attn.scratch) */
        o->fwd_block = r * tiles;
    o->fwd_embed = r * spb.embed_fwd;
    o->fwd_head = 8 * s.R;   /* acts.picked */
    o->wgrad_block = s.R * (4 * s.C + 2 * s.Fl + 4 * s.Cl);
    o->wgrad_embed = s.R * s.C + 8 * s.R / r;
    o->wgrad_head = s.R * (s.Vl + s.C);
}

/* The built-in corpus's bytes for a seed, made once a seed (the planner
 * asks for ptdp train's default seed, many times). */
static pthread_mutex_t corpus_lock = PTHREAD_MUTEX_INITIALIZER;
static bool corpus_known;
static uint64_t corpus_seed;
static size_t corpus_bytes;

static double data_bytes(const ptdp_model_config *c, uint64_t seed)
{
    if (ptdp_gpt(c)->corpus != NULL)
        return (double)ptdp_gpt(c)->corpus_len;
    pthread_mutex_lock(&corpus_lock);
    if (!corpus_known || corpus_seed != seed) {
        unsigned char *text = NULL;
        corpus_bytes = ptdp_gpt_builtin_corpus(seed, PTDP_GPT_CORPUS_LINES, &text);
        free(text);
        corpus_seed = seed;
        corpus_known = true;
    }
    const size_t n = corpus_bytes;
    pthread_mutex_unlock(&corpus_lock);
    return (double)n;
}

static int experts(const ptdp_model_config *c);

/* The choices a sequence of T positions keeps under uniform routing: all
 * k T, or with a capacity factor c at most each expert's slots,
 * E min(ceil(c k T / E), k T) (GShard's groups, one sequence a group). */
static double kept_choices(const ptdp_gpt_settings *g, double T)
{
    const double E = g->moe_experts, k = g->moe_top_k;
    double kept = k * T;
    if (g->moe_capacity > 0) {   /* the cap bounds each expert's rows a sequence */
        double slots = ceil(g->moe_capacity * k * T / E);
        slots = slots < k * T ? slots : k * T;
        kept = kept < E * slots ? kept : E * slots;
    }
    return kept;
}

/* A mixture of experts in place of a block's MLP (16 B s h^2 a forward in
 * the dense count): its experts, 4 h F_e a row, and the router, 2 B s h E;
 * three times a step, once more redone in full.  The model's count gives
 * every token its k experts (the MFU convention: the model as if nothing
 * were dropped, 4 B s h F_e k); the hardware's counts the rows the experts
 * run, 4 B h F_e kept — below the model's when the capacity drops choices
 * (a capacity runs without CP, moe_settings.c, so a sequence is whole).
 * The shared experts (S) every token takes: 4 B s h S F_e in both. */
static void step_flops(const ptdp_model_config *c, double B, bool full, bool selective, double *model,
                       double *hardware)
{
    const double sl = ptdp_gpt(c)->seq_len, L = c->layers, h = c->hidden, V = ptdp_gpt(c)->vocab;
    *model = 72 * B * sl * L * h * h * (1 + sl / (6 * h) + V / (12 * L * h));
    *hardware = *model;
    if (full)
        *hardware += 24 * B * sl * L * h * h * (1 + sl / (6 * h)) + 2 * B * sl * h * V;
    else if (selective)
        *hardware += 4 * B * sl * sl * h * L;
    int moe_blocks = 0;
    for (int l = 0; l < c->layers && experts(c) > 0; l++)
        moe_blocks += ptdp_gpt_block_is_moe(c, l);
    const ptdp_gpt_settings *g = ptdp_gpt(c);
    const double Fe = ptdp_gpt_moe_ffn(c);
    const double delta = moe_blocks * B * sl * h *
                         (4.0 * Fe * (g->moe_top_k + g->moe_shared_experts) + 2.0 * g->moe_experts - 16 * h);
    const double dropped = g->moe_top_k * sl - kept_choices(g, sl);   /* a sequence's; 0 dropless */
    *model += 3 * delta;
    *hardware += (full ? 4 : 3) * (delta - moe_blocks * B * h * 4.0 * Fe * dropped);
}

/* ------------------------------------------------ a mixture of experts */

/* Block `layer`'s mixture of experts (gpt_moe.c) as the planner sees it
 * (model_plan.h's ptdp_plan_moe), under uniform routing: each expert gets
 * k R / E of the rows, at most its slots ceil(c k T / E) a sequence.
 *
 *   kept a micro-batch    choice, slot (ints), gate: R k; probs R E; load E;
 *                         token a kept row (int); the outputs y kept x C;
 *                         h and GELU's g here x F_e/tp; under EP the
 *                         dispatched inputs here x C and E/ep row counts;
 *                         under CP 2 b E doubles of whole-sequence counts;
 *                         with --moe-z-loss the logits R E, for its backward —
 *                         in place of the dense MLP's fc and GELU (2 R F/tp)
 *   forward transient     the logits R E, or the stacked inputs kept x C
 *                         (+ under EP the experts' outputs and the
 *                         exchange's wire, here x C each)
 *   backward transient    dy, dx kept x C, dgate R k, dz R E, dh here x F_e/tp,
 *                         and the stacked inputs again kept x C, or under
 *                         EP dy and dx where the experts ran and the wire,
 *                         here x C each
 *   split backward        B without any dW; W the attention's two, the
 *                         router's (dZ^T h) and each routed row's two
 *                         through its expert, as every linear's (wgrad.h)
 */
#define MOE_ACTS_STRUCT 224.0   /* the block's bookkeeping (parallel/moe.c's struct), about */

static int experts(const ptdp_model_config *c)
{
    return ptdp_gpt(c)->moe_experts > 0 && ptdp_gpt(c)->moe_every > 0 ? ptdp_gpt(c)->moe_experts : 0;
}

/* The block's shared experts (--moe-shared-experts S, gpt_moe.c): one MLP
 * of Fs = S F_e/tp on all R rows after the combine (Rr: the rows the
 * routed experts' backward holds, R/S under folding), charged as an expert
 * of R rows; its parameters summed over DP like the block's; it keeps 2
 * R Fs reals (c_fc's output and GELU's, float like every expert row), its
 * forward makes its output (R C) on top, its backward its scratch (R Fs)
 * and input gradient (R C) beside the routed backward's transients. */
static void shared_experts(const ptdp_profile *p, const ptdp_gpt_shape *s, int Fs, double Rr, bool split,
                           ptdp_plan_moe *o)
{
    const double r = sizeof(ptdp_real), R = s->R, C = s->C;
    o->fwd += ptdp_gpt_cost_expert_forward(p, s, R, Fs, true);
    o->bwd += ptdp_gpt_cost_expert_backward(p, s, R, Fs, split, true);
    if (split)
        o->w += ptdp_gpt_cost_expert_dw_proj(p, s, R, Fs) + ptdp_gpt_cost_expert_dw_fc(p, s, R, Fs);
    o->params_dense += 2 * C * Fs + Fs + C;
    o->shared_bytes = r * R * C;
    o->tensors += 4;
    o->kept_bytes += 2 * r * R * Fs;
    o->fwd_bytes = o->fwd_bytes > r * R * C ? o->fwd_bytes : r * R * C;
    const double routed = 2 * r * o->kept * C + r * Rr * o->k + r * Rr * o->E;   /* dy, dx, dgate, dz */
    const double beside = routed + r * R * Fs + r * R * C;
    o->bwd_bytes = o->bwd_bytes > beside ? o->bwd_bytes : beside;
}

static bool moe(const ptdp_profile *p, const ptdp_model_config *c, int layer, int b, int tp, int cp, int ep,
                int etp, ptdp_plan_core core, bool split, bool bf16, bool fp8, ptdp_plan_moe *o)
{
    const ptdp_gpt_settings *g = ptdp_gpt(c);
    if (!ptdp_gpt_block_is_moe(c, layer))
        return false;
    ep = ep > 1 ? ep : 1;
    cp = cp > 1 ? cp : 1;
    etp = etp > 0 && etp < tp ? etp : tp;   /* MoE parallel folding (moe_fold.c): tp / etp slices */
    ptdp_gpt_shape s = ptdp_gpt_shape_make(c, b, tp, false, cp, 0, true);
    s.selective = core == PTDP_PLAN_CORE_REDONE;
    s.tiled = core == PTDP_PLAN_CORE_TILED && cp == 1;
    s.split = split;
    s.fp8 = fp8;     /* the attention's linear layers and the experts' (gpt_cost.h) */
    s.bf16 = bf16;
    ptdp_gpt_shape routed = s;   /* the router's products on the rows this rank routes (gpt_moe.c) */
    routed.R /= tp / etp;
    const double r = sizeof(ptdp_real), E = g->moe_experts, k = g->moe_top_k, C = c->hidden, R = routed.R;
    const double Rd = s.R, bs = (double)b / (tp / etp);   /* the dense block's rows; the slice's sequences */
    const int Fe = ptdp_gpt_moe_ffn(c) / etp, Fs = ptdp_gpt_moe_ffn(c) / tp;
    const double T = g->seq_len / cp;
    double kept = k * R;
    if (g->moe_capacity > 0) {   /* the cap bounds each expert's rows a sequence (kept_choices' rule) */
        double slots = ceil(g->moe_capacity * k * T / E);
        slots = slots < k * T ? slots : k * T;
        kept = kept < E * slots * bs ? kept : E * slots * bs;
    }
    memset(o, 0, sizeof *o);
    o->E = E;
    o->k = k;
    o->local = E / ep;
    o->Fe = Fe;
    o->kept = kept;
    o->here = kept;
    o->fwd = ptdp_gpt_cost_attn_forward(p, &s) + ptdp_gpt_cost_moe_forward(p, &routed, (int)E) +
             ptdp_gpt_cost_block_out_forward(p, &s);
    o->bwd = ptdp_gpt_cost_attn_backward(p, &s) + ptdp_gpt_cost_ln1_backward(p, &s) +
             ptdp_gpt_cost_moe_backward(p, &routed, (int)E);
    /* a routed row through its expert, as gpt_moe.c charges it (gpt_cost.h):
     * its share of an expert of n = here / local rows (ptdp_plan_expert_rows) */
    const double n = ptdp_plan_expert_rows(p, o->here, o->local);
    o->row_fwd = ptdp_gpt_cost_expert_forward(p, &s, n, Fe, false) / n;
    o->row_bwd = ptdp_gpt_cost_expert_backward(p, &s, n, Fe, split, false) / n;
    if (fp8) {   /* and each local expert's two weights quantized, once a pass (every one runs) */
        o->fwd += o->local * ptdp_gpt_cost_expert_forward(p, &s, 0, Fe, true);
        o->bwd += o->local * ptdp_gpt_cost_expert_backward(p, &s, 0, Fe, split, true);
    }
    if (split)   /* W: the attention's two dW, the router's and each routed row's two */
        o->w = ptdp_gpt_cost_dw_attn_proj(p, &s) + ptdp_gpt_cost_dw_attn(p, &s) +
               ptdp_gpt_cost_dw_router(p, &routed, (int)E) +
               o->here * (ptdp_gpt_cost_expert_dw_proj(p, &s, n, Fe) + ptdp_gpt_cost_expert_dw_fc(p, &s, n, Fe)) / n;
    o->params_dense = 4 * C * s.Cl + 3 * s.Cl + 6 * C + E * C;   /* attention, LNs, c_proj's bias, router */
    o->params_expert = 2 * C * Fe + Fe + C;
    /* ln_1, c_attn, attn.c_proj, ln_2 (a weight and a bias each), the router
     * (and DeepSeek's selection bias), each local expert's four */
    o->tensors = 8 + 1 + (g->moe_score == PTDP_MOE_SIGMOID ? 1 : 0) + 4 * o->local;
    /* in DP's order: each expert's c_fc bias, c_proj, c_fc, c_proj bias;
     * the router, ln_2, c_proj's bias, ln_1, attention (its shared experts
     * and the selection bias not among them: small beside the rest) */
    o->expert = (ptdp_plan_tensors){ 4, { C, C * Fe, Fe * C, Fe } };
    o->beside = (ptdp_plan_tensors){ 9, { E * C, C, C, C, C * s.Cl, 3 * s.Cl * C, 3 * s.Cl, C, C } };
    if (g->moe_shared_experts > 0)   /* in attention's layout, on all the rows */
        shared_experts(p, &s, g->moe_shared_experts * Fs, R, split, o);
    const double here = o->here, dense_rows = 2 * Rd * s.Fl * (bf16 ? sizeof(ptdp_bf16) : r);
    o->kept_bytes = MOE_ACTS_STRUCT + 8 * R * k + r * R * k + r * R * E + 4 * E + 4 * kept + r * kept * C +
                    2 * r * here * Fe + (ep > 1 ? r * here * C + 4 * o->local : 0) +
                    (cp > 1 ? 16 * bs * E : 0) + (g->moe_z_loss > 0 ? r * R * E : 0) - dense_rows;
    /* a deferred W: the router's operands (dZ and LN2's output) and each
     * routed row's through its expert's two layers, for the dense MLP's two */
    o->wgrad_own = R * (C + E) + 2 * here * (C + Fe);
    o->wgrad = o->wgrad_own - Rd * (2 * C + 2 * s.Fl);
    const double packed = ep > 1 && bf16 ? 2.0 * (kept + here) * C : 0;   /* bf16's wire (ep.h) */
    const double stacked = r * kept * C + (ep > 1 ? 2 * r * here * C : 0) + packed;
    o->fwd_bytes = r * R * E > stacked ? r * R * E : stacked;
    o->bwd_bytes = 2 * r * kept * C + r * R * k + r * R * E + r * here * Fe +
                   (ep > 1 ? 3 * r * here * C : r * kept * C) + packed;
    return true;
}

/* Mixtures among blocks first .. first + n - 1: the l >= K with
 * (l - K + 1) mod every = 0 — counted from K, floor((b - K) / every) of
 * the blocks below b, so floor((e - K)/every) - floor((f - K)/every) with
 * f, e = first, first + n held at K or above. */
static int moe_blocks(const ptdp_model_config *c, int first, int n)
{
    const int every = ptdp_gpt(c)->moe_every, K = ptdp_gpt(c)->moe_dense_first;
    const int f = first > K ? first : K, e = first + n > K ? first + n : K;
    return experts(c) > 0 ? (e - K) / every - (f - K) / every : 0;
}

const ptdp_model_plan ptdp_gpt_plan = {
    .defaults = plan_defaults,
    .required = required,
    .required_value = required_value,
    .tp_ok = tp_ok,
    .dims = dims,
    .flops = flops,
    .block_kept = block_kept,
    .block_kept_bytes = block_kept_bytes,
    .params = params,
    .tp_block = { .fp8_column = 2, .fp8_row = 2,   /* c_attn, c_fc; the two c_proj */
                  .all_reduce_f = 2, .all_reduce_b = 2, .gather_f = 2, .scatter_f = 2, .gather_b = 2, .scatter_b = 2,
                  .regathers = 2 },   /* attention's and the MLP's f and g; ln_1's and ln_2's shards again */
    .acts = acts,
    .packs_bf16 = true,
    .data_bytes = data_bytes,
    .step_flops = step_flops,
    .experts = experts,
    .moe = moe,
    .moe_blocks = moe_blocks,
};
