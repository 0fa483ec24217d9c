/*
 * row_max.h — the largest number of a row, in lanes (internal to the
 * library; the softmaxes of attention.c and attention_tiled.c).
 *
 *     max_s row[s], s < n
 *
 * The scan max = row[0]; max = row[s] > max ? row[s] : max is one chain of
 * compares, each waiting for the last.  A maximum is exact in any order,
 * so eight lanes, each a scan of every eighth number, then the lanes'
 * maximum, give the same number — and the compiler vectorises the lanes.
 */
#ifndef PTDP_ROW_MAX_H
#define PTDP_ROW_MAX_H

#include "ptdp/types.h"

/* max_s row[s] over s < n (n >= 1), as the scan finds it.  The lanes may
 * pick a tie of the other sign when the maximum is zero, which no caller
 * can see: x - (+0) and x - (-0) are the same but for x = ±0, whose exp is
 * 1 either way.  A NaN at row[0] is the max in both; any later NaN is
 * skipped by both. */
static inline ptdp_real ptdp_max_lanes(const ptdp_real *row, int n)
{
    ptdp_real lane[8];
    for (int l = 0; l < 8; l++)
        lane[l] = row[0];
    int s = 0;
    for (; s + 8 <= n; s += 8)
        for (int l = 0; l < 8; l++)
            lane[l] = row[s + l] > lane[l] ? row[s + l] : lane[l];
    ptdp_real max = lane[0];
    for (int l = 1; l < 8; l++)
        max = lane[l] > max ? lane[l] : max;
    for (; s < n; s++)
        max = row[s] > max ? row[s] : max;
    return max;
}

#endif
