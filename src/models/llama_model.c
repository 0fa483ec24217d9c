/*
 * llama_model.c — the llama as a model: its shapes and their checks, its
 * parameters on one stage and shard under Meta's names, its checkpoint
 * metadata, its data, what sampling needs of it, and the table the rest
 * of ptdp calls (model.h).
 *
 *   parameter (Meta's name)                 whole        TP split            decay
 *   tok_embeddings.weight                   [V, C]       rows (vocab)        yes
 *   layers.i.attention_norm.weight          [C]          replicated          no
 *   layers.i.attention.wq.weight            [H d, C]     rows: query heads   yes
 *   layers.i.attention.wk.weight            [K d, C]     rows: kv heads      yes
 *   layers.i.attention.wv.weight            [K d, C]     rows: kv heads      yes
 *   layers.i.attention.wo.weight            [C, H d]     columns (heads)     yes
 *   layers.i.ffn_norm.weight                [C]          replicated          no
 *   layers.i.feed_forward.w1.weight         [F, C]       rows                yes
 *   layers.i.feed_forward.w3.weight         [F, C]       rows (w1's split)   yes
 *   layers.i.feed_forward.w2.weight         [C, F]       columns             yes
 *   norm.weight                             [C]          replicated          no
 *   output.weight                           [V, C]       rows (vocab)        yes
 *
 *   rank r of tp (tp divides K):   wq rows  r H d/tp ..      (its H/tp query heads)
 *                                  wk, wv rows r K d/tp ..   (their K/tp kv heads:
 *                                  query head h reads h / (H/K), on the same rank)
 *   tp > K (K divides tp):         wk, wv rows of kv head r / (tp/K), the one its
 *                                  query heads read: a copy on each of tp/K ranks,
 *                                  whose gradients (each from its own query heads)
 *                                  are summed over those ranks — declared by the
 *                                  parameter (model.h: also TP_SHARE, mesh.h)
 *
 *     H 8, K 2, tp 4:  rank   0      1      2      3
 *                      q      0 1    2 3    4 5    6 7
 *                      kv     0      0      1      1      sums {0 1} {2 3}
 *
 * Meta's reference code loads weights and never initialises them; here,
 * as GPT-2's and most Llama training code's: N(0, 0.02^2) for matrices and
 * the embedding, wo and w2 N(0, (0.02 / sqrt(2 L))^2) (each block adds two
 * of them to the residual stream), the norms' weights 1.  No weight decay
 * on the norms.  Each block is one unit (model.h), and so are the
 * embedding and the head with its norm.
 */
#include "ptdp/llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/cp.h"
#include "ptdp/error.h"
#include "parallel/fp8_linear_impl.h"
#include "ptdp/mesh.h"
#include "ptdp/model_plan.h"
#include "models/gpt_table.h"
#include "models/llama_pass.h"
#include "parallel/moe_impl.h"

#define INIT_STD 0.02

int ptdp_llama_meta_ffn(int hidden, int multiple)
{
    const long inner = 2L * (4L * hidden) / 3;   /* int(2 * hidden_dim / 3), hidden_dim = 4 C */
    return (int)(multiple * ((inner + multiple - 1) / multiple));
}

int ptdp_llama_kv_heads(const ptdp_model_config *c)
{
    return ptdp_llama(c)->kv_heads > 0 ? ptdp_llama(c)->kv_heads : ptdp_llama(c)->heads;
}

ptdp_model_config ptdp_llama_config(ptdp_llama_fields s)
{
    ptdp_model_config c = { .ops = &ptdp_llama_ops, .hidden = s.hidden, .layers = s.layers };
    const int multiple = s.ffn_multiple > 0 ? s.ffn_multiple : PTDP_LLAMA_FFN_MULTIPLE;
    c.ffn = s.ffn > 0 ? s.ffn : ptdp_llama_meta_ffn(s.hidden, multiple);
    *ptdp_llama(&c) = (ptdp_llama_settings){
        .heads = s.heads, .kv_heads = s.kv_heads, .seq_len = s.seq_len, .vocab = s.vocab, .ffn_multiple = multiple,
        .line = s.line, .norm_eps = s.norm_eps > 0 ? s.norm_eps : PTDP_LLAMA_NORM_EPS,
        .rope_theta = s.rope_theta > 0 ? s.rope_theta : PTDP_LLAMA_ROPE_THETA, .corpus = s.corpus,
        .corpus_len = s.corpus_len, .moe = s.moe,
    };
    ptdp_moe_settings *moe = &ptdp_llama(&c)->moe;
    moe->every = moe->every > 0 ? moe->every : PTDP_MOE_DEFAULTS.every;
    moe->top_k = moe->top_k > 0 ? moe->top_k : PTDP_MOE_DEFAULTS.top_k;
    return c;
}

