/*
 * test_gpt_moe.c — the router of a mixture of experts on hand-made numbers
 * (gpt.h: ptdp_moe_route): top-k with ties to the lower index, gates as the
 * softmax over the chosen k, capacity in position order, the balance loss;
 * and its backward against finite differences.
 *
 *   one sequence of T = 4 tokens, E = 3 experts, k = 2:
 *     token  logits      chosen   kept with ceil(0.75 x 2 x 4 / 3) = 2 slots
 *     0      1  1  0     0, 1     both
 *     1      0  2  2     1, 2     both
 *     2      3  0  1     0, 2     both
 *     3      0  5  1     1, 2     neither: experts 1 and 2 are full
 */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "ptdp/gpt.h"

static const harness_tcase moe_tests = { .name = "moe", .timeout_s = 60 };

static const ptdp_real z[4 * 3] = { 1, 1, 0, 0, 2, 2, 3, 0, 1, 0, 5, 1 };

static double softmax_at(const ptdp_real *x, int n, int i)
{
    double s = 0.0;
    for (int j = 0; j < n; j++)
        s += exp((double)x[j]);
    return exp((double)x[i]) / s;
}

TEST(moe_tests, test_ties_go_to_the_lower_expert_and_gates_are_over_the_chosen)
{
    const ptdp_moe_route_shape s = { .T = 4, .E = 3, .k = 2, .capacity = 0, .alpha = 1.0 };
    int choice[8], slot[8], load[3], dropped;
    ptdp_real gate[8], probs[12];
    ptdp_moe_route(&s, 4, z, choice, gate, slot, probs, load, &dropped);
    const int want[8] = { 0, 1, 1, 2, 0, 2, 1, 2 };
    for (int c = 0; c < 8; c++)
        ck_assert_int_eq(choice[c], want[c]);
    ck_assert_double_eq_tol(gate[0], 0.5, 1e-6);                     /* a tie: half each */
    ck_assert_double_eq_tol(gate[4], 1.0 / (1.0 + exp(-2.0)), 1e-6);   /* softmax(3, 1), not over all 3 */
    ck_assert_double_eq_tol(gate[6], 1.0 / (1.0 + exp(-4.0)), 1e-6);
    ck_assert_double_eq_tol(probs[3 * 3 + 1], softmax_at(z + 9, 3, 1), 1e-6);
    ck_assert_int_eq(dropped, 0);   /* dropless: loads 2, 3, 3 */
    ck_assert_int_eq(load[0], 2);
    ck_assert_int_eq(load[1], 3);
    ck_assert_int_eq(load[2], 3);
}
END_TEST

TEST(moe_tests, test_capacity_drops_in_position_order_and_slots_go_expert_by_expert)
{
    const ptdp_moe_route_shape s = { .T = 4, .E = 3, .k = 2, .capacity = 0.75, .alpha = 1.0 };
    int choice[8], slot[8], load[3], dropped;
    ptdp_real gate[8], probs[12];
    ptdp_moe_route(&s, 4, z, choice, gate, slot, probs, load, &dropped);
    /* expert 0: tokens 0, 2 (slots 0, 1); expert 1: 0, 1 (2, 3); expert 2: 1, 2 (4, 5); token 3 dropped */
    const int want[8] = { 0, 2, 3, 4, 1, 5, -1, -1 };
    for (int c = 0; c < 8; c++)
        ck_assert_int_eq(slot[c], want[c]);
    ck_assert_int_eq(dropped, 2);
    ck_assert_int_eq(load[0] + load[1] + load[2], 6);
    ck_assert_double_eq_tol(gate[0], 0.5, 1e-6);   /* the kept gates are not renormalised */
}
END_TEST

