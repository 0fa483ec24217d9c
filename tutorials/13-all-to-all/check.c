/*
 * check.c — lesson 13: is your all-to-all the library's, and do your
 * Ulysses re-layouts move every head and every position where it belongs?
 *
 *   blanks 1-3  lesson_all_to_all on N = 1 .. 5 devices, blocks of 0, 1 and
 *               7 reals: every rank's recv equal, bit for bit, to what
 *               ptdp_all_to_all gives for the same send; N-1 blocks sent
 *               per rank (the library's byte count of your sends)
 *   blanks 4-5  lesson_heads_from_sequence on N = 1 .. 4 devices, T = 12
 *               positions of nh = 12 heads of hd = 2: every rank ends with
 *               all 12 positions of its nh/N heads
 *   blanks 6-7  lesson_sequence_from_heads: from that layout back to each
 *               rank's positions of every head
 *
 * Every value says where it came from — 1000 src + 10 dst + e for the
 * all-to-all, 1000 t + 10 h + d for position t, head h, column d — so a
 * value in the wrong place names the blank that put it there: the pack's
 * when the pack (the first half of the scratch) is wrong, else the
 * unpack's.  Past its blocks a send holds values that name where they were
 * read, and a recv has room that shows a write landing there: an offset
 * counted in bytes is named, not read from (or written to) memory that is
 * not the check's.  Under a STUCK verdict, the watchdog's report of who
 * waits for whom says why: tags that differ, a wrong peer, or a cycle of
 * sends at one step.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lesson.h"
#include "tutorial.h"

#include "ptdp/error.h"

enum { MAX_N = 5, T = 12, NH = 12, HD = 2, W = NH * HD };
static const ptdp_real UNWRITTEN = -1;

/* "1 device", "4 devices" */
static const char *plural(int n)
{
    return n == 1 ? "" : "s";
}

/* ======================================== blanks 1-3: the all-to-all */

static ptdp_real a2a_value(int src, int dst, size_t e)
{
    return (ptdp_real)(1000 * src + 10 * dst + (int)(e % 10));
}

/* send and recv hold N blocks and, after them, room for an offset that
 * went too far — the farthest one C lets a student write by mistake,
 * (N-1) x block x sizeof(ptdp_real) + block, counting bytes — so such an
 * offset reads and writes the check's own memory, and says so.  Past the
 * blocks, send's element k holds -(k + 2): a value that arrives from there
 * names where it was read. */
enum { MAX_BLOCK = 7, GUARDED = (MAX_N - 1) * MAX_BLOCK * sizeof(ptdp_real) + MAX_BLOCK };

static ptdp_real beyond_value(size_t k)
{
    return -(ptdp_real)(k + 2);
}

/* A value read past the end of a send: which element of it (else -1). */
static long beyond_index(ptdp_real v)
{
    return v < -1 ? (long)(-v) - 2 : -1;
}

/* Element k of a buffer of N blocks was reached at offset `peer` blocks,
 * element e: was the offset peer x block x sizeof(ptdp_real), bytes? */
static bool offset_in_bytes(size_t k, int peer, size_t block, size_t e)
{
    return k == (size_t)peer * block * sizeof(ptdp_real) + e;
}

/* The blocks rank me receives at step s come from rank (me - s) mod N.  If
 * the blocks of steps 1 .. first - 1 are right, every later one was never
 * written, and only first - 1 blocks were sent, the loop stopped early:
 * returns that step (else 0). */
static int first_step_missing(int me, int n, const ptdp_real *mine, const ptdp_real *lib, size_t b, double sent)
{
    int first = 0;
    for (int s = 1; s < n; s++) {
        const size_t i = (size_t)((me - s + n) % n);
        bool right = true, unwritten = true;
        for (size_t e = 0; e < b; e++) {
            right = right && mine[i * b + e] == lib[i * b + e];
            unwritten = unwritten && mine[i * b + e] == UNWRITTEN;
        }
        if (first == 0 && !right && unwritten)
            first = s;
        else if (first == 0 ? !right : !unwritten)
            return 0;
    }
    return first > 0 && sent == (double)((size_t)(first - 1) * b * sizeof(ptdp_real)) ? first : 0;
}

