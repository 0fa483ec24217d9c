/*
 * blas.c — a device's large matrix products shared with its helper threads,
 *          with the same bits whatever the number of threads.
 *
 * When devices are fewer than cores, each device gets cores / devices
 * threads (runtime/pool.c).  The product C = alpha op(A) op(B) + beta C is
 * cut into blocks of ROWS of C; each thread computes its block with one
 * single-threaded GEMM call:
 *
 *              op(B) (k x n), read by all
 *            ┌──────────────┐
 *   op(A)    │              │
 *  ┌──────┐  ├──────────────┤ C rows   0 .. 47   device thread
 *  │ rows │  │              │ C rows  48 .. 95   helper 1
 *  │ of A │─►├──────────────┤ C rows  96 .. m-1  helper 2
 *  └──────┘  └──────────────┘
 *
 *   C[i][j] = beta C[i][j] + alpha Σ_k op(A)[i][k] op(B)[k][j]
 *
 * Why our own threads, and not OpenBLAS's.  Debian's OpenBLAS is the
 * pthreads build: openblas_set_num_threads is global to the process, so with
 * several devices it cannot give each its own count, and OpenBLAS's threads
 * split a product however it likes (its split also depends on the count).
 * OpenBLAS is therefore kept single-threaded (comm/launch.c) and ptdp
 * splits: portable (POSIX threads only), and deterministic.
 *
 * Why rows of C, cut at multiples of 16 or 48.  Only the output is split,
 * never k: every element of C is still one dot product over all of k,
 * summed by the same kernel in the same order, so the bits cannot depend on
 * the thread count — provided each block meets the kernel's tiles where the
 * whole product would.  Measured with OpenBLAS 0.3.21 (Haswell kernels,
 * float and double): blocks of rows cut at multiples of 12 give C bit for
 * bit; cuts at other rows, and blocks of columns in float at any cut, do
 * not (the edge kernels for the leftover rows or columns sum differently).
 * 48 is a multiple of the row tiles of the common x86 and Arm kernels (4,
 * 6, 8, 12, 16, 24); 16 of most of them, and it halves a thin product
 * evenly (256 rows: 128 and 128, where 48 allows 144 and 112).  So the
 * first shared product checks, once, that this BLAS gives a product cut
 * every 16 rows the bits of the whole, each transpose, beta 0 and not; if
 * so the cuts go at multiples of 16, else of 48.  Either way the bits are
 * the whole product's.  The test tests/test_blas_threads.c checks the bits
 * for 1 to 5 threads, and tests/cli/blas_threads.sh through training runs;
 * a BLAS whose tiles disagree fails them.
 *
 * Why not small products.  Waking a helper costs microseconds; a block
 * does at least 2^20 multiply-adds (about 50 µs at one core's speed), so the
 * hand-over stays small beside the work.  That floor also keeps each block
 * clear of the "small matrix" paths some OpenBLAS kernels take below about
 * 10^6 multiply-adds, which sum in another order than the blocked kernel.
 *
 * A group of small products (a mixture's experts: E GEMMs of a few dozen
 * rows each, too small to split) would leave the helpers idle.  Between
 * ptdp_matmul_group_begin and _end the products are independent (none reads
 * another's output), so the small ones are queued and then run WHOLE, each
 * on one thread, the threads' loads balanced largest first:
 *
 *   queued   e3 ███████  e0 █████  e5 ███  e1 ██  e2 ██  e4 █
 *   thread 0 e3 ███████  e1 ██  e4 █           (whole calls: each the
 *   thread 1 e0 █████  e5 ███  e2 ██            same as alone, same bits)
 *
 * A product that would be split alone is queued too (whole on one thread,
 * its operand W packed once, not once a thread: the same bits, blas.c's
 * blocks being exact), unless it is more than a thread's share of the
 * group: that one is still split, as alone.
 */
#include "nn/blas.h"

#include "runtime/pool.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { FINE = 16, COARSE = 48 };
#define MIN_BLOCK_MACS 1048576.0       /* 2^20 multiply-adds per block */

/* ---- where a product may be cut: every FINE rows, or every COARSE */

/* Whether a product cut every FINE rows has the whole product's bits here,
 * for each of op(A) and op(B) and beta 0 and 1/2.  The blocks are as large
 * as shared ones (2^20 multiply-adds or more), so they take the kernel a
 * shared block takes; the last has 21 rows, a leftover as real ones do. */
