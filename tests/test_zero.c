/*
 * test_zero.c — ZeRO stages 1 and 2: the pieces, the memory, the bytes,
 * the numbers and the checkpoints.
 *
 *   pieces      chunks tile the flat buffer; the norm's ranges count every
 *               element of the whole model exactly once (TP-replicated
 *               parameters on tp rank 0 only); stage 2 accumulates
 *               reduce-scattered micro-batches into the shard
 *   memory      arena peaks per category, exactly: optimizer state 2 len_r
 *               (len_r from ptdp_chunk), stage 2 gradients len_r, its
 *               bucket (comm) the full buffer
 *   bytes       summed over the DP group, per step: plain DP's all-reduce =
 *               2(N-1) S = ZeRO-1's reduce-scatter + all-gather = ZeRO-2's
 *               with M = 1; ZeRO-2 with M micro-batches (M+1)(N-1) S
 *   numbers     both stages equal the baseline (clipping and SGD momentum,
 *               so a wrong norm or a wrong shard shows), with the same
 *               gradient norm every step; replicas stay bit-identical
 *   checkpoints full tensors: a zero-1 checkpoint holds the optimizer state
 *               of zero 0, and loads into zero 0 / zero 2 and back
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "equivalence/equiv.h"
#include "model_size.h"
#include "ptdp/device.h"
#include "ptdp/mesh.h"
#include "ptdp/model.h"
#include "ptdp/models.h"
#include "ptdp/zero.h"
#include "ptdp/launch.h"
#include "ptdp/comm.h"

/* Run cfg and keep the launch result (per-device memory, bytes, clocks). */
static void run_with_result(const ptdp_train_config *cfg, ptdp_launch_result *lr, ptdp_train_result *res)
{
    char msg[PTDP_MSG_MAX];
    ptdp_launch_opts o = equiv_opts();
    memset(lr, 0, sizeof *lr);
    o.result = lr;
    int rc = ptdp_train(cfg, &o, NULL, NULL, res, msg, sizeof msg);
    ck_assert_msg(rc == 0, "dp=%d tp=%d pp=%d zero=%d: %s", cfg->dp, cfg->tp, cfg->pp, cfg->zero, msg);
}

/* ------------------------------------------------------------ the pieces */

typedef struct {
    int dp, tp, pp;
    double counted;          /* all-reduced over the world: elements the norm counts */
    int bad_rank;            /* a device whose ranges broke a rule, or -1 */
    char why[256];
} pieces_arg;

static const ptdp_model_config SMALL = { .d_in = 5, .hidden = 6, .ffn = 8, .layers = 3, .classes = 4 };

static int pieces_device(ptdp_device *dev, void *arg)
{
    pieces_arg *a = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    ptdp_zero z;
    int rc = ptdp_mesh_init(dev, a->dp, a->tp, a->pp, &mesh);
    if (rc == 0)
        rc = ptdp_model_init(dev, &m, &SMALL, &mesh, NULL, 3, 0.0);
    if (rc == 0)
        rc = ptdp_zero_init(dev, &z, &m, 1);
    if (rc != 0)
        return rc;
    size_t off, len;
    ptdp_chunk(m.numel, a->dp, mesh.dp_rank, &off, &len);
    double mine = 0;
    const char *why = NULL;
    if (z.off != off || z.len != len)
        why = "the chunk is not ptdp_chunk(numel, dp, dp rank)";
    for (int r = 0; r < z.nnorm && why == NULL; r++) {
        if (z.norm[r].begin >= z.norm[r].end)
            why = "an empty range";
        else if (z.norm[r].begin < z.off || z.norm[r].end > z.off + z.len)
            why = "a range outside the chunk";
        else if (r > 0 && z.norm[r].begin <= z.norm[r - 1].end)
            why = "ranges not sorted, disjoint and merged";
        mine += (double)(z.norm[r].end - z.norm[r].begin);
    }
    if (why != NULL) {
        a->bad_rank = dev->rank;
        snprintf(a->why, sizeof a->why, "%s", why);
    }
    rc = ptdp_all_reduce(dev->world, &mine, &mine, 1, PTDP_F64, PTDP_SUM);
    if (dev->rank == 0)
        a->counted = mine;
    ptdp_zero_free(dev, &z, &m);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return rc;
}