/* Why is element e of block i (from rank i) of rank me's recv wrong? */
static int explain_block(ptdp_device *dev, int i, size_t e, ptdp_real got, size_t block)
{
    const int me = dev->rank, n = dev->world_size, src = (int)got / 1000, dst = ((int)got % 1000) / 10;
    const long k = beyond_index(got);
    if (k >= 0)
        return tutorial_device_wrong(dev, "rank %d: block %d of recv holds element %ld of rank %d's send, past the "
                                     "end of its %d blocks of %zu real%s\n%s", me, i, k, i, n, block, plural((int)block),
                                     offset_in_bytes((size_t)k, me, block, e)
                                         ? "that is to x block x sizeof(ptdp_real): an offset in bytes.  C already "
                                           "counts a ptdp_real pointer in reals: blank 3 sends send + to * block"
                                         : "blank 3 sends block `to` of send: send + to * block");
    if (got == UNWRITTEN && i == me)
        return tutorial_device_wrong(dev, "rank %d: block %d of recv, your own block, was never written\n"
                                     "blank 1 copies block r of send into block r of recv", me, i);
    if (got == UNWRITTEN)
        return tutorial_device_wrong(dev, "rank %d: block %d of recv (from rank %d) never arrived\n"
                                     "blank 3 receives rank `from`'s block into block `from` (blank 2: "
                                     "from = (r - s) mod N)", me, i, i);
    if (dst != me)
        return tutorial_device_wrong(dev, "rank %d: block %d of recv holds rank %d's block for rank %d, not "
                                     "for you\nblank 3 sends block `to` of send, the one for rank `to`",
                                     me, i, src, dst);
    if (src != i)
        return tutorial_device_wrong(dev, "rank %d: block %d of recv holds rank %d's block, where rank %d's "
                                     "belongs\nblank 2/3: at step s the block from rank (r - s) mod N lands "
                                     "in block (r - s) mod N", me, i, src, i);
    return tutorial_device_wrong(dev, "rank %d: element %zu of block %d = %g, expected %g (%zu real%s a block)",
                                 me, e, i, (double)got, (double)a2a_value(i, me, e), block, plural((int)block));
}

/* Did this rank write past the end of recv?  Which element, or -1. */
static long written_past(const ptdp_real *mine, size_t n, size_t b)
{
    for (size_t k = n * b; k < GUARDED; k++)
        if (mine[k] != UNWRITTEN)
            return (long)k;
    return -1;
}

typedef struct {
    size_t block;
} a2a_case;

