/*
 * bench_zero.c — `ptdp bench zero`: the ZeRO paper's memory table, measured.
 *
 * Rajbhandari et al. (ZeRO, 2020, section 3 and figure 1) count the model
 * states per device for Ψ parameters on N data-parallel ranks, with bw
 * bytes per parameter, bg per gradient and bo of optimizer state per
 * parameter (ptdp_zero_state_bytes, zero.h):
 *
 *                 params      grads       optim        this build (f32,   mixed precision
 *                                                       AdamW 4 + 4 + 8)   (bf16: 2 + 2 + 12)
 *   plain DP      bw Ψ        bg Ψ        bo Ψ          16Ψ                16Ψ
 *   ZeRO-1        bw Ψ        bg Ψ        bo Ψ/N        8Ψ + 8Ψ/N          4Ψ + 12Ψ/N
 *   ZeRO-2        bw Ψ        bg Ψ/N      bo Ψ/N        4Ψ + 12Ψ/N         2Ψ + 14Ψ/N
 *   ZeRO-3        bw Ψ/N      bg Ψ/N      bo Ψ/N        16Ψ/N              16Ψ/N
 *
 * and the bytes each device sends in its DP group per step, with S = Ψ
 * gradient bytes and M micro-batches: 2(N-1)/N S for plain DP and ZeRO-1
 * (an all-reduce is a reduce-scatter and an all-gather), (M+1)(N-1)/N S
 * for ZeRO-2 (a reduce-scatter after every backward), 3M(N-1)/N S for
 * ZeRO-3 (each unit gathered for its forward and again for its backward,
 * its gradient reduce-scattered).
 *
 * For each stage this command runs ptdp_train three times on the same
 * model and data:
 *
 *   --steps 0        the set-up alone: what the device holds between steps,
 *                    the persistent model states ("at rest": arena peaks of
 *                    params, grads, optim after set-up), checked against the
 *                    formula on every device
 *   --steps S        training: the arena's peaks, which add what lives for a
 *                    moment (transient = peak - at rest): ZeRO-2's full-size
 *                    bucket in "comm", ZeRO-3's gathered units in "params"
 *                    and their gradients in "grads"; the DP bytes per
 *                    step against the formula; the virtual step time
 *   --overlap        the same, where the stage allows it (not ZeRO-1):
 *                    the virtual step time with the communication under
 *                    the compute, and ZeRO-3's prefetched units
 *
 *   device 0, --zero 3          params   ██ (Ψ/N)  ░░░░░░░░ gathered units, transient
 *                               grads    ██ (Ψ/N)  ░░░░░░░░ their gradients, transient
 *                               optim    ████ (2Ψ/N)
 *
 * The measuring is zero_measure.c's, where a precision is data
 * (ptdp_zero_precision): this build's float, and bf16 mixed precision
 * (--precision bf16, mixed.h), whose runs repeat the float ones with bf16
 * parameters and gradients and float master weights — 2 + 2 + 12 bytes at
 * rest, half of float's DP bytes.  ptdp-f64 has no bf16 run: there the bf16
 * column is the formula only.  A persistent state or a DP byte count that
 * differs from the formula, in either precision, fails the command (exit
 * 1): no table of wrong numbers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../args.h"
#include "../model_flags.h"
#include "bench.h"
#include "ptdp/error.h"
#include "ptdp/json.h"
#include "ptdp/models.h"
#include "ptdp/train.h"
#include "ptdp/zero.h"

/* ---- the formulas in words ------------------------------------------------- */

/* "4Ψ", "8Ψ/N", "4Ψ + 12Ψ/N": whole bytes per parameter w held whole and s
 * sharded. */
static const char *rule(double whole, double sharded, char *buf, size_t n)
{
    if (whole > 0 && sharded > 0)
        snprintf(buf, n, "%gΨ + %gΨ/N", whole, sharded);
    else if (sharded > 0)
        snprintf(buf, n, "%gΨ/N", sharded);
    else
        snprintf(buf, n, "%gΨ", whole);
    return buf;
}

