/*
 * train_cmd.c — `ptdp train`: train the reference MLP on dp x tp x pp devices.
 *
 *   ptdp train --dp 2 --micro-batches 4 --check
 *
 * prints one line per step (loss, gradient norm, virtual and wall time,
 * bytes sent), and with --check runs the single-device baseline on the same
 * seed and compares: every step's loss and, at the end, every parameter,
 * by the rule  max|a - b| <= tol * max(1, max|b|)  (tol 1e-4 in float, 1e-10
 * in double).  Exit status: 0 done, 1 the run failed (out of memory, a bad
 * checkpoint, a --check mismatch), 2 a usage error.
 *
 * The command runs in three steps, so that a mistake costs a second, not a
 * run:
 *
 *     parse     the flags as typed, each checked alone  -> train_options
 *     validate  the flags together, the profile, the checkpoint to --load,
 *               and ptdp_train_validate's rules (shapes, divisibility)
 *     run       ptdp_train_and_report (train_run.c)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../args.h"
#include "../backend.h"
#include "../commands.h"
#include "../model_flags.h"
#include "../paths.h"
#include "ptdp/error.h"
#include "ptdp/file.h"
#include "ptdp/plan.h"
#include "ptdp/safetensors.h"
#include "ptdp/train.h"
#include "report.h"

static const char *const optimizer_names[] = { "adamw", "sgd" };
static const char *const algo_names[] = { "shm", "ring", "naive", "default", "mpi" };
static const ptdp_algo algo_values[] = { PTDP_ALGO_SHM, PTDP_ALGO_RING, PTDP_ALGO_NAIVE, PTDP_ALGO_DEFAULT,
                                         PTDP_ALGO_MPI };

/* Everything `ptdp train` was asked for: filled by parse, completed and
 * checked by validate, used by run. */
typedef struct {
    ptdp_train_config cfg;         /* dp 0: not given (--devices may decide) */
    ptdp_launch_opts launch;
    int devices;                   /* 0: not given                          */
    int mpi_world;                 /* --backend mpi: the processes mpirun started */
    int stage_layers[4096], nstage;  /* per piece: at most --layers' limit */
    const char *profile;           /* NULL: the default profile             */
    bool check, quiet;
    bool hpz;                      /* --zero-hpz: cfg.zero_hpz from the profile */
    bool qwz;                      /* --zero-qwz: cfg.zero_qwz = the block      */
    int quant_block;               /* --zero-quant-block B; 0: not given        */
    bool qgz;                      /* --zero-qgz: cfg.zero_qgz = the bits       */
    int qgz_bits;                  /* --zero-qgz-bits b; 0: not given (4)       */
    int attention;                 /* --attention: 0 full, 1 tiled, -1 not given */
    const char *log_path, *save, *load, *save_init, *dump, *report_path, *html_path;
    ptdp_state resume;             /* --load's checkpoint, read by validate */
    bool have_resume;
    bool seed_given, batch_given;  /* typed: otherwise a resume takes the
                                      checkpoint's                          */
    ptdp_model_flags model;        /* the model's flags, and the GPT's text  */
} train_options;

/* The registered models that can do something (caps), by name: "gpt". */
static bool can_slice(const ptdp_model_caps *caps) { return caps->token_slices; }
static bool can_recompute_core(const ptdp_model_caps *caps) { return caps->attention; }
static bool can_cp(const ptdp_model_caps *caps) { return caps->context_parallel; }
static bool can_sp(const ptdp_model_caps *caps) { return caps->sequence_parallel; }

static const char *models_that(bool (*can)(const ptdp_model_caps *caps), char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < ptdp_model_count() && n < len; i++)
        if (can(&ptdp_model_at(i)->caps))
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "|" : "", ptdp_model_at(i)->name);
    return buf;
}

/* The --schedule entry: every registered schedule with its words, wrapped. */
static void usage_schedule(void)
{
    char text[2048];
    size_t n = (size_t)snprintf(text, sizeof text, "pipeline schedule:");
    const int count = ptdp_schedule_count();
    for (int i = 0; i < count && n < sizeof text; i++) {
        const ptdp_schedule_entry *e = ptdp_schedule_at(i);
        n += (size_t)snprintf(text + n, sizeof text - n, "%s %s%s%s%s", i == 0 ? "" : i == count - 1 ? " or" : ",",
                              e->name, e == ptdp_schedule_default() ? " (default)" : "", e->help ? " " : "",
                              e->help ? e->help : "");
    }
    ptdp_help_wrapped(stdout, "  --schedule S", text);
}

static void usage_data_parallel(const char *pairs);

