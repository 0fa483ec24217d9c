/*
 * ptdp_web.c — the explorer's one door: `ptdp schedule …` and `ptdp plan …`
 * compiled to WebAssembly, called from web/index.html.
 *
 *     page                         this file                 the CLI's own code
 *     ─────────────────────────    ──────────────────────    ─────────────────────────
 *     "schedule\n--pp\n4\n…"  ──►  ptdp_web_run(args)   ──►  ptdp_cmd_schedule(argc, argv)
 *     stdout, stderr (Module.print/printErr)   ◄── printf, ptdp_usage_error
 *     /web/report.json, /web/plan.html (MEMFS) ◄── --report FILE, --html FILE
 *
 * The page hands over the words of a command line (one a line: a word typed
 * on the page holds no newline), so the flags go through the same parser,
 * the same validation and the same messages as in a terminal; the exit
 * status comes back (0 done, 1 failed, 2 a bad command line) and the page
 * reads what the command printed and wrote.  Nothing here computes a number.
 *
 * Only the two commands the explorer needs are reachable: the rest would
 * start threads, which this build has none of (no -pthread).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <emscripten.h>

#include "args.h"
#include "commands.h"

enum { WORDS_MAX = 128 };

/* The command line's words, split at newlines in place. */
static int split_words(char *line, char **argv)
{
    int argc = 0;
    for (char *at = line; *at != '\0' && argc < WORDS_MAX;) {
        argv[argc++] = at;
        char *nl = strchr(at, '\n');
        if (nl == NULL)
            break;
        *nl = '\0';
        at = nl + 1;
    }
    argv[argc] = NULL;
    return argc;
}

/* Run `ptdp WORDS…`: its exit status, stdout and stderr flushed to the page. */
EMSCRIPTEN_KEEPALIVE int ptdp_web_run(const char *words)
{
    char *line = strdup(words);
    char *argv[WORDS_MAX + 1];
    if (line == NULL) {
        fprintf(stderr, "ptdp: out of memory for the command line\n");
        return PTDP_EXIT_FAIL;
    }
    int argc = split_words(line, argv), rc;
    if (argc == 0) {
        fprintf(stderr, "ptdp: no command (the explorer runs schedule and plan)\n");
        rc = PTDP_EXIT_USAGE;
    } else if (strcmp(argv[0], "schedule") == 0) {
        rc = ptdp_cmd_schedule(argc, argv);
    } else if (strcmp(argv[0], "plan") == 0) {
        rc = ptdp_cmd_plan(argc, argv);
    } else {
        fprintf(stderr, "ptdp: unknown command '%s' (the explorer runs schedule and plan)\n", argv[0]);
        rc = PTDP_EXIT_USAGE;
    }
    fflush(stdout);
    fflush(stderr);
    free(line);
    return rc;
}
