/*
 * check.c — lesson 14: is your router the library's, do your dispatch and
 * combine move every row where ptdp_ep_dispatch and ptdp_ep_combine put
 * it, with their bytes, and do you sum an expert's gradient over the
 * right ranks?
 *
 *   blanks 1-2  lesson_route on hand-made logits (ties included), k = 1,
 *               2, 3 of E = 6: the choices of ptdp_moe_route bit for
 *               bit, its gates within 4 ulps (Mixtral's spelling of the
 *               same softmax rounds differently)
 *   blank 3     lesson_exchange_counts on N = 1, 2, 4 devices, E = 8,
 *               loads with empty experts and (N = 4) a rank that sends
 *               nothing: the counts of ptdp_ep_plan_init
 *   blanks 4-5  lesson_dispatch on the same: every row where
 *               ptdp_ep_dispatch puts it, bit for bit, and the bytes the
 *               rows for experts held elsewhere make; counts that pairs
 *               disagree on (the library stops that all_to_allv) named
 *   blanks 6-7  lesson_combine: every row home, as ptdp_ep_combine
 *   blank 8     lesson_gated_sum: out[t] = sum_j g_j y[slot], a dropped
 *               choice skipped, in the library's order (bit for bit)
 *   blank 9     lesson_expert_grad_ranks on six dp x ep layouts
 *   blanks 10-11  lesson_route_sigmoid on hand-made logits and biases, 4
 *               groups (M 2, k 4) and none (k 2): the choices of
 *               ptdp_moe_route (sigmoid, bias, groups, lambda 2.5) bit for
 *               bit, its gates within 4 ulps
 *   blanks 12-13  lesson_balance_bias on dp 2 and 4 replicas routing
 *               different tokens (ptdp_moe_route, each its own b) for 5
 *               steps: every replica's b the same and one device's; then
 *               replayed on a dp 2 ptdp_train run's global loads, ending
 *               at the run's expert_bias (its ptdp_moe_bias_step)
 *   blank 14    lesson_fold_groups on six tp x dp layouts with --etp and
 *               --ep: every rank's EP and expert-DP groups, the ones the
 *               library's mesh builds on real devices (mesh.c)
 *
 * Every row says where it came from — ((s 16 + e) 16 + j) 4 + c for row
 * j of source s for expert e, column c — so a row in the wrong place
 * names the blank that put it there.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lesson.h"
#include "tutorial.h"

#include "ptdp/ep.h"
#include "ptdp/error.h"
#include "ptdp/gpt.h"
#include "ptdp/mesh.h"
#include "ptdp/moe_route.h"
#include "ptdp/state.h"
#include "ptdp/train.h"

enum { COLS = 3, E = 8, MAX_N = 4, MAX_ROWS = 64 };
static const ptdp_real UNWRITTEN = -1;

/* "1 device", "4 devices" */
static const char *plural(int n)
{
    return n == 1 ? "" : "s";
}

/* ============================================== blanks 1-2: the router */

enum { RE = 6, TOKENS = 5 };
static const ptdp_real LOGITS[TOKENS][RE] = {
    { 0.5, -1.0, 2.0, 0.3, 2.0, -0.7 },     /* a tie at the top: 2 before 4 */
    { 1.0, 1.0, 1.0, 1.0, 1.0, 1.0 },       /* all tied: 0, 1, 2 */
    { -3.0, 0.25, 0.1, 4.0, -2.0, 0.25 },   /* a tie for second place */
    { 0.9, 0.8, 0.7, 0.6, 0.5, 0.4 },
    { -0.4, 1.7, -2.2, 0.05, 1.69, 3.1 },
};

static void print_list(char *buf, size_t len, const int *v, int n)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%d", i ? ", " : "", v[i]);
}

/* The first choice j > 0 that repeats an earlier one (*first), or -1. */
static int repeated_choice(const int *c, int k, int *first)
{
    for (int j = 1; j < k; j++)
        for (int q = 0; q < j; q++)
            if (c[q] == c[j]) {
                *first = q;
                return j;
            }
    return -1;
}

/* An expert chosen twice has two causes that look alike on the check's
 * logits: the search never skips a taken expert (then the largest logit
 * wins every round), or it starts from best = 0 (then a taken expert 0
 * stays the best when no other logit beats it).  This token tells them
 * apart: expert 0 has the smallest logit, so starting from it is harmless,
 * and only a search that ignores `taken` picks expert 1 twice. */
static const ptdp_real EXPERT_0_SMALLEST[RE] = { -1.0, 3.0, 2.0, 1.0, 0.0, -0.5 };

static bool ignores_taken(void)
{
    int c[2] = { -1, -1 }, first;
    ptdp_real g[2];
    return lesson_route(EXPERT_0_SMALLEST, RE, 2, c, g) == 0 && repeated_choice(c, 2, &first) >= 0;
}

/* Why do your choices differ from the library's? */
static void explain_choice(const ptdp_real *z, int k, const int *mine, const int *lib)
{
    char a[64], b[64];
    int first = 0;
    print_list(a, sizeof a, mine, k);
    print_list(b, sizeof b, lib, k);
    tutorial_wrong("the router, logits %g %g %g %g %g %g, k = %d: you chose experts %s; ptdp_moe_route chose %s.",
                   (double)z[0], (double)z[1], (double)z[2], (double)z[3], (double)z[4], (double)z[5], k, a, b);
    const int again = repeated_choice(mine, k, &first);
    if (again >= 0 && ignores_taken())
        tutorial_note("expert %d chosen twice (choices %d and %d): the search never skips an expert already taken, "
                      "so the largest logit wins every round: blank 1 considers e only when it is not taken "
                      "(!taken)", mine[again], first, again);
    else if (again >= 0 && mine[again] == 0)
        tutorial_note("expert 0 chosen twice (choices %d and %d): the search starts from best = 0, and when expert 0 "
                      "is already taken no other logit here beats it, so it stays the best.  Start from no expert "
                      "(best = -1, as given): the first expert not taken is the first best (blank 1)", first, again);
    else if (again >= 0)
        tutorial_note("expert %d chosen twice (choices %d and %d): blank 1 takes, k times, the largest logit among "
                      "the experts not taken yet", mine[again], first, again);
    else {
        for (int j = 0; j < k; j++)
            if (mine[j] >= 0 && mine[j] < RE && mine[j] != lib[j] && z[mine[j]] == z[lib[j]]) {
                tutorial_note("a tie went to the higher index: experts %d and %d have the same logit %g, and a tie "
                              "goes to the lower index (blank 1: replace the best only when strictly larger)", lib[j],
                              mine[j], (double)z[lib[j]]);
                return;
            }
        tutorial_note("blank 1 takes, k times, the largest logit not taken yet: largest first, a tie to the lower "
                      "index");
    }
}

/* Gates equal to the library's within GATE_ULPS units in the last place.
 * One softmax has two honest spellings: over the k chosen logits (the
 * library's), or Mixtral's — a softmax over all E, the chosen shares
 * divided by their sum.  They round differently (3.5e-18 apart on a gate
 * of 0.023, one ulp; two at most on LOGITS), so bit for bit would fail a
 * right answer; every wrong formula the check knows is off by far more. */
enum { GATE_ULPS = 4 };

static bool gate_equal(double mine, double lib)
{
    const double ulp = nextafter(fabs(lib), INFINITY) - fabs(lib);
    return fabs(mine - lib) <= GATE_ULPS * ulp;
}

static bool gates_equal(const ptdp_real *mine, const ptdp_real *lib, int k)
{
    for (int j = 0; j < k; j++)
        if (!gate_equal((double)mine[j], (double)lib[j]))
            return false;
    return true;
}

