/*
 * solution.c — lesson 07, the answer: tensor parallelism in attention
 * (Megatron-LM's split of a GPT block's attention, and of its embedding).
 *
 * (exercise.c is this file with the blanks still empty.  Try it first.)
 *
 * A head needs only its own q, k and v, so the heads are split over the
 * ranks: rank r runs heads [r nh/tp, (r+1) nh/tp), whose n = C/tp rows sit
 * in EACH of c_attn's three blocks:
 *
 *   c_attn.weight [3C, C]        rank 0 of tp 2      rank 1 of tp 2
 *   ┌ q  rows 0 .. C-1   ┐       q rows 0 .. n-1     q rows n .. 2n-1
 *   ├ k  rows C .. 2C-1  ┤  ──►  k rows C ..         k rows C+n ..
 *   └ v  rows 2C .. 3C-1 ┘       v rows 2C ..        v rows 2C+n ..
 *
 *          ┌─ rank 0: x A_0^T + a_0 ─ attention(heads 0, 1) ─ · P_0^T ─┐
 *   x ──f──┤                                                            ├──g──► + b ──► out
 *          └─ rank 1: x A_1^T + a_1 ─ attention(heads 2, 3) ─ · P_1^T ─┘
 *            column-parallel          local: no talk        row-parallel
 *            (c_attn, by head)                              (c_proj, by column)
 *
 * and the table of token embeddings is split by rows (vocab-parallel):
 *
 *   tokens 3 40 17     rank 0 (rows 0-31):  [w3   0  w17]
 *                      rank 1 (rows 32-63): [ 0  w40   0]  ──all-reduce──► [w3 w40 w17]
 *
 * Forward: one all-reduce in c_proj (g), one in the embedding; backward one
 * in front of c_attn (f); two per block each way with the MLP's.
 *
 * The llama's grouped-query attention (blanks 6, 7): query head h reads kv
 * head h / (H/K); with tp > K each rank holds a copy of its query heads' kv
 * head, whose gradient is declared summed over the tp/K ranks sharing it.
 */
#include <string.h>

#include "lesson.h"

#include "ptdp/error.h"
#include "ptdp/ops.h"
#include "ptdp/comm.h"

/* Sum a contiguous tensor over the TP group, in place. */
static int all_reduce(ptdp_comm *tp, ptdp_tensor t)
{
    return ptdp_all_reduce(tp, t.data, t.data, ptdp_tensor_numel(t), PTDP_REAL, PTDP_SUM);
}

/* ---------------------------------------------------------- the shards */

int lesson_qkv_shard(ptdp_comm *tp, int heads, ptdp_tensor w, ptdp_tensor b,
                     ptdp_tensor w_local, ptdp_tensor b_local)
{
    int r = ptdp_comm_rank(tp), C = w.cols, hd = C / heads;   /* w: blocks q, k, v of C rows */
    int n = heads / ptdp_comm_size(tp) * hd;                  /* my nh/tp heads' rows = C/tp */
    for (int p = 0; p < 3; p++) {              /* q, k, v */
        ptdp_tensor_copy(ptdp_tensor_rows(w_local, p * n, n), ptdp_tensor_rows(w, p * C + r * n, n));
        ptdp_tensor_copy(ptdp_tensor_cols(b_local, p * n, n), ptdp_tensor_cols(b, p * C + r * n, n));
    }
    return PTDP_OK;
}

int lesson_proj_shard(ptdp_comm *tp, ptdp_tensor w, ptdp_tensor *w_local)
{
    /* c_proj's INPUT j is column j of its weight, and the attention output
     * y is the heads side by side: my heads' n outputs are inputs
     * [r n, (r+1) n) of c_proj.  So my part is a block of columns — one
     * strided view, nothing to copy (compare c_attn, whose rows are in
     * three pieces). */
    int r = ptdp_comm_rank(tp), n = w.cols / ptdp_comm_size(tp);
    *w_local = ptdp_tensor_cols(w, r * n, n);
    return PTDP_OK;
}

