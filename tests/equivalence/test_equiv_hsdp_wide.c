/*
 * test_equiv_hsdp_wide.c — HSDP's whole matrix against one device (suite
 * slow; test_equiv_hsdp.c runs a few of these cases by default).
 *
 * For N in {1, 2, dp} shard groups of dp 4, on dp alone, dp x tp 2 and
 * dp x pp 2, under ZeRO 1, 2 and 3: 27 MLP runs, each clipped at every
 * step; then the GPT (its tied embedding: the declared group made whole
 * over the shard group) and --overlap on a few of them.
 */
#include "equiv.h"

static const harness_tcase hsdp_wide_tests = { .name = "hsdp_wide", .timeout_s = 600 };

static const int MESHES[3][2] = { { 1, 1 }, { 2, 1 }, { 1, 2 } };   /* (tp, pp) beside dp 4 */
static const int SHARDS[3] = { 1, 2, 4 };

static ptdp_train_config config_of(int i, bool gpt, bool overlap)
{
    const int mesh = i / 9, zero = 1 + (i / 3) % 3, shard = SHARDS[i % 3];
    const int tp = MESHES[mesh][0], pp = MESHES[mesh][1];
    ptdp_train_config c = equiv_config(4, tp, pp, pp > 1 ? 2 : 1);
    if (gpt) {
        c.model = equiv_small_gpt(tp);
        c.batch = 16;
        c.steps = 2;
        c.lr = 1e-3;
    }
    c.zero = zero;
    c.shard_group = shard;
    c.overlap = overlap;
    c.clip_grad = 1e-3;
    c.verify_replicas = true;
    return c;
}

LOOP_TEST(hsdp_wide_tests, test_hsdp_mlp_matrix, 27)
{
    ptdp_train_config c = config_of(_i, false, false);
    equiv_check(&c);
}
END_TEST

LOOP_TEST(hsdp_wide_tests, test_hsdp_gpt_matrix, 27)
{
    ptdp_train_config c = config_of(_i, true, false);
    equiv_check(&c);
}
END_TEST

LOOP_TEST(hsdp_wide_tests, test_hsdp_overlap_matrix, 27)
{
    ptdp_train_config c = config_of(_i, false, true);
    equiv_check(&c);
}
END_TEST

int main(void)
{
    return harness_main("equiv_hsdp_wide");
}
