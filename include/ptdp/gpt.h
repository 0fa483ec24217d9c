/*
 * gpt.h — a small GPT-2: a decoder-only transformer behind the model
 * interface, with nanoGPT's names, under every parallelism ptdp has.
 *
 *   tokens ─► x = wte[token] + wpe[position]                    (stage 0)
 *             for each block l (pre-LayerNorm):                  (its stage)
 *                 x = x + dropout(Attn(LN1(x)))     causal, nh heads
 *                 x = x + dropout(MLP(LN2(x)))      GELU, ffn wide
 *                 (or, with --moe-experts E, in every --moe-every'th
 *                 block: x = x + dropout(sum_j g_j expert_j(LN2(x))),
 *                 the token's top-k experts of E, gpt_moe.c)
 *             logits = LN_f(x) wte^T                the head, tied to wte
 *             loss   = mean over B T positions of cross-entropy(logits, next token)
 *                                                                (last stage)
 *
 * Shapes: C = hidden, nh = heads (head size hd = C / nh), F = ffn, T =
 * seq_len, L = layers; V tokens, padded as Megatron-LM pads them to V_pad,
 * the smallest multiple of vocab_multiple x tp that is >= V.  The padded
 * rows are ordinary rows of wte (initialised, trained, part of the
 * softmax) that no target ever names.
 *
 * Tensor parallelism, in Megatron-LM's words (tp.h):
 *   c_attn       column-parallel, split by HEADS: rank r owns the q, k and
 *                v rows of heads [r nh/tp, (r+1) nh/tp) — three slices of
 *                the checkpoint tensor (parts = 3, model.h)
 *   attention    local: a head needs only its own q, k and v
 *   attn c_proj  row-parallel: one all-reduce (g), the bias added once
 *   c_fc, c_proj the MLP block's column / row split
 *   wte          vocab-parallel: rank r owns V_pad/tp rows; the embedding
 *                is one all-reduce, the head the vocab-parallel
 *                cross-entropy over the same rows
 *   LayerNorms, wpe and the row-parallel biases: replicated.  Their
 *                gradients are made from tensors that are already the same
 *                on every TP rank (a replicated input, a gradient after
 *                f's all-reduce), so they need no reduction of their own.
 * So a block costs two all-reduces of B T C forward and two backward, plus
 * one for the embedding forward and one for the head's backward.
 *
 * Pipeline parallelism: stage 0 holds wte and wpe, the last stage ln_f and
 * the head.  With pp > 1 the last stage keeps its own copy of wte (equal at
 * init: the same counter-based draws) and after every backward the two
 * copies' gradients are summed by an all-reduce in the embedding group of
 * the pipeline's first and last stage (Megatron-LM's word-embedding
 * all-reduce, group "emb" in the report): both copies declare it
 * (model.h, ptdp_grad_sum), and the mesh builds the group (mesh.h).  Interleaved (v model chunks
 * per stage, model.h), wte is on stage 0's chunk 0 and its copy on stage
 * p-1's chunk v-1: the model's first and last chunks.
 */
#ifndef PTDP_GPT_H
#define PTDP_GPT_H

#include "act_bf16.h"
#include "model.h"
#include "moe.h"
#include "sample.h"

extern const ptdp_model_ops ptdp_gpt_ops;