static void usage_parallelism(const ptdp_train_config *d)
{
    char names[128], slice[64], core[64], cp[64], sp[64], chunked[64], slicing[64], pairs[64];
    ptdp_schedule_names_with(PTDP_SCHED_CHUNKS, 0, ", ", chunked, sizeof chunked);
    ptdp_schedule_names_with(PTDP_SCHED_TOKEN_SLICES, 0, ", ", slicing, sizeof slicing);
    ptdp_schedule_names_with(PTDP_SCHED_PAIRS, 0, ", ", pairs, sizeof pairs);
    printf(
        "usage: ptdp train [flags]\n"
        "\n"
        "Train a model (--model NAME: %s; default %s) on dp x tp x pp simulated devices.\n"
        "\n"
        "parallelism:\n"
        "  --dp N              data-parallel replicas (default 1)\n"
        "  --tp N              tensor-parallel ranks; must divide --ffn and --classes (default 1)\n"
        "  --pp N              pipeline stages, at most --layers (default 1)\n"
        "  --devices N         world size; sets --dp to N / (cp * tp * pp), or must equal dp * cp * tp * pp\n"
        "  --micro-batches M   micro-batches per DP shard per step (default 1)\n",
        ptdp_model_names(names, sizeof names, ", "), ptdp_model_name(&d->model));
    usage_schedule();
    printf(
        "  --token-slices K    %s, TeraPipe: each sequence runs through the pipeline as K slices of\n"
        "                      positions, one after another (implies --schedule %s); a slice's\n"
        "                      attention reads the keys and values the earlier ones left on the stage\n"
        "  --virtual-stages V  model chunks per stage for --schedule %s (default 1): the\n"
        "                      layers are cut into pp x V pieces, stage s holding s, s+pp, …; the\n"
        "                      bubble is (p-1)/(V m+p-1) and --micro-batches a multiple of --pp\n"
        "  --recompute [full|selective|none]  full (alone): keep each block's input and redo one\n"
        "                      block at a time in the backward; selective (%s): keep all but the\n"
        "                      attention's T x T probabilities, redo the attention core; none\n"
        "                      (without the flag): keep everything\n"
        "  --attention full|tiled  tiled (%s; the default at --seq-len over 64): FlashAttention's\n"
        "                      tiles of 64 queries by 64 keys, the future skipped, an online\n"
        "                      softmax keeping one log-sum-exp a query, each tile made again in\n"
        "                      the backward; full (the default at --seq-len 64 or less, one tile, and\n"
        "                      under --recompute selective, which redoes it): the T x T scores,\n"
        "                      softmaxed and kept for the backward (under --cp's ring the two are\n"
        "                      one: its chunks are its tiles)\n"
        "  --cp N              context parallelism (%s): N devices share each sequence, attention\n"
        "                      runs as a ring over them (default 1)\n"
        "  --cp-layout L       zigzag (default: chunks r and 2N-1-r of 2N, equal attention work)\n"
        "                      or contiguous (chunk r of N: the last rank works N times the first)\n"
        "  --cp-algo A         ring (default: the key/value blocks travel round the CP group) or a2a\n"
        "                      (Ulysses: an all-to-all trades the positions for heads/(tp N) heads of\n"
        "                      whole sequences, attention runs locally, one all-to-all back; needs\n"
        "                      heads / tp divisible by N)\n"
        "  --ep N              expert parallelism (a mixture of experts, --moe-experts E): the experts\n"
        "                      spread over N of the dp x cp ranks, E / N each; tokens travel to\n"
        "                      their experts and back by all-to-all (default 1)\n"
        "  --etp N             MoE parallel folding: the experts' own TP size, dividing --tp (default\n"
        "                      --tp); EP and the experts' DP are carved from the tp x cp x dp ranks\n"
        "                      of a stage, so with --tp 2 --etp 1 each TP rank routes half the\n"
        "                      micro-batch's sequences and --ep may span the TP ranks\n"
        "  --sp                sequence parallelism (%s, tp > 1): LayerNorms, dropouts and residuals\n"
        "                      hold seq-len / tp positions per rank; all-gather / reduce-scatter\n"
        "                      along the sequence replace TP's all-reduces\n"
        "  --stage-layers L    blocks per stage, e.g. 3,3,2 (default balanced); with\n"
        "                      --virtual-stages V, pp x V entries, one per piece\n",
        models_that(can_slice, slice, sizeof slice), slicing, chunked,
        models_that(can_recompute_core, core, sizeof core), core, models_that(can_cp, cp, sizeof cp),
        models_that(can_sp, sp, sizeof sp));
    usage_data_parallel(pairs);
}

/* Data parallelism's flags: DDP's buckets, ZeRO and its cuts, overlap. */
static void usage_data_parallel(const char *pairs)
{
    printf(
        "  --bucket-mb X       DDP gradient bucket size in MiB (default 0.25)\n"
        "  --zero S            ZeRO stage: 0 off (default), 1 shard the optimizer state, 2 also the gradients,\n"
        "                      3 also the parameters (gathered a unit at a time; needs dp >= 2)\n"
        "  --shard-group N     HSDP (with --zero 1, 2 or 3): shard ZeRO's states over N consecutive DP\n"
        "                      ranks and replicate them over the dp / N groups: reduce-scatter in the\n"
        "                      shard group, then all-reduce the shard across the replicas (N divides\n"
        "                      dp; default dp, one shard group)\n"
        "  --zero-hpz          ZeRO++'s hpZ (with --zero 3 and a cluster profile): each device keeps\n"
        "                      1/k of every unit the forward gathered, k its node's DP ranks, so the\n"
        "                      backward gathers inside the node (the same bits; S/k more memory)\n"
        "  --zero-qwz          ZeRO++'s qwZ (with --zero 3): the forward's parameter gathers as INT8,\n"
        "                      one scale a block of --zero-quant-block B elements (default 2048) of\n"
        "                      each rank's shard; the backward's exact (lossy: --check quantizes its\n"
        "                      one device alike)\n"
        "  --zero-qgz          ZeRO++'s qgZ (with --zero 3 and a cluster profile): each unit's gradient\n"
        "                      reduce-scatter becomes two all-to-alls of quantized codes, inside the\n"
        "                      node then across nodes, in blocks of --zero-quant-block B elements of\n"
        "                      each shard (lossy: --check sums each rank's gradient alike)\n"
        "  --zero-qgz-bits b   qgZ's codes: 4 (INT4, default) or 8 (INT8)\n"
        "  --overlap           all-reduce each DP bucket (--zero 1: reduce-scatter it) during the last\n"
        "                      micro-batch's backward, as soon as its gradients are complete (dp >= 2,\n"
        "                      or --sp; the same bits, less virtual time); with --zero 3 also gather\n"
        "                      the next unit while this one computes; with --sp gather the kept\n"
        "                      LayerNorm shards again while the input gradients' products run\n"
        "  --no-pair-overlap   time an overlapped F&B pair (%s) as F then B: its\n"
        "                      expert-parallel all-to-alls on the compute stream instead of under\n"
        "                      the pair's compute (the same bits; the virtual time without overlap)\n",
        pairs);
}

/* Precision: bf16's stores, FP8's products and communication. */
static void usage_precision(void)
{
    printf(
        "  --precision P       " PTDP_REAL_NAME " (default) or bf16: bf16 parameters and gradients, float\n"
        "                      master weights and AdamW moments: 2 + 2 + 12 bytes a parameter\n"
        "  --fp8 R             every linear layer's products from FP8 operands (docs/fp8.md): X and W\n"
        "                      in E4M3, dY in E5M2, float accumulation; the head, router, norms and\n"
        "                      optimizer stay in float. R: tensorwise, delayed, blockwise or mxfp8\n"
        "  --fp8-grad-format F dY's format with --fp8: e5m2 (default) or e4m3 (as DeepSeek-V3)\n"
        "  --fp8-comm          with --fp8 and --ep: send each expert's input rows as FP8 codes and\n"
        "                      their tiles' scales (DeepSeek-V3's dispatch); with --zero 3: gather the\n"
        "                      weights FP8 quantizes as codes (torchtitan's float8 all-gather), their\n"
        "                      amaxes all-reduced first: the same bits, fewer bytes\n"
        "  --fp8-amax-history H  --fp8 delayed: the scale from the max amax of the last H steps\n"
        "                      (default %d)\n", PTDP_FP8_HISTORY_DEFAULT);
}

