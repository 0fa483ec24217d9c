/*
 * check.c — lesson 09: do your interleaved 1F1B, ZB-H1 and DualPipeV fill the
 * bubble, and does your DualPipe sum its two copies?
 *
 *   1. blanks 1, 2  lesson_interleaved_forward / _backward, on the host, for
 *                   six (p, v): the k-th forward and backward must be those of
 *                   the library's ptdp_schedule_interleaved (Megatron-LM's
 *                   order).  A mismatch is named in plain words, with what it
 *                   does to the schedule.
 *   2. blank 3      lesson_interleaved for nine (p, m, v): valid and deadlock-
 *                   free (ptdp_schedule_validate); timed with a chunk's
 *                   forward 1/v and backward 2/v (a stage's 1 and 2), the
 *                   bubble must be (p - 1) / (v m + p - 1) to 1e-9; and no
 *                   stage may hold more chunk-micro-batches (forwarded, not
 *                   yet backwarded) than with Megatron's warm-up.
 *   3. blank 4      lesson_zb_h1 for nine (p, m), m >= p: valid; with F = B =
 *                   W = 1 the bubble must be (p - 1) / (3m + p - 1); a stage
 *                   must hold the full activations of at most 1F1B's p - s
 *                   micro-batches (F to B), and owe at most ZB-H1's s + 1 W
 *                   passes at once (each keeps what its W needs).
 *   4. blank 5      lesson_dualpipev_phases for eight (p, m), m >= 2p: device
 *                   r's eight phase counts, count[0] .. count[7] and nothing
 *                   past them.  Every chunk must forward and backward each
 *                   micro-batch once, and every split backward's W run (a
 *                   count that breaks it is named with the phases that run
 *                   that chunk, and the phases whose counts are off with
 *                   the rule that sets each); the V valid and deadlock-free;
 *                   with F = B = W (a pair F + B) the bubble
 *                   (p - 1) / (3m + p - 1) to 1e-9: ZB-H1's on half the
 *                   devices.
 *   5. blank 6      lesson_dualpipe_sum on 2, 4, 6 devices: DualPipe's two
 *                   copies of each stage summed over the mirror pair
 *                   (check_dualpipe.c).
 *
 * No model runs: a schedule is data, and these are facts about the lists.
 * Every function of yours runs watched (watch_begin): one that never
 * returns is named, with its blank, within seconds.
 */
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "check_dualpipe.h"
#include "lesson.h"
#include "tutorial.h"

#include "ptdp/error.h"

static const double TOL = 1e-9;

/* ------------------------------------------------------------ helpers */

/* The ASCII timeline (schedule.h), indented under the verdict. */
static void note_timeline(const ptdp_schedule *s, const ptdp_schedule_timeline *t)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return;
    ptdp_schedule_ascii(s, t, f);
    fclose(f);
    for (char *line = text, *end; line != NULL && *line; line = end ? end + 1 : NULL) {
        if ((end = strchr(line, '\n')) != NULL)
            *end = '\0';
        tutorial_note("%s", line);
    }
    free(text);
}

static bool is_compute(ptdp_action_kind k)
{
    return k == PTDP_ACT_FORWARD || k == PTDP_ACT_BACKWARD || k == PTDP_ACT_BACKWARD_INPUT ||
           k == PTDP_ACT_BACKWARD_WEIGHT;
}

/* One stage's compute in order: "stage 0's compute: F0.0 F1.0 … B0.1 …". */
static void note_compute(const ptdp_schedule *s, int st)
{
    char line[PTDP_MSG_MAX];
    size_t n = (size_t)snprintf(line, sizeof line, "stage %d's compute:", st);
    const ptdp_stage_actions *list = &s->stage[st];
    for (int i = 0, shown = 0; i < list->count && n + 40 < sizeof line; i++) {
        if (!is_compute(list->actions[i].kind))
            continue;
        char tok[32];
        ptdp_action_format(&list->actions[i], tok, sizeof tok);
        if (s->virtual_stages > 1 && list->actions[i].chunk == 0)
            strcat(tok, ".0");          /* with chunks, name chunk 0 too */
        n += (size_t)snprintf(line + n, sizeof line - n, "%s%s", shown > 0 && shown % 16 == 0 ? "\n  " : " ", tok);
        shown++;
    }
    tutorial_note("%s", line);
}

/* A function of yours that never returns.  While one runs, a timer looks
 * every 0.2 s, and ends the check with the blank named instead of a test
 * timeout with no message:
 *   - a generator that pushes without end (a loop whose counter never
 *     moves: a W pushed without (*next_w)++) fills its stage's list, where
 *     every push after that is dropped and sets s->overflow: a full list
 *     still being pushed to half a second later is named at once;
 *   - a loop that never ends and pushes nothing (the k-th forward's loop
 *     whose counter stays put, blank 1) is named after WATCH_STUCK_TICKS:
 *     every function here returns in microseconds. */
enum { WATCH_TICK_US = 200000, WATCH_FULL_TICKS = 3, WATCH_STUCK_TICKS = 15 };   /* 0.2 s, 0.6 s, 3 s */

static struct {
    const ptdp_schedule *s;      /* the generator's schedule (NULL: a function of numbers) */
    char call[160];              /* "lesson_interleaved_forward(p = 2, v = 2, k = 4)"     */
    const char *blank;           /* the blank it runs: "1", "4", …                        */
    const char *hint;            /* what to look for there                                */
    volatile sig_atomic_t ticks, ticks_full;
} watch;

static void stop_overflowing(void)
{
    const ptdp_schedule *s = watch.s;
    int st = 0;
    while (st + 1 < s->pp && s->stage[st].count < s->stage[st].capacity)
        st++;
    tutorial_wrong("your %s, p = %d, m = %d never returns: stage %d's list is full (%d actions) and it\n"
                   "keeps pushing.  A loop whose counter does not move: each W you push must advance\n"
                   "*next_w — ptdp_schedule_push(…, (*next_w)++) — and each loop must end (blank %s).",
                   watch.call, s->pp, s->micro_batches, st, s->stage[st].capacity, watch.blank);
}

static void stop_endless(int sig)
{
    (void)sig;
    watch.ticks++;
    if (watch.s != NULL && watch.s->overflow && ++watch.ticks_full >= WATCH_FULL_TICKS)
        stop_overflowing();
    else if (watch.ticks >= WATCH_STUCK_TICKS)
        tutorial_wrong("%s has run for %.0f s and not returned (blank %s):\n"
                       "a loop in it never ends — its counter does not move toward the end, or its condition\n"
                       "stays true.  %s",
                       watch.call, WATCH_STUCK_TICKS * WATCH_TICK_US / 1e6, watch.blank, watch.hint);
    else
        return;
    tutorial_end();
    fflush(stdout);
    _exit(1);
}

