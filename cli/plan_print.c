/*
 * plan_print.c — what `ptdp plan` prints.
 *
 *   the table     a header naming the model (its parameters), the cluster
 *                 and the counts (considered / valid / fitting), then one
 *                 row per layout, best first:
 *
 *     #  dp tp pp cp  b   M schedule    v recompute zero sp  memory/GPU  step s  tokens/s  TFLOP/s/GPU
 *                                                                                          model  hw
 *
 *   --json        {"candidates": [{"dp", "tp", …, "hardware_tflops_per_gpu"}, …]}
 *                 one candidate a line, best first (extra keys: the memory
 *                 and time terms, "micro_batches", "overlap", "fits")
 *
 *   --explain     one layout term by term — memory (parameters, gradients,
 *                 optimizer, activations x in flight, communication, other),
 *                 time (F, B, bubble, TP/CP/PP/DP communication, optimizer),
 *                 FLOPs counted both ways — and the `ptdp train` command that
 *                 runs it in the simulator when it has 64 GPUs or fewer.
 *
 * The two FLOP counts (Narayanan et al. 2021, "Efficient large-scale
 * language model training on GPU clusters using Megatron-LM", appendix):
 *
 *     model     72 B s L h² (1 + s/6h + V/12Lh)     what the model needs
 *     hardware  96 B s L h² (1 + s/6h + V/16Lh)     under full recomputation
 *                                                   (one more forward)
 *
 * taken from the planner's ptdp_plan_time (plan_time.c), per GPU per second.
 */
#include "plan_print.h"
#include "args.h"

#include <math.h>
#include <string.h>

#include "ptdp/arena.h"
#include "model_flags.h"
#include "ptdp/model_plan.h"
#include "ptdp/models.h"
#include "ptdp/json.h"
#include "ptdp/schedule.h"
#include "ptdp/device.h"
#include "ptdp/ep.h"
#include "ptdp/fp8_quant.h"
#include "ptdp/types.h"
#include "ptdp/zero.h"

/* The model's parameters, as its CLI counts them (0 if it does not). */
double ptdp_plan_parameters(const ptdp_model_config *m)
{
    const ptdp_model_cli *cli = ptdp_model_cli_of(m);
    return cli->plan_parameters != NULL ? cli->plan_parameters(m) : 0;
}

/* 1.01T, 175B, 1.3M: the way model sizes are said. */
/* A layout's schedule row (its own, or the default). */
static const ptdp_schedule_entry *row_of(const ptdp_plan_layout *l)
{
    return l->schedule != NULL ? l->schedule : ptdp_schedule_default();
}

static const char *count_text(double x, char *buf, size_t len)
{
    static const char *const unit[] = { "", "K", "M", "B", "T" };
    int k = 0;
    while (x >= 999.5 && k < 4) {
        x /= 1000;
        k++;
    }
    snprintf(buf, len, x >= 100 || k == 0 ? "%.0f%s" : "%.3g%s", x, unit[k]);
    return buf;
}

static const char *precision_name(const ptdp_plan_request *rq)
{
    return rq->bf16 ? "bf16" : PTDP_REAL_NAME;
}

static double device_bytes_of(const plan_options *o, const ptdp_plan_search_stats *st)
{
    return st->device_bytes > 0 ? st->device_bytes : o->device_bytes;
}

/* ---------------------------------------------------------------- table */

/* The experts of the model's mixtures (0: dense), from its planning table. */
static int experts_of(const ptdp_model_config *m)
{
    const ptdp_model_plan *mp = ptdp_model_of(m)->plan;
    return mp != NULL && mp->experts != NULL ? mp->experts(m) : 0;
}

