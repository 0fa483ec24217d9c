/*
 * gpt_model.c — the GPT as a model: its shapes and their checks, its
 * parameters on one stage and shard under nanoGPT's names, its checkpoint
 * metadata, its data, what sampling needs of it, and the table the rest
 * of ptdp calls (model.h).
 *
 *   parameter (nanoGPT name)                whole          TP split          decay
 *   transformer.wte.weight                  [V_pad, C]     rows (vocab)      yes
 *   transformer.wpe.weight                  [T, C]         replicated        yes
 *   transformer.h.l.ln_1.{weight,bias}      [C]            replicated        no
 *   transformer.h.l.attn.c_attn.weight      [3C, C]        rows, by head,    yes
 *                                                          in q, k and v
 *   transformer.h.l.attn.c_attn.bias        [3C]           the same          no
 *   transformer.h.l.attn.c_proj.weight      [C, C]         columns (heads)   yes
 *   transformer.h.l.attn.c_proj.bias        [C]            replicated        no
 *   transformer.h.l.ln_2.{weight,bias}      [C]            replicated        no
 *   transformer.h.l.mlp.c_fc.weight         [F, C]         rows              yes
 *   transformer.h.l.mlp.c_fc.bias           [F]            with its rows     no
 *   transformer.h.l.mlp.c_proj.weight       [C, F]         columns           yes
 *   transformer.h.l.mlp.c_proj.bias         [C]            replicated        no
 *   transformer.ln_f.{weight,bias}          [C]            replicated        no
 *
 * A block whose MLP is a mixture of E experts (gpt_moe.c) has instead
 *   transformer.h.l.mlp.router.weight             [E, C]    replicated  yes
 *   transformer.h.l.mlp.router.expert_bias        [E]       replicated  no
 *     (--moe-score sigmoid alone: DeepSeek-V3's selection bias, zero at
 *     init, no gradient, no decay; moe.h)
 *   transformer.h.l.mlp.experts.e.c_fc.weight     [F_e, C]  (no TP)     yes
 *   transformer.h.l.mlp.experts.e.c_fc.bias       [F_e]                 no
 *   transformer.h.l.mlp.experts.e.c_proj.weight   [C, F_e]              yes
 *   transformer.h.l.mlp.experts.e.c_proj.bias     [C]                   no
 * initialised as the dense MLP's (the router as a matrix, N(0, 0.02^2)).
 *
 * Initialisation as GPT-2's: N(0, 0.02^2) for matrices and embeddings, both
 * c_proj weights N(0, (0.02 / sqrt(2 L))^2) (each block adds two of them to
 * the residual stream), biases 0, LayerNorm weights 1.  Weight decay, as
 * GPT-2 is trained, only on the 2-D tensors.
 */
#include "ptdp/gpt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/comm.h"
#include "ptdp/error.h"
#include "parallel/fp8_linear_impl.h"
#include "models/gpt_kv.h"
#include "models/gpt_table.h"
#include "parallel/moe_impl.h"
#include "ptdp/model_plan.h"

#define INIT_STD 0.02

ptdp_model_config ptdp_gpt_default_config(void)
{
    ptdp_model_config c = PTDP_GPT_CONFIG(
        .ops = &ptdp_gpt_ops, .hidden = 64, .ffn = 256, .layers = 2, .heads = 4, .seq_len = 32,
        .vocab = 0, .vocab_multiple = 64, .moe_every = 1, .moe_top_k = 2, .moe_aux_loss = 0.01,
    );
    return c;
}

static int padded(const ptdp_model_config *c, int tp)
{
    const ptdp_gpt_settings *gpt = ptdp_gpt(c);
    return gpt->vocab_padded > 0 ? gpt->vocab_padded : ptdp_gpt_pad_vocab(gpt->vocab, gpt->vocab_multiple, tp);
}

/* "1, 2, 4" — every tp up to the limit that divides all of a, b and c. */
static void valid_tp(int a, int b, int c, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int t = 1; t <= PTDP_MAX_DEVICES; t++)
        if (a % t == 0 && b % t == 0 && c % t == 0 && n + 8 < len)
            n += (size_t)snprintf(buf + n, len - n, "%s%d", n ? ", " : "", t);
}

/* ------------------------------------------------- the whole model */

