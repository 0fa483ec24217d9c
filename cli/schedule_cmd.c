/*
 * schedule_cmd.c — `ptdp schedule`: a pipeline schedule, checked, timed, drawn.
 *
 *     ptdp schedule --pp 4 --micro-batches 8 --schedule 1f1b [--svg FILE] [--list]
 *     ptdp schedule --report s.json --html s.html
 *     ptdp schedule --schedule interleaved --virtual-stages 2
 *     ptdp schedule --schedule zb-h1
 *     ptdp schedule --schedule dualpipev --pp 4 --micro-batches 10
 *     ptdp schedule --schedule dualpipe --pp 4 --micro-batches 10
 *
 * No model runs: the command generates the per-stage action lists
 * (schedule.h), proves them deadlock-free under blocking rendezvous
 * send/recv, plays them in virtual time with forward = 1 and backward = 2
 * time units per micro-batch and stage (the usual t_b ~ 2 t_f; with v chunks
 * a chunk's share is 1/v of that; a split backward's B and W take half of
 * t_b each, so F = B = W), and prints
 *
 *     the timeline       one row per stage, F/B per micro-batch, idle as dots
 *     the bubble         measured, and by the schedule's formula: (p - 1)/(m + p - 1),
 *                        interleaved (p - 1)/(v m + p - 1), ZB-H1 (p - 1)/(3m + p - 1)
 *     the memory         peak micro-batches in flight per stage (GPipe m, 1F1B p - rank)
 *
 * --report FILE writes the same numbers as JSON (docs/report-schema.md) and
 * --html FILE a page of them (html_schedule.c) embedding that JSON.
 *
 * --naive shows what the even/odd send/recv ordering prevents: 1F1B with
 * every send before its receive, and the deadlock the validator finds in it.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "args.h"
#include "commands.h"
#include "html_pages.h"
#include "paths.h"
#include "ptdp/error.h"
#include "ptdp/file.h"
#include "ptdp/json.h"
#include "ptdp/schedule.h"

typedef struct {
    int pp, micro_batches, virtual_stages;
    const ptdp_schedule_entry *schedule;   /* the registry's row (--schedule) */
    const char *svg, *report, *html;
    bool list, naive;
    ptdp_schedule_costs costs;   /* per micro-batch and stage, as typed */
    bool split_times;            /* --backward-input-time or -weight-time given */
} schedule_options;

static void usage(FILE *f)
{
    const ptdp_schedule_entry *chunked = ptdp_schedule_first_with(PTDP_SCHED_CHUNKS);
    fprintf(f,
        "usage: ptdp schedule [--pp N] [--micro-batches M] [--schedule NAME] [--virtual-stages V]\n"
        "                     [--svg FILE] [--report FILE] [--html FILE] [--list]\n"
        "\n"
        "Generate a pipeline schedule, prove it free of deadlock under blocking send/recv,\n"
        "time it in virtual time and draw it.  No model runs.\n"
        "\n"
        "  --pp N               pipeline stages, 1..64 (default 4)\n"
        "  --micro-batches M    micro-batches per step, 1..512 (default 8)\n"
        "  --schedule NAME      (default %s)\n", ptdp_schedule_default()->name);
    for (int i = 0; i < ptdp_schedule_count(); i++)
        fprintf(f, "                         %-11s %s\n", ptdp_schedule_at(i)->name, ptdp_schedule_at(i)->summary);
    fprintf(f, "  --virtual-stages V   model chunks per stage for --schedule %s, 1..16 (default 1)\n",
            chunked != NULL ? chunked->name : "with chunks");
    fprintf(f,
        "  --svg FILE           also draw the timeline as an SVG picture\n"
        "  --report FILE        the numbers as JSON: makespan, bubble, each stage, each action's times\n"
        "  --html FILE          a page (opens from disk): the drawing, the numbers, a slider over micro-batches\n"
        "  --list               print every stage's list of actions\n"
        "  --forward-time T     time of one forward on one stage (default 1; a chunk takes T/V)\n"
        "  --backward-time T    time of one backward (default 2)\n"
        "  --backward-input-time T   a split backward's B (default: half the backward time)\n"
        "  --backward-weight-time T  its W (default: half the backward time)\n"
        "  --send-time T        time for a message to arrive (default 0)\n"
        "  --alltoall-time T    expert parallelism's all-to-alls in one forward or backward (default 0):\n"
        "                       waited for alone, hidden under the partner's compute in an F&B pair\n"
        "  --naive              %s with every send before its receive: watch it deadlock\n",
        ptdp_schedule_row_1f1b.name);
}

