/*
 * test_equiv_schedule_in_a_file.c — a pipeline schedule of its own, written
 * in this one file and registered through the public interface (one row,
 * schedule.h), is validated, drawn, timed, trained under --check's rule
 * and planned like the built-in ones.
 *
 * The schedule, "fifo": every stage runs all its forwards, then all its
 * backwards, oldest first — GPipe's order with the backwards the other way
 * round (GPipe's are a stack, last in first out):
 *
 *   gpipe  stage 0  F0 F1 F2 F3 .  .  .  .  .  .  B3 B2 B1 B0
 *   fifo   stage 0  F0 F1 F2 F3 .  .  .  .  .  .  B0 B1 B2 B3
 *
 * The backward chain starts on the last stage with micro-batch 0 and each
 * stage's backwards follow its neighbour's one B later, so the makespan is
 * GPipe's, (m + p - 1)(F + B), and so is the bubble:
 *
 *   bubble = (p - 1) / (m + p - 1)        every stage holds all m micro-batches
 *
 * Its row gives the generator, the placement (by send time: any order that
 * can run), its layout (one chunk a stage, round a ring) and its formula,
 * and nothing else: no closed form of what a stage keeps (the planner walks
 * its list) and no timing line (the planner plays it out).  Nothing outside
 * this file knows it: validation reads its row, the executor runs its list,
 * the drawing and the timer play it, the planner prices it.  That is the
 * test of the registry: if anything had to know the schedule by name, this
 * file could not exist.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "equiv.h"
#include "../plan_vs_train.h"
#include "ptdp/gpt.h"
#include "ptdp/plan.h"
#include "ptdp/plan_search.h"
#include "ptdp/schedule.h"

/* ------------------------------------------------------------ the schedule */

static void fifo_generate(ptdp_schedule *s)
{
    for (int st = 0; st < s->pp; st++) {
        for (int mb = 0; mb < s->micro_batches; mb++)
            ptdp_schedule_push(s, st, PTDP_ACT_FORWARD, mb);
        for (int mb = 0; mb < s->micro_batches; mb++)
            ptdp_schedule_push(s, st, PTDP_ACT_BACKWARD, mb);
    }
}

static double fifo_bubble(int p, int m, int v)
{
    (void)v;
    return (double)(p - 1) / (double)(m + p - 1);
}

static const ptdp_schedule_entry fifo = {
    .name = "fifo",
    .summary = "all forwards, then all backwards oldest first (a schedule defined in a test)",
    .generate = fifo_generate,
    .placement = PTDP_PLACE_BY_SEND_TIME,
    .layout = PTDP_CHUNKS_RING,
    .bubble = fifo_bubble,
    .bubble_words = "(p-1)/(m+p-1)",
};

static const harness_tcase registry_tests = { .name = "registry", .timeout_s = 60 };
static const harness_tcase train_tests = { .name = "train", .timeout_s = 300 };
static const harness_tcase plan_tests = { .name = "plan", .timeout_s = 120 };

/* ------------------------------------------------------- one row registered */

TEST(registry_tests, test_the_row_is_found_by_name_and_only_once)
{
    ck_assert_ptr_eq(ptdp_schedule_find("fifo"), &fifo);
    ck_assert_ptr_eq(ptdp_schedule_at(ptdp_schedule_count() - 1), &fifo);
    ck_assert_int_eq(ptdp_schedule_register(&fifo), PTDP_EINVAL);               /* the name is taken */
    const ptdp_schedule_entry nameless = { .name = "", .generate = fifo_generate };
    const ptdp_schedule_entry idle = { .name = "idle" };
    ck_assert_int_eq(ptdp_schedule_register(&nameless), PTDP_EINVAL);
    ck_assert_int_eq(ptdp_schedule_register(&idle), PTDP_EINVAL);               /* no generator */
    char msg[512];
    ck_assert_int_eq(ptdp_schedule_check("fifo", 4, 8, 1, msg, sizeof msg), PTDP_OK);
    ck_assert_int_eq(ptdp_schedule_check("fifo", 4, 8, 2, msg, sizeof msg), PTDP_EINVAL);   /* no chunks */
    ck_assert_msg(strstr(msg, "--virtual-stages 2: the fifo schedule runs one chunk per stage") != NULL, "%s", msg);
    ck_assert_int_eq(ptdp_schedule_refuses(&fifo, PTDP_FEATURE_BF16, 1, msg, sizeof msg), PTDP_OK);
    ck_assert_int_eq(ptdp_schedule_refuses(&fifo, PTDP_FEATURE_ZERO3, 1, msg, sizeof msg), PTDP_OK);
}
END_TEST

