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
 * A model that counts something per step (model.h's stats_len: an MoE's
 * tokens per expert) has a second table beside the rows, nstats numbers
 * per step and device, summed over the devices as the loss is.
 */
#include "train/run_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"
#include "ptdp/launch.h"
#include "ptdp/mesh.h"
#include "ptdp/models.h"
#include "ptdp/schedule.h"

/* The model's counts: every device's per step, and their sums per step
 * (in the result, where its log points, or the table's own). */
static int open_stats(ptdp_run_table *r, const ptdp_train_config *cfg, int world, size_t steps,
                      ptdp_train_result *result)
{
    const ptdp_model_ops *ops = ptdp_model_of(&cfg->model);
    r->nstats = ops != NULL && ops->stats_len != NULL && ops->stats_add != NULL ? ops->stats_len(&cfg->model) : 0;
    if (r->nstats <= 0) {
        r->nstats = 0;
        return PTDP_OK;
    }
    r->stats = calloc(steps * (size_t)world * r->nstats, sizeof *r->stats);
    r->sums = calloc(steps * (size_t)r->nstats, sizeof *r->sums);
    r->own_sums = result == NULL;
    if (result != NULL) {
        result->stats = r->sums;
        result->nstats = r->nstats;
    }
    return r->stats != NULL && r->sums != NULL ? PTDP_OK : PTDP_ENOMEM;
}

int ptdp_run_table_open(ptdp_run_table *r, const ptdp_train_config *cfg, int world, ptdp_step_observer observer,
                        void *observer_ctx, ptdp_train_result *result, char *msg, size_t msglen)
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
        result->expert_elements = calloc((size_t)world, sizeof *result->expert_elements);
        result->ep_bytes = calloc((size_t)world, sizeof *result->ep_bytes);
    }
    if (r->ds == NULL || r->done == NULL || r->peak_acts == NULL || r->peak_in_flight == NULL ||
        r->peak_wgrad == NULL ||
        (result != NULL && (result->log == NULL || result->peak_acts == NULL || result->peak_wgrad == NULL ||
                            result->param_elements == NULL || result->expert_elements == NULL ||
                            result->ep_bytes == NULL))) {
        snprintf(msg, msglen, "host out of memory");
        ptdp_run_table_close(r, false);
        return PTDP_ENOMEM;
    }
    if (open_stats(r, cfg, world, steps, result) != 0) {
        snprintf(msg, msglen, "host out of memory");
        ptdp_run_table_close(r, false);
        return PTDP_ENOMEM;
    }
    pthread_mutex_init(&r->mu, NULL);
    r->mu_ready = true;
    return PTDP_OK;
}

double *ptdp_run_table_stats(ptdp_run_table *r, int s, int rank)
{
    return r->nstats > 0 ? r->stats + ((size_t)s * r->world + rank) * r->nstats : NULL;
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
        log.aux_loss += x->aux;
        log.has_aux = log.has_aux || x->has_aux;
    }
    log.aux_loss /= c->batch;   /* a mean over the batch's samples */
    if (r->nstats > 0) {        /* the model's counts: a sum, as the tokens are */
        double *sum = r->sums + (size_t)s * r->nstats;
        for (int d = 0; d < r->world; d++)
            for (int q = 0; q < r->nstats; q++)
                sum[q] += r->stats[((size_t)s * r->world + d) * r->nstats + q];
        log.stats = sum;
        log.nstats = r->nstats;
    }
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
        if (rc == 0 && r->nstats > 0)
            rc = ptdp_host_merge(dev, ptdp_run_table_stats(r, s, 0), (size_t)r->world * r->nstats * sizeof *r->stats);
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
    if (rc == 0 && r->result != NULL && r->result->expert_elements != NULL)
        rc = ptdp_host_merge(dev, r->result->expert_elements, w * sizeof *r->result->expert_elements);
    if (rc == 0 && r->result != NULL && r->result->ep_bytes != NULL)
        rc = ptdp_host_merge(dev, r->result->ep_bytes, w * sizeof *r->result->ep_bytes);
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
    free(r->stats);
    if (r->own_sums)
        free(r->sums);
    r->stats = r->sums = NULL;
    r->ds = NULL;
    r->done = NULL;
    r->peak_acts = r->peak_wgrad = NULL;
    r->peak_in_flight = NULL;
}
