/*
 * gpt_sample.c — `ptdp sample`: text from a GPT checkpoint.
 *
 *     ptdp train --model gpt --steps 300 --save gpt.st
 *     ptdp sample --load gpt.st --prompt "12+35="
 *
 * The checkpoint says which model it holds and its shapes (its metadata);
 * one device builds that model, takes the checkpoint's parameters and
 * extends the prompt token by token (ptdp_gpt_generate, gpt_sample.c):
 * greedy at --temperature 0, else a draw from the softmax of the logits /
 * temperature over the --top-k most likely tokens, the same text for the
 * same --seed.  A token is a byte; what cannot be printed is shown escaped
 * (\xHH), a newline as a newline.
 *
 * --held-out asks instead every sum the built-in corpus leaves out
 * (gpt_data.c) and prints how many the model answers exactly:
 *
 *     ptdp sample --load gpt.st --held-out
 *     held-out sums: 478 of 491 answered exactly (97.4%), sums never in the training text
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../args.h"
#include "../commands.h"
#include "ptdp/error.h"
#include "ptdp/gpt.h"
#include "ptdp/launch.h"
#include "ptdp/models.h"
#include "gpt_sample.h"

typedef ptdp_sample_options sample_options;

static void usage(void)
{
    printf("usage: ptdp sample --load CKPT [--prompt TEXT] [--tokens N] [--temperature X] [--top-k K]\n"
           "                   [--seed S]\n"
           "\n"
           "Generate text from a GPT checkpoint (ptdp train --model gpt --save CKPT), one token (a byte)\n"
           "at a time, on one device.\n"
           "\n"
           "  --load CKPT       the checkpoint\n"
           "  --prompt TEXT     what to continue (default: a newline); a prompt longer than the\n"
           "                    model's --seq-len keeps its last seq-len bytes, and says so\n"
           "  --tokens N        how many to generate (default 64)\n"
           "  --temperature X   0: always the most likely token (default); above 0: draw from\n"
           "                    softmax(logits / X)\n"
           "  --top-k K         draw among the K most likely only (default 0: all)\n"
           "  --seed S          the draws' seed: the same seed, the same text (default 1)\n"
           "  --held-out        instead of a prompt, ask the sums the built-in corpus leaves out\n"
           "                    (\"07+35=\", greedy) and print how many it answers exactly\n");
}

/* ---- parse and validate --------------------------------------------------- */

static int parse(int argc, char **argv, sample_options *o)
{
    *o = (sample_options){ .prompt = "\n", .tokens = 64, .seed = 1 };
    ptdp_args a;
    ptdp_args_init(&a, "sample", argc, argv, 1);
    while (ptdp_args_next(&a)) {
        int rc = 0;
        if (ptdp_args_is(&a, "--help")) { usage(); return -1; }
        else if (ptdp_args_is(&a, "--load")) rc = ptdp_args_string(&a, &o->load);
        else if (ptdp_args_is(&a, "--prompt")) rc = ptdp_args_string(&a, &o->prompt);
        else if (ptdp_args_is(&a, "--tokens")) rc = ptdp_args_int(&a, 1, 1 << 20, &o->tokens);
        else if (ptdp_args_is(&a, "--temperature")) rc = ptdp_args_double(&a, 0, 100, &o->temperature);
        else if (ptdp_args_is(&a, "--top-k")) rc = ptdp_args_int(&a, 0, 1 << 24, &o->top_k);
        else if (ptdp_args_is(&a, "--seed")) rc = ptdp_args_int(&a, 0, 2147483647, &o->seed);
        else if (ptdp_args_is(&a, "--held-out")) o->held_out = true;
        else rc = ptdp_args_unknown(&a);
        if (rc)
            return PTDP_EXIT_USAGE;
    }
    if (a.status)
        return PTDP_EXIT_USAGE;
    if (o->load == NULL)
        return ptdp_usage_error("sample", "--load CKPT is needed: the GPT checkpoint to sample from");
    if (o->prompt[0] == '\0')
        return ptdp_usage_error("sample", "--prompt '': give at least one character to continue");
    return 0;
}

/* ---- run: one device ------------------------------------------------------ */

typedef struct {
    const sample_options *o;
    ptdp_model_config cfg;
    const ptdp_state *state;
    int64_t *ids;
    int len;
    int right, asked;   /* held_out: the score */
} sample_job;

static int sample_device(ptdp_device *dev, void *arg)
{
    sample_job *j = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    int rc = ptdp_mesh_init(dev, 1, 1, 1, &mesh);
    if (rc != 0)
        return rc;
    if ((rc = ptdp_model_init(dev, &m, &j->cfg, &mesh, NULL, 1, 0.0)) == 0) {
        for (int i = 0; i < m.nparams; i++)
            ptdp_param_from_state(&m.params[i], m.params[i].w, ptdp_state_find((ptdp_state *)j->state,
                                                                                 m.params[i].name));
        const ptdp_gpt_sample_opts so = { .temperature = j->o->temperature, .top_k = j->o->top_k,
                                          .seed = (uint64_t)j->o->seed };
        if (j->o->held_out)
            rc = ptdp_gpt_score_sums(dev, &m, &j->right, &j->asked);
        else
            rc = ptdp_gpt_generate(dev, &m, j->ids, j->len, j->o->tokens, &so);
        ptdp_model_free(dev, &m);
    }
    ptdp_mesh_free(&mesh);
    return rc;
}

/* A byte as it prints: itself, a newline or a tab, else \xHH. */
static void put_token(int64_t t)
{
    if ((t >= 32 && t < 127) || t == '\n' || t == '\t')
        putchar((int)t);
    else
        printf("\\x%02x", (unsigned)(t & 0xff));
}

