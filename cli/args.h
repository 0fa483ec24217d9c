/*
 * args.h — command-line flags for every ptdp command.
 *
 * A command walks its arguments with a cursor and, for each flag, calls the
 * helper that reads the kind of value the flag takes:
 *
 *     ptdp_args a;
 *     ptdp_args_init(&a, "bench collectives", argc, argv, 2);
 *     while (ptdp_args_next(&a)) {
 *         int rc = 0;
 *         if      (ptdp_args_is(&a, "--devices")) rc = ptdp_args_int(&a, 1, 64, &devices);
 *         else if (ptdp_args_is(&a, "--json"))    rc = ptdp_args_switch(&a, &json);
 *         else                                    rc = ptdp_args_unknown(&a);
 *         if (rc) return PTDP_EXIT_USAGE;
 *     }
 *     if (a.status) return PTDP_EXIT_USAGE;
 *
 * Both spellings work: "--devices 4" and "--devices=4".  A bad value is
 * reported on stderr in one line that names the command, the flag, the value
 * and what would fix it, e.g.
 *
 *     ptdp bench collectives: --devices 0: must be between 1 and 64
 *     ptdp bench collectives: --sizes 12Q: not a size (a number with an optional
 *         K, M or G suffix, 1024-based, e.g. 4K or 64M)
 *
 * and the command exits with PTDP_EXIT_USAGE (2), as Unix tools do for a
 * usage error; 1 means "the run itself failed".
 */
#ifndef PTDP_CLI_ARGS_H
#define PTDP_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Process exit codes of every command. */
enum { PTDP_EXIT_OK = 0, PTDP_EXIT_FAIL = 1, PTDP_EXIT_USAGE = 2 };

typedef struct {
    const char *cmd;     /* "bench collectives": prefixes every message       */
    int argc;
    char **argv;
    int next;            /* index of the next argument to read                */
    const char *arg;     /* the current argument as typed                     */
    char flag[64];       /* its flag name ("--devices"), or "" if positional   */
    const char *inline_value;  /* the part after '=' in "--flag=value"        */
    int status;          /* 0, or PTDP_EXIT_USAGE once an error was reported  */
    char seen[64][64];   /* the flags read so far: each may be given once     */
    int nseen;
} ptdp_args;

/* Start reading argv[first..argc). */
void ptdp_args_init(ptdp_args *a, const char *cmd, int argc, char **argv, int first);

/* Step to the next argument.  Returns true while there is one; a.flag then
 * holds its name ("--devices"), or is "" for a positional argument (a.arg).
 * A flag given twice is a usage error ("--dp 2 --dp 4": which one?), so
 * this returns false with a.status set. */
bool ptdp_args_next(ptdp_args *a);

/* True if the current argument is the flag `name` ("--devices"). */
bool ptdp_args_is(const ptdp_args *a, const char *name);

/* The value readers.  Each takes the flag's value (the next argument, or the
 * part after '='), and returns 0, or PTDP_EXIT_USAGE after printing why the
 * value is wrong.  *out is written only on success. */
int ptdp_args_int(ptdp_args *a, long lo, long hi, int *out);
int ptdp_args_double(ptdp_args *a, double lo, double hi, double *out);
/* "4K", "64M", "1G", "4096": K/M/G are 1024-based (ptdp_parse_size). */
int ptdp_args_size(ptdp_args *a, size_t lo, size_t hi, size_t *out);
/* "4K,256K,4M": at most `max` sizes, each within [lo, hi]. */
int ptdp_args_size_list(ptdp_args *a, size_t lo, size_t hi,
                        size_t *out, int max, int *n);
/* "2048,128": at most `max` whole numbers, each within [lo, hi]. */
int ptdp_args_int_list(ptdp_args *a, long lo, long hi, int *out, int max, int *n);
/* One of `names` (n of them): *out = its index. */
int ptdp_args_enum(ptdp_args *a, const char *const *names, int n, int *out);
/* "a,b,c", each one of `names`, no repeats: out[k] = index of the k-th. */
int ptdp_args_enum_list(ptdp_args *a, const char *const *names, int n,
                        int *out, int max, int *count);
/* A schedule's name (--schedule): *out = its registry row (schedule.h);
 * the names the registry holds are the valid values. */
struct ptdp_schedule_entry;
int ptdp_args_schedule(ptdp_args *a, const struct ptdp_schedule_entry **out);
/* Any text (a path, a name): *out points into argv. */
int ptdp_args_string(ptdp_args *a, const char **out);
/* A flag without a value (--json): sets *out = true.  "--json=x" is an error. */
int ptdp_args_switch(ptdp_args *a, bool *out);

/* --attention full|tiled, as train, plan and bench train read it: *out = 0
 * (full) or 1 (tiled); left as it was (-1: not given) on an error. */
int ptdp_args_attention(ptdp_args *a, int *out);
/* The attention core a command runs (attention_tiled.c): what --attention
 * said (given 0 or 1), else the default: tiles where the model has attention
 * and a sequence of T positions spans more than one tile (T > 64), since
 * there they skip the masked future and keep no T x T probabilities (at T
 * 256, 0.95 of the whole matrix's wall time and half its kept bytes); the
 * whole matrix at T <= 64, where one tile holds every score and tiles would
 * only make S twice, and under --recompute selective, which exists to redo
 * that matrix's core (in tiles it would have nothing to redo). */
bool ptdp_attention_tiles(int given, bool has_attention, bool selective, int T);

/* Report the current argument as unknown (or unexpected, if positional). */
int ptdp_args_unknown(ptdp_args *a);

/* A --help entry: `flag` in the first 22 columns, then `text` wrapped at
 * 94 columns, each further line indented to column 22. */
void ptdp_help_wrapped(FILE *f, const char *flag, const char *text);

/* Print "ptdp <cmd>: <message>" on stderr and return PTDP_EXIT_USAGE, for
 * checks that involve several flags ("--tp 3 does not divide --devices 4"). */
int ptdp_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
