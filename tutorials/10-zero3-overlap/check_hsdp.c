/*
 * check_hsdp.c — lesson 10, blank 8: HSDP's gradient sum in two stages.
 *
 * HSDP cuts the dp ranks into R = dp/N shard groups of N consecutive
 * ranks; ZeRO shards inside each, and the R ranks with the same index in
 * their shard groups (a replica group) hold the same shard:
 *
 *   dp = 4, N = 2, R = 2      index in the shard group:   0       1
 *   shard group 0                                        dp 0    dp 1
 *   shard group 1                                        dp 2    dp 3
 *                                                          └ replica ┘ groups: {0, 2}, {1, 3}
 *
 *   g_k = sum over the R groups of ( reduce-scatter inside the group )_k
 *
 * For (dp, N) = (4, 2), (4, 4) (one shard group: plain ZeRO), (4, 1) (no
 * sharding: plain DP's all-reduce) and (6, 3), each rank fills one unit's
 * gradient buffer with a known gradient of its own, calls your
 * lesson_hsdp_sum, twice (two micro-batches), and the check asks:
 *
 *   1. is every rank's g_shard the sum over ALL dp ranks of its shard, both
 *      micro-batches added, to 1e-10?  Wrong, it is named by what it
 *      equals: 1/N or 1/R of the sum (a stage averaged: the 1/B scaling
 *      twice), right only on the ranks whose index in the shard group is
 *      their index in the replica group (the two groups swapped), the
 *      last micro-batch alone;
 *   2. what did each group carry — the library counts every device's bytes
 *      per communicator name (ptdp_comm_stats.group): the mean over the
 *      ranks must be (N-1)/N S over "shard", 2(R-1)/(RN) S over "replica"
 *      and nothing over z->dp ("world" here).  An all-reduce over the whole
 *      DP group gives the right numbers and is caught here.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_hsdp.h"
#include "lesson.h"
#include "tutorial.h"

#include "ptdp/error.h"

enum { HNUMEL = 42, MAX_DP = 8, MBS = 2 };
static const double HTOL = 1e-10;

typedef struct {
    int dp, N;
    double sent_shard[MAX_DP], sent_replica[MAX_DP], sent_dp[MAX_DP];
    size_t off[MAX_DP], len[MAX_DP];
    ptdp_real got[MAX_DP][HNUMEL];      /* rank r's g_shard after the MBS calls */
} hsdp_run;

/* Rank r's made-up gradient in micro-batch mb: element i. */
static double hsdp_grad(int r, int mb, size_t i) { return 0.01 * (r + 1) * (double)(i + 1) + sin((double)i + mb); }

static bool hsame(double got, double want) { return fabs(got - want) <= HTOL * fmax(1.0, fabs(want)); }

/* The sum over every dp rank of element i, over micro-batches [mb0, MBS). */
static double hsdp_sum(int dp, int mb0, size_t i)
{
    double s = 0;
    for (int mb = mb0; mb < MBS; mb++)
        for (int k = 0; k < dp; k++)
            s += hsdp_grad(k, mb, i);
    return s;
}

/* Bytes this device has sent over the groups called `name`. */
static double group_sent(const ptdp_device *dev, const char *name)
{
    for (int g = 0; g < dev->stats.ngroups; g++)
        if (strcmp(dev->stats.group[g].name, name) == 0)
            return dev->stats.group[g].sent;
    return 0;
}

static int hsdp_device(ptdp_device *dev, void *arg)
{
    hsdp_run *x = arg;
    const int r = dev->rank, N = x->N;
    lesson_zero3 z = { .dp = dev->world, .nunits = 1 };
    lesson_unit *unit = &z.unit[0];
    int rc = ptdp_comm_split(dev->world, r / N, r, "shard", &z.shard);
    if (rc == 0)
        rc = ptdp_comm_split(dev->world, r % N, r, "replica", &z.replica);
    unit->numel = HNUMEL;
    if (rc == 0) {
        ptdp_share(HNUMEL, N, ptdp_comm_rank(z.shard), &unit->off, &unit->len);
        unit->g_shard = ptdp_alloc(dev, unit->len * sizeof(ptdp_real), PTDP_MEM_GRADS, "g_shard");
        rc = unit->g_shard != NULL ? PTDP_OK : PTDP_ENOMEM;
    }
    const char *dp_name = ptdp_comm_name(z.dp);
    double s0 = group_sent(dev, "shard"), r0 = group_sent(dev, "replica"), d0 = group_sent(dev, dp_name);
    for (int mb = 0; mb < MBS && rc == 0; mb++) {
        if ((rc = lesson_grad_buffer(dev, &z, 0)) != 0)
            break;
        for (size_t i = 0; i < HNUMEL; i++)
            unit->g[i] = hsdp_grad(r, mb, i);
        if ((rc = lesson_hsdp_sum(dev, &z, 0)) != 0)
            break;
        if (unit->g != NULL)
            rc = tutorial_device_wrong(dev, "rank %d: after lesson_hsdp_sum, z->unit[0].g is still there: once "
                                       "the shard is added, free it and set it to NULL (lesson_add_grad does; "
                                       "blank 8).", r);
    }
    if (rc == 0) {
        x->sent_shard[r] = (group_sent(dev, "shard") - s0) / MBS;
        x->sent_replica[r] = (group_sent(dev, "replica") - r0) / MBS;
        x->sent_dp[r] = (group_sent(dev, dp_name) - d0) / MBS;
        x->off[r] = unit->off;
        x->len[r] = unit->len;
        memcpy(x->got[r], unit->g_shard, unit->len * sizeof(ptdp_real));
    }
    ptdp_free(dev, unit->g);
    ptdp_free(dev, unit->g_shard);
    ptdp_comm_free(z.replica);
    ptdp_comm_free(z.shard);
    return rc;
}