/* Why do your gates differ?  probs: the softmax over all E. */
static void explain_gates(int k, const int *choice, const ptdp_real *mine, const ptdp_real *lib,
                          const ptdp_real *probs)
{
    bool over_all = true;
    double sum = 0;
    for (int j = 0; j < k; j++) {
        over_all = over_all && gate_equal((double)mine[j], (double)probs[choice[j]]);
        sum += mine[j];
    }
    tutorial_wrong("the router, k = %d: your gates are %.6g%s; ptdp_moe_route's %.6g%s.", k, (double)mine[0],
                   k > 1 ? ", ..." : "", (double)lib[0], k > 1 ? ", ..." : "");
    if (over_all)
        tutorial_note("gates softmaxed over all E = %d experts: your gates are the chosen experts' shares of a softmax "
                      "over every logit, so they sum to %.4g, not 1: blank 2 takes the softmax over the k chosen "
                      "logits only (softmax_of over choice, k values) — or divides these shares by their sum, as "
                      "Mixtral does: the same gates to the last bits, and the check accepts either", RE, sum);
    else
        tutorial_note("blank 2: gate j = exp(z[choice j]) / sum over the k chosen of exp(z) (softmax_of does it)");
}

static bool check_route(void)
{
    for (int t = 0; t < TOKENS; t++)
        for (int k = 1; k <= 3; k++) {
            int mine[3] = { -1, -1, -1 }, lib[3], slot[3], load[RE], dropped;
            ptdp_real gate[3] = { 0 }, lgate[3], probs[RE];
            const ptdp_moe_route_shape shape = { .T = 1, .E = RE, .k = k };
            ptdp_moe_route(&shape, 1, LOGITS[t], lib, lgate, slot, probs, load, &dropped);
            int rc = lesson_route(LOGITS[t], RE, k, mine, gate);
            if (rc != 0) {
                if (!tutorial_report_blank())
                    tutorial_wrong("lesson_route returned %d (%s)", rc, ptdp_strerror(rc));
                return false;
            }
            if (memcmp(mine, lib, sizeof(int) * (size_t)k) != 0) {
                explain_choice(LOGITS[t], k, mine, lib);
                return false;
            }
            if (!gates_equal(gate, lgate, k)) {
                explain_gates(k, lib, gate, lgate, probs);
                return false;
            }
        }
    tutorial_ok("the router: top-k of %d logits (ties to the lower index) as ptdp_moe_route; gates = softmax of "
                "the k chosen, within %d ulps of its", RE, GATE_ULPS);
    return true;
}

/* ================================== blanks 3-7: counts, dispatch, combine */

/* Rows rank s sends expert e: some experts empty, rank 2 of 4 silent. */
static int load_of(int N, int s, int e)
{
    if (N == 4 && s == 2)
        return 0;
    return (3 * s + 5 * e + e / 4 + 1) % 4 + (e == 0 ? s : 0);
}

static ptdp_real code(int s, int e, int j, int c)
{
    return (ptdp_real)((((s * 16 + e) * 16 + j) * 4) + c);
}

/* "expert e's row j from rank s" of a coded value, into buf. */
static const char *decode(char *buf, size_t len, ptdp_real v)
{
    if (v == UNWRITTEN)
        snprintf(buf, len, "nothing (never written)");
    else {
        const int n = (int)v / 4, j = n % 16, e = (n / 16) % 16, s = n / 256;
        snprintf(buf, len, "expert %d's row %d from rank %d", e, j, s);
    }
    return buf;
}

static int check_counts(ptdp_device *dev, const ptdp_ep_plan *p, const int *load)
{
    const int N = p->N, local = p->local, r = p->rank;
    int recv[MAX_N * E];
    for (int i = 0; i < N * local; i++)
        recv[i] = -7;
    const double b0 = dev->stats.bytes_sent[PTDP_COLL_ALL_TO_ALL];
    int rc = lesson_exchange_counts(dev->world, E, load, recv);
    if (rc != 0)
        return rc;
    const double sent = dev->stats.bytes_sent[PTDP_COLL_ALL_TO_ALL] - b0;
    for (int s = 0; s < N; s++)
        for (int l = 0; l < local; l++)
            if (recv[s * local + l] != p->recv_rows[s * local + l])
                return tutorial_device_wrong(dev, "the counts on %d device%s: rank %d's recv_rows[%d] = %d, but "
                                             "rank %d sends it %d row%s for its local expert %d (expert %d)\nblank "
                                             "3: rank d's counts are load[d local ..], `local` of them a pair",
                                             N, plural(N), r, s * local + l, recv[s * local + l], s,
                                             p->recv_rows[s * local + l], plural(p->recv_rows[s * local + l]), l,
                                             r * local + l);
    if (sent != (double)(N - 1) * local * sizeof(int))
        return tutorial_device_wrong(dev, "the counts on %d device%s: rank %d sent %.0f bytes; one all_to_all of "
                                     "local = %d counts a pair sends %d ints (blank 3)", N, plural(N), r, sent, local,
                                     (N - 1) * local);
    return 0;
}

/* Is `got` (the student's dispatch) the wire order, by source? */
static bool in_arrival_order(const ptdp_ep_plan *p, const ptdp_real *got)
{
    size_t row = 0;
    for (int s = 0; s < p->N; s++)
        for (int l = 0; l < p->local; l++)
            for (int j = 0; j < p->recv_rows[s * p->local + l]; j++, row++)
                if (got[row * COLS] != code(s, p->rank * p->local + l, j, 0))
                    return false;
    return true;
}

static int check_dispatch(ptdp_device *dev, const ptdp_ep_plan *p, const int *load, const ptdp_real *x,
                          ptdp_real *lib)
{
    ptdp_real mine[MAX_ROWS * COLS], scratch[MAX_ROWS * COLS];
    char a[64], b[64];
    for (size_t i = 0; i < MAX_ROWS * COLS; i++)
        mine[i] = scratch[i] = UNWRITTEN;
    const double b0 = dev->stats.bytes_sent[PTDP_COLL_ALL_TO_ALLV];
    int rc = lesson_dispatch(dev->world, E, load, p->recv_rows, x, COLS, mine, scratch);
    const double sent = dev->stats.bytes_sent[PTDP_COLL_ALL_TO_ALLV] - b0;
    if (rc == 0)
        rc = ptdp_ep_dispatch(dev, dev->world, p, x, COLS, lib);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < p->received * COLS; i++) {
        if (mine[i] == lib[i])
            continue;
        const size_t row = i / COLS;
        if (p->N > 1 && in_arrival_order(p, mine))
            return tutorial_device_wrong(dev, "the dispatch on %d device%s: rank %d's rows are in the order they "
                                         "arrived, by source rank: row %zu holds %s, where the library has %s\n"
                                         "dispatch in rank order of arrival: each expert runs one GEMM on its rows, "
                                         "so out is in local expert order — expert l's rows from every source "
                                         "together (blank 5: for l, for s, copy s's rows for l)", p->N,
                                         plural(p->N), p->rank, row, decode(a, sizeof a, mine[i]),
                                         decode(b, sizeof b, lib[i]));
        return tutorial_device_wrong(dev, "the dispatch on %d device%s: rank %d's row %zu holds %s, where "
                                     "ptdp_ep_dispatch puts %s\nblank 4 counts the reals each pair exchanges; blank 5 "
                                     "puts them in local expert order, source by source", p->N, plural(p->N), p->rank,
                                     row, decode(a, sizeof a, mine[i]), decode(b, sizeof b, lib[i]));
    }
    const double want = (double)ptdp_ep_rows_dispatched_away(p) * COLS * sizeof(ptdp_real);
    if (sent != want)
        return tutorial_device_wrong(dev, "the dispatch on %d device%s: rank %d sent %.0f bytes; its rows for experts "
                                     "held elsewhere are %zu x %d reals = %.0f bytes (blank 4)", p->N, plural(p->N),
                                     p->rank, sent, ptdp_ep_rows_dispatched_away(p), COLS, want);
    return 0;
}