ptdp_model_config ptdp_llama_default_config(void)
{
    return PTDP_LLAMA_CONFIG(.hidden = 64, .layers = 2, .heads = 4, .kv_heads = 2, .seq_len = 32,
                             .moe = PTDP_MOE_DEFAULTS);
}

/* ------------------------------------------------- the whole model */

/* The shapes alone (no mesh). */
static int shape_check(const ptdp_model_config *m, char *msg, size_t n)
{
    const ptdp_llama_settings *s = ptdp_llama(m);
    const int H = s->heads, K = ptdp_llama_kv_heads(m);
#define BAD(...) do { snprintf(msg, n, __VA_ARGS__); return PTDP_EINVAL; } while (0)
    if (m->hidden < 1) BAD("--hidden %d: must be at least 1", m->hidden);
    if (H < 1) BAD("--heads %d: must be at least 1", H);
    if (m->hidden % H != 0) BAD("--heads %d must divide --hidden %d (each head d = hidden / heads wide)", H, m->hidden);
    if ((m->hidden / H) % 2 != 0)
        BAD("--heads %d: the head dimension --hidden %d / --heads %d = %d is odd, and rotary positions rotate "
            "pairs of it (an even hidden / heads)", H, m->hidden, H, m->hidden / H);
    if (s->kv_heads < 0) BAD("--kv-heads %d: must be at least 1 (default: --heads)", s->kv_heads);
    if (H % K != 0)
        BAD("--kv-heads %d must divide --heads %d (query head h reads kv head h / (heads / kv-heads))", K, H);
    if (m->ffn < 1) BAD("--ffn %d: must be at least 1", m->ffn);
    if (m->layers < 1) BAD("--layers %d: must be at least 1", m->layers);
    if (s->seq_len < 2) BAD("--seq-len %d: must be at least 2 (a position and the token after it)", s->seq_len);
    if (s->vocab < 1) BAD("--vocab %d: must be at least 1", s->vocab);
    if (!(s->norm_eps > 0) || !isfinite(s->norm_eps)) BAD("--norm-eps %g: must be a finite number above 0", s->norm_eps);
    if (!(s->rope_theta > 0) || !isfinite(s->rope_theta))
        BAD("--rope-theta %g: must be a finite number above 0 (the rotary base; Llama 3's is 500000)", s->rope_theta);
    if (s->corpus != NULL && s->corpus_len < (size_t)s->seq_len + 1)
        BAD("the data has %zu tokens: one sequence of --seq-len %d needs %d (a shorter --seq-len, or more data)",
            s->corpus_len, s->seq_len, s->seq_len + 1);
#undef BAD
    return PTDP_OK;
}

