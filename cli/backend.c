/*
 * backend.c — `--backend threads|mpi` (backend.h).
 *
 * The one rule behind the checks: a process started by mpirun is one device
 * of a world mpirun made, so it must be told so (--backend mpi); a process
 * not started by one may run either (a single MPI process is a world of 1).
 *
 *   under mpirun?   --backend     what happens
 *   no              threads       N threads in this process (the default)
 *   yes             threads       exit 2: "add --backend mpi"
 *   either          mpi           MPI_Init, one device per process
 *   either          mpi, no MPI   exit 2: "rebuild with -Dmpi=enabled"
 */
#include "backend.h"

#include <stdio.h>

#include "args.h"
#include "ptdp/mpi.h"

const char *const ptdp_backend_names[2] = { "threads", "mpi" };

void ptdp_cli_backend_quiet(void)
{
    ptdp_mpi_quiet();
}

int ptdp_cli_backend_start(const char *cmd, ptdp_backend b, int *world)
{
    *world = 0;
    int launched = ptdp_mpi_launcher_size();
    if (b == PTDP_BACKEND_THREADS && launched > 0)
        return ptdp_usage_error(cmd, "this process was started by an MPI launcher (a world of %d processes) "
                                "but runs the threads backend: every process would run all the devices by "
                                "itself; add --backend mpi (one process per device)", launched);
    if (b != PTDP_BACKEND_MPI)
        return 0;
    if (!ptdp_mpi_built())
        return ptdp_usage_error(cmd, "--backend mpi: this ptdp was built without MPI; install it (Debian: "
                                "apt-get install openmpi-bin libopenmpi-dev) and rebuild with "
                                "meson setup --reconfigure BUILD -Dmpi=enabled");
    int rank;
    char msg[256];
    if (ptdp_mpi_start(&rank, world, msg, sizeof msg) != 0)
        return ptdp_usage_error(cmd, "--backend mpi: %s", msg);
    return 0;
}

void ptdp_cli_backend_finish(ptdp_backend b)
{
    if (b == PTDP_BACKEND_MPI)
        ptdp_mpi_finish();
}
