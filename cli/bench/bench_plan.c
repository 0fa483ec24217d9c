/*
 * bench_plan.c — `ptdp bench plan`: how fast the planner searches.
 *
 * The target: every layout of the PTD-P paper's 1-trillion-parameter GPT
 * (Narayanan et al. 2021, table 1: 128 layers, hidden 25600, 160 heads,
 * seq-len 2048, vocab 51200, batch 3072) on 3072 GPUs of DGX A100 80 GB in
 * at most 5 s on one core.  The search is one thread, so the wall time of
 * one search is its time on one core:
 *
 *     layouts/s = layouts considered / seconds (wall)
 *
 * with the process's CPU time beside it (on a loaded machine, the one-core
 * time), beside the counts (considered, valid, fitting, timed: the pruning's
 * effect, plan_search.c) and the best layout found, for the 1T model and
 * smaller ones of the same paper: table 1's 18B on 256 GPUs and 145B on
 * 1536, and GPT-3's 175B on 768 (its ZeRO-3 comparison, batch 1536).
 * --repeat R keeps the fastest of R runs, as timing on a shared machine
 * should.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../args.h"
#include "../plan_print.h"
#include "bench.h"
#include "ptdp/arena.h"
#include "ptdp/error.h"
#include "ptdp/json.h"
#include "../model_flags.h"

typedef struct {
    const char *name;
    int layers, hidden, heads, seq_len, vocab;
    long long batch;
    int gpus;
} plan_case;

/* Narayanan et al. 2021, table 1 (weak scaling) and the ZeRO-3 comparison
 * (GPT-3 175B): the model, its batch and its GPUs, at seq-len 2048 and
 * vocab 51200. */
static const plan_case cases[] = {
    { "18B",  40,  6144,  48, 2048, 51200, 1024,  256 },
    { "145B", 80, 12288,  96, 2048, 51200, 1536, 1536 },
    { "175B", 96, 12288,  96, 2048, 51200, 1536,  768 },
    { "1T",  128, 25600, 160, 2048, 51200, 3072, 3072 },
};

/* Wall time, and this process's CPU time: on a loaded machine the two
 * differ, and the CPU time is the one-core time. */
