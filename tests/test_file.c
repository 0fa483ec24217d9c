/*
 * test_file.c — the atomic write of file.h: whole or not at all.
 *
 * After every call the directory holds either the old file or the complete
 * new one, and never a leftover "<name>.tmp.*".  The failures are real ones:
 * a missing directory, a read-only one (as an unprivileged user: root
 * ignores permission bits), a target that cannot be replaced, and a write
 * that fails halfway because the file-size limit hits, as a full disk would.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "ptdp/error.h"
#include "ptdp/file.h"

static const harness_tcase atomic_tests = { .name = "atomic" };

static char dir[64];
static char msg[512];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/ptdp-file-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    msg[0] = '\0';
}

/* "<dir>/<name>", in one of 8 buffers used in turn: a test may keep a few. */
static const char *in_dir(const char *name)
{
    static char path[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(path[k], sizeof path[k], "%s/%s", dir, name);
    return path[k];
}

/* Entries of the test directory; with tmp_only, just leftover temporaries. */
static int count_entries(int tmp_only) { return harness_count_entries(dir, tmp_only); }

static void assert_content(const char *path, const char *want)
{
    char *got = harness_read_file(path, NULL);
    ck_assert_str_eq(got, want);
    free(got);
}

static void remove_dir(void)
{
    harness_remove_tree(dir);
    ck_assert_int_ne(access(dir, F_OK), 0);
}

TEST(atomic_tests, test_new_file)
{
    make_dir();
    const char *path = in_dir("a.txt");
    ck_assert_int_eq(ptdp_write_file_atomic(path, "hello\n", 6, msg, sizeof msg), 0);
    assert_content(path, "hello\n");
    ck_assert_int_eq(count_entries(0), 1);

    /* the mode fopen would give: 0666 minus the umask */
    mode_t mask = umask(022);
    umask(mask);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0666 & ~mask);

    /* a path without a directory part: the temporary goes in "." */
    char cwd[512];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    ck_assert_int_eq(chdir(dir), 0);
    ck_assert_int_eq(ptdp_write_file_atomic("b.txt", "", 0, msg, sizeof msg), 0);
    ck_assert_int_eq(chdir(cwd), 0);
    assert_content(in_dir("b.txt"), "");
    ck_assert_int_eq(count_entries(1), 0);
    remove_dir();
}
END_TEST

