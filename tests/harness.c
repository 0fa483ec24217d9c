/*
 * harness.c — the shared test harness (harness.h), in the order a test
 * program meets it: its tests register before main(), main() runs them,
 * a test launches devices, a device checks, the test reads what was
 * written.
 *
 *   TEST(…) constructors ──► harness_register ──► table of (tcase, test, n)
 *   main() ──► harness_main: sort by line, one TCase per harness_tcase,
 *              one SRunner, exit status
 *   a test ──► harness_launch_ok ──► ptdp_launch with a watchdog
 *                 device: DEVICE_CHECK ──► harness_device_fail ──► ptdp_fail
 *              ◄── launch result: first failure, its rank ──► ck_assert_msg
 */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptdp/error.h"
#include "ptdp/model.h"

/* ----------------------------------------------- registration and main */

/* More than any test file holds; a file that outgrows it fails loudly. */
#define HARNESS_MAX_TESTS 256

typedef struct {
    const harness_tcase *tcase;
    const TTest *test;
    int loops;
} registered_test;

static registered_test registered[HARNESS_MAX_TESTS];
static int nregistered, overflowed;

void harness_register(const harness_tcase *tcase, const TTest *test, int loops)
{
    if (nregistered == HARNESS_MAX_TESTS) {
        overflowed++;
        return;
    }
    registered[nregistered++] = (registered_test){ tcase, test, loops };
}

/* Constructors need not run in the order of the file; the line does. */
static int by_line(const void *a, const void *b)
{
    const registered_test *x = a, *y = b;
    return (x->test->line > y->test->line) - (x->test->line < y->test->line);
}

/* The Check test case of tc, made on first use, in the order of first use. */
static TCase *tcase_of(Suite *s, const harness_tcase *tc, const harness_tcase **made, TCase **cases,
                       int *nmade)
{
    for (int k = 0; k < *nmade; k++)
        if (made[k] == tc)
            return cases[k];
    TCase *c = tcase_create(tc->name);
    if (tc->timeout_s > 0)
        tcase_set_timeout(c, tc->timeout_s);
    if (tc->setup_once != NULL || tc->teardown_once != NULL)
        tcase_add_unchecked_fixture(c, tc->setup_once, tc->teardown_once);
    if (tc->setup != NULL || tc->teardown != NULL)
        tcase_add_checked_fixture(c, tc->setup, tc->teardown);
    suite_add_tcase(s, c);
    made[*nmade] = tc;
    cases[(*nmade)++] = c;
    return c;
}

static char run_dir[1024];   /* harness_run_dir: made by harness_main */

