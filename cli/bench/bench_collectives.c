/*
 * bench_collectives.c — `ptdp bench collectives`: how fast are the
 * collectives, and how close to the machine's limit?
 *
 * For every operation and size S it reports, in the conventions of NVIDIA's
 * nccl-tests:
 *
 *     time    one call, seconds        (see "How a time is measured")
 *     algbw   S / time                 what the caller sees
 *     busbw   algbw * factor           what each device's links carried,
 *                                      comparable across device counts:
 *       all_reduce                 2(n-1)/n    (each device sends and
 *       reduce_scatter, all_gather  (n-1)/n     receives this share of S)
 *       all_to_all, all_to_allv     (n-1)/n     (S: one device's whole send
 *                                                buffer; it keeps 1/n)
 *       broadcast                    1
 *
 * The ceiling.  Devices here are threads of one process, so a collective is
 * loads and stores, and its limit is the host's memory bandwidth B, measured
 * in the same run with as many threads as devices (bench_memory.c), before
 * and after the collectives, keeping the best.  If an algorithm must move
 * T * S bytes through memory (all devices together) for a collective of S
 * bytes, no run can beat
 *
 *     time >= T * S / B      so   busbw <= factor * B / T      ("bound")
 *
 * and "of bound" is the fraction of that reached.  Buffers that fit in the
 * caches can beat the bound, which is about DRAM.
 *
 * Paired.  On a shared host B itself drifts — the same VM measured 34 and
 * 54 GB/s a minute apart — so a B taken before and after can be far from
 * the B of the moment a sample ran.  So after every timed sample the same
 * device threads also run one STREAM copy (each its own two arrays, the
 * sizes bench_memory.c uses), timed from the first thread's start to the
 * last one's end, and each sample is judged against the copy right after
 * it:
 *
 *     sample k:  [ calls of the collective ][ copy ]    B_k = 2 x bytes / t_copy
 *     "of paired" = median over k of  T x S / (time_k x B_k)
 *
 * (the per-sample ratio, as the MPI column below takes it).  T counts reads and writes
 * as STREAM does (a store is one pass over the bytes), out of place:
 *
 *   all_reduce, shm (default), n devices — device i owns slice i (S/n bytes)
 *   and, one tile at a time, reduces it and stores it into every recv:
 *     read:  slice i of all n send buffers                 n * S/n = S
 *     write: the reduced slice into all n recv buffers     n * S/n = S
 *     per device 2S;  all n devices:                        T_shm = 2n
 *     (n = 2: 4 bytes of traffic per byte reduced; bound busbw = B/4.)
 *     That is the least any out-of-place all_reduce can move: every input
 *     read once, every output written once.
 *   all_reduce, naive: rank 0 reads n buffers and writes S, then n-1 devices
 *     copy S from it: n + 1 + 2(n-1)             T_naive = 3n - 1
 *     (n - 1 more than shm, and one device does the whole reduction alone.)
 *   all_reduce, ring (recv is the workspace): n-1 reduce-scatter steps read
 *     the arriving chunk and the own send chunk and write the sum (3 S/n),
 *     n-1 all-gather steps copy a chunk (2 S/n): 5(n-1)/n per device,
 *                                                T_ring = 5(n-1)
 *     (n = 2: 5; more than shm for every n > 1, and n-1 handshakes per phase.)
 *   reduce_scatter: shm: each reads its slice of n buffers and writes it,
 *     T = n + 1; ring: n-1 steps of 3 S/n per device, T = 3(n-1).
 *   all_gather: each copies its own and the n-1 other slices:        T = 2n
 *   all_to_all(v): each reads n blocks of S/n (one from every member) and
 *     writes them into its recv: 2S per device                       T = 2n
 *     (all_to_allv is timed with equal blocks: the same data as
 *     all_to_all, so the two rows show what the tables cost.)
 *   broadcast: n-1 receivers read S from the root and write it:  T = 2(n-1)
 *   One device: every operation but broadcast is one copy:             T = 2
 *
 * How a time is measured.  After a warm-up, rank 0 sizes the run so that
 * each (operation, size) takes about half a second: `samples` timed samples
 * of `batch` back-to-back calls (thousands of 4 KiB calls, one 64 MiB call).
 * Before each sample all devices meet at a barrier, so they start together;
 * each device times its sample with ptdp_wall_now, the sample's time is the
 * slowest device's, and the reported time per call is the median sample
 * divided by the batch.  After timing, every device checks its result
 * element by element, so a fast wrong answer cannot be reported.
 *
 * Processes (--backend mpi, under mpirun).  A device is a process, a
 * collective is MPI messages, and the yardstick is no longer the memory
 * bus but MPI itself: for every all_reduce size the same processes also
 * time the library's own blocking MPI_Allreduce (no ptdp around it), with
 * the same samples, and the table shows both busbw and their ratio:
 *
 *   --algo mpi      ptdp's all_reduce handing the sum to MPI_Allreduce:
 *                   the ratio is what ptdp's meeting (the calls' all-gather,
 *                   the checks, the accounting) costs on top
 *   default, ring   ptdp's own algorithms over MPI messages, in the
 *                   threads' order of sums (bit-identical to threads): they
 *                   pay one more pass over the data for that, and every
 *                   step is a message round of its own
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../args.h"
#include "../backend.h"
#include "bench.h"
#include "../commands.h"
#include "../model_flags.h"
#include "ptdp/clock.h"
#include "ptdp/comm.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/tensor.h"
#include "ptdp/launch.h"
#include "ptdp/models.h"
#include "ptdp/mpi.h"

#define MAX_SIZES 32
#define MAX_SAMPLES 25            /* odd: the median is one sample         */
#define BUDGET_S 0.5              /* wall time per (operation, size)       */
#define WARMUP_BYTES ((double)(64u << 20))

