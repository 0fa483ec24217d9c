/*
 * types.c — sizes and names of the element types.
 *
 * The names are the safetensors spellings ("F32", "I64", …), so a checkpoint
 * header and a log line call a type the same thing.
 */
#include "ptdp/types.h"

#include "ptdp/error.h"

static const struct {
    size_t size;
    const char *name;
} dtype_table[PTDP_DTYPE_COUNT] = {
    [PTDP_F32] = { 4, "F32" },
    [PTDP_F64] = { 8, "F64" },
    [PTDP_I32] = { 4, "I32" },
    [PTDP_I64] = { 8, "I64" },
    [PTDP_U8]  = { 1, "U8"  },
    [PTDP_BF16] = { 2, "BF16" },
    [PTDP_F8_E4M3] = { 1, "F8_E4M3" },
    [PTDP_F8_E5M2] = { 1, "F8_E5M2" },
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

/* count = 10, parts = 4:  shares of 3 3 2 2 at offsets 0 3 6 8.
 * The first count % parts shares hold one item more, so share sizes differ
 * by at most one and every sharding in ptdp (collective shares, DP shards,
 * pipeline stages) cuts the same way. */
void ptdp_share(size_t count, int parts, int index, size_t *offset_out, size_t *len)
{
    if (!PTDP_REQUIRE(parts > 0 && index >= 0 && index < parts, "share %d of %d parts", index, parts)) {
        *offset_out = *len = 0;
        return;
    }
    size_t p = (size_t)parts, i = (size_t)index;
    size_t base = count / p, extra = count % p;
    *offset_out = i * base + (i < extra ? i : extra);
    *len = base + (i < extra ? 1 : 0);
}
