/*
 * plan_cmd.c — `ptdp plan`: which layout for this model on this cluster, does
 * it fit, and how fast will it run?
 *
 *   ptdp plan --model gpt --layers 128 --hidden 25600 --heads 160 --seq-len 2048 \
 *             --vocab 51200 --batch 3072 --gpus 3072 --profile dgx-a100-80g --precision bf16
 *
 * enumerates every layout of N = dp x tp x pp x cp GPUs (fixing what --tp,
 * --pp, --cp, --zero, --micro-batch-size, --recompute, --schedule fix),
 * drops what does not fit the GPU's memory and prints the fastest K with
 * memory per GPU, step time, tokens/s and TFLOP/s per GPU counted two ways:
 *
 *     model FLOPs     72 B s L h² (1 + s/6h + V/12Lh)     a step, as MFU counts
 *     hardware FLOPs  the same plus what recomputation redoes (96 … under
 *                     full recomputation, the PTD-P paper's count)
 *
 * Memory and time come from the planner (plan.h): the implementation's own
 * formulas and the cost model `ptdp train` runs on its virtual clock, so a
 * layout of at most 64 GPUs can be checked by running it — --explain
 * prints the command.
 *
 *     parse     the flags as typed, each checked alone   -> plan_options
 *     validate  the model's shapes, the fixed flags against the model and N
 *     search    ptdp_plan_search_top (plan_search.c)
 *     print     a table, --json or --explain (plan_print.c)
 *
 * Exit status: 0 a plan; 1 nothing fits (what would is said); 2 a bad
 * command line, including layouts that cannot divide (what would is said)
 * and flags that leave more layouts than the search weighs (plan_search.c
 * WORK_MAX: which flags to fix is said), so every question is answered in
 * seconds.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "html_pages.h"
#include "model_flags.h"
#include "paths.h"
#include "plan_print.h"
#include "ptdp/arena.h"
#include "ptdp/error.h"
#include "ptdp/fp8_quant.h"
#include "ptdp/model_plan.h"
#include "ptdp/models.h"
#include "ptdp/plan_search.h"
#include "ptdp/types.h"
#include "ptdp/zero.h"

/* --device-mem's largest: 1 PiB, or what a size_t holds where it is 32 bits
 * (the explorer's WebAssembly). */
#define DEVICE_MEM_MAX (SIZE_MAX > ((uint64_t)1 << 50) ? (size_t)((uint64_t)1 << 50) : SIZE_MAX)

/* The models the planner prices: those with a planning table. */
static bool plannable(const ptdp_model_caps *caps)
{
    return caps->plannable;
}

static bool has_plan(const ptdp_model_ops *ops)
{
    return ops != NULL && ops->caps.plannable && ops->plan != NULL;
}

/* "gpt", or "a|b": the models --model takes here, from the registry. */
static const char *plannable_names(char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int k = 0; k < ptdp_model_count() && at + 1 < len; k++)
        if (has_plan(ptdp_model_at(k)))
            at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? "|" : "", ptdp_model_at(k)->name);
    return buf;
}

/* The plannable models' titles from the registry, "the GPT", or "the
 * GPT and …" (each model's caps.title). */
static const char *plannable_titles(char *buf, size_t len)
{
    int n = 0, count = 0;
    for (int k = 0; k < ptdp_model_count(); k++)
        count += has_plan(ptdp_model_at(k));
    size_t at = 0;
    buf[0] = '\0';
    for (int k = 0; k < ptdp_model_count() && at + 1 < len; k++) {
        const ptdp_model_ops *ops = ptdp_model_at(k);
        if (!has_plan(ops))
            continue;
        n++;
        at += (size_t)snprintf(buf + at, len - at, "%s%s", n == 1 ? "" : n == count ? " and " : ", ",
                               ops->caps.title ? ops->caps.title : ops->name);
    }
    return buf;
}

/* The --schedule lines: the rows tried unasked, then those planned only
 * when named, from the registry. */
static void print_schedule_help(void)
{
    char planned[256], asked[256], chunked[64];
    ptdp_schedule_names_with(PTDP_SCHED_PLANNED, 0, "|", planned, sizeof planned);
    ptdp_schedule_names_with(0, PTDP_SCHED_PLANNED, "|", asked, sizeof asked);
    ptdp_schedule_names_with(PTDP_SCHED_CHUNKS, 0, ", ", chunked, sizeof chunked);
    printf("  --schedule %s   --virtual-stages v (%s)\n", planned, chunked);
    if (asked[0] != '\0')
        printf("  --schedule %s   planned only when asked (DualPipe's: --pp\n"
               "                      counts devices, each holding two chunks; the experts'\n"
               "                      all-to-alls of a forward-and-backward pair hide under it)\n", asked);
}