/* The rows with expert parallelism's column after dp's. */
static void print_moe_table(FILE *f, const ptdp_plan_candidate *c, int n)
{
    fprintf(f, "%3s %5s %3s %3s %4s %4s %4s %6s %-11s %2s %-9s %4s %11s %10s %10s %13s\n", "#", "dp", "ep", "tp",
            "pp", "cp", "b", "M", "schedule", "v", "recompute", "zero", "memory/GPU", "step s", "tokens/s",
            "TFLOP/s/GPU");
    fprintf(f, "%3s %5s %3s %3s %4s %4s %4s %6s %-11s %2s %-9s %4s %11s %10s %10s %6s %6s\n", "", "", "", "", "", "",
            "", "", "", "", "", "", "", "", "", "model", "hw");
    for (int i = 0; i < n; i++) {
        const ptdp_plan_layout *l = &c[i].layout;
        char b[32];
        ptdp_format_bytes(c[i].memory.total, b, sizeof b);
        fprintf(f, "%3d %5d %3d %3d %4d %4d %4d %6d %-11s %2d %-9s %4d %11s %10.4g %10.4g %6.4g %6.4g\n", i + 1,
                l->dp, l->ep > 1 ? l->ep : 1, l->tp, l->pp, l->cp, l->micro_batch_size, l->micro_batches,
                row_of(l)->name, l->virtual_stages, ptdp_recompute_name(l->recompute), l->zero, b, c[i].time.step_s,
                c[i].time.tokens_per_s, c[i].time.model_tflops_per_gpu, c[i].time.hardware_tflops_per_gpu);
    }
}

/* Under --fp8: at what the linear layers' products are priced (clock.h),
 * and that a profile without an FP8 peak falls back to its bf16 peak. */
static void print_fp8(FILE *f, const ptdp_plan_request *rq)
{
    const ptdp_profile *p = rq->profile;
    if (rq->fp8 == NULL)
        return;
    fprintf(f, "--fp8 %s: the linear layers' products (not the head's) at %.4g TFLOP/s", rq->fp8->name,
            ptdp_profile_peak_fp8(p) / 1e12);
    if (p->peak_flops_fp8 > 0)
        fprintf(f, " FP8");
    else
        fprintf(f, ", %s has no FP8 peak: its %s peak", p->name, p->peak_flops_bf16 > 0 ? "bf16" : "one");
    if (p->hbm_Bps > 0)
        fprintf(f, ", plus (4 + 1) B an operand element quantized at %.4g TB/s\n", p->hbm_Bps / 1e12);
    else
        fprintf(f, "; %s gives no memory bandwidth: quantization free\n", p->name);
    if (experts_of(&rq->model) > 0)
        fprintf(f, "  (the experts' products too, by their rows: each expert's on the GEMM curve as thin as its rows)\n");
    if (rq->fp8_comm)
        fprintf(f, "  --fp8-comm: EP's forward dispatch as FP8 rows (codes and tiles' scales); ZeRO-3's gathers "
                "of the FP8 weights as codes, after an all-reduce of their amaxes\n");
}

/* --fp8-comm's EP dispatch, the bytes of a row of C (ep.h), beside the
 * reals it replaces; NAN where nothing is sent in FP8 (no EP, or one scale
 * a tensor, which EP does not run). */
static double ep_row_bytes(const ptdp_plan_request *rq, const ptdp_plan_layout *l, bool fp8)
{
    const int C = rq->model.hidden;
    if (!rq->fp8_comm || rq->fp8 == NULL || rq->fp8->whole_tensor || l->ep < 2 || experts_of(&rq->model) == 0)
        return NAN;
    return fp8 ? ptdp_ep_fp8_row_bytes(rq->fp8, C) : (double)C * sizeof(ptdp_real);
}

/* Under --fp8, --json's "fp8" object (docs/report-schema.md): the recipe,
 * --fp8-comm, delayed's amax table, the EP row and the ZeRO-3 round in
 * bytes with FP8 and without (null where they do not apply). */
static void print_json_fp8(FILE *f, const ptdp_plan_request *rq, const ptdp_plan_candidate *c)
{
    const ptdp_plan_time *t = &c->time;
    const bool z3 = t->zero3_psi > 0;
    char x[8][PTDP_JSON_NUMBER_MAX];
    if (rq->fp8 == NULL)
        return;
    fprintf(f, ", \"fp8\": {\"recipe\": \"%s\", \"comm\": %s, \"amax_table_s\": %s, \"ep_dispatch_row_bytes\": %s, "
            "\"ep_dispatch_row_bytes_without\": %s, \"zero3_psi\": %s, \"zero3_psi_fp8\": %s, \"zero3_amaxes\": %s, "
            "\"zero3_gather_bytes\": %s, \"zero3_gather_bytes_without\": %s}", rq->fp8->name,
            rq->fp8_comm ? "true" : "false", ptdp_json_number(t->fp8_amax_s, x[0]),
            ptdp_json_number(ep_row_bytes(rq, &c->layout, true), x[1]),
            ptdp_json_number(ep_row_bytes(rq, &c->layout, false), x[2]),
            ptdp_json_number(z3 ? t->zero3_psi : NAN, x[3]), ptdp_json_number(z3 ? t->zero3_psi_fp8 : NAN, x[4]),
            ptdp_json_number(z3 ? t->zero3_amaxes : NAN, x[5]),
            ptdp_json_number(z3 ? t->zero3_gather_bytes : NAN, x[6]),
            ptdp_json_number(z3 ? t->zero3_gather_bytes_store : NAN, x[7]));
}

