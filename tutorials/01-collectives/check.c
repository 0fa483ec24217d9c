/*
 * check.c — lesson 01: is your ring all-reduce right?
 *
 *   1. The neighbour exchange alone, on 2 to 5 devices: does every rank get
 *      its left neighbour's message, with one send and one receive, and
 *      without a deadlock?
 *   2. The all-reduce on 2 to 5 devices, 1 to 4099 elements (so segments of
 *      unequal length, and empty ones): does every rank end with the sum,
 *      equal to ptdp_all_reduce's, and the same bits on every rank?
 *   3. The bytes: does every device send 2(N-1) segment messages, that is
 *      2(N-1)/N * S bytes for S bytes on N devices?
 *
 * Element i of rank r starts as (1 + i mod 5) * 8^r, so a wrong element
 * can be read back in base 8 as "which ranks' parts, how many times each"
 * and the check can say, e.g., "it holds rank 1's part twice".
 *
 * When a sum is wrong, the final numbers alone often cannot say which blank
 * is at fault (on 2 devices several wrong answers end alike).  So the check
 * runs the all-reduce once more, on the same devices and 960 elements (equal
 * segments on 2 to 5 devices), watching every message (lesson.h routes
 * ptdp_send / ptdp_recv through lesson_send_at / lesson_recv_at): which
 * segment each send carried, which segment each all-gather receive landed in,
 * and what every segment held, in parts, at each step.  Then it walks the
 * ring's rules in order:
 *
 *   reduce-scatter (blank 2)  at step 0 every segment starts at one rank; at
 *                             step s >= 1 a rank passes on the segment that
 *                             arrived at step s-1;
 *   the addition (blank 3)    after step s exactly that arriving segment
 *                             changed: my part plus the arriving sum;
 *   all-gather (blank 4)      step 0 passes on the segment this rank
 *                             finished; later steps pass on the segment that
 *                             just arrived; a segment lands in its own place.
 *
 * The first rule broken names its blank; if none is, blank 3 is blamed.
 * The buffer also has a guard zone after its last element, so a write past
 * the end is reported (blank 3) instead of corrupting the arena.
 *
 * A deadlock is explained from what the watchdog saw each rank waiting in:
 * all sending, all receiving, or one rank waiting for the wrong neighbour.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lesson.h"
#include "tutorial.h"

#include "ptdp/error.h"
#include "ptdp/rng.h"
#include "ptdp/tensor.h"
#include "ptdp/comm.h"

enum { MAX_WORLD = 5, EXCHANGE_LEN = 3 };

/* ------------------------------------------ 0. watching the ring's messages */

enum { MAX_CALLS = 4 * MAX_WORLD, NOT_A_SEGMENT = -1, OUTSIDE_BUF = -2 };

/* One ptdp_send or ptdp_recv of a watched rank, as it began. */
typedef struct {
    bool send;
    int segment;                 /* the segment of buf it carries (send) or lands
                                  in (recv), NOT_A_SEGMENT or OUTSIDE_BUF    */
    double carried;            /* send: the parts it carries, -1 unreadable */
    double before[MAX_WORLD];  /* each segment's parts as the call began      */
} watched_call;

/* "Parts" are read from a segment's first element: (1 + i mod 5) * 8^r per
 * rank r, so value / (1 + i mod 5) in base 8 counts each rank's parts. */
typedef struct {
    const ptdp_real *buf;
    size_t count;
    int world;
    size_t off[MAX_WORLD], len[MAX_WORLD];
    int ncalls;
    watched_call calls[MAX_CALLS];
} call_watch;

static _Thread_local call_watch *watching;   /* this device's, or NULL */

static double parts_at(const call_watch *w, size_t i)
{
    double q = (double)w->buf[i] / (double)(1 + i % 5);
    return q >= 0 && q == floor(q) && q < pow(8.0, w->world) ? q : -1;
}

static int segment_at(const call_watch *w, const void *p, size_t count)
{
    const ptdp_real *e = p;
    if (e < w->buf || e > w->buf + w->count)
        return OUTSIDE_BUF;
    for (int c = 0; c < w->world; c++)
        if (e == w->buf + w->off[c] && count == w->len[c])
            return c;
    return NOT_A_SEGMENT;
}