static int check_combine(ptdp_device *dev, const ptdp_ep_plan *p, const int *load, const ptdp_real *x,
                         const ptdp_real *y)
{
    ptdp_real mine[MAX_ROWS * COLS], lib[MAX_ROWS * COLS], scratch[MAX_ROWS * COLS];
    char a[64], b[64];
    for (size_t i = 0; i < MAX_ROWS * COLS; i++)
        mine[i] = scratch[i] = UNWRITTEN;
    const double b0 = dev->stats.bytes_sent[PTDP_COLL_ALL_TO_ALLV];
    int rc = lesson_combine(dev->world, E, load, p->recv_rows, y, COLS, mine, scratch);
    const double sent = dev->stats.bytes_sent[PTDP_COLL_ALL_TO_ALLV] - b0;
    if (rc == 0)
        rc = ptdp_ep_combine(dev, dev->world, p, y, COLS, lib);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < p->sent * COLS; i++)
        if (mine[i] != lib[i] || lib[i] != x[i])
            return tutorial_device_wrong(dev, "the combine on %d device%s: rank %d's stacked row %zu should be %s back "
                                         "home; it holds %s\nblank 6 puts y back in the order it arrived — by source, "
                                         "each source's rows for your experts in expert order — and blank 7 sends "
                                         "each source its rows back", p->N, plural(p->N), p->rank, i / COLS,
                                         decode(a, sizeof a, lib[i]), decode(b, sizeof b, mine[i]));
    const double want = (double)ptdp_ep_rows_combined_away(p) * COLS * sizeof(ptdp_real);
    if (sent != want)
        return tutorial_device_wrong(dev, "the combine on %d device%s: rank %d sent %.0f bytes; the rows it received "
                                     "from others are %zu x %d reals = %.0f bytes (blank 7)", p->N, plural(p->N),
                                     p->rank, sent, ptdp_ep_rows_combined_away(p), COLS, want);
    return 0;
}

/* Which exchange each rank is in.  A dispatch or combine whose pairs
 * disagree on a count is stopped by the library in its own words ("rank i
 * sends n elements to rank j, but rank j expects m"), which name no
 * blank; explain_mismatch does.  Each device writes its own entry; the
 * check reads them after the launch has joined the devices. */
typedef enum { IN_COUNTS, IN_DISPATCH, IN_COMBINE } ep_phase;
static ep_phase phase_of[MAX_N];

/* Rows rank s sends to rank d's experts on N devices: EP rank d holds the
 * block d local .. (d+1) local - 1; `round_robin`: experts d, d + N, … */
static size_t rows_for(int N, int s, int d, bool round_robin)
{
    const int local = E / N;
    size_t rows = 0;
    for (int l = 0; l < local; l++)
        rows += (size_t)load_of(N, s, round_robin ? l * N + d : d * local + l);
    return rows;
}

static void explain_mismatch(const char *msg, int N, ep_phase phase)
{
    int i, j;
    unsigned long long sends, expects;
    const char *at = strstr(msg, "): rank "), *wants = at ? strstr(at, "expects ") : NULL;
    if (wants == NULL || sscanf(at, "): rank %d sends %llu elements to rank %d", &i, &sends, &j) != 3 ||
        sscanf(wants, "expects %llu", &expects) != 1 || i < 0 || i >= N || j < 0 || j >= N || phase == IN_COUNTS)
        return;
    const int local = E / N;
    if (phase == IN_COMBINE) {
        tutorial_note("blank 7: the all_to_allv back sends each source what came from it (from[s]) and receives "
                      "into your stack what you sent each rank (to[d]): rank %d holds %zu reals of rank %d's",
                      i, rows_for(N, j, i, false) * COLS, j);
        return;
    }
    const unsigned long long right = rows_for(N, i, j, false) * COLS;
    char every[64];
    size_t len = 0;
    for (int l = 0; l < local && len < sizeof every; l++)
        len += (size_t)snprintf(every + len, sizeof every - len, "%s%d", l ? ", " : "", j + l * N);
    if (sends != right && sends == rows_for(N, i, j, true) * COLS)
        tutorial_note("experts placed round-robin: rank %d counted its rows for experts %s (every %dth), %llu reals, "
                      "but EP rank %d holds experts %d .. %d, one block: load[%d .. %d], %llu reals (blank 4: to[d] "
                      "sums load[d local .. (d+1) local) x cols)", i, every, N, sends, j, j * local,
                      (j + 1) * local - 1, j * local, (j + 1) * local - 1, right);
    else if (sends != right)
        tutorial_note("blank 4: rank %d sends rank %d %llu reals, but its rows for rank %d's experts %d .. %d are "
                      "%llu reals: to[d] sums load[d local .. (d+1) local) x cols", i, j, sends, j, j * local,
                      (j + 1) * local - 1, right);
    else
        tutorial_note("blank 4: rank %d expects %llu reals from rank %d, which sends it %llu: from[s] sums source "
                      "s's counts, recv_rows[s local .. (s+1) local) x cols", j, expects, i, right);
}

static int ep_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    const int N = dev->world_size, r = dev->rank;
    int load[E];
    ptdp_real x[MAX_ROWS * COLS], y[MAX_ROWS * COLS];
    size_t row = 0;
    for (int e = 0; e < E; e++) {
        load[e] = load_of(N, r, e);
        for (int j = 0; j < load[e]; j++, row++)
            for (int c = 0; c < COLS; c++)
                x[row * COLS + c] = code(r, e, j, c);
    }
    ptdp_ep_plan p;
    int rc = ptdp_ep_plan_init(dev, dev->world, E, load, &p);
    if (rc != 0)
        return rc;
    phase_of[r] = IN_COUNTS;
    rc = check_counts(dev, &p, load);
    if (rc == 0) {
        phase_of[r] = IN_DISPATCH;
        rc = check_dispatch(dev, &p, load, x, y);
    }
    if (rc == 0) {
        phase_of[r] = IN_COMBINE;
        rc = check_combine(dev, &p, load, x, y);
    }
    ptdp_ep_plan_free(&p);
    return rc;
}

static bool check_exchanges(void)
{
    static const int Ns[] = { 1, 2, 4 };
    for (int i = 0; i < 3; i++) {
        char what[64];
        snprintf(what, sizeof what, "counts, dispatch and combine on %d device%s", Ns[i], plural(Ns[i]));
        ptdp_launch_result res;
        ptdp_launch_opts opts = { .result = &res };
        int rc = tutorial_launch_opts(what, Ns[i], ep_device, NULL, &opts);
        if (rc == PTDP_EMISMATCH && res.failed_rank >= 0)
            explain_mismatch(res.message, Ns[i], phase_of[res.failed_rank]);
        ptdp_launch_result_free(&res);
        if (rc != 0)
            return false;
    }
    tutorial_ok("the counts, 1, 2 and 4 devices: one all_to_all of E/N counts a pair, as ptdp_ep_plan_init");
    tutorial_ok("the dispatch: every row in local expert order, bit for bit as ptdp_ep_dispatch; the bytes of the "
                "rows for experts held elsewhere");
    tutorial_ok("the combine: every row home, as ptdp_ep_combine; the bytes of the rows received from others");
    tutorial_note("under uniform routing each of the four all-to-alls of a block (dispatch and combine, forward and "
                  "backward) sends k T_r C (N-1)/N reals per rank: at k = 2, T_r = 1024, C = 64, N = 4, %.0f KiB",
                  ptdp_ep_uniform_bytes(2, 1024, 64, 4, sizeof(double)) / 1024);
    return true;
}

