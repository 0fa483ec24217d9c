/*
 * test_mixed.c — mixed precision's stores (mixed.h, mixed.c) and what
 * they cost: the bytes at rest and the bytes on the wire.
 *
 *   1. the store helpers against straightforward references: narrowing
 *      rounds to nearest, ties to even (the reference picks the nearer of
 *      the two bf16 neighbours in double, not the bias trick of bf16.h);
 *      widening is exact; an add rounds once; a sum of squares is the
 *      widened values' in double; a float store is plain float;
 *   2. the model states at rest, read from each device's arena after a
 *      run with no step: params, grads and optim are exactly the ZeRO
 *      paper's 2Ψ + 2Ψ + 12Ψ divided by stage (ptdp_zero_state_bytes)
 *      with AdamW, 2 + 2 + 8 with SGD and momentum, 2 + 2 + 4 without;
 *      and while a GPT trains, its params and grads peaks are the bf16
 *      store plus the largest subunit's float copy (model.h: one linear
 *      layer; ZeRO-3: beside the gathered bf16 block) and the tied
 *      embeddings', to the byte — not a whole block's;
 *
 *         stage   params   grads   optim
 *           0      2Ψ       2Ψ      12Ψ
 *           1      2Ψ       2Ψ      12Ψ/N
 *           2      2Ψ       2Ψ/N    12Ψ/N
 *           3      2Ψ/N     2Ψ/N    12Ψ/N
 *
 *   3. the DP bytes per step under bf16 are exactly half of float's, for
 *      stages 0-3 — plus, under ZeRO, the gradient norm's all-reduce of
 *      one double, which bf16 does not halve;
 *   4. kept activations (act_bf16.h): rounding in place is bf16.h's
 *      rounding; a pack moves bf16-valued tensors and reals into one bf16
 *      buffer of half their bytes and frees them, keeping each shape and
 *      name; an unpack gives back the same bits under the same names; a
 *      slot with nothing kept (selective recomputation's probabilities)
 *      stays empty; the MLP keeps a block's h, a and g in 2 bytes an
 *      element where float keeps 4 (the GPT's: tests/test_gpt.c).
 *
 * The float build only (tests/meson.build): ptdp-f64 refuses bf16.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "equivalence/equiv.h"
#include "model_size.h"
#include "ptdp/act_bf16.h"
#include "ptdp/arena.h"
#include "ptdp/bf16.h"
#include "ptdp/launch.h"
#include "ptdp/mesh.h"
#include "ptdp/mixed.h"
#include "ptdp/models.h"
#include "ptdp/optim.h"
#include "ptdp/zero.h"

static const harness_tcase helper_tests = { .name = "store helpers", .timeout_s = 30 };
static const harness_tcase memory_tests = { .name = "memory", .timeout_s = 120 };
static const harness_tcase act_tests = { .name = "kept activations", .timeout_s = 30 };

/* ---------------------------------------------------------- references */

