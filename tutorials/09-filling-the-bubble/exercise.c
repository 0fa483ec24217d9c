/*
 * exercise.c — lesson 09: filling the bubble (interleaved 1F1B's chunks,
 * ZB-H1's deferred weight gradients, DualPipeV's V and DualPipe's two
 * copies).
 *
 * Replace each PTDP_BLANK(...) line with your code, then run the check:
 *     meson setup build-student -Dexercises=student      (once)
 *     meson test -C build-student --suite tutorial-09 -v
 * README.md explains the idea; solution.c is the answer (try first).
 * lesson_zb_h1 (1F1B's warm-up, steady state and cool-down: the worked
 * example), the loops of lesson_interleaved and DualPipeV's eight phases
 * (lesson_dualpipev) are done for you.
 *
 * 1F1B idles (p - 1)(t_f + t_b) per stage while the pipe fills and drains.
 * Two ways to shrink that with the same p and m:
 *
 *   Interleaved 1F1B (Megatron-LM): cut the model into p v pieces and give
 *   stage s the pieces s, s + p, s + 2p, … (its v "chunks").  A forward or
 *   backward through one chunk is 1/v of a stage's, so the fill and drain
 *   cost 1/v as much:      bubble = (p - 1) / (v m + p - 1)
 *
 *     piece:  0 1 2 3 | 4 5 6 7       p = 4, v = 2: micro-batches go round
 *     stage:  0 1 2 3 | 0 1 2 3       the ring of stages twice
 *     chunk:  0 0 0 0 | 1 1 1 1
 *
 *   ZB-H1 (Qi et al. 2024): split each backward into B (the gradient of the
 *   stage's input — the stage before waits for it) and W (the gradients of
 *   its weights — nobody waits for it) and run the W passes where 1F1B
 *   idles.  With F = B = W:  bubble = (p - 1) / (3m + p - 1)
 *
 *   DualPipeV (DeepSeek 2025): ZB-H1's bubble on half the devices — the
 *   model in 2p stages laid out as a V, device r holding stages r and
 *   2p - 1 - r, one micro-batch's forward overlapped with another's
 *   backward (blank 5: how often each of its eight phases repeats).
 *
 *   DualPipe (DeepSeek-V3): the same bubble on p devices holding the model
 *   twice, one copy per direction; device r and its mirror p - 1 - r hold
 *   the same two stages, and sum their gradients before the step (blank 6).
 *
 * The generators list the compute only.  The check then calls
 * ptdp_schedule_place_comms(s, PTDP_PLACE_BY_SEND_TIME, …), as the library
 * does for its own, which places every send and receive so that blocking
 * rendezvous send/recv cannot deadlock, and the optimizer step.
 */
#include <stdbool.h>

#include "blank.h"
#include "lesson.h"

#include "ptdp/comm.h"
#include "ptdp/error.h"

/* -------------------------------------------- interleaved: which chunk */

int lesson_interleaved_forward(int p, int v, int k, int *chunk, int *mb)
{
    /* Blank 1: the k-th forward.  Megatron's order takes micro-batches in
     * groups of p: the group's p micro-batches through chunk 0, the same p
     * through chunk 1, …, through chunk v - 1, then the next group of p.
     * p = 2, v = 2:   k   0   1   2   3   4   5   6   7
     *                    F0.0 F1.0 F0.1 F1.1 F2.0 F3.0 F2.1 F3.1   (Fmb.chunk) */
    PTDP_BLANK(1, "the k-th forward: set *chunk and *mb (groups of p micro-batches, chunk by chunk)");
}

int lesson_interleaved_backward(int p, int v, int k, int *chunk, int *mb)
{
    /* Blank 2: the k-th backward: the same micro-batches in the same
     * order as the forwards, but a gradient flows from the model's last
     * piece to its first. */
    PTDP_BLANK(2, "the k-th backward: set *chunk and *mb (the chunks the other way)");
}

/* One compute action: the stage's k-th forward or backward. */
static int push_forward(ptdp_schedule *s, int st, int k)
{
    int chunk = 0, mb = 0;
    int rc = lesson_interleaved_forward(s->pp, s->virtual_stages, k, &chunk, &mb);
    if (rc == PTDP_OK)
        ptdp_schedule_push_chunk(s, st, PTDP_ACT_FORWARD, mb, chunk);
    return rc;
}

