/*
 * test_zero3.c — ZeRO stage 3: the units, the bytes, the memory and the
 * overlap (zero.h, zero3.c).  test_equiv_zero3.c proves the numbers.
 *
 *   units     by hand on dp 2: a unit's parameter views point at nothing
 *             outside its BEGIN..END, at the gathered initial values inside;
 *             a prefetched unit stays invisible until asked for; nested
 *             BEGINs gather once; a backward's END reduce-scatters the
 *             unit's gradient, adds it into my shard (micro-batch after
 *             micro-batch) and drops its views
 *   bytes     summed over the DP group, per step: reduce-scatters and
 *             all-gathers 3M(N-1) S (with full recomputation too), plain DP's
 *             all-reduce 2(N-1) S on the same model — ZeRO's 3Ψ against 2Ψ
 *   memory    arena peaks against the units' sizes taken from the model's
 *             parameters: params = my shard + the largest unit (+ the
 *             prefetched next one under --overlap, never more than the two
 *             largest), grads likewise, optimizer state 2 x my shard, the
 *             shard within one element per unit of P/N; and the ZeRO paper's
 *             model states for stages 0 to 3, float and bf16
 *   experts   a parameter summed over the expert-DP group (an expert under
 *             expert parallelism) is refused by stage 3, by name — its
 *             units would gather over DP while its replicas live in a
 *             smaller group — and accepted by stages 1 and 2
 *   overlap   under dgx-a100: a shorter run with --overlap, communication
 *             hidden on every device, and on the trace each unit's gather
 *             starts before that unit's compute — a prefetched one before
 *             the previous unit's compute ends
 */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "equivalence/equiv.h"
#include "model_size.h"
#include "ptdp/clock.h"
#include "ptdp/comm.h"
#include "ptdp/device.h"
#include "ptdp/launch.h"
#include "ptdp/mesh.h"
#include "ptdp/model.h"
#include "ptdp/models.h"
#include "ptdp/zero.h"
#include "ptdp/mlp.h"

static const harness_tcase units_tests = { .name = "units", .timeout_s = 60 };
static const harness_tcase bytes_tests = { .name = "bytes", .timeout_s = 120 };
static const harness_tcase memory_tests = { .name = "memory", .timeout_s = 120 };
static const harness_tcase overlap_tests = { .name = "overlap", .timeout_s = 120 };
static const harness_tcase experts_tests = { .name = "experts", .timeout_s = 60 };

HARNESS_MODEL_CONFIG(small_of, PTDP_MLP_CONFIG( .d_in = 5, .hidden = 6, .ffn = 8, .layers = 3, .classes = 4 ))
#define SMALL (*small_of())

/* ------------------------------------------------------------ the units */

/* Whether every parameter view of unit u points somewhere (all) or nowhere. */
static bool unit_present(const ptdp_model *m, int u, bool grads, bool all)
{
    for (int i = 0; i < m->nparams; i++) {
        const ptdp_param *p = &m->params[i];
        if (p->unit != u)
            continue;
        const ptdp_real *d = grads ? p->g.data : p->w.data;
        if ((d != NULL) != all)
            return false;
    }
    return true;
}

/* The first parameter of unit u: what a model names when it announces it. */
static const ptdp_param *first_of(const ptdp_model *m, int u)
{
    for (int i = 0; i < m->nparams; i++)
        if (m->params[i].unit == u)
            return &m->params[i];
    return NULL;
}

typedef struct { bool overlap; } units_arg;

