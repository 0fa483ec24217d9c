/*
 * run_table.c — the run's table (run_table.h): each device's numbers per
 * step, the step reported once every device has finished it, and the
 * bubble measured from them.
 *
 *   step s, device d:  v0 ── pipeline phase ── phase_end ── optimizer ── v1
 *   the step's time      max v1 − min v0 over the devices (virtual clock)
 *   its bubble           1 − busy / (max phase_end − min v0), averaged
 *
 * With one process per device (MPI) every process has a table of its own;
 * the hosts merge them (ptdp_host_merge, launch.h), also outside the
 * counted bytes and the virtual clock.
 *
 * The run's counters (counters.h) have tables of their own beside the
 * rows, filled by the devices and merged here:
 *
 *   counts         [step][device][number]   each device adds its share
 *        │ the step done: sum over the devices (÷ B: a mean per sample)
 *        ▼
 *   step_counts    [step][number]           → --log's keys, the reports
 *   device_counts  [device][number]         each device's of the run
 */
#include "train/run_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"
#include "ptdp/launch.h"
#include "ptdp/mesh.h"
#include "ptdp/schedule.h"

/* The run's counters: every device's numbers per step, their sums per
 * step, and every device's of the run (in the result, where the reports
 * read them, or the table's own). */
static int open_counts(ptdp_run_table *r, const ptdp_counters *counters, int world, size_t steps,
                       ptdp_train_result *result)
{
    r->counters = *counters;
    const size_t step_len = (size_t)counters->len[PTDP_COUNT_STEP];
    const size_t device_len = (size_t)counters->len[PTDP_COUNT_DEVICE];
    r->counts = calloc(steps * (size_t)world * step_len + 1, sizeof *r->counts);
    r->step_counts = calloc(steps * step_len + 1, sizeof *r->step_counts);
    r->device_counts = calloc((size_t)world * device_len + 1, sizeof *r->device_counts);
    r->own_counts = result == NULL;
    if (result != NULL) {
        result->counters = *counters;
        result->step_counts = r->step_counts;
        result->device_counts = r->device_counts;
    }
    return r->counts != NULL && r->step_counts != NULL && r->device_counts != NULL ? PTDP_OK : PTDP_ENOMEM;
}

int ptdp_run_table_open(ptdp_run_table *r, const ptdp_train_config *cfg, const ptdp_counters *counters, int world,
                        ptdp_step_observer observer, void *observer_ctx, ptdp_train_result *result, char *msg,
                        size_t msglen)
{
    *r = (ptdp_run_table){
        .cfg = cfg, .world = world, .observer = observer, .observer_ctx = observer_ctx,
        .first_step = cfg->resume ? cfg->resume->step : 0, .result = result,
        .targets_per_sample = 1,
    };
    size_t steps = (size_t)(cfg->steps > 0 ? cfg->steps : 1);
    r->ds = calloc(steps * (size_t)world, sizeof *r->ds);
    r->done = calloc(steps, sizeof *r->done);
    r->peak_acts = calloc((size_t)world, sizeof *r->peak_acts);
    r->peak_wgrad = calloc((size_t)world, sizeof *r->peak_wgrad);
    r->peak_in_flight = calloc((size_t)world, sizeof *r->peak_in_flight);
    if (result != NULL) {
        memset(result, 0, sizeof *result);
        result->steps = cfg->steps;
        result->log = calloc(steps, sizeof *result->log);
        result->peak_acts = calloc((size_t)cfg->pp, sizeof *result->peak_acts);
        result->peak_wgrad = calloc((size_t)cfg->pp, sizeof *result->peak_wgrad);
        result->param_elements = calloc((size_t)world, sizeof *result->param_elements);
    }
    if (r->ds == NULL || r->done == NULL || r->peak_acts == NULL || r->peak_in_flight == NULL ||
        r->peak_wgrad == NULL ||
        (result != NULL && (result->log == NULL || result->peak_acts == NULL || result->peak_wgrad == NULL ||
                            result->param_elements == NULL))) {
        snprintf(msg, msglen, "host out of memory");
        ptdp_run_table_close(r, false);
        return PTDP_ENOMEM;
    }
    if (open_counts(r, counters, world, steps, result) != 0) {
        snprintf(msg, msglen, "host out of memory");
        ptdp_run_table_close(r, false);
        return PTDP_ENOMEM;
    }
    pthread_mutex_init(&r->mu, NULL);
    r->mu_ready = true;
    return PTDP_OK;
}

