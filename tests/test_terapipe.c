/*
 * test_terapipe.c — token slices (TeraPipe) on one stage, against the whole
 * sequence.
 *
 *   attention   ptdp_attention_forward_slice / _backward_slice, run slice
 *               by slice (backwards last slice first, the key and value
 *               gradients added into one buffer), give the whole sequence's
 *               outputs and gradients, with and without dropout
 *   gpt         a GPT micro-batch forwarded as k slices in order and
 *               backwarded in reverse has the whole micro-batch's loss and
 *               parameter gradients — tp 1 and 2, SP, dropout, full and
 *               selective recomputation, even and uneven slices — and its
 *               cache is gone after the first slice's backward
 *   order       a slice before its sequence's first one is refused
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_shape.h"
#include "harness.h"
#include "ptdp/gpt.h"
#include "ptdp/mesh.h"
#include "ptdp/models.h"
#include "ptdp/ops.h"
#include "ptdp/types.h"

#ifdef PTDP_DOUBLE
static const double TOL = 1e-11;
#else
static const double TOL = 2e-5;
#endif

static const harness_tcase slice_tests = { .name = "terapipe", .timeout_s = 120 };

/* ---- the attention kernel ------------------------------------------------------- */

enum { B = 2, T = 12, HEADS = 2, HD = 3, W = HEADS * HD };

LOOP_TEST(slice_tests, test_attention_slices_equal_the_whole_sequence, 4)
{
    const int k = _i % 2 ? 5 : 3;          /* uneven and even cuts of 12 */
    const double p = _i < 2 ? 0.0 : 0.3;
    static ptdp_real qkv[B * T][3 * W], dy[B * T][W], y[B * T][W], dqkv[B * T][3 * W];
    static ptdp_real ys[B * T][W], dqkvs[B * T][3 * W], probs[B * HEADS * T * T], scratch[2 * T * T];
    for (int i = 0; i < B * T; i++) {
        for (int j = 0; j < 3 * W; j++)
            qkv[i][j] = (ptdp_real)sin(0.37 * i + 1.3 * j);
        for (int j = 0; j < W; j++)
            dy[i][j] = (ptdp_real)cos(0.11 * i - 0.7 * j);
    }
    ptdp_attn_dropout d = { .p = p, .key = 9, .sample0 = 4, .head0 = 0, .heads_total = HEADS };
    ptdp_tensor QKV = ptdp_tensor_wrap(&qkv[0][0], B * T, 3 * W);
    ptdp_attention_forward(ptdp_tensor_wrap(&y[0][0], B * T, W), probs, QKV, T, HEADS, HD, &d, scratch);
    ptdp_attention_backward(ptdp_tensor_wrap(&dqkv[0][0], B * T, 3 * W), ptdp_tensor_wrap(&dy[0][0], B * T, W),
                            QKV, probs, T, HEADS, HD, &d, scratch);

    memset(dqkvs, 0, sizeof dqkvs);
    ptdp_real *P[8];
    ptdp_real sy[B * T * W], sdy[B * T * W];
    for (int pass = 0; pass < 2; pass++)
        for (int jj = 0; jj < k; jj++) {
            int j = pass == 0 ? jj : k - 1 - jj;     /* forward in order, backward last first */
            size_t off, len;
            ptdp_share(T, k, j, &off, &len);
            const int q0 = (int)off, tl = (int)len;
            ptdp_tensor Y = ptdp_tensor_wrap(sy, B * tl, W), DY = ptdp_tensor_wrap(sdy, B * tl, W);
            if (pass == 0) {
                P[j] = malloc(sizeof(ptdp_real) * B * HEADS * tl * (q0 + tl));
                ptdp_attention_forward_slice(Y, P[j], QKV, T, q0, q0 + tl, HEADS, HD, &d, scratch);
                for (int b = 0; b < B; b++)
                    for (int t = 0; t < tl; t++)
                        memcpy(ys[b * T + q0 + t], &sy[(b * tl + t) * W], sizeof(ptdp_real) * W);
            } else {
                for (int b = 0; b < B; b++)
                    for (int t = 0; t < tl; t++)
                        memcpy(&sdy[(b * tl + t) * W], dy[b * T + q0 + t], sizeof(ptdp_real) * W);
                ptdp_attention_backward_slice(ptdp_tensor_wrap(&dqkvs[0][0], B * T, 3 * W), DY, QKV, P[j], T, q0,
                                              q0 + tl, HEADS, HD, &d, true, scratch);
                free(P[j]);
            }
        }
    double worst = 0;
    for (int i = 0; i < B * T; i++) {
        for (int j = 0; j < W; j++)
            worst = fmax(worst, fabs((double)ys[i][j] - y[i][j]));
        for (int j = 0; j < 3 * W; j++)
            worst = fmax(worst, fabs((double)dqkvs[i][j] - dqkv[i][j]));
    }
    ck_assert_msg(worst < TOL, "k=%d p=%g: worst difference %g", k, p, worst);
}
END_TEST

/* ---- the GPT -------------------------------------------------------------------- */

typedef struct {
    int tp, slices;
    bool sp, recompute, selective;
    double dropout;
    double worst_grad, loss_whole, loss_sliced;
    size_t acts_left;
} gpt_case;

static ptdp_model_config small(int tp)
{
    return gpt_of((gpt_shape){ .layers = 2, .hidden = 8, .ffn = 16, .heads = 2, .seq_len = 12, .vocab = 62 }, tp);
}