static void watch_call(bool send, const void *p, size_t count)
{
    call_watch *w = watching;
    if (w == NULL || w->ncalls >= MAX_CALLS) {
        if (w != NULL)
            w->ncalls++;
        return;
    }
    watched_call *k = &w->calls[w->ncalls++];
    k->send = send;
    k->segment = segment_at(w, p, count);
    k->carried = send && k->segment >= 0 ? parts_at(w, w->off[k->segment]) : -1;
    for (int c = 0; c < w->world; c++)
        k->before[c] = w->len[c] > 0 ? parts_at(w, w->off[c]) : -1;
}

int lesson_send_at(ptdp_comm *comm, const void *buf, size_t count, ptdp_dtype t,
                   int dst, int tag, const char *file, int line)
{
    watch_call(true, buf, count);
    return ptdp_send_at(comm, buf, count, t, dst, tag, file, line);
}

int lesson_recv_at(ptdp_comm *comm, void *buf, size_t count, ptdp_dtype t,
                   int src, int tag, const char *file, int line)
{
    watch_call(false, buf, count);
    return ptdp_recv_at(comm, buf, count, t, src, tag, file, line);
}

/* ------------------------------------------------ 1. the neighbour exchange */

typedef struct {
    ptdp_real got[MAX_WORLD][EXCHANGE_LEN];
    unsigned long long sends[MAX_WORLD], recvs[MAX_WORLD];
} exchange_run;

static ptdp_real message_of(int rank, int k)
{
    return (ptdp_real)(100 * rank + k);
}

static int exchange_device(ptdp_device *dev, void *arg)
{
    exchange_run *x = arg;
    const ptdp_comm_stats *st = &dev->stats;
    ptdp_real out[EXCHANGE_LEN], in[EXCHANGE_LEN];
    for (int k = 0; k < EXCHANGE_LEN; k++) {
        out[k] = message_of(dev->rank, k);
        in[k] = -1;
    }
    unsigned long long s0 = st->calls[PTDP_COLL_SEND], r0 = st->calls[PTDP_COLL_RECV];
    int rc = lesson_ring_exchange(dev->world, out, EXCHANGE_LEN, in, EXCHANGE_LEN, 7);
    memcpy(x->got[dev->rank], in, sizeof in);
    x->sends[dev->rank] = st->calls[PTDP_COLL_SEND] - s0;
    x->recvs[dev->rank] = st->calls[PTDP_COLL_RECV] - r0;
    return rc;
}

/* The hint under a STUCK verdict: what the watchdog saw, in words. */
static void explain_deadlock(const char *report, int world)
{
    tutorial_wait waits[PTDP_MAX_DEVICES];
    tutorial_read_waits(report, world, waits);
    int sending = 0, receiving = 0;
    for (int r = 0; r < world; r++) {
        int left = (r + world - 1) % world, right = (r + 1) % world;
        sending += waits[r].op == 's';
        receiving += waits[r].op == 'r';
        if (waits[r].op == 'r' && waits[r].peer != left) {
            tutorial_note("Rank %d waits to receive from rank %d, but its message comes from its left", r,
                          waits[r].peer);
            tutorial_note("neighbour, rank %d: every rank sends to `right` and receives from `left` (blank 1).",
                          left);
            return;
        }
        if (waits[r].op == 's' && waits[r].peer != right) {
            tutorial_note("Rank %d waits to send to rank %d, but the ring sends to the right neighbour,", r,
                          waits[r].peer);
            tutorial_note("rank %d: every rank sends to `right` and receives from `left` (blank 1).", right);
            return;
        }
    }
    if (sending == world) {
        tutorial_note("Every rank was waiting in its send.  A blocking send waits until its receive has");
        tutorial_note("taken the message: if every rank sends first, every rank waits for a receive that");
        tutorial_note("nobody has posted, a cycle of waiting sends.  Break the cycle (blank 1): let half of");
        tutorial_note("the ranks receive first.  Which half, so that every send meets a waiting receive?");
    } else if (receiving == world) {
        tutorial_note("Every rank was waiting in its receive: if every rank receives first, nobody ever");
        tutorial_note("sends, a cycle of waiting receives.  Break the cycle (blank 1): let half of the");
        tutorial_note("ranks send first.  Which half, so that every send meets a waiting receive?");
    } else if (sending + receiving > 0) {
        tutorial_note("Some ranks were waiting to send and some to receive, each for a neighbour that was");
        tutorial_note("waiting too (the list above): follow who waits for whom around the ring.  A send");
        tutorial_note("must meet a neighbour that is receiving from it (blank 1).");
    }
}

