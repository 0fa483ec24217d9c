/*
 * mpi_none.c — the MPI backend's calls in a build without MPI.
 *
 * The library is the same with or without MPI above this line: the CLI can
 * always ask ptdp_mpi_built() and say how to get the backend, instead of a
 * link error or a flag that silently does nothing.
 *
 *   built with MPI  (-Dmpi=enabled, or auto and MPI found):  mpi.c
 *   built without:                                           this file
 */
#include <stdio.h>

#include "comm/launch_impl.h"
#include "ptdp/error.h"
#include "ptdp/mpi.h"
#include "comm/mpi_impl.h"

#define NOT_BUILT "this ptdp was built without MPI: install MPI (Debian: apt-get install openmpi-bin " \
                  "libopenmpi-dev) and rebuild with meson setup --reconfigure BUILD -Dmpi=enabled"

bool ptdp_mpi_built(void)
{
    return false;
}

int ptdp_mpi_start(int *rank, int *size, char *msg, size_t len)
{
    *rank = -1;
    *size = 0;
    snprintf(msg, len, "%s", NOT_BUILT);
    return PTDP_EINVAL;
}

int ptdp_mpi_rank(void)
{
    return -1;
}

void ptdp_mpi_finish(void)
{
}

/* The launcher's processes backend: it cannot open. */
static int none_open(ptdp_launch_state *L, char *msg, size_t len)
{
    (void)L;
    snprintf(msg, len, "%s", NOT_BUILT);
    return PTDP_EINVAL;
}

const ptdp_launch_backend ptdp_mpi_backend = { .open = none_open };

int ptdp_mpi_time_all_reduce(struct ptdp_device *dev, const void *send, void *recv, size_t count,
                             int dtype, int samples, int batch, double *seconds)
{
    (void)dev; (void)send; (void)recv; (void)count; (void)dtype; (void)samples; (void)batch; (void)seconds;
    return PTDP_EINVAL;
}