static int gpt_check(const ptdp_model_config *m, int tp, int pp, char *msg, size_t n)
{
    const ptdp_gpt_settings *gpt = ptdp_gpt(m);
    (void)pp;
#define BAD(...) do { snprintf(msg, n, __VA_ARGS__); return PTDP_EINVAL; } while (0)
    if (m->hidden < 1) BAD("--hidden %d: must be at least 1", m->hidden);
    if (gpt->heads < 1) BAD("--heads %d: must be at least 1", gpt->heads);
    if (m->hidden % gpt->heads != 0) {
        char valid[256] = "";
        size_t len = 0;
        for (int h = 1; h <= m->hidden && len + 8 < sizeof valid; h++)
            if (m->hidden % h == 0)
                len += (size_t)snprintf(valid + len, sizeof valid - len, "%s%d", len ? ", " : "", h);
        BAD("--heads %d must divide --hidden %d (valid --heads: %s)", gpt->heads, m->hidden, valid);
    }
    if (m->ffn < 1) BAD("--ffn %d: must be at least 1", m->ffn);
    if (m->layers < 1) BAD("--layers %d: must be at least 1", m->layers);
    if (gpt->seq_len < 2) BAD("--seq-len %d: must be at least 2 (a position and the token after it)", gpt->seq_len);
    if (gpt->vocab < 1) BAD("--vocab %d: must be at least 1", gpt->vocab);
    if (gpt->vocab_multiple < 1) BAD("--vocab-multiple %d: must be at least 1", gpt->vocab_multiple);
    if (gpt->corpus != NULL && gpt->corpus_len < (size_t)gpt->seq_len + 1)
        BAD("the data has %zu tokens: one sequence of --seq-len %d needs %d (a shorter --seq-len, or more data)",
            gpt->corpus_len, gpt->seq_len, gpt->seq_len + 1);
    const ptdp_moe_settings moe = ptdp_gpt_moe_settings(m);
    if (ptdp_moe_check(&moe, m->ffn, m->layers, tp, "each expert's MLP is split over the TP group like the dense one "
                       "(c_fc by rows, c_proj by columns)", msg, n) != 0)
        return PTDP_EINVAL;
    if (tp >= 1) {
        int vp = padded(m, tp);
        if (vp < gpt->vocab)
            BAD("the padded vocabulary %d is smaller than --vocab %d", vp, gpt->vocab);
        if (gpt->heads % tp != 0 || m->ffn % tp != 0 || vp % tp != 0) {
            char valid[256];
            valid_tp(gpt->heads, m->ffn, vp, valid, sizeof valid);
            BAD("--tp %d must divide --heads %d, --ffn %d and the padded vocabulary %d (valid --tp: %s)",
                tp, gpt->heads, m->ffn, vp, valid);
        }
    }
#undef BAD
    return PTDP_OK;
}

/* Block l's router and experts, in the order of their names. */
static int moe_list_params(const ptdp_model_config *c, int l, ptdp_param_info *out)
{
    const int C = c->hidden, F = ptdp_gpt_moe_ffn(c), E = ptdp_gpt(c)->moe_experts;
    int n = 0;
#define ADD(r, cc, bias, ...) do { if (out) { snprintf(out[n].name, sizeof out[n].name, __VA_ARGS__); \
        out[n].rows = (r); out[n].cols = (cc); out[n].is_bias = (bias); } n++; } while (0)
    ADD(E, C, false, "transformer.h.%d.mlp.router.weight", l);
    if (ptdp_gpt(c)->moe_score == PTDP_MOE_SIGMOID)
        ADD(1, E, true, "transformer.h.%d.mlp.router.expert_bias", l);
    for (int e = 0; e < E; e++) {
        ADD(F, C, false, "transformer.h.%d.mlp.experts.%d.c_fc.weight", l, e);
        ADD(1, F, true, "transformer.h.%d.mlp.experts.%d.c_fc.bias", l, e);
        ADD(C, F, false, "transformer.h.%d.mlp.experts.%d.c_proj.weight", l, e);
        ADD(1, C, true, "transformer.h.%d.mlp.experts.%d.c_proj.bias", l, e);
    }
    const int S = ptdp_gpt(c)->moe_shared_experts * F;   /* the shared experts: one MLP of S F_e */
    if (S > 0) {
        ADD(S, C, false, "transformer.h.%d.mlp.shared_experts.c_fc.weight", l);
        ADD(1, S, true, "transformer.h.%d.mlp.shared_experts.c_fc.bias", l);
        ADD(C, S, false, "transformer.h.%d.mlp.shared_experts.c_proj.weight", l);
        ADD(1, C, true, "transformer.h.%d.mlp.shared_experts.c_proj.bias", l);
    }
#undef ADD
    return n;
}

/* The whole model's tensors in nanoGPT's state_dict order (no lm_head:
 * the head is tied to wte and stored once, as wte). */
