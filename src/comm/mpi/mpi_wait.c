/*
 * mpi_wait.c — how a process device waits: poll against a deadline, and
 * answer the others' "what are you waiting in?".
 *
 * Every wait of the MPI backend starts non-blocking calls (MPI_Isend,
 * MPI_Iallgather, …) and polls them here, never a blocking MPI call, so a
 * wait can notice that it has lasted longer than the watchdog allows:
 *
 *   done? ─yes─► return 0
 *     │no
 *   poll: MPI_Test ── answer questions ── past the deadline? ── pause
 *         (spin for 2 ms first if every process has a core; then sleep in
 *          short slices so 8 processes on 2 cores leave each other time)
 *
 * The watchdog's report names what every rank is doing, as the threads
 * backend's does (runtime/wait.c).  Threads read each other's state from
 * shared memory; a process must ask.  Each waiting process answers
 * questions on a communicator of its own ("status"):
 *
 *   rank 2, past its deadline        rank 0, 1, 3 (waiting, or finished)
 *   ─────────────────────────        ──────────────────────────────────
 *   "?" to every rank        ──────► in their polling loop: reply
 *   collect the replies, 2 s ◄────── "waiting in recv from rank 1 tag 0 …"
 *   no reply: "running"               or "finished"
 *   report, fail: MPI_Abort
 *
 * A rank that is computing (not waiting) cannot answer: it is reported as
 * running, which is what it is doing.  A rank that has returned from its
 * device function waits for the others in ptdp_mpi_wait_finish, answering
 * "finished": the report then says who returned without the matching call.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "comm/mpi/mpi_backend.h"
#include "core/ranks.h"
#include "ptdp/clock.h"
#include "ptdp/error.h"
#include "ptdp/launch.h"

#define SPIN_SECONDS   2e-3       /* poll without pausing this long, if every
                                     process has a core: MPI's messages move
                                     only while someone polls               */
#define SLEEP_NS       20000L     /* a pause between polls once spinning ends */
#define ANSWER_WAIT_S  2.0        /* how long a report waits for the others   */

enum { TAG_ASK = 1, TAG_ANSWER = 2 };

static struct {
    MPI_Comm status;
    double watchdog_s;
    int spin;
    char doing[200];              /* my answer: "running", "waiting in …"   */
} W = { MPI_COMM_NULL, PTDP_DEFAULT_WATCHDOG_S, 0, "running" };

void ptdp_mpi_wait_setup(MPI_Comm status, double watchdog_s, int spin)
{
    W.status = status;
    W.watchdog_s = watchdog_s > 0 ? watchdog_s : PTDP_DEFAULT_WATCHDOG_S;
    W.spin = spin;
    snprintf(W.doing, sizeof W.doing, "running");
}

/* Answer every question that has arrived. */
static void answer_questions(void)
{
    if (W.status == MPI_COMM_NULL)
        return;
    for (;;) {
        int flag = 0, who;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_ASK, W.status, &flag, &st);
        if (!flag)
            return;
        MPI_Recv(&who, 1, MPI_INT, st.MPI_SOURCE, TAG_ASK, W.status, MPI_STATUS_IGNORE);
        /* Small: sent eagerly, so this never waits for the asker. */
        MPI_Send(W.doing, (int)sizeof W.doing, MPI_CHAR, st.MPI_SOURCE, TAG_ANSWER, W.status);
    }
}

static void pause_a_little(double waited)
{
    if (W.spin && waited < SPIN_SECONDS)
        return;
    struct timespec ts = { 0, waited < 10e-3 ? SLEEP_NS : 10 * SLEEP_NS };
    nanosleep(&ts, NULL);
}

