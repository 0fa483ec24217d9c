/*
 * gpt_data.c — the GPT's data: a text, one token per byte, cut into
 * sequences at counter-based positions.
 *
 * Sample i of the run is the window of T + 1 tokens starting at
 *
 *     start_i = bits(seed, "data.start", i) mod (N - T)       (N tokens of text)
 *
 * its input the first T, its targets the last T (each position predicts
 * the next token):
 *
 *     text   …  1  2  +  3  5  =  4  7 \n  8  +  …
 *     x         1  2  +  3  5  =  4  7
 *     y            2  +  3  5  =  4  7 \n
 *
 * A pure function of (seed, i), as the MLP's data: any device can make any
 * sample alone, a DP rank only its shard, a resumed run the right ones.
 *
 * Without --data the text is built in: lines of sums of two numbers below
 * 100 drawn from (seed, "data.corpus").  A tiny model learns the format —
 * digits, '+', '=', a newline — within a hundred steps, and some of the
 * arithmetic after that: a loss curve that visibly falls.
 */
#include "ptdp/gpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"
#include "ptdp/rng.h"
#include "models/gpt_table.h"

size_t ptdp_gpt_builtin_corpus(uint64_t seed, int lines, unsigned char **out)
{
    size_t cap = (size_t)lines * 10 + 1, len = 0;   /* "99+99=198\n" is 10 */
    unsigned char *text = malloc(cap);
    *out = text;
    if (text == NULL)
        return 0;
    uint64_t key = ptdp_rng_key(seed, "data.corpus");
    for (int i = 0; i < lines; i++) {
        int a = (int)(ptdp_rng_bits(key, 2 * (uint64_t)i) % 100);
        int b = (int)(ptdp_rng_bits(key, 2 * (uint64_t)i + 1) % 100);
        len += (size_t)snprintf((char *)text + len, cap - len, "%d+%d=%d\n", a, b, a + b);
    }
    return len;
}

/* Fill what b asks for: tokens on stage 0, labels on the last stage. */
void ptdp_gpt_fill_batch(ptdp_model *m, ptdp_batch *b)
{
    const ptdp_gpt *g = m->impl;
    const int T = ptdp_gpt(&m->cfg)->seq_len;
    const uint64_t key = ptdp_rng_key(m->seed, "data.start");
    const uint64_t windows = (uint64_t)(g->corpus_len - (size_t)T);   /* checked: N >= T + 1 */
    for (int i = 0; i < b->rows; i++) {
        const unsigned char *w = g->corpus + ptdp_rng_bits(key, (uint64_t)(b->first + i)) % windows;
        for (int t = 0; t < T; t++) {
            if (b->tokens != NULL)
                b->tokens[(size_t)i * T + t] = w[t];
            if (b->labels != NULL)
                b->labels[(size_t)i * T + t] = w[t + 1];
        }
    }
}
