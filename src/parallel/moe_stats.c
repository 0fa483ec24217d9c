/*
 * moe_stats.c — counting what a mixture's router did, for any model, so
 * that a run shows its experts' loads, its dropped choices and its balance
 * loss per MoE block and step (moe.h has the names and the identities
 * they obey).
 *
 *   route of block i, micro-batch u ──► u's tally, row i   (once: a
 *        load[E], dropped, aux, z                           redone route
 *        (moe.c, ptdp_moe_tally_add)                        adds nothing)
 *   after u's forward (pp.c: the model's count) ──► the device's counters
 *        of the step (counters.h), row j = i's rank among the model's MoE
 *        blocks, with the stage's balance loss into "aux_loss"
 *   after the step (run_table.c) ──► summed over the devices that route
 *        (tp rank 0), as the loss is
 *
 * Why a tally per micro-batch rather than adding as the router runs: the
 * pipeline reads it right after the micro-batch's forward, and only a
 * training step's device has counters (device.h) — so a forward outside
 * one (sampling, the figures, a benchmark's loop) counts nowhere, and full
 * recomputation's second route of the micro-batch, inside its backward,
 * comes after the reading; a block's row is set by its first route alone
 * all the same.
 */
#include <stdlib.h>

#include "parallel/moe_impl.h"
#include "ptdp/counters.h"
#include "ptdp/error.h"

/* One micro-batch's counts on one stage: per local block, whether its
 * route counted yet, and its row of E + 3 numbers. */
struct ptdp_moe_tally {
    int nblocks, E;
    bool *counted;          /* [nblocks]                                    */
    double *row;            /* [nblocks][E + 3]: load[E], dropped, aux, z   */
};

/* ------------------------------------------------------------- layout */

bool ptdp_moe_block_is_moe(const ptdp_moe_settings *s, int l)
{
    const int K = s->dense_first > 0 ? s->dense_first : 0;   /* DeepSeek's first dense blocks */
    return s->experts > 0 && s->every > 0 && l >= K && (l - K + 1) % s->every == 0;
}

int ptdp_moe_blocks(const ptdp_moe_settings *s, int layers)
{
    int n = 0;
    for (int l = 0; l < layers; l++)
        n += ptdp_moe_block_is_moe(s, l);
    return n;
}

int ptdp_moe_layer(const ptdp_moe_settings *s, int layers, int j)
{
    for (int l = 0, n = 0; l < layers; l++)
        if (ptdp_moe_block_is_moe(s, l) && n++ == j)
            return l;
    return -1;
}

int ptdp_moe_ffn(const ptdp_moe_settings *s, int ffn)
{
    return s->ffn > 0 ? s->ffn : ffn;
}

/* The names of moe.h, in the order --log writes them; nothing for a
 * dense model. */
int ptdp_moe_publish(const ptdp_moe_settings *s, int layers, ptdp_counters *reg)
{
    const int n = ptdp_moe_blocks(s, layers), E = s->experts;
    const unsigned once = PTDP_COUNT_TP_ONCE, mean = PTDP_COUNT_TP_ONCE | PTDP_COUNT_PER_SAMPLE;
    if (n == 0)
        return PTDP_OK;
    int rc = ptdp_counters_publish(reg, "aux_loss", PTDP_COUNT_STEP, PTDP_COUNT_NUMBER, mean);
    if (rc == 0)
        rc = ptdp_counters_publish(reg, "moe_load", PTDP_COUNT_STEP, PTDP_COUNT_TABLE(n, E), once);
    if (rc == 0)
        rc = ptdp_counters_publish(reg, "moe_dropped", PTDP_COUNT_STEP, PTDP_COUNT_LIST(n), once);
    if (rc == 0)
        rc = ptdp_counters_publish(reg, "moe_aux_loss", PTDP_COUNT_STEP, PTDP_COUNT_LIST(n), mean);
    if (rc == 0 && s->z_loss > 0)   /* the z-losses: runs without print none */
        rc = ptdp_counters_publish(reg, "z_loss", PTDP_COUNT_STEP, PTDP_COUNT_NUMBER, mean);
    if (rc == 0 && s->z_loss > 0)
        rc = ptdp_counters_publish(reg, "moe_z_loss", PTDP_COUNT_STEP, PTDP_COUNT_LIST(n), mean);
    if (rc == 0 && s->bias_update > 0)   /* moe_bias.c: the loads' all-reduce, by its formula */
        rc = ptdp_counters_publish(reg, "moe_bias_bytes", PTDP_COUNT_DEVICE, PTDP_COUNT_NUMBER, 0);
    return rc;
}