/* Proven free of deadlock, timed: GPipe's makespan and bubble, the
 * formula's, and every stage keeps all m micro-batches. */
LOOP_TEST(registry_tests, test_validated_and_timed_like_gpipe, 4)
{
    const int p = _i + 1;
    const ptdp_schedule_costs c = { .forward = 1, .backward = 2 };
    for (int m = 1; m <= 6; m++) {
        ptdp_schedule *s = NULL, *g = NULL;
        ptdp_schedule_timeline *t = NULL, *tg = NULL;
        ck_assert_int_eq(ptdp_schedule_create("fifo", p, m, &s), PTDP_OK);
        ck_assert_ptr_eq(s->entry, &fifo);
        ptdp_schedule_verdict v;
        ck_assert_msg(ptdp_schedule_validate(s, &v) == PTDP_OK, "p %d m %d: %s", p, m, v.message);
        ck_assert_int_eq(ptdp_schedule_build(&ptdp_schedule_row_gpipe, p, m, 1, &g), PTDP_OK);
        ck_assert_int_eq(ptdp_schedule_simulate(s, &c, &t), PTDP_OK);
        ck_assert_int_eq(ptdp_schedule_simulate(g, &c, &tg), PTDP_OK);
        ck_assert_msg(fabs(t->makespan - tg->makespan) < 1e-12, "p %d m %d: makespan %g, GPipe's %g", p, m,
                      t->makespan, tg->makespan);
        const char *words;
        const double formula = ptdp_schedule_bubble_formula(s, &words);
        ck_assert_str_eq(words, "(p-1)/(m+p-1)");
        ck_assert_msg(fabs(t->bubble - formula) < 1e-9, "p %d m %d: bubble %g, formula %g", p, m, t->bubble,
                      formula);
        for (int st = 0; st < p; st++)
            ck_assert_int_eq(ptdp_schedule_peak_in_flight(s, st), m);
        ptdp_schedule_timeline_destroy(t);
        ptdp_schedule_timeline_destroy(tg);
        ptdp_schedule_destroy(s);
        ptdp_schedule_destroy(g);
    }
}
END_TEST

/* Drawn as every schedule is: the ASCII timeline and the SVG. */
TEST(registry_tests, test_drawn)
{
    ptdp_schedule *s = NULL;
    ptdp_schedule_timeline *t = NULL;
    const ptdp_schedule_costs c = { .forward = 1, .backward = 2 };
    ck_assert_int_eq(ptdp_schedule_create("fifo", 3, 4, &s), PTDP_OK);
    ck_assert_int_eq(ptdp_schedule_simulate(s, &c, &t), PTDP_OK);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(ptdp_schedule_ascii(s, t, f), PTDP_OK);
    fclose(f);
    ck_assert_msg(strstr(text, "fifo: 3 stages, 4 micro-batches") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "formula (p-1)/(m+p-1)") != NULL, "%s", text);
    free(text);
    char path[] = "/tmp/ptdp-fifo-XXXXXX";
    const int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    char msg[512];
    ck_assert_msg(ptdp_schedule_svg(s, t, path, msg, sizeof msg) == PTDP_OK, "%s", msg);
    char *svg = harness_read_file(path, NULL);
    ck_assert_msg(svg != NULL && strstr(svg, "fifo schedule: p = 3 stages, m = 4 micro-batches") != NULL,
                  "the SVG names the schedule");
    free(svg);
    remove(path);
    ptdp_schedule_timeline_destroy(t);
    ptdp_schedule_destroy(s);
}
END_TEST

/* --------------------------------------------------- trained like one device */

typedef struct { bool gpt; int dp, tp, pp, m, zero; bool recompute; } train_case;
static const train_case TRAIN[] = {
    { false, 1, 1, 2, 4, 0, false },
    { false, 1, 1, 4, 3, 0, false },
    { false, 2, 2, 2, 2, 1, false },
    { false, 2, 1, 2, 4, 2, true },
    { true, 1, 1, 2, 2, 0, false },
    { true, 2, 1, 2, 2, 3, false },
};

