/*
 * file.c — the atomic-write recipe of file.h, in the order it runs.
 *
 *     path = "out/ckpt.st"
 *
 *     open    out/ckpt.st.tmp.4242.7   O_CREAT|O_EXCL, mode 0666 & ~umask
 *     write   ...........              (stdio buffers)
 *     commit  fflush, fsync, close
 *             rename  out/ckpt.st.tmp.4242.7 ─► out/ckpt.st   (atomic)
 *             fsync   out/                 (the new name is on disk too)
 *
 *     failure anywhere: unlink the temporary; out/ckpt.st is as it was.
 *
 * Why not mkstemp: it creates the file 0600, and widening that to the
 * umask's mode needs the umask, which POSIX only lets a process read by
 * changing it — a race with every other thread creating files.  open(2)
 * with O_EXCL and a name unique per process (pid) and per call (a counter)
 * is just as safe against clashes and lets the kernel apply the umask.
 */
#include "ptdp/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ptdp/error.h"

/* "<path>: cannot write the file: <step>[ <name>]: <errno text>", and the
 * code.  strerror is not thread-safe and threads do save files at once; the
 * XSI strerror_r (POSIX, what glibc and macOS give without _GNU_SOURCE) is. */
static int fail(char *msg, size_t msglen, int code, const char *path, const char *step,
                const char *name, int err)
{
    if (msg != NULL && msglen > 0) {
        char text[128];
        if (strerror_r(err, text, sizeof text) != 0)
            snprintf(text, sizeof text, "error %d", err);
        snprintf(msg, msglen, "%s: cannot write the file: %s%s%s: %s", path, step,
                 name ? " " : "", name ? name : "", text);
    }
    return code;
}

/* Distinct names per call, so two threads saving to one path never share a
 * temporary; O_EXCL refuses a name that exists (a crashed run's leftover). */
static atomic_uint tmp_counter;

/* A run killed between open and commit leaves "<path>.tmp.<pid>.<n>"
 * behind, and a kill loop leaves one per run (gigabytes of checkpoints).
 * Before writing <path>, remove the temporaries of <path> whose process no
 * longer exists: kill(pid, 0) failing with ESRCH says no process has that
 * pid.  A live writer's temporary is left alone (kill succeeds, or fails
 * with EPERM for another user's process); a pid reused since costs a
 * leftover, never a file in use.  POSIX has no unnamed temporary that can
 * later be given a name (Linux's O_TMPFILE and linkat are not portable), so
 * this is the cleanup that works everywhere. */
static void remove_dead_temporaries(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t dirlen = slash ? (size_t)(slash - path) : 0, blen = strlen(base);
    char *dir = malloc(dirlen + 2);
    if (dir == NULL)
        return;
    if (slash == NULL)
        strcpy(dir, ".");
    else if (dirlen == 0)
        strcpy(dir, "/");
    else {
        memcpy(dir, path, dirlen);
        dir[dirlen] = '\0';
    }
    DIR *d = opendir(dir);
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        const char *n = e->d_name;
        if (strncmp(n, base, blen) != 0 || strncmp(n + blen, ".tmp.", 5) != 0)
            continue;
        char *end;
        long pid = strtol(n + blen + 5, &end, 10);
        if (end == n + blen + 5 || *end != '.' || pid <= 0 || pid == (long)getpid())
            continue;
        strtoul(end + 1, &end, 10);
        if (*end != '\0' || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        size_t len = strlen(dir) + strlen(n) + 2;
        char *full = malloc(len);
        if (full != NULL) {
            snprintf(full, len, "%s/%s", dir, n);
            unlink(full);
            free(full);
        }
    }
    if (d != NULL)
        closedir(d);
    free(dir);
}

int ptdp_atomic_open(ptdp_atomic_file *f, const char *path, char *msg, size_t msglen)
{
    memset(f, 0, sizeof *f);
    f->path = path;
    remove_dead_temporaries(path);
    size_t n = strlen(path) + sizeof ".tmp.-9223372036854775808.4294967295";
    f->tmp = malloc(n);
    if (f->tmp == NULL)
        return fail(msg, msglen, PTDP_ENOMEM, path, "naming the temporary", NULL, ENOMEM);

    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(f->tmp, n, "%s.tmp.%ld.%u", path, (long)getpid(),
                 atomic_fetch_add(&tmp_counter, 1u));
        fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    const char *step = "create";
    int err = errno;
    if (fd >= 0) {
        f->stream = fdopen(fd, "w");
        if (f->stream != NULL)
            return 0;
        step = "open";
        err = errno;
        close(fd);
        unlink(f->tmp);
    }
    int rc = fail(msg, msglen, PTDP_EIO, path, step, f->tmp, err);
    free(f->tmp);
    f->tmp = NULL;
    return rc;
}

