/*
 * zero3_qgz.c — ZeRO++'s qgZ (--zero-qgz): ZeRO-3's gradient
 * reduce-scatter replaced by a hierarchical all-to-all of INT4 (or INT8)
 * codes (Wang et al., ZeRO++, 2023: "quantized gradient communication").
 *
 * A reduce-scatter sums as it goes: each ring step adds a piece into the
 * next one, so quantizing its messages would quantize again at every one
 * of the N-1 steps.  qgZ sums in two hops instead, each an all-to-all that
 * quantizes once: first inside the node (fast links, many ranks), then
 * across nodes (slow links) with only the node's partial sums:
 *
 *   ZeRO group N = 8 in 2 nodes of k = 4;  shard s of a unit -> rank s
 *
 *          node 0: ranks 0 1 2 3          node 1: ranks 4 5 6 7
 *   1.  each rank quantizes its whole unit gradient, shard by shard, and
 *       sends rank j of its node the shards j and j+4  (all-to-all in
 *       the node: k-1 of k pieces leave, (k-1)/k |u|)
 *          rank 1 gets shards {1, 5} from 0 1 2 3    rank 5 gets {1, 5} from 4 5 6 7
 *   2.  dequantizes, sums its node's k pieces of each, re-quantizes
 *          rank 1 holds node 0's sum of shards 1, 5  rank 5 node 1's sum of 1, 5
 *   3.  sends each node's sum to the rank owning that shard  (all-to-all
 *       across nodes among the ranks of one place: 1 <-> 5, (m-1)/N |u|)
 *          rank 1 gets node 0's and node 1's sums of shard 1
 *   4.  dequantizes and sums them: shard 1 summed over all 8 ranks,
 *       added into rank 1's gradient shard as the reduce-scatter's would be
 *
 * The blocks: each shard is quantized on its own, in blocks of B elements
 * from its start (a block never straddles two shards, so every hop
 * quantizes the same stretches); a block's scale s = amax / qmax with
 * qmax = 7 (INT4) or 127 (INT8), its codes round(x/s) clamped to ±qmax
 * (zero3_qwz.c's rule; INT4 packs two codes a byte, low nibble first).
 * A slot carries one shard on the wire, for shards of at most L = ⌈|u|/N⌉
 * elements (a shorter one padded with zeros):
 *
 *   slot(L) = ⌈L b/8⌉ + ⌈L/B⌉ R       b the bits, R = sizeof(ptdp_real)
 *
 * Bytes a device sends for one unit, m = N/k nodes:
 *
 *   inside the node   (k-1) m slot(L)      ≈ (k-1)/k |u| (b/8 + R/B)
 *   across nodes      (m-1) slot(L)        ≈ (m-1)/N |u| (b/8 + R/B)
 *   reduce-scatter    (N-1)/N |u| R        all of it across nodes
 *
 * so INT4 with N = 8, k = 4 cuts the cross-node bytes of a float gradient
 * of S elements from 7/8 S R to 1/8 S (1/2 + R/B): 56x fewer for R = 4,
 * B = 2048 (a half byte against 4: 8x; (m-1)/N of the elements leave a
 * device instead of (N-1)/N: 7x).  The clock charges each all-to-all on
 * its link level (comm.c: the node group spans one node, the other group
 * spans m).  The "node" is hpZ's: k = the cluster profile's GPUs a node /
 * tp consecutive DP ranks; without a profile of nodes the command refuses
 * qgZ (there would be nothing to keep off the slow links).
 *
 * Lossy by design.  `--check` runs one device that sees each DP rank's own
 * gradient: it runs the dp x M micro-batches the ranks run (replica r's
 * i-th as its r M + i-th), keeps each micro-batch's gradient of a unit
 * apart (ptdp_zero_qgz_emulate, a unit hook), and at the step's last one
 * sums them through the same quantize/dequantize calls in the same order
 * (node by node, rank by rank in a node, micro-batch by micro-batch) — so
 * its gradient is the parallel run's bit for bit, and the usual tolerance
 * holds (HSDP's sum over replicas aside: the same numbers, R of them
 * added in the all-reduce's order).
 */
#include "parallel/zero3_qgz.h"

#include <stdlib.h>
#include <string.h>