/* A float's bits and back. */
static uint32_t bits_of(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static float float_of(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* bf16(x) the long way: the two bf16 values around x (x's top half cut
 * off, and the next one away from zero), the nearer one in double, a tie
 * to the one whose last bit is 0.  NaN becomes the quiet NaN. */
static uint16_t ref_round(float x)
{
    if (isnan(x))
        return PTDP_BF16_NAN;
    uint16_t lo = (uint16_t)(bits_of(x) >> 16), hi = (uint16_t)(lo + 1);
    if (isinf(x) || (bits_of(x) & 0xFFFFu) == 0)
        return lo;
    double dlo = fabs((double)x - (double)float_of((uint32_t)lo << 16));
    double dhi = fabs((double)float_of((uint32_t)hi << 16) - (double)x);   /* inf past the largest: dhi = inf… */
    if (isinf(float_of((uint32_t)hi << 16)))                                /* …but the tie rule still rounds up */
        dhi = (double)float_of(((uint32_t)hi << 16) - 1u) - fabs((double)x);
    if (dlo < dhi)
        return lo;
    if (dhi < dlo)
        return hi;
    return (lo & 1u) ? hi : lo;
}

/* Reproducible values over many binades, with exact ties and specials. */
static float sample(uint64_t *s, int i)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    uint32_t r = (uint32_t)(*s >> 32);
    switch (i % 8) {
    case 0: return float_of((r & 0xBFFF0000u) | 0x8000u);   /* a tie exactly (finite) */
    case 1: return (float)((double)(r % 20001) / 1000.0 - 10.0);
    case 2: return float_of(r & 0xBFFFFFFFu);               /* any finite magnitude below 2 ^ 1 */
    default: return (float)((double)(int32_t)r * 1e-9);
    }
}

enum { N = 4096 };

/* ---------------------------------------------------- 1. the helpers */

TEST(helper_tests, test_narrow_rounds_to_nearest_even)
{
    static float x[N];
    static ptdp_bf16 got[N];
    uint64_t s = 7;
    for (int i = 0; i < N; i++)
        x[i] = sample(&s, i);
    /* and the edges: ±0, ±inf, NaN, the largest float (rounds to inf), a denormal tie */
    const float edges[] = { 0.0f, -0.0f, INFINITY, -INFINITY, NAN, 3.4028235e38f, -3.4028235e38f,
                            float_of(0x00018000u), float_of(0x00028000u), 1.0f + 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f };
    for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++)
        x[e] = edges[e];
    ptdp_store_from_real(PTDP_BF16, got, x, N);
    for (int i = 0; i < N; i++)
        ck_assert_msg(got[i] == ref_round(x[i]), "bf16(%a) = 0x%04x, the nearest (ties to even) is 0x%04x", (double)x[i],
                      got[i], ref_round(x[i]));
    ck_assert_uint_eq(got[5], 0x7F80u);   /* the largest float rounds up to inf */
    ck_assert_uint_eq(got[9], 0x3F80u);   /* 1 + 2^-8: a tie, to the even 1 */
    ck_assert_uint_eq(got[10], 0x3F81u);  /* just past it: up */
}
END_TEST

TEST(helper_tests, test_widen_is_exact_and_float_stores_are_copies)
{
    static ptdp_bf16 b[N];
    static float w[N], x[N], y[N];
    for (int i = 0; i < N; i++)
        b[i] = (ptdp_bf16)(i * 16 + 3);   /* 16 binades of patterns, signs, denormals */
    b[0] = 0xFF80u;                       /* -inf */
    ptdp_store_to_real(PTDP_BF16, w, b, N);
    for (int i = 0; i < N; i++)
        ck_assert_uint_eq(bits_of(w[i]), (uint32_t)b[i] << 16);
    ptdp_store_from_real(PTDP_BF16, b + N / 2, w, N / 2);   /* narrowing a widened value: itself */
    for (int i = 0; i < N / 2; i++) {
        unsigned pattern = i == 0 ? 0xFF80u : (unsigned)(i * 16 + 3);
        bool nan = (pattern & 0x7FFFu) > 0x7F80u;   /* every NaN comes back as the quiet one */
        ck_assert_uint_eq(b[N / 2 + i], nan ? PTDP_BF16_NAN : pattern);
    }
    uint64_t s = 3;
    for (int i = 0; i < N; i++)
        x[i] = sample(&s, i);
    ptdp_store_from_real(PTDP_REAL, y, x, N);
    ck_assert(memcmp(x, y, sizeof x) == 0);
    memset(y, 0, sizeof y);
    ptdp_store_to_real(PTDP_REAL, y, x, N);
    ck_assert(memcmp(x, y, sizeof x) == 0);
    ck_assert_uint_eq(ptdp_store_size(PTDP_BF16), 2);
    ck_assert_uint_eq(ptdp_store_size(PTDP_REAL), sizeof(ptdp_real));
    ck_assert_ptr_eq(ptdp_store_at(PTDP_BF16, b, 5), (char *)b + 10);
    ck_assert_ptr_eq(ptdp_store_at(PTDP_REAL, x, 5), (char *)x + 5 * sizeof(ptdp_real));
}
END_TEST