static int units_device(ptdp_device *dev, void *arg)
{
    const units_arg *a = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    ptdp_zero z;
    DEVICE_TRY(harness_model_on_mesh(dev, &SMALL, 2, 1, 1, 3, &mesh, &m));
    DEVICE_CHECK(dev, m.nunits == SMALL.layers + 2, "%d units, want a block each, the input and the output",
                 m.nunits);
    ptdp_real *init = malloc(m.numel * sizeof *init);   /* host: the whole initial model */
    DEVICE_CHECK(dev, init != NULL, "host out of memory");
    memcpy(init, m.flat_w, m.numel * sizeof *init);

    DEVICE_TRY(ptdp_zero_init(dev, &z, &m, 3));
    z.overlap = a->overlap;
    DEVICE_CHECK(dev, m.flat_w == NULL && m.flat_g == NULL, "stage 3 kept a full-size buffer");
    for (int u = 0; u < m.nunits; u++)
        DEVICE_CHECK(dev, unit_present(&m, u, false, false) && unit_present(&m, u, true, false),
                     "unit %d has views before anyone asked for it", u);

    /* A forward walks the units from the last (the input layer) down. */
    for (int u = m.nunits - 1; u >= 0; u--) {
        const ptdp_param *p = first_of(&m, u);
        DEVICE_TRY(ptdp_model_unit(dev, &m, p, PTDP_UNIT_FORWARD_BEGIN));
        for (int v = 0; v < m.nunits; v++)
            DEVICE_CHECK(dev, unit_present(&m, v, false, v == u),
                         "forward of unit %d: unit %d's parameters are %s", u, v, v == u ? "missing" : "present");
        if (a->overlap && u > 0)
            DEVICE_CHECK(dev, z.units[u - 1].gathered != NULL && z.units[u - 1].prefetched,
                         "--overlap: unit %d's gather did not start during unit %d", u - 1, u);
        for (int i = 0; i < m.nparams; i++)
            if (m.params[i].unit == u)
                DEVICE_CHECK(dev, memcmp(m.params[i].w.data, init + m.params[i].offset,
                                         ptdp_tensor_numel(m.params[i].w) * sizeof(ptdp_real)) == 0,
                             "%s is not the gathered initial value", m.params[i].name);
        /* nested: a second BEGIN gathers nothing, the first END keeps it */
        DEVICE_TRY(ptdp_model_unit(dev, &m, p, PTDP_UNIT_FORWARD_BEGIN));
        DEVICE_TRY(ptdp_model_unit(dev, &m, p, PTDP_UNIT_FORWARD_END));
        DEVICE_CHECK(dev, unit_present(&m, u, false, true), "unit %d freed at its first of two ENDs", u);
        DEVICE_TRY(ptdp_model_unit(dev, &m, p, PTDP_UNIT_FORWARD_END));
        DEVICE_CHECK(dev, unit_present(&m, u, false, false), "unit %d outlived its forward", u);
        DEVICE_CHECK(dev, z.units[u].w == NULL && z.units[u].gathered == NULL,
                     "unit %d's gathered buffer outlived its forward", u);
    }

    /* Two micro-batches' backwards, each from the first unit up; each
     * writes (rank + 1) (i + 1) into element i of the flat gradient. */
    for (int step = 0; step < 2 * m.nunits; step++) {
        const int u = step % m.nunits;
        const ptdp_param *p = first_of(&m, u);
        DEVICE_TRY(ptdp_model_unit(dev, &m, p, PTDP_UNIT_BACKWARD_BEGIN));
        DEVICE_CHECK(dev, unit_present(&m, u, false, true) && unit_present(&m, u, true, true),
                     "backward of unit %d without its parameters or gradient", u);
        for (int i = 0; i < m.nparams; i++) {
            ptdp_param *q = &m.params[i];
            if (q->unit != u)
                continue;
            for (size_t j = 0; j < ptdp_tensor_numel(q->g); j++) {
                DEVICE_CHECK(dev, q->g.data[j] == 0, "%s: the unit's gradient buffer is not zeroed", q->name);
                q->g.data[j] += (ptdp_real)((dev->rank + 1) * (double)(q->offset + j + 1));
            }
        }
        DEVICE_TRY(ptdp_model_unit(dev, &m, p, PTDP_UNIT_BACKWARD_END));
        DEVICE_CHECK(dev, unit_present(&m, u, false, false) && unit_present(&m, u, true, false),
                     "unit %d outlived its backward", u);
    }
    void *gv = NULL;
    DEVICE_TRY(ptdp_zero_reduce_gradients(&z, &m, &gv));
    const ptdp_real *g = gv;   /* a float store */
    for (int r = 0; r < z.nranges; r++)
        for (size_t e = z.ranges[r].begin; e < z.ranges[r].end; e++)
            DEVICE_CHECK(dev, g[z.ranges[r].at + e - z.ranges[r].begin] == (ptdp_real)(6.0 * (double)(e + 1)),
                         "element %zu of the shard is not the sum over ranks and micro-batches", e);
    /* the ranges tile my shard of every unit, and my shard is the parameters' */
    const ptdp_real *w = ptdp_zero_param_shard(&z, &m);
    for (int r = 0; r < z.nranges; r++)
        DEVICE_CHECK(dev, memcmp(w + z.ranges[r].at, init + z.ranges[r].begin,
                                 (z.ranges[r].end - z.ranges[r].begin) * sizeof(ptdp_real)) == 0,
                     "piece %d of the parameter shard is not the initial model's", r);
    free(init);
    ptdp_zero_free(dev, &z, &m);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return 0;
}

