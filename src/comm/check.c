/*
 * check.c — is a call valid, and did every member make the same one?
 *
 * Two checks stand between a collective call and its data movement:
 *
 *   the arguments    before meeting anyone: a known type and reduction (FP8
 *                    codes are moved, never reduced), a root inside the
 *                    group, buffers present for the counts this rank reads
 *                    or writes, send and recv either the same (in place,
 *                    where allowed) or disjoint.  A bad call fails the
 *                    device with the call's name, file:line, group and
 *                    rank: "ptdp_broadcast at mlp.c:40 (group 'tp', rank 1
 *                    of 4): root 5 is not a rank of a group of 4".
 *
 *   the agreement    after meeting: every member must have called the
 *                    same operation with the same count, type, reduction,
 *                    root and algorithm.  Otherwise every member reports
 *                    every member's call, e.g.
 *                      mismatched collectives in group 'tp' (call #12):
 *                      rank 0 all_reduce count=1024 f32 op=sum algo=shm at
 *                      mlp.c:88; rank 1 all_gather count=512 f32 algo=shm
 *                      at mlp.c:93
 *                    instead of hanging or corrupting memory.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "comm/comm_impl.h"
#include "core/ranks.h"
#include "ptdp/error.h"
#include "ptdp/tensor.h"
#include "core/coll_impl.h"


static const char *base_name(const char *file)
{
    const char *slash = file ? strrchr(file, '/') : NULL;
    return slash ? slash + 1 : file ? file : "?";
}

/* ------------------------------------------------------ the arguments */

static bool reduces(ptdp_coll op)
{
    return op == PTDP_COLL_REDUCE || op == PTDP_COLL_ALL_REDUCE || op == PTDP_COLL_REDUCE_SCATTER;
}

static bool rooted(ptdp_coll op)
{
    return op == PTDP_COLL_BROADCAST || op == PTDP_COLL_REDUCE ||
           op == PTDP_COLL_GATHER || op == PTDP_COLL_SCATTER;
}

static bool has_algo(ptdp_coll op)
{
    return op == PTDP_COLL_ALL_REDUCE || op == PTDP_COLL_REDUCE_SCATTER ||
           op == PTDP_COLL_ALL_GATHER;
}

int ptdp_bad_call(ptdp_comm *c, const ptdp_call *call, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return ptdp_fail(c->dev, PTDP_EINVAL, "ptdp_%s at %s:%d (group '%s', rank %d of %d): %s",
                     ptdp_coll_name(call->op), base_name(call->file), call->line,
                     c->name, c->rank, c->size, why);
}

/* A buffer of `n` elements must exist when n > 0. */
static int check_buffer(ptdp_comm *c, const ptdp_call *call, const void *p, size_t n,
                        const char *what)
{
    if (n > 0 && p == NULL)
        return ptdp_bad_call(c, call, "%s is NULL for %zu elements", what, n);
    return 0;
}

/* Two buffers are the same (in place) or do not overlap at all. */
static int check_overlap(ptdp_comm *c, const ptdp_call *call, const void *a, size_t an,
                         const void *b, size_t bn, bool same_allowed)
{
    uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
    if (!a || !b || an == 0 || bn == 0)
        return 0;
    if (a0 == b0 && same_allowed)
        return 0;
    if (a0 < b0 + bn && b0 < a0 + an)
        return ptdp_bad_call(c, call, "send and recv buffers overlap%s",
                        same_allowed ? " without being the same (in place)" : "");
    return 0;
}

/* all_to_allv: how far into a buffer the table reaches (elements). */
static size_t extent(const ptdp_comm *c, const size_t *counts, const size_t *displs)
{
    size_t end = 0;
    for (int j = 0; j < c->size; j++)
        if (counts[j] > 0 && displs[j] + counts[j] > end)
            end = displs[j] + counts[j];
    return end;
}

int ptdp_check_tables(ptdp_comm *c, ptdp_call *call, size_t *packed_send, size_t *packed_recv)
{
    const size_t *counts[2] = { call->scounts, call->rcounts };
    const size_t *displs[2] = { call->sdispls, call->rdispls };
    size_t *packed[2] = { packed_send, packed_recv };
    static const char *const side[2] = { "send", "recv" };
    if ((unsigned)call->dtype >= PTDP_DTYPE_COUNT)
        return ptdp_bad_call(c, call, "unknown element type %d", (int)call->dtype);
    const size_t es = ptdp_dtype_size(call->dtype), limit = SIZE_MAX / es / 2;
    unsigned long long others[2] = { 0, 0 };
    for (int s = 0; s < 2; s++) {
        if (counts[s] == NULL)
            return ptdp_bad_call(c, call, "%s_counts is NULL (one count per member: %d)", side[s], c->size);
        size_t total = 0;
        for (int j = 0; j < c->size; j++) {
            if (counts[s][j] > limit - total)
                return ptdp_bad_call(c, call, "%s_counts add up to more than %zu elements", side[s], limit);
            if (packed[s] != NULL)
                packed[s][j] = total;
            else if (displs[s][j] > limit)
                return ptdp_bad_call(c, call, "%s_displs[%d] = %zu is too large", side[s], j, displs[s][j]);
            total += counts[s][j];
            if (j != c->rank)
                others[s] += (unsigned long long)(counts[s][j] * es);
        }
        if (s == 0)
            call->count = total;            /* what a mismatch report shows */
    }
    call->vsent = others[0];
    call->vrecv = others[1];
    return 0;
}

