/*
 * gpt_cli.c — the GPT on the command line: its flags and data, its help,
 * and what `ptdp train` prints and reports about it (model_flags.h).
 *
 *     flag              field            smallest   largest (train, bench)
 *     --heads           heads            1          2^16, 1024
 *     --seq-len         seq_len          2          2^20, 2^16   (a position and the token after it)
 *     --vocab           vocab            1          2^24, 2^20
 *     --vocab-multiple  vocab_multiple   1          2^20
 *     --moe-*           moe_experts …    a mixture of experts' six flags, every
 *                       model's (moe_cli.h; default aux loss 0.01)
 *     --data FILE       its text, one token per byte (V = 256); without it
 *                       the built-in lines of sums, made from the run's seed
 *
 *   header   model gpt: hidden 64, 4 heads of 16, …; data: N tokens (…)
 *   report   "model": {"name": "gpt", …, "heads": 4, "seq_len": 32, …}
 *   after    what a micro-batch keeps per block, by gpt.h's formula;
 *            under CP, the attention's balance over the ring (cp.h);
 *            under SP, its TP bytes beside TP alone's
 */
#include "../model_flags.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/cp.h"
#include "ptdp/ep.h"
#include "ptdp/error.h"
#include "ptdp/file.h"
#include "ptdp/gpt.h"
#include "ptdp/json.h"
#include "ptdp/mesh.h"
#include "ptdp/safetensors.h"
#include "ptdp/ulysses.h"

#include "gpt_activations.h"
#include "gpt_figures.h"
#include "gpt_moe_bench.h"
#include "gpt_demo.h"
#include "moe_cli.h"
#include "gpt_text.h"

static const ptdp_model_flag gpt_flags[] = {
    { "--heads", PTDP_GPT_OWN(heads), 1, { 1 << 16, 1024 }, false },
    { "--seq-len", PTDP_GPT_OWN(seq_len), 2, { 1 << 20, 1 << 16 }, false },
    { "--vocab", PTDP_GPT_OWN(vocab), 1, { 1 << 24, 1 << 20 }, false },
    { "--vocab-multiple", PTDP_GPT_OWN(vocab_multiple), 1, { 1 << 20, 1 << 20 }, false },
    { "--data", PTDP_FLAG_PATH, 0, { 0, 0 }, false },
    PTDP_MOE_FLAG_ROWS(PTDP_GPT_OWN(moe_experts), PTDP_GPT_OWN(moe_every), PTDP_GPT_OWN(moe_ffn),
                       PTDP_GPT_OWN(moe_top_k), PTDP_GPT_OWN(moe_capacity), PTDP_GPT_OWN(moe_aux_loss)),
    PTDP_MOE_DEEPSEEK_FLAG_ROWS(PTDP_GPT_OWN(moe_score), PTDP_GPT_OWN(moe_route_scale), PTDP_GPT_OWN(moe_bias_update)),
    PTDP_MOE_GROUP_FLAG_ROWS(PTDP_GPT_OWN(moe_groups), PTDP_GPT_OWN(moe_group_top_k)),
    PTDP_MOE_Z_LOSS_FLAG_ROW(PTDP_GPT_OWN(moe_z_loss)),
    PTDP_MOE_DENSE_FIRST_FLAG_ROW(PTDP_GPT_OWN(moe_dense_first)),
    PTDP_MOE_SHARED_FLAG_ROW(PTDP_GPT_OWN(moe_shared_experts)),
};

static ptdp_model_config gpt_defaults(void)
{
    ptdp_model_config g = ptdp_gpt_default_config();
    g.ffn = 0;   /* 4 x hidden */
    return g;
}

/* ---------------------------------------------------------- its data */

/* The data's largest token + 1: the smallest --vocab the data allows. */
static int min_vocab(const ptdp_model_flags *f)
{
    int top = 0;
    for (size_t k = 0; k < f->corpus_len; k++)
        if (f->corpus[k] + 1 > top)
            top = f->corpus[k] + 1;
    return top;
}

/* The GPT's text: --data's bytes, or the built-in sums. */
static int load_data(const char *cmd, ptdp_model_flags *f)
{
    char msg[512];
    if (f->data == NULL) {
        f->corpus_len = ptdp_gpt_builtin_corpus(f->seed, PTDP_GPT_CORPUS_LINES, &f->corpus);
        if (f->corpus_len == 0)
            return ptdp_usage_error(cmd, "out of host memory making the built-in corpus");
        return 0;
    }
    if (ptdp_read_file_max(f->data, PTDP_GPT_DATA_MAX, &f->corpus, &f->corpus_len, msg, sizeof msg) != 0)
        return ptdp_usage_error(cmd, "--data %s", msg);
    if (f->corpus_len == 0)
        return ptdp_usage_error(cmd, "--data %s: the file is empty (it needs at least --seq-len + 1 bytes)",
                                f->data);
    return 0;
}

/* A model of tokens' text (gpt_text.h): --data's bytes or the built-in
 * sums, the vocabulary they need, and sequences that fit. */
int ptdp_gpt_cli_text(const char *cmd, ptdp_model_flags *f, int *vocab, int own_vocab, int seq_len, int *line)
{
    if (load_data(cmd, f) != 0)
        return PTDP_EXIT_USAGE;
    *line = f->data == NULL ? PTDP_GPT_SUM_LINE : 0;   /* the sums' samples start on a line */
    int need = min_vocab(f);
    if (!ptdp_model_flags_given(f, "--vocab"))   /* bytes: 256; the sums: what they use (or the command's) */
        *vocab = f->data != NULL ? 256 : own_vocab > need ? own_vocab : need;
    else if (*vocab < need)
        return ptdp_usage_error(cmd, "--vocab %d: the data holds token %d, so --vocab must be at least %d",
                                *vocab, need - 1, need);
    if (f->corpus_len < 3)   /* the shortest --seq-len, 2, needs 3 */
        return ptdp_usage_error(cmd, "--seq-len %d: the data has %zu token%s, too few for any sequence (the "
                                "shortest, --seq-len 2, needs 3: more data)", seq_len, f->corpus_len,
                                f->corpus_len == 1 ? "" : "s");
    if (f->corpus_len < (size_t)seq_len + 1)
        return ptdp_usage_error(cmd, "--seq-len %d: the data has %zu tokens, one sequence needs %d "
                                "(--seq-len at most %zu, or more data)", seq_len, f->corpus_len,
                                seq_len + 1, f->corpus_len - 1);
    return 0;
}

