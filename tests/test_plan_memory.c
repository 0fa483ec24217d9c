/*
 * test_plan_memory.c — the planner's memory per GPU against the arena.
 *
 * For each layout: ptdp_plan_memory_of predicts the peak of the busiest
 * device; ptdp_train runs the same layout (ptdp_plan_train_config) on a
 * tiny GPT for two steps and the launch result gives every device's
 * measured peak (after set-up: train.c resets the peaks once ZeRO-2/3 or
 * bf16 have made their stores).  The prediction must be within 5% of the
 * largest measured peak, and name that device's stage.  The log prints
 * plan and measurement term by term.
 *
 * And the schedule counts the formula uses (in-flight micro-batches per
 * stage) against the schedule's own, for a grid of p, m, v.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gpt_shape.h"
#include "harness.h"
#include "plan_vs_train.h"
#include "ptdp/arena.h"
#include "ptdp/gpt.h"
#include "ptdp/mesh.h"
#include "ptdp/plan.h"
#include "ptdp/schedule.h"
#include "ptdp/train.h"
#include "ptdp/zero.h"
#include "ptdp/error.h"

typedef struct {
    const char *name;
    int layers, seq, vocab, batch;
    int dp, tp, pp, cp, b;
    const char *schedule;
    int v, zero;
    ptdp_recompute recompute;
    bool sp, bf16, overlap;
} layout_case;

static const harness_tcase plan_memory_tests = { .name = "plan_memory", .timeout_s = 120 };

static const layout_case cases[] = {
    /* name              L  T    V   B  dp tp pp cp b  schedule       v z  recompute               sp     bf16   overlap */
    { "one device",      4, 32,  64, 4, 1, 1, 1, 1, 2, "1f1b",        1, 0, PTDP_RECOMPUTE_NONE,      false, false, false },
    { "dp 2",            4, 32,  64, 8, 2, 1, 1, 1, 2, "1f1b",        1, 0, PTDP_RECOMPUTE_NONE,      false, false, false },
    { "tp 2",            4, 64, 128, 4, 1, 2, 1, 1, 2, "1f1b",        1, 0, PTDP_RECOMPUTE_NONE,      false, false, false },
    { "tp 2 sp",         4, 64, 128, 4, 1, 2, 1, 1, 2, "1f1b",        1, 0, PTDP_RECOMPUTE_NONE,      true,  false, false },
    { "pp 2 1f1b",       4, 32,  64, 8, 1, 1, 2, 1, 1, "1f1b",        1, 0, PTDP_RECOMPUTE_NONE,      false, false, false },
    { "pp 4 gpipe",      8, 32,  64, 8, 1, 1, 4, 1, 1, "gpipe",       1, 0, PTDP_RECOMPUTE_NONE,      false, false, false },
    { "pp 2 interleaved",8, 32,  64, 8, 1, 1, 2, 1, 1, "interleaved", 2, 0, PTDP_RECOMPUTE_NONE,      false, false, false },
    { "pp 2 zb-h1",      4, 32,  64, 8, 1, 1, 2, 1, 1, "zb-h1",       1, 0, PTDP_RECOMPUTE_NONE,      false, false, false },
    { "cp 2",            4, 64,  64, 4, 1, 1, 1, 2, 2, "1f1b",        1, 0, PTDP_RECOMPUTE_NONE,      false, false, false },
    { "dp 2 zero 1",     4, 32,  64, 8, 2, 1, 1, 1, 2, "1f1b",        1, 1, PTDP_RECOMPUTE_NONE,      false, false, false },
    { "dp 2 zero 2",     4, 32,  64, 8, 2, 1, 1, 1, 2, "1f1b",        1, 2, PTDP_RECOMPUTE_NONE,      false, false, false },
    { "dp 2 zero 3",     4, 32,  64, 8, 2, 1, 1, 1, 2, "1f1b",        1, 3, PTDP_RECOMPUTE_NONE,      false, false, false },
    { "zero 3 overlap",  4, 32,  64, 8, 2, 1, 1, 1, 2, "1f1b",        1, 3, PTDP_RECOMPUTE_NONE,      false, false, true  },
    { "dp 2 overlap",    4, 32,  64, 8, 2, 1, 1, 1, 2, "1f1b",        1, 0, PTDP_RECOMPUTE_NONE,      false, false, true  },
    { "selective",       4, 64,  64, 4, 1, 1, 1, 1, 4, "1f1b",        1, 0, PTDP_RECOMPUTE_SELECTIVE, false, false, false },
    { "full, pp 2",      4, 32,  64, 8, 1, 1, 2, 1, 2, "1f1b",        1, 0, PTDP_RECOMPUTE_FULL,      false, false, false },
    { "bf16",            4, 32,  64, 4, 1, 1, 1, 1, 2, "1f1b",        1, 0, PTDP_RECOMPUTE_NONE,      false, true,  false },
    { "bf16 zero 2 tp",  4, 32, 128, 8, 2, 2, 1, 1, 2, "1f1b",        1, 2, PTDP_RECOMPUTE_NONE,      false, true,  false },
    { "3d",              4, 32, 128, 8, 2, 2, 2, 1, 2, "1f1b",        1, 1, PTDP_RECOMPUTE_NONE,      true,  false, false },
    { "bf16 zero 3",     4, 32,  64, 8, 2, 1, 1, 1, 2, "1f1b",        1, 3, PTDP_RECOMPUTE_NONE,      false, true,  false },
    { "bf16 pp 2 zero 1",4, 32,  64, 8, 2, 1, 2, 1, 2, "1f1b",        1, 1, PTDP_RECOMPUTE_NONE,      false, true,  false },
    { "cp 2 tp 2",       4, 64, 128, 4, 1, 2, 1, 2, 2, "1f1b",        1, 0, PTDP_RECOMPUTE_NONE,      false, false, false },
    { "sp pp 2 full",    4, 64, 128, 8, 1, 2, 2, 1, 2, "1f1b",        1, 0, PTDP_RECOMPUTE_FULL,      true,  false, false },
    { "gpipe full",      4, 32,  64, 8, 1, 1, 2, 1, 1, "gpipe",       1, 0, PTDP_RECOMPUTE_FULL,      false, false, false },
    { "interleaved sel.",8, 64,  64, 8, 1, 1, 2, 1, 1, "interleaved", 2, 0, PTDP_RECOMPUTE_SELECTIVE, false, false, false },
    { "pp 4 zb-h1",      8, 32,  64, 8, 1, 1, 4, 1, 1, "zb-h1",       1, 0, PTDP_RECOMPUTE_NONE,      false, false, false },
    { "pp 4 tp 2 zero 2",8, 32, 128, 8, 2, 2, 4, 1, 1, "1f1b",        1, 2, PTDP_RECOMPUTE_NONE,      false, false, true  },
    { "b 4",             4, 64, 256, 8, 1, 1, 1, 1, 4, "1f1b",        1, 0, PTDP_RECOMPUTE_NONE,      false, false, false },
    /* bf16 activations (act_bf16.h): packed a block at a time, one block's float copy */
    { "bf16 tp 2 sp",    4, 64, 128, 4, 1, 2, 1, 1, 2, "1f1b",        1, 0, PTDP_RECOMPUTE_NONE,      true,  true,  false },
    { "bf16 selective",  4, 64,  64, 4, 1, 1, 1, 1, 4, "1f1b",        1, 0, PTDP_RECOMPUTE_SELECTIVE, false, true,  false },
    { "bf16 full pp 2",  4, 32,  64, 8, 1, 1, 2, 1, 2, "1f1b",        1, 0, PTDP_RECOMPUTE_FULL,      false, true,  false },
    { "bf16 pp 4 gpipe", 8, 32,  64, 8, 1, 1, 4, 1, 1, "gpipe",       1, 0, PTDP_RECOMPUTE_NONE,      false, true,  false },
    { "bf16 cp 2",       4, 64,  64, 4, 1, 1, 1, 2, 2, "1f1b",        1, 0, PTDP_RECOMPUTE_NONE,      false, true,  false },
    { "bf16 sp pp 2 full",4, 64, 128, 8, 1, 2, 2, 1, 2, "1f1b",       1, 0, PTDP_RECOMPUTE_FULL,      true,  true,  false },
    { "bf16 b 4 zero 3", 4, 64, 256, 8, 2, 1, 1, 1, 4, "1f1b",        1, 3, PTDP_RECOMPUTE_NONE,      false, true,  true  },
    { "bf16 pp 2 z3 ovl",4, 32,  64, 8, 2, 1, 2, 1, 1, "1f1b",        1, 3, PTDP_RECOMPUTE_NONE,      false, true,  true  },
    { "bf16 tp sp z3 sel",4, 64, 128, 8, 2, 2, 1, 1, 2, "1f1b",       1, 3, PTDP_RECOMPUTE_SELECTIVE, true,  true,  false },
    { "bf16 pp 4 z3 gpipe",8, 32, 64, 8, 2, 1, 4, 1, 1, "gpipe",      1, 3, PTDP_RECOMPUTE_FULL,      false, true,  true  },
    /* full recomputation block by block (each block's input kept, one redone at a time), SP's shards */
    { "full 8 blocks",   8, 32,  64, 4, 1, 1, 1, 1, 2, "1f1b",        1, 0, PTDP_RECOMPUTE_FULL,      false, false, false },
    { "bf16 full 8",     8, 32,  64, 4, 1, 1, 1, 1, 2, "1f1b",        1, 0, PTDP_RECOMPUTE_FULL,      false, true,  false },
    { "tp 4 sp",         4, 64, 128, 4, 1, 4, 1, 1, 2, "1f1b",        1, 0, PTDP_RECOMPUTE_NONE,      true,  false, false },
    { "tp 4 sp full",    8, 64, 128, 4, 1, 4, 1, 1, 2, "1f1b",        1, 0, PTDP_RECOMPUTE_FULL,      true,  false, false },
    { "sp full z3 ovl",  4, 64, 128, 8, 2, 2, 1, 1, 2, "1f1b",        1, 3, PTDP_RECOMPUTE_FULL,      true,  false, true  },
    { "bf16 sp full z3", 4, 64, 128, 8, 2, 2, 1, 1, 2, "1f1b",        1, 3, PTDP_RECOMPUTE_FULL,      true,  true,  false },
    { "full pp 4 ileav.",8, 32,  64, 8, 1, 1, 2, 1, 1, "interleaved", 2, 0, PTDP_RECOMPUTE_FULL,      false, false, false },
    /* ZeRO under context parallelism: its states are sharded over dp x cp, every copy of the parameters */
    { "cp 2 zero 1",     4, 64,  64, 4, 1, 1, 1, 2, 2, "1f1b",        1, 1, PTDP_RECOMPUTE_NONE,      false, false, false },
    { "cp 4 zero 1",     4, 64,  64, 4, 1, 1, 1, 4, 2, "1f1b",        1, 1, PTDP_RECOMPUTE_NONE,      false, false, false },
    { "cp 2 zero 2",     4, 64,  64, 4, 1, 1, 1, 2, 2, "1f1b",        1, 2, PTDP_RECOMPUTE_NONE,      false, false, false },
    { "dp 2 cp 4 zero 2",4, 64,  64, 8, 2, 1, 1, 4, 2, "1f1b",        1, 2, PTDP_RECOMPUTE_NONE,      false, false, false },
    { "cp 2 zero 3",     4, 64,  64, 4, 1, 1, 1, 2, 2, "1f1b",        1, 3, PTDP_RECOMPUTE_NONE,      false, false, false },
    { "cp 4 zero 3",     4, 64,  64, 4, 1, 1, 1, 4, 2, "1f1b",        1, 3, PTDP_RECOMPUTE_NONE,      false, false, false },
    { "bf16 cp 2 zero 1",4, 64,  64, 4, 1, 1, 1, 2, 2, "1f1b",        1, 1, PTDP_RECOMPUTE_NONE,      false, true,  false },
    { "bf16 cp 4 zero 1",4, 64,  64, 4, 1, 1, 1, 4, 2, "1f1b",        1, 1, PTDP_RECOMPUTE_NONE,      false, true,  false },
    { "bf16 cp 2 zero 2",4, 64,  64, 4, 1, 1, 1, 2, 2, "1f1b",        1, 2, PTDP_RECOMPUTE_NONE,      false, true,  false },
    { "bf16 cp 4 zero 2",4, 64,  64, 8, 2, 1, 1, 4, 2, "1f1b",        1, 2, PTDP_RECOMPUTE_NONE,      false, true,  false },
    { "bf16 cp 2 zero 3",4, 64,  64, 4, 1, 1, 1, 2, 2, "1f1b",        1, 3, PTDP_RECOMPUTE_NONE,      false, true,  false },
    { "bf16 cp 4 zero 3",4, 64,  64, 4, 1, 1, 1, 4, 2, "1f1b",        1, 3, PTDP_RECOMPUTE_NONE,      false, true,  true  },
};

