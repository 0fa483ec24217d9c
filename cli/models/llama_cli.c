/*
 * llama_cli.c — the llama on the command line: its flags and data, its
 * help, and what `ptdp train` prints and reports about it (model_flags.h).
 *
 *     flag            field          smallest   largest (train, bench)
 *     --heads         heads          1          2^16, 1024
 *     --kv-heads      kv_heads       1          2^16, 1024   (default --heads; divides it)
 *     --seq-len       seq_len        2          2^20, 2^16
 *     --vocab         vocab          1          2^24, 2^20   (not padded: Meta's [V, C])
 *     --ffn-multiple  ffn_multiple   1          2^20         (Meta's multiple_of, 256)
 *     --norm-eps      norm_eps       real, above 0 (1e-5)
 *     --rope-theta    rope_theta     real, above 0 (500000)
 *     --data FILE     as the GPT's (gpt_text.h): its bytes, or the built-in sums
 *     --moe-*         a mixture of SwiGLU experts: the six flags every model's
 *                     mixture takes (moe_cli.h)
 *
 *   --ffn F as given, else Meta's ModelArgs rule from --hidden C:
 *     F = m ceil(int(2 (4 C) / 3) / m),  m = --ffn-multiple
 *
 *   header   model llama: hidden 64, 4 heads of 16, 2 kv heads, ffn 256, …
 *   report   "model": {"name": "llama", …, "heads": 4, "kv_heads": 2, …}
 *            with experts, their settings, and "run"'s experts (moe_cli.h)
 */
#include "../model_flags.h"

#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"
#include "ptdp/json.h"
#include "ptdp/llama.h"

#include "gpt_text.h"
#include "moe_cli.h"

static const ptdp_model_flag llama_flags[] = {
    { "--heads", PTDP_LLAMA_OWN(heads), 1, { 1 << 16, 1024 }, false },
    { "--kv-heads", PTDP_LLAMA_OWN(kv_heads), 1, { 1 << 16, 1024 }, false },
    { "--seq-len", PTDP_LLAMA_OWN(seq_len), 2, { 1 << 20, 1 << 16 }, false },
    { "--vocab", PTDP_LLAMA_OWN(vocab), 1, { 1 << 24, 1 << 20 }, false },
    { "--ffn-multiple", PTDP_LLAMA_OWN(ffn_multiple), 1, { 1 << 20, 1 << 20 }, false },
    { "--norm-eps", PTDP_LLAMA_OWN(norm_eps), -1, { 1, 1 }, .real = true },
    { "--rope-theta", PTDP_LLAMA_OWN(rope_theta), -1000000000, { 1000000000, 1000000000 }, .real = true },
    { "--data", PTDP_FLAG_PATH, 0, { 0, 0 }, false },
    PTDP_MOE_FLAG_ROWS(PTDP_LLAMA_OWN(moe.experts), PTDP_LLAMA_OWN(moe.every), PTDP_LLAMA_OWN(moe.ffn),
                       PTDP_LLAMA_OWN(moe.top_k), PTDP_LLAMA_OWN(moe.capacity), PTDP_LLAMA_OWN(moe.aux_loss)),
    PTDP_MOE_DEEPSEEK_FLAG_ROWS(PTDP_LLAMA_OWN(moe.score), PTDP_LLAMA_OWN(moe.route_scale),
                                PTDP_LLAMA_OWN(moe.bias_update)),
    PTDP_MOE_GROUP_FLAG_ROWS(PTDP_LLAMA_OWN(moe.groups), PTDP_LLAMA_OWN(moe.group_top_k)),
    PTDP_MOE_Z_LOSS_FLAG_ROW(PTDP_LLAMA_OWN(moe.z_loss)),
    PTDP_MOE_DENSE_FIRST_FLAG_ROW(PTDP_LLAMA_OWN(moe.dense_first)),
    PTDP_MOE_SHARED_FLAG_ROW(PTDP_LLAMA_OWN(moe.shared)),
};

/* The defaults, F left to Meta's rule (finish) from whatever --hidden says. */
static ptdp_model_config llama_defaults(void)
{
    ptdp_model_config c = ptdp_llama_default_config();
    c.ffn = 0;
    return c;
}

