/*
 * test_equiv_gpt.c — the GPT trains like one device on every mesh.
 *
 * For each factorization dp * tp * pp <= 8 of a small GPT (4 layers, so
 * pp <= 4; 8 heads and ffn 64, so tp in {1, 2, 4, 8}; the vocabulary of the
 * built-in sums, 62 tokens, padded to 64 x tp), with
 *   M          in {1, 2} micro-batches per DP shard,
 *   schedule   gpipe and 1f1b where pp > 1,
 *   ZeRO       stages 0, 1 and 2 where dp > 1,
 *   dropout    0.1 in every other case (the masks keyed by global sample,
 *              head, query and key must be the same on any mesh),
 * every step's loss and every final parameter equal the single-device
 * baseline on the same padded vocabulary by --check's rule (1e-10 in double,
 * 1e-4 in float).  With pp > 1 the last stage holds its own copy of wte,
 * kept equal by the embedding group's all-reduce; the baseline has one.
 * Context parallelism: cp 2, 3 and 4 alone in both layouts, and cp 2 with
 * every other axis (dp with ZeRO, tp with and without SP, pp with both
 * schedules, dropout, recompute); Ulysses (--cp-algo a2a) at cp 2 and 4
 * alone and with the same axes, ZeRO-3 and selective recompute too.
 * Plus: recompute (full and selective), and uneven stages, on the 3D mesh; and sequence
 * parallelism (--sp) on every mesh with tp > 1, with 2 micro-batches, ZeRO
 * 1 or 2 where dp > 1, both schedules and dropout in turn.  And the
 * interleaved schedule (v chunks per stage) composed with each of those.
 */
#include "equiv.h"
#include "ptdp/gpt.h"

static const harness_tcase gpt_tests = { .name = "gpt", .timeout_s = 120 };

typedef struct { int dp, tp, pp, m, zero; const char *schedule; double dropout; } gpt_case;

#define MAX_CASES 512
static gpt_case cases[MAX_CASES];
static int ncases;

static int gpt_cases(void)
{
    static const int ms[] = { 1, 2 };
    static equiv_mesh grid[MAX_CASES];
    if (ncases > 0)
        return ncases;
    int n = equiv_mesh_grid(ms, grid, MAX_CASES);
    for (; ncases < n; ncases++) {   /* every other run with dropout */
        const equiv_mesh *k = &grid[ncases];
        cases[ncases] = (gpt_case){ k->dp, k->tp, k->pp, k->m, k->zero, k->schedule, ncases % 2 ? 0.1 : 0.0 };
    }
    return ncases;
}

static ptdp_train_config gpt_config(int dp, int tp, int pp, int m)
{
    ptdp_train_config c = equiv_gpt_config(dp, tp, pp, m, tp);
    c.steps = 3;
    c.weight_decay = 0.1;                     /* only the 2-D tensors decay */
    return c;
}

TEST(gpt_tests, test_matrix_covers_every_factorization)
{
    int meshes = 0;
    for (int w = 1; w <= 8; w++)
        for (int dp = 1; dp <= w; dp++)
            for (int tp = 1; tp <= w; tp++)
                for (int pp = 1; pp <= 4; pp++)
                    meshes += dp * tp * pp == w && 8 % tp == 0;
    ck_assert_int_eq(meshes, 28);
    ck_assert_int_gt(gpt_cases(), 2 * meshes);
}
END_TEST

/* A case's run: the batch rounded up to a multiple of dp x m. */
static ptdp_train_config case_config(const gpt_case *k)
{
    ptdp_train_config c = gpt_config(k->dp, k->tp, k->pp, k->m);
    int per = k->dp * k->m;
    c.batch = (c.batch + per - 1) / per * per;
    c.zero = k->zero;
    c.schedule = ptdp_schedule_find(k->schedule);
    c.dropout = k->dropout;
    return c;
}

LOOP_TEST(gpt_tests, test_mesh_equals_baseline, gpt_cases())
{
    ptdp_train_config c = case_config(&cases[_i]);
    equiv_check(&c);
}
END_TEST

/* Every mesh with tp > 1, once, with sequence parallelism. */
#define MAX_SP_CASES 32
static gpt_case sp_cases[MAX_SP_CASES];
static int nsp;

static int gpt_sp_cases(void)
{
    if (nsp > 0)
        return nsp;
    for (int pp = 1; pp <= 4; pp++)
        for (int tp = 2; tp <= 8; tp *= 2)
            for (int dp = 1; dp * tp * pp <= 8; dp++) {
                int zero = dp > 1 ? 1 + nsp % 2 : 0;
                sp_cases[nsp] = (gpt_case){ dp, tp, pp, 2, zero, nsp % 2 ? "gpipe" : "1f1b", nsp % 2 ? 0.0 : 0.1 };
                nsp++;
            }
    return nsp;
}