#include "ptdp/comm.h"
#include "parallel/model_impl.h"
#include "ptdp/counters.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/mesh.h"
#include "ptdp/mixed.h"
#include "parallel/zero3_qwz.h"

/* ------------------------------------------------------------ the slots */

static int qmax_of(int bits)
{
    return bits == 4 ? 7 : 127;
}

static size_t code_bytes(size_t L, int bits)
{
    return (L * (size_t)bits + 7) / 8;
}

size_t ptdp_qgz_slot_bytes(size_t L, int bits, int B)
{
    return code_bytes(L, bits) + ptdp_qwz_blocks(L, B) * sizeof(ptdp_real);
}

/* Scratch for quantizing a shard of at most L elements. */
typedef struct {
    int8_t *codes;
    ptdp_real *scales;
} scratch;

/* x[0..len) into a slot of capacity L >= len: its codes, then its blocks'
 * scales; the padding zero. */
static void pack(const ptdp_real *x, size_t len, size_t L, int bits, int B, scratch t, uint8_t *slot)
{
    ptdp_quantize_blocks(x, len, B, qmax_of(bits), t.codes, t.scales, NULL);
    memset(slot, 0, ptdp_qgz_slot_bytes(L, bits, B));
    if (bits == 8)
        memcpy(slot, t.codes, len);
    else
        for (size_t i = 0; i < len; i++)   /* two's complement nibbles, low first */
            slot[i / 2] |= (uint8_t)(((unsigned)t.codes[i] & 0x0Fu) << (i % 2 ? 4 : 0));
    memcpy(slot + code_bytes(L, bits), t.scales, ptdp_qwz_blocks(len, B) * sizeof *t.scales);
}

static int code_at(const uint8_t *slot, size_t i, int bits)
{
    if (bits == 8)
        return (int8_t)slot[i];
    const int q = (slot[i / 2] >> (i % 2 ? 4 : 0)) & 0x0F;
    return q >= 8 ? q - 16 : q;
}

/* acc[0..len) += the slot's values, q s, block by block. */
static void unpack_add(const uint8_t *slot, size_t len, size_t L, int bits, int B, ptdp_real *acc)
{
    const uint8_t *scales = slot + code_bytes(L, bits);
    for (size_t b = 0, at = 0; at < len; b++, at += (size_t)B) {
        ptdp_real s;
        memcpy(&s, scales + b * sizeof s, sizeof s);   /* unaligned in the wire */
        for (size_t i = at; i < len && i < at + (size_t)B; i++)
            acc[i] += (ptdp_real)code_at(slot, i, bits) * s;
    }
}

/* x[0..len) through one hop: quantized into wire, and its values added
 * into acc — what a rank receiving x's slot adds. */
static void hop_add(const ptdp_real *x, size_t len, size_t L, int bits, int B, scratch t, uint8_t *wire,
                    ptdp_real *acc)
{
    pack(x, len, L, bits, B, t, wire);
    unpack_add(wire, len, L, bits, B, acc);
}

/* ----------------------------------------------------------- the groups */

int ptdp_zero3_qgz_publish(ptdp_counters *reg)
{
    return ptdp_counters_publish(reg, "qgz_slot_bytes", PTDP_COUNT_DEVICE, PTDP_COUNT_NUMBER, 0);
}

