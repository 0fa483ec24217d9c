/*
 * ulysses.c — Ulysses' two re-layouts over a CP group (ulysses.h): from a
 * rank's positions of every head to every position of its heads, and back.
 *
 * Both ways move the same blocks.  The block rank s sends rank d holds s's
 * Tl positions of d's H/N heads (H = the heads a rank has, N = the group),
 * in one order on both sides:
 *
 *   block (s → d) = for each sequence b, each of s's positions t (in its
 *                   cp.h layout), each part p (q, k, v): hn_p hd numbers,
 *                   head d hn_p .. of part p             (hn_p = H_p / N)
 *
 * A part's heads H_p need not be the others': under grouped-query
 * attention q has H heads and k, v have K each, and rank d receives query
 * heads d H/N .. and kv heads d K/N .. — the kv heads its query heads read
 * (h / (H/K) of a head in d's range falls in d's kv range).
 *
 *   there: s packs it from its sequence tensor (columns of d's heads),
 *          d unpacks it into its head tensor (rows of s's positions)
 *   back:  d packs it from its head tensor, s unpacks it into its
 *          sequence tensor — the same copies, the other way round
 *
 * so one helper copies between a block and a sequence tensor, one between
 * a block and a head tensor, each in either direction.  Zigzag's two
 * shares (cp.h) are undone here: rank s's local row t is position
 * ptdp_cp_position(s's layout, t) of its sequence.
 */
#include "ptdp/ulysses.h"

#include <string.h>

#include "ptdp/cp.h"
#include "ptdp/device.h"
#include "ptdp/error.h"

enum { MAX_PARTS = 3 };

typedef struct {
    int N, r, B, T, Tl, parts, hd;
    int heads[MAX_PARTS];       /* H_p: part p's heads on a rank            */
    int col0[MAX_PARTS];        /* where part p starts in a sequence row    */
    bool zigzag;
    size_t block;               /* numbers in one block: B Tl (sum hn_p) hd */
} relayout;

static bool setup(relayout *g, ptdp_comm *cp, ptdp_tensor seq, ptdp_tensor heads, int T, int parts, const int *H,
                  int hd, bool zigzag)
{
    *g = (relayout){ .N = ptdp_comm_size(cp), .r = ptdp_comm_rank(cp), .T = T, .parts = parts, .hd = hd,
                     .zigzag = zigzag };
    const int chunks = zigzag ? 2 * g->N : g->N;
    int all = 0;   /* sum H_p: a sequence row's heads */
    bool split = parts > 0 && parts <= MAX_PARTS;
    for (int p = 0; split && p < parts; p++) {
        split = H[p] > 0 && H[p] % g->N == 0;
        g->heads[p] = H[p];
        g->col0[p] = all * hd;
        all += H[p];
    }
    if (!PTDP_REQUIRE(T > 0 && T % chunks == 0 && split && hd > 0,
                      "T %d over %d %s chunks, %d parts of heads (the first %d) over %d ranks", T, chunks,
                      zigzag ? "zigzag" : "contiguous", parts, parts > 0 ? H[0] : 0, g->N))
        return false;
    g->Tl = T / g->N;
    g->B = seq.rows / g->Tl;
    if (!PTDP_REQUIRE(seq.rows == g->B * g->Tl && seq.cols == all * hd && heads.rows == g->B * T &&
                          heads.cols == all / g->N * hd && heads.stride == heads.cols,
                      "sequence tensor %d x %d, head tensor %d x %d (stride %d) for T %d, %d heads of %d in %d parts",
                      seq.rows, seq.cols, heads.rows, heads.cols, heads.stride, T, all, hd, parts))
        return false;
    g->block = (size_t)g->B * g->Tl * (all / g->N) * hd;
    return true;
}

/* Block `blk` ↔ a sequence tensor: my Tl positions of rank `peer`'s heads
 * (columns col0_p + peer hn_p hd .. of each part). */
static void block_seq(const relayout *g, ptdp_real *blk, ptdp_tensor seq, int peer, bool into_block)
{
    ptdp_real *b = blk;
    for (int row = 0; row < seq.rows; row++)
        for (int p = 0; p < g->parts; p++) {
            const int hn = g->heads[p] / g->N;
            const size_t w = (size_t)hn * g->hd;
            ptdp_real *s = ptdp_at(seq, row, g->col0[p] + peer * hn * g->hd);
            if (into_block)
                memcpy(b, s, w * sizeof *b);
            else
                memcpy(s, b, w * sizeof *b);
            b += w;
        }
}

/* Block `blk` ↔ a head tensor: rank `peer`'s positions (its cp.h layout)
 * of my heads, every part. */