static int llama_check(const ptdp_model_config *m, int tp, int pp, char *msg, size_t n)
{
    (void)pp;
    if (shape_check(m, msg, n) != 0 ||
        ptdp_moe_check(&ptdp_llama(m)->moe, m->ffn, m->layers, tp, "each expert's SwiGLU is split over the TP group "
                       "like the dense one (w1 and w3 by rows, w2 by columns)", msg, n) != 0)
        return PTDP_EINVAL;
    const int K = ptdp_llama_kv_heads(m), V = ptdp_llama(m)->vocab;
    if (tp <= 1)
        return PTDP_OK;
    if (K % tp != 0 && tp % K == 0 && ptdp_llama(m)->heads % tp != 0) {
        snprintf(msg, n, "--tp %d must divide --heads %d: each rank holds whole query heads (and, tp being more "
                 "than --kv-heads %d, a copy of the one kv head they read)", tp, ptdp_llama(m)->heads, K);
        return PTDP_EINVAL;
    }
    if (K % tp != 0 && tp % K != 0) {
        snprintf(msg, n, "--tp %d must divide --kv-heads %d (each rank whole kv heads) or be a multiple of it",
                 tp, K);
        return PTDP_EINVAL;
    }
    if (m->ffn % tp != 0 || V % tp != 0) {
        snprintf(msg, n, "--tp %d must divide --ffn %d (w1, w3 by rows, w2 by columns) and --vocab %d (the "
                 "vocab-parallel embedding and head; the llama's vocabulary is not padded)", tp, m->ffn, V);
        return PTDP_EINVAL;
    }
    return PTDP_OK;
}

/* --fp8's tiles against the TP split of each weight (the head keeps its
 * precision); and no FP8 for a kv head's copies, whose TP ranks each hold
 * part of its output gradient (summed over the copies after the backward):
 * one device quantizes the whole. */
static int llama_fp8_check(const ptdp_model_config *c, const ptdp_model_run *r, char *msg, size_t n)
{
    const ptdp_llama_settings *s = ptdp_llama(c);
    const int C = c->hidden, H = s->heads, K = ptdp_llama_kv_heads(c), d = C / H, F = c->ffn;
    const int Fe = ptdp_moe_ffn(&s->moe, c->ffn);
    if (r->fp8 != NULL && r->tp > K) {
        snprintf(msg, n, "--fp8 %s with --tp %d > --kv-heads %d: each TP rank holds a copy of a kv head and only its "
                 "own query heads' part of that head's gradient, which FP8 would quantize apart from the rest: use "
                 "--tp %d or less", r->fp8->name, r->tp, K, K);
        return PTDP_EINVAL;
    }
    const ptdp_fp8_weight w[] = {
        { "attention.wq.weight", H * d, C, PTDP_SHARD_ROWS, 1 }, { "attention.wk.weight", K * d, C, PTDP_SHARD_ROWS, 1 },
        { "attention.wo.weight", C, H * d, PTDP_SHARD_COLS, 1 }, { "feed_forward.w1.weight", F, C, PTDP_SHARD_ROWS, 1 },
        { "feed_forward.w2.weight", C, F, PTDP_SHARD_COLS, 1 },
        { "feed_forward.experts.w1.weight", Fe, C, PTDP_SHARD_ROWS, 1 },
        { "feed_forward.experts.w2.weight", C, Fe, PTDP_SHARD_COLS, 1 },
        { "feed_forward.shared_experts.w1.weight", s->moe.shared * Fe, C, PTDP_SHARD_ROWS, 1 },
        { "feed_forward.shared_experts.w2.weight", C, s->moe.shared * Fe, PTDP_SHARD_COLS, 1 },
    };
    return ptdp_fp8_split_check_all(r->fp8, w, s->moe.experts == 0 ? 5 : s->moe.shared > 0 ? 9 : 7, r->tp, msg, n);
}

/* What the llama runs on beyond its caps: experts as any model's
 * (moe_settings.c), spread by --ep only when ZeRO keeps the parameters
 * whole (ZeRO-3 gathers a unit over DP, and an expert is replicated over
 * the expert-DP group alone); CP by the ring, or by Ulysses as far as the
 * kv heads allow. */