LOOP_TEST(units_tests, test_units_exist_only_while_used, 2)
{
    units_arg a = { .overlap = _i == 1 };
    harness_launch_ok(2, units_device, &a, NULL, NULL);
}
END_TEST

TEST(units_tests, test_validate_stage3)
{
    char msg[256];
    ptdp_train_config c = equiv_config(1, 2, 1, 1);
    c.zero = 3;
    ASSERT_HAS(equiv_refused(&c, "--zero 3"), "changes nothing");
    c.dp = 2;
    ck_assert_int_eq(ptdp_train_validate(&c, msg, sizeof msg), 0);
    c.schedule = ptdp_schedule_find("zb-h1");
    c.pp = 2;
    c.micro_batches = 2;
    equiv_refused(&c, "zb-h1");
}
END_TEST

/* ------------------------------------------------------------- the bytes */

/* Summed over the devices: bytes sent by reduce-scatters and all-gathers,
 * and by all-reduces. */
static void coll_bytes(const ptdp_launch_result *lr, double *rs_ag, double *ar)
{
    *rs_ag = *ar = 0;
    for (int r = 0; r < lr->world_size; r++) {
        const ptdp_comm_stats *s = &lr->devices[r].comm;
        *rs_ag += s->bytes_sent[PTDP_COLL_REDUCE_SCATTER] + s->bytes_sent[PTDP_COLL_ALL_GATHER];
        *ar += s->bytes_sent[PTDP_COLL_ALL_REDUCE];
    }
}

LOOP_TEST(bytes_tests, test_bytes_three_psi_against_two, 3)
{
    /* _i: M = 1; M = 2; M = 2 with full recomputation (each block's forward
     * again inside its backward's gather: no gather more) */
    const int N = 4, steps = 2, M = _i == 0 ? 1 : 2;
    const bool recompute = _i == 2;
    ptdp_train_config c = equiv_config(N, 1, 1, M);
    c.steps = steps;
    c.recompute = recompute;
    const size_t P = model_size_stage(&c, 0);
    const double S = (double)P * sizeof(ptdp_real);
    ptdp_launch_result lr;
    ptdp_train_result res;
    double rs_ag, ar;

    equiv_train(&c, &(ptdp_launch_opts){ .result = &lr }, NULL, &res);   /* plain DP */
    coll_bytes(&lr, &rs_ag, &ar);
    const double plain = steps * 2.0 * (N - 1) * S;
    ck_assert_msg(ar == plain && rs_ag == 0, "plain DP: all-reduce %.0f bytes, want 2(N-1) S x steps = %.0f", ar,
                  plain);
    ptdp_launch_result_free(&lr);
    ptdp_train_result_free(&res);

    c.zero = 3;
    equiv_train(&c, &(ptdp_launch_opts){ .result = &lr }, NULL, &res);
    coll_bytes(&lr, &rs_ag, &ar);
    const double passes = 3.0 * M;
    const double want = steps * passes * (N - 1) * S;
    ck_assert_msg(rs_ag == want, "zero 3, M %d%s: reduce-scatter + all-gather %.0f bytes, want 3M(N-1) S x steps = %.0f",
                  M, recompute ? ", recompute" : "", rs_ag, want);
    /* the one all-reduce left: the norm's partial sums, one double */
    ck_assert_msg(ar == steps * 2.0 * (N - 1) * sizeof(double), "zero 3: all-reduce %.0f bytes", ar);
    if (M == 1 && !recompute)   /* the ZeRO paper's 3 psi against 2 psi */
        ck_assert(2 * rs_ag == 3 * plain);
    /* and the DP group's mean per device is the printed formula */
    double dp_sent = 0;
    for (int r = 0; r < N; r++) {
        int g = harness_group_index(&lr.devices[r].comm, "dp");
        ck_assert_int_ge(g, 0);
        dp_sent += lr.devices[r].comm.group[g].sent;
    }
    double formula = ptdp_zero3_dp_bytes_per_step(P, N, M, recompute);
    ck_assert(formula == passes * (N - 1) / N * S);
    ck_assert_msg(fabs(dp_sent / N / steps - 2.0 * (N - 1) / N * sizeof(double) - formula) <= 1e-9 * formula,
                  "DP bytes per device and step %g, formula %g", dp_sent / N / steps, formula);
    ck_assert(ptdp_zero_dp_bytes_per_step(3, P, N, M) == formula);
    ptdp_launch_result_free(&lr);
    ptdp_train_result_free(&res);
}
END_TEST