/* Did the replica group carry a reduce-scatter of the whole unit — the
 * groups swapped?  (The mean over the ranks of (R-1)/R S; the right sum
 * sends 2(R-1)/(RN) S there.  With N = R the two are equal, and so are
 * the shard group's bytes: see swapped_probe.) */
static bool bytes_swapped(const hsdp_run *x)
{
    const int R = x->dp / x->N;
    const double S = HNUMEL * sizeof(ptdp_real);
    double replica = 0;
    for (int r = 0; r < x->dp; r++)
        replica += x->sent_replica[r] / x->dp;
    return R > 1 && x->N != R && fabs(replica - (double)(R - 1) / R * S) <= 1e-9 * S;
}

/* With N = R (dp 4, N 2) both orders send the same bytes over each group:
 * rerun the student's function on dp 6 = 2 groups of N = 3, where they
 * differ, and ask its bytes. */
static bool swapped_probe(void)
{
    hsdp_run *x = calloc(1, sizeof *x);
    if (x == NULL)
        return false;
    *x = (hsdp_run){ .dp = 6, .N = 3 };
    bool swapped = tutorial_launch("HSDP, dp 6 = 2 shard groups of N = 3 (which group did what?)", 6, hsdp_device,
                                   x) == 0 && bytes_swapped(x);
    free(x);
    return swapped;
}

/* Is every wrong element of every rank exactly the sum / f? */
static bool all_over(const hsdp_run *x, int f)
{
    for (int r = 0; r < x->dp; r++)
        for (size_t i = 0; i < x->len[r]; i++) {
            double want = hsdp_sum(x->dp, 0, x->off[r] + i);
            if (!hsame(x->got[r][i], want) && !hsame(x->got[r][i], want / f))
                return false;
        }
    return true;
}

/* 1: every rank's shard the sum over all dp ranks; if not, named. */
static bool hsdp_values(const hsdp_run *x, const char *what)
{
    const int N = x->N, R = x->dp / N;
    int first = -1;
    size_t elem = 0;
    bool last_alone = true;
    for (int r = 0; r < x->dp; r++) {
        bool bad = false;
        for (size_t i = 0; i < x->len[r]; i++) {
            size_t e = x->off[r] + i;
            if (hsame(x->got[r][i], hsdp_sum(x->dp, 0, e)))
                continue;
            last_alone = last_alone && hsame(x->got[r][i], hsdp_sum(x->dp, MBS - 1, e));
            if (!bad && first < 0) {
                first = r;
                elem = i;
            }
            bad = true;
        }
    }
    if (first < 0)
        return true;
    size_t e = x->off[first] + elem;
    tutorial_wrong("%s: rank %d's g_shard[%zu] (element %zu of the unit) is %.10g after %d micro-batches; the sum "
                   "over the %d dp ranks, added up over both, is %.10g.", what, first, elem, e,
                   (double)x->got[first][elem], MBS, x->dp, hsdp_sum(x->dp, 0, e));
    int f = N > 1 && all_over(x, N) ? N : R > 1 && all_over(x, R) ? R : all_over(x, x->dp) ? x->dp : 0;
    if (f > 1)
        tutorial_note("Every wrong element is exactly 1/%d of the sum: a stage AVERAGED (PTDP_AVG divides by the\n"
                      "group's size: N = %d in the shard group, R = %d across the replicas).  The backward already\n"
                      "divided by the whole batch B; a second division applies the 1/B scaling twice.  Both stages\n"
                      "SUM: PTDP_SUM (blank 8).", f, N, R);
    else if (N == R ? swapped_probe() : bytes_swapped(x))
        tutorial_note("%s carried a reduce-scatter of the whole unit: the shard group and the replica group are\n"
                      "SWAPPED.  The reduce-scatter runs inside the shard group (z->shard, N consecutive ranks,\n"
                      "which own the shards), the all-reduce of my shard across the replicas (z->replica) — blank 8.",
                      N == R ? "On dp 6 = 2 shard groups of 3 (at N = R both orders send the same bytes), the replica\ngroup"
                             : "The replica group");
    else if (last_alone)
        tutorial_note("That is the last micro-batch's alone: g_shard sums the step's micro-batches, so ADD into\n"
                      "it (lesson_add_grad), do not overwrite it (blank 8).");
    else
        tutorial_note("After the reduce-scatter over z->shard (numel elements, in place) my shard of the group's\n"
                      "sum is g[off .. off + len); the all-reduce over z->replica of those len elements makes it\n"
                      "the sum over all dp ranks; then lesson_add_grad (blank 8).");
    return false;
}