/* Whether a stage's row shards params (cat 0), grads (1) or optim (2). */
static bool sharded(int stage, int cat)
{
    const ptdp_zero_stage *row = ptdp_zero_stage_of(stage);
    return cat == 0 ? row->shards_params : cat == 1 ? row->shards_grads : row->shards_optim;
}

static const char *state_rule(int stage, int cat, const ptdp_zero_precision *p, char *buf, size_t n)
{
    const double b[3] = { p->bw, p->bg, p->bo };
    return sharded(stage, cat) ? rule(0, b[cat], buf, n) : rule(b[cat], 0, buf, n);
}

static const char *total_rule(int stage, const ptdp_zero_precision *p, char *buf, size_t n)
{
    const double b[3] = { p->bw, p->bg, p->bo };
    double whole = 0, part = 0;
    for (int c = 0; c < 3; c++)
        *(sharded(stage, c) ? &part : &whole) += b[c];
    return rule(whole, part, buf, n);
}

/* printf's widths count bytes; Ψ is two.  Pad by characters. */
static void put_padded(const char *s, int width)
{
    int chars = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        chars += (*p & 0xC0) != 0x80;
    fputs(s, stdout);
    for (; chars < width; chars++)
        putchar(' ');
}

/* ---- the table -------------------------------------------------------------- */

typedef struct {
    ptdp_model_config model;
    int dp, micro_batches, batch, steps;
    const char *profile;
    bool json;
    double watchdog_s;
} zero_cfg;

static const char *const stage_titles[4] = {
    "plain DP (--zero 0): every device holds every state whole",
    "ZeRO-1 (--zero 1): the optimizer state sharded",
    "ZeRO-2 (--zero 2): the gradients sharded too",
    "ZeRO-3 (--zero 3): the parameters sharded too",
};

static void print_header(const zero_cfg *c, double psi, const ptdp_launch_opts *o)
{
    const ptdp_model_config *m = &c->model;
    const ptdp_profile *prof = o->profile ? o->profile : ptdp_profile_default();
    const ptdp_zero_precision *f = ptdp_zero_precision_of(PTDP_REAL_NAME), *bf = ptdp_zero_precision_of("bf16");
    const ptdp_model_cli *cli = ptdp_model_cli_of(m);
    printf("ptdp bench zero (%s): ", PTDP_REAL_NAME);
    if (cli->bench_describe != NULL)
        cli->bench_describe(stdout, m);
    else
        printf("%s, hidden %d, ffn %d, %d layers", ptdp_model_name(m), m->hidden, m->ffn, m->layers);
    printf("; ");
    printf("Ψ = %.0f parameters\n", psi);
    printf("  N = dp = %d, M = %d micro-batches, batch %d, AdamW, %d steps a run, profile %s\n", c->dp,
           c->micro_batches, c->batch, c->steps, prof->name);
    printf("  bytes per parameter + gradient + optimizer state: %s %g + %g + %g (measured), "
           "bf16 %g + %g + %g (%s)\n", f->name, f->bw, f->bg, f->bo, bf->bw, bf->bg, bf->bo,
           bf->measured ? "measured, --precision bf16" : "formula only");
    printf("  device 0 shown; every device's states at rest were checked against the formula\n"
           "  (= equal; ≈ within ptdp_share's rounding, an element per cut, the devices' sum exact)\n");
}

/* The three states and their sum: the formula beside device 0's arena at
 * rest, in float (m) and in bf16 (mb; NULL: the formula only, ptdp-f64). */
