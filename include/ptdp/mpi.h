/*
 * mpi.h — one process per device: the process-level side of the MPI
 * backend.
 *
 * The threads backend starts its devices itself (launch.h).  Under mpirun
 * the processes already exist; each is one device, its rank the MPI rank:
 *
 *   mpirun -n 4 ptdp train --backend mpi --dp 2 --tp 2
 *
 *     process (MPI rank)   0          1          2          3
 *     device               0          1          2          3
 *     mesh (tp fastest)    dp0 tp0    dp0 tp1    dp1 tp0    dp1 tp1
 *
 * A program (the CLI, a lesson's check) calls ptdp_mpi_start first, then
 * ptdp_launch with opts.backend = PTDP_BACKEND_MPI and the world size
 * mpirun gave; ptdp_launch makes this process's one device.  Only rank 0
 * prints (ptdp_mpi_quiet) and writes files (launch.h, ptdp_host_is_root).
 *
 * In a build without MPI (meson -Dmpi=disabled, or no MPI found) the same
 * calls exist: ptdp_mpi_built() is false and ptdp_mpi_start fails with a
 * message that says how to rebuild.
 */
#ifndef PTDP_MPI_H
#define PTDP_MPI_H

#include <stdbool.h>
#include <stddef.h>

/* Was this ptdp built with the MPI backend? */
bool ptdp_mpi_built(void);
/* The world size and this process's rank as an MPI launcher announces
 * them in the environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE, …), or 0 and -1
 * when the process was not started by one.  Work in every build, before
 * MPI_Init: a command can refuse or fall silent before it parses a flag. */
int  ptdp_mpi_launcher_size(void);
int  ptdp_mpi_launcher_rank(void);
/* Under a launcher, ranks other than 0 send stdout and stderr to
 * /dev/null, so every message is printed once (by rank 0).  A failure is
 * still seen: it is written to ptdp_mpi_stderr(), the stderr the process
 * had before. */
void ptdp_mpi_quiet(void);
/* MPI_Init (once) and this process's rank and the world size.  0, or a
 * negative PTDP_E… code with msg. */
int  ptdp_mpi_start(int *rank, int *size, char *msg, size_t len);
/* MPI_Finalize, if started. */
void ptdp_mpi_finish(void);

struct ptdp_device;
/* The yardstick of `ptdp bench collectives --backend mpi`: MPI_Allreduce
 * itself (blocking, sum, out of place) over dev's world, outside ptdp's
 * communicator — no meeting, no checks, no accounting.  `samples` samples
 * of `batch` calls, each started together (MPI_Barrier); this rank's time
 * per call of sample s in seconds[s].  Called by every device of an MPI
 * launch; without MPI, PTDP_EINVAL. */
int  ptdp_mpi_time_all_reduce(struct ptdp_device *dev, const void *send, void *recv, size_t count,
                              int dtype, int samples, int batch, double *seconds);

#endif