static ptdp_plan_request request_of(const layout_case *k)
{
    ptdp_plan_request rq = ptdp_plan_request_defaults();
    rq.model = gpt_of((gpt_shape){ .layers = k->layers, .hidden = 64, .ffn = 256,
                                   .heads = 4, .seq_len = k->seq, .vocab = k->vocab }, 0);
    rq.batch = k->batch;
    rq.gpus = k->dp * k->tp * k->pp * k->cp;
    rq.bf16 = k->bf16;
    return rq;
}

static ptdp_plan_layout layout_of(const layout_case *k)
{
    return plan_layout((plan_layout_fields){ .dp = k->dp, .tp = k->tp, .pp = k->pp, .cp = k->cp, .b = k->b, .v = k->v,
                                              .zero = k->zero, .recompute = k->recompute, .schedule = k->schedule,
                                              .sp = k->sp, .overlap = k->overlap },
                       k->batch);
}

static void print_terms(const char *who, const double t[PTDP_MEM_NCAT + 1])
{
    printf("    %-9s", who);
    for (int c = 0; c < PTDP_MEM_NCAT; c++)
        printf(" %s %8.0f", ptdp_mem_category_name((ptdp_mem_category)c), t[c]);
    printf("  total %9.0f\n", t[PTDP_MEM_NCAT]);
}

