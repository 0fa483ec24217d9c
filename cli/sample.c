/*
 * sample.c — `ptdp sample`: text from the checkpoint of any model of
 * tokens whose table says how to sample it (model.h's ptdp_model_sampling),
 * asking no model's name.
 *
 *     ptdp train --model gpt --steps 300 --save gpt.st
 *     ptdp sample --load gpt.st --prompt "12+35="
 *
 * The checkpoint says which model it holds and its shapes (its metadata);
 * the model's table makes that configuration buildable without its data
 * (sampling->without_data), one device builds it, takes the checkpoint's
 * parameters and extends the prompt token by token (ptdp_sample_generate,
 * src/models/sample.c): greedy at --temperature 0, else a draw from the
 * softmax of the logits / temperature over the --top-k most likely tokens,
 * the same text for the same --seed.  A token is a byte; what cannot be
 * printed is shown escaped (\xHH), a newline as a newline.  A checkpoint of
 * a model that cannot be sampled is refused, naming the models that can.
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

#include "args.h"
#include "commands.h"
#include "ptdp/error.h"
#include "ptdp/launch.h"
#include "ptdp/models.h"
#include "ptdp/sample.h"
#include "sample.h"

typedef ptdp_sample_options sample_options;

static void usage(void)
{
    char names[128];
    printf("usage: ptdp sample --load CKPT [--prompt TEXT] [--tokens N] [--temperature X] [--top-k K]\n"
           "                   [--seed S]\n"
           "\n"
           "Generate text from the checkpoint of a model of tokens (ptdp train --model M --save CKPT,\n"
           "M one of: %s), one token (a byte) at a time, on one device.\n"
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
           "                    (\"07+35=\", greedy) and print how many it answers exactly\n",
           ptdp_sample_models(names, sizeof names, ", "));
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
        return ptdp_usage_error("sample", "--load CKPT is needed: the checkpoint to sample from");
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
    int rc = ptdp_state_model_whole(dev, j->state, &j->cfg, &mesh, &m);
    if (rc != 0)
        return rc;
    const ptdp_sample_opts so = { .temperature = j->o->temperature, .top_k = j->o->top_k,
                                  .seed = (uint64_t)j->o->seed };
    if (j->o->held_out)
        rc = ptdp_sample_score_sums(dev, &m, &j->right, &j->asked);
    else
        rc = ptdp_sample_generate(dev, &m, j->ids, j->len, j->o->tokens, &so);
    ptdp_model_free(dev, &m);
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

/* One device runs the job: 0, or the failure printed (exit 1). */
static int launch(const char *cmd, sample_job *j)
{
    ptdp_launch_result res;
    ptdp_launch_opts lo = { .result = &res };
    int status = PTDP_EXIT_OK;
    if (ptdp_launch(1, sample_device, j, &lo) != 0) {
        fprintf(stderr, "ptdp %s: %s\n", cmd, res.message);
        status = PTDP_EXIT_FAIL;
    }
    ptdp_launch_result_free(&res);
    return status;
}

/* The prompt as token ids (j->ids, room for o->tokens more; j->len): each
 * byte a token the model knows, the last T bytes of a longer prompt. */
static int prompt_ids(const char *cmd, sample_job *j, int T, int V)
{
    const sample_options *o = j->o;
    size_t plen = strlen(o->prompt);
    for (size_t i = 0; i < plen; i++)
        if ((unsigned char)o->prompt[i] >= V) {
            fprintf(stderr, "ptdp %s: --prompt: byte %zu is token %u, but the model knows tokens 0..%d "
                    "(it was trained on other text)\n", cmd, i, (unsigned char)o->prompt[i], V - 1);
            return PTDP_EXIT_USAGE;
        }
    const char *kept = o->prompt;
    if (plen > (size_t)T) {
        kept = o->prompt + (plen - (size_t)T);
        fprintf(stderr, "ptdp %s: the prompt has %zu bytes, the model sees %d: it keeps the last %d\n",
                cmd, plen, T, T);
        plen = (size_t)T;
    }
    j->len = (int)plen;
    j->ids = calloc(plen + (size_t)o->tokens, sizeof *j->ids);
    if (j->ids == NULL) {
        fprintf(stderr, "ptdp %s: host out of memory\n", cmd);
        return PTDP_EXIT_FAIL;
    }
    for (size_t i = 0; i < plen; i++)
        j->ids[i] = (unsigned char)kept[i];
    return PTDP_EXIT_OK;
}