LOOP_TEST(gpt_tests, test_sequence_parallel_mesh_equals_baseline, gpt_sp_cases())
{
    ptdp_train_config c = case_config(&sp_cases[_i]);
    c.sp = true;
    equiv_check(&c);
}
END_TEST

TEST(gpt_tests, test_sp_meshes_are_all_there)
{
    ck_assert_int_eq(gpt_sp_cases(), 12);   /* tp 2: 8 meshes, tp 4: 3, tp 8: 1 */
}
END_TEST

/* A run of the GPT under context parallelism, ring or Ulysses: both
 * tables below. */
typedef struct {
    int dp, cp, tp, pp, m, zero;
    bool contiguous;
    const char *schedule;
    double dropout;
    bool recompute, selective, sp;
} cp_case;

static void check_cp_case(const cp_case *k, int seq_len, bool a2a)
{
    ptdp_train_config c = gpt_config(k->dp, k->tp, k->pp, k->m);
    ptdp_gpt(&c.model)->seq_len = seq_len;
    int per = k->dp * k->m;
    c.batch = (c.batch + per - 1) / per * per;
    c.cp = k->cp;
    c.cp_a2a = a2a;
    c.cp_contiguous = k->contiguous;
    c.zero = k->zero;
    c.schedule = ptdp_schedule_find(k->schedule);
    c.dropout = k->dropout;
    c.recompute = k->recompute;
    c.recompute_core = k->selective;
    c.sp = k->sp;
    equiv_check(&c);
}

static const cp_case cp_cases[] = {
    { 1, 2, 1, 1, 1, 0, false, "1f1b", 0.0, false, false, false }, { 1, 2, 1, 1, 1, 0, true, "1f1b", 0.1, false, false, false },
    { 1, 3, 1, 1, 1, 0, false, "1f1b", 0.1, false, false, false }, { 1, 3, 1, 1, 2, 0, true, "1f1b", 0.0, false, false, false },
    { 1, 4, 1, 1, 1, 0, false, "1f1b", 0.1, false, false, false }, { 1, 4, 1, 1, 1, 0, true, "1f1b", 0.0, false, false, false },
    { 2, 2, 1, 1, 2, 1, false, "1f1b", 0.1, false, false, false }, { 2, 2, 2, 1, 1, 2, false, "1f1b", 0.0, false, false, false },
    { 1, 2, 2, 2, 2, 0, false, "gpipe", 0.1, false, false, false }, { 1, 2, 1, 4, 2, 0, true, "1f1b", 0.0, true, false, false },
    { 2, 2, 1, 2, 2, 2, false, "1f1b", 0.1, true, false, false }, { 1, 4, 2, 1, 2, 0, false, "1f1b", 0.0, false, false, false },
    /* with sequence parallelism inside each device's positions */
    { 1, 2, 2, 1, 1, 0, false, "1f1b", 0.1, false, false, true }, { 2, 2, 2, 1, 2, 1, true, "1f1b", 0.0, false, false, true },
    { 1, 2, 2, 2, 2, 0, false, "1f1b", 0.1, true, false, true },
};

LOOP_TEST(gpt_tests, test_context_parallel_mesh_equals_baseline, (int)(sizeof cp_cases / sizeof cp_cases[0]))
{
    const cp_case *k = &cp_cases[_i];
    /* T 12 divides into 2 cp chunks for cp 2 and 3, and cp 4's 4; zigzag cp 4 needs 16 */
    check_cp_case(k, k->cp == 4 && !k->contiguous ? 16 : 12, false);
}
END_TEST

/* Ulysses (--cp-algo a2a, ulysses.h): the CP group trades its positions
 * for heads around attention — 8 heads, so heads / tp divides by cp 2 and
 * 4 at tp 1 and 2 — alone in both layouts, and with dp and every ZeRO
 * stage, tp with and without SP, pp with both schedules, recompute full
 * and selective, dropout. */
static const cp_case a2a_cases[] = {
    { 1, 2, 1, 1, 1, 0, false, "1f1b", 0.1, false, false, false },
    { 1, 4, 1, 1, 2, 0, true, "1f1b", 0.0, false, false, false },
    { 1, 4, 1, 1, 1, 0, false, "1f1b", 0.1, false, true, false },
    { 2, 2, 1, 1, 2, 1, false, "1f1b", 0.1, false, false, false },
    { 2, 2, 1, 1, 1, 2, true, "1f1b", 0.0, false, false, false },
    { 2, 2, 1, 1, 2, 3, false, "1f1b", 0.1, false, false, false },
    { 1, 2, 2, 1, 1, 0, false, "1f1b", 0.1, false, false, false },
    { 1, 4, 2, 1, 2, 0, false, "1f1b", 0.0, false, false, true },
    { 2, 2, 2, 1, 2, 1, true, "1f1b", 0.1, false, true, true },
    { 1, 2, 1, 2, 2, 0, false, "gpipe", 0.1, false, false, false },
    { 1, 2, 2, 2, 2, 0, false, "1f1b", 0.0, true, false, true },
    { 2, 2, 1, 2, 2, 2, true, "1f1b", 0.1, true, false, false },
};