/* ================================================ blank 8: the gated sum */

enum { GT = 4, GK = 2, GROWS = 5 };
static const ptdp_real GATES[GT * GK] = { 0.625, 0.375, 0.75, 0.25, 0.5, 0.5, 0.875, 0.125 };
static const int SLOTS[GT * GK] = { 0, 3, 2, -1, 4, 1, -1, 3 };   /* -1: a dropped choice */

static bool check_gated_sum(void)
{
    /* one guard row before the stack: reading slot -1 adds 1e6 */
    ptdp_real buf[(GROWS + 1) * COLS], mine[GT * COLS], ref[GT * COLS], plain[GT * COLS];
    const ptdp_real *stacked = buf + COLS;
    for (int c = 0; c < COLS; c++)
        buf[c] = 1e6;
    for (int i = 0; i < GROWS * COLS; i++)
        buf[COLS + i] = (ptdp_real)(1 + i % 7) * (i % 2 ? -1 : 1);
    for (int i = 0; i < GT * COLS; i++)
        mine[i] = UNWRITTEN;
    memset(ref, 0, sizeof ref);
    memset(plain, 0, sizeof plain);
    for (int t = 0; t < GT; t++)   /* as parallel/moe.c's combine: j in order, from zero */
        for (int j = 0; j < GK; j++)
            for (int c = 0; SLOTS[t * GK + j] >= 0 && c < COLS; c++) {
                const ptdp_real v = stacked[SLOTS[t * GK + j] * COLS + c];
                ref[t * COLS + c] += (ptdp_real)((double)GATES[t * GK + j] * v);
                plain[t * COLS + c] += v;
            }
    int rc = lesson_gated_sum(GT, GK, COLS, GATES, SLOTS, stacked, mine);
    if (rc != 0) {
        if (!tutorial_report_blank())
            tutorial_wrong("lesson_gated_sum returned %d (%s)", rc, ptdp_strerror(rc));
        return false;
    }
    for (int i = 0; i < GT * COLS; i++) {
        if (mine[i] == ref[i])
            continue;
        const int t = i / COLS;
        tutorial_wrong("the combine's sum: token %d, column %d = %g; out[t] = sum_j g_j y[slot] is %g.", t, i % COLS,
                       (double)mine[i], (double)ref[i]);
        if (memcmp(mine, plain, sizeof plain) == 0)
            tutorial_note("forgetting the combine's gate weights: out[t] is the plain sum of its experts' rows.  "
                          "Each is weighed by its gate (blank 8) — without them the output would not depend on the "
                          "router's logits, and no gradient would ever reach W_r");
        else if (fabs((double)mine[i]) > 1e5)
            tutorial_note("a dropped choice (slot -1) was added: it has no row and contributes nothing (blank 8)");
        else
            tutorial_note("blank 8: for each kept choice j (slot >= 0), in order, out[t] += gate[t k + j] x row "
                          "slot[t k + j]");
        return false;
    }
    tutorial_ok("the combine's sum: out[t] = sum_j g_j y[slot], dropped choices skipped, bit for bit");
    return true;
}

/* ======================================= blank 9: the expert-DP group */

typedef struct {
    int dp, ep, member;
    int ranks[8];
} layout;

static const layout LAYOUTS[] = {
    { 4, 2, 0, { 0, 2, 4, 6 } },                 /* dp 4 x tp 2, tp rank 0 */
    { 4, 2, 3, { 0, 2, 4, 6 } },
    { 8, 2, 5, { 1, 3, 5, 7, 9, 11, 13, 15 } },  /* dp 8 x tp 2, tp rank 1 */
    { 8, 4, 6, { 0, 1, 2, 3, 4, 5, 6, 7 } },
    { 4, 4, 1, { 0, 1, 2, 3 } },                 /* ep = dp: no replicas */
    { 4, 1, 2, { 0, 1, 2, 3 } },                 /* ep 1: every expert everywhere */
};

/* One answer of lesson_expert_grad_ranks and the group it should be. */
typedef struct {
    int got[8], n, want[8], m;
} group_answer;

/* The wrong groups a student writes.  One layout can fit two of them —
 * on dp 4 x tp 2 the DP indices {0, 2} of members 0 and 2 are also the
 * world ranks of member 0's EP group — so a mistake is named only when it
 * fits every layout the answer gets wrong. */
typedef enum { GROUP_WHOLE_DP, GROUP_EP, GROUP_DP_INDICES, GROUP_OTHER } group_mistake;

static bool fits(group_mistake kind, const layout *L, const group_answer *a)
{
    int v[8], m = 0;
    for (int i = 0; i < L->dp; i++)
        if (kind == GROUP_WHOLE_DP || (kind == GROUP_EP && i / L->ep == L->member / L->ep))
            v[m++] = L->ranks[i];
        else if (kind == GROUP_DP_INDICES && i % L->ep == L->member % L->ep)
            v[m++] = i;
    return kind != GROUP_OTHER && a->n == m && memcmp(a->got, v, sizeof(int) * (size_t)m) == 0;
}

static void explain_group(const layout *L, const group_answer *a, group_mistake kind)
{
    char got[96], want[96];
    print_list(got, sizeof got, a->got, a->n);
    print_list(want, sizeof want, a->want, a->m);
    const int me = L->member % L->ep, first = L->member - me, other = (me + 1) % L->ep;
    tutorial_wrong("dp %d, ep %d, DP member %d (world rank %d, EP rank %d): you sum its experts' gradients over "
                   "world ranks {%s}; the expert-DP group is {%s}.", L->dp, L->ep, L->member, L->ranks[L->member],
                   me, got, want);
    if (kind == GROUP_WHOLE_DP)
        tutorial_note("expert gradients summed over the whole DP group: world rank %d (EP rank %d) holds other "
                      "experts than world rank %d, so that sum adds different experts' gradients together.  An "
                      "expert's replicas are the DP members with the same EP rank — dp/ep = %d rank%s%s (blank 9); "
                      "the router and the dense layers are summed over the whole DP group", L->ranks[first + other],
                      other, L->ranks[L->member], L->dp / L->ep, plural(L->dp / L->ep),
                      L->dp == L->ep ? ", the member alone: with ep = dp no one else holds its experts" : "");
    else if (kind == GROUP_EP)
        tutorial_note("that is the EP group: the ranks that hold the OTHER experts and trade tokens with this one.  "
                      "The replicas of its experts are one member of each EP group, at the same EP rank (blank 9)");
    else if (kind == GROUP_DP_INDICES)
        tutorial_note("those are DP member indices, not world ranks: DP member i is world rank dp_ranks[i], so the "
                      "members with EP rank %d are world ranks {%s} (blank 9: out gets dp_ranks[i])", me, want);
    else
        tutorial_note("blank 9: DP member i has EP rank i mod ep; the expert-DP group is the members with the same "
                      "EP rank, in DP order");
}