int harness_main(const char *suite_name)
{
    if (nregistered == 0 || overflowed > 0) {
        fprintf(stderr, "%s: %d tests registered; the harness takes 1 to %d\n", suite_name,
                nregistered + overflowed, HARNESS_MAX_TESTS);
        return EXIT_FAILURE;
    }
    for (int i = 0; i < nregistered; i++)
        if (registered[i].loops < 1) {
            fprintf(stderr, "%s:%d: %s would run %d times: nothing would be tested\n", registered[i].test->file,
                    registered[i].test->line, registered[i].test->name, registered[i].loops);
            return EXIT_FAILURE;
        }
    qsort(registered, (size_t)nregistered, sizeof registered[0], by_line);

    static const harness_tcase *made[HARNESS_MAX_TESTS];
    static TCase *cases[HARNESS_MAX_TESTS];
    int nmade = 0;
    Suite *s = suite_create(suite_name);
    for (int i = 0; i < nregistered; i++)
        tcase_add_loop_test(tcase_of(s, registered[i].tcase, made, cases, &nmade), registered[i].test, 0,
                            registered[i].loops);

    SRunner *sr = srunner_create(s);
    const char *tmp = getenv("TMPDIR");
    snprintf(run_dir, sizeof run_dir, "%s/ptdp-run-XXXXXX", tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(run_dir) == NULL)
        run_dir[0] = '\0';
    srunner_run_all(sr, CK_NORMAL);
    if (run_dir[0] != '\0')
        harness_remove_tree(run_dir);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

const char *harness_run_dir(void)
{
    return run_dir[0] != '\0' ? run_dir : NULL;
}

/* ------------------------------------------------- devices under a watchdog */

ptdp_launch_opts harness_opts(const ptdp_launch_opts *opts)
{
    ptdp_launch_opts o;
    if (opts != NULL)
        o = *opts;
    else
        memset(&o, 0, sizeof o);
    if (o.watchdog_s == 0)
        o.watchdog_s = HARNESS_WATCHDOG_S;
    return o;
}

int harness_launch(int n, ptdp_device_fn fn, void *arg, const ptdp_launch_opts *opts, ptdp_launch_result *res)
{
    ptdp_launch_opts o = harness_opts(opts);
    o.result = res;
    return ptdp_launch(n, fn, arg, &o);
}

bool harness_launch_succeeds(int n, ptdp_device_fn fn, void *arg, const ptdp_launch_opts *opts,
                             ptdp_launch_result *res, char *why, size_t whylen)
{
    ptdp_launch_result mine;
    ptdp_launch_result *r = res != NULL ? res : &mine;
    int rc = harness_launch(n, fn, arg, opts, r);
    snprintf(why, whylen, "%d devices: rank %d failed (%s): %s", n, r->failed_rank, ptdp_strerror(rc), r->message);
    if (res == NULL)
        ptdp_launch_result_free(&mine);
    return rc == 0;
}

bool harness_launch_fails_with(int n, ptdp_device_fn fn, void *arg, int code, const char *const *parts,
                               char *why, size_t whylen)
{
    ptdp_launch_result r;
    int rc = harness_launch(n, fn, arg, NULL, &r);
    bool ok = rc == code;
    if (!ok)
        snprintf(why, whylen, "%d devices: status %s, expected %s: %s", n, ptdp_strerror(rc),
                 ptdp_strerror(code), r.message);
    for (int i = 0; ok && parts[i] != NULL; i++)
        if (strstr(r.message, parts[i]) == NULL) {
            snprintf(why, whylen, "'%s' not found in: %s", parts[i], r.message);
            ok = false;
        }
    ptdp_launch_result_free(&r);
    return ok;
}

/* ----------------------------------------------- checks inside a device */

/* __FILE__ is a path from the build directory; the file's name is enough. */
static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

int harness_device_fail(ptdp_device *dev, const char *file, int line, const char *expected, const char *fmt, ...)
{
    char what[PTDP_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ptdp_fail(dev, PTDP_ECHECK, "%s:%d: %s (expected: %s)", base_name(file), line, what, expected);
}

int harness_group_index(const ptdp_comm_stats *s, const char *name)
{
    for (int g = 0; g < s->ngroups; g++)
        if (strcmp(s->group[g].name, name) == 0)
            return g;
    return -1;
}

void harness_assert_attention_close(int N, bool zigzag, double p, const double *worst_y, const double *worst_d)
{
#ifdef PTDP_DOUBLE
    const double tol = 1e-12;
#else
    const double tol = 1e-5;
#endif
    for (int r = 0; r < N; r++) {
        ck_assert_msg(worst_y[r] <= tol, "N %d %s p %.1f rank %d: y differs by %g", N,
                      zigzag ? "zigzag" : "contiguous", p, r, worst_y[r]);
        ck_assert_msg(worst_d[r] <= 10 * tol, "N %d %s p %.1f rank %d: dqkv differs by %g", N,
                      zigzag ? "zigzag" : "contiguous", p, r, worst_d[r]);
    }
}

int harness_forward_kept(ptdp_device *dev, struct ptdp_model *m, int rows, size_t *kept)
{
    ptdp_batch b = { .first = 0, .rows = rows };
    int rc = ptdp_batch_load(dev, m, &b);
    if (rc != 0)
        return rc;
    ptdp_mem_stats before, after;
    ptdp_arena_stats(dev->arena, &before);
    ptdp_acts acts;
    rc = ptdp_model_forward(dev, m, &acts, &b, (ptdp_tensor){ 0 }, 0, false, NULL);
    ptdp_arena_stats(dev->arena, &after);
    *kept = after.current[PTDP_MEM_ACTS] - before.current[PTDP_MEM_ACTS];
    ptdp_acts_free(dev, m, &acts);
    ptdp_batch_free(dev, &b);
    return rc;
}

int harness_model_on_mesh(ptdp_device *dev, const ptdp_model_config *cfg, int dp, int tp, int pp, uint64_t seed,
                          ptdp_mesh *mesh, ptdp_model *m)
{
    int rc = ptdp_mesh_init(dev, dp, tp, pp, mesh);
    if (rc != 0)
        return rc;
    if ((rc = ptdp_model_init(dev, m, cfg, mesh, NULL, seed, 0.0)) != 0)
        ptdp_mesh_free(mesh);
    return rc;
}

/* ---------------------------------------------- what the code wrote */

char *harness_read_stream(FILE *f)
{
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    ck_assert_int_ge(n, 0);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    return buf;
}

char *harness_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
    char *buf = harness_read_stream(f);
    if (len != NULL) {
        ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
        *len = (size_t)ftell(f);
    }
    fclose(f);
    return buf;
}

void harness_temp_file(char *template_path)
{
    int fd = mkstemp(template_path);
    ck_assert_msg(fd >= 0, "mkstemp %s: %s", template_path, strerror(errno));
    close(fd);
}

int harness_count_entries(const char *dir, bool temporaries_only)
{
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot list %s: %s", dir, strerror(errno));
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
            (!temporaries_only || strstr(e->d_name, ".tmp.") != NULL))
            n++;
    closedir(d);
    return n;
}