void ptdp_plan_print_table(FILE *f, const plan_options *o, const ptdp_plan_search_stats *st,
                           const ptdp_plan_candidate *c, int n)
{
    const ptdp_plan_request *rq = &o->rq;
    const ptdp_model_config *m = &rq->model;
    const ptdp_model_cli *cli = ptdp_model_cli_of(m);
    const ptdp_profile *p = rq->profile;
    char params[32], mem[32], node[48] = "";
    const double dev = device_bytes_of(o, st);
    count_text(ptdp_plan_parameters(m), params, sizeof params);
    if (dev > 0)
        ptdp_format_bytes(dev, mem, sizeof mem);
    else
        snprintf(mem, sizeof mem, "unlimited memory");
    if (p->gpus_per_node > 0)
        snprintf(node, sizeof node, "%d per node, ", p->gpus_per_node);
    if (cli->plan_header != NULL)
        cli->plan_header(f, m, params, rq->batch);
    else
        fprintf(f, "%s of %s parameters (layers %d, hidden %d, ffn %d), batch %lld\n", ptdp_model_name(m), params,
                m->layers, m->hidden, m->ffn, rq->batch);
    fprintf(f, "on %d GPU%s of %s (%s%s each), %s\n", rq->gpus, rq->gpus == 1 ? "" : "s", p->name, node, mem,
            precision_name(rq));
    if (rq->attention_tiled)
        fprintf(f, "--attention tiled: a log-sum-exp a query kept, not the T x T probabilities; the tiles not "
                "in the future computed, S again in the backward (the ring's chunks are its own tiles)\n");
    print_fp8(f, rq);
    fprintf(f, "layouts: %lld considered, %lld valid, %lld fit; %lld timed; the best %d:\n\n", st->considered,
            st->valid, st->fitting, st->timed, n);
    if (experts_of(m) > 0) {   /* a mixture of experts: the EP column too */
        print_moe_table(f, c, n);
        return;
    }
    /* the row's widths, so that the header stands over its columns */
    fprintf(f, "%3s %5s %3s %4s %4s %4s %6s %-11s %2s %-9s %4s %3s %11s %10s %10s %13s\n", "#", "dp", "tp", "pp",
            "cp", "b", "M", "schedule", "v", "recompute", "zero", "sp", "memory/GPU", "step s", "tokens/s",
            "TFLOP/s/GPU");
    fprintf(f, "%3s %5s %3s %4s %4s %4s %6s %-11s %2s %-9s %4s %3s %11s %10s %10s %6s %6s\n", "", "", "", "", "",
            "", "", "", "", "", "", "", "", "", "", "model", "hw");
    for (int i = 0; i < n; i++) {
        const ptdp_plan_layout *l = &c[i].layout;
        char b[32];
        ptdp_format_bytes(c[i].memory.total, b, sizeof b);
        fprintf(f, "%3d %5d %3d %4d %4d %4d %6d %-11s %2d %-9s %4d %3s %11s %10.4g %10.4g %6.4g %6.4g\n", i + 1,
                l->dp, l->tp, l->pp, l->cp, l->micro_batch_size, l->micro_batches, row_of(l)->name, l->virtual_stages,
                ptdp_recompute_name(l->recompute), l->zero, l->sp ? "on" : "off", b, c[i].time.step_s,
                c[i].time.tokens_per_s, c[i].time.model_tflops_per_gpu, c[i].time.hardware_tflops_per_gpu);
    }
}

/* ----------------------------------------------------------------- json */