static void usage(void)
{
    char names[128];
    plannable_names(names, sizeof names);
    printf(
        "usage: ptdp plan --model %s --layers L --hidden h [the model's flags]\n"
        "                 --batch B --gpus N --profile P [flags]\n"
        "\n"
        "Choose the layout of a model on a GPU cluster: every way of cutting it over N GPUs\n"
        "(N = dp x tp x pp x cp, micro-batches M = B / (b dp)), its memory per GPU and its\n"
        "step time by the cost model `ptdp train` runs; the fastest that fit, best first.\n"
        "\n"
        "the model and the batch (all required):\n"
        "  --model %-11s the models the planner prices\n"
        "  --layers L --hidden h\n"
        "  --ffn F             the feed-forward width (default 4 x hidden; a model may say\n"
        "                      otherwise, below)\n", names, names);
    for (int k = 0; k < ptdp_model_count(); k++) {
        const ptdp_model_ops *ops = ptdp_model_at(k);
        const ptdp_model_config cfg = { .ops = ops };
        const ptdp_model_cli *cli = ptdp_model_cli_of(&cfg);
        if (has_plan(ops) && cli->plan_help != NULL)
            cli->plan_help(stdout);
    }
    printf(
        "  --batch B           sequences per step (global)\n"
        "the cluster:\n"
        "  --gpus N            GPUs (required)\n"
        "  --profile P         the cluster (required; --profile list names them)\n"
        "  --device-mem SIZE   memory of one GPU, e.g. 40G (default: the profile's)\n"
        "  --precision bf16|" PTDP_REAL_NAME "  bf16 mixed precision, or this build's (default)\n"
        "  --attention full|tiled  the attention core as ptdp train --attention runs it, with its\n"
        "                      default: tiled (when --seq-len is over 64) keeps a log-sum-exp a\n"
        "                      query, computes only the tiles not in the future and makes S again\n"
        "                      in the backward; full (at --seq-len 64 or less, and under\n"
        "                      --recompute selective) keeps the T x T probabilities\n"
        "  --fp8 R             the linear layers' products from FP8 operands, as ptdp train --fp8 R\n"
        "                      runs them (R: tensorwise, delayed, blockwise or mxfp8): at the\n"
        "                      profile's FP8 peak (its bf16 peak without one), plus the passes\n"
        "                      that quantize their operands at its memory bandwidth\n"
        "  --fp8-comm          with --fp8: expert parallelism's forward dispatch as FP8 rows (codes\n"
        "                      and tiles' scales, as ptdp train --fp8-comm sends it) and ZeRO-3's\n"
        "                      gathers of the quantized weights as their E4M3 codes\n"
        "fix part of the layout (default: the planner chooses):\n"
        "  --tp t --pp p --cp c --zero 0..3 --micro-batch-size b\n"
        "  --ep N              expert parallelism (a mixture of experts; ep | dp x cp, ep | E)\n"
        "  --etp N             the experts' own TP size (MoE parallel folding; etp | tp; default: the\n"
        "                      planner tries every divisor of tp, ep then cutting the tp/etp slices)\n"
        "  --recompute none|selective|full\n");
    print_schedule_help();
    printf(
        "  --sp on|off         sequence parallelism (only with tp > 1)\n"
        "ZeRO-3's options (with --zero 3; ptdp train's flags and rules):\n"
        "  --shard-group N     HSDP: ZeRO-3 over shard groups of N DP ranks, each shard\n"
        "                      all-reduced over the dp / N replicas once a step\n"
        "  --zero-hpz          ZeRO++'s hpZ: the backward's gathers from pieces kept inside a node\n"
        "                      (a cluster profile; k = its GPUs a node / tp)\n"
        "  --zero-qwz          ZeRO++'s qwZ: the forward's gathers as INT8, a float scale a block\n"
        "  --zero-quant-block B  qwZ's block (default 2048)\n"
        "  --zero-qgz          ZeRO++'s qgZ: the gradient's sum as two all-to-alls (inside the node,\n"
        "                      then across) of 4-bit codes, as ptdp train --zero-qgz runs them\n"
        "  --zero-qgz-bits 4|8 qgZ's codes (default 4)\n"
        "  --compare-zero      after the table, the best layout under ZeRO-3 and each option (HSDP,\n"
        "                      hpZ, qwZ, qgZ, ZeRO++'s three): bytes by collective inside a node and\n"
        "                      across, time, memory, step and speed-up\n"
        "what to print:\n"
        "  --top K             the best K layouts (default 10)\n"
        "  --json              {\"candidates\": [{\"dp\", \"tp\", …}, …]}, best first\n"
        "  --explain           the best layout term by term: memory, time, FLOPs, and the\n"
        "                      `ptdp train` command that runs it (64 GPUs or fewer);\n"
        "                      with --json, on stderr\n"
        "  --html FILE         also a page (opens from disk): the table, each layout's memory and\n"
        "                      time split as bars, --json's text inside\n"
        "\n"
        "Exit status: 0 a plan; 1 nothing fits (the message says what would);\n"
        "2 a bad command line, no layout divides (the message says what would), or the flags\n"
        "leave more layouts than the planner weighs (the message says which flags to fix).\n");
}

static void list_profiles(FILE *f)
{
    int n;
    const ptdp_profile *p = ptdp_profiles(&n);
    for (int i = 0; i < n; i++) {
        char mem[32] = "-";
        if (p[i].mem_bytes > 0)
            ptdp_format_bytes(p[i].mem_bytes, mem, sizeof mem);
        fprintf(f, "  %-14s %s (memory %s)\n", p[i].name, p[i].description, mem);
    }
}

/* The names of every profile, "a, b, c", for a message. */
static void profile_names(char *buf, size_t len)
{
    int n;
    size_t at = 0;
    const ptdp_profile *p = ptdp_profiles(&n);
    buf[0] = '\0';
    for (int i = 0; i < n && at + 2 < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ", " : "", p[i].name);
}