static int llama_finish(const char *cmd, ptdp_model_flags *f)
{
    ptdp_model_config *m = &f->cfg;
    ptdp_llama_settings *s = ptdp_llama(m);
    const int own = ptdp_llama(ptdp_model_flags_defaults(f, &ptdp_llama_ops))->vocab;
    if (ptdp_gpt_cli_text(cmd, f, &s->vocab, own, s->seq_len, &s->line) != 0)
        return PTDP_EXIT_USAGE;
    s->corpus = f->corpus;
    s->corpus_len = f->corpus_len;
    if (!(s->norm_eps > 0))
        return ptdp_usage_error(cmd, "--norm-eps %g: must be above 0 (RMSNorm divides by sqrt(mean(x^2) + eps); "
                                "Llama 3's is 1e-5)", s->norm_eps);
    if (!(s->rope_theta > 0))
        return ptdp_usage_error(cmd, "--rope-theta %g: must be above 0 (the rotary base; Llama 3's is 500000)",
                                s->rope_theta);
    if (ptdp_model_flags_given(f, "--ffn") && ptdp_model_flags_given(f, "--ffn-multiple"))
        return ptdp_usage_error(cmd, "--ffn-multiple %d makes --ffn from --hidden (Meta's rule), and --ffn %d is "
                                "given: leave one out", s->ffn_multiple, m->ffn);
    if (!ptdp_model_flags_given(f, "--ffn"))
        m->ffn = ptdp_llama_meta_ffn(m->hidden, s->ffn_multiple);
    return ptdp_moe_cli_finish(cmd, f, &s->moe, "the dense SwiGLU feed-forward") != 0 ? PTDP_EXIT_USAGE : 0;
}

static int llama_reseed(const char *cmd, ptdp_model_flags *f, uint64_t seed, ptdp_model_config *into)
{
    if (ptdp_gpt_cli_text_reseed(cmd, f, seed) != 0)
        return PTDP_EXIT_USAGE;
    ptdp_llama(&f->cfg)->corpus = ptdp_llama(into)->corpus = f->corpus;
    ptdp_llama(&f->cfg)->corpus_len = ptdp_llama(into)->corpus_len = f->corpus_len;
    ptdp_llama(into)->line = ptdp_llama(&f->cfg)->line;
    return 0;
}

static void llama_help(FILE *out, const ptdp_model_config *d)
{
    (void)d;
    ptdp_model_config g = ptdp_llama_default_config();
    const ptdp_llama_settings *s = ptdp_llama(&g);
    fprintf(out,
            "  --kv-heads K        the llama's key/value heads (default --heads; must divide it), its\n"
            "                      --heads --seq-len --vocab --data as the GPT's (default %d heads, %d)\n"
            "  --ffn-multiple m    the llama's --ffn when not given: Meta's m ceil(int(8 hidden / 3) / m)\n"
            "                      (default %d, Meta's multiple_of)\n"
            "  --norm-eps E --rope-theta T   the llama's RMSNorm eps and rotary base (default %g, %g)\n"
            "  --moe-experts E ... the llama's mixture of E SwiGLU experts (Mixtral's), with the GPT's\n"
            "                      --moe-every --moe-top-k --moe-ffn --moe-capacity-factor --moe-aux-loss\n"
            "  --moe-score S       either model's router: softmax (default, Mixtral's) or sigmoid\n"
            "                      (DeepSeek-V3's: the top k of sigmoid(z) + an expert bias, gates\n"
            "                      --moe-route-scale x s_j / sum s; --moe-bias-update u moves the bias\n"
            "                      after each step: b_e += u sign(mean load - load_e))\n"
            "  --moe-groups G --moe-group-top-k M   a token's top k only among the experts of its M best\n"
            "                      of G groups of E/G (a group's score: its top floor(k/M) values)\n"
            "  --moe-z-loss beta   either router: ST-MoE's z-loss, beta x the mean over tokens of\n"
            "                      (log sum_e exp z_e)^2 (default 0: none)\n"
            "  --moe-dense-first K blocks 0..K-1 stay dense (DeepSeek's first layers); --moe-every counts\n"
            "                      from block K (default 0)\n"
            "  --moe-shared-experts S   either model: S shared experts every token takes beside its k\n"
            "                      routed ones (DeepSeek's), one FFN of width S x the expert's (default 0)\n",
            s->heads, s->seq_len, PTDP_LLAMA_FFN_MULTIPLE, PTDP_LLAMA_NORM_EPS, PTDP_LLAMA_ROPE_THETA);
}

