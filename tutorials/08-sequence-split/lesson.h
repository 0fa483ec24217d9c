/*
 * lesson.h — lesson 08: the functions you write in exercise.c, which the
 * check calls.
 *
 * Context parallelism: a sequence of T positions is cut over the N devices
 * of a CP group.  Zigzag: 2N shares of len = T/(2N) positions; rank r holds
 * shares r and 2N-1-r.  Its local row t (0 <= t < 2 len) is position
 *     first[t / len] + t % len.
 *
 * One query's partial attention over a set of keys (online softmax):
 *     m  the largest score                 (-inf when the set is empty)
 *     l  sum over the keys of e^(score - m)           (0 when empty)
 *     o  sum over the keys of e^(score - m) v          (0 when empty)
 * and the query's output is y = o / l once every key has been merged in.
 */
#ifndef LESSON_08_H
#define LESSON_08_H

#include <stdbool.h>

#include "ptdp/device.h"
#include "ptdp/tensor.h"

enum { LESSON_MAX_HD = 16, LESSON_MAX_ROWS = 128 };   /* a head's width; a rank's rows (2 len) */

typedef struct {
    ptdp_real m, l;
    ptdp_real o[LESSON_MAX_HD];     /* the first hd entries are used */
} lesson_partial;

/* Blank 1.  The zigzag shares of `rank` in a CP group of n devices, for a
 * sequence of T positions (T divisible by 2n): *len = T/(2n), first[0] and
 * first[1] the first positions of shares rank and 2n-1-rank. */
int lesson_zigzag_shares(int T, int n, int rank, int first[2], int *len);

/* Blank 2.  *skip = true when the key share [k_first, k_first + len) is
 * wholly in the future of the query share [q_first, q_first + len): its
 * first key comes after the query share's last position, so no query of
 * the share may see any of its keys. */
int lesson_future_block(int q_first, int k_first, int len, bool *skip);

/* Done for you (the worked example).  The partial of ONE query, at
 * position q_pos, over one key share of len keys from position k_first:
 * keys after q_pos are masked (causal).  q [hd], k and v [len x hd] rows
 * with the given stride. */
void lesson_block_partial(const ptdp_real *q, const ptdp_real *k, const ptdp_real *v, int stride, int q_pos,
                          int k_first, int len, int hd, lesson_partial *out);

/* Blank 3.  Merge the partial b (another, disjoint set of keys of the
 * same query) into a:
 *     m' = max(m_a, m_b)
 *     l' = l_a e^(m_a - m') + l_b e^(m_b - m')
 *     o' = o_a e^(m_a - m') + o_b e^(m_b - m')
 * Either may be empty (m = -inf, l = 0); -inf - -inf is NaN. */
int lesson_merge(lesson_partial *a, const lesson_partial *b, int hd);

/* Done for you: ring attention, forward, over dev->world (one sequence).
 * qkv [2 len, 3 heads hd]: my positions' q | k | v (the layout of
 * attention.c); y [2 len, heads hd].  Calls your three functions; adds to
 * *blocks the (query share, key share) pairs it computed (not skipped). */
int lesson_ring_attention(ptdp_device *dev, ptdp_tensor y, ptdp_tensor qkv, int T, int heads, int hd,
                          long *blocks);

/* Blank 4.  One step of ring attention's BACKWARD for ONE query (at
 * q_pos; q [hd]) against one key share [k_first, k_first + len) (k, v
 * rows of the given stride; keys after q_pos masked), once the forward is
 * over: m and l are the query's FINAL max and sum over all its keys, dy
 * [hd] the gradient of its output y, and D = dy . y.  With
 *     p_s  = e^(score_s - m) / l          the final probability of key s
 *     dp_s = dy . v_s,   ds_s = p_s (dp_s - D)
 * ADD   dv_s += p_s dy,   dk_s += ds_s q / sqrt(hd)   (rows of dk, dv:
 * the same stride) and dq += sum_s ds_s k_s / sqrt(hd).  No key share
 * needs any other: the ring passes k, v and their dk, dv around. */
int lesson_block_backward(const ptdp_real *q, const ptdp_real *k, const ptdp_real *v, int stride, int q_pos,
                          int k_first, int len, int hd, ptdp_real m, ptdp_real l, ptdp_real D,
                          const ptdp_real *dy, ptdp_real *dq, ptdp_real *dk, ptdp_real *dv);

/* Blank 5.  Sequence parallelism (Megatron-LM): the N ranks of a TP group
 * split the sequence outside the tensor-parallel layers, and a rank keeps
 * only its shard of a LayerNorm's output — `kept`, samples x T/N rows of
 * C: its positions [rank T/N, (rank+1) T/N) of each sequence.  The
 * column-parallel layer after it needs every position for its weight
 * gradient: ADD dw (out x C) += dy^T x, where dy (samples x T rows of
 * out, sample-major) is the gradient of this rank's output columns at
 * every position and x (samples x T rows of C) the whole LayerNorm
 * output, gathered from every rank's shard (ptdp_sp_all_gather, sp.h)
 * into a buffer from the device's arena (ptdp_tensor_alloc,
 * category PTDP_MEM_ACTS) — freed once dw is made: the backward keeps
 * nothing more than the shard. */
int lesson_sp_weight_grad(ptdp_device *dev, ptdp_comm *tp, ptdp_tensor dw, ptdp_tensor dy, ptdp_tensor kept,
                          int samples);

/* Blank 6.  Rotary positions under CP (the llama): turn q and k of this
 * rank's rows of qkv [2 len, 3 heads hd] (q | k | v, as the ring reads
 * them) in place, each row t at its GLOBAL position in the sequence —
 * first[t / len] + t % len of the zigzag shares (blank 1) — with
 * ptdp_rope_forward (ops.h): within each head the pair (2i, 2i+1) turns
 * by pos · theta^(-2i/hd).  v is not turned.  n devices, `rank` of them;
 * T divisible by 2n. */
int lesson_rope_rows(ptdp_tensor qkv, int T, int n, int rank, int heads, int hd, double theta);

#endif