LOOP_TEST(plan_memory_tests, test_plan_memory_matches_measured_peak, (int)(sizeof cases / sizeof cases[0]))
{
    const layout_case *k = &cases[_i];
    ptdp_plan_request rq = request_of(k);
    ptdp_plan_layout l = layout_of(k);
    char msg[PTDP_MSG_MAX];
    ck_assert_msg(ptdp_plan_layout_check(&rq, &l, msg, sizeof msg) == 0, "%s: %s", k->name, msg);
    ptdp_plan_memory pm;
    ck_assert_int_eq(ptdp_plan_memory_of(&rq, &l, &pm), 0);

    ptdp_train_config cfg;
    ptdp_plan_train_config(&rq, &l, &cfg);
    cfg.steps = 2;
    ptdp_launch_result lr = { 0 };
    ptdp_launch_opts opts = { .result = &lr };
    ptdp_train_result tr;
    ck_assert_msg(ptdp_train(&cfg, &opts, NULL, NULL, &tr, msg, sizeof msg) == 0, "%s: %s %s", k->name, msg,
                  lr.message);
    int worst = 0;
    for (int d = 1; d < lr.world_size; d++)
        if (lr.devices[d].mem.peak_total > lr.devices[worst].mem.peak_total)
            worst = d;
    int dp_rank, cp_rank, tp_rank, pp_rank;
    ptdp_mesh_coords_cp(l.dp, l.cp, l.tp, l.pp, worst, &dp_rank, &cp_rank, &tp_rank, &pp_rank);
    const ptdp_mem_stats *ms = &lr.devices[worst].mem;
    const double measured = (double)ms->peak_total;
    const double plan[PTDP_MEM_NCAT + 1] = { pm.params, pm.grads, pm.optim, pm.acts, pm.comm, pm.other, pm.total };
    double meas[PTDP_MEM_NCAT + 1];
    for (int c = 0; c < PTDP_MEM_NCAT; c++)
        meas[c] = (double)ms->peak[c];
    meas[PTDP_MEM_NCAT] = measured;
    printf("%-18s stage %d (plan %d, %d in flight): plan %.0f, measured %.0f, ratio %.3f\n", k->name, pp_rank,
           pm.stage, pm.in_flight, pm.total, measured, pm.total / measured);
    print_terms("plan", plan);
    print_terms("measured", meas);   /* each category's own peak: not all at one moment */
    fflush(stdout);
    /* the stage it names holds a device with that peak (stages can tie) */
    double at_stage = 0;
    for (int d = 0; d < lr.world_size; d++) {
        int dr, cr, tr_, pr;
        ptdp_mesh_coords_cp(l.dp, l.cp, l.tp, l.pp, d, &dr, &cr, &tr_, &pr);
        if (pr == pm.stage && (double)lr.devices[d].mem.peak_total > at_stage)
            at_stage = (double)lr.devices[d].mem.peak_total;
    }
    ck_assert_msg(at_stage >= 0.99 * measured, "%s: plan names stage %d (%.0f bytes), the largest peak is stage %d's",
                  k->name, pm.stage, at_stage, pp_rank);
    ck_assert_msg(fabs(pm.total / measured - 1) <= 0.05, "%s: plan %.0f bytes, measured %.0f (ratio %.3f)", k->name,
                  pm.total, measured, pm.total / measured);
    ptdp_train_result_free(&tr);
    ptdp_launch_result_free(&lr);
}
END_TEST