/* Watch the call named by fmt (running blank `blank`) until watch_end. */
static void watch_begin(const ptdp_schedule *s, const char *blank, const char *hint, const char *fmt, ...)
    TUTORIAL_PRINTF(4, 5);
static void watch_begin(const ptdp_schedule *s, const char *blank, const char *hint, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(watch.call, sizeof watch.call, fmt, ap);
    va_end(ap);
    watch.s = s;
    watch.blank = blank;
    watch.hint = hint;
    watch.ticks = watch.ticks_full = 0;
    struct sigaction on = { .sa_handler = stop_endless, .sa_flags = SA_RESTART };   /* stays installed */
    sigemptyset(&on.sa_mask);
    sigaction(SIGALRM, &on, NULL);
    struct itimerval every = { .it_interval = { 0, WATCH_TICK_US }, .it_value = { 0, WATCH_TICK_US } };
    setitimer(ITIMER_REAL, &every, NULL);
}

static void watch_end(void)
{
    struct itimerval off = { 0 };
    setitimer(ITIMER_REAL, &off, NULL);
    watch.s = NULL;
}

/* Your generator fn (named name) on s, watched. */
static int run_watched(int (*fn)(ptdp_schedule *s), const char *name, ptdp_schedule *s)
{
    const bool zb = strcmp(name, "lesson_zb_h1") == 0, v = strcmp(name, "lesson_dualpipev") == 0;
    watch_begin(s, zb ? "4" : v ? "5" : "3, or 1-2, which it calls", "", "%s", name);
    int rc = fn(s);
    watch_end();
    return rc;
}

/* Blank 1 or 2 (fn, named name) for one k, watched: a mapping needs no loop. */
static int mapping_watched(int (*fn)(int p, int v, int k, int *chunk, int *mb), const char *name, int p, int v, int k,
                           int *chunk, int *mb)
{
    const bool forward = fn == lesson_interleaved_forward;
    watch_begin(NULL, forward ? "1" : "2",
                forward ? "The k-th forward needs no loop: its chunk and micro-batch are divisions and\n"
                          "remainders of k."
                        : "The k-th backward needs no loop: it is the k-th forward with the chunk reversed.",
                "%s(p = %d, v = %d, k = %d)", name, p, v, k);
    int rc = fn(p, v, k, chunk, mb);
    watch_end();
    return rc;
}

/* Your generator, then what the library runs after its own: the one pass
 * that places the sends, the receives and the optimizer step (by send
 * time, as for ptdp_schedule_interleaved and ptdp_schedule_zb_h1).
 * Returns your function's code; *placed gets the pass's (its reason in
 * why), 0 if it did not run because your function failed or overflowed.
 * The schedule gets the row of the library's schedule of its name, as
 * ptdp_schedule_generate_v gives it: its bubble formula and legend. */
#define generate(fn, s, placed, why, len) generate_named((fn), #fn, (s), (placed), (why), (len))
static int generate_named(int (*fn)(ptdp_schedule *s), const char *name, ptdp_schedule *s, int *placed, char *why,
                          size_t len)
{
    s->entry = ptdp_schedule_find(s->name);   /* its row: the timeline's formula and legend */
    int rc = run_watched(fn, name, s);
    *placed = 0;
    why[0] = '\0';
    if (rc == PTDP_OK && !s->overflow)
        *placed = ptdp_schedule_place_comms(s, PTDP_PLACE_BY_SEND_TIME, why, len);
    return rc;
}

/* Time the schedule; the bubble, or -1 if it cannot be timed. */
static double bubble_of(const ptdp_schedule *s, const ptdp_schedule_costs *c, ptdp_schedule_timeline **keep)
{
    ptdp_schedule_timeline *t;
    if (ptdp_schedule_simulate(s, c, &t) != 0)
        return -1;
    double b = t->bubble;
    if (keep != NULL)
        *keep = t;
    else
        ptdp_schedule_timeline_destroy(t);
    return b;
}

/* =============================================== 1. the chunk mapping */

/* The k-th forward (or backward) of the library's interleaved schedule:
 * the same on every stage; read off stage 0. */
static void library_order(const ptdp_schedule *ref, ptdp_action_kind kind, int *chunk, int *mb)
{
    int k = 0;
    for (int i = 0; i < ref->stage[0].count; i++)
        if (ref->stage[0].actions[i].kind == kind) {
            chunk[k] = ref->stage[0].actions[i].chunk;
            mb[k++] = ref->stage[0].actions[i].mb;
        }
}

/* "F0.0 F1.0 F0.1 …" for the first n of an order. */
static const char *order_text(char c, const int *chunk, const int *mb, int n, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && k + 16 < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%c%d.%d", i ? " " : "", c, mb[i], chunk[i]);
    return buf;
}

/* What the mapping does to the schedule, in one note. */
static void note_consequence(int p, int m, int v)
{
    ptdp_schedule *s;
    if (ptdp_schedule_alloc_v("interleaved", p, m, v, &s) != 0)
        return;
    char why[256];
    int placed, rc = generate(lesson_interleaved, s, &placed, why, sizeof why);
    ptdp_schedule_verdict verdict;
    if (tutorial_report_blank()) {
        /* the blank's message says it all */
    } else if (rc != 0)
        tutorial_note("With it, your generator at p = %d, m = %d, v = %d returns %s.", p, m, v, ptdp_strerror(rc));
    else if (placed != 0)
        tutorial_note("With it, your lists at p = %d, m = %d, v = %d cannot run: no order of the messages\n"
                      "lets them, some backward would wait for a gradient that can only come after it\n"
                      "(ptdp_schedule_place_comms: %s).", p, m, v, why);
    else if (ptdp_schedule_validate(s, &verdict) != 0)
        tutorial_note("With it, your schedule at p = %d, m = %d, v = %d is not valid: %s", p, m, v, verdict.message);
    ptdp_schedule_destroy(s);
}

enum { MAX_K = 4 * 4 * 2 * 2 };   /* m v for the largest (p, v) below, m = 2p */

/* Your blanks 1 and 2 for k = 0 .. total - 1; false (said why) if one failed. */
static bool your_order(int p, int v, int total, int *f_c, int *f_mb, int *b_c, int *b_mb)
{
    for (int k = 0; k < total; k++) {
        f_c[k] = f_mb[k] = b_c[k] = b_mb[k] = -1;
        if (mapping_watched(lesson_interleaved_forward, "lesson_interleaved_forward", p, v, k, &f_c[k], &f_mb[k]) !=
                0 ||
            mapping_watched(lesson_interleaved_backward, "lesson_interleaved_backward", p, v, k, &b_c[k], &b_mb[k]) !=
                0) {
            if (!tutorial_report_blank())
                tutorial_wrong("blanks 1-2: your mapping returned an error for p = %d, v = %d, k = %d", p, v, k);
            return false;
        }
    }
    return true;
}

