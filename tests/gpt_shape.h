/*
 * gpt_shape.h — a test's GPT in one line: its shape, and the defaults of
 * --model gpt for everything else (ptdp_gpt_default_config: the
 * vocabulary padded to multiples of 64, the MoE flags' defaults).
 *
 *   gpt_of((gpt_shape){ .layers = 2, .hidden = 8, .ffn = 12, .heads = 2,
 *                       .seq_len = 5, .vocab = 62 }, tp)
 *
 * A field left 0 keeps its default.
 */
#ifndef PTDP_TESTS_GPT_SHAPE_H
#define PTDP_TESTS_GPT_SHAPE_H

#include "ptdp/gpt.h"

typedef struct {
    int layers, hidden, ffn, heads, seq_len, vocab;
} gpt_shape;

/* tp > 0: the vocabulary padded here, to a multiple of 64 x tp, as ptdp
 * train pads it for --tp; 0: left for the model to pad. */
static inline ptdp_model_config gpt_of(gpt_shape s, int tp)
{
    ptdp_model_config c = ptdp_gpt_default_config();
    ptdp_gpt_settings *g = ptdp_gpt(&c);
    if (s.layers > 0) c.layers = s.layers;
    if (s.hidden > 0) c.hidden = s.hidden;
    if (s.ffn > 0) c.ffn = s.ffn;
    if (s.heads > 0) g->heads = s.heads;
    if (s.seq_len > 0) g->seq_len = s.seq_len;
    if (s.vocab > 0) g->vocab = s.vocab;
    if (tp > 0)
        g->vocab_padded = ptdp_gpt_pad_vocab(g->vocab, 64, tp);
    return c;
}

#endif
