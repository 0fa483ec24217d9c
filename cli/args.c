/*
 * args.c — reading flags, and saying exactly what is wrong with a bad one.
 *
 * Every message has the same shape, so a user (and tests/cli) can rely on it:
 *
 *     ptdp <command>: <flag> <value as typed>: <what is wrong; what would fix it>
 *
 * The readers never exit: they print, set a->status and return
 * PTDP_EXIT_USAGE, and the command returns that from main.
 */
#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/arena.h"
#include "ptdp/ops.h"
#include "ptdp/schedule.h"

#define SIZE_HINT "a number with an optional K, M or G suffix, 1024-based, e.g. 4K or 64M"

void ptdp_args_init(ptdp_args *a, const char *cmd, int argc, char **argv, int first)
{
    memset(a, 0, sizeof *a);
    a->cmd = cmd;
    a->argc = argc;
    a->argv = argv;
    a->next = first;
}

int ptdp_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "ptdp %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return PTDP_EXIT_USAGE;
}

/* Report a problem with the current flag's value. */
static int value_error(ptdp_args *a, const char *value, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int value_error(ptdp_args *a, const char *value, const char *fmt, ...)
{
    va_list ap;
    /* an empty value is quoted, so the message still shows where it was */
    fprintf(stderr, "ptdp %s: %s %s: ", a->cmd, a->flag, value[0] ? value : "''");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    a->status = PTDP_EXIT_USAGE;
    return PTDP_EXIT_USAGE;
}

bool ptdp_args_next(ptdp_args *a)
{
    if (a->status || a->next >= a->argc)
        return false;
    a->arg = a->argv[a->next++];
    a->flag[0] = '\0';
    a->inline_value = NULL;

    if (strcmp(a->arg, "-h") == 0) {            /* the one short flag */
        strcpy(a->flag, "--help");
    } else if (a->arg[0] == '-' && a->arg[1] != '\0') {
        /* "--name" or "--name=value" (a lone "-name" is kept whole and
         * will be reported as unknown) */
        const char *eq = strchr(a->arg, '=');
        size_t len = eq ? (size_t)(eq - a->arg) : strlen(a->arg);
        if (len >= sizeof a->flag)
            len = sizeof a->flag - 1;
        memcpy(a->flag, a->arg, len);
        a->flag[len] = '\0';
        if (eq)
            a->inline_value = eq + 1;
        for (int i = 0; i < a->nseen; i++)
            if (strcmp(a->seen[i], a->flag) == 0 && strcmp(a->flag, "--help") != 0) {
                fprintf(stderr, "ptdp %s: %s is given twice: give it once (which value did you mean?)\n",
                        a->cmd, a->flag);
                a->status = PTDP_EXIT_USAGE;
                return false;
            }
        if (a->nseen < (int)(sizeof a->seen / sizeof a->seen[0]))
            memcpy(a->seen[a->nseen++], a->flag, len + 1);
    }
    return true;
}

bool ptdp_args_is(const ptdp_args *a, const char *name)
{
    return a->flag[0] != '\0' && strcmp(a->flag, name) == 0;
}

/* The value of the current flag: after '=', else the next argument. */
static const char *take_value(ptdp_args *a)
{
    if (a->inline_value)
        return a->inline_value;
    if (a->next < a->argc)
        return a->argv[a->next++];
    fprintf(stderr, "ptdp %s: %s: missing value (see ptdp %s --help)\n",
            a->cmd, a->flag, a->cmd);
    a->status = PTDP_EXIT_USAGE;
    return NULL;
}

/* One whole number `item` of the flag's `value` (the same string for a
 * single value), within [lo, hi]. */
static int parse_one_int(ptdp_args *a, const char *value, const char *item, long lo, long hi, int *out)
{
    char *end = NULL;
    errno = 0;
    long x = strtol(item, &end, 10);
    const bool whole = item == value;
    if (*item == '\0' || *end != '\0' || errno == ERANGE)
        return whole ? value_error(a, value, "not a whole number; use one between %ld and %ld", lo, hi)
                     : value_error(a, value, "'%s' is not a whole number; use ones between %ld and %ld", item, lo,
                                   hi);
    if (x < lo || x > hi)
        return whole ? value_error(a, value, "must be between %ld and %ld", lo, hi)
                     : value_error(a, value, "'%s' must be between %ld and %ld", item, lo, hi);
    *out = (int)x;
    return 0;
}

int ptdp_args_int(ptdp_args *a, long lo, long hi, int *out)
{
    const char *v = take_value(a);
    if (!v)
        return PTDP_EXIT_USAGE;
    return parse_one_int(a, v, v, lo, hi, out);
}

int ptdp_args_double(ptdp_args *a, double lo, double hi, double *out)
{
    const char *v = take_value(a);
    if (!v)
        return PTDP_EXIT_USAGE;
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    if (*v == '\0' || *end != '\0')
        return value_error(a, v, "not a number; use one between %g and %g", lo, hi);
    if (isnan(x))
        return value_error(a, v, "not a number (NaN); use one between %g and %g", lo, hi);
    if (errno == ERANGE || !isfinite(x))
        return value_error(a, v, "%s; use one between %g and %g",
                           fabs(x) < 1 ? "too close to zero (it underflows)"
                           : isinf(x) && errno != ERANGE ? "infinite" : "too large (it overflows)", lo, hi);
    if (x < lo || x > hi)
        return value_error(a, v, "must be between %g and %g", lo, hi);
    *out = x;
    return 0;
}

/* A size as a user would type it: 65536 -> "64K", 4 -> "4 bytes". */
static const char *size_text(size_t bytes, char *buf, size_t len)
{
    const char *suffix = "KMG";
    int k = -1;
    while (k < 2 && bytes >= 1024 && bytes % 1024 == 0) {
        bytes /= 1024;
        k++;
    }
    if (k < 0)
        snprintf(buf, len, "%zu bytes", bytes);
    else
        snprintf(buf, len, "%zu%c", bytes, suffix[k]);
    return buf;
}

/* Parse one size (`item` may be part of a list, `value` is the whole text). */
static int parse_one_size(ptdp_args *a, const char *value, const char *item,
                          size_t lo, size_t hi, size_t *out)
{
    char los[32], his[32];
    size_t bytes = 0;
    bool whole = strcmp(item, value) == 0;
    if (ptdp_parse_size(item, &bytes) != 0) {
        if (whole)
            return value_error(a, value, "not a size (" SIZE_HINT ")");
        return value_error(a, value, "'%s' is not a size (" SIZE_HINT ")", item);
    }
    if (bytes < lo || bytes > hi) {
        size_text(lo, los, sizeof los);
        size_text(hi, his, sizeof his);
        if (whole)
            return value_error(a, value, "must be between %s and %s", los, his);
        return value_error(a, value, "'%s' must be between %s and %s", item, los, his);
    }
    *out = bytes;
    return 0;
}

int ptdp_args_size(ptdp_args *a, size_t lo, size_t hi, size_t *out)
{
    const char *v = take_value(a);
    if (!v)
        return PTDP_EXIT_USAGE;
    return parse_one_size(a, v, v, lo, hi, out);
}

/*
 * Split a comma list into items and hand each to `one`.  Items are copied
 * into a small buffer so argv is never modified.
 */
typedef int (*item_fn)(ptdp_args *a, const char *value, const char *item, int k, void *ctx);

static int for_each_item(ptdp_args *a, const char *value, int max, int *count,
                         item_fn one, void *ctx)
{
    char item[64];
    int k = 0;
    const char *p = value;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0)
            return value_error(a, value, "empty item in the list (write e.g. 4K,4M)");
        if (len >= sizeof item)
            return value_error(a, value, "item '%.*s…' is too long", 16, p);
        if (k == max)
            return value_error(a, value, "at most %d items", max);
        memcpy(item, p, len);
        item[len] = '\0';
        int rc = one(a, value, item, k, ctx);
        if (rc)
            return rc;
        k++;
        if (!comma)
            break;
        p = comma + 1;
    }
    *count = k;
    return 0;
}