/* The GPT's own settings, in its config's `own` block (model.h). */
typedef struct {
    int heads;              /* attention heads nh; head size hidden/nh --heads */
    int seq_len;            /* T, positions of a sequence          --seq-len */
    int vocab;              /* V: tokens are 0..V-1                --vocab   */
    int vocab_padded;       /* V_pad: rows of the embedding, a multiple of
                               vocab_multiple x tp; 0 = work it out         */
    int vocab_multiple;     /* --vocab-multiple (default 64)                */
    int line;               /* a sample starts at a multiple of this many
                               tokens (the built-in sums' line); 0: anywhere */
    const unsigned char *corpus;   /* the text, one token per byte; NULL:
                                      ptdp_gpt_plain_corpus (gpt_data.c)   */
    size_t corpus_len;
    /* A mixture of experts in place of some blocks' MLP (gpt_moe.c). */
    int moe_experts;        /* E experts; 0: every block dense   --moe-experts */
    int moe_every;          /* block l is MoE when (l+1) mod n = 0 --moe-every */
    int moe_ffn;            /* an expert's hidden size; 0: --ffn   --moe-ffn  */
    int moe_top_k;          /* experts a token chooses          --moe-top-k   */
    double moe_capacity;    /* slots per expert and sequence: ceil(c k T / E);
                               0: dropless          --moe-capacity-factor     */
    double moe_aux_loss;    /* the balance loss's weight alpha --moe-aux-loss */
    int moe_score;          /* 0 softmax, 1 sigmoid (moe_route.h) --moe-score */
    double moe_route_scale; /* sigmoid gates' lambda; 0 reads 1 --moe-route-scale */
    double moe_bias_update; /* the expert bias's step u    --moe-bias-update  */
    int moe_groups;         /* G groups of experts; 0 reads 1 --moe-groups     */
    int moe_group_top_k;    /* M of them a token may use; 0 reads 1
                                                       --moe-group-top-k     */
    int moe_dense_first;    /* blocks 0..K-1 stay dense  --moe-dense-first    */
    int moe_shared_experts; /* S shared experts, one MLP of S F_e
                                                     --moe-shared-experts     */
    double moe_z_loss;      /* the router z-loss's weight; 0: none --moe-z-loss */
} ptdp_gpt_settings;

_Static_assert(sizeof(ptdp_gpt_settings) <= PTDP_MODEL_OWN_MAX,
               "the GPT's settings fit in ptdp_model_config.own");

/* Read and write them: ptdp_gpt(&cfg)->heads; const in, const out. */
static inline ptdp_gpt_settings *ptdp_gpt_settings_of(ptdp_model_config *c)
{
    return (ptdp_gpt_settings *)(void *)c->own;
}
static inline const ptdp_gpt_settings *ptdp_gpt_settings_of_const(const ptdp_model_config *c)
{
    return (const ptdp_gpt_settings *)(const void *)c->own;
}
#define ptdp_gpt(c) _Generic((c), const ptdp_model_config *: ptdp_gpt_settings_of_const, \
                                  default: ptdp_gpt_settings_of)(c)
/* Where a setting sits in a whole config, for tables of flags that write
 * an int at an offset (cli/model_flags.h): PTDP_GPT_OWN(heads). */
#define PTDP_GPT_OWN(field) (offsetof(ptdp_model_config, own) + offsetof(ptdp_gpt_settings, field))

/* Everything a GPT's config says, in one struct for designated
 * initialisers: PTDP_GPT_CONFIG(.ops = &ptdp_gpt_ops, .hidden = 32,
 * .heads = 4, …) is that config (ops as given). */
typedef struct {
    const ptdp_model_ops *ops;
    int hidden, ffn, layers;
    int heads, seq_len, vocab, vocab_padded, vocab_multiple, line;
    const unsigned char *corpus;
    size_t corpus_len;
    int moe_experts, moe_every, moe_ffn, moe_top_k;
    double moe_capacity, moe_aux_loss;
    int moe_score;
    double moe_route_scale, moe_bias_update;
    int moe_groups, moe_group_top_k, moe_dense_first, moe_shared_experts;
    double moe_z_loss;
} ptdp_gpt_fields;

