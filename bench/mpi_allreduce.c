/*
 * mpi_allreduce.c — the yardstick: Open MPI's MPI_Allreduce, timed exactly as
 * `ptdp bench collectives` times ptdp's all_reduce.
 *
 *     mpirun -np 2 build/bench/mpi_allreduce 4K,4M,64M
 *
 * Same method, so the two columns of bench/compare_mpi.sh compare like
 * with like: float elements, SUM, out of place; a warm-up; rank 0 sizes the
 * run to about half a second per size (samples of back-to-back calls); a
 * barrier before each sample; a sample's time is the slowest rank's; the
 * time per call is the median sample over the batch; the result is checked
 * element by element afterwards.  busbw = algbw * 2(n-1)/n (nccl-tests).
 *
 * Prints one JSON object per size.  Built only when Meson finds MPI (option
 * mpi_bench); Open MPI is a comparison here, never a dependency of ptdp.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZES 32
#define MAX_SAMPLES 25
#define BUDGET_S 0.5
#define WARMUP_BYTES (64.0 * 1024 * 1024)

/* "4K", "64M", "1G", "4096" (1024-based, as ptdp_parse_size). */
static int parse_size(const char *s, size_t *out)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return -1;
    int shift = 0;
    if (*end == 'K')
        shift = 10;
    else if (*end == 'M')
        shift = 20;
    else if (*end == 'G')
        shift = 30;
    if (shift)
        end++;
    if (*end != '\0' || v == 0 || v > ((1ull << 32) >> shift))
        return -1;
    *out = (size_t)(v << shift);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Time MPI_Allreduce of `count` floats; rank 0 prints the result. */
static int bench_size(size_t count, float *send, float *recv, int rank, int n)
{
    for (size_t i = 0; i < count; i++) {
        send[i] = (float)(rank + 1 + (int)(i % 7));
        recv[i] = 0.0f;
    }
    double warm = WARMUP_BYTES / (double)(count * sizeof(float));
    int nwarm = warm < 2 ? 2 : warm > 1000 ? 1000 : (int)warm;
    double t0 = MPI_Wtime();
    for (int i = 0; i < nwarm; i++)
        MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double per_call = (MPI_Wtime() - t0) / nwarm;

    int plan[2];
    if (rank == 0) {
        double calls = BUDGET_S / (per_call > 1e-8 ? per_call : 1e-8);
        if (calls < 5)
            calls = 5;
        if (calls > 1e7)
            calls = 1e7;
        plan[0] = calls < MAX_SAMPLES ? (int)calls : MAX_SAMPLES;
        plan[1] = (int)(calls / plan[0]) > 1 ? (int)(calls / plan[0]) : 1;
    }
    MPI_Bcast(plan, 2, MPI_INT, 0, MPI_COMM_WORLD);

    double mine[MAX_SAMPLES], slowest[MAX_SAMPLES];
    for (int s = 0; s < plan[0]; s++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        for (int b = 0; b < plan[1]; b++)
            MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        mine[s] = (MPI_Wtime() - start) / plan[1];
    }
    MPI_Reduce(mine, slowest, plan[0], MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    int bad = 0;
    for (size_t i = 0; i < count && !bad; i++)
        if (recv[i] != (float)(n * (n + 1) / 2 + n * (int)(i % 7)))
            bad = 1;
    int any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_bad) {
        if (rank == 0)
            fprintf(stderr, "mpi_allreduce: wrong result at %zu floats\n", count);
        return 1;
    }

    if (rank == 0) {
        qsort(slowest, (size_t)plan[0], sizeof(double), cmp_double);
        int k = plan[0];
        double t = k % 2 ? slowest[k / 2] : 0.5 * (slowest[k / 2 - 1] + slowest[k / 2]);
        double bytes = (double)count * sizeof(float);
        double algbw = bytes / t;
        printf("{\"op\": \"all_reduce\", \"impl\": \"mpi\", \"ranks\": %d, \"bytes\": %zu, "
               "\"samples\": %d, \"batch\": %d, \"time_us\": %.6g, \"algbw_GBps\": %.6g, "
               "\"busbw_GBps\": %.6g}\n",
               n, count * sizeof(float), plan[0], plan[1], t * 1e6, algbw / 1e9,
               algbw * 2.0 * (n - 1) / n / 1e9);
        fflush(stdout);
    }
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);

    const char *list = argc > 1 ? argv[1] : "4K,256K,4M,64M";
    size_t sizes[MAX_SIZES];
    int nsizes = 0;
    size_t max_count = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        size_t bytes;
        if (nsizes == MAX_SIZES || parse_size(tok, &bytes) != 0 || bytes < sizeof(float)) {
            if (rank == 0)
                fprintf(stderr, "usage: mpi_allreduce [SIZES]   e.g. 4K,4M,64M (bad size '%s')\n", tok);
            MPI_Finalize();
            return 2;
        }
        sizes[nsizes++] = bytes / sizeof(float);
        if (bytes / sizeof(float) > max_count)
            max_count = bytes / sizeof(float);
    }

    float *send = malloc(max_count * sizeof(float));
    float *recv = malloc(max_count * sizeof(float));
    int rc = send && recv ? 0 : 1;
    for (int k = 0; k < nsizes && rc == 0; k++)
        rc = bench_size(sizes[k], send, recv, rank, n);
    free(send);
    free(recv);
    MPI_Finalize();
    return rc;
}
