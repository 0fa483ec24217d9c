/*
 * test_clock_trace.c — device profiles, the cost formulas of clock.h, wall
 * time, and Chrome traces: recorded, written atomically, parsed back.
 *
 * The cluster profiles' terms are checked by hand too: two link levels
 * (a step across nodes at net_alpha and min(beta, n/nodes · net_beta)),
 * messages between nodes, the GEMM efficiency curve, the bf16 peak, the
 * FP8 peak and the quantization passes — and in the simulator: groups and
 * messages that cross nodes, a --dp 16 run priced with the network, a bf16
 * run at the bf16 peak, an --fp8 run's products at the FP8 peak.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "equivalence/equiv.h"
#include "harness.h"
#include "ptdp/clock.h"
#include "ptdp/comm.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/fp8_quant.h"
#include "ptdp/launch.h"
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

static const ptdp_profile test_link = { "test", "alpha 1 ms, beta 1 MB/s", 1e9, 1e-3, 1e6, 0, .gpus_per_node = 0 };

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
    double t64 = ptdp_cost_collective(&(ptdp_profile){ "bw", "", 1, 0, 1e9, 0, .gpus_per_node = 0 },
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


/* ---- Clusters: two link levels ------------------------------------------------ */

static const harness_tcase cluster_tests = { .name = "cluster", .timeout_s = 120 };

TEST(cluster_tests, test_cluster_profiles)
{
    int n = 0;
    const ptdp_profile *p = ptdp_profiles(&n);
    /* the four textbook profiles first, one node, as they were */
    static const char *const first[] = { "dgx-a100", "h100-nvlink", "laptop-cpu", "ideal" };
    for (int i = 0; i < 4; i++) {
        ck_assert_str_eq(p[i].name, first[i]);
        ck_assert(p[i].gpus_per_node == 0 && p[i].gemm == NULL && p[i].peak_flops_bf16 == 0);
        ck_assert(p[i].net_alpha_s == 0 && p[i].net_beta_Bps == 0 && p[i].mem_bytes == 0);
    }
    ck_assert(p[0].peak_flops == 156e12 && p[0].alpha_s == 3e-6 && p[0].beta_Bps == 300e9);
    const ptdp_profile *a = ptdp_profile_find("dgx-a100-80g"), *h = ptdp_profile_find("dgx-h100");
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(h);
    ck_assert(a->gpus_per_node == 8 && a->peak_flops == 156e12 && a->peak_flops_bf16 == 312e12);
    ck_assert(a->alpha_s == 3e-6 && a->beta_Bps == 300e9 && a->net_alpha_s == 10e-6 && a->net_beta_Bps == 25e9);
    ck_assert(a->mem_bytes == 80.0 * 1024 * 1024 * 1024 && a->gemm != NULL);
    ck_assert(h->gpus_per_node == 8 && h->peak_flops == 494e12 && h->peak_flops_bf16 == 989e12);
    ck_assert(h->alpha_s == 3e-6 && h->beta_Bps == 450e9 && h->net_alpha_s == 10e-6 && h->net_beta_Bps == 50e9);
    ck_assert(h->mem_bytes == a->mem_bytes && h->gemm != NULL);
}
END_TEST

TEST(cluster_tests, test_nodes_spanned)
{
    const ptdp_profile *a = ptdp_profile_find("dgx-a100-80g"), *old = ptdp_profile_default();
    ck_assert_int_eq(ptdp_profile_node(a, 0), 0);
    ck_assert_int_eq(ptdp_profile_node(a, 7), 0);
    ck_assert_int_eq(ptdp_profile_node(a, 8), 1);
    ck_assert_int_eq(ptdp_profile_node(a, 63), 7);
    ck_assert_int_eq(ptdp_profile_node(old, 63), 0);
    const int in_node[] = { 0, 1, 2, 3, 4, 5, 6, 7 }, pair[] = { 3, 11 }, three[] = { 3, 9, 17, 18, 2 };
    int world[16];
    for (int r = 0; r < 16; r++)
        world[r] = r;
    ck_assert_int_eq(ptdp_profile_nodes_spanned(a, in_node, 8), 1);
    ck_assert_int_eq(ptdp_profile_nodes_spanned(a, pair, 2), 2);
    ck_assert_int_eq(ptdp_profile_nodes_spanned(a, three, 5), 3);
    ck_assert_int_eq(ptdp_profile_nodes_spanned(a, world, 16), 2);
    ck_assert_int_eq(ptdp_profile_nodes_spanned(a, world, 1), 1);
    ck_assert_int_eq(ptdp_profile_nodes_spanned(old, world, 16), 1);
    ck_assert_int_eq(ptdp_profile_nodes_spanned(a, NULL, 0), 1);
}
END_TEST

