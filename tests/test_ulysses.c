/*
 * test_ulysses.c — Ulysses' re-layouts (ulysses.h) and the attention they
 * carry, against one device.
 *
 *   placement  for N = 1 .. 4 devices, zigzag and contiguous shares, q | k |
 *              v side by side (3 parts) and one part: after the way there
 *              every rank holds every position, in order, of exactly its
 *              heads of each part; the way back (in place) restores its
 *              own positions of every head, bit for bit; each way sends
 *              (N-1)/N of the tensor (the library's byte count)
 *   gqa        q of 12 heads beside k, v of 4 (grouped-query attention):
 *              rank r gets its query heads and the kv heads they read
 *   attention  the same ranks, dropout 0 and 0.2: the heads' attention on
 *              whole sequences between the two all-to-alls (and its
 *              backward between dy's and dq dk dv's) equals attention.c on
 *              one device, rows of each rank's positions (1e-12 in double,
 *              1e-5 in float)
 *   formula    the bytes per block, 8 X (N-1)/N, against the ring's
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ptdp/cp.h"
#include "ptdp/ops.h"
#include "ptdp/ulysses.h"

static const harness_tcase ulysses_tests = { .name = "ulysses", .timeout_s = 60 };

enum { B = 2, T = 24, HEADS = 12, HD = 2, W = HEADS * HD };

/* ====================================================== placement */

/* The number at sample b, position t, part p, head h, column d: it says
 * where it belongs. */
static ptdp_real code(int b, int t, int p, int h, int d)
{
    return (ptdp_real)(((b * T + t) * 4 + p) * 100 + h * HD + d);
}

typedef struct {
    bool zigzag;
    int parts;
    double sent[2][8];   /* per rank: there, back */
} place_arg;

static int place_device(ptdp_device *dev, void *arg)
{
    place_arg *a = arg;
    const int N = dev->world_size, r = dev->rank, Tl = T / N, hn = HEADS / N, P = a->parts;
    const ptdp_cp_layout l = ptdp_cp_layout_of(T, N, r, a->zigzag);
    ptdp_tensor seq;
    DEVICE_TRY(ptdp_tensor_alloc(dev, &seq, "seq", PTDP_MEM_ACTS, B * Tl, P * W));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tl; t++)
            for (int p = 0; p < P; p++)
                for (int c = 0; c < W; c++)
                    *ptdp_at(seq, b * Tl + t, p * W + c) = code(b, ptdp_cp_position(&l, t), p, c / HD, c % HD);
    const ptdp_tensor heads = ptdp_tensor_wrap(seq.data, B * T, P * hn * HD);   /* in place */
    double s0 = dev->stats.bytes_sent[PTDP_COLL_ALL_TO_ALL];
    DEVICE_TRY(ptdp_ulysses_heads_from_sequence(dev, dev->world, seq, heads, T, P, HEADS, HD, a->zigzag));
    double s1 = dev->stats.bytes_sent[PTDP_COLL_ALL_TO_ALL];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int p = 0; p < P; p++)
                for (int c = 0; c < hn * HD; c++) {
                    const ptdp_real got = *ptdp_at(heads, b * T + t, p * hn * HD + c);
                    DEVICE_CHECK(dev, got == code(b, t, p, r * hn + c / HD, c % HD),
                                 "rank %d of %d: sample %d position %d part %d column %d holds %g", r, N, b, t, p,
                                 c, (double)got);
                }
    DEVICE_TRY(ptdp_ulysses_sequence_from_heads(dev, dev->world, heads, seq, T, P, HEADS, HD, a->zigzag));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tl; t++)
            for (int c = 0; c < P * W; c++)
                DEVICE_CHECK(dev, *ptdp_at(seq, b * Tl + t, c) ==
                                      code(b, ptdp_cp_position(&l, t), c / W, (c % W) / HD, c % HD),
                             "rank %d of %d: back, row %d column %d wrong", r, N, b * Tl + t, c);
    a->sent[0][r] = s1 - s0;
    a->sent[1][r] = dev->stats.bytes_sent[PTDP_COLL_ALL_TO_ALL] - s1;
    ptdp_tensor_free(dev, &seq);
    return 0;
}