/* ---- parse: each flag as typed ------------------------------------------ */

/* The model whose flags the command line reads: --model's if it is
 * planned (a look ahead: --model may come after its flags), else the
 * registry's first plannable model (validate refuses the others). */
static const ptdp_model_ops *model_of_argv(int argc, char **argv)
{
    const ptdp_model_ops *ops = NULL;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--model") == 0)
            ops = ptdp_model_lookup(argv[i + 1]);
    return has_plan(ops) ? ops : ptdp_model_first_with(plannable);
}

/* One of the model's own plan flags (cli/models/): its value into the
 * config's field, within the planner's limits.  1 if it was one. */
static int model_plan_flag(ptdp_args *a, const ptdp_model_cli *cli, ptdp_model_config *m, int *rc)
{
    for (int k = 0; k < cli->nplan_flags; k++) {
        const ptdp_model_flag *fl = &cli->plan_flags[k];
        if (fl->field != PTDP_FLAG_PATH && ptdp_args_is(a, fl->name)) {
            void *field = (char *)m + fl->field;
            int nwords = 0;   /* a word (--moe-score sigmoid): its index */
            const char *const *words = fl->smallest == PTDP_FLAG_WORDS ? ptdp_model_flag_words(fl->name, &nwords)
                                                                        : NULL;
            *rc = fl->real ? ptdp_args_double(a, fl->smallest, fl->largest[0], (double *)field)
                : words != NULL ? ptdp_args_enum(a, words, nwords, (int *)field)
                                : ptdp_args_int(a, fl->smallest, fl->largest[0], (int *)field);
            return 1;
        }
    }
    return 0;
}

/* The flags that fix part of the layout (the rest the planner chooses).
 * true when a->flag was one of them (*rc: the read's status). */
static bool read_layout_flag(ptdp_args *a, ptdp_plan_request *rq, int *sp, int *rc)
{
    if (ptdp_args_is(a, "--tp")) *rc = ptdp_args_int(a, 1, 1 << 24, &rq->tp);
    else if (ptdp_args_is(a, "--pp")) *rc = ptdp_args_int(a, 1, 1 << 24, &rq->pp);
    else if (ptdp_args_is(a, "--cp")) *rc = ptdp_args_int(a, 1, 1 << 24, &rq->cp);
    else if (ptdp_args_is(a, "--zero")) *rc = ptdp_args_int(a, 0, 3, &rq->zero);
    else if (ptdp_args_is(a, "--micro-batch-size")) *rc = ptdp_args_int(a, 1, 2147483647, &rq->micro_batch_size);
    else if (ptdp_args_is(a, "--virtual-stages")) *rc = ptdp_args_int(a, 1, 1 << 16, &rq->virtual_stages);
    else if (ptdp_args_is(a, "--recompute")) {
        static const char *const modes[] = { "none", "selective", "full" };
        *rc = ptdp_args_enum(a, modes, 3, &rq->recompute);
    }
    else if (ptdp_args_is(a, "--schedule")) *rc = ptdp_args_schedule(a, &rq->schedule);
    else if (ptdp_args_is(a, "--sp")) {
        static const char *const onoff[] = { "off", "on" };
        *rc = ptdp_args_enum(a, onoff, 2, sp);
    }
    else if (ptdp_args_is(a, "--ep")) *rc = ptdp_args_int(a, 1, 1 << 24, &rq->ep);
    else if (ptdp_args_is(a, "--etp")) *rc = ptdp_args_int(a, 1, 1 << 24, &rq->etp);
    else
        return false;
    return true;
}

/* ZeRO-3's options, ptdp train's flags with its limits, and the
 * comparison.  true when a->flag was one of them (*rc: the read's status). */
static bool read_zero3_flag(ptdp_args *a, plan_options *o, int *rc)
{
    if (ptdp_args_is(a, "--shard-group")) *rc = ptdp_args_int(a, 1, 1 << 24, &o->rq.shard_group);
    else if (ptdp_args_is(a, "--zero-hpz")) *rc = ptdp_args_switch(a, &o->rq.zero_hpz);
    else if (ptdp_args_is(a, "--zero-qwz")) *rc = ptdp_args_switch(a, &o->qwz);
    else if (ptdp_args_is(a, "--zero-quant-block")) *rc = ptdp_args_int(a, 1, 1 << 24, &o->quant_block);
    else if (ptdp_args_is(a, "--zero-qgz")) *rc = ptdp_args_switch(a, &o->qgz);
    else if (ptdp_args_is(a, "--zero-qgz-bits")) {
        static const char *const bits[] = { "4", "8" };
        int k = 0;
        *rc = ptdp_args_enum(a, bits, 2, &k);
        o->qgz_bits = k == 0 ? 4 : 8;
    }
    else if (ptdp_args_is(a, "--compare-zero")) *rc = ptdp_args_switch(a, &o->compare_zero);
    else
        return false;
    return true;
}

/* A model flag was typed: its name kept for the model's plan_finish (the
 * cursor's a.flag is reused for the next); rc passes. */
static int given(plan_options *o, const char *flag, int rc)
{
    if (o->ngiven < (int)(sizeof o->given / sizeof o->given[0])) {
        snprintf(o->given_names[o->ngiven], sizeof o->given_names[0], "%s", flag);
        o->given[o->ngiven] = o->given_names[o->ngiven];
        o->ngiven++;
    }
    return rc;
}