void ptdp_plan_print_json(FILE *f, const plan_options *o, const ptdp_plan_search_stats *st,
                          const ptdp_plan_candidate *c, int n)
{
    (void)st;
    char x[16][PTDP_JSON_NUMBER_MAX];
    fprintf(f, "{\"candidates\": [\n");
    for (int i = 0; i < n; i++) {
        const ptdp_plan_layout *l = &c[i].layout;
        const ptdp_plan_memory *m = &c[i].memory;
        const ptdp_plan_time *t = &c[i].time;
        fprintf(f,
                "  {\"dp\": %d, \"tp\": %d, \"pp\": %d, \"cp\": %d, \"micro_batch_size\": %d, \"virtual_stages\": %d, "
                "\"schedule\": \"%s\", \"recompute\": \"%s\", \"zero\": %d, \"sp\": %s, \"memory_per_gpu_bytes\": %s, "
                "\"step_s\": %s, \"tokens_per_s\": %s, \"model_tflops_per_gpu\": %s, \"hardware_tflops_per_gpu\": %s, "
                "\"micro_batches\": %d, \"overlap\": %s, \"fits\": %s, \"ep\": %d, ",
                l->dp, l->tp, l->pp, l->cp, l->micro_batch_size, l->virtual_stages, row_of(l)->name,
                ptdp_recompute_name(l->recompute), l->zero, l->sp ? "true" : "false",
                ptdp_json_number(m->total, x[0]), ptdp_json_number(t->step_s, x[1]),
                ptdp_json_number(t->tokens_per_s, x[2]), ptdp_json_number(t->model_tflops_per_gpu, x[3]),
                ptdp_json_number(t->hardware_tflops_per_gpu, x[4]), l->micro_batches, l->overlap ? "true" : "false",
                c[i].fits ? "true" : "false", l->ep > 1 ? l->ep : 1);
        if (ptdp_plan_fold_slices(l) > 1)   /* MoE parallel folding: the experts' own TP size */
            fprintf(f, "\"etp\": %d, ", l->etp);
        fprintf(f,
                "\"memory\": {\"params\": %s, \"grads\": %s, \"optim\": %s, \"acts\": %s, \"comm\": %s, \"other\": %s, "
                "\"stage\": %d, \"in_flight\": %d, \"psi\": %s, \"psi_experts\": %s}, ",
                ptdp_json_number(m->params, x[0]), ptdp_json_number(m->grads, x[1]), ptdp_json_number(m->optim, x[2]),
                ptdp_json_number(m->acts, x[3]), ptdp_json_number(m->comm, x[4]), ptdp_json_number(m->other, x[5]),
                m->stage, m->in_flight, ptdp_json_number(m->psi, x[6]), ptdp_json_number(m->psi_experts, x[7]));
        fprintf(f,
                "\"time\": {\"forward_s\": %s, \"backward_s\": %s, \"bubble\": %s, \"tp_comm_s\": %s, "
                "\"cp_comm_s\": %s, \"pp_comm_s\": %s, \"dp_comm_s\": %s, \"dp_exposed_s\": %s, \"optimizer_s\": %s, "
                "\"model_flops\": %s, \"hardware_flops\": %s, \"ep_comm_s\": %s}",
                ptdp_json_number(t->forward_s, x[0]), ptdp_json_number(t->backward_s, x[1]),
                ptdp_json_number(t->bubble, x[2]), ptdp_json_number(t->tp_comm_s, x[3]),
                ptdp_json_number(t->cp_comm_s, x[4]), ptdp_json_number(t->pp_comm_s, x[5]),
                ptdp_json_number(t->dp_comm_s, x[6]), ptdp_json_number(t->dp_exposed_s, x[7]),
                ptdp_json_number(t->optimizer_s, x[8]), ptdp_json_number(t->model_flops, x[9]),
                ptdp_json_number(t->hardware_flops, x[10]), ptdp_json_number(t->ep_comm_s, x[11]));
        print_json_fp8(f, &o->rq, &c[i]);
        fprintf(f, "}%s\n", i + 1 < n ? "," : "");
    }
    fprintf(f, "]");
    if (o->compare_zero && n > 0) {   /* --compare-zero: the best layout under each of ZeRO-3's options */
        fprintf(f, ",\n\"zero3_options\": ");
        ptdp_plan_print_compare_json(f, o, &c[0]);
    }
    fprintf(f, "}\n");
}

/* -------------------------------------------------------------- explain */

static const char *gib(double bytes, char *buf, size_t len)
{
    return ptdp_format_bytes(bytes, buf, len);
}

/* The `ptdp train` line that runs the layout (plan_layout.c's
 * ptdp_plan_train_config, in flags). */
