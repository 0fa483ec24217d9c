/*
 * tutorial.c — the blanks of blank.h and the check helpers of tutorial.h.
 *
 * A blank reached anywhere is remembered once per process (the first one
 * wins: with N devices all N usually reach the same blank together).  A
 * device thread started by tutorial_launch is remembered per thread, so the
 * blank can fail that device and, through ptdp_fail, stop all the others.
 */
#include "tutorial.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TUTORIAL_BLANK_KEEP_WARNINGS
#include "blank.h"
#include "ptdp/error.h"
#include "ptdp/launch.h"
#include "ptdp/train.h"

/* ---------------------------------------------------------------- blanks */

static pthread_mutex_t blank_lock = PTHREAD_MUTEX_INITIALIZER;
static bool blank_reached, blank_printed;
static char blank_message[PTDP_MSG_MAX];

static _Thread_local ptdp_device *current_device;

/* "…/tutorials/01-collectives/exercise.c" -> "tutorials/01-collectives/exercise.c"
 * and the lesson "01" (or "04b" for tutorials/04b-recomputation/). */
static const char *short_path(const char *file, char lesson[4])
{
    const char *p = NULL;
    for (const char *s = strstr(file, "tutorials/"); s != NULL; s = strstr(s + 1, "tutorials/"))
        p = s;
    snprintf(lesson, 4, "??");
    if (p == NULL)
        return file;
    const char *dir = p + strlen("tutorials/");
    if (dir[0] >= '0' && dir[0] <= '9' && dir[1] >= '0' && dir[1] <= '9') {
        bool letter = dir[2] >= 'a' && dir[2] <= 'z' && dir[3] == '-';
        snprintf(lesson, 4, "%c%c%c", dir[0], dir[1], letter ? dir[2] : '\0');
    }
    return p;
}

int tutorial_blank(int n, const char *hint, const char *file, int line)
{
    char lesson[4], msg[PTDP_MSG_MAX];
    const char *path = short_path(file, lesson);
    char who[16] = "";
    if (strcmp(lesson, "??") != 0)
        snprintf(who, sizeof who, "lesson %s: ", lesson);
    snprintf(msg, sizeof msg, "%sblank %d (%s) is still empty \xe2\x80\x94 see %s:%d",
             who, n, hint, path, line);

    pthread_mutex_lock(&blank_lock);
    if (!blank_reached) {
        blank_reached = true;
        snprintf(blank_message, sizeof blank_message, "%s", msg);
    }
    pthread_mutex_unlock(&blank_lock);

    if (current_device != NULL)
        ptdp_fail(current_device, PTDP_EUSER, "%s", msg);
    return PTDP_EUSER;
}

bool tutorial_report_blank(void)
{
    pthread_mutex_lock(&blank_lock);
    bool reached = blank_reached, print = blank_reached && !blank_printed;
    blank_printed = blank_reached;
    pthread_mutex_unlock(&blank_lock);
    if (print) {
        printf("%s\n", blank_message);
        fflush(stdout);
    }
    return reached;
}

/* -------------------------------------------------------------- verdicts */

static int checks_run, checks_failed;
static char lesson_name[8] = "??";

void tutorial_begin(const char *lesson, const char *title)
{
    snprintf(lesson_name, sizeof lesson_name, "%s", lesson);
    printf("lesson %s: %s\n", lesson, title);
    fflush(stdout);
}

/* Print text, continuing every "\n" on a new line under the verdicts' text. */
static void print_indented(const char *text)
{
    for (const char *c = text; *c; c++)
        if (*c == '\n')
            printf("\n         ");
        else
            putchar(*c);
    printf("\n");
    fflush(stdout);
}

static void verdict(const char *tag, const char *fmt, va_list ap)
{
    char text[PTDP_MSG_MAX];
    vsnprintf(text, sizeof text, fmt, ap);
    printf("  %-6s ", tag);
    print_indented(text);
}

void tutorial_ok(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verdict("ok", fmt, ap);
    va_end(ap);
    checks_run++;
}

void tutorial_wrong(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verdict("WRONG", fmt, ap);
    va_end(ap);
    checks_run++;
    checks_failed++;
}