static void block_heads(const relayout *g, ptdp_real *blk, ptdp_tensor heads, int peer, bool into_block)
{
    const ptdp_cp_layout l = ptdp_cp_layout_of(g->T, g->N, peer, g->zigzag);
    const size_t w = (size_t)heads.cols;   /* sum hn_p hd: one whole row */
    ptdp_real *b = blk;
    for (int s = 0; s < g->B; s++)
        for (int t = 0; t < g->Tl; t++, b += w) {
            ptdp_real *h = ptdp_at(heads, s * g->T + ptdp_cp_position(&l, t), 0);
            if (into_block)
                memcpy(b, h, w * sizeof *b);
            else
                memcpy(h, b, w * sizeof *b);
        }
}

/* Pack N blocks, all-to-all, unpack: `there` from seq to heads, else back. */
static int exchange(ptdp_device *dev, ptdp_comm *cp, const relayout *g, ptdp_tensor seq, ptdp_tensor heads,
                    bool there)
{
    ptdp_real *send = ptdp_alloc_uninit(dev, (size_t)g->N * g->block * sizeof(ptdp_real), PTDP_MEM_COMM,
                                        "ulysses.send");
    ptdp_real *recv = ptdp_alloc_uninit(dev, (size_t)g->N * g->block * sizeof(ptdp_real), PTDP_MEM_COMM,
                                        "ulysses.recv");
    int rc = PTDP_OK;
    if (send == NULL || recv == NULL) {
        rc = PTDP_ENOMEM;
        goto out;
    }
    for (int j = 0; j < g->N; j++) {   /* block j, for rank j */
        if (there)
            block_seq(g, send + (size_t)j * g->block, seq, j, true);
        else
            block_heads(g, send + (size_t)j * g->block, heads, j, true);
    }
    if ((rc = ptdp_all_to_all(cp, send, recv, g->block, PTDP_REAL)) != 0)
        goto out;
    for (int i = 0; i < g->N; i++) {   /* block i, from rank i */
        if (there)
            block_heads(g, recv + (size_t)i * g->block, heads, i, false);
        else
            block_seq(g, recv + (size_t)i * g->block, seq, i, false);
    }
out:
    ptdp_free(dev, send);
    ptdp_free(dev, recv);
    return rc;
}

/* Either way, for parts of H[p] heads each. */
static int relayout_parts(ptdp_device *dev, ptdp_comm *cp, ptdp_tensor seq, ptdp_tensor heads, int T, int parts,
                          const int *H, int hd, bool zigzag, bool there)
{
    relayout g;
    if (!setup(&g, cp, seq, heads, T, parts, H, hd, zigzag))
        return PTDP_EINVAL;
    return exchange(dev, cp, &g, seq, heads, there);
}

int ptdp_ulysses_heads_from_sequence(ptdp_device *dev, ptdp_comm *cp, ptdp_tensor seq, ptdp_tensor out, int T,
                                     int parts, int heads, int hd, bool zigzag)
{
    const int H[MAX_PARTS] = { heads, heads, heads };
    return relayout_parts(dev, cp, seq, out, T, parts, H, hd, zigzag, true);
}

int ptdp_ulysses_sequence_from_heads(ptdp_device *dev, ptdp_comm *cp, ptdp_tensor in, ptdp_tensor out, int T,
                                     int parts, int heads, int hd, bool zigzag)
{
    const int H[MAX_PARTS] = { heads, heads, heads };
    return relayout_parts(dev, cp, out, in, T, parts, H, hd, zigzag, false);
}

int ptdp_ulysses_gqa_heads_from_sequence(ptdp_device *dev, ptdp_comm *cp, ptdp_tensor seq, ptdp_tensor out, int T,
                                         int heads, int kv_heads, int hd, bool zigzag)
{
    const int H[MAX_PARTS] = { heads, kv_heads, kv_heads };
    return relayout_parts(dev, cp, seq, out, T, 3, H, hd, zigzag, true);
}

int ptdp_ulysses_gqa_sequence_from_heads(ptdp_device *dev, ptdp_comm *cp, ptdp_tensor in, ptdp_tensor out, int T,
                                         int heads, int kv_heads, int hd, bool zigzag)
{
    const int H[MAX_PARTS] = { heads, kv_heads, kv_heads };
    return relayout_parts(dev, cp, out, in, T, 3, H, hd, zigzag, false);
}

double ptdp_ulysses_elements_per_block(int B, int T, int width, int N, int forwards)
{
    const double X = (double)B * (T / N) * width;
    return N > 1 ? (4.0 * forwards + 4) * X * (N - 1) / N : 0;
}