static void print_states(const ptdp_zero_measure *m, bool match, const ptdp_zero_measure *mb, bool bmatch)
{
    static const char *const names[3] = { "params", "grads", "optim" };
    static const ptdp_mem_category cats[3] = { PTDP_MEM_PARAMS, PTDP_MEM_GRADS, PTDP_MEM_OPTIM };
    const ptdp_zero_precision *bf = ptdp_zero_precision_of("bf16");
    const ptdp_zero_bytes f = m->formula;
    const ptdp_zero_bytes g = ptdp_zero_state_bytes(m->stage, m->psi, m->dp, bf->bw, bf->bg, bf->bo);
    const double fw[3] = { f.params, f.grads, f.optim }, gw[3] = { g.params, g.grads, g.optim };
    const ptdp_mem_stats *rest = &m->rest[0], *peak = &m->peak[0];
    char b[6][32], r[64];

    printf("  %-13s %-12s %11s %11s   %11s %11s    %-12s %11s %11s\n", "device 0", "formula", "bytes", "at rest",
           "peak", "transient", "bf16 formula", "bytes", mb ? "at rest" : "");
    double rest_sum = 0, brest_sum = 0;
    for (int i = 0; i < 3; i++) {
        double at = (double)rest->peak[cats[i]], pk = (double)peak->peak[cats[i]];
        rest_sum += at;
        printf("  %-13s ", names[i]);
        put_padded(state_rule(m->stage, i, &m->prec, r, sizeof r), 12);
        printf(" %11s %11s %s %11s %11s    ", ptdp_format_bytes(fw[i], b[0], sizeof b[0]),
               ptdp_format_bytes(at, b[1], sizeof b[1]), at == fw[i] ? "=" : match ? "≈" : "≠",
               ptdp_format_bytes(pk, b[2], sizeof b[2]), ptdp_format_bytes(pk - at, b[3], sizeof b[3]));
        put_padded(state_rule(m->stage, i, bf, r, sizeof r), 12);
        printf(" %11s", ptdp_format_bytes(gw[i], b[4], sizeof b[4]));
        if (mb != NULL) {
            double bat = (double)mb->rest[0].peak[cats[i]];
            brest_sum += bat;
            printf(" %11s %s", ptdp_format_bytes(bat, b[5], sizeof b[5]), bat == gw[i] ? "=" : bmatch ? "≈" : "≠");
        }
        printf("\n");
    }
    const double ftot = f.params + f.grads + f.optim, gtot = g.params + g.grads + g.optim;
    printf("  %-13s ", "model states");
    put_padded(total_rule(m->stage, &m->prec, r, sizeof r), 12);
    printf(" %11s %11s %s %11s %11s    ", ptdp_format_bytes(ftot, b[0], sizeof b[0]),
           ptdp_format_bytes(rest_sum, b[1], sizeof b[1]), rest_sum == ftot ? "=" : match ? "≈" : "≠", "", "");
    put_padded(total_rule(m->stage, bf, r, sizeof r), 12);
    printf(" %11s", ptdp_format_bytes(gtot, b[4], sizeof b[4]));
    if (mb != NULL)
        printf(" %11s %s", ptdp_format_bytes(brest_sum, b[5], sizeof b[5]),
               brest_sum == gtot ? "=" : bmatch ? "≈" : "≠");
    printf("\n");
}

/* What lives only for a moment (the row's gradient bucket, its gathered
 * units), the activations and the peak total of device 0. */
static void print_peaks(const ptdp_zero_measure *m, const ptdp_zero_measure *mb)
{
    const ptdp_zero_stage *row = ptdp_zero_stage_of(m->stage);
    const ptdp_mem_stats *peak = &m->peak[0];
    char b[4][32];
    const double comm = (double)peak->peak[PTDP_MEM_COMM];
    if (row->grad_bucket)
        printf("  %-13s %-12s %11s %11s   %11s %11s    the full-size bucket of one backward\n", "comm", "", "", "",
               ptdp_format_bytes(comm, b[2], sizeof b[2]), ptdp_format_bytes(comm, b[3], sizeof b[3]));
    if (row->shards_params)
        printf("  %-13s transient params: the units gathered at once; grads: their gradients in the backward\n",
               "");
    printf("  %-13s %-12s %11s %11s   %11s    ", "acts", "", "", "",
           ptdp_format_bytes((double)peak->peak[PTDP_MEM_ACTS], b[0], sizeof b[0]));
    if (mb != NULL)   /* under bf16 the kept activations are bf16 too (act_bf16.h) */
        printf("bf16 %s: activations kept as bf16, one block's float copy",
               ptdp_format_bytes((double)mb->peak[0].peak[PTDP_MEM_ACTS], b[1], sizeof b[1]));
    printf("\n  %-13s %-12s %11s %11s   %11s    ", "total", "", "", "",
           ptdp_format_bytes((double)peak->peak_total, b[0], sizeof b[0]));
    if (mb != NULL)
        printf("bf16 %s ", ptdp_format_bytes((double)mb->peak[0].peak_total, b[1], sizeof b[1]));
    printf("(every category, activations and data too)\n");
}

