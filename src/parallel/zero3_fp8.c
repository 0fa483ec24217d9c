/*
 * zero3_fp8.c — ZeRO-3's parameter all-gather in FP8 (--fp8-comm):
 * torchtitan's float8 all-gather for FSDP, on ptdp's flat units.
 *
 * Under --fp8 a linear layer's weight is quantized before every product
 * it takes part in (fp8_linear.h): its E4M3 codes and the scale of each
 * tile are all the GEMM ever reads of it.  So there is no reason to
 * all-gather it in float or bf16 and quantize it after: quantize my shard
 * before the gather and send one byte an element.  The same bits arrive,
 * because the scale is the one one device would take — and that needs the
 * amax of the whole weight first, which no shard holds:
 *
 *   unit u, sharded over N = 2:   [ w1 ........ | b1 | w2 .... | ln ]
 *                                 └── rank 0 ─────────┘└── rank 1 ───┘
 *   1. amax       each rank: the max |x| of its elements of each tile of
 *                 w1 and w2 (0 where it holds none); all-reduce MAX over
 *                 ZeRO's group, then over TP if a weight is split there
 *                 (T reals: one a weight, or one a tile — fp8_linear.c's
 *                 rule, with the delayed recipe's history)
 *   2. scales     s = amax / 448 (tensorwise), from the history (delayed),
 *                 a tile's own (blockwise, mxfp8): the same on every rank
 *   3. wire       my shard as [ codes of w1, w2: 1 B each | b1, ln: the
 *                 store's type ], padded to the largest rank's wire
 *   4. all-gather the wires (U8), then every rank rebuilds the unit in
 *                 float: w = value(code) · s, the rest widened as it is
 *
 *   bytes a gather sends, per rank    (N-1)/N (ψ_q + (S - ψ_q) b) + the amaxes'
 *                                     all-reduce, 2 (N-1)/N T sizeof(real)
 *   against                           (N-1)/N S b   (b: 4 float, 2 bf16)
 *
 * ψ_q the unit's FP8 weight elements, S all of them.  The rebuilt weights
 * are exactly the dequantized values fp8_linear.c would make from the
 * float ones, so the linear op is told they are "held"
 * (ptdp_fp8_linear_hold) and uses them as they are, until the unit is
 * released.  Only the forward's and backward's gathers change: gradients
 * are reduce-scattered as before, and the optimizer keeps float masters.
 */
#include "parallel/zero3_fp8.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/comm.h"
#include "ptdp/counters.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/fp8.h"
#include "ptdp/mixed.h"
#include "parallel/fp8_linear_impl.h"

/* Unit k's FP8 weights (a linear layer's W that keeps no precision of its
 * own: what the linear op quantizes), their tilings, and where each one's
 * tiles start among the unit's T amaxes. */
typedef struct {
    int n, tiles;
    const ptdp_param **w;
    ptdp_fp8_tiling *t;
    int *tile0;
} unit_weights;

static bool quantized(const ptdp_param *p)
{
    return p->linear_weight && !p->keeps_precision;
}

static void weights_free(unit_weights *q)
{
    free(q->w);
    free(q->t);
    free(q->tile0);
    *q = (unit_weights){ 0 };
}

static int weights_of(ptdp_device *dev, const ptdp_zero *z, const ptdp_model *m, int k, unit_weights *q)
{
    *q = (unit_weights){ 0 };
    const size_t cap = (size_t)(m->nparams > 0 ? m->nparams : 1);
    q->w = calloc(cap, sizeof *q->w);
    q->t = calloc(cap, sizeof *q->t);
    q->tile0 = calloc(cap + 1, sizeof *q->tile0);
    if (q->w == NULL || q->t == NULL || q->tile0 == NULL) {
        weights_free(q);
        return ptdp_fail(dev, PTDP_ENOMEM, "host out of memory for ZeRO-3's FP8 gather");
    }
    for (int i = 0; i < m->nparams; i++) {
        const ptdp_param *p = &m->params[i];
        if (p->unit != k || !quantized(p))
            continue;
        int rc = ptdp_fp8_linear_weight_tiling(dev, z->fp8, p, &q->t[q->n]);
        if (rc != 0) {
            weights_free(q);
            return rc;
        }
        q->w[q->n] = p;
        q->tile0[q->n] = q->tiles;
        q->tiles += ptdp_fp8_tile_count(&q->t[q->n]);
        q->n++;
    }
    q->tile0[q->n] = q->tiles;
    return PTDP_OK;
}