/* alpha sum_i f_i P_i, f_i = E/(k T) x choices of i before dropping. */
TEST(moe_tests, test_balance_loss_counts_choices_before_dropping)
{
    const ptdp_moe_route_shape s = { .T = 4, .E = 3, .k = 2, .capacity = 0.75, .alpha = 0.01 };
    int choice[8], slot[8], load[3], dropped;
    ptdp_real gate[8], probs[12];
    double aux = ptdp_moe_route(&s, 4, z, choice, gate, slot, probs, load, &dropped);
    const double count[3] = { 2, 3, 3 };
    double want = 0.0;
    for (int e = 0; e < 3; e++) {
        double P = 0.0;
        for (int t = 0; t < 4; t++)
            P += softmax_at(z + 3 * t, 3, e) / 4.0;
        want += 3.0 / (2.0 * 4.0) * count[e] * P;
    }
    ck_assert_double_eq_tol(aux, 0.01 * want, 1e-7);
    /* two sequences: the sum of each's */
    ptdp_real z2[24];
    int choice2[16], slot2[16];
    ptdp_real gate2[16], probs2[24];
    memcpy(z2, z, sizeof z);
    memcpy(z2 + 12, z, sizeof z);
    ck_assert_double_eq_tol(ptdp_moe_route(&s, 8, z2, choice2, gate2, slot2, probs2, load, &dropped), 0.02 * want,
                            1e-7);
    ck_assert_int_eq(dropped, 4);   /* each sequence has its own slots */
}
END_TEST

/* L = sum_c w_c gate_c over the choices kept + scale aux (f held): dz by
 * route_backward against central differences, on logits without ties —
 * for either router (the shape's score says which). */
static double objective(const ptdp_moe_route_shape *s, const ptdp_real *x, const double *w, double scale)
{
    int choice[8], slot[8], load[3], dropped;
    ptdp_real gate[8], probs[12];
    double aux = ptdp_moe_route(s, 4, x, choice, gate, slot, probs, load, &dropped), sum = 0.0;
    for (int c = 0; c < 8; c++)
        sum += slot[c] >= 0 ? w[c] * gate[c] : 0.0;
    return sum + scale * aux;
}

/* dz against central finite differences of L, (L(x + h) - L(x - h)) / 2h,
 * at each of the 12 logits (in double only to 1e-8; float's quotient is
 * noisy, so 2e-3 with a larger step). */
static void expect_finite_differences(const ptdp_moe_route_shape *s, const ptdp_real x[12], const double *w,
                                      double scale, const ptdp_real dz[12])
{
    const double h = sizeof(ptdp_real) == 8 ? 1e-6 : 1e-2, tol = sizeof(ptdp_real) == 8 ? 1e-8 : 2e-3;
    for (int i = 0; i < 12; i++) {
        ptdp_real up[12], down[12];
        memcpy(up, x, sizeof up);
        memcpy(down, x, sizeof down);
        up[i] += (ptdp_real)h;
        down[i] -= (ptdp_real)h;
        double fd = (objective(s, up, w, scale) - objective(s, down, w, scale)) / (2 * h);
        ck_assert_msg(fabs(fd - dz[i]) <= tol, "dz[%d] = %g, finite differences %g", i, (double)dz[i], fd);
    }
}


TEST(moe_tests, test_backward_matches_finite_differences)
{
    const ptdp_moe_route_shape s = { .T = 4, .E = 3, .k = 2, .capacity = 0.75, .alpha = 0.3 };
    ptdp_real x[12] = { 1.0, 0.7, -0.2, 0.1, 1.9, 2.3, 2.8, 0.2, 1.1, -0.4, 1.6, 0.9 };
    const double w[8] = { 0.3, -1.2, 0.8, 0.5, -0.7, 1.4, 0.0, 0.0 }, scale = 0.5;
    int choice[8], slot[8], load[3], dropped;
    ptdp_real gate[8], probs[12], dz[12], dgate[8];
    ptdp_moe_route(&s, 4, x, choice, gate, slot, probs, load, &dropped);
    for (int c = 0; c < 8; c++)   /* a dropped choice's output carries no gradient */
        dgate[c] = slot[c] >= 0 ? (ptdp_real)w[c] : 0;
    for (int c = 0; c < 8; c++)
        ck_assert_msg(slot[c] >= 0 || w[c] == 0.0, "the weights ignore dropped choices");
    ptdp_moe_route_backward(&s, 4, choice, gate, probs, dgate, scale, dz);
    expect_finite_differences(&s, x, w, scale, dz);
}
END_TEST

