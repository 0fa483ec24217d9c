/*
 * state_shards.c — a device's shards into and out of a whole state.
 *
 * A state (state.h) holds whole tensors; a device holds its TP shard of
 * its stage's parameters and, under ZeRO, only pieces of their optimizer
 * state (and, under ZeRO-3 or bf16, of their exact values).  Each device
 * writes exactly the elements it is the writer of, so the whole state is
 * written once with no communication (and the hosts of an MPI run merge
 * theirs by OR: every element written by one device, zero elsewhere):
 *
 *   parameters        DP rank 0 (and CP rank 0) of every copy the norm
 *                     counts (model.h: one TP rank of a replicated tensor,
 *                     stage 0's copy of a tied embedding); an expert under
 *                     expert parallelism: rank 0 of its expert-DP group
 *   optimizer state   the same copies; without ZeRO DP rank 0 (the
 *                     replicas agree), with it every DP rank its own slice
 *                     (under HSDP the ranks of the first shard group:
 *                     the other groups hold the same slices, zero_hsdp.c)
 *   exact parameters  under ZeRO-3 or bf16 (float master weights): like
 *                     the optimizer state, each owner its slice
 *
 *   whole tensor  [ ................................ ]   (state.h)
 *   tp rank r     rows of its shard (ptdp_param_whole_index)
 *   dp rank k          [ k0 ...... k1 )   its piece of the shard (zero.h)
 *
 * Reading is the mirror image, every device reading what it holds.
 */
#include "ptdp/state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"
#include "parallel/fp8_linear_impl.h"
#include "ptdp/mixed.h"
#include "ptdp/models.h"
#include "parallel/zero_impl.h"
#include "train/state_impl.h"

/* Rank 0 of p's replicas: DP rank 0 (and CP rank 0), or for an expert
 * under expert parallelism rank 0 of its expert-DP group — each EP rank's
 * experts have their own. */
static bool first_replica(const ptdp_model *m, const ptdp_param *p)
{
    if (p->sum.replicas == PTDP_GROUP_DP)
        return m->mesh->dp_rank == 0 && m->mesh->cp_rank == 0;
    return ptdp_comm_rank(ptdp_mesh_group(m->mesh, p->sum.replicas)) == 0;
}

/* Which device writes a parameter's whole tensor. */
static bool writes_param(const ptdp_model *m, const ptdp_param *p)
{
    return first_replica(m, p) && ptdp_param_counted_here(m, p);
}

/* Who writes the optimizer state of p: without ZeRO the replicas agree and
 * DP rank 0 writes; with ZeRO every DP rank writes its own slice. */
static bool writes_optim(const ptdp_model *m, const ptdp_zero *z, const ptdp_param *p)
{
    return (ptdp_zero_shards_optim(z) ? ptdp_zero_writes_shard(z) : first_replica(m, p)) &&
           ptdp_param_counted_here(m, p);
}

/* The elements [k0, k1) of p's optimizer state that this device holds: p
 * intersected with its ZeRO pieces (the whole of p without ZeRO), from
 * `at` of its shard.  Pieces cut through parameters, so a checkpoint gets
 * each tensor's state in slices, one per DP rank. */
static bool optim_slice(const ptdp_zero *z, const ptdp_param *p, size_t *k0, size_t *k1, size_t *at)
{
    size_t b, e;
    if (!ptdp_zero_owned(z, p->offset, p->offset + ptdp_tensor_numel(p->w), &b, &e, at))
        return false;
    *k0 = b - p->offset;
    *k1 = e - p->offset;
    return true;
}

/* Local elements [k0, k1) of p (row-major in its shard) to or from the whole tensor. */
static void copy_elements(const ptdp_param *p, size_t k0, size_t k1, ptdp_real *local,
                          ptdp_state_tensor *whole, bool to_whole)
{
    size_t cols = (size_t)p->w.cols;
    for (size_t k = k0; k < k1; k++) {
        ptdp_real *x = &whole->data[ptdp_param_whole_index(p, (int)(k / cols), (int)(k % cols))];
        if (to_whole)
            *x = local[k - k0];
        else
            local[k - k0] = *x;
    }
}

/* p's optimizer slices [k0, k1) from `at`, slot by slot, to or from s. */
static void copy_optim(ptdp_state *s, const ptdp_zero *z, const ptdp_param *p, int slots, size_t k0, size_t k1,
                       size_t at, bool to_whole)
{
    for (int k = 0; k < slots && ptdp_zero_optim_state(z, k) != NULL; k++) {
        char name[2 * PTDP_NAME_MAX];
        snprintf(name, sizeof name, "optim.%.63s.%s", p->name, ptdp_state_slot_name(s, k));
        copy_elements(p, k0, k1, ptdp_zero_optim_state(z, k) + at, ptdp_state_find(s, name), to_whole);
    }
}

void ptdp_state_save_device(ptdp_state *s, ptdp_model *m, const ptdp_zero *z, bool with_optim)
{
    int slots = with_optim ? ptdp_state_optim_slots(s) : 0;
    ptdp_real *mine = ptdp_zero_exact_params(z);   /* NULL: the model's views hold them */
    for (int i = 0; i < m->nparams; i++) {
        const ptdp_param *p = &m->params[i];
        size_t k0, k1, at;
        if (mine == NULL && writes_param(m, p))
            ptdp_param_to_state(p, p->w, ptdp_state_find(s, p->name));
        if (!writes_optim(m, z, p) || !optim_slice(z, p, &k0, &k1, &at))
            continue;
        if (mine != NULL)
            copy_elements(p, k0, k1, mine + at, ptdp_state_find(s, p->name), true);
        copy_optim(s, z, p, slots, k0, k1, at, true);
    }
}