/* [lo, hi): weight i's elements within the unit's stretch [a, b) (offsets
 * from the flat buffer's start); empty if none. */
static void overlap(const unit_weights *q, int i, size_t a, size_t b, size_t *lo, size_t *hi)
{
    const size_t p0 = q->w[i]->offset, p1 = p0 + ptdp_tensor_numel(q->w[i]->w);
    *lo = p0 > a ? p0 : a;
    *hi = p1 < b ? p1 : b;
    if (*lo > b)
        *lo = b;
    if (*hi < *lo)
        *hi = *lo;
}

/* Rank r's wire: its FP8 elements' codes, then the rest in the store's type. */
static size_t wire_bytes(const ptdp_zero *z, const ptdp_zero_unit *u, const unit_weights *q, int r)
{
    size_t off, len, codes = 0;
    ptdp_share(u->end - u->begin, ptdp_comm_size(z->dp), r, &off, &len);
    for (int i = 0; i < q->n; i++) {
        size_t lo, hi;
        overlap(q, i, u->begin + off, u->begin + off + len, &lo, &hi);
        codes += hi - lo;
    }
    return codes + (len - codes) * ptdp_store_size(z->store);
}

/* The largest rank's wire (at least 1 byte): every rank's segment of the all-gather. */
static size_t largest_wire(const ptdp_zero *z, const ptdp_zero_unit *u, const unit_weights *q)
{
    size_t most = 1;
    for (int r = 0; r < ptdp_comm_size(z->dp); r++) {
        const size_t b = wire_bytes(z, u, q, r);
        most = b > most ? b : most;
    }
    return most;
}

/* Element e of weight i (its flat offset): its tile among the unit's T. */
static int tile_at(const unit_weights *q, int i, size_t e)
{
    const size_t j = e - q->w[i]->offset;
    const int cols = q->t[i].cols;
    return q->tile0[i] + ptdp_fp8_tile_of(&q->t[i], (int)(j / (size_t)cols), (int)(j % (size_t)cols));
}

/* Steps 1 and 2: my elements' amax of each tile, reduced; the scales. */
static int scales_of(ptdp_device *dev, ptdp_zero *z, const ptdp_zero_unit *u, const unit_weights *q,
                     const ptdp_real *mine, ptdp_real *amax, ptdp_real *scale)
{
    const size_t a = u->begin + u->off;
    for (int t = 0; t < q->tiles; t++)
        amax[t] = 0;
    for (int i = 0; i < q->n; i++) {
        size_t lo, hi;
        overlap(q, i, a, a + u->len, &lo, &hi);
        for (size_t e = lo; e < hi; e++) {
            const ptdp_real v = (ptdp_real)fabs((double)mine[e - a]);   /* exact, as ptdp_fp8_amax */
            const int t = tile_at(q, i, e);
            if (isfinite(v) && v > amax[t])
                amax[t] = v;
        }
    }
    int rc = ptdp_comm_size(z->dp) > 1 ? ptdp_all_reduce(z->dp, amax, amax, (size_t)q->tiles, PTDP_REAL, PTDP_MAX)
                                        : PTDP_OK;
    return rc == 0 ? ptdp_fp8_linear_weight_scales(dev, z->fp8, q->n, q->w, amax, scale) : rc;
}

/* The stretch of [a, b) before weight i (i = n: after the last one) that
 * belongs to no FP8 weight: [*lo, *hi), from *e on; *e moves past weight i. */
static void gap_before(const unit_weights *q, int i, size_t a, size_t b, size_t *e, size_t *lo, size_t *hi)
{
    size_t w0 = b, w1 = b;
    if (i < q->n)
        overlap(q, i, a, b, &w0, &w1);
    *lo = *e;
    *hi = w0 > *e ? w0 : *e;
    *e = w1 > *hi ? w1 : *hi;
}

/* Step 3: my shard's wire, from its float values (codes) and the store
 * (the rest, as it is). */
static void pack(const ptdp_zero *z, const ptdp_zero_unit *u, const unit_weights *q, const ptdp_real *mine,
                 const ptdp_real *scale, uint8_t *wire)
{
    const size_t a = u->begin + u->off, b = a + u->len, es = ptdp_store_size(z->store);
    for (int i = 0; i < q->n; i++) {
        size_t lo, hi;
        overlap(q, i, a, b, &lo, &hi);
        for (size_t e = lo; e < hi; e++)
            ptdp_fp8_cast_one(&ptdp_fp8_e4m3, mine[e - a], scale[tile_at(q, i, e)], wire++);
    }
    size_t e = a;
    for (int i = 0; i <= q->n; i++) {
        size_t lo, hi;
        gap_before(q, i, a, b, &e, &lo, &hi);
        memcpy(wire, ptdp_store_at(z->store, z->param_shard, u->at + (lo - a)), (hi - lo) * es);
        wire += (hi - lo) * es;
    }
}