static int llama_check_run(const ptdp_model_config *c, const ptdp_model_run *r, char *msg, size_t n)
{
    const ptdp_moe_settings *moe = &ptdp_llama(c)->moe;
    if (ptdp_moe_check_run(moe, r, "this llama model is dense", msg, n) != 0)
        return PTDP_EINVAL;
    if (moe->experts > 0 && r->ep > 1 && r->shards_params) {
        snprintf(msg, n, "--moe-experts %d with --ep %d and --zero %d: ZeRO-3 gathers each block over the "
                 "data-parallel group, and an expert is replicated over its expert-DP group alone: use --zero 1 or "
                 "2 with --ep, or --zero 3 without it", moe->experts, r->ep, r->zero);
        return PTDP_EINVAL;
    }
    /* Ulysses (ulysses.h) gives each CP rank whole heads of q AND of k, v:
     * its degree is capped by the kv heads a TP rank has (one copy when
     * --tp is a multiple of --kv-heads, which no CP rank can split). */
    const int K = ptdp_llama_kv_heads(c), kl = K >= r->tp ? K / r->tp : 1;
    if (r->cp_a2a && kl % r->cp != 0) {
        snprintf(msg, n, "--cp-algo a2a with --cp %d: Ulysses gives each CP rank whole kv heads, and each TP rank "
                 "has %d (--kv-heads %d / --tp %d%s), which --cp %d does not divide: Ulysses' degree is capped by "
                 "the kv heads — use --cp-algo ring, a --cp dividing %d, or more --kv-heads", r->cp, kl, K, r->tp,
                 K >= r->tp ? "" : ", one shared copy", r->cp, kl);
        return PTDP_EINVAL;
    }
    return llama_fp8_check(c, r, msg, n);
}

/* The whole model's tensors in Meta's state_dict order. */
static int llama_list_params(const ptdp_model_config *c, ptdp_param_info *out)
{
    const int C = c->hidden, d = C / ptdp_llama(c)->heads, H = ptdp_llama(c)->heads, K = ptdp_llama_kv_heads(c);
    const int F = c->ffn, V = ptdp_llama(c)->vocab;
    int n = 0;
#define ADD(r, cc, bias, ...) do { if (out) { snprintf(out[n].name, sizeof out[n].name, __VA_ARGS__); \
        out[n].rows = (r); out[n].cols = (cc); out[n].is_bias = (bias); } n++; } while (0)
    ADD(V, C, false, "tok_embeddings.weight");
    for (int l = 0; l < c->layers; l++) {
        ADD(H * d, C, false, "layers.%d.attention.wq.weight", l);
        ADD(K * d, C, false, "layers.%d.attention.wk.weight", l);
        ADD(K * d, C, false, "layers.%d.attention.wv.weight", l);
        ADD(C, H * d, false, "layers.%d.attention.wo.weight", l);
        if (ptdp_moe_block_is_moe(&ptdp_llama(c)->moe, l)) {   /* the experts and the gate (llama_moe.c) */
            n += ptdp_llama_moe_list_params(c, l, out != NULL ? out + n : NULL);
        } else {
            ADD(F, C, false, "layers.%d.feed_forward.w1.weight", l);
            ADD(C, F, false, "layers.%d.feed_forward.w2.weight", l);
            ADD(F, C, false, "layers.%d.feed_forward.w3.weight", l);
        }
        ADD(1, C, true, "layers.%d.attention_norm.weight", l);
        ADD(1, C, true, "layers.%d.ffn_norm.weight", l);
    }
    ADD(1, C, true, "norm.weight");
    ADD(V, C, false, "output.weight");
#undef ADD
    return n;
}

/* Checkpoint metadata: Meta's ModelArgs names where it has them (its
 * rope_theta and norm_eps too: a checkpoint turned by another theta is
 * another model); then, with experts, the mixture's shapes under the GPT's
 * keys (a dense file has none). */
static const struct { const char *key, *flag; } meta_keys[] = {
    { "dim", "--hidden" }, { "n_layers", "--layers" }, { "n_heads", "--heads" }, { "n_kv_heads", "--kv-heads" },
    { "vocab_size", "--vocab" }, { "ffn_dim", "--ffn" }, { "max_seq_len", "--seq-len" },
    { "moe_experts", "--moe-experts" }, { "moe_every", "--moe-every" }, { "moe_ffn", "--moe-ffn" },
    { "moe_top_k", "--moe-top-k" },
};
#define META_DENSE 7
static const struct { const char *key, *flag; } meta_reals[] = {
    { "rope_theta", "--rope-theta" }, { "norm_eps", "--norm-eps" },
};

static int *meta_field(ptdp_model_config *c, int k)
{
    ptdp_llama_settings *s = ptdp_llama(c);
    int *f[] = { &c->hidden, &c->layers, &s->heads, &s->kv_heads, &s->vocab, &c->ffn, &s->seq_len,
                 &s->moe.experts, &s->moe.every, &s->moe.ffn, &s->moe.top_k };
    return f[k];
}