/* ------------------------------------------------------------ the memory */

/* Each device's units, from its model's parameters (as zero3.c cuts them:
 * a unit runs from its first parameter's offset to its last one's end). */
enum { MAX_DEVICES = 8, MAX_UNITS = 16 };
typedef struct {
    const ptdp_train_config *c;
    int nunits[MAX_DEVICES];
    size_t unit[MAX_DEVICES][MAX_UNITS];
    size_t numel[MAX_DEVICES];
} units_of_arg;

static int units_of_device(ptdp_device *dev, void *arg)
{
    units_of_arg *a = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    DEVICE_TRY(ptdp_mesh_init(dev, a->c->dp, a->c->tp, a->c->pp, &mesh));
    DEVICE_TRY(ptdp_model_init(dev, &m, &a->c->model, &mesh, a->c->stage_layers, a->c->seed, 0.0));
    DEVICE_CHECK(dev, m.nunits <= MAX_UNITS, "%d units", m.nunits);
    size_t sum = 0;
    for (int u = 0; u < m.nunits; u++) {
        size_t n = 0;
        for (int i = 0; i < m.nparams; i++)
            if (m.params[i].unit == u)
                n += ptdp_tensor_numel(m.params[i].w);
        a->unit[dev->rank][u] = n;
        sum += n;
    }
    DEVICE_CHECK(dev, sum == m.numel, "the units hold %zu of %zu elements", sum, m.numel);
    a->nunits[dev->rank] = m.nunits;
    a->numel[dev->rank] = m.numel;
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return 0;
}

LOOP_TEST(memory_tests, test_memory_is_the_shard_and_the_units_in_use, 6)
{
    /* dp 2 and dp 3 (shards of unequal length), tp 2, pp 2 uneven; without and with --overlap */
    static const int shapes[][3] = { { 2, 1, 1 }, { 3, 2, 1 }, { 2, 1, 2 } };
    static const int uneven[] = { 3, 1 };
    const int *s = shapes[_i / 2];
    const bool overlap = _i % 2 == 1;
    ptdp_train_config c = equiv_config(s[0], s[1], s[2], 2);
    c.zero = 3;
    c.steps = 2;
    c.overlap = overlap;
    if (c.pp == 2)
        c.stage_layers = uneven;
    units_of_arg ua = { .c = &c };
    harness_launch_ok(c.dp * c.tp * c.pp, units_of_device, &ua, NULL, NULL);
    ptdp_launch_result lr;
    ptdp_train_result res;
    equiv_train(&c, &(ptdp_launch_opts){ .result = &lr }, NULL, &res);

    const size_t R = sizeof(ptdp_real);
    for (int r = 0; r < lr.world_size; r++) {
        int d, t, p;
        ptdp_mesh_coords(c.dp, c.tp, c.pp, r, &d, &t, &p);
        const size_t P = model_size_stage(&c, p);
        ck_assert_msg(ua.numel[r] == P, "device %d: the model has %zu elements, model_size.h %zu", r, ua.numel[r], P);
        /* my shard: my part of every unit; the two largest units */
        size_t len = 0, big = 0, second = 0;
        for (int u = 0; u < ua.nunits[r]; u++) {
            size_t off, n, size = ua.unit[r][u];
            ptdp_share(size, c.dp, d, &off, &n);
            len += n;
            if (size > big) {
                second = big;
                big = size;
            } else if (size > second) {
                second = size;
            }
        }
        /* 1/N of the stage, within one element per unit */
        ck_assert_msg(fabs((double)len - (double)P / c.dp) <= ua.nunits[r],
                      "device %d: shard of %zu elements, P/N = %g", r, len, (double)P / c.dp);
        ck_assert(len < P);
        const ptdp_mem_stats *m = &lr.devices[r].mem;
        const size_t params = m->peak[PTDP_MEM_PARAMS], grads = m->peak[PTDP_MEM_GRADS];
        ck_assert_msg(m->peak[PTDP_MEM_OPTIM] == 2 * len * R, "device %d: optim %zu, want 2 x %zu elements", r,
                      m->peak[PTDP_MEM_OPTIM], len);
        if (!overlap) {   /* one unit at a time, the largest at the peak */
            ck_assert_msg(params == (len + big) * R, "device %d: params peak %zu, want shard %zu + unit %zu elements",
                          r, params / R, len, big);
            ck_assert_msg(grads == (len + big) * R, "device %d: grads peak %zu, want shard %zu + unit %zu elements",
                          r, grads / R, len, big);
        } else {          /* the prefetched next unit too, never more */
            ck_assert_msg(params > (len + big) * R && params <= (len + big + second) * R,
                          "device %d: params peak %zu with prefetch, want in (%zu, %zu]", r, params / R, len + big,
                          len + big + second);
            ck_assert_msg(grads >= (len + big) * R && grads <= (len + big + second) * R,
                          "device %d: grads peak %zu with overlap, want in [%zu, %zu]", r, grads / R, len + big,
                          len + big + second);
        }
        ck_assert_msg(m->peak[PTDP_MEM_COMM] == 0, "device %d: comm %zu", r, m->peak[PTDP_MEM_COMM]);
    }
    ptdp_launch_result_free(&lr);
    ptdp_train_result_free(&res);
}
END_TEST