/* A sequence cut over two CP ranks (positions 0-1 and 2-3): each rank's
 * statistics, summed, are the whole sequence's; the balance loss from
 * them is the loss of the whole; and each half's backward with the summed
 * counts is the whole's backward, row for row. */
TEST(moe_tests, test_a_sequence_split_in_two_routes_like_the_whole)
{
    const ptdp_moe_route_shape whole = { .T = 4, .E = 3, .k = 2, .alpha = 0.3 }, half = { .T = 2, .E = 3, .k = 2,
                                                                                          .alpha = 0.3 };
    const ptdp_real x[12] = { 1.0, 0.7, -0.2, 0.1, 1.9, 2.3, 2.8, 0.2, 1.1, -0.4, 1.6, 0.9 };
    const ptdp_real dgate[8] = { 0.3, -1.2, 0.8, 0.5, -0.7, 1.4, 0.2, -0.1 };
    int choice[8], slot[8], load[3], dropped;
    ptdp_real gate[8], probs[12], dz[12];
    const double aux = ptdp_moe_route(&whole, 4, x, choice, gate, slot, probs, load, &dropped);
    ptdp_moe_route_backward(&whole, 4, choice, gate, probs, dgate, 0.5, dz);
    double counts[3] = { 0 }, psum[3] = { 0 };
    for (int r = 0; r < 2; r++) {   /* rank r's rows: positions 2r, 2r + 1 */
        int hc[4], hs[4], hl[3], hd;
        ptdp_real hg[4], hp[6];
        double c[3], p[3];
        ptdp_moe_route(&half, 2, x + 6 * r, hc, hg, hs, hp, hl, &hd);
        ptdp_moe_sequence_stats(&half, 2, hc, hp, c, p);
        for (int e = 0; e < 3; e++) {
            counts[e] += c[e];
            psum[e] += p[e];
        }
    }
    ck_assert_double_eq_tol(ptdp_moe_balance(&whole, 1, 4, counts, psum), aux, 1e-6 * aux);
    for (int r = 0; r < 2; r++) {
        int hc[4], hs[4], hl[3], hd;
        ptdp_real hg[4], hp[6], hz[6];
        ptdp_moe_route(&half, 2, x + 6 * r, hc, hg, hs, hp, hl, &hd);
        ptdp_moe_route_backward_whole(&half, 2, hc, hg, hp, dgate + 4 * r, 0.5, 4, counts, hz);
        for (int i = 0; i < 6; i++)
            ck_assert_msg(fabs(hz[i] - dz[6 * r + i]) <= 1e-6 * (1 + fabs(dz[6 * r + i])),
                          "rank %d dz[%d] = %g, the whole sequence's %g", r, i, (double)hz[i], (double)dz[6 * r + i]);
    }
}
END_TEST

/* DeepSeek-V3's router (moe_route.h, score sigmoid): the file's example —
 * z = [0, 2, 1, 1], b = [0.9, 0, 0, 0], k = 2 chooses experts 0 and 1 on
 * s + b (the bias makes expert 0 win), the gates are the chosen s over
 * their sum, times the route scale; the bias never enters a gate. */
