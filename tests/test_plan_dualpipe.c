/*
 * test_plan_dualpipe.c — the planner's memory and step time under
 * DualPipeV (and DualPipe) against what `ptdp train` measures.
 *
 * Under --schedule dualpipev, --pp D counts devices and the model is cut
 * into 2D chunks laid out as a V (device r holds chunks r and 2D-1-r);
 * under dualpipe each device holds a stage of each of two copies.  The
 * planner prices both chunks' states, the activations the schedule's own
 * list keeps in flight on each device, and plays the schedule with the
 * pair rule: an overlapped F&B pair takes max(F + B, its all-to-alls),
 * the experts' exchanges on the communication stream.  For each layout
 * below ptdp_train runs two steps (the pair overlap on, train's default)
 * and the arena's largest peak and the second step's virtual time must be
 * the plan's within 5%:
 *
 *     |plan - measured| / measured <= 0.05
 *
 * The mixtures route every token to every expert (top-k = E), where the
 * planner's uniform routing is exact (test_plan_moe.c says why).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "plan_vs_train.h"
#include "ptdp/arena.h"
#include "ptdp/gpt.h"
#include "ptdp/mesh.h"
#include "ptdp/plan.h"
#include "ptdp/plan_search.h"
#include "ptdp/train.h"
#include "ptdp/error.h"

static const harness_tcase dual_tests = { .name = "plan_dualpipe", .timeout_s = 60 };

typedef struct {
    const char *name;
    int layers, batch;
    int dp, tp, pp, ep, b;
    int E, k;
    int zero;
    ptdp_recompute recompute;
    const char *schedule;
    const char *profile;
} dual_case;

#define R(how) PTDP_RECOMPUTE_##how
static const dual_case cases[] = {
    /* name                          L   B dp tp pp ep b  E  k  z  recompute  schedule     profile */
    { "dense pp 2 dualpipev",        4,  4, 1, 1, 2, 1, 1, 0, 0, 0, R(NONE),  "dualpipev", NULL },
    { "dense pp 3 dualpipev m 8",    6,  8, 1, 1, 3, 1, 1, 0, 0, 0, R(NONE),  "dualpipev", NULL },
    { "dense dp 2 pp 2",             4,  8, 2, 1, 2, 1, 1, 0, 0, 0, R(NONE),  "dualpipev", NULL },
    { "moe pp 2 ep 1",               4,  4, 1, 1, 2, 1, 1, 4, 4, 0, R(NONE),  "dualpipev", NULL },
    { "dense dp 2 pp 2 zero 1",      4,  8, 2, 1, 2, 1, 1, 0, 0, 1, R(NONE),  "dualpipev", NULL },
    { "moe dp 2 pp 2 ep 2",          4,  8, 2, 1, 2, 2, 1, 4, 4, 0, R(NONE),  "dualpipev", NULL },
    { "moe dp 2 tp 2 pp 2 ep 2",     4,  8, 2, 2, 2, 2, 1, 4, 4, 0, R(NONE),  "dualpipev", NULL },
    { "moe dp 2 pp 2 ep 2 zero 2",   4, 12, 2, 1, 2, 2, 1, 4, 4, 2, R(NONE),  "dualpipev", NULL },
    { "moe dp 2 pp 2 ep 2 full",     4,  8, 2, 1, 2, 2, 1, 4, 4, 1, R(FULL),  "dualpipev", NULL },
    { "dense pp 2 dualpipe",         4,  4, 1, 1, 2, 1, 1, 0, 0, 0, R(NONE),  "dualpipe",  NULL },
    { "dense pp 4 dualpipe m 8",     4,  8, 1, 1, 4, 1, 1, 0, 0, 0, R(NONE),  "dualpipe",  NULL },
    { "moe dp 2 pp 2 ep 2 dualpipe", 4,  8, 2, 1, 2, 2, 1, 4, 4, 0, R(NONE),  "dualpipe",  NULL },
    { "moe dualpipe zero 1",         4,  8, 2, 1, 2, 2, 1, 4, 4, 1, R(NONE),  "dualpipe",  NULL },
    { "moe ep 2 over 2 nodes",       4,  8, 2, 2, 2, 2, 1, 4, 4, 0, R(NONE),  "dualpipev", "dgx-a100-80g" },
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))
#undef R

