/*
 * html_pages.h — the pages `--html FILE` writes, one file per command:
 *
 *     html_schedule.c   ptdp schedule --html   the timeline, its bubble, a slider over micro-batches
 *     html_plan.c       ptdp plan --html       the layouts ranked, memory and time split as bars
 *     html_train.c      ptdp train --html      the run: loss, each device's timeline, memory, bytes, time
 *
 * Each page embeds the command's own JSON (its --report or --json output,
 * the same bytes) and shows numbers only from it, by key (ptdp/html.h), so
 * tests/cli/html_page.py checks a page against that JSON without a browser.
 */
#ifndef PTDP_CLI_HTML_PAGES_H
#define PTDP_CLI_HTML_PAGES_H

#include <stddef.h>

#include "plan_print.h"
#include "ptdp/comm.h"
#include "ptdp/launch.h"
#include "ptdp/schedule.h"
#include "ptdp/train.h"

/* What `ptdp schedule` computed: the lists, their timing, and the costs of
 * one action as timed (with v chunks, 1/v of the flags'). */
typedef struct {
    const ptdp_schedule *s;
    const ptdp_schedule_timeline *t;
    const ptdp_schedule_costs *c;
} ptdp_schedule_result;

/* The schedule's page to `path`, json its --report text.  0, or an error
 * with the reason (naming the path) in msg. */
int ptdp_html_schedule(const char *path, const ptdp_schedule_result *r, const char *json, size_t len,
                       char *msg, size_t msglen);

/* The plan's page: the n best layouts c (best first) of `ptdp plan --json`'s
 * text json. */
int ptdp_html_plan(const char *path, const plan_options *o, const ptdp_plan_candidate *c, int n,
                   const char *json, size_t len, char *msg, size_t msglen);

/* What `ptdp train` ran and measured; lr->traces from launch's keep_traces
 * (NULL: no timeline). */
typedef struct {
    const ptdp_train_config *c;
    const ptdp_launch_result *lr;
    const ptdp_train_result *res;
    const char *check;            /* --check's verdict line, or NULL */
    const ptdp_profile *profile;  /* the clock's: which node a device sits in */
} ptdp_train_page;

/* The run's page: report its --report JSON text, log a JSON array of its
 * --log lines. */
int ptdp_html_train(const char *path, const ptdp_train_page *p, const char *report, size_t report_len,
                    const char *log, size_t log_len, char *msg, size_t msglen);

/* Implemented with the train command (cli/train/): */
/* --html's page of a run (html_train.c) to path, for `ptdp cmd`: the report's JSON and
 * the log's lines inside, lr->traces drawn when kept (launch.h's
 * keep_traces), verdict (--check's line) or NULL.  0, or 1 after saying
 * why on stderr. */
int ptdp_train_write_page(const char *cmd, const char *path, const ptdp_train_config *cfg, const ptdp_launch_opts *opts,
                          const ptdp_launch_result *lr, const ptdp_train_result *res, const char *verdict);
/* The groups bytes_sent is told by, g = 0, 1, … ("dp", "tp", …; NULL past
 * the last), and the bytes a device sent in one (0: never used). */
const char *ptdp_report_group_name(int g);
/* How many of those the report writes for a run: the first seven, and
 * HSDP's shard and replica groups too under --shard-group N < dp. */
int ptdp_report_groups(const ptdp_train_config *c);
double ptdp_report_group_sent(const ptdp_comm_stats *s, const char *name);

#endif