int ptdp_zero3_qgz_init(ptdp_device *dev, ptdp_zero *z, ptdp_model *m)
{
    ptdp_mesh *mesh = (ptdp_mesh *)m->mesh;
    z->qgz_bits = mesh->qgz_bits;
    z->qgz_block = mesh->qgz_block;
    if (z->qgz_bits <= 0)
        return PTDP_OK;
    const int N = ptdp_comm_size(z->dp), k = mesh->qgz_node;
    if (!z->row->shards_params || z->store == PTDP_BF16 || (z->qgz_bits != 4 && z->qgz_bits != 8) || z->qgz_block < 1 || k < 2 ||
        k >= N || N % k != 0)
        return ptdp_fail(dev, PTDP_EINVAL, "--zero-qgz: INT%d codes in blocks of %d, nodes of %d ranks inside "
                         "ZeRO-3's group of %d: it needs --zero 3 in float, 4 or 8 bits, and nodes of 2 or more ranks, "
                         "fewer than the group and dividing it", z->qgz_bits, z->qgz_block, k, N);
    int rc = ptdp_mesh_add_group(dev, mesh, PTDP_GROUP_QGZ_NODE);
    if (rc == 0)
        rc = ptdp_mesh_add_group(dev, mesh, PTDP_GROUP_QGZ_CROSS);
    if (rc != 0)
        return rc;
    z->qgz_node = ptdp_mesh_group(mesh, PTDP_GROUP_QGZ_NODE);
    z->qgz_cross = ptdp_mesh_group(mesh, PTDP_GROUP_QGZ_CROSS);
    double X = 0;   /* a slot a unit: what the formulas multiply */
    for (int u = 0; u < z->nunits; u++) {
        const size_t n = z->units[u].end - z->units[u].begin;
        X += n > 0 ? (double)ptdp_qgz_slot_bytes((n + (size_t)N - 1) / (size_t)N, z->qgz_bits, z->qgz_block) : 0;
    }
    ptdp_count(dev->counts, "qgz_slot_bytes", 0, X);
    return PTDP_OK;
}

/* ------------------------------------------------------ ZeRO-3's sum */

/* Steps 2 and 4 of the picture: sum the `from` slots of `recv` that hold
 * shard s (slot i at recv + (i stride + first) slot) into acc. */
static void sum_slots(const uint8_t *recv, int from, int stride, int first, size_t slot, size_t len, size_t L,
                      const ptdp_zero *z, ptdp_real *acc)
{
    for (int i = 0; i < from; i++)
        unpack_add(recv + ((size_t)i * (size_t)stride + (size_t)first) * slot, len, L, z->qgz_bits,
                   z->qgz_block, acc);
}

int ptdp_zero3_qgz_reduce(ptdp_device *dev, ptdp_zero *z, int k, const ptdp_real *g)
{
    const ptdp_zero_unit *u = &z->units[k];
    const size_t n = u->end - u->begin;
    const int N = ptdp_comm_size(z->dp), kk = ptdp_comm_size(z->qgz_node), nodes = N / kk;
    const int j = ptdp_comm_rank(z->qgz_node), bits = z->qgz_bits, B = z->qgz_block;
    if (n == 0)
        return PTDP_OK;
    const size_t L = (n + (size_t)N - 1) / (size_t)N, slot = ptdp_qgz_slot_bytes(L, bits, B);
    uint8_t *send = ptdp_alloc(dev, 2 * (size_t)N * slot, PTDP_MEM_COMM, "zero3.qgz_wire");
    ptdp_real *sums = ptdp_alloc(dev, ((size_t)nodes + 1) * L * sizeof *sums, PTDP_MEM_COMM, "zero3.qgz_sums");
    scratch t = { ptdp_alloc_uninit(dev, L, PTDP_MEM_COMM, "zero3.qgz_codes"),
                  ptdp_alloc_uninit(dev, ptdp_qwz_blocks(L, B) * sizeof(ptdp_real), PTDP_MEM_COMM,
                                    "zero3.qgz_scales") };
    int rc = send == NULL || sums == NULL || t.codes == NULL || t.scales == NULL ? PTDP_ENOMEM : PTDP_OK;
    uint8_t *recv = send != NULL ? send + (size_t)N * slot : NULL;
    size_t off, len;
    for (int to = 0; rc == 0 && to < kk; to++)   /* 1. shards a k + to to node rank to */
        for (int a = 0; a < nodes; a++) {
            ptdp_share(n, N, a * kk + to, &off, &len);
            pack(g + off, len, L, bits, B, t, send + ((size_t)to * (size_t)nodes + (size_t)a) * slot);
        }
    if (rc == 0)
        rc = ptdp_all_to_all(z->qgz_node, send, recv, (size_t)nodes * slot, PTDP_U8);
    for (int a = 0; rc == 0 && a < nodes; a++) {   /* 2. my node's sum of shard a k + j, re-quantized */
        ptdp_share(n, N, a * kk + j, &off, &len);
        sum_slots(recv, kk, nodes, a, slot, len, L, z, sums + (size_t)a * L);
        pack(sums + (size_t)a * L, len, L, bits, B, t, send + (size_t)a * slot);
    }
    if (rc == 0)   /* 3. to the node holding shard a k + j */
        rc = ptdp_all_to_all(z->qgz_cross, send, recv, slot, PTDP_U8);
    if (rc == 0) {   /* 4. the nodes' sums of my shard, added as a reduce-scatter's would be */
        ptdp_real *mine = sums + (size_t)nodes * L;
        sum_slots(recv, nodes, 1, 0, slot, u->len, L, z, mine);
        ptdp_store_add(z->store, ptdp_store_at(z->store, z->grad_shard, u->at), mine, u->len);
    }
    ptdp_free(dev, t.scales);
    ptdp_free(dev, t.codes);
    ptdp_free(dev, sums);
    ptdp_free(dev, send);
    return rc;
}