/* The DP bytes per step beside the row's rule, and the virtual step with
 * and without --overlap. */
static void print_traffic(const ptdp_zero_measure *m, const ptdp_zero_measure *mb)
{
    const ptdp_zero_stage *row = ptdp_zero_stage_of(m->stage);
    char b[2][32];
    printf("  DP bytes per step  %s = %s, measured %s %s\n", row->dp_rule,
           ptdp_format_bytes(m->dp_formula, b[0], sizeof b[0]), ptdp_format_bytes(m->dp_sent, b[1], sizeof b[1]),
           ptdp_zero_bytes_match(m) ? "=" : "≠");
    if (mb != NULL)
        printf("  DP bytes, bf16     half: %s, measured %s %s\n", ptdp_format_bytes(mb->dp_formula, b[0], sizeof b[0]),
               ptdp_format_bytes(mb->dp_sent, b[1], sizeof b[1]), ptdp_zero_bytes_match(mb) ? "=" : "≠");
    printf("  virtual step       %.2f us", m->step_s * 1e6);
    if (m->overlap_step_s >= 0) {
        printf("; with --overlap %.2f us (%+.1f%%, %.2f us of communication hidden)", m->overlap_step_s * 1e6,
               m->step_s > 0 ? 100.0 * (m->overlap_step_s - m->step_s) / m->step_s : 0.0,
               m->overlap_hidden_s * 1e6);
        if (row->shards_params)
            printf(",\n                     params peak %s with the next unit prefetched",
                   ptdp_format_bytes(m->overlap_peak_params, b[0], sizeof b[0]));
    } else {
        printf("; --overlap refused for --zero %d", m->stage);
    }
    printf("\n");
}

/* One stage's table. m: float; mb: bf16 (NULL: the formula only, ptdp-f64). */
static void print_stage(const ptdp_zero_measure *m, bool match, const ptdp_zero_measure *mb, bool bmatch)
{
    printf("\n%s\n", stage_titles[m->stage]);
    print_states(m, match, mb, bmatch);
    print_peaks(m, mb);
    print_traffic(m, mb);
    if (!match || (mb != NULL && !bmatch))
        printf("  MISMATCH: the persistent states differ from the formula (see stderr)\n");
}

#define J(x) ptdp_json_number((x), (char[PTDP_JSON_NUMBER_MAX]){ 0 })