static inline ptdp_model_config ptdp_gpt_config(ptdp_gpt_fields s)
{
    ptdp_model_config c = { .ops = s.ops, .hidden = s.hidden, .ffn = s.ffn, .layers = s.layers };
    *ptdp_gpt(&c) = (ptdp_gpt_settings){ .heads = s.heads, .seq_len = s.seq_len, .vocab = s.vocab,
                                         .vocab_padded = s.vocab_padded, .vocab_multiple = s.vocab_multiple,
                                         .line = s.line, .corpus = s.corpus, .corpus_len = s.corpus_len,
                                         .moe_experts = s.moe_experts, .moe_every = s.moe_every,
                                         .moe_ffn = s.moe_ffn, .moe_top_k = s.moe_top_k,
                                         .moe_capacity = s.moe_capacity, .moe_aux_loss = s.moe_aux_loss,
                                         .moe_score = s.moe_score, .moe_route_scale = s.moe_route_scale,
                                         .moe_bias_update = s.moe_bias_update, .moe_groups = s.moe_groups,
                                         .moe_group_top_k = s.moe_group_top_k,
                                         .moe_dense_first = s.moe_dense_first,
                                         .moe_shared_experts = s.moe_shared_experts, .moe_z_loss = s.moe_z_loss };
    return c;
}
#define PTDP_GPT_CONFIG(...) ptdp_gpt_config((ptdp_gpt_fields){ __VA_ARGS__ })

/* The defaults of --model gpt: 2 layers, hidden 64, 4 heads, ffn 4 x
 * hidden, seq-len 32, vocabulary from the data, padded to a multiple of 64. */
ptdp_model_config ptdp_gpt_default_config(void);

/* V_pad: the smallest multiple of multiple x tp that is >= vocab. */
int ptdp_gpt_pad_vocab(int vocab, int multiple, int tp);

/* The built-in corpus: `lines` lines of sums of two numbers below 100,
 * each written on PTDP_GPT_SUM_LINE bytes, "07+35=042\n", the terms drawn
 * from (seed, "data.corpus") among the sums that are not held out, into a
 * malloc'd buffer.  Returns its length (0 on out of memory). */
size_t ptdp_gpt_builtin_corpus(uint64_t seed, int lines, unsigned char **out);
#define PTDP_GPT_CORPUS_LINES 20000
#define PTDP_GPT_SUM_LINE 10
/* The text of a config that gives none (corpus NULL): lines of sums as
 * they come, "7+35=42\n", every sum possible, drawn the same way. */
size_t ptdp_gpt_plain_corpus(uint64_t seed, int lines, unsigned char **out);

/* The held-out sums: a + b (a, b < 100) with bits(0, "data.held_out",
 * 100 a + b) mod 20 = 0, about 1 in 20, whatever the seed; the built-in
 * corpus never holds them, so they measure what the model learnt rather
 * than what it saw. */
bool ptdp_gpt_sum_held_out(int a, int b);

/* A sum's question as the built-in corpus writes it, "07+35=" (6 bytes
 * and a NUL); and whether `answer` (3 bytes) is its answer, "042". */
void ptdp_gpt_sum_prompt(int a, int b, char out[7]);
bool ptdp_gpt_sum_correct(int a, int b, const char *answer);

/* What a run's host can hold.  --data: at most 1 GiB of text (one copy on
 * the host, every device reading it).  The embedding: the padded
 * vocabulary times hidden at most 2^28 elements (1 GiB of float) in a
 * run — a --vocab-multiple x tp that pads 62 tokens to 64M rows is refused
 * with its size before any device allocates it (ptdp plan, which runs
 * nothing, plans larger models). */
#define PTDP_GPT_DATA_MAX ((size_t)1 << 30)
#define PTDP_GPT_EMBED_MAX ((double)(1 << 28))

/* Activation elements one micro-batch of B sequences keeps per block for
 * its backward, as this implementation keeps them, on one device of a tp
 * group (the formula printed by the CLI and asserted by a test):
 *
 *   B T (4 C + (3 C + C) / tp + 2 F / tp + 4)  +  B (nh / tp) T^2
 *        x, ln1, x2, ln2 (C each); qkv, y (3C + C split); c_fc in and
 *        out (F split); four LayerNorm statistics; the probabilities
 *
 * With sequence parallelism (sp.h) the residual stream x and x2, the
 * LayerNorm outputs ln1 and ln2 and their statistics are this rank's
 * positions only: each column-parallel layer all-gathers its LayerNorm's
 * shard into a transient buffer in the forward, and again in the backward
 * for its dW (Megatron-LM's choice: one more all-gather per layer for
 * (tp-1)/tp of the memory).  Everything a block keeps is then divided by
 * tp — the probabilities already were, by heads:
 *
 *   B T (4 C / tp + (3 C + C) / tp + 2 F / tp + 4 / tp)  +  B (nh / tp) T^2
 *     = B T (8 C + 2 F + 4) / tp  +  B (nh / tp) T^2 */
