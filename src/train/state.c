/*
 * state.c — whole tensors in host memory, and their checkpoint files.
 *
 * A checkpoint is a safetensors file a PyTorch user can open:
 *
 *   {name}                  every parameter of the model, whole, in the
 *                           model's state_dict order (its list_params):
 *                           for the MLP  in.weight [hidden, d_in], in.bias,
 *                           blocks.{l}.fc1.weight [ffn, hidden], …, out.bias
 *   optim.{name}.exp_avg, optim.{name}.exp_avg_sq     (AdamW)
 *   optim.{name}.momentum_buffer                      (SGD with momentum)
 *   optim.step  I64 []
 *   __metadata__: the model's shapes (its metadata: for the MLP d_in,
 *                 d_model, d_ff, n_layers, n_classes), its settings that
 *                 change the math but no shape (its settings hook: a
 *                 mixture's moe_capacity_factor, moe_aux_loss), seed,
 *                 batch, optimizer
 *
 * Tensors are whole: the shards of a tp=2 run are written into their places,
 * so the file loads into tp=4 or tp=1 alike.  A file of another model
 * (the one its metadata names; no name: the default model) is refused
 * naming its tensors, whichever models they are:
 *
 *   file  transformer.wte.weight …       run --model M lists  tok_embeddings.weight …
 *         first not in M's list ──► "holds 'transformer.wte.weight' and 11 more M has no place for"
 *         first of M's not in the file ──► "lacks 'tok_embeddings.weight' and 19 more M needs"
 *
 * A load compares the shapes and never the settings: those are the run's
 * to choose (ptdp train takes the file's for a flag not typed), and a file
 * saved before a setting was recorded lacks its key, which then means the
 * value the model says (ptdp_meta_setting.absent: the default at the time).
 *
 * Which model a state holds, its names and its shapes come from the
 * model's table (models.h): nothing here knows the MLP.
 */
#include "ptdp/state.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"
#include "ptdp/models.h"
#include "ptdp/safetensors.h"
#include "train/state_impl.h"

static const char *OPT_NAMES[] = { "adamw", "sgd" };

int ptdp_state_optim_slots(const ptdp_state *s)
{
    if (s->optimizer == PTDP_OPT_ADAMW)
        return 2;
    return s->has_momentum ? 1 : 0;
}

const char *ptdp_state_slot_name(const ptdp_state *s, int k)
{
    if (s->optimizer == PTDP_OPT_ADAMW)
        return k == 0 ? "exp_avg" : "exp_avg_sq";
    return "momentum_buffer";
}

/* The model's parameters in state_dict order, as name/shape: out may be
 * NULL to count them; -1 for an unknown model. */
static int list_params(const ptdp_model_config *c, ptdp_state_tensor *out)
{
    const ptdp_model_ops *ops = ptdp_model_of(c);
    if (ops == NULL)
        return -1;
    int n = ops->list_params(c, NULL);
    if (out == NULL)
        return n;
    ptdp_param_info *info = calloc((size_t)(n > 0 ? n : 1), sizeof *info);
    if (info == NULL)
        return -1;
    ops->list_params(c, info);
    for (int i = 0; i < n; i++) {
        snprintf(out[i].name, sizeof out[i].name, "%s", info[i].name);
        out[i].rows = info[i].rows;
        out[i].cols = info[i].cols;
        out[i].is_bias = info[i].is_bias;
    }
    free(info);
    return n;
}

