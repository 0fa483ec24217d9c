/*
 * gpt_moe_bench.c — `ptdp bench moe`: a dense GPT beside a mixture of
 * experts of the same ACTIVE size, at expert parallelism 1, 2 and 4, on the
 * virtual clock.
 *
 * Equal active size: the MoE replaces each MLP (F wide) by E experts of
 * F_e = F / k and sends every token to k of them, so a token meets
 *
 *   k x (2 C F_e + F_e + C)  =  2 C F + F + k C      expert parameters
 *   k x 2 C F_e              =  2 C F                its MLP's matrices (the same FLOPs)
 *
 * against the dense MLP's 2 C F + F + C.  Per MoE block the active count
 * differs from the dense one by the router, E C, and the k - 1 extra
 * output biases, (k - 1) C; the total holds all E experts:
 *
 *   active per token  = dense + L_moe (E C + (k - 1) C)
 *   total             = dense + L_moe (E C + E (2 C F_e + F_e + C) - (2 C F + F + C))
 *   per device, ep N  = dense + L_moe (E C + (E/N)(2 C F_e + F_e + C) - (2 C F + F + C))
 *
 * Bytes: expert parallelism borrows N of the dp ranks; each MoE block and
 * micro-batch exchanges the counts (one all_to_all of E/N int32 a pair)
 * and moves rows in four all-to-alls — dispatch and combine, forward and
 * backward (six under full recomputation, whose second forward dispatches
 * and combines again, and exchanges the counts again).  A rank holds T_r =
 * B T / (dp M) tokens of a micro-batch; under uniform routing (N-1)/N of
 * its k T_r choices go to experts held elsewhere (ep.h):
 *
 *   one all-to-all  ≈  k T_r C (N-1)/N  x e                (rows)
 *   per step        ≈  a L_moe M  x that   +   c L_moe M (N-1)(E/N) 4   (counts, exact)
 *                      a = 4 (6), c = 1 (2) under full recomputation
 *
 * and the ep group carries one more sum a step: the gradient norm's
 * squares of the experts, which each EP rank holds apart (one all-reduce
 * of a double, 2(N-1)/N 8 bytes).
 *
 *   dp 4, ep 2:  ep groups {0,1} {2,3}  (tokens dispatched within)
 *                edp groups {0,2} {1,3} (an expert's gradients summed over)
 *
 *     dense      ██ dp (every gradient)
 *     moe ep 1   ████ dp (the experts' gradients too: E/k times the MLP's)
 *     moe ep 2   █ dp (dense, router)  ██ edp (E/2 experts)  ▓▓ ep (rows)
 *     moe ep 4   █ dp                  (edp of 1: none)      ▓▓▓ ep
 *
 * Measured: each layout is a ptdp_train of S steps minus one of 0 steps
 * (the set-up), divided by S.  The virtual clock is a cost model, so one
 * run is exact and the same everywhere: no medians.  The routing is the
 * data's, so the rows a rank sends are the measured loads', not the
 * uniform estimate's; the table prints both and their ratio.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../args.h"
#include "../model_flags.h"
#include "gpt_moe_bench.h"
#include "gpt_moe_wall.h"
#include "ptdp/ep.h"
#include "ptdp/error.h"
#include "ptdp/gpt.h"
#include "ptdp/models.h"
#include "ptdp/train.h"

#define MAX_EPS 8

typedef struct {
    ptdp_model_config dense, moe;   /* moe: E experts, top-k, F_e = F / k */
    int dp, batch, micro_batches, steps;
    int eps[MAX_EPS], neps;
    bool recompute, recompute_core;
    const char *profile;
    double watchdog_s;
    bool batch_given;
    bool wall;                      /* --wall: one device's wall time instead */
    ptdp_moe_wall_opts w;
    const char *virtual_flag;       /* the first flag of the virtual tables given */
    char wall_flag[64];             /* ... and of the wall time's ("" none)    */
} bench;

/* ---- the formulas ------------------------------------------------------------ */

/* MoE blocks of the model. */
static int moe_blocks(const ptdp_model_config *m)
{
    int n = 0;
    for (int l = 0; l < m->layers; l++)
        n += ptdp_gpt_block_is_moe(m, l);
    return n;
}

