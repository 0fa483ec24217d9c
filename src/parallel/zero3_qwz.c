/*
 * zero3_qwz.c — ZeRO++'s qwZ (--zero-qwz): ZeRO-3's forward all-gather of
 * the parameters sent as INT8, one scale a block (Wang et al., ZeRO++,
 * 2023: "quantized weight communication").
 *
 * A forward needs a unit's weights only to multiply by them once, so
 * ZeRO++ gathers them in 8 bits: each rank quantizes its own shard, in
 * blocks of B elements counted from the shard's start (a block never
 * straddles two ranks, so no rank needs another's numbers to quantize),
 * and every rank rebuilds the unit from the codes:
 *
 *   unit u over N = 2   [ shard 0: b0 b1 b2 | shard 1: b0 b1 b2 ]   blocks of B,
 *                                                                  the last partial
 *   s    = amax(block) / 127          (1 for a block of zeros; inf and NaN left out)
 *   q    = round(x / s), ties to even, clamped to [-127, 127]   (NaN: 0)
 *   x'   = q s                        what the forward computes with
 *   wire = my shard's q (1 B each), then its blocks' s (R bytes each),
 *          padded to the largest rank's
 *
 *   bytes a forward gather sends, per rank   (N-1)/N (S + ⌈S/NB⌉ N R)
 *   against                                  (N-1)/N S R (the store's type)
 *
 * The backward's gather stays exact, as in ZeRO++: the input and weight
 * gradients are computed against the exact weights, the optimizer steps
 * the exact master.  The error is a forward's alone, and it is lossy by
 * design: `--check` runs one device whose units are quantized the same way
 * at the same moments (ptdp_zero_qwz_emulate below: the shards of a ZeRO
 * group of N, the same blocks, quantized when a forward is the first to
 * use a unit and restored when the last user ends — as zero3.c gathers and
 * frees), so the parallel run must equal it to the usual tolerance.
 */
#include "parallel/zero3_qwz.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/comm.h"
#include "parallel/model_impl.h"
#include "ptdp/counters.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/mixed.h"

/* ---------------------------------------------------------- the blocks */

static ptdp_real block_scale(const ptdp_real *x, size_t n, int qmax)
{
    ptdp_real amax = 0;
    for (size_t i = 0; i < n; i++) {
        const ptdp_real v = (ptdp_real)fabs((double)x[i]);
        if (isfinite(v) && v > amax)
            amax = v;
    }
    return amax > 0 ? amax / (ptdp_real)qmax : 1;
}

static int8_t code_of(ptdp_real x, ptdp_real s, int qmax)
{
    const double q = nearbyint((double)(x / s));   /* to nearest, ties to even (the default mode) */
    if (isnan(q))
        return 0;
    return (int8_t)(q > qmax ? qmax : q < -qmax ? -qmax : q);
}

void ptdp_qwz_quantize_unit(ptdp_real *w, size_t n, int N, int B)
{
    for (int r = 0; r < N; r++) {   /* as rank r of N quantizes its shard */
        size_t off, len;
        ptdp_share(n, N, r, &off, &len);
        ptdp_qwz_quantize(w + off, len, B, NULL, NULL, w + off);
    }
}

size_t ptdp_qwz_blocks(size_t n, int B)
{
    return (n + (size_t)B - 1) / (size_t)B;
}

void ptdp_qwz_quantize(const ptdp_real *x, size_t n, int B, int8_t *codes, ptdp_real *scales, ptdp_real *out)
{
    ptdp_quantize_blocks(x, n, B, 127, codes, scales, out);
}

void ptdp_quantize_blocks(const ptdp_real *x, size_t n, int B, int qmax, int8_t *codes, ptdp_real *scales,
                          ptdp_real *out)
{
    for (size_t b = 0, at = 0; at < n; b++, at += (size_t)B) {
        const size_t len = n - at < (size_t)B ? n - at : (size_t)B;
        const ptdp_real s = block_scale(x + at, len, qmax);
        if (scales != NULL)
            scales[b] = s;
        for (size_t i = at; i < at + len; i++) {
            const int8_t q = code_of(x[i], s, qmax);
            if (codes != NULL)
                codes[i] = q;
            if (out != NULL)
                out[i] = (ptdp_real)q * s;
        }
    }
}