/* Ask every other rank what it does; "rank 0: …; ranks 1-3: …". */
static void world_report(ptdp_device *dev, char *buf, size_t len)
{
    static char doing[PTDP_MAX_DEVICES][200];
    const char *text[PTDP_MAX_DEVICES];
    int n = dev->world_size, got = 0;
    for (int r = 0; r < n; r++) {
        snprintf(doing[r], sizeof doing[r], "running (no answer within %.0f s)", ANSWER_WAIT_S);
        text[r] = doing[r];
    }
    snprintf(doing[dev->rank], sizeof doing[dev->rank], "%s", W.doing);
    for (int r = 0; r < n; r++)
        if (r != dev->rank)
            MPI_Send(&dev->rank, 1, MPI_INT, r, TAG_ASK, W.status);
    double until = ptdp_wall_now() + ANSWER_WAIT_S;
    while (got < n - 1 && ptdp_wall_now() < until) {
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_ANSWER, W.status, &flag, &st);
        if (flag) {
            MPI_Recv(doing[st.MPI_SOURCE], (int)sizeof doing[0], MPI_CHAR, st.MPI_SOURCE, TAG_ANSWER,
                     W.status, MPI_STATUS_IGNORE);
            doing[st.MPI_SOURCE][sizeof doing[0] - 1] = '\0';
            got++;
        } else {
            answer_questions();          /* they may be asking us, too */
            pause_a_little(1.0);
        }
    }
    ptdp_describe_ranks(text, n, buf, len);
}

static int timed_out(ptdp_device *dev, const ptdp_wait_why *why, double waited)
{
    char report[PTDP_MSG_MAX], mine[192], msg[PTDP_MSG_MAX];
    world_report(dev, report, sizeof report);
    ptdp_wait_describe(why, mine, sizeof mine);
    int n = snprintf(msg, sizeof msg, "watchdog: rank %d waited %.1f s in %s; ", dev->rank, waited, mine);
    size_t used = n > 0 && (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
    size_t room = sizeof msg - 1 - used, len = strlen(report);
    memcpy(msg + used, report, len < room ? len : room);
    msg[used + (len < room ? len : room)] = '\0';
    return ptdp_world_fail(dev, PTDP_ETIMEDOUT, msg);   /* ends the job */
}

int ptdp_mpi_wait_until(ptdp_device *dev, bool (*ready)(void *), void *arg, const ptdp_wait_why *why)
{
    if (ready(arg))
        return 0;
    double start = ptdp_wall_now();
    ptdp_wait_describe(why, W.doing + 11, sizeof W.doing - 11);
    memcpy(W.doing, "waiting in ", 11);
    int rc = 0;
    for (unsigned i = 0;; i++) {
        if (ready(arg))
            break;
        double waited = ptdp_wall_now() - start;
        if ((i & 15) == 0)
            answer_questions();
        if (waited > W.watchdog_s) {
            rc = timed_out(dev, why, waited);
            break;
        }
        pause_a_little(waited);
    }
    snprintf(W.doing, sizeof W.doing, "running");
    return rc;
}

typedef struct {
    int n;
    MPI_Request *reqs;
} requests;

static bool all_done(void *arg)
{
    requests *q = arg;
    int flag = 0;
    MPI_Testall(q->n, q->reqs, &flag, MPI_STATUSES_IGNORE);
    return flag != 0;
}

int ptdp_mpi_wait(ptdp_device *dev, int n, MPI_Request *reqs, const ptdp_wait_why *why)
{
    requests q = { n, reqs };
    return ptdp_mpi_wait_until(dev, all_done, &q, why);
}

/* Returned: wait for every rank to return too, answering "finished".  No
 * deadline of its own: a rank still waiting for this one reports it. */
int ptdp_mpi_wait_finish(ptdp_device *dev)
{
    (void)dev;
    MPI_Request req;
    MPI_Ibarrier(W.status, &req);
    snprintf(W.doing, sizeof W.doing, "finished");
    for (double start = ptdp_wall_now();;) {
        int flag = 0;
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        if (flag)
            break;
        answer_questions();
        pause_a_little(ptdp_wall_now() - start);
    }
    return 0;
}
