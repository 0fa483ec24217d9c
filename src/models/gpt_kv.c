/*
 * gpt_kv.c — TeraPipe's per-stage cache: the keys and values of the earlier
 * token slices of a sequence, and the gradients that later slices send back.
 *
 * TeraPipe (Li et al. 2021) pipelines the tokens of one sequence: slice j of
 * a micro-batch (positions [t0, t0 + tlen) of each of its sequences) enters
 * stage 0 while slice j - 1 is on stage 1.  Everything in a block but
 * attention is position-wise; attention of slice j needs the keys and
 * values of slices 0 .. j on this stage's layers — the ones slices 0 .. j-1
 * computed here earlier.  So each stage keeps, per layer and sequence,
 *
 *     qkv   (B T) x 3 C/tp    rows [t0, t0 + tlen) written by slice j's forward
 *     dqkv  (B T) x 3 C/tp    zero; slice j's backward ADDS the gradients of
 *                             the keys and values [0, t0 + tlen) its queries
 *                             read (attention.c's slice backward)
 *
 *          slice 0   slice 1   slice 2            forward: left to right,
 *     qkv  [███████ | ███████ | ███████]          each writes its rows and reads
 *              ▲  ▲      ▲                         every row before its own end
 *     dqkv  ◄──┴──┴──────┘  slice 2's backward adds into rows 0 .. end of 2
 *
 * The backwards run last slice first (the schedule's order, GPipe's), so
 * when slice j's backward reads its own keys' and values' gradients they
 * already hold every later slice's share.  The entry lives from the forward
 * of a sequence's first slice to the backward of that same slice, the last
 * one to run: B T rows where one slice would need B tlen — TeraPipe's price
 * for pipelining within a sequence.  Entries are found by the micro-batch's
 * first sample (several micro-batches may be in flight).
 */
#include <stdlib.h>

#include "ptdp/error.h"
#include "ptdp/gpt.h"
#include "models/gpt_kv.h"

static ptdp_gpt_kv *find(ptdp_gpt *g, int64_t first_sample)
{
    for (ptdp_gpt_kv *kv = g->kv; kv != NULL; kv = kv->next)
        if (kv->first_sample == first_sample)
            return kv;
    return NULL;
}

void ptdp_gpt_kv_release(ptdp_device *dev, ptdp_model *m, ptdp_gpt_kv *kv)
{
    ptdp_gpt *g = m->impl;
    for (ptdp_gpt_kv **p = &g->kv; *p != NULL; p = &(*p)->next)
        if (*p == kv) {
            *p = kv->next;
            break;
        }
    for (int i = 0; i < kv->nblocks; i++) {
        ptdp_tensor_free(dev, &kv->qkv[i]);
        ptdp_tensor_free(dev, &kv->dqkv[i]);
    }
    free(kv->qkv);
    free(kv->dqkv);
    free(kv);
}

void ptdp_gpt_kv_done(ptdp_device *dev, ptdp_model *m, const ptdp_acts *acts)
{
    ptdp_gpt_kv *kv = find(m->impl, acts->first_sample);
    if (kv != NULL)
        ptdp_gpt_kv_release(dev, m, kv);
}

void ptdp_gpt_kv_free_all(ptdp_device *dev, ptdp_model *m)
{
    ptdp_gpt *g = m->impl;
    while (g != NULL && g->kv != NULL)
        ptdp_gpt_kv_release(dev, m, g->kv);
}

ptdp_gpt_kv *ptdp_gpt_kv_get(ptdp_device *dev, ptdp_model *m, const ptdp_acts *acts)
{
    ptdp_gpt *g = m->impl;
    ptdp_gpt_kv *kv = find(g, acts->first_sample);
    if (kv != NULL)
        return kv;
    if (acts->t0 != 0) {
        ptdp_fail(dev, PTDP_EINVAL, "token slice [%d, %d) of samples %lld..: its sequences' first slice has not "
                  "run forward on this stage (the slices must go in order)", acts->t0, acts->t0 + acts->tlen,
                  (long long)acts->first_sample);
        return NULL;
    }
    const int nb = m->layer_end - m->layer_begin, T = ptdp_gpt(&m->cfg)->seq_len;
    const int width = 3 * g->heads_local * (m->cfg.hidden / ptdp_gpt(&m->cfg)->heads);
    if ((kv = calloc(1, sizeof *kv)) == NULL || (kv->qkv = calloc((size_t)nb + 1, sizeof *kv->qkv)) == NULL ||
        (kv->dqkv = calloc((size_t)nb + 1, sizeof *kv->dqkv)) == NULL) {
        if (kv != NULL)
            free(kv->qkv);
        free(kv);
        ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
        return NULL;
    }
    kv->first_sample = acts->first_sample;
    kv->rows = acts->rows;
    kv->nblocks = nb;
    kv->next = g->kv;
    g->kv = kv;
    for (int i = 0; i < nb; i++)
        if (ptdp_tensor_alloc(dev, &kv->qkv[i], "terapipe.kv", PTDP_MEM_ACTS, acts->rows * T, width) != 0 ||
            ptdp_tensor_alloc(dev, &kv->dqkv[i], "terapipe.dkv", PTDP_MEM_ACTS, acts->rows * T, width) != 0) {
            ptdp_gpt_kv_release(dev, m, kv);
            return NULL;
        }
    return kv;
}