/* --fp8 R: a recipe of train's table by its name (fp8_quant.h), checked as
 * ptdp train checks it; its price is the recipe's whatever R (clock.h). */
static int read_fp8(ptdp_args *a, ptdp_plan_request *rq)
{
    const char *names[8];
    const int n = ptdp_fp8_recipe_count() < 8 ? ptdp_fp8_recipe_count() : 8;
    int k = 0;
    for (int i = 0; i < n; i++)
        names[i] = ptdp_fp8_recipe_at(i)->name;
    int rc = ptdp_args_enum(a, names, n, &k);
    if (rc == 0)
        rq->fp8 = ptdp_fp8_recipe_at(k);
    return rc;
}
/* How the model computes: --precision, --attention, --fp8 and --fp8-comm. */
static bool read_numerics_flag(ptdp_args *a, plan_options *o, int *rc)
{
    static const char *const precisions[] = { PTDP_REAL_NAME, "bf16" };
    ptdp_plan_request *rq = &o->rq;
    int k = 0;
    if (ptdp_args_is(a, "--precision")) {
        *rc = ptdp_args_enum(a, precisions, 2, &k);
        rq->bf16 = k == 1;
    } else if (ptdp_args_is(a, "--attention"))
        *rc = ptdp_args_attention(a, &o->attention);
    else if (ptdp_args_is(a, "--fp8"))
        *rc = read_fp8(a, rq);
    else if (ptdp_args_is(a, "--fp8-comm"))
        *rc = ptdp_args_switch(a, &rq->fp8_comm);
    else
        return false;
    return true;
}

static int parse(int argc, char **argv, plan_options *o)
{
    memset(o, 0, sizeof *o);
    ptdp_plan_request *rq = &o->rq;
    *rq = ptdp_plan_request_defaults();
    rq->gpus = 0;
    rq->batch = 0;
    o->top = 10;
    o->attention = -1;
    int gpus = 0, sp = -1;
    double batch = 0;
    size_t mem = 0;
    const char *model = NULL, *profile = NULL;
    ptdp_model_config *m = &rq->model;
    const ptdp_model_ops *planned = model_of_argv(argc, argv);
    if (has_plan(planned)) {
        *m = planned->plan->defaults();
        m->ops = planned;
    }
    const ptdp_model_cli *cli = ptdp_model_cli_of(m);

    ptdp_args a;
    ptdp_args_init(&a, "plan", argc, argv, 1);
    while (ptdp_args_next(&a)) {
        int rc = 0;
        if (ptdp_args_is(&a, "--help")) { usage(); return -1; }
        else if (ptdp_args_is(&a, "--model")) rc = ptdp_args_string(&a, &model);
        else if (ptdp_args_is(&a, "--layers")) rc = ptdp_args_int(&a, 1, 1 << 16, &m->layers);
        else if (ptdp_args_is(&a, "--hidden")) rc = ptdp_args_int(&a, 1, 1 << 24, &m->hidden);
        else if (ptdp_args_is(&a, "--ffn")) rc = given(o, "--ffn", ptdp_args_int(&a, 1, 1 << 26, &m->ffn));
        else if (model_plan_flag(&a, cli, m, &rc)) rc = given(o, a.flag, rc);   /* a.flag: still its name */
        else if (ptdp_args_is(&a, "--batch")) rc = ptdp_args_double(&a, 1, 2147483647, &batch);
        else if (ptdp_args_is(&a, "--gpus")) rc = ptdp_args_int(&a, 1, 1 << 24, &gpus);
        else if (ptdp_args_is(&a, "--profile")) rc = ptdp_args_string(&a, &profile);
        else if (ptdp_args_is(&a, "--device-mem")) rc = ptdp_args_size(&a, 4096, DEVICE_MEM_MAX, &mem);
        else if (read_numerics_flag(&a, o, &rc)) { }
        else if (read_layout_flag(&a, rq, &sp, &rc)) { }
        else if (read_zero3_flag(&a, o, &rc)) { }
        else if (ptdp_args_is(&a, "--top")) rc = ptdp_args_int(&a, 1, 100000, &o->top);
        else if (ptdp_args_is(&a, "--json")) rc = ptdp_args_switch(&a, &o->json);
        else if (ptdp_args_is(&a, "--html")) rc = ptdp_args_string(&a, &o->html);
        else if (ptdp_args_is(&a, "--explain")) rc = ptdp_args_switch(&a, &o->explain);
        else if (strncmp(a.flag, "--moe-", 6) == 0 && planned != NULL && planned->plan->experts == NULL)
            return ptdp_usage_error("plan", "%s: ptdp plan prices no mixture of experts for --model %s (its "
                                    "planning table has none; ptdp plan --help lists each model's flags)",
                                    a.flag, planned->name);
        else if (strncmp(a.flag, "--moe-", 6) == 0)   /* the model's own mixture flags are read above */
            return ptdp_usage_error("plan", "%s: the planner does not take it (ptdp plan --help lists the "
                                    "mixture of experts' flags it prices)", a.flag);
        else rc = ptdp_args_unknown(&a);
        if (rc == 0 && strncmp(a.flag, "--moe-", 6) == 0 && strcmp(a.flag, "--moe-experts") != 0)
            snprintf(o->moe_flag, sizeof o->moe_flag, "%s", a.flag);   /* needs --moe-experts (validate) */
        if (rc)
            return PTDP_EXIT_USAGE;
    }
    if (a.status)
        return PTDP_EXIT_USAGE;
    if (profile != NULL && strcmp(profile, "list") == 0) {
        printf("cluster profiles (--profile NAME):\n");
        list_profiles(stdout);
        return -1;
    }
    if (batch != (double)(long long)batch)
        return ptdp_usage_error("plan", "--batch %g: must be a whole number of sequences", batch);
    rq->batch = (long long)batch;
    rq->gpus = gpus;
    rq->sp = sp;
    o->device_bytes = (double)mem;
    o->model_name = model;
    o->profile_name = profile;
    return 0;
}

