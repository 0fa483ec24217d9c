/*
 * test_cp.c — ring attention (cp.h) against one device's attention.
 *
 *   equality   for N = 1, 2, 3, 4 devices, zigzag and contiguous shares,
 *              with and without dropout on the probabilities: every
 *              rank's outputs and its q, k and v gradients equal the
 *              rows of its positions in attention.c's, on the whole
 *              sequence (1e-12 in double, 1e-5 in float)
 *   gqa        the same with one kv head for the two query heads
 *              (multi-query): the ring sends only the kv head, and
 *              equals attention.c's grouped-query attention
 *   layout     zigzag gives rank r shares r and 2N-1-r; every position
 *              is held exactly once
 *   balance    zigzag: every rank computes the same score blocks;
 *              contiguous: the last rank the most
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ptdp/cp.h"
#include "ptdp/ops.h"

static const harness_tcase cp_tests = { .name = "cp", .timeout_s = 60 };

enum { B = 2, T = 24, HEADS = 2, HD = 4, W = HEADS * HD };

typedef struct {
    bool zigzag;
    double p;                       /* dropout */
    int kv;                         /* kv heads: HEADS, or 1 (grouped) */
    ptdp_real qkv[B * T][3 * W];    /* the whole sequences */
    ptdp_real dy[B * T][W];
    ptdp_real y[B * T][W];          /* one device's answers */
    ptdp_real dqkv[B * T][3 * W];
    double worst_y[8], worst_d[8];  /* per rank */
} cp_arg;

static ptdp_attn_dropout dropout_of(const cp_arg *a)
{
    return (ptdp_attn_dropout){ .p = a->p, .key = 77, .sample0 = 5, .head0 = 0, .heads_total = HEADS };
}

/* One device on the whole sequences: attention.c. */
static void reference(cp_arg *a)
{
    for (int i = 0; i < B * T; i++) {
        for (int j = 0; j < 3 * W; j++)
            a->qkv[i][j] = (ptdp_real)(sin(0.37 * i + 1.3 * j) + 0.3 * cos(0.11 * i * j));
        for (int j = 0; j < W; j++)
            a->dy[i][j] = (ptdp_real)cos(0.23 * i - 0.7 * j);
    }
    ptdp_attn_dropout d = dropout_of(a);
    ptdp_real *probs = malloc(sizeof(ptdp_real) * B * HEADS * T * T);
    ptdp_real *scratch = malloc(sizeof(ptdp_real) * 2 * T * T);
    ck_assert(probs != NULL && scratch != NULL);
    ptdp_tensor qkv = ptdp_tensor_wrap(&a->qkv[0][0], B * T, 3 * W);
    ptdp_tensor dqkv = ptdp_tensor_wrap(&a->dqkv[0][0], B * T, 3 * W);
    if (a->kv == HEADS) {
        ptdp_attention_forward(ptdp_tensor_wrap(&a->y[0][0], B * T, W), probs, qkv, T, HEADS, HD, &d, scratch);
        ptdp_attention_backward(dqkv, ptdp_tensor_wrap(&a->dy[0][0], B * T, W), qkv, probs, T, HEADS, HD, &d, scratch);
    } else {   /* [q | k | v] of W + 2 kv HD columns, in rows of 3 W */
        qkv.cols = dqkv.cols = W + 2 * a->kv * HD;
        ptdp_attention_gqa_forward(ptdp_tensor_wrap(&a->y[0][0], B * T, W), probs, qkv, T, HEADS, a->kv, HD, &d,
                                   scratch);
        ptdp_attention_gqa_backward(dqkv, ptdp_tensor_wrap(&a->dy[0][0], B * T, W), qkv, probs, T, HEADS, a->kv, HD,
                                    &d, scratch);
    }
    free(probs);
    free(scratch);
}