TEST(cluster_tests, test_two_level_collectives)
{
    const ptdp_profile *a = ptdp_profile_find("dgx-a100-80g");
    const double S = 64.0 * 1024 * 1024, na = 10e-6;
    const size_t bytes = 64u << 20;
    /* one node: exactly the one-level model, for every operation */
    for (int op = 0; op < PTDP_COLL_COUNT; op++) {
        ck_assert(ptdp_cost_collective_nodes(a, (ptdp_coll)op, bytes, 8, 1) ==
                  ptdp_cost_collective(a, (ptdp_coll)op, bytes, 8));
        ck_assert(ptdp_cost_collective_nodes(a, (ptdp_coll)op, bytes, 1, 1) == 0.0);
    }
    ck_assert(close_to(ptdp_cost_collective_nodes(a, PTDP_COLL_ALL_REDUCE, bytes, 8, 1),
                       14 * (3e-6 + S / (8 * 300e9))));
    /* 16 on 2 nodes, 8 a node: 8 NICs of 25 GB/s = 200 GB/s, under NVLink's 300 */
    ck_assert(close_to(ptdp_cost_collective_nodes(a, PTDP_COLL_ALL_REDUCE, bytes, 16, 2),
                       30 * (na + S / (16 * 200e9))));
    ck_assert(close_to(ptdp_cost_collective_nodes(a, PTDP_COLL_REDUCE_SCATTER, bytes, 16, 2),
                       15 * (na + S / (16 * 200e9))));
    ck_assert(close_to(ptdp_cost_collective_nodes(a, PTDP_COLL_BROADCAST, bytes, 16, 2), 4 * (na + S / 200e9)));
    ck_assert(close_to(ptdp_cost_collective_nodes(a, PTDP_COLL_BARRIER, 0, 16, 2), 4 * na));
    /* 2 on 2 nodes, 1 a node (DP across nodes, TP inside): one NIC, 25 GB/s */
    ck_assert(close_to(ptdp_cost_collective_nodes(a, PTDP_COLL_ALL_REDUCE, bytes, 2, 2), 2 * (na + S / (2 * 25e9))));
    /* 64 on 8 nodes: still 8 NICs a node */
    ck_assert(close_to(ptdp_cost_collective_nodes(a, PTDP_COLL_ALL_REDUCE, bytes, 64, 8),
                       126 * (na + S / (64 * 200e9))));
    /* NICs faster than NVLink together: capped by the link inside the node */
    ptdp_profile fast = *a;
    fast.net_beta_Bps = 50e9;   /* 8 x 50 = 400 > 300 */
    ck_assert(close_to(ptdp_cost_collective_nodes(&fast, PTDP_COLL_ALL_REDUCE, bytes, 16, 2),
                       30 * (na + S / (16 * 300e9))));
    /* the network is the slower level: crossing nodes costs more */
    ck_assert(ptdp_cost_collective_nodes(a, PTDP_COLL_ALL_REDUCE, bytes, 16, 2) >
              ptdp_cost_collective(a, PTDP_COLL_ALL_REDUCE, bytes, 16));
    /* a profile of one node has no network to use */
    const ptdp_profile *old = ptdp_profile_default();
    ck_assert(ptdp_cost_collective_nodes(old, PTDP_COLL_ALL_REDUCE, bytes, 16, 2) ==
              ptdp_cost_collective(old, PTDP_COLL_ALL_REDUCE, bytes, 16));
}
END_TEST

