/*
 * ep.c — expert parallelism's exchanges over an EP group (ep.h): the
 * counts, the dispatch of the routed rows, and the combine back.
 *
 * The rows travel in one order on the wire and are used in another.  With
 * N ranks of `local` experts each, and c(s, l) = the rows source s sends
 * for my local expert l (recv_rows[s local + l]):
 *
 *   my send buffer   x stacked by global expert e = d local + l: the block
 *                    for rank d is contiguous (experts d local ..), so the
 *                    all_to_allv sends it as it lies
 *   wire order       block from source s = s's rows for my expert 0, then
 *                    for my expert 1, ...: c(s, 0) + c(s, 1) + ... rows
 *   local order      expert 0: from s = 0, 1, ..; expert 1: from s = 0, ..
 *
 *              wire (by source)              local (by expert)
 *   staging  [ s0: l0 l1 | s1: l0 l1 ]  ──►  out [ l0: s0 s1 | l1: s0 s1 ]
 *
 * so the dispatch copies staging → out row block by row block after its
 * all_to_allv, and the combine copies y → staging the other way before
 * its own.  One helper does both copies; `to_local` says which way.
 *
 * Counts are ints on the host; the all_to_allv counts elements, rows x
 * cols.  The counts' exchange is an all_to_all of `local` ints per pair:
 * load itself, whose block for rank d is load[d local ..], lands as
 * recv_rows, block s from source s — no packing on either side.
 *
 * All three exchanges are marked overlappable (pair.h): inside an
 * overlapped F&B pair (DualPipeV) their virtual time runs on the
 * communication stream under the pair's compute; elsewhere they are the
 * blocking collectives they always were.
 *
 * What EP publishes in a training run's counters (counters.h), per device
 * over the run:
 *
 *   ep_bytes          what its exchanges sent to OTHER ranks by the formula
 *                     from the plan — the counts, (N-1) local ints; a
 *                     dispatch's rows for experts held elsewhere and a
 *                     combine's rows back to other sources, x cols x element
 *                     size — beside which the report puts the bytes the comm
 *                     layer measured
 *   expert_elements   its parameters summed over the expert-DP group (model.h's
 *                     PTDP_GROUP_EDP), for the DP and ZeRO formulas
 */
#include "ptdp/ep.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/ep_impl.h"
#include "ptdp/bf16.h"
#include "ptdp/counters.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/fp8_quant.h"
#include "ptdp/pair.h"

int ptdp_ep_plan_init(ptdp_device *dev, ptdp_comm *ep, int E, const int *load, ptdp_ep_plan *p)
{
    memset(p, 0, sizeof *p);
    const int N = ptdp_comm_size(ep), r = ptdp_comm_rank(ep);
    if (!PTDP_REQUIRE(load != NULL && E > 0 && E % N == 0, "%d experts over an EP group of %d ranks%s", E, N,
                      load == NULL ? ", load NULL" : ""))
        return PTDP_EINVAL;
    for (int e = 0; e < E; e++)
        if (!PTDP_REQUIRE(load[e] >= 0, "rank %d: load[%d] = %d rows", r, e, load[e]))
            return PTDP_EINVAL;
    p->N = N;
    p->rank = r;
    p->E = E;
    p->local = E / N;
    p->send_rows = malloc((size_t)E * sizeof *p->send_rows);
    p->recv_rows = malloc((size_t)N * p->local * sizeof *p->recv_rows);
    if (p->send_rows == NULL || p->recv_rows == NULL) {
        ptdp_ep_plan_free(p);
        return ptdp_fail(dev, PTDP_ENOMEM, "ep plan: %d + %d counts on the host", E, N * (E / N));
    }
    memcpy(p->send_rows, load, (size_t)E * sizeof *load);
    const bool was = ptdp_pair_mark(dev, true);
    int rc = ptdp_all_to_all(ep, p->send_rows, p->recv_rows, (size_t)p->local, PTDP_I32);
    ptdp_pair_mark(dev, was);
    if (rc != 0) {
        ptdp_ep_plan_free(p);
        return rc;
    }
    for (int e = 0; e < E; e++)
        p->sent += (size_t)p->send_rows[e];
    for (int i = 0; i < N * p->local; i++)
        p->received += (size_t)p->recv_rows[i];
    ptdp_count(dev->counts, "ep_bytes", 0, (double)(N - 1) * p->local * sizeof(int32_t));   /* to the others */
    return PTDP_OK;
}

