/*
 * act_bf16.c — activations kept as bf16 (act_bf16.h): round where made,
 * pack after a block's forward, unpack before its backward.
 *
 *   pack     bf16[off_i + j] = bf16(t_i[j])   exact: t_i is bf16-valued
 *   unpack   t_i[j] = float(bf16[off_i + j])  exact: widening
 *
 * so a forward, pack, unpack, backward sees bit for bit the values the
 * forward computed with, and keeps half the bytes in between.
 */
#include "ptdp/act_bf16.h"

#include <stdio.h>
#include <string.h>

#include "ptdp/error.h"
#include "runtime/device_impl.h"

void ptdp_act_round_reals(ptdp_real *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = ptdp_bf16_round(x[i]);
}

void ptdp_act_round(ptdp_tensor t)
{
    for (int r = 0; r < t.rows; r++)
        ptdp_act_round_reals(t.data + (size_t)r * t.stride, (size_t)t.cols);
}

/* A slot's elements, and whether it has values now. */
static size_t slot_len(const ptdp_act_slot *s)
{
    return s->t != NULL ? (size_t)s->t->rows * (size_t)s->t->cols : s->n;
}

static bool slot_present(const ptdp_act_slot *s)
{
    return s->t != NULL ? s->t->data != NULL : *s->reals != NULL;
}

int ptdp_act_pack(ptdp_device *dev, ptdp_act_packed *pk, const ptdp_act_slot *slots, int nslots, const char *name)
{
    if (!PTDP_REQUIRE(nslots <= PTDP_ACT_SLOTS_MAX && pk->data == NULL, "%d slots, a buffer already packed", nslots))
        return PTDP_EINVAL;
    size_t n = 0;
    pk->held = 0;
    for (int i = 0; i < nslots; i++)
        if (slot_present(&slots[i])) {
            pk->held |= 1u << i;
            n += slot_len(&slots[i]);
        }
    pk->n = n;
    if ((pk->data = ptdp_alloc_uninit(dev, (n > 0 ? n : 1) * sizeof(ptdp_bf16), PTDP_MEM_ACTS, name)) == NULL)
        return PTDP_ENOMEM;
    size_t off = 0;
    for (int i = 0; i < nslots; i++) {
        if (!(pk->held >> i & 1u))
            continue;
        const ptdp_act_slot *s = &slots[i];
        if (s->t != NULL) {   /* row by row: a tensor here is whole, but keep to its stride */
            ptdp_tensor shape = *s->t;
            for (int r = 0; r < shape.rows; r++)
                ptdp_bf16_from_real_array(pk->data + off + (size_t)r * shape.cols,
                                          shape.data + (size_t)r * shape.stride, (size_t)shape.cols);
            ptdp_tensor_free(dev, s->t);
            *s->t = shape;            /* its shape and name stay, for the unpack */
            s->t->data = NULL;
            s->t->owned = false;
            s->t->stride = shape.cols;
        } else {
            ptdp_bf16_from_real_array(pk->data + off, *s->reals, s->n);
            ptdp_free(dev, *s->reals);
            *s->reals = NULL;
        }
        off += slot_len(s);
    }
    return PTDP_OK;
}

int ptdp_act_unpack(ptdp_device *dev, ptdp_act_packed *pk, const ptdp_act_slot *slots, int nslots)
{
    if (pk->data == NULL)
        return PTDP_OK;
    size_t off = 0;
    for (int i = 0; i < nslots; i++) {
        if (!(pk->held >> i & 1u))
            continue;
        const ptdp_act_slot *s = &slots[i];
        ptdp_real *dst;
        if (s->t != NULL) {
            char name[PTDP_NAME_MAX];
            snprintf(name, sizeof name, "%s", s->t->name);
            int rc = ptdp_tensor_alloc_uninit(dev, s->t, name, PTDP_MEM_ACTS, s->t->rows, s->t->cols);
            if (rc != 0)
                return rc;
            dst = s->t->data;
        } else if ((dst = *s->reals = ptdp_alloc_uninit(dev, (s->n > 0 ? s->n : 1) * sizeof(ptdp_real),
                                                         PTDP_MEM_ACTS, s->name)) == NULL) {
            return PTDP_ENOMEM;
        }
        ptdp_bf16_to_real_array(dst, pk->data + off, slot_len(s));
        off += slot_len(s);
    }
    ptdp_act_packed_free(dev, pk);
    return PTDP_OK;
}

void ptdp_act_packed_free(ptdp_device *dev, ptdp_act_packed *pk)
{
    ptdp_free(dev, pk->data);
    pk->data = NULL;
    pk->n = 0;
    pk->held = 0;
}