/* Each flag as typed: 0, -1 after --help, or PTDP_EXIT_USAGE. */
static int parse(int argc, char **argv, schedule_options *o)
{
    ptdp_args a;
    ptdp_args_init(&a, "schedule", argc, argv, 1);
    while (ptdp_args_next(&a)) {
        int rc = 0;
        bool help = false;
        if      (ptdp_args_is(&a, "--pp"))            rc = ptdp_args_int(&a, 1, 64, &o->pp);
        else if (ptdp_args_is(&a, "--micro-batches")) rc = ptdp_args_int(&a, 1, 512, &o->micro_batches);
        else if (ptdp_args_is(&a, "--schedule"))      rc = ptdp_args_schedule(&a, &o->schedule);
        else if (ptdp_args_is(&a, "--svg"))           rc = ptdp_args_string(&a, &o->svg);
        else if (ptdp_args_is(&a, "--report"))        rc = ptdp_args_string(&a, &o->report);
        else if (ptdp_args_is(&a, "--html"))          rc = ptdp_args_string(&a, &o->html);
        else if (ptdp_args_is(&a, "--list"))          rc = ptdp_args_switch(&a, &o->list);
        else if (ptdp_args_is(&a, "--naive"))         rc = ptdp_args_switch(&a, &o->naive);
        else if (ptdp_args_is(&a, "--forward-time"))  rc = ptdp_args_double(&a, 0, 1e9, &o->costs.forward);
        else if (ptdp_args_is(&a, "--backward-time")) rc = ptdp_args_double(&a, 0, 1e9, &o->costs.backward);
        else if (ptdp_args_is(&a, "--send-time"))     rc = ptdp_args_double(&a, 0, 1e9, &o->costs.send);
        else if (ptdp_args_is(&a, "--alltoall-time")) rc = ptdp_args_double(&a, 0, 1e9, &o->costs.alltoall);
        else if (ptdp_args_is(&a, "--virtual-stages")) rc = ptdp_args_int(&a, 1, 16, &o->virtual_stages);
        else if (ptdp_args_is(&a, "--backward-input-time")) {
            rc = ptdp_args_double(&a, 0, 1e9, &o->costs.backward_input);
            o->split_times = true;
        } else if (ptdp_args_is(&a, "--backward-weight-time")) {
            rc = ptdp_args_double(&a, 0, 1e9, &o->costs.backward_weight);
            o->split_times = true;
        }
        else if (ptdp_args_is(&a, "--help"))          rc = ptdp_args_switch(&a, &help);
        else                                          rc = ptdp_args_unknown(&a);
        if (rc)
            return PTDP_EXIT_USAGE;
        if (help) {
            usage(stdout);
            return -1;
        }
    }
    if (a.status)
        return PTDP_EXIT_USAGE;
    return 0;
}

/* The flags together, before a schedule is built. */
static int validate(const schedule_options *o)
{
    char msg[512];
    if (!o->naive && (ptdp_schedule_check_flag_v(o->schedule, o->virtual_stages, msg, sizeof msg) != PTDP_OK ||
                      ptdp_schedule_check_row(o->schedule, o->pp, o->micro_batches, o->virtual_stages,
                                              msg, sizeof msg) != PTDP_OK))
        return ptdp_usage_error("schedule", "%s", msg);
    const ptdp_schedule_entry *split = ptdp_schedule_first_with(PTDP_SCHED_SPLIT_BACKWARD);
    if (o->split_times && !(o->schedule->caps & PTDP_SCHED_SPLIT_BACKWARD))
        return ptdp_usage_error("schedule", "--backward-input-time and --backward-weight-time time a "
                                "split backward: --schedule %s runs whole backwards (try --schedule %s)",
                                o->schedule->name, split != NULL ? split->name : "with a W phase");
    if (o->costs.forward + o->costs.backward <= 0)
        return ptdp_usage_error("schedule", "--forward-time and --backward-time are both 0: "
                                "give at least one a positive time");
    if (o->naive && o->schedule != &ptdp_schedule_row_1f1b)
        return ptdp_usage_error("schedule", "--naive applies to --schedule %s only "
                                "(%s has no send/recv exchanges to order)", ptdp_schedule_row_1f1b.name,
                                o->schedule->name);
    /* the outputs can be written, before the schedule is built and timed */
    const ptdp_cli_file out[] = { { "--svg", o->svg }, { "--report", o->report }, { "--html", o->html } };
    return ptdp_cli_check_files("schedule", NULL, 0, out, 3);
}