static bool check_mapping(void)
{
    static const int shapes[][2] = { { 2, 2 }, { 3, 2 }, { 4, 2 }, { 2, 3 }, { 4, 3 }, { 3, 4 } };
    for (size_t n = 0; n < sizeof shapes / sizeof shapes[0]; n++) {
        const int p = shapes[n][0], v = shapes[n][1], m = 2 * p, total = m * v;
        int rf_c[MAX_K], rf_mb[MAX_K], rb_c[MAX_K], rb_mb[MAX_K];
        int yf_c[MAX_K], yf_mb[MAX_K], yb_c[MAX_K], yb_mb[MAX_K];
        ptdp_schedule *ref;
        if (ptdp_schedule_create_v("interleaved", p, m, v, &ref) != 0) {
            tutorial_wrong("the library's interleaved schedule for p = %d, m = %d, v = %d failed", p, m, v);
            return false;
        }
        library_order(ref, PTDP_ACT_FORWARD, rf_c, rf_mb);
        library_order(ref, PTDP_ACT_BACKWARD, rb_c, rb_mb);
        ptdp_schedule_destroy(ref);
        if (!your_order(p, v, total, yf_c, yf_mb, yb_c, yb_mb))
            return false;
        bool f_ok = true, b_ok = true, forgets_group = true, depth_first = true, b_same_chunk = true,
             b_mb_ok = true;
        for (int k = 0; k < total; k++) {
            f_ok = f_ok && yf_c[k] == rf_c[k] && yf_mb[k] == rf_mb[k];
            b_ok = b_ok && yb_c[k] == rb_c[k] && yb_mb[k] == rb_mb[k];
            forgets_group = forgets_group && yf_c[k] == rf_c[k] && yf_mb[k] == k % p;
            depth_first = depth_first && yf_c[k] == k % v && yf_mb[k] == k / v;
            b_same_chunk = b_same_chunk && yb_c[k] == yf_c[k];
            b_mb_ok = b_mb_ok && yb_mb[k] == rb_mb[k];
        }
        char yours[512], megatron[512];
        const int show = 2 * p * v;     /* two groups of p micro-batches */
        if (!f_ok) {
            tutorial_wrong("p = %d, v = %d, blank 1: your forwards run in another order than Megatron's.", p, v);
            tutorial_note("k = 0 .. %d, yours:      %s", show - 1, order_text('F', yf_c, yf_mb, show, yours, sizeof yours));
            tutorial_note("k = 0 .. %d, Megatron's: %s", show - 1, order_text('F', rf_c, rf_mb, show, megatron, sizeof megatron));
            if (forgets_group)
                tutorial_note("Your micro-batch index forgets the group: k mod p names only micro-batches 0 .. p-1,\n"
                              "so every group of p v forwards runs the same p again.  Add the group's first\n"
                              "micro-batch: group k / (p v), whose first is (k / (p v)) p.");
            else if (depth_first)
                tutorial_note("Yours takes each micro-batch through all v chunks before the next.  Megatron sends a\n"
                              "group of p micro-batches through chunk 0, then the same p through chunk 1, …: while\n"
                              "micro-batch 0 goes round the ring of p stages, each stage has p - 1 others to run.");
            else
                tutorial_note("p forwards per chunk, chunks 0 .. v-1 in turn; after v chunks, the next group of p\n"
                              "micro-batches.");
            note_consequence(p, m, v);
            return false;
        }
        if (!b_ok) {
            tutorial_wrong("p = %d, v = %d, blank 2: your backwards run in another order than Megatron's.", p, v);
            tutorial_note("k = 0 .. %d, yours:      %s", show - 1, order_text('B', yb_c, yb_mb, show, yours, sizeof yours));
            tutorial_note("k = 0 .. %d, Megatron's: %s", show - 1, order_text('B', rb_c, rb_mb, show, megatron, sizeof megatron));
            if (b_same_chunk && b_mb_ok)
                tutorial_note("Your backwards walk the chunks in the forwards' order, chunk 0 first.  A gradient\n"
                              "starts at the loss, in the model's last piece, and flows back: a stage's first\n"
                              "backward is micro-batch 0 through its LAST chunk, v - 1.  Reverse the chunk.");
            else if (!b_mb_ok)
                tutorial_note("The backwards take the micro-batches in the forwards' order (micro-batch 0 first,\n"
                              "the same groups of p); only the chunks run the other way.");
            note_consequence(p, m, v);
            return false;
        }
    }
    tutorial_ok("blanks 1-2: the k-th forward and backward for 6 (p, v) are Megatron's: groups of p "
                "micro-batches through chunk 0, 1, …, v-1; backwards through v-1 first");

    /* Why m must be a multiple of p: the order is made of whole groups. */
    int c[12], mb[12];
    for (int k = 0; k < 12; k++)
        mapping_watched(lesson_interleaved_forward, "lesson_interleaved_forward", 4, 2, k, &c[k], &mb[k]);
    char text[256];
    tutorial_note("p = 4, v = 2 and m = 6, not a multiple of p: a stage runs m v = 12 forwards, and yours are\n"
                  "%s — micro-batches 6 and 7 do not exist,\n"
                  "4 and 5 never reach chunk 1.  The order is made of whole groups of p (README.md).",
                  order_text('F', c, mb, 12, text, sizeof text));
    return true;
}

/* ================================== 2. the interleaved schedule, blank 3 */

/* The messages could not be placed (after the mapping was right): the
 * compute lists, which the pass leaves as they were, say why. */
static void explain_interleaved_failure(const ptdp_schedule *s, const char *why)
{
    const int v = s->virtual_stages, total = s->micro_batches * v;
    for (int st = 0; st < s->pp; st++) {
        int forwards = 0;
        for (int i = 0; i < s->stage[st].count; i++)
            forwards += s->stage[st].actions[i].kind == PTDP_ACT_FORWARD;
        if (forwards > total) {
            tutorial_note("Stage %d lists %d forwards; a stage runs m v = %d (each micro-batch through each of\n"
                          "its chunks).  Its warm-up is longer than all of them: at most m v (blank 3).",
                          st, forwards, total);
            note_compute(s, st);
            return;
        }
    }
    tutorial_note("ptdp_schedule_place_comms found no order of the messages that lets these lists run\n(%s).",
                  why);
    note_compute(s, s->pp - 1);
}

/* Did your generator make lists, and the pass place their messages?  If
 * not, say why and return false. */