static bool check_exchange(int world)
{
    exchange_run x;
    char what[64];
    snprintf(what, sizeof what, "the neighbour exchange on %d devices", world);
    ptdp_launch_result res;
    ptdp_launch_opts opts = { .result = &res };
    int rc = tutorial_launch_opts(what, world, exchange_device, &x, &opts);
    if (rc == PTDP_ETIMEDOUT)
        explain_deadlock(res.message, world);
    ptdp_launch_result_free(&res);
    if (rc != 0)
        return false;
    for (int r = 0; r < world; r++) {
        int left = (r + world - 1) % world, right = (r + 1) % world;
        if (x.sends[r] != 1 || x.recvs[r] != 1) {
            tutorial_wrong("%s: rank %d made %llu sends and %llu receives; one ring step is exactly one "
                           "send (to the right) and one receive (from the left).", what, r, x.sends[r], x.recvs[r]);
            return false;
        }
        if (x.got[r][0] != message_of(left, 0) || x.got[r][EXCHANGE_LEN - 1] != message_of(left, EXCHANGE_LEN - 1)) {
            bool from_right = x.got[r][0] == message_of(right, 0);
            tutorial_wrong("%s: rank %d received %g, %g, %g, but its left neighbour, rank %d, sent %g, %g, %g.",
                           what, r, (double)x.got[r][0], (double)x.got[r][1], (double)x.got[r][2], left,
                           (double)message_of(left, 0), (double)message_of(left, 1), (double)message_of(left, 2));
            if (from_right)
                tutorial_note("That is the message of rank %d, the RIGHT neighbour: send to rank + 1 and "
                              "receive from rank - 1.", right);
            return false;
        }
    }
    return true;
}

/* --------------------------------------------------- 2. the all-reduce */

typedef struct {
    int world;
    size_t count;
    bool random_values;       /* else (1 + i mod 5) * 8^rank              */
    ptdp_real *result;        /* [world][count]: after lesson_ring_all_reduce */
    ptdp_real *reference;     /* [world][count]: after ptdp_all_reduce   */
    unsigned long long sends[MAX_WORLD], recvs[MAX_WORLD];
    double sent[MAX_WORLD];   /* bytes                                   */
    double naive_sent[MAX_WORLD], library_ring_sent[MAX_WORLD];
    bool compare_algorithms;
    size_t overrun[MAX_WORLD];   /* elements of the guard zone written, up to */
    bool watch;                  /* note every message (watches)             */
    call_watch watches[MAX_WORLD];
} reduce_run;

/* After buf's `count` elements, a guard zone of count + GUARD_EXTRA
 * elements holding GUARD_VALUE (not a sum of parts): a write past the end
 * lands there, where the check sees it, instead of in the arena's own
 * bookkeeping. */
enum { GUARD_EXTRA = 8 };
#define GUARD_VALUE ((ptdp_real)-0.5)

static ptdp_real start_value(const reduce_run *x, int rank, size_t i)
{
    if (x->random_values)
        return (ptdp_real)ptdp_rng_normal(ptdp_rng_key(1, "lesson01"), (uint64_t)rank * x->count + i);
    return (ptdp_real)((double)(1 + i % 5) * pow(8.0, rank));
}