typedef struct { size_t lo, hi; size_t *out; } size_list_ctx;

static int size_item(ptdp_args *a, const char *value, const char *item, int k, void *ctx)
{
    size_list_ctx *c = ctx;
    return parse_one_size(a, value, item, c->lo, c->hi, &c->out[k]);
}

int ptdp_args_size_list(ptdp_args *a, size_t lo, size_t hi,
                        size_t *out, int max, int *n)
{
    const char *v = take_value(a);
    if (!v)
        return PTDP_EXIT_USAGE;
    size_list_ctx c = { lo, hi, out };
    return for_each_item(a, v, max, n, size_item, &c);
}

typedef struct { long lo, hi; int *out; } int_list_ctx;

static int int_item(ptdp_args *a, const char *value, const char *item, int k, void *ctx)
{
    int_list_ctx *c = ctx;
    return parse_one_int(a, value, item, c->lo, c->hi, &c->out[k]);
}

int ptdp_args_int_list(ptdp_args *a, long lo, long hi, int *out, int max, int *n)
{
    const char *v = take_value(a);
    if (!v)
        return PTDP_EXIT_USAGE;
    int_list_ctx c = { lo, hi, out };
    return for_each_item(a, v, max, n, int_item, &c);
}

/* "ring, naive, shm" for messages. */
static void join_names(const char *const *names, int n, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", names[i]);
}