static void usage(void)
{
    ptdp_train_config d = ptdp_train_defaults();
    d.model.ffn = 0;               /* printed as 4*hidden */
    usage_parallelism(&d);
    usage_precision();
    printf("model and data:\n");
    ptdp_model_flags_help(stdout, &d.model);
    printf(
        "  --batch B           global batch; divisible by dp * micro-batches (default 64)\n"
        "  --steps N           steps of this run (default 10)\n"
        "  --seed N            seed of initialisation, data and dropout (default 1)\n"
        "                      with --load, --seed and --batch default to the checkpoint's, and so\n"
        "                      do --moe-capacity-factor and --moe-aux-loss (settings it records);\n"
        "                      given and different, the run uses them and says so\n"
        "  --dropout P         dropout after GELU and on each block's output (default 0)\n"
        "optimizer:\n"
        "  --optimizer adamw|sgd  (default adamw)   --lr X (default 1e-3)\n"
        "  --momentum X (sgd)  --weight-decay X  --clip-grad X (max gradient norm, 0 = off)\n"
        "  a run diverges when a step's loss or gradient norm is not finite, or the norm is more than\n"
        "  1e6 x the first step's: it stops there (exit 1), keeps --log's steps before, saves nothing\n");
    printf(
        "devices and simulation:\n"
        "  --device-mem SIZE   arena per device, e.g. 512M (K/M/G = 1024-based; default 4G)\n"
        "  --algo A            all_reduce algorithm: shm (default), ring, naive; mpi (MPI_Allreduce,\n"
        "                      --backend mpi only: equal within tolerance, not bit for bit)\n"
        "  --backend B         threads (default: every device a thread of this process) or mpi (one\n"
        "                      process per device: mpirun -n N ptdp train --backend mpi …, N = the\n"
        "                      mesh's devices; the same bits as threads; rank 0 prints and saves)\n"
        "  --profile P         cost model of the virtual clock (--profile list names them)\n"
        "  --watchdog S        seconds before a stuck collective fails the run (default 60)\n"
        "  --blas-threads N    threads per device for its matrix products, 1..256 (default: cores /\n"
        "                      devices, or OPENBLAS_NUM_THREADS per device; the same bits for any N)\n"
        "output:\n"
        "  --check             also run the single-device baseline and compare (exit 1 on mismatch)\n"
        "  --log FILE          the step lines as JSON lines\n"
        "  --trace FILE        Chrome trace (open in https://ui.perfetto.dev)\n"
        "  --report FILE       per-device memory, bytes and times as JSON\n"
        "  --html FILE         a page of the run (opens from disk): the loss, each device's timeline,\n"
        "                      memory, bytes and times, the --check verdict; the --report JSON inside\n"
        "  --save FILE  --load FILE  --save-init FILE   checkpoints (safetensors)\n"
        "  --dump-data FILE    the global batches used, as safetensors x and y\n"
        "  --verify-replicas   after every step, check that DP replicas are bit-identical\n"
        "  --quiet             no per-step lines\n");
}

static int parse_stage_layers(ptdp_args *a, int *out, int max, int *n)
{
    const char *list;
    if (ptdp_args_string(a, &list))
        return PTDP_EXIT_USAGE;
    *n = 0;
    for (const char *s = list;;) {
        char *end;
        long v = strtol(s, &end, 10);
        /* every item a number (no empty item, no trailing comma), at most max */
        if (end == s || (*end != ',' && *end != '\0') || v < 0 || v > 100000 || *n >= max)
            return ptdp_usage_error("train", "--stage-layers %s: expected a comma list of block counts, "
                                    "one per stage, e.g. 3,3,2", list);
        out[(*n)++] = (int)v;
        if (*end == '\0')
            return 0;
        s = end + 1;
    }
}

/* One profile a paragraph: the name and description, then one line of
 * numbers (the one-level ones as they always were), and for a cluster a
 * second line: node size, network, bf16 peak, memory, GEMM curve. */
static int list_profiles(void)
{
    int n;
    const ptdp_profile *p = ptdp_profiles(&n);
    printf("profiles of the virtual clock (--profile NAME):\n");
    for (int i = 0; i < n; i++) {
        printf("  %-12s %s\n               peak %.3g flop/s, alpha %.3g s, beta %.3g B/s%s\n",
               p[i].name, p[i].description, p[i].peak_flops, p[i].alpha_s, p[i].beta_Bps,
               i == 0 ? " (default)" : "");
        if (p[i].gpus_per_node > 0 || p[i].peak_flops_bf16 > 0 || p[i].mem_bytes > 0)
            printf("               node %d devices, network alpha %.3g s, beta %.3g B/s a device\n"
                   "               bf16 peak %.3g flop/s, memory %.4g B, GEMM efficiency %s\n",
                   p[i].gpus_per_node, p[i].net_alpha_s, p[i].net_beta_Bps,
                   ptdp_profile_peak(&p[i], 1), p[i].mem_bytes,
                   p[i].gemm != NULL ? "by shape" : "1");
    }
    return PTDP_EXIT_OK;
}

/* ---- parse: each flag as typed ------------------------------------------ */

/* Returns 0 to go on, -1 after printing what was asked for instead of a run
 * (--help, --profile list), or PTDP_EXIT_USAGE. */
/* --recompute [full|selective|none]: alone it means full, as it always
 * has; a value, if any, is the next argument that is not a flag (train
 * takes no positional arguments) or --recompute=VALUE.  none is the
 * default spelled out, as `ptdp plan --recompute none` spells it. */
static int read_recompute(ptdp_args *a, ptdp_train_config *c)
{
    static const char *const modes[] = { "full", "selective", "none" };
    bool has_value = a->inline_value != NULL ||
                     (a->next < a->argc && a->argv[a->next][0] != '-');
    int k = 0;
    if (has_value && ptdp_args_enum(a, modes, 3, &k) != 0)
        return PTDP_EXIT_USAGE;
    const int r = ptdp_recompute_parse(modes[k]);
    c->recompute = r == PTDP_RECOMPUTE_FULL;
    c->recompute_core = r == PTDP_RECOMPUTE_SELECTIVE;
    return 0;
}

/* The flags of the layout beyond the mesh's sizes: the pipeline's schedule
 * and cut, recomputation, and the splits of a sequence and of the experts.
 * true when a->flag was one of them (*rc: the read's status). */