/* Step 4: rank r's wire into the unit's float buffer w (indexed from the
 * unit's start). */
static void unpack(const ptdp_zero *z, const ptdp_zero_unit *u, const unit_weights *q, const ptdp_real *scale,
                   int r, const uint8_t *wire, ptdp_real *w)
{
    size_t off, len;
    ptdp_share(u->end - u->begin, ptdp_comm_size(z->dp), r, &off, &len);
    const size_t a = u->begin + off, b = a + len, es = ptdp_store_size(z->store);
    for (int i = 0; i < q->n; i++) {
        size_t lo, hi;
        overlap(q, i, a, b, &lo, &hi);
        for (size_t e = lo; e < hi; e++)
            w[e - u->begin] = ptdp_fp8_value_scaled(&ptdp_fp8_e4m3, *wire++, scale[tile_at(q, i, e)]);
    }
    size_t e = a;
    for (int i = 0; i <= q->n; i++) {
        size_t lo, hi;
        gap_before(q, i, a, b, &e, &lo, &hi);
        ptdp_store_to_real(z->store, w + (lo - u->begin), wire, hi - lo);
        wire += (hi - lo) * es;
    }
}

/* ------------------------------------------------------------ the gather */

int ptdp_zero3_fp8_publish(ptdp_counters *reg)
{
    int rc = ptdp_counters_publish(reg, "fp8_gather_elements", PTDP_COUNT_DEVICE, PTDP_COUNT_NUMBER, 0);
    if (rc == 0)
        rc = ptdp_counters_publish(reg, "fp8_gather_tiles", PTDP_COUNT_DEVICE, PTDP_COUNT_NUMBER, 0);
    return rc == 0 ? ptdp_counters_publish(reg, "fp8_gather_bytes", PTDP_COUNT_DEVICE, PTDP_COUNT_NUMBER, 0) : rc;
}

/* The bytes one gather of unit k puts in its all-gather's buffer: N wires
 * of the largest rank's size, or the unit in the store's type. */
static int gathered_bytes(ptdp_device *dev, const ptdp_zero *z, const ptdp_model *m, int k, double *bytes,
                          double *tiles)
{
    const ptdp_zero_unit *u = &z->units[k];
    const int N = ptdp_comm_size(z->dp);
    *bytes = (double)(u->end - u->begin) * (double)ptdp_store_size(z->store);
    *tiles = 0;
    if (!ptdp_zero3_fp8_gathers(z, m, k))
        return PTDP_OK;
    unit_weights q;
    int rc = weights_of(dev, z, m, k, &q);
    if (rc != 0)
        return rc;
    *bytes = (double)largest_wire(z, u, &q) * N;
    *tiles = q.tiles;
    weights_free(&q);
    return PTDP_OK;
}

int ptdp_zero3_fp8_init(ptdp_device *dev, ptdp_zero *z, const ptdp_model *m)
{
    z->fp8 = m->fp8 != NULL && ptdp_fp8_linear_settings(m->fp8)->comm ? m->fp8 : NULL;
    if (z->fp8 == NULL)
        return PTDP_OK;
    double elements = 0, tiles = 0, bytes = 0;
    for (int i = 0; i < m->nparams; i++)
        if (quantized(&m->params[i]))
            elements += (double)ptdp_tensor_numel(m->params[i].w);
    for (int k = 0; k < z->nunits; k++) {
        double b, t;
        int rc = gathered_bytes(dev, z, m, k, &b, &t);
        if (rc != 0)
            return rc;
        bytes += b;
        tiles += t;
    }
    ptdp_count(dev->counts, "fp8_gather_elements", 0, elements);
    ptdp_count(dev->counts, "fp8_gather_tiles", 0, tiles);
    ptdp_count(dev->counts, "fp8_gather_bytes", 0, bytes);
    return PTDP_OK;
}

bool ptdp_zero3_fp8_gathers(const ptdp_zero *z, const ptdp_model *m, int k)
{
    if (z->fp8 == NULL)
        return false;
    for (int i = 0; i < m->nparams; i++)
        if (m->params[i].unit == k && quantized(&m->params[i]))
            return true;
    return false;
}

