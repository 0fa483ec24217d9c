/*
 * model_flags.c — one table of the model's flags, and the readers over it.
 *
 *     flag              field of ptdp_model_config   smallest   model
 *     --d-in            d_in                          1          mlp
 *     --hidden          hidden                        1          both
 *     --ffn             ffn                           1          both
 *     --layers          layers                        1          both
 *     --classes         classes                       2          mlp   (softmax over one class learns nothing)
 *     --heads           heads                         1          gpt
 *     --seq-len         seq_len                       2          gpt   (a position and the token after it)
 *     --vocab           vocab                         1          gpt
 *     --vocab-multiple  vocab_multiple                1          gpt
 *     --model, --data                                            (read apart)
 *
 * The largest values come from the command (ptdp_model_flag_limits), since
 * what is reasonable differs: `ptdp train` takes what an arena can hold,
 * `ptdp bench train` keeps to what a benchmark run can finish.
 */
#include "model_flags.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/file.h"
#include "ptdp/gpt.h"
#include "ptdp/models.h"

enum { MLP = 1, GPT = 2, BOTH = 3 };

static const struct {
    const char *name;
    int smallest, models;
} flags[] = {
    { "--d-in", 1, MLP }, { "--hidden", 1, BOTH }, { "--ffn", 1, BOTH }, { "--layers", 1, BOTH },
    { "--classes", 2, MLP }, { "--heads", 1, GPT }, { "--seq-len", 2, GPT }, { "--vocab", 1, GPT },
    { "--vocab-multiple", 1, GPT }, { "--model", 0, BOTH }, { "--data", 0, GPT },
};
#define NFLAGS (int)(sizeof flags / sizeof flags[0])
#define MODEL_FLAG 9
#define DATA_FLAG 10

/* Index of the current argument in flags[], or -1. */
static int which(const ptdp_args *a)
{
    for (int i = 0; i < NFLAGS; i++)
        if (ptdp_args_is(a, flags[i].name))
            return i;
    return -1;
}

void ptdp_model_flags_init(ptdp_model_flags *f, const ptdp_model_config *mlp_defaults)
{
    memset(f, 0, sizeof *f);
    f->mlp = *mlp_defaults;
    f->cfg = *mlp_defaults;
    f->gpt = ptdp_gpt_default_config();
    f->gpt.ffn = 0;                /* 4 x hidden */
    f->seed = 1;
}

bool ptdp_model_flag_is(const ptdp_args *a)
{
    return which(a) >= 0;
}

static int *field(ptdp_model_config *m, int i)
{
    int *fields[] = { &m->d_in, &m->hidden, &m->ffn, &m->layers, &m->classes, &m->heads, &m->seq_len,
                      &m->vocab, &m->vocab_multiple };
    return i < (int)(sizeof fields / sizeof fields[0]) ? fields[i] : NULL;
}

int ptdp_model_flag_read(ptdp_args *a, const ptdp_model_flag_limits *max, ptdp_model_flags *f)
{
    int i = which(a);
    if (i < 0)
        return ptdp_args_unknown(a);
    f->given |= 1u << i;
    if (i == MODEL_FLAG) {
        static const char *const names[] = { "mlp", "gpt" };
        int k;
        int rc = ptdp_args_enum(a, names, 2, &k);
        if (rc == 0)
            f->cfg.kind = k == 1 ? PTDP_MODEL_GPT : PTDP_MODEL_MLP;
        return rc;
    }
    if (i == DATA_FLAG)
        return ptdp_args_string(a, &f->data);
    const int largest[] = { max->d_in, max->hidden, max->ffn, max->layers, max->classes, max->heads,
                            max->seq_len, max->vocab, 1 << 20 };
    return ptdp_args_int(a, flags[i].smallest, largest[i], field(&f->cfg, i));
}

int ptdp_model_flags_min_vocab(const ptdp_model_flags *f)
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
    if (ptdp_read_file(f->data, &f->corpus, &f->corpus_len, msg, sizeof msg) != 0)
        return ptdp_usage_error(cmd, "--data %s", msg);
    if (f->corpus_len == 0)
        return ptdp_usage_error(cmd, "--data %s: the file is empty (it needs at least --seq-len + 1 bytes)",
                                f->data);
    return 0;
}