/* g16[i] = bf16(float(g16[i]) + g[i]): one rounding per add, and
 * accumulating many small gradients shows why rounding matters. */
TEST(helper_tests, test_add_rounds_once)
{
    static ptdp_bf16 d[N], d2[N], s16[N];
    static float a[N], g[N], y[N], z[N];
    uint64_t s = 11;
    for (int i = 0; i < N; i++) {
        a[i] = sample(&s, i + 1);
        g[i] = sample(&s, i + 3) * 0.01f;
        y[i] = a[i];
        z[i] = a[i];
    }
    ptdp_store_from_real(PTDP_BF16, d, a, N);
    memcpy(d2, d, sizeof d);
    ptdp_store_from_real(PTDP_BF16, s16, g, N);
    ptdp_store_add_real(PTDP_BF16, d, g, N);
    ptdp_store_add(PTDP_BF16, d2, s16, N);
    for (int i = 0; i < N; i++) {
        float base = float_of((uint32_t)ref_round(a[i]) << 16);
        ck_assert_msg(d[i] == ref_round(base + g[i]), "add_real %d: 0x%04x, want 0x%04x", i, d[i],
                      ref_round(base + g[i]));
        float gs = float_of((uint32_t)ref_round(g[i]) << 16);
        ck_assert_msg(d2[i] == ref_round(base + gs), "add %d: 0x%04x, want 0x%04x", i, d2[i], ref_round(base + gs));
    }
    /* a float store adds in float */
    ptdp_store_add_real(PTDP_REAL, y, g, N);
    ptdp_store_add(PTDP_REAL, z, g, N);
    for (int i = 0; i < N; i++) {
        ck_assert(y[i] == a[i] + g[i]);
        ck_assert(z[i] == a[i] + g[i]);
    }
    /* rounding is really there: 1 + 2^-9 is 1 in bf16, 256 such adds stay 1 */
    ptdp_bf16 one = 0x3F80u;
    const float tiny = 0x1p-9f;
    for (int k = 0; k < 256; k++)
        ptdp_store_add_real(PTDP_BF16, &one, &tiny, 1);
    ck_assert_uint_eq(one, 0x3F80u);
}
END_TEST

TEST(helper_tests, test_sum_of_squares_of_the_widened_values)
{
    static ptdp_bf16 b[N];
    static float x[N];
    uint64_t s = 5;
    for (int i = 0; i < N; i++)
        x[i] = sample(&s, i + 1) * 1e-3f;
    ptdp_store_from_real(PTDP_BF16, b, x, N);
    double want = 0, want_f = 0;
    for (int i = 0; i < N; i++) {
        double w = (double)float_of((uint32_t)b[i] << 16);
        want += w * w;
        want_f += (double)x[i] * (double)x[i];
    }
    ck_assert(ptdp_store_sum_squares(PTDP_BF16, b, N) == want);   /* in order, in double: exactly */
    ck_assert(ptdp_store_sum_squares(PTDP_REAL, x, N) == ptdp_sum_squares(x, N));
    ASSERT_CLOSE(ptdp_store_sum_squares(PTDP_REAL, x, N), want_f, 1e-12 * want_f);
    ck_assert(ptdp_store_sum_squares(PTDP_BF16, b, N) != want_f);  /* the bf16 values, not the float ones */
}
END_TEST

/* ----------------------------------------------- 2. memory at rest */

static void run_with_result(const ptdp_train_config *cfg, ptdp_launch_result *lr, ptdp_train_result *res)
{
    memset(lr, 0, sizeof *lr);
    equiv_train(cfg, &(ptdp_launch_opts){ .result = lr }, NULL, res);
}