static int a2a_device(ptdp_device *dev, void *arg)
{
    const size_t b = ((const a2a_case *)arg)->block, n = (size_t)dev->world_size;
    const int me = dev->rank;
    ptdp_real send[GUARDED], mine[GUARDED], lib[MAX_N * MAX_BLOCK];
    for (size_t k = 0; k < GUARDED; k++) {
        send[k] = k < n * b ? a2a_value(me, (int)(k / b), k % b) : beyond_value(k);
        mine[k] = UNWRITTEN;
    }
    for (size_t k = 0; k < n * b; k++)
        lib[k] = UNWRITTEN;
    double before = dev->stats.bytes_sent[PTDP_COLL_SEND];
    int rc = lesson_all_to_all(dev->world, send, mine, b);
    if (rc != 0)
        return rc;
    double sent = dev->stats.bytes_sent[PTDP_COLL_SEND] - before;
    if ((rc = ptdp_all_to_all(dev->world, send, lib, b, PTDP_REAL)) != 0)
        return rc;
    const long past = written_past(mine, n, b);
    if (past >= 0) {
        const int from = (int)(mine[past] / 1000);   /* the sender, if the value is one of a send's */
        return tutorial_device_wrong(dev, "rank %d received into element %ld of recv, past the end of its %zu "
                                     "blocks of %zu real%s\n%s", me, past, n, b, plural((int)b),
                                     b > 0 && offset_in_bytes((size_t)past, from, b, (size_t)past % b)
                                         ? "that is from x block x sizeof(ptdp_real): an offset in bytes.  C already "
                                           "counts a ptdp_real pointer in reals: blank 3 receives into "
                                           "recv + from * block"
                                         : "blank 3 receives rank `from`'s block into recv + from * block");
    }
    const int first = first_step_missing(me, (int)n, mine, lib, b, sent);
    if (first > 0) {
        const int from = (me - first + (int)n) % (int)n;
        return tutorial_device_wrong(dev, "rank %d: block %d of recv (from rank %d, step %d) never arrived, nor any "
                                     "block of a later step, and rank %d sent %d block%s, not N-1 = %zu: the loop "
                                     "stopped before step %d\nit runs s = 1 .. N-1 (s < N): N-1 steps, one for each "
                                     "other rank", me, from, from, first, me, first - 1, plural(first - 1), n - 1,
                                     first);
    }
    for (size_t i = 0; i < n; i++)
        for (size_t e = 0; e < b; e++)
            if (mine[i * b + e] != lib[i * b + e])
                return explain_block(dev, (int)i, e, mine[i * b + e], b);
    double want = (double)((n - 1) * b * sizeof(ptdp_real));
    if (sent != want)
        return tutorial_device_wrong(dev, "rank %d sent %.0f bytes; an all-to-all sends N-1 = %zu block%s of %zu "
                                     "bytes = %.0f (your own block stays)", me, sent, n - 1, plural((int)n - 1),
                                     b * sizeof(ptdp_real), want);
    return 0;
}

/* A cycle of ranks each waiting in a send to the next at one step: its
 * first rank, the cycle written "1 -> 3 -> 1" into buf; -1 if none. */
static int send_cycle(const tutorial_wait *w, int n, char *buf, size_t len)
{
    for (int c = 0; c < n; c++) {
        if (w[c].op != 's')
            continue;
        int p = c, steps = 0;
        do {
            const int q = w[p].peer;
            p = q >= 0 && q < n && w[q].op == 's' && w[q].tag == w[c].tag ? q : -1;
        } while (p >= 0 && p != c && ++steps < n);
        if (p != c)
            continue;
        size_t at = (size_t)snprintf(buf, len, "%d", c);
        p = c;
        do {
            p = w[p].peer;
            at += (size_t)snprintf(buf + at, at < len ? len - at : 0, " -> %d", p);
        } while (p != c && at < len);
        return c;
    }
    return -1;
}