void harness_remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    chmod(dir, 0755);   /* a test may have left it read-only */
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p) != 0)
            harness_remove_tree(p);
    }
    if (d != NULL)
        closedir(d);
    rmdir(dir);
}

/* Fork; the child runs child(fd, ctx) with fd the write end of a pipe and
 * must _exit; the parent keeps what came through the pipe in out (a
 * string) and returns the child's wait status. */
static int fork_and_collect(void (*child)(int fd, void *ctx), void *ctx, char *out, size_t outlen)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        child(fds[1], ctx);
        _exit(127);
    }
    close(fds[1]);
    size_t used = 0;
    ssize_t n;
    char sink[4096];
    while ((n = read(fds[0], sink, sizeof sink)) > 0) {   /* drain all of it: the child must not block */
        size_t take = (size_t)n < outlen - 1 - used ? (size_t)n : outlen - 1 - used;
        memcpy(out + used, sink, take);
        used += take;
    }
    out[used] = '\0';
    close(fds[0]);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return status;
}

/* harness_run_child's child: its stderr into the pipe. */
static void run_with_stderr(int fd, void *ctx)
{
    void (*fn)(void) = *(void (**)(void))ctx;
    dup2(fd, 2);
    fn();
    _exit(0);
}

int harness_run_child(void (*fn)(void), char *err, size_t errlen)
{
    return fork_and_collect(run_with_stderr, &fn, err, errlen);
}

/* harness_in_child's child: fn's status as the exit code, its message
 * through the pipe. */
typedef struct {
    int (*fn)(void *);
    void *arg;
    bool unprivileged;
    char *msg;
    size_t msglen;
} in_child_call;