static int gpt_finish(const char *cmd, ptdp_model_flags *f)
{
    ptdp_model_config *m = &f->cfg;
    ptdp_gpt_settings *gpt = ptdp_gpt(m);
    const int own = ptdp_gpt(ptdp_model_flags_defaults(f, &ptdp_gpt_ops))->vocab;
    if (ptdp_gpt_cli_text(cmd, f, &gpt->vocab, own, gpt->seq_len, &gpt->line) != 0)
        return PTDP_EXIT_USAGE;
    gpt->corpus = f->corpus;
    gpt->corpus_len = f->corpus_len;
    const ptdp_moe_settings moe = ptdp_gpt_moe_settings(m);
    if (ptdp_moe_cli_finish(cmd, f, &moe, "the dense MLP") != 0)
        return PTDP_EXIT_USAGE;
    /* padded for tp 1; `ptdp train` pads again for its tp (gpt_prepare) */
    gpt->vocab_padded = ptdp_gpt_pad_vocab(gpt->vocab, gpt->vocab_multiple, 1);
    return 0;
}

/* The built-in corpus is drawn from the seed: made again for another. */
int ptdp_gpt_cli_text_reseed(const char *cmd, ptdp_model_flags *f, uint64_t seed)
{
    if (f->data != NULL || seed == f->seed)
        return 0;
    free(f->corpus);
    f->corpus = NULL;
    f->seed = seed;
    return load_data(cmd, f) != 0 ? PTDP_EXIT_USAGE : 0;
}

static int gpt_reseed(const char *cmd, ptdp_model_flags *f, uint64_t seed, ptdp_model_config *into)
{
    if (ptdp_gpt_cli_text_reseed(cmd, f, seed) != 0)
        return PTDP_EXIT_USAGE;
    ptdp_gpt(&f->cfg)->corpus = f->corpus;
    ptdp_gpt(&f->cfg)->corpus_len = f->corpus_len;
    ptdp_gpt(into)->corpus = ptdp_gpt(&f->cfg)->corpus;
    ptdp_gpt(into)->corpus_len = ptdp_gpt(&f->cfg)->corpus_len;
    ptdp_gpt(into)->line = ptdp_gpt(&f->cfg)->line;
    return 0;
}

static void gpt_help(FILE *out, const ptdp_model_config *d)
{
    (void)d;
    ptdp_model_config g = ptdp_gpt_default_config();
    fprintf(out,
            "  --heads N --seq-len N           the GPT (default %d, %d; hidden %d, ffn 4*hidden, layers %d)\n"
            "  --vocab V           the GPT's tokens 0..V-1 (default: 256 with --data, else the built-in\n"
            "                      corpus's); padded to a multiple of --vocab-multiple (64) x tp\n"
            "  --data FILE         the GPT's text, one token per byte (default: built-in lines of sums);\n"
            "                      at most 1 GiB, one copy on the host that every device reads\n",
            ptdp_gpt(&g)->heads, ptdp_gpt(&g)->seq_len, g.hidden, g.layers);
}

/* ------------------------------------------------------ ptdp train */

/* What tells the GPT's checkpoints with experts from dense ones (moe_cli.h). */
static const ptdp_moe_cli_names gpt_moe_names = {
    "GPT", ".mlp.router.weight", "no transformer.h.*.mlp.router.weight, one c_fc per block",
};

/* The padded vocabulary: a multiple of --vocab-multiple x tp, fixed here so
 * that --check's one-device baseline has the same one; a resumed run keeps
 * its checkpoint's (so it may load at another tp) — and a typed
 * --vocab-multiple that its padding is no multiple of is refused, never
 * silently ignored: a checkpoint's shapes are fixed. */
static int gpt_prepare(ptdp_train_config *c, const ptdp_model_flags *typed, const char *load)
{
    char msg[512];
    ptdp_gpt(&c->model)->vocab_padded = ptdp_gpt_pad_vocab(ptdp_gpt(&c->model)->vocab,
                                                           ptdp_gpt(&c->model)->vocab_multiple, c->tp);
    if (load != NULL) {
        ptdp_st_file *f;
        const char *vp;
        if (ptdp_st_open(load, &f, msg, sizeof msg) != 0) {
            fprintf(stderr, "ptdp train: --load %s\n", msg);
            return PTDP_EXIT_FAIL;
        }
        char *end = NULL;
        long long v = (vp = ptdp_st_meta(f, "vocab_padded")) != NULL ? strtoll(vp, &end, 10) : 0;
        if (v > 0 && v <= 0x7fffffff && end != NULL && *end == '\0')   /* else the load names the field */
            ptdp_gpt(&c->model)->vocab_padded = (int)v;
        const ptdp_moe_settings settings = ptdp_gpt_moe_settings(&c->model);
        const int moe = ptdp_moe_cli_load_matches(load, f, &settings, &gpt_moe_names);
        ptdp_st_close(f);
        if (moe != 0)
            return moe;
        const int padded = ptdp_gpt(&c->model)->vocab_padded, multiple = ptdp_gpt(&c->model)->vocab_multiple;
        if (ptdp_model_flags_given(typed, "--vocab-multiple") && padded % multiple != 0)
            return ptdp_usage_error("train", "--vocab-multiple %d contradicts --load %s: its vocabulary is "
                                    "padded to %d rows, not a multiple of %d, and a checkpoint's shapes are "
                                    "fixed (leave --vocab-multiple out, or give one that divides %d)",
                                    multiple, load, padded, multiple, padded);
    }
    /* A run's host holds the embedding (the planner plans larger ones). */
    const int vp = ptdp_gpt(&c->model)->vocab_padded;
    if (vp > 0 && (double)vp * c->model.hidden > PTDP_GPT_EMBED_MAX)
        return ptdp_usage_error("train", "--vocab %d padded to a multiple of --vocab-multiple %d x --tp %d is %d "
                                "rows: an embedding of %d x --hidden %d = %.0f elements, more than the %.0f a "
                                "run holds (a smaller --vocab-multiple)", ptdp_gpt(&c->model)->vocab,
                                ptdp_gpt(&c->model)->vocab_multiple, c->tp, vp, vp, c->model.hidden,
                                (double)vp * c->model.hidden, PTDP_GPT_EMBED_MAX);
    return 0;
}

static void gpt_describe(const ptdp_train_config *c, int mb, const char *data_name)
{
    const ptdp_model_config *m = &c->model;
    printf("\n  model gpt: hidden %d, %d heads of %d, ffn %d, %d layers, seq-len %d, vocab %d (padded to %d);"
           " batch %d sequences, %d micro-batch%s of %d\n  data: %zu tokens (%s)\n",
           m->hidden, ptdp_gpt(m)->heads, m->hidden / ptdp_gpt(m)->heads, m->ffn, m->layers, ptdp_gpt(m)->seq_len, ptdp_gpt(m)->vocab,
           ptdp_gpt(m)->vocab_padded, c->batch, c->micro_batches, c->micro_batches == 1 ? "" : "es", mb,
           ptdp_gpt(m)->corpus_len, data_name ? data_name : "the built-in lines of sums");
}