static void print_json(const zero_cfg *c, const ptdp_zero_measure *m, bool match, const ptdp_zero_measure *mb,
                       bool bmatch, const ptdp_launch_opts *o)
{
    const ptdp_profile *prof = o->profile ? o->profile : ptdp_profile_default();
    const ptdp_zero_precision *bf = ptdp_zero_precision_of("bf16");
    const ptdp_zero_bytes f = m->formula;
    const ptdp_zero_bytes g = ptdp_zero_state_bytes(m->stage, m->psi, m->dp, bf->bw, bf->bg, bf->bo);
    const ptdp_mem_stats *rest = &m->rest[0], *peak = &m->peak[0];
    printf("{\"bench\": \"zero\", \"stage\": %d, \"precision\": \"%s\", \"model\": \"%s\", \"psi\": %s, "
           "\"dp\": %d, \"micro_batches\": %d, \"batch\": %d, \"steps\": %d, \"profile\": \"%s\", ",
           m->stage, m->prec.name, ptdp_model_name(&c->model), J(m->psi), m->dp, m->micro_batches, c->batch,
           m->steps, prof->name);
    printf("\"formula_bytes\": {\"params\": %s, \"grads\": %s, \"optim\": %s, \"total\": %s}, ", J(f.params),
           J(f.grads), J(f.optim), J(f.params + f.grads + f.optim));
    printf("\"rest_bytes\": {\"params\": %zu, \"grads\": %zu, \"optim\": %zu, \"total\": %zu}, ",
           rest->peak[PTDP_MEM_PARAMS], rest->peak[PTDP_MEM_GRADS], rest->peak[PTDP_MEM_OPTIM],
           rest->peak[PTDP_MEM_PARAMS] + rest->peak[PTDP_MEM_GRADS] + rest->peak[PTDP_MEM_OPTIM]);
    printf("\"peak_bytes\": {\"params\": %zu, \"grads\": %zu, \"optim\": %zu, \"comm\": %zu, \"total\": %zu, "
           "\"acts\": %zu}, ", peak->peak[PTDP_MEM_PARAMS], peak->peak[PTDP_MEM_GRADS], peak->peak[PTDP_MEM_OPTIM],
           peak->peak[PTDP_MEM_COMM], peak->peak_total, peak->peak[PTDP_MEM_ACTS]);
    printf("\"states_match\": %s, ", match ? "true" : "false");
    printf("\"bf16_formula_bytes\": {\"params\": %s, \"grads\": %s, \"optim\": %s, \"total\": %s}, ", J(g.params),
           J(g.grads), J(g.optim), J(g.params + g.grads + g.optim));
    if (mb != NULL) {   /* --precision bf16, measured like float */
        const ptdp_mem_stats *br = &mb->rest[0];
        printf("\"bf16_rest_bytes\": {\"params\": %zu, \"grads\": %zu, \"optim\": %zu, \"total\": %zu}, ",
               br->peak[PTDP_MEM_PARAMS], br->peak[PTDP_MEM_GRADS], br->peak[PTDP_MEM_OPTIM],
               br->peak[PTDP_MEM_PARAMS] + br->peak[PTDP_MEM_GRADS] + br->peak[PTDP_MEM_OPTIM]);
        const ptdp_mem_stats *bp = &mb->peak[0];
        printf("\"bf16_peak_bytes\": {\"params\": %zu, \"grads\": %zu, \"optim\": %zu, \"comm\": %zu, "
               "\"total\": %zu, \"acts\": %zu}, ", bp->peak[PTDP_MEM_PARAMS], bp->peak[PTDP_MEM_GRADS],
               bp->peak[PTDP_MEM_OPTIM], bp->peak[PTDP_MEM_COMM], bp->peak_total, bp->peak[PTDP_MEM_ACTS]);
        printf("\"bf16_states_match\": %s, ", bmatch ? "true" : "false");
        printf("\"bf16_dp_bytes_per_step\": {\"formula\": %s, \"measured\": %s}, ", J(mb->dp_formula),
               J(mb->dp_sent));
    } else {
        printf("\"bf16_rest_bytes\": null, \"bf16_peak_bytes\": null, \"bf16_states_match\": null, "
               "\"bf16_dp_bytes_per_step\": null, ");
    }
    printf("\"dp_bytes_per_step\": {\"formula\": %s, \"measured\": %s}, ", J(m->dp_formula), J(m->dp_sent));
    printf("\"virtual_step_s\": {\"blocking\": %s, \"overlap\": %s}}\n", J(m->step_s),
           m->overlap_step_s >= 0 ? J(m->overlap_step_s) : "null");
}

/* ---- parse, validate, run ----------------------------------------------------- */


/* Its default model: the registry's first model of sequences (a transformer,
 * as the ZeRO paper's), else the registry's default. */
static bool of_sequences(const ptdp_model_caps *caps) { return caps->sequences; }

static const ptdp_model_ops *zero_model(void)
{
    const ptdp_model_ops *ops = ptdp_model_first_with(of_sequences);
    return ops != NULL ? ops : ptdp_model_at(0);
}