TEST(memory_tests, test_model_states_formula)
{
    const double psi = 7.5e9, N = 64;   /* the ZeRO paper's figure 1 */
    /* float AdamW: 4 + 4 + 8 bytes a parameter */
    ptdp_zero_bytes b[4];
    for (int s = 0; s < 4; s++)
        b[s] = ptdp_zero_state_bytes(s, psi, (int)N, 4, 4, 8);
    ck_assert(b[0].params == 4 * psi && b[0].grads == 4 * psi && b[0].optim == 8 * psi);
    ck_assert(b[1].params == 4 * psi && b[1].grads == 4 * psi && b[1].optim == 8 * psi / N);
    ck_assert(b[2].params == 4 * psi && b[2].grads == 4 * psi / N && b[2].optim == 8 * psi / N);
    ck_assert(b[3].params == 4 * psi / N && b[3].grads == 4 * psi / N && b[3].optim == 8 * psi / N);
    /* bf16 mixed precision, 2 + 2 + 12: 16 psi, 4 psi + 12 psi/N, 2 psi + 14 psi/N, 16 psi/N */
    static const double whole[4] = { 16, 4, 2, 0 }, per_n[4] = { 0, 12, 14, 16 };
    for (int s = 0; s < 4; s++) {
        ptdp_zero_bytes x = ptdp_zero_state_bytes(s, psi, (int)N, 2, 2, 12);
        double total = x.params + x.grads + x.optim, want = whole[s] * psi + per_n[s] * psi / N;
        ASSERT_CLOSE(total, want, 1e-12 * want);
    }
    /* the paper's figure 1, 7.5B parameters on 64 GPUs: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB */
    static const double gb[4] = { 120, 31.40625, 16.640625, 1.875 };
    for (int s = 0; s < 4; s++) {
        ptdp_zero_bytes x = ptdp_zero_state_bytes(s, psi, 64, 2, 2, 12);
        ASSERT_CLOSE((x.params + x.grads + x.optim) / 1e9, gb[s], 1e-9);
    }
    /* one rank: nothing to divide */
    ptdp_zero_bytes one = ptdp_zero_state_bytes(3, psi, 1, 2, 2, 12);
    ck_assert(one.params == 2 * psi && one.grads == 2 * psi && one.optim == 12 * psi);
}
END_TEST

/* ------------------------------------------------------------ --overlap */

static ptdp_train_config overlap_config(bool overlap)
{
    ptdp_train_config c = equiv_overlap_config(2, 1, 1, overlap);
    c.zero = 3;
    return c;
}

/* The run's virtual time: its steps' makespans added. */
static double run_virtual(const ptdp_train_result *r)
{
    double s = 0;
    for (int i = 0; i < r->completed; i++)
        s += r->log[i].virtual_s;
    return s;
}

