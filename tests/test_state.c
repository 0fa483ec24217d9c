/*
 * test_state.c — resuming trusts nothing: each damaged or foreign
 * checkpoint is refused with a message naming the tensor or the field.
 *
 * Every case starts from a good checkpoint of a small MLP (AdamW), rewrites
 * it with one thing wrong, and loads it:
 *
 *   metadata   seed "banana", batch -5, a field missing (d_in), optimizer "x"
 *   tensors    one the model does not have ("junk", a third block's), a NaN
 *              or an infinity in a weight, a negative exp_avg_sq
 *   the step   2^63 - 1 and 2^62 (beyond what the optimizer counts), -1
 *   the model  another model's checkpoint (a GPT's into the MLP and the
 *              reverse): PTDP_EINVAL — the wrong file for this run, not a
 *              damaged one — naming its first tensor this model has no
 *              place for and the first it lacks; a kind ptdp does not have;
 *              no metadata at all (said, not taken for the MLP's)
 *   a mixture  a GPT with experts read back from its metadata alone, the
 *              router's settings with it, an older file's as the defaults
 *
 * and the good one loads, so the rewriting itself is not what fails.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ptdp/mlp.h"
#include "ptdp/models.h"
#include "ptdp/safetensors.h"
#include "ptdp/error.h"
#include "ptdp/gpt.h"
#include "ptdp/state.h"
#include "ptdp/train.h"

static const harness_tcase resume_tests = { .name = "resume" };

HARNESS_MODEL_CONFIG(cfg_of, PTDP_MLP_CONFIG( .ops = &ptdp_mlp_ops, .d_in = 3, .hidden = 4, .ffn = 8, .layers = 2, .classes = 2 ))
#define CFG (*cfg_of())

/* The metadata and tensors of a checkpoint, to rewrite before saving. */
typedef struct {
    const char *keys[16];
    char values[16][32];
    int nmeta;
    ptdp_st_tensor t[64];
    int n;
    int64_t step;
    ptdp_real junk[4];
} file_parts;

/* The parts of a good checkpoint of CFG: every tensor of a fresh state
 * (small nonzero values), AdamW, step 3, seed 7, batch 16. */
static void good_parts(ptdp_state *s, file_parts *f)
{
    ck_assert_int_eq(ptdp_state_init(s, &CFG, PTDP_OPT_ADAMW, false), 0);
    memset(f, 0, sizeof *f);
    for (int i = 0; i < s->ntensors; i++) {
        ptdp_state_tensor *t = &s->t[i];
        for (int k = 0; k < t->rows * t->cols; k++)
            t->data[k] = (ptdp_real)(0.01 * (k + 1));
        ptdp_st_tensor *e = &f->t[f->n++];
        snprintf(e->name, sizeof e->name, "%s", t->name);
        e->dtype = PTDP_REAL;
        e->ndim = t->is_bias ? 1 : 2;
        e->shape[0] = t->is_bias ? t->cols : t->rows;
        e->shape[1] = t->cols;
        e->data = t->data;
    }
    f->step = 3;
    ptdp_st_tensor *e = &f->t[f->n++];
    snprintf(e->name, sizeof e->name, "optim.step");
    e->dtype = PTDP_I64;
    e->ndim = 0;
    e->data = &f->step;
    const char *k[] = { "d_in", "d_model", "d_ff", "n_layers", "n_classes", "seed", "batch", "optimizer" };
    const char *v[] = { "3", "4", "8", "2", "2", "7", "16", "adamw" };
    for (int i = 0; i < 8; i++) {
        f->keys[i] = k[i];
        snprintf(f->values[i], sizeof f->values[i], "%s", v[i]);
    }
    f->nmeta = 8;
}

