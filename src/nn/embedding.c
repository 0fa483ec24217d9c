/*
 * embedding.c — looking rows up in a table, and sending gradients back.
 *
 * A token id selects one row of the embedding table wte [V, C]; a position
 * t one row of wpe [T, C].  For the rows of a batch (B sequences of T
 * positions, row b T + t):
 *
 *     x[b T + t] = wte[token(b, t)] + wpe[t]
 *
 *     wte  ┌──────┐  token 7 ──► row 7 ──┐
 *          │      │                      ├─► x[b T + t]
 *     wpe  ┌──────┐  position t ► row t ─┘
 *
 * The backward is a scatter-add: every row of dx adds into the row it came
 * from, dwte[token] += dx[b T + t], dwpe[t] += dx[b T + t].  A token that
 * appears twice gets both gradients; the adds run in row order, so the
 * result has the same bits every time.
 *
 * Under tensor parallelism the table is cut by rows (vocab-parallel): a rank
 * holds rows [row0, row0 + rows) and looks up only the ids that fall there,
 * leaving zeros for the others — the all-reduce that follows (parallel/tp.c)
 * adds up the one rank that had each row.
 */
#include "ptdp/ops.h"

#include "ptdp/error.h"

#include <string.h>

void ptdp_embedding_forward(ptdp_tensor out, ptdp_tensor table, int64_t row0, const int64_t *ids)
{
    if (!PTDP_REQUIRE(out.cols == table.cols, "out %d x %d, table %d x %d", out.rows, out.cols, table.rows,
                      table.cols))
        return;
    for (int i = 0; i < out.rows; i++) {
        ptdp_real *o = ptdp_at(out, i, 0);
        int64_t r = ids[i] - row0;
        if (r >= 0 && r < table.rows)
            memcpy(o, ptdp_at(table, (int)r, 0), (size_t)out.cols * sizeof *o);
        else
            memset(o, 0, (size_t)out.cols * sizeof *o);
    }
}

void ptdp_embedding_backward(ptdp_tensor dtable, int64_t row0, const int64_t *ids, ptdp_tensor dout)
{
    if (!PTDP_REQUIRE(dout.cols == dtable.cols, "dout %d x %d, dtable %d x %d", dout.rows, dout.cols,
                      dtable.rows, dtable.cols))
        return;
    for (int i = 0; i < dout.rows; i++) {
        int64_t r = ids[i] - row0;
        if (r < 0 || r >= dtable.rows)
            continue;
        ptdp_real *d = ptdp_at(dtable, (int)r, 0);
        const ptdp_real *g = ptdp_at(dout, i, 0);
        for (int j = 0; j < dout.cols; j++)
            d[j] += g[j];
    }
}

void ptdp_positions_forward(ptdp_tensor x, ptdp_tensor wpe, int T)
{
    if (!PTDP_REQUIRE(x.cols == wpe.cols && T > 0 && x.rows % T == 0 && wpe.rows >= T,
                      "x %d x %d, wpe %d x %d, T %d", x.rows, x.cols, wpe.rows, wpe.cols, T))
        return;
    for (int i = 0; i < x.rows; i++) {
        ptdp_real *o = ptdp_at(x, i, 0);
        const ptdp_real *p = ptdp_at(wpe, i % T, 0);
        for (int j = 0; j < x.cols; j++)
            o[j] += p[j];
    }
}

void ptdp_positions_backward(ptdp_tensor dwpe, ptdp_tensor dx, int T)
{
    if (!PTDP_REQUIRE(dx.cols == dwpe.cols && T > 0 && dx.rows % T == 0 && dwpe.rows >= T,
                      "dx %d x %d, dwpe %d x %d, T %d", dx.rows, dx.cols, dwpe.rows, dwpe.cols, T))
        return;
    for (int i = 0; i < dx.rows; i++) {
        ptdp_real *d = ptdp_at(dwpe, i % T, 0);
        const ptdp_real *g = ptdp_at(dx, i, 0);
        for (int j = 0; j < dx.cols; j++)
            d[j] += g[j];
    }
}
