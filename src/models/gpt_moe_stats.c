/*
 * gpt_moe_stats.c — counting what the router did, so that a run shows its
 * experts' loads, its dropped choices and its balance loss per MoE block
 * and step (gpt_moe_stats.h has the layout and the identities they obey).
 *
 *   route() of block i, micro-batch u ──► u's tally, row i   (once: a
 *        load[E], dropped, aux                                 redone route
 *                                                              adds nothing)
 *   after u's forward (pp.c) ──► the step's sum, row j = i's rank among
 *                                the model's MoE blocks
 *   after the step (train.c) ──► the run's table: summed over the devices
 *                                that route (tp rank 0), as the loss is
 *
 * Why a tally per micro-batch rather than a sum per device: the pipeline
 * reads it right after the micro-batch's forward, as it reads the balance
 * loss, and only a training step hands it a sum (pp.h's stats) — so a
 * forward outside one (sampling, the figures, a benchmark's loop) counts
 * nowhere, and full recomputation's second route of the micro-batch,
 * inside its backward, comes after the reading; a block's row is set by
 * its first route alone all the same.
 */
#include "ptdp/gpt_moe_stats.h"

#include <stdlib.h>

#include "models/gpt_pass.h"
#include "models/gpt_table.h"
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

int ptdp_gpt_moe_stats_len(const ptdp_model_config *c)
{
    return ptdp_gpt_moe_blocks(c) * (ptdp_gpt(c)->moe_experts + 2);
}

/* The row of global block l: its rank among the MoE blocks. */
static int row_of(const ptdp_model_config *c, int l)
{
    int j = 0;
    for (int q = 0; q < l; q++)
        j += ptdp_gpt_block_is_moe(c, q);
    return j;
}

ptdp_gpt_moe_block_stats ptdp_gpt_moe_stats_row(const ptdp_model_config *c, const double *stats, int j)
{
    const int E = ptdp_gpt(c)->moe_experts;
    const double *r = stats + (size_t)j * (E + 2);
    ptdp_gpt_moe_block_stats s = { .layer = -1, .load = r, .dropped = r[E], .aux = r[E + 1] };
    for (int l = 0, n = 0; l < c->layers && s.layer < 0; l++)
        if (ptdp_gpt_block_is_moe(c, l) && n++ == j)
            s.layer = l;
    return s;
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

/* ------------------------------------------------- the table's stats_add */

void ptdp_gpt_moe_stats_add(const ptdp_model *m, const ptdp_acts *acts, double *sum)
{
    const ptdp_gpt_saved *sv = acts->saved;
    const struct ptdp_gpt_moe_tally *t = sv != NULL ? sv->moe_tally : NULL;
    if (t == NULL)
        return;
    const int E = t->E;
    for (int i = 0; i < t->nblocks; i++) {
        if (!t->counted[i])
            continue;
        double *dst = sum + (size_t)row_of(&m->cfg, m->layer_begin + i) * (E + 2);
        for (int q = 0; q < E + 2; q++)
            dst[q] += t->row[(size_t)i * (E + 2) + q];
    }
}