/* A model whose units (the input layer 208, a block 1072, the head 136
 * elements) all divide by 2 and 4, so that every 1/N is exact. */
static ptdp_train_config bf16_config(int dp, int stage)
{
    ptdp_train_config c = equiv_config(dp, 1, 1, 2);
    c.bf16 = true;
    c.zero = stage;
    return c;
}

/* 0: AdamW (12 bytes: master, m, v), 1: SGD with momentum (8: master,
 * momentum), 2: SGD (4: the master alone); on dp 2 and dp 4. */
LOOP_TEST(memory_tests, test_bf16_model_states_at_rest_are_the_formula, 4 * 3 * 2)
{
    const int stage = _i % 4, opt = (_i / 4) % 3, dp = _i / 12 == 0 ? 2 : 4;
    ptdp_train_config c = bf16_config(dp, stage);
    c.steps = 0;
    double bo = 12;
    if (opt > 0) {
        c.optimizer = PTDP_OPT_SGD;
        c.momentum = opt == 1 ? 0.9 : 0;
        bo = opt == 1 ? 8 : 4;
    }
    ptdp_launch_result lr;
    ptdp_train_result res;
    run_with_result(&c, &lr, &res);
    const double psi = (double)model_size_stage(&c, 0);
    ck_assert_msg(res.param_elements != NULL && (double)res.param_elements[0] == psi, "psi");
    ptdp_zero_bytes want = ptdp_zero_state_bytes(stage, psi, dp, 2, 2, bo);
    for (int r = 0; r < lr.world_size; r++) {
        const ptdp_mem_stats *m = &lr.devices[r].mem;
        ck_assert_msg((double)m->peak[PTDP_MEM_PARAMS] == want.params && (double)m->peak[PTDP_MEM_GRADS] == want.grads &&
                      (double)m->peak[PTDP_MEM_OPTIM] == want.optim,
                      "zero %d, %s, dp %d, device %d at rest: params %zu grads %zu optim %zu, the formula "
                      "2 + 2 + %g: %.0f %.0f %.0f", stage, opt == 0 ? "adamw" : opt == 1 ? "sgd momentum" : "sgd", dp,
                      r, m->peak[PTDP_MEM_PARAMS], m->peak[PTDP_MEM_GRADS], m->peak[PTDP_MEM_OPTIM], bo, want.params,
                      want.grads, want.optim);
    }
    ptdp_launch_result_free(&lr);
    ptdp_train_result_free(&res);
}
END_TEST

/* While it trains, a GPT block is widened a subunit (one linear layer,
 * model.h) at a time: the float on top of the stores is the largest
 * subunit's copy (and, in a backward, its float gradient), where it was
 * the whole block's; ZeRO-3 holds the gathered block in bf16 (and its
 * bf16 gradient) meanwhile.  The sizes are read from the model itself. */
typedef struct {
    ptdp_train_config c;
    size_t block, subunit, embed, head, numel, len;   /* elements; len: device 0's ZeRO-3 shard */
} subunit_sizes;

static int subunit_sizes_device(ptdp_device *dev, void *arg)
{
    subunit_sizes *a = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    DEVICE_TRY(harness_model_on_mesh(dev, &a->c.model, 1, 1, 1, a->c.seed, &mesh, &m));
    for (int u = 0; u < m.nunits; u++) {
        size_t n = 0, off, len;
        bool cut = false;
        for (int i = 0; i < m.nparams; i++)
            if (m.params[i].unit == u) {
                n += ptdp_tensor_numel(m.params[i].w);
                cut |= m.params[i].subunit >= 0;
            }
        ptdp_share(n, a->c.dp, 0, &off, &len);
        a->len += len;
        if (cut)
            a->block = n > a->block ? n : a->block;
        else if (u == 0)
            a->head = n;    /* the head's unit comes first (backward order) */
        else
            a->embed = n;   /* the embeddings' last */
    }
    a->numel = m.numel;
    for (int k = 0; k < m.nsubunits; k++) {
        size_t n = 0;
        for (int i = 0; i < m.nparams; i++)
            if (m.params[i].subunit == k)
                n += ptdp_tensor_numel(m.params[i].w);
        a->subunit = n > a->subunit ? n : a->subunit;
    }
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return 0;
}