void ptdp_run_table_counts(ptdp_run_table *r, int s, int rank, bool tp_lead, ptdp_counts *out)
{
    const size_t step_len = (size_t)r->counters.len[PTDP_COUNT_STEP];
    *out = (ptdp_counts){ .reg = &r->counters, .tp_lead = tp_lead };
    out->row[PTDP_COUNT_DEVICE] = r->device_counts + (size_t)rank * r->counters.len[PTDP_COUNT_DEVICE];
    if (s >= 0)
        out->row[PTDP_COUNT_STEP] = r->counts + ((size_t)s * r->world + rank) * step_len;
}

/* Step s's counters: the sum over the devices, in rank order; a counter
 * published per sample then divided by the global batch. */
static void sum_counts(ptdp_run_table *r, int s)
{
    const ptdp_counters *k = &r->counters;
    const size_t n = (size_t)k->len[PTDP_COUNT_STEP];
    double *sum = r->step_counts + (size_t)s * n;
    for (int d = 0; d < r->world; d++)
        for (size_t q = 0; q < n; q++)
            sum[q] += r->counts[((size_t)s * r->world + d) * n + q];
    for (int i = 0; i < k->n; i++)
        if (k->c[i].kind == PTDP_COUNT_STEP && (k->c[i].flags & PTDP_COUNT_PER_SAMPLE))
            for (int q = 0; q < k->c[i].len; q++)
                sum[k->c[i].offset + q] /= r->cfg->batch;
}

static ptdp_step_log summarize(ptdp_run_table *r, int s)
{
    const ptdp_train_config *c = r->cfg;
    ptdp_step_log log = { .step = r->first_step + s + 1 };
    double v0 = INFINITY, v1 = -INFINITY, loss = 0;
    for (int d = 0; d < r->world; d++) {
        const ptdp_run_row *x = &r->ds[(size_t)s * r->world + d];
        v0 = fmin(v0, x->v0);
        v1 = fmax(v1, x->v1);
        log.wall_s = fmax(log.wall_s, x->w1 - x->w0);
        log.bytes += x->bytes;
        loss += x->loss;
    }
    sum_counts(r, s);
    log.virtual_s = v1 - v0;
    log.loss = loss / ((double)c->batch * r->targets_per_sample);
    log.grad_norm = r->ds[(size_t)s * r->world].grad_norm;
    return log;
}

