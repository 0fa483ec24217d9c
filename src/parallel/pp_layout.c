/*
 * pp_layout.c — where the model's chunks lie on a pipeline (pp_layout.h):
 * the one place that knows the three shapes.
 *
 *   RING   g = c p + s                        v chunks a device
 *   V      g = s (c = 0), 2p - 1 - s (c = 1)  down the devices and back up
 *   DUAL   g = s (c = 0), p + (p - 1 - s)     two copies, one per direction
 *
 * Everything else is read off these two maps (global and place): which
 * chunk reads the data or computes the loss, where a boundary stays on a
 * device, which device mirrors which.
 */
#include "ptdp/pp_layout.h"

ptdp_pp_layout ptdp_pp_layout_make(ptdp_chunk_layout shape, int pp, int v)
{
    ptdp_pp_layout l = { .shape = shape, .pp = pp, .v = v > 1 ? v : 1 };
    if (shape != PTDP_CHUNKS_RING)
        l.v = 2;
    return l;
}

int ptdp_pp_layout_copies(const ptdp_pp_layout *l)
{
    return l->shape == PTDP_CHUNKS_DUAL ? 2 : 1;
}

int ptdp_pp_layout_chunks(const ptdp_pp_layout *l)
{
    return l->shape == PTDP_CHUNKS_DUAL ? l->pp : l->pp * l->v;
}

/* ---- the two maps ----------------------------------------------------------- */

int ptdp_pp_layout_global(const ptdp_pp_layout *l, int stage, int chunk)
{
    const int p = l->pp;
    if (l->shape == PTDP_CHUNKS_V)
        return chunk == 0 ? stage : 2 * p - 1 - stage;
    if (l->shape == PTDP_CHUNKS_DUAL)   /* the up copy's chunk, numbered from its entry */
        return chunk == 0 ? stage : p + (p - 1 - stage);
    return chunk * p + stage;
}

void ptdp_pp_layout_place(const ptdp_pp_layout *l, int g, int *stage, int *chunk)
{
    const int p = l->pp;
    if (l->shape != PTDP_CHUNKS_RING) {   /* DUAL: the up copy's g - p on p - 1 - (g - p) */
        *chunk = g < p ? 0 : 1;
        *stage = g < p ? g : 2 * p - 1 - g;
        return;
    }
    *stage = g % p;
    *chunk = g / p;
}

int ptdp_pp_layout_in_copy(const ptdp_pp_layout *l, int stage, int chunk)
{
    return ptdp_pp_layout_global(l, stage, chunk) % ptdp_pp_layout_chunks(l);
}

/* ---- read off the maps ---------------------------------------------------- */

bool ptdp_pp_layout_is_first(const ptdp_pp_layout *l, int stage, int chunk)
{
    return ptdp_pp_layout_in_copy(l, stage, chunk) == 0;
}

bool ptdp_pp_layout_is_last(const ptdp_pp_layout *l, int stage, int chunk)
{
    return ptdp_pp_layout_in_copy(l, stage, chunk) == ptdp_pp_layout_chunks(l) - 1;
}

bool ptdp_pp_layout_holds_first(const ptdp_pp_layout *l, int stage)
{
    for (int c = 0; c < l->v; c++)
        if (ptdp_pp_layout_is_first(l, stage, c))
            return true;
    return false;
}

bool ptdp_pp_layout_holds_last(const ptdp_pp_layout *l, int stage)
{
    for (int c = 0; c < l->v; c++)
        if (ptdp_pp_layout_is_last(l, stage, c))
            return true;
    return false;
}

bool ptdp_pp_layout_hands_on(const ptdp_pp_layout *l, int stage, int chunk)
{
    int next_stage, next_chunk;
    if (l->shape != PTDP_CHUNKS_V || ptdp_pp_layout_is_last(l, stage, chunk))
        return false;
    ptdp_pp_layout_place(l, ptdp_pp_layout_global(l, stage, chunk) + 1, &next_stage, &next_chunk);
    return next_stage == stage;
}

bool ptdp_pp_layout_remote_before(const ptdp_pp_layout *l, int stage, int chunk)
{
    int before_stage, before_chunk;
    if (ptdp_pp_layout_is_first(l, stage, chunk))
        return false;
    if (l->shape != PTDP_CHUNKS_V)
        return true;
    ptdp_pp_layout_place(l, ptdp_pp_layout_global(l, stage, chunk) - 1, &before_stage, &before_chunk);
    return before_stage != stage;
}

bool ptdp_pp_layout_remote_after(const ptdp_pp_layout *l, int stage, int chunk)
{
    return !ptdp_pp_layout_is_last(l, stage, chunk) && !ptdp_pp_layout_hands_on(l, stage, chunk);
}

bool ptdp_pp_layout_runs(const ptdp_pp_layout *l, int chunk, int mb, int m)
{
    if (l->shape != PTDP_CHUNKS_DUAL)
        return true;
    return chunk == (mb < m / 2 ? 0 : 1);
}

int ptdp_pp_layout_mirror(const ptdp_pp_layout *l, int stage)
{
    return l->shape == PTDP_CHUNKS_DUAL ? l->pp - 1 - stage : -1;
}

bool ptdp_pp_layout_ends_together(const ptdp_pp_layout *l)
{
    return l->shape == PTDP_CHUNKS_V;
}

int ptdp_pp_layout_crossings(const ptdp_pp_layout *l)
{
    if (l->shape == PTDP_CHUNKS_V)
        return 2 * l->pp - 2;
    return ptdp_pp_layout_chunks(l) - 1;
}
