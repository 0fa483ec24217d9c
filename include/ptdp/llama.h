/*
 * llama.h — a Llama-family decoder (Meta's llama3 `llama/model.py`) behind
 * the model interface: RMSNorm, rotary positions, SwiGLU, grouped-query
 * attention, no biases, an untied head, under Meta's names and shapes.
 *
 *   tokens ─► h = tok_embeddings[token]                           (stage 0)
 *             for each layer i:                                   (its stage)
 *                 n1 = RMSNorm(h) ⊙ attention_norm
 *                 h  = h + wo attn(rope(wq n1), rope(wk n1), wv n1)
 *                 n2 = RMSNorm(h) ⊙ ffn_norm
 *                 h  = h + w2 (silu(w1 n2) ⊙ w3 n2)
 *             logits = output(RMSNorm(h) ⊙ norm)                   (last stage)
 *             loss   = mean over B T positions of cross-entropy(logits, next token)
 *
 *   RMSNorm(x) = x / sqrt(mean(x²) + eps)              --norm-eps (1e-5)
 *   rope: each head's pairs (2i, 2i+1) at position p
 *         rotated by the angle p theta^(-2i/d)         --rope-theta (500000)
 *   attn: causal, scale 1/sqrt(d); query head h reads kv head h / (H/K)
 *
 * Shapes: C = hidden, H = heads, K = kv_heads (divides H), d = C / H
 * (even: rotary pairs), F = ffn, V = vocab, T = seq_len, L = layers.
 *
 *   tok_embeddings.weight                  [V, C]
 *   layers.i.attention_norm.weight         [C]
 *   layers.i.attention.wq.weight           [H d, C]
 *   layers.i.attention.wk.weight           [K d, C]
 *   layers.i.attention.wv.weight           [K d, C]
 *   layers.i.attention.wo.weight           [C, H d]
 *   layers.i.ffn_norm.weight               [C]
 *   layers.i.feed_forward.w1.weight        [F, C]
 *   layers.i.feed_forward.w3.weight        [F, C]
 *   layers.i.feed_forward.w2.weight        [C, F]
 *   norm.weight                            [C]
 *   output.weight                          [V, C]   (untied)
 *
 * A mixture of experts (--moe-experts E, moe.h: the same flags, router,
 * capacity and balance loss as the GPT's) puts in every --moe-every'th
 * block, in place of the feed-forward, E SwiGLU experts of width F_e
 * (--moe-ffn, default F) and a router, under the names of Mistral's
 * reference MoeLayer (mistral-src, `feed_forward.experts` and
 * `feed_forward.gate`; llama_moe.c):
 *
 *   layers.i.feed_forward.experts.e.w1.weight    [F_e, C]
 *   layers.i.feed_forward.experts.e.w2.weight    [C, F_e]
 *   layers.i.feed_forward.experts.e.w3.weight    [F_e, C]
 *   layers.i.feed_forward.gate.weight            [E, C]     the router
 *
 *   h = h + sum_j g_j w2_e (silu(w1_e n2) ⊙ w3_e n2)   e = the token's top-k
 *
 * F is --ffn as given, or Meta's ModelArgs rule from C:
 *   F = m ceil(int(2 (4 C) / 3) / m)        m = --ffn-multiple (256, Meta's multiple_of)
 *
 * The vocabulary is not padded: a checkpoint holds Meta's [V, C] exactly
 * (so TP's vocab-parallel embedding and head need tp to divide V).
 */
#ifndef PTDP_LLAMA_H
#define PTDP_LLAMA_H

#include <stddef.h>

#include "model.h"
#include "moe.h"

extern const ptdp_model_ops ptdp_llama_ops;

/* The llama's own settings, in its config's `own` block (model.h). */
typedef struct {
    int heads;              /* H query heads; head size hidden/H    --heads    */
    int kv_heads;           /* K key/value heads, dividing H; 0: H  --kv-heads */
    int seq_len;            /* T                                     --seq-len  */
    int vocab;              /* V: tokens 0..V-1                      --vocab    */
    int ffn_multiple;       /* Meta's multiple_of, for F from C      --ffn-multiple */
    int line;               /* a sample starts at a multiple of this (the
                               built-in sums' line); 0: anywhere            */
    double norm_eps;        /* RMSNorm's eps                         --norm-eps */
    double rope_theta;      /* rotary base theta                     --rope-theta */
    const unsigned char *corpus;   /* the text, one token per byte; NULL:
                                      the plain built-in sums (gpt.h)     */
    size_t corpus_len;
    ptdp_moe_settings moe;  /* a mixture of experts (moe.h); experts 0:
                               every block dense          --moe-experts … */
} ptdp_llama_settings;

_Static_assert(sizeof(ptdp_llama_settings) <= PTDP_MODEL_OWN_MAX,
               "the llama's settings fit in ptdp_model_config.own");

static inline ptdp_llama_settings *ptdp_llama_settings_of(ptdp_model_config *c)
{
    return (ptdp_llama_settings *)(void *)c->own;
}
static inline const ptdp_llama_settings *ptdp_llama_settings_of_const(const ptdp_model_config *c)
{
    return (const ptdp_llama_settings *)(const void *)c->own;
}
#define ptdp_llama(c) _Generic((c), const ptdp_model_config *: ptdp_llama_settings_of_const, \
                                    default: ptdp_llama_settings_of)(c)
/* Where a setting sits in a whole config (cli/model_flags.h). */
#define PTDP_LLAMA_OWN(field) (offsetof(ptdp_model_config, own) + offsetof(ptdp_llama_settings, field))

/* Everything a llama's config says, for designated initialisers:
 * PTDP_LLAMA_CONFIG(.hidden = 32, .heads = 4, .kv_heads = 2, …); ops is
 * always &ptdp_llama_ops, and unset eps, theta and multiple take Meta's
 * defaults. */
typedef struct {
    int hidden, ffn, layers;
    int heads, kv_heads, seq_len, vocab, ffn_multiple, line;
    double norm_eps, rope_theta;
    const unsigned char *corpus;
    size_t corpus_len;
    ptdp_moe_settings moe;  /* experts 0: dense; every and top_k 0 take
                               the flags' defaults (moe.h), the rest as given */
} ptdp_llama_fields;

#define PTDP_LLAMA_NORM_EPS 1e-5
#define PTDP_LLAMA_ROPE_THETA 500000.0
#define PTDP_LLAMA_FFN_MULTIPLE 256

ptdp_model_config ptdp_llama_config(ptdp_llama_fields s);
#define PTDP_LLAMA_CONFIG(...) ptdp_llama_config((ptdp_llama_fields){ __VA_ARGS__ })

/* The defaults of --model llama: 2 layers, hidden 64, 4 heads, 2 kv heads,
 * F by Meta's rule with multiple 32 (192), seq-len 32; dense (the MoE
 * flags' defaults, moe.h, for when --moe-experts is given). */
ptdp_model_config ptdp_llama_default_config(void);

/* Meta's rule: F = m ceil(int(2 (4 C) / 3) / m). */
int ptdp_llama_meta_ffn(int hidden, int multiple);

/* K: kv_heads, or heads when it is 0. */
int ptdp_llama_kv_heads(const ptdp_model_config *c);

#endif