/* My shard's float values: the shard itself, or (bf16) a widened copy. */
static ptdp_real *my_values(ptdp_device *dev, const ptdp_zero *z, const ptdp_zero_unit *u)
{
    void *shard = ptdp_store_at(z->store, z->param_shard, u->at);
    if (z->store != PTDP_BF16)
        return shard;
    ptdp_real *x = ptdp_alloc_uninit(dev, (u->len > 0 ? u->len : 1) * sizeof *x, PTDP_MEM_COMM, "zero3.fp8_mine");
    if (x != NULL)
        ptdp_store_to_real(z->store, x, shard, u->len);
    return x;
}

int ptdp_zero3_fp8_gather(ptdp_device *dev, ptdp_zero *z, const ptdp_model *m, int k, bool start)
{
    ptdp_zero_unit *u = &z->units[k];
    const int N = ptdp_comm_size(z->dp), me = ptdp_comm_rank(z->dp);
    unit_weights q;
    int rc = weights_of(dev, z, m, k, &q);
    if (rc != 0)
        return rc;
    u->wire = largest_wire(z, u, &q);   /* an all-gather's segments are equal: the others padded */
    u->gathered = ptdp_alloc(dev, u->wire * (size_t)N, PTDP_MEM_PARAMS, "zero3.gathered_fp8");
    u->fp8_scales = ptdp_alloc_uninit(dev, 2 * (size_t)(q.tiles > 0 ? q.tiles : 1) * sizeof(ptdp_real),
                                      PTDP_MEM_COMM, "zero3.fp8_scales");   /* amax, then scale */
    ptdp_real *mine = u->gathered != NULL && u->fp8_scales != NULL ? my_values(dev, z, u) : NULL;
    rc = mine != NULL ? PTDP_OK : PTDP_ENOMEM;
    ptdp_real *scale = u->fp8_scales != NULL ? u->fp8_scales + (q.tiles > 0 ? q.tiles : 1) : NULL;
    if (rc == 0)
        rc = scales_of(dev, z, u, &q, mine, u->fp8_scales, scale);
    if (rc == 0)
        pack(z, u, &q, mine, scale, (uint8_t *)u->gathered + (size_t)me * u->wire);
    if (mine != NULL && (void *)mine != ptdp_store_at(z->store, z->param_shard, u->at))
        ptdp_free(dev, mine);
    weights_free(&q);
    u->prefetched = start;
    u->from_node = false;
    if (rc == 0)
        rc = start ? ptdp_all_gather_start(z->dp, PTDP_IN_PLACE, u->gathered, u->wire * (size_t)N, PTDP_U8, &u->gather)
                   : ptdp_all_gather(z->dp, PTDP_IN_PLACE, u->gathered, u->wire * (size_t)N, PTDP_U8);
    if (rc != 0)
        u->prefetched = false;
    return rc;
}

int ptdp_zero3_fp8_rebuild(ptdp_device *dev, ptdp_zero *z, const ptdp_model *m, int k)
{
    ptdp_zero_unit *u = &z->units[k];
    const size_t n = u->end - u->begin;
    unit_weights q;
    int rc = weights_of(dev, z, m, k, &q);
    if (rc != 0)
        return rc;
    u->w = ptdp_alloc_uninit(dev, (n > 0 ? n : 1) * sizeof(ptdp_real), PTDP_MEM_PARAMS, "fp8.gathered_working");
    if (u->w == NULL) {
        weights_free(&q);
        return PTDP_ENOMEM;
    }
    const ptdp_real *scale = u->fp8_scales + (q.tiles > 0 ? q.tiles : 1);
    for (int r = 0; r < ptdp_comm_size(z->dp); r++)
        unpack(z, u, &q, scale, r, (const uint8_t *)u->gathered + (size_t)r * u->wire, u->w);
    for (int i = 0; i < q.n; i++)
        ptdp_fp8_linear_hold(z->fp8, q.w[i], true);
    weights_free(&q);
    ptdp_free(dev, u->gathered);
    ptdp_free(dev, u->fp8_scales);
    u->gathered = NULL;
    u->fp8_scales = NULL;
    return PTDP_OK;
}

void ptdp_zero3_fp8_release(ptdp_zero *z, const ptdp_model *m, int k)
{
    for (int i = 0; z->fp8 != NULL && i < m->nparams; i++)
        if (m->params[i].unit == k && quantized(&m->params[i]))
            ptdp_fp8_linear_hold(z->fp8, &m->params[i], false);
}