/* What tells the llama's checkpoints with experts from dense ones (moe_cli.h). */
static const ptdp_moe_cli_names llama_moe_names = {
    "llama", ".feed_forward.gate.weight", "no layers.*.feed_forward.gate.weight, one w1 per block",
};

/* `ptdp train`: no dropout (Meta's llama has none); a --load of a dense
 * llama into a run with experts, or the reverse, refused by name. */
static int llama_prepare(ptdp_train_config *c, const ptdp_model_flags *typed, const char *load)
{
    (void)typed;
    char msg[512];
    ptdp_st_file *f;
    if (c->dropout > 0)
        return ptdp_usage_error("train", "--dropout %g: the llama model has no dropout (Meta's has none): leave "
                                "--dropout out", c->dropout);
    if (load == NULL)
        return 0;
    if (ptdp_st_open(load, &f, msg, sizeof msg) != 0) {
        fprintf(stderr, "ptdp train: --load %s\n", msg);
        return PTDP_EXIT_FAIL;
    }
    const int rc = ptdp_moe_cli_load_matches(load, f, &ptdp_llama(&c->model)->moe, &llama_moe_names);
    ptdp_st_close(f);
    return rc;
}

static void llama_describe(const ptdp_train_config *c, int mb, const char *data_name)
{
    const ptdp_model_config *m = &c->model;
    const ptdp_llama_settings *s = ptdp_llama(m);
    printf("\n  model llama: hidden %d, %d heads of %d, %d kv heads, ffn %d, %d layers, seq-len %d, vocab %d, "
           "rope theta %g, norm eps %g; batch %d sequences, %d micro-batch%s of %d\n  data: %zu tokens (%s)\n",
           m->hidden, s->heads, m->hidden / s->heads, ptdp_llama_kv_heads(m), m->ffn, m->layers, s->seq_len,
           s->vocab, s->rope_theta, s->norm_eps, c->batch, c->micro_batches, c->micro_batches == 1 ? "" : "es", mb,
           s->corpus_len, data_name ? data_name : "the built-in lines of sums");
    if (s->moe.experts > 0)
        printf("  a mixture of %d SwiGLU experts of width %d in %d of %d blocks (every %d): top-%d, %s%g\n",
               s->moe.experts, ptdp_moe_ffn(&s->moe, m->ffn), ptdp_moe_blocks(&s->moe, m->layers), m->layers,
               s->moe.every, s->moe.top_k, s->moe.capacity > 0 ? "capacity factor " : "dropless, aux loss ",
               s->moe.capacity > 0 ? s->moe.capacity : s->moe.aux_loss);
}

#define J(x) ptdp_json_number((x), (char[PTDP_JSON_NUMBER_MAX]){ 0 })

static void llama_report_keys(FILE *f, const ptdp_train_config *c)
{
    const ptdp_model_config *m = &c->model;
    const ptdp_llama_settings *s = ptdp_llama(m);
    fprintf(f, ", \"hidden\": %d, \"ffn\": %d, \"layers\": %d, \"heads\": %d, \"kv_heads\": %d, \"seq_len\": %d, "
            "\"vocab\": %d, \"norm_eps\": %s, \"rope_theta\": %s", m->hidden, m->ffn, m->layers, s->heads,
            ptdp_llama_kv_heads(m), s->seq_len, s->vocab, J(s->norm_eps), J(s->rope_theta));
    ptdp_moe_cli_report_keys(f, &s->moe, m->ffn);
}

/* A mixture's EP estimate and the run's experts (moe_cli.h). */
static double llama_ep_uniform_bytes(const ptdp_train_config *c)
{
    return ptdp_moe_cli_ep_uniform_bytes(c, &ptdp_llama(&c->model)->moe, ptdp_llama(&c->model)->seq_len);
}