LOOP_TEST(gpt_tests, test_ulysses_mesh_equals_baseline, (int)(sizeof a2a_cases / sizeof a2a_cases[0]))
{
    check_cp_case(&a2a_cases[_i], 16, true);                  /* 2 cp chunks for cp 4 zigzag */
}
END_TEST

TEST(gpt_tests, test_recompute_and_uneven_stages)
{
    static const int layers[] = { 3, 1 };
    ptdp_train_config c = gpt_config(2, 2, 2, 2);
    c.recompute = true;
    c.dropout = 0.1;
    c.stage_layers = layers;
    equiv_check(&c);
    c.zero = 2;
    equiv_check(&c);
    c.sp = true;
    equiv_check(&c);
    /* selective recomputation: the attention core again in the backward,
     * its dropout masks the same */
    c.recompute = false;
    c.recompute_core = true;
    equiv_check(&c);
    c.sp = false;
    c.zero = 0;
    equiv_check(&c);
}
END_TEST

/* Interleaved 1F1B (--virtual-stages v): each stage holds v chunks of a
 * small GPT, the tied wte on stage 0's chunk 0 and stage p-1's chunk
 * v-1, SP's LayerNorms in every chunk.  Composed with dp and ZeRO 1 and 2,
 * tp with and without SP, cp, dropout, recompute and uneven chunks. */
typedef struct {
    int dp, cp, tp, pp, m, v, zero;
    bool sp, recompute;
    double dropout;
    const int *chunk_layers;
} chunk_case;
static const int uneven_chunks[] = { 1, 2, 1, 1 };   /* pp 2 x v 2, 5 layers */
static const chunk_case chunk_cases[] = {
    { 1, 1, 1, 2, 2, 2, 0, false, false, 0.0, NULL },  { 1, 1, 1, 2, 4, 4, 0, false, false, 0.1, NULL },
    { 1, 1, 1, 4, 4, 2, 0, false, true, 0.1, NULL },   { 2, 1, 1, 2, 2, 2, 1, false, false, 0.1, NULL },
    { 2, 1, 1, 2, 4, 2, 2, false, true, 0.0, NULL },   { 1, 1, 2, 2, 2, 2, 0, true, false, 0.1, NULL },
    { 1, 1, 2, 2, 4, 3, 0, false, false, 0.0, NULL },  { 2, 1, 2, 2, 2, 2, 2, true, true, 0.1, NULL },
    { 1, 2, 1, 2, 2, 2, 0, false, false, 0.1, NULL },  { 1, 2, 2, 2, 2, 2, 0, true, true, 0.0, NULL },
    { 1, 1, 1, 2, 2, 2, 0, false, false, 0.1, uneven_chunks },
    { 1, 1, 2, 2, 4, 2, 0, true, true, 0.0, uneven_chunks },
};

LOOP_TEST(gpt_tests, test_interleaved_mesh_equals_baseline, (int)(sizeof chunk_cases / sizeof chunk_cases[0]))
{
    const chunk_case *k = &chunk_cases[_i];
    ptdp_train_config c = gpt_config(k->dp, k->tp, k->pp, k->m);
    /* one block per chunk (4 at least), or the uneven cut's 5: deeper
     * models drift past float's 1e-4 whatever the schedule */
    c.model.layers = k->chunk_layers ? 5 : k->pp * k->v > 4 ? k->pp * k->v : 4;
    if (k->cp > 1)
        ptdp_gpt(&c.model)->seq_len = 12;                 /* 2 zigzag chunks per cp rank */
    int per = k->dp * k->m;
    c.batch = (c.batch + per - 1) / per * per;
    c.cp = k->cp;
    c.schedule = ptdp_schedule_find("interleaved");
    c.virtual_stages = k->v;
    c.zero = k->zero;
    c.sp = k->sp;
    c.recompute = k->recompute;
    c.dropout = k->dropout;
    c.stage_layers = k->chunk_layers;
    c.verify_replicas = k->dp > 1;
    equiv_check(&c);
}
END_TEST

int main(void)
{
    return harness_main("equivalence-gpt");
}