static void print_run_line(FILE *f, const plan_options *o, const ptdp_plan_candidate *c)
{
    const ptdp_plan_request *rq = &o->rq;
    const ptdp_model_config *m = &rq->model;
    const ptdp_plan_layout *l = &c->layout;
    const ptdp_model_cli *cli = ptdp_model_cli_of(m);
    fprintf(f, "  ptdp train");
    if (cli->plan_train_flags != NULL)
        cli->plan_train_flags(f, m);
    else
        fprintf(f, " --model %s --layers %d --hidden %d --ffn %d", ptdp_model_name(m), m->layers, m->hidden, m->ffn);
    fprintf(f, " \\\n      --batch %lld --dp %d --tp %d --pp %d", rq->batch, l->dp, l->tp, l->pp);
    if (l->cp > 1)
        fprintf(f, " --cp %d", l->cp);
    fprintf(f, " --micro-batches %d --schedule %s", l->micro_batches, row_of(l)->name);
    if (l->virtual_stages > 1)
        fprintf(f, " --virtual-stages %d", l->virtual_stages);
    if (l->recompute != PTDP_RECOMPUTE_NONE)
        fprintf(f, " --recompute %s", ptdp_recompute_name(l->recompute));
    if (l->sp)
        fprintf(f, " --sp");
    if (ptdp_zero_stage_of(l->zero)->shards_optim)   /* a ZeRO stage, not plain DP */
        fprintf(f, " --zero %d", l->zero);
    if (l->ep > 1)
        fprintf(f, " --ep %d", l->ep);
    if (ptdp_plan_fold_slices(l) > 1)   /* MoE parallel folding */
        fprintf(f, " --etp %d", l->etp);
    if (l->overlap)
        fprintf(f, " --overlap");
    if (rq->bf16)
        fprintf(f, " --precision bf16");
    if (rq->attention_tiled != ptdp_attention_tiles(-1, ptdp_model_of(m)->caps.attention,
                                                    l->recompute == PTDP_RECOMPUTE_SELECTIVE, ptdp_model_positions(m)))
        fprintf(f, " --attention %s", rq->attention_tiled ? "tiled" : "full");   /* not train's default here */
    if (rq->fp8 != NULL)
        fprintf(f, " --fp8 %s", rq->fp8->name);
    if (!isnan(ep_row_bytes(rq, l, true)) || (rq->fp8_comm && rq->fp8 != NULL && l->zero == 3))
        fprintf(f, " --fp8-comm");   /* where ptdp train sends FP8: EP's dispatch, ZeRO-3's gathers */
    if (rq->shard_group > 0)   /* ZeRO-3's options, as ptdp train takes them */
        fprintf(f, " --shard-group %d", rq->shard_group);
    if (rq->zero_hpz)
        fprintf(f, " --zero-hpz");
    if (rq->zero_qwz > 0)
        fprintf(f, " --zero-qwz --zero-quant-block %d", rq->zero_qwz);
    if (rq->zero_qgz > 0)   /* qgZ (zero3_qgz.c): its codes' bits; the block is its default */
        fprintf(f, " --zero-qgz --zero-qgz-bits %d", rq->zero_qgz);
    /* the arena: the plan's peak with room to spare, at least the default 4G */
    const double mib = ceil(c->memory.total * 1.25 / (1 << 20));
    if (mib > 4096)
        fprintf(f, " --device-mem %.0fM", mib);
    fprintf(f, " \\\n      --profile %s --steps 2 --report report.json\n", rq->profile->name);

}

/* The bubble by formula (equal stages, free messages), and the formula:
 * a schedule of F&B pairs (DualPipe's) its row's, with F = B = W and a
 * pair F + B (schedule.h); the others (p-1)/(v m+p-1), whole backwards. */
static double textbook_bubble(const ptdp_plan_layout *l, char *words, size_t len)
{
    const ptdp_schedule_entry *e = l->schedule != NULL ? l->schedule : ptdp_schedule_default();
    if (e->caps & PTDP_SCHED_PAIRS) {
        snprintf(words, len, "%s, F = B = W", e->bubble_words);
        return e->bubble(l->pp, l->micro_batches, 2);
    }
    snprintf(words, len, "(p-1)/(v m+p-1)");
    return (double)(l->pp - 1) / ((double)l->virtual_stages * l->micro_batches + l->pp - 1);
}