int ptdp_state_init(ptdp_state *s, const ptdp_model_config *cfg, ptdp_optimizer_kind optimizer,
                      bool with_momentum)
{
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->optimizer = optimizer;
    s->has_momentum = optimizer == PTDP_OPT_SGD && with_momentum;
    int np = list_params(cfg, NULL), slots = ptdp_state_optim_slots(s);
    if (np < 0)
        return PTDP_EINVAL;
    s->ntensors = np * (1 + slots);
    s->t = calloc((size_t)(s->ntensors > 0 ? s->ntensors : 1), sizeof *s->t);
    if (s->t == NULL || list_params(cfg, s->t) != np) {
        ptdp_state_free(s);
        return PTDP_ENOMEM;
    }
    for (int k = 0; k < slots; k++)
        for (int i = 0; i < np; i++) {
            ptdp_state_tensor *t = &s->t[np * (1 + k) + i];
            char base[sizeof t->name];
            memcpy(base, s->t[i].name, sizeof base);
            *t = s->t[i];
            snprintf(t->name, sizeof t->name, "optim.%.63s.%s", base, ptdp_state_slot_name(s, k));
        }
    for (int i = 0; i < s->ntensors; i++) {
        s->t[i].data = calloc((size_t)s->t[i].rows * (size_t)s->t[i].cols, sizeof(ptdp_real));
        if (s->t[i].data == NULL && (size_t)s->t[i].rows * (size_t)s->t[i].cols > 0) {
            ptdp_state_free(s);
            return PTDP_ENOMEM;
        }
    }
    return PTDP_OK;
}

/* The parameters of s (its first tensors). */
static int param_count(const ptdp_state *s)
{
    return list_params(&s->cfg, NULL);
}

/* One more tensor of zeros at the end. */
static int add_tensor(ptdp_state *s, const char *name, int rows, int cols)
{
    ptdp_state_tensor *t = realloc(s->t, (size_t)(s->ntensors + 1) * sizeof *t);
    if (t == NULL)
        return PTDP_ENOMEM;
    s->t = t;
    t = &s->t[s->ntensors];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->rows = rows;
    t->cols = cols;
    if ((t->data = calloc((size_t)rows * (size_t)cols + 1, sizeof *t->data)) == NULL)
        return PTDP_ENOMEM;
    s->ntensors++;
    return PTDP_OK;
}

int ptdp_state_add_fp8_history(ptdp_state *s, int H)
{
    return add_tensor(s, PTDP_FP8_HISTORY_TENSOR, 3 * param_count(s), H + 1);
}

/* A file's amax histories (state.h): 3P rows, each a whole count in
 * [0, H] and that many finite amaxes >= 0, zeros after. */
static int check_fp8_history(const ptdp_state *s, const ptdp_state_tensor *t, const char *path, char *msg,
                             size_t msglen)
{
    const int H = t->cols - 1;
    if (t->rows != 3 * param_count(s) || H < 1) {
        snprintf(msg, msglen, "%s: tensor '%s' is %d x %d; this model's histories are 3 x %d parameters rows of "
                 "a count and at least one amax", path, t->name, t->rows, t->cols, param_count(s));
        return PTDP_ECORRUPT;
    }
    for (int i = 0; i < t->rows; i++) {
        const ptdp_real *row = t->data + (size_t)i * (size_t)t->cols;
        const double n = (double)row[0];
        bool ok = n >= 0 && n <= H && n == floor(n);
        for (int j = 1; ok && j <= H; j++)
            ok = j <= n ? isfinite((double)row[j]) && row[j] >= 0 : row[j] == 0;
        if (!ok) {
            snprintf(msg, msglen, "%s: tensor '%s' row %d: not a count in 0..%d followed by that many amaxes >= 0 "
                     "and zeros (a damaged checkpoint?)", path, t->name, i, H);
            return PTDP_ECORRUPT;
        }
    }
    return PTDP_OK;
}

void ptdp_state_free(ptdp_state *s)
{
    if (s->t != NULL)
        for (int i = 0; i < s->ntensors; i++)
            free(s->t[i].data);
    free(s->t);
    s->t = NULL;
    s->ntensors = 0;
}

ptdp_state_tensor *ptdp_state_find(ptdp_state *s, const char *name)
{
    for (int i = 0; i < s->ntensors; i++)
        if (strcmp(s->t[i].name, name) == 0)
            return &s->t[i];
    return NULL;
}

void ptdp_param_to_state(const ptdp_param *p, ptdp_tensor local, ptdp_state_tensor *whole)
{
    for (int i = 0; i < local.rows; i++)
        for (int j = 0; j < local.cols; j++)
            whole->data[ptdp_param_whole_index(p, i, j)] = *ptdp_at(local, i, j);
}

void ptdp_param_from_state(const ptdp_param *p, ptdp_tensor local, const ptdp_state_tensor *whole)
{
    for (int i = 0; i < local.rows; i++)
        for (int j = 0; j < local.cols; j++)
            *ptdp_at(local, i, j) = whole->data[ptdp_param_whole_index(p, i, j)];
}