/* One expert's parameters, the dense MLP's, a router's. */
static double expert_params(const ptdp_model_config *m)
{
    const double C = m->hidden, Fe = ptdp_gpt_moe_ffn(m);
    return 2 * C * Fe + Fe + C;
}

static double mlp_params(const ptdp_model_config *m)
{
    const double C = m->hidden, F = m->ffn;
    return 2 * C * F + F + C;
}

/* The MoE's parameters from the dense model's: `experts` of them held (E
 * for the whole model, E/N on a device, k active per token). */
static double moe_params(const bench *b, double dense, int experts)
{
    const ptdp_model_config *m = &b->moe;
    const double E = ptdp_gpt(m)->moe_experts;
    return dense + moe_blocks(m) * (E * m->hidden + experts * expert_params(m) - mlp_params(m));
}

/* Tokens a rank holds in a micro-batch, T_r = B T / (dp M). */
static long tokens_per_rank(const bench *b)
{
    return (long)(b->batch / (b->dp * b->micro_batches)) * ptdp_gpt(&b->moe)->seq_len;
}

/* Row all-to-alls and count exchanges per MoE block and micro-batch. */
static int row_exchanges(const bench *b) { return b->recompute ? 6 : 4; }
static int count_exchanges(const bench *b) { return b->recompute ? 2 : 1; }

/* The uniform estimate of the rows' bytes per device and step. */
static double rows_uniform(const bench *b, int N)
{
    const ptdp_gpt_settings *g = ptdp_gpt(&b->moe);
    return (double)row_exchanges(b) * moe_blocks(&b->moe) * b->micro_batches *
           ptdp_ep_uniform_bytes(g->moe_top_k, tokens_per_rank(b), b->moe.hidden, N, sizeof(ptdp_real));
}

/* The counts' bytes per device and step: exact. */
static double counts_bytes(const bench *b, int N)
{
    const int E = ptdp_gpt(&b->moe)->moe_experts;
    return (double)count_exchanges(b) * moe_blocks(&b->moe) * b->micro_batches * (N - 1) * (E / N) *
           (double)sizeof(int32_t);
}

/* ---- measuring one layout --------------------------------------------------------- */

/* What a device did over a whole run. */
typedef struct {
    double compute, comm, idle;       /* virtual seconds                     */
    double dp, edp, ep, total;        /* bytes sent in each group, and all   */
    double rows, counts, calls;       /* all_to_allv bytes, all_to_all bytes,
                                         all_to_allv calls                   */
    double params;                    /* parameter elements it holds         */
} device_totals;

typedef struct {
    device_totals dev[PTDP_MAX_DEVICES];
    double makespan;                  /* the steps' virtual times, summed    */
} run_totals;

static double group_sent(const ptdp_comm_stats *s, const char *name)
{
    for (int g = 0; g < s->ngroups; g++)
        if (strcmp(s->group[g].name, name) == 0)
            return s->group[g].sent;
    return 0;
}

static ptdp_train_config train_config(const bench *b, bool moe, int ep, int steps)
{
    ptdp_train_config t = ptdp_train_defaults();
    t.model = moe ? b->moe : b->dense;
    t.dp = b->dp;
    t.ep = moe ? ep : 1;
    t.batch = b->batch;
    t.micro_batches = b->micro_batches;
    t.steps = steps;
    t.recompute = b->recompute;
    t.recompute_core = b->recompute_core;
    return t;
}

static int run_once(const ptdp_train_config *c, const ptdp_launch_opts *base, run_totals *out, char *msg,
                    size_t msglen)
{
    ptdp_train_result res;
    ptdp_launch_result lr;
    memset(&res, 0, sizeof res);
    memset(&lr, 0, sizeof lr);
    memset(out, 0, sizeof *out);
    ptdp_launch_opts o = *base;
    o.result = &lr;
    int err = ptdp_train(c, &o, NULL, NULL, &res, msg, msglen);
    for (int d = 0; err == 0 && d < lr.world_size; d++) {
        const ptdp_device_summary *s = &lr.devices[d];
        out->dev[d] = (device_totals){
            .compute = s->clock.compute_s, .comm = s->clock.comm_s, .idle = s->clock.idle_s,
            .dp = group_sent(&s->comm, "dp"), .edp = group_sent(&s->comm, "edp"),
            .ep = group_sent(&s->comm, "ep"), .total = s->comm.total_sent,
            .rows = s->comm.bytes_sent[PTDP_COLL_ALL_TO_ALLV], .counts = s->comm.bytes_sent[PTDP_COLL_ALL_TO_ALL],
            .calls = (double)s->comm.calls[PTDP_COLL_ALL_TO_ALLV],
            .params = res.param_elements != NULL ? (double)res.param_elements[d] : 0 };
    }
    for (int s = 0; err == 0 && s < res.completed; s++)
        out->makespan += res.log[s].virtual_s;
    if (err != 0 && lr.message[0] != '\0')
        snprintf(msg, msglen, "%s", lr.message);
    ptdp_train_result_free(&res);
    ptdp_launch_result_free(&lr);
    return err;
}