TEST(cluster_tests, test_message_between_nodes)
{
    const ptdp_profile *a = ptdp_profile_find("dgx-a100-80g"), *old = ptdp_profile_default();
    const size_t bytes = 1u << 20;
    ck_assert(ptdp_cost_message_between(a, bytes, 0, 7) == ptdp_cost_message(a, bytes));
    ck_assert(close_to(ptdp_cost_message_between(a, bytes, 0, 7), 3e-6 + bytes / 300e9));
    ck_assert(close_to(ptdp_cost_message_between(a, bytes, 7, 8), 10e-6 + bytes / 25e9));
    ck_assert(close_to(ptdp_cost_message_between(a, bytes, 17, 3), 10e-6 + bytes / 25e9));
    ck_assert(ptdp_cost_message_between(old, bytes, 0, 40) == ptdp_cost_message(old, bytes));
}
END_TEST

TEST(cluster_tests, test_peak_bf16)
{
    const ptdp_profile *a = ptdp_profile_find("dgx-a100-80g"), *h = ptdp_profile_find("dgx-h100");
    ck_assert(ptdp_profile_peak(a, 0) == 156e12 && ptdp_profile_peak(a, 1) == 312e12);
    ck_assert(ptdp_profile_peak(h, 0) == 494e12 && ptdp_profile_peak(h, 1) == 989e12);
    for (int i = 0; i < 4; i++) {   /* no bf16 peak: the one peak */
        const ptdp_profile *p = &ptdp_profiles(NULL)[i];
        ck_assert(ptdp_profile_peak(p, 0) == p->peak_flops && ptdp_profile_peak(p, 1) == p->peak_flops);
    }
}
END_TEST

/* The FP8 peak: dgx-h100's twice its bf16 peak; the A100 profiles have
 * none (their bf16 peak), the textbook ones neither (their one peak).  A
 * quantization pass moves (4 + 1) bytes an element at HBM bandwidth, free
 * on a profile that gives none. */
TEST(cluster_tests, test_peak_fp8)
{
    const ptdp_profile *h = ptdp_profile_find("dgx-h100");
    ck_assert(ptdp_profile_peak_fp8(h) == 2 * ptdp_profile_peak(h, 1) && h->peak_flops_fp8 == 1978e12);
    static const char *const a100[] = { "dgx-a100-80g", "hgx-a100-4" };
    for (int i = 0; i < 2; i++) {
        const ptdp_profile *a = ptdp_profile_find(a100[i]);
        ck_assert(a->peak_flops_fp8 == 0 && ptdp_profile_peak_fp8(a) == 312e12);
    }
    for (int i = 0; i < 4; i++) {
        const ptdp_profile *p = &ptdp_profiles(NULL)[i];
        ck_assert(ptdp_profile_peak_fp8(p) == p->peak_flops && ptdp_fp8_quantize_seconds(p, 1e9) == 0);
    }
    ck_assert(close_to(ptdp_fp8_quantize_seconds(h, 1e9), 5e9 / 3.35e12));
    ck_assert(close_to(ptdp_fp8_quantize_seconds(ptdp_profile_find("dgx-a100-80g"), 1e9), 5e9 / 2.039e12));
}
END_TEST

/* An FP8 product in flops at the device's peak: at dgx-h100's FP8 peak
 * half a bf16 product's (halving is exact), plus its quantization's
 * seconds times the peak; on dgx-a100-80g under bf16 the bf16 product's
 * own flops plus the same, and a float device (TF32 peak) half of it. */