static int ring_device(ptdp_device *dev, void *arg)
{
    cp_arg *a = arg;
    const int N = ptdp_comm_size(dev->world), r = dev->rank, Tl = T / N, QKV = W + 2 * a->kv * HD;
    ptdp_cp_layout l = ptdp_cp_layout_of(T, N, r, a->zigzag);
    ptdp_tensor qkv, dy, y, dqkv;
    DEVICE_TRY(ptdp_tensor_alloc(dev, &qkv, "qkv", PTDP_MEM_ACTS, B * Tl, QKV));
    DEVICE_TRY(ptdp_tensor_alloc(dev, &dy, "dy", PTDP_MEM_ACTS, B * Tl, W));
    DEVICE_TRY(ptdp_tensor_alloc(dev, &y, "y", PTDP_MEM_ACTS, B * Tl, W));
    DEVICE_TRY(ptdp_tensor_alloc(dev, &dqkv, "dqkv", PTDP_MEM_ACTS, B * Tl, QKV));
    ptdp_real *lse = ptdp_alloc(dev, sizeof(ptdp_real) * B * HEADS * Tl, PTDP_MEM_ACTS, "lse");
    DEVICE_CHECK(dev, lse != NULL, "no memory");
    for (int b = 0; b < B; b++)            /* my positions of each sequence */
        for (int t = 0; t < Tl; t++) {
            int g = b * T + ptdp_cp_position(&l, t);
            memcpy(ptdp_at(qkv, b * Tl + t, 0), a->qkv[g], sizeof(ptdp_real) * QKV);
            memcpy(ptdp_at(dy, b * Tl + t, 0), a->dy[g], sizeof a->dy[g]);
        }
    ptdp_attn_dropout d = dropout_of(a);
    if (a->kv == HEADS) {
        DEVICE_TRY(ptdp_ring_attention_forward(dev, dev->world, y, lse, qkv, T, HEADS, HD, a->zigzag, &d));
        DEVICE_TRY(ptdp_ring_attention_backward(dev, dev->world, dqkv, dy, qkv, y, lse, T, HEADS, HD, a->zigzag, &d));
    } else {
        DEVICE_TRY(ptdp_ring_attention_gqa_forward(dev, dev->world, y, lse, qkv, T, HEADS, a->kv, HD, a->zigzag, &d));
        DEVICE_TRY(ptdp_ring_attention_gqa_backward(dev, dev->world, dqkv, dy, qkv, y, lse, T, HEADS, a->kv, HD,
                                                    a->zigzag, &d));
    }
    double wy = 0, wd = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tl; t++) {
            int g = b * T + ptdp_cp_position(&l, t);
            for (int j = 0; j < W; j++)
                wy = fmax(wy, fabs((double)*ptdp_at(y, b * Tl + t, j) - a->y[g][j]));
            for (int j = 0; j < QKV; j++)
                wd = fmax(wd, fabs((double)*ptdp_at(dqkv, b * Tl + t, j) - a->dqkv[g][j]));
        }
    a->worst_y[r] = wy;
    a->worst_d[r] = wd;
    ptdp_free(dev, lse);
    ptdp_tensor_free(dev, &qkv);
    ptdp_tensor_free(dev, &dy);
    ptdp_tensor_free(dev, &y);
    ptdp_tensor_free(dev, &dqkv);
    return 0;
}

/* _i: N = 1 + _i % 4, zigzag for _i / 4 even, dropout 0.2 for _i >= 8 */
LOOP_TEST(cp_tests, test_ring_attention_equals_one_device, 16)
{
    static cp_arg a;   /* large: not on the stack */
    memset(&a, 0, sizeof a);
    const int N = 1 + _i % 4;
    a.zigzag = (_i / 4) % 2 == 0;
    a.p = _i >= 8 ? 0.2 : 0.0;
    a.kv = HEADS;
    reference(&a);
    harness_launch_ok(N, ring_device, &a, NULL, NULL);
    harness_assert_attention_close(N, a.zigzag, a.p, a.worst_y, a.worst_d);
}
END_TEST