static int gpt_device(ptdp_device *dev, void *arg)
{
    gpt_case *c = arg;
    ptdp_model_config cfg = small(c->tp);
    ptdp_mesh mesh;
    ptdp_model m;
    DEVICE_TRY(ptdp_mesh_init(dev, 1, c->tp, 1, &mesh));
    mesh.sp = c->sp;
    DEVICE_TRY(ptdp_model_init(dev, &m, &cfg, &mesh, NULL, 5, c->dropout));
    m.recompute_core = c->selective;
    const int rows = 3;
    const double scale = 1.0 / (rows * (double)ptdp_gpt(&cfg)->seq_len);
    ptdp_real *whole = malloc(sizeof(ptdp_real) * m.numel);

    /* the whole micro-batch */
    ptdp_batch b = { .first = 7, .rows = rows };
    DEVICE_TRY(ptdp_batch_load(dev, &m, &b));
    ptdp_acts acts;
    DEVICE_TRY(ptdp_model_forward(dev, &m, &acts, &b, (ptdp_tensor){ 0 }, 2, c->recompute, NULL));
    double loss = acts.loss_sum;
    DEVICE_TRY(ptdp_model_backward(dev, &m, &acts, NULL, scale, NULL));
    DEVICE_TRY(ptdp_model_sum_groups(dev, &m));   /* SP: each rank's LayerNorm part covers other positions */
    memcpy(whole, m.flat_g, sizeof(ptdp_real) * m.numel);
    memset(m.flat_g, 0, sizeof(ptdp_real) * m.numel);

    /* the same as slices: forward in order, backward last first */
    ptdp_acts sa[16];
    double sliced = 0;
    for (int j = 0; j < c->slices; j++) {
        size_t off, len;
        ptdp_share((size_t)ptdp_gpt(&cfg)->seq_len, c->slices, j, &off, &len);
        ptdp_batch s = b;
        s.t0 = (int)off;
        s.tlen = (int)len;
        DEVICE_TRY(ptdp_model_forward(dev, &m, &sa[j], &s, (ptdp_tensor){ 0 }, 2, c->recompute, NULL));
        sliced += sa[j].loss_sum;
    }
    for (int j = c->slices - 1; j >= 0; j--)
        DEVICE_TRY(ptdp_model_backward(dev, &m, &sa[j], NULL, scale, NULL));
    DEVICE_TRY(ptdp_model_sum_groups(dev, &m));
    ptdp_mem_stats ms;
    ptdp_arena_stats(dev->arena, &ms);
    if (dev->rank == 0) {
        c->loss_whole = loss;
        c->loss_sliced = sliced;
        c->acts_left = ms.current[PTDP_MEM_ACTS];
        for (size_t k = 0; k < m.numel; k++)
            c->worst_grad = fmax(c->worst_grad, fabs((double)m.flat_g[k] - whole[k]) /
                                                    fmax(1e-3, fabs((double)whole[k])));
    }
    free(whole);
    ptdp_batch_free(dev, &b);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return 0;
}

LOOP_TEST(slice_tests, test_gpt_slices_equal_the_whole_micro_batch, 8)
{
    static const gpt_case cases[] = {
        { .tp = 1, .slices = 3 },
        { .tp = 1, .slices = 5 },                       /* uneven: 3 3 2 2 2 */
        { .tp = 1, .slices = 12, .dropout = 0.2 },      /* one token a slice */
        { .tp = 2, .slices = 3 },
        { .tp = 2, .slices = 3, .sp = true, .dropout = 0.1 },
        { .tp = 1, .slices = 4, .recompute = true, .dropout = 0.1 },
        { .tp = 2, .slices = 2, .selective = true },
        { .tp = 1, .slices = 1 },
    };
    gpt_case c = cases[_i];
    harness_launch_ok(c.tp, gpt_device, &c, NULL, NULL);
    ck_assert_msg(fabs(c.loss_sliced - c.loss_whole) < TOL * fmax(1, fabs(c.loss_whole)),
                  "case %d: loss %.15g as slices, %.15g whole", _i, c.loss_sliced, c.loss_whole);
    ck_assert_msg(c.worst_grad < (sizeof(ptdp_real) == 8 ? 1e-9 : 1e-4), "case %d: worst gradient difference %g",
                  _i, c.worst_grad);
    ck_assert_msg(c.acts_left == 0, "case %d: %zu bytes of activations left (the cache?)", _i, c.acts_left);
}
END_TEST

/* ---- order ---------------------------------------------------------------------- */

static int late_slice_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_model_config cfg = small(1);
    ptdp_mesh mesh;
    ptdp_model m;
    DEVICE_TRY(harness_model_on_mesh(dev, &cfg, 1, 1, 1, 5, &mesh, &m));
    ptdp_batch b = { .first = 7, .rows = 2, .t0 = 4, .tlen = 4 };
    ptdp_acts acts;
    int rc = ptdp_batch_load(dev, &m, &b);
    if (rc == 0)
        rc = ptdp_model_forward(dev, &m, &acts, &b, (ptdp_tensor){ 0 }, 0, false, NULL);
    ptdp_acts_free(dev, &m, &acts);
    ptdp_batch_free(dev, &b);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return rc;
}

TEST(slice_tests, test_a_slice_before_its_sequences_first_is_refused)
{
    char why[PTDP_MSG_MAX + 128];
    ck_assert(!harness_launch_succeeds(1, late_slice_device, NULL, NULL, NULL, why, sizeof why));
    ck_assert_msg(strstr(why, "token slice [4, 8)") && strstr(why, "first slice has not run forward"), "%s", why);
}
END_TEST

int main(void)
{
    return harness_main("terapipe");
}