TEST(cluster_tests, test_fp8_gemm_cost)
{
    const ptdp_profile *h = ptdp_profile_find("dgx-h100"), *a = ptdp_profile_find("dgx-a100-80g");
    const double m = 4096, n = 3072, k = 768, q = m * k + n * k;
    const double gh = ptdp_gemm_cost_flops(h, m, n, k), ga = ptdp_gemm_cost_flops(a, m, n, k);
    ck_assert(ptdp_fp8_gemm_cost_flops(h, 1, m, n, k, 0) * 2 == gh);
    ck_assert(close_to(ptdp_fp8_gemm_cost_flops(h, 1, m, n, k, q), gh / 2 + 989e12 * 5 * q / 3.35e12));
    ck_assert(ptdp_fp8_gemm_cost_flops(a, 1, m, n, k, 0) == ga);
    ck_assert(close_to(ptdp_fp8_gemm_cost_flops(a, 1, m, n, k, q), ga + 312e12 * 5 * q / 2.039e12));
    ck_assert(ptdp_fp8_gemm_cost_flops(a, 0, m, n, k, 0) * 2 == ga);
    /* the quantization is memory-bound: a thin product pays more for it than its GEMM */
    ck_assert(ptdp_fp8_gemm_cost_flops(h, 1, 8, 8192, 8192, 8.0 * 8192 + 8192.0 * 8192) > gh);
}
END_TEST

/* ---- GEMM efficiency ------------------------------------------------------------- */

TEST(cluster_tests, test_gemm_without_curve)
{
    const double shapes[][3] = { { 1, 1, 1 }, { 3, 5, 7 }, { 4096, 1024, 333 }, { 12288, 4608, 8192 } };
    for (int i = 0; i < 4; i++) {
        const ptdp_profile *p = &ptdp_profiles(NULL)[i];
        for (int s = 0; s < 4; s++) {
            double m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            ck_assert(ptdp_gemm_efficiency(p, m, n, k) == 1.0);
            ck_assert(ptdp_gemm_cost_flops(p, m, n, k) == 2.0 * m * n * k);   /* bit for bit */
        }
    }
}
END_TEST

/* The curve of clock.c: e_max · fill against the memory roofline. */
LOOP_TEST(cluster_tests, test_gemm_curve, 2)
{
    const ptdp_profile *p = ptdp_profile_find(_i == 0 ? "dgx-a100-80g" : "dgx-h100");
    /* ml-engineering's MAMF table, bf16: efficiency and the best shape found */
    const double e_max = _i == 0 ? 271.2 / 312 : 794.5 / 989;
    const double best[3] = { _i == 0 ? 1024 : 2048, _i == 0 ? 10240 : 2048, _i == 0 ? 5120 : 13312 };
    double prev = 0;
    for (double d = 64; d <= 16384; d *= 2) {   /* squares: more of the GPU, more reuse */
        double e = ptdp_gemm_efficiency(p, d, d, d);
        ck_assert_msg(e > 0 && e <= e_max + 1e-15, "eff(%g^3) = %g outside (0, %g]", d, e, e_max);
        ck_assert_msg(e >= prev, "eff(%g^3) = %g below eff(%g^3) = %g", d, e, d / 2, prev);
        ck_assert(close_to(ptdp_gemm_cost_flops(p, d, d, d), 2 * d * d * d / e));
        prev = e;
    }
    /* large squares come near the best measured: within the last wave's
     * idle SMs (A100 8192^2: 2048 tiles in 19 waves of 108, 0.2%; H100:
     * in 16 waves of 132, 3%) */
    ck_assert(ptdp_gemm_efficiency(p, 8192, 8192, 8192) > (_i == 0 ? 0.99 : 0.96) * e_max);
    ck_assert(ptdp_gemm_efficiency(p, 16384, 16384, 16384) > 0.98 * e_max);
    /* a longer k only adds reuse */
    prev = 0;
    for (double k = 16; k <= 65536; k *= 2) {
        double e = ptdp_gemm_efficiency(p, 4096, 4096, k);
        ck_assert_msg(e >= prev && e <= e_max, "eff(4096, 4096, %g) = %g", k, e);
        prev = e;
    }
    /* a thin k is memory-bound: 8192 x 8192 x 64 is the roofline's AI/ridge */
    double ai = 8192.0 * 8192 * 64 / (8192.0 * 64 * 2 + 8192.0 * 8192);
    double ridge = _i == 0 ? 312e12 / 2.039e12 : 989e12 / 3.35e12;
    ck_assert(close_to(ptdp_gemm_efficiency(p, 8192, 8192, 64), ai / ridge));
    /* the published best shape: within 3% of its measured efficiency, not above */
    double at_best = ptdp_gemm_efficiency(p, best[0], best[1], best[2]);
    ck_assert_msg(at_best <= e_max && at_best > e_max - 0.03, "eff at the MAMF shape %g, measured %g", at_best,
                  e_max);
    /* wave quantisation by hand (A100: 108 SMs, 256 x 128 tiles): 2048^2
     * is 128 tiles, two waves of 108 */
    if (_i == 0)
        ck_assert(close_to(ptdp_gemm_efficiency(p, 2048, 2048, 2048), e_max * 2048.0 * 2048 / (2 * 108 * 256 * 128)));
    /* every shape in (0, 1]; an empty product costs nothing */
    for (double m = 1; m <= 1 << 16; m *= 7)
        for (double k = 1; k <= 1 << 16; k *= 5) {
            double e = ptdp_gemm_efficiency(p, m, 3 * m + 1, k);
            ck_assert_msg(e > 0 && e <= 1, "eff(%g, %g, %g) = %g", m, 3 * m + 1, k, e);
        }
    ck_assert(ptdp_gemm_efficiency(p, 0, 128, 128) == 1.0);
    ck_assert(ptdp_gemm_cost_flops(p, 0, 128, 128) == 0.0);
}
END_TEST