static bool read_layout_flag(ptdp_args *a, train_options *o, const ptdp_schedule_entry **sched, int *rc)
{
    ptdp_train_config *c = &o->cfg;
    if (ptdp_args_is(a, "--schedule")) *rc = ptdp_args_schedule(a, sched);
    else if (ptdp_args_is(a, "--virtual-stages")) *rc = ptdp_args_int(a, 1, 1024, &c->virtual_stages);
    else if (ptdp_args_is(a, "--token-slices")) *rc = ptdp_args_int(a, 1, 1 << 20, &c->token_slices);
    else if (ptdp_args_is(a, "--recompute")) *rc = read_recompute(a, c);
    else if (ptdp_args_is(a, "--attention")) *rc = ptdp_args_attention(a, &o->attention);
    else if (ptdp_args_is(a, "--sp")) *rc = ptdp_args_switch(a, &c->sp);
    else if (ptdp_args_is(a, "--cp")) *rc = ptdp_args_int(a, 1, PTDP_MAX_DEVICES, &c->cp);
    else if (ptdp_args_is(a, "--cp-layout")) {
        static const char *const layouts[] = { "zigzag", "contiguous" };
        int k = 0;
        *rc = ptdp_args_enum(a, layouts, 2, &k);
        c->cp_contiguous = k == 1;
    }
    else if (ptdp_args_is(a, "--ep")) *rc = ptdp_args_int(a, 1, PTDP_MAX_DEVICES, &c->ep);
    else if (ptdp_args_is(a, "--etp")) *rc = ptdp_args_int(a, 1, PTDP_MAX_DEVICES, &c->etp);
    else if (ptdp_args_is(a, "--cp-algo")) {
        static const char *const algos[] = { "ring", "a2a" };
        int k = 0;
        *rc = ptdp_args_enum(a, algos, 2, &k);
        c->cp_a2a = k == 1;
    }
    else if (ptdp_args_is(a, "--stage-layers"))
        *rc = parse_stage_layers(a, o->stage_layers, 4096, &o->nstage);
    else
        return false;
    return true;
}

/* The flags of the mesh and the batch: true when a->flag was one of them
 * (*rc: the read's status). */
static bool read_mesh_flag(ptdp_args *a, train_options *o, int *rc)
{
    ptdp_train_config *c = &o->cfg;
    if (ptdp_args_is(a, "--dp")) *rc = ptdp_args_int(a, 1, PTDP_MAX_DEVICES, &c->dp);
    else if (ptdp_args_is(a, "--tp")) *rc = ptdp_args_int(a, 1, PTDP_MAX_DEVICES, &c->tp);
    else if (ptdp_args_is(a, "--pp")) *rc = ptdp_args_int(a, 1, PTDP_MAX_DEVICES, &c->pp);
    else if (ptdp_args_is(a, "--devices")) *rc = ptdp_args_int(a, 1, PTDP_MAX_DEVICES, &o->devices);
    else if (ptdp_args_is(a, "--micro-batches")) *rc = ptdp_args_int(a, 1, 1 << 20, &c->micro_batches);
    else if (ptdp_args_is(a, "--batch")) {
        *rc = ptdp_args_int(a, 1, 1 << 24, &c->batch);
        o->batch_given = true;
    }
    else if (ptdp_args_is(a, "--steps")) *rc = ptdp_args_int(a, 0, 1 << 24, &c->steps);
    else
        return false;
    return true;
}

/* --fp8 and its two flags (fp8_linear.h): a recipe and a format by their
 * tables' names; validation refuses the two without --fp8. */
static bool read_fp8_flag(ptdp_args *a, ptdp_fp8_settings *f, int *rc)
{
    const char *names[8];
    int k = 0;
    if (ptdp_args_is(a, "--fp8")) {
        const int n = ptdp_fp8_recipe_count();
        for (int i = 0; i < n && i < 8; i++)
            names[i] = ptdp_fp8_recipe_at(i)->name;
        if ((*rc = ptdp_args_enum(a, names, n < 8 ? n : 8, &k)) == 0)
            f->recipe = ptdp_fp8_recipe_at(k);
    } else if (ptdp_args_is(a, "--fp8-grad-format")) {
        const int n = ptdp_fp8_format_count();
        for (int i = 0; i < n && i < 8; i++)
            names[i] = ptdp_fp8_format_at(i)->name;
        if ((*rc = ptdp_args_enum(a, names, n < 8 ? n : 8, &k)) == 0)
            f->grad = ptdp_fp8_format_at(k);
    } else if (ptdp_args_is(a, "--fp8-amax-history"))
        *rc = ptdp_args_int(a, 1, 1 << 16, &f->history);
    else if (ptdp_args_is(a, "--fp8-comm"))
        *rc = ptdp_args_switch(a, &f->comm);
    else
        return false;
    return true;
}

/* The flags of the optimizer step: the optimizer, its gradients' path
 * (DP's buckets, ZeRO, overlap), the precision and the seed.  *opt and
 * *seed: as typed (parse puts them in the config's terms). */
static bool read_step_flag(ptdp_args *a, train_options *o, int *opt, int *seed, int *rc)
{
    ptdp_train_config *c = &o->cfg;
    if (ptdp_args_is(a, "--lr")) *rc = ptdp_args_double(a, 1e-12, 1e6, &c->lr);
    else if (ptdp_args_is(a, "--optimizer")) *rc = ptdp_args_enum(a, optimizer_names, 2, opt);
    else if (ptdp_args_is(a, "--momentum")) *rc = ptdp_args_double(a, 0, 0.999999, &c->momentum);
    else if (ptdp_args_is(a, "--weight-decay")) *rc = ptdp_args_double(a, 0, 1e6, &c->weight_decay);
    else if (ptdp_args_is(a, "--clip-grad")) *rc = ptdp_args_double(a, 0, 1e30, &c->clip_grad);
    else if (ptdp_args_is(a, "--bucket-mb")) *rc = ptdp_args_double(a, 1e-6, 1e6, &c->bucket_mb);
    else if (ptdp_args_is(a, "--zero")) *rc = ptdp_args_int(a, 0, 3, &c->zero);
    else if (ptdp_args_is(a, "--shard-group")) *rc = ptdp_args_int(a, 1, PTDP_MAX_DEVICES, &c->shard_group);
    else if (ptdp_args_is(a, "--zero-hpz")) *rc = ptdp_args_switch(a, &o->hpz);
    else if (ptdp_args_is(a, "--zero-qwz")) *rc = ptdp_args_switch(a, &o->qwz);
    else if (ptdp_args_is(a, "--zero-quant-block")) *rc = ptdp_args_int(a, 1, 1 << 24, &o->quant_block);
    else if (ptdp_args_is(a, "--zero-qgz")) *rc = ptdp_args_switch(a, &o->qgz);
    else if (ptdp_args_is(a, "--zero-qgz-bits")) *rc = ptdp_args_int(a, 1, 64, &o->qgz_bits);
    else if (ptdp_args_is(a, "--overlap")) *rc = ptdp_args_switch(a, &c->overlap);
    else if (ptdp_args_is(a, "--no-pair-overlap")) *rc = ptdp_args_switch(a, &c->serial_pairs);
    else if (ptdp_args_is(a, "--precision")) {
        /* the build's own type, or bf16 mixed precision (mixed.h) */
        static const char *const precisions[] = { PTDP_REAL_NAME, "bf16" };
        int k = 0;
        *rc = ptdp_args_enum(a, precisions, 2, &k);
        c->bf16 = k == 1;
    }
    else if (read_fp8_flag(a, &c->fp8, rc)) {
    }
    else if (ptdp_args_is(a, "--seed")) {
        *rc = ptdp_args_int(a, 0, 2147483647, seed);
        o->seed_given = true;
    }
    else if (ptdp_args_is(a, "--dropout")) *rc = ptdp_args_double(a, 0, 0.99, &c->dropout);
    else
        return false;
    return true;
}

