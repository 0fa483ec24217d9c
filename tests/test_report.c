/*
 * test_report.c — the per-run report's figures against the formulas.
 *
 * `ptdp train` prints (and --report writes) what ptdp_train's launch result
 * holds for every device: peak memory by category, bytes sent per group and
 * the virtual clock.  Each figure here is checked against the formula a
 * student would write down, for the small model (h = 16, 4 blocks), with R
 * bytes per element, B the global batch and S a device's gradient bytes:
 *
 *   params memory          model_size_stage x R        (model.h's table)
 *   DP bytes per step      2(N-1)/N x S per device     (all_reduce, the default)
 *   TP bytes per block     2 all-reduces of B x h per step: one forward (g),
 *                          one backward (f) = 2 x 2(N-1)/N x B h R
 *   PP bytes per step      B x h x R activations forward, the same in
 *                          gradients backward, per stage boundary
 *   virtual time           compute + comm + idle = the device's clock
 */
#include <math.h>
#include <string.h>

#include "equivalence/equiv.h"
#include "model_size.h"
#include "ptdp/mesh.h"
#include "ptdp/launch.h"

static const harness_tcase report_tests = { .name = "report", .timeout_s = 60 };

static const double R = sizeof(ptdp_real);

typedef struct {
    ptdp_launch_result lr;
    ptdp_train_result res;
} run_out;

static void run(const ptdp_train_config *cfg, run_out *out)
{
    memset(out, 0, sizeof *out);
    equiv_train(cfg, &(ptdp_launch_opts){ .result = &out->lr }, NULL, &out->res);
}

static void run_free(run_out *out)
{
    ptdp_launch_result_free(&out->lr);
    ptdp_train_result_free(&out->res);
}

/* Bytes device r sent in the group `name`. */
static double sent_in(const run_out *o, int r, const char *name)
{
    const ptdp_comm_stats *s = &o->lr.devices[r].comm;
    int g = harness_group_index(s, name);
    return g < 0 ? 0 : s->group[g].sent;
}

TEST(report_tests, test_params_memory)
{
    static const int layers[] = { 3, 1 };
    ptdp_train_config c = equiv_config(2, 2, 2, 2);
    c.stage_layers = layers;
    c.steps = 1;
    run_out o;
    run(&c, &o);
    for (int r = 0; r < o.lr.world_size; r++) {
        int d, t, p;
        ptdp_mesh_coords(c.dp, c.tp, c.pp, r, &d, &t, &p);
        ck_assert_msg(o.lr.devices[r].mem.peak[PTDP_MEM_PARAMS] == model_size_stage(&c, p) * sizeof(ptdp_real),
                      "device %d (stage %d): params %zu bytes, want %zu elements", r, p,
                      o.lr.devices[r].mem.peak[PTDP_MEM_PARAMS], model_size_stage(&c, p));
        /* without ZeRO the gradients mirror the parameters */
        ck_assert(o.lr.devices[r].mem.peak[PTDP_MEM_GRADS] == o.lr.devices[r].mem.peak[PTDP_MEM_PARAMS]);
    }
    run_free(&o);
}
END_TEST

TEST(report_tests, test_dp_bytes_per_step)
{
    const int N = 4, steps = 3;
    ptdp_train_config c = equiv_config(N, 1, 1, 2);
    c.steps = steps;
    run_out o;
    run(&c, &o);
    double S = (double)model_size_stage(&c, 0) * R, sum = 0;
    for (int r = 0; r < N; r++) {
        sum += sent_in(&o, r, "dp");
        ck_assert(sent_in(&o, r, "tp") == 0 && sent_in(&o, r, "pp") == 0);
    }
    /* the mean device, per step: 2(N-1)/N S — whatever the bucket sizes */
    ck_assert_msg(sum / N / steps == 2.0 * (N - 1) / N * S, "DP sent %.1f bytes per device and step, formula %.1f",
                  sum / N / steps, 2.0 * (N - 1) / N * S);
    run_free(&o);
}
END_TEST