/* ---- validate: the flags together, before any search ---------------------- */

/* The ZeRO stage --zero fixes (its row, zero.h), or NULL when the planner
 * chooses. */
static const ptdp_zero_stage *fixed_zero(const ptdp_plan_request *rq)
{
    return ptdp_zero_stage_of(rq->zero);
}

/* Whether --zero fixes a stage that shards the parameters (ZeRO-3): each
 * device then gathers its units one model chunk at a time. */
static bool shards_params(const ptdp_plan_request *rq)
{
    const ptdp_zero_stage *z = fixed_zero(rq);
    return z != NULL && z->shards_params;
}

/* A mixture of experts: its flags need --moe-experts, and what the flags
 * fix must be a run the model takes (its check_run, as ptdp train asks:
 * --ep divides the experts; no ZeRO-3, no --sp with experts). */
static int experts_rules(const plan_options *o, char *msg, size_t len)
{
    const ptdp_plan_request *rq = &o->rq;
    const ptdp_model_ops *ops = ptdp_model_of(&rq->model);
    const int E = ops->plan->experts != NULL ? ops->plan->experts(&rq->model) : 0;
    if (o->moe_flag[0] != '\0' && E == 0) {
        snprintf(msg, len, "%s needs --moe-experts E (a mixture of E experts; 0, the default, is none)",
                 o->moe_flag);
        return PTDP_EINVAL;
    }
    const ptdp_model_run r = { .tp = rq->tp > 0 ? rq->tp : 1, .pp = rq->pp > 0 ? rq->pp : 1,
                               .cp = rq->cp > 1 ? rq->cp : 1, .zero = fixed_zero(rq) != NULL ? rq->zero : 0,
                               .sp = rq->sp == 1, .bf16 = rq->bf16, .dp = 1, .ep = rq->ep > 1 ? rq->ep : 1,
                               .shards_params = shards_params(rq) };
    if (r.ep > 1 && ops->plan->experts == NULL) {
        snprintf(msg, len, "--ep %d: ptdp plan prices no mixture of experts for --model %s (its planning table "
                 "has none; ptdp train runs the experts the model has)", r.ep, ops->name);
        return PTDP_EINVAL;
    }
    if (r.ep > 1 && ops->check_run == NULL) {
        snprintf(msg, len, "--ep %d spreads a mixture of experts' experts over devices, and --model %s has no "
                 "experts", r.ep, ops->name);
        return PTDP_EINVAL;
    }
    if (rq->etp > 0 && E == 0) {
        snprintf(msg, len, "--etp %d sets a mixture of experts' own TP size, and --model %s has none here: give "
                 "--moe-experts E, or leave --etp out", rq->etp, ops->name);
        return PTDP_EINVAL;
    }
    if (rq->etp > 0 && rq->tp > 0 && rq->tp % rq->etp != 0) {
        snprintf(msg, len, "--etp %d must divide --tp %d: the experts' TP groups are cut from attention's "
                 "(try --etp 1)", rq->etp, rq->tp);
        return PTDP_EINVAL;
    }
    return ops->check_run != NULL ? ops->check_run(&rq->model, &r, msg, len) : PTDP_OK;
}

/* --fp8-comm prices FP8 on the wire where the run sends it: expert
 * parallelism's dispatch (a mixture of experts, a recipe of tiles along
 * the rows, --ep not fixed at 1) or ZeRO-3's gathers (--zero not fixed
 * below 3).  Flags that leave it neither are refused, as ptdp train
 * refuses --fp8-comm with nothing to send in FP8. */
static int fp8_comm_rules(const plan_options *o, char *msg, size_t len)
{
    const ptdp_plan_request *rq = &o->rq;
    if (!rq->fp8_comm || rq->fp8 == NULL)
        return PTDP_OK;
    const ptdp_model_plan *mp = ptdp_model_of(&rq->model)->plan;
    const bool moe = mp->experts != NULL && mp->experts(&rq->model) > 0;
    const bool ep = moe && !rq->fp8->whole_tensor && rq->ep != 1;
    const ptdp_zero_stage *z = fixed_zero(rq);
    if (ep || z == NULL || z->shards_params)
        return PTDP_OK;
    snprintf(msg, len, "--fp8-comm sends in FP8 expert parallelism's dispatch (a mixture of experts, --fp8 blockwise "
             "or mxfp8, --ep 2 or more) or ZeRO-3's parameter gathers (--zero 3): with --zero %d%s there is neither "
             "to send; leave --fp8-comm out, or let the planner choose --zero (or give --zero 3)", rq->zero,
             !moe ? " and no experts" : rq->fp8->whole_tensor ? " and one scale a tensor (no EP)" : " and --ep 1");
    return PTDP_EINVAL;
}