/* 2: what each group carried, the mean over the ranks. */
static bool hsdp_bytes(const hsdp_run *x, const char *what, double *shard, double *replica)
{
    const int N = x->N, R = x->dp / N;
    const double S = HNUMEL * sizeof(ptdp_real);
    double dp = 0, want_s = (double)(N - 1) / N * S, want_r = 2.0 * (R - 1) / (R * N) * S;
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    *shard = *replica = 0;
    for (int r = 0; r < x->dp; r++) {
        *shard += x->sent_shard[r] / x->dp;
        *replica += x->sent_replica[r] / x->dp;
        dp += x->sent_dp[r] / x->dp;
    }
    if (dp > 0) {
        bool ar = fabs(dp - 2.0 * (x->dp - 1) / x->dp * S) <= 1e-9 * S;
        tutorial_wrong("%s: the numbers are right, but each rank sent %s over the whole DP group (z->dp)%s; "
                       "HSDP sends %s in the shard group and %s across the replicas, nothing over z->dp.", what,
                       ptdp_format_bytes(dp, b1, sizeof b1),
                       ar ? ", an ALL-REDUCE's 2(dp-1)/dp S" : "",
                       ptdp_format_bytes(want_s, b2, sizeof b2), ptdp_format_bytes(want_r, b3, sizeof b3));
        tutorial_note("%s the unit's gradient over the whole DP group gives every rank the whole sum — it\n"
                      "crosses the slow links between the shard groups with every byte, and you keep 1/N of it.\n"
                      "Reduce-scatter inside z->shard, then all-reduce only your shard across z->replica\n"
                      "(blank 8).", ar ? "An all-reduce of" : "A collective of");
        return false;
    }
    if (fabs(*shard - want_s) <= 1e-9 * S && fabs(*replica - want_r) <= 1e-9 * S)
        return true;
    tutorial_wrong("%s: each rank sent %s in its shard group and %s across the replicas; the two stages send "
                   "(N-1)/N S = %s and 2(R-1)/(RN) S = %s (S = %s).", what, ptdp_format_bytes(*shard, b1, sizeof b1),
                   ptdp_format_bytes(*replica, b2, sizeof b2), ptdp_format_bytes(want_s, b3, sizeof b3),
                   ptdp_format_bytes(want_r, b4, sizeof b4), ptdp_format_bytes(S, b5, sizeof b5));
    if (bytes_swapped(x))
        tutorial_note("The replica group carried a reduce-scatter of the whole unit: the groups are SWAPPED.\n"
                      "The reduce-scatter runs inside z->shard, the all-reduce of my shard across z->replica\n"
                      "(blank 8).");
    else
        tutorial_note("One reduce-scatter of the unit (numel elements) over z->shard, one all-reduce of my\n"
                      "shard (len elements at g + off) over z->replica (blank 8).");
    return false;
}

static bool check_hsdp_config(int dp, int N)
{
    char what[96], b1[32], b2[32], b3[32];
    const int R = dp / N;
    snprintf(what, sizeof what, "HSDP, dp %d = %d shard group%s of N = %d", dp, R, R == 1 ? "" : "s", N);
    hsdp_run *x = calloc(1, sizeof *x);
    if (x == NULL) {
        tutorial_wrong("%s: host out of memory", what);
        return false;
    }
    *x = (hsdp_run){ .dp = dp, .N = N };
    double shard, replica;
    bool ok = tutorial_launch(what, dp, hsdp_device, x) == 0 && hsdp_values(x, what) &&
              hsdp_bytes(x, what, &shard, &replica);
    if (ok)
        tutorial_ok("%s: every rank's shard the sum over the %d ranks, 2 micro-batches; sent %s in the shard "
                    "group + %s across the %d replica%s (one reduce-scatter over all %d: %s)", what, dp,
                    ptdp_format_bytes(shard, b1, sizeof b1), ptdp_format_bytes(replica, b2, sizeof b2), R,
                    R == 1 ? "" : "s", dp,
                    ptdp_format_bytes((double)(dp - 1) / dp * HNUMEL * sizeof(ptdp_real), b3, sizeof b3));
    free(x);
    return ok;
}

bool check_hsdp(void)
{
    static const int configs[][2] = { { 4, 2 }, { 4, 4 }, { 4, 1 }, { 6, 3 } };
    for (size_t k = 0; k < sizeof configs / sizeof configs[0]; k++)
        if (!check_hsdp_config(configs[k][0], configs[k][1]))
            return false;
    tutorial_note("per device and unit: (N-1)/N S in the shard group + 2(R-1)/(RN) S across; N = dp is ZeRO's "
                  "one reduce-scatter, N = 1 plain DP's all-reduce");
    return true;
}
