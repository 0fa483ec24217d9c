/*
 * counters.c — the registry of a run's counters and a device's way into it
 * (counters.h has the picture).
 *
 * Publishing lays each counter out after the ones of its kind before it:
 *
 *   published   aux_loss (step, 1)   moe_load (step, 2 x 4)   ep_bytes (device, 1)
 *   step row    [ 0 | 1 2 3 4 5 6 7 8 ]
 *   device row  [ 0 ]
 *
 * Counting finds the counter by name: a handful of string comparisons a
 * micro-batch, against the model's GEMMs; and no publisher has to keep an
 * index between set-up and the step.
 */
#include "ptdp/counters.h"

#include <stdio.h>
#include <string.h>

#include "ptdp/error.h"

void ptdp_counters_init(ptdp_counters *reg)
{
    memset(reg, 0, sizeof *reg);
}

static int refuse(ptdp_counters *reg, const char *name)
{
    if (reg->refused[0] == '\0')
        snprintf(reg->refused, sizeof reg->refused, "%s", name != NULL ? name : "(null)");
    return PTDP_EINVAL;
}

int ptdp_counters_publish(ptdp_counters *reg, const char *name, ptdp_count_kind kind, ptdp_count_shape shape,
                          unsigned flags)
{
    const int len = shape.dim[0] * shape.dim[1];
    if (name == NULL || name[0] == '\0' || strlen(name) >= PTDP_COUNTER_NAME_MAX || ptdp_counters_find(reg, name) ||
        reg->n >= PTDP_COUNTERS_MAX || (unsigned)kind >= PTDP_COUNT_NKINDS || shape.ndim < 0 || shape.ndim > 2 ||
        shape.dim[0] <= 0 || shape.dim[1] <= 0)
        return refuse(reg, name);
    ptdp_counter *c = &reg->c[reg->n++];
    *c = (ptdp_counter){ .kind = kind, .shape = shape, .flags = flags, .offset = reg->len[kind], .len = len };
    snprintf(c->name, sizeof c->name, "%s", name);
    reg->len[kind] += len;
    return PTDP_OK;
}

const ptdp_counter *ptdp_counters_find(const ptdp_counters *reg, const char *name)
{
    for (int i = 0; reg != NULL && i < reg->n; i++)
        if (strcmp(reg->c[i].name, name) == 0)
            return &reg->c[i];
    return NULL;
}

/* Counter `name` (*c) and this device's numbers of it; NULL where it
 * counts nothing of it now. */
static double *place(ptdp_counts *counts, const char *name, const ptdp_counter **c)
{
    *c = counts != NULL ? ptdp_counters_find(counts->reg, name) : NULL;
    if (*c == NULL || counts->row[(*c)->kind] == NULL || (((*c)->flags & PTDP_COUNT_TP_ONCE) && !counts->tp_lead))
        return NULL;
    return counts->row[(*c)->kind] + (*c)->offset;
}

double *ptdp_counts_of(ptdp_counts *counts, const char *name)
{
    const ptdp_counter *c;
    return place(counts, name, &c);
}

void ptdp_count(ptdp_counts *counts, const char *name, int i, double x)
{
    const ptdp_counter *c;
    double *at = place(counts, name, &c);
    if (at == NULL)
        return;
    if (!PTDP_REQUIRE(i >= 0 && i < c->len, "counter %s: number %d of %d", name, i, c->len))
        return;   /* a publisher's bug: the device fails, naming it */
    at[i] += x;
}

const double *ptdp_counters_in(const ptdp_counters *reg, const char *name, ptdp_count_kind kind, const double *row)
{
    const ptdp_counter *c = ptdp_counters_find(reg, name);
    return c != NULL && c->kind == kind && row != NULL ? row + c->offset : NULL;
}