static double *meta_real_field(ptdp_model_config *c, int k)
{
    return k == 0 ? &ptdp_llama(c)->rope_theta : &ptdp_llama(c)->norm_eps;
}

static int llama_metadata(const ptdp_model_config *c, const char **keys, char (*values)[32], const char **flags,
                          int max)
{
    ptdp_model_config whole = *c;
    ptdp_llama(&whole)->kv_heads = ptdp_llama_kv_heads(c);
    ptdp_llama(&whole)->moe.ffn = ptdp_moe_ffn(&ptdp_llama(c)->moe, c->ffn);
    const int keys_n = ptdp_llama(c)->moe.experts > 0 ? (int)(sizeof meta_keys / sizeof meta_keys[0]) : META_DENSE;
    int n = 0;
    for (int k = 0; k < keys_n && n < max; k++) {
        keys[n] = meta_keys[k].key;
        flags[n] = meta_keys[k].flag;
        snprintf(values[n++], 32, "%d", *meta_field(&whole, k));
        for (int r = 0; k == META_DENSE - 1 && r < 2 && n < max; r++) {
            keys[n] = meta_reals[r].key;
            flags[n] = meta_reals[r].flag;
            snprintf(values[n++], 32, PTDP_META_REAL_FMT, *meta_real_field(&whole, r));
        }
    }
    return n + ptdp_moe_shape_metadata(&ptdp_llama(c)->moe, keys + n, values + n, flags + n, max - n);
}

static int llama_from_metadata(ptdp_model_config *c, const char *key, long long value)
{
    if (strcmp(key, "moe_score") == 0 && value >= 0 && value <= 0x7fffffff) {   /* sigmoid files alone */
        ptdp_llama(c)->moe.score = (int)value;
        return PTDP_OK;
    }
    if (strcmp(key, "moe_dense_first") == 0 && value >= 0 && value <= 0x7fffffff) {   /* K > 0 files alone */
        ptdp_llama(c)->moe.dense_first = (int)value;
        return PTDP_OK;
    }
    if (strcmp(key, "moe_shared_experts") == 0 && value >= 0 && value <= 0x7fffffff) {   /* S > 0 files alone */
        ptdp_llama(c)->moe.shared = (int)value;
        return PTDP_OK;
    }
    for (int k = 0; k < (int)(sizeof meta_keys / sizeof meta_keys[0]); k++)
        if (strcmp(key, meta_keys[k].key) == 0 && value >= 0 && value <= 0x7fffffff) {
            *meta_field(c, k) = (int)value;
            return PTDP_OK;
        }
    return PTDP_EINVAL;
}

static int llama_from_metadata_real(ptdp_model_config *c, const char *key, double value)
{
    for (int r = 0; r < 2; r++)
        if (strcmp(key, meta_reals[r].key) == 0 && value > 0) {   /* θ, ε > 0 (the flags' rule) */
            *meta_real_field(c, r) = value;
            return PTDP_OK;
        }
    return ptdp_moe_from_metadata_real(&ptdp_llama(c)->moe, key, value);   /* the mixture's settings */
}

/* The mixture's settings beyond its shapes, as every model's (moe_settings.c). */
static int llama_settings(const ptdp_model_config *c, ptdp_meta_setting *out, int max)
{
    return ptdp_moe_settings_metadata(&ptdp_llama(c)->moe, out, max);
}

/* ------------------------------------------------- one stage and shard */

#define ADD(...) ptdp_model_add_param(dev, m, __VA_ARGS__)
#define LIN ptdp_model_linear_weight   /* a linear layer's W (model.h) */
#define W(std) PTDP_INIT_NORMAL, (std)
#define ONE PTDP_INIT_ONES, 0.0

/* Block l in backward order: the feed-forward, its norm, wo, wv, wk, wq,
 * the attention's norm. */