static int find_name(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0)
            return i;
    return -1;
}

void ptdp_help_wrapped(FILE *f, const char *flag, const char *text)
{
    enum { INDENT = 22, WIDTH = 94 };
    int col = fprintf(f, "%-*s", INDENT, flag);
    while (*text != '\0') {
        while (*text == ' ')
            text++;
        const size_t word = strcspn(text, " ");
        if (word == 0)
            break;
        if (col > INDENT && col + 1 + (int)word > WIDTH) {
            col = fprintf(f, "\n%*s", INDENT, "") - 1;
        } else if (col > INDENT) {
            fputc(' ', f);
            col++;
        }
        col += fprintf(f, "%.*s", (int)word, text);
        text += word;
    }
    fputc('\n', f);
}

int ptdp_args_schedule(ptdp_args *a, const ptdp_schedule_entry **out)
{
    enum { NAMES_MAX = 32 };
    const char *names[NAMES_MAX];
    const int n = ptdp_schedule_count() < NAMES_MAX ? ptdp_schedule_count() : NAMES_MAX;
    for (int i = 0; i < n; i++)
        names[i] = ptdp_schedule_at(i)->name;
    int which;
    int rc = ptdp_args_enum(a, names, n, &which);
    if (rc == 0)
        *out = ptdp_schedule_at(which);
    return rc;
}

int ptdp_args_enum(ptdp_args *a, const char *const *names, int n, int *out)
{
    const char *v = take_value(a);
    if (!v)
        return PTDP_EXIT_USAGE;
    int i = find_name(names, n, v);
    if (i < 0) {
        char list[512];
        join_names(names, n, list, sizeof list);
        return value_error(a, v, "must be one of %s", list);
    }
    *out = i;
    return 0;
}

int ptdp_args_attention(ptdp_args *a, int *out)
{
    static const char *const cores[] = { "full", "tiled" };
    int k = 0;
    const int rc = ptdp_args_enum(a, cores, 2, &k);
    if (rc == 0)
        *out = k;
    return rc;
}

bool ptdp_attention_tiles(int given, bool has_attention, bool selective, int T)
{
    if (given >= 0)
        return given == 1;
    return has_attention && !selective && T > PTDP_ATTENTION_TILE;
}

typedef struct { const char *const *names; int n; int *out; } enum_list_ctx;

static int enum_item(ptdp_args *a, const char *value, const char *item, int k, void *ctx)
{
    enum_list_ctx *c = ctx;
    int i = find_name(c->names, c->n, item);
    if (i < 0) {
        char list[512];
        join_names(c->names, c->n, list, sizeof list);
        return value_error(a, value, "'%s' is not one of %s", item, list);
    }
    for (int j = 0; j < k; j++)
        if (c->out[j] == i)
            return value_error(a, value, "'%s' is listed twice", item);
    c->out[k] = i;
    return 0;
}

int ptdp_args_enum_list(ptdp_args *a, const char *const *names, int n,
                        int *out, int max, int *count)
{
    const char *v = take_value(a);
    if (!v)
        return PTDP_EXIT_USAGE;
    enum_list_ctx c = { names, n, out };
    return for_each_item(a, v, max, count, enum_item, &c);
}

int ptdp_args_string(ptdp_args *a, const char **out)
{
    const char *v = take_value(a);
    if (!v)
        return PTDP_EXIT_USAGE;
    if (*v == '\0')
        return value_error(a, "''", "must not be empty");
    *out = v;
    return 0;
}

int ptdp_args_switch(ptdp_args *a, bool *out)
{
    if (a->inline_value) {
        fprintf(stderr, "ptdp %s: %s takes no value (write just %s)\n",
                a->cmd, a->arg, a->flag);
        a->status = PTDP_EXIT_USAGE;
        return PTDP_EXIT_USAGE;
    }
    *out = true;
    return 0;
}

int ptdp_args_unknown(ptdp_args *a)
{
    if (a->flag[0])
        fprintf(stderr, "ptdp %s: unknown flag %s (see ptdp %s --help)\n",
                a->cmd, a->flag, a->cmd);
    else
        fprintf(stderr, "ptdp %s: unexpected argument '%s' (see ptdp %s --help)\n",
                a->cmd, a->arg, a->cmd);
    a->status = PTDP_EXIT_USAGE;
    return PTDP_EXIT_USAGE;
}