/* The hint under a STUCK verdict: who waited for whom, in words. */
static void explain_stuck(const char *report, int n)
{
    tutorial_wait w[PTDP_MAX_DEVICES];
    tutorial_read_waits(report, n, w);
    int sending = 0, receiving = 0, first_tag = -1;
    for (int r = 0; r < n; r++) {
        sending += w[r].op == 's';
        receiving += w[r].op == 'r';
        if (w[r].op != 0 && first_tag < 0)
            first_tag = w[r].tag;
    }
    for (int r = 0; r < n; r++) {   /* a send and a receive that name each other, with different tags */
        const int p = w[r].peer;
        if (w[r].op == 'r' && p >= 0 && p < n && w[p].op == 's' && w[p].peer == r && w[p].tag != w[r].tag) {
            tutorial_note("Rank %d waits for rank %d's message with tag %d, and rank %d is sending it one with tag "
                          "%d:", r, p, w[r].tag, p, w[p].tag);
            tutorial_note("a receive takes only a send with the same tag, so these two never meet.  Both sides of");
            tutorial_note("step s use tag s (blank 3).");
            return;
        }
    }
    for (int r = 0; r < n; r++) {   /* a receive from a rank that sends elsewhere at the same step */
        const int p = w[r].peer;
        if (w[r].op == 'r' && p >= 0 && p < n && w[p].op == 's' && w[p].peer != r && w[p].tag == w[r].tag) {
            tutorial_note("Rank %d waits to receive from rank %d, but rank %d is sending to rank %d: `from` must be",
                          r, p, p, w[p].peer);
            tutorial_note("the rank whose `to` is you at this step, (r - s) mod N (blank 2).");
            return;
        }
    }
    char cycle[128];
    const int c = send_cycle(w, n, cycle, sizeof cycle);
    if (sending == n) {
        tutorial_note("Every rank waits in its send (step %d).  A blocking send waits until its receive has",
                      first_tag);
        tutorial_note("taken the message, so some ranks must receive first (blank 3).  Which ones?");
    } else if (receiving == n) {
        tutorial_note("Every rank waits in its receive (step %d): nobody sends first (blank 3).", first_tag);
    } else if (c >= 0) {
        const int s = w[c].tag;
        tutorial_note("At step %d ranks send to (r + %d) mod %d, and %s is a cycle of ranks that all sent first:",
                      s, s, n, cycle);
        tutorial_note("each waits for a receive the next never posts.  Lesson 01's even/odd rule (or \"rank 0");
        tutorial_note("alone receives first\") breaks a shift by 1, whose one cycle is the whole ring, not every");
        tutorial_note("shift: which rank of each cycle can always receive first?  The one whose `from` lies");
        tutorial_note("across the ring's end (blank 3).");
    } else if (sending > 0) {
        const int s = first_tag;
        tutorial_note("At step %d ranks send to (r + %d) mod %d: follow one cycle, 0 -> %d -> %d -> ..., back to 0.",
                      s, s, n, s % n, (2 * s) % n);
        tutorial_note("If every rank of a cycle sends first, none of them can move.  Lesson 01's even/odd");
        tutorial_note("rule breaks a shift by 1, not every shift: which rank of each cycle can always");
        tutorial_note("receive first?  The one whose `from` lies across the ring's end (blank 3).");
    }
}

static bool check_all_to_all(void)
{
    static const size_t blocks[] = { 0, 1, 7 };
    for (int n = 1; n <= MAX_N; n++)
        for (size_t k = 0; k < sizeof blocks / sizeof blocks[0]; k++) {
            char what[64];
            snprintf(what, sizeof what, "your all-to-all on %d device%s, blocks of %zu", n, n > 1 ? "s" : "",
                     blocks[k]);
            a2a_case c = { blocks[k] };
            ptdp_launch_result res;
            ptdp_launch_opts opts = { .result = &res };
            int rc = tutorial_launch_opts(what, n, a2a_device, &c, &opts);
            if (rc == PTDP_ETIMEDOUT)
                explain_stuck(res.message, n);
            ptdp_launch_result_free(&res);
            if (rc != 0)
                return false;
        }
    tutorial_ok("the all-to-all, 1 to %d devices: every block where ptdp_all_to_all puts it, N-1 blocks "
                "sent per rank", MAX_N);
    return true;
}

/* ============================================ blanks 4-7: Ulysses */

static ptdp_real at(int t, int h, int d)
{
    return (ptdp_real)(1000 * t + 10 * h + d);
}

/* Which blank chooses the heads and which the positions, and how.  On the
 * way there the pack picks the columns (rank j's heads) and the unpack the
 * rows (rank i's positions); on the way back the other way round.  The
 * pack is judged first, from `packed` (the first half of the scratch the
 * check lends): a pack that is right clears its blank, so a value in the
 * wrong place is the unpack's. */
typedef struct {
    const char *fn;
    int pack_blank, unpack_blank;
    bool pack_picks_heads;               /* block j = rank j's heads (there), or rank j's positions (back) */
    const char *pack_rule, *pack_keeps, *unpack_rule;
} relayout;

static const relayout THERE = { "heads_from_sequence", 4, 5, true,
                                "packs, for rank j, the columns of rank j's heads",
                                "packs your Tl rows (positions r T/N ..) into every block",
                                "puts block i at rows i T/N .. (rank i's positions)" };