static int gpt_list_params(const ptdp_model_config *c, ptdp_param_info *out)
{
    int n = 0, C = c->hidden, F = c->ffn, V = padded(c, 1);
#define ADD(nm, r, cc, bias) do { if (out) { snprintf(out[n].name, sizeof out[n].name, "%s", nm); \
        out[n].rows = (r); out[n].cols = (cc); out[n].is_bias = (bias); } n++; } while (0)
    char name[PTDP_NAME_MAX];
    ADD("transformer.wte.weight", V, C, false);
    ADD("transformer.wpe.weight", ptdp_gpt(c)->seq_len, C, false);
    for (int l = 0; l < c->layers; l++) {
        static const struct { const char *name; int rows, cols; bool bias; } t[] = {
            { "ln_1.weight", 0, 1, true }, { "ln_1.bias", 0, 1, true },
            { "attn.c_attn.weight", 3, 1, false }, { "attn.c_attn.bias", 0, 3, true },
            { "attn.c_proj.weight", 1, 1, false }, { "attn.c_proj.bias", 0, 1, true },
            { "ln_2.weight", 0, 1, true }, { "ln_2.bias", 0, 1, true },
            { "mlp.c_fc.weight", -1, 1, false }, { "mlp.c_fc.bias", 0, -1, true },
            { "mlp.c_proj.weight", 1, -1, false }, { "mlp.c_proj.bias", 0, 1, true },
        };
        const bool moe = ptdp_gpt_block_is_moe(c, l);
        for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
            /* sizes in units of C, with -1 standing for F */
            int rows = t[k].rows == 0 ? 1 : t[k].rows < 0 ? F : t[k].rows * C;
            int cols = t[k].cols < 0 ? F : t[k].cols * C;
            if (moe && k == 8) {   /* the router and the experts in place of the MLP */
                n += moe_list_params(c, l, out != NULL ? out + n : NULL);
                break;
            }
            snprintf(name, sizeof name, "transformer.h.%d.%s", l, t[k].name);
            ADD(name, rows, cols, t[k].bias);
        }
    }
    ADD("transformer.ln_f.weight", 1, C, true);
    ADD("transformer.ln_f.bias", 1, C, true);
#undef ADD
    return n;
}

static int gpt_metadata(const ptdp_model_config *c, const char **keys, char (*values)[32],
                        const char **flags, int max)
{
    const ptdp_gpt_settings *g = ptdp_gpt(c);
    const char *k[] = { "vocab", "vocab_padded", "seq_len", "hidden", "heads", "ffn", "layers",
                        "moe_experts", "moe_every", "moe_ffn", "moe_top_k" };
    const char *f[] = { "--vocab", "--vocab-multiple", "--seq-len", "--hidden", "--heads", "--ffn", "--layers",
                        "--moe-experts", "--moe-every", "--moe-ffn", "--moe-top-k" };
    const int v[] = { g->vocab, padded(c, 1), g->seq_len, c->hidden, g->heads, c->ffn, c->layers,
                      g->moe_experts, g->moe_every, ptdp_gpt_moe_ffn(c), g->moe_top_k };
    const int keys_n = g->moe_experts > 0 ? 11 : 7;   /* a mixture of experts' shapes too (dense files: none) */
    int n = 0;
    for (; n < keys_n && n < max; n++) {
        keys[n] = k[n];
        flags[n] = f[n];
        snprintf(values[n], 32, "%d", v[n]);
    }
    const ptdp_moe_settings moe = ptdp_gpt_moe_settings(c);
    return n + ptdp_moe_shape_metadata(&moe, keys + n, values + n, flags + n, max - n);
}

/* A metadata key back into its field (a checkpoint read without flags). */
static int gpt_from_metadata(ptdp_model_config *c, const char *key, long long value)
{
    ptdp_gpt_settings *gpt = ptdp_gpt(c);
    const struct { const char *key; int *field; } t[] = {
        { "vocab", &gpt->vocab },
        { "vocab_padded", &gpt->vocab_padded },
        { "seq_len", &gpt->seq_len },
        { "hidden", &c->hidden },
        { "heads", &gpt->heads },
        { "ffn", &c->ffn },
        { "layers", &c->layers },
        { "moe_experts", &gpt->moe_experts },
        { "moe_every", &gpt->moe_every },
        { "moe_ffn", &gpt->moe_ffn },
        { "moe_top_k", &gpt->moe_top_k },
        { "moe_score", &gpt->moe_score },
        { "moe_dense_first", &gpt->moe_dense_first },
        { "moe_shared_experts", &gpt->moe_shared_experts },
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++)
        if (strcmp(key, t[k].key) == 0 && value >= 0 && value <= 0x7fffffff) {
            *t[k].field = (int)value;
            return PTDP_OK;
        }
    return PTDP_EINVAL;
}

/* A mixture's settings beyond its shapes (moe_settings.c): its capacity
 * factor and balance weight, reals. */
static int gpt_settings(const ptdp_model_config *c, ptdp_meta_setting *out, int max)
{
    const ptdp_moe_settings moe = ptdp_gpt_moe_settings(c);
    return ptdp_moe_settings_metadata(&moe, out, max);
}