/* ------------------------------------------------------ the attention */

int lesson_proj_forward(ptdp_comm *tp, ptdp_tensor out, ptdp_tensor y_local,
                        ptdp_tensor w_local, ptdp_tensor b)
{
    ptdp_linear_forward(out, y_local, w_local, NULL);   /* my heads' term, no bias */
    int rc = all_reduce(tp, out);                       /* g: the sum of every rank's term */
    if (rc == 0)
        ptdp_add_bias(out, b);   /* once, after the sum: before it, every rank would add one */
    return rc;
}

int lesson_attention_forward(ptdp_comm *tp, int heads, int T, ptdp_tensor out, ptdp_tensor x,
                             ptdp_tensor w_attn_local, ptdp_tensor b_attn_local,
                             ptdp_tensor w_proj_local, ptdp_tensor b_proj, lesson_attn_work *work)
{
    int heads_local = heads / ptdp_comm_size(tp), hd = x.cols / heads;
    /* c_attn, column-parallel: x is whole on every rank (f forward is the
     * identity); my rows give my heads' q | k | v. */
    ptdp_linear_forward(work->qkv_local, x, w_attn_local, &b_attn_local);
    /* Each head attends with its own q, k and v: my heads, no communication. */
    ptdp_attention_forward(work->y_local, work->probs, work->qkv_local, T, heads_local, hd, NULL, NULL);
    /* c_proj, row-parallel: the one all-reduce of the forward. */
    return lesson_proj_forward(tp, out, work->y_local, w_proj_local, b_proj);
}

/* ------------------------------------------------------ the embedding */

int lesson_embedding_forward(ptdp_comm *tp, ptdp_tensor x, ptdp_tensor wte_local,
                             const int64_t *tokens)
{
    int r = ptdp_comm_rank(tp), rows = wte_local.rows;       /* rows = V_pad / tp */
    int64_t row0 = (int64_t)r * rows;                         /* my rows: [row0, row0 + rows) */
    for (int i = 0; i < x.rows; i++) {
        ptdp_real *xi = ptdp_at(x, i, 0);
        int64_t local = tokens[i] - row0;
        if (local >= 0 && local < rows)
            memcpy(xi, ptdp_at(wte_local, (int)local, 0), (size_t)x.cols * sizeof *xi);
        else
            memset(xi, 0, (size_t)x.cols * sizeof *xi);        /* another rank's token */
    }
    return all_reduce(tp, x);   /* exactly one rank added each token's row */
}

/* ------------------------------------------------------ the backward */

int lesson_proj_backward(ptdp_comm *tp, ptdp_tensor dy_local, ptdp_tensor dw_local, ptdp_tensor db,
                         ptdp_tensor dout, ptdp_tensor y_local, ptdp_tensor w_local)
{
    /* g's backward is the identity: dout is already whole on every rank,
     * and dy_r = dout P_r needs only my columns.  No communication; every
     * rank adds the same column sums into its whole copy of the bias. */
    (void)tp;
    ptdp_linear_backward(&dy_local, dw_local, &db, dout, y_local, w_local, false);
    return PTDP_OK;
}

int lesson_qkv_backward(ptdp_comm *tp, ptdp_tensor dx, ptdp_tensor dw_local, ptdp_tensor db_local,
                        ptdp_tensor dqkv_local, ptdp_tensor x, ptdp_tensor w_local)
{
    /* f's backward: x fed every rank's heads, so its gradient is the sum of
     * every rank's term dqkv_r W_r — one all-reduce.  The weights and bias
     * are my rows: their gradients stay local. */
    ptdp_linear_backward(&dx, dw_local, &db_local, dqkv_local, x, w_local, false);
    return all_reduce(tp, dx);
}

