/*
 * coll_impl.h — the collectives' descriptions for the library only (private
 * to src/): the name of a reduction operator, for the checks' messages
 * (comm/check.c).
 *
 *   PTDP_OP_SUM ──ptdp_op_name──▶ "sum"
 */

#ifndef PTDP_CORE_COLL_IMPL_H
#define PTDP_CORE_COLL_IMPL_H

#include "ptdp/coll.h"

const char *ptdp_op_name(ptdp_op op);              /* "sum", "avg", "max", "min" */

#endif