static int reduce_device(ptdp_device *dev, void *arg)
{
    reduce_run *x = arg;
    const ptdp_comm_stats *st = &dev->stats;
    int r = dev->rank;
    size_t bytes = x->count * sizeof(ptdp_real), guard = x->count + GUARD_EXTRA;
    ptdp_real *buf = ptdp_alloc(dev, bytes + guard * sizeof(ptdp_real), PTDP_MEM_OTHER, "lesson.buf");
    ptdp_real *ref = ptdp_alloc(dev, bytes, PTDP_MEM_OTHER, "lesson.reference");
    if (buf == NULL || ref == NULL)
        return PTDP_ENOMEM;
    for (size_t i = 0; i < x->count; i++)
        buf[i] = ref[i] = start_value(x, r, i);
    for (size_t g = 0; g < guard; g++)
        buf[x->count + g] = GUARD_VALUE;
    if (x->watch) {
        call_watch *w = &x->watches[r];
        memset(w, 0, sizeof *w);
        w->buf = buf;
        w->count = x->count;
        w->world = x->world;
        for (int c = 0; c < x->world; c++)
            ptdp_share(x->count, x->world, c, &w->off[c], &w->len[c]);
        watching = w;
    }

    unsigned long long s0 = st->calls[PTDP_COLL_SEND], r0 = st->calls[PTDP_COLL_RECV];
    double b0 = st->bytes_sent[PTDP_COLL_SEND];
    int rc = lesson_ring_all_reduce(dev, dev->world, buf, x->count);
    watching = NULL;
    x->overrun[r] = 0;
    for (size_t g = 0; g < guard; g++)
        if (buf[x->count + g] != GUARD_VALUE)
            x->overrun[r] = g + 1;
    x->sends[r] = st->calls[PTDP_COLL_SEND] - s0;
    x->recvs[r] = st->calls[PTDP_COLL_RECV] - r0;
    x->sent[r] = st->bytes_sent[PTDP_COLL_SEND] - b0;
    if (rc == 0)
        rc = ptdp_all_reduce(dev->world, ref, ref, x->count, PTDP_REAL, PTDP_SUM);
    if (rc == 0) {
        memcpy(x->result + (size_t)r * x->count, buf, bytes);
        memcpy(x->reference + (size_t)r * x->count, ref, bytes);
    }
    /* For the measurement line only: what ptdp's own algorithms send. */
    for (int a = 0; rc == 0 && x->compare_algorithms && a < 2; a++) {
        double before = st->bytes_sent[PTDP_COLL_ALL_REDUCE];
        rc = ptdp_all_reduce_algo(dev->world, ref, ref, x->count, PTDP_REAL, PTDP_SUM,
                                  a == 0 ? PTDP_ALGO_NAIVE : PTDP_ALGO_RING);
        (a == 0 ? x->naive_sent : x->library_ring_sent)[r] = st->bytes_sent[PTDP_COLL_ALL_REDUCE] - before;
    }
    ptdp_free(dev, ref);
    ptdp_free(dev, buf);
    return rc;
}

/* Read a wrong element back as "how many times each rank's part". */
static void explain_element(const reduce_run *x, int rank, size_t i, double got)
{
    double q = got / (double)(1 + i % 5);
    int times[MAX_WORLD] = { 0 };
    bool readable = q >= 0 && q == floor(q) && q < pow(8.0, x->world);
    for (int k = 0; readable && k < x->world; k++) {
        times[k] = (int)fmod(q, 8.0);
        q = floor(q / 8.0);
    }
    if (!readable) {
        tutorial_note("That is not a sum of whole parts of the devices: is a segment's offset or length");
        tutorial_note("off (ptdp_share gives both), or is a received segment written to the wrong place?");
        return;
    }
    char have[128] = "", twice[128] = "", missing[128] = "";
    int nhave = 0, ntwice = 0, nmissing = 0;
    for (int k = 0; k < x->world; k++) {
        char *dst = times[k] == 0 ? missing : times[k] == 1 ? have : twice;
        int *cnt = times[k] == 0 ? &nmissing : times[k] == 1 ? &nhave : &ntwice;
        size_t used = strlen(dst);
        snprintf(dst + used, 128 - used, "%s%d", *cnt ? ", " : "", k);
        (*cnt)++;
    }
    if (ntwice > 0) {
        tutorial_note("It holds the part of rank(s) %s more than once: is a part added twice, your own", twice);
        tutorial_note("part added again or an arriving sum added to itself?");
    }
    if (nmissing > 0 && nhave + ntwice == 1 && times[rank] == 1) {
        tutorial_note("It holds rank %d's own part only: nothing was added to it.  Does blank 3 add", rank);
        tutorial_note("the arriving partial sum, and does the all-gather (blank 4) bring the finished segment?");
    } else if (nmissing > 0 && times[rank] == 0) {
        tutorial_note("It lacks the part of rank(s) %s, its own part among them: does blank 3 overwrite", missing);
        tutorial_note("the segment with what arrives (=) instead of adding to it (+=)?");
    } else if (nmissing > 0) {
        tutorial_note("It lacks the part of rank(s) %s: the sum did not go around the whole ring", missing);
        tutorial_note("(N-1 reduce-scatter steps, then N-1 all-gather steps).");
    }
}