/* The in-flight counts: the formula beside the schedule's own count. */
TEST(plan_memory_tests, test_in_flight_formula_is_the_schedules)
{
    const char *names[] = { "gpipe", "1f1b", "zb-h1", "interleaved" };
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++)
        for (int p = 1; p <= 8; p++)
            for (int m = 1; m <= 12; m++)
                for (int v = 1; v <= (strcmp(names[n], "interleaved") == 0 ? 3 : 1); v++) {
                    ptdp_schedule *s = NULL;
                    if (ptdp_schedule_create_v(names[n], p, m, v, &s) != 0)
                        continue;   /* not a valid (p, m, v) for it */
                    ptdp_plan_request rq = ptdp_plan_request_defaults();
                    rq.model = gpt_of((gpt_shape){ .layers = p * v, .vocab = 64 }, 0);
                    rq.batch = m;
                    rq.gpus = p;
                    ptdp_plan_layout l = { .dp = 1, .tp = 1, .pp = p, .cp = 1, .micro_batch_size = 1,
                                           .micro_batches = m, .virtual_stages = v };
                    l.schedule = ptdp_schedule_find(names[n]);
                    ptdp_plan_memory pm;
                    ck_assert_int_eq(ptdp_plan_memory_of(&rq, &l, &pm), 0);
                    int want = ptdp_schedule_peak_in_flight(s, pm.stage);
                    ck_assert_msg(pm.in_flight == want, "%s p %d m %d v %d stage %d: formula %d, schedule %d",
                                  names[n], p, m, v, pm.stage, pm.in_flight, want);
                    ptdp_schedule_destroy(s);
                }
}
END_TEST

