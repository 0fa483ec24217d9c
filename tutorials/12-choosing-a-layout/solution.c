/*
 * solution.c — lesson 12: choosing a layout (the reference answer).
 *
 * The memory of one GPU of a layout, term by term, as ptdp's GPT keeps it:
 *
 *   memory = params + grads + optim          the model states (zero.h)
 *          + in-flight x blocks x per-block  the activations (gpt.h, schedule.h)
 *
 *   stage s of pp, one GPU of its TP group of tp:
 *
 *     stage 0        wte (V_pad/tp x C)  wpe (T x C)   L/pp blocks
 *     stage 1 …                                        L/pp blocks
 *     stage pp-1                                       L/pp blocks   ln_f (2C)   head = a copy of wte (pp > 1)
 *
 *   a block on one GPU:   LayerNorms 4C, attention 3C C/tp + 3C/tp + C C/tp + C,
 *                         MLP F C/tp + F/tp + C F/tp + C            (the row-parallel biases whole)
 *
 *   ZeRO over dp GPUs (bytes a parameter: w, g, o = 4, 4, 8 in float AdamW;
 *   2, 2, 12 under bf16 — the float master weights and two moments):
 *     0: (w + g + o) psi   1: (w + g) psi + o psi/dp   2: w psi + (g + o) psi/dp   3: (w + g + o) psi/dp
 *
 *   in flight on stage s: GPipe m; 1F1B min(pp - s, m)
 */
#include "lesson.h"

#include <string.h>

#include "ptdp/error.h"

int lesson_padded_vocab(int vocab, int multiple, int tp, int *v_pad)
{
    /* Megatron-LM pads the vocabulary so that every TP rank owns an equal
     * slice of rows and each slice is a multiple of `multiple`. */
    const int unit = multiple * tp;
    *v_pad = (vocab + unit - 1) / unit * unit;
    return 0;
}

int lesson_stage_params(const lesson_gpt *g, int tp, int pp, int stage, double *elements)
{
    const double C = g->hidden, F = g->ffn, T = g->seq_len;
    int v_pad;
    int rc = lesson_padded_vocab(g->vocab, g->vocab_multiple, tp, &v_pad);
    if (rc != 0)
        return rc;
    /* one block on one GPU of its TP group: the column-parallel weights
     * and biases are split, the row-parallel biases and the LayerNorms whole */
    const double block = 4 * C                          /* ln_1, ln_2: weight and bias */
                         + 3 * C * C / tp + 3 * C / tp  /* c_attn (column-parallel)    */
                         + C * C / tp + C               /* attn c_proj (row-parallel)  */
                         + F * C / tp + F / tp          /* c_fc (column-parallel)      */
                         + C * F / tp + C;              /* mlp c_proj (row-parallel)   */
    double n = (double)(g->layers / pp) * block;        /* a stage holds L / pp blocks */
    if (stage == 0)
        n += (double)v_pad / tp * C + T * C;            /* wte's rows, wpe whole       */
    if (stage == pp - 1) {
        n += 2 * C;                                     /* ln_f                        */
        if (pp > 1)
            n += (double)v_pad / tp * C;                /* the head: wte's tied copy   */
    }
    *elements = n;
    return 0;
}

int lesson_model_states(double psi, int dp, int zero, bool bf16, int real_bytes, lesson_memory *out)
{
    const double w = bf16 ? 2 : real_bytes;             /* a parameter                 */
    const double g = bf16 ? 2 : real_bytes;             /* its gradient                */
    const double o = (bf16 ? 3 : 2) * (double)real_bytes;   /* AdamW's two moments (+ master) */
    out->params = zero >= 3 ? w * psi / dp : w * psi;
    out->grads = zero >= 2 ? g * psi / dp : g * psi;
    out->optim = zero >= 1 ? o * psi / dp : o * psi;
    return 0;
}

int lesson_in_flight(const char *schedule, int pp, int micro_batches, int stage, int *n)
{
    if (strcmp(schedule, "gpipe") == 0)
        *n = micro_batches;                             /* every forward before any backward */
    else
        *n = pp - stage < micro_batches ? pp - stage : micro_batches;   /* 1F1B's warm-up */
    return 0;
}

int lesson_block_acts(const lesson_gpt *g, int b, int tp, ptdp_recompute r, double *elements)
{
    const double B = b, T = g->seq_len, C = g->hidden, F = g->ffn, nh = g->heads;
    /* x, ln1, x2, ln2 whole; qkv and y, c_fc's output and GELU's split by
     * tp; four LayerNorm statistics a position */
    double e = B * T * (4 * C + 4 * C / tp + 2 * F / tp + 4);
    if (r != PTDP_RECOMPUTE_SELECTIVE)
        e += B * (nh / tp) * T * T;                     /* the attention's probabilities */
    *elements = e;
    return 0;
}

int lesson_stage_memory(const lesson_gpt *g, const lesson_layout *l, int stage, int real_bytes,
                        lesson_memory *out)
{
    double psi, block;
    int in_flight, rc;
    if ((rc = lesson_stage_params(g, l->tp, l->pp, stage, &psi)) != 0 ||
        (rc = lesson_model_states(psi, l->dp, l->zero, l->bf16, real_bytes, out)) != 0 ||
        (rc = lesson_in_flight(l->schedule, l->pp, l->micro_batches, stage, &in_flight)) != 0)
        return rc;
    const double blocks = g->layers / l->pp;
    const int a = l->bf16 ? 2 : real_bytes;   /* bf16: the kept activations are bf16 too */
    if (l->recompute == PTDP_RECOMPUTE_FULL) {
        /* each micro-batch in flight keeps only its blocks' inputs; the one
         * in its backward rebuilds one block at a time */
        if ((rc = lesson_block_acts(g, l->micro_batch_size, l->tp, PTDP_RECOMPUTE_NONE, &block)) != 0)
            return rc;
        out->acts = (in_flight * blocks * (double)l->micro_batch_size * g->seq_len * g->hidden + block) * a;
    } else {
        if ((rc = lesson_block_acts(g, l->micro_batch_size, l->tp, l->recompute, &block)) != 0)
            return rc;
        out->acts = in_flight * blocks * block * a;
    }
    out->total = out->params + out->grads + out->optim + out->acts;
    return 0;
}

int lesson_choose_layout(lesson_layout *l)
{
    /* 7.5B parameters, 8-byte reals: 32 bytes a parameter of model states,
     * 240 GB — three GPUs' worth before one activation.  Tensor parallelism
     * inside a node (8), a pipeline of 4 across nodes, micro-batches of one
     * sequence (1F1B keeps at most 4), the attention's probabilities
     * recomputed: about 9 + 4 x 9 blocks' worth of activations. */
    l->dp = 1;
    l->tp = 8;
    l->pp = 4;
    l->micro_batch_size = 1;
    l->micro_batches = 512;
    l->schedule = "1f1b";
    l->recompute = PTDP_RECOMPUTE_SELECTIVE;
    l->zero = 0;
    l->bf16 = false;
    l->sp = true;          /* tp 8: the LayerNorm and dropout regions split 8 ways */
    l->overlap = false;    /* dp 1: no DP traffic to hide (SP's gathers could be) */
    return 0;
}
