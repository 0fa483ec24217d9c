/*
 * mpi_launch.h — ptdp_launch's door to the MPI backend (private to comm/).
 *
 * comm/launch.c starts threads; for opts->backend == PTDP_BACKEND_MPI it
 * calls this instead, which makes the one device of this process
 * (mpi.c), or, in a build without MPI, says how to get one
 * (mpi_none.c).  This header needs no <mpi.h>, so launch.c builds either way.
 */
#ifndef PTDP_MPI_LAUNCH_H
#define PTDP_MPI_LAUNCH_H

#include "ptdp/launch.h"

int ptdp_mpi_launch(int world_size, ptdp_device_fn fn, void *arg, const ptdp_launch_opts *opts);

#endif
