/*
 * test_equiv_pp.c — a pipeline trains exactly like one device.
 *
 * The pipeline matrix: pp in {1,2,3,4} x M in {1,2,4,8} x {gpipe, 1f1b}
 * x {plain, --recompute}, every one against the single-device baseline by
 * --check's rule (1e-10 in double, 1e-4 in float).  The model has 4 blocks,
 * so pp = 3 cuts it 2,1,1 and pp = 4 gives every stage one block.  Then the
 * cuts chosen by hand (--stage-layers), data parallelism around the pipe
 * (dp 2 x pp 2), and dropout, whose masks must not depend on which stage
 * or micro-batch a sample went through.  Then the interleaved schedule:
 * v chunks per stage for several (p, m, v), with recompute, dp and ZeRO,
 * uneven chunks and dropout.
 *
 * Why it must hold: a micro-batch's loss gradient is scaled by 1/B and
 * accumulated (+=), so the order in which a schedule runs the micro-batches
 * changes only the order of the additions into each gradient; the stages
 * compute exactly the layers the single device computes, on the same rows.
 */
#include "equiv.h"

static const harness_tcase pp_tests = { .name = "pp", .timeout_s = 60 };

static const int PPS[] = { 1, 2, 3, 4 }, MS[] = { 1, 2, 4, 8 };
static const char *const SCHEDULES[] = { "gpipe", "1f1b" };

/* _i = ((pp * 4 + m) * 2 + schedule) * 2 + recompute: 64 runs. */
LOOP_TEST(pp_tests, test_pp_matrix, 64)
{
    int recompute = _i % 2, sched = _i / 2 % 2, m = MS[_i / 4 % 4], pp = PPS[_i / 16];
    ptdp_train_config c = equiv_config(1, 1, pp, m);
    c.schedule = ptdp_schedule_find(SCHEDULES[sched]);
    c.recompute = recompute;
    equiv_check(&c);
}
END_TEST

/* Stages of different depth: the first or the last stage heavier. */
LOOP_TEST(pp_tests, test_explicit_stage_layers, 8)
{
    static const int one_three[] = { 1, 3 }, three_one[] = { 3, 1 }, two_one_one[] = { 2, 1, 1 },
                     one_one_two[] = { 1, 1, 2 };
    static const struct { int pp; const int *layers; } cuts[] = {
        { 2, one_three }, { 2, three_one }, { 3, two_one_one }, { 3, one_one_two },
    };
    int k = _i / 2;
    ptdp_train_config c = equiv_config(1, 1, cuts[k].pp, 4);
    c.stage_layers = cuts[k].layers;
    c.schedule = ptdp_schedule_find(SCHEDULES[_i % 2]);
    equiv_check(&c);
}
END_TEST

/* dp 2 x pp 2: every DP replica of a stage runs the pipeline on its shard,
 * then one all-reduce per bucket; the replicas must stay bit-identical. */
LOOP_TEST(pp_tests, test_dp2_pp2, 12)
{
    static const int ms[] = { 1, 2, 4 };
    ptdp_train_config c = equiv_config(2, 1, 2, ms[_i / 4]);
    c.schedule = ptdp_schedule_find(SCHEDULES[_i % 2]);
    c.recompute = _i / 2 % 2;
    c.verify_replicas = true;
    equiv_check(&c);
}
END_TEST

/* Dropout masks are keyed by (layer, global sample, feature): a pipeline,
 * micro-batches and recomputation must all draw the baseline's masks. */
LOOP_TEST(pp_tests, test_dropout, 4)
{
    ptdp_train_config c = equiv_config(1, 1, 4, 4);
    c.dropout = 0.2;
    c.schedule = ptdp_schedule_find(SCHEDULES[_i % 2]);
    c.recompute = _i / 2;
    equiv_check(&c);
}
END_TEST

/* Interleaved 1F1B: v chunks per stage of a 12-block model, chunks c p + s.
 * _i = case * 2 + recompute. */
static const int CHUNK_CASES[][3] = {   /* pp, m, v */
    { 2, 2, 2 }, { 2, 4, 3 }, { 2, 2, 6 }, { 3, 3, 2 }, { 3, 6, 4 }, { 4, 4, 3 }, { 4, 8, 2 },
};

LOOP_TEST(pp_tests, test_interleaved_matrix, 14)
{
    const int *k = CHUNK_CASES[_i / 2];
    ptdp_train_config c = equiv_config(1, 1, k[0], k[1]);
    c.model.layers = 12;
    c.schedule = ptdp_schedule_find("interleaved");
    c.virtual_stages = k[2];
    c.recompute = _i % 2;
    equiv_check(&c);
}
END_TEST

/* Interleaved with data parallelism and ZeRO 0, 1, 2 around it, uneven
 * chunks, and dropout (masks keyed by layer and global sample, whichever
 * chunk holds the layer). */
LOOP_TEST(pp_tests, test_interleaved_composes, 6)
{
    static const int chunk_layers[] = { 3, 1, 1, 2, 2, 3 };   /* pp 3 x v 2, 12 blocks */
    ptdp_train_config c = equiv_config(_i < 3 ? 2 : 1, 1, _i < 3 ? 2 : 3, _i < 3 ? 4 : 3);
    c.model.layers = 12;
    c.schedule = ptdp_schedule_find("interleaved");
    c.virtual_stages = 2;
    if (_i < 3) {
        c.zero = _i;
        c.verify_replicas = true;
    } else {
        c.stage_layers = chunk_layers;
        c.dropout = _i >= 4 ? 0.2 : 0.0;
        c.recompute = _i == 5;
    }
    equiv_check(&c);
}
END_TEST

int main(void)
{
    return harness_main("equivalence-pp");
}
