/*
 * gpt_data.c — the GPT's data: a text, one token per byte, cut into
 * sequences at counter-based positions.
 *
 * Sample i of the run is the window of T + 1 tokens starting at
 *
 *     start_i = bits(seed, "data.start", i) mod (N - T)       (N tokens of text)
 *
 * (rounded down to a line's start for the built-in sums, below),
 * its input the first T, its targets the last T (each position predicts
 * the next token):
 *
 *     text   …  1  2  +  3  5  =  0  4  7 \n  0  8  …
 *     x         1  2  +  3  5  =  0  4  7
 *     y            2  +  3  5  =  0  4  7 \n
 *
 * A pure function of (seed, i), as the MLP's data: any device can make any
 * sample alone, a DP rank only its shard, a resumed run the right ones.
 *
 * Without --data the text is built in: lines of sums of two numbers below
 * 100 drawn from (seed, "data.corpus"), every line PTDP_GPT_SUM_LINE bytes
 * (the terms on two digits, the sum on three), and a sample starts on a
 * line:
 *
 *     0         10        20        30
 *     07+35=042\n61+12=073\n99+99=198\n45      (T = 32)
 *
 * so a digit's place in the line is its position in the window, and a
 * small model finds where the digits it adds sit: the format within a
 * hundred steps, the sums within about a thousand (lr 3e-3, the demo's).  About 1 sum in 20 never
 * appears (ptdp_gpt_sum_held_out): asked of the trained model, they
 * measure what it learnt, not what it saw.
 *
 * A config with no text at all (corpus NULL: the library's own tests)
 * trains on ptdp_gpt_plain_corpus, the sums as they come ("7+35=42"),
 * every sum possible, samples anywhere.
 */
#include "ptdp/gpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"
#include "ptdp/rng.h"
#include "models/gpt_table.h"

bool ptdp_gpt_sum_held_out(int a, int b)
{
    return ptdp_rng_bits(ptdp_rng_key(0, "data.held_out"), (uint64_t)(100 * a + b)) % 20 == 0;
}

void ptdp_gpt_sum_prompt(int a, int b, char out[7])
{
    snprintf(out, 7, "%02u+%02u=", (unsigned)a % 100u, (unsigned)b % 100u);
}

bool ptdp_gpt_sum_correct(int a, int b, const char *answer)
{
    char want[4];
    snprintf(want, sizeof want, "%03u", (unsigned)(a + b) % 1000u);
    return memcmp(answer, want, 3) == 0;
}

size_t ptdp_gpt_builtin_corpus(uint64_t seed, int lines, unsigned char **out)
{
    size_t cap = (size_t)lines * PTDP_GPT_SUM_LINE + 1, len = 0;
    unsigned char *text = malloc(cap);
    *out = text;
    if (text == NULL)
        return 0;
    uint64_t key = ptdp_rng_key(seed, "data.corpus"), k = 0;
    for (int i = 0; i < lines; i++) {
        int a, b;
        do {   /* the next pair that is not held out */
            a = (int)(ptdp_rng_bits(key, 2 * k) % 100);
            b = (int)(ptdp_rng_bits(key, 2 * k + 1) % 100);
            k++;
        } while (ptdp_gpt_sum_held_out(a, b));
        len += (size_t)snprintf((char *)text + len, cap - len, "%02d+%02d=%03d\n", a, b, a + b);
    }
    return len;
}

size_t ptdp_gpt_plain_corpus(uint64_t seed, int lines, unsigned char **out)
{
    size_t cap = (size_t)lines * PTDP_GPT_SUM_LINE + 1, len = 0;   /* "99+99=198\n" is 10 */
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

/* Sample i of b: the window of T + 1 tokens at bits(seed, "data.start",
 * first + i) mod (len - T) of the text, started on a multiple of `line`
 * (0 or 1: anywhere); tokens on stage 0, labels on the last stage.  Any
 * model of tokens that reads its data as the GPT does calls it. */
void ptdp_gpt_text_windows(const unsigned char *text, size_t len, int T, int line, uint64_t seed, ptdp_batch *b)
{
    const uint64_t key = ptdp_rng_key(seed, "data.start");
    const uint64_t windows = (uint64_t)(len - (size_t)T);   /* checked: N >= T + 1 */
    const uint64_t every = line > 1 ? (uint64_t)line : 1;
    for (int i = 0; i < b->rows; i++) {
        uint64_t start = ptdp_rng_bits(key, (uint64_t)(b->first + i)) % windows;
        const unsigned char *w = text + (start - start % every);
        for (int t = 0; t < T; t++) {
            if (b->tokens != NULL)
                b->tokens[(size_t)i * T + t] = w[t];
            if (b->labels != NULL)
                b->labels[(size_t)i * T + t] = w[t + 1];
        }
    }
}

/* Fill what b asks for: tokens on stage 0, labels on the last stage (a
 * sample starts on a line of the built-in sums when the config says so,
 * the CLI's). */
void ptdp_gpt_fill_batch(ptdp_model *m, ptdp_batch *b)
{
    const ptdp_gpt *g = m->impl;
    const ptdp_gpt_settings *gs = ptdp_gpt(&m->cfg);
    ptdp_gpt_text_windows(g->corpus, g->corpus_len, gs->seq_len, gs->line, m->seed, b);
}

/* The data: the given text, or the plain built-in one.  The given text is
 * the run's, read-only: every device reads that one copy through a const
 * pointer (a 3 GB file is 3 GB of host memory, not 3 GB per device), and
 * its arena is charged the bytes a real device would hold for it, in an
 * uninitialised block never written (no host page is touched for it). */
int ptdp_gpt_text_load(ptdp_device *dev, uint64_t seed, const unsigned char *corpus, size_t corpus_len, int T,
                       int vocab, ptdp_gpt_text *out)
{
    unsigned char *built = NULL;
    const unsigned char *text = corpus;
    size_t len = corpus_len;
    if (text == NULL) {
        len = ptdp_gpt_plain_corpus(seed, PTDP_GPT_CORPUS_LINES, &built);
        if (len == 0) {
            free(built);
            return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory making the corpus", dev->rank);
        }
        text = built;
    }
    int rc = PTDP_OK;
    if (len < (size_t)T + 1)
        rc = ptdp_fail(dev, PTDP_EINVAL, "the data has %zu tokens: --seq-len %d needs %d", len, T, T + 1);
    else if ((out->block = built != NULL ? ptdp_alloc(dev, len, PTDP_MEM_OTHER, "data.corpus")
                                         : ptdp_alloc_uninit(dev, len, PTDP_MEM_OTHER, "data.corpus")) == NULL)
        rc = PTDP_ENOMEM;
    else {
        if (built != NULL)
            memcpy(out->block, built, len);
        out->text = built != NULL ? out->block : text;
        out->len = len;
        for (size_t i = 0; i < len; i++)
            if (out->text[i] >= vocab) {
                rc = ptdp_fail(dev, PTDP_EINVAL, "the data holds token %d at %zu, but --vocab is %d",
                               out->text[i], i, vocab);
                break;
            }
    }
    free(built);
    return rc;
}
