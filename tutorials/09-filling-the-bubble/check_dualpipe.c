/*
 * check_dualpipe.c — lesson 09, blank 6: DualPipe's two copies, summed.
 *
 * DualPipe holds the model twice on p devices: device r holds stage r of
 * the down copy (chunk 0) and stage p - 1 - r of the up copy (chunk 1).
 * Each copy of stage s has its own gradient, from the micro-batches that
 * copy ran,
 *
 *     a_s   the down copy's, on device s, chunk 0
 *     b_s   the up copy's,   on device p - 1 - s, chunk 1
 *
 * and both copies must step with a_s + b_s:
 *
 *     device:        0          1          2          3         p = 4
 *     chunk 0     a0 + b0    a1 + b1    a2 + b2    a3 + b3
 *     chunk 1     b3 + a3    b2 + a2    b1 + a1    b0 + a0
 *
 * The gradients here are numbers that say where they came from,
 *
 *     a_s[i] = (s + 1) + i/8        b_s[i] = 1000 (s + 1) + i/8
 *
 * so that what a device ends with can be read back: its own gradient
 * plus which stage of which copy (from which device), unchanged, or
 * halved.  lesson_dualpipe_sum runs on p = 2, 4 and 6 devices (threads,
 * with the lessons' 5 s watchdog); the first chunk that is not a + b is
 * named with what was added instead and why that is not the other copy.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_dualpipe.h"
#include "lesson.h"
#include "tutorial.h"

#include "ptdp/error.h"
#include "ptdp/schedule.h"

enum { DUAL_N = 5, DUAL_MAX_P = 6 };

static const char *const copy_name[2] = { "down", "up" };

/* Copy c's gradient of stage s, element i. */
static double grad_of(int c, int s, int i)
{
    return (c == 0 ? 1.0 : 1000.0) * (s + 1) + i / 8.0;
}

/* The stage device r holds in chunk c, and the device holding copy c of
 * stage s. */
static int stage_of(int p, int r, int c)
{
    return c == 0 ? r : p - 1 - r;
}

static int device_of(int p, int s, int c)
{
    return c == 0 ? s : p - 1 - s;
}

typedef struct {
    int p;
    ptdp_real got[DUAL_MAX_P][2][DUAL_N];   /* each device's two chunks after your sum */
} dual_run;

static int dual_device(ptdp_device *dev, void *arg)
{
    dual_run *x = arg;
    const int p = x->p, r = dev->rank;
    ptdp_real down[DUAL_N], up[DUAL_N];
    for (int i = 0; i < DUAL_N; i++) {
        down[i] = grad_of(0, stage_of(p, r, 0), i);
        up[i] = grad_of(1, stage_of(p, r, 1), i);
    }
    ptdp_real *g[2] = { down, up };
    int rc = lesson_dualpipe_sum(dev, g, DUAL_N);
    memcpy(x->got[r][0], down, sizeof down);
    memcpy(x->got[r][1], up, sizeof up);
    return rc;
}

/* Does got hold scale (copy c of stage s + copy add_c of stage add_s)
 * (add_c < 0: nothing added)? */
static bool holds(const ptdp_real *got, int c, int s, int add_c, int add_s, double scale)
{
    for (int i = 0; i < DUAL_N; i++) {
        const double want = scale * (grad_of(c, s, i) + (add_c >= 0 ? grad_of(add_c, add_s, i) : 0.0));
        if (fabs(got[i] - want) > 1e-9 * fabs(want))
            return false;
    }
    return true;
}

