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
 *
 * A command without --backend (plan, sample, demo, selftest, bench zero …)
 * is the row "yes, threads" with no way out: under mpirun it would run N
 * copies of itself, each printing the same answer.  It is refused too.
 */
#include "backend.h"

#include <stdio.h>
#include <string.h>

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

/* The commands that take --backend and so make the check themselves. */
static int takes_backend(int argc, char **argv)
{
    if (strcmp(argv[0], "train") == 0)
        return 1;
    return strcmp(argv[0], "bench") == 0 && argc > 1 && strcmp(argv[1], "collectives") == 0;
}

int ptdp_cli_backend_alone(int argc, char **argv)
{
    int launched = ptdp_mpi_launcher_size();
    if (launched <= 0 || argc < 1 || takes_backend(argc, argv))
        return 0;
    ptdp_mpi_quiet();   /* rank 0 says it, once */
    const int sub = strcmp(argv[0], "bench") == 0 && argc > 1 && argv[1][0] != '-';
    char cmd[64];
    snprintf(cmd, sizeof cmd, "%s%s%.40s", argv[0], sub ? " " : "", sub ? argv[1] : "");
    return ptdp_usage_error(cmd, "this process was started by an MPI launcher (a world of %d processes) "
                            "but this command runs in one process: every process would run all of it by "
                            "itself; run it without mpirun (only train and bench collectives take "
                            "--backend mpi, one process per device)", launched);
}