static bool interleaved_generated(const ptdp_schedule *s, int rc, int placed, const char *why)
{
    const int p = s->pp, m = s->micro_batches, v = s->virtual_stages;
    if (s->overflow) {
        tutorial_wrong("your interleaved, p = %d, m = %d, v = %d: pushed more actions than a stage can hold, or "
                       "onto a stage that does not exist.", p, m, v);
        return false;
    }
    if (rc != 0) {
        tutorial_wrong("your interleaved, p = %d, m = %d, v = %d: lesson_interleaved returned %s.", p, m, v,
                       ptdp_strerror(rc));
        return false;
    }
    if (placed != 0) {
        tutorial_wrong("your interleaved, p = %d, m = %d, v = %d: the sends and receives cannot be placed (%s).",
                       p, m, v, why);
        explain_interleaved_failure(s, why);
        return false;
    }
    return true;
}

static bool check_interleaved_shape(int p, int m, int v, int *fewer_at)
{
    ptdp_schedule *s = NULL, *ref = NULL;
    ptdp_schedule_timeline *t = NULL;
    bool ok = false;
    const ptdp_schedule_costs costs = { .forward = 1.0 / v, .backward = 2.0 / v, .send = 0 };
    if (ptdp_schedule_create_v("interleaved", p, m, v, &ref) != 0 ||
        ptdp_schedule_alloc_v("interleaved", p, m, v, &s) != 0) {
        tutorial_wrong("p = %d, m = %d, v = %d: could not make the schedules (host out of memory?)", p, m, v);
        goto done;
    }
    char why[256];
    int placed, rc = generate(lesson_interleaved, s, &placed, why, sizeof why);
    if (tutorial_report_blank())
        goto done;
    if (!interleaved_generated(s, rc, placed, why))
        goto done;
    ptdp_schedule_verdict verdict;
    if (ptdp_schedule_validate(s, &verdict) != 0) {
        tutorial_wrong("your interleaved, p = %d, m = %d, v = %d: %s", p, m, v, verdict.message);
        if (strstr(verdict.message, "comes before FORWARD") != NULL) {
            tutorial_note("A stage's first backward is micro-batch 0 through its last chunk, v - 1: its forward\n"
                          "number (v - 1) p = %d.  The warm-up must run at least that many forwards — one round\n"
                          "of the ring of p stages for each chunk after the first — before its first backward\n"
                          "(blank 3).", (v - 1) * p);
            note_compute(s, verdict.stage >= 0 ? verdict.stage : p - 1);
        }
        goto done;
    }
    const char *words;
    const double formula = ptdp_schedule_bubble_formula(ref, &words);
    const double bubble = bubble_of(s, &costs, &t);
    int peak_yours[16], peak_meg[16], longer = -1, shorter = -1;
    for (int st = 0; st < p && st < 16; st++) {
        peak_yours[st] = ptdp_schedule_peak_in_flight(s, st);
        peak_meg[st] = ptdp_schedule_peak_in_flight(ref, st);
        if (peak_yours[st] > peak_meg[st] && longer < 0)
            longer = st;
        if (peak_yours[st] < peak_meg[st] && shorter < 0)
            shorter = st;
    }
    if (fabs(bubble - formula) > TOL) {
        tutorial_wrong("your interleaved, p = %d, m = %d, v = %d: the bubble is %.4f; %s = %.4f.", p, m, v, bubble,
                       words, formula);
        if (shorter >= 0)
            tutorial_note("Stage %d holds at most %d chunk-micro-batches; with Megatron's warm-up it holds %d.  Its\n"
                          "warm-up is shorter, and it waits in the steady state for gradients that have not come\n"
                          "back yet (blank 3).", shorter, peak_yours[shorter], peak_meg[shorter]);
        tutorial_note("Your timeline, a chunk's forward 1/v = %g and backward 2/v = %g:", 1.0 / v, 2.0 / v);
        note_timeline(s, t);
        goto done;
    }
    if (longer >= 0) {
        tutorial_wrong("your interleaved, p = %d, m = %d, v = %d: the bubble is right (%.4f), but stage %d holds up "
                       "to %d chunk-micro-batches at once (forwarded, not yet backwarded); Megatron's warm-up "
                       "holds %d.", p, m, v, bubble, longer, peak_yours[longer], peak_meg[longer]);
        tutorial_note("A stage holds its warm-up's forwards plus the one of a steady iteration.  Yours runs %d\n"
                      "forward%s more before its first backward: they buy no time, only memory (blank 3).",
                      peak_yours[longer] - peak_meg[longer], peak_yours[longer] - peak_meg[longer] == 1 ? "" : "s");
        goto done;
    }
    if (shorter >= 0 && *fewer_at < 0)
        *fewer_at = shorter;
    ok = true;
done:
    ptdp_schedule_timeline_destroy(t);
    ptdp_schedule_destroy(s);
    ptdp_schedule_destroy(ref);
    return ok;
}

static bool check_interleaved(void)
{
    static const int shapes[][3] = {
        { 2, 2, 2 }, { 2, 4, 2 }, { 3, 3, 2 }, { 3, 6, 3 }, { 4, 4, 2 },
        { 4, 8, 2 }, { 4, 8, 3 }, { 4, 4, 4 }, { 8, 16, 2 },
    };
    int fewer_at = -1;
    for (size_t n = 0; n < sizeof shapes / sizeof shapes[0]; n++)
        if (!check_interleaved_shape(shapes[n][0], shapes[n][1], shapes[n][2], &fewer_at))
            return false;
    tutorial_ok("blank 3: your interleaved 1F1B for 9 shapes (p = 2..8, v = 2..4, m = p or 2p) is valid and "
                "deadlock-free; bubble = (p-1)/(v*m+p-1) on each");

    /* Show it: p = 4, m = 8, v = 2, beside 1F1B and Megatron's warm-up. */
    ptdp_schedule *s = NULL, *one = NULL, *ref = NULL;
    ptdp_schedule_timeline *t;
    const ptdp_schedule_costs chunk_costs = { .forward = 0.5, .backward = 1.0 }, costs = { .forward = 1, .backward = 2 };
    char why[256];
    int placed;
    if (ptdp_schedule_alloc_v("interleaved", 4, 8, 2, &s) == 0 &&
        generate(lesson_interleaved, s, &placed, why, sizeof why) == 0 && placed == 0 &&
        ptdp_schedule_create("1f1b", 4, 8, &one) == 0 && ptdp_schedule_create_v("interleaved", 4, 8, 2, &ref) == 0 &&
        ptdp_schedule_simulate(s, &chunk_costs, &t) == 0) {
        note_timeline(s, t);
        tutorial_note("1F1B at p = 4, m = 8: bubble %.4f; interleaved, v = 2: %.4f.  Held at most, in chunk-\n"
                      "micro-batches (each half a stage's): %d %d %d %d; 1F1B, in whole ones: %d %d %d %d.",
                      bubble_of(one, &costs, NULL), t->bubble, ptdp_schedule_peak_in_flight(s, 0),
                      ptdp_schedule_peak_in_flight(s, 1), ptdp_schedule_peak_in_flight(s, 2),
                      ptdp_schedule_peak_in_flight(s, 3), ptdp_schedule_peak_in_flight(one, 0),
                      ptdp_schedule_peak_in_flight(one, 1), ptdp_schedule_peak_in_flight(one, 2),
                      ptdp_schedule_peak_in_flight(one, 3));
        if (fewer_at >= 0)
            tutorial_note("Your warm-up holds less than Megatron's (%d %d %d %d here) at the same bubble.  Right too:\n"
                          "with each message placed when it is sent, 1F1B's p - s - 1 is enough there.  Megatron-LM's\n"
                          "2 (p - s - 1) serves its steady state, which swaps both directions' messages in one\n"
                          "batch per iteration (README.md).", ptdp_schedule_peak_in_flight(ref, 0),
                          ptdp_schedule_peak_in_flight(ref, 1), ptdp_schedule_peak_in_flight(ref, 2),
                          ptdp_schedule_peak_in_flight(ref, 3));
        ptdp_schedule_timeline_destroy(t);
    }
    ptdp_schedule_destroy(ref);
    ptdp_schedule_destroy(one);
    ptdp_schedule_destroy(s);
    return true;
}

