/*
 * exercise.c — lesson 04: pipeline schedules as lists of actions.
 *
 * Replace each PTDP_BLANK(...) line with your code, then run the check:
 *     meson setup build-student -Dexercises=student      (once)
 *     meson test -C build-student --suite tutorial-04 -v
 * README.md explains the idea; solution.c is the answer (try first).
 *
 * The L blocks of the model are cut into p stages, one per device.  A step's
 * batch is cut into m micro-batches that flow forward through the stages
 * and whose gradients flow back.  A schedule says, for every stage, in which
 * order to do what; p = 4, m = 4, a forward F takes 1, a backward B takes 2:
 *
 *   GPipe
 *   stage 0 |F0F1F2F3..................B3<<B2<<B1<<B0<<|
 *   stage 1 |..F0F1F2F3............B3<<B2<<B1<<B0<<....|
 *   stage 2 |....F0F1F2F3......B3<<B2<<B1<<B0<<........|
 *   stage 3 |......F0F1F2F3B3<<B2<<B1<<B0<<............|
 *   1F1B
 *   stage 0 |F0F1F2F3............B0<<..B1<<..B2<<..B3<<|
 *   stage 1 |..F0F1F2........B0<<F3B1<<..B2<<..B3<<....|
 *   stage 2 |....F0F1....B0<<F2B1<<F3B2<<..B3<<........|
 *   stage 3 |......F0B0<<F1B1<<F2B2<<F3B3<<............|
 *                                    (ptdp schedule --pp 4 --micro-batches 4 --schedule gpipe, then 1f1b)
 *
 * Both leave every stage idle (the dots, "the bubble") for p - 1 forwards
 * and p - 1 backwards out of m + p - 1 of each:
 *
 *   bubble = (p - 1) / (m + p - 1)
 *
 * 1F1B wins on memory: a stage keeps a micro-batch's activations from its
 * forward to its backward; GPipe keeps all m at once, 1F1B at most p - s
 * on stage s.
 *
 * A list is made of seven actions (schedule.h):
 *   FORWARD(k), BACKWARD(k)            compute, on this stage
 *   RECV_FORWARD(k)  <- stage s - 1    k's input activation
 *   SEND_FORWARD(k)  -> stage s + 1    k's output activation
 *   RECV_BACKWARD(k) <- stage s + 1    the gradient of k's output
 *   SEND_BACKWARD(k) -> stage s - 1    the gradient of k's input
 *   OPTIMIZER_STEP                     once, last
 * ptdp_schedule_push(s, stage, kind, k) appends one; the peer stage follows
 * from the kind.  Stage 0 has no one to receive activations from (it reads
 * the data) and the last stage no one to send them to (it computes the loss).
 */
#include "blank.h"
#include "lesson.h"

#include <stdbool.h>

#include "ptdp/error.h"

/* ------------------------------------------------------------------ GPipe */

int lesson_gpipe(ptdp_schedule *s)
{
    const int p = s->pp, m = s->micro_batches;
    for (int st = 0; st < p; st++) {
        const bool first = st == 0, last = st == p - 1;

        /* Blank 1: all m forwards, micro-batch 0 first.  For each: receive
         * its input activation (unless this stage reads the data), run the
         * forward, send the output on (unless this stage computes the loss).
         * One ptdp_schedule_push per action. */
        PTDP_BLANK(1, "stage st's forwards: receive, forward, send, for mb = 0 .. m-1");

        /* Blank 2: all m backwards, the last micro-batch first (a stack:
         * the last stage starts with the one it has just forwarded; 0 first
         * works too, with the same bubble, memory and gradient, as long as
         * every stage uses the same order — README.md says why).  For
         * each: receive the gradient of its output (unless this stage
         * computes the loss), run the backward, send the gradient of its
         * input back (unless this stage reads the data). */
        PTDP_BLANK(2, "stage st's backwards: receive, backward, send, for mb = m-1 .. 0");

        ptdp_schedule_push(s, st, PTDP_ACT_OPTIMIZER_STEP, -1);
    }
    return PTDP_OK;
}

