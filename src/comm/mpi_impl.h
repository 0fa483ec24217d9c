/*
 * mpi_impl.h — what the launcher asks the MPI backend (private to src/).
 *
 * Under mpirun each process is one device; before any device exists the
 * launcher needs the process's rank (to pick its device) and a stream
 * that still reaches the terminal after a quiet rank silenced its own.
 * Without MPI (mpi_none.c) these say "one process, rank 0".
 *
 *   mpirun -np 4 ──▶ process r ──ptdp_mpi_rank()──▶ device r
 */

#ifndef PTDP_COMM_MPI_IMPL_H
#define PTDP_COMM_MPI_IMPL_H

#include <stdio.h>
#include "ptdp/mpi.h"

/* The stderr the process had before ptdp_mpi_quiet (mpi.h) silenced a
 * rank other than 0: where a failure is still written. */
int  ptdp_mpi_stderr(void);

/* This process's rank, or -1 before ptdp_mpi_start. */
int  ptdp_mpi_rank(void);

#endif