static int block_lay_out(ptdp_device *dev, ptdp_model *m, ptdp_llama_block *b, int l)
{
    const ptdp_llama *p = m->impl;
    const int C = m->cfg.hidden, F = m->cfg.ffn, t = m->mesh->tp_rank, d = p->hd;
    const int H = ptdp_llama(&m->cfg)->heads, K = ptdp_llama_kv_heads(&m->cfg);
    const int Fl = p->ffn_local, Ql = p->heads_local * d, KVl = p->kv_local * d;
    /* this rank's kv heads: K/tp of them from t K/tp; or, tp > K, a copy of
     * the one its query heads read, kv head t / (tp/K) */
    const int kv0 = (K >= m->mesh->tp ? t * p->kv_local : t / (m->mesh->tp / K)) * d;
    const double proj_std = INIT_STD / sqrt(2.0 * m->cfg.layers);
    char name[PTDP_NAME_MAX];
#define NAME(what) (snprintf(name, sizeof name, "layers.%d.%s", l, what), name)
    ptdp_model_begin_unit(m);
    if (ptdp_moe_block_is_moe(&ptdp_llama(&m->cfg)->moe, l)) {   /* the experts and the gate (llama_moe.c) */
        if (ptdp_llama_moe_lay_out(dev, m, b, l) != 0)
            return PTDP_ENOMEM;
    } else {
        b->w2 = LIN(ADD(NAME("feed_forward.w2.weight"), C, F, false, PTDP_SHARD_COLS, 0, t * Fl, C, Fl, W(proj_std)));
        b->w3 = LIN(ADD(NAME("feed_forward.w3.weight"), F, C, false, PTDP_SHARD_ROWS, t * Fl, 0, Fl, C, W(INIT_STD)));
        b->w1 = LIN(ADD(NAME("feed_forward.w1.weight"), F, C, false, PTDP_SHARD_ROWS, t * Fl, 0, Fl, C, W(INIT_STD)));
    }
    b->ffn_norm = ADD(NAME("ffn_norm.weight"), 1, C, true, PTDP_SHARD_NONE, 0, 0, 1, C, ONE);
    b->wo = LIN(ADD(NAME("attention.wo.weight"), C, H * d, false, PTDP_SHARD_COLS, 0, t * Ql, C, Ql, W(proj_std)));
    b->wv = LIN(ADD(NAME("attention.wv.weight"), K * d, C, false, PTDP_SHARD_ROWS, kv0, 0, KVl, C, W(INIT_STD)));
    b->wk = LIN(ADD(NAME("attention.wk.weight"), K * d, C, false, PTDP_SHARD_ROWS, kv0, 0, KVl, C, W(INIT_STD)));
    b->wq = LIN(ADD(NAME("attention.wq.weight"), H * d, C, false, PTDP_SHARD_ROWS, t * Ql, 0, Ql, C, W(INIT_STD)));
    b->attention_norm = ADD(NAME("attention_norm.weight"), 1, C, true, PTDP_SHARD_NONE, 0, 0, 1, C, ONE);
#undef NAME
    if (b->attention_norm == NULL)
        return PTDP_ENOMEM;
    if (K < m->mesh->tp)   /* each copy saw its own query heads: the sum over the ranks sharing it */
        b->wk->sum.also = b->wv->sum.also = PTDP_GROUP_BIT(PTDP_GROUP_TP_SHARE);
    return PTDP_OK;
}

/* This stage's parameters in the order the backward makes their
 * gradients: the head with its norm, each block last to first, the
 * embedding. */