static bool check_grad_ranks(void)
{
    enum { NL = sizeof LAYOUTS / sizeof LAYOUTS[0] };
    group_answer a[NL];
    int wrong = -1;
    for (int k = 0; k < NL; k++) {
        const layout *L = &LAYOUTS[k];
        a[k].m = 0;
        for (int i = 0; i < L->dp; i++)
            if (i % L->ep == L->member % L->ep)
                a[k].want[a[k].m++] = L->ranks[i];
        const int n = lesson_expert_grad_ranks(L->ranks, L->dp, L->ep, L->member, a[k].got);
        if (n < 0) {
            if (!tutorial_report_blank())
                tutorial_wrong("lesson_expert_grad_ranks returned %d (%s)", n, ptdp_strerror(n));
            return false;
        }
        a[k].n = n > 8 ? 8 : n;
        if (wrong < 0 && (n != a[k].m || memcmp(a[k].got, a[k].want, sizeof(int) * (size_t)a[k].m) != 0))
            wrong = k;
    }
    if (wrong >= 0) {
        group_mistake kind = GROUP_WHOLE_DP;
        for (; kind < GROUP_OTHER; kind++) {
            bool all = true;
            for (int k = wrong; k < NL && all; k++)
                all = (a[k].n == a[k].m && memcmp(a[k].got, a[k].want, sizeof(int) * (size_t)a[k].m) == 0) ||
                      fits(kind, &LAYOUTS[k], &a[k]);
            if (all)
                break;
        }
        explain_group(&LAYOUTS[wrong], &a[wrong], kind);
        return false;
    }
    tutorial_ok("the expert-DP group, %d layouts: an expert's gradient is summed over the dp/ep DP members with "
                "its EP rank", NL);
    return true;
}

/* ============ Part 2, blanks 10-11: DeepSeek-V3's sigmoid router */

enum { SE = 8, SIG_TOKENS = 4 };

/* One token of the hand-made ones: its logits and the block's bias then. */
typedef struct {
    ptdp_real z[SE], b[SE];
} sig_token;
static const double LAMBDA = 2.5;   /* DeepSeek-V3's route scale */

static const sig_token SIG[SIG_TOKENS] = {
    /* s = .90 .10 | .50 .50 | .80 .70 | .20 .95, no bias: groups 0 and 3
     * hold the two largest s, but groups 2 and 3 the largest top-2 sums */
    { { 2.2, -2.2, 0.0, 0.0, 1.4, 0.85, -1.4, 2.9 }, { 0 } },
    /* a bias that changes the choice (expert 3 pulled up, 7 pushed down) */
    { { 0.3, -0.5, 1.0, 0.2, -1.0, 0.6, 0.1, 1.5 }, { 0.02, -0.04, 0.0, 0.3, 0.1, -0.02, 0.04, -0.35 } },
    /* ties in s + b: experts 1 and 2, groups 0 and 1 */
    { { 0.0, 0.5, 0.5, -0.5, 1.0, -1.0, 0.25, 0.0 }, { 0.0, 0.1, 0.1, 0.0, -0.4, 0.2, 0.0, 0.1 } },
    { { -0.7, 1.2, 0.4, -0.1, 0.9, 2.0, -1.5, 0.3 }, { 0.05, -0.1, 0.02, 0.08, -0.03, -0.3, 0.2, 0.0 } },
};

/* Two layouts: DeepSeek's groups (G 4, M 2, k 4: a group scored by its
 * top 2) and none (G 1, k 2). */
typedef struct {
    int G, M, k;
} sig_layout;
static const sig_layout SIG_LAYOUTS[] = { { 4, 2, 4 }, { 1, 1, 2 } };

static double sigmoid_d(double z)
{
    return 1.0 / (1.0 + exp(-z));
}

/* A wrong router the check knows: the choice with groups scored by their
 * best value (by_max), or with no bias in the choice (no_bias). */
static void choose_variant(const sig_token *t, const sig_layout *L, bool by_max, bool no_bias, int *choice)
{
    ptdp_real v[SE], score[SE];
    for (int e = 0; e < SE; e++)
        v[e] = (ptdp_real)sigmoid_d((double)t->z[e]) + (no_bias ? 0 : t->b[e]);
    const int per = SE / L->G, n = L->k / L->M;
    if (L->G > 1 && L->M < L->G) {
        int best[SE], top[SE];
        bool kept[SE] = { false };
        for (int g = 0; g < L->G; g++) {
            ptdp_moe_top_k(v + g * per, per, by_max ? 1 : n, top);
            score[g] = 0;
            for (int j = 0; j < (by_max ? 1 : n); j++)
                score[g] += v[g * per + top[j]];
        }
        ptdp_moe_top_k(score, L->G, L->M, best);
        for (int j = 0; j < L->M; j++)
            kept[best[j]] = true;
        for (int e = 0; e < SE; e++)
            if (!kept[e / per])
                v[e] = -INFINITY;
    }
    ptdp_moe_top_k(v, SE, L->k, choice);
}

static void explain_sigmoid_choice(const sig_token *t, const sig_layout *L, const int *mine, const int *lib)
{
    char a[64], b[64];
    int alt[SE];
    print_list(a, sizeof a, mine, L->k);
    print_list(b, sizeof b, lib, L->k);
    tutorial_wrong("DeepSeek-V3's router, %d groups (M = %d), k = %d: you chose experts %s; ptdp_moe_route chose %s.",
                   L->G, L->M, L->k, a, b);
    choose_variant(t, L, true, false, alt);
    if (L->G > 1 && memcmp(alt, mine, sizeof(int) * (size_t)L->k) == 0) {
        tutorial_note("groups chosen by max instead of the sum of their top floor(k/M) = %d: a group with one strong "
                      "expert outranked a group with several good ones (blank 10): a group's score is the sum of its "
                      "%d largest s + b (DeepSeek-V3: its top 2 with k 8, M 4)", L->k / L->M, L->k / L->M);
        return;
    }
    choose_variant(t, L, false, true, alt);
    if (memcmp(alt, mine, sizeof(int) * (size_t)L->k) == 0)
        tutorial_note("these are the top k of s alone: the bias chooses — the top k of s + b");
    else
        tutorial_note("blank 10 scores each group by the sum of its floor(k/M) largest s + b; the M best groups' "
                      "experts stay, and the top k of s + b among them is chosen");
}

static void explain_sigmoid_gates(const sig_token *t, const sig_layout *L, const int *choice, const ptdp_real *mine,
                                  const ptdp_real *lib)
{
    double Sb = 0;   /* the sum of the chosen s + b */
    bool with_bias = true, no_lambda = true;
    for (int j = 0; j < L->k; j++)
        Sb += (ptdp_real)sigmoid_d((double)t->z[choice[j]]) + t->b[choice[j]];
    for (int j = 0; j < L->k; j++) {
        const ptdp_real s = (ptdp_real)sigmoid_d((double)t->z[choice[j]]);
        with_bias = with_bias && fabs((double)mine[j] - LAMBDA * (double)(s + t->b[choice[j]]) / Sb) < 1e-12;
        no_lambda = no_lambda && gate_equal((double)mine[j], (double)lib[j] / LAMBDA);
    }
    tutorial_wrong("DeepSeek-V3's router, k = %d: your gates are %.6g, %.6g, ...; ptdp_moe_route's %.6g, %.6g, ...",
                   L->k, (double)mine[0], (double)mine[1], (double)lib[0], (double)lib[1]);
    if (with_bias)
        tutorial_note("the bias used in the gates: yours are lambda (s_j + b_j) / sum (s + b).  The bias only "
                      "selects — it moves an expert in or out of the top k and nothing more, so the gates are "
                      "lambda s_j / sum of the chosen s (blank 11); with b in them the output would depend on the "
                      "balance's bookkeeping, not only on the router's affinities");
    else if (no_lambda)
        tutorial_note("the route scale lambda = %g is missing: gate j = lambda s_j / sum of the chosen s (blank 11)",
                      LAMBDA);
    else
        tutorial_note("blank 11: gate j = lambda s_j / S, s = sigmoid(z), S the sum of the chosen s (not a softmax)");
}

