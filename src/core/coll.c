/*
 * coll.c — the names of communication (coll.h): one table each.
 */
#include "ptdp/coll.h"

#include <string.h>

#include "ptdp/error.h"
#include "core/coll_impl.h"

static const char *const op_names[PTDP_OP_COUNT] = { "sum", "avg", "max", "min" };

static const char *const algo_names[PTDP_ALGO_COUNT] = { "default", "naive", "ring", "shm", "mpi" };
static const char *const coll_names[PTDP_COLL_COUNT] = {
    "barrier", "broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter",
    "gather", "scatter", "all_to_all", "send", "recv", "split", "all_to_allv",
};

const char *ptdp_algo_name(ptdp_algo a)
{
    return (unsigned)a < PTDP_ALGO_COUNT ? algo_names[a] : "?";
}

int ptdp_algo_parse(const char *s, ptdp_algo *out)
{
    for (int a = 0; s && a < PTDP_ALGO_COUNT; a++)
        if (strcmp(s, algo_names[a]) == 0) {
            *out = (ptdp_algo)a;
            return 0;
        }
    return PTDP_EINVAL;
}

const char *ptdp_coll_name(ptdp_coll c)
{
    return (unsigned)c < PTDP_COLL_COUNT ? coll_names[c] : "?";
}

const char *ptdp_op_name(ptdp_op op)
{
    return (unsigned)op < PTDP_OP_COUNT ? op_names[op] : "?";
}
