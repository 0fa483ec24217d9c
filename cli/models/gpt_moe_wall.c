/*
 * gpt_moe_wall.c — `ptdp bench moe --wall`: the wall time of one device's
 * training step, the dense GPT beside the mixture of the same ACTIVE FLOPs.
 *
 * The virtual clock prices a MoE step as the dense one (k x 2 C F_e = 2 C F
 * a token), so any gap between them is the CPU's: the router, its top-k and
 * gates, the permutation of rows into expert order, E small GEMMs instead
 * of one large one, the combine.  This measures that gap on this machine:
 *
 *   round r:   dense run  ─ moe run      (round r+1: moe first, then dense:
 *              w warm-up steps, then       slow drift of a shared machine
 *              s timed steps each          falls on both alike)
 *
 *   a run's step  = median of its s timed steps' wall time (one device)
 *   a model's     = median over the rounds (the table's last row)
 *   ratio         = the median of the rounds' moe / dense     the target: <= 1.08 at E 8 top 2,
 *                                      <= 1.12 at E 64 top 8 (F_e = F / k)
 *
 * Wall time is noisy on a shared machine: only the ratio, measured within
 * one run with the models alternating, means anything; the absolute
 * milliseconds are printed to show the noise (each round's ratio too).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../args.h"
#include "gpt_moe_wall.h"
#include "ptdp/error.h"
#include "ptdp/gpt.h"
#include "ptdp/trace.h"
#include "ptdp/train.h"

#define MAX_TIMED 1000

/* Where a step's wall time goes: the trace's compute events by name. */
enum { PART_FWD, PART_BWD, PART_ENDS, PART_OPT, PART_REST, PARTS };
static const char *const part_name[PARTS] = { "blocks forward", "blocks backward", "embedding, head",
                                              "optimizer", "rest (between events)" };

static int part_of(const char *name)
{
    if (strncmp(name, "block ", 6) == 0)
        return strstr(name, "fwd") != NULL ? PART_FWD : PART_BWD;
    if (strncmp(name, "embed", 5) == 0 || strncmp(name, "head", 4) == 0)
        return PART_ENDS;
    return strcmp(name, "optimizer") == 0 ? PART_OPT : PART_REST;
}

/* Sum device 0's compute events into parts, step by step (a step ends
 * with its optimizer event), over the timed steps; the rest is each timed
 * step's wall time less its events'.  Adds the means a timed step to
 * part[]. */
static void add_parts(const ptdp_trace *t, const ptdp_moe_wall_opts *o, const ptdp_train_result *res, double *part)
{
    const ptdp_trace_event *e = ptdp_trace_events(t);
    const size_t n = ptdp_trace_count(t);
    int step = 0;
    double events = 0;
    for (size_t i = 0; i < n && step < o->warmup + o->timed; i++) {
        if (strcmp(e[i].cat, "compute") != 0 || e[i].track != 0)
            continue;
        const int p = part_of(e[i].name);
        if (step >= o->warmup) {
            part[p] += (e[i].w1 - e[i].w0) / o->timed;
            events += e[i].w1 - e[i].w0;
        }
        step += p == PART_OPT;
    }
    for (int s = o->warmup; s < o->warmup + o->timed; s++)
        part[PART_REST] += res->log[s].wall_s / o->timed;
    part[PART_REST] -= events / o->timed;
}

