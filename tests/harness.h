/*
 * harness.h — what every test of ptdp shares: registering the tests,
 * running devices, checking from inside a device, and reading back what
 * the code under test wrote.
 *
 * A test file is a list of Check tests.  Each one names its test case
 * (Check's TCase: a name and a timeout) where it is written, so a test
 * cannot be written and then forgotten in main(), and a loop test's range
 * stands beside the _i that uses it:
 *
 *     static const harness_tcase operator_tests = { .name = "operators", .timeout_s = 30 };
 *
 *     LOOP_TEST(operator_tests, test_f_and_g_sum_over_ranks, 3)   runs _i = 0, 1, 2
 *     {
 *         harness_launch_ok(TPS[_i], f_and_g_device, NULL, NULL, NULL);
 *     }
 *     END_TEST
 *
 *     int main(void) { return harness_main("tp"); }
 *
 * Devices are threads, and Check's ck_assert belongs to the test's own
 * thread.  Code on a device checks with DEVICE_CHECK instead: it fails the
 * device (ptdp_fail), which releases every other device, and returns; the
 * launch result then holds the first failure and its rank, which
 * harness_launch_ok turns into the test's failure, at the test's line:
 *
 *     device thread, rank 1                   test thread
 *     DEVICE_CHECK(dev, got == want,          harness_launch_ok(2, f_and_g_device, …)
 *                  "%s (%d,%d) = %g, …")        test_tp.c:222: "2 devices: rank 1 failed
 *       ptdp_fail(PTDP_ECHECK, "test_tp.c:84:     (equivalence check failed): test_tp.c:84:
 *         f backward (0,0) = 3, want 4  ──►       f backward (0,0) = 3, want 4
 *         (expected: got == want)")                (expected: got == want)"
 *
 * The rest reads what the code under test wrote (files, streams, a child
 * process's stderr, SVG) and fails the test when it cannot.
 *
 * The same library is built twice, against libptdp (float) and
 * libptdp_f64 (double): see tests/meson.build.
 */
#ifndef PTDP_TESTS_HARNESS_H
#define PTDP_TESTS_HARNESS_H

#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ptdp/comm.h"
#include "ptdp/device.h"
#include "ptdp/launch.h"
#include "ptdp/models.h"

#if defined(__GNUC__)
#define HARNESS_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define HARNESS_PRINTF(f, a)
#endif

/* ------------------------------------------------------ tests and main */

/* A test case: its name (CK_RUN_CASE=<name> runs it alone), its timeout
 * (0: CK_DEFAULT_TIMEOUT, which tests/meson.build sets per test program)
 * and optional fixtures: setup/teardown around every test, in the test's
 * own process; setup_once/teardown_once once around the whole case, in
 * the runner's process (so they run even when a test crashes). */
typedef struct {
    const char *name;
    double timeout_s;
    void (*setup)(void), (*teardown)(void);
    void (*setup_once)(void), (*teardown_once)(void);
} harness_tcase;

/* TEST(tcase, name) { … } END_TEST: a test of `tcase`.
 * LOOP_TEST(tcase, name, n) { … } END_TEST: run n times, _i = 0 .. n-1;
 * n is evaluated when the program starts and must be at least 1.
 * Both register themselves before main() runs (a constructor). */
#define TEST(tcase, name)         HARNESS_TEST_(tcase, name, 1)
#define LOOP_TEST(tcase, name, n) HARNESS_TEST_(tcase, name, n)

