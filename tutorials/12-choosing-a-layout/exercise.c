/*
 * exercise.c — lesson 12: choosing a layout.
 *
 * Replace each PTDP_BLANK(...) line with your code, then run the check:
 *     meson setup build-student -Dexercises=student      (once)
 *     meson test -C build-student --suite tutorial-12 -v
 * README.md explains the idea; solution.c is the answer (try first).
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
#include "blank.h"
#include "lesson.h"

#include <string.h>

#include "ptdp/error.h"

int lesson_padded_vocab(int vocab, int multiple, int tp, int *v_pad)
{
    /* Blank 1: *v_pad = the smallest multiple of multiple x tp that is
     * >= vocab (every TP rank owns an equal slice of the embedding's rows,
     * itself a multiple of `multiple`).  Return 0. */
    PTDP_BLANK(1, "V_pad: the smallest multiple of multiple x tp that is >= vocab");
}

int lesson_stage_params(const lesson_gpt *g, int tp, int pp, int stage, double *elements)
{
    /* Blank 2: the parameter elements on one GPU of stage `stage`:
     *   - the stage's L / pp blocks, each on one GPU of its TP group:
     *     LayerNorms 4C whole; c_attn 3C x C and its bias 3C, split by tp;
     *     attn c_proj C x C split by tp, its bias C whole; c_fc F x C and
     *     its bias F, split; mlp c_proj C x F split, its bias C whole;
     *   - stage 0: wte, V_pad / tp rows of C (lesson_padded_vocab), and
     *     wpe, T x C whole;
     *   - the last stage: ln_f (2C), and when pp > 1 the head, a tied copy
     *     of wte (V_pad / tp rows of C).
     * Use doubles (C C / tp overflows an int at scale).  Return 0. */
    PTDP_BLANK(2, "the parameter elements of one GPU of stage `stage`: its blocks, wte and wpe, ln_f and the head");
}

int lesson_model_states(double psi, int dp, int zero, bool bf16, int real_bytes, lesson_memory *out)
{
    /* Blank 3: bytes a parameter: w, g = real_bytes each and o = 2
     * real_bytes (AdamW's two moments) in float; under bf16 w = g = 2 and
     * o = 3 real_bytes (the float master weights too: 2 + 2 + 12).  ZeRO
     * stage 1 divides the optimizer state by dp, stage 2 the gradients
     * too, stage 3 the parameters too.  Fill out->params, grads, optim;
     * return 0. */
    PTDP_BLANK(3, "params, grads, optim in bytes: w, g, o per parameter, ZeRO dividing by dp what its stage shards");
}

int lesson_in_flight(const char *schedule, int pp, int micro_batches, int stage, int *n)
{
    /* Blank 4: how many micro-batches' activations stage `stage` holds at
     * once: "gpipe" runs every forward before any backward; "1f1b" runs
     * pp - stage forwards before its first backward (never more than
     * there are micro-batches).  Return 0. */
    PTDP_BLANK(4, "micro-batches in flight on `stage`: GPipe and 1F1B");
}

int lesson_block_acts(const lesson_gpt *g, int b, int tp, ptdp_recompute r, double *elements)
{
    /* Blank 5: what one micro-batch of b sequences keeps per block on one
     * GPU of its TP group (gpt.h):
     *   b T (4C + 4C/tp + 2F/tp + 4)      x, ln1, x2, ln2 whole; qkv, y,
     *                                     c_fc's output, GELU's split; four
     *                                     LayerNorm statistics a position
     *   + b (nh/tp) T^2                   the attention's probabilities —
     *                                     not kept under selective recomputation.
     * Return 0. */
    PTDP_BLANK(5, "activation elements a micro-batch keeps per block: b T (4C + 4C/tp + 2F/tp + 4) + b (nh/tp) T^2");
}

int lesson_stage_memory(const lesson_gpt *g, const lesson_layout *l, int stage, int real_bytes,
                        lesson_memory *out)
{
    /* Blank 6: put them together for one GPU of stage `stage`:
     *   - the model states of its parameters (blanks 2 and 3);
     *   - activations: in flight (blank 4) x its L / pp blocks x one
     *     block's (blank 5) x a, a = real_bytes (2 under bf16); under full
     *     recomputation each micro-batch in flight keeps only its blocks'
     *     inputs (b T C each), the one in its backward one block again:
     *     (in flight x blocks x b T C + block(none)) x a;
     *   - out->total, the sum.
     * Return 0 (or the first blank's error). */
    PTDP_BLANK(6, "one GPU of stage `stage`: model states + in flight x blocks x block activations, and the total");
}

int lesson_choose_layout(lesson_layout *l)
{
    /* Blank 7: a layout for the lesson's model on the lesson's cluster
     * (README.md, "Your turn"): dp x tp x pp = 32 GPUs, b x dp x m = 512
     * sequences, every GPU within its memory by your lesson_stage_memory
     * and by the planner.  Set every field of *l (schedule "1f1b" or
     * "gpipe"; sp needs tp > 1, overlap dp > 1 or sp); return 0. */
    PTDP_BLANK(7, "your layout: dp, tp, pp, micro_batch_size, micro_batches, schedule, recompute, zero, bf16, sp, overlap");
}
