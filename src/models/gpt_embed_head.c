/*
 * gpt_embed_head.c — the two ends of the GPT, each forward beside its
 * backward: the embedding on the first stage, LN_f, the head and the loss
 * on the last.
 *
 *   stage 0                                last stage
 *   x = wte[token] + wpe[position]         h = LN_f(x),  z = h wte^T
 *       vocab-parallel: each rank looks        z on this rank's vocabulary
 *       up the rows it holds, zeros for        rows; loss = xent(z), the
 *       the others, and g sums them            softmax's sums over TP
 *                                          backward: dz = (softmax - onehot)
 *   backward: dwte[token] += dx (each          scaled, dh = dz wte (f sums
 *       rank its rows), dwpe[position]         it over TP), dwte += dz^T h,
 *       += dx                                  then LN_f's backward
 *
 * With pp = 1 the head is wte itself, and its gradient gets both parts.
 * Under the "ideal" profile both ends cost nothing (gpt_cost.c), so the
 * stages are uniform.  Their weight-gradient products — the head's dW and
 * the embedding's scatter-add — go to W under a split backward (wgrad.h).
 */
#include "models/gpt_pass.h"
#include "ptdp/act_bf16.h"
#include "ptdp/error.h"
#include "ptdp/ops.h"
#include "ptdp/sp.h"
#include "ptdp/tp.h"

/* ------------------------------------------------------------ embedding */

/* x (region rows x C) = wte[tokens] + wpe[positions]: each rank looks up
 * the vocabulary rows it holds and g sums the ranks' lookups; under SP a
 * reduce-scatter along the sequence both sums them and keeps this rank's
 * positions. */
int ptdp_gpt_embed_forward(ptdp_gpt_pass *k, ptdp_gpt_saved *sv, ptdp_tensor x)
{
    ptdp_model *m = k->m;
    const ptdp_gpt *g = m->impl;
    ptdp_comm *tp = m->mesh->tp_comm;
    const int64_t row0 = (int64_t)m->mesh->tp_rank * g->vocab_local;
    int rc;
    if (!m->mesh->sp) {
        if ((rc = ptdp_tp_embedding_forward(tp, x, g->wte->w, row0, sv->tokens)) != 0)   /* g */
            return rc;
        k->w0 = ptdp_wall_now();
        ptdp_gpt_positions(m, k->acts, g->wpe->w, x, k->acts->rows, false);
    } else {
        ptdp_tensor full;
        if (ptdp_gpt_act(k, &full, "acts.embed_partial", k->shape.R, x.cols) != 0)
            return k->rc;
        ptdp_embedding_forward(full, g->wte->w, row0, sv->tokens);
        rc = ptdp_sp_reduce_scatter(k->dev, tp, x, full, k->acts->rows);
        ptdp_tensor_free(k->dev, &full);
        if (rc != 0)
            return rc;
        k->w0 = ptdp_wall_now();
        for (int i = 0; i < x.rows; i++)     /* each row at its global position */
            ptdp_positions_forward(ptdp_tensor_rows(x, i, 1),
                                   ptdp_tensor_rows(g->wpe->w, ptdp_gpt_region_position(m, k->acts, i), 1), 1);
    }
    ptdp_gpt_pass_name(k, "embed fwd", "");
    ptdp_gpt_charge(k, ptdp_gpt_cost_embed_forward);
    return PTDP_OK;
}

/* Stage 0: the embedding's g backward is the identity: every rank adds dh
 * into the wte rows it holds — a weight gradient, so W's if split — and
 * into wpe.  Under SP the reduce-scatter's backward first gathers dh
 * along the sequence. */