static void usage(void)
{
    ptdp_train_config d = ptdp_train_defaults();
    const ptdp_model_ops *own = zero_model();
    const ptdp_model_cli *cli = ptdp_model_cli_for(own);
    if (own != ptdp_model_of(&d.model) && cli->defaults != NULL)
        d.model = cli->defaults();   /* its default model, as parse's */
    d.model.ops = own;
    d.model.ffn = 0;
    char names[128];   /* its default first: gpt|mlp */
    int n = snprintf(names, sizeof names, "%s", own->name);
    for (int i = 0; i < ptdp_model_count() && n < (int)sizeof names; i++)
        if (ptdp_model_at(i) != own)
            n += snprintf(names + n, sizeof names - (size_t)n, "|%s", ptdp_model_at(i)->name);
    printf("usage: ptdp bench zero [--model %s] [--dp N] [--micro-batches M] [--batch B] [--steps S]\n"
           "                       [--profile P] [--json] [--watchdog S] [model flags]\n"
           "\n"
           "The ZeRO paper's memory table, measured: for --zero 0, 1, 2 and 3 the model states one\n"
           "device holds (params, grads, optim) by the formula and by its arena at rest, the peaks\n"
           "in training and what lives only for a moment (ZeRO-2's bucket, ZeRO-3's gathered units),\n"
           "the DP bytes per step against 2(N-1)/N S, (M+1)(N-1)/N S and 3M(N-1)/N S, and the\n"
           "virtual step time with and without --overlap.  The bf16 column is measured too, by the\n"
           "same runs under --precision bf16 (2 + 2 + 12 bytes, half the DP bytes); in ptdp-f64,\n"
           "which has no bf16, it is the formula only.\n"
           "Exit 1 if a persistent state or the DP bytes differ from the formula, in either precision.\n"
           "\n"
           "  --dp N              data-parallel devices, at least 2 (default 4)\n"
           "  --micro-batches M   micro-batches per device and step (default 2)\n"
           "  --batch B           global batch, divisible by N x M (default 64)\n"
           "  --steps S           training steps of each run (default 2)\n"
           "  --profile P         the virtual clock's cost model (default dgx-a100; ptdp train --profile list)\n"
           "  --json              one JSON object per stage instead of the tables\n"
           "  --watchdog S        fail if a collective waits longer than S seconds (default 60)\n"
           "model (default: --model %s, the %s of ptdp train):\n", names, own->name, ptdp_model_cli_noun(own));
    ptdp_model_flags_help(stdout, &d.model);
}

static int parse(int argc, char **argv, zero_cfg *c, ptdp_model_flags *mf)
{
    ptdp_train_config d = ptdp_train_defaults();
    memset(c, 0, sizeof *c);
    c->dp = 4;
    c->micro_batches = 2;
    c->batch = d.batch;
    c->steps = 2;
    c->watchdog_s = PTDP_DEFAULT_WATCHDOG_S;
    d.model.ffn = 0;
    ptdp_model_flags_init(mf, &d.model);
    mf->cfg.ops = zero_model();            /* unless --model says another */
    ptdp_args a;
    ptdp_args_init(&a, "bench zero", argc, argv, 1);
    while (ptdp_args_next(&a)) {
        int rc;
        if (ptdp_args_is(&a, "--help")) { usage(); return -1; }
        else if (ptdp_args_is(&a, "--dp")) rc = ptdp_args_int(&a, 2, PTDP_MAX_DEVICES, &c->dp);
        else if (ptdp_args_is(&a, "--micro-batches")) rc = ptdp_args_int(&a, 1, 1 << 10, &c->micro_batches);
        else if (ptdp_args_is(&a, "--batch")) rc = ptdp_args_int(&a, 1, 1 << 20, &c->batch);
        else if (ptdp_args_is(&a, "--steps")) rc = ptdp_args_int(&a, 1, 1000, &c->steps);
        else if (ptdp_args_is(&a, "--profile")) rc = ptdp_args_string(&a, &c->profile);
        else if (ptdp_args_is(&a, "--json")) rc = ptdp_args_switch(&a, &c->json);
        else if (ptdp_args_is(&a, "--watchdog")) rc = ptdp_args_double(&a, 0.1, 86400, &c->watchdog_s);
        else if (ptdp_model_flag_is(&a)) rc = ptdp_model_flag_read(&a, PTDP_FLAGS_BENCH, mf);
        else rc = ptdp_args_unknown(&a);
        if (rc)
            return PTDP_EXIT_USAGE;
    }
    if (a.status || ptdp_model_flags_finish("bench zero", mf) != 0)
        return PTDP_EXIT_USAGE;
    c->model = mf->cfg;
    return 0;
}