/* Device r's chunk c is not a + b: say what it holds instead. */
static void explain(int p, int r, int c, const ptdp_real *got)
{
    const int s = stage_of(p, r, c), mirror = p - 1 - r, other = 1 - c;
    tutorial_wrong("DualPipe on p = %d devices: device %d's chunk %d, stage %d of the %s copy (%g at element 0), "
                   "ends with %g; stage %d's two copies sum to %g + %g = %g (blank 6).", p, r, c, s, copy_name[c],
                   grad_of(c, s, 0), got[0], s, grad_of(0, s, 0), grad_of(1, s, 0),
                   grad_of(0, s, 0) + grad_of(1, s, 0));
    if (holds(got, c, s, -1, 0, 1.0)) {
        tutorial_note("Nothing was added to it: device %d's group held only itself.  Stage %d's other copy is on\n"
                      "device p - 1 - r = %d, its chunk %d: the mirror.  Give r and p - 1 - r one color in\n"
                      "ptdp_comm_split, and every pair its own.", r, s, mirror, other);
        return;
    }
    if (holds(got, c, s, other, s, 0.5)) {
        tutorial_note("That is half the sum.  The two copies are DP's two replicas of one stage over one batch,\n"
                      "and the loss already divides by the whole batch: sum them, as DP does; do not average.");
        return;
    }
    for (int ac = 0; ac < 2; ac++)
        for (int as = 0; as < p; as++) {
            if (!holds(got, c, s, ac, as, 1.0))
                continue;
            const int from = device_of(p, as, ac);
            if (from == r)
                tutorial_note("That is the device's own two chunks added: stages %d and %d are different stages.\n"
                              "Stage %d's other copy lies on its mirror, device p - 1 - r = %d (chunk %d).", s, as,
                              s, mirror, other);
            else if (from == mirror)
                tutorial_note("That adds the mirror's chunk %d, stage %d of the %s copy: another stage.  An "
                              "all-reduce\nadds what the two devices pass in the same call, and stage %d's other copy "
                              "is the\nmirror's chunk %d.  Take the two stages in the model's order on both "
                              "devices, the\n"
                              "lower first: chunk 0, then 1 on device %d; chunk 1, then 0 on device %d.", ac, as,
                              copy_name[ac], s, other, r < mirror ? r : mirror, r < mirror ? mirror : r);
            else
                tutorial_note("That adds stage %d of the %s copy, from device %d: not device %d's mirror.  Stage %d's\n"
                              "other copy lies on device p - 1 - r = %d (chunk %d).", as, copy_name[ac], from, r, s,
                              mirror, other);
            return;
        }
    tutorial_note("Stage %d's copies are a_%d on device %d (chunk 0) and b_%d on device %d (chunk 1): add exactly\n"
                  "those two, on both devices.", s, s, device_of(p, s, 0), s, device_of(p, s, 1));
}

/* Your sum on p devices: true if every chunk holds a + b. */
static bool check_dual_p(int p)
{
    static dual_run x;
    memset(&x, 0, sizeof x);
    x.p = p;
    char what[64];
    snprintf(what, sizeof what, "DualPipe's mirror sum on %d devices", p);
    if (tutorial_launch(what, p, dual_device, &x) != 0)
        return false;
    for (int r = 0; r < p; r++)
        for (int c = 0; c < 2; c++) {
            const int s = stage_of(p, r, c);
            if (!holds(x.got[r][c], c, s, 1 - c, s, 1.0)) {
                explain(p, r, c, x.got[r][c]);
                return false;
            }
        }
    return true;
}

bool check_dualpipe(void)
{
    for (int p = 2; p <= DUAL_MAX_P; p += 2)
        if (!check_dual_p(p))
            return false;
    tutorial_ok("blank 6: DualPipe on 2, 4 and 6 devices: device r and its mirror p - 1 - r hold stage r's two "
                "copies crossed (chunk 0 here, chunk 1 there), and both end with a + b, as DP's all-reduce over "
                "two replicas would");

    /* Show it: the library's DualPipe beside DualPipeV on half the devices. */
    ptdp_schedule *dual = NULL, *v = NULL;
    ptdp_schedule_timeline *t = NULL, *tv = NULL;
    const ptdp_schedule_costs costs = { .forward = 1, .backward = 2, .backward_input = 1, .backward_weight = 1 };
    if (ptdp_schedule_create("dualpipe", 4, 10, &dual) == 0 && ptdp_schedule_create("dualpipev", 2, 5, &v) == 0 &&
        ptdp_schedule_simulate(dual, &costs, &t) == 0 && ptdp_schedule_simulate(v, &costs, &tv) == 0)
        tutorial_note("The library's DualPipe, p = 4 devices, m = 10 (5 each way), F = B = W = 1: bubble %.4f =\n"
                      "(p-2)/(3m+p-2); DualPipeV on p/2 = 2 devices with m/2 = 5: %.4f, the same, with one copy\n"
                      "of the model in all instead of two.", t->bubble, tv->bubble);
    ptdp_schedule_timeline_destroy(tv);
    ptdp_schedule_timeline_destroy(t);
    ptdp_schedule_destroy(v);
    ptdp_schedule_destroy(dual);
    return true;
}
