/*
 * check.c — lesson 01: is your ring all-reduce right?
 *
 *   1. The neighbour exchange alone, on 2 to 5 devices: does every rank get
 *      its left neighbour's message, with one send and one receive, and
 *      without a deadlock?
 *   2. The all-reduce on 2 to 5 devices, 1 to 4099 elements (so chunks of
 *      unequal length, and empty ones): does every rank end with the sum,
 *      equal to ptdp_all_reduce's, and the same bits on every rank?
 *   3. The bytes: does every device send 2(N-1) chunk messages, that is
 *      2(N-1)/N * S bytes for S bytes on N devices?
 *
 * Element i of rank r starts as (1 + i mod 5) * 8^r, so a wrong element
 * can be read back in base 8 as "which ranks' parts, how many times each"
 * and the check can say, e.g., "it holds rank 1's part twice".
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

static bool check_exchange(int world)
{
    exchange_run x;
    char what[64];
    snprintf(what, sizeof what, "the neighbour exchange on %d devices", world);
    int rc = tutorial_launch(what, world, exchange_device, &x);
    if (rc == PTDP_ETIMEDOUT) {
        tutorial_note("A blocking send waits until its receive has taken the message.  If every rank");
        tutorial_note("sends first, every rank waits for a receive that nobody has posted: a cycle of");
        tutorial_note("waiting sends, a deadlock.  Break the cycle (blank 1): let half of the ranks");
        tutorial_note("receive first.  Which half, so that every send meets a waiting receive?");
    }
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
} reduce_run;

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
    size_t bytes = x->count * sizeof(ptdp_real);
    ptdp_real *buf = ptdp_alloc(dev, bytes, PTDP_MEM_OTHER, "lesson.buf");
    ptdp_real *ref = ptdp_alloc(dev, bytes, PTDP_MEM_OTHER, "lesson.reference");
    if (buf == NULL || ref == NULL)
        return PTDP_ENOMEM;
    for (size_t i = 0; i < x->count; i++)
        buf[i] = ref[i] = start_value(x, r, i);

    unsigned long long s0 = st->calls[PTDP_COLL_SEND], r0 = st->calls[PTDP_COLL_RECV];
    double b0 = st->bytes_sent[PTDP_COLL_SEND];
    int rc = lesson_ring_all_reduce(dev, dev->world, buf, x->count);
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
        tutorial_note("That is not a sum of whole parts of the devices: is a chunk's offset or length");
        tutorial_note("off (ptdp_chunk gives both), or is a received chunk written to the wrong place?");
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
        tutorial_note("the arriving partial sum, and does the all-gather (blank 4) bring the finished chunk?");
    } else if (nmissing > 0 && times[rank] == 0) {
        tutorial_note("It lacks the part of rank(s) %s, its own part among them: does blank 3 overwrite", missing);
        tutorial_note("the chunk with what arrives (=) instead of adding to it (+=)?");
    } else if (nmissing > 0) {
        tutorial_note("It lacks the part of rank(s) %s: the sum did not go around the whole ring", missing);
        tutorial_note("(N-1 reduce-scatter steps, then N-1 all-gather steps).");
    }
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
    bool ok = x.result != NULL && x.reference != NULL &&
              tutorial_launch(what, world, reduce_device, &x) == 0;

    /* Every rank holds the sum (ptdp_all_reduce's), to 1e-10. */
    for (int r = 0; ok && r < world; r++)
        for (size_t i = 0; ok && i < count; i++) {
            double got = x.result[(size_t)r * count + i], want = x.reference[(size_t)r * count + i];
            if (fabs(got - want) > 1e-10 * fmax(1.0, fabs(want))) {
                tutorial_wrong("%s: rank %d ended with %.17g in element %zu; the sum over %d devices is %.17g.",
                               what, r, got, i, world, want);
                if (!random_values)
                    explain_element(&x, r, i, got);
                ok = false;
            }
        }
    /* …and the same bits on every rank: replicas must never drift apart. */
    for (int r = 1; ok && r < world; r++)
        if (memcmp(x.result, x.result + (size_t)r * count, count * sizeof(ptdp_real)) != 0) {
            tutorial_wrong("%s: rank %d's result is not bit-identical to rank 0's.  In the ring each chunk is "
                           "summed once, on one device, then only copied: does your all-gather copy the "
                           "finished chunks rather than sum again?", what, r);
            ok = false;
        }
    /* The bytes: 2(N-1) messages of one chunk each. */
    size_t lo = (size_t)-1, hi = 0;
    for (int c = 0; c < world; c++) {
        size_t off, len;
        ptdp_chunk(count, world, c, &off, &len);
        lo = len < lo ? len : lo;
        hi = len > hi ? len : hi;
    }
    unsigned long long steps = 2ull * (unsigned long long)(world - 1);
    double S = (double)(count * sizeof(ptdp_real)), es = (double)sizeof(ptdp_real);
    for (int r = 0; ok && r < world; r++) {
        if (x.sends[r] != steps || x.recvs[r] != steps) {
            tutorial_wrong("%s: rank %d made %llu sends and %llu receives; the ring makes 2(N-1) = %llu of each "
                           "(N-1 reduce-scatter steps, N-1 all-gather steps, one chunk per step).",
                           what, r, x.sends[r], x.recvs[r], steps);
            ok = false;
        } else if (x.sent[r] < (double)steps * (double)lo * es || x.sent[r] > (double)steps * (double)hi * es) {
            tutorial_wrong("%s: rank %d sent %.0f bytes; %llu messages of one chunk each are %.0f to %.0f bytes "
                           "(2(N-1)/N * S = %.0f).  Does every message carry exactly one chunk?", what, r,
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