/* ============================================ 3. ZB-H1's W passes, blank 4 */

/* Stage st's W passes owed (B run, W not yet) as its steady state ends:
 * after the B that follows its last forward, and the W passes right after
 * that B. */
static int owed_in_steady_state(const ptdp_schedule *s, int st)
{
    int owed = 0, last_f = -1, b_after = 0;
    for (int i = 0; i < s->stage[st].count; i++)
        if (s->stage[st].actions[i].kind == PTDP_ACT_FORWARD)
            last_f = i;
    for (int i = 0; i < s->stage[st].count; i++) {
        ptdp_action_kind k = s->stage[st].actions[i].kind;
        if (i > last_f && k == PTDP_ACT_BACKWARD_INPUT && b_after++)
            break;
        owed += (k == PTDP_ACT_BACKWARD_INPUT) - (k == PTDP_ACT_BACKWARD_WEIGHT);
    }
    return owed;
}

/* Does every W come right after its own B (compute only)? */
static bool w_never_deferred(const ptdp_schedule *s)
{
    for (int st = 0; st < s->pp; st++) {
        const ptdp_action *prev = NULL;
        for (int i = 0; i < s->stage[st].count; i++) {
            const ptdp_action *a = &s->stage[st].actions[i];
            if (!is_compute(a->kind))
                continue;
            if (a->kind == PTDP_ACT_BACKWARD_WEIGHT &&
                (prev == NULL || prev->kind != PTDP_ACT_BACKWARD_INPUT || prev->mb != a->mb))
                return false;
            prev = a;
        }
    }
    return true;
}

/* The first cool-down B (after the stage's last F, not its last B) with no
 * W before the next B; -1 if none.  *stage gets its stage. */
static int cooldown_without_w(const ptdp_schedule *s, int *stage)
{
    for (int st = 0; st < s->pp; st++) {
        int last_f = -1, pending = -1;
        for (int i = 0; i < s->stage[st].count; i++)
            if (s->stage[st].actions[i].kind == PTDP_ACT_FORWARD)
                last_f = i;
        for (int i = last_f + 1; i < s->stage[st].count; i++) {
            const ptdp_action *a = &s->stage[st].actions[i];
            if (a->kind == PTDP_ACT_BACKWARD_WEIGHT)
                pending = -1;
            if (a->kind == PTDP_ACT_BACKWARD_INPUT) {
                if (pending >= 0) {
                    *stage = st;
                    return pending;
                }
                pending = a->mb;
            }
        }
    }
    return -1;
}

static void explain_zb_invalid(const ptdp_schedule_verdict *v)
{
    const char *m = v->message;
    if (strstr(m, "BACKWARD_WEIGHT of micro-batch") != NULL && strstr(m, "comes before BACKWARD_INPUT") != NULL)
        tutorial_note("A W runs before its own B.  After B(b), only the W passes of micro-batches 0 .. b are\n"
                      "owed: b + 1 - *next_w of them.  In the steady state, run a W only while MORE than st\n"
                      "are owed (blank 4).");
    else if (strstr(m, "but no BACKWARD_WEIGHT") != NULL)
        tutorial_note("A micro-batch's W never runs: its weight gradients would be missing from the step.\n"
                      "At the end, run every W still owed, *next_w .. m - 1 (blank 4).");
    else if (strstr(m, "appears twice") != NULL)
        tutorial_note("A W runs twice: its weight gradients would count twice.  Take each W from *next_w and\n"
                      "advance it — (*next_w)++ — so that every micro-batch's W runs once (blank 4).");
    else if (strstr(m, "is not an action on one of micro-batches") != NULL)
        tutorial_note("A W of a micro-batch past the last: only W passes already owed may run (blank 4).");
}

/* Your generator failed, overflowed, or listed compute the pass cannot
 * place: say which, and name a W past the last micro-batch. */
static void explain_zb_failure(const ptdp_schedule *s, int rc, int placed, const char *why)
{
    const int p = s->pp, m = s->micro_batches;
    if (placed != 0)
        tutorial_wrong("your ZB-H1, p = %d, m = %d: the sends and receives cannot be placed (%s).", p, m, why);
    else
        tutorial_wrong("your ZB-H1, p = %d, m = %d: lesson_zb_h1 returned %s%s.", p, m, ptdp_strerror(rc),
                       s->overflow ? " after pushing past a stage's room" : "");
    for (int st = 0; st < p; st++)
        for (int i = 0; i < s->stage[st].count; i++)
            if (s->stage[st].actions[i].mb >= m) {
                tutorial_note("Stage %d runs W%d: micro-batches are 0 .. m - 1 = %d.  Only W passes already\n"
                              "owed may run (blank 4).", st, s->stage[st].actions[i].mb, m - 1);
                note_compute(s, st);
                return;
            }
}