/* ------------------------- grouped-query attention (the llama)
 *
 * H query heads, K kv heads: query head h reads kv head h / (H/K).
 * H 4, K 2, tp 4 — more ranks than kv heads:
 *
 *   rank          0      1      2      3
 *   query heads   0      1      2      3       wq's rows, a view
 *   kv head       0      0      1      1       h / (H/K) of its heads
 *   its gradient  └─ sum ┘      └─ sum ┘         over the ranks sharing it
 *
 * Each copy's gradient holds only its own query heads' share; one device's
 * is the sum over all H/K heads that read the kv head. */

int lesson_kv_shard(ptdp_comm *tp, int heads, int kv_heads, ptdp_tensor wk, ptdp_tensor wv,
                    ptdp_tensor wk_local, ptdp_tensor wv_local)
{
    int r = ptdp_comm_rank(tp), hd = wk.rows / kv_heads, kl = wk_local.rows / hd;   /* kl: K/tp, or 1 */
    int h0 = r * (heads / ptdp_comm_size(tp));     /* my first query head */
    int kv0 = h0 / (heads / kv_heads);             /* the kv head it reads: H/K query heads in a row share one */
    ptdp_tensor_copy(wk_local, ptdp_tensor_rows(wk, kv0 * hd, kl * hd));
    ptdp_tensor_copy(wv_local, ptdp_tensor_rows(wv, kv0 * hd, kl * hd));
    return PTDP_OK;
}

int lesson_kv_grad_sum(int tp, int kv_heads, ptdp_grad_sum *sum, int *tp_share)
{
    /* tp > K: kv head j is read by the query heads of ranks [j tp/K, (j+1) tp/K),
     * tp/K consecutive ranks, each holding a copy: its gradient is the sum of
     * theirs.  tp <= K: every kv head lives on one rank, nothing more to sum. */
    *tp_share = 1;
    if (tp > kv_heads) {
        sum->also |= PTDP_GROUP_BIT(PTDP_GROUP_TP_SHARE);
        *tp_share = tp / kv_heads;
    }
    return PTDP_OK;
}

/* A declaration turned into communication, as the library does once a
 * step: the TP_SHARE groups are a split of the TP group by rank / tp_share
 * (mesh.c), and each parameter summing over a group is all-reduced over it
 * (model.c).  Every copy then holds the same sum, and the same step keeps
 * the copies equal. */
int lesson_sum_declared(ptdp_comm *tp, ptdp_grad_sum sum, int tp_share, ptdp_tensor g)
{
    int rc = PTDP_OK, r = ptdp_comm_rank(tp);
    const unsigned here = PTDP_GROUP_BIT(PTDP_GROUP_DP) | PTDP_GROUP_BIT(PTDP_GROUP_PP) |
                          PTDP_GROUP_BIT(PTDP_GROUP_CP) | PTDP_GROUP_BIT(PTDP_GROUP_TP) |
                          PTDP_GROUP_BIT(PTDP_GROUP_TP_SHARE);
    if (sum.also & ~here)
        return ptdp_fail(ptdp_comm_device(tp), PTDP_EINVAL, "sum.also names a group this lesson's mesh has not "
                         "(it has TP and TP_SHARE; DP, CP and PP of one device each)");
    if ((sum.also & PTDP_GROUP_BIT(PTDP_GROUP_TP_SHARE)) &&
        (tp_share < 1 || ptdp_comm_size(tp) % tp_share != 0))
        return ptdp_fail(ptdp_comm_device(tp), PTDP_EINVAL, "tp_share %d: the TP_SHARE groups are tp_share "
                         "consecutive TP ranks, so it must divide tp = %d", tp_share, ptdp_comm_size(tp));
    if (sum.also & PTDP_GROUP_BIT(PTDP_GROUP_TP))
        rc = all_reduce(tp, g);
    if (rc == 0 && (sum.also & PTDP_GROUP_BIT(PTDP_GROUP_TP_SHARE))) {
        ptdp_comm *share = NULL;
        rc = ptdp_comm_split(tp, r / tp_share, r, "tp_share", &share);   /* {0 .. s-1}, {s .. 2s-1}, … */
        if (rc == 0)
            rc = all_reduce(share, g);
        ptdp_comm_free(share);
    }
    return rc;
}