TEST(moe_tests, test_sigmoid_chooses_on_s_plus_b_and_gates_on_s)
{
    const ptdp_real z[4] = { 0.0, 2.0, 1.0, 1.0 }, b[4] = { 0.9, 0, 0, 0 };
    const ptdp_moe_route_shape s = { .T = 1, .E = 4, .k = 2, .alpha = 0.0, .score = PTDP_MOE_SIGMOID,
                                     .route_scale = 2.5, .bias = b };
    int choice[2], slot[2], load[4], dropped;
    ptdp_real gate[2], probs[4];
    ptdp_moe_route(&s, 1, z, choice, gate, slot, probs, load, &dropped);
    ck_assert_int_eq(choice[0], 0);
    ck_assert_int_eq(choice[1], 1);
    const double s0 = 0.5, s1 = 1 / (1 + exp(-2.0));
    ck_assert_double_eq_tol(probs[1], s1, 1e-6);
    ck_assert_double_eq_tol(gate[0], 2.5 * s0 / (s0 + s1), 1e-6);
    ck_assert_double_eq_tol(gate[1], 2.5 * s1 / (s0 + s1), 1e-6);
    /* without the bias: experts 1, then 2 before its tie 3 (the lower index) */
    const ptdp_moe_route_shape nb = { .T = 1, .E = 4, .k = 2, .score = PTDP_MOE_SIGMOID };
    ptdp_moe_route(&nb, 1, z, choice, gate, slot, probs, load, &dropped);
    ck_assert_int_eq(choice[0], 1);
    ck_assert_int_eq(choice[1], 2);
    ck_assert_double_eq_tol(gate[0] + gate[1], 1.0, 1e-6);   /* route scale 0 reads 1 */
}
END_TEST

/* The sequence-wise balance loss under sigmoid: P_i = the mean over the
 * sequence of s_i / sum_e s_e, f_i as softmax's. */
TEST(moe_tests, test_sigmoid_balance_loss_normalises_each_token)
{
    const ptdp_real z[6] = { 0.3, -1.0, 2.0, 1.0, 0.0, -0.5 };
    const ptdp_moe_route_shape s = { .T = 2, .E = 3, .k = 1, .alpha = 0.7, .score = PTDP_MOE_SIGMOID };
    int choice[2], slot[2], load[3], dropped;
    ptdp_real gate[2], probs[6];
    const double aux = ptdp_moe_route(&s, 2, z, choice, gate, slot, probs, load, &dropped);
    double P[3] = { 0 }, f[3] = { 0 }, want = 0;
    for (int t = 0; t < 2; t++) {
        double q = 0;
        for (int e = 0; e < 3; e++)
            q += 1 / (1 + exp(-z[3 * t + e]));
        for (int e = 0; e < 3; e++)
            P[e] += 1 / (1 + exp(-z[3 * t + e])) / q / 2;
        f[choice[t]] += 3.0 / (1 * 2);
    }
    for (int e = 0; e < 3; e++)
        want += 0.7 * f[e] * P[e];
    ck_assert_int_eq(choice[0], 2);
    ck_assert_int_eq(choice[1], 0);
    ck_assert_double_eq_tol(aux, want, 1e-6);
}
END_TEST

/* The sigmoid router's backward against central differences: the
 * normalised gates (with a route scale), the balance loss, a capacity, a
 * bias that changes the choices (and has no gradient of its own). */
TEST(moe_tests, test_sigmoid_backward_matches_finite_differences)
{
    const ptdp_real b[3] = { 0.0, 0.4, -0.3 };
    const ptdp_moe_route_shape s = { .T = 4, .E = 3, .k = 2, .capacity = 0.75, .alpha = 0.3,
                                     .score = PTDP_MOE_SIGMOID, .route_scale = 1.7, .bias = b };
    ptdp_real x[12] = { 1.0, 0.7, -0.2, 0.1, 1.9, 2.3, 2.8, 0.2, 1.1, -0.4, 1.6, 0.9 };
    const double w[8] = { 0.3, -1.2, 0.8, 0.5, -0.7, 1.4, 0.6, -0.9 }, scale = 0.5;
    int choice[8], slot[8], load[3], dropped;
    ptdp_real gate[8], probs[12], dz[12], dgate[8];
    ptdp_moe_route(&s, 4, x, choice, gate, slot, probs, load, &dropped);
    for (int c = 0; c < 8; c++)
        dgate[c] = slot[c] >= 0 ? (ptdp_real)w[c] : 0;
    ptdp_moe_route_backward(&s, 4, choice, gate, probs, dgate, scale, dz);
    expect_finite_differences(&s, x, w, scale, dz);
}
END_TEST

int main(void)
{
    return harness_main("gpt-moe");
}