static bool check_zb_shape(int p, int m)
{
    ptdp_schedule *s = NULL, *ref = NULL;
    ptdp_schedule_timeline *t = NULL;
    bool ok = false;
    const ptdp_schedule_costs costs = { .forward = 1, .backward = 2, .backward_input = 1, .backward_weight = 1 };
    if (ptdp_schedule_create("zb-h1", p, m, &ref) != 0 || ptdp_schedule_alloc("zb-h1", p, m, &s) != 0) {
        tutorial_wrong("p = %d, m = %d: could not make the schedules (host out of memory?)", p, m);
        goto done;
    }
    char why[256];
    int placed, rc = generate(lesson_zb_h1, s, &placed, why, sizeof why);
    if (tutorial_report_blank())
        goto done;
    if (rc != 0 || s->overflow || placed != 0) {
        explain_zb_failure(s, rc, placed, why);
        goto done;
    }
    ptdp_schedule_verdict verdict;
    if (ptdp_schedule_validate(s, &verdict) != 0) {
        tutorial_wrong("your ZB-H1, p = %d, m = %d: %s", p, m, verdict.message);
        explain_zb_invalid(&verdict);
        if (verdict.stage >= 0)
            note_compute(s, verdict.stage);
        goto done;
    }
    const char *words;
    const double formula = ptdp_schedule_bubble_formula(ref, &words);
    const double bubble = bubble_of(s, &costs, &t);
    int kept_wrong = -1, cool_stage = -1;
    for (int st = 0; st < p && kept_wrong < 0; st++)
        if (owed_in_steady_state(s, st) != owed_in_steady_state(ref, st))
            kept_wrong = st;
    if (fabs(bubble - formula) > TOL) {
        tutorial_wrong("your ZB-H1, p = %d, m = %d: the bubble is %.4f; %s = %.4f.", p, m, bubble, words, formula);
        const double at_once = 2.0 * (p - 1) / (3.0 * m + 2.0 * (p - 1));
        int cool_b;
        if (w_never_deferred(s))
            tutorial_note("Every W runs right after its own B: nothing is deferred.  That is 1F1B with the\n"
                          "backward split: the gradient leaves a stage after B, but each stage still idles\n"
                          "(p - 1)(F + B), bubble 2(p-1)/(3m+2(p-1)) = %.4f.  ZB-H1 idles (p - 1)(F + B - W):\n"
                          "keep st W passes owed in the steady state, run them in the cool-down (blank 4).", at_once);
        else if (kept_wrong >= 0)
            tutorial_note("Stage %d keeps %d W pass%s owed in the steady state; ZB-H1 keeps st = %d there:\n"
                          "stage st runs its last B while the gradient still has st stages to go back, and the\n"
                          "st W passes it kept fill that time (blank 4).", kept_wrong,
                          owed_in_steady_state(s, kept_wrong), owed_in_steady_state(s, kept_wrong) == 1 ? "" : "es",
                          kept_wrong);
        else if ((cool_b = cooldown_without_w(s, &cool_stage)) >= 0)
            tutorial_note("In the cool-down stage %d runs no W between B%d and B%d: there it only waits for the\n"
                          "next gradient.  Run one W after each cool-down B but the last (blank 4).",
                          cool_stage, cool_b, cool_b + 1);
        note_compute(s, kept_wrong >= 0 ? kept_wrong : cool_stage >= 0 ? cool_stage : 0);
        tutorial_note("Your timeline, F = B = W = 1:");
        note_timeline(s, t);
        goto done;
    }
    for (int st = 0; st < p; st++) {
        int full = ptdp_schedule_peak_in_flight(s, st), held = ptdp_schedule_peak_deferred(s, st),
            most = ptdp_schedule_peak_deferred(ref, st);
        if (full > (p - st < m ? p - st : m)) {
            tutorial_wrong("your ZB-H1, p = %d, m = %d: stage %d holds the full activations of %d micro-batches at "
                           "once (F to B); 1F1B, and so ZB-H1, holds p - s = %d.", p, m, st, full, p - st);
            note_compute(s, st);
            goto done;
        }
        if (held > most) {
            tutorial_wrong("your ZB-H1, p = %d, m = %d: the bubble is right (%.4f), but stage %d owes up to %d W "
                           "passes at once, each keeping what its W needs (the layers' inputs and output "
                           "gradients); ZB-H1 owes at most st + 1 = %d.", p, m, bubble, st, held, most);
            if (kept_wrong >= 0)
                tutorial_note("Stage %d keeps %d W pass%s owed in the steady state; ZB-H1 keeps st = %d (blank 4).",
                              kept_wrong, owed_in_steady_state(s, kept_wrong),
                              owed_in_steady_state(s, kept_wrong) == 1 ? "" : "es", kept_wrong);
            note_compute(s, st);
            goto done;
        }
    }
    ok = true;
done:
    ptdp_schedule_timeline_destroy(t);
    ptdp_schedule_destroy(s);
    ptdp_schedule_destroy(ref);
    return ok;
}

static bool check_zb_h1(void)
{
    static const int shapes[][2] = { { 2, 2 }, { 2, 5 }, { 3, 3 }, { 4, 4 }, { 4, 6 },
                                     { 4, 8 }, { 6, 9 }, { 8, 16 }, { 1, 1 } };
    for (size_t n = 0; n < sizeof shapes / sizeof shapes[0]; n++)
        if (!check_zb_shape(shapes[n][0], shapes[n][1]))
            return false;
    ptdp_schedule *s = NULL;
    tutorial_ok("blank 4: your ZB-H1 for 9 shapes (p = 1..8, m >= p) is valid and deadlock-free; bubble = "
                "(p-1)/(3m+p-1) with F = B = W; full activations (F to B) for at most p - s micro-batches, "
                "W passes owed at most s + 1");

    /* Show it: p = 4, m = 8, beside W right after B and 1F1B. */
    ptdp_schedule *one = NULL;
    ptdp_schedule_timeline *t;
    const ptdp_schedule_costs costs = { .forward = 1, .backward = 2, .backward_input = 1, .backward_weight = 1 };
    char why[256];
    int placed;
    if (ptdp_schedule_alloc("zb-h1", 4, 8, &s) == 0 && generate(lesson_zb_h1, s, &placed, why, sizeof why) == 0 &&
        placed == 0 &&
        ptdp_schedule_create("1f1b", 4, 8, &one) == 0 && ptdp_schedule_simulate(s, &costs, &t) == 0) {
        tutorial_note("p = 4, m = 8, F = B = W = 1: makespan %g, bubble %.4f (W right after its B: %.4f; 1F1B\n"
                      "with an unsplit backward of 2: %.4f).  Idle per stage: %g %g %g %g = (p - 1)(F + B - W).",
                      t->makespan, t->bubble, 2.0 * 3 / (3.0 * 8 + 2.0 * 3), bubble_of(one, &costs, NULL),
                      t->idle[0], t->idle[1], t->idle[2], t->idle[3]);
        note_timeline(s, t);
        tutorial_note("full activations held (F to B): %d %d %d %d, 1F1B's p - s; W passes owed at once: %d %d %d %d",
                      ptdp_schedule_peak_in_flight(s, 0), ptdp_schedule_peak_in_flight(s, 1),
                      ptdp_schedule_peak_in_flight(s, 2), ptdp_schedule_peak_in_flight(s, 3),
                      ptdp_schedule_peak_deferred(s, 0), ptdp_schedule_peak_deferred(s, 1),
                      ptdp_schedule_peak_deferred(s, 2), ptdp_schedule_peak_deferred(s, 3));
        ptdp_schedule_timeline_destroy(t);
    }
    ptdp_schedule_destroy(one);
    ptdp_schedule_destroy(s);
    return true;
}

