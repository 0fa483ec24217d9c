/*
 * test_counters.c — the run's counters (counters.h): publishing lays each
 * counter out in a row of its kind, refuses what would make two readers
 * disagree, and counting adds where the counter lives on this device, or
 * nowhere.
 *
 *   published   "a" step 1, "t" step 2 x 3, "d" device 2, "b" step 4
 *   step row    [ a | t t t t t t | b b b b ]    offsets 0, 1, 7
 *   device row  [ d d ]                          offset 0
 *
 * How the run's table sums them over devices is the trainer's
 * (test_equiv_model_in_a_file.c: a model of its own publishes counters and
 * every mesh sums them as it sums the loss).
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "ptdp/counters.h"
#include "ptdp/error.h"

static const harness_tcase counter_tests = { .name = "counters", .timeout_s = 60 };

static ptdp_counters four(void)
{
    ptdp_counters reg;
    ptdp_counters_init(&reg);
    ck_assert_int_eq(ptdp_counters_publish(&reg, "a", PTDP_COUNT_STEP, PTDP_COUNT_NUMBER, 0), PTDP_OK);
    ck_assert_int_eq(ptdp_counters_publish(&reg, "t", PTDP_COUNT_STEP, PTDP_COUNT_TABLE(2, 3), PTDP_COUNT_TP_ONCE),
                     PTDP_OK);
    ck_assert_int_eq(ptdp_counters_publish(&reg, "d", PTDP_COUNT_DEVICE, PTDP_COUNT_LIST(2), 0), PTDP_OK);
    ck_assert_int_eq(ptdp_counters_publish(&reg, "b", PTDP_COUNT_STEP, PTDP_COUNT_LIST(4), PTDP_COUNT_PER_SAMPLE),
                     PTDP_OK);
    return reg;
}

TEST(counter_tests, test_each_kind_has_a_row_in_the_order_published)
{
    ptdp_counters reg = four();
    ck_assert_int_eq(reg.n, 4);
    ck_assert_int_eq(reg.len[PTDP_COUNT_STEP], 11);
    ck_assert_int_eq(reg.len[PTDP_COUNT_DEVICE], 2);
    static const struct { const char *name; int offset, len, ndim; } want[] = {
        { "a", 0, 1, 0 }, { "t", 1, 6, 2 }, { "d", 0, 2, 1 }, { "b", 7, 4, 1 },
    };
    for (int i = 0; i < 4; i++) {
        const ptdp_counter *c = ptdp_counters_find(&reg, want[i].name);
        ck_assert_ptr_eq(c, &reg.c[i]);
        ck_assert_int_eq(c->offset, want[i].offset);
        ck_assert_int_eq(c->len, want[i].len);
        ck_assert_int_eq(c->shape.ndim, want[i].ndim);
    }
    ck_assert_ptr_null(ptdp_counters_find(&reg, "nobody"));
    const double row[11] = { 0 };
    ck_assert_ptr_eq(ptdp_counters_in(&reg, "b", PTDP_COUNT_STEP, row), row + 7);
    ck_assert_ptr_null(ptdp_counters_in(&reg, "d", PTDP_COUNT_STEP, row));   /* a device's, not a step's */
    ck_assert_ptr_null(ptdp_counters_in(&reg, "b", PTDP_COUNT_STEP, NULL));
}
END_TEST