/* _i: N = 1 + _i % 4, zigzag for _i / 4 even, 3 parts for _i < 8 */
LOOP_TEST(ulysses_tests, test_relayout_places_every_head_and_position, 16)
{
    place_arg a = { .zigzag = (_i / 4) % 2 == 0, .parts = _i < 8 ? 3 : 1 };
    const int N = 1 + _i % 4;
    harness_launch_ok(N, place_device, &a, NULL, NULL);
    const double tensor = (double)B * (T / N) * a.parts * W * sizeof(ptdp_real);
    for (int r = 0; r < N; r++)
        for (int w = 0; w < 2; w++)
            ck_assert_msg(a.sent[w][r] == tensor * (N - 1) / N, "N %d rank %d: sent %g bytes, (N-1)/N of %g is %g",
                          N, r, a.sent[w][r], tensor, tensor * (N - 1) / N);
}
END_TEST

/* Grouped-query attention's q | k | v: q of HEADS heads, k and v of KV
 * heads each.  After the way there rank r holds every position of query
 * heads r HEADS/N .. and of kv heads r KV/N .. — each of its query heads'
 * kv head (h / (HEADS/KV)) among them — and the way back restores it. */
enum { KV = 4, GW = (HEADS + 2 * KV) * HD };

static int gqa_device(ptdp_device *dev, void *arg)
{
    const bool zigzag = *(const bool *)arg;
    const int N = dev->world_size, r = dev->rank, Tl = T / N, H[3] = { HEADS, KV, KV };
    const int col0[3] = { 0, HEADS * HD, (HEADS + KV) * HD };
    const ptdp_cp_layout l = ptdp_cp_layout_of(T, N, r, zigzag);
    ptdp_tensor seq;
    DEVICE_TRY(ptdp_tensor_alloc(dev, &seq, "seq", PTDP_MEM_ACTS, B * Tl, GW));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tl; t++)
            for (int p = 0; p < 3; p++)
                for (int c = 0; c < H[p] * HD; c++)
                    *ptdp_at(seq, b * Tl + t, col0[p] + c) = code(b, ptdp_cp_position(&l, t), p, c / HD, c % HD);
    const ptdp_tensor heads = ptdp_tensor_wrap(seq.data, B * T, GW / N);   /* in place */
    DEVICE_TRY(ptdp_ulysses_gqa_heads_from_sequence(dev, dev->world, seq, heads, T, HEADS, KV, HD, zigzag));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int p = 0, at = 0; p < 3; at += H[p] / N * HD, p++)
                for (int c = 0; c < H[p] / N * HD; c++) {
                    const ptdp_real got = *ptdp_at(heads, b * T + t, at + c);
                    DEVICE_CHECK(dev, got == code(b, t, p, r * (H[p] / N) + c / HD, c % HD),
                                 "rank %d of %d: sample %d position %d part %d column %d holds %g", r, N, b, t, p,
                                 c, (double)got);
                }
    for (int j = 0; j < HEADS / N; j++)   /* query head j's kv head is local kv head j / (HEADS/KV) */
        DEVICE_CHECK(dev, (r * (HEADS / N) + j) / (HEADS / KV) == r * (KV / N) + j / (HEADS / KV),
                     "rank %d of %d: query head %d reads a kv head another rank holds", r, N, j);
    DEVICE_TRY(ptdp_ulysses_gqa_sequence_from_heads(dev, dev->world, heads, seq, T, HEADS, KV, HD, zigzag));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tl; t++)
            for (int p = 0; p < 3; p++)
                for (int c = 0; c < H[p] * HD; c++)
                    DEVICE_CHECK(dev, *ptdp_at(seq, b * Tl + t, col0[p] + c) ==
                                          code(b, ptdp_cp_position(&l, t), p, c / HD, c % HD),
                                 "rank %d of %d: back, row %d part %d column %d wrong", r, N, b * Tl + t, p, c);
    ptdp_tensor_free(dev, &seq);
    return 0;
}

/* _i: N = 1, 2, 4 (dividing KV), zigzag for _i < 3 */
LOOP_TEST(ulysses_tests, test_gqa_relayout_gives_each_rank_its_kv_heads, 6)
{
    bool zigzag = _i < 3;
    harness_launch_ok(1 << (_i % 3), gqa_device, &zigzag, NULL, NULL);
}
END_TEST

