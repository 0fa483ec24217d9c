/*
 * rope.c — rotary position embeddings (RoPE), and their backward.
 *
 * Instead of adding a position vector to the input, RoPE (Su et al. 2021;
 * Meta's llama3 `apply_rotary_emb`) turns each query and key by an angle
 * that grows with the position, so the score q_t · k_s depends on the
 * positions only through t − s.  Within a head of width hd (even), the
 * consecutive pair (2i, 2i+1), i = 0 .. hd/2 − 1, is one complex number,
 * multiplied by e^{i a}:
 *
 *     inv_i = theta^(−2i / hd)                  slower turning for later pairs
 *     a     = pos · inv_i
 *     (x0, x1) → (x0 cos a − x1 sin a,  x0 sin a + x1 cos a)
 *
 *     one row, heads side by side from column col0:
 *
 *     col0 ┌── head 0 ──────────────┬── head 1 ───── …
 *          │ x0 x1 │ x2 x3 │ … │    │ x0 x1 │ …
 *          │ ↻ a·1 │ ↻ a·inv_1 │    │ ↻ a·1 │
 *          └───────┴───────┴───┴────┴───────┴──
 *
 * Every head of a row turns by the same angles: they depend on the
 * position and the pair only.  A rotation is orthogonal, so the backward
 * is its transpose, the rotation by −a:
 *
 *     (d0, d1) → (d0 cos a + d1 sin a,  −d0 sin a + d1 cos a)
 *
 * The position is the token's GLOBAL position in its sequence: under
 * context parallelism a device's rows are chunks of the sequence (zigzag:
 * r and 2N−1−r), and a chunk rotated by its local positions is a bug the
 * loss shows.  So the caller passes pos[t] for each of the T rows of a
 * sample.
 *
 * The frequencies and the angles are computed in double (Meta computes
 * them in float32; double keeps the f32 and f64 builds on one reference),
 * cos and sin once per position and pair, and only the products in the
 * build's precision.
 */
#include "ptdp/ops.h"

#include "ptdp/error.h"

#include <math.h>

/* The widest head a call may have: one position's cos and sin on the
 * stack, no allocation (Llama's heads are 128 wide). */
#define ROPE_MAX_HD 1024

/* cos and sin of pos · theta^(−2i/hd) for i < hd/2. */
static void angles(ptdp_real *c, ptdp_real *s, int64_t pos, int hd, double theta)
{
    for (int i = 0; i < hd / 2; i++) {
        const double a = (double)pos * pow(theta, -2.0 * i / hd);
        c[i] = (ptdp_real)cos(a);
        s[i] = (ptdp_real)sin(a);
    }
}

/* Rotate every pair of `heads` heads of width hd in row r by (c, sign · s):
 * sign 1 the forward, −1 its transpose. */
static void rotate_row(ptdp_real *r, int heads, int hd, const ptdp_real *c, const ptdp_real *s, ptdp_real sign)
{
    for (int h = 0; h < heads; h++, r += hd)
        for (int i = 0; i < hd / 2; i++) {
            const ptdp_real x0 = r[2 * i], x1 = r[2 * i + 1], sn = sign * s[i];
            r[2 * i] = x0 * c[i] - x1 * sn;
            r[2 * i + 1] = x0 * sn + x1 * c[i];
        }
}

/* Both directions: position by position, the angles once, then every
 * sample's row at that position. */
static void rope_apply(const char *op, ptdp_tensor x, int col0, int heads, int hd, const int64_t *pos, int T,
                       double theta, ptdp_real sign)
{
    if (!PTDP_REQUIRE(T > 0 && x.rows % T == 0 && heads >= 0 && hd > 0 && hd % 2 == 0 && hd <= ROPE_MAX_HD &&
                      col0 >= 0 && col0 + (int64_t)heads * hd <= x.cols && theta > 0 && pos != NULL,
                      "%s: x %d x %d, T %d, %d heads of %d from column %d (hd even, at most %d), theta %g",
                      op, x.rows, x.cols, T, heads, hd, col0, ROPE_MAX_HD, theta))
        return;
    ptdp_real c[ROPE_MAX_HD / 2], s[ROPE_MAX_HD / 2];
    const int B = x.rows / T;
    for (int t = 0; t < T; t++) {
        angles(c, s, pos[t], hd, theta);
        for (int b = 0; b < B; b++)
            rotate_row(ptdp_at(x, b * T + t, col0), heads, hd, c, s, sign);
    }
}

void ptdp_rope_forward(ptdp_tensor x, int col0, int heads, int hd, const int64_t *pos, int T, double theta)
{
    rope_apply("rope forward", x, col0, heads, hd, pos, T, theta, 1);
}

/* The transpose of the rotation: the rotation by −a. */
void ptdp_rope_backward(ptdp_tensor dx, int col0, int heads, int hd, const int64_t *pos, int T, double theta)
{
    rope_apply("rope backward", dx, col0, heads, hd, pos, T, theta, -1);
}

/* Per pair: four products and two sums, 3 per element (the cos and sin,
 * once per position and pair, are not counted: a table on a GPU). */
double ptdp_rope_flops(size_t rows, int heads, int hd)
{
    return 3.0 * (double)rows * heads * hd;
}