/* TP bytes of one device per step, for L blocks. */
static double tp_bytes(int layers, int tp, double *group_sum)
{
    ptdp_train_config c = equiv_config(1, tp, 1, 2);
    c.model.layers = layers;
    c.steps = 2;
    run_out o;
    run(&c, &o);
    double one = sent_in(&o, 0, "tp") / c.steps;
    *group_sum = 0;
    for (int r = 0; r < tp; r++)
        *group_sum += sent_in(&o, r, "tp") / c.steps;
    run_free(&o);
    return one;
}

TEST(report_tests, test_tp_bytes_per_block)
{
    ptdp_train_config c = equiv_config(1, 2, 1, 2);
    double B = c.batch, h = c.model.hidden;
    for (int N = 2; N <= 4; N *= 2) {
        double sum2, sum4;
        double two = tp_bytes(2, N, &sum2), four = tp_bytes(4, N, &sum4);
        double per_block = 2 * 2.0 * (N - 1) / N * B * h * R;   /* g forward + f backward */
        if (N == 2)   /* equal halves: every device sends exactly the formula */
            ck_assert_msg(four - two == 2 * per_block, "tp %d: two more blocks cost %.1f bytes, formula %.1f", N,
                          four - two, 2 * per_block);
        ck_assert(fabs((sum4 - sum2) / N - 2 * per_block) <= 1e-9 * per_block);
        /* and the whole step: (2L + 1) all-reduces of B x h (the output
         * layer's f backward too), 3 of B doubles (vocab-parallel softmax:
         * max, sum of exponentials, the label's logit), 1 double (the norm) */
        double step4 = 2.0 * (N - 1) * ((2 * 4 + 1) * B * h * R + 3 * B * 8 + 8);
        ck_assert_msg(fabs(sum4 - step4) <= 1e-9 * step4, "tp %d: group sent %.1f bytes per step, formula %.1f",
                      N, sum4, step4);
    }
}
END_TEST

TEST(report_tests, test_pp_bytes_per_step)
{
    for (int P = 2; P <= 4; P += 2) {
        ptdp_train_config c = equiv_config(1, 1, P, 4);
        c.steps = 2;
        run_out o;
        run(&c, &o);
        double B = c.batch, h = c.model.hidden, norm_sum = 2.0 * (P - 1) * 8, sum = 0;
        for (int s = 0; s < P; s++) {
            double sent = sent_in(&o, s, "pp") / c.steps;
            /* activations forward unless last, gradients backward unless first */
            double boundary = (s < P - 1 ? 1 : 0) + (s > 0 ? 1 : 0);
            double want = boundary * B * h * R;
            ck_assert_msg(sent - want >= 0 && sent - want <= 8.0 * (P - 1),
                          "pp %d stage %d: sent %.1f bytes per step, want %.1f + its share of the norm", P, s, sent, want);
            sum += sent;
        }
        ck_assert(fabs(sum - (2.0 * (P - 1) * B * h * R + norm_sum)) <= 1e-9 * sum);
        run_free(&o);
    }
}
END_TEST

TEST(report_tests, test_virtual_time_adds_up)
{
    ptdp_train_config c = equiv_config(2, 2, 2, 4);
    c.steps = 3;
    run_out o;
    run(&c, &o);
    double latest = 0, makespans = 0, step_bytes = 0, device_bytes = 0;
    for (int r = 0; r < o.lr.world_size; r++) {
        const ptdp_clock *k = &o.lr.devices[r].clock;
        ck_assert(k->compute_s > 0 && k->comm_s > 0 && k->idle_s >= 0);
        ck_assert_msg(fabs(k->compute_s + k->comm_s + k->idle_s - k->now) <= 1e-12 * k->now + 1e-15,
                      "device %d: compute %g + comm %g + idle %g != clock %g", r, k->compute_s, k->comm_s, k->idle_s, k->now);
        latest = fmax(latest, k->now);
        device_bytes += o.lr.devices[r].comm.total_sent;
    }
    for (int s = 0; s < c.steps; s++) {
        makespans += o.res.log[s].virtual_s;
        step_bytes += o.res.log[s].bytes;
    }
    ck_assert(makespans > 0 && makespans <= latest * (1 + 1e-12));
    ck_assert(step_bytes == device_bytes);   /* set-up sends nothing */
    run_free(&o);
}
END_TEST

int main(void)
{
    return harness_main("report");
}