static int lay_out(ptdp_device *dev, ptdp_model *m, ptdp_llama *p)
{
    const int C = m->cfg.hidden, V = ptdp_llama(&m->cfg)->vocab, t = m->mesh->tp_rank, Vl = p->vocab_local;
    if (m->last_stage) {
        ptdp_model_begin_unit(m);
        p->output = ADD("output.weight", V, C, false, PTDP_SHARD_ROWS, t * Vl, 0, Vl, C, W(INIT_STD));
        if (p->output != NULL)
            p->output->keeps_precision = true;   /* --fp8 leaves the head in float */
        p->norm = ADD("norm.weight", 1, C, true, PTDP_SHARD_NONE, 0, 0, 1, C, ONE);
    }
    for (int l = m->layer_end - 1; l >= m->layer_begin; l--)
        if (block_lay_out(dev, m, &p->blocks[l - m->layer_begin], l) != 0)
            return PTDP_ENOMEM;
    if (m->first_stage) {
        ptdp_model_begin_unit(m);
        p->tok_embeddings = ADD("tok_embeddings.weight", V, C, false, PTDP_SHARD_ROWS, t * Vl, 0, Vl, C,
                                W(INIT_STD));
    }
    if (ptdp_aborted(dev))
        return PTDP_EABORTED;
    /* the norms: no decay; under SP each saw this rank's positions only,
     * so its gradient is the sum over TP (sp.h) */
    const ptdp_grad_sum over_tp = { .replicas = PTDP_GROUP_DP, .also = PTDP_GROUP_BIT(PTDP_GROUP_TP) };
    for (int i = 0; i < m->nparams; i++) {
        m->params[i].no_decay = m->params[i].is_bias;
        if (m->params[i].is_bias && m->mesh->sp)
            m->params[i].sum = over_tp;
    }
    return PTDP_OK;
}
#undef LIN
#undef ADD
#undef W
#undef ONE

static void llama_free(ptdp_device *dev, ptdp_model *m)
{
    ptdp_llama *p = m->impl;
    if (p == NULL)
        return;
    ptdp_free(dev, p->corpus_block);
    free(p->positions);
    for (int i = 0; p->blocks != NULL && i < m->layer_end - m->layer_begin; i++)
        free(p->blocks[i].experts), free(p->blocks[i].choices);
    free(p->blocks);
    free(p);
    m->impl = NULL;
}