int ptdp_gpt_embed_backward(ptdp_gpt_pass *k, ptdp_gpt_saved *sv, ptdp_gpt_scratch *s, ptdp_tensor dh)
{
    ptdp_model *m = k->m;
    const ptdp_gpt *g = m->impl;
    ptdp_tensor dfull;
    int rc;
    k->w0 = ptdp_wall_now();
    if (g->head != g->wte && (rc = ptdp_model_unit(k->dev, m, g->wte, PTDP_UNIT_BACKWARD_BEGIN)) != 0)
        return rc;
    ptdp_gpt_grad_into_tp(k, dh, s, &dfull);
    if (k->rc != 0)
        return k->rc;
    ptdp_gpt_positions(m, k->acts, g->wpe->g, dfull, k->acts->rows, true);
    ptdp_gpt_pass_name(k, "embed bwd", "embed wgrad");
    k->rc = ptdp_wgrad_embedding(k->dev, k->wg, g->wte->g, (int64_t)m->mesh->tp_rank * g->vocab_local, sv->tokens,
                                 dfull, ptdp_gpt_cost_dw_embed(k->dev->profile, &k->shape), k->wwhat);
    ptdp_gpt_charge(k, ptdp_gpt_cost_embed_backward);
    if (k->rc != 0)
        return k->rc;
    return ptdp_model_unit(k->dev, m, g->wte, PTDP_UNIT_BACKWARD_END);
}

/* ----------------------------------------------------------------- head */

/* The last stage's tail: the last block's output (LN_f's input) and LN_f's
 * output (the head's input); elsewhere x_out alone.  The logits stay
 * float: the cross-entropy works in float, as Megatron's upcasts them. */
int ptdp_gpt_tail_slots(ptdp_gpt_saved *sv, ptdp_act_slot *s)
{
    s[0] = (ptdp_act_slot){ .t = &sv->x_out };
    s[1] = (ptdp_act_slot){ .t = &sv->lnf };
    return 2;
}

/* The last stage: h = LN_f(x), z = h wte^T on this rank's vocabulary rows
 * (f's forward is the identity: h is the same on every rank), and the
 * vocab-parallel loss (no labels: a forward for the logits alone,
 * gpt_sample.c). */
int ptdp_gpt_head_forward(ptdp_gpt_pass *k, ptdp_acts *acts, ptdp_gpt_saved *sv)
{
    ptdp_model *m = k->m;
    const ptdp_gpt *g = m->impl;
    const int R = k->shape.R, Rl = k->shape.Rl, Vl = g->vocab_local;
    int rc = PTDP_OK;
    if (ptdp_gpt_act(k, &sv->lnf, "acts.lnf", Rl, k->shape.C) != 0 ||   /* SP: the shard (gpt_ops.c) */
        ptdp_gpt_act(k, &sv->logits, "acts.logits", R, Vl) != 0)
        return k->rc;
    sv->lnf_mean = ptdp_gpt_act_reals(k, (size_t)Rl, "acts.lnf_mean");
    sv->lnf_rstd = ptdp_gpt_act_reals(k, (size_t)Rl, "acts.lnf_rstd");
    sv->rowmax = ptdp_alloc(k->dev, (size_t)R * sizeof(double), PTDP_MEM_ACTS, "acts.rowmax");
    sv->sumexp = ptdp_alloc(k->dev, (size_t)R * sizeof(double), PTDP_MEM_ACTS, "acts.sumexp");
    double *picked = ptdp_alloc(k->dev, (size_t)R * sizeof(double), PTDP_MEM_ACTS, "acts.picked");
    if (!sv->lnf_mean || !sv->lnf_rstd || !sv->rowmax || !sv->sumexp || !picked)
        rc = PTDP_ENOMEM;
    else if (!k->units_held && (rc = ptdp_model_unit(k->dev, m, g->lnf_w, PTDP_UNIT_FORWARD_BEGIN)) == 0 &&
             g->head != g->wte)
        rc = ptdp_model_unit(k->dev, m, g->head, PTDP_UNIT_FORWARD_BEGIN);
    if (rc == 0) {
        k->w0 = ptdp_wall_now();
        ptdp_gpt_pass_name(k, "head fwd", "");
        ptdp_gpt_ln(k, sv->lnf, sv->lnf_mean, sv->lnf_rstd, sv->x_out, g->lnf_w, g->lnf_b);
        ptdp_gpt_column_linear(k, sv->logits, sv->lnf, g->head, NULL);
        ptdp_gpt_charge(k, ptdp_gpt_cost_head_forward);
        rc = k->rc;
    }
    if (rc == 0 && acts->labels != NULL)
        rc = ptdp_tp_xent_forward(m->mesh->tp_comm, sv->logits, m->mesh->tp_rank * Vl, acts->labels, sv->rowmax,
                                  sv->sumexp, picked, &acts->loss_sum);
    ptdp_free(k->dev, picked);
    if (rc != 0 || k->units_held)
        return rc;
    if ((rc = ptdp_model_unit(k->dev, m, g->lnf_w, PTDP_UNIT_FORWARD_END)) != 0 ||
        (rc = ptdp_model_unit(k->dev, m, g->head, PTDP_UNIT_FORWARD_END)) != 0)
        return rc;
    return PTDP_OK;
}