/* One row of the tables: per step (S steps minus the set-up, over S), the
 * clock and bytes as means over the devices, the rows' spread. */
typedef struct {
    bool moe;
    int ep;
    double step_s, compute_s, comm_s, idle_s;
    double dp, edp, ep_bytes, other;
    double rows, rows_min, rows_max;
    double counts_min, counts_max, calls_min, calls_max;
    double params_min, params_max;
} layout;

static void reduce(const bench *b, const run_totals *set_up, const run_totals *run, layout *L)
{
    const double S = b->steps, n = b->dp;
    L->step_s = run->makespan / S;
    L->rows_min = L->counts_min = L->calls_min = L->params_min = 1e300;
    for (int d = 0; d < b->dp; d++) {
        const device_totals *z = &set_up->dev[d], *x = &run->dev[d];
        const double rows = (x->rows - z->rows) / S, counts = (x->counts - z->counts) / S;
        const double calls = (x->calls - z->calls) / S;
        L->compute_s += (x->compute - z->compute) / (S * n);
        L->comm_s += (x->comm - z->comm) / (S * n);
        L->idle_s += (x->idle - z->idle) / (S * n);
        L->dp += (x->dp - z->dp) / (S * n);
        L->edp += (x->edp - z->edp) / (S * n);
        L->ep_bytes += (x->ep - z->ep) / (S * n);
        L->other += ((x->total - x->dp - x->edp - x->ep) - (z->total - z->dp - z->edp - z->ep)) / (S * n);
        L->rows += rows / n;
        L->rows_min = rows < L->rows_min ? rows : L->rows_min;
        L->rows_max = rows > L->rows_max ? rows : L->rows_max;
        L->counts_min = counts < L->counts_min ? counts : L->counts_min;
        L->counts_max = counts > L->counts_max ? counts : L->counts_max;
        L->calls_min = calls < L->calls_min ? calls : L->calls_min;
        L->calls_max = calls > L->calls_max ? calls : L->calls_max;
        L->params_min = x->params < L->params_min ? x->params : L->params_min;
        L->params_max = x->params > L->params_max ? x->params : L->params_max;
    }
}

static int measure(const bench *b, const ptdp_launch_opts *o, bool moe, int ep, layout *L, char *msg,
                   size_t msglen)
{
    static run_totals set_up, run;   /* large: PTDP_MAX_DEVICES devices each */
    memset(L, 0, sizeof *L);
    L->moe = moe;
    L->ep = moe ? ep : 0;
    ptdp_train_config c0 = train_config(b, moe, ep, 0), c = train_config(b, moe, ep, b->steps);
    int err = run_once(&c0, o, &set_up, msg, msglen);
    if (err == 0)
        err = run_once(&c, o, &run, msg, msglen);
    if (err == 0)
        reduce(b, &set_up, &run, L);
    return err;
}

/* ---- the exact counts, checked ------------------------------------------------------ */

/* Parameters per device, all-to-alls a step and the counts' bytes against
 * their formulas; false (why on stderr) if one differs. */
