/*
 * cp.h — context parallelism: each device of a CP group holds part of every
 * sequence, and causal attention runs as a ring (Liu et al.'s ring
 * attention; the zigzag layout of Megatron-LM and nanotron).
 *
 * Everything in a transformer block but attention is position-wise, so a
 * device that holds T/N positions of a sequence computes them alone.
 * Attention needs every earlier key: the key/value blocks travel around
 * the ring, N - 1 steps, while each device keeps its queries:
 *
 *   step 0          step 1          step 2          step 3       (N = 4)
 *   r0: kv0         r0: kv3         r0: kv2         r0: kv1
 *   r1: kv1         r1: kv0         r1: kv3         r1: kv2
 *   r2: kv2         r2: kv1         r2: kv0         r2: kv3
 *   r3: kv3         r3: kv2         r3: kv1         r3: kv0
 *
 * Each visiting block's contribution is merged by online softmax: per
 * query a running maximum m, a running sum l of exp(score - m) and an
 * accumulated output o; a new block with its own mb, lb, ob gives
 *
 *   m' = max(m, mb)    l' = l e^(m - m') + lb e^(mb - m')    o' = o e^(m - m') + ob e^(mb - m')
 *
 * and y = o / l at the end (flash attention's rule).  The backward sends
 * each key/value block around the ring again, with its gradient
 * accumulating beside it, and a last step hands the gradient to the block's
 * owner; it needs only y and the log-sum-exp m + log l of each query, so
 * no T x T matrix of the whole sequence exists anywhere.
 *
 * Which positions: causal attention makes late positions expensive (they
 * see every key), so N contiguous shares give the last device N times the
 * first one's work.  Zigzag cuts the sequence into 2N shares and gives
 * device r shares r and 2N - 1 - r: an early and a late one, equal work.
 *
 *   T = 16, N = 2, zigzag:   r0 holds 0-3 and 12-15    r1 holds 4-7 and 8-11
 *                contiguous: r0 holds 0-7              r1 holds 8-15
 *
 * A key share wholly in a query share's future is skipped.
 *
 * The other way to run attention over the same layout is Ulysses'
 * (--cp-algo a2a, ulysses.h): an all-to-all to whole sequences of fewer
 * heads, attention on one device's terms, an all-to-all back.
 */
#ifndef PTDP_CP_H
#define PTDP_CP_H

#include <stdbool.h>
#include <stdint.h>

#include "comm.h"
#include "ops.h"
#include "tensor.h"

struct ptdp_device;

/* The positions a CP rank holds: nshares shares of len positions, share i
 * starting at first[i]; local row t of a sequence is position
 * first[t / len] + t % len. */
typedef struct {
    int nshares;            /* 2 zigzag, 1 contiguous */
    int len;                /* T / (2N) or T / N      */
    int first[2];
} ptdp_cp_layout;

/* The layout of `rank` in a CP group of `cp` for sequences of T positions
 * (T divisible by 2 cp for zigzag, by cp for contiguous; a group of one is
 * contiguous whatever `zigzag` says). */
ptdp_cp_layout ptdp_cp_layout_of(int T, int cp, int rank, bool zigzag);
int ptdp_cp_position(const ptdp_cp_layout *l, int t);

/* The skip rule: a key share starting at k_first lies wholly in the future
 * of the query share [q_first, q_first + len) — causal attention uses none
 * of it — when its first key comes after the share's last query. */
static inline bool ptdp_cp_in_future(int q_first, int k_first, int len)
{
    return k_first > q_first + len - 1;
}

/* Ring attention over the CP group, for the rank's Tl = T / cp positions of
 * B sequences.  qkv: (B Tl) x (3 heads hd), q | k | v as attention.c's;
 * y: (B Tl) x (heads hd); lse: B heads Tl numbers kept for the backward.
 * Dropout on the probabilities (may be NULL) is attention.c's mask, keyed
 * by global sample, head, query and key position: the same as one
 * device's.  Collective over cp; 0 or the device's failure. */
int ptdp_ring_attention_forward(struct ptdp_device *dev, ptdp_comm *cp, ptdp_tensor y, ptdp_real *lse,
                                ptdp_tensor qkv, int T, int heads, int hd, bool zigzag,
                                const ptdp_attn_dropout *dropout);
/* Its backward: dqkv (B Tl) x (3 heads hd) from dy, with the forward's qkv,
 * y and lse. */
int ptdp_ring_attention_backward(struct ptdp_device *dev, ptdp_comm *cp, ptdp_tensor dqkv, ptdp_tensor dy,
                                 ptdp_tensor qkv, ptdp_tensor y, const ptdp_real *lse, int T, int heads,
                                 int hd, bool zigzag, const ptdp_attn_dropout *dropout);

/* The same for grouped-query attention (ops.h's gqa): qkv (B Tl) x ((heads +
 * 2 kv_heads) hd), [q | k of kv_heads | v of kv_heads], query head h reading
 * kv head h / (heads / kv_heads); only the kv_heads heads of keys and values
 * travel.  kv_heads = heads is the two above, bit for bit. */
int ptdp_ring_attention_gqa_forward(struct ptdp_device *dev, ptdp_comm *cp, ptdp_tensor y, ptdp_real *lse,
                                    ptdp_tensor qkv, int T, int heads, int kv_heads, int hd, bool zigzag,
                                    const ptdp_attn_dropout *dropout);
int ptdp_ring_attention_gqa_backward(struct ptdp_device *dev, ptdp_comm *cp, ptdp_tensor dqkv, ptdp_tensor dy,
                                     ptdp_tensor qkv, ptdp_tensor y, const ptdp_real *lse, int T, int heads,
                                     int kv_heads, int hd, bool zigzag, const ptdp_attn_dropout *dropout);

/* The attention score elements a rank computes for one sequence and head
 * (the blocks not skipped, causal or not): the measure of its work.  Zigzag
 * gives every rank the same; contiguous does not. */
double ptdp_ring_attention_scores(int T, int cp, int rank, bool zigzag);

/* Elements one device sends round the ring per block and micro-batch, for
 * B sequences of T positions of `width` = C/tp columns on N ranks, with
 * `forwards` forward passes (2 under full recomputation): K and V (2 X,
 * X = B (T/N) width) N - 1 times a forward; in the backward K, V and
 * their gradients (4 X) N - 1 times, and the gradients' last trip home:
 *   2 forwards (N-1) X + 4 (N-1) X + 2 X
 * (Ulysses' all-to-alls: ptdp_ulysses_elements_per_block, ulysses.h). */
double ptdp_ring_elements_per_block(int B, int T, int width, int N, int forwards);

#endif