void tutorial_note(const char *fmt, ...)
{
    char text[PTDP_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    printf("         ");
    print_indented(text);
}

/* ------------------------------------------------------------- launching */

/* The watchdog's report is one line, "watchdog: …; rank 0: …; rank 1: …":
 * one line per rank reads better. */
static void print_watchdog_report(const char *report)
{
    printf("           ");
    for (const char *c = report; *c; c++) {
        if (c[0] == ';' && strncmp(c + 1, " rank ", 6) == 0) {
            printf("\n           ");
            c++;                       /* skip the space too */
            continue;
        }
        putchar(*c);
    }
    printf("\n");
}

typedef struct {
    ptdp_device_fn fn;
    void *arg;
} wrapped;

static int run_device(ptdp_device *dev, void *p)
{
    const wrapped *w = p;
    current_device = dev;
    int rc = w->fn(dev, w->arg);
    current_device = NULL;
    return rc;
}

int tutorial_launch(const char *what, int world, ptdp_device_fn fn, void *arg)
{
    return tutorial_launch_opts(what, world, fn, arg, NULL);
}

double tutorial_watchdog_s(void)
{
    const char *env = getenv("PTDP_TUTORIAL_WATCHDOG_S");
    char *end = NULL;
    double s = env != NULL ? strtod(env, &end) : 0;
    return env != NULL && end != env && *end == '\0' && s >= 0.5 && s <= 60 ? s : TUTORIAL_WATCHDOG_S;
}

int tutorial_launch_opts(const char *what, int world, ptdp_device_fn fn, void *arg,
                         const ptdp_launch_opts *caller)
{
    wrapped w = { fn, arg };
    ptdp_launch_result local;
    ptdp_launch_opts opts = caller != NULL ? *caller : (ptdp_launch_opts){ 0 };
    if (opts.watchdog_s == 0)
        opts.watchdog_s = tutorial_watchdog_s();
    if (opts.result == NULL)
        opts.result = &local;
    const ptdp_launch_result *res = opts.result;
    int rc = ptdp_launch(world, run_device, &w, &opts);
    if (rc != 0) {
        if (tutorial_report_blank()) {
            /* the blank's message says it all */
        } else if (rc == PTDP_ECHECK) {
            checks_run++;
            checks_failed++;
            printf("  %-6s %s: ", "WRONG", what);
            print_indented(res->message);
        } else if (rc == PTDP_ETIMEDOUT) {
            checks_run++;
            checks_failed++;
            printf("  STUCK  %s: the devices stopped making progress;\n"
                   "         after %.0f s the watchdog ended the run.  Who waited for whom:\n", what,
                   opts.watchdog_s);
            print_watchdog_report(res->message);
        } else {
            checks_run++;
            checks_failed++;
            printf("  FAILED %s: device %d stopped with \"%s\" (%s).\n", what, res->failed_rank,
                   res->message, ptdp_strerror(rc));
        }
        fflush(stdout);
    }
    if (opts.result == &local)
        ptdp_launch_result_free(&local);   /* else the caller's, to read and free */
    return rc;
}

int tutorial_device_wrong(ptdp_device *dev, const char *fmt, ...)
{
    char msg[PTDP_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ptdp_fail(dev, PTDP_ECHECK, "%s", msg);
}

int tutorial_end(void)
{
    if (tutorial_report_blank()) {
        printf("lesson %s: not finished yet \xe2\x80\x94 fill the blank named above, then run the check again.\n",
               lesson_name);
        return 1;
    }
    if (checks_failed > 0) {
        printf("lesson %s: %d of %d checks failed \xe2\x80\x94 see above.\n", lesson_name, checks_failed,
               checks_run);
        return 1;
    }
    printf("lesson %s: all %d checks passed.\n", lesson_name, checks_run);
    return 0;
}

int tutorial_train_baseline(ptdp_train_config c, double *loss, ptdp_state *final, char *msg, size_t len)
{
    ptdp_train_result res;
    int rc = ptdp_state_init(final, &c.model, c.optimizer, false);
    if (rc != 0) {
        snprintf(msg, len, "host out of memory");
        return rc;
    }
    c.final_state = final;
    if ((rc = ptdp_train(&c, NULL, NULL, NULL, &res, msg, len)) != 0)
        return rc;
    for (int s = 0; s < c.steps; s++)
        loss[s] = res.log[s].loss;
    ptdp_train_result_free(&res);
    return 0;
}

/* ----------------------------------------------- who waited for whom */

/* One clause's ranks: "0", "0-2", "0, 3-4", then ": ".  Returns what
 * follows, or NULL. */
static const char *clause_ranks(const char *q, int world, bool *member)
{
    for (;;) {
        char *end;
        long a = strtol(q, &end, 10), b;
        if (end == q)
            break;
        q = end;
        b = a;
        if (*q == '-') {
            b = strtol(q + 1, &end, 10);
            q = end;
        }
        for (long v = a; v <= b; v++)
            if (v >= 0 && v < world)
                member[v] = true;
        if (q[0] != ',' || q[1] != ' ')
            break;
        q += 2;
    }
    return q[0] == ':' && q[1] == ' ' ? q + 2 : NULL;
}

void tutorial_read_waits(const char *report, int world, tutorial_wait *waits)
{
    for (int r = 0; r < world; r++)
        waits[r] = (tutorial_wait){ 0, -1, -1 };
    for (const char *p = strstr(report, "; "); p != NULL; p = strstr(p, "; ")) {
        p += 2;
        const char *q = strncmp(p, "ranks ", 6) == 0 ? p + 6 : strncmp(p, "rank ", 5) == 0 ? p + 5 : NULL;
        bool member[PTDP_MAX_DEVICES] = { false };
        if (q == NULL || (q = clause_ranks(q, world, member)) == NULL)
            continue;
        tutorial_wait seen = { 0, -1, -1 };
        if (sscanf(q, "waiting in send to rank %d tag %d", &seen.peer, &seen.tag) >= 1)
            seen.op = 's';
        else if (sscanf(q, "waiting in recv from rank %d tag %d", &seen.peer, &seen.tag) >= 1)
            seen.op = 'r';
        for (int r = 0; r < world; r++)
            if (member[r])
                waits[r] = seen;
    }
}
