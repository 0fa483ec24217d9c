/*
 * test_clock_trace.c — device profiles, the cost formulas of clock.h, wall
 * time, and Chrome traces: recorded, written atomically, parsed back.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "ptdp/clock.h"
#include "ptdp/error.h"
#include "ptdp/trace.h"

/* Relative comparison for modelled seconds. */
static int close_to(double got, double want)
{
    return fabs(got - want) <= 1e-12 * fabs(want) + 1e-300;
}

static const harness_tcase clock_tests = { .name = "clock" };

/* ---- Profiles ------------------------------------------------------------- */

TEST(clock_tests, test_profiles_table)
{
    int n = 0;
    const ptdp_profile *p = ptdp_profiles(&n);
    ck_assert_int_ge(n, 4);
    ck_assert_ptr_eq(ptdp_profile_default(), &p[0]);
    ck_assert_str_eq(p[0].name, "dgx-a100");
    static const char *const must[] = { "dgx-a100", "h100-nvlink", "laptop-cpu", "ideal" };
    for (int k = 0; k < 4; k++)
        ck_assert_msg(ptdp_profile_find(must[k]) != NULL, "no profile %s", must[k]);
    for (int i = 0; i < n; i++) {
        ck_assert_ptr_eq(ptdp_profile_find(p[i].name), &p[i]);
        ck_assert(p[i].description != NULL && p[i].description[0] != '\0');
        ck_assert(p[i].peak_flops > 0);
        ck_assert(p[i].alpha_s >= 0 && p[i].beta_Bps >= 0);
        for (int j = 0; j < i; j++)
            ck_assert_str_ne(p[i].name, p[j].name);
    }
    ck_assert_ptr_null(ptdp_profile_find("tpu-v9"));
    ck_assert_ptr_null(ptdp_profile_find(NULL));
    const ptdp_profile *ideal = ptdp_profile_find("ideal");
    ck_assert_int_eq(ideal->ideal, 1);
    ck_assert(ideal->alpha_s == 0 && ideal->beta_Bps == 0);
    ck_assert_int_eq(ptdp_profile_default()->ideal, 0);
}
END_TEST

/* ---- The cost model -------------------------------------------------------- */

static const ptdp_profile test_link = { "test", "alpha 1 ms, beta 1 MB/s", 1e9, 1e-3, 1e6, 0 };

TEST(clock_tests, test_cost_message)
{
    ck_assert(close_to(ptdp_cost_message(&test_link, 0), 1e-3));
    ck_assert(close_to(ptdp_cost_message(&test_link, 2000000), 1e-3 + 2.0));
    const ptdp_profile *a100 = ptdp_profile_find("dgx-a100");
    ck_assert(close_to(ptdp_cost_message(a100, 1 << 20),
                       a100->alpha_s + (double)(1 << 20) / a100->beta_Bps));
    ck_assert(ptdp_cost_message(ptdp_profile_find("ideal"), 1 << 30) == 0.0);
}
END_TEST