static void llama_report_stats(FILE *f, const ptdp_train_config *c, const ptdp_train_result *res)
{
    ptdp_moe_cli_report_stats(f, c, res, &ptdp_llama(&c->model)->moe, ptdp_llama(&c->model)->seq_len);
}

static void llama_print_stats(const ptdp_train_config *c, const ptdp_train_result *res)
{
    ptdp_moe_cli_print_stats(c, res, &ptdp_llama(&c->model)->moe, ptdp_llama(&c->model)->seq_len);
}

static void llama_samples(const ptdp_model_config *m, bool *tokens, int *x_cols, int *y_cols)
{
    *tokens = true;
    *x_cols = ptdp_llama(m)->seq_len;
    *y_cols = ptdp_llama(m)->seq_len;
}

/* ------------------------------------------------------- `ptdp plan` */

/* The planner's largest values: a cluster's llama, never run here. */
static const ptdp_model_flag llama_plan_flags[] = {
    { "--heads", PTDP_LLAMA_OWN(heads), 1, { 1 << 20, 1 << 20 }, false },
    { "--kv-heads", PTDP_LLAMA_OWN(kv_heads), 1, { 1 << 20, 1 << 20 }, false },
    { "--seq-len", PTDP_LLAMA_OWN(seq_len), 2, { 1 << 24, 1 << 24 }, false },
    { "--vocab", PTDP_LLAMA_OWN(vocab), 1, { 1 << 26, 1 << 26 }, false },
    { "--ffn-multiple", PTDP_LLAMA_OWN(ffn_multiple), 1, { 1 << 20, 1 << 20 }, false },
    { "--norm-eps", PTDP_LLAMA_OWN(norm_eps), -1, { 1, 1 }, .real = true },
    { "--rope-theta", PTDP_LLAMA_OWN(rope_theta), -1000000000, { 1000000000, 1000000000 }, .real = true },
    { "--moe-experts", PTDP_LLAMA_OWN(moe.experts), 0, { 1 << 12, 1 << 12 }, false },
    { "--moe-every", PTDP_LLAMA_OWN(moe.every), 1, { 1 << 20, 1 << 20 }, false },
    { "--moe-dense-first", PTDP_LLAMA_OWN(moe.dense_first), 0, { 1 << 20, 1 << 20 }, false },
    { "--moe-shared-experts", PTDP_LLAMA_OWN(moe.shared), 0, { 1 << 12, 1 << 12 }, false },
    { "--moe-ffn", PTDP_LLAMA_OWN(moe.ffn), 1, { 1 << 26, 1 << 26 }, false },
    { "--moe-top-k", PTDP_LLAMA_OWN(moe.top_k), 1, { 1 << 12, 1 << 12 }, false },
    { "--moe-capacity-factor", PTDP_LLAMA_OWN(moe.capacity), -1000000, { 1000000, 1000000 }, .real = true },
    /* the router's choice of rows: priced alike (uniform routing), checked as ptdp train checks them */
    { "--moe-score", PTDP_LLAMA_OWN(moe.score), PTDP_FLAG_WORDS, { 1, 1 }, false },
    { "--moe-groups", PTDP_LLAMA_OWN(moe.groups), 1, { 1 << 12, 1 << 12 }, false },
    { "--moe-group-top-k", PTDP_LLAMA_OWN(moe.group_top_k), 1, { 1 << 12, 1 << 12 }, false },
};

static void llama_plan_help(FILE *out)
{
    fprintf(out,
            "  --model llama       a Llama: --heads H --seq-len s --vocab V (required), --kv-heads K\n"
            "                      (default H; divides it), --ffn F or Meta's rule from --hidden with\n"
            "                      --ffn-multiple m (default %d); --norm-eps, --rope-theta as ptdp train's;\n"
            "                      a mixture of SwiGLU experts with the GPT's --moe-* flags, and DeepSeek's\n"
            "                      --moe-score sigmoid (its selection bias), --moe-groups G --moe-group-top-k M,\n"
            "                      --moe-dense-first K, --moe-shared-experts S\n",
            PTDP_LLAMA_FFN_MULTIPLE);
}