static const char *const op_names[] = { "all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                        "all_to_all", "all_to_allv" };
static const ptdp_coll op_codes[] = { PTDP_COLL_ALL_REDUCE, PTDP_COLL_REDUCE_SCATTER,
                                      PTDP_COLL_ALL_GATHER, PTDP_COLL_BROADCAST,
                                      PTDP_COLL_ALL_TO_ALL, PTDP_COLL_ALL_TO_ALLV };
#define NOPS 6

typedef struct {
    int devices;
    ptdp_algo algo;
    size_t sizes[MAX_SIZES];
    int nsizes;
    int ops[NOPS];                 /* indexes into op_names               */
    int nops;
    int iters;                     /* 0: size the run by time              */
    bool json;
    double watchdog_s;
    ptdp_backend backend;          /* threads, or MPI processes (backend.h) */
    bool devices_given;
} bench_opts;

/* One (operation, size) of the run. */
typedef struct {
    ptdp_coll op;
    size_t count;                  /* elements of ptdp_real               */
    size_t bytes;                  /* S = count * sizeof(ptdp_real)       */
    int samples, batch;            /* chosen by rank 0                    */
    double time_s;                 /* per call (filled after the run)      */
    double raw_time_s;             /* MPI_Allreduce alone (--backend mpi)  */
    double vs_raw;                 /* ptdp's busbw / MPI_Allreduce's: the
                                      median over samples of each sample's
                                      ratio (taken back to back, so a busy
                                      host's drift cancels)                 */
    double paired_Bps;             /* threads: the median copy bandwidth
                                      measured after each sample            */
    double paired_fraction;        /* the median of each sample's share of
                                      the bound at its own copy's bandwidth */
} bench_point;

typedef struct {
    const bench_opts *o;
    bench_point *points;
    int npoints;
    size_t max_count;
    double *seconds;               /* [(rank * npoints + p) * MAX_SAMPLES + s] */
    double *raw_seconds;           /* the same for MPI_Allreduce alone     */
    double *copy_begin, *copy_end; /* threads: the paired copy after each
                                      sample, ptdp_wall_now at its ends,
                                      indexed as seconds                    */
    size_t copy_n;                 /* doubles in each of a device's two copy
                                      arrays; 0: no paired copy (MPI)       */
    ptdp_algo algo_used;           /* the all_reduce algorithm, resolved  */
} bench_run;

/* ---- traffic and bus factors (see the header comment) ------------------- */

static double bus_factor(ptdp_coll op, int n)
{
    switch (op) {
    case PTDP_COLL_ALL_REDUCE:     return 2.0 * (n - 1) / n;
    case PTDP_COLL_REDUCE_SCATTER:
    case PTDP_COLL_ALL_GATHER:
    case PTDP_COLL_ALL_TO_ALL:
    case PTDP_COLL_ALL_TO_ALLV:    return (double)(n - 1) / n;
    default:                       return 1.0;
    }
}

/* T: bytes that cross memory, all devices together, per byte of S.
 * reduce_scatter and all_gather run as the ring when the all_reduce
 * algorithm is the ring, else as shm (comm.c). */
static double traffic_factor(ptdp_coll op, ptdp_algo algo, int n)
{
    if (n == 1)
        return op == PTDP_COLL_BROADCAST ? 0.0 : 2.0;
    switch (op) {
    case PTDP_COLL_ALL_REDUCE:
        if (algo == PTDP_ALGO_RING)
            return 5.0 * (n - 1);
        return algo == PTDP_ALGO_NAIVE ? 3.0 * n - 1.0 : 2.0 * n;
    case PTDP_COLL_REDUCE_SCATTER:
        return algo == PTDP_ALGO_RING ? 3.0 * (n - 1) : n + 1.0;
    case PTDP_COLL_ALL_GATHER:
    case PTDP_COLL_ALL_TO_ALL:
    case PTDP_COLL_ALL_TO_ALLV:
        return 2.0 * n;
    default:
        return 2.0 * (n - 1);
    }
}

/* ---- the inputs, and the answer every device must end with -------------- */

/* Small integers: any summation order gives the same exact result. */
static ptdp_real input_value(int rank, size_t i) { return (ptdp_real)(rank + 1 + (int)(i % 7)); }

static ptdp_real summed_value(int n, size_t i)
{
    return (ptdp_real)(n * (n + 1) / 2 + n * (int)(i % 7));
}

static void fill_inputs(const bench_point *pt, int rank, int n, ptdp_real *send, ptdp_real *recv)
{
    size_t off, len;
    ptdp_share(pt->count, n, rank, &off, &len);
    switch (pt->op) {
    case PTDP_COLL_ALL_REDUCE:
    case PTDP_COLL_REDUCE_SCATTER:
    case PTDP_COLL_ALL_TO_ALL:      /* block j goes to rank j */
    case PTDP_COLL_ALL_TO_ALLV:
        for (size_t i = 0; i < pt->count; i++) {
            send[i] = input_value(rank, i);
            recv[i] = 0;
        }
        break;
    case PTDP_COLL_ALL_GATHER:
        for (size_t j = 0; j < len; j++)
            send[j] = input_value(rank, off + j);
        for (size_t i = 0; i < pt->count; i++)
            recv[i] = 0;
        break;
    default:   /* broadcast, in place in recv, from rank 0 */
        for (size_t i = 0; i < pt->count; i++)
            recv[i] = rank == 0 ? input_value(0, i) : (ptdp_real)-1;
        break;
    }
}

static int check_result(ptdp_device *dev, const bench_point *pt, const ptdp_real *recv)
{
    int n = dev->world_size;
    size_t off, len;
    ptdp_share(pt->count, n, dev->rank, &off, &len);
    size_t m = pt->op == PTDP_COLL_REDUCE_SCATTER ? len : pt->count;
    int owner = 0;
    size_t owner_end = 0;
    for (size_t j = 0; j < m; j++) {
        ptdp_real want;
        switch (pt->op) {
        case PTDP_COLL_ALL_REDUCE:     want = summed_value(n, j); break;
        case PTDP_COLL_REDUCE_SCATTER: want = summed_value(n, off + j); break;
        case PTDP_COLL_ALL_TO_ALL:     /* block i: rank i's block for me */
        case PTDP_COLL_ALL_TO_ALLV: {
            size_t b = pt->count / (size_t)n;
            want = input_value((int)(j / b), (size_t)dev->rank * b + j % b);
            break;
        }
        case PTDP_COLL_ALL_GATHER: {
            while (j >= owner_end) {           /* whose chunk is element j? */
                size_t o, l;
                ptdp_share(pt->count, n, owner, &o, &l);
                if (j < o + l) {
                    owner_end = o + l;
                    break;
                }
                owner++;
            }
            want = input_value(owner, j);
            break;
        }
        default:                       want = input_value(0, j); break;
        }
        if (recv[j] != want)
            return ptdp_fail(dev, PTDP_ECHECK,
                             "%s of %zu elements: device %d holds %g at element %zu, expected %g",
                             ptdp_coll_name(pt->op), pt->count, dev->rank,
                             (double)recv[j], j, (double)want);
    }
    return 0;
}

/* ---- one device's part of the run ---------------------------------------- */

static int call_op(ptdp_device *dev, const bench_point *pt, ptdp_algo algo,
                   ptdp_real *send, ptdp_real *recv)
{
    ptdp_comm *c = dev->world;
    switch (pt->op) {
    case PTDP_COLL_ALL_REDUCE:
        return ptdp_all_reduce_algo(c, send, recv, pt->count, PTDP_REAL, PTDP_SUM, algo);
    case PTDP_COLL_REDUCE_SCATTER:
        return ptdp_reduce_scatter(c, send, recv, pt->count, PTDP_REAL, PTDP_SUM);
    case PTDP_COLL_ALL_GATHER:
        return ptdp_all_gather(c, send, recv, pt->count, PTDP_REAL);
    case PTDP_COLL_ALL_TO_ALL:
        return ptdp_all_to_all(c, send, recv, pt->count / (size_t)dev->world_size, PTDP_REAL);
    case PTDP_COLL_ALL_TO_ALLV: {
        size_t counts[PTDP_MAX_DEVICES];
        for (int j = 0; j < dev->world_size; j++)
            counts[j] = pt->count / (size_t)dev->world_size;
        return ptdp_all_to_allv(c, send, counts, NULL, recv, counts, NULL, PTDP_REAL);
    }
    default:
        return ptdp_broadcast(c, recv, pt->count, PTDP_REAL, 0);
    }
}

static char *size_label(size_t bytes, char *buf, size_t len)
{
    const char *units[] = { "B", "KiB", "MiB", "GiB" };
    int u = 0;
    while (u < 3 && bytes >= 1024 && bytes % 1024 == 0) {
        bytes /= 1024;
        u++;
    }
    snprintf(buf, len, "%zu %s", bytes, units[u]);
    return buf;
}

/* Rank 0: how many samples of how many calls fill the time budget. */
static void plan_samples(const bench_opts *o, double per_call_s, int plan[2])
{
    double calls = o->iters > 0 ? o->iters : BUDGET_S / (per_call_s > 1e-8 ? per_call_s : 1e-8);
    if (calls < 5 && o->iters == 0)
        calls = 5;
    if (calls > 1e7)
        calls = 1e7;
    int samples = calls < MAX_SAMPLES ? (int)calls : MAX_SAMPLES;
    if (samples < 1)
        samples = 1;
    plan[0] = samples;
    plan[1] = (int)(calls / samples) > 1 ? (int)(calls / samples) : 1;
}

/* The copy paired with sample s of point p: all devices start together,
 * each copies its own array a into c once, and notes when it began and
 * ended (the bandwidth is taken over the span, bench_memory.c says why). */
static int paired_copy(ptdp_device *dev, bench_run *run, int p, int s, double *c, const double *a)
{
    int rc = ptdp_barrier(dev->world);
    size_t at = ((size_t)dev->rank * run->npoints + p) * MAX_SAMPLES + s;
    run->copy_begin[at] = ptdp_wall_now();
    ptdp_stream_copy(c, a, run->copy_n);
    run->copy_end[at] = ptdp_wall_now();
    return rc;
}

/* One device's buffers: the collective's, and the paired copy's (NULL
 * without pairs). */
typedef struct {
    ptdp_real *send, *recv;
    double *copy_a, *copy_c;
} bench_buffers;

/* Point p on this device: warm up, agree on the samples, time them (each
 * followed by MPI_Allreduce's or the paired copy), check the answer. */
static int run_point(ptdp_device *dev, bench_run *run, int p, const bench_buffers *buf)
{
    const bench_opts *o = run->o;
    bench_point *pt = &run->points[p];
    fill_inputs(pt, dev->rank, dev->world_size, buf->send, buf->recv);
    if (dev->rank == 0) {
        char lab[32];
        ptdp_progress("[%d/%d] %s %s on %d devices", p + 1, run->npoints, ptdp_coll_name(pt->op),
                      size_label(pt->bytes, lab, sizeof lab), dev->world_size);
    }

    /* Warm up (caches, page tables, the algorithm's own buffers), and
     * let rank 0 estimate the cost of one call. */
    int rc = 0;
    double warm = WARMUP_BYTES / (double)(pt->bytes ? pt->bytes : 1);
    int nwarm = warm < 2 ? 2 : warm > 1000 ? 1000 : (int)warm;
    double t0 = ptdp_wall_now();
    for (int i = 0; i < nwarm && rc == 0; i++)
        rc = call_op(dev, pt, o->algo, buf->send, buf->recv);
    double per_call = (ptdp_wall_now() - t0) / nwarm;

    int plan[2] = { 0, 0 };
    if (rc == 0 && dev->rank == 0)
        plan_samples(o, per_call, plan);
    if (rc == 0)
        rc = ptdp_broadcast(dev->world, plan, 2, PTDP_I32, 0);

    /* Processes: MPI_Allreduce itself beside it, warmed up alike, each
     * of its samples right after ptdp's, so a busy host slows both. */
    const bool raw = o->backend == PTDP_BACKEND_MPI && pt->op == PTDP_COLL_ALL_REDUCE;
    double *raw_mine = run->raw_seconds + ((size_t)dev->rank * run->npoints + p) * MAX_SAMPLES;
    if (rc == 0 && raw)
        rc = ptdp_mpi_time_all_reduce(dev, buf->send, buf->recv, pt->count, PTDP_REAL, 1, nwarm, raw_mine);

    /* The timed samples: start together, time, keep the slowest. */
    double *mine = run->seconds + ((size_t)dev->rank * run->npoints + p) * MAX_SAMPLES;
    for (int s = 0; s < plan[0] && rc == 0; s++) {
        rc = ptdp_barrier(dev->world);
        double start = ptdp_wall_now();
        for (int b = 0; b < plan[1] && rc == 0; b++)
            rc = call_op(dev, pt, o->algo, buf->send, buf->recv);
        mine[s] = (ptdp_wall_now() - start) / plan[1];
        if (rc == 0 && raw)
            rc = ptdp_mpi_time_all_reduce(dev, buf->send, buf->recv, pt->count, PTDP_REAL, 1, plan[1],
                                          &raw_mine[s]);
        if (rc == 0 && buf->copy_a)
            rc = paired_copy(dev, run, p, s, buf->copy_c, buf->copy_a);
    }
    if (rc == 0)
        rc = check_result(dev, pt, buf->recv);   /* MPI_Allreduce's answer, when it ran last */
    if (dev->rank == 0) {
        pt->samples = plan[0];
        pt->batch = plan[1];
    }
    return rc;
}

static int bench_device(ptdp_device *dev, void *arg)
{
    bench_run *run = arg;
    size_t bytes = run->max_count * sizeof(ptdp_real), copy_bytes = run->copy_n * sizeof(double);
    bench_buffers buf = { 0 };
    buf.send = ptdp_alloc(dev, bytes, PTDP_MEM_COMM, "bench.send");
    buf.recv = ptdp_alloc(dev, bytes, PTDP_MEM_COMM, "bench.recv");
    if (copy_bytes) {
        buf.copy_a = ptdp_alloc(dev, copy_bytes, PTDP_MEM_OTHER, "bench.copy_a");
        buf.copy_c = ptdp_alloc(dev, copy_bytes, PTDP_MEM_OTHER, "bench.copy_c");
    }
    if (!buf.send || !buf.recv || (copy_bytes && (!buf.copy_a || !buf.copy_c)))
        return dev->status ? dev->status : PTDP_ENOMEM;
    for (size_t i = 0; i < run->copy_n; i++) {      /* touch every page before timing */
        buf.copy_a[i] = 1.0;
        buf.copy_c[i] = 0.0;
    }
    if (dev->rank == 0)
        run->algo_used = run->o->algo == PTDP_ALGO_DEFAULT ? dev->algo : run->o->algo;

    int rc = 0;
    for (int p = 0; p < run->npoints && rc == 0; p++)
        rc = run_point(dev, run, p, &buf);
    /* Processes: each host holds its own device's samples; rank 0 reports
     * them all (launch.h). */
    size_t nsec = (size_t)dev->world_size * run->npoints * MAX_SAMPLES * sizeof(double);
    if (rc == 0 && !ptdp_host_shared(dev))
        rc = ptdp_host_merge(dev, run->seconds, nsec);
    if (rc == 0 && !ptdp_host_shared(dev))
        rc = ptdp_host_merge(dev, run->raw_seconds, nsec);
    if (rc == 0 && !ptdp_host_shared(dev))
        rc = ptdp_host_merge(dev, run->points, (size_t)run->npoints * sizeof *run->points);
    if (rc == 0 && !ptdp_host_shared(dev))
        rc = ptdp_host_merge(dev, &run->algo_used, sizeof run->algo_used);
    if (copy_bytes) {
        ptdp_free(dev, buf.copy_c);
        ptdp_free(dev, buf.copy_a);
    }
    ptdp_free(dev, buf.recv);
    ptdp_free(dev, buf.send);
    return rc;
}

/* ---- after the run: times, bandwidths, the report ------------------------ */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The slowest device of each sample of point p. */
static void slowest_of(const bench_run *run, const double *seconds, int p, int n, double *slowest)
{
    for (int s = 0; s < run->points[p].samples; s++) {
        slowest[s] = 0.0;
        for (int r = 0; r < n; r++) {
            double t = seconds[((size_t)r * run->npoints + p) * MAX_SAMPLES + s];
            if (t > slowest[s])
                slowest[s] = t;
        }
    }
}

static double median(double *x, int k)
{
    qsort(x, (size_t)k, sizeof(double), cmp_double);
    return k % 2 ? x[k / 2] : 0.5 * (x[k / 2 - 1] + x[k / 2]);
}

/* Threads: each sample's copy bandwidth (all devices' 2 x copy_n doubles
 * over the span of the copy), and the sample's share of the bound at that
 * bandwidth, T S / (time B).  Their medians go into the point. */
static void reduce_paired(bench_run *run, int p, int n, const double *time_s)
{
    bench_point *pt = &run->points[p];
    double bw[MAX_SAMPLES], share[MAX_SAMPLES];
    double T = traffic_factor(pt->op, run->algo_used, n);
    for (int s = 0; s < pt->samples; s++) {
        double begin = 0.0, end = 0.0;
        for (int r = 0; r < n; r++) {
            size_t at = ((size_t)r * run->npoints + p) * MAX_SAMPLES + s;
            begin = r == 0 || run->copy_begin[at] < begin ? run->copy_begin[at] : begin;
            end = r == 0 || run->copy_end[at] > end ? run->copy_end[at] : end;
        }
        bw[s] = end > begin ? 2.0 * sizeof(double) * (double)run->copy_n * n / (end - begin) : 0.0;
        share[s] = time_s[s] > 0 && bw[s] > 0 ? T * (double)pt->bytes / (time_s[s] * bw[s]) : 0.0;
    }
    pt->paired_Bps = median(bw, pt->samples);
    pt->paired_fraction = T > 0 && bus_factor(pt->op, n) > 0 ? median(share, pt->samples) : 0.0;
}

/* Per point: the slowest device of each sample, then the median sample;
 * beside MPI_Allreduce, the median of the samples' ratios; beside the
 * paired copies, the median of the samples' shares of their bound. */
static void reduce_times(bench_run *run, int n)
{
    for (int p = 0; p < run->npoints; p++) {
        bench_point *pt = &run->points[p];
        double mine[MAX_SAMPLES], raw[MAX_SAMPLES], ratio[MAX_SAMPLES];
        slowest_of(run, run->seconds, p, n, mine);
        slowest_of(run, run->raw_seconds, p, n, raw);
        if (run->copy_n > 0)
            reduce_paired(run, p, n, mine);
        for (int s = 0; s < pt->samples; s++)
            ratio[s] = mine[s] > 0 ? raw[s] / mine[s] : 0.0;
        pt->vs_raw = median(ratio, pt->samples);
        pt->time_s = median(mine, pt->samples);
        pt->raw_time_s = median(raw, pt->samples);
    }
}

typedef struct {
    double algbw, busbw, traffic, bound_busbw, fraction;
} bench_figures;

static bench_figures figures_of(const bench_point *pt, ptdp_algo algo, int n, double ceiling)
{
    bench_figures f;
    f.algbw = pt->time_s > 0 ? (double)pt->bytes / pt->time_s : 0.0;
    f.busbw = f.algbw * bus_factor(pt->op, n);
    f.traffic = traffic_factor(pt->op, algo, n);
    f.bound_busbw = f.traffic > 0 ? bus_factor(pt->op, n) * ceiling / f.traffic : 0.0;
    f.fraction = f.bound_busbw > 0 ? f.busbw / f.bound_busbw : 0.0;
    return f;
}

/* Online cores, or 0 if the system does not say. */
static long online_cores(void)
{
#ifdef _SC_NPROCESSORS_ONLN
    return sysconf(_SC_NPROCESSORS_ONLN);
#else
    return 0;
#endif
}

/* Processes: no memory ceiling (the bytes go through MPI's transport),
 * the yardstick is MPI_Allreduce timed in the same run. */
static void print_table_processes(const bench_run *run, int n)
{
    printf("each all_reduce size is also timed as MPI_Allreduce alone (blocking, no ptdp around it)\n\n");
    printf("%-15s %8s %9s %10s %9s %9s %12s %10s\n", "operation", "size", "calls", "time(us)", "algbw",
           "busbw", "MPI busbw", "ptdp/MPI");
    printf("%-15s %8s %9s %10s %9s %9s %12s %10s\n", "", "", "", "", "(GB/s)", "(GB/s)", "(GB/s)", "");
    for (int p = 0; p < run->npoints; p++) {
        const bench_point *pt = &run->points[p];
        bench_figures f = figures_of(pt, run->algo_used, n, 0.0);
        char lab[32], raw[16] = "-", ratio[16] = "-";
        if (pt->op == PTDP_COLL_ALL_REDUCE && pt->raw_time_s > 0) {
            double raw_busbw = (double)pt->bytes / pt->raw_time_s * bus_factor(pt->op, n);
            snprintf(raw, sizeof raw, "%.2f", raw_busbw / 1e9);
            snprintf(ratio, sizeof ratio, "%.2fx", pt->vs_raw);
        }
        double us = pt->time_s * 1e6;
        printf("%-15s %8s %9lld %10.*f %9.2f %9.2f %12s %10s\n", ptdp_coll_name(pt->op),
               size_label(pt->bytes, lab, sizeof lab), (long long)pt->samples * pt->batch,
               us < 10 ? 3 : us < 1000 ? 1 : 0, us, f.algbw / 1e9, f.busbw / 1e9, raw, ratio);
    }
    printf("\nbusbw = algbw x 2(n-1)/n (all_reduce), (n-1)/n (reduce_scatter, all_gather, all_to_all(v)),\n"
           "        1 (broadcast).\n"
           "ptdp/MPI: the median over samples of each sample's ratio (each MPI_Allreduce sample runs\n"
           "right after ptdp's, so a busy host slows both alike).\n"
           "--algo mpi hands the sum to MPI_Allreduce; ptdp's own algorithms (default, ring) keep the\n"
           "threads' order of sums over MPI messages: bit-identical to threads, at the cost of their steps.\n");
}

static void print_table(const bench_run *run, const ptdp_membw *m, int n)
{
    double ceiling = ptdp_membw_ceiling(m);
    long cores = online_cores();
    const bool procs = run->o->backend == PTDP_BACKEND_MPI;
    printf("ptdp bench collectives: %d device%s%s on %ld core%s, elements %s, all_reduce algorithm %s%s\n",
           n, n > 1 ? "s" : "", procs ? " (MPI processes)" : "", cores, cores == 1 ? "" : "s", PTDP_REAL_NAME,
           ptdp_algo_name(run->algo_used),
           run->o->algo == PTDP_ALGO_DEFAULT ? " (default)" : "");
    if (procs) {
        print_table_processes(run, n);
        return;
    }
    if (cores > 0 && n > cores)
        printf("note: devices outnumber cores, so waiting devices sleep instead of spinning\n"
               "      and every time includes the operating system's thread switches.\n");
    printf("memory bandwidth with %d thread%s (best of before and after): copy %.2f GB/s, "
           "triad %.2f GB/s -> ceiling B = %.2f GB/s\n\n",
           n, n > 1 ? "s" : "", m->copy_Bps / 1e9, m->triad_Bps / 1e9, ceiling / 1e9);
    printf("%-15s %8s %9s %10s %9s %9s %4s %9s %8s %9s %9s\n",
           "operation", "size", "calls", "time(us)", "algbw", "busbw", "T", "bound", "of bound", "paired B",
           "of paired");
    printf("%-15s %8s %9s %10s %9s %9s %4s %9s %8s %9s %9s\n",
           "", "", "", "", "(GB/s)", "(GB/s)", "", "(GB/s)", "", "(GB/s)", "");
    for (int p = 0; p < run->npoints; p++) {
        const bench_point *pt = &run->points[p];
        bench_figures f = figures_of(pt, run->algo_used, n, ceiling);
        char lab[32], bound[16] = "-", frac[16] = "-", paired[16] = "-", pfrac[16] = "-";
        if (f.bound_busbw > 0) {
            snprintf(bound, sizeof bound, "%.2f", f.bound_busbw / 1e9);
            snprintf(frac, sizeof frac, "%.0f%%", 100.0 * f.fraction);
        }
        if (pt->paired_fraction > 0) {
            snprintf(paired, sizeof paired, "%.2f", pt->paired_Bps / 1e9);
            snprintf(pfrac, sizeof pfrac, "%.0f%%", 100.0 * pt->paired_fraction);
        }
        double us = pt->time_s * 1e6;
        printf("%-15s %8s %9lld %10.*f %9.2f %9.2f %4.0f %9s %8s %9s %9s\n",
               ptdp_coll_name(pt->op), size_label(pt->bytes, lab, sizeof lab),
               (long long)pt->samples * pt->batch, us < 10 ? 3 : us < 1000 ? 1 : 0, us,
               f.algbw / 1e9, f.busbw / 1e9, f.traffic, bound, frac, paired, pfrac);
    }
    printf("\nbusbw = algbw x 2(n-1)/n (all_reduce), (n-1)/n (reduce_scatter, all_gather, all_to_all(v)),\n"
           "        1 (broadcast).\n"
           "bound = busbw if the T x S bytes each call must move crossed memory at B;\n"
           "        buffers that fit in the caches can beat it.  T per algorithm: cli/bench/bench_collectives.c.\n"
           "paired: B measured again after every sample (a STREAM copy on the same threads, paired B its\n"
           "        median); of paired = the median of each sample's share of the bound at its own copy's B.\n");
}

static void print_json(const bench_run *run, const ptdp_membw *m, int n)
{
    double ceiling = ptdp_membw_ceiling(m);
    for (int p = 0; p < run->npoints; p++) {
        const bench_point *pt = &run->points[p];
        bench_figures f = figures_of(pt, run->algo_used, n, ceiling);
        /* reduce_scatter and all_gather run as the ring only with --algo ring */
        const char *algo = pt->op == PTDP_COLL_ALL_REDUCE ? ptdp_algo_name(run->algo_used)
                         : pt->op == PTDP_COLL_BROADCAST || pt->op == PTDP_COLL_ALL_TO_ALL ||
                           pt->op == PTDP_COLL_ALL_TO_ALLV ? ""
                         : run->algo_used == PTDP_ALGO_RING ? "ring" : "shm";
        printf("{\"op\": \"%s\", \"algo\": \"%s\", \"devices\": %d, \"dtype\": \"%s\", "
               "\"bytes\": %zu, \"count\": %zu, \"samples\": %d, \"batch\": %d, "
               "\"time_us\": %.6g, \"algbw_GBps\": %.6g, \"busbw_GBps\": %.6g, "
               "\"mem_copy_GBps\": %.6g, \"mem_triad_GBps\": %.6g, \"traffic_factor\": %.6g, "
               "\"bound_busbw_GBps\": %.6g, \"fraction_of_bound\": %.6g, \"backend\": \"%s\"",
               ptdp_coll_name(pt->op), algo, n, PTDP_REAL_NAME, pt->bytes, pt->count,
               pt->samples, pt->batch, pt->time_s * 1e6, f.algbw / 1e9, f.busbw / 1e9,
               m->copy_Bps / 1e9, m->triad_Bps / 1e9, f.traffic,
               f.bound_busbw / 1e9, f.fraction, ptdp_backend_names[run->o->backend]);
        if (pt->paired_fraction > 0)
            printf(", \"paired_copy_GBps\": %.6g, \"paired_fraction_of_bound\": %.6g", pt->paired_Bps / 1e9,
                   pt->paired_fraction);
        printf("}\n");
        if (run->o->backend == PTDP_BACKEND_MPI && pt->op == PTDP_COLL_ALL_REDUCE && pt->raw_time_s > 0) {
            double algbw = (double)pt->bytes / pt->raw_time_s;
            printf("{\"op\": \"all_reduce\", \"algo\": \"MPI_Allreduce\", \"devices\": %d, \"dtype\": \"%s\", "
                   "\"bytes\": %zu, \"count\": %zu, \"samples\": %d, \"batch\": %d, "
                   "\"time_us\": %.6g, \"algbw_GBps\": %.6g, \"busbw_GBps\": %.6g, \"backend\": \"mpi\", "
                   "\"impl\": \"mpi_raw\", \"ptdp_vs_mpi\": %.6g}\n", n, PTDP_REAL_NAME, pt->bytes, pt->count,
                   pt->samples, pt->batch, pt->raw_time_s * 1e6, algbw / 1e9, algbw * bus_factor(pt->op, n) / 1e9,
                   pt->vs_raw);
        }
    }
}

/* ---- the command ---------------------------------------------------------- */

static void collectives_usage(void)
{
    printf("usage: ptdp bench collectives [--devices N] [--algo ring|naive|shm|default|mpi]\n"
           "                              [--sizes 4K,256K,4M,64M] [--ops LIST] [--iters K]\n"
           "                              [--json] [--watchdog S] [--backend threads|mpi]\n"
           "\n"
           "Time collectives on N simulated devices and compare them with the host's\n"
           "memory bandwidth, measured in the same run (the bound no algorithm beats).\n"
           "\n"
           "  --devices N    devices (threads), 1-%d (default 2)\n"
           "  --algo A       all_reduce algorithm: default (= shm), shm, ring or naive; mpi\n"
           "                 (MPI_Allreduce, with --backend mpi)\n"
           "  --backend B    threads (default) or mpi: one process per device under\n"
           "                 mpirun -n N (N devices), beside MPI_Allreduce timed in the same run\n"
           "  --sizes LIST   buffer sizes S, K/M/G = 1024-based (default 4K,256K,4M,64M)\n"
           "  --ops LIST     any of all_reduce,reduce_scatter,all_gather,broadcast,all_to_all,\n"
           "                 all_to_allv (default all)\n"
           "  --iters K      timed calls per operation and size (default: ~0.5 s worth)\n"
           "  --json         one JSON object per result on stdout, instead of the table\n"
           "  --watchdog S   fail if a collective waits longer than S seconds (default 60)\n"
           "\n"
           "time: median over samples of the slowest device; busbw: nccl-tests conventions.\n",
           PTDP_MAX_DEVICES);
}

static int parse_collectives(int argc, char **argv, bench_opts *o)
{
    memset(o, 0, sizeof *o);
    o->devices = 2;
    o->algo = PTDP_ALGO_DEFAULT;
    const size_t defaults[] = { (size_t)4 << 10, (size_t)256 << 10, (size_t)4 << 20, (size_t)64 << 20 };
    o->nsizes = 4;
    memcpy(o->sizes, defaults, sizeof defaults);
    o->nops = NOPS;
    for (int i = 0; i < NOPS; i++)
        o->ops[i] = i;
    o->watchdog_s = PTDP_DEFAULT_WATCHDOG_S;

    const char *algo_names[PTDP_ALGO_COUNT];      /* "default", "naive", … */
    for (int i = 0; i < PTDP_ALGO_COUNT; i++)
        algo_names[i] = ptdp_algo_name((ptdp_algo)i);

    ptdp_args a;
    ptdp_args_init(&a, "bench collectives", argc, argv, 1);
    while (ptdp_args_next(&a)) {
        int rc, algo;
        if (ptdp_args_is(&a, "--help")) {
            collectives_usage();
            return -1;
        } else if (ptdp_args_is(&a, "--devices")) {
            rc = ptdp_args_int(&a, 1, PTDP_MAX_DEVICES, &o->devices);
            o->devices_given = true;
        } else if (ptdp_args_is(&a, "--backend")) {
            int b = 0;
            rc = ptdp_args_enum(&a, ptdp_backend_names, 2, &b);
            o->backend = b == 1 ? PTDP_BACKEND_MPI : PTDP_BACKEND_THREADS;
        } else if (ptdp_args_is(&a, "--algo")) {
            rc = ptdp_args_enum(&a, algo_names, PTDP_ALGO_COUNT, &algo);
            if (rc == 0)
                o->algo = (ptdp_algo)algo;
        } else if (ptdp_args_is(&a, "--sizes")) {
            rc = ptdp_args_size_list(&a, sizeof(ptdp_real), (size_t)1 << 30,
                                     o->sizes, MAX_SIZES, &o->nsizes);
        } else if (ptdp_args_is(&a, "--ops")) {
            rc = ptdp_args_enum_list(&a, op_names, NOPS, o->ops, NOPS, &o->nops);
        } else if (ptdp_args_is(&a, "--iters")) {
            rc = ptdp_args_int(&a, 1, 10000000, &o->iters);
        } else if (ptdp_args_is(&a, "--json")) {
            rc = ptdp_args_switch(&a, &o->json);
        } else if (ptdp_args_is(&a, "--watchdog")) {
            rc = ptdp_args_double(&a, 0.1, 86400, &o->watchdog_s);
        } else {
            rc = ptdp_args_unknown(&a);
        }
        if (rc)
            return PTDP_EXIT_USAGE;
    }
    return 0;
}

static void free_points(bench_run *run)
{
    free(run->points);
    free(run->seconds);
    free(run->raw_seconds);
    free(run->copy_begin);
    free(run->copy_end);
}

/* The points of the run, every operation at every size, with room for
 * every device's samples.  0, or PTDP_ENOMEM. */
static int plan_points(bench_run *run, const bench_opts *o)
{
    memset(run, 0, sizeof *run);
    run->o = o;
    run->npoints = o->nops * o->nsizes;
    run->points = calloc((size_t)run->npoints, sizeof *run->points);
    run->seconds = calloc((size_t)o->devices * run->npoints * MAX_SAMPLES, sizeof(double));
    run->raw_seconds = calloc((size_t)o->devices * run->npoints * MAX_SAMPLES, sizeof(double));
    run->copy_begin = calloc((size_t)o->devices * run->npoints * MAX_SAMPLES, sizeof(double));
    run->copy_end = calloc((size_t)o->devices * run->npoints * MAX_SAMPLES, sizeof(double));
    if (!run->points || !run->seconds || !run->raw_seconds || !run->copy_begin || !run->copy_end) {
        free_points(run);
        return PTDP_ENOMEM;
    }
    if (o->backend == PTDP_BACKEND_THREADS)
        run->copy_n = ptdp_stream_array_bytes(o->devices) / sizeof(double);
    for (int k = 0; k < o->nops; k++) {
        for (int s = 0; s < o->nsizes; s++) {
            bench_point *pt = &run->points[k * o->nsizes + s];
            pt->op = op_codes[o->ops[k]];
            pt->count = o->sizes[s] / sizeof(ptdp_real);
            if (pt->op == PTDP_COLL_ALL_TO_ALL || pt->op == PTDP_COLL_ALL_TO_ALLV)
                pt->count -= pt->count % (size_t)o->devices;   /* n equal blocks */
            pt->bytes = pt->count * sizeof(ptdp_real);
            if (pt->count > run->max_count)
                run->max_count = pt->count;
        }
    }
    return 0;
}

/* Time every point on the devices; the result says who failed, if any. */
static int time_points(bench_run *run, ptdp_launch_result *result)
{
    const bench_opts *o = run->o;
    memset(result, 0, sizeof *result);
    ptdp_launch_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.device_mem = 2 * run->max_count * sizeof(ptdp_real) + 2 * run->copy_n * sizeof(double) +
                      ((size_t)16 << 20);
    opts.watchdog_s = o->watchdog_s;
    opts.algo = o->algo;
    opts.result = result;
    opts.backend = o->backend;
    return ptdp_launch(o->devices, bench_device, run, &opts);
}

/* The ceiling once more: a shared or throttled host's bandwidth drifts, and
 * a ceiling should be the best the host showed during the run, so keep the
 * faster of the two measurements (a failed second one changes nothing). */
static void measure_ceiling_again(ptdp_membw *m, const bench_opts *o)
{
    ptdp_membw again;
    char msg[PTDP_MSG_MAX];
    ptdp_progress("measuring memory bandwidth again");
    if (ptdp_bench_memory(o->devices, o->watchdog_s, &again, msg, sizeof msg) == 0) {
        if (again.copy_Bps > m->copy_Bps)
            m->copy_Bps = again.copy_Bps;
        if (again.triad_Bps > m->triad_Bps)
            m->triad_Bps = again.triad_Bps;
    }
}

static int run_collectives(const bench_opts *o)
{
    int n = o->devices;
    char msg[PTDP_MSG_MAX];

    /* 1. The ceiling: memory bandwidth with n threads (before, and again
     *    after the collectives).  Processes have MPI_Allreduce instead. */
    ptdp_membw m;
    memset(&m, 0, sizeof m);
    const bool threads = o->backend == PTDP_BACKEND_THREADS;
    if (threads)
        ptdp_progress("measuring memory bandwidth with %d thread%s", n, n > 1 ? "s" : "");
    if (threads && ptdp_bench_memory(n, o->watchdog_s, &m, msg, sizeof msg) != 0) {
        ptdp_progress_done();
        fprintf(stderr, "ptdp bench collectives: %s\n", msg);
        return PTDP_EXIT_FAIL;
    }

    /* 2. The points: every operation at every size. */
    bench_run run;
    if (plan_points(&run, o) != 0) {
        fprintf(stderr, "ptdp bench collectives: out of host memory\n");
        return PTDP_EXIT_FAIL;
    }

    /* 3. Time them on n devices, 4. then the ceiling again. */
    ptdp_launch_result result;
    int rc = time_points(&run, &result);
    if (rc == 0 && threads)
        measure_ceiling_again(&m, o);
    ptdp_progress_done();

    if (rc != 0) {
        fprintf(stderr, "ptdp bench collectives: device %d failed: %s\n",
                result.failed_rank, result.message);
    } else if (ptdp_host_is_root(&(ptdp_launch_opts){ .backend = o->backend })) {
        reduce_times(&run, n);
        if (o->json)
            print_json(&run, &m, n);
        else
            print_table(&run, &m, n);
    }
    ptdp_launch_result_free(&result);
    free_points(&run);
    return rc == 0 ? PTDP_EXIT_OK : PTDP_EXIT_FAIL;
}

/* parse, then run: every flag of this command stands alone (each is checked
 * as it is read), so there is nothing left for a validate step to check. */
static int collectives_cmd(int argc, char **argv)
{
    bench_opts o;
    ptdp_cli_backend_quiet();          /* under mpirun: rank 0 speaks */
    int rc = parse_collectives(argc, argv, &o);
    if (rc < 0)
        return PTDP_EXIT_OK;           /* --help */
    if (rc > 0)
        return rc;
    if (o.algo == PTDP_ALGO_MPI && o.backend != PTDP_BACKEND_MPI)
        return ptdp_usage_error("bench collectives", "--algo mpi is MPI's own MPI_Allreduce: it needs "
                                "--backend mpi");
    int world;
    if ((rc = ptdp_cli_backend_start("bench collectives", o.backend, &world)) != 0)
        return rc;
    if (o.backend == PTDP_BACKEND_MPI) {
        /* One device per process: the world is mpirun's. */
        if (o.devices_given && o.devices != world)
            rc = ptdp_usage_error("bench collectives", "--devices %d with --backend mpi: mpirun started %d "
                                  "process%s, one per device (leave --devices out, or mpirun -n %d)",
                                  o.devices, world, world == 1 ? "" : "es", o.devices);
        o.devices = world;
    }
    if (rc == 0)
        rc = run_collectives(&o);
    ptdp_cli_backend_finish(o.backend);
    return rc;
}

static bool plannable(const ptdp_model_caps *caps) { return caps->plannable; }

/* The first registered model with an activations table (the GPT's). */
static const ptdp_model_cli *activations_model(void)
{
    for (int i = 0; i < ptdp_model_count(); i++) {
        const ptdp_model_cli *cli = ptdp_model_cli_for(ptdp_model_at(i));
        if (cli->bench_activations != NULL)
            return cli;
    }
    return NULL;
}

/* The first registered model with a mixture of experts to bench (the GPT's). */
static const ptdp_model_cli *moe_model(void)
{
    for (int i = 0; i < ptdp_model_count(); i++) {
        const ptdp_model_cli *cli = ptdp_model_cli_for(ptdp_model_at(i));
        if (cli->bench_moe != NULL)
            return cli;
    }
    return NULL;
}

static void bench_usage(FILE *f)
{
    fprintf(f, "usage: ptdp bench <what> [flags]\n"
           "\n"
           "  collectives   time all_reduce, reduce_scatter, all_gather, broadcast and\n"
           "                all_to_all(v) against the host's memory bandwidth\n"
           "  memory        the host's memory bandwidth alone (STREAM copy and triad)\n"
           "  train         the reference %s's training step: GEMMs, optimizer, dp=2\n"
           "  floor         the least time a step could take on N cores: its GEMM flops at the\n"
           "                square sgemm's speed plus AdamW's bytes at the copy bandwidth\n"
           "  zero          ZeRO 0-3: model states per device by formula and arena, DP bytes,\n"
           "                the virtual step with and without --overlap\n"
           "  plan          ptdp plan's search: seconds and layouts/s, the 1T %s on 3072 GPUs\n"
           "  activations   Korthikanti et al.'s table: what a transformer block keeps under TP, SP,\n"
           "                selective and full recomputation, formula beside the arena\n"
           "  moe           dense beside a mixture of experts of equal active parameters at ep 1, 2, 4:\n"
           "                virtual step time, bytes by group, EP all-to-alls beside the uniform estimate\n"
           "  fp8           one model trained in %s, bf16 and each FP8 recipe: the loss curves' gap,\n"
           "                held-out sums, wall time\n"
           "\n"
           "`ptdp bench <what> --help` lists its flags.\n", ptdp_model_cli_noun(ptdp_model_at(0)),
           ptdp_model_cli_noun(ptdp_model_first_with(plannable)), PTDP_REAL_NAME);
}

int ptdp_cmd_bench(int argc, char **argv)
{
    if (argc < 2) {
        bench_usage(stderr);
        return PTDP_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        bench_usage(stdout);
        return PTDP_EXIT_OK;
    }
    if (strcmp(argv[1], "collectives") == 0)
        return collectives_cmd(argc - 1, argv + 1);
    if (strcmp(argv[1], "memory") == 0)
        return ptdp_bench_memory_cmd(argc - 1, argv + 1);
    if (strcmp(argv[1], "train") == 0)
        return ptdp_bench_train_cmd(argc - 1, argv + 1);
    if (strcmp(argv[1], "zero") == 0)
        return ptdp_bench_zero_cmd(argc - 1, argv + 1);
    if (strcmp(argv[1], "floor") == 0)
        return ptdp_bench_floor_cmd(argc - 1, argv + 1);
    if (strcmp(argv[1], "plan") == 0)
        return ptdp_bench_plan_cmd(argc - 1, argv + 1);
    if (strcmp(argv[1], "fp8") == 0)
        return ptdp_bench_fp8_cmd(argc - 1, argv + 1);
    if (strcmp(argv[1], "activations") == 0) {
        const ptdp_model_cli *cli = activations_model();
        if (cli == NULL)
            return ptdp_usage_error("bench", "activations: no registered model has a transformer block to "
                                    "tabulate");
        return cli->bench_activations(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "moe") == 0) {
        const ptdp_model_cli *cli = moe_model();
        if (cli == NULL)
            return ptdp_usage_error("bench", "moe: no registered model has a mixture of experts to bench");
        return cli->bench_moe(argc - 1, argv + 1);
    }
    return ptdp_usage_error("bench", "unknown benchmark '%s': use collectives, memory, train, floor, zero, "
                            "plan, activations, moe or fp8 "
                            "(see ptdp bench --help)", argv[1]);
}