/* "parts {0, 1, 1, 3}": whose parts a segment holds, each rank once per part,
 * from its base-8 reading (parts_at). */
static const char *parts_text(double q, int world, char *out, size_t n)
{
    if (q < 0) {
        snprintf(out, n, "numbers that are not sums of whole parts");
        return out;
    }
    if (q == 0) {
        snprintf(out, n, "no part at all");
        return out;
    }
    size_t used = (size_t)snprintf(out, n, "parts {");
    bool first = true;
    for (int k = 0; k < world && used < n; k++) {
        int times = (int)fmod(q, 8.0);
        q = floor(q / 8.0);
        for (int t = 0; t < times && used < n; t++) {
            used += (size_t)snprintf(out + used, n - used, "%s%d", first ? "" : ", ", k);
            first = false;
        }
    }
    if (used < n)
        snprintf(out + used, n - used, "}");
    return out;
}

enum { DIAGNOSIS_COUNT = 960 };   /* equal segments on 2, 3, 4 and 5 devices */

/* The first rule of the ring that the watched run x breaks, in words;
 * false if it breaks none (or the messages cannot be paired into steps). */
static bool name_broken_rule(const reduce_run *x)
{
    int n = x->world, steps = 2 * (n - 1);
    int sent[MAX_WORLD][MAX_CALLS / 2], landed[MAX_WORLD][MAX_CALLS / 2];
    double carried[MAX_WORLD][MAX_CALLS / 2];
    const double *before[MAX_WORLD][MAX_CALLS / 2];
    for (int r = 0; r < n; r++) {
        const call_watch *w = &x->watches[r];
        if (w->ncalls != 2 * steps)
            return false;
        for (int k = 0; k < steps; k++) {
            const watched_call *a = &w->calls[2 * k], *b = &w->calls[2 * k + 1];
            if (a->send == b->send)
                return false;
            const watched_call *snd = a->send ? a : b, *rcv = a->send ? b : a;
            sent[r][k] = snd->segment;
            carried[r][k] = snd->carried;
            landed[r][k] = rcv->segment;
            before[r][k] = a->before;     /* every segment as step k began */
        }
    }
    char p1[96], p2[96], p3[96];
    for (int k = 0; k < steps; k++) {
        bool scatter = k < n - 1;
        int s = scatter ? k : k - (n - 1);
        const char *phase = scatter ? "reduce-scatter" : "all-gather";
        int blank = scatter ? 2 : 4;
        /* Which segment each rank passes on. */
        for (int r = 0; r < n; r++) {
            int left = (r + n - 1) % n, c = sent[r][k];
            if (c < 0) {
                tutorial_note("At %s step %d rank %d sent something that is not one of the %d segments:", phase,
                              s, r, n);
                tutorial_note("is send_segment a segment number, 0 to N-1 (blank %d)?", blank);
                return true;
            }
            if (scatter && s == 0) {
                for (int q = 0; q < r; q++)
                    if (sent[q][0] == c) {
                        tutorial_note("At reduce-scatter step 0 ranks %d and %d both sent segment %d: every segment", q,
                                      r, c);
                        tutorial_note("starts its trip around the ring at exactly one rank, so at step 0 the N");
                        tutorial_note("ranks send N different segments (blank 2: send_segment).");
                        return true;
                    }
            } else if (scatter) {
                int want = sent[left][k - 1];
                if (c != want) {
                    tutorial_note("At reduce-scatter step %d rank %d sent segment %d, but the partial sum that", s, r,
                                  c);
                    tutorial_note("arrived at step %d was segment %d (rank %d sent it): each step passes on the", s - 1,
                                  want, left);
                    tutorial_note("segment that just arrived, with your part added (blank 2: send_segment).");
                    return true;
                }
            } else if (s == 0) {
                int finished = sent[left][n - 2];
                if (c != finished && c == r) {
                    tutorial_note("Your reduce-scatter finishes segment %d at rank %d, but the all-gather starts",
                                  finished, r);
                    tutorial_note("from segment %d there.  Segment c should end, complete, at rank c (blank 2),", r);
                    tutorial_note("which is where the all-gather (blank 4) expects it.");
                    return true;
                }
                if (c != finished) {
                    tutorial_note("At all-gather step 0 rank %d passed on segment %d, which holds %s;", r, c,
                                  parts_text(before[r][k][c], n, p1, sizeof p1));
                    tutorial_note("the segment it finished in the reduce-scatter is segment %d (%s).", finished,
                                  parts_text(before[r][k][finished], n, p2, sizeof p2));
                    tutorial_note("The all-gather starts from the segment this rank finished (blank 4: send_segment).");
                    return true;
                }
            } else {
                int want = sent[left][k - 1];
                if (c != want) {
                    tutorial_note("At all-gather step %d rank %d passed on segment %d, but the finished segment that", s,
                                  r, c);
                    tutorial_note("arrived at step %d was segment %d (rank %d sent it): each step passes on the", s - 1,
                                  want, left);
                    tutorial_note("segment that just arrived (blank 4: send_segment).");
                    return true;
                }
            }
        }
        /* Where what arrived went. */
        for (int r = 0; r < n; r++) {
            int left = (r + n - 1) % n, y = sent[left][k];
            if (!scatter) {
                if (landed[r][k] != y) {
                    tutorial_note("At all-gather step %d rank %d received segment %d (rank %d sent it) into the", s, r,
                                  y, left);
                    if (landed[r][k] >= 0)
                        tutorial_note("place of segment %d: a segment lands in its own place, so recv_segment is the", landed[r][k]);
                    else
                        tutorial_note("wrong place: a segment lands in its own place, so recv_segment is the");
                    tutorial_note("segment the left neighbour sends at this step (blank 4: recv_segment).");
                    return true;
                }
                continue;
            }
            const double *b = before[r][k], *a = before[r][k + 1];
            double arrived = carried[left][k];
            int changed = 0, other = -1;
            for (int c = 0; c < n; c++)
                if (a[c] != b[c]) {
                    changed++;
                    if (c != y)
                        other = c;
                }
            bool right = a[y] >= 0 && b[y] >= 0 && arrived >= 0 && a[y] == b[y] + arrived;
            if (right && changed == 1)
                continue;
            tutorial_note("At reduce-scatter step %d the partial sum of segment %d arrived at rank %d (%s).", s, y,
                          r, parts_text(arrived, n, p1, sizeof p1));
            if (changed == 0) {
                tutorial_note("Nothing of rank %d changed: blank 3 adds the arriving partial sum (in", r);
                tutorial_note("`incoming`) to your part of that segment, buf + off[recv_segment].");
            } else if (changed == 1 && other >= 0 && a[other] >= 0 && b[other] >= 0 &&
                       a[other] == b[other] + arrived) {
                if (other == sent[r][k]) {
                    tutorial_note("Rank %d added it to segment %d, the segment it had just sent, not to segment %d: the", r,
                                  other, y);
                    tutorial_note("sum that arrives belongs to segment recv_segment; blank 3 adds it at");
                    tutorial_note("buf + off[recv_segment], not at the segment you sent (and recv_segment, blank 2, is");
                    tutorial_note("the segment the left neighbour sends, not the one you send).");
                } else {
                    tutorial_note("Rank %d added it to segment %d, not to segment %d.  Is recv_segment the segment the", r,
                                  other, y);
                    tutorial_note("left neighbour sends at this step (blank 2), and does blank 3 add at");
                    tutorial_note("buf + off[recv_segment]?");
                }
            } else if (changed == 1 && other < 0 && a[y] == arrived) {
                tutorial_note("Rank %d's segment %d now holds %s: the arriving sum replaced rank %d's", r, y,
                              parts_text(a[y], n, p2, sizeof p2), r);
                tutorial_note("part instead of being added to it.  Does blank 3 overwrite the segment (=)");
                tutorial_note("instead of adding to it (+=)?");
            } else if (changed == 1 && other < 0) {
                tutorial_note("Rank %d's segment %d now holds %s; it should hold %s plus the arriving", r, y,
                              parts_text(a[y], n, p2, sizeof p2), parts_text(b[y], n, p3, sizeof p3));
                tutorial_note("sum, each part once: what does blank 3 add, and how many times?");
            } else {
                tutorial_note("Rank %d's segments changed in %d places; only segment %d, the one that arrived,", r,
                              changed, y);
                tutorial_note("should change: blank 3 adds the arriving sum at buf + off[recv_segment] only.");
            }
            return true;
        }
    }
    return false;
}