static int gpt_from_metadata_real(ptdp_model_config *c, const char *key, double value)
{
    ptdp_moe_settings moe = ptdp_gpt_moe_settings(c);
    if (ptdp_moe_from_metadata_real(&moe, key, value) != 0)
        return PTDP_EINVAL;
    ptdp_gpt(c)->moe_capacity = moe.capacity;
    ptdp_gpt(c)->moe_aux_loss = moe.aux_loss;
    ptdp_gpt(c)->moe_route_scale = moe.route_scale;
    ptdp_gpt(c)->moe_bias_update = moe.bias_update;
    ptdp_gpt(c)->moe_groups = moe.groups;
    ptdp_gpt(c)->moe_group_top_k = moe.group_top_k;
    ptdp_gpt(c)->moe_z_loss = moe.z_loss;
    return PTDP_OK;
}

/* What a GPT with experts runs on (moe_settings.c: not yet a capacity
 * under CP, SP's or token slices' splits of a sequence), and not yet
 * ZeRO-3's gathered units. */
static int gpt_check_run(const ptdp_model_config *c, const ptdp_model_run *r, char *msg, size_t n)
{
    const ptdp_moe_settings moe = ptdp_gpt_moe_settings(c);
    if (ptdp_moe_check_run(&moe, r, "this GPT is dense", msg, n) != 0)
        return PTDP_EINVAL;
    if (moe.experts > 0 && r->shards_params) {
        snprintf(msg, n, "--moe-experts %d with --zero 3 (use --zero 1 or 2): a mixture of experts does not run "
                 "there yet", moe.experts);
        return PTDP_EINVAL;
    }
    const int C = c->hidden, F = c->ffn, Fe = ptdp_gpt_moe_ffn(c), Fs = moe.shared * Fe;
    const ptdp_fp8_weight w[] = {   /* the head keeps its precision */
        { "c_attn.weight", 3 * C, C, PTDP_SHARD_ROWS, 3 }, { "attn.c_proj.weight", C, C, PTDP_SHARD_COLS, 1 },
        { "mlp.c_fc.weight", F, C, PTDP_SHARD_ROWS, 1 }, { "mlp.c_proj.weight", C, F, PTDP_SHARD_COLS, 1 },
        { "experts.c_fc.weight", Fe, C, PTDP_SHARD_ROWS, 1 }, { "experts.c_proj.weight", C, Fe, PTDP_SHARD_COLS, 1 },
        { "shared_experts.c_fc.weight", Fs, C, PTDP_SHARD_ROWS, 1 },
        { "shared_experts.c_proj.weight", C, Fs, PTDP_SHARD_COLS, 1 },
    };
    return ptdp_fp8_split_check_all(r->fp8, w, moe.experts == 0 ? 4 : moe.shared > 0 ? 8 : 6, r->tp, msg, n);
}

/* ------------------------------------------------- one stage and shard */

/* Block l's MLP (backward order): c_fc column-parallel, c_proj row-parallel. */
#define LIN ptdp_model_linear_weight   /* a linear layer's W (model.h) */

static int mlp_lay_out(ptdp_device *dev, ptdp_model *m, ptdp_gpt_block *b, int l)
{
    const int C = m->cfg.hidden, F = m->cfg.ffn, t = m->mesh->tp_rank, Fl = F / m->mesh->tp;
    const double proj_std = INIT_STD / sqrt(2.0 * m->cfg.layers);
    char name[PTDP_NAME_MAX];
#define ADD(what, ...) (snprintf(name, sizeof name, "transformer.h.%d.mlp.%s", l, what), \
                        ptdp_model_add_param(dev, m, name, __VA_ARGS__))
    ptdp_model_begin_subunit(m);   /* c_proj */
    b->fc_proj_b = ADD("c_proj.bias", 1, C, true, PTDP_SHARD_NONE, 0, 0, 1, C, PTDP_INIT_ZEROS, 0.0);
    b->fc_proj_w = LIN(ADD("c_proj.weight", C, F, false, PTDP_SHARD_COLS, 0, t * Fl, C, Fl, PTDP_INIT_NORMAL,
                           proj_std));
    ptdp_model_begin_subunit(m);   /* c_fc with ln_2 (lay_out adds it) */
    b->fc_w = LIN(ADD("c_fc.weight", F, C, false, PTDP_SHARD_ROWS, t * Fl, 0, Fl, C, PTDP_INIT_NORMAL, INIT_STD));
    b->fc_b = ADD("c_fc.bias", 1, F, true, PTDP_SHARD_ROWS, 0, t * Fl, 1, Fl, PTDP_INIT_ZEROS, 0.0);
#undef ADD
    return PTDP_OK;
}

/* Block l's shared experts (--moe-shared-experts S): one MLP of S F_e,
 * split over TP like the dense MLP and summed over DP like it (every
 * replica runs it on its own tokens: never dispatched). */