START_TEST(test_norm_ranges_count_every_element_once)
{
    /* dp 3 cuts chunks through parameters; tp 2 replicates in.* and fc2.bias */
    static const int shapes[][3] = { { 3, 1, 1 }, { 3, 2, 1 }, { 2, 2, 3 }, { 5, 1, 2 }, { 1, 4, 1 } };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        pieces_arg a = { .dp = shapes[i][0], .tp = shapes[i][1], .pp = shapes[i][2], .bad_rank = -1 };
        ck_assert_int_eq(ptdp_launch(a.dp * a.tp * a.pp, pieces_device, &a, NULL), 0);
        ck_assert_msg(a.bad_rank < 0, "dp=%d tp=%d pp=%d, device %d: %s", a.dp, a.tp, a.pp, a.bad_rank, a.why);
        ck_assert_msg(a.counted == (double)model_size_total(&SMALL),
                      "dp=%d tp=%d pp=%d: the norm counts %.0f elements, the model has %zu", a.dp, a.tp, a.pp,
                      a.counted, model_size_total(&SMALL));
    }
}
END_TEST

/* Stage 2 by hand on dp = 2: each "backward" writes (rank + 1) * (i + 1)
 * into element i; after two of them my shard holds 2 * (1 + 2) * (i + 1). */
typedef struct { int failures; char why[256]; } bucket_arg;

static int bucket_device(ptdp_device *dev, void *arg)
{
    bucket_arg *a = arg;
    ptdp_mesh mesh;
    ptdp_model m;
    ptdp_zero z;
    int rc = ptdp_mesh_init(dev, 2, 1, 1, &mesh);
    if (rc == 0)
        rc = ptdp_model_init(dev, &m, &SMALL, &mesh, NULL, 3, 0.0);
    if (rc == 0)
        rc = ptdp_zero_init(dev, &z, &m, 2);
    if (rc != 0)
        return rc;
    const char *why = NULL;
    if (m.flat_g != NULL || m.params[0].g.data != NULL)
        why = "stage 2 kept the full gradient buffer between backwards";
    for (int mb = 0; mb < 2 && rc == 0; mb++) {
        rc = ptdp_zero_backward_begin(dev, &z, &m);
        if (rc != 0)
            break;
        if (m.flat_g == NULL || m.params[1].g.data != m.flat_g + m.params[1].offset)
            why = "the bucket is not where the gradient views point";
        for (size_t i = 0; i < m.numel; i++)
            m.flat_g[i] += (ptdp_real)((dev->rank + 1) * (double)(i + 1));
        rc = ptdp_zero_backward_end(dev, &z, &m);
        if (m.flat_g != NULL)
            why = "the bucket outlived its reduce-scatter";
    }
    ptdp_real *g = NULL;
    if (rc == 0)
        rc = ptdp_zero_reduce_gradients(&z, &m, &g);
    for (size_t k = 0; rc == 0 && k < z.len && why == NULL; k++)
        if (g[k] != (ptdp_real)(6.0 * (double)(z.off + k + 1)))
            why = "the shard is not the sum over ranks and micro-batches";
    ptdp_zero_clear_gradients(&z, &m);
    for (size_t k = 0; rc == 0 && k < z.len && why == NULL; k++)
        if (z.grad_shard[k] != 0)
            why = "clear left a gradient behind";
    if (why != NULL) {
        a->failures++;
        snprintf(a->why, sizeof a->why, "device %d: %s", dev->rank, why);
    }
    ptdp_zero_free(dev, &z, &m);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return rc;
}

START_TEST(test_stage2_accumulates_reduce_scattered_micro_batches)
{
    bucket_arg a = { 0 };
    ck_assert_int_eq(ptdp_launch(2, bucket_device, &a, NULL), 0);
    ck_assert_msg(a.failures == 0, "%s", a.why);
}
END_TEST

START_TEST(test_validate_rejects_unknown_stages)
{
    char msg[256];
    ptdp_train_config c = equiv_config(2, 1, 1, 1);
    c.zero = 3;
    ck_assert_int_eq(ptdp_train_validate(&c, msg, sizeof msg), PTDP_EINVAL);
    ck_assert_ptr_nonnull(strstr(msg, "--zero 3"));
    ck_assert_ptr_nonnull(strstr(msg, "0 (off), 1"));
    c.zero = -1;
    ck_assert_int_eq(ptdp_train_validate(&c, msg, sizeof msg), PTDP_EINVAL);
    c.zero = 2;
    ck_assert_int_eq(ptdp_train_validate(&c, msg, sizeof msg), 0);
}
END_TEST