static void set_meta(file_parts *f, const char *key, const char *value)
{
    for (int i = 0; i < f->nmeta; i++)
        if (strcmp(f->keys[i], key) == 0) {
            if (value == NULL) {   /* remove it */
                f->keys[i] = f->keys[f->nmeta - 1];
                memcpy(f->values[i], f->values[f->nmeta - 1], sizeof f->values[i]);
                f->nmeta--;
            } else {
                snprintf(f->values[i], sizeof f->values[i], "%s", value);
            }
            return;
        }
    ck_abort_msg("no metadata key %s", key);
}

static ptdp_real *tensor_data(file_parts *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0)
            return (ptdp_real *)f->t[i].data;   /* the state owns it: writable */
    ck_abort_msg("no tensor %s", name);
    return NULL;
}

/* Save f and load it back: the load's status, its message in msg. */
static int save_and_load(file_parts *f, char *msg, size_t msglen)
{
    char path[] = "/tmp/ptdp_state_XXXXXX";
    harness_temp_file(path);
    const char *values[16];
    for (int i = 0; i < f->nmeta; i++)
        values[i] = f->values[i];
    ck_assert_int_eq(ptdp_st_write(path, f->t, f->n, f->keys, values, f->nmeta, msg, msglen), 0);
    ptdp_state s;
    int rc = ptdp_state_load(&s, path, &CFG, msg, msglen);
    if (rc == 0)
        ptdp_state_free(&s);
    unlink(path);
    return rc;
}

#define EXPECT_REFUSED(f, text)                                                       \
    do {                                                                              \
        char m_[PTDP_MSG_MAX];                                                        \
        ck_assert_int_ne(save_and_load(f, m_, sizeof m_), 0);                         \
        ASSERT_HAS(m_, text);                                                         \
    } while (0)

TEST(resume_tests, test_the_good_checkpoint_loads)
{
    ptdp_state s;
    file_parts f;
    good_parts(&s, &f);
    char msg[PTDP_MSG_MAX];
    ck_assert_msg(save_and_load(&f, msg, sizeof msg) == 0, "%s", msg);
    ptdp_state_free(&s);
}
END_TEST

