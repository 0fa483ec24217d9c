/*
 * test_plan_search.c — the planner's search: every layout, the right ones,
 * the best first, and the pruning exact.
 *
 *  1. Every layout: the search's count of valid layouts equals a brute
 *     force over every (tp, pp, cp, dp, b, schedule, v, ZeRO, recompute,
 *     sp) asking ptdp_plan_layout_check alone — the cheap rules drop
 *     nothing the training loop would run.
 *  2. The bound is one: for every fitting layout, the lower bound the
 *     pruning uses is at most ptdp_plan_time_of's step.
 *  3. Pruning is exact: the best K with pruning are the first K of the
 *     whole ranking (every fitting layout timed), layout for layout.
 *  4. What comes back is valid, fits, keeps the fixed flags, best first;
 *     nothing fits and nothing divides are refused with what would do.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ptdp/error.h"
#include "ptdp/plan_search.h"
#include "ptdp/gpt.h"

static const harness_tcase plan_search_tests = { .name = "plan_search", .timeout_s = 120 };

/* A tiny GPT on a few GPUs of a profile (NULL: the default). */
static ptdp_plan_request tiny(const char *profile, int gpus, int batch, bool bf16)
{
    ptdp_plan_request rq = ptdp_plan_request_defaults();
    rq.model.layers = 4;
    rq.model.hidden = 64;
    rq.model.ffn = 256;
    ptdp_gpt(&rq.model)->heads = 4;
    ptdp_gpt(&rq.model)->seq_len = 32;
    ptdp_gpt(&rq.model)->vocab = 256;
    rq.gpus = gpus;
    rq.batch = batch;
    rq.bf16 = bf16;
    if (profile != NULL)
        rq.profile = ptdp_profile_find(profile);
    ck_assert_ptr_nonnull(rq.profile);
    return rq;
}

typedef struct {
    const char *profile;
    int gpus, batch;
    bool bf16;
    double device_bytes;
} search_case;

static const search_case cases[] = {
    { NULL, 8, 16, false, 0 },
    { "dgx-a100-80g", 16, 32, true, 0 },
    { "dgx-h100", 12, 24, false, 0 },
    { NULL, 8, 16, true, 2.5 * 1024 * 1024 },    /* some layouts do not fit */
};
enum { NCASES = (int)(sizeof cases / sizeof cases[0]) };

/* 1. --------------------------------------------------------------------- */

static long long brute_force_valid(const ptdp_plan_request *rq)
{
    static const char *const schedules[] = { "1f1b", "gpipe", "zb-h1", "interleaved" };
    const int n = rq->gpus;
    long long valid = 0;
    char msg[PTDP_MSG_MAX];
    for (int tp = 1; tp <= n; tp++)
        for (int pp = 1; pp <= n; pp++)
            for (int cp = 1; cp <= n; cp++) {
                if (n % (tp * pp * cp) != 0)
                    continue;
                const int dp = n / (tp * pp * cp);
                for (int b = 1; b <= rq->batch; b++) {
                    if (rq->batch % ((long long)b * dp) != 0)
                        continue;
                    for (int k = 0; k < 4; k++)
                        for (int v = 1; v <= rq->model.layers; v++) {
                            if ((k == 3) != (v > 1))
                                continue;   /* v > 1 is what makes a layout interleaved */
                            for (int z = 0; z <= 3; z++)
                                for (int r = 0; r < PTDP_RECOMPUTE_COUNT; r++)
                                    for (int sp = 0; sp <= 1; sp++) {
                                        ptdp_plan_layout l = {
                                            .dp = dp, .tp = tp, .pp = pp, .cp = cp, .micro_batch_size = b,
                                            .micro_batches = (int)(rq->batch / ((long long)b * dp)),
                                            .virtual_stages = v, .recompute = (ptdp_recompute)r, .zero = z,
                                            .sp = sp,
                                        };
                                        l.schedule = ptdp_schedule_find(schedules[k]);
                                        l.overlap = dp * cp > 1 && z != 1 && v == 1 && k != 2;
                                        if (ptdp_plan_layout_check(rq, &l, msg, sizeof msg) == 0)
                                            valid++;
                                    }
                        }
                }
            }
    return valid;
}

LOOP_TEST(plan_search_tests, test_search_finds_every_valid_layout, 2)
{
    const search_case *k = &cases[_i];
    ptdp_plan_request rq = tiny(k->profile, k->gpus, k->batch, k->bf16);
    ptdp_plan_candidate *c = NULL;
    int n = 0;
    ptdp_plan_search_stats st;
    char msg[PTDP_MSG_MAX];
    ck_assert_msg(ptdp_plan_search_top(&rq, k->device_bytes, 1, &c, &n, &st, msg, sizeof msg) == 0, "%s", msg);
    free(c);
    const long long want = brute_force_valid(&rq);
    printf("%s, %d GPUs: %lld considered, %lld valid (brute force %lld), %lld fit, %lld timed\n", rq.profile->name,
           rq.gpus, st.considered, st.valid, want, st.fitting, st.timed);
    ck_assert_int_eq(st.valid, want);
    ck_assert(st.considered >= st.valid && st.valid >= st.fitting && st.fitting >= st.timed && st.timed >= 1);
}

/* 2 and 3. ---------------------------------------------------------------- */

static bool same_layout(const ptdp_plan_layout *a, const ptdp_plan_layout *b)
{
    return a->dp == b->dp && a->tp == b->tp && a->pp == b->pp && a->cp == b->cp &&
           a->micro_batch_size == b->micro_batch_size && a->virtual_stages == b->virtual_stages &&
           a->schedule == b->schedule && a->recompute == b->recompute && a->zero == b->zero &&
           a->sp == b->sp && a->overlap == b->overlap;
}