int ptdp_sample_print(const char *cmd, const ptdp_model_config *cfg, const ptdp_state *state,
                      const ptdp_sample_options *o)
{
    sample_job j = { .o = o, .cfg = *cfg, .state = state };
    const ptdp_model_ops *ops = ptdp_model_of(cfg);
    if (!ptdp_model_can_sample(ops)) {
        fprintf(stderr, "ptdp %s: %s cannot be sampled\n", cmd, ops->caps.title);
        return PTDP_EXIT_FAIL;
    }
    const int T = ptdp_model_positions(cfg), V = ops->sampling->vocab(cfg);
    /* The model's data source is never read here: a sequence of zeros. */
    unsigned char *none = calloc((size_t)T + 1, 1);
    if (none == NULL) {
        fprintf(stderr, "ptdp %s: host out of memory\n", cmd);
        return PTDP_EXIT_FAIL;
    }
    ops->sampling->without_data(&j.cfg, none, (size_t)T + 1);

    int status;
    if (o->held_out) {
        if ((status = launch(cmd, &j)) == PTDP_EXIT_OK)
            printf("held-out sums: %d of %d answered exactly (%.1f%%), sums never in the training text\n",
                   j.right, j.asked, 100.0 * j.right / (j.asked > 0 ? j.asked : 1));
    } else if ((status = prompt_ids(cmd, &j, T, V)) == PTDP_EXIT_OK &&
               (status = launch(cmd, &j)) == PTDP_EXIT_OK) {
        for (int i = 0; i < j.len + o->tokens; i++)
            put_token(j.ids[i]);
        putchar('\n');
    }
    free(j.ids);
    free(none);
    return status;
}

/* A checkpoint of a model that cannot be sampled: the file's fault (exit
 * 1), named with the models that can. */
static int refuse_model(const char *load, const ptdp_model_config *cfg)
{
    char names[128], first[32];
    ptdp_sample_models(names, sizeof names, " or ");
    ptdp_sample_models(first, sizeof first, "\n");
    first[strcspn(first, "\n")] = '\0';
    fprintf(stderr, "ptdp sample: --load %s holds %s (--model %s), which cannot be sampled: ptdp sample needs "
            "a checkpoint of --model %s (ptdp train --model %s --save FILE)\n", load,
            ptdp_model_of(cfg)->caps.title, ptdp_model_name(cfg), names, first);
    return PTDP_EXIT_FAIL;
}

static int run(const sample_options *o)
{
    char msg[PTDP_MSG_MAX];
    ptdp_model_config cfg;
    if (ptdp_state_peek_config(o->load, &cfg, msg, sizeof msg) != 0) {
        fprintf(stderr, "ptdp sample: --load %s\n", msg);
        return PTDP_EXIT_FAIL;
    }
    const ptdp_model_ops *ops = ptdp_model_of(&cfg);
    if (!ptdp_model_can_sample(ops))
        return refuse_model(o->load, &cfg);
    /* The checkpoint's metadata say the shapes; the model fills in the rest
     * and a data source it never reads. */
    const size_t len = (size_t)ptdp_model_positions(&cfg) + 1;
    unsigned char *none = calloc(len, 1);
    if (none == NULL) {
        fprintf(stderr, "ptdp sample: --load %s: host out of memory\n", o->load);
        return PTDP_EXIT_FAIL;
    }
    ops->sampling->without_data(&cfg, none, len);
    ptdp_state state;
    int status = PTDP_EXIT_FAIL;
    if (ops->check(&cfg, 1, 1, msg, sizeof msg) != 0)   /* the file's values, not flags */
        fprintf(stderr, "ptdp sample: --load %s: its metadata are no model ptdp can build (as flags: %s)\n",
                o->load, msg);
    else if (ptdp_state_load(&state, o->load, &cfg, msg, sizeof msg) != 0)
        fprintf(stderr, "ptdp sample: --load %s\n", msg);
    else {
        status = ptdp_sample_print("sample", &cfg, &state, o);
        ptdp_state_free(&state);
    }
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