static const relayout BACK = { "sequence_from_heads", 6, 7, false,
                               "packs, for rank j, the rows of rank j's positions",
                               "packs your heads' Wl columns into every block: rows of Wl reals, block j from "
                               "x + j Tl Wl",
                               "puts block i at columns i (nh/N) hd .. (rank i's heads)" };

/* Block j of rank r's pack, row t, column k: there, position r Tl + t of
 * rank j's head; back, position j Tl + t of rank r's head. */
static ptdp_real packed_value(const relayout *w, int n, int r, int j, int t, int k)
{
    const int Tl = T / n, hl = NH / n;
    return w->pack_picks_heads ? at(r * Tl + t, j * hl + k / HD, k % HD) : at(j * Tl + t, r * hl + k / HD, k % HD);
}

/* Is rank r's pack right?  If not, say so, naming the pack's blank. */
static int check_pack(ptdp_device *dev, const relayout *w, const ptdp_real *packed)
{
    const int n = dev->world_size, r = dev->rank, Tl = T / n, Wl = W / n;
    for (int j = 0; j < n; j++)
        for (int t = 0; t < Tl; t++)
            for (int k = 0; k < Wl; k++) {
                const ptdp_real got = packed[((size_t)j * Tl + t) * Wl + k], want = packed_value(w, n, r, j, t, k);
                if (got == want)
                    continue;
                const int gt = (int)got / 1000, gh = ((int)got % 1000) / 10;
                const int wt = (int)want / 1000, wh = ((int)want % 1000) / 10;
                const bool head_of_block = (gh != wh) == w->pack_picks_heads;   /* what the block picks is wrong */
                if (got == UNWRITTEN)
                    return tutorial_device_wrong(dev, "%s on %d device%s: rank %d's pack, block %d (for rank %d), "
                                                 "row %d was never written\nblank %d %s", w->fn, n, plural(n), r, j,
                                                 j, t, w->pack_blank, w->pack_rule);
                if (gh != wh)
                    return tutorial_device_wrong(dev, "%s on %d device%s: rank %d's pack, block %d (for rank %d), "
                                                 "has head %d where head %d belongs (position %d)\nblank %d %s",
                                                 w->fn, n, plural(n), r, j, j, gh, wh, wt, w->pack_blank,
                                                 head_of_block ? w->pack_rule : w->pack_keeps);
                return tutorial_device_wrong(dev, "%s on %d device%s: rank %d's pack, block %d (for rank %d), has "
                                             "position %d where position %d belongs (head %d)\nblank %d %s", w->fn,
                                             n, plural(n), r, j, j, gt, wt, wh, w->pack_blank,
                                             head_of_block ? w->pack_rule : w->pack_keeps);
            }
    return 0;
}

/* The value at position t, head h, column d is wrong and the pack was
 * right: the unpack put it there. */
static int explain_place(ptdp_device *dev, const relayout *w, int t, int h, int d, ptdp_real got)
{
    const int gt = (int)got / 1000, gh = ((int)got % 1000) / 10, n = dev->world_size;
    if (got == UNWRITTEN)
        return tutorial_device_wrong(dev, "%s on %d device%s: rank %d never wrote position %d of head %d\nyour pack "
                                     "is right; blank %d %s", w->fn, n, plural(n), dev->rank, t, h, w->unpack_blank,
                                     w->unpack_rule);
    if (gh != h)
        return tutorial_device_wrong(dev, "%s on %d device%s: rank %d has head %d where head %d belongs (position "
                                     "%d)\nyour pack is right; blank %d %s", w->fn, n, plural(n), dev->rank, gh, h, t,
                                     w->unpack_blank, w->unpack_rule);
    if (gt != t)
        return tutorial_device_wrong(dev, "%s on %d device%s: rank %d has position %d where position %d belongs "
                                     "(head %d)\nyour pack is right; blank %d %s", w->fn, n, plural(n), dev->rank, gt,
                                     t, h, w->unpack_blank, w->unpack_rule);
    return tutorial_device_wrong(dev, "%s: rank %d, position %d head %d column %d = %g, expected %g", w->fn,
                                 dev->rank, t, h, d, (double)got, (double)at(t, h, d));
}

