/*
 * paths.c — is this output one of the inputs, or another output? (paths.h)
 *
 * Comparing the strings is not enough: "x.st", "./x.st", "out/../x.st" and
 * a hard link all name one file, and the second write replaces the first
 * (or an output replaces the checkpoint the run was started from).  So a
 * path is reduced to what the file system calls a file:
 *
 *     the file exists       (device, inode) of the file       stat(path)
 *     it does not, yet      (device, inode) of its directory  stat(dirname)
 *                           + its last name                   "x.st"
 *
 *     x.st  ./x.st  sub/../x.st  ──stat──►  (dev 2049, ino 91234)  one file
 *
 * Two paths name one file when their identities are equal.  An input that
 * does not exist is nobody's file (reading it will fail with its own
 * message), so only existing inputs are compared.
 */
#include "paths.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "ptdp/file.h"

typedef struct {
    bool exists;          /* the file itself was found          */
    bool dir_found;       /* else: its directory was            */
    dev_t dev;            /* of the file, or of its directory   */
    ino_t ino;
    const char *name;     /* the last name, when it does not exist */
} file_identity;

static file_identity identify(const char *path)
{
    file_identity id = { 0 };
    struct stat st;
    if (stat(path, &st) == 0) {
        id.exists = true;
        id.dev = st.st_dev;
        id.ino = st.st_ino;
        return id;
    }
    char dir[4096];
    id.name = ptdp_file_dir(path, dir, sizeof dir);
    if (stat(dir, &st) == 0) {
        id.dir_found = true;
        id.dev = st.st_dev;
        id.ino = st.st_ino;
    }
    return id;
}

bool ptdp_cli_same_file(const char *a, const char *b)
{
    const file_identity x = identify(a), y = identify(b);
    if (x.exists != y.exists)
        return false;
    if (x.exists)
        return x.dev == y.dev && x.ino == y.ino;
    if (x.dir_found && y.dir_found)
        return x.dev == y.dev && x.ino == y.ino && strcmp(x.name, y.name) == 0;
    return strcmp(a, b) == 0;    /* no directory to ask: the spelling */
}

/* "x.st", or "x.st (as ./x.st)" when the two spell it differently. */
static void both_names(const char *first, const char *second, char *buf, size_t len)
{
    if (strcmp(first, second) == 0)
        snprintf(buf, len, "%s", first);
    else
        snprintf(buf, len, "%s (as %s)", first, second);
}

int ptdp_cli_check_files(const char *cmd, const ptdp_cli_file *inputs, int ninputs,
                         const ptdp_cli_file *outputs, int noutputs)
{
    char names[2 * 4096 + 8];
    for (int i = 0; i < noutputs; i++) {
        const ptdp_cli_file *o = &outputs[i];
        if (o->path == NULL)
            continue;
        for (int j = 0; j < ninputs; j++) {
            struct stat st;
            const ptdp_cli_file *in = &inputs[j];
            if (in->path == NULL || stat(in->path, &st) != 0 || !ptdp_cli_same_file(in->path, o->path))
                continue;
            both_names(in->path, o->path, names, sizeof names);
            return ptdp_usage_error(cmd, "%s and %s name the same file %s: the output would overwrite the "
                                    "input; write it to another file", in->flag, o->flag, names);
        }
        for (int j = 0; j < i; j++) {
            if (outputs[j].path == NULL || !ptdp_cli_same_file(outputs[j].path, o->path))
                continue;
            both_names(outputs[j].path, o->path, names, sizeof names);
            return ptdp_usage_error(cmd, "%s and %s name the same file %s: the second would overwrite "
                                    "the first", outputs[j].flag, o->flag, names);
        }
        char msg[1024];
        if (ptdp_file_can_write(o->path, msg, sizeof msg) != 0)
            return ptdp_usage_error(cmd, "%s %s: cannot be written: %s", o->flag, o->path, msg);
    }
    return 0;
}