#define J(x) ptdp_json_number((x), (char[PTDP_JSON_NUMBER_MAX]){ 0 })

static void gpt_report_keys(FILE *f, const ptdp_train_config *c)
{
    const ptdp_model_config *m = &c->model;
    /* d_in and classes: the MLP's keys, kept in every model section; a GPT
     * has neither (its own block holds its settings), so 0 as always */
    fprintf(f, ", \"d_in\": %d, \"hidden\": %d, \"ffn\": %d, \"layers\": %d, \"classes\": %d", 0,
            m->hidden, m->ffn, m->layers, 0);
    fprintf(f, ", \"heads\": %d, \"seq_len\": %d, \"vocab\": %d, \"vocab_padded\": %d", ptdp_gpt(m)->heads,
            ptdp_gpt(m)->seq_len, ptdp_gpt(m)->vocab, ptdp_gpt(m)->vocab_padded);
    /* what a micro-batch keeps per block, by formula (gpt.h), and in what */
    fprintf(f, ", \"acts_per_block_bytes\": %s, \"acts_store\": \"%s\"",
            J(c->attention_tiled ? ptdp_gpt_block_act_bytes_tiled(m, c->batch / (c->dp * c->micro_batches), c->tp,
                                                                   ptdp_train_cp(c), c->sp, c->bf16)
              : c->cp_a2a && ptdp_train_cp(c) > 1
                  ? ptdp_gpt_block_act_bytes_a2a(m, c->batch / (c->dp * c->micro_batches), c->tp, ptdp_train_cp(c),
                                                 c->sp, c->recompute_core, c->bf16)
                  : ptdp_gpt_block_act_bytes(m, c->batch / (c->dp * c->micro_batches), c->tp, ptdp_train_cp(c), c->sp,
                                             c->recompute_core, c->bf16)),
            c->bf16 ? "bf16" : PTDP_REAL_NAME);
    const ptdp_moe_settings moe = ptdp_gpt_moe_settings(m);
    ptdp_moe_cli_report_keys(f, &moe, m->ffn);
}

/* The bytes of e elements a block keeps: ptdp_real each, or under bf16
 * (act_bf16.h) 2 bytes each but the LayerNorm statistics' (and CP's
 * log-sum-exps'), which stay float. */
static const char *kept_bytes(const ptdp_train_config *c, int mb, char *b, size_t n)
{
    const ptdp_model_config *m = &c->model;
    const double bytes = c->attention_tiled
                             ? ptdp_gpt_block_act_bytes_tiled(m, mb, c->tp, ptdp_train_cp(c), c->sp, c->bf16)
                             : ptdp_gpt_block_act_bytes(m, mb, c->tp, ptdp_train_cp(c), c->sp, c->recompute_core,
                                                        c->bf16);
    char v[32];
    snprintf(b, n, "%s%s", ptdp_format_bytes(bytes, v, sizeof v),
             c->bf16 ? " in bf16 (float LayerNorm statistics)" : "");
    return b;
}

/* Context parallelism: what a micro-batch keeps per block (T/cp positions,
 * and each query's log-sum-exp where one device keeps T x T probabilities),
 * and the balance of the attention's work: the score elements each CP rank
 * computes (cp.h), and the virtual compute each device measured. */
static void print_context_parallel(const ptdp_train_config *c, const ptdp_launch_result *lr)
{
    const ptdp_model_config *m = &c->model;
    const ptdp_gpt_settings *gpt = ptdp_gpt(m);
    const int cp = ptdp_train_cp(c), Tq = gpt->seq_len / cp, mb = c->batch / (c->dp * c->micro_batches);
    double e = ptdp_gpt_block_act_elements_cp(m, mb, c->tp, cp, c->sp);
    char b[96];
    if (c->sp)
        printf("activations a micro-batch keeps per block (cp, sp): B (T/cp) (8C/tp + 2F/tp + 4/tp) + "
               "B (nh/tp) (T/cp)\n  = %d x %d x (8x%d/%d + 2x%d/%d + 4/%d) + %d x (%d/%d) x %d = %.0f elements = %s\n",
               mb, Tq, m->hidden, c->tp, m->ffn, c->tp, c->tp, mb, gpt->heads, c->tp, Tq, e,
               kept_bytes(c, mb, b, sizeof b));
    else
        printf("activations a micro-batch keeps per block (cp): B (T/cp) (4C + 4C/tp + 2F/tp + 4) + B (nh/tp) (T/cp)\n"
               "  = %d x %d x (4x%d + 4x%d/%d + 2x%d/%d + 4) + %d x (%d/%d) x %d = %.0f elements = %s\n",
               mb, Tq, m->hidden, m->hidden, c->tp, m->ffn, c->tp, mb, gpt->heads, c->tp, Tq, e,
               kept_bytes(c, mb, b, sizeof b));
    double lo = INFINITY, hi = 0, clo = INFINITY, chi = 0;
    printf("context parallelism, cp %d (%s): attention scores per sequence and head on CP rank", cp,
           c->cp_contiguous ? "contiguous" : "zigzag");
    for (int r = 0; r < cp; r++) {
        double s = ptdp_ring_attention_scores(gpt->seq_len, cp, r, !c->cp_contiguous);
        lo = fmin(lo, s);
        hi = fmax(hi, s);
        printf(" %d: %.0f%s", r, s, r + 1 < cp ? "," : "");
    }
    for (int r = 0; r < lr->world_size; r++) {
        double v = lr->devices[r].clock.compute_s;
        clo = fmin(clo, v);
        chi = fmax(chi, v);
    }
    printf("\n  largest / smallest: %.2f (the scores), %.3f (the devices' virtual compute)\n", hi / lo,
           clo > 0 ? chi / clo : 1.0);
}

/* Bytes a device sent in the CP group per step: the mean over devices. */
static double cp_sent_per_step(const ptdp_train_config *c, const ptdp_launch_result *lr)
{
    double sum = 0;
    for (int r = 0; r < lr->world_size; r++) {
        const ptdp_comm_stats *s = &lr->devices[r].comm;
        for (int g = 0; g < s->ngroups; g++)
            if (strcmp(s->group[g].name, "cp") == 0)
                sum += s->group[g].sent;
    }
    return c->steps > 0 && lr->world_size > 0 ? sum / lr->world_size / c->steps : 0;
}

/* CP's traffic beside the formula of the algorithm that ran (cp.h, or
 * ulysses.h), per device and step: a device's L/pp blocks (the mean over
 * stages), M micro-batches through each, and what one block sends — with
 * f forward passes, 2 under full recomputation — and the other
 * algorithm's for the same run.  Ulysses in tiles sends delta = dY . y
 * too, a number a head and position: X / hd. */
