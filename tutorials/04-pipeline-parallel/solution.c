/*
 * solution.c — lesson 04: pipeline schedules as lists of actions.
 *
 * The answer to exercise.c (try that first).  The library splits the same
 * work in two: its generators (src/parallel/schedule.c) list the compute
 * only, and src/parallel/schedule_comms.c adds the sends and receives by
 * the rule of exchange() below.
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
#include "lesson.h"

#include <stdbool.h>

#include "ptdp/error.h"

/* ------------------------------------------------------------------ GPipe */

int lesson_gpipe(ptdp_schedule *s)
{
    const int p = s->pp, m = s->micro_batches;
    for (int st = 0; st < p; st++) {
        const bool first = st == 0, last = st == p - 1;

        /* All forwards, in order: receive the input, run, pass it on. */
        for (int mb = 0; mb < m; mb++) {
            if (!first)
                ptdp_schedule_push(s, st, PTDP_ACT_RECV_FORWARD, mb);
            ptdp_schedule_push(s, st, PTDP_ACT_FORWARD, mb);
            if (!last)
                ptdp_schedule_push(s, st, PTDP_ACT_SEND_FORWARD, mb);
        }
        /* All backwards, last micro-batch first (a stack: the last stage
         * starts with the one it has just forwarded).  0 first would do as
         * well — same bubble, memory and gradient — as long as every stage
         * uses the same order (README.md). */
        for (int mb = m - 1; mb >= 0; mb--) {
            if (!last)
                ptdp_schedule_push(s, st, PTDP_ACT_RECV_BACKWARD, mb);
            ptdp_schedule_push(s, st, PTDP_ACT_BACKWARD, mb);
            if (!first)
                ptdp_schedule_push(s, st, PTDP_ACT_SEND_BACKWARD, mb);
        }
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

        /* Warm-up: enough forwards to fill the pipe below this stage, so
         * that the gradient of micro-batch 0 comes back just as the warm-up
         * ends.  The last stage needs none; never more than m. */
        int warmup = p - st - 1 < m ? p - st - 1 : m;
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
            ptdp_schedule_push(s, st, PTDP_ACT_FORWARD, f);
            if (!last)
                rc = exchange(s, st, PTDP_ACT_SEND_FORWARD, f, PTDP_ACT_RECV_BACKWARD, b);
            if (rc != 0)
                break;
            ptdp_schedule_push(s, st, PTDP_ACT_BACKWARD, b);
            if (first)
                continue;
            if (k == steady - 1)   /* no forward left to receive */
                ptdp_schedule_push(s, st, PTDP_ACT_SEND_BACKWARD, b);
            else
                rc = exchange(s, st, PTDP_ACT_SEND_BACKWARD, b, PTDP_ACT_RECV_FORWARD, f + 1);
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
 * A blocking send returns only once its receive is posted; if both send
 * first, each waits for the other: a deadlock.  Neighbours differ in
 * parity, so "even stages send first, odd stages receive first" pairs the
 * two first calls, then the two second calls. */
static int exchange(ptdp_schedule *s, int st, ptdp_action_kind send, int send_mb,
                    ptdp_action_kind recv, int recv_mb)
{
    if (st % 2 == 0) {
        ptdp_schedule_push(s, st, send, send_mb);
        ptdp_schedule_push(s, st, recv, recv_mb);
    } else {
        ptdp_schedule_push(s, st, recv, recv_mb);
        ptdp_schedule_push(s, st, send, send_mb);
    }
    return PTDP_OK;
}