/* ----------------------------------------------- one micro-batch's tally */

int ptdp_moe_tally_add(ptdp_device *dev, ptdp_moe_tally **slot, int nblocks, int E, int block, const int *load,
                       int dropped, double aux, double zloss)
{
    ptdp_moe_tally *t = *slot;
    if (t == NULL) {
        t = *slot = calloc(1, sizeof *t);
        if (t != NULL) {
            *t = (ptdp_moe_tally){ .nblocks = nblocks, .E = E };
            t->counted = calloc((size_t)(nblocks > 0 ? nblocks : 1), sizeof *t->counted);
            t->row = calloc((size_t)(nblocks > 0 ? nblocks : 1) * (E + 3), sizeof *t->row);
        }
        if (t == NULL || t->counted == NULL || t->row == NULL)
            return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    }
    if (block < 0 || block >= t->nblocks || t->counted[block])
        return PTDP_OK;   /* full recomputation's second route: the same numbers */
    double *r = t->row + (size_t)block * (E + 3);
    for (int e = 0; e < E; e++)
        r[e] = load[e];
    r[E] = dropped;
    r[E + 1] = aux;
    r[E + 2] = zloss;
    t->counted[block] = true;
    return PTDP_OK;
}

bool ptdp_moe_tally_counted(const ptdp_moe_tally *t, int block)
{
    return t != NULL && block >= 0 && block < t->nblocks && t->counted[block];
}

void ptdp_moe_tally_free(ptdp_moe_tally **slot)
{
    ptdp_moe_tally *t = *slot;
    if (t != NULL) {
        free(t->counted);
        free(t->row);
        free(t);
    }
    *slot = NULL;
}

/* ------------------------------------------------------ the model's count */

void ptdp_moe_count(const ptdp_moe_settings *s, int begin, int end, const ptdp_moe_tally *t, double aux_sum,
                    ptdp_counts *counts)
{
    bool moe = false;   /* does the stage hold a MoE block (and so a balance loss)? */
    for (int l = begin; l < end; l++)
        moe = moe || ptdp_moe_block_is_moe(s, l);
    if (!moe)
        return;
    ptdp_count(counts, "aux_loss", 0, aux_sum);   /* the stage's blocks', summed in its forward */
    double *load = ptdp_counts_of(counts, "moe_load"), *dropped = ptdp_counts_of(counts, "moe_dropped"),
           *aux = ptdp_counts_of(counts, "moe_aux_loss"), *z = ptdp_counts_of(counts, "moe_z_loss");
    if (t == NULL || load == NULL || dropped == NULL || aux == NULL)
        return;
    const int E = t->E;
    for (int i = 0; i < t->nblocks; i++) {
        if (!t->counted[i])
            continue;
        int j = 0;   /* global block begin + i's rank among the MoE blocks */
        for (int q = 0; q < begin + i; q++)
            j += ptdp_moe_block_is_moe(s, q);
        const double *r = t->row + (size_t)i * (E + 3);
        for (int e = 0; e < E; e++)
            load[(size_t)j * E + e] += r[e];
        dropped[j] += r[E];
        aux[j] += r[E + 1];
        if (z != NULL) {
            z[j] += r[E + 2];
            ptdp_count(counts, "z_loss", 0, r[E + 2]);
        }
    }
}