static bool check_sigmoid_route(void)
{
    for (size_t l = 0; l < sizeof SIG_LAYOUTS / sizeof SIG_LAYOUTS[0]; l++)
        for (int i = 0; i < SIG_TOKENS; i++) {
            const sig_layout *L = &SIG_LAYOUTS[l];
            const sig_token *t = &SIG[i];
            int mine[SE], lib[SE], slot[SE], load[SE], dropped;
            ptdp_real gate[SE] = { 0 }, lgate[SE], probs[SE];
            for (int j = 0; j < SE; j++)
                mine[j] = -1;
            const ptdp_moe_route_shape shape = { .T = 1, .E = SE, .k = L->k, .score = PTDP_MOE_SIGMOID,
                                                 .route_scale = LAMBDA, .bias = t->b, .groups = L->G,
                                                 .group_top_k = L->M };
            ptdp_moe_route(&shape, 1, t->z, lib, lgate, slot, probs, load, &dropped);
            int rc = lesson_route_sigmoid(t->z, t->b, SE, L->k, L->G, L->M, LAMBDA, mine, gate);
            if (rc != 0) {
                if (!tutorial_report_blank())
                    tutorial_wrong("lesson_route_sigmoid returned %d (%s)", rc, ptdp_strerror(rc));
                return false;
            }
            if (memcmp(mine, lib, sizeof(int) * (size_t)L->k) != 0) {
                explain_sigmoid_choice(t, L, mine, lib);
                return false;
            }
            if (!gates_equal(gate, lgate, L->k)) {
                explain_sigmoid_gates(t, L, lib, gate, lgate);
                return false;
            }
        }
    tutorial_ok("DeepSeek-V3's router: the top k of s + b within the M best groups (a group's score the sum of its "
                "top floor(k/M)), as ptdp_moe_route; gates lambda s_j / sum s, the bias only selecting");
    return true;
}

/* ========== Part 2, blanks 12-13: the loss-free bias on a mesh of replicas */

enum { BE = 8, BK = 4, BG = 4, BM = 2, BTOK = 4, BSTEPS = 5, MAX_DP = 4 };
static const double BIAS_U = 0.02;

/* Logit e of token t of replica r at step s, in [-2, 2): every replica
 * and step routes different tokens. */
static ptdp_real bias_logit(int r, int s, int t, int e)
{
    unsigned long long x = ((((unsigned long long)r * 64 + s) * 64 + t) * 64 + e) + 0x9e3779b97f4a7c15ull;
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (ptdp_real)((double)(x >> 11) / 9007199254740992.0 * 4.0 - 2.0);
}

/* Replica r's tokens of step s, routed by the library with its bias:
 * the choices of each expert among them. */
static void replica_load(int r, int s, const ptdp_real *bias, double *L)
{
    ptdp_real z[BTOK * BE], gate[BTOK * BK], probs[BTOK * BE];
    int choice[BTOK * BK], slot[BTOK * BK], load[BE], dropped;
    for (int t = 0; t < BTOK; t++)
        for (int e = 0; e < BE; e++)
            z[t * BE + e] = bias_logit(r, s, t, e);
    const ptdp_moe_route_shape sh = { .T = BTOK, .E = BE, .k = BK, .score = PTDP_MOE_SIGMOID, .bias = bias,
                                      .groups = BG, .group_top_k = BM };
    ptdp_moe_route(&sh, BTOK, z, choice, gate, slot, probs, load, &dropped);
    for (int e = 0; e < BE; e++)
        L[e] = load[e];
}

/* What every replica held after each step, for the host to judge once
 * the devices are done (each device writes only its own rows). */
static struct {
    ptdp_real bias[BSTEPS][MAX_DP][BE];
    double local[BSTEPS][MAX_DP][BE], L[BSTEPS][MAX_DP][BE];
    double sent[BSTEPS][MAX_DP];   /* bytes, during lesson_balance_bias */
} seen;

/* One ring all-reduce of E doubles over N devices: 2 (N - 1) / N x 8 E
 * bytes a device (moe_bias.c's formula). */
static double bias_bytes(int N)
{
    return 2.0 * (N - 1) / N * 8.0 * BE;
}

/* Every replica sent one all-reduce's bytes at every step, or say why not. */
static bool bias_bytes_right(int dp)
{
    for (int s = 0; s < BSTEPS; s++)
        for (int r = 0; r < dp; r++) {
            if (seen.sent[s][r] == bias_bytes(dp))
                continue;
            tutorial_wrong("the bias on dp %d, step %d: replica %d sent %.0f bytes for its loads; one all-reduce of "
                           "E = %d doubles sends 2 (N-1)/N x 8 E = %.0f", dp, s + 1, r, seen.sent[s][r], BE,
                           bias_bytes(dp));
            if (seen.sent[s][r] == (dp - 1) * 8.0 * BE)
                tutorial_note("the loads all-gathered, then summed on every replica: the same sum, but each replica "
                              "sends its E counts to all N-1 others, (N-1) x 8 E bytes, growing with N; an all-reduce "
                              "sends 2 (N-1)/N x 8 E, under 2 x 8 E whatever N — N/2 times less (blank 12: one "
                              "ptdp_all_reduce with PTDP_SUM)");
            else
                tutorial_note("blank 12: one ptdp_all_reduce of L, E doubles, PTDP_SUM");
            return false;
        }
    return true;
}

static int bias_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    const int r = dev->rank;
    ptdp_real bias[BE] = { 0 };
    for (int s = 0; s < BSTEPS; s++) {
        double L[BE];
        replica_load(r, s, bias, L);
        memcpy(seen.local[s][r], L, sizeof L);
        const double b0 = dev->stats.total_sent;
        int rc = lesson_balance_bias(dev->world, BE, BIAS_U, L, bias);
        seen.sent[s][r] = dev->stats.total_sent - b0;
        if (rc != 0)
            return rc;
        memcpy(seen.L[s][r], L, sizeof L);
        memcpy(seen.bias[s][r], bias, sizeof bias);
    }
    return 0;
}

/* The reference: one device routing the whole global batch (every
 * replica's tokens) with the bias, then b_e += u sign(mean L - L_e). */
static void reference_step(int dp, int s, const ptdp_real *before, ptdp_real *after, double *L)
{
    double mine[BE], total = 0;
    memset(L, 0, BE * sizeof *L);
    for (int r = 0; r < dp; r++) {
        replica_load(r, s, before, mine);
        for (int e = 0; e < BE; e++)
            L[e] += mine[e];
    }
    for (int e = 0; e < BE; e++)
        total += L[e];
    for (int e = 0; e < BE; e++) {
        const double d = total - BE * L[e];
        after[e] = before[e] + (ptdp_real)(d > 0 ? BIAS_U : d < 0 ? -BIAS_U : 0.0);
    }
}