/* Element counts of this rank's send and recv buffers for the call. */
static void buffer_sizes(const ptdp_comm *c, const ptdp_call *call, size_t *ns, size_t *nr)
{
    size_t off, mine;
    ptdp_share(call->count, c->size, c->rank, &off, &mine);
    bool root = call->root == c->rank;
    switch (call->op) {
    case PTDP_COLL_BROADCAST:      *ns = 0; *nr = call->count; break;
    case PTDP_COLL_REDUCE:         *ns = call->count; *nr = root ? call->count : 0; break;
    case PTDP_COLL_ALL_REDUCE:     *ns = call->count; *nr = call->count; break;
    case PTDP_COLL_ALL_GATHER:     *ns = call->in_place ? 0 : mine; *nr = call->count; break;
    case PTDP_COLL_REDUCE_SCATTER: *ns = call->in_place ? 0 : call->count;
                                   *nr = call->in_place ? call->count : mine; break;
    case PTDP_COLL_GATHER:         *ns = mine; *nr = root ? call->count : 0; break;
    case PTDP_COLL_SCATTER:        *ns = root ? call->count : 0; *nr = mine; break;
    case PTDP_COLL_ALL_TO_ALL:     *ns = call->count * (size_t)c->size; *nr = *ns; break;
    case PTDP_COLL_ALL_TO_ALLV:    *ns = extent(c, call->scounts, call->sdispls);
                                   *nr = extent(c, call->rcounts, call->rdispls); break;
    case PTDP_COLL_SEND:           *ns = call->count; *nr = 0; break;
    case PTDP_COLL_RECV:           *ns = 0; *nr = call->count; break;
    default:                       *ns = 0; *nr = 0; break;
    }
}

int ptdp_check_call(ptdp_comm *c, ptdp_call *call, const void *send)
{
    if ((unsigned)call->dtype >= PTDP_DTYPE_COUNT)
        return ptdp_bad_call(c, call, "unknown element type %d", (int)call->dtype);
    if (reduces(call->op) && (unsigned)call->rop >= PTDP_OP_COUNT)
        return ptdp_bad_call(c, call, "unknown reduction %d", (int)call->rop);
    if (reduces(call->op) && (call->dtype == PTDP_F8_E4M3 || call->dtype == PTDP_F8_E5M2))
        return ptdp_bad_call(c, call, "%s codes cannot be reduced: a code is a value only with its "
                             "tile's scale (reduce the values, or max-reduce the amaxes, instead)",
                             ptdp_dtype_name(call->dtype));
    if (rooted(call->op) && (call->root < 0 || call->root >= c->size))
        return ptdp_bad_call(c, call, "root %d is not a rank of a group of %d", call->root, c->size);
    if ((unsigned)call->algo >= PTDP_ALGO_COUNT)
        return ptdp_bad_call(c, call, "unknown algorithm %d", (int)call->algo);
    size_t es = ptdp_dtype_size(call->dtype);
    size_t limit = SIZE_MAX / es / (size_t)c->size;
    if (call->op != PTDP_COLL_ALL_TO_ALLV && call->count > limit)
        return ptdp_bad_call(c, call, "count %zu is too large", call->count);

    /* Resolve PTDP_IN_PLACE: the input then lives inside recv. */
    if (send == PTDP_IN_PLACE) {
        if (call->op != PTDP_COLL_ALL_GATHER && call->op != PTDP_COLL_REDUCE_SCATTER)
            return ptdp_bad_call(c, call, "PTDP_IN_PLACE is only for all_gather and reduce_scatter "
                            "(all_reduce and reduce take send == recv)");
        size_t off, len;
        ptdp_share(call->count, c->size, c->rank, &off, &len);
        call->in_place = 1;
        call->send = call->op == PTDP_COLL_ALL_GATHER && call->recv
                         ? (const char *)call->recv + off * es : call->recv;
    } else {
        call->send = send;
    }

    size_t ns, nr;
    buffer_sizes(c, call, &ns, &nr);
    int rc;
    if ((rc = check_buffer(c, call, call->send, ns, "send")) != 0 ||
        (rc = check_buffer(c, call, call->recv, nr, call->op == PTDP_COLL_BROADCAST ? "buf" : "recv")) != 0)
        return rc;
    if (call->in_place)
        return check_buffer(c, call, call->recv, call->count, "recv");
    bool same_ok = call->op == PTDP_COLL_ALL_REDUCE || call->op == PTDP_COLL_REDUCE;
    return check_overlap(c, call, call->send, ns * es, call->recv, nr * es, same_ok);
}

