/* report.h — running a training configuration and reporting on it (train_run.c). */
#ifndef PTDP_CLI_REPORT_H
#define PTDP_CLI_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "ptdp/train.h"

/* What a run prints and writes besides training. */
typedef struct {
    bool check, quiet;
    const char *log, *save, *save_init, *dump, *report;   /* paths, or NULL */
    const char *html;             /* --html: a page of the run, or NULL    */
    const char *data_name;        /* the GPT's --data, or NULL: built in  */
} ptdp_train_outputs;

/* Run cfg, print the steps and the per-device summary, optionally check it
 * against the single-device baseline and write the requested files.
 * Returns the process exit code (0, 1). */
int ptdp_train_and_report(ptdp_train_config *cfg, const ptdp_launch_opts *opts, const ptdp_train_outputs *out);

/* The per-run report (train_report.c): per device, the peak memory by
 * category, the bytes sent per group (dp, tp, pp) and per step, the virtual
 * compute / communication / idle time — printed as tables, with the DP
 * traffic beside its formula and, with ZeRO, what it saved. */
void ptdp_report_print(const ptdp_train_config *cfg, const ptdp_launch_result *lr, const ptdp_train_result *res,
                       ptdp_algo algo, const ptdp_profile *prof);
/* The same figures as JSON (docs/report-schema.md), written
 * atomically (ptdp/file.h).  0 or PTDP_EIO with the reason in msg. */
int  ptdp_report_write_json(const char *path, const ptdp_train_config *cfg, const ptdp_launch_opts *opts,
                            const ptdp_launch_result *lr, const ptdp_train_result *res,
                            char *msg, size_t msglen);
/* The same JSON as a malloc'ed text (*text, *len: --html embeds the very
 * bytes --report writes).  0 or PTDP_ENOMEM. */
int  ptdp_report_json_text(const ptdp_train_config *cfg, const ptdp_launch_opts *opts,
                           const ptdp_launch_result *lr, const ptdp_train_result *res, char **text, size_t *len);
/* --zero-hpz (train_report_hpz.c): ZeRO-3's bytes a step across nodes and
 * inside a node, and the secondary copy, each beside its formula — as
 * lines, and as the run's JSON keys hpz_bytes_per_step and
 * hpz_secondary_bytes (after a comma).  Nothing without hpZ. */
void ptdp_report_print_hpz(const ptdp_train_config *cfg, const ptdp_launch_result *lr, const ptdp_train_result *res);
void ptdp_report_json_hpz(FILE *f, const ptdp_train_config *cfg, const ptdp_launch_result *lr,
                          const ptdp_train_result *res);
/* --zero-qgz (train_report_qgz.c): the gradient's bytes a step inside a
 * node and across nodes beside their formulas and the reduce-scatter's —
 * as lines, and as the run's JSON key qgz_grad_bytes_per_step (after a
 * comma).  Nothing without qgZ. */
void ptdp_report_print_qgz(const ptdp_train_config *cfg, const ptdp_launch_result *lr, const ptdp_train_result *res);
void ptdp_report_json_qgz(FILE *f, const ptdp_train_config *cfg, const ptdp_launch_result *lr,
                          const ptdp_train_result *res);
/* The gradient sums a step (the backwards ZeRO reduce-scatters after). */
int  ptdp_report_gradient_sums(const ptdp_train_config *cfg);
/* A counter's numbers (counters.h) as a JSON key after a comma: `, "NAME":
 * x`, a list or a list of lists, as its shape says (--log's lines). */
void ptdp_report_json_counter(FILE *f, const ptdp_counter *k, const double *x);

#endif