static ptdp_train_config train_config(const zero_cfg *c)
{
    ptdp_train_config t = ptdp_train_defaults();
    t.model = c->model;
    t.dp = c->dp;
    t.micro_batches = c->micro_batches;
    t.batch = c->batch;
    t.steps = c->steps;
    return t;
}

/* Every stage's run must be valid before the first one starts. */
static int validate(const zero_cfg *c, ptdp_launch_opts *o)
{
    if (c->profile != NULL && (o->profile = ptdp_profile_find(c->profile)) == NULL)
        return ptdp_usage_error("bench zero", "--profile %s: unknown (ptdp train --profile list names them)",
                                c->profile);
    ptdp_train_config t = train_config(c);
    char msg[PTDP_MSG_MAX];
    for (int z = 0; z < 4; z++) {
        t.zero = z;
        if (ptdp_train_validate(&t, msg, sizeof msg) != 0)
            return ptdp_usage_error("bench zero", "%s", msg);
    }
    return 0;
}

/* One precision's stage against the formula: states at rest, DP bytes.
 * false (and why on stderr) if either differs. */
static bool check_stage(const ptdp_zero_measure *m, int layers)
{
    char why[PTDP_MSG_MAX];
    bool ok = true;
    if (!ptdp_zero_states_match(m, layers, why, sizeof why)) {
        fprintf(stderr, "ptdp bench zero: %s: %s\n", m->prec.name, why);
        ok = false;
    }
    if (!ptdp_zero_bytes_match(m)) {
        fprintf(stderr, "ptdp bench zero: %s, --zero %d: %.0f DP bytes per step, the formula says %.0f\n",
                m->prec.name, m->stage, m->dp_sent, m->dp_formula);
        ok = false;
    }
    return ok;
}

static int run(const zero_cfg *c, const ptdp_launch_opts *o)
{
    const ptdp_train_config t = train_config(c);
    const ptdp_zero_precision *bf = ptdp_zero_precision_of("bf16");
    static ptdp_zero_measure m[4], mb[4];
    char msg[PTDP_MSG_MAX];
    int status = PTDP_EXIT_OK;
    for (int z = 0; z < 4; z++) {
        ptdp_progress("--zero %d: at rest, training, --overlap", z);
        int err = ptdp_zero_measure_stage(&t, o, ptdp_zero_precision_of(PTDP_REAL_NAME), z, &m[z], msg, sizeof msg);
        if (err == 0 && bf->measured) {
            ptdp_progress("--zero %d --precision bf16: at rest, training, --overlap", z);
            err = ptdp_zero_measure_stage(&t, o, bf, z, &mb[z], msg, sizeof msg);
        }
        if (err != 0) {
            ptdp_progress_done();
            fprintf(stderr, "ptdp bench zero: --zero %d: %s\n", z, msg);
            return PTDP_EXIT_FAIL;
        }
    }
    ptdp_progress_done();
    if (!c->json)
        print_header(c, m[0].psi, o);
    for (int z = 0; z < 4; z++) {
        bool match = check_stage(&m[z], c->model.layers);
        bool bmatch = !bf->measured || check_stage(&mb[z], c->model.layers);
        if (!match || !bmatch)
            status = PTDP_EXIT_FAIL;
        const ptdp_zero_measure *b = bf->measured ? &mb[z] : NULL;
        if (c->json)
            print_json(c, &m[z], match, b, bmatch, o);
        else
            print_stage(&m[z], match, b, bmatch);
    }
    return status;
}

int ptdp_bench_zero_cmd(int argc, char **argv)
{
    zero_cfg c;
    ptdp_model_flags mf;
    int rc = parse(argc, argv, &c, &mf);
    if (rc != 0)
        return rc < 0 ? PTDP_EXIT_OK : rc;
    ptdp_launch_opts o = { .watchdog_s = c.watchdog_s };
    if ((rc = validate(&c, &o)) == 0)
        rc = run(&c, &o);
    ptdp_model_flags_free(&mf);
    return rc;
}
