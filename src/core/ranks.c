/*
 * ranks.c — grouping ranks that say the same thing (ranks.h).
 *
 *   text:   r0 "A"  r1 "A"  r2 "B"  r3 "A"
 *   groups: "B" {2}   "A" {0, 1, 3}          fewest first
 *   out:    "rank 2: B; ranks 0-1, 3: A"
 */
#include "core/ranks.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define MAX_RANKS 1024

/* Append to buf at *used, never past len; remember when something is cut. */
static void put(char *buf, size_t len, size_t *used, bool *cut, const char *fmt, const char *s, int a, int b)
{
    if (*used + 1 >= len) {
        *cut = true;
        return;
    }
    int n = snprintf(buf + *used, len - *used, fmt, s ? s : "", a, b);
    if (n < 0 || (size_t)n >= len - *used) {
        *used = len - 1;
        *cut = true;
    } else {
        *used += (size_t)n;
    }
}

void ptdp_describe_ranks(const char *const *text, int n, char *buf, size_t len)
{
    if (len == 0)
        return;
    buf[0] = '\0';
    if (n > MAX_RANKS)
        n = MAX_RANKS;
    int group[MAX_RANKS], size[MAX_RANKS], ngroups = 0;
    /* group[r]: the first rank with r's text, the group's name */
    for (int r = 0; r < n; r++) {
        group[r] = r;
        for (int q = 0; q < r; q++)
            if (strcmp(text[q], text[r]) == 0) {
                group[r] = group[q];
                break;
            }
        size[r] = 0;
    }
    for (int r = 0; r < n; r++)
        size[group[r]]++;
    int order[MAX_RANKS];
    for (int r = 0; r < n; r++)
        if (group[r] == r)
            order[ngroups++] = r;
    /* fewest ranks first; a stable insertion sort keeps ties in rank order */
    for (int i = 1; i < ngroups; i++)
        for (int j = i; j > 0 && size[order[j]] < size[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    size_t used = 0;
    bool cut = false;
    for (int g = 0; g < ngroups && !cut; g++) {
        int lead = order[g];
        put(buf, len, &used, &cut, "%s", g ? "; " : "", 0, 0);
        put(buf, len, &used, &cut, "%s", size[lead] == 1 ? "rank " : "ranks ", 0, 0);
        bool first = true;
        for (int r = 0; r < n; r++) {
            if (group[r] != lead || (r > 0 && group[r - 1] == lead))
                continue;
            int end = r;
            while (end + 1 < n && group[end + 1] == lead)
                end++;
            if (end == r)
                put(buf, len, &used, &cut, "%s%d", first ? "" : ", ", r, 0);
            else
                put(buf, len, &used, &cut, "%s%d-%d", first ? "" : ", ", r, end);
            first = false;
        }
        put(buf, len, &used, &cut, ": %s", text[lead], 0, 0);
    }
    if (cut && len >= 4)
        memcpy(buf + len - 4, "...", 4);
}