/* The step's communication, term by term. */
static void print_comm_terms(FILE *f, const ptdp_model_config *md, const ptdp_plan_time *t, bool pairs)
{
    fprintf(f, "  TP comm        %12.6g s   per micro-batch, inside F and B\n", t->tp_comm_s);
    fprintf(f, "  CP comm        %12.6g s   per micro-batch, inside F and B\n", t->cp_comm_s);
    if (experts_of(md) > 0)
        fprintf(f, "  EP all-to-alls %12.6g s   per micro-batch, inside F and B: a mixture's dispatch and combine,\n"
                "                                 forward and backward (and forward again under full recompute)%s\n",
                t->ep_comm_s, pairs ? ";\n                                 in an F&B pair on the communication stream, "
                                      "under the partner's\n                                 compute: the pair takes "
                                      "max(F + B, its all-to-alls)" : "");
    fprintf(f, "  PP message     %12.6g s   one activation between stages\n", t->pp_comm_s);
    fprintf(f, "  DP/ZeRO comm   %12.6g s   a step; exposed (not hidden under the backward): %.6g s\n",
            t->dp_comm_s, t->dp_exposed_s);
}

/* What the planner assumes of a mixture of experts (model_plan.h). */
static void print_moe_assumption(FILE *f, const ptdp_plan_layout *l)
{
    const int ep = l->ep > 1 ? l->ep : 1, slices = l->etp > 0 && l->etp < l->tp ? l->tp / l->etp : 1;
    const int copies = slices * l->dp * l->cp / ep;
    if (slices > 1)   /* MoE parallel folding (moe_fold.c) */
        fprintf(f, "        etp %d (folded): each TP group's rows routed in %d slices, each expert split %d way%s; "
                "ep %d of the\n        %d slices x dp x cp; each expert has %d cop%s (expert DP); a fold "
                "all-gather a block each way\n", l->etp, slices, l->etp, l->etp == 1 ? "" : "s", ep, slices, copies,
                copies == 1 ? "y" : "ies");
    else
        fprintf(f, "        ep %d: each mixture's experts spread over %d of the dp x cp ranks; each expert has %d "
                "cop%s (expert DP)\n", ep, ep, copies, copies == 1 ? "y" : "ies");
    fprintf(f, "\nassumed: uniform routing — each of the E experts receives k R / E of a device's R token rows a\n"
            "micro-batch (at most its capacity, ceil(c k T / E) a sequence, under --moe-capacity-factor c); so\n"
            "every EP rank runs and keeps as many rows as it routes, and each all-to-all moves (ep-1)/ep of them.\n"
            "A real router is not uniform (an untrained one least of all): the busiest expert's rows set the\n"
            "activations and the exchanges' time, which ptdp train measures (--report's moe_blocks).\n");
}

/* The layout in words, and what the planner assumes of a mixture. */
static void print_layout(FILE *f, const ptdp_plan_request *rq, const ptdp_plan_layout *l)
{
    fprintf(f, "\nlayout: dp %d x tp %d x pp %d x cp %d = %d GPU%s; b %d sequence%s a micro-batch, M = B / (b dp) = "
            "%lld / (%d x %d) = %d;\n        %s", l->dp, l->tp, l->pp, l->cp, rq->gpus, rq->gpus == 1 ? "" : "s",
            l->micro_batch_size, l->micro_batch_size == 1 ? "" : "s", rq->batch, l->micro_batch_size, l->dp,
            l->micro_batches, row_of(l)->name);
    if (l->virtual_stages > 1)
        fprintf(f, " with v %d chunks a stage", l->virtual_stages);
    fprintf(f, ", recompute %s, ZeRO-%d, sp %s, overlap %s\n", ptdp_recompute_name(l->recompute), l->zero,
            l->sp ? "on" : "off", l->overlap ? "on" : "off");
    if (experts_of(&rq->model) > 0)
        print_moe_assumption(f, l);
}

/* Memory per GPU term by term: Ψ the parameters of the stage's tp shard,
 * at rest in their store; each model state whole, or over dp cp where the
 * stage's row shards it (zero.h). */