int ptdp_model_flags_finish(const char *cmd, ptdp_model_flags *f)
{
    ptdp_model_config *m = &f->cfg;
    int kind = m->kind == PTDP_MODEL_GPT ? GPT : MLP;
    for (int i = 0; i < NFLAGS; i++)
        if ((f->given & (1u << i)) && !(flags[i].models & kind))
            return ptdp_usage_error(cmd, "%s is a flag of --model %s (this run trains the %s; add --model %s)",
                                    flags[i].name, kind == GPT ? "mlp" : "gpt", kind == GPT ? "gpt" : "mlp",
                                    kind == GPT ? "mlp" : "gpt");
    if (kind == GPT) {
        /* the GPT's defaults for what was not typed */
        ptdp_model_config d = f->gpt;
        for (int i = 0; i < MODEL_FLAG; i++)
            if (!(f->given & (1u << i)) && field(&d, i) != NULL)
                *field(m, i) = *field(&d, i);
        m->d_in = m->classes = 0;
        if (load_data(cmd, f) != 0)
            return PTDP_EXIT_USAGE;
        m->corpus = f->corpus;
        m->corpus_len = f->corpus_len;
        int need = ptdp_model_flags_min_vocab(f);
        if (!(f->given & (1u << 7)))   /* bytes: 256; the sums: what they use (or the command's) */
            m->vocab = f->data != NULL ? 256 : f->gpt.vocab > need ? f->gpt.vocab : need;
        else if (m->vocab < need)
            return ptdp_usage_error(cmd, "--vocab %d: the data holds token %d, so --vocab must be at least %d",
                                    m->vocab, need - 1, need);
        if (m->corpus_len < (size_t)m->seq_len + 1)
            return ptdp_usage_error(cmd, "--seq-len %d: the data has %zu tokens, one sequence needs %d "
                                    "(--seq-len at most %zu, or more data)", m->seq_len, m->corpus_len,
                                    m->seq_len + 1, m->corpus_len - 1);
    }
    if (m->ffn == 0)
        m->ffn = 4 * m->hidden;
    return 0;
}

int ptdp_model_flags_reseed(const char *cmd, ptdp_model_flags *f, uint64_t seed)
{
    if (f->cfg.kind != PTDP_MODEL_GPT || f->data != NULL || seed == f->seed)
        return 0;
    free(f->corpus);
    f->corpus = NULL;
    f->seed = seed;
    if (load_data(cmd, f) != 0)
        return PTDP_EXIT_USAGE;
    f->cfg.corpus = f->corpus;
    f->cfg.corpus_len = f->corpus_len;
    return 0;
}

void ptdp_model_flags_free(ptdp_model_flags *f)
{
    free(f->corpus);
    f->corpus = NULL;
}

void ptdp_model_flags_help(FILE *out, const ptdp_model_config *d)
{
    char ffn[16] = "4*hidden";
    if (d->ffn != 0)
        snprintf(ffn, sizeof ffn, "%d", d->ffn);
    ptdp_model_config g = ptdp_gpt_default_config();
    fprintf(out,
            "  --model mlp|gpt     the reference MLP (default) or a small GPT-2\n"
            "  --hidden N --ffn N --layers N   both models (mlp default %d, %s, %d; gpt %d, 4*hidden, %d)\n"
            "  --d-in N --classes N            the MLP (default %d, %d)\n"
            "  --heads N --seq-len N           the GPT (default %d, %d)\n"
            "  --vocab V           the GPT's tokens 0..V-1 (default: 256 with --data, else the built-in\n"
            "                      corpus's); padded to a multiple of --vocab-multiple (64) x tp\n"
            "  --data FILE         the GPT's text, one token per byte (default: built-in lines of sums)\n",
            d->hidden, ffn, d->layers, g.hidden, g.layers, d->d_in, d->classes, g.heads, g.seq_len);
}