void ptdp_ep_plan_free(ptdp_ep_plan *p)
{
    free(p->send_rows);
    free(p->recv_rows);
    memset(p, 0, sizeof *p);
}

/* Elements per peer: to[d] my rows for rank d's experts, from[s] source
 * s's rows for mine, each x cols. */
static void pair_counts(const ptdp_ep_plan *p, int cols, size_t *to, size_t *from)
{
    for (int d = 0; d < p->N; d++) {
        size_t out = 0, in = 0;
        for (int l = 0; l < p->local; l++) {
            out += (size_t)p->send_rows[d * p->local + l];
            in += (size_t)p->recv_rows[d * p->local + l];
        }
        to[d] = out * (size_t)cols;
        from[d] = in * (size_t)cols;
    }
}

/* Rows between the wire order (by source) and the local expert order:
 * src is in local order and dst on the wire when !to_local, the other way
 * round when to_local. */
static void reorder(const ptdp_ep_plan *p, int cols, const ptdp_real *src, ptdp_real *dst, bool to_local)
{
    const int blocks = p->N * p->local;
    size_t wire_at[blocks + 1];   /* rows before block s local + l on the wire */
    wire_at[0] = 0;
    for (int i = 0; i < blocks; i++)
        wire_at[i + 1] = wire_at[i] + (size_t)p->recv_rows[i];
    const size_t row = (size_t)cols;
    size_t local_at = 0;
    for (int l = 0; l < p->local; l++)
        for (int s = 0; s < p->N; s++) {
            const int i = s * p->local + l;
            const size_t n = (size_t)p->recv_rows[i] * row;
            if (to_local)
                memcpy(dst + local_at, src + wire_at[i] * row, n * sizeof *dst);
            else
                memcpy(dst + wire_at[i] * row, src + local_at, n * sizeof *dst);
            local_at += n;
        }
}

/* The plan was made on this group and the rows have columns; `caller`
 * names the exchange in the refusal. */
static bool plan_fits(const ptdp_ep_plan *p, ptdp_comm *ep, int cols, const char *caller)
{
    return PTDP_REQUIRE(p->send_rows != NULL && p->N == ptdp_comm_size(ep) && p->rank == ptdp_comm_rank(ep) &&
                            cols >= 0,
                        "%s: a plan for rank %d of %d on rank %d of %d, %d columns", caller, p->rank, p->N,
                        ptdp_comm_rank(ep), ptdp_comm_size(ep), cols);
}

/* One all_to_allv of rows, as they lie (the storage type) or on a bf16
 * run's device (dev->bf16: --precision bf16, as Megatron's dispatcher
 * sends its bf16 tensors) rounded to bf16 on the wire (sent rows packed
 * into two bytes, received ones widened back): in [n_in x cols] to out
 * [n_out x cols], to[d] and from[s] elements each way. */
static int exchange_rows(ptdp_device *dev, ptdp_comm *ep, const ptdp_real *in, size_t n_in,
                         const size_t *to, ptdp_real *out, size_t n_out, const size_t *from, int cols)
{
    int rc;
    const bool was = ptdp_pair_mark(dev, true);
    if (!dev->bf16) {
        rc = ptdp_all_to_allv(ep, in, to, NULL, out, from, NULL, PTDP_REAL);
        ptdp_pair_mark(dev, was);
        return rc;
    }
    const size_t a = n_in * (size_t)cols, b = n_out * (size_t)cols;
    ptdp_bf16 *packed = ptdp_alloc_uninit(dev, (a + b > 0 ? a + b : 1) * sizeof *packed, PTDP_MEM_COMM, "ep.bf16");
    rc = packed != NULL ? PTDP_OK : PTDP_ENOMEM;
    if (rc == 0) {
        ptdp_bf16_from_real_array(packed, in, a);
        rc = ptdp_all_to_allv(ep, packed, to, NULL, packed + a, from, NULL, PTDP_BF16);
    }
    if (rc == 0)
        ptdp_bf16_to_real_array(out, packed + a, b);
    ptdp_free(dev, packed);
    ptdp_pair_mark(dev, was);
    return rc;
}

