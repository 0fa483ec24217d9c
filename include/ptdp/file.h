/*
 * file.h — writing a file atomically: whole or not at all.
 *
 * Writing straight into `path` is unsafe twice over: a crash (or a full
 * disk) in the middle leaves half a file where the previous one was, and a
 * reader that opens it meanwhile sees half a file.  So every file ptdp
 * writes — checkpoints, traces, figures, logs, reports — goes through one
 * recipe:
 *
 *     open    "<path>.tmp.<pid>.<n>" beside path (same directory, so the
 *             same file system: rename cannot cross file systems)
 *     write   through a stdio stream
 *     commit  fflush ─► fsync ─► close ─► rename over path ─► fsync the directory
 *             (C buffers  (kernel     (one atomic       (the rename itself
 *              to kernel)  to disk)    step)             survives a crash)
 *
 * rename(2) replaces a name in one step: a reader sees the old file or the
 * new one, never a mix.  On any failure the temporary is removed and `path`
 * is untouched.
 *
 * Leftovers: a run killed between open and commit leaves its temporary.
 * Every open first removes the temporaries of the same path whose process
 * is gone (its pid no longer exists), so a kill loop cannot fill the disk;
 * a live writer's temporary is never touched.
 *
 * Mode: a new file gets 0666 minus the umask, exactly what fopen(path, "w")
 * gives (0644 under the usual umask 022).  The kernel applies the umask at
 * open(2), so nothing here reads or changes the process-wide umask.
 */
#ifndef PTDP_FILE_H
#define PTDP_FILE_H

#include <stddef.h>
#include <stdio.h>

/* One file being written.  The fields are private: use the functions. */
typedef struct {
    FILE       *stream;  /* the temporary, open for writing (NULL when done) */
    const char *path;    /* the target, the caller's string (kept alive until
                            commit or abort) */
    char       *tmp;     /* the temporary's name (malloc'ed) */
    int         err;     /* the first errno ptdp_atomic_write saw, or 0 */
} ptdp_atomic_file;

/* Create a fresh temporary file beside `path`, open for writing.
 * 0, PTDP_EIO (e.g. the directory is missing or read-only) or PTDP_ENOMEM,
 * with the reason in msg; on failure nothing is left to abort. */
int   ptdp_atomic_open(ptdp_atomic_file *f, const char *path, char *msg, size_t msglen);

/* The stream to write with fprintf, fputs, fwrite, … */
FILE *ptdp_atomic_stream(ptdp_atomic_file *f);

/* fwrite `len` bytes, remembering the first failure's errno so that commit
 * names it (stdio does not keep it).  0 or PTDP_EIO; after a failure, stop
 * writing and commit (which then fails) or abort. */
int   ptdp_atomic_write(ptdp_atomic_file *f, const void *data, size_t len);

/* fflush, fsync, close, rename over path, fsync the directory.  On any
 * failure — including an earlier write error on the stream — the temporary
 * is removed, path is untouched, and the result is PTDP_EIO with
 * "<path>: cannot write the file: <step>: <errno text>" in msg.  Either
 * way f is finished: do not abort it afterwards (harmless if you do). */
int   ptdp_atomic_commit(ptdp_atomic_file *f, char *msg, size_t msglen);

/* Give up: close and remove the temporary; path is untouched.  Safe on a
 * file that is already committed or aborted. */
void  ptdp_atomic_abort(ptdp_atomic_file *f);

/* Can `path` be written?  The check before a run: it is not a directory,
 * its directory exists, and a temporary can be created beside it (then
 * removed) — the first step of the write itself.  0, or PTDP_EIO with the
 * reason in msg ("the directory out/ does not exist", "cannot create a file
 * in /ro: Read-only file system"). */
int   ptdp_file_can_write(const char *path, char *msg, size_t msglen);
/* The directory a file of `path` goes in ("." for a bare name, "/" at the
 * root), cut to dirlen - 1 bytes; returns the file's name in path. */
const char *ptdp_file_dir(const char *path, char *dir, size_t dirlen);

/* Read a whole regular file into a malloc'ed buffer (*data, *len; one byte
 * more, a NUL, so text can be read as a string).  The file is opened
 * without blocking and refused unless it is a regular file, so a FIFO, a
 * device or a directory is an error at once, never a hang.  0, PTDP_EIO or
 * PTDP_ENOMEM with "<path>: …" in msg. */
int   ptdp_read_file(const char *path, unsigned char **data, size_t *len, char *msg, size_t msglen);
/* The same, refusing a file of more than max bytes (PTDP_EINVAL, its size
 * in msg) before reading it.  A file whose size stat does not tell (/proc,
 * /sys: 0) is read to its end all the same. */
int   ptdp_read_file_max(const char *path, size_t max, unsigned char **data, size_t *len, char *msg,
                         size_t msglen);

/* The whole recipe for one buffer in memory.  0, PTDP_EIO or PTDP_ENOMEM. */
int   ptdp_write_file_atomic(const char *path, const void *data, size_t len,
                             char *msg, size_t msglen);

#endif