static bool fine_cuts_exact(void)
{
    enum { M = 6 * FINE + 21, N = 256, K = 272 };
    ptdp_real *a = malloc(sizeof(ptdp_real) * M * K), *b = malloc(sizeof(ptdp_real) * K * N);
    ptdp_real *whole = malloc(sizeof(ptdp_real) * M * N), *cut = malloc(sizeof(ptdp_real) * M * N);
    bool exact = a != NULL && b != NULL && whole != NULL && cut != NULL;
    uint32_t u = 12345;
    for (int i = 0; exact && i < M * K + K * N; i++) {
        u = u * 1664525u + 1013904223u;                      /* values in [-1, 1) */
        ptdp_real *x = i < M * K ? &a[i] : &b[i - M * K];
        *x = (ptdp_real)((double)(u >> 8) / (1 << 23) - 1.0);
    }
    for (int v = 0; exact && v < 8; v++) {
        const bool ta = v & 1, tb = v & 2;
        const double beta = v & 4 ? 0.5 : 0.0;
        const int lda = ta ? M : K, ldb = tb ? K : N;
        for (int i = 0; i < M * N; i++)
            whole[i] = cut[i] = (ptdp_real)(i % 7);
        ptdp_gemm_one(ta, tb, M, N, K, 1.0, a, lda, b, ldb, beta, whole, N);
        for (int r0 = 0, rows; r0 < M; r0 += rows) {
            rows = M - r0 < 2 * FINE ? M - r0 : FINE;
            ptdp_gemm_one(ta, tb, rows, N, K, 1.0, ta ? a + r0 : a + (size_t)r0 * K, lda, b, ldb, beta,
                          cut + (size_t)r0 * N, N);
        }
        exact = memcmp(whole, cut, sizeof(ptdp_real) * M * N) == 0;
    }
    free(a);
    free(b);
    free(whole);
    free(cut);
    return exact;
}

static int row_granule_value = COARSE;
static pthread_once_t row_granule_once = PTHREAD_ONCE_INIT;

static void row_granule_check(void)
{
    if (fine_cuts_exact())
        row_granule_value = FINE;
}

int ptdp_gemm_row_granule(void)
{
    pthread_once(&row_granule_once, row_granule_check);
    return row_granule_value;
}

/* ---- a product cut into blocks of rows */

typedef struct {
    bool trans_a, trans_b;
    int m, n, k, lda, ldb, ldc;
    double alpha, beta;
    const ptdp_real *a, *b;
    ptdp_real *c;
    const ptdp_real *bias;             /* non-NULL: C's rows start at it (beta 1) */
} gemm_job;

/* Rows [r0, r1) of C set to the bias, where the product will add to them:
 * the thread that computes the rows fills them. */
static void fill_rows(const gemm_job *j, int r0, int r1)
{
    for (int i = r0; j->bias != NULL && i < r1; i++) {
        ptdp_real *row = j->c + (size_t)i * j->ldc;
        for (int q = 0; q < j->n; q++)
            row[q] = j->bias[q];
    }
}

/* Where part `part` of `parts` starts: the multiple of the granule g
 * nearest to an even share of the m rows, part·m/parts (the last part ends
 * at m).  Even shares of rows, not of whole granules: 256 rows are 5
 * granules of 48 and 16 rows, and two parts of whole granules (96 rows,
 * then 160 with the rest) leave one thread idle a fifth of the time; the
 * nearest cuts give 144 and 112.  Even shares a granule or more apart round
 * to different multiples, so no part is empty when parts <= m / g. */
static int block_start(int m, int part, int parts)
{
    if (part >= parts)
        return m;
    const long long g = ptdp_gemm_row_granule(), twice = 2LL * m * part / parts;   /* 2·ideal, in rows */
    return (int)((twice + g) / (2 * g) * g);
}

/* The fewest rows any of `parts` blocks gets. */
static int smallest_block(int m, int parts)
{
    int least = m;
    for (int p = 0; p < parts; p++) {
        const int rows = block_start(m, p + 1, parts) - block_start(m, p, parts);
        least = rows < least ? rows : least;
    }
    return least;
}

/* Part `part` of `parts`: rows [block_start(part), block_start(part + 1)). */
static void gemm_block(void *arg, int part, int parts)
{
    const gemm_job *j = arg;
    const int r0 = block_start(j->m, part, parts), r1 = block_start(j->m, part + 1, parts);
    /* op(A)'s rows r0..: rows of A, or columns of A stored k x m. */
    const ptdp_real *a = j->trans_a ? j->a + r0 : j->a + (size_t)r0 * j->lda;
    fill_rows(j, r0, r1);
    ptdp_gemm_one(j->trans_a, j->trans_b, r1 - r0, j->n, j->k, j->alpha, a, j->lda,
                  j->b, j->ldb, j->beta, j->c + (size_t)r0 * j->ldc, j->ldc);
}

/* ---- a group's small products, queued (ptdp_matmul_group_begin / _end) */

enum { QUEUE_MAX = 128, OWNERS_MAX = 64 };

typedef struct {
    bool open;
    int n;
    gemm_job jobs[QUEUE_MAX];
    double macs[QUEUE_MAX];
    int parts[QUEUE_MAX];              /* the blocks it would be cut into alone */
    int owner[QUEUE_MAX];              /* the part (thread) that runs it, -1 done */
} gemm_queue;

static _Thread_local gemm_queue queue;