static int llama_init(ptdp_device *dev, ptdp_model *m)
{
    const ptdp_model_config *c = &m->cfg;
    const ptdp_llama_settings *s = ptdp_llama(c);
    const int tp = m->mesh->tp, nb = m->layer_end - m->layer_begin;
    ptdp_llama *p = calloc(1, sizeof *p);
    if (p != NULL) {
        p->blocks = calloc((size_t)(nb > 0 ? nb : 1), sizeof *p->blocks);
        p->positions = malloc((size_t)s->seq_len * sizeof *p->positions);
    }
    m->impl = p;
    if (p == NULL || p->blocks == NULL || p->positions == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory describing the model", dev->rank);
    if (m->dropout > 0)
        return ptdp_fail(dev, PTDP_EINVAL, "--dropout %g: the llama model has no dropout (Meta's has none)",
                         m->dropout);
    /* row b T/cp + t is GLOBAL position first[t / len] + t % len (cp.h):
     * rotating a zigzag chunk by its local 0.. would be another model */
    const ptdp_cp_layout cpl = ptdp_cp_layout_of(s->seq_len, m->mesh->cp, m->mesh->cp_rank, m->mesh->cp_zigzag);
    for (int t = 0; t < s->seq_len / m->mesh->cp; t++)
        p->positions[t] = ptdp_cp_position(&cpl, t);
    p->hd = c->hidden / s->heads;
    p->heads_local = s->heads / tp;
    p->kv_local = ptdp_llama_kv_heads(c) >= tp ? ptdp_llama_kv_heads(c) / tp : 1;
    p->ffn_local = c->ffn / tp;
    p->vocab_local = s->vocab / tp;
    m->input_cols = s->seq_len;
    m->input_tokens = true;
    m->label_cols = s->seq_len;
    m->boundary_cols = s->seq_len / m->mesh->cp / (m->mesh->sp ? tp : 1) * c->hidden;   /* CP, SP: the rank's */
    /* with experts (a bias, shared ones): at most */
    int rc = ptdp_model_reserve_params(dev, m, nb * (9 + 3 * s->moe.experts + 2 + (s->moe.shared > 0 ? 3 : 0)) + 3);
    if (rc == 0)
        rc = lay_out(dev, m, p);
    if (rc == 0 && (m->first_stage || m->last_stage)) {
        ptdp_gpt_text t = { 0 };
        rc = ptdp_gpt_text_load(dev, m->seed, s->corpus, s->corpus_len, s->seq_len, s->vocab, &t);
        p->corpus_block = t.block;
        p->corpus = t.text;
        p->corpus_len = t.len;
    }
    return rc;
}

/* The GPT's windows of the text (gpt_data.c). */
static void llama_fill_batch(ptdp_model *m, ptdp_batch *b)
{
    const ptdp_llama *p = m->impl;
    ptdp_gpt_text_windows(p->corpus, p->corpus_len, ptdp_llama(&m->cfg)->seq_len, ptdp_llama(&m->cfg)->line,
                          m->seed, b);
}

static int llama_positions(const ptdp_model_config *c)
{
    return ptdp_llama(c)->seq_len;
}

/* TP sub-groups: with tp > K, the tp / K ranks that share a kv head. */
static int llama_tp_share(const ptdp_model_config *c, int tp)
{
    const int K = ptdp_llama_kv_heads(c);
    return tp > K && tp % K == 0 ? tp / K : 1;
}

static int llama_heads(const ptdp_model_config *c)
{
    return ptdp_llama(c)->heads;
}

/* ------------------------------------------------- sampling (sample.h) */

static int llama_vocab(const ptdp_model_config *c)
{
    return ptdp_llama(c)->vocab;
}

/* The checkpoint's metadata hold Meta's shapes (dim, n_heads, …), theta
 * and eps, but not multiple_of (F is there): 0 there, Meta's defaults
 * here (a config without a checkpoint gets all three). */
static void llama_without_data(ptdp_model_config *c, const unsigned char *zeros, size_t len)
{
    ptdp_llama_settings *s = ptdp_llama(c);
    if (!(s->norm_eps > 0))
        s->norm_eps = PTDP_LLAMA_NORM_EPS;
    if (!(s->rope_theta > 0))
        s->rope_theta = PTDP_LLAMA_ROPE_THETA;
    if (s->ffn_multiple < 1)
        s->ffn_multiple = PTDP_LLAMA_FFN_MULTIPLE;
    s->corpus = zeros;
    s->corpus_len = len;
}

/* The head's R x V/tp logits, as the last stage's forward left them. */
static ptdp_tensor llama_logits(const ptdp_acts *acts)
{
    return ((const ptdp_llama_saved *)acts->saved)->logits;
}

static const ptdp_model_sampling llama_sampling = {
    .vocab = llama_vocab,
    .without_data = llama_without_data,
    .logits = llama_logits,
};

extern const ptdp_model_plan ptdp_llama_plan;   /* llama_plan.c */

const ptdp_model_ops ptdp_llama_ops = {
    .name = "llama",
    .caps = { .title = "the llama model", .sequences = true, .attention = true, .sequence_parallel = true,
              .context_parallel = true, .plannable = true },
    .positions = llama_positions,
    .heads = llama_heads,
    .check = llama_check,
    .check_run = llama_check_run,
    .list_params = llama_list_params,
    .metadata = llama_metadata,
    .from_metadata = llama_from_metadata,
    .from_metadata_real = llama_from_metadata_real,
    .settings = llama_settings,
    .init = llama_init,
    .free = llama_free,
    .fill_batch = llama_fill_batch,
    .forward = ptdp_llama_forward,
    .backward = ptdp_llama_backward,
    .acts_free = ptdp_llama_acts_free,
    .backward_input = ptdp_llama_backward_input,
    .publish = ptdp_llama_moe_publish,
    .count = ptdp_llama_moe_count,
    .after_step = ptdp_llama_moe_after_step,
    .groups = PTDP_GROUP_BIT(PTDP_GROUP_TP_SHARE) |   /* kv heads' copies, tp > K */
              PTDP_GROUP_BIT(PTDP_GROUP_EP) | PTDP_GROUP_BIT(PTDP_GROUP_EDP) |   /* --ep: the experts' */
              PTDP_GROUP_BIT(PTDP_GROUP_ETP) | PTDP_GROUP_BIT(PTDP_GROUP_FOLD),   /* --etp: folding's */
    .tp_share = llama_tp_share,
    .sampling = &llama_sampling,
    .plan = &ptdp_llama_plan,
};