/* DualPipe's table beside what the lists hold.  DualPipeV (a V): PP = 2p
 * stages, two a device (1x the model / p, as 1F1B on the same p devices).
 * DualPipe (two copies): PP = p devices, each with a whole stage of each
 * copy (2x the parameters of 1F1B on p).  Either way at most PP + 1
 * stage-micro-batches alive a device, and a bubble of (PP/2-1)(F&B+B-3W). */
static void print_dualpipe_table(const ptdp_schedule *s, const ptdp_schedule_timeline *t,
                                 const ptdp_schedule_costs *c)
{
    const int p = s->pp;
    const bool v = s->layout == PTDP_CHUNKS_V;
    const int PP = v ? 2 * p : p;
    int most = 0;
    for (int st = 0; st < p; st++)
        if (ptdp_schedule_peak_in_flight(s, st) > most)
            most = ptdp_schedule_peak_in_flight(s, st);
    if (v)
        printf("  a V of PP = %d stages on p = %d devices: device r holds stages r and %d - r; a\n"
               "  micro-batch alive on both of a device's stages counts twice\n", PP, p, PP - 1);
    else
        printf("  two copies of PP = %d stages on %d devices: device r holds stage r of the down copy and\n"
               "  stage %d - r of the up copy; a micro-batch alive on a stage counts once\n", p, p, p - 1);
    printf("DualPipe's table (PP = %d stages)     table               here\n", PP);
    double idle = 0;
    for (int st = 0; st < p; st++)
        idle += t->idle[st] / p;
    printf("  bubble per device (F = B = W = 1)  (PP/2-1)(F&B+B-3W)  %d x (3 + 2 - 3) = %d; measured %g\n",
           PP / 2 - 1, PP - 2, c->forward > 0 ? idle / c->forward : 0.0);
    printf("  parameters per device              2x a stage          2 stages of %d = %s\n", PP,
           v ? "1x the model / p" : "2x the model / PP");
    printf("  activations per device (stages)    PP+1 = %-12d peak %d\n", PP + 1, most);
}

static void print_peaks(const ptdp_schedule *s, const ptdp_schedule_timeline *t, const ptdp_schedule_costs *c)
{
    printf("peak micro-batches in flight (activations held) per stage:");
    for (int st = 0; st < s->pp; st++)
        printf(" %d", ptdp_schedule_peak_in_flight(s, st));
    printf("\n  (GPipe holds all m = %d on every stage; 1F1B at most min(p - rank, m))\n",
           s->micro_batches);
    if (s->entry != NULL && (s->entry->caps & PTDP_SCHED_PAIRS))
        print_dualpipe_table(s, t, c);
    else if (s->virtual_stages > 1)
        printf("  %s counts chunk-micro-batches, each 1/%d of a stage's activations: stage s\n"
               "  holds up to (p-s-1)*2 + (v-1)*p + 1 of them, the longer warm-up\n", s->name, s->virtual_stages);
    if (s->entry != NULL && (s->entry->caps & PTDP_SCHED_SPLIT_BACKWARD)) {
        printf("W passes owed at once per stage (B keeps each linear layer's input and output gradient\n"
               "  for them):");
        for (int st = 0; st < s->pp; st++)
            printf(" %d", ptdp_schedule_peak_deferred(s, st));
        printf("\n");
    }
}

/* --report's JSON (docs/report-schema.md): what the text printed, each
 * action's times besides.  Times per action as timed (c). */
static void json_actions(FILE *f, const ptdp_schedule_result *r)
{
    char a[PTDP_JSON_NUMBER_MAX], b[PTDP_JSON_NUMBER_MAX];
    fprintf(f, "  \"actions\": [\n");
    for (int st = 0; st < r->s->pp; st++) {
        fprintf(f, "    [");
        int n = 0;
        for (int i = 0; i < r->s->stage[st].count; i++) {
            const ptdp_action *x = &r->s->stage[st].actions[i];
            if (x->kind != PTDP_ACT_FORWARD && x->kind != PTDP_ACT_BACKWARD && x->kind != PTDP_ACT_BACKWARD_INPUT &&
                x->kind != PTDP_ACT_BACKWARD_WEIGHT)
                continue;
            const char *kind = x->kind == PTDP_ACT_FORWARD ? "F" : x->kind == PTDP_ACT_BACKWARD_WEIGHT ? "W" : "B";
            fprintf(f, "%s{\"kind\": \"%s\", \"mb\": %d, \"chunk\": %d, \"start\": %s, \"end\": %s}",
                    n++ ? ", " : "", kind, x->mb, x->chunk, ptdp_json_number(r->t->time[st][i].start, a),
                    ptdp_json_number(r->t->time[st][i].end, b));
        }
        fprintf(f, "]%s\n", st + 1 < r->s->pp ? "," : "");
    }
    fprintf(f, "  ]\n");
}