FILE *ptdp_atomic_stream(ptdp_atomic_file *f)
{
    return f->stream;
}

int ptdp_atomic_write(ptdp_atomic_file *f, const void *data, size_t len)
{
    if (f->err != 0)
        return PTDP_EIO;
    errno = 0;
    if (len > 0 && fwrite(data, 1, len, f->stream) != len) {
        f->err = errno != 0 ? errno : EIO;
        return PTDP_EIO;
    }
    return 0;
}

/* fsync the directory so the rename itself survives a crash.  Not every file
 * system allows it (some say EINVAL): the data is safe either way. */
static void sync_directory_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = NULL;
    const char *d = ".";
    if (slash == path) {
        d = "/";
    } else if (slash != NULL) {
        size_t len = (size_t)(slash - path);
        dir = malloc(len + 1);
        if (dir == NULL)
            return;
        memcpy(dir, path, len);
        dir[len] = '\0';
        d = dir;
    }
    int fd = open(d, O_RDONLY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

int ptdp_atomic_commit(ptdp_atomic_file *f, char *msg, size_t msglen)
{
    /* 1. Every byte out of the C buffers (fflush), then out of the kernel's
     *    cache onto the disk (fsync): only durable bytes may take the name.
     *    A write that failed earlier leaves the stream's error flag set;
     *    fflush retries what is still buffered, which usually names why. */
    const char *step = NULL;
    int err = f->err;
    errno = 0;
    if (err != 0 || fflush(f->stream) != 0 || ferror(f->stream)) {
        step = "write";
        if (err == 0)
            err = errno != 0 ? errno : EIO;
    } else if (fsync(fileno(f->stream)) != 0) {
        step = "fsync";
        err = errno;
    }
    if (fclose(f->stream) != 0 && step == NULL) {
        step = "close";
        err = errno;
    }
    f->stream = NULL;

    /* 2. The swap: one atomic step, then make the new name durable too. */
    if (step == NULL && rename(f->tmp, f->path) != 0) {
        step = "rename";
        err = errno;
    }
    int rc = 0;
    if (step == NULL) {
        sync_directory_of(f->path);
    } else {
        unlink(f->tmp);   /* the old file at path was never touched */
        rc = fail(msg, msglen, PTDP_EIO, f->path, step, NULL, err);
    }
    free(f->tmp);
    f->tmp = NULL;
    return rc;
}

void ptdp_atomic_abort(ptdp_atomic_file *f)
{
    if (f->stream != NULL)
        fclose(f->stream);
    f->stream = NULL;
    if (f->tmp != NULL)
        unlink(f->tmp);
    free(f->tmp);
    f->tmp = NULL;
}

int ptdp_write_file_atomic(const char *path, const void *data, size_t len,
                           char *msg, size_t msglen)
{
    ptdp_atomic_file f;
    int rc = ptdp_atomic_open(&f, path, msg, msglen);
    if (rc != 0)
        return rc;
    ptdp_atomic_write(&f, data, len);   /* a failure is reported by commit */
    return ptdp_atomic_commit(&f, msg, msglen);
}

const char *ptdp_file_dir(const char *path, char *dir, size_t dirlen)
{
    const char *slash = strrchr(path, '/');
    int cut = (int)(dirlen > 0 ? dirlen - 1 : 0);
    if (slash == NULL)
        snprintf(dir, dirlen, ".");
    else if (slash == path)
        snprintf(dir, dirlen, "/");
    else
        snprintf(dir, dirlen, "%.*s", (int)(slash - path) < cut ? (int)(slash - path) : cut, path);
    return slash != NULL ? slash + 1 : path;
}

int ptdp_file_can_write(const char *path, char *msg, size_t msglen)
{
    struct stat st;
    size_t len = strlen(path);
    if (len == 0) {
        snprintf(msg, msglen, "an empty file name");
        return PTDP_EIO;
    }
    if (path[len - 1] == '/' || (stat(path, &st) == 0 && S_ISDIR(st.st_mode))) {
        snprintf(msg, msglen, "it is a directory; name a file");
        return PTDP_EIO;
    }
    char dir[1024];
    ptdp_file_dir(path, dir, sizeof dir);
    if (stat(dir, &st) != 0) {
        snprintf(msg, msglen, "the directory %s does not exist", dir);
        return PTDP_EIO;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(msg, msglen, "%s is not a directory", dir);
        return PTDP_EIO;
    }
    /* The very step the write will take: a temporary beside it. */
    ptdp_atomic_file f;
    char why[512];
    if (ptdp_atomic_open(&f, path, why, sizeof why) != 0) {
        const char *colon = strrchr(why, ':');   /* the system's reason, last */
        snprintf(msg, msglen, "cannot create a file in %s:%s", dir, colon ? colon + 1 : " unknown error");
        return PTDP_EIO;
    }
    ptdp_atomic_abort(&f);
    return 0;
}

/* ------------------------------------------------------------- reading */

static int read_fail(char *msg, size_t msglen, int code, const char *path, const char *what, int err)
{
    if (msg != NULL && msglen > 0) {
        char text[128] = "";
        if (err != 0 && strerror_r(err, text, sizeof text) != 0)
            snprintf(text, sizeof text, "error %d", err);
        snprintf(msg, msglen, "%s: %s%s%s", path, what, err ? ": " : "", text);
    }
    return code;
}

/* Too large: its size, and the limit, in bytes (the caller names the flag). */
static int too_large(char *msg, size_t msglen, const char *path, uintmax_t size, bool exact, size_t max)
{
    if (msg != NULL && msglen > 0)
        snprintf(msg, msglen, "%s: %s%ju bytes, more than the %zu bytes (%.4g GiB) allowed", path,
                 exact ? "" : "more than ", size, max, (double)max / (1 << 30));
    return PTDP_EINVAL;
}

int ptdp_read_file(const char *path, unsigned char **data, size_t *len, char *msg, size_t msglen)
{
    return ptdp_read_file_max(path, SIZE_MAX - 1, data, len, msg, msglen);
}

/* The file's bytes: as many as stat says, then on until the end, since a
 * file of the kernel's (/proc, /sys) says 0 and still has bytes to read. */
int ptdp_read_file_max(const char *path, size_t max, unsigned char **data, size_t *len, char *msg, size_t msglen)
{
    *data = NULL;
    *len = 0;
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
     * writer forever.  A regular file ignores the flag. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return read_fail(msg, msglen, PTDP_EIO, path, "cannot open", errno);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return read_fail(msg, msglen, PTDP_EIO, path, "cannot stat", e);
    }
    if (!S_ISREG(st.st_mode) || st.st_size < 0 || (uintmax_t)st.st_size > (uintmax_t)SIZE_MAX - 1) {
        close(fd);
        return read_fail(msg, msglen, PTDP_EIO, path,
                         S_ISDIR(st.st_mode) ? "not a regular file: a directory" : "not a regular file", 0);
    }
    if ((uintmax_t)st.st_size > (uintmax_t)max) {
        close(fd);
        return too_large(msg, msglen, path, (uintmax_t)st.st_size, true, max);
    }
    size_t cap = (size_t)st.st_size > 0 ? (size_t)st.st_size : 4096, got = 0;
    unsigned char *buf = malloc(cap + 1);
    for (;;) {
        if (buf == NULL) {
            close(fd);
            return read_fail(msg, msglen, PTDP_ENOMEM, path, "out of host memory reading it", 0);
        }
        if (got == cap) {   /* more than stat said: grow, up to max */
            if (cap >= max) {
                close(fd);
                free(buf);
                return too_large(msg, msglen, path, (uintmax_t)cap, false, max);
            }
            size_t grown = cap > max / 2 ? max : 2 * cap;
            unsigned char *b = realloc(buf, grown + 1);
            if (b == NULL)
                free(buf);
            buf = b;
            cap = grown;
            continue;
        }
        ssize_t r = read(fd, buf + got, cap - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            free(buf);
            return read_fail(msg, msglen, PTDP_EIO, path, "read failed", e);
        }
        if (r == 0)
            break;   /* the end: a file that shrinks while we read is just shorter */
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    *data = buf;
    *len = got;
    return 0;
}