static bool typed(const char *const *given, int n, const char *flag)
{
    for (int i = 0; i < n; i++)
        if (strcmp(given[i], flag) == 0)
            return true;
    return false;
}

/* As `ptdp train`'s finish: --ffn or Meta's rule, not both; eps and theta
 * above 0 (the shapes are the model's check's, plan_cmd.c). */
static int llama_plan_finish(ptdp_model_config *m, const char *const *given, int n)
{
    ptdp_llama_settings *s = ptdp_llama(m);
    if (!(s->norm_eps > 0))
        return ptdp_usage_error("plan", "--norm-eps %g: must be above 0 (RMSNorm divides by sqrt(mean(x^2) + eps); "
                                "Llama 3's is 1e-5)", s->norm_eps);
    if (!(s->rope_theta > 0))
        return ptdp_usage_error("plan", "--rope-theta %g: must be above 0 (the rotary base; Llama 3's is 500000)",
                                s->rope_theta);
    if (typed(given, n, "--ffn") && typed(given, n, "--ffn-multiple"))
        return ptdp_usage_error("plan", "--ffn-multiple %d makes --ffn from --hidden (Meta's rule), and --ffn %d is "
                                "given: leave one out", s->ffn_multiple, m->ffn);
    if (!typed(given, n, "--ffn"))
        m->ffn = ptdp_llama_meta_ffn(m->hidden, s->ffn_multiple);
    return ptdp_moe_cli_typed("plan", given, n, &s->moe, "the dense SwiGLU feed-forward") != 0 ? PTDP_EXIT_USAGE : 0;
}

/* Mirrors llama_model.c's tensors: tok_embeddings and output V C each; a
 * block's wq and wo C H d, wk and wv C K d, w1 w2 w3 C F, two norms C; the
 * final norm C. */
static double llama_plan_parameters(const ptdp_model_config *m)
{
    const ptdp_llama_settings *s = ptdp_llama(m);
    const double C = m->hidden, F = m->ffn, V = s->vocab, Kd = (double)ptdp_llama_kv_heads(m) * (C / s->heads);
    /* a mixture in place of a SwiGLU (llama_moe.c): E experts of 3 C F_e,
     * the shared experts' 3 C S F_e, the gate E C (and its bias E) */
    const ptdp_moe_settings *e = &s->moe;
    const double Fe = ptdp_moe_ffn(e, m->ffn), E = e->experts;
    const double moe = 3 * C * Fe * (E + e->shared) + E * C + (e->score == PTDP_MOE_SIGMOID ? E : 0) - 3 * C * F;
    return 2 * V * C + m->layers * (2 * C * C + 2 * C * Kd + 3 * C * F + 2 * C) + C +
           (E > 0 ? ptdp_moe_blocks(e, m->layers) * moe : 0);
}

static void llama_plan_header(FILE *f, const ptdp_model_config *m, const char *params, long long batch)
{
    const ptdp_llama_settings *s = ptdp_llama(m);
    fprintf(f, "llama of %s parameters (layers %d, hidden %d, heads %d, kv heads %d, ffn %d, seq-len %d, vocab %d), "
            "batch %lld\n", params, m->layers, m->hidden, s->heads, ptdp_llama_kv_heads(m), m->ffn, s->seq_len,
            s->vocab, batch);
    const ptdp_moe_settings *e = &s->moe;
    if (e->experts > 0) {
        fprintf(f, "a mixture of %d SwiGLU experts in %d of the %d blocks: top-%d, expert ffn %d", e->experts,
                ptdp_moe_blocks(e, m->layers), m->layers, e->top_k, ptdp_moe_ffn(e, m->ffn));
        if (e->shared > 0)
            fprintf(f, ", %d shared", e->shared);
        if (e->capacity > 0)
            fprintf(f, ", capacity factor %g\n", e->capacity);
        else
            fprintf(f, ", dropless\n");
    }
}