double ptdp_gpt_block_act_elements(const ptdp_model_config *c, int batch, int tp, bool sp);
/* The same with selective recomputation: without the B (nh/tp) T^2
 * probabilities, which the backward computes again. */
double ptdp_gpt_block_act_elements_selective(const ptdp_model_config *c, int batch, int tp, bool sp);
/* Under context parallelism (cp.h): T/cp positions, and of the attention a
 * log-sum-exp per query instead of the probabilities:
 *   B (T/cp) (4 C + (3 C + C) / tp + 2 F / tp + 4)  +  B (nh / tp) (T/cp)
 * and with SP as well, SP's split of those T/cp positions:
 *   B (T/cp) (8 C / tp + 2 F / tp + 4 / tp)  +  B (nh / tp) (T/cp) */
double ptdp_gpt_block_act_elements_cp(const ptdp_model_config *c, int batch, int tp, int cp, bool sp);
/* The bytes of one of the above (cp 1: no CP; selective ignored under CP,
 * which keeps log-sum-exps).  Under --precision bf16 (act_bf16.h) every
 * element is 2 bytes but the four LayerNorm statistics a row and CP's
 * log-sum-exps, which stay float:
 *   2 (elements - stats - lse) + 4 (stats + lse)                          */
double ptdp_gpt_block_act_bytes(const ptdp_model_config *c, int batch, int tp, int cp, bool sp, bool selective,
                                bool bf16);
/* Under Ulysses (--cp-algo a2a, ulysses.h): CP's T/cp positions outside
 * attention, and the probabilities of whole sequences of nh/(tp cp) heads
 * (none with selective recomputation) instead of the ring's log-sum-exps:
 *   B (T/cp) (4 C + (3 C + C) / tp + 2 F / tp + 4)  +  B (nh / (tp cp)) T^2
 * (with SP: B (T/cp) (2 C + 6 C / tp + 2 F / tp + 4 / tp) + the same);
 * its bytes as above, under bf16 2 an element but the statistics'. */
double ptdp_gpt_block_act_elements_a2a(const ptdp_model_config *c, int batch, int tp, int cp, bool sp,
                                       bool selective);
double ptdp_gpt_block_act_bytes_a2a(const ptdp_model_config *c, int batch, int tp, int cp, bool sp, bool selective,
                                    bool bf16);
/* Under --attention tiled (attention_tiled.c), in every layout (cp 1, the
 * ring, Ulysses; selective or not): the B (nh/tp) T^2 probabilities give
 * way to a log-sum-exp a query, B (nh/tp) (T/cp) — the count CP's ring
 * keeps, so it is ptdp_gpt_block_act_elements_cp at any cp, 1 included:
 *   B (T/cp) (4 C + (3 C + C) / tp + 2 F / tp + 4)  +  B (nh / tp) (T/cp)
 * its bytes under bf16 2 an element but the statistics' and the
 * log-sum-exps', which stay float. */
double ptdp_gpt_block_act_elements_tiled(const ptdp_model_config *c, int batch, int tp, int cp, bool sp);
double ptdp_gpt_block_act_bytes_tiled(const ptdp_model_config *c, int batch, int tp, int cp, bool sp, bool bf16);

/* Full recomputation (--recompute full), the whole model on one stage
 * (pp 1, no CP, no SP): the highest the activations of one micro-batch of
 * `batch` sequences reach, in bytes — in its backward, the other blocks'
 * kept inputs, one block redone and the backward's scratch (gpt_sizes.c
 * has the terms):
 *
 *   8 B T  +  max( (L-1) X b + (A + X + S) r ,  L X b + tail r )
 *   X = B T C, A = ptdp_gpt_block_act_elements, S the scratch, r the
 *   real's bytes, b 2 under bf16 else r
 *
 * against L A and more without recomputation. */
