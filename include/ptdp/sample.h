/*
 * sample.h — text from any model of tokens that says how to sample it
 * (ptdp_model_ops.sampling, model.h), one token at a time, and its score
 * on the held-out built-in sums.  Neither asks which model runs.
 *
 *   ids  [ prompt ............ | next | next | … ]     len + n tokens
 *          └── the last T ──┘ ──forward──► logits ──choose──► next
 *
 *   choose:  temperature 0   argmax over the V real tokens
 *            temperature t   a draw from softmax(logits / t) over the top k
 *                            (k 0: all), u = uniform(seed, "sample", i) for
 *                            the i-th token: the same seed, the same text
 */
#ifndef PTDP_SAMPLE_H
#define PTDP_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

typedef struct {
    double temperature;   /* 0: greedy                                     */
    int top_k;            /* draw among the top_k most likely; 0: all       */
    uint64_t seed;        /* the draws' seed                               */
} ptdp_sample_opts;

/* Whether `ptdp sample` can generate from a model: its table says how
 * (ops->sampling) and it has positions (ops->positions). */
bool ptdp_model_can_sample(const ptdp_model_ops *ops);

/* The registered models that can be sampled, their names joined by sep
 * into buf ("" when none), for the message that refuses the others. */
const char *ptdp_sample_models(char *buf, size_t len, const char *sep);

/* Extend ids[0..len) by n tokens (ids has room for len + n), each chosen
 * from the logits at the last of the last T tokens (T the model's
 * positions; the context padded after it, which a causal model never
 * reads there).  The model must be whole on this device (one stage, tp 1,
 * cp 1) and samplable; fails the device with the reason otherwise. */
int ptdp_sample_generate(ptdp_device *dev, ptdp_model *m, int64_t *ids, int len, int n,
                         const ptdp_sample_opts *o);

/* What the model learnt of the built-in sums: each held-out sum's question
 * ("07+35=", ptdp_gpt_sum_held_out) continued greedily by 3 tokens, and
 * *right of the *asked answers exactly the sum ("042").  The model as for
 * ptdp_sample_generate, knowing the tokens of a question (V > '='). */
int ptdp_sample_score_sums(ptdp_device *dev, ptdp_model *m, int *right, int *asked);

#endif