static bool check_layout(const bench *b, const layout *L, double dense)
{
    const int E = ptdp_gpt(&b->moe)->moe_experts, N = L->ep;
    const double want_params = L->moe ? moe_params(b, dense, E / N) : dense;
    const double want_calls = L->moe && N > 1 ? (double)row_exchanges(b) * moe_blocks(&b->moe) * b->micro_batches : 0;
    const double want_counts = L->moe ? counts_bytes(b, N) : 0;
    bool ok = true;
    if (L->params_min != want_params || L->params_max != want_params) {
        fprintf(stderr, "ptdp bench moe: ep %d: %.0f..%.0f parameters a device, the formula says %.0f\n", N,
                L->params_min, L->params_max, want_params);
        ok = false;
    }
    if (L->calls_min != want_calls || L->calls_max != want_calls) {
        fprintf(stderr, "ptdp bench moe: ep %d: %g..%g all-to-alls of rows a step, the formula says %g\n", N,
                L->calls_min, L->calls_max, want_calls);
        ok = false;
    }
    if (L->counts_min != want_counts || L->counts_max != want_counts) {
        fprintf(stderr, "ptdp bench moe: ep %d: %g..%g bytes of counts a step, the formula says %g\n", N,
                L->counts_min, L->counts_max, want_counts);
        ok = false;
    }
    return ok;
}

/* ---- printing ------------------------------------------------------------------------ */

static void print_header(const bench *b, const ptdp_launch_opts *o, double dense)
{
    const ptdp_model_config *m = &b->moe;
    const ptdp_gpt_settings *g = ptdp_gpt(m);
    const int E = g->moe_experts, k = g->moe_top_k, Lm = moe_blocks(m);
    const ptdp_profile *prof = o->profile ? o->profile : ptdp_profile_default();
    printf("ptdp bench moe (%s): gpt, V %d (padded to %d), T %d, C %d, %d heads, %d layers, F %d\n",
           PTDP_REAL_NAME, g->vocab, g->vocab_padded, g->seq_len, m->hidden, g->heads, m->layers, m->ffn);
    printf("  batch %d, dp %d, M = %d micro-batch%s, %d step%s a run, recompute %s, profile %s\n", b->batch, b->dp,
           b->micro_batches, b->micro_batches == 1 ? "" : "es", b->steps, b->steps == 1 ? "" : "s",
           b->recompute ? "full" : b->recompute_core ? "selective" : "none", prof->name);
    printf("  dense:  the MLP, F = %d, in every block                parameters %.0f, active per token %.0f\n",
           m->ffn, dense, dense);
    printf("  MoE:    E = %d experts, top-k %d, F_e = F / k = %d, in %d of %d blocks  parameters %.0f, active per "
           "token %.0f\n", E, k, ptdp_gpt_moe_ffn(m), Lm, m->layers, moe_params(b, dense, E), moe_params(b, dense, k));
    printf("  equal:  a token's expert matrices, k x 2 C F_e = 2 C F = %.0f a MoE block (the MLP's FLOPs);\n"
           "          active - dense = L_moe (E + k - 1) C = %.0f (the router E C, k - 1 more output biases);\n"
           "          total - dense = L_moe (E C + E (2 C F_e + F_e + C) - (2 C F + F + C)) = %.0f (all E experts)\n",
           2.0 * m->hidden * m->ffn, (double)Lm * (E + k - 1) * m->hidden, moe_params(b, 0, E));
    printf("  virtual clock: a cost model, the same on every run, so one run a layout (no medians);\n"
           "  per step = (run of %d steps - run of 0 steps) / %d, means over the %d devices\n", b->steps, b->steps,
           b->dp);
}

static void layout_name(const layout *L, char *buf, size_t n)
{
    if (!L->moe)
        snprintf(buf, n, "dense");
    else
        snprintf(buf, n, "moe ep %d", L->ep);
}

static void print_time(const layout *Ls, int n)
{
    printf("\nvirtual step (us)                                      params a device\n");
    printf("  %-10s %10s %10s %10s %10s %14s\n", "layout", "step", "compute", "comm", "idle", "(elements)");
    for (int i = 0; i < n; i++) {
        char name[32];
        layout_name(&Ls[i], name, sizeof name);
        printf("  %-10s %10.2f %10.2f %10.2f %10.2f %14.0f\n", name, Ls[i].step_s * 1e6, Ls[i].compute_s * 1e6,
               Ls[i].comm_s * 1e6, Ls[i].idle_s * 1e6, Ls[i].params_max);
    }
}