/* The flags of how the devices run: memory, collectives, back end, the
 * virtual clock's profile, the watchdog, BLAS.  *algo: as typed. */
static bool read_launch_flag(ptdp_args *a, train_options *o, int *algo, int *rc)
{
    ptdp_launch_opts *l = &o->launch;
    if (ptdp_args_is(a, "--device-mem")) *rc = ptdp_args_size(a, 4096, (size_t)1 << 40, &l->device_mem);
    else if (ptdp_args_is(a, "--algo")) *rc = ptdp_args_enum(a, algo_names, 5, algo);
    else if (ptdp_args_is(a, "--backend")) {
        int b = 0;
        *rc = ptdp_args_enum(a, ptdp_backend_names, 2, &b);
        l->backend = b == 1 ? PTDP_BACKEND_MPI : PTDP_BACKEND_THREADS;
    }
    else if (ptdp_args_is(a, "--profile")) *rc = ptdp_args_string(a, &o->profile);
    else if (ptdp_args_is(a, "--watchdog")) *rc = ptdp_args_double(a, 0.01, 86400, &l->watchdog_s);
    else if (ptdp_args_is(a, "--blas-threads")) *rc = ptdp_args_int(a, 1, 256, &l->blas_threads);
    else
        return false;
    return true;
}

/* The flags of what the run checks and writes, and what it reads back. */
static bool read_output_flag(ptdp_args *a, train_options *o, int *rc)
{
    if (ptdp_args_is(a, "--check")) *rc = ptdp_args_switch(a, &o->check);
    else if (ptdp_args_is(a, "--verify-replicas")) *rc = ptdp_args_switch(a, &o->cfg.verify_replicas);
    else if (ptdp_args_is(a, "--quiet")) *rc = ptdp_args_switch(a, &o->quiet);
    else if (ptdp_args_is(a, "--log")) *rc = ptdp_args_string(a, &o->log_path);
    else if (ptdp_args_is(a, "--trace")) *rc = ptdp_args_string(a, &o->launch.trace_path);
    else if (ptdp_args_is(a, "--report")) *rc = ptdp_args_string(a, &o->report_path);
    else if (ptdp_args_is(a, "--html")) *rc = ptdp_args_string(a, &o->html_path);
    else if (ptdp_args_is(a, "--save")) *rc = ptdp_args_string(a, &o->save);
    else if (ptdp_args_is(a, "--load")) *rc = ptdp_args_string(a, &o->load);
    else if (ptdp_args_is(a, "--save-init")) *rc = ptdp_args_string(a, &o->save_init);
    else if (ptdp_args_is(a, "--dump-data")) *rc = ptdp_args_string(a, &o->dump);
    else
        return false;
    return true;
}

/* What was typed, in the config's terms: the collectives' algorithm, the
 * optimizer, the seed, the schedule, and the model's flags settled. */
static int settle_parsed(train_options *o, int algo, int opt, int seed, const ptdp_schedule_entry *sched)
{
    ptdp_train_config *c = &o->cfg;
    o->launch.algo = algo_values[algo];
    c->optimizer = opt == 1 ? PTDP_OPT_SGD : PTDP_OPT_ADAMW;
    c->seed = (uint64_t)seed;
    /* Token slices go through the pipeline as GPipe's micro-batches do: the
     * default schedule then is the first that runs them (gpipe); an explicit
     * other one is refused by validation, naming both flags. */
    const ptdp_schedule_entry *slicing = ptdp_schedule_first_with(PTDP_SCHED_TOKEN_SLICES);
    c->schedule = sched != NULL ? sched : c->token_slices > 1 && slicing != NULL ? slicing : ptdp_schedule_default();
    o->model.seed = c->seed;
    if (ptdp_model_flags_finish("train", &o->model) != 0)
        return PTDP_EXIT_USAGE;
    c->model = o->model.cfg;
    c->attention_tiled = ptdp_attention_tiles(o->attention, ptdp_model_of(&c->model)->caps.attention,
                                              c->recompute_core, ptdp_model_positions(&c->model));
    return 0;
}

static int parse(int argc, char **argv, train_options *o)
{
    memset(o, 0, sizeof *o);
    ptdp_train_config *c = &o->cfg;
    *c = ptdp_train_defaults();
    c->dp = 0;                     /* unset: --devices may decide it */
    c->model.ffn = 0;              /* unset: 4 x --hidden */
    ptdp_model_flags_init(&o->model, &c->model);
    o->attention = -1;
    int opt = 0, algo = 3, seed = 1;
    const ptdp_schedule_entry *sched = NULL;

    ptdp_args a;
    ptdp_args_init(&a, "train", argc, argv, 1);
    while (ptdp_args_next(&a)) {
        int rc = 0;
        if (ptdp_args_is(&a, "--help")) { usage(); return -1; }
        else if (read_layout_flag(&a, o, &sched, &rc)) { }
        else if (read_mesh_flag(&a, o, &rc)) { }
        else if (read_step_flag(&a, o, &opt, &seed, &rc)) { }
        else if (ptdp_model_flag_is(&a)) rc = ptdp_model_flag_read(&a, PTDP_FLAGS_RUN, &o->model);
        else if (read_launch_flag(&a, o, &algo, &rc)) { }
        else if (read_output_flag(&a, o, &rc)) { }
        else rc = ptdp_args_unknown(&a);
        if (rc)
            return PTDP_EXIT_USAGE;
    }
    if (a.status)
        return PTDP_EXIT_USAGE;
    if (o->profile != NULL && strcmp(o->profile, "list") == 0) {
        list_profiles();
        return -1;
    }
    return settle_parsed(o, algo, opt, seed, sched);
}

