/*
 * mpirun.c — what a process learns from the MPI launcher that started it,
 * before (and without) MPI_Init.
 *
 * mpirun (or Hydra, PMIx, MVAPICH) tells each process its rank and the
 * world size in its environment.  Reading them needs no MPI library, so a
 * command can refuse a flag, or fall silent, in every build:
 *
 *   mpirun -n 4 ptdp …     OMPI_COMM_WORLD_SIZE=4  OMPI_COMM_WORLD_RANK=r
 *                          (PMI_SIZE/PMI_RANK, PMIX_…, MV2_COMM_WORLD_…)
 *
 *   rank 0         prints, as a single process would
 *   ranks 1..N-1   stdout, stderr ──► /dev/null (ptdp_mpi_quiet); a failure
 *                  is still written, to the stderr kept aside
 *                  (ptdp_mpi_stderr)
 *
 * Both the launch (launch.c) and the MPI backend's failure report (mpi/mpi.c)
 * stand on this file.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ptdp/mpi.h"
#include "comm/mpi_impl.h"

/* The launchers' environment: Open MPI, MPICH/Hydra (and Intel MPI), PMIx,
 * MVAPICH.  A process under mpirun sees one of these; none needs MPI_Init
 * (or an MPI library) to be read. */
static int launcher_env(const char *const *vars, int n, int none)
{
    for (int i = 0; i < n; i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL && *v != '\0')
            return atoi(v);
    }
    return none;
}

int ptdp_mpi_launcher_size(void)
{
    static const char *const vars[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MV2_COMM_WORLD_SIZE" };
    return launcher_env(vars, 4, 0);
}

int ptdp_mpi_launcher_rank(void)
{
    static const char *const vars[] = { "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK" };
    return launcher_env(vars, 4, -1);
}

static int real_stderr = STDERR_FILENO;

int ptdp_mpi_stderr(void)
{
    return real_stderr;
}

void ptdp_mpi_quiet(void)
{
    if (ptdp_mpi_launcher_rank() <= 0 || real_stderr != STDERR_FILENO)
        return;
    int fd = open("/dev/null", O_WRONLY);
    if (fd < 0)
        return;
    fflush(stdout);
    fflush(stderr);
    real_stderr = dup(STDERR_FILENO);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
}