/* The replicas' biases differ: by how much, and why. */
static void explain_drift(int dp, int s)
{
    double most = 0;
    int at_r = 1, at_e = 0;
    for (int r = 1; r < dp; r++)
        for (int e = 0; e < BE; e++)
            if (fabs((double)(seen.bias[BSTEPS - 1][r][e] - seen.bias[BSTEPS - 1][0][e])) > most) {
                most = fabs((double)(seen.bias[BSTEPS - 1][r][e] - seen.bias[BSTEPS - 1][0][e]));
                at_r = r;
                at_e = e;
            }
    bool local = true;
    for (int q = 0; q < BSTEPS; q++)
        for (int r = 0; r < dp; r++)
            local = local && memcmp(seen.L[q][r], seen.local[q][r], sizeof seen.L[q][r]) == 0;
    tutorial_wrong("the bias on dp %d: after step %d the replicas' biases differ; after %d steps replica %d's b_%d "
                   "is %+.2f and replica 0's %+.2f — %.2f apart, %.0f u (u = %g)", dp, s + 1, BSTEPS, at_r, at_e,
                   (double)seen.bias[BSTEPS - 1][at_r][at_e], (double)seen.bias[BSTEPS - 1][0][at_e], most,
                   most / BIAS_U, BIAS_U);
    if (local)
        tutorial_note("each replica updating from its local loads: every replica counted only its own tokens, so "
                      "each moved its bias its own way; the replicas of one block drift apart, and so does their "
                      "routing — they are no longer one model.  The fix is blank 12: L, the whole global batch's "
                      "load, summed over the DP group (one all-reduce of E doubles), so every replica applies the "
                      "same update");
    else
        tutorial_note("blank 12 must leave every replica with the same L — the sum of every replica's counts — so "
                      "that each applies the same update");
}

/* The replicas agree, but not with one device: blank 13 at step s. */
static void explain_update(int dp, int s, const ptdp_real *before, const ptdp_real *want, const double *L)
{
    double total = 0;
    bool reversed = true, tie_only = true;
    int tie = -1, wrong = -1;
    for (int e = 0; e < BE; e++)
        total += L[e];
    for (int e = 0; e < BE; e++) {
        const double got = (double)(seen.bias[s][0][e] - before[e]), ref = (double)(want[e] - before[e]);
        const bool is_tie = total == BE * L[e];
        if (got != ref && wrong < 0)
            wrong = e;
        if (is_tie && got != ref && tie < 0)
            tie = e;
        tie_only = tie_only && (is_tie || got == ref);
        reversed = reversed && (is_tie || got == -ref);
    }
    tutorial_wrong("the bias on dp %d, step %d: the global loads are L_%d = %.0f against a mean of %g; b_%d moved by "
                   "%+g, not %+g", dp, s + 1, wrong, L[wrong], total / BE, wrong,
                   (double)(seen.bias[s][0][wrong] - before[wrong]), (double)(want[wrong] - before[wrong]));
    if (tie_only && tie >= 0)
        tutorial_note("sign(0) = 0: expert %d was chosen exactly the mean number of times, so its bias stays where "
                      "it is; moving it anyway pushes a balanced expert off balance (blank 13: compare total - E L_e "
                      "with 0, and do nothing when it is 0)", tie);
    else if (reversed)
        tutorial_note("the sign reversed: an expert chosen more than the mean must be pushed DOWN (b_e -= u) and one "
                      "chosen less pulled up — b_e += u sign(mean L - L_e) (blank 13)");
    else
        tutorial_note("blank 13: b_e += u sign(mean L - L_e), sign(0) = 0, for every expert");
}

/* Run dp replicas; their biases the same everywhere and one device's. */
static bool bias_on(int dp, int *ties)
{
    char what[64];
    snprintf(what, sizeof what, "the loss-free bias on dp %d", dp);
    memset(&seen, 0, sizeof seen);
    if (tutorial_launch(what, dp, bias_device, NULL) != 0)
        return false;
    ptdp_real ref[BE] = { 0 }, next[BE];
    double L[BE];
    for (int s = 0; s < BSTEPS; s++) {
        for (int r = 1; r < dp; r++)
            if (memcmp(seen.bias[s][r], seen.bias[s][0], sizeof seen.bias[s][r]) != 0) {
                explain_drift(dp, s);
                return false;
            }
        reference_step(dp, s, ref, next, L);
        if (memcmp(seen.bias[s][0], next, sizeof next) != 0) {
            explain_update(dp, s, ref, next, L);
            return false;
        }
        for (int e = 0; e < BE; e++)
            *ties += next[e] == ref[e];
        memcpy(ref, next, sizeof ref);
    }
    return bias_bytes_right(dp);
}

static bool check_bias_replicas(void)
{
    int ties = 0;
    if (!bias_on(2, &ties) || !bias_on(4, &ties))
        return false;
    tutorial_ok("the loss-free bias, dp 2 and 4, %d steps, different tokens on every replica: every replica's b the "
                "same after each step, and one device's routing the whole global batch (%d times an expert's load "
                "was exactly the mean: its b left alone)",
                BSTEPS, ties);
    tutorial_note("one all-reduce of E = %d doubles a step and block: %.0f bytes a replica on dp 2, %.0f on dp 4 "
                  "(2 (N-1)/N x 8 E)", BE, bias_bytes(2), bias_bytes(4));
    return true;
}

/* The library's own update, in a real run: ptdp_train of a small GPT
 * with DeepSeek-V3's router on dp 2 (its ptdp_moe_bias_step after every
 * optimizer step).  Its counter "moe_load" is each step's load of the
 * whole global batch; your update, replayed on those loads on one device,
 * must end at the run's expert bias bit for bit. */
enum { RUN_E = 8, RUN_STEPS = 5 };
static const double RUN_U = 0.001;

typedef struct {
    const ptdp_train_result *res;
    ptdp_real bias[RUN_E];
} replay;