static void print_memory_terms(FILE *f, const plan_options *o, const ptdp_plan_candidate *c)
{
    const ptdp_plan_request *rq = &o->rq;
    const ptdp_plan_layout *l = &c->layout;
    const ptdp_plan_memory *m = &c->memory;
    const ptdp_zero_stage *z = ptdp_zero_stage_of(l->zero);
    char b[8][32];
    const double bw = rq->bf16 ? 2 : sizeof(ptdp_real);
    fprintf(f, "\nmemory per GPU — stage %d holds the peak, with %d micro-batch%s of activations in flight:\n",
            m->stage, m->in_flight, m->in_flight == 1 ? "" : "es");
    fprintf(f, "  parameters     %12s   Ψ x %g B%s            Ψ = %.4g on this stage's tp shard",
            gib(m->params, b[0], 32), bw, z->shards_params ? " / (dp cp)" : "", m->psi);
    if (m->params_units > 0)
        fprintf(f, ";\n                                 + %s of units in use (%s)", gib(m->params_units, b[1], 32),
                rq->bf16 ? "gathered bf16, float working copies" : "gathered");
    fprintf(f, "\n");
    fprintf(f, "  gradients      %12s   Ψ x %g B%s\n", gib(m->grads, b[1], 32), rq->bf16 ? 2.0 : bw,
            z->shards_grads ? " / (dp cp)" : "");
    char moments[64];
    snprintf(moments, sizeof moments, "%zu B (2 AdamW moments)", 2 * sizeof(ptdp_real));
    fprintf(f, "  optimizer      %12s   Ψ x %s%s\n", gib(m->optim, b[2], 32),
            rq->bf16 ? "12 B (4 B master + 2 x 4 B AdamW moments)" : moments,
            z->shards_optim ? " / (dp cp)" : "");
    if (m->psi_experts > 0)
        fprintf(f, "                                 of Ψ, %.4g are experts': summed over their copies (dp cp / ep),\n"
                "                                 which ZeRO 1 and 2 shard their states over instead of dp cp\n",
                m->psi_experts);
    fprintf(f, "  activations    %12s   %d in flight x %s per micro-batch (recompute %s%s)\n",
            gib(m->acts, b[3], 32), m->in_flight, gib(m->in_flight > 0 ? m->acts / m->in_flight : m->acts, b[4], 32),
            ptdp_recompute_name(l->recompute), l->sp ? ", sp divides by tp" : "");
    fprintf(f, "  communication  %12s   buffers of the collectives\n", gib(m->comm, b[5], 32));
    fprintf(f, "  other          %12s   data, scratch\n", gib(m->other, b[6], 32));
    const double dev = o->device_bytes > 0 ? o->device_bytes : rq->profile->mem_bytes;
    if (dev > 0)
        fprintf(f, "  total (peak)   %12s   of %s: %s\n", gib(m->total, b[0], 32), gib(dev, b[1], 32),
                m->total <= dev ? "fits" : "does not fit");
    else
        fprintf(f, "  total (peak)   %12s\n", gib(m->total, b[0], 32));
}

/* Under --fp8: delayed's amax table a step; --fp8-comm's bytes, EP's row
 * and ZeRO-3's round of gathers, beside what they replace. */
static void print_fp8_terms(FILE *f, const ptdp_plan_request *rq, const ptdp_plan_candidate *c)
{
    const ptdp_plan_time *t = &c->time;
    const double store = rq->bf16 ? 2.0 : (double)sizeof(ptdp_real);
    if (rq->fp8 != NULL && rq->fp8->uses_history)
        fprintf(f, "  FP8 amaxes     %12.6g s   --fp8 delayed: 3 reals a parameter tensor max-reduced over DP, "
                "once a step\n", t->fp8_amax_s);
    const double row = ep_row_bytes(rq, &c->layout, true);
    if (!isnan(row))
        fprintf(f, "  --fp8-comm: EP's dispatch sends a row as C = %d codes of 1 B + %.0f scale%s x %zu B = %.0f B, in "
                "place of C x %zu B = %.0f B\n", rq->model.hidden, (row - rq->model.hidden) / sizeof(ptdp_real),
                row - rq->model.hidden == sizeof(ptdp_real) ? "" : "s", sizeof(ptdp_real), row, sizeof(ptdp_real),
                ep_row_bytes(rq, &c->layout, false));
    if (t->zero3_psi > 0)
        fprintf(f, "  --fp8-comm: ZeRO-3 gathers a round (each micro-batch's forward, again its backward)\n"
                "              psi_q %.0f codes x 1 B + %.0f others x %.0f B + %.0f amaxes x %zu B = %.0f B,\n"
                "              in place of psi %.0f x %.0f B = %.0f B\n", t->zero3_psi_fp8,
                t->zero3_psi - t->zero3_psi_fp8, store, t->zero3_amaxes, sizeof(ptdp_real), t->zero3_gather_bytes,
                t->zero3_psi, store, t->zero3_gather_bytes_store);
}