static void print_cp_traffic(const ptdp_train_config *c, const ptdp_launch_result *lr)
{
    const ptdp_model_config *m = &c->model;
    const int N = ptdp_train_cp(c), T = ptdp_gpt(m)->seq_len, W = m->hidden / c->tp, f = c->recompute ? 2 : 1;
    const int mb = c->batch / (c->dp * c->micro_batches);
    const double blocks = (double)m->layers / c->pp, X = (double)mb * (T / N) * W;
    const double ring = ptdp_ring_elements_per_block(mb, T, W, N, f);
    /* tiles: delta = dY . y, one a head and position, to the head layout in the backward (gpt_attention.c) */
    const int hd = m->hidden / ptdp_gpt(m)->heads;
    const double a2a = ptdp_ulysses_elements_per_block(mb, T, W, N, f) + (c->attention_tiled ? (N - 1.0) / N * X / hd : 0);
    const double per_block = c->cp_a2a ? a2a : ring, other = c->cp_a2a ? ring : a2a;
    const double scale = blocks * c->micro_batches * sizeof(ptdp_real);
    char b[3][32];
    if (c->steps == 0)
        return;
    printf("context parallelism (%s), N = %d: CP bytes sent per device and step, formula (L/pp) M x %s per block\n"
           "  = %g x %d x %.0f elements (X = B (T/N) (C/tp) = %d x %d x %d = %.0f, f = %d) = %s, measured %s\n"
           "  (%s would send %s%s)\n",
           c->cp_a2a ? "Ulysses all-to-all" : "ring", N,
           !c->cp_a2a ? "(2f (N-1) + 4 (N-1) + 2) X" : c->attention_tiled ? "(4f + 4 + 1/hd)(N-1)/N X (tiles: delta)"
                                                                         : "(4f + 4)(N-1)/N X",
           blocks, c->micro_batches, per_block, mb, T / N, W, X, f,
           ptdp_format_bytes(scale * per_block, b[0], sizeof b[0]),
           ptdp_format_bytes(cp_sent_per_step(c, lr), b[1], sizeof b[1]), c->cp_a2a ? "the ring" : "Ulysses",
           ptdp_format_bytes(scale * other, b[2], sizeof b[2]),
           c->cp_a2a || (ptdp_gpt(m)->heads / c->tp) % N == 0 ? "" : ", had heads/tp divided by N");
}

/* Ulysses (--cp-algo a2a): what a micro-batch keeps per block — CP's T/cp
 * positions, and the probabilities of whole sequences of nh/(tp cp) heads
 * (ptdp_gpt_block_act_elements_a2a) — and the attention's share of it on
 * each device beside the ring's. */
static void print_ulysses(const ptdp_train_config *c)
{
    const ptdp_model_config *m = &c->model;
    const ptdp_gpt_settings *gpt = ptdp_gpt(m);
    const int cp = ptdp_train_cp(c), T = gpt->seq_len, Tq = T / cp, mb = c->batch / (c->dp * c->micro_batches);
    const int hn = gpt->heads / c->tp / cp;
    const bool sel = c->recompute_core;
    const double e = ptdp_gpt_block_act_elements_a2a(m, mb, c->tp, cp, c->sp, sel);
    const double probs = (double)mb * hn * T * T, lse = (double)mb * (gpt->heads / c->tp) * Tq;
    char b[3][32];
    printf("activations a micro-batch keeps per block (cp, a2a%s%s): B (T/cp) (%s)%s\n"
           "  = %.0f elements = %s%s\n", c->sp ? ", sp" : "", sel ? ", selective" : "",
           c->sp ? "8C/tp + 2F/tp + 4/tp" : "4C + 4C/tp + 2F/tp + 4", sel ? "" : " + B (nh/(tp cp)) T^2", e,
           ptdp_format_bytes(ptdp_gpt_block_act_bytes_a2a(m, mb, c->tp, cp, c->sp, sel, c->bf16), b[0], sizeof b[0]),
           c->bf16 ? " in bf16 (float LayerNorm statistics)" : "");
    printf("attention kept per block on each device (Ulysses: whole sequences of nh/(tp cp) = %d head%s): ", hn,
           hn == 1 ? "" : "s");
    if (sel)
        printf("none, the B (nh/(tp cp)) T^2 = %.0f probabilities computed again in the backward\n", probs);
    else
        printf("B (nh/(tp cp)) T^2 = %d x %d x %d^2 = %.0f probabilities = %s\n", mb, hn, T, probs,
               ptdp_format_bytes(probs * (c->bf16 ? 2.0 : (double)sizeof(ptdp_real)), b[1], sizeof b[1]));
    printf("  (the ring: B (nh/tp) (T/cp) = %.0f log-sum-exps = %s; one device: B (nh/tp) T^2 = %.0f)\n", lse,
           ptdp_format_bytes(lse * sizeof(ptdp_real), b[2], sizeof b[2]), (double)mb * (gpt->heads / c->tp) * T * T);
}

/* --recompute full (gpt.c): each block's input kept, one block redone at
 * a time in the backward — and with one stage (no CP, no SP) the peak
 * that makes, beside the arena's. */
static void print_full_recompute(const ptdp_train_config *c, const ptdp_launch_result *lr)
{
    const ptdp_model_config *m = &c->model;
    const int mb = c->batch / (c->dp * c->micro_batches), T = ptdp_gpt(m)->seq_len, L = m->layers;
    const double X = (double)mb * T * m->hidden / (c->sp ? c->tp : 1) / ptdp_train_cp(c);
    const double b = c->bf16 ? sizeof(ptdp_bf16) : sizeof(ptdp_real);
    /* the residual stream's rows: SP's share, or CP's positions */
    const int parts = (c->sp ? c->tp : 1) * ptdp_train_cp(c);
    const char *split = c->sp && ptdp_train_cp(c) > 1 ? " / (tp cp)" : c->sp ? " / tp" : parts > 1 ? " / cp" : "";
    char v[3][32], by[24] = "";
    if (parts > 1)
        snprintf(by, sizeof by, " / %d", parts);
    printf("full recomputation keeps per micro-batch each block's input, B T C%s = %d x %d x %d%s (%s each, "
           "%s for the model's L = %d blocks%s), and redoes one block at a time in the backward\n",
           split, mb, T, m->hidden, by, ptdp_format_bytes(X * b, v[0], sizeof v[0]), ptdp_format_bytes(L * X * b, v[1], sizeof v[1]), L,
           c->pp > 1 ? ", each stage its own" : "");
    if (c->pp > 1 || ptdp_train_cp(c) > 1 || c->sp)
        return;
    const double peak = c->attention_tiled ? ptdp_gpt_full_recompute_peak_bytes_tiled(m, mb, c->tp, c->bf16)
                                           : ptdp_gpt_full_recompute_peak_bytes(m, mb, c->tp, c->bf16, c->dropout > 0);
    size_t measured = 0;
    for (int r = 0; r < lr->world_size; r++)
        measured = lr->devices[r].mem.peak[PTDP_MEM_ACTS] > measured ? lr->devices[r].mem.peak[PTDP_MEM_ACTS]
                                                                      : measured;
    printf("  its peak: the tokens + the other L-1 inputs + one block's activations A + its output X + the "
           "backward's scratch (or the tail's logits if larger) = %s; measured %s\n",
           ptdp_format_bytes(peak, v[0], sizeof v[0]), ptdp_format_bytes((double)measured, v[1], sizeof v[1]));
}

