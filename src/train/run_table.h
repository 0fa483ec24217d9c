/*
 * run_table.h — the run's table: every device's numbers for every step, on
 * the host (run_table.c).
 *
 *                 device 0   device 1   …   device w-1
 *   step 0        row        row            row         → printed once full
 *   step 1        row        row            row
 *
 * Logging is host bookkeeping, not device communication: each device writes
 * its row for a step, and the last one to finish the step prints it (the
 * observer).  The loss is summed there from the last stage's shards, so
 * logging adds no collective and no byte to what the lessons count.
 *
 * Beside the rows, the run's counters (counters.h): whatever the model and
 * the parallelisms published, each device's numbers per step and per run,
 * merged here — the step's sum over the devices — for --log and --report
 * to read by name.
 */
#ifndef PTDP_TRAIN_RUN_TABLE_H
#define PTDP_TRAIN_RUN_TABLE_H

#include <pthread.h>

#include "ptdp/device.h"
#include "ptdp/train.h"

/* One device's numbers for one step (its counters beside: counts). */
typedef struct {
    double v0, v1, w0, w1, bytes, loss, grad_norm;
    double phase_end, busy;       /* pipeline phase: end (virtual), compute+comm in it */
} ptdp_run_row;

typedef struct {
    const ptdp_train_config *cfg;
    int world;
    long first_step;              /* global steps already taken (resume) */
    ptdp_run_row *ds;             /* [steps][world]                      */
    int *done;                    /* [steps] devices finished            */
    int next_report;
    pthread_mutex_t mu;
    bool mu_ready;                /* mu initialised                      */
    ptdp_step_observer observer;
    void *observer_ctx;
    ptdp_train_result *result;
    size_t *peak_acts;            /* [world]                             */
    size_t *peak_wgrad;           /* [world]: bytes held for W           */
    int *peak_in_flight;          /* [world]                             */
    int targets_per_sample;       /* the model's label_cols (device 0)   */
    /* The run's counters (counters.h), published before the launch: */
    ptdp_counters counters;
    double *counts;               /* [steps][world][step len]: each device's
                                     numbers of each step                */
    double *step_counts;          /* [steps][step len]: summed over the
                                     devices (a mean per sample where
                                     published so)                        */
    double *device_counts;        /* [world][device len]: each device's of
                                     the run                              */
    bool own_counts;              /* the last two are the table's, not the
                                     result's (result NULL)              */
} ptdp_run_table;

/* The table for cfg on `world` devices with the counters published for
 * it, and result's arrays (result may be NULL).  PTDP_ENOMEM with "host
 * out of memory" in msg. */
int  ptdp_run_table_open(ptdp_run_table *r, const ptdp_train_config *cfg, const ptdp_counters *counters, int world,
                         ptdp_step_observer observer, void *observer_ctx, ptdp_train_result *result, char *msg,
                         size_t msglen);
/* A device finished step s (0-based in this run): record its row, and
 * report every step now complete.  One device per host (MPI): the hosts
 * merge the step's row first. */
int  ptdp_run_table_step_done(ptdp_device *dev, ptdp_run_table *r, int s, const ptdp_run_row *x);
/* Device `rank`'s way into the run's counters (counters.h): its row of
 * the run, and its row of step s (s < 0: none, at set-up).  tp_lead: TP
 * rank 0, which alone counts what every TP rank sees alike. */
void ptdp_run_table_counts(ptdp_run_table *r, int s, int rank, bool tp_lead, ptdp_counts *out);
/* One device per host: merge the hosts' peaks, parameter counts,
 * counters of the run and states, so every host holds the whole run's (launch.h). */
int  ptdp_run_table_merge_hosts(ptdp_device *dev, ptdp_run_table *r);
/* After the devices: with ok, the result's bubble and per-stage peaks;
 * then free the table. */
void ptdp_run_table_close(ptdp_run_table *r, bool ok);

#endif