/* Rank r's share of unit u and its wire's bytes: codes, then scales. */
static size_t wire_of(const ptdp_zero_unit *u, int N, int r, int B, size_t *off, size_t *len)
{
    ptdp_share(u->end - u->begin, N, r, off, len);
    return *len + ptdp_qwz_blocks(*len, B) * sizeof(ptdp_real);
}

size_t ptdp_qwz_wire_bytes(const ptdp_zero_unit *u, int N, int B)
{
    size_t most = 0, off, len;
    for (int r = 0; r < N; r++) {
        const size_t w = wire_of(u, N, r, B, &off, &len);
        most = w > most ? w : most;
    }
    return most > 0 ? most : 1;
}

/* ----------------------------------------------------- ZeRO-3's gather */

int ptdp_zero3_qwz_publish(ptdp_counters *reg)
{
    return ptdp_counters_publish(reg, "qwz_gather_bytes", PTDP_COUNT_DEVICE, PTDP_COUNT_NUMBER, 0);
}

void ptdp_zero3_qwz_count(ptdp_device *dev, const ptdp_zero *z)
{
    if (z->qwz_block <= 0 || z->qwz_ranks > 0)
        return;   /* off, or --check's one device */
    const int N = ptdp_comm_size(z->dp);
    double W = 0;   /* what one forward gather of every unit puts in the all-gathers' buffers */
    for (int k = 0; k < z->nunits; k++)
        W += (double)ptdp_qwz_wire_bytes(&z->units[k], N, z->qwz_block) * N;
    ptdp_count(dev->counts, "qwz_gather_bytes", 0, W);
}

int ptdp_zero3_qwz_gather(ptdp_device *dev, ptdp_zero *z, int k, bool start)
{
    ptdp_zero_unit *u = &z->units[k];
    const int N = ptdp_comm_size(z->dp), me = ptdp_comm_rank(z->dp), B = z->qwz_block;
    size_t off, len;
    wire_of(u, N, me, B, &off, &len);
    u->wire = ptdp_qwz_wire_bytes(u, N, B);
    u->gathered = ptdp_alloc(dev, u->wire * (size_t)N, PTDP_MEM_PARAMS, "zero3.gathered_qwz");
    if (u->gathered == NULL)
        return PTDP_ENOMEM;
    uint8_t *mine = (uint8_t *)u->gathered + (size_t)me * u->wire;
    /* my shard's float values, then its scales: the store's own, or (bf16) widened */
    ptdp_real *scales = ptdp_alloc_uninit(dev, (ptdp_qwz_blocks(len, B) + 1 + (z->store == PTDP_BF16 ? len : 0)) *
                                          sizeof *scales, PTDP_MEM_COMM, "zero3.qwz_scales");
    if (scales == NULL)
        return PTDP_ENOMEM;
    const ptdp_real *x = ptdp_store_at(z->store, z->param_shard, u->at);
    if (z->store == PTDP_BF16) {
        ptdp_real *wide = scales + ptdp_qwz_blocks(len, B) + 1;
        ptdp_store_to_real(PTDP_BF16, wide, x, len);
        x = wide;
    }
    ptdp_qwz_quantize(x, len, B, (int8_t *)mine, scales, NULL);
    memcpy(mine + len, scales, ptdp_qwz_blocks(len, B) * sizeof *scales);   /* unaligned in the wire */
    ptdp_free(dev, scales);
    u->qwz = true;
    u->prefetched = start;
    u->from_node = false;
    int rc = start ? ptdp_all_gather_start(z->dp, PTDP_IN_PLACE, u->gathered, u->wire * (size_t)N, PTDP_U8, &u->gather)
                   : ptdp_all_gather(z->dp, PTDP_IN_PLACE, u->gathered, u->wire * (size_t)N, PTDP_U8);
    if (rc != 0)
        u->prefetched = false;
    return rc;
}

int ptdp_zero3_qwz_rebuild(ptdp_device *dev, ptdp_zero *z, int k)
{
    ptdp_zero_unit *u = &z->units[k];
    const int N = ptdp_comm_size(z->dp), B = z->qwz_block;
    const size_t n = u->end - u->begin;
    u->w = ptdp_alloc_uninit(dev, (n > 0 ? n : 1) * sizeof(ptdp_real), PTDP_MEM_PARAMS, "qwz.gathered_working");
    if (u->w == NULL)
        return PTDP_ENOMEM;
    for (int r = 0; r < N; r++) {
        size_t off, len;
        wire_of(u, N, r, B, &off, &len);
        const uint8_t *wire = (const uint8_t *)u->gathered + (size_t)r * u->wire;
        for (size_t b = 0, at = 0; at < len; b++, at += (size_t)B) {   /* a block: its scale, its codes */
            ptdp_real s;
            memcpy(&s, wire + len + b * sizeof s, sizeof s);
            for (size_t i = at; i < len && i < at + (size_t)B; i++)
                u->w[off + i] = (ptdp_real)(int8_t)wire[i] * s;
        }
    }
    ptdp_free(dev, u->gathered);
    u->gathered = NULL;
    u->qwz = false;
    return PTDP_OK;
}

