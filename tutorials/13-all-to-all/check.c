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
 * value in the wrong place names the blank that put it there.
 */
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

/* Why is element e of block i (from rank i) of rank me's recv wrong? */
static int explain_block(ptdp_device *dev, int i, size_t e, ptdp_real got, size_t block)
{
    const int me = dev->rank, src = (int)got / 1000, dst = ((int)got % 1000) / 10;
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
    return tutorial_device_wrong(dev, "rank %d: element %zu of block %d = %g, expected %g (%zu reals a block)",
                                 me, e, i, (double)got, (double)a2a_value(i, me, e), block);
}

typedef struct {
    size_t block;
} a2a_case;

static int a2a_device(ptdp_device *dev, void *arg)
{
    const size_t b = ((const a2a_case *)arg)->block, n = (size_t)dev->world_size;
    ptdp_real send[MAX_N * 7], mine[MAX_N * 7], lib[MAX_N * 7];
    for (size_t j = 0; j < n; j++)
        for (size_t e = 0; e < b; e++)
            send[j * b + e] = a2a_value(dev->rank, (int)j, e);
    for (size_t k = 0; k < n * b; k++)
        mine[k] = lib[k] = UNWRITTEN;
    double before = dev->stats.bytes_sent[PTDP_COLL_SEND];
    int rc = lesson_all_to_all(dev->world, send, mine, b);
    if (rc != 0)
        return rc;
    double sent = dev->stats.bytes_sent[PTDP_COLL_SEND] - before;
    if ((rc = ptdp_all_to_all(dev->world, send, lib, b, PTDP_REAL)) != 0)
        return rc;
    for (size_t i = 0; i < n; i++)
        for (size_t e = 0; e < b; e++)
            if (mine[i * b + e] != lib[i * b + e])
                return explain_block(dev, (int)i, e, mine[i * b + e], b);
    double want = (double)((n - 1) * b * sizeof(ptdp_real));
    if (sent != want)
        return tutorial_device_wrong(dev, "rank %d sent %.0f bytes; an all-to-all sends N-1 = %zu blocks of %zu "
                                     "bytes = %.0f (your own block stays)", dev->rank, sent, n - 1,
                                     b * sizeof(ptdp_real), want);
    return 0;
}

/* The hint under a STUCK verdict: who waited for whom, in words. */
static void explain_stuck(const char *report, int n)
{
    tutorial_wait w[PTDP_MAX_DEVICES];
    tutorial_read_waits(report, n, w);
    int s = -1, sending = 0, receiving = 0;
    for (int r = 0; r < n; r++) {
        sending += w[r].op == 's';
        receiving += w[r].op == 'r';
        if (w[r].op != 0 && s < 0)
            s = w[r].tag;
    }
    for (int r = 0; r < n; r++) {
        int p = w[r].peer;
        if (w[r].op == 'r' && p >= 0 && p < n && w[p].op == 's' && w[p].peer != r) {
            tutorial_note("Rank %d waits to receive from rank %d, but rank %d is sending to rank %d: `from` must be",
                          r, p, p, w[p].peer);
            tutorial_note("the rank whose `to` is you at this step, (r - s) mod N (blank 2).");
            return;
        }
    }
    if (sending == n) {
        tutorial_note("Every rank waits in its send (step %d).  A blocking send waits until its receive has", s);
        tutorial_note("taken the message, so some ranks must receive first (blank 3).  Which ones?");
    } else if (receiving == n) {
        tutorial_note("Every rank waits in its receive (step %d): nobody sends first (blank 3).", s);
    } else if (sending > 0) {
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
 * rows (rank i's positions); on the way back the other way round. */
typedef struct {
    const char *fn;
    int heads_blank, rows_blank;
    const char *heads_rule, *rows_rule;
} relayout;

static const relayout THERE = { "heads_from_sequence", 4, 5, "packs, for rank j, the columns of rank j's heads",
                                "puts block i at rows i T/N .. (rank i's positions)" };
static const relayout BACK = { "sequence_from_heads", 7, 6, "puts block i at columns i (nh/N) hd .. (rank i's heads)",
                               "packs, for rank j, the rows of rank j's positions" };

/* Is got, at position t, head h, column d, the right value?  If not, say
 * which blank put it there. */
static int explain_place(ptdp_device *dev, const relayout *w, int t, int h, int d, ptdp_real got)
{
    const int gt = (int)got / 1000, gh = ((int)got % 1000) / 10;
    if (got == UNWRITTEN) {   /* the unpack's blank: rows on the way there, columns back */
        const bool there = w->rows_blank == 5;
        return tutorial_device_wrong(dev, "%s on %d device%s: rank %d never wrote position %d of head %d\n"
                                     "blank %d %s", w->fn, dev->world_size, plural(dev->world_size), dev->rank,
                                     t, h, there ? w->rows_blank : w->heads_blank,
                                     there ? w->rows_rule : w->heads_rule);
    }
    if (gh != h)
        return tutorial_device_wrong(dev, "%s on %d device%s: rank %d has head %d where head %d belongs "
                                     "(position %d)\nblank %d %s", w->fn, dev->world_size, plural(dev->world_size),
                                     dev->rank, gh, h, t, w->heads_blank, w->heads_rule);
    if (gt != t)
        return tutorial_device_wrong(dev, "%s on %d device%s: rank %d has position %d where position %d "
                                     "belongs (head %d)\nblank %d %s", w->fn, dev->world_size,
                                     plural(dev->world_size), dev->rank, gt, t, h, w->rows_blank, w->rows_rule);
    return tutorial_device_wrong(dev, "%s: rank %d, position %d head %d column %d = %g, expected %g", w->fn,
                                 dev->rank, t, h, d, (double)got, (double)at(t, h, d));
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
    for (int k = 0; k < T * W; k++)
        out[k] = back[k] = UNWRITTEN;
    double before = dev->stats.bytes_sent[PTDP_COLL_ALL_TO_ALL];
    int rc = lesson_heads_from_sequence(dev->world, x, out, T, NH, HD, scratch);
    for (int t = 0; rc == 0 && t < T; t++)
        for (int k = 0; k < Wl; k++)
            if (out[t * Wl + k] != at(t, r * hl + k / HD, k % HD))
                return explain_place(dev, &THERE, t, r * hl + k / HD, k % HD, out[t * Wl + k]);
    /* The way back starts from the right layout, so its blanks are judged
     * on their own. */
    for (int t = 0; rc == 0 && t < T; t++)
        for (int k = 0; k < Wl; k++)
            out[t * Wl + k] = at(t, r * hl + k / HD, k % HD);
    if (rc == 0)
        rc = lesson_sequence_from_heads(dev->world, out, back, T, NH, HD, scratch);
    for (int t = 0; rc == 0 && t < Tl; t++)
        for (int k = 0; k < W; k++)
            if (back[t * W + k] != x[t * W + k])
                return explain_place(dev, &BACK, r * Tl + t, k / HD, k % HD, back[t * W + k]);
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