/* ---- Clusters in the simulator --------------------------------------------------- */

/* 16 devices of dgx-a100-80g (2 nodes): the world's all-reduce crosses
 * nodes with 8 NICs a node; a group of one device a node has one NIC; a
 * group inside a node keeps NVLink; a message to the other node takes the
 * network. */
static int cluster_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    const ptdp_profile *p = dev->profile;
    enum { COUNT = 1 << 16 };
    const size_t S = COUNT * sizeof(ptdp_real);
    static ptdp_real buf[16][COUNT];
    ptdp_real *x = buf[dev->rank];
    for (int i = 0; i < COUNT; i++)
        x[i] = (ptdp_real)(dev->rank + 1);

    ptdp_comm *across = NULL, *inside = NULL;   /* {r, r+8} and {8 of a node} */
    DEVICE_TRY(ptdp_comm_split(dev->world, dev->rank % 8, dev->rank, "across", &across));
    DEVICE_TRY(ptdp_comm_split(dev->world, dev->rank / 8, dev->rank, "inside", &inside));
    struct { ptdp_comm *c; double want; } cases[] = {
        { dev->world, ptdp_cost_collective_nodes(p, PTDP_COLL_ALL_REDUCE, S, 16, 2) },
        { across, 2 * (p->net_alpha_s + S / (2 * p->net_beta_Bps)) },
        { inside, ptdp_cost_collective(p, PTDP_COLL_ALL_REDUCE, S, 8) },
    };
    for (int i = 0; i < 3; i++) {
        double c0 = dev->clock.comm_s;
        DEVICE_TRY(ptdp_all_reduce(cases[i].c, x, x, COUNT, PTDP_REAL, PTDP_SUM));
        double got = dev->clock.comm_s - c0;
        DEVICE_CHECK(dev, fabs(got - cases[i].want) <= 1e-12 * cases[i].want, "all-reduce on '%s' cost %g s, want %g",
                     ptdp_comm_name(cases[i].c), got, cases[i].want);
    }
    /* device 7 sends to 8 (the next node) and to 6 (its own) */
    DEVICE_TRY(ptdp_barrier(dev->world));
    double t0 = dev->clock.now;
    if (dev->rank == 7) {
        DEVICE_TRY(ptdp_send(dev->world, x, COUNT, PTDP_REAL, 8, 0));
        DEVICE_TRY(ptdp_send(dev->world, x, COUNT, PTDP_REAL, 6, 0));
        double want = ptdp_cost_message_between(p, S, 7, 8) + ptdp_cost_message(p, S);
        DEVICE_CHECK(dev, fabs(dev->clock.now - t0 - want) <= 1e-12 * want, "sends took %g s, want %g",
                     dev->clock.now - t0, want);
    } else if (dev->rank == 8 || dev->rank == 6) {
        DEVICE_TRY(ptdp_recv(dev->world, x, COUNT, PTDP_REAL, 7, 0));
        double want = dev->rank == 8 ? p->net_alpha_s + S / p->net_beta_Bps
                                     : ptdp_cost_message(p, S) + (p->net_alpha_s + S / p->net_beta_Bps);
        DEVICE_CHECK(dev, fabs(dev->clock.now - t0 - want) <= 1e-12 * want, "rank %d received after %g s, want %g",
                     dev->rank, dev->clock.now - t0, want);
    }
    ptdp_comm_free(across);
    ptdp_comm_free(inside);
    return 0;
}