/* Bytes an element on the wire: the storage type's, or bf16's. */
static size_t wire_element(const ptdp_device *dev)
{
    return dev->bf16 ? sizeof(ptdp_bf16) : sizeof(ptdp_real);
}

int ptdp_ep_dispatch(ptdp_device *dev, ptdp_comm *ep, const ptdp_ep_plan *p, const ptdp_real *x, int cols,
                     ptdp_real *out)
{
    if (!plan_fits(p, ep, cols, __func__))
        return PTDP_EINVAL;
    size_t to[p->N], from[p->N];
    pair_counts(p, cols, to, from);
    ptdp_real *wire = ptdp_alloc_uninit(dev, p->received * (size_t)cols * sizeof *wire, PTDP_MEM_COMM,
                                        "ep.dispatch");
    if (wire == NULL)
        return PTDP_ENOMEM;
    int rc = exchange_rows(dev, ep, x, p->sent, to, wire, p->received, from, cols);
    ptdp_count(dev->counts, "ep_bytes", 0, (double)ptdp_ep_rows_dispatched_away(p) * cols * wire_element(dev));
    if (rc == 0)
        reorder(p, cols, wire, out, true);
    ptdp_free(dev, wire);
    return rc;
}

/* ---------------------------------------------- the dispatch in FP8 */

/* A row's tiles along its columns: 1 x c, the last one cut short. */
static int row_tiles(const ptdp_fp8_recipe *r, int cols)
{
    const int c = r->act_tile[1] > 0 ? r->act_tile[1] : cols;
    return c > 0 ? (cols + c - 1) / c : 1;
}

double ptdp_ep_fp8_row_bytes(const ptdp_fp8_recipe *r, int cols)
{
    return (double)cols * ptdp_dtype_size(PTDP_F8_E4M3) + (double)row_tiles(r, cols) * sizeof(ptdp_real);
}

/* The sender's side: x's rows cut into 1 x c tiles, their scales (tile
 * order: row by row) and codes. */
static int quantize_rows(const ptdp_fp8_recipe *r, const ptdp_real *x, size_t rows, int cols, uint8_t *codes,
                         ptdp_real *scales, ptdp_real *amax)
{
    ptdp_fp8_tiling t;
    char msg[160];
    if (ptdp_fp8_tiling_init(&t, r, (int)rows, cols, r->act_tile[0], r->act_tile[1], msg, sizeof msg) != 0)
        return PTDP_EINVAL;
    const ptdp_tensor xt = ptdp_tensor_wrap((ptdp_real *)x, (int)rows, cols);
    ptdp_fp8_amax(&t, xt, amax);
    ptdp_fp8_scales(r, &ptdp_fp8_e4m3, amax, ptdp_fp8_tile_count(&t), NULL, scales);
    ptdp_fp8_cast(&ptdp_fp8_e4m3, &t, xt, scales, codes, (ptdp_tensor){ 0 });
    return PTDP_OK;
}

/* The receiver's side: value(code) x its tile's scale (a NaN code's value
 * is its NaN). */
static void dequantize_rows(const uint8_t *codes, const ptdp_real *scales, size_t rows, int cols, int tiles,
                            int c, ptdp_real *out)
{
    for (size_t i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            const uint8_t k = codes[i * (size_t)cols + (size_t)j];
            const ptdp_real v = ptdp_fp8_to_real(&ptdp_fp8_e4m3, k);
            out[i * (size_t)cols + (size_t)j] =
                ptdp_fp8_is_nan(&ptdp_fp8_e4m3, k) ? v : v * scales[i * (size_t)tiles + (size_t)(j / c)];
        }
}