/* ------------------------------------------------------------ files */

#define NMETA_MAX 32

int ptdp_state_save(const ptdp_state *s, const char *path, char *msg, size_t msglen)
{
    const ptdp_model_ops *ops = ptdp_model_of(&s->cfg);
    if (ops == NULL) {
        snprintf(msg, msglen, "%s: the state holds an unknown model", path);
        return PTDP_EINVAL;
    }
    ptdp_st_tensor *st = calloc((size_t)s->ntensors + 1, sizeof *st);
    if (st == NULL)
        return PTDP_ENOMEM;
    for (int i = 0; i < s->ntensors; i++) {
        const ptdp_state_tensor *t = &s->t[i];
        snprintf(st[i].name, sizeof st[i].name, "%s", t->name);
        st[i].dtype = PTDP_REAL;
        st[i].ndim = t->is_bias ? 1 : 2;
        st[i].shape[0] = t->is_bias ? t->cols : t->rows;
        st[i].shape[1] = t->cols;
        st[i].data = t->data;
    }
    int64_t step = s->step;
    ptdp_st_tensor *last = &st[s->ntensors];
    snprintf(last->name, sizeof last->name, "optim.step");
    last->dtype = PTDP_I64;
    last->ndim = 0;
    last->data = &step;

    /* The model's shapes, then what every run has. */
    char vals[NMETA_MAX][32];
    const char *keys[NMETA_MAX], *values[NMETA_MAX], *flags[NMETA_MAX];
    int n = 0;
    if (ops != ptdp_model_at(0)) {   /* absent means the default model (its files came first) */
        keys[n] = "model";
        snprintf(vals[n++], 32, "%s", ops->name);
    }
    n += ops->metadata(&s->cfg, keys + n, vals + n, flags + n, NMETA_MAX - 4 - PTDP_META_SETTINGS_MAX);
    ptdp_meta_setting set[PTDP_META_SETTINGS_MAX];   /* what changes the math but no shape (model.h) */
    const int nset = ops->settings != NULL ? ops->settings(&s->cfg, set, PTDP_META_SETTINGS_MAX) : 0;
    for (int i = 0; i < nset; i++) {
        if (set[i].unless_absent && strcmp(set[i].value, set[i].absent) == 0)
            continue;   /* a file without the key means the same (model.h) */
        keys[n] = set[i].key;
        snprintf(vals[n++], 32, "%s", set[i].value);
    }
    keys[n] = "seed";
    snprintf(vals[n++], 32, "%" PRIu64, s->seed);
    keys[n] = "batch";
    snprintf(vals[n++], 32, "%d", s->batch);
    keys[n] = "optimizer";
    snprintf(vals[n++], 32, "%s", s->optimizer == PTDP_OPT_SGD && s->has_momentum ? "sgd-momentum"
                                  : OPT_NAMES[s->optimizer]);
    for (int i = 0; i < n; i++)
        values[i] = vals[i];
    int rc = ptdp_st_write(path, st, s->ntensors + 1, keys, values, n, msg, msglen);
    free(st);
    return rc;
}

/* A metadata field's text, or NULL and why not: the field is named, so a
 * hand-edited or foreign file says what is wrong with it. */
static const char *meta_text(const ptdp_st_file *f, const char *path, const char *key, char *msg, size_t msglen)
{
    const char *v = ptdp_st_meta(f, key);
    if (v == NULL)
        snprintf(msg, msglen, "%s: the checkpoint has no metadata field '%s' (every ptdp checkpoint "
                 "of this model names it)", path, key);
    return v;
}

/* A whole-number metadata field, or why not ("has no metadata field 'x'",
 * "metadata 'x' is 'banana', not a whole number"). */
static int meta_int(const ptdp_st_file *f, const char *path, const char *key, long long *out,
                    char *msg, size_t msglen)
{
    const char *v = meta_text(f, path, key, msg, msglen);
    if (v == NULL)
        return PTDP_ECORRUPT;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (*v == '\0' || *end != '\0' || errno == ERANGE) {
        snprintf(msg, msglen, "%s: metadata '%s' is '%.40s', not a whole number", path, key, v);
        return PTDP_ECORRUPT;
    }
    *out = x;
    return 0;
}