static void json_report(FILE *f, const ptdp_schedule_result *r)
{
    const ptdp_schedule *s = r->s;
    const ptdp_schedule_timeline *t = r->t;
    const bool split = s->entry != NULL && (s->entry->caps & PTDP_SCHED_SPLIT_BACKWARD);
    char a[PTDP_JSON_NUMBER_MAX], b[PTDP_JSON_NUMBER_MAX], c[PTDP_JSON_NUMBER_MAX], d[PTDP_JSON_NUMBER_MAX];
    fprintf(f, "{\n  \"schema\": \"ptdp-schedule-report/1\",\n  \"schedule\": ");
    ptdp_json_write_string(f, s->name);
    fprintf(f, ",\n  \"pp\": %d, \"micro_batches\": %d, \"virtual_stages\": %d,\n", s->pp, s->micro_batches,
            s->virtual_stages);
    fprintf(f, "  \"costs\": {\"forward\": %s, \"backward\": %s, \"send\": %s, \"alltoall\": %s",
            ptdp_json_number(r->c->forward, a), ptdp_json_number(r->c->backward, b), ptdp_json_number(r->c->send, c),
            ptdp_json_number(r->c->alltoall, d));
    if (split)
        fprintf(f, ", \"backward_input\": %s, \"backward_weight\": %s", ptdp_json_number(r->c->backward_input, a),
                ptdp_json_number(r->c->backward_weight, b));
    const char *words;
    const double formula = ptdp_schedule_bubble_formula(s, &words);
    fprintf(f, "},\n  \"makespan\": %s,\n  \"bubble\": {\"measured\": %s, \"formula\": %s, \"formula_words\": ",
            ptdp_json_number(t->makespan, a), ptdp_json_number(t->bubble, b), ptdp_json_number(formula, c));
    ptdp_json_write_string(f, words);
    fprintf(f, "},\n  \"stages\": [\n");
    for (int st = 0; st < s->pp; st++) {
        fprintf(f, "    {\"stage\": %d, \"busy\": %s, \"idle\": %s, \"idle_fraction\": %s, \"peak_in_flight\": %d",
                st, ptdp_json_number(t->busy[st], a), ptdp_json_number(t->idle[st], b),
                ptdp_json_number(t->makespan > 0 ? t->idle[st] / t->makespan : 0, c),
                ptdp_schedule_peak_in_flight(s, st));
        if (split)
            fprintf(f, ", \"peak_deferred\": %d", ptdp_schedule_peak_deferred(s, st));
        fprintf(f, "}%s\n", st + 1 < s->pp ? "," : "");
    }
    fprintf(f, "  ],\n");
    json_actions(f, r);
    fprintf(f, "}\n");
}

/* --report and --html: the JSON made once in memory, so the page embeds
 * the very bytes the report holds. */
static int write_outputs(const schedule_options *o, const ptdp_schedule_result *r)
{
    if (o->report == NULL && o->html == NULL)
        return PTDP_EXIT_OK;
    char *json = NULL, msg[1024];
    size_t len = 0;
    FILE *m = open_memstream(&json, &len);
    if (m == NULL) {
        fprintf(stderr, "ptdp schedule: out of memory for the report\n");
        return PTDP_EXIT_FAIL;
    }
    json_report(m, r);
    int rc = fclose(m) == 0 ? PTDP_OK : PTDP_ENOMEM;
    if (rc == PTDP_OK && o->report != NULL) {
        if ((rc = ptdp_write_file_atomic(o->report, json, len, msg, sizeof msg)) != PTDP_OK)
            fprintf(stderr, "ptdp schedule: --report %s\n", msg);
        else
            printf("wrote %s\n", o->report);
    }
    if (rc == PTDP_OK && o->html != NULL) {
        if ((rc = ptdp_html_schedule(o->html, r, json, len, msg, sizeof msg)) != PTDP_OK)
            fprintf(stderr, "ptdp schedule: --html %s\n", msg);
        else
            printf("wrote %s\n", o->html);
    }
    if (rc == PTDP_ENOMEM && json == NULL)
        fprintf(stderr, "ptdp schedule: out of memory for the report\n");
    free(json);
    return rc == PTDP_OK ? PTDP_EXIT_OK : PTDP_EXIT_FAIL;
}