static void run_and_report(int fd, void *ctx)
{
    const in_child_call *c = ctx;
    int rc = PTDP_EINVAL;
    c->msg[0] = '\0';
    if (c->unprivileged && geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
        snprintf(c->msg, c->msglen, "could not drop root");
    else
        rc = c->fn(c->arg);
    if (write(fd, c->msg, strlen(c->msg) + 1) < 0)
        _exit(127);
    _exit(-rc);
}

int harness_in_child(int (*fn)(void *), void *arg, bool unprivileged, char *msg, size_t msglen)
{
    in_child_call c = { fn, arg, unprivileged, msg, msglen };
    int status = fork_and_collect(run_and_report, &c, msg, msglen);
    ck_assert_msg(WIFEXITED(status), "the child died: %s", msg);
    return -WEXITSTATUS(status);
}

/* ------------------------------------------------ is it well-formed XML? */

static int entity_ok(const char *p)
{
    static const char *const known[] = { "&amp;", "&lt;", "&gt;", "&quot;", "&apos;" };
    for (int i = 0; i < 5; i++)
        if (strncmp(p, known[i], strlen(known[i])) == 0)
            return 1;
    return 0;
}

/* Text between tags: no '>' or a bare '&'. */
static int text_ok(const char *p, const char *end)
{
    for (; p < end; p++)
        if (*p == '>' || (*p == '&' && !entity_ok(p)))
            return 0;
    return 1;
}

/* Inside <name a="v" b="w"/>: name="value" pairs with the value in double
 * quotes holding no '<' and only known entities. */
static int attributes_ok(const char *p, const char *end)
{
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\n' || *p == '\t'))
            p++;
        if (p >= end || (*p == '/' && p + 1 == end))
            return 1;
        size_t n = strcspn(p, "= \t\n/>");
        if (n == 0 || p[n] != '=' || p[n + 1] != '"')
            return 0;
        const char *v = p + n + 2, *close = memchr(v, '"', (size_t)(end - v));
        if (close == NULL)
            return 0;
        for (const char *q = v; q < close; q++)
            if (*q == '<' || (*q == '&' && !entity_ok(q)))
                return 0;
        p = close + 1;
    }
    return 1;
}

int harness_xml_elements(const char *x)
{
    char stack[64][32];
    int depth = 0, elements = 0, roots = 0;
    const char *p = x;
    while (*p) {
        const char *lt = strchr(p, '<');
        const char *stop = lt ? lt : p + strlen(p);
        if (!text_ok(p, stop))
            return -1;
        if (depth == 0 && strspn(p, " \n\t") < (size_t)(stop - p))
            return -1;                      /* text outside the root */
        if (lt == NULL)
            break;
        const char *gt = strchr(lt, '>');
        if (gt == NULL || memchr(lt + 1, '<', (size_t)(gt - lt - 1)) != NULL)
            return -1;
        int closing = lt[1] == '/', self = gt[-1] == '/';
        const char *name = lt + 1 + closing;
        size_t len = strcspn(name, " \t\n/>");
        if (len == 0 || len >= 32)
            return -1;
        if (closing) {
            if (depth == 0 || strlen(stack[depth - 1]) != len || strncmp(stack[depth - 1], name, len) != 0)
                return -1;
            depth--;
        } else {
            if (!attributes_ok(name + len, gt))
                return -1;
            if (depth == 0 && roots++ > 0)
                return -1;
            elements++;
            if (!self) {
                if (depth == 64)
                    return -1;
                memcpy(stack[depth], name, len);
                stack[depth++][len] = '\0';
            }
        }
        p = gt + 1;
    }
    return depth == 0 && roots == 1 ? elements : -1;
}

/* A quoted field of a trace line into dst (truncated to its size). */
static bool trace_field(const char *line, const char *key, char *dst, size_t size)
{
    const char *p = strstr(line, key);
    if (p == NULL)
        return false;
    p += strlen(key);
    size_t n = strcspn(p, "\"");
    snprintf(dst, size, "%.*s", (int)(n < size ? n : size - 1), p);
    return true;
}

bool harness_parse_trace_event(const char *line, harness_trace_event *e)
{
    memset(e, 0, sizeof *e);
    if (strstr(line, "\"ph\":\"X\"") == NULL || !trace_field(line, "\"name\":\"", e->name, sizeof e->name) ||
        !trace_field(line, "\"cat\":\"", e->cat, sizeof e->cat))
        return false;
    const char *pid = strstr(line, "\"pid\":"), *tid = strstr(line, "\"tid\":");
    const char *ts = strstr(line, "\"ts\":"), *dur = strstr(line, "\"dur\":");
    if (!pid || !tid || !ts || !dur)
        return false;
    e->pid = atoi(pid + 6);
    e->tid = atoi(tid + 6);
    e->ts = strtod(ts + 5, NULL);
    e->dur = strtod(dur + 6, NULL);
    return true;
}