/* ------------------------------------------------------------------- 1F1B */

static int exchange(ptdp_schedule *s, int st, ptdp_action_kind send, int send_mb,
                    ptdp_action_kind recv, int recv_mb);

int lesson_1f1b(ptdp_schedule *s)
{
    const int p = s->pp, m = s->micro_batches;
    int rc = PTDP_OK;
    for (int st = 0; st < p && rc == 0; st++) {
        const bool first = st == 0, last = st == p - 1;

        /* Blank 3: the warm-up.  Before its first backward, stage st runs
         * enough forwards to fill the pipe below it, so that the gradient
         * of micro-batch 0 comes back just as the warm-up ends.  How many
         * forwards does that take on stage st of p?  The last stage needs
         * none, and there are only m micro-batches. */
        int warmup;
        PTDP_BLANK(3, "set warmup: the forwards stage st runs before its first backward");
        const int steady = m - warmup;

        for (int mb = 0; mb < warmup; mb++) {
            if (!first)
                ptdp_schedule_push(s, st, PTDP_ACT_RECV_FORWARD, mb);
            ptdp_schedule_push(s, st, PTDP_ACT_FORWARD, mb);
            if (!last)
                ptdp_schedule_push(s, st, PTDP_ACT_SEND_FORWARD, mb);
        }
        if (steady > 0 && !first)
            ptdp_schedule_push(s, st, PTDP_ACT_RECV_FORWARD, warmup);

        /* Steady state: one forward (f), one backward (b). */
        for (int k = 0; k < steady && rc == 0; k++) {
            const int f = warmup + k, b = k;
            /* Blank 4: iteration k forwards f and backwards b.  f's input
             * activation has been received already (before the loop, or at
             * the end of the previous iteration):
             *
             *   FORWARD f
             *   exchange: send f's output on, receive b's output gradient
             *                                        (not on the last stage)
             *   BACKWARD b
             *   exchange: send b's input gradient back, receive f+1's input
             *                                        (not on the first stage;
             *              on the last iteration there is no f+1: just send)
             *
             * Write each exchange as a call to exchange(…) below, and stop
             * if it returns an error (rc != 0). */
            PTDP_BLANK(4, "one forward and one backward, with their two exchanges");
        }

        /* Cool-down: the backwards of the warm-up's micro-batches. */
        for (int b = steady; b < m && rc == 0; b++) {
            if (!last)
                ptdp_schedule_push(s, st, PTDP_ACT_RECV_BACKWARD, b);
            ptdp_schedule_push(s, st, PTDP_ACT_BACKWARD, b);
            if (!first)
                ptdp_schedule_push(s, st, PTDP_ACT_SEND_BACKWARD, b);
        }
        ptdp_schedule_push(s, st, PTDP_ACT_OPTIMIZER_STEP, -1);
    }
    return rc;
}

/* A send and a receive with the same neighbour, back to back.  In the
 * steady state both neighbours want to exchange at the same moment:
 *
 *     stage i  :  F5 | send F5 -> i+1 | recv B2 <- i+1 | B2
 *     stage i+1:  B2 | send B2 -> i   | recv F5 <- i   | F5
 *
 * A blocking send returns only once its receive is posted.  Written like
 * that, both send first and each waits for the other: a deadlock.  Which
 * stages should send first and which receive first, so that the two first
 * calls always meet — on every pair of neighbours at once? */
static int exchange(ptdp_schedule *s, int st, ptdp_action_kind send, int send_mb,
                    ptdp_action_kind recv, int recv_mb)
{
    /* Blank 5: push the send (kind `send`, micro-batch send_mb) and the
     * receive (`recv`, recv_mb) in an order that cannot deadlock.  The
     * neighbour runs its own exchange with you at the same moment. */
    PTDP_BLANK(5, "push the send and the receive, in a deadlock-free order");
}