/* A real-valued metadata field (PTDP_META_REAL_FMT: the model writes it so
 * that it reads as one) — finite, or the file is corrupt. */
static bool meta_is_real(const char *value)
{
    return strpbrk(value, ".eE") != NULL;
}

static int meta_real(const ptdp_st_file *f, const char *path, const char *key, double *out,
                     char *msg, size_t msglen)
{
    const char *v = meta_text(f, path, key, msg, msglen);
    if (v == NULL)
        return PTDP_ECORRUPT;
    char *end;
    double x = strtod(v, &end);
    if (*v == '\0' || *end != '\0' || !isfinite(x)) {
        snprintf(msg, msglen, "%s: metadata '%s' is '%.40s', not a finite number", path, key, v);
        return PTDP_ECORRUPT;
    }
    *out = x;
    return 0;
}

/* x in the fewest significant digits (6 at least: 10, not 1e+01) that
 * read back as x (1e-05, not 1.0000000000000001e-05): what a user types. */
static const char *shortest(double x, char buf[32])
{
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(buf, 32, "%.*g", digits, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    return buf;
}

/* Every value of a tensor finite; and a second moment never negative. */
static int check_values(const ptdp_state_tensor *t, const char *path, char *msg, size_t msglen)
{
    size_t n = (size_t)t->rows * (size_t)t->cols;
    size_t len = strlen(t->name);
    bool second_moment = len > 11 && strcmp(t->name + len - 11, ".exp_avg_sq") == 0;
    for (size_t k = 0; k < n; k++) {
        double x = t->data[k];
        if (!isfinite(x)) {
            snprintf(msg, msglen, "%s: tensor '%s' holds %s at element %zu: a checkpoint of a diverged "
                     "or damaged run cannot be resumed", path, t->name, isnan(x) ? "NaN" : "an infinity", k);
            return PTDP_ECORRUPT;
        }
        if (second_moment && x < 0) {
            snprintf(msg, msglen, "%s: tensor '%s' holds %g at element %zu: a second moment is a mean "
                     "of squares and never negative", path, t->name, x, k);
            return PTDP_ECORRUPT;
        }
    }
    return 0;
}

/* Loading reads the file in the order a reader checks it: is it this
 * run's model and shape, what run made it (optimizer, seed, batch), then
 * every tensor — each step below says what is wrong, naming the field. */

/* Whether a parameter name is among the model's. */
static bool listed(const ptdp_param_info *info, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(info[i].name, name) == 0)
            return true;
    return false;
}

/* Another model's checkpoint, told by its tensors: the first of the file's
 * parameters this model has no place for and the first of this model's the
 * file lacks, each with how many more (the optimizer's slots left out: a
 * parameter's name says whose it is).  Not a damaged file but the wrong
 * one for this run, so PTDP_EINVAL: what the user typed is to change. */
static int another_model(const ptdp_st_file *f, const char *path, const char *model, bool named,
                         const ptdp_model_ops *ops, const ptdp_model_config *cfg, char *msg, size_t msglen)
{
    const int n = ops->list_params(cfg, NULL);
    ptdp_param_info *info = calloc((size_t)(n > 0 ? n : 1), sizeof *info);
    if (info == NULL)
        return PTDP_ENOMEM;
    ops->list_params(cfg, info);
    const char *extra = "", *missing = "";
    int nextra = 0, nmissing = 0;
    for (int i = 0; i < ptdp_st_count(f); i++) {
        const char *name = ptdp_st_get(f, i)->name;
        if (strncmp(name, "optim.", 6) != 0 && !listed(info, n, name) && nextra++ == 0)
            extra = name;
    }
    for (int i = 0; i < n; i++)
        if (ptdp_st_find(f, info[i].name) == NULL && nmissing++ == 0)
            missing = info[i].name;
    char has[160] = "", lacks[160] = "";
    if (nextra > 0)
        snprintf(has, sizeof has, "; it holds '%.64s' and %d more that --model %s has no place for", extra,
                 nextra - 1, ops->name);
    if (nmissing > 0)
        snprintf(lacks, sizeof lacks, "; it lacks '%.64s' and %d more that --model %s needs", missing, nmissing - 1,
                 ops->name);
    snprintf(msg, msglen, "%s: the checkpoint holds another model, %.20s (%s), and this run trains --model %s%s%s: "
             "give --model %.20s and the flags it was saved with, or leave --load out", path, model,
             named ? "its metadata 'model'" : "no metadata 'model': the default", ops->name, has, lacks, model);
    free(info);
    return PTDP_EINVAL;
}