/* A device finished step s: record, and report every step now complete. */
int ptdp_run_table_step_done(ptdp_device *dev, ptdp_run_table *r, int s, const ptdp_run_row *x)
{
    int rank = dev->rank, rc = 0;
    pthread_mutex_lock(&r->mu);
    r->ds[(size_t)s * r->world + rank] = *x;
    r->done[s]++;
    if (!ptdp_host_shared(dev)) {
        /* One device per host (processes, MPI): the row holds this
         * device's entry alone until the hosts merge theirs (launch.h). */
        rc = ptdp_host_merge(dev, &r->ds[(size_t)s * r->world], (size_t)r->world * sizeof *r->ds);
        const size_t n = (size_t)r->world * r->counters.len[PTDP_COUNT_STEP];
        if (rc == 0 && n > 0)
            rc = ptdp_host_merge(dev, r->counts + (size_t)s * n, n * sizeof *r->counts);
        r->done[s] = rc == 0 ? r->world : 0;
    }
    while (r->next_report < r->cfg->steps && r->done[r->next_report] == r->world) {
        ptdp_step_log log = summarize(r, r->next_report);
        if (r->result != NULL && r->result->log != NULL)
            r->result->log[r->next_report] = log;
        if (r->observer != NULL)
            r->observer(&log, r->observer_ctx);
        r->next_report++;
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

/* One device per host (processes, MPI): each host's tables hold only its
 * own device's entries and shards; merge them, so that every host (rank
 * 0's prints and saves) holds the whole run's, as threads do (launch.h). */
int ptdp_run_table_merge_hosts(ptdp_device *dev, ptdp_run_table *r)
{
    const ptdp_train_config *c = r->cfg;
    size_t w = (size_t)r->world;
    int rc = ptdp_host_merge(dev, r->peak_acts, w * sizeof *r->peak_acts);
    if (rc == 0)
        rc = ptdp_host_merge(dev, r->peak_wgrad, w * sizeof *r->peak_wgrad);
    if (rc == 0)
        rc = ptdp_host_merge(dev, r->peak_in_flight, w * sizeof *r->peak_in_flight);
    if (rc == 0 && r->result != NULL && r->result->param_elements != NULL)
        rc = ptdp_host_merge(dev, r->result->param_elements, w * sizeof *r->result->param_elements);
    if (rc == 0 && r->counters.len[PTDP_COUNT_DEVICE] > 0)
        rc = ptdp_host_merge(dev, r->device_counts, w * r->counters.len[PTDP_COUNT_DEVICE] * sizeof *r->device_counts);
    ptdp_state *states[2] = { c->final_state, c->init_state };
    for (int k = 0; k < 2; k++)
        for (int i = 0; rc == 0 && states[k] != NULL && i < states[k]->ntensors; i++) {
            ptdp_state_tensor *t = &states[k]->t[i];
            rc = ptdp_host_merge(dev, t->data, (size_t)t->rows * (size_t)t->cols * sizeof *t->data);
        }
    return rc;
}


static void bubble(ptdp_run_table *r, ptdp_train_result *res)
{
    const ptdp_train_config *c = r->cfg;
    /* The schedule's own formula, its row's: (p-1)/(m+p-1), or
     * (p-1)/(v m+p-1) for the interleaved one (schedule.h). */
    res->bubble_formula = ptdp_bubble_formula(c->pp, c->micro_batches);
    res->bubble_words = "(p-1)/(m+p-1)";
    if (c->token_slices > 1) {
        /* TeraPipe: GPipe over m k units, as if the slices cost the same;
         * later slices attend to more keys, so the measured bubble differs */
        res->bubble_formula = ptdp_bubble_formula(c->pp, c->micro_batches * c->token_slices);
        res->bubble_words = "(p-1)/(k*m+p-1), uniform slices";
    } else {
        const ptdp_schedule_entry *e = ptdp_train_schedule(c);
        res->bubble_formula = e->bubble(c->pp, c->micro_batches, ptdp_train_virtual_stages(c));
        res->bubble_words = e->bubble_words;
    }
    /* Idle fraction of every device's pipeline phase, averaged over devices
     * and steps.  The phase starts when the first device of the step starts
     * and ends when the last one reaches its optimizer step. */
    double sum = 0;
    int count = 0;
    for (int s = 0; s < c->steps; s++) {
        double t0 = INFINITY, t1 = -INFINITY;
        for (int d = 0; d < r->world; d++) {
            const ptdp_run_row *x = &r->ds[(size_t)s * r->world + d];
            t0 = fmin(t0, x->v0);
            t1 = fmax(t1, x->phase_end);
        }
        if (!(t1 > t0))
            continue;
        for (int d = 0; d < r->world; d++) {
            sum += 1.0 - r->ds[(size_t)s * r->world + d].busy / (t1 - t0);
            count++;
        }
    }
    res->bubble_measured = count ? sum / count : 0;
}

void ptdp_run_table_close(ptdp_run_table *r, bool ok)
{
    const ptdp_train_config *cfg = r->cfg;
    ptdp_train_result *result = r->result;
    if (r->mu_ready)
        pthread_mutex_destroy(&r->mu);
    r->mu_ready = false;
    if (ok && result != NULL) {
        bubble(r, result);
        for (int d = 0; d < r->world; d++) {
            int dp_rank, cp_rank, tp_rank, pp_rank;
            ptdp_mesh_coords_cp(cfg->dp, ptdp_train_cp(cfg), cfg->tp, cfg->pp, d, &dp_rank, &cp_rank, &tp_rank,
                                &pp_rank);
            if (r->peak_acts[d] > result->peak_acts[pp_rank])
                result->peak_acts[pp_rank] = r->peak_acts[d];
            if (r->peak_wgrad[d] > result->peak_wgrad[pp_rank])
                result->peak_wgrad[pp_rank] = r->peak_wgrad[d];
        }
    }
    free(r->ds);
    free(r->done);
    free(r->peak_acts);
    free(r->peak_wgrad);
    free(r->peak_in_flight);
    free(r->counts);
    if (r->own_counts) {
        free(r->step_counts);
        free(r->device_counts);
    }
    r->counts = r->step_counts = r->device_counts = NULL;
    r->ds = NULL;
    r->done = NULL;
    r->peak_acts = r->peak_wgrad = NULL;
    r->peak_in_flight = NULL;
}

/* ------------------------------------------- the counters, read by name */

const double *ptdp_train_step_counts(const ptdp_train_result *r, int s, const char *name)
{
    if (r == NULL || r->step_counts == NULL || s < 0 || s >= r->steps)
        return NULL;
    return ptdp_counters_in(&r->counters, name, PTDP_COUNT_STEP,
                            r->step_counts + (size_t)s * r->counters.len[PTDP_COUNT_STEP]);
}

const double *ptdp_train_device_counts(const ptdp_train_result *r, int rank, const char *name)
{
    if (r == NULL || r->device_counts == NULL || rank < 0)
        return NULL;
    return ptdp_counters_in(&r->counters, name, PTDP_COUNT_DEVICE,
                            r->device_counts + (size_t)rank * r->counters.len[PTDP_COUNT_DEVICE]);
}