static void llama_plan_train_flags(FILE *f, const ptdp_model_config *m)
{
    const ptdp_llama_settings *s = ptdp_llama(m);
    fprintf(f, " --model llama --layers %d --hidden %d --ffn %d --heads %d --kv-heads %d --seq-len %d --vocab %d",
            m->layers, m->hidden, m->ffn, s->heads, ptdp_llama_kv_heads(m), s->seq_len, s->vocab);
    if (s->norm_eps != PTDP_LLAMA_NORM_EPS)
        fprintf(f, " --norm-eps %g", s->norm_eps);
    if (s->rope_theta != PTDP_LLAMA_ROPE_THETA)
        fprintf(f, " --rope-theta %g", s->rope_theta);
    const ptdp_moe_settings *e = &s->moe;
    if (e->experts == 0)
        return;
    fprintf(f, " \\\n      --moe-experts %d --moe-top-k %d --moe-ffn %d --moe-every %d", e->experts, e->top_k,
            ptdp_moe_ffn(e, m->ffn), e->every);
    if (e->capacity > 0)
        fprintf(f, " --moe-capacity-factor %g", e->capacity);
    if (e->dense_first > 0)
        fprintf(f, " --moe-dense-first %d", e->dense_first);
    if (e->shared > 0)
        fprintf(f, " --moe-shared-experts %d", e->shared);
    if (e->score == PTDP_MOE_SIGMOID)
        fprintf(f, " --moe-score sigmoid");
    if (e->groups > 1)
        fprintf(f, " --moe-groups %d --moe-group-top-k %d", e->groups, e->group_top_k > 0 ? e->group_top_k : 1);
}

static void llama_plan_flops(FILE *f, const ptdp_model_config *m, long long batch, double model_flops,
                             double tflops)
{
    const ptdp_llama_settings *s = ptdp_llama(m);
    const double C = m->hidden, T = s->seq_len, Kd = (double)ptdp_llama_kv_heads(m) * (C / s->heads);
    if (s->moe.experts > 0) {   /* llama_plan.c's step_flops */
        fprintf(f, "  model     3 B s (L (4 h² + 4 h K d + 6 h F + 4 s h) + 2 h V) + 3 B s h (6 F_e (k + S) + 2 E - 6 F)\n"
                "            a mixture's block (its k routed and S shared experts of width F_e and the gate in\n"
                "            place of the SwiGLU) = %.4g  -> %.1f TFLOP/s per GPU (model FLOPs / (step x N));\n"
                "            every token's k experts, dropped by a capacity or not (the MFU convention)\n",
                model_flops, tflops);
        return;
    }
    fprintf(f, "  model     3 B s (L (4 h² + 4 h K d + 6 h F + 4 s h) + 2 h V)   (wq wo, wk wv, w1 w2 w3, the\n"
            "            attention's whole square, the head; the backward twice the forward)\n"
            "            = 3 x %lld x %g x (%d x (%.4g + %.4g + %.4g + %.4g) + %.4g)\n"
            "            = %.4g  -> %.1f TFLOP/s per GPU (model FLOPs / (step x N))\n", batch, T, m->layers,
            4 * C * C, 4 * C * Kd, 6 * C * m->ffn, 4 * T * C, 2 * C * s->vocab, model_flops, tflops);
}

const ptdp_model_cli ptdp_llama_cli = {
    .ops = &ptdp_llama_ops,
    .flags = llama_flags,
    .nflags = (int)(sizeof llama_flags / sizeof llama_flags[0]),
    .defaults = llama_defaults,
    .finish = llama_finish,
    .reseed = llama_reseed,
    .help = llama_help,
    .prepare = llama_prepare,
    .describe = llama_describe,
    .report_keys = llama_report_keys,
    .ep_uniform_bytes = llama_ep_uniform_bytes,
    .report_stats = llama_report_stats,
    .print_stats = llama_print_stats,
    .samples = llama_samples,
    .plan_flags = llama_plan_flags,
    .nplan_flags = (int)(sizeof llama_plan_flags / sizeof llama_plan_flags[0]),
    .plan_help = llama_plan_help,
    .plan_parameters = llama_plan_parameters,
    .plan_header = llama_plan_header,
    .plan_train_flags = llama_plan_train_flags,
    .plan_flops = llama_plan_flops,
    .plan_finish = llama_plan_finish,
};