static int run(const schedule_options *o, ptdp_schedule *s)
{
    ptdp_schedule_verdict v;
    if (ptdp_schedule_validate(s, &v) != PTDP_OK) {
        printf("schedule %s, p = %d, m = %d: %s\n",
               s->name, s->pp, s->micro_batches, v.message);
        if (o->report != NULL || o->html != NULL)
            fprintf(stderr, "ptdp schedule: %s%s%s not written: the schedule is not valid\n",
                    o->report ? "--report" : "", o->report && o->html ? " and " : "", o->html ? "--html" : "");
        if (o->naive && v.deadlock)
            printf("(without --naive, %s orders each exchange even/odd: an even stage sends "
                   "first, an odd stage receives first, so the two first calls always pair up)\n",
                   ptdp_schedule_row_1f1b.name);
        return PTDP_EXIT_FAIL;
    }
    printf("%s\n", v.message);
    /* The flags price a micro-batch on a whole stage; an action on one of
     * v chunks does 1/v of that work (DualPipe's two chunks are two whole
     * stages, one of each copy). */
    ptdp_schedule_costs c = o->costs;
    const ptdp_pp_layout lay = ptdp_schedule_layout(s);
    const double v_ = ptdp_pp_layout_copies(&lay) == 2 ? 1 : s->virtual_stages;
    c.forward /= v_;
    c.backward /= v_;
    c.alltoall /= v_;
    if (!o->split_times)
        c.backward_input = c.backward_weight = c.backward / 2;
    else if (s->virtual_stages > 1) {
        c.backward_input /= v_;
        c.backward_weight /= v_;
    }
    if (s->entry != NULL && (s->entry->caps & PTDP_SCHED_SPLIT_BACKWARD))
        printf("costs per micro-batch and stage: forward %g, B %g, W %g, send %g time units "
               "(--forward-time, --backward-input-time, --backward-weight-time, --send-time)\n\n",
               c.forward, c.backward_input, c.backward_weight, c.send);
    else
        printf("costs per micro-batch and stage: forward %g, backward %g, send %g time units "
               "(--forward-time, --backward-time, --send-time)%s\n\n",
               o->costs.forward, o->costs.backward, o->costs.send,
               v_ > 1 ? "; a chunk takes 1/v of them" : "");

    if (c.alltoall > 0)
        printf("all-to-alls %g per forward or backward (--alltoall-time): waited for alone, under the other's "
               "compute in an F&B pair\n\n", c.alltoall);
    ptdp_schedule_timeline *t = NULL;
    int rc = ptdp_schedule_simulate(s, &c, &t);
    if (rc == PTDP_OK)
        rc = ptdp_schedule_ascii(s, t, stdout);
    if (rc != PTDP_OK) {
        fprintf(stderr, "ptdp schedule: timing the schedule failed (%s)\n", ptdp_strerror(rc));
        ptdp_schedule_timeline_destroy(t);
        return PTDP_EXIT_FAIL;
    }
    print_peaks(s, t, &c);
    if (o->svg != NULL) {
        char msg[512];
        if (ptdp_schedule_svg(s, t, o->svg, msg, sizeof msg) != PTDP_OK) {
            fprintf(stderr, "ptdp schedule: --svg %s\n", msg);   /* msg names the path */
            ptdp_schedule_timeline_destroy(t);
            return PTDP_EXIT_FAIL;
        }
        printf("wrote %s\n", o->svg);
    }
    const ptdp_schedule_result r = { s, t, &c };
    rc = write_outputs(o, &r);
    ptdp_schedule_timeline_destroy(t);
    return rc;
}

int ptdp_cmd_schedule(int argc, char **argv)
{
    schedule_options o = {
        .pp = 4, .micro_batches = 8, .virtual_stages = 1, .schedule = ptdp_schedule_default(),
        .costs = { .forward = 1, .backward = 2, .send = 0 },
    };
    int rc = parse(argc, argv, &o);
    if (rc != 0)
        return rc < 0 ? PTDP_EXIT_OK : rc;
    if ((rc = validate(&o)) != 0)
        return rc;

    ptdp_schedule *s = NULL;
    rc = ptdp_schedule_build(o.naive ? &ptdp_schedule_row_1f1b_naive : o.schedule, o.pp, o.micro_batches,
                             o.naive ? 1 : o.virtual_stages, &s);
    if (rc != PTDP_OK) {
        fprintf(stderr, "ptdp schedule: cannot build %s (%s)\n", o.schedule->name, ptdp_strerror(rc));
        return PTDP_EXIT_FAIL;
    }
    if (o.list) {
        ptdp_schedule_print(s, stdout);
        printf("\n");
    }
    rc = run(&o, s);
    ptdp_schedule_destroy(s);
    return rc;
}