TEST(cluster_tests, test_cluster_groups_and_messages)
{
    ptdp_launch_opts o = { .profile = ptdp_profile_find("dgx-a100-80g") };
    harness_launch_ok(16, cluster_device, NULL, &o, NULL);
}
END_TEST

/* A run's virtual time: its steps' makespans added. */
static double run_virtual(const ptdp_train_config *c, const ptdp_profile *p, ptdp_launch_result *l)
{
    ptdp_launch_opts o = { .profile = p, .result = l };
    ptdp_train_result r;
    equiv_train(c, &o, NULL, &r);
    double t = 0;
    for (int i = 0; i < r.completed; i++)
        t += r.log[i].virtual_s;
    ptdp_train_result_free(&r);
    return t;
}

/* dgx-a100-80g as one node whose links are (alpha, beta): the same peaks
 * and GEMM curve, so only the links differ. */
static ptdp_profile one_node(double alpha, double beta)
{
    ptdp_profile p = *ptdp_profile_find("dgx-a100-80g");
    p.name = "one-node";
    p.gpus_per_node = 0;
    p.alpha_s = alpha;
    p.beta_Bps = beta;
    return p;
}

/* --dp 16 under dgx-a100-80g spans 2 nodes: every DP collective runs at the
 * network's alpha and 8 NICs' bandwidth, so the run takes exactly as long
 * as under one node whose links are alpha 10 us and 200 GB/s, and its
 * communication takes longer than on NVLink.  --dp 8 fits one node:
 * exactly the time under NVLink alone. */
TEST(cluster_tests, test_dp16_prices_the_network)
{
    const ptdp_profile *c80 = ptdp_profile_find("dgx-a100-80g");
    const ptdp_profile net = one_node(10e-6, 200e9), nvlink = one_node(3e-6, 300e9);
    ptdp_train_config c = equiv_config(16, 1, 1, 1);
    c.steps = 1;
    ptdp_launch_result lc, ln, lv;
    double tc = run_virtual(&c, c80, &lc), tn = run_virtual(&c, &net, &ln), tv = run_virtual(&c, &nvlink, &lv);
    ck_assert_msg(tc == tn, "dp 16 on 2 nodes %.17g s, one node of network links %.17g s", tc, tn);
    ck_assert_msg(tc > tv, "dp 16 on 2 nodes %g s, not longer than on NVLink %g s", tc, tv);
    for (int d = 0; d < 16; d++) {
        ck_assert(lc.devices[d].clock.comm_s == ln.devices[d].clock.comm_s);
        ck_assert(lc.devices[d].clock.compute_s == lv.devices[d].clock.compute_s);
        ck_assert(lc.devices[d].clock.comm_s > lv.devices[d].clock.comm_s);
    }
    ptdp_launch_result_free(&lc);
    ptdp_launch_result_free(&ln);
    ptdp_launch_result_free(&lv);

    c = equiv_config(8, 1, 1, 1);
    c.steps = 1;
    tc = run_virtual(&c, c80, &lc);
    tv = run_virtual(&c, &nvlink, &lv);
    ck_assert_msg(tc == tv, "dp 8 in one node %.17g s, NVLink alone %.17g s", tc, tv);
    ptdp_launch_result_free(&lc);
    ptdp_launch_result_free(&lv);
}
END_TEST