/* ====================================================== attention */

typedef struct {
    bool zigzag;
    double p;
    ptdp_real qkv[B * T][3 * W], dy[B * T][W];     /* the whole sequences */
    ptdp_real y[B * T][W], dqkv[B * T][3 * W];     /* one device's answers */
    double worst_y[8], worst_d[8];
} attn_arg;

static ptdp_attn_dropout dropout_at(const attn_arg *a, int head0)
{
    return (ptdp_attn_dropout){ .p = a->p, .key = 77, .sample0 = 5, .head0 = head0, .heads_total = HEADS };
}

static void reference(attn_arg *a)
{
    for (int i = 0; i < B * T; i++) {
        for (int j = 0; j < 3 * W; j++)
            a->qkv[i][j] = (ptdp_real)(sin(0.37 * i + 1.3 * j) + 0.3 * cos(0.11 * i * j));
        for (int j = 0; j < W; j++)
            a->dy[i][j] = (ptdp_real)cos(0.23 * i - 0.7 * j);
    }
    const ptdp_attn_dropout d = dropout_at(a, 0);
    ptdp_real *probs = malloc(sizeof(ptdp_real) * B * HEADS * T * T), *scratch = malloc(sizeof(ptdp_real) * 2 * T * T);
    ck_assert(probs != NULL && scratch != NULL);
    const ptdp_tensor qkv = ptdp_tensor_wrap(&a->qkv[0][0], B * T, 3 * W);
    ptdp_attention_forward(ptdp_tensor_wrap(&a->y[0][0], B * T, W), probs, qkv, T, HEADS, HD, &d, scratch);
    ptdp_attention_backward(ptdp_tensor_wrap(&a->dqkv[0][0], B * T, 3 * W), ptdp_tensor_wrap(&a->dy[0][0], B * T, W),
                            qkv, probs, T, HEADS, HD, &d, scratch);
    free(probs);
    free(scratch);
}

/* My positions' rows of the whole (B T) x cols `whole` into (B Tl) x cols t. */
static void take_rows(ptdp_tensor t, const ptdp_real *whole, int cols, const ptdp_cp_layout *l, int Tl)
{
    for (int b = 0; b < B; b++)
        for (int i = 0; i < Tl; i++)
            memcpy(ptdp_at(t, b * Tl + i, 0), whole + (size_t)(b * T + ptdp_cp_position(l, i)) * cols,
                   (size_t)cols * sizeof(ptdp_real));
}

static double worst_rows(ptdp_tensor t, const ptdp_real *whole, int cols, const ptdp_cp_layout *l, int Tl)
{
    double w = 0;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < Tl; i++)
            for (int j = 0; j < cols; j++)
                w = fmax(w, fabs((double)*ptdp_at(t, b * Tl + i, j) -
                                 whole[(size_t)(b * T + ptdp_cp_position(l, i)) * cols + j]));
    return w;
}