static int shared_lay_out(ptdp_device *dev, ptdp_model *m, ptdp_gpt_expert *x, int l)
{
    const ptdp_model_config *c = &m->cfg;
    const int C = c->hidden, S = ptdp_gpt(c)->moe_shared_experts * ptdp_gpt_moe_ffn(c);
    const int t = m->mesh->tp_rank, Sl = S / m->mesh->tp;
    const double proj_std = INIT_STD / sqrt(2.0 * c->layers);
    char name[PTDP_NAME_MAX];
#define ADD(what, ...) (snprintf(name, sizeof name, "transformer.h.%d.mlp.shared_experts.%s", l, what), \
                        ptdp_model_add_param(dev, m, name, __VA_ARGS__))
    x->proj_b = ADD("c_proj.bias", 1, C, true, PTDP_SHARD_NONE, 0, 0, 1, C, PTDP_INIT_ZEROS, 0.0);
    x->proj_w = LIN(ADD("c_proj.weight", C, S, false, PTDP_SHARD_COLS, 0, t * Sl, C, Sl, PTDP_INIT_NORMAL, proj_std));
    x->fc_w = LIN(ADD("c_fc.weight", S, C, false, PTDP_SHARD_ROWS, t * Sl, 0, Sl, C, PTDP_INIT_NORMAL, INIT_STD));
    x->fc_b = ADD("c_fc.bias", 1, S, true, PTDP_SHARD_ROWS, 0, t * Sl, 1, Sl, PTDP_INIT_ZEROS, 0.0);
#undef ADD
    return x->fc_b != NULL ? PTDP_OK : PTDP_EINVAL;
}

/* Block l's shared experts (if any), its routed experts, last first, then
 * its router (backward order): this EP rank's E / ep of them (all without
 * expert parallelism), each split over TP like the dense MLP — c_fc
 * column-parallel (rows), c_proj row-parallel (columns), its bias whole;
 * the router whole on every TP rank. */
static int moe_lay_out(ptdp_device *dev, ptdp_model *m, ptdp_gpt_block *b, int l)
{
    const ptdp_model_config *c = &m->cfg;
    const int C = c->hidden, F = ptdp_gpt_moe_ffn(c), E = ptdp_gpt(c)->moe_experts;
    const int t = ptdp_moe_expert_tp_rank(m->mesh), Fl = F / ptdp_moe_expert_tp_size(m->mesh);   /* moe_fold.c */
    const double proj_std = INIT_STD / sqrt(2.0 * c->layers);
    char name[PTDP_NAME_MAX];
    int e0 = 0;
    const int El = ptdp_moe_experts_here(m->mesh, E, &e0);
    if ((b->experts = calloc((size_t)El, sizeof *b->experts)) == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory describing the experts", dev->rank);
    if (ptdp_gpt(c)->moe_shared_experts > 0 && shared_lay_out(dev, m, &b->shared, l) != 0)
        return PTDP_EINVAL;
#define ADD(what, ...) (snprintf(name, sizeof name, "transformer.h.%d.mlp.%s", l, what), \
                        ptdp_model_add_param(dev, m, name, __VA_ARGS__))
#define EXPERT(e, what) (snprintf(name, sizeof name, "transformer.h.%d.mlp.experts.%d.%s", l, e, what), \
                         name)
    for (int e = e0 + El - 1; e >= e0; e--) {   /* global index e, local e - e0 */
        ptdp_gpt_expert *x = &b->experts[e - e0];
        x->proj_b = ptdp_model_add_param(dev, m, EXPERT(e, "c_proj.bias"), 1, C, true, PTDP_SHARD_NONE, 0, 0, 1,
                                         C, PTDP_INIT_ZEROS, 0.0);
        x->proj_w = LIN(ptdp_model_add_param(dev, m, EXPERT(e, "c_proj.weight"), C, F, false, PTDP_SHARD_COLS, 0,
                                             t * Fl, C, Fl, PTDP_INIT_NORMAL, proj_std));
        x->fc_w = LIN(ptdp_model_add_param(dev, m, EXPERT(e, "c_fc.weight"), F, C, false, PTDP_SHARD_ROWS, t * Fl,
                                           0, Fl, C, PTDP_INIT_NORMAL, INIT_STD));
        x->fc_b = ptdp_model_add_param(dev, m, EXPERT(e, "c_fc.bias"), 1, F, true, PTDP_SHARD_ROWS, 0, t * Fl, 1, Fl,
                                       PTDP_INIT_ZEROS, 0.0);
        if (x->fc_b == NULL)
            return PTDP_EINVAL;
        ptdp_param *ps[] = { x->proj_b, x->proj_w, x->fc_w, x->fc_b };
        for (int q = 0; q < 4; q++)   /* summed over the ranks that hold the same experts (mesh.h) */
            ps[q]->sum.replicas = ptdp_moe_expert_replicas(m->mesh);
    }
    if (ptdp_gpt(c)->moe_score == PTDP_MOE_SIGMOID)   /* before the router: after it in the state_dict */
        b->expert_bias = ADD("router.expert_bias", 1, E, true, PTDP_SHARD_NONE, 0, 0, 1, E, PTDP_INIT_ZEROS, 0.0);
    if (ptdp_gpt(c)->moe_bias_update > 0 && (b->choices = calloc((size_t)E, sizeof *b->choices)) == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory counting the experts' loads", dev->rank);
    b->router = ADD("router.weight", E, C, false, PTDP_SHARD_NONE, 0, 0, E, C, PTDP_INIT_NORMAL, INIT_STD);
    ptdp_moe_fold_router(m->mesh, b->router);
#undef ADD
#undef EXPERT
    return PTDP_OK;
}

