/*
 * paths.h — the files a command reads and writes, checked before it starts.
 *
 * A command lists its file flags, inputs and outputs, and asks once, before
 * any work:
 *
 *     const ptdp_cli_file in[]  = { { "--load", o->load }, { "--data", data } };
 *     const ptdp_cli_file out[] = { { "--save", o->save }, { "--log", o->log } };
 *     if (ptdp_cli_check_files("train", in, 2, out, 2) != 0)
 *         return PTDP_EXIT_USAGE;
 *
 * and every output is refused (exit 2, both flags named) when
 *
 *     it is the same file as an input      --load in.st --log in.st
 *     it is the same file as another output --save x.st --log ./x.st
 *     it cannot be written                 --svg /nonexistent/x.svg
 *
 * "The same file" is the file itself, not its spelling (paths.c).
 * A NULL path is a flag not given: skipped.
 */
#ifndef PTDP_CLI_PATHS_H
#define PTDP_CLI_PATHS_H

#include <stdbool.h>

typedef struct {
    const char *flag;    /* "--load" */
    const char *path;    /* as typed, or NULL when not given */
} ptdp_cli_file;

/* True when a and b name one file: the same device and inode if a exists,
 * else the same directory (by its device and inode) and the same last name. */
bool ptdp_cli_same_file(const char *a, const char *b);

/* 0, or PTDP_EXIT_USAGE after printing "ptdp <cmd>: …" naming both flags
 * (or the output and why it cannot be written). */
int ptdp_cli_check_files(const char *cmd, const ptdp_cli_file *inputs, int ninputs,
                         const ptdp_cli_file *outputs, int noutputs);

#endif