/* Bytes device r sent in its TP group over the run. */
static double tp_sent(const ptdp_launch_result *lr, int r)
{
    const ptdp_comm_stats *s = &lr->devices[r].comm;
    for (int g = 0; g < s->ngroups; g++)
        if (strcmp(s->group[g].name, "tp") == 0)
            return s->group[g].sent;
    return 0;
}

/* Sequence parallelism's TP bytes beside their formula, for the first
 * device of each pipeline stage: TP alone's (an all-reduce is a
 * reduce-scatter plus an all-gather: the same bytes), the LayerNorms'
 * gradient all-reduce (each rank normalised only its positions: 2 (tp-1)/tp
 * of 2C each, once a step), and each kept LayerNorm shard all-gathered
 * again in the backward for its column-parallel layer's dW (gpt_ops.c:
 * ln_1 and ln_2 of every block, ln_f on the last stage; (tp-1)/tp of R C
 * each, every micro-batch).  TP alone's share is what is left. */
static void print_sequence_parallel(const ptdp_train_config *c, const ptdp_launch_result *lr)
{
    if (!c->sp || c->steps == 0)
        return;
    const ptdp_model_config *m = &c->model;
    const int tp = c->tp, cp = ptdp_train_cp(c), v = ptdp_train_virtual_stages(c), M = c->micro_batches;
    const double R = (double)(c->batch / (c->dp * M)) * (ptdp_gpt(m)->seq_len / cp), C = m->hidden;
    const double share = (tp - 1.0) / tp, e = sizeof(ptdp_real);
    printf("sequence parallelism, TP bytes per device and step = TP alone's + the LayerNorms' gradient all-reduce "
           "(2(tp-1)/tp x 2C each) + each kept LayerNorm shard gathered again for dW (M (tp-1)/tp R C each, "
           "R = %.0f rows):\n", R);
    for (int r = 0; r < lr->world_size; r++) {
        int d, q, t, p, blocks = 0;
        ptdp_mesh_coords_cp(c->dp, cp, tp, c->pp, r, &d, &q, &t, &p);
        if (d != 0 || q != 0 || t != 0)
            continue;
        for (int k = 0; k < v; k++) {
            int first, n;
            ptdp_stage_range(m->layers, c->pp * v, c->stage_layers, k * c->pp + p, &first, &n);
            blocks += n;
        }
        const int lns = 2 * blocks + (p == c->pp - 1);   /* ln_1, ln_2 a block; ln_f on the last stage */
        const double ln = lns * 2.0 * C * 2.0 * share * e, again = (double)M * lns * share * R * C * e;
        const double sent = tp_sent(lr, r) / c->steps;
        printf("  device %d (stage %d): %.0f B = %.0f B (TP alone) + %.0f B (%d LayerNorms) + %.0f B (%d shards x "
               "%d micro-batch%s, %d x %d x %d/%d x %.0f x %d x %.0f B)\n", r, p, sent, sent - ln - again, ln, lns,
               again, lns, M, M == 1 ? "" : "es", M, lns, tp - 1, tp, R, m->hidden, e);
    }
}

/* After the run: what a micro-batch keeps per block (and under CP, the
 * balance of the ring, or Ulysses' attention, and CP's bytes; with full
 * recomputation, what that keeps), and SP's bytes. */
/* A mixture of experts keeps, instead of the dense MLP's c_fc and GELU
 * rows (2 F a token), its experts' rows a kept choice (2 F_e + C: c_fc's
 * output, GELU's, the expert's output) and the routing a token (E + k
 * reals, 2 k ints): how many choices are kept depends on the data, at most
 * k B T (dropless) or E x ceil(c k T / E) x B; the arena's peak measures it. */
static void print_moe_acts(const ptdp_train_config *c, int mb)
{
    const ptdp_model_config *m = &c->model;
    const ptdp_gpt_settings *g = ptdp_gpt(m);
    if (g->moe_experts == 0)
        return;
    const int T = g->seq_len, E = g->moe_experts, k = g->moe_top_k, F = ptdp_gpt_moe_ffn(m) / c->tp;
    const int N = c->ep > 1 ? c->ep : 1;
    if (g->moe_shared_experts > 0)   /* the shared experts keep c_fc's and GELU's rows of every token */
        printf("  MoE blocks' shared experts keep 2 S F_e/tp = %d reals a token, float (%d x %d x %d = %.0f a "
               "block)\n", 2 * g->moe_shared_experts * F, mb, T, 2 * g->moe_shared_experts * F,
               (double)mb * T * 2 * g->moe_shared_experts * F);
    double most = (double)k * mb * T;
    if (g->moe_capacity > 0)
        most = fmin(most, (double)E * fmin(ceil(g->moe_capacity * k * T / E), (double)k * T) * mb);
    if (N > 1) {   /* home keeps the outputs; the experts' side what the dispatch brought, up to N ranks' */
        printf("  MoE blocks keep, instead of the 2F/tp a token: C a kept choice at home, 2 F_e/tp + C a row "
               "dispatched to\n  this rank's experts (at most %d ranks' %.0f), E + k routing reals a token: at most "
               "%.0f elements (the arena's peak is measured)\n", N, most,
               most * m->hidden + N * most * (2.0 * F + m->hidden) + (double)mb * T * (E + k));
        return;
    }
    char blocks[128] = "";
    size_t n = 0;
    for (int l = 0; l < m->layers && n + 16 < sizeof blocks; l++)
        if (ptdp_gpt_block_is_moe(m, l))
            n += (size_t)snprintf(blocks + n, sizeof blocks - n, "%s%d", n ? ", " : "", l);
    printf("  MoE blocks %s keep, instead of the 2F/tp a token: 2 F_e/tp + C a kept choice and E + k "
           "routing reals a token,\n  data-dependent: at most %.0f x (2x%d + %d) + %d x %d x (%d + %d) = %.0f "
           "elements (the arena's peak is measured)\n", n ? blocks : "none", most, F, m->hidden, mb, T, E, k,
           most * (2.0 * F + m->hidden) + (double)mb * T * (E + k));
}