static size_t max3z(size_t a, size_t b, size_t c)
{
    size_t m = a > b ? a : b;
    return m > c ? m : c;
}

LOOP_TEST(memory_tests, test_bf16_gpt_widens_one_subunit_at_a_time, 2)
{
    const int stage = _i == 0 ? 0 : 3;
    subunit_sizes a = { .c = bf16_config(2, stage) };
    a.c.model = equiv_small_gpt(1);
    a.c.batch = 8;
    a.c.steps = 1;
    harness_launch_ok(1, subunit_sizes_device, &a, NULL, NULL);
    ck_assert_msg(a.block > 0 && a.subunit > 0 && a.subunit < a.block, "block %zu, largest subunit %zu", a.block,
                  a.subunit);
    ptdp_launch_result lr;
    ptdp_train_result res;
    run_with_result(&a.c, &lr, &res);
    /* one stage: the tied embeddings are float for the whole pass (and
     * their gradient for the whole backward); on top, a block's largest
     * subunit (ZeRO-3: beside the gathered bf16 block and its bf16
     * gradient), or a unit used whole at its BEGIN or END (its float copy
     * beside its bf16 one) */
    const size_t R = sizeof(ptdp_real), H = sizeof(ptdp_bf16), E = a.embed, z3 = stage == 3;
    const size_t store = (z3 ? a.len : a.numel) * H;
    const size_t top = max3z(z3 * a.block * H + a.subunit * R + E * R, E * (R + z3 * H), E * R + a.head * (R + z3 * H));
    const ptdp_mem_stats *m = &lr.devices[0].mem;
    ck_assert_msg(m->peak[PTDP_MEM_PARAMS] == store + top && m->peak[PTDP_MEM_GRADS] == store + top,
                  "zero %d: params peak %zu, grads peak %zu; want the bf16 store %zu + %zu (block %zu, subunit %zu, "
                  "embeddings %zu, head %zu elements)", stage, m->peak[PTDP_MEM_PARAMS], m->peak[PTDP_MEM_GRADS], store,
                  top, a.block, a.subunit, E, a.head);
    ptdp_launch_result_free(&lr);
    ptdp_train_result_free(&res);
}
END_TEST

/* ------------------------------------------------ 3. bytes on the wire */

/* The DP group's bytes sent per device and step, mean over the devices. */
static double dp_bytes_per_step(const ptdp_train_config *c)
{
    ptdp_launch_result lr;
    ptdp_train_result res;
    run_with_result(c, &lr, &res);
    double sent = 0;
    for (int r = 0; r < lr.world_size; r++) {
        int g = harness_group_index(&lr.devices[r].comm, "dp");
        ck_assert_int_ge(g, 0);
        sent += lr.devices[r].comm.group[g].sent;
    }
    ptdp_launch_result_free(&lr);
    ptdp_train_result_free(&res);
    return sent / lr.world_size / c->steps;
}

