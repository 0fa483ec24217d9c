/*
 * test_equiv_3d.c — the equivalence matrix: every dp x tp x pp mesh of at
 * most 8 devices trains like one device.
 *
 * For each factorization dp * tp * pp <= 8 of the small model (4 blocks, so
 * pp <= 4; d_ff 32 and 8 classes, so tp in {1, 2, 4, 8}), with
 *   M          in {1, 4} micro-batches per DP shard,
 *   schedule   gpipe and 1f1b where pp > 1,
 *   ZeRO       stages 0, 1 and 2 where dp > 1,
 * every step's loss and every final parameter equal the single-device
 * baseline by --check's rule (1e-10 in double, 1e-4 in float).  The global
 * batch is 48 when dp x M divides it, else the next multiple of dp x M
 * (dp 5, 7, 8), and the baseline runs on the same batch.
 *
 * The whole matrix runs inside this one process (one forked child per
 * configuration): 174 runs of 4 steps and as many baselines, about 5 s per
 * precision on 2 cores.
 */
#include "equiv.h"

static const harness_tcase mesh_tests = { .name = "3d", .timeout_s = 60 };

#define MAX_CASES 512
static equiv_mesh cases[MAX_CASES];
static int ncases;

/* Fill the table (once) and return its length: the loop test's range. */
static int mesh_cases(void)
{
    static const int ms[] = { 1, 4 };
    if (ncases == 0)
        ncases = equiv_mesh_grid(ms, cases, MAX_CASES);
    return ncases;
}

TEST(mesh_tests, test_matrix_covers_every_factorization)
{
    /* 28 meshes of at most 8 devices; 13 of them with pp > 1; and the count
     * of runs follows: each mesh x 2 M x (2 schedules if pp > 1) x (3 ZeRO
     * stages if dp > 1). */
    int meshes = 0, runs = 0;
    for (int w = 1; w <= 8; w++)
        for (int dp = 1; dp <= w; dp++)
            for (int tp = 1; tp <= w; tp++)
                for (int pp = 1; pp <= 4; pp++)
                    if (dp * tp * pp == w && 32 % tp == 0 && 8 % tp == 0) {
                        meshes++;
                        runs += 2 * (pp > 1 ? 2 : 1) * (dp > 1 ? 3 : 1);
                    }
    ck_assert_int_eq(meshes, 28);
    ck_assert_int_eq(mesh_cases(), runs);
}
END_TEST

LOOP_TEST(mesh_tests, test_mesh_equals_baseline, mesh_cases())
{
    const equiv_mesh *k = &cases[_i];
    ptdp_train_config c = equiv_config(k->dp, k->tp, k->pp, k->m);
    int per = k->dp * k->m;
    c.batch = (c.batch + per - 1) / per * per;
    c.zero = k->zero;
    c.schedule = ptdp_schedule_find(k->schedule);
    equiv_check(&c);
}
END_TEST

int main(void)
{
    return harness_main("equivalence-3d");
}