/* ---- validate: the flags together, before any work ---------------------- */

/* --devices N: dp = N / (cp x tp x pp) if --dp is not given, else a check. */
static int resolve_dp(ptdp_train_config *c, int devices)
{
    if (devices > 0) {
        const int cp = ptdp_train_cp(c);
        long mpl = (long)cp * c->tp * c->pp;
        int mp = mpl > PTDP_MAX_DEVICES ? PTDP_MAX_DEVICES + 1 : (int)mpl;
        char axes[64];   /* "--tp 2 x --pp 2", with "--cp N x " in front under CP */
        if (cp > 1)
            snprintf(axes, sizeof axes, "--cp %d x --tp %d x --pp %d", cp, c->tp, c->pp);
        else
            snprintf(axes, sizeof axes, "--tp %d x --pp %d", c->tp, c->pp);
        if (c->dp == 0) {
            if (mpl > PTDP_MAX_DEVICES)
                return ptdp_usage_error("train", "%s = %ld devices already exceeds the %d "
                                        "supported, whatever --devices is", axes, mpl, PTDP_MAX_DEVICES);
            if (devices % mp != 0) {
                /* the multiples of tp x pp on either side, those within the limit */
                int lo = devices / mp * mp, hi = lo + mp;
                if (lo > 0 && hi <= PTDP_MAX_DEVICES)
                    return ptdp_usage_error("train", "--devices %d is not a multiple of %s = %d "
                                            "(try --devices %d or %d)", devices, axes, mp, lo, hi);
                return ptdp_usage_error("train", "--devices %d is not a multiple of %s = %d "
                                        "(try --devices %d)", devices, axes, mp, lo > 0 ? lo : hi);
            }
            c->dp = devices / mp;
        } else if (c->dp * mpl != devices) {
            return ptdp_usage_error("train", "--devices %d must equal --dp %d x %s = %ld",
                                    devices, c->dp, axes, c->dp * mpl);
        }
    }
    if (c->dp == 0)
        c->dp = 1;
    return 0;
}

/* --zero-hpz: the node group's size k, the DP ranks of one node of the
 * profile (GPUs a node / tp: tp is fastest in the world's ranks, so k
 * consecutive DP ranks share a node), which must cut ZeRO-3's group —
 * the DP group, or HSDP's shard group — into groups of 2 or more. */
static int resolve_hpz(train_options *o)
{
    ptdp_train_config *c = &o->cfg;
    if (!o->hpz)
        return 0;
    if (c->zero != 3)
        return ptdp_usage_error("train", "--zero-hpz needs --zero 3 (ZeRO++'s secondary partition of ZeRO-3's "
                                "parameters); --zero is %d", c->zero);
    const int G = c->shard_group > 0 ? c->shard_group : c->dp;
    const ptdp_profile *p = o->launch.profile;
    if (p == NULL || p->gpus_per_node <= 0) {
        if (c->shard_group > 0)
            return ptdp_usage_error("train", "--zero-hpz with --shard-group %d and no cluster profile: the node "
                                    "would be the shard group itself, over which ZeRO-3 gathers already; give "
                                    "--profile with nodes smaller than the shard group (hgx-a100-4, dgx-h100; "
                                    "ptdp train --profile list)", c->shard_group);
        return ptdp_usage_error("train", "--zero-hpz keeps ZeRO-3's secondary pieces inside a node: it needs a "
                                "cluster profile with GPUs a node (--profile hgx-a100-4 or dgx-h100; ptdp train "
                                "--profile list), %s", p == NULL ? "and none was given" : "not a one-node one");
    }
    if (ptdp_train_cp(c) > 1)
        return ptdp_usage_error("train", "--zero-hpz with --cp %d: its node groups cut the DP ranks alone here; "
                                "leave --cp or --zero-hpz out", c->cp);
    if (p->gpus_per_node % c->tp != 0)
        return ptdp_usage_error("train", "--zero-hpz with --tp %d and --profile %s (%d GPUs a node): a node must "
                                "hold whole TP groups; use a --tp dividing %d", c->tp, p->name, p->gpus_per_node,
                                p->gpus_per_node);
    const int k = p->gpus_per_node / c->tp;
    if (k == 1)
        return ptdp_usage_error("train", "--zero-hpz: a node of --profile %s holds %d GPUs, one TP group of --tp "
                                "%d, so its node group is 1 DP rank and holds nothing to gather from; use a "
                                "smaller --tp", p->name, p->gpus_per_node, c->tp);
    if (k >= G || G % k != 0)
        return ptdp_usage_error("train", "--zero-hpz: ZeRO-3's group of %d DP ranks%s and nodes of %d DP ranks "
                                "(--profile %s, %d GPUs a node / --tp %d): %s", G,
                                c->shard_group > 0 ? " (--shard-group)" : "", k, p->name, p->gpus_per_node, c->tp,
                                k >= G ? "the group lies inside one node, its gathers never leave it; use more "
                                         "DP ranks than a node holds" : "the nodes must cut the group evenly");
    c->zero_hpz = k;
    return 0;
}

/* --zero-qgz: its bits (--zero-qgz-bits, 4 or 8), its block (qwZ's
 * --zero-quant-block, 2048) and its node, k DP ranks of one node of the
 * profile as hpZ's (GPUs a node / tp).  No profile of nodes: refused — a
 * node is what the second all-to-all leaves, and without one every rank
 * would be one node's.  --check also needs one device to hold each rank's
 * unit (no tp, no pp) and each rank's micro-batches whole. */