/* ------------------------------------------- the one device of --check */

/* The baseline's units, quantized in place in the model's flat buffer
 * while a forward holds them: their stretches, users, and a copy of the
 * exact values to put back. */
typedef struct {
    int N, B, nunits;
    size_t *begin, *end;
    int *users;
    ptdp_real **exact;
} emulation;

static int emulate_on_unit(ptdp_device *dev, ptdp_model *m, int k, ptdp_unit_event ev, void *ctx)
{
    emulation *e = ctx;
    if (k < 0 || k >= e->nunits)
        return ptdp_fail(dev, PTDP_EINVAL, "qwZ: unit %d of a model with %d", k, e->nunits);
    ptdp_real *x = m->flat_w + e->begin[k];
    const size_t n = e->end[k] - e->begin[k];
    if (ev == PTDP_UNIT_FORWARD_BEGIN || ev == PTDP_UNIT_BACKWARD_BEGIN) {
        if (e->users[k]++ > 0 || ev == PTDP_UNIT_BACKWARD_BEGIN)
            return PTDP_OK;   /* held already, or a backward's exact gather */
        if ((e->exact[k] = malloc((n > 0 ? n : 1) * sizeof *x)) == NULL)
            return ptdp_fail(dev, PTDP_ENOMEM, "host out of memory emulating qwZ");
        memcpy(e->exact[k], x, n * sizeof *x);
        ptdp_qwz_quantize_unit(x, n, e->N, e->B);
        return PTDP_OK;
    }
    if (e->users[k] > 0 && --e->users[k] == 0 && e->exact[k] != NULL) {
        memcpy(x, e->exact[k], n * sizeof *x);
        free(e->exact[k]);
        e->exact[k] = NULL;
    }
    return PTDP_OK;
}

int ptdp_zero_qwz_emulate(ptdp_device *dev, ptdp_model *m, int N, int B)
{
    if (m->unit_hook != NULL || m->flat_w == NULL)
        return ptdp_fail(dev, PTDP_EINVAL, "qwZ's one device needs its whole float parameter buffer, unhooked");
    emulation *e = calloc(1, sizeof *e);
    const int nu = m->nparams > 0 ? m->nunits : 0;
    if (e != NULL) {
        *e = (emulation){ .N = N, .B = B, .nunits = nu };
        e->begin = calloc((size_t)(nu > 0 ? nu : 1), sizeof *e->begin);
        e->end = calloc((size_t)(nu > 0 ? nu : 1), sizeof *e->end);
        e->users = calloc((size_t)(nu > 0 ? nu : 1), sizeof *e->users);
        e->exact = calloc((size_t)(nu > 0 ? nu : 1), sizeof *e->exact);
    }
    if (e == NULL || e->begin == NULL || e->end == NULL || e->users == NULL || e->exact == NULL) {
        ptdp_zero_qwz_emulate_free(m);
        if (e != NULL)
            free(e->begin), free(e->end), free(e->users), free(e->exact), free(e);
        return ptdp_fail(dev, PTDP_ENOMEM, "host out of memory emulating qwZ");
    }
    ptdp_model_unit_bounds(m, e->begin, e->end);   /* a unit is a run of params[] (zero3.c's rule) */
    m->unit_hook = emulate_on_unit;
    m->unit_hook_ctx = e;
    return PTDP_OK;
}

void ptdp_zero_qwz_emulate_free(ptdp_model *m)
{
    if (m->unit_hook != emulate_on_unit)
        return;
    emulation *e = m->unit_hook_ctx;
    for (int k = 0; k < e->nunits; k++)
        free(e->exact[k]);
    free(e->begin), free(e->end), free(e->users), free(e->exact), free(e);
    m->unit_hook = NULL;
    m->unit_hook_ctx = NULL;
}
