/*
 * types.c — sizes and names of the element types.
 *
 * The names are the safetensors spellings ("F32", "I64", …), so a checkpoint
 * header and a log line call a type the same thing.
 */
#include "ptdp/types.h"

static const struct {
    size_t size;
    const char *name;
} dtype_table[PTDP_DTYPE_COUNT] = {
    [PTDP_F32] = { 4, "F32" },
    [PTDP_F64] = { 8, "F64" },
    [PTDP_I32] = { 4, "I32" },
    [PTDP_I64] = { 8, "I64" },
    [PTDP_U8]  = { 1, "U8"  },
};

size_t ptdp_dtype_size(ptdp_dtype t)
{
    if ((unsigned)t >= PTDP_DTYPE_COUNT)
        return 0;
    return dtype_table[t].size;
}

const char *ptdp_dtype_name(ptdp_dtype t)
{
    if ((unsigned)t >= PTDP_DTYPE_COUNT)
        return "?";
    return dtype_table[t].name;
}