static int resolve_qgz(train_options *o)
{
    ptdp_train_config *c = &o->cfg;
    if (o->qgz_bits != 0 && !o->qgz)
        return ptdp_usage_error("train", "--zero-qgz-bits %d is the bits qgZ's gradient codes take: it needs "
                                "--zero-qgz", o->qgz_bits);
    if (!o->qgz)
        return 0;
    if (o->qgz_bits != 0 && o->qgz_bits != 4 && o->qgz_bits != 8)
        return ptdp_usage_error("train", "--zero-qgz-bits %d: qgZ sends INT4 or INT8 codes; use 4 or 8",
                                o->qgz_bits);
    if (c->zero != 3)
        return ptdp_usage_error("train", "--zero-qgz replaces ZeRO-3's gradient reduce-scatter: it needs --zero 3; "
                                "--zero is %d", c->zero);
    const ptdp_profile *p = o->launch.profile;
    if (p == NULL || p->gpus_per_node <= 0)
        return ptdp_usage_error("train", "--zero-qgz sums gradients inside a node before they cross nodes: it "
                                "needs a cluster profile with GPUs a node (--profile hgx-a100-4 or dgx-h100; ptdp "
                                "train --profile list), %s", p == NULL ? "and none was given" : "not a one-node one");
    const int G = c->shard_group > 0 ? c->shard_group : c->dp, k = p->gpus_per_node / c->tp;
    if (p->gpus_per_node % c->tp != 0 || k < 2 || k >= G || G % k != 0)
        return ptdp_usage_error("train", "--zero-qgz: nodes of --profile %s (%d GPUs a node / --tp %d) must hold "
                                "whole TP groups and cut ZeRO-3's group of %d DP ranks%s into two or more nodes "
                                "of 2 or more DP ranks", p->name, p->gpus_per_node, c->tp, G,
                                c->shard_group > 0 ? " (--shard-group)" : "");
    c->zero_qgz = o->qgz_bits != 0 ? o->qgz_bits : 4;
    c->zero_qgz_block = o->quant_block > 0 ? o->quant_block : 2048;
    c->zero_qgz_node = k;
    if (o->check && (c->tp > 1 || c->pp > 1))   /* zero3_qgz.c: what --check compares */
        return ptdp_usage_error("train", "--check with --zero-qgz and --%s %d: its one device would need each "
                                "rank's gradient of its own %s, and holds the whole model; check qgZ over dp and "
                                "--shard-group alone", c->tp > 1 ? "tp" : "pp", c->tp > 1 ? c->tp : c->pp,
                                c->tp > 1 ? "TP shard" : "stage");
    const int U = c->dp * c->micro_batches;
    if (o->check && c->batch % U != 0)
        return ptdp_usage_error("train", "--check with --zero-qgz: its one device runs each rank's micro-batches "
                                "apart, dp x M = %d of them, and --batch %d does not split evenly into them; use a "
                                "multiple of %d", U, c->batch, U);
    return 0;
}

/* A --load refused: another model's checkpoint is the command line's
 * mistake (exit 2, ptdp_state_check_model), a file that cannot be read or
 * does not fit the flags the file's (exit 1). */
static int load_refused(const char *msg, int rc)
{
    if (rc == PTDP_EINVAL)
        return ptdp_usage_error("train", "--load %s", msg);
    fprintf(stderr, "ptdp train: --load %s\n", msg);
    return PTDP_EXIT_FAIL;
}

/* --load: the settings the checkpoint records beyond its shapes (a
 * mixture's capacity factor and balance weight, model.h), each the file's
 * unless its flag is typed — a typed one that differs is used, and said:
 * resuming without the flags goes on with the math that saved the file. */
static int settings_from(train_options *o, char *msg, size_t msglen)
{
    ptdp_model_config *m = &o->cfg.model;
    const ptdp_model_ops *ops = ptdp_model_of(m);
    ptdp_meta_setting file[PTDP_META_SETTINGS_MAX], run[PTDP_META_SETTINGS_MAX];
    const int n = ptdp_state_settings(o->load, m, file, PTDP_META_SETTINGS_MAX, msg, msglen);
    if (n < 0)
        return load_refused(msg, n);
    const int nrun = ops->settings != NULL ? ops->settings(m, run, PTDP_META_SETTINGS_MAX) : 0;
    for (int i = 0; i < n && i < nrun; i++) {
        char typed[32], saved[32];
        if (!ptdp_model_flags_given(&o->model, file[i].flag))
            (void)ptdp_state_take_setting(m, &file[i]);   /* a value the flag takes: ptdp_state_settings checked */
        else if (strcmp(file[i].value, run[i].value) != 0)
            printf("note: %s %s is used, not the checkpoint's %s=%s: the run from here on computes other losses "
                   "than the one that saved it would have\n", file[i].flag, ptdp_state_meta_text(run[i].value, typed),
                   file[i].key, ptdp_state_meta_text(file[i].value, saved));
    }
    return 0;
}

/* --load: the checkpoint into o->resume, the settings it records (above),
 * and the seed and batch it sets unless typed (saying which). */
static int resume_from(train_options *o, char *msg, size_t msglen)
{
    ptdp_train_config *c = &o->cfg;
    int rc = settings_from(o, msg, msglen);
    if (rc != 0)
        return rc;
    rc = ptdp_state_load(&o->resume, o->load, &c->model, msg, msglen);
    if (rc != 0)
        return load_refused(msg, rc);
    o->have_resume = true;
    c->resume = &o->resume;
    if (!o->seed_given)
        c->seed = o->resume.seed;
    else if (c->seed != o->resume.seed)
        printf("note: --seed %" PRIu64 " is used, not the checkpoint's seed %" PRIu64 ": the data and "
               "dropout from here on differ from the run that saved it\n", c->seed, o->resume.seed);
    if (ptdp_model_flags_reseed("train", &o->model, c->seed, &c->model) != 0)
        return PTDP_EXIT_USAGE;
    if (!o->batch_given)
        c->batch = o->resume.batch;
    else if (c->batch != o->resume.batch)
        printf("note: --batch %d is used, not the checkpoint's batch %d: the run goes on from sample "
               "%ld x %d\n", c->batch, o->resume.batch, o->resume.step, c->batch);
    return 0;
}

/* 0, PTDP_EXIT_USAGE (also for another model's checkpoint), or
 * PTDP_EXIT_FAIL if the checkpoint to --load cannot be read.  On 0,
 * o->resume holds that checkpoint (run frees it). */
/* zero3_qwz.c: what qwZ's --check compares.  A stage's units are one
 * device's units unless a tied embedding's second copy sits in the last
 * stage's head (the model builds the embedding group for it). */
