/*
 * model_flags.c — the flags every model has, the readers over every
 * model's own flags (cli/models/), and --model.
 *
 *     flag              field of ptdp_model_config   smallest   model
 *     --hidden          hidden                        1          every
 *     --ffn             ffn                           1          every
 *     --layers          layers                        1          every
 *     --model NAME                                               (the registry's names)
 *     …                 the model's table (ptdp_model_cli.flags)
 *
 * A flag is read into the configuration as it comes (--model may come
 * last); finish then keeps only the chosen model's: its defaults, with
 * what was typed on top, and refuses a flag of another model.
 */
#include "model_flags.h"

#include <stdlib.h>
#include <string.h>

static const ptdp_model_flag common[] = {
    { "--hidden", offsetof(ptdp_model_config, hidden), 1, { 1 << 20, 1 << 16 }, false },
    { "--ffn", offsetof(ptdp_model_config, ffn), 1, { 1 << 22, 1 << 18 }, false },
    { "--layers", offsetof(ptdp_model_config, layers), 1, { 4096, 1024 }, false },
};
#define NCOMMON (int)(sizeof common / sizeof common[0])

/* The flag called `name` in a table of n, or NULL. */
static const ptdp_model_flag *in_table(const ptdp_model_flag *t, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0)
            return &t[i];
    return NULL;
}

/* The flag the current argument names, in the common table or any model's;
 * `owner` (if not NULL) receives the model whose flag it is (NULL: common). */
static const ptdp_model_flag *find_flag(const char *name, const ptdp_model_ops **owner)
{
    const ptdp_model_flag *fl = in_table(common, NCOMMON, name);
    if (owner)
        *owner = NULL;
    for (int k = 0; fl == NULL && k < ptdp_model_count(); k++) {
        ptdp_model_config probe = { .ops = ptdp_model_at(k) };
        const ptdp_model_cli *cli = ptdp_model_cli_of(&probe);
        if ((fl = in_table(cli->flags, cli->nflags, name)) != NULL && owner)
            *owner = probe.ops;
    }
    return fl;
}

static int model_index(const ptdp_model_ops *ops)
{
    for (int k = 0; k < ptdp_model_count(); k++)
        if (ptdp_model_at(k) == ops)
            return k;
    return 0;
}

static int *field_of(ptdp_model_config *m, const ptdp_model_flag *fl)
{
    return (int *)(void *)((char *)m + fl->field);
}

static double *real_of(ptdp_model_config *m, const ptdp_model_flag *fl)
{
    return (double *)(void *)((char *)m + fl->field);
}

void ptdp_model_flags_init(ptdp_model_flags *f, const ptdp_model_config *defaults)
{
    memset(f, 0, sizeof *f);
    for (int k = 0; k < ptdp_model_count(); k++) {
        ptdp_model_config probe = { .ops = ptdp_model_at(k) };
        const ptdp_model_cli *cli = ptdp_model_cli_of(&probe);
        f->defaults[k] = cli->defaults ? cli->defaults() : probe;
        f->defaults[k].ops = probe.ops;
    }
    f->defaults[model_index(ptdp_model_of(defaults))] = *defaults;
    f->cfg = *defaults;
    f->seed = 1;
}

ptdp_model_config *ptdp_model_flags_defaults(ptdp_model_flags *f, const ptdp_model_ops *ops)
{
    return &f->defaults[model_index(ops)];
}

/* The flag the current argument is, among the common ones and every
 * model's, or NULL. */
static const ptdp_model_flag *which(const ptdp_args *a)
{
    for (int i = 0; i < NCOMMON; i++)
        if (ptdp_args_is(a, common[i].name))
            return &common[i];
    for (int k = 0; k < ptdp_model_count(); k++) {
        ptdp_model_config probe = { .ops = ptdp_model_at(k) };
        const ptdp_model_cli *cli = ptdp_model_cli_of(&probe);
        for (int i = 0; i < cli->nflags; i++)
            if (ptdp_args_is(a, cli->flags[i].name))
                return &cli->flags[i];
    }
    return NULL;
}

bool ptdp_model_flag_is(const ptdp_args *a)
{
    return ptdp_args_is(a, "--model") || which(a) != NULL;
}

/* The index of flag `name` among those typed, or -1. */
static int given_slot(const ptdp_model_flags *f, const char *name)
{
    for (int i = 0; i < f->ngiven; i++)
        if (strcmp(f->given[i], name) == 0)
            return i;
    return -1;
}

bool ptdp_model_flags_given(const ptdp_model_flags *f, const char *name)
{
    return given_slot(f, name) >= 0;
}

/* --model NAME: one of the registry's. */
static int read_model(ptdp_args *a, ptdp_model_flags *f)
{
    const char *names[PTDP_MAX_MODELS];
    for (int k = 0; k < ptdp_model_count(); k++)
        names[k] = ptdp_model_at(k)->name;
    int k;
    int rc = ptdp_args_enum(a, names, ptdp_model_count(), &k);
    if (rc == 0)
        f->cfg.ops = ptdp_model_at(k);
    return rc;
}

/* The flags whose values are words, and their words. */
static const char *const moe_scores[] = { "softmax", "sigmoid" };   /* moe_route.h's ptdp_moe_score */
static const struct {
    const char *name;
    const char *const *words;
    int n;
} word_flags[] = {
    { "--moe-score", moe_scores, 2 },
};