TEST(resume_tests, test_bad_metadata_is_named)
{
    static const struct { const char *key, *value, *says; } cases[] = {
        { "seed", "banana", "metadata 'seed' is 'banana', not a whole number" },
        { "batch", "-5", "metadata 'batch' is -5" },
        { "batch", "0", "metadata 'batch' is 0" },
        { "seed", "-1", "metadata 'seed' is -1" },
        { "d_in", NULL, "the checkpoint has no metadata field 'd_in'" },
        { "n_layers", "3", "the checkpoint has n_layers=3, this run --layers 2" },
        { "optimizer", "adam", "metadata 'optimizer' is missing or unknown" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ptdp_state s;
        file_parts f;
        good_parts(&s, &f);
        set_meta(&f, cases[i].key, cases[i].value);
        EXPECT_REFUSED(&f, cases[i].says);
        ptdp_state_free(&s);
    }
}
END_TEST

TEST(resume_tests, test_a_tensor_the_model_does_not_have_is_named)
{
    static const char *const names[] = { "junk", "blocks.2.fc1.bias" };
    for (int i = 0; i < 2; i++) {
        ptdp_state s;
        file_parts f;
        good_parts(&s, &f);
        ptdp_st_tensor *e = &f.t[f.n++];
        snprintf(e->name, sizeof e->name, "%s", names[i]);
        e->dtype = PTDP_REAL;
        e->ndim = 1;
        e->shape[0] = 4;
        e->data = f.junk;
        char want[128];
        snprintf(want, sizeof want, "a tensor this model does not have: '%s'", names[i]);
        EXPECT_REFUSED(&f, want);
        ptdp_state_free(&s);
    }
}
END_TEST

TEST(resume_tests, test_non_finite_and_negative_values_are_named)
{
    static const struct { const char *tensor; double value; const char *says; } cases[] = {
        { "blocks.0.fc1.weight", NAN, "tensor 'blocks.0.fc1.weight' holds NaN at element 1" },
        { "out.bias", INFINITY, "tensor 'out.bias' holds an infinity at element 1" },
        { "optim.in.weight.exp_avg", -INFINITY, "tensor 'optim.in.weight.exp_avg' holds an infinity" },
        { "optim.in.bias.exp_avg_sq", -1e-3, "tensor 'optim.in.bias.exp_avg_sq' holds -0.001 at element 1" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ptdp_state s;
        file_parts f;
        good_parts(&s, &f);
        tensor_data(&f, cases[i].tensor)[1] = (ptdp_real)cases[i].value;
        EXPECT_REFUSED(&f, cases[i].says);
        ptdp_state_free(&s);
    }
}
END_TEST

TEST(resume_tests, test_a_step_out_of_range_is_refused)
{
    static const int64_t steps[] = { INT64_MAX, (int64_t)1 << 62, PTDP_MAX_STEP + 1, -1 };
    for (int i = 0; i < 4; i++) {
        ptdp_state s;
        file_parts f;
        good_parts(&s, &f);
        f.step = steps[i];
        EXPECT_REFUSED(&f, "tensor 'optim.step' is");
        ptdp_state_free(&s);
    }
    ptdp_state s;                 /* the largest allowed still loads */
    file_parts f;
    good_parts(&s, &f);
    f.step = PTDP_MAX_STEP;
    char msg[PTDP_MSG_MAX];
    ck_assert_msg(save_and_load(&f, msg, sizeof msg) == 0, "%s", msg);
    ptdp_state_free(&s);
}
END_TEST

/* A small GPT's checkpoint (AdamW, step 0): its path in `path`. */
static ptdp_model_config gpt_cfg(void)
{
    return PTDP_GPT_CONFIG(.ops = &ptdp_gpt_ops, .hidden = 8, .heads = 2, .ffn = 16, .layers = 1, .seq_len = 4,
                           .vocab = 10, .vocab_padded = 16, .vocab_multiple = 16);
}

/* A fresh state of model g (AdamW, batch 4) saved at path. */
static void save_model(const char *path, const ptdp_model_config *g)
{
    ptdp_state s;
    char msg[PTDP_MSG_MAX];
    ck_assert_int_eq(ptdp_state_init(&s, g, PTDP_OPT_ADAMW, false), 0);
    s.batch = 4;
    ck_assert_msg(ptdp_state_save(&s, path, msg, sizeof msg) == 0, "%s", msg);
    ptdp_state_free(&s);
}

static void save_gpt(char *path)
{
    harness_temp_file(path);
    const ptdp_model_config g = gpt_cfg();
    save_model(path, &g);
}

/* Loaded both ways, by ptdp_state_load and ptdp_state_check_model alike. */
static void expect_another_model(const char *path, const ptdp_model_config *cfg, const char *const *says, int n)
{
    char msg[PTDP_MSG_MAX];
    ptdp_state s;
    ck_assert_int_eq(ptdp_state_load(&s, path, cfg, msg, sizeof msg), PTDP_EINVAL);
    for (int i = 0; i < n; i++)
        ASSERT_HAS(msg, says[i]);
    ck_assert_int_eq(ptdp_state_check_model(path, cfg, msg, sizeof msg), PTDP_EINVAL);
    for (int i = 0; i < n; i++)
        ASSERT_HAS(msg, says[i]);
}

TEST(resume_tests, test_another_models_checkpoint_is_refused_naming_its_tensors)
{
    char path[] = "/tmp/ptdp_state_gpt_XXXXXX";
    save_gpt(path);
    /* the GPT's file into the MLP: 2 + 1 block x 12 + 2 tensors of the GPT's, the MLP's 2 + 2 blocks x 4 + 2 */
    const char *const gpt_into_mlp[] = {
        "holds another model, gpt (its metadata 'model'), and this run trains --model mlp",
        "it holds 'transformer.wte.weight' and 15 more that --model mlp has no place for",
        "it lacks 'in.weight' and 11 more that --model mlp needs", "give --model gpt",
    };
    expect_another_model(path, &CFG, gpt_into_mlp, 4);
    const ptdp_model_config g = gpt_cfg();
    char msg[PTDP_MSG_MAX];
    ck_assert_msg(ptdp_state_check_model(path, &g, msg, sizeof msg) == 0, "%s", msg);   /* its own: fine */
    unlink(path);

    /* the MLP's file (no metadata 'model': the default) into the GPT */
    ptdp_state s;
    file_parts f;
    good_parts(&s, &f);
    char mlp[] = "/tmp/ptdp_state_mlp_XXXXXX";
    harness_temp_file(mlp);
    const char *values[16];
    for (int i = 0; i < f.nmeta; i++)
        values[i] = f.values[i];
    ck_assert_int_eq(ptdp_st_write(mlp, f.t, f.n, f.keys, values, f.nmeta, msg, sizeof msg), 0);
    const char *const mlp_into_gpt[] = {
        "holds another model, mlp (no metadata 'model': the default), and this run trains --model gpt",
        "it holds 'in.weight' and 11 more that --model gpt has no place for",
        "it lacks 'transformer.wte.weight' and 15 more that --model gpt needs",
    };
    expect_another_model(mlp, &g, mlp_into_gpt, 3);
    unlink(mlp);

    /* a kind ptdp does not have: a file it cannot read (as before) */
    f.keys[f.nmeta] = "model";
    snprintf(f.values[f.nmeta++], sizeof f.values[0], "bert");
    ck_assert_int_eq(save_and_load(&f, msg, sizeof msg), PTDP_ECORRUPT);
    ASSERT_HAS(msg, "the checkpoint holds a bert model, this run trains a mlp");
    ptdp_state_free(&s);
}
END_TEST

/* `path` again as `out`, its metadata without the keys in `drop` (all of
 * them when drop is NULL): a file of an older ptdp, or of another program. */
static void rewrite_without(const char *path, const char *out, const char *const *drop, int ndrop)
{
    char msg[PTDP_MSG_MAX];
    ptdp_st_file *f;
    ck_assert_msg(ptdp_st_open(path, &f, msg, sizeof msg) == 0, "%s", msg);
    static ptdp_st_tensor t[256];
    const char *keys[32], *values[32];
    int n = 0, nmeta = 0;
    ck_assert_int_le(ptdp_st_count(f), 256);
    for (int i = 0; i < ptdp_st_count(f); i++)
        t[n++] = *ptdp_st_get(f, i);
    for (int i = 0; drop != NULL && i < ptdp_st_meta_count(f) && nmeta < 32; i++) {
        bool dropped = false;
        for (int k = 0; k < ndrop; k++)
            dropped |= strcmp(ptdp_st_meta_key(f, i), drop[k]) == 0;
        if (!dropped) {
            keys[nmeta] = ptdp_st_meta_key(f, i);
            values[nmeta] = ptdp_st_meta(f, keys[nmeta]);
            nmeta++;
        }
    }
    ck_assert_msg(ptdp_st_write(out, t, n, keys, values, nmeta, msg, sizeof msg) == 0, "%s", msg);
    ptdp_st_close(f);
}

/* A GPT with experts, read back from its file alone (what ptdp sample
 * does): the mixture's shapes, which a zeroed config's key list lacks,
 * and the router's settings beyond them; a file saved before those were
 * recorded reads as the defaults then (dropless, alpha 0.01); a file
 * without any metadata is said to lack them, not taken for the MLP's. */
TEST(resume_tests, test_a_mixtures_checkpoint_reads_back_from_its_metadata)
{
    char path[] = "/tmp/ptdp_state_moe_XXXXXX", old[] = "/tmp/ptdp_state_old_XXXXXX";
    harness_temp_file(path);
    harness_temp_file(old);
    ptdp_model_config g = gpt_cfg(), got;
    g.layers = 2;
    *ptdp_gpt(&g) = (ptdp_gpt_settings){ .heads = 2, .seq_len = 4, .vocab = 10, .vocab_padded = 16,
                                         .vocab_multiple = 16, .moe_experts = 4, .moe_every = 2, .moe_ffn = 8,
                                         .moe_top_k = 1, .moe_capacity = 1.25, .moe_aux_loss = 0.125 };
    ptdp_state s;
    char msg[PTDP_MSG_MAX];
    save_model(path, &g);
    ck_assert_msg(ptdp_state_peek_config(path, &got, msg, sizeof msg) == 0, "%s", msg);
    const ptdp_gpt_settings *a = ptdp_gpt(&got);
    ck_assert(a->moe_experts == 4 && a->moe_every == 2 && a->moe_ffn == 8 && a->moe_top_k == 1);
    ck_assert(a->moe_capacity == 1.25 && a->moe_aux_loss == 0.125 && got.layers == 2);

    const char *const recorded[] = { "moe_capacity_factor", "moe_aux_loss" };
    rewrite_without(path, old, recorded, 2);
    ck_assert_msg(ptdp_state_peek_config(old, &got, msg, sizeof msg) == 0, "%s", msg);
    ck_assert(ptdp_gpt(&got)->moe_capacity == 0 && ptdp_gpt(&got)->moe_aux_loss == 0.01);
    ptdp_meta_setting set[PTDP_META_SETTINGS_MAX];
    /* the two above, the groups' two (moe_groups, moe_group_top_k: read from every file, written only
     * when not 1, so this file, like every file without groups, means 1 and 1) and the z-loss's weight
     * (moe_z_loss, the same way: a file without it means 0) */
    ck_assert_int_eq(ptdp_state_settings(old, &g, set, PTDP_META_SETTINGS_MAX, msg, sizeof msg), 5);
    ck_assert(strtod(set[0].value, NULL) == 0 && strtod(set[1].value, NULL) == 0.01);
    ck_assert(strcmp(set[2].key, "moe_groups") == 0 && strtod(set[2].value, NULL) == 1);
    ck_assert(strcmp(set[3].key, "moe_group_top_k") == 0 && strtod(set[3].value, NULL) == 1);
    ck_assert(strcmp(set[4].key, "moe_z_loss") == 0 && strtod(set[4].value, NULL) == 0);
    ck_assert_msg(ptdp_state_load(&s, old, &g, msg, sizeof msg) == 0, "%s", msg);   /* never a mismatch */
    ptdp_state_free(&s);

    rewrite_without(path, old, NULL, 0);
    ck_assert_int_eq(ptdp_state_peek_config(old, &got, msg, sizeof msg), PTDP_ECORRUPT);
    ASSERT_HAS(msg, "the checkpoint has no __metadata__");
    ck_assert_int_eq(ptdp_state_check_model(old, &g, msg, sizeof msg), PTDP_ECORRUPT);
    ASSERT_HAS(msg, "the checkpoint has no __metadata__");
    ck_assert_ptr_null(strstr(msg, "mlp"));
    unlink(path);
    unlink(old);
}
END_TEST

/* ... and the run refuses steps that would pass the counter. */
TEST(resume_tests, test_steps_past_the_counter_are_refused)
{
    ptdp_state s;
    ck_assert_int_eq(ptdp_state_init(&s, &CFG, PTDP_OPT_ADAMW, false), 0);
    s.step = PTDP_MAX_STEP - 2;
    ptdp_train_config c = ptdp_train_defaults();
    c.model = CFG;
    c.batch = 16;
    c.steps = 3;
    c.resume = &s;
    char msg[PTDP_MSG_MAX];
    ck_assert_int_eq(ptdp_train_validate(&c, msg, sizeof msg), PTDP_EINVAL);
    ASSERT_HAS(msg, "--steps 3 after the checkpoint's step");
    c.steps = 2;
    ck_assert_int_eq(ptdp_train_validate(&c, msg, sizeof msg), 0);
    ptdp_state_free(&s);
}
END_TEST

int main(void)
{
    return harness_main("state");
}