/* Expert parallelism's uniform estimate, and the run's experts from the
 * counters (moe_cli.h), for the GPT's settings. */
static double gpt_ep_uniform_bytes(const ptdp_train_config *c)
{
    const ptdp_moe_settings moe = ptdp_gpt_moe_settings(&c->model);
    return ptdp_moe_cli_ep_uniform_bytes(c, &moe, ptdp_gpt(&c->model)->seq_len);
}

static void gpt_report_stats(FILE *f, const ptdp_train_config *c, const ptdp_train_result *res)
{
    const ptdp_moe_settings moe = ptdp_gpt_moe_settings(&c->model);
    ptdp_moe_cli_report_stats(f, c, res, &moe, ptdp_gpt(&c->model)->seq_len);
}

static void gpt_print_stats(const ptdp_train_config *c, const ptdp_train_result *res)
{
    const ptdp_moe_settings moe = ptdp_gpt_moe_settings(&c->model);
    ptdp_moe_cli_print_stats(c, res, &moe, ptdp_gpt(&c->model)->seq_len);
}

/* --attention tiled without CP or under Ulysses: CP's count, a log-sum-exp
 * a query where the probabilities were (gpt.h ptdp_gpt_block_act_elements_tiled). */
static void print_tiled(const ptdp_train_config *c, int mb)
{
    const ptdp_model_config *m = &c->model;
    const int T = ptdp_gpt(m)->seq_len, nh = ptdp_gpt(m)->heads, cp = ptdp_train_cp(c);
    const double full = cp > 1 ? (double)mb * (nh / c->tp / cp) * T * T : (double)mb * (nh / c->tp) * T * T;
    const int C = m->hidden, F = m->ffn, tp = c->tp;
    char b[96], terms[128];
    if (c->sp)
        snprintf(terms, sizeof terms, "8x%d/%d + 2x%d/%d + 4/%d", C, tp, F, tp, tp);
    else
        snprintf(terms, sizeof terms, "4x%d + 4x%d/%d + 2x%d/%d + 4", C, C, tp, F, tp);
    printf("activations a micro-batch keeps per block (attention in tiles%s%s): B %s (%s) + B (nh/tp) %s\n"
           "  = %d x %d x (%s) + %d x (%d/%d) x %d = %.0f elements = %s\n", cp > 1 ? ", cp, a2a" : "",
           c->sp ? ", sp" : "", cp > 1 ? "(T/cp)" : "T", c->sp ? "8C/tp + 2F/tp + 4/tp" : "4C + 4C/tp + 2F/tp + 4",
           cp > 1 ? "(T/cp)" : "T", mb, T / cp, terms, mb, nh, tp, T / cp,
           ptdp_gpt_block_act_elements_tiled(m, mb, c->tp, cp, c->sp), kept_bytes(c, mb, b, sizeof b));
    printf("  (%.0f log-sum-exps where the whole attention keeps %s T^2 = %.0f probabilities)\n",
           (double)mb * (nh / c->tp) * (T / cp), cp > 1 ? "B (nh/(tp cp))" : "B (nh/tp)", full);
}

static void gpt_summary(const ptdp_train_config *c, const ptdp_launch_result *lr)
{
    print_sequence_parallel(c, lr);
    if (ptdp_train_cp(c) > 1) {
        if (c->cp_a2a && c->attention_tiled)   /* tiles: a log-sum-exp a query, the ring's count */
            print_tiled(c, c->batch / (c->dp * c->micro_batches));
        else if (c->cp_a2a)
            print_ulysses(c);
        else
            print_context_parallel(c, lr);
        print_cp_traffic(c, lr);
        if (c->recompute)
            print_full_recompute(c, lr);
        return;
    }
    /* what one micro-batch keeps per block, by this implementation's own
     * formula (gpt.h; tests/test_gpt.c measures it to the byte) */
    const ptdp_model_config *m = &c->model;
    int mb = c->batch / (c->dp * c->micro_batches);
    if (c->attention_tiled) {
        print_tiled(c, mb);
        print_moe_acts(c, mb);
        if (c->recompute)
            print_full_recompute(c, lr);
        return;
    }
    const bool sel = c->recompute_core;
    double e = sel ? ptdp_gpt_block_act_elements_selective(m, mb, c->tp, c->sp)
                   : ptdp_gpt_block_act_elements(m, mb, c->tp, c->sp);
    char b[96], probs[96] = "";
    /* the attention's probabilities, unless selective recomputation redoes them */
    if (!sel)
        snprintf(probs, sizeof probs, " + %d x (%d/%d) x %d^2", mb, ptdp_gpt(m)->heads, c->tp, ptdp_gpt(m)->seq_len);
    printf("activations a micro-batch keeps per block%s%s: ", c->sp ? " (sp)" : "",
           sel ? " (selective recompute)" : "");
    if (c->sp)   /* everything split: the regions along the sequence, the rest by TP */
        printf("B T (8C/tp + 2F/tp + 4/tp)%s\n"
               "  = %d x %d x (8x%d/%d + 2x%d/%d + 4/%d)%s = %.0f elements = %s\n",
               sel ? "" : " + B (nh/tp) T^2", mb, ptdp_gpt(m)->seq_len, m->hidden, c->tp, m->ffn, c->tp,
               c->tp, probs, e, kept_bytes(c, mb, b, sizeof b));
    else
        printf("B T (4C + 4C/tp + 2F/tp + 4)%s\n"
               "  = %d x %d x (4x%d + 4x%d/%d + 2x%d/%d + 4)%s = %.0f elements = %s\n",
               sel ? "" : " + B (nh/tp) T^2", mb, ptdp_gpt(m)->seq_len, m->hidden, m->hidden, c->tp, m->ffn, c->tp,
               probs, e, kept_bytes(c, mb, b, sizeof b));
    if (sel)
        printf("  (the B (nh/tp) T^2 = %.0f attention probabilities are computed again in the backward)\n",
               (double)mb * (ptdp_gpt(m)->heads / c->tp) * ptdp_gpt(m)->seq_len * ptdp_gpt(m)->seq_len);
    print_moe_acts(c, mb);
    if (c->recompute)
        print_full_recompute(c, lr);
}

static void gpt_samples(const ptdp_model_config *m, bool *tokens, int *x_cols, int *y_cols)
{
    *tokens = true;
    *x_cols = ptdp_gpt(m)->seq_len;
    *y_cols = ptdp_gpt(m)->seq_len;
}

/* ------------------------------------------------------- `ptdp plan` */

