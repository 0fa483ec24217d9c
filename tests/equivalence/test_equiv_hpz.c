/*
 * test_equiv_hpz.c — ZeRO++'s hpZ (--zero-hpz, zero_hpz.c) trains exactly
 * like ZeRO-3 without it, and like one device.
 *
 * hpZ changes where ZeRO-3's backward gathers a unit from (the pieces the
 * node group kept after the forward, not the primary shards across the
 * whole group), never what it gathers.  Three claims:
 *
 *   1. equal to the single-device baseline by --check's rule (1e-10 in
 *      double) with node groups of 2 and 4 inside ZeRO-3's group — the DP
 *      group, or HSDP's shard group — under TP, PP (1F1B's micro-batches in
 *      flight, whose backwards all read the pieces), --overlap's prefetch;
 *   2. byte-identical to the same run without hpZ: losses and the final
 *      state (parameters, optimizer state), float and (float build) bf16;
 *   3. what cannot run is refused before any work, naming --zero-hpz.
 *
 * The library takes the node group's size k itself (the command derives it
 * from the cluster profile's GPUs a node): k consecutive DP ranks.
 */
#include "equiv.h"

static const harness_tcase hpz_tests = { .name = "hpz", .timeout_s = 120 };

typedef struct { int dp, tp, pp, m, shard, k; bool gpt, overlap; } hpz_case;

static const hpz_case CASES[] = {
    { .dp = 4, .k = 2 },
    { .dp = 4, .tp = 2, .m = 2, .k = 2, .gpt = true, .overlap = true },
    { .dp = 8, .m = 2, .k = 4, .gpt = true },
    { .dp = 4, .pp = 2, .m = 4, .k = 2, .gpt = true },
    { .dp = 8, .shard = 4, .k = 2 },
};
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

static ptdp_train_config config_of(const hpz_case *k)
{
    const int tp = k->tp > 0 ? k->tp : 1, pp = k->pp > 0 ? k->pp : 1, m = k->m > 0 ? k->m : 1;
    ptdp_train_config c = k->gpt ? equiv_gpt_config(k->dp, tp, pp, m, tp) : equiv_config(k->dp, tp, pp, m);
    c.zero = 3;
    c.shard_group = k->shard;
    c.zero_hpz = k->k;
    c.overlap = k->overlap;
    c.clip_grad = 1e-3;   /* clips at every step: the norm too */
    return c;
}

/* ------------------------------------------------- 1. like one device */

LOOP_TEST(hpz_tests, test_hpz_equals_baseline, NCASES)
{
    ptdp_train_config c = config_of(&CASES[_i]);
    equiv_check(&c);
}
END_TEST

/* ------------------------------------- 2. the bits of ZeRO-3 without it */

LOOP_TEST(hpz_tests, test_hpz_same_bits_as_zero3, NCASES)
{
    ptdp_train_config with = config_of(&CASES[_i]), without = with;
    without.zero_hpz = 0;
    char what[96];
    snprintf(what, sizeof what, "case %d: dp %d k %d, with and without hpZ", _i, CASES[_i].dp, CASES[_i].k);
    equiv_runs_same_bits(&with, &without, what);
}
END_TEST

#ifndef PTDP_DOUBLE
/* bf16: the pieces are bf16, as the gathered unit; a GPT's blocks are
 * widened subunit by subunit from the gathered bf16 (zero3.c). */
TEST(hpz_tests, test_hpz_bf16_same_bits)
{
    for (int i = 1; i <= 2; i++) {
        ptdp_train_config with = config_of(&CASES[i]), without;
        with.bf16 = true;
        without = with;
        without.zero_hpz = 0;
        equiv_runs_same_bits(&with, &without, i == 1 ? "bf16 dp 4 tp 2 k 2" : "bf16 dp 8 k 4");
    }
}
END_TEST
#endif

/* --------------------------------------------- 3. refused, named */

TEST(hpz_tests, test_hpz_refusals)
{
    ptdp_train_config c = equiv_config(4, 1, 1, 1);
    c.zero = 2;
    c.zero_hpz = 2;
    equiv_refused(&c, "--zero-hpz needs --zero 3");
    c.zero = 3;
    c.zero_hpz = 1;
    equiv_refused(&c, "--zero-hpz: node groups of 1");
    c.zero_hpz = 4;
    equiv_refused(&c, "--zero-hpz: node groups of 4");   /* the whole group: nothing across nodes */
    c.zero_hpz = 3;
    equiv_refused(&c, "--zero-hpz: node groups of 3");   /* does not divide 4 */
    c = equiv_config(8, 1, 1, 1);
    c.zero = 3;
    c.shard_group = 2;
    c.zero_hpz = 2;
    equiv_refused(&c, "--zero-hpz: node groups of 2 DP ranks must cut ZeRO-3's group of 2");
}
END_TEST

int main(void)
{
    return harness_main("equiv_hpz");
}