const char *const *ptdp_model_flag_words(const char *name, int *n)
{
    for (size_t k = 0; k < sizeof word_flags / sizeof word_flags[0]; k++)
        if (strcmp(name, word_flags[k].name) == 0) {
            *n = word_flags[k].n;
            return word_flags[k].words;
        }
    *n = 0;
    return NULL;
}

int ptdp_model_flag_read(ptdp_args *a, ptdp_model_flag_tier tier, ptdp_model_flags *f)
{
    if (ptdp_args_is(a, "--model"))
        return read_model(a, f);
    const ptdp_model_flag *fl = which(a);
    if (fl == NULL)
        return ptdp_args_unknown(a);
    int slot = given_slot(f, fl->name);
    if (slot < 0 && f->ngiven < PTDP_MODEL_FLAGS_GIVEN_MAX)
        f->given[slot = f->ngiven++] = fl->name;
    if (fl->field == PTDP_FLAG_PATH)
        return ptdp_args_string(a, &f->data);
    int rc;
    if (fl->real) {
        rc = ptdp_args_double(a, fl->smallest, fl->largest[tier], real_of(&f->cfg, fl));
        if (rc == 0 && slot >= 0)
            f->given_value[slot] = *real_of(&f->cfg, fl);
        return rc;
    }
    int nwords;
    const char *const *words = fl->smallest == PTDP_FLAG_WORDS ? ptdp_model_flag_words(fl->name, &nwords) : NULL;
    if (words != NULL)   /* a word: its index */
        rc = ptdp_args_enum(a, words, nwords, field_of(&f->cfg, fl));
    else
        rc = ptdp_args_int(a, fl->smallest, fl->largest[tier], field_of(&f->cfg, fl));
    if (rc == 0 && slot >= 0)
        f->given_value[slot] = *field_of(&f->cfg, fl);
    return rc;
}

/* The chosen model's defaults with what was typed on top; a flag of
 * another model refused. */
static int settle(const char *cmd, ptdp_model_flags *f)
{
    const ptdp_model_ops *ops = ptdp_model_of(&f->cfg);
    const ptdp_model_cli *cli = ptdp_model_cli_of(&f->cfg);
    ptdp_model_config m = *ptdp_model_flags_defaults(f, ops);
    for (int i = 0; i < f->ngiven; i++) {
        const ptdp_model_flag *fl = in_table(common, NCOMMON, f->given[i]);
        if (fl == NULL)
            fl = in_table(cli->flags, cli->nflags, f->given[i]);
        if (fl == NULL) {
            const ptdp_model_ops *owner;
            find_flag(f->given[i], &owner);
            const char *o = owner ? owner->name : "?";
            return ptdp_usage_error(cmd, "%s is a flag of --model %s (this run trains the %s; add --model %s)",
                                    f->given[i], o, ops->name, o);
        }
        if (fl->real)   /* its value as typed: the chosen model's place for it */
            *real_of(&m, fl) = f->given_value[i];
        else if (fl->field != PTDP_FLAG_PATH)
            *field_of(&m, fl) = (int)f->given_value[i];
    }
    m.ops = ops;
    f->cfg = m;
    return 0;
}

int ptdp_model_flags_finish(const char *cmd, ptdp_model_flags *f)
{
    if (settle(cmd, f) != 0)
        return PTDP_EXIT_USAGE;
    const ptdp_model_cli *cli = ptdp_model_cli_of(&f->cfg);
    if (cli->finish != NULL && cli->finish(cmd, f) != 0)
        return PTDP_EXIT_USAGE;
    if (f->cfg.ffn == 0)
        f->cfg.ffn = 4 * f->cfg.hidden;
    return 0;
}

int ptdp_model_flags_reseed(const char *cmd, ptdp_model_flags *f, uint64_t seed, ptdp_model_config *into)
{
    const ptdp_model_cli *cli = ptdp_model_cli_of(&f->cfg);
    if (cli->reseed == NULL || ptdp_model_of(into) != ptdp_model_of(&f->cfg))
        return 0;   /* no data of its own, or the checkpoint's model is refused later */
    return cli->reseed(cmd, f, seed, into);
}

void ptdp_model_flags_free(ptdp_model_flags *f)
{
    free(f->corpus);
    f->corpus = NULL;
}

void ptdp_model_flags_help(FILE *out, const ptdp_model_config *d)
{
    char names[256], ffn[16] = "4*hidden";
    if (d->ffn != 0)
        snprintf(ffn, sizeof ffn, "%d", d->ffn);
    fprintf(out, "  --model %-11s the model (default %s)\n", ptdp_model_names(names, sizeof names, "|"),
            ptdp_model_name(d));
    fprintf(out, "  --hidden N --ffn N --layers N   every model (%s default %d, %s, %d)\n", ptdp_model_name(d),
            d->hidden, ffn, d->layers);
    for (int k = 0; k < ptdp_model_count(); k++) {
        ptdp_model_config probe = { .ops = ptdp_model_at(k) };
        const ptdp_model_cli *cli = ptdp_model_cli_of(&probe);
        if (cli->help != NULL)
            cli->help(out, d);
    }
}

const char *ptdp_model_cli_noun(const ptdp_model_ops *ops)
{
    if (ops == NULL)
        return "?";
    const char *t = ops->caps.title;
    if (t == NULL)
        return ops->name;
    return t + (strncmp(t, "the ", 4) == 0 ? 4 : strncmp(t, "a ", 2) == 0 ? 2 : 0);
}
