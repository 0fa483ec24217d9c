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
 */
#ifndef PTDP_TRAIN_RUN_TABLE_H
#define PTDP_TRAIN_RUN_TABLE_H

#include <pthread.h>

#include "ptdp/device.h"
#include "ptdp/train.h"

/* One device's numbers for one step. */
typedef struct {
    double v0, v1, w0, w1, bytes, loss, grad_norm;
    double aux;                   /* the stage's auxiliary losses (tp rank 0) */
    bool has_aux;
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
    int nstats;                   /* the model's counts per step (model.h) */
    double *stats;                /* [steps][world][nstats]: each device's */
    double *sums;                 /* [steps][nstats]: summed over devices,
                                     the result's (or the table's own)   */
    bool own_sums;
} ptdp_run_table;

/* The table for cfg on `world` devices, and result's arrays (result may
 * be NULL).  PTDP_ENOMEM with "host out of memory" in msg. */
int  ptdp_run_table_open(ptdp_run_table *r, const ptdp_train_config *cfg, int world, ptdp_step_observer observer,
                         void *observer_ctx, ptdp_train_result *result, char *msg, size_t msglen);
/* A device finished step s (0-based in this run): record its row, and
 * report every step now complete.  One device per host (MPI): the hosts
 * merge the step's row first. */
int  ptdp_run_table_step_done(ptdp_device *dev, ptdp_run_table *r, int s, const ptdp_run_row *x);
/* Where device `rank` adds its counts of step s (nstats zeros; NULL when
 * the model counts nothing). */
double *ptdp_run_table_stats(ptdp_run_table *r, int s, int rank);
/* One device per host: merge the hosts' peaks, parameter counts and
 * states, so every host holds the whole run's (launch.h). */
int  ptdp_run_table_merge_hosts(ptdp_device *dev, ptdp_run_table *r);
/* After the devices: with ok, the result's bubble and per-stage peaks;
 * then free the table. */
void ptdp_run_table_close(ptdp_run_table *r, bool ok);

#endif