static void print_bytes(const bench *b, const layout *Ls, int n)
{
    printf("\nbytes sent a device and step (mean over devices), by group; the ep group's = counts + rows + norm\n");
    printf("  %-10s %10s %10s %10s %8s %10s %5s %8s  %-21s %12s %8s\n", "layout", "dp", "edp", "ep", "counts", "rows",
           "norm", "other", "rows min..max", "uniform", "ratio");
    for (int i = 0; i < n; i++) {
        const layout *L = &Ls[i];
        char name[32], spread[48];
        layout_name(L, name, sizeof name);
        const int N = L->moe ? L->ep : 1;
        const double uni = L->moe ? rows_uniform(b, N) : 0;
        snprintf(spread, sizeof spread, "%.0f..%.0f", L->rows_min, L->rows_max);
        printf("  %-10s %10.0f %10.0f %10.0f %8.0f %10.0f %5.0f %8.0f  %-21s %12.0f ", name, L->dp, L->edp,
               L->ep_bytes, L->counts_max, L->rows, L->ep_bytes - L->counts_max - L->rows, L->other, spread, uni);
        if (uni > 0)
            printf("%8.3f\n", L->rows / uni);
        else
            printf("%8s\n", "-");
    }
}

static void print_formula(const bench *b)
{
    const ptdp_gpt_settings *g = ptdp_gpt(&b->moe);
    const int a = row_exchanges(b), c = count_exchanges(b);
    printf("\nuniform = a L_moe M k T_r C (N-1)/N e: a = %d all-to-alls of rows a MoE block and micro-batch "
           "(dispatch, combine;\n  forward, backward%s), L_moe = %d, M = %d, k = %d, T_r = B T / (dp M) = %ld "
           "tokens a rank, C = %d, e = %zu bytes\n", a, b->recompute ? "; the recomputed forward" : "",
           moe_blocks(&b->moe), b->micro_batches, g->moe_top_k, tokens_per_rank(b), b->moe.hidden,
           sizeof(ptdp_real));
    printf("counts = %d L_moe M (N-1)(E / N) 4 bytes (one all_to_all of E / N int32 a pair%s), exact\n", c,
           b->recompute ? ", again in the recomputed forward" : "");
    printf("rows: measured, the routed loads' (k T_r choices, (N-1)/N of them away only if routing were "
           "uniform);\n  norm: the gradient norm's sum of the experts' squares over ep, one all-reduce of a double, 2(N-1)/N 8;\n"
           "  other: the bytes of every other group; ratio: rows / uniform\n");
}

/* ---- flags ------------------------------------------------------------------------------ */

static void usage(void)
{
    printf("usage: ptdp bench moe [--ep N,…] [--dp D] [--batch B] [--micro-batches M] [--steps S]\n"
           "                      [--recompute none|full|selective] [--profile P] [--watchdog S] [model flags]\n"
           "       ptdp bench moe --wall [--rounds R] [--warmup W] [--timed S] [--batch B] [model flags]\n"
           "\n"
           "A dense GPT beside a mixture of experts with the same active parameters per token (E experts\n"
           "of F_e = F/k, top-k: a token's k x 2 C F_e expert matrices equal the MLP's 2 C F), trained\n"
           "on the virtual clock at each expert-parallel size: the step's time (compute, communication,\n"
           "idle), the parameters a device holds, the bytes each device sends a step in its dp, edp\n"
           "(expert-data-parallel) and ep groups, and the EP all-to-alls' bytes beside the uniform-\n"
           "routing estimate k T_r C (N-1)/N x element, times 4 all-to-alls a MoE block and micro-batch\n"
           "(6 under --recompute full), plus the counts.  The virtual clock is deterministic: one run\n"
           "a layout, no medians.  Exit 1 if the parameters, the all-to-alls or the counts' bytes\n"
           "differ from their formulas.\n"
           "\n"
           "  --ep N,…        expert-parallel sizes, each dividing --dp and E (default 1,2,4)\n"
           "  --dp D          data-parallel devices, EP borrowed from them (default 4)\n"
           "  --batch B       global batch, divisible by D x M (default %d)\n"
           "  --micro-batches M  per device and step (default 1)\n"
           "  --steps S       training steps a run (default 2)\n"
           "  --recompute R   none (default), full (6 all-to-alls, counts twice) or selective\n"
           "  --profile P     the virtual clock's cost model (default dgx-a100; ptdp train --profile list)\n"
           "  --watchdog S    fail if a collective waits longer than S seconds (default 60)\n"
           "  --wall          instead: ONE device's training step in wall time, the dense GPT beside the\n"
           "                  mixture, runs alternating (dense, MoE; then MoE, dense …), each W warm-up steps\n"
           "                  then the median of S timed; the median over R rounds, the rounds' ratio\n"
           "                  MoE / dense beside the targets, and where the step's time goes (trace events:\n"
           "                  blocks forward, backward, embedding and head, optimizer, rest).  Its defaults:\n"
           "                  --hidden 256 --layers 4 --seq-len 128 --batch 16; wall time is noisy on a\n"
           "                  shared machine: read the ratio, not the milliseconds\n"
           "  --rounds R --warmup W --timed S   --wall's (default 3, 2, 3)\n"
           "  --moe-experts E --moe-top-k k   the mixture (default 8, 2); --moe-every, --moe-capacity-factor,\n"
           "                  --moe-aux-loss as ptdp train's; --moe-ffn is the bench's: F/k\n"
           "model (the GPT of ptdp train):\n",
           ptdp_train_defaults().batch);
    ptdp_model_config d = ptdp_gpt_default_config();
    d.ffn = 0;
    ptdp_model_flags_help(stdout, &d);
}