/* The planner's largest values: a cluster's GPT, never run here. */
static const ptdp_model_flag gpt_plan_flags[] = {
    { "--heads", PTDP_GPT_OWN(heads), 1, { 1 << 20, 1 << 20 }, false },
    { "--seq-len", PTDP_GPT_OWN(seq_len), 2, { 1 << 24, 1 << 24 }, false },
    { "--vocab", PTDP_GPT_OWN(vocab), 1, { 1 << 26, 1 << 26 }, false },
    { "--vocab-multiple", PTDP_GPT_OWN(vocab_multiple), 1, { 1 << 16, 1 << 16 }, false },
    { "--moe-experts", PTDP_GPT_OWN(moe_experts), 0, { 1 << 12, 1 << 12 }, false },
    { "--moe-every", PTDP_GPT_OWN(moe_every), 1, { 1 << 20, 1 << 20 }, false },
    { "--moe-dense-first", PTDP_GPT_OWN(moe_dense_first), 0, { 1 << 20, 1 << 20 }, false },
    { "--moe-shared-experts", PTDP_GPT_OWN(moe_shared_experts), 0, { 1 << 12, 1 << 12 }, false },
    { "--moe-ffn", PTDP_GPT_OWN(moe_ffn), 1, { 1 << 26, 1 << 26 }, false },
    { "--moe-top-k", PTDP_GPT_OWN(moe_top_k), 1, { 1 << 12, 1 << 12 }, false },
    { "--moe-capacity-factor", PTDP_GPT_OWN(moe_capacity), -1000000, { 1000000, 1000000 }, .real = true },
};

static void gpt_plan_help(FILE *out)
{
    fprintf(out,
            "  --model gpt         a GPT: --heads a --seq-len s --vocab V (required)\n"
            "  --vocab-multiple K  the vocabulary is padded to a multiple of K x tp (default 64)\n"
            "  --moe-experts E     a mixture of E experts in place of every --moe-every n'th block's MLP\n"
            "                      (default 1), each token to --moe-top-k k (default 2) experts of width\n"
            "                      --moe-ffn F_e (default --ffn), at most --moe-capacity-factor c (omitted:\n"
            "                      dropless); priced under uniform routing (--explain says so);\n"
            "                      --moe-dense-first K and --moe-shared-experts S as ptdp train's\n");
}

/* As `ptdp train`'s finish: the mixture's flags as typed (moe_cli.h: a
 * typed capacity factor above 0; the rest is the model's check). */
static int gpt_plan_finish(ptdp_model_config *m, const char *const *given, int n)
{
    const ptdp_moe_settings moe = ptdp_gpt_moe_settings(m);
    return ptdp_moe_cli_typed("plan", given, n, &moe, "the dense MLP") != 0 ? PTDP_EXIT_USAGE : 0;
}

/* Mirrors the GPT's tensors (gpt_model.c): the embeddings V_pad h and s h;
 * a block's two LayerNorms 4h, attention 4h² + 4h, MLP 2 h ffn + ffn + h;
 * the final LayerNorm 2h; the head is tied to the embedding. */
static double gpt_plan_parameters(const ptdp_model_config *m)
{
    const ptdp_gpt_settings *gpt = ptdp_gpt(m);
    const double h = m->hidden, F = m->ffn;
    const int vp = gpt->vocab_padded > 0 ? gpt->vocab_padded : ptdp_gpt_pad_vocab(gpt->vocab, gpt->vocab_multiple, 1);
    double n = (double)vp * h + (double)gpt->seq_len * h + m->layers * (4 * h * h + 2 * h * F + 9 * h + F) + 2 * h;
    /* a mixture in place of an MLP: the router E h and E experts of 2 h F_e + F_e + h */
    const double Fe = ptdp_gpt_moe_ffn(m), E = gpt->moe_experts;
    for (int l = 0; l < m->layers && E > 0; l++)
        if (ptdp_gpt_block_is_moe(m, l))
            n += E * h + E * (2 * h * Fe + Fe + h) - (2 * h * F + F + h);
    return n;
}

static void gpt_plan_header(FILE *f, const ptdp_model_config *m, const char *params, long long batch)
{
    const ptdp_gpt_settings *gpt = ptdp_gpt(m);
    fprintf(f, "GPT of %s parameters (layers %d, hidden %d, heads %d, ffn %d, seq-len %d, vocab %d), batch %lld\n",
            params, m->layers, m->hidden, gpt->heads, m->ffn, gpt->seq_len, gpt->vocab, batch);
    if (gpt->moe_experts > 0) {
        char every[32] = "";
        if (gpt->moe_every > 1)
            snprintf(every, sizeof every, "%d%s ", gpt->moe_every,
                     gpt->moe_every == 2 ? "nd" : gpt->moe_every == 3 ? "rd" : "th");
        fprintf(f, "a mixture of %d experts in every %sblock's MLP: top-%d, expert ffn %d, ", gpt->moe_experts, every,
                gpt->moe_top_k, ptdp_gpt_moe_ffn(m));
        if (gpt->moe_capacity > 0)
            fprintf(f, "capacity factor %g\n", gpt->moe_capacity);
        else
            fprintf(f, "dropless\n");
    }
}

static void gpt_plan_train_flags(FILE *f, const ptdp_model_config *m)
{
    fprintf(f, " --model gpt --layers %d --hidden %d --ffn %d --heads %d --seq-len %d --vocab %d", m->layers,
            m->hidden, m->ffn, ptdp_gpt(m)->heads, ptdp_gpt(m)->seq_len, ptdp_gpt(m)->vocab);
    if (ptdp_gpt(m)->vocab_multiple != 64)
        fprintf(f, " --vocab-multiple %d", ptdp_gpt(m)->vocab_multiple);
    const ptdp_gpt_settings *g = ptdp_gpt(m);
    if (g->moe_experts > 0)
        fprintf(f, " \\\n      --moe-experts %d --moe-top-k %d --moe-ffn %d --moe-every %d", g->moe_experts,
                g->moe_top_k, ptdp_gpt_moe_ffn(m), g->moe_every);
    if (g->moe_experts > 0 && g->moe_capacity > 0)
        fprintf(f, " --moe-capacity-factor %g", g->moe_capacity);
}