/* Part `part`'s queued products, whole, in the order they were asked for. */
static void run_owned(void *arg, int part, int parts)
{
    const gemm_queue *q = arg;
    (void)parts;
    for (int i = 0; i < q->n; i++)
        if (q->owner[i] == part) {
            const gemm_job *j = &q->jobs[i];
            fill_rows(j, 0, j->m);
            ptdp_gemm_one(j->trans_a, j->trans_b, j->m, j->n, j->k, j->alpha, j->a, j->lda, j->b, j->ldb,
                          j->beta, j->c, j->ldc);
        }
}

/* Largest first, each to the least loaded of `parts` (ties: the lower
 * index): the owners of the queued products. */
static void balance(gemm_queue *q, int parts)
{
    double load[OWNERS_MAX] = { 0 };
    bool placed[QUEUE_MAX] = { false };
    for (int i = 0; i < q->n; i++)
        placed[i] = q->owner[i] < 0;   /* split already */
    for (;;) {
        int big = -1, least = 0;
        for (int i = 0; i < q->n; i++)
            if (!placed[i] && (big < 0 || q->macs[i] > q->macs[big]))
                big = i;
        if (big < 0)
            break;
        for (int t = 1; t < parts; t++)
            if (load[t] < load[least])
                least = t;
        placed[big] = true;
        q->owner[big] = least;
        load[least] += q->macs[big];
    }
}

/* Run what is queued: a product larger than a thread's share split now,
 * as alone; the others whole, on the helpers when there is enough to
 * share. */
static void flush(ptdp_pool *pool, gemm_queue *q)
{
    double total = 0;
    for (int i = 0; i < q->n; i++)
        total += q->macs[i];
    const int threads = ptdp_pool_threads(pool);
    for (int i = 0; i < q->n; i++)
        if (q->parts[i] > 1 && q->macs[i] * threads > total) {
            ptdp_pool_run(pool, q->parts[i], gemm_block, &q->jobs[i]);
            total -= q->macs[i];
            q->macs[i] = 0;
            q->owner[i] = -1;
        }
    int parts = threads;
    parts = parts < q->n ? parts : q->n;
    parts = parts < OWNERS_MAX ? parts : OWNERS_MAX;
    if (total < 2 * MIN_BLOCK_MACS)   /* not worth a wake-up */
        parts = 1;
    balance(q, parts > 1 ? parts : 1);
    if (parts > 1)
        ptdp_pool_run(pool, parts, run_owned, q);
    else
        run_owned(q, 0, 1);
    q->n = 0;
}

void ptdp_matmul_group_begin(void)
{
    queue.open = true;
    queue.n = 0;
}

void ptdp_matmul_group_end(void)
{
    if (queue.n > 0)
        flush(ptdp_pool_current(), &queue);
    queue.open = false;
}

/* Queue a product inside a group: `parts`, the blocks it would be cut into
 * alone. */
static void enqueue(ptdp_pool *pool, const gemm_job *j, int parts)
{
    if (queue.n == QUEUE_MAX)
        flush(pool, &queue);
    queue.jobs[queue.n] = *j;
    queue.macs[queue.n] = (double)j->m * j->n * j->k;
    queue.parts[queue.n] = parts;
    queue.owner[queue.n] = 0;
    queue.n++;
}

/* Share a product with the helpers — queued in a group, or split — or
 * false: the caller computes it alone. */
static bool share(gemm_job *job)
{
    ptdp_pool *pool = ptdp_pool_current();
    int threads = ptdp_pool_threads(pool);
    if (threads <= 1)
        return false;
    const int granules = job->m / ptdp_gemm_row_granule();
    int parts = threads < granules ? threads : granules;
    while (parts > 1 && (double)smallest_block(job->m, parts) * job->n * job->k < MIN_BLOCK_MACS)
        parts--;
    if (queue.open) {
        enqueue(pool, job, parts);
        return true;
    }
    if (parts <= 1)
        return false;
    ptdp_pool_run(pool, parts, gemm_block, job);
    return true;
}

bool ptdp_gemm_shared(bool trans_a, bool trans_b, int m, int n, int k,
                      double alpha, const ptdp_real *a, int lda,
                      const ptdp_real *b, int ldb,
                      double beta, ptdp_real *c, int ldc)
{
    gemm_job job = { trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta, a, b, c, NULL };
    return share(&job);
}

void ptdp_gemm_bias(bool trans_a, bool trans_b, int m, int n, int k, const ptdp_real *a, int lda,
                    const ptdp_real *b, int ldb, const ptdp_real *bias, ptdp_real *c, int ldc)
{
    gemm_job job = { trans_a, trans_b, m, n, k, lda, ldb, ldc, 1.0, 1.0, a, b, c, bias };
    if (m <= 0 || n <= 0)
        return;
    if (k <= 0) {   /* the product is empty: C is the bias */
        fill_rows(&job, 0, m);
        return;
    }
    if (!share(&job)) {
        fill_rows(&job, 0, m);
        ptdp_gemm_one(trans_a, trans_b, m, n, k, 1.0, a, lda, b, ldb, 1.0, c, ldc);
    }
}