/* The laying out of this stage's parameters, in the order the backward
 * makes their gradients: the head with LN_f, each block last to first,
 * the embeddings; then what their gradients are summed over.
 *
 * Units (model.h): the head with LN_f, each block, the embeddings.  A
 * dense block is cut into four subunits, one a linear layer (with its
 * bias, and the LayerNorm before it): under bf16 only the subunit an op
 * computes with is widened to float (gpt_block.c), not the block. */
#define ADD(...) ptdp_model_add_param(dev, m, __VA_ARGS__)
#define W(std) PTDP_INIT_NORMAL, (std)
#define ZERO PTDP_INIT_ZEROS, 0.0
#define ONE PTDP_INIT_ONES, 0.0

/* The last stage: the head, wte's rows of this rank (with one stage wte
 * itself, described with the embedding), and LN_f. */
static void head_lay_out(ptdp_device *dev, ptdp_model *m, ptdp_gpt *g)
{
    const int C = m->cfg.hidden, t = m->mesh->tp_rank, Vl = g->vocab_local;
    ptdp_model_begin_unit(m);
    if (!m->first_stage) {
        g->head = ADD("transformer.wte.weight", g->vocab_padded, C, false, PTDP_SHARD_ROWS, t * Vl, 0, Vl, C,
                      W(INIT_STD));
        if (g->head != NULL)   /* the sum of both copies' gradients */
            g->head->sum.also = PTDP_GROUP_BIT(PTDP_GROUP_EMB);
    }
    g->lnf_b = ADD("transformer.ln_f.bias", 1, C, true, PTDP_SHARD_NONE, 0, 0, 1, C, ZERO);
    g->lnf_w = ADD("transformer.ln_f.weight", 1, C, true, PTDP_SHARD_NONE, 0, 0, 1, C, ONE);
}

/* Block l: its MLP (or experts), ln_2, the attention's c_proj (row-
 * parallel) and c_attn (column-parallel, q, k and v each cut by head),
 * ln_1. */
static int block_lay_out(ptdp_device *dev, ptdp_model *m, ptdp_gpt_block *b, int l)
{
    const ptdp_model_config *c = &m->cfg;
    const int C = c->hidden, t = m->mesh->tp_rank, Cl = C / m->mesh->tp;
    const double proj_std = INIT_STD / sqrt(2.0 * c->layers);
    const bool moe = ptdp_gpt_block_is_moe(c, l);
    char name[PTDP_NAME_MAX];
#define NAME(what) (snprintf(name, sizeof name, "transformer.h.%d.%s", l, what), name)
    ptdp_model_begin_unit(m);
    if ((moe ? moe_lay_out : mlp_lay_out)(dev, m, b, l) != 0)
        return PTDP_ENOMEM;
    b->ln2_b = ADD(NAME("ln_2.bias"), 1, C, true, PTDP_SHARD_NONE, 0, 0, 1, C, ZERO);
    b->ln2_w = ADD(NAME("ln_2.weight"), 1, C, true, PTDP_SHARD_NONE, 0, 0, 1, C, ONE);
    if (!moe)
        ptdp_model_begin_subunit(m);   /* attn.c_proj */
    b->proj_b = ADD(NAME("attn.c_proj.bias"), 1, C, true, PTDP_SHARD_NONE, 0, 0, 1, C, ZERO);
    b->proj_w = LIN(ADD(NAME("attn.c_proj.weight"), C, C, false, PTDP_SHARD_COLS, 0, t * Cl, C, Cl, W(proj_std)));
    if (!moe)
        ptdp_model_begin_subunit(m);   /* attn.c_attn with ln_1 */
    b->attn_w = LIN(ADD(NAME("attn.c_attn.weight"), 3 * C, C, false, PTDP_SHARD_ROWS, t * Cl, 0, 3 * Cl, C,
                             W(INIT_STD)));
    b->attn_b = ADD(NAME("attn.c_attn.bias"), 1, 3 * C, true, PTDP_SHARD_ROWS, 0, t * Cl, 1, 3 * Cl, ZERO);
    b->ln1_b = ADD(NAME("ln_1.bias"), 1, C, true, PTDP_SHARD_NONE, 0, 0, 1, C, ZERO);
    b->ln1_w = ADD(NAME("ln_1.weight"), 1, C, true, PTDP_SHARD_NONE, 0, 0, 1, C, ONE);
#undef NAME
    if (b->attn_w != NULL && b->attn_b != NULL)
        b->attn_w->parts = b->attn_b->parts = 3;   /* q, k and v: each cut by head */
    return PTDP_OK;
}