/* ------------------------------------------- the one device of --check */

/* The one device's units (their stretches of m->flat_g), each
 * micro-batch's gradient of each kept apart until the step's last. */
typedef struct {
    int dp, N, k, M, bits, B, nunits;
    size_t *begin, *end;
    int *users, *seen;          /* backwards open; micro-batches this step     */
    ptdp_real **saved;          /* the unit's gradient before the step        */
    ptdp_real **mb;             /* dp M micro-batches' gradients, n each       */
    int (*prev)(ptdp_device *, ptdp_model *, int, ptdp_unit_event, void *);
    void *prev_ctx;
} emulation;

/* What qgZ's two hops give shard [off, off+len) of a unit of n for
 * micro-batch i of replica r, added into res (zero3_qgz_reduce's order). */
static void emulate_shard(const emulation *e, const ptdp_real *mb, size_t n, int r, int i, size_t off, size_t len,
                          scratch t, uint8_t *wire, ptdp_real *part, ptdp_real *res)
{
    const size_t L = (n + (size_t)e->N - 1) / (size_t)e->N;
    for (int a = 0; a < e->N / e->k; a++) {
        memset(part, 0, len * sizeof *part);
        for (int q = 0; q < e->k; q++) {   /* node a's ranks, in order */
            const int rank = r * e->N + a * e->k + q;
            hop_add(mb + ((size_t)rank * (size_t)e->M + (size_t)i) * n + off, len, L, e->bits, e->B, t, wire, part);
        }
        hop_add(part, len, L, e->bits, e->B, t, wire, res);
    }
}

/* The step's last micro-batch of unit u ended: its gradient becomes what
 * was there before the step plus every shard's qgZ sum. */
static int emulate_finish(ptdp_device *dev, const emulation *e, ptdp_model *m, int u)
{
    const size_t n = e->end[u] - e->begin[u], L = (n + (size_t)e->N - 1) / (size_t)e->N;
    ptdp_real *x = m->flat_g + e->begin[u];
    memcpy(x, e->saved[u], n * sizeof *x);
    scratch t = { malloc(L + 1), malloc((ptdp_qwz_blocks(L, e->B) + 1) * sizeof(ptdp_real)) };
    uint8_t *wire = malloc(ptdp_qgz_slot_bytes(L, e->bits, e->B) + 1);
    ptdp_real *sums = malloc((3 * L + 1) * sizeof *sums);
    if (t.codes == NULL || t.scales == NULL || wire == NULL || sums == NULL) {
        free(t.codes), free(t.scales), free(wire), free(sums);
        return ptdp_fail(dev, PTDP_ENOMEM, "host out of memory emulating qgZ");
    }
    ptdp_real *part = sums, *res = sums + L, *replica = sums + 2 * L;
    for (int s = 0; s < e->N; s++) {
        size_t off, len;
        ptdp_share(n, e->N, s, &off, &len);
        for (int r = 0; r < e->dp / e->N; r++) {   /* HSDP's replicas, summed at the step's end */
            memset(replica, 0, len * sizeof *replica);
            for (int i = 0; i < e->M; i++) {   /* a shard += each micro-batch's sum */
                memset(res, 0, len * sizeof *res);
                emulate_shard(e, e->mb[u], n, r, i, off, len, t, wire, part, res);
                for (size_t j = 0; j < len; j++)
                    replica[j] += res[j];
            }
            for (size_t j = 0; j < len; j++)
                x[off + j] += replica[j];
        }
    }
    free(t.codes), free(t.scales), free(wire), free(sums);
    return PTDP_OK;
}

