/*
 * test_recompute.c — full recomputation one block at a time (gpt.c):
 * what it holds and what it computes.
 *
 *   peak     a GPT of 8 blocks (the default hidden 64, 4 heads, ffn 256,
 *            seq-len 32) on one device, one micro-batch forward and
 *            backward: the arena's peak of "acts" with --recompute full is
 *            ptdp_gpt_full_recompute_peak_bytes to the byte — the other
 *            blocks' inputs, one block redone, the backward's scratch —
 *            and less than half the peak without (every block's
 *            activations at once); in float, under bf16 activations and
 *            with dropout (the redone attention's mask scratch); and the
 *            same three with --attention tiled, whose formula
 *            (ptdp_gpt_full_recompute_peak_bytes_tiled) keeps log-sum-exps
 *            and two tiles of scratch where T x T were
 *
 *       without   [x0 A0][x1 A1] … [x7 A7] + scratch          L A
 *       with      [x0][x1] … [x6][x7 A7] + x8 + scratch       (L-1) X + A + X
 *
 *   bits     the loss and every gradient with recomputation equal those
 *            without, bit for bit (the dropout masks are counter-based:
 *            the block redone is the block that ran), with dropout
 */
#include <stdlib.h>
#include <string.h>

#include "gpt_shape.h"
#include "harness.h"
#include "ptdp/arena.h"
#include "ptdp/gpt.h"
#include "ptdp/mesh.h"
#include "ptdp/models.h"

static const harness_tcase recompute_tests = { .name = "recompute", .timeout_s = 120 };

enum { LAYERS = 8, ROWS = 4 };

/* The default GPT's sizes with LAYERS blocks, the built-in sums' 62 tokens. */
static ptdp_model_config config(void)
{
    return gpt_of((gpt_shape){ .layers = LAYERS, .vocab = 62 }, 1);
}

typedef struct {
    bool bf16, tiled;
    double dropout;
    size_t peak[2];          /* acts: without, with recompute */
    double loss[2];
    ptdp_real *grads[2];     /* every gradient, in params[] order */
    size_t ngrads;
} run_arg;

/* One micro-batch of ROWS sequences forward and backward, recompute or
 * not: the peak of "acts" above what was there before, the loss, the
 * gradients. */
static int one_pass(ptdp_device *dev, run_arg *a, int k)
{
    ptdp_model_config cfg = config();
    ptdp_mesh mesh;
    ptdp_model m;
    DEVICE_TRY(ptdp_mesh_init(dev, 1, 1, 1, &mesh));
    DEVICE_TRY(ptdp_model_init(dev, &m, &cfg, &mesh, NULL, 5, a->dropout));
    m.bf16 = a->bf16;   /* activations only: the parameters stay as they are */
    m.attention_tiled = a->tiled;
    ptdp_batch b = { .first = 3, .rows = ROWS };
    DEVICE_TRY(ptdp_batch_load(dev, &m, &b));
    ptdp_mem_stats before, after;
    ptdp_arena_reset_peaks(dev->arena);
    ptdp_arena_stats(dev->arena, &before);
    ptdp_acts acts;
    DEVICE_TRY(ptdp_model_forward(dev, &m, &acts, &b, (ptdp_tensor){ 0 }, 1, k == 1, NULL));
    a->loss[k] = acts.loss_sum;
    DEVICE_TRY(ptdp_model_backward(dev, &m, &acts, NULL, 1.0 / (ROWS * ptdp_gpt(&cfg)->seq_len), NULL));
    ptdp_arena_stats(dev->arena, &after);
    DEVICE_CHECK(dev, after.current[PTDP_MEM_ACTS] == before.current[PTDP_MEM_ACTS],
                 "%zu bytes of activations left after the backward", after.current[PTDP_MEM_ACTS] -
                 before.current[PTDP_MEM_ACTS]);
    a->peak[k] = after.peak[PTDP_MEM_ACTS] - before.current[PTDP_MEM_ACTS];
    size_t n = 0;
    for (int i = 0; i < m.nparams; i++)
        n += (size_t)ptdp_tensor_numel(m.params[i].g);
    a->ngrads = n;
    DEVICE_CHECK(dev, (a->grads[k] = malloc(n * sizeof(ptdp_real))) != NULL, "host out of memory");
    n = 0;
    for (int i = 0; i < m.nparams; i++) {
        const ptdp_tensor g = m.params[i].g;
        for (int r = 0; r < g.rows; r++, n += (size_t)g.cols)
            memcpy(a->grads[k] + n, g.data + (size_t)r * g.stride, (size_t)g.cols * sizeof(ptdp_real));
    }
    ptdp_batch_free(dev, &b);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return 0;
}

static int passes_device(ptdp_device *dev, void *arg)
{
    int rc = one_pass(dev, arg, 0);
    return rc != 0 ? rc : one_pass(dev, arg, 1);
}

/* _i: float; bf16 activations; float with dropout 0.1; the three again
 * with --attention tiled */
LOOP_TEST(recompute_tests, test_full_recompute_peak_is_the_formula, 6)
{
    run_arg a = { .bf16 = _i % 3 == 1, .dropout = _i % 3 == 2 ? 0.1 : 0.0, .tiled = _i >= 3 };
    harness_launch_ok(1, passes_device, &a, NULL, NULL);
    ptdp_model_config cfg = config();
    const double want = a.tiled ? ptdp_gpt_full_recompute_peak_bytes_tiled(&cfg, ROWS, 1, a.bf16)
                                : ptdp_gpt_full_recompute_peak_bytes(&cfg, ROWS, 1, a.bf16, a.dropout > 0);
    const double got = (double)a.peak[1], plain = (double)a.peak[0];
    const double A = a.tiled ? ptdp_gpt_block_act_bytes_tiled(&cfg, ROWS, 1, 1, false, a.bf16)
                             : ptdp_gpt_block_act_bytes(&cfg, ROWS, 1, 1, false, false, a.bf16);
    printf("recompute%s%s%s: peak of acts %.0f B with, %.0f B without (%.2fx); formula %.0f B; L A = %.0f B\n",
           a.tiled ? " tiled" : "", a.bf16 ? " bf16" : "", a.dropout > 0 ? " dropout" : "", got, plain, plain / got, want, LAYERS * A);
    /* to the byte: every tensor here is a multiple of the arena's 64 bytes */
    ck_assert_msg(got == want, "peak with recompute %.0f B, formula %.0f B", got, want);
    /* less than half without — a third less in tiles, whose blocks keep no T x T to begin with */
    ck_assert_msg(plain > LAYERS * A && (a.tiled ? 1.5 : 2) * got < plain, "without %.0f B, with %.0f B, L A %.0f B", plain, got,
                  LAYERS * A);
    ck_assert_msg(memcmp(&a.loss[0], &a.loss[1], sizeof a.loss[0]) == 0, "loss %.17g with, %.17g without",
                  a.loss[1], a.loss[0]);
    ck_assert_msg(memcmp(a.grads[0], a.grads[1], a.ngrads * sizeof(ptdp_real)) == 0,
                  "the gradients with recomputation differ from those without");
    free(a.grads[0]);
    free(a.grads[1]);
}
END_TEST

int main(void)
{
    return harness_main("recompute");
}