static double now_s(clockid_t which)
{
    struct timespec t;
    clock_gettime(which, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void usage(void)
{
    printf("usage: ptdp bench plan [--profile P] [--device-mem SIZE] [--repeat R] [--top K] [--json]\n"
           "\n"
           "Time `ptdp plan`'s search (one thread, so one core) on the PTD-P paper's models:\n"
           "18B on 256 GPUs, 145B on 1536, 175B on 768 and 1T on 3072 (the target: <= 5 s).\n"
           "\n"
           "  --profile P        the cluster (default dgx-a100-80g)\n"
           "  --device-mem SIZE  memory of one GPU (default: the profile's)\n"
           "  --repeat R         runs per model; the fastest is kept (default 3)\n"
           "  --top K            the layouts ranked (default 10, as ptdp plan)\n"
           "  --json             one JSON object per model\n");
}

int ptdp_bench_plan_cmd(int argc, char **argv)
{
    const char *profile = "dgx-a100-80g";
    size_t mem = 0;
    int repeat = 3, top = 10;
    bool json = false;
    ptdp_args a;
    ptdp_args_init(&a, "bench plan", argc, argv, 1);
    while (ptdp_args_next(&a)) {
        int rc = 0;
        if (ptdp_args_is(&a, "--help")) { usage(); return PTDP_EXIT_OK; }
        else if (ptdp_args_is(&a, "--profile")) rc = ptdp_args_string(&a, &profile);
        else if (ptdp_args_is(&a, "--device-mem")) rc = ptdp_args_size(&a, 4096, (size_t)1 << 50, &mem);
        else if (ptdp_args_is(&a, "--repeat")) rc = ptdp_args_int(&a, 1, 100, &repeat);
        else if (ptdp_args_is(&a, "--top")) rc = ptdp_args_int(&a, 1, 100000, &top);
        else if (ptdp_args_is(&a, "--json")) rc = ptdp_args_switch(&a, &json);
        else rc = ptdp_args_unknown(&a);
        if (rc)
            return PTDP_EXIT_USAGE;
    }
    if (a.status)
        return PTDP_EXIT_USAGE;
    const ptdp_profile *p = ptdp_profile_find(profile);
    if (p == NULL)
        return ptdp_usage_error("bench plan", "--profile %s: unknown (ptdp plan --profile list names them)", profile);
    if (mem == 0 && !(p->mem_bytes > 0))
        return ptdp_usage_error("bench plan", "--profile %s gives no GPU memory: add --device-mem (e.g. 80G)",
                                profile);
    if (!json)
        printf("ptdp plan's search, one thread, the fastest of %d run%s, %s, bf16, top %d:\n\n%-5s %6s %10s %9s %8s "
               "%7s %9s %9s %12s  %s\n", repeat, repeat == 1 ? "" : "s", profile, top, "model", "GPUs", "considered",
               "valid", "fit", "timed", "seconds", "cpu s", "layouts/s", "best layout (step s)");
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const plan_case *pc = &cases[k];
        ptdp_plan_request rq = ptdp_plan_request_defaults();
        rq.model.layers = pc->layers;
        rq.model.hidden = pc->hidden;
        rq.model.ffn = 4 * pc->hidden;
        /* the planner's model (the registry's first plannable one) */
        ptdp_model_cli_set(&rq.model, "--heads", pc->heads);
        ptdp_model_cli_set(&rq.model, "--seq-len", pc->seq_len);
        ptdp_model_cli_set(&rq.model, "--vocab", pc->vocab);
        rq.batch = pc->batch;
        rq.gpus = pc->gpus;
        rq.profile = p;
        rq.bf16 = true;
        double best = -1, best_cpu = 0;
        ptdp_plan_search_stats st = { 0 };
        ptdp_plan_candidate first = { 0 };
        char msg[PTDP_MSG_MAX];
        int rc = 0;
        for (int r = 0; r < repeat && rc == 0; r++) {
            ptdp_plan_candidate *c = NULL;
            int n = 0;
            ptdp_progress("bench plan: %s on %d GPUs, run %d of %d", pc->name, pc->gpus, r + 1, repeat);
            double t0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
            rc = ptdp_plan_search_top(&rq, (double)mem, top, &c, &n, &st, msg, sizeof msg);
            double t = now_s(CLOCK_MONOTONIC) - t0, cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
            if (rc == 0 && n > 0)
                first = c[0];
            free(c);
            if (best < 0 || t < best) {
                best = t;
                best_cpu = cpu;
            }
        }
        ptdp_progress_done();
        const double rate = best > 0 ? (double)st.considered / best : 0;
        char x[4][PTDP_JSON_NUMBER_MAX];
        if (json) {
            printf("{\"model\": \"%s\", \"gpus\": %d, \"profile\": \"%s\", \"considered\": %lld, \"valid\": %lld, "
                   "\"fitting\": %lld, \"timed\": %lld, \"seconds\": %s, \"cpu_seconds\": %s, \"layouts_per_s\": %s, "
                   "\"ok\": %s", pc->name, pc->gpus, profile, st.considered, st.valid, st.fitting, st.timed,
                   ptdp_json_number(best, x[0]), ptdp_json_number(best_cpu, x[3]), ptdp_json_number(rate, x[1]),
                   rc == 0 ? "true" : "false");
            if (rc == 0)
                printf(", \"best_step_s\": %s", ptdp_json_number(first.time.step_s, x[2]));
            printf("}\n");
        } else if (rc == 0) {
            const ptdp_plan_layout *l = &first.layout;
            printf("%-5s %6d %10lld %9lld %8lld %7lld %9.3f %9.3f %12.4g  dp %d tp %d pp %d cp %d b %d %s%s%.0d %s z%d%s "
                   "(%.4g)\n", pc->name, pc->gpus, st.considered, st.valid, st.fitting, st.timed, best, best_cpu, rate, l->dp,
                   l->tp, l->pp, l->cp, l->micro_batch_size, l->schedule != NULL ? l->schedule->name : ptdp_schedule_default()->name, l->virtual_stages > 1 ? " v" : "",
                   l->virtual_stages > 1 ? l->virtual_stages : 0, ptdp_recompute_name(l->recompute), l->zero,
                   l->sp ? " sp" : "", first.time.step_s);
        } else {
            printf("%-5s %6d %10lld %9lld %8lld %7lld %9.3f %9.3f %12.4g  %s\n", pc->name, pc->gpus,
                   st.considered, st.valid, st.fitting, st.timed, best, best_cpu, rate, msg);
        }
        fflush(stdout);
    }
    return PTDP_EXIT_OK;
}
