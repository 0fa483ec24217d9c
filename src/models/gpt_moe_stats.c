/*
 * gpt_moe_stats.c — counting what the router did, so that a run shows its
 * experts' loads, its dropped choices and its balance loss per MoE block
 * and step (gpt_moe_stats.h has the names and the identities they obey).
 *
 *   route() of block i, micro-batch u ──► u's tally, row i   (once: a
 *        load[E], dropped, aux                                 redone route
 *                                                              adds nothing)
 *   after u's forward (pp.c: the table's count) ──► the device's counters
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
#include "ptdp/gpt_moe_stats.h"

#include <stdlib.h>

#include "models/gpt_pass.h"
#include "models/gpt_table.h"
#include "ptdp/counters.h"
#include "ptdp/error.h"

/* One micro-batch's counts on one stage: per local block, whether its
 * route counted yet, and its row of E + 2 numbers. */
struct ptdp_gpt_moe_tally {
    int nblocks, E;
    bool *counted;          /* [nblocks]                                    */
    double *row;            /* [nblocks][E + 2]: load[E], dropped, aux      */
};

/* ------------------------------------------------------------- layout */

int ptdp_gpt_moe_blocks(const ptdp_model_config *c)
{
    int n = 0;
    for (int l = 0; l < c->layers; l++)
        n += ptdp_gpt_block_is_moe(c, l);
    return n;
}

int ptdp_gpt_moe_layer(const ptdp_model_config *c, int j)
{
    for (int l = 0, n = 0; l < c->layers; l++)
        if (ptdp_gpt_block_is_moe(c, l) && n++ == j)
            return l;
    return -1;
}

/* The row of global block l: its rank among the MoE blocks. */
static int row_of(const ptdp_model_config *c, int l)
{
    int j = 0;
    for (int q = 0; q < l; q++)
        j += ptdp_gpt_block_is_moe(c, q);
    return j;
}

/* The table's publish: the four names of gpt_moe_stats.h, in the order
 * --log writes them; nothing for a dense GPT. */
int ptdp_gpt_moe_publish(const ptdp_model_config *c, ptdp_counters *reg)
{
    const int n = ptdp_gpt_moe_blocks(c), E = ptdp_gpt(c)->moe_experts;
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
    return rc;
}

/* ----------------------------------------------- one micro-batch's tally */

void ptdp_gpt_moe_tally(ptdp_gpt_pass *k, int block, const int *load, int dropped, double aux)
{
    ptdp_gpt_saved *sv = k->acts != NULL ? k->acts->saved : NULL;
    const int E = ptdp_gpt(&k->m->cfg)->moe_experts;
    if (sv == NULL || k->rc != 0)
        return;
    struct ptdp_gpt_moe_tally *t = sv->moe_tally;
    if (t == NULL) {
        t = sv->moe_tally = calloc(1, sizeof *t);
        if (t != NULL) {
            *t = (struct ptdp_gpt_moe_tally){ .nblocks = sv->nblocks, .E = E };
            t->counted = calloc((size_t)(sv->nblocks > 0 ? sv->nblocks : 1), sizeof *t->counted);
            t->row = calloc((size_t)(sv->nblocks > 0 ? sv->nblocks : 1) * (E + 2), sizeof *t->row);
        }
        if (t == NULL || t->counted == NULL || t->row == NULL) {
            k->rc = ptdp_fail(k->dev, PTDP_ENOMEM, "device %d: host out of memory", k->dev->rank);
            return;
        }
    }
    if (block < 0 || block >= t->nblocks || t->counted[block])
        return;   /* full recomputation's second route: the same numbers */
    double *r = t->row + (size_t)block * (E + 2);
    for (int e = 0; e < E; e++)
        r[e] = load[e];
    r[E] = dropped;
    r[E + 1] = aux;
    t->counted[block] = true;
}

void ptdp_gpt_moe_tally_free(ptdp_gpt_saved *sv)
{
    struct ptdp_gpt_moe_tally *t = sv->moe_tally;
    if (t != NULL) {
        free(t->counted);
        free(t->row);
        free(t);
    }
    sv->moe_tally = NULL;
}

/* ------------------------------------------------------ the table's count */

/* Does the stage hold a MoE block (and so a balance loss)? */
static bool stage_has_moe(const ptdp_model *m)
{
    bool moe = false;
    for (int l = m->layer_begin; l < m->layer_end; l++)
        moe = moe || ptdp_gpt_block_is_moe(&m->cfg, l);
    return moe;
}

void ptdp_gpt_moe_count(const ptdp_model *m, const ptdp_acts *acts, ptdp_counts *counts)
{
    const ptdp_gpt_saved *sv = acts->saved;
    if (sv == NULL || !stage_has_moe(m))
        return;
    ptdp_count(counts, "aux_loss", 0, sv->aux_sum);   /* the stage's blocks', summed in its forward */
    const struct ptdp_gpt_moe_tally *t = sv->moe_tally;
    double *load = ptdp_counts_of(counts, "moe_load"), *dropped = ptdp_counts_of(counts, "moe_dropped"),
           *aux = ptdp_counts_of(counts, "moe_aux_loss");
    if (t == NULL || load == NULL || dropped == NULL || aux == NULL)
        return;
    const int E = t->E;
    for (int i = 0; i < t->nblocks; i++) {
        if (!t->counted[i])
            continue;
        const int j = row_of(&m->cfg, m->layer_begin + i);
        const double *r = t->row + (size_t)i * (E + 2);
        for (int e = 0; e < E; e++)
            load[(size_t)j * E + e] += r[e];
        dropped[j] += r[E];
        aux[j] += r[E + 1];
    }
}
