/*
 * coll.h — the vocabulary of communication: what can be called, how it
 * reduces, and which algorithm runs an all-reduce.
 *
 * These names are shared by every layer that talks about communication —
 * the cost model of the virtual clock (clock.h), the watchdog's report of
 * who waits in what (runtime), the communicator and its backends (comm.h),
 * the statistics and the traces — so they live at the bottom, below all of
 * them, in one table each (coll.c).
 *
 *   ptdp_coll   barrier, broadcast, reduce, all_reduce, all_gather,
 *               reduce_scatter, gather, scatter, all_to_all, send, recv, split,
 *               all_to_allv
 *   ptdp_op     sum, avg, max, min
 *   ptdp_algo   default, naive, ring, shm, mpi     (--algo)
 */
#ifndef PTDP_COLL_H
#define PTDP_COLL_H

typedef enum { PTDP_SUM = 0, PTDP_AVG, PTDP_MAX, PTDP_MIN, PTDP_OP_COUNT } ptdp_op;

/* all_reduce algorithms (--algo).  DEFAULT resolves to the fastest (SHM). */
typedef enum {
    PTDP_ALGO_DEFAULT = 0,
    PTDP_ALGO_NAIVE,    /* reduce to rank 0, then broadcast                 */
    PTDP_ALGO_RING,     /* reduce-scatter then all-gather around a ring     */
    PTDP_ALGO_SHM,      /* each device reduces its 1/N slice reading every
                           buffer once and writes the result straight into
                           every member's recv ("push"): 2 barrier crossings */
    PTDP_ALGO_MPI,      /* the MPI library's own MPI_Allreduce (MPI backend
                           only): its order of sums, equal within tolerance */
    PTDP_ALGO_COUNT
} ptdp_algo;

const char *ptdp_algo_name(ptdp_algo a);          /* "default", "naive", "ring", "shm", "mpi" */
int         ptdp_algo_parse(const char *s, ptdp_algo *out);   /* 0 or PTDP_EINVAL */

/* What was called, for statistics, traces and mismatch reports. */
typedef enum {
    PTDP_COLL_BARRIER = 0,
    PTDP_COLL_BROADCAST,
    PTDP_COLL_REDUCE,
    PTDP_COLL_ALL_REDUCE,
    PTDP_COLL_ALL_GATHER,
    PTDP_COLL_REDUCE_SCATTER,
    PTDP_COLL_GATHER,
    PTDP_COLL_SCATTER,
    PTDP_COLL_ALL_TO_ALL,
    PTDP_COLL_SEND,
    PTDP_COLL_RECV,
    PTDP_COLL_SPLIT,
    PTDP_COLL_ALL_TO_ALLV,      /* all_to_all with a count per pair of members */
    PTDP_COLL_COUNT
} ptdp_coll;

const char *ptdp_coll_name(ptdp_coll c);   /* "all_reduce", … */

/* Per-device communication statistics (each device holds one). */
#define PTDP_MAX_GROUP_NAMES 8
typedef struct {
    unsigned long long calls[PTDP_COLL_COUNT];
    double bytes_sent[PTDP_COLL_COUNT];
    double bytes_recv[PTDP_COLL_COUNT];
    double total_sent, total_recv;
    struct { char name[16]; double sent, recv; unsigned long long calls; } group[PTDP_MAX_GROUP_NAMES];
    int ngroups;
} ptdp_comm_stats;

#endif