static int by_value(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of n values (sorted in place): the mean of the middle two
 * when n is even. */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One run of w + s steps on one device: the median of its timed steps. */
static int one_run(const ptdp_model_config *m, const ptdp_moe_wall_opts *o, double *step_s, double *part, char *msg,
                   size_t len)
{
    static double t[MAX_TIMED];
    ptdp_train_config c = ptdp_train_defaults();
    c.model = *m;
    c.batch = o->batch;
    c.steps = o->warmup + o->timed;
    ptdp_train_result res;
    ptdp_launch_result lr;
    memset(&res, 0, sizeof res);
    memset(&lr, 0, sizeof lr);
    ptdp_launch_opts lo = { .watchdog_s = o->watchdog_s, .result = &lr, .keep_traces = 1 };
    int err = ptdp_train(&c, &lo, NULL, NULL, &res, msg, len);
    if (err == 0 && res.completed != c.steps)
        err = PTDP_EINVAL, snprintf(msg, len, "%d of %d steps completed", res.completed, c.steps);
    for (int s = 0; err == 0 && s < o->timed; s++)
        t[s] = res.log[o->warmup + s].wall_s;
    if (err == 0 && lr.traces != NULL && lr.traces[0] != NULL)
        add_parts(lr.traces[0], o, &res, part);
    if (err == 0)
        *step_s = median(t, o->timed);
    else if (lr.message[0] != '\0')
        snprintf(msg, len, "%s", lr.message);
    ptdp_train_result_free(&res);
    ptdp_launch_result_free(&lr);
    return err;
}

int ptdp_moe_wall_validate(const ptdp_model_config *dense, const ptdp_model_config *moe, const ptdp_moe_wall_opts *o,
                           char *msg, size_t len)
{
    const ptdp_model_config *m[2] = { dense, moe };
    for (int i = 0; i < 2; i++) {
        ptdp_train_config c = ptdp_train_defaults();
        c.model = *m[i];
        c.batch = o->batch;
        c.steps = o->warmup + o->timed;
        if (ptdp_train_validate(&c, msg, len) != 0)
            return PTDP_EINVAL;
    }
    return 0;
}

static void print_header(const ptdp_model_config *moe, const ptdp_moe_wall_opts *o)
{
    const ptdp_gpt_settings *g = ptdp_gpt(moe);
    printf("ptdp bench moe --wall (%s): one device's training step in wall time, gpt, V %d, T %d, C %d, "
           "%d heads, %d layers, F %d, batch %d\n", PTDP_REAL_NAME, g->vocab_padded, g->seq_len, moe->hidden, g->heads,
           moe->layers, moe->ffn, o->batch);
    printf("  dense: the MLP, F = %d;  MoE: E = %d experts of F_e = F / k = %d, top-k %d (equal active FLOPs:\n"
           "  k x 2 C F_e = 2 C F a token)\n", moe->ffn, g->moe_experts, g->moe_ffn, g->moe_top_k);
    printf("  %d round%s, dense and MoE alternating (rounds 2, 4, … MoE first); a run: %d warm-up step%s, then the\n"
           "  median of %d timed; a model: the median over the rounds; only the ratio means anything on a\n"
           "  shared machine\n\n", o->rounds, o->rounds == 1 ? "" : "s", o->warmup, o->warmup == 1 ? "" : "s",
           o->timed);
    printf("  %-6s %12s %12s %8s\n", "round", "dense (ms)", "moe (ms)", "ratio");
}

static void print_result(const ptdp_model_config *moe, double dense_s, double moe_s, double ratio)
{
    const ptdp_gpt_settings *g = ptdp_gpt(moe);
    printf("  %-6s %12.3f %12.3f %8.3f\n", "median", dense_s * 1e3, moe_s * 1e3, moe_s / dense_s);
    printf("\nmoe / dense = %.3f, the median of the rounds' ratios   (targets: <= 1.08 at E 8 top 2, <= 1.12 at E 64 top 8; this run E %d top %d)\n",
           ratio, g->moe_experts, g->moe_top_k);
}

/* The parts' means over the rounds, dense beside MoE. */
static void print_parts(const double *dense, const double *moe, int rounds)
{
    printf("\nwhere a step's wall time goes (ms, device 0's trace events by name; means over the timed steps and\n"
           "the rounds; an event runs from the end of the one before, so each part also holds the work\n"
           "just before it — the combine falls in the next block's or the head's)\n");
    printf("  %-22s %10s %10s %12s\n", "part", "dense", "moe", "moe - dense");
    double sd = 0, sm = 0;
    for (int p = 0; p < PARTS; p++) {
        sd += dense[p] / rounds;
        sm += moe[p] / rounds;
        printf("  %-22s %10.3f %10.3f %12.3f\n", part_name[p], dense[p] / rounds * 1e3, moe[p] / rounds * 1e3,
               (moe[p] - dense[p]) / rounds * 1e3);
    }
    printf("  %-22s %10.3f %10.3f %12.3f\n", "step (mean)", sd * 1e3, sm * 1e3, (sm - sd) * 1e3);
}

int ptdp_moe_wall(const ptdp_model_config *dense, const ptdp_model_config *moe, const ptdp_moe_wall_opts *o)
{
    static double d[MAX_TIMED], m[MAX_TIMED], q[MAX_TIMED];
    double dp[PARTS] = { 0 }, mp[PARTS] = { 0 };
    char msg[PTDP_MSG_MAX] = "";
    print_header(moe, o);
    for (int r = 0; r < o->rounds; r++) {
        const bool moe_first = r % 2 == 1;
        int err = moe_first ? one_run(moe, o, &m[r], mp, msg, sizeof msg)
                            : one_run(dense, o, &d[r], dp, msg, sizeof msg);
        if (err == 0)
            err = moe_first ? one_run(dense, o, &d[r], dp, msg, sizeof msg)
                            : one_run(moe, o, &m[r], mp, msg, sizeof msg);
        if (err != 0) {
            fflush(stdout);
            fprintf(stderr, "ptdp bench moe --wall: round %d: %s\n", r + 1, msg);
            return PTDP_EXIT_FAIL;
        }
        q[r] = m[r] / d[r];
        printf("  %-6d %12.3f %12.3f %8.3f\n", r + 1, d[r] * 1e3, m[r] * 1e3, q[r]);
    }
    const double ratio = median(q, o->rounds), dense_s = median(d, o->rounds), moe_s = median(m, o->rounds);
    print_result(moe, dense_s, moe_s, ratio);
    print_parts(dp, mp, o->rounds);
    return PTDP_EXIT_OK;
}