/* Run the all-reduce again on `world` devices and 960 elements, watching
 * every message, and say which rule of the ring it breaks (see the top).
 * Returns true if it said something, false if that second run failed. */
static bool diagnose_ring(int world)
{
    reduce_run *x = calloc(1, sizeof *x);
    if (x == NULL)
        return false;
    x->world = world;
    x->count = DIAGNOSIS_COUNT;
    x->watch = true;
    x->result = calloc((size_t)world * x->count, sizeof(ptdp_real));
    x->reference = calloc((size_t)world * x->count, sizeof(ptdp_real));
    ptdp_launch_opts opts = { .watchdog_s = tutorial_watchdog_s() };
    bool said = false;
    if (x->result != NULL && x->reference != NULL && ptdp_launch(world, reduce_device, x, &opts) == 0) {
        tutorial_note("A second run on %d devices, %d elements (%d segments of %d), watching every message:",
                      world, DIAGNOSIS_COUNT, world, DIAGNOSIS_COUNT / world);
        said = name_broken_rule(x);
        if (!said) {
            tutorial_note("every message followed the ring's rules and every step's addition was right at");
            tutorial_note("its segment's first element: so the addition goes wrong further in.  Does blank 3");
            tutorial_note("add incoming[i] to element i of segment recv_segment, for every i < len[recv_segment]?");
            said = true;
        }
    }
    free(x->result);
    free(x->reference);
    free(x);
    return said;
}