/* _i as above: one kv head for the two query heads */
LOOP_TEST(cp_tests, test_gqa_ring_attention_equals_one_device, 16)
{
    static cp_arg a;
    memset(&a, 0, sizeof a);
    const int N = 1 + _i % 4;
    a.zigzag = (_i / 4) % 2 == 0;
    a.p = _i >= 8 ? 0.2 : 0.0;
    a.kv = 1;
    reference(&a);
    harness_launch_ok(N, ring_device, &a, NULL, NULL);
    harness_assert_attention_close(N, a.zigzag, a.p, a.worst_y, a.worst_d);
}
END_TEST

TEST(cp_tests, test_zigzag_layout_covers_every_position_once)
{
    for (int N = 1; N <= 4; N++)
        for (int z = 0; z < 2; z++) {
            int seen[T] = { 0 };
            for (int r = 0; r < N; r++) {
                ptdp_cp_layout l = ptdp_cp_layout_of(T, N, r, z == 0);
                for (int t = 0; t < T / N; t++)
                    seen[ptdp_cp_position(&l, t)]++;
            }
            for (int t = 0; t < T; t++)
                ck_assert_msg(seen[t] == 1, "N %d %s: position %d held %d times", N, z ? "contiguous" : "zigzag", t,
                              seen[t]);
        }
    ptdp_cp_layout l = ptdp_cp_layout_of(16, 2, 0, true);   /* cp.h's example */
    ck_assert(l.nshares == 2 && l.len == 4 && l.first[0] == 0 && l.first[1] == 12);
    l = ptdp_cp_layout_of(16, 2, 1, true);
    ck_assert(l.first[0] == 4 && l.first[1] == 8);
}
END_TEST

TEST(cp_tests, test_zigzag_balances_the_work)
{
    for (int N = 2; N <= 4; N++) {
        double z0 = ptdp_ring_attention_scores(T, N, 0, true);
        for (int r = 1; r < N; r++)
            ck_assert_msg(ptdp_ring_attention_scores(T, N, r, true) == z0, "zigzag N %d: rank %d does %g, rank 0 %g",
                          N, r, ptdp_ring_attention_scores(T, N, r, true), z0);
        double c0 = ptdp_ring_attention_scores(T, N, 0, false), cl = ptdp_ring_attention_scores(T, N, N - 1, false);
        ck_assert_msg(cl == N * c0, "contiguous N %d: the last rank does %g, N x the first's %g", N, cl, c0);
    }
}
END_TEST

/* The scores in closed form (a share sees the q_first / len + 1 key
 * shares that start at or before it) against the pairs walked owner by
 * owner, as the ring computes them, at every rank of many groups — and at
 * cp = 2^20, where the walk would take a million steps a rank. */
TEST(cp_tests, test_the_scores_in_closed_form_are_the_pairs_walked)
{
    const int Ts[] = { 16, 24, 96, 100, 4096 };
    for (size_t a = 0; a < sizeof Ts / sizeof Ts[0]; a++)
        for (int N = 1; N <= 12; N++)
            for (int z = 0; z <= 1; z++)
                for (int r = 0; r < N; r++) {
                    const int Tn = Ts[a];
                    const ptdp_cp_layout q = ptdp_cp_layout_of(Tn, N, r, z);
                    double walked = 0;
                    for (int owner = 0; owner < N; owner++) {
                        const ptdp_cp_layout k = ptdp_cp_layout_of(Tn, N, owner, z);
                        for (int i = 0; i < q.nshares; i++)
                            for (int j = 0; j < k.nshares; j++)
                                walked += ptdp_cp_in_future(q.first[i], k.first[j], q.len) ? 0 : (double)q.len * k.len;
                    }
                    ck_assert_msg(ptdp_ring_attention_scores(Tn, N, r, z) == walked, "T %d N %d rank %d %s: %g, "
                                  "walked %g", Tn, N, r, z ? "zigzag" : "contiguous",
                                  ptdp_ring_attention_scores(Tn, N, r, z), walked);
                }
    const int big = 1 << 20, Tb = 1 << 22;   /* shares of 2: rank 0 sees 1 + 2 big of them */
    ck_assert_double_eq(ptdp_ring_attention_scores(Tb, big, 0, true), (1.0 + 2.0 * big) * 4);
}
END_TEST

int main(void)
{
    return harness_main("cp");
}
