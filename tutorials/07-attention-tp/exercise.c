/*
 * exercise.c — lesson 07: tensor parallelism in attention (Megatron-LM's
 * split of a GPT block's attention, and of its embedding).
 *
 * Replace each PTDP_BLANK(...) line with your code, then run the check:
 *     meson setup build-student -Dexercises=student      (once)
 *     meson test -C build-student --suite tutorial-07 -v
 * README.md explains the idea; solution.c is the answer (try first).
 * lesson_proj_shard and lesson_attention_forward are done for you: read
 * them first.
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
 * in front of c_attn (f), which you write too (blanks 4, 5); two per block
 * each way with the MLP's.
 *
 * Blanks 6 and 7 are the llama's grouped-query attention: fewer kv heads
 * than query heads, and with more TP ranks than kv heads a copy of one on
 * several ranks — which rows each rank holds, and where their gradient is
 * summed.  lesson_sum_declared (done for you) carries the sum out.
 */
#include <string.h>

#include "blank.h"
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
    int r = ptdp_comm_rank(tp), C = w.cols;   /* w: blocks q, k, v of C rows each */
    /* Blank 1: my heads are heads [r nh/tp, (r+1) nh/tp), hd = C/nh rows
     * each.  Their q rows, then their k rows, then their v rows, copied
     * into w_local; the same entries of b into b_local
     * (ptdp_tensor_rows, ptdp_tensor_cols, ptdp_tensor_copy in tensor.h). */
    PTDP_BLANK(1, "copy my heads' q, k and v rows of c_attn (and bias entries) into w_local, b_local");
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
    /* Blank 2: out = y W^T + b, and y W^T = sum over ranks of y_r W_r^T —
     * each rank holds one term.  How many all-reduces?  And the bias:
     * how many times must it be added? */
    PTDP_BLANK(2, "the row-parallel c_proj: my heads' term, one all-reduce, the bias once");
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
    /* Blank 3: local row 0 of wte_local is row r V_pad/tp of the whole
     * table.  For each token i: its row if I hold it, else zeros; then
     * one all-reduce makes x whole on every rank (ptdp_at in tensor.h,
     * memcpy, memset). */
    PTDP_BLANK(3, "the vocab-parallel lookup: my row of each token or zeros, then one all-reduce");
}

/* ------------------------------------------------------ the backward */

int lesson_proj_backward(ptdp_comm *tp, ptdp_tensor dy_local, ptdp_tensor dw_local, ptdp_tensor db,
                         ptdp_tensor dout, ptdp_tensor y_local, ptdp_tensor w_local)
{
    /* Blank 4: c_proj's backward (lesson.h): dy_r = dout P_r, dP_r +=
     * dout^T y_r, db += the column sums of dout (ptdp_linear_backward in
     * ops.h does all three).  dout is the same on every rank: does this
     * backward need any communication? */
    PTDP_BLANK(4, "the row-parallel c_proj backward: dy_local, dw_local, db — and which communication?");
}

int lesson_qkv_backward(ptdp_comm *tp, ptdp_tensor dx, ptdp_tensor dw_local, ptdp_tensor db_local,
                        ptdp_tensor dqkv_local, ptdp_tensor x, ptdp_tensor w_local)
{
    /* Blank 5: c_attn's backward: my heads' term of dx is dqkv_r W_r; the
     * weight and bias gradients are my rows'.  dx must end whole on every
     * rank: how many all-reduces? */
    PTDP_BLANK(5, "the column-parallel c_attn backward: my term of dx, dw_local, db_local, then dx whole");
}

/* ------------------------- grouped-query attention (the llama)
 *
 * H query heads, K kv heads: query head h reads kv head h / (H/K).
 * H 4, K 2, tp 4 — more ranks than kv heads:
 *
 *   rank          0      1      2      3
 *   query heads   0      1      2      3       wq's rows, a view (done for you)
 *   kv head       0      0      1      1       blank 6: h / (H/K) of its heads
 *   its gradient  └─ sum ┘      └─ sum ┘         blank 7: over the ranks sharing it
 *
 * Each copy's gradient holds only its own query heads' share; one device's
 * is the sum over all H/K heads that read the kv head. */

int lesson_kv_shard(ptdp_comm *tp, int heads, int kv_heads, ptdp_tensor wk, ptdp_tensor wv,
                    ptdp_tensor wk_local, ptdp_tensor wv_local)
{
    int r = ptdp_comm_rank(tp), hd = wk.rows / kv_heads, kl = wk_local.rows / hd;   /* kl: K/tp, or 1 */
    /* Blank 6: my first query head is r H/tp; which kv head does it read?
     * Copy the rows of that kv head and the kl - 1 after it, of wk and of
     * wv (ptdp_tensor_rows, ptdp_tensor_copy). */
    PTDP_BLANK(6, "copy the wk and wv rows of the kv heads my query heads read (query head h reads h / (H/K))");
}

int lesson_kv_grad_sum(int tp, int kv_heads, ptdp_grad_sum *sum, int *tp_share)
{
    /* Blank 7: which ranks hold a copy of my kv head?  Declare the sum over
     * them: sum->also |= PTDP_GROUP_BIT(a group of mesh.h), and the size of
     * that group in *tp_share — or nothing, when no rank shares. */
    PTDP_BLANK(7, "declare where my kv rows' gradient is summed: sum->also and *tp_share");
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