static void unwritten(ptdp_real *v, size_t len)
{
    for (size_t k = 0; k < len; k++)
        v[k] = UNWRITTEN;
}

static int ulysses_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    const int n = dev->world_size, r = dev->rank, Tl = T / n, hl = NH / n, Wl = W / n;
    ptdp_real x[T * W], out[T * W], back[T * W], scratch[2 * T * W];
    for (int t = 0; t < Tl; t++)          /* my positions, every head */
        for (int h = 0; h < NH; h++)
            for (int d = 0; d < HD; d++)
                x[t * W + h * HD + d] = at(r * Tl + t, h, d);
    unwritten(out, T * W);
    unwritten(back, T * W);
    unwritten(scratch, 2 * T * W);
    double before = dev->stats.bytes_sent[PTDP_COLL_ALL_TO_ALL];
    int rc = lesson_heads_from_sequence(dev->world, x, out, T, NH, HD, scratch);
    for (int t = 0; rc == 0 && t < T; t++)
        for (int k = 0; k < Wl; k++)
            if (out[t * Wl + k] != at(t, r * hl + k / HD, k % HD)) {
                if ((rc = check_pack(dev, &THERE, scratch)) != 0)
                    return rc;
                return explain_place(dev, &THERE, t, r * hl + k / HD, k % HD, out[t * Wl + k]);
            }
    /* The way back starts from the right layout, so its blanks are judged
     * on their own. */
    for (int t = 0; rc == 0 && t < T; t++)
        for (int k = 0; k < Wl; k++)
            out[t * Wl + k] = at(t, r * hl + k / HD, k % HD);
    unwritten(scratch, 2 * T * W);
    if (rc == 0)
        rc = lesson_sequence_from_heads(dev->world, out, back, T, NH, HD, scratch);
    for (int t = 0; rc == 0 && t < Tl; t++)
        for (int k = 0; k < W; k++)
            if (back[t * W + k] != x[t * W + k]) {
                if ((rc = check_pack(dev, &BACK, scratch)) != 0)
                    return rc;
                return explain_place(dev, &BACK, r * Tl + t, k / HD, k % HD, back[t * W + k]);
            }
    double sent = dev->stats.bytes_sent[PTDP_COLL_ALL_TO_ALL] - before;
    double want = 2.0 * (n - 1) * Tl * Wl * sizeof(ptdp_real);
    if (rc == 0 && sent != want)
        return tutorial_device_wrong(dev, "rank %d's two all-to-alls sent %.0f bytes, expected 2 (N-1) (T/N)(C/N) "
                                     "reals = %.0f", r, sent, want);
    return rc;
}

static bool check_ulysses(void)
{
    for (int n = 1; n <= 4; n++) {
        char what[64];
        snprintf(what, sizeof what, "Ulysses' re-layouts on %d device%s", n, n > 1 ? "s" : "");
        if (tutorial_launch(what, n, ulysses_device, NULL) != 0)
            return false;
    }
    tutorial_ok("Ulysses, 1 to 4 devices: [T/N positions, all heads] to [T positions, nh/N heads] and back");
    tutorial_note("per block a rank sends 4 such all-to-alls (q, k, v, and attention's output back), each "
                  "(N-1)/N of its T/N x C: 4(N-1)/N^2 T C; ring attention sends its K and V (T/N x C each) "
                  "N-1 times: 2(N-1)/N T C.  At N = 4: 0.75 T C against 1.5 T C");
    return true;
}

int main(void)
{
    tutorial_begin("13", "all-to-all: the pairwise exchange, and Ulysses' head split");
    bool ok = check_all_to_all();
    if (ok)
        ok = check_ulysses();
    return tutorial_end();
}