static int replay_device(ptdp_device *dev, void *arg)
{
    replay *p = arg;
    for (int s = 0; s < RUN_STEPS; s++) {
        double L[RUN_E];
        memcpy(L, ptdp_train_step_counts(p->res, s, "moe_load"), sizeof L);
        int rc = lesson_balance_bias(dev->world, RUN_E, RUN_U, L, p->bias);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static ptdp_train_config run_config(void)
{
    ptdp_train_config c = ptdp_train_defaults();
    c.model = ptdp_gpt_default_config();
    ptdp_gpt_settings *g = ptdp_gpt(&c.model);
    c.model.layers = 1;
    c.model.hidden = 16;
    c.model.ffn = 32;
    g->heads = 2;
    g->seq_len = 8;
    g->vocab = 62;   /* the built-in sums' tokens */
    g->vocab_padded = ptdp_gpt_pad_vocab(62, 64, 1);
    g->moe_experts = RUN_E;
    g->moe_ffn = 8;
    g->moe_top_k = 3;
    g->moe_score = PTDP_MOE_SIGMOID;
    g->moe_route_scale = LAMBDA;
    g->moe_groups = 2;
    g->moe_group_top_k = 1;
    g->moe_bias_update = RUN_U;
    c.dp = 2;
    c.batch = 8;
    c.steps = RUN_STEPS;
    c.verify_replicas = true;   /* the library's own replicas stay identical */
    return c;
}

static bool check_bias_against_run(void)
{
    ptdp_train_config c = run_config();
    ptdp_train_result res;
    ptdp_state final;
    char msg[PTDP_MSG_MAX] = "";
    int rc = ptdp_state_init(&final, &c.model, c.optimizer, false);
    if (rc != 0) {
        tutorial_wrong("the check's own run: host out of memory");
        return false;
    }
    c.final_state = &final;
    if ((rc = ptdp_train(&c, NULL, NULL, NULL, &res, msg, sizeof msg)) != 0) {
        tutorial_wrong("the check's own run of ptdp_train failed: %s", msg);
        ptdp_state_free(&final);
        return false;
    }
    replay p = { .res = &res };
    bool ok = tutorial_launch("your update on the run's loads", 1, replay_device, &p) == 0;
    const ptdp_state_tensor *b = ptdp_state_find(&final, "transformer.h.0.mlp.router.expert_bias");
    int moved = 0;
    for (int e = 0; ok && b != NULL && e < RUN_E; e++) {
        moved += b->data[e] != 0;
        if (p.bias[e] != b->data[e]) {
            tutorial_wrong("on the loads a dp 2 run of ptdp_train counted, your update ends at b_%d = %+g; the run's "
                           "own (ptdp_moe_bias_step, each step) at %+g\nblank 13: b_e += u sign(mean L - L_e), sign(0) "
                           "= 0", e, (double)p.bias[e], (double)b->data[e]);
            ok = false;
        }
    }
    if (ok && b == NULL)
        tutorial_wrong("the check's own run has no tensor transformer.h.0.mlp.router.expert_bias");
    else if (ok)
        tutorial_ok("the same update as the library's in a real run: ptdp_train, dp 2, %d steps — your update on its "
                    "global loads ends at its expert bias bit for bit (%d of %d biases moved)", RUN_STEPS, moved,
                    RUN_E);
    ptdp_train_result_free(&res);
    ptdp_state_free(&final);
    return ok && b != NULL;
}

/* ============ Part 3, blank 14: MoE parallel folding's groups */

enum { FOLD_MAX = 8 };

typedef struct {
    int tp, dp, etp, ep;
} fold_layout;

static const fold_layout FOLDS[] = {
    { 2, 2, 1, 4 },   /* the issue's: one EP group over the TP pairs */
    { 2, 2, 1, 2 },
    { 2, 2, 1, 1 },   /* no EP: every rank holds every expert, the expert-DP group is all four */
    { 4, 1, 2, 2 },   /* etp 2: the EP group skips the other experts' TP rank */
    { 4, 2, 1, 4 },
    { 2, 2, 2, 2 },   /* etp = tp: no folding, EP from the DP ranks as in part 1 */
};

/* What the library's mesh builds, rank by rank (world order). */
typedef struct {
    const fold_layout *L;
    int ep[FOLD_MAX][FOLD_MAX], n_ep[FOLD_MAX], edp[FOLD_MAX][FOLD_MAX], n_edp[FOLD_MAX];
} fold_truth;

static void group_members(const ptdp_mesh *m, ptdp_group g, int me, int *out, int *n)
{
    ptdp_comm *c = ptdp_mesh_group(m, g);   /* NULL: a group of one, not built */
    *n = c != NULL ? ptdp_comm_size(c) : 1;
    for (int r = 0; r < *n && r < FOLD_MAX; r++)
        out[r] = c != NULL ? ptdp_comm_world_rank(c, r) : me;
}

static int fold_device(ptdp_device *dev, void *arg)
{
    fold_truth *t = arg;
    ptdp_mesh m;
    int rc = ptdp_mesh_init(dev, t->L->dp, t->L->tp, 1, &m);
    if (rc != 0)
        return rc;
    m.ep = t->L->ep;
    m.etp = t->L->etp < t->L->tp ? t->L->etp : 0;
    if ((rc = ptdp_mesh_add_group(dev, &m, PTDP_GROUP_EP)) == 0 && (rc = ptdp_mesh_add_group(dev, &m, PTDP_GROUP_EDP)) == 0) {
        const int w = dev->rank;
        group_members(&m, PTDP_GROUP_EP, w, t->ep[w], &t->n_ep[w]);
        /* no EP and no folding: the DP group holds every expert's replicas */
        group_members(&m, t->L->ep == 1 && m.etp == 0 ? PTDP_GROUP_DP : PTDP_GROUP_EDP, w, t->edp[w], &t->n_edp[w]);
    }
    ptdp_mesh_free(&m);
    return rc;
}

/* A wrong group, named: the experts' TP group (consecutive world ranks),
 * attention's DP group, or the EP rule without folding (DP ranks alone). */
static void explain_fold(const fold_layout *L, int w, const char *which, const int *got, int n, const int *want, int m)
{
    char g[96], x[96];
    print_list(g, sizeof g, got, n);
    print_list(x, sizeof x, want, m);
    tutorial_wrong("tp %d x dp %d, --etp %d --ep %d, world rank %d: your %s group is {%s}; the library's mesh builds "
                   "{%s}.", L->tp, L->dp, L->etp, L->ep, w, which, g, x);
    const int S = L->tp / L->etp, t = w % L->tp;
    bool consecutive = n == L->ep && n > 0, dp_group = n == L->dp && n > 0;
    for (int i = 0; i < n; i++) {
        consecutive = consecutive && got[i] == w / L->ep * L->ep + i;
        dp_group = dp_group && got[i] == t + L->tp * i;
    }
    if (consecutive && L->etp > 1)
        tutorial_note("those are %d consecutive world ranks: with --etp %d they include ranks of another experts' "
                      "TP rank, which hold other pieces of the same experts and the same rows.  An EP group takes "
                      "one rank of each experts' TP group: the holders with your e = tp_rank mod etp (blank 14)",
                      L->ep, L->etp);
    else if (dp_group && S > 1)
        tutorial_note("that is attention's DP group, the ranks with your TP rank.  Folded, each of a TP group's "
                      "%d slices routes other rows: the token holders are slices, h = tp_rank / etp + S dp_rank, "
                      "not DP ranks (blank 14)", S);
    else
        tutorial_note("blank 14: token holder h = tp_rank / etp + S dp_rank (S = tp / etp); the EP group is the "
                      "holders with your e and h div ep, the expert-DP group those with your e and h mod ep, each "
                      "in holder order");
}

static bool check_fold_layout(const fold_layout *L)
{
    static fold_truth t;
    memset(&t, 0, sizeof t);
    t.L = L;
    char what[96];
    snprintf(what, sizeof what, "the library's folded groups on tp %d x dp %d", L->tp, L->dp);
    if (tutorial_launch(what, L->tp * L->dp, fold_device, &t) != 0)
        return false;
    for (int w = 0; w < L->tp * L->dp; w++) {
        int ep[FOLD_MAX * 4], edp[FOLD_MAX * 4], n_ep = 0, n_edp = 0;
        const int rc = lesson_fold_groups(L->tp, L->dp, L->etp, L->ep, w, ep, &n_ep, edp, &n_edp);
        if (rc != 0) {
            if (!tutorial_report_blank())
                tutorial_wrong("lesson_fold_groups returned %d (%s)", rc, ptdp_strerror(rc));
            return false;
        }
        if (n_ep != t.n_ep[w] || memcmp(ep, t.ep[w], sizeof(int) * (size_t)n_ep) != 0) {
            explain_fold(L, w, "EP", ep, n_ep, t.ep[w], t.n_ep[w]);
            return false;
        }
        if (n_edp != t.n_edp[w] || memcmp(edp, t.edp[w], sizeof(int) * (size_t)n_edp) != 0) {
            explain_fold(L, w, "expert-DP", edp, n_edp, t.edp[w], t.n_edp[w]);
            return false;
        }
    }
    return true;
}

static bool check_fold_groups(void)
{
    for (size_t i = 0; i < sizeof FOLDS / sizeof FOLDS[0]; i++)
        if (!check_fold_layout(&FOLDS[i]))
            return false;
    tutorial_ok("MoE parallel folding, %zu layouts: every rank's EP and expert-DP groups are the mesh's",
                sizeof FOLDS / sizeof FOLDS[0]);
    return true;
}

int main(void)
{
    tutorial_begin("14", "experts: the router, the dispatch and the combine, the expert-DP group, DeepSeek-V3's "
                          "balance");
    bool ok = check_route();
    if (ok)
        ok = check_exchanges();
    if (ok)
        ok = check_gated_sum();
    if (ok)
        ok = check_grad_ranks();
    if (ok)
        ok = check_sigmoid_route();
    if (ok)
        ok = check_bias_replicas();
    if (ok)
        ok = check_bias_against_run();
    if (ok)
        ok = check_fold_groups();
    return tutorial_end();
}
