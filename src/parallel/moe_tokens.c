/*
 * moe_tokens.c — a mixture's passes over its tokens: the dispatch that
 * stacks each expert's rows, the combine that brings the outputs home, and
 * their backwards.  One pass each, its tokens cut into blocks shared with
 * the device's helper threads (runtime/pool.h), as a large GEMM's rows are.
 *
 *   dispatch           x[s]    = n[token[s]]                  a copy a kept choice
 *   combine            out[t]  = sum_j g_j y[slot(t, j)]      choice order j
 *   combine backward   dg_tj   = d[t] . y[slot(t, j)]         (in double)
 *                      dy[s]   = g_tj d[t]
 *   dispatch backward  dn[t]   = sum over t's slots s of dx[s], slot order
 *
 *       tokens 0 .. R-1                    every output row is one token's
 *   ┌──────────────┬──────────────┐        (or one slot's), written by one
 *   │ device thread│   helper     │        thread: no sums across threads,
 *   └──────────────┴──────────────┘        so the bits never depend on the cut
 *
 * The same arithmetic in the same order as the plain loops: a token's sum
 * starts from 0 and adds its terms one by one (choice order forward, slot
 * order backward — a scatter-add in slot order gives each token's terms in
 * slot order); a gate's gradient is one dot product over the columns in
 * order.  Only the schedule is new: dot products of several choices run
 * side by side (independent chains, so the CPU overlaps them), and the rows
 * are read once each.
 */
#include "parallel/moe_tokens.h"

#include <string.h>

#include "runtime/pool.h"

/* Below this many elements a pass stays on the device thread: waking a
 * helper costs microseconds. */
#define MIN_SHARED_ELEMENTS 65536.0

typedef void (*block_fn)(const ptdp_moe_routing *r, const void *in, void *out, int first, int end);

typedef struct {
    const ptdp_moe_routing *r;
    const void *in;
    void *out;
    block_fn fn;
    int count;                         /* tokens, or kept rows */
} job;

static void part_of(void *arg, int part, int parts)
{
    const job *j = arg;
    size_t first, end;
    ptdp_pool_block((size_t)j->count, part, parts, &first, &end);
    j->fn(j->r, j->in, j->out, (int)first, (int)end);
}

/* fn over [0, count), cut into as many blocks as the device has threads
 * when the pass is large enough to share. */
static void shared(const ptdp_moe_routing *r, int count, double elements, block_fn fn, const void *in, void *out)
{
    ptdp_pool *pool = ptdp_pool_current();
    int parts = ptdp_pool_threads(pool);
    if (elements < MIN_SHARED_ELEMENTS * 2 || count < parts)
        parts = 1;
    job j = { r, in, out, fn, count };
    if (parts > 1)
        ptdp_pool_run(pool, parts, part_of, &j);
    else
        part_of(&j, 0, 1);
}

/* ------------------------------------------------------------ dispatch */

static void dispatch_block(const ptdp_moe_routing *r, const void *in, void *out, int first, int end)
{
    const ptdp_tensor *n = in;
    ptdp_real *x = out;
    for (int s = first; s < end; s++)
        memcpy(x + (size_t)s * r->C, ptdp_at(*n, r->token[s], 0), (size_t)r->C * sizeof *x);
}

void ptdp_moe_dispatch(const ptdp_moe_routing *r, ptdp_tensor n, ptdp_real *x)
{
    shared(r, r->kept, (double)r->kept * r->C, dispatch_block, &n, x);
}

/* ------------------------------------------------------------- combine */

typedef struct {
    ptdp_tensor t;                     /* out, or d                        */
    const ptdp_real *y;
    ptdp_real *dgate, *dy;
} tensors;

static void combine_block(const ptdp_moe_routing *r, const void *in, void *out, int first, int end)
{
    const ptdp_real *y = in;
    const tensors *o = out;
    const int K = r->K, C = r->C;
    for (int t = first; t < end; t++) {
        ptdp_real *row = ptdp_at(o->t, t, 0);
        for (int c = 0; c < C; c++)
            row[c] = 0;
        for (int j = 0; j < K; j++) {
            const int s = r->slot[(size_t)t * K + j];
            const double g = r->gate[(size_t)t * K + j];
            const ptdp_real *ys = s >= 0 ? y + (size_t)s * C : NULL;
            for (int c = 0; ys != NULL && c < C; c++)
                row[c] += (ptdp_real)(g * ys[c]);
        }
    }
}