TEST(counter_tests, test_refused_what_readers_could_not_tell_apart)
{
    ptdp_counters reg = four();
    char long_name[PTDP_COUNTER_NAME_MAX + 1];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    ck_assert_int_eq(ptdp_counters_publish(&reg, "t", PTDP_COUNT_DEVICE, PTDP_COUNT_NUMBER, 0), PTDP_EINVAL);
    ck_assert_str_eq(reg.refused, "t");   /* the first refused names the message */
    ck_assert_int_eq(ptdp_counters_publish(&reg, long_name, PTDP_COUNT_STEP, PTDP_COUNT_NUMBER, 0), PTDP_EINVAL);
    ck_assert_int_eq(ptdp_counters_publish(&reg, "", PTDP_COUNT_STEP, PTDP_COUNT_NUMBER, 0), PTDP_EINVAL);
    ck_assert_int_eq(ptdp_counters_publish(&reg, "none", PTDP_COUNT_STEP, PTDP_COUNT_LIST(0), 0), PTDP_EINVAL);
    ck_assert_int_eq(ptdp_counters_publish(&reg, "kind", PTDP_COUNT_NKINDS, PTDP_COUNT_NUMBER, 0), PTDP_EINVAL);
    ck_assert_str_eq(reg.refused, "t");
    ck_assert_int_eq(reg.n, 4);
    ck_assert_int_eq(reg.len[PTDP_COUNT_STEP], 11);   /* nothing refused took room */
    char name[16];
    for (int i = reg.n; i < PTDP_COUNTERS_MAX; i++) {
        snprintf(name, sizeof name, "c%d", i);
        ck_assert_int_eq(ptdp_counters_publish(&reg, name, PTDP_COUNT_STEP, PTDP_COUNT_NUMBER, 0), PTDP_OK);
    }
    ck_assert_int_eq(ptdp_counters_publish(&reg, "one more", PTDP_COUNT_STEP, PTDP_COUNT_NUMBER, 0), PTDP_EINVAL);
}
END_TEST

TEST(counter_tests, test_count_adds_where_the_counter_lives)
{
    ptdp_counters reg = four();
    double step[11] = { 0 }, device[2] = { 0 };
    ptdp_counts lead = { .reg = &reg, .row = { [PTDP_COUNT_STEP] = step, [PTDP_COUNT_DEVICE] = device },
                         .tp_lead = true };
    ptdp_count(&lead, "a", 0, 2.5);
    ptdp_count(&lead, "a", 0, 0.5);
    ptdp_count(&lead, "t", 5, 7);        /* row 1, column 2: number 1 + 5 of the step row */
    ptdp_count(&lead, "d", 1, 9);
    ptdp_count(&lead, "b", 3, 4);
    ck_assert_ptr_eq(ptdp_counts_of(&lead, "b"), step + 7);
    ck_assert_ptr_eq(ptdp_counts_of(&lead, "d"), device);
    const double want_step[11] = { 3, 0, 0, 0, 0, 0, 7, 0, 0, 0, 4 };
    for (int q = 0; q < 11; q++)
        ck_assert_double_eq(step[q], want_step[q]);
    ck_assert_double_eq(device[1], 9);

    /* Where nothing is counted: another TP rank (for "t"), no row of the
     * kind (between steps), a name nobody published, no channel at all. */
    ptdp_counts other = lead;
    other.tp_lead = false;
    ptdp_count(&other, "t", 5, 100);
    ptdp_count(&other, "a", 0, 1);        /* every rank counts "a" */
    ck_assert_ptr_null(ptdp_counts_of(&other, "t"));
    ptdp_counts between = lead;
    between.row[PTDP_COUNT_STEP] = NULL;
    ptdp_count(&between, "a", 0, 100);
    ptdp_count(&between, "d", 0, 1);      /* the run's row is still there */
    ptdp_count(&lead, "nobody", 0, 100);
    ptdp_count(NULL, "a", 0, 100);
    ck_assert_ptr_null(ptdp_counts_of(NULL, "a"));
    ck_assert_double_eq(step[0], 4);
    ck_assert_double_eq(step[6], 7);
    ck_assert_double_eq(device[0], 1);
}
END_TEST

/* Number 2 of a counter of 2: a publisher's bug, which fails the device. */
static int count_past_the_end(ptdp_device *dev, void *arg)
{
    ptdp_counters *reg = arg;
    double step[11] = { 0 }, device[2] = { 0 };
    ptdp_counts counts = { .reg = reg, .row = { [PTDP_COUNT_STEP] = step, [PTDP_COUNT_DEVICE] = device },
                           .tp_lead = true };
    dev->counts = &counts;
    ptdp_count(dev->counts, "d", 2, 1);
    dev->counts = NULL;
    return dev->status;
}

TEST(counter_tests, test_a_number_past_the_end_fails_the_device)
{
    static ptdp_counters reg;
    reg = four();
    HARNESS_LAUNCH_FAILS(1, count_past_the_end, &reg, PTDP_EINVAL, "ptdp_count", "counter d: number 2 of 2");
}
END_TEST

int main(void)
{
    return harness_main("counters");
}