static void gpt_plan_flops(FILE *f, const ptdp_model_config *m, long long batch, double model_flops, double tflops)
{
    const double h = m->hidden, s = ptdp_gpt(m)->seq_len, L = m->layers, V = ptdp_gpt(m)->vocab;
    if (ptdp_gpt(m)->moe_experts > 0) {   /* the dense count, each mixture's MLP replaced by what it computes */
        fprintf(f, "  model     72 B s L h² (1 + s/6h + V/12Lh) + 3 B s h (4 k F_e + 2 E - 16 h) a mixture's block\n"
                "            (its k experts of width F_e and the router in place of the 4h MLP) = %.4g\n"
                "            -> %.1f TFLOP/s per GPU (model FLOPs / (step x N))\n", model_flops, tflops);
        if (ptdp_gpt(m)->moe_capacity > 0)   /* which rows each count has (gpt_plan.c's step_flops) */
            fprintf(f, "            every token's k experts, dropped or not (the MFU convention); the hardware\n"
                    "            count below has only the rows the experts run, at most ceil(c k s / E) an expert\n"
                    "            a sequence: 4 B h F_e x those kept in place of 4 B s h F_e k\n");
        else
            fprintf(f, "            every token's k experts, as the hardware count below (dropless: every choice runs)\n");
        return;
    }
    fprintf(f, "  model     72 B s L h² (1 + s/6h + V/12Lh) = 72 x %lld x %g x %g x %g² x (1 + %.4g + %.4g)\n"
            "            = %.4g  -> %.1f TFLOP/s per GPU (model FLOPs / (step x N))\n", batch, s, L, h,
            s / (6 * h), V / (12 * L * h), model_flops, tflops);
}

/* ---- `ptdp bench train` and `ptdp bench zero` ------------------------------------ */

/* `ptdp bench train --model gpt`: V 256, T 256, C 512, 8 heads, 4 layers,
 * F 2048, batch 8 sequences, one thread, as PyTorch's in bench/train.sh. */
static void gpt_bench_defaults(ptdp_model_config *m, int *batch)
{
    ptdp_gpt(m)->vocab = 256;
    ptdp_gpt(m)->seq_len = 256;
    m->hidden = 512;
    ptdp_gpt(m)->heads = 8;
    m->layers = 4;
    m->ffn = 2048;
    *batch = 8;
}

static void gpt_bench_describe(FILE *f, const ptdp_model_config *m)
{
    fprintf(f, "gpt, V %d (padded to %d), T %d, C %d, %d heads, %d layers, F %d", ptdp_gpt(m)->vocab,
            ptdp_gpt(m)->vocab_padded, ptdp_gpt(m)->seq_len, m->hidden, ptdp_gpt(m)->heads, m->layers, m->ffn);
}

static void gpt_bench_json_keys(FILE *f, const ptdp_model_config *m, int batch, double step_s)
{
    fprintf(f, "\"seq_len\": %d, \"heads\": %d, \"vocab\": %d, \"vocab_padded\": %d, \"tokens_per_s\": %.6g, ",
            ptdp_gpt(m)->seq_len, ptdp_gpt(m)->heads, ptdp_gpt(m)->vocab, ptdp_gpt(m)->vocab_padded,
            (double)batch * ptdp_gpt(m)->seq_len / step_s);
}

/* ---- `ptdp figures` ----------------------------------------------------------- */

/* The default GPT, as `ptdp train --model gpt` sets it, on the built-in
 * corpus (its vocabulary from the corpus's tokens, padded for tp = 1). */
static int gpt_figure_model(ptdp_model_config *cfg, unsigned char **corpus, char *msg, size_t msglen)
{
    *cfg = ptdp_gpt_default_config();
    *corpus = NULL;
    size_t len = ptdp_gpt_builtin_corpus(ptdp_train_defaults().seed, PTDP_GPT_CORPUS_LINES, corpus);
    if (len == 0) {
        free(*corpus);
        *corpus = NULL;
        snprintf(msg, msglen, "out of host memory making the built-in corpus");
        return PTDP_ENOMEM;
    }
    for (size_t i = 0; i < len; i++)
        if ((*corpus)[i] + 1 > ptdp_gpt(cfg)->vocab)
            ptdp_gpt(cfg)->vocab = (*corpus)[i] + 1;
    ptdp_gpt(cfg)->corpus = *corpus;
    ptdp_gpt(cfg)->corpus_len = len;
    ptdp_gpt(cfg)->vocab_padded = ptdp_gpt_pad_vocab(ptdp_gpt(cfg)->vocab, ptdp_gpt(cfg)->vocab_multiple, 1);
    return PTDP_OK;
}

static const ptdp_model_figure gpt_figures[] = {
    { "attention_tp",       "lesson 07: tp = 2 splits a GPT's heads (c_attn q/k/v rows, c_proj columns) and its vocabulary",
      fig_attention_tp },
    { "sp_block",           "sequence parallelism at tp = 2: which tensors of a GPT block are split along T, which by columns",
      fig_sp_block },
    { "moe_dispatch",       "a mixture of experts at ep = 2: which tokens go to which expert, which travel in the all-to-all",
      fig_moe_dispatch },
    { "attention_tiles",    "causal attention as the whole matrix and in tiles (--attention tiled): the scores each "
                            "computes, what each keeps (two real runs)", fig_attention_tiles },
};

const ptdp_model_cli ptdp_gpt_cli = {
    .ops = &ptdp_gpt_ops,
    .flags = gpt_flags,
    .nflags = (int)(sizeof gpt_flags / sizeof gpt_flags[0]),
    .defaults = gpt_defaults,
    .finish = gpt_finish,
    .reseed = gpt_reseed,
    .help = gpt_help,
    .prepare = gpt_prepare,
    .describe = gpt_describe,
    .report_keys = gpt_report_keys,
    .ep_uniform_bytes = gpt_ep_uniform_bytes,
    .summary = gpt_summary,
    .report_stats = gpt_report_stats,
    .print_stats = gpt_print_stats,
    .samples = gpt_samples,
    .demo = ptdp_gpt_demo,
    .demo_summary = "the same for a small GPT (attention split by heads, a tied embedding), then it adds",
    .plan_flags = gpt_plan_flags,
    .nplan_flags = (int)(sizeof gpt_plan_flags / sizeof gpt_plan_flags[0]),
    .plan_help = gpt_plan_help,
    .plan_finish = gpt_plan_finish,
    .plan_parameters = gpt_plan_parameters,
    .plan_header = gpt_plan_header,
    .plan_train_flags = gpt_plan_train_flags,
    .plan_flops = gpt_plan_flops,
    .bench_defaults = gpt_bench_defaults,
    .bench_describe = gpt_bench_describe,
    .bench_json_keys = gpt_bench_json_keys,
    .bench_gemm_target = 1.08,  /* its softmax, LayerNorms and GELU fused into as few passes as they allow */
    .bench_torch_target = 0.85,
    .bench_activations = ptdp_gpt_bench_activations,
    .bench_moe = ptdp_gpt_bench_moe,
    .figure_model = gpt_figure_model,
    .figures = gpt_figures,
    .nfigures = (int)(sizeof gpt_figures / sizeof gpt_figures[0]),
};