static int attn_device(ptdp_device *dev, void *arg)
{
    attn_arg *a = arg;
    const int N = dev->world_size, r = dev->rank, Tl = T / N, hn = HEADS / N;
    const ptdp_cp_layout l = ptdp_cp_layout_of(T, N, r, a->zigzag);
    ptdp_tensor qkv, dy, y, yh;
    DEVICE_TRY(ptdp_tensor_alloc(dev, &qkv, "qkv", PTDP_MEM_ACTS, B * Tl, 3 * W));
    DEVICE_TRY(ptdp_tensor_alloc(dev, &dy, "dy", PTDP_MEM_ACTS, B * Tl, W));
    DEVICE_TRY(ptdp_tensor_alloc(dev, &y, "y", PTDP_MEM_ACTS, B * Tl, W));
    DEVICE_TRY(ptdp_tensor_alloc(dev, &yh, "y.heads", PTDP_MEM_ACTS, B * T, hn * HD));
    ptdp_real *probs = ptdp_alloc(dev, sizeof(ptdp_real) * B * hn * T * T, PTDP_MEM_ACTS, "probs");
    ptdp_real *scratch = ptdp_alloc(dev, sizeof(ptdp_real) * 2 * T * T, PTDP_MEM_ACTS, "scratch");
    DEVICE_CHECK(dev, probs != NULL && scratch != NULL, "no memory");
    take_rows(qkv, &a->qkv[0][0], 3 * W, &l, Tl);
    take_rows(dy, &a->dy[0][0], W, &l, Tl);
    const ptdp_attn_dropout d = dropout_at(a, r * hn);
    const ptdp_tensor qkvh = ptdp_tensor_wrap(qkv.data, B * T, 3 * hn * HD);
    const ptdp_tensor dyh = ptdp_tensor_wrap(dy.data, B * T, hn * HD);
    DEVICE_TRY(ptdp_ulysses_heads_from_sequence(dev, dev->world, qkv, qkvh, T, 3, HEADS, HD, a->zigzag));
    ptdp_attention_forward(yh, probs, qkvh, T, hn, HD, &d, scratch);
    DEVICE_TRY(ptdp_ulysses_sequence_from_heads(dev, dev->world, yh, y, T, 1, HEADS, HD, a->zigzag));
    a->worst_y[r] = worst_rows(y, &a->y[0][0], W, &l, Tl);
    /* the backward: dy there, dq dk dv back, into qkv's storage (its last reader is done) */
    DEVICE_TRY(ptdp_ulysses_heads_from_sequence(dev, dev->world, dy, dyh, T, 1, HEADS, HD, a->zigzag));
    ptdp_tensor dqkv;
    DEVICE_TRY(ptdp_tensor_alloc(dev, &dqkv, "dqkv", PTDP_MEM_ACTS, B * Tl, 3 * W));
    const ptdp_tensor dqkvh = ptdp_tensor_wrap(dqkv.data, B * T, 3 * hn * HD);
    ptdp_attention_backward(dqkvh, dyh, qkvh, probs, T, hn, HD, &d, scratch);
    DEVICE_TRY(ptdp_ulysses_sequence_from_heads(dev, dev->world, dqkvh, dqkv, T, 3, HEADS, HD, a->zigzag));
    a->worst_d[r] = worst_rows(dqkv, &a->dqkv[0][0], 3 * W, &l, Tl);
    ptdp_free(dev, probs);
    ptdp_free(dev, scratch);
    ptdp_tensor_free(dev, &qkv);
    ptdp_tensor_free(dev, &dy);
    ptdp_tensor_free(dev, &y);
    ptdp_tensor_free(dev, &yh);
    ptdp_tensor_free(dev, &dqkv);
    return 0;
}

/* _i: N = 1 + _i % 4, zigzag for _i / 4 even, dropout 0.2 for _i >= 8 */
LOOP_TEST(ulysses_tests, test_ulysses_attention_equals_one_device, 16)
{
    static attn_arg a;   /* large: not on the stack */
    memset(&a, 0, sizeof a);
    const int N = 1 + _i % 4;
    a.zigzag = (_i / 4) % 2 == 0;
    a.p = _i >= 8 ? 0.2 : 0.0;
    reference(&a);
    harness_launch_ok(N, attn_device, &a, NULL, NULL);
    harness_assert_attention_close(N, a.zigzag, a.p, a.worst_y, a.worst_d);
}
END_TEST

TEST(ulysses_tests, test_bytes_per_block_against_the_ring)
{
    /* X = B (T/N) width = 2 x 6 x 8 = 96 elements on N = 4 */
    ck_assert(ptdp_ulysses_elements_per_block(2, 24, 8, 4, 1) == 8 * 96 * 3 / 4.0);
    ck_assert(ptdp_ulysses_elements_per_block(2, 24, 8, 4, 2) == 12 * 96 * 3 / 4.0);
    ck_assert(ptdp_ring_elements_per_block(2, 24, 8, 4, 1) == (6 * 3 + 2) * 96.0);
    ck_assert(ptdp_ulysses_elements_per_block(2, 24, 8, 1, 1) == 0 && ptdp_ring_elements_per_block(2, 24, 8, 1, 1) == 0);
    /* Ulysses' 4 (N-1)/N^2 T C a pass: it shrinks with N, the ring's does not */
    for (int N = 2; N <= 8; N *= 2)
        ck_assert(ptdp_ulysses_elements_per_block(1, 64, 8, N, 1) < ptdp_ring_elements_per_block(1, 64, 8, N, 1));
}
END_TEST

int main(void)
{
    return harness_main("ulysses");
}