/* ZeRO-3's options, in ptdp train's words where its rules are the same
 * (the rest, which need the layout — N dividing dp, hpZ's node groups
 * cutting ZeRO's group, qwZ against full recomputation — are train's own
 * rules, asked for every layout: ptdp_plan_layout_check).  The planner
 * prices them under --zero 3 only: HSDP under ZeRO-1 and 2, which ptdp
 * train also runs, is not priced. */
static const char *zero3_flag(const plan_options *o)
{
    return o->rq.shard_group > 0 ? "--shard-group" : o->rq.zero_hpz ? "--zero-hpz" : o->qwz ? "--zero-qwz"
         : o->qgz ? "--zero-qgz" : o->compare_zero ? "--compare-zero" : NULL;
}

/* hpZ's node group against the cluster and the fixed --cp, --tp (ptdp
 * train's resolve of --zero-hpz, in its words). */
static int hpz_rules(const ptdp_plan_request *rq)
{
    const int gpn = rq->profile->gpus_per_node;
    if (!rq->zero_hpz)
        return 0;
    if (gpn <= 0)
        return ptdp_usage_error("plan", "--zero-hpz keeps ZeRO-3's secondary pieces inside a node: it needs a "
                                "cluster profile with GPUs a node (--profile hgx-a100-4 or dgx-h100; ptdp plan "
                                "--profile list), not a one-node one");
    if (rq->cp > 1)
        return ptdp_usage_error("plan", "--zero-hpz with --cp %d: its node groups cut the DP ranks alone here; "
                                "leave --cp or --zero-hpz out", rq->cp);
    if (rq->tp > 0 && gpn % rq->tp != 0)
        return ptdp_usage_error("plan", "--zero-hpz with --tp %d and --profile %s (%d GPUs a node): a node must "
                                "hold whole TP groups; use a --tp dividing %d", rq->tp, rq->profile->name, gpn, gpn);
    if (rq->tp > 0 && gpn / rq->tp == 1)
        return ptdp_usage_error("plan", "--zero-hpz: a node of --profile %s holds %d GPUs, one TP group of --tp %d, "
                                "so its node group is 1 DP rank and holds nothing to gather from; use a smaller "
                                "--tp", rq->profile->name, gpn, rq->tp);
    return 0;
}

static int zero3_rules(plan_options *o)
{
    ptdp_plan_request *rq = &o->rq;
    static const char *const stage[] = { "0", "1", "2", "3" };
    if (o->quant_block > 0 && !o->qwz)
        return ptdp_usage_error("plan", "--zero-quant-block %d is the block qwZ quantizes in: it needs --zero-qwz",
                                o->quant_block);
    if (o->qgz_bits > 0 && !o->qgz)
        return ptdp_usage_error("plan", "--zero-qgz-bits %d is the width qgZ quantizes the gradients to: it needs "
                                "--zero-qgz", o->qgz_bits);
    const char *flag = zero3_flag(o);
    if (flag != NULL && rq->zero != 3)
        return ptdp_usage_error("plan", "%s prices ZeRO-3's options (HSDP, ZeRO++'s hpZ, qwZ and qgZ): it needs "
                                "--zero 3; --zero is %s%s", flag, rq->zero < 0 ? "not given" : stage[rq->zero],
                                rq->shard_group > 0 && rq->zero > 0 ? " (ptdp train also runs --shard-group under "
                                "ZeRO-1 and 2; the planner prices it under ZeRO-3)" : "");
    int rc = hpz_rules(rq);
    if (rc != 0)
        return rc;
    if (o->qwz && rq->zero_hpz)
        return ptdp_usage_error("plan", "--zero-qwz with --zero-hpz: hpZ keeps the forward's gathered unit for the "
                                "backward, which qwZ gathers exact; the two are not built together in ptdp train: "
                                "leave one out (--compare-zero prices them together, as ZeRO++)");
    if (o->qwz && rq->recompute == PTDP_RECOMPUTE_FULL)
        return ptdp_usage_error("plan", "--zero-qwz with --recompute full: a recomputed forward runs inside the "
                                "backward's exact gather, so it would not see the forward's quantized weights; use "
                                "--recompute selective or leave it out");
    if (rq->fp8_comm && (o->qwz || rq->zero_hpz || o->compare_zero))
        return ptdp_usage_error("plan", "--fp8-comm with %s: the FP8 gathers are another way to send ZeRO-3's "
                                "parameters, not built with hpZ or qwZ nor compared with them; leave one out",
                                o->qwz ? "--zero-qwz" : rq->zero_hpz ? "--zero-hpz" : "--compare-zero");
    rq->zero_qwz = o->qwz ? (o->quant_block > 0 ? o->quant_block : 2048) : 0;   /* ptdp train's default */
    rq->zero_qgz = o->qgz ? (o->qgz_bits > 0 ? o->qgz_bits : 4) : 0;
    return 0;
}