LOOP_TEST(memory_tests, test_bf16_halves_the_dp_bytes, 4 * 2)
{
    const int stage = _i % 4, dp = _i / 4 == 0 ? 2 : 4;
    ptdp_train_config h = bf16_config(dp, stage), f = h;
    h.steps = f.steps = 2;
    f.bf16 = false;
    const double psi = (double)model_size_stage(&h, 0);
    /* under ZeRO the gradient norm's partial sums are all-reduced: one double */
    const double norm = stage > 0 ? 2.0 * (dp - 1) / dp * sizeof(double) : 0;
    const double formula = stage == 3 ? ptdp_zero3_dp_bytes_per_step((size_t)psi, dp, h.micro_batches, false)
                                      : ptdp_zero_dp_bytes_per_step(stage, (size_t)psi, dp, h.micro_batches);
    const double bh = dp_bytes_per_step(&h), bf = dp_bytes_per_step(&f);
    ck_assert_msg(bf - norm == formula, "zero %d dp %d: float sends %.1f B per step, the formula %.1f + %.1f", stage,
                  dp, bf, formula, norm);
    ck_assert_msg(bh - norm == (bf - norm) / 2, "zero %d dp %d: bf16 sends %.1f B per step, float %.1f: want half of "
                  "%.1f, plus %.1f for the norm", stage, dp, bh, bf, bf - norm, norm);
}
END_TEST


/* ------------------------------------------- 4. activations kept as bf16 */

static int pack_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_tensor a, b;
    ptdp_real *r = NULL, *none = NULL;
    DEVICE_TRY(ptdp_tensor_alloc(dev, &a, "acts.a", PTDP_MEM_ACTS, 5, 7));
    DEVICE_TRY(ptdp_tensor_alloc(dev, &b, "acts.b", PTDP_MEM_ACTS, 3, 40));
    r = ptdp_alloc(dev, 11 * sizeof *r, PTDP_MEM_ACTS, "acts.r");
    DEVICE_CHECK(dev, r != NULL, "out of memory");
    uint64_t seed = 3;
    static float want[35 + 120 + 11];
    int k = 0;
    for (int i = 0; i < 35; i++)
        a.data[i] = sample(&seed, i + 1);
    for (int i = 0; i < 120; i++)
        b.data[i] = sample(&seed, i + 1) * 1e-3f;
    for (int i = 0; i < 11; i++)
        r[i] = sample(&seed, i + 1);
    ptdp_act_round(a);
    ptdp_act_round(b);
    ptdp_act_round_reals(r, 11);
    for (int i = 0; i < 35; i++, k++) {
        want[k] = a.data[i];
        DEVICE_CHECK(dev, bits_of(a.data[i]) == ((uint32_t)ref_round(a.data[i]) << 16) || isnan(a.data[i]),
                     "a[%d] not bf16-valued after rounding", i);
    }
    for (int i = 0; i < 120; i++)
        want[k++] = b.data[i];
    for (int i = 0; i < 11; i++)
        want[k++] = r[i];

    ptdp_mem_stats before, packed, after;
    ptdp_arena_stats(dev->arena, &before);
    const ptdp_act_slot slots[] = {
        { .t = &a }, { .reals = &none, .n = 99, .name = "acts.none" }, { .t = &b },
        { .reals = &r, .n = 11, .name = "acts.r" },
    };
    ptdp_act_packed pk = { 0 };
    DEVICE_TRY(ptdp_act_pack(dev, &pk, slots, 4, "acts.packed"));
    ptdp_arena_stats(dev->arena, &packed);
    DEVICE_CHECK(dev, a.data == NULL && b.data == NULL && r == NULL && none == NULL, "the floats are freed");
    DEVICE_CHECK(dev, a.rows == 5 && a.cols == 7 && b.rows == 3 && b.cols == 40 && strcmp(b.name, "acts.b") == 0,
                 "shapes and names kept");
    DEVICE_CHECK(dev, pk.n == 166 && pk.held == 0xDu, "%zu elements, held %#x", pk.n, pk.held);
    /* 166 bf16 in one buffer where three float blocks were: half, give or
     * take the arena's rounding of each block to 64 bytes */
    const size_t was = before.current[PTDP_MEM_ACTS], now = packed.current[PTDP_MEM_ACTS];
    DEVICE_CHECK(dev, now < was && 2 * now <= was + 2 * 64, "acts %zu B before, %zu B packed", was, now);

    DEVICE_TRY(ptdp_act_unpack(dev, &pk, slots, 4));
    ptdp_arena_stats(dev->arena, &after);
    DEVICE_CHECK(dev, pk.data == NULL && none == NULL && r != NULL && a.data != NULL && b.data != NULL, "unpacked");
    DEVICE_CHECK(dev, strcmp(a.name, "acts.a") == 0 && a.rows == 5 && a.cols == 7, "a's name and shape");
    DEVICE_CHECK(dev, after.current[PTDP_MEM_ACTS] == before.current[PTDP_MEM_ACTS], "acts %zu B, were %zu B",
                 after.current[PTDP_MEM_ACTS], before.current[PTDP_MEM_ACTS]);
    k = 0;
    for (int i = 0; i < 35; i++, k++)
        DEVICE_CHECK(dev, memcmp(&a.data[i], &want[k], sizeof want[k]) == 0, "a[%d] changed", i);
    for (int i = 0; i < 120; i++, k++)
        DEVICE_CHECK(dev, memcmp(&b.data[i], &want[k], sizeof want[k]) == 0, "b[%d] changed", i);
    for (int i = 0; i < 11; i++, k++)
        DEVICE_CHECK(dev, memcmp(&r[i], &want[k], sizeof want[k]) == 0, "r[%d] changed", i);
    DEVICE_TRY(ptdp_act_unpack(dev, &pk, slots, 4));   /* nothing packed: a no-op */
    ptdp_tensor_free(dev, &a);
    ptdp_tensor_free(dev, &b);
    ptdp_free(dev, r);
    return 0;
}