/* At scale the model states are the ZeRO paper's (ptdp_zero_state_bytes):
 * float AdamW 4 + 4 + 8 bytes a parameter, stage by stage divided by dp —
 * here a 175B GPT (96 layers, h 12288) on tp 8 x dp 128, whose
 * parameters psi a device the stage-0 plan gives (4 bytes each); ZeRO-3
 * adds the gathered block unit being computed and the embeddings (held
 * the whole pass: one stage, so the tied head is theirs), and their
 * gradients. */
TEST(plan_memory_tests, test_model_states_are_the_zero_papers)
{
    ptdp_plan_request rq = ptdp_plan_request_defaults();
    rq.model = gpt_of((gpt_shape){ .layers = 96, .hidden = 12288, .ffn = 4 * 12288,
                                   .heads = 96, .seq_len = 2048, .vocab = 51200 }, 0);
    rq.batch = 1536;
    rq.gpus = 1024;
    ptdp_plan_layout l = { .dp = 128, .tp = 8, .pp = 1, .cp = 1, .micro_batch_size = 1, .micro_batches = 12,
                           .virtual_stages = 1, .recompute = PTDP_RECOMPUTE_FULL, .zero = 0 };
    l.schedule = ptdp_schedule_find("1f1b");
    char msg[PTDP_MSG_MAX];
    ck_assert_msg(ptdp_plan_layout_check(&rq, &l, msg, sizeof msg) == 0, "%s", msg);
    ptdp_plan_memory m0;
    ck_assert_int_eq(ptdp_plan_memory_of(&rq, &l, &m0), 0);
    const double psi = m0.params / sizeof(ptdp_real), r = sizeof(ptdp_real);
    const double block = 12.0 * 12288 * 12288 / 8 + (6 + 3.0 / 8 + 4.0 / 8) * 12288;   /* 4C Cl + 2C Fl + 6C + 3Cl + Fl */
    const double embed = (2048 + 51200 / 8) * 12288.0;                                  /* wpe, wte's rows */
    for (int z = 0; z <= 3; z++) {
        l.zero = z;
        ptdp_plan_memory m;
        ck_assert_int_eq(ptdp_plan_memory_of(&rq, &l, &m), 0);
        ck_assert_int_eq(m.stage, m0.stage);
        ptdp_zero_bytes want = ptdp_zero_state_bytes(z, psi, l.dp, r, r, 2 * r);
        if (z == 3) {
            want.params += (block + embed) * r;
            want.grads += (block + embed) * r;
        }
        printf("zero %d: params %.4g (paper %.4g), grads %.4g (%.4g), optim %.4g (%.4g), comm %.4g\n", z, m.params,
               want.params, m.grads, want.grads, m.optim, want.optim, m.comm);
        ck_assert_msg(fabs(m.params / want.params - 1) < 1e-3 && fabs(m.grads / want.grads - 1) < 1e-3 &&
                          fabs(m.optim / want.optim - 1) < 1e-3,
                      "zero %d: %.6g %.6g %.6g, the paper's %.6g %.6g %.6g", z, m.params, m.grads, m.optim,
                      want.params, want.grads, want.optim);
        /* ZeRO-2's reduce bucket: the whole stage's gradient, during a backward */
        if (z == 2)
            ck_assert_msg(m.comm >= psi * r, "zero 2: comm %.6g without the bucket %.6g", m.comm, psi * r);
    }
}
END_TEST

/* What cannot be a layout is an error, not a number. */
TEST(plan_memory_tests, test_bad_layouts_are_refused)
{
    ptdp_plan_request rq = ptdp_plan_request_defaults();
    rq.model = ptdp_gpt_default_config();
    ptdp_gpt(&rq.model)->vocab = 64;
    ptdp_plan_layout l = { .dp = 1, .tp = 1, .pp = 1, .cp = 1, .micro_batch_size = 1, .micro_batches = 1,
                           .virtual_stages = 1 };
    ptdp_plan_memory m;
    ck_assert_int_eq(ptdp_plan_memory_of(&rq, &l, &m), 0);
    ck_assert(m.total > 0);
    l.pp = 0;
    ck_assert_int_eq(ptdp_plan_memory_of(&rq, &l, &m), PTDP_EINVAL);
    l.pp = 1;
    l.micro_batch_size = 0;
    ck_assert_int_eq(ptdp_plan_memory_of(&rq, &l, &m), PTDP_EINVAL);
    ck_assert_int_eq(ptdp_plan_memory_of(NULL, &l, &m), PTDP_EINVAL);
}
END_TEST

int main(void) { return harness_main("plan_memory"); }