/* The schedule against the flags that fix chunks, precision and ZeRO:
 * --virtual-stages is for a schedule with chunks; a V or two copies hold
 * two chunks a device always; what the row refuses of its own (bf16,
 * ZeRO-3: DualPipe's two chunks) is refused as ptdp train does
 * (ptdp_schedule_refuses). */
static int schedule_rules(ptdp_plan_request *rq)
{
    const ptdp_schedule_entry *e = rq->schedule;
    char msg[512];
    if (e != NULL && ptdp_schedule_check_flag_v(e, rq->virtual_stages, msg, sizeof msg) != 0)
        return ptdp_usage_error("plan", "%s", msg);   /* the rule of ptdp train and ptdp schedule */
    if (e != NULL && rq->bf16 && e->refuses[PTDP_FEATURE_BF16] != NULL &&
        ptdp_schedule_refuses(e, PTDP_FEATURE_BF16, 1, msg, sizeof msg) != 0)
        return ptdp_usage_error("plan", "%s", msg);
    if (e != NULL && shards_params(rq) && e->refuses[PTDP_FEATURE_ZERO3] != NULL &&
        ptdp_schedule_refuses(e, PTDP_FEATURE_ZERO3, 1, msg, sizeof msg) != 0)
        return ptdp_usage_error("plan", "%s", msg);
    if (rq->virtual_stages > 1 && e == NULL)
        rq->schedule = ptdp_schedule_first_with(PTDP_SCHED_CHUNKS);
    if (shards_params(rq) && rq->virtual_stages > 1)
        return ptdp_usage_error("plan", "--zero %d with --virtual-stages %d: %s gathers one model chunk's "
                                "units per device; use --virtual-stages 1 (or --zero 2)", rq->zero,
                                rq->virtual_stages, fixed_zero(rq)->name);
    return 0;
}

/* What --precision and --attention ask of this build and of the model; the
 * attention core settled as ptdp train settles it (ptdp_attention_tiles). */
static int numerics_rules(plan_options *o, const ptdp_model_ops *ops)
{
    ptdp_plan_request *rq = &o->rq;
#ifdef PTDP_DOUBLE
    if (rq->bf16)
        return ptdp_usage_error("plan", "--precision bf16 keeps float master weights: plan with the float build "
                                "(ptdp), not ptdp-f64");
#endif
    if (o->attention == 1 && !ops->caps.attention)   /* ptdp train's words */
        return ptdp_usage_error("plan", "--attention tiled: --model %s has no attention", ops->name);
    rq->attention_tiled = ptdp_attention_tiles(o->attention, ops->caps.attention,
                                               rq->recompute == PTDP_RECOMPUTE_SELECTIVE, ptdp_model_positions(&rq->model));
    return 0;
}

static int validate(plan_options *o)
{
    ptdp_plan_request *rq = &o->rq;
    ptdp_model_config *m = &rq->model;
    char names[256];
    profile_names(names, sizeof names);
    /* the models the planner prices: their caps say so */
    const ptdp_model_ops *ops = ptdp_model_lookup(o->model_name);
    char planned[128], titles[256];   /* the registry's plannable models, "gpt" or "a|b"; their titles */
    plannable_names(planned, sizeof planned);
    plannable_titles(titles, sizeof titles);
    if (o->model_name == NULL)
        return ptdp_usage_error("plan", "--model is required: the planner plans %s (--model %s)", titles, planned);
    if (!has_plan(ops))
        return ptdp_usage_error("plan", "--model %s: the planner plans %s only (--model %s); %s is "
                                "trained with ptdp train", o->model_name, titles, planned,
                                ops && ops->caps.title ? ops->caps.title : "it");
    m->ops = ops;
    /* every model's sizes, its own (its planning table lists them), the batch and N */
    struct { const char *flag; long long value; } need[] = {
        { "--layers", m->layers }, { "--hidden", m->hidden }, { NULL, 0 }, { "--batch", rq->batch },
        { "--gpus", rq->gpus },
    };
    for (size_t k = 0; k < sizeof need / sizeof need[0]; k++) {
        for (const char *const *own = need[k].flag == NULL ? ops->plan->required : NULL; own && *own; own++)
            if (ops->plan->required_value(m, *own) == 0)
                return ptdp_usage_error("plan", "%s is required (ptdp plan --help lists the flags)", *own);
        if (need[k].flag != NULL && need[k].value == 0)
            return ptdp_usage_error("plan", "%s is required (ptdp plan --help lists the flags)", need[k].flag);
    }
    if (rq->fp8_comm && rq->fp8 == NULL)   /* ptdp train's words */
        return ptdp_usage_error("plan", "--fp8-comm sends FP8 codes where --fp8 R computes with them: it needs "
                                "--fp8 R (tensorwise, delayed, blockwise or mxfp8)");
    if (o->profile_name == NULL)
        return ptdp_usage_error("plan", "--profile is required: the cluster to plan for (one of %s)", names);
    if ((rq->profile = ptdp_profile_find(o->profile_name)) == NULL)
        return ptdp_usage_error("plan", "--profile %s: unknown (the profiles: %s)", o->profile_name, names);
    const ptdp_model_cli *cli = ptdp_model_cli_of(m);
    int rc;
    if (cli->plan_finish != NULL && (rc = cli->plan_finish(m, o->given, o->ngiven)) != 0)
        return rc;
    if (m->ffn == 0)
        m->ffn = 4 * m->hidden;
    if ((rc = numerics_rules(o, ops)) != 0)
        return rc;
    char msg[PTDP_MSG_MAX];
    if (ptdp_model_check(m, 1, 1, msg, sizeof msg) != 0)
        return ptdp_usage_error("plan", "%s", msg);
    if (experts_rules(o, msg, sizeof msg) != 0 || fp8_comm_rules(o, msg, sizeof msg) != 0)
        return ptdp_usage_error("plan", "%s", msg);
    /* what the fixed flags ask of the model and of N */
    if (rq->tp > 0 && ptdp_model_check(m, rq->tp, 1, msg, sizeof msg) != 0)
        return ptdp_usage_error("plan", "%s", msg);
    if (rq->pp > m->layers)
        return ptdp_usage_error("plan", "--pp %d: more stages than --layers %d (--pp 1 to %d)", rq->pp, m->layers,
                                m->layers);
    if (rq->cp > 1 && ptdp_model_positions(m) % (2 * rq->cp) != 0)
        return ptdp_usage_error("plan", "--cp %d: --seq-len %d must divide into 2 x cp = %d zigzag chunks (two "
                                "per CP rank)", rq->cp, ptdp_model_positions(m), 2 * rq->cp);
    const long long fixed = (long long)(rq->tp > 0 ? rq->tp : 1) * (rq->pp > 0 ? rq->pp : 1) *
                            (rq->cp > 0 ? rq->cp : 1);
    if (rq->gpus % fixed != 0) {
        long long lo = rq->gpus / fixed * fixed, hi = lo + fixed;
        if (lo > 0)
            return ptdp_usage_error("plan", "--gpus %d is not a multiple of --tp x --pp x --cp = %lld (nearest: "
                                    "--gpus %lld or %lld)", rq->gpus, fixed, lo, hi);
        return ptdp_usage_error("plan", "--gpus %d is fewer than --tp x --pp x --cp = %lld (try --gpus %lld)",
                                rq->gpus, fixed, hi);
    }
    if (rq->micro_batch_size > 0 && rq->batch % rq->micro_batch_size != 0)
        return ptdp_usage_error("plan", "--micro-batch-size %d does not divide --batch %lld", rq->micro_batch_size,
                                rq->batch);
    if (rq->sp == 1 && rq->tp == 1)
        return ptdp_usage_error("plan", "--sp on shares the TP group's work along the sequence: it needs --tp 2 "
                                "or more");
    return (rc = zero3_rules(o)) != 0 ? rc : schedule_rules(rq);   /* ZeRO-3's options, then the schedule */
}

