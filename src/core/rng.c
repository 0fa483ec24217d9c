/*
 * rng.c — counter-based random numbers: a number is a hash of its position.
 *
 * A classic generator keeps a state and steps it, so the 1000th number needs
 * the 999 before it, and a device that owns only rows 128..255 of a weight
 * would have to draw rows 0..127 too.  Here every number is a pure function
 *
 *     x(seed, stream, i) = mix(key + φ·(i + 1))      key = mix(fnv1a(stream) ^ mix(seed + φ))
 *
 * where φ = 0x9E3779B97F4A7C15 (2^64 / golden ratio) and mix is the SplitMix64
 * finaliser, a bijection of 64-bit integers whose every output bit depends on
 * every input bit.  mix(key + φ·(i+1)) is exactly the (i+1)-th output of a
 * SplitMix64 generator started at `key`, so the stream has SplitMix64's
 * statistical quality, and any index is one hash away:
 *
 *     one device:   x[0] x[1] … x[127] x[128] … x[255]
 *     TP rank 1:                        x[128] … x[255]    (the same numbers)
 *
 * The stream name ("blocks.3.fc1.weight") is hashed with FNV-1a, so two
 * tensors draw independent numbers from one seed.  The integer part is
 * bit-exact everywhere; normal() goes through the C library's log and cos,
 * which may differ in the last bit between platforms, never between runs.
 */
#include "ptdp/rng.h"

#include <math.h>
#include <stddef.h>

#define GOLDEN 0x9E3779B97F4A7C15ull

/* SplitMix64's finaliser (Steele, Lea, Flood 2014; constants from
 * Stafford's "Mix13"). */
static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* FNV-1a, 64-bit: h = (h ^ byte) * prime, from the offset basis. */
static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (const unsigned char *p = (const unsigned char *)s; p != NULL && *p; p++) {
        h ^= *p;
        h *= 0x100000001B3ull;
    }
    return h;
}

uint64_t ptdp_rng_key(uint64_t seed, const char *stream)
{
    return mix(fnv1a(stream) ^ mix(seed + GOLDEN));
}

uint64_t ptdp_rng_bits(uint64_t key, uint64_t index)
{
    return mix(key + GOLDEN * (index + 1));
}

/* The top 52 bits k, centred in their cell: (k + 1/2) / 2^52.  The result is
 * exact, never 0 or 1 (smallest 2^-53, largest 1 - 2^-53) and symmetric
 * (u and 1 - u are equally likely).  Centring the full 53 bits would need a
 * 54-bit mantissa: (2^53 - 1/2) / 2^53 rounds to 1.0. */
double ptdp_rng_uniform(uint64_t key, uint64_t index)
{
    uint64_t k = ptdp_rng_bits(key, index) >> 12;
    return ((double)k + 0.5) * 0x1p-52;
}

/* Box–Muller: for independent uniforms u1, u2,
 *     z = sqrt(-2 ln u1) * cos(2π u2)
 * is standard normal.  u1 > 0, so the log is finite (|z| <= 8.6). */
double ptdp_rng_normal(uint64_t key, uint64_t index)
{
    const double two_pi = 6.283185307179586476925286766559;
    double u1 = ptdp_rng_uniform(key, 2 * index);
    double u2 = ptdp_rng_uniform(key, 2 * index + 1);
    return sqrt(-2.0 * log(u1)) * cos(two_pi * u2);
}
