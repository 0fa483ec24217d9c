/*
 * gpt_kv.h — the GPT's key/value cache for sampling (private to src/;
 * gpt_kv.c).
 *
 * Sampling one token at a time reuses the keys and values of the tokens
 * before it: the cache keeps them per layer, per sequence.
 *
 *   tokens 0..t-1: K, V kept ──▶ token t: q_t · [K; k_t] ──▶ append k_t, v_t
 */

#ifndef PTDP_MODELS_GPT_KV_H
#define PTDP_MODELS_GPT_KV_H

#include "ptdp/gpt.h"

/* The cache of acts' micro-batch: found, or made by its first slice
 * (t0 = 0); NULL after failing the device.  Released after the backward of
 * the first slice; free_all on the model's free. */
ptdp_gpt_kv *ptdp_gpt_kv_get(ptdp_device *dev, ptdp_model *m, const ptdp_acts *acts);
void ptdp_gpt_kv_release(ptdp_device *dev, ptdp_model *m, ptdp_gpt_kv *kv);
void ptdp_gpt_kv_done(ptdp_device *dev, ptdp_model *m, const ptdp_acts *acts);   /* acts' entry, if any */

void ptdp_gpt_kv_free_all(ptdp_device *dev, ptdp_model *m);

#endif