int ptdp_ep_dispatch_fp8(ptdp_device *dev, ptdp_comm *ep, const ptdp_ep_plan *p, const ptdp_real *x, int cols,
                         const ptdp_fp8_recipe *r, ptdp_real *out)
{
    if (!plan_fits(p, ep, cols, __func__) ||
        !PTDP_REQUIRE(r != NULL && !r->whole_tensor, "an FP8 dispatch needs tiles along the rows"))
        return PTDP_EINVAL;
    const int g = row_tiles(r, cols);
    size_t to[p->N], from[p->N], to_s[p->N], from_s[p->N];
    pair_counts(p, cols, to, from);
    pair_counts(p, g, to_s, from_s);
    const size_t sent = p->sent, got = p->received;
    uint8_t *codes = ptdp_alloc_uninit(dev, (sent + got) * (size_t)cols, PTDP_MEM_COMM, "ep.dispatch_fp8");
    ptdp_real *sc = ptdp_alloc_uninit(dev, ((2 * sent + got) * (size_t)g + got * (size_t)cols) * sizeof *sc,
                                      PTDP_MEM_COMM, "ep.dispatch_fp8_scales");
    int rc = codes != NULL && sc != NULL ? PTDP_OK : PTDP_ENOMEM;
    ptdp_real *my_scales = sc, *amax = sc + sent * g, *their_scales = sc + 2 * sent * g,
              *wire = their_scales + got * g;
    if (rc == 0)
        rc = quantize_rows(r, x, sent, cols, codes, my_scales, amax);
    const bool was = ptdp_pair_mark(dev, true);
    if (rc == 0)
        rc = ptdp_all_to_allv(ep, codes, to, NULL, codes + sent * (size_t)cols, from, NULL, PTDP_F8_E4M3);
    if (rc == 0)
        rc = ptdp_all_to_allv(ep, my_scales, to_s, NULL, their_scales, from_s, NULL, PTDP_REAL);
    ptdp_pair_mark(dev, was);
    ptdp_count(dev->counts, "ep_bytes", 0, (double)ptdp_ep_rows_dispatched_away(p) * ptdp_ep_fp8_row_bytes(r, cols));
    if (rc == 0) {
        dequantize_rows(codes + sent * (size_t)cols, their_scales, got, cols, g,
                        r->act_tile[1] > 0 ? r->act_tile[1] : cols, wire);
        reorder(p, cols, wire, out, true);
    }
    ptdp_free(dev, sc);
    ptdp_free(dev, codes);
    return rc;
}

int ptdp_ep_combine(ptdp_device *dev, ptdp_comm *ep, const ptdp_ep_plan *p, const ptdp_real *y, int cols,
                    ptdp_real *out)
{
    if (!plan_fits(p, ep, cols, __func__))
        return PTDP_EINVAL;
    size_t to[p->N], from[p->N];
    pair_counts(p, cols, to, from);
    ptdp_real *wire = ptdp_alloc_uninit(dev, p->received * (size_t)cols * sizeof *wire, PTDP_MEM_COMM,
                                        "ep.combine");
    if (wire == NULL)
        return PTDP_ENOMEM;
    reorder(p, cols, y, wire, false);
    int rc = exchange_rows(dev, ep, wire, p->received, from, out, p->sent, to, cols);
    ptdp_count(dev->counts, "ep_bytes", 0, (double)ptdp_ep_rows_combined_away(p) * cols * wire_element(dev));
    ptdp_free(dev, wire);
    return rc;
}

size_t ptdp_ep_rows_dispatched_away(const ptdp_ep_plan *p)
{
    size_t mine = 0;
    for (int l = 0; l < p->local; l++)
        mine += (size_t)p->send_rows[p->rank * p->local + l];
    return p->sent - mine;
}

size_t ptdp_ep_rows_combined_away(const ptdp_ep_plan *p)
{
    size_t mine = 0;
    for (int l = 0; l < p->local; l++)
        mine += (size_t)p->recv_rows[p->rank * p->local + l];
    return p->received - mine;
}

double ptdp_ep_uniform_bytes(int k, long T_r, int C, int N, size_t elem)
{
    return N > 0 ? (double)k * (double)T_r * C * (N - 1) / N * (double)elem : 0.0;
}

/* ------------------------------------------------- the run's counters */

int ptdp_ep_publish(ptdp_counters *reg)
{
    int rc = ptdp_counters_publish(reg, "ep_bytes", PTDP_COUNT_DEVICE, PTDP_COUNT_NUMBER, 0);
    return rc == 0 ? ptdp_counters_publish(reg, "expert_elements", PTDP_COUNT_DEVICE, PTDP_COUNT_NUMBER, 0) : rc;
}

void ptdp_ep_count_experts(ptdp_device *dev, const ptdp_model *m)
{
    for (int i = 0; i < m->nparams; i++)
        if (m->params[i].sum.replicas == PTDP_GROUP_EDP)
            ptdp_count(dev->counts, "expert_elements", 0, (double)ptdp_tensor_numel(m->params[i].w));
}