void ptdp_moe_combine(const ptdp_moe_routing *r, const ptdp_real *y, ptdp_tensor out)
{
    tensors o = { .t = out };
    shared(r, r->rows, (double)r->rows * r->K * r->C, combine_block, y, &o);
}

/* ---------------------------------------------------- combine backward */

enum { CHAINS = 4 };

/* dg = d[t] . y[s] for up to CHAINS choices at once: each its own sum in
 * column order, the sums side by side. */
static void dots(int n, const ptdp_real *const *d, const ptdp_real *const *y, int C, double *dot)
{
    if (n == CHAINS) {
        double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
        for (int q = 0; q < C; q++) {
            a0 += (double)d[0][q] * y[0][q];
            a1 += (double)d[1][q] * y[1][q];
            a2 += (double)d[2][q] * y[2][q];
            a3 += (double)d[3][q] * y[3][q];
        }
        dot[0] = a0, dot[1] = a1, dot[2] = a2, dot[3] = a3;
        return;
    }
    for (int i = 0; i < n; i++) {
        double a = 0.0;
        for (int q = 0; q < C; q++)
            a += (double)d[i][q] * y[i][q];
        dot[i] = a;
    }
}

static void combine_backward_block(const ptdp_moe_routing *r, const void *in, void *out, int first, int end)
{
    const tensors *o = out;
    const int K = r->K, C = r->C;
    const ptdp_real *d[CHAINS], *y[CHAINS];
    size_t at[CHAINS];
    double dot[CHAINS];
    int n = 0;
    (void)in;
    for (size_t c = (size_t)first * K; c < (size_t)end * K; c++) {
        const int s = r->slot[c];
        const ptdp_real *dt = ptdp_at(o->t, (int)(c / (size_t)K), 0);
        o->dgate[c] = 0;   /* a dropped choice: no gradient */
        if (s < 0)
            continue;
        const ptdp_real g = r->gate[c];
        ptdp_real *dys = o->dy + (size_t)s * C;
        for (int q = 0; q < C; q++)
            dys[q] = (ptdp_real)(g * dt[q]);
        d[n] = dt, y[n] = o->y + (size_t)s * C, at[n] = c;
        if (++n == CHAINS || c + 1 == (size_t)end * K) {
            dots(n, d, y, C, dot);
            for (int i = 0; i < n; i++)
                o->dgate[at[i]] = (ptdp_real)dot[i];
            n = 0;
        }
    }
    if (n > 0) {
        dots(n, d, y, C, dot);
        for (int i = 0; i < n; i++)
            o->dgate[at[i]] = (ptdp_real)dot[i];
    }
}

void ptdp_moe_combine_backward(const ptdp_moe_routing *r, const ptdp_real *y, ptdp_tensor d, ptdp_real *dgate,
                               ptdp_real *dy)
{
    tensors o = { .t = d, .y = y, .dgate = dgate, .dy = dy };
    shared(r, r->rows, (double)r->rows * r->K * r->C, combine_backward_block, NULL, &o);
}

/* --------------------------------------------------- dispatch backward */

static void dispatch_backward_block(const ptdp_moe_routing *r, const void *in, void *out, int first, int end)
{
    const ptdp_real *dx = in;
    const ptdp_tensor *dn = out;
    const int K = r->K, C = r->C;
    for (int t = first; t < end; t++) {
        const int *slots = r->slot + (size_t)t * K;
        ptdp_real *row = ptdp_at(*dn, t, 0);
        for (int c = 0; c < C; c++)
            row[c] = 0;
        /* t's slots in increasing order: the smallest above the last */
        for (int last = -1;;) {
            int s = -1;
            for (int j = 0; j < K; j++)
                if (slots[j] > last && (s < 0 || slots[j] < s))
                    s = slots[j];
            if (s < 0)
                break;
            const ptdp_real *from = dx + (size_t)s * C;
            for (int c = 0; c < C; c++)
                row[c] += from[c];
            last = s;
        }
    }
}

void ptdp_moe_dispatch_backward(const ptdp_moe_routing *r, const ptdp_real *dx, ptdp_tensor dn)
{
    shared(r, r->rows, (double)r->rows * r->K * r->C, dispatch_backward_block, dx, &dn);
}