/* The last stage: dz = (softmax - onehot) / (B T) on this rank's
 * vocabulary rows, then through the head (its f backward sums dh over the
 * ranks' rows) and LN_f; their gradients are then final. */
int ptdp_gpt_head_backward(ptdp_gpt_pass *k, ptdp_gpt_saved *sv, ptdp_gpt_scratch *s, ptdp_tensor dh,
                         double loss_scale)
{
    ptdp_model *m = k->m;
    const ptdp_gpt *g = m->impl;
    ptdp_act_slot tail[2];
    int rc;
    if ((!k->units_held && ((rc = ptdp_model_unit(k->dev, m, g->lnf_w, PTDP_UNIT_BACKWARD_BEGIN)) != 0 ||
                            (rc = ptdp_model_unit(k->dev, m, g->head, PTDP_UNIT_BACKWARD_BEGIN)) != 0)) ||
        (rc = ptdp_act_unpack(k->dev, &sv->tail_packed, tail, ptdp_gpt_tail_slots(sv, tail))) != 0)   /* bf16 */
        return rc;
    k->w0 = ptdp_wall_now();
    ptdp_gpt_pass_name(k, "head bwd", "head wgrad");
    ptdp_tp_xent_backward(sv->logits, sv->logits, m->mesh->tp_rank * g->vocab_local, k->acts->labels, sv->rowmax,
                          sv->sumexp, loss_scale);
    /* the head's dW: a vocabulary's worth, priced 0 under the ideal profile;
     * then f, or the sequence scatter */
    ptdp_gpt_column_linear_backward(k, s, sv->logits, sv->lnf, g->head, NULL, &ptdp_gpt_cost_head_column);
    ptdp_gpt_ln_backward(k, dh, s->dln_local, sv->x_out, g->lnf_w, g->lnf_b, sv->lnf_mean, sv->lnf_rstd, false);
    ptdp_gpt_charge(k, ptdp_gpt_cost_lnf_backward);
    if (k->rc != 0)
        return k->rc;
    if (m->bf16) {   /* done with the tail's float copies */
        ptdp_tensor_free(k->dev, &sv->x_out);
        ptdp_tensor_free(k->dev, &sv->lnf);
    }
    /* (a data-parallel sum may start) */
    if ((rc = ptdp_model_unit(k->dev, m, g->lnf_w, PTDP_UNIT_BACKWARD_END)) != 0 ||
        (g->head != g->wte && (rc = ptdp_model_unit(k->dev, m, g->head, PTDP_UNIT_BACKWARD_END)) != 0) ||
        (k->wg == NULL && (rc = ptdp_model_grads_ready(k->dev, m, g->lnf_w)) != 0))
        return rc;
    return PTDP_OK;
}