#undef LIN

/* The first stage: wpe, and wte's rows of this rank (the head too with
 * one stage; else a copy of the last stage's, their gradients summed). */
static void embed_lay_out(ptdp_device *dev, ptdp_model *m, ptdp_gpt *g)
{
    const int C = m->cfg.hidden, t = m->mesh->tp_rank, Vl = g->vocab_local, T = ptdp_gpt(&m->cfg)->seq_len;
    ptdp_model_begin_unit(m);
    g->wpe = ADD("transformer.wpe.weight", T, C, false, PTDP_SHARD_NONE, 0, 0, T, C, W(INIT_STD));
    g->wte = ADD("transformer.wte.weight", g->vocab_padded, C, false, PTDP_SHARD_ROWS, t * Vl, 0, Vl, C,
                 W(INIT_STD));
    if (m->last_stage)
        g->head = g->wte;
    else if (g->wte != NULL)
        g->wte->sum.also = PTDP_GROUP_BIT(PTDP_GROUP_EMB);
}
#undef ADD
#undef W
#undef ZERO
#undef ONE

/* What the optimizer and the gradient sums read of the parameters laid
 * out: decay only the 2-D tensors; under SP a LayerNorm sees only this
 * rank's positions (sp.h), so its gradient is the sum over TP — leave
 * this out and the ranks' LayerNorms drift apart from the first step. */
static void declare_sums(ptdp_model *m, ptdp_gpt *g)
{
    for (int i = 0; i < m->nparams; i++)
        m->params[i].no_decay = m->params[i].is_bias;
    if (!m->mesh->sp)
        return;
    const ptdp_grad_sum over_tp = { .replicas = PTDP_GROUP_DP, .also = PTDP_GROUP_BIT(PTDP_GROUP_TP) };
    for (int i = 0; i < m->layer_end - m->layer_begin; i++) {
        ptdp_gpt_block *b = &g->blocks[i];
        b->ln1_w->sum = b->ln1_b->sum = b->ln2_w->sum = b->ln2_b->sum = over_tp;
    }
    if (m->last_stage)
        g->lnf_w->sum = g->lnf_b->sum = over_tp;
}

/* This stage's parameters, in the order the backward makes their gradients. */
static int lay_out(ptdp_device *dev, ptdp_model *m, ptdp_gpt *g)
{
    if (m->last_stage)
        head_lay_out(dev, m, g);
    for (int l = m->layer_end - 1; l >= m->layer_begin; l--)
        if (block_lay_out(dev, m, &g->blocks[l - m->layer_begin], l) != 0)
            return PTDP_ENOMEM;
    if (m->first_stage)
        embed_lay_out(dev, m, g);
    if (ptdp_aborted(dev))
        return PTDP_EABORTED;
    if (g->head != NULL)
        g->head->keeps_precision = true;   /* --fp8 leaves the head in float */
    declare_sums(m, g);
    return PTDP_OK;
}

/* The data (gpt_data.c): the given text, or the built-in one. */
static int load_corpus(ptdp_device *dev, ptdp_model *m, ptdp_gpt *g)
{
    const ptdp_gpt_settings *gpt = ptdp_gpt(&m->cfg);
    ptdp_gpt_text t = { 0 };
    int rc = ptdp_gpt_text_load(dev, m->seed, gpt->corpus, gpt->corpus_len, gpt->seq_len, gpt->vocab, &t);
    g->corpus_block = t.block;
    g->corpus = t.text;
    g->corpus_len = t.len;
    return rc;
}

static void gpt_free(ptdp_device *dev, ptdp_model *m)
{
    ptdp_gpt *g = m->impl;
    if (g == NULL)
        return;
    ptdp_gpt_kv_free_all(dev, m);
    ptdp_free(dev, g->corpus_block);
    for (int i = 0; g->blocks != NULL && i < m->layer_end - m->layer_begin; i++)
        free(g->blocks[i].experts), free(g->blocks[i].choices);
    free(g->blocks);
    free(g);
    m->impl = NULL;
}

