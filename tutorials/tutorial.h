/*
 * tutorial.h — what every lesson's check.c shares.
 *
 * A check is a main() that runs the student's functions, compares them with
 * the library (the single-device baseline, ptdp's own collectives, the
 * byte counts of the textbook) and says in plain words what is right and
 * what is not:
 *
 *     lesson 01: the ring all-reduce
 *       ok     the neighbour exchange, 2 to 5 devices
 *       WRONG  3 devices, 7 elements: rank 2 ended with 13 in element 5; …
 *     lesson 01: 1 of 2 checks failed — see above.
 *
 * and exits 0 (right) or 1 (wrong, unfinished, or stuck).
 *
 * Devices are started with tutorial_launch: ptdp_launch with a 5-second
 * watchdog (so an exercise that deadlocks ends with the watchdog's report
 * of who waits for whom, not a hang), and with each device thread known to
 * blank.h, so a blank reached on a device fails it at once.
 */
#ifndef PTDP_TUTORIAL_H
#define PTDP_TUTORIAL_H

#include <stdbool.h>

#include "ptdp/device.h"
#include "ptdp/launch.h"
#include "ptdp/train.h"

#define TUTORIAL_WATCHDOG_S 5.0

/* The watchdog a check's runs get: TUTORIAL_WATCHDOG_S, or the seconds in
 * PTDP_TUTORIAL_WATCHDOG_S (0.5 to 60), which the test suite sets shorter
 * for the wrong answers it expects to hang. */
double tutorial_watchdog_s(void);

#if defined(__GNUC__)
#define TUTORIAL_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define TUTORIAL_PRINTF(f, a)
#endif

/* "lesson NN: title" */
void tutorial_begin(const char *lesson, const char *title);
/* One verdict line each.  tutorial_wrong's text should say what was seen,
 * what was expected, and the likely cause. */
void tutorial_ok(const char *fmt, ...) TUTORIAL_PRINTF(1, 2);
void tutorial_wrong(const char *fmt, ...) TUTORIAL_PRINTF(1, 2);
/* An indented line of explanation or measurement under the last verdict. */
void tutorial_note(const char *fmt, ...) TUTORIAL_PRINTF(1, 2);

/* Run fn(dev, arg) on `world` devices with the short watchdog.  Returns 0,
 * or the run's error after printing, in plain words, why it failed: the
 * blank still empty, a WRONG verdict from a device (tutorial_device_wrong),
 * the devices stuck (the watchdog's report), or the first device's error.
 * `what` names the run in that explanation. */
int tutorial_launch(const char *what, int world, ptdp_device_fn fn, void *arg);
/* The same with the caller's options (a profile, a device memory, a
 * result to fill and then free with ptdp_launch_result_free); a watchdog
 * of 0 means tutorial_watchdog_s().  opts may be NULL. */
int tutorial_launch_opts(const char *what, int world, ptdp_device_fn fn, void *arg,
                         const ptdp_launch_opts *opts);

/* From inside a device: the student's result is wrong, in these words
 * ("\n" starts a note line).  Fails the device with PTDP_ECHECK, which
 * stops the others; tutorial_launch prints it as a WRONG verdict.
 *     return tutorial_device_wrong(dev, "rank %d's fc1 shard is %d x %d; …", …); */
int tutorial_device_wrong(ptdp_device *dev, const char *fmt, ...) TUTORIAL_PRINTF(2, 3);

/* What the watchdog saw each rank waiting in, read from its report
 * ("watchdog: …; rank 0: waiting in send to rank 1 tag 7 …; ranks 1-2:
 * waiting in recv from rank 0 tag 7 …", src/runtime/wait.c): op 's' or
 * 'r', the peer and the tag, or op 0 for a rank that was not waiting in a
 * send or a recv.  For the hint under a STUCK verdict. */
typedef struct {
    char op;
    int peer, tag;
} tutorial_wait;
void tutorial_read_waits(const char *report, int world, tutorial_wait *waits);

/* If a blank was reached (in host or device code), print its message and
 * return true: the check should stop, there is nothing more to test. */
bool tutorial_report_blank(void);

/* The reference a check compares with: train c (on one device) and keep
 * each step's loss in loss[0 .. c.steps) and the final parameters in
 * *final (initialised here; the caller frees it).  0, or an error with a
 * sentence in msg. */
int tutorial_train_baseline(ptdp_train_config c, double *loss, ptdp_state *final, char *msg, size_t len);

/* The summary line; returns the exit status (0 = every check passed). */
int tutorial_end(void);

#endif