int ptdp_sample_print(const char *cmd, const ptdp_model_config *cfg, const ptdp_state *state,
                      const ptdp_sample_options *o)
{
    sample_job j = { .o = o, .cfg = *cfg, .state = state };
    /* The model's data source is never read here: a sequence of zeros. */
    unsigned char *none = calloc((size_t)ptdp_gpt(&j.cfg)->seq_len + 1, 1);
    if (none == NULL) {
        fprintf(stderr, "ptdp %s: host out of memory\n", cmd);
        return PTDP_EXIT_FAIL;
    }
    ptdp_gpt(&j.cfg)->corpus = none;
    ptdp_gpt(&j.cfg)->corpus_len = (size_t)ptdp_gpt(&j.cfg)->seq_len + 1;

    if (o->held_out) {
        ptdp_launch_result res;
        ptdp_launch_opts lo = { .result = &res };
        int status = PTDP_EXIT_OK;
        if (ptdp_launch(1, sample_device, &j, &lo) != 0) {
            fprintf(stderr, "ptdp %s: %s\n", cmd, res.message);
            status = PTDP_EXIT_FAIL;
        } else {
            printf("held-out sums: %d of %d answered exactly (%.1f%%), sums never in the training text\n",
                   j.right, j.asked, 100.0 * j.right / (j.asked > 0 ? j.asked : 1));
        }
        ptdp_launch_result_free(&res);
        free(none);
        return status;
    }
    size_t plen = strlen(o->prompt);
    const int T = ptdp_gpt(&j.cfg)->seq_len;
    int status = PTDP_EXIT_OK;
    for (size_t i = 0; i < plen && status == 0; i++)
        if ((unsigned char)o->prompt[i] >= ptdp_gpt(&j.cfg)->vocab) {
            fprintf(stderr, "ptdp %s: --prompt: byte %zu is token %u, but the model knows tokens 0..%d "
                    "(it was trained on other text)\n", cmd, i, (unsigned char)o->prompt[i], ptdp_gpt(&j.cfg)->vocab - 1);
            status = PTDP_EXIT_USAGE;
        }
    const char *kept = o->prompt;
    if (status == 0 && plen > (size_t)T) {
        kept = o->prompt + (plen - (size_t)T);
        fprintf(stderr, "ptdp %s: the prompt has %zu bytes, the model sees %d: it keeps the last %d\n",
                cmd, plen, T, T);
        plen = (size_t)T;
    }
    j.len = (int)plen;
    j.ids = calloc(plen + (size_t)o->tokens, sizeof *j.ids);
    if (status == 0 && j.ids == NULL) {
        fprintf(stderr, "ptdp %s: host out of memory\n", cmd);
        status = PTDP_EXIT_FAIL;
    }
    if (status == 0) {
        for (size_t i = 0; i < plen; i++)
            j.ids[i] = (unsigned char)kept[i];
        ptdp_launch_result res;
        ptdp_launch_opts lo = { .result = &res };
        if (ptdp_launch(1, sample_device, &j, &lo) != 0) {
            fprintf(stderr, "ptdp %s: %s\n", cmd, res.message);
            status = PTDP_EXIT_FAIL;
        } else {
            for (int i = 0; i < j.len + o->tokens; i++)
                put_token(j.ids[i]);
            putchar('\n');
        }
        ptdp_launch_result_free(&res);
    }
    free(j.ids);
    free(none);
    return status;
}

static int run(const sample_options *o)
{
    char msg[PTDP_MSG_MAX];
    ptdp_model_config cfg;
    if (ptdp_state_peek_config(o->load, &cfg, msg, sizeof msg) != 0) {
        fprintf(stderr, "ptdp sample: --load %s\n", msg);
        return PTDP_EXIT_FAIL;
    }
    if (ptdp_model_of(&cfg) != &ptdp_gpt_ops) {
        fprintf(stderr, "ptdp sample: --load %s holds an %s model; ptdp sample needs a GPT checkpoint "
                "(ptdp train --model gpt --save FILE)\n", o->load, ptdp_model_name(&cfg));
        return PTDP_EXIT_FAIL;
    }
    /* The checkpoint's metadata says V_pad; its data source is not needed. */
    ptdp_gpt(&cfg)->vocab_multiple = 1;
    if (ptdp_model_of(&cfg)->check(&cfg, 1, 1, msg, sizeof msg) != 0) {   /* the file's values, not flags */
        fprintf(stderr, "ptdp sample: --load %s: its metadata are no model ptdp can build (as flags: %s)\n",
                o->load, msg);
        return PTDP_EXIT_FAIL;
    }
    unsigned char *none = calloc((size_t)ptdp_gpt(&cfg)->seq_len + 1, 1);
    ptdp_gpt(&cfg)->corpus = none;
    ptdp_gpt(&cfg)->corpus_len = (size_t)ptdp_gpt(&cfg)->seq_len + 1;
    ptdp_state state;
    if (none == NULL || ptdp_state_load(&state, o->load, &cfg, msg, sizeof msg) != 0) {
        fprintf(stderr, "ptdp sample: --load %s\n", none ? msg : "host out of memory");
        free(none);
        return PTDP_EXIT_FAIL;
    }
    int status = ptdp_sample_print("sample", &cfg, &state, o);
    ptdp_state_free(&state);
    free(none);
    return status;
}

int ptdp_cmd_sample(int argc, char **argv)
{
    sample_options o;
    int rc = parse(argc, argv, &o);
    if (rc != 0)
        return rc < 0 ? PTDP_EXIT_OK : rc;
    return run(&o);
}