/* ------------------------------------------------------------ the memory */

START_TEST(test_memory_per_category_is_exact)
{
    /* dp 4 (chunks may be equal) and dp 3 (they are not: the first numel % 3 are longer) */
    static const int shapes[][3] = { { 4, 1, 1 }, { 3, 1, 1 }, { 2, 2, 2 } };
    const int *s = shapes[_i / 3];
    int stage = _i % 3;
    ptdp_train_config c = equiv_config(s[0], s[1], s[2], 4);
    c.zero = stage;
    c.steps = 2;
    ptdp_launch_result lr;
    ptdp_train_result res;
    run_with_result(&c, &lr, &res);
    const size_t R = sizeof(ptdp_real);
    for (int r = 0; r < lr.world_size; r++) {
        int d, t, p;
        ptdp_mesh_coords(c.dp, c.tp, c.pp, r, &d, &t, &p);
        size_t P = model_size_stage(&c, p), off, len;
        ptdp_chunk(P, c.dp, d, &off, &len);
        const ptdp_mem_stats *m = &lr.devices[r].mem;
        size_t want_optim = 2 * (stage == 0 ? P : len) * R;
        size_t want_grads = (stage == 2 ? len : P) * R;
        size_t want_comm = stage == 2 ? P * R : 0;
        ck_assert_msg(m->peak[PTDP_MEM_PARAMS] == P * R, "zero %d device %d: params %zu, want %zu", stage, r,
                      m->peak[PTDP_MEM_PARAMS], P * R);
        ck_assert_msg(m->peak[PTDP_MEM_OPTIM] == want_optim, "zero %d device %d: optim %zu, want 2 x %zu elements",
                      stage, r, m->peak[PTDP_MEM_OPTIM], want_optim / R / 2);
        ck_assert_msg(m->peak[PTDP_MEM_GRADS] == want_grads, "zero %d device %d: grads %zu, want %zu", stage, r,
                      m->peak[PTDP_MEM_GRADS], want_grads);
        ck_assert_msg(m->peak[PTDP_MEM_COMM] == want_comm, "zero %d device %d: comm %zu, want %zu", stage, r,
                      m->peak[PTDP_MEM_COMM], want_comm);
        if (stage > 0 && c.dp > 1)   /* the point: a strict saving, about 1/dp */
            ck_assert(len < P && len * c.dp >= P && (len - 1) * c.dp < P);
    }
    ptdp_launch_result_free(&lr);
    ptdp_train_result_free(&res);
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

START_TEST(test_bytes_zero1_equal_plain_dp_and_zero2_pays_per_micro_batch)
{
    const int N = 4, steps = 3;
    ptdp_train_config c = equiv_config(N, 1, 1, 1);
    c.steps = steps;
    double S = (double)model_size_stage(&c, 0) * sizeof(ptdp_real);
    double want = steps * 2.0 * (N - 1) * S;   /* summed over the N devices */
    ptdp_launch_result lr;
    ptdp_train_result res;
    double rs_ag, ar;

    run_with_result(&c, &lr, &res);            /* plain DP: all-reduce only */
    coll_bytes(&lr, &rs_ag, &ar);
    ck_assert_msg(ar == want && rs_ag == 0, "plain DP: all-reduce %.0f bytes, want 2(N-1) S x steps = %.0f", ar, want);
    ptdp_launch_result_free(&lr);
    ptdp_train_result_free(&res);

    for (int stage = 1; stage <= 2; stage++) {
        for (int M = 1; M <= 4; M *= 4) {
            c.zero = stage;
            c.micro_batches = M;
            run_with_result(&c, &lr, &res);
            coll_bytes(&lr, &rs_ag, &ar);
            double expect = stage == 2 ? steps * (double)(M + 1) * (N - 1) * S : want;
            ck_assert_msg(rs_ag == expect, "zero %d, M %d: reduce-scatter + all-gather %.0f bytes, want %.0f",
                          stage, M, rs_ag, expect);
            /* the one all-reduce left: the norm's partial sums, one double */
            ck_assert_msg(ar == steps * 2.0 * (N - 1) * sizeof(double), "zero %d: all-reduce %.0f bytes", stage, ar);
            /* and the DP group's mean per device is the helper's formula */
            double dp_sent = 0;
            for (int r = 0; r < N; r++)
                for (int g = 0; g < lr.devices[r].comm.ngroups; g++)
                    if (strcmp(lr.devices[r].comm.group[g].name, "dp") == 0)
                        dp_sent += lr.devices[r].comm.group[g].sent;
            double formula = ptdp_zero_dp_bytes_per_step(stage, model_size_stage(&c, 0), N, M);
            ck_assert(fabs(dp_sent / N / steps - 2.0 * (N - 1) / N * sizeof(double) - formula) <= 1e-9 * formula);
            ptdp_launch_result_free(&lr);
            ptdp_train_result_free(&res);
        }
    }
    /* the trade, printed as the CLI prints it */
    ck_assert(ptdp_zero_dp_bytes_per_step(2, 1000, 4, 4) == 2.5 * ptdp_zero_dp_bytes_per_step(1, 1000, 4, 4));
    ck_assert(ptdp_zero_dp_bytes_per_step(2, 1000, 4, 1) == ptdp_zero_dp_bytes_per_step(0, 1000, 4, 1));
}
END_TEST

/* ----------------------------------------------------------- the numbers */

/* cfg against its baseline: losses, gradient norms and parameters. */
static void zero_matches_baseline(const ptdp_train_config *cfg)
{
    ptdp_train_config b = *cfg;
    b.dp = b.tp = b.pp = 1;
    b.micro_batches = 1;
    b.zero = 0;
    ptdp_state fs, fb;
    ptdp_train_result rs, rb;
    equiv_run(cfg, &fs, &rs);
    equiv_run(&b, &fb, &rb);
    for (int i = 0; i < cfg->steps; i++) {
        if (cfg->clip_grad > 0)   /* clipping must act, or it tests nothing */
            ck_assert_msg(rb.log[i].grad_norm > cfg->clip_grad, "step %d: norm %g is below the clip %g", i + 1,
                          rb.log[i].grad_norm, cfg->clip_grad);
        ck_assert_msg(ptdp_check_value(rs.log[i].loss, rb.log[i].loss, PTDP_TOLERANCE),
                      "zero %d dp %d tp %d pp %d m %d: step %d loss %.15g vs %.15g", cfg->zero, cfg->dp, cfg->tp,
                      cfg->pp, cfg->micro_batches, i + 1, rs.log[i].loss, rb.log[i].loss);
        ck_assert_msg(ptdp_check_value(rs.log[i].grad_norm, rb.log[i].grad_norm, PTDP_TOLERANCE),
                      "zero %d dp %d tp %d pp %d: step %d gradient norm %.15g vs baseline %.15g", cfg->zero,
                      cfg->dp, cfg->tp, cfg->pp, i + 1, rs.log[i].grad_norm, rb.log[i].grad_norm);
    }
    ptdp_check_report rep;
    ck_assert_msg(ptdp_check_states(&fs, &fb, PTDP_TOLERANCE, &rep), "zero %d dp %d tp %d pp %d: %s differs by %g",
                  cfg->zero, cfg->dp, cfg->tp, cfg->pp, rep.worst, rep.max_abs);
    ck_assert(rb.log[0].loss != rb.log[cfg->steps - 1].loss);
    ptdp_train_result_free(&rs);
    ptdp_train_result_free(&rb);
    ptdp_state_free(&fs);
    ptdp_state_free(&fb);
}

START_TEST(test_zero_equals_baseline_with_clipping)
{
    static const int shapes[][4] = {   /* dp, tp, pp, M */
        { 2, 1, 1, 1 }, { 3, 1, 1, 4 }, { 4, 1, 1, 2 }, { 2, 2, 1, 4 }, { 2, 1, 2, 4 }, { 2, 2, 2, 2 }, { 3, 2, 1, 1 },
    };
    const int *s = shapes[_i / 2];
    ptdp_train_config c = equiv_config(s[0], s[1], s[2], s[3]);
    c.zero = 1 + _i % 2;
    /* SGD with momentum follows the clipped gradient's scale (AdamW would
     * mostly cancel it), so a norm that counted an element twice or missed
     * one changes the result; the clip is below every step's norm. */
    c.optimizer = PTDP_OPT_SGD;
    c.momentum = 0.9;
    c.weight_decay = 0.01;
    c.lr = 0.5;
    c.clip_grad = 0.05;
    c.verify_replicas = true;   /* the all-gather leaves the replicas bit-identical */
    zero_matches_baseline(&c);
}
END_TEST

START_TEST(test_zero_adamw_gpipe_and_recompute)
{
    ptdp_train_config c = equiv_config(2, 2, 2, 4);
    c.zero = 1 + _i;
    c.schedule = "gpipe";
    c.recompute = true;
    c.weight_decay = 0.1;
    zero_matches_baseline(&c);
}
END_TEST

/* ------------------------------------------------------- the checkpoints */

static void run_state(const ptdp_train_config *cfg, ptdp_state *s)
{
    ptdp_train_result r;
    equiv_run(cfg, s, &r);
    ptdp_train_result_free(&r);
}

/* Every tensor, optimizer state included, by --check's rule. */
static void states_agree(const ptdp_state *a, const ptdp_state *b, const char *what)
{
    ck_assert_int_eq(a->ntensors, b->ntensors);
    for (int i = 0; i < a->ntensors; i++) {
        size_t n = (size_t)a->t[i].rows * (size_t)a->t[i].cols;
        double max_abs = 0, max_b = 0, nonzero = 0;
        for (size_t k = 0; k < n; k++) {
            max_abs = fmax(max_abs, fabs((double)a->t[i].data[k] - (double)b->t[i].data[k]));
            max_b = fmax(max_b, fabs((double)b->t[i].data[k]));
            nonzero += b->t[i].data[k] != 0;
        }
        ck_assert_msg(max_abs <= PTDP_TOLERANCE * fmax(1.0, max_b), "%s: %s differs by %g", what, a->t[i].name, max_abs);
        if (strstr(a->t[i].name, "exp_avg_sq") != NULL)   /* v > 0 wherever a gradient was seen */
            ck_assert_msg(nonzero == (double)n, "%s: %s has zeros: a slice was not written", what, b->t[i].name);
    }
}

START_TEST(test_checkpoints_are_full_tensors_across_stages)
{
    char path[] = "/tmp/ptdp-zero-XXXXXX";
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    close(fd);
    char msg[PTDP_MSG_MAX];
    /* dp 3 x tp 2: chunks cut through parameters and through TP shards */
    ptdp_train_config c = equiv_config(3, 2, 1, 2);
    c.steps = 3;
    ptdp_state plain, z1, z2, loaded, resumed, reference;
    c.zero = 0;
    run_state(&c, &plain);
    c.zero = 1;
    run_state(&c, &z1);
    c.zero = 2;
    run_state(&c, &z2);
    states_agree(&z1, &plain, "zero-1 vs zero-0 checkpoint");
    states_agree(&z2, &plain, "zero-2 vs zero-0 checkpoint");

    /* a zero-1 checkpoint, through a file, continues as zero 0 on another
     * mesh — and a zero-0 one as zero 2 — like six steps without stopping */
    ptdp_train_config full = c;
    full.zero = 0;
    full.steps = 6;
    run_state(&full, &reference);
    ck_assert_int_eq(ptdp_state_save(&z1, path, msg, sizeof msg), 0);
    ck_assert_msg(ptdp_state_load(&loaded, path, &c.model, msg, sizeof msg) == 0, "%s", msg);
    ptdp_train_config rest = equiv_config(2, 1, 2, 2);
    rest.steps = 3;
    rest.resume = &loaded;
    run_state(&rest, &resumed);
    states_agree(&resumed, &reference, "zero 1 -> zero 0");
    ptdp_state_free(&resumed);

    rest = equiv_config(4, 2, 1, 1);
    rest.steps = 3;
    rest.zero = 2;
    rest.resume = &plain;
    run_state(&rest, &resumed);
    states_agree(&resumed, &reference, "zero 0 -> zero 2");

    unlink(path);
    ptdp_state_free(&plain);
    ptdp_state_free(&z1);
    ptdp_state_free(&z2);
    ptdp_state_free(&loaded);
    ptdp_state_free(&resumed);
    ptdp_state_free(&reference);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("zero");
    TCase *tc = tcase_create("zero");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_norm_ranges_count_every_element_once);
    tcase_add_test(tc, test_stage2_accumulates_reduce_scattered_micro_batches);
    tcase_add_test(tc, test_validate_rejects_unknown_stages);
    tcase_add_loop_test(tc, test_memory_per_category_is_exact, 0, 9);
    tcase_add_test(tc, test_bytes_zero1_equal_plain_dp_and_zero2_pays_per_micro_batch);
    tcase_add_loop_test(tc, test_zero_equals_baseline_with_clipping, 0, 14);
    tcase_add_loop_test(tc, test_zero_adamw_gpipe_and_recompute, 0, 2);
    tcase_add_test(tc, test_checkpoints_are_full_tensors_across_stages);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