TEST(overlap_tests, test_overlap_shorter_and_hidden)
{
    ptdp_train_config plain = overlap_config(false), ov = overlap_config(true);
    ptdp_launch_result l0, l1;
    ptdp_launch_opts o0 = { .profile = ptdp_profile_find("dgx-a100"), .result = &l0 };
    ptdp_launch_opts o1 = { .profile = ptdp_profile_find("dgx-a100"), .result = &l1 };
    ptdp_train_result r0, r1;
    equiv_train(&plain, &o0, NULL, &r0);
    equiv_train(&ov, &o1, NULL, &r1);
    double t0 = run_virtual(&r0), t1 = run_virtual(&r1);
    for (int d = 0; d < l1.world_size; d++) {
        ck_assert_msg(l0.devices[d].clock.stream_s == 0, "without --overlap nothing runs on the stream");
        ck_assert_msg(l1.devices[d].clock.hidden_s > 0 && l1.devices[d].clock.hidden_s <= l1.devices[d].clock.stream_s,
                      "device %d hid %g of %g", d, l1.devices[d].clock.hidden_s, l1.devices[d].clock.stream_s);
    }
    ck_assert_msg(t1 < t0, "zero 3 --overlap %g s, without %g s: no shorter", t1, t0);
    ptdp_train_result_free(&r0);
    ptdp_train_result_free(&r1);
    ptdp_launch_result_free(&l0);
    ptdp_launch_result_free(&l1);
}
END_TEST

/* One trace event (harness.h). */
typedef harness_trace_event event;

static int by_start(const void *x, const void *y)
{
    const event *a = x, *b = y;
    return a->ts < b->ts ? -1 : a->ts > b->ts;
}

/* A unit's use on the compute track: its consecutive "<layer> fwd" or
 * "<layer> bwd" events ("in", "block 2", "out"). */
typedef struct { char key[64]; double start, end; } use;

enum { MAX_EVENTS = 256 };

/* Device 0 of dp 2, one stage, one micro-batch, two steps: each unit is
 * used twice a step (forward, backward), and each use has its own gather,
 * in the same order.  Every gather starts no later than its unit's compute.
 *
 * Without --overlap all of them lie on the compute track, each after the
 * previous unit is done.  Under --overlap every use but the first of each
 * pass is prefetched: its gather lies on the communication track (tid
 * 1000) and was started when the previous unit's compute began, so it
 * starts then — or, the stream serialising (clock.h), when the stream's
 * previous collective ends.  In a forward nothing else is on the stream:
 * the prefetch starts before the previous unit's compute ends.  In a
 * backward the previous unit's reduce-scatter was started first, at that
 * unit's BACKWARD_END, and the prefetch queues behind it. */