LOOP_TEST(plan_search_tests, test_pruning_is_exact, NCASES)
{
    const search_case *k = &cases[_i];
    ptdp_plan_request rq = tiny(k->profile, k->gpus, k->batch, k->bf16);
    ptdp_plan_candidate *all = NULL, *top = NULL;
    int nall = 0, ntop = 0;
    ptdp_plan_search_stats sa, st;
    char msg[PTDP_MSG_MAX];
    ck_assert_msg(ptdp_plan_search_top(&rq, k->device_bytes, 0, &all, &nall, &sa, msg, sizeof msg) == 0, "%s", msg);
    ck_assert_int_eq(nall, sa.fitting);
    ck_assert_int_eq(sa.timed, sa.fitting);   /* top 0: every fitting layout timed */
    if (k->device_bytes > 0)
        ck_assert_msg(sa.fitting < sa.valid, "the device memory should drop some layouts");

    /* the bound is below every step */
    double worst = 0;
    for (int i = 0; i < nall; i++) {
        double bound = ptdp_plan_step_lower_bound(&rq, &all[i].layout);
        ck_assert_msg(bound > 0 && bound <= all[i].time.step_s * (1 + 1e-12),
                      "candidate %d: bound %.9g above its step %.9g", i, bound, all[i].time.step_s);
        worst = fmax(worst, bound / all[i].time.step_s);
        if (i > 0)
            ck_assert((float)all[i].time.step_s >= (float)all[i - 1].time.step_s);   /* best first (7 digits) */
    }

    for (int K = 1; K <= 7; K += 3) {
        ck_assert_msg(ptdp_plan_search_top(&rq, k->device_bytes, K, &top, &ntop, &st, msg, sizeof msg) == 0, "%s",
                      msg);
        ck_assert_int_eq(ntop, K < nall ? K : nall);
        for (int i = 0; i < ntop; i++) {
            ck_assert_msg(same_layout(&top[i].layout, &all[i].layout), "top %d, place %d differs", K, i);
            ck_assert(top[i].time.step_s == all[i].time.step_s);
        }
        printf("%s, %d GPUs, top %d: %lld of %lld fitting layouts timed (tightest bound %.2f of the step)\n",
               rq.profile->name, rq.gpus, K, st.timed, st.fitting, worst);
        free(top);
    }
    free(all);
}

/* 4. ---------------------------------------------------------------------- */

TEST(plan_search_tests, test_candidates_keep_the_fixed_flags)
{
    ptdp_plan_request rq = tiny("dgx-a100-80g", 16, 32, true);
    rq.tp = 2;
    rq.zero = 1;
    rq.recompute = PTDP_RECOMPUTE_SELECTIVE;
    rq.schedule = ptdp_schedule_find("1f1b");
    ptdp_plan_candidate *c = NULL;
    int n = 0;
    char msg[PTDP_MSG_MAX];
    ck_assert_msg(ptdp_plan_search(&rq, 0, &c, &n, msg, sizeof msg) == 0, "%s", msg);
    ck_assert_int_gt(n, 1);
    for (int i = 0; i < n; i++) {
        const ptdp_plan_layout *l = &c[i].layout;
        ck_assert(l->tp == 2 && l->zero == 1 && l->recompute == PTDP_RECOMPUTE_SELECTIVE);
        ck_assert_str_eq(l->schedule->name, "1f1b");
        ck_assert_int_eq(ptdp_plan_layout_check(&rq, l, msg, sizeof msg), 0);
        ck_assert(c[i].fits && c[i].memory.total <= rq.profile->mem_bytes);
    }
    free(c);
}

TEST(plan_search_tests, test_nothing_fits_says_what_would)
{
    ptdp_plan_request rq = tiny(NULL, 8, 16, false);
    ptdp_plan_candidate *c = NULL;
    int n = 0;
    ptdp_plan_search_stats st;
    char msg[PTDP_MSG_MAX];
    ck_assert_int_eq(ptdp_plan_search_top(&rq, 64 * 1024, 3, &c, &n, &st, msg, sizeof msg), PTDP_EINVAL);
    ck_assert_ptr_null(c);
    ck_assert(st.valid > 0 && st.fitting == 0 && st.have_smallest);
    ck_assert_msg(strstr(msg, "no layout fits in 64.00 KiB per GPU") && strstr(msg, "the smallest peak"), "%s", msg);
    printf("nothing fits: %s\n", msg);
}

TEST(plan_search_tests, test_nothing_divides_says_what_would)
{
    ptdp_plan_request rq = tiny(NULL, 8, 3, false);
    rq.tp = 2;
    rq.pp = 2;
    rq.cp = 1;   /* dp 2 cannot divide 3 sequences */
    ptdp_plan_candidate *c = NULL;
    int n = 0;
    ptdp_plan_search_stats st;
    char msg[PTDP_MSG_MAX];
    ck_assert_int_eq(ptdp_plan_search_top(&rq, 0, 3, &c, &n, &st, msg, sizeof msg), PTDP_EINVAL);
    ck_assert(st.valid == 0);
    ck_assert_msg(strstr(msg, "nearest that would: --gpus 4") && strstr(msg, "--batch 2 or 4"), "%s", msg);
    printf("nothing divides: %s\n", msg);
}

int main(void) { return harness_main("plan_search"); }