LOOP_TEST(train_tests, test_trains_like_one_device, (int)(sizeof TRAIN / sizeof TRAIN[0]))
{
    const train_case *k = &TRAIN[_i];
    ptdp_train_config c = k->gpt ? equiv_gpt_config(k->dp, k->tp, k->pp, k->m, k->tp)
                                 : equiv_config(k->dp, k->tp, k->pp, k->m);
    c.zero = k->zero;
    c.recompute = k->recompute;
    c.schedule = ptdp_schedule_find("fifo");
    c.verify_replicas = k->dp > 1;
    ck_assert_ptr_eq(c.schedule, &fifo);
    equiv_check(&c);
}
END_TEST

/* ------------------------------------------------------------------ planned */

static ptdp_plan_request small_gpt_request(int gpus, int batch)
{
    ptdp_plan_request rq = ptdp_plan_request_defaults();
    rq.model = gpt_of((gpt_shape){ .layers = 4, .hidden = 64, .ffn = 256,
                                   .heads = 4, .seq_len = 32, .vocab = 62 }, 0);   /* the built-in corpus */
    rq.batch = batch;
    rq.gpus = gpus;
    rq.profile = ptdp_profile_find("dgx-a100");
    return rq;
}

/* The planner prices it from its row alone — its list walked for what a
 * stage keeps, played out for the time — and agrees with what ptdp train
 * measures, as for every built-in schedule (within 5%). */
LOOP_TEST(plan_tests, test_planned_as_train_runs_it, 3)
{
    static const struct { int dp, pp, m, zero; } L[3] = { { 1, 2, 4, 0 }, { 1, 4, 8, 0 }, { 2, 2, 4, 1 } };
    ptdp_plan_request rq = small_gpt_request(L[_i].dp * L[_i].pp, L[_i].dp * L[_i].m);
    ck_assert_ptr_nonnull(rq.profile);
    ptdp_plan_layout l = {
        .dp = L[_i].dp, .tp = 1, .pp = L[_i].pp, .cp = 1, .ep = 1, .micro_batch_size = 1,
        .micro_batches = L[_i].m, .virtual_stages = 1, .recompute = PTDP_RECOMPUTE_NONE, .zero = L[_i].zero,
        .schedule = &fifo,
    };
    char name[64];
    snprintf(name, sizeof name, "fifo dp %d pp %d m %d zero %d", l.dp, l.pp, l.micro_batches, l.zero);
    plan_vs_train(name, &rq, &l, 0.05);
    /* what it keeps is GPipe's: all m in flight, the same bytes */
    ptdp_plan_layout g = l;
    g.schedule = &ptdp_schedule_row_gpipe;
    ptdp_plan_memory mf, mg;
    ck_assert_int_eq(ptdp_plan_memory_of(&rq, &l, &mf), 0);
    ck_assert_int_eq(ptdp_plan_memory_of(&rq, &g, &mg), 0);
    ck_assert_int_eq(mf.in_flight, l.micro_batches);
    ck_assert_msg(fabs(mf.total / mg.total - 1) < 1e-12, "fifo %.0f bytes, GPipe %.0f", mf.total, mg.total);
}
END_TEST

/* Asked for, the search offers it (and nothing else); unasked, it is not
 * tried (its row does not say PTDP_SCHED_PLANNED). */
TEST(plan_tests, test_searched_when_asked)
{
    ptdp_plan_request rq = small_gpt_request(4, 16);
    rq.schedule = &fifo;
    int n = 0;
    ptdp_plan_candidate *all = plan_search_all(&rq, &n);
    for (int i = 0; i < n; i++)
        ck_assert_ptr_eq(all[i].layout.schedule, &fifo);
    free(all);
    rq.schedule = NULL;
    all = plan_search_all(&rq, &n);
    for (int i = 0; i < n; i++)
        ck_assert_ptr_ne(all[i].layout.schedule, &fifo);
    free(all);
}
END_TEST

int main(void)
{
    if (ptdp_schedule_register(&fifo) != PTDP_OK) {
        fprintf(stderr, "cannot register the fifo schedule\n");
        return 1;
    }
    return harness_main("equiv_schedule_in_a_file");
}