/* --html: the page embeds --json's text, made here by the same function. */
static int write_page(const plan_options *o, const ptdp_plan_search_stats *st, const ptdp_plan_candidate *c, int n)
{
    char *json = NULL, msg[1024];
    size_t len = 0;
    FILE *m = open_memstream(&json, &len);
    if (m == NULL) {
        fprintf(stderr, "ptdp plan: --html %s: out of memory\n", o->html);
        return PTDP_EXIT_FAIL;
    }
    ptdp_plan_print_json(m, o, st, c, n);
    int rc = fclose(m) == 0 ? ptdp_html_plan(o->html, o, c, n, json, len, msg, sizeof msg) : PTDP_ENOMEM;
    free(json);
    if (rc != PTDP_OK) {
        fprintf(stderr, "ptdp plan: --html %s\n", rc == PTDP_ENOMEM ? "out of memory" : msg);
        return PTDP_EXIT_FAIL;
    }
    /* with --json stdout holds JSON only: the note goes to stderr */
    fprintf(o->json ? stderr : stdout, "wrote %s\n", o->html);
    return PTDP_EXIT_OK;
}

int ptdp_cmd_plan(int argc, char **argv)
{
    plan_options o;
    int rc = parse(argc, argv, &o);
    if (rc != 0)
        return rc < 0 ? PTDP_EXIT_OK : rc;
    if ((rc = validate(&o)) != 0)
        return rc;
    const ptdp_cli_file html = { "--html", o.html };
    if ((rc = ptdp_cli_check_files("plan", NULL, 0, &html, 1)) != 0)
        return rc;
    ptdp_plan_candidate *c = NULL;
    int n = 0;
    char msg[PTDP_MSG_MAX];
    ptdp_plan_search_stats st = { 0 };
    rc = ptdp_plan_search_top(&o.rq, o.device_bytes, o.top, &c, &n, &st, msg, sizeof msg);
    if (rc != 0) {
        if (rc == PTDP_EINVAL && (st.valid == 0 || st.over_limit))
            return ptdp_usage_error("plan", "%s", msg);
        fprintf(stderr, "ptdp plan: %s\n", msg);
        return PTDP_EXIT_FAIL;
    }
    if (o.json)
        ptdp_plan_print_json(stdout, &o, &st, c, n);
    else
        ptdp_plan_print_table(stdout, &o, &st, c, n);
    if (o.compare_zero && !o.json)
        ptdp_plan_print_compare(stdout, &o, &c[0]);
    if (o.explain)
        ptdp_plan_print_explain(o.json ? stderr : stdout, &o, &c[0]);
    rc = o.html != NULL ? write_page(&o, &st, c, n) : PTDP_EXIT_OK;
    free(c);
    return rc;
}