static int read_recompute(ptdp_args *a, bench *b)
{
    static const char *const modes[] = { "none", "full", "selective" };
    int k = 0, rc = ptdp_args_enum(a, modes, 3, &k);
    b->recompute = k == 1;
    b->recompute_core = k == 2;
    return rc;
}

/* --ep N,…: at most MAX_EPS group sizes, each 1..PTDP_MAX_DEVICES. */
static int read_eps(ptdp_args *a, bench *b)
{
    const char *text;
    int rc = ptdp_args_string(a, &text);
    b->neps = 0;
    for (const char *p = text; rc == 0; p++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || (*end != ',' && *end != '\0') || v < 1 || v > PTDP_MAX_DEVICES || b->neps == MAX_EPS)
            return ptdp_usage_error("bench moe", "--ep %s: a list of at most %d sizes, each 1 to %d (1,2,4)", text,
                                    MAX_EPS, PTDP_MAX_DEVICES);
        b->eps[b->neps++] = (int)v;
        if (*end == '\0')
            break;
        p = end;
    }
    return rc;
}

/* --wall and its flags; true if the current flag was one (rc its status). */
static bool wall_flag(ptdp_args *a, bench *b, int *rc)
{
    int *value = ptdp_args_is(a, "--rounds") ? &b->w.rounds : ptdp_args_is(a, "--warmup") ? &b->w.warmup
                 : ptdp_args_is(a, "--timed") ? &b->w.timed : NULL;
    if (ptdp_args_is(a, "--wall")) {
        b->wall = true;
        *rc = 0;
        return true;
    }
    if (value == NULL)
        return false;
    if (b->wall_flag[0] == '\0')
        snprintf(b->wall_flag, sizeof b->wall_flag, "%s", a->flag);
    *rc = ptdp_args_int(a, value == &b->w.warmup ? 0 : 1, value == &b->w.rounds ? 99 : 100, value);
    return true;
}

/* The first flag given that only the virtual tables read. */
static void note_virtual(const ptdp_args *a, bench *b)
{
    static const char *const flags[] = { "--ep", "--dp", "--micro-batches", "--steps", "--recompute", "--profile" };
    for (size_t i = 0; b->virtual_flag == NULL && i < sizeof flags / sizeof flags[0]; i++)
        if (ptdp_args_is(a, flags[i]))
            b->virtual_flag = flags[i];
}