static int qwz_check_rule(const train_options *o)
{
    const ptdp_train_config *c = &o->cfg;
    const bool tied = (ptdp_model_of(&c->model)->groups & PTDP_GROUP_BIT(PTDP_GROUP_EMB)) != 0;
    if (o->qwz && o->check && (c->tp > 1 || (c->pp > 1 && tied)))
        return ptdp_usage_error("train", "--check with --zero-qwz and --%s %d: qwZ's blocks follow each ZeRO-3 "
                              "unit's shards, and a %s unit is not one device's (%s), so no one device can "
                              "quantize the same blocks; check qwZ over dp, cp and --shard-group%s",
                              c->tp > 1 ? "tp" : "pp", c->tp > 1 ? c->tp : c->pp,
                              c->tp > 1 ? "TP rank's" : "stage's",
                              c->tp > 1 ? "its shard of every weight" : "the last stage's head holds its own copy of "
                                                                        "the tied embedding",
                              c->tp > 1 ? ", and --pp with a model whose head is not tied to its embedding" : "");
    return 0;
}

static int validate(train_options *o)
{
    ptdp_train_config *c = &o->cfg;
    if (o->profile != NULL && (o->launch.profile = ptdp_profile_find(o->profile)) == NULL)
        return ptdp_usage_error("train", "--profile %s: unknown (ptdp train --profile list names them)", o->profile);
    if (o->nstage > 0) {
        const ptdp_pp_layout l = ptdp_train_layout(c);
        const int v = ptdp_pp_layout_chunks(&l) / c->pp;   /* DualPipe: pp per copy */
        if (v > 1 && o->nstage != c->pp * v)
            return ptdp_usage_error("train", "--stage-layers lists %d pieces but --pp %d x --virtual-stages %d "
                                    "cuts the layers into %d (one entry per piece; piece c x %d + s is stage s's "
                                    "chunk c)", o->nstage, c->pp, v, c->pp * v, c->pp);
        if (o->nstage != c->pp * v)
            return ptdp_usage_error("train", "--stage-layers lists %d stages but --pp is %d", o->nstage, c->pp);
        c->stage_layers = o->stage_layers;
    }
    int rc = resolve_dp(c, o->devices);
    if (rc == 0)
        rc = resolve_hpz(o);
    if (rc == 0 && o->quant_block > 0 && !o->qwz && !o->qgz)
        rc = ptdp_usage_error("train", "--zero-quant-block %d is the block qwZ quantizes in: it needs --zero-qwz "
                              "(or --zero-qgz, whose gradient blocks it sets too)", o->quant_block);
    if (o->qwz)
        c->zero_qwz = o->quant_block > 0 ? o->quant_block : 2048;
    if (rc == 0)
        rc = resolve_qgz(o);
    if (rc == 0)
        rc = qwz_check_rule(o);
    if (rc != 0)
        return rc;
    if (o->launch.algo == PTDP_ALGO_MPI && o->launch.backend != PTDP_BACKEND_MPI)
        return ptdp_usage_error("train", "--algo mpi is MPI's own MPI_Allreduce: it needs --backend mpi");
    if (o->launch.backend == PTDP_BACKEND_MPI && o->launch.blas_threads > 0)
        return ptdp_usage_error("train", "--blas-threads shares each device's products with its threads: "
                                "--backend mpi keeps one thread per process");
    if (o->launch.backend == PTDP_BACKEND_MPI) {
        /* One process per device: mpirun's world is the mesh. */
        long world = (long)c->dp * ptdp_train_cp(c) * c->tp * c->pp;
        if (world != o->mpi_world)
            return ptdp_usage_error("train", "--backend mpi: mpirun started %d process%s, but the mesh --dp %d x "
                                    "--cp %d x --tp %d x --pp %d needs %ld, one per device (mpirun -n %ld, or "
                                    "a mesh of %d devices)", o->mpi_world, o->mpi_world == 1 ? "" : "es", c->dp,
                                    ptdp_train_cp(c), c->tp, c->pp, world, world, o->mpi_world);
    }

    /* Every file the run will write, before it starts: an unwritable
     * --save found after an hour of training is a lost hour, and an output
     * that is an input (--load c.st --log c.st) destroys it. */
    const ptdp_cli_file inputs[] = { { "--load", o->load }, { "--data", o->model.data } };
    const ptdp_cli_file outputs[] = {
        { "--save", o->save }, { "--save-init", o->save_init }, { "--log", o->log_path },
        { "--trace", o->launch.trace_path }, { "--report", o->report_path }, { "--dump-data", o->dump },
        { "--html", o->html_path },
    };
    if (ptdp_cli_check_files("train", inputs, 2, outputs, 7) != 0)
        return PTDP_EXIT_USAGE;
    char msg[PTDP_MSG_MAX];

    /* Another model's checkpoint first, before this model reads the file
     * (its prepare); then what the model fixes once tp is known (the GPT's
     * padded vocabulary). */
    if (o->load != NULL && (rc = ptdp_state_check_model(o->load, &c->model, msg, sizeof msg)) != 0)
        return load_refused(msg, rc);
    const ptdp_model_cli *cli = ptdp_model_cli_of(&c->model);
    int prc = cli->prepare != NULL ? cli->prepare(c, &o->model, o->load) : 0;
    if (prc != 0)
        return prc;
    if (o->load != NULL && (rc = resume_from(o, msg, sizeof msg)) != 0)
        return rc;
    if (ptdp_train_validate(c, msg, sizeof msg) != 0)
        return ptdp_usage_error("train", "%s", msg);
    return 0;
}

/* ---- run ----------------------------------------------------------------- */

static int run(train_options *o)
{
    const ptdp_train_outputs out = {
        .check = o->check, .quiet = o->quiet, .log = o->log_path, .save = o->save, .save_init = o->save_init,
        .dump = o->dump, .report = o->report_path, .html = o->html_path, .data_name = o->model.data,
    };
    return ptdp_train_and_report(&o->cfg, &o->launch, &out);
}

/* What parsing and validation hold (the built-in corpus, a loaded
 * checkpoint), freed whichever way the command ends. */
static void release(train_options *o)
{
    if (o->have_resume)
        ptdp_state_free(&o->resume);
    o->have_resume = false;
    ptdp_model_flags_free(&o->model);
}

int ptdp_cmd_train(int argc, char **argv)
{
    train_options o;
    ptdp_cli_backend_quiet();          /* under mpirun: rank 0 speaks */
    int rc = parse(argc, argv, &o);
    if (rc != 0) {
        release(&o);
        return rc < 0 ? PTDP_EXIT_OK : rc;
    }
    if ((rc = ptdp_cli_backend_start("train", o.launch.backend, &o.mpi_world)) != 0) {
        release(&o);
        return rc;
    }
    if ((rc = validate(&o)) == 0)
        rc = run(&o);
    release(&o);
    ptdp_cli_backend_finish(o.launch.backend);
    return rc;
}