#ifndef PTDP_DOUBLE
/* Under --precision bf16 a device computes at the bf16 peak: twice
 * dgx-a100-80g's TF32 peak, so half the compute time of the same profile
 * without a bf16 peak — exactly, halving is exact.  A float run keeps the
 * TF32 peak. */
TEST(cluster_tests, test_bf16_runs_at_the_bf16_peak)
{
    ptdp_train_config c = equiv_config(1, 1, 1, 1);
    c.steps = 1;
    c.bf16 = true;
    ptdp_profile no_bf16 = *ptdp_profile_find("dgx-a100-80g");
    no_bf16.peak_flops_bf16 = 0;
    ptdp_launch_result la, lc;
    run_virtual(&c, &no_bf16, &la);
    run_virtual(&c, ptdp_profile_find("dgx-a100-80g"), &lc);
    double a = la.devices[0].clock.compute_s, b = lc.devices[0].clock.compute_s;
    ck_assert_msg(a > 0 && b * 2 == a, "bf16 compute %.17g s at the bf16 peak, %.17g s without", b, a);
    ptdp_launch_result_free(&la);
    ptdp_launch_result_free(&lc);
    c.bf16 = false;
    run_virtual(&c, &no_bf16, &la);
    run_virtual(&c, ptdp_profile_find("dgx-a100-80g"), &lc);
    a = la.devices[0].clock.compute_s;
    b = lc.devices[0].clock.compute_s;
    ck_assert_msg(a > 0 && b == a, "float compute %.17g s, %.17g s without a bf16 peak", b, a);
    ptdp_launch_result_free(&la);
    ptdp_launch_result_free(&lc);
}
END_TEST

/* The compute time of one bf16 step of the GPT under profile p, with
 * --fp8 tensorwise or without. */
static double gpt_compute(const ptdp_profile *p, bool fp8)
{
    ptdp_train_config c = equiv_gpt_config(1, 1, 1, 1, 1);
    c.steps = 1;
    c.bf16 = true;
    c.fp8.recipe = fp8 ? ptdp_fp8_recipe_find("tensorwise") : NULL;
    ptdp_launch_result l;
    run_virtual(&c, p, &l);
    const double t = l.devices[0].clock.compute_s;
    ptdp_launch_result_free(&l);
    return t;
}

/* Under --fp8 the linear layers' products run at the FP8 peak: less
 * compute on dgx-h100.  On a profile without an FP8 peak they run at the
 * bf16 peak, so a profile that gives no memory bandwidth charges exactly
 * the bf16 run's time (the quantization is then free), and dgx-a100-80g
 * (2.039 TB/s) more: its quantization passes. */
TEST(cluster_tests, test_fp8_runs_at_the_fp8_peak)
{
    const ptdp_profile *h = ptdp_profile_find("dgx-h100"), *a = ptdp_profile_find("dgx-a100-80g");
    ptdp_profile no_hbm = *a;
    no_hbm.hbm_Bps = 0;
    const double h16 = gpt_compute(h, false), h8 = gpt_compute(h, true);
    ck_assert_msg(h8 > 0 && h8 < h16, "dgx-h100: fp8 compute %.17g s, bf16 %.17g s", h8, h16);
    const double a16 = gpt_compute(a, false), a8 = gpt_compute(a, true), n8 = gpt_compute(&no_hbm, true);
    ck_assert_msg(n8 == a16, "no FP8 peak, no HBM: fp8 compute %.17g s, bf16 %.17g s", n8, a16);
    ck_assert_msg(a8 > a16, "dgx-a100-80g: fp8 compute %.17g s, bf16 %.17g s", a8, a16);
}
END_TEST
#endif

int main(void)
{
    return harness_main("clock-trace");
}