static int read_flags(int argc, char **argv, bench *b, ptdp_model_flags *mf)
{
    ptdp_args a;
    ptdp_args_init(&a, "bench moe", argc, argv, 1);
    while (ptdp_args_next(&a)) {
        int rc;
        note_virtual(&a, b);
        if (ptdp_args_is(&a, "--help")) { usage(); return -1; }
        else if (wall_flag(&a, b, &rc)) ;
        else if (ptdp_args_is(&a, "--ep")) rc = read_eps(&a, b);
        else if (ptdp_args_is(&a, "--dp")) rc = ptdp_args_int(&a, 1, PTDP_MAX_DEVICES, &b->dp);
        else if (ptdp_args_is(&a, "--batch")) rc = ptdp_args_int(&a, 1, 1 << 20, &b->batch), b->batch_given = true;
        else if (ptdp_args_is(&a, "--micro-batches")) rc = ptdp_args_int(&a, 1, 1 << 10, &b->micro_batches);
        else if (ptdp_args_is(&a, "--steps")) rc = ptdp_args_int(&a, 1, 1000, &b->steps);
        else if (ptdp_args_is(&a, "--recompute")) rc = read_recompute(&a, b);
        else if (ptdp_args_is(&a, "--profile")) rc = ptdp_args_string(&a, &b->profile);
        else if (ptdp_args_is(&a, "--watchdog")) rc = ptdp_args_double(&a, 0.1, 86400, &b->watchdog_s);
        else if (ptdp_model_flag_is(&a)) rc = ptdp_model_flag_read(&a, PTDP_FLAGS_BENCH, mf);
        else rc = ptdp_args_unknown(&a);
        if (rc)
            return PTDP_EXIT_USAGE;
    }
    if (a.status != 0)
        return PTDP_EXIT_USAGE;
    if (b->wall && b->virtual_flag != NULL)
        return ptdp_usage_error("bench moe", "%s: a flag of the virtual tables; --wall times one device "
                                "(drop one of them)", b->virtual_flag);
    if (!b->wall && b->wall_flag[0] != '\0')
        return ptdp_usage_error("bench moe", "%s: a flag of --wall (add --wall, or drop it)", b->wall_flag);
    return 0;
}

/* The MoE as the bench wants it, and its dense twin. */
static int settle_models(bench *b, ptdp_model_flags *mf)
{
    if (ptdp_model_of(&mf->cfg) != &ptdp_gpt_ops)
        return ptdp_usage_error("bench moe", "--model %s: a mixture of experts is the GPT's (--model gpt)",
                                ptdp_model_name(&mf->cfg));
    if (ptdp_model_flags_given(mf, "--moe-ffn"))
        return ptdp_usage_error("bench moe", "--moe-ffn: the bench sets it to F/k, the dense MLP's --ffn over "
                                "--moe-top-k (equal active parameters)");
    mf->seed = ptdp_train_defaults().seed;
    if (ptdp_model_flags_finish("bench moe", mf) != 0)
        return PTDP_EXIT_USAGE;
    ptdp_gpt_settings *g = ptdp_gpt(&mf->cfg);
    if (g->moe_experts >= 1 && moe_blocks(&mf->cfg) == 0)
        return ptdp_usage_error("bench moe", "--moe-every %d with --layers %d: no block is a mixture of experts",
                                g->moe_every, mf->cfg.layers);
    if (g->moe_experts < 1)
        return ptdp_usage_error("bench moe", "--moe-experts %d: the bench compares a mixture of experts with "
                                "the dense GPT (at least 1 expert)", g->moe_experts);
    if (mf->cfg.ffn % g->moe_top_k != 0)
        return ptdp_usage_error("bench moe", "--ffn %d: must divide by --moe-top-k %d (an expert is F/k wide)",
                                mf->cfg.ffn, g->moe_top_k);
    g->moe_ffn = mf->cfg.ffn / g->moe_top_k;
    b->moe = mf->cfg;
    b->dense = mf->cfg;
    ptdp_gpt(&b->dense)->moe_experts = 0;
    ptdp_gpt(&b->dense)->moe_ffn = 0;
    return 0;
}