double ptdp_gpt_full_recompute_peak_bytes(const ptdp_model_config *c, int batch, int tp, bool bf16, bool dropout);
/* The same under --attention tiled (dropout or not: the tiles' masks need
 * no scratch of their own): A with log-sum-exps and the forward's
 * ptdp_attention_tiled_scratch(), S with the backward's. */
double ptdp_gpt_full_recompute_peak_bytes_tiled(const ptdp_model_config *c, int batch, int tp, bool bf16);

/* Whether global block l's MLP is a mixture of experts (gpt_moe.c):
 * moe_experts > 0 and (l + 1) mod moe_every = 0. */
bool ptdp_gpt_block_is_moe(const ptdp_model_config *c, int l);
/* An expert's hidden size: moe_ffn, or ffn when it is 0. */
int ptdp_gpt_moe_ffn(const ptdp_model_config *c);
/* Its moe_* settings as every model's mixture reads them (moe.h). */
ptdp_moe_settings ptdp_gpt_moe_settings(const ptdp_model_config *c);

/* One expert of an MoE block: the GPT's MLP. */
typedef struct {
    ptdp_param *fc_w, *fc_b, *proj_w, *proj_b;
} ptdp_gpt_expert;

/* Per block on this device (shards under TP).  An MoE block has no
 * fc_* of its own but a router and its experts. */
typedef struct {
    ptdp_param *ln1_w, *ln1_b, *attn_w, *attn_b, *proj_w, *proj_b;
    ptdp_param *ln2_w, *ln2_b, *fc_w, *fc_b, *fc_proj_w, *fc_proj_b;
    ptdp_param *router;             /* MoE: W_r [E, C]; NULL when dense     */
    ptdp_param *expert_bias;        /* MoE under sigmoid: b [E]; else NULL  */
    double *choices;                /* --moe-bias-update: the step's choices
                                       per expert [E] (host); else NULL     */
    ptdp_gpt_expert *experts;       /* MoE: [E] (host); NULL when dense     */
    ptdp_gpt_expert shared;         /* MoE, --moe-shared-experts S: one MLP
                                       of S F_e every token takes; its
                                       params NULL without                 */
} ptdp_gpt_block;

/* TeraPipe's cache of one micro-batch's sequences on one stage (gpt_kv.c). */
typedef struct ptdp_gpt_kv {
    int64_t first_sample;           /* the micro-batch it belongs to         */
    int rows, nblocks;              /* sequences; this stage's blocks        */
    ptdp_tensor *qkv, *dqkv;        /* [nblocks]: (rows T) x 3 C/tp each      */
    struct ptdp_gpt_kv *next;
} ptdp_gpt_kv;

/* What the GPT keeps beside the interface's fields (model->impl). */
typedef struct {
    ptdp_param *wte, *wpe;          /* stage 0 (wte also the head when pp = 1) */
    ptdp_param *head;               /* the last stage's wte: wte itself when
                                       pp = 1, a tied copy when pp > 1      */
    ptdp_param *lnf_w, *lnf_b;      /* last stage                           */
    ptdp_gpt_block *blocks;         /* [layer_end - layer_begin]            */
    int vocab_padded, vocab_local;  /* V_pad and V_pad / tp                 */
    int heads_local, ffn_local;     /* nh / tp, F / tp                      */
    const unsigned char *corpus;    /* the data, first and last stage: the
                                       run's one read-only copy, or (no text
                                       given) the built-in one in the arena */
    size_t corpus_len;
    void *corpus_block;             /* the arena's block: the built-in text,
                                       or the charge for the run's copy     */
    ptdp_gpt_kv *kv;                /* token slices in flight (gpt_kv.c)     */
} ptdp_gpt;