LOOP_TEST(overlap_tests, test_trace_gathers_before_their_units, 2)
{
    const bool overlap = _i == 1;
    char path[] = "/tmp/ptdp-zero3-trace-XXXXXX";
    harness_temp_file(path);
    ptdp_train_config c = overlap_config(overlap);
    ptdp_launch_opts o = { .profile = ptdp_profile_find("dgx-a100"), .trace_path = path };
    equiv_train(&c, &o, NULL, NULL);

    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    static event gathers[MAX_EVENTS], stream[MAX_EVENTS];
    static use uses[MAX_EVENTS];
    int ng = 0, ns = 0, nu = 0;
    char line[1024];
    while (fgets(line, sizeof line, f) != NULL) {
        event e;
        if (!harness_parse_trace_event(line, &e) || e.pid != 0 || (e.tid != 0 && e.tid != 1000))   /* device 0's two tracks */
            continue;
        if (e.tid == 1000) {
            ck_assert_int_lt(ns, MAX_EVENTS);
            stream[ns++] = e;
        }
        if (strcmp(e.name, "all_gather dp") == 0) {
            ck_assert_int_lt(ng, MAX_EVENTS);
            gathers[ng++] = e;
            continue;
        }
        size_t n = strlen(e.name);
        if (e.tid != 0 || n < 4 || (strcmp(e.name + n - 4, " fwd") != 0 && strcmp(e.name + n - 4, " bwd") != 0))
            continue;
        if (nu > 0 && strcmp(uses[nu - 1].key, e.name) == 0) {   /* the same unit's next event */
            uses[nu - 1].end = e.ts + e.dur;
            continue;
        }
        ck_assert_int_lt(nu, MAX_EVENTS);
        snprintf(uses[nu].key, sizeof uses[nu].key, "%s", e.name);
        uses[nu].start = e.ts;
        uses[nu].end = e.ts + e.dur;
        nu++;
    }
    fclose(f);
    unlink(path);
    qsort(gathers, (size_t)ng, sizeof gathers[0], by_start);
    qsort(stream, (size_t)ns, sizeof stream[0], by_start);

    const int units = c.model.layers + 2;
    const double us = 2e-3;   /* the trace's resolution: ns, in us */
    ck_assert_msg(nu == 2 * units * c.steps, "%d unit uses on the compute track, want %d", nu, 2 * units * c.steps);
    ck_assert_msg(ng == nu, "%d gathers for %d unit uses", ng, nu);
    int prefetched = 0, in_forward = 0;
    for (int j = 0; j < nu; j++) {
        const event *g = &gathers[j];
        ck_assert_msg(g->ts <= uses[j].start + us, "gather %d starts at %g us, after %s began at %g us", j, g->ts,
                      uses[j].key, uses[j].start);
        const bool first_of_pass = j % units == 0, forward = j % (2 * units) < units;
        if (!overlap) {
            ck_assert_msg(g->tid == 0, "without --overlap, gather %d on the communication track", j);
            if (j > 0)
                ck_assert_msg(g->ts >= uses[j - 1].end - us, "gather %d for %s began before %s ended", j,
                              uses[j].key, uses[j - 1].key);
            continue;
        }
        if (first_of_pass)
            continue;
        ck_assert_msg(g->tid == 1000, "gather %d for %s not prefetched on the communication track", j, uses[j].key);
        double stream_free = 0;   /* the end of the stream's collective before it */
        for (int s = 0; s < ns && stream[s].ts < g->ts - us / 2; s++)
            stream_free = fmax(stream_free, stream[s].ts + stream[s].dur);
        double want = fmax(uses[j - 1].start, stream_free);
        ck_assert_msg(fabs(g->ts - want) <= us, "prefetch for %s starts at %g us, not when %s began (%g us) or "
                      "the stream was free (%g us)", uses[j].key, g->ts, uses[j - 1].key, uses[j - 1].start,
                      stream_free);
        if (forward) {
            ck_assert_msg(g->ts < uses[j - 1].end, "prefetch for %s starts at %g us, after %s ended at %g us",
                          uses[j].key, g->ts, uses[j - 1].key, uses[j - 1].end);
            in_forward++;
        }
        prefetched++;
    }
    if (overlap) {
        ck_assert_int_eq(prefetched, nu - 2 * c.steps);
        ck_assert_int_eq(in_forward, (units - 1) * c.steps);
    }
}
END_TEST

/* ------------------------------------------------------------ experts */

/* dp 2 split into ep 2: the expert-DP group has one member.  One of the
 * model's weights is declared an expert's (summed over PTDP_GROUP_EDP), as
 * gpt_moe.c declares its experts' weights under --ep. */
static int expert_param_device(ptdp_device *dev, void *arg)
{
    const int stage = *(const int *)arg;
    ptdp_mesh mesh;
    ptdp_model m;
    ptdp_zero z;
    int rc = ptdp_mesh_init(dev, 2, 1, 1, &mesh);
    if (rc != 0)
        return rc;
    mesh.ep = 2;
    /* every path frees what it built: the other device's refusal can stop
     * this one in any collective, before or after its own */
    if ((rc = ptdp_mesh_add_group(dev, &mesh, PTDP_GROUP_EP)) == 0 &&
        (rc = ptdp_mesh_add_group(dev, &mesh, PTDP_GROUP_EDP)) == 0 &&
        (rc = ptdp_model_init(dev, &m, &SMALL, &mesh, NULL, stage, 0.0)) == 0) {
        m.params[1].sum.replicas = PTDP_GROUP_EDP;
        rc = ptdp_zero_init(dev, &z, &m, stage);
        if (rc == 0)
            ptdp_zero_free(dev, &z, &m);
        ptdp_model_free(dev, &m);
    }
    ptdp_mesh_free(&mesh);
    return rc;
}

TEST(experts_tests, test_stage3_refuses_expert_parameters_by_name)
{
    int stage = 3;
    HARNESS_LAUNCH_FAILS(2, expert_param_device, &stage, PTDP_EINVAL, "is replicated over mesh group",
                         "or the expert-DP group's without ZeRO-3");
    for (stage = 1; stage <= 2; stage++)
        harness_launch_ok(2, expert_param_device, &stage, NULL, NULL);
}
END_TEST

int main(void)
{
    return harness_main("zero3");
}
