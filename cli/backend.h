/*
 * backend.h — `--backend threads|mpi`: who plays a command's devices.
 *
 *   ptdp train --dp 2 --tp 2                         4 threads, one process
 *   mpirun -n 4 ptdp train --backend mpi --dp 2 --tp 2   4 processes, one device each
 *
 * Every command that launches devices (train, bench collectives) takes the
 * flag and goes through the same three doors, so each refuses the same
 * mistakes with the same words before any work starts:
 *
 *   ptdp_cli_backend_quiet   first thing: under mpirun, ranks > 0 fall
 *                            silent, so every message is printed once
 *   ptdp_cli_backend_start   after parsing: mpirun without --backend mpi,
 *                            --backend mpi in a build without MPI (exit 2);
 *                            MPI_Init; the world size mpirun gave
 *   ptdp_cli_backend_finish  MPI_Finalize
 *
 * Every other command runs in one process, so main.c asks
 * ptdp_cli_backend_alone before running it: under mpirun each process
 * would run its own copy of the whole command, and it refuses the same way.
 */
#ifndef PTDP_CLI_BACKEND_H
#define PTDP_CLI_BACKEND_H

#include "ptdp/launch.h"

extern const char *const ptdp_backend_names[2];   /* "threads", "mpi" */

void ptdp_cli_backend_quiet(void);
/* 0 (*world = mpirun's world size under MPI, 0 for threads), or
 * PTDP_EXIT_USAGE after printing why. */
int  ptdp_cli_backend_start(const char *cmd, ptdp_backend b, int *world);
void ptdp_cli_backend_finish(ptdp_backend b);

/* The command in argv (argv[0] "plan", or "bench" then "zero") before it
 * runs: 0 if it takes --backend (train, bench collectives: they check for
 * themselves) or no MPI launcher started this process; else
 * PTDP_EXIT_USAGE after printing why (once, from rank 0). */
int  ptdp_cli_backend_alone(int argc, char **argv);

#endif