static int push_backward(ptdp_schedule *s, int st, int k)
{
    int chunk = 0, mb = 0;
    int rc = lesson_interleaved_backward(s->pp, s->virtual_stages, k, &chunk, &mb);
    if (rc == PTDP_OK)
        ptdp_schedule_push_chunk(s, st, PTDP_ACT_BACKWARD, mb, chunk);
    return rc;
}

int lesson_interleaved(ptdp_schedule *s)
{
    const int p = s->pp, v = s->virtual_stages, total = s->micro_batches * v;
    int rc = PTDP_OK;
    for (int st = 0; st < p && rc == PTDP_OK; st++) {
        /* Blank 3: the warm-up, the forwards stage st runs before its
         * first backward.  1F1B's is p - st - 1 (see lesson_zb_h1 below).
         * Here the first backward is micro-batch 0 through the stage's
         * LAST chunk: which forward number k is micro-batch 0 through
         * chunk v - 1?  Megatron-LM then adds 2 (p - st - 1): twice
         * 1F1B's fill.  A stage runs only m v forwards in all. */
        int warmup;
        PTDP_BLANK(3, "set warmup: the forwards stage st runs before its first backward");

        for (int k = 0; k < warmup && rc == PTDP_OK; k++)            /* warm-up */
            rc = push_forward(s, st, k);
        for (int k = 0; k < total - warmup && rc == PTDP_OK; k++) {   /* steady: 1F1B */
            rc = push_forward(s, st, warmup + k);
            if (rc == PTDP_OK)
                rc = push_backward(s, st, k);
        }
        for (int k = total - warmup; k < total && rc == PTDP_OK; k++) /* cool-down */
            rc = push_backward(s, st, k);
    }
    return rc;
}

/* ------------------------------------------------- ZB-H1: where W goes */

typedef enum {
    AFTER_STEADY_B,     /* after a B of the steady state (one F, one B, …)  */
    AFTER_COOLDOWN_B,   /* after a B of the cool-down (no forwards left)     */
    AT_THE_END,         /* after the stage's last B                         */
} w_moment;

/* Push the W passes stage st runs now.  b: the micro-batch whose B has
 * just run (at AT_THE_END, m).  *next_w: the oldest W still owed (W passes
 * run oldest first); after B(b), b + 1 - *next_w are owed. */
static int place_w(ptdp_schedule *s, int st, w_moment when, int b, int *next_w)
{
    const int m = s->micro_batches;
    /* Blank 4: where the W passes go.
     *   steady state   keep st of them owed, run the oldest while more
     *                  are: stage st runs its last B while the gradient
     *                  still has st stages to go back, and the st W passes
     *                  it kept fill that time (stage 0 runs each W at once)
     *   cool-down      one W after each B, but not after the last B
     *   the end        every W still owed
     * One ptdp_schedule_push(s, st, PTDP_ACT_BACKWARD_WEIGHT, w) per W,
     * oldest first; a switch (when) { … } reads well. */
    PTDP_BLANK(4, "push the W passes stage st runs now: steady state, cool-down or the end");
}

/* 1F1B's order of F and B (the worked example: its warm-up, its steady
 * state, its cool-down), with every backward split in two. */
int lesson_zb_h1(ptdp_schedule *s)
{
    const int p = s->pp, m = s->micro_batches;
    int rc = PTDP_OK;
    for (int st = 0; st < p && rc == PTDP_OK; st++) {
        /* 1F1B's warm-up: fill the pipe below stage st, so that the
         * gradient of micro-batch 0 comes back just as it ends. */
        const int warmup = p - st - 1 < m ? p - st - 1 : m;
        int next_w = 0;
        for (int mb = 0; mb < warmup; mb++)
            ptdp_schedule_push(s, st, PTDP_ACT_FORWARD, mb);
        for (int k = 0; k < m - warmup && rc == PTDP_OK; k++) {      /* steady */
            ptdp_schedule_push(s, st, PTDP_ACT_FORWARD, warmup + k);
            ptdp_schedule_push(s, st, PTDP_ACT_BACKWARD_INPUT, k);
            rc = place_w(s, st, AFTER_STEADY_B, k, &next_w);
        }
        for (int b = m - warmup; b < m && rc == PTDP_OK; b++) {      /* cool-down */
            ptdp_schedule_push(s, st, PTDP_ACT_BACKWARD_INPUT, b);
            rc = place_w(s, st, AFTER_COOLDOWN_B, b, &next_w);
        }
        if (rc == PTDP_OK)
            rc = place_w(s, st, AT_THE_END, m, &next_w);
    }
    return rc;
}