/* What one block of one micro-batch keeps (rows = B T tokens). */
typedef struct {
    ptdp_tensor x;                  /* block input                          */
    ptdp_real *ln1_mean, *ln1_rstd;
    ptdp_tensor ln1;                /* LN1(x): c_attn's input (SP: this
                                       rank's rows, gathered where used)    */
    ptdp_tensor qkv;                /* rows x 3 C/tp; under Ulysses, after
                                       the attention, its storage holds the
                                       head layout (B T) x 3 C/(tp cp)      */
    ptdp_real *probs;               /* B nh/tp T T (Ulysses: B nh/(tp cp) T
                                       T; the ring: B nh/tp T/cp lse)      */
    ptdp_tensor y;                  /* the heads' outputs: c_proj's input    */
    ptdp_tensor x2;                 /* after the attention's residual        */
    ptdp_real *ln2_mean, *ln2_rstd;
    ptdp_tensor ln2;                /* LN2(x2): c_fc's input (SP: as ln1)   */
    ptdp_tensor fc;                 /* c_fc's output, before GELU           */
    ptdp_tensor gelu;               /* GELU's output: c_proj's input        */
    struct ptdp_moe_acts *moe;      /* an MoE block's routing and experts'
                                       activations instead of fc and gelu   */
    ptdp_act_packed packed;         /* --precision bf16: x … gelu and the
                                       probabilities, as bf16 between the
                                       forward and the backward (act_bf16.h) */
} ptdp_gpt_block_acts;

typedef struct {
    ptdp_tensor input;              /* other stages: the received x          */
    int nblocks;
    ptdp_gpt_block_acts *blocks;
    ptdp_tensor x_out;              /* the last block's output               */
    ptdp_real *lnf_mean, *lnf_rstd; /* last stage                            */
    ptdp_tensor lnf;                /* LN_f(x): the head's input (SP: as
                                       a block's ln1)                       */
    ptdp_tensor logits;             /* rows x V_pad/tp                       */
    double *rowmax, *sumexp;        /* softmax statistics per token          */
    ptdp_act_packed tail_packed;    /* bf16: x_out and lnf (act_bf16.h)      */
    const int64_t *tokens;          /* stage 0: the batch's tokens (under CP
                                       this device's positions of them)     */
    int64_t *labels;                /* CP, last stage: its positions' labels */
    double aux_sum;                 /* this stage's MoE blocks: the sum over
                                       the micro-batch's sequences of the
                                       balance loss alpha sum_i f_i P_i     */
    struct ptdp_moe_tally *moe_tally;   /* ... and their loads, drops and
                                       balance losses, block by block
                                       (parallel/moe_stats.c; host)         */
} ptdp_gpt_saved;

/* Generation (ptdp_sample_generate, sample.h, for a GPT): extend
 * ids[0..len) by n tokens (ids has room for len + n), each from the logits
 * at the last of the last T tokens: greedy at temperature 0, else a
 * counter-based draw from softmax(logits / temperature) over the top_k (0:
 * all) — the same text for the same seed.  The model must be a GPT whole
 * on this device (tp = pp = 1). */
typedef ptdp_sample_opts ptdp_gpt_sample_opts;
int ptdp_gpt_generate(ptdp_device *dev, ptdp_model *m, int64_t *ids, int len, int n,
                      const ptdp_gpt_sample_opts *o);

/* What a GPT learnt of the built-in sums (ptdp_sample_score_sums, for a
 * GPT): each held-out sum's question ("07+35=", ptdp_gpt_sum_held_out)
 * continued greedily by 3 tokens, and *right of the *asked answers exactly
 * the sum ("042").  The model must be whole on this device and know the
 * tokens of a question. */
int ptdp_gpt_score_sums(ptdp_device *dev, ptdp_model *m, int *right, int *asked);

ptdp_gpt *ptdp_gpt_of(ptdp_model *m);
ptdp_gpt_saved *ptdp_gpt_saved_of(ptdp_acts *acts);

#endif
