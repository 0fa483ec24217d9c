/*
 * equiv.c — train, compare with the baseline, resume from a checkpoint
 * (equiv.h).  Why a parallel run can equal one device at all: every
 * random number is a function of (seed, name, global index), every
 * gradient is scaled by 1/B and summed, and every reduction runs in a
 * fixed order — so the only differences left are the order of additions,
 * which --check's tolerance allows.
 */
#include "equiv.h"

#include "gpt_shape.h"

#include "ptdp/gpt.h"
#include "ptdp/schedule.h"
#include "ptdp/mlp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The step: AdamW at lr 1e-2, or 1e-3 in float.  Adam moves a weight by
 * about lr whatever its gradient's size (lr m / sqrt(v)), so where a
 * gradient is near 0 a rounding difference between two layouts' sums can
 * turn its update round: up to 2 lr a step in that weight.  In double that
 * stays far below 1e-10; in float it reached 1.9e-4 at lr 1e-2 after 4
 * steps on a CPU whose BLAS kernels sum in another order (AVX-512's
 * sgemm against AVX2's), past the 1e-4 tolerance with nothing wrong. */
#define EQUIV_LR (sizeof(ptdp_real) == sizeof(float) ? 1e-3 : 1e-2)

ptdp_train_config equiv_config(int dp, int tp, int pp, int m)
{
    ptdp_train_config c = {
        .model = PTDP_MLP_CONFIG( .d_in = 12, .hidden = 16, .ffn = 32, .layers = 4, .classes = 8 ),
        .dp = dp, .tp = tp, .pp = pp, .micro_batches = m, .batch = 48, .steps = 4,
        .optimizer = PTDP_OPT_ADAMW, .lr = EQUIV_LR, .bucket_mb = 0.004, .seed = 42,
        .schedule = ptdp_schedule_default(),
    };
    return c;
}

int equiv_mesh_grid(const int ms[2], equiv_mesh *out, int max)
{
    static const int tps[] = { 1, 2, 4, 8 };
    static const char *const schedules[] = { "1f1b", "gpipe" };
    int n = 0;
    for (int pp = 1; pp <= 4; pp++)
        for (int t = 0; t < 4; t++)
            for (int dp = 1; dp * tps[t] * pp <= 8; dp++)
                for (int mi = 0; mi < 2; mi++)
                    for (int s = 0; s < (pp > 1 ? 2 : 1); s++)
                        for (int zero = 0; zero <= (dp > 1 ? 2 : 0); zero++) {
                            if (n == max) {   /* called while tests register: no ck_assert yet */
                                fprintf(stderr, "equiv_mesh_grid: more than %d meshes\n", max);
                                abort();
                            }
                            out[n++] = (equiv_mesh){ dp, tps[t], pp, ms[mi], zero, schedules[s] };
                        }
    return n;
}

/* "dp=2 tp=4 pp=1 m=3 1f1b zero=0": a configuration in a failure message. */
static const char *describe(const ptdp_train_config *c, char *buf, size_t len)
{
    snprintf(buf, len, "dp=%d cp=%d%s%s tp=%d%s pp=%d m=%d %s%s zero=%d", c->dp, ptdp_train_cp(c),
             c->cp_contiguous ? " contiguous" : "", c->cp_a2a ? " a2a" : "", c->tp, c->sp ? " sp" : "", c->pp,
             c->micro_batches, ptdp_train_schedule(c)->name, c->recompute ? " recompute" : c->recompute_core ? " selective" : "", c->zero);
    return buf;
}

/* ------------------------------------------------------------ one run */

void equiv_train(const ptdp_train_config *cfg, const ptdp_launch_opts *opts, ptdp_state *final,
                 ptdp_train_result *res)
{
    ptdp_train_config c = *cfg;
    if (final != NULL) {
        ck_assert_int_eq(ptdp_state_init(final, &c.model, c.optimizer, c.momentum > 0), 0);
        c.final_state = final;
    }
    ptdp_launch_opts o = harness_opts(opts);
    char msg[PTDP_MSG_MAX] = "", what[128];
    int rc = ptdp_train(&c, &o, NULL, NULL, res, msg, sizeof msg);
    /* with a launch result to fill, the failure's message goes there */
    ck_assert_msg(rc == 0, "%s failed: %s", describe(&c, what, sizeof what),
                  o.result != NULL && o.result->message[0] != '\0' ? o.result->message : msg);
}

/* ------------------------------------------------------ against the baseline */

ptdp_train_config equiv_baseline(const ptdp_train_config *cfg)
{
    return ptdp_train_baseline(cfg);   /* --check's one device (train.h) */
}

/* ------------------------------------------- the baseline, once a run
 *
 * The cases of a matrix differ in their meshes, not in the one device
 * they are held to: the same model, batch, steps, seed and dropout give
 * the same baseline, which is deterministic.  So the first case that needs
 * one trains it and leaves its final state and its steps' losses and
 * norms in the run's directory (harness_run_dir), named by a hash of the
 * baseline's configuration; later cases of the run load them.  The whole
 * configuration is stored beside them and compared byte for byte, so only
 * an identical baseline is reused (a run from a state, cfg->resume, never
 * is).  It saves about 40% of a matrix's time and changes no check. */

typedef struct { double loss, norm; } base_step;

/* The configuration as the cache compares it: without the outputs. */
static ptdp_train_config base_key(const ptdp_train_config *b)
{
    ptdp_train_config k = *b;
    k.final_state = k.init_state = NULL;
    k.dump_x = NULL;
    k.dump_tokens = k.dump_y = NULL;
    return k;
}

/* Where key's baseline is kept (FNV-1a of its bytes); false: not kept. */
static bool base_stem(const ptdp_train_config *key, char *stem, size_t len)
{
    const char *dir = harness_run_dir();
    if (dir == NULL || key->resume != NULL)
        return false;
    uint64_t h = 1469598103934665603ULL;
    const unsigned char *p = (const unsigned char *)key;
    for (size_t i = 0; i < sizeof *key; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return snprintf(stem, len, "%s/baseline-%016llx", dir, (unsigned long long)h) < (int)len;
}

static bool base_load(const ptdp_train_config *key, const char *stem, ptdp_state *final, base_step *steps)
{
    char path[1100], msg[PTDP_MSG_MAX];
    snprintf(path, sizeof path, "%s.cfg", stem);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return false;
    ptdp_train_config stored;
    bool same = fread(&stored, sizeof stored, 1, f) == 1 && memcmp(&stored, key, sizeof stored) == 0 &&
                fread(steps, sizeof *steps, (size_t)key->steps, f) == (size_t)key->steps;
    fclose(f);
    snprintf(path, sizeof path, "%s.st", stem);
    return same && ptdp_state_load(final, path, &key->model, msg, sizeof msg) == 0;
}

/* The state first, then the configuration and steps (renamed into place:
 * a .cfg that exists is a whole entry). */
static void base_save(const ptdp_train_config *key, const char *stem, const ptdp_state *final,
                      const base_step *steps)
{
    char path[1100], tmp[1110], msg[PTDP_MSG_MAX];
    snprintf(path, sizeof path, "%s.st", stem);
    if (ptdp_state_save(final, path, msg, sizeof msg) != 0)
        return;
    snprintf(path, sizeof path, "%s.cfg", stem);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (f == NULL)
        return;
    bool ok = fwrite(key, sizeof *key, 1, f) == 1 &&
              fwrite(steps, sizeof *steps, (size_t)key->steps, f) == (size_t)key->steps;
    if (fclose(f) == 0 && ok)
        rename(tmp, path);
    else
        unlink(tmp);
}

/* The baseline b's final state and steps: this run's, or trained now. */
static void baseline_run(const ptdp_train_config *b, ptdp_state *final, base_step *steps)
{
    const ptdp_train_config key = base_key(b);
    char stem[1024];
    const bool kept = base_stem(&key, stem, sizeof stem);
    if (kept && base_load(&key, stem, final, steps))
        return;
    ptdp_train_result r;
    equiv_train(b, NULL, final, &r);
    for (int i = 0; i < b->steps; i++)
        steps[i] = (base_step){ r.log[i].loss, r.log[i].grad_norm };
    ptdp_train_result_free(&r);
    if (kept)
        base_save(&key, stem, final, steps);
}

void equiv_check(const ptdp_train_config *cfg)
{
    ptdp_train_config b = equiv_baseline(cfg);
    ptdp_state fs, fb;
    ptdp_train_result rs;
    char what[128];
    describe(cfg, what, sizeof what);
    equiv_train(cfg, NULL, &fs, &rs);
    base_step *base = calloc((size_t)cfg->steps, sizeof *base);
    ck_assert(base != NULL);
    baseline_run(&b, &fb, base);
    for (int i = 0; i < cfg->steps; i++) {
        const ptdp_step_log *s = &rs.log[i];
        const base_step *l = &base[i];
        ck_assert_msg(l->norm > 0, "%s: step %d: the baseline's gradient is zero", what, i + 1);
        if (cfg->clip_grad > 0)   /* clipping must act, or it tests nothing */
            ck_assert_msg(l->norm > cfg->clip_grad, "%s: step %d: norm %g is below the clip %g", what, i + 1,
                          l->norm, cfg->clip_grad);
        ck_assert_msg(ptdp_check_value(s->loss, l->loss, PTDP_TOLERANCE),
                      "%s: step %d loss %.15g vs baseline %.15g", what, i + 1, s->loss, l->loss);
        ck_assert_msg(ptdp_check_value(s->grad_norm, l->norm, PTDP_TOLERANCE),
                      "%s: step %d gradient norm %.15g vs baseline %.15g", what, i + 1, s->grad_norm, l->norm);
    }
    ptdp_check_report rep;
    ck_assert_msg(ptdp_check_states(&fs, &fb, PTDP_TOLERANCE, &rep), "%s: %s differs by %g (relative %g)", what,
                  rep.worst, rep.max_abs, rep.max_rel);
    /* the run must actually have trained: the loss moved */
    ck_assert_msg(base[0].loss != base[cfg->steps - 1].loss, "%s: the baseline's loss never moved", what);
    free(base);
    ptdp_train_result_free(&rs);
    ptdp_state_free(&fs);
    ptdp_state_free(&fb);
}

void equiv_losses_agree(const ptdp_step_log *a, const ptdp_step_log *b, int n, double tol, const char *what)
{
    for (int i = 0; i < n; i++) {
        bool same = tol == 0 ? memcmp(&a[i].loss, &b[i].loss, sizeof(double)) == 0
                             : ptdp_check_value(a[i].loss, b[i].loss, tol);
        ck_assert_msg(same, "%s: step %ld: loss %.17g, step %ld: %.17g", what, a[i].step, a[i].loss, b[i].step,
                      b[i].loss);
    }
}

/* Adam's second moment: v > 0 wherever a gradient was seen. */
static bool has_zeros(const ptdp_state_tensor *t)
{
    for (size_t k = 0; k < (size_t)t->rows * (size_t)t->cols; k++)
        if (t->data[k] == 0)
            return true;
    return false;
}

/* Tensor i of two states, which must name the same tensor of the same
 * size: its element count. */
static size_t same_tensor(const ptdp_state *a, const ptdp_state *b, int i)
{
    const ptdp_state_tensor *x = &a->t[i], *y = &b->t[i];
    size_t n = (size_t)x->rows * (size_t)x->cols;
    ck_assert_str_eq(x->name, y->name);
    ck_assert_uint_eq(n, (size_t)y->rows * (size_t)y->cols);
    return n;
}

void equiv_states_agree(const ptdp_state *a, const ptdp_state *b, double tol, const char *what)
{
    ck_assert_int_eq(a->ntensors, b->ntensors);
    for (int i = 0; i < a->ntensors; i++) {
        const ptdp_state_tensor *x = &a->t[i], *y = &b->t[i];
        const size_t n = same_tensor(a, b, i);
        if (tol == 0) {
            ck_assert_msg(memcmp(x->data, y->data, n * sizeof(ptdp_real)) == 0, "%s: %s differs", what, x->name);
        } else {
            double worst = 0, largest = 0;
            for (size_t k = 0; k < n; k++) {
                worst = fmax(worst, fabs((double)x->data[k] - (double)y->data[k]));
                largest = fmax(largest, fabs((double)y->data[k]));
            }
            /* relative to the tensor's own scale: exp_avg_sq is ~1e-6, far below --check's max(1, |b|) */
            ck_assert_msg(worst <= tol * largest, "%s: %s differs by %g (largest value %g)", what, x->name, worst,
                          largest);
        }
        if (strstr(x->name, "exp_avg_sq") != NULL)
            ck_assert_msg(!has_zeros(x) && !has_zeros(y), "%s: %s has zeros: a slice was not written", what,
                          x->name);
    }
}

/* ------------------------------------------------------ the checkpoint */

void equiv_resume(const ptdp_train_config *first, const ptdp_train_config *second, ptdp_state *end,
                  ptdp_train_result *log)
{
    char path[] = "/tmp/ptdp-resume-XXXXXX", msg[PTDP_MSG_MAX];
    harness_temp_file(path);
    ptdp_state half, loaded;
    ptdp_train_result r;
    equiv_train(first, NULL, &half, &r);
    ck_assert_msg(ptdp_state_save(&half, path, msg, sizeof msg) == 0, "%s", msg);
    ck_assert_msg(ptdp_state_load(&loaded, path, &second->model, msg, sizeof msg) == 0, "%s", msg);
    unlink(path);
    ck_assert_int_eq(loaded.step, first->steps);

    ptdp_train_config c = *second;
    c.resume = &loaded;
    equiv_train(&c, NULL, end, log);
    ck_assert_int_eq(log->log[0].step, first->steps + 1);
    ptdp_train_result_free(&r);
    ptdp_state_free(&half);
    ptdp_state_free(&loaded);
}

void equiv_resume_beside(const ptdp_train_config *whole, const ptdp_train_config *first,
                         const ptdp_train_config *second, ptdp_state *whole_end, ptdp_train_result *whole_log,
                         ptdp_state *end, ptdp_train_result *log)
{
    equiv_train(whole, NULL, whole_end, whole_log);
    equiv_resume(first, second, end, log);
}

void equiv_states_same_bits(const ptdp_state *a, const ptdp_state *b, const char *what)
{
    ck_assert_int_eq(a->ntensors, b->ntensors);
    for (int i = 0; i < a->ntensors; i++) {
        const size_t n = same_tensor(a, b, i);
        ck_assert_msg(memcmp(a->t[i].data, b->t[i].data, n * sizeof(ptdp_real)) == 0, "%s: %s differs", what,
                      a->t[i].name);
    }
}

const char *equiv_refused(const ptdp_train_config *cfg, const char *says)
{
    static _Thread_local char msg[PTDP_MSG_MAX];
    msg[0] = '\0';
    ck_assert_msg(ptdp_train_validate(cfg, msg, sizeof msg) == PTDP_EINVAL, "not refused (wanted '%s'): %s", says, msg);
    ck_assert_msg(strstr(msg, says) != NULL, "the refusal '%s' does not say '%s'", msg, says);
    return msg;
}

void equiv_runs_same_bits(const ptdp_train_config *a, const ptdp_train_config *b, const char *what)
{
    ptdp_state sa, sb;
    ptdp_train_result ra, rb;
    equiv_train(a, NULL, &sa, &ra);
    equiv_train(b, NULL, &sb, &rb);
    ck_assert_int_eq(a->steps, b->steps);
    equiv_losses_agree(ra.log, rb.log, b->steps, 0, what);
    equiv_states_same_bits(&sa, &sb, what);
    ptdp_state_free(&sa);
    ptdp_state_free(&sb);
    ptdp_train_result_free(&ra);
    ptdp_train_result_free(&rb);
}

ptdp_train_config equiv_pipe_config(const equiv_pipe_case *k, const char *schedule, int dp, int pp, int m,
                                    int min_layers)
{
    ptdp_train_config c = k->model > 0 ? equiv_gpt_config(dp, k->tp, pp, m, k->model == 2 ? 1 : k->tp)
                                       : equiv_config(dp, k->tp, pp, m);
    if (k->model == 2) {
        equiv_gpt_experts(&c);
        c.ep = k->ep;
    }
    if (c.model.layers < min_layers)
        c.model.layers = min_layers;
    c.zero = k->zero;
    c.sp = k->sp;
    c.recompute = k->recompute;
    c.dropout = k->dropout;
    c.schedule = ptdp_schedule_find(schedule);
    return c;
}

const char *equiv_pipe_model_name(const equiv_pipe_case *k)
{
    return k->model == 0 ? "mlp" : k->model == 1 ? "gpt" : "moe";
}

void equiv_gpt_experts(ptdp_train_config *c)
{
    ptdp_gpt_settings *g = ptdp_gpt(&c->model);
    g->moe_experts = 4;
    g->moe_every = 1;
    g->moe_ffn = 24;
    g->moe_top_k = 2;
    g->moe_aux_loss = 0.05;
}

ptdp_model_config equiv_small_gpt(int tp)
{
    /* the built-in sums' 62 tokens */
    return gpt_of((gpt_shape){ .layers = 4, .hidden = 32, .ffn = 64, .heads = 8, .seq_len = 8, .vocab = 62 }, tp);
}

ptdp_train_config equiv_overlap_config(int dp, int pp, int m, bool overlap)
{
    ptdp_train_config c = equiv_config(dp, 1, pp, m);
    c.model.hidden = 64;
    c.model.ffn = 256;
    c.batch = 1024;
    c.steps = 2;
    c.overlap = overlap;
    return c;
}

ptdp_train_config equiv_gpt_config(int dp, int tp, int pp, int m, int model_tp)
{
    ptdp_train_config c = equiv_config(dp, tp, pp, m);
    c.model = equiv_small_gpt(model_tp);
    c.batch = 16;
    c.steps = 2;
    return c;
}