TEST(act_tests, test_pack_and_unpack_keep_the_bits_in_half_the_bytes)
{
    harness_launch_ok(1, pack_device, NULL, NULL, NULL);
}
END_TEST

/* The MLP under bf16 keeps each block's h, a and g (rows x (C + 2 F)
 * elements) as bf16: one block more on the device keeps 2 bytes an element
 * where float keeps 4 (give or take the arena's 64-byte rounding). */
typedef struct { bool bf16; size_t kept[2]; } mlp_acts_arg;

static int mlp_acts_device(ptdp_device *dev, void *arg)
{
    mlp_acts_arg *a = arg;
    for (int k = 0; k < 2; k++) {
        ptdp_model_config cfg = equiv_config(1, 1, 1, 1).model;
        cfg.layers = 2 + k;
        ptdp_mesh mesh;
        ptdp_model m;
        DEVICE_TRY(harness_model_on_mesh(dev, &cfg, 1, 1, 1, 5, &mesh, &m));
        m.bf16 = a->bf16;   /* the activations only: the parameters are the float ones here */
        DEVICE_TRY(harness_forward_kept(dev, &m, 6, &a->kept[k]));
        ptdp_model_free(dev, &m);
        ptdp_mesh_free(&mesh);
    }
    return 0;
}

TEST(act_tests, test_mlp_keeps_its_blocks_in_bf16)
{
    const ptdp_model_config cfg = equiv_config(1, 1, 1, 1).model;
    const double elements = 6.0 * (cfg.hidden + 2 * cfg.ffn);   /* h, a, g of one block */
    for (int bf = 0; bf < 2; bf++) {
        mlp_acts_arg a = { .bf16 = bf == 1 };
        harness_launch_ok(1, mlp_acts_device, &a, NULL, NULL);
        const double got = (double)a.kept[1] - (double)a.kept[0];
        const double want = elements * (bf ? sizeof(ptdp_bf16) : sizeof(ptdp_real));
        ck_assert_msg(got >= want - 64 && got <= want + 3 * 64, "%s: one more block keeps %.0f B, want %.0f B",
                      bf ? "bf16" : "float", got, want);
    }
}
END_TEST

int main(void)
{
    return harness_main("mixed");
}
