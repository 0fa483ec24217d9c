/*
 * main.c — `ptdp <command> [flags]`: find the command, hand it its arguments.
 *
 *     ptdp bench collectives --devices 4
 *          │     └──────────────────────── argv of the command (argv[0] = "bench")
 *          └── looked up in the table made from PTDP_COMMANDS (commands.h)
 *
 * This is the only place in ptdp where the process's exit status is decided:
 * commands return 0 (done), 1 (the run failed) or 2 (a bad command line), and
 * main returns what the command returned — unless its standard output could
 * not be written (a full disk, a closed pipe, `> /dev/full`): an answer that
 * never arrived is a failure, so main flushes stdout, checks it, and says so
 *
 *     ptdp: writing standard output: No space left on device     (exit 1)
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "backend.h"
#include "commands.h"
#include "ptdp/types.h"

#ifndef PTDP_VERSION
#define PTDP_VERSION "unknown"
#endif

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

#define PTDP_TABLE_ENTRY(name, summary) { #name, ptdp_cmd_##name, summary },
static const command commands[] = { PTDP_COMMANDS(PTDP_TABLE_ENTRY) };
#undef PTDP_TABLE_ENTRY

static const int ncommands = (int)(sizeof commands / sizeof commands[0]);

static const command *find_command(const char *name)
{
    for (int i = 0; i < ncommands; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static void print_overview(FILE *f)
{
    fprintf(f,
        "ptdp — data, tensor and pipeline parallelism on simulated CPU devices\n"
        "\n"
        "usage: ptdp <command> [flags]\n"
        "\n"
        "commands:\n");
    for (int i = 0; i < ncommands; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f,
        "\n"
        "`ptdp <command> --help` (or `ptdp help <command>`) lists a command's flags.\n"
        "Exit status: 0 done, 1 the run failed, 2 a bad command line.\n");
}

int ptdp_cmd_help(int argc, char **argv)
{
    if (argc < 2) {
        print_overview(stdout);
        return PTDP_EXIT_OK;
    }
    if (argc > 2)
        return ptdp_usage_error("help", "expected one command name, e.g. ptdp help bench");
    const command *c = find_command(argv[1]);
    if (!c)
        return ptdp_usage_error("help", "unknown command '%s' (see ptdp --help)", argv[1]);
    char help_flag[] = "--help";
    char *sub_argv[] = { argv[1], help_flag, NULL };
    return c->run(2, sub_argv);
}

int ptdp_cmd_version(int argc, char **argv)
{
    ptdp_args a;
    ptdp_args_init(&a, "version", argc, argv, 1);
    while (ptdp_args_next(&a)) {
        if (ptdp_args_is(&a, "--help")) {
            printf("usage: ptdp version\n\nPrint the version, the element type and the compiler.\n");
            return PTDP_EXIT_OK;
        }
        return ptdp_args_unknown(&a);
    }
    printf("ptdp %s, elements %s (%s)",
           PTDP_VERSION, PTDP_REAL_NAME, sizeof(ptdp_real) == 4 ? "float" : "double");
#if defined(__clang__)
    printf(", built with clang %d.%d.%d", __clang_major__, __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
    printf(", built with gcc %d.%d.%d", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#endif
#if defined(NDEBUG)
    printf(", NDEBUG");
#endif
    printf("\n");
    return PTDP_EXIT_OK;
}

/* The command's status, or 1 when its standard output did not get out:
 * whatever was printed has to reach the file, so flush, then ask whether
 * any write on the way failed (stdio keeps the error flag, not its errno:
 * the reason is known only when this last flush is the write that fails). */
static int checked_stdout(int status)
{
    errno = 0;
    int flush = fflush(stdout) == 0 ? 0 : errno;
    if (flush == 0 && !ferror(stdout))
        return status;
    fprintf(stderr, "ptdp: writing standard output: %s\n",
            flush != 0 ? strerror(flush) : "an earlier write failed");
    return status != PTDP_EXIT_OK ? status : PTDP_EXIT_FAIL;
}

static int run_command(int argc, char **argv)
{
    if (argc < 2) {
        print_overview(stderr);
        return PTDP_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0)
        return ptdp_cmd_help(1, argv + 1);
    if (strcmp(name, "--version") == 0)
        return ptdp_cmd_version(1, argv + 1);

    const command *c = find_command(name);
    if (!c) {
        fprintf(stderr, "ptdp: unknown command '%s' (see ptdp --help)\n", name);
        return PTDP_EXIT_USAGE;
    }
    if (c->run != ptdp_cmd_help && c->run != ptdp_cmd_version) {
        int rc = ptdp_cli_backend_alone(argc - 1, argv + 1);
        if (rc != 0)
            return rc;
    }
    return c->run(argc - 1, argv + 1);
}

int main(int argc, char **argv)
{
    return checked_stdout(run_command(argc, argv));
}