#define HARNESS_TEST_(tcase, name, n)                                                  \
    static void name##_fn(int _i CK_ATTRIBUTE_UNUSED);                                 \
    static const TTest name##_ttest = { #name, name##_fn, __FILE__, __LINE__ };        \
    __attribute__((constructor)) static void name##_register(void)                     \
    {                                                                                  \
        harness_register(&(tcase), &name##_ttest, (n));                                \
    }                                                                                  \
    static void name##_fn(int _i CK_ATTRIBUTE_UNUSED)

void harness_register(const harness_tcase *tcase, const TTest *test, int loops);

/* Run every registered test, grouped by test case, in the order of the
 * file; returns main()'s exit status.  A program without tests, or with a
 * loop test of no iterations, fails: a test that cannot run cannot fail. */
int harness_main(const char *suite_name);

/* ------------------------------------------------- devices under a watchdog */

/* Long enough for a sanitizer build, short enough that a hang ends soon. */
#define HARNESS_WATCHDOG_S 20.0

/* ptdp_launch(n, fn, arg) with opts (NULL: the defaults) and the harness
 * watchdog where opts set none.  Returns the launch status; when res is
 * not NULL it receives the launch result (free it with
 * ptdp_launch_result_free), whatever opts->result says. */
int harness_launch(int n, ptdp_device_fn fn, void *arg, const ptdp_launch_opts *opts,
                   ptdp_launch_result *res);

/* The same, and the test fails (at the caller's line) unless every device
 * returned 0, with the failed rank and its message:
 *   "4 devices: rank 1 failed (equivalence check failed): test_tp.c:84: …" */
#define harness_launch_ok(n, fn, arg, opts, res)                                       \
    do {                                                                               \
        char harness_why_[PTDP_MSG_MAX + 128];                                         \
        ck_assert_msg(harness_launch_succeeds((n), (fn), (arg), (opts), (res), harness_why_, \
                                              sizeof harness_why_),                    \
                      "%s", harness_why_);                                             \
    } while (0)

/* harness_launch, and whether every device returned 0; if not, why. */
bool harness_launch_succeeds(int n, ptdp_device_fn fn, void *arg, const ptdp_launch_opts *opts,
                             ptdp_launch_result *res, char *why, size_t whylen);

/* harness_launch with the defaults, which must fail: the test fails (at the
 * caller's line) unless the status is `code` and the message holds every
 * one of the parts:
 *   HARNESS_LAUNCH_FAILS(2, bad, NULL, PTDP_EINVAL, "'w'", "-3"); */
#define HARNESS_LAUNCH_FAILS(n, fn, arg, code, ...)                                    \
    do {                                                                               \
        char harness_why_[PTDP_MSG_MAX + 128];                                         \
        ck_assert_msg(harness_launch_fails_with((n), (fn), (arg), (code),              \
                                                (const char *const[]){ __VA_ARGS__, NULL }, \
                                                harness_why_, sizeof harness_why_),    \
                      "%s", harness_why_);                                             \
    } while (0)

/* Whether that launch failed as asked; if not, why. */
bool harness_launch_fails_with(int n, ptdp_device_fn fn, void *arg, int code, const char *const *parts,
                               char *why, size_t whylen);

/* opts (NULL: all defaults) with the harness watchdog where they set none:
 * for the launches that ptdp_train makes (equivalence/equiv.h). */
ptdp_launch_opts harness_opts(const ptdp_launch_opts *opts);

/* ----------------------------------------------- checks inside a device */

/* In a device function (or a helper returning its int status): unless
 * cond holds, fail this device with PTDP_ECHECK and the message
 *   "<file>:<line>: <fmt …> (expected: <cond>)"
 * and return PTDP_ECHECK.  The launch reports it with the device's rank. */
#define DEVICE_CHECK(dev, cond, ...)                                                   \
    do {                                                                               \
        if (!(cond))                                                                   \
            return harness_device_fail((dev), __FILE__, __LINE__, #cond, __VA_ARGS__);  \
    } while (0)

/* A model config a test file reads as a constant (CFG, &CFG).  A model's
 * builder (PTDP_MLP_CONFIG, mlp.h) fills the config's own block in a
 * function, which a file-scope initialiser cannot call; so NAME() returns
 * this thread's copy, made anew on every call:
 *     HARNESS_MODEL_CONFIG(cfg_of, PTDP_MLP_CONFIG( .d_in = 5, .hidden = 6, … ))
 *     #define CFG (*cfg_of()) */
#define HARNESS_MODEL_CONFIG(NAME, ...)                                                \
    static const ptdp_model_config *NAME(void)                                         \
    {                                                                                  \
        static _Thread_local ptdp_model_config harness_cfg_;                           \
        harness_cfg_ = __VA_ARGS__;                                                    \
        return &harness_cfg_;                                                          \
    }

/* Return from the device function with the status of `call` unless it is 0
 * (a failing library call has failed the device with its own message). */
#define DEVICE_TRY(call)                                                               \
    do {                                                                               \
        int harness_rc_ = (call);                                                      \
        if (harness_rc_ != 0)                                                          \
            return harness_rc_;                                                        \
    } while (0)

int harness_device_fail(ptdp_device *dev, const char *file, int line, const char *expected,
                        const char *fmt, ...) HARNESS_PRINTF(5, 6);

/* The index of the group called `name` (ptdp_comm_split's name) in a
 * device's statistics, or -1 if it never communicated. */
int harness_group_index(const ptdp_comm_stats *s, const char *name);

/* An attention split over N devices against one device's: each rank's
 * largest difference of the output (worst_y[r]) within 1e-12 in double,
 * 1e-5 in float, of the input gradients (worst_d[r]) within ten times
 * that; the failure names the case (layout, dropout p, rank). */
void harness_assert_attention_close(int N, bool zigzag, double p, const double *worst_y, const double *worst_d);

/* The activation bytes (arena category acts) one forward of model m keeps
 * on this device for its backward: a batch of `rows` samples from sample
 * 0, measured between before and after the forward, then freed. */
struct ptdp_model;
int harness_forward_kept(ptdp_device *dev, struct ptdp_model *m, int rows, size_t *kept);

/* This device's place on a dp x tp x pp mesh and its stage of cfg's model,
 * initialised from seed without dropout: what most device functions start
 * with.  On failure nothing is left allocated. */
int harness_model_on_mesh(ptdp_device *dev, const ptdp_model_config *cfg, int dp, int tp, int pp, uint64_t seed,
                          ptdp_mesh *mesh, ptdp_model *m);

/* ---------------------------------------------- what the code wrote */

/* text contains part, or the test fails showing both. */
#define ASSERT_HAS(text, part)                                                         \
    ck_assert_msg(strstr((text), (part)) != NULL, "'%s' not found in: %s", (part), (text))

/* |got - want| <= tol, or the test fails naming the expression. */
#define ASSERT_CLOSE(got, want, tol)                                                   \
    do {                                                                               \
        double g_ = (got), w_ = (want), t_ = (tol);                                    \
        ck_assert_msg(fabs(g_ - w_) <= t_, "%s = %.17g, want %.17g (tol %.3g)", #got,  \
                      g_, w_, t_);                                                     \
    } while (0)

/* The whole file, with a '\0' after it (*len, if not NULL, its length);
 * the test fails if it cannot be read.  free() it. */
char *harness_read_file(const char *path, size_t *len);
/* Everything written to f (a tmpfile(), say) so far, the same way. */
char *harness_read_stream(FILE *f);

/* A new empty file made from a mkstemp template ("/tmp/ptdp-x-XXXXXX",
 * rewritten in place with the name); the test fails if it cannot. */
void harness_temp_file(char *template_path);
/* Entries of dir other than "." and ".."; with temporaries_only, just the
 * "<name>.tmp.*" an atomic write leaves behind when it goes wrong. */
int  harness_count_entries(const char *dir, bool temporaries_only);
/* Remove dir and everything in it (best effort). */
void harness_remove_tree(const char *dir);
/* A directory for this run of the test program: made before its first
 * test and removed after its last, the same one for every (forked) test,
 * for what a test leaves that later tests of the run may reuse.  NULL if
 * it could not be made (then there is nothing to reuse). */
const char *harness_run_dir(void);

/* Run fn() in a child process and wait: returns its wait status, with
 * what it wrote to stderr in err (for code that must crash, or print). */
int harness_run_child(void (*fn)(void), char *err, size_t errlen);

/* Run fn(arg) in a child process, so what it changes (its user, its
 * limits) ends with it; with unprivileged, as "nobody" when we are root,
 * since root ignores permission bits.  fn writes its message into msg,
 * which comes back from the child.  Returns fn's status (0 or a negative
 * ptdp error); the test fails if the child dies. */
int harness_in_child(int (*fn)(void *), void *arg, bool unprivileged, char *msg, size_t msglen);

/* One complete event ("ph":"X") of a Chrome trace, as trace.c writes
 * them: one per line.  Returns false for any other line. */
typedef struct {
    char name[64], cat[16];
    int pid, tid;           /* tid: the device's track, or its comm track */
    double ts, dur;         /* microseconds */
} harness_trace_event;
bool harness_parse_trace_event(const char *line, harness_trace_event *e);

/* The number of elements of a well-formed XML document with one root
 * (tags balanced in order, attribute values quoted, every & a known
 * entity, no text outside the root), or -1: how SVG output is judged. */
int harness_xml_elements(const char *doc);

#endif