TEST(atomic_tests, test_overwrite_and_abort)
{
    make_dir();
    const char *path = in_dir("log.json");
    ck_assert_int_eq(ptdp_write_file_atomic(path, "old", 3, msg, sizeof msg), 0);

    /* through the stream: the old file stays whole until commit */
    ptdp_atomic_file f;
    ck_assert_int_eq(ptdp_atomic_open(&f, path, msg, sizeof msg), 0);
    for (int i = 0; i < 1000; i++)
        fprintf(ptdp_atomic_stream(&f), "line %d\n", i);
    ck_assert_int_eq(ptdp_atomic_write(&f, "end\n", 4), 0);
    assert_content(path, "old");
    ck_assert_int_eq(count_entries(1), 1);
    ck_assert_int_eq(ptdp_atomic_commit(&f, msg, sizeof msg), 0);
    ptdp_atomic_abort(&f);   /* harmless after commit */
    char *text = harness_read_file(path, NULL);
    ck_assert_ptr_nonnull(strstr(text, "line 0\nline 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "line 999\nend\n"));
    ck_assert_uint_eq(strlen(text), 4 + 10 * 7 + 90 * 8 + 900 * 9);
    free(text);
    ck_assert_int_eq(count_entries(0), 1);

    /* abort: the temporary goes, the file is as it was */
    ck_assert_int_eq(ptdp_atomic_open(&f, path, msg, sizeof msg), 0);
    fputs("never seen", ptdp_atomic_stream(&f));
    ptdp_atomic_abort(&f);
    ptdp_atomic_abort(&f);
    ck_assert_int_eq(count_entries(0), 1);
    text = harness_read_file(path, NULL);
    ck_assert_ptr_null(strstr(text, "never seen"));
    free(text);
    remove_dir();
}
END_TEST

TEST(atomic_tests, test_missing_directory_and_busy_target)
{
    make_dir();
    /* a directory that does not exist, and a "directory" that is a file */
    const char *path = in_dir("no/such/dir/x");
    ck_assert_int_eq(ptdp_write_file_atomic(path, "x", 1, msg, sizeof msg), PTDP_EIO);
    ck_assert_msg(strstr(msg, path) && strstr(msg, strerror(ENOENT)), "%s", msg);
    ck_assert_int_eq(ptdp_write_file_atomic(in_dir("plain"), "x", 1, msg, sizeof msg), 0);
    path = in_dir("plain/x");
    ck_assert_int_eq(ptdp_write_file_atomic(path, "x", 1, msg, sizeof msg), PTDP_EIO);
    ck_assert_msg(strstr(msg, path) && strstr(msg, strerror(ENOTDIR)), "%s", msg);

    /* the target is a non-empty directory: everything is written, the
     * rename fails, and the temporary is removed */
    const char *busy = in_dir("busy");
    ck_assert_int_eq(mkdir(busy, 0755), 0);
    ck_assert_int_eq(ptdp_write_file_atomic(in_dir("busy/keep"), "k", 1, msg, sizeof msg), 0);
    ck_assert_int_eq(ptdp_write_file_atomic(busy, "x", 1, msg, sizeof msg), PTDP_EIO);
    ck_assert_msg(strstr(msg, busy) && strstr(msg, "rename"), "%s", msg);
    ck_assert_int_eq(count_entries(1), 0);
    ck_assert_int_eq(count_entries(0), 2);   /* plain, busy */
    unlink(in_dir("busy/keep"));
    rmdir(busy);
    remove_dir();
}
END_TEST

/* ---- failures in a child process -------------------------------------------------- */

static int write_small(void *path)
{
    return ptdp_write_file_atomic(path, "new", 3, msg, sizeof msg);
}

TEST(atomic_tests, test_read_only_directory)
{
    make_dir();
    const char *path = in_dir("ckpt");
    ck_assert_int_eq(ptdp_write_file_atomic(path, "old", 3, msg, sizeof msg), 0);
    /* others may enter but not write; so may we, unless we are root */
    ck_assert_int_eq(chmod(dir, 0555), 0);
    int rc = harness_in_child(write_small, (void *)path, true, msg, sizeof msg);
    ck_assert_int_eq(chmod(dir, 0755), 0);
    ck_assert_msg(rc == PTDP_EIO, "rc %d: %s", rc, msg);
    ck_assert_msg(strstr(msg, path) && strstr(msg, strerror(EACCES)), "%s", msg);
    assert_content(path, "old");
    ck_assert_int_eq(count_entries(0), 1);
    remove_dir();
}
END_TEST

enum { BIG = 1 << 16, LIMIT = 4096 };

typedef struct {
    int stream;    /* write with fprintf on the stream, or with ptdp_atomic_write */
    int limited;   /* under a 4 KiB file-size limit */
} big_write;

/* Write 128 KiB in two blocks, or 64 KiB of fprintf lines. */
static int write_big(void *arg)
{
    const big_write *b = arg;
    if (b->limited) {
        struct rlimit lim;
        if (getrlimit(RLIMIT_FSIZE, &lim) != 0)
            return PTDP_EINVAL;
        lim.rlim_cur = LIMIT;
        signal(SIGXFSZ, SIG_IGN);   /* EFBIG instead of being killed */
        if (setrlimit(RLIMIT_FSIZE, &lim) != 0)
            return PTDP_EINVAL;
    }
    ptdp_atomic_file f;
    int rc = ptdp_atomic_open(&f, in_dir("ckpt"), msg, sizeof msg);
    if (rc != 0)
        return rc;
    if (!b->stream) {
        static char block[BIG];
        memset(block, 'n', sizeof block);
        if (ptdp_atomic_write(&f, block, sizeof block) == 0)   /* stop at a failure */
            ptdp_atomic_write(&f, block, sizeof block);
    } else {
        for (int i = 0; i < BIG / 8; i++)
            fprintf(ptdp_atomic_stream(&f), "%07d\n", i);
    }
    return ptdp_atomic_commit(&f, msg, sizeof msg);
}

TEST(atomic_tests, test_failed_write_keeps_the_old_file)
{
    make_dir();
    const char *path = in_dir("ckpt");
    for (int stream = 0; stream < 2; stream++) {
        ck_assert_int_eq(ptdp_write_file_atomic(path, "old", 3, msg, sizeof msg), 0);
        big_write b = { .stream = stream, .limited = 1 };
        int rc = harness_in_child(write_big, &b, false, msg, sizeof msg);
        ck_assert_msg(rc == PTDP_EIO, "stream %d, rc %d: %s", stream, rc, msg);
        ck_assert_msg(strstr(msg, path) && strstr(msg, "write"), "%s", msg);
        if (!stream)   /* the first failure's errno, kept by ptdp_atomic_write */
            ck_assert_msg(strstr(msg, strerror(EFBIG)), "%s", msg);
        assert_content(path, "old");
        ck_assert_int_eq(count_entries(0), 1);

        /* and without the limit the same write replaces the file */
        b.limited = 0;
        rc = harness_in_child(write_big, &b, false, msg, sizeof msg);
        ck_assert_msg(rc == 0, "stream %d, rc %d: %s", stream, rc, msg);
        struct stat st;
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_int_eq(st.st_size, stream ? BIG : 2 * BIG);
        ck_assert_int_eq(count_entries(0), 1);
    }
    remove_dir();
}
END_TEST

/* ---- concurrent writers ---------------------------------------------------------- */

enum { WRITERS = 4, WRITES = 25, BYTES = 8192 };

typedef struct {
    const char *path;
    char fill;
    int failures;
} writer_arg;

static void *save_repeatedly(void *p)
{
    writer_arg *w = p;
    char *buf = malloc(BYTES);
    memset(buf, w->fill, BYTES);
    char m[256];
    for (int k = 0; k < WRITES; k++)
        w->failures += ptdp_write_file_atomic(w->path, buf, BYTES, m, sizeof m) != 0;
    free(buf);
    return NULL;
}

/* Threads saving to one path at once: each has its own temporary, each
 * rename is atomic, so what remains is one writer's bytes, whole. */
TEST(atomic_tests, test_concurrent_writers)
{
    make_dir();
    const char *path = in_dir("shared");
    pthread_t th[WRITERS];
    writer_arg args[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        args[i] = (writer_arg){ .path = path, .fill = (char)('a' + i) };
        ck_assert_int_eq(pthread_create(&th[i], NULL, save_repeatedly, &args[i]), 0);
    }
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(args[i].failures, 0);
    }
    char *text = harness_read_file(path, NULL);
    ck_assert_uint_eq(strlen(text), BYTES);
    ck_assert(text[0] >= 'a' && text[0] < 'a' + WRITERS);
    for (int i = 1; i < BYTES; i++)
        ck_assert_int_eq(text[i], text[0]);
    free(text);
    ck_assert_int_eq(count_entries(0), 1);
    remove_dir();
}
END_TEST

int main(void)
{
    return harness_main("file");
}