/* ------------------------------------------------------ the agreement */

void ptdp_describe_call(const ptdp_call *k, char *buf, size_t len)
{
    char dtype[8];
    const char *name = ptdp_dtype_name(k->dtype);
    size_t i = 0;
    for (; name && name[i] && i + 1 < sizeof dtype; i++)
        dtype[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
    dtype[i] = '\0';

    int n = snprintf(buf, len, "%s", ptdp_coll_name(k->op));
    if (k->op != PTDP_COLL_BARRIER && k->op != PTDP_COLL_SPLIT)
        n += snprintf(buf + n, len - (size_t)n, " count=%zu %s", k->count, dtype);
    if (reduces(k->op))
        n += snprintf(buf + n, len - (size_t)n, " op=%s", ptdp_op_name(k->rop));
    if (rooted(k->op))
        n += snprintf(buf + n, len - (size_t)n, " root=%d", k->root);
    if (has_algo(k->op))
        n += snprintf(buf + n, len - (size_t)n, " algo=%s", ptdp_algo_name(k->algo));
    snprintf(buf + n, len - (size_t)n, " at %s:%d", base_name(k->file), k->line);
}

static bool same_call(const ptdp_call *a, const ptdp_call *b)
{
    if (a->op != b->op || a->seq != b->seq)
        return false;
    if (a->op == PTDP_COLL_BARRIER || a->op == PTDP_COLL_SPLIT)
        return true;
    if (a->op == PTDP_COLL_ALL_TO_ALLV)      /* counts: ptdp_check_v_agreement */
        return a->dtype == b->dtype;
    return a->count == b->count && a->dtype == b->dtype &&
           (!reduces(a->op) || a->rop == b->rop) &&
           (!rooted(a->op) || a->root == b->root) &&
           (!has_algo(a->op) || a->algo == b->algo);
}

int ptdp_check_agreement(ptdp_comm *c, const ptdp_call *const *calls)
{
    int n = c->size;
    for (int r = 1; r < n; r++)
        if (!same_call(calls[0], calls[r]))
            goto mismatch;
    return 0;

mismatch:;
    /* One clause per distinct call, the odd ones first: at 64 ranks the
     * rank at fault must not be cut off the end of the message. */
    static _Thread_local char each[PTDP_MAX_DEVICES][192];
    const char *text[PTDP_MAX_DEVICES];
    for (int r = 0; r < n; r++) {
        ptdp_describe_call(calls[r], each[r], sizeof each[r]);
        text[r] = each[r];
    }
    char ranks[PTDP_MSG_MAX - 96];
    ptdp_describe_ranks(text, n, ranks, sizeof ranks);
    return ptdp_fail(c->dev, PTDP_EMISMATCH, "mismatched collectives in group '%s' (call #%llu): %s",
                     c->name, calls[c->rank]->seq, ranks);
}


int ptdp_check_peer(ptdp_comm *c, ptdp_call *k, int peer)
{
    if (peer < 0 || peer >= c->size)
        return ptdp_bad_call(c, k, "rank %d is not a rank of a group of %d", peer, c->size);
    if (peer == c->rank)
        return ptdp_bad_call(c, k, "a blocking %s to itself (rank %d) would wait forever",
                        ptdp_coll_name(k->op), peer);
    return 0;
}

int ptdp_fail_v_mismatch(ptdp_comm *c, unsigned long long seq, int i, const ptdp_call *from,
                         unsigned long long sends, int j, const ptdp_call *to, unsigned long long expects)
{
    return ptdp_fail(c->dev, PTDP_EMISMATCH, "mismatched all_to_allv counts in group '%s' (call #%llu): rank %d "
                     "sends %llu elements to rank %d (at %s:%d), but rank %d expects %llu from rank %d (at %s:%d)",
                     c->name, seq, i, sends, j, base_name(from->file), from->line, j, expects, i,
                     base_name(to->file), to->line);
}

int ptdp_check_v_agreement(ptdp_comm *c, const ptdp_call *const *calls)
{
    for (int i = 0; i < c->size; i++)
        for (int j = 0; j < c->size; j++)
            if (calls[i]->scounts[j] != calls[j]->rcounts[i])
                return ptdp_fail_v_mismatch(c, calls[c->rank]->seq, i, calls[i], calls[i]->scounts[j], j, calls[j],
                                            calls[j]->rcounts[i]);
    return 0;
}