/* A file without __metadata__: every checkpoint ptdp writes names its
 * model's shapes, seed, batch and optimizer there, so this one was written
 * by another program or lost them — which model its tensors are is not
 * guessed (a missing "model" key means the default model only in a file
 * that has the others). */
static int no_metadata(const ptdp_st_file *f, const char *path, char *msg, size_t msglen)
{
    snprintf(msg, msglen, "%s: the checkpoint has no __metadata__, where every ptdp checkpoint records its model, "
             "its shapes, seed, batch and optimizer: a file ptdp did not write, or one that lost them (its first "
             "tensor: '%.64s')", path, ptdp_st_count(f) > 0 ? ptdp_st_get(f, 0)->name : "none");
    return PTDP_ECORRUPT;
}

/* The checkpoint holds this run's model: the kind it names is this run's.
 * The model's key is absent in the default model's files (the first model,
 * whose files came before the key).  A kind ptdp has, but not this run's:
 * another model's file (another_model); a kind ptdp has not: a file ptdp
 * cannot read. */
static int check_kind(const ptdp_st_file *f, const char *path, const ptdp_model_ops *ops,
                      const ptdp_model_config *cfg, char *msg, size_t msglen)
{
    if (ptdp_st_meta_count(f) == 0)   /* not the default model's file: no file of ptdp's at all */
        return no_metadata(f, path, msg, msglen);
    const char *model = ptdp_st_meta(f, "model");
    const bool named = model != NULL;
    if (model == NULL)
        model = ptdp_model_at(0)->name;
    if (strcmp(model, ops->name) == 0)
        return 0;
    if (ptdp_model_lookup(model) != NULL)
        return another_model(f, path, model, named, ops, cfg, msg, msglen);
    snprintf(msg, msglen, "%s: the checkpoint holds a %.20s model, this run trains a %s (--model)", path, model,
             ops->name);
    return PTDP_ECORRUPT;
}

int ptdp_state_check_model(const char *path, const ptdp_model_config *cfg, char *msg, size_t msglen)
{
    const ptdp_model_ops *ops = ptdp_model_of(cfg);
    ptdp_st_file *f;
    int rc = ptdp_st_open(path, &f, msg, msglen);
    if (rc == 0 && ops == NULL) {
        snprintf(msg, msglen, "%s: this run's model is unknown", path);
        rc = PTDP_EINVAL;
    } else if (rc == 0)
        rc = check_kind(f, path, ops, cfg, msg, msglen);
    ptdp_st_close(f);
    return rc;
}

/* The checkpoint holds this run's model (check_kind), in this run's shape. */
static int check_model(const ptdp_st_file *f, const char *path, const ptdp_model_ops *ops,
                       const ptdp_model_config *cfg, char *msg, size_t msglen)
{
    int rc = check_kind(f, path, ops, cfg, msg, msglen);
    if (rc != 0)
        return rc;
    char want[NMETA_MAX][32];
    const char *keys[NMETA_MAX], *flags[NMETA_MAX];
    int nmeta = ops->metadata(cfg, keys, want, flags, NMETA_MAX);
    for (int i = 0; i < nmeta; i++) {
        if (meta_is_real(want[i])) {      /* a setting such as rope_theta: the same double */
            double have, w = strtod(want[i], NULL);
            int rc = meta_real(f, path, keys[i], &have, msg, msglen);
            if (rc == 0 && have != w) {
                char h[32], r[32];
                snprintf(msg, msglen, "%s: model setting mismatch: the checkpoint has %s=%s, this run %s %s "
                         "(give %s %s to go on from it)", path, keys[i], shortest(have, h), flags[i],
                         shortest(w, r), flags[i], h);
                rc = PTDP_ECORRUPT;
            }
            if (rc != 0)
                return rc;
            continue;
        }
        long long have;
        int rc = meta_int(f, path, keys[i], &have, msg, msglen);
        if (rc != 0)
            return rc;
        if (have < 0 || have > INT32_MAX) {   /* no shape of a run is that: the file, not the flags */
            snprintf(msg, msglen, "%s: metadata '%s' is %lld, out of range (0 to %d): a corrupt checkpoint",
                     path, keys[i], have, INT32_MAX);
            return PTDP_ECORRUPT;
        }
        if (have != strtoll(want[i], NULL, 10)) {
            snprintf(msg, msglen, "%s: model shape mismatch: the checkpoint has %s=%lld, this run %s %s",
                     path, keys[i], have, flags[i], want[i]);
            return PTDP_ECORRUPT;
        }
    }
    return 0;
}

