/*
 * rng.h — counter-based random numbers.
 *
 * Every random number in ptdp is a pure function of (seed, stream name,
 * index).  There is no generator state to advance, so a tensor-parallel
 * rank can draw rows 128..255 of a weight matrix alone and get exactly what
 * one device drawing the whole matrix got there.  This is Megatron-LM's
 * "model-parallel RNG" lesson in its simplest form.
 *
 * The mixing function is SplitMix64's finaliser applied to
 * key + golden-ratio * (index + 1); the key itself hashes seed and name.
 */
#ifndef PTDP_RNG_H
#define PTDP_RNG_H

#include <stdint.h>

/* A key for one named stream, e.g. ptdp_rng_key(seed, "blocks.3.fc1.weight"). */
uint64_t ptdp_rng_key(uint64_t seed, const char *stream);
/* 64 random bits at position `index` of the stream. */
uint64_t ptdp_rng_bits(uint64_t key, uint64_t index);
/* Uniform in the open interval (0, 1): (k + 1/2) / 2^52 for 52 random bits k,
 * so it is never exactly 0 or 1. */
double   ptdp_rng_uniform(uint64_t key, uint64_t index);
/* Standard normal at position index (Box–Muller on two uniforms drawn at
 * 2*index and 2*index+1; the cosine branch only, so each index is one draw). */
double   ptdp_rng_normal(uint64_t key, uint64_t index);

#endif