/* Time of one step term by term, the bubble beside its textbook formula. */
static void print_time_terms(FILE *f, const ptdp_plan_request *rq, const ptdp_plan_candidate *c)
{
    const ptdp_plan_layout *l = &c->layout;
    const ptdp_plan_time *t = &c->time;
    char words[64];
    const double ideal = textbook_bubble(l, words, sizeof words);
    fprintf(f, "\ntime of one step (%s):\n", rq->profile->name);
    if (rq->fp8 != NULL)
        fprintf(f, "  ");
    print_fp8(f, rq);
    fprintf(f, "  forward  F     %12.6g s   one micro-batch on the slowest stage (GEMMs at the profile's\n"
            "                                 efficiency for their shape, TP/CP collectives on the compute stream)\n",
            t->forward_s);
    fprintf(f, "  backward B     %12.6g s   the same, backward%s\n", t->backward_s,
            l->recompute == PTDP_RECOMPUTE_FULL        ? " (with the recomputed forward)"
            : l->recompute == PTDP_RECOMPUTE_SELECTIVE ? " (with the attention core recomputed)"
                                                       : "");
    fprintf(f, "  M (F + B)      %12.6g s   %d micro-batch%s of compute on that stage\n",
            l->micro_batches * (t->forward_s + t->backward_s), l->micro_batches, l->micro_batches == 1 ? "" : "es");
    fprintf(f, "  bubble         %12.4f     the stages' time not computing: fill and drain, sending (the\n"
            "                                 sender pays each message) and waiting for the slowest stage\n"
            "                                 (textbook, equal stages and free messages: %s = %.4f)\n",
            t->bubble, words, ideal);
    print_comm_terms(f, &rq->model, t, (row_of(l)->caps & PTDP_SCHED_PAIRS) != 0);
    fprintf(f, "  optimizer      %12.6g s\n", t->optimizer_s);
    print_fp8_terms(f, rq, c);
    fprintf(f, "  step           %12.6g s   -> %.6g tokens/s (B s / step = %lld x %d / %.6g)\n", t->step_s,
            t->tokens_per_s, rq->batch, ptdp_model_positions(&rq->model), t->step_s);
}

/* The step's FLOPs counted both ways: the model's, and the hardware's with
 * what recomputation redoes. */
static void print_flops(FILE *f, const ptdp_plan_request *rq, const ptdp_plan_candidate *c)
{
    const ptdp_model_cli *cli = ptdp_model_cli_of(&rq->model);
    const ptdp_plan_time *t = &c->time;
    fprintf(f, "\nFLOPs of one step:\n");
    if (cli->plan_flops != NULL)
        cli->plan_flops(f, &rq->model, rq->batch, t->model_flops, t->model_tflops_per_gpu);
    else
        fprintf(f, "  model     %.4g  -> %.1f TFLOP/s per GPU (model FLOPs / (step x N))\n", t->model_flops,
                t->model_tflops_per_gpu);
    fprintf(f, "  hardware  with what recompute %s redoes = %.4g (%.3f x model)  -> %.1f TFLOP/s per GPU\n",
            ptdp_recompute_name(c->layout.recompute), t->hardware_flops,
            t->model_flops > 0 ? t->hardware_flops / t->model_flops : 0, t->hardware_tflops_per_gpu);
}

void ptdp_plan_print_explain(FILE *f, const plan_options *o, const ptdp_plan_candidate *c)
{
    const ptdp_plan_request *rq = &o->rq;
    print_layout(f, rq, &c->layout);
    print_memory_terms(f, o, c);
    print_time_terms(f, rq, c);
    print_flops(f, rq, c);
    fprintf(f, "\nrun it in the simulator:\n");
    if (rq->gpus <= PTDP_MAX_DEVICES)
        print_run_line(f, o, c);
    else
        fprintf(f, "  %d GPUs: more devices than the simulator runs (%d); plan a smaller model on %d or fewer "
                "GPUs to check the numbers with ptdp train\n", rq->gpus, PTDP_MAX_DEVICES, PTDP_MAX_DEVICES);
}