/* ------------------------------------------- DualPipeV: the V's phases */

/*
 * DualPipeV (DeepSeek's DualPipe "cut in half"): p devices, the model cut
 * into 2p stages laid out as a V.  Device r holds stage r (its chunk 0)
 * and stage 2p - 1 - r (its chunk 1): a micro-batch goes down the devices
 * through the chunks 0, turns at the last device (which hands stage p - 1
 * to stage p itself) and comes back up through the chunks 1 to the loss on
 * device 0.
 *
 *   device 0   [ 0 ]                         [ 7 ]      p = 4
 *   device 1       [ 1 ]                 [ 6 ]
 *   device 2           [ 2 ]         [ 5 ]
 *   device 3               [ 3 ] [ 4 ]
 *
 * Device r runs eight phases (F0: a forward of chunk 0, B1 a backward of
 * chunk 1, B1' one whose W is deferred, "(F0 B1)" an overlapped pair —
 * one micro-batch's forward beside another's backward, each hiding the
 * other's communication):
 *
 *   1  F0                 fill: chunk 0's micro-batches run ahead
 *   2  F0 F1              both chunks start
 *   3  B1' W F1           the first gradients come back
 *   4  (F0 B1) (F1 B0)    the steady state: two pairs a round
 *   5  B1 (F1 B0)         chunk 0 has no forwards left
 *   6  B1 B0              the drain (its second half with W deferred)
 *   7  W B0'
 *   8  W                  the W passes still owed
 *
 * With F = B = W (a pair F + B) each device idles (p - 1)(F&B + B - 3W)
 * = 2(p - 1) of its 6m units of work: bubble = (p - 1) / (3m + p - 1).
 */
typedef struct {
    ptdp_schedule *s;
    int st;
    int f[2], b[2];    /* the next micro-batch each chunk forwards / backwards */
    int owed[1024];    /* the W queue (chunk * m + mb), oldest first          */
    int head, tail;
} v_device;

static void f(v_device *d, int c)
{
    ptdp_schedule_push_chunk(d->s, d->st, PTDP_ACT_FORWARD, d->f[c]++, c);
}

static void b(v_device *d, int c, bool defer_w)
{
    const int mb = d->b[c]++;
    ptdp_schedule_push_chunk(d->s, d->st, defer_w ? PTDP_ACT_BACKWARD_INPUT : PTDP_ACT_BACKWARD, mb, c);
    if (defer_w && d->tail < 1024)
        d->owed[d->tail++] = c * d->s->micro_batches + mb;
}

static void pair(v_device *d, int cf, int cb)
{
    f(d, cf);
    d->s->stage[d->st].actions[d->s->stage[d->st].count - 1].pair = 1;
    b(d, cb, false);
}

static void w(v_device *d)
{
    if (d->head == d->tail)
        return;         /* nothing owed: the check counts the W passes */
    const int x = d->owed[d->head++], m = d->s->micro_batches;
    ptdp_schedule_push_chunk(d->s, d->st, PTDP_ACT_BACKWARD_WEIGHT, x % m, x / m);
}

/* Device st's eight phases, each repeated n[k] times. */
static void v_phases(v_device *d, const int n[8])
{
    const int last = d->st == d->s->pp - 1;
    for (int i = 0; i < n[0]; i++)
        f(d, 0);
    for (int i = 0; i < n[1]; i++) {
        f(d, 0);
        f(d, 1);
    }
    for (int i = 0; i < n[2]; i++) {
        b(d, 1, true);
        w(d);
        f(d, 1);
    }
    for (int i = 0; i < n[3]; i++) {
        if (i == 0 && last) {   /* the tip's first: F0 needs no gradient, not overlapped */
            f(d, 0);
            b(d, 1, false);
        } else {
            pair(d, 0, 1);
        }
        pair(d, 1, 0);
    }
    for (int i = 0; i < n[4]; i++) {
        b(d, 1, false);
        pair(d, 1, 0);
    }
    for (int i = 0, defer = 0; i < n[5]; i++) {   /* the second half with W deferred */
        defer |= i == n[5] / 2 && d->st % 2 == 1;
        b(d, 1, defer);
        defer |= i == n[5] / 2 && d->st % 2 == 0;
        b(d, 0, defer);
    }
    for (int i = 0; i < n[6]; i++) {
        w(d);
        b(d, 0, true);
    }
    for (int i = 0; i < n[7]; i++)
        w(d);
}