TEST(clock_tests, test_cost_collectives)
{
    const ptdp_profile *p = &test_link;
    const double a = p->alpha_s, b = p->beta_Bps, S = 4e6;
    /* The example of clock.h: all_reduce over 4 = 6 (alpha + S/(4 beta)). */
    ck_assert(close_to(ptdp_cost_collective(p, PTDP_COLL_ALL_REDUCE, 4000000, 4), 6 * (a + S / (4 * b))));
    ck_assert(close_to(ptdp_cost_collective(p, PTDP_COLL_ALL_REDUCE, 4000000, 2), 2 * (a + S / (2 * b))));
    ck_assert(close_to(ptdp_cost_collective(p, PTDP_COLL_REDUCE_SCATTER, 4000000, 8), 7 * (a + S / (8 * b))));
    ck_assert(close_to(ptdp_cost_collective(p, PTDP_COLL_ALL_GATHER, 4000000, 3), 2 * (a + S / (3 * b))));
    ck_assert(close_to(ptdp_cost_collective(p, PTDP_COLL_GATHER, 4000000, 5), 4 * (a + S / (5 * b))));
    ck_assert(close_to(ptdp_cost_collective(p, PTDP_COLL_SCATTER, 4000000, 5), 4 * (a + S / (5 * b))));
    ck_assert(close_to(ptdp_cost_collective(p, PTDP_COLL_ALL_TO_ALL, 4000000, 4), 3 * (a + S / (4 * b))));
    /* Trees: ceil(log2 n) rounds. */
    ck_assert(close_to(ptdp_cost_collective(p, PTDP_COLL_BROADCAST, 4000000, 8), 3 * (a + S / b)));
    ck_assert(close_to(ptdp_cost_collective(p, PTDP_COLL_BROADCAST, 4000000, 5), 3 * (a + S / b)));
    ck_assert(close_to(ptdp_cost_collective(p, PTDP_COLL_REDUCE, 4000000, 2), 1 * (a + S / b)));
    ck_assert(close_to(ptdp_cost_collective(p, PTDP_COLL_BARRIER, 0, 5), 3 * a));
    ck_assert(close_to(ptdp_cost_collective(p, PTDP_COLL_BARRIER, 0, 64), 6 * a));
    ck_assert(close_to(ptdp_cost_collective(p, PTDP_COLL_BARRIER, 0, 65), 7 * a));
    ck_assert(close_to(ptdp_cost_collective(p, PTDP_COLL_SEND, 4000000, 2), a + S / b));
    /* One device: nothing to do, for every operation. */
    for (int op = 0; op < PTDP_COLL_COUNT; op++)
        ck_assert(ptdp_cost_collective(p, (ptdp_coll)op, 4000000, 1) == 0.0);
    /* The ideal profile's links are free. */
    const ptdp_profile *ideal = ptdp_profile_find("ideal");
    for (int op = 0; op < PTDP_COLL_COUNT; op++)
        ck_assert(ptdp_cost_collective(ideal, (ptdp_coll)op, 1 << 26, 8) == 0.0);
    /* The ring's bandwidth term is 2(n-1)/n S / beta: nearly 2 S / beta for large n. */
    double t64 = ptdp_cost_collective(&(ptdp_profile){ "bw", "", 1, 0, 1e9, 0 },
                                      PTDP_COLL_ALL_REDUCE, 1000000000, 64);
    ck_assert(close_to(t64, 2.0 * 63.0 / 64.0));
}
END_TEST

TEST(clock_tests, test_wall_clock)
{
    double t0 = ptdp_wall_now();
    struct timespec ten_ms = { 0, 10 * 1000 * 1000 };
    nanosleep(&ten_ms, NULL);
    double t1 = ptdp_wall_now();
    ck_assert_msg(t1 - t0 >= 0.009 && t1 - t0 < 5.0, "slept 10 ms, clock says %g s", t1 - t0);
    double prev = ptdp_wall_now();
    long backwards = 0;
    for (int i = 0; i < 100000; i++) {
        double t = ptdp_wall_now();
        backwards += t < prev;
        prev = t;
    }
    ck_assert_int_eq(backwards, 0);
}
END_TEST

/* ---- A small JSON parser, to read traces back ---------------------------------- */

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;
typedef struct jval {
    jtype type;
    double num;
    char *str;                  /* J_STR: decoded UTF-8                      */
    int n;                      /* J_ARR / J_OBJ: children                   */
    struct jval *kids;
    char **keys;                /* J_OBJ                                     */
} jval;

typedef struct { const char *p; int ok; } jparser;