/* What run made the file: its optimizer (and whether SGD kept momentum),
 * its seed and its batch. */
typedef struct {
    ptdp_optimizer_kind kind;
    bool momentum;
    long long seed, batch;
} run_meta;

static int read_run_meta(const ptdp_st_file *f, const char *path, run_meta *run, char *msg, size_t msglen)
{
    const char *opt = ptdp_st_meta(f, "optimizer");
    if (opt == NULL || (strcmp(opt, "adamw") != 0 && strcmp(opt, "sgd") != 0 && strcmp(opt, "sgd-momentum") != 0)) {
        snprintf(msg, msglen, "%s: metadata 'optimizer' is missing or unknown (adamw, sgd or sgd-momentum)", path);
        return PTDP_ECORRUPT;
    }
    run->kind = strncmp(opt, "sgd", 3) == 0 ? PTDP_OPT_SGD : PTDP_OPT_ADAMW;
    run->momentum = strcmp(opt, "sgd-momentum") == 0;
    int rc;
    if ((rc = meta_int(f, path, "seed", &run->seed, msg, msglen)) != 0 ||
        (rc = meta_int(f, path, "batch", &run->batch, msg, msglen)) != 0)
        return rc;
    const long long seed = run->seed, batch = run->batch;
    if (seed < 0 || batch < 1 || batch > INT32_MAX) {
        snprintf(msg, msglen, "%s: metadata '%s' is %lld; %s", path, seed < 0 ? "seed" : "batch",
                 seed < 0 ? seed : batch, seed < 0 ? "a seed is not negative" : "a batch holds at least one sample");
        return PTDP_ECORRUPT;
    }
    return 0;
}

/* Every tensor of the state from the file, checked, and the step count.
 * Nothing the model does not have: a tensor of another model, or a layer
 * more than this one has, is a wrong file, not something to skip. */
static int read_tensors(ptdp_state *s, const ptdp_st_file *f, const char *path, char *msg, size_t msglen)
{
    int rc = 0;
    for (int i = 0; i < ptdp_st_count(f) && rc == 0; i++) {   /* FP8's histories, whatever their length */
        const ptdp_st_tensor *h = ptdp_st_get(f, i);
        if (strcmp(h->name, PTDP_FP8_HISTORY_TENSOR) == 0 && h->ndim == 2 && h->shape[0] >= 0 &&
            h->shape[0] <= INT32_MAX && h->shape[1] >= 0 && h->shape[1] <= 1 << 20)
            rc = add_tensor(s, h->name, (int)h->shape[0], (int)h->shape[1]);
    }
    for (int i = 0; i < ptdp_st_count(f) && rc == 0; i++) {
        const char *name = ptdp_st_get(f, i)->name;
        if (strcmp(name, "optim.step") != 0 && ptdp_state_find(s, name) == NULL) {
            snprintf(msg, msglen, "%s: the checkpoint holds a tensor this model does not have: '%.100s' "
                     "(a checkpoint of another model or shape?)", path, name);
            rc = PTDP_ECORRUPT;
        }
    }
    for (int i = 0; i < s->ntensors && rc == 0; i++) {
        ptdp_state_tensor *t = &s->t[i];
        int64_t shape[2] = { t->is_bias ? t->cols : t->rows, t->cols };
        rc = ptdp_st_read_real(f, t->name, t->is_bias ? 1 : 2, shape, t->data, msg, msglen);
        if (rc == 0)
            rc = strcmp(t->name, PTDP_FP8_HISTORY_TENSOR) == 0 ? check_fp8_history(s, t, path, msg, msglen)
                                                               : check_values(t, path, msg, msglen);
    }
    int64_t step = 0;
    if (rc == 0)
        rc = ptdp_st_read_i64(f, "optim.step", 0, NULL, &step, msg, msglen);
    if (rc == 0 && (step < 0 || step > PTDP_MAX_STEP)) {
        snprintf(msg, msglen, "%s: tensor 'optim.step' is %" PRId64 "; a step count is between 0 and %" PRId64
                 " (2^53 - 1, the largest the optimizer counts exactly)", path, step, (int64_t)PTDP_MAX_STEP);
        rc = PTDP_ECORRUPT;
    }
    s->step = (long)step;
    return rc;
}