static ptdp_plan_request request_of(const dual_case *k)
{
    /* the built-in corpus's 62 tokens */
    ptdp_model_config m = gpt_of((gpt_shape){ .layers = k->layers, .hidden = 64, .ffn = 256, .heads = 4, .seq_len = 32,
                                              .vocab = 62 }, 0);
    ptdp_gpt_settings *g = ptdp_gpt(&m);
    g->moe_experts = k->E;
    g->moe_top_k = k->k;
    if (k->E > 0) {
        g->moe_every = 1;
        g->moe_ffn = 128;
    }
    return plan_question(m, k->batch, k->dp * k->tp * k->pp, k->profile, false);
}

static ptdp_plan_layout layout_of(const dual_case *k)
{
    return plan_layout((plan_layout_fields){ .dp = k->dp, .tp = k->tp, .pp = k->pp, .ep = k->ep, .b = k->b,
                                              .zero = k->zero, .recompute = k->recompute, .schedule = k->schedule },
                       k->batch);
}

LOOP_TEST(dual_tests, test_plan_dualpipe_is_the_simulators, NCASES)
{
    plan_row_vs_train(cases[_i].name, request_of(&cases[_i]), layout_of(&cases[_i]));
}
END_TEST

/* A long run is played at two lengths and carried on in a straight line
 * (plan_time.c: DualPipe's from 4p, in steps of 2): equal to the whole
 * schedule played out. */
TEST(dual_tests, test_long_runs_follow_the_line)
{
    static const dual_case k = { "line", 8, 96, 1, 1, 4, 1, 1, 4, 4, 0, PTDP_RECOMPUTE_NONE, "dualpipev", NULL };
    ptdp_plan_request rq = request_of(&k);
    for (int pp = 2; pp <= 4; pp += 2) {
        rq.gpus = pp;
        ptdp_plan_layout l = layout_of(&k);
        l.pp = pp;
        l.micro_batches = (int)rq.batch;
        ptdp_plan_time line, all;
        ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &line), 0);
        setenv("PTDP_PLAN_PLAY_ALL", "1", 1);
        ck_assert_int_eq(ptdp_plan_time_of(&rq, &l, &all), 0);
        unsetenv("PTDP_PLAN_PLAY_ALL");
        printf("pp %d m %d: the line %.9g s, played out %.9g s\n", pp, l.micro_batches, line.step_s, all.step_s);
        ck_assert_msg(fabs(line.step_s / all.step_s - 1) < 1e-9, "pp %d: %.12g against %.12g", pp, line.step_s,
                      all.step_s);
    }
}
END_TEST

/* Asked for --schedule dualpipev (dualpipe), the search offers only what
 * ptdp train runs: pp >= 2 devices (dualpipe: pp and m even), m >= 2 pp,
 * no ZeRO-3, no --overlap; its bound stays below every step. */
LOOP_TEST(dual_tests, test_search_offers_what_train_runs, 2)
{
    static const char *const names[2] = { "dualpipev", "dualpipe" };
    static const dual_case k = { "search", 8, 16, 1, 1, 1, 1, 1, 4, 4, 0, PTDP_RECOMPUTE_NONE, "dualpipev", NULL };
    ptdp_plan_request rq = request_of(&k);
    rq.gpus = 8;
    rq.schedule = ptdp_schedule_find(names[_i]);
    const bool dual = _i == 1;
    int nall = 0;
    ptdp_plan_candidate *all = plan_search_all(&rq, &nall);
    for (int i = 0; i < nall; i++) {
        const ptdp_plan_layout *l = &all[i].layout;
        ck_assert_str_eq(l->schedule->name, names[_i]);
        ck_assert_msg(l->pp >= 2 && l->micro_batches >= 2 * l->pp && l->zero != 3 && !l->overlap &&
                      (!dual || (l->pp % 2 == 0 && l->micro_batches % 2 == 0)),
                      "pp %d m %d zero %d overlap %d", l->pp, l->micro_batches, l->zero, l->overlap);
    }
    printf("search: %d %s layouts; the best: dp %d ep %d tp %d pp %d\n", nall, names[_i], all[0].layout.dp,
           all[0].layout.ep, all[0].layout.tp, all[0].layout.pp);
    free(all);
}
END_TEST

int main(void) { return harness_main("plan_dualpipe"); }