/* Every run valid before the first starts. */
static int validate(const bench *b, ptdp_launch_opts *o)
{
    char msg[PTDP_MSG_MAX];
    const int E = ptdp_gpt(&b->moe)->moe_experts;
    if (b->profile != NULL && (o->profile = ptdp_profile_find(b->profile)) == NULL)
        return ptdp_usage_error("bench moe", "--profile %s: unknown (ptdp train --profile list names them)",
                                b->profile);
    for (int i = 0; i < b->neps; i++) {
        if (b->dp % b->eps[i] != 0 || E % b->eps[i] != 0)
            return ptdp_usage_error("bench moe", "--ep %d: must divide --dp %d and --moe-experts %d", b->eps[i],
                                    b->dp, E);
        for (int j = 0; j < i; j++)
            if (b->eps[j] == b->eps[i])
                return ptdp_usage_error("bench moe", "--ep %d: given twice", b->eps[i]);
    }
    ptdp_train_config t = train_config(b, false, 1, b->steps);
    if (ptdp_train_validate(&t, msg, sizeof msg) != 0)
        return ptdp_usage_error("bench moe", "%s", msg);
    for (int i = 0; i < b->neps; i++) {
        t = train_config(b, true, b->eps[i], b->steps);
        if (ptdp_train_validate(&t, msg, sizeof msg) != 0)
            return ptdp_usage_error("bench moe", "%s", msg);
    }
    return 0;
}

static int parse(int argc, char **argv, bench *b, ptdp_model_flags *mf)
{
    memset(b, 0, sizeof *b);
    b->dp = 4;
    b->batch = ptdp_train_defaults().batch;
    b->micro_batches = 1;
    b->steps = 2;
    b->watchdog_s = PTDP_DEFAULT_WATCHDOG_S;
    ptdp_model_config d = ptdp_gpt_default_config();
    d.ffn = 0;
    ptdp_gpt(&d)->moe_experts = 8;
    ptdp_gpt(&d)->moe_top_k = 2;
    b->w = (ptdp_moe_wall_opts){ .batch = 16, .warmup = 2, .timed = 3, .rounds = 3 };
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--wall") == 0) {   /* its own defaults: the measured shape */
            d.hidden = 256;
            d.layers = 4;
            ptdp_gpt(&d)->seq_len = 128;
        }
    ptdp_model_flags_init(mf, &d);
    int rc = read_flags(argc, argv, b, mf);
    if (rc == 0 && b->neps == 0) {
        static const int eps[] = { 1, 2, 4 };
        b->neps = 3;
        memcpy(b->eps, eps, sizeof eps);
    }
    return rc != 0 ? rc : settle_models(b, mf);
}

/* ---- the command ---------------------------------------------------------------------- */

static int run(const bench *b, const ptdp_launch_opts *o)
{
    static layout Ls[MAX_EPS + 1];
    char msg[PTDP_MSG_MAX] = "";
    int n = 0;
    bool ok = true;
    int err = measure(b, o, false, 1, &Ls[n++], msg, sizeof msg);
    for (int i = 0; err == 0 && i < b->neps; i++)
        err = measure(b, o, true, b->eps[i], &Ls[n++], msg, sizeof msg);
    if (err != 0) {
        fprintf(stderr, "ptdp bench moe: %s: %s\n", n == 1 ? "dense" : "moe", msg);
        return PTDP_EXIT_FAIL;
    }
    const double dense = Ls[0].params_max;
    for (int i = 0; i < n; i++)
        ok = check_layout(b, &Ls[i], dense) && ok;
    print_header(b, o, dense);
    print_time(Ls, n);
    print_bytes(b, Ls, n);
    print_formula(b);
    return ok ? PTDP_EXIT_OK : PTDP_EXIT_FAIL;
}

/* --wall: one device, dense beside MoE in wall time (gpt_moe_wall.c). */
static int run_wall(bench *b)
{
    char msg[PTDP_MSG_MAX];
    b->w.watchdog_s = b->watchdog_s;
    if (b->batch_given)
        b->w.batch = b->batch;
    if (ptdp_moe_wall_validate(&b->dense, &b->moe, &b->w, msg, sizeof msg) != 0)
        return ptdp_usage_error("bench moe", "--wall: %s", msg);
    return ptdp_moe_wall(&b->dense, &b->moe, &b->w);
}

int ptdp_gpt_bench_moe(int argc, char **argv)
{
    bench b;
    ptdp_model_flags mf;
    int rc = parse(argc, argv, &b, &mf);
    if (rc == 0 && b.wall)
        rc = run_wall(&b);
    else if (rc == 0) {
        ptdp_launch_opts o = { .watchdog_s = b.watchdog_s };
        if ((rc = validate(&b, &o)) == 0)
            rc = run(&b, &o);
    }
    ptdp_model_flags_free(&mf);
    return rc < 0 ? PTDP_EXIT_OK : rc;
}