int ptdp_state_load(ptdp_state *s, const char *path, const ptdp_model_config *cfg,
                    char *msg, size_t msglen)
{
    memset(s, 0, sizeof *s);
    ptdp_st_file *f;
    int rc = ptdp_st_open(path, &f, msg, msglen);
    if (rc != 0)
        return rc;
    const ptdp_model_ops *ops = ptdp_model_of(cfg);
    run_meta run;
    if (ops == NULL) {
        snprintf(msg, msglen, "%s: this run's model is unknown", path);
        rc = PTDP_EINVAL;
    } else if ((rc = check_model(f, path, ops, cfg, msg, msglen)) == 0 &&
               (rc = read_run_meta(f, path, &run, msg, msglen)) == 0 &&
               (rc = ptdp_state_init(s, cfg, run.kind, run.momentum)) == 0) {
        s->seed = (uint64_t)run.seed;
        s->batch = (int)run.batch;
        if ((rc = read_tensors(s, f, path, msg, msglen)) != 0)
            ptdp_state_free(s);
    }
    ptdp_st_close(f);
    return rc;
}

/* ---- the settings beyond the shapes (model.h's ptdp_meta_setting) ---- */

int ptdp_state_take_setting(ptdp_model_config *cfg, const ptdp_meta_setting *set)
{
    const ptdp_model_ops *ops = ptdp_model_of(cfg);
    char *end;
    if (ops == NULL)
        return PTDP_EINVAL;
    if (meta_is_real(set->value)) {
        const double x = strtod(set->value, &end);
        return *end == '\0' && isfinite(x) && ops->from_metadata_real != NULL ?
               ops->from_metadata_real(cfg, set->key, x) : PTDP_EINVAL;
    }
    errno = 0;
    const long long x = strtoll(set->value, &end, 10);
    return set->value[0] != '\0' && *end == '\0' && errno == 0 ? ops->from_metadata(cfg, set->key, x) : PTDP_EINVAL;
}

/* cfg's settings (the model's list for it), each value the file's — a
 * number of the key's kind that the model takes — or, in a file saved
 * before the key was recorded, the one `absent` says.  The number, or a
 * negative PTDP_E… with msg. */
static int file_settings(const ptdp_st_file *f, const char *path, const ptdp_model_config *cfg,
                         ptdp_meta_setting *out, int max, char *msg, size_t msglen)
{
    const ptdp_model_ops *ops = ptdp_model_of(cfg);
    const int n = ops != NULL && ops->settings != NULL ? ops->settings(cfg, out, max) : 0;
    for (int i = 0; i < n; i++) {
        const char *v = ptdp_st_meta(f, out[i].key);
        if (v == NULL)
            v = out[i].absent;
        snprintf(out[i].value, sizeof out[i].value, "%s", v);
        ptdp_model_config scratch = *cfg;   /* a real where the model writes one, and a value its flag takes */
        if (strlen(v) >= sizeof out[i].value || meta_is_real(v) != meta_is_real(out[i].absent) ||
            ptdp_state_take_setting(&scratch, &out[i]) != 0) {
            snprintf(msg, msglen, "%s: metadata '%s' is '%.40s', which %s does not take: a corrupt checkpoint",
                     path, out[i].key, v, out[i].flag);
            return PTDP_ECORRUPT;
        }
    }
    return n;
}