static int gpt_init(ptdp_device *dev, ptdp_model *m)
{
    const ptdp_model_config *c = &m->cfg;
    const ptdp_gpt_settings *gpt = ptdp_gpt(c);
    const int tp = m->mesh->tp, nb = m->layer_end - m->layer_begin;
    ptdp_gpt *g = calloc(1, sizeof *g);
    if (g != NULL)
        g->blocks = calloc((size_t)(nb > 0 ? nb : 1), sizeof *g->blocks);
    m->impl = g;
    if (g == NULL || g->blocks == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory describing the model", dev->rank);
    g->vocab_padded = padded(c, tp);
    g->vocab_local = g->vocab_padded / tp;
    g->heads_local = gpt->heads / tp;
    g->ffn_local = c->ffn / tp;
    m->input_cols = gpt->seq_len;
    m->input_tokens = true;
    m->label_cols = gpt->seq_len;
    /* under SP a stage boundary carries the rank's positions only */
    m->boundary_cols = gpt->seq_len / (m->mesh->cp > 1 ? m->mesh->cp : 1) / (m->mesh->sp ? tp : 1) * c->hidden;
    int moe = 0;   /* an MoE block: a router and 4 tensors an expert for the MLP's 4 */
    for (int l = m->layer_begin; l < m->layer_end; l++)   /* and the bias, and the shared experts' 4 */
        moe += ptdp_gpt_block_is_moe(c, l) ? 2 + 4 * gpt->moe_experts - 4 + (gpt->moe_shared_experts > 0 ? 4 : 0)
                                           : 0;
    int rc = ptdp_model_reserve_params(dev, m, 12 * nb + 5 + moe);
    if (rc == 0)
        rc = lay_out(dev, m, g);
    if (rc == 0 && (m->first_stage || m->last_stage))
        rc = load_corpus(dev, m, g);
    return rc;
}

ptdp_gpt *ptdp_gpt_of(ptdp_model *m)
{
    return m != NULL && m->ops == &ptdp_gpt_ops ? m->impl : NULL;
}

static int gpt_positions(const ptdp_model_config *c)
{
    return ptdp_gpt(c)->seq_len;
}

static int gpt_heads(const ptdp_model_config *c)
{
    return ptdp_gpt(c)->heads;
}

/* ------------------------------------------------- sampling (sample.h) */

/*   vocab         V, the real tokens (V_pad's extra rows never drawn)
 *   without_data  the data source: the zeros given; V_pad is in the
 *                 checkpoint's metadata, so --vocab-multiple (not there)
 *                 may be anything: 1
 *   logits        the last stage's rows x V_pad/tp, as the head made them
 */

static int gpt_vocab(const ptdp_model_config *c)
{
    return ptdp_gpt(c)->vocab;
}

static void gpt_without_data(ptdp_model_config *c, const unsigned char *zeros, size_t len)
{
    ptdp_gpt_settings *g = ptdp_gpt(c);
    if (g->vocab_multiple < 1)   /* a checkpoint's: V_pad is its metadata's vocab_padded */
        g->vocab_multiple = 1;
    g->corpus = zeros;
    g->corpus_len = len;
}

static ptdp_tensor gpt_logits(const ptdp_acts *acts)
{
    return ((const ptdp_gpt_saved *)acts->saved)->logits;
}

static const ptdp_model_sampling gpt_sampling = {
    .vocab = gpt_vocab,
    .without_data = gpt_without_data,
    .logits = gpt_logits,
};

extern const ptdp_model_plan ptdp_gpt_plan;   /* gpt_plan.c */

const ptdp_model_ops ptdp_gpt_ops = {
    .name = "gpt",
    .caps = { .title = "the GPT", .sequences = true, .attention = true, .sequence_parallel = true,
              .context_parallel = true, .token_slices = true, .plannable = true },
    .positions = gpt_positions,
    .heads = gpt_heads,
    .check = gpt_check,
    .check_run = gpt_check_run,
    .publish = ptdp_gpt_moe_publish,
    .count = ptdp_gpt_moe_count,
    .after_step = ptdp_gpt_moe_after_step,
    .list_params = gpt_list_params,
    .metadata = gpt_metadata,
    .from_metadata = gpt_from_metadata,
    .from_metadata_real = gpt_from_metadata_real,
    .settings = gpt_settings,
    .init = gpt_init,
    .free = gpt_free,
    .fill_batch = ptdp_gpt_fill_batch,
    .forward = ptdp_gpt_forward,
    .backward = ptdp_gpt_backward,
    .acts_free = ptdp_gpt_acts_free,
    .groups = PTDP_GROUP_BIT(PTDP_GROUP_EMB) |   /* the tied embedding's two copies */
              PTDP_GROUP_BIT(PTDP_GROUP_EP) | PTDP_GROUP_BIT(PTDP_GROUP_EDP) |   /* --ep: the experts' */
              PTDP_GROUP_BIT(PTDP_GROUP_ETP) | PTDP_GROUP_BIT(PTDP_GROUP_FOLD),   /* --etp: folding's */
    .backward_input = ptdp_gpt_backward_input,
    .plan = &ptdp_gpt_plan,
    .sampling = &gpt_sampling,
};