/* ========================================================= 4. DualPipeV */

/* The reference's count of each phase on device r: the table of the
 * library's ptdp_schedule_dualpipev (src/parallel/schedule.c). */
static void v_reference(int p, int r, int m, int n[8])
{
    const int before = p - r - 1, after = r + 1;
    const int ref[8] = { 2 * before, after, before, m - 2 * p + r + 1, before, after, before, after };
    memcpy(n, ref, sizeof ref);
}

/* Why each phase repeats as often as it does (phase 1's, with its count of
 * devices, in note_wrong_phases). */
static const char *const v_phase_rule[8] = {
    NULL,
    "phases 2, 6 and 8 repeat as often as each other: once for the device and once for each above it",
    "phases 3, 5 and 7 repeat as often as each other: once for each device below",
    "phase 4 takes what is left of chunk 0's m forwards after phases 1 and 2",
    "phases 3, 5 and 7 repeat as often as each other: once for each device below",
    "phases 2, 6 and 8 repeat as often as each other: once for the device and once for each above it",
    "phases 3, 5 and 7 repeat as often as each other: once for each device below",
    "phase 8 runs the W passes still owed, as often as phases 2 and 6",
};

/* Name the phases whose counts on device r are not the reference's, each
 * with the rule that sets it (at most three). */
static void note_wrong_phases(int p, int r, const int yours[8], const int ref[8])
{
    for (int k = 0, shown = 0; k < 8 && shown < 3; k++) {
        if (yours[k] == ref[k])
            continue;
        shown++;
        const int off = yours[k] - ref[k], below = p - r - 1;
        if (k == 0 && below == 0) {
            tutorial_note("Phase 1 fills chunk 0's pipe below device %d, and there is none: device %d is the V's tip,\n"
                          "its chunk 0 hands each micro-batch straight to its chunk 1.", r, r);
        } else if (k == 0) {
            char below_text[48];
            snprintf(below_text, sizeof below_text, below == 1 ? "the device below" : "each of the %d devices below",
                     below);
            tutorial_note("Phase 1 fills chunk 0's pipe below device %d: a micro-batch crosses %s twice, down and "
                          "back up.", r, below_text);
        } else {
            tutorial_note("Phase %d (count[%d]) is %d too %s on device %d: %s.", k + 1, k, off > 0 ? off : -off,
                          off > 0 ? "many" : "few", r, v_phase_rule[k]);
        }
    }
}

/* Per device: chunk c's forwards, whole or split backwards, W passes, and
 * the split backwards (B) whose W is owed. */
typedef struct { int f[2], b[2], w, split; } v_counts;

static v_counts count_v(const ptdp_schedule *s, int st)
{
    v_counts n = { { 0, 0 }, { 0, 0 }, 0, 0 };
    for (int i = 0; i < s->stage[st].count; i++) {
        const ptdp_action *a = &s->stage[st].actions[i];
        if (a->kind == PTDP_ACT_FORWARD)
            n.f[a->chunk]++;
        else if (a->kind == PTDP_ACT_BACKWARD || a->kind == PTDP_ACT_BACKWARD_INPUT)
            n.b[a->chunk]++;
        else if (a->kind == PTDP_ACT_BACKWARD_WEIGHT)
            n.w++;
        n.split += a->kind == PTDP_ACT_BACKWARD_INPUT;
    }
    return n;
}

/* Your counts as C sees them: count[0] .. count[7] set, nothing past them.
 * Called with room for more than eight (a count written at count[8] lands
 * there) and every slot marked unset. */
static bool v_counts_written(int p, int m)
{
    enum { UNSET = -1000003, ROOM = 16 };
    for (int r = 0; r < p; r++) {
        int c[ROOM], ref[8];
        for (int k = 0; k < ROOM; k++)
            c[k] = UNSET;
        watch_begin(NULL, "5", "", "lesson_dualpipev_phases(p = %d, r = %d, m = %d)", p, r, m);
        int rc = lesson_dualpipev_phases(p, r, m, c);
        watch_end();
        if (tutorial_report_blank())
            return false;
        if (rc != PTDP_OK) {
            tutorial_wrong("p = %d, m = %d: lesson_dualpipev_phases returned %s for device %d (blank 5).", p, m,
                           ptdp_strerror(rc), r);
            return false;
        }
        int past = -1, unset = -1;
        for (int k = ROOM - 1; k >= 0; k--) {
            if (k >= 8 && c[k] != UNSET)
                past = k;
            if (k < 8 && c[k] == UNSET)
                unset = k;
        }
        if (past < 0 && unset < 0)
            continue;
        if (past >= 0)
            tutorial_wrong("p = %d, m = %d: for device %d you write count[%d], past the eight counts (blank 5): "
                           "count[0] is phase 1 and count[7] phase 8.", p, m, r, past);
        else
            tutorial_wrong("p = %d, m = %d: for device %d you never set count[%d], phase %d's count (blank 5): "
                           "count[0] is phase 1 and count[7] phase 8.", p, m, r, unset, unset + 1);
        v_reference(p, r, m, ref);
        bool shifted = true;
        for (int k = 0; k + 1 < 8; k++)
            shifted = shifted && c[k + 1] == ref[k];
        if (shifted)
            tutorial_note("Your count[1] .. count[7] are phases 1 .. 7: written 1-based.  C counts from 0: phase k's\n"
                          "count is count[k - 1].");
        return false;
    }
    return true;
}

/* Every chunk forwards and backwards each micro-batch once, and each
 * device runs the W of every B it split: if not, say which count is off,
 * which phases run it, and which of your phase counts differ. */