int ptdp_state_settings(const char *path, const ptdp_model_config *cfg, ptdp_meta_setting *out, int max,
                        char *msg, size_t msglen)
{
    ptdp_st_file *f;
    int rc = ptdp_st_open(path, &f, msg, msglen);
    if (rc != 0)
        return rc;
    rc = file_settings(f, path, cfg, out, max, msg, msglen);
    ptdp_st_close(f);
    return rc;
}

const char *ptdp_state_meta_text(const char *value, char buf[32])
{
    if (!meta_is_real(value))
        return value;
    return shortest(strtod(value, NULL), buf);
}

/* ---- the model a file holds, from its metadata ---- */

/* Every key of the file's metadata the model takes into cfg, whole
 * numbers through from_metadata and reals through from_metadata_real;
 * the keys it does not take (seed, batch, another program's) left alone.
 * This is what tells the model which keys it has: a GPT with experts
 * lists the mixture's shapes only once moe_experts is set, so listing the
 * keys of a zeroed config would miss them.  Nothing is checked here: the
 * model's list for the config read is, next (peek_config). */
static void take_file_keys(const ptdp_st_file *f, ptdp_model_config *cfg)
{
    for (int i = 0; i < ptdp_st_meta_count(f); i++) {
        ptdp_meta_setting one = { .key = ptdp_st_meta_key(f, i) };
        const char *v = ptdp_st_meta(f, one.key);
        if (strlen(v) < sizeof one.value) {
            snprintf(one.value, sizeof one.value, "%s", v);
            (void)ptdp_state_take_setting(cfg, &one);
        }
    }
}

int ptdp_state_peek_config(const char *path, ptdp_model_config *cfg, char *msg, size_t msglen)
{
    ptdp_st_file *f;
    int rc = ptdp_st_open(path, &f, msg, msglen);
    if (rc != 0)
        return rc;
    const char *model = ptdp_st_meta(f, "model");
    const ptdp_model_ops *ops = model ? ptdp_model_lookup(model) : ptdp_model_at(0);
    if (ptdp_st_meta_count(f) == 0)
        rc = no_metadata(f, path, msg, msglen);
    else if (ops == NULL) {
        snprintf(msg, msglen, "%s: metadata 'model' is '%.20s', not a model ptdp has", path, model);
        rc = PTDP_ECORRUPT;
    }
    if (rc != 0) {
        ptdp_st_close(f);
        return rc;
    }
    memset(cfg, 0, sizeof *cfg);
    cfg->ops = ops;
    take_file_keys(f, cfg);
    /* the model's keys for what was read: each present, and taken */
    char values[NMETA_MAX][32];
    const char *keys[NMETA_MAX], *flags[NMETA_MAX];
    int n = ops->metadata(cfg, keys, values, flags, NMETA_MAX);
    for (int i = 0; i < n && rc == 0; i++) {
        long long v;
        double x;
        if (meta_is_real(values[i])) {
            if ((rc = meta_real(f, path, keys[i], &x, msg, msglen)) == 0 &&
                (ops->from_metadata_real == NULL || ops->from_metadata_real(cfg, keys[i], x) != 0)) {
                char h[32];
                snprintf(msg, msglen, "%s: metadata '%s' is %s, out of range", path, keys[i], shortest(x, h));
                rc = PTDP_ECORRUPT;
            }
        } else if ((rc = meta_int(f, path, keys[i], &v, msg, msglen)) == 0 && ops->from_metadata(cfg, keys[i], v) != 0) {
            snprintf(msg, msglen, "%s: metadata '%s' is %lld, out of range", path, keys[i], v);
            rc = PTDP_ECORRUPT;
        }
    }
    /* and the settings beyond the shapes: the file's, or what an older file meant */
    ptdp_meta_setting set[PTDP_META_SETTINGS_MAX];
    const int nset = rc == 0 ? file_settings(f, path, cfg, set, PTDP_META_SETTINGS_MAX, msg, msglen) : 0;
    if (nset < 0)
        rc = nset;
    for (int i = 0; i < nset; i++)
        ptdp_state_take_setting(cfg, &set[i]);   /* checked by file_settings */
    ptdp_st_close(f);
    return rc;
}