/* bf16 without ZeRO-3: every device holds the whole bf16 parameter. */
static int load_bf16_param(ptdp_device *dev, ptdp_model *m, const ptdp_param *p, const ptdp_state_tensor *t)
{
    size_t n = ptdp_tensor_numel(p->w);
    ptdp_tensor whole = p->w;
    if ((whole.data = malloc((n > 0 ? n : 1) * sizeof(ptdp_real))) == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "device %d: host out of memory", dev->rank);
    ptdp_param_from_state(p, whole, t);
    ptdp_store_from_real(PTDP_BF16, m->flat_w16 + p->offset, whole.data, n);
    free(whole.data);
    return PTDP_OK;
}

int ptdp_state_load_device(ptdp_device *dev, const ptdp_state *cs, ptdp_model *m, ptdp_zero *z)
{
    ptdp_state *s = (ptdp_state *)cs;   /* read only */
    int slots = ptdp_state_optim_slots(s);
    ptdp_real *mine = ptdp_zero_exact_params(z);
    for (int i = 0; i < m->nparams; i++) {
        const ptdp_param *p = &m->params[i];
        const ptdp_state_tensor *t = ptdp_state_find(s, p->name);
        if (t == NULL)
            return ptdp_fail(dev, PTDP_ECORRUPT, "checkpoint has no tensor %s", p->name);
        size_t k0, k1, at;
        if (mine == NULL)
            ptdp_param_from_state(p, p->w, t);
        else if (m->bf16 && ptdp_zero_params_replicated(z) && load_bf16_param(dev, m, p, t) != 0)
            return PTDP_ENOMEM;
        if (!optim_slice(z, p, &k0, &k1, &at))
            continue;
        if (mine != NULL)
            copy_elements(p, k0, k1, mine + at, (ptdp_state_tensor *)t, false);
        copy_optim(s, z, p, slots, k0, k1, at, false);
    }
    ptdp_zero_params_written(z);   /* bf16 ZeRO-3: its bf16 chunks of the master */
    return PTDP_OK;
}

/* ------------------------------------------- FP8's amax histories */

/* Row 3 i + r of the histories' tensor for weight p's operand r: p's
 * place i in the state's parameters (state.h). */
static ptdp_real *history_row(const ptdp_state *s, const ptdp_state_tensor *t, const ptdp_param *p, int role)
{
    const ptdp_state_tensor *w = ptdp_state_find((ptdp_state *)s, p->name);
    if (w == NULL)
        return NULL;
    const size_t i = (size_t)(w - s->t);
    return t->data + (3 * i + (size_t)role) * (size_t)t->cols;
}

void ptdp_state_save_fp8(ptdp_state *s, ptdp_model *m, ptdp_fp8_linear *f)
{
    ptdp_state_tensor *t = ptdp_state_find(s, PTDP_FP8_HISTORY_TENSOR);
    for (int i = 0; t != NULL && f != NULL && i < m->nparams; i++) {
        const ptdp_param *p = &m->params[i];
        for (int r = 0; r < PTDP_FP8_ROLES && first_replica(m, p); r++) {
            const ptdp_fp8_history *h = ptdp_fp8_linear_history(f, p, (ptdp_fp8_role)r);
            ptdp_real *row = history_row(s, t, p, r);
            if (h == NULL || row == NULL || h->count == 0 || h->count > t->cols - 1)
                continue;
            row[0] = (ptdp_real)h->count;
            memcpy(row + 1, h->amax, (size_t)h->count * sizeof *row);
        }
    }
}

void ptdp_state_load_fp8(const ptdp_state *s, ptdp_model *m, ptdp_fp8_linear *f)
{
    const ptdp_state_tensor *t = ptdp_state_find((ptdp_state *)s, PTDP_FP8_HISTORY_TENSOR);
    for (int i = 0; t != NULL && f != NULL && i < m->nparams; i++) {
        const ptdp_param *p = &m->params[i];
        for (int r = 0; r < PTDP_FP8_ROLES; r++) {
            ptdp_fp8_history *h = ptdp_fp8_linear_history(f, p, (ptdp_fp8_role)r);
            const ptdp_real *row = history_row(s, t, p, r);
            if (h == NULL || row == NULL || t->cols - 1 != h->length)   /* the length: validate.c */
                continue;
            h->count = (int)row[0];
            memcpy(h->amax, row + 1, (size_t)h->count * sizeof *row);
        }
    }
}

/* ---------------------------------------- a whole model on one device */

int ptdp_state_model_whole(ptdp_device *dev, const ptdp_state *s, const ptdp_model_config *cfg, ptdp_mesh *mesh,
                           ptdp_model *m)
{
    int rc = ptdp_mesh_init(dev, 1, 1, 1, mesh);
    if (rc != 0)
        return rc;
    if ((rc = ptdp_model_init(dev, m, cfg, mesh, NULL, 1, 0.0)) != 0) {
        ptdp_mesh_free(mesh);
        return rc;
    }
    for (int i = 0; i < m->nparams; i++)
        ptdp_param_from_state(&m->params[i], m->params[i].w, ptdp_state_find((ptdp_state *)s, m->params[i].name));
    return PTDP_OK;
}