static int emulate_on_unit(ptdp_device *dev, ptdp_model *m, int k, ptdp_unit_event ev, void *ctx)
{
    emulation *e = ctx;
    int rc = e->prev != NULL ? e->prev(dev, m, k, ev, e->prev_ctx) : PTDP_OK;
    if (rc != 0 || (ev != PTDP_UNIT_BACKWARD_BEGIN && ev != PTDP_UNIT_BACKWARD_END))
        return rc;
    if (k < 0 || k >= e->nunits)
        return ptdp_fail(dev, PTDP_EINVAL, "qgZ: unit %d of a model with %d", k, e->nunits);
    const size_t n = e->end[k] - e->begin[k], U = (size_t)e->dp * (size_t)e->M;
    ptdp_real *x = m->flat_g + e->begin[k];
    if (ev == PTDP_UNIT_BACKWARD_BEGIN) {
        if (e->users[k]++ > 0)
            return PTDP_OK;
        if (e->mb[k] == NULL && ((e->mb[k] = malloc((U * n + 1) * sizeof *x)) == NULL ||
                                 (e->saved[k] = malloc((n + 1) * sizeof *x)) == NULL))
            return ptdp_fail(dev, PTDP_ENOMEM, "host out of memory emulating qgZ");
        if (e->seen[k] == 0)
            memcpy(e->saved[k], x, n * sizeof *x);
        memset(x, 0, n * sizeof *x);   /* this micro-batch's alone */
        return PTDP_OK;
    }
    if (e->users[k] <= 0 || --e->users[k] > 0)
        return PTDP_OK;
    memcpy(e->mb[k] + (size_t)e->seen[k] * n, x, n * sizeof *x);
    if ((size_t)++e->seen[k] < U)
        return PTDP_OK;
    e->seen[k] = 0;
    return emulate_finish(dev, e, m, k);
}

static void emulation_free(emulation *e)
{
    for (int k = 0; e->mb != NULL && k < e->nunits; k++)
        free(e->mb[k]), free(e->saved[k]);
    free(e->begin), free(e->end), free(e->users), free(e->seen), free(e->saved), free(e->mb), free(e);
}

int ptdp_zero_qgz_emulate(ptdp_device *dev, ptdp_model *m, int dp, int N, int k, int M, int bits, int B)
{
    if (m->flat_g == NULL || N < 2 || k < 1 || N % k != 0 || dp % N != 0 || M < 1)
        return ptdp_fail(dev, PTDP_EINVAL, "qgZ's one device needs its whole float gradient buffer, and ZeRO "
                         "groups of %d in nodes of %d dividing dp %d", N, k, dp);
    const int nu = m->nparams > 0 ? m->nunits : 0;
    const size_t c = (size_t)(nu > 0 ? nu : 1);
    emulation *e = calloc(1, sizeof *e);
    if (e != NULL) {
        *e = (emulation){ .dp = dp, .N = N, .k = k, .M = M, .bits = bits, .B = B, .nunits = nu,
                          .prev = m->unit_hook, .prev_ctx = m->unit_hook_ctx };
        e->begin = calloc(c, sizeof *e->begin), e->end = calloc(c, sizeof *e->end);
        e->users = calloc(c, sizeof *e->users), e->seen = calloc(c, sizeof *e->seen);
        e->saved = calloc(c, sizeof *e->saved), e->mb = calloc(c, sizeof *e->mb);
    }
    if (e == NULL || !e->begin || !e->end || !e->users || !e->seen || !e->saved || !e->mb) {
        if (e != NULL)
            emulation_free(e);
        return ptdp_fail(dev, PTDP_ENOMEM, "host out of memory emulating qgZ");
    }
    ptdp_model_unit_bounds(m, e->begin, e->end);   /* a unit is a run of params[] (zero3.c's rule) */
    m->unit_hook = emulate_on_unit;
    m->unit_hook_ctx = e;
    return PTDP_OK;
}

void ptdp_zero_qgz_emulate_free(ptdp_model *m)
{
    if (m->unit_hook != emulate_on_unit)
        return;
    emulation *e = m->unit_hook_ctx;
    m->unit_hook = e->prev;
    m->unit_hook_ctx = e->prev_ctx;
    emulation_free(e);
}