static void jskip(jparser *j) { while (j->ok && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t')) j->p++; }

static void jput_utf8(char **out, unsigned cp)
{
    unsigned char *o = (unsigned char *)*out;
    if (cp < 0x80) { *o++ = (unsigned char)cp; }
    else if (cp < 0x800) { *o++ = (unsigned char)(0xC0 | cp >> 6); *o++ = (unsigned char)(0x80 | (cp & 63)); }
    else { *o++ = (unsigned char)(0xE0 | cp >> 12); *o++ = (unsigned char)(0x80 | ((cp >> 6) & 63));
           *o++ = (unsigned char)(0x80 | (cp & 63)); }
    *out = (char *)o;
}

static char *jstring(jparser *j)
{
    if (*j->p != '"') { j->ok = 0; return NULL; }
    j->p++;
    char *buf = malloc(strlen(j->p) * 3 + 1), *o = buf;
    while (j->ok && *j->p != '"') {
        unsigned char c = (unsigned char)*j->p;
        if (c == '\0' || c < 0x20) { j->ok = 0; break; }      /* raw control char */
        if (c != '\\') { *o++ = (char)c; j->p++; continue; }
        j->p++;
        if (*j->p == '\0') { j->ok = 0; break; }
        switch (*j->p++) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            unsigned cp = 0;
            for (int k = 0; k < 4; k++) {
                char h = *j->p;
                if (h == '\0') { j->ok = 0; break; }
                j->p++;
                cp <<= 4;
                if (h >= '0' && h <= '9') cp |= (unsigned)(h - '0');
                else if (h >= 'a' && h <= 'f') cp |= (unsigned)(h - 'a' + 10);
                else if (h >= 'A' && h <= 'F') cp |= (unsigned)(h - 'A' + 10);
                else j->ok = 0;
            }
            jput_utf8(&o, cp);
            break;
        }
        default: j->ok = 0;
        }
    }
    *o = '\0';
    if (j->ok) j->p++;
    return buf;
}

static void jvalue(jparser *j, jval *v);

static void jlist(jparser *j, jval *v, char close, int with_keys)
{
    j->p++;
    jskip(j);
    if (*j->p == close) { j->p++; return; }
    for (;;) {
        v->kids = realloc(v->kids, (size_t)(v->n + 1) * sizeof *v->kids);
        if (with_keys) {
            v->keys = realloc(v->keys, (size_t)(v->n + 1) * sizeof *v->keys);
            jskip(j);
            v->keys[v->n] = jstring(j);
            jskip(j);
            if (*j->p++ != ':') j->ok = 0;
        }
        jvalue(j, &v->kids[v->n++]);
        jskip(j);
        if (!j->ok) return;
        if (*j->p == ',') { j->p++; continue; }
        if (*j->p == close) { j->p++; return; }
        j->ok = 0;
        return;
    }
}

static void jvalue(jparser *j, jval *v)
{
    memset(v, 0, sizeof *v);
    jskip(j);
    if (!j->ok) return;
    char c = *j->p;
    if (c == '{') { v->type = J_OBJ; jlist(j, v, '}', 1); }
    else if (c == '[') { v->type = J_ARR; jlist(j, v, ']', 0); }
    else if (c == '"') { v->type = J_STR; v->str = jstring(j); }
    else if (strncmp(j->p, "true", 4) == 0 || strncmp(j->p, "null", 4) == 0) { v->type = c == 't' ? J_BOOL : J_NULL; j->p += 4; }
    else if (strncmp(j->p, "false", 5) == 0) { v->type = J_BOOL; j->p += 5; }
    else if (c == '-' || isdigit((unsigned char)c)) {
        /* -?digits(.digits)?([eE][+-]?digits)? — no NaN, no hex, no "1." */
        const char *q = j->p + (c == '-');
        int digits = 0;
        while (isdigit((unsigned char)*q)) { q++; digits++; }
        if (digits == 0) j->ok = 0;
        if (*q == '.') {
            for (digits = 0, q++; isdigit((unsigned char)*q); q++) digits++;
            if (digits == 0) j->ok = 0;
        }
        if (*q == 'e' || *q == 'E') {
            q += (q[1] == '+' || q[1] == '-') ? 2 : 1;
            for (digits = 0; isdigit((unsigned char)*q); q++) digits++;
            if (digits == 0) j->ok = 0;
        }
        v->type = J_NUM;
        v->num = strtod(j->p, NULL);
        j->p = q;
    } else j->ok = 0;
}