static bool v_counts_right(const ptdp_schedule *s, int p, int m)
{
    static const char *const runs[4] = {
        "chunk 0's forwards run in phases 1, 2 and 4",
        "chunk 1's forwards run in phases 2, 3, 4 and 5",
        "chunk 0's backwards run in phases 4, 5, 6 and 7",
        "chunk 1's backwards run in phases 3, 4, 5 and 6",
    };
    for (int st = 0; st < p; st++) {
        const v_counts n = count_v(s, st);
        const int got[4] = { n.f[0], n.f[1], n.b[0], n.b[1] };
        int c[8] = { 0 }, ref[8];
        lesson_dualpipev_phases(p, st, m, c);
        v_reference(p, st, m, ref);
        for (int k = 0; k < 4; k++)
            if (got[k] != m) {
                tutorial_wrong("p = %d, m = %d: device %d runs %d %s%s through chunk %d, not m = %d (blank 5).  "
                               "Your counts for it: %d %d %d %d %d %d %d %d.  %s: their counts must add up to "
                               "m.", p, m, st, got[k], k < 2 ? "forward" : "backward", got[k] == 1 ? "" : "s",
                               k % 2, m,
                               c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], runs[k]);
                note_wrong_phases(p, st, c, ref);
                return false;
            }
        if (n.w != n.split) {
            tutorial_wrong("p = %d, m = %d: device %d splits %d backward%s (B1' in phase 3, the second half of "
                           "phase 6, B0' in phase 7) but runs %d W pass%s (phases 3, 7 and 8) (blank 5): %s.  "
                           "Your counts for it: %d %d %d %d %d %d %d %d.", p, m, st, n.split,
                           n.split == 1 ? "" : "s", n.w,
                           n.w == 1 ? "" : "es",
                           n.w < n.split ? "a weight gradient would be missing from the step"
                                         : "a weight gradient would count twice",
                           c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]);
            note_wrong_phases(p, st, c, ref);
            return false;
        }
    }
    return true;
}

/* The first device whose counts are not the reference's: its phases named. */
static void note_first_wrong_phases(int p, int m)
{
    for (int st = 0; st < p; st++) {
        int c[8] = { 0 }, ref[8];
        lesson_dualpipev_phases(p, st, m, c);
        v_reference(p, st, m, ref);
        if (memcmp(c, ref, sizeof c) != 0) {
            note_wrong_phases(p, st, c, ref);
            return;
        }
    }
}

static bool check_v_shape(int p, int m)
{
    ptdp_schedule *s = NULL;
    char why[256];
    int placed;
    if (!v_counts_written(p, m))
        return false;
    if (ptdp_schedule_alloc_v("dualpipev", p, m, 2, &s) != 0) {
        tutorial_wrong("could not allocate a schedule for p = %d, m = %d", p, m);
        return false;
    }
    s->layout = PTDP_CHUNKS_V;
    int rc = generate(lesson_dualpipev, s, &placed, why, sizeof why);
    bool ok = true;
    ptdp_schedule_verdict v;
    const ptdp_schedule_costs costs = { .forward = 1, .backward = 2, .backward_input = 1, .backward_weight = 1 };
    ptdp_schedule_timeline *t = NULL;
    const double want = (double)(p - 1) / (3.0 * m + p - 1);
    if (rc != PTDP_OK || s->overflow) {
        tutorial_wrong("p = %d, m = %d: lesson_dualpipev_phases returned %s%s (blank 5): a count is negative, "
                       "more than m, or the blank is unfinished", p, m, ptdp_strerror(rc),
                       s->overflow ? " and the lists overflowed" : "");
        note_first_wrong_phases(p, m);
        ok = false;
    } else if (!v_counts_right(s, p, m)) {
        ok = false;
    } else if (placed != PTDP_OK || ptdp_schedule_validate(s, &v) != PTDP_OK) {
        tutorial_wrong("p = %d, m = %d: your V cannot run: %s (blank 5)", p, m,
                       placed != PTDP_OK ? why : v.message);
        note_first_wrong_phases(p, m);
        ok = false;
    } else if (bubble_of(s, &costs, &t) < 0 || fabs(t->bubble - want) > TOL) {
        tutorial_wrong("p = %d, m = %d, F = B = W = 1: your bubble is %.6f, DualPipeV's (p-1)/(3m+p-1) is %.6f "
                       "(blank 5).  Each chunk runs each micro-batch once, so the phases are there but in the "
                       "wrong proportions: a device waits where the reference keeps it busy.",
                       p, m, t != NULL ? t->bubble : -1.0, want);
        note_first_wrong_phases(p, m);
        if (t != NULL)
            note_timeline(s, t);
        ok = false;
    }
    ptdp_schedule_timeline_destroy(t);
    ptdp_schedule_destroy(s);
    return ok;
}

static bool check_dualpipev(void)
{
    static const int shapes[][2] = { { 2, 4 }, { 2, 5 }, { 3, 6 }, { 3, 7 }, { 4, 8 }, { 4, 10 },
                                     { 5, 11 }, { 6, 12 } };
    for (size_t n = 0; n < sizeof shapes / sizeof shapes[0]; n++)
        if (!check_v_shape(shapes[n][0], shapes[n][1]))
            return false;
    tutorial_ok("blank 5: your DualPipeV for 8 shapes (p = 2..6 devices, m >= 2p) runs every micro-batch through "
                "both chunks once, valid and deadlock-free; bubble = (p-1)/(3m+p-1) with F = B = W, ZB-H1's on "
                "half the devices");

    /* Show it: p = 4 devices (8 stages), m = 10, beside ZB-H1 on 8. */
    ptdp_schedule *s = NULL, *zb = NULL;
    ptdp_schedule_timeline *t = NULL;
    const ptdp_schedule_costs costs = { .forward = 1, .backward = 2, .backward_input = 1, .backward_weight = 1 };
    char why[256];
    int placed;
    if (ptdp_schedule_alloc_v("dualpipev", 4, 10, 2, &s) == 0) {
        s->layout = PTDP_CHUNKS_V;
        if (generate(lesson_dualpipev, s, &placed, why, sizeof why) == 0 && placed == 0 &&
            ptdp_schedule_create("zb-h1", 8, 10, &zb) == 0 && ptdp_schedule_simulate(s, &costs, &t) == 0) {
            tutorial_note("p = 4 devices, 8 stages, m = 10, F = B = W = 1: makespan %g, bubble %.4f; ZB-H1 on 8 "
                          "devices: %.4f.  Idle per device: %g %g %g %g = 2(p - 1) = (p-1)(F&B + B - 3W).",
                          t->makespan, t->bubble, bubble_of(zb, &costs, NULL), t->idle[0], t->idle[1],
                          t->idle[2], t->idle[3]);
            note_timeline(s, t);
            tutorial_note("activations held, in stages' micro-batches: %d %d %d %d = PP + 1 with PP = 8 stages",
                          ptdp_schedule_peak_in_flight(s, 0), ptdp_schedule_peak_in_flight(s, 1),
                          ptdp_schedule_peak_in_flight(s, 2), ptdp_schedule_peak_in_flight(s, 3));
        }
    }
    ptdp_schedule_timeline_destroy(t);
    ptdp_schedule_destroy(zb);
    ptdp_schedule_destroy(s);
    return true;
}

int main(void)
{
    tutorial_begin("09", "filling the bubble: interleaved 1F1B's chunks, ZB-H1's deferred weight gradients, "
                         "DualPipeV's V, DualPipe's two copies");
    if (check_mapping() && check_interleaved() && check_zb_h1() && check_dualpipev())
        check_dualpipe();   /* blank 6: the mirror's sum (check_dualpipe.c) */
    return tutorial_end();
}