int lesson_dualpipev(ptdp_schedule *s)
{
    for (int st = 0; st < s->pp; st++) {
        int n[8] = { 0 };
        int rc = lesson_dualpipev_phases(s->pp, st, s->micro_batches, n);
        if (rc != PTDP_OK)
            return rc;
        for (int k = 0; k < 8; k++)
            if (n[k] < 0 || n[k] > s->micro_batches)
                return PTDP_EINVAL;
        v_device d = { .s = s, .st = st };
        v_phases(&d, n);
    }
    return PTDP_OK;
}

/* Device r's eight phase counts. */
int lesson_dualpipev_phases(int p, int r, int m, int count[8])
{
    /* Blank 5: how many times device r repeats each phase (count[0] is
     * phase 1).  Write them with before = p - r - 1 (the devices below r)
     * and after = r + 1 (r and those above):
     *   - phase 1 fills chunk 0's pipe below r: a micro-batch crosses every
     *     device below twice, down through the chunks 0 and back up
     *     through the chunks 1, before its gradient can reach r;
     *   - phases 2, 6 and 8 repeat as often as each other, and so do
     *     phases 3, 5 and 7;
     *   - every chunk forwards and backwards each of the m micro-batches
     *     once: chunk 0's forwards run in phases 1, 2 and 4, so phase 4
     *     takes what is left of them.
     * The last device (before = 0) has no fill: its chunk 0 hands each
     * micro-batch straight to its chunk 1. */
    PTDP_BLANK(5, "set count[0..7]: how many times device r repeats each of the eight phases");
}

/* ------------------------------------ DualPipe: the two copies, summed */

/*
 * DualPipe (DeepSeek-V3): p devices (p even), the model cut into p stages
 * and held twice.  Device r holds stage r of the "down" copy (its chunk 0),
 * which micro-batches 0 .. m/2 - 1 run from device 0 down to p - 1, and
 * stage p - 1 - r of the "up" copy (its chunk 1), which m/2 .. m - 1 run
 * from device p - 1 up to 0 (the library's ptdp_schedule_dualpipe):
 *
 *   device:     0     1     2     3        mirrors: {0 3} {1 2}
 *   chunk 0   [ 0 ] [ 1 ] [ 2 ] [ 3 ]      the down copy's stages
 *   chunk 1   [ 3 ] [ 2 ] [ 1 ] [ 0 ]      the up copy's
 *
 * Stage s's two copies ran different micro-batches, so their gradients
 * differ: a_s (down, on device s) and b_s (up, on device p - 1 - s).  The
 * step needs a_s + b_s in both, so that both copies step alike and stay
 * equal: DP's all-reduce over two replicas, a sum as in DP (the loss
 * already divides by the whole batch).  Device r and its mirror p - 1 - r
 * hold the same two stages, crossed: r's chunk 0 is the mirror's chunk 1.
 */
int lesson_dualpipe_sum(ptdp_device *dev, ptdp_real *g[2], size_t n)
{
    const int p = dev->world_size, r = dev->rank;
    /* Blank 6: sum each of the device's two stages with its other copy.
     *   - the mirror: which device holds the other copies of stages r and
     *     p - 1 - r?  Cut the world into those pairs with ptdp_comm_split
     *     (devices of one color form one group);
     *   - an all-reduce adds the buffers the two devices pass in the same
     *     call, so both must pass the same stage: take the two stages in
     *     the model's order, the lower first.
     * ptdp_all_reduce(pair, x, x, n, PTDP_REAL, PTDP_SUM) sums x in place;
     * ptdp_comm_free(pair) when done. */
    PTDP_BLANK(6, "sum each of the device's two stages with its other copy, on the mirror device");
}