static void jfree(jval *v)
{
    for (int i = 0; i < v->n; i++) {
        jfree(&v->kids[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->kids);
    free(v->keys);
    free(v->str);
}

static const jval *jget(const jval *obj, const char *key)
{
    for (int i = 0; obj->type == J_OBJ && i < obj->n; i++)
        if (obj->keys[i] && strcmp(obj->keys[i], key) == 0)
            return &obj->kids[i];
    return NULL;
}

/* Parse the whole text: one value and nothing after it. */
static int jparse(const char *text, jval *out)
{
    jparser j = { text, 1 };
    jvalue(&j, out);
    jskip(&j);
    return j.ok && *j.p == '\0';
}

static const harness_tcase trace_tests = { .name = "trace", .timeout_s = 60 };

TEST(trace_tests, test_json_parser_rejects)
{
    /* The validator must be able to say no, or the trace test proves nothing. */
    static const char *const bad[] = { "", "{", "{\"a\":1,}", "[1 2]", "{\"a\":nan}",
                                       "\"tab\there\"", "[1.]", "{\"a\" 1}", "[]x",
                                       "[0x10]", "[-]", "[1e]", "\"\\u12\"", "\"open" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        jval v;
        ck_assert_msg(!jparse(bad[i], &v), "accepted %s", bad[i]);
        jfree(&v);
    }
    jval v;
    ck_assert(jparse("{\"a\":[1,-2.5e3,\"x\\u00e9\"],\"b\":{}}", &v));
    ck_assert_str_eq(jget(&v, "a")->kids[2].str, "x\xc3\xa9");
    jfree(&v);
}
END_TEST

/* ---- Traces ---------------------------------------------------------------- */

static ptdp_trace_event event(const char *name, const char *cat, double v0, double v1,
                              double w0, double w1, double bytes)
{
    ptdp_trace_event e;
    memset(&e, 0, sizeof e);
    snprintf(e.name, sizeof e.name, "%s", name);
    snprintf(e.cat, sizeof e.cat, "%s", cat);
    e.v0 = v0; e.v1 = v1; e.w0 = w0; e.w1 = w1; e.bytes = bytes;
    return e;
}

static char tmpdir[64];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ptdp-trace-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

TEST(trace_tests, test_trace_record)
{
    ptdp_trace *t = ptdp_trace_create(3);
    ck_assert_uint_eq(ptdp_trace_count(t), 0);
    for (int i = 0; i < 5000; i++) {
        ptdp_trace_event e = event("fc1 fwd", "compute", i, i + 1, 0, 0, i);
        ptdp_trace_add(t, &e);
    }
    ck_assert_uint_eq(ptdp_trace_count(t), 5000);
    const ptdp_trace_event *ev = ptdp_trace_events(t);
    long wrong = 0;
    for (int i = 0; i < 5000; i++)
        wrong += ev[i].v0 != i || ev[i].bytes != i || strcmp(ev[i].name, "fc1 fwd") != 0;
    ck_assert_int_eq(wrong, 0);
    ptdp_trace_destroy(t);
    ptdp_trace_destroy(NULL);
}
END_TEST

TEST(trace_tests, test_trace_limit_warns_once)
{
    char path[] = "/tmp/ptdp-stderr-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);

    ptdp_trace *t = ptdp_trace_create(6);
    ptdp_trace_event e = event("x", "compute", 0, 1, 0, 1, 0);
    size_t added = 0;
    while (ptdp_trace_count(t) == added && added < ((size_t)1 << 24)) {
        ptdp_trace_add(t, &e);
        added++;
    }
    for (int i = 0; i < 1000; i++)           /* well past the limit */
        ptdp_trace_add(t, &e);
    size_t kept = ptdp_trace_count(t);
    ptdp_trace_destroy(t);

    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    char *err = harness_read_file(path, NULL);
    unlink(path);

    ck_assert_msg(kept >= 100000 && kept < added, "kept %zu of %zu", kept, added);
    const char *first = strstr(err, "device 6");
    ck_assert_msg(first != NULL, "no warning: '%s'", err);
    ck_assert_msg(strstr(first + 1, "device 6") == NULL, "warned twice: '%s'", err);
    free(err);
}
END_TEST

TEST(trace_tests, test_trace_write_and_parse)
{
    make_tmpdir();
    char path[128];
    snprintf(path, sizeof path, "%s/trace.json", tmpdir);

    ptdp_trace *tr[3] = { ptdp_trace_create(0), NULL, ptdp_trace_create(2) };
    ptdp_trace_event e1 = event("fc1 fwd", "compute", 0.001, 0.0025, 0.5, 0.75, 0);
    ptdp_trace_event e2 = event("send\xe2\x86\x92" "2", "send", 0.0025, 0.003, 0.75, 0.8, 4096);
    ptdp_trace_event e3 = event("q\"b\\s\nt\t", "comm", 0.002, 0.001, 1, 2, 12);   /* v1 < v0 */
    ptdp_trace_event e4 = event("cut \xe2\x86", "idle", 0, NAN, 0, INFINITY, NAN);  /* broken */
    ptdp_trace_add(tr[0], &e1);
    ptdp_trace_add(tr[0], &e2);
    ptdp_trace_add(tr[2], &e3);
    ptdp_trace_add(tr[2], &e4);

    char msg[512] = "";
    ck_assert_int_eq(ptdp_trace_write_chrome(path, tr, 3, msg, sizeof msg), 0);

    ck_assert_int_eq(harness_count_entries(tmpdir, false), 1);   /* no temporary left behind */
    ck_assert_int_eq(access(path, F_OK), 0);

    char *text = harness_read_file(path, NULL);
    jval root;
    ck_assert_msg(jparse(text, &root), "not valid JSON:\n%s", text);
    const jval *evs = jget(&root, "traceEvents");
    ck_assert(evs && evs->type == J_ARR);

    int complete[2] = { 0, 0 }, proc_named[2] = { 0, 0 }, threads_named = 0;
    int seen_e1 = 0, seen_arrow = 0, seen_escapes = 0, seen_broken = 0;
    for (int i = 0; i < evs->n; i++) {
        const jval *e = &evs->kids[i];
        const jval *ph = jget(e, "ph"), *pid = jget(e, "pid"), *tid = jget(e, "tid");
        const jval *name = jget(e, "name"), *args = jget(e, "args");
        ck_assert(ph && ph->type == J_STR && pid && pid->type == J_NUM && name && name->type == J_STR);
        ck_assert(pid->num == 0 || pid->num == 1);
        int p = (int)pid->num;
        if (strcmp(ph->str, "M") == 0) {
            const jval *label = jget(args, "name");
            ck_assert(label && label->type == J_STR);
            if (strcmp(name->str, "process_name") == 0) {
                ck_assert_str_eq(label->str, p == 0 ? "virtual time" : "wall time");
                proc_named[p]++;
            } else if (strcmp(name->str, "thread_name") == 0) {
                char want[32];
                snprintf(want, sizeof want, "device %d", (int)tid->num);
                ck_assert_str_eq(label->str, want);
                ck_assert(tid->num == 0 || tid->num == 2);
                threads_named++;
            }
            continue;
        }
        ck_assert_str_eq(ph->str, "X");
        complete[p]++;
        const jval *ts = jget(e, "ts"), *dur = jget(e, "dur"), *bytes = jget(args, "bytes");
        ck_assert(ts && ts->type == J_NUM && dur && dur->type == J_NUM && dur->num >= 0);
        ck_assert(bytes && bytes->type == J_NUM);
        ck_assert(jget(e, "cat") != NULL);
        if (strcmp(name->str, "fc1 fwd") == 0) {
            seen_e1++;
            ck_assert(tid->num == 0);
            ck_assert(fabs(ts->num - (p == 0 ? 1000.0 : 500000.0)) < 1e-3);
            ck_assert(fabs(dur->num - (p == 0 ? 1500.0 : 250000.0)) < 1e-3);
        }
        if (strcmp(name->str, "send\xe2\x86\x92" "2") == 0) {
            seen_arrow++;
            ck_assert(bytes->num == 4096);
        }
        if (strcmp(name->str, "q\"b\\s\nt\t") == 0) {
            seen_escapes++;
            ck_assert(tid->num == 2 && bytes->num == 12);
            if (p == 0)
                ck_assert(dur->num == 0);                /* negative clamps to 0 */
        }
        if (strcmp(name->str, "cut \xef\xbf\xbd\xef\xbf\xbd") == 0)   /* U+FFFD twice */
            seen_broken++;
    }
    ck_assert_int_eq(complete[0], 4);
    ck_assert_int_eq(complete[1], 4);
    ck_assert_int_eq(proc_named[0], 1);
    ck_assert_int_eq(proc_named[1], 1);
    ck_assert_int_eq(threads_named, 4);                  /* 2 devices x 2 clocks */
    ck_assert_int_eq(seen_e1, 2);
    ck_assert_int_eq(seen_arrow, 2);
    ck_assert_int_eq(seen_escapes, 2);
    ck_assert_int_eq(seen_broken, 2);
    jfree(&root);
    free(text);

    /* Writing again replaces the file whole. */
    ck_assert_int_eq(ptdp_trace_write_chrome(path, tr, 0, msg, sizeof msg), 0);
    text = harness_read_file(path, NULL);
    ck_assert(jparse(text, &root));
    ck_assert_int_eq(jget(&root, "traceEvents")->n, 2);   /* the two process names */
    jfree(&root);
    free(text);
    struct stat st;   /* the mode fopen would give (file.h): 0666 minus the umask */
    mode_t mask = umask(022);
    umask(mask);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0666 & ~mask);

    unlink(path);
    rmdir(tmpdir);
    ptdp_trace_destroy(tr[0]);
    ptdp_trace_destroy(tr[2]);
}
END_TEST

TEST(trace_tests, test_trace_write_errors)
{
    ptdp_trace *t = ptdp_trace_create(0);
    ptdp_trace_event e = event("x", "compute", 0, 1, 0, 1, 0);
    ptdp_trace_add(t, &e);
    char msg[512] = "";

    /* A directory that does not exist. */
    int rc = ptdp_trace_write_chrome("/nonexistent-ptdp-dir/t.json", &t, 1, msg, sizeof msg);
    ck_assert_int_eq(rc, PTDP_EIO);
    ck_assert_msg(strstr(msg, "/nonexistent-ptdp-dir/t.json") != NULL, "%s", msg);

    /* The target is a directory: the rename fails, and the temporary is gone. */
    make_tmpdir();
    char target[128], inner[160];
    snprintf(target, sizeof target, "%s/busy", tmpdir);
    ck_assert_int_eq(mkdir(target, 0755), 0);
    snprintf(inner, sizeof inner, "%s/keep", target);
    FILE *f = fopen(inner, "w");
    fclose(f);
    rc = ptdp_trace_write_chrome(target, &t, 1, msg, sizeof msg);
    ck_assert_int_eq(rc, PTDP_EIO);
    ck_assert_msg(strstr(msg, "rename") && strstr(msg, target), "%s", msg);
    ck_assert_int_eq(harness_count_entries(tmpdir, false), 1);   /* busy, and no temporary */
    ck_assert_int_eq(access(target, F_OK), 0);
    unlink(inner);
    rmdir(target);
    rmdir(tmpdir);
    ptdp_trace_destroy(t);
}
END_TEST

int main(void)
{
    return harness_main("clock-trace");
}