static bool check_all_reduce(int world, size_t count, bool random_values, bool compare_algorithms)
{
    reduce_run x = { .world = world, .count = count, .random_values = random_values,
                     .compare_algorithms = compare_algorithms };
    char what[96];
    snprintf(what, sizeof what, "%d devices, %zu element%s%s", world, count, count == 1 ? "" : "s",
             random_values ? " (random values)" : "");
    x.result = calloc((size_t)world * count, sizeof(ptdp_real));
    x.reference = calloc((size_t)world * count, sizeof(ptdp_real));
    ptdp_launch_result res;
    ptdp_launch_opts opts = { .result = &res };
    int rc = x.result != NULL && x.reference != NULL ? tutorial_launch_opts(what, world, reduce_device, &x, &opts)
                                                     : PTDP_ENOMEM;
    bool ok = rc == 0;
    if (rc == PTDP_EMISMATCH && strstr(res.message, "mismatched message") != NULL) {
        /* A receive whose length is not its message's: the exchange takes
         * len[recv_segment], so recv_segment is not the segment the left sends. */
        int tag = 0;
        const char *t = strstr(res.message, " tag ");
        if (t != NULL)
            tag = atoi(t + 5);
        tutorial_note("A receive expected another length than its left neighbour sent: the exchange");
        tutorial_note("receives len[recv_segment] elements, so recv_segment is not the segment that arrives.");
        tutorial_note("In the %s, recv_segment is the segment the left neighbour sends at",
                      tag == 2 ? "all-gather" : "reduce-scatter");
        tutorial_note("the same step (blank %d: recv_segment).", tag == 2 ? 4 : 2);
    }
    if (rc != PTDP_ENOMEM)
        ptdp_launch_result_free(&res);

    /* Nothing written past the end of buf (into the guard zone). */
    for (int r = 0; ok && r < world; r++)
        if (x.overrun[r] > 0) {
            tutorial_wrong("%s: rank %d wrote past the end of buf, up to element %zu (buf has %zu element%s).\n"
                           "The ring writes only inside segments: blank 3 adds the len[recv_segment] "
                           "elements that arrive\nat buf + off[recv_segment].", what, r,
                           count + x.overrun[r] - 1, count, count == 1 ? "" : "s");
            diagnose_ring(world);
            ok = false;
        }

    /* Every rank holds the sum (ptdp_all_reduce's), to 1e-10. */
    for (int r = 0; ok && r < world; r++)
        for (size_t i = 0; ok && i < count; i++) {
            double got = x.result[(size_t)r * count + i], want = x.reference[(size_t)r * count + i];
            if (fabs(got - want) > 1e-10 * fmax(1.0, fabs(want))) {
                tutorial_wrong("%s: rank %d ended with %.17g in element %zu; the sum over %d devices is %.17g.",
                               what, r, got, i, world, want);
                if (!random_values && !diagnose_ring(world))
                    explain_element(&x, r, i, got);
                ok = false;
            }
        }
    /* …and the same bits on every rank: replicas must never drift apart. */
    for (int r = 1; ok && r < world; r++)
        if (memcmp(x.result, x.result + (size_t)r * count, count * sizeof(ptdp_real)) != 0) {
            tutorial_wrong("%s: rank %d's result is not bit-identical to rank 0's.  In the ring each segment is "
                           "summed once, on one device, then only copied: does your all-gather copy the "
                           "finished segments rather than sum again?", what, r);
            ok = false;
        }
    /* The bytes: 2(N-1) messages of one segment each. */
    size_t lo = (size_t)-1, hi = 0;
    for (int c = 0; c < world; c++) {
        size_t off, len;
        ptdp_share(count, world, c, &off, &len);
        lo = len < lo ? len : lo;
        hi = len > hi ? len : hi;
    }
    unsigned long long steps = 2ull * (unsigned long long)(world - 1);
    double S = (double)(count * sizeof(ptdp_real)), es = (double)sizeof(ptdp_real);
    for (int r = 0; ok && r < world; r++) {
        if (x.sends[r] != steps || x.recvs[r] != steps) {
            tutorial_wrong("%s: rank %d made %llu sends and %llu receives; the ring makes 2(N-1) = %llu of each "
                           "(N-1 reduce-scatter steps, N-1 all-gather steps, one segment per step).",
                           what, r, x.sends[r], x.recvs[r], steps);
            ok = false;
        } else if (x.sent[r] < (double)steps * (double)lo * es || x.sent[r] > (double)steps * (double)hi * es) {
            tutorial_wrong("%s: rank %d sent %.0f bytes; %llu messages of one segment each are %.0f to %.0f bytes "
                           "(2(N-1)/N * S = %.0f).  Does every message carry exactly one segment?", what, r,
                           x.sent[r], steps, (double)steps * (double)lo * es, (double)steps * (double)hi * es,
                           2.0 * (world - 1) / world * S);
            ok = false;
        }
    }
    if (ok && random_values)
        tutorial_ok("%s: the sum on every rank, bit-identical", what);
    if (ok && compare_algorithms) {
        tutorial_ok("bytes, %d devices, S = %.0f B: every device sent %.0f B in %llu messages = 2(N-1)/N * S",
                    world, S, x.sent[0], steps);
        tutorial_note("for comparison, ptdp's own ring (src/comm/shm/allreduce_ring.c): %.0f B per device;",
                      x.library_ring_sent[0]);
        tutorial_note("the naive reduce-then-broadcast: %.0f B from rank 0, %.0f B from each other rank",
                      x.naive_sent[0], x.naive_sent[1]);
    }
    free(x.result);
    free(x.reference);
    return ok;
}

int main(void)
{
    tutorial_begin("01", "the ring all-reduce, from send and recv");

    bool ok = true;
    for (int world = 2; ok && world <= MAX_WORLD; world++)
        ok = check_exchange(world);
    if (ok)
        tutorial_ok("the neighbour exchange, 2 to 5 devices: each rank got its left neighbour's "
                    "message, no deadlock");

    static const size_t counts[] = { 1, 7, 1000, 4099 };
    for (int world = 2; ok && world <= MAX_WORLD; world++) {
        for (size_t k = 0; ok && k < sizeof counts / sizeof counts[0]; k++)
            ok = check_all_reduce(world, counts[k], false, false);
        if (ok)
            tutorial_ok("%d devices, 1/7/1000/4099 elements: the sum on every rank, bit-identical, "
                        "%d messages each", world, 2 * (world - 1));
    }
    if (ok)
        ok = check_all_reduce(MAX_WORLD, 1001, true, false);
    if (ok)
        ok = check_all_reduce(4, 1000, false, true);
    return tutorial_end();
}
